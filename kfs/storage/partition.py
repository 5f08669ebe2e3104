"""A partition's log as its readers see it: Kafka's `UnifiedLog` over its `LocalLog`.

`PartitionLog` is the one object every front end holds for a partition. It owns two parts, each with
one job: a `LocalLog` (kfs.storage.local_log: the segments as listed, the log's start and end, what
is remembered of closed segments) and a `PartitionReader` (kfs.storage.partition_reads: batches and
records from a place to the log end). On them it finds places, as the broker does. An offset: the
floor segment (`LogSegments.floorSegment`), its offset index, a short header scan
(`LogSegment.translateOffset`), moving to the next segment when a segment holds nothing at or after
the target (`LocalLog.read`). A time: the first segment whose largest timestamp is >= T, then
`LogSegment.findOffsetByTimestamp` (`UnifiedLog.fetchOffsetByTimestamp`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from kfs._native.storage import v2_record_at as _v2_record_at
from kfs.record import BatchHeader, Record
from kfs.storage.checkpoints import CheckpointReader
from kfs.storage.damage import SegmentDamage
from kfs.storage.errors import CorruptLogError, NoRecordAtOffset, TimestampNotFound
from kfs.storage.local_log import LocalLog, batch_location
from kfs.storage.location import Extent, Location
from kfs.storage.log_file import one_lookup
from kfs.storage.partition_reads import PartitionReader, RunTaker, SelectedTaker
from kfs.storage.record_stream import record_lists_from
from kfs.storage.segment import LogSegment
from kfs.storage.specs import iso_ms, parse_time_spec, resolve_offset_spec
from kfs.storage.transactions import AbortedIndex


class PartitionLog:
    """One `<topic>-<partition>` directory. Cheap to create: nothing is opened until asked."""

    def __init__(self, path: str, topic: str, partition: int, checkpoints: CheckpointReader,
                 never_compacted: Callable[[str], bool] | None = None) -> None:
        """never_compacted: whether a topic is known never to have been compacted (LogDirs: from the
        metadata log's topic configs, kfs.storage.topic_configs), for damage rule 2 where the log dir
        has no cleaner checkpoint."""
        self.path = path
        self.topic = topic
        self.partition = partition
        self.name = f"{topic}-{partition}"
        self._log = LocalLog(path, self.name, topic, partition, checkpoints, never_compacted)
        self._reader = PartitionReader(self._log)

    # ---- segments, log start and end (LocalLog) -------------------------------------------------

    def refresh(self, force: bool = False) -> None:
        """List the directory again (segments rolling in, deleted, replaced), at most every REFRESH_INTERVAL."""
        self._log.refresh(force)

    def segments(self) -> list[LogSegment]:
        return self._log.segments()

    def floor_segment(self, offset: int) -> LogSegment | None:
        return self._log.floor_segment(offset)

    def higher_segment(self, base_offset: int) -> LogSegment | None:
        return self._log.listed.higher(base_offset)

    def is_active(self, segment: LogSegment) -> bool:
        return self._log.is_active(segment)

    def listing(self) -> int:
        """A number that changes whenever a segment is added, deleted or replaced: what is known of
        the old listing (a lookup's position in a file) is not of this one."""
        return self._log.listing()

    def listing_seen(self) -> int:
        """`listing` as last refreshed (no directory scan): enough to notice that it changed."""
        return self._log.listed.generation

    def close(self) -> None:
        self._log.close()

    def log_start_offset(self) -> int:
        """max(first segment's base offset, the log dir's log-start-offset-checkpoint entry)."""
        return self._log.log_start_offset()

    def log_end_offset(self) -> int:
        return self._log.log_end_offset()

    def damage(self, segment: LogSegment) -> SegmentDamage | None:
        """What is wrong with a segment, if anything (LocalLog.damage; kfs.storage.damage's rules)."""
        return self._log.damage(segment)

    def raise_if_damaged(self, segment: LogSegment) -> None:
        """CorruptLogError at the end of a damaged closed segment's complete batches."""
        self._log.raise_if_damaged(segment)

    def largest_timestamp(self, segment: LogSegment) -> int:
        """A segment's largest timestamp, remembered for closed segments (LocalLog.largest_timestamp)."""
        return self._log.largest_timestamp(segment)

    def aborted_transactions(self) -> AbortedIndex:
        """Aborted transactions from the `.txnindex` files, or by following the markers where missing."""
        return self._log.aborted_transactions()

    # ---- batches and records from a place (PartitionReader) -------------------------------------

    def batches_from(self, segment: LogSegment, position: int, take: RunTaker | None = None
                     ) -> Iterator[tuple[LogSegment, BatchHeader, memoryview]]:
        """Every complete batch from (segment, position) to the log end, across segments."""
        return self._reader.batches_from(segment, position, take)

    def segment_batches(self, segment: LogSegment, start_offset: int, take: RunTaker | None = None
                        ) -> Iterator[tuple[LogSegment, BatchHeader, memoryview]]:
        """The complete batches of one segment object from the one holding `start_offset`."""
        return self._reader.segment_batches(segment, start_offset, take)

    def raw_extents(self, location: Location) -> list[Extent]:
        """The bytes of every complete batch from the located one to the log end, as file ranges."""
        return self._reader.raw_extents(location)

    def records(self, start_offset: int | None = None, *, isolation: str = "read_uncommitted",
                control: str = "hide", end_offset: int | None = None, on_corrupt: str = "fail") -> Iterator[Record]:
        """Records from `start_offset` (the log start by default; gaps resolve forward) to the log end."""
        return self._reader.records(start_offset, isolation=isolation, control=control, end_offset=end_offset,
                                    on_corrupt=on_corrupt)

    def record_lists(self, start_offset: int | None = None, *, isolation: str = "read_uncommitted",
                     control: str = "hide", end_offset: int | None = None, on_corrupt: str = "fail",
                     segment: LogSegment | None = None) -> Iterator[list[Record]]:
        """`records()` a batch at a time (a non-empty list per batch)."""
        return self._reader.record_lists(start_offset, isolation=isolation, control=control, end_offset=end_offset,
                                         on_corrupt=on_corrupt, segment=segment)

    def selected_batches(self, start_offset: int, *, isolation: str = "read_uncommitted", control: str = "hide",
                         end_offset: int | None = None, segment: LogSegment | None = None,
                         take: SelectedTaker | None = None, on_corrupt: str = "fail"
                         ) -> Iterator[tuple[LogSegment, BatchHeader, memoryview, int]]:
        """The batches `record_lists` decodes, undecoded, each with the first offset it may yield."""
        return self._reader.selected_batches(start_offset, isolation=isolation, control=control,
                                             end_offset=end_offset, segment=segment, take=take,
                                             on_corrupt=on_corrupt)

    # ---- specs ----------------------------------------------------------------------------------

    def resolve_offset(self, spec: str) -> int:
        return resolve_offset_spec(spec, self.log_start_offset, self.log_end_offset)

    @staticmethod
    def parse_time(spec: str) -> int:
        return parse_time_spec(spec)

    # ---- lookups --------------------------------------------------------------------------------

    def locate_offset(self, target: int, with_record: bool = True) -> Location:
        """Kafka's fetch: the batch holding `target` (gaps resolve forward) and the first record >= it.

        Finding the record decodes the batch; callers that need only the batch (raw views, seek
        maps) pass with_record=False and get offset and timestamp None.
        """
        segment, entry, header = self._log.find_batch(target)
        record = self._first_record_from(segment, header, target) if with_record else None
        return batch_location(segment, entry, header, record.offset if record else None,
                              record.timestamp if record else None)

    def _first_record_from(self, segment: LogSegment, header: BatchHeader, target: int) -> Record | None:
        for _, _, records in record_lists_from(self.batches_from(segment, header.position), target, None,
                                               control=False, aborted=None):
            return records[0]
        return None

    def locate_time(self, target_ms: int) -> Location:
        """Kafka's ListOffsets: first segment whose largest timestamp >= T, then its indexes and a scan."""
        found = self._time_in_listing(target_ms)
        if found is None:
            # A segment may have rolled in since the last listing (renewed every REFRESH_INTERVAL), as
            # in locate_offset: a time the broker has written a record at is never ENOENT.
            self.refresh(force=True)
            found = self._time_in_listing(target_ms)
        if found is None:
            raise TimestampNotFound(f"no record of {self.name} has a timestamp at or after {target_ms} "
                                    f"({iso_ms(target_ms)})")
        return found

    def _time_in_listing(self, target_ms: int) -> Location | None:
        start = self.log_start_offset()
        for segment in self.segments():
            if self.largest_timestamp(segment) >= target_ms:
                found = segment.find_offset_by_timestamp(target_ms, start)
                if found is None:
                    return None
                entry, record, header = found
                return batch_location(segment, entry, header, record.offset, record.timestamp)
            # Passed over: unless it is damaged (a `.log` that is not a regular file, records lost), in
            # which case the first record at or after T may be among those it lost, as locate_offset says.
            self.raise_if_damaged(segment)
        return None

    def offset_for_time(self, target_ms: int) -> int:
        """ListOffsets' answer for T: the offset of the first record whose timestamp is >= T."""
        found = self.locate_time(target_ms).offset
        assert found is not None  # a time lookup always lands on a record
        return found

    def locate(self, axis: str, spec: str, with_record: bool = True) -> Location:
        """Where an `offset/<spec>` or `time/<spec>` name points: Kafka's fetch or its ListOffsets.

        A time lookup always finds its record (with_record applies to offsets only)."""
        with one_lookup():
            return self._locate(axis, spec, with_record)

    def _locate(self, axis: str, spec: str, with_record: bool) -> Location:
        if axis == "offset":
            return self.locate_offset(self.resolve_offset(spec), with_record=with_record)
        if axis == "time":
            return self.locate_time(self.parse_time(spec))
        raise ValueError(f"unknown axis {axis!r}: offset or time")

    def value_record(self, axis: str, spec: str, *, isolation: str = "read_uncommitted") -> Record:
        """The record whose value `offset/<N>.value` or `time/<T>.value` (and `kfs cat --format value`) is.

        An offset names exactly one record (a gap is NoRecordAtOffset). A time names the record
        ListOffsets finds or, when that is a transaction marker, the first record after it: the
        first line of `time/<T>.jsonl`, so the two views agree.
        """
        with one_lookup():
            return self._value_record(axis, spec, isolation)

    def _value_record(self, axis: str, spec: str, isolation: str) -> Record:
        if axis == "offset":
            return self.record_at(self.resolve_offset(spec), isolation=isolation)
        start = self.offset_for_time(self.parse_time(spec))
        for record in self.records(start, isolation=isolation):
            return record
        raise NoRecordAtOffset(f"{self.name} has no record at or after offset {start}")

    def record_at(self, offset: int, *, isolation: str = "read_uncommitted") -> Record:
        """The record at exactly `offset` (a `.value`); a gap is NoRecordAtOffset.

        Most cost one walk of an index interval (`_indexed_record`): an index search and a page or
        two. The rest take the general path: a lookup, then the one batch that holds it."""
        if isolation == "read_uncommitted":
            record = self._indexed_record(offset)
            if record is not None:
                return record
        location = self.locate_offset(offset, with_record=False)
        segment = self._log.listed.floor(location.segment_base_offset)
        assert segment is not None
        aborted = self.aborted_transactions() if isolation == "read_committed" else None
        for _, _, records in record_lists_from(self.batches_from(segment, location.position), offset, offset + 1,
                                               control=False, aborted=aborted):
            if records[0].offset == offset:
                return records[0]
            break
        raise NoRecordAtOffset(f"{self.name} has no record at offset {offset}")

    def _indexed_record(self, offset: int) -> Record | None:
        """`record_at` when the batch holding `offset` is found in its index interval
        (`LogSegment.indexed_batch`) and is a plain data batch, with the checks `_placed_batches`
        makes (below the next segment's base offset, or below the log end); None otherwise, for
        the general path. A compacted-away offset is NoRecordAtOffset, as there: offsets only grow
        from batch to batch, so no later batch holds it."""
        segment = self._log.listed.floor(offset)
        if segment is None or offset < self.log_start_offset():
            return None
        found = segment.indexed_batch(offset)
        if found is None:
            return None
        header, body = found
        if header.is_control or header.base_offset < 0 or header.magic < 2:
            return None
        following = self._log.listed.higher(segment.base_offset)
        if header.last_offset >= (following.base_offset if following is not None else segment.next_offset()):
            return None
        if _v2_record_at is not None and segment.base_offset <= offset < 2**63:
            # the one record, when the batch is plain (else records_of's verdict)
            record = _v2_record_at(body, segment.base_offset, offset, header.timestamp_type)
            if isinstance(record, Record):
                return record
            if record is False:
                raise NoRecordAtOffset(f"{self.name} has no record at offset {offset}")
        for record in segment.records_of(header, body):
            if record.offset == offset:
                return record
        raise NoRecordAtOffset(f"{self.name} has no record at offset {offset}")

    # ---- summary --------------------------------------------------------------------------------

    def info(self) -> dict:
        """The partition summary shared by `info.json` and `kfs ls --json`."""
        segments = []
        for segment in self.segments():
            damage = self.damage(segment)
            problems = [damage.problem()] if damage else []
            garbage = segment.tail_error()
            try:
                largest = self.largest_timestamp(segment)
            except CorruptLogError as e:  # (its headers reach garbage: a read there fails with it)
                largest, garbage = -1, garbage or e
            if garbage is not None and damage is None:
                problems.append(f"position {garbage.position}: {garbage.reason}")
            segments.append({
                "base_offset": segment.base_offset,
                "size": segment.valid_size(),
                "offset_index_entries": len(segment.offset_index_entries()),
                "time_index_entries": len(segment.time_index_entries(active=self.is_active(segment))),
                "largest_timestamp": largest,
                "active": self.is_active(segment),
                "log_path": segment.log_path,
                "problems": problems + segment.index_refusals(),
            })
        return {
            "topic": self.topic,
            "partition": self.partition,
            "path": self.path,
            "log_start_offset": self.log_start_offset(),
            "log_end_offset": self.log_end_offset(),
            "segments": segments,
        }

