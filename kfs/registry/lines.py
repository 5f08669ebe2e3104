"""The JSON-lines hook (kfs.internal_topics.lines.LineDecoder) for registry-framed keys and values.

Only partitions that hold framed payloads take it: the others keep the compiled renderer and
counter, and cost nothing more. A partition is taken for framed when the registry has a subject
named after its topic (`<topic>-value` or `<topic>-key`, Confluent's default TopicNameStrategy), or
when one of its first data records has a value that looks framed (byte 0 and a schema id: text and
JSON never start so; or byte 1 and a schema GUID the registry holds), a `__value_schema_id` or
`__key_schema_id` header (newer clients' framing), or a key framed with an id the registry holds (a
key written by Kafka's LongSerializer starts with byte 0 too). The choice is made once per decoded
log, and the size cache keys its counts on the registry's digest.
"""

from __future__ import annotations

import json
from typing import Any

from kfs._native.registry import render_avro, render_protobuf
from kfs.registry.decode import PayloadError, Registry
from kfs.storage import KfsError, PartitionLog

SAMPLED_RECORDS = 16  # first data records looked at to tell a framed partition
VALUE_HEADER, KEY_HEADER = "__value_schema_id", "__key_schema_id"  # (Confluent's clients' header framing)
_encode_str = json.encoder.encode_basestring


class FramedLines:
    """A LineDecoder: (key JSON, value JSON, None, the line's tail of `*_schema` / `*_decode_error`)."""

    def __init__(self, registry: Registry, topic: str) -> None:
        self.registry = registry
        self.digest = registry.digest()
        self.key_subject = topic + "-key"
        self.value_subject = topic + "-value"
        # A value's 4 id bytes -> (compiled program, its line tail), or False: the ids the registry holds.
        # kfs.views.jsonl hands it to the compiled line renderer (render_jsonl's `avro`), which renders
        # those records' lines whole in C and leaves the others (and ids not seen yet) to this decoder.
        self._fast: dict[bytes, tuple[object, str] | bool] = {}
        self.avro_table = self._fast if render_avro is not None else None
        # The same for Protobuf values of a schema's first message (the message-index byte 0 after the id):
        # render_protobuf's program and tail, or False; the compiled walker's too (walk_v2_run's `protobuf`).
        self._protobuf_fast: dict[bytes, tuple[object, str] | bool] = {}
        self.protobuf_table = self._protobuf_fast if render_protobuf is not None else None

    def __call__(self, record: Any) -> tuple[str | None, str | None, str | None, str | None]:
        value = record.value
        if value is not None and value[:1] == b"\0" and not record.headers and render_avro is not None \
                and getattr(record, "control", None) is None:
            # The common line, in one step: a value framed by an Avro schema's id (or a Protobuf one's,
            # its first message), no header, a key that is not framed; the same answer as _part's, which
            # takes every other record and every datum the compiled renderers decline.
            fast = self._fast.get(value[1:5])
            if fast is None:
                fast = self._fast_of(value[1:5])
            key = record.key
            if fast and (key is None or key[:1] > b"\x01" or not framed(key)):
                program, tail = fast  # type: ignore[misc]
                text = render_avro(program, value, 5)
                if text is not None:
                    return None, text, None, tail
            elif fast is False and value[5:6] == b"\0" and render_protobuf is not None \
                    and (key is None or key[:1] > b"\x01" or not framed(key)):
                # A Protobuf value of its schema's first message: the same answer as _part's, or _part's
                protobuf = self._protobuf_fast.get(value[1:5])
                if protobuf is None:
                    protobuf = self._protobuf_fast_of(value[1:5])
                if protobuf:
                    program, tail = protobuf  # type: ignore[misc]
                    text = render_protobuf(program, value, 6)
                    if text is not None:
                        return None, text, None, tail
        elif getattr(record, "control", None) is not None:
            return None, None, None, None
        value_header = key_header = None
        if record.headers:  # newer clients may name the schema in a header instead of the payload
            for name, header in record.headers:
                if name == VALUE_HEADER:
                    value_header = header
                elif name == KEY_HEADER:
                    key_header = header
        value, value_schema, value_error = self._part(record.value, value_header, self.value_subject, "value")
        key, key_schema, key_error = self._part(record.key, key_header, self.key_subject, "key")
        tail = value_schema + key_schema + value_error + key_error
        return key, value, None, tail or None

    def _fast_of(self, id_bytes: bytes) -> tuple[object, str] | bool:
        """The fast step's program and tail for a value's id bytes, kept for ids the registry holds."""
        if len(id_bytes) != 4 or id_bytes == b"\0\0\0\0" or not self.registry.knows(int.from_bytes(id_bytes, "big")):
            return False
        fast = self.registry.avro_program(int.from_bytes(id_bytes, "big"), self.value_subject)
        self._fast[id_bytes] = False if fast is None else (fast[0], ', "value_schema": ' + fast[1])
        return self._fast[id_bytes]

    def _protobuf_fast_of(self, id_bytes: bytes) -> tuple[object, str] | bool:
        """The Protobuf step's program and tail for a value's id bytes (`_fast_of`'s twin)."""
        schema_id = int.from_bytes(id_bytes, "big")
        fast = self.registry.protobuf_program(schema_id, self.value_subject) if self.registry.knows(schema_id) else None
        self._protobuf_fast[id_bytes] = False if fast is None else (fast[0], ', "value_schema": ' + fast[1])
        return self._protobuf_fast[id_bytes]

    def _part(self, data: bytes | None, header: bytes | None, subject: str, part: str) -> tuple[str | None, str, str]:
        """A key's or value's decoded JSON, its `*_schema` member and its `*_decode_error` member."""
        if data is None or (header is None and not framed(data)):
            return None, "", ""
        try:
            text, schema = self.registry.decode(data, subject, header)
            return text, f', "{part}_schema": ' + schema, ""
        except PayloadError as e:
            return None, "", f', "{part}_decode_error": ' + _encode_str(str(e))
        except Exception as e:  # never a failed read over one odd payload
            return None, "", f', "{part}_decode_error": ' + _encode_str(f"{type(e).__name__}: {e}")


def framed(data: bytes) -> bool:
    """Whether `data` starts as a framed payload: byte 0 and a 4-byte id, or byte 1 and a 16-byte GUID.
    Id 0 is none: registries number from 1, and a key of Kafka's LongSerializer below 2^32 starts with
    five zero bytes (its lines would all say "schema id 0: not in the schema registry")."""
    return (len(data) >= 5 and data[0] == 0 and data[1:5] != b"\0\0\0\0") or (len(data) >= 17 and data[0] == 1)


def framed_partition(plog: PartitionLog, registry: Registry) -> bool:
    """Whether `plog` holds registry-framed payloads (see the module doc)."""
    subjects = {s for s, _ in registry.state.versions}
    if plog.topic + "-value" in subjects or plog.topic + "-key" in subjects:
        return True
    try:
        for n, record in enumerate(plog.records()):
            value, key = record.value, record.key
            if value is not None and value[:1] == b"\0" and framed(value):
                return True
            if value is not None and registry.knows_guid(value):
                return True
            if any(name in (VALUE_HEADER, KEY_HEADER) for name, _ in record.headers):
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
