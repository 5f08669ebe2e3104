"""A `time/<T>` lookup walks once (LogSegment._timed_record) where the indexes are plain: it answers
as Kafka's ListOffsets does on Kafka-written logs, most lookups take it, and a time index entry
the log does not confirm sends the lookup to the general path, which still answers right. And a
whole batch hidden in a record's value, which an offset index entry points at, is never taken for
the log, by offset or by time (the walks' check that they land on the next entry's position).

(The random logs of test_storage_properties check `locate_time` at every record's timestamp, one
below and one above, against a brute-force oracle, with missing, empty, torn and short indexes.)"""

from __future__ import annotations

import logging
import os
import shutil
import struct

import pytest
from conftest import GOLDEN, GOLDEN_PARTITIONS, LOGDIRS, offset_index_bytes, read_jsonl, time_index_bytes, v2_batch

from kfs.storage import LogDirs, PartitionLog, TimestampNotFound
from kfs.storage.segment import LogSegment

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "kafka-written")


def _answers(plog: PartitionLog, targets: list[int]) -> list[dict | None]:
    out = []
    for target in targets:
        try:
            out.append(plog.locate_time(target).as_dict())
        except TimestampNotFound:
            out.append(None)
    return out


def _without_entry(answer: dict | None) -> dict | None:
    return None if answer is None else {k: v for k, v in answer.items() if k != "index_entry"}


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """[calls, answers] of the one-walk path from here on."""
    counts = [0, 0]
    original = LogSegment._timed_record

    def counted(self: LogSegment, timestamp: int, starting_offset: int) -> object:
        found = original(self, timestamp, starting_offset)
        counts[0] += 1
        counts[1] += found is not None
        return found

    monkeypatch.setattr(LogSegment, "_timed_record", counted)
    return counts


@pytest.mark.parametrize("partition", GOLDEN_PARTITIONS)
def test_the_one_walk_answers_as_the_general_path(monkeypatch, partition: str) -> None:
    targets = [line["target"] for line in read_jsonl(GOLDEN / partition / "time-lookups.jsonl")]
    dirs = LogDirs(LOGDIRS)
    counts = _counting(monkeypatch)
    quick = _answers(dirs.partition(partition), targets)
    dirs.close()
    monkeypatch.setattr(LogSegment, "_timed_record", lambda self, timestamp, starting_offset: None)
    dirs = LogDirs(LOGDIRS)
    general = _answers(dirs.partition(partition), targets)
    dirs.close()
    assert quick == general
    assert counts[0] > 0


def test_most_time_lookups_take_the_one_walk(monkeypatch) -> None:
    """Targets between two records' timestamps (no index entry has them) in orders-0: the rest are
    targets before a segment's first time index entry or past its last offset index entry."""
    stamps = sorted({line["timestamp"] for line in read_jsonl(GOLDEN / "orders-0" / "time-lookups.jsonl")
                     if "timestamp" in line})
    dirs = LogDirs(LOGDIRS)
    plog = dirs.partition("orders-0")
    counts = _counting(monkeypatch)
    _answers(plog, [stamp + 1 for stamp in stamps])
    dirs.close()
    assert counts[1] >= 0.7 * len(stamps), (counts, len(stamps))


@pytest.fixture
def orders(tmp_path):
    shutil.copytree(os.path.join(FIXTURES, "logdirs", "broker-a", "orders-0"), tmp_path / "orders-0")
    return tmp_path


