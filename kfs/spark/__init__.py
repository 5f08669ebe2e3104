"""kfs as a PySpark data source: Kafka log dirs read by Spark, split along segments and index entries.

    import kfs.spark
    kfs.spark.register(spark)
    df = spark.read.format("kfs").load("/data/broker-a,/data/broker-b")

PySpark (`kfs[spark]`) is optional: importing this package does not import it; `register` does.
With a JDK in reach, `register` also puts kfs's JVM front on the session's classpath (kfs.spark.jvm), so
that Spark reads only the columns a query uses.
"""

from __future__ import annotations

from typing import Any


def register(spark: Any) -> None:
    """Make `spark.read.format("kfs")` available in this session.

    The source is registered with the session's default parallelism, so that reads plan whole
    waves of tasks (see `kfs.spark.plan.split_count`). When kfs's JVM front (kfs.spark.jvm) is on the
    session's classpath, or can be built and added to it (`ADD JAR`), it is `format("kfs")` and the
    Python source is registered behind it as `kfs_python`; else the Python source is `format("kfs")`.
    """
    from kfs.spark import jvm
    from kfs.spark.source import KafkaLogDataSource

    try:
        parallelism = spark.sparkContext.defaultParallelism
    except Exception:  # Spark Connect has no SparkContext: plan by bytes alone
        parallelism = None
    name = jvm.PYTHON_NAME if jvm.front(spark) else KafkaLogDataSource.name()
    spark.dataSource.register(KafkaLogDataSource.with_parallelism(parallelism, name))


def plan_splits(*args: Any, **kwargs: Any) -> Any:
    """The splits a read would run (see `kfs.spark.plan.plan_splits`); no Spark needed."""
    from kfs.spark.plan import plan_splits as plan

    return plan(*args, **kwargs)


__all__ = ["plan_splits", "register"]
