"""Registry-framed keys and values as typed Spark columns (`key_decoded` / `value_decoded`).

A read of one topic whose subject (`<topic>-value` / `<topic>-key`, Confluent's TopicNameStrategy)
is Avro or Protobuf gets a column typed as Spark's own `from_avro` / `from_protobuf` would type it
(kfs.spark.avro_types, kfs.spark.protobuf_types).

The subject's latest version is the reader schema; each record is read with the schema it was written
with and resolved to it (kfs.registry.resolution: Avro's rules, by fastavro). Otherwise (several
topics, a JSON Schema subject, no subject) the column is a string holding the decoded JSON text, as
`kfs cat` prints the key or value. A framed key or value that does not decode is null there, and
`key_decode_error` / `value_decode_error` say why in the sentence `kfs cat` gives (docs/spec.md 9).

The column's metadata names the reader schema's id, so every task reads with the schema the driver
planned with, even when `_schemas` grows during the query.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import DataType, StringType, StructField

from kfs.registry.avro import AvroDatumError, AvroSchemaError
from kfs.registry.avro_arrow import (
    avro_arrow_decode,
    avro_arrow_program,
    avro_text_column,
    protobuf_arrow_decode,
    protobuf_arrow_program,
)
from kfs.registry.avro_arrow_program import ArrowProgram, Writer, compile_arrow_program
from kfs.registry.branch_tags import needs_tags
from kfs.registry.decode import PayloadError, Registry
from kfs.registry.lines import KEY_HEADER, VALUE_HEADER, framed
from kfs.registry.protobuf import ProtobufPayloadError, message_indexes
from kfs.registry.protobuf_arrow_program import compile_protobuf_program
from kfs.registry.resolution import READ_LOGICAL_TYPES, AvroResolver, ParsedAvro, parse_avro
from kfs.spark.avro_types import Convert, TypingError, avro_converter, avro_type
from kfs.spark.json_shaped import json_shaped, json_type, parse_lines, to_spark
from kfs.spark.protobuf_types import protobuf_converter, protobuf_type
from kfs.spark.pruning import arrow_type, project_array

__all__ = ["PARTS", "NullRows", "PartDecoder", "PartPlan", "RowDecoder", "TypingError", "avro_type", "decoded_fields",
           "part_plan", "plan_from_field", "protobuf_type", "row_decoder", "wants_decoded_columns"]

PARTS = ("key", "value")
METADATA_KEY = "kfs.decoded"  # a typed column's metadata: {"type", "id", "subject"}


# ---- planning: which column types a read gets ------------------------------------------------------

@dataclass(frozen=True)
class PartPlan:
    """How one part (key or value) is decoded: as JSON text, or typed by a reader schema."""

    part: str
    subject: str | None = None   # the topic's subject when typed
    schema_id: int | None = None  # the reader schema's id when typed
    kind: str = "JSON"           # JSON (text), AVRO or PROTOBUF (typed), INTERNAL (kfs.spark.internal_types)


def decoded_fields(registry: Registry | None, topics: Sequence[str] | None) -> list[StructField]:
    """The columns a read gains: `key_decoded`, `value_decoded` (typed when `topics` is one topic with an
    Avro or Protobuf subject for that part), `key_decode_error`, `value_decode_error`."""
    fields = []
    for part in PARTS:
        plan, data_type = part_plan(registry, topics, part)
        metadata = {} if plan.kind == "JSON" else {METADATA_KEY: {
            "type": plan.kind, "id": plan.schema_id, "subject": plan.subject}}
        fields.append(StructField(f"{part}_decoded", data_type, True, metadata))
    return fields + [StructField(f"{part}_decode_error", StringType()) for part in PARTS]


def part_plan(registry: Registry | None, topics: Sequence[str] | None, part: str) -> tuple[PartPlan, DataType]:
    """The plan for `part` of a read of `topics` (None: every topic) and its column type: typed when
    each topic's subject for the part has the same latest schema (one topic; or several whose subjects
    registered one schema, which the registry gives one id); else JSON text. One of Kafka's internal
    topics alone is typed by Kafka's schemas (kfs.spark.internal_types)."""
    from kfs.internal_topics.framing import internal_topic

    if topics and len(topics) == 1 and internal_topic(topics[0]):
        from kfs.spark.internal_types import internal_type

        return PartPlan(part, topics[0], None, "INTERNAL"), internal_type(topics[0], part)
    if registry is None or not topics:
        return PartPlan(part), StringType()
    subjects = [f"{topic}-{part}" for topic in topics]
    latest = [max((s for (name, _), s in registry.state.versions.items() if name == subject and not s.deleted),
                  key=lambda s: s.version, default=None) for subject in subjects]
    found = {(s.id, s.type) for s in latest if s is not None}
    if None in latest or len(found) != 1:
        return PartPlan(part), StringType()
    schema_id, kind = found.pop()
    if kind not in ("AVRO", "PROTOBUF"):
        return PartPlan(part), StringType()
    try:
        data_type = reader_type(registry, schema_id)
    except (TypingError, PayloadError, AvroSchemaError):
        return PartPlan(part), StringType()
    return PartPlan(part, ",".join(subjects), schema_id, kind), data_type


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
    schema_id = meta.get("id")
    return PartPlan(part, meta["subject"], None if schema_id is None else int(schema_id), meta["type"])


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
        self._tagged = False  # (the values fastavro reads are tagged: kfs.registry.branch_tags)
        self._convert: Convert | None = None  # (and for values of older versions, resolved to the reader's)
        self._convert_older: Convert | None = None
        self._proto: tuple[Any, Any] | None = None  # (message class, converter) of the reader
        self._proto_descriptor: Any = None  # the reader's message, for kfs/_native/csrc/registry/protobuf_arrow.c
        # the compiled decoder of the part's programs (arrow_program): Avro's or Protobuf's
        self.arrow_decode: Any = protobuf_arrow_decode if plan.kind == "PROTOBUF" else avro_arrow_decode
        # kfs.spark.json_shaped's fast path: the reader schema's own framing, and its JSON renderer
        self.fast_prefix: bytes | None = None
        self.fast_render: Any = None
        self.fast_schema: tuple[Any, dict[str, Any]] | None = None  # (reader schema, named types)
        self._json_renderers: dict[bytes, Any] = {}  # JSON text mode: 4-byte id -> Avro renderer, or False
        self._json_programs: dict[bytes, object] = {}  # and 5-byte prefix -> its compiled renderer's program
        # kfs/_native/csrc/registry/avro_arrow.c's path: the reader schema as parsed for typing, and its
        # programs by the column's Arrow type (None: the schema has none)
        self._typing: ParsedAvro | None = None
        self._arrow: dict[tuple[pa.DataType, pa.DataType, int | None], tuple[object, ArrowProgram] | None] = {}
        if plan.kind == "AVRO" and plan.schema_id is not None:
            reader = registry.state.by_id[plan.schema_id]
            references = registry._reference_texts(reader)
            typing = parse_avro(reader.schema, references)  # with the logical types Spark maps
            # what fastavro reads with: the same, tagged where a union's branches need it (branch_tags)
            self._tagged = needs_tags(typing.schema, typing.named)
            self._reader = parse_avro(reader.schema, references, READ_LOGICAL_TYPES, self._tagged)
            self._typing = typing
            self._convert = avro_converter(typing.schema, typing.named, self._tagged)
            self._convert_older = avro_converter(typing.schema, typing.named, self._tagged, same=False)
            top = typing.named.get(typing.schema, typing.schema) if isinstance(typing.schema, str) else typing.schema
            compiled = registry.compiled(plan.schema_id)
            if isinstance(top, dict) and top.get("type") in ("record", "error") and compiled.error is None \
                    and json_shaped(typing.schema, typing.named):
                self.fast_prefix = b"\0" + plan.schema_id.to_bytes(4, "big")
                self.fast_render = compiled.renderer.render
                self.fast_schema = (typing.schema, typing.named)
        elif plan.kind == "PROTOBUF" and plan.schema_id is not None:
            from google.protobuf import message_factory

            descriptor = _first_message(registry.compiled(plan.schema_id).renderer)
            self._proto = (message_factory.GetMessageClass(descriptor), protobuf_converter(descriptor))
            self._proto_descriptor = descriptor

    def decode(self, data: bytes | None, headers: Sequence[tuple[str, bytes | None]]) -> tuple[Any, str | None]:
        """(the column's value, the decode error): (None, None) for a part that is not framed."""
        if self.plan.kind == "JSON" and not headers and data is not None and data[:1] == b"\0":
            # (the common case, as Registry.decode takes it: an Avro datum after byte 0 and its id)
            render = self._json_renderers.get(data[1:5])
            if render is None:
                render = self._json_renderer(data[1:5])
            if render is not False:
                try:
                    return render(data[5:]), None
                except Exception:  # (Registry.decode below says why, in kfs cat's words)
                    pass
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

    def arrow_program(self, data_type: pa.DataType, shown: pa.DataType | None = None,
                      writer_id: int | None = None) -> tuple[object, ArrowProgram] | None:
        """The compiled decoder's program for a column of `data_type` (checked by the C module), or None
        (not built, not an Avro reader schema, a schema the decoder has no layout for). `shown`: the
        part of `data_type` the query reads (kfs.spark.pruning), the column's type; the rest is read past.
        `writer_id`: for values written with that (older) version, resolved to the reader schema."""
        shown = data_type if shown is None else shown
        if writer_id == self.plan.schema_id:
            writer_id = None
        key = (data_type, shown, writer_id)
        if key in self._arrow:
            return self._arrow[key]
        found = None
        if self._proto_descriptor is not None:
            found = self._protobuf_program(data_type, shown, writer_id)
        elif self._typing is not None and avro_arrow_program is not None and self.plan.schema_id:
            writer = self._writer(writer_id) if writer_id is not None else None
            compiled = None
            if writer_id is None or writer is not None:
                compiled = compile_arrow_program(self._typing.schema, self._typing.named, data_type,
                                                 None if shown.equals(data_type) else shown, writer)
            if compiled is not None:
                found = (avro_arrow_program(compiled.program), compiled)
        self._arrow[key] = found
        return found

    def _protobuf_program(self, data_type: pa.DataType, shown: pa.DataType,
                          writer_id: int | None) -> tuple[object, ArrowProgram] | None:
        """The Protobuf decoder's program (records are parsed with the reader's message, whatever version
        wrote them: a writer's values are decoded by it when its first message is the reader's)."""
        if protobuf_arrow_program is None:
            return None
        if writer_id is not None:
            compiled = self.registry.compiled(writer_id)
            if compiled.kind != "PROTOBUF" or compiled.error is not None:
                return None
            try:
                if _first_message(compiled.renderer).full_name != self._proto_descriptor.full_name:
                    return None
            except TypingError:
                return None
            return self.arrow_program(data_type, shown)
        program = compile_protobuf_program(self._proto_descriptor, data_type,
                                           None if shown.equals(data_type) else shown)
        return None if program is None else (protobuf_arrow_program(program.program), program)

    def _writer(self, schema_id: int) -> Writer | None:
        """Schema `schema_id` as a writer to resolve to the reader schema (None: not an Avro schema of
        the registry, or one that does not parse)."""
        version = self.registry.state.by_id.get(schema_id)
        if version is None or version.type != "AVRO":
            return None
        try:
            parsed = parse_avro(version.schema, self.registry._reference_texts(version))
        except (AvroSchemaError, PayloadError):
            return None

        return Writer(parsed.schema, parsed.named, lambda schema: arrow_type(avro_type(schema, parsed.named)[0]))

    def _json_renderer(self, framing: bytes) -> Any:
        """The renderer of the Avro schema a 4-byte id names, or False (not Avro, not known, id 0)."""
        render: Any = False
        if len(framing) == 4 and framing != b"\0\0\0\0":
            compiled = self.registry.compiled(int.from_bytes(framing, "big"))
            if compiled.kind == "AVRO" and compiled.error is None:
                render = compiled.renderer.render
                program = getattr(compiled.renderer, "program", None)
                if program is not None:
                    self._json_programs[b"\0" + framing] = program
        self._json_renderers[framing] = render
        return render

    def text_programs(self, data: pa.Array) -> list[tuple[bytes, object]]:
        """(prefix, program) of the compiled renderers of the Avro schemas met so far and of the id framing
        `data`'s first framed value (JSON text mode; at most 64): a value of an id not met yet is rendered
        per row, which meets it for the next batch."""
        framing = _first_framing(data)
        if framing is not None and framing not in self._json_renderers:
            self._json_renderer(framing)
        return list(self._json_programs.items())[:64]

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
            raise TypingError(f"{name}: a {compiled.kind} schema, not the {self.plan.kind} of {self.subject}")
        if self._proto is not None:
            indexes, start = message_indexes(body)
            _, message_name = compiled.renderer._message_class(tuple(indexes))
            reader_cls, convert = self._proto
            if message_name != reader_cls.DESCRIPTOR.full_name:
                raise TypingError(f"{name}: a {message_name} message, not the {reader_cls.DESCRIPTOR.full_name} "
                                  f"of {self.subject}")
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
        convert = self._convert if schema_id == self.plan.schema_id else self._convert_older
        assert convert is not None
        try:
            return convert(value)
        except AvroDatumError as e:  # (a decimal wider than its precision)
            raise AvroDatumError(f"{name}: {e}") from None

    def _resolver(self, schema_id: int) -> AvroResolver | str:
        assert self._reader is not None
        resolver: AvroResolver | str
        if schema_id == self.plan.schema_id:
            resolver = AvroResolver(self._reader, self._reader)
        else:
            writer = self.registry.state.by_id[schema_id]
            try:
                resolver = AvroResolver(parse_avro(writer.schema, self.registry._reference_texts(writer),
                                                   READ_LOGICAL_TYPES, self._tagged), self._reader)
            except (AvroSchemaError, PayloadError) as e:
                resolver = str(e)
        self._avro[schema_id] = resolver
        return resolver


