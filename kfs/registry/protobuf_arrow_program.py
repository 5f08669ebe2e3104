"""A reader's Protobuf message and its Spark-typed Arrow column compiled into the program of the compiled
Protobuf decoder (kfs/_native/csrc/registry/protobuf_arrow.c), whose buffers ArrowProgram.build makes
into that column.

The program follows the message as kfs.spark.protobuf_types types and converts it (Spark's protobuf
connector): fields by their proto names in declaration order, empty messages dropped, enums as names,
Timestamp and Duration as microseconds, maps with string keys, repeated fields as lists, a field read
when repeated or present (a proto3 field without presence: when not at its default). A field the
query prunes (`shown`) is read past and checked as it would be decoded.

None where the column cannot be built so: a map whose keys are not strings, a proto2 field with a
declared default, an enum with aliases, groups, a message of more than 256 fields. The per-row path
answers every value of such a message.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from kfs.registry.avro_arrow_program import ArrowProgram, ColumnTable, Unsupported

# protobuf_arrow.c's node kinds, field ops and flags
NODE_MESSAGE, NODE_ENTRY, NODE_ENUM = 1, 2, 3
OPS = {name: code for code, name in enumerate(
    ["int32", "int64", "uint32", "sint32", "sint64", "bool", "fixed32", "fixed64", "float", "double", "string",
     "bytes", "enum", "message", "micros", "map"], start=1)}
REPEATED, PRESENCE, REQUIRED, ALWAYS, OPEN = 1, 2, 4, 8, 16
_MAX_FIELDS = 256


def _scalar_ops() -> dict[int, str]:
    from google.protobuf.descriptor import FieldDescriptor as F

    return {F.TYPE_INT32: "int32", F.TYPE_INT64: "int64", F.TYPE_UINT32: "uint32", F.TYPE_UINT64: "int64",
            F.TYPE_SINT32: "sint32", F.TYPE_SINT64: "sint64", F.TYPE_BOOL: "bool", F.TYPE_FIXED32: "fixed32",
            F.TYPE_SFIXED32: "fixed32", F.TYPE_FIXED64: "fixed64", F.TYPE_SFIXED64: "fixed64",
            F.TYPE_FLOAT: "float", F.TYPE_DOUBLE: "double", F.TYPE_STRING: "string", F.TYPE_BYTES: "bytes",
            F.TYPE_ENUM: "enum"}


def _is_micros(message: Any) -> bool:
    """A Timestamp or Duration, as kfs.spark.protobuf_types recognises them."""
    return message.name in ("Timestamp", "Duration") and [f.name for f in message.fields] == ["seconds", "nanos"]


def _field_named(t: pa.DataType | None, name: str) -> int | None:
    """The index of struct type t's field `name` (None: t is None or has no such field)."""
    if t is None:
        return None
    i = t.get_field_index(name)
    return None if i < 0 else i


