"""Registry-framed keys and values as typed Spark columns (`key_decoded` / `value_decoded`).

A read of one topic whose subject (`<topic>-value` / `<topic>-key`, Confluent's TopicNameStrategy)
is Avro or Protobuf gets a column typed as Spark's own `from_avro` / `from_protobuf` would type it:

- Avro as `org.apache.spark.sql.avro.SchemaConverters.toSqlType` (records -> structs, a union of null
  and one type -> that type, nullable; [int, long] -> long and [float, double] -> double; other unions
  -> a struct of `member0`, `member1`, ... numbered over the non-null branches; enums -> strings, maps ->
  maps, fixed and bytes -> binary; date -> date, timestamp-millis/micros -> timestamp,
  local-timestamp-* -> timestamp_ntz, decimal -> decimal; a recursive schema is refused, as there);
- Protobuf as the protobuf connector's `SchemaConverters` and `ProtobufDeserializer` (fields by their
  proto names, enums -> strings, Timestamp -> timestamp, Duration -> interval day to second, maps ->
  maps, repeated -> arrays; a field without presence at its default value is null, as there).

The subject's latest version is the reader schema; each record is read with the schema it was written
with and resolved to it (kfs.registry.resolution: Avro's rules, by fastavro). Otherwise (several
topics, a JSON Schema subject, no subject) the column is a string holding the decoded JSON text, as
`kfs cat` prints the key or value. A framed key or value that does not decode is null there, and
`key_decode_error` / `value_decode_error` say why in the sentence `kfs cat` gives (docs/spec.md 9).

The column's metadata names the reader schema's id, so every task reads with the schema the driver
planned with, even when `_schemas` grows during the query.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DayTimeIntervalType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from kfs.registry.avro import AvroDatumError, AvroSchemaError
from kfs.registry.decode import PayloadError, Registry
from kfs.registry.lines import KEY_HEADER, VALUE_HEADER, framed
from kfs.registry.protobuf import ProtobufPayloadError, message_indexes
from kfs.registry.resolution import AvroResolver, ParsedAvro, parse_avro

PARTS = ("key", "value")
METADATA_KEY = "kfs.decoded"  # a typed column's metadata: {"type", "id", "subject", "version"}


class TypingError(ValueError):
    """A schema Spark's converters would refuse (a recursive one, an unsupported type): one sentence."""


# ---- Avro -> Spark types (SchemaConverters.toSqlType) -----------------------------------------------

def _named(schema: Any, named: dict[str, Any]) -> Any:
    return named[schema] if isinstance(schema, str) and schema in named else schema


def _kind(schema: Any) -> str:
    if isinstance(schema, list):
        return "union"
    if isinstance(schema, str):
        return schema
    kind = schema.get("type")
    return kind if isinstance(kind, str) else "union" if isinstance(kind, list) else "?"


def _non_null(branches: list[Any]) -> list[Any]:
    return [b for b in branches if b != "null" and not (isinstance(b, dict) and b.get("type") == "null")]


