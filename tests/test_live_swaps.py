"""Open raw views while the log cleaner swaps a segment or retention deletes one (KfsTree, no FUSE).

A raw view (`offset/<N>`) is a list of file ranges taken when it is opened; the files are opened
when first read. A range must never be read from another file than the one it was measured in.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from builders import write_numbered_segment
from conftest import kfs_command

from kfs.fuse.tree import KfsTree
from kfs.storage import LogDirs, VanishedError
from kfs.storage.local_log import REFRESH_INTERVAL


def _partition(tmp_path: Path) -> Path:
    partition = tmp_path / "logdir" / "live-0"
    partition.mkdir(parents=True)
    for base in (0, 100, 200):
        write_numbered_segment(partition, base, list(range(base, base + 100)))
    return partition


def _swap_in_cleaned(tmp_path: Path, partition: Path) -> None:
    """The cleaner's way: the cleaned files are written elsewhere, then renamed over the segment's."""
    cleaned = tmp_path / "cleaned"
    cleaned.mkdir()
    write_numbered_segment(cleaned, 0, list(range(0, 100, 2)))
    for path in cleaned.iterdir():
        os.replace(path, partition / path.name)


def _read(handle, size: int) -> bytes | None:
    try:
        return handle.read(size, 0)
    except VanishedError:
        return None  # EIO for the reader: allowed


@pytest.mark.parametrize("first_read", ["before", "after"])
def test_a_raw_view_opened_before_a_cleaner_swap_never_serves_the_new_file(tmp_path: Path, first_read: str) -> None:
    """The view opened its files by name at the first read: after a swap, that was the cleaned
    file, read at the old file's positions (found by the live-writer soak: batches of garbage)."""
    partition = _partition(tmp_path)
    written = b"".join(p.read_bytes() for p in sorted(partition.glob("*.log")))
    tree = KfsTree(LogDirs([str(tmp_path / "logdir")]))
    handle = tree.open("/live-0/offset/0")
    assert handle.attr.size == len(written)
    if first_read == "before":
        assert handle.read(100, 0) == written[:100]
    _swap_in_cleaned(tmp_path, partition)
    tree.logdirs.partition("live-0").refresh(force=True)
    data = _read(handle, len(written))
    assert data is None or data == written[:len(data)]
    rest = tree.open("/live-0/offset/150").read(1 << 20, 0)  # the segments after it read as before
    assert rest and written.endswith(rest)


