"""A reader schema and its Spark-typed Arrow column compiled into the program of the compiled Arrow
decoder (kfs/_native/csrc/registry/avro_arrow.h), and the decoder's buffers made into that column.

The program follows the schema as kfs.spark.avro_types does (the same union folding, member structs,
logical types: `avro_type` gives the column's type, `avro_converter` the values the per-row path puts
in it), so that a datum decoded here is the value the per-row path (fastavro, the converter, pa.array)
gives. The schema comes parsed by kfs.registry.resolution.parse_avro with Spark's logical types.

None where the column cannot be built so (a type the decoder has no layout for: the per-row path
answers every datum of the schema).
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from kfs.registry.resolution import non_null_branches as _non_null
from kfs.registry.resolution import resolve_named as _named
from kfs.registry.resolution import schema_kind as _kind

# avro_arrow.h's column kinds and ops
COLUMNS = {name: code for code, name in enumerate(
    ["bool", "i32", "i64", "f32", "f64", "bin", "dec", "struct", "list", "map"], start=1)}
OPS = {name: code for code, name in enumerate(
    ["bool", "int", "int_long", "long", "long_millis", "float", "float_double", "double", "string", "bytes",
     "fixed", "dec_bytes", "dec_fixed", "enum", "record", "array", "map", "union_one", "union_members",
     "int_double", "long_double", "default", "writer_past"], start=1)}
_HEADER_WORDS = 4  # the root node, the word count, the column count, where the column table starts
_MAX_WORDS = 1 << 20  # (a named type is compiled at each use: a schema may multiply its nodes)
_MILLIS = ("timestamp-millis", "local-timestamp-millis")


class Unsupported(Exception):
    """A schema or column whose values stay the per-row path's."""


def _without_logical(schema: Any) -> Any:
    """A primitive's schema without its logical type (other schemas as they are)."""
    if isinstance(schema, dict) and "logicalType" in schema and isinstance(schema.get("type"), str):
        return {k: v for k, v in schema.items() if k != "logicalType"}
    return schema


def _column_kind(t: pa.DataType) -> str:
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_int32(t) or pa.types.is_date32(t):
        return "i32"
    if pa.types.is_int64(t) or (pa.types.is_timestamp(t) and t.unit == "us") or \
            (pa.types.is_duration(t) and t.unit == "us"):
        return "i64"
    if pa.types.is_float32(t):
        return "f32"
    if pa.types.is_float64(t):
        return "f64"
    if pa.types.is_string(t) or pa.types.is_binary(t):
        return "bin"
    if pa.types.is_decimal128(t):
        return "dec"
    if pa.types.is_struct(t):
        return "struct"
    if pa.types.is_list(t):
        return "list"
    if pa.types.is_map(t) and pa.types.is_string(t.key_type):
        return "map"
    raise Unsupported(str(t))


def _children(t: pa.DataType) -> list[pa.DataType]:
    if pa.types.is_struct(t):
        return [t.field(i).type for i in range(t.num_fields)]
    if pa.types.is_list(t):
        return [t.value_type]
    if pa.types.is_map(t):
        return [t.key_type, t.item_type]
    return []


def _nullable(t: pa.DataType) -> list[bool]:
    """Whether each child column of `t` is nullable (its field's flag)."""
    if pa.types.is_struct(t):
        return [t.field(i).nullable for i in range(t.num_fields)]
    if pa.types.is_list(t):
        return [t.value_field.nullable]
    if pa.types.is_map(t):
        return [False, t.item_field.nullable]
    return []


