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

from kfs.record import (
    HEADER_PROBE_SIZE,
    complete_legacy_header,
    crc_is_valid,
    decode_records,
    parse_batch_header,
    parse_control_record,
    peek_size,
)

FIXTURES = Path(__file__).parent / "fixtures" / "kafka-written"
GOLDEN = FIXTURES / "golden"
PARTITIONS = sorted(p.name for p in GOLDEN.iterdir() if p.is_dir())
BATCH_FIELDS = (
    "position", "size", "base_offset", "last_offset", "magic", "compression", "timestamp_type",
    "max_timestamp", "crc", "is_transactional", "is_control", "producer_id", "producer_epoch",
    "base_sequence", "partition_leader_epoch", "delete_horizon_ms", "record_count",
)


def _segments(partition: str) -> list[Path]:
    """The partition's .log files, in base offset order, from whichever log dir holds it."""
    found = []
    for logdir in sorted((FIXTURES / "logdirs").iterdir()):
        d = logdir / partition
        if d.is_dir() and not d.name.endswith(("-delete", "-future", "-stray")):
            found += [f for f in d.iterdir() if f.name.endswith(".log")]
    return sorted(found, key=lambda f: int(f.name[:-4]))


def _walk(partition: str):
    """(segment base offset, header, batch bytes) of every batch, with only the probe read for the header."""
    for seg in _segments(partition):
        data = seg.read_bytes()
        pos = 0
        while pos < len(data):
            size, _magic = peek_size(data, pos)
            probe = data[pos:pos + min(HEADER_PROBE_SIZE, size)]
            header = parse_batch_header(probe, 0, pos)
            batch = memoryview(data)[pos:pos + size]
            complete_legacy_header(header, batch)
            yield int(seg.name[:-4]), header, batch
            pos += size


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
    for base, h, batch in _walk(partition):
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
    for _base, h, batch in _walk(partition):
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
    for _base, h, batch in _walk(partition):
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
