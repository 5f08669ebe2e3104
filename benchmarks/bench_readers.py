"""Two readers through one daemon, against one reader and against two daemons: where a mount's
parallelism goes.

    python -m benchmarks.bench_readers [--rounds 5] [--work DIR] [-o max_threads=2]

On the mixed set of `benchmarks.bench_kafka` (written by Kafka's classes on first use, kept in
`--work`), each round mounts afresh and stats the files first (their sizes counted: only the reads
are timed), then times `cat` of `messages.jsonl`:
- one reader of one partition;
- two readers of two partitions through one mount (one daemon, one GIL);
- two readers through two mounts (two daemons), which no GIL joins.
It prints the best of the rounds, the throughput ratios, and the cores the daemons and readers kept
busy (their CPU seconds over the wall time): one reader's figure bounds what two can get on this
machine's cores.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from benchmarks.bench_kafka import LAST_CPU, _process_cpu, classpath, generate, together


@contextlib.contextmanager
def sized_mounts(logdir: Path, work: Path, count: int, options: dict[str, str]) -> Iterator[list[tuple[Path, int]]]:
    """`count` fresh kfs mounts of `logdir` (mount point, daemon pid), each with an empty size cache."""
    from kfs.fuse.mount import mount, unmount

    made: list[tuple[Path, Path, int]] = []
    saved = os.environ.get("XDG_CACHE_HOME")
    try:
        for _ in range(count):
            cache = Path(tempfile.mkdtemp(prefix="cache-", dir=work))
            mountpoint = Path(tempfile.mkdtemp(prefix="mnt-", dir=work))
            os.environ["XDG_CACHE_HOME"] = str(cache)
            pid = mount([str(logdir)], str(mountpoint), {"log": str(work / "kfs-readers.log"), **options}) or 0
            made.append((mountpoint, cache, pid))
        yield [(mountpoint, pid) for mountpoint, _, pid in made]
    finally:
        if saved is None:
            os.environ.pop("XDG_CACHE_HOME", None)
        else:
            os.environ["XDG_CACHE_HOME"] = saved
        for mountpoint, cache, _ in made:
            unmount(str(mountpoint))
            shutil.rmtree(cache, ignore_errors=True)
            with contextlib.suppress(OSError):
                mountpoint.rmdir()


def readers(logdir: Path, work: Path, partitions: int, daemons: int, options: dict[str, str]) -> tuple[float, float]:
    """(seconds, cores kept busy) for `partitions` readers of `messages.jsonl` at once, spread over
    `daemons` fresh mounts whose sizes are counted before the clock starts."""
    with sized_mounts(logdir, work, daemons, options) as mounts:
        files = [mounts[i % daemons][0] / f"bench.mixed-{i}" / "messages.jsonl" for i in range(partitions)]
        for f in files:
            os.stat(f)
        daemons_cpu = sum(_process_cpu(pid) for _, pid in mounts)
        seconds = together([["cat", str(f)] for f in files])
        return seconds, (sum(_process_cpu(pid) for _, pid in mounts) - daemons_cpu + LAST_CPU[0]) / seconds


CASES = {"one reader": (1, 1), "two readers, one mount": (2, 1), "two readers, two mounts": (2, 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="rounds; each figure is the best of them")
    parser.add_argument("--records", type=int, default=1_300_000, help="records per partition")
    parser.add_argument("--work", help="directory for the data and mount points, kept and reused (default: temp)")
    parser.add_argument("-o", dest="options", default="", help="mount options for every mount (e.g. max_threads=2)")
    args = parser.parse_args(argv)
    options = dict(o.split("=", 1) if "=" in o else (o, "") for o in args.options.split(",") if o)
    work = Path(args.work or tempfile.mkdtemp(prefix="kfs-bench-readers-"))
    work.mkdir(parents=True, exist_ok=True)
    logdir = generate(work, classpath(), args.records, lambda line: print(line, flush=True))["mixed"]
    print(f"load: {os.getloadavg()[0]:.1f} (1-minute load average; {os.cpu_count()} cores)", flush=True)
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in CASES}
    for r in range(args.rounds):
        for name, (partitions, daemons) in CASES.items():
            runs[name].append(readers(logdir, work, partitions, daemons, options))
        print(f"round {r + 1}/{args.rounds} done", flush=True)
    best = {name: min(found) for name, found in runs.items()}  # (the fastest round, with its cores)
    print(f"\nbest of {args.rounds} rounds (sizes counted before the clock starts):")
    for name, (seconds, cores) in best.items():
        print(f"  {name:28} {seconds:7.3f} s   cores busy {cores:4.2f}")
    one = best["one reader"][0]
    print("throughput against one reader:")
    for name in ("two readers, one mount", "two readers, two mounts"):
        print(f"  {name:28} {2 * one / best[name][0]:5.2f}x")
    print(f"  the most {os.cpu_count()} cores allow    {(os.cpu_count() or 1) / best['one reader'][1]:5.2f}x "
          "(the cores over what one reader keeps busy)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
