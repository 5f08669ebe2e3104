"""The driver of tests/test_spark_cluster.py: the same reads and jobs on whichever master it is given.

    python tests/spark_cluster_job.py MASTER OUT_DIR

Run once on `local[2]` and once on the standalone cluster; the tests compare the two `results.json`
(rows of several reads, the grep output, the errors of tasks whose planned data is gone) and the
two Parquet exports. A script rather than a session in the pytest process: a process holds one
SparkContext, and the other Spark tests hold theirs.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "kafka-written" / "logdirs"
LOGDIRS = [str(FIXTURES / "broker-a"), str(FIXTURES / "broker-b")]
ALL = ",".join(LOGDIRS)
EVOLUTION = str(FIXTURES.parents[1] / "schema-evolution" / "logdir")  # registry-framed Avro, three versions
REGISTRY = str(FIXTURES.parents[1] / "schema-registry" / "logdir")  # Avro and Protobuf, `_schemas` beside them
# Typed reads (kfs.spark.typed): the plans travel in the columns' metadata, each executor reads `_schemas`.
TYPED_READS = {"avro": (REGISTRY, {"subscribe": "orders"}), "protobuf": (REGISTRY, {"subscribe": "payments"}),
               "resolved": (EVOLUTION, {"subscribe": "readings", "maxSplitBytes": "64"}), "json_text": (REGISTRY, {})}

# name -> (load path, options, where clause): small splits, so each read is many tasks.
READS: dict[str, tuple[str, dict[str, str], str | None]] = {
    "all_with_headers": (ALL, {"includeHeaders": "true", "maxSplitBytes": "65536"}, None),
    "read_committed": (ALL, {"isolation": "read_committed", "subscribe": "payments", "includeHeaders": "true"}, None),
    "offset_ranges": (ALL, {"subscribe": "orders,payments", "maxSplitBytes": "8192",
                            "startingOffsets": '{"orders": {"0": 300}}', "endingOffsets": '{"orders": {"0": 1000}}'},
                      None),
    "pushed_filters": (ALL, {"maxSplitBytes": "8192"}, "topic = 'orders' AND partition = 0 AND offset >= 700 "
                                                       "AND offset < 800"),
    # A relative path means the driver's working directory, wherever the task runs: for the
    # partitions and for the schema registry the typed columns are decoded with.
    "relative_path": (os.path.relpath(LOGDIRS[1]), {"maxSplitBytes": "65536"}, None),
    "relative_typed": (os.path.relpath(EVOLUTION), {"subscribe": "readings"}, None),
}


AGGREGATES = {  # pushed into the read (kfs.spark.aggregates): each task sends partial rows
    "count_by_topic": (ALL, {"maxSplitBytes": "8192"}, ["topic"], ["count(*) AS n"]),
    "by_partition": (ALL, {"maxSplitBytes": "8192"}, ["topic", "partition"],
                     ["sum(offset) AS s", "unix_millis(min(timestamp)) AS t0", "max(offset) AS last"]),
    "typed_sum": (os.path.relpath(EVOLUTION), {"subscribe": "readings"}, [],
                  ["count(*) AS n", "count(value_decoded) AS decoded", "sum(value_decoded.count) AS total"]),
}


def aggregates(spark: Any) -> dict[str, Any]:
    """Each aggregate query's rows, sorted, and whether the scan read partial rows."""
    from pyspark.sql import functions as F

    out = {}
    for name, (path, options, groups, selects) in AGGREGATES.items():
        df = spark.read.format("kfs").options(**options).load(path).groupBy(*groups).agg(
            *[F.expr(s) for s in selects])
        schemas = [s.readSchema().simpleString() for s in _scans(df)]
        out[name] = {"pushed": ["agg0" in s for s in schemas], "rows": sorted([list(r) for r in df.collect()])}
    return out


def _scans(df: Any) -> list[Any]:
    found: list[Any] = []

    def walk(node: Any) -> None:
        if node.getClass().getSimpleName() == "DataSourceV2ScanRelation":
            found.append(node.scan())
        children = node.children().iterator()
        while children.hasNext():
            walk(children.next())

    walk(df._jdf.queryExecution().optimizedPlan())
    return found


def rows(df: Any) -> list[list[Any]]:
    """Rows as JSON-able lists, sorted; bytes as hex, timestamps as epoch ms (no time zone involved)."""
    cols = ["topic", "partition", "offset", "unix_millis(timestamp) AS ts", "timestampType", "hex(key)", "hex(value)"]
    if "headers" in df.columns:
        cols.append("transform(headers, h -> concat(h.key, '=', hex(h.value))) AS headers")
    if "value_decoded" in df.columns:  # typed by the registry (kfs.spark.typed): a struct, as JSON
        cols += ["to_json(value_decoded) AS value_decoded", "value_decode_error"]
    return sorted([list(r) for r in df.selectExpr(*cols).collect()], key=lambda r: (r[0], r[1], r[2]))


