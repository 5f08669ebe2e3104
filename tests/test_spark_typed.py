"""Typed `key_decoded` / `value_decoded` columns (kfs.spark.typed, issue 26 part 3) in a real local Spark
session, held to three independent answers:

- the Spark type of every Avro schema of the fixtures is what Spark's own
  `org.apache.spark.sql.avro.SchemaConverters.toSqlType` says (called through py4j in the same JVM);
- every typed value equals the decoded JSON line `kfs cat` prints for the record (docs/spec.md section
  9), mapped field by field to Spark's values by the schema (unions, bytes as code points, decimals,
  timestamps; Protobuf's JSON names and defaults);
- records written with older versions of a subject read as the latest (tests/fixtures/schema-evolution:
  a field added with a default, one removed, int -> long and float -> double, an enum symbol the
  reader lacks), written out by hand below.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import io
import json
import struct
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")
fastavro = pytest.importorskip("fastavro")

from conftest import LOGDIRS, run_kfs  # noqa: E402
from spark_session import local_spark  # noqa: E402

from kfs.registry import load_registry  # noqa: E402
from kfs.registry.resolution import parse_avro  # noqa: E402
from kfs.spark.typed import avro_type, protobuf_type  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures"
LOGDIR = str(FIXTURES / "schema-registry" / "logdir")
EVOLUTION = str(FIXTURES / "schema-evolution" / "logdir")
INTERNAL = str(FIXTURES / "internal-topics" / "logdirs" / "broker-a")
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


@pytest.fixture(scope="session")
def spark():
    yield from local_spark("kfs-typed-tests")


def read(spark, path: str = LOGDIR, **options: str):
    return spark.read.format("kfs").options(**options).load(path)


def cat_lines(logdir: str, partition: str) -> list[dict]:
    result = run_kfs("cat", logdir, partition)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def plain(value: Any) -> Any:
    """A collected value as plain Python: Rows as dicts, recursively."""
    if hasattr(value, "asDict"):
        return {k: plain(v) for k, v in value.asDict().items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, bytearray):
        return bytes(value)
    return value


def local_time(us: int) -> dt.datetime:
    """A Spark timestamp as PySpark collects it: naive, in the Python process's local time."""
    return (EPOCH + dt.timedelta(microseconds=us)).astimezone().replace(tzinfo=None)


# ---- the expected Spark value of a JSON line's value, by the schema ---------------------------------

def _named(schema: Any, named: dict) -> Any:
    return named[schema] if isinstance(schema, str) and schema in named else schema


def _kind(schema: Any) -> str:
    if isinstance(schema, list):
        return "union"
    if isinstance(schema, str):
        return schema
    kind = schema["type"]
    return kind if isinstance(kind, str) else "union"


def _label(schema: Any) -> str:
    """A union branch's label in Avro's JSON encoding: a primitive's or array/map's type, a named type's full name."""
    if isinstance(schema, dict) and "name" in schema:
        return schema["name"]
    return _kind(schema)


def from_avro_json(schema: Any, named: dict, value: Any) -> Any:
    """The Spark value of a value in the Avro specification's JSON encoding (what `kfs cat` prints)."""
    schema = _named(schema, named)
    if isinstance(schema, dict) and isinstance(schema["type"], (dict, list)):
        return from_avro_json(schema["type"], named, value)
    kind = _kind(schema)
    logical = schema.get("logicalType") if isinstance(schema, dict) else None
    if kind == "union":
        if value is None:
            return None
        rest = [b for b in schema if b != "null"]
        (label, inner), = value.items()
        i = [_label(_named(b, named)) for b in rest].index(label)
        kinds = {_kind(_named(b, named)) for b in rest}
        if len(rest) == 2 and kinds in ({"int", "long"}, {"float", "double"}):  # (folded: the number itself,
            # as Spark's deserializer sets it, a timestamp's milliseconds too)
            return struct.unpack("<f", struct.pack("<f", inner))[0] if _kind(rest[i]) == "float" else inner
        if len(rest) == 1:
            return from_avro_json(rest[i], named, inner)
        return {f"member{j}": from_avro_json(rest[i], named, inner) if j == i else None for j in range(len(rest))}
    if kind in ("record", "error"):
        return {f["name"]: from_avro_json(f["type"], named, value[f["name"]]) for f in schema["fields"]}
    if kind == "array":
        return [from_avro_json(schema["items"], named, v) for v in value]
    if kind == "map":
        return {k: from_avro_json(schema["values"], named, v) for k, v in value.items()}
    if kind in ("bytes", "fixed"):
        raw = value.encode("latin-1")
        if logical == "decimal":
            return decimal.Decimal(int.from_bytes(raw, "big", signed=True)).scaleb(-schema.get("scale", 0))
        return raw
    if kind == "float":
        return struct.unpack("<f", struct.pack("<f", value))[0]
    if kind == "long" and logical in ("timestamp-millis", "timestamp-micros"):
        return local_time(value * 1000 if logical == "timestamp-millis" else value)
    if kind == "int" and logical == "date":
        return dt.date(1970, 1, 1) + dt.timedelta(days=value)
    return value


