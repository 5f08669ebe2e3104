"""How each internal topic frames its messages in record keys and values, and which schema reads them.

    __consumer_offsets   key:   int16 record type | key message (read at version = the type)
                         value: int16 version | value message; null: a tombstone
                         (CoordinatorRecordSerde, GroupCoordinatorRecordSerde)
    __transaction_state  key:   int16 version | TransactionLogKey;  value: int16 version | TransactionLogValue
                         (TransactionLog.scala)
    __cluster_metadata   key:   null
                         value: uvarint frame version (1) | uvarint api key | uvarint version | message,
                         nothing after it (MetadataRecordSerde, AbstractApiMessageSerde)
    control records      key:   int16 version | int16 type (ControlRecordType)
                         value: COMMIT/ABORT: int16 version | EndTxnMarker (EndTransactionMarker);
                         KRaft's: the message read at version 0 (ControlRecordUtils)

A classic group of protocol type "consumer" keeps each member's subscription and assignment as
bytes: int16 version | ConsumerProtocolSubscription / ConsumerProtocolAssignment. They are decoded
in place, as DumpLogSegments' OffsetsMessageParser does; bytes that do not decode stay bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from kfs.internal_topics.offsets_fast import offset_commit_value, offsets_key
from kfs.internal_topics.reader import DecodeError, read_message, uvarint
from kfs.internal_topics.schema import Message
from kfs.internal_topics.schemas.consumer_protocol import CONSUMER_PROTOCOL
from kfs.internal_topics.schemas.control import CONTROL
from kfs.internal_topics.schemas.group_coordinator import GROUP_COORDINATOR
from kfs.internal_topics.schemas.metadata import METADATA
from kfs.internal_topics.schemas.transaction_coordinator import TRANSACTION_COORDINATOR

CONSUMER_OFFSETS = "__consumer_offsets"
TRANSACTION_STATE = "__transaction_state"
CLUSTER_METADATA = "__cluster_metadata"
INTERNAL_TOPICS = (CONSUMER_OFFSETS, TRANSACTION_STATE, CLUSTER_METADATA)


@dataclass(frozen=True)
class Decoded:
    """One key or value: its schema's name, the version it was written with, and its fields
    (camelCase, the fields of that version, as Kafka's JSON converters print them)."""

    type: str
    version: int
    data: dict[str, Any]


_INT16 = struct.Struct(">h").unpack_from


def _by_record_type(schemas: dict[str, Message]) -> dict[int, tuple[Message, Message]]:
    """Record type -> (key schema, value schema): a key schema's versions are its record types."""
    table = {}
    for name, key in schemas.items():
        if name.endswith("Key"):
            value = schemas[name[:-3] + "Value"]
            for record_type in range(key.versions.low, key.versions.high + 1):
                table[record_type] = (key, value)
    return table


_GROUP_TYPES = _by_record_type(GROUP_COORDINATOR)
_TXN_TYPES = _by_record_type(TRANSACTION_COORDINATOR)
_METADATA_BY_API_KEY = {m.api_key: m for m in METADATA.values() if m.api_key is not None}
_CONTROL_TYPES = {"LEADER_CHANGE": "LeaderChangeMessage", "SNAPSHOT_HEADER": "SnapshotHeaderRecord",
                  "SNAPSHOT_FOOTER": "SnapshotFooterRecord", "KRAFT_VERSION": "KRaftVersionRecord",
                  "KRAFT_VOTERS": "VotersRecord"}
_SUBSCRIPTION = CONSUMER_PROTOCOL["ConsumerProtocolSubscription"]
_ASSIGNMENT = CONSUMER_PROTOCOL["ConsumerProtocolAssignment"]


class UnknownRecordType(DecodeError):
    """A coordinator key whose record type no schema has (CoordinatorLoader.UnknownRecordTypeException)."""

    def __init__(self, record_type: int) -> None:
        super().__init__(f"unknown record type {record_type}")
        self.record_type = record_type


def internal_topic(topic: str) -> bool:
    """Whether kfs decodes the records of `topic` (docs/spec.md section 8)."""
    return topic in INTERNAL_TOPICS


def _version(data: bytes | None, what: str) -> int:
    if data is None or len(data) < 2:
        raise DecodeError(f"could not read the version from the {what}")
    return int(_INT16(data, 0)[0])


def _check_version(message: Message, version: int, strict: bool) -> None:
    """Kafka's generated readers read any version, by the fields' version ranges: a group coordinator
    value of a newer version reads as its fields here say (KIP-915: new fields are tagged ones, which
    are skipped), and so does a metadata record (its serde then checks that nothing is left over).
    `TransactionLog` alone refuses versions it does not know (strict). A negative version is refused."""
    if version < 0 or (strict and version not in message.versions):
        raise DecodeError(f"{message.name} version {version} is unknown (kfs reads versions {message.versions})")


def _coordinator_types(topic: str, key: bytes | None) -> tuple[int, tuple[Message, Message]]:
    record_type = _version(key, "key")
    table = _GROUP_TYPES if topic == CONSUMER_OFFSETS else _TXN_TYPES
    schemas = table.get(record_type)
    if schemas is None:
        raise UnknownRecordType(record_type)
    return record_type, schemas


def decode_key(topic: str, key: bytes | None) -> Decoded | None:
    """The key of a record of an internal topic; None for the metadata log's null key.

    Raises DecodeError when the bytes are not what Kafka writes there, KeyError for other topics.
    """
    if topic == CLUSTER_METADATA:
        if key is not None:
            raise DecodeError("a metadata record has a key")
        return None
    if topic not in (CONSUMER_OFFSETS, TRANSACTION_STATE):
        raise KeyError(topic)
    if topic == CONSUMER_OFFSETS and key is not None:
        fast = offsets_key(key)
        if fast is not None:
            return Decoded(*fast)
    record_type, (schema, _) = _coordinator_types(topic, key)
    assert key is not None
    data, _end = read_message(schema, key, record_type, 2)
    return Decoded(schema.name, record_type, data)


def decode_value(topic: str, key: bytes | None, value: bytes | None) -> Decoded | None:
    """The value of a record of an internal topic (its schema chosen by the key's record type
    where the topic has one); None for a tombstone. Raises as `decode_key`."""
    if topic == CLUSTER_METADATA:
        return decode_metadata(value)
    if topic not in (CONSUMER_OFFSETS, TRANSACTION_STATE):
        raise KeyError(topic)
    record_type, (_, schema) = _coordinator_types(topic, key)
    if value is None:
        return None
    if record_type <= 1 and topic == CONSUMER_OFFSETS:  # an offset commit
        fast = offset_commit_value(value)
        if fast is not None:
            return Decoded(schema.name, *fast)
    version = _version(value, "value")
    _check_version(schema, version, strict=topic == TRANSACTION_STATE)
    data, _end = read_message(schema, value, version, 2)
    if schema.name == "GroupMetadataValue" and data.get("protocolType") == "consumer":
        for member in data.get("members") or ():
            _decode_in_place(member, "subscription", _SUBSCRIPTION)
            _decode_in_place(member, "assignment", _ASSIGNMENT)
    return Decoded(schema.name, version, data)


def decode_metadata(value: bytes | None) -> Decoded:
    """A metadata log record's value: its frame, then the record of that api key and version."""
    if value is None:
        raise DecodeError("a metadata record has no value")
    try:
        frame, position = uvarint(value, 0)
        if frame != 1:
            raise DecodeError(f"unknown metadata frame version {frame} (only frame version 1 exists)")
        api_key, position = uvarint(value, position)
        version, position = uvarint(value, position)
    except IndexError:
        raise DecodeError("the metadata record frame ends early") from None
    if not 0 <= api_key <= 0x7FFF or not 0 <= version <= 0x7FFF:  # AbstractApiMessageSerde.unsignedIntToShort
        raise DecodeError(f"the metadata record frame's type {api_key} or version {version} is not a short")
    schema = _METADATA_BY_API_KEY.get(api_key)
    if schema is None:
        raise DecodeError(f"unknown metadata record type {api_key}")
    _check_version(schema, version, strict=False)
    data, end = read_message(schema, value, version, position)
    if end != len(value):
        raise DecodeError(f"found {len(value) - end} byte(s) of garbage after {schema.name}")
    return Decoded(schema.name, version, data)


def metadata_type_name(schema_name: str) -> str:
    """MetadataRecordType's constant for a record (TopicRecord -> TOPIC_RECORD), as DumpLogSegments prints it."""
    out = []
    previous_upper = True
    for c in schema_name:
        if c.isupper():
            if not previous_upper:
                out.append("_")
            out.append(c)
            previous_upper = True
        else:
            out.append(c.upper())
            previous_upper = False
    return "".join(out)


def decode_control_key(key: bytes | None) -> Decoded:
    """A control record's key: `ControlRecordKey` {version, type} (its version is its own first field)."""
    if key is None:
        raise DecodeError("a control record has no key")
    data, _end = read_message(CONTROL["ControlRecordKey"], key, 0)
    return Decoded("ControlRecordKey", int(data["version"]), data)


def decode_control(control_type: str, value: bytes | None) -> Decoded | None:
    """A control record's value by its control type: EndTxnMarker for COMMIT and ABORT; for KRaft's
    types (LEADER_CHANGE, SNAPSHOT_HEADER, ...) the message read at version 0, as ControlRecordUtils
    does, reported at its own Version field; None for a type kfs does not know."""
    if value is None:
        raise DecodeError(f"a {control_type} control record has no value")
    if control_type in ("COMMIT", "ABORT"):
        version = _version(value, "marker")
        data, _end = read_message(CONTROL["EndTxnMarker"], value, version, 2)
        return Decoded("EndTxnMarker", version, data)
    name = _CONTROL_TYPES.get(control_type)
    if name is None:
        return None
    data, _end = read_message(CONTROL[name], value, 0)
    return Decoded(name, int(data.get("version", 0)), data)


def _decode_in_place(member: dict[str, Any], field: str, schema: Message) -> None:
    raw = member.get(field)
    if not isinstance(raw, bytes):
        return
    try:
        version = _version(raw, field)
        if version < 0:
            return
        member[field], _end = read_message(schema, raw, version, 2)
    except DecodeError:
        pass  # kept as bytes, as DumpLogSegments keeps them
