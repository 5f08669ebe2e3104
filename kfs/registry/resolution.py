"""Avro datums read into a reader schema by Avro's schema-resolution rules (fastavro resolves).

A topic's records were written with whatever version of its subject was current then; a typed view
(kfs.spark.typed) shows them all in one shape, the subject's latest version. The Avro specification's
resolution rules (fields matched by name, a reader field missing from the writer takes its default,
a writer field the reader lacks is skipped, int -> long -> float -> double promotion, ...) are
fastavro's: `schemaless_reader(stream, writer, reader)`. This module only prepares both schemas
the same way and turns fastavro's failures into one sentence.

Logical types are kept where Spark maps them (date, timestamp-millis/micros, local-timestamp-*,
decimal) and dropped elsewhere (time-*, uuid, duration: Spark shows their underlying type).
"""

from __future__ import annotations

import io
import json
import math
from typing import Any

from kfs.registry.avro import _HIGH_BITS, _LONG_RUN, _NINE_HIGH, AvroDatumError, AvroSchemaError, _Rewriter, _Skipper
from kfs.registry.branch_tags import Tagger

# The logical types Spark's SchemaConverters maps to a type of its own; fastavro converts these
# (to datetime.date, datetime.datetime, decimal.Decimal) and no others are left in the schema.
SPARK_LOGICAL_TYPES = frozenset({"date", "timestamp-millis", "timestamp-micros", "local-timestamp-millis",
                                 "local-timestamp-micros", "decimal"})


# What fastavro converts when reading values for Spark: decimals only. Dates and timestamps stay ints
# (days, ms or µs), which Arrow takes as they are; a datetime object per value cost more than the rest.
READ_LOGICAL_TYPES = frozenset({"decimal"})


def _keep_spark_logical_types(schema: Any, kept: frozenset[str] = SPARK_LOGICAL_TYPES) -> Any:
    """`schema` (parsed JSON) with only the logical types in `kept` (and Avro's Java takes) left."""
    if isinstance(schema, list):
        return [_keep_spark_logical_types(s, kept) for s in schema]
    if not isinstance(schema, dict):
        return schema
    logical = schema.get("logicalType")
    keep = logical in kept and (logical != "decimal" or valid_decimal(schema))
    out = {k: v for k, v in schema.items() if k != "logicalType" or keep}
    kind = schema.get("type")
    if kind in ("record", "error"):
        out["fields"] = [dict(f, type=_keep_spark_logical_types(f.get("type"), kept)) if isinstance(f, dict) else f
                         for f in schema.get("fields") or []]
    elif kind == "array":
        out["items"] = _keep_spark_logical_types(schema.get("items"), kept)
    elif kind == "map":
        out["values"] = _keep_spark_logical_types(schema.get("values"), kept)
    elif isinstance(kind, (dict, list)):
        out["type"] = _keep_spark_logical_types(kind, kept)
    return out


class ParsedAvro:
    """A schema (after the schemas it references) parsed by fastavro with only Spark's logical types:
    `schema`, its named types by full name, and whether its datums are walked before fastavro reads
    them (arrays of zero-width items, recursion: kfs.registry.avro's bounds)."""

    def __init__(self, schema: Any, named: dict[str, Any], checked_first: bool) -> None:
        self.schema = schema
        self.named = named
        self.checked_first = checked_first


def valid_decimal(schema: dict[str, Any]) -> bool:
    """Whether Avro's Java library takes a decimal logical type (LogicalTypes.Decimal.validate): an
    invalid one is ignored there (the bytes or fixed stays itself), and fastavro would refuse the schema."""
    precision, scale = schema.get("precision"), schema.get("scale", 0)
    if type(precision) is not int or type(scale) is not int or precision <= 0 or not 0 <= scale <= precision:
        return False
    if schema.get("type") == "fixed":
        size = schema.get("size")
        if type(size) is not int:
            return False
        return precision <= math.floor(math.log10(2) * (8 * size - 1))  # Avro's maxPrecision
    return schema.get("type") == "bytes"


def parse_avro(schema_text: str, references: list[str] | None = None,
               logical_types: frozenset[str] = SPARK_LOGICAL_TYPES, tagged: bool = False) -> ParsedAvro:
    """`schema_text` parsed (see ParsedAvro) with the logical types in `logical_types` (Spark's, by
    default: what a Spark type is made from; READ_LOGICAL_TYPES to read values for Arrow); `tagged`:
    its primitives in records that name their type (kfs.registry.branch_tags, to read values with);
    AvroSchemaError (one sentence) when it does not parse."""
    from fastavro import parse_schema

    named: dict[str, Any] = {}
    parsed: Any = None
    rewriter = _Rewriter()
    tagger = Tagger() if tagged else None
    try:
        for text in [*(references or []), schema_text]:
            schema = json.loads(text)
            rewriter.rewrite(schema, "")
            kept = _keep_spark_logical_types(schema, logical_types)
            parsed = parse_schema(kept if tagger is None else tagger.tag(kept), named_schemas=named)
    except AvroSchemaError:
        raise
    except ValueError as e:
        if isinstance(e, json.JSONDecodeError):
            raise AvroSchemaError(f"the schema is not JSON ({e})") from None
        raise AvroSchemaError(f"the schema does not parse as Avro ({type(e).__name__}: {e})") from None
    except Exception as e:  # fastavro's SchemaParseException, UnknownType...
        raise AvroSchemaError(f"the schema does not parse as Avro ({type(e).__name__}: {e})") from None
    # Walked first where fastavro could be asked too much, or would read a value otherwise than Apache
    # Avro's Java reader (an int past 32 bits, a negative union or enum index, a boolean byte over 1):
    # the walk refuses or rewrites those as Java reads them (kfs.registry.avro._Skipper).
    return ParsedAvro(parsed, named, rewriter.zero_width_arrays or rewriter.recursive or rewriter.java_ints
                      or rewriter.indexes or rewriter.booleans)


