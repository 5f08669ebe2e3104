"""The one renderer of decoded records as JSON lines (one object per record: topic, partition,
offset, timestamp, timestamp_type, key, value, headers); every front end calls it.

    {"topic": "orders", "partition": 0, "offset": 268, "timestamp": 1526384718288,
     "timestamp_type": "CreateTime", "key": "user-17", "value": "...", "headers": [["trace-id", "ab12"]]}

Bytes become a JSON string when they are valid UTF-8, `{"base64": "..."}` when not, `null` when
null. Lines are assembled from pieces rather than through `json.dumps` of a dict: the keys and
the topic/partition prefix never change, and the C string encoder does the escaping.

Kafka's internal topics (docs/spec.md section 8) pass a `decoder` (kfs.internal_topics.lines.line_decoder) that
gives the key and value as decoded objects, or the reason they do not decode (`"decode_error"`,
last in the line). Their lines are rendered here in Python, but for `__consumer_offsets`' offset
commits, which the compiled renderer writes itself (`commits`); every other topic keeps the compiled
path (`decoder=None`).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Iterator

from kfs._native import views as native
from kfs.internal_topics.lines import LineDecoder
from kfs.record import Record
from kfs.views.plain_runs import WalkerDecoding

_encode_str = json.encoder.encode_basestring  # C-accelerated, keeps UTF-8

# The compiled twin of render_line over many records (kfs/_native/csrc/views/render_jsonl.c), when built; else None.
_render_jsonl = native.render_jsonl
# render_records pulls records in chunks this long at most, starting at the first: a reader that
# stops after a few lines does not make many more records be decoded.
_CHUNK_FIRST = 16
_CHUNK_MAX = 1024


def render_bytes(data: bytes | None) -> str:
    if data is None:
        return "null"
    try:
        return _encode_str(data.decode("utf-8"))
    except UnicodeDecodeError:
        return '{"base64": "' + base64.b64encode(data).decode("ascii") + '"}'


def line_prefix(topic: str, partition: int) -> str:
    return '{"topic": ' + _encode_str(topic) + ', "partition": ' + str(partition) + ', "offset": '


def render_record(topic: str, partition: int, record: Record, prefix: str | None = None,
                  decoder: LineDecoder | None = None) -> bytes:
    """One record as one JSON line, ending in a newline."""
    return render_line(prefix or line_prefix(topic, partition), record, decoder).encode("utf-8")


def render_line(prefix: str, record: Record, decoder: LineDecoder | None = None) -> str:
    error = getattr(record, "error", None)
    if error is not None:  # a batch skipped with on_corrupt=skip (kfs.storage.partition.CorruptBatch)
        return (prefix + str(record.offset) + ', "error": '
                + _encode_str(error) + ', "path": ' + _encode_str(record.path)  # type: ignore[attr-defined]
                + ', "position": ' + str(record.position) + "}\n")  # type: ignore[attr-defined]
    headers = record.headers
    if headers:
        rendered_headers = "[" + ", ".join(
            "[" + _encode_str(k) + ", " + render_bytes(v) + "]" for k, v in headers) + "]"
    else:
        rendered_headers = "[]"
    key = value = decode_error = tail = None
    if decoder is not None:
        key, value, decode_error, tail = decoder(record)
    line = (prefix + str(record.offset) + ', "timestamp": ' + str(record.timestamp)
            + ', "timestamp_type": "' + record.timestamp_type + '", "key": '
            + (render_bytes(record.key) if key is None else key)
            + ', "value": ' + (render_bytes(record.value) if value is None else value)
            + ', "headers": ' + rendered_headers)
    if tail is not None:  # a registry-framed key or value's schema or decode error (kfs.registry.lines)
        line += tail
    control = getattr(record, "control", None)
    if control is not None:
        epoch = record.coordinator_epoch  # type: ignore[attr-defined]
        line += (', "control": "' + control + '", "producer_id": ' + str(record.producer_id)  # type: ignore[attr-defined]
                 + ', "coordinator_epoch": ' + ("null" if epoch is None else str(epoch)))
    if decode_error is not None:
        line += ', "decode_error": ' + _encode_str(decode_error)
    return line + "}\n"


def _avro_table(decoder: LineDecoder) -> dict[bytes, tuple[object, str] | bool] | None:
    """A schema-registry decoder's table for the compiled renderer (kfs.registry.lines.FramedLines):
    with it, render_jsonl renders the lines of values framed by an Avro schema's id in C."""
    return getattr(decoder, "avro_table", None) if _render_jsonl is not None else None