def avro_type(schema: Any, named: dict[str, Any], seen: frozenset[str] = frozenset()) -> tuple[DataType, bool]:
    """(Spark type, nullable) of an Avro schema parsed by fastavro, as SchemaConverters.toSqlType."""
    schema = _named(schema, named)
    if isinstance(schema, dict) and isinstance(schema.get("type"), (dict, list)):
        return avro_type(schema["type"], named, seen)
    kind = _kind(schema)
    logical = schema.get("logicalType") if isinstance(schema, dict) else None
    if kind == "int":
        return (DateType() if logical == "date" else IntegerType()), False
    if kind == "long":
        if logical in ("timestamp-millis", "timestamp-micros"):
            return TimestampType(), False
        if logical in ("local-timestamp-millis", "local-timestamp-micros"):
            return TimestampNTZType(), False
        return LongType(), False
    if kind in ("bytes", "fixed"):
        if logical == "decimal":  # (kfs.registry.resolution keeps only the decimals Avro's Java takes)
            return DecimalType(schema["precision"], schema.get("scale", 0)), False
        return BinaryType(), False
    simple: dict[str, DataType] = {"string": StringType(), "boolean": BooleanType(), "double": DoubleType(),
                                   "float": FloatType(), "enum": StringType()}
    if kind in simple:
        return simple[kind], False
    if kind == "null":
        raise TypingError("a null field has no Spark type kfs writes to Arrow")
    if kind in ("record", "error"):
        name = schema["name"]
        if name in seen:
            raise TypingError(f"the schema is recursive ({name}): Spark's from_avro refuses it too")
        fields = []
        for f in schema["fields"]:
            data_type, nullable = avro_type(f["type"], named, seen | {name})
            fields.append(StructField(f["name"], data_type, nullable))
        return StructType(fields), False
    if kind == "array":
        item, nullable = avro_type(schema["items"], named, seen)
        return ArrayType(item, containsNull=nullable), False
    if kind == "map":
        value, nullable = avro_type(schema["values"], named, seen)
        return MapType(StringType(), value, valueContainsNull=nullable), False
    if kind == "union":
        branches = schema if isinstance(schema, list) else schema["type"]
        rest = _non_null(branches)
        with_null = len(rest) < len(branches)
        if len(rest) == 1:
            data_type, nullable = avro_type(rest[0], named, seen)
            return data_type, nullable or with_null
        kinds = {_kind(_named(b, named)) for b in rest}
        if len(rest) == 2 and kinds == {"int", "long"}:
            return LongType(), with_null
        if len(rest) == 2 and kinds == {"float", "double"}:
            return DoubleType(), with_null
        members = [StructField(f"member{i}", avro_type(b, named, seen)[0], True) for i, b in enumerate(rest)]
        return StructType(members), with_null
    raise TypingError(f"Avro type {kind!r} has no Spark type")


# ---- Avro values -> what Arrow takes for those types (AvroDeserializer) -----------------------------

Convert = Callable[[Any], Any]


def _identity(x: Any) -> Any:
    return x


def avro_converter(schema: Any, named: dict[str, Any]) -> Convert:
    """fastavro's object of `schema` (named types in unions as `(name, value)`) to the Python value
    `pa.array` takes for `avro_type(schema)`."""
    schema = _named(schema, named)
    if isinstance(schema, dict) and isinstance(schema.get("type"), (dict, list)):
        return avro_converter(schema["type"], named)
    kind = _kind(schema)
    if kind in ("record", "error"):
        convs = [(f["name"], c) for f in schema["fields"]
                 if (c := avro_converter(f["type"], named)) is not _identity]
        if not convs:
            return _identity

        def record(x: dict[str, Any]) -> dict[str, Any]:
            for name, c in convs:
                x[name] = c(x[name])
            return x

        return record
    if kind == "array":
        item = avro_converter(schema["items"], named)
        return _identity if item is _identity else (lambda xs: [item(v) for v in xs])
    if kind == "map":
        value = avro_converter(schema["values"], named)
        return _identity if value is _identity else (lambda m: {k: value(v) for k, v in m.items()})
    if kind == "union":
        return _union_converter(schema if isinstance(schema, list) else schema["type"], named)
    return _identity


def _union_converter(branches: list[Any], named: dict[str, Any]) -> Convert:
    rest = _non_null(branches)
    convs = [avro_converter(b, named) for b in rest]
    kinds = [_kind(_named(b, named)) for b in rest]
    names = [_named(b, named).get("name") if isinstance(_named(b, named), dict) else None for b in rest]
    by_name = {n: i for i, n in enumerate(names) if n is not None}

    def branch(x: Any) -> tuple[int, Any]:
        """Which non-null branch a value took, and the value (a named type's comes as (name, value))."""
        if type(x) is tuple and len(x) == 2 and x[0] in by_name:
            return by_name[x[0]], x[1]
        for i, kind in enumerate(kinds):
            if _accepts(kind, x):
                return i, x
        raise AvroDatumError(f"a union value of Python type {type(x).__name__} matches no branch")

    single = len(rest) == 1 or (len(rest) == 2 and set(kinds) in ({"int", "long"}, {"float", "double"}))
    if single:
        def one(x: Any) -> Any:
            if x is None:
                return None
            i, v = branch(x)
            return convs[i](v)

        return one

    def members(x: Any) -> Any:
        if x is None:
            return None
        i, v = branch(x)
        return {f"member{i}": convs[i](v)}

    return members


