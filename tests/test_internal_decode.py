"""The schema interpreter (kfs/internal_topics) on bytes packed by hand here, field by field, the way
Kafka's generated `write()` lays them out (MessageDataGenerator): each test states the layout it
builds, so a reader that drifts from Kafka's wire rules fails here."""

from __future__ import annotations

import contextlib
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from message_bytes import (
    assignment_v0,
    carray,
    commit_key,
    cstring,
    group_value_v3,
    i8,
    i16,
    i32,
    i64,
    kafka_uuid,
    metadata_frame,
    string,
    subscription_v1,
    tags,
    uv,
)

from kfs.internal_topics import (
    DecodeError,
    decode_control,
    decode_control_key,
    decode_key,
    decode_metadata,
    decode_value,
    internal_topic,
)
from kfs.internal_topics.render import java_double, jsonl, kafka_json
from kfs.internal_topics.schema import Versions, parse

OFFSETS = "__consumer_offsets"
TXN = "__transaction_state"


def test_offset_commit_key_both_versions_name_the_same_schema():
    for version in (0, 1):
        key = decode_key(OFFSETS, commit_key(version))
        assert key is not None
        assert (key.type, key.version) == ("OffsetCommitKey", version)
        assert key.data == {"group": "billing", "topic": "orders", "partition": 3}


@pytest.mark.parametrize("version,body,want", [
    (0, i64(42) + string("m") + i64(1000), {"offset": 42, "metadata": "m", "commitTimestamp": 1000}),
    (1, i64(42) + string("m") + i64(1000) + i64(2000),
     {"offset": 42, "metadata": "m", "commitTimestamp": 1000, "expireTimestamp": 2000}),
    (2, i64(42) + string("") + i64(1000), {"offset": 42, "metadata": "", "commitTimestamp": 1000}),
    (3, i64(42) + i32(7) + string("m") + i64(1000),
     {"offset": 42, "leaderEpoch": 7, "metadata": "m", "commitTimestamp": 1000}),
    # v4 is flexible: compact string, then the tagged-field section (an unknown tag 9 is skipped)
    (4, i64(42) + i32(-1) + cstring("m") + i64(1000) + tags({9: b"xyz"}),
     {"offset": 42, "leaderEpoch": -1, "metadata": "m", "commitTimestamp": 1000}),
])
def test_offset_commit_value_every_version(version, body, want):
    value = decode_value(OFFSETS, commit_key(1), i16(version) + body)
    assert value is not None
    assert (value.type, value.version, value.data) == ("OffsetCommitValue", version, want)
    assert list(value.data) == list(want)  # schema order, as Kafka's converters write it


def test_tombstone_value_is_none_but_the_key_still_chooses_the_schema():
    assert decode_value(OFFSETS, commit_key(1), None) is None
    with pytest.raises(DecodeError, match="unknown record type 99"):
        decode_value(OFFSETS, i16(99) + b"x", None)


def test_group_metadata_of_consumer_protocol_decodes_subscription_and_assignment():
    key = i16(2) + string("billing")
    subscription = subscription_v1(["orders", "refunds"], {"orders": [0, 1]})
    assignment = assignment_v0({"orders": [0]}, b"\xff")
    value = decode_value(OFFSETS, key, group_value_v3("consumer", subscription, assignment))
    assert decode_key(OFFSETS, key).data == {"group": "billing"}  # type: ignore[union-attr]
    assert value is not None and value.type == "GroupMetadataValue"
    (member,) = value.data["members"]
    assert member["subscription"] == {"topics": ["orders", "refunds"], "userData": None,
                                      "ownedPartitions": [{"topic": "orders", "partitions": [0, 1]}]}
    assert member["assignment"] == {"assignedPartitions": [{"topic": "orders", "partitions": [0]}],
                                    "userData": b"\xff"}
    assert member["groupInstanceId"] is None and member["rebalanceTimeout"] == 300000


