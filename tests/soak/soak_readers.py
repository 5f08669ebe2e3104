"""The soak's readers: real tools and plain reads through one kfs mount, each answer checked.

Each reader loops until told to stop and keeps a `Tally`: reads, bytes checked, wrong answers
(any byte that is not what the writer wrote, a record missing where the log has no gap, a
lookup landing on the wrong record), errors a vanishing segment explains (EIO/ENOENT while the
writer deleted or swapped one), and other errors (failures).
"""

from __future__ import annotations

import errno
import json
import random
import re
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from soak import soak_records as R
from soak.soak_check import Oracle

KERNEL_TRUSTS_STAT = 2.0  # seconds (kfs.fuse.tree.KERNEL_TRUSTS_STAT)
MARGIN = 400  # offsets kept away from the log end: the last announced batch may not be on disk yet


@dataclass
class Tally:
    reads: int = 0
    bytes: int = 0
    wrong: list[str] = field(default_factory=list)
    expected_errors: int = 0
    errors: list[str] = field(default_factory=list)
    notes: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def read(self, n: int) -> None:
        with self.lock:
            self.reads += 1
            self.bytes += n

    def bad(self, problem: str) -> None:
        with self.lock:
            self.wrong.append(problem)

    def note(self, what: str) -> None:
        with self.lock:
            self.notes[what] = self.notes.get(what, 0) + 1

    def error(self, oracle: Oracle, started: float, what: str) -> None:
        """An error: expected when a segment vanished around the read, else a failure."""
        oracle.update()  # the change may be newer than our copy of the manifest
        with self.lock:
            if oracle.changed_between(started, time.monotonic()):
                self.expected_errors += 1
            else:
                self.errors.append(what)


def _checked(oracle: Oracle, check, *args):
    """A check, repeated once after reading the manifest again (the reader may be ahead of our copy)."""
    problem = check(*args)
    if problem:
        oracle.update()
        problem = check(*args)
    return problem


def _is_line_start(piece: bytes) -> bool:
    """`piece` is how a line the writer wrote begins (of the record its offset names, if it has one)."""
    found = re.search(rb'"offset": (\d+),', piece)
    if found is not None:
        return R.expected_line(int(found.group(1))).startswith(piece)
    head = R.expected_line(0).split(b'"offset": ')[0] + b'"offset": '
    return head.startswith(piece) or (piece.startswith(head) and piece[len(head):].isdigit())


def _pick(oracle: Oracle, rng: random.Random) -> int | None:
    start, end = oracle.window()
    return rng.randrange(start, end - MARGIN) if end - MARGIN > start else None


def _check_lines(oracle: Oracle, tally: Tally, data: bytes, first: int | None, name: str) -> int | None:
    """Complete lines of a decoded view: each the record at its offset, in order, no record left out."""
    last = None
    for line in data.splitlines(keepends=True):
        if not line.endswith(b"\n"):
            break
        problem = _checked(oracle, oracle.check_line, line)
        if problem:
            tally.bad(f"{name}: {problem}")
            return last
        offset = json.loads(line)["offset"]
        start = last if last is not None else (first - 1 if first is not None else None)
        if start is not None:
            missing = _checked(oracle, oracle.check_gap, start, offset)
            if missing:
                tally.bad(f"{name}: records {missing[:5]} left out before offset {offset}")
        last = offset
    return last