def scan_kinds(spark: Any) -> list[str]:
    """The class of the scan each query reads through: kfs's columnar scan when the front is there."""
    df = spark.read.format("kfs").load(ALL).groupBy("topic").count()
    return [scan.getClass().getSimpleName() for scan in _scans(df)]


def task_host() -> str:
    """What runs this task: a standalone executor (its JVM an ancestor of this Python worker), or
    the driver's own JVM (local mode)."""
    pid = os.getpid()
    while pid > 1:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        if b"CoarseGrainedExecutorBackend" in cmdline:
            return "executor"
        pid = int(stat[stat.rindex(")") + 2:].split()[1])
    return "driver"


def vanished(spark: Any, scratch: Path) -> dict[str, str]:
    """Plan on a copy of a log dir, take away part of it, then run the planned tasks on the master:
    what each task says (a task must fail, never read less)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from kfs.spark.options import parse_options
    from kfs.spark.plan import plan_splits
    from kfs.spark.source import kafka_schema, read_split

    schema = to_arrow_schema(kafka_schema(False), timezone="UTC")
    cases = {
        "log_dir": lambda d: shutil.rmtree(d),
        "partition_dir": lambda d: shutil.rmtree(d / "payments-0"),
        "first_segment": lambda d: (d / "payments-0" / "00000000000000000000.log").unlink(),
    }
    errors: dict[str, str] = {}
    for name, take_away in cases.items():
        copy = scratch / f"vanish-{name}"
        shutil.copytree(LOGDIRS[1], copy)
        opts = parse_options({"path": str(copy), "maxSplitBytes": "65536"})
        splits = plan_splits(opts)
        take_away(copy)
        rdd = spark.sparkContext.parallelize(splits, len(splits))
        try:
            count = rdd.map(lambda s, o=opts: sum(b.num_rows for b in read_split(s, o, schema))).sum()
            errors[name] = f"no error: {count} rows read"
        except Exception as e:  # Spark wraps the task's exception: keep its text
            errors[name] = str(e)
    return errors


def main(master: str, out: Path) -> None:
    import kfs.spark
    from kfs.spark import jvm
    from kfs.spark.jobs import export, grep

    out.mkdir(parents=True, exist_ok=True)
    spark = jvm.configure(_builder(master)).getOrCreate()  # (the front's jar on every executor: columnar scans)
    spark.sparkContext.setLogLevel("ERROR")
    try:
        kfs.spark.register(spark)
        results: dict[str, Any] = {"master": spark.sparkContext.master, "scans": scan_kinds(spark)}
        for name, (path, options, where) in READS.items():
            df = spark.read.format("kfs").options(**options).load(path)
            if where:
                df = df.where(where)
            results[name] = {"tasks": df.rdd.getNumPartitions(), "rows": rows(df)}
        export(LOGDIRS, str(out / "parquet"), spark=spark)
        buffer = io.BytesIO()
        grep("user-4", LOGDIRS, spark=spark, out=buffer, options={"maxSplitBytes": "16384"})
        results["grep"] = buffer.getvalue().decode()
        results["aggregates"] = aggregates(spark)
        results["vanished"] = vanished(spark, out)
        results["task_hosts"] = sorted(set(spark.sparkContext.parallelize(range(4), 4)
                                           .map(lambda _: task_host()).collect()))
    finally:
        spark.stop()
    results["without_the_jar"] = without_the_jar(master)
    (out / "results.json").write_text(json.dumps(results))


def _builder(master: str) -> Any:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(f"kfs cluster tests {master}")
    for key, value in {"spark.ui.enabled": "false", "spark.executor.heartbeatInterval": "600s",
                       "spark.network.timeout": "1200s", "spark.sql.shuffle.partitions": "2",
                       "spark.sql.session.timeZone": "UTC", "spark.sql.python.filterPushdown.enabled": "true",
                       "spark.task.maxFailures": "1"}.items():
        builder = builder.config(key, value)
    return builder


def without_the_jar(master: str) -> dict[str, Any]:
    """A second session whose executors are not given the front's jar (`spark.jars` empty: a user's
    session not started through `jvm.configure`, the jar on the driver only): on a cluster the front
    plans the read but Spark's own PythonScan runs it, pushed aggregates and typed columns included."""
    import kfs.spark

    spark = _builder(master).config("spark.jars", "").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        kfs.spark.register(spark)
        return {"scans": scan_kinds(spark), "aggregates": aggregates(spark), "typed": typed_reads(spark)}
    finally:
        spark.stop()


def typed_reads(spark: Any) -> dict[str, list[str]]:
    """Each typed read's decoded columns as JSON, sorted."""
    out = {}
    for name, (path, options) in TYPED_READS.items():
        df = spark.read.format("kfs").options(**options).load(path)
        out[name] = sorted(r[0] for r in df.selectExpr(
            "to_json(struct(topic, offset, key_decoded, value_decoded, key_decode_error, value_decode_error))")
            .collect())
    return out


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
