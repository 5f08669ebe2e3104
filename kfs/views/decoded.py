"""Decoded views (`offset/<N>.jsonl`, `time/<T>.jsonl`, `messages.jsonl`) as files with exact sizes and seeks.

A decoded view is the JSON lines (`kfs.views.jsonl`) of a partition's records from a start offset
to the log end.
Shell tools want a file: `tar`, `rsync`, `shutil.copyfile` (sendfile), `du` and `mmap` trust
st_size; `tail -n` and `less G` seek to it and read backwards; `cat`/`head`/`grep` read forward.
Two things are needed: the stream's exact length, always, and the byte position of a record in it.

**Runs and the seek map.** The stream is cut into *runs*, one per segment, shared by every view
(a view starting at offset N inside a segment skips the first part of that segment's run). A run
remembers, every `MAP_INTERVAL` decoded bytes, the pair (decoded position, offset of the record
starting there), as `OffsetIndex` remembers (offset, file position) every `index.interval.bytes`.
A read at position p bisects for the entry at or before p and renders from that record: one
batch plus at most `MAP_INTERVAL` bytes.

**Sizes are exact from the first stat.** A run is mapped (its length and seek map computed) by
counting its lines (kfs.views.line_lengths, and for runs of plain batches kfs.views.plain_runs: in C
without rendering and without the GIL, where it can; a view's segments side by side), the first time
a size needs it, or earlier by the mount's background scan (which gives way to reads). A closed
segment's run never changes, so it is kept in the size cache (kfs.views.size_cache) and the next
mount knows it at once; the active segment's run is small and is extended with the batches appended
since the last stat, so a growing partition's size grows. Counting a 1 M-record partition takes
about 0.15 s (README, Performance); a mapping that runs longer than a second logs its progress.

**Damage.** A run whose counting meets a corrupt or truncated batch ends there: its length is
the lines before the damage, followed by one byte that cannot be read (reading it is EIO, with
the error in the log). So st_size covers the readable data, the damage and whatever readable
segments follow, and a reader meets the error where the data stops instead of a short file. The
FUSE layer never answers with a short read (the kernel takes one for the end of the file, and
sendfile would copy a short file without a word): the page holding the damage fails whole, so a
reader through the mount gets every page before it, then EIO.
"""

from __future__ import annotations

import logging
import os
import threading
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple, TypeAlias

from kfs.internal.lines import line_decoder
from kfs.record import Record
from kfs.storage import CorruptLogError, KfsError, LogSegment, PartitionLog, VanishedError
from kfs.views.batch_lines import BatchLines, line_lists
from kfs.views.jsonl import line_prefix, render_line_list
from kfs.views.line_lengths import counted_batches
from kfs.views.runs import MAP_INTERVAL, DamagedLog, MappingProgress, SegmentRun, count_into
from kfs.views.size_cache import SizeCache, code_fingerprint

__all__ = ["Cursor", "DamagedLog", "DecodedLog", "DecodedView", "Measure", "Piece", "SegmentRun"]

log = logging.getLogger("kfs")

Pace: TypeAlias = Callable[[SegmentRun], None]
Piece: TypeAlias = "bytes | memoryview"  # a part of a read's reply (a view of a rendered chunk)

MAPPING_THREADS = min(4, os.cpu_count() or 1)  # segments of one view counted at once
MAX_RUNS = 4096  # runs kept per decoded log (LRU); a run of a 1 GiB segment maps in ~1 MB
RESUME_SLACK = 2 * MAP_INTERVAL  # a cursor this close behind a read skips forward instead of seeking
MAX_SKIPS = 256  # view starts remembered per run


