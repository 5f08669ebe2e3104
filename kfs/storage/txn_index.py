"""The `.txnindex`: aborted transactions of a segment (Kafka's `TransactionIndex`, `AbortedTxn`).

    entry (34 bytes, big-endian):
      version            int16   (0)
      producer_id        int64
      first_offset       int64   first offset of the aborted transaction
      last_offset        int64   offset of its ABORT marker
      last_stable_offset int64   the LSO when it was aborted

A read_committed consumer drops a transactional batch of producer P if an aborted transaction of P
spans the batch's base offset.
"""

from __future__ import annotations

import logging
import struct
from typing import NamedTuple

from kfs.storage.files import NotARegularFile, read_regular

log = logging.getLogger("kfs")

_ENTRY = struct.Struct(">hqqqq")


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def read_txn_index(path: str) -> list[AbortedTxn]:
    """Every complete entry of the file; a torn last entry (a live broker mid-write) is left out.
    NotARegularFile (kfs.storage.files) unless it is a regular file; OSError as reading raises it."""
    data = read_regular(path)
    usable = len(data) - len(data) % _ENTRY.size
    return [AbortedTxn(pid, first, last, lso) for _version, pid, first, last, lso in _ENTRY.iter_unpack(data[:usable])]


class TransactionIndex:
    """A segment's `.txnindex` as reads use it: read when asked (reads that need no index never open it)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._warned = False

    def aborted(self) -> list[AbortedTxn] | None:
        """Its entries, or None if the segment has none (callers then follow markers).

        One that cannot be read (not a regular file, no permission, an I/O error) is taken as none, with
        a warning: read_committed then follows the segment's transaction markers, as it does where a
        `.txnindex` is missing (docs/spec.md section 3) or disagrees with them (kfs.storage.transactions). Kafka
        fails such a read_committed fetch (TransactionIndex: a KafkaException, which the consumer sees as
        an error and retries; one it cannot open at startup takes its log dir offline); kfs reads the
        markers, which it trusts over the index anyway."""
        try:
            return read_txn_index(self.path)
        except FileNotFoundError:
            return None
        except (OSError, NotARegularFile) as e:
            if not self._warned:
                self._warned = True
                reason = e if isinstance(e, NotARegularFile) else f"{self.path}: {e.strerror or e}"
                log.warning("%s; read_committed follows the segment's transaction markers instead", reason)
            return None
