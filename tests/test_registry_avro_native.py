"""The compiled Avro renderer (kfs/_native/csrc/registry/avro_json.c) against the Python path it stands in
for (kfs.registry.avro.AvroRenderer.render_python: fastavro and the json module): random schemas (records,
nested unions, arrays, maps, enums, fixed, recursive named types, logical types), datums written by
fastavro's writer, and random mutations of them. Where the compiled renderer answers, its text is the
Python path's, byte for byte; where it declines, `render` gives the Python path's text or its error."""

from __future__ import annotations

import io
import json
import math
import random
import struct
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_writer
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from kfs._native.registry import render_avro
from kfs.record import Record
from kfs.registry.avro import INDEX_OUT_OF_RANGE, AvroDatumError, AvroRenderer
from kfs.registry.decode import Registry
from kfs.registry.lines import FramedLines
from kfs.registry.state import RegistryState
from kfs.storage.errors import CorruptLogError
from kfs.storage.record_stream import ControlRecord, CorruptBatch
from kfs.views.jsonl import line_prefix, render_line, render_line_list, render_lines

pytestmark = pytest.mark.skipif(render_avro is None, reason="the compiled extension is not built")

PRIMITIVE_TYPES = ["null", "boolean", "int", "long", "float", "double", "bytes", "string"]
FLT_MAX = struct.unpack("<f", b"\xff\xff\x7f\x7f")[0]
FLOATS = [0.0, -0.0, 0.1, 1.5, -2.75, 1e-45, 3.3e-39, FLT_MAX, 16777217.0, 1e10, math.nan, math.inf, -math.inf]
DOUBLES = [0.0, -0.0, 0.1, 1e16, 1e-320, 1.7976931348623157e308, 123456789.125, math.nan, math.inf, -math.inf]
TEXTS = ["", "a", 'q"uote', "back\\slash", "\n\t\r\b\f\x00\x1f\x7f", "é", "日本", "\U0001f600", "\u2028", "kfs__float"]


class Schemas:
    """A random Avro schema, with the named types it defines (for references and recursion)."""

    def __init__(self, rnd: random.Random) -> None:
        self.rnd = rnd
        self.count = 0
        self.defined: list[str] = []  # full names usable by reference
        self.open: list[str] = []  # records being defined: a reference to one recurses

    def name(self) -> tuple[str, str]:
        self.count += 1
        namespace = self.rnd.choice(["", "", "a.b", "x"])
        name = f"T{self.count}"
        return name, f"{namespace}.{name}" if namespace else name

    def schema(self, depth: int, in_union: bool = False) -> Any:
        rnd = self.rnd
        choices = ["primitive"] * 4 + ["record", "enum", "fixed"]
        if depth < 4:
            choices += ["array", "map"] + ([] if in_union else ["union", "union"])
        if self.defined:
            choices.append("reference")
        kind = rnd.choice(choices)
        if kind == "primitive":
            t = rnd.choice(PRIMITIVE_TYPES)
            if t in ("int", "long") and rnd.random() < 0.2:
                return {"type": t, "logicalType": "timestamp-millis" if t == "long" else "date"}
            return t if rnd.random() < 0.8 else {"type": t}
        if kind == "reference":
            return rnd.choice(self.defined)
        if kind == "array":
            return {"type": "array", "items": self.schema(depth + 1)}
        if kind == "map":
            return {"type": "map", "values": self.schema(depth + 1)}
        if kind == "union":
            return self.union(depth)
        name, full = self.name()
        schema: dict[str, Any] = {"type": kind, "name": name}
        if full != name:
            schema["namespace"] = full.rsplit(".", 1)[0]
        if kind == "enum":
            schema["symbols"] = [f"S{i}" for i in range(rnd.randint(1, 4))]
        elif kind == "fixed":
            schema["size"] = rnd.choice([0, 1, 2, 5, 16])
        else:
            self.open.append(full)
            fields = []
            for i in range(rnd.randint(0, 4)):
                if self.open and rnd.random() < 0.15:  # recursion, with a way out
                    target = rnd.choice(self.open)
                    t: Any = rnd.choice([["null", target], {"type": "array", "items": target},
                                         {"type": "map", "values": target}])
                else:
                    t = self.schema(depth + 1)
                fields.append({"name": f"f{i}", "type": t})
            schema["fields"] = fields
            self.open.pop()
        self.defined.append(full)
        return schema

    def union(self, depth: int) -> list[Any]:
        branches: list[Any] = []
        kinds: set[str] = set()
        for _ in range(self.rnd.randint(1, 4)):
            b = self.schema(depth + 1, in_union=True)
            kind = b if isinstance(b, str) else b.get("type") if isinstance(b, dict) else "?"
            key = kind if kind in PRIMITIVE_TYPES or kind in ("array", "map") else json.dumps(b)[:200]
            if isinstance(b, str) and b not in PRIMITIVE_TYPES:
                key = b
            if isinstance(b, dict) and "name" in b:
                key = b.get("namespace", "") + "." + b["name"]
            if key in kinds:
                continue
            kinds.add(key)
            branches.append(b)
        return branches


