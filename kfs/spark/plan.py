"""Planning a read: which offsets of which partitions, cut into splits (Spark tasks).

Pure Python over `kfs.storage`; no Spark here, so tests and the benchmark can inspect a plan.

A split is cut only where a reader can start cheaply and exactly: at a segment's base offset
(position 0) or at an offset-index entry `(o, p)` (Kafka writes `o` = the last offset of the
append whose first batch starts at `p`, so `plog.records(o)` resumes at byte `p` after a lookup and
a scan of at most one append). Offset ranges, from options or pushed filters, become byte ranges
through the same index, and a timestamp lower bound becomes an offset lower bound through
ListOffsets (`plog.locate_time`): every record before the offset it answers has an older
timestamp, because each time-index entry holds the largest timestamp so far. Splits that cannot
hold a matching record are therefore never planned, hence never read. (A timestamp upper bound
prunes nothing: Kafka timestamps need not grow with offsets, and no index bounds them from below.)
"""

from __future__ import annotations

import bisect
import itertools
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from kfs.spark.options import EARLIEST, LATEST, OptionError, ReadOptions, parse_options
from kfs.storage import LogDirs, LogSegment, PartitionLog, TimestampNotFound

# Below this a task costs more than it saves (Spark's spark.sql.files.openCostInBytes is the same).
MIN_SPLIT_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class Bounds:
    """What pushed-down filters allow (all AND-ed). `None` means unconstrained."""

    offset_lo: int | None = None     # offset >= offset_lo
    offset_hi: int | None = None     # offset < offset_hi
    timestamp_lo: int | None = None  # timestamp >= timestamp_lo (ms): a lower bound only
    topics: frozenset[str] | None = None
    partitions: frozenset[int] | None = None

    def admits(self, topic: str, partition: int) -> bool:
        return ((self.topics is None or topic in self.topics)
                and (self.partitions is None or partition in self.partitions))


@dataclass(frozen=True)
class Piece:
    """Records `start_offset <= offset < end_offset` of one partition, read in offset order.

    `segment_base_offset` / `start_position` say where reading begins (an index entry or a segment
    start); `size` is the byte estimate used to balance splits. `log_dir` is the absolute path of
    the log dir the partition was planned from: the task opens that copy and no other (another log
    dir may hold a replica of the same name), and a relative path given to the driver means the
    driver's working directory wherever the task runs (`kfs.spark.tasks`).
    """

    partition_name: str
    topic: str
    partition: int
    start_offset: int
    end_offset: int
    segment_base_offset: int
    start_position: int
    size: int
    log_dir: str


@dataclass(frozen=True)
class Split:
    """One Spark task: one or more pieces (small segments of several partitions are packed)."""

    index: int
    pieces: tuple[Piece, ...] = field(default_factory=tuple)

    @property
    def size(self) -> int:
        return sum(p.size for p in self.pieces)

    def segments(self) -> list[tuple[str, int]]:
        """(partition, segment base offset) where each piece starts reading; for tests and logs."""
        return [(p.partition_name, p.segment_base_offset) for p in self.pieces]


def _clamp(offset: int, lso: int, leo: int) -> int:
    return min(max(offset, lso), leo)


