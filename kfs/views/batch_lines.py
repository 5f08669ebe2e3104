"""A partition's JSON lines a batch at a time, rendered straight from each batch's bytes where possible.

The hot path of `kfs cat` and of the mount's decoded views. Runs of plain batches (uncompressed or
lz4) are walked, checked and rendered many at a time by the compiled walker (kfs.views.plain_runs);
a batch it hands back comes here one at a time. For a plain v2 batch (not a control
batch, CRC valid, records decompressed) `render_v2_jsonl` (kfs/_native/csrc/views/render_v2_jsonl.c) goes from the
records section to the lines in one call that creates no record and runs without the GIL, as the
decompressors kfs calls do (lz4.block, zstandard, zlib, cramjam): one process, or one mount
daemon serving two readers, decodes on both cores. Everything else (control markers, legacy
message sets, a batch the fused renderer leaves to the decoder, the internal topics' own lines, a
build without the extension, KFS_PURE_PYTHON=1) is decoded into records and rendered by the one
renderer (kfs.views.jsonl), which stays the oracle: tests/test_batch_lines.py holds the two to the
same bytes.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import accumulate
from typing import NamedTuple

from kfs._native import views as native
from kfs.record import BatchHeader, PlainRun, Record, crc_is_valid, default_batch
from kfs.record.compression import MAX_BATCH_RECORDS
from kfs.storage import LogSegment, PartitionLog, batch_records
from kfs.storage.partition_reads import SelectedTaker
from kfs.views import plain_runs

_render_v2_jsonl = native.render_v2_jsonl
_NO_END = (1 << 63) - 1  # to render_v2_jsonl: no end


class BatchLines(NamedTuple):
    """A batch's lines a reader sees: one bytes for them all (`data`) and, per line, its record's
    offset and where its line ends in `data`, packed as two native int64s (`marks`). Two objects per
    batch, not two per line: the cursor slices what it serves, and unpacks the marks only where it
    maps (the fused renderer's lines mode gives the pair as it is)."""

    marks: bytes
    data: bytes

    @property
    def offsets(self) -> Sequence[int]:
        return memoryview(self.marks).cast("q")[0::2]

    @property
    def ends(self) -> Sequence[int]:
        return memoryview(self.marks).cast("q")[1::2]

    @classmethod
    def of(cls, offsets: list[int], lines: list[bytes]) -> BatchLines:
        """The pair for lines rendered one bytes each (the decoder's path)."""
        marks = array("q", [0, 0] * len(offsets))
        marks[0::2] = array("q", offsets)
        marks[1::2] = array("q", accumulate(map(len, lines)))
        return cls(marks.tobytes(), b"".join(lines))


def fused_lines(header: BatchHeader, body: memoryview, prefix: str, first: int, end: int | None,
                lines: bool = False) -> bytes | BatchLines | None:
    """The lines of the batch's records in [first, end) (with `lines`: as BatchLines), rendered by
    the fused renderer; None when the batch must take the decoder's path (which
    raises what is wrong with it, or renders what is unusual)."""
    if _render_v2_jsonl is None or header.magic != 2 or header.is_control \
            or not 0 < header.record_count <= MAX_BATCH_RECORDS or header.last_offset < header.base_offset \
            or not crc_is_valid(body, header):
        return None  # (a negative last offset delta: every record is outside the batch, the decoder says so)
    payload = default_batch.section_for_compiled(body, header)  # in place, or decompressed without the GIL
    if payload is None:
        return None
    # (a record outside the batch's offsets is left to the decoder, which says what it is)
    out = _render_v2_jsonl(payload, header.record_count, header.base_offset, header.first_timestamp,
                           header.timestamp_type, header.max_timestamp, prefix, first,
                           _NO_END if end is None else min(end, _NO_END), lines, min(header.last_offset, _NO_END))
    return BatchLines._make(out) if isinstance(out, tuple) else out


def line_lists(plog: PartitionLog, start: int, end: int | None, *, isolation: str, control: str, prefix: str,
               render: Callable[[list[Record]], list[bytes]], fused: bool, own_segment: LogSegment | None = None,
               budget: list[int] | None = None,
               decoded: plain_runs.WalkerDecoding | None = None) -> Iterator[BatchLines]:
    """The lines per batch holding records of [start, end) a reader sees, as `render(records)` of
    `plog.record_lists` gives them. `fused`: the lines are the plain ones of
    kfs.views.jsonl (no decoder of their own), so the fused renderer may stand in for `render`;
    `own_segment`: only that segment object's batches (a decoded run's own file,
    PartitionLog.segment_batches); `budget`: the walker's lines per call (plain_runs.line_taker);
    `decoded`: the lines are a decoder's whose batches the walker may render as it does
    (plain_runs.WalkerDecoding: `__consumer_offsets`' offset commits, registry-framed Avro values).
    Raises what reading the records raises (CorruptLogError), after the batches before the damage."""
    take = None
    if (fused or decoded) and plain_runs.available():
        take = plain_runs.line_taker(prefix, end, isolation == "read_committed", budget=budget,
                                     decoded=None if fused else decoded)
    for segment, header, body, first in plog.selected_batches(start, isolation=isolation, control=control,
                                                              end_offset=end, segment=own_segment, take=take):
        if type(header) is PlainRun:  # many plain batches' lines, rendered by the walker
            if header.taken[0]:  # type: ignore[index]
                yield BatchLines._make(header.taken)  # type: ignore[arg-type]
            continue
        out = fused_lines(header, body, prefix, first, end, lines=True) if fused else None
        if out is None:
            records = batch_records(segment, header, body, first, end)
            out = BatchLines.of([r.offset for r in records], render(records))
        if out.marks:  # type: ignore[union-attr]
            yield out  # type: ignore[misc]


def joined_lines(plog: PartitionLog, start: int, *, isolation: str, control: str, prefix: str,
                 render: Callable[[list[Record]], bytes | Iterable[bytes]], fused: bool,
                 take: SelectedTaker | None = None,
                 decoded: plain_runs.WalkerDecoding | None = None) -> Iterator[bytes]:
    """The lines of every batch from `start` to the log end, each batch's joined: `kfs cat`'s stream.
    `take`: the compiled walker's taker of other lines than JSON (`kfs cat -f`), for runs of plain
    batches; `render` makes the lines of the batches it leaves, as one bytes or in pieces (a kcat
    format's, bounded in memory: kfs.views.kcat_format); `decoded`: as line_lists'."""
    if take is None and (fused or decoded) and plain_runs.available():
        take = plain_runs.line_taker(prefix, None, isolation == "read_committed",
                                     decoded=None if fused else decoded)
    for segment, header, body, first in plog.selected_batches(start, isolation=isolation, control=control, take=take):
        if type(header) is PlainRun:
            if header.taken[1]:  # type: ignore[index]
                yield header.taken[1]  # type: ignore[index]
            continue
        out = fused_lines(header, body, prefix, first, None) if fused else None
        if out is None:
            rendered = render(batch_records(segment, header, body, first, None))
            if not isinstance(rendered, bytes):
                yield from rendered
                continue
            out = rendered
        if out:
            yield out  # type: ignore[misc]
