"""Typed Avro columns built by the compiled decoder (kfs/_native/csrc/registry/avro_arrow.c) equal the
columns the Records gave before it (FramedRows._record_columns: the JSON-shaped path for a batch it
takes, else the per-row path: fastavro, the converter, pa.array) and the per-row path's own, value for
value and error for error:

- on the registry fixtures (tests/fixtures/schema-registry: nested records, unions, a map, a decimal,
  a fixed, a timestamp; tests/fixtures/schema-evolution: older versions resolved), by `columns` and by
  `array_columns` (Arrow arrays, as kfs.spark.source hands them);
- over random schemas, random datums and byte mutations of them (the JSON renderer's generators,
  tests/test_registry_avro_native.py, with Spark's logical types and folded unions added), with null,
  unframed, header-framed and older-version rows among them;
- a datum the per-row path reads in its own way is declined to it (a map key given twice, a decimal
  wider than its precision).
"""

from __future__ import annotations

import decimal
import io
import json
import math
import os
import random
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from fastavro import parse_schema, schemaless_writer
from hypothesis import HealthCheck, event, given, reject, settings
from hypothesis import strategies as st

pytest.importorskip("pyspark")
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StringType, StructType

sys.path.insert(0, str(Path(__file__).parent))
from test_registry_avro_native import Schemas, Values, mutate

from kfs._native.registry import avro_arrow_decode
from kfs.registry import load_registry
from kfs.registry.decode import Registry
from kfs.registry.state import RegistryState
from kfs.spark.pruning import project_array
from kfs.spark.typed import ArrayRow, FramedRows, PartPlan, _column, decoded_fields, plan_from_field
from kfs.storage import LogDirs

pytestmark = pytest.mark.skipif(avro_arrow_decode is None, reason="the compiled extension is not built")

FIXTURES = Path(__file__).parent / "fixtures"
LOGDIRS = [str(FIXTURES / "schema-registry" / "logdir"), str(FIXTURES / "schema-evolution" / "logdir")]