def offset_range(plog: PartitionLog, opts: ReadOptions, bounds: Bounds) -> tuple[int, int]:
    """The partition's `[start, end)` under the options and the pushed bounds (start >= end: empty)."""
    lso, leo = plog.log_start_offset(), plog.log_end_offset()
    topic, partition = plog.topic, plog.partition

    start_ts = opts.starting_timestamp.for_partition(topic, partition) if opts.starting_timestamp else None
    if start_ts is not None:
        try:
            start = plog.offset_for_time(start_ts)
        except TimestampNotFound:
            if not opts.no_match_starting_latest:
                # KafkaOffsetReaderAdmin: "No offset matched from request of topic-partition ..."
                raise OptionError(f"no record of {plog.name} has a timestamp at or after {start_ts} "
                                  "(startingOffsetsByTimestampStrategy=latest starts such partitions "
                                  "at their end)") from None
            start = leo
    else:
        wanted = opts.starting_offsets.for_partition(topic, partition)
        start = lso if wanted == EARLIEST else leo if wanted == LATEST else wanted

    end_ts = opts.ending_timestamp.for_partition(topic, partition) if opts.ending_timestamp else None
    if end_ts is not None:
        try:
            end = plog.offset_for_time(end_ts)
        except TimestampNotFound:
            end = leo  # as Spark: no record that new, so the end is the latest offset
    else:
        wanted = opts.ending_offsets.for_partition(topic, partition)
        end = leo if wanted == LATEST else lso if wanted == EARLIEST else wanted

    start, end = _clamp(start, lso, leo), _clamp(end, lso, leo)
    if bounds.offset_lo is not None:
        start = max(start, bounds.offset_lo)
    if bounds.offset_hi is not None:
        end = min(end, bounds.offset_hi)
    if bounds.timestamp_lo is not None and start < end:
        try:
            start = max(start, plog.offset_for_time(bounds.timestamp_lo))
        except TimestampNotFound:
            return leo, leo
    return start, end


def segment_size(segment: LogSegment) -> int:
    """Bytes of complete batches (API.md's `LogSegment.size`)."""
    size = getattr(segment, "size", None)
    return size if isinstance(size, int) else segment.valid_size()


def _index_entries(segment: LogSegment) -> tuple[list[int], list[int]]:
    """The offset index as two increasing lists; entries out of order (a damaged index) are dropped."""
    size = segment_size(segment)
    offsets: list[int] = []
    positions: list[int] = []
    for offset, position in segment.offset_index_entries():
        if (not offsets or (offset > offsets[-1] and position > positions[-1])) and position <= size:
            offsets.append(offset)
            positions.append(position)
    return offsets, positions


@dataclass
class _Span:
    """The part of `[start, end)` in one segment, with the byte range reading it covers."""

    plog: PartitionLog
    segment: LogSegment
    lo: int
    hi: int
    lo_pos: int
    hi_pos: int
    entries: tuple[list[int], list[int]] | None  # the offset index, when it was needed already

    @property
    def size(self) -> int:
        return max(self.hi_pos - self.lo_pos, 0)


def _spans(plog: PartitionLog, start: int, end: int) -> list[_Span]:
    spans: list[_Span] = []
    segments = plog.segments()
    for i, segment in enumerate(segments):
        seg_lo = segment.base_offset
        seg_hi = segments[i + 1].base_offset if i + 1 < len(segments) else end
        lo, hi = max(start, seg_lo), min(end, seg_hi)
        if lo >= hi:
            continue
        size = segment_size(segment)
        if lo == seg_lo and hi == seg_hi:
            spans.append(_Span(plog, segment, lo, hi, 0, size, None))
            continue
        offsets, positions = _index_entries(segment)
        # Reading from `lo` starts at the floor entry (Kafka's OffsetIndex.lookup); reading up to `hi`
        # ends, at the latest, where the first entry at or past `hi` starts.
        k = bisect.bisect_right(offsets, lo) - 1
        lo_pos = positions[k] if lo > seg_lo and k >= 0 else 0
        k = bisect.bisect_left(offsets, hi)
        hi_pos = positions[k] if hi < seg_hi and k < len(offsets) else size
        spans.append(_Span(plog, segment, lo, hi, lo_pos, hi_pos, (offsets, positions)))
    return spans


