"""Aggregates pushed into the read by kfs's JVM front (AggregatePushdown.java, kfs.spark.aggregates).

In a real SparkSession: a query whose aggregation the front takes reads partial rows (the plan's scan
says so) and answers what the Python source alone answers (registered as `kfs_plain`: Spark reads its
rows and aggregates them itself); what the front leaves alone reads rows as before. The partial rows
themselves are checked against a brute-force oracle over random batches (exact sums, ANSI overflow).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from builders import ALL_LOGDIRS  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType, TimestampType  # noqa: E402
from spark_session import local_spark  # noqa: E402
from test_spark_pruning import INTERNAL_LOGDIR, PLAIN, REGISTRY_LOGDIR, both, read_schemas, rows  # noqa: E402

from kfs.spark.aggregates import AggregateOverflowError, AggregatePlan  # noqa: E402
from kfs.spark.source import KafkaLogDataSource  # noqa: E402
from kfs.storage import KfsError  # noqa: E402

LONG = 1 << 63
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


@pytest.fixture(scope="module")
def spark():
    for session in local_spark("kfs-tests"):
        session.dataSource.register(KafkaLogDataSource.with_parallelism(None, PLAIN))
        yield session


def pushed(df: Any) -> bool:
    """Whether the query's one kfs scan reads partial rows (the front took its aggregation)."""
    schemas = read_schemas(df)
    assert len(schemas) == 1, schemas
    return "agg0" in schemas[0]


AGGREGATES = [
    "count(*) AS n",
    "count(key) AS keys",
    "sum(offset) AS offsets",
    "min(offset) AS first, max(offset) AS last",
    "min(timestamp) AS since, max(timestamp) AS until",
    "sum(partition) AS partitions, count(value) AS values",
    "avg(offset) AS mean",  # (Spark asks for its sum and count)
]


@pytest.mark.parametrize("path", [REGISTRY_LOGDIR, ALL_LOGDIRS, INTERNAL_LOGDIR])
@pytest.mark.parametrize("groups", [(), ("topic",), ("partition",), ("topic", "partition")])
def test_pushed_aggregates_equal_sparks_own(spark, path, groups):
    """Every aggregate alone in its own query, then all of them in one (Spark's answer: the Python
    source alone, whose rows Spark aggregates itself)."""
    df, plain = both(spark, path, minPartitions="3")
    selects = [part for select in AGGREGATES for part in select.split(", ")]
    for chosen in ([*[[s] for s in selects[:2]], selects] if groups else [[s] for s in selects] + [selects]):
        got = df.groupBy(*groups).agg(*[_expr(s) for s in chosen])
        assert pushed(got), read_schemas(got)
        assert rows(got) == rows(plain.groupBy(*groups).agg(*[_expr(s) for s in chosen])), chosen
        assert rows(got), "no group at all"


def _expr(text: str) -> Any:
    from pyspark.sql import functions as F
    return F.expr(text)


@pytest.mark.parametrize("options, select, expected", [
    ({"subscribe": "orders"}, "sum(value_decoded.order_id) AS s, min(value_decoded.created) AS c", None),
    ({"subscribe": "users"}, "sum(value_decoded.age) AS s, count(value_decoded.age) AS n, "
                             "count(value_decoded) AS d, max(value_decoded.age) AS m", None),
    ({"subscribe": "payments"}, "sum(value_decoded.total.cents) AS s, max(value_decoded.at) AS t, "
                                "count(value_decode_error) AS e", None),
])
def test_sums_of_decoded_fields_equal_sparks_own(spark, options, select, expected):
    """Nested fields of the typed decoded columns: a null parent (a tombstone, a value that did not
    decode) is skipped as Spark skips it."""
    df, plain = both(spark, REGISTRY_LOGDIR, **options)
    for groups in ((), ("partition",)):
        got = df.groupBy(*groups).agg(*[_expr(part) for part in select.split(", ")])
        assert pushed(got), read_schemas(got)
        assert rows(got) == rows(plain.groupBy(*groups).agg(*[_expr(part) for part in select.split(", ")]))


def test_a_count_by_topic_sends_a_row_a_topic_and_task(spark):
    df, plain = both(spark, REGISTRY_LOGDIR)
    counts = df.groupBy("topic").count()
    assert read_schemas(counts) == ["struct<topic:string,agg0:bigint>"]
    assert "PushedAggregates: [COUNT(*)]" in counts._jdf.queryExecution().executedPlan().toString()
    assert rows(counts) == rows(plain.groupBy("topic").count())
    assert dict(rows(counts))["orders"] == 3


def test_a_read_of_no_record_counts_zero(spark):
    """A global count over no record is 0 (every task sends its row; a read of no split plans one)."""
    df, plain = both(spark, ALL_LOGDIRS, startingTimestamp="4102444800000",
                     startingOffsetsByTimestampStrategy="latest")
    got = df.selectExpr("count(*) AS n", "sum(offset) AS s", "max(timestamp) AS t")
    assert pushed(got)
    assert rows(got) == rows(plain.selectExpr("count(*) AS n", "sum(offset) AS s", "max(timestamp) AS t"))
    assert got.collect()[0].n == 0 and got.collect()[0].s is None