class Values:
    """A random value of a parsed schema, for fastavro's writer."""

    def __init__(self, rnd: random.Random, named: dict[str, Any]) -> None:
        self.rnd = rnd
        self.named = named

    def value(self, schema: Any, depth: int) -> Any:
        rnd = self.rnd
        if isinstance(schema, list):
            options = [b for b in schema if b != "null"] if depth < 6 else []
            if "null" in schema and (not options or rnd.random() < 0.3):
                return None
            branch = rnd.choice(options or schema)
            value = self.value(branch, depth + 1)
            target = self.named.get(branch, branch) if isinstance(branch, str) else branch
            if isinstance(target, dict) and "name" in target:
                return (target["name"], value)  # fastavro's writer: this named branch
            return value
        if isinstance(schema, str):
            if schema in self.named:
                return self.value(self.named[schema], depth)
            schema = {"type": schema}
        kind = schema["type"]
        if isinstance(kind, (dict, list)) or kind in self.named:
            return self.value(kind, depth)
        if kind == "null":
            return None
        if kind == "boolean":
            return rnd.random() < 0.5
        if kind == "int":
            return rnd.choice([0, 1, -1, 2**31 - 1, -(2**31), rnd.randint(-(2**31), 2**31 - 1)])
        if kind == "long":
            return rnd.choice([0, -1, 2**63 - 1, -(2**63), 2**62, rnd.randint(-(2**63), 2**63 - 1),
                               rnd.randint(0, 2**40)])
        if kind == "float":
            return rnd.choice([*FLOATS, rnd.uniform(-1e6, 1e6), struct.unpack("<f", rnd.randbytes(4))[0]])
        if kind == "double":
            return rnd.choice([*DOUBLES, rnd.uniform(-1e6, 1e6), struct.unpack("<d", rnd.randbytes(8))[0]])
        if kind == "string":
            return "".join(rnd.choice(TEXTS) for _ in range(rnd.randint(0, 3)))
        if kind == "bytes":
            return rnd.randbytes(rnd.randint(0, 6))
        if kind == "fixed":
            return rnd.randbytes(schema["size"])
        if kind == "enum":
            return rnd.choice(schema["symbols"])
        if kind == "array":
            n = rnd.randint(0, 3) if depth < 6 else 0
            return [self.value(schema["items"], depth + 1) for _ in range(n)]
        if kind == "map":
            n = rnd.randint(0, 3) if depth < 6 else 0
            return {rnd.choice(TEXTS) + str(i): self.value(schema["values"], depth + 1) for i in range(n)}
        return {f["name"]: self.value(f["type"], depth + 1) for f in schema["fields"]}


def mutate(rnd: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rnd.randint(1, 3)):
        op = rnd.randrange(5)
        at = rnd.randrange(len(out) + 1)
        if op == 0 and out:
            out[min(at, len(out) - 1)] ^= 1 << rnd.randrange(8)
        elif op == 1 and out:
            out[min(at, len(out) - 1)] = rnd.choice([0x00, 0x01, 0x02, 0x7F, 0x80, 0xFF, rnd.randrange(256)])
        elif op == 2:
            del out[at:]
        elif op == 3:
            out[at:at] = rnd.choice([b"\xff" * 10 + b"\x01", b"\x81\x80\x80\x80\x80\x80\x80\x80\x80\x02",
                                     b"\x03", b"\x02\x00", rnd.randbytes(rnd.randint(1, 4))])
        else:
            out += rnd.randbytes(rnd.randint(1, 3))
    return bytes(out)


def python_answer(renderer: AvroRenderer, data: bytes) -> tuple[str, str]:
    """The Python path's text, or its error (type and sentence)."""
    try:
        return "ok", renderer.render_python(data)
    except AvroDatumError as e:
        return "AvroDatumError", str(e)
    except Exception as e:  # (an error the line turns into a sentence too: the same one is wanted)
        return type(e).__name__, str(e)


def answer(renderer: AvroRenderer, data: bytes) -> tuple[str, str]:
    try:
        return "ok", renderer.render(data)
    except AvroDatumError as e:
        return "AvroDatumError", str(e)
    except Exception as e:
        return type(e).__name__, str(e)


