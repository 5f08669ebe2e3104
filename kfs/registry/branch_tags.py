"""Primitive values tagged with their Avro type, so that a union's value says which branch it took.

fastavro reads a union's value as the Python object of the branch (named types, with
`return_named_type`, as `(full name, value)`), which loses the branch when two branches read as one
Python type: `int` and `long`, `float` and `double`, `string` and an enum, `bytes` and a fixed. Spark
puts each branch of such a union in its own `memberN` field (AvroDeserializer: `resolveUnion` by the
Java class the reader made), so the branch matters. And fastavro resolves an older writer's value to
the *first* reader branch it can be promoted to, where Avro's Java resolver (Resolver.bestBranch)
takes the branch of the writer's own type first: a writer's `int` in a reader's `[string, long, int]`
is Java's `int`, fastavro's `long`.

So, for a reader schema with such a union (`needs_tags`), the schemas fastavro reads with (the reader
and every writer) have each `int`, `long`, `float`, `double`, `string` and `bytes` rewritten into a
one-field record of the same binary encoding (a record is encoded as its fields): `kfs__n_long`, whose
one field `kfs__long` holds the value. The value then comes as `{"kfs__long": v}` (or, in a union,
`("<ns>.kfs__n_long", {"kfs__long": v})`): the key names the reader's type. Everywhere, not only in
unions, so that a writer's plain `long` still meets a reader union's `long` branch by name. A reader
branch answers to the names of the types it can be promoted from (aliases), only where its union lacks
that type itself: the exact branch first, then the first promotion, as Java resolves. Each wrapper has
a namespace of its own (`kfs.t<N>`; resolution matches unqualified names), so one can be defined at
every place it occurs."""

from __future__ import annotations

import itertools
from typing import Any

TAGGED = ("int", "long", "float", "double", "string", "bytes")
FIELD_PREFIX = "kfs__"  # the wrapper's one field: kfs__<type>
NAME_PREFIX = "kfs__n_"  # the wrapper: kfs__n_<type>
# What each type can be read from besides itself (the Avro specification's promotions).
PROMOTED_FROM = {"long": ("int",), "float": ("int", "long"), "double": ("int", "long", "float"),
                 "string": ("bytes",), "bytes": ("string",), "int": ()}
# The Python type fastavro reads each kind as, for a value given without its name.
_PYTHON = {"int": "int", "long": "int", "float": "float", "double": "float", "string": "str", "enum": "str",
           "bytes": "bytes", "fixed": "bytes"}


def _kind(schema: Any, named: dict[str, Any]) -> str:
    if isinstance(schema, str):
        target = named.get(schema, schema)
        return target if isinstance(target, str) else _kind(target, named)
    if isinstance(schema, list):
        return "union"
    kind = schema.get("type")
    return kind if isinstance(kind, str) else _kind(kind, named)


def needs_tags(schema: Any, named: dict[str, Any]) -> bool:
    """Whether a reader schema (parsed: named types by full name in `named`) has a union whose branches
    fastavro's values cannot tell apart, or where its resolution may pick another branch than Java's:
    two of int, long, float, double (but Spark's folded [int, long] and [float, double]), a string and
    an enum, bytes and a fixed, or string and bytes."""
    seen: set[int] = set()

    def walk(s: Any) -> bool:
        if isinstance(s, str):
            if s not in named:
                return False
            s = named[s]
        if id(s) in seen:
            return False
        seen.add(id(s))
        if isinstance(s, list):
            rest = [b for b in s if _kind(b, named) != "null"]
            kinds = [_kind(b, named) for b in rest]
            folded = len(kinds) == 2 and set(kinds) in ({"int", "long"}, {"float", "double"})
            pythons = [_PYTHON.get(k, k) for k in kinds if k in _PYTHON]
            if not folded and (len(set(pythons)) < len(pythons) or {"string", "bytes"} <= set(kinds)):
                return True
            return any(walk(b) for b in rest)
        if not isinstance(s, dict):
            return False
        kind = s.get("type")
        if isinstance(kind, (dict, list)):
            return walk(kind)
        if kind in ("record", "error"):
            return any(walk(f.get("type")) for f in s.get("fields") or [])
        if kind == "array":
            return walk(s.get("items"))
        if kind == "map":
            return walk(s.get("values"))
        return False

    return walk(schema)


