"""The compiled decoder and renderers (kfs._native._speedups, kfs/_native/csrc/) agree with the Python code, byte
for byte.

The Python loops are the reference: every test runs them, and runs the compiled functions too when the
extension was built (else those cases are skipped, and kfs runs on the Python loops alone). Random
records and batches (hypothesis, kafka-python's DefaultRecordBatchBuilder), the Kafka-written fixtures,
and a fuzz loop of truncated and bit-flipped payloads, which must raise CorruptBatchError in both and
never crash: run it under `python -X dev -m pytest tests/test_speedups.py` to check refcounts too.

`KFS_BENCH=1 python -m pytest tests/test_speedups.py -s -k bench` prints the speeds.
"""

from __future__ import annotations

import base64
import json
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from builders import golden_batches, kafka_python_batches
from conftest import GOLDEN_PARTITIONS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.memory_records import MemoryRecords

from kfs._native import record as native_record
from kfs._native import views as native_views
from kfs.record import (
    CorruptBatchError,
    Record,
    decode_records,
    default_batch,
    parse_batch_header,
    peek_size,
)
from kfs.record.types import BatchHeader
from kfs.storage.record_stream import ControlRecord
from kfs.views import jsonl

BUILT = native_record.decode_v2_records is not None
PATHS = ["python", pytest.param("c", marks=pytest.mark.skipif(not BUILT, reason="extension not built"))]
needs_c = pytest.mark.skipif(not BUILT, reason="extension not built")


# ---- the two paths ------------------------------------------------------------------------------

def decode(path: str, batch, header: BatchHeader) -> list[Record]:
    """decode_records through the Python loop or the compiled one."""
    saved = default_batch._decode_v2_records
    default_batch._decode_v2_records = native_record.decode_v2_records if path == "c" else None
    try:
        return default_batch.decode_records(batch, header)
    finally:
        default_batch._decode_v2_records = saved


def render(path: str, prefix: str, records: list) -> bytes:
    """jsonl.render_lines through the compiled renderer or, for "python", joined render_line."""
    if path == "c":
        assert native_views.render_jsonl is not None
        return native_views.render_jsonl(prefix, records, jsonl.render_line)
    return b"".join(jsonl.render_line(prefix, r).encode("utf-8") for r in records)


def fields(r: Record) -> tuple:
    return (type(r), r.offset, r.timestamp, r.timestamp_type, r.key, r.value, r.headers)


def outcome(fn: Callable[[], object]) -> tuple[str, object]:
    """('ok', result) or ('error', exception type): what the two paths must agree on."""
    try:
        return "ok", fn()
    except Exception as e:
        return "error", type(e)


# ---- building batches ----------------------------------------------------------------------------

def zigzag_varint(v: int) -> bytes:
    u = v << 1 if v >= 0 else (-v << 1) - 1
    out = bytearray()
    while True:
        b = u & 0x7F
        u >>= 7
        if u:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def encode_record(ts_delta: int, offset_delta: int, key: bytes | None, value: bytes | None,
                  headers: list[tuple[bytes, bytes | None]]) -> bytes:
    """One record in DefaultRecord's layout, with header keys as raw bytes (to test invalid UTF-8)."""
    body = bytearray(b"\x00")
    body += zigzag_varint(ts_delta) + zigzag_varint(offset_delta)
    for field in (key, value):
        body += zigzag_varint(-1) if field is None else zigzag_varint(len(field)) + field
    body += zigzag_varint(len(headers))
    for k, v in headers:
        body += zigzag_varint(len(k)) + k
        body += zigzag_varint(-1) if v is None else zigzag_varint(len(v)) + v
    return zigzag_varint(len(body)) + bytes(body)


def batch_of(payload: bytes, count: int, base_offset: int = 0, base_ts: int = 0,
             ts_type: str = "CreateTime", max_ts: int = -1) -> tuple[bytes, BatchHeader]:
    """An uncompressed batch around `payload` and its header (decode_records reads only these fields)."""
    h = BatchHeader()
    h.position = 4096
    h.size = default_batch.RECORDS_OFFSET + len(payload)
    h.base_offset = base_offset
    h.first_timestamp = base_ts
    h.timestamp_type = ts_type
    h.max_timestamp = max_ts
    h.record_count = count
    return bytes(default_batch.RECORDS_OFFSET) + payload, h


