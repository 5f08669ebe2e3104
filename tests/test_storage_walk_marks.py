"""A segment without its `.index` (a backup copied without it): the first walk over it leaves marks
(kfs.storage.walk_marks.WalkMarks) and later lookups walk from the nearest one, while the segment
grows, is truncated (a new leader) and grows again. The answers are a fresh reader's, which walks
from the segment's start; tests/test_storage_properties.py checks the same against brute force."""

from __future__ import annotations

import random
import struct
from collections.abc import Iterable
from pathlib import Path

import pytest
from conftest import v2_batch, write_segment

from kfs.storage import LogDirs, NoRecordAtOffset, OffsetOutOfRange, PartitionLog, TimestampNotFound
from kfs.storage import log_file as log_file_module
from kfs.storage import walk_marks as walk_marks_module

T0 = 1_600_000_000_000


def _batches(first: int = 0, pad: int = 0) -> list[bytes]:
    """60 batches from batch `first` on: offsets 4b..4b+2 (a gap of one after each batch); values
    `pad` bytes longer than "value-N", so the batches after a truncation start elsewhere."""
    return [v2_batch(b * 4, [(b * 4 + j, T0 + b * 4 + j, b"k", _value(b * 4 + j, pad), []) for j in range(3)])
            for b in range(first, first + 60)]


def _value(offset: int, pad: int) -> bytes:
    return b"value-%d" % offset + b"+" * pad


