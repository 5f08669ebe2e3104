"""From batches to the records a reader sees: offset range, control markers, aborted transactions,
and what a corrupt batch becomes (an error, or with on_corrupt="skip" a `CorruptBatch` in the stream).

`PartitionLog.record_lists` is the entry point; this module keeps each of those rules in one place.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator

from kfs.record import BatchHeader, Record, crc_is_valid
from kfs.storage.errors import CorruptLogError
from kfs.storage.segment import LogSegment
from kfs.storage.transactions import AbortedIndex, marker_kinds

log = logging.getLogger("kfs")

Batches = Iterable[tuple[LogSegment, BatchHeader, memoryview]]
RecordLists = Iterator[tuple[LogSegment, BatchHeader, list[Record]]]


class ControlRecord(Record):
    """A transaction marker or other control record, for `control=show`."""

    __slots__ = ("control", "coordinator_epoch", "producer_id")

    def __init__(self, record: Record, control: str, producer_id: int, coordinator_epoch: int | None) -> None:
        super().__init__(record.offset, record.timestamp, record.timestamp_type, record.key, record.value,
                         record.headers)
        self.control = control
        self.producer_id = producer_id
        self.coordinator_epoch = coordinator_epoch


class CorruptBatch(Record):
    """Stands in the record stream for a batch that could not be read, with `on_corrupt="skip"`:
    renderers print it as an `{"error": ...}` line; the records after it follow."""

    __slots__ = ("error", "path", "position")

    def __init__(self, error: CorruptLogError, offset: int) -> None:
        super().__init__(offset, -1, "NoTimestampType", None, None, [])
        self.error = str(error)
        self.path = error.path
        self.position = error.position


def record_lists_from(batches: Batches, first_offset: int, end_offset: int | None, *, control: bool,
                      aborted: AbortedIndex | None, skip_bad_batches: bool = False) -> RecordLists:
    """Per batch: its records in [first_offset, end_offset), when it has any a reader sees.

    Control batches show only with `control` (as `ControlRecord`s); aborted transactional batches
    are dropped when `aborted` is given (read_committed). skip_bad_batches: a batch whose header
    reads but whose CRC or records do not becomes a `CorruptBatch`, and the walk goes on.
    """
    for segment, header, body in selected_batches(batches, first_offset, end_offset, control=control,
                                                  aborted=aborted, yield_damaged=skip_bad_batches):
        try:
            records = _decoded(segment, header, body)
        except CorruptLogError as e:
            if not skip_bad_batches:
                raise
            log.warning("%s; skipping it", e)
            yield segment, header, [CorruptBatch(e, _first_offset_of(header, first_offset))]
            continue
        in_range = _in_range(records, first_offset, end_offset)
        if in_range:
            yield segment, header, in_range
        if end_offset is not None and not header.is_control and records and records[-1].offset >= end_offset:
            return


def selected_batches(batches: Batches, first_offset: int, end_offset: int | None, *, control: bool,
                     aborted: AbortedIndex | None, yield_damaged: bool = False
                     ) -> Iterator[tuple[LogSegment, BatchHeader, memoryview]]:
    """The batches `record_lists_from` decodes: those that may hold records of [first_offset,
    end_offset) a reader sees (for front ends that only measure them, kfs.views.line_lengths).

    A legacy compressed wrapper's first offset is known only inside it (its header has its last), so
    the segment's walk cannot see it overlap the batch before; it is checked here, where the
    wrapper is opened anyway: the same offset twice would be two records at one place.

    A control batch hidden from the reader is still checked where the reader reaches it, as a
    consumer checks it (`check_hidden_markers`): its CRC always, its markers under read_committed.
    One that fails raises, or with `yield_damaged` is yielded, for the decoding to meet its damage
    (on_corrupt="skip": it becomes one CorruptBatch, and the walk goes on after it)."""
    previous_last: int | None = None
    for segment, header, body in batches:
        if header.base_offset < 0 <= header.last_offset and previous_last is not None \
                and header.last_offset >= first_offset:
            first = segment.base_offset_of(header, body)
            if first <= previous_last:
                raise segment.corrupt(header.position, f"offsets go backwards: {first} after {previous_last}")
        previous_last = header.last_offset
        if end_offset is not None and header.last_offset >= 0 \
                and end_offset <= segment.base_offset_of(header, body) <= header.last_offset:
            return  # (a wrapper whose records start past its last offset is damage: decoding it says so)
        if header.last_offset < first_offset:
            continue
        if header.is_control and not control:
            try:
                check_hidden_markers(segment, header, body, parse=aborted is not None)
            except CorruptLogError:
                if not yield_damaged:
                    raise
                yield segment, header, body
            continue
        if aborted is not None and not header.is_control and header.is_transactional and aborted.is_aborted(header):
            continue  # (an ABORT marker is shown with control=show: it is in its transaction's span)
        yield segment, header, body


def batch_records(segment: LogSegment, header: BatchHeader, body: memoryview, first_offset: int,
                  end_offset: int | None) -> list[Record]:
    """What `record_lists_from` yields for one selected batch (raises CorruptLogError)."""
    return _in_range(_decoded(segment, header, body), first_offset, end_offset)


def _decoded(segment: LogSegment, header: BatchHeader, body: memoryview) -> list[Record]:
    """The batch's records, a control batch's as markers (raises CorruptLogError)."""
    records = segment.records_of(header, body)
    if header.is_control:
        return markers(segment, header, records)
    return records


def markers(segment: LogSegment, header: BatchHeader, records: list[Record]) -> list[Record]:
    """A control batch's records as markers (`ControlRecord`s); one Kafka refuses is damage at the batch
    (CorruptLogError: kfs.storage.transactions.marker_kinds)."""
    return [ControlRecord(record, kind, header.producer_id, epoch)
            for record, (kind, epoch) in zip(records, marker_kinds(segment, header, records), strict=True)]


def check_hidden_markers(segment: LogSegment, header: BatchHeader, body: memoryview, *, parse: bool) -> None:
    """A control batch a reader passes without showing it, checked as a Kafka consumer checks it: its
    CRC (`check.crcs`: a consumer checks every batch, markers too), and with `parse` (read_committed,
    whose consumer reads each marker's type: `containsAbortMarker`) its records and markers. Raises
    CorruptLogError; a read_uncommitted reader never parses the markers it hides, as Kafka's does not."""
    if parse:
        marker_kinds(segment, header, segment.records_of(header, body))
    elif not crc_is_valid(body, header):
        segment.records_of(header, body)  # (raises the batch's CRC error, as for any batch)


def _in_range(records: list[Record], first_offset: int, end_offset: int | None) -> list[Record]:
    if records and records[0].offset < first_offset:
        records = [r for r in records if r.offset >= first_offset]
    if end_offset is not None and records and records[-1].offset >= end_offset:
        records = [r for r in records if r.offset < end_offset]
    return records


def _first_offset_of(header: BatchHeader, first_offset: int) -> int:
    """The offset a corrupt batch stands at in the stream (legacy wrappers know only their last)."""
    return max(first_offset, header.base_offset if header.base_offset >= 0 else header.last_offset)


def record_lists_skipping_corrupt(batches_from: Callable[[LogSegment, int], Batches],
                                  segments: Callable[[], list[LogSegment]], segment: LogSegment, position: int,
                                  first_offset: int, end_offset: int | None, *, control: bool,
                                  aborted: AbortedIndex | None) -> Iterator[list[Record]]:
    """`record_lists_from`, going on after each corrupt batch: past it when its header reads (a
    bad CRC or record), else at the next offset index entry after it (index entries are batch
    starts), else at the next segment: a bad length field leaves no other way to the next batch.
    `batches_from` and `segments`: the partition's (kfs.storage.partition_reads, local_log)."""
    current: LogSegment | None = segment
    last_offset = first_offset - 1
    while current is not None:
        try:
            for _, _, records in record_lists_from(batches_from(current, position), first_offset, end_offset,
                                                   control=control, aborted=aborted, skip_bad_batches=True):
                if records:
                    last_offset = max(last_offset, records[-1].offset)
                yield records
            return
        except CorruptLogError as e:
            log.warning("%s; skipping it", e)
            yield [CorruptBatch(e, last_offset + 1)]
            current, position = resync_after(segments(), e)


def selected_batches_skipping_corrupt(batches_from: Callable[[LogSegment, int], Batches],
                                      segments: Callable[[], list[LogSegment]], segment: LogSegment, position: int,
                                      first_offset: int, end_offset: int | None, *, control: bool,
                                      aborted: AbortedIndex | None
                                      ) -> Iterator[tuple[LogSegment, BatchHeader, memoryview]]:
    """The batches `record_lists_skipping_corrupt` decodes, undecoded (for front ends that build their
    rows without Records: kfs.spark.arrow_columns): a damaged batch whose header reads is yielded, for
    its decoding to meet the damage and skip it; past one whose header does not, the walk goes on where
    `resync_after` says, as there."""
    current: LogSegment | None = segment
    while current is not None:
        try:
            yield from selected_batches(batches_from(current, position), first_offset, end_offset, control=control,
                                        aborted=aborted, yield_damaged=True)
            return
        except CorruptLogError as e:
            log.warning("%s; skipping it", e)
            current, position = resync_after(segments(), e)


def resync_after(segments: list[LogSegment], error: CorruptLogError) -> tuple[LogSegment | None, int]:
    """Where a walk can go on after a batch whose header cannot be read."""
    for i, segment in enumerate(segments):
        if segment.log_path != error.path:
            continue
        valid_end = segment.valid_size()  # a walk from past the complete batches yields nothing: it would
        for _, entry_position in segment.offset_index_entries():  # meet the same error again, forever
            if error.position < entry_position < valid_end:
                try:
                    if segment.batch_at(entry_position) is not None:
                        return segment, entry_position
                except CorruptLogError:
                    continue
        return (segments[i + 1], 0) if i + 1 < len(segments) else (None, 0)
    return None, 0