@pytest.mark.parametrize("query", [
    lambda df: df.selectExpr("count(DISTINCT partition)"),  # distinct
    lambda df: df.selectExpr("sum(value_decoded.amount)"),  # a double: Spark's own order of additions
    lambda df: df.selectExpr("stddev(offset)"),
    lambda df: df.selectExpr("max(value)"),  # a binary column
    lambda df: df.groupBy("key").count(),  # a grouping of many groups
    lambda df: df.where("offset >= 1").groupBy("topic").count(),  # a pushed filter
])
def test_what_the_front_leaves_to_spark_reads_rows(spark, query):
    df, plain = both(spark, REGISTRY_LOGDIR, subscribe="orders")
    got = query(df)
    assert not pushed(got), read_schemas(got)
    assert rows(got) == rows(query(plain))


def test_aggregate_pushdown_false_reads_rows(spark):
    df = spark.read.format("kfs").option("aggregatePushdown", "false").load(REGISTRY_LOGDIR)
    counts = df.groupBy("topic").count()
    assert read_schemas(counts) == ["struct<topic:string>"]
    assert rows(counts) == rows(spark.read.format(PLAIN).load(REGISTRY_LOGDIR).groupBy("topic").count())


# The partial rows against an oracle: Python's own integers over the same values.

def _field(name: str, data_type: Any, kind: str, path: tuple[str, ...], ansi: bool) -> StructField:
    metadata = {"kfs.aggregate": kind, "kfs.column": list(path), "kfs.ansi": ansi}
    return StructField(name, data_type, True, metadata)


def _plan(grouped: bool, ansi: bool) -> AggregatePlan:
    fields = [_field("topic", StringType(), "group", ("topic",), ansi)] if grouped else []
    fields += [_field("agg0", LongType(), "count_star", (), ansi),
               _field("agg1", LongType(), "count", ("v", "x"), ansi),
               _field("agg2", LongType(), "sum", ("v", "x"), ansi),
               _field("agg3", LongType(), "min", ("v", "x"), ansi),
               _field("agg4", LongType(), "max", ("v", "x"), ansi),
               _field("agg5", LongType(), "sum", ("n",), ansi),
               _field("agg6", TimestampType(), "max", ("t",), ansi),
               _field("agg7", IntegerType(), "min", ("n",), ansi)]
    plan = AggregatePlan.from_schema(StructType(fields))
    assert plan is not None
    return plan


ROW = st.tuples(st.sampled_from(["a", "b", "c"]),
                st.one_of(st.none(), st.just("null-x"), st.integers(-LONG, LONG - 1)),
                st.integers(-(1 << 31), (1 << 31) - 1),
                st.integers(0, 1 << 52))
BATCH_TYPE = pa.schema([("topic", pa.string()), ("v", pa.struct([("x", pa.int64())])), ("n", pa.int32()),
                        ("t", pa.timestamp("us", tz="UTC"))])


def _batch(rows_: list[tuple[str, Any, int, int]]) -> pa.RecordBatch:
    values = [None if v is None else {"x": None} if v == "null-x" else {"x": v} for _, v, _, _ in rows_]
    return pa.RecordBatch.from_arrays(
        [pa.array([r[0] for r in rows_]), pa.array(values, BATCH_TYPE.field("v").type),
         pa.array([r[2] for r in rows_], pa.int32()), pa.array([r[3] for r in rows_], pa.int64()).cast(
             BATCH_TYPE.field("t").type)], schema=BATCH_TYPE)


def _oracle(rows_: list[tuple[str, Any, int, int]], grouped: bool, ansi: bool) -> dict[Any, list[Any]] | None:
    groups: dict[Any, list[tuple[str, Any, int, int]]] = {}
    for row in rows_:
        groups.setdefault(row[0] if grouped else None, []).append(row)
    if not grouped:
        groups.setdefault(None, [])
    out = {}
    for key, members in groups.items():
        xs = [v for _, v, _, _ in members if isinstance(v, int)]
        ns = [n for _, _, n, _ in members]
        sums = [sum(xs) if xs else None, sum(ns) if ns else None]
        for i, total in enumerate(sums):
            if total is not None and not -LONG <= total < LONG:
                if ansi:
                    return None
                sums[i] = (total + LONG) % (1 << 64) - LONG
        out[key] = [len(members), len(xs), sums[0], min(xs, default=None), max(xs, default=None), sums[1],
                    max((t for *_, t in members), default=None), min(ns, default=None)]
    return out


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(ROW, max_size=12), max_size=4), st.booleans(), st.booleans())
def test_partial_rows_equal_the_oracle(batches, grouped, ansi):
    plan = _plan(grouped, ansi)
    expected = _oracle([row for batch in batches for row in batch], grouped, ansi)
    if expected is None:
        with pytest.raises(AggregateOverflowError, match="overflows a long"):
            list(plan.reduce(_batch(batch) for batch in batches))
        return
    [out] = list(plan.reduce(_batch(batch) for batch in batches))
    got = {}
    for row in out.to_pylist():
        values = list(row.values())
        key = values.pop(0) if grouped else None
        stamp = values[6]
        values[6] = None if stamp is None else (stamp - EPOCH) // dt.timedelta(microseconds=1)
        got[key] = values
    assert got == expected


def test_a_column_the_schema_lacks_is_a_clear_error():
    plan = _plan(grouped=True, ansi=True)
    full = StructType([StructField("topic", StringType()), StructField("n", IntegerType())])
    with pytest.raises(KfsError, match=r"v\.x, which this read's schema does not have"):
        plan.input_schema(full)
    whole = StructType([*full.fields, StructField("v", StructType([StructField("x", LongType()),
                                                                   StructField("y", StringType())])),
                        StructField("t", TimestampType()), StructField("other", StringType())])
    assert plan.input_schema(whole).simpleString() == "struct<topic:string,n:int,v:struct<x:bigint>,t:timestamp>"


