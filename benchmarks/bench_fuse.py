"""Read-path benchmark of the FUSE layer; every ratio is measured in the same run.

    python -m benchmarks.bench_fuse [--raw-mb 300] [--decoded-mb 20] [--repeat 5] [--bindings]

Builds a Kafka log dir (v2 batches from kafka-python's builder, 1 MiB batches, 100 MiB
segments, sparse indexes), then times with real processes:
  raw       `cat` of the segment files directly, through `bindfs -r`, and of `offset/<start>` through
            kfs; cold (page cache dropped, when root) and warm; kfs/bindfs throughput ratio.
  value     `cat offset/N.value` of a record never read before (20-record batches, several segments)
            against `cat` of a small file never read before through bindfs and directly.
  decoded   `grep -c` over `messages.jsonl`: records/s and MB/s of decoded output.
  bindings  (--bindings) a minimal read-only passthrough of one file on fusepy (libfuse2),
            mfusepy on libfuse2 and libfuse3, and mfusepy/libfuse3 with `read_buf` replies.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import random
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

BATCH_RECORDS = 1000
SEGMENT_BYTES = 100 << 20


# ---- a log dir to read -----------------------------------------------------------------------------

def _batch(base_offset: int, records: int, value_size: int, timestamp: int) -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    pad = "x" * max(0, value_size - 60)
    for i in range(records):
        value = json.dumps({"n": base_offset + i, "event": "click", "pad": pad}).encode()
        builder.append(i, timestamp=timestamp + i, key=f"user-{(base_offset + i) % 977}".encode(), value=value,
                       headers=[("trace-id", b"0123456789abcdef")])
    return bytes(builder.build())


def write_partition(directory: Path, total_bytes: int, value_size: int = 1000, batch_records: int = BATCH_RECORDS,
                    segment_bytes: int = SEGMENT_BYTES) -> int:
    """Segments of copies of one batch with rewritten base offsets (outside the CRC); returns records."""
    directory.mkdir(parents=True, exist_ok=True)
    template = bytearray(_batch(0, batch_records, value_size, 1_700_000_000_000))
    offset, written, segment_base = 0, 0, 0
    log: BinaryIO | None = None
    index: BinaryIO | None = None
    timeindex: BinaryIO | None = None
    position = 0
    while written < total_bytes:
        if log is None or position + len(template) > segment_bytes:
            for f in (log, index, timeindex):
                if f:
                    f.close()
            segment_base, position = offset, 0
            stem = directory / f"{segment_base:020d}"
            log, index, timeindex = (open(f"{stem}{s}", "wb") for s in (".log", ".index", ".timeindex"))  # noqa: SIM115
        assert log is not None and index is not None and timeindex is not None
        struct.pack_into(">q", template, 0, offset)
        log.write(template)
        index.write(struct.pack(">ii", offset + batch_records - 1 - segment_base, position))
        timeindex.write(struct.pack(">qi", 1_700_000_000_000 + batch_records - 1, offset + batch_records - 1
                                    - segment_base))
        position += len(template)
        written += len(template)
        offset += batch_records
    for f in (log, index, timeindex):
        if f:
            f.close()
    return offset


# ---- timing ----------------------------------------------------------------------------------------

def can_drop_caches() -> bool:
    return os.geteuid() == 0 and os.access("/proc/sys/vm/drop_caches", os.W_OK)


def drop_caches() -> None:
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def timed(command: list[str], cold: bool = False) -> float:
    """Wall time of `command`; output into a pipe, not /dev/null (grep stops at the first match there)."""
    if cold:
        drop_caches()
    start = time.perf_counter()
    with subprocess.Popen(command, stdout=subprocess.PIPE) as process:
        assert process.stdout is not None
        while process.stdout.read(1 << 20):
            pass
    elapsed = time.perf_counter() - start
    if process.returncode not in (0, 1):
        raise subprocess.CalledProcessError(process.returncode, command)
    return elapsed


def median_time(command: list[str], repeat: int, cold: bool = False) -> float:
    timed(command)  # warm-up (and, for warm runs, fills the page cache)
    return statistics.median(timed(command, cold) for _ in range(repeat))


def interleaved(commands: list[list[str]], repeat: int, cold: bool) -> list[float]:
    """Median times of `commands`, run in turn within each repetition, so that drift on a busy
    machine hits all of them alike."""
    for command in commands:
        timed(command)
    samples: list[list[float]] = [[] for _ in commands]
    for _ in range(repeat):
        for i, command in enumerate(commands):
            samples[i].append(timed(command, cold))
    return [statistics.median(s) for s in samples]


@contextlib.contextmanager
def bindfs(source: Path, mountpoint: Path) -> Iterator[Path]:
    mountpoint.mkdir(exist_ok=True)
    subprocess.run(["bindfs", "-r", str(source), str(mountpoint)], check=True)
    try:
        yield mountpoint
    finally:
        subprocess.run(["fusermount", "-u", str(mountpoint)], check=False)


@contextlib.contextmanager
def kfs_mounted(logdir: Path, mountpoint: Path, **options: str) -> Iterator[Path]:
    from kfs.fuse.mount import mount, unmount

    mountpoint.mkdir(exist_ok=True)
    mount([str(logdir)], str(mountpoint), {"log": str(mountpoint) + ".log", **options})
    try:
        yield mountpoint
    finally:
        unmount(str(mountpoint))


# ---- the benchmarks --------------------------------------------------------------------------------

def bench_raw(work: Path, repeat: int, report: Callable[[str], None]) -> dict:
    partition = work / "logdir" / "bench-0"
    segments = sorted(str(p) for p in partition.glob("*.log"))
    size = sum(os.path.getsize(p) for p in segments)
    results: dict = {"bytes": size}
    modes = [False, True] if can_drop_caches() else [False]
    with bindfs(partition, work / "bindfs") as bmnt, kfs_mounted(work / "logdir", work / "kfs") as kmnt:
        bind_segments = [str(bmnt / Path(p).name) for p in segments]
        kfs_file = str(kmnt / "bench-0" / "offset" / "earliest")
        assert os.path.getsize(kfs_file) == size
        for cold in modes:
            label = "cold" if cold else "warm"
            direct, bind, kfs = interleaved([["cat", *segments], ["cat", *bind_segments], ["cat", kfs_file]],
                                            repeat, cold)
            results[label] = {"direct_s": direct, "bindfs_s": bind, "kfs_s": kfs, "kfs_vs_bindfs": bind / kfs,
                              "kfs_vs_direct": direct / kfs}
            report(f"raw {label:4}: {size / 2**20:.0f} MiB  direct {direct:.3f}s ({size / direct / 2**20:.0f} MiB/s)"
                   f"  bindfs {bind:.3f}s ({size / bind / 2**20:.0f} MiB/s)  kfs {kfs:.3f}s "
                   f"({size / kfs / 2**20:.0f} MiB/s)  kfs/bindfs throughput {bind / kfs:.2f}x"
                   f"  kfs/direct {direct / kfs:.2f}x")
    return results


VALUE_BATCH_RECORDS = 20  # batches as a producer with default settings makes them (~4 KiB here)
VALUE_SEGMENT_BYTES = 4 << 20  # several segments: most records are in closed ones, the rest in the live one


def bench_value(work: Path, repeat: int, report: Callable[[str], None], per_round: int = 40) -> dict:
    """`cat offset/N.value` of a record never read before, against `cat` of a small file never read
    before through bindfs (FUSE's own floor on this kernel) and directly; one shell loop of
    `per_round` cats per kind, the kinds in turn within a round, seconds per cat, best of the rounds."""
    logdir = work / "value-logdir"
    partition = logdir / "bench-0"
    if not partition.exists():
        write_partition(partition, 16 << 20, value_size=200, batch_records=VALUE_BATCH_RECORDS,
                        segment_bytes=VALUE_SEGMENT_BYTES)
    records = _records_in(partition)
    small = work / "small-files"
    small.mkdir(exist_ok=True)
    rng = random.Random(7)
    offsets = iter(rng.sample(range(1, records), (repeat + 1) * per_round))  # 0 is read for its size
    names = iter(range(10**9))
    best = {"kfs": float("inf"), "bindfs": float("inf"), "real": float("inf")}
    with kfs_mounted(logdir, work / "kfs-value") as kmnt, bindfs(small, work / "bindfs-small") as bmnt:
        size = len((kmnt / "bench-0" / "offset" / "0.value").read_bytes())

        def fresh_files(root: Path) -> list[str]:
            paths = []
            for _ in range(per_round):  # new names each time: nothing cached by bindfs or the kernel's dentries
                name = f"v{next(names)}"
                (small / name).write_bytes(b"x" * size)
                paths.append(str(root / name))
            return paths

        for round_ in range(repeat + 1):  # the first round warms up (page cache, daemon), and is not counted
            times = {"kfs": _shell_loop([str(kmnt / "bench-0" / "offset" / f"{next(offsets)}.value")
                                         for _ in range(per_round)]),
                     "bindfs": _shell_loop(fresh_files(bmnt)), "real": _shell_loop(fresh_files(small))}
            if round_:
                best = {kind: min(best[kind], t / per_round) for kind, t in times.items()}
    result = {"kfs_ms": best["kfs"] * 1e3, "bindfs_ms": best["bindfs"] * 1e3, "real_ms": best["real"] * 1e3,
              "vs_bindfs": best["kfs"] / best["bindfs"], "vs_real": best["kfs"] / best["real"],
              "value_bytes": size, "load": os.getloadavg()[0]}
    report(f"value: cat offset/N.value of a fresh record {result['kfs_ms']:.2f} ms, of a fresh {size}-byte file "
           f"through bindfs {result['bindfs_ms']:.2f} ms, directly {result['real_ms']:.2f} ms (best of {repeat} "
           f"rounds of {per_round}, load {result['load']:.1f}): {result['vs_bindfs']:.2f}x bindfs (target <= 1.4), "
           f"{result['vs_real']:.2f}x a real file (target <= 1.5)")
    return result


def _records_in(partition: Path) -> int:
    from kfs.storage import LogDirs

    return LogDirs([str(partition.parent)]).partition(partition.name).log_end_offset()


def _shell_loop(paths: list[str]) -> float:
    """Wall time of one shell running `cat` on each path in turn (a script fetching values)."""
    start = time.perf_counter()
    subprocess.run("for f in " + " ".join(paths) + "; do cat $f; done", shell=True, stdout=subprocess.DEVNULL,
                   check=True)
    return time.perf_counter() - start


def bench_decoded(work: Path, repeat: int, report: Callable[[str], None]) -> dict:
    with kfs_mounted(work / "decoded-logdir", work / "kfs-decoded") as kmnt:
        path = str(kmnt / "bench-0" / "messages.jsonl")
        head_fresh = timed(["head", "-n", "1", path])  # nothing mapped yet: one batch of decoding
        start = time.perf_counter()
        stat_size = os.path.getsize(path)  # 0 past the size budget: a stat does not decode
        stat = time.perf_counter() - start
        first = timed(["grep", "-c", '"offset"', path])  # maps the stream as it goes
        records = int(subprocess.run(["grep", "-c", '"offset"', path], capture_output=True).stdout)
        size = int(subprocess.run(["wc", "-c", path], capture_output=True, text=True).stdout.split()[0])
        again = statistics.median(timed(["grep", "-c", '"offset"', path]) for _ in range(max(1, repeat // 2)))
        time.sleep(1.1)  # let the kernel's cached st_size (0) expire: the size is known now
        head = statistics.median(timed(["head", "-n", "1", path]) for _ in range(repeat))
        tail = statistics.median(timed(["tail", "-n", "1", path]) for _ in range(repeat))
    report(f"decoded: messages.jsonl of {records} records, {size / 2**20:.1f} MiB: head -n 1 on a fresh mount "
           f"{head_fresh * 1e3:.0f} ms; first stat {stat * 1e3:.1f} ms (st_size {stat_size})")
    report(f"decoded: grep -c first pass {first:.2f}s = {records / first:,.0f} records/s, "
           f"{size / first / 2**20:.1f} MiB/s; again {again:.2f}s = {records / again:,.0f} records/s, "
           f"{size / again / 2**20:.1f} MiB/s; then head -n 1 {head * 1e3:.0f} ms, tail -n 1 {tail * 1e3:.0f} ms")
    return {"records": records, "bytes": size, "head_fresh_ms": head_fresh * 1e3, "stat_ms": stat * 1e3,
            "first_s": first, "again_s": again, "records_per_s": records / again,
            "mib_per_s": size / again / 2**20, "head_ms": head * 1e3, "tail_ms": tail * 1e3}


# ---- binding comparison: a minimal passthrough ----------------------------------------------------

def passthrough(binding: str, mode: str, source: str, mountpoint: str) -> None:
    """Serve `source`'s files read-only at `mountpoint` (foreground) on one binding."""
    if binding == "fusepy":
        import fuse as fusemod
    else:
        if binding == "mfusepy3":
            os.environ["FUSE_LIBRARY_NAME"] = "fuse3"
        import mfusepy as fusemod

    from kfs.fuse import zerocopy

    class Passthrough(fusemod.Operations):
        use_ns = True

        def getattr(self, path: str, fh: object = None) -> dict:
            st = os.lstat(source + path)
            return {"st_mode": st.st_mode & ~0o222, "st_size": st.st_size, "st_nlink": st.st_nlink,
                    "st_mtime": st.st_mtime_ns if binding != "fusepy" else st.st_mtime, "st_blksize": 1 << 20}

        def readdir(self, path: str, fh: object) -> list[str]:
            return [".", "..", *os.listdir(source + path)]

        def open(self, path: str, fi: ctypes.Structure) -> int:
            fi.fh = os.open(source + path, os.O_RDONLY)
            return 0

        def read(self, path: str, size: int, offset: int, fi: ctypes.Structure) -> bytes:
            return os.pread(fi.fh, size, offset)

        def release(self, path: str, fi: ctypes.Structure) -> int:
            os.close(fi.fh)
            return 0

        if mode == "read_buf":
            def read_buf(self, path: str, bufpp: object, size: int, offset: int, fi: ctypes.Structure) -> int:
                zerocopy.reply_fd(bufpp, fi.fh, offset, size)
                return 0

            def init_with_config(self, conn: ctypes.Structure, config: ctypes.Structure) -> None:
                conn.want |= conn.capable & (zerocopy.FUSE_CAP_SPLICE_WRITE | zerocopy.FUSE_CAP_SPLICE_MOVE)

    fusemod.FUSE(Passthrough(), mountpoint, foreground=True, ro=True, raw_fi=True)


def bench_bindings(work: Path, repeat: int, report: Callable[[str], None]) -> dict:
    source = work / "logdir" / "bench-0"
    name = sorted(p.name for p in source.glob("*.log"))[0]
    size = os.path.getsize(source / name)
    results = {}
    modes = [False, True] if can_drop_caches() else [False]
    direct = {cold: median_time(["cat", str(source / name)], repeat, cold) for cold in modes}
    with bindfs(source, work / "bindfs") as bmnt:
        bind = {cold: median_time(["cat", str(bmnt / name)], repeat, cold) for cold in modes}
    variants = [("fusepy", "read"), ("mfusepy2", "read"), ("mfusepy3", "read"), ("mfusepy3", "read_buf")]
    for binding, mode in variants:
        mountpoint = work / f"pt-{binding}-{mode}"
        mountpoint.mkdir(exist_ok=True)
        daemon = subprocess.Popen([sys.executable, "-m", "benchmarks.bench_fuse", "--passthrough", binding, mode,
                                   str(source), str(mountpoint)], stderr=subprocess.DEVNULL)
        try:
            for _ in range(200):
                if os.path.ismount(mountpoint):
                    break
                time.sleep(0.05)
            times = {cold: median_time(["cat", str(mountpoint / name)], repeat, cold) for cold in modes}
        finally:
            subprocess.run(["fusermount", "-u", str(mountpoint)], check=False)
            daemon.wait()
        label = f"{binding}+{mode}"
        results[label] = times
        report(f"binding {label:18}: " + "  ".join(
            f"{'cold' if cold else 'warm'} {t:.3f}s ({size / t / 2**20:.0f} MiB/s, {bind[cold] / t:.2f}x bindfs)"
            for cold, t in times.items()))
    report("reference          : " + "  ".join(
        f"{'cold' if c else 'warm'} direct {direct[c]:.3f}s bindfs {bind[c]:.3f}s" for c in modes))
    return {"file_bytes": size, "direct": direct, "bindfs": bind, **results}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--raw-mb", type=int, default=300)
    parser.add_argument("--decoded-mb", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--bindings", action="store_true", help="also compare FUSE bindings on a passthrough")
    parser.add_argument("--only", choices=("raw", "value", "decoded", "bindings"), action="append")
    parser.add_argument("--work", help="directory for the log dirs and mount points (default: a temp dir)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON at the end")
    parser.add_argument("--passthrough", nargs=4, metavar=("BINDING", "MODE", "SRC", "MNT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.passthrough:
        passthrough(*args.passthrough)
        return 0
    if not shutil.which("bindfs"):
        print("bench_fuse needs bindfs (apt install bindfs) for the comparison.", file=sys.stderr)
        return 1
    work = Path(args.work or tempfile.mkdtemp(prefix="kfs-bench-"))
    only = set(args.only or ["raw", "value", "decoded"] + (["bindings"] if args.bindings else []))
    report = lambda line: print(line, flush=True)  # noqa: E731
    if {"raw", "bindings"} & only and not (work / "logdir" / "bench-0").exists():
        records = write_partition(work / "logdir" / "bench-0", args.raw_mb << 20)
        report(f"wrote {records} records, {args.raw_mb} MiB raw, to {work / 'logdir'}")
    if "decoded" in only and not (work / "decoded-logdir" / "bench-0").exists():
        write_partition(work / "decoded-logdir" / "bench-0", args.decoded_mb << 20, value_size=200)
    results = {}
    for name, bench in (("bindings", bench_bindings), ("raw", bench_raw), ("value", bench_value),
                        ("decoded", bench_decoded)):
        if name in only:
            results[name] = bench(work, args.repeat, report)
    if args.json:
        print(json.dumps(results, indent=2, default=str))
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
