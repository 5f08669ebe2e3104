"""`kfs mount` / `kfs umount` / `kfs LOGDIR MOUNTPOINT -o OPTS` / `mount -t fuse.kfs`, as a user runs them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import GOLDEN, LOGDIRS, read_jsonl
from mounts import needs_fuse

pytestmark = needs_fuse


def kfs(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    command = [shutil.which("kfs")] if shutil.which("kfs") else [sys.executable, "-m", "kfs.cli.main"]
    return subprocess.run([*command, *args], capture_output=True, timeout=timeout, text=True)


def _mount_options(mountpoint: Path) -> str:
    for line in Path("/proc/mounts").read_text().splitlines():
        fields = line.split()
        if fields[1] == str(mountpoint):
            return fields[2] + " " + fields[3]
    return ""


def test_mount_returns_with_captured_output_and_umount_cleans_up(tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    done = kfs("mount", "-o", f"log={tmp_path / 'log'}", *LOGDIRS, str(mnt))  # like out=$(kfs mount ...)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    try:
        assert os.path.ismount(mnt)  # usable on the next line
        assert "fuse.kfs ro," in _mount_options(mnt)
        assert len((mnt / "orders-0" / "messages.jsonl").read_bytes()) > 0
    finally:
        done = kfs("umount", str(mnt))
    assert done.returncode == 0, done.stderr
    assert not os.path.ismount(mnt)
    again = kfs("umount", str(mnt))
    assert again.returncode != 0
    assert again.stderr.count("\n") == 1 and "Traceback" not in again.stderr and "not mounted" in again.stderr


def test_errors_are_one_sentence(tmp_path: Path) -> None:
    (tmp_path / "mnt").mkdir()
    cases = [
        ("mount", str(tmp_path / "nope"), str(tmp_path / "mnt")),
        ("mount", LOGDIRS[0], str(tmp_path / "missing-mountpoint")),
        ("mount", "-o", "isolation=serializable", LOGDIRS[0], str(tmp_path / "mnt")),
    ]
    for args in cases:
        done = kfs(*args)
        assert done.returncode != 0, args
        assert done.stderr.startswith("kfs: ") and done.stderr.count("\n") == 1, done.stderr
        assert "Traceback" not in done.stderr


def test_mount_helper_form_with_options(tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    log = tmp_path / "log"
    done = kfs(LOGDIRS[1], str(mnt), "-o", f"rw,dev,suid,allow_other,isolation=read_committed,log={log}")
    assert done.returncode == 0, done.stderr
    try:
        options = _mount_options(mnt)
        assert "allow_other" in options and "default_permissions" in options and " ro," in options
        lines = [json.loads(x) for x in (mnt / "payments-0" / "messages.jsonl").read_bytes().splitlines()]
        assert lines == read_jsonl(GOLDEN / "payments-0" / "records.read_committed.jsonl")
    finally:
        kfs("umount", str(mnt))
    assert log.exists()


def test_foreground_mount_stays_until_unmounted(tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    command = [shutil.which("kfs")] if shutil.which("kfs") else [sys.executable, "-m", "kfs.cli.main"]
    process = subprocess.Popen([*command, "mount", "-f", "-o", f"log={tmp_path / 'log'}", LOGDIRS[0], str(mnt)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        for _ in range(200):
            if os.path.ismount(mnt):
                break
            time.sleep(0.05)
        assert os.path.ismount(mnt)
        assert process.poll() is None
        assert sorted(os.listdir(mnt))[:2] == ["audit.events-v2-3", "legacy-0"]
    finally:
        subprocess.run(["fusermount3", "-u", str(mnt)], check=False)
    assert process.wait(timeout=20) == 0


def _kfs_on_default_path() -> bool:
    """mount(8) runs helpers with no PATH, so /bin/sh's default PATH must find a `kfs` that runs (a
    link left to a deleted virtual environment's `kfs` is found, and fails)."""
    return subprocess.run(["env", "-i", "/bin/sh", "-c", "kfs --help"], capture_output=True).returncode == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="mount -t needs root")
def test_mount_t_fuse_kfs(tmp_path: Path) -> None:
    if not _kfs_on_default_path():
        pytest.skip("no working kfs on the default PATH (e.g. ln -sf $(which kfs) /usr/local/bin/kfs)")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "fuse.kfs", "-o", f"allow_other,log={tmp_path / 'log'}", LOGDIRS[0],
                           str(mnt)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    try:
        assert "fuse.kfs" in _mount_options(mnt)
        assert "orders-0" in os.listdir(mnt)
    finally:
        assert subprocess.run(["umount", str(mnt)], timeout=30).returncode == 0
    assert not os.path.ismount(mnt)
