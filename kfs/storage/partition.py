"""A partition's log: its segments, log start and end, and where an offset or a time is (the
batches and records from there: kfs.storage.partition_reads).

The read path is the broker's. An offset: floor segment (`LogSegments.floorSegment`), its offset
index, a short header scan (`LogSegment.translateOffset`), moving to the next segment when a
segment holds nothing at or after the target (`UnifiedLog.read`). A time: the first segment whose
largest timestamp is >= T, then `LogSegment.findOffsetByTimestamp` (`UnifiedLog.fetchOffsetByTimestamp`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from kfs.record import BatchHeader, Record
from kfs.record.speedups import v2_record_at as _v2_record_at
from kfs.storage.checkpoints import CheckpointReader
from kfs.storage.damage import SegmentDamage, closed_segment_damage, refused_segment_damage
from kfs.storage.errors import (
    CorruptLogError,
    NoRecordAtOffset,
    OffsetOutOfRange,
    TimestampNotFound,
    UnknownPartition,
)
from kfs.storage.location import Location
from kfs.storage.log_file import one_lookup
from kfs.storage.partition_reads import PartitionReads
from kfs.storage.record_stream import record_lists_from
from kfs.storage.segment import LogSegment
from kfs.storage.segments import LogSegments
from kfs.storage.specs import iso_ms, parse_time_spec, resolve_offset_spec
from kfs.storage.transactions import AbortedIndex, collect_aborted

log = logging.getLogger("kfs")

REFRESH_INTERVAL = 0.5  # seconds between directory listings of a partition


class PartitionLog(PartitionReads):
    """One `<topic>-<partition>` directory. Cheap to create: nothing is opened until asked. Its
    batches and records from a located place: `PartitionReads` (kfs.storage.partition_reads)."""

    def __init__(self, path: str, topic: str, partition: int, checkpoints: CheckpointReader,
                 never_compacted: Callable[[str], bool] | None = None) -> None:
        """never_compacted: whether a topic is known never to have been compacted (LogDirs: from the
        metadata log's topic configs, kfs.storage.topic_configs), for damage rule 2 where the log dir
        has no cleaner checkpoint."""
        self.path = path
        self.topic = topic
        self.partition = partition
        self.name = f"{topic}-{partition}"
        self._checkpoints = checkpoints
        self._never_compacted = never_compacted
        self._segments = LogSegments(path)
        self._refreshed_at = float("-inf")
        self._lock = threading.Lock()
        self._largest_ts_cache: dict[int, tuple[tuple[int, ...], int]] = {}
        self._damage_cache: dict[int, tuple[tuple, SegmentDamage | None]] = {}
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
            # What was remembered of segments deleted since: kept, it grew with every retention.
            bases = {segment.base_offset for segment in self._segments.all()}
            for cache in (self._largest_ts_cache, self._damage_cache):
                for base in [b for b in cache if b not in bases]:
                    cache.pop(base, None)

    def segments(self) -> list[LogSegment]:
        self.refresh()
        return self._segments.all()

    def floor_segment(self, offset: int) -> LogSegment | None:
        self.refresh()
        return self._segments.floor(offset)

    def listing(self) -> int:
        """A number that changes whenever a segment is added, deleted or replaced: what is known of
        the old listing (a lookup's position in a file) is not of this one."""
        self.refresh()
        return self._segments.generation

    def listing_seen(self) -> int:
        """`listing` as last refreshed (no directory scan): enough to notice that it changed."""
        return self._segments.generation

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
        start = self.log_start_offset()
        segment = self._segments.floor(target) or self._segments.first()
        in_active = segment is None or self._segments.higher(segment.base_offset) is None
        if in_active and target >= self.log_end_offset() and target >= start:
            # Past the log end as last listed: a segment may have rolled in since (the listing is
            # renewed every REFRESH_INTERVAL): a record the broker has written is never ENOENT.
            self.refresh(force=True)
            segment = self._segments.floor(target) or self._segments.first()
            in_active = segment is None or self._segments.higher(segment.base_offset) is None
        if target < start or (in_active and target >= self.log_end_offset()):
            # Below a later segment's base offset, a target is below the log end: only a lookup in
            # the active segment needs the log end (and the live index's last entry it comes from).
            raise OffsetOutOfRange(f"offset {target} is out of range for {self.name} "
                                   f"(log start {start}, log end {self.log_end_offset()})")
        while segment is not None:
            found = segment.translate_offset(target)
            if found is not None:
                entry, header = found
                record = self._first_record_from(segment, header, target) if with_record else None
                return Location(segment.base_offset, entry, header.position, segment.base_offset_of(header),
                                header.last_offset, record.offset if record else None,
                                record.timestamp if record else None, segment.file_id)
            self.raise_if_damaged(segment)  # the target is among the records a damaged segment lost
            segment = self._segments.higher(segment.base_offset)
        raise OffsetOutOfRange(f"offset {target} is out of range for {self.name}")

    def _first_record_from(self, segment: LogSegment, header: BatchHeader, target: int) -> Record | None:
        for _, _, records in record_lists_from(self.batches_from(segment, header.position), target, None,
                                               control=False, aborted=None):
            return records[0]
        return None

    def damage(self, segment: LogSegment) -> SegmentDamage | None:
        """What is wrong with a segment (kfs.storage.damage's rules): a `.log` that is not a regular
        file, for any segment; else, for a closed one, its batches against its file's end and the
        next segment. None for a healthy one, and for the active segment's half-written tail, which
        is normal. Remembered per segment file, size, next segment and cleaner checkpoint: closed
        segments do not change."""
        refused = refused_segment_damage(segment)
        if refused is not None:
            return refused
        following = self._segments.higher(segment.base_offset)
        if following is None:
            return None
        cleaned_up_to = self._checkpoints.cleaned_up_to(self.topic, self.partition)
        if cleaned_up_to is None and self._never_compacted is not None \
                and segment.next_offset() < following.base_offset and self._never_compacted(self.topic):
            cleaned_up_to = 0  # no cleaner checkpoint, but the topic's configs say it was never compacted
        key = (segment.inode, segment.file_size(), following.base_offset, cleaned_up_to)
        cached = self._damage_cache.get(segment.base_offset)
        if cached is not None and cached[0] == key:
            return cached[1]
        found = closed_segment_damage(segment, following, cleaned_up_to)
        if found is not None:
            log.info("%s", found.error())
        self._damage_cache[segment.base_offset] = (key, found)
        return found

    def raise_if_damaged(self, segment: LogSegment) -> None:
        """CorruptLogError at the end of a damaged closed segment's complete batches."""
        found = self.damage(segment)
        if found is not None:
            raise found.error()

    def largest_timestamp(self, segment: LogSegment) -> int:
        """A segment's largest timestamp, remembered for closed segments (they no longer change), as
        Kafka keeps it in memory: keyed by the `.log`'s identity (device, inode, size, mtime, ctime),
        so a file the cleaner replaced, or one changed in place, is read again."""
        identity = tuple(segment.file_identity())
        cached = self._largest_ts_cache.get(segment.base_offset)
        if cached is not None and cached[0] == identity:
            return cached[1]
        value = segment.largest_timestamp()
        if not self.is_active(segment):
            self._largest_ts_cache[segment.base_offset] = (identity, value)
        return value

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
                return Location(segment.base_offset, entry, header.position, segment.base_offset_of(header),
                                header.last_offset, record.offset, record.timestamp, segment.file_id)
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
        segment = self._segments.floor(location.segment_base_offset)
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
        segment = self._segments.floor(offset)
        if segment is None or offset < self.log_start_offset():
            return None
        found = segment.indexed_batch(offset)
        if found is None:
            return None
        header, body = found
        if header.is_control or header.base_offset < 0 or header.magic < 2:
            return None
        following = self._segments.higher(segment.base_offset)
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

    # ---- transactions ---------------------------------------------------------------------------

    def aborted_transactions(self) -> AbortedIndex:
        """Aborted transactions from the `.txnindex` files, or by following the markers where missing.

        Remembered until a segment is added, removed or grows (the key is every segment's size, and the
        active one's next offset: a preallocated log grows in place).
        """
        segments = self.segments()
        active_end = segments[-1].next_offset() if segments else None
        key = (tuple((s.base_offset, s.file_size()) for s in segments), active_end)
        cached = self._aborted_cache
        if cached is not None and cached[0] == key:
            return cached[1]
        index = collect_aborted(segments)
        self._aborted_cache = (key, index)
        return index

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

