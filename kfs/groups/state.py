"""What the replayed records say: committed offsets and the groups' own state, decoded once each.

`PartitionScan` leaves the last record per raw key; here each key is decoded (cached: the same key
bytes recur), keys naming the same thing are merged (a commit written with key version 0 and one
with version 1 name the same partition: the higher record offset wins, as in the coordinator's
replay), and only then are the surviving values decoded.

Groups follow the coordinator's own rules:
- classic groups (`GroupMetadataKey/Value`, `ClassicGroup.fromRecord`): state Empty without members,
  Stable with them; a tombstone deletes the group.
- consumer and share groups (KIP-848, KIP-932): the group epoch from `...GroupMetadataValue`, members
  from `...MemberMetadataValue` and `...CurrentMemberAssignmentValue`, the assignment epoch from
  `...TargetAssignmentMetadataValue`; state as `ConsumerGroup.maybeUpdateGroupState` computes it
  (Empty, Assigning, Reconciling, Stable).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from kfs.groups.codec import Decoded, OffsetsCodec
from kfs.groups.replay import PartitionScan
from kfs.record.types import Record

OFFSET_COMMIT_KEY = "OffsetCommitKey"
GROUP_METADATA_KEY = "GroupMetadataKey"
MODERN_PREFIXES = {"ConsumerGroup": "consumer", "ShareGroup": "share"}
MEMBER_STABLE = 0  # MemberState.STABLE
_KEY_CACHE_MAX = 1 << 20
_VALUE_CACHE_MAX = 1 << 21


@dataclass(slots=True)
class CommittedOffset:
    """One (group, topic, partition)'s committed offset, and the record that committed it."""

    group: str
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None
    commit_timestamp: int
    expire_timestamp: int
    log_partition: int  # the __consumer_offsets partition holding the commit
    log_offset: int  # the commit record's offset there
    timestamp: int  # the commit record's timestamp

    def as_json(self) -> dict[str, Any]:
        return {
            "group": self.group, "topic": self.topic, "partition": self.partition, "offset": self.offset,
            "leader_epoch": self.leader_epoch, "metadata": self.metadata,
            "commit_timestamp": self.commit_timestamp, "log_offset": self.log_offset,
            "log_partition": self.log_partition, "expire_timestamp": self.expire_timestamp,
            "timestamp": self.timestamp,
        }


@dataclass
class GroupState:
    """A group as its metadata records describe it."""

    group: str
    group_type: str  # classic, consumer or share
    state: str
    generation: int
    protocol_type: str | None
    protocol: str | None
    leader: str | None
    members: list[dict[str, Any]]
    log_partition: int
    log_offset: int  # the group metadata record's offset (the newest of a modern group's records)
    timestamp: int
    extra: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "group": self.group, "state": self.state, "generation": self.generation,
            "protocol_type": self.protocol_type, "protocol": self.protocol, "leader": self.leader,
            "members": self.members, "group_type": self.group_type, "log_partition": self.log_partition,
            "log_offset": self.log_offset, "timestamp": self.timestamp, **self.extra,
        }


@dataclass
class Snapshot:
    """Every group's committed offsets and state at one moment."""

    at: int | None
    offsets: dict[str, list[CommittedOffset]]  # by group, sorted by topic and partition
    groups: dict[str, GroupState]
    undecodable: int = 0  # records whose key or value did not decode (left out)
    # every group a key names (tombstoned ones too), and the __consumer_offsets partitions naming it
    known: dict[str, set[int]] = field(default_factory=dict)

    def group_names(self) -> list[str]:
        return sorted(set(self.offsets) | set(self.groups))

    def lines(self, group: str | None = None) -> Iterable[dict[str, Any]]:
        """The JSON objects of `kfs groups --json`: per group, its state line, then its offsets."""
        for name in [group] if group is not None else self.group_names():
            state = self.groups.get(name)
            if state is not None:
                yield state.as_json()
            for committed in self.offsets.get(name, ()):
                yield committed.as_json()


@dataclass(slots=True)
class _Live:
    """The surviving record of one decoded key."""

    partition: int
    raw: bytes
    record: Record
    key: Decoded


