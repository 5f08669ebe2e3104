"""Aborted transactions of a partition, for read_committed: which transactional batches to hide.

The `.txnindex` of each segment lists them (`TransactionIndex`); where one is missing they are
rebuilt from the markers as the broker's `ProducerStateManager` does on recovery.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from kfs.record import BatchHeader, parse_control_record
from kfs.storage.segment import LogSegment
from kfs.storage.txn_index import AbortedTxn


class AbortedIndex:
    """Aborted transactions by producer, for the read_committed check of each transactional batch."""

    def __init__(self) -> None:
        self._by_producer: dict[int, list[tuple[int, int]]] = {}

    def extend(self, entries: list[AbortedTxn]) -> None:
        for txn in entries:
            self._by_producer.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))

    def digest(self) -> str:
        """A short digest of every aborted span: what read_committed hides, as a cache key."""
        text = repr(sorted((producer, sorted(spans)) for producer, spans in self._by_producer.items()))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def is_aborted(self, header: BatchHeader) -> bool:
        spans = self._by_producer.get(header.producer_id)
        if not spans:
            return False
        base = header.base_offset if header.base_offset >= 0 else header.last_offset
        return any(first <= base <= last for first, last in spans)


def collect_aborted(segments: list[LogSegment]) -> AbortedIndex:
    """Every segment's `.txnindex`; when any is missing, the markers of the whole log as well."""
    index = AbortedIndex()
    missing = False
    for segment in segments:
        entries = segment.aborted_transactions()
        if entries is None:
            missing = True
        else:
            index.extend(entries)
    if missing:
        index.extend(aborted_from_markers(segments))
    return index


def aborted_from_markers(segments: Iterable[LogSegment]) -> list[AbortedTxn]:
    """Rebuild aborted transactions as the broker does (ProducerStateManager): first offset of
    each producer's open transaction, closed by its COMMIT or ABORT marker."""
    open_txn: dict[int, int] = {}
    found: list[AbortedTxn] = []
    for segment in segments:
        for header in segment.headers(0, segment.valid_size()):
            if not header.is_transactional:
                continue
            if not header.is_control:
                open_txn.setdefault(header.producer_id, segment.base_offset_of(header))
                continue
            batch = segment.batch_at(header.position)
            if batch is None:
                continue
            for record in segment.records_of(*batch):
                kind, _ = parse_control_record(record)
                start = open_txn.pop(header.producer_id, header.last_offset)
                if kind == "ABORT":
                    found.append(AbortedTxn(header.producer_id, start, header.last_offset, -1))
    return found