def from_protobuf_json(descriptor: Any, value: dict) -> dict:
    """The Spark value of a message in protobuf's JSON mapping, as the protobuf connector shows it:
    proto field names; a field JSON leaves out (at its default) null, repeated and maps empty."""
    from google.protobuf.descriptor import FieldDescriptor as F

    out: dict[str, Any] = {}
    for fd in descriptor.fields:
        if fd.type == F.TYPE_MESSAGE and fd.message_type.GetOptions().map_entry:
            key_fd, value_fd = fd.message_type.fields_by_name["key"], fd.message_type.fields_by_name["value"]
            out[fd.name] = {_proto_scalar(key_fd, k): _proto_scalar(value_fd, v)
                            for k, v in value.get(fd.json_name, {}).items()}
        elif fd.is_repeated:
            out[fd.name] = [_proto_scalar(fd, v) for v in value.get(fd.json_name, [])]
        elif fd.json_name in value:
            out[fd.name] = _proto_scalar(fd, value[fd.json_name])
        else:
            out[fd.name] = None
    return out


def _proto_scalar(fd: Any, v: Any) -> Any:
    from google.protobuf.descriptor import FieldDescriptor as F

    if fd.type == F.TYPE_MESSAGE:
        if fd.message_type.full_name == "google.protobuf.Timestamp":
            at = dt.datetime.fromisoformat(v.replace("Z", "+00:00"))
            return at.astimezone().replace(tzinfo=None)
        return from_protobuf_json(fd.message_type, v)
    if fd.type == F.TYPE_BYTES:
        return base64.b64decode(v)
    if fd.cpp_type in (F.CPPTYPE_INT32, F.CPPTYPE_INT64, F.CPPTYPE_UINT32, F.CPPTYPE_UINT64):
        return int(v)
    if fd.cpp_type == F.CPPTYPE_FLOAT:
        return struct.unpack("<f", struct.pack("<f", v))[0]
    return v


# ---- types: Spark's own SchemaConverters as the oracle ----------------------------------------------

# Schemas beyond the fixtures', for the mappings they do not use.
EXTRA_AVRO = [
    '{"type": "record", "name": "U", "fields": ['
    '{"name": "il", "type": ["int", "long"]}, {"name": "fd", "type": ["null", "float", "double"]},'
    '{"name": "one", "type": ["string"]}, {"name": "three", "type": ["null", "int", "string", "boolean"]},'
    '{"name": "arr", "type": {"type": "array", "items": ["null", "long"]}},'
    '{"name": "d", "type": {"type": "int", "logicalType": "date"}},'
    '{"name": "tmicros", "type": {"type": "long", "logicalType": "timestamp-micros"}},'
    '{"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},'
    '{"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},'
    '{"name": "id", "type": {"type": "string", "logicalType": "uuid"}},'
    '{"name": "fixdec", "type": {"type": "fixed", "name": "F8", "size": 8, "logicalType": "decimal",'
    ' "precision": 18, "scale": 4}},'
    '{"name": "toowide", "type": {"type": "fixed", "name": "F2", "size": 2, "logicalType": "decimal",'
    ' "precision": 9}},'
    '{"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},'
    '{"name": "m", "type": {"type": "map", "values": {"type": "array", "items": "bytes"}}}]}',
    '"string"',
    '["null", "long"]',
]


