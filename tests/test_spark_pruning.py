"""Column pruning through kfs's JVM front (kfs.spark.jvm, kfs.spark.pruning), in a real SparkSession.

With the front, Spark plans a read with only the columns a query uses, nested fields included, and the
Python reader builds only those; every answer must be the one the Python source gives alone (registered
here as `kfs_plain`, which Spark reads whole). The projection itself is checked against a brute-force
oracle over random nested Arrow data, and the fallback (no `javac`: the Python source is `format("kfs")`)
in a session of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from builders import ALL_LOGDIRS  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from spark_session import local_spark  # noqa: E402

from kfs.spark import jvm  # noqa: E402
from kfs.spark.pruning import build_schema, project_array, whole_types  # noqa: E402
from kfs.spark.source import KafkaLogDataSource  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures"
REGISTRY_LOGDIR = str(FIXTURES / "schema-registry" / "logdir")
INTERNAL_LOGDIR = str(FIXTURES / "internal-topics" / "logdirs" / "broker-a")
PLAIN = "kfs_plain"


@pytest.fixture(scope="module")
def spark():
    for session in local_spark("kfs-tests"):
        session.dataSource.register(KafkaLogDataSource.with_parallelism(None, PLAIN))
        yield session


def scans(df: Any) -> list[Any]:
    """The query's kfs scans (the optimized plan's DataSourceV2ScanRelations), as JVM objects."""
    found: list[Any] = []

    def walk(node: Any) -> None:
        if node.getClass().getSimpleName() == "DataSourceV2ScanRelation":
            found.append(node.scan())
        children = node.children().iterator()
        while children.hasNext():
            walk(children.next())

    walk(df._jdf.queryExecution().optimizedPlan())
    return found


def read_schemas(df: Any) -> list[str]:
    """The schema each of the query's scans reads."""
    return [scan.readSchema().simpleString() for scan in scans(df)]


def read_names(df: Any) -> list[list[str]]:
    return [list(scan.readSchema().fieldNames()) for scan in scans(df)]


def both(spark: Any, path: str, **options: str) -> tuple[Any, Any]:
    """The same read through the front (`kfs`) and through the Python source alone."""
    return (spark.read.format("kfs").options(**options).load(path),
            spark.read.format(PLAIN).options(**options).load(path))


def rows(df: Any) -> list[Any]:
    return sorted(df.collect(), key=repr)


def test_the_front_is_format_kfs(spark):
    assert jvm.loaded(spark), "the JVM front was not built or not loaded (is javac installed?)"
    pruned, plain = both(spark, REGISTRY_LOGDIR)
    assert pruned.schema == plain.schema
    assert read_schemas(pruned.select("topic")) == ["struct<topic:string>"]
    assert read_schemas(plain.select("topic")) == [plain.schema.simpleString()]  # (the API cannot prune)


def test_a_local_session_reads_columns(spark):
    """Local: the driver's JVM is the executor, so the front's jar added by `register` is everywhere and the
    scan hands Spark the Python worker's Arrow batches as columns."""
    pruned, plain = both(spark, REGISTRY_LOGDIR)
    assert [s.getClass().getSimpleName() for s in scans(pruned.select("topic"))] == ["ColumnarPythonScan"]
    assert [s.getClass().getSimpleName() for s in scans(plain.select("topic"))] == ["PythonScan"]
    assert "ColumnarToRow" in pruned.select("topic")._jdf.queryExecution().executedPlan().toString()


def idle_workers_nagle_off(spark: Any) -> list[bool]:
    """Whether Nagle is off (TCP_NODELAY) on the socket to each idle Python worker of the session's JVM
    (Spark's own fields, read by reflection: test-only)."""
    jvm = spark._jvm
    env = spark.sparkContext._jsc.sc().env()
    # (by Class.forName: py4j cannot call a method on the SparkEnv object itself, as it lists all of its
    # methods first and some name protobuf classes the classpath lacks)
    field = jvm.java.lang.Class.forName("org.apache.spark.SparkEnv").getDeclaredField("pythonWorkers")
    field.setAccessible(True)
    nodelay = jvm.java.net.StandardSocketOptions.TCP_NODELAY
    found: list[bool] = []
    factories = field.get(env).values().iterator()
    while factories.hasNext():
        factory = factories.next()
        idle = factory.getClass().getDeclaredField("idleWorkers")
        idle.setAccessible(True)
        workers = idle.get(factory).iterator()
        while workers.hasNext():
            channel = workers.next().channel()
            if channel.supportedOptions().contains(nodelay):
                found.append(bool(channel.getOption(nodelay)))
    return found


