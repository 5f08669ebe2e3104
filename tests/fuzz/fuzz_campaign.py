"""The fuzzing campaign: N inputs from one seed, in worker processes watched for crashes and hangs.

    python tests/fuzz/fuzz_campaign.py --inputs 1000000 --seed 1 --workers 2 --asan --out /tmp/fuzz

Input i of a run is made by `random.Random(f"{seed}:{i}")` alone, so any finding is replayed with
`--replay SEED:I` (in-process, with its traceback). Each worker runs inputs i = w, w + W, ... and
writes the index it is on into a shared page; the parent prints progress every few seconds,
counts a worker that dies as a crash (a sanitizer report ends the process: halt_on_error), a worker
stuck on one input for more than --hang seconds of CPU time (or 30 x that of wall time, for a
blocked one: the campaign runs niced on a shared machine) as a hang (it is killed), and restarts the
worker after that input. Findings are written to OUT/findings/ with the replay command.

`--asan` builds a copy of the C extension (every .c under kfs/_native/csrc/) with -fsanitize=address,undefined
into OUT/asan/, re-runs the campaign under LD_PRELOAD=libasan with ASAN_OPTIONS=detect_leaks=0, and makes the
workers use that copy as the C path (the pure-Python path runs too: every input is differential).
`KFS_PURE_PYTHON=1` runs the pure-Python path alone.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.machinery
import importlib.util
import json
import logging
import mmap
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import sysconfig
import tempfile
import time
import traceback
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))

DEFAULT_MIX = "record=94,index=4,partition=2"
SLOT = 24  # bytes per worker in the shared page: current input index, inputs done, CPU time at its start
STARTING = (1 << 64) - 1  # the index slot's value while a worker loads its corpus


def parse_mix(text: str) -> list[tuple[str, int]]:
    out = []
    for part in text.split(","):
        name, _, weight = part.partition("=")
        out.append((name.strip(), int(weight)))
    return out


def target_of(seed: int, i: int, mix: list[tuple[str, int]]) -> tuple[str, random.Random]:
    rnd = random.Random(f"{seed}:{i}")
    total = sum(w for _, w in mix)
    pick = rnd.randrange(total)
    for name, weight in mix:
        if pick < weight:
            return name, rnd
        pick -= weight
    raise AssertionError


# ---- the sanitizer build -------------------------------------------------------------------------

def build_sanitized(out: Path) -> Path:
    """The C files of kfs/_native/csrc/ (every layer's) compiled into one module with AddressSanitizer and
    UndefinedBehaviorSanitizer."""
    out.mkdir(parents=True, exist_ok=True)
    so = out / ("_speedups" + sysconfig.get_config_var("EXT_SUFFIX"))
    sources = sorted(str(path) for path in (REPO / "kfs" / "_native" / "csrc").rglob("*.c"))
    command = [os.environ.get("CC", "gcc"), "-shared", "-fPIC", "-O1", "-g", "-fsanitize=address,undefined",
               "-fno-sanitize-recover=undefined", "-fno-omit-frame-pointer",
               "-I" + sysconfig.get_paths()["include"], *sources, "-o", str(so)]
    subprocess.run(command, check=True)
    return so


def load_sanitized(so: Path) -> None:
    """Make the targets' C path the sanitizer build (kfs's own build is not loaded: KFS_PURE_PYTHON)."""
    import fuzz_targets

    from kfs.record import CorruptBatchError, Record

    loader = importlib.machinery.ExtensionFileLoader("kfs._native._speedups", str(so))
    spec = importlib.util.spec_from_file_location("kfs._native._speedups", str(so), loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    module.init(Record, CorruptBatchError)
    fuzz_targets.install_compiled(module.decode_v2_records, module.render_jsonl, module.render_v2_jsonl, module.gather,
                                  module.render_v2_dump, module.walk_v2_run, module.find_v2_batch, module.v2_record_at,
                                  module.index_slot, module.crc32c, module.avro_program, module.render_avro)


def libasan() -> str:
    return subprocess.run([os.environ.get("CC", "gcc"), "-print-file-name=libasan.so"], capture_output=True,
                          text=True, check=True).stdout.strip()


# ---- one input -----------------------------------------------------------------------------------

@contextlib.contextmanager
def kfs_logging_silenced() -> Iterator[None]:
    """kfs's warnings about the damage the inputs are made of kept off stderr while inputs run, and
    the `kfs` logger as it was afterwards (the smoke test runs in pytest's process: the tests after it
    read kfs's warnings with caplog)."""
    logger = logging.getLogger("kfs")
    quiet = logging.NullHandler()
    propagate = logger.propagate
    logger.addHandler(quiet)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(quiet)
        logger.propagate = propagate


class Runner:
    """Makes and runs inputs in one process (a worker, a replay, the smoke test); the caller quiets
    kfs's logging (`kfs_logging_silenced`) for as long as it runs them."""

    def __init__(self, scratch: Path, mix: list[tuple[str, int]], mount_every: int = 0) -> None:
        import fuzz_targets

        self.t = fuzz_targets
        self.corpus = fuzz_targets.Corpus()
        self.scratch = scratch
        self.mix = mix
        self.mount_every = mount_every
        self.mounted = 0

    def run(self, seed: int, i: int) -> tuple[str, str | None, str | None]:
        """(target, finding kind or None, detail)."""
        name, rnd = target_of(seed, i, self.mix)
        t = self.t
        try:
            if name == "record":
                t.run_record_input(t.make_record_input(rnd, self.corpus))
            elif name == "index":
                partition, logdir = t.make_index_input(rnd, self.scratch)
                t.run_index_input(rnd, partition, logdir)
            elif name == "partition":
                partition, logdir = t.make_partition_input(rnd, self.scratch)
                t.run_partition_input(rnd, partition, logdir)
                if self.mount_every and i % self.mount_every == 0:
                    import fuzz_mount

                    self.mounted += 1
                    fuzz_mount.run_mount_input(partition, logdir, self.scratch)
            elif name == "cache":
                import fuzz_cache

                fuzz_cache.run_cache_input(rnd, self.scratch)
            elif name == "entries":
                import fuzz_entries

                fuzz_entries.run_entries_input(*fuzz_entries.make_entries_input(rnd, self.scratch))
            elif name == "markers":
                import fuzz_markers

                fuzz_markers.run_markers_input(*fuzz_markers.make_markers_input(rnd, self.scratch))
            elif name == "kcat":
                import fuzz_kcat

                fuzz_kcat.run_kcat_input(*fuzz_kcat.make_kcat_input(rnd, self.scratch))
            elif name == "payloads":
                import fuzz_payloads

                fuzz_payloads.run_payloads_input(*fuzz_payloads.make_payloads_input(rnd, self.scratch))
            else:
                raise ValueError(name)
        except t.Failure as f:
            return name, f.kind, f.detail + (f" [damage: {'; '.join(t.LAST_DAMAGE)}]" if name != "record" else "")
        except Exception as e:  # in making the input: a harness bug, reported as such
            return name, "harness", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"
        return name, None, None

    def input_bytes(self, seed: int, i: int) -> bytes | None:
        name, rnd = target_of(seed, i, self.mix)
        if name == "record":
            return self.t.make_record_input(rnd, self.corpus)
        return None


# ---- a worker ------------------------------------------------------------------------------------

def worker_main(args: argparse.Namespace) -> int:
    with kfs_logging_silenced():
        return _work(args)


def _work(args: argparse.Namespace) -> int:
    if args.sanitized:
        load_sanitized(Path(args.sanitized))
    scratch = Path(tempfile.mkdtemp(prefix=f"kfs-fuzz-w{args.worker}-", dir=args.scratch))
    runner = Runner(scratch, parse_mix(args.mix), args.mount_every)
    fd = os.open(args.page, os.O_RDWR)
    page = mmap.mmap(fd, 0)
    os.close(fd)
    at = args.worker * SLOT
    counts: dict[str, int] = {}
    last_report = time.monotonic()
    findings = Path(args.out) / "findings"
    for done, i in enumerate(range(args.start, args.inputs, args.workers), start=1):
        page[at + 16:at + 24] = struct.pack("<d", time.process_time())
        page[at:at + 8] = i.to_bytes(8, "little")
        name, kind, detail = runner.run(args.seed, i)
        counts[name] = counts.get(name, 0) + 1
        counts["_mounted"] = runner.mounted
        if kind is not None:
            counts["finding:" + kind] = counts.get("finding:" + kind, 0) + 1
            findings.mkdir(parents=True, exist_ok=True)
            (findings / f"{kind}-{args.seed}-{i}.txt").write_text(
                f"{name} input {args.seed}:{i}: {detail}\nreplay: python {__file__} --replay {args.seed}:{i} "
                f"--mix {args.mix}\n")
            data = runner.input_bytes(args.seed, i)
            if data is not None:
                (findings / f"{kind}-{args.seed}-{i}.bin").write_bytes(data)
        page[at + 8:at + 16] = done.to_bytes(8, "little")
        now = time.monotonic()
        if now - last_report > 2:
            print(json.dumps({"worker": args.worker, "counts": counts}), flush=True)
            last_report = now
    print(json.dumps({"worker": args.worker, "counts": counts, "finished": True}), flush=True)
    shutil.rmtree(scratch, ignore_errors=True)
    return 0


# ---- the parent ----------------------------------------------------------------------------------

class Worker:
    def __init__(self, campaign: Campaign, w: int, start: int) -> None:
        self.w = w
        self.start = start
        self.campaign = campaign
        self.counts: dict[str, int] = {}
        self.finished = False
        c = campaign
        command = [sys.executable, __file__, "--worker", str(w), "--workers", str(c.workers), "--start", str(start),
                   "--inputs", str(c.inputs), "--seed", str(c.seed), "--mix", c.mix, "--page", str(c.page_path),
                   "--out", str(c.out), "--scratch", str(c.scratch), "--mount-every", str(c.mount_every)]
        if c.sanitized:
            command += ["--sanitized", str(c.sanitized)]
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=c.env)
        os.set_blocking(self.proc.stdout.fileno(), False)  # type: ignore[union-attr]
        self.last_index = -1
        self.since = time.monotonic()

    def poll_output(self) -> None:
        assert self.proc.stdout is not None
        while True:
            try:
                line = self.proc.stdout.readline()
            except (OSError, ValueError):
                return
            if not line:
                return
            with contextlib.suppress(ValueError):
                msg = json.loads(line)
                self.counts = msg["counts"]
                self.finished = bool(msg.get("finished"))


