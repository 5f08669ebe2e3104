"""Mutated framed payloads (valid framing, mutated datums and index lists) through kfs.registry: every
one gives either a decoded value with its `*_schema` or one sentence, quickly and in bounded memory;
and a decoded Avro value is what fastavro's own JSON-encoding writer makes of the datum fastavro reads
(kfs's part is the rewrite, the conversion and the line, which this holds to the library's answer)."""

from __future__ import annotations

import io
import json
import struct
import time
from pathlib import Path

from fastavro import json_writer, parse_schema
from fastavro.read import schemaless_reader
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kfs.registry import PayloadError, load_registry
from kfs.storage import LogDirs

LOGDIR = str(Path(__file__).parent / "fixtures" / "schema-registry" / "logdir")
REGISTRY = load_registry([LOGDIR])
assert REGISTRY is not None
PAYLOADS = [r.value for topic in ("orders", "users", "customers", "payments", "events")
            for rs in LogDirs([LOGDIR]).partition(f"{topic}-0").record_lists() for r in rs if r.value is not None]


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    payload = bytearray(draw(st.sampled_from(PAYLOADS)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "cut", "insert", "varint", "delete"]))
        at = draw(st.integers(5, max(5, len(payload))))
        if kind == "flip" and at < len(payload):
            payload[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "cut":
            del payload[at:]
        elif kind == "insert":
            payload[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "varint":  # a huge length or count where one may be read
            payload[at:at] = draw(st.sampled_from([b"\xfe\xff\xff\xff\x0f", b"\xff\xff\xff\xff\xff\xff\xff\xff\x7f",
                                                   b"\x81\x80\x80\x80\x80\x01", b"\x01"]))
        elif kind == "delete" and at < len(payload):
            del payload[at:at + draw(st.integers(1, 4))]
    return bytes(payload)


def fastavro_json(schema_text: str, datum: bytes) -> object | None:
    """fastavro's own answer: the JSON encoding of the datum it reads, None where it does not read it whole
    (logical types dropped: docs/spec.md section 9 shows their underlying type)."""
    schema = parse_schema(_without_logical_types(json.loads(schema_text)))
    stream = io.BytesIO(datum)
    try:
        record = schemaless_reader(stream, schema, None)
    except Exception:
        return None
    if stream.tell() != len(datum):
        return None
    out = io.StringIO()
    try:
        json_writer(out, schema, [record])
    except Exception:
        return None
    return json.loads(out.getvalue())


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_payloads_decode_or_say_why(payload: bytes) -> None:
    if len(payload) < 5 or payload[0] != 0:
        return
    schema_id = int.from_bytes(payload[1:5], "big")
    start = time.process_time()
    try:
        text, schema = REGISTRY.decode(payload, "orders-value")
    except PayloadError as e:
        message = str(e)
        assert message.startswith(f"schema id {schema_id}: ") and "\n" not in message and len(message) < 400
        return
    finally:
        assert time.process_time() - start < 2.0
    value = json.loads(text)
    assert json.loads(schema)["id"] == schema_id
    known = REGISTRY.state.by_id[schema_id]
    if known.type == "AVRO" and not known.references:
        expected = fastavro_json(known.schema, payload[5:])
        if expected is not None:
            # fastavro's writer picks a union branch by the value (an int that fits is "int"): kfs
            # says the branch written, so only unions without two branches of one Python type compare;
            # a float is the double fastavro read there, kfs prints the float's own shortest digits
            assert _same(value, expected) or _ambiguous_unions(known.schema)


def _ambiguous_unions(schema_text: str) -> bool:
    """Whether a union of the schema holds two branches one Python value fits (int and long, ...)."""
    text = schema_text.replace(" ", "")
    return any(pair in text for pair in ('"int","long"', '"float","double"'))


def _same(a: object, b: object) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return a == b or abs(a - b) <= 1e-6 * max(abs(a), abs(b)) or _one_subnormal_float(a, b)
    return a == b and type(a) is type(b)


_FLOAT_MIN_NORMAL = 2.0 ** -126


def _one_subnormal_float(a: float, b: float) -> bool:
    """Whether a and b are one subnormal Avro float: kfs prints a float's own shortest digits (-9e-44),
    fastavro the double it widened it to (-8.96831017167883e-44); a subnormal float has too few digits
    for a relative tolerance."""
    def as_float(x: float) -> bytes:
        return struct.pack("<f", x)

    return max(abs(a), abs(b)) < _FLOAT_MIN_NORMAL and as_float(a) == as_float(b)


def _without_logical_types(schema: object) -> object:
    if isinstance(schema, dict):
        return {k: _without_logical_types(v) for k, v in schema.items() if k != "logicalType"}
    if isinstance(schema, list):
        return [_without_logical_types(v) for v in schema]
    return schema