class Readers:
    def __init__(self, mountpoint: Path, oracle: Oracle, seed: int, keep: bool = False) -> None:
        self.dir = mountpoint / R.PARTITION_DIR
        self.mountpoint = mountpoint
        self.oracle = oracle
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.tallies = {name: Tally() for name in ("tail -f", "cat offset/N", "offset/N.value|.jsonl",
                                                   "time/T[.value|.jsonl]", "grep -r")}
        self.tail_last = -1
        self.tail_process: subprocess.Popen | None = None
        self.keep = keep
        self.tail_copy = open(mountpoint.parent / "tail.out", "wb") if keep else None  # noqa: SIM115
        self.threads = [threading.Thread(target=getattr(self, f), name=f, daemon=True)
                        for f in ("_tail", "_raw", "_values", "_times", "_grep")]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def finish(self) -> None:
        self.stop.set()
        if self.tail_process is not None:
            self.tail_process.terminate()
        for thread in self.threads:
            thread.join(timeout=60)

    def _pause(self, seconds: float) -> None:
        self.stop.wait(seconds * (0.5 + self.rng.random()))

    # ---- tail -f messages.jsonl -----------------------------------------------------------------

    def _tail(self) -> None:
        tally = self.tallies["tail -f"]
        while not self.stop.is_set():
            started = time.monotonic()
            process = self.tail_process = subprocess.Popen(
                ["tail", "-n", "+1", "-f", str(self.dir / "messages.jsonl")],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            assert process.stdout is not None and process.stderr is not None
            last = None
            for line in process.stdout:
                if self.tail_copy is not None:
                    self.tail_copy.write(line)
                tally.read(len(line))
                if not line.endswith(b"\n"):
                    # The last piece tail printed before it ended (a read error): a line cut where its
                    # last read stopped, which must be the start of the right line; judged when tail's
                    # exit status is known.
                    cut = line[line.rfind(b'{"topic": '):] if b'{"topic": ' in line else line
                    process.wait()
                    if process.returncode == 0 or not _is_line_start(cut):
                        tally.bad(f"tail -f: a cut line {cut[:120]!r}")
                    else:
                        tally.note("last line cut by tail's read error")
                    continue
                restart = line.rfind(b'{"topic": ')
                if restart > 0 and _checked(self.oracle, self.oracle.check_line, line):
                    # tail saw st_size below what it had read ("file truncated": the log start moved,
                    # or the cleaner shrank the partition) and printed the file again from its start,
                    # after the part of a line it had: checked against tail's own messages at the end.
                    tally.note("restarted mid-line (tail: file truncated)")
                    line, last = line[restart:], None
                problem = _checked(self.oracle, self.oracle.check_line, line)
                if problem:
                    tally.bad(f"tail -f: {problem}")
                    continue
                offset = json.loads(line)["offset"]
                if last is not None and offset <= last:
                    tally.note("restarted from the top (tail: file truncated)")
                    last = None
                elif last is not None:
                    missing = _checked(self.oracle, self.oracle.check_gap, last, offset)
                    if missing:
                        tally.bad(f"tail -f: records {missing[:5]} left out between {last} and {offset}")
                last = offset
                self.tail_last = max(self.tail_last, offset)
            process.wait()
            said = process.stderr.read().decode(errors="replace").strip()
            if said:
                for message in said.splitlines():
                    tally.note("tail said: " + message.replace(str(self.dir / "messages.jsonl"), "messages.jsonl"))
            if not self.stop.is_set():
                tally.error(self.oracle, started, f"tail -f ended (exit {process.returncode}): {said[:200]}")
                tally.note("tail -f restarted")
                self._pause(0.3)

    # ---- cat offset/<N> -------------------------------------------------------------------------

    def _raw(self) -> None:
        tally = self.tallies["cat offset/N"]
        while not self.stop.wait(0):
            self.oracle.update()
            n = _pick(self.oracle, self.rng)
            if n is None:
                self._pause(0.5)
                continue
            spec = self.rng.choice([str(n)] * 6 + ["earliest", "latest", f"-{self.rng.randrange(1, 3000)}"])
            started = time.monotonic()
            done = subprocess.run(["cat", str(self.dir / "offset" / spec)], capture_output=True)
            tally.read(len(done.stdout))
            problems = _checked(self.oracle, self.oracle.check_raw, done.stdout, n if spec == str(n) else None)
            if done.returncode:
                tally.error(self.oracle, started, f"cat offset/{spec}: {done.stderr.decode().strip()}")
                problems = [p for p in problems if "cut short" not in p and "stray bytes" not in p]
            for problem in problems:
                tally.bad(f"cat offset/{spec}: {problem}")
            self._pause(0.3)

    # ---- offset/<N>.value and offset/<N>.jsonl --------------------------------------------------

    def _values(self) -> None:
        tally = self.tallies["offset/N.value|.jsonl"]
        while not self.stop.wait(0):
            self.oracle.update()
            n = _pick(self.oracle, self.rng)
            if n is None:
                self._pause(0.5)
                continue
            started = time.monotonic()
            try:
                data = (self.dir / "offset" / f"{n}.value").read_bytes()
                tally.read(len(data))
                problem = _checked(self.oracle, self.oracle.check_value, n, data)
                if problem:
                    tally.bad(problem)
            except FileNotFoundError:
                self.oracle.update()
                if not self.oracle.absent_ok(n):
                    tally.error(self.oracle, started, f"offset/{n}.value: ENOENT, but the record is there")
            except OSError as e:
                tally.error(self.oracle, started, f"offset/{n}.value: {e.strerror}")
            started = time.monotonic()
            try:
                with open(self.dir / "offset" / f"{n}.jsonl", "rb") as f:
                    data = f.read(1 << 16)
                tally.read(len(data))
                _check_lines(self.oracle, tally, data, n, f"offset/{n}.jsonl")
            except OSError as e:
                if e.errno != errno.ENOENT or not self.oracle.absent_ok(n):
                    tally.error(self.oracle, started, f"offset/{n}.jsonl: {e.strerror}")
            self._pause(0.1)

    # ---- time/<T>.value, time/<T>.jsonl, time/<T> -----------------------------------------------

    def _times(self) -> None:
        tally = self.tallies["time/T[.value|.jsonl]"]
        while not self.stop.wait(0):
            self.oracle.update()
            n = _pick(self.oracle, self.rng)
            if n is None:
                self._pause(0.5)
                continue
            t = R.timestamp(n) + self.rng.choice((0, 0, 1))
            started = time.monotonic()
            try:
                value = (self.dir / "time" / f"{t}.value").read_bytes()
                with open(self.dir / "time" / f"{t}.jsonl", "rb") as f:
                    first = f.readline()
                with open(self.dir / "time" / str(t), "rb") as f:
                    raw = f.read(1 << 16)
            except OSError as e:
                tally.error(self.oracle, started, f"time/{t}: {e.strerror}")
                self._pause(0.1)
                continue
            tally.read(len(value) + len(first) + len(raw))
            problem = _checked(self.oracle, self.oracle.check_line, first)
            if problem:
                tally.bad(f"time/{t}.jsonl: {problem}")
            else:
                offset = json.loads(first)["offset"]
                problem = _checked(self.oracle, self.oracle.check_time_answer, t, offset)
                if problem:
                    tally.bad(f"time/{t}.jsonl: {problem}")
                at = R.offset_of_value(value)
                if at is None and value == b"" and R.value(offset) is None:
                    at = offset  # a tombstone's empty value: the record the .jsonl names
                if at is None:
                    tally.bad(f"time/{t}.value: {value[:60]!r} is no value the writer wrote")
                else:
                    problem = (_checked(self.oracle, self.oracle.check_value, at, value)
                               or _checked(self.oracle, self.oracle.check_time_answer, t, at))
                    if problem:
                        tally.bad(f"time/{t}.value: {problem}")
                for problem in _checked(self.oracle, self.oracle.check_raw, raw, None):
                    if "cut short" not in problem and "stray bytes" not in problem:  # read(64 KiB) cuts
                        tally.bad(f"time/{t}: {problem}")
            self._pause(0.1)

    # ---- grep -r across the mount ---------------------------------------------------------------

    def _grep(self) -> None:
        tally = self.tallies["grep -r"]
        pattern = "caf\u00e9"
        while not self.stop.wait(0):
            self.oracle.update()
            started = time.monotonic()
            # The kernel trusts a size for its attribute timeout (1 s): a file may end where the log
            # ended that long ago. Records announced before then must be there.
            end_before = self.oracle.log_end_at(started - KERNEL_TRUSTS_STAT)
            done = subprocess.run(["grep", "-r", "-h", "-a", pattern, str(self.mountpoint)], capture_output=True)
            tally.read(len(done.stdout))
            if done.returncode > 1:
                tally.error(self.oracle, started, f"grep -r: {done.stderr.decode().strip()[:200]}")
            lines = done.stdout.splitlines(keepends=True)
            found = set()
            for line in lines:
                problem = _checked(self.oracle, self.oracle.check_line, line)
                if problem or pattern.encode() not in line:
                    tally.bad(f"grep -r: {problem or 'a line without the pattern'}")
                    continue
                found.add(json.loads(line)["offset"])
            if done.returncode <= 1:
                self.oracle.update()
                start_after, _ = self.oracle.window()
                missed = [o for o in range(start_after, end_before - MARGIN)
                          if o not in found and not self.oracle.absent_ok(o) and self.oracle.is_record(o)
                          and pattern.encode() in (R.value(o) or b"")]
                if missed:
                    tally.bad(f"grep -r: records {missed[:5]} ({len(missed)}) not found")
                    if self.keep:
                        (self.mountpoint.parent / f"grep-{time.time():.0f}.out").write_bytes(done.stdout)
            self._pause(8)
