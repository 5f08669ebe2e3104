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
FUSE layer opens a view known to hold damage direct_io, so a reader's own reads get every line
before the damage (a short read), then EIO; it never answers a fill of the page cache short (the
kernel takes one for the end of the file): the kernel's splice path behind sendfile reads even a
direct_io file through the page cache, and gets every page before the one holding the damage,
then EIO (kfs.fuse.operations.reader_read tells the two kinds of request apart).
"""

from __future__ import annotations

import logging
import os
import threading
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise
from struct import iter_unpack
from typing import TYPE_CHECKING, NamedTuple, TypeAlias

from kfs.internal_topics.lines import line_decoder
from kfs.record import Record
from kfs.storage import KfsError, LogSegment, PartitionLog, VanishedError
from kfs.storage.log_file import one_lookup
from kfs.views.batch_lines import BatchLines, line_lists
from kfs.views.cursor import Cursor, Piece
from kfs.views.jsonl import line_prefix, render_line_list, walker_decoding
from kfs.views.line_lengths import counted_batches
from kfs.views.runs import DamagedLog, MappingProgress, RunFiles, SegmentRun, StaleMap, count_into, same_file
from kfs.views.size_cache import SizeCache, code_fingerprint

if TYPE_CHECKING:
    from kfs.registry.decode import Registry

__all__ = ["Cursor", "DamagedLog", "DecodedLog", "DecodedView", "Measure", "Piece", "SegmentRun", "StaleMap"]

log = logging.getLogger("kfs")

Pace: TypeAlias = Callable[[SegmentRun], None]


def run_files(layout: list[tuple[SegmentRun, int]]) -> RunFiles:
    """Each run's (segment base offset, inode, start, ctime): the files a layout was made of. The
    ctime is that of the file when its run was mapped (None while the segment is active, when
    only appends change it): an in-place rewrite keeps the inode, not the ctime."""
    return tuple((run.segment.base_offset, run.segment.inode, run.start,
                  run.identity[4] if run.identity is not None else None) for run, _ in layout)


MAPPING_THREADS = min(4, os.cpu_count() or 1)  # segments of one view counted at once
# Side by side only when the segments to count hold this much each on average: the walker counts
# without the GIL, but each segment's Python (opening it, its tail, its indexes, each window's
# read) takes the GIL back after every system call, and with small segments the threads mostly
# wait on each other. A first stat of one partition's 129 MB split into segments of 64 KiB took
# 1.02 s side by side and 0.59 s one at a time; 128 KiB 0.59 s and 0.37 s; 256 KiB 0.36 s and
# 0.28 s; 512 KiB 0.24 s and 0.34 s; 1 MiB 0.17 s and 0.23 s.
PARALLEL_MIN_BYTES = 384 * 1024
MAX_RUNS = 4096  # runs kept per decoded log (LRU); a run of a 1 GiB segment maps in ~1 MB
MAX_SKIPS = 256  # view starts remembered per run


class DecodedLog:
    """The decoded stream of one partition under one isolation/control/decode setting, and its run maps.

    `decode`: "auto" shows Kafka's internal topics decoded (docs/spec.md section 8), and with a `registry`
    (kfs.registry) the registry-framed payloads of a partition that holds them (section 9); "raw"
    shows bytes."""

    def __init__(self, plog: PartitionLog, isolation: str = "read_uncommitted", control: str = "hide",
                 cache: SizeCache | None = None, decode: str = "auto", registry: Registry | None = None) -> None:
        self.plog = plog
        self.isolation = isolation
        self.control = control
        self.decode = decode
        self.cache = cache or SizeCache(None)
        self.prefix = line_prefix(plog.topic, plog.partition)
        self.decoder = line_decoder(plog.topic, decode, plog, registry)
        # Decoded framed payloads depend on the registry's state: a schema registered later makes an
        # old record decodable, so counts are kept under the digest of the state they were made with.
        self.registry_digest: str | None = getattr(self.decoder, "digest", None)
        # ...and a view's files (RunFiles, Measure.runs) begin with an entry naming that state, so that a
        # size or pages of another state never pass for this one (Measure.extends, the kernel's cache)
        self.registry_entry: RunFiles = ((-1, int(self.registry_digest[:15], 16), -1, None),) \
            if self.registry_digest is not None else ()
        # The internal topics' lines have a renderer of their own: they are measured by rendering
        # them, never counted as plain ones.
        self.countable = self.decoder is None
        # (`__consumer_offsets`' commit batches, registry-framed Avro values: walked in C)
        self.walker_decoding = walker_decoding(self.decoder)
        self._runs: OrderedDict[tuple[int, int], SegmentRun] = OrderedDict()
        self._pruned_at = -1  # the listing (its generation) when retired segments' runs were last dropped
        self._lock = threading.Lock()
        self.generation = 0  # counts runs dropped because their file changed in place (views re-lay out)

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
            # Only when the listing changed since the last look: a first count makes a run per
            # segment, and looking at every run each time was quadratic (1,973 segments: 1.9 M
            # looks, a third of the count).
            listing = self.plog.listing_seen()
            if listing != self._pruned_at:
                self._pruned_at = listing
                for old_key in [k for k, r in self._runs.items() if r.segment.retired]:
                    del self._runs[old_key]
            while len(self._runs) > MAX_RUNS:
                self._runs.popitem(last=False)
        if not self.plog.is_active(segment):
            try:
                identity = segment.file_identity()  # (before any counting: a change after it is seen)
                saved = self.cache.load(self._cache_key(segment, start, end, identity))
            except VanishedError:
                return run  # the segment is gone: reads will say so
            with run.lock:
                if run.length == 0 and run.mapped_to == start:
                    run.identity = identity
                    if saved is not None:
                        run.load(saved, identity)
        return run

    def drop_changed(self, layout: list[tuple[SegmentRun, int]]) -> bool:
        """Forget the runs of closed segments whose file changed in place since they were mapped
        (identity: size, mtime, ctime), in memory and in the size cache; True when one was. A run
        mapped while its segment was active takes its identity now."""
        dropped = False
        for run, end in layout:
            if self.plog.is_active(run.segment):
                continue
            try:
                identity = run.segment.file_identity()
            except VanishedError:
                continue  # reads will say so
            with run.lock:
                if run.identity is None:
                    run.identity = identity
                    continue
                changed = identity != run.identity
            if changed and not self._renamed_only(run, end, identity):
                self.drop_stale(run, end, f"identity {run.identity} is now {identity}")
                dropped = True
        return dropped

    def _renamed_only(self, run: SegmentRun, end: int, identity: list[int]) -> bool:
        """Whether a file whose ctime alone changed still holds what `run` mapped; if so the run takes
        the new identity. A rename changes ctime (the log cleaner's .swap -> .log, a segment renamed
        .deleted), so does chmod; so does a rewrite whose mtime was put back (`cp -p`, `rsync -t
        --inplace`). Told apart by the file itself: every probe of the map reads as it did, and the
        segment counted afresh has the run's length and damage. Rare (a ctime that moved), and it
        reads the segment once; anything else that moved (inode, size, mtime) is another file."""
        if run.identity is None or identity[:4] != run.identity[:4]:
            return False
        try:
            if not all(run.probe_holds(i) for i in range(len(run.probe_positions))):
                return False
            fresh = SegmentRun(run.segment, run.start)
            count_into(fresh, self.counted(run.start, end, run.segment), end, None)
        except KfsError:
            return False
        if (fresh.length, fresh.error is None) != (run.length, run.error is None):
            return False
        with run.lock:
            run.identity = identity
        return True

    def check_unchanged(self, run: SegmentRun, end: int, entry: int | None = None) -> None:
        """Raise StaleMap (and forget the run) when `run`'s file changed in place since it was mapped:
        its identity, and (`entry`: a reader starting at that map entry) the entry's probe."""
        if run.identity is None or self.plog.is_active(run.segment):
            return
        identity = run.segment.file_identity()
        if identity != run.identity and not self._renamed_only(run, end, identity):
            reason = f"identity {run.identity} is now {identity}"
        elif entry is not None and not run.probe_holds(entry):
            reason = f"the batch at file position {run.probe_positions[entry]} changed"
        else:
            return
        self.drop_stale(run, end, reason)
        raise StaleMap(f"{run.segment.log_path}: segment changed in place since its decoded size was measured "
                       f"({reason}): reopen the file to read it as it is now")

    def drop_stale(self, run: SegmentRun, end: int, reason: str) -> None:
        log.warning("%s: segment changed in place (%s): its decoded size and seek map are counted again",
                    run.segment.log_path, reason)
        self.forget(run)
        with self._lock:
            self.generation += 1
        if run.identity is not None:
            self.cache.discard(self._cache_key(run.segment, run.start, end, run.identity))

    def forget(self, run: SegmentRun) -> None:
        with self._lock:
            if self._runs.get((id(run.segment), run.start)) is run:
                del self._runs[(id(run.segment), run.start)]

    def _cache_key(self, segment: LogSegment, start: int, end: int, identity: list[int]) -> dict:
        """Everything the bytes of a closed segment's run depend on (kfs.views.size_cache)."""
        aborted = self.plog.aborted_transactions().digest() if self.isolation == "read_committed" else None
        return {"file": identity, "topic": self.plog.topic, "partition": self.plog.partition,
                "start": start, "end": end, "isolation": self.isolation, "control": self.control,
                "decode": self.decode if self.decoder is not None else "plain", "aborted": aborted,
                "registry": self.registry_digest, "code": code_fingerprint()}

    def rendered(self, start: int, end: int, segment: LogSegment | None = None,
                 budget: list[int] | None = None) -> Iterator[BatchLines]:
        """The JSON lines a batch at a time (BatchLines) from `start` to `end` (kfs.views.batch_lines:
        from the batches' bytes, without the GIL, where it can); `segment`: from that segment object's
        file only (a run's own, see `counted`)."""
        if start >= end and segment is None:  # (a run's own segment is walked even then: see counted)
            return
        yield from line_lists(self.plog, start, end, isolation=self.isolation, control=self.control,
                              prefix=self.prefix, render=self.render, fused=self.countable, own_segment=segment,
                              budget=budget, decoded=self.walker_decoding)

    def counted(self, start: int, end: int, segment: LogSegment | None = None) -> Iterator:
        """The lines' lengths per batch; `segment`: a run's own segment object. A run is counted and
        rendered from the file it maps, never through the partition's current listing: after a
        cleaner swap that holds the cleaned file, and the old file's positions and offsets applied to
        it gave cut lines and lost records (found by tests/soak). A run's segment is walked even
        when it can hold no record of the view (a segment whose first batch is damaged ends the log
        there): damage in it is still met."""
        return counted_batches(self.plog, start, end, isolation=self.isolation, control=self.control,
                               prefix=self.prefix, render=self.render, countable=self.countable, own_segment=segment,
                               decoded=self.walker_decoding)

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
                if run.identity is None:  # (mapped while active)
                    run.identity = run.segment.file_identity()
                run.take_probes()
                key = self._cache_key(run.segment, run.start, end, run.identity)
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
    runs: RunFiles

    def extends(self, earlier: Measure) -> bool:
        return (self.start == earlier.start and self.size >= earlier.size and len(self.runs) >= len(earlier.runs)
                and all(same_file(a, b) for a, b in zip(self.runs, earlier.runs, strict=False)))