@dataclass(frozen=True)
class ArrowProgram:
    """A compiled program (`program`: bytes for avro_arrow_program) and its columns' Arrow types and
    children, column 0 the column's own."""

    program: bytes
    types: tuple[pa.DataType, ...]
    children: tuple[tuple[int, ...], ...]

    def build(self, columns: Sequence[tuple[int, bytes, bytes, bytes | None]], at: int = 0) -> pa.Array:
        """The Arrow array of column `at` from the decoder's buffers (length, validity, values, data)."""
        length, validity, values, data = columns[at]
        t = self.types[at]
        kids = [self.build(columns, k) for k in self.children[at]]
        valid = pa.py_buffer(validity)
        if pa.types.is_struct(t):
            return pa.Array.from_buffers(t, length, [valid], children=kids)
        if pa.types.is_map(t):
            entries = pa.StructArray.from_arrays(kids, fields=[t.key_field, t.item_field])
            return pa.Array.from_buffers(t, length, [valid, pa.py_buffer(values)], children=[entries])
        if pa.types.is_list(t):
            return pa.Array.from_buffers(t, length, [valid, pa.py_buffer(values)], children=kids)
        if data is not None:
            return pa.Array.from_buffers(t, length, [valid, pa.py_buffer(values), pa.py_buffer(data)])
        return pa.Array.from_buffers(t, length, [valid, pa.py_buffer(values)])


class ColumnTable:
    """A program being compiled: its node words, text pool and column table (avro_arrow.h's layout, which
    the Protobuf decoder's programs share: kfs/registry/protobuf_arrow_program.py)."""

    def __init__(self) -> None:
        self.words: list[int] = [0] * _HEADER_WORDS
        self.pool = bytearray()
        self.cols: list[tuple[str, int, int]] = []  # (kind, first child, child count)
        self.nullable: list[bool] = []
        self.types: list[pa.DataType] = []
        self.children: list[tuple[int, ...]] = []

    def column(self, t: pa.DataType) -> int:
        """Column ids for `t` and its children (each column's children numbered consecutively)."""
        at = len(self.cols)
        self.cols.append((_column_kind(t), 0, 0))
        self.nullable.append(True)
        self.types.append(t)
        self.children.append(())
        self._fill(at)
        return at

    def _fill(self, at: int) -> None:
        kids = _children(self.types[at])
        first = len(self.cols)
        for k, nullable in zip(kids, _nullable(self.types[at]), strict=True):
            self.cols.append((_column_kind(k), 0, 0))
            self.nullable.append(nullable)
            self.types.append(k)
            self.children.append(())
        self.cols[at] = (self.cols[at][0], first if kids else 0, len(kids))
        self.children[at] = tuple(range(first, first + len(kids)))
        for i in range(len(kids)):
            self._fill(first + i)

    def emit(self, words: list[int]) -> int:
        at = len(self.words)
        self.words += words
        if len(self.words) > _MAX_WORDS:
            raise Unsupported("too large a program")
        return at

    def program(self, root: int) -> bytes:
        table = len(self.words)
        for (kind, first, count), nullable in zip(self.cols, self.nullable, strict=True):
            self.words += [COLUMNS[kind], first, count, int(nullable)]
        self.words[:_HEADER_WORDS] = [root, len(self.words), len(self.cols), table]
        return struct.pack(f"<{len(self.words)}i", *self.words) + bytes(self.pool)

    def built(self, root: int) -> ArrowProgram:
        return ArrowProgram(self.program(root), tuple(self.types), tuple(self.children))


