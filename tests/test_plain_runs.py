"""The compiled walker (`walk_v2_run`, kfs.views.plain_runs) gives the views the bytes, sizes and
errors the Python walk gives, batch for batch: it only ever takes batches the Python walk would
take and render the same, and hands every other one back.

The reference is the same view read with the walker turned off (the per-batch Python walk and the
fused renderer, themselves held to the record-by-record renderer by tests/test_decoded_sizes.py
and tests/test_batch_lines.py): on the Kafka-written fixtures under every isolation/control
setting, and on random segments of random batches (every codec, gaps, LogAppendTime) with one
byte of damage anywhere (hypothesis), read from random start and end offsets.
"""

from __future__ import annotations

import random
import struct
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import crc32c
import pytest
from builders import v2_batches
from conftest import GOLDEN_PARTITIONS, LOGDIRS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kfs._native import views as native_views
from kfs.record import default_batch, parse_batch_header
from kfs.storage import KfsError, LogDirs, PartitionLog
from kfs.views import batch_lines, line_lengths, plain_runs
from kfs.views.jsonl import line_prefix
from kfs.views.kcat_format import KcatFormat, KcatJson

pytestmark = pytest.mark.skipif(not plain_runs.available(), reason="extension not built")

SETTINGS = [("read_uncommitted", "hide"), ("read_committed", "hide"), ("read_uncommitted", "show"),
            ("read_committed", "show")]


@contextmanager
def walker_off() -> Iterator[None]:
    saved = plain_runs._walk_v2_run
    plain_runs._walk_v2_run = None
    try:
        yield
    finally:
        plain_runs._walk_v2_run = saved


def outcome(read: Callable[[], Iterator]) -> tuple[list, str | None]:
    """What a read gives: its items up to an error, and the error (type and message)."""
    items: list = []
    try:
        for item in read():
            items.append(item)
    except KfsError as e:
        return items, f"{type(e).__name__}: {e}"
    return items, None


def views(plog: PartitionLog, start: int, end: int | None, isolation: str, control: str) -> dict[str, object]:
    """A view's lines (joined: the walker's chunks span batches), its offsets, its counted length,
    records and map frontier, and `kfs cat`'s stream, each with the error that ends it."""
    prefix = line_prefix(plog.topic, plog.partition)

    def render(records):  # type: ignore[no-untyped-def]
        from kfs.views.jsonl import render_line_list
        return render_line_list(prefix, records, None)

    lines, lines_error = outcome(lambda: batch_lines.line_lists(
        plog, start, end, isolation=isolation, control=control, prefix=prefix, render=render, fused=True))
    counted, count_error = outcome(lambda: line_lengths.counted_batches(
        plog, start, end if end is not None else (1 << 63) - 1, isolation=isolation, control=control, prefix=prefix,
        render=render, countable=True))
    stream, stream_error = outcome(lambda: batch_lines.joined_lines(
        plog, start, isolation=isolation, control=control, prefix=prefix,
        render=lambda records: b"".join(render(records)), fused=True))
    # `kfs cat -f`: kcat's format, every field, printed by the walker's kcat mode (render_kcat.c)
    fmt = KcatFormat("%o|%k|%K|%s|%S|%R|%T|%h|%t|%p\\n", plog.topic, plog.partition, b"NULL")
    take = plain_runs.kcat_taker(fmt.program(), fmt.null, isolation == "read_committed") \
        if plain_runs.available() else None
    kcat, kcat_error = outcome(lambda: batch_lines.joined_lines(
        plog, start, isolation=isolation, control=control, prefix="", render=fmt.render, fused=False, take=take))
    envelope = KcatJson(plog.topic, plog.partition, 7)  # `kfs cat -J`
    take = plain_runs.kcat_taker(envelope.program(), b"", isolation == "read_committed") \
        if plain_runs.available() else None
    json, json_error = outcome(lambda: batch_lines.joined_lines(
        plog, start, isolation=isolation, control=control, prefix="", render=envelope.render, fused=False, take=take))
    return {
        "kcat": b"".join(kcat), "kcat_error": kcat_error, "kcat_json": b"".join(json), "kcat_json_error": json_error,
        "data": b"".join(chunk.data for chunk in lines), "lines_error": lines_error,
        "offsets": [o for chunk in lines for o in chunk.offsets],
        "ends": [sum(len(c.data) for c in lines[:i]) + e for i, chunk in enumerate(lines) for e in chunk.ends],
        "length": sum(c.length for c in counted), "records": sum(c.records for c in counted),
        "mapped_to": max((c.next_offset for c in counted), default=None),
        "file_end": max((c.file_end for c in counted), default=None), "count_error": count_error,
        "stream": b"".join(stream), "stream_error": stream_error,
    }


