"""How long `kfs replicas` takes on three copies of a large partition.

    python -m benchmarks.bench_replicas [--size-mb 1024] [--per-batch 100] [--dir /tmp] [--keep]

Writes one partition `bench-0` of about SIZE MB with tests/log_writers.py's `write_log_dir` (v2 batches
of PER_BATCH records of ~150 bytes: 100 makes ~15 KiB batches, near a producer's default batch.size)
and copies it into three brokers' log dirs (node.id 1, 2, 3), then stamps partition leader epochs
in place (outside the CRC, as a leader does on append):

- broker 1, the leader: epoch 0, then epoch 1 for the last 10% of batches;
- broker 2, a follower behind: the same, its last segment cut in half;
- broker 3, the old leader: epoch 0 throughout (it went on writing at epoch 0 after losing the
  leadership), its high watermark at its log end: Kafka's rule truncates it at epoch 1's start, and
  every record from there is a committed record lost.

Then it times `kfs replicas DIR1 DIR2 DIR3 bench-0 --json` as a user runs it: first with the copies'
pages dropped from the page cache (posix_fadvise DONTNEED on each file, this benchmark's own files
only), then warm. It reports wall and CPU time, bytes of segment files, and batches.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from log_writers import write_log_dir

PARTITION = "bench-0"


def stamp_epochs(partition: Path, epoch_of: dict[int, int], default: int) -> tuple[int, int]:
    """Set each batch's partition leader epoch (bytes 12-15): `epoch_of[batch number]` or `default`.
    Returns (batches, the base offset of the first batch given another epoch, or -1)."""
    n = 0
    switch = -1
    for log in sorted(partition.glob("*.log")):
        with open(log, "r+b") as f:
            data = bytearray(f.read())
            position = 0
            while position + 12 <= len(data):
                base, length = struct.unpack_from(">qi", data, position)
                epoch = epoch_of.get(n, default)
                if epoch != default and switch < 0:
                    switch = base
                struct.pack_into(">i", data, position + 12, epoch)
                position += 12 + length
                n += 1
            f.seek(0)
            f.write(data)
    return n, switch


def broker_dir(root: Path, broker: int, source: Path, hw: int | None) -> Path:
    logdir = root / f"broker-{broker}"
    shutil.copytree(source, logdir / PARTITION)
    (logdir / "meta.properties").write_text(f"version=1\nnode.id={broker}\ncluster.id=bench\n")
    if hw is not None:
        (logdir / "replication-offset-checkpoint").write_text(f"0\n1\nbench 0 {hw}\n")
    (logdir / "cleaner-offset-checkpoint").write_text("0\n0\n")
    return logdir


def log_end(partition: Path) -> int:
    """The next offset after the last batch (a header walk of the last segment)."""
    last = sorted(partition.glob("*.log"))[-1]
    data = last.read_bytes()
    position, end = 0, int(last.name[:20])
    while position + 61 <= len(data):
        base, length = struct.unpack_from(">qi", data, position)
        end = base + struct.unpack_from(">i", data, position + 23)[0] + 1
        position += 12 + length
    return end


def cut_last_segment(partition: Path) -> None:
    """Keep the first half of the last segment's batches (a follower behind); its indexes go (kfs scans)."""
    last = sorted(partition.glob("*.log"))[-1]
    data = last.read_bytes()
    position = 0
    while position + 12 <= len(data) and position < len(data) // 2:
        position += 12 + struct.unpack_from(">i", data, position + 8)[0]
    last.write_bytes(data[:position])
    for suffix in (".index", ".timeindex"):
        last.with_suffix(suffix).unlink(missing_ok=True)


def drop_pages(root: Path) -> None:
    for path in root.rglob("*"):
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def timed(args: list[str]) -> tuple[float, float, subprocess.CompletedProcess]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(args, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--per-batch", type=int, default=100)
    parser.add_argument("--dir", default="/tmp")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="kfs-bench-replicas-", dir=args.dir))
    try:
        start = time.perf_counter()
        source = root / "source"
        source.mkdir()
        records = args.size_mb * (1 << 20) // 150
        write_log_dir(str(source), records, 512 << 20, args.per_batch)
        partition = source / PARTITION
        batches, _ = stamp_epochs(partition, {}, 0)
        leader_epochs = {n: 1 for n in range(batches - batches // 10, batches)}
        one = broker_dir(root, 1, partition, None)
        _, switch = stamp_epochs(one / PARTITION, leader_epochs, 0)
        end = log_end(one / PARTITION)
        (one / "replication-offset-checkpoint").write_text(f"0\n1\nbench 0 {end}\n")
        two = broker_dir(root, 2, one / PARTITION, None)
        cut_last_segment(two / PARTITION)
        (two / "replication-offset-checkpoint").write_text(f"0\n1\nbench 0 {log_end(two / PARTITION)}\n")
        three = broker_dir(root, 3, partition, end)
        shutil.rmtree(source)
        size = sum(p.stat().st_size for p in root.rglob("*.log"))
        print(f"built in {time.perf_counter() - start:.0f} s: 3 copies, {size / 2**30:.2f} GiB of segments, "
              f"{batches} batches of {args.per_batch} records a copy, epoch 1 from offset {switch}", flush=True)
        command = [sys.executable, "-m", "kfs.cli.main", "replicas", str(one), str(two), str(three), PARTITION,
                   "--json"]
        drop_pages(root)
        for label in ("cold (pages dropped)", "warm", "warm"):
            wall, cpu, result = timed(command)
            if result.returncode not in (0, 4):
                sys.exit(f"kfs replicas failed: {result.stderr.decode()}")
            found = json.loads(result.stdout)
            lost = {r["broker"]: (r["truncate_to"], r["lost_committed_records"]) for r in found["replicas"]}
            print(f"kfs replicas, {label}: {wall:.2f} s wall, {cpu:.2f} s CPU; exit {result.returncode}; "
                  f"(truncate_to, lost) by broker {lost}", flush=True)
    finally:
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
