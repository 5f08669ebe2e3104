"""kfs against Kafka's own decoder and against bindfs, every ratio from one run.

    python -m benchmarks.bench_kafka [--records 1300000] [--rounds 3] [--work DIR] [--json]

The data is written at bench time by Kafka's `MemoryRecordsBuilder` (benchmarks/kafka-side-bench.jar,
see benchmarks/java/README.md): a "mixed" set of 20-record batches, none and lz4 alternating, JSON
values, a key and a header, and an "uncompressed" set of the same records with no compression; each
twice (partitions -0 and -1), for the two-readers figures. The Java side is Kafka's `FileRecords`
iteration printing a DumpLogSegments-style line per batch and per record, timed as a whole process
(`java ... dump 1`) and as its third pass in one JVM (`dump 3`: the JIT is warm by then).

Within a round every command runs once, in turn, so drift on a busy machine hits them alike; each
figure is the best of the rounds. Ratios are Java's (or bindfs's, or a real file's) time over kfs's:
above 1 means kfs is faster. Mount figures use a fresh mount (and an empty kfs cache) per command.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

from benchmarks.bench_fuse import bindfs

JAR = Path(__file__).with_name("kafka-side-bench.jar")
DEBIAN_JARS = ("lz4-java", "snappy-java", "zstd-jni", "slf4j-api", "slf4j-nop")
DEBIAN_PACKAGES = "liblz4-java libsnappy-java libzstd-jni-java libslf4j-java"
SETS = {"mixed": "mixed", "uncompressed": "none"}
VALUES = 40  # `.value` reads per round and per kind


def classpath() -> str:
    jars = [str(JAR)] + [f"/usr/share/java/{name}.jar" for name in DEBIAN_JARS]
    missing = [j for j in jars if not os.path.exists(j)]
    if missing or not shutil.which("java"):
        raise SystemExit(f"bench_kafka needs java and {', '.join(missing) or 'the Debian jars'}: "
                         f"apt-get install default-jre-headless {DEBIAN_PACKAGES} (make bench-deps does it)")
    return ":".join(jars)


def java(cp: str, *args: str) -> list[str]:
    return ["java", "-cp", cp, "KafkaSideBench", *args]


# ---- data ----------------------------------------------------------------------------------------------

def generate(work: Path, cp: str, records: int, report: Callable[[str], None]) -> dict[str, Path]:
    """Log dirs written by Kafka's classes (kept in `work` and reused when there)."""
    logdirs = {}
    for name, mode in SETS.items():
        logdir = work / f"logdir-{name}"
        first = logdir / f"bench.{name}-0"
        done = logdir / ".written"
        if not done.exists() or done.read_text() != str(records):
            shutil.rmtree(logdir, ignore_errors=True)
            start = time.perf_counter()
            subprocess.run(java(cp, "write", str(first), str(records), mode), check=True)
            shutil.copytree(first, logdir / f"bench.{name}-1")
            done.write_text(str(records))
            report(f"wrote {name}: {records} records, {_log_bytes(first) / 2**20:.0f} MiB per partition, "
                   f"in {time.perf_counter() - start:.0f} s (Kafka's MemoryRecordsBuilder)")
        logdirs[name] = logdir
    return logdirs


def _segments(partition: Path) -> list[str]:
    return sorted(str(p) for p in partition.glob("*.log"))


def _log_bytes(partition: Path) -> int:
    return sum(os.path.getsize(p) for p in _segments(partition))


# ---- timing ----------------------------------------------------------------------------------------------

def timed(command: list[str] | str, pipe: bool = False, quiet: bool = False) -> float:
    """Wall time of a command, its output to /dev/null (or read from a pipe: grep -c stops early on
    /dev/null); LAST_CPU: its CPU seconds (user + system, its threads and the children it waited for),
    from its own rusage: RUSAGE_CHILDREN would take in earlier mounts' daemons, which subprocess
    reaps when it starts the next process."""
    start = time.perf_counter()
    with subprocess.Popen(command, stdout=subprocess.PIPE if pipe else subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL if quiet else None, shell=isinstance(command, str)) as p:
        if p.stdout is not None:
            while p.stdout.read(1 << 20):
                pass
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise subprocess.CalledProcessError(code, command)
    LAST_CPU[0] = usage.ru_utime + usage.ru_stime
    return time.perf_counter() - start