def test_a_time_entry_the_log_does_not_confirm_falls_back(orders, monkeypatch, caplog) -> None:
    """A time index entry whose timestamp is not its batch's max timestamp (still in order): the one
    walk refuses it, the general path warns and scans, and every answer is the undamaged log's."""
    stamps = sorted({line["timestamp"] for line in read_jsonl(GOLDEN / "orders-0" / "time-lookups.jsonl")
                     if "timestamp" in line})
    targets = [t + d for t in stamps for d in (-1, 0, 1)]
    dirs = LogDirs([str(orders)])
    expected = _answers(dirs.partition("orders-0"), targets)
    dirs.close()

    path = os.path.join(orders, "orders-0", f"{0:020d}.timeindex")
    with open(path, "rb") as f:
        data = f.read()
    entries = [struct.unpack_from(">qi", data, i) for i in range(0, len(data) - 11, 12)]
    assert len(entries) >= 3
    slot = 1
    timestamp, relative = entries[slot]
    assert entries[slot - 1][0] < timestamp - 1  # room for a smaller timestamp that keeps the order
    with open(path, "r+b") as f:
        f.seek(slot * 12)
        f.write(struct.pack(">qi", timestamp - 1, relative))

    counts = _counting(monkeypatch)
    dirs = LogDirs([str(orders)])
    with caplog.at_level(logging.WARNING, logger="kfs"):
        got = _answers(dirs.partition("orders-0"), targets)
    # The records found are the undamaged log's; the index entry reported is None where the
    # general path refused the damaged entry (it scans from the segment's start there).
    assert [_without_entry(a) for a in got] == [_without_entry(a) for a in expected]
    dirs.close()
    assert "does not match the log" in caplog.text
    assert counts[0] > counts[1] > 0  # refused where the damaged entry was the hint, taken elsewhere


def _batch_hidden_in_a_value(directory: str) -> bytes:
    """Five 5-record batches (offsets 0-24, timestamps 1000 + offset) whose second holds, in the
    value of its record 7, a whole batch with its CRC (offset 7) and after it what reads as the
    header of a batch of offsets 8-12 that ends exactly where the fourth real batch starts. The
    offset index entry of the second batch points at the hidden one: its CRC holds and it starts
    at or below the entry's offset, so only the walk to the next entry (which it steps over) tells.
    Returns record 7's value."""
    def batch(base: int, value_of_7: bytes = b"") -> bytes:
        return v2_batch(base, [(o, 1000 + o, b"k%d" % o, value_of_7 if o == 7 else b"v%d" % o, [])
                               for o in range(base, base + 5)])

    hidden = v2_batch(7, [(7, 1007, b"k7", b"hidden", [])])
    placeholder = struct.pack(">qi", 8, 0) + bytes(49)
    sizes = [len(batch(0)), len(batch(5, hidden + placeholder)), len(batch(10))]
    positions = [0, sizes[0], sizes[0] + sizes[1], sum(sizes)]
    hidden_at = positions[1] + batch(5, hidden + placeholder).find(hidden)
    bogus_at = hidden_at + len(hidden)
    # baseOffset, length, leader epoch, magic, crc, attributes, lastOffsetDelta, first and max
    # timestamp (the second batch's: the time index entry's), producer id and epoch, sequence, count
    bogus = struct.pack(">qiibIhiqqqhii", 8, positions[3] - bogus_at - 12, 0, 2, 0, 0, 4, 1008, 1009, -1, -1, -1, 5)
    assert len(bogus) == len(placeholder)
    data = batch(0) + batch(5, hidden + bogus) + batch(10) + batch(15) + batch(20)
    assert data[positions[3]:positions[3] + 8] == struct.pack(">q", 15)
    stem = os.path.join(directory, f"{0:020d}")
    with open(stem + ".log", "wb") as f:
        f.write(data)
    with open(stem + ".index", "wb") as f:
        f.write(offset_index_bytes([(4, 0), (9, hidden_at), (14, positions[2]), (19, positions[3])], 0))
    with open(stem + ".timeindex", "wb") as f:
        f.write(time_index_bytes([(1004, 4), (1009, 9), (1014, 14), (1019, 19), (1024, 24)], 0))
    return hidden + bogus


def test_a_batch_hidden_in_a_value_is_never_taken_for_the_log(tmp_path, monkeypatch, caplog) -> None:
    directory = tmp_path / "topic-0"
    directory.mkdir()
    value_of_7 = _batch_hidden_in_a_value(str(directory))
    counts = _counting(monkeypatch)
    dirs = LogDirs([str(tmp_path)])
    plog = dirs.partition("topic-0")
    with caplog.at_level(logging.WARNING, logger="kfs"):
        for offset in range(25):
            record = plog.record_at(offset)
            value = value_of_7 if offset == 7 else b"v%d" % offset
            assert (record.offset, record.timestamp, record.value) == (offset, 1000 + offset, value)
        for target in range(1010, 1015):
            found = plog.locate_time(target)
            assert (found.offset, found.timestamp, found.batch_base_offset) == (target - 1000, target, 10)
    dirs.close()
    assert "does not match the log" in caplog.text
    assert counts[1] < counts[0]
