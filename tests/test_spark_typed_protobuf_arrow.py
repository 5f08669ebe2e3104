"""Typed Protobuf columns built by the compiled decoder (kfs/_native/csrc/registry/protobuf_arrow.c)
equal the per-row path's (the protobuf package's parser, kfs.spark.protobuf_types' converter,
pa.array) value for value and error for error:

- on the registry fixture's `payments` (tests/fixtures/schema-registry: a reference, a Timestamp,
  nested messages and enums, a map, bytes, an optional field, other messages of the schema);
- over random `.proto` schemas (proto2 and proto3: every scalar type, enums open and closed, nested
  and repeated messages, packed and unpacked repeated fields, maps, oneofs, optional and required
  fields, Timestamp and Duration, empty messages), random messages serialized by the protobuf package,
  byte mutations of them, two messages concatenated (protobuf merges them: declined here) and unknown
  fields; whole and pruned (a query reading some fields);
- a message the compiled decoder takes is decoded in C: only what the module docstring lists is
  declined.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, event, given, reject, settings
from hypothesis import strategies as st

pytest.importorskip("pyspark")
pytest.importorskip("grpc_tools")
from pyspark.sql.types import StringType

sys.path.insert(0, str(Path(__file__).parent))
from test_registry_avro_native import mutate
from test_spark_typed_arrow import arrays, assert_same, pruned, typed_rows

from kfs._native.registry import protobuf_arrow_decode, protobuf_arrow_program
from kfs.registry import load_registry
from kfs.registry.decode import Registry
from kfs.registry.state import RegistryState
from kfs.spark.pruning import project_array
from kfs.spark.typed import ArrayRow, FramedRows, _column, _prefix, decoded_fields, plan_from_field
from kfs.storage import LogDirs

pytestmark = pytest.mark.skipif(protobuf_arrow_decode is None, reason="the compiled extension is not built")

FIXTURES = Path(__file__).parent / "fixtures"
SCALARS = ["int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32", "fixed64", "sfixed32", "sfixed64",
           "float", "double", "bool", "string", "bytes"]
MAP_KEYS = ["string", "string", "string", "int32"]  # (an int key: no compiled program, the per-row path's)


class ProtoSchemas:
    """Random `.proto` texts: a top message `Top` and the types it uses."""

    def __init__(self, rnd: random.Random, proto3: bool) -> None:
        self.rnd = rnd
        self.proto3 = proto3
        self.defs: list[str] = []
        self.count = 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def enum(self) -> str:
        name = self.name("E")
        first = 0 if self.proto3 else self.rnd.choice([0, 1, 3])
        numbers = sorted({first, *(self.rnd.randint(-2, 9) for _ in range(self.rnd.randint(0, 3)))} - {first})
        values = [f"  {name}_V{first if first >= 0 else 'm'} = {first};"]
        values += [f"  {name}_V{n if n >= 0 else 'm' + str(-n)} = {n};" for n in numbers]
        self.defs.append(f"enum {name} {{\n" + "\n".join(values) + "\n}")
        return name

    def message(self, depth: int, name: str | None = None) -> str:
        name = name or self.name("M")
        rnd = self.rnd
        lines: list[str] = []
        numbers = rnd.sample(range(1, 40), rnd.randint(0 if depth else 1, 7))
        oneof: list[str] = []
        for number in numbers:
            label, kind = self.field(depth)
            field = f"{kind} f{number} = {number}"
            if label == "oneof":
                oneof.append(f"    {field};")
                continue
            options = []
            if label == "repeated" and kind in SCALARS[:13] and rnd.random() < 0.3:
                options.append(f"packed = {'true' if rnd.random() < 0.5 else 'false'}")
            if not self.proto3 and label in ("optional", "required") and kind in SCALARS[:13] \
                    and rnd.random() < 0.2:
                options.append("default = 1" if kind != "bool" else "default = true")
            lines.append(f"  {label + ' ' if label else ''}{field}" + (f" [{', '.join(options)}]" if options else "")
                         + ";")
        if oneof:
            lines.append("  oneof choice {\n" + "\n".join(oneof) + "\n  }")
        self.defs.append(f"message {name} {{\n" + "\n".join(lines) + "\n}")
        return name

    def field(self, depth: int) -> tuple[str, str]:
        rnd = self.rnd
        roll = rnd.random()
        if roll < 0.45:
            kind = rnd.choice(SCALARS)
        elif roll < 0.55:
            kind = self.enum()
        elif roll < 0.65:
            kind = rnd.choice(["google.protobuf.Timestamp", "google.protobuf.Duration"])
        elif roll < 0.8 and depth < 2:
            kind = self.message(depth + 1)
        elif roll < 0.9:
            value = rnd.choice([rnd.choice(SCALARS), self.enum() if rnd.random() < 0.3 else "string"]
                               + ([self.message(depth + 1)] if depth < 2 else []))
            return "", f"map<{rnd.choice(MAP_KEYS)}, {value}>"
        else:
            kind = rnd.choice(SCALARS)
        labels = ["", "repeated", "optional", "oneof"] if self.proto3 else ["optional", "repeated", "required",
                                                                           "oneof"]
        weights = [5, 3, 2, 1] if self.proto3 else [5, 3, 1, 1]
        return rnd.choices(labels, weights)[0], kind

    def text(self) -> str:
        self.message(0, "Top")
        top = self.defs.pop()
        header = 'syntax = "proto3";' if self.proto3 else 'syntax = "proto2";'
        body = [top, *self.defs]
        imports = [f'import "google/protobuf/{name.lower()}.proto";' for name in ("Timestamp", "Duration")
                   if any(f"google.protobuf.{name}" in d for d in body)]
        return "\n".join([header, "package t;", *imports, *body]) + "\n"


def fill(rnd: random.Random, message: Any, depth: int = 0) -> None:
    """Random values in a message's fields (some left unset), as a producer would set them."""
    from google.protobuf.descriptor import FieldDescriptor as F

    if message.DESCRIPTOR.full_name in ("google.protobuf.Timestamp", "google.protobuf.Duration"):
        message.seconds = rnd.choice([0, 1, -1, rnd.randint(-10 ** 11, 10 ** 11)])  # (within Spark's range:
        message.nanos = rnd.choice([0, 999_999_999, rnd.randint(0, 999_999_999)])  # the mutations go past)
        return
    for fd in message.DESCRIPTOR.fields:
        if rnd.random() < 0.3 and not fd.is_required:
            continue
        if fd.type == F.TYPE_MESSAGE and fd.message_type.GetOptions().map_entry:
            target = getattr(message, fd.name)
            for _ in range(rnd.choice([0, 1, 1, 2])):
                key = scalar(rnd, fd.message_type.fields_by_name["key"])
                value_fd = fd.message_type.fields_by_name["value"]
                if value_fd.type == F.TYPE_MESSAGE:
                    fill(rnd, target[key], depth + 1)
                else:
                    target[key] = scalar(rnd, value_fd)
            continue
        if fd.is_repeated:
            target = getattr(message, fd.name)
            for _ in range(rnd.randint(0, 3)):
                if fd.type == F.TYPE_MESSAGE:
                    fill(rnd, target.add(), depth + 1)
                else:
                    target.append(scalar(rnd, fd))
            continue
        if fd.type == F.TYPE_MESSAGE:
            sub = getattr(message, fd.name)
            sub.SetInParent()
            fill(rnd, sub, depth + 1)
        else:
            setattr(message, fd.name, scalar(rnd, fd))


