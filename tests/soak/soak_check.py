"""The soak's checks: what the writer's manifest says the log holds, and whether a read agrees.

`Oracle` follows the manifest (`soak_writer`) as it grows. Every batch is in it before its bytes
reach the log, so whatever a reader sees can be checked: a raw batch must be byte for byte one
the writer wrote at that base offset (the original or, after a cleaner swap, the cleaned one); a
JSON line must be the record at its offset (`soak_records.expected_line`); a record may be
missing only where the log has a gap (a control record, a record the cleaner removed, or below
the log start). Never different: a wrong byte is a failure, whatever the race.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import os
import struct
import threading
import time
from dataclasses import dataclass, field

from soak import soak_records as R


@dataclass
class Oracle:
    manifest_path: str
    lock: threading.Lock = field(default_factory=threading.Lock)
    versions: dict[int, set[str]] = field(default_factory=dict)  # batch base -> sha256 of its versions
    bases: list[int] = field(default_factory=list)  # every batch base, in order
    lasts: dict[int, int] = field(default_factory=dict)  # batch base -> last offset as written
    control: set[int] = field(default_factory=set)  # offsets of transaction markers
    removed: set[int] = field(default_factory=set)  # records the cleaner removed
    dropped: set[int] = field(default_factory=set)  # batches the cleaner removed whole
    log_start: int = 0
    log_end: int = 0  # as announced: the last batch may not be on disk yet
    changes: list[tuple[float, str, int]] = field(default_factory=list)  # (monotonic time, delete|clean, base)
    counts: dict[str, int] = field(default_factory=dict)
    files: dict[str, str] | None = None  # the writer's checksums, from its last line
    ends: list[tuple[float, int]] = field(default_factory=list)  # (monotonic time, log end) at each update
    _position: int = 0

    def update(self) -> None:
        """Take in the manifest lines written since the last call."""
        with self.lock:
            try:
                with open(self.manifest_path, "rb") as f:
                    f.seek(self._position)
                    data = f.read()
            except FileNotFoundError:
                return
            complete = data[:data.rfind(b"\n") + 1]
            self._position += len(complete)
            now = time.monotonic()
            for line in complete.splitlines():
                self._apply(json.loads(line), now)
            self.ends.append((now, self.log_end))

    def _apply(self, event: dict, now: float) -> None:
        kind = event["e"]
        self.counts[kind] = self.counts.get(kind, 0) + 1
        if kind == "batch":
            base = event["base"]
            self.versions.setdefault(base, set()).add(event["sha"])
            self.bases.append(base)
            self.lasts[base] = event["last"]
            if event["control"]:
                self.control.add(base)
            self.log_end = event["last"] + 1
        elif kind == "delete":
            self.log_start = event["log_start"]
            self.changes.append((now, "delete", event["base"]))
        elif kind == "clean":
            self.removed.update(event["removed"])
            self.dropped.update(event["dropped"])
            for batch in event["batches"]:
                self.versions[batch["base"]].add(batch["sha"])
            self.changes.append((now, "clean", event["base"]))
        elif kind == "end":
            self.files = event["files"]

    # ---- questions ------------------------------------------------------------------------------

    def window(self) -> tuple[int, int]:
        with self.lock:
            return self.log_start, self.log_end

    def log_end_at(self, when: float) -> int:
        """The log end as announced at monotonic time `when` (as far as this copy knew it then)."""
        with self.lock:
            found = [end for t, end in self.ends if t <= when]
            return found[-1] if found else 0

    def changed_between(self, start: float, end: float, slack: float = 5.0) -> bool:
        """Did a segment vanish (retention, cleaner swap) around a read? Then EIO/ENOENT are expected."""
        with self.lock:
            return any(start - slack <= t <= end + slack for t, _, _ in self.changes)

    def absent_ok(self, offset: int) -> bool:
        """May a reader find no record at `offset`? (a marker, removed by the cleaner, or deleted)"""
        with self.lock:
            return offset in self.control or offset in self.removed or offset < self.log_start

    def is_record(self, offset: int) -> bool:
        with self.lock:
            return offset < self.log_end and offset not in self.control

    def batch_of(self, offset: int) -> int | None:
        """The base of the batch written with `offset` in it."""
        with self.lock:
            i = bisect.bisect_right(self.bases, offset) - 1
            return self.bases[i] if i >= 0 and self.lasts[self.bases[i]] >= offset else None

    def first_offset_at(self, timestamp: int) -> int:
        """The first offset written with a timestamp >= `timestamp` (they never decrease)."""
        steps = max(0, -(-(timestamp - R.BASE_TIMESTAMP) // 2))
        return 3 * steps

    # ---- checks ---------------------------------------------------------------------------------

    def check_raw(self, data: bytes, target: int | None) -> list[str]:
        """Problems in raw bytes from `offset/<target>`: each batch one the writer wrote at its base
        offset, whole, in order, none left out but those the cleaner dropped; the first one holds the
        target (or the next offset present, if the target's batch lost it)."""
        problems: list[str] = []
        position, previous = 0, None
        with self.lock:
            while position < len(data):
                if position + 12 > len(data):
                    problems.append(f"{len(data) - position} stray bytes at the end")
                    break
                base, length = struct.unpack_from(">qi", data, position)
                size = 12 + length
                if length < 49 or base < 0:  # no v2 batch is shorter than its 61-byte header
                    problems.append(f"garbage at {position} (base offset {base}, length {length})")
                    break
                if position + size > len(data):
                    problems.append(f"batch {base} at {position} is cut short ({len(data) - position} of {size})")
                    break
                if hashlib.sha256(data[position:position + size]).hexdigest() not in self.versions.get(base, ()):
                    problems.append(f"batch {base} at {position}: bytes the writer never wrote there")
                if previous is None and target is not None:
                    problems.extend(self._first_batch_problems(base, target))
                elif previous is not None:
                    skipped = self._skipped(previous, base)
                    if skipped:
                        problems.append(f"batches {skipped[:5]} missing between {previous} and {base}")
                previous = base
                position += size
        return problems

    def _first_batch_problems(self, base: int, target: int) -> list[str]:
        i = bisect.bisect_right(self.bases, target) - 1
        holder = self.bases[i] if i >= 0 else None
        if holder is None or base == holder:
            return []
        if base < holder:
            return [f"offset/{target} starts at batch {base}, before the batch {holder} holding it"]
        if self._skipped(holder, base, include_first=True, target=target):
            return [f"offset/{target} starts at batch {base}, past the batch {holder} holding it"]
        return []

    def _skipped(self, previous: int, base: int, include_first: bool = False, target: int = -1) -> list[int]:
        """Batch bases between `previous` and `base` that a reader should have met."""
        lo = bisect.bisect_left(self.bases, previous) + (0 if include_first else 1)
        hi = bisect.bisect_left(self.bases, base)
        missing = []
        for b in self.bases[lo:hi]:
            if b in self.dropped or b < self.log_start:
                continue
            if include_first and b == previous and all(o in self.removed for o in range(target, self.lasts[b] + 1)):
                continue  # the cleaner removed the target and everything after it in that batch
            missing.append(b)
        return missing

    def check_line(self, line: bytes) -> str | None:
        """A JSON line must be, byte for byte, the record at its offset."""
        try:
            offset = json.loads(line)["offset"]
        except (ValueError, KeyError, TypeError):
            return f"not a JSON line: {line[:120]!r}"
        if not self.is_record(offset):
            return f"a line for offset {offset}, which holds no record"
        if line != R.expected_line(offset):
            return f"offset {offset}: {line[:160]!r} differs from what was written"
        return None

    def check_gap(self, after: int, before: int) -> list[int]:
        """Offsets strictly between two consecutive lines that should have had a line."""
        return [o for o in range(after + 1, before) if not self.absent_ok(o)]

    def check_value(self, offset: int, data: bytes) -> str | None:
        """`offset/<N>.value`: exactly the value written at N (a tombstone's is empty)."""
        if not self.is_record(offset):
            return f"offset/{offset}.value exists, but {offset} holds no record"
        expected = R.value(offset) or b""
        return None if data == expected else f"offset/{offset}.value: {data[:80]!r} is not what was written"

    def check_time_answer(self, timestamp: int, offset: int) -> str | None:
        """A time lookup's record: timestamp >= T, and every record before it with one was gone."""
        if R.timestamp(offset) < timestamp:
            return f"time/{timestamp} answered offset {offset}, whose timestamp is {R.timestamp(offset)}"
        skipped = [o for o in range(self.first_offset_at(timestamp), offset) if not self.absent_ok(o)]
        if skipped:
            return f"time/{timestamp} answered offset {offset}, but {skipped[:5]} come first"
        return None

    def expected_lines(self, start: int, end: int) -> bytes:
        """The decoded view from `start` to `end` (exclusive) as the writer wrote it."""
        return b"".join(R.expected_line(o) for o in range(start, end) if not self.absent_ok(o) and self.is_record(o))


def checksum_problems(logdir: str, expected: dict[str, str]) -> list[str]:
    """Every file in the log dir must be one the writer left, with the bytes it wrote."""
    found: dict[str, str] = {}
    for root, _, names in os.walk(logdir):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                found[os.path.relpath(path, logdir)] = hashlib.sha256(f.read()).hexdigest()
    problems = [f"{name}: changed (sha256 {found[name][:12]}, written {sha[:12]})"
                for name, sha in sorted(expected.items()) if name in found and found[name] != sha]
    problems += [f"{name}: missing" for name in sorted(set(expected) - set(found))]
    problems += [f"{name}: not written by the writer" for name in sorted(set(found) - set(expected))]
    return problems