def walk(buf: bytes) -> Iterator[tuple[BatchHeader, memoryview]]:
    pos = 0
    view = memoryview(buf)
    while pos < len(buf):
        size, _ = peek_size(buf, pos)
        yield parse_batch_header(buf, pos, pos), view[pos:pos + size]
        pos += size


# ---- strategies ----------------------------------------------------------------------------------

# Byte strings that reach every branch of the UTF-8 check and the escaping: control characters,
# quotes, 2/3/4-byte sequences, and the sequences Python's strict decoder rejects.
SPECIAL = [bytes([c]) for c in range(0x20)] + [
    b'"', b"\\", b"\x7f", b"/", "é".encode(), "€".encode(), "😀".encode(), "\U0010ffff".encode(),
    b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xe0\x9f\xbf", b"\xed\xa0\x80", b"\xed\xbf\xbf",
    b"\xf0\x80\x80\x80", b"\xf0\x8f\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xff",
    b"\x80", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98", b"\xed\x9f\xbf", b"\xee\x80\x80",
]
chunks = st.one_of(st.sampled_from(SPECIAL), st.binary(max_size=6),
                   st.text(max_size=4).map(lambda s: s.encode("utf-8")))
payload_bytes = st.one_of(st.binary(max_size=40), st.lists(chunks, max_size=12).map(b"".join))
nullable_bytes = st.one_of(st.none(), payload_bytes)
# header keys as a decoder hands them out (str, replacement characters for invalid UTF-8)...
header_keys = payload_bytes.map(lambda b: b.decode("utf-8", "replace"))
# ...and any str, lone surrogates included, which Python's .encode("utf-8") refuses
any_str = st.text(alphabet=st.characters(blacklist_categories=()), max_size=8)
int64 = st.integers(-(1 << 63), (1 << 63) - 1)


@st.composite
def records(draw, key_strs=header_keys) -> Record:
    headers = draw(st.lists(st.tuples(key_strs, nullable_bytes), max_size=4))
    return Record(draw(int64), draw(int64), draw(st.sampled_from(["CreateTime", "LogAppendTime"])),
                  draw(nullable_bytes), draw(nullable_bytes), headers)


raw_headers = st.lists(st.tuples(payload_bytes, nullable_bytes), max_size=4)
raw_records = st.lists(
    st.tuples(st.integers(-(1 << 40), 1 << 40), st.integers(1, 1 << 28), nullable_bytes, nullable_bytes, raw_headers),
    min_size=1, max_size=8).map(  # offset deltas rise from 0 (or more, as after compaction), as Kafka writes them
    lambda recs: [(ts, sum(r[1] for r in recs[:i + 1]) - recs[0][1], *rest) for i, (ts, _, *rest) in enumerate(recs)])


# ---- decoding ------------------------------------------------------------------------------------

@needs_c
@settings(max_examples=300, deadline=None)
@given(raw_records, int64, st.integers(-(1 << 62), 1 << 62), st.sampled_from(["CreateTime", "LogAppendTime"]))
def test_compiled_decoder_gives_the_python_records(recs, base_offset, base_ts, ts_type) -> None:
    payload = b"".join(encode_record(*r) for r in recs)
    batch, h = batch_of(payload, len(recs), base_offset, base_ts, ts_type, max_ts=base_ts + 7)
    py = outcome(lambda: [fields(r) for r in decode("python", batch, h)])
    c = outcome(lambda: [fields(r) for r in decode("c", batch, h)])
    assert c == py
    assert py[0] == "ok"


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("deltas", [[-1], [0, 0], [0, 2, 1], [0, 1 << 40, 3]])
def test_offset_deltas_that_do_not_rise_from_0_are_corrupt(path: str, deltas: list[int]) -> None:
    """A record below the batch's base offset, or not after the one before, is where no reader looks."""
    payload = b"".join(encode_record(0, d, b"k", b"v", []) for d in deltas)
    batch, h = batch_of(payload, len(deltas), 1000, 0, "CreateTime", max_ts=7)
    with pytest.raises(CorruptBatchError, match="offset delta"):
        decode(path, batch, h)