class RowDecoder:
    """The four decoded columns of a batch of records; this one: all null (a topic nothing decodes).

    A decoder that can also fill them from Arrow arrays has `array_columns` (NullRows, FramedRows):
    kfs.spark.source builds the undecoded columns in C for those, and hands them the arrays; one
    without it (InternalRows: its decoder reads whole Records) gets the Records."""

    def columns(self, records: Sequence[Any], types: Sequence[pa.DataType]) -> list[pa.Array]:
        """`key_decoded`, `value_decoded` (of `types`), `key_decode_error`, `value_decode_error`."""
        return null_columns(len(records), types)


def null_columns(n: int, types: Sequence[pa.DataType]) -> list[pa.Array]:
    return [pa.nulls(n, types[0]), pa.nulls(n, types[1]), pa.nulls(n, pa.string()), pa.nulls(n, pa.string())]


class NullRows(RowDecoder):
    """All null, from Arrow arrays too."""

    def array_columns(self, keys: pa.Array, values: pa.Array, headers: pa.ListArray | None,
                      types: Sequence[pa.DataType]) -> list[pa.Array]:
        """`columns` of a batch given as Arrow arrays: keys and values binary (null for null), headers
        list<struct<key: string, value: binary>> a row (None: none at all)."""
        return null_columns(len(values), types)