def plain(value: Any) -> Any:
    """A to_pylist value comparable with ==: NaN as a marker (NaN != NaN)."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def numbers(t: pa.DataType) -> pa.DataType:
    """`t` with timestamps and dates as their integers (as_py refuses those past datetime's years), every
    field nullable (the JSON-shaped path leaves nulls under a null struct where pa.array does not)."""
    if pa.types.is_timestamp(t):
        return pa.int64()
    if pa.types.is_date32(t):
        return pa.int32()
    if pa.types.is_struct(t):
        return pa.struct([pa.field(t.field(i).name, numbers(t.field(i).type)) for i in range(t.num_fields)])
    if pa.types.is_list(t):
        return pa.list_(numbers(t.value_type))
    if pa.types.is_map(t):
        return pa.map_(t.key_type, numbers(t.item_type))
    return t


def assert_same(got: list[pa.Array], want: list[pa.Array]) -> None:
    for g, w in zip(got, want, strict=True):
        g.validate(full=True)
        assert g.type == w.type
        if not g.equals(w):  # (NaN is not equal to itself, nor null children of null structs: as plain values)
            assert plain(g.cast(numbers(g.type)).to_pylist()) == plain(w.cast(numbers(w.type)).to_pylist())


def reference(rows: FramedRows, records: list[Any], types: list[pa.DataType]) -> list[pa.Array]:
    """The four columns as `columns` gave them before the compiled decoder: the JSON-shaped path for a
    batch it takes, else every record by PartDecoder.decode."""
    return rows._record_columns(records, types)


def typed_rows(registry: Registry, topic: str) -> tuple[FramedRows, list[pa.DataType]]:
    fields = decoded_fields(registry, [topic])
    schema = to_arrow_schema(StructType(fields), timezone="UTC")
    types = [schema.field("key_decoded").type, schema.field("value_decoded").type]
    return FramedRows(registry, [plan_from_field(f) for f in fields[:2]], topic), types


def arrays(records: list[Any]) -> tuple[pa.Array, pa.Array, pa.ListArray]:
    """keys, values and headers as kfs.spark.source hands them to array_columns."""
    header = pa.struct([("key", pa.string()), ("value", pa.binary())])
    return (pa.array([r.key for r in records], pa.binary()), pa.array([r.value for r in records], pa.binary()),
            pa.array([[{"key": k, "value": v} for k, v in r.headers] for r in records], pa.list_(header)))


def fixture_partitions() -> list[tuple[str, str]]:
    return [(logdir, name) for logdir in LOGDIRS for name in sorted(os.listdir(logdir))
            if "-" in name and not name.startswith("_") and "checkpoint" not in name]


@pytest.mark.parametrize(("logdir", "partition"), fixture_partitions())
def test_fixture_columns_equal_the_per_row_path(logdir: str, partition: str) -> None:
    registry = load_registry([logdir])
    assert registry is not None
    rows, types = typed_rows(registry, partition.rsplit("-", 1)[0])
    records = [r for rs in LogDirs([logdir]).partition(partition).record_lists() for r in rs]
    want = reference(rows, records, types)
    assert_same(rows.columns(records, types), want)
    assert_same(rows.array_columns(*arrays(records), types), want)
    # (and from a slice: an array whose offset is not 0)
    padded = [ArrayRow(None, b"\0\0\0\0\1junk", [])] * 3 + records
    keys, values, headers = arrays(padded)
    assert_same(rows.array_columns(keys[3:], values[3:], headers[3:], types), want)


@pytest.mark.parametrize(("logdir", "partition"), fixture_partitions())
def test_fixture_json_text_columns_equal_the_per_row_path(logdir: str, partition: str) -> None:
    """A read of several topics: the decoded JSON text, rendered into the string column in one call."""
    registry = load_registry([logdir])
    assert registry is not None
    rows, types = json_rows(registry, partition.rsplit("-", 1)[0])
    records = [r for rs in LogDirs([logdir]).partition(partition).record_lists() for r in rs]
    want = reference(rows, records, types)
    assert_same(rows.columns(records, types), want)
    assert_same(rows.array_columns(*arrays(records), types), want)


def json_rows(registry: Registry, topic: str) -> tuple[FramedRows, list[pa.DataType]]:
    return FramedRows(registry, [PartPlan("key"), PartPlan("value")], topic), [pa.string(), pa.string()]


def test_the_fixtures_typed_values_are_decoded_in_c() -> None:
    """The orders topic (a decimal, a map, unions, a fixed, a timestamp) and the evolution fixture's
    records of every version (ids 1 and 2 resolved to the latest, 3: a field dropped, fields added with
    defaults, int -> long, float -> double, an enum symbol the reader lacks) are the compiled decoder's,
    but for the two the per-row path fails (the symbol the reader lacks, a datum cut short)."""
    for logdir, partition, ids, decoded in [(LOGDIRS[0], "orders-0", [None], [0, 0, 0]),
                                            (LOGDIRS[1], "readings-0", [1, 2, 3], [0, 0, 1, 0, 0, 0, 0, 1])]:
        registry = load_registry([logdir])
        assert registry is not None
        rows, types = typed_rows(registry, partition.rsplit("-", 1)[0])
        decoder = rows.parts[1]
        records = [r for rs in LogDirs([logdir]).partition(partition).record_lists() for r in rs]
        values = pa.array([r.value for r in records], pa.binary())
        validity, offsets, data = values.buffers()
        status = [1] * len(values)
        for writer_id in ids:
            found = decoder.arrow_program(types[1], None, writer_id)
            assert found is not None and decoder.plan.schema_id is not None
            schema_id = writer_id or decoder.plan.schema_id
            got, _ = avro_arrow_decode(found[0], b"\0" + schema_id.to_bytes(4, "big"), len(values), validity, offsets,
                                       data, 0, None)
            status = [a & b for a, b in zip(status, got, strict=True)]
        assert status == decoded
        errors = rows.array_columns(*arrays(records), types)[3].to_pylist()
        assert [e is not None for e in errors] == [s == 1 for s in decoded]


# ---- random schemas and datums ----------------------------------------------------------------------

class SparkSchemas(Schemas):
    """The JSON renderer's random schemas, with the logical types and unions Spark maps its own way."""

    def schema(self, depth: int, in_union: bool = False) -> Any:
        rnd = self.rnd
        if rnd.random() < 0.15:
            return rnd.choice([
                {"type": "bytes", "logicalType": "decimal", "precision": rnd.choice([1, 4, 9, 18, 38]),
                 "scale": rnd.choice([0, 1, 2])},
                {"type": "fixed", "name": self.name()[0], "size": 8, "logicalType": "decimal", "precision": 12,
                 "scale": 3},
                {"type": "long", "logicalType": rnd.choice(["timestamp-micros", "local-timestamp-millis",
                                                            "local-timestamp-micros"])},
                {"type": "int", "logicalType": "time-millis"},
                {"type": "string", "logicalType": "uuid"},
                *([] if in_union else [["null", "int", "long"], ["float", "double"], ["long", "int", "null"],
                                       ["null", "double", "float"]]),
            ])
        return super().schema(depth, in_union)


class SparkValues(Values):
    def value(self, schema: Any, depth: int) -> Any:
        if isinstance(schema, list):  # (each branch named, for fastavro's writer: a long of [int, long] as a long)
            options = [b for b in schema if b != "null"] if depth < 6 else []
            if "null" in schema and (not options or self.rnd.random() < 0.3):
                return None
            branch = self.rnd.choice(options or schema)
            value = self.value(branch, depth + 1)
            target = self.named.get(branch, branch) if isinstance(branch, str) else branch
            if isinstance(target, dict) and "name" in target:
                return (target["name"], value)
            kind = target if isinstance(target, str) else target.get("type")
            return (kind, value) if isinstance(kind, str) and kind != "null" else value
        target = self.named.get(schema, schema) if isinstance(schema, str) else schema
        if isinstance(target, dict) and target.get("logicalType") == "decimal":
            digits = self.rnd.randint(0, target["precision"])
            unscaled = self.rnd.choice([0, 1, -1, self.rnd.randint(-(10 ** digits) + 1, 10 ** digits - 1)])
            return decimal.Decimal(unscaled).scaleb(-target.get("scale", 0))
        if isinstance(target, dict) and target.get("logicalType") == "uuid":
            return "12345678-1234-5678-1234-567812345678"
        return super().value(schema, depth)


def _state(schemas: list[tuple[int, Any]]) -> RegistryState:
    """A registry whose subject `t-value` has `schemas` as versions 1, 2, ... ((id, schema): the last is
    the reader)."""
    state = RegistryState()
    for version, (schema_id, schema) in enumerate(schemas, start=1):
        key = {"keytype": "SCHEMA", "subject": "t-value", "version": version, "magic": 1}
        value = {"subject": "t-value", "version": version, "id": schema_id, "schema": json.dumps(schema)}
        state.apply(json.dumps(key).encode(), json.dumps(value).encode())
    return state


def _write(parsed: Any, value: Any) -> bytes | None:
    out = io.BytesIO()
    try:
        schemaless_writer(out, parsed, value)
    except Exception:
        return None  # (a value fastavro's writer takes for another branch)
    return out.getvalue()


@settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.randoms(use_true_random=False))
def test_compiled_columns_equal_the_per_row_path(rnd: random.Random) -> None:
    reader = SparkSchemas(rnd).schema(0)
    older = {"type": "record", "name": "Old", "fields": [{"name": "x", "type": "long"}]}
    try:
        named: dict[str, Any] = {}
        parsed = parse_schema(json.loads(json.dumps(reader)), named_schemas=named)
    except Exception:
        reject()
    registry = Registry(_state([(3, older), (7, reader)]))
    fields = decoded_fields(registry, ["t"])
    if isinstance(fields[1].dataType, StringType):
        reject()  # (a schema Spark does not type: recursive, null: JSON text, not this path's)
    rows, types = typed_rows(registry, "t")
    records: list[ArrayRow] = []
    values = SparkValues(rnd, named)
    datums: list[bytes] = []
    for _ in range(6):
        datum = _write(parsed, values.value(parsed, 0))
        if datum is None:
            continue
        datums.append(datum)
        framed = b"\0\0\0\0\7" + datum
        records.append(ArrayRow(None, framed, []))
        records += [ArrayRow(None, b"\0\0\0\0\7" + mutate(rnd, datum), []) for _ in range(3)]
        records.append(ArrayRow(None, framed, [("x", b"1")]))  # (headers: the per-row path's)
    old = _write(parse_schema(older), {"x": rnd.randint(-5, 5)})
    records += [ArrayRow(None, None, []), ArrayRow(None, b"not framed", []),
                ArrayRow(None, b"\0\0\0\0\3" + (old or b""), []), ArrayRow(None, b"\0\0\0\0\7", [])]
    rnd.shuffle(records)
    text_rows, text_types = json_rows(registry, "t")  # (the same values as JSON text: a read of several topics)
    assert_same(text_rows.array_columns(*arrays(records), text_types), reference(text_rows, records, text_types))
    want = reference(rows, records, types)  # (a millisecond timestamp past 2^63 µs: a null and its error)
    assert_same(rows.columns(records, types), want)
    assert_same(rows.array_columns(*arrays(records), types), want)
    found = rows.parts[1].arrow_program(types[1])
    if found is None:  # (a union the per-row path tells the branches of by Python type: see _python_type)
        return
    parts = [_column(d, records, t) for d, t in zip(rows.parts, types, strict=True)]  # every record per row
    assert_same(rows.array_columns(*arrays(records), types), [parts[0][0], parts[1][0], parts[0][1], parts[1][1]])
    written = [r.value for r in records if r.value is not None and r.value[:5] == b"\0\0\0\0\7" and not r.headers
               and _column(rows.parts[1], [r], types[1])[1][0].as_py() is None]
    data = pa.array(written, pa.binary())
    validity, offsets, body = data.buffers()
    status, _ = avro_arrow_decode(found[0], b"\0\0\0\0\7", len(data), validity, offsets, body or b"", 0, None)
    unmutated = {b"\0\0\0\0\7" + d for d in datums}
    # (a datum fastavro wrote, which the per-row path reads, is the compiled decoder's)
    assert [s for d, s in zip(written, status, strict=True) if d in unmutated] == [0] * len(
        [d for d in written if d in unmutated]), reader


