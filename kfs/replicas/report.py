"""One partition's copies side by side (docs/spec.md section 10): the reference, each copy's
truncation by Kafka's rule, what it would lose, and where it first differs.

The reference copy is the broker given (`--leader`), else the last leader the KRaft metadata log
among the log dirs names (kfs.replicas.witness) if it holds a copy, else the copy whose last batch
carries the highest partition leader epoch (ties: the longest log, then the lowest broker id).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field

from kfs.internal_topics.lines import line_decoder
from kfs.record import Record
from kfs.replicas.brokers import Broker, topic_id
from kfs.replicas.compare import first_difference
from kfs.replicas.epochs import EpochCache, read_epoch_checkpoint
from kfs.replicas.scan import CopyScan, count_records, scan_copy
from kfs.replicas.truncation import LogView, Truncation, follower_truncation
from kfs.replicas.witness import ClusterMetadata, PartitionHistory
from kfs.storage import KfsError, PartitionLog
from kfs.storage.checkpoints import CheckpointReader
from kfs.views.jsonl import line_prefix, render_lines


@dataclass
class Copy:
    """One broker's copy of the partition, read (batch headers, checkpoints)."""

    broker: int
    plog: PartitionLog
    topic_id: str | None
    scan: CopyScan
    epochs: EpochCache
    high_watermark: int | None
    cleaned_to: int | None  # cleaner-offset-checkpoint entry (0: never cleaned), None without the file
    checkpoint_epochs: list[tuple[int, int]] | None
    notes: list[str] = field(default_factory=list)

    @property
    def view(self) -> LogView:
        return LogView(self.epochs, self.scan.log_start_offset, self.scan.log_end_offset, self.high_watermark)


@dataclass
class ReplicaReport:
    """What one copy would lose on following the reference (the reference's own: nothing)."""

    copy: Copy
    truncation: Truncation
    truncated_records: int
    lost_committed_records: int
    first_difference: int | None
    compared: str | None

    def as_json(self) -> dict:
        c = self.copy
        return {
            "broker": c.broker,
            "log_start_offset": c.scan.log_start_offset,
            "log_end_offset": c.scan.log_end_offset,
            "high_watermark": c.high_watermark,
            "epochs": [list(e) for e in c.epochs.entries()],
            "checkpoint_epochs": [list(e) for e in c.checkpoint_epochs] if c.checkpoint_epochs is not None else None,
            "truncate_to": self.truncation.truncate_to,
            "truncated_records": self.truncated_records,
            "lost_committed_records": self.lost_committed_records,
            "first_difference": self.first_difference,
            "compared": self.compared,
            "truncation_rule": self.truncation.rule,
            "truncation_rounds": [r.as_json() for r in self.truncation.rounds],
            "cleaned_to": c.cleaned_to,
            "topic_id": c.topic_id,
            "path": c.plog.path,
            "notes": list(c.notes),
        }


@dataclass
class PartitionReplicas:
    """A partition held by several brokers, compared (`error` set when its copies cannot be)."""

    topic: str
    partition: int
    leader: int | None
    leader_from: str
    replicas: list[ReplicaReport]
    witness: PartitionHistory | None = None
    notes: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def lost_committed(self) -> bool:
        return any(r.lost_committed_records > 0 for r in self.replicas)

    def replica(self, broker: int) -> ReplicaReport:
        for report in self.replicas:
            if report.copy.broker == broker:
                return report
        held = ", ".join(str(r.copy.broker) for r in self.replicas)
        raise KfsError(f"broker {broker} holds no copy of {self.name} here (copies on brokers {held})")

    def as_json(self) -> dict:
        found: dict = {"topic": self.topic, "partition": self.partition, "leader": self.leader,
                       "leader_from": self.leader_from, "replicas": [r.as_json() for r in self.replicas],
                       "witness": None, "notes": list(self.notes)}
        if self.witness is not None:
            found["witness"] = {"topic_id": self.witness.topic_id, "history": list(self.witness.changes)}
        if self.error is not None:
            found["error"] = self.error
        return found


