"""What a task does with its piece of the plan: open exactly the partition the driver planned on.

The driver plans from the log dirs it sees; a task may run on another host (a Spark executor), and
the Python Data Source API gives it no say in where (an `InputPartition` has no preferred
locations). So every task checks that what it was planned for is there: the same log dir path,
the same partition directory in it, and the planned offsets still inside the log. When they are
not, it fails with `PlannedDataMissing`, naming the path and the host, rather than reading another
copy, another replica of the same name, or fewer records (a short answer is a wrong answer).
"""

from __future__ import annotations

import os
import socket

from kfs.spark.plan import Piece
from kfs.storage import KfsError, LogDirs, PartitionLog

SAME_PATH = ("every worker must see the log dirs at the driver's path: a shared filesystem, "
             "or the same copy on each host (docs/spark.md)")


class PlannedDataMissing(KfsError):
    """The data a task was planned for is not on the host running it (or no longer all of it)."""


def missing_here(path: str, error: KfsError) -> PlannedDataMissing:
    """`path`, which the driver planned with, cannot be read on this host (`error` says why)."""
    return PlannedDataMissing(f"{path}: planned on the driver, not readable on host {socket.gethostname()} "
                              f"({error}); {SAME_PATH}")


class PlannedPartitions:
    """The partitions of one task's pieces, each opened in the log dir it was planned from."""

    def __init__(self) -> None:
        self._dirs: dict[str, LogDirs] = {}
        self._checked: dict[str, tuple[int, int]] = {}

    def open(self, piece: Piece) -> PartitionLog:
        """The planned partition, or `PlannedDataMissing` (path, host, what is missing)."""
        path = os.path.join(piece.log_dir, piece.partition_name)
        try:
            dirs = self._dirs.get(piece.log_dir)
            if dirs is None:
                dirs = self._dirs[piece.log_dir] = LogDirs([piece.log_dir])
            plog = dirs.partition(piece.partition_name)
            if path not in self._checked:
                self._checked[path] = (plog.log_start_offset(), plog.log_end_offset())
        except KfsError as e:
            raise missing_here(path, e) from None
        start, end = self._checked[path]
        if piece.start_offset < start or piece.end_offset > end:
            raise PlannedDataMissing(
                f"{path} on host {socket.gethostname()} holds offsets {start}..{end - 1}, but the task was "
                f"planned to read {piece.start_offset}..{piece.end_offset - 1}: the log changed since planning "
                f"(retention, truncation) or this host holds another copy; {SAME_PATH}")
        return plog