class Campaign:
    def __init__(self, args: argparse.Namespace, sanitized: Path | None, env: dict[str, str]) -> None:
        self.inputs, self.seed, self.workers, self.mix = args.inputs, args.seed, args.workers, args.mix
        self.out = Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.scratch = Path(args.scratch)
        self.sanitized = sanitized
        self.env = env
        self.hang = args.hang
        self.mount_every = args.mount_every
        self.page_path = self.out / "progress.page"
        self.page_path.write_bytes(bytes(SLOT * self.workers))
        fd = os.open(self.page_path, os.O_RDWR)
        self.page = mmap.mmap(fd, 0)
        os.close(fd)
        self.totals: dict[str, int] = {}  # counts of workers that ended (crashed, hung) and were restarted
        self.crashes: list[int] = []
        self.hangs: list[int] = []

    def slot(self, w: int) -> tuple[int, int]:
        at = w * SLOT
        return int.from_bytes(self.page[at:at + 8], "little"), int.from_bytes(self.page[at + 8:at + 16], "little")

    def input_cpu(self, wk: Worker) -> float:
        """CPU seconds the worker has spent on its current input."""
        at = wk.w * SLOT
        (started,) = struct.unpack("<d", self.page[at + 16:at + 24])
        try:
            fields = Path(f"/proc/{wk.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") - started

    def reset_slot(self, w: int) -> None:
        at = w * SLOT
        self.page[at:at + 8] = STARTING.to_bytes(8, "little")

    def run(self) -> dict:
        workers: list[Worker] = []
        try:
            return self._run(workers)
        finally:
            for wk in workers:
                if wk.proc.poll() is None:
                    wk.proc.kill()

    def _run(self, workers: list[Worker]) -> dict:
        started = time.monotonic()
        for w in range(self.workers):
            self.reset_slot(w)
            workers.append(Worker(self, w, w))
        last_print = 0.0
        while True:
            alive = 0
            for k, wk in enumerate(workers):
                wk.poll_output()
                current, _ = self.slot(wk.w)
                if wk.proc.poll() is None:
                    alive += 1
                    if current != wk.last_index:
                        wk.last_index, wk.since = current, time.monotonic()
                    elif current != STARTING and (self.input_cpu(wk) > self.hang
                                                  or time.monotonic() - wk.since > 30 * self.hang):
                        wk.proc.kill()
                        wk.proc.wait()
                        self.hangs.append(current)
                        self._finding("hang", current, f"input {self.seed}:{current} ran over {self.hang} s")
                        workers[k] = self._restart(wk, current)
                        alive += 1
                    continue
                wk.poll_output()
                if wk.proc.returncode == 0 and wk.finished:
                    continue
                self.crashes.append(current)
                self._finding("crash", current, f"worker exit status {wk.proc.returncode} on input "
                                                f"{self.seed}:{current}")
                workers[k] = self._restart(wk, current)
                alive += 1
            now = time.monotonic()
            if now - last_print > 10 or not alive:
                self._print_progress(workers, now - started)
                last_print = now
            if not alive:
                break
            time.sleep(0.5)
        return self._summary(workers, time.monotonic() - started)

    def _restart(self, wk: Worker, current: int) -> Worker:
        for k, v in wk.counts.items():
            self.totals[k] = self.totals.get(k, 0) + v
        self.totals["_restarted_inputs"] = self.totals.get("_restarted_inputs", 0) + 1
        self.totals["_done_before_restart"] = self.totals.get("_done_before_restart", 0) + self.slot(wk.w)[1]
        self.reset_slot(wk.w)
        return Worker(self, wk.w, current + self.workers)

    def _finding(self, kind: str, i: int, detail: str) -> None:
        findings = self.out / "findings"
        findings.mkdir(parents=True, exist_ok=True)
        (findings / f"{kind}-{self.seed}-{i}.txt").write_text(
            f"{detail}\nreplay: python {__file__} --replay {self.seed}:{i} --mix {self.mix}\n")

    def _counts(self, workers: list[Worker]) -> dict[str, int]:
        counts = dict(self.totals)
        for wk in workers:
            for k, v in wk.counts.items():
                counts[k] = counts.get(k, 0) + v
        return counts

    def _print_progress(self, workers: list[Worker], elapsed: float) -> None:
        done = (sum(self.slot(wk.w)[1] for wk in workers) + self.totals.get("_restarted_inputs", 0)
                + self.totals.get("_done_before_restart", 0))
        counts = self._counts(workers)
        findings = {k: v for k, v in counts.items() if k.startswith("finding:")}
        rate = done / elapsed if elapsed else 0
        print(f"[fuzz seed={self.seed}] {done}/{self.inputs} inputs ({100 * done / self.inputs:.1f}%), "
              f"{rate:.0f}/s, {elapsed:.0f} s; crashes {len(self.crashes)}, hangs {len(self.hangs)}, "
              f"findings {findings or 0}", flush=True)

    def _summary(self, workers: list[Worker], elapsed: float) -> dict:
        counts = self._counts(workers)
        reports = sorted(str(p) for p in self.out.glob("sanitizer.*"))
        summary = {
            "seed": self.seed,
            "inputs": sum(v for k, v in counts.items() if not k.startswith(("finding:", "_")))
            + len(self.crashes) + len(self.hangs),
            "by_target": {k: v for k, v in counts.items() if not k.startswith(("finding:", "_"))},
            "crashes": len(self.crashes),
            "hangs": len(self.hangs),
            "sanitizer_reports": len(reports),
            "foreign_exceptions": counts.get("finding:exception", 0),
            "disagreements": counts.get("finding:disagreement", 0),
            "wrong_answers": counts.get("finding:wrong-answer", 0),
            "harness_errors": counts.get("finding:harness", 0),
            "view_disagreements": counts.get("finding:view-disagreement", 0),
            "mount_checks": counts.get("_mounted", 0),
            "mount_disagreements": counts.get("finding:mount-disagreement", 0),
            "blocked_inputs": counts.get("finding:hang", 0),  # (the entries target's own wall-clock alarm)
            "leaks": counts.get("finding:leak", 0),  # (an error showing bytes of a file that is no segment)
            "seconds": round(elapsed),
            "sanitized": bool(self.sanitized),
            "pure_python_only": bool(self.env.get("KFS_PURE_PYTHON")) and not self.sanitized,
            "mix": self.mix,
        }
        (self.out / "summary.json").write_text(json.dumps(summary, indent=1))
        return summary


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--inputs", type=int, default=10000)
    p.add_argument("--seed", type=int, default=None, help="default: random, printed")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--mix", default=DEFAULT_MIX, help=f"target weights (default {DEFAULT_MIX})")
    p.add_argument("--asan", action="store_true", help="the C path built with ASan + UBSan")
    p.add_argument("--hang", type=float, default=5.0, help="seconds on one input that count as a hang")
    p.add_argument("--mount-every", type=int, default=0, metavar="K",
                   help="also check every K-th partition input through a real mount (tests/fuzz/fuzz_mount.py)")
    p.add_argument("--out", default=None)
    p.add_argument("--scratch", default="/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir())
    p.add_argument("--replay", help="SEED:I: run one input here, with its traceback")
    # internal
    p.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--page", help=argparse.SUPPRESS)
    p.add_argument("--sanitized", help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.worker is not None:
        return worker_main(args)
    if args.replay:
        seed, _, i = args.replay.partition(":")
        scratch = Path(tempfile.mkdtemp(prefix="kfs-fuzz-replay-", dir=args.scratch))
        runner = Runner(scratch, parse_mix(args.mix), args.mount_every)
        logging.basicConfig(level=logging.WARNING)
        name, rnd = target_of(int(seed), int(i), runner.mix)
        t = runner.t
        print(f"input {args.replay}: target {name}, C path {'on' if t.has_compiled() else 'off'}")
        if name == "record":
            t.run_record_input(t.make_record_input(rnd, runner.corpus))
        elif name == "index":
            t.run_index_input(rnd, *t.make_index_input(rnd, scratch))
        elif name == "entries":
            import fuzz_entries

            fuzz_entries.run_entries_input(*fuzz_entries.make_entries_input(rnd, scratch))
        elif name == "markers":
            import fuzz_markers

            fuzz_markers.run_markers_input(*fuzz_markers.make_markers_input(rnd, scratch))
        elif name == "kcat":
            import fuzz_kcat

            fuzz_kcat.run_kcat_input(*fuzz_kcat.make_kcat_input(rnd, scratch))
        elif name == "payloads":
            import fuzz_payloads

            fuzz_payloads.run_payloads_input(*fuzz_payloads.make_payloads_input(rnd, scratch))
        else:
            partition, logdir = t.make_partition_input(rnd, scratch)
            t.run_partition_input(rnd, partition, logdir)
            if args.mount_every:
                import fuzz_mount

                fuzz_mount.run_mount_input(partition, logdir, scratch)
        print("no finding")
        return 0

    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1 << 32)
    if args.out is None:
        args.out = tempfile.mkdtemp(prefix=f"kfs-fuzz-{args.seed}-")
    out = Path(args.out)
    env = dict(os.environ)
    sanitized = None
    if args.asan:
        sanitized = build_sanitized(out / "asan")
        env["KFS_PURE_PYTHON"] = "1"  # kfs's own build stays unloaded; the workers load the sanitized copy
        env["LD_PRELOAD"] = libasan()
        env["ASAN_OPTIONS"] = f"detect_leaks=0:halt_on_error=1:log_path={out}/sanitizer"
        env["UBSAN_OPTIONS"] = f"halt_on_error=1:print_stacktrace=1:log_path={out}/sanitizer"
    mode = "ASan+UBSan C path and pure Python, differential" if sanitized else (
        "pure Python" if env.get("KFS_PURE_PYTHON") else "C path and pure Python, differential")
    print(f"[fuzz] seed {args.seed}, {args.inputs} inputs, {args.workers} workers, {mode}, mix {args.mix}, "
          f"out {out}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    summary = Campaign(args, sanitized, env).run()
    print(json.dumps(summary, indent=1))
    bad = (summary["crashes"] + summary["hangs"] + summary["sanitizer_reports"] + summary["foreign_exceptions"]
           + summary["disagreements"] + summary["wrong_answers"] + summary["harness_errors"]
           + summary["view_disagreements"] + summary["mount_disagreements"])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
