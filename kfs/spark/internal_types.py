"""Kafka's internal topics as typed Spark columns, from Kafka's own schemas (kfs/internal_topics/schemas).

A read of one internal topic (`subscribe=__consumer_offsets`, `__transaction_state` or
`__cluster_metadata`) types `key_decoded` and `value_decoded` as the JSON lines show them (docs/spec.md
section 8), one member per record type, like Spark's struct for a union:

    STRUCT<type: STRING, version: SMALLINT, OffsetCommitKey: STRUCT<group, topic, partition>,
           GroupMetadataKey: STRUCT<group>, ...>

`type` and `version` are the JSON's; the member named by `type` holds the JSON's `data`, every other
member is null (a record type without fields, NoOpRecord or EndTransactionRecord, has no member: Parquet
cannot hold an empty struct). So a query of `key_decoded.OffsetCommitKey.group` and
`value_decoded.OffsetCommitValue.offset` reads strings and numbers, not JSON text, and kfs's Parquet
export of an internal topic is queryable by field.

A message's struct has every field of every version; a field its version lacks (or a tagged field
left at its default, which the JSON leaves out too) is null. Kafka's types map as Spark's:
bool boolean, int8 tinyint, int16 smallint, uint16 and int32 int, uint32 and int64 bigint, float64
double, string string, uuid string (Kafka's `Uuid.toString()`), bytes and records binary, arrays
arrays, structs structs. A classic consumer group's `subscription` and `assignment`, which the JSON
shows decoded when they decode and as bytes when not, are `STRUCT<bytes: BINARY,
ConsumerProtocolSubscription: STRUCT<...>>` (`...Assignment`), one member set.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
)

from kfs.internal_topics.framing import CLUSTER_METADATA, CONSUMER_OFFSETS, TRANSACTION_STATE, Decoded
from kfs.internal_topics.schema import Field, Message, Struct
from kfs.internal_topics.schemas.consumer_protocol import CONSUMER_PROTOCOL
from kfs.internal_topics.schemas.group_coordinator import GROUP_COORDINATOR
from kfs.internal_topics.schemas.metadata import METADATA
from kfs.internal_topics.schemas.transaction_coordinator import TRANSACTION_COORDINATOR

__all__ = ["internal_type", "part_messages", "typed_internal"]

_PRIMITIVE_TYPES: dict[str, DataType] = {
    "bool": BooleanType(), "int8": ByteType(), "int16": ShortType(), "uint16": IntegerType(),
    "int32": IntegerType(), "uint32": LongType(), "int64": LongType(), "float64": DoubleType(),
    "string": StringType(), "uuid": StringType(), "bytes": BinaryType(), "records": BinaryType(),
}
# The bytes a classic "consumer" group's members keep, decoded in place (kfs.internal_topics.framing).
_DECODED_IN_PLACE = {("GroupMetadataValue", "subscription"): CONSUMER_PROTOCOL["ConsumerProtocolSubscription"],
                     ("GroupMetadataValue", "assignment"): CONSUMER_PROTOCOL["ConsumerProtocolAssignment"]}
_BYTES_MEMBER = "bytes"


def part_messages(topic: str, part: str) -> list[Message]:
    """The messages that can hold `part` ("key" or "value") of `topic`'s data records, in schema order."""
    if topic == CLUSTER_METADATA:
        if part == "key":
            return []  # a metadata record's key is null
        return sorted((m for m in METADATA.values() if m.api_key is not None), key=lambda m: m.api_key or 0)
    schemas = {CONSUMER_OFFSETS: GROUP_COORDINATOR, TRANSACTION_STATE: TRANSACTION_COORDINATOR}[topic]
    suffix = "Key" if part == "key" else "Value"
    return [m for name, m in schemas.items() if name.endswith(suffix)]


def internal_type(topic: str, part: str) -> StructType:
    """The Spark type of `part` of `topic`'s records: type, version, and a member per record type."""
    fields = [StructField("type", StringType()), StructField("version", ShortType())]
    for message in part_messages(topic, part):
        member = _struct_type(message.body, message.name, ())
        if member.fields:  # (Parquet cannot hold an empty struct: a record without fields has `type` alone)
            fields.append(StructField(message.name, member))
    return StructType(fields)


def _struct_type(struct: Struct, message: str, within: tuple[str, ...]) -> StructType:
    if struct.name in within:  # (no schema of Kafka's nests a struct in itself; Spark types cannot)
        raise ValueError(f"{message}: struct {struct.name} contains itself")
    return StructType([StructField(f.name, _field_type(f, message, (*within, struct.name))) for f in struct.fields])


def _field_type(f: Field, message: str, within: tuple[str, ...]) -> DataType:
    decoded = _DECODED_IN_PLACE.get((message, f.name))
    if decoded is not None:
        element: DataType = StructType([StructField(_BYTES_MEMBER, BinaryType()),
                                        StructField(decoded.name, _struct_type(decoded.body, decoded.name, ()))])
    elif f.struct is not None:
        element = _struct_type(f.struct, message, within)
    else:
        element = _PRIMITIVE_TYPES[f.type]
    return ArrayType(element) if f.array else element


def typed_internal(decoded: Decoded | None) -> dict[str, Any] | None:
    """A decoded key or value as its typed column's value (None stays None: a tombstone, a null key).
    (A record type without a member in the column's type has its data, `{}`, left out by Arrow.)"""
    if decoded is None:
        return None
    data = decoded.data
    if decoded.type == "GroupMetadataValue" and data.get("members"):
        data = dict(data, members=[_members_in_union(member) for member in data["members"]])
    return {"type": decoded.type, "version": decoded.version, decoded.type: data}


def _members_in_union(member: dict[str, Any]) -> dict[str, Any]:
    out = dict(member)
    for (_, name), schema in _DECODED_IN_PLACE.items():
        if name in out and out[name] is not None:
            value = out[name]
            out[name] = {_BYTES_MEMBER: value} if isinstance(value, bytes) else {schema.name: value}
    return out
