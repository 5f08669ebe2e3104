"""A parsed Avro schema compiled into the program of the compiled renderer (kfs/_native/csrc/registry/avro_json.h).

The program is made from the schema kfs.registry.avro.AvroRenderer hands fastavro (rewritten: unnamed
union branches wrapped in one-field records named in `labels`, floats in records of one `kfs__float`
field, logical types dropped), so that both paths read the same schema the same way. The field
names, union labels and enum symbols are written into it as the JSON text the line holds (`"name": `),
escaped once here. A named type is one node, which its uses (its own fields too) point to.

None where the Python path reads the schema in its own way (a field of a user's record named
`kfs__float`, a record naming one field twice): every datum of such a schema stays that path's.
"""

from __future__ import annotations

import json
import struct
from typing import Any

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_FLOAT_FIELD = "kfs__float"
KINDS = {name: code for code, name in enumerate(
    ["null", "boolean", "int", "long", "float", "double", "bytes", "string", "fixed", "enum", "record", "array",
     "map", "union"], start=1)}
_HEADER_WORDS = 3  # the root node, the word count, whether the pool holds non-ASCII text
_encode_str = json.encoder.encode_basestring


class _Unsupported(Exception):
    """A schema whose datums stay the Python path's."""


class _Compiler:
    def __init__(self, named: dict[str, Any], labels: dict[str, str]) -> None:
        self.named = named
        self.labels = labels
        self.words: list[int] = [0] * _HEADER_WORDS
        self.pool = bytearray()
        self.texts: dict[str, int] = {}
        self.nodes: dict[str, int] = {}  # a named type's node, or a primitive's

    def text(self, text: str) -> tuple[int, int]:
        data = text.encode("utf-8")
        at = self.texts.get(text)
        if at is None:
            at = self.texts[text] = len(self.pool)
            self.pool += data
        return at, len(data)

    def node(self, schema: Any) -> int:
        if isinstance(schema, str):
            if schema in PRIMITIVES:
                return self._primitive(schema)
            if schema in self.nodes:
                return self.nodes[schema]
            if schema not in self.named:
                raise _Unsupported(schema)
            return self.node(self.named[schema])
        if isinstance(schema, list):
            return self._union(schema)
        if not isinstance(schema, dict):
            raise _Unsupported(repr(schema))
        kind = schema.get("type")
        if isinstance(kind, (dict, list)) or (isinstance(kind, str) and kind in self.named):
            return self.node(kind)
        if kind in PRIMITIVES:
            return self._primitive(kind)
        name = schema.get("name")
        if isinstance(name, str) and name in self.nodes:
            return self.nodes[name]
        if kind in ("record", "error"):
            return self._record(schema)
        if kind == "enum":
            at = self._begin(schema, [KINDS["enum"], len(schema["symbols"])])
            for symbol in schema["symbols"]:
                self.words += self.text(_encode_str(symbol))
            return at
        if kind == "fixed":
            return self._begin(schema, [KINDS["fixed"], int(schema["size"])])
        if kind in ("array", "map"):
            at = len(self.words)
            self.words += [KINDS[kind], 0]
            self.words[at + 1] = self.node(schema["items" if kind == "array" else "values"])
            return at
        raise _Unsupported(repr(kind))

    def _begin(self, schema: dict[str, Any], words: list[int]) -> int:
        """A node's first words; a named type's node is known by its name from here on (it may recur)."""
        at = len(self.words)
        self.words += words
        name = schema.get("name")
        if isinstance(name, str):
            self.nodes[name] = at
        return at

    def _primitive(self, kind: str) -> int:
        if kind not in self.nodes:
            self.nodes[kind] = len(self.words)
            self.words.append(KINDS[kind])
        return self.nodes[kind]

    def _record(self, schema: dict[str, Any]) -> int:
        fields = schema["fields"]
        names = [f["name"] for f in fields]
        if len(set(names)) != len(names):
            raise _Unsupported("a field named twice")
        if _FLOAT_FIELD in names:
            if names == [_FLOAT_FIELD] and _type_name(fields[0]["type"]) == "float":
                return self._primitive("float")  # the rewrite's float wrapper
            raise _Unsupported("a user's field named kfs__float")
        at = self._begin(schema, [KINDS["record"], len(fields)] + [0] * (3 * len(fields)))
        for i, field in enumerate(fields):
            offset, length = self.text(_encode_str(field["name"]) + ": ")
            child = self.node(field["type"])
            self.words[at + 2 + 3 * i: at + 5 + 3 * i] = [offset, length, child]
        return at

    def _union(self, branches: list[Any]) -> int:
        at = len(self.words)
        self.words += [KINDS["union"], len(branches)] + [0] * (3 * len(branches))
        for i, branch in enumerate(branches):
            target = self.named.get(branch, branch) if isinstance(branch, str) else branch
            if _type_name(target) == "null":
                entry = [0, -1, self._primitive("null")]
            elif isinstance(target, dict) and target.get("name") in self.labels:  # a wrapped unnamed branch
                wrapped = target["fields"][0]["type"]
                entry = [*self.text(_encode_str(self.labels[target["name"]]) + ": "), self.node(wrapped)]
            elif isinstance(target, dict) and target.get("type") in ("record", "error", "enum", "fixed"):
                entry = [*self.text(_encode_str(str(target["name"])) + ": "), self.node(branch)]
            else:
                raise _Unsupported(f"union branch {branch!r}")
            self.words[at + 2 + 3 * i: at + 5 + 3 * i] = entry
        return at

    def program(self, root: int) -> bytes:
        self.words[0] = root
        self.words[1] = len(self.words)
        self.words[2] = int(not self.pool.isascii())
        return struct.pack(f"<{len(self.words)}i", *self.words) + bytes(self.pool)


def _type_name(schema: Any) -> Any:
    return schema.get("type") if isinstance(schema, dict) else schema


def compile_program(schema: Any, named: dict[str, Any], labels: dict[str, str]) -> bytes | None:
    """The program of a rewritten, parsed schema (AvroRenderer's `schema`, its named types and union
    labels), or None where its datums stay the Python path's."""
    compiler = _Compiler(named, labels)
    try:
        root = compiler.node(schema)
    except (_Unsupported, KeyError, TypeError, ValueError, RecursionError):
        return None
    if len(compiler.words) >= 1 << 30:
        return None
    return compiler.program(root)
