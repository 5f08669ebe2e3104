"""Where a copy first differs from the reference: batch by batch, or record by record where cleaned.

Replicas receive the leader's batches byte for byte, so two copies agree where their batches have the
same base offset, last offset, partition leader epoch and CRC. The log cleaner rewrites a compacted
partition's batches on each broker on its own schedule, so below either copy's cleaner point
(`cleaner-offset-checkpoint`: the first offset the cleaner has not passed over) batches may differ
where the data does not: there the records are compared, offset by offset, and an offset one copy
holds and the other does not is no difference (the cleaner removed it from one of them).
"""

from __future__ import annotations

import heapq
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
    if cleaned_to <= start or start >= end:
        compared = "batches"
    else:
        compared = "records" if cleaned_to >= end else f"records below {cleaned_to}, then batches"
        found = _records_differ(ref_log, log, start, min(cleaned_to, end))
        if found is not None:
            return found, compared
    return _batches_differ(ref, scan, max(start, cleaned_to), end), compared


def _batches_differ(ref: CopyScan, scan: CopyScan, start: int, end: int) -> int | None:
    """The first offset in [start, end) where the batches holding it differ (or only one copy has a
    batch there). Batches change only at a batch's base or after its last offset: those offsets of
    either copy, and `start`, are the places to look, in order."""
    start = _same_rows_end(ref, scan, start)
    marks = heapq.merge(_marks(ref, start, end), _marks(scan, start, end))
    seen = None
    for offset in marks:
        if offset == seen:
            continue
        seen = offset
        a, b = _covering(ref, offset), _covering(scan, offset)
        if a is None and b is None:
            continue
        if a is None or b is None or (ref.base[a], ref.last[a], ref.epoch[a], ref.crc[a]) != \
                (scan.base[b], scan.last[b], scan.epoch[b], scan.crc[b]):
            return offset
    return None


def _same_rows_end(ref: CopyScan, scan: CopyScan, start: int) -> int:
    """Past the batches both copies hold alike from `start` on (the common case: copies in sync for
    most of their length), found by comparing the arrays a slice at a time; `start` if none."""
    i, j = ref.first_at_or_after(start), scan.first_at_or_after(start)
    i0 = i
    step = 1 << 16
    while step:
        if i + step <= len(ref) and j + step <= len(scan) and all(
                getattr(ref, f)[i:i + step] == getattr(scan, f)[j:j + step] for f in _COMPARED):
            i, j = i + step, j + step
        else:
            step >>= 1
    return max(start, ref.last[i - 1] + 1) if i > i0 else start


_COMPARED = ("base", "last", "epoch", "crc")


def _marks(scan: CopyScan, start: int, end: int) -> Iterator[int]:
    """`start`, then each batch's base offset and the offset after its last, within [start, end), in order."""
    if start < end:
        yield start
    for row in range(scan.first_at_or_after(start), len(scan)):
        base, after = scan.base[row], scan.last[row] + 1
        if base >= end:
            return
        if base > start:
            yield base
        if start < after < end:
            yield after


def _covering(scan: CopyScan, offset: int) -> int | None:
    """The row of the batch holding `offset` (base <= offset <= last), or None (a gap, or past the end)."""
    row = scan.first_at_or_after(offset)
    return row if row < len(scan) and scan.base[row] <= offset else None


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
    return record.timestamp, record.key, record.value, record.headers
