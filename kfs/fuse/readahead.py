"""The mount's readahead window: 1 MiB instead of the kernel's 128 KiB, where the daemon may set it.

A first read of a decoded file is rendered while the reader waits: with the kernel's default
window (128 KiB for a FUSE mount: its bdi's read_ahead_kb), `cat` asks for 256 KiB, the kernel
sends one request and waits for it, the daemon renders it, and only then does the next one go:
the daemon and the reader take turns on two cores. With a 1 MiB window the kernel sends the next
requests while the reader copies the last, and a first `cat messages.jsonl` went from 1.22 s to
0.9 s (478 MiB of lines, sized mount; benchmarks/bench_kafka.py). libfuse can only lower the window
(FUSE_INIT's max_readahead is capped by the kernel's offer), so the daemon raises it through
sysfs once mounted, which needs root; otherwise the kernel's window stays, and the daemon log
says so. `-o readahead=KIB` sets another size (0: leave the kernel's).
"""

from __future__ import annotations

import logging
import os
import threading
import time

log = logging.getLogger("kfs")

DEFAULT_KIB = 1024
MOUNT_WAIT = 10.0  # seconds to wait for the mount to show before giving up


def bdi_path(mountpoint: str) -> str | None:
    """/sys/class/bdi/<major>:<minor>/read_ahead_kb of the filesystem mounted at `mountpoint`, once
    it is mounted (its device differs from its parent directory's), else None."""
    st, parent = os.stat(mountpoint), os.stat(os.path.dirname(mountpoint.rstrip("/")) or "/")
    if st.st_dev == parent.st_dev:
        return None
    return f"/sys/class/bdi/{os.major(st.st_dev)}:{os.minor(st.st_dev)}/read_ahead_kb"


def widen(mountpoint: str, kib: int) -> None:
    """Raise the mount's readahead window to `kib` (never lower it); says in the log what it did."""
    deadline = time.monotonic() + MOUNT_WAIT
    path = None
    while path is None and time.monotonic() < deadline:
        try:
            path = bdi_path(mountpoint)
        except OSError as e:
            log.info("readahead window left as the kernel set it: %s", e)
            return
        if path is None:
            time.sleep(0.02)
    if path is None:
        log.info("readahead window left as the kernel set it: the mount did not show within %.0f s", MOUNT_WAIT)
        return
    try:
        with open(path) as f:
            was = int(f.read().strip() or 0)
        if was >= kib:
            log.info("readahead window %d KiB (the kernel's)", was)
            return
        with open(path, "w") as f:
            f.write(str(kib))
        log.info("readahead window %d KiB (was %d KiB)", kib, was)
    except (OSError, ValueError) as e:
        log.info("readahead window left as the kernel set it (%s): first reads of decoded files are slower", e)


def start_widening(mountpoint: str, kib: int) -> None:
    """`widen` in a thread: the mount shows only once the daemon's loop answers (from init on)."""
    if kib > 0:
        threading.Thread(target=widen, args=(mountpoint, kib), name="kfs-readahead", daemon=True).start()
