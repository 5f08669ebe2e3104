"""The one interpreter of Kafka's message schemas (kfs/internal_topics/schema.py): bytes in, JSON-ready data out.

It reads what the `read()` that Kafka's MessageDataGenerator writes for each message reads, field
by field (generator/src/main/java/org/apache/kafka/message/MessageDataGenerator.java):

    non-flexible version            flexible version (KIP-482)
    string   int16 length, -1 null  unsigned varint length + 1, 0 null
    bytes    int32 length, -1 null  unsigned varint length + 1, 0 null
    array    int32 count, -1 null   unsigned varint count + 1, 0 null
    struct   inline; a nullable one is preceded by an int8 (< 0: null)
    fixed    bool, int8, int16, uint16, int32, uint32, int64, float64 big-endian; uuid 16 bytes
    ...and after every struct's fields, in flexible versions, the tagged fields:
             unsigned varint count, then per field: varint tag, varint size, the value

and gives what the JsonConverter Kafka generates beside it writes (JsonConverterGenerator.java):
the fields present in the version, in schema order, under their camelCase names; a tagged field
only when it differs from its default; uuids as Kafka's `Uuid.toString()` (URL-safe base64, no
padding); bytes stay `bytes` for the renderer to show (kfs/internal_topics/render.py).

Each (struct, version) is compiled once into a list of field readers; runs of fixed-width fields
become one `struct.Struct` unpack. Records in `__consumer_offsets` are small and many: this is
the loop `kfs groups` spends its time in.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Callable
from typing import Any

from kfs.internal_topics.schema import Field, Message, Struct

Reader = Callable[[bytes, int], tuple[Any, int]]


class DecodeError(ValueError):
    """Bytes that are not a valid message of the schema (says what and where)."""


_FIXED = {"bool": "?", "int8": "b", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I", "int64": "q",
          "float64": "d"}
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"


def read_message(message: Message, data: bytes, version: int, position: int = 0) -> tuple[dict[str, Any], int]:
    """`message` at `version` from `data[position:]`: (its fields, the position after it)."""
    reader = _messages.get((id(message), version))
    if reader is None:
        reader = _messages[(id(message), version)] = _compiled(message.body, version, version in message.flexible)
    try:
        return reader(data, position)
    except DecodeError:
        raise
    except (IndexError, struct.error):
        raise DecodeError(f"{message.name} version {version}: ends early") from None


def uvarint(data: bytes, position: int) -> tuple[int, int]:
    """Kafka's unsigned varint (ByteUtils.readUnsignedVarint): at most 5 bytes, an int32."""
    b = data[position]
    if b < 0x80:
        return b, position + 1
    value, shift = b & 0x7F, 7
    while True:
        position += 1
        b = data[position]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return (value - (1 << 32) if value >= 1 << 31 else value), position + 1
        shift += 7
        if shift > 28:
            raise DecodeError("varint is too long")


