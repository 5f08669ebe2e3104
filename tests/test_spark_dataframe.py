"""`spark.read.format("kfs")` in a real local SparkSession, against the Kafka-written fixtures.

One `local[2]` session for the module (start-up costs seconds), with the settings a loaded
2-core machine needs (see SPARK-NOTES): loopback, patient heartbeats, no UI. Skipped when PySpark
is not installed.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("pyarrow")
pyspark = pytest.importorskip("pyspark")

from builders import ALL_LOGDIRS, golden_rows  # noqa: E402
from conftest import GOLDEN_PARTITIONS, LOGDIRS  # noqa: E402
from spark_session import local_spark  # noqa: E402

import kfs.spark  # noqa: E402
from kfs.spark.plan import Bounds, plan_splits  # noqa: E402
from kfs.spark.source import kafka_schema  # noqa: E402

TYPES = {0: "CreateTime", 1: "LogAppendTime", -1: "NoTimestampType"}


@pytest.fixture(scope="session")
def spark():
    yield from local_spark("kfs-tests")


def kfs_read(spark, path: str = ALL_LOGDIRS, **options: str):
    return spark.read.format("kfs").options(**options).load(path)


def rows_of(df) -> list[tuple]:
    """Rows as golden tuples; timestamps through unix_millis so no local time zone is involved."""
    has_headers = "headers" in df.columns
    cols = ["topic", "partition", "offset", "unix_millis(timestamp) AS ts", "timestampType", "key", "value"]
    out = []
    for r in df.selectExpr(*cols, *(["headers"] if has_headers else [])).collect():
        headers = [(h["key"], bytes(h["value"]) if h["value"] is not None else None)
                   for h in (r["headers"] or [])] if has_headers else []
        out.append((r["topic"], r["partition"], r["offset"], r["ts"], TYPES[r["timestampType"]],
                    None if r["key"] is None else bytes(r["key"]),
                    None if r["value"] is None else bytes(r["value"]), headers))
    return sorted(out, key=lambda r: (r[0], r[1], r[2]))


def golden_all(name: str = "records.jsonl") -> list[tuple]:
    return sorted((r for p in GOLDEN_PARTITIONS for r in golden_rows(p, name)), key=lambda r: (r[0], r[1], r[2]))


def without_headers(rows: list[tuple]) -> list[tuple]:
    return [(*r[:7], []) for r in rows]


# ---- the DataFrame --------------------------------------------------------------------------------

def test_schema_is_sparks_kafka_source_schema(spark):
    assert kfs_read(spark).schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int>")
    assert kfs_read(spark, includeHeaders="true").schema == kafka_schema(True)
    assert kfs_read(spark, includeHeaders="true").schema.fields[-1].simpleString() == \
        "headers:array<struct<key:string,value:binary>>"


def test_every_partition_equals_the_golden_records(spark):
    df = kfs_read(spark, includeHeaders="true", minPartitions="7")
    assert df.rdd.getNumPartitions() >= 7
    assert rows_of(df) == golden_all()


def test_without_include_headers_there_is_no_headers_column(spark):
    df = kfs_read(spark, LOGDIRS[1])
    assert "headers" not in df.columns
    b_partitions = [p for p in GOLDEN_PARTITIONS if (Path(LOGDIRS[1]) / p).is_dir()]
    assert rows_of(df) == without_headers(sorted(r for p in b_partitions for r in golden_rows(p)))


def test_read_committed(spark):
    df = kfs_read(spark, includeHeaders="true", isolation="read_committed", subscribe="payments")
    assert rows_of(df) == golden_rows("payments-0", "records.read_committed.jsonl")


def test_offset_options_return_exactly_the_range(spark):
    df = kfs_read(spark, includeHeaders="true", subscribe="orders,payments",
                  startingOffsets='{"orders": {"0": 300}, "payments": {"0": -2}}',
                  endingOffsets='{"orders": {"0": 1000}}', maxSplitBytes="8192")
    want = [r for r in golden_rows("orders-0") if 300 <= r[2] < 1000] + golden_rows("payments-0")
    assert rows_of(df) == want
    everything = kfs_read(spark, subscribe="orders,payments", maxSplitBytes="8192")
    assert df.rdd.getNumPartitions() < everything.rdd.getNumPartitions()


def test_timestamp_options_return_kafkas_list_offsets_range(spark):
    lookups = [json.loads(x) for x in (Path(LOGDIRS[0]).parents[1] / "golden" / "audit.events-v2-3" /
                                       "time-lookups.jsonl").read_text().splitlines()]
    found = [x for x in lookups if "error" not in x]
    start, end = found[len(found) // 3], found[2 * len(found) // 3]
    assert start["offset"] < end["offset"]
    df = kfs_read(spark, subscribe="audit.events-v2", startingTimestamp=str(start["target"]),
                  endingTimestamp=str(end["target"]))
    want = [r for r in golden_rows("audit.events-v2-3") if start["offset"] <= r[2] < end["offset"]]
    assert rows_of(df) == without_headers(want)


# ---- filter pushdown --------------------------------------------------------------------------------

def test_offset_and_partition_filters_are_answered_from_the_index(spark):
    df = kfs_read(spark, includeHeaders="true", maxSplitBytes="8192").where(
        "topic = 'orders' AND partition = 0 AND offset >= 700 AND offset < 800")
    assert rows_of(df) == [r for r in golden_rows("orders-0") if 700 <= r[2] < 800]
    # The filters reached the planner: Spark runs exactly the splits planned for these bounds.
    bounds = Bounds(700, 800, None, frozenset({"orders"}), frozenset({0}))
    assert df.rdd.getNumPartitions() == len(plan_splits({"path": ALL_LOGDIRS, "maxSplitBytes": "8192"}, bounds)) <= 2
    assert kfs_read(spark, maxSplitBytes="8192").rdd.getNumPartitions() > 20


def test_timestamp_filter_prunes_and_spark_keeps_it_exact(spark):
    # audit.events has out-of-order timestamps: a lower bound prunes, Spark re-checks each row.
    records = golden_rows("audit.events-v2-3")
    t = sorted(r[3] for r in records)[len(records) * 3 // 4]
    since = dt.datetime.fromtimestamp(t / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
    df = kfs_read(spark, subscribe="audit.events-v2", maxSplitBytes="4096").where(
        f"timestamp >= TIMESTAMP '{since}+00:00'")
    assert rows_of(df) == without_headers([r for r in records if r[3] >= t])
    everything = kfs_read(spark, subscribe="audit.events-v2", maxSplitBytes="4096")
    assert df.rdd.getNumPartitions() < everything.rdd.getNumPartitions()


# ---- jobs ---------------------------------------------------------------------------------------------

def test_export_round_trips_through_parquet(spark, tmp_path):
    from kfs.spark.jobs import export

    out = str(tmp_path / "parquet")
    export(LOGDIRS, out, spark=spark)
    assert (tmp_path / "parquet" / "topic=orders" / "partition=0").is_dir()
    assert rows_of(spark.read.parquet(out)) == golden_all()


@pytest.mark.parametrize(("pattern", "regex"), [("user-4", False), ("61f44c", False), ("^idem-[0-9]$", True)])
def test_grep_prints_matching_records_per_partition_in_offset_order(spark, pattern, regex):
    import re

    from kfs.spark.jobs import grep

    out = io.BytesIO()
    count = grep(pattern, LOGDIRS, regex=regex, spark=spark, out=out, options={"maxSplitBytes": "16384"})
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    needle = pattern.encode()

    def hit(data: bytes | None) -> bool:
        return data is not None and (re.search(needle, data) is not None if regex else needle in data)

    want = [r for p in GOLDEN_PARTITIONS for r in golden_rows(p)
            if hit(r[5]) or hit(r[6]) or any(hit(v) for _, v in r[7])]
    assert want and count == len(want)
    assert [(x["topic"], x["partition"], x["offset"]) for x in lines] == [r[:3] for r in want]
    # Same lines as the one renderer produces for `kfs cat`.
    assert lines[0]["key"] == (want[0][5].decode() if want[0][5] is not None else None)


# ---- on a cluster: the package reaches the workers as a zip -------------------------------------------

PY_FILES_JOB = """
import sys
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]").config("spark.submit.pyFiles", sys.argv[1])
         .config("spark.ui.enabled", "false").config("spark.executor.heartbeatInterval", "600s")
         .config("spark.network.timeout", "1200s").getOrCreate())
