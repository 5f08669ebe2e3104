"""The compiled Protobuf renderer (kfs/_native/csrc/registry/protobuf_json.c) against the Python path it
stands in for (kfs.registry.protobuf.ProtobufRenderer.render_python: protobuf's parser, json_format and
the json module): random .proto schemas (every scalar type, strings, bytes, enums, nested and recursive
messages, repeated, `optional` and oneof fields), messages set at random and serialized by protobuf,
then the wire read in ways a writer may use (fields out of order, given twice, unpacked) and random
mutations. Where the compiled renderer answers, its text is the Python path's, byte for byte; where the
Python path fails, it declines; and it answers every message protobuf wrote (its subset)."""

from __future__ import annotations

import math
import random
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kfs._native.registry import protobuf_program, render_protobuf
from kfs.registry.protobuf import ProtobufPayloadError, ProtobufRenderer
from kfs.registry.protobuf_program import compile_message

pytestmark = pytest.mark.skipif(render_protobuf is None, reason="the compiled extension is not built")

SCALARS = ["int32", "int64", "uint32", "uint64", "sint32", "sint64", "bool", "fixed32", "sfixed32", "fixed64",
           "sfixed64", "float", "double", "string", "bytes"]
TEXTS = ["", "a", 'q"uote', "back\\slash", "\n\t\r\b\f\x00\x1f\x7f", "é", "日本", "\U0001f600", "\u2028"]
FLT_MAX = struct.unpack("<f", b"\xff\xff\x7f\x7f")[0]
FLOATS = [0.0, 0.1, 1.5, -2.75, 1e-45, 3.3e-39, FLT_MAX, 16777217.0, 1e10, 0.9, math.nan, math.inf, -math.inf]
DOUBLES = [0.0, 0.1, 1e16, 1e-320, 1.7976931348623157e308, 123456789.125, math.nan, math.inf, -math.inf]
LIMITS = {"int32": (-2**31, 2**31 - 1), "sint32": (-2**31, 2**31 - 1), "sfixed32": (-2**31, 2**31 - 1),
          "uint32": (0, 2**32 - 1), "fixed32": (0, 2**32 - 1), "int64": (-2**63, 2**63 - 1),
          "sint64": (-2**63, 2**63 - 1), "sfixed64": (-2**63, 2**63 - 1), "uint64": (0, 2**64 - 1),
          "fixed64": (0, 2**64 - 1)}


def schema_text(rnd: random.Random) -> str:
    """A proto3 file of 1-4 messages (M0 the one framed), fields of every kind, enums, oneofs."""
    lines = ['syntax = "proto3";', "package r;", "enum Color { RED = 0; GREEN = 1; BLUE = 5; }"]
    count = rnd.randint(1, 4)
    for i in range(count):
        fields, number = [], 0
        oneof: list[str] = []
        for _ in range(rnd.randint(0, 9)):
            number += rnd.choice([1, 1, 2, 7, 100])
            kind = rnd.choice([*SCALARS, "Color", "message"])
            if kind == "message":
                kind = f"M{rnd.randrange(count)}"  # (itself or another: recursion)
            label = rnd.choice(["", "", "repeated ", "optional ", "oneof"])
            name = rnd.choice(["f", "snake_case_name", "x2y", "already_camelCase"]) + str(number)
            if label == "oneof":
                oneof.append(f"{kind} {name} = {number};")
            else:
                fields.append(f"{label}{kind} {name} = {number};")
        rnd.shuffle(fields)  # (declaration order is not field-number order)
        body = " ".join(fields) + (f" oneof choice {{ {' '.join(oneof)} }}" if oneof else "")
        lines.append(f"message M{i} {{ {body} }}")
    return "\n".join(lines)


def set_random(rnd: random.Random, message: Any, depth: int) -> None:
    for field in message.DESCRIPTOR.fields:
        if rnd.random() < 0.4 or (field.message_type is not None and depth > 3):
            continue
        if field.is_repeated:
            for _ in range(rnd.randint(0, 3)):
                if field.message_type is not None:
                    set_random(rnd, getattr(message, field.name).add(), depth + 1)
                else:
                    getattr(message, field.name).append(value(rnd, field))
        elif field.message_type is not None:
            set_random(rnd, getattr(message, field.name), depth + 1)
            getattr(message, field.name).SetInParent()
        else:
            setattr(message, field.name, value(rnd, field))


