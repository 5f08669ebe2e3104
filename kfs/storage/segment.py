"""One log segment: `<base offset>.log` with its `.index`, `.timeindex` and `.txnindex`.

Follows Kafka's `LogSegment`: the indexes are hints, the log is the truth. `translate_offset`
looks up the offset index and scans batch headers from the position it gives
(`FileRecords.searchForOffsetFromPosition`); `find_offset_by_timestamp` goes time index → offset
index → scan (`LogSegment.findOffsetByTimestamp`). A missing, truncated or inconsistent index is
never trusted blindly: an entry is used only if a batch header really starts at its position and
that batch does not begin past the entry's offset; otherwise the scan starts at position 0, as
Kafka's recovery rebuilds an index by scanning the log.

The log is read with `pread` into buffers, never mmapped: a segment truncated under a mapping
would SIGBUS the daemon. Only complete batches are ever returned: a live segment may end in a
batch the broker is still writing (or, with `log.preallocate`, in zeros).

Beside it: the `.log` read as checked batches (kfs.storage.batch_walk), the index files read as
hints (segment_indexes), the one-walk lookups over an index interval (interval_walk) and the marks
of a walk without a usable index (walk_marks).
"""

from __future__ import annotations

import logging
import os
import threading

from kfs._native.storage import find_v2_batch as _find_v2_batch
from kfs.record import BatchHeader, Record, crc_is_valid
from kfs.storage.batch_walk import BatchFile
from kfs.storage.errors import CorruptLogError, VanishedError
from kfs.storage.files import NotARegularFile
from kfs.storage.header_runs import HeaderRun, header_runner
from kfs.storage.interval_walk import Interval, batch_in_interval, compiled_batch_in_interval, record_in_interval
from kfs.storage.segment_indexes import SegmentIndexes, segment_file_name
from kfs.storage.txn_index import AbortedTxn
from kfs.storage.walk_marks import WalkMarks

log = logging.getLogger("kfs")
TAIL_PROBE_BYTES = 12  # a batch's offset and length fields: zeros in a preallocated log's tail