@pytest.mark.parametrize("path", PATHS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32), headers=st.booleans(), codec=st.sampled_from([0, 1, 4]))
def test_decoder_agrees_with_kafka_python(path: str, seed: int, headers: bool, codec: int) -> None:
    rnd = random.Random(seed)
    buf = kafka_python_batches(rnd, rnd.randrange(1, 4), rnd.randrange(1, 60), headers, codec)
    ours = [(r.offset, r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers])
            for h, batch in walk(buf) for r in decode(path, batch, h)]
    theirs = []
    records = MemoryRecords(buf)
    while (batch := records.next_batch()) is not None:
        theirs += [(r.offset, r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers]) for r in batch]
    assert ours == theirs


@needs_c
@pytest.mark.parametrize("partition", GOLDEN_PARTITIONS)
def test_compiled_decoder_agrees_on_the_kafka_written_fixtures(partition: str) -> None:
    n = 0
    for _base, h, batch in golden_batches(partition):
        if h.magic != 2:
            continue
        py = [fields(r) for r in decode("python", batch, h)]
        assert [fields(r) for r in decode("c", batch, h)] == py
        n += len(py)
    assert n or partition.startswith("legacy")


@needs_c
def test_log_append_time_is_every_records_timestamp() -> None:
    payload = encode_record(5, 0, b"k", b"v", []) + encode_record(9, 1, None, None, [])
    batch, h = batch_of(payload, 2, 100, 1000, "LogAppendTime", max_ts=4242)
    assert [(r.offset, r.timestamp) for r in decode("c", batch, h)] == [(100, 4242), (101, 4242)]


@needs_c
@pytest.mark.parametrize("varint", [
    b"\xff" * 9 + b"\x01",  # the largest 10-byte varint that fits 64 bits
    b"\xff" * 9 + b"\x7f",  # a 10-byte varint beyond 64 bits: Python's reader takes it, so must C
    b"\xfe" * 9 + b"\x7e",
    b"\x80" * 9 + b"\x00",  # zero, padded to 10 bytes
])
@pytest.mark.parametrize("field", ["timestamp", "offset"])
def test_long_varint_deltas_give_pythons_ints(varint: bytes, field: str) -> None:
    """Deltas beyond int64, and sums that overflow it, come out as Python's arbitrary-precision ints (or, a
    negative offset delta, the same error)."""
    zero = b"\x00"
    fields_ = (varint, zero) if field == "timestamp" else (zero, varint)
    body = b"\x00" + fields_[0] + fields_[1] + b"\x01\x01\x00"  # null key, null value, no headers
    payload = zigzag_varint(len(body)) + body
    for base in (0, (1 << 63) - 1, -(1 << 63)):
        batch, h = batch_of(payload, 1, base, base)
        c = outcome(lambda: [fields(r) for r in decode("c", batch, h)])  # noqa: B023 (called at once)
        assert c == outcome(lambda: [fields(r) for r in decode("python", batch, h)])  # noqa: B023


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("length", [b"\xff" * 9 + b"\x7f", b"\x81" + b"\x80" * 8 + b"\x02", b"\x01"])
def test_any_negative_length_is_a_null_key_value_or_header_value(path: str, length: bytes) -> None:
    """Python's decoder takes every negative length as null, 10-byte ones beyond int64 included."""
    body = b"\x00\x00\x00" + length + length + b"\x02\x02h" + length
    batch, h = batch_of(zigzag_varint(len(body)) + body, 1)
    (r,) = decode(path, batch, h)
    assert (r.key, r.value, r.headers) == (None, None, [("h", None)])


