"""The one seam between the group replay and the decoder of `__consumer_offsets` keys and values.

The replay needs two questions answered, nothing more: what a key is (its schema name, e.g.
`OffsetCommitKey`, and its fields) and what a value is. The answers come from `kfs.internal_topics`, the
schema-driven decoder of Kafka's internal topics; the replay takes any object with these two
methods, so its tests can pin the replay apart from the decoding.

Field names are Kafka's, as its JSON converters print them (`group`, `leaderEpoch`, `groupId`, ...).
"""

from __future__ import annotations

from typing import Protocol

from kfs.internal_topics import CONSUMER_OFFSETS, Decoded, decode_key, decode_value

__all__ = ["Decoded", "InternalCodec", "OffsetsCodec"]


class OffsetsCodec(Protocol):
    """Decodes `__consumer_offsets` records; both calls raise ValueError for bytes that do not decode."""

    def key(self, key: bytes) -> Decoded: ...

    def value(self, key: bytes, value: bytes) -> Decoded: ...


class InternalCodec:
    """`kfs.internal_topics`'s decoder, for `__consumer_offsets`."""

    def key(self, key: bytes) -> Decoded:
        decoded = decode_key(CONSUMER_OFFSETS, key)
        assert decoded is not None  # only the metadata log has null keys
        return decoded

    def value(self, key: bytes, value: bytes) -> Decoded:
        decoded = decode_value(CONSUMER_OFFSETS, key, value)
        assert decoded is not None  # only a null value is a tombstone
        return decoded
