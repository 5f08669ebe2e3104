"""A partition directory's segments as they are now: Kafka's `LocalLog`.

The listing follows the directory (segments rolling in, deleted, or swapped by the cleaner), renewed
at most every REFRESH_INTERVAL. On it: the log's start and end, the segment walk of a fetch (the
floor segment, its offset index and a header scan, then the next segment: `LocalLog.read`), what is
remembered of closed segments (their damage, their largest timestamp) and the aborted transactions
(`LocalLog.collectAbortedTransactions`). Records are read from here by kfs.storage.partition_reads;
`PartitionLog` (kfs.storage.partition) adds the lookups by offset and time on top, as `UnifiedLog`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from kfs.record import BatchHeader
from kfs.storage.checkpoints import CheckpointReader
from kfs.storage.damage import SegmentDamage, closed_segment_damage, refused_segment_damage
from kfs.storage.errors import OffsetOutOfRange, UnknownPartition
from kfs.storage.location import Location
from kfs.storage.segment import LogSegment
from kfs.storage.segments import LogSegments
from kfs.storage.transactions import AbortedIndex, collect_aborted

log = logging.getLogger("kfs")

REFRESH_INTERVAL = 0.5  # seconds between directory listings of a partition


def batch_location(segment: LogSegment, entry: tuple[int, int] | None, header: BatchHeader,
                   offset: int | None = None, timestamp: int | None = None) -> Location:
    """The Location of a batch found in a segment (and of the record found in it, if any)."""
    return Location(segment.base_offset, entry, header.position, segment.base_offset_of(header),
                    header.last_offset, offset, timestamp, segment.file_id)


class LocalLog:
    """One `<topic>-<partition>` directory's segments. Cheap to create: nothing is opened until asked."""

    def __init__(self, path: str, name: str, topic: str, partition: int, checkpoints: CheckpointReader,
                 never_compacted: Callable[[str], bool] | None = None) -> None:
        """never_compacted: whether a topic is known never to have been compacted (LogDirs: from the
        metadata log's topic configs, kfs.storage.topic_configs), for damage rule 2 where the log dir
        has no cleaner checkpoint."""
        self.path = path
        self.name = name
        self._topic = topic
        self._partition = partition
        self.checkpoints = checkpoints
        self._never_compacted = never_compacted
        # The map as last listed (no directory scan): its floor/higher/first/last are what a walk
        # already under way goes on with.
        self.listed = LogSegments(path)
        self._refreshed_at = float("-inf")
        self._lock = threading.Lock()
        self._largest_ts_cache: dict[int, tuple[tuple[int, ...], int]] = {}
        self._damage_cache: dict[int, tuple[tuple, SegmentDamage | None]] = {}
        self._aborted_cache: tuple[tuple, AbortedIndex] | None = None

    # ---- the listing ----------------------------------------------------------------------------

    def refresh(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._refreshed_at < REFRESH_INTERVAL:
            return
        with self._lock:
            try:
                self.listed.refresh()
            except FileNotFoundError:
                raise UnknownPartition(f"partition {self.name} no longer exists at {self.path}") from None
            self._refreshed_at = now
            # What was remembered of segments deleted since: kept, it grew with every retention.
            bases = {segment.base_offset for segment in self.listed.all()}
            for cache in (self._largest_ts_cache, self._damage_cache):
                for base in [b for b in cache if b not in bases]:
                    cache.pop(base, None)

    def segments(self) -> list[LogSegment]:
        self.refresh()
        return self.listed.all()

    def floor_segment(self, offset: int) -> LogSegment | None:
        self.refresh()
        return self.listed.floor(offset)

    def listing(self) -> int:
        """A number that changes whenever a segment is added, deleted or replaced: what is known of
        the old listing (a lookup's position in a file) is not of this one."""
        self.refresh()
        return self.listed.generation

    def is_active(self, segment: LogSegment) -> bool:
        return self.listed.is_last(segment)

    def close(self) -> None:
        self.listed.close()

    # ---- log start and end ----------------------------------------------------------------------

    def log_start_offset(self) -> int:
        """max(first segment's base offset, the log dir's log-start-offset-checkpoint entry)."""
        self.refresh()
        first = self.listed.first()
        base = first.base_offset if first else 0
        checkpointed = self.checkpoints.log_start_offset(self._topic, self._partition)
        return max(base, checkpointed) if checkpointed is not None else base

    def log_end_offset(self) -> int:
        self.refresh()
        last = self.listed.last()
        return last.next_offset() if last else 0

    # ---- a fetch's segment walk -----------------------------------------------------------------

    def find_batch(self, target: int) -> tuple[LogSegment, tuple[int, int] | None, BatchHeader]:
        """The batch holding `target` (gaps resolve forward): its segment, the offset index entry
        used, its header. OffsetOutOfRange outside the log."""
        start = self.log_start_offset()
        segment = self.listed.floor(target) or self.listed.first()
        in_active = segment is None or self.listed.higher(segment.base_offset) is None
        if in_active and target >= self.log_end_offset() and target >= start:
            # Past the log end as last listed: a segment may have rolled in since (the listing is
            # renewed every REFRESH_INTERVAL): a record the broker has written is never ENOENT.
            self.refresh(force=True)
            segment = self.listed.floor(target) or self.listed.first()
            in_active = segment is None or self.listed.higher(segment.base_offset) is None
        if target < start or (in_active and target >= self.log_end_offset()):
            # Below a later segment's base offset, a target is below the log end: only a lookup in
            # the active segment needs the log end (and the live index's last entry it comes from).
            raise OffsetOutOfRange(f"offset {target} is out of range for {self.name} "
                                   f"(log start {start}, log end {self.log_end_offset()})")
        while segment is not None:
            found = segment.translate_offset(target)
            if found is not None:
                return segment, found[0], found[1]
            self.raise_if_damaged(segment)  # the target is among the records a damaged segment lost
            segment = self.listed.higher(segment.base_offset)
        raise OffsetOutOfRange(f"offset {target} is out of range for {self.name}")

    def locate_batch(self, target: int) -> Location:
        """`find_batch` as a Location (no record: offset and timestamp None)."""
        return batch_location(*self.find_batch(target))

    # ---- what is remembered of segments ---------------------------------------------------------

    def damage(self, segment: LogSegment) -> SegmentDamage | None:
        """What is wrong with a segment (kfs.storage.damage's rules): a `.log` that is not a regular
        file, for any segment; else, for a closed one, its batches against its file's end and the
        next segment. None for a healthy one, and for the active segment's half-written tail, which
        is normal. Remembered per segment file, size, next segment and cleaner checkpoint: closed
        segments do not change."""
        refused = refused_segment_damage(segment)
        if refused is not None:
            return refused
        following = self.listed.higher(segment.base_offset)
        if following is None:
            return None
        cleaned_up_to = self.checkpoints.cleaned_up_to(self._topic, self._partition)
        if cleaned_up_to is None and self._never_compacted is not None \
                and segment.next_offset() < following.base_offset and self._never_compacted(self._topic):
            cleaned_up_to = 0  # no cleaner checkpoint, but the topic's configs say it was never compacted
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
        """A segment's largest timestamp, remembered for closed segments (they no longer change), as
        Kafka keeps it in memory: keyed by the `.log`'s identity (device, inode, size, mtime, ctime),
        so a file the cleaner replaced, or one changed in place, is read again."""
        identity = tuple(segment.file_identity())
        cached = self._largest_ts_cache.get(segment.base_offset)
        if cached is not None and cached[0] == identity:
            return cached[1]
        value = segment.largest_timestamp()
        if not self.is_active(segment):
            self._largest_ts_cache[segment.base_offset] = (identity, value)
        return value

    def aborted_transactions(self) -> AbortedIndex:
        """Aborted transactions from the `.txnindex` files, or by following the markers where missing.

        Remembered until a segment is added, removed or grows (the key is every segment's size, and the
        active one's next offset: a preallocated log grows in place).
        """
        segments = self.segments()
        active_end = segments[-1].next_offset() if segments else None
        key = (tuple((s.base_offset, s.file_size()) for s in segments), active_end)
        cached = self._aborted_cache
        if cached is not None and cached[0] == key:
            return cached[1]
        index = collect_aborted(segments)
        self._aborted_cache = (key, index)
        return index
