"""The fuzz campaign's `entries` target: odd directory entries where a partition's files belong.

An input is a copy of a Kafka-written fixture partition (its log dir's checkpoints with it) in which
one to three names are given to something else: a segment's `.log` (an existing one, or one past the
log end), a `.index`, `.timeindex` or `.txnindex`, the log dir's `log-start-offset-checkpoint`,
`cleaner-offset-checkpoint` or `meta.properties` becomes a FIFO, a directory (empty or not), a
dangling symbolic link, a link to a good copy of the file outside the log dir or inside it, a socket,
a device (as root) or, for a `.log`, a regular file holding a secret instead of batches.

The oracle, from the intact partition (fuzz_targets.Truth): the records `kfs cat` prints are those of
the segments before the first odd `.log`, then its error (one sentence naming the file, or for the
secret "not a Kafka log segment"), and all of them where no `.log` is odd; `messages.jsonl` gives
the same on both paths (fuzz_targets' agreement check); read_committed gives the markers' answer;
`info()` answers and names every odd entry; no error text holds a byte of the secret or of a link's
target; and nothing blocks: the input runs under a wall-clock alarm, a FIFO opened by mistake fails it
as a hang instead of stalling the worker (the campaign's hang check counts CPU time, which a
blocked open() does not use).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import fuzz_targets as t
from fuzz_targets import Failure

from kfs.storage import KfsError
from kfs.storage.batch_walk import NOT_A_SEGMENT
from kfs.storage.files import NotARegularFile

KINDS = ("fifo", "directory", "full directory", "dangling symlink", "symlink outside", "symlink inside", "socket",
         "device")
CHECKPOINTS = ("log-start-offset-checkpoint", "cleaner-offset-checkpoint", "meta.properties")
SECRET = b"root:$6$kfsFUZZ$SECRETSECRETSECRET:19000:0:99999:7:::\n" * 8
ALARM_SECONDS = 20


class _Hang(BaseException):
    """Raised by the alarm: an input blocked (in open() on a FIFO, most likely)."""


@contextlib.contextmanager
def _alarm(seconds: int) -> Iterator[None]:
    """A wall-clock limit on the block (SIGALRM interrupts a blocked open(); the handler raises)."""
    def ring(signum, frame):  # type: ignore[no-untyped-def]
        raise _Hang

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _make(path: Path, kind: str, scratch: Path, good: Path | None) -> str:
    """Put an entry of `kind` at `path` (whatever was there goes); the kind made (device falls back
    to fifo where mknod is not permitted)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()
    if kind == "device":
        try:
            os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
            return kind
        except PermissionError:
            kind = "fifo"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "full directory":
        path.mkdir()
        (path / "00000000000000000000.log").write_bytes(SECRET)
    elif kind == "dangling symlink":
        os.symlink(scratch / "outside" / "no-such-file", path)
    elif kind in ("symlink outside", "symlink inside"):
        where = scratch / "outside" if kind == "symlink outside" else path.parent.parent
        where.mkdir(exist_ok=True)
        target = where / f"target-{path.name}"
        if good is not None and good.exists():
            shutil.copyfile(good, target)  # the right bytes: refused all the same, being a link
        else:
            target.write_bytes(SECRET)
        os.symlink(target, path)
    elif kind == "socket":
        here = os.getcwd()
        os.chdir(path.parent)  # a socket's path must fit in 108 bytes: bound by its name alone
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.bind(path.name)
        finally:
            os.chdir(here)
    elif kind == "secret":
        path.write_bytes(SECRET)
    else:
        raise ValueError(kind)
    return kind


def make_entries_input(rnd: random.Random, scratch: Path) -> tuple[str, Path, dict[str, str]]:
    """A fixture partition with odd entries; returns (partition, log dir, {path: kind})."""
    t.LAST_DAMAGE.clear()
    partition = rnd.choice(t.PARTITIONS)
    t.truth(partition)
    logdir = t.copy_partition(partition, scratch)
    shutil.rmtree(scratch / "outside", ignore_errors=True)
    (scratch / "outside").mkdir()
    pdir = logdir / partition
    source = next(d for d in sorted(t.LOGDIRS.iterdir()) if (d / partition).is_dir())
    segments = sorted(int(f.name[:-4]) for f in pdir.glob("*.log"))
    made: dict[str, str] = {}
    for _ in range(rnd.choice((1, 1, 1, 2, 3))):
        what = rnd.randrange(10)
        if what < 4:  # a segment's .log, or one past the log end
            base = rnd.choice(segments) if rnd.random() < 0.8 else t.truth(partition).log_end + rnd.choice((0, 7))
            path = pdir / f"{base:020d}.log"
            kind = rnd.choice((*KINDS, "secret", "secret"))
        elif what < 8:
            base = rnd.choice(segments)
            path = pdir / f"{base:020d}{rnd.choice(('.index', '.timeindex', '.txnindex'))}"
            kind = rnd.choice(KINDS)
        else:
            path = logdir / rnd.choice(CHECKPOINTS)
            kind = rnd.choice(KINDS)
        good = source / path.relative_to(logdir)
        made[str(path)] = _make(path, kind, scratch, good if good.exists() else None)
        t.LAST_DAMAGE.append(f"{path.relative_to(logdir)}: {made[str(path)]}")
    return partition, logdir, made