def test_the_fronts_tasks_turn_nagle_off_on_their_python_workers_sockets(spark):
    """Spark leaves Nagle on its sockets to Python workers, and a task's second write then waits out the
    worker's delayed ACK (~35 ms a task); the front's runner turns it off (NoDelayArrowPythonRunner).
    Spark sets TCP_NODELAY on no Python worker socket, so a worker with it on ran a task of the front."""
    assert rows(spark.read.format("kfs").load(REGISTRY_LOGDIR).groupBy("topic").count())
    assert True in idle_workers_nagle_off(spark)


def test_a_count_by_topic_reads_one_column(spark):
    """(Without the aggregation pushed: tests/test_spark_aggregates.py has it pushed.)"""
    pruned, plain = both(spark, REGISTRY_LOGDIR, aggregatePushdown="false")
    counts = pruned.groupBy("topic").count()
    assert read_schemas(counts) == ["struct<topic:string>"]
    assert rows(counts) == rows(plain.groupBy("topic").count())
    assert dict(rows(counts))["orders"] == 3


def test_a_count_of_rows_reads_the_cheapest_column(spark):
    for path in (REGISTRY_LOGDIR, ALL_LOGDIRS, INTERNAL_LOGDIR):
        pruned, plain = both(spark, path, includeHeaders="true", aggregatePushdown="false")
        assert read_schemas(pruned.selectExpr("count(*)")) == ["struct<partition:int>"]
        assert pruned.count() == plain.count() > 0


@pytest.mark.parametrize("path, options", [
    (REGISTRY_LOGDIR, {"subscribe": "orders", "includeHeaders": "true"}),
    (REGISTRY_LOGDIR, {"subscribe": "payments"}),
    (REGISTRY_LOGDIR, {"includeHeaders": "true"}),  # across topics: the decoded columns are JSON text
    (REGISTRY_LOGDIR, {"subscribe": "mixed", "decode": "raw"}),
    (INTERNAL_LOGDIR, {"subscribe": "__consumer_offsets"}),  # decoded from Records (kfs.spark.typed)
    (ALL_LOGDIRS, {"includeHeaders": "true", "minPartitions": "5"}),
])
def test_every_column_alone_equals_the_python_sources(spark, path, options):
    pruned, plain = both(spark, path, **options)
    for name in pruned.columns:
        got = pruned.select("topic", "partition", "offset", name)
        assert set(read_names(got)[0]) <= {"topic", "partition", "offset", name}
        assert rows(got) == rows(plain.select("topic", "partition", "offset", name)), name


def test_nested_fields_are_pruned_inside_structs_lists_and_maps(spark):
    pruned, plain = both(spark, REGISTRY_LOGDIR, subscribe="orders", includeHeaders="true")
    columns = ["offset", "value_decoded.amount", "value_decoded.lines.price", "value_decoded.attrs",
               "value_decoded.note.member1", "headers.value"]
    got = pruned.select(*columns)
    assert read_schemas(got) == [
        "struct<offset:bigint,headers:array<struct<value:binary>>,value_decoded:struct<amount:double,"
        "note:struct<member1:bigint>,lines:array<struct<price:decimal(9,2)>>,"
        "attrs:map<string,struct<member0:int,member1:string>>>>"]
    assert rows(got) == rows(plain.select(*columns))
    total = pruned.selectExpr("sum(value_decoded.amount) AS total").collect()[0].total
    assert total == plain.selectExpr("sum(value_decoded.amount) AS total").collect()[0].total == pytest.approx(112.49)