class _Compiler(ColumnTable):
    def __init__(self, named: dict[str, Any], writer: Writer | None = None) -> None:
        super().__init__()
        self.named = named
        self.writer = writer

    def node(self, schema: Any, col: int, full: pa.DataType, seen: frozenset[str] = frozenset()) -> int:
        """The node reading `schema`, whose whole column type is `full`, into column `col` (as avro_type
        and avro_converter read it); col -1: read past, a datum no column shows."""
        schema = _named(schema, self.named)
        if isinstance(schema, dict) and isinstance(schema.get("type"), (dict, list)):
            return self.node(schema["type"], col, full, seen)
        kind = _kind(schema)
        column = _column_kind(full)
        if col >= 0 and (self.cols[col][0] != column or (not _children(full) and not self.types[col].equals(full))):
            raise Unsupported(f"{self.types[col]} is not a part of {full}")
        first = self.cols[col][1] if col >= 0 else -1
        logical = schema.get("logicalType") if isinstance(schema, dict) else None
        if kind == "union":
            return self._union(schema if isinstance(schema, list) else schema["type"], col, full, seen)
        if kind in ("record", "error"):
            name = schema["name"]
            fields = schema["fields"]
            if column != "struct" or name in seen or len(fields) != full.num_fields:
                raise Unsupported(name)
            shown = self._shown(col, full)
            at = self.emit([OPS["record"], col, len(fields)] + [0] * len(fields))
            for i, f in enumerate(fields):
                self.words[at + 3 + i] = self.node(f["type"], shown[i], full.field(i).type, seen | {name})
            return at
        if kind in ("array", "map"):
            if column != ("list" if kind == "array" else "map"):
                raise Unsupported(kind)
            at = self.emit([OPS[kind], col, 0])
            inner = schema["items"] if kind == "array" else schema["values"]
            inner_col = -1 if col < 0 else first + (kind == "map")
            self.words[at + 2] = self.node(inner, inner_col, full.value_type if kind == "array" else full.item_type,
                                           seen)
            return at
        if kind == "enum":
            if column != "bin":
                raise Unsupported(kind)
            words = [OPS["enum"], col, len(schema["symbols"])]
            for symbol in schema["symbols"]:
                data = str(symbol).encode("utf-8")
                words += [len(self.pool), len(data)]
                self.pool += data
            return self.emit(words)
        op = self._leaf(kind, logical, column, schema)
        return self.emit([OPS[op[0]], col, *op[1:]])

    # ---- a writer schema resolved to the reader's (Avro's rules, as fastavro applies them) ----------

    def resolve(self, schema: Any, col: int, full: pa.DataType, wschema: Any,
                seen: frozenset[str] = frozenset()) -> int:
        """The node reading a datum of the writer's `wschema` as the reader's `schema` into column `col`
        (-1: read past). Only what resolves plainly: the same schema; records whose fields are matched
        by name (a writer's field the reader lacks read past, a reader's field the writer lacks its
        default, of a kind whose JSON default is the value the per-row path keeps); int -> long,
        int or long -> double, float -> double. Anything else is the per-row path's (Unsupported)."""
        assert self.writer is not None
        schema = _named(schema, self.named)
        while isinstance(schema, dict) and isinstance(schema.get("type"), (dict, list)):
            schema = _named(schema["type"], self.named)
        wschema = _named(wschema, self.writer.named)
        while isinstance(wschema, dict) and isinstance(wschema.get("type"), (dict, list)):
            wschema = _named(wschema["type"], self.writer.named)
        if self._same(wschema, schema):
            return self.node(schema, col, full, seen)
        kind, wkind = _kind(schema), _kind(wschema)
        logical = (isinstance(schema, dict) and "logicalType" in schema) or \
            (isinstance(wschema, dict) and "logicalType" in wschema)
        promoted = {("int", "long"): "int_long", ("int", "double"): "int_double",
                    ("long", "double"): "long_double", ("float", "double"): "float_double"}.get((wkind, kind))
        if promoted is not None and not logical:
            if _column_kind(full) != ("i64" if kind == "long" else "f64"):
                raise Unsupported(f"{wkind} -> {kind} into {full}")
            return self.emit([OPS[promoted], col])
        if kind in ("array", "map") and wkind == kind:
            if _column_kind(full) != ("list" if kind == "array" else "map"):
                raise Unsupported(kind)
            inner = "items" if kind == "array" else "values"
            at = self.emit([OPS[kind], col, 0])
            inner_col = -1 if col < 0 else self.cols[col][1] + (kind == "map")
            self.words[at + 2] = self.resolve(schema[inner], inner_col,
                                              full.value_type if kind == "array" else full.item_type,
                                              wschema[inner], seen)
            return at
        if kind in ("record", "error") and wkind in ("record", "error"):
            return self._resolve_record(schema, col, full, wschema, seen)
        if kind == wkind == "enum" and _column_kind(full) == "bin" and not schema.get("aliases") \
                and schema["name"].split(".")[-1] == wschema["name"].split(".")[-1]:
            # (a writer's symbol as the reader's; one the reader lacks as its default, else declined)
            symbols = [str(symbol) for symbol in schema["symbols"]]
            default = schema.get("default")
            words = [OPS["enum"], col, len(wschema["symbols"])]
            for symbol in wschema["symbols"]:
                text = str(symbol) if symbol in symbols else default if default else None
                if text is None:
                    words += [0, -1]
                    continue
                data = str(text).encode("utf-8")
                words += [len(self.pool), len(data)]
                self.pool += data
            return self.emit(words)
        raise Unsupported(f"{wkind} resolved to {kind}")

    def _resolve_record(self, schema: dict[str, Any], col: int, full: pa.DataType, wschema: dict[str, Any],
                        seen: frozenset[str]) -> int:
        assert self.writer is not None
        name = schema["name"]
        fields, wfields = schema["fields"], wschema["fields"]
        if (name.split(".")[-1] != wschema["name"].split(".")[-1] or schema.get("aliases") or name in seen
                or _column_kind(full) != "struct" or len(fields) != full.num_fields
                or any(f.get("aliases") for f in fields)):
            raise Unsupported(f"record {wschema['name']} resolved to {name}")
        shown = self._shown(col, full)
        by_name = {f["name"]: i for i, f in enumerate(fields)}
        nodes: list[int] = []
        for wfield in wfields:
            i = by_name.pop(wfield["name"], None)
            if i is None:  # (the writer's alone: read past as the writer wrote it)
                nodes.append(self._writer_past(wfield["type"]))
            else:
                nodes.append(self.resolve(fields[i]["type"], shown[i], full.field(i).type, wfield["type"],
                                          seen | {name}))
        for i in by_name.values():  # (the reader's alone: its default; one not shown is still one the
            # per-row path takes as it is, or that path, converting it, could fail where this would not)
            if shown[i] >= 0:
                nodes.append(self._default(fields[i], shown[i], full.field(i).type, seen | {name}))
            else:
                self._default_datum(fields[i])
        return self.emit([OPS["record"], col, len(nodes), *nodes])

    def _writer_past(self, wschema: Any) -> int:
        """A node reading past a datum of the writer's schema (a field the reader lacks, which the per-row
        path skips rather than reads: avro_arrow.h's OP_WRITER_PAST)."""
        assert self.writer is not None
        reader_named = self.named
        self.named = self.writer.named
        try:
            child = self.node(wschema, -1, self.writer.arrow_type(wschema))
        finally:
            self.named = reader_named
        return self.emit([OPS["writer_past"], -1, child])

    def _default(self, field: dict[str, Any], col: int, full: pa.DataType, seen: frozenset[str]) -> int:
        """A reader field the writer lacks: its default, written as an Avro datum of the field's schema
        and read by the field's node. Only defaults the per-row path keeps as they are (it takes the
        JSON default itself, not a datum): null for a union whose first branch is null, an empty array or
        map, booleans, ints and longs, floats and doubles, strings, with no logical type."""
        datum = self._default_datum(field)
        offset = len(self.pool)
        self.pool += datum
        at = self.emit([OPS["default"], col, offset, len(datum), 0])
        self.words[at + 4] = self.node(field["type"], col, full, seen)
        return at

    def _default_datum(self, field: dict[str, Any]) -> bytes:
        """A reader field's default as an Avro datum of its schema (_default says which are taken)."""
        if "default" not in field:
            raise Unsupported(f"no default for {field['name']}")
        value = field["default"]
        target = _named(field["type"], self.named)
        branches = target if isinstance(target, list) else None
        if branches is not None:
            if value is not None or _kind(_named(branches[0], self.named)) != "null":
                raise Unsupported("a union's default")
            return b"\0"  # (branch 0, null)
        kind = _kind(target)
        if kind in ("array", "map") and value in ([], {}) and type(value) is (list if kind == "array" else dict):
            return b"\0"  # (no items)
        if isinstance(target, dict) and "logicalType" in target:
            raise Unsupported(f"a default of {kind} with a logical type")
        return _datum(kind, value)

    def _same(self, wschema: Any, schema: Any) -> bool:
        """Whether the writer's schema is the reader's (named types expanded, docs aside), and reads as
        the reader's under resolution too: no union of it has a branch an earlier one would take
        (fastavro gives a writer's branch the first reader branch it resolves to: int to long...)."""
        assert self.writer is not None
        try:
            return _expanded(wschema, self.writer.named, frozenset()) == _expanded(schema, self.named, frozenset())
        except Unsupported:
            return False

    def _shown(self, col: int, full: pa.DataType) -> list[int]:
        """Per field of the struct type `full`: the child column of `col` showing it (the struct's fields,
        a subset of `full`'s in their order: Spark's pruned schema), or -1."""
        if col < 0:
            return [-1] * full.num_fields
        pruned = self.types[col]
        first = self.cols[col][1]
        shown = []
        at = 0
        for i in range(full.num_fields):
            if at < pruned.num_fields and pruned.field(at).name == full.field(i).name:
                shown.append(first + at)
                at += 1
            else:
                shown.append(-1)
        if at != pruned.num_fields:
            raise Unsupported(f"{pruned} is not a part of {full}")
        return shown

    def _leaf(self, kind: str, logical: Any, column: str, schema: Any) -> tuple[Any, ...]:
        decimal = logical == "decimal" and column == "dec"
        table: dict[tuple[str, str], tuple[Any, ...]] = {
            ("boolean", "bool"): ("bool",), ("int", "i32"): ("int",), ("int", "i64"): ("int_long",),
            ("long", "i64"): ("long_millis",) if logical in _MILLIS else ("long",),
            ("float", "f32"): ("float",), ("float", "f64"): ("float_double",), ("double", "f64"): ("double",),
            ("string", "bin"): ("string",), ("bytes", "bin"): ("bytes",),
        }
        if decimal and kind == "bytes":
            return ("dec_bytes", int(schema["precision"]))
        if decimal and kind == "fixed":
            return ("dec_fixed", int(schema["size"]), int(schema["precision"]))
        if kind == "fixed" and column == "bin":
            return ("fixed", int(schema["size"]))
        op = table.get((kind, column))
        if op is None:
            raise Unsupported(f"{kind} into {column}")
        return op

    def _union(self, branches: list[Any], col: int, full: pa.DataType, seen: frozenset[str]) -> int:
        rest = _non_null(branches)
        if not rest:
            raise Unsupported("a union of null only")
        kinds = {_kind(_named(b, self.named)) for b in rest}
        folded = len(rest) == 2 and kinds in ({"int", "long"}, {"float", "double"})
        if len(rest) == 1 or folded:
            at = self.emit([OPS["union_one"], col, len(branches)] + [-1] * len(branches))
            for i, b in enumerate(branches):
                if b in rest and any(b is r for r in rest):
                    # (a folded union's number as it was written, whichever branch: Spark's deserializer
                    # sets it as it is, a timestamp's milliseconds too)
                    self.words[at + 3 + i] = self.node(_without_logical(b) if folded else b, col, full, seen)
            return at
        if _column_kind(full) != "struct" or full.num_fields != len(rest):
            raise Unsupported("a union's members")
        targets = [_named(b, self.named) for b in rest]
        types = [t["name"] if isinstance(t, dict) and isinstance(t.get("name"), str) else _kind(t) for t in targets]
        if len(set(types)) != len(types):
            # (a union holding one type twice, which Avro's Java parser refuses: "Duplicate in union";
            # fastavro reads both branches as the first, and the per-row path keeps that)
            raise Unsupported("a union holding one type twice")
        shown = self._shown(col, full)
        first = self.cols[col][1] if col >= 0 else -1
        at = self.emit([OPS["union_members"], col, len(branches)] + [-1, -1] * len(branches))
        member = 0
        for i, b in enumerate(branches):
            if any(b is r for r in rest):
                # (member -2: a member no column shows, read past)
                self.words[at + 3 + 2 * i] = shown[member] - first if shown[member] >= 0 else -2
                self.words[at + 4 + 2 * i] = self.node(b, shown[member], full.field(member).type, seen)
                member += 1
        return at


