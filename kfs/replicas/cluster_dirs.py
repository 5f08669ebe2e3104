"""Several brokers' log dirs as one `LogDirs` whose partition held by several brokers is its reference copy.

What a mount of several brokers' log dirs shows as `<topic>-<partition>` (docs/spec.md section 10):
a partition one broker holds is that broker's, as `LogDirs` has it; a partition several brokers hold
is the reference copy (`ReplicaSet.reference`: the metadata log's last leader, else the copy whose
last batch has the highest leader epoch, then the longest). The choice is made again when a copy's
log end moves, at most every REFERENCE_TTL seconds.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from kfs.replicas.brokers import log_dir_brokers
from kfs.replicas.replica_set import ReplicaSet
from kfs.storage import LogDirs, PartitionLog, check_log_dirs

log = logging.getLogger("kfs")

REFERENCE_TTL = 1.0  # seconds a reference choice is reused (the kernel's attribute timeout)


class ClusterLogDirs(LogDirs):
    """LogDirs over several brokers' log dirs (see the module docstring)."""

    def __init__(self, paths: list[str]) -> None:
        super().__init__(paths)
        self.replicas = ReplicaSet(self.paths)
        self._chosen: dict[str, tuple[float, PartitionLog]] = {}
        self._chosen_lock = threading.Lock()

    def partition(self, name: str) -> PartitionLog:
        now = time.monotonic()
        with self._chosen_lock:
            kept = self._chosen.get(name)
        if kept is not None and now - kept[0] < REFERENCE_TTL:
            return kept[1]
        held = [b for b in self.replicas.brokers if any(os.path.isdir(os.path.join(p, name)) for p in b.paths)]
        if len(held) < 2:
            return super().partition(name)
        broker, _ = self.replicas.reference(name)
        plog = broker.logdirs.partition(name)
        with self._chosen_lock:
            self._chosen[name] = (now, plog)
        return plog

    def close(self) -> None:
        super().close()
        self.replicas.close()


def cluster_log_dirs(paths: list[str]) -> LogDirs:
    """ClusterLogDirs when the log dirs are two brokers' or more, each naming its broker; else LogDirs,
    as ever (log dirs without a broker id among others: said, and seen as one broker's)."""
    grouped = log_dir_brokers(check_log_dirs(paths))
    if len([b for b in grouped if b != -1]) < 2:
        return LogDirs(paths)
    if -1 in grouped:
        log.warning("%s names no broker (meta.properties): the log dirs are seen as one broker's, no replicas "
                    "compared", grouped[-1][0])
        return LogDirs(paths)
    return ClusterLogDirs(paths)