def test_group_metadata_keeps_bytes_of_other_protocols_and_of_what_does_not_decode():
    key = i16(2) + string("g")
    other = decode_value(OFFSETS, key, group_value_v3("connect", b"\x00\x01abc", b"\x00"))
    assert other is not None and other.data["members"][0]["subscription"] == b"\x00\x01abc"
    broken = decode_value(OFFSETS, key, group_value_v3("consumer", b"\x00\x00\x00\x00\x00\x09", b""))
    assert broken is not None
    assert broken.data["members"][0]["subscription"] == b"\x00\x00\x00\x00\x00\x09"
    assert broken.data["members"][0]["assignment"] == b""


def test_consumer_group_records_of_kip_848():
    topic_id = uuid.uuid4().bytes
    key = i16(8) + string("cg") + string("member-a")  # ConsumerGroupCurrentMemberAssignmentKey
    value = (i16(0) + i32(4) + i32(3) + i8(0)
             + carray([topic_id + carray([i32(0), i32(2)]) + tags({})]) + carray([]) + tags({}))
    k, v = decode_key(OFFSETS, key), decode_value(OFFSETS, key, value)
    assert k is not None and (k.type, k.version) == ("ConsumerGroupCurrentMemberAssignmentKey", 8)
    assert v is not None and v.type == "ConsumerGroupCurrentMemberAssignmentValue"
    assert v.data == {"memberEpoch": 4, "previousMemberEpoch": 3, "state": 0,
                      "assignedPartitions": [{"topicId": kafka_uuid(topic_id), "partitions": [0, 2]}],
                      "partitionsPendingRevocation": []}


def test_tagged_nullable_struct_is_printed_only_when_present():
    # ConsumerGroupMemberMetadataValue v0: ClassicMemberMetadata is tag 0, nullable, default null
    key = i16(5) + string("cg") + string("m")
    base = (i16(0) + cstring(None) + cstring("rack-1") + cstring("c") + cstring("/h") + carray([cstring("orders")])
            + cstring(None) + i32(45000) + cstring("uniform"))
    without = decode_value(OFFSETS, key, base + tags({}))
    assert without is not None and "classicMemberMetadata" not in without.data
    classic = uv(1) + i32(10000) + carray([cstring("range") + uv(3) + b"\x01\x02" + tags({})]) + tags({})
    with_it = decode_value(OFFSETS, key, base + tags({0: classic}))
    assert with_it is not None
    assert with_it.data["classicMemberMetadata"] == {
        "sessionTimeoutMs": 10000, "supportedProtocols": [{"name": "range", "metadata": b"\x01\x02"}]}
    assert list(with_it.data)[-1] == "classicMemberMetadata"


def test_transaction_log_records():
    key = i16(0) + string("txn-1")
    value = (i16(0) + i64(1000) + i16(2) + i32(60000) + i8(1)
             + i32(1) + string("orders") + i32(2) + i32(0) + i32(1) + i64(5000) + i64(4000))
    k, v = decode_key(TXN, key), decode_value(TXN, key, value)
    assert k is not None and (k.type, k.data) == ("TransactionLogKey", {"transactionalId": "txn-1"})
    assert v is not None and v.data == {
        "producerId": 1000, "producerEpoch": 2, "transactionTimeoutMs": 60000, "transactionStatus": 1,
        "transactionPartitions": [{"topic": "orders", "partitionIds": [0, 1]}],
        "transactionLastUpdateTimestampMs": 5000, "transactionStartTimestampMs": 4000}
    # v1 is flexible; tagged previousProducerId (0) printed, clientTransactionVersion (2) at its default not
    v1 = (i16(1) + i64(1000) + i16(2) + i32(60000) + i8(4) + carray(None) + i64(5000) + i64(4000)
          + tags({0: i64(999), 2: i16(0)}))
    got = decode_value(TXN, key, v1)
    assert got is not None and got.data == {
        "producerId": 1000, "previousProducerId": 999, "producerEpoch": 2, "transactionTimeoutMs": 60000,
        "transactionStatus": 4, "transactionPartitions": None, "transactionLastUpdateTimestampMs": 5000,
        "transactionStartTimestampMs": 4000}
    with pytest.raises(DecodeError, match="TransactionLogValue version 7"):  # TransactionLog checks versions
        decode_value(TXN, key, i16(7) + b"\x00" * 40)
    newer = decode_value(OFFSETS, commit_key(1), i16(5) + i64(1) + i32(-1) + cstring("") + i64(2) + tags({9: b"?"}))
    assert newer is not None and (newer.version, newer.data) == (5, {"offset": 1, "leaderEpoch": -1, "metadata": "",
                                                                     "commitTimestamp": 2})  # KIP-915
    with pytest.raises(DecodeError, match="version -1 is unknown"):
        decode_value(OFFSETS, commit_key(1), i16(-1) + i64(1))