def test_pushed_filters_and_pruned_columns_together(spark):
    pruned, plain = both(spark, ALL_LOGDIRS)
    query = "offset >= 2 AND offset < 40 AND partition = 0"
    got = pruned.where(query).select("topic", "offset")
    assert read_schemas(got) == ["struct<topic:string,partition:int,offset:bigint>"]  # (what filters name: read whole)
    plan = got._jdf.queryExecution().optimizedPlan().toString()
    assert ">= 2" not in plan and "< 40" not in plan, plan  # (pushed: Spark dropped them, the reader applies them)
    assert rows(got) == rows(plain.where(query).select("topic", "offset"))
    assert len(rows(got)) > 0


def test_two_scans_of_one_dataframe_read_their_own_columns(spark):
    df, plain = both(spark, REGISTRY_LOGDIR, subscribe="orders")
    joined = df.select("offset", "value_decoded.status").join(df.select("offset", "key"), "offset")
    assert sorted(read_schemas(joined)) == ["struct<key:binary,offset:bigint>",
                                            "struct<offset:bigint,value_decoded:struct<status:string>>"]
    assert rows(joined) == rows(plain.select("offset", "value_decoded.status").join(plain.select("offset", "key"),
                                                                                     "offset"))


def test_without_javac_the_python_source_is_format_kfs(tmp_path):
    """No JDK: kfs says why once, registers the Python source as `kfs`, and every answer is the same."""
    bin_dir = tmp_path / "bin"  # every command on PATH but javac
    bin_dir.mkdir()
    for directory in os.environ["PATH"].split(os.pathsep):
        for entry in Path(directory).iterdir() if os.path.isdir(directory) else ():
            if entry.name != "javac" and not (bin_dir / entry.name).exists():
                (bin_dir / entry.name).symlink_to(entry)
    script = textwrap.dedent(f"""
        import logging, sys
        logging.basicConfig(level=logging.WARNING)
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from spark_session import local_spark
        from kfs.spark import jvm
        for spark in local_spark("kfs-no-javac"):
            assert not jvm.loaded(spark)
            df = spark.read.format("kfs").load({REGISTRY_LOGDIR!r})
            print("counts", sorted(tuple(r) for r in df.groupBy("topic").count().collect()))
    """)
    env = {**os.environ, "PATH": str(bin_dir), "XDG_CACHE_HOME": str(tmp_path / "cache"),
           "PYSPARK_PYTHON": sys.executable}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "column-pruning front could not be built (no javac on PATH" in out.stderr
    assert "('orders', 3)" in out.stdout and "('_schemas', 26)" in out.stdout
    assert not list((tmp_path / "cache").rglob("*.jar"))


def test_kfs_spark_front_0_keeps_the_jar_out_of_a_session_kfs_configures(monkeypatch):
    """`KFS_SPARK_FRONT=0` in a session started through `jvm.configure` (as kfs's own are): the jar is
    not added, so the Python source is `format("kfs")` (registering it once failed: the jar's `kfs` was
    on the classpath). Without the jar, `register` takes the path a session without javac takes, which
    test_without_javac_the_python_source_is_format_kfs runs in a real session."""
    from pyspark.sql import SparkSession

    jar = jvm.jar_path()
    assert jar is not None
    assert SparkSession.Builder()._options.get("spark.jars") is None
    assert jvm.configure(SparkSession.Builder())._options.get("spark.jars") == str(jar)
    monkeypatch.setenv("KFS_SPARK_FRONT", "0")
    assert "spark.jars" not in jvm.configure(SparkSession.Builder())._options


