"""docs/spec.md section 8 in the JSON lines: internal topics' keys and values as decoded objects, through
`kfs cat`, a real mount and the one renderer; `decode=raw` and `decode_error` where bytes do not decode."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest
from conftest import GOLDEN, LOGDIRS, read_jsonl, run_kfs, v2_batch, write_segment
from message_bytes import assignment_v0, commit_key, group_value_v3, i16, i32, i64, string, subscription_v1
from mounts import mounted, needs_fuse

COMMIT_VALUE_V3 = i16(3) + i64(42) + i32(7) + string("meta") + i64(1_700_000_000_000)
GROUP_KEY = i16(2) + string("billing")
RECORDS = [  # (offset, timestamp, key, value, headers)
    (0, 1000, commit_key(1), COMMIT_VALUE_V3, []),
    (1, 1001, GROUP_KEY,
     group_value_v3("consumer", subscription_v1(["orders"], {}), assignment_v0({"orders": [0]}, None)), []),
    (2, 1002, commit_key(1), None, []),  # a tombstone: the commit is deleted
    (3, 1003, commit_key(1), i16(3) + b"\x00\x01", [("h", b"v")]),  # cut short: does not decode
    (4, 1004, None, b"\x00\x00", []),  # no key at all
]


@pytest.fixture(scope="module")
def offsets_logdir(tmp_path_factory: pytest.TempPathFactory) -> str:
    logdir = tmp_path_factory.mktemp("logdir")
    partition = logdir / "__consumer_offsets-7"
    partition.mkdir()
    first, second = RECORDS[:3], RECORDS[3:]
    write_segment(str(partition), 0, [[(v2_batch(0, first), first)], [(v2_batch(3, second), second)]])
    return str(logdir)


def cat(logdir: str, partition: str, *args: str) -> bytes:
    proc = run_kfs("cat", logdir, partition, *args)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_cat_shows_keys_and_values_as_objects(offsets_logdir):
    lines = [json.loads(x) for x in cat(offsets_logdir, "__consumer_offsets-7").splitlines()]
    assert [x["offset"] for x in lines] == [0, 1, 2, 3, 4]
    commit = lines[0]
    assert list(commit) == ["topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value", "headers"]
    assert commit["key"] == {"type": "OffsetCommitKey", "version": 1,
                             "data": {"group": "billing", "topic": "orders", "partition": 3}}
    assert commit["value"] == {"type": "OffsetCommitValue", "version": 3, "data": {
        "offset": 42, "leaderEpoch": 7, "metadata": "meta", "commitTimestamp": 1_700_000_000_000}}
    member = lines[1]["value"]["data"]["members"][0]
    assert member["subscription"] == {"topics": ["orders"], "userData": None, "ownedPartitions": []}
    assert member["assignment"] == {"assignedPartitions": [{"topic": "orders", "partitions": [0]}], "userData": None}
    assert lines[2]["key"]["type"] == "OffsetCommitKey" and lines[2]["value"] is None


def test_a_record_that_does_not_decode_keeps_its_bytes_and_says_why(offsets_logdir):
    raw = [json.loads(x) for x in cat(offsets_logdir, "__consumer_offsets-7", "--decode", "raw").splitlines()]
    lines = [json.loads(x) for x in cat(offsets_logdir, "__consumer_offsets-7").splitlines()]
    for offset, reason in ((3, "OffsetCommitValue version 3: ends early"),
                           (4, "could not read the version from the key")):
        assert lines[offset]["decode_error"] == reason
        assert {k: v for k, v in lines[offset].items() if k != "decode_error"} == raw[offset]
        assert list(lines[offset])[-1] == "decode_error"
    assert raw[0]["key"] == commit_key(1).decode()  # section 3: valid UTF-8 is a string
    assert raw[0]["value"] == {"base64": base64.b64encode(COMMIT_VALUE_V3).decode()}
    assert not any("decode_error" in x for x in raw)


def test_decoding_can_be_turned_off_and_ordinary_topics_are_untouched(offsets_logdir, tmp_path):
    plain = tmp_path / "consumer_offsets-7"  # same bytes, an ordinary topic's name
    os.symlink(Path(offsets_logdir) / "__consumer_offsets-7", plain)
    assert cat(str(tmp_path), "consumer_offsets-7") == cat(offsets_logdir, "__consumer_offsets-7", "--decode", "raw") \
        .replace(b'"topic": "__consumer_offsets"', b'"topic": "consumer_offsets"')


def test_kafka_written_metadata_log_control_record_decodes_and_random_values_stay_bytes():
    logdir = LOGDIRS[1]
    golden = read_jsonl(GOLDEN / "__cluster_metadata-0" / "records.jsonl")
    lines = [json.loads(x) for x in cat(logdir, "__cluster_metadata-0").splitlines()]
    assert len(lines) == len(golden)
    # The fixture's values are random bytes, not metadata records: shown as bytes, exactly as the
    # Kafka-written golden (and the shared conformance check) has them.
    assert lines == golden
    shown = [json.loads(x)
             for x in cat(logdir, "__cluster_metadata-0", "--control", "show", "--count", "1").splitlines()]
    assert shown[0]["control"] == "LEADER_CHANGE"  # written by Kafka's MemoryRecordsBuilder.appendLeaderChangeMessage
    assert shown[0]["value"]["type"] == "LeaderChangeMessage" and shown[0]["value"]["data"]["leaderId"] >= 0


@needs_fuse
def test_a_mount_shows_the_same_lines_as_cat_and_decode_raw_turns_it_off(offsets_logdir, tmp_path):
    decoded = cat(offsets_logdir, "__consumer_offsets-7")
    raw = cat(offsets_logdir, "__consumer_offsets-7", "--decode", "raw")
    with mounted(tmp_path, [offsets_logdir], name="auto") as mnt:
        assert (mnt / "__consumer_offsets-7" / "messages.jsonl").read_bytes() == decoded
        assert os.stat(mnt / "__consumer_offsets-7" / "messages.jsonl").st_size == len(decoded)
        tail = (mnt / "__consumer_offsets-7" / "offset" / "3.jsonl").read_bytes()
        assert tail == b"".join(decoded.splitlines(keepends=True)[3:])
    with mounted(tmp_path, [offsets_logdir], name="raw", decode="raw") as mnt:
        assert (mnt / "__consumer_offsets-7" / "messages.jsonl").read_bytes() == raw


def test_a_bad_decode_option_is_one_sentence(offsets_logdir, tmp_path):
    proc = run_kfs("mount", "-o", "decode=json", offsets_logdir, str(tmp_path))
    err = proc.stderr.decode()
    assert proc.returncode != 0 and "decode must be auto or raw" in err and "Traceback" not in err


def test_spark_grep_prints_internal_topics_as_kfs_cat_does():
    """A grep task's lines (kfs spark grep) come from the same renderer: decoded, or raw when asked."""
    from kfs.spark.jobs import grep_split
    from kfs.spark.options import parse_options
    from kfs.spark.plan import plan_splits

    logdir = str(Path(__file__).parent / "fixtures" / "internal-topics" / "logdirs" / "broker-a")
    opts = parse_options({"path": logdir})
    for decode in ("auto", "raw"):
        got = b"".join(chunk for split in plan_splits(opts)
                       for chunk in grep_split(split, opts, "orders-app", False, decode))
        lines = [json.loads(x) for x in got.splitlines()]
        assert lines and {x["topic"] for x in lines} == {"__consumer_offsets"}
        for line in lines:
            (want,) = [json.loads(x) for x in cat(logdir, f"{line['topic']}-{line['partition']}", "--offset",
                                                  str(line["offset"]), "--count", "1", "--decode", decode).splitlines()]
            assert line == want
        assert all(isinstance(x["key"], dict) for x in lines) == (decode == "auto")
