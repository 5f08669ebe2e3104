"""Avro datums to the Avro specification's JSON encoding, decoded by fastavro.

fastavro (Cython; what confluent-kafka-python decodes with) reads the binary datum into Python
objects, which lose what the JSON encoding needs: which branch of a union a value took (an `int`
or a `long`?), and that bytes and fixed are bytes. So the schema is rewritten once, before fastavro
parses it, into one with the same binary encoding that keeps that information:

- each union branch that is not `null` and not a named type becomes a one-field record named
  `kfs__u<N>` (a record of one field is encoded as that field): fastavro's `return_named_type`
  then gives `(name, {"v": value})`, and the name says the branch (`int`, `array`, ...); named
  branches come as `(full name, value)` already;
- each `float` becomes a one-field record whose field is named `kfs__float`, so that a 32-bit
  float is written with the digits that read back as that float (`0.1`, as Java prints it, not
  the double `0.10000000149011612`);
- `logicalType` is dropped: logical types are shown as their underlying type (docs/spec.md section 9).

The decoded objects are then turned into the JSON encoding (unions as `{"<branch>": value}`, bytes
and fixed as strings of code points 0-255) and written by one C-accelerated JSON encoder.
"""

from __future__ import annotations

import io
import json
import math
import re
import struct
from collections.abc import Callable
from typing import Any

from kfs._native.registry import avro_program, render_avro
from kfs.registry.avro_program import PRIMITIVES, compile_program

_UNION_PREFIX = "kfs__u"
_FLOAT_FIELD = "kfs__float"
# Zero-width items: an array of them costs no bytes per item, so a count alone could ask for billions.
MAX_ZERO_WIDTH_ITEMS = 1 << 20
# A recursive schema nests as deep as its datum says, a byte a level, and fastavro's reader recurses
# in C: 100,000 levels overflowed its stack (a segfault, the daemon gone). Deeper is refused.
MAX_DEPTH = 200
# fastavro reads a varint of any length and keeps its low 64 bits: one of 11 bytes or more, or of 10 whose
# last is over 1, would pass for another number. Nine bytes with the high bit set then a tenth over 1 is
# where one may be; such a datum is walked first by _Skipper, which refuses it (Java's BinaryDecoder:
# "Invalid long encoding"). Nine high-bit bytes are looked for first (a translate and a find: ~0.3 us on
# a 120-byte datum, the regex alone ~1 us); text that is not Latin has such runs too, and is walked.
_LONG_RUN = re.compile(rb"[\x80-\xff]{9}[\x02-\xff]")
_HIGH_BITS = bytes(1 if c >= 0x80 else 0 for c in range(256))
_NINE_HIGH = b"\x01" * 9
# An int (and a union or enum index) is read by Java's BinaryDecoder.readInt: 5 bytes at most, of which the
# bits past 32 are dropped, a longer one refused ("Invalid int encoding"); fastavro reads it as a long. Where
# they differ the datum has four high-bit bytes in a row (a 5-byte varint: ms timestamps have them too, so
# the datum is not walked for that): an int fastavro read beyond 32 bits is then taken to Java's number, or
# refused when its varint needs more than 5 bytes (_java_int), and a union or enum index fastavro finds out
# of range is read again by _Skipper, as Java reads it. A varint of more than 5 bytes whose value needs no
# more (zero bytes padding it: five high-bit bytes then one under 0x10) is found by walking the datum first.
_PADDED_RUN = re.compile(rb"[\x80-\xff]{5}[\x00-\x0f]")
_FOUR_HIGH = b"\x01" * 4
_FIVE_HIGH = b"\x01" * 5
INT_TOO_LONG = "the datum holds an int of more than 5 bytes (Java: Invalid int encoding)"
# (a negative index too: Java refuses it, where fastavro counts from the end of the list)
INDEX_OUT_OF_RANGE = "the datum holds a union branch or enum symbol index out of range"


class AvroSchemaError(ValueError):
    """A schema text that does not parse as Avro (one sentence)."""


class AvroDatumError(ValueError):
    """A datum that does not decode with its schema (one sentence)."""


def _latin1(value: object) -> object:
    if isinstance(value, bytes):
        return value.decode("latin-1")  # bytes and fixed: a string of code points 0-255
    raise TypeError(f"cannot render {type(value).__name__}")