_ACCEPTS: dict[str, Callable[[Any], bool]] = {
    "boolean": lambda x: type(x) is bool,
    "int": lambda x: type(x) is int or isinstance(x, dt.date),
    "long": lambda x: type(x) is int or isinstance(x, dt.datetime),
    "float": lambda x: type(x) is float,
    "double": lambda x: type(x) is float,
    "string": lambda x: type(x) is str,
    "enum": lambda x: type(x) is str,
    "bytes": lambda x: type(x) is bytes or type(x).__name__ == "Decimal",
    "fixed": lambda x: type(x) is bytes or type(x).__name__ == "Decimal",
    "array": lambda x: type(x) is list,
    "map": lambda x: type(x) is dict,
    "record": lambda x: type(x) is dict,
}


def _accepts(kind: str, x: Any) -> bool:
    test = _ACCEPTS.get(kind)
    return test is not None and test(x)


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
    return int(message.seconds) * 1_000_000 + int(int(message.nanos) / 1000)


def _proto_scalar(fd: Any) -> Convert:
    from google.protobuf.descriptor import FieldDescriptor as F

    if fd.cpp_type == F.CPPTYPE_ENUM:
        values = fd.enum_type.values_by_number

        def enum(n: int) -> str:
            v = values.get(n)
            return v.name if v is not None else str(n)

        return enum
    if fd.cpp_type == F.CPPTYPE_UINT32:  # Java's int: the same 32 bits, signed
        return lambda n: n - (1 << 32) if n >= 1 << 31 else n
    if fd.cpp_type == F.CPPTYPE_UINT64:
        return lambda n: n - (1 << 64) if n >= 1 << 63 else n
    return _identity


# ---- planning: which column types a read gets ------------------------------------------------------

@dataclass(frozen=True)
class PartPlan:
    """How one part (key or value) is decoded: as JSON text, or typed by a reader schema."""

    part: str
    subject: str | None = None   # the topic's subject when typed
    schema_id: int | None = None  # the reader schema's id when typed
    kind: str = "JSON"           # JSON (text), AVRO or PROTOBUF (typed)


def decoded_fields(registry: Registry | None, topics: Sequence[str] | None) -> list[StructField]:
    """The columns a read gains: `key_decoded`, `value_decoded` (typed when `topics` is one topic with an
    Avro or Protobuf subject for that part), `key_decode_error`, `value_decode_error`."""
    fields = []
    for part in PARTS:
        plan, data_type = part_plan(registry, topics, part)
        metadata = {} if plan.schema_id is None else {METADATA_KEY: {
            "type": plan.kind, "id": plan.schema_id, "subject": plan.subject}}
        fields.append(StructField(f"{part}_decoded", data_type, True, metadata))
    return fields + [StructField(f"{part}_decode_error", StringType()) for part in PARTS]


def part_plan(registry: Registry | None, topics: Sequence[str] | None, part: str) -> tuple[PartPlan, DataType]:
    """The plan for `part` and its column type; JSON text when the part cannot be typed."""
    if registry is None or topics is None or len(topics) != 1:
        return PartPlan(part), StringType()
    subject = f"{topics[0]}-{part}"
    latest = max((s for (name, _), s in registry.state.versions.items() if name == subject and not s.deleted),
                 key=lambda s: s.version, default=None)
    if latest is None or latest.type not in ("AVRO", "PROTOBUF"):
        return PartPlan(part), StringType()
    try:
        data_type = reader_type(registry, latest.id)
    except (TypingError, PayloadError, AvroSchemaError):
        return PartPlan(part), StringType()
    return PartPlan(part, subject, latest.id, latest.type), data_type


def reader_type(registry: Registry, schema_id: int) -> DataType:
    """The Spark type of values read with schema `schema_id`; TypingError / PayloadError when none."""
    schema = registry.state.by_id.get(schema_id)
    if schema is None:
        raise PayloadError(f"schema id {schema_id}: not in the schema registry")
    if schema.type == "AVRO":
        parsed = parse_avro(schema.schema, registry._reference_texts(schema))
        return avro_type(parsed.schema, parsed.named)[0]
    compiled = registry.compiled(schema_id)
    if compiled.error is not None:
        raise PayloadError(f"schema id {schema_id}: {compiled.error}")
    return protobuf_type(_first_message(compiled.renderer))


