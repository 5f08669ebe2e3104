"""`kfs dump` of `.index`, `.timeindex` and `.txnindex` files: their entries, each checked against the
`.log` beside it as DumpLogSegments does, and the broker's startup sanity check."""

from __future__ import annotations

import os
import sys

from kfs.cli.dump_common import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    Out,
    Problems,
    base_offset_of_file,
    segment_of_file,
    sibling_file,
)
from kfs.record import BatchHeader
from kfs.storage import CorruptLogError, KfsError, LogSegment, VanishedError
from kfs.storage.index import OffsetIndex, SegmentIndex, TimeIndex
from kfs.storage.txn_index import read_txn_index

# ---- .index and .timeindex --------------------------------------------------------------------

def _index_entries(index: SegmentIndex, path: str) -> list[tuple[int, int]]:
    """The entries before a live index's zero tail, stopping, as Kafka's dump loop does, at an
    entry that repeats the base offset (a zero entry of a crashed broker's sparse file)."""
    try:
        entries = index.entries()
    except (OSError, ValueError) as e:
        raise KfsError(f"{path}: cannot read the index ({e})") from None
    key = 0 if isinstance(index, OffsetIndex) else 1  # where the offset is in an entry
    for i, entry in enumerate(entries):
        if i > 0 and entry[key] == index.base_offset:
            return entries[:i]
    return entries


def _log_beside(index_path: str) -> LogSegment:
    log_path = sibling_file(index_path, LOG_SUFFIX)
    if not os.path.isfile(log_path):
        raise KfsError(f"{index_path}: no {os.path.basename(log_path)} beside it to check the index against")
    return segment_of_file(log_path)


def dump_offset_index(path: str, out: Out, problems: Problems, *, verify_only: bool,
                       max_message_size: int) -> None:
    """`DumpLogSegments.dumpIndex`: the batch at each entry's position must end at the entry's offset."""
    index = OffsetIndex(path, base_offset_of_file(path), follow_links=True)
    segment = _log_beside(path)
    try:
        entries = _index_entries(index, path)
        if not entries:
            out(f"{path} is empty.\n")
            return
        mismatches = problems.index_mismatches.setdefault(os.path.abspath(path), {})
        file_size = segment.file_size()
        for offset, position in entries:
            last_offset = _first_batch_last_offset(segment, position, min(file_size, position + max_message_size))
            if last_offset != offset:
                mismatches[offset] = last_offset
            if not verify_only:
                out(f"offset: {offset} position: {position}\n")
    finally:
        index.close()
        segment.close()


def _first_batch_last_offset(segment: LogSegment, position: int, end: int) -> int:
    """The last offset of the batch at `position`; -1 if there is no complete, readable batch there."""
    if not 0 <= position < end:
        return -1
    try:
        for header in segment.headers(position, end):
            return header.last_offset
    except (CorruptLogError, VanishedError):
        pass
    return -1


def dump_time_index(path: str, out: Out, problems: Problems, *, verify_only: bool) -> None:
    """`DumpLogSegments.dumpTimeIndex`: the batch holding each entry's offset must end at that offset,
    and its largest record timestamp must be the entry's timestamp; timestamps must increase."""
    base_offset = base_offset_of_file(path)
    time_index = TimeIndex(path, base_offset, follow_links=True)
    index_path = sibling_file(path, INDEX_SUFFIX)
    offset_index = OffsetIndex(index_path, base_offset, follow_links=True) if os.path.isfile(index_path) else None
    segment = _log_beside(path)
    abs_path = os.path.abspath(path)
    try:
        valid_size = segment.valid_size()
        previous_timestamp = -1  # RecordBatch.NO_TIMESTAMP
        for timestamp, offset in _index_entries(time_index, path):
            found = _batch_holding(segment, offset_index, offset, valid_size)
            if found is None:
                problems.time_not_found.setdefault(abs_path, []).append((offset, -1))
            elif found[0].last_offset != offset:
                problems.time_not_found.setdefault(abs_path, []).append((offset, found[0].last_offset))
            else:
                header, body = found
                max_timestamp = max((r.timestamp for r in segment.records_of(header, body)), default=-1)
                if max_timestamp != timestamp:
                    problems.time_mismatches.setdefault(abs_path, []).append((timestamp, max_timestamp))
                if previous_timestamp >= timestamp:
                    problems.time_out_of_order.setdefault(abs_path, []).append((timestamp, previous_timestamp))
            if not verify_only:
                out(f"timestamp: {timestamp} offset: {offset}\n")
            previous_timestamp = timestamp
    finally:
        time_index.close()
        if offset_index is not None:
            offset_index.close()
        segment.close()