class LogSegment(BatchFile):
    """A segment's files, opened lazily; thread-safe for concurrent readers."""

    def __init__(self, directory: str, base_offset: int, inode: int | None = None, log_path: str | None = None,
                 suffix: str = "", refused: NotARegularFile | None = None, follow_links: bool = False) -> None:
        """log_path: the `.log` under another name than `<20-digit base offset>.log` (a file given to
        `kfs dump`); its indexes are still looked for under their segment names. suffix: ".swap" for a
        cleaned segment not yet renamed (`<base>.log.swap`, `<base>.index.swap`, ...). refused: the
        `.log` is not a regular file (the listing saw its entry type): never opened, read as empty.
        follow_links: its files may be symbolic links (files named on `kfs dump`'s command line)."""
        super().__init__(log_path or os.path.join(directory, segment_file_name(base_offset, ".log" + suffix)),
                         refused, follow_links)
        self.directory = directory
        self.base_offset = base_offset
        self.suffix = suffix
        self.inode = inode  # of the `.log` when listed: a different inode later is a different segment
        self.indexes = SegmentIndexes(self, directory, base_offset, suffix, follow_links)
        self.offset_index = self.indexes.offset
        self.time_index = self.indexes.time
        # What we know of the complete batches: (file size when walked, end of the last complete
        # batch, last offset + 1 of it, largest batch max timestamp seen past the time index).
        self._tail = (-1, 0, base_offset, -1)
        # The bytes at the end of the complete batches when the walk stopped before the file's end (a
        # batch being written, or a preallocated log's zeros): a broker with log.preallocate appends
        # into the zeros without changing the file's size, so a size that did not change is not enough.
        self._tail_probe: bytes | None = None
        self._tail_lock = threading.RLock()
        # Without a usable offset index, the tail walk from position 0 leaves marks behind: (last
        # offset, position) of a batch every MARK_BYTES, up to `walked to` (WalkMarks).
        self._marks: WalkMarks | None = None
        self._truncations = 0  # times the tail walk found the file shorter than it was
        self._tail_error: CorruptLogError | None = None  # what the tail walk met instead of batches

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path})"

    def renamed(self, suffix: str) -> None:
        """The segment's files now end in `suffix` (a `.swap` renamed to its final name): the same
        files, found by their new names when next opened (an open descriptor or map stays valid)."""
        stem = os.path.join(self.directory, segment_file_name(self.base_offset, ""))
        self.log_path = stem + ".log" + suffix
        self.indexes.renamed(stem, suffix)
        self.suffix = suffix

    def close(self) -> None:
        """Close the `.log` descriptor (reopened on next use) and the index maps."""
        super().close()
        self.indexes.close()

    # ---- what the broker keeps in memory --------------------------------------------------------

    def _refresh_tail(self) -> tuple[int, int, int, int]:
        """Walk the batches past the last known complete one (all of them on first use), and return
        (file size walked, end of complete batches, next offset, largest timestamp past the index).

        Starts from the last offset index entry when it is usable, so a large segment costs a
        walk of its last few KiB, and a growing one only of what was appended since. One walk at
        a time, and its result is published whole: a concurrent reader never sees a half-walked end.
        """
        with self._tail_lock:
            size = self.file_size()
            walked, valid_end, next_offset, tail_max = self._tail
            if size == walked and (valid_end >= size or self._probe(valid_end, size) == self._tail_probe):
                return self._tail
            start = valid_end
            from_entry = False
            marks = self._marks
            tail_error = self._tail_error
            if size < valid_end:
                self._truncations += 1
            if start == 0 or size < valid_end:
                start, next_offset, tail_max = 0, self.base_offset, -1
                tail_error = None
                marks = None
                entry = self._checked_index_entry(None)
                if entry is not None:
                    start, from_entry = entry[1], True
                valid_end = start
            if not from_entry and start == 0:
                marks = WalkMarks()  # (a walk with no index to start it: remember where it went)
            elif marks is None or marks.to != start:
                marks = None  # (marks go on only from where they stopped)
            try:
                try:
                    # (runs of plain headers taken in C leave the marks themselves: kfs.storage.header_runs)
                    for header in self.header_runs(start, size, header_runner(self.base_offset, marks)):
                        if marks is not None and not isinstance(header, HeaderRun):
                            marks.passing(header)
                        valid_end = header.next_position
                        next_offset = max(next_offset, header.last_offset + 1)
                        tail_max = max(tail_max, header.max_timestamp)
                except CorruptLogError:
                    if not from_entry:
                        raise
                    # The walk began at the last index entry and met garbage: the entry may be what
                    # is wrong (a batch inside a record's bytes); the whole segment decides.
                    start, valid_end, next_offset, tail_max = 0, 0, self.base_offset, -1
                    marks = WalkMarks()
                    for header in self.headers(0, size):
                        marks.passing(header)
                        valid_end = header.next_position
                        next_offset = max(next_offset, header.last_offset + 1)
                        tail_max = max(tail_max, header.max_timestamp)
            except CorruptLogError as e:
                # Not a half-written tail but garbage: keep the bytes in view, so a read meets the
                # error (EIO, or an error line with on_corrupt=skip) instead of a silently shorter log.
                log.warning("%s; the segment's end is taken as its file size", e)
                valid_end = size
                tail_error = e
            self._marks = marks  # (up to the last complete batch walked, damage or not)
            self._tail_probe = self._probe(valid_end, size) if valid_end < size else None
            self._tail_error = tail_error
            self._tail = (size, valid_end, next_offset, tail_max)
            return self._tail

    def tail_error(self) -> CorruptLogError | None:
        """The garbage the walk of the segment's batch headers met (a read there fails), if any: for
        `info()`, which otherwise reads no batch of a segment."""
        self._refresh_tail()
        return self._tail_error

    def _probe(self, valid_end: int, size: int) -> bytes:
        """The bytes after the complete batches: a batch's offset and length fields, or what there is of them."""
        return self.read(valid_end, min(TAIL_PROBE_BYTES, size - valid_end))

    def valid_size(self) -> int:
        """Bytes of complete batches (a live segment may end in a half-written one)."""
        return self._refresh_tail()[1]

    def next_offset(self) -> int:
        """The offset after the last batch: the log end offset if this is the active segment."""
        return self._refresh_tail()[2]

    def largest_timestamp(self) -> int:
        """`LogSegment.largestTimestamp`: the time index's last entry, or a newer batch after it.

        The last entry (T, offset) says no batch up to the one holding `offset` has a timestamp past
        T, so only the batches from that one on are read. A last entry out of order with the one
        before it, or that the log does not confirm, is ignored, and every batch header is read
        instead. Only the last entry and the one before it are read (one page or two, as Kafka reads
        the last entry once), never the whole index.
        """
        valid_end = self.valid_size()
        checked = self._checked_time_entry(self._in_order_entry(self.indexes.safe(self.time_index.last_in_order)))
        if checked is None:
            marks = self._marks_from_start()
            if marks is not None and marks.to >= valid_end:
                return marks.largest_time  # every batch walked once (a live segment's: since, in place)
            return max((h.max_timestamp for h in self.headers(0, valid_end)), default=-1)
        (timestamp, _), header = checked
        return max(timestamp, max((h.max_timestamp for h in self.headers(header.position, valid_end)), default=-1))

    def _checked_time_entry(self, entry: tuple[int, int] | None
                            ) -> tuple[tuple[int, int], BatchHeader] | None:
        """A time index entry (timestamp, offset) and the batch holding its offset, if that batch's
        max timestamp is the entry's; else None, and the caller scans. The entry comes in order with
        its neighbours (`_in_order_entry`: Kafka appends entries only with a larger timestamp).

        Each entry is (largest timestamp so far, offset of the batch that has it), so the log can
        confirm it with one offset lookup and a short scan; garbage never passes.
        """
        if entry is None:
            return None
        timestamp, offset = entry
        found = None
        if self.base_offset <= offset < self.next_offset():
            try:
                found = self.translate_offset(offset)
            except (CorruptLogError, VanishedError):
                found = None
        if found is None or found[1].max_timestamp != timestamp or self.first_offset(found[1]) > offset:
            self.indexes.problem("a time index entry does not match the log")  # (no values: see is_segment)
            return None
        return entry, found[1]

    def _in_order_entry(self, found: tuple[tuple[int, int] | None, bool] | None) -> tuple[int, int] | None:
        """The entry of a time index search (`lookup_in_order`, `last_in_order`) if the index is in
        order around it; None (and a warning) if not: a binary search of an index out of order may
        land anywhere, so the caller scans."""
        if found is None:
            return None
        entry, in_order = found
        if entry is not None and not in_order:
            self.indexes.problem("the time index is out of order")
            return None
        return entry

    def last_index_entries(self, count: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        return self.indexes.last_entries(count)

    def offset_index_entries(self) -> list[tuple[int, int]]:
        return self.indexes.offset_entries()

    def time_index_entries(self, active: bool = False) -> list[tuple[int, int]]:
        """The time index entries; for the active segment, those the broker holds in memory."""
        return self.indexes.time_entries(active)

    @property
    def txn_index_path(self) -> str:
        return self.indexes.txn.path

    def aborted_transactions(self) -> list[AbortedTxn] | None:
        return self.indexes.aborted()

    def index_refusals(self) -> list[str]:
        return self.indexes.refusals()

    # ---- index lookups, checked against the log -------------------------------------------------

    def _checked_index_entry(self, target_offset: int | None) -> tuple[int, int] | None:
        """`OffsetIndex.lookup(target)` (the last entry if target is None), if the log agrees with it:
        a whole batch with a valid CRC starts at its position (bytes inside a batch may look like a
        header), and that batch does not start past the entry's offset (a legacy compressed
        wrapper's base offset is read from inside it). A scan from there then finds every offset
        at or past the entry's."""
        following: tuple[int, int] | None = None
        if target_offset is None:
            entries = self.indexes.safe(self.offset_index.entry_count)
            entry = self.indexes.safe(lambda: self.offset_index.entry(entries - 1)) if entries else None
        else:
            found_pair = self.indexes.safe(lambda: self.offset_index.lookup_with_next(target_offset))
            entry, following = found_pair or (None, None)
        if entry is None:
            return None
        offset, position = entry
        good = False
        if offset >= self.base_offset and 0 <= position < self.file_size():
            try:
                found = self.batch_at(position)
                crc_holds = found is not None and crc_is_valid(found[1], found[0])
                self._vouched = self._vouched or crc_holds
                good = (found is not None and crc_holds and self.base_offset_of(found[0], found[1]) <= offset
                        and (target_offset is None or self._walk_lands(position, following)))
            except (CorruptLogError, VanishedError):
                good = False
        if not good:
            self.indexes.problem("an offset index entry does not match the log")  # (no values: see is_segment)
            return None
        return entry

    def _walk_lands(self, position: int, following: tuple[int, int] | None) -> bool:
        """Whether the batch headers from `position` lead exactly to the next index entry's position
        (or to the end of the complete batches): a batch inside another one's bytes (a record's value
        may hold a whole batch, CRC and all) does not."""
        end = following[1] if following is not None and following[1] > position else self.valid_size()
        reached = position
        for header in self.headers(position, end):
            reached = header.next_position
        return reached == end

    def indexed_batch(self, target: int) -> tuple[BatchHeader, memoryview] | None:
        """The batch holding `target` (the first whose last offset reaches it), found in one walk
        over the index interval around it (kfs.storage.interval_walk): from the entry at or below
        `target` to the next entry's batch (an entry names a batch by its last offset, so `target`
        may be in that one). What `translate_offset` and the read of the batch do in four walks,
        with the same checks. The compiled walk (find_v2_batch) takes the interval first when it
        can. None when the interval is not a plain one (the last entry, no index, damage): the
        caller then takes the general path, which says what is wrong."""
        interval = self._plain_interval(target)
        if interval is None:
            return None
        if _find_v2_batch is not None:
            compiled = compiled_batch_in_interval(self, _find_v2_batch, interval, target)
            if compiled is not None:
                return compiled
        return batch_in_interval(self, interval, target)

    def _plain_interval(self, target: int) -> Interval | None:
        """The offset index entry at or below `target`, the next entry's position and the end of the
        complete batches, when the entry lies inside the index (not the last) and in the segment."""
        pair = self.indexes.safe(lambda: self.offset_index.lookup_with_next(target))
        if pair is None:
            return None
        entry, following = pair
        if entry is None or following is None:
            return None
        _, end = following
        offset, position = entry
        limit = self.valid_size()
        if offset < self.base_offset or not 0 <= position < end < limit:
            return None
        return entry, end, limit

    def translate_offset(self, target: int, starting_position: int = 0
                         ) -> tuple[tuple[int, int] | None, BatchHeader] | None:
        """`LogSegment.translateOffset`: (index entry used, first batch whose last offset >= target)."""
        entry = self._checked_index_entry(target)
        end = self.valid_size()
        start = max(entry[1] if entry else 0, starting_position, self._marked_position(target, end))
        for header in self.headers(start, end):
            if header.last_offset >= target:
                return entry, header
        return None

    def _marked_position(self, target: int, end: int) -> int:
        """Where a walk left a mark at or below `target` (0 without marks): a batch whose last offset
        is at most `target` starts there, so the batch holding it does there or later."""
        marks = self._marks
        return marks.position_at_or_below(target, end) if marks is not None else 0

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int
                                 ) -> tuple[tuple[int, int] | None, Record, BatchHeader] | None:
        """`LogSegment.findOffsetByTimestamp` + `FileRecords.searchForTimestamp`.

        The offset index entry used (and reported) is Kafka's: the one for the time index entry at or
        below the target. The scan starts no later than the batch of the last entry strictly below
        the target: only that entry says no record before it reaches the target, which a damaged
        index could otherwise get wrong. Control records count here, as in Kafka: a lookup may land
        on a transaction marker. Most lookups are answered by `_timed_record` in one walk; this
        path is for the rest (an entry at T itself, the last interval, no index, damage).
        """
        quick = self._timed_record(timestamp, starting_offset)
        if quick is not None:
            return quick
        searched = self.indexes.safe(lambda: self.time_index.lookup_in_order(timestamp))
        indexed = searched[0] if searched is not None else None
        hint = self._checked_time_entry(self._in_order_entry(searched))
        hint_offset = hint[0][1] if hint else self.base_offset
        entry = self._checked_index_entry(max(hint_offset, starting_offset))
        start = entry[1] if entry else 0
        if hint is None and (indexed is not None or not self.indexes.safe(self.time_index.entry_count)):
            # No time index to say where to start (none, or one the log does not confirm; not a
            # target below its first entry, whose record is near the start anyway): the walk marks
            # know, from the log, the batches before which no record reaches the target.
            marks = self._marks_from_start()
            if marks is not None:
                start = max(start, marks.position_before_time(timestamp, self.valid_size()))
        if hint is not None and hint[0][0] >= timestamp:
            below = self._checked_time_entry(
                self._in_order_entry(self.indexes.safe(lambda: self.time_index.lookup_in_order(timestamp - 1))))
            below_entry = self._checked_index_entry(max(below[0][1], starting_offset)) if below else None
            start = min(start, below_entry[1] if below_entry else 0)
        for header, body in self.batches(start, self.valid_size()):
            if header.max_timestamp >= timestamp:
                for record in self.records_of(header, body):
                    if record.timestamp >= timestamp and record.offset >= starting_offset:
                        return entry, record, header
        return None

    def _marks_from_start(self) -> WalkMarks | None:
        """Marks over every batch of the segment, for time lookups no time index can start: the tail
        walk's when it walked from position 0 (no usable offset index), else made now by one walk
        of the batch headers from 0, as Kafka rebuilds a missing index at recovery, and kept as the
        tail walk's are (grown in place with the segment, dropped when it is truncated). None when
        the walk meets damage (the lookup's own scan then reports it)."""
        truncations = self._truncations
        valid_end = self.valid_size()
        marks = self._marks
        if marks is not None:
            return marks
        made = WalkMarks()
        try:
            for header in self.headers(0, valid_end):
                made.passing(header)
            with self._tail_lock:
                end = self._tail[1]
                if self._marks is None and self._truncations == truncations and made.to <= end:
                    for header in self.headers(made.to, end):  # what the segment grew by meanwhile
                        made.passing(header)
                    if made.to == end:  # the segment is as walked, only longer: keep them
                        self._marks = made
        except CorruptLogError:
            return None
        return made

    def _timed_record(self, timestamp: int, starting_offset: int
                      ) -> tuple[tuple[int, int], Record, BatchHeader] | None:
        """`find_offset_by_timestamp` in one walk (kfs.storage.interval_walk.record_in_interval), for
        the plain case: the time index entry below the target (T', O) lies inside the offset index,
        between two entries, and O >= starting_offset. None when any check fails or the case is not
        this one: the general path then says what is wrong and scans as before."""
        searched = self.indexes.safe(lambda: self.time_index.lookup_in_order(timestamp))
        if searched is None or searched[0] is None or not searched[1]:
            return None
        hint = searched[0]
        hint_timestamp, hint_offset = hint
        if hint_timestamp >= timestamp or hint_offset < starting_offset or hint_offset < self.base_offset:
            return None  # an entry at T itself: the general path also looks below it
        interval = self._plain_interval(hint_offset)
        if interval is None:
            return None
        return record_in_interval(self, interval, hint, timestamp, starting_offset)