@dataclass(frozen=True)
class ArrayRow:
    """A row of `array_columns`' arrays as the per-row path reads a record."""

    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


class FramedRows(RowDecoder):
    """Registry-framed keys and values, by a `PartDecoder` each."""

    def __init__(self, registry: Registry, plans: Sequence[PartPlan], topic: str,
                 hidden: frozenset[str] = frozenset(), whole: Mapping[str, pa.DataType] | None = None) -> None:
        self.parts = [PartDecoder(registry, plan, topic) for plan in plans]
        self.hidden = hidden  # parts whose columns the query does not show (kfs.spark.pruning): left null
        # The whole decoded type of a part whose column is a pruned part of it (the columns' types are
        # then what the query reads: the compiled decoder reads the rest past, the per-row paths decode
        # the whole value and cut it down)
        self.whole = dict(whole or {})

    def columns(self, records: Sequence[Any], types: Sequence[pa.DataType]) -> list[pa.Array]:
        if avro_arrow_decode is None:  # (no compiled decoder: the per-row paths over the Records)
            return self._record_columns(records, types)
        keys = pa.array([r.key for r in records], pa.binary())
        values = pa.array([r.value for r in records], pa.binary())
        skip = bytes(1 if r.headers else 0 for r in records) if any(r.headers for r in records) else None
        return self._columns(keys, values, skip, lambda i: list(records[i].headers), types)

    def array_columns(self, keys: pa.Array, values: pa.Array, headers: pa.ListArray | None,
                      types: Sequence[pa.DataType]) -> list[pa.Array]:
        if avro_arrow_decode is None:
            rows = [ArrayRow(k, v, _headers_of(headers, i))
                    for i, (k, v) in enumerate(zip(keys.to_pylist(), values.to_pylist(), strict=True))]
            return self._record_columns(rows, types)
        return self._columns(keys, values, _header_rows(headers, len(values)), lambda i: _headers_of(headers, i),
                             types)

    def _columns(self, keys: pa.Array, values: pa.Array, skip: bytes | None,
                 headers_of: Callable[[int], list[tuple[str, bytes | None]]],
                 types: Sequence[pa.DataType]) -> list[pa.Array]:
        """The four columns from binary arrays: by the compiled decoder where the part has a program, the
        per-row paths for the rows it declines and for parts without one (only over the rows that may
        be framed)."""
        decoded: list[pa.Array] = []
        errors: list[pa.Array] = []
        for decoder, data, shown in zip(self.parts, (keys, values), types, strict=True):
            if decoder.plan.part in self.hidden:
                decoded.append(pa.nulls(len(data), shown))
                errors.append(pa.nulls(len(data), pa.string()))
                continue
            whole = self.whole.get(decoder.plan.part, shown)
            if pa.types.is_large_binary(data.type):
                data = data.cast(pa.binary())
            fast = None
            if decoder.arrow_program(whole, shown) is not None:
                fast = _arrow_column(decoder, data, skip, headers_of, whole, shown)
            elif decoder.plan.kind == "JSON" and pa.types.is_string(whole):
                fast = _text_column(decoder, data, skip, headers_of)
            if fast is None:
                fast = _sparse_column(decoder, data, skip, headers_of, whole)
            decoded.append(project_array(fast[0], shown))
            errors.append(fast[1])
        return decoded + errors

    def _record_columns(self, records: Sequence[Any], types: Sequence[pa.DataType]) -> list[pa.Array]:
        """The four columns by the per-row paths, record by record."""
        decoded: list[pa.Array] = []
        errors: list[pa.Array] = []
        for decoder, shown in zip(self.parts, types, strict=True):
            if decoder.plan.part in self.hidden:
                decoded.append(pa.nulls(len(records), shown))
                errors.append(pa.nulls(len(records), pa.string()))
                continue
            whole = self.whole.get(decoder.plan.part, shown)
            fast = _fast_column(decoder, records, whole) if decoder.fast_prefix is not None else None
            if fast is None:
                fast = _column(decoder, records, whole)
            decoded.append(project_array(fast[0], shown))
            errors.append(fast[1])
        return decoded + errors


