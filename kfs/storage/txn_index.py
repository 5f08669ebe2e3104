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

import struct
from typing import NamedTuple

from kfs.storage.files import read_regular

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
