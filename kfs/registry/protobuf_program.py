"""A Protobuf message compiled into the program of the compiled JSON renderer
(kfs/_native/csrc/registry/protobuf_json.c), which renders a message exactly as
kfs.registry.protobuf.ProtobufRenderer's Python path does (json_format.MessageToDict and the json
module) or declines it to that path.

The program: little-endian int32 words (the root message's word index, the word count, 0), then nodes,
then a pool of texts. A message node is 1, its field count, then per field in field-number order: the
number, its op, flags (1 repeated, 2 presence), its `"jsonName": ` text (offset, length), its child node
(an enum's or a message's), its oneof (0, or 1.. for the message's oneofs). An enum node is 2, its value
count, then per value: the number and its name as a JSON string (offset, length).

None (no program: the Python path renders every message) for what json_format writes in its own way or
the parser reads in its own way: maps, groups, well-known types (their JSON forms), closed enums (proto2's:
a number they lack is an unknown field), enums with aliases, required fields, extensions, a message of
more than 64 fields. Presence is the descriptor's (`has_presence`: proto3's `optional`, oneofs, messages,
proto2's fields), so proto2 and editions messages are rendered where they stay within that.
"""

from __future__ import annotations

import json
import struct
from typing import Any

MESSAGE, ENUM = 1, 2
REPEATED, PRESENCE = 1, 2
MAX_FIELDS = 64
OPS = {name: code for code, name in enumerate(
    ["int32", "int64", "uint32", "uint64", "sint32", "sint64", "bool", "fixed32", "sfixed32", "fixed64",
     "sfixed64", "float", "double", "string", "bytes", "enum", "message"], start=1)}


class _Unsupported(Exception):
    pass


def _type_ops() -> dict[int, str]:
    from google.protobuf.descriptor import FieldDescriptor as F

    return {F.TYPE_INT32: "int32", F.TYPE_INT64: "int64", F.TYPE_UINT32: "uint32", F.TYPE_UINT64: "uint64",
            F.TYPE_SINT32: "sint32", F.TYPE_SINT64: "sint64", F.TYPE_BOOL: "bool", F.TYPE_FIXED32: "fixed32",
            F.TYPE_SFIXED32: "sfixed32", F.TYPE_FIXED64: "fixed64", F.TYPE_SFIXED64: "sfixed64",
            F.TYPE_FLOAT: "float", F.TYPE_DOUBLE: "double", F.TYPE_STRING: "string", F.TYPE_BYTES: "bytes",
            F.TYPE_ENUM: "enum", F.TYPE_MESSAGE: "message"}


class _Compiler:
    def __init__(self) -> None:
        self.words: list[int] = [0, 0, 0]
        self.pool = bytearray()
        self.nodes: dict[str, int] = {}  # full name -> word index
        self.ops = _type_ops()

    def text(self, value: str) -> tuple[int, int]:
        data = value.encode("utf-8")
        self.pool += data
        return len(self.pool) - len(data), len(data)

    def enum(self, enum: Any) -> int:
        if enum.full_name in self.nodes:
            return self.nodes[enum.full_name]
        if enum.is_closed or len({v.number for v in enum.values}) != len(enum.values):
            raise _Unsupported(enum.full_name)  # (a closed enum's unknown numbers are unknown fields; aliases)
        at = len(self.words)
        self.nodes[enum.full_name] = at
        self.words += [ENUM, len(enum.values)]
        for value in enum.values:
            self.words += [value.number, *self.text(json.dumps(value.name, ensure_ascii=False))]
        return at

    def message(self, message: Any) -> int:
        if message.full_name in self.nodes:
            return self.nodes[message.full_name]
        if message.full_name.startswith("google.protobuf.") or message.GetOptions().map_entry \
                or message.extension_ranges or len(message.fields) > MAX_FIELDS:
            raise _Unsupported(message.full_name)
        at = len(self.words)
        self.nodes[message.full_name] = at
        fields = sorted(message.fields, key=lambda f: f.number)
        self.words += [MESSAGE, len(fields)] + [0] * (7 * len(fields))
        oneofs = {oneof.full_name: i + 1 for i, oneof in enumerate(message.oneofs)}
        for k, field in enumerate(fields):
            op = self.ops.get(field.type)
            if op is None or field.is_required:  # (a group; a required field the parser checks is there)
                raise _Unsupported(field.full_name)
            repeated = field.is_repeated
            flags = (REPEATED if repeated else 0) | (PRESENCE if field.has_presence and not repeated else 0)
            child = 0
            if op == "enum":
                child = self.enum(field.enum_type)
            elif op == "message":
                child = self.message(field.message_type)
            oneof = oneofs[field.containing_oneof.full_name] if field.containing_oneof is not None else 0
            name = self.text(json.dumps(field.json_name, ensure_ascii=False) + ": ")
            self.words[at + 2 + 7 * k: at + 9 + 7 * k] = [field.number, OPS[op], flags, *name, child, oneof]
        return at

    def program(self, root: int) -> bytes:
        self.words[0], self.words[1] = root, len(self.words)
        return struct.pack(f"<{len(self.words)}i", *self.words) + bytes(self.pool)


def compile_message(descriptor: Any) -> bytes | None:
    """The program for messages of `descriptor` (a protobuf Descriptor), or None (see the module doc)."""
    compiler = _Compiler()
    try:
        root = compiler.message(descriptor)
    except _Unsupported:
        return None
    return compiler.program(root)