def _sparse_column(decoder: PartDecoder, data: pa.Array, skip: bytes | None,
                   headers_of: Callable[[int], list[tuple[str, bytes | None]]],
                   data_type: pa.DataType) -> tuple[pa.Array, pa.Array]:
    """A part's column and its errors by the per-row paths, over the rows that may be framed only: a null
    value, or one that neither starts with byte 0 or 1 (kfs.registry.lines.framed) nor has headers (which
    may frame it), decodes to (None, None) (PartDecoder.decode)."""
    n = len(data)
    candidates = _maybe_framed(data, skip)
    rows = [ArrayRow(None, v, headers_of(i)) if decoder.plan.part == "value" else ArrayRow(v, None, headers_of(i))
            for i, v in zip(candidates.tolist(), data.take(pa.array(candidates)).to_pylist(), strict=True)]
    fast = _fast_column(decoder, rows, data_type) if decoder.fast_prefix is not None and rows else None
    if fast is None:
        fast = _column(decoder, rows, data_type)
    if len(rows) == n:
        return fast
    indices = np.full(n, len(rows), dtype=np.int64)  # (the null after the candidates' values)
    indices[candidates] = np.arange(len(rows))
    take = pa.array(indices)
    return (pa.concat_arrays([fast[0], pa.array([None], data_type)]).take(take),
            pa.concat_arrays([fast[1], pa.nulls(1, pa.string())]).take(take))


