"""Every record of Kafka-written internal topics (tests/fixtures/internal-topics, written and answered by
Kafka's own classes and JSON converters) decodes to exactly what Kafka says: through kfs.internal_topics, through
`kfs cat`, through a real mount, and through `kfs dump` with DumpLogSegments' decoder options.

The golden JSON is Kafka's converters' verbatim (README there): bytes fields are base64 strings, and a
consumer group's member subscription/assignment stay bytes, with Kafka's ConsumerProtocol decoding of
them beside (`consumer_protocol`). kfs shows bytes as docs/spec.md section 3 does and the consumer protocol in
place, so the golden is mapped to that (bytes fields found by the schemas, whose typing the first test
pins verbatim in Kafka's own JSON)."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import run_kfs
from mounts import mounted, needs_fuse

from kfs.internal_topics import decode_control, decode_control_key, decode_key, decode_value
from kfs.internal_topics.framing import metadata_type_name
from kfs.internal_topics.render import kafka_json
from kfs.internal_topics.schema import Field, Message
from kfs.internal_topics.schemas.consumer_protocol import CONSUMER_PROTOCOL
from kfs.internal_topics.schemas.control import CONTROL
from kfs.internal_topics.schemas.group_coordinator import GROUP_COORDINATOR
from kfs.internal_topics.schemas.metadata import METADATA
from kfs.internal_topics.schemas.transaction_coordinator import TRANSACTION_COORDINATOR
from kfs.record import parse_control_record
from kfs.storage import LogDirs, LogSegment

FIXTURES = Path(__file__).parent / "fixtures" / "internal-topics"
LOGDIR = FIXTURES / "logdirs" / "broker-a"
GOLDEN = FIXTURES / "golden"
PARTITIONS = sorted(p.name for p in GOLDEN.iterdir() if p.is_dir())
SNAPSHOT = "00000000000000000048-0000000001.checkpoint"
SCHEMAS: dict[str, Message] = {**GROUP_COORDINATOR, **TRANSACTION_COORDINATOR, **METADATA, **CONTROL,
                               **CONSUMER_PROTOCOL}


def golden(name: str, file: str = "records.jsonl") -> list[dict]:
    return [json.loads(line) for line in (GOLDEN / name / file).read_text().splitlines() if line.strip()]


def topic_of(partition: str) -> str:
    return partition.rsplit("-", 1)[0]


def kafka_view(decoded: Any) -> Any:
    """A kfs.internal_topics Decoded as Kafka's converters print it (bytes as base64), parsed back."""
    if decoded is None:
        return None
    return json.loads(kafka_json({"type": decoded.type, "version": decoded.version, "data": decoded.data}))


def with_consumer_protocol(want: dict) -> dict:
    """The golden value, and for a consumer group's metadata Kafka's ConsumerProtocol decoding put in place
    of the members' bytes (what kfs shows, as DumpLogSegments does)."""
    value = json.loads(json.dumps(want["value"]))
    if "consumer_protocol" in want:
        for member, decoded in zip(value["data"]["members"], want.get("consumer_protocol", []), strict=True):
            member["subscription"] = decoded["subscription"]["data"]
            member["assignment"] = decoded["assignment"]["data"]
    return value


# ---- 1. kfs.internal_topics, compared with Kafka's converters verbatim ---------------------------------

def records_of(partition: str) -> list[tuple[Any, str | None]]:
    """(record, control type or None) of a partition, control records included."""
    plog = LogDirs([str(LOGDIR)]).partition(partition)
    return [(r, getattr(r, "control", None)) for r in plog.records(plog.log_start_offset(), control="show")]


def snapshot_records() -> list[tuple[Any, str | None]]:
    """The KRaft snapshot's records in file order (its batches start at offset 0)."""
    path = LOGDIR / "__cluster_metadata-0" / SNAPSHOT
    segment = LogSegment(str(path.parent), 0, log_path=str(path))
    records = []
    try:
        for header, body in segment.batches(0, segment.file_size()):
            for record in segment.records_of(header, body):
                records.append((record, parse_control_record(record)[0] if header.is_control else None))
    finally:
        segment.close()
    return records