def random_record(rnd: random.Random, most: int) -> dict[str, Any]:
    """A record `Top` of 1 to `most` fields of random schemas (SparkSchemas)."""
    schemas = SparkSchemas(rnd)
    return {"type": "record", "name": "Top",
            "fields": [{"name": f"f{i}", "type": schemas.schema(1)} for i in range(rnd.randint(1, most))]}


def parsed_or_reject(schema: Any) -> tuple[Any, dict[str, Any]]:
    """`schema` parsed by fastavro, and its named types; a schema fastavro refuses is no example."""
    named: dict[str, Any] = {}
    try:
        return parse_schema(json.loads(json.dumps(schema)), named_schemas=named), named
    except Exception:
        reject()


def pruned(rnd: random.Random, t: pa.DataType, top: bool = False) -> pa.DataType:
    """A type Spark could prune `t` to: some of a struct's fields, in order, each pruned too (`top`: at
    least one field left out where there are two)."""
    if pa.types.is_struct(t):
        most = t.num_fields - 1 if top and t.num_fields > 1 else t.num_fields
        keep = sorted(rnd.sample(range(t.num_fields), rnd.randint(1, most))) if t.num_fields else []
        return pa.struct([pa.field(t.field(i).name, pruned(rnd, t.field(i).type), t.field(i).nullable)
                          for i in keep])
    if pa.types.is_map(t):
        return pa.map_(t.key_field, pa.field(t.item_field.name, pruned(rnd, t.item_type), t.item_field.nullable))
    if pa.types.is_list(t):
        return pa.list_(pa.field(t.value_field.name, pruned(rnd, t.value_type), t.value_field.nullable))
    return t


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.randoms(use_true_random=False))
def test_pruned_columns_equal_the_whole_columns_cut_down(rnd: random.Random) -> None:
    """A query that reads some fields of the typed struct (Spark's pruned schema): the compiled decoder
    reads the others past, and the column and its errors equal the whole column's, cut down to those
    fields (kfs.spark.pruning.project_array), row for row: a datum that fails in a field not read is
    declined and fails as it did."""
    reader = random_record(rnd, 5)
    parsed, named = parsed_or_reject(reader)
    registry = Registry(_state([(7, reader)]))
    fields = decoded_fields(registry, ["t"])
    if isinstance(fields[1].dataType, StringType):
        reject()
    whole_rows, types = typed_rows(registry, "t")
    shown = pruned(rnd, types[1], top=True)
    rows = FramedRows(registry, [plan_from_field(f) for f in fields[:2]], "t", whole={"value": types[1]})
    records: list[ArrayRow] = []
    values = SparkValues(rnd, named)
    for _ in range(6):
        datum = _write(parsed, values.value(parsed, 0))
        if datum is None:
            continue
        records.append(ArrayRow(None, b"\0\0\0\0\7" + datum, []))
        records += [ArrayRow(None, b"\0\0\0\0\7" + mutate(rnd, datum), []) for _ in range(3)]
    records += [ArrayRow(None, None, []), ArrayRow(None, b"\0\0\0\0\7", [])]
    try:
        want = whole_rows.array_columns(*arrays(records), types)
    except (OverflowError, pa.ArrowInvalid):
        reject()  # (a value Arrow's type cannot hold: the whole batch fails, test_compiled_columns_... above)
    got = rows.array_columns(*arrays(records), [types[0], shown])
    assert got[1].type == shown
    assert_same(got, [want[0], project_array(want[1], shown), want[2], want[3]])
    assert_same(rows.columns(records, [types[0], shown]), [want[0], project_array(want[1], shown), want[2], want[3]])
    event("pruned" if shown != types[1] else "whole")
    if whole_rows.parts[1].arrow_program(types[1]) is not None:
        assert rows.parts[1].arrow_program(types[1], shown) is not None, (reader, shown)  # (pruned: still compiled)
        event("compiled")


