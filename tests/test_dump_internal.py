"""`kfs dump` for Kafka's internal topics and the files beside segments: DumpLogSegments'
--offsets-decoder / --transaction-log-decoder / --cluster-metadata-decoder lines, producer-state
`.snapshot` files, KRaft snapshot `.checkpoint` files and checkpoint files.

The expected lines are written out here from DumpLogSegments.java (Kafka 4.x) and the JSON its
converters print; the bytes are packed by hand (tests/message_bytes.py)."""

from __future__ import annotations

import base64
import os
import struct
import subprocess
import uuid
from pathlib import Path

import crc32c
import pytest
from conftest import LOGDIRS, kfs_command, v2_batch, write_segment
from message_bytes import (
    carray,
    commit_key,
    cstring,
    group_value_v3,
    i8,
    i16,
    i32,
    i64,
    metadata_frame,
    string,
    tags,
)

COMMIT_VALUE_V3 = i16(3) + i64(42) + i32(7) + string("meta") + i64(1_700_000_000_000)


def kfs_dump(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*kfs_command(), "dump", *args], capture_output=True, text=True, errors="replace",
                          timeout=120)


def segment(tmp_path: Path, name: str, records: list) -> str:
    directory = tmp_path / name
    directory.mkdir()
    write_segment(str(directory), 0, [[(v2_batch(0, records), records)]])
    return str(directory / "00000000000000000000.log")


def contents(result: subprocess.CompletedProcess) -> list[str]:
    """The record lines' contents (what follows the record metadata)."""
    return [line.split(" headerKeys: []", 1)[1] for line in result.stdout.splitlines() if line.startswith("| offset")]


def test_offsets_decoder_prints_kafkas_json_for_keys_and_values(tmp_path):
    log = segment(tmp_path, "__consumer_offsets-0", [
        (0, 1, commit_key(1), COMMIT_VALUE_V3, []),
        (1, 2, commit_key(1), None, []),
        (2, 3, i16(2) + string("g"), group_value_v3("connect", b"\xff\x00", b"x"), []),
        (3, 4, i16(42) + b"?", b"", []),
        (4, 5, commit_key(0), i16(3) + b"\x00", []),
    ])
    result = kfs_dump("--offsets-decoder", log)
    assert result.returncode == 0, result.stderr
    assert contents(result) == [
        ' key: {"type":"1","data":{"group":"billing","topic":"orders","partition":3}} payload: '
        '{"version":"3","data":{"offset":42,"leaderEpoch":7,"metadata":"meta","commitTimestamp":1700000000000}}',
        ' key: {"type":"1","data":{"group":"billing","topic":"orders","partition":3}} payload: <DELETE>',
        ' key: {"type":"2","data":{"group":"g"}} payload: {"version":"3","data":{"protocolType":"connect",'
        '"generation":5,"protocol":"range","leader":"m-1","currentStateTimestamp":99,"members":[{"memberId":"m-1",'
        '"groupInstanceId":null,"clientId":"client","clientHost":"/10.0.0.1","rebalanceTimeout":300000,'
        '"sessionTimeout":10000,"subscription":"/wA=","assignment":"eA=="}]}}',
        " key: Unknown record type 42 at offset 3, skipping.",
        " key: Error at offset 4, skipping. OffsetCommitValue version 3: ends early",
    ]
    skipped = kfs_dump("--offsets-decoder", "--skip-record-metadata", log)
    assert skipped.stdout.splitlines()[3].startswith('| key: {"type":"1"')


def test_a_record_without_a_key_stops_the_offsets_decoder_with_one_sentence(tmp_path):
    log = segment(tmp_path, "__consumer_offsets-1", [(0, 1, commit_key(1), None, []), (1, 2, None, b"x", [])])
    result = kfs_dump("--offsets-decoder", log)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip() == ("kfs: Failed to decode message at offset 1 using the specified decoder "
                                     "(message had a missing key)")
    assert len(contents(result)) == 1  # the record before it was printed