class Resolver:
    """Decodes scans into snapshots; keeps its key cache between calls (a mount asks again and again)."""

    def __init__(self, codec: OffsetsCodec, keep_values: bool = True) -> None:
        self.codec = codec
        self.keep_values = keep_values  # worth it where the same snapshot is asked for again (a mount)
        self._keys: dict[bytes, tuple[Decoded, tuple] | None] = {}
        self._values: dict[tuple[bytes, bytes], Decoded] = {}

    def _key(self, raw: bytes) -> tuple[Decoded, tuple] | None:
        """The decoded key and what it names: (schema name, its fields' values...)."""
        try:
            decoded = self.codec.key(raw)
        except ValueError:
            found = None
        else:
            found = (decoded, (decoded.type, *decoded.data.values()))
        if len(self._keys) >= _KEY_CACHE_MAX:
            self._keys.clear()
        self._keys[raw] = found
        return found

    def _value(self, entry: _Live) -> Decoded | None:
        """A surviving value, decoded once per distinct (key, value) bytes (a mount asks again and again)."""
        assert entry.record.value is not None
        if not self.keep_values:
            try:
                return self.codec.value(entry.raw, entry.record.value)
            except ValueError:
                return None
        where = (entry.raw, entry.record.value)
        decoded = self._values.get(where)
        if decoded is None:
            try:
                decoded = self.codec.value(entry.raw, entry.record.value)
            except ValueError:
                return None
            if len(self._values) >= _VALUE_CACHE_MAX:
                self._values.clear()
            self._values[where] = decoded
        return decoded

    def snapshot(self, scans: list[PartitionScan], at: int | None, group: str | None = None) -> Snapshot:
        """Every group (or only `group`) from the scans of some partitions."""
        return merge([self.partition_snapshot(scan, at, group) for scan in scans], at)

    def partition_snapshot(self, scan: PartitionScan, at: int | None, group: str | None = None) -> Snapshot:
        """What one partition's records say. Keys naming the same thing (an offset commit key of
        version 0 and one of version 1) are one: the later record offset wins, as in the replay."""
        needle = group.encode() if group is not None else None
        live: dict[tuple, _Live] = {}
        undecodable = 0
        keys = self._keys
        missing = self  # a marker: not in the cache
        partition = scan.plog.partition
        for raw, record in scan.latest.items():
            if raw is None:
                undecodable += 1
                continue
            if needle is not None and needle not in raw:
                continue
            found = keys.get(raw, missing)
            if found is missing:
                found = self._key(raw)
            if found is None:
                undecodable += 1
                continue
            key, identity = found  # type: ignore[misc]
            if needle is not None and identity[1] != group:
                continue
            seen = live.get(identity)
            if seen is None or record.offset > seen.record.offset:
                live[identity] = _Live(partition, raw, record, key)
        snapshot = Snapshot(at, {}, {}, undecodable, {identity[1]: {partition} for identity in live})
        modern: dict[str, dict[str, Any]] = {}
        for entry in live.values():
            if entry.record.value is None:
                continue
            value = self._value(entry)
            if value is None:
                snapshot.undecodable += 1
                continue
            kind = entry.key.type
            if kind == OFFSET_COMMIT_KEY:
                committed = _committed(entry, value)
                snapshot.offsets.setdefault(committed.group, []).append(committed)
            elif kind == GROUP_METADATA_KEY:
                classic = _classic(entry, value)
                snapshot.groups[classic.group] = classic
            else:
                _collect_modern(modern, entry, value)
        for name, parts in modern.items():
            if name not in snapshot.groups:
                state = _modern(name, parts)
                if state is not None:
                    snapshot.groups[name] = state
        for committed_list in snapshot.offsets.values():
            committed_list.sort(key=_TOPIC_PARTITION)
        return snapshot


_TOPIC_PARTITION = attrgetter("topic", "partition")
_WHEN = attrgetter("timestamp", "log_partition")


