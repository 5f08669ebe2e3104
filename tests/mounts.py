"""Real mounts for the FUSE tests: mount into tmp_path, unmount at teardown, fail on daemon errors.

Import the fixtures into a test module (`from mounts import kfs_mount, mount_kfs`); the
mounts are real (`kfs.fuse.mount.mount`, a detached daemon), so the tests exercise exactly
what `kfs mount` does. Skipped where /dev/fuse or libfuse is missing.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import GOLDEN, LOGDIRS

needs_fuse = pytest.mark.skipif(not os.path.exists("/dev/fuse") or not shutil.which("fusermount3"),
                                reason="needs /dev/fuse and fusermount3")


def daemon_errors(log_path: Path) -> list[str]:
    if not log_path.exists():
        return []
    text = log_path.read_text(errors="replace")
    return [line for line in text.splitlines()
            if " ERROR " in line or " CRITICAL " in line or "Traceback" in line]


@contextmanager
def mounted(tmp_path: Path, logdirs: list[str] | None = None, expect_errors: bool = False,
            name: str = "mnt", **options: object) -> Iterator[Path]:
    """A kfs mount of `logdirs` (the Kafka-written fixtures by default) with `options`.

    The Kafka-written fixtures' golden lines are docs/spec.md section 3's bytes, and their
    `__cluster_metadata-0` holds random values, not metadata records: they are mounted with
    `decode=raw` unless a test asks otherwise (tests/test_internal_topics.py mounts decoded)."""
    from kfs.fuse.mount import mount, unmount

    if logdirs is None:
        options.setdefault("decode", "raw")

    mountpoint = tmp_path / name
    mountpoint.mkdir()
    log_path = tmp_path / f"{name}.log"
    mount(list(logdirs or LOGDIRS), str(mountpoint), {"log": str(log_path), **options})
    try:
        yield mountpoint
    finally:
        for attempt in range(50):
            try:
                unmount(str(mountpoint))
                break
            except Exception:
                if attempt == 49:
                    subprocess.run(["fusermount3", "-uz", str(mountpoint)], check=False)
                time.sleep(0.1)
    errors = daemon_errors(log_path)
    if not expect_errors and errors:
        pytest.fail("the daemon logged errors:\n" + "\n".join(errors[:20]))


@pytest.fixture(scope="module")
def kfs_mount(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The fixtures mounted with default options, shared by a module."""
    with mounted(tmp_path_factory.mktemp("kfs")) as mountpoint:
        yield mountpoint


def golden_value(value: object) -> bytes:
    """The bytes a `.value` file holds for a golden record's `value`."""
    if value is None:
        return b""
    if isinstance(value, dict):
        return base64.b64decode(value["base64"])
    return str(value).encode("utf-8")


def golden_lines(partition: str, name: str = "records.jsonl") -> list[bytes]:
    return (GOLDEN / partition / name).read_bytes().splitlines(keepends=True)