LAST_CPU = [0.0]  # CPU seconds (user + system) of the last timed command(s) and their threads
CPU_FIGURES = ("java whole process", "kfs cat", "kfs dump --deep-iteration --print-data-log")


def warm_pass(cp: str, files: list[str]) -> float:
    """The JVM's third pass over `files` (seconds it reports): the JIT has compiled the hot loop by then."""
    out = subprocess.run(java(cp, "dump", "3", *files), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True, check=True).stderr
    return float(re.findall(r"pass 3: ([0-9.]+) s", out)[-1])


@contextlib.contextmanager
def fresh_mount(logdir: Path, work: Path, options: dict[str, object] | None = None) -> Iterator[Path]:
    """A new kfs mount with an empty cache: nothing decoded or sized before; `options`: -o's."""
    from kfs.fuse.mount import mount, unmount

    cache = Path(tempfile.mkdtemp(prefix="cache-", dir=work))
    mountpoint = Path(tempfile.mkdtemp(prefix="mnt-", dir=work))
    saved = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(cache)
    try:
        DAEMON[0] = mount([str(logdir)], str(mountpoint), {"log": str(work / "kfs-mount.log"), **(options or {})}) or 0
    finally:
        if saved is None:
            os.environ.pop("XDG_CACHE_HOME", None)
        else:
            os.environ["XDG_CACHE_HOME"] = saved
    try:
        yield mountpoint
    finally:
        unmount(str(mountpoint))
        shutil.rmtree(cache, ignore_errors=True)
        with contextlib.suppress(OSError):
            mountpoint.rmdir()


def mounted(logdir: Path, work: Path, commands: list[list[str]], pipe: bool = False,
            options: dict[str, object] | None = None) -> float:
    """Wall time of `commands` (started at once; `{mnt}` in an argument is the mount point) on a fresh mount
    with `options`; LAST_CORES: the cores they and the daemon kept busy meanwhile (CPU seconds over wall
    seconds)."""
    with fresh_mount(logdir, work, options) as mnt:
        resolved = [[arg.replace("{mnt}", str(mnt)) for arg in c] for c in commands]
        cpu = _process_cpu(DAEMON[0])
        seconds = timed(resolved[0], pipe) if pipe else together(resolved)
        LAST_CORES[0] = (_process_cpu(DAEMON[0]) - cpu + LAST_CPU[0]) / seconds
        return seconds


DAEMON = [0]  # pid of the kfs daemon of the last fresh mount
LAST_CORES = [0.0]
CORE_FIGURES = ("cat messages.jsonl (fresh mount)", "two partitions through one mount")


