"""Odd entries where a partition's files belong, through a real mount (the commands' side:
tests/test_storage_odd_entries.py). A FIFO named like a segment used to block daemon threads in
open() and the clients behind them; a directory or a dangling symlink failed the partition's whole
`messages.jsonl` at open. Now an odd segment is damage at its first byte: the partition's other
files and the log dir's other partitions are served, `info.json` names it, a read that reaches it
is EIO after the data before it. Every client runs under a timeout, and a FIFO left blocking a
reader is opened for writing at the end, so a hang fails the test instead of wedging the run.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from conftest import GOLDEN, LOGDIRS, read_jsonl, run_kfs
from mounts import daemon_errors, golden_value, mounted, needs_fuse
from test_storage_odd_entries import NOT_REGULAR, copy_logdir, make_odd, what

pytestmark = needs_fuse
TIMEOUT = 20


def unstick(fifos: list[Path]) -> None:
    """Open each FIFO for writing and close it: whoever blocks in open() for reading returns."""
    for fifo in fifos:
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


def client(args: list[str], fifos: list[Path]) -> subprocess.CompletedProcess:
    """A client of the mount under a timeout; a hung one fails the test (after being released)."""
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        deadline = time.monotonic() + 30
        while process.poll() is None and time.monotonic() < deadline:
            unstick(fifos)
            time.sleep(0.2)
        pytest.fail(f"{' '.join(args)} did not finish within {TIMEOUT} s (blocked on an odd entry?)")
    return subprocess.CompletedProcess(args, process.returncode, out, err)


def read(path: Path, fifos: list[Path]) -> subprocess.CompletedProcess:
    return client(["cat", str(path)], fifos)


@contextlib.contextmanager
def mounted_odd(tmp_path: Path, logdir: Path, fifos: list[Path], **options: object):
    try:
        with mounted(tmp_path, [str(logdir)], expect_errors=True, **options) as mnt:
            try:
                yield mnt
            finally:
                unstick(fifos)
    finally:
        unstick(fifos)


@pytest.mark.parametrize("kind", ["fifo", "directory", "dangling symlink", "symlink outside"])
def test_an_odd_segment_through_the_mount(tmp_path: Path, kind: str) -> None:
    logdir = copy_logdir(tmp_path, ("orders-0", "legacy-0"))
    odd = logdir / "orders-0" / f"{661:020d}.log"
    make_odd(odd, kind, tmp_path)
    fifos = [odd] if kind == "fifo" else []
    sentence = f"{odd} is {what(kind)}, {NOT_REGULAR}"
    healthy = run_kfs("cat", LOGDIRS[0], "orders-0").stdout.splitlines(keepends=True)
    records = read_jsonl(GOLDEN / "orders-0" / "records.jsonl")
    before_bytes = b"".join(healthy[:sum(1 for r in records if r["offset"] < 661)])
    raw_before = b"".join((Path(LOGDIRS[0]) / "orders-0" / f"{b:020d}.log").read_bytes() for b in (0, 313))

    with mounted_odd(tmp_path, logdir, fifos) as mnt:
        listed = client(["ls", str(mnt)], fifos)
        assert listed.stdout.split() == [b"legacy-0", b"orders-0"]
        part = mnt / "orders-0"
        info = read(part / "info.json", fifos)
        assert info.returncode == 0, info.stderr
        problems = {s["base_offset"]: s["problems"] for s in json.loads(info.stdout)["segments"]}
        assert [b for b, p in problems.items() if p] == [661] and problems[661] == [sentence]

        other = read(mnt / "legacy-0" / "messages.jsonl", fifos)  # the rest of the log dir is served
        assert other.returncode == 0 and other.stdout == run_kfs("cat", LOGDIRS[0], "legacy-0").stdout

        assert os.stat(part / "messages.jsonl").st_size > len(before_bytes)  # the lines, then the damage
        done = read(part / "messages.jsonl", fifos)
        assert done.returncode != 0 and b"Input/output error" in done.stderr
        assert done.stdout == before_bytes  # every line before the odd entry (direct_io: kfs.fuse.tree)

        raw = client(["dd", f"if={part / 'offset' / '0'}", "bs=1024"], fifos)
        assert raw.returncode != 0 and b"Input/output error" in raw.stderr and raw.stdout == raw_before

        with pytest.raises(OSError) as lost:
            (part / "offset" / "700.value").read_bytes()
        assert lost.value.errno == errno.EIO  # the record was there, not "no such offset"
        after = next(r for r in records if r["offset"] >= 940)
        assert (part / "offset" / "940.value").read_bytes() == golden_value(after["value"])
        tail = read(part / "offset" / "940.jsonl", fifos)
        assert tail.returncode == 0 and tail.stdout == b"".join(
            line for line in healthy if json.loads(line)["offset"] >= 940)
    errors = "\n".join(daemon_errors(tmp_path / "mnt.log"))
    assert sentence in errors and "SECRET" not in (tmp_path / "mnt.log").read_text()


def test_odd_index_files_through_a_read_committed_mount(tmp_path: Path) -> None:
    """An odd `.index`, `.timeindex` and `.txnindex`: every record is still served, read_committed
    follows the markers, and info.json names each file."""
    logdir = copy_logdir(tmp_path, ("payments-0",))
    part = logdir / "payments-0"
    make_odd(part / f"{119:020d}.index", "fifo", tmp_path)
    make_odd(part / f"{256:020d}.timeindex", "directory", tmp_path)
    make_odd(part / f"{378:020d}.txnindex", "fifo", tmp_path)
    fifos = [part / f"{119:020d}.index", part / f"{378:020d}.txnindex"]
    expected = run_kfs("cat", LOGDIRS[1], "payments-0", "--isolation", "read_committed").stdout
    records = read_jsonl(GOLDEN / "payments-0" / "records.jsonl")
    middle = next(r for r in records if r["offset"] >= 300)
    from_time = run_kfs("cat", LOGDIRS[1], "payments-0", "--isolation", "read_committed",
                        "--time", str(middle["timestamp"])).stdout

    with mounted_odd(tmp_path, logdir, fifos, isolation="read_committed") as mnt:
        done = read(mnt / "payments-0" / "messages.jsonl", fifos)
        assert done.returncode == 0 and done.stdout == expected
        timed = read(mnt / "payments-0" / "time" / f"{middle['timestamp']}.jsonl", fifos)
        assert timed.returncode == 0 and timed.stdout == from_time
        info = json.loads(read(mnt / "payments-0" / "info.json", fifos).stdout)
        problems = {s["base_offset"]: s["problems"] for s in info["segments"]}
        assert [b for b, p in problems.items() if p] == [119, 256, 378]
