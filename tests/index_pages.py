"""Index lookups measured: microseconds per lookup, and the index pages a lookup reads and makes resident.

Kafka's warm/cold search (AbstractIndex) against a plain binary search over the whole index
(`plain_largest_lower_bound_slot`, kept here as the baseline), on a cold page cache
(`posix_fadvise(DONTNEED)`, a fresh index object, one lookup, then `mincore`). `bench_core` runs
these; tests/test_storage_index_pages.py uses the same probes to pin the page bound.
"""

from __future__ import annotations

import array
import ctypes
import ctypes.util
import functools
import mmap
import os
import random
import struct
import sys
import time
from typing import Any

from kfs.storage import index as index_module
from kfs.storage.index import OffsetIndex, SegmentIndex, TimeIndex

PAGE = os.sysconf("SC_PAGE_SIZE")
T0 = 1_700_000_000_000

# ---- (b) lookups --------------------------------------------------------------------------------------

def write_offset_index(path: str, size_bytes: int) -> list[int]:
    """A full `.index` of size_bytes: relative offsets 0, 4, 8, ...; positions 0, 1000, 2000, ..."""
    n = size_bytes // 8
    entries = array.array("i", bytes(8 * n))
    entries[0::2] = array.array("i", range(0, 4 * n, 4))
    entries[1::2] = array.array("i", range(0, 1000 * n, 1000))
    if sys.byteorder == "little":
        entries.byteswap()
    _write_synced(path, entries.tobytes())
    return list(range(0, 4 * n, 4))


def write_time_index(path: str, size_bytes: int) -> list[int]:
    n = size_bytes // 12
    stamps = [T0 + 7 * i for i in range(n)]
    entry = struct.Struct(">qi")
    _write_synced(path, b"".join(entry.pack(t, 4 * i) for i, t in enumerate(stamps)))
    return stamps


def _write_synced(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def bench_lookups(index: OffsetIndex | TimeIndex, keys: list[int], count: int = 20000) -> dict[tuple[str, str], float]:
    """µs per lookup: {(target kind, method): µs}."""
    rng = random.Random(5)
    targets = {
        "recent": [keys[-rng.randint(1, 300)] + rng.randint(0, 3) for _ in range(count)],
        "random": [rng.randint(keys[0], keys[-1] + 3) for _ in range(count)],
    }
    index.entry_count()  # map it once: the lookups, not the first open, are measured
    out = {}
    for kind, ts in targets.items():
        plain = functools.partial(plain_largest_lower_bound_slot, index)
        for method, fn in (("warm/cold lookup", index.lookup), ("plain binary search", plain)):
            best = float("inf")
            for _ in range(3):  # the best of three: other work on a 2-core machine only adds time
                start = time.perf_counter()
                for t in ts:
                    fn(t)
                best = min(best, time.perf_counter() - start)
            out[(kind, method)] = best / count * 1e6
    return out


# ---- (c) resident pages ----------------------------------------------------------------------------

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]


def resident_pages(path: str) -> int:
    """Pages of the file in the page cache: mincore on a fresh mapping of it (which touches none)."""
    size = os.path.getsize(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "mmap failed")
        try:
            pages = (size + PAGE - 1) // PAGE
            vec = (ctypes.c_ubyte * pages)()
            if _libc.mincore(addr, size, vec) != 0:
                raise OSError(ctypes.get_errno(), "mincore failed")
            return sum(v & 1 for v in vec)
        finally:
            _libc.munmap(addr, size)
    finally:
        os.close(fd)


def drop_cache(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


class _RandomAccessMmap:
    """Stands in for the `mmap` module inside kfs.storage.index: mappings get MADV_RANDOM (no read-around)."""

    ACCESS_READ = mmap.ACCESS_READ
    MADV_RANDOM = mmap.MADV_RANDOM

    @staticmethod
    def mmap(fd: int, length: int, access: int = mmap.ACCESS_READ) -> mmap.mmap:
        m = mmap.mmap(fd, length, access=access)
        m.madvise(mmap.MADV_RANDOM)
        return m


def traced(cls: type[SegmentIndex]) -> type[SegmentIndex]:
    """The index class, recording the page of every entry it reads."""

    class Traced(cls):  # type: ignore[valid-type,misc]
        pages: set[int]

        def _note(self, slot: int) -> None:
            self.pages.add(slot * self.entry_size // PAGE)
            self.pages.add(((slot + 1) * self.entry_size - 1) // PAGE)

        def _key(self, slot: int) -> int:
            self._note(slot)
            return super()._key(slot)

        def _parse(self, slot: int) -> tuple[int, int]:
            self._note(slot)
            return super()._parse(slot)

        def _is_zero(self, slot: int) -> bool:
            self._note(slot)
            return super()._is_zero(slot)

    return Traced


def plain_largest_lower_bound_slot(index: SegmentIndex, target: int) -> int:
    """A plain binary search over the whole index: the baseline the warm/cold search is measured against."""
    count = index.entry_count()
    if count == 0 or index._key(0) > target:
        return -1
    return index._binary_search(target, 0, count - 1)


def pages_of_one_lookup(path: str, cls: type[OffsetIndex] | type[TimeIndex], target: int, plain: bool, madv_random: bool
                        ) -> tuple[int, int]:
    """(pages resident after one cold lookup, pages the search read)."""
    drop_cache(path)
    before = resident_pages(path)
    saved = index_module.mmap
    if madv_random:
        index_module.mmap = _RandomAccessMmap  # type: ignore[assignment]
    try:
        index: Any = traced(cls)(path, 0)  # a traced index carries the pages it read
        index.pages = set()
        if plain:
            plain_largest_lower_bound_slot(index, target)
        else:
            index.lookup(target)
        read = len(index.pages)
        index.close()
    finally:
        index_module.mmap = saved
    return resident_pages(path) - before, read