def assert_walker_agrees(plog: PartitionLog, start: int, end: int | None, isolation: str, control: str) -> None:
    with_walker = views(plog, start, end, isolation, control)
    with walker_off():
        without = views(plog, start, end, isolation, control)
    assert with_walker == without
    assert len(with_walker["data"]) == with_walker["length"] or with_walker["count_error"]  # type: ignore[arg-type]


@pytest.mark.parametrize("partition", GOLDEN_PARTITIONS)
def test_kafka_written_partitions_read_the_same_with_the_walker(partition: str) -> None:
    logdirs = LogDirs(LOGDIRS)
    plog = logdirs.partition(partition)
    log_start, log_end = plog.log_start_offset(), plog.log_end_offset()
    starts = sorted({log_start, (log_start + log_end) // 2, max(log_end - 3, log_start)})
    for isolation, control in SETTINGS:
        for start in starts:
            for end in (None, (start + log_end) // 2 + 1):
                assert_walker_agrees(plog, start, end, isolation, control)


def _rebased(batches: list[bytes], gaps: list[int]) -> list[tuple[int, bytes]]:
    """The batches with increasing offsets (base offsets are outside the CRC), each with its base."""
    out, next_offset = [], 0
    for batch, gap in zip(batches, gaps, strict=True):
        header = parse_batch_header(batch, 0, 0)
        base = next_offset + gap
        data = bytearray(batch)
        struct.pack_into(">q", data, 0, base)
        next_offset = base + header.last_offset - header.base_offset + 1
        out.append((base, bytes(data)))
    return out


def lz4_framed(batch: bytes, frame: bytes) -> bytes:
    """The batch with its records section replaced by `frame` and the attributes saying lz4 (as
    Kafka's KafkaLZ4BlockOutputStream writes them: independent blocks), length and CRC made to match."""
    out = bytearray(batch[:61]) + frame
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">h", out, 21, (struct.unpack_from(">h", out, 21)[0] & ~7) | 3)
    return _with_crc(out)


@st.composite
def plain_batches(draw):  # type: ignore[no-untyped-def]
    """A batch of 1-6 records with offset gaps, uncompressed or in an lz4 frame of independent
    blocks (any block size, with or without checksums and content size): what the walker takes."""
    import lz4.frame
    from conftest import v2_batch
    records, offset = [], 0
    for _ in range(draw(st.integers(1, 6))):
        offset += draw(st.integers(0, 2))
        records.append((offset, 1_700_000_000_000 + offset, draw(st.one_of(st.none(), st.binary(max_size=8))),
                        draw(st.one_of(st.none(), st.binary(max_size=40))), [("h", b"v")]))
        offset += 1
    batch = v2_batch(0, records)
    if draw(st.booleans()):
        frame = lz4.frame.compress(batch[61:], block_linked=False, block_size=draw(st.sampled_from(
            [lz4.frame.BLOCKSIZE_MAX64KB, lz4.frame.BLOCKSIZE_MAX256KB, lz4.frame.BLOCKSIZE_MAX1MB])),
            content_checksum=draw(st.booleans()), block_checksum=draw(st.booleans()),
            store_size=draw(st.booleans()))
        batch = lz4_framed(batch, frame)
    return batch


# A one-record plain batch (hypothesis found the case below with it).
ONE_RECORD = bytes.fromhex("00000000000000000000003c0000000002341358830000000000000000018bcfe568000000018bcfe568"
                           "00ffffffffffffffffffffffffffff000000011400000001010202680276")


def test_an_error_says_the_same_with_the_walker_when_a_later_batch_vouches_for_the_file(tmp_path):
    """The segment's first batch damaged (its magic), the next whole, the third's offsets going back.
    The Python walk checks the second batch's CRC, which makes the file a segment (`is_segment`), so the
    error names the offsets; the walker checks the same CRC in C, and its error must say the same (it
    said NOT_A_SEGMENT: the file was vouched for only by the Python walk)."""
    batches = [struct.pack(">q", base) + ONE_RECORD[8:] for base in (0, 2, 2)]
    log = bytearray(b"".join(batches))
    log[16] ^= 2  # the first batch's magic: 0
    pdir = tmp_path / "walk-0"
    pdir.mkdir()
    (pdir / f"{0:020d}.log").write_bytes(bytes(log))
    plog = LogDirs([str(tmp_path)]).partition("walk-0")
    with_walker = views(plog, 1, None, "read_uncommitted", "hide")
    assert with_walker["kcat_error"].endswith("corrupt batch at position 144: offsets go backwards: 2 after 2")
    assert_walker_agrees(LogDirs([str(tmp_path)]).partition("walk-0"), 1, None, "read_uncommitted", "hide")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(st.one_of(plain_batches(), plain_batches(), v2_batches()), min_size=1, max_size=8),
       data=st.data())
def test_random_segments_read_the_same_with_the_walker(batches: list[bytes], data: st.DataObject) -> None:
    gaps = data.draw(st.lists(st.integers(0, 3), min_size=len(batches), max_size=len(batches)))
    rebased = _rebased(batches, gaps)
    if data.draw(st.booleans()):  # a base offset edited (it is outside the CRC): overlaps, offsets going back
        i = data.draw(st.integers(0, len(rebased) - 1))
        base, batch = rebased[i]
        base = max(0, base + data.draw(st.integers(-3, 2)))
        rebased[i] = (base, struct.pack(">q", base) + batch[8:])
    # One segment, or two; each named near its first batch's base offset: at it, below it, or above
    # it (damage: offsets below the segment's base, or at or past the next segment's).
    split = data.draw(st.integers(1, len(rebased))) if len(rebased) > 1 else len(rebased)
    segments = [rebased[:split], rebased[split:]] if split < len(rebased) else [rebased]
    names: list[int] = []
    for part in segments:
        low = names[-1] + 1 if names else 0
        names.append(max(low, part[0][0] + data.draw(st.sampled_from([0, 0, 0, -2, -1, 1]))))
    files = [bytearray(b"".join(batch for _, batch in part)) for part in segments]
    if data.draw(st.integers(0, 3)) == 0:  # one byte of damage anywhere: header, CRC, records, or a cut tail
        damaged = files[data.draw(st.integers(0, len(files) - 1))]
        at = data.draw(st.integers(0, len(damaged) - 1))
        if data.draw(st.booleans()):
            damaged[at] ^= data.draw(st.integers(1, 255))
        else:
            del damaged[at:]
    with tempfile.TemporaryDirectory() as tmp:
        pdir = Path(tmp) / "walk-0"
        pdir.mkdir()
        for name, log in zip(names, files, strict=True):
            (pdir / f"{name:020d}.log").write_bytes(bytes(log))
        last_base, last_batch = segments[-1][-1]
        if len(segments[-1]) > 1 and data.draw(st.booleans()):
            # An index entry at the active segment's last batch (its last offset, as LogSegment.append
            # writes them): the log end is found from there, and damage before it is met only by the
            # walk over the batches (the walker's own checks).
            last = last_base + parse_batch_header(last_batch, 0, 0).last_offset - parse_batch_header(
                last_batch, 0, 0).base_offset
            position = sum(len(batch) for _, batch in segments[-1][:-1])
            if 0 <= last - names[-1] < 2**31:
                (pdir / f"{names[-1]:020d}.index").write_bytes(struct.pack(">ii", last - names[-1], position))
        plog = LogDirs([tmp]).partition("walk-0")
        log_end = max(plog.log_end_offset(), 1)
        start = data.draw(st.integers(0, log_end))
        end = data.draw(st.one_of(st.none(), st.integers(start, log_end + 2)))
        isolation = data.draw(st.sampled_from(["read_uncommitted", "read_committed"]))
        assert_walker_agrees(plog, start, end, isolation, "hide")


def _uncompressed_batch(rng: random.Random, base: int, n: int) -> bytes:
    from conftest import v2_batch
    return v2_batch(base, [(base + i, 1_700_000_000_000 + i, b"k%d" % i, bytes(rng.randrange(256) for _ in range(30)),
                            [("h", b"v")]) for i in range(n)])


def test_the_walker_checks_the_crc_and_takes_only_whole_plain_batches() -> None:
    rng = random.Random(5)
    first, second = _uncompressed_batch(rng, 0, 4), _uncompressed_batch(rng, 4, 3)
    assert struct.unpack_from(">I", first, 17)[0] == crc32c.crc32c(first[21:])  # the CRC it is held to
    prefix = line_prefix("t", 0)
    walk = native_views.walk_v2_run
    assert walk is not None

    def taken(window: bytes) -> tuple[int, int] | None:
        got = walk(window, 0, None, 1 << 62, 0, (1 << 63) - 1, prefix, False, False, 1 << 20)
        return None if got is None else (got[0], got[3])

    assert taken(first + second) == (len(first) + len(second), 7)
    assert taken(first + second[:-1]) == (len(first), 4)  # the cut batch is the Python walk's
    for at in (21, 30, 61, len(second) - 1):  # the CRC covers the attributes to the end
        bad = bytearray(second)
        bad[at] ^= 0x40
        assert taken(first + bytes(bad)) == (len(first), 4), at
    compressed = bytearray(second)
    compressed[22] |= 1  # the attributes say gzip (and the CRC is made to match): a decompressor's job
    struct.pack_into(">I", compressed, 17, crc32c.crc32c(bytes(compressed[21:])))
    assert taken(first + bytes(compressed)) == (len(first), 4)
    assert taken(bytes(compressed)) is None
    header = parse_batch_header(first, 0, 0)
    assert default_batch.records_payload(first, header)  # (a real records section)


def _with_crc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


@pytest.mark.parametrize("damage", ["overlap", "back", "below-segment", "last-below-base", "past-next-segment"])
def test_offset_damage_only_the_batch_walk_meets(tmp_path: Path, damage: str) -> None:
    """Offsets wrong in the middle of the active segment (its log end found from an index entry after
    them, so no header walk passes them first): the walker hands the batch back, and the view ends
    there with the Python walk's error."""
    from conftest import v2_batch
    segment_base = 10
    batches = [bytearray(v2_batch(b, [(b + i, 1_700_000_000_000 + b + i, b"k", b"v%d" % i, []) for i in range(3)]))
               for b in range(10, 25, 3)]
    third = batches[2]
    if damage == "overlap":
        struct.pack_into(">q", third, 0, 15)  # the batch before ends at 15
    elif damage == "back":
        struct.pack_into(">q", third, 0, 14)
    elif damage == "below-segment":
        struct.pack_into(">q", third, 0, 9)
    elif damage == "last-below-base":
        struct.pack_into(">i", third, 23, -1)
        batches[2] = bytearray(_with_crc(third))
    pdir = tmp_path / "walk-0"
    pdir.mkdir()
    if damage == "past-next-segment":  # a closed segment whose third batch reaches the next one's base
        (pdir / f"{segment_base:020d}.log").write_bytes(b"".join(batches[:3]))
        (pdir / f"{17:020d}.log").write_bytes(b"".join(batches[3:]))
    else:
        (pdir / f"{segment_base:020d}.log").write_bytes(b"".join(batches))
        position = sum(map(len, batches[:-1]))
        (pdir / f"{segment_base:020d}.index").write_bytes(struct.pack(">ii", 24 - segment_base, position))
    plog = LogDirs([str(tmp_path)]).partition("walk-0")
    for end in (None, 30):
        with_walker = views(plog, 10, end, "read_uncommitted", "hide")
        assert with_walker["lines_error"] is not None and with_walker["offsets"] == list(range(10, 16))
        assert_walker_agrees(plog, 10, end, "read_uncommitted", "hide")


def test_a_batch_the_renderer_leaves_to_python_is_handed_back_whole(tmp_path: Path) -> None:
    """A header key that is not UTF-8 (the Python renderer decodes it with replacement): the walker
    stops before that batch, with none of its lines, and the view is the Python walk's."""
    from conftest import v2_batch
    batches = [bytearray(v2_batch(b, [(b + i, 1_700_000_000_000, b"k", b"v", [("hx", b"1")]) for i in range(3)]))
               for b in range(0, 12, 3)]
    odd = batches[1]
    at = bytes(odd).rindex(b"hx")
    odd[at:at + 2] = b"\xff\xfe"
    batches[1] = bytearray(_with_crc(odd))
    pdir = tmp_path / "walk-0"
    pdir.mkdir()
    (pdir / f"{0:020d}.log").write_bytes(b"".join(batches))
    plog = LogDirs([str(tmp_path)]).partition("walk-0")
    got = views(plog, 0, None, "read_uncommitted", "hide")
    assert got["offsets"] == list(range(12)) and got["lines_error"] is None
    assert "\ufffd".encode() in got["data"]  # type: ignore[operator]
    assert got["kcat"].count("\ufffd\ufffd=1".encode()) == 1  # type: ignore[attr-defined]
    assert_walker_agrees(plog, 0, None, "read_uncommitted", "hide")


def test_lz4_batches_are_walked_and_bad_frames_handed_back(tmp_path: Path) -> None:
    """Kafka's lz4 frames (independent blocks) are decompressed by the walker; a frame it cannot
    read whole is the Python walk's, which says what is wrong with it."""
    import lz4.frame
    from conftest import v2_batch
    plain = [v2_batch(b, [(b + i, 1_700_000_000_000, b"k", b"value %d" % i * 20, []) for i in range(4)])
             for b in range(0, 20, 4)]
    framed = [lz4_framed(batch, lz4.frame.compress(batch[61:], block_linked=False)) for batch in plain]
    broken = bytearray(lz4.frame.compress(plain[3][61:], block_linked=False))
    broken[-12] ^= 0x55  # inside the compressed block
    framed[3] = lz4_framed(plain[3], bytes(broken))
    pdir = tmp_path / "walk-0"
    pdir.mkdir()
    (pdir / f"{0:020d}.log").write_bytes(b"".join(framed))
    plog = LogDirs([str(tmp_path)]).partition("walk-0")
    prefix = line_prefix("walk", 0)
    walk = native_views.walk_v2_run
    assert walk is not None
    got = walk(b"".join(framed), 0, None, 1 << 62, 0, (1 << 63) - 1, prefix, False, False, 1 << 20)
    assert got is not None and got[0] == sum(map(len, framed[:3])) and got[3] == 12
    result = views(plog, 0, None, "read_uncommitted", "hide")
    assert result["offsets"] == list(range(12)) and "lz4" in str(result["lines_error"])
    assert_walker_agrees(plog, 0, None, "read_uncommitted", "hide")


def test_a_readers_walker_calls_follow_the_size_of_its_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader's 1 MiB read of plain batches is rendered in about one walker call, not four at a fixed
    256 KiB (each call gives the GIL up and takes it back: with two readers of one mount, a wait for
    the other one's), and a 4 KiB read renders about 64 KiB, not 256 KiB (a seek costs less)."""
    from log_writers import write_log_dir

    from kfs.views.decoded import DecodedLog

    write_log_dir(str(tmp_path), 60_000, 1 << 30, per_batch=100, value_size=100)
    view = DecodedLog(LogDirs([str(tmp_path)]).partition("bench-0")).view(None)
    size = view.size()
    assert size > 8 << 20
    rendered: list[int] = []
    walk = plain_runs._walk_v2_run
    assert walk is not None

    def counted(*args: object, **kwargs: object) -> object:
        got = walk(*args, **kwargs)
        rendered.append(len(got[5]) if got is not None else 0)
        return got

    monkeypatch.setattr(plain_runs, "_walk_v2_run", counted)
    cursor, position, reads = view.cursor(), 0, 0
    while position < size:
        position += len(cursor.read(position, 1 << 20, partial=False))
        reads += 1
    assert position == size and len(rendered) <= 2 * reads, (len(rendered), reads)  # (a window's end is a call too)
    rendered.clear()
    assert len(view.cursor().read(size // 2 // 4096 * 4096, 4096, partial=False)) == 4096
    assert 0 < sum(rendered) <= plain_runs.MIN_BUDGET + 64 * 1024, rendered  # (at most a batch more)