def scalar(rnd: random.Random, fd: Any) -> Any:
    from google.protobuf.descriptor import FieldDescriptor as F

    t = fd.type
    if fd.message_type is not None and fd.message_type.full_name in ("google.protobuf.Timestamp",
                                                                     "google.protobuf.Duration"):
        return None
    bits = {F.TYPE_INT32: 32, F.TYPE_SINT32: 32, F.TYPE_SFIXED32: 32, F.TYPE_INT64: 64, F.TYPE_SINT64: 64,
            F.TYPE_SFIXED64: 64}
    if t in bits:
        low, high = -(1 << (bits[t] - 1)), (1 << (bits[t] - 1)) - 1
        return rnd.choice([0, 1, -1, low, high, rnd.randint(low, high)])
    if t in (F.TYPE_UINT32, F.TYPE_FIXED32):
        return rnd.choice([0, 1, (1 << 32) - 1, rnd.randrange(1 << 32)])
    if t in (F.TYPE_UINT64, F.TYPE_FIXED64):
        return rnd.choice([0, 1, (1 << 64) - 1, rnd.randrange(1 << 64)])
    if t in (F.TYPE_FLOAT, F.TYPE_DOUBLE):
        return rnd.choice([0.0, -0.0, 1.5, -2.25, float("inf"), float("nan"), rnd.uniform(-1e6, 1e6)])
    if t == F.TYPE_BOOL:
        return rnd.random() < 0.5
    if t == F.TYPE_STRING:
        return rnd.choice(["", "a", "héllo", "日本", "x" * rnd.randint(0, 40)])
    if t == F.TYPE_BYTES:
        return rnd.randbytes(rnd.randint(0, 6))
    if t == F.TYPE_ENUM:
        return rnd.choice([v.number for v in fd.enum_type.values])
    raise AssertionError(t)


