"""A reader's cursor in a decoded view: where its last read stopped, and the lines rendered just before.

The kernel reads a file through the page cache in requests of up to 1 MiB, several at once (its
readahead window), and libfuse hands them to different threads: the request for the next MiB often
takes the cursor's lock before the one for this MiB. Rendering is sequential, so a cursor that
followed each request where it pointed seeked forward for the first (a walk restarted from the seek
map) and back for the second (another restart), for two in three of a first `cat messages.jsonl`'s
requests. A cursor renders forward through a gap of up to FORWARD_SLACK instead, and keeps the
chunks it rendered from KEPT_BYTES before the last read on: the request that comes late is served
from them, and every byte is rendered once. With kfs's 1 MiB readahead window (kfs.fuse.readahead)
the kernel has about two requests of a reader out at a time (2.1 on average in a first `cat`, by
the time the daemon spends in them over the wall time); both bounds cover two requests behind the
latest, so a reader's cursor holds up to ~3 MiB of lines while it reads; the mount's idle closer
drops them from a file left open unread (`forget_kept`).
"""

from __future__ import annotations

import os
import threading
import time
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from typing import Protocol, TypeAlias

from kfs.storage import CorruptLogError, LogSegment, PartitionLog, VanishedError
from kfs.views.batch_lines import BatchLines
from kfs.views.plain_runs import MAX_BUDGET, MIN_BUDGET, RENDER_BUDGET
from kfs.views.runs import DamagedLog, RunFiles, SegmentRun, same_file

Piece: TypeAlias = "bytes | memoryview"  # a part of a read's reply (a view of a rendered chunk)


class RunSource(Protocol):
    """What a cursor reads through (kfs.views.decoded.DecodedLog): the partition (its name and path,
    for errors), a run's lines from its own segment, and the check that a run's file is the one mapped."""

    @property
    def plog(self) -> PartitionLog: ...

    def rendered(self, start: int, end: int, segment: LogSegment | None = None,
                 budget: list[int] | None = None) -> Iterator[BatchLines]: ...

    def check_unchanged(self, run: SegmentRun, end: int, entry: int | None = None) -> None: ...


class CursorView(Protocol):
    """What a cursor needs of its view (kfs.views.decoded.DecodedView): its runs now, and where its
    first record starts in the first of them."""

    @property
    def log(self) -> RunSource: ...

    def start_layout_and_files(self, start: int | None = None
                               ) -> tuple[int, list[tuple[SegmentRun, int]], RunFiles]: ...

    def skip(self, layout: list[tuple[SegmentRun, int]], start: int | None = None) -> int: ...


class Opened(Protocol):
    """The measure a reader's size came from (kfs.views.decoded.Measure): its start and files."""

    @property
    def start(self) -> int: ...

    @property
    def runs(self) -> RunFiles: ...

FUSE_MAX_READ = 1 << 20  # the largest read request the kernel sends a FUSE daemon (256 pages)
FORWARD_SLACK = 2 * FUSE_MAX_READ  # a cursor this close behind a read renders forward to it
KEPT_BYTES = 2 * FUSE_MAX_READ  # rendered lines kept this far behind the last read, for reads that come late