def test_transaction_log_decoder(tmp_path):
    key = i16(0) + string("txn-1")
    value = (i16(1) + i64(1000) + i16(2) + i32(60000) + i8(2) + carray([cstring("orders") + carray([i32(0)])
                                                                          + tags({})])
             + i64(5000) + i64(4000) + tags({}))
    log = segment(tmp_path, "__transaction_state-0", [(0, 1, key, value, [])])
    assert contents(kfs_dump("--transaction-log-decoder", log)) == [
        ' key: {"type":"0","data":{"transactionalId":"txn-1"}} payload: {"version":"1","data":{"producerId":1000,'
        '"producerEpoch":2,"transactionTimeoutMs":60000,"transactionStatus":2,"transactionPartitions":'
        '[{"topic":"orders","partitionIds":[0]}],"transactionLastUpdateTimestampMs":5000,'
        '"transactionStartTimestampMs":4000}}']


def test_cluster_metadata_decoder(tmp_path):
    topic_id = uuid.UUID(int=7).bytes
    quota = metadata_frame(14, 0, carray([cstring("user") + cstring(None) + tags({})]) + cstring("producer_byte_rate")
                           + struct.pack(">d", 1e7) + b"\x00" + tags({}))
    log = segment(tmp_path, "__cluster_metadata-0", [
        (0, 1, None, metadata_frame(2, 0, cstring("orders") + topic_id + tags({})), []),
        (1, 2, None, quota, []),
        (2, 3, None, b"\x07", []),
    ])
    tid = base64.urlsafe_b64encode(topic_id).rstrip(b"=").decode()
    assert contents(kfs_dump("--cluster-metadata-decoder", log)) == [
        f' payload: {{"type":"TOPIC_RECORD","version":0,"data":{{"name":"orders","topicId":"{tid}"}}}}',
        ' payload: {"type":"CLIENT_QUOTA_RECORD","version":0,"data":{"entity":[{"entityType":"user",'
        '"entityName":null}],"key":"producer_byte_rate","value":1.0E7,"remove":false}}',
        " payload: Error at 2, skipping. unknown metadata frame version 7 (only frame version 1 exists)",
    ]


def producer_snapshot(entries: list[tuple], crc: int | None = None) -> bytes:
    body = i32(len(entries)) + b"".join(
        i64(pid) + i16(epoch) + i32(last_seq) + i64(last_offset) + i32(delta) + i64(ts) + i32(coord) + i64(txn_first)
        for pid, epoch, last_seq, last_offset, delta, ts, coord, txn_first in entries)
    return i16(1) + struct.pack(">I", crc32c.crc32c(body) if crc is None else crc) + body


def test_producer_snapshot_lines_and_a_corrupt_one(tmp_path):
    good = tmp_path / "00000000000000000120.snapshot"
    good.write_bytes(producer_snapshot([(1000, 2, 9, 119, 4, 1700, 3, 100), (1001, 0, 2, -1, 0, 1600, -1, -1),
                                        (1002, 0, 1, 50, 3, 1650, -1, -1)]))
    result = kfs_dump(str(good))
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout.splitlines() == [
        f"Dumping {good}",
        "producerId: 1000 producerEpoch: 2 coordinatorEpoch: 3 currentTxnFirstOffset: OptionalLong[100] "
        "lastTimestamp: 1700 firstSequence: 5 lastSequence: 9 lastOffset: 119 offsetDelta: 4 timestamp: 1700",
        "producerId: 1001 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty "
        "lastTimestamp: 1600",
        "producerId: 1002 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty "
        "lastTimestamp: 1650 firstSequence: 2147483646 lastSequence: 1 lastOffset: 50 offsetDelta: 3 timestamp: 1650",
    ]
    bad = tmp_path / "00000000000000000130.snapshot"
    bad.write_bytes(producer_snapshot([(1, 0, 0, 0, 0, 0, -1, -1)], crc=12345))
    result = kfs_dump(str(bad), str(good))
    assert result.returncode == 0 and result.stderr.startswith(
        "Snapshot is corrupt (CRC is no longer valid). Stored crc: 12345. Computed crc: ")
    assert result.stdout.count("producerId: 1000") == 1  # the next file is still dumped