@dataclass(frozen=True)
class Writer:
    """A writer schema to resolve to the reader's: parsed as the reader is, with its named types, and
    how the Spark typing gives a schema of it an Arrow type (for a writer's field the reader lacks)."""

    schema: Any
    named: dict[str, Any]
    arrow_type: Callable[[Any], pa.DataType]


_PROMOTABLE = {"int": {"long", "float", "double"}, "long": {"float", "double"}, "float": {"double"},
               "string": {"bytes"}, "bytes": {"string"}}


def _expanded(schema: Any, named: dict[str, Any], seen: frozenset[str]) -> Any:
    """`schema` with its named types written out and docs dropped, comparable with ==; Unsupported
    for a recursive one, or a union one of whose branches an earlier branch would take."""
    schema = _named(schema, named)
    if isinstance(schema, list):
        branches = [_named(b, named) for b in schema]
        for j, later in enumerate(branches):
            if any(_takes(earlier, later) for earlier in branches[:j]):
                raise Unsupported("a union a writer's branch may resolve to another branch of")
        return [_expanded(b, named, seen) for b in schema]
    if not isinstance(schema, dict):
        return schema
    name = schema.get("name")
    if isinstance(name, str) and schema.get("type") in ("record", "error", "enum", "fixed"):
        if name in seen:
            raise Unsupported(f"recursive {name}")
        seen = seen | {name}
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "doc":
            continue
        if key in ("type", "items", "values"):
            out[key] = _expanded(value, named, seen)
        elif key == "fields":
            out[key] = [{k: (_expanded(v, named, seen) if k == "type" else v) for k, v in f.items() if k != "doc"}
                        for f in value]
        else:
            out[key] = value
    return out