import kfs.spark
kfs.spark.register(spark)
n = spark.read.format("kfs").load(sys.argv[2]).count()
where = spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("kfs").__file__).collect()[0]
spark.stop()
print(n, where)
"""


@pytest.fixture(scope="module", autouse=True)
def py_files_job(tmp_path_factory):
    """What `spark.submit.pyFiles` does on a cluster, in a fresh local session started before the
    other tests (its JVM start-up overlaps theirs): workers put the zip first on their path."""
    package = Path(kfs.__file__).parent
    workdir = tmp_path_factory.mktemp("pyfiles")
    archive = workdir / "kfs.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for f in package.rglob("*.py"):
            z.write(f, f.relative_to(package.parent))
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    # cwd outside the checkout: a local worker's path starts with its cwd, a cluster's does not.
    job = subprocess.Popen([sys.executable, "-c", PY_FILES_JOB, str(archive), ALL_LOGDIRS], cwd=workdir, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    yield job
    if job.poll() is None:
        job.kill()
        job.wait()


def test_workers_import_kfs_from_a_py_files_zip(py_files_job):
    job = py_files_job
    stdout, stderr = job.communicate(timeout=300)
    assert job.returncode == 0, stderr[-3000:]
    count, where = stdout.split()[-2:]
    assert int(count) == sum(len(golden_rows(p)) for p in GOLDEN_PARTITIONS)
    assert where.endswith("/kfs.zip/kfs/__init__.py"), where  # the copy Spark shipped, not this checkout


def test_reads_work_with_filter_pushdown_off_as_by_default(spark):
    """PySpark rejects a reader with pushFilters when pushdown is off; kfs then plans without it."""
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
    try:
        df = kfs_read(spark, subscribe="orders").where("offset >= 1600")
        assert [r[2] for r in rows_of(df)] == list(range(1600, 1646))
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")


def test_cli_spark_grep_prints_json_lines(spark, capsysbinary):
    from kfs.cli.main import main

    assert main(["spark", "grep", "--regex", "idem-2[0-9]", *LOGDIRS]) == 0
    lines = [json.loads(x) for x in capsysbinary.readouterr().out.splitlines()]
    assert lines and all(x["key"].startswith("idem-2") for x in lines)
    assert [x["offset"] for x in lines] == sorted(x["offset"] for x in lines)


def test_cli_spark_errors_are_one_sentence(spark, capsysbinary, tmp_path):
    from kfs.cli.main import main

    assert main(["spark", "grep", "x", str(tmp_path / "nope")]) == 1
    assert main(["spark", "export", *LOGDIRS, "--out", str(tmp_path / "o"), "-o", "startingOffsets=latest"]) == 1
    err = capsysbinary.readouterr().err.decode()
    assert "no such log dir" in err and "cannot be latest" in err and "Traceback" not in err


def test_on_corrupt_skip_in_a_session_leaves_out_only_the_damaged_batch(spark, tmp_path):
    """A batch of orders-0 with a byte flipped (its CRC no longer matches): `onCorrupt=skip` reads every
    other record, through the compiled walk the tasks take; the default fails with the batch's error."""
    from builders import orders_with_a_crc_mismatch

    skipped = orders_with_a_crc_mismatch(tmp_path)
    df = kfs_read(spark, str(tmp_path), onCorrupt="skip", maxSplitBytes="3000", includeHeaders="true")
    assert rows_of(df) == [r for r in golden_rows("orders-0") if r[2] not in skipped]
    with pytest.raises(Exception, match="CRC mismatch"):
        kfs_read(spark, str(tmp_path)).count()
