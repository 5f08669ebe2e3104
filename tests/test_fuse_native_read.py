"""Decoded files' READs answered in C from lines rendered ahead (kfs/fuse/native_read.py,
kfs/_native/csrc/fuse/read_windows.c), through real mounts with the native path on and off: the
bytes are `kfs cat`'s at any offset and size, with two readers, a release while another reads, a
window that moved on, a file that grows and a damaged view (still the Python path's answers)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import LOGDIRS, run_kfs, v2_batch, write_segment
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mounts import mounted, needs_fuse

from kfs.fuse import fast_small, native_read

pytestmark = [needs_fuse, pytest.mark.skipif(not (fast_small.available() and native_read.available()),
                                             reason="the C path needs the compiled module and mfusepy on libfuse 3")]

MIB = 1 << 20


def _batches(first: int, count: int, per_batch: int = 50, value_bytes: int = 120) -> list[tuple[bytes, list]]:
    out = []
    for base in range(first, first + count, per_batch):
        records = [(o, 1_700_000_000_000 + o, b"key-%d" % o, (b"v%d-" % o).ljust(value_bytes, b"x"), [])
                   for o in range(base, min(base + per_batch, first + count))]
        out.append((v2_batch(base, records, codec=base // per_batch % 2), records))
    return out


def _write_partition(logdir: Path, name: str, segments: list[tuple[int, int]], closed_last: bool = True) -> Path:
    """`segments`: (base offset, records) each; ~220 bytes of lines a record."""
    partition = logdir / name
    partition.mkdir(parents=True)
    for i, (base, count) in enumerate(segments):
        write_segment(str(partition), base, [[b] for b in _batches(base, count)],
                      closed=closed_last or i < len(segments) - 1)
    return partition


@pytest.fixture(scope="module")
def big_logdir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, bytes]]:
    """Two partitions of ~9 and ~4 MiB of lines, and what `kfs cat` prints for each."""
    logdir = tmp_path_factory.mktemp("native") / "logdir"
    _write_partition(logdir, "big-0", [(0, 16_000), (16_000, 14_000), (30_000, 12_000)])
    _write_partition(logdir, "big-1", [(0, 18_000)])
    expected = {}
    for name in ("big-0", "big-1"):
        done = run_kfs("cat", str(logdir), name)
        assert done.returncode == 0, done.stderr
        expected[name] = done.stdout
    assert len(expected["big-0"]) > 8 * MIB
    return logdir, expected


def _answered_in_c(log: Path) -> int | None:
    """The READs the daemon's windows answered, from its log at unmount (None: no window was used)."""
    deadline = time.monotonic() + 10
    while "small files answered in C" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)  # (the daemon's last lines come after unmount returns)
    found = re.findall(r"decoded READs answered in C: (\d+) \(.*, (\d+) gave up waiting;.*\)", log.read_text())
    if not found:
        return None
    answered, gave_up = found[-1]
    assert gave_up == "0"  # (a READ that waited 10 s for a renderer that did not render: a bug)
    return int(answered)


def _drop_pages(fd: int) -> None:
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # (the next reads go to the daemon again)


@pytest.fixture(scope="module", params=["yes", "no"])
def native_mount(request: pytest.FixtureRequest, big_logdir: tuple[Path, dict[str, bytes]],
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, bytes], str]]:
    logdir, expected = big_logdir
    tmp = tmp_path_factory.mktemp(f"mount-{request.param}")
    with mounted(tmp, [str(logdir)], native_read=request.param) as mnt:
        yield mnt, expected, request.param
    answered = _answered_in_c(tmp / "mnt.log")
    assert (answered or 0) > 0 if request.param == "yes" else answered is None


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lead=st.integers(0, 5 * MIB), reads=st.lists(st.tuples(st.integers(0, 10 * MIB), st.integers(1, 2 * MIB)),
                                                    min_size=1, max_size=6))