class Cursor:
    """A reader's position in a view (one per open file): sequential reads continue the decoding
    where the last one stopped; other reads seek through the run maps.

    **The rule when segments change under a reader.** A decoded file is always the lines of the
    partition's segments as they are now: every reader, and the kernel's page cache they share,
    sees the same bytes at the same position, and st_size is their length. Appends (the active
    segment growing, a roll) only add bytes at the end. Retention deleting a segment, the log
    start moving, or the log cleaner swapping in a shorter segment changes the bytes *after* the
    change: a reader that had read there, or whose kernel holds pages of the old bytes there (its
    own readahead, or pages another reader cached), would go on with other lines at the same
    positions (a line cut in two, records skipped or repeated). So each cursor remembers the
    segment files (and the start) of the file as it was when opened, and as it was at each read
    since; a read when one of them is gone or replaced is EIO, never bytes that do not continue
    what the reader has. A read from position 0 starts over with the file as it is now, and so
    does `tail -f` when it sees the size drop below what it read ("file truncated"). Kafka's
    readers follow offsets, not byte positions, and go on: `kfs cat`, or `offset/<N>.jsonl`
    reopened at the last offset read, do the same here.
    """

    def __init__(self, view: CursorView, opened: Opened | None = None) -> None:
        self.view = view
        self.lock = threading.Lock()
        self._run: SegmentRun | None = None
        self._end = 0
        self._chunks: Iterator[BatchLines] = iter(())
        self._at = 0  # where in the run the next chunk rendered starts
        # The chunks rendered last, (where each starts in the run, its lines), contiguous up to _at.
        self._kept: list[tuple[int, bytes]] = []
        self._budget = [RENDER_BUDGET]  # the walker's lines per call, set to what the read in progress needs
        self._last_read = time.monotonic()
        # (the view's RunFiles, the run a read began serving at, what `local` passed over to get there)
        self._skip_hint: tuple[RunFiles, int, int] | None = None
        # The view's start and its runs' files (Measure.runs) as the reader has known them.
        self._seen = (opened.start, opened.runs) if opened is not None else None

    def read(self, position: int, size: int, partial: bool = True) -> bytes:
        """Up to `size` bytes at `position`; fewer only at the end of the stream, or (`partial`)
        before damage or a vanished segment: the read that starts there raises the error. Without
        `partial` such a read raises at once (a page-cache reader takes a short read for the end)."""
        return b"".join(self.read_pieces(position, size, partial))

    def read_pieces(self, position: int, size: int, partial: bool = True) -> list[Piece]:
        """`read`, in the pieces it is made of (for a reply that joins them without the GIL)."""
        out: list[Piece] = []
        with self.lock:
            self._last_read = time.monotonic()
            try:
                self._read_into(out, position, size)
            except Exception:
                self._run = None  # start afresh: the next read meets the error again
                if not out or not partial:
                    raise
        return out

    def forget_kept(self, idle_seconds: float) -> int:
        """Drop the kept lines of a cursor not read for `idle_seconds` (a file left open in `less`):
        a later read behind the cursor walks again from the seek map. Never waits for a read in
        progress. Returns how many bytes were dropped."""
        if time.monotonic() - self._last_read < idle_seconds or not self.lock.acquire(blocking=False):
            return 0
        try:
            dropped = sum(len(data) for _, data in self._kept)
            self._kept = []
            return dropped
        finally:
            self.lock.release()

    def _read_into(self, out: list[Piece], position: int, wanted: int) -> None:
        start, layout, runs = self.view.start_layout_and_files()
        if self._seen is not None and position > 0 and self._seen != (start, runs):  # (a read from 0 starts over)
            seen_start, seen = self._seen
            changed = [seen_run for seen_run, now in zip(seen, runs + (None,) * len(seen), strict=False)
                       if now is None or not same_file(seen_run, now)]
            if changed:
                path = os.path.join(self.view.log.plog.path, f"{changed[0][0]:020d}.log")
                raise VanishedError(f"{path}: segment deleted or replaced while read, at position {position} of "
                                    "this reader (the decoded file changed since it opened or last read it: "
                                    "reopen it to read it as it is now)")
            if seen_start != start:
                raise VanishedError(f"{self.view.log.plog.name}: the log start moved from {seen_start} to {start} "
                                    f"while read, at position {position} of this reader (reopen the file to read "
                                    "it as it is now)")
        self._seen = (start, runs)
        self._walk(out, layout, position, position + self.view.skip(layout, start), wanted, runs)

    def _walk(self, out: list[Piece], layout: list[tuple[SegmentRun, int]], position: int, local: int,
              wanted: int, runs: RunFiles) -> None:
        """Serve `wanted` bytes from `local` in the first run of `layout` on; `position` is the stream's.

        `runs`: the view's RunFiles, the same object while its layout is kept (DecodedView.
        start_layout_and_files). The runs a read passed over whole are complete and stay so; the
        next read at or past the same point starts where it began serving (a walk over every
        segment before it at each read cost 1,973 segments' reads a tenth of their time)."""
        first, skipped = 0, 0
        hint = self._skip_hint
        if hint is not None and hint[0] is runs and local >= hint[2]:
            first, skipped = hint[1], hint[2]
            local -= skipped
        serving = False  # (once a read serves, `local` restarts at 0 and no longer counts what it passed)
        for i in range(first, len(layout)):
            run, end = layout[i]
            if run.complete(end) and local >= run.length:
                if run.error is not None:
                    if local == run.length:
                        raise DamagedLog(run.error)
                    local -= 1
                    skipped += 1
                local -= run.length
                skipped += run.length
                continue
            if not serving:
                self._skip_hint = (runs, i, skipped)
            served = self._serve(run, end, local, wanted, out)
            if served:
                serving = True
                wanted -= served
                position += served
                local = 0
                if wanted <= 0:
                    return
                continue
            if not run.complete(end):
                return  # (cannot happen: a run read to its end is complete)
            local -= run.length  # the run ended before `local`: it is complete now
            skipped += run.length

    def _serve(self, run: SegmentRun, end: int, local: int, wanted: int, out: list[Piece]) -> int:
        """Append up to `wanted` bytes of `run` from `local` to `out`; return how many.

        Works a batch at a time: the batch's lines come as one bytes with their ends packed; the map
        takes the starts it needs at the frontier, other reads only the batch's length.
        """
        log = self.view.log
        kept_from = self._kept[0][0] if self._kept else self._at
        if not (self._run is run and self._end == end and kept_from <= local
                and local - self._at <= FORWARD_SLACK):
            entry = run.entry_index(local)
            position, offset = run.positions[entry], run.offsets[entry]
            log.check_unchanged(run, end, entry)  # (its probe: the header of the batch rendered next)
            self._run, self._end = run, end
            self._chunks = log.rendered(offset, end, run.segment, self._budget)
            self._kept, self._at = [], position
        else:
            log.check_unchanged(run, end)  # one fstat a read: a file rewritten under a reader is never served
        self._forget_before(local - KEPT_BYTES)
        served = 0
        if local < self._at:  # lines rendered already (a request that came after the next one)
            served = self._serve_kept(local, wanted, out)
            local += served
            if served >= wanted:
                return served
        position = self._at
        # Once the cursor reaches the map's frontier it maps what it renders (committed per read).
        frontier_at, mapped_to = run.length, run.mapped_to
        frontier = position == frontier_at
        positions: list[int] = []
        offsets: list[int] = []
        exhausted = True
        try:
            self._budget[0] = _budget(local + wanted - served - position)
            for chunk in self._chunks:  # BatchLines: the starts are only made at the frontier
                data = chunk.data
                chunk_end = position + len(data)
                if frontier:
                    positions.append(position)
                    positions += [position + e for e in chunk.ends[:-1]]
                    offsets += chunk.offsets
                elif position <= frontier_at < chunk_end or frontier_at == position:
                    starts = [position, *(position + e for e in chunk.ends)]
                    i = bisect_left(starts, frontier_at)
                    if starts[i] == frontier_at and i < len(chunk.offsets) and chunk.offsets[i] >= mapped_to:
                        frontier = True
                        positions += starts[i:-1]
                        offsets += chunk.offsets[i:]
                self._keep(position, data)
                data_position, position = position, chunk_end
                if position <= local:
                    continue  # before the read (after a seek to a map entry, or a gap rendered through)
                # (a view, not a copy: the reply is gathered from the pieces in one copy, kfs.fuse.zerocopy)
                piece = memoryview(data)[local - data_position:local - data_position + wanted - served]
                out.append(piece)
                served += len(piece)
                local += len(piece)
                if served >= wanted:
                    exhausted = False
                    break
                self._budget[0] = _budget(local + wanted - served - position)
        except Exception as e:
            if frontier and positions:  # what was rendered before the error is mapped correctly
                run.commit(positions, offsets, position, False, end)
            if frontier and isinstance(e, CorruptLogError):
                run.end_in_damage(position, str(e), end)
            raise
        if frontier or (exhausted and position == frontier_at):  # (the walk ended at the frontier)
            run.commit(positions, offsets, position, exhausted, end)
        return served

    def _keep(self, position: int, data: bytes) -> None:
        """Remember a chunk just rendered at `position` (the cursor is at its end now)."""
        self._kept.append((position, data))
        self._at = position + len(data)

    def _forget_before(self, local: int) -> None:
        """Forget the kept chunks that end at or before `local`."""
        drop = 0
        while drop < len(self._kept) and self._kept[drop][0] + len(self._kept[drop][1]) <= local:
            drop += 1
        if drop:
            del self._kept[:drop]

    def _serve_kept(self, local: int, wanted: int, out: list[Piece]) -> int:
        """Append up to `wanted` bytes from `local` (behind the cursor, not before its first kept
        chunk) out of the kept chunks; return how many."""
        i = bisect_right(self._kept, local, key=lambda kept: kept[0]) - 1
        served = 0
        for position, data in self._kept[i:]:
            piece = memoryview(data)[local - position:local - position + wanted - served]
            out.append(piece)
            served += len(piece)
            local += len(piece)
            if served >= wanted:
                break
        return served


def _budget(needed: int) -> int:
    """The walker's lines per call for a read that needs `needed` more bytes from where it renders."""
    return min(MAX_BUDGET, max(MIN_BUDGET, needed))