def commits_in_c(decoder: LineDecoder | None) -> bool:
    """Whether `decoder` is `__consumer_offsets`' line decoder, whose offset commits render_jsonl writes
    itself (`commits`: kfs/_native/csrc/views/offsets_json.h, the text the decoder gives), as the compiled
    walker does (kfs.views.plain_runs.line_taker's `commits`)."""
    return _render_jsonl is not None and bool(getattr(decoder, "commits_in_c", False))


def walker_decoding(decoder: LineDecoder | None) -> WalkerDecoding | None:
    """How the compiled walker renders `decoder`'s lines itself (kfs.views.plain_runs.WalkerDecoding), as
    render_jsonl does: `__consumer_offsets`' offset commits, or the values framed by the schema ids whose
    Avro or Protobuf programs the registry decoder has compiled (its tables, which grow as it meets ids).
    None: the walker takes no batch of this decoder's."""
    if commits_in_c(decoder):
        return WalkerDecoding(commits=True)
    table = _avro_table(decoder) if decoder is not None else None
    protobuf = getattr(decoder, "protobuf_table", None) if table is not None else None
    return WalkerDecoding(avro=table, protobuf=protobuf) if table is not None else None


def _decoding(decoder: LineDecoder) -> Callable[[str, Record], str]:
    return lambda prefix, record: render_line(prefix, record, decoder)


def render_lines(prefix: str, records: Iterable[Record], decoder: LineDecoder | None = None) -> bytes:
    """`render_line(prefix, record)` of every record, as UTF-8, concatenated; compiled when built."""
    if decoder is not None:
        table = _avro_table(decoder)
        if table is not None and _render_jsonl is not None:
            return _render_jsonl(prefix, records, _decoding(decoder), avro=table)
        if commits_in_c(decoder) and _render_jsonl is not None:
            return _render_jsonl(prefix, records, _decoding(decoder), commits=True)
        return "".join([render_line(prefix, record, decoder) for record in records]).encode("utf-8")
    if _render_jsonl is not None:
        return _render_jsonl(prefix, records, render_line)
    return "".join([render_line(prefix, record) for record in records]).encode("utf-8")


def render_line_list(prefix: str, records: list[Record], decoder: LineDecoder | None = None) -> list[bytes]:
    """`render_line(prefix, record)` of each record, as UTF-8 bytes, one per record; compiled when built."""
    if decoder is not None:
        table = _avro_table(decoder)
        if table is not None and _render_jsonl is not None:
            return _render_jsonl(prefix, records, _decoding(decoder), lines=True, avro=table)
        if commits_in_c(decoder) and _render_jsonl is not None:
            return _render_jsonl(prefix, records, _decoding(decoder), lines=True, commits=True)
        return [render_line(prefix, record, decoder).encode("utf-8") for record in records]
    if _render_jsonl is not None:
        return _render_jsonl(prefix, records, render_line, lines=True)
    return [render_line(prefix, record).encode("utf-8") for record in records]


def render_records(topic: str, partition: int, records: Iterable[Record],
                   decoder: LineDecoder | None = None) -> Iterator[bytes]:
    """One JSON line (bytes) per record, lazily."""
    for _, line in render_pairs(line_prefix(topic, partition), records, decoder):
        yield line


def render_pairs(prefix: str, records: Iterable[Record],
                 decoder: LineDecoder | None = None) -> Iterator[tuple[Record, bytes]]:
    """(record, its JSON line) for each record, lazily; compiled a chunk at a time when built.

    The lines come out in step with the records: the records taken before `records` raises are
    rendered first, and so are the lines before one that fails to render.
    """
    if _render_jsonl is None or decoder is not None:
        for record in records:
            yield record, render_line(prefix, record, decoder).encode("utf-8")
        return
    it = iter(records)
    size = _CHUNK_FIRST
    while True:
        chunk: list[Record] = []
        error: Exception | None = None
        try:
            for record in it:
                chunk.append(record)
                if len(chunk) == size:
                    break
        except Exception as e:
            error = e
        try:
            lines: Iterable[bytes] = _render_jsonl(prefix, chunk, render_line, lines=True)
        except Exception:
            lines = (render_line(prefix, record).encode("utf-8") for record in chunk)  # raises where it should
        yield from zip(chunk, lines, strict=False)
        if error is not None:
            raise error
        if len(chunk) < size:
            return
        size = min(2 * size, _CHUNK_MAX)
