"""Decoded views without FUSE: the seek map, sizes, and what the first line costs."""

from __future__ import annotations

import os
import random
import shutil
import struct
import tempfile
from pathlib import Path

import pytest
from conftest import GOLDEN_PARTITIONS, LOGDIRS, v2_batch, write_segment
from hypothesis import given, settings
from hypothesis import strategies as st

from kfs._native import views as native_views
from kfs.record import BatchHeader, Record
from kfs.storage import LogDirs, LogSegment, VanishedError
from kfs.views import batch_lines, runs
from kfs.views import cursor as cursor_module
from kfs.views.decoded import DecodedLog


def _read_all(cursor: cursor_module.Cursor, chunk: int = 1 << 16) -> bytes:
    out, position = [], 0
    while True:
        data = cursor.read(position, chunk)
        if not data:
            return b"".join(out)
        out.append(data)
        position += len(data)


@pytest.fixture(autouse=True)
def _small_map_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runs, "MAP_INTERVAL", 2048)  # many map entries on small fixtures
    monkeypatch.setattr(cursor_module, "FORWARD_SLACK", 4096)
    monkeypatch.setattr(cursor_module, "KEPT_BYTES", 3000)


@pytest.mark.parametrize("partition", GOLDEN_PARTITIONS)
def test_random_reads_equal_the_sequential_stream(partition: str) -> None:
    plog = LogDirs(LOGDIRS).partition(partition)
    view = DecodedLog(plog).view(plog.log_start_offset())
    full = _read_all(view.cursor())
    assert view.known_size() == len(full)  # a full read maps the stream
    rng = random.Random(partition)
    cursor = view.cursor()
    for _ in range(200):
        position, size = rng.randrange(len(full) + 10), rng.randrange(1, 5000)
        assert cursor.read(position, size) == full[position:position + size]
    fresh = DecodedLog(plog).view(plog.log_start_offset())  # seeks on a view with no map yet
    for _ in range(30):
        position = rng.randrange(len(full))
        assert fresh.cursor().read(position, 300) == full[position:position + 300]


@pytest.mark.parametrize("partition", ["orders-0", "payments-0", "audit.events-v2-3"])
@pytest.mark.parametrize("request_size", [700, 4096])
def test_requests_that_come_out_of_order_are_rendered_once(partition: str, request_size: int,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel's page-cache requests reach libfuse's threads in any order: the next one often
    takes the cursor first. The cursor renders forward through the gap and keeps what it rendered,
    so the late one is served from there: the same bytes, and a walk per segment, not per request."""
    monkeypatch.setattr(cursor_module, "FORWARD_SLACK", 2 * request_size)  # as the mount's to its requests
    monkeypatch.setattr(cursor_module, "KEPT_BYTES", 2 * request_size)
    plog = LogDirs(LOGDIRS).partition(partition)
    full = _read_all(DecodedLog(plog).view(None).cursor())
    log = DecodedLog(plog)
    walks = []
    rendered = log.rendered
    log.rendered = lambda *a, **k: (walks.append(a), rendered(*a, **k))[1]  # type: ignore[method-assign]
    view = log.view(None)
    cursor = view.cursor()
    rng = random.Random(request_size)
    position = pairs = 0
    while position < len(full):  # a pair of requests, most often the second answered first
        pair = [position, position + request_size]
        for at in reversed(pair) if rng.random() < 0.7 else pair:
            assert cursor.read(at, request_size) == full[at:at + request_size]
        position, pairs = position + 2 * request_size, pairs + 1
    runs = len(view.layout())
    assert pairs > 4 * runs
    assert len(walks) <= 3 * runs  # a walk per segment, and a few more where a pair straddles two


def test_a_file_left_open_unread_drops_its_kept_lines_and_reads_on() -> None:
    """The mount's idle closer drops the lines an idle reader's cursor keeps (KfsOperations through
    `forget_kept`); a read behind the cursor after that walks again, one after it goes on."""
    from kfs.fuse.handles import DecodedHandle
    from kfs.fuse.operations import KfsOperations
    from kfs.fuse.tree import KfsTree

    plog = LogDirs(LOGDIRS).partition("orders-0")
    full = _read_all(DecodedLog(plog).view(None).cursor())
    operations = KfsOperations(KfsTree(LogDirs(LOGDIRS)), size_scan=False)
    handle = operations.tree.open("/orders-0/messages.jsonl")
    assert isinstance(handle, DecodedHandle) and handle.cursor is not None
    operations._handles[1] = handle
    cursor = handle.cursor
    assert cursor.read(8000, 4000) == full[8000:12000]  # rendered from a seek-map entry: lines kept
    assert operations._forget_idle_lines(3600) == 0  # read a moment ago: kept
    assert operations._forget_idle_lines(0) > 0  # an idle cursor's kept lines dropped
    assert cursor.forget_kept(0) == 0  # (nothing left)
    assert cursor.read(7000, 3000) == full[7000:10000]  # behind: a walk again
    assert cursor.read(10000, 3000) == full[10000:13000]


_PAYMENTS_LINES: list[bytes] = []


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(-9000, 9000), st.integers(1, 6000)), min_size=1, max_size=60),
       st.integers(0, 6000), st.integers(0, 9000))
def test_reads_near_and_far_give_the_streams_bytes(moves: list[tuple[int, int]], forward: int, kept: int) -> None:
    """Any sequence of reads, each near the last (behind it, into the kept chunks or before them;
    ahead of it, within the forward slack or past it) or anywhere, with any slack and keep sizes:
    the stream's bytes (oracle: one sequential read of the whole view)."""
    plog = LogDirs(LOGDIRS).partition("payments-0")
    if not _PAYMENTS_LINES:
        _PAYMENTS_LINES.append(_read_all(DecodedLog(plog).view(None).cursor()))
    full = _PAYMENTS_LINES[0]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cursor_module, "FORWARD_SLACK", forward)
        patch.setattr(cursor_module, "KEPT_BYTES", kept)
        cursor = DecodedLog(plog).view(None).cursor()
        position = 0
        for move, size in moves:
            position = abs(move) * 31 % len(full) if abs(move) > 8000 else min(max(position + move, 0), len(full))
            assert cursor.read(position, size) == full[position:position + size]
            position += size


