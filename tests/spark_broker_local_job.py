"""The driver of tests/test_spark_broker_local.py, on a cluster whose two Workers are two hosts.

    python tests/spark_broker_local_job.py MASTER OUT_DIR HOST_A HOST_B

HOST_A is the first Worker's host name (this machine's), HOST_B the name the second Worker's executors
go by (`KFS_HOST`). Reads broker-a's log dir as HOST_A's and broker-b's as HOST_B's in one barrier
stage (kfs.spark.broker_local), the same log dirs by `format("kfs")` from a shared path, the errors
of a host without a task and of a log dir missing on its host, a typed read (`schemas` read on
the driver) on HOST_B, one typed by the registry found on HOST_B and read on HOST_A, a pattern's,
`kfs spark grep` on the hosts and on the shared path, and `kfs spark export`
typed per topic from HOST_B's disk against the data source's typed rows; writes `results.json`. A script: a
process holds one SparkContext, and the other Spark tests hold theirs.
"""

from __future__ import annotations

import io
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from spark_cluster_job import ALL, LOGDIRS, rows

REGISTRY = str(Path(__file__).resolve().parent / "fixtures" / "schema-registry" / "logdir")


def error_of(run: Any) -> str | None:
    try:
        run()
    except Exception as e:  # (Spark's exception carries the task's error text)
        return str(e)
    return None


def main() -> int:
    master, out, host_a, host_b = sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4]
    from pyspark.sql import SparkSession

    import kfs.spark
    from kfs.cli.main import main as cli_main
    from kfs.spark import broker_local, jvm

    builder = (SparkSession.builder.master(master).appName("kfs broker-local test")
               .config("spark.executor.cores", "1").config("spark.task.maxFailures", "1")
               .config("spark.stage.maxConsecutiveAttempts", "1"))
    spark = jvm.configure(builder).getOrCreate()
    try:
        kfs.spark.register(spark)
        placed = f"{host_a}:{LOGDIRS[0]},{host_b}:{LOGDIRS[1]}"
        options = {"includeHeaders": "true", "maxSplitBytes": "65536"}
        results: dict[str, Any] = {
            "slots": spark.sparkContext.defaultParallelism,
            "broker_local": rows(broker_local.read(spark, placed, options)),
            "shared_path": rows(spark.read.format("kfs").options(**options).load(ALL)),
            # broker-b's log dir on both hosts: its partitions read once, from HOST_A's copy (listed first)
            "replicated": rows(broker_local.read(spark, f"{host_a}:{LOGDIRS[1]},{host_b}:{LOGDIRS[1]}", options)),
            "only_b": rows(spark.read.format("kfs").options(**options).load(LOGDIRS[1])),
            "no_task_there": error_of(lambda: broker_local.read(spark, f"{host_a}:{LOGDIRS[0]},"
                                                                       f"broker-z:{LOGDIRS[1]}").count()),
            "too_few_slots": error_of(lambda: broker_local.read(spark, f"{placed},broker-z:{LOGDIRS[1]}")),
            "missing_on_b": error_of(lambda: broker_local.read(spark, f"{host_a}:{LOGDIRS[0]},"
                                                                      f"{host_b}:{LOGDIRS[1]}-gone").count()),
            # typed by the registry the driver read (`schemas`), decoded on HOST_B's executor
            "typed_on_b": rows(broker_local.read(spark, f"{host_b}:{REGISTRY}",
                                                 {"subscribe": "orders", "schemas": REGISTRY})),
            "typed_shared": rows(spark.read.format("kfs").option("subscribe", "orders").load(REGISTRY)),
        }
        # no `schemas`: the registry rebuilt on the host that holds `_schemas` (HOST_B), the records read and
        # decoded on HOST_A, whose copy of the log dir has every partition but `_schemas-0`
        no_registry = out / "without-schemas"
        shutil.copytree(REGISTRY, no_registry, ignore=lambda d, names: [n for n in names if n == "_schemas-0"])
        found = broker_local.read(spark, f"{host_a}:{no_registry},{host_b}:{REGISTRY}", {"subscribe": "orders"})
        results["registry_from_b"] = [found.schema.simpleString(), rows(found)]
        shared = spark.read.format("kfs").option("subscribe", "orders").load(REGISTRY)
        results["registry_shared"] = [shared.schema.simpleString(), rows(shared)]
        # a pattern that selects one topic on the hosts: listed there first, then typed as over a shared path
        pattern = {"subscribePattern": "ord.*"}
        on_hosts = broker_local.read(spark, f"{host_b}:{REGISTRY}", {**pattern, "schemas": REGISTRY})
        shared = spark.read.format("kfs").options(**pattern).load(REGISTRY)
        results["pattern_on_b"] = [on_hosts.schema.simpleString(), rows(on_hosts)]
        results["pattern_shared"] = [shared.schema.simpleString(), rows(shared)]
        # `kfs spark grep --on-hosts` against the grep of the shared path: the same lines, in the same order
        from kfs.spark.jobs import grep

        for name, on_hosts, where in (("grep_on_hosts", True, [f"{host_a}:{LOGDIRS[0]}", f"{host_b}:{LOGDIRS[1]}"]),
                                      ("grep_shared", False, LOGDIRS)):
            buffer = io.BytesIO()
            results[f"{name}_count"] = grep("user-4", where, spark=spark, out=buffer, on_hosts=on_hosts,
                                            options={"maxSplitBytes": "16384"})
            results[name] = buffer.getvalue().decode()
        # `kfs spark export --on-hosts` as a user types it (in this process: its job takes this session)
        results["export_status"] = cli_main(["spark", "export", "--on-hosts", f"{host_a}:{LOGDIRS[0]}",
                                             f"{host_b}:{LOGDIRS[1]}", "--out", str(out / "export"),
                                             "-o", "maxSplitBytes=65536", "--master", master])
        # (Kafka's columns: __cluster_metadata's `topic=` directory holds its decoded JSON text too, the
        # other topics none; the whole OUT has no one schema for them)
        results["exported"] = rows(spark.read.parquet(str(out / "export")).drop(
            "key_decoded", "value_decoded", "key_decode_error", "value_decode_error"))
        # typed per topic (the registry of `schemas`, read here) from HOST_B's disk, and from the shared path
        results["typed_export_status"] = cli_main(["spark", "export", "--on-hosts", f"{host_b}:{REGISTRY}", "--out",
                                                   str(out / "typed-on-hosts"), "-o", f"schemas={REGISTRY}",
                                                   "--master", master])
        for topic in ("orders", "payments"):
            where = out / "typed-on-hosts"
            df = spark.read.option("basePath", str(where)).parquet(str(where / f"topic={topic}"))
            results[f"typed-on-hosts-{topic}"] = [df.schema["value_decoded"].simpleString(), rows(df)]
            df = spark.read.format("kfs").options(subscribe=topic, includeHeaders="true").load(REGISTRY)
            results[f"typed-shared-{topic}"] = [df.schema["value_decoded"].simpleString(), rows(df)]
    finally:
        spark.stop()
    (out / "results.json").write_text(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
