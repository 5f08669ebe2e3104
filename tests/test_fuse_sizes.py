"""Tools that trust st_size get the whole file, on a fresh mount of a partition of over a million records.

`tar`, `rsync -a`, `cp`, `shutil.copyfile` (sendfile), `du -b`, `stat`, `seek(-200, 2)`, `mmap` and
`less` (G in a terminal) give what `kfs cat` prints, byte for byte. The mount has no background
scan: the first stat of each file must count its size itself. A second mount of the same data
finds every closed segment's map in the size cache (the daemon log says how many it found and
computed) and reports the same sizes.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import re
import shutil
import subprocess
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import run_kfs
from log_writers import write_log_dir
from mounts import mounted, needs_fuse

pytestmark = needs_fuse

RECORDS = 1_050_000
PARTITION = "bench-0"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_sha(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, bytes]]:
    """A log dir of one partition: 1.05 M records in 3 segments (the last active), and `kfs cat` of it."""
    work = tmp_path_factory.mktemp("big")
    logdir = work / "logdir"
    write_log_dir(str(logdir), RECORDS, 96 << 20, per_batch=500, value_size=20)
    done = run_kfs("cat", str(logdir), PARTITION)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(b"\n") >= 1_000_000
    yield logdir, done.stdout
    shutil.rmtree(work, ignore_errors=True)


def test_tools_that_trust_st_size_get_every_byte(big: tuple[Path, bytes], tmp_path: Path) -> None:
    logdir, expected = big
    with mounted(tmp_path, [str(logdir)], size_scan="no", size_cache=str(tmp_path / "cache")) as mnt:
        path = mnt / PARTITION / "messages.jsonl"
        assert os.stat(path).st_size == len(expected)  # the first request about the file
        assert subprocess.run(["stat", "-c", "%s", str(path)], capture_output=True, check=True
                              ).stdout.strip() == str(len(expected)).encode()
        assert subprocess.run(["du", "-b", str(path)], capture_output=True, check=True
                              ).stdout.split()[0] == str(len(expected)).encode()
        with path.open("rb") as f:
            f.seek(-200, os.SEEK_END)
            assert f.read() == expected[-200:]
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                assert len(mapped) == len(expected) and mapped[-300:] == expected[-300:]
                assert sha(mapped[:]) == sha(expected)
        want = sha(expected)
        shutil.copyfile(path, tmp_path / "copyfile")  # sendfile
        assert file_sha(tmp_path / "copyfile") == want
        subprocess.run(["cp", str(path), str(tmp_path / "cp")], check=True)
        assert file_sha(tmp_path / "cp") == want
        subprocess.run(["tar", "-cf", str(tmp_path / "t.tar"), "-C", str(mnt), f"{PARTITION}/messages.jsonl"],
                       check=True)
        with tarfile.open(tmp_path / "t.tar") as tar:
            member = tar.extractfile(f"{PARTITION}/messages.jsonl")
            assert member is not None and sha(member.read()) == want
        if shutil.which("rsync"):
            subprocess.run(["rsync", "-a", f"{mnt}/{PARTITION}/messages.jsonl", str(tmp_path / "rsync")], check=True)
            assert file_sha(tmp_path / "rsync") == want
        _less_shows_the_last_line(path, expected)
        # views from an offset and a time are suffixes, of the exact size, too
        middle = expected.index(b'"offset": 700000,')
        line_start = expected.rindex(b"\n", 0, middle) + 1
        assert os.stat(mnt / PARTITION / "offset" / "700000.jsonl").st_size == len(expected) - line_start
        with (mnt / PARTITION / "offset" / "700000.jsonl").open("rb") as f:
            f.seek(-100, os.SEEK_END)
            assert f.read() == expected[-100:]
        timestamp = int(re.search(rb'"timestamp": (\d+)', expected[line_start:line_start + 300]).group(1))
        assert os.stat(mnt / PARTITION / "time" / f"{timestamp}.jsonl").st_size <= len(expected) - line_start + 1
        for name in ("info.json", "offset/700000.value"):
            assert os.stat(mnt / PARTITION / name).st_size == len((mnt / PARTITION / name).read_bytes())


def _less_shows_the_last_line(path: Path, expected: bytes) -> None:
    if not shutil.which("tmux"):
        return
    last = expected.splitlines()[-1][:60].decode()
    session = f"kfs-less-big-{os.getpid()}"
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "400", "-y", "20", f"less -S {path}"],
                   check=True)
    try:
        time.sleep(0.3)
        subprocess.run(["tmux", "send-keys", "-t", session, "G"], check=True)
        screen = ""
        for _ in range(100):
            time.sleep(0.1)
            screen = subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True,
                                    check=True, text=True).stdout
            if last in screen:
                break
        assert last in screen
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False)


def test_a_second_mount_finds_every_closed_segment_in_the_cache(big: tuple[Path, bytes], tmp_path: Path) -> None:
    logdir, expected = big
    closed = len(list((logdir / PARTITION).glob("*.log"))) - 1
    cache = tmp_path / "cache"
    sizes = []
    for name in ("first", "second"):
        with mounted(tmp_path, [str(logdir)], name=name, size_cache=str(cache)) as mnt:
            log = tmp_path / f"{name}.log"
            for _ in range(600):  # the background scan says when it is done, and what the cache gave it
                found = re.search(r"size cache \S+: (\d+) segment maps found, (\d+) computed", log.read_text())
                if found:
                    break
                time.sleep(0.1)
            assert found, log.read_text()
            sizes.append(os.stat(mnt / PARTITION / "messages.jsonl").st_size)
            maps = (int(found.group(1)), int(found.group(2)))
            assert maps == ((0, closed) if name == "first" else (closed, 0))
    assert sizes == [len(expected)] * 2
    assert len(list(cache.rglob("*"))) >= closed  # kept outside the log dir ...
    assert not [p for p in logdir.rglob("*") if "kfs" in p.name or p.name.startswith(".tmp")]  # ... never in it


def test_tools_that_trust_st_size_fail_at_damage_instead_of_copying_less(tmp_path: Path) -> None:
    """A corrupt batch in a closed segment: st_size is the lines before it, one unreadable byte, and
    the lines of the segments after; cp, rsync, shutil.copyfile (sendfile) and tar fail rather than
    make a short copy; every byte before the damage is readable (the view is opened direct_io: a read
    that reaches the damage is short, the next fails), and so is what follows it."""
    logdir = tmp_path / "logdir"
    write_log_dir(str(logdir), 20_000, 512 << 10, per_batch=100, value_size=20)
    segments = sorted((logdir / PARTITION).glob("*.log"))
    assert len(segments) >= 3
    victim = bytearray(segments[1].read_bytes())
    victim[3 * (len(victim) // 7) + 16] ^= 0xFF  # somewhere inside a batch: its CRC no longer holds
    segments[1].write_bytes(bytes(victim))
    done = run_kfs("cat", str(logdir), PARTITION)
    assert done.returncode != 0  # the command meets the damage, after the lines before it
    before = done.stdout
    after = run_kfs("cat", str(logdir), PARTITION, "--offset", str(int(segments[2].stem))).stdout
    page = os.sysconf("SC_PAGE_SIZE")
    damaged_page = len(before) // page * page
    with mounted(tmp_path, [str(logdir)], expect_errors=True, size_scan="no", size_cache="none") as mnt:
        path = mnt / PARTITION / "messages.jsonl"
        assert os.stat(path).st_size == len(before) + 1 + len(after)
        fd = os.open(path, os.O_RDONLY)
        try:
            assert os.pread(fd, damaged_page, 0) == before[:damaged_page]
            assert os.pread(fd, 2 * page, damaged_page) == before[damaged_page:]  # up to the damage
            with pytest.raises(OSError):
                os.pread(fd, 100, len(before))
            next_page = damaged_page + page
            assert os.pread(fd, len(after), next_page) == after[next_page - len(before) - 1:]
        finally:
            os.close(fd)
        cat = subprocess.run(["cat", str(path)], capture_output=True)
        assert cat.returncode != 0 and cat.stdout == before
        assert subprocess.run(["cp", str(path), str(tmp_path / "cp")], capture_output=True).returncode != 0
        with pytest.raises(OSError):
            shutil.copyfile(path, tmp_path / "copyfile")  # sendfile: EIO, not a short copy
        if shutil.which("rsync"):
            assert subprocess.run(["rsync", "-a", str(path), str(tmp_path / "rsync")],
                                  capture_output=True).returncode != 0
        tar = subprocess.run(["tar", "-cf", str(tmp_path / "t.tar"), "-C", str(mnt), f"{PARTITION}/messages.jsonl"],
                             capture_output=True)
        assert tar.returncode != 0 and tar.stderr
