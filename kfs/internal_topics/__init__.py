"""Kafka's internal topics decoded: `__consumer_offsets`, `__transaction_state`, `__cluster_metadata`.

The records of these topics are Kafka's own versioned messages. Their schemas are data in
`kfs/internal_topics/schemas/` (kfs's notation of Kafka's message JSON files) and one interpreter,
`kfs/internal_topics/reader.py`, reads any of them; `kfs/internal_topics/framing.py` says how each topic frames
them in record keys and values. API for the rest of kfs:

    from kfs.internal_topics import decode_key, decode_value, Decoded, DecodeError

    key = decode_key("__consumer_offsets", record.key)        # Decoded | None
    value = decode_value("__consumer_offsets", record.key, record.value)   # None: a tombstone
    key.type, key.version, key.data   # "OffsetCommitKey", 1, {"group": "g", "topic": "t", "partition": 0}
    value.data                        # {"offset": 42, "leaderEpoch": -1, "metadata": "", "commitTimestamp": ...}

`data` holds the fields present in that version, in schema order, under the camelCase names
Kafka's JSON converters print (a field of a newer version is absent, not defaulted: use
`data.get("leaderEpoch", -1)`); ints are ints, uuids Kafka's base64 strings, bytes `bytes`. A
classic group's value (`GroupMetadataValue`, protocolType "consumer") has each member's
`subscription` and `assignment` decoded into dicts (`topics`, `assignedPartitions`, ...) when
they decode, as DumpLogSegments does; otherwise they stay `bytes`.

Both functions raise `DecodeError` (a ValueError, with a one-line reason) for bytes Kafka would
not read, and `KeyError` for a topic that is not internal (`internal_topic(topic)` tells).
Decoding is pure and thread-safe; schemas are compiled per (message, version) on first use.
"""

from kfs.internal_topics.framing import (
    CLUSTER_METADATA,
    CONSUMER_OFFSETS,
    INTERNAL_TOPICS,
    TRANSACTION_STATE,
    Decoded,
    decode_control,
    decode_control_key,
    decode_key,
    decode_metadata,
    decode_value,
    internal_topic,
)
from kfs.internal_topics.reader import DecodeError

__all__ = [
    "CLUSTER_METADATA",
    "CONSUMER_OFFSETS",
    "INTERNAL_TOPICS",
    "TRANSACTION_STATE",
    "DecodeError",
    "Decoded",
    "decode_control",
    "decode_control_key",
    "decode_key",
    "decode_metadata",
    "decode_value",
    "internal_topic",
]
