"""The hook of the JSON-lines renderer (kfs/views/jsonl.py) for Kafka's internal topics (docs/spec.md section 8).

`line_decoder(topic)` is None for an ordinary topic (the renderer's compiled fast path stays as it
is) and, for an internal topic, a function giving a record's key and value as JSON text:
`{"type": NAME, "version": V, "data": {...}}` objects, or, when the record does not decode, the
section-3 rendering of both and the reason, which the renderer adds as `"decode_error"`.

With a schema registry (kfs.registry, docs/spec.md section 9), an ordinary topic's partition that holds
registry-framed payloads gets kfs.registry.lines.FramedLines instead, whose fourth element is the
line's tail (`"value_schema"`, `"key_schema"`, `"value_decode_error"`, `"key_decode_error"`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kfs.internal_topics import offsets_fast
from kfs.internal_topics.framing import (
    CLUSTER_METADATA,
    CONSUMER_OFFSETS,
    Decoded,
    decode_control,
    decode_control_key,
    decode_key,
    decode_metadata,
    decode_value,
    internal_topic,
)
from kfs.internal_topics.offsets_fast import offset_commit_value_jsonl
from kfs.internal_topics.reader import DecodeError
from kfs.internal_topics.render import jsonl
from kfs.storage import KfsError, PartitionLog

if TYPE_CHECKING:
    from kfs.registry.decode import Registry

# (record) -> (key JSON, value JSON, decode error, tail); a None JSON: that part is rendered as bytes;
# the tail (or None) is JSON text the line gains after its headers (", \"value_schema\": {...}").
LineDecoder = Callable[[Any], "tuple[str | None, str | None, str | None, str | None]"]

# mount option decode=, `kfs cat --decode`: auto decodes the internal topics and registry-framed payloads
DECODE_MODES = ("auto", "raw")
_KEYS_KEPT = 4096  # rendered keys kept per decoder
_COMMIT_TYPES = (b"\x00\x00", b"\x00\x01")  # a __consumer_offsets key's record type: an offset commit


def line_decoder(topic: str, decode: str = "auto", plog: PartitionLog | None = None,
                 registry: Registry | None = None) -> LineDecoder | None:
    """The key/value renderer for `topic`'s records, or None where section 3's bytes apply.

    With the partition at hand, the data records of a `__cluster_metadata` partition are decoded only
    if it is a KRaft metadata log (`is_metadata_log`); with a registry, an ordinary topic's partition
    holding framed payloads decodes them (kfs.registry.lines)."""
    if decode == "raw":
        return None
    if not internal_topic(topic):
        if registry is None or plog is None:
            return None
        from kfs.registry.lines import framed_line_decoder
        return framed_line_decoder(plog, registry)
    # Control records are Kafka's own whatever the partition holds; its data records are metadata
    # records only in a KRaft metadata log.
    data_records = topic != CLUSTER_METADATA or plog is None or is_metadata_log(plog)

    commits = topic == CONSUMER_OFFSETS  # an offset commit's value is written straight from its bytes
    # A partition commits the same few keys (group, topic, partition) again and again: their JSON is kept.
    keys: dict[bytes | None, str] = {}

    def decoded(record: Any) -> tuple[str | None, str | None, str | None, str | None]:
        control = getattr(record, "control", None)
        try:
            if control is not None:  # a control record (listed with control=show)
                value = decode_control(control, record.value)
                return jsonl(decode_control_key(record.key)), None if value is None else jsonl(value), None, None
            if not data_records:
                return None, None, None, None
            key = keys.get(record.key)
            if key is None:
                key = jsonl(decode_key(topic, record.key))
                if len(keys) >= _KEYS_KEPT:
                    keys.clear()
                keys[record.key] = key
            if commits and record.value is not None and record.key[:2] in _COMMIT_TYPES:
                commit = offset_commit_value_jsonl(record.value)  # (None: not plainly well formed)
                if commit is not None:
                    return key, commit, None, None
            return key, jsonl(decode_value(topic, record.key, record.value)), None, None
        except Exception as e:  # never a failed read over one odd record: it shows as raw, with the reason
            return None, None, decode_error_text(e), None

    # (kfs.views.jsonl: the compiled renderer writes an offset commit's line itself, with this text)
    decoded.commits_in_c = commits and data_records and offsets_fast.ENABLED  # type: ignore[attr-defined]
    return decoded


PartsDecoder = Callable[[Any], "tuple[Decoded | None, Decoded | None, str | None]"]


def parts_decoder(topic: str, plog: PartitionLog | None = None) -> PartsDecoder:
    """A data record of internal `topic` as its decoded key and value, and why not when it does not
    decode (then both are None), as `line_decoder` renders them: Spark's typed columns of an internal
    topic (kfs.spark.internal_types). A `__cluster_metadata` partition that is not a metadata log
    decodes nothing, as there."""
    data_records = topic != CLUSTER_METADATA or plog is None or is_metadata_log(plog)

    def decoded(record: Any) -> tuple[Decoded | None, Decoded | None, str | None]:
        if not data_records:
            return None, None, None
        try:
            return decode_key(topic, record.key), decode_value(topic, record.key, record.value), None
        except Exception as e:  # (as line_decoder: the reason, never a failed read)
            return None, None, decode_error_text(e)

    return decoded


def decode_error_text(error: Exception) -> str:
    """The `decode_error` of a record that does not decode: a DecodeError's sentence, else the exception's."""
    return str(error) if isinstance(error, DecodeError) else f"{type(error).__name__}: {error}"


def is_metadata_log(plog: PartitionLog) -> bool:
    """Whether a `__cluster_metadata` partition holds KRaft metadata records: its first data record
    decodes as one (an empty log counts as one).

    Nothing but a record's frame tells a metadata record from other bytes, and a partition of that
    name can hold anything (a test harness's random values, a copied topic): such a partition reads
    as bytes, as any topic does, instead of a decode_error on every line. In a metadata log every
    record that does not decode still says why."""
    try:
        for record in plog.records():
            decode_metadata(record.value)
            return True
    except DecodeError:
        return False
    except KfsError:
        return True  # a damaged first batch is reported by the read that meets it
    return True
