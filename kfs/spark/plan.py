"""Planning a read: which offsets of which partitions, cut into splits (Spark tasks).

Pure Python over `kfs.storage`; no Spark here, so tests and the benchmark can inspect a plan.

A split is cut only where a reader can start cheaply and exactly: at a segment's base offset
(position 0) or at an offset-index entry `(o, p)` (Kafka writes `o` = the last offset of the
append whose first batch starts at `p`, so `plog.records(o)` resumes at byte `p` after a lookup and
a scan of at most one append). Offset ranges, from options or pushed filters, become byte ranges
through the same index, and a timestamp lower bound becomes an offset lower bound through
ListOffsets (`plog.locate_time`): every record before the offset it answers has an older
timestamp, because each time-index entry holds the largest timestamp so far. Splits that cannot
hold a matching record are therefore never planned, hence never read.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kfs.spark.options import EARLIEST, LATEST, OptionError, ReadOptions, parse_options
from kfs.storage import LogDirs, PartitionLog, TimestampNotFound


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
    start); `size` is the byte estimate used to balance splits.
    """

    partition_name: str
    topic: str
    partition: int
    start_offset: int
    end_offset: int
    segment_base_offset: int
    start_position: int
    size: int


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
            start = plog.locate_time(start_ts).offset
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
            end = plog.locate_time(end_ts).offset
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
            start = max(start, plog.locate_time(bounds.timestamp_lo).offset)
        except TimestampNotFound:
            return leo, leo
    return start, end


def segment_size(segment) -> int:
    """Bytes of complete batches (API.md's `LogSegment.size`)."""
    size = getattr(segment, "size", None)
    return size if isinstance(size, int) else segment.valid_size()


def _index_entries(segment) -> tuple[list[int], list[int]]:
    """The offset index as two increasing lists; entries out of order (a damaged index) are dropped."""
    size = segment_size(segment)
    offsets: list[int] = []
    positions: list[int] = []
    for offset, position in segment.offset_index_entries():
        if (not offsets or (offset > offsets[-1] and position > positions[-1])) and position <= size:
            offsets.append(offset)
            positions.append(position)
    return offsets, positions


def _pieces(plog: PartitionLog, start: int, end: int, target: int) -> list[Piece]:
    """`[start, end)` cut at segment starts, and inside big segments at index entries ~`target` apart."""
    pieces: list[Piece] = []
    segments = plog.segments()
    for i, segment in enumerate(segments):
        seg_lo = segment.base_offset
        seg_hi = segments[i + 1].base_offset if i + 1 < len(segments) else end
        lo, hi = max(start, seg_lo), min(end, seg_hi)
        if lo >= hi:
            continue
        size = segment_size(segment)
        if lo == seg_lo and hi == seg_hi and size <= target:
            pieces.append(Piece(plog.name, plog.topic, plog.partition, lo, hi, seg_lo, 0, size))
            continue
        offsets, positions = _index_entries(segment)
        # Reading from `lo` starts at the floor entry (Kafka's OffsetIndex.lookup); reading up to `hi`
        # ends, at the latest, where the first entry at or past `hi` starts.
        k = bisect.bisect_right(offsets, lo) - 1
        lo_pos = positions[k] if lo > seg_lo and k >= 0 else 0
        k = bisect.bisect_left(offsets, hi)
        hi_pos = positions[k] if hi < seg_hi and k < len(offsets) else size
        cuts = [(lo, lo_pos)]
        count = math.ceil((hi_pos - lo_pos) / target)
        for n in range(1, count):
            k = bisect.bisect_left(positions, lo_pos + n * (hi_pos - lo_pos) // count)
            if k < len(offsets) and cuts[-1][0] < offsets[k] < hi and positions[k] < hi_pos:
                cuts.append((offsets[k], positions[k]))
        cuts.append((hi, hi_pos))
        for (a, a_pos), (b, b_pos) in itertools.pairwise(cuts):
            pieces.append(Piece(plog.name, plog.topic, plog.partition, a, b, seg_lo, a_pos,
                                max(b_pos - a_pos, 0)))
    return pieces


def _pack(pieces: Iterable[Piece], target: int) -> list[Split]:
    """Consecutive pieces into splits of up to `target` bytes; contiguous pieces of a partition merge."""
    groups: list[list[Piece]] = []
    current: list[Piece] = []
    current_size = 0
    for piece in pieces:
        if current and current_size + piece.size > target:
            groups.append(current)
            current, current_size = [], 0
        last = current[-1] if current else None
        contiguous = last is not None and (last.partition_name, last.end_offset) == (
            piece.partition_name, piece.start_offset)
        if last is not None and contiguous:
            current[-1] = Piece(last.partition_name, last.topic, last.partition, last.start_offset,
                                piece.end_offset, last.segment_base_offset, last.start_position,
                                last.size + piece.size)
        else:
            current.append(piece)
        current_size += piece.size
    if current:
        groups.append(current)
    return [Split(i, tuple(g)) for i, g in enumerate(groups)]


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

    # Size per split: maxSplitBytes, smaller when minPartitions asks for more tasks (as Spark's
    # Kafka source divides offset ranges for minPartitions, but by bytes, which is what costs).
    pieces = [p for plog, start, end in ranges for p in _pieces(plog, start, end, opts.max_split_bytes)]
    target = opts.max_split_bytes
    if opts.min_partitions:
        total = sum(p.size for p in pieces)
        target = max(1, min(target, math.ceil(total / opts.min_partitions)))
        pieces = [p for plog, start, end in ranges for p in _pieces(plog, start, end, target)]
    return _pack(pieces, target)