class Tagger:
    """Rewrites schemas (parsed JSON, before fastavro parses them) into their tagged form; one per
    fastavro parse, whose wrappers it numbers."""

    def __init__(self) -> None:
        self._numbers = itertools.count()

    def tag(self, schema: Any) -> Any:
        return self._tag(schema, ())

    def _wrapper(self, kind: str, schema: Any, exact: tuple[str, ...]) -> dict[str, Any]:
        """`schema` (of type `kind`) in its record; `exact`: the types its union has itself (no alias
        of theirs: a writer of that type takes that branch)."""
        sources = [k for k in PROMOTED_FROM[kind] if k not in exact]
        return {"type": "record", "name": NAME_PREFIX + kind, "namespace": f"kfs.t{next(self._numbers)}",
                "aliases": [NAME_PREFIX + k for k in sources],
                "fields": [{"name": FIELD_PREFIX + kind, "type": schema,
                            "aliases": [FIELD_PREFIX + k for k in sources]}]}

    def _tag(self, s: Any, exact: tuple[str, ...]) -> Any:
        if isinstance(s, str):
            return self._wrapper(s, s, exact) if s in TAGGED else s
        if isinstance(s, list):
            kinds = tuple(b if isinstance(b, str) else b.get("type") if isinstance(b, dict) else None for b in s)
            return [self._tag(b, tuple(k for k in kinds if isinstance(k, str))) for b in s]
        if not isinstance(s, dict):
            return s
        kind = s.get("type")
        if isinstance(kind, (dict, list)):
            return dict(s, type=self._tag(kind, exact))
        if kind in TAGGED:
            return self._wrapper(kind, s, exact)
        if kind in ("record", "error"):
            fields = []
            for f in s.get("fields") or []:
                if not isinstance(f, dict):
                    fields.append(f)
                    continue
                field = dict(f, type=self._tag(f.get("type"), ()))
                if "default" in f:
                    field["default"] = tag_default(f.get("type"), f["default"])
                fields.append(field)
            return dict(s, fields=fields)
        if kind == "array":
            return dict(s, items=self._tag(s.get("items"), ()))
        if kind == "map":
            return dict(s, values=self._tag(s.get("values"), ()))
        return s


def tag_default(schema: Any, value: Any) -> Any:
    """A field's default (JSON) for its tagged type: each tagged value as `{"kfs__<type>": value}`. A
    union's default is its first branch's (the Avro specification); a named type's, given by name, is
    left as it is (a record's fields are not seen through a reference)."""
    if isinstance(schema, list):
        return tag_default(schema[0], value) if schema else value
    if isinstance(schema, str):
        return {FIELD_PREFIX + schema: value} if schema in TAGGED else value
    if not isinstance(schema, dict):
        return value
    kind = schema.get("type")
    if isinstance(kind, (dict, list)):
        return tag_default(kind, value)
    if kind in TAGGED:
        return {FIELD_PREFIX + kind: value}
    if kind in ("record", "error") and isinstance(value, dict):
        out = dict(value)
        for f in schema.get("fields") or []:
            if isinstance(f, dict) and f.get("name") in out:
                out[f["name"]] = tag_default(f.get("type"), out[f["name"]])
        return out
    if kind == "array" and isinstance(value, list):
        return [tag_default(schema.get("items"), v) for v in value]
    if kind == "map" and isinstance(value, dict):
        return {k: tag_default(schema.get("values"), v) for k, v in value.items()}
    return value


def tag_kind(value: Any) -> str | None:
    """The type a tagged value names (`{"kfs__long": v}`, or `(name, that)` from a union), else None."""
    if type(value) is tuple and len(value) == 2:
        value = value[1]
    if type(value) is dict and len(value) == 1:
        (key,) = value
        if type(key) is str and key.startswith(FIELD_PREFIX) and key[len(FIELD_PREFIX):] in PROMOTED_FROM:
            return key[len(FIELD_PREFIX):]
    return None


def untag(value: Any) -> Any:
    """A tagged value's value (a value that is not tagged: itself: a default given by a named type)."""
    if type(value) is tuple and len(value) == 2:
        value = value[1]
    if type(value) is dict and len(value) == 1:
        (key,) = value
        if type(key) is str and key.startswith(FIELD_PREFIX):
            return value[key]
    return value