_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, default=_latin1)
# The C encoder itself, made once: JSONEncoder.encode makes one per call (with a dict for spotting
# cycles, which fastavro's objects cannot hold), a third of the encoding's time on small records.
_c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
_C_ENCODER = _c_make_encoder(None, _latin1, json.encoder.encode_basestring, None, ": ", ", ", False, False,
                             False) if _c_make_encoder is not None else None


def _encode(value: Any) -> str:
    """`value` as JSON text (", " and ": ", UTF-8 kept, bytes as code points); ValueError for NaN."""
    if _C_ENCODER is not None:
        return "".join(_C_ENCODER(value, 0))
    return _ENCODER.encode(value)


def float32_text(x: float) -> float | str:
    """A 32-bit float as the shortest decimal that reads back as it (a float that prints so);
    NaN and the infinities as the strings Jackson writes."""
    if not math.isfinite(x):
        return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")
    packed = struct.pack("<f", x)
    for digits in range(1, 10):
        shorter = float(f"{x:.{digits}g}")
        if struct.pack("<f", shorter) == packed:
            return shorter
    return x


class _Rewriter:
    """The schema rewrite of the module doc, over a schema and the schemas it references."""

    def __init__(self) -> None:
        self.labels: dict[str, str] = {}  # wrapper full name -> union branch label
        self.count = 0
        self.walk_needed = False  # unions or floats: decoded objects need converting
        self.named: dict[str, Any] = {}  # full name -> rewritten named type (zero-width checks)
        self.zero_width_arrays = False
        self.recursive = False  # a named type refers to itself, directly or not
        self.java_ints = False  # an int, a union or an enum: read by Java's readInt
        self.indexes = False  # a union or an enum: an index fastavro would take from the end when negative
        self.booleans = False  # a boolean: a byte over 1 is true to fastavro, false to Java (readBoolean: n == 1)
        self._defining: list[str] = []  # the named types being rewritten, outermost first

    def rewrite(self, schema: Any, namespace: str) -> Any:
        if isinstance(schema, str):
            if schema == "float":
                return self._float_wrapper(namespace)
            if schema == "int":
                self.java_ints = True
            self.booleans = self.booleans or schema == "boolean"
            if schema in self._defining or f"{namespace}.{schema}" in self._defining:
                self.recursive = True
            return schema
        if isinstance(schema, list):
            self.java_ints = self.indexes = True
            return [self._branch(b, namespace) for b in schema]
        if not isinstance(schema, dict):
            raise AvroSchemaError(f"{json.dumps(schema)[:80]} is not an Avro schema")
        kind = schema.get("type")
        out = {k: v for k, v in schema.items() if k != "logicalType"}
        if kind in ("record", "error"):
            ns = _namespace_of(schema, namespace)
            fields = schema.get("fields")
            if not isinstance(fields, list):
                raise AvroSchemaError(f"record {schema.get('name')!r} has no fields list")
            self._defining.append(_full_name(schema, namespace))
            out["fields"] = [dict(f, type=self.rewrite(f.get("type"), ns)) if isinstance(f, dict) else f
                             for f in fields]
            self._defining.pop()
            self.named[_full_name(schema, namespace)] = out
        elif kind in ("enum", "fixed"):
            self.java_ints = self.java_ints or kind == "enum"
            self.indexes = self.indexes or kind == "enum"
            self.named[_full_name(schema, namespace)] = out
        elif kind == "array":
            out["items"] = self.rewrite(schema.get("items"), namespace)
            if self._zero_width(schema.get("items"), namespace, set()):
                self.zero_width_arrays = True
        elif kind == "map":
            out["values"] = self.rewrite(schema.get("values"), namespace)
        elif isinstance(kind, (dict, list)):
            return self.rewrite(kind, namespace)
        elif kind == "float":
            return self._float_wrapper(namespace)
        elif kind in PRIMITIVES:
            self.java_ints = self.java_ints or kind == "int"
            self.booleans = self.booleans or kind == "boolean"
            return kind  # (a primitive with attributes, a logical type's among them)
        return out

    def _branch(self, branch: Any, namespace: str) -> Any:
        self.walk_needed = True
        label = _branch_label(branch)
        if label is None:  # null, or a named type: fastavro says which already
            return self.rewrite(branch, namespace)
        self.count += 1
        name = f"{namespace}.{_UNION_PREFIX}{self.count}" if namespace else f"{_UNION_PREFIX}{self.count}"
        self.labels[name] = label
        return {"type": "record", "name": name, "fields": [{"name": "v", "type": self.rewrite(branch, namespace)}]}

    def _float_wrapper(self, namespace: str) -> dict[str, Any]:
        self.walk_needed = True
        self.count += 1
        name = f"{namespace}.kfs__f{self.count}" if namespace else f"kfs__f{self.count}"
        return {"type": "record", "name": name, "fields": [{"name": _FLOAT_FIELD, "type": "float"}]}

    def _zero_width(self, schema: Any, namespace: str, seen: set[str]) -> bool:
        """Whether a value of `schema` may take no bytes (null, fixed of size 0, a record of such)."""
        if isinstance(schema, str):
            if schema == "null":
                return True
            named = self.named.get(schema) or self.named.get(f"{namespace}.{schema}")
            if named is None or schema in seen:
                return False
            return self._zero_width(named, namespace, seen | {schema})
        if isinstance(schema, dict):
            kind = schema.get("type")
            if kind == "null":
                return True
            if kind == "fixed":
                return schema.get("size") == 0
            if kind in ("record", "error"):
                ns = _namespace_of(schema, namespace)
                return all(isinstance(f, dict) and self._zero_width(f.get("type"), ns, seen)
                           for f in schema.get("fields") or [])
            if isinstance(kind, (dict, str)) and kind not in PRIMITIVES and kind not in ("array", "map", "enum"):
                return self._zero_width(kind, namespace, seen)
        return False