def _cut(span: _Span, done: float, per: float) -> list[Piece]:
    """Cut a span where the running byte count crosses a multiple of `per`, each cut moved forward
    to the next offset-index entry (the only places a reader can start exactly and cheaply)."""
    plog, seg_lo = span.plog, span.segment.base_offset
    cuts = [(span.lo, span.lo_pos)]
    wanted = (math.floor(done / per) + 1) * per  # the next global cut, in bytes from the start
    if wanted < done + span.size:
        offsets, positions = span.entries or _index_entries(span.segment)
        while wanted < done + span.size:
            k = bisect.bisect_left(positions, span.lo_pos + (wanted - done))
            if k >= len(offsets) or positions[k] >= span.hi_pos or offsets[k] >= span.hi:
                break
            if offsets[k] > cuts[-1][0]:
                cuts.append((offsets[k], positions[k]))
            # the next multiple of `per` past this entry (several may fall between two entries)
            wanted = max(wanted + per, (math.floor((done + positions[k] - span.lo_pos) / per) + 1) * per)
    cuts.append((span.hi, span.hi_pos))
    log_dir = os.path.dirname(os.path.abspath(plog.path))
    return [Piece(plog.name, plog.topic, plog.partition, a, b, seg_lo, a_pos, max(b_pos - a_pos, 0), log_dir)
            for (a, a_pos), (b, b_pos) in itertools.pairwise(cuts)]


def _pack(pieces: list[Piece], count: int) -> list[Split]:
    """Consecutive pieces into `count` splits of about equal bytes (a piece goes to the split its
    middle byte falls in); contiguous pieces of a partition merge into one read."""
    total = sum(p.size for p in pieces)
    per = total / count if total else 1.0
    groups: list[list[Piece]] = []
    current_group = -1
    done = 0
    for piece in pieces:
        group = min(count - 1, int((done + piece.size / 2) / per))
        done += piece.size
        if group > current_group or not groups:
            groups.append([piece])
            current_group = max(group, current_group)
            continue
        last = groups[-1][-1]
        if (last.partition_name, last.end_offset) == (piece.partition_name, piece.start_offset):
            groups[-1][-1] = Piece(last.partition_name, last.topic, last.partition, last.start_offset,
                                   piece.end_offset, last.segment_base_offset, last.start_position,
                                   last.size + piece.size, last.log_dir)
        else:
            groups[-1].append(piece)
    return [Split(i, tuple(g)) for i, g in enumerate(groups)]


def split_count(total: int, opts: ReadOptions) -> int:
    """How many tasks: enough for `maxSplitBytes`, at least `minPartitions`, and with the session's
    parallelism known (`register`), whole waves of at least `MIN_SPLIT_BYTES` each, so that no core
    idles through a last, half-empty wave (7 tasks on 2 cores take as long as 8)."""
    count = max(1, math.ceil(total / opts.max_split_bytes))
    if opts.min_partitions:
        count = max(count, opts.min_partitions)
    cores = opts.parallelism
    if cores and cores > 1:
        count = max(count, min(cores, total // MIN_SPLIT_BYTES))
        if count > 1:
            count = math.ceil(count / cores) * cores
    return count


def plan_splits(options: Mapping[str, str] | ReadOptions, bounds: Bounds | None = None,
                dirs: LogDirs | None = None) -> list[Split]:
    """The splits a read with these options (and pushed filters) runs; only these are ever read."""
    opts = options if isinstance(options, ReadOptions) else parse_options(options)
    bounds = bounds or Bounds()
    dirs = dirs or LogDirs(list(opts.logdirs))
    ranges: list[tuple[PartitionLog, int, int]] = []
    for name in dirs.partition_names():
        plog = dirs.partition(name)
        if not (opts.wants(plog.topic, plog.partition) and bounds.admits(plog.topic, plog.partition)):
            continue
        start, end = offset_range(plog, opts, bounds)
        if start < end:
            ranges.append((plog, start, end))

    # Splits balance bytes, which is what costs (Spark's Kafka source divides offset ranges for
    # minPartitions): the bytes to read, laid end to end, are cut every `total / count` bytes.
    spans = [span for plog, start, end in ranges for span in _spans(plog, start, end)]
    total = sum(span.size for span in spans)
    count = split_count(total, opts)
    per = max(total / count, 1.0)
    pieces: list[Piece] = []
    done = 0.0
    for span in spans:
        pieces.extend(_cut(span, done, per))
        done += span.size
    return _pack(pieces, count) if pieces else []
