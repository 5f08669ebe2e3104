"""Registry-framed keys and values decoded (docs/spec.md section 9): byte 0, a 4-byte big-endian schema id,
then an Avro datum (kfs.registry.avro), a message-index list and a Protobuf message
(kfs.registry.protobuf), or UTF-8 JSON (JSON Schema).

`Registry` holds one rebuilt state and compiles each schema once, on first use; it is shared by
every partition of a mount or command and is thread-safe (compiling twice in a race is harmless).
"""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass
from typing import Any

from kfs.registry.avro import AvroDatumError, AvroRenderer, AvroSchemaError
from kfs.registry.protobuf import ProtobufPayloadError, ProtobufRenderer, ProtobufSchemaError
from kfs.registry.state import RegistryState, SchemaVersion

MAX_REFERENCE_DEPTH = 32  # references of references: deeper is taken for a cycle


class PayloadError(ValueError):
    """A framed key or value that does not decode: one sentence naming the id and what failed."""


def framed_id(data: bytes | None) -> int | None:
    """The schema id of a registry-framed payload (byte 0 + 4-byte id + at least nothing), else None."""
    if data is None or len(data) < 5 or data[0] != 0:
        return None
    return int.from_bytes(data[1:5], "big")


@dataclass(frozen=True)
class _Compiled:
    kind: str
    renderer: Any  # AvroRenderer, ProtobufRenderer, or None (JSON Schema, or an error)
    error: str | None


