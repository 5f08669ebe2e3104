"""A brute-force oracle for `kfs groups`, and the random `__consumer_offsets` logs it judges.

The oracle is the coordinator's replay taken literally (OffsetMetadataManager.replay,
replayEndTransactionMarker; GroupMetadataManager for classic groups): every record of a partition in
offset order, each decoded, skipped when its timestamp is after T; a commit sets, a tombstone removes
(also from open transactions), transactional commits wait for their marker and then win only over
older record offsets. The logs are written in Kafka's binary formats by tests/offsets_log.py.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import offsets_log as ol
from offsets_log import PartitionWriter, end_txn_marker

from kfs.groups.codec import InternalCodec
from kfs.groups.reader import GroupsReader


def commit_key(group: str, topic: str, partition: int, version: int) -> bytes:
    return ol.offset_commit_key(group, topic, partition, version)


def commit_value(rnd: random.Random, ts: int) -> bytes:
    if rnd.random() < 0.3:
        return ol.offset_commit_value(rnd.randint(0, 10**6), rnd.choice(["", "m"]), ts, version=1,
                                      expire_timestamp=ts + 1000)
    return ol.offset_commit_value(rnd.randint(0, 10**6), rnd.choice(["", "meta"]), ts, rnd.randint(-1, 3))


def group_value(rnd: random.Random, ts: int) -> bytes:
    members = [ol.ClassicMember(f"m{i}", f"c{i}", "/10.0.0.1", ["a"], {"a": [i]}) for i in range(rnd.randint(0, 2))]
    return ol.group_metadata_value("consumer", rnd.randint(1, 9), "range" if members else None,
                                   members[0].member_id if members else None, members, ts)


@dataclass
class Written:
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    producer_id: int
    transactional: bool
    control: bool


def write_log(tmp: Path, rnd: random.Random, partitions: int, batches: int) -> list[Written]:
    """Random commits, tombstones, group metadata, transactions and gaps over a few partitions."""
    groups = [f"g{i}" for i in range(4)]
    home = {g: i % partitions for i, g in enumerate(groups)}  # a group lives in one partition
    writers = [PartitionWriter(str(tmp), p, segment_bytes=rnd.choice([600, 1 << 20])) for p in range(partitions)]
    open_txns: dict[int, list[int]] = {p: [] for p in range(partitions)}
    written: list[Written] = []
    clock = 1_700_000_000_000
    for _ in range(batches):
        clock += rnd.choice([0, 1, 5, 40])
        group = rnd.choice(groups)
        p = home[group]
        writer = writers[p]
        if rnd.random() < 0.1:
            writer.skip(rnd.randint(1, 3))
        kind = rnd.random()
        records: list[tuple[int, bytes | None, bytes | None]] = []
        flags: dict[str, Any] = {}
        if kind < 0.12 and open_txns[p]:
            pid = open_txns[p].pop(rnd.randrange(len(open_txns[p])))
            records = [(clock, *end_txn_marker(rnd.random() < 0.7))]
            flags = {"producer_id": pid, "producer_epoch": 0, "transactional": True, "control": True}
        else:
            for _ in range(rnd.randint(1, 4)):
                ts = clock + rnd.choice([0, 0, 0, -3, 2])  # CreateTime is the writer's: not always in order
                if rnd.random() < 0.15:
                    value = None if rnd.random() < 0.3 else group_value(rnd, ts)
                    records.append((ts, ol.group_metadata_key(group), value))
                else:
                    key = commit_key(group, rnd.choice(["a", "b"]), rnd.randint(0, 2), rnd.choice([0, 1, 1]))
                    value = None if rnd.random() < 0.15 else commit_value(rnd, ts)
                    records.append((ts, key, value))
            if kind < 0.35:
                pid = 1000 + rnd.randint(0, 3)
                if pid not in open_txns[p]:
                    open_txns[p].append(pid)
                records = [r for r in records if r[1] is not None and r[1][:2] in (b"\0\0", b"\0\1")]
                flags = {"producer_id": pid, "producer_epoch": 0, "transactional": True}
            if not records:
                continue
        base = writer.append(records, **flags)
        for i, (ts, key, value) in enumerate(records):
            written.append(Written(p, base + i, ts, key, value, flags.get("producer_id", -1),
                                   bool(flags.get("transactional")), bool(flags.get("control"))))
    for writer in writers:
        writer.close()
    return written


def oracle(written: list[Written], at: int | None) -> list[dict[str, Any]]:
    """The coordinator's replay, record by record, up to `at`."""
    codec = InternalCodec()
    offsets: dict[tuple, Written] = {}
    groups: dict[str, Written] = {}
    pending: dict[tuple[int, int], dict[tuple, Written]] = {}
    for w in sorted(written, key=lambda w: (w.partition, w.offset)):
        if at is not None and w.timestamp > at:
            continue
        if w.control:
            staged = pending.pop((w.partition, w.producer_id), {})
            if w.key == ol.end_txn_marker(True)[0]:
                for ident, rec in staged.items():
                    if ident not in offsets or rec.offset > offsets[ident].offset:
                        offsets[ident] = rec
            continue
        assert w.key is not None
        key = codec.key(w.key)
        if key.type == "GroupMetadataKey":
            if w.value is None:
                groups.pop(key.data["group"], None)
            else:
                groups[key.data["group"]] = w
            continue
        ident = (key.data["group"], key.data["topic"], key.data["partition"])
        if w.value is None:
            offsets.pop(ident, None)
            for (p, _pid), staged in pending.items():
                if p == w.partition:
                    staged.pop(ident, None)
        elif w.transactional:
            pending.setdefault((w.partition, w.producer_id), {})[ident] = w
        else:
            offsets[ident] = w
    lines: list[dict[str, Any]] = []
    for group in sorted({i[0] for i in offsets} | set(groups)):
        if group in groups:
            g = groups[group]
            assert g.key is not None and g.value is not None
            data = codec.value(g.key, g.value).data
            lines.append({"group": group, "state": "Stable" if data["members"] else "Empty",
                          "generation": data["generation"], "protocol_type": data["protocolType"],
                          "protocol": data["protocol"], "leader": data["leader"],
                          "members": [m["memberId"] for m in data["members"]],
                          "log_offset": g.offset, "log_partition": g.partition})
        for ident in sorted(i for i in offsets if i[0] == group):
            c = offsets[ident]
            assert c.key is not None and c.value is not None
            data = codec.value(c.key, c.value).data
            lines.append({"group": group, "topic": ident[1], "partition": ident[2], "offset": data["offset"],
                          "leader_epoch": data.get("leaderEpoch", -1), "metadata": data["metadata"],
                          "commit_timestamp": data["commitTimestamp"],
                          "expire_timestamp": data.get("expireTimestamp", -1),
                          "log_offset": c.offset, "log_partition": c.partition, "timestamp": c.timestamp})
    return lines


OFFSET_KEYS = ("group", "topic", "partition", "offset", "leader_epoch", "metadata", "commit_timestamp",
               "expire_timestamp", "log_offset", "log_partition", "timestamp")
GROUP_KEYS = ("group", "state", "generation", "protocol_type", "protocol", "leader", "members", "log_offset",
              "log_partition")


def comparable(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """kfs's lines cut to the keys the oracle computes (members by id)."""
    out = []
    for line in lines:
        if "topic" in line:
            out.append({k: line[k] for k in OFFSET_KEYS})
        else:
            out.append({k: line[k] for k in GROUP_KEYS} | {"members": [m["member_id"] for m in line["members"]]})
    return out


def observed(reader: GroupsReader, at: int | None) -> list[dict[str, Any]]:
    return comparable(list(reader.snapshot(at).lines()))


def instants(written: list[Written]) -> list[int | None]:
    stamps = sorted({w.timestamp for w in written})
    return [None, *[t + d for t in stamps for d in (-1, 0)]]
