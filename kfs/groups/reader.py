"""The one entry point for group snapshots, shared by `kfs groups` and the mount's `.groups/`.

At the log end the per-partition scans are kept and continued as the partitions grow, so a mount
answers a second `cat .groups/G.json` from what is new since the first. Snapshots at a given T are
kept for a few recent T's (a reader stats and then reads the same file).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from kfs.groups.codec import InternalCodec, OffsetsCodec
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
        with self._lock:
            if at is None:
                scans = self._advance_live()
                if group is not None:
                    return self.resolver.snapshot(scans, None, group)
                signature = tuple((scan.plog.name, scan.generation) for scan in scans)
                if self._at_end is None or self._at_end[0] != signature:
                    self._at_end = (signature, self.resolver.snapshot(scans, None))
                return self._at_end[1]
            if group is not None:
                return self.resolver.snapshot(self._scan_at(at), at, group)
            cached = self._recent.get(at)
            if cached is None:
                cached = self.resolver.snapshot(self._scan_at(at), at)
                self._recent[at] = cached
                if len(self._recent) > RECENT_AT:
                    self._recent.popitem(last=False)
            self._recent.move_to_end(at)
            return cached

    def _advance_live(self) -> list[PartitionScan]:
        scans = []
        for plog in offsets_partitions(self.logdirs):
            scan = self._live.get(plog.name)
            if scan is None or scan.plog is not plog:
                scan = self._live[plog.name] = PartitionScan(plog)
            scans.append(scan.advance())
        return scans

    def _scan_at(self, at: int) -> list[PartitionScan]:
        return [PartitionScan(plog, at).advance() for plog in offsets_partitions(self.logdirs)]