class DecodedLog:
    """The decoded stream of one partition under one isolation/control/decode setting, and its run maps.

    `decode`: "auto" shows Kafka's internal topics decoded (SPEC section 8), "raw" as bytes."""

    def __init__(self, plog: PartitionLog, isolation: str = "read_uncommitted", control: str = "hide",
                 cache: SizeCache | None = None, decode: str = "auto") -> None:
        self.plog = plog
        self.isolation = isolation
        self.control = control
        self.decode = decode
        self.cache = cache or SizeCache(None)
        self.prefix = line_prefix(plog.topic, plog.partition)
        self.decoder = line_decoder(plog.topic, decode, plog)
        # The internal topics' lines have a renderer of their own: they are measured by rendering
        # them, never counted as plain ones.
        self.countable = self.decoder is None
        self._runs: OrderedDict[tuple[int, int], SegmentRun] = OrderedDict()
        self._lock = threading.Lock()

    def view(self, start_offset: int | None) -> DecodedView:
        """The view from `start_offset`; None: from the log start, wherever it is at each use
        (`messages.jsonl`)."""
        return DecodedView(self, start_offset)

    def render(self, records: list[Record]) -> list[bytes]:
        """The one renderer of this log's lines: what reads serve and what sizes measure."""
        return render_line_list(self.prefix, records, self.decoder)

    def run(self, segment: LogSegment, start: int, end: int) -> SegmentRun:
        # Keyed by the segment object: the storage layer makes a new one when a segment file is
        # replaced (log cleaner swap), and holding it in the run keeps its id from being reused.
        key = (id(segment), start)
        with self._lock:
            run = self._runs.get(key)
            if run is not None and run.segment is segment:
                self._runs.move_to_end(key)
                return run
            run = self._runs[key] = SegmentRun(segment, start)
            # A new run (a roll, a swap, a new log start): drop the runs of segments deleted or
            # replaced since; kept, their seek maps and view starts grew the daemon with every one.
            for old_key in [k for k, r in self._runs.items() if r.segment.retired]:
                del self._runs[old_key]
            while len(self._runs) > MAX_RUNS:
                self._runs.popitem(last=False)
        if not self.plog.is_active(segment):
            try:
                saved = self.cache.load(self._cache_key(segment, start, end))
            except VanishedError:
                saved = None  # the segment is gone: reads will say so
            if saved is not None:
                with run.lock:
                    if run.length == 0 and run.mapped_to == start:
                        run.load(saved)
        return run

    def forget(self, run: SegmentRun) -> None:
        with self._lock:
            if self._runs.get((id(run.segment), run.start)) is run:
                del self._runs[(id(run.segment), run.start)]

    def _cache_key(self, segment: LogSegment, start: int, end: int) -> dict:
        """Everything the bytes of a closed segment's run depend on (kfs.views.size_cache)."""
        aborted = self.plog.aborted_transactions().digest() if self.isolation == "read_committed" else None
        return {"file": segment.file_identity(), "topic": self.plog.topic, "partition": self.plog.partition,
                "start": start, "end": end, "isolation": self.isolation, "control": self.control,
                "decode": self.decode if self.decoder is not None else "plain", "aborted": aborted,
                "code": code_fingerprint()}

    def rendered(self, start: int, end: int, segment: LogSegment | None = None) -> Iterator[BatchLines]:
        """The JSON lines a batch at a time (BatchLines) from `start` to `end` (kfs.views.batch_lines:
        from the batches' bytes, without the GIL, where it can); `segment`: from that segment object's
        file only (a run's own, see `counted`)."""
        if start >= end and segment is None:  # (a run's own segment is walked even then: see counted)
            return
        yield from line_lists(self.plog, start, end, isolation=self.isolation, control=self.control,
                              prefix=self.prefix, render=self.render, fused=self.countable, own_segment=segment)

    def counted(self, start: int, end: int, segment: LogSegment | None = None) -> Iterator:
        """The lines' lengths per batch; `segment`: a run's own segment object. A run is counted and
        rendered from the file it maps, never through the partition's current listing: after a
        cleaner swap that holds the cleaned file, and the old file's positions and offsets applied to
        it gave cut lines and lost records (found by kfs.bench.soak). A run's segment is walked even
        when it can hold no record of the view (a segment whose first batch is damaged ends the log
        there): damage in it is still met."""
        return counted_batches(self.plog, start, end, isolation=self.isolation, control=self.control,
                               prefix=self.prefix, render=self.render, countable=self.countable, own_segment=segment)

    def map_run(self, run: SegmentRun, end: int, progress: MappingProgress | None = None) -> None:
        """Count `run`'s lines up to `end` (the batches not mapped yet), committing batch by batch,
        and keep a closed segment's complete map in the size cache."""
        if not run.mapping.acquire(blocking=False):
            with run.lock:
                run.waiters += 1  # the background scan holding it stops pausing (kfs.views.pacing)
            try:
                run.mapping.acquire()
            finally:
                with run.lock:
                    run.waiters -= 1
        try:
            self._map_held(run, end, progress)
        finally:
            run.mapping.release()

    def _map_held(self, run: SegmentRun, end: int, progress: MappingProgress | None) -> None:
        if not run.complete(end):
            count_into(run, self.counted(run.resume_offset(end), end, run.segment), end, progress)
        if not run.saved and run.complete(end) and not self.plog.is_active(run.segment):
            try:
                key = self._cache_key(run.segment, run.start, end)
            except (OSError, VanishedError):
                return  # the segment vanished: nothing to keep
            self.cache.save(key, run.saved_map())
            run.saved = True


class Measure(NamedTuple):
    """A view's size and the files it was measured over: its start, and each run's segment (base
    offset, inode) and start. Another measure `extends` this one when the view only grew at its end
    (the active segment grew, segments rolled): every byte of this one is still where it was."""

    size: int
    start: int
    runs: tuple[tuple[int, int | None, int], ...]

    def extends(self, earlier: Measure) -> bool:
        return (self.start == earlier.start and self.size >= earlier.size
                and self.runs[:len(earlier.runs)] == earlier.runs)


