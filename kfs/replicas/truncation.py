"""Where a follower's log is truncated on following a leader: Kafka's fetcher, round by round.

A follower in the Truncating state (`AbstractFetcherThread.maybeTruncate`) with a latest epoch asks
the leader for the end offset of that epoch (OffsetsForLeaderEpoch; the leader answers with
`UnifiedLog.endOffsetForEpoch`, i.e. `LeaderEpochFileCache.endOffsetFor` over its log end), and
truncates by `getOffsetTruncationState`:

- the leader knows no such epoch (end offset -1): the follower's fetch offset, its log end;
- the follower's largest epoch <= the leader's answer is another epoch: to that epoch's end offset
  (capped at the log end), not complete: the cache is truncated there and the next round asks again
  with the new latest epoch (KIP-279);
- the same epoch: the smaller of both end offsets (capped at the log end), complete;
- the follower knows no epoch that low: the leader's end offset (capped at the log end), complete.

A follower without epochs (an empty log, or v0/v1 batches only: `latestEpoch` is empty) truncates
to its high watermark (`truncateToHighWatermark`; `initialFetchOffset` takes the high watermark then,
from `replication-offset-checkpoint`, 0 without one, between the log start and end as
`UnifiedLog.updateHighWatermark` bounds it). Fetching from the truncation offset past the leader's
log end, or below its log start, is out of range (`fetchOffsetAndTruncate`): the follower truncates to
the leader's log end, or (its log end below the leader's log start) truncates its whole log.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kfs.replicas.epochs import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, EpochCache


@dataclass(frozen=True)
class Round:
    """One OffsetsForLeaderEpoch exchange: what the follower asked, what the leader answered, where the
    follower truncated, and whether that completed truncation."""

    requested_epoch: int
    leader_epoch: int
    leader_end_offset: int
    truncate_to: int
    completed: bool

    def as_json(self) -> dict:
        return {"requested_epoch": self.requested_epoch, "leader_epoch": self.leader_epoch,
                "leader_end_offset": self.leader_end_offset, "truncate_to": self.truncate_to,
                "completed": self.completed}


@dataclass
class Truncation:
    """Where the follower ends up (`truncate_to`), the rounds that took it there, and which rule."""

    truncate_to: int
    rounds: list[Round] = field(default_factory=list)
    rule: str = "leader epochs"


@dataclass(frozen=True)
class LogView:
    """What the rule reads of a copy: its epochs (from its batches), log start and end, high watermark."""

    epochs: EpochCache
    log_start_offset: int
    log_end_offset: int
    high_watermark: int | None


def follower_truncation(leader: LogView, follower: LogView) -> Truncation:
    """Kafka's truncation of `follower` against `leader`, repeated until it completes."""
    epochs = follower.epochs.copy()
    end = follower.log_end_offset
    if epochs.latest_epoch() is None:
        hw = follower.high_watermark if follower.high_watermark is not None else 0
        hw = max(follower.log_start_offset, min(hw, end))
        return _fetched(Truncation(hw, rule="high watermark (no leader epochs in the follower's batches)"), leader,
                        follower)
    rounds: list[Round] = []
    # Each incomplete round truncates the cache below its latest entry: at most one round per entry.
    for _ in range(len(epochs.entries()) + 1):
        requested = epochs.latest_epoch()
        if requested is None:  # (every entry truncated away: as a follower without epochs now)
            return _fetched(Truncation(end, rounds, rule="leader epochs, then none left"), leader, follower)
        leader_epoch, leader_end = leader.epochs.end_offset_for(requested, leader.log_end_offset)
        offset, completed = _truncation_state(epochs, end, leader_epoch, leader_end)
        rounds.append(Round(requested, leader_epoch, leader_end, offset, completed))
        end = min(end, offset)
        epochs.truncate_from_end(end)
        if completed:
            return _fetched(Truncation(end, rounds), leader, follower)
    raise AssertionError("the fetcher's truncation did not complete")  # (each round removes an entry)


def _truncation_state(epochs: EpochCache, end: int, leader_epoch: int, leader_end: int) -> tuple[int, bool]:
    """AbstractFetcherThread.getOffsetTruncationState: (offset, truncation completed)."""
    if leader_end == UNDEFINED_EPOCH_OFFSET:
        return end, True  # the fetch offset: a follower with epochs fetches from its log end
    if leader_epoch == UNDEFINED_EPOCH:
        return min(leader_end, end), True
    follower_epoch, follower_end = epochs.end_offset_for(leader_epoch, end)
    if follower_end == UNDEFINED_EPOCH_OFFSET:  # endOffsetForEpoch: None
        return min(leader_end, end), True
    if follower_epoch != leader_epoch:
        return min(follower_end, end), False
    return min(follower_end, leader_end, end), True


def _fetched(truncation: Truncation, leader: LogView, follower: LogView) -> Truncation:
    """The first fetch from `truncate_to`, the follower's log end now. Past the leader's log end or
    below its log start it is out of range (AbstractFetcherThread.fetchOffsetAndTruncate): past the
    end, the follower truncates to the leader's log end; below the start, its whole log goes
    (truncateFullyAndStartAt the leader's log start): every record from its own log start."""
    offset = truncation.truncate_to
    if offset > leader.log_end_offset:
        truncation.truncate_to = leader.log_end_offset
        truncation.rule += ", then the leader's log end (the fetch offset was out of range)"
    elif offset < leader.log_start_offset:
        truncation.truncate_to = follower.log_start_offset
        truncation.rule += (f", then all of it (its log end {offset} is below the leader's log start "
                            f"{leader.log_start_offset}: truncated fully)")
    return truncation