def _process_cpu(pid: int) -> float:
    """CPU seconds (user + system, every thread) of a running process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def together(commands: list[list[str]]) -> float:
    """Wall time of commands started at once, until the last ends; LAST_CPU: their CPU seconds,
    from each one's own rusage (RUSAGE_CHILDREN would take in earlier mounts' daemons, which
    subprocess reaps when it starts the next process)."""
    start = time.perf_counter()
    processes = [subprocess.Popen(c, stdout=subprocess.DEVNULL) for c in commands]
    cpu = 0.0
    for p in processes:
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        cpu += usage.ru_utime + usage.ru_stime
    seconds = time.perf_counter() - start
    for p in processes:
        if p.returncode:
            raise subprocess.CalledProcessError(p.returncode, p.args)
    LAST_CPU[0] = cpu
    return seconds


# ---- the table -------------------------------------------------------------------------------------------

def measures(cp: str, logdirs: dict[str, Path], work: Path) -> dict[str, Callable[[], float]]:
    """Every timed thing, by name; each returns seconds."""
    kfs = [shutil.which("kfs") or "kfs"]  # the installed command, as a user runs it
    m: dict[str, Callable[[], float]] = {}
    for name, logdir in logdirs.items():
        p0, p1 = f"bench.{name}-0", f"bench.{name}-1"
        files = _segments(logdir / p0)
        m[f"{name}: java whole process"] = partial(timed, java(cp, "dump", "1", *files), quiet=True)
        m[f"{name}: java warm JIT (3rd pass)"] = partial(warm_pass, cp, files)
        m[f"{name}: kfs cat"] = partial(timed, [*kfs, "cat", str(logdir), p0])
        m[f"{name}: kfs dump --deep-iteration --print-data-log"] = partial(
            timed, [*kfs, "dump", "--deep-iteration", "--print-data-log", *files])
        m[f"{name}: cat messages.jsonl (fresh mount)"] = partial(
            mounted, logdir, work, [["cat", f"{{mnt}}/{p0}/messages.jsonl"]])
        m[f"{name}: grep -c (fresh mount)"] = partial(
            mounted, logdir, work, [["grep", "-c", '"offset"', f"{{mnt}}/{p0}/messages.jsonl"]], pipe=True)
        m[f"{name}: two partitions through one mount"] = partial(
            mounted, logdir, work, [["cat", f"{{mnt}}/{p}/messages.jsonl"] for p in (p0, p1)])
        m[f"{name}: two kfs cat processes"] = partial(together, [[*kfs, "cat", str(logdir), p] for p in (p0, p1)])
        if name == "mixed":  # -o direct_io (opt-in): the reader's own reads, no page cache; README
            direct: dict[str, object] = {"direct_io": True}
            m[f"{name}: cat messages.jsonl (fresh mount, -o direct_io)"] = partial(
                mounted, logdir, work, [["cat", f"{{mnt}}/{p0}/messages.jsonl"]], options=direct)
            m[f"{name}: two partitions through one mount (-o direct_io)"] = partial(
                mounted, logdir, work, [["cat", f"{{mnt}}/{p}/messages.jsonl"] for p in (p0, p1)], options=direct)
    return m


def warm(logdir: Path) -> None:
    """Read a log dir's files into the page cache before a figure that reads them: every figure here
    compares work on data in memory (the JVM's and bindfs's too). This machine's memory manager pages
    out file pages idle for ~30 s (DAMON `pageout`), so a log read a phase earlier may be on disk
    again; `.value` lookups then read it from disk while the small files they are compared with were
    just written (py-spy of the daemon: a third of each lookup in `pread`)."""
    for path in sorted(logdir.rglob("*")):
        if path.is_file():
            with path.open("rb") as f:
                while f.read(1 << 20):
                    pass


def value_measures(logdir: Path, work: Path, records: int
                   ) -> tuple[dict[str, Callable[[], float]], dict[str, Path]]:
    """`cat offset/N.value` of a record never read before, against `cat` of as many small files read
    for the first time through bindfs and directly; seconds per value, one shell loop per kind."""
    partition = logdir / "bench.mixed-0"
    rng = random.Random(11)
    small = work / "small-files"
    small.mkdir(exist_ok=True)
    counter = iter(range(10**9))
    state: dict[str, Path] = {}

    def kfs_values() -> float:
        offsets = [rng.randrange(records) for _ in range(VALUES)]
        paths = " ".join(str(state["kfs"] / partition.name / "offset" / f"{n}.value") for n in offsets)
        return timed(f"for f in {paths}; do cat $f; done") / VALUES

    def small_files(root_key: str) -> Callable[[], float]:
        def run() -> float:
            names = []
            for _ in range(VALUES):  # new files each time: nothing cached by bindfs or the kernel's dentries
                name = f"v{next(counter)}"
                (small / name).write_bytes(b'{"order_id": 1, "note": "a value of about the size of one"}' * 3)
                names.append(name)
            root = state[root_key] if root_key == "bindfs" else small
            return timed("for f in " + " ".join(str(root / n) for n in names) + "; do cat $f; done") / VALUES
        return run

    return {"value: kfs offset/N.value": kfs_values, "value: bindfs small file": small_files("bindfs"),
            "value: small real file": small_files("real")}, state


def raw_measures(logdir: Path, state: dict[str, Path]) -> dict[str, Callable[[], float]]:
    partition = logdir / "bench.mixed-0"
    segments = [p.name for p in sorted(partition.glob("*.log"))]

    def kfs_raw() -> float:
        return timed(["cat", str(state["kfs"] / partition.name / "offset" / "earliest")])

    def bindfs_raw() -> float:
        return timed(["cat", *(str(state["bindfs_part"] / s) for s in segments)])

    return {"raw: kfs offset/earliest": kfs_raw, "raw: bindfs segments": bindfs_raw}


RATIOS = [  # (label, numerator, denominator): above 1 means kfs is faster
    ("kfs cat JSON lines vs the JVM's whole process", "java whole process", "kfs cat"),
    ("kfs cat JSON lines vs the JVM with a warm JIT", "java warm JIT (3rd pass)", "kfs cat"),
    ("cat messages.jsonl, fresh mount, vs the JVM's whole process", "java whole process",
     "cat messages.jsonl (fresh mount)"),
    ("cat messages.jsonl, fresh mount, vs the JVM with a warm JIT", "java warm JIT (3rd pass)",
     "cat messages.jsonl (fresh mount)"),
    ("grep -c, fresh mount, vs the JVM's whole process", "java whole process", "grep -c (fresh mount)"),
    ("kfs dump --deep-iteration --print-data-log vs the JVM's whole process", "java whole process",
     "kfs dump --deep-iteration --print-data-log"),
    ("kfs dump --deep-iteration --print-data-log vs the JVM with a warm JIT", "java warm JIT (3rd pass)",
     "kfs dump --deep-iteration --print-data-log"),
]


def table(best: dict[str, float]) -> list[tuple[str, float]]:
    rows = []
    for name in SETS:
        for label, num, den in RATIOS:
            rows.append((f"{name}: {label}", best[f"{name}: {num}"] / best[f"{name}: {den}"]))
        # Throughput of two readers over one: two partitions' bytes in t2 against one's in t1.
        rows.append((f"{name}: two partitions at once through one mount, throughput vs one reader",
                     2 * best[f"{name}: cat messages.jsonl (fresh mount)"]
                     / best[f"{name}: two partitions through one mount"]))
        if f"{name}: two partitions through one mount (-o direct_io)" in best:
            rows.append((f"{name}: two partitions at once through one -o direct_io mount, throughput vs one reader",
                         2 * best[f"{name}: cat messages.jsonl (fresh mount, -o direct_io)"]
                         / best[f"{name}: two partitions through one mount (-o direct_io)"]))
        rows.append((f"{name}: two kfs cat processes, throughput vs one",
                     2 * best[f"{name}: kfs cat"] / best[f"{name}: two kfs cat processes"]))
    rows.append((".value of a fresh record: kfs time / bindfs time (target <= 1.4)",
                 best["value: kfs offset/N.value"] / best["value: bindfs small file"]))
    rows.append((".value of a fresh record: kfs time / small real file time (target <= 1.5)",
                 best["value: kfs offset/N.value"] / best["value: small real file"]))
    rows.append(("raw streaming: kfs throughput / bindfs throughput",
                 best["raw: bindfs segments"] / best["raw: kfs offset/earliest"]))
    return rows


def compiled_bytecode(report: Callable[[str], None]) -> None:
    """kfs's modules compiled to bytecode, as `pip install` leaves a regular install: an editable one
    compiles them at each start when PYTHONDONTWRITEBYTECODE is set (this machine sets it), which
    cost `kfs cat` ~60 ms of its ~0.6 s, a cost no installed kfs pays."""
    import compileall

    import kfs

    package = Path(kfs.__file__).parent
    if compileall.compile_dir(str(package), quiet=1):
        report(f"bytecode: {package} compiled (__pycache__), as a regular install has it")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_300_000, help="records per partition")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each figure is the best of them")
    parser.add_argument("--work", help="directory for the data and mount points, kept and reused (default: temp)")
    parser.add_argument("--json", action="store_true", help="print every time and ratio as JSON at the end")
    args = parser.parse_args(argv)
    if not shutil.which("bindfs"):
        raise SystemExit("bench_kafka needs bindfs (apt-get install bindfs) for the FUSE baseline")
    cp = classpath()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # unmount what was mounted when stopped
    report = lambda line: print(line, flush=True)  # noqa: E731
    work = Path(args.work or tempfile.mkdtemp(prefix="kfs-bench-kafka-"))
    work.mkdir(parents=True, exist_ok=True)
    logdirs = generate(work, cp, args.records, report)
    compiled_bytecode(report)
    report(f"load: {os.getloadavg()[0]:.1f} (1-minute load average; {os.cpu_count()} cores): figures under "
           "load are slower, ratios from the same run still compare")
    timers = measures(cp, logdirs, work)
    values, state = value_measures(logdirs["mixed"], work, args.records)
    timers.update(values)
    timers.update(raw_measures(logdirs["mixed"], state))
    samples: dict[str, list[float]] = {name: [] for name in timers}
    cpu_samples: dict[str, list[float]] = {}
    core_samples: dict[str, list[float]] = {}
    with contextlib.ExitStack() as stack:
        for r in range(args.rounds):
            for name, run in timers.items():
                if name.startswith(("value:", "raw:")) and "kfs" not in state:
                    state["kfs"] = stack.enter_context(_persistent_mount(logdirs["mixed"], work))
                    state["bindfs"] = stack.enter_context(bindfs(work / "small-files", work / "bindfs-small"))
                    state["bindfs_part"] = stack.enter_context(
                        bindfs(logdirs["mixed"] / "bench.mixed-0", work / "bindfs-part"))
                    timed(["cat", str(state["kfs"] / "bench.mixed-0" / "offset" / "earliest")])  # warm both
                    timed(["cat", *_segments(state["bindfs_part"])])
                warm(logdirs[name.split(":")[0] if name.split(":")[0] in logdirs else "mixed"])
                samples[name].append(run())
                if name.endswith(CPU_FIGURES):
                    cpu_samples.setdefault(name, []).append(LAST_CPU[0])
                if name.endswith(CORE_FIGURES):
                    core_samples.setdefault(name, []).append(LAST_CORES[0])
            report(f"round {r + 1}/{args.rounds} done")
    best = {name: min(s) for name, s in samples.items()}
    report(f"\nbest of {args.rounds} rounds:")
    for name, seconds in best.items():
        report(f"  {name:62} {seconds * 1e3 if name.startswith('value') else seconds:9.3f}"
               f"{' ms per value' if name.startswith('value') else ' s'}")
    report("\nratios (above 1: kfs is faster):")
    rows = table(best)
    for label, ratio in rows:
        report(f"  {label:95} {ratio:6.2f}x")
    cpu = {name: min(s) for name, s in cpu_samples.items()}
    report("\nCPU seconds (user + system, every thread; what load on the machine does not inflate), best:")
    for name, seconds in cpu.items():
        report(f"  {name:62} {seconds:9.3f} s")
    for name in SETS:
        java_cpu = cpu[f"{name}: java whole process"]
        for what in ("kfs cat", "kfs dump --deep-iteration --print-data-log"):
            rows.append((f"{name}: CPU time, the JVM's whole process over {what}", java_cpu / cpu[f"{name}: {what}"]))
            report(f"  {rows[-1][0]:95} {rows[-1][1]:6.2f}x")
    report(f"\ncores kept busy (kfs daemon + readers) in the fastest round, of {os.cpu_count()}:")
    for name in SETS:
        busy = {what: core_samples[f"{name}: {what}"][samples[f"{name}: {what}"].index(best[f"{name}: {what}"])]
                for what in CORE_FIGURES}
        for what, cores in busy.items():
            report(f"  {name}: {what:58} {cores:6.2f}")
        # One reader already keeps `cores` busy (the daemon renders ahead on the other core): two
        # readers cannot get more than all the cores there are over that.
        rows.append((f"{name}: two readers through one mount, the most {os.cpu_count()} cores allow over one reader",
                     (os.cpu_count() or 1) / busy[CORE_FIGURES[0]]))
        report(f"  {rows[-1][0]:95} {rows[-1][1]:6.2f}x")
    if args.json:
        print(json.dumps({"best_s": best, "samples_s": samples, "cpu_s": cpu_samples, "cores": core_samples,
                          "ratios": dict(rows)},
                         indent=2))
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


@contextlib.contextmanager
def _persistent_mount(logdir: Path, work: Path) -> Iterator[Path]:
    with fresh_mount(logdir, work) as mnt:
        yield mnt


if __name__ == "__main__":
    sys.exit(main())
