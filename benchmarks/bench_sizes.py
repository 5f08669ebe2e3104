"""What exact decoded sizes cost: the first stat of a never-seen partition, a second mount, and reads after.

    python -m benchmarks.bench_sizes [--records 1000000] [--big-mb 1024] [--per-batch 500] [--dir /tmp]

Builds log dirs with `tests/log_writers.py's write_log_dir` (v2 batches of 500 records, or
`--per-batch`: 1 is the worst case, what a producer with linger.ms=0 writes, from
kafka-python's builder, 128 MiB segments), then with real mounts (`size_scan=no`, a fresh size
cache) times:
  first stat      `os.stat(messages.jsonl)` on a fresh mount and an empty cache: every line counted
  second mount    the same stat on a new mount with the cache the first one filled
  head -n 1       once the size is known (one batch of work)
  tail -n 1       once the size is known (the seek map: one batch at the end)
and, without FUSE, the rate of counting lines (`count_jsonl`) against rendering them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from log_writers import write_log_dir

PARTITION = "bench-0"


@contextmanager
def mounted(logdir: Path, mountpoint: Path, cache: Path) -> Iterator[Path]:
    from kfs.fuse.mount import mount, unmount

    mountpoint.mkdir(exist_ok=True)
    mount([str(logdir)], str(mountpoint), {"log": f"{mountpoint}.log", "size_scan": "no",
                                          "size_cache": str(cache)})
    try:
        yield mountpoint
    finally:
        unmount(str(mountpoint))


def timed(fn: Callable[[], int]) -> tuple[float, int]:
    began = time.perf_counter()
    result = fn()
    return time.perf_counter() - began, result


def shell(command: str) -> bytes:
    return subprocess.run(command, shell=True, capture_output=True, check=True).stdout


def bench_mount(logdir: Path, work: Path, label: str, report: Callable[[str], None]) -> None:
    name = label.replace(" ", "-")
    cache = work / f"cache-{name}"
    raw = sum(p.stat().st_size for p in (logdir / PARTITION).glob("*.log"))
    with mounted(logdir, work / f"mnt-{name}", cache) as mnt:
        path = mnt / PARTITION / "messages.jsonl"
        first, size = timed(lambda: os.stat(path).st_size)
        head, _ = timed(lambda: len(shell(f"head -n 1 {path}")))
        tail, _ = timed(lambda: len(shell(f"tail -n 1 {path}")))
        plain = work / "plain.txt"  # the same commands on a small ordinary file: process start-up
        plain.write_bytes(b"x" * 300 + b"\n")
        baseline, _ = timed(lambda: len(shell(f"head -n 1 {plain}")))
    with mounted(logdir, work / f"mnt-{name}-2", cache) as mnt:
        second, size2 = timed(lambda: os.stat(mnt / PARTITION / "messages.jsonl").st_size)
    assert size == size2
    report(f"{label}: {raw / 1e6:.0f} MB of segments, {size / 1e6:.0f} MB of JSON lines")
    report(f"  first stat, fresh mount and cache  {first:8.3f} s  ({raw / 1e6 / first:.0f} MB of segments/s)")
    report(f"  first stat, second mount (cache)   {second:8.3f} s")
    report(f"  head -n 1 once sizes are known     {head * 1000:8.1f} ms  (of a small ordinary file: "
           f"{baseline * 1000:.1f} ms)")
    report(f"  tail -n 1 once sizes are known     {tail * 1000:8.1f} ms")


def bench_counting(logdir: Path, report: Callable[[str], None]) -> None:
    from kfs.storage import LogDirs
    from kfs.views.decoded import DecodedLog

    plog = LogDirs([str(logdir)]).partition(PARTITION)
    log = DecodedLog(plog)
    end = plog.log_end_offset()
    counted, total = timed(lambda: sum(b.length for b in log.counted(0, end)))
    rendered, total2 = timed(lambda: sum(len(chunk.data) for chunk in log.rendered(0, end)))
    assert total == total2
    report(f"counting the lines of {end} records: {counted:.2f} s; rendering them: {rendered:.2f} s "
           f"({rendered / counted:.1f}x)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--big-mb", type=int, default=1024, help="size of the never-seen partition (0: skip)")
    parser.add_argument("--per-batch", type=int, default=500, help="records per batch (1: the worst case)")
    parser.add_argument("--dir", default=None)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="kfs-bench-sizes-", dir=args.dir))
    try:
        small = work / "small"
        write_log_dir(str(small), args.records, 128 << 20, args.per_batch)
        bench_counting(small, print)
        bench_mount(small, work, f"{args.records} records", print)
        if args.big_mb:
            big = work / "big"
            records = args.big_mb * (1 << 20) // 147  # 147 bytes of segment per record
            write_log_dir(str(big), records, 128 << 20, args.per_batch)
            bench_mount(big, work, f"{args.big_mb} MB", print)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