def _read_positions(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The position of every `.log` read from here on."""
    reads: list[int] = []
    real_read = log_file_module.LogFile._read

    def counted_read(self: log_file_module.LogFile, position: int, length: int, ahead: int) -> bytes:
        reads.append(position)
        return real_read(self, position, length, ahead)

    monkeypatch.setattr(log_file_module.LogFile, "_read", counted_read)
    return reads


def _answer_as_brute_force(plog: PartitionLog, written: list[tuple[int, int]], targets: Iterable[int]) -> None:
    """Each time lookup finds the first record (offset order) whose timestamp reaches its target."""
    for target in targets:
        expected = next(((o, t) for o, t in written if t >= target), None)
        if expected is None:
            with pytest.raises(TimestampNotFound):
                plog.locate_time(target)
            continue
        found = plog.locate_time(target)
        assert (found.offset, found.timestamp) == expected, target


def test_lookups_walk_from_marks_as_the_segment_grows_and_is_truncated(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(walk_marks_module, "MARK_BYTES", 256)
    directory = tmp_path / "t-0"
    directory.mkdir()
    batches, rewritten = _batches(), _batches(25, pad=37)
    log = directory / f"{0:020d}.log"
    plog = None
    # grow, grow, truncate, grow with other batches (a new leader's): the same file, its reader kept
    for kept, content in ((12, batches[:12]), (60, batches), (25, batches[:25]), (60, batches[:25] + rewritten[:35])):
        log.write_bytes(b"".join(content))
        plog = plog or LogDirs([str(tmp_path)]).partition("t-0")
        plog.refresh(force=True)
        fresh = LogDirs([str(tmp_path)]).partition("t-0")
        assert plog.log_end_offset() == fresh.log_end_offset() == 4 * (kept - 1) + 3
        marks = plog.floor_segment(0)._marks
        assert marks is not None and len(marks.positions) > kept // 4  # a mark every couple of batches
        for n in range(plog.log_end_offset() + 2):
            if n >= plog.log_end_offset():
                with pytest.raises(OffsetOutOfRange):
                    plog.locate_offset(n)
                continue
            assert plog.locate_offset(n).as_dict() == fresh.locate_offset(n).as_dict(), (kept, n)
            if n % 4 == 3:
                with pytest.raises(NoRecordAtOffset):
                    plog.record_at(n)
            else:
                assert plog.record_at(n).value == _value(n, 37 if content is not batches and n >= 100 else 0)
        fresh.close()
    assert plog is not None
    plog.close()


def test_a_segment_with_its_index_leaves_no_marks(tmp_path: Path) -> None:
    """An index to start from: the tail walk starts at its last entry, and no marks are kept."""
    directory = tmp_path / "t-0"
    directory.mkdir()
    records = [[(v2_batch(b * 4, [(b * 4 + j, T0, b"k", b"v", []) for j in range(3)]),
                 [(b * 4 + j, T0, b"k", b"v", []) for j in range(3)])] for b in range(60)]
    write_segment(str(directory), 0, records, index_interval_bytes=256)
    plog = LogDirs([str(tmp_path)]).partition("t-0")
    assert plog.log_end_offset() == 4 * 59 + 3
    assert plog.floor_segment(0)._marks is None
    assert plog.locate_offset(101).offset == 101
    plog.close()


def test_time_lookups_start_from_marks_and_answer_as_a_brute_force_scan(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """No `.timeindex` either: each mark keeps the largest timestamp before it, so a lookup for T
    scans from the last mark before which no record reaches T (timestamps go back and forth here),
    and the segment's largest timestamp is the tail walk's. Every target from below the first
    timestamp to past the last gets the brute-force answer, never scanning from the start."""
    monkeypatch.setattr(walk_marks_module, "MARK_BYTES", 256)
    rng = random.Random(7)
    stamps = {o: T0 + o * 10 + rng.randint(-40, 40) for o in range(240)}
    records = [(o, stamps[o]) for o in range(240) if o % 4 != 3]
    batches = [v2_batch(b * 4, [(o, t, b"k", b"v%d" % o, []) for o, t in records[b * 3:b * 3 + 3]])
               for b in range(60)]
    directory = tmp_path / "t-0"
    directory.mkdir()
    (directory / f"{0:020d}.log").write_bytes(b"".join(batches))
    plog = LogDirs([str(tmp_path)]).partition("t-0")
    segment = plog.floor_segment(0)
    assert plog.largest_timestamp(segment) == max(t for _, t in records)
    assert segment._marks is not None and len(segment._marks.positions) > 10

    reads = _read_positions(monkeypatch)
    low, high = min(t for _, t in records), max(t for _, t in records)
    _answer_as_brute_force(plog, records, range(low - 2, high + 3))
    late = [target for target in range(low, high) if target > low + (high - low) // 2]
    reads.clear()
    for target in late:
        plog.locate_time(target)
    assert min(reads) >= 0.3 * segment.valid_size()  # none scanned from position 0
    plog.close()


def test_time_lookups_without_a_timeindex_make_marks_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A segment with its `.index` but no `.timeindex` (Kafka 0.10.0 wrote timestamps and no time
    index; a backup may keep one file and not the other): the first time lookup walks its batch
    headers once and keeps marks, which later lookups start from and which grow with the segment.
    Every target gets the brute-force answer, before and after the segment grows."""
    monkeypatch.setattr(walk_marks_module, "MARK_BYTES", 256)
    rng = random.Random(11)
    stamps = {o: T0 + o * 10 + rng.randint(-40, 40) for o in range(480)}
    records = [(o, stamps[o]) for o in range(480) if o % 4 != 3]

    def appends(first_batch: int, last_batch: int) -> list:
        out = []
        for b in range(first_batch, last_batch):
            batch_records = [(o, t, b"k", b"v%d" % o, []) for o, t in records[b * 3:b * 3 + 3]]
            out.append([(v2_batch(b * 4, batch_records), batch_records)])
        return out

    directory = tmp_path / "t-0"
    directory.mkdir()
    write_segment(str(directory), 0, appends(0, 60), index_interval_bytes=256, closed=False)
    (directory / f"{0:020d}.timeindex").unlink()
    plog = LogDirs([str(tmp_path)]).partition("t-0")
    segment = plog.floor_segment(0)
    assert plog.log_end_offset() == 239 and segment._marks is None  # the index starts the tail walk

    reads = _read_positions(monkeypatch)
    for batches in (60, 120):
        if batches == 120:  # the segment grows (a live one): its marks go on with it
            log = directory / f"{0:020d}.log"
            log.write_bytes(log.read_bytes() + b"".join(data for append in appends(60, 120) for data, _ in append))
            plog.refresh(force=True)
            assert plog.log_end_offset() == 479
        written = records[:batches * 3]
        assert plog.largest_timestamp(segment) == max(t for _, t in written)
        assert segment._marks is not None
        low, high = min(t for _, t in written), max(t for _, t in written)
        _answer_as_brute_force(plog, written, range(low - 2, high + 3))
        reads.clear()
        for target in range(low + (high - low) // 2, high):
            plog.locate_time(target)
        assert min(reads) >= 0.3 * segment.valid_size()  # no scan from position 0 once the marks are made

    # Truncated (a new leader; its index with it) and grown again with other batches, whose
    # timestamps go down: the marks of the old bytes are dropped, and the answers are the new log's.
    log = directory / f"{0:020d}.log"
    kept = sum(len(data) for append in appends(0, 40) for data, _ in append)
    other = [(o, T0 + 10_000 - o * 7) for o in range(160, 400) if o % 4 != 3]
    rewritten = [v2_batch(b * 4, [(o, t, b"k", b"w%d" % o, []) for o, t in other[(b - 40) * 3:(b - 40) * 3 + 3]])
                 for b in range(40, 100)]
    log.write_bytes(log.read_bytes()[:kept] + b"".join(rewritten))
    index = directory / f"{0:020d}.index"
    data = index.read_bytes()
    index.write_bytes(b"".join(data[i:i + 8] for i in range(0, len(data), 8)
                               if struct.unpack_from(">ii", data, i)[1] < kept))
    plog.refresh(force=True)
    assert plog.log_end_offset() == 399
    written = records[:120] + other
    assert plog.largest_timestamp(segment) == max(t for _, t in written)
    _answer_as_brute_force(plog, written, range(min(t for _, t in written) - 2, max(t for _, t in written) + 3, 3))
    plog.close()