def avro_schemas() -> list[tuple[str, list[str]]]:
    """(schema text, texts it references) of every Avro schema in the registry fixtures, and EXTRA_AVRO."""
    out = []
    for logdir in (LOGDIR, EVOLUTION):
        registry = load_registry([logdir])
        assert registry is not None
        for version in registry.state.listing():
            if version.type == "AVRO" and "no.such" not in version.schema:
                out.append((version.schema, registry._reference_texts(version)))
    return out + [(text, []) for text in EXTRA_AVRO]


def test_avro_types_are_sparks_schema_converters(spark):
    from pyspark.sql.types import _parse_datatype_json_string

    jvm = spark.sparkContext._jvm
    converters = jvm.org.apache.spark.sql.avro.SchemaConverters
    schemas = avro_schemas()
    assert len(schemas) >= 12
    for text, references in schemas:
        parser = jvm.org.apache.avro.Schema.Parser()
        for reference in references:
            parser.parse(reference)
        theirs = converters.toSqlType(parser.parse(text))
        parsed = parse_avro(text, references)
        ours, nullable = avro_type(parsed.schema, parsed.named)
        assert ours == _parse_datatype_json_string(theirs.dataType().json()), text
        assert nullable == theirs.nullable(), text


def test_recursive_avro_schemas_are_read_as_json_text(spark, tmp_path):
    from kfs.spark.typed import TypingError

    recursive = '{"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]}'
    parsed = parse_avro(recursive)
    with pytest.raises(TypingError):
        avro_type(parsed.schema, parsed.named)
    jvm = spark.sparkContext._jvm
    with pytest.raises(Exception, match="recursive"):  # Spark refuses it too
        jvm.org.apache.spark.sql.avro.SchemaConverters.toSqlType(jvm.org.apache.avro.Schema.Parser().parse(recursive))


def test_protobuf_type_follows_the_protobuf_connector():
    """payments-value's first message, as the connector's SchemaConverters maps it (written out: the
    connector is not in PySpark's jars): proto names, enums as strings, Timestamp as timestamp,
    repeated as arrays of non-null, maps with non-null values, proto3 scalars nullable."""
    registry = load_registry([LOGDIR])
    assert registry is not None
    schema_id = next(v.id for v in registry.state.listing() if v.subject == "payments-value")
    descriptor = next(iter(registry.compiled(schema_id).renderer.file.message_types_by_name.values()))
    assert protobuf_type(descriptor).simpleString() == (
        "struct<id:bigint,customer_id:string,total:struct<cents:bigint,currency:string>,status:string,"
        "lines:array<struct<sku:string,qty:int>>,at:timestamp,blob:binary,counts:map<string,int>,note:string>")
    fields = {f.name: f for f in protobuf_type(descriptor).fields}
    assert fields["lines"].dataType.containsNull is False and fields["counts"].dataType.valueContainsNull is False
    assert all(f.nullable for f in fields.values())


# ---- values: equal to kfs cat's decoded JSON lines ------------------------------------------------------

AVRO_TOPICS = ("orders", "users", "customers", "newer")


@pytest.mark.parametrize("topic", AVRO_TOPICS)
def test_typed_avro_columns_equal_kfs_cat_lines(spark, topic):
    registry = load_registry([LOGDIR])
    df = read(spark, subscribe=topic, includeHeaders="true")
    rows = sorted(df.collect(), key=lambda r: r["offset"])
    lines = cat_lines(LOGDIR, f"{topic}-0")
    assert [r["offset"] for r in rows] == [x["offset"] for x in lines]
    typed = 0
    for part in ("key", "value"):
        subject = [v for v in registry.state.listing() if v.subject == f"{topic}-{part}"]
        if not subject:
            assert df.schema[f"{part}_decoded"].dataType.simpleString() == "string"
            continue
        parsed = parse_avro(subject[-1].schema, registry._reference_texts(subject[-1]))
        assert df.schema[f"{part}_decoded"].dataType == avro_type(parsed.schema, parsed.named)[0]
        named: dict = {}  # (fastavro's parser for the test's walk: full names, named types by name)
        for text in [*registry._reference_texts(subject[-1]), subject[-1].schema]:
            schema = fastavro.parse_schema(json.loads(text), named_schemas=named)
        for row, line in zip(rows, lines, strict=True):
            if f"{part}_schema" in line:
                expected = from_avro_json(schema, named, line[part])
                assert plain(row[f"{part}_decoded"]) == expected, (topic, line["offset"])
                typed += 1
            else:
                assert row[f"{part}_decoded"] is None
            assert row[f"{part}_decode_error"] == line.get(f"{part}_decode_error")
    assert typed >= 2