def _namespace_of(schema: dict[str, Any], enclosing: str) -> str:
    name = schema.get("name")
    if isinstance(name, str) and "." in name:
        return name.rsplit(".", 1)[0]
    ns = schema.get("namespace")
    return ns if isinstance(ns, str) else enclosing


def _full_name(schema: dict[str, Any], enclosing: str) -> str:
    name = str(schema.get("name"))
    if "." in name:
        return name
    ns = _namespace_of(schema, enclosing)
    return f"{ns}.{name}" if ns else name


def _branch_label(branch: Any) -> str | None:
    """The JSON encoding's label of an unnamed union branch; None for null and named types."""
    if isinstance(branch, str):
        return branch if branch in PRIMITIVES and branch != "null" else None
    if isinstance(branch, dict):
        kind = branch.get("type")
        if kind in ("array", "map"):
            return str(kind)
        if isinstance(kind, str) and kind in PRIMITIVES:
            return kind if kind != "null" else None
    return None


class AvroRenderer:
    """One writer schema, compiled once: `render(datum)` is the datum's JSON encoding as text."""

    def __init__(self, schema_text: str, references: list[str] | None = None) -> None:
        """`references`: the texts of the schemas it references, dependencies first."""
        from fastavro import parse_schema
        from fastavro.read import schemaless_reader

        self._read = schemaless_reader
        rewriter = _Rewriter()
        named: dict[str, Any] = {}
        try:
            for text in [*(references or []), schema_text]:
                parsed = parse_schema(rewriter.rewrite(_json(text), ""), named_schemas=named)
        except AvroSchemaError:
            raise
        except Exception as e:  # fastavro's SchemaParseException, UnknownType, a KeyError...
            raise AvroSchemaError(f"the schema does not parse as Avro ({type(e).__name__}: {e})") from None
        self.schema = parsed
        self._named = named
        self.labels = rewriter.labels
        # The compiled renderer's program (kfs.registry.avro_program), where the extension is built: it
        # answers the datums it renders exactly as the path below does, and declines the others to it.
        self.program: object | None = None  # (None: every datum takes the Python path)
        if avro_program is not None:
            program = compile_program(parsed, named, rewriter.labels)
            try:
                self.program = None if program is None else avro_program(program)
            except ValueError:  # (a program the extension does not take: the Python path then)
                self.program = None
        # Datums walked first, without building them, where fastavro could be asked too much, would read
        # a negative union or enum index from the end of the list (Java refuses it), or a boolean byte over
        # 1 as true (Java: false). (The compiled renderer checks these itself and declines such a datum to
        # this path, so only the pure-Python path pays for the walk on every datum.)
        self.checked_first = rewriter.zero_width_arrays or rewriter.recursive or rewriter.indexes or \
            rewriter.booleans
        self._java_ints = rewriter.java_ints
        self._convert: Callable[[Any], Any] | None = None
        if rewriter.walk_needed:
            # A converter compiled from the schema visits only what needs converting (a union, a
            # float) and leaves the rest of the decoded objects as fastavro built them; a recursive
            # schema takes the walker over everything.
            self._convert = _generic_converter(self.labels) if rewriter.recursive \
                else _Converters(self.labels, named).of(parsed)
        # The same and its ints as Java reads them, for a datum with a 5-byte varint (a recursive schema's
        # datums are walked first: their ints are Java's already).
        self._convert_ints = self._convert
        if rewriter.java_ints and not rewriter.recursive:
            self._convert_ints = _Converters(self.labels, named, java_ints=True).of(parsed)

    def render(self, datum: bytes | memoryview) -> str:
        """The datum's JSON encoding; AvroDatumError when it does not decode or leaves bytes over."""
        if self.program is not None and render_avro is not None:
            text = render_avro(self.program, datum)
            if text is not None:
                return text
        return self.render_python(datum)

    def render_python(self, datum: bytes | memoryview) -> str:
        """`render` by fastavro and the json module alone (the reference, and the compiled renderer's fallback)."""
        data = datum if type(datum) is bytes else bytes(datum)
        if self.checked_first:
            return self._render_python(data, True, False)
        high = data.translate(_HIGH_BITS)
        walk = (_NINE_HIGH in high and _LONG_RUN.search(data) is not None) or \
            (self._java_ints and _FIVE_HIGH in high and _PADDED_RUN.search(data) is not None)
        return self._render_python(data, walk, not walk and self._java_ints and _FOUR_HIGH in high)

    def _render_python(self, data: bytes, walk: bool, ints: bool) -> str:
        """`walk`: walk the datum first (_Skipper); `ints`: it may hold a 5-byte varint Java reads otherwise."""
        if walk:
            skipper = _Skipper(data, self._named)
            skipper.skip(self.schema)
            data = skipper.as_java_reads_it()
        stream = io.BytesIO(data)
        try:
            value = self._read(stream, self.schema, None, return_named_type=True)
        except EOFError:
            raise AvroDatumError("the datum ends early") from None
        except IndexError as e:  # (fastavro's reader: a varint cut short, or a union or enum index out of range)
            if "string index" in str(e):
                raise AvroDatumError("the datum ends early") from None
            if ints:  # (an index past 32 bits, of which Java reads the low 32)
                return self._render_python(data, True, False)
            raise AvroDatumError(INDEX_OUT_OF_RANGE) from None
        except Exception as e:  # a bad union index, an enum index out of range, invalid UTF-8...
            raise AvroDatumError(f"the datum does not decode ({type(e).__name__}: {e})") from None
        left = len(data) - stream.tell()
        if left:
            raise AvroDatumError(f"{left} bytes are left after the datum")
        convert = self._convert_ints if ints else self._convert
        if convert is not None:
            value = convert(value)
        try:
            return _encode(value)
        except ValueError:  # a double that is NaN or infinite: Jackson writes it as a string
            return json.dumps(_quote_non_finite(value), ensure_ascii=False, default=_latin1)



