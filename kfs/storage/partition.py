"""A partition's log: where an offset or a time is, and the batches and records from there.

The read path is the broker's. An offset: floor segment (`LogSegments.floorSegment`), its offset
index, a short header scan (`LogSegment.translateOffset`), moving to the next segment when a
segment holds nothing at or after the target (`UnifiedLog.read`). A time: the first segment whose
largest timestamp is >= T, then `LogSegment.findOffsetByTimestamp` (`UnifiedLog.fetchOffsetByTimestamp`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import TypeAlias

from kfs.record import BatchHeader, PlainRun, Record
from kfs.storage.checkpoints import CheckpointReader
from kfs.storage.damage import SegmentDamage, closed_segment_damage
from kfs.storage.errors import (
    CorruptLogError,
    NoRecordAtOffset,
    OffsetOutOfRange,
    TimestampNotFound,
    UnknownPartition,
    VanishedError,
)
from kfs.storage.location import Extent, Location
from kfs.storage.log_file import one_lookup
from kfs.storage.record_stream import record_lists_from, record_lists_skipping_corrupt, selected_batches
from kfs.storage.segment import LogSegment
from kfs.storage.segments import LogSegments
from kfs.storage.specs import parse_time_spec, resolve_offset_spec
from kfs.storage.transactions import AbortedIndex, collect_aborted

log = logging.getLogger("kfs")

# (segment, window, its file position, the last offset before it, the offset every batch stays below)
RunTaker: TypeAlias = Callable[[LogSegment, memoryview, int, "int | None", int], "PlainRun | None"]
# The same with the first offset the reader sees first (PartitionLog.selected_batches).
SelectedTaker: TypeAlias = Callable[[int, LogSegment, memoryview, int, "int | None", int], "PlainRun | None"]

REFRESH_INTERVAL = 0.5  # seconds between directory listings of a partition


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
        self._largest_ts_cache: dict[int, tuple[int | None, int]] = {}
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
        """What is wrong with a closed segment (kfs.storage.damage's rules); None for a healthy one and
        for the active segment, whose half-written tail is normal. Remembered per segment file, size,
        next segment and cleaner checkpoint: closed segments do not change."""
        following = self._segments.higher(segment.base_offset)
        if following is None:
            return None
        cleaned_up_to = self._checkpoints.cleaned_up_to(self.topic, self.partition)
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
        """A segment's largest timestamp, remembered for closed segments (they no longer change)."""
        cached = self._largest_ts_cache.get(segment.base_offset)
        if cached is not None and cached[0] == segment.inode:  # not of a file the cleaner replaced since
            return cached[1]
        value = segment.largest_timestamp()
        if not self.is_active(segment):
            self._largest_ts_cache[segment.base_offset] = (segment.inode, value)
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
            raise TimestampNotFound(f"no record of {self.name} has a timestamp at or after {target_ms}")
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
        for record in segment.records_of(header, body):
            if record.offset == offset:
                return record
        raise NoRecordAtOffset(f"{self.name} has no record at offset {offset}")

    # ---- batches and records --------------------------------------------------------------------

    def batches_from(self, segment: LogSegment, position: int, take: RunTaker | None = None
                     ) -> Iterator[tuple[LogSegment, BatchHeader, memoryview]]:
        """Every complete batch from (segment, position) to the log end, across segments; `take`: see
        `_placed_batches`."""
        current: LogSegment | None = segment
        start = position
        while current is not None:
            yield from self._placed_batches(current, start, take)
            self.refresh()
            self.raise_if_damaged(current)
            current = self._segments.higher(current.base_offset)
            start = 0

    def segment_batches(self, segment: LogSegment, start_offset: int, take: RunTaker | None = None
                        ) -> Iterator[tuple[LogSegment, BatchHeader, memoryview]]:
        """The complete batches of one segment object from the one holding `start_offset` (Kafka's
        `LogSegment.read`): the file that object opened, never whatever the directory holds under its
        name now. A decoded run is one segment's lines; after a cleaner swap the name holds another
        file, whose batches at the run's positions and offsets are other records. A retired segment
        (deleted or replaced) raises VanishedError."""
        found = segment.translate_offset(start_offset)
        if found is not None:
            yield from self._placed_batches(segment, found[1].position, take)
        self.raise_if_damaged(segment)

    def _check_log_end(self, log_end: int) -> None:
        """A read from the log end has no record to show, but the active segment may hold damage there
        (a batch that is not a half-written tail): CorruptLogError, as a decoded view's run meets it."""
        last = self._segments.last()
        if last is not None:
            last.translate_offset(log_end)

    def _placed_batches(self, segment: LogSegment, position: int, take: RunTaker | None = None
                        ) -> Iterator[tuple[LogSegment, BatchHeader, memoryview]]:
        """The segment's complete batches from `position`, each checked to be where its offsets say:
        below the next segment's base offset, or in the active segment below the log end its last
        batches give. The base offset is outside the CRC, and a segment may be under a wrong name:
        never records at two places, or past the end where no reader looks. `take` (segment, window,
        position, last offset before, the offset every batch must stay below): several plain batches
        at once, as a PlainRun (kfs.views.plain_runs)."""
        following = self._segments.higher(segment.base_offset)
        log_end = segment.next_offset() if following is None else None
        offered = None
        if take is not None:
            def offered(window: memoryview, at: int, previous_last: int | None) -> PlainRun | None:
                below = following.base_offset if following is not None else log_end
                return take(segment, window, at, previous_last, below)  # type: ignore[arg-type]
        for header, body in segment.batches(position, segment.valid_size(), offered):
            if following is not None and header.last_offset >= following.base_offset:
                raise CorruptLogError(segment.log_path, header.position,
                                      f"offset {header.last_offset} is at or past the next segment's "
                                      f"base offset {following.base_offset}")
            if log_end is not None and header.last_offset >= log_end:
                log_end = segment.next_offset()  # (the segment may have grown since)
                if header.last_offset >= log_end:
                    raise CorruptLogError(segment.log_path, header.position,
                                          f"offset {header.last_offset} is at or past the log end offset "
                                          f"{log_end}, where the segment's last batches end")
            yield segment, header, body

    def raw_extents(self, location: Location) -> list[Extent]:
        """The bytes of every complete batch from the located one to the log end, as file ranges; a damaged
        closed segment adds an extent marked `damage` where its complete batches end."""
        self.refresh()
        extents = []
        segment = self._segments.floor(location.segment_base_offset)
        start = location.position
        if segment is not None and location.file_id is not None:
            segment.valid_size()  # opened: its file_id is known
            if segment.file_id != location.file_id:
                # The cleaner swapped the segment since the lookup: its position means nothing here.
                raise VanishedError(f"{segment.log_path}: segment replaced since the lookup")
        while segment is not None:
            end = segment.valid_size()
            if end > start:
                extents.append(Extent(segment.log_path, start, end, segment.base_offset, segment.file_id))
            damage = self.damage(segment)
            if damage is not None:
                extents.append(Extent(segment.log_path, end, segment.file_size(), segment.base_offset,
                                      segment.file_id, damage=damage.reason))
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
                     control: str = "hide", end_offset: int | None = None, on_corrupt: str = "fail",
                     segment: LogSegment | None = None) -> Iterator[list[Record]]:
        """`records()` a batch at a time (a non-empty list per batch): for front ends that render or
        convert whole batches, which saves a generator step per record on the hot path.

        `segment`: only that segment object's batches (`segment_batches`)."""
        if start_offset is None:
            start_offset = self.log_start_offset()
        aborted = self.aborted_transactions() if isolation == "read_committed" else None
        first = max(start_offset, self.log_start_offset())
        if segment is not None:
            batches = self.segment_batches(segment, start_offset)
        else:
            start = self._read_start(start_offset)
            if start is None:
                return
            floor, position = start
            if on_corrupt == "skip":
                yield from record_lists_skipping_corrupt(self, floor, position, first, end_offset,
                                                         control=control == "show", aborted=aborted)
                return
            batches = self.batches_from(floor, position)
        for _, _, records in record_lists_from(batches, first, end_offset, control=control == "show",
                                               aborted=aborted):
            yield records

    def _read_start(self, start_offset: int) -> tuple[LogSegment, int] | None:
        """The segment and position a read from `start_offset` starts at; None for a read from the
        log end, after checking that end (raises OffsetOutOfRange outside the log). A start past the
        log end checks it too: damage in the active segment ends the log early (a log start offset
        checkpointed past what is left of it), and is the error to report, as a decoded view's run
        meets it, not OffsetOutOfRange. Without damage, a read from such a log start reads nothing
        (with a warning), as `messages.jsonl` is empty then."""
        try:
            location = self.locate_offset(start_offset, with_record=False)
        except OffsetOutOfRange:
            log_end = self.log_end_offset()
            if start_offset >= log_end:
                self._check_log_end(log_end)
                if start_offset == log_end:
                    return None
                if start_offset == self.log_start_offset():
                    # The log start checkpointed past a log end the segments give with no damage (the
                    # active segment ends in a batch being written): nothing from the log start, as
                    # the decoded view shows it, and said.
                    log.warning("%s: the log start offset %d (%s) is past the log end offset %d: "
                                "no records to read", self.name, start_offset, self._checkpoints.path, log_end)
                    return None
            raise
        floor = self._segments.floor(location.segment_base_offset)
        assert floor is not None
        return floor, location.position

    def selected_batches(self, start_offset: int, *, isolation: str = "read_uncommitted", control: str = "hide",
                         end_offset: int | None = None, segment: LogSegment | None = None,
                         take: SelectedTaker | None = None
                         ) -> Iterator[tuple[LogSegment, BatchHeader, memoryview, int]]:
        """The batches `record_lists` decodes, undecoded, each with the first offset it may yield
        (`batch_records(segment, header, body, first, end_offset)` gives its records): for front
        ends that measure records rather than read them. `segment`: as in `record_lists`. `take`:
        offered each window with the first offset too; what it takes comes as one PlainRun (its
        body None): kfs.views.plain_runs."""
        first = max(start_offset, self.log_start_offset())
        run_taker = None if take is None else partial(take, first)
        if segment is not None:
            batches = self.segment_batches(segment, start_offset, run_taker)
        else:
            start = self._read_start(start_offset)
            if start is None:
                return
            batches = self.batches_from(*start, run_taker)
        aborted = self.aborted_transactions() if isolation == "read_committed" else None
        for found, header, body in selected_batches(batches, first, end_offset, control=control == "show",
                                                    aborted=aborted):
            yield found, header, body, first

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
        index = collect_aborted(segments)
        self._aborted_cache = (key, index)
        return index

    # ---- summary --------------------------------------------------------------------------------

    def info(self) -> dict:
        """The partition summary shared by `info.json` and `kfs ls --json`."""
        segments = []
        for segment in self.segments():
            damage = self.damage(segment)
            segments.append({
                "base_offset": segment.base_offset,
                "size": segment.valid_size(),
                "offset_index_entries": len(segment.offset_index_entries()),
                "time_index_entries": len(segment.time_index_entries(active=self.is_active(segment))),
                "largest_timestamp": self.largest_timestamp(segment),
                "active": self.is_active(segment),
                "log_path": segment.log_path,
                "problems": [f"position {damage.position}: {damage.reason}"] if damage else [],
            })
        return {
            "topic": self.topic,
            "partition": self.partition,
            "path": self.path,
            "log_start_offset": self.log_start_offset(),
            "log_end_offset": self.log_end_offset(),
            "segments": segments,
        }