def test_typed_protobuf_column_equals_kfs_cat_lines(spark):
    registry = load_registry([LOGDIR])
    schema_id = next(v.id for v in registry.state.listing() if v.subject == "payments-value")
    descriptor = next(iter(registry.compiled(schema_id).renderer.file.message_types_by_name.values()))
    df = read(spark, subscribe="payments")
    assert df.schema["value_decoded"].dataType == protobuf_type(descriptor)
    rows = sorted(df.collect(), key=lambda r: r["offset"])
    lines = cat_lines(LOGDIR, "payments-0")
    checked = 0
    for row, line in zip(rows, lines, strict=True):
        if line["value_schema"]["message"] == descriptor.full_name:
            assert plain(row["value_decoded"]) == from_protobuf_json(descriptor, line["value"]), line["offset"]
            assert row["value_decode_error"] is None
            checked += 1
        else:  # another message of the schema (Refund, Order.Line): not the column's type, and said so
            assert row["value_decoded"] is None
            assert row["value_decode_error"] == (f"schema id {schema_id}: a {line['value_schema']['message']} "
                                                 "message, not the shop.Order of payments-value")
    assert checked == 2
    first = plain(rows[0]["value_decoded"])
    assert first["id"] == 1 << 40 and first["at"] == local_time(1732000000_005000) and first["note"] == ""
    assert plain(rows[1]["value_decoded"]) == dict.fromkeys(first, None) | {"lines": [], "counts": {}}


def test_a_read_across_topics_holds_the_decoded_json_text(spark):
    """Topics whose schemas differ: each record's decoded JSON, as `kfs cat` prints it, and its error."""
    df = read(spark)
    assert df.schema["value_decoded"].dataType.simpleString() == "string"
    by_place = {(r["topic"], r["offset"]): r for r in df.collect()}
    seen = errors = 0
    for topic in ("orders", "users", "payments", "events", "mixed", "newer", "newer_proto", "plain"):
        for line in cat_lines(LOGDIR, f"{topic}-0"):
            row = by_place[(topic, line["offset"])]
            for part in ("key", "value"):
                if f"{part}_schema" in line:
                    assert json.loads(row[f"{part}_decoded"]) == line[part]
                    seen += 1
                else:
                    assert row[f"{part}_decoded"] is None
                assert row[f"{part}_decode_error"] == line.get(f"{part}_decode_error")
                errors += f"{part}_decode_error" in line
    assert seen >= 15 and errors >= 8


def test_decode_raw_and_no_registry_keep_the_kafka_source_schema(spark):
    columns = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    assert read(spark, decode="raw", subscribe="orders").columns == columns
    assert read(spark, LOGDIRS[0]).columns == columns  # no _schemas there
    with pytest.raises(Exception, match="decode must be auto or raw"):
        read(spark, decode="typed").schema  # noqa: B018


def test_schemas_option_names_the_registry(spark, tmp_path):
    """A log dir without `_schemas` decodes with `schemas=` other log dirs, as `kfs cat --schemas`."""
    import shutil

    shutil.copytree(Path(EVOLUTION) / "readings-0", tmp_path / "readings-0")
    shutil.copy(Path(EVOLUTION) / "meta.properties", tmp_path / "meta.properties")
    assert read(spark, str(tmp_path)).columns[-1] == "timestampType"
    df = read(spark, str(tmp_path), schemas=EVOLUTION, subscribe="readings")
    assert df.schema["value_decoded"].dataType.simpleString().startswith("struct<sensor:string,count:bigint")
    with pytest.raises(Exception, match="neither a log dir"):
        read(spark, str(tmp_path), schemas=str(tmp_path / "nowhere")).schema  # noqa: B018