def kafka_json_of(topic: str, record: Any, control: str | None) -> dict:
    if control is not None:
        return {"key": kafka_view(decode_control_key(record.key)),
                "value": kafka_view(decode_control(control, record.value))}
    return {"key": kafka_view(decode_key(topic, record.key)),
            "value": kafka_view(decode_value(topic, record.key, record.value))}


def compare_in_kafka_json(topic: str, records: list[tuple[Any, str | None]], wants: list[dict]) -> None:
    assert [r.offset for r, _ in records] == [w["offset"] for w in wants]
    for (record, control), want in zip(records, wants, strict=True):
        assert record.timestamp == want["timestamp"]
        assert control == want.get("control")
        got = kafka_json_of(topic, record, control)
        if "consumer_protocol" in want:  # kfs decodes the members' bytes in place: compare both ways
            assert got["value"] == with_consumer_protocol(want), record.offset
        else:
            assert got == {"key": want["key"], "value": want["value"]}, record.offset


@pytest.mark.parametrize("partition", PARTITIONS)
def test_every_record_decodes_to_kafkas_json(partition):
    compare_in_kafka_json(topic_of(partition), records_of(partition), golden(partition))


def test_every_record_of_the_kraft_snapshot_decodes_to_kafkas_json():
    compare_in_kafka_json("__cluster_metadata", snapshot_records(), golden("__cluster_metadata-0", SNAPSHOT + ".jsonl"))


def test_the_golden_covers_what_it_should():
    names = {w[part]["type"] for p in PARTITIONS for w in golden(p) for part in ("key", "value") if w[part]}
    newer = {"ConsumerGroupRegularExpressionKey", "ClearElrRecord"}  # Kafka 4.x: not written by 1eb7644349c
    group_keys = {n for n in GROUP_COORDINATOR if n.endswith("Key")} - newer
    assert group_keys <= names and set(METADATA) - newer <= names
    assert {"TransactionLogValue", "VotersRecord", "LeaderChangeMessage", "EndTxnMarker"} <= names


# ---- 2. the JSON lines: kfs cat and a mount ------------------------------------------------------

def section3(data: bytes) -> Any:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode()}


def in_section3(fields: list[Field], data: dict) -> dict:
    """Kafka's JSON of a struct with its bytes fields shown as docs/spec.md section 3 shows bytes."""
    by_name = {f.name: f for f in fields}
    out = {}
    for name, value in data.items():
        f = by_name[name]
        if value is None or f.type not in ("bytes", "struct"):
            out[name] = value
        elif f.type == "bytes":
            out[name] = [section3(base64.b64decode(v)) for v in value] if f.array else section3(base64.b64decode(value))
        else:
            assert f.struct is not None
            out[name] = ([in_section3(f.struct.fields, v) for v in value] if f.array
                         else in_section3(f.struct.fields, value))
    return out


def section8(obj: dict | None) -> dict | None:
    if obj is None:
        return None
    return {**obj, "data": in_section3(SCHEMAS[obj["type"]].body.fields, obj["data"])}


def expected_line(want: dict) -> tuple[Any, Any]:
    value = section8(want["value"])
    if "consumer_protocol" in want:
        assert value is not None
        for member, decoded in zip(value["data"]["members"], want["consumer_protocol"], strict=True):
            for part in ("subscription", "assignment"):
                protocol = decoded[part]
                member[part] = in_section3(SCHEMAS[protocol["type"]].body.fields, protocol["data"])
    return section8(want["key"]), value


def assert_lines_are_golden(partition: str, text: bytes) -> None:
    lines = [json.loads(line) for line in text.splitlines()]
    wants = golden(partition)
    assert [x["offset"] for x in lines] == [w["offset"] for w in wants]
    for line, want in zip(lines, wants, strict=True):
        assert "decode_error" not in line, line
        assert line.get("control") == want.get("control")
        assert (line["key"], line["value"]) == expected_line(want), line["offset"]