def corruptions(rnd: random.Random, payload: bytes) -> Iterator[tuple[bytes, int]]:
    """Truncations, bit flips, byte overwrites and insertions of `payload`, with count changes."""
    n = len(payload)
    for _ in range(40):
        kind = rnd.randrange(5)
        p = bytearray(payload)
        if kind == 0:
            p = p[:rnd.randrange(n)]
        elif kind == 1:
            for _ in range(rnd.randrange(1, 4)):
                p[rnd.randrange(n)] ^= 1 << rnd.randrange(8)
        elif kind == 2:
            p[rnd.randrange(n)] = rnd.choice([0x00, 0x01, 0x7F, 0x80, 0xFF, 0xFE])
        elif kind == 3:
            at = rnd.randrange(n + 1)
            p[at:at] = bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 12)))
        else:
            at = rnd.randrange(n)
            p[at:at + 1] = b"\xff" * rnd.randrange(1, 12)
        yield bytes(p), rnd.choice([0, 0, 0, -1, 1, 1 << 20])


@pytest.mark.parametrize("path", PATHS)
def test_fuzzed_payloads_raise_corrupt_batch_error_and_never_crash(path: str) -> None:
    rnd = random.Random(20240917)
    seen = {"ok": 0, "error": 0}
    for trial in range(150):
        recs = [(rnd.randrange(-300, 300), i, rnd.choice([None, b"", b"key\xff"]), rnd.randbytes(rnd.randrange(40)),
                 [(b"h\xc3", None), (b"trace", b"\x00x")][:rnd.randrange(3)]) for i in range(rnd.randrange(1, 6))]
        payload = b"".join(encode_record(*r) for r in recs)
        for bad, count_change in corruptions(rnd, payload):
            count = max(1, len(recs) + count_change)
            batch, h = batch_of(bad, count, base_offset=trial, base_ts=1 << 40)
            got = outcome(lambda: [fields(r) for r in decode(path, batch, h)])  # noqa: B023
            if got[0] == "error":
                assert got[1] is CorruptBatchError
            if BUILT and path == "c":
                assert got == outcome(lambda: [fields(r) for r in decode("python", batch, h)])  # noqa: B023
            seen[got[0]] += 1
    assert seen["ok"] and seen["error"]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("payload, count", [
    (b"", 1),                                   # no records where one is counted
    (b"\x80", 1),                               # truncated Length varint
    (b"\xff" * 11, 1),                          # varint longer than 10 bytes
    (b"\x02\x00", 1),                           # Length says 1, fields need more
    (b"\x0e\x00\x00\x00\x01\x01\x00\x00", 1),   # Length says 7, fields take 6: a byte is left in the record
    (b"\x0c\x00\x00\x00\x01\x01\x00\x00", 1),   # fields take 6, then a byte after the last record
    (b"\x0c\x00\x00\x00\x06ab", 1),             # key length past the end
    (b"\x0c\x00\x00\x00\x01\x01\x01", 1),       # negative header count
    (b"\x0c\x00\x00\x00\x01\x01\x02\x01", 1),   # negative header key length
    (b"\x0c\x00\x00\x00\x01\x01\x00", 2),       # one record fewer than counted
    (b"\x0c\x00\x00\x00\x01\x01\x00", 1 << 30), # a count no payload could hold
    (b"\x01\x00\x00\x00\x01\x01\x00", 1),       # negative Length
])
def test_malformed_payloads_raise_corrupt_batch_error(path: str, payload: bytes, count: int) -> None:
    batch, h = batch_of(payload, count)
    with pytest.raises(CorruptBatchError) as e:
        decode(path, batch, h)
    assert e.value.position == 4096
    assert "record batch at position 4096" in str(e.value)


def test_a_well_formed_minimal_record_decodes() -> None:
    """The payload the malformed cases above are variations of."""
    batch, h = batch_of(b"\x0c\x00\x00\x00\x01\x01\x00", 1, base_offset=7, base_ts=5)
    (r,) = decode_records(batch, h)
    assert fields(r) == (Record, 7, 5, "CreateTime", None, None, [])


# ---- rendering -----------------------------------------------------------------------------------

PREFIX = jsonl.line_prefix("orders", 3)


@needs_c
@settings(max_examples=500, deadline=None)
@given(st.lists(records(), max_size=6))
def test_compiled_renderer_gives_the_python_bytes(recs: list[Record]) -> None:
    assert render("c", PREFIX, recs) == render("python", PREFIX, recs)
    assert native_views.render_jsonl(PREFIX, recs, jsonl.render_line, lines=True) == [
        jsonl.render_line(PREFIX, r).encode("utf-8") for r in recs]