def _generic_converter(labels: dict[str, str]) -> Callable[[Any], Any]:
    """The JSON encoding's objects from fastavro's, by walking all of them."""

    def convert(x: Any) -> Any:
        t = type(x)
        if t is dict:
            if len(x) == 1 and _FLOAT_FIELD in x:
                return float32_text(x[_FLOAT_FIELD])
            return {k: convert(v) for k, v in x.items()}
        if t is list:
            return [convert(v) for v in x]
        if t is tuple:
            name, value = x
            label = labels.get(name)
            if label is not None:
                return {label: convert(value["v"])}
            return {name: convert(value)}
        return x

    return convert


class _Converters:
    """Converters compiled from a rewritten, parsed schema: None where a value needs no change."""

    def __init__(self, labels: dict[str, str], named: dict[str, Any], java_ints: bool = False) -> None:
        self.labels = labels
        self.named = named
        self.java_ints = java_ints  # ints fastavro read beyond 32 bits to Java's reading (_java_int)

    def of(self, schema: Any) -> Callable[[Any], Any] | None:
        if isinstance(schema, str):
            if schema == "int" and self.java_ints:
                return _java_int
            return self.of(self.named[schema]) if schema in self.named else None
        if isinstance(schema, list):
            return self._union(schema)
        kind = schema.get("type")
        if kind == "int" and self.java_ints:
            return _java_int
        if kind in ("record", "error"):
            fields = schema["fields"]
            if len(fields) == 1 and fields[0]["name"] == _FLOAT_FIELD:
                return _float_of
            convs = [(f["name"], c) for f in fields if (c := self.of(f["type"])) is not None]
            if not convs:
                return None

            def record(x: dict[str, Any]) -> dict[str, Any]:
                for name, c in convs:
                    x[name] = c(x[name])
                return x

            return record
        if kind == "array":
            item = self.of(schema["items"])
            return None if item is None else (lambda xs: [item(v) for v in xs])
        if kind == "map":
            value = self.of(schema["values"])
            return None if value is None else (lambda m: {k: value(v) for k, v in m.items()})
        if isinstance(kind, (dict, list)) or (isinstance(kind, str) and kind in self.named):
            return self.of(kind)
        return None

    def _union(self, branches: list[Any]) -> Callable[[Any], Any]:
        by_name: dict[str, tuple[str, Callable[[Any], Any] | None]] = {}
        for branch in branches:
            target = self.named.get(branch, branch) if isinstance(branch, str) else branch
            if not isinstance(target, dict):
                continue  # null
            name = target.get("name")
            if not isinstance(name, str):
                continue
            full = name if "." in name or not target.get("namespace") else f"{target['namespace']}.{name}"
            label = self.labels.get(full)
            if label is not None:  # a wrapped branch: its value is the record's one field
                by_name[full] = (label, _wrapped(self.of(target["fields"][0]["type"])))
            else:
                by_name[full] = (full, self.of(target))

        def union(x: Any) -> Any:
            if x is None:
                return None
            name, value = x
            label, c = by_name[name]
            return {label: value if c is None else c(value)}

        return union


