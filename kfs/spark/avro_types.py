"""Avro schemas as Spark types and fastavro's objects as the values Arrow takes for them, as Spark's
own `org.apache.spark.sql.avro.SchemaConverters.toSqlType` and `AvroDeserializer` have them: records
-> structs, a union of null and one type -> that type, nullable; [int, long] -> long and [float,
double] -> double; other unions -> a struct of `member0`, `member1`, ... numbered over the non-null
branches (the branch taken set, the others null); enums -> strings, maps -> maps, fixed and bytes ->
binary; date -> date, timestamp-millis/micros -> timestamp, local-timestamp-* -> timestamp_ntz, decimal
-> decimal; a recursive schema is refused, as there. Schemas come parsed by fastavro
(kfs.registry.resolution.parse_avro: full names, only the logical types Spark maps; values are read
with decimals alone converted, dates and timestamps as ints: READ_LOGICAL_TYPES).
"""

from __future__ import annotations

import decimal
from collections.abc import Callable
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
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

from kfs.registry.avro import AvroDatumError
from kfs.registry.branch_tags import TAGGED, tag_kind, untag
from kfs.registry.resolution import non_null_branches as _non_null
from kfs.registry.resolution import resolve_named as _named
from kfs.registry.resolution import schema_kind as _kind


class TypingError(ValueError):
    """A schema Spark's converters would refuse (a recursive one, an unsupported type): one sentence."""


# ---- Avro -> Spark types (SchemaConverters.toSqlType) -----------------------------------------------

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


def identity(x: Any) -> Any:
    return x


def avro_converter(schema: Any, named: dict[str, Any], tagged: bool = False, same: bool = True) -> Convert:
    """fastavro's object of `schema` (named types in unions as `(name, value)`) to the Python value
    `pa.array` takes for `avro_type(schema)`. `tagged`: values read with the schema's primitives
    tagged (kfs.registry.branch_tags), which the converter takes off. `same`: for values written with
    `schema` itself (not resolved from an older version: a union's value then always says its branch,
    and a dict without a name is a map)."""
    schema = _named(schema, named)
    if isinstance(schema, dict) and isinstance(schema.get("type"), (dict, list)):
        return avro_converter(schema["type"], named, tagged, same)
    kind = _kind(schema)
    if kind in ("record", "error"):
        convs = [(f["name"], c) for f in schema["fields"]
                 if (c := avro_converter(f["type"], named, tagged, same)) is not identity]
        if not convs:
            return identity

        def record(x: dict[str, Any]) -> dict[str, Any]:
            for name, c in convs:
                x[name] = c(x[name])
            return x

        return record
    if kind == "array":
        item = avro_converter(schema["items"], named, tagged, same)
        return identity if item is identity else (lambda xs: [item(v) for v in xs])
    if kind == "map":
        value = avro_converter(schema["values"], named, tagged, same)
        return identity if value is identity else (lambda m: {k: value(v) for k, v in m.items()})
    if kind == "union":
        return _union_converter(schema if isinstance(schema, list) else schema["type"], named, tagged, same)
    convert: Convert = identity
    if isinstance(schema, dict) and schema.get("logicalType") in ("timestamp-millis", "local-timestamp-millis"):
        convert = _millis_to_micros  # (read as ints: READ_LOGICAL_TYPES; Arrow takes µs, and days for a date)
    elif isinstance(schema, dict) and schema.get("logicalType") == "decimal":
        convert = _decimal_converter(schema["precision"], schema.get("scale", 0))
    if tagged and kind in TAGGED:
        return untag if convert is identity else (lambda x: convert(untag(x)))
    return convert


def _decimal_converter(precision: int, scale: int) -> Convert:
    """A decimal as fastavro reads it, refused (AvroDatumError) when its unscaled number has more digits
    than the precision: fastavro rounds it to the precision (a value the datum does not hold), Spark's
    AvroDeserializer fails on it, and pa.array would fail the whole batch."""
    limit = decimal.Decimal(10) ** precision

    def check(x: decimal.Decimal) -> decimal.Decimal:
        if abs(x.scaleb(scale)) >= limit:
            raise AvroDatumError(f"a decimal of more than the {precision} digits of its precision")
        return x

    return check


_INT64 = 1 << 63