@needs_c
@settings(max_examples=300, deadline=None)
@given(st.lists(records(any_str), max_size=4), any_str)
def test_compiled_renderer_fails_where_python_fails(recs: list[Record], topic: str) -> None:
    """Lone surrogates (in header keys, the prefix) cannot be encoded: both raise UnicodeEncodeError."""
    prefix = jsonl.line_prefix(topic, 0)
    assert outcome(lambda: render("c", prefix, recs)) == outcome(lambda: render("python", prefix, recs))


@pytest.mark.parametrize("path", PATHS)
def test_every_byte_renders_as_json_would(path: str) -> None:
    """Every single byte and 2-byte string: the line parses back to what SPEC section 3 says."""
    values = [bytes([a]) for a in range(256)] + [bytes([a, b]) for a in range(0xC0, 0x100, 3) for b in range(256)]
    recs = [Record(i, i, "CreateTime", v, v, [("k", v)]) for i, v in enumerate(values)]
    out = render(path, PREFIX, recs)
    assert out == render("python", PREFIX, recs)
    for line, v in zip(out.split(b"\n")[:-1], values, strict=True):
        try:
            want = v.decode("utf-8")
        except UnicodeDecodeError:
            want = {"base64": base64.b64encode(v).decode("ascii")}
        obj = json.loads(line)
        assert obj["key"] == obj["value"] == obj["headers"][0][1] == want


@needs_c
def test_records_the_fast_path_leaves_to_python_render_identically() -> None:
    """Control records, subclasses, ints beyond int64, bools, unset slots, tuples, bytearrays."""

    class Sub(Record):
        __slots__ = ()

    base = Record(1, 2, "CreateTime", b"k", b"v", [("h", b"x")])
    unset = object.__new__(Record)
    odd = [
        ControlRecord(base, "COMMIT", 42, 7),
        ControlRecord(base, "ABORT", 42, None),
        Sub(1, 2, "CreateTime", b"k", None, []),
        Record(1 << 70, -(1 << 64), "CreateTime", b"k", b"v", []),
        Record(True, False, "CreateTime", b"k", b"v", []),
        Record(1, 2, "Create\"Time", bytearray(b"k"), b"v", ()),
        Record(1, 2, "CreateTime", b"k", b"v", [["h", b"x"]]),
        Record(1, 2, "CreateTime", b"k", b"v", [("h", bytearray(b"\xff"))]),
        Record(1, 2, "CreateTime", b"k", b"v", None),
    ]
    for r in odd:
        assert render("c", PREFIX, [base, r, base]) == render("python", PREFIX, [base, r, base]), r
    assert outcome(lambda: render("c", PREFIX, [base, unset])) == outcome(lambda: render("python", PREFIX, [unset]))
    assert outcome(lambda: render("c", PREFIX, [Record(1, 2, 3, b"", b"", [])])) == ("error", TypeError)


@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=needs_c)])
def test_render_lines_and_render_records_keep_render_lines_output(compiled: bool, monkeypatch) -> None:
    monkeypatch.setattr(jsonl, "_render_jsonl", native_views.render_jsonl if compiled else None)
    rnd = random.Random(5)
    recs = [Record(i, 1000 + i, "CreateTime", rnd.choice([None, b"k", b"\xff"]), rnd.randbytes(rnd.randrange(20)),
                    [("a", b"b")] * rnd.randrange(3)) for i in range(3000)]
    recs[1234] = ControlRecord(recs[1234], "COMMIT", 1, 0)
    want = [jsonl.render_record("orders", 3, r) for r in recs]
    assert jsonl.render_lines(PREFIX, recs) == b"".join(want)
    assert jsonl.render_lines(PREFIX, iter(recs)) == b"".join(want)
    assert jsonl.render_lines(PREFIX, []) == b""
    assert list(jsonl.render_records("orders", 3, iter(recs))) == want
    assert list(jsonl.render_records("orders", 3, recs[:16])) == want[:16]


