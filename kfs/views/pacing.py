"""Foreground first: the background size scan gives way while readers are being served.

The mount maps every partition's decoded sizes in one background thread (kfs.fuse.size_scan), so
that `tail`, `less +G` and `rsync` find them known. On a fresh mount a user's first `cat` or `grep`
runs at the same time, and the scan's counting competed with it for the GIL and the cores: the
reader waited on work it had not asked for. So decoded reads mark the mount busy, and the scan
pauses between batches while a read was served in the last `IDLE_AFTER` seconds (or a long
foreground computation is under way: `working`), unless a
foreground request waits for the very run the scan is mapping (then finishing it is what the
foreground wants).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kfs.views.runs import SegmentRun

IDLE_AFTER = 0.25  # seconds without a decoded read before the scan goes on
NAP = 0.05  # the scan's sleep while the mount is busy


class Foreground:
    """When the mount last served a decoded read, and a pause for the background work to take."""

    def __init__(self) -> None:
        self.last_read = -IDLE_AFTER
        self.paused_seconds = 0.0
        self.holding = 0  # foreground work under way that is not reads (working())
        self._lock = threading.Lock()

    def touch(self) -> None:
        """A decoded read was served now (one float store: no lock on the hot path)."""
        self.last_read = time.monotonic()

    @contextlib.contextmanager
    def working(self) -> Iterator[None]:
        """The mount is busy for as long as this lasts: one long foreground computation (the first
        replay of `__consumer_offsets` for `ls MOUNTPOINT/.groups`) has the cores to itself."""
        with self._lock:
            self.holding += 1
        try:
            yield
        finally:
            with self._lock:
                self.holding -= 1
            self.touch()

    def busy(self) -> bool:
        return self.holding > 0 or time.monotonic() - self.last_read < IDLE_AFTER

    def give_way(self, run: SegmentRun, stop: threading.Event | None = None) -> None:
        """Sleep while the mount is busy; return at once when `stop` is set, or when a foreground
        request waits to map `run` (the caller holds its mapping lock)."""
        began = None
        while self.busy() and run.waiters == 0 and not (stop is not None and stop.is_set()):
            if began is None:
                began = time.monotonic()
            time.sleep(NAP)
        if began is not None:
            self.paused_seconds += time.monotonic() - began
