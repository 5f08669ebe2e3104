"""Spark over `__consumer_offsets`: what each group committed, from the decoded columns.

    python -m benchmarks.bench_spark_internal [--size-mb 200] [--partitions 4] [--repeat 3] [--keep DIR]

Builds a broker's `__consumer_offsets` (benchmarks.bench_groups: offset commits one batch each, group
metadata, tombstones, transactional commits) and, as the anchor, the same records as `kfs cat` prints
them, one JSON file per partition. Then, on `local[2]` with kfs's JVM front, times in one run:

- kfs: the rows with their decoded key and value (`count` of `value_decoded`), and the last offset each
  group committed (`max` of `value_decoded.OffsetCommitValue.offset` by `key_decoded.OffsetCommitKey.group`:
  a read of `__consumer_offsets` alone has typed columns, kfs.spark.internal_types);
- the same two queries by `spark.read.json` of the JSON lines (an explicit schema: no inference pass);
- kfs with `decode=raw` (every record read, nothing decoded): what the decoding costs on top.

Prints the best of `--repeat` runs after a warm-up round, and the ratios (above 1: kfs is faster).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from benchmarks import spark_compare
from benchmarks.bench_groups import build, kfs_command

TOPIC = "__consumer_offsets"
JSON_SCHEMA = ("partition INT, offset LONG, key STRUCT<type: STRING, data: STRUCT<`group`: STRING>>, "
               "value STRUCT<type: STRING, data: STRUCT<offset: LONG>>")


def queries(spark: Any, logdir: str, lines: str) -> dict[str, Any]:
    from pyspark.sql import functions as F

    def kfs(**options: str) -> Any:
        return spark.read.format("kfs").option("subscribe", TOPIC).options(**options).load(logdir)

    def kfs_last() -> int:
        df = kfs().where(F.col("key_decoded.type") == "OffsetCommitKey")
        return df.groupBy("key_decoded.OffsetCommitKey.group").agg(
            F.max("value_decoded.OffsetCommitValue.offset")).count()

    def json_last() -> int:
        df = spark.read.schema(JSON_SCHEMA).json(lines).where("key.type = 'OffsetCommitKey'")
        return df.groupBy("key.data.group").agg(F.max("value.data.offset")).count()

    return {
        "kfs decoded rows": lambda: kfs().where("key_decoded is not null and value_decoded is not null").count(),
        "json decoded rows": lambda: spark.read.schema(JSON_SCHEMA).json(lines)
        .where("key is not null and value is not null").count(),
        "kfs last offset by group": kfs_last,
        "json last offset by group": json_last,
        "kfs decode=raw rows": lambda: kfs(decode="raw").where("key is not null and coalesce(length(value), 0) >= 0")
        .count(),
    }


def write_lines(logdir: str, out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    total = 0
    for name in sorted(os.listdir(logdir)):
        if name.startswith(TOPIC + "-"):
            path = out / f"part-{name.rpartition('-')[2]}.jsonl"  # (Spark skips files whose name starts with _)
            with open(path, "wb") as f:
                subprocess.run([*kfs_command(), "cat", logdir, name], stdout=f, check=True)
            total += path.stat().st_size
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_spark_internal",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--size-mb", type=int, default=200)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", default=None, help="build into (or reuse) this directory, and keep it")
    args = parser.parse_args(argv)
    root = Path(args.keep or tempfile.mkdtemp(prefix="kfs-bench-spark-internal-"))
    logdir, lines = root / "logdir", root / "lines"
    try:
        if not logdir.exists():
            started = time.perf_counter()
            records, size, _ = build(str(logdir), args.size_mb, args.partitions)
            print(f"built {logdir}: {records:,} records, {size / 2**20:.0f} MiB "
                  f"in {time.perf_counter() - started:.0f} s")
        if not lines.exists():
            print(f"kfs cat's lines: {write_lines(str(logdir), lines) / 2**20:.0f} MiB in {lines}")
        spark = spark_compare.session("local[2]")
        try:
            todo = queries(spark, str(logdir), str(lines))
            answers = {name: q() for name, q in todo.items()}  # (the warm-up round)
            best = {name: min(_timed(q) for _ in range(args.repeat)) for name, q in todo.items()}
        finally:
            spark.stop()
        print(f"Spark over {TOPIC} (local[2], best of {args.repeat}, load {os.getloadavg()[0]:.1f}):")
        for name, seconds in best.items():
            print(f"  {name:<28} {seconds:6.2f} s   answer {answers[name]:,}")
        for what in ("decoded rows", "last offset by group"):
            if answers[f"kfs {what}"] != answers[f"json {what}"]:
                raise SystemExit(f"{what}: kfs {answers[f'kfs {what}']} != json {answers[f'json {what}']}")
            print(f"  {what}: kfs {best[f'json {what}'] / best[f'kfs {what}']:.2f}x spark.read.json of kfs cat's lines")
        print(f"  decoding's cost: decoded rows take {best['kfs decoded rows'] / best['kfs decode=raw rows']:.2f}x "
              "the raw read's time")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


def _timed(query: Any) -> float:
    started = time.perf_counter()
    query()
    return time.perf_counter() - started


if __name__ == "__main__":
    sys.exit(main())
