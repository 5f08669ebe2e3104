"""Walking a partition with many segments keeps a bounded number of files open (indexes and
segment files are opened on first use and closed least-recently-used first), and closing idle
files loses nothing: they reopen on the next use."""

from __future__ import annotations

import os

import pytest
from conftest import v2_batch, write_segment

from kfs.storage import LogDirs
from kfs.storage.open_files import OPEN_FILES

SEGMENTS = 120


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def many_segments(tmp_path):
    directory = tmp_path / "wide-0"
    directory.mkdir()
    for i in range(SEGMENTS):
        base = i * 10
        records = [(base + j, 1_600_000_000_000 + base + j, b"k", b"value-%d" % (base + j), []) for j in range(10)]
        write_segment(str(directory), base, [[(v2_batch(base, records[:5]), records[:5])],
                                             [(v2_batch(base + 5, records[5:]), records[5:])]],
                      index_interval_bytes=0)
    return tmp_path


def test_reading_every_segment_keeps_open_files_bounded(many_segments, monkeypatch) -> None:
    monkeypatch.setattr(OPEN_FILES, "limit", 16)
    OPEN_FILES.close_idle(0)
    before = _open_descriptors()
    plog = LogDirs([str(many_segments)]).partition("wide-0")
    peak = 0
    offsets = []
    for record in plog.records():
        offsets.append(record.offset)
        peak = max(peak, _open_descriptors() - before)
    for n in range(0, SEGMENTS * 10, 7):  # lookups open offset and time indexes too
        assert plog.locate_offset(n).offset == n
        assert plog.locate_time(1_600_000_000_000 + n).offset == n
        peak = max(peak, _open_descriptors() - before)
    assert offsets == list(range(SEGMENTS * 10))
    assert peak <= 16 + 2  # the limit, and the segment being read with its index
    assert len(OPEN_FILES) <= 16


def test_closing_idle_files_loses_nothing(many_segments) -> None:
    plog = LogDirs([str(many_segments)]).partition("wide-0")
    first = [r.offset for r in plog.records()]
    assert OPEN_FILES.close_idle(0) > 0
    assert [r.offset for r in plog.records()] == first
    assert plog.locate_time(1_600_000_000_000 + 555).offset == 555


def test_concurrent_first_looks_at_a_segment_agree_on_its_end(many_segments) -> None:
    """The tail walk of a segment is published whole: a reader never sees a half-walked end
    (a decoded view laid out on one would end early)."""
    import threading

    from kfs.storage.segment import LogSegment

    directory = str(many_segments / "wide-0")
    truth = LogSegment(directory, 0)
    want = (truth.valid_size(), truth.next_offset())
    for _ in range(50):
        segment = LogSegment(directory, 0)
        seen: list[tuple[int, int]] = []
        barrier = threading.Barrier(6)

        def look(seg: LogSegment = segment, seen: list = seen, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            seen.append((seg.valid_size(), seg.next_offset()))

        threads = [threading.Thread(target=look) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert set(seen) == {want}


def test_the_least_recently_used_are_closed_first() -> None:
    """Past the limit, the items used longest ago are evicted, as many as it takes to be within it
    (an OrderedDict popped from its front: no copy of the whole table at each use)."""
    from kfs.storage.open_files import OpenFiles

    evicted: list[str] = []

    class Item:
        def __init__(self, name: str) -> None:
            self.name = name

        def evict(self) -> None:
            evicted.append(self.name)

    files = OpenFiles(limit=2)
    a, b, c, d = Item("a"), Item("b"), Item("c"), Item("d")
    files.touch(a)
    files.touch(b)
    files.touch(a)  # used again: b is now the least recently used
    files.touch(c)
    assert evicted == ["b"] and len(files) == 2
    files.limit = 0
    files.touch(d)
    assert evicted == ["b", "a", "c", "d"] and len(files) == 0
