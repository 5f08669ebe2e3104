"""The daemon's memory under wide reads: RSS after `grep -r` over many partitions and after reading
many distinct `offset/N.value` files, from /proc/PID/status (VmRSS now, VmHWM the peak).

    python -m benchmarks.bench_memory [--partitions 5000] [--values 100000] [--dir /tmp]

Builds a log dir in a temporary directory: `bench-0`, one segment with more records than --values
(tests/log_writers.py's generated batches), and --partitions small partitions (a ~32 KiB segment
each, hard links to one file), mounts it with `kfs.fuse.mount.mount` (a real daemon; the size cache
in a temporary XDG_CACHE_HOME), and measures. Every cache the daemon keeps is bounded
(kfs.storage.lru), so the figures should stay flat as the counts grow.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from log_writers import build_logdir, memory


def run(partitions: int, values: int, work: Path, report: Callable[[str], None] = print) -> dict[str, dict[str, int]]:
    """Mount, grep, read values; returns the memory figures at each step (KiB)."""
    from kfs.fuse.mount import mount, unmount

    os.environ["XDG_CACHE_HOME"] = str(work / "cache")
    logdir, records = build_logdir(work, partitions, values)
    mountpoint = work / "mnt"
    mountpoint.mkdir()
    pid = mount([str(logdir)], str(mountpoint), {"log": str(work / "daemon.log")})
    assert pid is not None
    figures: dict[str, dict[str, int]] = {}
    try:
        figures["mounted"] = memory(pid)
        report(f"mounted {partitions + 1} partitions: {figures['mounted']}")
        start = time.perf_counter()
        done = subprocess.run(["grep", "-r", "-c", "refund", str(mountpoint)], capture_output=True, timeout=3600)
        elapsed = time.perf_counter() - start
        figures["grep"] = memory(pid)
        report(f"grep -r over {partitions + 1} partitions ({len(done.stdout.splitlines())} files, "
               f"{elapsed:.1f} s): {figures['grep']}")
        start = time.perf_counter()
        total = 0
        for n in range(values):
            with open(mountpoint / "bench-0" / "offset" / f"{n}.value", "rb") as f:
                total += len(f.read())
        elapsed = time.perf_counter() - start
        figures["values"] = memory(pid)
        report(f"read {values} distinct offset/N.value of {records} records ({total} bytes, {elapsed:.1f} s): "
               f"{figures['values']}")
    finally:
        unmount(str(mountpoint))
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=5000)
    parser.add_argument("--values", type=int, default=100_000)
    parser.add_argument("--dir", default=None, help="where to build the log dir (default: a temporary directory)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=args.dir) as work:
        figures = run(args.partitions, args.values, Path(work))
    peak = max(f["VmHWM"] for f in figures.values())
    print(f"daemon peak RSS {peak / 1024:.1f} MiB, after grep {figures['grep']['VmRSS'] / 1024:.1f} MiB, "
          f"after values {figures['values']['VmRSS'] / 1024:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
