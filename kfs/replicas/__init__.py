"""A partition's copies on several brokers side by side, by Kafka's leader-epoch rule (docs/replicas.md,
docs/spec.md section 10): where they part and what each would lose on following the reference.

    from kfs.replicas import ReplicaSet
    found = ReplicaSet(["/backup/broker-1", "/backup/broker-2"]).compare("orders-0")
    found.leader, [r.as_json() for r in found.replicas]

Modules: brokers (log dirs -> brokers, topic ids), scan (a copy's batch headers), epochs
(LeaderEpochFileCache), truncation (the fetcher's rule), compare (first difference), witness (the
KRaft metadata log's leader history), report (one partition's object), replica_set (the API).
"""

from kfs.replicas.epochs import EpochCache, read_epoch_checkpoint
from kfs.replicas.replica_set import ReplicaSet
from kfs.replicas.report import (
    Copy,
    PartitionReplicas,
    ReplicaReport,
    compare_copies,
    read_copy,
    truncated_lines,
    truncated_records,
)
from kfs.replicas.truncation import LogView, Round, Truncation, follower_truncation

__all__ = [
    "Copy", "EpochCache", "LogView", "PartitionReplicas", "ReplicaReport", "ReplicaSet", "Round", "Truncation",
    "compare_copies", "follower_truncation", "read_copy", "read_epoch_checkpoint", "truncated_lines",
    "truncated_records",
]
