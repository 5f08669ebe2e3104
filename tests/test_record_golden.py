"""The record layer agrees with Kafka's own classes on the Kafka-written fixtures.

Walks every segment of every golden partition with peek_size/parse_batch_header, as FileRecords
iterates a segment, and compares batches, records and control markers with the golden files
(tests/fixtures/kafka-written/README.md says how they were written).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from builders import golden_batches

from kfs.record import (
    crc_is_valid,
    decode_records,
    parse_control_record,
)

FIXTURES = Path(__file__).parent / "fixtures" / "kafka-written"
GOLDEN = FIXTURES / "golden"
PARTITIONS = sorted(p.name for p in GOLDEN.iterdir() if p.is_dir())
BATCH_FIELDS = (
    "position", "size", "base_offset", "last_offset", "magic", "compression", "timestamp_type",
    "max_timestamp", "crc", "is_transactional", "is_control", "producer_id", "producer_epoch",
    "base_sequence", "partition_leader_epoch", "delete_horizon_ms", "record_count",
)


def _jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _render(b: bytes | None):
    if b is None:
        return None
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(b).decode("ascii")}


@pytest.mark.parametrize("partition", PARTITIONS)
def test_batches_equal_kafkas_file_records_iteration(partition: str) -> None:
    expected = _jsonl(GOLDEN / partition / "batches.jsonl")
    got = []
    for base, h, batch in golden_batches(partition):
        row = {"segment_base_offset": base, **{f: getattr(h, f) for f in BATCH_FIELDS}}
        row["is_valid"] = crc_is_valid(batch, h)
        got.append(row)
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert g == {k: e[k] for k in g}, f"batch at {e['segment_base_offset']}:{e['position']}"


@pytest.mark.parametrize("partition", PARTITIONS)
def test_records_equal_kafkas_decoding(partition: str) -> None:
    info = json.loads((GOLDEN / partition / "info.json").read_text())
    expected = _jsonl(GOLDEN / partition / "records.jsonl")
    got = []
    for _base, h, batch in golden_batches(partition):
        if h.is_control:
            continue
        for r in decode_records(batch, h):
            if r.offset < info["log_start_offset"]:
                continue
            got.append({
                "topic": info["topic"], "partition": info["partition"], "offset": r.offset,
                "timestamp": r.timestamp, "timestamp_type": r.timestamp_type, "key": _render(r.key),
                "value": _render(r.value), "headers": [[k, _render(v)] for k, v in r.headers],
            })
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert g == e


@pytest.mark.parametrize("partition", PARTITIONS)
def test_control_records_equal_kafkas_markers(partition: str) -> None:
    expected = _jsonl(GOLDEN / partition / "control.jsonl")
    got = []
    for _base, h, batch in golden_batches(partition):
        if not h.is_control:
            continue
        for r in decode_records(batch, h):
            name, epoch = parse_control_record(r)
            row = {"offset": r.offset, "timestamp": r.timestamp, "control": name,
                   "producer_id": h.producer_id}
            if epoch is not None:
                row["coordinator_epoch"] = epoch
            got.append(row)
    assert got == expected
