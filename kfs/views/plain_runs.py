"""Many plain batches at a time: the decoded views' walk in one compiled call per window.

Walking a segment a batch at a time in Python (header parse, offset checks, CRC call, the
generator layers from BatchFile._walk up to line_lists) cost ~6 us a batch: more than rendering
a 20-record batch, and all of it under the GIL. `walk_v2_run` (kfs/_native/csrc/views/walk_v2_run.c) takes the
window the segment walk has read and goes on from batch to batch itself, rendering (or counting)
each one's lines without the GIL, while every batch is *plain*; the first that is not is handed
back to the Python walk, which raises what is wrong with it or renders what is unusual, and offers
the next window after it. What it takes stands in the batch stream as one `PlainRun`.

A batch is plain when everything the Python walk would check of it holds, so that taking it can
never differ from the Python walk's verdict:

| the Python walk checks                                          | where                       |
|-----------------------------------------------------------------|-----------------------------|
| whole within the walk's limit, length >= 49, magic 2, not > 64 MiB | batch_walk.py `_walk`, peek_size |
| base >= the segment's base, last - base of segment <= 2^31 - 1,   | batch_walk.py `_offsets_problem` |
| last >= base, base > the previous batch's last                   |                             |
| last below the next segment's base (or the active one's log end) | partition_reads.py `_placed_batches` |
| a batch at or past the view's end ends it; one wholly before its | record_stream.py            |
| first is passed over; control batches and (read_committed)       | `selected_batches`          |
| transactional ones are the Python walk's                          |                             |
| uncompressed or lz4, 0 < records <= 2^20, CRC-32C valid, every  | batch_lines.py `fused_lines` |
| record inside the batch's offsets and in order (render_records)  |                             |
| an lz4 frame as `_lz4` reads it, independent blocks, <= 64 MiB   | compression.py `_lz4`       |

lz4 is decompressed by liblz4 itself (the reference implementation, which the `lz4` package wraps),
loaded from the system at run time (liblz4.so.1); without it lz4 batches are the Python walk's. Not
plain, and so always the Python walk's: gzip, snappy and zstd batches (their decompressors are Python
libraries; they release the GIL themselves), linked lz4 blocks, control batches, legacy formats, damage
of any kind, a decoder's lines (the internal topics', registry-framed payloads'), but for what a
`decoded` (WalkerDecoding) has the walker render as the decoder does: the batches of
`__consumer_offsets` holding offset commits alone (views/offsets_json.h), and the batches whose every
value is framed by a schema id the registry decoder has compiled, Avro or Protobuf (render_jsonl's
`avro` step, FramedLines'); a machine without a CRC-32C instruction (the call then takes nothing),
KFS_PURE_PYTHON=1. tests/test_plain_runs.py holds the lines and sizes of views read with and without it
to the same bytes, on the Kafka-written fixtures and random damaged logs;
tests/test_internal_commit_walk.py and tests/test_registry_walk.py do so for `decoded`."""

from __future__ import annotations

from dataclasses import dataclass

from kfs._native import views as native
from kfs.record import PlainRun
from kfs.storage import LogSegment
from kfs.storage.partition_reads import SelectedTaker

_walk_v2_run = native.walk_v2_run
NO_END = (1 << 63) - 1
RENDER_BUDGET = 256 * 1024  # lines per call when rendering, unless the caller's budget says
MIN_BUDGET, MAX_BUDGET = 64 * 1024, 1 << 20  # a reader's budget: what its read still needs, within these



@dataclass(frozen=True)
class WalkerDecoding:
    """How the walker renders a decoder's lines itself (kfs.views.jsonl.walker_decoding): `commits`,
    `__consumer_offsets`' offset commits; `avro` and `protobuf`, the values framed by the schema registry's
    ids (kfs.registry.lines.FramedLines' avro_table and protobuf_table, read afresh at each call: they grow
    as the decoder meets ids)."""

    commits: bool = False
    avro: dict[bytes, tuple[object, str] | bool] | None = None
    protobuf: dict[bytes, tuple[object, str] | bool] | None = None


NO_DECODING = WalkerDecoding()


