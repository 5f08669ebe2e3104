"""Kafka's versioned message formats as data: kfs's compact notation and its parser.

Kafka defines every record of its internal topics as a table of fields (the JSON files its
message generator reads: `group-coordinator/src/main/resources/common/message/`, ...). kfs keeps
the tables it needs in `kfs/internal_topics/schemas/` in a notation of its own, one line per field:

    OffsetCommitValue 0-4 flex:4+                 message name, valid versions, flexible versions
      offset int64 0+                             field (camelCase, as Kafka's JSON converters print it),
      leaderEpoch int32 3+ =-1                    type, versions, then options:
      metadata string 0+                            null:V    nullable in versions V
      members []MemberMetadata 0+                   tag:N:V   tagged field N in versions V
        memberId string 0+                          =X        default (X as in Kafka's schema)
        ...                                       a struct's fields follow it, indented; a struct
                                                  named again later in the message reuses them
    PartitionRecord 0-2 flex:0+ api:3             api:N  the metadata record's api key (its type)

Versions are written as Kafka writes them: `3`, `0-2`, `4+`, `none`. Types: bool, int8, int16,
uint16, int32, uint32, int64, float64, string, bytes, uuid, records, a struct name, `[]` + any.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PRIMITIVES = frozenset(
    {"bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64", "string", "bytes", "uuid", "records"})
_MAX_VERSION = 0x7FFF


@dataclass(frozen=True)
class Versions:
    """A closed range of versions (Kafka's `Versions`); empty when `low > high`."""

    low: int
    high: int

    @staticmethod
    def parse(text: str) -> Versions:
        if text == "none":
            return NONE
        if text.endswith("+"):
            return Versions(int(text[:-1]), _MAX_VERSION)
        low, _, high = text.partition("-")
        return Versions(int(low), int(high or low))

    def __contains__(self, version: object) -> bool:
        return self.low <= version <= self.high  # type: ignore[operator]

    def __str__(self) -> str:
        if self.low > self.high:
            return "none"
        if self.high == _MAX_VERSION:
            return f"{self.low}+"
        return str(self.low) if self.low == self.high else f"{self.low}-{self.high}"


NONE = Versions(1, 0)


@dataclass
class Struct:
    """A list of fields: a message's top level, or a struct type inside it."""

    name: str
    fields: list[Field] = field(default_factory=list)


@dataclass
class Field:
    name: str
    type: str  # a primitive, or "struct"
    array: bool
    versions: Versions
    nullable: Versions = NONE
    tag: int | None = None
    tagged: Versions = NONE
    default: str | None = None  # as written in Kafka's schema; None: the type's zero value
    struct: Struct | None = None


@dataclass
class Message:
    name: str
    versions: Versions  # validVersions
    flexible: Versions
    api_key: int | None
    body: Struct


def parse(text: str) -> dict[str, Message]:
    """The messages of one schema module, by name."""
    messages: dict[str, Message] = {}
    message: Message | None = None
    structs: dict[str, Struct] = {}
    stack: list[Struct] = []  # stack[d]: the struct whose fields sit at depth d + 1
    last: Field | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        words = line.split()
        try:
            if indent == 0:
                message = _message(words)
                messages[message.name] = message
                structs, stack, last = {}, [message.body], None
                continue
            depth = indent // 2
            if message is None or indent % 2:
                raise ValueError("bad indentation")
            if depth == len(stack) + 1:  # the fields of the struct just named
                if last is None or last.struct is None:
                    raise ValueError("indented under a field that is not a struct")
                if last.struct.fields:
                    raise ValueError(f"struct {last.struct.name} is already defined")
                stack.append(last.struct)
            elif depth <= len(stack):
                del stack[depth:]
            else:
                raise ValueError("bad indentation")
            last = _field(words, structs)
            stack[-1].fields.append(last)
        except (ValueError, IndexError) as e:
            raise ValueError(f"schema line {number} ({raw.strip()!r}): {e}") from None
    for m in messages.values():
        _check_defined(m.body, m.name)
    return messages


def _message(words: list[str]) -> Message:
    name, versions, *options = words
    flexible, api_key = NONE, None
    for option in options:
        key, _, value = option.partition(":")
        if key == "flex":
            flexible = Versions.parse(value)
        elif key == "api":
            api_key = int(value)
        else:
            raise ValueError(f"unknown option {option}")
    return Message(name, Versions.parse(versions), flexible, api_key, Struct(name))


def _field(words: list[str], structs: dict[str, Struct]) -> Field:
    name, type_name, versions, *options = words
    array = type_name.startswith("[]")
    base = type_name[2:] if array else type_name
    f = Field(name, base if base in PRIMITIVES else "struct", array, Versions.parse(versions))
    if f.type == "struct":
        f.struct = structs.setdefault(base, Struct(base))
    for option in options:
        if option.startswith("="):
            f.default = option[1:].strip('"')
        elif option.startswith("null:"):
            f.nullable = Versions.parse(option[5:])
        elif option.startswith("tag:"):
            _, tag, tagged = option.split(":")
            f.tag, f.tagged = int(tag), Versions.parse(tagged)
        else:
            raise ValueError(f"unknown option {option}")
    return f


def _check_defined(struct: Struct, where: str) -> None:
    for f in struct.fields:
        if f.struct is not None:
            if not f.struct.fields:
                raise ValueError(f"{where}: struct {f.struct.name} has no fields")
            if f.struct is not struct:
                _check_defined(f.struct, where)
