"""Several brokers' log dirs, and the partitions they hold copies of: the API of `kfs replicas`.

    from kfs.replicas import ReplicaSet
    replicas = ReplicaSet(["/backup/broker-1", "/backup/broker-2", "/backup/broker-3"])
    replicas.partition_names()                 # ["orders-0", ...]: held by two brokers or more
    found = replicas.compare("orders-0")       # PartitionReplicas; leader=2 to take broker 2 as reference
    found.as_json()                            # docs/spec.md section 10's object
    found.replica(3).lost_committed_records    # per copy: truncate_to, truncated_records, first_difference...
    replicas.truncated_lines("orders-0", 3)    # its truncated records as `kfs cat` JSON lines
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

from kfs.replicas.brokers import Broker, find_brokers, replicated_partitions, topic_id
from kfs.replicas.report import PartitionReplicas, choose_reference, compare_copies, read_copy, truncated_lines
from kfs.replicas.scan import last_batch_epoch
from kfs.replicas.witness import METADATA_PARTITION, ClusterMetadata, cluster_metadata
from kfs.storage import KfsError, UnknownPartition, parse_partition_dir

METADATA_TTL = 10.0  # seconds the metadata log's reading is kept before its log end is looked at again


class ReplicaSet:
    """The brokers of some log dirs (each log dir's meta.properties says whose it is)."""

    def __init__(self, paths: list[str]) -> None:
        self.brokers: list[Broker] = find_brokers(paths)
        self._metadata: tuple[float, tuple[int, ...], ClusterMetadata | None] | None = None
        self._lock = threading.Lock()

    def broker_ids(self) -> list[int]:
        return [b.id for b in self.brokers]

    def partition_names(self) -> list[str]:
        """Partitions held by two brokers or more, sorted; not the KRaft metadata log, which its
        quorum replicates by its own protocol (KafkaRaftClient), not the ISR fetcher's rule."""
        return [name for name in replicated_partitions(self.brokers) if name != METADATA_PARTITION]

    def holders(self, name: str) -> list[Broker]:
        """The brokers holding a copy of `name` (a directory of that name in one of its log dirs);
        UnknownPartition when none does."""
        held = [b for b in self.brokers if any(os.path.isdir(os.path.join(path, name)) for path in b.paths)]
        if not held:
            raise UnknownPartition(f"no partition {name} in the log dirs of brokers "
                                   f"{', '.join(str(b) for b in self.broker_ids())}")
        return held

    def metadata(self) -> ClusterMetadata | None:
        """The KRaft metadata log among the log dirs (the copy reaching furthest), read again when a
        copy's log end moved, at most every METADATA_TTL seconds (a live quorum appends every 500 ms)."""
        now = time.monotonic()
        with self._lock:
            if self._metadata is not None and now - self._metadata[0] < METADATA_TTL:
                return self._metadata[2]
        copies = [b.logdirs.partition(METADATA_PARTITION) for b in self.brokers
                  if any(os.path.isdir(os.path.join(path, METADATA_PARTITION)) for path in b.paths)]
        ends = tuple(plog.log_end_offset() for plog in copies)
        with self._lock:
            if self._metadata is None or self._metadata[1] != ends:
                self._metadata = (now, ends, cluster_metadata(copies))
            else:
                self._metadata = (now, *self._metadata[1:])
            return self._metadata[2]

    def reference(self, name: str, leader: int | None = None) -> tuple[Broker, str]:
        """The broker whose copy is the reference (report.choose_reference), from each copy's last batch
        alone: what the mount shows as `<topic>-<partition>` without comparing the copies."""
        parsed = parse_partition_dir(name)
        held = self.holders(name)
        if parsed is None or len(held) < 2:
            return held[0], "the only copy"
        plogs = {b.id: b.logdirs.partition(name) for b in held}
        ends = {bid: (last_batch_epoch(plog), plog.log_end_offset()) for bid, plog in plogs.items()}
        tids = {topic_id(plog) for plog in plogs.values()} - {None}
        metadata = self.metadata() if name != METADATA_PARTITION else None
        history = metadata.history(parsed[0], parsed[1], next(iter(tids)) if len(tids) == 1 else None) \
            if metadata is not None else None
        broker, chosen_by, _ = choose_reference(ends, leader, history)
        return next(b for b in held if b.id == broker), chosen_by

    def compare(self, name: str, leader: int | None = None) -> PartitionReplicas:
        """The partition's copies compared (section 10). KfsError when fewer than two brokers hold it."""
        parsed = parse_partition_dir(name)
        if parsed is None:
            raise KfsError(f"{name} is not a partition name (<topic>-<partition>, e.g. orders-0)")
        held = self.holders(name)
        if len(held) < 2:
            raise KfsError(f"only broker {held[0].id} holds {name} among these log dirs: nothing to compare "
                           "it with")
        if leader is not None and leader not in {b.id for b in held}:
            raise KfsError(f"broker {leader} holds no copy of {name} here (copies on brokers "
                           f"{', '.join(str(b.id) for b in held)})")
        copies = [read_copy(broker, name) for broker in held]
        metadata = self.metadata() if name != METADATA_PARTITION else None
        return compare_copies(parsed[0], parsed[1], copies, leader, metadata)

    def compare_all(self, leader: int | None = None) -> Iterator[PartitionReplicas]:
        """Every partition held by two brokers or more; with `leader`, those it holds."""
        for name in self.partition_names():
            if leader is not None and leader not in {b.id for b in self.holders(name)}:
                continue
            yield self.compare(name, leader)

    def truncated_lines(self, name: str, broker: int, leader: int | None = None) -> Iterator[bytes]:
        """The records broker `broker`'s copy would lose, as `kfs cat` JSON lines."""
        found = self.compare(name, leader)
        if found.error is not None:
            raise KfsError(found.error)
        return truncated_lines(found.replica(broker))

    def close(self) -> None:
        for broker in self.brokers:
            broker.logdirs.close()