def test_a_field_not_read_still_declines_as_it_would_be_decoded() -> None:
    """Reading `n` only: a string of bad UTF-8 or a decimal wider than its precision in the fields read
    past makes the row the per-row path's (its error kept), as the whole decode would; a good row is
    decoded in C."""
    reader = {"type": "record", "name": "R", "fields": [
        {"name": "s", "type": "string"},
        {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 2, "scale": 0}},
        {"name": "m", "type": {"type": "map", "values": ["null", "string", "long"]}},
        {"name": "n", "type": "long"}]}
    registry = Registry(_state([(7, reader)]))
    fields = decoded_fields(registry, ["t"])
    whole_rows, types = typed_rows(registry, "t")
    shown = pa.struct([pa.field("n", pa.int64(), False)])
    rows = FramedRows(registry, [plan_from_field(f) for f in fields[:2]], "t", whole={"value": types[1]})
    good = b"\0\0\0\0\7" + b"\x02a" + b"\x02\x05" + b"\x02\x02k\x02\x02x\x00" + b"\x08"
    bad_text = b"\0\0\0\0\7" + b"\x02\xff" + b"\x02\x05" + b"\x00" + b"\x08"
    wide = b"\0\0\0\0\7" + b"\x02a" + b"\x04\x03\xe8" + b"\x00" + b"\x08"
    twice = b"\0\0\0\0\7" + b"\x02a" + b"\x02\x05" + b"\x04\x02k\x00\x02k\x00\x00" + b"\x08"
    records = [ArrayRow(None, d, []) for d in (good, bad_text, wide, twice)]
    found = rows.parts[1].arrow_program(types[1], shown)
    assert found is not None and found[1].types[0] == shown
    values = pa.array([r.value for r in records], pa.binary())
    validity, offsets, body = values.buffers()
    status, _ = avro_arrow_decode(found[0], b"\0\0\0\0\7", 4, validity, offsets, body, 0, None)
    assert list(status) == [0, 1, 1, 1]
    want = whole_rows.array_columns(*arrays(records), types)
    got = rows.array_columns(*arrays(records), [types[0], shown])
    assert got[1].to_pylist() == project_array(want[1], shown).to_pylist() == [{"n": 4}, None, None, {"n": 4}]
    assert got[3].to_pylist() == want[3].to_pylist()
    assert got[3].to_pylist()[2] == "schema id 7: a decimal of more than the 2 digits of its precision"


