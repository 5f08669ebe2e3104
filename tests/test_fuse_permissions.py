"""Nothing more readable through an `allow_other` mount than on disk (issue 28), as user nobody.

The daemon runs as root and reads everything; the kernel lets another user through by the owner,
group and mode kfs reports (`default_permissions`). Each test sets modes on disk, mounts, and
compares what user nobody (65534, no groups) may read through the mount with what it may read on
disk: a view made from several files is no more open than the most closed of them (kfs.fuse.access).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import offsets_log as ol
import pytest
from conftest import v2_batch, write_segment
from hypothesis import given, settings
from hypothesis import strategies as st
from mounts import mounted, needs_fuse

from kfs.fuse.access import Access, as_directory, as_search, combined, narrow, suffixes

as_root = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv")

T0 = 1_700_000_000_000
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def as_nobody(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run([*NOBODY, *command], capture_output=True, timeout=60)


def nobody_reads(path: Path) -> bool:
    """Whether user nobody can read the file (`cat`) or list the directory (`ls`) at `path`."""
    done = as_nobody("ls" if path.is_dir() else "cat", str(path))
    if done.returncode != 0:
        assert b"Permission denied" in done.stderr, done.stderr
    return done.returncode == 0


@pytest.fixture
def shared() -> Iterator[Path]:
    """A directory user nobody can reach (pytest's tmp_path is root's, 0700)."""
    base = Path(tempfile.mkdtemp(prefix="kfs-test-perm-", dir="/tmp"))
    os.chmod(base, 0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def write_partition(directory: Path, segments: list[tuple[int, int, int]]) -> None:
    """Segments of (first offset, records, mode of the .log); record o: key k<o>, value v<o>, time T0 + o s."""
    directory.mkdir(parents=True)
    for first, count, mode in segments:
        rows = [(o, T0 + o * 1000, f"k{o}".encode(), f"v{o}".encode(), []) for o in range(first, first + count)]
        write_segment(str(directory), first, [[(v2_batch(first, rows), rows)]])
        os.chmod(directory / f"{first:020d}.log", mode)


@needs_fuse
@as_root
def test_a_record_in_a_0600_segment_is_refused_in_every_view_that_holds_it(shared: Path) -> None:
    logdir = shared / "logdir"
    part = logdir / "t-0"
    write_partition(part, [(0, 5, 0o644), (5, 5, 0o600), (10, 5, 0o644)])
    os.chmod(logdir, 0o755)
    assert nobody_reads(part / f"{0:020d}.log") and not nobody_reads(part / f"{5:020d}.log")
    with mounted(shared, [str(logdir)], allow_other=True) as mnt:
        p = mnt / "t-0"
        refused = ["messages.jsonl", "offset/earliest.jsonl", "offset/0.jsonl", "offset/5.jsonl", "offset/7.jsonl",
                   "offset/9.jsonl", "offset/7.value", f"time/{T0}.jsonl", f"time/{T0 + 6000}.jsonl", "offset/0",
                   "offset/5", f"time/{T0}"]
        readable = ["offset/10.jsonl", "offset/12.jsonl", "offset/-3.jsonl", "offset/latest.jsonl", "offset/2.value",
                    "offset/12.value", "offset/10", f"time/{T0 + 11000}.jsonl", f"time/{T0 + 11000}",
                    "info.json"]
        assert {name: nobody_reads(p / name) for name in refused} == dict.fromkeys(refused, False)
        assert {name: nobody_reads(p / name) for name in readable} == dict.fromkeys(readable, True)
        assert nobody_reads(mnt) and nobody_reads(p)
        # what nobody reads is what root reads
        assert as_nobody("cat", str(p / "offset/10.jsonl")).stdout == (p / "offset/10.jsonl").read_bytes()
        assert [json.loads(line)["offset"] for line in (p / "offset/10.jsonl").read_bytes().splitlines()] == \
            list(range(10, 15))
        assert as_nobody("cat", str(p / "offset/2.value")).stdout == b"v2"
        assert len((p / "messages.jsonl").read_bytes().splitlines()) == 15  # root still reads everything
        for name in ("messages.jsonl", "offset/0.jsonl", "offset/0"):
            assert stat.S_IMODE(os.stat(p / name).st_mode) == 0o400, name
        for name in ("offset/10.jsonl", "offset/10", "offset/2.value"):
            assert stat.S_IMODE(os.stat(p / name).st_mode) == 0o444, name


@needs_fuse
@as_root
def test_the_root_and_partition_dirs_are_no_more_open_than_their_log_dirs(shared: Path) -> None:
    open_dir, closed_dir = shared / "a", shared / "b"
    write_partition(open_dir / "pub-0", [(0, 3, 0o644)])
    write_partition(closed_dir / "sec-0", [(0, 3, 0o644)])
    os.chmod(open_dir, 0o755)
    # 0711: on disk nobody may not list b, but may read b/sec-0's files by name
    os.chmod(closed_dir, 0o711)
    assert nobody_reads(closed_dir / "sec-0" / f"{0:020d}.log") and not nobody_reads(closed_dir)
    assert nobody_reads(closed_dir / "sec-0")
    with mounted(shared, [str(open_dir), str(closed_dir)], allow_other=True, name="mnt711") as mnt:
        assert stat.S_IMODE(os.stat(mnt).st_mode) == 0o711
        assert stat.S_IMODE(os.stat(mnt / "sec-0").st_mode) == 0o755  # reachable on disk, listable
        assert stat.S_IMODE(os.stat(mnt / "pub-0").st_mode) == 0o755
        assert not nobody_reads(mnt)
        for name in ("sec-0", "sec-0/messages.jsonl", "sec-0/offset/1.value", "sec-0/info.json", "pub-0",
                     "pub-0/messages.jsonl"):
            assert nobody_reads(mnt / name), name
    # 0700: on disk nothing of b is nobody's; through the mount, nothing at all (the root is b's too)
    os.chmod(closed_dir, 0o700)
    assert not nobody_reads(closed_dir / "sec-0" / f"{0:020d}.log")
    with mounted(shared, [str(open_dir), str(closed_dir)], allow_other=True, name="mnt700") as mnt:
        assert stat.S_IMODE(os.stat(mnt).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(mnt / "sec-0").st_mode) == 0o700
        for path in (mnt, mnt / "sec-0", mnt / "sec-0/messages.jsonl", mnt / "sec-0/offset/0.jsonl",
                     mnt / "sec-0/info.json", mnt / "sec-0/offset/1.value", mnt / "pub-0/messages.jsonl"):
            assert not nobody_reads(path), path
    with mounted(shared, [str(closed_dir)], allow_other=True, name="mnt-b") as mnt:
        assert not nobody_reads(mnt) and not nobody_reads(mnt / "sec-0/messages.jsonl")
    with mounted(shared, [str(open_dir)], allow_other=True, name="mnt-a") as mnt:  # open data stays open
        for name in ("", "pub-0", "pub-0/messages.jsonl", "pub-0/offset/0", "pub-0/offset/1.value",
                     "pub-0/info.json"):
            assert nobody_reads(mnt / name), name


@needs_fuse
@as_root
def test_a_partition_dir_closed_inside_an_open_log_dir(shared: Path) -> None:
    logdir = shared / "logdir"
    write_partition(logdir / "pub-0", [(0, 3, 0o644)])
    write_partition(logdir / "sec-0", [(0, 3, 0o644)])
    os.chmod(logdir, 0o755)
    os.chmod(logdir / "sec-0", 0o700)
    with mounted(shared, [str(logdir)], allow_other=True) as mnt:
        assert nobody_reads(mnt) and nobody_reads(mnt / "pub-0/messages.jsonl")
        for name in ("sec-0", "sec-0/messages.jsonl", "sec-0/info.json", "sec-0/offset/0.value"):
            assert not nobody_reads(mnt / name), name


def write_offsets(logdir: Path) -> None:
    writer = ol.PartitionWriter(str(logdir), 0)
    writer.append([(1000, ol.offset_commit_key("g", "t", 0), ol.offset_commit_value(5, "", 1000, 0))])
    writer.close()


@needs_fuse
@as_root
@pytest.mark.parametrize("mode", [0o644, 0o600])
def test_groups_files_are_no_more_open_than_the_consumer_offsets_segments(shared: Path, mode: int) -> None:
    logdir = shared / "logdir"
    write_offsets(logdir)
    os.chmod(logdir, 0o755)
    segments = list((logdir / "__consumer_offsets-0").glob("*.log"))
    assert segments
    for segment in segments:
        os.chmod(segment, mode)
    on_disk = nobody_reads(segments[0])
    assert on_disk == (mode == 0o644)
    with mounted(shared, [str(logdir)], allow_other=True) as mnt:
        groups = mnt / ".groups"
        assert json.loads((groups / "g.json").read_bytes())["offsets"][0]["offset"] == 5  # root reads it
        for path in (groups / "g.json", groups / "all.jsonl", groups / "g" / "at" / "2000.json",
                     mnt / "__consumer_offsets-0" / "messages.jsonl"):
            assert nobody_reads(path) == on_disk, path
        assert nobody_reads(groups) == on_disk
        assert nobody_reads(mnt)  # the log dir itself is open


# ---- the rule itself, against the kernel's check for every user of a small world ------------------

UIDS, GIDS = range(4), range(3)
#: every user: a uid and any set of groups (group lists are what kfs never looks up)
USERS = [(uid, frozenset(g for g in GIDS if mask >> g & 1)) for uid in UIDS for mask in range(1 << len(GIDS))]
files = st.tuples(st.sampled_from(UIDS), st.sampled_from(GIDS), st.integers(0, 0o777))


def allowed(user: tuple[int, frozenset[int]], acc: Access) -> int:
    """The rwx bits `user` gets on a file (generic_permission without capabilities)."""
    uid, gid, mode = acc
    if user[0] == uid:
        return mode >> 6 & 7
    return (mode >> 3 & 7) if gid in user[1] else mode & 7


@settings(max_examples=3000, deadline=None)
@given(st.lists(files, min_size=1, max_size=4))
def test_a_combination_grants_no_user_more_than_every_file_does(accesses: list[Access]) -> None:
    view = combined(accesses)
    assert view[:2] == accesses[0][:2]
    for user in USERS:
        everywhere = 7
        for acc in accesses:
            everywhere &= allowed(user, acc)
        assert allowed(user, view) & ~everywhere == 0, (user, accesses, oct(view[2]))
    for i, suffix in enumerate(suffixes(accesses)):  # the kept per-partition form: as safe
        assert suffix[:2] == accesses[i][:2]
        for user in USERS:
            assert all(allowed(user, suffix) & ~allowed(user, a) == 0 for a in accesses[i:]), (user, accesses, i)
    if len({acc[:2] for acc in accesses}) == 1:  # one owner and group: exactly the AND
        expected = 0o777
        for acc in accesses:
            expected &= acc[2]
        assert view[2] == expected


@settings(max_examples=3000, deadline=None)
@given(files, files)
def test_a_partition_dir_is_reached_as_on_disk(partition: Access, logdir: Access) -> None:
    """Inside the mount a partition directory is all its log dir lets reach of it: exactly, for each user."""
    view = narrow(partition, *as_search(logdir))
    for user in USERS:
        on_disk = allowed(user, partition) if allowed(user, logdir) & 1 else 0
        assert allowed(user, view) & ~on_disk == 0
        if partition[:2] == logdir[:2]:
            assert allowed(user, view) == on_disk


def test_a_directory_made_from_files_is_searchable_where_they_are_readable() -> None:
    assert as_directory((1, 2, 0o100644)) == (1, 2, 0o100755)
    assert as_directory((1, 2, 0o640)) == (1, 2, 0o750)
    assert as_search((1, 2, 0o40711)) == (1, 2, 0o40777)
    assert as_search((1, 2, 0o700)) == (1, 2, 0o700)