def value(rnd: random.Random, field: Any) -> Any:
    from google.protobuf.descriptor import FieldDescriptor as F

    if field.enum_type is not None:
        return rnd.choice([0, 1, 5, 3, -7])  # (3 and -7: numbers the open enum does not name)
    kind = {F.TYPE_FLOAT: "float", F.TYPE_DOUBLE: "double", F.TYPE_STRING: "string", F.TYPE_BYTES: "bytes",
            F.TYPE_BOOL: "bool"}.get(field.type)
    if kind == "float":
        return rnd.choice(FLOATS)
    if kind == "double":
        return rnd.choice(DOUBLES)
    if kind == "string":
        return rnd.choice(TEXTS) * rnd.randint(1, 3)
    if kind == "bytes":
        return rnd.randbytes(rnd.randint(0, 7))
    if kind == "bool":
        return rnd.random() < 0.5
    low, high = next(LIMITS[n] for n in LIMITS if getattr(F, "TYPE_" + n.upper()) == field.type)
    return rnd.choice([0, 1, -1 if low < 0 else 2, low, high, rnd.randint(low, high)])


def mutate(rnd: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rnd.randint(1, 3)):
        op = rnd.randrange(5)
        at = rnd.randrange(len(out) + 1)
        if op == 0 and out:
            out[min(at, len(out) - 1)] ^= 1 << rnd.randrange(8)
        elif op == 1 and out:
            out[min(at, len(out) - 1)] = rnd.choice([0x00, 0x02, 0x08, 0x0A, 0x80, 0xFF, rnd.randrange(256)])
        elif op == 2:
            del out[at:]
        elif op == 3:
            out[at:at] = rnd.choice([b"\xff" * 10 + b"\x01", b"\x08\x01", b"\x12\x00", b"\x0a\x02\xc3\x28",
                                     b"\x0d\x00\x00\x80\x80", b"\x00\x01", rnd.randbytes(rnd.randint(1, 4))])
        else:
            out += rnd.randbytes(rnd.randint(1, 3))
    return bytes(out)


def python_answer(renderer: ProtobufRenderer, body: bytes) -> tuple[str, str]:
    try:
        return "ok", renderer.render_python(body)[0]
    except ProtobufPayloadError as e:
        return "error", str(e)


def check(renderer: ProtobufRenderer, program: object, body: bytes) -> str | None:
    """The compiled renderer's text (None: declined), after holding it and `render` to the Python path."""
    expected = python_answer(renderer, body)
    native = render_protobuf(program, body, 1)  # type: ignore[misc]
    if native is not None:
        assert expected == ("ok", native), body.hex()
    try:
        got = ("ok", renderer.render(body)[0])
    except ProtobufPayloadError as e:
        got = ("error", str(e))
    assert got == expected
    return native


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.randoms(use_true_random=False))
def test_compiled_renderer_equals_the_python_path(rnd: random.Random) -> None:
    renderer = ProtobufRenderer(schema_text(rnd), [])
    cls, _ = renderer._message_class((0,))
    compiled = compile_message(cls.DESCRIPTOR)
    assert compiled is not None  # every generated schema is within the compiled renderer's subset
    program = protobuf_program(compiled)  # type: ignore[misc]
    for _ in range(4):
        message = cls()
        set_random(rnd, message, 0)
        wire = message.SerializeToString()
        assert check(renderer, program, b"\0" + wire) is not None, wire.hex()  # what protobuf wrote: answered
        other = cls()
        set_random(rnd, other, 0)
        check(renderer, program, b"\0" + wire + other.SerializeToString())  # merged: last wins, lists join
        check(renderer, program, b"\0" + other.SerializeToString() + wire)
        for _ in range(4):
            check(renderer, program, b"\0" + mutate(rnd, wire))