_DEFAULTS: dict[str, Any] = {"boolean": True, "int": -3, "long": 1 << 40, "float": 0.1, "double": -2.5,
                             "string": "d\u00e9f"}
_PROMOTIONS = {"long": ["int"], "double": ["int", "long", "float"]}


def evolve(rnd: random.Random, reader: dict[str, Any], schemas: SparkSchemas) -> dict[str, Any]:
    """An older writer version of the record `reader` (changed in place: defaults given to the fields
    the writer lacks): fields dropped, added and reordered, ints promoted, nested records likewise."""
    writer_fields = []
    for field in reader["fields"]:
        kind = field["type"] if isinstance(field["type"], str) else None
        roll = rnd.random()
        if roll < 0.25 and (kind in _DEFAULTS or (isinstance(field["type"], list) and field["type"][0] == "null")):
            field["default"] = _DEFAULTS.get(kind)
            continue  # (the reader's alone: its default)
        wtype = field["type"]
        if kind in _PROMOTIONS and roll < 0.6:
            wtype = rnd.choice(_PROMOTIONS[kind])
        elif isinstance(field["type"], dict) and field["type"].get("type") == "record" and roll < 0.7:
            wtype = evolve(rnd, field["type"], schemas)
        writer_fields.append({"name": field["name"], "type": wtype})
    for i in range(rnd.randint(0, 2)):
        writer_fields.insert(rnd.randint(0, len(writer_fields)), {"name": f"old{i}", "type": schemas.schema(2)})
    if rnd.random() < 0.5:
        rnd.shuffle(writer_fields)
    return {"type": "record", "name": reader["name"], "fields": writer_fields}


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.randoms(use_true_random=False))
def test_older_versions_resolved_in_c_equal_the_per_row_path(rnd: random.Random) -> None:
    """Values written with an older version (fields dropped, added, reordered, ints promoted) resolved
    to the reader schema by the compiled decoder equal the per-row path's (fastavro's resolution), row
    for row and error for error, whole and pruned; the writer's own datums are the compiled decoder's
    when its program compiles."""
    reader = random_record(rnd, 5)
    writer = evolve(rnd, reader, SparkSchemas(random.Random(rnd.random())))
    parsed_or_reject(reader)
    wparsed, wnamed = parsed_or_reject(writer)
    registry = Registry(_state([(3, writer), (7, reader)]))
    fields = decoded_fields(registry, ["t"])
    if isinstance(fields[1].dataType, StringType):
        reject()
    whole_rows, types = typed_rows(registry, "t")
    values = SparkValues(rnd, wnamed)
    records: list[ArrayRow] = []
    datums = []
    for _ in range(6):
        datum = _write(wparsed, values.value(wparsed, 0))
        if datum is None:
            continue
        datums.append(b"\0\0\0\0\3" + datum)
        records.append(ArrayRow(None, datums[-1], []))
        records += [ArrayRow(None, b"\0\0\0\0\3" + mutate(rnd, datum), []) for _ in range(2)]
    records += [ArrayRow(None, None, []), ArrayRow(None, b"\0\0\0\0\3", [])]
    try:
        want = [_column(d, records, t) for d, t in zip(whole_rows.parts, types, strict=True)]
    except (OverflowError, pa.ArrowInvalid):
        reject()
    want_columns = [want[0][0], want[1][0], want[0][1], want[1][1]]
    assert_same(whole_rows.array_columns(*arrays(records), types), want_columns)
    shown = pruned(rnd, types[1], top=True)
    rows = FramedRows(registry, [plan_from_field(f) for f in fields[:2]], "t", whole={"value": types[1]})
    assert_same(rows.array_columns(*arrays(records), [types[0], shown]),
                [want[0][0], project_array(want[1][0], shown), want[0][1], want[1][1]])
    found = whole_rows.parts[1].arrow_program(types[1], None, 3)
    event("resolved in C" if found is not None else "per row")
    if found is None:
        return
    # A datum the compiled decoder takes read as its own writer schema, it takes resolved too (the
    # fields the reader lacks are read past, checked as decoding checks them: a declined one, such as
    # a millisecond timestamp whose microseconds overflow, goes the per-row path, which skips them)
    as_written, written_types = typed_rows(Registry(_state([(3, writer)])), "t")
    own = as_written.parts[1].arrow_program(written_types[1])
    data = pa.array(datums, pa.binary())
    validity, offsets, body = data.buffers()
    status, _ = avro_arrow_decode(found[0], b"\0\0\0\0\3", len(data), validity, offsets, body or b"", 0, None)
    if own is not None:
        own_status, _ = avro_arrow_decode(own[0], b"\0\0\0\0\3", len(data), validity, offsets, body or b"", 0,
                                          None)
        assert [s for s, o in zip(status, own_status, strict=True) if o == 0] == [0] * list(own_status).count(0)


