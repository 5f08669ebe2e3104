"""The JSON-lines hook (kfs.internal.lines.LineDecoder) for registry-framed keys and values.

Only partitions that hold framed payloads take it: the others keep the compiled renderer and
counter, and cost nothing more. A partition is taken for framed when the registry has a subject
named after its topic (`<topic>-value` or `<topic>-key`, Confluent's default TopicNameStrategy), or
when one of its first data records has a value that looks framed (byte 0 and a schema id: text and
JSON never start so), or a key framed with an id the registry holds (a key written by Kafka's
LongSerializer starts with byte 0 too). The choice is made once per decoded log, and the size cache
keys its counts on the registry's digest.
"""

from __future__ import annotations

import json
from typing import Any

from kfs.registry.decode import PayloadError, Registry
from kfs.storage import KfsError, PartitionLog

SAMPLED_RECORDS = 16  # first data records looked at to tell a framed partition
_encode_str = json.encoder.encode_basestring


class FramedLines:
    """A LineDecoder: (key JSON, value JSON, None, the line's tail of `*_schema` / `*_decode_error`)."""

    def __init__(self, registry: Registry, topic: str) -> None:
        self.registry = registry
        self.digest = registry.digest()
        self.key_subject = topic + "-key"
        self.value_subject = topic + "-value"

    def __call__(self, record: Any) -> tuple[str | None, str | None, str | None, str | None]:
        if getattr(record, "control", None) is not None:
            return None, None, None, None
        key = value = None
        tail = ""
        errors = ""
        data = record.value
        if data is not None and len(data) >= 5 and data[0] == 0:
            try:
                value, schema = self.registry.decode(data, self.value_subject)
                tail += ', "value_schema": ' + schema
            except PayloadError as e:
                errors += ', "value_decode_error": ' + _encode_str(str(e))
            except Exception as e:  # never a failed read over one odd payload
                errors += ', "value_decode_error": ' + _encode_str(f"{type(e).__name__}: {e}")
        data = record.key
        if data is not None and len(data) >= 5 and data[0] == 0:
            try:
                key, schema = self.registry.decode(data, self.key_subject)
                tail += ', "key_schema": ' + schema
            except PayloadError as e:
                errors += ', "key_decode_error": ' + _encode_str(str(e))
            except Exception as e:
                errors += ', "key_decode_error": ' + _encode_str(f"{type(e).__name__}: {e}")
        tail += errors
        return key, value, None, tail or None


def framed_partition(plog: PartitionLog, registry: Registry) -> bool:
    """Whether `plog` holds registry-framed payloads (see the module doc)."""
    subjects = {s for s, _ in registry.state.versions}
    if plog.topic + "-value" in subjects or plog.topic + "-key" in subjects:
        return True
    try:
        for n, record in enumerate(plog.records()):
            value, key = record.value, record.key
            if value is not None and len(value) >= 5 and value[0] == 0:
                return True
            if key is not None and len(key) >= 5 and key[0] == 0 and registry.knows(int.from_bytes(key[1:5], "big")):
                return True
            if n + 1 >= SAMPLED_RECORDS:
                break
    except KfsError:
        return False  # a damaged first batch: the read that meets it says so
    return False


def framed_line_decoder(plog: PartitionLog, registry: Registry | None) -> FramedLines | None:
    """The hook for `plog`, or None where its lines stay section 3's (and the compiled path's)."""
    if registry is None or not framed_partition(plog, registry):
        return None
    return FramedLines(registry, plog.topic)