def wire_extras(rnd: random.Random, data: bytes) -> bytes:
    """Unknown fields (numbers the schemas never use) added around a message's bytes."""
    unknown = rnd.choice([b"\xc8\x3e\x05", b"\xca\x3e\x02hi", b"\xcd\x3e\x01\x02\x03\x04",
                          b"\xc9\x3e" + bytes(8), b"\xcb\x3e\xcc\x3e"])  # (the last: a group, declined)
    return unknown + data if rnd.random() < 0.5 else data + unknown


def _state(schema_text: str, older: str | None) -> RegistryState:
    state = RegistryState()
    versions = ([(3, older)] if older else []) + [(7, schema_text)]
    for version, (schema_id, text) in enumerate(versions, start=1):
        key = {"keytype": "SCHEMA", "subject": "t-value", "version": version, "magic": 1}
        value = {"subject": "t-value", "version": version, "id": schema_id, "schema": text,
                 "schemaType": "PROTOBUF"}
        state.apply(json.dumps(key).encode(), json.dumps(value).encode())
    return state


def _message_class(registry: Registry) -> Any:
    from google.protobuf import message_factory

    renderer = registry.compiled(7).renderer
    return message_factory.GetMessageClass(next(iter(renderer.file.message_types_by_name.values())))


def test_fixture_payments_are_decoded_in_c() -> None:
    """The fixture's Order messages (a reference, a Timestamp, a map, an optional field, a message of
    defaults) are decoded in C and equal the per-row path; its other messages keep their errors."""
    logdir = str(FIXTURES / "schema-registry" / "logdir")
    registry = load_registry([logdir])
    assert registry is not None
    rows, types = typed_rows(registry, "payments")
    records = [r for rs in LogDirs([logdir]).partition("payments-0").record_lists() for r in rs]
    want = rows._record_columns(records, types)
    assert_same(rows.array_columns(*arrays(records), types), want)
    part = rows.parts[1]
    found = part.arrow_program(types[1])
    assert found is not None
    data = arrays(records)[1]
    validity, offsets, body = data.buffers()
    status, _ = protobuf_arrow_decode(found[0], _prefix(part.plan.schema_id),
                                      len(data), validity, offsets, body, 0, None)
    orders = [i for i, e in enumerate(want[3].to_pylist()) if e is None and records[i].value is not None]
    assert orders and all(status[i] == 0 for i in orders)
    assert all(status[i] == 1 for i, e in enumerate(want[3].to_pylist()) if e is not None)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.randoms(use_true_random=False))
