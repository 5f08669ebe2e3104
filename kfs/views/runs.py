"""Runs: the decoded lines of one segment, their length and their sparse seek map, and how they are counted.

A run is mapped by counting its lines batch by batch (kfs.views.line_lengths), committing each
batch so that readers and sizes see a consistent prefix; damage ends the run (see kfs.views.decoded).
"""

from __future__ import annotations

import logging
import threading
import time
from array import array
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Iterable
from struct import iter_unpack
from typing import TypeAlias

from kfs.storage import KfsError, LogSegment, VanishedError
from kfs.views.line_lengths import CountedBatch
from kfs.views.size_cache import PROBE_BYTES, SavedMap, probe_value

log = logging.getLogger("kfs")

MAP_INTERVAL = 32 * 1024  # decoded bytes between seek-map entries (cf. index.interval.bytes)
PROGRESS_AFTER = 1.0  # seconds of mapping before it shows in the log, and between progress lines


class DamagedLog(KfsError):
    """The position where a decoded view meets a corrupt or truncated batch."""


class StaleMap(VanishedError):
    """A run's file changed in place since it was mapped: its map is forgotten, the read fails."""


# Each run's (segment base offset, inode, start, ctime when mapped or None while active): the files a
# view was laid out over (kfs.views.decoded.run_files).
RunFiles: TypeAlias = "tuple[tuple[int, int | None, int, int | None], ...]"


def same_file(a: tuple[int, int | None, int, int | None], b: tuple[int, int | None, int, int | None]) -> bool:
    """Two RunFiles entries (kfs.views.decoded.run_files) name the same bytes; a ctime not known
    yet (the segment was active, when only appends change it) matches any."""
    return a[:3] == b[:3] and (a[3] is None or b[3] is None or a[3] == b[3])


class SegmentRun:
    """The decoded bytes of one segment's records from `start` on, with its sparse seek map.

    Invariant: every record with offset < `mapped_to` (from `start`) is counted in `length`, and
    `positions[i]` is where the record at `offsets[i]` starts. `error`: the run ends in damage
    (what reading past `length` meets); `file_end`: the segment file position mapped to.
    `walked_to`: the end offset the segment's batches were walked to their end for. Records
    reaching the end do not make a run complete: damage after a segment's last record (bytes
    after its last batch, a batch whose offsets go back) is met only by walking on (docs/spec.md section 7).
    """

    __slots__ = ("damaged_at", "error", "file_end", "identity", "length", "lock", "mapped_to", "mapping", "offsets",
                 "positions", "probe_positions", "probe_values", "saved", "segment", "skips", "start", "waiters",
                 "walked_to")

    def __init__(self, segment: LogSegment, start: int) -> None:
        self.segment = segment
        self.start = start
        self.positions = array("q", [0])
        self.offsets = array("q", [start])
        # Per map entry, a file position near where its batch starts (-1: none) and, once the map is
        # complete, the probe of the bytes there (kfs.views.size_cache.probe_value): a reader starting
        # at the entry checks them, so a map never outlives the file it was made from.
        self.probe_positions = array("q", [0])
        self.probe_values = array("q")
        # The file's identity (LogFile.file_identity) when it was mapped, once it is closed: None
        # while it is active (it grows) or not yet looked at.
        self.identity: list[int] | None = None
        self.length = 0
        self.mapped_to = start
        self.walked_to = -1
        self.error: str | None = None
        self.damaged_at = -1  # with `error`: every record below this offset is counted before the damage
        self.file_end = 0
        self.saved = False
        self.skips: OrderedDict[int, int] = OrderedDict()
        self.lock = threading.Lock()
        self.mapping = threading.Lock()  # one mapping at a time: a second asker waits for the first
        self.waiters = 0  # foreground requests waiting for `mapping` (kfs.views.pacing)

    def complete(self, end: int) -> bool:
        """Mapped to `end`: its segment's batches walked to their end, or to damage."""
        return self.error is not None or self.walked_to >= end

    def resume_offset(self, end: int) -> int:
        """Where counting goes on: after the records counted, or (all counted, the walk not done)
        at the last one, whose batch the count skips before walking on to the segment's end."""
        return self.mapped_to if self.mapped_to < end else max(self.start, end - 1)

    def span(self) -> int:
        """Bytes of the stream the run takes: its lines, and the unreadable byte of its damage."""
        return self.length + (1 if self.error is not None else 0)

    def entry_at_or_before(self, position: int) -> tuple[int, int]:
        i = self.entry_index(position)
        return self.positions[i], self.offsets[i]

    def entry_index(self, position: int) -> int:
        return bisect_right(self.positions, position) - 1

    def load(self, saved: SavedMap, identity: list[int]) -> None:
        self.positions, self.offsets = saved.positions, saved.offsets
        self.length, self.mapped_to, self.error = saved.length, saved.mapped_to, saved.error
        self.damaged_at = saved.damaged_at if saved.damaged_at >= 0 else saved.mapped_to
        self.probe_positions, self.probe_values = saved.probe_positions, saved.probe_values
        if len(self.probe_positions) != len(self.positions):
            self.probe_positions = array("q", [-1] * len(self.positions))
            self.probe_values = array("q")
        self.walked_to = saved.mapped_to  # a map is saved once complete
        self.identity = identity
        self.saved = True

    def take_probes(self) -> None:
        """Read the probe of every map entry (once the map is complete, before it is saved): one
        small read each, of bytes the count has just walked."""
        values = array("q")
        for position in self.probe_positions:
            values.append(probe_value(self.segment.read(position, PROBE_BYTES)) if position >= 0 else -1)
        self.probe_values = values

    def probe_holds(self, i: int) -> bool:
        """Entry `i`'s probe reads as it did when the map was made (or it has none). Its bytes are
        the header of the batch the reader starting there walks next: no read the reader does not
        need."""
        if i >= len(self.probe_values) or self.probe_values[i] < 0 or self.probe_positions[i] < 0:
            return True
        return probe_value(self.segment.read(self.probe_positions[i], PROBE_BYTES)) == self.probe_values[i]

    def saved_map(self) -> SavedMap:
        return SavedMap(self.length, self.mapped_to, self.positions, self.offsets, self.error,
                        self.probe_positions, self.probe_values, self.damaged_at)

    def commit(self, positions: list[int], offsets: list[int], position: int, exhausted: bool, end: int) -> None:
        """A reader rendered, from the frontier, the records `offsets` at `positions`, and its lines
        end at `position`; `exhausted`: nothing else below `end`. Extend the map if it is still the
        frontier (another reader may have got there first: then this is a no-op)."""
        with self.lock:
            if self.error is not None:
                return
            if positions:
                if positions[0] != self.length or offsets[0] < self.mapped_to:
                    return
                last = self.positions[-1]
                for p, o in zip(positions, offsets, strict=True):
                    if p - last >= MAP_INTERVAL:
                        self.positions.append(p)
                        self.offsets.append(o)
                        self.probe_positions.append(-1)  # (a reader's lines carry no file positions)
                        last = p
                self.length = position
                self.mapped_to = offsets[-1] + 1
            elif position != self.length:
                return
            if exhausted:
                self.mapped_to = max(self.mapped_to, end)
                self.walked_to = max(self.walked_to, end)


    def end_in_damage(self, position: int, error: str, end: int) -> bool:
        """A reader rendering at the map's frontier met damage at `position`: the run ends there, as
        when counting meets it. Where a walk meets damage depends on where it starts (offsets that go
        back are seen only by a walk that crosses both batches), so what the first walk met is kept:
        a read resumed from the seek map would start past it. False when the map is elsewhere by now."""
        with self.lock:
            if self.error is not None or self.length != position:
                return False
            self.error = error
            self.damaged_at = self.mapped_to
            self.mapped_to = end
        log.error("%s: decoded views stop at this damage (a read there fails)", error)
        return True


