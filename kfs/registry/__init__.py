"""Schema-registry framed payloads decoded offline (docs/spec.md section 9), from the registry's own topic.

Most production topics carry values written by Confluent's serializers: byte 0, a 4-byte schema id,
then an Avro datum (or a Protobuf message, or JSON Schema'd JSON); newer clients may name the schema
by its GUID, in the payload or in a header. The registry keeps its schemas in a compacted topic,
`_schemas`, in the same log dirs; kfs rebuilds its state from there and decodes.

    state.py     the registry's state rebuilt from `_schemas` records, as the registry replays them
    sources.py   where schemas come from (the log dirs' topic, other log dirs, a directory of files),
                 and RegistryWatch, which follows them on a live broker
    avro.py      Avro datums to the Avro specification's JSON encoding (fastavro decodes)
    protobuf.py  Protobuf messages to protobuf's JSON mapping (.proto compiled by grpcio-tools' protoc)
    decode.py    framed payloads: the id or GUID, the schema compiled once, the decoded JSON or one sentence
    lines.py     the JSON-lines hook: which partitions are framed, and the `*_schema` / `*_decode_error` keys
    cli.py       `kfs schemas`

API:

    from kfs.registry import load_registry
    registry = load_registry(["/var/lib/kafka/data"])      # Registry, or None without a registry topic
    text, schema = registry.decode(value, "orders-value")  # PayloadError (one sentence) if it does not decode
"""

from __future__ import annotations

from kfs.registry.decode import PayloadError, Registry, framed_id
from kfs.registry.sources import DEFAULT_TOPIC, SchemasSourceError, load_state
from kfs.registry.state import RegistryState, SchemaVersion

__all__ = ["DEFAULT_TOPIC", "PayloadError", "Registry", "RegistryState", "SchemaVersion", "SchemasSourceError",
           "framed_id", "load_registry"]


def load_registry(logdirs: list[str], schemas: str | None = None, topic: str = DEFAULT_TOPIC) -> Registry | None:
    """The registry for decoding `logdirs`' records (see kfs.registry.sources.load_state); None
    when there is no registry topic and no `schemas` was given."""
    state = load_state(logdirs, schemas, topic)
    return None if state is None else Registry(state)