# ---- schema resolution: older records read as the latest version ---------------------------------------

def test_older_records_resolve_to_the_latest_version(spark):
    df = read(spark, EVOLUTION, subscribe="readings")
    assert df.schema["value_decoded"].dataType.simpleString() == (
        "struct<sensor:string,count:bigint,level:double,unit:string,site:string,note:string,tags:array<string>>")
    rows = sorted(df.collect(), key=lambda r: r["offset"])

    def reading(sensor, count, level, unit, site="lab-1", note=None, tags=()):
        return {"sensor": sensor, "count": count, "level": level, "unit": unit, "site": site, "note": note,
                "tags": list(tags)}

    assert [plain(r["value_decoded"]) for r in rows] == [
        reading("t-1", 7, 1.25, "C"),                    # v1: int -> long, float -> double, legacy_code
        reading("t-2", -2147483648, -0.5, "F"),          # dropped, site and the rest from defaults
        None,                                            # v1 with enum symbol K, which v3 lacks
        reading("t-4", 1 << 40, 0.1, "C", "roof"),       # v2
        reading("t-5", 0, 2.5, "F"),
        reading("t-6", 3, -1.0, "C", "cellar", "new", ["a", "b"]),  # v3 itself
        reading("t-7", 4, 9.75, "F"),
        None,                                            # a v1 datum cut short
    ]
    errors = [r["value_decode_error"] for r in rows]
    assert errors[2].startswith("schema id 1: the datum does not decode as the reader schema") and "K" in errors[2]
    assert errors[7] == "schema id 1: the datum ends early"  # kfs cat's sentence for it
    assert errors[:2] == [None, None] and errors[3:7] == [None] * 4


def test_export_writes_each_typed_topic_in_its_own_directory(spark, tmp_path):
    from kfs.spark.jobs import export

    out = tmp_path / "parquet"
    export([LOGDIR], str(out), spark=spark)
    orders = spark.read.parquet(str(out / "topic=orders"))
    typed = read(spark, subscribe="orders", includeHeaders="true")
    # (Spark reads Parquet back with every field nullable: the types are compared, not the nullability)
    assert orders.schema["value_decoded"].dataType.simpleString() == \
        typed.schema["value_decoded"].dataType.simpleString()
    assert sorted(map(plain, orders.select("offset", "value_decoded").collect()), key=str) == \
        sorted(map(plain, typed.select("offset", "value_decoded").collect()), key=str)
    payments = spark.read.parquet(str(out / "topic=payments"))
    assert payments.schema["value_decoded"].dataType.simpleString().startswith("struct<id:bigint")
    events = spark.read.parquet(str(out / "topic=events"))  # JSON Schema: the JSON text
    assert events.schema["value_decoded"].dataType.simpleString() == "string"
    lines = cat_lines(LOGDIR, "events-0")
    assert sorted((r["offset"], json.loads(r["value_decoded"])) for r in events.collect()) == \
        [(x["offset"], x["value"]) for x in lines]
    # field by field against kfs cat, through the Parquet: a query by field
    amounts = {r["offset"]: r["a"] for r in orders.selectExpr("offset", "value_decoded.amount AS a").collect()}
    assert amounts == {x["offset"]: x["value"]["amount"] for x in cat_lines(LOGDIR, "orders-0")}


