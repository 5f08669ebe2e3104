"""A mount of several brokers' log dirs: each copy of a replicated partition (docs/spec.md section 10).

    /<topic>-<partition>/                     the reference copy (kfs.replicas.cluster_dirs), as ever
    /<topic>-<partition>/replicas.json        `kfs replicas --json`'s object for the partition
    /.replicas/                               lists the brokers' ids
    /.replicas/<broker>/                      lists the partitions that broker holds and another does too
    /.replicas/<broker>/<topic>-<partition>/  that broker's copy, with the usual files (a KfsTree of its
                                              log dirs answers them), and
        truncated.jsonl                       the records it would lose on following the reference,
                                              as `kfs cat` JSON lines

A partition one broker holds is unchanged (no replicas.json). `.replicas` is looked up, not listed at
the root, as `.groups`: `grep -r` over the mount reads each partition once. replicas.json and
truncated.jsonl are rendered when stat'ed (exact sizes), from a comparison kept while the copies'
listings, log ends and checkpoint files stay as they were.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import threading
from typing import Any

from kfs.fuse.handles import Attr, BytesHandle, Handle, TreeError, as_errno
from kfs.fuse.tree import KfsTree, _partition_dir_attr, _split
from kfs.replicas.brokers import Broker
from kfs.replicas.cluster_dirs import ClusterLogDirs, cluster_log_dirs
from kfs.replicas.report import PartitionReplicas, truncated_lines
from kfs.storage import PartitionLog
from kfs.storage.lru import LruCache

REPLICAS_DIR = ".replicas"
REPLICAS_JSON = "replicas.json"
TRUNCATED_JSONL = "truncated.jsonl"
MAX_COMPARISONS = 64  # partitions whose comparison is kept
_CHECKPOINTS = ("replication-offset-checkpoint", "cleaner-offset-checkpoint", "log-start-offset-checkpoint")


def mount_tree(logdirs: list[str], **options: Any) -> KfsTree:
    """The tree a mount of these log dirs shows: a ReplicasTree over two brokers' log dirs or more, else
    a KfsTree as ever."""
    dirs = cluster_log_dirs(logdirs)
    if isinstance(dirs, ClusterLogDirs):
        return ReplicasTree(dirs, **options)
    return KfsTree(dirs, **options)


class ReplicasTree(KfsTree):
    """KfsTree over ClusterLogDirs, with `.replicas/` and the replicas.json files."""

    logdirs: ClusterLogDirs

    def __init__(self, logdirs: ClusterLogDirs, **options: Any) -> None:
        super().__init__(logdirs, **options)
        options.pop("cache", None)
        self._brokers = {b.id: b for b in logdirs.replicas.brokers}
        # One tree per broker over its own log dirs answers `.replicas/<broker>/...` (its files, its caches).
        self._broker_trees = {b.id: KfsTree(b.logdirs, cache=self.cache, **options) for b in self._brokers.values()}
        self._compared: LruCache[str, tuple[tuple, PartitionReplicas]] = LruCache(MAX_COMPARISONS)
        self._compare_lock = threading.Lock()

    # ---- paths ----------------------------------------------------------------------------------

    def _getattr(self, path: str) -> Attr:
        parts = _split(path)
        if parts and parts[0] == REPLICAS_DIR:
            return self._replica_getattr(parts[1:], path)
        if len(parts) == 2 and parts[1] == REPLICAS_JSON and self._replicated(parts[0]):
            return self._rendered(path, parts[0], None)[0]
        return super()._getattr(path)

    def readdir(self, path: str) -> list[str]:
        parts = _split(path)
        if parts and parts[0] == REPLICAS_DIR:
            return self._replica_readdir(parts[1:], path)
        names = super().readdir(path)
        if len(parts) == 1 and self._replicated(parts[0]):
            names.append(REPLICAS_JSON)
        return names

    def _open(self, path: str) -> Handle:
        parts = _split(path)
        if parts and parts[0] == REPLICAS_DIR:
            return self._replica_open(parts[1:], path)
        if len(parts) == 2 and parts[1] == REPLICAS_JSON and self._replicated(parts[0]):
            attr, data = self._rendered(path, parts[0], None)
            return self._cached(path, BytesHandle(attr, data=data))
        return super()._open(path)

    # ---- .replicas/ -----------------------------------------------------------------------------

    def _replica_getattr(self, parts: list[str], path: str) -> Attr:
        if not parts:
            return _dir_of(os.stat(self.logdirs.paths[0]))
        broker = self._broker(parts[0], path)
        if len(parts) == 1:
            return _dir_of(os.stat(broker.paths[0]))
        self._held(broker.id, parts[1], path)
        if len(parts) == 3 and parts[2] == TRUNCATED_JSONL:
            return self._rendered(path, parts[1], broker.id)[0]
        return self._broker_trees[broker.id].getattr("/" + "/".join(parts[1:]))

    def _replica_readdir(self, parts: list[str], path: str) -> list[str]:
        if not parts:
            return [str(b) for b in sorted(self._brokers)]
        broker = self._broker(parts[0], path)
        if len(parts) == 1:
            return [name for name in self.logdirs.replicas.partition_names()
                    if broker in self.logdirs.replicas.holders(name)]
        self._held(broker.id, parts[1], path)
        names = self._broker_trees[broker.id].readdir("/" + "/".join(parts[1:]))
        return [*names, TRUNCATED_JSONL] if len(parts) == 2 else names

    def _replica_open(self, parts: list[str], path: str) -> Handle:
        if len(parts) < 2:
            self._replica_getattr(parts, path)
            raise TreeError(errno.EISDIR, path)
        broker = self._broker(parts[0], path)
        self._held(broker.id, parts[1], path)
        if len(parts) == 3 and parts[2] == TRUNCATED_JSONL:
            attr, data = self._rendered(path, parts[1], broker.id)
            return self._cached(path, BytesHandle(attr, data=data))
        return self._broker_trees[broker.id].open("/" + "/".join(parts[1:]))

    def _broker(self, name: str, path: str) -> Broker:
        found = self._brokers.get(int(name)) if name.lstrip("-").isdigit() else None
        if found is None:
            raise TreeError(errno.ENOENT, path)
        return found

    def _held(self, broker: int, name: str, path: str) -> None:
        """ENOENT unless the broker holds a copy of a partition another broker holds too."""
        if not self._replicated(name) or broker not in {b.id for b in self.logdirs.replicas.holders(name)}:
            raise TreeError(errno.ENOENT, path)

    def _replicated(self, name: str) -> bool:
        return name in self.logdirs.replicas.partition_names()

    # ---- replicas.json, truncated.jsonl ---------------------------------------------------------

    def _rendered(self, path: str, name: str, broker: int | None) -> tuple[Attr, bytes]:
        """replicas.json (broker None) or a copy's truncated.jsonl, rendered from the comparison."""
        cached = self._fresh_small(path)
        if cached is not None:
            return cached
        with as_errno(path):
            found = self._comparison(name)
            if broker is None:
                data = (json.dumps(found.as_json(), indent=2) + "\n").encode()
                plog = self.logdirs.partition(name)
            else:
                report = found.replica(broker)
                data = b"".join(truncated_lines(report))
                plog = report.copy.plog
        dir_attr = _partition_dir_attr(plog)
        attr = Attr(stat.S_IFREG | (dir_attr.mode & 0o444), len(data), dir_attr.uid, dir_attr.gid,
                    dir_attr.mtime_ns, dir_attr.ctime_ns, dir_attr.atime_ns)
        self._keep_small(path, attr, data)
        return attr, data

    def _comparison(self, name: str) -> PartitionReplicas:
        """The partition's copies compared, again only when one of them changed (its segments, its log
        end, a checkpoint file beside it)."""
        replicas = self.logdirs.replicas
        held = replicas.holders(name)
        signature = tuple(_copy_signature(b.logdirs.partition(name)) for b in held)
        with self._compare_lock:
            kept = self._compared.get(name)
            if kept is not None and kept[0] == signature:
                return kept[1]
            found = replicas.compare(name)
            self._compared.put(name, (signature, found))
            return found


def _copy_signature(plog: PartitionLog) -> tuple:
    """What a comparison of the copy depends on, cheaply: its listing, log end and checkpoints' stamps."""
    stamps: list[tuple[int, int, int] | None] = []
    for path in (*(os.path.join(os.path.dirname(plog.path), c) for c in _CHECKPOINTS),
                 os.path.join(plog.path, "leader-epoch-checkpoint"), os.path.join(plog.path, "partition.metadata")):
        try:
            st = os.lstat(path)
            stamps.append((st.st_mtime_ns, st.st_size, st.st_ino))
        except OSError:
            stamps.append(None)
    return plog.path, plog.listing(), plog.log_end_offset(), tuple(stamps)


def _dir_of(st: os.stat_result) -> Attr:
    attr = Attr.of_dir(st)
    attr.mode = stat.S_IFDIR | (stat.S_IMODE(st.st_mode) & 0o555)
    return attr

