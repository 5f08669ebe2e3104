"""When a closed segment is damaged: the rules by which kfs tells a truncated or cut-short log
from a healthy one, so that missing records are never silently skipped.

Rule 1, always applied: a closed segment's complete batches end exactly at its file's end.
Kafka trims a segment's file to its last batch when the segment stops being the active one
(`LogSegment.onBecomeInactiveSegment` -> `FileRecords.trim`, which also drops a preallocated
tail), and the cleaner writes cleaned segments whole. So a closed segment that ends inside a
batch, or has bytes (zeros, garbage) after its last complete batch, was damaged after Kafka
wrote it. Only the active (last) segment may end in a half-written batch: the broker is writing it.

Rule 2, applied only where it is sound: a closed segment's batches end at the offset just
before the next segment's base offset. Kafka rolls a new segment at the next offset to be
appended, so in a log that was never compacted consecutive segments are contiguous, and a
gap means batches are missing (a segment cut at a batch boundary). Compaction legitimately
leaves such gaps (the cleaner drops whole batches, `LogCleaner`'s `filterTo` with
`BatchRetention.DELETE_EMPTY`), so the rule is applied only to segments the cleaner cannot have
touched: the log dir has a `cleaner-offset-checkpoint` (the broker creates it at startup) and
the segment starts at or after the partition's entry there (0 when not listed). Where that file
is missing (a copy without it), the topic's configs in the KRaft metadata log among the log dirs may
say the topic was never compacted (kfs.storage.topic_configs: cleanup.policy set, never with
compact), and then the rule applies to every segment (PartitionLog.damage); otherwise only rules 1
and 3 are applied. Known limit: a follower that replicated
an already compacted leader log, before its own cleaner ever ran, has inherited gaps that rule 2
would report.

Rule 3, applied whatever the checkpoints say: a closed segment's indexes name batches its log no
longer has. Kafka writes a segment's `.index` and `.timeindex` with its log (and truncates them with
it), and the cleaner writes new ones with the log it cleans, so entries past the end of the complete
batches are the segment's own lost tail: a log cut at a batch boundary, which rule 1 cannot see and
rule 2 cannot tell from compaction without the cleaner checkpoint (a copied log dir often has none).
Only the last entries are read (a page of each index). An entry counts when it lies past the log's
end (an offset entry: a position at or past the end of the complete batches; both kinds: an offset
at or past the segment's next offset and below the next segment's base offset) and the entries
from the one before it on are in Kafka's order. A damaged index must never be taken for a damaged
log (it costs a scan, never an error), so one such entry is not enough: two in the offset index, or
one in each index. A cut shorter than an index interval (4 KiB by default) leaves at most the time
index's closing entry past the end, and stays silent without the cleaner checkpoint.

Rule 0, for every segment, the active one too: its `.log` is a regular file. One that is not (a
FIFO, a directory, a symbolic link, a device: kfs.storage.files) is never opened and is damaged at
position 0, with the one sentence that says what it is: the log ends there for a reader, after the
records of the segments before it.

A damaged segment becomes a `CorruptLogError` at the end of its complete batches: the read that
reaches that point fails (EIO through the mount, one sentence from `kfs cat`, an `{"error": ...}`
line with on_corrupt=skip), after every record before it. A file that is not a segment at all (its
first batch is no batch: `is_segment`) is described without any value read from it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise

from kfs.record import HEADER_SIZE_UP_TO_MAGIC, CorruptBatchError, peek_size
from kfs.storage.batch_walk import NOT_A_SEGMENT
from kfs.storage.errors import CorruptLogError
from kfs.storage.files import NotARegularFile
from kfs.storage.index import OffsetIndex, TimeIndex
from kfs.storage.segment import LogSegment


@dataclass(frozen=True)
class SegmentDamage:
    """What is wrong with a segment, and where its readable batches end. `refused`: its `.log` is
    not a regular file (rule 0), the error is that sentence."""

    path: str
    position: int
    reason: str
    refused: NotARegularFile | None = None

    def error(self) -> CorruptLogError:
        return self.refused if self.refused is not None else CorruptLogError(self.path, self.position, self.reason)

    def problem(self) -> str:
        """The line `info()` lists under the segment's problems."""
        return str(self.refused) if self.refused is not None else f"position {self.position}: {self.reason}"


