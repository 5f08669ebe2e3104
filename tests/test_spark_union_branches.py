"""A union's value lands in the member of the branch Apache Avro's Java reader gives it, as Spark's
`from_avro` shows it (AvroDeserializer: `resolveUnion` by the class Java read), on every path a typed
column is made by: the compiled decoder (`array_columns`), the batch's Records (`columns`: the
JSON-shaped path when it takes the batch) and each record alone (the per-row path: fastavro).

The oracle is Avro's Java library itself (the jar Spark ships), through the test session's JVM: it
writes each datum from Avro's JSON encoding (the branch named), reads it with the writer and reader
schemas (Java's resolution: the writer's own type first, then the first promotion), and writes what it
read as JSON again, which names the branch it took; kfs's column must hold that value in that member.

The cases are those fastavro's values alone got wrong: a `long` of `[string, int, long]` in the `int`
member (and one past 32 bits failing its whole batch), `float`/`double` likewise, a folded union's
millisecond timestamp multiplied, a writer's `int` resolved to a reader's `long` before its `int`, a
writer's plain record read into a union (`In` -> `[null, In]`, the usual evolution) failing every row,
an enum read as the union's string, a string read as bytes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
sys.path.insert(0, str(Path(__file__).parent))
from spark_session import local_spark
from test_spark_typed import from_avro_json
from test_spark_typed_arrow import _state, arrays, plain, reference, typed_rows

from kfs.registry.decode import Registry
from kfs.registry.resolution import parse_avro
from kfs.spark.typed import ArrayRow, _column


@pytest.fixture(scope="session")
def jvm():
    # (the test modules' one session: stopped at the end of the test session, as local_spark's callers do)
    for session in local_spark("kfs-union-branch-tests"):
        yield session.sparkContext._jvm


def java_datum(jvm: Any, schema: Any, value_json: Any) -> bytes:
    """The binary datum Java's GenericDatumWriter writes for `value_json` (Avro's JSON encoding)."""
    avro = jvm.org.apache.avro
    parsed = avro.Schema.Parser().parse(json.dumps(schema))
    decoder = avro.io.DecoderFactory.get().jsonDecoder(parsed, json.dumps(value_json))
    value = avro.generic.GenericDatumReader(parsed).read(None, decoder)
    out = jvm.java.io.ByteArrayOutputStream()
    encoder = avro.io.EncoderFactory.get().binaryEncoder(out, None)
    avro.generic.GenericDatumWriter(parsed).write(value, encoder)
    encoder.flush()
    return bytes(out.toByteArray())


def java_read(jvm: Any, writer: Any, reader: Any, datum: bytes) -> Any:
    """What Java's GenericDatumReader(writer, reader) reads, in Avro's JSON encoding of the reader schema."""
    avro = jvm.org.apache.avro
    w = avro.Schema.Parser().parse(json.dumps(writer))
    r = avro.Schema.Parser().parse(json.dumps(reader))
    value = avro.generic.GenericDatumReader(w, r).read(None, avro.io.DecoderFactory.get().binaryDecoder(datum, None))
    out = jvm.java.io.ByteArrayOutputStream()
    encoder = avro.io.EncoderFactory.get().jsonEncoder(r, out)
    avro.generic.GenericDatumWriter(r).write(value, encoder)
    encoder.flush()
    return json.loads(out.toString("UTF-8"))


IN = {"type": "record", "name": "In", "fields": [{"name": "a", "type": "int"}]}
E = {"type": "enum", "name": "E", "symbols": ["A", "B"]}
F = {"type": "fixed", "name": "F", "size": 4}
MILLIS = {"type": "long", "logicalType": "timestamp-millis"}
ORDER_OF_BRANCHES = ["string", "int", "long"]


def record(field: Any, extra: list[dict] | None = None, with_map: bool = False) -> dict:
    """A record of field `f` (with a map field after it: the JSON-shaped path does not take a map, so
    the per-row path decodes the batch)."""
    fields = [{"name": "f", "type": field}, *(extra or [])]
    if with_map:
        fields.append({"name": "m", "type": {"type": "map", "values": "long"}})
    return {"type": "record", "name": "R", "fields": fields}


# (writer's field, reader's field, the writer's values of `f` in Avro's JSON encoding)
CASES: dict[str, tuple[Any, Any, list[Any]]] = {
    "int and long": (ORDER_OF_BRANCHES, ORDER_OF_BRANCHES,
                     [{"int": 5}, {"long": 5}, {"long": 1 << 40}, {"string": "x"}]),
    "float and double": (["null", "string", "float", "double"], ["null", "string", "float", "double"],
                         [{"float": 0.5}, {"double": 0.1}, {"float": 0.1}, None]),
    "folded, a millisecond timestamp": (["int", MILLIS], ["int", MILLIS], [{"int": 7}, {"long": 5}]),
    "folded the other way": ([MILLIS, "int"], [MILLIS, "int"], [{"long": 5}, {"int": 7}]),
    "writer's int: the reader's int before its long": (["string", "int"], ["string", "long", "int"], [{"int": 5}]),
    "writer's int promoted": (["string", "int"], ["string", "long"], [{"int": 5}, {"string": "y"}]),
    "writer's plain long into a union": ("long", ["null", "string", "int", "long"], [5, 1 << 40]),
    "writer's plain int: the first promotion": ("int", ["null", "string", "float", "long"], [3]),
    "writer's plain record made optional": (IN, ["null", IN], [{"a": 5}]),
    "writer's plain record into a union": (IN, ["null", IN, "string"], [{"a": 6}]),
    "writer's plain enum beside a string": (E, ["string", E], ["B"]),
    "writer's string beside bytes": (["null", "string"], ["null", "bytes", "string"], [{"string": "s"}, None]),
    "writer's plain string beside bytes": ("string", ["bytes", "string"], ["t"]),
    "writer's plain fixed beside bytes": (F, ["bytes", F], ["abcd"]),
    "items of an array": ({"type": "array", "items": ORDER_OF_BRANCHES},
                          {"type": "array", "items": ORDER_OF_BRANCHES}, [[{"long": 1}, {"int": 2}, {"string": "z"}]]),
    "values of a map": ({"type": "map", "values": ["null", "float", "double"]},
                        {"type": "map", "values": ["null", "float", "double"]}, [{"k": {"double": 2.5}, "j": None}]),
}


@pytest.mark.parametrize("with_map", [False, True], ids=["batch", "per row"])
@pytest.mark.parametrize("case", list(CASES))
def test_union_values_land_in_javas_branch(jvm: Any, case: str, with_map: bool) -> None:
    writer_field, reader_field, values = CASES[case]
    writer, reader = record(writer_field, with_map=with_map), record(reader_field, with_map=with_map)
    check(jvm, writer, reader, [{"f": v, **({"m": {"n": 1}} if with_map else {})} for v in values])


def test_a_default_lands_in_the_first_branch(jvm: Any) -> None:
    """A reader field the writer lacks takes its default, a union's for its first branch."""
    writer = record("int", with_map=True)
    reader = record("int", [{"name": "g", "type": ["int", "long", "string"], "default": 9},
                            {"name": "h", "type": ["null", "float", "double"], "default": None}], with_map=True)
    check(jvm, writer, reader, [{"f": 1, "m": {}}])


def check(jvm: Any, writer: dict, reader: dict, values: list[Any]) -> None:
    same = writer == reader
    schemas = [(7, reader)] if same else [(3, writer), (7, reader)]
    registry = Registry(_state(schemas))
    rows, types = typed_rows(registry, "t")
    framing = b"\0\0\0\0" + (b"\7" if same else b"\3")
    datums = [java_datum(jvm, writer, v) for v in values]
    records = [ArrayRow(None, framing + d, []) for d in datums]
    parsed = parse_avro(json.dumps(reader))
    want = [from_avro_json(parsed.schema, parsed.named, java_read(jvm, writer, reader, d)) for d in datums]
    paths = {
        "compiled": rows.array_columns(*arrays(records), types),
        "records": reference(rows, records, types),
        "per row": [_column(d, records, t) for d, t in zip(rows.parts, types, strict=True)][1],
    }
    for path, columns in paths.items():
        decoded, errors = (columns[1], columns[3]) if path != "per row" else columns
        assert errors.to_pylist() == [None] * len(values), (path, errors.to_pylist())
        assert plain(decoded.to_pylist(maps_as_pydicts="strict")) == plain(want), path