def test_a_map_counted_in_the_old_file_is_never_kept_for_the_cleaned_one(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The size cache keyed a segment's map by what is at its path now: a run counted in the file
    the cleaner just replaced was kept as the cleaned file's, and the next view of it had the old
    file's positions: reads cut lines and skipped records (found by the live-writer soak)."""
    from kfs.storage import local_log as local_log_module
    from kfs.views.decoded import DecodedLog
    from kfs.views.size_cache import SizeCache

    monkeypatch.setattr(local_log_module, "REFRESH_INTERVAL", 1e9)  # this reader has not seen the swap yet
    partition = _partition(tmp_path)
    cache = SizeCache(str(tmp_path / "cache"))
    plog = LogDirs([str(tmp_path / "logdir")]).partition("live-0")
    old = plog.segments()[0]
    old.valid_size()  # its file is open: it reads the old bytes after the swap
    log = DecodedLog(plog, cache=cache)
    run = log.run(old, 0, 100)
    _swap_in_cleaned(tmp_path, partition)
    log.map_run(run, 100)
    assert cache.flush(10)

    monkeypatch.setattr(local_log_module, "REFRESH_INTERVAL", 0.5)
    fresh = LogDirs([str(tmp_path / "logdir")]).partition("live-0")
    expected = DecodedLog(fresh).view(0).cursor().read(0, 1 << 22)  # no cache: counted afresh
    view = DecodedLog(fresh, cache=cache).view(0)
    assert view.size() == len(expected)
    assert view.cursor().read(0, 1 << 22) == expected


def test_a_lookup_made_in_the_old_file_is_never_served_from_the_cleaned_one(tmp_path: Path) -> None:
    """A raw view's location (a position in a segment file) was looked up before a swap and its
    ranges taken after it, in the cleaned file at the old position: a batch cut short, or garbage
    (found by the live-writer soak: `cat offset/latest`)."""
    partition = _partition(tmp_path)
    written = b"".join(p.read_bytes() for p in sorted(partition.glob("*.log")))
    plog = LogDirs([str(tmp_path / "logdir")]).partition("live-0")
    location = plog.locate_offset(90)
    _swap_in_cleaned(tmp_path, partition)
    plog.refresh(force=True)
    try:
        extents = plog.raw_extents(location)
    except VanishedError:
        return  # EIO for the reader: allowed
    first = extents[0]
    with open(first.path, "rb") as f:
        f.seek(first.start)
        data = f.read(first.end - first.start)
    assert written[location.position:location.position + len(data)] == data


@pytest.mark.parametrize("use", ["count", "render"])
def test_a_run_of_a_replaced_segment_is_never_read_from_the_file_that_replaced_it(tmp_path: Path, use: str) -> None:
    """A decoded run is one segment file's lines. It was counted and rendered through the partition's
    current listing: once the cleaner had swapped the segment, the old file's run got the cleaned
    file's lines at the old positions (found by the live-writer soak: `tail -f messages.jsonl` cut
    lines, `grep -r` lost records). Now it reads its own file, or fails as vanished."""
    from kfs.views.decoded import DecodedLog

    partition = _partition(tmp_path)
    plog = LogDirs([str(tmp_path / "logdir")]).partition("live-0")
    log = DecodedLog(plog)
    run, end = log.view(0).layout()[0]
    expected_old = DecodedLog(LogDirs([str(tmp_path / "logdir")]).partition("live-0")).view(0).cursor().read(0, 1 << 22)
    _swap_in_cleaned(tmp_path, partition)
    plog.refresh(force=True)
    with pytest.raises(VanishedError):  # the old file is retired: never the cleaned one's lines
        if use == "count":
            log.map_run(run, end)
        else:
            lines = b"".join(chunk.data for chunk in log.rendered(run.start, end, run.segment))
            assert lines == expected_old[:len(lines)]
    assert run.length == 0


@pytest.mark.parametrize("name", ["/live-0/messages.jsonl", "/live-0/offset/150.jsonl", "/live-0/info.json"])
def test_a_name_never_vanishes_when_a_segment_is_deleted_between_listing_and_use(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Retention deleted the first segment after the partition was listed and before the listed
    file was used: `stat messages.jsonl` was ENOENT (found by the live-writer soak: a new `tail -f`
    could not open it). Now the answer is taken again from a fresh listing."""
    from kfs.storage import local_log as local_log_module

    partition = _partition(tmp_path)
    tree = KfsTree(LogDirs([str(tmp_path / "logdir")]))
    tree.getattr(name)  # listed
    monkeypatch.setattr(local_log_module, "REFRESH_INTERVAL", 1e9)  # not listed again by itself
    for path in partition.glob(f"{0:020d}.*"):
        path.unlink()
    assert tree.getattr(name).size > 0
    assert tree.open(name).read(1 << 20, 0)


def test_a_lookup_is_not_reused_once_its_segment_is_deleted_or_replaced(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel asks for a name several times per use, so lookups are reused for a second; one
    made before retention deleted its segment, or the cleaner replaced it, pointed into no file:
    `offset/earliest` was ENOENT and `time/<T>` EIO until the second was over (found by the soak)."""
    from kfs.storage import local_log as local_log_module

    monkeypatch.setattr(local_log_module, "REFRESH_INTERVAL", 0.0)
    partition = _partition(tmp_path)
    tree = KfsTree(LogDirs([str(tmp_path / "logdir")]))
    names = ["/live-0/offset/earliest", f"/live-0/time/{1_700_000_000_150}", "/live-0/offset/150"]
    for name in names:
        assert tree.getattr(name).size > 0
    _swap_in_cleaned(tmp_path, partition)
    for path in partition.glob(f"{0:020d}.*"):
        path.unlink()
    expected = b"".join(p.read_bytes() for p in sorted(partition.glob("*.log")))
    for name in names:
        handle = tree.open(name)
        assert handle.read(1 << 20, 0) == expected[len(expected) - handle.attr.size:]


def test_a_record_in_a_segment_rolled_in_since_the_last_listing_is_found(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The partition is listed again every REFRESH_INTERVAL; a lookup past the log end as last
    listed answered ENOENT for records a new segment already held (found by the soak:
    `offset/<N>.value` ENOENT, "but the record is there")."""
    from kfs.storage import local_log as local_log_module

    partition = _partition(tmp_path)
    tree = KfsTree(LogDirs([str(tmp_path / "logdir")]))
    tree.getattr("/live-0/offset/250.value")  # listed
    monkeypatch.setattr(local_log_module, "REFRESH_INTERVAL", 1e9)  # not listed again by itself
    write_numbered_segment(partition, 300, list(range(300, 400)))
    handle = tree.open("/live-0/offset/350.value")
    assert handle.read(100, 0) == b"value-350"


def test_a_time_in_a_segment_rolled_in_since_the_last_listing_is_found(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The same for `time/<T>`: a time the broker has written a record at is never ENOENT (found by
    the soak: `time/1700000009479: No such file or directory` at the log's newest time)."""
    from kfs.storage import local_log as local_log_module

    partition = _partition(tmp_path)
    tree = KfsTree(LogDirs([str(tmp_path / "logdir")]))
    tree.getattr("/live-0/time/1700000000250.value")  # listed
    monkeypatch.setattr(local_log_module, "REFRESH_INTERVAL", 1e9)  # not listed again by itself
    write_numbered_segment(partition, 300, list(range(300, 400)))  # record o's timestamp is 1700000000000 + o
    handle = tree.open("/live-0/time/1700000000350.value")
    assert handle.read(100, 0) == b"value-350"


# ---- reads across a cleaner merge ------------------------------------------------------------------

def _merge_cleaned(tmp_path: Path, partition: Path, first: int, second: int, end: int, state: str) -> None:
    """The cleaner's merge of segments `first` and `second` into one cleaned segment `first` (the even
    offsets below `end`), as Kafka's LocalLog.replaceSegments does it: the cleaned files become
    `.swap`, the old segments' files `.deleted` one segment after the other, then the `.swap` files
    lose their suffix. `state`: "merged" (all done), or "swapping" (the first old segment renamed,
    the second not yet: the `.swap` and the segment it replaces are both listed)."""
    cleaned = tmp_path / "cleaned"
    cleaned.mkdir()
    write_numbered_segment(cleaned, first, list(range(first, end, 2)))
    for path in cleaned.iterdir():
        os.replace(path, partition / f"{path.name}.swap")
    for base in (first, second) if state == "merged" else (first,):
        for path in partition.glob(f"{base:020d}.*"):
            if not path.name.endswith(".swap"):
                os.replace(path, f"{path}.deleted")
    if state == "merged":
        for path in partition.glob("*.swap"):
            os.replace(path, partition / path.name[:-len(".swap")])


def test_records_read_across_a_cleaner_merge_go_on_in_the_cleaned_segment(tmp_path: Path) -> None:
    """A reader in segment 0 when the cleaner merged segments 0 and 100: the old file it read was
    retired, and the read ended in VanishedError ("segment deleted or replaced while reading") where
    a consumer goes on at its next offset in the cleaned segment."""
    partition = _partition(tmp_path)
    plog = LogDirs([str(tmp_path / "logdir")]).partition("live-0")
    got = []
    for record in plog.records():
        got.append(record.offset)
        if record.offset == 50:
            _merge_cleaned(tmp_path, partition, 0, 100, 200, "merged")
            plog.refresh(force=True)
    resumed = next(o for o in range(51, 201) if got[:o] == list(range(o)) and (o == 200 or got[o] != o))
    assert got == list(range(resumed)) + [o for o in range(resumed, 200) if o % 2 == 0] + list(range(200, 300))


def test_a_listing_in_the_middle_of_a_cleaner_merge_is_not_damage(tmp_path: Path) -> None:
    """Listed between the renames: the cleaned `.swap` (offsets 0 to 198) and old segment 100, which
    it replaces, are both there. Kafka's LogLoader takes the `.swap` for the segments its offsets
    cover; kfs read the `.swap` up to offset 100 and failed ("offset 108 is at or past the next
    segment's base offset 100")."""
    partition = _partition(tmp_path)
    _merge_cleaned(tmp_path, partition, 0, 100, 200, "swapping")
    plog = LogDirs([str(tmp_path / "logdir")]).partition("live-0")
    assert [r.offset for r in plog.records()] == list(range(0, 200, 2)) + list(range(200, 300))
    assert [s["base_offset"] for s in plog.info()["segments"]] == [0, 200]
    assert not any(s["problems"] for s in plog.info()["segments"])
    assert plog.locate_offset(151).offset == 152


def test_kfs_cat_across_a_cleaner_merge_reads_on_without_an_error(tmp_path: Path) -> None:
    """`kfs cat` blocked on its output in the middle of segment 0 while the cleaner merged segments 0
    and 2000: it failed with "segment deleted or replaced while reading" and exit 1."""
    partition = tmp_path / "logdir" / "live-0"
    partition.mkdir(parents=True)
    for base in (0, 2000, 4000):
        write_numbered_segment(partition, base, list(range(base, base + 2000)))
    cat = subprocess.Popen([*kfs_command(), "cat", str(tmp_path / "logdir"), "live-0"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert cat.stdout is not None
    head = cat.stdout.read(4096)
    _merge_cleaned(tmp_path, partition, 0, 2000, 4000, "merged")
    time.sleep(REFRESH_INTERVAL + 0.2)  # the partition listed again
    out, err = cat.communicate(timeout=60)
    offsets = [json.loads(line)["offset"] for line in (head + out).splitlines()]
    assert cat.returncode == 0 and b"Traceback" not in err, err
    resumed = next(o for o in range(1, 4001) if offsets[:o] == list(range(o)) and (o == 4000 or offsets[o] != o))
    assert offsets == list(range(resumed)) + [o for o in range(resumed, 4000) if o % 2 == 0] + list(range(4000, 6000))