def test_metadata_records_by_api_key_with_tagged_defaults():
    topic_id = uuid.uuid4().bytes
    topic = decode_metadata(metadata_frame(2, 0, cstring("orders") + topic_id + tags({})))
    assert (topic.type, topic.version, topic.data) == ("TopicRecord", 0, {"name": "orders",
                                                                          "topicId": kafka_uuid(topic_id)})
    # PartitionChangeRecord: leader is tag 1 with default -2: printed when it differs, left out when equal
    change = i32(0) + topic_id
    moved = decode_metadata(metadata_frame(5, 0, change + tags({1: i32(3), 0: carray([i32(1), i32(3)])})))
    assert moved.data == {"partitionId": 0, "topicId": kafka_uuid(topic_id), "isr": [1, 3], "leader": 3}
    same = decode_metadata(metadata_frame(5, 0, change + tags({1: i32(-2)})))
    assert same.data == {"partitionId": 0, "topicId": kafka_uuid(topic_id)}
    # A version past the schema's reads by the fields' ranges, as Kafka's generated reader does.
    newer = decode_metadata(metadata_frame(2, 5, cstring("orders") + topic_id + tags({})))
    assert (newer.type, newer.version, newer.data["name"]) == ("TopicRecord", 5, "orders")


def test_metadata_frame_errors_are_one_sentence():
    good = metadata_frame(20, 0, tags({}))  # NoOpRecord
    assert decode_metadata(good).data == {}
    for bad, reason in [(good + b"\x00", "garbage after NoOpRecord"), (b"\x00\x14\x00\x00", "frame version 0"),
                        (metadata_frame(99, 0, b""), "unknown metadata record type 99"),
                        (metadata_frame(2, 40000, b""), "type 2 or version 40000 is not a short"),
                        (metadata_frame(2, 0, cstring("orders")), "ends early"), (b"\x01", "ends early")]:
        with pytest.raises(DecodeError, match=reason):
            decode_metadata(bad)
    with pytest.raises(DecodeError, match="has a key"):
        decode_key("__cluster_metadata", b"k")
    assert decode_key("__cluster_metadata", None) is None


def test_errors_for_short_and_null_input():
    with pytest.raises(DecodeError, match="version from the key"):
        decode_key(OFFSETS, b"\x00")
    with pytest.raises(DecodeError, match="version from the key"):
        decode_key(OFFSETS, None)
    with pytest.raises(DecodeError):
        decode_key(OFFSETS, i16(1) + string("billing"))  # topic and partition missing
    with pytest.raises(DecodeError, match="non-nullable field group"):
        decode_key(OFFSETS, i16(1) + string(None) + string("t") + i32(0))
    with pytest.raises(KeyError):
        decode_key("orders", b"")
    assert internal_topic("__consumer_offsets") and not internal_topic("__consumer_offsets_copy")