@pytest.mark.parametrize("partition", PARTITIONS)
def test_kfs_cat_shows_every_record_as_kafka_decodes_it(partition):
    proc = run_kfs("cat", str(LOGDIR), partition, "--control", "show")
    assert proc.returncode == 0, proc.stderr
    assert_lines_are_golden(partition, proc.stdout)


@needs_fuse
def test_a_mount_shows_every_record_as_kafka_decodes_it(tmp_path):
    with mounted(tmp_path, [str(LOGDIR)], control="show") as mnt:
        for partition in PARTITIONS:
            assert_lines_are_golden(partition, (mnt / partition / "messages.jsonl").read_bytes())
        middle = golden("__consumer_offsets-1")[20]["offset"]
        tail = (mnt / "__consumer_offsets-1" / "offset" / f"{middle}.jsonl").read_bytes()
        assert json.loads(tail.splitlines()[0])["offset"] == middle


# ---- 3. kfs dump with DumpLogSegments' decoders ------------------------------------------------

def dump(*args: str) -> list[str]:
    proc = run_kfs("dump", *args)
    assert proc.returncode == 0 and b"Traceback" not in proc.stderr, proc.stderr
    return proc.stdout.decode().splitlines()


def record_lines(lines: list[str]) -> dict[int, str]:
    return {int(m[1]): line for line in lines if (m := re.match(r"\| offset: (\d+) ", line))}


def kafka_key_value(want: dict) -> tuple[dict, dict | str]:
    value = "<DELETE>" if want["value"] is None else with_consumer_protocol(want)
    key = {"type": str(want["key"]["version"]), "data": want["key"]["data"]}
    if isinstance(value, dict):
        value = {"version": str(value["version"]), "data": value["data"]}
    return key, value


@pytest.mark.parametrize("partition", [p for p in PARTITIONS if not p.startswith("__cluster")])
def test_dump_decoders_print_kafkas_json(partition):
    option = "--offsets-decoder" if partition.startswith("__consumer") else "--transaction-log-decoder"
    logs = sorted(str(p) for p in (LOGDIR / partition).glob("*.log"))
    lines = record_lines(dump(option, *logs))
    for want in golden(partition):
        line = lines[want["offset"]]
        if "control" in want:
            assert "key:" not in line and f"endTxnMarker: {want['control']}" in line
            continue
        key_text, _, payload_text = line.partition(" key: ")[2].partition(" payload: ")
        key, value = kafka_key_value(want)
        assert json.loads(key_text) == key
        assert (payload_text if value == "<DELETE>" else json.loads(payload_text)) == value


@pytest.mark.parametrize("file", ["00000000000000000000.log", SNAPSHOT])
def test_dump_cluster_metadata_decoder_prints_kafkas_json(file):
    lines = dump("--cluster-metadata-decoder", str(LOGDIR / "__cluster_metadata-0" / file))
    wants = golden("__cluster_metadata-0", "records.jsonl" if file.endswith(".log") else file + ".jsonl")
    by_offset = record_lines(lines)
    if file == SNAPSHOT:
        assert lines[1] == "Snapshot end offset: 48, epoch: 1"
    labels = {"LEADER_CHANGE": "LeaderChange: ", "SNAPSHOT_HEADER": "SnapshotHeader ",
              "SNAPSHOT_FOOTER": "SnapshotFooter ", "KRAFT_VERSION": "KRaftVersion ", "KRAFT_VOTERS": "KRaftVoters "}
    for want in wants:
        line = by_offset[want["offset"]]
        if want.get("control") in labels:
            assert json.loads(line.split(labels[want["control"]], 1)[1]) == want["value"]["data"]
        elif "control" in want:
            assert f"endTxnMarker: {want['control']}" in line
        else:
            value = want["value"]
            assert json.loads(line.split(" payload: ", 1)[1]) == {
                "type": metadata_type_name(value["type"]), "version": value["version"], "data": value["data"]}