class AvroResolver:
    """Datums of one writer schema read as the reader schema: `read(datum)` -> Python objects.

    Named types in unions come as `(full name, value)` (fastavro's `return_named_type`), so that a
    typed view can tell which branch a value took."""

    def __init__(self, writer: ParsedAvro, reader: ParsedAvro) -> None:
        from fastavro.read import schemaless_reader

        self._read = schemaless_reader
        self.writer = writer
        self.reader = reader
        self._same = writer is reader
        self._reader_schema = None if self._same else with_java_byte_defaults(reader.schema, reader.named)

    def read(self, datum: bytes) -> Any:
        """The datum resolved to the reader schema; AvroDatumError (one sentence) when it does not decode
        or does not resolve (a writer value the reader cannot take: an unknown enum symbol, a branch
        the reader's union lacks, a missing field without a default)."""
        writer = self.writer
        if writer.checked_first or (_NINE_HIGH in datum.translate(_HIGH_BITS) and _LONG_RUN.search(datum) is not None):
            skipper = _Skipper(datum, writer.named)  # too many items, too deep, a varint past 64 bits
            skipper.skip(writer.schema)
            datum = skipper.as_java_reads_it()  # ints, indexes and booleans as Java reads them
        stream = io.BytesIO(datum)
        try:
            value = self._read(stream, writer.schema, self._reader_schema, return_named_type=True)
        except EOFError:
            raise AvroDatumError("the datum ends early") from None
        except IndexError:
            raise AvroDatumError("the datum ends early or holds an index out of range") from None
        except Exception as e:  # fastavro's SchemaResolutionError, a bad UTF-8 string...
            raise AvroDatumError(f"the datum does not decode as the reader schema ({type(e).__name__}: {e})") \
                from None
        left = len(datum) - stream.tell()
        if left:
            raise AvroDatumError(f"{left} bytes are left after the datum")
        return value


def with_java_byte_defaults(schema: Any, named: dict[str, Any]) -> Any:
    """The parsed reader schema with each `bytes` or `fixed` default (a JSON string in the schema, within
    a field's default at any depth) as the bytes Avro's Java reader gives a record that lacks the field:
    each character one byte, ISO-8859-1, and `?` for one past 255 (`String.getBytes`). fastavro hands
    such a default on as the JSON string itself, which Arrow then wrote as its UTF-8 (`"\u00ff"`: c3 bf,
    where Java gives ff; a 2-byte fixed 3 bytes long). fastavro's parser refuses a bytes default, so it
    is set in a copy of the schema fastavro has parsed. The schema itself when it has no such default."""
    import copy

    original = schema
    found = False

    def java_bytes(value: Any, field_type: Any) -> Any:
        nonlocal found
        target = resolve_named(field_type, named)
        kind = schema_kind(target)
        if kind in ("bytes", "fixed") and isinstance(value, str):
            if isinstance(target, dict) and target.get("logicalType") == "decimal":
                return value  # (a decimal's default: fastavro's, as before)
            found = True
            return value.encode("latin-1", errors="replace")
        if kind in ("record", "error") and isinstance(value, dict):
            for f in target.get("fields", ()):
                if f.get("name") in value:
                    value[f["name"]] = java_bytes(value[f["name"]], f.get("type"))
            return value
        if kind == "array" and isinstance(value, list):
            return [java_bytes(v, target.get("items")) for v in value]
        if kind == "map" and isinstance(value, dict):
            return {k: java_bytes(v, target.get("values")) for k, v in value.items()}
        if kind == "union":  # (a union's default is of its first branch)
            branches = target if isinstance(target, list) else target.get("type")
            return java_bytes(value, branches[0]) if branches else value
        return value

    def walk(node: Any, seen: set[int]) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item, seen)
        elif isinstance(node, dict) and id(node) not in seen:
            seen.add(id(node))
            for f in node.get("fields", ()) if isinstance(node.get("fields"), list) else ():
                if isinstance(f, dict) and "default" in f:
                    f["default"] = java_bytes(f["default"], f.get("type"))
                walk(f.get("type") if isinstance(f, dict) else None, seen)
            for key in ("type", "items", "values"):
                if isinstance(node.get(key), (dict, list)):
                    walk(node[key], seen)

    copied = copy.deepcopy({"schema": schema, "named": named})
    schema, named = copied["schema"], copied["named"]
    seen: set[int] = set()
    walk(schema, seen)
    for named_type in named.values():
        walk(named_type, seen)
    if isinstance(schema, dict) and isinstance(schema.get("__named_schemas"), dict):
        for named_type in schema["__named_schemas"].values():
            walk(named_type, seen)
    return schema if found else original


# ---- a parsed schema's shape, as the Spark typing (kfs.spark.avro_types) and the compiled Arrow
# decoder's program (kfs.registry.avro_arrow_program) both walk it -----------------------------------

def resolve_named(schema: Any, named: dict[str, Any]) -> Any:
    """A reference to a named type as the type itself (other schemas as they are)."""
    return named[schema] if isinstance(schema, str) and schema in named else schema


def schema_kind(schema: Any) -> str:
    """The schema's Avro type: "union" for a list (or a type that is one), "?" for a malformed one."""
    if isinstance(schema, list):
        return "union"
    if isinstance(schema, str):
        return schema
    kind = schema.get("type")
    return kind if isinstance(kind, str) else "union" if isinstance(kind, list) else "?"


def non_null_branches(branches: list[Any]) -> list[Any]:
    """A union's branches but null."""
    return [b for b in branches if b != "null" and not (isinstance(b, dict) and b.get("type") == "null")]
