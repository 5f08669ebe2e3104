"""The compiled dump renderer (`render_v2_dump` in kfs/_native/csrc/cli/render_v2_dump.c, used by
kfs/cli/dump_log.py) prints the batch line and record lines the Python path prints (`_batch_line`, and
`_v2_data_lines` of the decoded records: its oracle), and finds the same non-consecutive offsets:
hypothesis batches with every kind of key, value and header key (null, empty, control characters, bytes
that are not UTF-8, big values), odd timestamps and sequences; every short byte sequence replaced as
bytes.decode("utf-8", "replace") replaces it; malformed sections left to the decoder; and `kfs dump` of
every Kafka-written segment, compiled and pure Python."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from itertools import product

import crc32c
import pytest
from builders import golden_segment_files, v2_batches
from conftest import GOLDEN_PARTITIONS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kfs._native import cli as native_cli
from kfs.cli.dump_log import _batch_line, _note_gaps, _note_packed_gaps, _v2_data_lines
from kfs.record import BatchHeader, default_batch, parse_batch_header

pytestmark = pytest.mark.skipif(native_cli.render_v2_dump is None, reason="extension not built")

INT64_MAX = 2**63 - 1


# ---- a v2 batch with any bytes, header keys included (kafka-python's builder takes str keys) ----------

def _varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _nullable(b: bytes | None) -> bytes:
    return _varint(-1) if b is None else _varint(len(b)) + b


def raw_v2_batch(base_offset: int, base_timestamp: int, base_sequence: int, log_append_time: int | None,
                 records: list[tuple[int, int, bytes | None, bytes | None, list[tuple[bytes, bytes | None]]]],
                 flags: int = 0, producer: tuple[int, int, int] = (-1, -1, -1)) -> bytes:
    """An uncompressed v2 batch as DefaultRecordBatch lays it out; records are (offset delta, timestamp
    delta, key, value, [(header key bytes, header value)]); flags: attribute bits (0x10 transactional,
    0x40 delete horizon); producer: (producer id, producer epoch, partition leader epoch)."""
    section = bytearray()
    for offset_delta, ts_delta, key, value, headers in records:
        body = (b"\x00" + _varint(ts_delta) + _varint(offset_delta) + _nullable(key) + _nullable(value)
                + _varint(len(headers)) + b"".join(_varint(len(k)) + k + _nullable(v) for k, v in headers))
        section += _varint(len(body)) + body
    attributes = flags | (0x08 if log_append_time is not None else 0)
    max_timestamp = log_append_time if log_append_time is not None else base_timestamp + max(r[1] for r in records)
    producer_id, producer_epoch, leader_epoch = producer
    after_crc = struct.pack(">hiqqqhii", attributes, records[-1][0], base_timestamp, max_timestamp, producer_id,
                            producer_epoch, base_sequence, len(records)) + bytes(section)
    return struct.pack(">qiibI", base_offset, 9 + len(after_crc), leader_epoch, 2,
                       crc32c.crc32c(after_crc)) + after_crc


# Every kind of byte: ASCII, control characters, UTF-8 of each length, and what is not UTF-8 (a lone
# continuation byte, truncated sequences, overlong forms, surrogates, past U+10FFFF, F5-FF).
_PIECES = [b"a", b"xyz12345", b" ", b'"', b"\\", b"\n", b"\r", b"\t", b"\x00", b"\x1f", b"\x7f", b",", b"]",
           "é".encode(), "€".encode(), "😀".encode(), b"\x80", b"\xbf", b"\xc3", b"\xc0\xaf", b"\xe2\x82",
           b"\xed\xa0\x80", b"\xe0\x80\x80", b"\xf0\x9f\x98", b"\xf4\x90\x80\x80", b"\xf5", b"\xff"]
_bytes = st.lists(st.sampled_from(_PIECES), max_size=16).map(b"".join) | st.binary(max_size=40)
_data = st.none() | _bytes | st.binary(min_size=2000, max_size=9000)


@st.composite
def raw_batches(draw):  # type: ignore[no-untyped-def]
    n = draw(st.integers(1, 10))
    records = []
    delta = 0
    for _ in range(n):
        delta += draw(st.integers(0, 3))  # gaps, as compaction leaves them
        headers = draw(st.lists(st.tuples(_bytes, st.none() | _bytes), max_size=3))
        records.append((delta, draw(st.integers(-2**40, 2**40)), draw(_data), draw(_data), headers))
        delta += 1
    base_offset = draw(st.integers(0, 2**40) | st.integers(INT64_MAX - 2**20, INT64_MAX - 100))
    base_timestamp = draw(st.sampled_from([-1, 0, 1_700_000_000_000]) | st.integers(-2**62, 2**62))
    base_sequence = draw(st.sampled_from([-1, -7, 0]) | st.integers(2**31 - 40, 2**31 - 1) | st.integers(0, 2**31 - 1))
    log_append_time = draw(st.none() | st.integers(-2**45, 2**45))
    flags = draw(st.sampled_from([0, 0x10, 0x40, 0x50]))
    producer = draw(st.tuples(st.integers(-2**63, 2**63 - 1), st.integers(-2**15, 2**15 - 1),
                              st.integers(-2**31, 2**31 - 1)))
    return raw_v2_batch(base_offset, base_timestamp, base_sequence, log_append_time, records, flags, producer)


def oracle(batch: bytes, previous: int, position: int | None = 0) -> tuple[str, int, dict[int, int]]:
    """What dump_log's Python path prints and notes for the batch at `position` (None: its record lines
    only) after a record at `previous`."""
    header = parse_batch_header(batch, 0, 0)
    records = default_batch.decode_records(batch, header)
    text, _ = _v2_data_lines(header, records, previous + 1 if previous != -1 else -1)
    if position is not None:
        text = _batch_line(header, position, True) + text
    gaps: dict[int, int] = {}
    _note_gaps(gaps, previous, records)
    return text, records[-1].offset, gaps


def compiled(header: BatchHeader, payload: bytes, previous: int, batch: bytes | None = None, position: int = 0
             ) -> tuple[str, int, dict[int, int]] | None:
    """render_v2_dump's lines (with `batch`: its batch line first) and gaps."""
    assert native_cli.render_v2_dump is not None
    out = native_cli.render_v2_dump(payload, header.record_count, header.base_offset, header.first_timestamp,
                                  header.timestamp_type, header.max_timestamp, header.base_sequence, previous,
                                  batch, position, header.compression)
    if out is None:
        return None
    text, last, packed = out
    gaps: dict[int, int] = {}
    _note_packed_gaps(gaps, packed)
    return text, last, gaps


