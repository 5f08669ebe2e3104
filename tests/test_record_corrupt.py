"""Bad input: truncated, bit-flipped, garbage and empty batches fail with CorruptBatchError, never anything else.

The batches damaged here are the Kafka-written fixture batches: every magic, codec and control type.
"""

from __future__ import annotations

import contextlib
import struct
from pathlib import Path

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kfs.record import (
    HEADER_PROBE_SIZE,
    BatchHeader,
    CorruptBatchError,
    Record,
    complete_legacy_header,
    crc_is_valid,
    decode_records,
    parse_batch_header,
    parse_control_record,
    peek_size,
)

LOGDIRS = Path(__file__).parent / "fixtures" / "kafka-written" / "logdirs"


def _fixture_batches() -> list[bytes]:
    """Every batch of every fixture segment, as its own bytes."""
    out = []
    for log in sorted(LOGDIRS.glob("*/*/*.log")):
        data = log.read_bytes()
        pos = 0
        while pos < len(data):
            size, _ = peek_size(data, pos)
            out.append(data[pos:pos + size])
            pos += size
    return out


BATCHES = _fixture_batches()
# One of each kind, for the exhaustive tests: (magic, compression, control)
KINDS: dict[tuple, bytes] = {}
for _b in BATCHES:
    _h = parse_batch_header(_b, 0, 0)
    KINDS.setdefault((_h.magic, _h.compression, _h.is_control), _b)
SAMPLES = sorted(KINDS.items())


def _consume(buf: bytes, position: int = 0) -> list:
    """Everything a reader does with a segment's bytes; bad input may only raise CorruptBatchError."""
    out = []
    pos = 0
    while pos < len(buf):
        size, _ = peek_size(buf, pos)
        if pos + size > len(buf):
            break  # a partial batch at the end: a reader stops there, as FileLogInputStream does
        h = parse_batch_header(buf[pos:pos + HEADER_PROBE_SIZE], 0, position + pos)
        batch = memoryview(buf)[pos:pos + size]
        complete_legacy_header(h, batch)
        crc_is_valid(batch, h)
        for r in decode_records(batch, h):
            if h.is_control:
                parse_control_record(r)
            out.append(r)
        pos += size
    return out


def test_the_fixtures_hold_every_kind_of_batch() -> None:
    kinds = set(KINDS)
    assert {(2, c, False) for c in ("none", "gzip", "snappy", "lz4", "zstd")} <= kinds
    assert {(0, "gzip", False), (0, "lz4", False), (0, "snappy", False), (1, "gzip", False)} <= kinds
    assert (2, "none", True) in kinds


@pytest.mark.parametrize(("kind", "batch"), SAMPLES, ids=[str(k) for k, _ in SAMPLES])
def test_every_truncation_is_corrupt(kind: tuple, batch: bytes) -> None:
    header = parse_batch_header(batch, 0, 4096)
    complete_legacy_header(header, batch)
    for cut in range(len(batch)):
        short = batch[:cut]
        assert not crc_is_valid(short, header)
        with pytest.raises(CorruptBatchError) as e:
            decode_records(short, header)
        assert e.value.position == 4096
        if cut < 17 or (cut < min(HEADER_PROBE_SIZE, len(batch)) and kind[0] == 2):
            with pytest.raises(CorruptBatchError):
                parse_batch_header(short, 0, 4096)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_flipped_byte_fails_the_crc_and_never_raises_anything_but_corrupt(data: st.DataObject) -> None:
    batch = bytearray(data.draw(st.sampled_from(BATCHES)))
    at = data.draw(st.integers(0, len(batch) - 1))
    batch[at] ^= data.draw(st.integers(1, 255))
    flipped = bytes(batch)
    with contextlib.suppress(CorruptBatchError):
        _consume(flipped)
    magic = batch[16]
    crc_start = 17 if magic == 2 else 12  # v2: CRC field then attributes..end; legacy: CRC field then magic..end
    if at >= crc_start and at != 16:
        try:
            size, _ = peek_size(flipped, 0)
            h = parse_batch_header(flipped, 0, 0)
        except CorruptBatchError:
            return
        if size == len(flipped):
            assert not crc_is_valid(flipped, h)