def check(renderer: AvroRenderer, data: bytes) -> str | None:
    """The compiled renderer's text, after holding it and `render` to the Python path."""
    expected = python_answer(renderer, data)
    native = render_avro(renderer.program, data) if renderer.program is not None else None  # type: ignore[misc]
    if native is not None:
        assert expected == ("ok", native)
    assert answer(renderer, data) == expected
    return native


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.randoms(use_true_random=False))
def test_compiled_renderer_equals_the_python_path(rnd: random.Random) -> None:
    text = json.dumps(Schemas(rnd).schema(0))
    try:
        named: dict[str, Any] = {}
        parsed = parse_schema(json.loads(text), named_schemas=named)
        renderer = AvroRenderer(text)
    except Exception:
        reject()
    assert renderer.program is not None, text  # every generated schema compiles
    values = Values(rnd, named)
    for _ in range(4):
        out = io.BytesIO()
        try:
            schemaless_writer(out, parsed, values.value(parsed, 0))
        except Exception:
            continue  # (a value fastavro's writer takes for another branch)
        datum = out.getvalue()
        native = check(renderer, datum)
        if python_answer(renderer, datum)[0] == "ok":
            assert native is not None, (text, datum)  # a datum fastavro wrote is the compiled renderer's
        for _ in range(3):
            check(renderer, mutate(rnd, datum))
        check(renderer, memoryview(datum))


RECURSIVE = {"type": "record", "name": "Node", "fields": [
    {"name": "v", "type": "long"}, {"name": "next", "type": ["null", "Node"]},
    {"name": "kids", "type": {"type": "array", "items": "Node"}}]}


def test_recursion_deeper_than_the_bound_is_the_python_paths_error() -> None:
    renderer = AvroRenderer(json.dumps(RECURSIVE))
    shallow = b"\x02\x02" * 40 + b"\x02\x00\x00" + b"\x00" * 40  # 41 nodes, each next in a union
    assert check(renderer, shallow) is not None
    deep = b"\x02\x02" * 300 + b"\x02\x00\x00" + b"\x00" * 300
    assert check(renderer, deep) is None
    with pytest.raises(AvroDatumError, match="nests deeper than 200 levels"):
        renderer.render(deep)


def test_declined_datums_keep_the_python_paths_answer() -> None:
    """What fastavro reads in its own way: the compiled renderer declines, the Python path answers."""
    cases = [
        ("boolean", b"\x02", "false"),  # Java's readBoolean: true only for byte 1 (fastavro: any but 0)
        ({"type": "enum", "name": "E", "symbols": ["A", "B"]}, b"\x01", None),  # index -1: refused, as Java does
        (["null", "string"], b"\x01\x02x", None),  # a union index -1: refused (fastavro: the last branch)
        ({"type": "map", "values": "int"}, b"\x04\x02k\x02\x02k\x04\x00", '{"k": 2}'),  # a key given twice
        ({"type": "map", "values": "double"}, b"\x02\x14kfs__float" + struct.pack("<d", 1.5) + b"\x00", None),
    ]
    for schema, datum, text in cases:
        renderer = AvroRenderer(json.dumps(schema))
        assert render_avro(renderer.program, datum) is None  # type: ignore[misc]
        got = answer(renderer, datum)
        assert got == python_answer(renderer, datum)
        if text is not None:
            assert got == ("ok", text)
    enum = AvroRenderer(json.dumps({"type": "enum", "name": "E", "symbols": ["A", "B"]}))
    assert answer(enum, b"\x01") == ("AvroDatumError", INDEX_OUT_OF_RANGE)
    union = AvroRenderer(json.dumps(["null", "string"]))
    assert answer(union, b"\x01\x02x") == ("AvroDatumError", INDEX_OUT_OF_RANGE)
    flt_max = AvroRenderer('"float"')
    assert render_avro(flt_max.program, b"\xff\xff\x7f\x7f") is None  # type: ignore[misc]
    assert answer(flt_max, b"\xff\xff\x7f\x7f")[0] == "OverflowError"  # (struct.pack's, as before)


def test_errors_are_the_python_paths_sentences() -> None:
    renderer = AvroRenderer(json.dumps({"type": "record", "name": "R", "fields": [
        {"name": "s", "type": "string"}, {"name": "n", "type": "long"}]}))
    for datum, sentence in [(b"\x06ab", "the datum ends early"),
                            (b"\x02a\x02\x00\x00", "2 bytes are left after the datum"),
                            (b"\x02a" + b"\xff" * 9 + b"\x02", "the datum holds a varint beyond 64 bits")]:
        assert render_avro(renderer.program, datum) is None  # type: ignore[misc]
        with pytest.raises(AvroDatumError) as e:
            renderer.render(datum)
        assert str(e.value) == sentence


