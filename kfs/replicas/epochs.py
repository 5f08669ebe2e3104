"""A copy's leader epochs: Kafka's `LeaderEpochFileCache`, restated, and its `leader-epoch-checkpoint`.

The cache maps each partition leader epoch to the offset where it started. A follower and a leader
compare theirs to find where their logs part (KIP-101, KIP-279): `end_offset_for` is
`LeaderEpochFileCache.endOffsetFor`, `truncate_from_end` / `truncate_from_start` are its
`truncateFromEnd` / `truncateFromStart`, and `assign` is its `assign` (with `isUpdateNeeded` and
`maybeTruncateNonMonotonicEntries`), which `UnifiedLog.append` calls for every v2 batch it appends.
`from_batches` replays those calls over the batches of a copy, so the cache is the one the broker
would hold for the log as it is on disk, whatever its checkpoint file says.

The checkpoint file (`LeaderEpochCheckpointFile`):

    0                      version
    N                      number of entries
    <epoch> <start offset> N lines
"""

from __future__ import annotations

import bisect
import os

from kfs.storage.files import NotARegularFile, read_regular

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
_MAX_CHECKPOINT_BYTES = 16 << 20


class EpochCache:
    """(epoch, start offset) entries, epochs and start offsets both increasing (Kafka's TreeMap)."""

    def __init__(self, entries: list[tuple[int, int]] | None = None) -> None:
        self._epochs: list[int] = []
        self._starts: list[int] = []
        for epoch, start in entries or []:
            self.assign(epoch, start)

    @classmethod
    def from_batches(cls, batches: list[tuple[int, int, int]], log_start_offset: int) -> EpochCache:
        """The cache `UnifiedLog.append` builds from (magic, partition leader epoch, base offset) of
        each batch: a v2 batch assigns its epoch; a v0/v1 batch clears the cache (Kafka's "temporary
        regression to the message format": truncation by high watermark after the next election).
        Then `truncateFromStart(logStartOffset)`, as the log does on loading."""
        cache = cls()
        for magic, epoch, base in batches:
            if magic >= 2:
                if epoch >= 0:
                    cache.assign(epoch, base)
            elif cache._epochs:
                cache._epochs.clear()
                cache._starts.clear()
        cache.truncate_from_start(log_start_offset)
        return cache

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._starts, strict=True))

    def copy(self) -> EpochCache:
        other = EpochCache()
        other._epochs, other._starts = list(self._epochs), list(self._starts)
        return other

    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    def assign(self, epoch: int, start_offset: int) -> None:
        """LeaderEpochFileCache.assign: a new latest entry, after removing the entries it contradicts
        (an epoch not below it, or a start offset not below its start)."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid partition leader epoch entry {epoch} at {start_offset}")
        if self._epochs and not (epoch != self._epochs[-1] or start_offset < self._starts[-1]):
            return  # isUpdateNeeded: the same epoch, started no later
        while self._epochs and (self._epochs[-1] >= epoch or self._starts[-1] >= start_offset):
            self._epochs.pop()
            self._starts.pop()
        self._epochs.append(epoch)
        self._starts.append(start_offset)

    def truncate_from_end(self, end_offset: int) -> None:
        """Remove the entries starting at or after `end_offset` (the log was truncated there)."""
        if end_offset < 0:
            return
        while self._starts and self._starts[-1] >= end_offset:
            self._epochs.pop()
            self._starts.pop()

    def truncate_from_start(self, start_offset: int) -> None:
        """Remove the entries starting at or before `start_offset`, keeping the last of them as
        starting at `start_offset` (the log start moved past them)."""
        cut = bisect.bisect_right(self._starts, start_offset)
        if cut:
            epoch = self._epochs[cut - 1]
            del self._epochs[:cut], self._starts[:cut]
            self._epochs.insert(0, epoch)
            self._starts.insert(0, start_offset)

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """LeaderEpochFileCache.endOffsetFor: (the largest epoch <= requested, the start offset of the
        first epoch after it, or the log end for the latest epoch); (-1, -1) when not known."""
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self._epochs and self._epochs[-1] == requested_epoch:
            return requested_epoch, log_end_offset
        higher = bisect.bisect_right(self._epochs, requested_epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:  # below every known epoch: the first known epoch's start
            return requested_epoch, self._starts[0]
        return self._epochs[higher - 1], self._starts[higher]


def read_epoch_checkpoint(partition_dir: str) -> tuple[list[tuple[int, int]] | None, str | None]:
    """The entries of a partition's `leader-epoch-checkpoint` and None, or (None, why not): None
    and None when there is no such file."""
    path = os.path.join(partition_dir, LEADER_EPOCH_CHECKPOINT)
    if not os.path.lexists(path):
        return None, None
    try:
        text = read_regular(path, _MAX_CHECKPOINT_BYTES).decode("utf-8", errors="replace")
    except NotARegularFile as e:
        return None, str(e)
    except OSError as e:
        return None, f"{path}: {e.strerror or e}"
    lines = text.splitlines()
    if len(lines) < 2 or lines[0].strip() != "0" or not lines[1].strip().isdigit():
        return None, f"{path} is not a leader epoch checkpoint (version 0, a count, then lines of epoch and offset)"
    count = int(lines[1])
    entries: list[tuple[int, int]] = []
    for line in lines[2:]:
        parts = line.split()
        if len(parts) != 2 or not all(p.lstrip("-").isdigit() for p in parts):
            return None, f"{path}: a line that is not an epoch and an offset: {line[:80]!r}"
        entries.append((int(parts[0]), int(parts[1])))
    if len(entries) != count:
        return None, f"{path} says {count} entries and holds {len(entries)}"
    return entries, None
