"""The size cache owns nothing that is not its own, and never outlives the file it was made from.

It runs as root on broker hosts: its pruning deletes files, and its entries are read back. So it
deletes and reads only its own entries (names, header, regular files, no link followed), keeps
out of log dirs, and a segment rewritten in place under the same size and mtime (`cp -p`,
`rsync -t --inplace`, a restored backup) is counted again rather than served by the old map,
across mounts and within one.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from array import array
from pathlib import Path

import pytest
from conftest import run_kfs, v2_batch, write_segment
from mounts import mounted, needs_fuse

from kfs.storage import LogDirs
from kfs.views.decoded import DecodedLog, StaleMap
from kfs.views.size_cache import TAG_NAME, CacheDirectoryError, SavedMap, SizeCache

PARTITION = "rewritten-0"
SEGMENTS = 3
BATCHES = 40
RECORDS = 5


def write_partition(logdir: Path, value: bytes) -> Path:
    """A partition of SEGMENTS segments whose records all hold `value`: two such partitions with
    values of one length have segment files of the same sizes, and different JSON lines when one
    value renders longer (a control character is escaped)."""
    directory = logdir / PARTITION
    directory.mkdir(parents=True, exist_ok=True)
    offset = 0
    for _ in range(SEGMENTS):
        base = offset
        appends = []
        for _ in range(BATCHES):
            records = [(offset + i, 1_700_000_000_000 + offset + i, b"k", value, []) for i in range(RECORDS)]
            appends.append([(v2_batch(offset, records), records)])
            offset += RECORDS
        write_segment(str(directory), base, appends)
    return directory


def rewrite_in_place(target: Path, source: Path) -> None:
    """Overwrite `target` with `source`'s bytes (same length) in place, then give it back its mtime:
    what `rsync -t --inplace` or `cp -p` over an existing file leave."""
    st = target.stat()
    data = source.read_bytes()
    assert len(data) == st.st_size
    with open(target, "r+b") as f:
        f.write(data)
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert target.stat().st_size == st.st_size and target.stat().st_mtime_ns == st.st_mtime_ns


def kfs_cat(logdir: Path) -> bytes:
    done = run_kfs("cat", str(logdir), PARTITION)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def two_versions(tmp_path: Path) -> tuple[Path, Path]:
    """A log dir, and the same partition with other values of the same size (the rewrite's source)."""
    logdir, other = tmp_path / "logdir", tmp_path / "other"
    write_partition(logdir, b"a" * 40)
    write_partition(other, b"\x01" * 40)
    closed = sorted((logdir / PARTITION).glob("*.log"))[0]
    assert closed.stat().st_size == (other / PARTITION / closed.name).stat().st_size
    return logdir, other


def filled_cache(directory: Path, entries: int = 6) -> SizeCache:
    cache = SizeCache(str(directory))
    saved = SavedMap(100, 10, array("q", [0]), array("q", [0]))
    for i in range(entries):
        cache.save({"segment": i}, saved)
    assert cache.flush(10)
    return cache


# ---- what the cache deletes -----------------------------------------------------------------------

def test_pruning_deletes_only_the_caches_own_entries(tmp_path: Path) -> None:
    """Files under the cache directory that kfs did not write there (other names, other contents,
    behind a symlinked entry directory) survive a prune that removes every entry of its own."""
    directory = tmp_path / "cache"
    cache = filled_cache(directory)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    precious = elsewhere / ("ab" * 20)
    precious.write_bytes(b"someone's data")
    shard = next(p for p in directory.iterdir() if p.is_dir())
    foreign = [shard / "notes.txt", shard / ("cd" * 20), directory / "README"]
    foreign[0].write_bytes(b"x" * 5000)
    foreign[1].write_bytes(b"not an entry" * 500)  # an entry's name, not its header
    foreign[2].write_bytes(b"y" * 5000)
    (directory / "ee").symlink_to(elsewhere)  # an entry directory's name, pointing out
    cache.max_bytes = 0
    removed = cache.prune()
    assert removed == 6
    assert not [p for p in directory.glob("*/*") if len(p.name) == 40 and p.read_bytes().startswith(b"kfs-")]
    for path in [*foreign, precious]:
        assert path.exists(), path
    assert precious.read_bytes() == b"someone's data"


def test_an_entry_directory_replaced_by_a_link_is_never_written_through(tmp_path: Path) -> None:
    """A link where an entry directory belongs (to a directory outside): saving an entry that hashes
    there writes nothing through it, and loading reads nothing through it."""
    directory = tmp_path / "cache"
    cache = SizeCache(str(directory))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shard = Path(cache._path({"segment": 0})[0]).parent
    shard.symlink_to(elsewhere)
    cache.save({"segment": 0}, SavedMap(100, 10, array("q", [0]), array("q", [0])))
    assert cache.flush(10)
    assert list(elsewhere.iterdir()) == []
    (elsewhere / Path(cache._path({"segment": 0})[0]).name).write_bytes(b"planted")
    assert cache.load({"segment": 0}) is None


def test_a_directory_holding_other_files_is_refused_and_left_alone(tmp_path: Path) -> None:
    directory = tmp_path / "photos"
    directory.mkdir()
    (directory / "holiday.jpg").write_bytes(b"\xff\xd8" * 1000)
    with pytest.raises(CacheDirectoryError, match="holds files kfs did not make"):
        SizeCache(str(directory))
    assert sorted(p.name for p in directory.iterdir()) == ["holiday.jpg"]


def test_a_new_directory_is_created_private_and_tagged_an_empty_one_is_tagged(tmp_path: Path) -> None:
    SizeCache(str(tmp_path / "new" / "cache"))
    made = tmp_path / "new" / "cache"
    assert made.stat().st_mode & 0o777 == 0o700
    assert (made / TAG_NAME).read_bytes().startswith(b"Signature: 8a477f597d28d172789f06886806bc55")
    empty = tmp_path / "empty"
    empty.mkdir()
    SizeCache(str(empty))
    assert (empty / TAG_NAME).exists()
    SizeCache(str(empty))  # tagged: its own now, entries or not


@needs_fuse
def test_a_log_dir_is_never_a_size_cache(two_versions: tuple[Path, Path], tmp_path: Path) -> None:
    """`-o size_cache=` at a log dir, inside one or above one is refused in one sentence, before
    anything is mounted or written; the log dir keeps every file."""
    logdir, _ = two_versions
    before = sorted(str(p.relative_to(logdir)) for p in logdir.rglob("*"))
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    for cache in (logdir, logdir / PARTITION, logdir / "inside", tmp_path):
        done = run_kfs("mount", str(logdir), str(mountpoint), "-o", f"size_cache={cache}")
        if done.returncode == 0:
            run_kfs("umount", str(mountpoint))
        assert done.returncode != 0, cache
        assert b"is, holds or lies inside the log dir" in done.stderr
        assert len(done.stderr.decode().strip().splitlines()) == 1
    assert sorted(str(p.relative_to(logdir)) for p in logdir.rglob("*")) == before


# ---- what the cache reads -------------------------------------------------------------------------

LOAD_EVERY_ENTRY = textwrap.dedent("""
    import resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
    from kfs.views.size_cache import SizeCache
    cache = SizeCache(sys.argv[1])
    print(sum(cache.load({"segment": i}) is not None for i in range(6)))
""")


@pytest.mark.parametrize("hostile", ["dev-zero", "fifo", "symlink-to-entry", "huge", "truncated", "garbage"])
def test_hostile_entries_are_ignored_never_followed_or_read_without_bound(tmp_path: Path, hostile: str) -> None:
    """An entry replaced by a link to /dev/zero, a FIFO, a link to another (valid) entry, a huge
    file, a truncated or a garbage one: the load ignores it, promptly and in bounded memory."""
    directory = tmp_path / "cache"
    cache = filled_cache(directory)
    target = Path(cache._path({"segment": 0})[0])
    other = Path(cache._path({"segment": 1})[0])
    target.unlink()
    if hostile == "dev-zero":
        target.symlink_to("/dev/zero")
    elif hostile == "fifo":
        os.mkfifo(target)
    elif hostile == "symlink-to-entry":
        target.symlink_to(other)
    elif hostile == "huge":
        with open(target, "wb") as f:
            f.write(other.read_bytes())
            f.truncate(1 << 30)  # sparse: 1 GiB that reads as zeros past a valid start
    elif hostile == "truncated":
        target.write_bytes(other.read_bytes()[:-5])
    else:
        target.write_bytes(b"kfs-decoded-map 2\n{\"key\": 1}\n" + os.urandom(100))
    done = subprocess.run([sys.executable, "-c", LOAD_EVERY_ENTRY, str(directory)], capture_output=True,
                          timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == b"5"  # every entry but the hostile one


# ---- never the old map -----------------------------------------------------------------------------

@needs_fuse
def test_a_segment_rewritten_in_place_between_mounts_is_counted_again(two_versions: tuple[Path, Path],
                                                                     tmp_path: Path) -> None:
    """Same inode, size and mtime; other records: the second mount's st_size and bytes are the
    new file's, as `kfs cat` prints them (the old code served the old length and seek map)."""
    logdir, other = two_versions
    cache = tmp_path / "cache"
    with mounted(tmp_path, [str(logdir)], name="first", size_cache=str(cache)) as mnt:
        first = (mnt / PARTITION / "messages.jsonl").read_bytes()
    assert first == kfs_cat(logdir)
    closed = sorted((logdir / PARTITION).glob("*.log"))[:2]
    for segment in closed:
        rewrite_in_place(segment, other / PARTITION / segment.name)
    expected = kfs_cat(logdir)
    assert expected != first and len(expected) != len(first)
    with mounted(tmp_path, [str(logdir)], name="second", size_cache=str(cache)) as mnt:
        view = mnt / PARTITION / "messages.jsonl"
        assert view.stat().st_size == len(expected)
        assert view.read_bytes() == expected
        copy = tmp_path / "copy.jsonl"
        subprocess.run(["cp", str(view), str(copy)], check=True)  # (sendfile: trusts st_size)
        assert copy.read_bytes() == expected


@needs_fuse
def test_a_segment_rewritten_in_place_under_a_mount_is_counted_again(two_versions: tuple[Path, Path],
                                                                    tmp_path: Path) -> None:
    """Within one mount: a fresh read after the rewrite is the new file's lines, size and bytes,
    decoded and raw (no page the kernel kept of the old file is served)."""
    logdir, other = two_versions
    segment = sorted((logdir / PARTITION).glob("*.log"))[1]
    with mounted(tmp_path, [str(logdir)], size_cache="none", expect_errors=True) as mnt:
        view = mnt / PARTITION / "messages.jsonl"
        raw = mnt / PARTITION / "offset" / str(BATCHES * RECORDS)
        first = view.read_bytes()
        first_raw = raw.read_bytes()
        assert first_raw[:segment.stat().st_size] == segment.read_bytes()
        rewrite_in_place(segment, other / PARTITION / segment.name)
        expected = kfs_cat(logdir)
        assert expected != first
        time.sleep(1.1)  # past the kernel's attribute timeout
        assert view.stat().st_size == len(expected)
        assert view.read_bytes() == expected
        assert raw.read_bytes()[:segment.stat().st_size] == segment.read_bytes()


def test_a_map_whose_file_changed_under_the_same_identity_is_not_served(two_versions: tuple[Path, Path]) -> None:
    """The content check (each seek-map entry's probe): a file whose bytes changed while its
    identity stayed (as a change below the filesystem would leave it) fails the read that starts at
    the entry, forgets the map, and the next measure counts the new file."""
    logdir, other = two_versions
    plog = LogDirs([str(logdir)]).partition(PARTITION)
    decoded = DecodedLog(plog)
    view = decoded.view(None)
    size = view.size()
    segment_path = sorted((logdir / PARTITION).glob("*.log"))[0]
    run = view.layout()[0][0]
    rewrite_in_place(segment_path, other / PARTITION / segment_path.name)
    run.identity = run.segment.file_identity()  # as if nothing could tell: only the bytes changed
    with pytest.raises(StaleMap, match="changed in place"):
        view.cursor().read(0, 100)
    assert view.size() != size
    assert view.cursor().read(0, 1 << 30) == kfs_cat(logdir)
