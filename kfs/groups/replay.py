"""Replaying `__consumer_offsets` partitions up to a moment, the way the group coordinator loads them.

The coordinator (`GroupCoordinatorShard` / `OffsetMetadataManager.replay`, and `GroupMetadataManager`
for groups) reads a partition in offset order and keeps, per key, the effect of the last record: a
value sets the key's state, a null value (tombstone) removes it. So the state at time T is, for each
key, the last record with a timestamp at or before T. The scan keeps exactly that, per raw key
bytes, and decodes nothing: the keys and the surviving values are decoded afterwards, once each
(`kfs.groups.state`). That is what makes a 500 MB log quick: most records are superseded commits.

Transactional offset commits (KIP-98, TxnOffsetCommit) wait per producer until their marker:
COMMIT moves them into the state unless a newer commit of the same key is there already (the
record offset decides, as in `replayEndTransactionMarker`), ABORT drops them. A tombstone removes
the key from every pending transaction as well. A marker after T leaves its transaction pending:
those offsets were not committed at T.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from operator import attrgetter

from kfs.record.control import ABORT_TYPE, COMMIT_TYPE, CONTROL_KEY
from kfs.record.types import Record
from kfs.storage import LogDirs, LogSegment, PartitionLog

CONSUMER_OFFSETS = "__consumer_offsets"
_KEY = attrgetter("key")


DEFAULT_OFFSETS_PARTITIONS = 50  # offsets.topic.num.partitions' default


def coordinator_partition(group: str, count: int = DEFAULT_OFFSETS_PARTITIONS) -> int:
    """The `__consumer_offsets` partition holding `group`'s commits: the group coordinator's
    `Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions`, with Java's String.hashCode
    (over UTF-16 code units, in int32 arithmetic)."""
    h = 0
    data = group.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    signed = h - (1 << 32) if h >= 1 << 31 else h
    return (0 if signed == -(1 << 31) else abs(signed)) % count


def offsets_partitions(logdirs: LogDirs) -> list[PartitionLog]:
    """Every `__consumer_offsets-N` of the log dirs, by partition number."""
    plogs = []
    for name in logdirs.partition_names():
        topic, _, _number = name.rpartition("-")
        if topic == CONSUMER_OFFSETS:
            plogs.append(logdirs.partition(name))
    return sorted(plogs, key=attrgetter("partition"))


@dataclass
class PartitionScan:
    """The last record per key of one `__consumer_offsets` partition, at or before `at` (None: no limit).

    A scan without a limit can be continued as the partition grows (`advance`): it remembers the
    segment and byte position it reached, and the files it read, and starts over when those changed
    (the log cleaner replaced a segment, retention deleted one).
    """

    plog: PartitionLog
    at: int | None = None
    latest: dict[bytes | None, Record] = field(default_factory=dict)
    pending: dict[int, dict[bytes | None, Record]] = field(default_factory=dict)
    _reached: tuple[int, int, int] | None = None  # (segment base offset, inode, byte position) read up to
    _read_files: tuple[tuple[int, int, int], ...] = ()  # (base offset, inode, size) of segments read whole
    generation: int = 0  # counts the changes of `latest`: a reader reuses what it built from an unchanged scan

    def advance(self) -> PartitionScan:
        """Read what was appended since the last call (everything, the first time)."""
        segments = self.plog.segments()
        closed = tuple(_identity(s) for s in segments[:-1])
        if self._reached is not None and not _continues(self._read_files, closed, self._reached, segments):
            self.latest.clear()
            self.pending.clear()
            self._reached = None
            self.generation += 1
        start_base, _inode, start_position = self._reached if self._reached is not None else (-1, 0, 0)
        log_start = self.plog.log_start_offset()
        for segment in segments:
            if segment.base_offset < start_base:
                continue
            position = start_position if segment.base_offset == start_base else 0
            for header, body in segment.batches(position):
                position = header.next_position
                self.generation += 1
                if header.last_offset < log_start:
                    continue
                records = segment.records_of(header, body)
                if header.base_offset < log_start:
                    records = [r for r in records if r.offset >= log_start]
                if self.at is not None and not (header.magic == 2 and header.max_timestamp <= self.at):
                    at = self.at
                    records = [r for r in records if r.timestamp <= at]
                if not records:
                    continue
                if header.is_control:
                    self._end_transactions(header.producer_id, records)
                elif header.is_transactional:
                    self._stage(header.producer_id, records)
                elif self.pending:
                    self._apply_one_by_one(records)
                else:
                    self.latest.update(zip(map(_KEY, records), records, strict=True))
            self._reached = (segment.base_offset, _identity(segment)[1], position)
        self._read_files = closed
        return self

    def _stage(self, producer_id: int, records: list[Record]) -> None:
        """Transactional records: offset commits wait for the marker; tombstones act at once."""
        staged = self.pending.setdefault(producer_id, {})
        for record in records:
            if record.value is None:
                self._apply_one_by_one([record])
            else:
                staged[record.key] = record

    def _apply_one_by_one(self, records: list[Record]) -> None:
        for record in records:
            self.latest[record.key] = record
            if record.value is None:
                for staged in self.pending.values():
                    staged.pop(record.key, None)

    def _end_transactions(self, producer_id: int, records: list[Record]) -> None:
        for record in records:
            key = record.key
            if key is None or len(key) < CONTROL_KEY.size:
                continue
            _version, marker = CONTROL_KEY.unpack_from(key, 0)
            if marker not in (COMMIT_TYPE, ABORT_TYPE):
                continue
            staged = self.pending.pop(producer_id, None)
            if staged is None or marker == ABORT_TYPE:
                continue
            latest = self.latest
            for k, r in staged.items():
                existing = latest.get(k)
                if existing is None or existing.value is None or r.offset > existing.offset:
                    latest[k] = r


def _identity(segment: LogSegment) -> tuple[int, int, int]:
    st = os.lstat(segment.log_path)  # (the entry: kfs follows no link to a segment)
    return (segment.base_offset, st.st_ino, st.st_size)


def _continues(read_files: tuple[tuple[int, int, int], ...], closed: tuple[tuple[int, int, int], ...],
               reached: tuple[int, int, int], segments: list[LogSegment]) -> bool:
    """Whether the partition is the one read before plus appends: the segments that were closed are
    still there unchanged, and so is the segment read up to (the same file, at least as long)."""
    if closed[:len(read_files)] != read_files:
        return False
    base, inode, position = reached
    for segment in segments:
        if segment.base_offset == base:
            _base, now_inode, size = _identity(segment)
            return now_inode == inode and size >= position
    return False

