"""A partition's segments keyed by base offset: Kafka's `LogSegments` over a sorted map.

Kafka keeps a `ConcurrentSkipListMap<Long, LogSegment>`; the Python counterpart is a
`sortedcontainers.SortedDict` (floor/higher in O(log n) by bisecting its sorted keys). The map
follows the directory: segments rolling in are added, deleted ones dropped, on `refresh`.
"""

from __future__ import annotations

import os
import re
import threading

from sortedcontainers import SortedDict

from kfs.storage.segment import LogSegment

# `<20-digit base offset>.log` exactly: `.log.deleted`, `.log.cleaned`, `.log.swap` are not segments.
_SEGMENT_LOG = re.compile(r"^(\d{20})\.log$")


def list_segment_files(directory: str) -> dict[int, int]:
    """base offset -> inode of every `.log` segment (scandir gives inodes without a stat call)."""
    with os.scandir(directory) as entries:
        return {int(m.group(1)): entry.inode() for entry in entries if (m := _SEGMENT_LOG.match(entry.name))}


class LogSegments:
    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._segments: SortedDict = SortedDict()
        self._lock = threading.Lock()

    def refresh(self) -> None:
        """Follow the directory: add segments that rolled in, drop (and close) deleted ones, and
        replace one whose file is a new inode (the log cleaner swapped in a cleaned copy)."""
        found = list_segment_files(self.directory)
        with self._lock:
            for base in [b for b, seg in self._segments.items() if found.get(b) != seg.inode]:
                self._segments.pop(base).retire()
            for base, inode in found.items():
                if base not in self._segments:
                    self._segments[base] = LogSegment(self.directory, base, inode)

    def all(self) -> list[LogSegment]:
        with self._lock:
            return list(self._segments.values())

    def first(self) -> LogSegment | None:
        with self._lock:
            return self._segments.peekitem(0)[1] if self._segments else None

    def last(self) -> LogSegment | None:
        with self._lock:
            return self._segments.peekitem(-1)[1] if self._segments else None

    def floor(self, offset: int) -> LogSegment | None:
        """`floorSegment`: the segment with the largest base offset <= offset."""
        with self._lock:
            i = self._segments.bisect_right(offset)
            return self._segments.peekitem(i - 1)[1] if i else None

    def higher(self, base_offset: int) -> LogSegment | None:
        """`higherSegment`: the segment after the one starting at base_offset."""
        with self._lock:
            i = self._segments.bisect_right(base_offset)
            return self._segments.peekitem(i)[1] if i < len(self._segments) else None

    def is_last(self, segment: LogSegment) -> bool:
        last = self.last()
        return last is not None and last.base_offset == segment.base_offset

    def close(self) -> None:
        with self._lock:
            for segment in self._segments.values():
                segment.close()
            self._segments.clear()
