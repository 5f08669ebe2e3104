"""Where a copy first differs from the reference: batch by batch, or record by record where cleaned.

Replicas receive the leader's batches byte for byte, so two copies agree where their batches have the
same base offset, last offset, partition leader epoch and CRC. The log cleaner rewrites a compacted
partition's batches on each broker on its own schedule, so below either copy's cleaner point
(`cleaner-offset-checkpoint`: the first offset the cleaner has not passed over) batches may differ
where the data does not: there the records are compared, offset by offset, and an offset one copy
holds and the other does not is no difference (the cleaner removed it from one of them).
"""

from __future__ import annotations

from collections.abc import Iterator

from kfs.record import Record
from kfs.replicas.scan import CopyScan
from kfs.storage import PartitionLog


def first_difference(reference: tuple[PartitionLog, CopyScan, int], copy: tuple[PartitionLog, CopyScan, int]
                     ) -> tuple[int | None, str]:
    """(the first offset at or after both log starts where the copies differ, or None if none before
    the shorter log end; what was compared). Each side is (log, its scan, its cleaner point)."""
    (ref_log, ref, ref_cleaned), (log, scan, cleaned) = reference, copy
    start = max(ref.log_start_offset, scan.log_start_offset)
    end = min(ref.log_end_offset, scan.log_end_offset)
    cleaned_to = max(ref_cleaned, cleaned)
    compared = "batches"
    if cleaned_to > start:
        compared = f"records below {cleaned_to}, then batches"
        found = _records_differ(ref_log, log, start, min(cleaned_to, end))
        if found is not None:
            return found, compared
        start = cleaned_to
    return _batches_differ(ref, scan, start), compared


def _batches_differ(ref: CopyScan, scan: CopyScan, start: int) -> int | None:
    """The first differing batch's lower base offset among the batches starting at or after `start`."""
    i, j = _first_base_at(ref, start), _first_base_at(scan, start)
    while i < len(ref) and j < len(scan):
        if (ref.base[i], ref.last[i], ref.epoch[i], ref.crc[i]) != \
                (scan.base[j], scan.last[j], scan.epoch[j], scan.crc[j]):
            return min(ref.base[i], scan.base[j])
        i += 1
        j += 1
    return None


def _first_base_at(scan: CopyScan, offset: int) -> int:
    """The row of the first batch whose base offset is >= offset (a batch cut by a log start moved
    inside it is not compared: the other copy may hold it whole)."""
    row = scan.first_at_or_after(offset)
    while row < len(scan) and scan.base[row] < offset:
        row += 1
    return row


def _records_differ(ref_log: PartitionLog, log: PartitionLog, start: int, end: int) -> int | None:
    """The first offset in [start, end) both copies hold with another timestamp, key, value or headers."""
    if end <= start:
        return None
    theirs = _records(log, start, end)
    other = next(theirs, None)
    for record in _records(ref_log, start, end):
        while other is not None and other.offset < record.offset:
            other = next(theirs, None)
        if other is None:
            return None
        if other.offset == record.offset and _content(other) != _content(record):
            return record.offset
    return None


def _records(log: PartitionLog, start: int, end: int) -> Iterator[Record]:
    return log.records(start, control="show", end_offset=end)


def _content(record: Record) -> tuple:
    return (record.timestamp, record.timestamp_type, record.key, record.value, record.headers,
            getattr(record, "control", None))
