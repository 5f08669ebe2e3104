"""The KRaft metadata log as a witness: each partition's leader and ISR history.

The controller records every leadership change of a partition in `__cluster_metadata`: a
`PartitionRecord` when the partition is created (its replicas, ISR, leader, leader epoch, leader
recovery state) and a `PartitionChangeRecord` for each change after, whose fields are absent where
nothing changed. `PartitionRegistration.merge` applies one: a `leader` field (not -2, "no change")
starts a new leader epoch (+1); `leaderRecoveryState` -1 is "no change". A topic's partitions are
named by its topic id (`TopicRecord` gives the name; `RemoveTopicRecord` ends it). Records the log
no longer holds (taken into a snapshot) are not seen: the history starts where the log does.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from kfs.internal_topics import DecodeError, decode_metadata
from kfs.storage import KfsError, PartitionLog

log = logging.getLogger("kfs")

METADATA_PARTITION = "__cluster_metadata-0"
NO_LEADER_CHANGE = -2
RECOVERY_STATES = {0: "RECOVERED", 1: "RECOVERING"}


@dataclass
class PartitionHistory:
    """One partition's registrations, as the metadata log states them one record after another."""

    topic_id: str
    partition: int
    changes: list[dict] = field(default_factory=list)

    def last_leader(self) -> int | None:
        """The last leader named (not -1, "no leader"), or None."""
        for change in reversed(self.changes):
            if change["leader"] >= 0:
                return int(change["leader"])
        return None


@dataclass
class ClusterMetadata:
    """What the metadata log says of topics and partitions."""

    source: str  # the metadata log's directory
    topic_ids: dict[str, str] = field(default_factory=dict)  # name -> topic id (the latest)
    partitions: dict[tuple[str, int], PartitionHistory] = field(default_factory=dict)
    undecodable: int = 0

    def history(self, topic: str, partition: int, topic_id: str | None) -> PartitionHistory | None:
        """The history of the partition of this topic id, or of the topic's latest id by name."""
        tid = topic_id if topic_id is not None else self.topic_ids.get(topic)
        return self.partitions.get((tid, partition)) if tid is not None else None


def read_cluster_metadata(metadata: PartitionLog) -> ClusterMetadata:
    """The partitions' histories from a `__cluster_metadata-0` copy (records that do not decode are
    counted and passed over)."""
    found = ClusterMetadata(metadata.path)
    for record in metadata.records():
        try:
            decoded = decode_metadata(record.value)
        except DecodeError:
            found.undecodable += 1
            continue
        data = decoded.data
        if decoded.type == "TopicRecord":
            found.topic_ids[data["name"]] = data["topicId"]
        elif decoded.type == "PartitionRecord":
            key = (data["topicId"], data["partitionId"])
            history = PartitionHistory(*key)
            found.partitions[key] = history
            history.changes.append(_entry(record.offset, record.timestamp, decoded.type, data["leader"],
                                          data["leaderEpoch"], data["isr"], data.get("leaderRecoveryState", 0)))
        elif decoded.type == "PartitionChangeRecord":
            changed = found.partitions.get((data["topicId"], data["partitionId"]))
            if changed is None or not changed.changes:
                continue  # (its PartitionRecord is in a snapshot: the state it changes is not known)
            before = changed.changes[-1]
            leader = data.get("leader", NO_LEADER_CHANGE)
            recovery = data.get("leaderRecoveryState", -1)
            isr = data.get("isr")
            changed.changes.append(_entry(
                record.offset, record.timestamp, decoded.type,
                before["leader"] if leader == NO_LEADER_CHANGE else leader,
                before["leader_epoch"] + (0 if leader == NO_LEADER_CHANGE else 1),
                before["isr"] if isr is None else isr,
                _state_number(before["leader_recovery_state"]) if recovery == -1 else recovery))
        elif decoded.type == "RemoveTopicRecord":
            for key in [k for k in found.partitions if k[0] == data["topicId"]]:
                del found.partitions[key]
            for name in [n for n, tid in found.topic_ids.items() if tid == data["topicId"]]:
                del found.topic_ids[name]
    return found


def _entry(offset: int, timestamp: int, record_type: str, leader: int, epoch: int, isr: list[int],
           recovery: int) -> dict:
    return {"offset": offset, "timestamp": timestamp, "record": record_type, "leader": leader,
            "leader_epoch": epoch, "isr": list(isr),
            "leader_recovery_state": RECOVERY_STATES.get(recovery, str(recovery))}


def _state_number(name: str) -> int:
    return next((n for n, s in RECOVERY_STATES.items() if s == name), -1)


def cluster_metadata(copies: list[PartitionLog]) -> ClusterMetadata | None:
    """The metadata log among the copies given (the one reaching furthest), None if there is none or
    it cannot be read (said at warning level: the reference is then chosen by the epoch rule)."""
    if not copies:
        return None
    best = max(copies, key=lambda plog: plog.log_end_offset())
    try:
        return read_cluster_metadata(best)
    except KfsError as e:
        log.warning("%s: not read as a witness (%s)", METADATA_PARTITION, e)
        return None