def refused_segment_damage(segment: LogSegment) -> SegmentDamage | None:
    """Rule 0 (module docstring), for any segment: its `.log` is not a regular file."""
    refused = segment.refusal()
    return SegmentDamage(segment.log_path, 0, refused.reason, refused) if refused is not None else None


def closed_segment_damage(segment: LogSegment, next_segment: LogSegment | None,
                          cleaned_up_to: int | None) -> SegmentDamage | None:
    """Rule 1, then rule 2 (module docstring) for a segment that is not the active one."""
    size = segment.file_size()
    end = segment.valid_size()
    next_offset = segment.next_offset()
    if end < size:
        if not segment.is_segment():
            return SegmentDamage(segment.log_path, end, NOT_A_SEGMENT)
        return SegmentDamage(segment.log_path, end,
                             f"truncated: {_describe_tail(segment, end, size)}; the records from offset "
                             f"{next_offset} to the end of this closed segment are missing")
    if next_segment is not None and _indexes_past_the_end(segment, end, next_offset, next_segment.base_offset):
        if not segment.is_segment():
            return SegmentDamage(segment.log_path, end, NOT_A_SEGMENT)
        return SegmentDamage(segment.log_path, end,
                             f"truncated: the batches of this closed segment end before offset {next_offset}, but "
                             "its indexes, written with its log, name batches past them: offsets "
                             f"{next_offset} to {next_segment.base_offset - 1} are missing")
    if next_segment is not None and cleaned_up_to is not None and segment.base_offset >= cleaned_up_to \
            and next_offset < next_segment.base_offset:
        if not segment.is_segment():
            return SegmentDamage(segment.log_path, end, NOT_A_SEGMENT)
        return SegmentDamage(segment.log_path, end,
                             f"truncated: the batches of this closed segment end before offset {next_offset} "
                             f"but the next segment starts at offset {next_segment.base_offset}, and the log "
                             f"was never compacted here: offsets {next_offset} to {next_segment.base_offset - 1} "
                             f"are missing")
    return None


INDEX_ENTRIES_READ = 3  # the last entries of each index rule 3 reads


def _indexes_past_the_end(segment: LogSegment, end: int, next_offset: int, next_base: int) -> bool:
    """Rule 3 (module docstring): the last entries of the segment's indexes name batches past the end
    of its complete batches, two in the offset index or one in each."""
    offsets, times = segment.last_index_entries(INDEX_ENTRIES_READ)
    in_offset_index = _trailing_past(offsets, lambda e: e[1] >= end and next_offset <= e[0] < next_base,
                                     OffsetIndex.in_order)
    in_time_index = _trailing_past(times, lambda e: next_offset <= e[1] < next_base, TimeIndex.in_order)
    return in_offset_index >= 2 or (in_offset_index >= 1 and in_time_index >= 1)


def _trailing_past(entries: list[tuple[int, int]], past: Callable[[tuple[int, int]], bool],
                   in_order: Callable[[tuple[int, int], tuple[int, int]], bool]) -> int:
    """How many of the last entries are past the log's end, if they and the entry before them are in
    order (0 otherwise)."""
    count = 0
    while count < len(entries) and past(entries[-1 - count]):
        count += 1
    chain = entries[max(0, len(entries) - count - 1):]
    if count == 0 or not all(in_order(a, b) for a, b in pairwise(chain)):
        return 0
    return count


def _describe_tail(segment: LogSegment, end: int, size: int) -> str:
    """What follows the last complete batch: a batch cut short, zeros or other bytes."""
    tail = segment.read(end, min(size - end, 64))
    if not tail.strip(b"\0"):
        if segment.read(max(end, size - 64), min(size - end, 64)).strip(b"\0"):
            # (zeros, then other bytes: a hole where batches were, not a tail that was never trimmed)
            return (f"the {size - end} bytes after its last complete batch at position {end} begin with zeros "
                    "and end in other bytes, not complete batches (a hole where batches were)")
        return f"the file ends in {size - end} zero bytes after its last complete batch at position {end}"
    if len(tail) < HEADER_SIZE_UP_TO_MAGIC:
        return f"the file ends inside a batch header ({size - end} bytes at position {end})"
    try:
        batch_size, _magic = peek_size(memoryview(tail), 0)
    except CorruptBatchError:
        batch_size = 0
    if batch_size > size - end:
        return f"the file ends inside the batch at position {end} ({size - end} of its {batch_size} bytes are there)"
    return f"the file ends in {size - end} bytes that are not a complete batch"