def test_what_the_parser_reads_its_own_way_is_declined_to_it() -> None:
    renderer = ProtobufRenderer('syntax = "proto3"; message M { int32 a = 1; string s = 2; double d = 3;'
                                ' M m = 4; repeated int32 r = 5; oneof o { int32 x = 6; int32 y = 7; } }', [])
    cls, _ = renderer._message_class((0,))
    program = protobuf_program(compile_message(cls.DESCRIPTOR))  # type: ignore[misc]
    answered = {
        b"\x08\x01\x08\x02": '{"a": 2}',  # a scalar given twice: the last
        b"\x28\x01\x2a\x02\x02\x03\x28\x04": '{"r": [1, 2, 3, 4]}',  # unpacked, packed, unpacked
        b"\x2a\x00": "{}",  # an empty packed list: no field
        b"\x08\x00\x12\x00": "{}",  # defaults on the wire: left out
        b"\x30\x00": '{"x": 0}',  # a oneof member at its default: shown
        b"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01": '{"a": -1}',  # a negative int32's 10 bytes
    }
    for wire, text in answered.items():
        assert check(renderer, program, b"\0" + wire) == text
    declined = [
        b"\x19" + struct.pack("<d", -0.0),  # -0.0 without presence: the parser's to judge
        b"\x22\x00\x22\x02\x08\x01",  # a message given twice: merged
        b"\x30\x01\x38\x02",  # two members of one oneof: the last clears the first
        b"\x12\x02\xc3\x28",  # invalid UTF-8
        b"\x40\x01",  # an unknown field
        b"\x0a\x01\x00",  # a wire type the field is not written with
        b"\x08" + b"\xff" * 10 + b"\x01",  # a varint past 10 bytes
        b"\x00\x01",  # field number 0
        b"\x12\x05ab",  # a length past the end
    ]
    for wire in declined:
        assert check(renderer, program, b"\0" + wire) is None, wire.hex()


@pytest.mark.parametrize("text", [
    'syntax = "proto3"; message M { map<string, int32> m = 1; }',
    'syntax = "proto3"; import "google/protobuf/timestamp.proto"; message M { google.protobuf.Timestamp t = 1; }',
    'syntax = "proto2"; message M { required int32 a = 1; }',
    'syntax = "proto2"; enum E { A = 0; } message M { optional E e = 1; }',
    'syntax = "proto3"; enum E { option allow_alias = true; A = 0; B = 0; } message M { E e = 1; }',
])
def test_what_json_format_writes_its_own_way_has_no_program(text: str) -> None:
    renderer = ProtobufRenderer(text, [])
    cls, _ = renderer._message_class((0,))
    assert compile_message(cls.DESCRIPTOR) is None


def test_framed_lines_take_the_compiled_step_with_the_decoders_answer() -> None:
    """FramedLines (kfs cat, the mount's files) renders a Protobuf value of its schema's first message in
    one step; every line is the one its general path (`_part`) gives: other messages, damaged values,
    unknown ids, framed keys."""
    import json

    from kfs.record import Record
    from kfs.registry.decode import Registry
    from kfs.registry.lines import FramedLines
    from kfs.registry.state import RegistryState

    text = ('syntax = "proto3"; package shop; message Order { int64 id = 1; string note = 2; double price = 3; '
            'message Line { string sku = 1; } repeated Line lines = 4; } message Refund { int64 id = 1; }')
    state = RegistryState()
    key = {"keytype": "SCHEMA", "subject": "orders-value", "version": 1, "magic": 1}
    value = {"subject": "orders-value", "version": 1, "id": 3, "schema": text, "schemaType": "PROTOBUF"}
    state.apply(json.dumps(key).encode(), json.dumps(value).encode())
    decoder = FramedLines(Registry(state), "orders")
    order, _ = decoder.registry.compiled(3).renderer._message_class((0,))
    refund, _ = decoder.registry.compiled(3).renderer._message_class((1,))
    good = order(id=7, note="é\n", price=2.5, lines=[{"sku": "A-1"}]).SerializeToString()
    values = [b"\0\0\0\0\3\0" + good, b"\0\0\0\0\3\2\2" + refund(id=1).SerializeToString(),
              b"\0\0\0\0\3\0" + good[:-2], b"\0\0\0\0\3\0" + good + b"\x40\x01", b"\0\0\0\0\x09\0" + good,
              b"\0\0\0\0\3\0", b"\0\0\0\0\3"]
    for value_bytes in values:
        for key_bytes in (b"k", None, b"\0\0\0\0\3\0"):
            record = Record(0, 0, "CreateTime", key_bytes, value_bytes, [])
            part_value, value_schema, value_error = decoder._part(value_bytes, None, "orders-value", "value")
            part_key, key_schema, key_error = decoder._part(key_bytes, None, "orders-key", "key")
            tail = value_schema + key_schema + value_error + key_error
            assert decoder(record) == (part_key, part_value, None, tail or None), (value_bytes, key_bytes)
    assert decoder._protobuf_fast[b"\0\0\0\3"]  # (the step was taken)
    first = decoder(Record(0, 0, "CreateTime", b"k", values[0], []))
    assert first[1] == '{"id": "7", "note": "é\\n", "price": 2.5, "lines": [{"sku": "A-1"}]}'
    assert first[3] == (', "value_schema": {"id": 3, "subject": "orders-value", "version": 1, "type": "PROTOBUF", '
                        '"message": "shop.Order"}')