def test_the_front_compiles_from_its_source(tmp_path, monkeypatch):
    """A fresh cache: the jar is built from kfs/spark/java against the installed PySpark, once."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    jar = jvm.jar_path()
    assert jar is not None and jar.parent == tmp_path / "kfs"
    import zipfile

    names = set(zipfile.ZipFile(jar).namelist())
    assert "kfs/spark/ColumnPruningSource.class" in names
    assert "META-INF/services/org.apache.spark.sql.sources.DataSourceRegister" in names
    stamp = jar.stat().st_mtime_ns
    assert jvm.jar_path() == jar and jar.stat().st_mtime_ns == stamp
    assert not [p for p in jar.parent.iterdir() if p.name.startswith(".")]


# ---- the projection, against a brute-force oracle ------------------------------------------------

LEAVES = [pa.int64(), pa.string(), pa.float64()]


@st.composite
def data_types(draw: Any, depth: int = 0) -> Any:
    kind = draw(st.sampled_from(["leaf"] if depth >= 3 else ["leaf", "struct", "list", "map"]))
    if kind == "leaf":
        return draw(st.sampled_from(LEAVES))
    if kind == "list":
        return pa.list_(pa.field("element", draw(data_types(depth + 1))))
    if kind == "map":
        return pa.map_(pa.string(), draw(data_types(depth + 1)))
    n = draw(st.integers(1, 4))
    return pa.struct([pa.field(f"f{i}", draw(data_types(depth + 1))) for i in range(n)])


@st.composite
def values_of(draw: Any, data_type: Any) -> Any:
    if draw(st.integers(0, 5)) == 0:
        return None
    if pa.types.is_struct(data_type):
        return {f.name: draw(values_of(f.type)) for f in data_type}
    if pa.types.is_map(data_type):
        keys = draw(st.lists(st.text(max_size=3), max_size=3, unique=True))
        return [(k, draw(values_of(data_type.item_type))) for k in keys]
    if pa.types.is_list(data_type):
        return draw(st.lists(values_of(data_type.value_type), max_size=3))
    if data_type == pa.int64():
        return draw(st.integers(-(2**63), 2**63 - 1))
    if data_type == pa.float64():
        return draw(st.floats(allow_nan=False))
    return draw(st.text(max_size=5))


@st.composite
def pruned_types(draw: Any, data_type: Any) -> Any:
    """A type Spark could prune `data_type` to: some of a struct's fields, in order, each pruned too."""
    if pa.types.is_struct(data_type):
        keep = draw(st.lists(st.sampled_from(range(data_type.num_fields)), min_size=1, unique=True))
        return pa.struct([pa.field(data_type.field(i).name, draw(pruned_types(data_type.field(i).type)))
                          for i in sorted(keep)])
    if pa.types.is_map(data_type):
        return pa.map_(data_type.key_type, draw(pruned_types(data_type.item_type)))
    if pa.types.is_list(data_type):
        return pa.list_(pa.field("element", draw(pruned_types(data_type.value_type))))
    return data_type


def oracle(value: Any, target: Any) -> Any:
    """A value as `to_pylist` shows it, cut down to `target`, one Python value at a time."""
    if value is None:
        return None
    if pa.types.is_struct(target):
        return {f.name: oracle(value[f.name], f.type) for f in target}
    if pa.types.is_map(target):
        return [(k, oracle(v, target.item_type)) for k, v in value]
    if pa.types.is_list(target):
        return [oracle(v, target.value_type) for v in value]
    return value


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_projection_equals_the_oracle(data):
    data_type = data.draw(data_types())
    values = data.draw(st.lists(values_of(data_type), max_size=12))
    start = data.draw(st.integers(0, len(values)))
    stop = data.draw(st.integers(start, len(values)))
    array = pa.array(values, data_type).slice(start, stop - start)
    target = data.draw(pruned_types(data_type))
    got = project_array(array, target)
    got.validate(full=True)
    assert got.type == target
    assert got.to_pylist() == [oracle(v, target) for v in array.to_pylist()]


def test_build_schema_keeps_what_is_read_in_full():
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    full = KafkaLogDataSource({"path": REGISTRY_LOGDIR, "subscribe": "orders", "includeHeaders": "true"}).schema()
    only_topic = StructType([StructField("topic", StringType())])
    assert build_schema(only_topic, full).fieldNames() == ["key", "value", "topic", "partition", "offset",
                                                            "timestamp", "timestampType"]
    amount = StructType([StructField("value_decoded", StructType([StructField("amount", LongType())]))])
    built = build_schema(amount, full)
    assert built.fieldNames()[-4:] == ["key_decoded", "value_decoded", "key_decode_error", "value_decode_error"]
    # (as the query reads it, with its plan: the compiled decoder reads the other fields past)
    assert built["value_decoded"].dataType == amount["value_decoded"].dataType
    assert built["value_decoded"].metadata == full["value_decoded"].metadata != {}
    assert built["key_decoded"] == full["key_decoded"]
    whole = whole_types(built, full)
    assert list(whole) == ["value"]
    assert pa.types.is_struct(whole["value"]) and whole["value"].num_fields == len(full["value_decoded"].dataType)
    assert "headers" not in built.fieldNames()
    foreign = StructType([StructField("nonsense", StringType())])
    assert build_schema(foreign, full) == foreign


