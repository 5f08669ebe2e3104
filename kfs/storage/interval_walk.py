"""One walk over an offset index interval: the fast path of a segment's lookups.

An index interval is the bytes from an offset index entry's batch to the next entry's
(`index.interval.bytes`, 4 KiB by default). Where the indexes are plain, a `.value` (`indexed_batch`)
or a `time/<T>` (`timed_record`) is answered by one walk over it, making in that walk the checks the
general path (`LogSegment.translate_offset`, `find_offset_by_timestamp`) makes in three or four: the
entry's batch is whole, its CRC holds and it does not start past the entry's offset, and the batches
from it land exactly on the next entry's position. Anything else is declined (None) and the general
path, which says what is wrong, takes it. `LogSegment` finds the interval; this walks it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeAlias

from kfs.record import BatchHeader, Record, crc_is_valid, parse_batch_header
from kfs.storage.batch_walk import FIRST_WINDOW, BatchFile
from kfs.storage.errors import CorruptLogError, VanishedError

# (index entry (offset, position), the next entry's position, the end of the complete batches)
Interval: TypeAlias = tuple[tuple[int, int], int, int]
# kfs._native.storage.find_v2_batch: (window, position, base offset, limit, entry offset, end, target)
FindBatch: TypeAlias = Callable[..., "tuple[int, int] | int | None"]


class NotPlain(Exception):
    """An index interval a one-walk lookup cannot take: the general path says what is wrong."""


def interval_batches(log: BatchFile, interval: Interval) -> Iterator[tuple[BatchHeader, memoryview]]:
    """The batches from an index entry's position on, checked as the one walks need them (the
    one-walk lookups' shared part): the entry's batch is whole, its CRC holds and it does not
    start past the entry's offset, and the walk lands exactly on `end`, the next entry's
    position; NotPlain when either fails (a batch inside another one's bytes)."""
    (offset, position), end, limit = interval
    landed = False
    for header, body in log.batches(position, limit):
        if header.position == position and not (crc_is_valid(body, header)
                                                 and log.base_offset_of(header, body) <= offset):
            raise NotPlain
        if not landed:
            if header.position > end:
                raise NotPlain  # the walk stepped over the next entry's position: not a batch start
            landed = header.position == end
        yield header, body


def batch_in_interval(log: BatchFile, interval: Interval, target: int) -> tuple[BatchHeader, memoryview] | None:
    """The batch holding `target` (the first whose last offset reaches it) by the Python walk over
    the interval; None when the interval is not a plain one."""
    end = interval[1]
    found: tuple[BatchHeader, memoryview] | None = None
    try:
        for header, body in interval_batches(log, interval):
            if found is None and header.last_offset >= target:
                found = header, body
            if header.position == end:
                return found
    except (CorruptLogError, VanishedError, NotPlain):
        return None
    return None


def compiled_batch_in_interval(log: BatchFile, find: FindBatch, interval: Interval, target: int
                               ) -> tuple[BatchHeader, memoryview] | None:
    """`batch_in_interval` by find_v2_batch (kfs/_native/csrc/storage/find_v2_batch.c) over one read (a second
    when a batch reaches past it), making the same checks over its bytes: every batch from the
    entry's to the one at the next entry is whole within the complete batches, magic 2 with a length
    of at least 49 and no more than kfs's limit, its offsets within the segment's and above the one
    before; the entry's batch's CRC holds and it starts at or below the entry's offset; the walk
    lands on the next entry's position. Anything else (zeros, damage, legacy batches) it declines
    (None) to the Python walk, which says what is there."""
    (offset, position), end, limit = interval
    length = min(end + FIRST_WINDOW, limit) - position  # the interval and a page of the batch at its end
    for _ in range(2):
        try:
            window = memoryview(log.read(position, length, sized=True))
        except VanishedError:
            return None
        try:
            answer = find(window, position, log.base_offset, limit, offset, end, target)
        except OverflowError:
            return None  # a segment named past int64 (no batch Kafka wrote can be in it): Python's walk
        if isinstance(answer, tuple):
            at, size = answer
            body = window[at:at + size]
            return parse_batch_header(body, 0, position + at), body
        if answer is None or answer <= length or len(window) < length:
            return None
        length = answer
    return None


def record_in_interval(log: BatchFile, interval: Interval, hint: tuple[int, int], timestamp: int,
                       starting_offset: int) -> tuple[tuple[int, int], Record, BatchHeader] | None:
    """The first record at or past `timestamp` (and `starting_offset`) from the interval's entry on,
    checking the time index entry below the target, `hint` (T', O), on the way: the batch holding O
    has max timestamp T' and starts at or below O. None when a check fails.

    The general path checks the time entry (a walk to O's batch, itself checking the offset entry
    below O with a walk to the next entry), checks the offset entry again, then scans from it:
    three or four walks over the same bytes. Here one body walk from the offset entry's position
    does all of it, and the first record at or past T from there is the answer, as the general
    path's scan from there finds it."""
    hint_timestamp, hint_offset = hint
    entry, following, _ = interval
    hint_checked = False
    found: tuple[Record, BatchHeader] | None = None
    try:
        for header, body in interval_batches(log, interval):
            if not hint_checked and header.last_offset >= hint_offset:
                if header.max_timestamp != hint_timestamp or log.first_offset(header) > hint_offset:
                    return None
                hint_checked = True
            if found is None and header.max_timestamp >= timestamp:
                found = next(((record, header) for record in log.records_of(header, body)
                              if record.timestamp >= timestamp and record.offset >= starting_offset), None)
            if found is not None and hint_checked and header.position >= following:
                return entry, found[0], found[1]
    except (CorruptLogError, VanishedError, NotPlain):
        return None
    return None