def _offsets(rendered: bytes) -> list[int]:
    return [json.loads(line)["offset"] for line in rendered.splitlines()]


def run_entries_input(partition: str, logdir: Path, made: dict[str, str]) -> None:
    """The oracle of the module docstring, on both paths, under the alarm."""
    try:
        with _alarm(ALARM_SECONDS):
            _run(partition, logdir, made)
    except _Hang:
        raise Failure("hang", f"{partition}: an input did not finish within {ALARM_SECONDS} s") from None


def _run(partition: str, logdir: Path, made: dict[str, str]) -> None:
    truth = t.truth(partition)
    pdir = str(logdir / partition)
    odd_logs = sorted((int(os.path.basename(p)[:-4]), p) for p in made if p.endswith(".log"))
    log_start = truth.log_start
    if str(logdir / "log-start-offset-checkpoint") in made:
        log_start = truth.segments[0]  # taken as missing: the first segment's base offset
    first_odd = odd_logs[0] if odd_logs else None
    end = first_odd[0] if first_odd else None
    expected = [o for b in truth.batches if not b.is_control and (end is None or b.segment < end)
                for o, _ in b.records if o >= log_start]
    checkpointed, truth.log_start = truth.log_start, log_start
    try:
        committed = truth.read_committed()  # (checked where no .log is odd)
    finally:
        truth.log_start = checkpointed
    if first_odd is not None:
        kind = made[first_odd[1]]
        expected_error = (NOT_A_SEGMENT if kind == "secret" else "not a regular file: kfs reads only regular files")
    results = {}
    for path in t.paths():
        t.use_path(path)
        plog = t.open_partition(logdir, partition)
        try:
            rendered, error = t._cat(plog)
            got = _offsets(rendered)
            if got != expected[:len(got)] or (first_odd is None and (error is not None or got != expected)):
                raise Failure("wrong-answer", f"{partition} ({path}): kfs cat gave {len(got)} records, error {error}; "
                                              f"expected {len(expected)} records then "
                                              f"{'an error' if first_odd else 'none'}")
            if first_odd is not None:
                caught = _first_error(plog)
                if caught is None or expected_error not in str(caught) or first_odd[1] not in str(caught):
                    raise Failure("wrong-answer", f"{partition} ({path}): the read did not end in the odd "
                                                  f"{first_odd[1]}'s error: {caught}")
                if kind != "secret" and (got != expected or error != "NotARegularFile"):
                    raise Failure("wrong-answer", f"{partition} ({path}): {len(got)} of the {len(expected)} records "
                                                  f"before the odd segment, then {error}")
            for size_first in (False, True):
                view = t._messages_jsonl(plog, size_first)
                if (rendered, error) != view and not (error == "NotARegularFile" and view[1] == "CorruptLogError"
                                                      and view[0] == rendered):
                    raise Failure("view-disagreement", f"{partition} ({path}): kfs cat {len(rendered)} bytes, error "
                                                       f"{error}; messages.jsonl {len(view[0])} bytes, error {view[1]}")
            try:
                read = [r.offset for r in plog.records(isolation="read_committed")]
                committed_error = None
            except KfsError as e:
                read, committed_error = [], e
            if first_odd is None and (committed_error is not None or read != committed):
                raise Failure("wrong-answer", f"{partition} ({path}): read_committed gave {len(read)} records, "
                                              f"the markers say {len(committed)}")
            info = plog.info()
            listed = json.dumps(info)
            for odd in made:  # (an odd checkpoint is said in the log, not in a partition's info)
                if odd.startswith(pdir + "/") and not odd.endswith(".log") and odd not in listed:
                    raise Failure("wrong-answer", f"{partition}: info() does not name the odd {odd} ({made[odd]})")
            if first_odd is not None and first_odd[1] not in listed:
                raise Failure("wrong-answer", f"{partition}: info() does not name the odd {first_odd[1]}")
            said = listed + str(error) + str(committed_error) + str(_first_error(plog))
            if "SECRET" in said or "magic" in said:
                raise Failure("leak", f"{partition} ({path}): an error shows what a file that is no segment holds")
            results[path] = (rendered, error, read)
        except Failure:
            raise
        except _Hang:
            raise
        except Exception as e:
            raise Failure("exception", f"{partition} ({path}): {type(e).__name__}: {e}") from e
        finally:
            plog.close()
    if len(results) == 2 and results["c"] != results["python"]:
        raise Failure("disagreement", f"{partition}: C and Python paths differ")


def _first_error(plog) -> KfsError | None:  # type: ignore[no-untyped-def]
    try:
        for _ in plog.record_lists(plog.log_start_offset()):
            pass
    except KfsError as e:
        return e
    return None


__all__ = ["NotARegularFile", "make_entries_input", "run_entries_input"]