def test_filters_are_pushed_down_with_typed_columns(spark):
    """Offset and timestamp filters on a typed read are still answered from the indexes, and the typed
    values of the rows left are those of the records at those offsets."""
    from kfs.spark.plan import Bounds, plan_splits

    df = read(spark, EVOLUTION, subscribe="readings").where("offset >= 3 AND offset < 6")
    assert [(r["offset"], r["value_decoded"]["sensor"]) for r in df.orderBy("offset").collect()] == \
        [(3, "t-4"), (4, "t-5"), (5, "t-6")]
    assert df.rdd.getNumPartitions() == len(plan_splits({"path": EVOLUTION, "subscribe": "readings"},
                                                        Bounds(3, 6)))
    since = dt.datetime.fromtimestamp(1764000005, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    late = read(spark, EVOLUTION, subscribe="readings").where(f"timestamp >= TIMESTAMP '{since}+00:00'")
    assert [r["value_decoded"]["sensor"] if r["value_decoded"] else None
            for r in late.orderBy("offset").collect()] == ["t-6", "t-7", None]
    nothing = read(spark, EVOLUTION, subscribe="readings").where("offset >= 100")
    assert nothing.count() == 0 and nothing.rdd.getNumPartitions() <= 1


# ---- the JSON-shaped fast path (kfs.spark.json_shaped) ------------------------------------------------------

FLAT_V1 = {"type": "record", "name": "Tick", "namespace": "t", "fields": [
    {"name": "n", "type": "long"}, {"name": "who", "type": "string"}]}
FLAT_V2 = {"type": "record", "name": "Tick", "namespace": "t", "fields": [
    {"name": "n", "type": "long"}, {"name": "who", "type": "string"},
    {"name": "x", "type": "double", "default": 0.5},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}, "default": "A"},
    {"name": "tags", "type": {"type": "array", "items": "int"}, "default": []},
    {"name": "at", "type": {"type": "record", "name": "At", "fields": [{"name": "f", "type": "float"}]},
     "default": {"f": 1.5}},
    {"name": "maybe", "type": ["null", "string"], "default": None},
    {"name": "either", "type": ["null", "long", "string", "t.At"], "default": None},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}, "default": 0},
    {"name": "day", "type": ["null", {"type": "int", "logicalType": "date"}], "default": None}]}


def framed_datum(schema_id: int, schema: dict, value: dict) -> bytes:
    """`value` as a registry-framed Avro datum of `schema` (byte 0, the id, the datum)."""
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), value)
    return b"\0" + schema_id.to_bytes(4, "big") + out.getvalue()


def jackson(obj: dict) -> bytes:
    """JSON as the schema registry (Jackson) writes its `_schemas` records."""
    return json.dumps(obj, separators=(",", ":")).encode()


def flat_logdir(root: Path) -> str:
    """A topic `ticks` whose latest subject version is JSON-shaped, with records of both versions, one
    cut short, one not framed, and one whose double is NaN (text Arrow does not parse as a number)."""
    from conftest import v2_batch, write_segment

    v2 = {"n": 3, "who": "c\u00e9", "x": -2.25, "kind": "B", "tags": [1, -2], "at": {"f": 0.1}, "maybe": "m",
          "either": {"f": 2.5}, "ts": dt.datetime(2025, 11, 27, 12, 0, 0, 123000, tzinfo=dt.timezone.utc),
          "day": dt.date(2025, 11, 27)}
    values = [framed_datum(1, FLAT_V1, {"n": 1, "who": "a"}),
              framed_datum(2, FLAT_V2, v2),
              framed_datum(2, FLAT_V2, {**v2, "n": 4})[:-3],
              b"not framed",
              framed_datum(2, FLAT_V2, {**v2, "n": 1 << 62, "who": "\"q\"\n", "either": "s"}),
              framed_datum(2, FLAT_V2, {**v2, "n": 6, "maybe": None, "either": None, "tags": []})]
    # partition 1: a double that is NaN, which Arrow does not parse as a number: its batch goes the general way
    nan = [framed_datum(2, FLAT_V2, {**v2, "n": 5, "x": float("nan"), "maybe": None, "either": 7}),
           framed_datum(2, FLAT_V2, v2)]
    registry = [(jackson({"keytype": "SCHEMA", "subject": "ticks-value", "version": v, "magic": 1}),
                 jackson({"subject": "ticks-value", "version": v, "id": v, "schemaType": "AVRO",
                          "schema": json.dumps(s), "deleted": False})) for v, s in ((1, FLAT_V1), (2, FLAT_V2))]
    logdir = root / "flat"
    logdir.mkdir()
    (logdir / "meta.properties").write_text("version=1\nnode.id=1\ncluster.id=kfs-flat\n")
    for partition, records in (("_schemas-0", registry), ("ticks-0", [(b"k", v) for v in values]),
                               ("ticks-1", [(b"k", v) for v in nan])):
        (logdir / partition).mkdir()
        batches = []
        for start in range(0, len(records), 3):
            chunk = [(start + j, 1764000000000 + start + j, k, v, [])
                     for j, (k, v) in enumerate(records[start:start + 3])]
            batches.append([(v2_batch(start, chunk), chunk)])
        write_segment(str(logdir / partition), 0, batches, closed=False)
    return str(logdir)


