"""The mount's readahead window (kfs.fuse.readahead): raised to 1 MiB through sysfs when the daemon
may (root), left alone with `readahead=0`, and what was done is in the daemon log; a bad value
is one sentence."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from mounts import mounted, needs_fuse

from kfs.fuse.mount import MountError, mount
from kfs.fuse.readahead import bdi_path

pytestmark = needs_fuse


def _window(mountpoint: Path) -> int:
    path = bdi_path(str(mountpoint))
    assert path is not None
    deadline = time.monotonic() + 5
    while True:  # the daemon sets it from a thread once mounted
        kib = int(Path(path).read_text())
        if kib != 128 or time.monotonic() > deadline:
            return kib
        time.sleep(0.05)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root may set a bdi's read_ahead_kb")
def test_the_window_is_widened_and_reads_are_the_same(tmp_path: Path) -> None:
    with mounted(tmp_path, name="wide") as wide:
        assert _window(wide) == 1024
        wide_bytes = [(p.name, (p / "messages.jsonl").read_bytes()) for p in sorted(wide.iterdir())
                      if (p / "messages.jsonl").exists()]
    with mounted(tmp_path, name="kernel", readahead="0") as kernel:
        time.sleep(0.3)
        assert _window(kernel) == 128
        kernel_bytes = [(p.name, (p / "messages.jsonl").read_bytes()) for p in sorted(kernel.iterdir())
                        if (p / "messages.jsonl").exists()]
    assert wide_bytes == kernel_bytes and wide_bytes
    assert "readahead window 1024 KiB (was 128 KiB)" in (tmp_path / "wide.log").read_text()


def test_a_bad_window_is_one_sentence(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    with pytest.raises(MountError, match="readahead must be a size in KiB"):
        mount([str(Path(__file__).parent / "fixtures" / "kafka-written" / "logdirs" / "broker-a")],
              str(tmp_path / "m"), {"readahead": "lots"})