def test_kraft_control_records_read_at_version_zero():
    voter = i32(1) + tags({})
    leader_change = i16(0) + i32(1) + carray([voter]) + carray([voter]) + tags({})
    got = decode_control("LEADER_CHANGE", leader_change)
    assert got is not None and (got.type, got.version) == ("LeaderChangeMessage", 0)
    assert got.data == {"version": 0, "leaderId": 1, "voters": [{"voterId": 1}], "grantingVoters": [{"voterId": 1}]}
    header = decode_control("SNAPSHOT_HEADER", i16(0) + i64(1234) + tags({}))
    assert header is not None and header.data == {"version": 0, "lastContainedLogTimestamp": 1234}
    marker = decode_control("COMMIT", i16(0) + i32(7))  # EndTransactionMarker: int16 version, then EndTxnMarker
    assert marker is not None and (marker.type, marker.version, marker.data) == ("EndTxnMarker", 0,
                                                                                 {"coordinatorEpoch": 7})
    key = decode_control_key(i16(0) + i16(3))
    assert (key.type, key.version, key.data) == ("ControlRecordKey", 0, {"version": 0, "type": 3})
    assert decode_control("UNKNOWN(9)", b"") is None


def test_rendering_in_json_lines_and_as_kafka_prints_it():
    value = decode_value(OFFSETS, i16(2) + string("g"), group_value_v3("connect", b"\xff\x00", b"plain"))
    line = jsonl(value)
    assert '"subscription": {"base64": "/wA="}' in line and '"assignment": "plain"' in line
    assert line.startswith('{"type": "GroupMetadataValue", "version": 3, "data": {"protocolType": "connect"')
    assert jsonl(None) == "null"
    assert kafka_json({"version": "3", "data": {"b": b"\xff\x00", "s": "é\n"}}) == \
        '{"version":"3","data":{"b":"/wA=","s":"é\\n"}}'
    assert [java_double(x) for x in (1.0, 1e7, 0.0001, 123.5, 2e-3, float("nan"))] == \
        ["1.0", "1.0E7", "1.0E-4", "123.5", "0.002", "NaN"]


def test_schema_notation_parses_versions_structs_and_options():
    messages = parse("""
Thing 0-2 flex:1+ api:7
  id int32 0+
  items []Item 1+ null:2+
    name string 1+
    flag bool 1+ tag:0:1+ =true
  again []Item 2+
""")
    thing = messages["Thing"]
    assert (thing.api_key, str(thing.versions), str(thing.flexible)) == (7, "0-2", "1+")
    items, again = thing.body.fields[1], thing.body.fields[2]
    assert items.struct is again.struct and [f.name for f in items.struct.fields] == ["name", "flag"]  # type: ignore[union-attr]
    assert 2 in items.nullable and 1 not in items.nullable and str(Versions.parse("none")) == "none"
    with pytest.raises(ValueError, match="schema line 3"):
        parse("A 0\n  x int32 0+\n      y int32 0+\n")
    with pytest.raises(ValueError, match="struct B has no fields"):
        parse("A 0\n  x B 0+\n")


def test_records_kafka_4_added_regular_expressions_and_tagged_fields():
    key = i16(16) + string("cg") + string("orders-.*")
    value = i16(0) + carray([cstring("orders-eu"), cstring("orders-us")]) + i64(12) + i64(1700) + tags({})
    k, v = decode_key(OFFSETS, key), decode_value(OFFSETS, key, value)
    assert k is not None and (k.type, k.data) == ("ConsumerGroupRegularExpressionKey",
                                                  {"groupId": "cg", "regularExpression": "orders-.*"})
    assert v is not None and v.data == {"topics": ["orders-eu", "orders-us"], "version": 12, "timestamp": 1700}
    metadata_key = i16(3) + string("cg")
    with_hash = decode_value(OFFSETS, metadata_key, i16(0) + i32(5) + tags({0: i64(99)}))
    assert with_hash is not None and with_hash.data == {"epoch": 5, "metadataHash": 99}
    at_defaults = decode_value(OFFSETS, metadata_key, i16(0) + i32(5) + tags({0: i64(0), 1: i64(-1)}))
    assert at_defaults is not None and at_defaults.data == {"epoch": 5}
    assert decode_metadata(metadata_frame(28, 0, cstring("orders") + tags({}))).data == {"topicName": "orders"}


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.binary(max_size=200), st.sampled_from(["__consumer_offsets", "__transaction_state"]))
def test_any_bytes_decode_or_raise_decode_error(key, value, topic):
    """Bad input is a DecodeError (a decode_error in the lines), never another exception."""
    keys = [key] + [i16(record_type) + key for record_type in (0, 1, 2, 3, 5, 8, 15)]
    attempts = [(decode_metadata, (value,)), (decode_metadata, (uv(1) + value,)),
                (decode_control, ("KRAFT_VOTERS", value)), (decode_control, ("COMMIT", value))]
    attempts += [(decode_key, (topic, k)) for k in keys] + [(decode_value, (topic, k, value)) for k in keys]
    for function, args in attempts:
        with contextlib.suppress(DecodeError):
            function(*args)  # type: ignore[operator]


