"""`kfs groups` on several cores: the partitions of `__consumer_offsets` are replayed independently
(a group lives in one of them), so worker processes each take a share and the parent merges.

Only for one-shot commands: a process forks its workers, which is unsafe in a threaded FUSE daemon
(the mount keeps one incremental `GroupsReader` instead). Results travel as plain tuples, which
pickle several times faster than objects.
"""

from __future__ import annotations

import multiprocessing
import os
from operator import attrgetter

from kfs.groups.codec import InternalCodec
from kfs.groups.collector import collector_paused
from kfs.groups.replay import PartitionScan, offsets_partitions
from kfs.groups.state import CommittedOffset, Resolver, Snapshot, merge
from kfs.storage import LogDirs, PartitionLog

_FIELDS = attrgetter(*CommittedOffset.__dataclass_fields__)
_Packed = tuple[list[tuple], dict, dict[str, set[int]], int]


def idle_cpus() -> int:
    """CPUs this process may use that nothing else is using (the 1-minute load average): on a busy
    machine more processes only contend for the same cores (measured: +45% CPU time, no gain)."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, int(usable - os.getloadavg()[0] + 0.5))


def snapshot(logdirs: LogDirs, at: int | None, group: str | None = None, workers: int | None = None) -> Snapshot:
    """The same Snapshot `GroupsReader(logdirs).snapshot(at, group)` gives, computed by `workers`
    processes (default: one per idle CPU, at most one per partition)."""
    plogs = offsets_partitions(logdirs)
    workers = min(workers or idle_cpus(), len(plogs))
    if workers <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        resolver = Resolver(InternalCodec(), keep_values=False)
        with collector_paused():
            return resolver.snapshot([PartitionScan(p, at).advance() for p in plogs], at, group)
    shares = _shares(plogs, workers)
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        packed = pool.starmap(_work, [(logdirs.paths, [p.name for p in share], at, group) for share in shares])
    return merge([_unpack(p, at) for p in packed], at)


def _shares(plogs: list[PartitionLog], workers: int) -> list[list[PartitionLog]]:
    """Partitions dealt to workers by size, largest first, each to the least loaded."""
    sizes = {p.name: sum(os.path.getsize(s.log_path) for s in p.segments()) for p in plogs}
    shares: list[list[PartitionLog]] = [[] for _ in range(workers)]
    loads = [0] * workers
    for plog in sorted(plogs, key=lambda p: -sizes[p.name]):
        i = loads.index(min(loads))
        shares[i].append(plog)
        loads[i] += sizes[plog.name]
    return [share for share in shares if share]


def _work(paths: list[str], names: list[str], at: int | None, group: str | None) -> _Packed:
    logdirs = LogDirs(paths)
    resolver = Resolver(InternalCodec(), keep_values=False)
    with collector_paused():
        part = resolver.snapshot([PartitionScan(logdirs.partition(n), at).advance() for n in names], at, group)
    offsets = [_FIELDS(c) for committed in part.offsets.values() for c in committed]
    return offsets, part.groups, part.known, part.undecodable


def _unpack(packed: _Packed, at: int | None) -> Snapshot:
    offsets, groups, known, undecodable = packed
    part = Snapshot(at, {}, groups, undecodable, known)
    for fields in offsets:
        committed = CommittedOffset(*fields)
        part.offsets.setdefault(committed.group, []).append(committed)
    return part