def _first_message(renderer: Any) -> Any:
    messages = list(renderer.file.message_types_by_name.values())
    if not messages:
        raise TypingError("the Protobuf schema declares no message")
    return messages[0]


def plan_from_field(field: StructField) -> PartPlan:
    """The plan a column was made with (its metadata), so tasks decode as the driver planned."""
    part = field.name.rsplit("_", 1)[0]
    meta = (field.metadata or {}).get(METADATA_KEY)
    if not meta:
        return PartPlan(part)
    return PartPlan(part, meta["subject"], int(meta["id"]), meta["type"])


# ---- decoding a batch ---------------------------------------------------------------------------------

class PartDecoder:
    """Decodes one part of records into the column's values and the decode errors."""

    def __init__(self, registry: Registry, plan: PartPlan, topic: str) -> None:
        self.registry = registry
        self.plan = plan
        self.header_name = KEY_HEADER if plan.part == "key" else VALUE_HEADER
        self.subject = f"{topic}-{plan.part}"
        self._avro: dict[int, AvroResolver | str] = {}  # writer id -> resolver, or why not
        self._reader: ParsedAvro | None = None
        self._convert: Convert | None = None
        self._proto: tuple[Any, Any] | None = None  # (message class, converter) of the reader
        if plan.kind == "AVRO" and plan.schema_id is not None:
            reader = registry.state.by_id[plan.schema_id]
            self._reader = parse_avro(reader.schema, registry._reference_texts(reader))
            self._convert = avro_converter(self._reader.schema, self._reader.named)
        elif plan.kind == "PROTOBUF" and plan.schema_id is not None:
            from google.protobuf import message_factory

            descriptor = _first_message(registry.compiled(plan.schema_id).renderer)
            self._proto = (message_factory.GetMessageClass(descriptor), protobuf_converter(descriptor))

    def decode(self, data: bytes | None, headers: Sequence[tuple[str, bytes | None]]) -> tuple[Any, str | None]:
        """(the column's value, the decode error): (None, None) for a part that is not framed."""
        header = None
        for name, h in headers:
            if name == self.header_name:
                header = h
        if data is None or (header is None and not framed(data)):
            return None, None
        if self.plan.kind == "JSON":
            try:
                return self.registry.decode(data, self.subject, header)[0], None
            except PayloadError as e:
                return None, str(e)
            except Exception as e:  # never a failed task over one odd payload
                return None, f"{type(e).__name__}: {e}"
        try:
            return self._typed(data, header), None
        except (PayloadError, AvroDatumError, ProtobufPayloadError, TypingError) as e:
            return None, self._error(data, header, e)
        except Exception as e:
            return None, self._error(data, header, ValueError(f"{type(e).__name__}: {e}"))

    def _error(self, data: bytes, header: bytes | None, error: Exception) -> str:
        """The sentence `kfs cat` gives when it fails on this payload too, else why typing failed."""
        try:
            self.registry.decode(data, self.subject, header)
        except PayloadError as e:
            return str(e)
        except Exception as e:
            return f"{type(e).__name__}: {e}"
        return str(error)

    def _typed(self, data: bytes, header: bytes | None) -> Any:
        schema_id, name, compiled, body = self.registry.frame(data, header)
        if compiled.kind != self.plan.kind:
            raise TypingError(f"{name}: a {compiled.kind} schema, not the {self.plan.kind} of {self.plan.subject}")
        if self._proto is not None:
            indexes, start = message_indexes(body)
            _, message_name = compiled.renderer._message_class(tuple(indexes))
            reader_cls, convert = self._proto
            if message_name != reader_cls.DESCRIPTOR.full_name:
                raise TypingError(f"{name}: a {message_name} message, not the {reader_cls.DESCRIPTOR.full_name} "
                                  f"of {self.plan.subject}")
            message = reader_cls()
            try:
                message.ParseFromString(bytes(body[start:]))
            except Exception as e:
                raise ProtobufPayloadError(f"{name}: the {message_name} message does not decode "
                                           f"({type(e).__name__}: {e})") from None
            return convert(message)
        resolver = self._avro.get(schema_id)
        if resolver is None:
            resolver = self._resolver(schema_id)
        if isinstance(resolver, str):
            raise TypingError(f"{name}: {resolver}")
        try:
            value = resolver.read(bytes(body))
        except AvroDatumError as e:
            raise AvroDatumError(f"{name}: {e}") from None
        assert self._convert is not None
        return self._convert(value)

    def _resolver(self, schema_id: int) -> AvroResolver | str:
        assert self._reader is not None
        resolver: AvroResolver | str
        if schema_id == self.plan.schema_id:
            resolver = AvroResolver(self._reader, self._reader)
        else:
            writer = self.registry.state.by_id[schema_id]
            try:
                resolver = AvroResolver(parse_avro(writer.schema, self.registry._reference_texts(writer)),
                                        self._reader)
            except (AvroSchemaError, PayloadError) as e:
                resolver = str(e)
        self._avro[schema_id] = resolver
        return resolver


