"""A segment's `.log` file read as Kafka's record batches: the checked walk every read goes through.

`_walk` reads what it needs and no more (a lookup's first read is a page; a long walk doubles its
window up to 4 MiB) and checks each batch where it is, as `FileLogInputStream` frames them and as a
broker's recovery would refuse them: its length against what a segment and kfs can hold, a batch
still being written (the tail of a live segment, or its preallocated zeros) ends the walk, and its
offsets against the segment's base offset and the batch before (the base offset is outside the CRC).
`records_of` checks the CRC before decoding. `kfs.storage.segment.LogSegment` adds the indexes, the
tail and the lookups.

An error names values read from the file (a magic, a length, an offset, a CRC) only when the file is a
segment as far as its first batch shows (`is_segment`: whole, with a CRC that holds, which no other
file's bytes pass by accident). A file that is not (a secret hard-linked under a segment's name, a
copy gone wrong) gets `NOT_A_SEGMENT` instead: no byte of it is ever echoed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeAlias

from kfs.record import (
    HEADER_PROBE_SIZE,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAX_BATCH_BYTES,
    BatchHeader,
    CorruptBatchError,
    PlainRun,
    Record,
    complete_legacy_header,
    crc_is_valid,
    decode_records,
    parse_batch_header,
    peek_size,
)
from kfs.storage.errors import CorruptLogError, VanishedError
from kfs.storage.header_runs import HeaderRun, HeaderRunner
from kfs.storage.log_file import LogFile

FIRST_WINDOW = 4096             # a walk's first read: a lookup's walk mostly ends within it
# A decoded view's walk (one with a WindowTaker) reads whole segments: its first read is this much,
# where doubling from a page cost a partition of 1,973 segments of 64 KiB six preads and eight
# compiled calls a segment (a read of its lines 0.47 s, against 0.23 s in one segment).
STREAM_FIRST_WINDOW = 256 * 1024
HEADER_WINDOW = 64 * 1024      # the most read at a time when only headers are needed
# The most read at a time when whole batches are needed. A window the size of a core's L2 (1 MiB here)
# is still in cache when the CRC, the record walk and the value copy read it; a 4 MiB one was not, and
# each was a fresh allocation the kernel had to fault in and zero: a Spark count's task 151 -> 126 ns a
# record, the sum's 276 -> 257, `kfs cat`'s lines 1.50 -> 1.42 s (docs/spark.md, session 34).
BODY_WINDOW = 1024 * 1024
READ_AHEAD_FROM = 256 * 1024   # a body walk this far along is a stream: read its next window ahead
_ZERO_OVERHEAD = bytes(LOG_OVERHEAD)
# Offered (the window from a batch boundary to the walk's limit, its file position, the last offset
# before it): whole plain batches taken at once, or None (kfs.views.plain_runs).
WindowTaker: TypeAlias = Callable[[memoryview, int, "int | None"], "PlainRun | None"]
# Positions in a segment are int32 (index entries, FileRecords): no batch can end past this, so a length
# that says otherwise is damage, never a batch the broker is still writing.
MAX_SEGMENT_BYTES = 2**31 - 1
# Offsets in a segment are its base offset + an int32 delta (LogSegment's relative offsets).
MAX_RELATIVE_OFFSET = 2**31 - 1
# The largest batch read whole: the decompression limit plus a v2 header (kfs.record.compression).
MAX_BATCH_ON_DISK = MAX_BATCH_BYTES + HEADER_PROBE_SIZE
# What an error says of a file whose first batch is not a batch (is_segment), instead of its values.
NOT_A_SEGMENT = ("no record batch with a valid CRC starts at its first byte: not a Kafka log segment, or one "
                 "damaged from its start (nothing read from it is shown)")


def _ahead(with_body: bool, window: int, left: int) -> int:
    """What a body walk asks the kernel to read ahead: its next window, once the walk is long."""
    return min(window, left) if with_body and window >= READ_AHEAD_FROM else 0


class BatchFile(LogFile):
    """One segment's `.log`, read as batches checked where they are. The segment (LogSegment) sets
    its base offset and what it knows of its tail (`_tail[1]`: where complete batches end)."""

    base_offset: int
    _tail: tuple[int, int, int, int]
    _vouched = False  # a batch of this file passed its CRC check (is_segment)

    def is_segment(self) -> bool:
        """Whether the file is a Kafka log segment as far as its first batch shows: the batch at
        position 0 is whole and its CRC holds (or a batch of it already passed its CRC check, or the
        file is empty: nothing to show). Only then do errors name values read from it (`corrupt`)."""
        if self._vouched:
            return True
        try:
            data = memoryview(self.read(0, FIRST_WINDOW))
            if not data:
                return self.file_size() == 0
            size, _ = peek_size(data, 0)
            if size > MAX_BATCH_ON_DISK:
                return False
            if len(data) < size:
                data = memoryview(self.read(0, size))
            if len(data) < size:
                return False
            header = parse_batch_header(data, 0, 0)
            self._vouched = crc_is_valid(data[:size], header)
        except (CorruptBatchError, VanishedError):
            return False
        return self._vouched

    def corrupt(self, position: int, reason: str) -> CorruptLogError:
        """The error for damage at `position`, whose `reason` names values read from the file: as it
        is where the file is a segment (`is_segment`), else NOT_A_SEGMENT."""
        return CorruptLogError(self.log_path, position, reason if self.is_segment() else NOT_A_SEGMENT)

    def headers(self, start: int = 0, end: int | None = None) -> Iterator[BatchHeader]:
        """Headers of the complete batches in [start, end), reading only header bytes."""
        for header, _ in self._walk(start, end, with_body=False):
            yield header

    def header_runs(self, start: int, end: int | None, run: HeaderRunner | None
                    ) -> Iterator[BatchHeader | HeaderRun]:
        """`headers`, where `run` (kfs.storage.header_runs) may take a window's plain headers at once:
        each such run comes as one HeaderRun, the batches it passed over checked as `headers` checks."""
        for header, _ in self._walk(start, end, with_body=False, header_run=run):
            yield header

    def batches(self, start: int = 0, end: int | None = None, take: WindowTaker | None = None
                ) -> Iterator[tuple[BatchHeader, memoryview]]:
        """Complete batches in [start, end) with their bytes (memoryviews of a few large preads);
        `take`: offered the window at each batch first, it may take several plain ones at once
        (yielded as one PlainRun; kfs.views.plain_runs)."""
        yield from self._walk(start, end, with_body=True, take=take)  # type: ignore[misc]

    def _walk(self, start: int, end: int | None, with_body: bool, take: WindowTaker | None = None,
              header_run: HeaderRunner | None = None) -> Iterator[tuple[BatchHeader, memoryview | None]]:
        """Read what the walk needs, no more: a lookup ends after a batch or two, so the first read is
        a page; each read that follows on from the last doubles, up to HEADER_WINDOW (headers only) or
        BODY_WINDOW, so a long walk costs few preads. A header walk that jumps over a batch larger than
        its window starts small again: it needs the next header, not the body it skipped."""
        limit = self.file_size() if end is None else end
        max_window = BODY_WINDOW if with_body else HEADER_WINDOW
        window = FIRST_WINDOW if take is None else STREAM_FIRST_WINDOW
        position = start
        buf = memoryview(b"")
        buf_start = start
        previous_last: int | None = None
        while position + LOG_OVERHEAD <= limit:
            at = position - buf_start
            buf_end = buf_start + len(buf)
            if at < 0 or (at + HEADER_PROBE_SIZE > len(buf) and buf_end < limit):
                if position - buf_end > window:
                    # Jumped over a batch body larger than the next read: start small again. (Past the
                    # window's end by less, as a run of headers mostly ends, mid-body, the reads keep their
                    # size: starting small there kept a header walk's reads at ~5 KiB, 40,000 preads for
                    # 200 MB of __consumer_offsets without indexes.)
                    window = FIRST_WINDOW
                length = min(window, limit - position)
                window = min(2 * window, max_window)
                buf = memoryview(self.read(position, length, _ahead(with_body, window, limit - position - length)))
                buf_start, at = position, 0
            if at + LOG_OVERHEAD > len(buf):
                return  # the file ended early (truncated under us)
            if take is not None:
                run = take(buf[at:limit - buf_start], position, previous_last)
                if run is not None:  # whole plain batches, checked as below (kfs.views.plain_runs)
                    # Their CRCs held, as `records_of`'s check does: the file is a segment (`is_segment`),
                    # whichever walk met its batches first, so an error says the same with the walker or not.
                    self._vouched = self._vouched or run.size > 0
                    previous_last = run.last_offset
                    yield run, None
                    position += run.size
                    continue
            if header_run is not None:
                headers = header_run(buf, at, position, limit, previous_last)
                if headers is not None:  # plain v2 headers, checked as below (kfs.storage.header_runs)
                    previous_last = headers.last_offset
                    position = headers.next_position
                    yield headers, None  # type: ignore[misc]
                    continue
            if buf[at:at + LOG_OVERHEAD] == _ZERO_OVERHEAD:
                if position < self._tail[1]:
                    # Not a preallocated log's zero tail: complete batches were found past this position
                    # (from a checked index entry), so these zeros are a hole where batches were (Kafka's
                    # FileLogInputStream: a batch size below the overhead is a CorruptRecordException).
                    raise CorruptLogError(self.log_path, position, "zeroed bytes where a batch should start, "
                                          f"before complete batches that end at position {self._tail[1]}")
                return  # a preallocated log's zero tail: the end of the data
            if position + HEADER_SIZE_UP_TO_MAGIC > limit:
                return  # a length but no magic yet: a batch still being written (FileLogInputStream.nextBatch)
            try:
                size, _magic = peek_size(buf, at)
                if position + size > MAX_SEGMENT_BYTES:
                    raise CorruptBatchError(f"batch length {size - LOG_OVERHEAD} runs past {MAX_SEGMENT_BYTES} "
                                            "bytes, the most a segment can hold", position)
                if position + size > limit:
                    known_end = self._tail[1]
                    if position < known_end < position + size:
                        # Not a tail being written: complete batches were found past this position
                        # (from a checked index entry), so this length field is damaged.
                        raise CorruptBatchError(f"batch length {size - LOG_OVERHEAD} runs past position "
                                                f"{known_end}, where complete batches end", position)
                    return  # a batch still being written (or cut short): not shown
                if with_body and size > MAX_BATCH_ON_DISK:
                    raise CorruptBatchError(f"a batch of {size} bytes, more than {MAX_BATCH_BYTES >> 20} MiB, "
                                            "kfs's limit for one batch", position)
                if with_body and at + size > len(buf):
                    length = min(max(window, size), limit - position)
                    window = min(2 * window, max_window)
                    buf = memoryview(self.read(position, length, _ahead(with_body, window, limit - position - length)))
                    buf_start, at = position, 0
                    if len(buf) < size:
                        return
                header = parse_batch_header(buf, at, position)
            except CorruptBatchError as e:
                raise self.corrupt(position, str(e)) from None
            problem = self._offsets_problem(header, previous_last)
            if problem is not None:
                raise self.corrupt(position, problem)
            previous_last = header.last_offset
            body = buf[at:at + size] if with_body else None
            yield header, body
            position += size

    def _offsets_problem(self, header: BatchHeader, previous_last: int | None) -> str | None:
        """Why a batch's offsets cannot be where it is, or None. The base offset is outside the CRC: a
        damaged one would otherwise put records at the wrong offsets, or end a walk early."""
        base, last = header.base_offset, header.last_offset
        first = base if base >= 0 or header.magic == 2 else last  # a legacy compressed wrapper's base is
        # known only inside it (its header says -1); a v2 batch's is in its header, whatever it says
        if last < first:
            return f"last offset {last} is below its base offset {base}"
        if first < self.base_offset:
            return f"offset {first} is below the segment's base offset {self.base_offset}"
        if last - self.base_offset > MAX_RELATIVE_OFFSET:
            return (f"offset {last} is past what the segment can hold (its base offset {self.base_offset} "
                    "+ a 32-bit delta)")
        if previous_last is not None and first <= previous_last:
            return f"offsets go backwards: {first} after {previous_last}"
        return None

    def batch_at(self, position: int) -> tuple[BatchHeader, memoryview] | None:
        """The complete batch starting at `position`, or None if there is none: a page, and the rest
        of the batch if it is longer, never more."""
        for found in self._walk(position, None, with_body=True):
            return found  # type: ignore[return-value]
        return None

    def records_of(self, header: BatchHeader, body: memoryview) -> list[Record]:
        """The batch's records, after checking its CRC (a consumer's check.crcs): a flipped bit is
        an error naming the file and position, never a silently wrong value."""
        if not crc_is_valid(body, header):
            raise self.corrupt(header.position, f"CRC mismatch (stored {header.crc})")
        self._vouched = True
        try:
            records = decode_records(body, header)
        except CorruptBatchError as e:
            raise CorruptLogError(self.log_path, header.position, str(e)) from None
        # Offset deltas are inside the CRC, but a batch Kafka wrote holds its records between its base
        # and last offsets, in order (the decoders check the order): a record past them would be shown
        # where no reader of the log looks for it. (A legacy wrapper's base is known only from its
        # records: the segment's base bounds it.)
        lowest = max(header.base_offset, self.base_offset)
        if records and (records[0].offset < lowest or records[-1].offset > header.last_offset):
            raise CorruptLogError(self.log_path, header.position,
                                  f"records at offsets {records[0].offset} to {records[-1].offset}, outside the "
                                  f"batch's offsets {lowest} to {header.last_offset}")
        return records

    def first_offset(self, header: BatchHeader) -> int:
        """A batch's base offset, or its last where that cannot be read (a legacy wrapper's damage)."""
        try:
            return self.base_offset_of(header)
        except CorruptLogError:
            return header.last_offset

    def base_offset_of(self, header: BatchHeader, body: memoryview | None = None) -> int:
        """A batch's base offset; a legacy compressed wrapper needs its body decompressed for it."""
        if header.base_offset < 0:
            if body is None:
                found = self.batch_at(header.position)
                if found is None:
                    return header.last_offset
                body = found[1]
            try:
                complete_legacy_header(header, body)
            except CorruptBatchError as e:
                raise self.corrupt(header.position, str(e)) from None
        return header.base_offset