def test_dump_producer_snapshot_prints_what_kafka_reads():
    path = LOGDIR / "__consumer_offsets-2" / "00000000000000000012.snapshot"
    (want,) = [json.loads((GOLDEN / "__consumer_offsets-2" / (path.name + ".json")).read_text())]
    lines = dump(str(path))[1:]
    entries = want["data"]["producerEntries"]
    assert len(lines) == len(entries) > 0
    for line, e in zip(lines, entries, strict=True):
        txn = e["currentTxnFirstOffset"]
        first = "OptionalLong.empty" if txn < 0 else f"OptionalLong[{txn}]"
        head = (f"producerId: {e['producerId']} producerEpoch: {e['epoch']} coordinatorEpoch: {e['coordinatorEpoch']} "
                f"currentTxnFirstOffset: {first} lastTimestamp: {e['timestamp']}")
        assert line.startswith(head)
        if e["lastOffset"] >= 0:
            assert line.endswith(f" lastSequence: {e['lastSequence']} lastOffset: {e['lastOffset']} "
                                 f"offsetDelta: {e['offsetDelta']} timestamp: {e['timestamp']}")


def test_dump_checkpoint_files_print_what_kafkas_readers_return():
    want = json.loads((GOLDEN / "checkpoints.json").read_text())
    for name, checkpoint in want["log_dir"].items():
        if not name.endswith("-checkpoint"):
            continue
        lines = dump(str(LOGDIR / name))
        assert lines[1] == f"version: {checkpoint['version']} entries: {len(checkpoint['entries'])}"
        assert sorted(lines[2:]) == sorted(f"topic: {e['topic']} partition: {e['partition']} offset: {e['offset']}"
                                           for e in checkpoint["entries"])
    for partition, files in want["partitions"].items():
        epochs = files["leader-epoch-checkpoint"]
        lines = dump(str(LOGDIR / partition / "leader-epoch-checkpoint"))
        assert lines[1:] == [f"version: {epochs['version']} entries: {len(epochs['entries'])}"] + [
            f"epoch: {e['epoch']} startOffset: {e['start_offset']}" for e in epochs["entries"]]
        metadata = files["partition.metadata"]
        assert dump(str(LOGDIR / partition / "partition.metadata"))[1:] == [
            f"version: {metadata['version']} topicId: {metadata['topic_id']}"]


# ---- 4. records Kafka does not decode (tests/fixtures/internal-topics-undecodable) ----------------

UNDECODABLE = Path(__file__).parent / "fixtures" / "internal-topics-undecodable"


@pytest.mark.parametrize("partition", sorted(p.name for p in (UNDECODABLE / "golden").iterdir() if p.is_dir()))
def test_a_decode_error_exactly_where_kafka_cannot_decode(partition):
    """Where Kafka's deserializers throw, kfs keeps the bytes and says why; where Kafka reads a record
    (trailing bytes a coordinator ignores, a newer value version, members' bytes that are not the
    consumer protocol), kfs shows what Kafka shows."""
    logdir = str(UNDECODABLE / "logdirs" / "broker-a")
    wants = [json.loads(x) for x in (UNDECODABLE / "golden" / partition / "records.jsonl").read_text().splitlines()]
    decoded = [json.loads(x) for x in run_kfs("cat", logdir, partition).stdout.splitlines()]
    raw = [json.loads(x) for x in run_kfs("cat", logdir, partition, "--decode", "raw").stdout.splitlines()]
    assert [x["offset"] for x in decoded] == [x["offset"] for x in raw] == [w["offset"] for w in wants]
    for line, bytes_line, want in zip(decoded, raw, wants, strict=True):
        if "kafka_error" in want:
            assert line.pop("decode_error") and line == bytes_line, want
        else:
            assert "decode_error" not in line
            assert (line["key"], line["value"]) == expected_line(want), want["offset"]
    assert any("kafka_error" in w for w in wants) and any("kafka_error" not in w for w in wants)
