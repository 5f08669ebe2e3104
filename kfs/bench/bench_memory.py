"""The daemon's memory under wide reads: RSS after `grep -r` over many partitions and after reading
many distinct `offset/N.value` files, from /proc/PID/status (VmRSS now, VmHWM the peak).

    python -m kfs.bench.bench_memory [--partitions 5000] [--values 100000] [--dir /tmp]

Builds a log dir in a temporary directory: `bench-0`, one segment with more records than --values
(kfs.bench.bench_core's generated batches), and --partitions small partitions (a ~32 KiB segment
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

from kfs.bench.bench_core import build_chunk, write_segment


def memory(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of a process, in KiB."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0])
    return found


def build_logdir(root: Path, partitions: int, values: int) -> tuple[Path, int]:
    """The log dir; returns it and the number of records in bench-0."""
    logdir = root / "logdir"
    logdir.mkdir()
    (logdir / "meta.properties").write_text("version=1\nnode.id=0\ncluster.id=bench\n")
    size_mb = 1
    while True:  # bench_core's 1 MiB chunks hold a few thousand records each
        _, _, records = write_segment(str(logdir), size_mb, ["none"])
        if records > values:
            break
        size_mb = max(size_mb + 1, size_mb * values // max(records, 1) + 1)
    chunk, _, _ = build_chunk(["none"], target_bytes=32 * 1024)
    small = root / "small.log"
    small.write_bytes(chunk)
    for i in range(partitions):
        directory = logdir / f"wide-{i}"
        directory.mkdir()
        os.link(small, directory / f"{0:020d}.log")  # (kfs follows no symbolic link to a segment)
    return logdir, records


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
