"""Runs of batch headers the compiled tail walk takes at once (kfs/_native/csrc/storage/walk_v2_headers.c).

A segment's tail walk (LogSegment._refresh_tail) reads every batch header past the last offset index
entry, every header of the segment where the index is missing or empty (a log dir copied without its
`.index` files, a broker that crashed before writing them): ~25 µs a header in Python on a slow core.
`header_runner` gives the walk (BatchFile.header_runs) a function that takes, from each window it reads,
the plain v2 headers whose every check of the Python walk holds, in one call, leaving the walk marks
WalkMarks.passing would; the first header that is not plain is the Python walk's, which raises what is
wrong or handles what is unusual. tests/test_header_runs.py holds the two walks to the same tails, marks
and errors on the Kafka-written fixtures and random damaged segments.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kfs._native import storage as native
from kfs.storage import walk_marks
from kfs.storage.walk_marks import WalkMarks


@dataclass(frozen=True, slots=True)
class HeaderRun:
    """Batches whose headers the compiled walk took: how many, the position after the last, its last
    offset, and the largest max timestamp among them (named as a BatchHeader's)."""

    count: int
    next_position: int
    last_offset: int
    max_timestamp: int


# (window, index of `position` in it, position, the walk's limit, the last offset before) -> a run or None
HeaderRunner = Callable[[memoryview, int, int, int, "int | None"], "HeaderRun | None"]


def header_runner(segment_base: int, marks: WalkMarks | None = None) -> HeaderRunner | None:
    """The run taker of a header walk of the segment at `segment_base`, leaving `marks` if given; None
    without the compiled extension (the Python walk alone)."""
    walk = native.walk_v2_headers
    if walk is None or not -(1 << 63) <= segment_base < (1 << 63):
        return None  # (a segment named past int64, a hostile copy's: the Python walk says what is wrong)

    def run(window: memoryview, at: int, position: int, limit: int, previous_last: int | None) -> HeaderRun | None:
        next_at, largest_time = marks.run_state() if marks is not None else (0, -1)
        got = walk(window, at, position, limit, segment_base, previous_last, marks is not None, next_at,
                   largest_time, walk_marks.MARK_BYTES)  # (read when called, as `passing` reads it)
        if got is None:
            return None
        count, end, last_offset, max_timestamp, times, offsets, positions, next_at, largest_time = got
        if marks is not None:
            marks.passing_run(times, offsets, positions, next_at, largest_time, end)
        return HeaderRun(count, end, last_offset, max_timestamp)

    return run
