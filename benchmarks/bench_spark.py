"""How fast the Spark source reads, and how it scales: `local[1]` vs `local[2]` vs one process.

    python -m benchmarks.bench_spark [OPTIONS]      issue 26's comparison (benchmarks/spark_compare.py):
                                                    kfs vs JSON lines vs Parquet, local[1|2], a cluster
    python -m benchmarks.bench_spark --one-partition [--records 1500000] [--dir /tmp/kfs-bench-spark]

With `--one-partition`, the scaling of one big partition:

Builds (once, then reuses) a log dir with one big partition, the case splitting at index entries
exists for: a handful of distinct v2 batches written by kafka-python's builder, replicated with
their base offsets patched (a v2 batch's CRC does not cover the base offset), in segments of
`--segment-mib` with `.index`/`.timeindex` entries every 4 KiB as `LogSegment.append` writes them.

Then times, on the same data:
- one process: `plog.records` from the log start to the end (the decoder alone);
- one process: the tasks' work without Spark (`read_split`: decoding plus Arrow batches, their columns
  built in C by kfs.spark.arrow_columns, or from Records with `--record-path`);
- Spark `local[1]` and `local[2]`: `format("kfs").load(dir)` written to Spark's `noop` sink, so the
  figure is reading, not writing. Best of `--repeat` runs after a warm-up (Python workers started),
  over `--rounds` sessions per master, alternating.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from log_writers import write_log_dir


def _rate(records: int, seconds: float) -> str:
    return f"{records / seconds / 1e6:6.2f} M records/s  ({seconds:6.2f} s)"


def bench_single_process(path: str) -> tuple[int, float]:
    from kfs.storage import LogDirs

    dirs = LogDirs([path])
    started = time.perf_counter()
    count = 0
    for name in dirs.partition_names():
        plog = dirs.partition(name)
        for _ in plog.records(plog.log_start_offset()):
            count += 1
    return count, time.perf_counter() - started


def bench_tasks_without_spark(path: str) -> tuple[int, float]:
    from pyspark.sql.pandas.types import to_arrow_schema

    from kfs.spark.options import parse_options
    from kfs.spark.plan import plan_splits
    from kfs.spark.source import kafka_schema, read_split

    opts = parse_options({"path": path})
    schema = to_arrow_schema(kafka_schema(False), timezone="UTC")
    started = time.perf_counter()
    count = sum(b.num_rows for split in plan_splits(opts) for b in read_split(split, opts, schema))
    return count, time.perf_counter() - started


def _cpu_seconds_by_process(roots: tuple[int, ...] = ()) -> dict[str, float]:
    """CPU seconds of this process's descendants (the JVM, its Python workers), and of `roots`'
    (a Spark Worker's: its executors), by name; Linux only. A process's own time and its reaped
    children's (PySpark's daemon forks a worker per task slot; one that exited counts there)."""
    stats: dict[int, tuple[int, str, int]] = {}
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                text = f.read()
        except OSError:
            continue
        name = text[text.index("(") + 1:text.rindex(")")]
        fields = text[text.rindex(")") + 2:].split()
        stats[pid] = (int(fields[1]), name, sum(int(x) for x in fields[11:15]))  # utime stime cutime cstime
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    totals: dict[str, float] = {}
    # Roots last, so popped first: a Worker this process started is counted once, as the Worker's.
    todo = [*((p, "") for p in children.get(os.getpid(), [])), *((r, "worker's ") for r in roots if r in stats)]
    seen: set[int] = set()
    while todo:
        pid, where = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        _, name, ticks = stats[pid]
        key = where + ("jvm" if name == "java" else "python workers" if name.startswith("python") else name)
        totals[key] = totals.get(key, 0.0) + ticks / os.sysconf("SC_CLK_TCK")
        todo.extend((child, where) for child in children.get(pid, []))
    return totals


def bench_spark(path: str, master: str, repeat: int, options: dict[str, str]
                ) -> tuple[int, float, int, dict[str, float]]:
    """(records, best seconds, tasks, CPU seconds of the JVM and the Python workers in that run)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    import kfs.spark

    spark = (SparkSession.builder.master(master).appName(f"kfs-bench {master}")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.executor.heartbeatInterval", "600s").config("spark.network.timeout", "1200s")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        kfs.spark.register(spark)
        df = spark.read.format("kfs").options(**options).load(path)
        tasks = df.rdd.getNumPartitions()
        count = df.count()  # warm-up: Python workers started, pages cached
        best, cpu = float("inf"), {}
        for _ in range(repeat):
            before = _cpu_seconds_by_process()
            started = time.perf_counter()
            df.write.format("noop").mode("overwrite").save()
            seconds = time.perf_counter() - started
            if seconds < best:
                after = _cpu_seconds_by_process()
                best, cpu = seconds, {k: v - before.get(k, 0.0) for k, v in after.items()}
        return count, best, tasks, cpu
    finally:
        spark.stop()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--one-partition" not in argv:
        from benchmarks import spark_compare

        return spark_compare.main(argv)
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--one-partition", action="store_true", help="the scaling of one big partition")
    p.add_argument("--records", type=int, default=1_500_000)
    p.add_argument("--dir", default="/tmp/kfs-bench-spark")
    p.add_argument("--segment-mib", type=int, default=128)
    p.add_argument("--repeat", type=int, default=2, help="timed runs per session")
    p.add_argument("--rounds", type=int, default=2, help="sessions per master, alternating")
    p.add_argument("--max-split-mib", type=int, default=None, help="the maxSplitBytes option, in MiB")
    p.add_argument("--skip-spark", action="store_true")
    p.add_argument("--pure-python", action="store_true",
                   help="decode without kfs's compiled loops (sets KFS_PURE_PYTHON=1 for every process)")
    p.add_argument("--record-path", action="store_true",
                   help="build the Arrow batches from Record objects, not in C (sets KFS_SPARK_RECORD_PATH=1)")
    args = p.parse_args(argv)
    if args.record_path:
        os.environ["KFS_SPARK_RECORD_PATH"] = "1"  # before kfs.spark is imported; Spark's workers inherit it
    if args.pure_python:
        os.environ["KFS_PURE_PYTHON"] = "1"  # before kfs.record is imported; Spark's workers inherit it

    path = os.path.join(args.dir, f"{args.records}-{args.segment_mib}")
    if not os.path.isdir(path):
        started = time.perf_counter()
        write_log_dir(path, args.records, args.segment_mib << 20)
        print(f"wrote {path} in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    size = sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(path) for f in files)
    from kfs._native import record as native_record
    from kfs.spark import arrow_columns

    decoder = "compiled" if native_record.decode_v2_records is not None else "pure Python"
    columns = "built in C" if arrow_columns.AVAILABLE else "from Records"
    print(f"log dir {path}: {size / 2**20:.0f} MiB, cores {os.cpu_count()}, decoder {decoder}, "
          f"Arrow columns {columns}")

    count, seconds = bench_single_process(path)
    single = count / seconds
    print(f"one process, plog.records       {_rate(count, seconds)}")
    count, seconds = bench_tasks_without_spark(path)
    print(f"one process, read_split (Arrow) {_rate(count, seconds)}")
    if args.skip_spark:
        return 0
    # Masters alternate, round after round, and each keeps its best: a machine shared with other
    # work then slows both alike rather than whichever ran second.
    options = {"maxSplitBytes": str(args.max_split_mib << 20)} if args.max_split_mib else {}
    best: dict[str, tuple[int, float, int, dict[str, float]]] = {}
    for _ in range(args.rounds):
        for master in ("local[1]", "local[2]"):
            result = bench_spark(path, master, args.repeat, options)
            if master not in best or result[1] < best[master][1]:
                best[master] = result
    rates = {}
    for master, (count, seconds, tasks, cpu) in best.items():
        rates[master] = count / seconds
        spent = ", ".join(f"{name} {s:.1f}" for name, s in sorted(cpu.items()) if s >= 0.05)
        print(f"spark {master:<9} ({tasks} tasks)   {_rate(count, seconds)}  CPU s: {spent}")
    print(f"local[2] / local[1]: {rates['local[2]'] / rates['local[1]']:.2f}x; "
          f"local[2] / one process (plog.records): {rates['local[2]'] / single:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
