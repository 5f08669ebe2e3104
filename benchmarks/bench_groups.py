"""How long `kfs groups` takes on a large `__consumer_offsets`.

    python -m benchmarks.bench_groups [--size-mb 500] [--partitions 50] [--dir /tmp] [--logdir DIR] [--keep]

Builds (unless --logdir names one built before) a broker's `__consumer_offsets` of 50 partitions:
thousands of classic groups, each committing the offsets of its topics' partitions every few seconds
(one batch per commit, as the coordinator appends an OffsetCommit request), rebalances rewriting
group metadata, offset expirations (tombstones), some deleted groups, and a few transactional
commits. The older segments of each partition look compacted (only every few commits of a key
remain, offsets with gaps); the newest segment holds every commit since, as the log cleaner leaves
the active segment. Each segment has its `.index` / `.timeindex` entries every 4 KiB, as a broker's
LogSegment.append writes them. Then it times the real command line, as a user runs it:

    kfs groups LOGDIR --json              (the log end)
    kfs groups LOGDIR --json --at T       (T in the middle of the log's time span)
    kfs groups LOGDIR --group G --json

and, as a baseline in the same run, reading every record of the same partitions through
`PartitionLog.record_lists` (what any reader must pay to see each record once). Wall time depends on
how busy the machine is; CPU time (of the command and its worker processes) much less: on an idle
machine with N cores, `kfs groups` takes about its CPU time / N.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import time

import offsets_log as ol

START_MS = 1_735_689_600_000  # 2025-01-01T00:00:00Z
COMMIT_INTERVAL_MS = 5000


def build(logdir: str, size_mb: int, partitions: int, seed: int = 1) -> tuple[int, int, int]:
    """Write the log dir; returns (records, bytes, the last timestamp)."""
    rnd = random.Random(seed)
    writers = [ol.PartitionWriter(logdir, p, segment_bytes=8 << 20, index_interval=4096) for p in range(partitions)]
    topics = [f"topic-{i:03d}" for i in range(400)]
    n_groups = max(50, size_mb * 40)
    groups = []
    for g in range(n_groups):
        name = f"group-{g:06d}-{rnd.choice(['billing', 'audit', 'search', 'etl', 'mail'])}"
        subscribed = rnd.sample(topics, rnd.choice([1, 1, 2, 3]))
        owned = [(t, p) for t in subscribed for p in range(rnd.choice([1, 3, 6, 12, 24]))]
        keys = [ol.offset_commit_key(name, t, p) for t, p in owned]
        groups.append((name, java_partition(name, partitions), subscribed, owned, keys))
    target = size_mb << 20
    written = records = 0
    clock = START_MS
    offsets: dict[tuple[int, int], int] = {}
    generation: dict[int, int] = {}
    compacted_until = target * 2 // 3  # the first two thirds look compacted: most commits gone
    while written < target:
        clock += rnd.randint(1, 40)
        g = rnd.randrange(n_groups)
        name, p, subscribed, owned, keys = groups[g]
        writer = writers[p]
        compacted = written < compacted_until
        if compacted and rnd.random() < 0.8:
            writer.skip(len(owned))  # a commit the cleaner removed
            continue
        roll = rnd.random()
        batch: list[tuple[int, bytes | None, bytes | None]]
        if roll < 0.01 or g not in generation:
            generation[g] = generation.get(g, 0) + 1
            members = [ol.ClassicMember(f"consumer-{name}-{i}-{rnd.getrandbits(64):016x}", f"consumer-{i}",
                                        f"/10.0.{i}.{g % 250}", subscribed,
                                        {t: [q for (tt, q) in owned if tt == t and q % 3 == i] for t in subscribed})
                       for i in range(rnd.choice([0, 1, 2, 3]))]
            value = ol.group_metadata_value("consumer", generation[g], "range" if members else None,
                                            members[0].member_id if members else None, members, clock)
            written += writer_append(writer, [(clock, ol.group_metadata_key(name), value)])
            records += 1
            continue
        if roll < 0.012:  # offsets expired: tombstones for every partition of the group
            batch = [(clock, key, None) for key in keys]
        else:
            batch = []
            for (t, q), key in zip(owned, keys, strict=True):
                offset = offsets.get((g, hash((t, q)))) or rnd.randint(0, 10**9)
                offset += rnd.randint(0, 5000)
                offsets[(g, hash((t, q)))] = offset
                batch.append((clock, key, ol.offset_commit_value(offset, "", clock, generation[g] % 50)))
        if roll > 0.995:  # a transactional producer's TxnOffsetCommit, then its marker
            pid = 10_000 + g
            written += writer_append(writer, batch, producer_id=pid, producer_epoch=0, transactional=True)
            marker = [(clock + 1, *ol.end_txn_marker(rnd.random() < 0.9))]
            written += writer_append(writer, marker, producer_id=pid, producer_epoch=0,
                                     transactional=True, control=True)
            records += len(batch) + 1
            continue
        written += writer_append(writer, batch)
        records += len(batch)
    for writer in writers:
        writer.close()
    return records, written, clock


def writer_append(writer: ol.PartitionWriter, batch: list, **flags: object) -> int:
    """Bytes the batch took."""
    before = writer.bytes_written
    writer.append(batch, **flags)
    return writer.bytes_written - before


def java_partition(group: str, partitions: int) -> int:
    """`GroupCoordinator.partitionFor`: abs(String.hashCode) % partitions (Utils.abs: MIN_VALUE -> 0)."""
    data = group.encode("utf-16-be")
    h = 0
    for (unit,) in struct.iter_unpack(">H", data):
        h = (31 * h + unit) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def kfs_command() -> list[str]:
    found = shutil.which("kfs")
    return [found] if found else [sys.executable, "-m", "kfs.cli.main"]


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_command(args: list[str]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (the command and its worker processes) and stdout lines of one run."""
    started, cpu = time.perf_counter(), children_cpu()
    done = subprocess.run([*kfs_command(), *args], capture_output=True, check=True)
    return time.perf_counter() - started, children_cpu() - cpu, done.stdout.count(b"\n")


