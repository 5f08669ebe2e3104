"""Decoded views (`offset/<N>.jsonl`, `time/<T>.jsonl`, `messages.jsonl`) as files with sizes and seeks.

A decoded view is the JSON lines (`kfs.views.jsonl`) of a partition's records from a start offset to
the log end. Shell tools want a file: `tail -n` seeks to st_size and reads backwards, `dd skip=`
and `less` seek anywhere, `cat`/`head`/`grep`/`wc`/`jq`/`cp` read forward until EOF. Two things are
needed: the byte position of a record in the decoded stream, and the stream's length.

**The seek map** applies Kafka's sparse offset index to the decoded stream. The stream is cut
into *runs*, one per segment (the first run starts at the view's start offset, inside its
segment; later runs are whole segments and are shared by every view). A run remembers, every
`MAP_INTERVAL` decoded bytes, the pair (decoded position, offset of the record starting there),
like `OffsetIndex` remembers (offset, file position) every `index.interval.bytes`. A read at
position p bisects for the entry at or before p and decodes from that record: one batch plus at
most `MAP_INTERVAL` bytes of rendering. Maps grow as a by-product of reading (a `cat` builds the
map of everything it reads at no extra cost) or when a size is asked for. A run of a closed
segment is immutable and kept (LRU); the active segment's run is extended with new batches.

**Sizes: exact when known, never guessed.** The length of a decoded stream is only known after
rendering every record in it; for a huge partition that is minutes of work, and a stat must not
cost that (`ls -l`, `find`, a shell's completion, `cat`'s own fstat would trigger it).
So `DecodedView.size(budget)` returns the exact size when the maps already cover the view or
when mapping the rest costs at most `budget` raw bytes of decoding (small partitions, and every
view after a first full read), and None otherwise. The FUSE layer then reports st_size 0 and
opens the file `direct_io`: the kernel sends every read to us instead of trusting the size, as
for /proc files. Measured with real tools on such files (tests/test_fuse_tools.py, mount option
size_budget=0): `cat`, `head`, `grep`, `wc -l`, `wc -c`, `jq`, `cp` (copy_file_range: EXDEV,
then read), `less` read to EOF and give the right bytes; `tail -n`/`tail -c` see size 0 and
read the whole stream (what computing the size would have cost anyway); `dd skip=` seeks (it
only clamps skips against a positive st_size). Not covered: sendfile/splice readers, which stop
at the kernel's i_size (Python's shutil.copyfile copies nothing; `cp` is fine). We tried the
file nonseekable while its size is unknown (sendfile then fails and Python falls back to
read), but `head -n` then exits 1 with "cannot seek" after printing the right lines, and head
is a listed tool, so the size-0 file stays seekable.
With an exact size every tool seeks as on a disk file. Reading the first line of any decoded
view costs one batch. Decoded files are always `direct_io`: the kernel then sends the tool's
read sizes (head asks for 8 KiB, not a 256 KiB readahead), and a growing partition's new lines
are readable past a stale cached size, which is what `tail -f` needs.
"""

from __future__ import annotations

import threading
from array import array
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Iterator
from itertools import accumulate

from kfs.internal.lines import line_decoder
from kfs.storage import LogSegment, PartitionLog
from kfs.views.jsonl import line_prefix, render_line_list

MAP_INTERVAL = 32 * 1024  # decoded bytes between seek-map entries (cf. index.interval.bytes)
MAX_RUNS = 4096  # runs kept per decoded log (LRU); a run of a 1 GiB segment maps in ~1 MB
RESUME_SLACK = 2 * MAP_INTERVAL  # a cursor this close behind a read skips forward instead of seeking
# Raw bytes a stat may decode to give an exact size: ~0.1-0.3 s at the measured 150-250k records/s.
# Past it a view is a stream of unknown size until read once (mount option size_budget=BYTES).
DEFAULT_SIZE_BUDGET = 8 << 20