_MANY_SEGMENTS: list[tuple[Path, bytes]] = []


def _many_segments() -> tuple[Path, bytes]:
    """payments-0's batches one to a segment file (241 segments, no indexes) in a log dir of their own,
    and the stream of payments-0 as written (its segments copied whole to another log dir: the lines
    of a partition do not depend on where its segments begin)."""
    if not _MANY_SEGMENTS:
        source = Path(LOGDIRS[1]) / "payments-0"
        root = Path(tempfile.mkdtemp(prefix="kfs-many-segments-"))
        shutil.copytree(source, root / "whole" / "payments-0")
        split = root / "split" / "payments-0"
        split.mkdir(parents=True)
        for segment in sorted(source.glob("*.log")):
            data, position = segment.read_bytes(), 0
            while position + 12 <= len(data):
                base, length = struct.unpack_from(">qi", data, position)
                (split / f"{base:020d}.log").write_bytes(data[position:position + 12 + length])
                position += 12 + length
        whole = DecodedLog(LogDirs([str(root / "whole")]).partition("payments-0"))
        _MANY_SEGMENTS.append((root / "split", _read_all(whole.view(None).cursor())))
    return _MANY_SEGMENTS[0]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 9000)), min_size=1, max_size=40))
def test_reads_over_many_segments_give_the_streams_bytes(moves: list[tuple[int, int]]) -> None:
    """One reader over 241 segments, reading on from where it was (most moves) or anywhere: the
    stream's bytes. Its cursor starts a read past the runs an earlier read passed over whole
    (Cursor._walk), and its view keeps the layout between reads (start_layout_and_files)."""
    logdir, full = _many_segments()
    plog = LogDirs([str(logdir)]).partition("payments-0")
    assert len(plog.segments()) == 241
    cursor = DecodedLog(plog).view(None).cursor()
    assert _read_all(DecodedLog(plog).view(None).cursor(), 4096) == full
    position = 0
    for jump, size in moves:
        if jump % 3 == 0:
            position = jump % (len(full) + 1)
        assert cursor.read(position, size) == full[position:position + size]
        position = min(position + size, len(full))