def _first_framing(data: pa.Array) -> bytes | None:
    """The 4-byte id after byte 0 of the first of `data`'s values that starts so (of 5 bytes or more)."""
    for value in data[:64].to_pylist():  # (a batch's values are most often one id's: the first few say it)
        if value is not None and len(value) >= 5 and value[0] == 0:
            return bytes(value[1:5])
    return None


def _text_column(decoder: PartDecoder, data: pa.Array, skip: bytes | None,
                 headers_of: Callable[[int], list[tuple[str, bytes | None]]]) -> tuple[pa.Array, pa.Array] | None:
    """A JSON-text part's column and its errors: framed Avro values rendered by the compiled renderer into
    the string column in one call (kfs/_native/csrc/registry/avro_arrow.c: avro_text_column), the rows
    it declines by the per-row path; None without a program for any of the batch's ids."""
    programs = decoder.text_programs(data)
    if not programs or avro_text_column is None:
        return None
    n = len(data)
    validity, offsets, body = data.buffers()
    status, text_offsets, text = avro_text_column(programs, n, validity, offsets if offsets is not None else b"\0" * 4,
                                                  body if body is not None else b"", data.offset, skip)
    array = pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(text_offsets), pa.py_buffer(text)])
    declined = np.flatnonzero(np.frombuffer(status, dtype=np.uint8))
    if not len(declined):
        return array, pa.nulls(n, pa.string())
    maybe = np.zeros(n, dtype=bool)
    maybe[_maybe_framed(data, skip)] = True
    why: list[str | None] = [None] * n
    slow: list[str] = []
    indices = np.arange(n, dtype=np.int64)
    for i in declined.tolist():
        value, error = decoder.decode(data[i].as_py(), headers_of(i)) if maybe[i] else (None, None)
        why[i] = error
        if value is None:
            indices[i] = n
        else:
            indices[i] = n + 1 + len(slow)
            slow.append(value)
    combined = pa.concat_arrays([array, pa.nulls(1, pa.string()), pa.array(slow, pa.string())])
    return combined.take(pa.array(indices)), pa.array(why, pa.string())