# ---- the one-step readers of offset commits (kfs/internal_topics/offsets_fast.py) -----------------

def _generic_key(raw: bytes) -> tuple[str, int, list]:
    """The generic reader's answer for a __consumer_offsets key of record type 0-2."""
    from kfs.internal_topics.reader import read_message
    from kfs.internal_topics.schemas.group_coordinator import GROUP_COORDINATOR
    record_type = i16_of(raw)
    schema = GROUP_COORDINATOR["GroupMetadataKey" if record_type == 2 else "OffsetCommitKey"]
    return schema.name, record_type, list(read_message(schema, raw, record_type, 2)[0].items())


def _generic_value(raw: bytes) -> tuple[int, list]:
    from kfs.internal_topics.reader import read_message
    from kfs.internal_topics.schemas.group_coordinator import GROUP_COORDINATOR
    version = i16_of(raw)
    return version, list(read_message(GROUP_COORDINATOR["OffsetCommitValue"], raw, version, 2)[0].items())


def i16_of(raw: bytes) -> int:
    return int.from_bytes(raw[:2], "big", signed=True)


_TEXT = st.one_of(st.text(max_size=40), st.binary(max_size=40).map(lambda b: b.decode("latin-1")))
_RAW_STRING = st.one_of(_TEXT.map(lambda t: t.encode("utf-8", "surrogatepass")), st.binary(max_size=40))


def _packed_string(raw: bytes) -> bytes:
    return len(raw).to_bytes(2, "big") + raw


_KEYS = st.one_of(
    st.builds(lambda t, g, topic, p: i16(t) + _packed_string(g) + _packed_string(topic) + i32(p),
              st.sampled_from([0, 1]), _RAW_STRING, _RAW_STRING, st.integers(-2**31, 2**31 - 1)),
    st.builds(lambda g: i16(2) + _packed_string(g), _RAW_STRING))
_VALUES = st.one_of(
    st.builds(lambda v, o, m, c: i16(v) + i64(o) + _packed_string(m) + i64(c),
              st.sampled_from([0, 2]), st.integers(-2**63, 2**63 - 1), _RAW_STRING, st.integers(-2**63, 2**63 - 1)),
    st.builds(lambda o, m, c, e: i16(1) + i64(o) + _packed_string(m) + i64(c) + i64(e),
              st.integers(-2**63, 2**63 - 1), _RAW_STRING, st.integers(-2**63, 2**63 - 1),
              st.integers(-2**63, 2**63 - 1)),
    st.builds(lambda o, ep, m, c: i16(3) + i64(o) + i32(ep) + _packed_string(m) + i64(c),
              st.integers(-2**63, 2**63 - 1), st.integers(-2**31, 2**31 - 1), _RAW_STRING,
              st.integers(-2**63, 2**63 - 1)))