def _batch_holding(segment: LogSegment, offset_index: OffsetIndex | None, offset: int, end: int
                   ) -> tuple[BatchHeader, memoryview] | None:
    """The first batch whose last offset is >= `offset`, scanning from the offset index's entry for it."""
    start = 0
    if offset_index is not None:
        try:
            entry = offset_index.lookup(offset)
        except (OSError, ValueError):
            entry = None
        if entry is not None and 0 <= entry[1] < end:
            start = entry[1]
    try:
        for header in segment.headers(start, end):
            if header.last_offset >= offset:
                return segment.batch_at(header.position)
    except (CorruptLogError, VanishedError):
        if start == 0:
            raise
        return _batch_holding(segment, None, offset, end)  # a bad index position: scan from the start
    return None


def sanity_check(path: str, suffix: str, out: Out) -> bool:
    """`OffsetIndex.sanityCheck` / `TimeIndex.sanityCheck`, the broker's startup check.

    The broker opens an index as every slot of the file, so a preallocated zero tail's last slot
    is its "last entry": (base offset, position 0) for an offset index, which passes, and
    (timestamp 0, base offset) for a time index, which fails whenever real entries precede it.
    """
    base_offset = base_offset_of_file(path)
    abs_path = os.path.abspath(path)
    is_offset_index = suffix == INDEX_SUFFIX
    index: SegmentIndex = (OffsetIndex(path, base_offset, follow_links=True) if is_offset_index
                           else TimeIndex(path, base_offset, follow_links=True))
    try:
        length = os.path.getsize(path)
        slots = length // index.entry_size
        entries = _index_entries(index, path)
    finally:
        index.close()
    zero_tail = slots > len(entries)
    if is_offset_index and slots == 0:
        out(f"{path} is empty.\n")
        return True
    problem = None
    if is_offset_index:
        last_offset = base_offset if zero_tail else entries[-1][0]
        if slots and last_offset < base_offset:
            problem = (f"Corrupt index found, index file ({abs_path}) has non-zero size but the last offset "
                       f"is {last_offset} which is less than the base offset {base_offset}")
    else:
        first_timestamp = entries[0][0] if entries else 0
        last_timestamp, last_offset = (0, base_offset) if zero_tail else entries[-1]
        if slots and last_timestamp < first_timestamp:
            problem = (f"Corrupt time index found, time index file ({abs_path}) has non-zero size but the last "
                       f"timestamp is {last_timestamp} which is less than the first timestamp {first_timestamp}")
        elif slots and last_offset < base_offset:
            problem = (f"Corrupt time index found, time index file ({abs_path}) has non-zero size but the last "
                       f"offset is {last_offset} which is less than the first offset {base_offset}")
    if problem is None and length % index.entry_size:
        kind = "Index" if is_offset_index else "Time index"
        problem = (f"{kind} file {abs_path} is corrupt, found {length} bytes which is neither positive nor "
                   f"a multiple of {index.entry_size}")
    if problem is None:
        out(f"{path} passed sanity check.\n")
        return True
    if zero_tail:
        problem += (f" (the file is preallocated: {len(entries)} entries, then {slots - len(entries)} zero slots, "
                    f"as a live broker's active segment has; a broker rebuilds this index after an unclean shutdown)")
    sys.stdout.flush()
    sys.stderr.write(f"kfs: {problem}\n")
    return False


# ---- .txnindex --------------------------------------------------------------------------------

def dump_txn_index(path: str, out: Out) -> None:
    """`DumpLogSegments.dumpTxnIndex`. Kafka reads only version 0 entries (AbortedTxn.CURRENT_VERSION)."""
    try:
        aborted = read_txn_index(path)
    except OSError as e:
        raise KfsError(f"{path}: {e.strerror}") from None
    for txn in aborted:
        out(f"version: 0 producerId: {txn.producer_id} firstOffset: {txn.first_offset} "
            f"lastOffset: {txn.last_offset} lastStableOffset: {txn.last_stable_offset}\n")