def test_a_default_the_per_row_path_converts_keeps_that_writer_there_even_unread() -> None:
    """A reader field the writer lacks whose default the per-row path converts (bytes, from a JSON
    string) leaves that writer's values to it, read or not; one it keeps as it is (a long) does not."""
    writer = {"type": "record", "name": "R", "fields": [{"name": "n", "type": "int"}]}
    reader = {"type": "record", "name": "R", "fields": [
        {"name": "n", "type": "long"}, {"name": "b", "type": "bytes", "default": "\u00ff"}]}
    registry = Registry(_state([(3, writer), (7, reader)]))
    fields = decoded_fields(registry, ["t"])
    whole_rows, types = typed_rows(registry, "t")
    shown = pa.struct([pa.field("n", pa.int64(), False)])
    rows = FramedRows(registry, [plan_from_field(f) for f in fields[:2]], "t", whole={"value": types[1]})
    assert rows.parts[1].arrow_program(types[1], shown, 3) is None
    assert rows.parts[1].arrow_program(types[1], shown) is not None
    records = [ArrayRow(None, b"\0\0\0\0\3\x04", []), ArrayRow(None, b"\0\0\0\0\7\x06\x02\x01", [])]
    got = rows.array_columns(*arrays(records), [types[0], shown])
    assert got[1].to_pylist() == [{"n": 2}, {"n": 3}] and got[3].to_pylist() == [None, None]
    whole = whole_rows.array_columns(*arrays(records), types)
    assert project_array(whole[1], shown).to_pylist() == got[1].to_pylist() and whole[1][1].as_py()["b"] == b"\x01"
    kept = {**reader, "fields": [reader["fields"][0], {"name": "m", "type": "long", "default": 5}]}
    registry = Registry(_state([(3, writer), (7, kept)]))
    rows, types = typed_rows(registry, "t")
    assert rows.parts[1].arrow_program(types[1], None, 3) is not None
    assert rows.array_columns(*arrays(records[:1]), types)[1].to_pylist() == [{"n": 2, "m": 5}]