@pytest.fixture(scope="module")
def many_batches(tmp_path_factory):
    """A log dir of 60,000 registry-framed Avro records in two partitions (benchmarks/spark_data.py):
    several Arrow batches a task, so a batch's columns are read after the one before was."""
    from benchmarks import spark_data

    root = tmp_path_factory.mktemp("many-batches") / "data"
    assert spark_data.write(str(root), 60_000, 2, 1 << 20) == 60_000
    return str(root / "logdir")


def test_nested_columns_over_many_batches(spark, many_batches):
    pruned, plain = both(spark, many_batches, subscribe=spark_data_topic())
    total = pruned.selectExpr("sum(value_decoded.amount) AS total").collect()[0].total
    assert total == plain.selectExpr("sum(value_decoded.amount) AS total").collect()[0].total
    got = pruned.select("offset", "partition", "value_decoded.user", "value_decoded.note")
    assert read_names(got) == [["partition", "offset", "value_decoded"]]
    assert rows(got) == rows(plain.select("offset", "partition", "value_decoded.user", "value_decoded.note"))
    assert pruned.count() == 60_000


def spark_data_topic() -> str:
    from benchmarks import spark_data

    return spark_data.TOPIC


@pytest.fixture(scope="module")
def scattered_nulls(tmp_path_factory):
    """One partition whose keys and values are null at scattered rows (every bit of a validity byte,
    batches of several sizes), the rest strings of many lengths."""
    from conftest import v2_batch, write_segment

    root = tmp_path_factory.mktemp("nulls") / "logdir"
    part = root / "scattered-0"
    part.mkdir(parents=True)
    appends, offset = [], 0
    for size in (1, 7, 8, 9, 64, 300, 5000, 3):
        records = [(o, 1_000 + o, None if o % 3 == 0 or o % 7 == 0 else b"k%d" % o,
                    None if o % 5 == 0 else b"v" * (o % 41), []) for o in range(offset, offset + size)]
        appends.append([(v2_batch(offset, records), records)])
        offset += size
    write_segment(str(part), 0, appends)
    return str(root)


def test_columns_read_in_place_keep_every_null(spark, scattered_nulls):
    """The front's columns are read at their Arrow buffers' addresses (DirectArrowColumn): nulls, offsets
    and values equal the Python source's, row for row, and Spark's own expressions over them agree."""
    pruned, plain = both(spark, scattered_nulls)
    for columns in (["offset", "key"], ["offset", "value"], ["offset", "timestamp", "partition", "topic"]):
        assert rows(pruned.select(*columns)) == rows(plain.select(*columns)), columns
    query = ("count(*) AS n, count(key) AS keys, count(value) AS values, sum(length(value)) AS bytes, "
             "sum(offset) AS offsets, max(timestamp) AS last")
    got = pruned.selectExpr(*query.split(", ")).collect()[0].asDict()
    assert got == plain.selectExpr(*query.split(", ")).collect()[0].asDict()
    n = 1 + 7 + 8 + 9 + 64 + 300 + 5000 + 3
    assert got["n"] == n
    assert got["keys"] == sum(1 for o in range(n) if o % 3 and o % 7)
    assert got["values"] == sum(1 for o in range(n) if o % 5)
    assert got["bytes"] == sum(o % 41 for o in range(n) if o % 5)


FLAGS_SCHEMA = {"type": "record", "name": "Flags", "namespace": "t", "fields": [
    {"name": "on", "type": "boolean"},
    {"name": "maybe", "type": ["null", "boolean"]},
    {"name": "n", "type": "int"},
]}


