"""A partition's batches and records from a place in its log (Kafka's `LocalLog.read`, and the
records a fetch returns from there).

Each batch is checked to be where its offsets say (below the next segment's base offset, or below
the log end in the active segment) before anything is decoded, and a damaged closed segment ends
with its error where its complete batches end (`kfs.storage.damage`). `PartitionLog` finds the
place (`kfs.storage.partition`: Kafka's fetch and ListOffsets) and owns a `PartitionReader` over
its `LocalLog` (kfs.storage.local_log); this walks from the place.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from functools import partial
from typing import TypeAlias

from kfs.record import BatchHeader, PlainRun, Record
from kfs.storage.errors import OffsetOutOfRange, VanishedError
from kfs.storage.local_log import LocalLog
from kfs.storage.location import Extent, Location
from kfs.storage.record_stream import (
    record_lists_from,
    record_lists_skipping_corrupt,
    selected_batches,
    selected_batches_skipping_corrupt,
)
from kfs.storage.segment import LogSegment

log = logging.getLogger("kfs")

# (segment, window, its file position, the last offset before it, the offset every batch stays below)
RunTaker: TypeAlias = Callable[[LogSegment, memoryview, int, "int | None", int], "PlainRun | None"]
# The same with the first offset the reader sees first (PartitionReader.selected_batches).
SelectedTaker: TypeAlias = Callable[[int, LogSegment, memoryview, int, "int | None", int], "PlainRun | None"]


class PartitionReader:
    """Batches and records of one partition from a located place to the log end, over its
    `LocalLog` (the segments as listed, their damage, the log's start and end)."""

    def __init__(self, local: LocalLog) -> None:
        self._log = local

    def batches_from(self, segment: LogSegment, position: int, take: RunTaker | None = None
                     ) -> Iterator[tuple[LogSegment, BatchHeader, memoryview]]:
        """Every complete batch from (segment, position) to the log end, across segments; `take`: see
        `_placed_batches`."""
        current: LogSegment | None = segment
        start = position
        resume: int | None = None  # the offset after the last batch yielded
        while current is not None:
            reading: LogSegment = current
            try:
                for found in self._placed_batches(reading, start, take):
                    resume = found[1].last_offset + 1
                    yield found
                self._log.refresh()
                self._log.raise_if_damaged(reading)
                current = self._log.listed.higher(reading.base_offset)
                start = 0
            except VanishedError:
                self._log.refresh(force=True)
                if not reading.retired or resume is None:
                    raise
                # The cleaner replaced the segment under the read (a cleaned copy, or a merge of it with
                # the ones after it), or retention deleted it: go on from the next offset in the log as
                # it is now, as a consumer's next fetch does. Records the cleaner removed are not there
                # (compaction); records retention deleted under the read are VanishedError (a consumer's
                # fetch below the log start is OffsetOutOfRange).
                place = self._resume_at(resume)
                if place is None:
                    return
                current, start = place

    def _resume_at(self, offset: int) -> tuple[LogSegment, int] | None:
        """The segment and position a read goes on at from `offset`, in the listing as it is now; None at
        the log end. VanishedError when `offset` is below the log start now (retention deleted it)."""
        if offset < self._log.log_start_offset():
            raise VanishedError(f"{self._log.name}: the records from offset {offset} were deleted while reading "
                                f"(the log now starts at offset {self._log.log_start_offset()})")
        try:
            location = self._log.locate_batch(offset)
        except OffsetOutOfRange:
            if offset >= self._log.log_end_offset():
                return None
            raise
        segment = self._log.listed.floor(location.segment_base_offset)
        if segment is None or segment.file_id != location.file_id:
            raise VanishedError(f"{self._log.name}: its segments changed again while reading")
        return segment, location.position

    def segment_batches(self, segment: LogSegment, start_offset: int, take: RunTaker | None = None
                        ) -> Iterator[tuple[LogSegment, BatchHeader, memoryview]]:
        """The complete batches of one segment object from the one holding `start_offset` (Kafka's
        `LogSegment.read`): the file that object opened, never whatever the directory holds under its
        name now. A decoded run is one segment's lines; after a cleaner swap the name holds another
        file, whose batches at the run's positions and offsets are other records. A retired segment
        (deleted or replaced) raises VanishedError."""
        if start_offset <= segment.base_offset:
            # From the segment's first batch (every batch's offsets are at or past the base): no index
            # lookup, which cost a decoded view ~45 us and a pread per segment (1,973 of them: 0.09 s)
            yield from self._placed_batches(segment, 0, take)
        else:
            found = segment.translate_offset(start_offset)
            if found is not None:
                yield from self._placed_batches(segment, found[1].position, take)
        self._log.raise_if_damaged(segment)

    def _check_log_end(self, log_end: int) -> None:
        """A read from the log end has no record to show, but the active segment may hold damage there
        (a batch that is not a half-written tail): CorruptLogError, as a decoded view's run meets it."""
        last = self._log.listed.last()
        if last is not None:
            self._log.raise_if_damaged(last)  # (the active segment's: its `.log` is not a regular file)
            last.translate_offset(log_end)

    def _placed_batches(self, segment: LogSegment, position: int, take: RunTaker | None = None
                        ) -> Iterator[tuple[LogSegment, BatchHeader, memoryview]]:
        """The segment's complete batches from `position`, each checked to be where its offsets say:
        below the next segment's base offset, or in the active segment below the log end its last
        batches give. The base offset is outside the CRC, and a segment may be under a wrong name:
        never records at two places, or past the end where no reader looks. `take` (segment, window,
        position, last offset before, the offset every batch must stay below): several plain batches
        at once, as a PlainRun (kfs.views.plain_runs)."""
        following = self._log.listed.higher(segment.base_offset)
        log_end = segment.next_offset() if following is None else None
        offered = None
        if take is not None:
            def offered(window: memoryview, at: int, previous_last: int | None) -> PlainRun | None:
                below = following.base_offset if following is not None else log_end
                return take(segment, window, at, previous_last, below)  # type: ignore[arg-type]
        for header, body in segment.batches(position, segment.valid_size(), offered):
            if following is not None and header.last_offset >= following.base_offset:
                raise segment.corrupt(header.position, f"offset {header.last_offset} is at or past the next "
                                                       f"segment's base offset {following.base_offset}")
            if log_end is not None and header.last_offset >= log_end:
                log_end = segment.next_offset()  # (the segment may have grown since)
                if header.last_offset >= log_end:
                    raise segment.corrupt(header.position, f"offset {header.last_offset} is at or past the log "
                                                           f"end offset {log_end}, where the segment's last "
                                                           "batches end")
            yield segment, header, body

    def raw_extents(self, location: Location) -> list[Extent]:
        """The bytes of every complete batch from the located one to the log end, as file ranges; a damaged
        closed segment adds an extent marked `damage` where its complete batches end."""
        self._log.refresh()
        extents = []
        segment = self._log.listed.floor(location.segment_base_offset)
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
            damage = self._log.damage(segment)
            if damage is not None:
                extents.append(Extent(segment.log_path, end, segment.file_size(), segment.base_offset,
                                      segment.file_id, damage=damage.reason, error=damage.error()))
            segment = self._log.listed.higher(segment.base_offset)
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
            start_offset = self._log.log_start_offset()
        aborted = self._log.aborted_transactions() if isolation == "read_committed" else None
        first = max(start_offset, self._log.log_start_offset())
        if segment is not None:
            batches = self.segment_batches(segment, start_offset)
        else:
            start = self._read_start(start_offset)
            if start is None:
                return
            floor, position = start
            if on_corrupt == "skip":
                yield from record_lists_skipping_corrupt(self.batches_from, self._log.segments, floor, position,
                                                         first, end_offset, control=control == "show",
                                                         aborted=aborted)
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
            location = self._log.locate_batch(start_offset)
        except OffsetOutOfRange:
            log_end = self._log.log_end_offset()
            if start_offset >= log_end:
                self._check_log_end(log_end)
                if start_offset == log_end:
                    return None
                if start_offset == self._log.log_start_offset():
                    # The log start checkpointed past a log end the segments give with no damage (the
                    # active segment ends in a batch being written): nothing from the log start, as
                    # the decoded view shows it, and said.
                    log.warning("%s: the log start offset %d (%s) is past the log end offset %d: "
                                "no records to read", self._log.name, start_offset, self._log.checkpoints.path, log_end)
                    return None
            raise
        floor = self._log.listed.floor(location.segment_base_offset)
        assert floor is not None
        return floor, location.position

    def selected_batches(self, start_offset: int, *, isolation: str = "read_uncommitted", control: str = "hide",
                         end_offset: int | None = None, segment: LogSegment | None = None,
                         take: SelectedTaker | None = None, on_corrupt: str = "fail"
                         ) -> Iterator[tuple[LogSegment, BatchHeader, memoryview, int]]:
        """The batches `record_lists` decodes, undecoded, each with the first offset it may yield
        (`batch_records(segment, header, body, first, end_offset)` gives its records): for front
        ends that measure records rather than read them. `segment`: as in `record_lists`. `take`:
        offered each window with the first offset too; what it takes comes as one PlainRun (its
        body None): kfs.views.plain_runs. `on_corrupt="skip"`: the batches `record_lists` decodes with
        it, damaged ones included (their decoding raises, and the reader skips them)."""
        first = max(start_offset, self._log.log_start_offset())
        run_taker = None if take is None else partial(take, first)
        aborted = self._log.aborted_transactions() if isolation == "read_committed" else None
        if segment is not None:
            batches = self.segment_batches(segment, start_offset, run_taker)
        else:
            start = self._read_start(start_offset)
            if start is None:
                return
            if on_corrupt == "skip":
                for found, header, body in selected_batches_skipping_corrupt(
                        lambda seg, position: self.batches_from(seg, position, run_taker), self._log.segments,
                        *start, first, end_offset, control=control == "show", aborted=aborted):
                    yield found, header, body, first
                return
            batches = self.batches_from(*start, run_taker)
        for found, header, body in selected_batches(batches, first, end_offset, control=control == "show",
                                                    aborted=aborted):
            yield found, header, body, first
