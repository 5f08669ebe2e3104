"""One copy of a partition read as its batch headers: what the comparison needs and nothing more.

The batches' headers (the batch length, offsets, partition leader epoch, CRC and record count are all
in the first 61 bytes of a v2 batch) go into flat arrays: a 1 GB partition of 16 KiB batches is
65,536 rows of 37 bytes. Each batch's CRC is checked over its bytes (compiled CRC-32C, no decoding):
the comparison trusts stored CRCs, which only a checked batch vouches for. Records are decoded only
where a header cannot say (the record count of a v0/v1 compressed wrapper, a batch cut by a
truncation offset).
"""

from __future__ import annotations

import bisect
from array import array
from dataclasses import dataclass

from kfs.record import crc_is_valid
from kfs.storage import PartitionLog


@dataclass
class CopyScan:
    """The batches of a copy from its log start to its log end, one row each."""

    log_start_offset: int
    log_end_offset: int
    base: array   # 'q': base offset
    last: array   # 'q': last offset
    epoch: array  # 'i': partition leader epoch (-1 for v0/v1)
    crc: array    # 'L'
    count: array  # 'q': records in the batch (-1 where not known: decoded when counted)
    magic: array  # 'b'

    def __len__(self) -> int:
        return len(self.base)

    def first_at_or_after(self, offset: int) -> int:
        """The row of the first batch whose last offset is >= offset (len when none)."""
        return bisect.bisect_left(self.last, offset)

    def epoch_rows(self) -> list[tuple[int, int, int]]:
        """(magic, epoch, base offset) of each batch: what EpochCache.from_batches replays."""
        return list(zip(self.magic, self.epoch, self.base, strict=True))

    def last_epoch(self) -> int:
        """The partition leader epoch of the last batch (-1: none, or a v0/v1 batch)."""
        return self.epoch[-1] if len(self.epoch) else -1


def scan_copy(plog: PartitionLog) -> CopyScan:
    """Every complete batch header of the copy, segment by segment, each batch's CRC checked (two
    copies whose stored CRCs agree must hold the bytes they vouch for). A damaged segment raises the
    CorruptLogError every read of it raises: a comparison past damage would be a guess."""
    start, end = plog.log_start_offset(), plog.log_end_offset()
    scan = CopyScan(start, end, array("q"), array("q"), array("i"), array("L"), array("q"), array("b"))
    for segment in plog.segments():
        for header, body in segment.batches(0, segment.valid_size()):
            if header.last_offset < start:
                continue
            if not crc_is_valid(body, header):
                raise segment.corrupt(header.position, f"CRC mismatch (stored {header.crc})")
            base = header.base_offset if header.base_offset >= 0 else segment.base_offset_of(header, body)
            scan.base.append(base)
            scan.last.append(header.last_offset)
            scan.epoch.append(header.partition_leader_epoch if header.magic >= 2 else -1)
            scan.crc.append(header.crc & 0xFFFFFFFF)
            scan.count.append(header.record_count)  # (a v0/v1 wrapper's, from first_offset's decompression)
            scan.magic.append(header.magic)
        plog.raise_if_damaged(segment)
    return scan


def count_records(plog: PartitionLog, scan: CopyScan, low: int, high: int | None = None) -> int:
    """Records (control records too) at offsets in [low, high) of the copy: from the headers, and
    decoding only the batches cut by `low` or `high` and v0/v1 wrappers."""
    high = scan.log_end_offset if high is None else high
    if high <= low:
        return 0
    total = 0
    row = scan.first_at_or_after(low)
    while row < len(scan) and scan.base[row] < high:
        base, last, count = scan.base[row], scan.last[row], scan.count[row]
        if base >= low and last < high and count >= 0:
            total += count
        else:
            total += sum(1 for _ in plog.records(max(low, base), control="show", end_offset=min(high, last + 1)))
        row += 1
    return total


def last_batch_epoch(plog: PartitionLog) -> int:
    """The partition leader epoch of the copy's last batch (-1: none, or a v0/v1 batch), read from
    the last segment's last offset index entry on: the reference rule without scanning the copy."""
    start = plog.log_start_offset()
    for segment in reversed(plog.segments()):
        entries = segment.offset_index_entries()
        last = None
        for header in segment.headers(entries[-1][1] if entries else 0, segment.valid_size()):
            last = header
        if last is not None and last.last_offset >= start:
            return last.partition_leader_epoch if last.magic >= 2 else -1
        if last is not None or segment.base_offset < start:
            return -1
    return -1