def test_declined_datums_keep_the_per_row_paths_values() -> None:
    """A map key given twice (a dict keeps the last value at the first place) and a decimal wider than
    its precision (fastavro rounds it) are declined, and the column still equals the per-row path's."""
    reader = {"type": "record", "name": "R", "fields": [
        {"name": "m", "type": {"type": "map", "values": "int"}},
        {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 2, "scale": 0}}]}
    registry = Registry(_state([(7, reader)]))
    rows, types = typed_rows(registry, "t")
    twice = b"\0\0\0\0\7" + b"\x04\x02k\x02\x02k\x04\x00" + b"\x02\x05"
    ok = b"\0\0\0\0\7" + b"\x02\x02k\x02\x00" + b"\x02\x05"
    wide = b"\0\0\0\0\7" + b"\x00" + b"\x04\x03\xe8"  # 1000: four digits in a precision of 2
    records = [ArrayRow(None, d, []) for d in (ok, twice, wide)]
    decoder = rows.parts[1]
    found = decoder.arrow_program(types[1])
    assert found is not None
    values = pa.array([r.value for r in records], pa.binary())
    validity, offsets, body = values.buffers()
    status, _ = avro_arrow_decode(found[0], b"\0\0\0\0\7", 3, validity, offsets, body, 0, None)
    assert list(status) == [0, 1, 1]
    columns = rows.columns(records, types)
    assert_same(columns, reference(rows, records, types))
    assert columns[1].to_pylist() == [{"m": [("k", 1)], "d": decimal.Decimal(5)},
                                      {"m": [("k", 2)], "d": decimal.Decimal(5)}, None]
    # (fastavro rounds 1000 to 1.0E+3 in a precision of 2, which pa.array refused for the whole batch)
    assert columns[3].to_pylist() == [None, None, "schema id 7: a decimal of more than the 2 digits of its precision"]


def test_bad_programs_and_buffers_are_refused() -> None:
    from kfs._native.registry import avro_arrow_program

    assert avro_arrow_program is not None
    for program in [b"", b"\0" * 16, b"\x04\0\0\0\x05\0\0\0\x01\0\0\0\x05\0\0\0" + b"\x01\0\0\0" * 4]:
        with pytest.raises(ValueError):
            avro_arrow_program(program)
    registry = Registry(_state([(7, {"type": "record", "name": "R", "fields": [{"name": "s", "type": "string"}]})]))
    rows, types = typed_rows(registry, "t")
    found = rows.parts[1].arrow_program(types[1])
    assert found is not None
    with pytest.raises(ValueError):  # offsets shorter than the count says
        avro_arrow_decode(found[0], b"\0\0\0\0\7", 5, None, b"\0" * 8, b"", 0, None)
    with pytest.raises(ValueError):  # an offset past the data
        avro_arrow_decode(found[0], b"\0\0\0\0\7", 1, None, b"\0\0\0\0\x40\0\0\0", b"\0" * 8, 0, None)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.randoms(use_true_random=False))