def test_reads_at_any_offset_and_size_are_kfs_cats_lines(native_mount: tuple[Path, dict[str, bytes], str],
                                                         lead: int, reads: list[tuple[int, int]]) -> None:
    """A fresh open, its pages dropped, read on from 0 for `lead` bytes (a window made and rendered
    ahead), then reads anywhere: behind the window, in it, just past it, far past it, past the end."""
    mnt, expected, _ = native_mount
    want = expected["big-0"]
    fd = os.open(mnt / "big-0" / "messages.jsonl", os.O_RDONLY)
    try:
        _drop_pages(fd)
        got, position = [], 0
        while position < lead:
            data = os.pread(fd, min(MIB, lead - position), position)
            if not data:
                break
            got.append(data)
            position += len(data)
        assert b"".join(got) == want[:position]
        for offset, size in reads:
            assert os.pread(fd, size, offset) == want[offset:offset + size], (offset, size)
    finally:
        os.close(fd)


def test_a_whole_read_then_reads_behind_and_past_the_window(native_mount: tuple[Path, dict[str, bytes], str]) -> None:
    """The window keeps ~2 MiB behind the furthest request: reads far behind it (pages dropped) come
    from the Python path (the cursor's seek), and a sequential read after them makes a new window."""
    mnt, expected, _ = native_mount
    want = expected["big-0"]
    with open(mnt / "big-0" / "messages.jsonl", "rb", buffering=0) as f:
        assert f.read() == want
        _drop_pages(f.fileno())
        for offset in (100, 3 * MIB + 7, len(want) - 5000, MIB):
            assert os.pread(f.fileno(), 300_000, offset) == want[offset:offset + 300_000]
        f.seek(MIB)
        assert f.read() == want[MIB:]


