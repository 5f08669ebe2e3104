"""Kafka's sparse segment indexes, read-only and memory-mapped: `.index` and `.timeindex`.

Follows `AbstractIndex`, `OffsetIndex` and `TimeIndex` (storage/.../internals/log/): this module
owns the mmap, the entry count and the one binary search; the two index kinds only say how big an
entry is and how to parse it.

    .index      entry = relative offset int32 | position int32          (8 bytes, big-endian)
    .timeindex  entry = timestamp int64       | relative offset int32   (12 bytes, big-endian)

A live broker preallocates both files (10 MiB by default) and fills them from the front, so the
entries end where the zero tail begins. Kafka keeps that count in memory; we find it from the file:
a closed (trimmed) index ends on a real entry; a preallocated one is sparse (Kafka sizes it with
`RandomAccessFile.setLength`, so its zero tail is a hole on ext4, xfs, btrfs, tmpfs), and
`SEEK_HOLE` says where the written part ends without reading a page: the count is then found in
the last written page. A file without a hole there (copied without holes, or a file system
without SEEK_HOLE) is searched for its first all-zero entry instead. Later refreshes only look
past the last count, so a growing index costs a look at its tail.

Opened only as a regular file (kfs.storage.files): an index that is a FIFO, a directory, a symbolic
link or a device is `UnusableIndex` (the log is scanned instead) and is never opened.

The file may be truncated under us (the broker trims an index when it rolls the segment, or on
log truncation): touching a page of a mapping past the end of its file raises SIGBUS and would
kill the daemon, so every search first checks the file is still as long as the entries it reads.
"""

from __future__ import annotations

import mmap
import os
import struct
import threading
from collections.abc import Callable

from kfs._native.storage import index_slot as _index_slot
from kfs.storage.files import NotARegularFile, open_regular, refusal
from kfs.storage.open_files import OPEN_FILES

# Kafka's AbstractIndex.warmEntries(): the last 8 KiB of an index are the "warm" section.
WARM_SECTION_BYTES = 8192
# Targets and base offsets the compiled search (index_slot, kfs/_native/csrc/storage/index_search.c) takes:
# int64, with room for a relative offset on either side; the Python search takes any other.
_SEARCHABLE_LOW, _SEARCHABLE_HIGH = -(2**63) + 2**31, 2**63 - 1 - 2**31

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


def _written_end(fd: int, size: int) -> int:
    """Where the file's trailing hole begins (the end of its written part), or its size when the
    file has no hole before its end or the file system cannot say (SEEK_HOLE then answers the size)."""
    try:
        return min(os.lseek(fd, 0, os.SEEK_HOLE), size)
    except (OSError, AttributeError):
        return size


class UnusableIndex(ValueError):
    """An index that cannot be used; the caller falls back to scanning the log."""


