"""What a lookup reads: a few pages of the log and of the indexes, whatever their size.

A live segment's `.index` and `.timeindex` are preallocated (10 MiB) by `RandomAccessFile.setLength`,
so their zero tail is a hole: kfs finds where the entries end with SEEK_HOLE and the last written
page, not with a binary search through the tail (which faulted in ~13 pages of zeros). A lookup that
lands in a closed segment needs neither the log end nor the live indexes; a lookup reads batch
headers (61 bytes) and the one batch it needs, not megabyte windows. Counted with mincore after
posix_fadvise(DONTNEED), as tests/test_storage_index_pages.py does; the counts include the kernel's
own read-ahead, which is why the log bound is a handful of pages rather than one.
"""

from __future__ import annotations

import mmap
import os
import random
import struct
from pathlib import Path

import pytest
from builders import partition_log
from conftest import v2_batch, write_segment
from index_pages import drop_cache, resident_pages

from kfs.storage.index import OffsetIndex, TimeIndex

T0 = 1_700_000_000_000
PREALLOCATED = 10 << 20
LOG_PAGES = 16  # a lookup: an index entry's header, a walk of at most ~4 KiB of headers, one batch


def _segment(directory: Path, base: int, batches: int, closed: bool, rng: random.Random):
    appends, offset = [], base
    for _ in range(batches):
        records = [(offset + i, T0 + offset + i, b"k%d" % (offset + i),
                    bytes(rng.choice(b"abcdef") for _ in range(300)), [("h", b"v")]) for i in range(20)]
        appends.append([(v2_batch(offset, records), records)])
        offset += 20
    return write_segment(str(directory), base, appends, closed=closed)


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """Two segments of ~4 MiB: a closed one, and a live one whose indexes are preallocated sparse files."""
    directory = tmp_path_factory.mktemp("live") / "live.pages-0"
    directory.mkdir()
    rng = random.Random(3)
    closed = _segment(directory, 0, 640, True, rng)
    active = _segment(directory, 640 * 20, 640, False, rng)
    stem = directory / f"{active.base_offset:020d}"
    for suffix, entry_size in ((".index", 8), (".timeindex", 12)):
        # AbstractIndex rounds maxIndexSize down to whole entries; setLength leaves the tail a hole.
        os.truncate(f"{stem}{suffix}", PREALLOCATED // entry_size * entry_size)
        with open(f"{stem}{suffix}", "rb") as f:
            if os.lseek(f.fileno(), 0, os.SEEK_HOLE) >= PREALLOCATED - entry_size:
                pytest.skip("this file system does not report holes (SEEK_HOLE)")
    files = sorted(str(p) for p in directory.iterdir())
    for path in files:  # written pages are dirty until synced, and DONTNEED keeps dirty pages
        fd = os.open(path, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
    _cold(files)
    if sum(resident_pages(p) for p in files) > 0:
        pytest.skip("this file system keeps pages cached (tmpfs?): residency cannot be measured")
    return directory, closed, active, files


def _cold(files: list[str]) -> None:
    for path in files:
        drop_cache(path)


def _pages(directory: Path, base: int, suffix: str) -> int:
    return resident_pages(str(directory / f"{base:020d}{suffix}"))


def test_a_lookup_in_a_closed_segment_reads_no_page_of_the_live_indexes(live) -> None:
    directory, closed, active, files = live
    target = closed.batches[len(closed.batches) // 3].base_offset + 7
    _cold(files)
    plog = partition_log(directory)
    location = plog.locate_offset(target)
    assert (location.segment_base_offset, location.offset) == (0, target)
    assert _pages(directory, active.base_offset, ".index") == 0
    assert _pages(directory, active.base_offset, ".timeindex") == 0
    assert _pages(directory, active.base_offset, ".log") == 0
    assert plog.record_at(target).key == b"k%d" % target
    assert _pages(directory, active.base_offset, ".index") == 0


def test_a_recent_lookup_on_a_live_segment_keeps_three_index_pages_at_most(live) -> None:
    directory, _, active, files = live
    last = active.batches[-1]
    for target in (last.last_offset, active.batches[-40].base_offset + 3):
        _cold(files)
        plog = partition_log(directory)
        assert plog.locate_offset(target).offset == target
        assert plog.log_end_offset() == last.last_offset + 1
        assert _pages(directory, active.base_offset, ".index") <= 3, target
        assert _pages(directory, active.base_offset, ".timeindex") == 0, target


def test_a_recent_time_lookup_on_a_live_segment_keeps_three_pages_of_each_index_at_most(live) -> None:
    directory, _, active, files = live
    target = active.batches[-30].records[5][1]
    _cold(files)
    plog = partition_log(directory)
    location = plog.locate_time(target)
    assert (location.segment_base_offset, location.timestamp) == (active.base_offset, target)
    assert location.index_entry is not None  # found through the indexes, not by a scan of the log
    assert _pages(directory, active.base_offset, ".timeindex") <= 3
    assert _pages(directory, active.base_offset, ".index") <= 3
    assert _pages(directory, active.base_offset, ".log") <= LOG_PAGES


def test_an_old_offset_lookup_and_its_value_read_a_handful_of_log_pages(live) -> None:
    directory, closed, _, files = live
    batch = closed.batches[100]
    target = batch.base_offset + 11
    _cold(files)
    plog = partition_log(directory)
    assert plog.locate_offset(target).position == batch.position
    assert _pages(directory, 0, ".log") <= LOG_PAGES
    _cold(files)
    plog = partition_log(directory)
    assert plog.record_at(target).value == dict((r[0], r[3]) for r in batch.records)[target]
    assert _pages(directory, 0, ".log") <= LOG_PAGES


@pytest.mark.parametrize("cls", [OffsetIndex, TimeIndex])
def test_a_preallocated_index_counts_its_entries_with_or_without_a_hole(tmp_path, cls) -> None:
    """Every count around page edges, as a sparse file (zero tail a hole) and as written zeros."""
    size = cls.entry_size
    per_page = mmap.PAGESIZE / size
    counts = sorted({0, 1, 2, *(int(k * per_page) + d for k in range(1, 6) for d in (-1, 0, 1)), 3000})
    for count in counts:
        entries = [(T0 + 5 * i if cls is TimeIndex else 3 * i + 1, i + 1) for i in range(count)]
        fmt = ">qi" if cls is TimeIndex else ">ii"
        data = b"".join(struct.pack(fmt, *e) for e in entries)
        for sparse in (True, False):
            path = tmp_path / f"{count}-{sparse}{'.timeindex' if cls is TimeIndex else '.index'}"
            capacity = (len(data) // size + 700) * size
            with open(path, "wb") as f:
                f.write(data)
                if sparse:
                    f.truncate(capacity)
                else:
                    f.write(bytes(capacity - len(data)))
            index = cls(str(path), 0)
            assert index.entry_count() == count, (count, sparse)
            index.close()