def _registry_record(state: RegistryState, subject: str, version: int, schema_id: int, schema: Any) -> None:
    """A `_schemas` record as Confluent's registry writes it, applied to `state`."""
    key = {"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1}
    value = {"subject": subject, "version": version, "id": schema_id, "schema": json.dumps(schema)}
    state.apply(json.dumps(key).encode(), json.dumps(value).encode())


def _framed(schema_id: int, schema: Any, value: Any) -> bytes:
    out = io.BytesIO()
    schemaless_writer(out, parse_schema(schema), value)
    return b"\0" + schema_id.to_bytes(4, "big") + out.getvalue()


def test_compiled_lines_equal_the_decoders_lines() -> None:
    """render_jsonl with a FramedLines decoder's table (kfs cat, the mount's files) gives every line exactly
    as render_line with that decoder: values rendered in C, ids it meets first, other schemas' and kinds'
    values, declined datums, errors, headers, framed keys, control and damaged-batch records."""

    order = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
        {"name": "id", "type": "long"}, {"name": "note", "type": ["null", "string"]},
        {"name": "price", "type": "float"}, {"name": "tags", "type": {"type": "map", "values": "int"}}]}
    other = {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}
    state = RegistryState()
    _registry_record(state, "tópico-value", 1, 7, order)  # (a subject that is not ASCII: the tail's UTF-8)
    _registry_record(state, "tópico-value", 2, 8, other)
    _registry_record(state, "json-value", 1, 9, {"type": "object"})
    state.apply(json.dumps({"keytype": "SCHEMA", "subject": "j", "version": 1, "magic": 1}).encode(),
                json.dumps({"subject": "j", "version": 1, "id": 10, "schemaType": "JSON",
                            "schema": "{}"}).encode())
    decoder = FramedLines(Registry(state), "tópico")
    assert decoder.avro_table is not None
    good = _framed(7, order, {"id": 5, "note": "é\n", "price": 0.1, "tags": {"a": 1}})
    values: list[bytes | None] = [
        good, _framed(8, other, "GREEN"), good, _framed(7, order, {"id": -1, "note": None, "price": 2.5, "tags": {}}),
        b"\0\0\0\0\x07" + good[5:] + b"\0",  # 1 byte left after the datum: the Python path's sentence
        good[:-3],  # ends early
        b"\0\0\0\0\x07\x02\x02" + b"\x80" * 20,  # a varint past 64 bits
        _framed(7, order, {"id": 1, "note": None, "price": 1.0, "tags": {"a": 1}})[:-3] + b"\x04\x02a\x02\x02a\x04\x00",
        b"\0\0\0\0\x63\x00", b"\0\0\0\0\0\x02", b"\0\0\0", b'{"json": 1}', None, b"",
        b"\0\0\0\0\x0a" + b'{"a": [1, 2]}', b"\x01" + bytes(16) + b"\x02",
    ]
    records: list[Record] = []
    for i, value in enumerate(values):
        for key, headers in [(b"k", []), (None, []), (b"\0\0\0\0\x07\x02", []), (b"\0\0\0\0\0\0\0\x01", []),
                             (b"k", [("h", b"v")]), (b"k", [("__value_schema_id", b"\0\0\0\0\x07")])]:
            records.append(Record(100 * i + len(records), 1_700_000_000_000, "CreateTime", key, value, headers))
    records.append(ControlRecord(Record(9000, 1, "CreateTime", b"\0\0\0\0\x00", b"\0\0\0\0\x00\x00", []),
                                 "COMMIT", 12, 0))
    records.append(CorruptBatch(CorruptLogError("/x/00.log", 4, "damaged"), 9001))
    prefix = line_prefix("tópico", 0)
    expected = [render_line(prefix, r, decoder).encode("utf-8") for r in records]
    fresh = FramedLines(Registry(state), "tópico")  # (its table fills during the call)
    assert render_line_list(prefix, records, fresh) == expected
    assert render_line_list(prefix, records, decoder) == expected
    assert render_lines(prefix, records, decoder) == b"".join(expected)
    assert b'"value": {"id": 5, "note": {"string": "\\u00e9\\n"}' not in b"".join(expected)  # (not ASCII-escaped)
    assert '"value": {"id": 5, "note": {"string": "é\\n"}, "price": 0.1, "tags": {"a": 1}}'.encode() in expected[0]
    assert b'"value_decode_error": "schema id 7: 1 bytes are left after the datum"' in b"".join(expected)
