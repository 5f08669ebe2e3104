"""How many bytes a batch's JSON lines take, without rendering them where that can be avoided.

The size of a decoded view is the sum of its lines. Rendering every line to learn it costs as much
as reading the file; counting is cheaper: for a plain v2 batch `count_jsonl` (kfs/_native/csrc/views/count_jsonl.c)
walks the records section and adds up each field's escaped length without creating a record or a
byte of output, outside the GIL (a compressed batch is still decompressed first); runs of plain
batches are counted many at a time by the compiled walker (kfs.views.plain_runs). Everything else
(control markers shown with control=show, legacy message sets, a batch the counter leaves to the
decoder, the internal topics' own rendering, a build without the extension) is decoded and
rendered by the one renderer, and its lines measured: the renderer is always the oracle.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import NamedTuple

from kfs._native import views as native
from kfs.record import PlainRun, Record, crc_is_valid, default_batch
from kfs.storage import LogSegment, PartitionLog, batch_records
from kfs.views import plain_runs

_count_jsonl = native.count_jsonl
_NO_END = (1 << 63) - 1


class CountedBatch(NamedTuple):
    """The lines of one batch's records a view shows: where they start (the offset of the first),
    how many bytes and records, and where the batch ends in its segment file (for progress)."""

    first_offset: int
    next_offset: int  # every record of the view below it is counted (the batch's last offset + 1)
    length: int
    records: int
    segment_base_offset: int
    file_end: int
    parts: bytes | None = None  # several batches at once (kfs.views.plain_runs): (first, next, bytes, end) each


def counted_batches(plog: PartitionLog, start: int, end: int, *, isolation: str, control: str, prefix: str,
                    render: Callable[[list[Record]], list[bytes]], countable: bool,
                    own_segment: LogSegment | None = None,
                    decoded: plain_runs.WalkerDecoding | None = None) -> Iterator[CountedBatch]:
    """Per batch holding records of [start, end) that the view shows, their lines' length.

    `render` is the view's renderer; `countable`: its lines are section 3's plain ones, so the
    compiled counter may stand in for it; `own_segment`: only that segment object's batches (a run's
    own file, PartitionLog.segment_batches); `decoded`: the lines are a decoder's whose batches the
    compiled walker may count as it does (plain_runs.WalkerDecoding). Raises
    what reading the records raises (CorruptLogError),
    after the batches before the damage.
    """
    if start >= end and own_segment is None:
        return
    take = plain_runs.count_taker(prefix, end, isolation == "read_committed",
                                  decoded=None if countable else decoded) \
        if (countable or decoded) and plain_runs.available() else None
    for segment, header, body, first in plog.selected_batches(start, isolation=isolation, control=control,
                                                              end_offset=end, segment=own_segment, take=take):
        if type(header) is PlainRun:  # many plain batches counted by the walker
            parts = header.taken
            if parts:
                fields = memoryview(parts).cast("q")  # type: ignore[arg-type]
                yield CountedBatch(fields[0], fields[-3], sum(fields[2::4]), header.record_count, segment.base_offset,
                                   header.position + fields[-1], parts)  # type: ignore[arg-type]
            continue
        counted = None
        if countable and _count_jsonl is not None and header.magic == 2 and not header.is_control \
                and header.record_count > 0 and header.last_offset >= header.base_offset \
                and crc_is_valid(body, header):
            payload = default_batch.section_for_compiled(body, header)  # None: the decoder below raises
            if payload is not None:
                # (a record outside the batch's offsets is left to the decoder, which says what it is)
                counted = _count_jsonl(payload, header.record_count, header.base_offset, header.first_timestamp,
                                       header.timestamp_type, header.max_timestamp, prefix, first,
                                       min(end, _NO_END), min(header.last_offset, _NO_END))

        if counted is None:
            records = batch_records(segment, header, body, first, end)
            lines = render(records)
            counted = (sum(map(len, lines)), len(records), records[0].offset if records else -1)
        length, count, first_offset = counted
        if count:
            yield CountedBatch(first_offset, min(header.last_offset + 1, end), length, count, segment.base_offset,
                               header.position + header.size)
