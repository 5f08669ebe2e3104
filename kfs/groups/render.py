"""`kfs groups` output: JSON lines (docs/spec.md section 8) and the table people read.

The table follows `kafka-consumer-groups.sh --describe`: per group a line with its state, then one
row per committed partition. Times are UTC, to the millisecond.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from typing import Any

from kfs.groups.state import CommittedOffset, Snapshot
from kfs.storage.specs import iso_ms
from kfs.views.jsonl import render_bytes

_COLUMNS = ("TOPIC", "PARTITION", "OFFSET", "LEADER-EPOCH", "COMMITTED-AT", "LOG-PARTITION", "LOG-OFFSET",
            "METADATA")


def _bytes(value: object) -> object:
    """Bytes left in decoded data (user data, a subscription that did not decode) as section 3 shows them."""
    if isinstance(value, bytes):
        return json.loads(render_bytes(value))
    raise TypeError(f"cannot render {type(value).__name__}")


def dumps(obj: Any, indent: int | None = None) -> str:
    return json.dumps(obj, ensure_ascii=False, indent=indent, default=_bytes)


@functools.lru_cache(maxsize=1 << 16)
def _quoted(text: str | None) -> str:
    return json.dumps(text, ensure_ascii=False)


def offset_line(c: CommittedOffset) -> str:
    """`dumps(c.as_json())` without building the dict: these are most of the output."""
    return (f'{{"group": {_quoted(c.group)}, "topic": {_quoted(c.topic)}, "partition": {c.partition}, '
            f'"offset": {c.offset}, "leader_epoch": {c.leader_epoch}, "metadata": {_quoted(c.metadata)}, '
            f'"commit_timestamp": {c.commit_timestamp}, "log_offset": {c.log_offset}, '
            f'"log_partition": {c.log_partition}, "expire_timestamp": {c.expire_timestamp}, '
            f'"timestamp": {c.timestamp}}}\n')


def json_lines(snapshot: Snapshot, group: str | None = None) -> Iterator[str]:
    """`kfs groups --json`: per group its state line (when it has group metadata), then its offsets."""
    for name in [group] if group is not None else snapshot.group_names():
        state = snapshot.groups.get(name)
        if state is not None:
            yield dumps(state.as_json()) + "\n"
        offsets = snapshot.offsets.get(name)
        if offsets:
            yield "".join(map(offset_line, offsets))


def group_json(snapshot: Snapshot, group: str) -> bytes:
    """One group as one JSON document (the mount's `.groups/<group>.json`)."""
    state = snapshot.groups.get(group)
    doc = {"group": group, "at": snapshot.at, "state": state.as_json() if state else None,
           "offsets": [c.as_json() for c in snapshot.offsets.get(group, ())]}
    return (dumps(doc, indent=2) + "\n").encode()




def table(snapshot: Snapshot, group: str | None = None) -> Iterator[str]:
    """Per group: a heading line with its state, then its committed offsets as aligned columns
    (LOG-PARTITION and LOG-OFFSET: where in __consumer_offsets the commit record is)."""
    names = [group] if group is not None else snapshot.group_names()
    at = "the log end" if snapshot.at is None else iso_ms(snapshot.at)
    yield f"Committed offsets as of {at}: {len(names)} group(s)\n"
    for name in names:
        yield "\n" + _heading(snapshot, name) + "\n"
        rows = [_COLUMNS] + [
            (c.topic, str(c.partition), str(c.offset), str(c.leader_epoch), iso_ms(c.commit_timestamp),
             str(c.log_partition), str(c.log_offset), c.metadata if c.metadata is not None else "null")
            for c in snapshot.offsets.get(name, ())]
        if len(rows) == 1:
            yield "  (no committed offsets)\n"
            continue
        widths = [max(len(r[i]) for r in rows) for i in range(len(_COLUMNS))]
        numeric = {1, 2, 3, 5, 6}
        for row in rows:
            cells = [cell.rjust(w) if i in numeric and row is not rows[0] else cell.ljust(w)
                     for i, (cell, w) in enumerate(zip(row, widths, strict=True))]
            yield "  " + "  ".join(cells).rstrip() + "\n"


def _heading(snapshot: Snapshot, name: str) -> str:
    state = snapshot.groups.get(name)
    if state is None:
        return f"GROUP {name}  (no group metadata: offsets only)"
    parts: list[Any] = [f"GROUP {name}", state.group_type, state.state, f"generation {state.generation}"]
    if state.protocol_type or state.protocol:
        parts.append(f"protocol {state.protocol_type or '-'}/{state.protocol or '-'}")
    if state.leader:
        parts.append(f"leader {state.leader}")
    parts.append(f"{len(state.members)} member(s)")
    return "  ".join(str(p) for p in parts)