def test_mutated_programs_are_refused_or_stay_in_bounds(rnd: random.Random) -> None:
    """A program (whole or pruned) with words changed at random is refused by the checker or decodes
    within its columns: no crash (run under ASan + UBSan too: docs/robustness.md), and every column the
    decoder returns is as long as its buffers say."""
    from kfs._native.registry import avro_arrow_program

    reader = random_record(rnd, 4)
    parsed, named = parsed_or_reject(reader)
    writer = evolve(rnd, reader, SparkSchemas(random.Random(rnd.random()))) if rnd.random() < 0.5 else None
    wparsed, wnamed = parsed_or_reject(writer) if writer else (parsed, named)
    registry = Registry(_state([(3, writer or reader), (7, reader)]))
    if isinstance(decoded_fields(registry, ["t"])[1].dataType, StringType):
        reject()
    rows, types = typed_rows(registry, "t")
    writer_id = 3 if writer else 7  # (a program resolving an older version, or the reader's own)
    found = rows.parts[1].arrow_program(types[1], pruned(rnd, types[1], top=rnd.random() < 0.7), writer_id)
    if found is None:
        reject()
    event("resolving" if writer else "the reader's")
    values = SparkValues(rnd, wnamed if writer else named)
    datums = [d for d in (_write(wparsed, values.value(wparsed, 0)) for _ in range(4)) if d is not None]
    prefix = bytes([0, 0, 0, 0, writer_id])
    data = pa.array([prefix + d for d in datums] + [prefix + mutate(rnd, d) for d in datums], pa.binary())
    validity, offsets, body = data.buffers()
    assert avro_arrow_program is not None
    words = bytearray(found[1].program)
    for _ in range(rnd.choice([1, 1, 1, 2, 4])):  # (a word or two off by one, or -1 / -2: most often accepted)
        at = rnd.randrange(4, len(words) // 4) * 4
        old = int.from_bytes(words[at:at + 4], "little", signed=True)
        new = rnd.choice([old - 1, old + 1, -1, -2, 0, rnd.randint(-(1 << 31), (1 << 31) - 1)])
        words[at:at + 4] = max(-(1 << 31), min(new, (1 << 31) - 1)).to_bytes(4, "little", signed=True)
    try:
        program = avro_arrow_program(bytes(words))
    except ValueError:
        event("refused")
        return
    event("accepted")
    status, columns = avro_arrow_decode(program, prefix, len(data), validity, offsets, body or b"", 0, None)
    assert len(status) == len(data) and columns[0][0] == len(data)
    for length, valid, _values, _data in columns:
        assert length >= 0 and len(valid) == (length + 7) // 8


def test_a_record_of_no_fields_keeps_its_rows() -> None:
    """The JSON-shaped path made a record of no fields an empty array (StructArray.from_arrays of no
    children), and the batch's take failed; such a record now takes the other paths, every row there."""
    registry = Registry(_state([(7, {"type": "record", "name": "E", "fields": []})]))
    rows, types = typed_rows(registry, "t")
    records = [ArrayRow(None, b"\0\0\0\0\7", []), ArrayRow(None, None, []), ArrayRow(None, b"\0\0\0\0\7x", [])]
    per_row = [_column(d, records, t) for d, t in zip(rows.parts, types, strict=True)]
    for columns in (rows._record_columns(records, types), rows.array_columns(*arrays(records), types)):
        assert columns[1].to_pylist() == [{}, None, None] == per_row[1][0].to_pylist()
        assert columns[3].to_pylist() == [None, None, "schema id 7: 1 bytes are left after the datum"]


def test_a_millisecond_timestamp_past_spark_s_microseconds_is_a_null_with_its_error() -> None:
    """A timestamp-millis whose microseconds pass 64 bits (Spark's AvroDeserializer fails on it, and
    pa.array failed the whole batch) is that row's null and error; the rows around it keep their values,
    by the per-row path, the compiled decoder and the JSON-shaped path alike."""
    reader = {"type": "record", "name": "R", "fields": [
        {"name": "n", "type": "long"}, {"name": "t", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}
    registry = Registry(_state([(7, reader)]))
    rows, types = typed_rows(registry, "t")
    parsed = parse_schema(reader)
    far = 2**62  # ms: 4.6e21 µs, past int64
    records = [ArrayRow(None, b"\0\0\0\0\7" + (_write(parsed, {"n": n, "t": t}) or b""), [])
               for n, t in ((1, 1_700_000_000_000), (2, far), (3, -far), (4, 0))]
    error = f"schema id 7: a timestamp-millis of {far} ms is past the 64-bit microseconds of Spark's timestamp"
    for columns in (rows.columns(records, types), rows.array_columns(*arrays(records), types),
                    reference(rows, records, types)):
        values = columns[1].to_pylist()
        assert [v and v["n"] for v in values] == [1, None, None, 4]
        assert values[0]["t"].timestamp() == 1_700_000_000 and values[3]["t"].timestamp() == 0
        assert columns[3].to_pylist() == [None, error, error.replace(str(far), str(-far)), None]