class SegmentIndex:
    """One read-only, lazily mapped index file. Subclasses give the entry layout."""

    entry_size = 0

    def __init__(self, path: str, base_offset: int, follow_links: bool = False) -> None:
        self.path = path
        self.follow_links = follow_links  # (a file named on the command line: `kfs dump`'s)
        self.base_offset = base_offset
        self._lock = threading.Lock()
        self._map: mmap.mmap | None = None
        self._mapped_bytes = 0
        self._entries = 0

    # ---- the mapping -------------------------------------------------------------------------

    def _file_bytes(self) -> int:
        """The file's size now: from the mapping's own descriptor (mmap keeps a duplicate, so
        kfs holds no other), or by path while nothing is mapped."""
        if self._map is not None:
            return self._map.size()
        st = os.stat(self.path) if self.follow_links else os.lstat(self.path)
        refused = refusal(self.path, st.st_mode)
        if refused is not None:
            raise UnusableIndex(str(refused))
        return st.st_size

    def _open_fd(self) -> int:
        """A descriptor of the index, a regular file (UnusableIndex otherwise: never opened)."""
        try:
            return open_regular(self.path, self.follow_links)
        except NotARegularFile as e:
            raise UnusableIndex(str(e)) from None

    def _open(self) -> None:
        """Map the file (O_RDONLY, PROT_READ) and count its entries; cheap to call again."""
        file_bytes = self._file_bytes()
        if file_bytes % self.entry_size:
            # Kafka's sanityCheck: a torn index is corrupt (the broker rebuilds it); never half-trust it.
            raise UnusableIndex(f"{self.path}: size {file_bytes} is not a multiple of {self.entry_size}")
        capacity = file_bytes // self.entry_size
        if file_bytes != self._mapped_bytes or (file_bytes and self._map is None):
            # First use, or the broker resized the file (trimmed on roll, truncated): map it anew.
            self._release()
            data_end = file_bytes
            if file_bytes:
                fd = self._open_fd()
                try:
                    self._map = mmap.mmap(fd, file_bytes, access=mmap.ACCESS_READ)
                    data_end = _written_end(fd, file_bytes)
                finally:
                    os.close(fd)
                # A lookup touches a handful of entries: no read-around on a fault (see the search).
                self._map.madvise(mmap.MADV_RANDOM)
            self._mapped_bytes = file_bytes
            self._entries = self._count_entries(capacity, data_end)
        elif self._entries < capacity:
            # A live (preallocated) index may have grown since we last looked: look past the count.
            self._entries = self._grown_count(capacity)
        if self._map is not None:
            OPEN_FILES.touch(self)

    def _is_zero(self, slot: int) -> bool:
        assert self._map is not None
        start = slot * self.entry_size
        return self._map[start:start + self.entry_size] == b"\0" * self.entry_size

    def _count_entries(self, capacity: int, data_end: int | None = None) -> int:
        """Entries before the zero tail of a preallocated index (Kafka keeps this in memory).

        data_end: where the file's last hole begins (SEEK_HOLE), if it has one before its end. Past
        it every slot is zero, and an entry straddling it would have made the next block data."""
        if capacity == 0:
            return 0
        if data_end is not None and data_end < capacity * self.entry_size:
            if data_end == 0:
                return 0
            last_zero = min(data_end // self.entry_size, capacity - 1)  # the first slot reaching into the hole
            page = (data_end - 1) // mmap.PAGESIZE * mmap.PAGESIZE  # the last written page
            first = -(-page // self.entry_size)  # its first whole slot
            if first >= last_zero or not self._is_zero(first):
                return self._first_zero_slot(min(first, last_zero), last_zero)  # in this page alone
            if first == 0 or not self._is_zero(first - 1):
                return first  # the entries end on the page boundary
            return self._first_zero_slot(0, first - 1)  # zeros written as data (not Kafka's way)
        if not self._is_zero(capacity - 1):
            return capacity  # a trimmed (closed) index: every slot is an entry
        # First look at a preallocated index without a hole: entries are a prefix, the rest is zeros.
        return self._first_zero_slot(0, capacity - 1)

    def _grown_count(self, capacity: int) -> int:
        """The count again, walking forward from the last one (touches the pages at the count only)."""
        known = self._entries
        if known and not self._is_zero(known - 1):
            while known < capacity and not self._is_zero(known):
                known += 1
            return known
        fd = self._open_fd()
        try:
            data_end = _written_end(fd, capacity * self.entry_size)
        finally:
            os.close(fd)
        return self._count_entries(capacity, data_end)

    def _first_zero_slot(self, lo: int, hi: int) -> int:
        """The first all-zero slot in [lo, hi], given slot hi is zero and the zeros are a suffix."""
        while lo < hi:
            mid = (lo + hi) // 2
            if self._is_zero(mid):
                hi = mid
            else:
                lo = mid + 1
        return lo

    def close(self) -> None:
        with self._lock:
            self._release()
        OPEN_FILES.forget(self)

    def evict(self) -> None:
        """Unmap and close if no lookup is running now (see kfs.storage.open_files)."""
        if self._lock.acquire(blocking=False):
            try:
                self._release()
            finally:
                self._lock.release()

    def _release(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None
        self._mapped_bytes = 0
        self._entries = 0

    # ---- entries -----------------------------------------------------------------------------

    def entry_count(self) -> int:
        with self._lock:
            self._open()
            return self._entries

    def entry(self, slot: int) -> tuple[int, int]:
        """The entry at `slot` with an absolute offset: (offset, position) or (timestamp, offset)."""
        with self._lock:
            self._open()
            if not 0 <= slot < self._entries:
                raise UnusableIndex(f"{self.path}: no entry {slot}")
            return self._parse(slot)

    def entries(self) -> list[tuple[int, int]]:
        with self._lock:
            self._open()
            return [self._parse(slot) for slot in range(self._entries)]

    def last_entries(self, count: int) -> list[tuple[int, int]]:
        """The last `count` entries (fewer if the index holds fewer), oldest first: a page or two."""
        with self._lock:
            self._open()
            return [self._parse(slot) for slot in range(max(0, self._entries - count), self._entries)]

    @classmethod
    def in_order(cls, previous: tuple[int, int], current: tuple[int, int]) -> bool:
        """Whether `current` may follow `previous` in an index Kafka wrote (`_in_order`)."""
        return cls._in_order(previous, current)

    def _in_order_at(self, slot: int, target: int | None = None) -> bool:
        """Whether the entry at `slot` follows the one before it and precedes the one after it as
        Kafka appends them (`_in_order`), and, for a search's answer, whether the next entry's key is
        past `target`: the ordering a binary search relies on, checked where it looked (the entries
        around its answer, on the pages it read), never over the whole file (a closed segment's
        full-size `.timeindex` is 2,560 pages). A search of an index out of order can land anywhere;
        its callers then scan the log. The caller holds the lock, the index open."""
        current = self._parse(slot)
        if slot > 0 and not self._in_order(self._parse(slot - 1), current):
            return False
        if slot + 1 < self._entries:
            if not self._in_order(current, self._parse(slot + 1)):
                return False
            if target is not None and self._key(slot + 1) <= target:
                return False
        return True

    def lookup_in_order(self, target: int) -> tuple[tuple[int, int] | None, bool]:
        """`lookup(target)` and whether the index is in order around the entry found (`_in_order_at`)."""
        with self._lock:
            self._open()
            slot = self._largest_lower_bound_slot(target)
            if slot < 0:
                return None, True
            return self._parse(slot), self._in_order_at(slot, target)

    def last_in_order(self) -> tuple[tuple[int, int] | None, bool]:
        """The last entry and whether it follows the one before it (`_in_order`)."""
        with self._lock:
            self._open()
            if not self._entries:
                return None, True
            return self._parse(self._entries - 1), self._in_order_at(self._entries - 1)

    @staticmethod
    def _in_order(previous: tuple[int, int], current: tuple[int, int]) -> bool:
        raise NotImplementedError

    def _parse(self, slot: int) -> tuple[int, int]:
        raise NotImplementedError

    def _key(self, slot: int) -> int:
        """The searched value of an entry: the offset (offset index) or the timestamp (time index)."""
        raise NotImplementedError

    def _largest_lower_bound_slot(self, target: int) -> int:
        """Kafka's `indexSlotRangeFor(..., LARGEST_LOWER_BOUND)`: the last slot whose key <= target, or -1.

        Why two sections (AbstractIndex's comment, in short): lookups are almost always for the
        newest entries, at the end of the index. A plain binary search over the whole file starts
        in its middle and touches ~log2(N) pages spread across it; once the OS has paged those out,
        every "recent" lookup faults in pages it never needed. Searching the last 8 KiB (at most
        3 pages, which appends keep resident) whenever the target is at or past its first entry,
        and the cold rest only otherwise, keeps the pages a recent lookup touches small and fixed,
        whatever the index size.
        """
        entries = self._entries
        if entries == 0:
            return -1
        if _index_slot is not None and self._map is not None and _SEARCHABLE_LOW <= target <= _SEARCHABLE_HIGH \
                and _SEARCHABLE_LOW <= self.base_offset <= _SEARCHABLE_HIGH:
            return _index_slot(self._map, entries, self.entry_size, self.base_offset, target)  # the same, compiled
        warm_entries = WARM_SECTION_BYTES // self.entry_size
        first_hot = max(0, entries - 1 - warm_entries)
        if self._key(first_hot) < target:
            return self._binary_search(target, first_hot, entries - 1)
        if self._key(0) > target:
            return -1
        return self._binary_search(target, 0, first_hot)

    def _binary_search(self, target: int, lo: int, hi: int) -> int:
        key = self._key
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            found = key(mid)
            if found > target:
                hi = mid - 1
            elif found < target:
                lo = mid
            else:
                return mid
        return lo

    def _search(self, target: int, parse: Callable[[int], tuple[int, int]]) -> tuple[int, int] | None:
        with self._lock:
            self._open()
            slot = self._largest_lower_bound_slot(target)
            return None if slot < 0 else parse(slot)


class OffsetIndex(SegmentIndex):
    """`.index`: maps a relative offset to the byte position of the batch that starts there."""

    entry_size = 8

    def _parse(self, slot: int) -> tuple[int, int]:
        assert self._map is not None
        relative, position = _OFFSET_ENTRY.unpack_from(self._map, slot * 8)
        return self.base_offset + relative, position

    def _key(self, slot: int) -> int:
        assert self._map is not None
        return self.base_offset + _OFFSET_ENTRY.unpack_from(self._map, slot * 8)[0]

    @staticmethod
    def _in_order(previous: tuple[int, int], current: tuple[int, int]) -> bool:
        return current[0] > previous[0] and current[1] > previous[1]  # OffsetIndex.append's checks

    def lookup(self, target_offset: int) -> tuple[int, int] | None:
        """`OffsetIndex.lookup`: the (offset, position) entry at or below the target, or None."""
        return self._search(target_offset, self._parse)

    def lookup_with_next(self, target_offset: int) -> tuple[tuple[int, int] | None, tuple[int, int] | None]:
        """`lookup(target)` and the entry after it (None when it is the last): the next batch start
        the index knows, which a walk from the entry must reach exactly."""
        with self._lock:
            self._open()
            slot = self._largest_lower_bound_slot(target_offset)
            if slot < 0:
                return None, None
            return self._parse(slot), (self._parse(slot + 1) if slot + 1 < self._entries else None)


class TimeIndex(SegmentIndex):
    """`.timeindex`: each entry is the largest timestamp so far and the offset of its record."""

    entry_size = 12

    def _parse(self, slot: int) -> tuple[int, int]:
        assert self._map is not None
        timestamp, relative = _TIME_ENTRY.unpack_from(self._map, slot * 12)
        return timestamp, self.base_offset + relative

    def _key(self, slot: int) -> int:
        assert self._map is not None
        return _TIME_ENTRY.unpack_from(self._map, slot * 12)[0]

    @staticmethod
    def _in_order(previous: tuple[int, int], current: tuple[int, int]) -> bool:
        return current[0] > previous[0] and current[1] >= previous[1]  # TimeIndex.maybeAppend's checks

    def lookup(self, target_timestamp: int) -> tuple[int, int] | None:
        """`TimeIndex.lookup`: the (timestamp, offset) entry at or below the target, or None."""
        return self._search(target_timestamp, self._parse)

    def last_entry(self) -> tuple[int, int] | None:
        with self._lock:
            self._open()
            return self._parse(self._entries - 1) if self._entries else None