def _maybe_framed(data: pa.Array, skip: bytes | None) -> np.ndarray:
    """The indexes of the rows of a binary array whose value is not null and starts with byte 0 or 1, or
    whose byte in `skip` (rows with headers) is 1."""
    n = len(data)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    _, offsets, body = data.buffers()
    starts = np.frombuffer(offsets, dtype=np.int32)[data.offset:data.offset + n + 1] if offsets is not None \
        else np.zeros(n + 1, dtype=np.int32)
    lengths = np.diff(starts)
    raw = np.frombuffer(body, dtype=np.uint8) if body is not None and body.size else np.zeros(1, dtype=np.uint8)
    first = raw[np.minimum(starts[:-1], len(raw) - 1)]
    maybe = (lengths > 0) & (first <= 1)
    if skip is not None:
        maybe |= np.frombuffer(skip, dtype=np.uint8).astype(bool)
    if data.null_count:
        maybe &= data.is_valid().to_numpy(zero_copy_only=False)
    return np.flatnonzero(maybe)


def _header_rows(headers: pa.ListArray | None, n: int) -> bytes | None:
    """A byte a row, 1 where the row has headers (its framing may be a header's), or None: no row has."""
    if headers is None or headers.null_count == len(headers) or len(headers.values) == 0:
        return None
    lengths = pc.fill_null(pc.list_value_length(headers), 0)
    return np.asarray(pc.greater(lengths, 0).to_numpy(zero_copy_only=False), dtype=np.uint8).tobytes()


def _headers_of(headers: pa.ListArray | None, i: int) -> list[tuple[str, bytes | None]]:
    if headers is None:
        return []
    row = headers[i].as_py()
    return [(h["key"], h["value"]) for h in row] if row else []