@pytest.mark.parametrize("partition", ["orders-0", "audit.events-v2-3", "inventory-2"])
def test_views_from_an_offset_are_suffixes_of_the_whole_stream(partition: str) -> None:
    plog = LogDirs(LOGDIRS).partition(partition)
    log = DecodedLog(plog)
    full = _read_all(log.view(plog.log_start_offset()).cursor())
    lines = full.splitlines(keepends=True)
    for line in lines[:: max(1, len(lines) // 7)]:
        offset = int(line.split(b'"offset": ')[1].split(b",")[0])
        view = log.view(offset)
        assert view.size() == len(full) - full.index(line)
        assert _read_all(view.cursor(), 777) == full[full.index(line):]


def test_the_size_is_exact_before_anything_is_read() -> None:
    plog = LogDirs(LOGDIRS).partition("orders-0")
    view = DecodedLog(plog).view(0)
    assert view.known_size() is None  # nothing mapped yet
    exact = view.size()
    assert view.known_size() == exact == len(_read_all(DecodedLog(plog).view(0).cursor()))


@pytest.mark.parametrize("sized", [False, True])
def test_the_first_line_costs_one_batch(monkeypatch: pytest.MonkeyPatch, sized: bool) -> None:
    """Counts the records decoded where every reader decodes them (LogSegment.records_of) or renders
    them from a batch's bytes (batch_lines.fused_lines), so no path around a wrapper can hide a full
    decode; `sized`: after the view's size was computed."""
    decoded_per_batch: list[int] = []
    records_of = LogSegment.records_of

    def counting_records_of(self: LogSegment, header: BatchHeader, body: memoryview) -> list[Record]:
        records = records_of(self, header, body)
        decoded_per_batch.append(len(records))
        return records

    fused_lines = batch_lines.fused_lines

    def counting_fused_lines(header: BatchHeader, *args, **kwargs):  # type: ignore[no-untyped-def]
        out = fused_lines(header, *args, **kwargs)  # rendered from the batch's bytes: a batch's work too
        if out is not None:
            decoded_per_batch.append(header.record_count)
        return out

    monkeypatch.setattr(LogSegment, "records_of", counting_records_of)
    monkeypatch.setattr(batch_lines, "fused_lines", counting_fused_lines)
    plog = LogDirs(LOGDIRS).partition("orders-0")
    view = DecodedLog(plog).view(0)
    if sized:
        assert view.size() > 0
        if native_views.count_jsonl is not None:  # counted in C: no record decoded for a size
            assert decoded_per_batch == []
        decoded_per_batch.clear()
    first = view.cursor().read(0, 512).split(b"\n")[0]
    assert first.startswith(b'{"topic": "orders", "partition": 0, "offset": 0,')
    # orders-0 holds 1646 records in batches of up to ~50: the first line is one or two batches' work.
    assert 0 < sum(decoded_per_batch) <= 100, decoded_per_batch


def test_a_growing_segment_extends_the_map(tmp_path: Path) -> None:
    partition = tmp_path / "logdir" / "grow-0"
    partition.mkdir(parents=True)
    shutil.copy(Path(LOGDIRS[0]) / "meta.properties", tmp_path / "logdir") if (
        Path(LOGDIRS[0]) / "meta.properties").exists() else None

    def batch(base: int, n: int) -> tuple[bytes, list]:
        records = [(base + i, 1_700_000_000_000 + base + i, b"k", b"v%d" % (base + i), []) for i in range(n)]
        return v2_batch(base, records), records

    write_segment(str(partition), 0, [[batch(0, 10)], [batch(10, 10)]], closed=False)
    plog = LogDirs([str(tmp_path / "logdir")]).partition("grow-0")
    log = DecodedLog(plog)
    view = log.view(0)
    first = _read_all(view.cursor())
    assert first.count(b"\n") == 20
    write_segment(str(partition), 0, [[batch(0, 10)], [batch(10, 10)], [batch(20, 5)]], closed=False)
    plog.refresh(force=True)
    grown = _read_all(view.cursor())
    assert grown.startswith(first) and grown.count(b"\n") == 25
    assert view.size() == len(grown)


def _segment_of(directory: Path, base: int, offsets: list[int]) -> None:
    appends = []
    for i in range(0, len(offsets), 5):
        records = [(o, 1_700_000_000_000 + o, b"k%d" % o, b"value-%d" % o, []) for o in offsets[i:i + 5]]
        appends.append([(v2_batch(records[0][0], records), records)])
    write_segment(str(directory), base, appends, 200)


@pytest.mark.parametrize("change", ["cleaner swap", "retention"])
def test_a_reader_past_a_segment_that_changes_gets_eio_never_other_lines(tmp_path: Path, change: str) -> None:
    """A cleaned (shorter) segment swapped in behind a reader, or the first segment deleted, changes
    the bytes before its position: its next read is EIO (VanishedError), never the lines now at its
    position (a line cut in two, records skipped: found by the live-writer soak); a read from 0
    starts over with the file as it is now."""
    partition = tmp_path / "live-0"
    partition.mkdir()
    for base in (0, 100, 200):
        _segment_of(partition, base, list(range(base, base + 100)))
    plog = LogDirs([str(tmp_path)]).partition("live-0")
    cursor = DecodedLog(plog).view(None).cursor()
    out: list[bytes] = []
    position = 0
    while b'"offset": 150,' not in b"".join(out):  # well into the second segment
        out.append(cursor.read(position, 777))
        position += len(out[-1])
    if change == "cleaner swap":  # `.cleaned` written elsewhere, renamed over the segment: a new inode
        cleaned = tmp_path / "cleaned"
        cleaned.mkdir()
        _segment_of(cleaned, 0, list(range(0, 100, 2)))
        for path in cleaned.iterdir():
            os.replace(path, partition / path.name)
    else:
        for path in partition.glob(f"{0:020d}.*"):
            path.unlink()
    plog.refresh(force=True)
    with pytest.raises(VanishedError):
        cursor.read(position, 777)
    with pytest.raises(VanishedError):
        cursor.read(position + 777, 777)  # and again: the reader cannot go on
    now = _read_all(DecodedLog(LogDirs([str(tmp_path)]).partition("live-0")).view(None).cursor())
    assert _read_all(cursor) == now and now.count(b"\n") == (250 if change == "cleaner swap" else 200)