class SegmentRun:
    """The decoded bytes of one segment's records from `start` on, with its sparse seek map.

    Invariant: every record with offset < `mapped_to` (from `start`) is counted in `length`, and
    `positions[i]` is where the record at `offsets[i]` starts.
    """

    __slots__ = ("length", "lock", "mapped_to", "offsets", "positions", "segment", "start")

    def __init__(self, segment: LogSegment, start: int) -> None:
        self.segment = segment
        self.start = start
        self.positions = array("q", [0])
        self.offsets = array("q", [start])
        self.length = 0
        self.mapped_to = start
        self.lock = threading.Lock()

    def entry_at_or_before(self, position: int) -> tuple[int, int]:
        i = bisect_right(self.positions, position) - 1
        return self.positions[i], self.offsets[i]

    def commit(self, positions: list[int], offsets: list[int], position: int, exhausted: bool, end: int) -> None:
        """A reader rendered, from the frontier, the records `offsets` at `positions`, and its lines
        end at `position`; `exhausted`: nothing else below `end`. Extend the map if it is still the
        frontier (another reader may have got there first: then this is a no-op)."""
        with self.lock:
            if positions:
                if positions[0] != self.length or offsets[0] < self.mapped_to:
                    return
                last = self.positions[-1]
                for p, o in zip(positions, offsets, strict=True):
                    if p - last >= MAP_INTERVAL:
                        self.positions.append(p)
                        self.offsets.append(o)
                        last = p
                self.length = position
                self.mapped_to = offsets[-1] + 1
            elif position != self.length:
                return
            if exhausted and end > self.mapped_to:
                self.mapped_to = end


class DecodedLog:
    """The decoded stream of one partition under one isolation/control/decode setting, and its run maps.

    `decode`: "auto" shows Kafka's internal topics decoded (SPEC section 8), "raw" as bytes."""

    def __init__(self, plog: PartitionLog, isolation: str = "read_uncommitted", control: str = "hide",
                 decode: str = "auto") -> None:
        self.plog = plog
        self.isolation = isolation
        self.control = control
        self.decode = decode
        self.prefix = line_prefix(plog.topic, plog.partition)
        self.decoder = line_decoder(plog.topic, decode)
        self._runs: OrderedDict[tuple[int, int], SegmentRun] = OrderedDict()
        self._lock = threading.Lock()

    def view(self, start_offset: int) -> DecodedView:
        return DecodedView(self, start_offset)

    def run(self, segment: LogSegment, start: int) -> SegmentRun:
        # Keyed by the segment object: the storage layer makes a new one when a segment file is
        # replaced (log cleaner swap), and holding it in the run keeps its id from being reused.
        key = (id(segment), start)
        with self._lock:
            run = self._runs.get(key)
            if run is None or run.segment is not segment:
                run = self._runs[key] = SegmentRun(segment, start)
                while len(self._runs) > MAX_RUNS:
                    self._runs.popitem(last=False)
            else:
                self._runs.move_to_end(key)
            return run

    def rendered(self, start: int, end: int) -> Iterator[tuple[list[int], list[bytes]]]:
        """(offsets, JSON lines) a batch at a time from `start` to `end` (rendered compiled when built)."""
        if start >= end:
            return
        prefix, decoder = self.prefix, self.decoder
        for records in self.plog.record_lists(start, isolation=self.isolation, control=self.control,
                                              end_offset=end):
            yield [r.offset for r in records], render_line_list(prefix, records, decoder)


class DecodedView:
    """`offset/<start>.jsonl`: every record from `start` to the log end, one JSON line each."""

    def __init__(self, log: DecodedLog, start_offset: int) -> None:
        self.log = log
        self.start = start_offset

    def layout(self) -> list[tuple[SegmentRun, int]]:
        """The runs of this view and the offset each ends at (the next segment's base, or the log end)."""
        plog = self.log.plog
        first = plog.floor_segment(self.start)
        if first is None and not plog.segments():
            return []  # a partition directory with no segment yet: an empty log
        if first is None:
            from kfs.storage import VanishedError
            raise VanishedError(f"{plog.name}: the segment holding offset {self.start} is gone")
        segments = [first]
        following = plog.higher_segment(first.base_offset)
        while following is not None:
            segments.append(following)
            following = plog.higher_segment(following.base_offset)
        log_end = plog.log_end_offset()
        layout = []
        for i, segment in enumerate(segments):
            start = self.start if i == 0 else segment.base_offset
            end = segments[i + 1].base_offset if i + 1 < len(segments) else max(log_end, start)
            layout.append((self.log.run(segment, start), end))
        return layout

    def known_size(self, layout: list[tuple[SegmentRun, int]] | None = None) -> int | None:
        total = 0
        for run, end in layout or self.layout():
            if run.mapped_to < end:
                return None
            total += run.length
        return total

    def size(self, budget: int) -> int | None:
        """The exact size, mapping what is missing if that costs at most `budget` raw bytes; else None."""
        layout = self.layout()
        known = self.known_size(layout)
        if known is not None:
            return known
        missing = 0
        for run, end in layout:
            if run.mapped_to < end:
                missing += self._unmapped_bytes(run)
                if missing > budget:
                    return None
        for run, end in layout:
            self._extend(run, end)
        return self.known_size(layout)

    def _unmapped_bytes(self, run: SegmentRun) -> int:
        size = run.segment.valid_size()
        try:
            position = self.log.plog.locate_offset(run.mapped_to, with_record=False).position
        except Exception:  # at the log end, or outside it: nothing left to map here
            return 0
        return max(0, size - position) if position < size else 0

    def _extend(self, run: SegmentRun, end: int) -> None:
        """Map `run` up to `end` by rendering and counting the unmapped records."""
        with run.lock:
            start, position = run.mapped_to, run.length
        positions: list[int] = []
        offsets: list[int] = []
        for chunk_offsets, lines in self.log.rendered(start, end):
            starts = list(accumulate(map(len, lines), initial=position))
            positions += starts[:-1]
            offsets += chunk_offsets
            position = starts[-1]
        run.commit(positions, offsets, position, True, end)

    def cursor(self) -> Cursor:
        return Cursor(self)