def _java_int(x: int) -> int:
    """An int fastavro read (as a long) as Java's BinaryDecoder.readInt reads its varint: the zigzag of the
    low 32 bits; refused when the varint needs more than 5 bytes (35 bits)."""
    if -0x80000000 <= x <= 0x7FFFFFFF:
        return x
    n = (x << 1) ^ (x >> 63)  # (the varint's value again: fastavro's reader keeps 64 bits)
    if n >> 35:
        raise AvroDatumError(INT_TOO_LONG)
    n &= 0xFFFFFFFF
    return (n >> 1) ^ -(n & 1)


def _wrapped(inner: Callable[[Any], Any] | None) -> Callable[[Any], Any]:
    """The converter of a wrapped union branch: its record's one field, converted."""
    if inner is None:
        return _field_v
    return lambda v: inner(v["v"])


def _float_of(x: dict[str, Any]) -> float | str:
    return float32_text(x[_FLOAT_FIELD])


def _field_v(x: dict[str, Any]) -> Any:
    return x["v"]


def _quote_non_finite(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")
    if isinstance(x, dict):
        return {k: _quote_non_finite(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_quote_non_finite(v) for v in x]
    return x


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as e:
        raise AvroSchemaError(f"the schema is not JSON ({e})") from None


class _Skipper:
    """Walks a datum by its parsed schema without building it, for schemas with arrays of zero-width
    items or recursion: a datum declaring more than MAX_ZERO_WIDTH_ITEMS items in all is refused,
    where fastavro would build every one of them (a 5-byte count asks for 2^34 objects), and one
    nesting deeper than MAX_DEPTH, where fastavro's recursion would overflow its stack. Its ints (and union
    and enum indexes) are read as Java's BinaryDecoder.readInt reads them: one of more than 5 bytes is
    refused, one of 5 whose bits past 32 Java drops is rewritten (`as_java_reads_it`) to the number Java reads."""

    def __init__(self, data: bytes, named: dict[str, Any]) -> None:
        self.data = data
        self.named = named
        self.pos = 0
        self.items = 0
        self.depth = 0
        self.java_ints: list[tuple[int, int, int]] = []  # (start, end, the low 32 bits) of ints Java reads otherwise

    def java_int(self) -> int:
        """Java's readInt (and the compiled renderer's read_int): the zigzag of the varint's low 32 bits."""
        start = self.pos
        n = shift = 0
        while True:
            if self.pos >= len(self.data):
                raise AvroDatumError("the datum ends early")
            if shift > 28:
                raise AvroDatumError(INT_TOO_LONG)
            b = self.data[self.pos]
            self.pos += 1
            n |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
        if n >> 32:
            n &= 0xFFFFFFFF
            self.java_ints.append((start, self.pos, n))
        return (n >> 1) ^ -(n & 1)

    def as_java_reads_it(self) -> bytes:
        """The datum with each int Java reads otherwise than fastavro as the varint of what Java reads."""
        if not self.java_ints:
            return self.data
        out = bytearray()
        at = 0
        for start, end, n in self.java_ints:
            out += self.data[at:start]
            while n > 0x7F:
                out.append(n & 0x7F | 0x80)
                n >>= 7
            out.append(n)
            at = end
        out += self.data[at:]
        return bytes(out)

    def long(self) -> int:
        result = shift = 0
        while True:
            if self.pos >= len(self.data):
                raise AvroDatumError("the datum ends early")
            if shift > 63:
                raise AvroDatumError("the datum holds a varint longer than 10 bytes")
            b = self.data[self.pos]
            self.pos += 1
            if shift == 63 and b > 1:
                raise AvroDatumError("the datum holds a varint beyond 64 bits")
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return (result >> 1) ^ -(result & 1)
            shift += 7

    def take(self, n: int) -> None:
        if n < 0 or self.pos + n > len(self.data):
            raise AvroDatumError("the datum ends early")
        self.pos += n

    def skip(self, schema: Any) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise AvroDatumError(f"the datum nests deeper than {MAX_DEPTH} levels")
        try:
            self._skip(schema)
        finally:
            self.depth -= 1

    def _skip(self, schema: Any) -> None:
        if isinstance(schema, list):
            index = self.java_int()
            if not 0 <= index < len(schema):
                raise AvroDatumError(INDEX_OUT_OF_RANGE)
            self.skip(schema[index])
            return
        if isinstance(schema, str) and schema in self.named:
            schema = self.named[schema]
        kind = schema if isinstance(schema, str) else schema.get("type")
        if kind == "null":
            return
        if kind == "boolean":
            self.take(1)
            if self.data[self.pos - 1] > 1:  # Java's readBoolean: true only for 1
                self.java_ints.append((self.pos - 1, self.pos, 0))
        elif kind == "int":
            self.java_int()
        elif kind == "enum":
            index = self.java_int()
            if not 0 <= index < len(schema["symbols"]):
                raise AvroDatumError(INDEX_OUT_OF_RANGE)
        elif kind == "long":
            self.long()
        elif kind == "float":
            self.take(4)
        elif kind == "double":
            self.take(8)
        elif kind in ("bytes", "string"):
            self.take(self.long())
        elif kind == "fixed":
            self.take(schema["size"])
        elif kind in ("record", "error"):
            for f in schema["fields"]:
                self.skip(f["type"])
        elif kind in ("array", "map"):
            inner = schema["items"] if kind == "array" else schema["values"]
            while True:
                count = self.long()
                if count == 0:
                    return
                if count < 0:
                    count = -count
                    self.long()  # the block's size in bytes
                self.items += count
                if self.items > MAX_ZERO_WIDTH_ITEMS:
                    raise AvroDatumError(f"the datum declares more than {MAX_ZERO_WIDTH_ITEMS} array items")
                for _ in range(count):
                    if kind == "map":
                        self.take(self.long())
                    self.skip(inner)
        elif isinstance(kind, (dict, list)):
            self.skip(kind)
        else:
            raise AvroDatumError(f"unknown type {kind!r}")