class _Compiler(ColumnTable):
    def __init__(self) -> None:
        super().__init__()
        self.scalar_ops = _scalar_ops()

    def message(self, descriptor: Any, col: int, whole: pa.DataType | None, shown: pa.DataType | None) -> int:
        """The node of `descriptor` writing struct column `col` (of type `shown`, a part of `whole`), or
        read past (col -1, whole and shown None)."""
        fields = sorted(descriptor.fields, key=lambda fd: fd.number)
        if len(fields) > _MAX_FIELDS or len(descriptor.oneofs) > _MAX_FIELDS:
            raise Unsupported("too many fields")
        oneofs = {o.full_name: i for i, o in enumerate(descriptor.oneofs)}
        entries: list[int] = []
        for fd in fields:
            whole_at = _field_named(whole, fd.name)
            shown_at = _field_named(shown, fd.name) if whole_at is not None else None
            fcol = self.children[col][shown_at] if col >= 0 and shown_at is not None else -1
            whole_type = whole.field(whole_at).type if whole is not None and whole_at is not None else None
            shown_type = shown.field(shown_at).type if shown is not None and shown_at is not None else None
            op, arg, flags = self.field(fd, fcol, whole_type if fcol >= 0 else None, shown_type if fcol >= 0 else None)
            oneof = oneofs[fd.containing_oneof.full_name] if fd.containing_oneof is not None else -1
            entries += [fd.number, OPS[op], fcol, arg, flags, oneof]
        return self.emit([NODE_MESSAGE, col, len(fields), len(oneofs), *entries])

    def field(self, fd: Any, fcol: int, whole: pa.DataType | None, shown: pa.DataType | None) -> tuple[str, int, int]:
        """(op, arg, flags) of field fd writing column fcol (a list column when repeated; -1: read past)."""
        from google.protobuf.descriptor import FieldDescriptor as F

        repeated = bool(fd.is_repeated)
        flags = (REPEATED if repeated else 0) | (PRESENCE if fd.has_presence else 0) | \
            (REQUIRED if fd.is_required else 0)
        if fd.has_default_value and fd.type != F.TYPE_MESSAGE and not repeated:
            raise Unsupported("a declared default")  # (read always there: its default when missing)
        if fd.type == F.TYPE_MESSAGE and fd.message_type.GetOptions().map_entry:
            return "map", self.entry(fd.message_type, fcol, shown), flags
        item_col, item_whole, item_shown = fcol, whole, shown
        if repeated and fcol >= 0:
            item_col = self.children[fcol][0]
            item_whole, item_shown = whole.value_type, shown.value_type  # type: ignore[union-attr]
        return self.value(fd, item_col, item_whole, item_shown, flags)

    def value(self, fd: Any, col: int, whole: pa.DataType | None, shown: pa.DataType | None,
              flags: int) -> tuple[str, int, int]:
        """(op, arg, flags) of one value of field fd into column col (-1: read past)."""
        from google.protobuf.descriptor import FieldDescriptor as F

        if fd.type == F.TYPE_MESSAGE:
            if _is_micros(fd.message_type):
                return "micros", 0, flags
            return "message", self.message(fd.message_type, col, whole, shown), flags
        op = self.scalar_ops.get(fd.type)
        if op is None:
            raise Unsupported(f"protobuf field type {fd.type}")
        if op == "enum":
            return op, self.enum(fd.enum_type), flags | (0 if fd.enum_type.is_closed else OPEN)
        return op, 0, flags

    def entry(self, entry: Any, map_col: int, shown: pa.DataType | None) -> int:
        """A map entry's node: its key (a string) and value into the map's two columns."""
        from google.protobuf.descriptor import FieldDescriptor as F

        key, value = entry.fields_by_name["key"], entry.fields_by_name["value"]
        if key.type != F.TYPE_STRING:
            raise Unsupported("a map whose keys are not strings")
        key_col, value_col = self.children[map_col] if map_col >= 0 else (-1, -1)
        item = shown.item_type if shown is not None else None
        op, arg, flags = self.value(value, value_col, item, item, ALWAYS)
        return self.emit([NODE_ENTRY, -1, 2, 0, 1, OPS["string"], key_col, 0, ALWAYS, -1,
                          2, OPS[op], value_col, arg, flags, -1])

    def enum(self, enum: Any) -> int:
        """An enum's node: each number and its name in the pool."""
        numbers = [v.number for v in enum.values]
        if len(set(numbers)) != len(numbers):
            raise Unsupported("an enum with aliases")
        words = [NODE_ENUM, -1, len(numbers)]
        for v in enum.values:
            name = v.name.encode("utf-8")
            words += [v.number, len(self.pool), len(name)]
            self.pool += name
        return self.emit(words)


def compile_protobuf_program(descriptor: Any, target: pa.DataType,
                             shown: pa.DataType | None = None) -> ArrowProgram | None:
    """The program reading messages of `descriptor` into a column of `target` (the Arrow type of
    `protobuf_type(descriptor)`), of `shown` (a part of it: Spark's pruned schema) when given; None
    where the per-row path keeps them all."""
    shown = target if shown is None else shown
    if not pa.types.is_struct(shown) or shown.num_fields == 0:
        return None
    compiler = _Compiler()
    try:
        col = compiler.column(shown)
        root = compiler.message(descriptor, col, target, shown)
    except (Unsupported, KeyError, TypeError, ValueError, AttributeError, RecursionError):
        return None
    return compiler.built(root)
