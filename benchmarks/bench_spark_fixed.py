"""Spark's fixed cost of a query: a count of a tiny log dir through kfs against the same records' count
through Spark's own Parquet source, and `spark.range(10)`'s, in one warm session.

Why: how much faster `local[2]` is than `local[1]` over a 1 GB log (`bench_spark`) is decided by what a
query costs before and after its tasks read anything (planning, scheduling, the shuffle to the final
aggregate), which two task slots do not share. This prints that cost for kfs next to Spark's own sources
on the same machine, with the CPU of the JVM and of the Python workers, and Spark's planning phases
(QueryPlanningTracker: analysis, optimization, planning; kfs's Python planner calls fall in them).

    python -m benchmarks.bench_spark_fixed [--master local[2]] [--warmup 100] [--repeat 30]

The log dir is tests/fixtures/kafka-written/logdirs/broker-a (3,701 records, 576 KiB); its Parquet copy is
written by kfs into a temporary directory first. Nothing else should run beside it.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_spark import _cpu_seconds_by_process
from benchmarks.spark_compare import session

TINY = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "kafka-written" / "logdirs" / "broker-a"


def planning_ms(df: Any) -> dict[str, float]:
    """Spark's planning phases of the query `df` last ran, in ms."""
    phases = df._jdf.queryExecution().tracker().phases()
    out: dict[str, float] = {}
    entries = phases.iterator()
    while entries.hasNext():
        entry = entries.next()
        out[entry._1()] = float(entry._2().durationMs())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--warmup", type=int, default=100, help="untimed rounds of every query first (the JIT)")
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args(argv)
    spark = session(args.master)
    try:
        with tempfile.TemporaryDirectory(prefix="kfs-bench-fixed-") as tmp:
            parquet = str(Path(tmp) / "tiny.parquet")
            spark.read.format("kfs").load(str(TINY)).write.parquet(parquet)
            queries = {
                "kfs count": lambda: spark.read.format("kfs").load(str(TINY)).groupBy("topic").count(),
                "parquet count": lambda: spark.read.parquet(parquet).groupBy("topic").count(),
                "spark.range(10) count": lambda: spark.range(10).groupBy().count(),
            }
            answers = {name: sorted(map(tuple, q().collect())) for name, q in queries.items()}
            if answers["kfs count"] != answers["parquet count"]:
                raise SystemExit(f"the counts differ: {answers}")
            print(f"warming up: {args.warmup} rounds of {len(queries)} queries", flush=True)
            for _ in range(args.warmup):
                for q in queries.values():
                    q().collect()
            wall: dict[str, float] = {}
            for name, q in queries.items():
                before, start = _cpu_seconds_by_process(), time.perf_counter()
                phases: dict[str, float] = {}
                for _ in range(args.repeat):
                    df = q()
                    df.collect()
                    for phase, ms in planning_ms(df).items():
                        phases[phase] = phases.get(phase, 0.0) + ms / args.repeat
                wall[name] = (time.perf_counter() - start) / args.repeat
                after = _cpu_seconds_by_process()
                spent = {k: (after[k] - before.get(k, 0.0)) / args.repeat * 1000 for k in after}
                cpu = ", ".join(f"{k} {ms:.0f}" for k, ms in spent.items() if ms >= 1)
                print(f"{name:<22} {wall[name] * 1000:6.0f} ms a query   CPU ms: {cpu}   planning ms: "
                      + ", ".join(f"{k} {v:.1f}" for k, v in phases.items()), flush=True)
            print(f"kfs's fixed cost over Parquet's: {wall['kfs count'] / wall['parquet count']:.2f}x; "
                  f"over spark.range's: {wall['kfs count'] / wall['spark.range(10) count']:.2f}x")
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