def test_json_shaped_schemas_take_the_fast_path_and_read_the_same(spark, tmp_path):
    from pyspark.sql.pandas.types import to_arrow_schema

    from kfs.spark.options import parse_options
    from kfs.spark.source import registry_for
    from kfs.spark.typed import PartDecoder, _fast_column, part_plan
    from kfs.storage import LogDirs

    logdir = flat_logdir(tmp_path)
    df = read(spark, logdir, subscribe="ticks")
    # The path under test: partition 0's batch is parsed by Arrow, partition 1's (a NaN) is not.
    registry = registry_for(parse_options({"path": logdir}))
    decoder = PartDecoder(registry, part_plan(registry, ["ticks"], "value")[0], "ticks")
    arrow_type = to_arrow_schema(df.schema, timezone="UTC").field("value_decoded").type
    batches = {p: [r for rs in LogDirs([logdir]).partition(f"ticks-{p}").record_lists() for r in rs] for p in (0, 1)}
    assert _fast_column(decoder, batches[0], arrow_type) is not None
    assert _fast_column(decoder, batches[1], arrow_type) is None
    assert df.schema["value_decoded"].dataType.simpleString() == (
        "struct<n:bigint,who:string,x:double,kind:string,tags:array<int>,at:struct<f:float>,maybe:string,"
        "either:struct<member0:bigint,member1:string,member2:struct<f:float>>,ts:timestamp,day:date>")
    rows = sorted(df.collect(), key=lambda r: (r["partition"], r["offset"]))
    f01 = struct.unpack("<f", struct.pack("<f", 0.1))[0]

    def either(i: int, v: Any) -> dict:
        return {f"member{j}": v if j == i else None for j in range(3)}

    v2 = {"n": 3, "who": "c\u00e9", "x": -2.25, "kind": "B", "tags": [1, -2], "at": {"f": f01}, "maybe": "m",
          "either": either(2, {"f": 2.5}), "ts": local_time(1764244800_123000), "day": dt.date(2025, 11, 27)}
    got = [plain(r["value_decoded"]) for r in rows]
    assert got[0] == {"n": 1, "who": "a", "x": 0.5, "kind": "A", "tags": [], "at": {"f": 1.5},  # v1, resolved
                      "maybe": None, "either": None, "ts": local_time(0), "day": None}
    assert got[1] == v2 and got[2] is None and got[3] is None
    assert got[4] == {**v2, "n": 1 << 62, "who": "\"q\"\n", "either": either(1, "s")}
    assert got[5] == {**v2, "n": 6, "maybe": None, "either": None, "tags": []}
    assert got[6]["n"] == 5 and got[6]["x"] != got[6]["x"]  # NaN: that batch went the general way
    assert got[6]["maybe"] is None and got[6]["either"] == either(0, 7) and got[7] == v2
    errors = [r["value_decode_error"] for r in rows]
    assert errors == [None, None, "schema id 2: the datum ends early", None, None, None, None, None]


