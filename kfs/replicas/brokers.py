"""Which broker each log dir belongs to, and which partitions several brokers hold copies of.

A broker writes `meta.properties` (its `broker.id`, or KRaft's `node.id`) into each of its log dirs:
log dirs with the same id are one broker's (`log.dirs`), seen together as one `LogDirs`, whose
single-broker rules (the first log dir holding a partition wins) stay as they are. A partition
directory of the same name on two brokers is a copy of one partition only when both were created
for the same topic: `partition.metadata` names the topic id (`topic_id: <base64 uuid>`), and a
topic deleted and created again under the same name gets another.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from kfs.storage import KfsError, LogDirs, PartitionLog, check_log_dirs
from kfs.storage.checkpoints import OffsetCheckpointFile
from kfs.storage.files import NotARegularFile, read_regular
from kfs.views.kcat_format import broker_id

REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
PARTITION_METADATA = "partition.metadata"


@dataclass
class Broker:
    """One broker's log dirs."""

    id: int
    paths: list[str]
    logdirs: LogDirs

    def high_watermark(self, plog: PartitionLog) -> int | None:
        """The partition's entry in its log dir's `replication-offset-checkpoint`, None if absent."""
        path = os.path.join(os.path.dirname(plog.path), REPLICATION_OFFSET_CHECKPOINT)
        entries = _high_watermarks(path).entries()
        return entries.get((plog.topic, plog.partition)) if entries is not None else None


_HW_FILES: dict[str, OffsetCheckpointFile] = {}


def _high_watermarks(path: str) -> OffsetCheckpointFile:
    """One OffsetCheckpointFile per path (it re-reads the file only when it changed)."""
    found = _HW_FILES.get(path)
    if found is None:
        found = _HW_FILES.setdefault(path, OffsetCheckpointFile(path))
    return found


def log_dir_brokers(paths: list[str]) -> dict[int, list[str]]:
    """broker id -> its log dirs (absolute), in the order given; -1 for log dirs without an id."""
    found: dict[int, list[str]] = {}
    for path in check_log_dirs(paths):
        found.setdefault(broker_id(path), []).append(os.path.abspath(path))
    return found


def find_brokers(paths: list[str]) -> list[Broker]:
    """The brokers whose log dirs are given, in broker-id order. KfsError unless every log dir names
    its broker (the copies of a partition are told apart by it)."""
    grouped = log_dir_brokers(paths)
    unknown = grouped.pop(-1, [])
    if unknown:
        raise KfsError(f"{unknown[0]} names no broker (meta.properties with broker.id or node.id): kfs "
                       "replicas tells the copies of a partition apart by the broker that holds them")
    return [Broker(bid, dirs, LogDirs(dirs)) for bid, dirs in sorted(grouped.items())]


def topic_id(plog: PartitionLog) -> str | None:
    """The topic id in the partition directory's `partition.metadata`, None without one (a log
    written before Kafka 2.8, or a copy without the file)."""
    path = os.path.join(plog.path, PARTITION_METADATA)
    try:
        text = read_regular(path, 1 << 16).decode("utf-8", errors="replace")
    except (NotARegularFile, OSError):
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "topic_id" and value.strip():
            return value.strip()
    return None


def replicated_partitions(brokers: list[Broker]) -> dict[str, list[Broker]]:
    """Partition name -> the brokers holding a copy of it, for names held by two brokers or more."""
    holders: dict[str, list[Broker]] = {}
    for broker in brokers:
        for name in broker.logdirs.partition_names():
            holders.setdefault(name, []).append(broker)
    return {name: held for name, held in sorted(holders.items()) if len(held) > 1}
