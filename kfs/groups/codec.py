"""The one seam between the group replay and the decoder of `__consumer_offsets` keys and values.

The replay needs two questions answered, nothing more: what a key is (its schema name, e.g.
`OffsetCommitKey`, and its fields) and what a value is, given its key's schema. The answers come
from kfs's schema-driven decoder of Kafka's internal topics; this module only adapts its calls, so
the replay and its tests do not depend on how that decoder is organised.

Field names are Kafka's, as its JSON converters print them (`group`, `leaderEpoch`, `groupId`, ...).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from kfs.storage import KfsError


@dataclass(frozen=True)
class Decoded:
    """A key or value: its schema name in Kafka, the version it was written with, its fields."""

    type: str
    version: int
    data: dict[str, Any]


class OffsetsCodec(Protocol):
    """Decodes `__consumer_offsets` records; both calls raise ValueError for bytes that do not decode."""

    def key(self, data: bytes) -> Decoded: ...

    def value(self, key_type: str, data: bytes) -> Decoded: ...


class DecoderUnavailable(KfsError):
    """kfs was installed without the internal-topic decoder."""


def default_codec() -> OffsetsCodec:
    """The codec backed by kfs's decoder of Kafka's internal topics."""
    raise DecoderUnavailable("this kfs has no decoder of __consumer_offsets records")
