"""A log dir's `log-start-offset-checkpoint`: where DeleteRecords moved each partition's log start."""

from __future__ import annotations

import os
import threading


class CheckpointReader:
    """A log dir's `log-start-offset-checkpoint` (OffsetCheckpointFile), re-read when it changes.

        0                      version
        N                      number of entries
        <topic> <partition> <offset>   N lines
    """

    def __init__(self, logdir: str) -> None:
        self.path = os.path.join(logdir, "log-start-offset-checkpoint")
        self._stamp: tuple[int, int] | None = None
        self._offsets: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()

    def log_start_offset(self, topic: str, partition: int) -> int | None:
        with self._lock:
            try:
                st = os.stat(self.path)
            except OSError:
                self._stamp, self._offsets = None, {}
                return None
            stamp = (st.st_mtime_ns, st.st_size)
            if stamp != self._stamp:
                self._offsets = _parse_checkpoint(self.path)
                self._stamp = stamp
            return self._offsets.get((topic, partition))


def _parse_checkpoint(path: str) -> dict[tuple[str, int], int]:
    offsets: dict[tuple[str, int], int] = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return offsets
    for line in lines[2:]:
        parts = line.split()
        if len(parts) == 3 and parts[1].isdigit() and parts[2].lstrip("-").isdigit():
            offsets[(parts[0], int(parts[1]))] = int(parts[2])
    return offsets