def available() -> bool:
    """Whether the compiled walker was built (and not turned off by KFS_PURE_PYTHON)."""
    return _walk_v2_run is not None


def _int64s(segment: LogSegment, previous_last: int | None) -> bool:
    """Whether the walk's numbers fit the compiled walker (a hostile file name or offset may not)."""
    return segment.base_offset <= NO_END and (previous_last is None or -NO_END <= previous_last <= NO_END)


def line_taker(prefix: str, end: int | None, read_committed: bool,
               kcat: tuple[bytes, bytes] | None = None, budget: list[int] | None = None,
               decoded: WalkerDecoding | None = None) -> SelectedTaker:
    """A taker rendering each plain batch's lines of [first, end): PlainRun.taken is (marks, data)
    as render_v2_jsonl's lines mode gives them. `kcat`: (program, null) of kfs.views.kcat_format, the
    records as kcat -f or -J prints them instead of JSON lines (render_kcat.c). `decoded`: a decoder's
    lines (WalkerDecoding) for the batches the walker can render as it does: `__consumer_offsets`' offset
    commits alone (views/offsets_json.h; a batch holding group metadata is the Python walk's), values
    framed by the registry's compiled Avro schemas (a batch with any other record is the Python walk's).
    `budget`: a cell whose value is the lines each call makes (at least a batch's), which its owner sets
    between calls: a reader's cursor, to what its read still needs (one call per 1 MiB read, not four:
    each call gives the GIL up and takes it back, a wait when another reader holds it)."""
    stop = NO_END if end is None else max(min(end, NO_END), -NO_END)
    program, null = kcat if kcat is not None else (None, b"")
    decoding = decoded or NO_DECODING
    walk = _walk_v2_run
    assert walk is not None, "a compiled taker without the extension (plain_runs.available())"

    def take(first: int, segment: LogSegment, window: memoryview, position: int, previous_last: int | None,
             below: int) -> PlainRun | None:
        if not _int64s(segment, previous_last):
            return None
        got = walk(window, segment.base_offset, previous_last, max(min(below, NO_END), -NO_END),
                   max(min(first, NO_END), -NO_END), stop, prefix, read_committed, False,
                   RENDER_BUDGET if budget is None else budget[0], kcat=program, null=null,
                   commits=decoding.commits, avro=decoding.avro, protobuf=decoding.protobuf)
        if got is None:
            return None
        used, base_offset, last_offset, records, marks, data = got
        return PlainRun.of(position, used, base_offset, last_offset, records, (marks, data))

    return take


def kcat_taker(program: bytes, null: bytes, read_committed: bool) -> SelectedTaker:
    """A taker printing each plain batch's records as kcat -f or -J does (`program` from
    KcatFormat.program or KcatJson.program, `null` what a null key or value prints)."""
    return line_taker("", None, read_committed, kcat=(program, null))


def count_taker(prefix: str, end: int, read_committed: bool, decoded: WalkerDecoding | None = None) -> SelectedTaker:
    """A taker counting each plain batch's lines of [first, end): PlainRun.taken packs, per batch
    with lines, (first offset, next offset, bytes, where it ends from the window's start) as four
    native int64s. `decoded`: a decoder's lines, as line_taker's `decoded` renders them."""
    stop = max(min(end, NO_END), -NO_END)
    decoding = decoded or NO_DECODING
    walk = _walk_v2_run
    assert walk is not None, "a compiled taker without the extension (plain_runs.available())"

    def take(first: int, segment: LogSegment, window: memoryview, position: int, previous_last: int | None,
             below: int) -> PlainRun | None:
        if not _int64s(segment, previous_last):
            return None
        got = walk(window, segment.base_offset, previous_last, max(min(below, NO_END), -NO_END),
                   max(min(first, NO_END), -NO_END), stop, prefix, read_committed, True, 0,
                   commits=decoding.commits, avro=decoding.avro, protobuf=decoding.protobuf)
        if got is None:
            return None
        used, base_offset, last_offset, records, parts, _ = got
        return PlainRun.of(position, used, base_offset, last_offset, records, parts)

    return take
