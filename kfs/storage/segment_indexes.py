"""A segment's index files, `.index`, `.timeindex` and `.txnindex`: hints, never the truth.

Each may be missing, unusable (torn, garbage, no permission) or not a regular file. Read here, a
problem is one warning per segment and an empty answer, never an error: the segment then scans its
`.log`, as Kafka's recovery rebuilds an index from the log. Whether an entry agrees with the log is
`LogSegment`'s to check (kfs.storage.segment), which holds the log.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import TypeVar

from kfs.storage.files import refusals
from kfs.storage.index import OffsetIndex, TimeIndex
from kfs.storage.log_file import LogFile
from kfs.storage.txn_index import AbortedTxn, TransactionIndex

_T = TypeVar("_T")
log = logging.getLogger("kfs")


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


class SegmentIndexes:
    """The three index files of the segment whose `.log` is `segment_log` (its name and refusal are
    read from it when needed: a swapped segment is renamed, a `.log` may be refused at open)."""

    def __init__(self, segment_log: LogFile, directory: str, base_offset: int, suffix: str,
                 follow_links: bool) -> None:
        self._log = segment_log
        self._base_offset = base_offset
        self.offset = OffsetIndex(os.path.join(directory, segment_file_name(base_offset, ".index" + suffix)),
                                  base_offset, follow_links)
        self.time = TimeIndex(os.path.join(directory, segment_file_name(base_offset, ".timeindex" + suffix)),
                              base_offset, follow_links)
        self.txn = TransactionIndex(os.path.join(directory, segment_file_name(base_offset, ".txnindex" + suffix)))
        self._warned = False

    def renamed(self, stem: str, suffix: str) -> None:
        """The files now end in `suffix` (`LogSegment.renamed`)."""
        self.offset.path = stem + ".index" + suffix
        self.time.path = stem + ".timeindex" + suffix
        self.txn.path = stem + ".txnindex" + suffix

    def close(self) -> None:
        self.offset.close()
        self.time.close()

    def safe(self, call: Callable[[], _T]) -> _T | None:
        """`call`'s answer, or None where the index is missing or unusable (warned once)."""
        if self._log.refused is not None:
            return None  # no index of a `.log` that is not read: its segment is damage from position 0
        try:
            return call()
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            self.problem(f"{e}")
            return None

    def problem(self, reason: str) -> None:
        """Warn, once per segment, that an index is not used and why (never values read from it)."""
        if not self._warned:
            self._warned = True
            log.warning("%s: index unusable (%s); scanning the log instead", self._log.log_path, reason)

    def last_entries(self, count: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        """The last `count` entries of the offset index and of the time index ([] for one that is
        missing or unusable): what kfs.storage.damage's rule 3 reads, a page of each."""
        return (self.safe(lambda: self.offset.last_entries(count)) or [],
                self.safe(lambda: self.time.last_entries(count)) or [])

    def offset_entries(self) -> list[tuple[int, int]]:
        return self.safe(self.offset.entries) or []

    def time_entries(self, active: bool = False) -> list[tuple[int, int]]:
        """The time index entries; for the active segment, those the broker holds in memory.

        Kafka appends time index entries only together with offset index entries while a segment
        is active, and one more (the largest timestamp so far) when it closes the segment
        (`LogSegment.close`, `onBecomeInactiveSegment`). A still-active segment's entry past its
        last offset index entry is that close-time entry, which a running broker does not have.
        """
        entries = self.safe(self.time.entries) or []
        if active and entries:
            offsets = self.offset_entries()
            last_indexed = offsets[-1][0] if offsets else self._base_offset - 1
            entries = [e for e in entries if e[1] <= last_indexed]
        return entries

    def aborted(self) -> list[AbortedTxn] | None:
        """Entries of the `.txnindex`, or None if the segment has none or it cannot be read
        (`TransactionIndex.aborted`): callers then follow the transaction markers."""
        return self.txn.aborted()

    def refusals(self) -> list[str]:
        """A sentence for each index file that is there but is not a regular file, with what kfs
        does instead; for `info()`'s problems."""
        return refusals(((self.offset.path, "offset lookups scan the log instead"),
                         (self.time.path, "time lookups scan the log instead"),
                         (self.txn.path, "read_committed follows the log's transaction markers")))