def _arrow_column(decoder: PartDecoder, data: pa.Array, skip: bytes | None,
                  headers_of: Callable[[int], list[tuple[str, bytes | None]]],
                  data_type: pa.DataType, shown: pa.DataType | None = None) -> tuple[pa.Array, pa.Array] | None:
    """A part's column (of `shown`, a part of `data_type`: by default all of it) and its errors by the
    compiled decoder (kfs/_native/csrc/registry/avro_arrow.c, protobuf_arrow.c); the rows it declines by
    the per-row path (`decoder.decode`, cut down to `shown`), put in their places by `take`. None where
    the values are not a binary array the decoder reads."""
    shown = data_type if shown is None else shown
    found = decoder.arrow_program(data_type, shown)
    decode = decoder.arrow_decode
    assert found is not None and decode is not None and decoder.plan.schema_id is not None
    program, compiled = found
    if pa.types.is_large_binary(data.type):
        data = data.cast(pa.binary())
    if not pa.types.is_binary(data.type):
        return None
    n = len(data)
    validity, offsets, body = data.buffers()
    buffers = (validity, offsets if offsets is not None else b"\0" * 4, body if body is not None else b"",
               data.offset, skip)
    status, columns = decode(program, _prefix(decoder.plan.schema_id), n, *buffers)
    arrays = [compiled.build(columns)]
    indices = np.arange(n, dtype=np.int64)
    declined = np.frombuffer(status, dtype=np.uint8).astype(bool)
    for writer_id in _other_ids(data, declined, decoder.plan.schema_id):  # (older versions, resolved in C)
        other = decoder.arrow_program(data_type, shown, writer_id)
        if other is None:
            continue
        status, columns = decode(other[0], _prefix(writer_id), n, *buffers)
        decoded = declined & (np.frombuffer(status, dtype=np.uint8) == 0)
        indices[decoded] += n * len(arrays)
        declined &= ~decoded
        arrays.append(other[1].build(columns))
    if not declined.any():
        return _taken(arrays, indices), pa.nulls(n, pa.string())
    why: list[str | None] = [None] * n
    slow: list[object] = []
    for i in np.flatnonzero(declined).tolist():
        value, error = decoder.decode(data[i].as_py(), headers_of(i))
        why[i] = error
        if value is not None:  # (else the decoder's null placeholder stays)
            indices[i] = n * len(arrays) + len(slow)
            slow.append(value)
    errors = pa.array(why, pa.string())
    if slow:
        arrays.append(project_array(pa.array(slow, data_type), shown))
    return _taken(arrays, indices), errors


def _prefix(schema_id: int) -> bytes:
    """Confluent's framing of a value written with `schema_id`: byte 0, the id (4 bytes, big-endian)."""
    return b"\0" + schema_id.to_bytes(4, "big")


def _taken(arrays: list[pa.Array], indices: np.ndarray) -> pa.Array:
    """Row i from `indices[i]` of the arrays laid end to end (each but the last of the batch's length)."""
    n = len(indices)
    if len(arrays) == 1:
        return arrays[0]
    whole = indices[0] // n if n else 0
    if whole < len(arrays) and len(arrays[whole]) == n and (indices == np.arange(n) + whole * n).all():
        return arrays[whole]  # (a batch of one writer's values: that decoder's column as it is)
    return pa.concat_arrays(arrays).take(pa.array(indices))


_MAX_WRITERS = 8  # (older versions a batch is resolved for in C; values of any more go the per-row path)


def _other_ids(data: pa.Array, declined: np.ndarray, reader_id: int) -> list[int]:
    """The schema ids (other than the reader's) framing the declined values of a binary array (byte 0
    and a 4-byte id), most frequent first."""
    if not declined.any():
        return []
    _, offsets, body = data.buffers()
    if offsets is None or body is None or not body.size:
        return []
    starts = np.frombuffer(offsets, dtype=np.int32)[data.offset:data.offset + len(data) + 1]
    raw = np.frombuffer(body, dtype=np.uint8)
    at = starts[np.flatnonzero(declined & (np.diff(starts) >= 5))]
    at = at[raw[at] == 0]
    ids = (raw[at + 1].astype(np.int64) << 24) | (raw[at + 2].astype(np.int64) << 16) | \
        (raw[at + 3].astype(np.int64) << 8) | raw[at + 4].astype(np.int64)
    found, counts = np.unique(ids, return_counts=True)
    order = np.argsort(-counts, kind="stable")
    return [int(i) for i in found[order] if int(i) != reader_id][:_MAX_WRITERS]