def merge(parts: list[Snapshot], at: int | None) -> Snapshot:
    """Snapshots of different partitions as one. A group lives in one partition (the coordinator's
    `partitionFor`); where two hold the same group or committed partition (the topic's partition
    count changed, or log dirs of different clusters), the later record wins."""
    merged = Snapshot(at, {}, {})
    for part in parts:
        merged.undecodable += part.undecodable
        for name, partitions in part.known.items():
            merged.known.setdefault(name, set()).update(partitions)
        for name, state in part.groups.items():
            seen = merged.groups.get(name)
            if seen is None or _WHEN(state) > _WHEN(seen):
                merged.groups[name] = state
        for name, offsets in part.offsets.items():
            seen_offsets = merged.offsets.get(name)
            if seen_offsets is None:
                merged.offsets[name] = offsets
                continue
            by_partition = {(c.topic, c.partition): c for c in seen_offsets}
            for c in offsets:
                old = by_partition.get((c.topic, c.partition))
                if old is None or _WHEN(c) > _WHEN(old):
                    by_partition[(c.topic, c.partition)] = c
            merged.offsets[name] = sorted(by_partition.values(), key=_TOPIC_PARTITION)
    return merged


def _committed(entry: _Live, value: Decoded) -> CommittedOffset:
    key, data = entry.key.data, value.data
    return CommittedOffset(
        group=key["group"], topic=key["topic"], partition=key["partition"], offset=data["offset"],
        leader_epoch=data.get("leaderEpoch", -1), metadata=data.get("metadata"),
        commit_timestamp=data["commitTimestamp"], expire_timestamp=data.get("expireTimestamp", -1),
        log_partition=entry.partition, log_offset=entry.record.offset, timestamp=entry.record.timestamp)


def _classic(entry: _Live, value: Decoded) -> GroupState:
    data = value.data
    members = [_snake_keys(m) for m in data.get("members") or []]
    extra = {"current_state_timestamp": data.get("currentStateTimestamp", -1)}
    return GroupState(
        group=entry.key.data["group"], group_type="classic", state="Stable" if members else "Empty",
        generation=data["generation"], protocol_type=data.get("protocolType"), protocol=data.get("protocol"),
        leader=data.get("leader"), members=members, log_partition=entry.partition,
        log_offset=entry.record.offset, timestamp=entry.record.timestamp, extra=extra)


def _collect_modern(modern: dict[str, dict[str, Any]], entry: _Live, value: Decoded) -> None:
    """Sort a KIP-848 / KIP-932 record into its group's parts, by the record's schema name."""
    kind = entry.key.type
    prefix = next((p for p in MODERN_PREFIXES if kind.startswith(p)), None)
    if prefix is None or "groupId" not in entry.key.data:
        return
    record_name = kind[len(prefix):-len("Key")]
    parts = modern.setdefault(entry.key.data["groupId"], {"type": MODERN_PREFIXES[prefix], "members": {},
                                                          "newest": entry})
    if (entry.record.offset, entry.partition) > (parts["newest"].record.offset, parts["newest"].partition):
        parts["newest"] = entry
    member_id = entry.key.data.get("memberId")
    if record_name == "Metadata":
        parts["epoch"] = value.data.get("epoch")
    elif record_name == "TargetAssignmentMetadata":
        parts["assignment_epoch"] = value.data.get("assignmentEpoch")
    elif record_name in ("MemberMetadata", "CurrentMemberAssignment") and member_id is not None:
        member = parts["members"].setdefault(member_id, {"member_id": member_id})
        member.update(_snake_keys(value.data))


def _modern(name: str, parts: dict[str, Any]) -> GroupState | None:
    members = [parts["members"][m] for m in sorted(parts["members"])]
    if parts.get("epoch") is None and not members:
        return None  # only leftovers (target assignment, partition metadata): not a group
    epoch = parts.get("epoch", 0)
    assignment_epoch = parts.get("assignment_epoch", -1)
    if not members:
        state = "Empty"
    elif epoch > assignment_epoch:
        state = "Assigning"
    elif any(m.get("state", MEMBER_STABLE) != MEMBER_STABLE or m.get("member_epoch") != assignment_epoch
             for m in members):
        state = "Reconciling"
    else:
        state = "Stable"
    newest: _Live = parts["newest"]
    return GroupState(
        group=name, group_type=parts["type"], state=state, generation=epoch, protocol_type=parts["type"],
        protocol=None, leader=None, members=members, log_partition=newest.partition,
        log_offset=newest.record.offset, timestamp=newest.record.timestamp,
        extra={"assignment_epoch": assignment_epoch})


_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")


def _snake_keys(data: dict[str, Any]) -> dict[str, Any]:
    """A member's fields under snake_case names, like the rest of a `kfs groups` line."""
    return {_CAMEL.sub(r"_\1", k).lower(): v for k, v in data.items()}
