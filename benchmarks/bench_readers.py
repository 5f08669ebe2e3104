"""Two readers through one daemon, against one reader and against two daemons: where a mount's
parallelism goes.

    python -m benchmarks.bench_readers [--rounds 5] [--work DIR] [-o max_threads=2] [-o native_read=no]

On the mixed set of `benchmarks.bench_kafka` (written by Kafka's classes on first use, kept in
`--work`), each round mounts afresh and stats the files first (their sizes counted: only the reads
are timed), then times `cat` of `messages.jsonl`:
- one reader of one partition;
- two readers of two partitions through one mount (one daemon, one GIL);
- two readers through two mounts (two daemons), which no GIL joins.
It prints the best and the median of the rounds, the throughput ratios, and the cores the daemons and
readers kept busy (their CPU seconds over the wall time): one reader's figure, c1, bounds what two can
get on this machine's cores, min(cores, cores / c1) times one reader's throughput (issue 29 item 7's
target: two readers through one mount at >= 90% of it, with one reader's CPU per byte not grown). On
a shared machine every figure moves with the others' load: each round says how busy the machine's
cores were with other work while it ran (from /proc/stat, less the bench's own CPU seconds).
`-o native_read=no` measures the mount with every decoded READ in Python (kfs.fuse.native_read off).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
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


def machine_busy() -> float:
    """CPU seconds the machine's cores have spent busy since boot (/proc/stat: all but idle and iowait)."""
    fields = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


LAST_OTHERS = [0.0]  # cores kept busy by other work during the last `readers` (machine_busy less the bench's)


def readers(logdir: Path, work: Path, partitions: int, daemons: int, options: dict[str, str]) -> tuple[float, float]:
    """(seconds, cores kept busy) for `partitions` readers of `messages.jsonl` at once, spread over
    `daemons` fresh mounts whose sizes are counted before the clock starts; LAST_OTHERS: the cores
    other work kept busy meanwhile."""
    with sized_mounts(logdir, work, daemons, options) as mounts:
        files = [mounts[i % daemons][0] / f"bench.mixed-{i}" / "messages.jsonl" for i in range(partitions)]
        # Every partition of every mount sized, not only those read: the mount's background size scan
        # would otherwise count the other one during a single reader's read (two preads of 4 MiB and
        # a 21-byte probe per map entry: 9,208 of them in strace), which took cores from that reader
        # and put the scan's CPU into c1.
        for mountpoint, _ in mounts:
            for partition in sorted(mountpoint.iterdir()):
                os.stat(partition / "messages.jsonl")
        daemons_cpu = sum(_process_cpu(pid) for _, pid in mounts)
        busy = machine_busy()
        seconds = together([["cat", str(f)] for f in files])
        own = sum(_process_cpu(pid) for _, pid in mounts) - daemons_cpu + LAST_CPU[0]
        LAST_OTHERS[0] = max(0.0, machine_busy() - busy - own) / seconds
        return seconds, own / seconds


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
            print(f"  round {r + 1}: {name:28} {runs[name][-1][0]:7.3f} s   cores busy {runs[name][-1][1]:4.2f}   "
                  f"other work {LAST_OTHERS[0]:4.2f} cores   load {os.getloadavg()[0]:.1f}", flush=True)
    mib = sum(p.stat().st_size for p in (logdir / "bench.mixed-0").glob("*.log")) / 2**20
    cores = os.cpu_count() or 1
    for title in ("best", "median"):
        # best: the fastest round, with its cores; median: of the seconds, of the cores, of the CPU per MiB
        found = {name: min(runs[name]) if title == "best" else
                 (statistics.median(s for s, _ in runs[name]), statistics.median(c for _, c in runs[name]))
                 for name in CASES}
        print(f"\n{title} of {args.rounds} rounds (sizes counted before the clock starts):")
        for name, (seconds, busy) in found.items():
            cpu = [s * c for s, c in runs[name]]
            per_mib = 1000 * (seconds * busy if title == "best" else statistics.median(cpu)) / (CASES[name][0] * mib)
            print(f"  {name:28} {seconds:7.3f} s   cores busy {busy:4.2f}   CPU {per_mib:.2f} ms per MiB of log")
        one, c1 = found["one reader"]
        bound = min(cores, cores / c1)
        print(f"throughput against one reader (c1 = {c1:.2f} cores; the most {cores} cores allow: {bound:.2f}x):")
        for name in ("two readers, one mount", "two readers, two mounts"):
            ratio = 2 * one / found[name][0]
            print(f"  {name:28} {ratio:5.2f}x   {ratio / bound:4.0%} of what the cores allow")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