def _previous(batch: bytes, choice: int) -> int:
    base = struct.unpack_from(">q", batch)[0]
    return [-1, base - 1, base - 5, base + 2, 0][choice]


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(batch=raw_batches(), choice=st.integers(0, 4), position=st.integers(0, 2**40))
def test_compiled_lines_are_the_python_lines(batch: bytes, choice: int, position: int) -> None:
    header = parse_batch_header(batch, 0, 0)
    previous = _previous(batch, choice)
    payload = default_batch.records_payload(batch, header)
    got = compiled(header, payload, previous, batch, position)
    assert got is not None  # a well-formed batch within int64 is never left to the decoder
    assert got == oracle(batch, previous, position)
    assert compiled(header, payload, previous) == oracle(batch, previous, None)  # the record lines alone


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=v2_batches(), choice=st.integers(0, 4))
def test_compiled_lines_of_kafka_python_batches(batch: bytes, choice: int) -> None:
    """kafka-python's writer, every codec, LogAppendTime."""
    header = parse_batch_header(batch, 0, 0)
    previous = _previous(batch, choice)
    got = compiled(header, default_batch.records_payload(batch, header), previous, batch, 4096)
    assert got is not None
    assert got == oracle(batch, previous, 4096)


def test_every_short_sequence_is_replaced_as_python_replaces_it() -> None:
    """Keys and values of every 1- to 3-byte sequence of bytes at the edges of UTF-8's ranges, and
    4-byte ones from each 4-byte lead: U+FFFD per maximal invalid subpart, as CPython's decoder."""
    edges = [0x00, 0x0A, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1,
             0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF]
    values = [bytes(t) for n in (1, 2, 3) for t in product(edges, repeat=n)]
    values += [bytes(t) for t in product([0xF0, 0xF1, 0xF4], edges, edges, edges)]
    for start in range(0, len(values), 5000):
        chunk = values[start:start + 5000]
        records = [(i, 0, v, v[::-1], [(v, None)]) for i, v in enumerate(chunk)]
        batch = raw_v2_batch(0, 0, -1, None, records)
        header = parse_batch_header(batch, 0, 0)
        got = compiled(header, default_batch.records_payload(batch, header), -1)
        assert got is not None and got == oracle(batch, -1, None)


