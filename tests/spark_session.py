"""The local SparkSession the Spark tests share: `local[2]`, kfs's source registered, the settings a
loaded 2-core machine needs (/work/shared/SPARK-NOTES.md), stopped at the end of the test session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

SESSION_CONF = {
    "spark.ui.enabled": "false",
    "spark.executor.heartbeatInterval": "600s",
    "spark.network.timeout": "1200s",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.python.filterPushdown.enabled": "true",
}


def local_spark(app_name: str) -> Iterator[Any]:
    """A session for a session-scoped fixture to yield from (getOrCreate: the test modules share one)."""
    from pyspark.sql import SparkSession

    import kfs.spark

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.master("local[2]").appName(app_name)
    for key, value in SESSION_CONF.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    kfs.spark.register(session)
    yield session
    session.stop()
