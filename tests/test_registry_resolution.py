"""Typed values (the Spark source's `value_decoded`, kfs.registry.resolution) are read as Apache Avro's
Java reader reads the datum, as `kfs cat` reads it (kfs.registry.avro): fastavro alone took a negative
union or enum index from the end of the list, a boolean byte over 1 as true and an int past 32 bits
whole, each a value Java never shows, without a word."""

from __future__ import annotations

import json

import pytest

from kfs.registry.avro import INDEX_OUT_OF_RANGE, AvroDatumError, AvroRenderer
from kfs.registry.resolution import READ_LOGICAL_TYPES, AvroResolver, parse_avro

RECORD = json.dumps({"type": "record", "name": "R", "fields": [
    {"name": "u", "type": ["null", "string"]},
    {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
    {"name": "b", "type": "boolean"},
    {"name": "i", "type": "int"},
]})


def resolver() -> AvroResolver:
    parsed = parse_avro(RECORD, logical_types=READ_LOGICAL_TYPES)
    return AvroResolver(parsed, parsed)


def test_a_valid_datum_reads_as_kfs_cat_shows_it() -> None:
    datum = b"\x02\x02x" + b"\x02" + b"\x01" + b"\x54"  # u="x", e=B, b=true, i=42
    assert resolver().read(datum) == {"u": "x", "e": "B", "b": True, "i": 42}
    assert json.loads(AvroRenderer(RECORD).render(datum)) == {"u": {"string": "x"}, "e": "B", "b": True, "i": 42}


@pytest.mark.parametrize("datum", [b"\x01\x02x\x00\x00\x00", b"\x00\x01\x00\x00"], ids=["union -1", "enum -1"])
def test_a_negative_index_is_refused_as_java_refuses_it(datum: bytes) -> None:
    with pytest.raises(AvroDatumError, match=INDEX_OUT_OF_RANGE):
        resolver().read(datum)
    with pytest.raises(AvroDatumError, match=INDEX_OUT_OF_RANGE):
        AvroRenderer(RECORD).render(datum)


def test_booleans_and_ints_are_what_java_reads() -> None:
    # b = byte 2 (Java's readBoolean: false); i = a 5-byte varint of 2^32 + 84 (Java keeps the low 32 bits: 42)
    datum = b"\x00" + b"\x00" + b"\x02" + b"\xd4\x80\x80\x80\x20"
    read = resolver().read(datum)
    shown = json.loads(AvroRenderer(RECORD).render(datum))
    assert read["b"] is False and shown["b"] is False
    assert read["i"] == 42 and shown["i"] == 42