@settings(max_examples=400, deadline=None)
@given(junk=st.binary(max_size=2000), magic=st.sampled_from([0, 1, 2]))
def test_garbage_never_raises_anything_but_corrupt(junk: bytes, magic: int) -> None:
    # Give the garbage a plausible length field and magic so that it reaches the record decoders.
    buf = bytearray(junk.ljust(17, b"\0"))
    struct.pack_into(">ib", buf, 8, len(buf) - 12, 0)
    buf[16] = magic
    for candidate in (junk, bytes(buf)):
        with contextlib.suppress(CorruptBatchError):
            _consume(candidate)


def test_empty_input_is_corrupt() -> None:
    with pytest.raises(CorruptBatchError):
        peek_size(b"", 0)
    with pytest.raises(CorruptBatchError):
        parse_batch_header(b"", 0, 0)
    for _kind, batch in SAMPLES:
        header = parse_batch_header(batch, 0, 0)
        assert not crc_is_valid(b"", header)
        with pytest.raises(CorruptBatchError):
            decode_records(b"", header)
        if header.record_count < 0:  # a legacy compressed wrapper
            with pytest.raises(CorruptBatchError):
                complete_legacy_header(header, b"")


@pytest.mark.parametrize(("length", "magic"), [(-1, 2), (48, 2), (13, 0), (21, 1), (100, 3), (100, 0x80)])
def test_impossible_lengths_and_unknown_magics_are_corrupt(length: int, magic: int) -> None:
    buf = struct.pack(">qiiB", 0, length, 0, magic) + b"\0" * 64
    with pytest.raises(CorruptBatchError):
        peek_size(buf, 0)
    with pytest.raises(CorruptBatchError):
        parse_batch_header(buf, 0, 7)


def _with_record_count(batch: bytes, count: int) -> bytes:
    b = bytearray(batch)
    struct.pack_into(">i", b, 57, count)
    struct.pack_into(">I", b, 17, crc32c.crc32c(bytes(b[21:])))
    return bytes(b)


@pytest.mark.parametrize("codec", ["none", "gzip", "zstd"])
@pytest.mark.parametrize("delta", [-1, 1, 2**31 - 1])
def test_a_record_count_that_disagrees_with_the_records_is_corrupt(codec: str, delta: int) -> None:
    batch = KINDS[(2, codec, False)]
    h = parse_batch_header(batch, 0, 0)
    bad = _with_record_count(batch, h.record_count + delta if delta != 2**31 - 1 else delta)
    hb = parse_batch_header(bad, 0, 0)
    assert crc_is_valid(bad, hb)  # the CRC was fixed: the count alone is wrong
    with pytest.raises(CorruptBatchError):
        decode_records(bad, hb)


def test_a_negative_record_count_is_corrupt() -> None:
    bad = _with_record_count(KINDS[(2, "none", False)], -5)
    with pytest.raises(CorruptBatchError):
        decode_records(bad, parse_batch_header(bad, 0, 0))


def test_control_records_parse_known_and_unknown_types_and_reject_bad_keys() -> None:
    def rec(key, value):
        return Record(9, 0, "CreateTime", key, value, [])

    assert parse_control_record(rec(b"\0\0\0\1", b"\0\0\0\0\0\7")) == ("COMMIT", 7)
    assert parse_control_record(rec(b"\0\0\0\0", b"\0\0\0\0\0\3")) == ("ABORT", 3)
    assert parse_control_record(rec(b"\0\0\0\2", b"whatever")) == ("LEADER_CHANGE", None)
    assert parse_control_record(rec(b"\0\0\0\x63", None)) == ("UNKNOWN(99)", None)
    for key, value in ((None, None), (b"\0\0", None), (b"\0\0\0\1", None), (b"\0\0\0\1", b"\0\0")):
        with pytest.raises(CorruptBatchError):
            parse_control_record(rec(key, value))


def test_a_header_probe_is_enough_for_parse_batch_header() -> None:
    for batch in BATCHES:
        full = parse_batch_header(batch, 0, 0)
        probe = parse_batch_header(batch[:min(HEADER_PROBE_SIZE, len(batch))], 0, 0)
        assert isinstance(probe, BatchHeader)
        assert {s: getattr(probe, s) for s in BatchHeader.__slots__} == \
            {s: getattr(full, s) for s in BatchHeader.__slots__}
