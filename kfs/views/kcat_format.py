"""kcat's output format strings (`kcat -C -f FMT`), for `kfs cat -f`: scripts written for kcat run on log dirs.

The tokens and escapes are kcat's (format.c in edenhill/kcat, 1.7), checked byte for byte against
kcat itself consuming the same records (tests/test_kcat_format.py):

    %o offset   %k key   %K key length (-1: null)   %s value   %S value length (-1: null)
    %R value length as a big-endian int32 (-1: null)   %T timestamp (ms; -1: none)
    %h headers as name=value, comma-separated (a null value: NULL)   %t topic   %p partition   %% a %
    \\n \\r \\t; \\x then hex digits, or \\ then decimal digits (0x.. hex, 0.. octal): that byte
    (the number's low byte; kcat reads the digits only when the first is 0-9); \\ and any other
    character: that character.

A null key or value prints as `null` (nothing by default, as kcat; kcat's -Z is `null=b"NULL"`).
Where kcat is wrong kfs is not: kcat -Z prints NULL for an empty key or value too, cuts a header
value at its first NUL byte, and fails on an escape that makes a NUL; kfs prints what is stored.
A number in an escape past what strtoul reads (2^64 - 1) is that, as kcat's: its low byte 0xFF.

Output comes in pieces (`pieces`) of about CHUNK bytes, in memory bounded whatever the format: kcat
writes each token as it goes, and a format repeating `%s` made the whole batch's output at once
(3.1 GB for one 1 MiB value). A record whose output may pass CHUNK is given a token at a time, each
token's bytes being ones already in memory (its value, key, a literal).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from operator import attrgetter, itemgetter

from kfs.record import Record
from kfs.storage import KfsError
from kfs.storage.files import NotARegularFile, read_regular

log = logging.getLogger("kfs")


class BadFormat(KfsError):
    """A format string kcat would refuse too: an unknown %-token or a lone % at the end."""


# Each field's %-conversion in the template and the name of its getter (_field_getter).
_TOKENS = {"o": (b"%d", "offset"), "T": (b"%d", "timestamp"), "K": (b"%d", "key_length"),
           "S": (b"%d", "value_length"), "k": (b"%b", "key"), "s": (b"%b", "value"), "h": (b"%b", "headers"),
           "R": (b"%b", "value_length_be32")}
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_SIMPLE_ESCAPES = {"n": "\n", "r": "\r", "t": "\t"}
# What C's strtoul takes from a string starting with a digit, in base 16 and in base 0.
_NUMBER = {16: re.compile(r"0[xX][0-9a-fA-F]+|[0-9a-fA-F]+"), 0: re.compile(r"0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*")}
_ULONG_MAX = (1 << 64) - 1  # strtoul's answer to a number past it
_ULONG_DIGITS = 22  # significant digits past which any number, in base 8, 10 or 16, is past _ULONG_MAX
CHUNK = 256 * 1024  # output gathered before a piece is given; a record that may pass it goes a token at a time


def _unescape(text: str) -> bytes:
    """A literal part of a format with kcat's backslash escapes made bytes (kcat's fmt_add)."""
    out = bytearray()
    i = 0
    while i < len(text):
        c = text[i]
        if c != "\\" or i + 1 == len(text):
            out += c.encode("utf-8", "surrogateescape")
            i += 1
            continue
        c = text[i + 1]
        i += 2
        if c in _SIMPLE_ESCAPES:
            out += _SIMPLE_ESCAPES[c].encode()
            continue
        base = 0
        if c == "x":
            base = 16
            if i == len(text):
                continue  # (a trailing \x: kcat writes its terminating NUL, i.e. nothing)
            c = text[i]
            i += 1
        if "0" <= c <= "9":
            digits = _NUMBER[base].match(text, i - 1)
            assert digits is not None  # (c is a digit)
            number = _strtoul(digits.group(), base)
            out.append(min(number, _ULONG_MAX) & 0xFF)  # (kcat keeps the low byte: a char)
            i = digits.end()
        else:
            out += c.encode("utf-8", "surrogateescape")
    return bytes(out)


def _strtoul(digits: str, base: int) -> int:
    """The number C's strtoul reads from `digits` (matched by _NUMBER[base]); one past _ULONG_MAX is that
    (ERANGE), read without int() of every digit (past 4,300 digits, Python's int() refuses)."""
    if digits[:2] in ("0x", "0X"):
        digits, base = digits[2:], 16
    elif base == 0:
        base = 8 if digits.startswith("0") else 10
    significant = digits.lstrip("0")
    if len(significant) > _ULONG_DIGITS:
        return _ULONG_MAX
    return min(int(significant or "0", base), _ULONG_MAX)


def _literal_op(text: bytes) -> bytes:
    """A literal in a program for the compiled renderer: "L", its length (uint32, little-endian), its bytes."""
    return b"L" + len(text).to_bytes(4, "little") + text


class KcatFormat:
    """A parsed format: `render(records)` gives the bytes kcat prints for them."""

    def __init__(self, text: str, topic: str, partition: int, null: bytes = b"") -> None:
        self.null = null
        # (op, literal): op "L" a literal, else a token's letter; the topic and partition are literals
        self.parts: list[tuple[str, bytes]] = []
        rest = text
        while rest:
            literal, percent, rest = rest.partition("%")
            self._literal(_unescape(literal))
            if not percent:
                break
            if not rest:
                raise BadFormat(f"format {text!r} ends in a lone %: write %% for a percent sign")
            token, rest = rest[0], rest[1:]
            if token == "%":
                self._literal(b"%")
            elif token == "t":
                self._literal(topic.encode("utf-8", "surrogateescape"))
            elif token == "p":
                self._literal(str(partition).encode())
            elif token in _TOKENS:
                self.parts.append((token, b""))
            else:
                raise BadFormat(f"format {text!r} has %{token}, which kcat does not know: the tokens are "
                                "%o %k %K %s %S %R %T %h %t %p and %%")
        template = b"".join(literal.replace(b"%", b"%%") if op == "L" else _TOKENS[op][0] for op, literal in self.parts)
        self.template = template
        self._values = _field_getter([_TOKENS[op][1] for op, _ in self.parts if op != "L"], null)
        self._size_of = _size_of(self.parts, null)

    def _literal(self, text: bytes) -> None:
        if not text:
            return
        if self.parts and self.parts[-1][0] == "L":
            self.parts[-1] = ("L", self.parts[-1][1] + text)
        else:
            self.parts.append(("L", text))

    def program(self) -> bytes:
        """The format for the compiled renderer (kfs/_native/csrc/views/render_kcat.c): an op byte per part, a
        literal's followed by its length (uint32, little-endian) and bytes."""
        return b"".join(_literal_op(literal) if op == "L" else op.encode() for op, literal in self.parts)

    def render(self, records: Iterable[Record]) -> bytes:
        """The records' output in one bytes (for a few records: `pieces` is bounded in memory)."""
        return b"".join(self.pieces(list(records)))

    def pieces(self, records: Sequence[Record]) -> Iterator[bytes]:
        """The records' output in pieces of about CHUNK bytes: records rendered together (the template)
        while their output stays small, and a record whose output passes CHUNK (known from its fields'
        values before any is rendered) given a token at a time."""
        template, values, size_of = self.template, self._values, self._size_of
        if size_of is None:  # each record's output at most its own bytes and a few KiB: records in groups
            step = CHUNK // _SMALL_OUTPUT
            for at in range(0, len(records), step):
                yield b"".join([template % values(record) for record in records[at:at + step]])
            return
        gathered: list[bytes] = []
        size = 0
        for record in records:
            fields = values(record)
            line_size = size_of(fields)
            if line_size > CHUNK:
                if gathered:
                    yield b"".join(gathered)
                    gathered, size = [], 0
                yield from self._token_pieces(fields)
                continue
            gathered.append(template % fields)
            size += line_size
            if size >= CHUNK:
                yield b"".join(gathered)
                gathered, size = [], 0
        if gathered:
            yield b"".join(gathered)

    def _token_pieces(self, fields: tuple[object, ...]) -> Iterator[bytes]:
        """One record's output a token at a time (its fields' bytes as they are), small tokens joined."""
        gathered: list[bytes] = []
        size = 0
        at = 0
        for op, literal in self.parts:
            if op == "L":
                piece = literal
            else:
                value = fields[at]
                at += 1
                piece = value if isinstance(value, bytes) else b"%d" % value  # type: ignore[str-format]
            if len(piece) >= CHUNK:
                if gathered:
                    yield b"".join(gathered)
                    gathered, size = [], 0
                yield piece
                continue
            gathered.append(piece)
            size += len(piece)
            if size >= CHUNK:
                yield b"".join(gathered)
                gathered, size = [], 0
        if gathered:
            yield b"".join(gathered)


_SMALL_OUTPUT = 4096  # a record's output at most this whatever it holds: no size taken per record


def _size_of(parts: list[tuple[str, bytes]], null: bytes) -> Callable[[tuple[object, ...]], int] | None:
    """The length of a record's output from its template values (its literals, at most 20 bytes a
    number, its bytes fields' lengths), or None where that is never more than the record's own bytes
    (key, value, headers: each field at most once, about as long as it is stored) and _SMALL_OUTPUT:
    there records are rendered in groups without a size taken each (the common formats, at full speed)."""
    fields = [op for op, _ in parts if op != "L"]
    fixed = sum(len(literal) for op, literal in parts if op == "L") + 20 * sum(
        1 for op in fields if _TOKENS[op][0] == b"%d")
    sized = [i for i, op in enumerate(fields) if _TOKENS[op][0] == b"%b"]
    if all(fields.count(op) <= 1 for op in "kshR") and fixed + 4 + 2 * len(null) <= _SMALL_OUTPUT:
        return None
    if not sized:
        return lambda values: fixed
    if len(sized) == 1:
        only = sized[0]
        return lambda values: fixed + len(values[only])  # type: ignore[arg-type]
    pick = itemgetter(*sized)
    return lambda values: fixed + sum(map(len, pick(values)))


FieldGetter = Callable[[Record], tuple[object, ...]]


def _headers(r: Record) -> bytes:
    return b",".join(name.encode("utf-8", "surrogateescape") + b"=" + (b"NULL" if v is None else v)
                     for name, v in r.headers)


def _field_getter(fields: list[str], null: bytes) -> FieldGetter:
    """A function giving a record's values for the template's conversions, in order."""
    def key(r: Record) -> bytes:
        return null if r.key is None else r.key

    def value(r: Record) -> bytes:
        return null if r.value is None else r.value

    def key_length(r: Record) -> int:
        return -1 if r.key is None else len(r.key)

    def value_length(r: Record) -> int:
        return -1 if r.value is None else len(r.value)

    def value_length_be32(r: Record) -> bytes:
        return (-1 if r.value is None else len(r.value)).to_bytes(4, "big", signed=True)

    getters: dict[str, Callable[[Record], object]] = {
        "offset": attrgetter("offset"), "key": key, "value": value, "key_length": key_length,
        "value_length": value_length, "value_length_be32": value_length_be32, "timestamp": attrgetter("timestamp"),
        "headers": _headers,
    }
    chosen = [getters[f] for f in fields]
    if not chosen:
        return lambda r: ()
    if len(chosen) == 1:
        only = chosen[0]
        return lambda r: (only(r),)
    return lambda r: tuple([get(r) for get in chosen])


# ---- kcat -J: the JSON envelope ------------------------------------------------------------------

_JSON_ESCAPES = {ord('"'): b'\\"', ord("\\"): b"\\\\", ord("\b"): b"\\b", ord("\f"): b"\\f", ord("\n"): b"\\n",
                 ord("\r"): b"\\r", ord("\t"): b"\\t"}
_JSON_TABLE = [_JSON_ESCAPES.get(c, b"\\u%04X" % c if c < 0x20 else bytes([c])) for c in range(256)]
_NEEDS_ESCAPE = re.compile(rb'["\\\x00-\x1f]')
_TSTYPES = {"CreateTime": b"create", "LogAppendTime": b"logappend"}


def _json_bytes(data: bytes | None) -> bytes:
    """A string as kcat's JSON generator (yajl, UTF-8 not validated) writes bytes: quotes, backslashes and
    control characters escaped, every other byte as it is (so bytes that are not UTF-8 stay as they are,
    and the line is not JSON then, as kcat's is not)."""
    if data is None:
        return b"null"
    if _NEEDS_ESCAPE.search(data) is None:
        return b'"' + data + b'"'
    table = _JSON_TABLE
    return b'"' + b"".join([table[c] for c in data]) + b'"'


class KcatJson:
    """kcat -J's envelope, one line a record: topic, partition, offset, tstype and ts (none for a
    message without a timestamp, magic 0), broker (the log dir's broker.id or node.id in
    meta.properties, else -1), headers as a flat list of names and values (none without headers),
    key and payload."""

    def __init__(self, topic: str, partition: int, broker: int) -> None:
        self.head = (b'{"topic":' + _json_bytes(topic.encode("utf-8", "surrogateescape")) + b',"partition":'
                     + str(partition).encode() + b',"offset":')
        self.broker = b',"broker":' + str(broker).encode()
        self.null = b""  # (a null key or value is JSON's null)

    def program(self) -> bytes:
        """The envelope for the compiled renderer (render_kcat.c: KcatFormat.program's ops and its JSON
        ones), for what it takes: v2 batches, whose records all have a timestamp type."""
        literal = _literal_op
        return b"".join([literal(self.head), b"o", literal(b',"tstype":"'), b"Y", literal(b'","ts":'), b"T",
                         literal(self.broker), b"H", literal(b',"key":'), b"J", literal(b',"payload":'), b"j",
                         literal(b"}\n")])

    def render(self, records: Iterable[Record]) -> bytes:
        return b"".join(self.pieces(list(records)))

    def pieces(self, records: Sequence[Record]) -> Iterator[bytes]:
        """The records' lines, gathered up to about CHUNK bytes a piece (a line is at most six times its
        record's bytes: an escape each)."""
        gathered: list[bytes] = []
        size = 0
        for line in self._lines(records):
            gathered.append(line)
            size += len(line)
            if size >= CHUNK:
                yield b"".join(gathered)
                gathered, size = [], 0
        if gathered:
            yield b"".join(gathered)

    def _lines(self, records: Iterable[Record]) -> Iterator[bytes]:
        for r in records:
            tstype = _TSTYPES.get(r.timestamp_type)
            line = [self.head, b"%d" % r.offset]
            if tstype is not None:
                line.append(b',"tstype":"' + tstype + b'","ts":%d' % r.timestamp)
            line.append(self.broker)
            if r.headers:
                line.append(b',"headers":[' + b",".join(
                    _json_bytes(name.encode("utf-8", "surrogateescape")) + b"," + _json_bytes(value)
                    for name, value in r.headers) + b"]")
            line.append(b',"key":' + self._part(r, "key") + b',"payload":' + self._part(r, "value") + b"}\n")
            yield b"".join(line)

    def _part(self, record: Record, part: str) -> bytes:
        """The key's or the value's JSON: bytes as they are (kfs.registry.kcat decodes them instead)."""
        return _json_bytes(record.key if part == "key" else record.value)


_BROKER_ID = re.compile(r"[+-]?0*(\d{1,10})")  # what Integer.parseInt reads, leading zeros aside (range below)


def broker_id(logdir: str) -> int:
    """The broker that wrote a log dir, from its meta.properties (broker.id, or KRaft's node.id); -1.
    Read only if it is a regular file (kfs.storage.files); one that is not is said, and taken as missing.

    Kafka reads the id with Integer.parseInt (a sign, decimal digits, an int32) and will not start with
    another; kcat -J's broker is the int32 librdkafka got from the cluster, -1 where it knows none. So
    an id no broker could have run with (past an int32, 5,000 digits, `1_000`, `²`) is unknown: -1."""
    path = os.path.join(logdir, "meta.properties")
    try:
        text = read_regular(path, 1 << 20).decode("utf-8", errors="replace")
    except NotARegularFile as e:
        log.warning("%s; the broker id is taken as unknown (-1)", e)
        return -1
    except OSError:
        return -1
    properties = dict(line.strip().partition("=")[::2] for line in text.splitlines() if "=" in line
                      and not line.lstrip().startswith("#"))
    for key in ("broker.id", "node.id"):
        value = properties.get(key, "").strip()
        found = _BROKER_ID.fullmatch(value)
        if found is not None:
            number = int(found.group(1)) * (-1 if value.startswith("-") else 1)  # (at most 10 digits)
            return number if -(1 << 31) <= number < (1 << 31) else -1
    return -1