def read_copy(broker: Broker, name: str) -> Copy:
    """A broker's copy of a partition: its batch headers and the checkpoints beside them."""
    plog = broker.logdirs.partition(name)
    scan = scan_copy(plog)
    epochs = EpochCache.from_batches(scan.epoch_rows(), scan.log_start_offset)
    checkpoint, problem = read_epoch_checkpoint(plog.path)
    cleaned = CheckpointReader(_logdir(plog)).cleaned_up_to(plog.topic, plog.partition)
    copy = Copy(broker.id, plog, topic_id(plog), scan, epochs, broker.high_watermark(plog), cleaned, checkpoint)
    copy.notes.extend(_checkpoint_notes(copy, problem))
    return copy


def _logdir(plog: PartitionLog) -> str:
    return os.path.dirname(plog.path)


def _checkpoint_notes(copy: Copy, problem: str | None) -> list[str]:
    """What the leader-epoch-checkpoint says against the batches' epochs, in a sentence (a stale file
    is normal after a crash: the broker truncates it to its log on loading)."""
    if problem is not None:
        return [f"{problem}; the epochs are the batches'"]
    if copy.checkpoint_epochs is None:
        return ["no leader-epoch-checkpoint: the epochs are the batches' (Kafka rebuilds the file from them)"]
    batches = copy.epochs.entries()
    if copy.checkpoint_epochs == batches:
        return []
    loaded = EpochCache(copy.checkpoint_epochs)  # as LeaderEpochFileCache loads it: each entry assigned
    loaded.truncate_from_end(copy.scan.log_end_offset)
    loaded.truncate_from_start(copy.scan.log_start_offset)
    past_end = [e for e in copy.checkpoint_epochs if e[1] >= copy.scan.log_end_offset]
    notes = []
    if past_end:
        notes.append(f"leader-epoch-checkpoint is stale: {_pairs(past_end)} start at or past the log end "
                     f"{copy.scan.log_end_offset} (normal after a crash: Kafka drops them on loading)")
    if loaded.entries() != batches:
        only_file = [e for e in loaded.entries() if e not in batches]
        only_batches = [e for e in batches if e not in loaded.entries()]
        parts = []
        if only_file:
            parts.append(f"{_pairs(only_file)} in the checkpoint and not in the batches (an epoch with no "
                         "batch left, or batches since removed)")
        if only_batches:
            parts.append(f"{_pairs(only_batches)} in the batches and not in the checkpoint (a file older than "
                         "the log)")
        notes.append("leader-epoch-checkpoint disagrees with the batches: " + "; ".join(parts)
                     + "; the batches' epochs are used")
    return notes


def _pairs(entries: list[tuple[int, int]]) -> str:
    return ", ".join(f"epoch {e} at {s}" for e, s in entries)


def choose_reference(ends: dict[int, tuple[int, int]], leader: int | None, history: PartitionHistory | None
                     ) -> tuple[int, str, list[str]]:
    """The reference broker among the holders (broker -> (last batch's epoch, log end)), what chose it,
    and notes: `leader`, else the metadata log's last leader if it holds a copy, else the highest last
    epoch, then the longest log, then the lowest broker id."""
    notes: list[str] = []
    if leader is not None and leader in ends:
        return leader, "--leader", notes
    named = history.last_leader() if history is not None else None
    if named is not None and named in ends:
        return named, "__cluster_metadata", notes
    if named is not None:
        notes.append(f"__cluster_metadata names broker {named} as the last leader; it holds no copy here, so "
                     "the reference is the copy with the highest last epoch")
    best = max(ends, key=lambda broker: (*ends[broker], -broker))
    return best, "highest last epoch", notes