# damage: cut short, bytes appended, a byte overwritten (lengths made negative or too long)
_DAMAGE = st.one_of(
    st.just(lambda raw: raw),
    st.integers(0, 80).map(lambda n: lambda raw: raw[:n]),
    st.binary(min_size=1, max_size=4).map(lambda tail: lambda raw: raw + tail),
    st.tuples(st.integers(0, 80), st.integers(0, 255)).map(
        lambda at_byte: lambda raw: raw[:at_byte[0]] + bytes([at_byte[1]]) + raw[at_byte[0] + 1:]))


def test_the_one_step_readers_are_on_and_read_the_offsets_writers_bytes() -> None:
    """On (the schemas have the layouts it reads), and taken for what a broker writes."""
    from kfs.internal_topics import offsets_fast
    assert offsets_fast.ENABLED
    key = i16(1) + string("billing") + string("payments") + i32(7)
    assert offsets_fast.offsets_key(key) == ("OffsetCommitKey", 1, {"group": "billing", "topic": "payments",
                                                                   "partition": 7})
    value = i16(3) + i64(42) + i32(5) + string("m") + i64(1_700_000_000_000)
    assert offsets_fast.offset_commit_value(value) == (3, {"offset": 42, "leaderEpoch": 5, "metadata": "m",
                                                           "commitTimestamp": 1_700_000_000_000})
    decoded = decode_value("__consumer_offsets", key, value)
    assert decoded is not None and (decoded.type, decoded.version) == ("OffsetCommitValue", 3)


@settings(max_examples=600, deadline=None)
@given(_KEYS, _DAMAGE)
def test_a_key_read_in_one_step_is_what_the_schema_reader_reads(raw: bytes, damage: object) -> None:
    """Every key the one-step reader answers, the generic reader answers the same (fields, their order,
    replaced UTF-8); the keys it leaves (damaged, left-over bytes) go to the generic reader."""
    from kfs.internal_topics import offsets_fast
    raw = damage(raw)  # type: ignore[operator]
    fast = offsets_fast.offsets_key(raw)
    if fast is None:
        return
    assert (fast[0], fast[1], list(fast[2].items())) == _generic_key(raw)
    decoded = decode_key("__consumer_offsets", raw)
    assert decoded is not None and (decoded.type, decoded.version, decoded.data) == fast


@settings(max_examples=600, deadline=None)
@given(_VALUES, _DAMAGE)
def test_a_value_read_in_one_step_is_what_the_schema_reader_reads(raw: bytes, damage: object) -> None:
    from kfs.internal_topics import offsets_fast
    raw = damage(raw)  # type: ignore[operator]
    fast = offsets_fast.offset_commit_value(raw)
    if fast is None:
        return
    assert (fast[0], list(fast[1].items())) == _generic_value(raw)


@pytest.mark.parametrize("raw", [
    i16(1) + string("g") + string("t") + i32(0) + b"\x00",   # a byte left over: the generic reader's call
    i16(1) + string("g") + i16(-1) + i32(0),                 # a null topic: not nullable, an error
    i16(2) + i16(-1),                                        # a null group
    i16(1) + string("g") + string("t"),                      # no partition
    i16(4) + string("g"),                                    # another record type
])
def test_a_key_out_of_the_common_shape_is_left_to_the_schema_reader(raw: bytes) -> None:
    from kfs.internal_topics import offsets_fast
    assert offsets_fast.offsets_key(raw) is None


@settings(max_examples=600, deadline=None)
@given(_VALUES, _DAMAGE)
def test_a_commit_value_written_straight_from_its_bytes_is_the_decoded_values_json(raw: bytes,
                                                                                  damage: object) -> None:
    """messages.jsonl's value of an offset commit: the same text as decoding then encoding it, and
    the generic path (with its decode_error) whenever the bytes are not plainly well formed."""
    from kfs.internal_topics import offsets_fast
    raw = damage(raw)  # type: ignore[operator]
    text = offsets_fast.offset_commit_value_jsonl(raw)
    if text is None:
        assert offsets_fast.offset_commit_value(raw) is None
        return
    assert text == jsonl(decode_value("__consumer_offsets", commit_key(1), raw))