class Cursor:
    """A reader's position in a view (one per open file): sequential reads continue the decoding
    where the last one stopped; other reads seek through the run maps."""

    def __init__(self, view: DecodedView) -> None:
        self.view = view
        self.lock = threading.Lock()
        self._run: SegmentRun | None = None
        self._end = 0
        self._chunks: Iterator[tuple[list[int], list[bytes]]] = iter(())
        self._buf = b""  # the rendered batch the cursor is in ...
        self._buf_position = 0  # ... and where it starts in the run

    def read(self, position: int, size: int) -> bytes:
        """Up to `size` bytes at `position`; fewer only at the end of the stream, or before a
        corrupt batch or a vanished segment: the read that starts there raises the error."""
        out: list[bytes] = []
        with self.lock:
            try:
                self._read_into(out, position, size)
            except Exception:
                self._run = None  # start afresh: the next read meets the error again
                if not out:
                    raise
        return b"".join(out)

    def _read_into(self, out: list[bytes], local: int, wanted: int) -> None:
        for run, end in self.view.layout():
            if run.mapped_to >= end and local >= run.length:
                local -= run.length
                continue
            served = self._serve(run, end, local, wanted, out)
            if served:
                wanted -= served
                local = 0
                if wanted <= 0:
                    return
                continue
            if run.mapped_to < end:
                return  # (cannot happen: a run read to its end is complete)
            local -= run.length  # the run ended before `local`: it is complete now

    def _serve(self, run: SegmentRun, end: int, local: int, wanted: int, out: list[bytes]) -> int:
        """Append up to `wanted` bytes of `run` from `local` to `out`; return how many.

        Works a batch at a time: the batch's lines are rendered in one call and joined, their
        starts summed in C; the map takes the starts it needs at the frontier.
        """
        log = self.view.log
        buf_end = self._buf_position + len(self._buf)
        if not (self._run is run and self._end == end and self._buf_position <= local
                and local - buf_end <= RESUME_SLACK):
            position, offset = run.entry_at_or_before(local)
            self._run, self._end = run, end
            self._chunks = log.rendered(offset, end)
            self._buf, self._buf_position = b"", position
            buf_end = position
        served = 0
        if local < buf_end:  # the rest of the batch the last read stopped in
            piece = self._buf[local - self._buf_position:local - self._buf_position + wanted]
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
            for chunk_offsets, lines in self._chunks:
                starts = list(accumulate(map(len, lines), initial=position))
                if frontier:
                    positions += starts[:-1]
                    offsets += chunk_offsets
                elif starts[0] <= frontier_at < starts[-1] or frontier_at == starts[0]:
                    i = bisect_left(starts, frontier_at)
                    if starts[i] == frontier_at and i < len(chunk_offsets) and chunk_offsets[i] >= mapped_to:
                        frontier = True
                        positions += starts[i:-1]
                        offsets += chunk_offsets[i:]
                data, data_position = b"".join(lines), position
                position = starts[-1]
                if position <= local:
                    continue  # before the read (after a seek to a map entry)
                piece = data[local - data_position:local - data_position + wanted - served]
                out.append(piece)
                served += len(piece)
                local += len(piece)
                if served >= wanted:
                    exhausted = False
                    break
        except Exception:
            if frontier and positions:  # what was rendered before the error is mapped correctly
                run.commit(positions, offsets, position, False, end)
            raise
        self._buf, self._buf_position = data, data_position
        if frontier:
            run.commit(positions, offsets, position, exhausted, end)
        return served