class MappingProgress:
    """Progress of mapping one view's runs, in the daemon log once it takes over PROGRESS_AFTER."""

    def __init__(self, name: str, total_bytes: int, pace: Callable[[SegmentRun], None] | None = None) -> None:
        self.name, self.total = name, max(total_bytes, 1)
        self.pace = pace  # the background scan's: pauses while the mount serves reads (kfs.views.pacing)
        self.began = self.last_report = time.monotonic()
        self.bytes = self.records = 0

    def advance(self, batch: CountedBatch, file_bytes: int) -> None:
        """(Segments may be counted on several threads: the figures are for the log, not exact.)"""
        self.bytes += file_bytes
        self.records += batch.records
        now = time.monotonic()
        if now - self.last_report >= PROGRESS_AFTER:
            self.last_report = now
            log.info("decoded sizes of %s: %d%% (%d records, %.1f s)", self.name,
                     min(100, 100 * self.bytes // self.total), self.records, now - self.began)

    def done(self) -> None:
        elapsed = time.monotonic() - self.began
        if elapsed >= PROGRESS_AFTER:
            log.info("decoded sizes of %s: done (%d records, %.1f s)", self.name, self.records, elapsed)


def _count_part(run: SegmentRun, first_offset: int, next_offset: int, length: int, batch_start: int) -> None:
    """One batch's lines added to the run (the caller holds run.lock and skipped what is mapped);
    `batch_start`: where the walk's last batch ended, this batch's start in its file."""
    if run.length - run.positions[-1] >= MAP_INTERVAL:
        run.positions.append(run.length)
        run.offsets.append(first_offset)
        run.probe_positions.append(batch_start)
    run.length += length
    run.mapped_to = max(next_offset, first_offset + 1)


def _count_parts(run: SegmentRun, parts: bytes) -> None:
    """Several batches' lines (kfs.views.plain_runs: (first, next, bytes, end) each) added to the run."""
    batch_start = run.file_end
    for first_offset, next_offset, length, batch_end in iter_unpack("=qqqq", parts):
        if first_offset >= run.mapped_to:  # (else a reader mapped it meanwhile)
            _count_part(run, first_offset, next_offset, length, batch_start)
        batch_start = batch_end


def count_into(run: SegmentRun, batches: Iterable[CountedBatch], end: int, progress: MappingProgress | None) -> None:
    """Map `run` up to `end` from its counted batches (the caller holds `run.mapping`). Damage ends
    the run there; a vanished segment is raised (the view is gone, not damaged)."""
    try:
        for batch in batches:
            with run.lock:
                if batch.parts is not None:
                    _count_parts(run, batch.parts)
                else:
                    if batch.first_offset < run.mapped_to:
                        continue  # a reader mapped it meanwhile
                    _count_part(run, batch.first_offset, batch.next_offset, batch.length, run.file_end)
                walked, run.file_end = batch.file_end - run.file_end, batch.file_end
            if progress is not None:
                progress.advance(batch, walked)
                if progress.pace is not None:
                    progress.pace(run)
    except KfsError as e:
        if isinstance(e, VanishedError):
            raise
        with run.lock:
            run.error = str(e)
            run.damaged_at = run.mapped_to
            run.mapped_to = end
        log.error("%s: decoded views stop at this damage (a read there fails)", e)
        return
    with run.lock:
        run.mapped_to = max(run.mapped_to, end)
        run.walked_to = max(run.walked_to, end)
