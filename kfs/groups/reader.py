"""The one entry point for group snapshots, shared by `kfs groups` and the mount's `.groups/`.

At the log end the per-partition scans are kept and continued as the partitions grow, so a mount
answers a second `cat .groups/G.json` from what is new since the first. Snapshots at a given T are
kept for a few recent T's (a reader stats and then reads the same file).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from kfs.groups.codec import InternalCodec, OffsetsCodec
from kfs.groups.collector import collector_paused
from kfs.groups.replay import PartitionScan, offsets_partitions
from kfs.groups.state import Resolver, Snapshot
from kfs.storage import LogDirs

RECENT_AT = 16  # snapshots at a fixed T kept


class GroupsReader:
    """Snapshots of every group's committed offsets and state; thread-safe."""

    def __init__(self, logdirs: LogDirs, codec: OffsetsCodec | None = None) -> None:
        self.logdirs = logdirs
        self.resolver = Resolver(codec or InternalCodec())
        self._live: dict[str, PartitionScan] = {}
        self._recent: OrderedDict[int, Snapshot] = OrderedDict()
        self._at_end: tuple[tuple[tuple[str, int], ...], Snapshot] | None = None
        self._lock = threading.Lock()

    def snapshot(self, at: int | None = None, group: str | None = None) -> Snapshot:
        """Every group (or only `group`) as of `at` ms (None: the log end)."""
        with self._lock, collector_paused():
            if at is None:
                at_end = self._log_end()
                return at_end if group is None else self._only(at_end, group)
            if group is not None:
                homes = self._log_end().known.get(group, set())
                return self.resolver.snapshot(self._scan_at(at, homes), at, group)
            cached = self._recent.get(at)
            if cached is None:
                cached = self.resolver.snapshot(self._scan_at(at), at)
                self._recent[at] = cached
                if len(self._recent) > RECENT_AT:
                    self._recent.popitem(last=False)
            self._recent.move_to_end(at)
            return cached

    @staticmethod
    def _only(snapshot: Snapshot, group: str) -> Snapshot:
        """One group's part of a snapshot."""
        part = Snapshot(snapshot.at, {}, {}, snapshot.undecodable)
        if group in snapshot.offsets:
            part.offsets[group] = snapshot.offsets[group]
        if group in snapshot.groups:
            part.groups[group] = snapshot.groups[group]
        if group in snapshot.known:
            part.known[group] = snapshot.known[group]
        return part

    def _advance_live(self) -> list[PartitionScan]:
        scans = []
        for plog in offsets_partitions(self.logdirs):
            scan = self._live.get(plog.name)
            if scan is None or scan.plog is not plog:
                scan = self._live[plog.name] = PartitionScan(plog)
            scans.append(scan.advance())
        return scans

    def _log_end(self) -> Snapshot:
        """The snapshot at the log end, rebuilt only when a partition changed. Its `known` says
        which partitions hold records naming a group: a record of the group at any earlier T is
        still there, or the log cleaner removed it with its key's last record, so a group's replay
        at T reads only those partitions."""
        scans = self._advance_live()
        signature = tuple((scan.plog.name, scan.generation) for scan in scans)
        if self._at_end is None or self._at_end[0] != signature:
            self._at_end = (signature, self.resolver.snapshot(scans, None))
        return self._at_end[1]

    def _scan_at(self, at: int, partitions: set[int] | None = None) -> list[PartitionScan]:
        return [PartitionScan(plog, at).advance() for plog in offsets_partitions(self.logdirs)
                if partitions is None or plog.partition in partitions]