def test_two_readers_of_one_file_and_of_two_partitions(native_mount: tuple[Path, dict[str, bytes], str]) -> None:
    mnt, expected, _ = native_mount
    names = ["big-0", "big-1", "big-0", "big-1"]
    failures: list[str] = []

    def reader(name: str) -> None:
        for _ in range(3):
            with open(mnt / name / "messages.jsonl", "rb") as f:
                _drop_pages(f.fileno())
                if f.read() != expected[name]:
                    failures.append(name)

    threads = [threading.Thread(target=reader, args=(name,)) for name in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_releases_while_another_reads(native_mount: tuple[Path, dict[str, bytes], str]) -> None:
    """Files closed mid-read (their window and renderer going while READs may still wait on it) while
    another reader of the same partition reads on: every byte right, the daemon alive."""
    mnt, expected, _ = native_mount
    path = mnt / "big-0" / "messages.jsonl"
    want = expected["big-0"]
    stop = threading.Event()
    failures: list[str] = []

    def reader() -> None:
        while not stop.is_set():
            with open(path, "rb") as f:
                _drop_pages(f.fileno())
                if f.read() != want:
                    failures.append("whole read")

    steady = threading.Thread(target=reader)
    steady.start()
    try:
        for i in range(30):
            with open(path, "rb", buffering=0) as f:
                _drop_pages(f.fileno())
                part = f.read(MIB + i * 97_000)
                assert part == want[:len(part)]
    finally:
        stop.set()
        steady.join()
    assert failures == []
    assert (mnt / "big-1" / "messages.jsonl").read_bytes() == expected["big-1"]


def test_sequential_reads_are_answered_in_c_and_the_bytes_are_the_same(
        big_logdir: tuple[Path, dict[str, bytes]], tmp_path: Path) -> None:
    """`cat` of a fresh page-cached file: most READs from the window (the daemon's count at unmount),
    `-o native_read=no` none."""
    logdir, expected = big_logdir
    counts = {}
    for mode in ("yes", "no"):
        with mounted(tmp_path, [str(logdir)], name=f"mnt-{mode}", native_read=mode) as mnt:
            done = subprocess.run(["cat", str(mnt / "big-0" / "messages.jsonl")], capture_output=True, timeout=60)
            assert done.returncode == 0 and done.stdout == expected["big-0"]
        counts[mode] = _answered_in_c(tmp_path / f"mnt-{mode}.log")
    size = len(expected["big-0"])
    assert counts["no"] is None
    assert counts["yes"] is not None and counts["yes"] >= size // MIB // 2, counts  # (READs of 128 KiB to 1 MiB)


def test_a_file_that_grows_is_read_on_past_its_old_end(tmp_path: Path) -> None:
    """The renderer stops at the end of the file; the live segment grows; the reader's next READs past
    the old end come to the Python path, which serves them and gives the window the new lines."""
    logdir = tmp_path / "logdir"
    partition = _write_partition(logdir, "live-0", [(0, 12_000)], closed_last=False)
    segment = partition / f"{0:020d}.log"
    with mounted(tmp_path, [str(logdir)]) as mnt, open(mnt / "live-0" / "messages.jsonl", "rb") as f:
        first = f.read()
        assert first == run_kfs("cat", str(logdir), "live-0").stdout
        with open(segment, "ab") as log:
            for data, _ in _batches(12_000, 20_000):
                log.write(data)
        time.sleep(1.2)  # (the kernel's attr_timeout: the new size shows)
        rest = f.read()
    assert first + rest == run_kfs("cat", str(logdir), "live-0").stdout
    assert len(rest) > 4 * MIB
    assert (_answered_in_c(tmp_path / "mnt.log") or 0) > 0


@pytest.mark.parametrize("native", ["yes", "no"])
def test_a_damaged_view_is_still_the_python_paths(tmp_path: Path, native: str) -> None:
    """A view known to hold damage is direct_io (the FUSE_READ_LOCKOWNER rule, in Python): with the
    windows on, `cat` gets what `kfs cat` prints before the damage, then EIO, as without them."""
    logdir = tmp_path / "logdir"
    shutil.copytree(Path(LOGDIRS[0]) / "orders-0", logdir / "orders-0")
    shutil.copy(Path(LOGDIRS[0]) / "meta.properties", logdir)
    (logdir / "cleaner-offset-checkpoint").write_text("0\n0\n")
    segment = logdir / "orders-0" / f"{661:020d}.log"
    os.truncate(segment, segment.stat().st_size // 2)
    decoded = run_kfs("cat", str(logdir), "orders-0")
    assert decoded.returncode != 0 and decoded.stdout
    with mounted(tmp_path, [str(logdir)], expect_errors=True, native_read=native) as mnt:
        for _ in range(2):
            done = subprocess.run(["cat", str(mnt / "orders-0" / "messages.jsonl")], capture_output=True, timeout=60)
            assert done.returncode != 0 and b"Input/output error" in done.stderr
            assert done.stdout == decoded.stdout


def test_a_window_holds_its_pieces_until_dropped_forgotten_or_closed() -> None:
    """The Python side of a window, in process: pieces are kept only where the window ends, a seek
    (a Python READ elsewhere) or the idle closer drops them, and closing releases every one (each piece's
    reference back to what it was: no leak, no piece freed while the window holds it)."""
    from kfs._native import fuse as native

    assert native.read_windows_open is not None and native.read_windows_publish is not None
    assert native.read_windows_note is not None and native.read_windows_forget is not None
    assert native.read_windows_close is not None
    fh = (1 << 62) + 12345  # (no mount's handle)
    pieces = [bytes(range(200)) * 50, b"x" * 7]
    held = [sys.getrefcount(p) for p in pieces]
    assert native.read_windows_open(fh, 100)
    assert not native.read_windows_open(fh, 0)  # (one window a handle)
    assert not native.read_windows_publish(fh, 99, [b"y"])  # not where it ends
    assert native.read_windows_publish(fh, 100, [memoryview(p) for p in pieces])
    assert [sys.getrefcount(p) for p in pieces] == [n + 1 for n in held]  # (each through its view)
    assert native.read_windows_forget(fh) == 10_007
    assert [sys.getrefcount(p) for p in pieces] == held
    assert native.read_windows_publish(fh, 10_107, pieces)
    native.read_windows_note(fh, 5 * MIB, [b"z" * 10])  # a seek: the window moves, its pieces go
    assert [sys.getrefcount(p) for p in pieces] == held
    assert native.read_windows_publish(fh, 5 * MIB + 10, pieces)
    assert native.read_windows_close(fh) == 0  # (no READ answered: no mount)
    assert [sys.getrefcount(p) for p in pieces] == held
    assert native.read_windows_close(fh) == 0 and not native.read_windows_publish(fh, 0, pieces)