def _column(decoder: PartDecoder, records: Sequence[Any], data_type: pa.DataType) -> tuple[pa.Array, pa.Array]:
    """A part's column and its errors, record by record."""
    out: list[object] = []
    why: list[str | None] = []
    key = decoder.plan.part == "key"
    for r in records:
        value, error = decoder.decode(r.key if key else r.value, r.headers)
        out.append(value)
        why.append(error)
    return pa.array(out, data_type), pa.array(why, pa.string())


def _fast_column(decoder: PartDecoder, records: Sequence[Any], data_type: pa.DataType
                 ) -> tuple[pa.Array, pa.Array] | None:
    """`_column` by kfs.spark.json_shaped's path where it applies (None: Arrow did not parse the batch)."""
    prefix, render = decoder.fast_prefix, decoder.fast_render
    key = decoder.plan.part == "key"
    texts: list[str] = []
    slow: list[object] = []
    where: list[int | None] = []  # per row: its place in texts + slow, or None (null)
    why: list[str | None] = []
    for r in records:
        data = r.key if key else r.value
        if data is not None and not r.headers and data[:5] == prefix:
            try:
                texts.append(render(data[5:]))
                where.append(len(texts) - 1)
                why.append(None)
                continue
            except Exception:  # (the general path says why, in kfs cat's words)
                pass
        value, error = decoder.decode(data, r.headers)
        why.append(error)
        if value is None:
            where.append(None)
        else:
            slow.append(value)
            where.append(-len(slow))
    assert decoder.fast_schema is not None
    schema, named = decoder.fast_schema
    parsed = parse_lines(texts, json_type(schema, named)) if texts else None
    if texts and parsed is None:
        return None
    try:
        parsed = to_spark(parsed, schema, named, data_type) if parsed is not None else pa.array([], data_type)
    except pa.ArrowInvalid:  # (a millisecond timestamp past Spark's µs: each row's error is the general path's)
        return None
    errors = pa.array(why, pa.string())
    if not slow and len(texts) == len(records):
        return parsed, errors
    combined = pa.concat_arrays([parsed, pa.array(slow, data_type)]) if slow else parsed
    indices = [i if i is None or i >= 0 else len(texts) - i - 1 for i in where]
    return combined.take(pa.array(indices, pa.int64())), errors


def row_decoder(registry: Registry | None, plans: Sequence[PartPlan], topic: str, plog: Any,
                hidden: frozenset[str] = frozenset(), whole: Mapping[str, pa.DataType] | None = None) -> RowDecoder:
    """How a piece of `topic` fills the decoded columns planned (`plans`, from the columns' metadata).
    `hidden`: the parts ("key", "value") whose decoded columns the query does not show, left null;
    `whole`: the whole type of a part whose column is a pruned part of it (FramedRows)."""
    from kfs.internal_topics.framing import internal_topic

    if internal_topic(topic):
        from kfs.spark.internal_rows import InternalRows  # (which builds on RowDecoder here)

        return InternalRows(topic, plog, [plan.part for plan in plans if plan.kind == "INTERNAL"], hidden)
    if registry is None:
        if any(plan.schema_id is not None for plan in plans):
            raise PayloadError("the schema registry the query was planned with is no longer there")
        return NullRows()
    return FramedRows(registry, plans, topic, hidden, whole)


def wants_decoded_columns(registry: Registry | None, subscribe: Sequence[str] | None) -> bool:
    """Whether a read gains the decoded columns: with a registry in reach, or when it reads Kafka's
    internal topics only (`subscribe=__consumer_offsets`)."""
    from kfs.internal_topics.framing import internal_topic

    return registry is not None or (bool(subscribe) and all(internal_topic(t) for t in subscribe or ()))
