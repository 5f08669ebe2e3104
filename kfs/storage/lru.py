"""A dict bounded in entries and bytes, least recently used out first: every cache the daemon keeps
(partition logs, decoded logs, rendered `.value`s and `info.json`s, lookups, signatures) is one of
these, so a walk over 5,000 partitions or 100,000 distinct files leaves the daemon's memory flat.

Eviction only drops the cache's reference: an object still in use (an open file's partition log)
lives on until its user lets go, and is garbage then.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class LruCache(Generic[K, V]):
    """At most `max_entries` values and (with `weigh`) `max_bytes` of them; thread-safe."""

    def __init__(self, max_entries: int, max_bytes: int | None = None,
                 weigh: Callable[[V], int] | None = None) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._weigh = weigh
        self._items: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            self._items.move_to_end(key)
            return item[0]

    def put(self, key: K, value: V) -> None:
        weight = self._weigh(value) if self._weigh is not None else 0
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            if self.max_bytes is not None and weight > self.max_bytes:
                return  # larger than the whole cache: not kept
            self._items[key] = (value, weight)
            self._bytes += weight
            while len(self._items) > self.max_entries or (self.max_bytes is not None and self._bytes > self.max_bytes):
                _, (_, dropped) = self._items.popitem(last=False)
                self._bytes -= dropped

    def pop(self, key: K) -> V | None:
        with self._lock:
            item = self._items.pop(key, None)
            if item is None:
                return None
            self._bytes -= item[1]
            return item[0]

    def values(self) -> list[V]:
        with self._lock:
            return [value for value, _ in self._items.values()]

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0

    def __len__(self) -> int:
        return len(self._items)

    @property
    def bytes(self) -> int:
        return self._bytes
