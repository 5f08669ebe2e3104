"""A partition's segments keyed by base offset: Kafka's `LogSegments` over a sorted map.

Kafka keeps a `ConcurrentSkipListMap<Long, LogSegment>`; the Python counterpart is a
`sortedcontainers.SortedDict`. The map follows the directory: segments rolling in are added,
deleted ones dropped, on `refresh`. Lookups (floor, higher, first, last: several per `.value`) read
an immutable snapshot of it, its sorted base offsets and segments, made whenever it changes, and
bisect the offsets with the standard library's compiled `bisect`, without the lock: a reader sees
the listing before a change or after it, whole (as a reader of Kafka's map does).
"""

from __future__ import annotations

import os
import re
import threading
from bisect import bisect_right

from sortedcontainers import SortedDict

from kfs.storage.errors import CorruptLogError, VanishedError
from kfs.storage.files import NotARegularFile, entry_refusal
from kfs.storage.segment import LogSegment

# `<20-digit base offset>.log`, or `.log.swap`: a cleaned segment between the old files' removal and
# its rename to `.log` (Kafka's LocalLog.replaceSegments), which Kafka's LogLoader takes for the segment
# (recovery completes the swap). `.log.deleted` and `.log.cleaned` are not segments.
_SEGMENT_LOG = re.compile(r"^(\d{20})\.log(\.swap)?$")
SWAP_SUFFIX = ".swap"


def list_segment_files(directory: str) -> dict[int, tuple[int, str, NotARegularFile | None]]:
    """base offset -> (inode, suffix: "" or ".swap", refusal) of every segment's `.log` (scandir gives
    inodes and entry types without a stat call); a `.log` wins over a `.log.swap` (the swap has not
    replaced it yet). `refusal`: the entry is not a regular file (a FIFO, a directory, a symbolic
    link, a device: kfs.storage.files), noticed without opening it; it is still a segment of the
    listing, damaged at its first byte, so the log ends there with an error instead of going on
    silently past the records it should hold."""
    found: dict[int, tuple[int, str, NotARegularFile | None]] = {}
    with os.scandir(directory) as entries:
        for entry in entries:
            m = _SEGMENT_LOG.match(entry.name)
            if m is not None:
                base, suffix = int(m.group(1)), m.group(2) or ""
                if suffix == "" or base not in found:
                    try:
                        refused = entry_refusal(entry)
                    except FileNotFoundError:
                        continue  # deleted since the directory was read
                    found[base] = (entry.inode(), suffix, refused)
    return found


class LogSegments:
    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._segments: SortedDict = SortedDict()
        self._lock = threading.Lock()
        self.generation = 0  # counts the listings that changed (a segment added, deleted or replaced)
        # (base offsets, segments) of the map as it is, replaced whole when it changes.
        self._snapshot: tuple[list[int], list[LogSegment]] = ([], [])
        self._covered: frozenset[int] = frozenset()  # listed segments a `.swap` replaces: not in the snapshot

    def refresh(self) -> None:
        """Follow the directory: add segments that rolled in, drop (and close) deleted ones, and
        replace one whose file is a new inode (the log cleaner swapped in a cleaned copy). A
        cleaned segment is the segment from when it is `.log.swap` (the old `.log` already gone)
        until it is renamed to `.log`: the same file, so the same segment object, whose name
        follows it; its name never vanishes during a swap."""
        found = list_segment_files(self.directory)
        with self._lock:
            generation = self.generation
            for base in [b for b, seg in self._segments.items() if found.get(b, (None,))[0] != seg.inode]:
                self._segments.pop(base).retire()
                self.generation += 1
            for base, (inode, suffix, refused) in found.items():
                segment = self._segments.get(base)
                if segment is None:
                    self._segments[base] = LogSegment(self.directory, base, inode, suffix=suffix, refused=refused)
                    self.generation += 1
                elif segment.suffix != suffix:
                    segment.renamed(suffix)
            covered = self._covered_by_swaps()
            if covered != self._covered:
                self._covered = covered
                self.generation += 1
            if self.generation != generation:  # (a rename keeps the segment object: the snapshot holds)
                listed = [(b, s) for b, s in self._segments.items() if b not in covered]
                self._snapshot = ([b for b, _ in listed], [s for _, s in listed])

    def _covered_by_swaps(self) -> frozenset[int]:
        """The base offsets of segments a `.swap` segment replaces: those after it whose base offset is
        below its next offset. The cleaner merges several segments into one (LogCleaner groups them):
        LocalLog.replaceSegments renames the cleaned files to `.swap`, the old segments' to `.deleted`
        one segment after the other, then drops the `.swap` suffix, so a listing may hold the `.swap`
        and old segments whose offsets it holds too. Kafka's LogLoader, finding them so, deletes the
        old ones; a reader here takes the `.swap` for them (read at their offsets, they would be
        records at two places, the `.swap`'s batches past the next segment's base offset damage)."""
        covered: set[int] = set()
        for base, segment in self._segments.items():
            if segment.suffix != SWAP_SUFFIX or base in covered:
                continue
            try:
                end = segment.next_offset()
            except (CorruptLogError, VanishedError):
                continue  # (its reads say what is wrong)
            covered.update(self._segments.irange(base, end, inclusive=(False, False)))
        return frozenset(covered)

    def all(self) -> list[LogSegment]:
        return list(self._snapshot[1])

    def first(self) -> LogSegment | None:
        segments = self._snapshot[1]
        return segments[0] if segments else None

    def last(self) -> LogSegment | None:
        segments = self._snapshot[1]
        return segments[-1] if segments else None

    def floor(self, offset: int) -> LogSegment | None:
        """`floorSegment`: the segment with the largest base offset <= offset."""
        bases, segments = self._snapshot
        i = bisect_right(bases, offset)
        return segments[i - 1] if i else None

    def higher(self, base_offset: int) -> LogSegment | None:
        """`higherSegment`: the segment after the one starting at base_offset."""
        bases, segments = self._snapshot
        i = bisect_right(bases, base_offset)
        return segments[i] if i < len(segments) else None

    def is_last(self, segment: LogSegment) -> bool:
        last = self.last()
        return last is not None and last.base_offset == segment.base_offset

    def close(self) -> None:
        with self._lock:
            for segment in self._segments.values():
                segment.close()
            self._segments.clear()
            self._snapshot = ([], [])
            self._covered = frozenset()