def shared_logdir(root: Path) -> str:
    """Topics `ticks` and `tocks` whose value subjects' latest version is one schema (FLAT_V2: the
    registry gives both subjects its id, 2), `tacks` at FLAT_V1 (id 1), two partitions of `ticks`."""
    from conftest import v2_batch, write_segment

    v2 = {"n": 3, "who": "x", "x": 0.5, "kind": "B", "tags": [1], "at": {"f": 1.5}, "maybe": None,
          "either": 7, "ts": 0, "day": None}
    subjects = [("ticks-value", 1, 1, FLAT_V1), ("ticks-value", 2, 2, FLAT_V2), ("tocks-value", 1, 2, FLAT_V2),
                ("tacks-value", 1, 1, FLAT_V1)]
    registry = [(jackson({"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1}),
                 jackson({"subject": subject, "version": version, "id": schema_id, "schemaType": "AVRO",
                          "schema": json.dumps(schema), "deleted": False}))
                for subject, version, schema_id, schema in subjects]
    partitions = {
        "_schemas-0": registry,
        "ticks-0": [(b"a", framed_datum(1, FLAT_V1, {"n": 1, "who": "a"})), (b"b", framed_datum(2, FLAT_V2, v2))],
        "ticks-1": [(b"c", framed_datum(2, FLAT_V2, {**v2, "n": 4}))],
        "tocks-0": [(b"d", framed_datum(2, FLAT_V2, {**v2, "n": 5, "who": "tock"})), (b"e", b"not framed")],
        "tacks-0": [(b"f", framed_datum(1, FLAT_V1, {"n": 6, "who": "tack"}))],
    }
    logdir = root / "shared"
    logdir.mkdir()
    (logdir / "meta.properties").write_text("version=1\nnode.id=1\ncluster.id=kfs-shared\n")
    for partition, records in partitions.items():
        (logdir / partition).mkdir()
        chunk = [(j, 1764000000000 + j, k, v, []) for j, (k, v) in enumerate(records)]
        write_segment(str(logdir / partition), 0, [[(v2_batch(0, chunk), chunk)]], closed=False)
    return str(logdir)


def by_place(df: Any) -> dict[tuple[str, int, int], Any]:
    return {(r["topic"], r["partition"], r["offset"]): (plain(r["value_decoded"]), r["value_decode_error"])
            for r in df.collect()}


def test_topics_sharing_one_schema_and_any_selector_of_one_topic_read_typed(spark, tmp_path):
    """`subscribe` of several topics whose subjects' latest schema is one, `subscribePattern` and
    `assign`: typed by that schema (SPEC 6: JSON text only when the schemas differ), each row as the
    read of its topic alone gives it; topics whose schemas differ, or a topic with no subject, keep the
    JSON text."""
    logdir = shared_logdir(tmp_path)
    alone = {t: read(spark, logdir, subscribe=t) for t in ("ticks", "tocks", "tacks")}
    typed = alone["ticks"].schema["value_decoded"].dataType
    assert typed.simpleString().startswith("struct<n:bigint,who:string,")
    assert alone["tocks"].schema["value_decoded"].dataType == typed
    want = {k: v for df in alone.values() for k, v in by_place(df).items()}
    assert want[("ticks", 0, 0)][0]["who"] == "a" and want[("tocks", 0, 0)][0]["who"] == "tock"
    assert want[("tocks", 0, 1)] == (None, None)  # (not framed)
    for options in ({"subscribe": "ticks,tocks"}, {"subscribePattern": "t[io]cks"},
                    {"assign": '{"ticks": [1], "tocks": [0]}'}, {"assign": '{"ticks": [0, 1]}'},
                    {"subscribePattern": "tocks"}):
        df = read(spark, logdir, **options)
        assert df.schema["value_decoded"].dataType == typed, options
        got = by_place(df)
        assert got and got == {k: want[k] for k in got}, options
        assert df.schema["value_decoded"].metadata["kfs.decoded"]["id"] == 2
    assert by_place(read(spark, logdir, subscribe="ticks,tocks")).keys() == {
        k for k in want if k[0] in ("ticks", "tocks")}
    tacks = alone["tacks"].schema["value_decoded"].dataType
    assert tacks != typed and tacks.simpleString() == "struct<n:bigint,who:string>"
    for options in ({"subscribe": "ticks,tacks"}, {"subscribePattern": "t.cks"}, {"subscribePattern": ".*"},
                    {"assign": '{"ticks": [0], "_schemas": [0]}'}, {}):
        df = read(spark, logdir, **options)
        assert df.schema["value_decoded"].dataType.simpleString() == "string", options
    assert read(spark, logdir, subscribePattern="nothing").schema["value_decoded"].dataType.simpleString() == "string"
