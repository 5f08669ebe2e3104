"""A partition's log: where an offset or a time is, and the batches and records from there.

The read path is the broker's. An offset: floor segment (`LogSegments.floorSegment`), its offset
index, a short header scan (`LogSegment.translateOffset`), moving to the next segment when a
segment holds nothing at or after the target (`UnifiedLog.read`). A time: the first segment whose
largest timestamp is >= T, then `LogSegment.findOffsetByTimestamp` (`UnifiedLog.fetchOffsetByTimestamp`).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from kfs.record import BatchHeader, Record, parse_control_record
from kfs.storage.errors import (
    CorruptLogError,
    NoRecordAtOffset,
    OffsetOutOfRange,
    TimestampNotFound,
    UnknownPartition,
)
from kfs.storage.segment import LogSegment
from kfs.storage.segments import LogSegments
from kfs.storage.specs import parse_time_spec, resolve_offset_spec
from kfs.storage.txn_index import AbortedTxn

log = logging.getLogger("kfs")

REFRESH_INTERVAL = 0.5  # seconds between directory listings of a partition


@dataclass(frozen=True)
class Location:
    """Where a lookup landed: the batch (by segment and position) and the record found in it or after."""

    segment_base_offset: int
    index_entry: tuple[int, int] | None
    position: int
    batch_base_offset: int
    batch_last_offset: int
    offset: int | None
    timestamp: int | None

    def as_dict(self) -> dict:
        return {
            "segment_base_offset": self.segment_base_offset,
            "index_entry": list(self.index_entry) if self.index_entry else None,
            "position": self.position,
            "batch_base_offset": self.batch_base_offset,
            "batch_last_offset": self.batch_last_offset,
            "offset": self.offset,
            "timestamp": self.timestamp,
        }


@dataclass(frozen=True)
class Extent:
    """A byte range [start, end) of one segment file."""

    path: str
    start: int
    end: int
    segment_base_offset: int


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


class PartitionLog:
    """One `<topic>-<partition>` directory. Cheap to create: nothing is opened until asked."""

    def __init__(self, path: str, topic: str, partition: int, checkpoints: CheckpointReader) -> None:
        self.path = path
        self.topic = topic
        self.partition = partition
        self.name = f"{topic}-{partition}"
        self._checkpoints = checkpoints
        self._segments = LogSegments(path)
        self._refreshed_at = float("-inf")
        self._lock = threading.Lock()
        self._largest_ts_cache: dict[int, int] = {}
        self._aborted_cache: tuple[tuple, AbortedIndex] | None = None

    # ---- segments -------------------------------------------------------------------------------

    def refresh(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._refreshed_at < REFRESH_INTERVAL:
            return
        with self._lock:
            try:
                self._segments.refresh()
            except FileNotFoundError:
                raise UnknownPartition(f"partition {self.name} no longer exists at {self.path}") from None
            self._refreshed_at = now

    def segments(self) -> list[LogSegment]:
        self.refresh()
        return self._segments.all()

    def floor_segment(self, offset: int) -> LogSegment | None:
        self.refresh()
        return self._segments.floor(offset)

    def higher_segment(self, base_offset: int) -> LogSegment | None:
        return self._segments.higher(base_offset)

    def is_active(self, segment: LogSegment) -> bool:
        return self._segments.is_last(segment)

    def close(self) -> None:
        self._segments.close()

    # ---- log start and end ----------------------------------------------------------------------

    def log_start_offset(self) -> int:
        """max(first segment's base offset, the log dir's log-start-offset-checkpoint entry)."""
        first = self._first_segment()
        base = first.base_offset if first else 0
        checkpointed = self._checkpoints.log_start_offset(self.topic, self.partition)
        return max(base, checkpointed) if checkpointed is not None else base

    def log_end_offset(self) -> int:
        self.refresh()
        last = self._segments.last()
        return last.next_offset() if last else 0

    def _first_segment(self) -> LogSegment | None:
        self.refresh()
        return self._segments.first()

    # ---- specs ----------------------------------------------------------------------------------

    def resolve_offset(self, spec: str) -> int:
        return resolve_offset_spec(spec, self.log_start_offset(), self.log_end_offset())

    @staticmethod
    def parse_time(spec: str) -> int:
        return parse_time_spec(spec)

    # ---- lookups --------------------------------------------------------------------------------

    def locate_offset(self, target: int, with_record: bool = True) -> Location:
        """Kafka's fetch: the batch holding `target` (gaps resolve forward) and the first record >= it.

        Finding the record decodes the batch; callers that need only the batch (raw views, seek
        maps) pass with_record=False and get offset and timestamp None.
        """
        start, end = self.log_start_offset(), self.log_end_offset()
        if not start <= target < end:
            raise OffsetOutOfRange(f"offset {target} is out of range for {self.name} "
                                   f"(log start {start}, log end {end})")
        segment = self._segments.floor(target) or self._segments.first()
        while segment is not None:
            found = segment.translate_offset(target)
            if found is not None:
                entry, header = found
                record = self._first_record_from(segment, header, target) if with_record else None
                return Location(segment.base_offset, entry, header.position, segment.base_offset_of(header),
                                header.last_offset, record.offset if record else None,
                                record.timestamp if record else None)
            segment = self._segments.higher(segment.base_offset)
        raise OffsetOutOfRange(f"offset {target} is out of range for {self.name}")

    def _first_record_from(self, segment: LogSegment, header: BatchHeader, target: int) -> Record | None:
        for _, _, record in self._records_from(segment, header.position, target, None, control=False):
            return record
        return None

    def largest_timestamp(self, segment: LogSegment) -> int:
        """A segment's largest timestamp, remembered for closed segments (they no longer change)."""
        cached = self._largest_ts_cache.get(segment.base_offset)
        if cached is not None:
            return cached
        value = segment.largest_timestamp()
        if not self.is_active(segment):
            self._largest_ts_cache[segment.base_offset] = value
        return value

    def locate_time(self, target_ms: int) -> Location:
        """Kafka's ListOffsets: first segment whose largest timestamp >= T, then its indexes and a scan."""
        start = self.log_start_offset()
        for segment in self.segments():
            if self.largest_timestamp(segment) >= target_ms:
                found = segment.find_offset_by_timestamp(target_ms, start)
                if found is None:
                    break
                entry, record, header = found
                return Location(segment.base_offset, entry, header.position, segment.base_offset_of(header),
                                header.last_offset, record.offset, record.timestamp)
        raise TimestampNotFound(f"no record of {self.name} has a timestamp at or after {target_ms}")

    def record_at(self, offset: int, *, isolation: str = "read_uncommitted") -> Record:
        """The record at exactly `offset` (a `.value`); a gap is NoRecordAtOffset."""
        location = self.locate_offset(offset)
        if location.offset != offset:
            raise NoRecordAtOffset(f"{self.name} has no record at offset {offset}")
        for record in self.records(offset, isolation=isolation, end_offset=offset + 1):
            return record
        raise NoRecordAtOffset(f"{self.name} has no record at offset {offset} (aborted)")

    # ---- batches and records --------------------------------------------------------------------

    def batches_from(self, segment: LogSegment, position: int
                     ) -> Iterator[tuple[LogSegment, BatchHeader, memoryview]]:
        """Every complete batch from (segment, position) to the log end, across segments."""
        current: LogSegment | None = segment
        start = position
        while current is not None:
            for header, body in current.batches(start, current.valid_size()):
                yield current, header, body
            self.refresh()
            current = self._segments.higher(current.base_offset)
            start = 0

    def raw_extents(self, location: Location) -> list[Extent]:
        """The bytes of every complete batch from the located one to the log end, as file ranges."""
        self.refresh()
        extents = []
        segment = self._segments.floor(location.segment_base_offset)
        start = location.position
        while segment is not None:
            end = segment.valid_size()
            if end > start:
                extents.append(Extent(segment.log_path, start, end, segment.base_offset))
            segment = self._segments.higher(segment.base_offset)
            start = 0
        return extents

    def records(self, start_offset: int | None = None, *, isolation: str = "read_uncommitted",
                control: str = "hide", end_offset: int | None = None, on_corrupt: str = "fail") -> Iterator[Record]:
        """Records from `start_offset` (the log start by default; gaps resolve forward) to the log end.

        read_committed drops aborted transactional batches; control="show" yields markers as
        `ControlRecord`s. Raises OffsetOutOfRange when the start is outside the log. A corrupt
        batch raises CorruptLogError after the records before it, or with on_corrupt="skip" is a
        `CorruptBatch` in the stream, and reading goes on after it.
        """
        for records in self.record_lists(start_offset, isolation=isolation, control=control, end_offset=end_offset,
                                         on_corrupt=on_corrupt):
            yield from records

    def record_lists(self, start_offset: int | None = None, *, isolation: str = "read_uncommitted",
                     control: str = "hide", end_offset: int | None = None,
                     on_corrupt: str = "fail") -> Iterator[list[Record]]:
        """`records()` a batch at a time (a non-empty list per batch): for front ends that render or
        convert whole batches, which saves a generator step per record on the hot path."""
        if start_offset is None:
            start_offset = self.log_start_offset()
        try:
            location = self.locate_offset(start_offset, with_record=False)
        except OffsetOutOfRange:
            if start_offset == self.log_end_offset():
                return
            raise
        segment = self._segments.floor(location.segment_base_offset)
        assert segment is not None
        aborted = self.aborted_transactions() if isolation == "read_committed" else None
        first = max(start_offset, self.log_start_offset())
        if on_corrupt == "skip":
            yield from self._record_lists_skipping_corrupt(segment, location.position, first, end_offset,
                                                           control=control == "show", aborted=aborted)
            return
        for _, _, records in self._record_lists_from(segment, location.position, first, end_offset,
                                                     control=control == "show", aborted=aborted):
            yield records

    def _record_lists_skipping_corrupt(self, segment: LogSegment, position: int, first_offset: int,
                                       end_offset: int | None, control: bool, aborted: AbortedIndex | None
                                       ) -> Iterator[list[Record]]:
        """`_record_lists_from`, going on after each corrupt batch: past it when its header reads (a
        bad CRC or record), else at the next offset index entry after it (index entries are batch
        starts), else at the next segment: a bad length field leaves no other way to the next batch."""
        current: LogSegment | None = segment
        last_offset = first_offset - 1
        while current is not None:
            try:
                for _, _, records in self._record_lists_from(current, position, first_offset, end_offset,
                                                             control, aborted, skip_bad_batches=True):
                    if records:
                        last_offset = max(last_offset, records[-1].offset)
                    yield records
                return
            except CorruptLogError as e:
                log.warning("%s; skipping it", e)
                yield [CorruptBatch(e, last_offset + 1)]
                current, position = self._resync_after(e)

    def _resync_after(self, error: CorruptLogError) -> tuple[LogSegment | None, int]:
        """Where a walk can go on after a batch whose header cannot be read."""
        segments = self.segments()
        for i, segment in enumerate(segments):
            if segment.log_path != error.path:
                continue
            for _, entry_position in segment.offset_index_entries():
                if entry_position > error.position:
                    try:
                        if segment.batch_at(entry_position) is not None:
                            return segment, entry_position
                    except CorruptLogError:
                        continue
            return (segments[i + 1], 0) if i + 1 < len(segments) else (None, 0)
        return None, 0

    def _records_from(self, segment: LogSegment, position: int, first_offset: int, end_offset: int | None,
                      control: bool, aborted: AbortedIndex | None = None
                      ) -> Iterator[tuple[LogSegment, BatchHeader, Record]]:
        for seg, header, records in self._record_lists_from(segment, position, first_offset, end_offset,
                                                            control, aborted):
            for record in records:
                yield seg, header, record

    def _record_lists_from(self, segment: LogSegment, position: int, first_offset: int, end_offset: int | None,
                           control: bool, aborted: AbortedIndex | None = None, skip_bad_batches: bool = False
                           ) -> Iterator[tuple[LogSegment, BatchHeader, list[Record]]]:
        """Per batch from (segment, position): its records in [first_offset, end_offset), if any.

        skip_bad_batches: a batch whose header reads but whose CRC or records do not becomes a
        `CorruptBatch`, and the walk goes on with the next batch.
        """
        for seg, header, body in self.batches_from(segment, position):
            if end_offset is not None and header.last_offset >= 0 and seg.base_offset_of(header, body) >= end_offset:
                return
            if header.last_offset < first_offset:
                continue
            if header.is_control:
                if not control:
                    continue
                markers: list[Record] = []
                try:
                    control_records = seg.records_of(header, body)
                except CorruptLogError as e:
                    if not skip_bad_batches:
                        raise
                    yield seg, header, [CorruptBatch(e, max(first_offset, header.last_offset))]
                    continue
                for record in control_records:
                    if record.offset >= first_offset and (end_offset is None or record.offset < end_offset):
                        kind, epoch = parse_control_record(record)
                        markers.append(ControlRecord(record, kind, header.producer_id, epoch))
                if markers:
                    yield seg, header, markers
                continue
            if aborted is not None and header.is_transactional and aborted.is_aborted(header):
                continue
            try:
                records = seg.records_of(header, body)
            except CorruptLogError as e:
                if not skip_bad_batches:
                    raise
                log.warning("%s; skipping it", e)
                yield seg, header, [CorruptBatch(e, max(first_offset, header.base_offset, header.last_offset
                                                        if header.base_offset < 0 else header.base_offset))]
                continue
            if records and records[0].offset < first_offset:
                records = [r for r in records if r.offset >= first_offset]
            if end_offset is not None and records and records[-1].offset >= end_offset:
                records = [r for r in records if r.offset < end_offset]
                if records:
                    yield seg, header, records
                return
            if records:
                yield seg, header, records

    # ---- transactions ---------------------------------------------------------------------------

    def aborted_transactions(self) -> AbortedIndex:
        """Aborted transactions from the `.txnindex` files, or by following the markers where missing.

        Remembered until a segment is added, removed or grows (the key is every segment's size).
        """
        segments = self.segments()
        key = tuple((s.base_offset, s.file_size()) for s in segments)
        cached = self._aborted_cache
        if cached is not None and cached[0] == key:
            return cached[1]
        index = self._collect_aborted()
        self._aborted_cache = (key, index)
        return index

    def _collect_aborted(self) -> AbortedIndex:
        index = AbortedIndex()
        missing = False
        for segment in self.segments():
            entries = segment.aborted_transactions()
            if entries is None:
                missing = True
            else:
                index.extend(entries)
        if missing:
            index.extend(self._aborted_from_markers())
        return index

    def _aborted_from_markers(self) -> list[AbortedTxn]:
        """Rebuild aborted transactions as the broker does (ProducerStateManager): first offset of
        each producer's open transaction, closed by its COMMIT or ABORT marker."""
        open_txn: dict[int, int] = {}
        found: list[AbortedTxn] = []
        first = self._first_segment()
        if first is None:
            return found
        current: LogSegment | None = first
        while current is not None:
            for header in current.headers(0, current.valid_size()):
                if not header.is_transactional:
                    continue
                if not header.is_control:
                    open_txn.setdefault(header.producer_id, current.base_offset_of(header))
                    continue
                batch = current.batch_at(header.position)
                if batch is None:
                    continue
                for record in current.records_of(*batch):
                    kind, _ = parse_control_record(record)
                    start = open_txn.pop(header.producer_id, header.last_offset)
                    if kind == "ABORT":
                        found.append(AbortedTxn(header.producer_id, start, header.last_offset, -1))
            current = self._segments.higher(current.base_offset)
        return found

    # ---- summary --------------------------------------------------------------------------------

    def info(self) -> dict:
        """SPEC section 5: the partition summary shared by `info.json` and `kfs ls --json`."""
        segments = []
        for segment in self.segments():
            segments.append({
                "base_offset": segment.base_offset,
                "size": segment.valid_size(),
                "offset_index_entries": len(segment.offset_index_entries()),
                "time_index_entries": len(segment.time_index_entries(active=self.is_active(segment))),
                "largest_timestamp": self.largest_timestamp(segment),
                "active": self.is_active(segment),
                "log_path": segment.log_path,
            })
        return {
            "topic": self.topic,
            "partition": self.partition,
            "path": self.path,
            "log_start_offset": self.log_start_offset(),
            "log_end_offset": self.log_end_offset(),
            "segments": segments,
        }


