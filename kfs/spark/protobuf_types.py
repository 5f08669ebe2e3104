"""Protobuf messages as Spark types and parsed messages as the values Arrow takes for them, as Spark's
protobuf connector (`SchemaConverters`, `ProtobufDeserializer`) has them: fields by their proto names,
enums -> strings, Timestamp -> timestamp, Duration -> interval day to second, maps -> maps (values not
null), repeated -> arrays (items not null), empty messages dropped; a field is read when repeated, or
declared with a default, or present (`hasField`: a proto3 field without presence when it is not at
its default), else it is null; unsigned ints as Java holds them (the same bits, signed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DayTimeIntervalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kfs.spark.avro_types import Convert, TypingError, identity

# ---- Protobuf -> Spark types and values (the protobuf connector) ------------------------------------

def protobuf_type(descriptor: Any, seen: frozenset[str] = frozenset()) -> StructType:
    """The message's Spark type, as the protobuf connector's SchemaConverters.toSqlType."""
    seen = seen | {descriptor.full_name}
    fields = [f for f in (_proto_field(fd, seen) for fd in descriptor.fields) if f is not None]
    return StructType(fields)


def _proto_field(fd: Any, seen: frozenset[str]) -> StructField | None:
    from google.protobuf.descriptor import FieldDescriptor as F

    if fd.type == F.TYPE_MESSAGE:
        message = fd.message_type
        if message.GetOptions().map_entry:
            key = _proto_field(message.fields_by_name["key"], seen)
            value = _proto_field(message.fields_by_name["value"], seen)
            if key is None or value is None:
                return None
            return StructField(fd.name, MapType(key.dataType, value.dataType, valueContainsNull=False))
        fields = [f.name for f in message.fields]
        if message.name == "Duration" and fields == ["seconds", "nanos"]:
            data_type: DataType | None = DayTimeIntervalType()
        elif message.name == "Timestamp" and fields == ["seconds", "nanos"]:
            data_type = TimestampType()
        elif message.full_name in seen:
            raise TypingError(f"the message is recursive ({message.full_name}): Spark's from_protobuf "
                              "refuses it too")
        else:
            struct = protobuf_type(message, seen)
            data_type = struct if struct.fields else None  # an empty message: dropped, as there
    else:
        data_type = BinaryType() if fd.type == F.TYPE_BYTES else _PROTO_SCALARS.get(fd.cpp_type)
        if data_type is None:
            raise TypingError(f"protobuf field type {fd.type} has no Spark type")
    if data_type is None:
        return None
    if _repeated(fd):
        return StructField(fd.name, ArrayType(data_type, containsNull=False))
    return StructField(fd.name, data_type, nullable=not _required(fd))


def _repeated(fd: Any) -> bool:
    is_repeated = getattr(fd, "is_repeated", None)
    return bool(is_repeated) if is_repeated is not None else fd.label == fd.LABEL_REPEATED


def _required(fd: Any) -> bool:
    is_required = getattr(fd, "is_required", None)
    return bool(is_required) if is_required is not None else fd.label == fd.LABEL_REQUIRED


def _proto_scalars() -> dict[int, DataType]:
    from google.protobuf.descriptor import FieldDescriptor as F

    return {F.CPPTYPE_INT32: IntegerType(), F.CPPTYPE_UINT32: IntegerType(), F.CPPTYPE_INT64: LongType(),
            F.CPPTYPE_UINT64: LongType(), F.CPPTYPE_FLOAT: FloatType(), F.CPPTYPE_DOUBLE: DoubleType(),
            F.CPPTYPE_BOOL: BooleanType(), F.CPPTYPE_STRING: StringType(), F.CPPTYPE_ENUM: StringType()}


_PROTO_SCALARS = _proto_scalars()


def protobuf_converter(descriptor: Any) -> Callable[[Any], dict[str, Any]]:
    """A parsed message to the Python value `pa.array` takes for `protobuf_type(descriptor)`, as
    ProtobufDeserializer writes it: a field is read when repeated, or has a declared default, or is
    present (`hasField`: for a proto3 field without presence, when it is not at its default)."""
    from google.protobuf.descriptor import FieldDescriptor as F

    struct = protobuf_type(descriptor)
    kept = {f.name for f in struct.fields}
    plan: list[tuple[str, bool, bool, Convert]] = []
    for fd in descriptor.fields:
        if fd.name not in kept:
            continue
        read_always = _repeated(fd) or (fd.has_default_value and fd.type != F.TYPE_MESSAGE)
        plan.append((fd.name, read_always, fd.has_presence, _proto_value(fd)))

    def convert(message: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, read_always, has_presence, c in plan:
            value = getattr(message, name)
            if read_always or (message.HasField(name) if has_presence else value != _default_of(value)):
                out[name] = c(value)
            else:
                out[name] = None
        return out

    return convert


def _default_of(value: Any) -> Any:
    return type(value)()


def _proto_value(fd: Any) -> Convert:
    from google.protobuf.descriptor import FieldDescriptor as F

    if fd.type == F.TYPE_MESSAGE:
        message = fd.message_type
        fields = [f.name for f in message.fields]
        if message.GetOptions().map_entry:
            key_c = _proto_scalar(message.fields_by_name["key"])
            value_c = _proto_value_single(message.fields_by_name["value"])
            return lambda m: {key_c(k): value_c(v) for k, v in m.items()}
        if message.name in ("Timestamp", "Duration") and fields == ["seconds", "nanos"]:
            one: Convert = _micros_of
        else:
            one = protobuf_converter(message)
    else:
        one = _proto_scalar(fd)
    return (lambda xs: [one(v) for v in xs]) if _repeated(fd) else one


def _proto_value_single(fd: Any) -> Convert:
    from google.protobuf.descriptor import FieldDescriptor as F

    if fd.type == F.TYPE_MESSAGE:
        message = fd.message_type
        if message.name in ("Timestamp", "Duration") and [f.name for f in message.fields] == ["seconds", "nanos"]:
            return _micros_of
        return protobuf_converter(message)
    return _proto_scalar(fd)


def _micros_of(message: Any) -> int:
    # (Spark: millisToMicros(seconds * 1000) + NANOSECONDS.toMicros(nanos), truncating)
    micros = int(message.seconds) * 1_000_000 + int(int(message.nanos) / 1000)
    if not -(1 << 63) <= micros < 1 << 63:  # (Spark's multiplyExact fails there: here the row's error)
        from kfs.registry.protobuf import ProtobufPayloadError

        raise ProtobufPayloadError(f"the {message.DESCRIPTOR.full_name} of {message.seconds} seconds is past "
                                   "the microseconds a Spark timestamp holds")
    return micros


def _proto_scalar(fd: Any) -> Convert:
    from google.protobuf.descriptor import FieldDescriptor as F

    if fd.cpp_type == F.CPPTYPE_ENUM:
        values = fd.enum_type.values_by_number

        def enum(n: int) -> str:
            v = values.get(n)
            return v.name if v is not None else str(n)

        return enum
    if fd.type == F.TYPE_STRING:
        return _text
    if fd.cpp_type == F.CPPTYPE_UINT32:  # Java's int: the same 32 bits, signed
        return lambda n: n - (1 << 32) if n >= 1 << 31 else n
    if fd.cpp_type == F.CPPTYPE_UINT64:
        return lambda n: n - (1 << 64) if n >= 1 << 63 else n
    return identity


def _text(value: Any) -> str:
    """A string field's value: protobuf hands a proto2 string that is not UTF-8 over as bytes, which a
    string column cannot hold (Spark's connector fails on it too): the row's error here."""
    if isinstance(value, str):
        return value
    from kfs.registry.protobuf import ProtobufPayloadError

    raise ProtobufPayloadError("a string field holds bytes that are not UTF-8")