class DecodedView:
    """`offset/<start>.jsonl`: every record from `start` to the log end, one JSON line each;
    `messages.jsonl` (start None) from the log start as it is at each use."""

    def __init__(self, log: DecodedLog, start_offset: int | None) -> None:
        self.log = log
        self._start = start_offset

    @property
    def start(self) -> int:
        return self._start if self._start is not None else self.log.plog.log_start_offset()

    def layout(self, start: int | None = None) -> list[tuple[SegmentRun, int]]:
        """The runs of this view (whole segments, the first from the log start) and the offset each
        ends at (the next segment's base, or the log end); from the segment holding `start`, for a
        reader already there, whom the runs before do not concern."""
        plog = self.log.plog
        start = self.start if start is None else start
        first = plog.floor_segment(start)
        if first is None and not plog.segments():
            return []  # a partition directory with no segment yet: an empty log
        if first is None:
            raise VanishedError(f"{plog.name}: the segment holding offset {start} is gone")
        segments = [first]
        following = plog.higher_segment(first.base_offset)
        while following is not None:
            segments.append(following)
            following = plog.higher_segment(following.base_offset)
        log_start, log_end = plog.log_start_offset(), plog.log_end_offset()
        layout = []
        for i, segment in enumerate(segments):
            start = max(segment.base_offset, log_start)
            end = segments[i + 1].base_offset if i + 1 < len(segments) else max(log_end, start)
            run = self.log.run(segment, start, end)
            if i + 1 == len(segments) and run.file_end > segment.valid_size():
                self.log.forget(run)  # the active segment was truncated (a new leader): count afresh
                run = self.log.run(segment, start, end)
            layout.append((run, end))
        return layout

    def mapped_layout(self, start: int | None = None, pace: Pace | None = None) -> list[tuple[SegmentRun, int]]:
        """The layout with every run mapped to its end: what a size needs (with progress in the log
        when that takes more than a second); `pace`: the background scan's (kfs.views.pacing)."""
        layout = self.layout(start)
        missing = [(run, end) for run, end in layout if not run.complete(end)]
        if missing:
            progress = MappingProgress(self.log.plog.name, sum(run.segment.valid_size() for run, _ in missing), pace)
            if len(missing) == 1 or MAPPING_THREADS < 2:
                for run, end in missing:
                    self.log.map_run(run, end, progress)
            else:  # segments counted side by side: the walker counts without the GIL (kfs.views.plain_runs)
                with ThreadPoolExecutor(min(MAPPING_THREADS, len(missing)), thread_name_prefix="kfs-map") as pool:
                    for done in [pool.submit(self.log.map_run, run, end, progress) for run, end in missing]:
                        done.result()
            progress.done()
        return layout

    def skip(self, layout: list[tuple[SegmentRun, int]], start: int | None = None) -> int:
        """Where the view's first record (from `start`, the view's by default) starts in its first
        run (mapped)."""
        if not layout:
            return 0
        start = self.start if start is None else start
        run = layout[0][0]
        if start <= run.start:
            return 0
        with run.lock:
            known = run.skips.get(start)
            if known is not None:
                return known
            i = bisect_right(run.offsets, start) - 1
            position, offset = run.positions[i], run.offsets[i]
        if run.error is not None and start >= run.mapped_to:
            return run.length
        try:
            skip = position + sum(batch.length for batch in self.log.counted(offset, start, run.segment))
        except KfsError as e:
            if run.error is None or isinstance(e, VanishedError):
                raise
            # The damage that ends the run (a decompression bomb, a corrupt batch) lies before `start`:
            # the view opens at its unreadable byte, as messages.jsonl reaches it, and reads there
            # fail (EIO) while its later segments read.
            skip = run.length
        with run.lock:
            run.skips[start] = skip
            while len(run.skips) > MAX_SKIPS:
                run.skips.popitem(last=False)
        return skip

    def size(self, pace: Pace | None = None) -> int:
        """The exact length of the view now: every run mapped (from the cache, or counted)."""
        return self.measured(pace).size

    def measured(self, pace: Pace | None = None) -> Measure:
        """The exact length now, and what it was measured over (see `Measure`)."""
        start = self.start
        layout = self.mapped_layout(start, pace)
        return Measure(sum(run.span() for run, _ in layout) - self.skip(layout, start), start,
                       tuple((run.segment.base_offset, run.segment.inode, run.start) for run, _ in layout))

    def damaged(self) -> bool:
        """Whether the view (as mapped) holds damage: reads there fail."""
        return any(run.error is not None for run, _ in self.layout())

    def known_size(self) -> int | None:
        """The size if every run is mapped already (no counting), else None."""
        start = self.start
        layout = self.layout(start)
        if any(not run.complete(end) for run, end in layout):
            return None
        return sum(run.span() for run, _ in layout) - self.skip(layout, start)

    def cursor(self, opened: Measure | None = None) -> Cursor:
        """A reader's cursor; `opened`: the measure the reader's size came from (see Cursor)."""
        return Cursor(self, opened)


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

    def __init__(self, view: DecodedView, opened: Measure | None = None) -> None:
        self.view = view
        self.lock = threading.Lock()
        self._run: SegmentRun | None = None
        self._end = 0
        self._chunks: Iterator[BatchLines] = iter(())
        self._buf = b""  # the rendered batch the cursor is in ...
        self._buf_position = 0  # ... and where it starts in the run
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
            try:
                self._read_into(out, position, size)
            except Exception:
                self._run = None  # start afresh: the next read meets the error again
                if not out or not partial:
                    raise
        return out

    def _read_into(self, out: list[Piece], position: int, wanted: int) -> None:
        start = self.view.start
        layout = self.view.layout(start)
        runs = tuple((run.segment.base_offset, run.segment.inode, run.start) for run, _ in layout)
        if self._seen is not None and position > 0:  # (a read from 0 starts over)
            seen_start, seen = self._seen
            changed = [seen_run for seen_run, now in zip(seen, runs + (None,) * len(seen), strict=False)
                       if now != seen_run]
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
        self._walk(out, layout, position, position + self.view.skip(layout, start), wanted)

    def _walk(self, out: list[Piece], layout: list[tuple[SegmentRun, int]], position: int, local: int,
              wanted: int) -> None:
        """Serve `wanted` bytes from `local` in the first run of `layout` on; `position` is the stream's."""
        for run, end in layout:
            if run.complete(end) and local >= run.length:
                if run.error is not None:
                    if local == run.length:
                        raise DamagedLog(run.error)
                    local -= 1
                local -= run.length
                continue
            served = self._serve(run, end, local, wanted, out)
            if served:
                wanted -= served
                position += served
                local = 0
                if wanted <= 0:
                    return
                continue
            if not run.complete(end):
                return  # (cannot happen: a run read to its end is complete)
            local -= run.length  # the run ended before `local`: it is complete now

    def _serve(self, run: SegmentRun, end: int, local: int, wanted: int, out: list[Piece]) -> int:
        """Append up to `wanted` bytes of `run` from `local` to `out`; return how many.

        Works a batch at a time: the batch's lines come as one bytes with their ends packed; the map
        takes the starts it needs at the frontier, other reads only the batch's length.
        """
        log = self.view.log
        buf_end = self._buf_position + len(self._buf)
        if not (self._run is run and self._end == end and self._buf_position <= local
                and local - buf_end <= RESUME_SLACK):
            position, offset = run.entry_at_or_before(local)
            self._run, self._end = run, end
            self._chunks = log.rendered(offset, end, run.segment)
            self._buf, self._buf_position = b"", position
            buf_end = position
        served = 0
        if local < buf_end:  # the rest of the batch the last read stopped in
            piece = memoryview(self._buf)[local - self._buf_position:local - self._buf_position + wanted]
            out.append(piece)
            served += len(piece)
            local += len(piece)
            if served >= wanted:
                return served
        position = buf_end
        # Once the cursor reaches the map's frontier it maps what it renders (committed per read).
        frontier_at, mapped_to = run.length, run.mapped_to
        frontier = position == frontier_at
        positions: list[int] = []
        offsets: list[int] = []
        data, data_position = self._buf, self._buf_position
        exhausted = True
        try:
            for chunk in self._chunks:  # BatchLines: the starts are only made at the frontier
                chunk_end = position + len(chunk.data)
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
                data, data_position = chunk.data, position
                position = chunk_end
                if position <= local:
                    continue  # before the read (after a seek to a map entry)
                # (a view, not a copy: the reply is gathered from the pieces in one copy, kfs.fuse.zerocopy)
                piece = memoryview(data)[local - data_position:local - data_position + wanted - served]
                out.append(piece)
                served += len(piece)
                local += len(piece)
                if served >= wanted:
                    exhausted = False
                    break
        except Exception as e:
            if frontier and positions:  # what was rendered before the error is mapped correctly
                run.commit(positions, offsets, position, False, end)
            if frontier and isinstance(e, CorruptLogError):
                run.end_in_damage(position, str(e), end)
            raise
        self._buf, self._buf_position = data, data_position
        if frontier or (exhausted and position == frontier_at):  # (the walk ended at the frontier)
            run.commit(positions, offsets, position, exhausted, end)
        return served
