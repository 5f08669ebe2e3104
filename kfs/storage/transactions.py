"""Aborted transactions of a partition, for read_committed: which transactional batches to hide.

The `.txnindex` of each segment lists them (`TransactionIndex`), but kfs takes them from the
log's markers, as the broker's `ProducerStateManager` rebuilds them on recovery, and checks the
index against them (collect_aborted says why).
"""

from __future__ import annotations

import hashlib
import logging

from kfs.record import BatchHeader, CorruptBatchError, Record, parse_control_record
from kfs.storage.errors import CorruptLogError
from kfs.storage.segment import LogSegment
from kfs.storage.txn_index import AbortedTxn

log = logging.getLogger("kfs")


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
    """The aborted transactions the log's markers say (as the broker rebuilds them on recovery),
    with each segment's `.txnindex` as a cross-check only.

    The `.txnindex` is derived data outside any CRC: a damaged one (an entry changed, dropped or
    added) made read_committed hide committed records or show aborted ones without a word (found
    by the campaign's oracle, 70 of 1,500 damaged indexes). The markers are in the log, checked by
    its CRCs, so they decide; an index that disagrees with them is named in the log. Where a
    segment cannot be walked (damage), its `.txnindex` stands in for its markers.
    """
    index = AbortedIndex()
    open_txn: dict[int, int] = {}
    for segment in segments:
        try:
            refused = segment.refusal()
            if refused is not None:
                raise refused  # a `.log` that is not a regular file has no markers to read
            found = aborted_from_markers(segment, open_txn)
        except CorruptLogError as e:
            listed = segment.aborted_transactions()
            log.warning("%s; read_committed takes this segment's aborted transactions from its .txnindex (%s)",
                        e, "none" if listed is None else len(listed))
            index.extend(listed or [])
            continue
        listed = segment.aborted_transactions()
        if listed is not None and _spans(listed) != _spans(found):
            log.warning("%s does not match the segment's transaction markers; read_committed follows the markers",
                        segment.txn_index_path)
        index.extend(found)
    return index


def _spans(entries: list[AbortedTxn]) -> set[tuple[int, int]]:
    """(producer, ABORT marker offset) of each entry: the first offsets may legitimately differ, for
    a transaction that began before the log start (deleted by retention)."""
    return {(txn.producer_id, txn.last_offset) for txn in entries}


def aborted_from_markers(segment: LogSegment, open_txn: dict[int, int]) -> list[AbortedTxn]:
    """The transactions a segment's ABORT markers close, as the broker's ProducerStateManager finds
    them: a producer's transaction starts at its first transactional batch after its last marker
    (`open_txn`, carried from segment to segment) and ends at its COMMIT or ABORT marker.

    A marker that cannot be read (its batch's CRC fails, its key or value is short) is damage, which
    every read reaching it reports; the transaction it ends is decided by the segment's `.txnindex`
    (aborted if an entry ends at its offset, else committed), and the markers around it still decide
    the rest: taking the whole segment from its index left the transaction open, and the next marker
    of that producer (an ABORT in a later segment) hid the committed records before the damage."""
    found: list[AbortedTxn] = []
    listed: list[AbortedTxn] | None = None
    for header in segment.headers(0, segment.valid_size()):
        if not header.is_transactional:
            continue
        if not header.is_control:
            open_txn.setdefault(header.producer_id, segment.base_offset_of(header))
            continue
        batch = segment.batch_at(header.position)
        if batch is None:
            continue
        try:
            kinds = marker_kinds(segment, header, segment.records_of(*batch))
        except CorruptLogError as e:
            if listed is None:
                listed = segment.aborted_transactions() or []
            found.extend(_undecided(e, header, open_txn, listed))
            continue
        for kind, _ in kinds:
            start = open_txn.pop(header.producer_id, header.last_offset)
            if kind == "ABORT":
                found.append(AbortedTxn(header.producer_id, start, header.last_offset, -1))
    return found


def _undecided(error: CorruptLogError, header: BatchHeader, open_txn: dict[int, int],
               listed: list[AbortedTxn]) -> list[AbortedTxn]:
    """The transaction a damaged marker ends, as the segment's `.txnindex` has it (said at info level: the
    damage itself is the error of every read that reaches it)."""
    entry = next((txn for txn in listed if txn.last_offset == header.last_offset), None)
    if entry is None:
        open_txn.pop(header.producer_id, None)
        log.info("%s; read_committed takes the transaction it ends as committed (no aborted transaction ends "
                 "there in the segment's .txnindex)", error)
        return []
    log.info("%s; read_committed takes the transaction it ends as aborted, as the segment's .txnindex says", error)
    return [AbortedTxn(entry.producer_id, open_txn.pop(entry.producer_id, entry.first_offset), entry.last_offset, -1)]


def marker_kinds(segment: LogSegment, header: BatchHeader, records: list[Record]) -> list[tuple[str, int | None]]:
    """(type name, coordinator epoch or None) of each record of a control batch. A record Kafka refuses
    (`ControlRecordType.parse`: a key of fewer than 4 bytes; `EndTransactionMarker.deserializeValue`: a
    COMMIT or ABORT value of fewer than 6) is damage at the batch, as a record that does not decode:
    CorruptLogError."""
    try:
        return [parse_control_record(record) for record in records]
    except CorruptBatchError as e:  # (the batch's CRC held: the file is a segment, its values may be named)
        raise CorruptLogError(segment.log_path, header.position, str(e)) from None