def _takes(earlier: Any, later: Any) -> bool:
    """Whether fastavro may resolve a writer's `later` branch to a reader's `earlier` one (match_types:
    the same kind, a promotion, named types by their unqualified names or aliases)."""
    kind, later_kind = _kind(earlier), _kind(later)
    if isinstance(earlier, dict) and isinstance(later, dict) and "name" in earlier and "name" in later:
        names = {str(later["name"]), str(later["name"]).split(".")[-1]}
        return str(earlier["name"]).split(".")[-1] in names or bool(names & set(earlier.get("aliases") or ()))
    return kind == later_kind or kind in _PROMOTABLE.get(later_kind, ())


_DEFAULT_KINDS: dict[str, tuple[type, ...]] = {"boolean": (bool,), "int": (int,), "long": (int,),
                                               "float": (int, float), "double": (int, float), "string": (str,)}


def _datum(kind: str, value: Any) -> bytes:
    """A JSON default of a primitive kind as its Avro binary datum (fastavro's writer, as the per-row
    path's library writes it); Unsupported for a value not of the kind, or an int out of its range."""
    from fastavro import schemaless_writer

    taken = isinstance(value, _DEFAULT_KINDS.get(kind, ())) and (kind == "boolean") == isinstance(value, bool)
    bits = {"int": 32, "long": 64}.get(kind)
    if not taken or (bits is not None and not -(1 << (bits - 1)) <= value < 1 << (bits - 1)):
        raise Unsupported(f"a default {value!r} of {kind}")
    out = io.BytesIO()
    schemaless_writer(out, kind, value)
    return out.getvalue()


def compile_arrow_program(schema: Any, named: dict[str, Any], target: pa.DataType,
                          shown: pa.DataType | None = None, writer: Writer | None = None) -> ArrowProgram | None:
    """The program reading datums of `schema` (parsed with Spark's logical types) into a column of
    `target` (the Arrow type of `avro_type(schema)`), or None where the per-row path keeps them all.

    `shown`: the part of `target` a query reads (Spark's pruned schema: structs with some of their
    fields, in order): the column is of that type, and the fields it leaves out are read past.
    `writer`: the datums are of this writer schema, resolved to `schema` (Compiler.resolve)."""
    compiler = _Compiler(named, writer)
    try:
        col = compiler.column(target if shown is None else shown)
        root = compiler.node(schema, col, target) if writer is None else compiler.resolve(schema, col, target,
                                                                                          writer.schema)
    except (Unsupported, KeyError, TypeError, ValueError, RecursionError):
        return None
    if len(compiler.words) + 4 * len(compiler.cols) >= _MAX_WORDS:
        return None
    return compiler.built(root)