def read_every_record(logdir: str) -> tuple[float, float, int]:
    from kfs.groups.replay import offsets_partitions
    from kfs.storage import LogDirs

    started, cpu = time.perf_counter(), time.process_time()
    count = 0
    for plog in offsets_partitions(LogDirs([logdir])):
        for records in plog.record_lists(plog.log_start_offset(), control="show"):
            count += len(records)
    return time.perf_counter() - started, time.process_time() - cpu, count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_groups", description=__doc__.split("\n")[0])
    parser.add_argument("--size-mb", type=int, default=500)
    parser.add_argument("--partitions", type=int, default=50)
    parser.add_argument("--dir", default=None, help="where to build the log dir (default: the temp dir)")
    parser.add_argument("--logdir", default=None, help="time this log dir (built by an earlier --keep run)")
    parser.add_argument("--keep", action="store_true", help="keep the log dir built")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each command (the best is shown)")
    args = parser.parse_args(argv)
    logdir = args.logdir
    built = None
    if logdir is None:
        built = logdir = tempfile.mkdtemp(prefix="kfs-bench-groups-", dir=args.dir)
        started = time.perf_counter()
        records, size, _last = build(logdir, args.size_mb, args.partitions)
        print(f"built {logdir}: {args.partitions} partitions, {size / 2**20:.0f} MiB, {records:,} records "
              f"in {time.perf_counter() - started:.1f} s")
    try:
        run(logdir, args.repeat)
    finally:
        if built and not args.keep:
            shutil.rmtree(built, ignore_errors=True)
    return 0


def run(logdir: str, repeat: int) -> None:
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(logdir) for f in fs)
    print(f"kfs groups benchmark: {size / 2**20:.0f} MiB in {logdir}, Python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    seconds, cpu, count = min(read_every_record(logdir) for _ in range(repeat))
    print(f"  {'baseline: every record read once (1 process)':<48} {seconds:7.2f} s wall {cpu:7.2f} s CPU  "
          f"{count:,} records ({count / cpu / 1e6:.2f} M/s of CPU)")
    lines = subprocess.run([*kfs_command(), "groups", logdir, "--json"], capture_output=True, check=True).stdout
    stamps = sorted(int(x.split(b'"timestamp": ')[1].split(b",")[0].rstrip(b"}\n"))
                    for x in lines.splitlines() if b'"topic"' in x)
    middle = stamps[len(stamps) // 2] if stamps else 0
    group = lines.splitlines()[len(lines.splitlines()) // 2].split(b'"')[3].decode() if lines else "none"
    runs: tuple[tuple[str, list[str]], ...] = (
        ("kfs groups --json (log end)", []), (f"kfs groups --json --at {middle}", ["--at", str(middle)]),
            (f"kfs groups --group {group} --json", ["--group", group]))
    for label, extra in runs:
        seconds, cpu, out = min(timed_command(["groups", logdir, "--json", *extra]) for _ in range(repeat))
        print(f"  {label:<48} {seconds:7.2f} s wall {cpu:7.2f} s CPU  {out:,} lines")


if __name__ == "__main__":
    sys.exit(main())
