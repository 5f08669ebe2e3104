"""libfuse's cache options given with `-o` stand as given (`direct_io`, `attr_timeout`,
`entry_timeout`, `negative_timeout`), kfs's own values apply only to those not given, and
`kernel_cache` / `auto_cache` (which would keep a file's cached pages whatever changed under it)
are refused in one sentence. Until 2026-11-24 kfs overwrote them all in libfuse's init: a user's
`-o direct_io` or `-o attr_timeout=30` was accepted and silently did nothing."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from conftest import LOGDIRS, kfs_command, run_kfs
from mounts import mounted, needs_fuse

from kfs.fuse.mount import MountError, mount

pytestmark = needs_fuse

READ = re.compile(r"kfs\.requests: read_buf (\S+) (\d+) (\d+) -> ok")
GETATTR = re.compile(r"kfs\.requests: getattr (\S+) -> ")
BLOCK = 4096


def _largest_decoded(mountpoint: Path) -> Path:
    files = [p / "messages.jsonl" for p in mountpoint.iterdir() if (p / "messages.jsonl").exists()]
    return max(files, key=lambda f: f.stat().st_size)


def _reads(log: Path, path: str) -> list[tuple[int, int]]:
    """(size, offset) of each read request the daemon logged for `path` (the mount's own path)."""
    return [(int(m[2]), int(m[3])) for m in READ.finditer(log.read_text()) if m[1] == path]


def _dd_block(path: Path) -> bytes:
    """The second 4 KiB block of `path`, read by dd as a reader with small reads does."""
    return subprocess.run(["dd", f"if={path}", f"bs={BLOCK}", "count=1", "skip=1", "status=none"],
                          check=True, capture_output=True).stdout


def _read_three_times_then_whole(mountpoint: Path, relative: Path) -> tuple[list[bytes], bytes, bytes]:
    path = mountpoint / relative
    blocks = [_dd_block(path) for _ in range(3)]
    whole = subprocess.run(["cat", str(path)], check=True, capture_output=True).stdout
    tail = subprocess.run(["tail", "-n", "2", str(path)], check=True, capture_output=True).stdout
    return blocks, whole, tail


def test_direct_io_sends_every_read_to_the_daemon_and_reads_the_same_bytes(tmp_path: Path) -> None:
    with mounted(tmp_path, name="cached", verbose=True) as cached:
        relative = _largest_decoded(cached).relative_to(cached)
        assert (cached / relative).stat().st_size > 2 * BLOCK  # (the dd block is a whole one)
        cached_blocks, cached_whole, cached_tail = _read_three_times_then_whole(cached, relative)
    with mounted(tmp_path, name="direct", verbose=True, direct_io=True) as direct:
        assert (direct / relative).stat().st_size == len(cached_whole)
        direct_blocks, direct_whole, direct_tail = _read_three_times_then_whole(direct, relative)

    assert direct_whole == cached_whole and direct_tail == cached_tail
    assert direct_blocks == cached_blocks == [cached_whole[BLOCK:2 * BLOCK]] * 3
    mount_path = "/" + str(relative)
    # Page-cached: the block is asked for once (then served from the page cache); direct_io: every
    # dd asks the daemon, at dd's own size.
    cached_asks = [r for r in _reads(tmp_path / "cached.log", mount_path) if r[1] <= BLOCK < r[1] + r[0]]
    direct_asks = [r for r in _reads(tmp_path / "direct.log", mount_path) if r[1] <= BLOCK < r[1] + r[0]]
    assert len(cached_asks) == 1
    assert direct_asks[:3] == [(BLOCK, BLOCK)] * 3
    assert "direct_io on" in (tmp_path / "direct.log").read_text()
    assert "direct_io off" in (tmp_path / "cached.log").read_text()


@pytest.mark.parametrize(("options", "lookups"), [({}, 2), ({"attr_timeout": "30", "entry_timeout": "30"}, 1)])
def test_given_timeouts_stand_and_kfs_own_apply_otherwise(tmp_path: Path, options: dict[str, str],
                                                          lookups: int) -> None:
    """kfs's own timeouts are 1 s (a live partition's growth shows within it): a stat 1.3 s after the
    first asks the daemon again. Given 30 s, the kernel keeps the first answer."""
    with mounted(tmp_path, name="m", verbose=True, **options) as mountpoint:
        info = next(p for p in sorted(mountpoint.iterdir()) if (p / "info.json").exists()) / "info.json"
        first = os.stat(info)
        time.sleep(1.3)
        assert os.stat(info).st_size == first.st_size
    log = (tmp_path / "m.log").read_text()
    mount_path = "/" + str(info.relative_to(mountpoint))
    assert [m[1] for m in GETATTR.finditer(log)].count(mount_path) == lookups
    timeout = options.get("attr_timeout", "1")
    assert f"attr_timeout {timeout} s, entry_timeout {timeout} s" in log


@pytest.mark.parametrize("name", ["kernel_cache", "auto_cache"])
def test_options_that_would_keep_stale_pages_are_refused(tmp_path: Path, name: str) -> None:
    (tmp_path / "m").mkdir()
    with pytest.raises(MountError, match=f"{name} is not supported: kfs decides at each open"):
        mount([str(Path(__file__).parent / "fixtures" / "kafka-written" / "logdirs" / "broker-a")],
              str(tmp_path / "m"), {name: True})
    assert not os.path.ismount(tmp_path / "m")


def test_direct_io_serves_every_line_before_damage_then_fails(tmp_path: Path) -> None:
    """A CRC mismatch in the middle of a segment: `kfs cat` prints the lines before the damaged batch
    and fails; `cat` through a direct_io mount gets the same bytes, then EIO; so does a page-cached
    mount, which opens a view known to hold damage direct_io (kfs.fuse.tree._open_decoded)."""
    logdir = tmp_path / "logdir"
    shutil.copytree(LOGDIRS[0], logdir)
    segment = sorted((logdir / "orders-0").glob("*.log"))[0]
    with open(segment, "r+b") as f:
        f.seek(segment.stat().st_size // 2)
        f.write(b"\xff\xff\xff\xff")
    expected = run_kfs("cat", str(logdir), "orders-0")
    assert expected.returncode != 0 and b"CRC mismatch" in expected.stderr
    assert expected.stdout.count(b"\n") > 10  # (lines before the damage)

    def cat_through(name: str, **options: object) -> subprocess.CompletedProcess:
        with mounted(tmp_path, [str(logdir)], expect_errors=True, name=name, **options) as mountpoint:
            return subprocess.run(["cat", str(mountpoint / "orders-0" / "messages.jsonl")], capture_output=True)

    direct = cat_through("direct", direct_io=True)
    cached = cat_through("cached")
    assert direct.returncode != 0 and b"Input/output error" in direct.stderr
    assert direct.stdout == expected.stdout
    assert cached.returncode != 0 and cached.stdout == expected.stdout



@needs_fuse
@pytest.mark.parametrize("said", ["off", "no", "None"])
def test_every_way_of_saying_no_size_cache_means_none_never_a_directory(tmp_path: Path, said: str) -> None:
    """`-o size_cache=off` once made a cache directory named `off` where the user stood; a directory
    really named so is given as a path (`./off`)."""
    logdir = Path(__file__).parent / "fixtures" / "kafka-written" / "logdirs" / "broker-a"
    for given, made in ((said, []), (f"./{said}", [said])):
        (tmp_path / "m").mkdir()
        mounting = subprocess.run([*kfs_command(), "mount", "-o", f"size_cache={given}", str(logdir), "m"],
                                  cwd=tmp_path, capture_output=True, text=True, timeout=120)
        try:
            assert mounting.returncode == 0, mounting.stderr
            assert os.path.ismount(tmp_path / "m")
            assert _largest_decoded(tmp_path / "m").stat().st_size > 0
        finally:
            run_kfs("umount", str(tmp_path / "m"))
        assert not os.path.ismount(tmp_path / "m")
        (tmp_path / "m").rmdir()
        assert sorted(p.name for p in tmp_path.iterdir()) == made