def test_compiled_protobuf_columns_equal_the_per_row_path(rnd: random.Random) -> None:
    schemas = ProtoSchemas(rnd, proto3=rnd.random() < 0.6)
    text = schemas.text()
    older = 'syntax = "proto3";\npackage t;\nmessage Top {\n  int64 f1 = 1;\n}\n' if rnd.random() < 0.5 else \
        'syntax = "proto3";\npackage t;\nmessage Other {\n  int64 f1 = 1;\n}\n'
    registry = Registry(_state(text, older))
    if registry.compiled(7).error is not None:
        reject()  # (a schema protoc refuses: a map value of an enum declared proto2-closed in proto3, ...)
    fields = decoded_fields(registry, ["t"])
    if isinstance(fields[1].dataType, StringType):
        reject()  # (a schema Spark does not type)
    rows, types = typed_rows(registry, "t")
    cls = _message_class(registry)
    records: list[ArrayRow] = []
    clean: list[bytes] = []
    for _ in range(5):
        message = cls()
        fill(rnd, message)
        try:
            data = message.SerializeToString()
        except Exception:
            continue  # (a required field left unset)
        framed = b"\0\0\0\0\7" + rnd.choice([b"\0", b"\2\0"]) + data
        clean.append(framed)
        records.append(ArrayRow(None, framed, []))
        records += [ArrayRow(None, b"\0\0\0\0\7" + mutate(rnd, framed[5:]), []) for _ in range(2)]
        records.append(ArrayRow(None, b"\0\0\0\0\7\0" + wire_extras(rnd, data), []))
        records.append(ArrayRow(None, framed + data, []))  # (the message twice: merged)
        records.append(ArrayRow(None, b"\0\0\0\0\3\0" + data, []))  # (an older version's id: its own message?)
        records.append(ArrayRow(None, b"\0\0\0\0\x09\0" + data, []))  # (an id the registry does not know)
        records.append(ArrayRow(None, framed, [("x", b"1")]))  # (headers: the per-row path's)
    records += [ArrayRow(None, None, []), ArrayRow(None, b"not framed", []), ArrayRow(None, b"\0\0\0\0\7\4\2\0", []),
                ArrayRow(None, b"\0\0\0\0\7", [])]
    rnd.shuffle(records)
    want = rows._record_columns(records, types)
    assert_same(rows.array_columns(*arrays(records), types), want)
    part = rows.parts[1]
    found = part.arrow_program(types[1])
    event(f"compiled: {found is not None}")
    if found is None:
        return
    parts = [_column(d, records, t) for d, t in zip(rows.parts, types, strict=True)]
    assert_same(rows.array_columns(*arrays(records), types), [parts[0][0], parts[1][0], parts[0][1], parts[1][1]])
    # a query reading some fields: the whole column cut down
    shown = pruned(rnd, types[1], top=True)
    cut = FramedRows(registry, [plan_from_field(f) for f in fields[:2]], "t", whole={"value": types[1]})
    want_cut = rows._record_columns(records, types)
    got = cut.array_columns(*arrays(records), [types[0], shown])
    assert_same([got[1]], [project_array(want_cut[1], shown)])
    assert_same([got[3]], [want_cut[3]])
    # the serialized messages are decoded in C, but for what the decoder declines by design
    data = pa.array(clean, pa.binary())
    validity, offsets, body = data.buffers()
    status, _ = protobuf_arrow_decode(found[0], b"\0\0\0\0\7", len(data), validity, offsets, body or b"", 0, None)
    declinable = "map<" in text or "proto2" in text or "oneof" in text
    event(f"clean decoded in C: {sum(1 for s in status if s == 0)}/{len(status)}")
    if not declinable:
        assert list(status) == [0] * len(clean), text