class RowDecoder:
    """The four decoded columns of a batch of records; this one: all null (a topic nothing decodes)."""

    def columns(self, records: Sequence[Any], types: Sequence[pa.DataType]) -> list[pa.Array]:
        """`key_decoded`, `value_decoded` (of `types`), `key_decode_error`, `value_decode_error`."""
        n = len(records)
        return [pa.nulls(n, types[0]), pa.nulls(n, types[1]), pa.nulls(n, pa.string()), pa.nulls(n, pa.string())]


class FramedRows(RowDecoder):
    """Registry-framed keys and values, by a `PartDecoder` each."""

    def __init__(self, registry: Registry, plans: Sequence[PartPlan], topic: str) -> None:
        self.parts = [PartDecoder(registry, plan, topic) for plan in plans]

    def columns(self, records: Sequence[Any], types: Sequence[pa.DataType]) -> list[pa.Array]:
        decoded: list[pa.Array] = []
        errors: list[pa.Array] = []
        for decoder, data_type in zip(self.parts, types, strict=True):
            out: list[object] = []
            why: list[str | None] = []
            key = decoder.plan.part == "key"
            for r in records:
                value, error = decoder.decode(r.key if key else r.value, r.headers)
                out.append(value)
                why.append(error)
            decoded.append(pa.array(out, data_type))
            errors.append(pa.array(why, pa.string()))
        return decoded + errors


class InternalRows(RowDecoder):
    """A Kafka internal topic's records (docs/spec.md section 8) as the JSON `kfs cat` prints for their
    key and value; a record that does not decode has its reason in `value_decode_error`."""

    def __init__(self, topic: str, plog: Any) -> None:
        from kfs.internal_topics.lines import line_decoder

        self.decode = line_decoder(topic, "auto", plog, None)

    def columns(self, records: Sequence[Any], types: Sequence[pa.DataType]) -> list[pa.Array]:
        if self.decode is None:  # (a __cluster_metadata partition that is not a metadata log)
            return super().columns(records, types)
        keys: list[str | None] = []
        values: list[str | None] = []
        errors: list[str | None] = []
        for r in records:
            key, value, error, _ = self.decode(r)
            keys.append(key)
            values.append(value)
            errors.append(error)
        return [pa.array(keys, types[0]), pa.array(values, types[1]), pa.nulls(len(records), pa.string()),
                pa.array(errors, pa.string())]


def row_decoder(registry: Registry | None, plans: Sequence[PartPlan], topic: str, plog: Any) -> RowDecoder:
    """How a piece of `topic` fills the decoded columns planned (`plans`, from the columns' metadata)."""
    from kfs.internal_topics.framing import internal_topic

    if internal_topic(topic):
        return InternalRows(topic, plog)
    if registry is None:
        if any(plan.schema_id is not None for plan in plans):
            raise PayloadError("the schema registry the query was planned with is no longer there")
        return RowDecoder()
    return FramedRows(registry, plans, topic)


def wants_decoded_columns(registry: Registry | None, subscribe: Sequence[str] | None) -> bool:
    """Whether a read gains the decoded columns: with a registry in reach, or when it reads Kafka's
    internal topics only (`subscribe=__consumer_offsets`)."""
    from kfs.internal_topics.framing import internal_topic

    return registry is not None or (bool(subscribe) and all(internal_topic(t) for t in subscribe or ()))