class AbortedIndex:
    """Aborted transactions by producer, for the read_committed check of each transactional batch."""

    def __init__(self) -> None:
        self._by_producer: dict[int, list[tuple[int, int]]] = {}

    def extend(self, entries: list[AbortedTxn]) -> None:
        for txn in entries:
            self._by_producer.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))

    def is_aborted(self, header: BatchHeader) -> bool:
        spans = self._by_producer.get(header.producer_id)
        if not spans:
            return False
        base = header.base_offset if header.base_offset >= 0 else header.last_offset
        return any(first <= base <= last for first, last in spans)


class CheckpointReader:
    """A log dir's `log-start-offset-checkpoint` (OffsetCheckpointFile), re-read when it changes.

        0                      version
        N                      number of entries
        <topic> <partition> <offset>   N lines
    """

    def __init__(self, logdir: str) -> None:
        self.path = os.path.join(logdir, "log-start-offset-checkpoint")
        self._stamp: tuple[int, int] | None = None
        self._offsets: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()

    def log_start_offset(self, topic: str, partition: int) -> int | None:
        with self._lock:
            try:
                st = os.stat(self.path)
            except OSError:
                self._stamp, self._offsets = None, {}
                return None
            stamp = (st.st_mtime_ns, st.st_size)
            if stamp != self._stamp:
                self._offsets = _parse_checkpoint(self.path)
                self._stamp = stamp
            return self._offsets.get((topic, partition))


def _parse_checkpoint(path: str) -> dict[tuple[str, int], int]:
    offsets: dict[tuple[str, int], int] = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return offsets
    for line in lines[2:]:
        parts = line.split()
        if len(parts) == 3 and parts[1].isdigit() and parts[2].lstrip("-").isdigit():
            offsets[(parts[0], int(parts[1]))] = int(parts[2])
    return offsets


__all__ = ["AbortedIndex", "CheckpointReader", "ControlRecord", "CorruptBatch", "CorruptLogError", "Extent", "Location",
           "PartitionLog"]