def test_checkpoint_files_of_the_kafka_written_log_dirs(tmp_path):
    broker_b = Path(LOGDIRS[1])
    metadata = broker_b / "__cluster_metadata-0"
    files = [broker_b / "recovery-point-offset-checkpoint", metadata / "leader-epoch-checkpoint",
             metadata / "partition.metadata"]
    result = kfs_dump(*map(str, files))
    assert result.returncode == 0 and result.stderr == ""
    want = []
    for path in files:  # what the files say, read here independently
        lines = path.read_text().splitlines()
        want.append(f"Dumping {path}")
        if path.name == "partition.metadata":
            want.append(f"version: {lines[0].split()[1]} topicId: {lines[1].split()[1]}")
            continue
        want.append(f"version: {lines[0]} entries: {lines[1]}")
        for line in lines[2:]:
            parts = line.split()
            want.append(f"epoch: {parts[0]} startOffset: {parts[1]}" if len(parts) == 2
                        else f"topic: {parts[0]} partition: {parts[1]} offset: {parts[2]}")
    assert result.stdout.splitlines() == want and len(want) > 8
    broken = tmp_path / "replication-offset-checkpoint"
    broken.write_text("0\n2\norders 0 5\n")
    result = kfs_dump(str(broken))
    assert result.returncode == 0 and "Expected [2] entries" in result.stderr


def control_batch(offset: int, control_type: int, value: bytes) -> bytes:
    """A v2 control batch: the attributes' control bit set and the CRC-32C recomputed."""
    batch = bytearray(v2_batch(offset, [(offset, 10, i16(0) + i16(control_type), value, [])]))
    attributes = struct.unpack_from(">h", batch, 21)[0]
    struct.pack_into(">h", batch, 21, attributes | 0x20)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


def test_kraft_snapshot_checkpoint_is_dumped_as_a_log_with_its_id(tmp_path):
    header = control_batch(0, 3, i16(0) + i64(1234) + tags({}))
    records = [(1, 10, None, metadata_frame(12, 0, cstring("metadata.version") + i16(20) + tags({})), [])]
    footer = control_batch(2, 4, i16(0) + tags({}))
    path = tmp_path / "00000000000000000120-0000000003.checkpoint"
    path.write_bytes(header + v2_batch(1, records) + footer)
    result = kfs_dump("--cluster-metadata-decoder", str(path))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1] == "Snapshot end offset: 120, epoch: 3"
    assert lines[3].endswith('SnapshotHeader {"version":0,"lastContainedLogTimestamp":1234}')
    assert lines[5].endswith('payload: {"type":"FEATURE_LEVEL_RECORD","version":0,'
                             '"data":{"name":"metadata.version","featureLevel":20}}')
    assert lines[7].endswith('SnapshotFooter {"version":0}')
    misnamed = tmp_path / "snapshot.checkpoint"
    misnamed.write_bytes(b"")
    result = kfs_dump(str(misnamed))
    assert result.returncode == 1 and "not a KRaft snapshot name" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("option", ["--offsets-decoder", "--transaction-log-decoder", "--cluster-metadata-decoder"])
def test_decoder_options_imply_print_data_log(option, tmp_path):
    log = segment(tmp_path, "t-0", [(0, 1, b"k", b"v", [])])
    result = kfs_dump(option, log)
    assert result.returncode == 0 and ("key:" in result.stdout or "payload:" in result.stdout)
    assert os.path.exists(log)


def test_the_kraft_bootstrap_snapshot_is_named_as_kafka_names_it(tmp_path):
    source = (Path(__file__).parent / "fixtures" / "internal-topics" / "logdirs" / "broker-a" / "__cluster_metadata-0"
              / "00000000000000000048-0000000001.checkpoint")
    bootstrap = tmp_path / "bootstrap.checkpoint"
    bootstrap.write_bytes(source.read_bytes())
    result = kfs_dump("--cluster-metadata-decoder", str(bootstrap))
    assert result.returncode == 0 and result.stdout.splitlines()[1] == "KRaft bootstrap snapshot"
    assert '"type":"TOPIC_RECORD"' in result.stdout and "Error at" not in result.stdout