def uuid_string(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


_cache: dict[tuple[int, int, bool], Reader] = {}
_messages: dict[tuple[int, int], Reader] = {}  # (id of a module-level Message, version): its reader


def _compiled(body: Struct, version: int, flexible: bool) -> Reader:
    key = (id(body), version, flexible)
    reader = _cache.get(key)
    if reader is None:
        reader = _cache[key] = _compile_struct(body, version, flexible)
    return reader


def _compile_struct(body: Struct, version: int, flexible: bool) -> Reader:
    present = [f for f in body.fields if version in f.versions]
    untagged = [f for f in present if version not in f.tagged]
    tagged = {f.tag: f for f in body.fields if f.tag is not None and f.tagged.low <= f.versions.high
              and f.tagged.high >= f.versions.low}
    steps: list[tuple[Any, Reader, bool]] = []  # (name or names, reader, several values)
    run: list[Field] = []

    def flush() -> None:
        if run:
            steps.append(_fixed_run(run))
            run.clear()

    for f in untagged:
        if not f.array and f.type in _FIXED and version not in f.nullable:
            run.append(f)
            continue
        flush()
        steps.append((f.name, _field_reader(f, version, flexible, tagged=False), False))
    flush()
    order = [(f.name, f) for f in present]
    tag_readers = {tag: (f, _field_reader(f, version, flexible, tagged=True)) for tag, f in tagged.items()}
    has_tagged = any(version in f.tagged for f in present)
    name = body.name

    def read(data: bytes, position: int) -> tuple[dict[str, Any], int]:
        out: dict[str, Any] = {}
        for target, reader, several in steps:
            value, position = reader(data, position)
            if several:
                out.update(zip(target, value, strict=True))
            else:
                out[target] = value
        if not flexible:
            return out, position
        count, position = uvarint(data, position)
        found: dict[str, Any] = {}
        for _ in range(count):
            tag, position = uvarint(data, position)
            size, position = uvarint(data, position)
            entry = tag_readers.get(tag)
            if entry is None:  # an unknown tagged field: Kafka keeps it aside, its converter ignores it
                if size < 0 or position + size > len(data):
                    raise DecodeError(f"{name}: tagged field {tag} runs past the end")
                position += size
                continue
            f, reader = entry
            if version not in f.tagged:
                raise DecodeError(f"{name}: tag {tag} is not valid for version {version}")
            value, position = reader(data, position)
            if not is_default(f, value):
                found[f.name] = value
        if not has_tagged:
            return out, position
        return {n: out[n] if n in out else found[n] for n, f in order if n in out or n in found}, position

    return read


def _fixed_run(fields: list[Field]) -> tuple[Any, Reader, bool]:
    unpacker = struct.Struct(">" + "".join(_FIXED[f.type] for f in fields))
    size = unpacker.size
    unpack = unpacker.unpack_from
    if len(fields) == 1:
        def read_one(data: bytes, position: int) -> tuple[Any, int]:
            return unpack(data, position)[0], position + size
        return fields[0].name, read_one, False

    def read_run(data: bytes, position: int) -> tuple[Any, int]:
        return unpack(data, position), position + size
    return tuple(f.name for f in fields), read_run, True


def _field_reader(f: Field, version: int, flexible: bool, tagged: bool) -> Reader:
    nullable = version in f.nullable
    if f.array:
        element = _element_reader(f, version, flexible)
        return _length_prefixed(f.name, flexible, nullable, 4, _array_body(element))
    if f.type == "struct":
        assert f.struct is not None
        return _struct_reader(f, version, flexible, nullable, tagged)
    return _scalar_reader(f.name, f.type, flexible, nullable)


def _element_reader(f: Field, version: int, flexible: bool) -> Reader:
    if f.type == "struct":
        assert f.struct is not None
        body = f.struct
        return lambda data, position: _compiled(body, version, flexible)(data, position)
    return _scalar_reader(f.name + " element", f.type, flexible, nullable=False)


def _scalar_reader(name: str, kind: str, flexible: bool, nullable: bool) -> Reader:
    if kind in _FIXED:
        unpacker = struct.Struct(">" + _FIXED[kind])
        size, unpack = unpacker.size, unpacker.unpack_from
        return lambda data, position: (unpack(data, position)[0], position + size)
    if kind == "uuid":
        def read_uuid(data: bytes, position: int) -> tuple[str, int]:
            end = position + 16
            if end > len(data):
                raise DecodeError(f"{name}: ends early")
            return uuid_string(data[position:end]), end
        return read_uuid
    if kind == "string":
        return _string_reader(name, flexible, nullable)
    if kind == "bytes":
        return _length_prefixed(name, flexible, nullable, 4, _read_bytes)
    if kind == "records":
        return _length_prefixed(name, flexible, nullable, 4, _read_no_records)
    raise DecodeError(f"{name}: unknown type {kind}")


def _string_reader(name: str, flexible: bool, nullable: bool) -> Reader:
    """A string field in one function (the commonest field of the internal topics' keys)."""
    def read(data: bytes, position: int) -> tuple[str | None, int]:
        if flexible:
            length, position = uvarint(data, position)
            length -= 1
        else:
            length = (data[position] << 8 | data[position + 1]) - (0x10000 if data[position] & 0x80 else 0)
            position += 2
        if length < 0:
            if not nullable:
                raise DecodeError(f"non-nullable field {name} was serialized as null")
            return None, position
        end = position + length
        if end > len(data):
            raise DecodeError(f"{name}: length {length} runs past the end")
        if length > 0x7FFF:
            raise DecodeError(f"string had invalid length {length}")
        return str(data[position:end], "utf-8", "replace"), end  # as Java's String(bytes, UTF_8): replaced
    return read


def _read_bytes(data: bytes, start: int, length: int) -> tuple[bytes, int]:
    end = start + length
    return bytes(data[start:end]), end


def _read_no_records(data: bytes, start: int, length: int) -> tuple[bytes, int]:
    return b"", start + length  # the converters print a records field as empty bytes


def _array_body(element: Reader) -> Callable[[bytes, int, int], tuple[list[Any], int]]:
    def read_items(data: bytes, position: int, count: int) -> tuple[list[Any], int]:
        items = []
        for _ in range(count):
            item, position = element(data, position)
            items.append(item)
        return items, position
    return read_items


_INT16 = struct.Struct(">h").unpack_from
_INT32 = struct.Struct(">i").unpack_from


def _length_prefixed(name: str, flexible: bool, nullable: bool, width: int,
                     body: Callable[[bytes, int, int], tuple[Any, int]]) -> Reader:
    """A string, bytes or array: its length (an array's count), then `body`; null when negative."""
    def read(data: bytes, position: int) -> tuple[Any, int]:
        if flexible:
            length, position = uvarint(data, position)
            length -= 1
        elif width == 2:
            length, position = _INT16(data, position)[0], position + 2
        else:
            length, position = _INT32(data, position)[0], position + 4
        if length < 0:
            if not nullable:
                raise DecodeError(f"non-nullable field {name} was serialized as null")
            return None, position
        if length > len(data) - position:
            raise DecodeError(f"{name}: length {length} runs past the end")
        return body(data, position, length)

    return read



def _struct_reader(f: Field, version: int, flexible: bool, nullable: bool, tagged: bool) -> Reader:
    assert f.struct is not None
    body = f.struct

    def read(data: bytes, position: int) -> tuple[Any, int]:
        if nullable:  # a presence marker: a varint when tagged, else an int8 (MessageDataGenerator)
            if tagged:
                present, position = uvarint(data, position)
                if present <= 0:
                    return None, position
            else:
                if struct.unpack_from(">b", data, position)[0] < 0:
                    return None, position + 1
                position += 1
        return _compiled(body, version, flexible)(data, position)

    return read


def default_value(f: Field) -> Any:
    """The field's default as the reader gives values (Kafka's FieldSpec.fieldDefault)."""
    text = f.default
    if text == "null":
        return None
    if f.array:
        return []
    if f.type == "bool":
        return (text or "false").lower() == "true"
    if f.type in _FIXED:
        if f.type == "float64":
            return float(text or 0)
        if not text:
            return 0
        return int(text[2:], 16) if text.startswith("0x") else int(text)
    if f.type == "string":
        return text or ""
    if f.type in ("bytes", "records"):
        return b""
    if f.type == "uuid":
        return text or ZERO_UUID
    return {}  # a struct: all of its fields at their defaults (see is_default)


def is_default(f: Field, value: Any) -> bool:
    """Kafka's test for leaving a tagged field out (FieldSpec.generateNonDefaultValueCheck)."""
    if f.default == "null" or value is None:
        return value is None and f.default == "null"
    if f.type == "struct" and not f.array:
        assert f.struct is not None
        return all(is_default(sub, value[sub.name]) for sub in f.struct.fields if sub.name in value)
    return bool(value == default_value(f))
