"""Log dirs (a broker's `log.dirs`): which directories are partitions, and their `PartitionLog`s.

A partition directory is `<topic>-<partition>`: the topic may contain `-`, `.` and `_`, the
partition is the number after the last `-`. Directories the broker is moving or deleting
(`-delete`, `-future`, `-stray` suffixes after a `.<uuid>`) end in a word, not a number, so
they are not partitions of this log dir.
"""

from __future__ import annotations

import os
import re
import threading

from kfs.storage.checkpoints import CheckpointReader
from kfs.storage.errors import KfsError, UnknownPartition
from kfs.storage.partition import PartitionLog

_PARTITION_DIR = re.compile(r"^([A-Za-z0-9._-]+)-([0-9]+)$")


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """('orders', 0) for 'orders-0'; None for anything that is not a partition directory."""
    m = _PARTITION_DIR.match(name)
    return (m.group(1), int(m.group(2))) if m else None


class LogDirs:
    """One or several log dirs seen as one broker's partitions. Nothing is opened until asked."""

    def __init__(self, paths: list[str]) -> None:
        for path in paths:
            if not os.path.isdir(path):
                raise KfsError(f"{path} is not a directory (expected a Kafka log dir)")
        self.paths = [os.path.abspath(p) for p in paths]
        self._checkpoints = {p: CheckpointReader(p) for p in self.paths}
        self._partitions: dict[str, PartitionLog] = {}
        self._lock = threading.Lock()

    def _scan(self) -> dict[str, tuple[str, str, int]]:
        """name -> (log dir, topic, partition); the first log dir holding a name wins."""
        found: dict[str, tuple[str, str, int]] = {}
        for logdir in self.paths:
            try:
                entries = os.scandir(logdir)
            except OSError:
                continue
            with entries:
                for entry in entries:
                    parsed = parse_partition_dir(entry.name)
                    if parsed and entry.name not in found and entry.is_dir():
                        found[entry.name] = (logdir, *parsed)
        return found

    def partition_names(self) -> list[str]:
        return sorted(self._scan())

    def partition(self, name: str) -> PartitionLog:
        with self._lock:
            cached = self._partitions.get(name)
            if cached is not None and os.path.isdir(cached.path):
                return cached
            parsed = parse_partition_dir(name)
            if parsed is not None:
                for logdir in self.paths:
                    path = os.path.join(logdir, name)
                    if os.path.isdir(path):
                        plog = PartitionLog(path, parsed[0], parsed[1], self._checkpoints[logdir])
                        self._partitions[name] = plog
                        return plog
            if cached is not None:
                del self._partitions[name]
                cached.close()
        raise UnknownPartition(f"no partition {name} in {', '.join(self.paths)}")

    def close(self) -> None:
        with self._lock:
            for plog in self._partitions.values():
                plog.close()
            self._partitions.clear()
