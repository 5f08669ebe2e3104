"""kfs.registry.avro against fastavro's own JSON-encoding writer: every shape of union, float and
bytes the schema-guided converters handle, in records, arrays, maps and other unions."""

from __future__ import annotations

import io
import json

import pytest
from fastavro import json_writer, parse_schema, schemaless_writer

from kfs.registry.avro import AvroRenderer

ITEM = {"type": "record", "name": "Item", "namespace": "x", "fields": [
    {"name": "f", "type": "float"}, {"name": "u", "type": ["null", "float", "double"]}]}
SCHEMA = {"type": "record", "name": "Top", "namespace": "x", "fields": [
    {"name": "items", "type": {"type": "array", "items": ITEM}},
    {"name": "maybe_items", "type": ["null", {"type": "array", "items": "Item"}]},
    {"name": "m", "type": {"type": "map", "values": ["null", "Item", {"type": "map", "values": "float"}]}},
    {"name": "e", "type": ["null", {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}]},
    {"name": "fx", "type": ["null", {"type": "fixed", "name": "Two", "size": 2}]},
    {"name": "b", "type": ["bytes", "string"]},
    {"name": "nested", "type": ["null", {"type": "array", "items": [
        "int", "long", {"type": "map", "values": "bytes"}]}]},
    {"name": "plain", "type": {"type": "record", "name": "Plain", "fields": [{"name": "s", "type": "string"}]}},
    {"name": "other_ns", "type": ["null", {"type": "record", "name": "Far", "namespace": "y", "fields": [
        {"name": "g", "type": ["null", "float"]}]}]},
]}
VALUES = [
    {"items": [{"f": 0.1, "u": None}, {"f": 1.5, "u": 2.25}], "maybe_items": None, "m": {},
     "e": None, "fx": None, "b": b"\x00\xff", "nested": None, "plain": {"s": ""}, "other_ns": None},
    {"items": [], "maybe_items": [{"f": -3.0, "u": 0.2}], "m": {"a": None, "b": {"f": 7.0, "u": None},
                                                              "c": {"k": 0.3}},
     "e": "GREEN", "fx": b"ab", "b": "text", "nested": [1, 1 << 40, {"z": b"\x01"}], "plain": {"s": "é"},
     "other_ns": {"g": 0.7}},
]


def expected(value: dict) -> object:
    out = io.StringIO()
    json_writer(out, parse_schema(SCHEMA), [value])
    return json.loads(out.getvalue())


@pytest.mark.parametrize("value", VALUES)
def test_renders_as_fastavros_json_writer(value: dict) -> None:
    data = io.BytesIO()
    schemaless_writer(data, parse_schema(SCHEMA), value)
    got = json.loads(AvroRenderer(json.dumps(SCHEMA)).render(data.getvalue()))
    assert got == expected(value)


def test_floats_print_as_java_prints_them() -> None:
    """A 32-bit float with the digits that read back as it (Java's Float.toString), not the double's."""
    schema = {"type": "record", "name": "F", "fields": [{"name": "f", "type": "float"},
                                                        {"name": "u", "type": ["null", "float"]}]}
    data = io.BytesIO()
    schemaless_writer(data, parse_schema(schema), {"f": 0.1, "u": 3.3})
    text = AvroRenderer(json.dumps(schema)).render(data.getvalue())
    assert text == '{"f": 0.1, "u": {"float": 3.3}}'


@pytest.mark.parametrize("varint", [b"\x80" * 11 + b"\x01", b"\xff" * 9 + b"\x7f", b"\xfe" * 10 + b"\x01"])
def test_a_varint_over_64_bits_is_refused_not_wrapped(varint: bytes) -> None:
    """fastavro reads a varint of any length and keeps its low 64 bits (`80 x11 01` reads as 4096): a
    number the datum does not hold. kfs refuses it, as Java's BinaryDecoder does ("Invalid long
    encoding"). Found by the fuzz campaign's `payloads` target (tests/fuzz/fuzz_payloads.py)."""
    from kfs.registry.avro import AvroDatumError

    renderer = AvroRenderer(json.dumps({"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "string"}, {"name": "b", "type": ["null", "long"]}]}))
    with pytest.raises(AvroDatumError, match="varint"):
        renderer.render(b"\x02x" + b"\x02" + varint)
    assert renderer.render(b"\x02x\x02" + b"\xfe" + b"\xff" * 8 + b"\x01") == \
        '{"a": "x", "b": {"long": 9223372036854775807}}'  # ten bytes, the largest long: still read


def test_an_int_beyond_32_bits_is_read_as_java_reads_it() -> None:
    """An int varint of 5 bytes is read as Java's BinaryDecoder.readInt reads it, its low 32 bits (fastavro,
    and confluent-kafka-python's AvroDeserializer with it, would show 4294967295 for `fe ff ff ff 1f`); one of
    more than 5 bytes is refused, as Java refuses it. The same where kfs walks the datum first (nine
    high-bit bytes then one over 1, as in non-Latin text). tests/test_registry_avro_java_ints.py has more."""
    from kfs.registry.avro import AvroDatumError

    renderer = AvroRenderer(json.dumps({"type": "record", "name": "R", "fields": [
        {"name": "s", "type": "string"}, {"name": "i", "type": "int"}]}))
    text = "日本語の".encode()
    assert renderer.render(bytes([len(text) * 2]) + text + b"\xfe\xff\xff\xff\x1f") == \
        '{"s": "日本語の", "i": 2147483647}'
    assert renderer.render(b"\x00\xfe\xff\xff\xff\x1f") == '{"s": "", "i": 2147483647}'
    with pytest.raises(AvroDatumError, match="an int of more than 5 bytes"):
        renderer.render(bytes([len(text) * 2]) + text + b"\xfe\xff\xff\xff\xff\x01")
    assert renderer.render(bytes([len(text) * 2]) + text + b"\xfe\xff\xff\xff\x0f") == \
        '{"s": "日本語の", "i": 2147483647}'