def choose_leader(copies: list[Copy], leader: int | None, history: PartitionHistory | None
                  ) -> tuple[Copy, str, list[str]]:
    """The reference copy (choose_reference), what chose it, and notes."""
    by_broker = {c.broker: c for c in copies}
    if leader is not None and leader not in by_broker:
        raise KfsError(f"broker {leader} holds no copy of {copies[0].plog.name} here (copies on brokers "
                       f"{', '.join(str(b) for b in sorted(by_broker))})")
    ends = {c.broker: (c.scan.last_epoch(), c.scan.log_end_offset) for c in copies}
    broker, chosen_by, notes = choose_reference(ends, leader, history)
    return by_broker[broker], chosen_by, notes


def compare_copies(topic: str, partition: int, copies: list[Copy], leader: int | None = None,
                   metadata: ClusterMetadata | None = None) -> PartitionReplicas:
    """The partition object of section 10 for these copies (in broker-id order)."""
    copies = sorted(copies, key=lambda c: c.broker)
    ids = sorted({c.topic_id for c in copies if c.topic_id is not None})
    if len(ids) > 1:
        holders = "; ".join(f"broker {c.broker}: {c.topic_id}" for c in copies)
        error = (f"{topic}-{partition} has different topic ids on its brokers ({holders}): these are different "
                 "partitions that share a name (a topic deleted and created again), not compared")
        return PartitionReplicas(topic, partition, None, "", [], None, [], error)
    history = metadata.history(topic, partition, ids[0] if ids else None) if metadata is not None else None
    reference, chosen_by, notes = choose_leader(copies, leader, history)
    reports = [_report(reference, copy) for copy in copies]
    return PartitionReplicas(topic, partition, reference.broker, chosen_by, reports, history, notes)


def _report(reference: Copy, copy: Copy) -> ReplicaReport:
    ref_cleaned = reference.cleaned_to or 0
    if copy is reference:
        end = copy.scan.log_end_offset
        return ReplicaReport(copy, Truncation(end, rule="the reference"), 0, 0, None, None)
    truncation = follower_truncation(reference.view, copy.view)
    to = truncation.truncate_to
    truncated = count_records(copy.plog, copy.scan, to)
    hw = copy.high_watermark
    lost = count_records(copy.plog, copy.scan, to, hw) if hw is not None and hw > to else 0
    difference, compared = first_difference((reference.plog, reference.scan, ref_cleaned),
                                            (copy.plog, copy.scan, copy.cleaned_to or 0))
    if hw is None and truncated:
        copy.notes.append("no replication-offset-checkpoint entry: its high watermark is not known, so none of the "
                          f"{truncated} truncated record(s) is counted as committed")
    unknown = sorted(c.broker for c in (reference, copy) if c.cleaned_to is None)
    if difference is not None and unknown:
        whose = " and ".join(str(b) for b in unknown)
        plural = 's' if len(unknown) > 1 else ''
        copy.notes.append(f"no cleaner-offset-checkpoint in broker{plural} {whose}'s log dir{plural}"
                          ": compared as never cleaned (if the topic is compacted, a batch its cleaner rewrote "
                          "differs too)")
    if difference is not None and difference < to:
        copy.notes.append(f"differs from the reference from offset {difference}, below where Kafka's rule truncates "
                          f"it ({to}): the copies would stay apart there")
    return ReplicaReport(copy, truncation, truncated, lost, difference, compared)


def truncated_records(report: ReplicaReport) -> Iterator[Record]:
    """The records the copy would lose, from its truncation offset to its log end (control records not
    shown, as `kfs cat`)."""
    plog = report.copy.plog
    if report.truncation.truncate_to >= report.copy.scan.log_end_offset:
        return iter(())
    return plog.records(report.truncation.truncate_to)


def truncated_lines(report: ReplicaReport) -> Iterator[bytes]:
    """Those records as section 3's JSON lines (the renderer of `kfs cat`), a batch at a time."""
    plog = report.copy.plog
    if report.truncation.truncate_to >= report.copy.scan.log_end_offset:
        return
    prefix = line_prefix(plog.topic, plog.partition)
    decoder = line_decoder(plog.topic, "auto", plog)
    for records in plog.record_lists(report.truncation.truncate_to):
        yield render_lines(prefix, records, decoder)
