"""A time lookup of a recent timestamp touches a few pages of each index, whatever their size.

Kafka keeps each segment's largest timestamp in memory (its time index's last entry, read once) and
searches one time index with the warm/cold search (AbstractIndex): about 3 pages. kfs checks what it
uses against the log instead of trusting it, but only where it looks: the last entry of a closed
segment's `.timeindex` and the entries the search lands on (with their neighbours), never the whole
file. Measured as tests/test_storage_live_index_pages.py does: posix_fadvise(DONTNEED), one lookup
through a fresh PartitionLog, mincore.

The partition: a closed segment whose `.timeindex` is full-size (Kafka's default segment.index.bytes,
10 MiB, trimmed when the segment rolled: 873,813 entries, one per one-record batch) and a live segment
whose `.index` and `.timeindex` are preallocated sparse files with ~100 KiB of entries.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import crc32c
import pytest
from builders import partition_log
from conftest import v2_batch
from index_pages import drop_cache, resident_pages

from kfs.storage.location import Location

T0 = 1_700_000_000_000
FULL = 10 << 20  # log.index.size.max.bytes / segment.index.bytes
CLOSED_ENTRIES = FULL // 12
LIVE_BATCHES = 8192
PAGES = 4  # the bound: Kafka's ~3 pages of one index, and a page for the entry after the one it lands on


def _write_segment(directory: Path, base: int, batches: int, preallocate: bool) -> list[int]:
    """One-record batches at offsets base.., timestamps T0 + 10 * offset, each indexed in both indexes
    (as with index.interval.bytes below a batch); the timestamps of the records."""
    template = bytearray(v2_batch(0, [(0, T0, None, b"v", [])]))
    size = len(template)
    log = bytearray(size * batches)
    index = bytearray(8 * batches)
    timeindex = bytearray(12 * batches)
    stamps = []
    for i in range(batches):
        offset, stamp, at = base + i, T0 + 10 * (base + i), i * size
        struct.pack_into(">q", template, 0, offset)
        struct.pack_into(">qq", template, 27, stamp, stamp)  # baseTimestamp, maxTimestamp (delta 0)
        struct.pack_into(">I", template, 17, crc32c.crc32c(memoryview(template)[21:]))
        log[at:at + size] = template
        struct.pack_into(">ii", index, 8 * i, i, at)
        struct.pack_into(">qi", timeindex, 12 * i, stamp, i)
        stamps.append(stamp)
    stem = directory / f"{base:020d}"
    for suffix, data in ((".log", log), (".index", index), (".timeindex", timeindex)):
        path = Path(f"{stem}{suffix}")
        with open(path, "wb") as f:
            f.write(data)
            if preallocate and suffix != ".log":
                entry = 8 if suffix == ".index" else 12
                f.truncate(FULL // entry * entry)  # AbstractIndex: setLength, whole entries; the tail a hole
            f.flush()
            os.fsync(f.fileno())  # (dirty pages are not dropped by DONTNEED)
    return stamps


@pytest.fixture(scope="module")
def partition(tmp_path_factory):
    directory = tmp_path_factory.mktemp("time-pages") / "time.pages-0"
    directory.mkdir()
    closed = _write_segment(directory, 0, CLOSED_ENTRIES, preallocate=False)
    live = _write_segment(directory, CLOSED_ENTRIES, LIVE_BATCHES, preallocate=True)
    live_timeindex = directory / f"{CLOSED_ENTRIES:020d}.timeindex"
    with open(live_timeindex, "rb") as f:
        if os.lseek(f.fileno(), 0, os.SEEK_HOLE) >= os.path.getsize(live_timeindex) - 12:
            pytest.skip("this file system does not report holes (SEEK_HOLE)")
    files = sorted(str(p) for p in directory.iterdir())
    _cold(files)
    if sum(resident_pages(p) for p in files) > 0:
        pytest.skip("this file system keeps pages cached (tmpfs?): residency cannot be measured")
    assert os.path.getsize(directory / f"{0:020d}.timeindex") == CLOSED_ENTRIES * 12  # full-size, closed
    return directory, closed, live, files


def _cold(files: list[str]) -> None:
    for path in files:
        drop_cache(path)


def _index_pages(directory: Path) -> dict[str, int]:
    return {p.name: resident_pages(str(p)) for p in sorted(directory.iterdir())
            if p.suffix in (".index", ".timeindex")}


def _lookup(directory: Path, files: list[str], target: int) -> tuple[Location, dict[str, int]]:
    """One time lookup through a fresh PartitionLog on a cold page cache: its location, and the
    pages of each index it left resident (counted once its maps are closed: DONTNEED keeps mapped pages)."""
    _cold(files)
    plog = partition_log(directory)
    try:
        location = plog.locate_time(target)
    finally:
        plog.close()
    return location, _index_pages(directory)


def test_a_recent_time_lookup_reads_a_few_pages_of_every_index(partition) -> None:
    directory, _, live, files = partition
    for target in (live[-30], live[-30] - 3, live[-1], live[-600] + 1):
        location, pages = _lookup(directory, files, target)
        expected = (target + 9) // 10 * 10
        assert (location.segment_base_offset, location.timestamp) == (CLOSED_ENTRIES, expected), target
        assert location.index_entry is not None  # through the indexes, not by a scan of the log
        assert all(count <= PAGES for count in pages.values()), (target, pages)


def test_a_closed_segments_largest_timestamp_reads_a_few_pages_of_its_time_index(partition) -> None:
    directory, closed, _, files = partition
    timeindex = str(directory / f"{0:020d}.timeindex")
    _cold(files)
    plog = partition_log(directory)
    try:
        first = plog.segments()[0]
        assert plog.largest_timestamp(first) == closed[-1]
        first.close()
        assert resident_pages(timeindex) <= PAGES
        _cold(files)
        assert plog.largest_timestamp(first) == closed[-1]  # remembered: no page of it read again
        first.close()
        assert resident_pages(timeindex) == 0
    finally:
        plog.close()


def test_a_time_lookup_in_the_closed_segment_reads_a_few_pages_of_its_indexes(partition) -> None:
    _, closed, _, files = partition
    directory = partition[0]
    for target in (closed[-5], closed[len(closed) // 3] + 1, closed[0]):
        location, pages = _lookup(directory, files, target)
        assert (location.segment_base_offset, location.timestamp) == (0, (target + 9) // 10 * 10), target
        # An old time's search takes the cold section: ~log2(pages) pages, Kafka's cost too.
        assert pages[f"{0:020d}.timeindex"] <= 16 and pages[f"{0:020d}.index"] <= 16, (target, pages)
        assert pages[f"{CLOSED_ENTRIES:020d}.timeindex"] == 0 and pages[f"{CLOSED_ENTRIES:020d}.index"] == 0