def _flags_value(n: int) -> bytes | None:
    """Registry-framed Avro of FLAGS_SCHEMA (id 1) for record n; None (a null value) for some."""
    if n % 11 == 0:
        return None
    maybe = b"\x00" if n % 3 == 0 else b"\x02" + bytes([n % 5 == 0])
    zigzag, out = (n << 1) ^ (n >> 31), bytearray()
    while zigzag > 0x7F:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return b"\0\0\0\0\x01" + bytes([n % 2]) + maybe + bytes(out)


@pytest.fixture(scope="module")
def boolean_fields(tmp_path_factory):
    """A topic whose values' schema (registered in `_schemas`) has a boolean and a nullable boolean field."""
    import json

    from conftest import v2_batch, write_segment

    root = tmp_path_factory.mktemp("booleans") / "logdir"
    (root / "_schemas-0").mkdir(parents=True)
    (root / "flags-0").mkdir()
    key = json.dumps({"keytype": "SCHEMA", "subject": "flags-value", "version": 1, "magic": 1}).encode()
    value = json.dumps({"subject": "flags-value", "version": 1, "id": 1, "schema": json.dumps(FLAGS_SCHEMA),
                        "deleted": False}).encode()
    registered = [(0, 1_000, key, value, [])]
    write_segment(str(root / "_schemas-0"), 0, [[(v2_batch(0, registered), registered)]])
    appends, offset = [], 0
    for size in (5, 8, 17, 2000):
        records = [(o, 2_000 + o, None, _flags_value(o), []) for o in range(offset, offset + size)]
        appends.append([(v2_batch(offset, records), records)])
        offset += size
    write_segment(str(root / "flags-0"), 0, appends)
    return str(root)


def test_boolean_fields_read_in_place_equal_the_python_sources(spark, boolean_fields):
    pruned, plain = both(spark, boolean_fields, subscribe="flags")
    assert "on:boolean" in pruned.schema["value_decoded"].dataType.simpleString()
    columns = ["offset", "value_decoded.on", "value_decoded.maybe", "value_decoded.n"]
    got = rows(pruned.select(*columns))
    assert got == rows(plain.select(*columns))
    total = 5 + 8 + 17 + 2000
    assert len(got) == total
    assert [tuple(r) for r in sorted(got)][:4] == [(0, None, None, None), (1, True, False, 1), (2, False, False, 2),
                                                   (3, True, None, 3)]
    counts = pruned.selectExpr("count_if(value_decoded.on) AS on", "count_if(value_decoded.maybe) AS maybe")
    assert counts.collect()[0].asDict() == {
        "on": sum(1 for n in range(total) if n % 11 and n % 2),
        "maybe": sum(1 for n in range(total) if n % 11 and n % 3 and n % 5 == 0)}


def test_a_batch_whose_offsets_go_backwards_is_an_error_not_a_read(spark):
    """The front reads strings at their offsets unchecked (DirectArrowColumn), so it checks them first: a
    Python reader whose batch's offsets go backwards fails the task with a clear error (an unchecked load
    would have read a string of negative length, or other memory)."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    import kfs.spark

    class Hostile(DataSource):
        @classmethod
        def name(cls) -> str:
            return jvm.PYTHON_NAME

        def schema(self) -> str:
            return "topic string"

        def reader(self, schema: Any) -> DataSourceReader:
            class Reader(DataSourceReader):
                def partitions(self) -> list[InputPartition]:
                    return [InputPartition(0)]

                def read(self, partition: InputPartition) -> Any:
                    # (offsets that go backwards: pyarrow's cheap validation passes them, its full one not)
                    offsets = pa.py_buffer(pa.array([0, 3, 1], pa.int32()).buffers()[1])
                    yield pa.RecordBatch.from_arrays(
                        [pa.Array.from_buffers(pa.string(), 2, [None, offsets, pa.py_buffer(b"abc")])],
                        names=["topic"])

            return Reader()

    spark.dataSource.register(Hostile)
    try:
        with pytest.raises(Exception, match="batch has a topic: Utf8 column whose buffers do not hold its 2 rows"):
            spark.read.format("kfs").load("/nowhere").select("topic").collect()
    finally:
        kfs.spark.register(spark)  # (the kfs source behind the front again, for the tests after this one)