class DecodedView:
    """`offset/<start>.jsonl`: every record from `start` to the log end, one JSON line each;
    `messages.jsonl` (start None) from the log start as it is at each use."""

    def __init__(self, log: DecodedLog, start_offset: int | None) -> None:
        self.log = log
        self._start = start_offset
        # (start, log start, listing), the layout made for them, and its RunFiles (start_layout_and_files)
        self._kept_layout: tuple[tuple[int, int, int, int], list[tuple[SegmentRun, int]], RunFiles] | None = None

    @property
    def start(self) -> int:
        return self._start if self._start is not None else self.log.plog.log_start_offset()

    def layout(self, start: int | None = None) -> list[tuple[SegmentRun, int]]:
        """The runs of this view (whole segments, the first from the log start) and the offset each
        ends at (the next segment's base, or the log end); from the segment holding `start`, for a
        reader already there, whom the runs before do not concern."""
        return self.start_and_layout(start)[1]

    def start_and_layout(self, start: int | None = None) -> tuple[int, list[tuple[SegmentRun, int]]]:
        """The view's start (`start` if given) and `layout(start)`."""
        start, layout, _ = self.start_layout_and_files(start)
        return start, layout

    def start_layout_and_files(self, start: int | None = None
                               ) -> tuple[int, list[tuple[SegmentRun, int]], RunFiles]:
        """The view's start (`start` if given), `layout(start)`, and each run's (base offset, inode,
        start): what a cursor compares with the files it read before.

        A cursor asks for these at every read, so they are kept from one read to the next while the
        partition's listing (kfs.storage.segments: its generation), the log start and `start` stay
        the same; only the last run, whose end follows the log end, is made again. Built afresh at
        each read, they cost a walk over every segment of the partition: with 255 segments, 1.75 ms
        of Python per 1 MiB read, more than rendering it. The log start checkpoint and each file's
        size are taken once per call (one_lookup): each stat and fstat let the GIL go to another
        thread and waited to get it back."""
        plog = self.log.plog
        with one_lookup():
            log_start = plog.log_start_offset()
            if start is None:
                start = self._start if self._start is not None else log_start
            listing = plog.listing()
            key = (start, log_start, listing, self.log.generation)
            kept = self._kept_layout
            if kept is not None and kept[0] == key:
                layout = list(kept[1])
                layout[-1] = self._last_run(layout[-1][0].segment, layout[-1][0].start)
                return start, layout, kept[2]
            first = plog.floor_segment(start)
            if first is None and not plog.segments():
                return start, [], self.log.registry_entry  # a partition directory with no segment yet: an empty log
            if first is None:
                raise VanishedError(f"{plog.name}: the segment holding offset {start} is gone")
            segments = [first]
            following = plog.higher_segment(first.base_offset)
            while following is not None:
                segments.append(following)
                following = plog.higher_segment(following.base_offset)
            layout = [(self.log.run(segment, max(segment.base_offset, log_start), following.base_offset),
                       following.base_offset) for segment, following in pairwise(segments)]
            layout.append(self._last_run(segments[-1], max(segments[-1].base_offset, log_start)))
            files = self.log.registry_entry + run_files(layout)
            if plog.listing() == listing:  # (not a listing that changed while this one was made)
                self._kept_layout = (key, layout, files)
        return start, list(layout), files

    def _last_run(self, segment: LogSegment, run_start: int) -> tuple[SegmentRun, int]:
        """The run of the partition's last segment, to the log end now."""
        end = max(self.log.plog.log_end_offset(), run_start)
        run = self.log.run(segment, run_start, end)
        if run.file_end > segment.valid_size():
            self.log.forget(run)  # the active segment was truncated (a new leader): count afresh
            run = self.log.run(segment, run_start, end)
        return run, end

    def mapped_layout(self, start: int | None = None, pace: Pace | None = None) -> list[tuple[SegmentRun, int]]:
        """The layout with every run mapped to its end: what a size needs (with progress in the log
        when that takes more than a second); `pace`: the background scan's (kfs.views.pacing)."""
        layout = self.layout(start)
        missing = [(run, end) for run, end in layout if not run.complete(end)]
        if missing:
            progress = MappingProgress(self.log.plog.name, sum(run.segment.valid_size() for run, _ in missing), pace)
            if len(missing) == 1 or MAPPING_THREADS < 2 or progress.total < PARALLEL_MIN_BYTES * len(missing):
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
        if run.error is not None and start >= run.damaged_at:
            return run.length  # (the view starts past the damage: at its unreadable byte)
        try:
            skip = position + self._lengths_before(offset, start, run.segment)
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

    def _lengths_before(self, offset: int, start: int, segment: LogSegment) -> int:
        """The lines' length of the records from `offset` to `start` in `segment`. The walk stops once
        every record below `start` is counted: damage after them is not this view's start."""
        total = 0
        for batch in self.log.counted(offset, start, segment):
            if batch.parts is not None:
                for first_offset, next_offset, length, _ in iter_unpack("=qqqq", batch.parts):
                    if first_offset < start:
                        total += length
                    if next_offset >= start:
                        return total
            else:
                total += batch.length
                if batch.next_offset >= start:
                    return total
        return total

    def size(self, pace: Pace | None = None) -> int:
        """The exact length of the view now: every run mapped (from the cache, or counted)."""
        return self.measured(pace).size

    def measured(self, pace: Pace | None = None) -> Measure:
        """The exact length now, and what it was measured over (see `Measure`)."""
        start = self.start
        layout = self.mapped_layout(start, pace)
        if self.log.drop_changed(layout):  # a segment rewritten in place: counted again, never the old map
            layout = self.mapped_layout(start, pace)
        return Measure(sum(run.span() for run, _ in layout) - self.skip(layout, start), start,
                       self.log.registry_entry + run_files(layout))

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
