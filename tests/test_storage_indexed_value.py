"""A `.value` lookup walks one index interval (PartitionLog._indexed_record): on Kafka-written logs it
answers every offset as Kafka's own records say, it is the path most lookups take, and an index entry
that does not match the log sends the lookup to the general path, which still answers right.

(The random logs of test_storage_properties check `record_at` at every offset against a brute-force
oracle, with damaged indexes of every kind.)"""

from __future__ import annotations

import logging
import os
import shutil
import struct

import pytest
from builders import golden_rows
from conftest import GOLDEN, GOLDEN_PARTITIONS, LOGDIRS, read_jsonl

from kfs.storage import LogDirs, NoRecordAtOffset

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "kafka-written")


def _as_row(plog, record) -> tuple:
    return (plog.topic, plog.partition, record.offset, record.timestamp, record.timestamp_type, record.key,
            record.value, [tuple(h) for h in record.headers])


@pytest.mark.parametrize("partition", GOLDEN_PARTITIONS)
def test_every_offset_is_kafkas_record_or_no_record(partition: str) -> None:
    dirs = LogDirs(LOGDIRS)
    plog = dirs.partition(partition)
    golden = {row[2]: row for row in golden_rows(partition)}
    for offset in range(plog.log_start_offset(), plog.log_end_offset()):
        if offset in golden:
            assert _as_row(plog, plog.record_at(offset)) == golden[offset], offset
        else:  # a compacted-away offset or a transaction marker
            with pytest.raises(NoRecordAtOffset):
                plog.record_at(offset)
    dirs.close()


def test_most_lookups_take_the_one_walk_path() -> None:
    dirs = LogDirs(LOGDIRS)
    plog = dirs.partition("orders-0")
    offsets = range(plog.log_start_offset(), plog.log_end_offset())
    answered = sum(plog._indexed_record(n) is not None for n in offsets)
    # The rest: offsets past a segment's last index entry, which the general path finds.
    assert answered >= 0.7 * len(offsets), (answered, len(offsets))
    dirs.close()


@pytest.fixture
def orders(tmp_path):
    shutil.copytree(os.path.join(FIXTURES, "logdirs", "broker-a", "orders-0"), tmp_path / "orders-0")
    return tmp_path


def _entries(index_path: str) -> list[tuple[int, int]]:
    with open(index_path, "rb") as f:
        data = f.read()
    return [struct.unpack_from(">ii", data, i) for i in range(0, len(data) - 7, 8) if data[i:i + 8] != bytes(8)]


@pytest.mark.parametrize("damage", ["inside a batch", "a later batch"])
def test_an_entry_that_does_not_match_the_log_falls_back(orders, caplog, damage: str) -> None:
    segment_index = os.path.join(orders, "orders-0", f"{0:020d}.index")
    entries = _entries(segment_index)
    assert len(entries) >= 4
    slot = 1
    relative, position = entries[slot]
    later = [b["position"] for b in read_jsonl(GOLDEN / "orders-0" / "batches.jsonl")
             if b["segment_base_offset"] == 0 and position < b["position"] < entries[slot + 1][1]]
    assert later
    # a position inside the entry's batch, or the start of a batch past the entry's offset
    wrong = position + 7 if damage == "inside a batch" else later[0]
    with open(segment_index, "r+b") as f:
        f.seek(slot * 8)
        f.write(struct.pack(">ii", relative, wrong))
    golden = {row[2]: row for row in golden_rows("orders-0")}
    targets = [o for o in golden if relative <= o < entries[slot + 1][0]]
    assert targets
    dirs = LogDirs([str(orders)])
    plog = dirs.partition("orders-0")
    with caplog.at_level(logging.WARNING, logger="kfs"):
        for offset in targets:
            assert plog._indexed_record(offset) is None, offset
            assert _as_row(plog, plog.record_at(offset)) == golden[offset], offset
    assert "does not match the log" in caplog.text
    dirs.close()
