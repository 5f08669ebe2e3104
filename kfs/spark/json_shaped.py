"""A fast path for typed Avro columns whose Spark value Avro's JSON encoding spells out.

For a reader schema of records, arrays, enums, unions, dates, timestamps and primitives other than
bytes (no maps, fixed or decimals), the JSON text `kfs cat` renders for a datum (kfs.registry.avro: a program
compiled from the schema, in C) holds the Spark value: a union is `{"<branch>": value}`, which Arrow
parses as a struct of one field per branch, then made Spark's shape column by column (`to_spark`:
the branch's value for a union of null and one type, `member0`, `member1`, ... for others). A batch
of such datums, all written with the reader schema itself, is then rendered and parsed by Arrow's
JSON reader in C++, instead of fastavro building Python objects for `pa.array`: measured on the
Spark benchmark's flat record, ~0.3 µs a datum rendered and ~0.6 µs parsed, against ~2.4 µs read
by fastavro and ~0.2 µs more for `pa.array`. Anything else (another writer version to resolve, a
header-framed record, a datum that does not render, text Arrow does not parse: a NaN) takes the
general path, record by record.
"""

from __future__ import annotations

import io
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from kfs.registry.resolution import resolve_named as _named
from kfs.registry.resolution import schema_kind as _kind

# The logical types whose JSON (their underlying int or long) Arrow casts to Spark's type.
_LOGICAL = {"date": "int", "timestamp-millis": "long", "timestamp-micros": "long", "local-timestamp-millis": "long",
            "local-timestamp-micros": "long"}
_PRIMITIVES: dict[str, pa.DataType] = {"string": pa.string(), "enum": pa.string(), "boolean": pa.bool_(),
                                       "int": pa.int32(), "long": pa.int64(), "float": pa.float32(),
                                       "double": pa.float64()}


def _resolve(schema: Any, named: dict[str, Any]) -> Any:
    schema = _named(schema, named)
    while isinstance(schema, dict) and isinstance(schema.get("type"), (dict, list)):
        schema = _named(schema["type"], named)
    return schema


def _branches(schema: list[Any], named: dict[str, Any]) -> list[Any]:
    return [b for b in (_resolve(x, named) for x in schema) if _kind(b) != "null"]


def _label(branch: Any) -> str:
    """A union branch's key in Avro's JSON encoding: a named type's full name, else its type."""
    return branch["name"] if isinstance(branch, dict) and "name" in branch else _kind(branch)


def json_shaped(schema: Any, named: dict[str, Any], seen: frozenset[str] = frozenset()) -> bool:
    """Whether Arrow can parse Avro's JSON encoding of `schema`'s values into what `to_spark` makes
    Spark's value of: no maps, bytes, fixed or logical types, no recursion, and no union Spark folds
    into one type ([int, long], [float, double])."""
    schema = _resolve(schema, named)
    kind = _kind(schema)
    if isinstance(schema, dict) and "logicalType" in schema:
        return _LOGICAL.get(schema["logicalType"]) == kind  # (dates and timestamps: their ints)
    if kind in _PRIMITIVES:
        return True
    if kind in ("record", "error"):
        name = schema["name"]
        # (a record of no fields: StructArray.from_arrays of no children is empty, whatever the batch)
        return name not in seen and bool(schema["fields"]) and all(
            json_shaped(f["type"], named, seen | {name}) for f in schema["fields"])
    if kind == "array":
        return json_shaped(schema["items"], named, seen)
    if kind == "union":
        rest = _branches(schema, named)
        kinds = {_kind(b) for b in rest}
        labels = [_label(b) for b in rest]
        return (bool(rest) and len(set(labels)) == len(labels)
                and not (len(rest) == 2 and kinds in ({"int", "long"}, {"float", "double"}))
                and all(json_shaped(b, named, seen) for b in rest))
    return False  # maps, bytes and fixed (code points), null


def json_type(schema: Any, named: dict[str, Any]) -> pa.DataType:
    """The Arrow type Avro's JSON encoding of a `json_shaped` schema parses as (a union: a struct of
    its branches' labels)."""
    schema = _resolve(schema, named)
    kind = _kind(schema)
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind]
    if kind in ("record", "error"):
        return pa.struct([pa.field(f["name"], json_type(f["type"], named)) for f in schema["fields"]])
    if kind == "array":
        return pa.list_(json_type(schema["items"], named))
    return pa.struct([pa.field(_label(b), json_type(b, named)) for b in _branches(schema, named)])


def to_spark(array: pa.Array, schema: Any, named: dict[str, Any], target: pa.DataType) -> pa.Array:
    """An array parsed as `json_type(schema)` in Spark's shape: of `target`, the Arrow type of the
    column's Spark type (kfs.spark.avro_types.avro_type)."""
    schema = _resolve(schema, named)
    kind = _kind(schema)
    if kind in _PRIMITIVES:
        logical = schema.get("logicalType") if isinstance(schema, dict) else None
        if logical in ("timestamp-millis", "local-timestamp-millis"):
            array = pc.multiply_checked(array, 1000)  # Spark's µs
        return array if array.type == target else array.cast(target)
    if kind in ("record", "error"):
        children = [to_spark(array.field(i), f["type"], named, target.field(i).type)
                    for i, f in enumerate(schema["fields"])]
        return pa.StructArray.from_arrays(children, fields=list(target), mask=array.is_null())
    if kind == "array":
        values = to_spark(array.values, schema["items"], named, target.value_type)
        return pa.ListArray.from_arrays(array.offsets, values, type=target, mask=array.is_null())
    rest = _branches(schema, named)
    chosen = array.flatten()  # (each branch's values, null where the union is null or took another)
    if len(rest) == 1:  # a union of null and one type: its value, nullable
        return to_spark(chosen[0], rest[0], named, target)
    members = [to_spark(chosen[i], b, named, target.field(i).type) for i, b in enumerate(rest)]
    return pa.StructArray.from_arrays(members, fields=list(target), mask=array.is_null())


def parse_lines(texts: list[str], struct: pa.StructType) -> pa.Array | None:
    """The JSON objects `texts` as a struct array of `struct` (a `json_type`); None when Arrow does not
    parse them."""
    data = "\n".join(texts).encode("utf-8")
    try:
        table = pa_json.read_json(
            io.BytesIO(data),
            read_options=pa_json.ReadOptions(use_threads=False, block_size=max(len(data) + 1, 1 << 20)),
            parse_options=pa_json.ParseOptions(explicit_schema=pa.schema(list(struct)),
                                               unexpected_field_behavior="error"))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if table.num_rows != len(texts):
        return None
    columns = [column.combine_chunks() for column in table.columns]
    try:
        return pa.StructArray.from_arrays(columns, fields=list(struct))
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None
