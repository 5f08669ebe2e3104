"""kfs's Spark source against the same records as JSON lines and as Parquet, and across masters.

    python -m benchmarks.bench_spark [--records 5600000] [--partitions 4] [--keep DIR]

Writes (benchmarks/spark_data.py) about 1.1 GB of log, ~5.6 M records of one topic in 4 partitions
with registry-framed Avro values, the same records as JSON lines, and kfs's own Parquet export
of the log (`kfs.spark.jobs.export`), all under a fresh directory in /tmp, deleted at the end.
Then times, each the best of `--repeat` runs after `--warmup` untimed rounds (Python workers started,
pages cached, and the JIT's first work done: a fresh JVM, a cluster's executor above all, compiles ~10,000
of Spark's methods over its first ~20 counts of 1 GB, so that a master whose JVM is fresh would otherwise
be timed against one whose JVM is warm) and, on `local[2]`, `--jit-rounds` more of every query but the
JSON scans (the JVM's CPU a kfs count still falls from ~0.2 to ~0.15 s over them: Spark's JIT settles
after some hundreds of queries, Parquet's scans gaining most), the queries of a session taking turns,
every answer checked against the others (a fast wrong answer is no answer):

- on `local[2]`: `groupBy("topic").count()` over `format("kfs")` (as a user gets it: decoded
  columns with the registry there, the aggregation pushed into the read; with `decode=raw`; and with
  `aggregatePushdown=false`, every row sent to the JVM), over `spark.read.json` (schema given,
  so no inference pass) and over `spark.read.parquet` of the export; a `sum` of the decoded
  `amount` field the same three ways (kfs: `subscribe=orders`, typed `value_decoded`; pushed and not);
- the kfs, JSON and Parquet counts on `local[1]` (kfs's one task keeps two cores busy: its JVM half and
  its Python worker run side by side; Spark's own sources' tasks are one thread), the kfs count on
  `local[1]` pinned to one core (every thread of the JVM and its Python workers), and on a standalone
  cluster (one Master, one Worker of 2 cores, tests/spark_cluster.py) with the same query, after as many
  warm-up queries as `local[2]` ran (its executor is a fresh JVM; the local masters share this one).

Prints each time, the CPU seconds of this process's JVM and Python workers in the best run (the
cluster's executors are the Worker's children, not counted), and the ratios of issue 26.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import spark_data
from benchmarks.bench_spark import _cpu_seconds_by_process

JSON_SCHEMA = ("topic STRING, partition INT, offset BIGINT, timestamp BIGINT, timestampType INT, key STRING, "
               "value STRUCT<n: BIGINT, user: STRING, amount: BIGINT, note: STRING>")
SESSION_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.executor.heartbeatInterval": "600s",
    "spark.network.timeout": "1200s",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.python.filterPushdown.enabled": "true",
    "spark.driver.memory": "2g",
}

# A cluster's executor: the Worker's 2 cores and most of its memory (ignored by local masters).
CLUSTER_CONF = {"spark.executor.memory": "2g", "spark.cores.max": "2", "spark.driver.host": "127.0.0.1"}

Query = Callable[[Any, "Paths"], Any]


def quick(name: str) -> bool:
    """A query the JIT warm-up repeats: all but the JSON scans (7-12 s each, their ratios 12x from the line)."""
    return not name.startswith("json")


class Paths:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.logdir = str(root / "logdir")
        self.json = str(root / "records.jsonl")
        self.parquet = str(root / "parquet")


def _counts(df: Any) -> dict[str, int]:
    return {r[0]: r[1] for r in df.groupBy("topic").count().collect()}


def _sum(df: Any, column: str) -> int:
    from pyspark.sql import functions as F

    return int(df.agg(F.sum(column)).collect()[0][0])


def _kfs(spark: Any, p: Paths, **options: str) -> Any:
    return spark.read.format("kfs").options(**options).load(p.logdir)


QUERIES: dict[str, Query] = {
    "kfs count": lambda s, p: _counts(_kfs(s, p)),
    "kfs count, decode=raw": lambda s, p: _counts(_kfs(s, p, decode="raw")),
    "kfs count, rows": lambda s, p: _counts(_kfs(s, p, aggregatePushdown="false")),
    "json count": lambda s, p: _counts(s.read.schema(JSON_SCHEMA).json(p.json)),
    "parquet count": lambda s, p: _counts(s.read.parquet(p.parquet)),
    "kfs sum": lambda s, p: _sum(_kfs(s, p, subscribe=spark_data.TOPIC), "value_decoded.amount"),
    "kfs sum, rows": lambda s, p: _sum(_kfs(s, p, subscribe=spark_data.TOPIC, aggregatePushdown="false"),
                                       "value_decoded.amount"),
    "json sum": lambda s, p: _sum(s.read.schema(JSON_SCHEMA).json(p.json), "value.amount"),
    "parquet sum": lambda s, p: _sum(s.read.option("basePath", p.parquet)
                                     .parquet(f"{p.parquet}/topic={spark_data.TOPIC}"), "value_decoded.amount"),
}


def session(master: str, **conf: str) -> Any:
    from pyspark.sql import SparkSession

    import kfs.spark
    from kfs.spark import jvm

    # (the Python workers run this Python, which has kfs, whatever `python3` on PATH is)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(f"kfs bench {master}")
    for key, value in {**SESSION_CONF, **conf}.items():
        builder = builder.config(key, value)
    spark = jvm.configure(builder).getOrCreate()  # (as kfs's own sessions start: the front on every executor)
    spark.sparkContext.setLogLevel("ERROR")
    kfs.spark.register(spark)
    return spark


def timed(spark: Any, paths: Paths, names: list[str], repeat: int, roots: tuple[int, ...] = (), warmup: int = 1,
          jit_rounds: int = 0) -> dict[str, tuple[float, Any, dict[str, float]]]:
    """Each query's (best seconds, answer, CPU seconds by process in its best run). The queries first take
    turns `warmup` rounds untimed (Python workers started, pages cached, the JIT's first work done: a fresh
    JVM compiles ~10,000 of Spark's methods over its first ~20 queries of 1 GB, docs/spark.md), then the
    `quick` ones `jit_rounds` rounds more (Spark's JIT is still compiling after a hundred queries: the
    JVM's CPU a 1 GB count falls from ~0.3 s to ~0.15 s over the next hundreds), then `repeat` timed
    rounds: a load that comes and goes weighs on all of them alike."""
    answers: dict[str, Any] = {}
    first: dict[str, float] = {}

    def run(name: str) -> float:
        started = time.perf_counter()
        answer = QUERIES[name](spark, paths)
        seconds = time.perf_counter() - started
        if answers.setdefault(name, answer) != answer:
            raise SystemExit(f"{name}: {answer} after {answers[name]}")
        return seconds

    for _ in range(max(1, warmup)):
        for name in names:
            first.setdefault(name, run(name))
    print("  warm-up: " + ", ".join(f"{name} first {seconds:.2f} s" for name, seconds in first.items()), flush=True)
    repeated = [name for name in names if quick(name)]
    if jit_rounds and repeated:
        jvm = "worker's jvm" if roots else "jvm"  # (where the tasks run: a cluster's executor, or this JVM)
        jvm_cpu = []  # the JVM's CPU seconds of a round's first query, to show the JIT settling
        for _ in range(jit_rounds):
            before = _cpu_seconds_by_process(roots)
            run(repeated[0])
            jvm_cpu.append(_cpu_seconds_by_process(roots).get(jvm, 0.0) - before.get(jvm, 0.0))
            for name in repeated[1:]:
                run(name)
        tenth = max(1, jit_rounds // 10)
        print(f"  JIT warm-up: {jit_rounds} rounds of {len(repeated)} queries; {repeated[0]}'s JVM CPU s, mean of each "
              f"{tenth} rounds: " + " ".join(f"{sum(jvm_cpu[i:i + tenth]) / len(jvm_cpu[i:i + tenth]):.2f}"
                                            for i in range(0, jit_rounds, tenth)), flush=True)
    best: dict[str, tuple[float, Any, dict[str, float]]] = {}
    for _ in range(repeat):
        for name in names:
            before = _cpu_seconds_by_process(roots)
            started = time.perf_counter()
            again = QUERIES[name](spark, paths)
            seconds = time.perf_counter() - started
            if again != answers[name]:
                raise SystemExit(f"{name}: {again} after {answers[name]}")
            if name not in best or seconds < best[name][0]:
                after = _cpu_seconds_by_process(roots)
                best[name] = (seconds, again, {k: v - before.get(k, 0.0) for k, v in after.items()})
    return best


def _descendants() -> list[int]:
    """This process's descendants (the JVM, PySpark's daemon, its workers)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    text = f.read()
                parents[int(entry)] = int(text[text.rindex(")") + 2:].split()[1])
            except (OSError, ValueError):
                continue
    found, todo = [], [os.getpid()]
    while todo:
        pid = todo.pop()
        kids = [c for c, p in parents.items() if p == pid]
        found += kids
        todo += kids
    return found


def pin(cores: set[int]) -> None:
    """Every thread of this process and of its descendants on `cores` (threads made later inherit it): a
    `local[1]` that cannot spread its task's two halves, the JVM's and the Python worker's, over two cores."""
    for pid in [os.getpid(), *_descendants()]:
        with contextlib.suppress(OSError):  # (a process or thread may be gone)
            for tid in os.listdir(f"/proc/{pid}/task"):
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(int(tid), cores)


def run_on(master: str, names: list[str], paths: Paths, repeat: int, results: dict[str, Any],
           roots: tuple[int, ...] = (), conf: dict[str, str] | None = None, *, one_core: bool = False,
           warmup: int = 1, jit_rounds: int = 0) -> None:
    spark = session(master, **(conf or {}))
    label = master if master.startswith("local") else "cluster"
    if one_core:
        spark.range(1).collect()  # (PySpark's daemon started, so that it is pinned too)
        pin({min(os.sched_getaffinity(0))})
        label += " on one core"
    try:
        for name, (seconds, answer, cpu) in timed(spark, paths, names, repeat, roots, warmup, jit_rounds).items():
            results[f"{name} @ {label}"] = (seconds, answer)
            spent = ", ".join(f"{k} {v:.1f}" for k, v in sorted(cpu.items()) if v >= 0.05)
            print(f"{name:<24} {label:<28} {seconds:7.2f} s   CPU s: {spent}   answer {answer}", flush=True)
    finally:
        spark.stop()
        if one_core:
            pin(set(range(os.cpu_count() or 1)))


def scaling(paths: Paths, repeat: int, rounds: int, results: dict[str, Any], warmup: int) -> None:
    """The kfs counts on each master, round after round; each keeps its best time."""
    from spark_cluster import start_cluster

    names = ["kfs count", "kfs count, decode=raw", "kfs count, rows"]
    cluster = start_cluster(paths.root / "cluster", cores=2, memory="3g")
    try:
        for _ in range(rounds):
            for master in ("local[1]", "local[2]", cluster.master_url):
                found: dict[str, Any] = {}
                roots = () if master.startswith("local") else (cluster.worker.process.pid,)
                run_on(master, names, paths, repeat, found, roots, CLUSTER_CONF, warmup=warmup)
                for key, value in found.items():
                    if key not in results or value[0] < results[key][0]:
                        results[key] = value
    finally:
        cluster.stop()


def check_answers(results: dict[str, Any], records: int) -> None:
    """Every count and every sum agree (kfs also counts the registry's one `_schemas` record)."""
    counts = {k: v[1] for k, v in results.items() if " count" in k}
    sums = {k: v[1] for k, v in results.items() if " sum" in k}
    for key, answer in counts.items():
        want = {spark_data.TOPIC: records} | ({} if key.startswith("json") else {"_schemas": 1})
        if answer != want:
            raise SystemExit(f"{key}: {answer}, expected {want}")
    if len(set(sums.values())) != 1:
        raise SystemExit(f"the sums differ: {sums}")


RATIOS = [  # (label, the time over, the time under, target): each printed when both were measured
    ("kfs count vs spark.read.json (json s / kfs s), local[2]", "json count @ local[2]", "kfs count @ local[2]",
     ">= 1.0x"),
    ("  the same, decode=raw", "json count @ local[2]", "kfs count, decode=raw @ local[2]", ">= 1.0x"),
    ("kfs count vs parquet (kfs s / parquet s), local[2]", "kfs count @ local[2]", "parquet count @ local[2]",
     "<= 3x"),
    ("  the same, decode=raw", "kfs count, decode=raw @ local[2]", "parquet count @ local[2]", "<= 3x"),
    ("  the same, rows to the JVM (aggregatePushdown=false)", "kfs count, rows @ local[2]",
     "parquet count @ local[2]", "<= 3x"),
    ("kfs sum vs spark.read.json (json s / kfs s)", "json sum @ local[2]", "kfs sum @ local[2]", ">= 1.0x"),
    ("kfs sum vs parquet (kfs s / parquet s)", "kfs sum @ local[2]", "parquet sum @ local[2]", "<= 3x"),
    ("  the same, rows to the JVM (aggregatePushdown=false)", "kfs sum, rows @ local[2]", "parquet sum @ local[2]",
     "<= 3x"),
    ("local[2] vs local[1], kfs count (local[1] s / local[2] s)", "kfs count @ local[1]", "kfs count @ local[2]",
     ">= 1.7x"),
    ("  the same, decode=raw", "kfs count, decode=raw @ local[1]", "kfs count, decode=raw @ local[2]", ">= 1.7x"),
    ("  the same, rows to the JVM (aggregatePushdown=false)", "kfs count, rows @ local[1]",
     "kfs count, rows @ local[2]", ">= 1.7x"),
    ("  spark.read.json's count, local[2] vs local[1]", "json count @ local[1]", "json count @ local[2]",
     "none: a JVM task of one thread"),
    ("  spark.read.parquet's count, local[2] vs local[1]", "parquet count @ local[1]", "parquet count @ local[2]",
     "none: a JVM task of one thread"),
    ("local[2] vs local[1] pinned to one core", "kfs count @ local[1] on one core",
     "kfs count @ local[2]", "none: what two cores give"),
    ("cluster vs local[2], kfs count (cluster s / local[2] s)", "kfs count @ cluster", "kfs count @ local[2]",
     "<= 1.15x"),
    ("  the same, decode=raw", "kfs count, decode=raw @ cluster", "kfs count, decode=raw @ local[2]", "<= 1.15x"),
]


def ratios(results: dict[str, Any]) -> list[str]:
    t = {k: v[0] for k, v in results.items()}
    return [f"{label:<58} {t[over] / t[under]:5.2f}x   (target {target})"
            for label, over, under, target in RATIOS if over in t and under in t]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=5_600_000)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--segment-mib", type=int, default=128)
    p.add_argument("--repeat", type=int, default=2, help="timed runs after the warm-up")
    p.add_argument("--warmup", type=int, default=10,
                   help="untimed rounds of a session's queries before timing (a fresh JVM's JIT needs ~20 queries)")
    p.add_argument("--jit-rounds", type=int, default=30,
                   help="untimed rounds more of local[2]'s queries but the JSON scans, for "
                        "Spark's JIT to settle; the cluster's count runs as many queries as local[2] ran")
    p.add_argument("--keep", metavar="DIR", help="write the data into DIR (or reuse it) and keep it")
    p.add_argument("--no-cluster", action="store_true", help="skip the standalone cluster")
    p.add_argument("--scaling", type=int, metavar="ROUNDS",
                   help="only the kfs counts on local[1], local[2] and the cluster, in ROUNDS alternating "
                        "rounds, each master's best kept (a shared machine's load then weighs on all alike)")
    args = p.parse_args(argv)

    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="kfs-bench-spark-"))
    try:
        paths = Paths(root)
        if not os.path.isdir(paths.logdir):
            shutil.rmtree(root, ignore_errors=True)
            started = time.perf_counter()
            records = spark_data.write(str(root), args.records, args.partitions, args.segment_mib << 20)
            print(f"wrote {records} records in {time.perf_counter() - started:.1f} s", flush=True)
        records = sum(sum(1 for _ in f.open("rb")) for f in Path(paths.json).iterdir())
        if not os.path.isdir(paths.parquet) and not args.scaling:
            from kfs.spark.jobs import export

            spark = session("local[2]")
            started = time.perf_counter()
            try:
                export([paths.logdir], paths.parquet, spark=spark)
            finally:
                spark.stop()
            print(f"kfs spark export: {time.perf_counter() - started:.1f} s", flush=True)
        sizes = {name: sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())
                 for name, path in (("log", paths.logdir), ("JSON lines", paths.json), ("Parquet", paths.parquet))
                 if os.path.isdir(path)}
        print(f"{records} records ({args.partitions} partitions); "
              + ", ".join(f"{k} {v / 2**20:.0f} MiB" for k, v in sizes.items())
              + f"; cores {os.cpu_count()}", flush=True)

        results: dict[str, Any] = {}
        if args.scaling:
            scaling(paths, args.repeat, args.scaling, results, args.warmup)
            print("\n".join(ratios(results)))
            return 0
        run_on("local[2]", list(QUERIES), paths, args.repeat, results, warmup=args.warmup, jit_rounds=args.jit_rounds)
        # Spark's own sources on local[1] too: how a task of one thread scales on this machine.
        run_on("local[1]", ["kfs count", "kfs count, rows", "json count", "parquet count"], paths, args.repeat, results,
               warmup=args.warmup)
        run_on("local[1]", ["kfs count"], paths, args.repeat, results, one_core=True, warmup=args.warmup)
        if not args.no_cluster:
            from spark_cluster import start_cluster

            cluster = start_cluster(root / "cluster", cores=2, memory="3g")
            try:
                # The executor is a fresh JVM, the local masters' tasks ran in this process's JVM, warmed by
                # every query above (local[2] alone ran `--warmup` rounds of all of them and `--jit-rounds` of
                # the quick ones): the cluster's count runs as many warm-up queries, so that the two are timed
                # at the same JIT state.
                run_on(cluster.master_url, ["kfs count"], paths, args.repeat, results, (cluster.worker.process.pid,),
                       CLUSTER_CONF, warmup=args.warmup * len(QUERIES) + args.jit_rounds * sum(map(quick, QUERIES)))
            finally:
                cluster.stop()
        check_answers(results, records)
        print("\n".join(ratios(results)))
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
