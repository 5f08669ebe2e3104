"""Batches written by an independent implementation (kafka-python's builders) decode to exactly what went in."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kfs.record import (
    complete_legacy_header,
    crc_is_valid,
    decode_records,
    parse_batch_header,
    peek_size,
)

CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
BASE_TIMESTAMP = 1526384718288

# Compressible text as well as random bytes: kafka-python stores a batch uncompressed when its codec
# does not make it smaller, and the codecs must be exercised.
compressible = st.text(alphabet="ab{}: ", max_size=300).map(str.encode)
maybe_bytes = st.none() | st.binary(max_size=200) | compressible
big_or_small = maybe_bytes | st.binary(min_size=8000, max_size=20000) | compressible.map(lambda b: b * 100)
header = st.tuples(st.text(max_size=20), maybe_bytes)
v2_record = st.tuples(
    st.integers(-10**6, 10**6),  # timestamp delta from the base timestamp, out of order allowed
    maybe_bytes, big_or_small, st.lists(header, max_size=4),
)
legacy_record = st.tuples(st.integers(0, 10**6), maybe_bytes, maybe_bytes)


def _read(buf: bytes):
    """Header (completed) and records of the single batch in buf, checking size and CRC on the way."""
    size, magic = peek_size(buf, 0)
    assert size == len(buf)
    h = parse_batch_header(buf[:61], 0, 1234)
    assert h.position == 1234 and h.size == size and h.magic == magic
    complete_legacy_header(h, memoryview(buf))
    assert crc_is_valid(buf, h)
    return h, decode_records(memoryview(buf), h)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    codec=st.sampled_from(sorted(CODECS)),
    base_offset=st.integers(0, 2**62),
    gaps=st.booleans(),
    records=st.lists(v2_record, min_size=1, max_size=30),
    producer=st.sampled_from([(-1, -1, -1, False), (4000, 3, 17, True), (5000, 0, 0, False)]),
)
def test_v2_batches_decode_to_what_was_appended(codec, base_offset, gaps, records, producer) -> None:
    pid, epoch, seq, transactional = producer
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=transactional,
                                        producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                        batch_size=1 << 30)
    expected = []
    for i, (ts_delta, key, value, headers) in enumerate(records):
        delta = i * 3 if gaps else i  # compaction leaves gaps between offset deltas
        ts = BASE_TIMESTAMP + ts_delta
        builder.append(delta, ts, key, value, headers)
        expected.append((base_offset + delta, ts, "CreateTime", key, value, headers))
    buf = bytearray(builder.build())
    struct.pack_into(">q", buf, 0, base_offset)  # kafka-python writes 0; the offset is outside the CRC
    h, got = _read(bytes(buf))
    assert (h.base_offset, h.last_offset) == (base_offset, expected[-1][0])
    # kafka-python writes a batch uncompressed when compressing would make it bigger
    assert h.compression in (CODECS[codec], "none") and h.record_count == len(records)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.is_transactional) == producer
    assert not h.is_control and h.delete_horizon_ms is None
    assert h.max_timestamp == max(e[1] for e in expected)
    assert [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value, r.headers) for r in got] == expected


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    magic=st.sampled_from([0, 1]),
    # lz4 is left out: kafka-python needs xxhash for its v0 lz4 (the golden legacy partition has it)
    codec=st.sampled_from([0, 1, 2]),
    wrapper_offset=st.integers(0, 2**62),
    records=st.lists(legacy_record, min_size=1, max_size=20),
)
def test_legacy_messages_decode_to_what_was_appended(magic, codec, wrapper_offset, records) -> None:
    if codec == 0:
        records = records[:1]  # an uncompressed legacy "batch" is one message
    n = len(records)
    first = max(wrapper_offset - n + 1, 0)
    wrapper_offset = first + n - 1
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 30)
    expected = []
    for i, (ts, key, value) in enumerate(records):
        # v1 wrappers hold relative inner offsets; v0 absolute ones, as the broker assigned them
        inner = i if magic == 1 and codec else first + i
        builder.append(inner, ts, key, value)
        expected.append((first + i, ts if magic else -1, "CreateTime" if magic else "NoTimestampType",
                         key, value, []))
    buf = bytearray(builder.build())
    struct.pack_into(">q", buf, 0, wrapper_offset)  # the broker sets the wrapper's offset
    h, got = _read(bytes(buf))
    assert (h.base_offset, h.last_offset, h.record_count) == (first, wrapper_offset, n)
    assert [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value, r.headers) for r in got] == expected


def _set_attribute_bits(buf: bytearray, bits: int) -> bytes:
    """Set v2 attribute bits and fix the CRC, as the broker does (DefaultRecordBatch.setMaxTimestamp)."""
    import crc32c

    attrs = struct.unpack_from(">h", buf, 21)[0] | bits
    struct.pack_into(">h", buf, 21, attrs)
    struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21:])))
    return bytes(buf)


def test_log_append_time_batches_give_every_record_the_batch_max_timestamp() -> None:
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    for i in range(5):
        builder.append(i, BASE_TIMESTAMP - i, b"k", b"v", [])
    buf = bytearray(builder.build())
    struct.pack_into(">q", buf, 35, BASE_TIMESTAMP + 999)  # the broker's append time
    h, got = _read(_set_attribute_bits(buf, 0x08))
    assert h.timestamp_type == "LogAppendTime"
    assert [(r.timestamp, r.timestamp_type) for r in got] == [(BASE_TIMESTAMP + 999, "LogAppendTime")] * 5


def test_delete_horizon_is_the_base_timestamp_when_bit_6_is_set() -> None:
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    builder.append(0, BASE_TIMESTAMP, b"k", None, [])
    h, got = _read(_set_attribute_bits(bytearray(builder.build()), 0x40))
    assert h.delete_horizon_ms == BASE_TIMESTAMP
    assert got[0].timestamp == BASE_TIMESTAMP and got[0].value is None


def test_legacy_v1_wrapper_with_log_append_time_gives_inner_records_its_timestamp() -> None:
    import zlib

    builder = LegacyRecordBatchBuilder(magic=1, compression_type=1, batch_size=1 << 20)
    for i in range(3):
        builder.append(i, BASE_TIMESTAMP + i, b"k%d" % i, b"v")
    buf = bytearray(builder.build())
    struct.pack_into(">q", buf, 0, 102)
    struct.pack_into(">bq", buf, 17, 0x08 | 1, BASE_TIMESTAMP + 500)  # attributes: LogAppendTime | gzip
    struct.pack_into(">I", buf, 12, zlib.crc32(bytes(buf[16:])))
    h, got = _read(bytes(buf))
    assert (h.base_offset, h.last_offset, h.max_timestamp) == (100, 102, BASE_TIMESTAMP + 500)
    assert [(r.offset, r.timestamp, r.timestamp_type) for r in got] == [
        (100 + i, BASE_TIMESTAMP + 500, "LogAppendTime") for i in range(3)]


@pytest.mark.parametrize("codec", sorted(CODECS))
@pytest.mark.parametrize("magic", [0, 1, 2])
def test_every_codec_round_trips_with_compressible_data(codec: int, magic: int) -> None:
    if magic < 2 and codec in (3, 4):
        pytest.skip("kafka-python writes legacy lz4 only with xxhash, and zstd never existed for v0/v1")
    records = [(b"key-%d" % i, b'{"n": %d, "pad": "%s"}' % (i, b"x" * (i * 37 % 500))) for i in range(50)]
    if magic == 2:
        builder = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 30)
        for i, (k, v) in enumerate(records):
            builder.append(i, BASE_TIMESTAMP + i, k, v, [("h", v[:3])])
    else:
        builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 30)
        for i, (k, v) in enumerate(records[: 1 if codec == 0 else None]):
            builder.append(i, BASE_TIMESTAMP + i, k, v)
    buf = bytearray(builder.build())
    struct.pack_into(">q", buf, 0, 0 if magic == 2 or codec == 0 else 49)
    h, got = _read(bytes(buf))
    assert h.compression == CODECS[codec]
    assert [(r.key, r.value) for r in got] == records[:len(got)]
    assert len(got) == (1 if codec == 0 and magic < 2 else 50)


def test_long_varints_in_every_field_decode() -> None:
    # 3+ byte varints everywhere: offset deltas past 2^13, 100 headers, a 20 kB key, a far timestamp.
    headers = [(f"h{i}" * 40, None if i % 7 == 0 else b"v" * i) for i in range(100)]
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 30)
    builder.append(0, BASE_TIMESTAMP, b"k" * 20000, b"", headers)
    builder.append(100_000, BASE_TIMESTAMP + 10**12, None, None, [])
    builder.append(2**31 - 1, BASE_TIMESTAMP - 10**12, b"", b"x" * 70000, [("", b"")])
    h, got = _read(bytes(builder.build()))
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in got] == [
        (0, BASE_TIMESTAMP, b"k" * 20000, b"", headers),
        (100_000, BASE_TIMESTAMP + 10**12, None, None, []),
        (2**31 - 1, BASE_TIMESTAMP - 10**12, b"", b"x" * 70000, [("", b"")]),
    ]
    assert h.last_offset == 2**31 - 1