def _millis_to_micros(x: int) -> int:
    """A millisecond timestamp as the microseconds Spark's timestamp holds, refused (AvroDatumError) past
    its 64 bits: Spark's AvroDeserializer fails on it (`Math.multiplyExact`), and pa.array would fail the
    whole batch; here the row's value is null and its error says why, as for a decimal too wide."""
    micros = x * 1000
    if not -_INT64 <= micros < _INT64:
        raise AvroDatumError(f"a timestamp-millis of {x} ms is past the 64-bit microseconds of Spark's timestamp")
    return micros


def _union_converter(branches: list[Any], named: dict[str, Any], tagged: bool, same: bool) -> Convert:
    """A union's value: None for null, else by the branch it took, as Spark's AvroDeserializer puts it.

    The branch: a named type comes as `(full name, value)` (fastavro's `return_named_type`); a tagged
    primitive names its type (kfs.registry.branch_tags); any other value by its Python type, the first
    branch taking it. A value from an older writer that had no union there comes without its name: a
    dict is the record branch of its fields (`same` False; before a map, unless it is empty: a writer's
    map whose keys are exactly a record's fields would be taken for that record), an enum symbol the
    first enum holding it, a fixed the first fixed of its size.
    A folded union ([int, long], [float, double]) is its value as it was read, whichever branch (Spark's
    deserializer sets the number itself: no timestamp conversion); a union of null and one type is
    that type's value."""
    rest = _non_null(branches)
    convs = [avro_converter(b, named, tagged, same) for b in rest]
    targets = [_named(b, named) for b in rest]
    kinds = [_kind(t) for t in targets]
    if len(rest) == 2 and set(kinds) in ({"int", "long"}, {"float", "double"}):
        take = untag if tagged else identity
        return lambda x: None if x is None else take(x)
    by_name: dict[str, int] = {}
    by_type: dict[type, int] = {}
    by_kind: dict[str, int] = {}
    for i, target in enumerate(targets):
        if isinstance(target, dict) and isinstance(target.get("name"), str):
            by_name.setdefault(target["name"], i)
        by_kind.setdefault(kinds[i], i)
        if not (tagged and kinds[i] in TAGGED):
            for python_type in _PYTHON_TYPES.get(kinds[i], ()):
                by_type.setdefault(python_type, i)

    has_map = "map" in kinds

    def unnamed(x: Any) -> int | None:
        """The branch of a value that came without its name (a writer's plain record or enum)."""
        if type(x) is dict and (x or not has_map):  # (an empty dict beside a map: the map's)
            keys = set(x)
            for i, t in enumerate(targets):
                if kinds[i] in ("record", "error") and {f["name"] for f in t["fields"]} == keys:
                    return i
        if type(x) is str:
            for i, t in enumerate(targets):
                if kinds[i] == "enum" and x in t.get("symbols", ()):
                    return i
        if type(x) in (bytes, decimal.Decimal):
            for i, t in enumerate(targets):
                if kinds[i] == "fixed" and (type(x) is not bytes or len(x) == t.get("size")):
                    return i
        return None

    def branch(x: Any) -> tuple[int, Any]:
        """Which non-null branch a value took, and the value its branch's converter takes."""
        if type(x) is tuple and len(x) == 2 and x[0] in by_name:
            return by_name[x[0]], x[1]
        if tagged:
            kind = tag_kind(x)
            if kind is not None and kind in by_kind:
                return by_kind[kind], x
        # (a dict: a map's, or a record's from an older writer without a union there)
        i = unnamed(x) if type(x) is dict and not same else by_type.get(type(x))
        if i is None:
            i = by_type.get(type(x)) if type(x) is dict and not same else unnamed(x)
        if i is not None:
            return i, x
        raise AvroDatumError(f"a union value of Python type {type(x).__name__} matches no branch")

    if len(rest) == 1:
        convert = convs[0]

        def one(x: Any) -> Any:
            if x is None:
                return None
            if type(x) is tuple and len(x) == 2 and x[0] in by_name:
                x = x[1]
            return convert(x)

        return one

    names = [f"member{i}" for i in range(len(rest))]

    def members(x: Any) -> Any:
        if x is None:
            return None
        i, v = branch(x)
        return {names[i]: convs[i](v)}

    return members


# The Python types fastavro reads an unnamed Avro type as (named types in a union come as tuples).
_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "boolean": (bool,), "int": (int,), "long": (int,), "float": (float,), "double": (float,), "string": (str,),
    "bytes": (bytes, decimal.Decimal), "array": (list,), "map": (dict,),
}