def test_a_malformed_section_is_left_to_the_decoder() -> None:
    batch = raw_v2_batch(5, 10, 3, None, [(0, 1, b"k", b"v" * 30, [(b"h", b"x"), (b"\xff", None)]),
                                          (2, 2, None, b"w", [])])
    header = parse_batch_header(batch, 0, 0)
    payload = default_batch.records_payload(batch, header)
    assert compiled(header, payload, -1, batch, 7) == oracle(batch, -1, 7)
    for cut in range(len(payload)):
        assert compiled(header, payload[:cut], -1, batch, 7) is None
    assert compiled(header, payload + b"\x00", -1) is None
    assert compiled(header, payload, -1, batch[:60], 7) is None  # no whole header: no batch line
    # records within int64 but a last offset (base offset + last offset delta) past it: Python prints it
    far = bytearray(raw_v2_batch(INT64_MAX - 1, 10, 3, None, [(0, 1, b"k", b"v", []), (1, 2, b"k", b"v", [])]))
    assert compiled(parse_batch_header(bytes(far), 0, 0), bytes(far[61:]), -1, bytes(far), 0) is not None
    struct.pack_into(">i", far, 23, 5)
    struct.pack_into(">I", far, 17, crc32c.crc32c(bytes(far[21:])))
    h = parse_batch_header(bytes(far), 0, 0)
    assert h.last_offset > INT64_MAX
    assert compiled(h, bytes(far[61:]), -1, bytes(far), 0) is None
    # offsets out of order: the decoder raises CorruptBatchError, the renderer leaves it to it
    backwards = raw_v2_batch(5, 10, 3, None, [(2, 1, b"k", b"v", []), (1, 2, b"k", b"v", [])])
    h = parse_batch_header(backwards, 0, 0)
    assert compiled(h, default_batch.records_payload(backwards, h), -1) is None


def _dump(files: list[str], pure: bool) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("KFS_PURE_PYTHON", None)
    if pure:
        env["KFS_PURE_PYTHON"] = "1"
    return subprocess.run([sys.executable, "-m", "kfs.cli.main", "dump", "--deep-iteration", "--print-data-log",
                           *files], env=env, capture_output=True, check=False)


def test_kfs_dump_of_every_kafka_written_segment_is_the_pure_python_dump() -> None:
    """Every magic, codec, control batch and transaction Kafka wrote: the same stdout, stderr and status."""
    files = [str(f) for p in GOLDEN_PARTITIONS for f in golden_segment_files(p)]
    assert len(files) > 20
    fast, pure = _dump(files, pure=False), _dump(files, pure=True)
    assert fast.returncode == pure.returncode == 0
    assert fast.stdout == pure.stdout and fast.stderr == pure.stderr
    assert fast.stdout.count(b"\n| offset: ") > 1000