def test_bad_programs_are_refused() -> None:
    """A program that is not one (cut short, a column of another kind, a field outside the table) is a
    ValueError, never a read out of bounds."""
    rows_registry = load_registry([str(FIXTURES / "schema-registry" / "logdir")])
    assert rows_registry is not None
    rows, types = typed_rows(rows_registry, "payments")
    found = rows.parts[1].arrow_program(types[1])
    assert found is not None
    program = found[1].program
    assert protobuf_arrow_program(program) is not None
    for bad in (program[:12], program[:len(program) // 2], b"\xff" * 64):
        with pytest.raises(ValueError):
            protobuf_arrow_program(bad)
    rnd = random.Random(7)
    refused = 0
    for _ in range(2000):
        words = bytearray(program)
        at = rnd.randrange(16, len(words) - 4) & ~3
        words[at:at + 4] = rnd.choice([-1, 0, 1, 2, 3, 7, 15, 1 << 20]).to_bytes(4, "little", signed=True)
        try:
            compiled = protobuf_arrow_program(bytes(words))
        except ValueError:
            refused += 1
            continue
        values = arrays([ArrayRow(None, b"\0\0\0\0\x08\0" + rnd.randbytes(rnd.randint(0, 40)), [])])[1]
        validity, offsets, body = values.buffers()
        protobuf_arrow_decode(compiled, b"\0\0\0\0\x08", 1, validity, offsets, body, 0, None)
    assert refused > 500


def test_schemas_the_compiled_decoder_leaves_to_the_per_row_path() -> None:
    """A map with int keys and a proto2 declared default have no program (the per-row path answers
    them), and their columns are still the per-row path's."""
    for text in ('syntax = "proto3";\npackage t;\nmessage Top {\n  map<int32, string> m = 1;\n}\n',
                 'syntax = "proto2";\npackage t;\nmessage Top {\n  optional int32 a = 1 [default = 5];\n}\n'):
        registry = Registry(_state(text, None))
        rows, types = typed_rows(registry, "t")
        assert rows.parts[1].arrow_program(types[1]) is None
        cls = _message_class(registry)
        message = cls()
        records = [ArrayRow(None, b"\0\0\0\0\7\0" + message.SerializeToString(), [])]
        assert_same(rows.array_columns(*arrays(records), types), rows._record_columns(records, types))


def test_what_protobuf_reads_in_its_own_way_is_declined() -> None:
    """What protobuf answers in its own way (a map's order, the last of two values) is the per-row path's."""
    text = 'syntax = "proto3";\npackage t;\nmessage Top {\n  map<string, int32> m = 1;\n  int32 a = 2;\n}\n'
    registry = Registry(_state(text, None))
    rows, types = typed_rows(registry, "t")
    found = rows.parts[1].arrow_program(types[1])
    assert found is not None
    entry = b"\x0a\x05\x0a\x01k\x10\x01"  # m {key: "k", value: 1}
    values = [b"\0\0\0\0\7\0" + entry, b"\0\0\0\0\7\0" + entry + b"\x0a\x05\x0a\x01j\x10\x02",
              b"\0\0\0\0\7\0\x10\x01\x10\x02", b"\0\0\0\0\7\0\x10\x00",
              b"\0\0\0\0\7\0\x0a\x07\x0a\x01k\x10\x01\x28\x01"]  # (an entry with another field: none)
    data = pa.array(values, pa.binary())
    validity, offsets, body = data.buffers()
    status, _ = protobuf_arrow_decode(found[0], b"\0\0\0\0\7", len(data), validity, offsets, body, 0, None)
    assert list(status) == [0, 1, 1, 0, 1]
    records = [ArrayRow(None, v, []) for v in values]
    got = rows.array_columns(*arrays(records), types)
    assert_same(got, rows._record_columns(records, types))
    assert got[1].to_pylist()[2] == {"m": [], "a": 2}  # (the last value, by the per-row path)
    assert got[1].to_pylist()[3] == {"m": [], "a": None}  # (proto3: 0 is the default, null)
    assert got[1].to_pylist()[4] == {"m": [], "a": None}  # (protobuf keeps that entry as an unknown field)
