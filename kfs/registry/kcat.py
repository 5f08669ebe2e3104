"""`kfs cat -J -s avro` and `kfs cat -f FMT -s avro`: kcat's schema-registry Avro deserializer, offline.

kcat (1.7: kcat.c's `-s`, avro.c's `kc_avro_to_json`, json.c, format.c) decodes Avro only when asked,
with `-s avro` (keys and values), `-s key=avro` or `-s value=avro`, and a registry URL `-r`; kfs takes
the same `-s` and its schemas from the log dirs' registry topic (`-r` is accepted and not used). What
kcat prints, and kfs with it:

- `-J`: a decoded key or payload is written verbatim as its JSON in place of the string, followed by
  `"key_schema_id": N` / `"value_schema_id": N`; one that does not decode is `null` followed by
  `"key_error": "..."` / `"payload_error": "..."` (json.c), and said on stderr as `% ERROR: Failed to
  deserialize value in message in TOPIC [P] at offset O: ...`. A null key or value stays `null`.
- `-f`: `%k` and `%s` print the decoded JSON (format.c); an empty or null one prints as without `-s`.
  Where kcat stops the record at a value that does not decode, kfs prints the value as stored and says
  so on stderr (`% ERROR: Failed to format message in TOPIC [P] at offset O: Avro/Schema-registry
  message deserialization: ...`): nothing is dropped.
- kcat stops at the first such error unless given `-E`; kfs goes on, as kcat -E does.

The JSON of a decoded value is kfs's (docs/spec.md section 9, as the mount shows it: the Avro
specification's JSON encoding, as Java's JsonEncoder and kafka-avro-console-consumer write it), where
kcat's is libavro-c's through jansson: the same JSON values except that jansson escapes non-ASCII
(`\\u00fc`), a float prints as the double it widens to (`0.10000000149011612`, kfs `0.1`), and a named
union branch is labelled by its short name. Only Avro: a payload framed with a Protobuf or JSON
Schema id does not decode with `-s avro` (libserdes would not parse the schema as Avro either).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from kfs.record import Record
from kfs.registry.decode import PayloadError, Registry
from kfs.registry.lines import KEY_HEADER, VALUE_HEADER
from kfs.views.kcat_format import _TOKENS, KcatFormat, KcatJson, _field_getter, _json_bytes

SERDES = ("avro", "key=avro", "value=avro")


def parse_serdes(values: list[str]) -> tuple[bool, bool]:
    """(decode keys, decode values) from kcat's `-s` options; ValueError for what kfs does not take."""
    key = value = False
    for v in values:
        if v == "avro":
            key = value = True
        elif v == "key=avro":
            key = True
        elif v == "value=avro":
            value = True
        else:
            raise ValueError(f"-s {v}: kfs cat decodes Avro framed by a schema registry (-s avro, -s key=avro, "
                             "-s value=avro, the schemas from the log dirs' registry topic); kcat's pack-str "
                             "deserializers are not supported")
    return key, value


class AvroDecoder:
    """A framed key's or value's Avro datum as JSON text and its schema id; PayloadError when not."""

    def __init__(self, registry: Registry, topic: str, partition: int,
                 warn: Callable[[str], None] | None = None) -> None:
        self.registry = registry
        self.topic = topic
        self.partition = partition
        self.warn = warn or (lambda text: print(text, file=sys.stderr, flush=True))

    def decode(self, record: Record, part: str) -> tuple[bytes, int]:
        data = record.key if part == "key" else record.value
        assert data is not None
        wanted = KEY_HEADER if part == "key" else VALUE_HEADER
        header = next((bytes(v) for name, v in record.headers if name == wanted and v is not None), None)
        if header is None and not (len(data) >= 5 and data[0] == 0) and not (len(data) >= 17 and data[0] == 1):
            raise PayloadError("message not produced with Schema-Registry Avro framing")
        source = data if header is None else header
        state = self.registry.state
        known = state.by_id.get(int.from_bytes(source[1:5], "big")) if source[:1] == b"\0" else \
            state.by_guid.get(bytes(source[1:17])) if source[:1] == b"\1" else None
        if known is not None and known.type != "AVRO":
            raise PayloadError(f"schema id {known.id}: a {known.type} schema, not Avro (-s avro decodes Avro)")
        text, schema = self.registry.decode(data, f"{self.topic}-{part}", header)
        described: dict[str, Any] = json.loads(schema)
        return text.encode("utf-8", "surrogatepass"), int(described["id"])


class AvroKcatJson(KcatJson):
    """kcat -J with -s avro / key=avro / value=avro (see the module doc)."""

    def __init__(self, topic: str, partition: int, broker: int, decoder: AvroDecoder, keys: bool,
                 values: bool) -> None:
        super().__init__(topic, partition, broker)
        self.decoder = decoder
        self.keys = keys
        self.values = values

    def _part(self, record: Record, part: str) -> bytes:
        data = record.key if part == "key" else record.value
        if data is None or not (self.keys if part == "key" else self.values):
            return _json_bytes(None if data is None else bytes(data))
        try:
            text, schema_id = self.decoder.decode(record, part)
        except PayloadError as e:
            what = "key" if part == "key" else "value"
            self.decoder.warn(f"% ERROR: Failed to deserialize {what} in message in {self.decoder.topic} "
                              f"[{self.decoder.partition}] at offset {record.offset}: {e}")
            name = "key_error" if part == "key" else "payload_error"
            return b'null,"' + name.encode() + b'":' + json.dumps(str(e), ensure_ascii=False).encode()
        return text + b',"' + part.encode() + b'_schema_id":%d' % schema_id


class AvroKcatFormat(KcatFormat):
    """kcat -f FMT with -s avro / key=avro / value=avro: %k and %s print the decoded JSON."""

    def __init__(self, text: str, topic: str, partition: int, null: bytes, decoder: AvroDecoder, keys: bool,
                 values: bool) -> None:
        super().__init__(text, topic, partition, null)
        self.decoder = decoder
        names = [_TOKENS[op][1] for op, _ in self.parts if op != "L"]
        plain = _field_getter(names, null)
        decoded = [i for i, name in enumerate(names) if (name == "key" and keys) or (name == "value" and values)]
        literals = sum(len(literal) for op, literal in self.parts if op == "L")

        def fields(r: Record) -> tuple[object, ...]:
            out = list(plain(r))
            for i in decoded:
                part = names[i]
                data = r.key if part == "key" else r.value
                if data:  # (kcat decodes a non-empty one: an empty or null one prints as without -s)
                    out[i] = self._decoded(r, part, data)
            return tuple(out)

        self._values = fields
        # a decoded value may be longer than it is stored (bytes as \\u00XX): sizes taken per record
        self._size_of = lambda values: literals + sum(len(v) if isinstance(v, bytes) else 20 for v in values)

    def _decoded(self, record: Record, part: str, data: bytes) -> bytes:
        try:
            return self.decoder.decode(record, part)[0]
        except PayloadError as e:
            what = "key" if part == "key" else "message"
            self.decoder.warn(f"% ERROR: Failed to format message in {self.decoder.topic} [{self.decoder.partition}] "
                              f"at offset {record.offset}: Avro/Schema-registry {what} deserialization: {e}")
            return bytes(data)
