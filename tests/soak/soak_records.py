"""The soak's records: every record's key, value, headers and timestamp are a function of its offset.

The writer (`soak_writer`) and the checks (`soak_check`) compute them independently, so a reader
can check any record it meets without asking the writer, and a `.value` names its own offset
(`o=<N>;`), so a time lookup's answer can be checked too. The mix covers what docs/spec.md section 3
renders: UTF-8 text, non-ASCII text, non-UTF-8 bytes (base64), tombstones and headers.
"""

from __future__ import annotations

import json
import re

TOPIC = "soak.live-events"
PARTITION = 0
PARTITION_DIR = f"{TOPIC}-{PARTITION}"
BASE_TIMESTAMP = 1_700_000_000_000
KEYS = 20000  # the cleaner keeps about half of a segment it cleans

_OFFSET_IN_VALUE = re.compile(rb"o=(\d+);")


def _mix(offset: int) -> int:
    """A cheap deterministic hash of an offset (a 64-bit LCG step), for variety without state."""
    return (offset * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF


def timestamp(offset: int) -> int:
    """Non-decreasing in the offset, several records per millisecond: ListOffsets has one answer."""
    return BASE_TIMESTAMP + (offset // 3) * 2


def key(offset: int) -> bytes:
    h = _mix(offset)
    if h % 89 == 0:
        return b"\xffkey-%d" % (h >> 20 & 3)  # not UTF-8: rendered as base64
    return b"key-%d" % ((h >> 8) % KEYS)


def value(offset: int) -> bytes | None:
    h = _mix(offset) >> 16
    kind = h % 31
    if kind == 7:
        return None  # a tombstone
    pad = b"x" * ((h >> 5) % 300)
    if kind == 3:
        return b"\x80o=%d;\xfe" % offset + pad  # not UTF-8
    if kind == 5:
        return f"o={offset};caf\u00e9 \u2603 ".encode() + pad  # UTF-8, not ASCII
    return b'o=%d;{"event": "click", "n": %d}' % (offset, h % 1000) + pad


def headers(offset: int) -> list[tuple[str, bytes]]:
    if offset % 3:
        return []
    return [("trace-id", b"t-%d" % offset), ("bin", b"\x00\xff")]


def offset_of_value(data: bytes) -> int | None:
    """The offset a value names, or None (a tombstone's empty `.value`)."""
    m = _OFFSET_IN_VALUE.search(data[:40])
    return int(m.group(1)) if m else None


def _render(data: bytes | None) -> object:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        import base64

        return {"base64": base64.b64encode(data).decode("ascii")}


def expected_line(offset: int) -> bytes:
    """The JSON line (docs/spec.md section 3) of the record at `offset`, byte for byte."""
    line = {
        "topic": TOPIC, "partition": PARTITION, "offset": offset, "timestamp": timestamp(offset),
        "timestamp_type": "CreateTime", "key": _render(key(offset)), "value": _render(value(offset)),
        "headers": [[k, _render(v)] for k, v in headers(offset)],
    }
    return json.dumps(line, ensure_ascii=False).encode("utf-8") + b"\n"