class Registry:
    """Decoding with one registry state: `decode(payload, subject)` -> (JSON text, schema JSON)."""

    def __init__(self, state: RegistryState) -> None:
        self.state = state
        self._digest = state.digest()
        self._compiled: dict[int, _Compiled] = {}
        self._schema_json: dict[tuple[int, str | None], str] = {}
        self._lock = threading.Lock()

    def digest(self) -> str:
        """A digest of the state: decoded sizes depend on it (kfs.views.decoded's cache key)."""
        return self._digest

    def knows(self, schema_id: int) -> bool:
        return schema_id in self.state.by_id

    def decode(self, data: bytes, subject: str, header: bytes | None = None) -> tuple[str, str]:
        """A framed payload's decoded JSON text and its `*_schema` object's JSON text; PayloadError
        when it does not decode. `subject`: the topic's subject for this part (`<topic>-value`).
        `header`: the record's `__value_schema_id` / `__key_schema_id` header (newer clients' framing),
        which then names the schema (and for Protobuf holds the message indexes) and `data` is the
        datum alone. A schema is named by its id (byte 0, 4 bytes) or its GUID (byte 1, 16 bytes)."""
        schema_id, name, compiled, body = self.frame(data, header)
        if compiled.kind == "AVRO":
            try:
                text = compiled.renderer.render(body)
            except AvroDatumError as e:
                raise PayloadError(f"{name}: {e}") from None
        elif compiled.kind == "PROTOBUF":
            try:
                text, message = compiled.renderer.render(body)
            except ProtobufPayloadError as e:
                raise PayloadError(f"{name}: {e}") from None
            schema = self._schema_object(schema_id, subject)
            return text, schema[:-1] + ', "message": ' + json.dumps(message) + "}"
        else:  # JSON Schema: the JSON itself
            try:
                text = _JSON.encode(json.loads(bytes(body).decode("utf-8")))
            except (UnicodeDecodeError, ValueError, RecursionError) as e:
                raise PayloadError(f"{name}: the value is not JSON text ({type(e).__name__})") from None
        return text, self._schema_object(schema_id, subject)

    def frame(self, data: bytes, header: bytes | None = None) -> tuple[int, str, _Compiled, bytes]:
        """A framed payload's schema id, its name in an error ("schema id 7"), the compiled schema and
        the body its renderer takes; PayloadError when the framing or the schema fails (see `decode`)."""
        source = data if header is None else header
        if len(source) >= 5 and source[0] == 0:
            schema_id = int.from_bytes(source[1:5], "big")
            rest = source[5:]
            name = f"schema id {schema_id}"
        elif len(source) >= 17 and source[0] == 1:
            guid = bytes(source[1:17])
            rest = source[17:]
            name = f"schema guid {uuid.UUID(bytes=guid)}"
            known = self.state.by_guid.get(guid)
            if known is None:
                raise PayloadError(f"{name}: not in the schema registry")
            schema_id = known.id
        else:
            raise PayloadError("the schema id header holds neither an id (byte 0 and 4 bytes) nor a GUID "
                               "(byte 1 and 16 bytes)")
        compiled = self.compiled(schema_id)
        if compiled.error is not None:
            raise PayloadError(f"{name}: {compiled.error}")
        # (with a header, a Protobuf payload's message indexes are in it, after the id)
        body = rest if header is None else rest + data if compiled.kind == "PROTOBUF" else data
        return schema_id, name, compiled, body

    def compiled(self, schema_id: int) -> _Compiled:
        """The schema of `schema_id` compiled once: its kind, renderer, or the sentence why not."""
        compiled = self._compiled.get(schema_id)
        return compiled if compiled is not None else self._compile(schema_id)

    def avro_program(self, schema_id: int, subject: str) -> tuple[object, str] | None:
        """The compiled renderer's program for the Avro schema of `schema_id` and the `*_schema` object's
        JSON text `decode` gives with it, or None where `decode` is the only way (not Avro, not compiled)."""
        compiled = self.compiled(schema_id)
        program = getattr(compiled.renderer, "program", None) if compiled.kind == "AVRO" else None
        return None if program is None else (program, self._schema_object(schema_id, subject))

    def protobuf_program(self, schema_id: int, subject: str) -> tuple[object, str] | None:
        """The compiled renderer's program for the first message of the Protobuf schema of `schema_id`
        (message indexes [0], the one byte 0 after the id) and the `*_schema` object's JSON text `decode`
        gives with it, or None where `decode` is the only way (not Protobuf, no program)."""
        compiled = self.compiled(schema_id)
        if compiled.kind != "PROTOBUF" or compiled.renderer is None:
            return None
        try:
            program, message = compiled.renderer.program((0,))
        except ProtobufPayloadError:  # (a schema of no message)
            return None
        if program is None:
            return None
        schema = self._schema_object(schema_id, subject)
        return program, schema[:-1] + ', "message": ' + json.dumps(message) + "}"

    def knows_guid(self, data: bytes) -> bool:
        """Whether `data` (byte 1 then 16 bytes) names a schema GUID the registry holds."""
        return len(data) >= 17 and data[0] == 1 and bytes(data[1:17]) in self.state.by_guid

    def _compile(self, schema_id: int) -> _Compiled:
        schema = self.state.by_id.get(schema_id)
        if schema is None:
            compiled = _Compiled("", None, "not in the schema registry")
        elif schema.type == "AVRO":
            try:
                compiled = _Compiled("AVRO", AvroRenderer(schema.schema, self._reference_texts(schema)), None)
            except (AvroSchemaError, PayloadError) as e:
                compiled = _Compiled("AVRO", None, str(e))
            except ImportError:
                compiled = _Compiled("AVRO", None, "decoding Avro needs fastavro (pip install 'kfs[schemas]')")
        elif schema.type == "JSON":
            compiled = _Compiled("JSON", None, None)
        else:
            try:
                compiled = _Compiled("PROTOBUF", ProtobufRenderer(schema.schema, self._reference_imports(schema)), None)
            except (ProtobufSchemaError, PayloadError) as e:
                compiled = _Compiled("PROTOBUF", None, str(e))
            except ImportError:
                compiled = _Compiled("PROTOBUF", None, "decoding Protobuf needs protobuf and grpcio-tools "
                                                       "(pip install 'kfs[schemas]')")
        with self._lock:
            self._compiled[schema_id] = compiled
        return compiled

    def _reference_texts(self, schema: SchemaVersion) -> list[str]:
        """The texts of the schemas `schema` references, each after its own references."""
        return [text for _, text in self._reference_imports(schema)]

    def _reference_imports(self, schema: SchemaVersion) -> list[tuple[str, str]]:
        """(reference name, text) of the schemas `schema` references, each after its own references."""
        texts: list[tuple[str, str]] = []
        seen: set[tuple[str, int]] = set()

        def visit(s: SchemaVersion, depth: int) -> None:
            if depth > MAX_REFERENCE_DEPTH:
                raise PayloadError("its references nest deeper than 32 (a cycle?)")
            for ref in s.references:
                if (ref.subject, ref.version) in seen:
                    continue
                seen.add((ref.subject, ref.version))
                target = self.state.version(ref.subject, ref.version)
                if target is None:
                    raise PayloadError(f"its reference {ref.name} ({ref.subject} version {ref.version}) "
                                       "is not in the schema registry")
                visit(target, depth + 1)
                texts.append((ref.name, target.schema))

        visit(schema, 0)
        return texts

    def _schema_object(self, schema_id: int, subject: str) -> str:
        key = (schema_id, subject)
        text = self._schema_json.get(key)
        if text is None:
            holder = self.state.subject_of(schema_id, subject)
            kind = holder.type if holder is not None else "AVRO"
            if holder is None or not holder.subject:  # (a schema file: no subject)
                subject_text, version_text = "null", "null"
            else:
                subject_text, version_text = json.dumps(holder.subject, ensure_ascii=False), str(holder.version)
            text = (f'{{"id": {schema_id}, "subject": {subject_text}, "version": {version_text}, '
                    f'"type": "{kind}"}}')
            with self._lock:
                self._schema_json[key] = text
        return text


_JSON = json.JSONEncoder(ensure_ascii=False, allow_nan=True)