@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=needs_c)])
def test_render_records_yields_the_lines_before_an_error(compiled: bool, monkeypatch) -> None:
    """An error in the records, or in rendering one, comes after the lines of the records before it."""
    monkeypatch.setattr(jsonl, "_render_jsonl", native_views.render_jsonl if compiled else None)
    recs = [Record(i, 0, "CreateTime", None, b"v", []) for i in range(100)]

    def failing() -> Iterator[Record]:
        yield from recs[:50]
        raise CorruptBatchError("bad batch", 77)

    got = []
    with pytest.raises(CorruptBatchError):
        got.extend(jsonl.render_records("t", 0, failing()))
    assert len(got) == 50
    unencodable = [*recs[:40], Record(40, 0, "CreateTime", None, None, [("\ud800", None)]), *recs[41:]]
    got = []
    with pytest.raises(UnicodeEncodeError):
        got.extend(jsonl.render_records("t", 0, unencodable))
    assert len(got) == 40


# ---- speed (KFS_BENCH=1) ---------------------------------------------------------------------------

def _best(fn: Callable[[], int], reps: int) -> float:
    """Best items/s of fn() over reps runs, in CPU time (the machine may be shared)."""
    best = float("inf")
    for _ in range(reps):
        start = time.process_time()
        n = fn()
        best = min(best, time.process_time() - start)
    return n / best


def test_the_build_lists_every_c_file_and_header_of_the_extension() -> None:
    """pyproject.toml's ext-module names every C file of kfs/_native/csrc/ (its layers' directories
    included) in `sources` and every header in `depends` (which puts them in the sdist): a C file left out
    links into a module that fails to import (an undefined symbol), and kfs would run on the Python loops
    without a word."""
    tomllib = pytest.importorskip("tomllib")
    repo = Path(__file__).resolve().parent.parent
    (ext,) = tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["setuptools"]["ext-modules"]
    csrc = repo / "kfs" / "_native" / "csrc"
    assert ext["name"] == "kfs._native._speedups"
    assert sorted(ext["sources"]) == sorted(str(p.relative_to(repo)) for p in csrc.rglob("*.c"))
    assert sorted(ext["depends"]) == sorted(str(p.relative_to(repo)) for p in csrc.rglob("*.h"))


@pytest.mark.skipif(native_record.crc32c is None or native_record.crc32c(b"") is None,
                    reason="no compiled CRC-32C here")
@settings(max_examples=400, deadline=None)
@given(data=st.binary(max_size=6000), start=st.integers(0, 15), fold=st.booleans(),
       length=st.sampled_from([None, 63, 64, 65, 127, 128, 255, 256, 257, 319, 320, 321, 767, 768, 769, 1535,
                               1536, 1537, 2304, 3 * 768 + 8, 4096, 4096 + 63]))
def test_the_compiled_crc32c_is_crc32c(data: bytes, start: int, fold: bool, length: int | None) -> None:
    """Folded by carry-less multiplication, or three lanes at a time and joined (fold False; a machine
    without PCLMULQDQ), kfs/_native/csrc/record/crc32c.c gives crc32c.crc32c's value, from any alignment
    and across the edges: folding from 256 bytes, 64 a round; the lanes 768 bytes a round."""
    import crc32c

    assert native_record.crc32c is not None
    if length is not None:
        data = (data * (length // max(1, len(data)) + 2))[:length] if data else bytes(length)
    view = memoryview(b"\x5a" * start + data)[start:]
    assert native_record.crc32c(view, fold) == crc32c.crc32c(data)


@pytest.mark.skipif(native_record.crc32c is None or native_record.crc32c(b"") is None,
                    reason="no compiled CRC-32C here")
def test_the_compiled_crc32c_of_every_length_to_a_few_rounds() -> None:
    """Every length from 0 to 1,600 bytes, both ways, against crc32c.crc32c: each tail length after
    each number of folding and lane rounds."""
    import crc32c

    assert native_record.crc32c is not None
    data = bytes(random.Random(26).randrange(256) for _ in range(1600))
    for n in range(len(data) + 1):
        want = crc32c.crc32c(data[:n])
        assert native_record.crc32c(data[:n], True) == want == native_record.crc32c(data[:n], False), n
