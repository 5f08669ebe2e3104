"""The length of a batch's JSON lines, counted without rendering (`count_jsonl` in _speedups.c),
is the length of what the renderer writes: random records (hypothesis, kafka-python's builder) with
every kind of byte a key, value or header may hold, compared with `render_jsonl` as the oracle."""

from __future__ import annotations

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from kfs.record import default_batch, parse_batch_header, speedups
from kfs.views.jsonl import line_prefix, render_line_list

pytestmark = pytest.mark.skipif(speedups.count_jsonl is None, reason="extension not built")

# Bytes that exercise every branch: plain ASCII, escapes, control characters, UTF-8 of each
# length, and sequences that are not UTF-8 (base64).
_PIECES = [b"a", b"xyz12345", b'"', b"\\", b"\n", b"\t", b"\x00", b"\x1f", b"\x7f", "é".encode(),
           "€".encode(), "😀".encode(), b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xe0\x80\x80", b"\xf4\x90\x80\x80"]
data = st.none() | st.lists(st.sampled_from(_PIECES), max_size=12).map(b"".join) | st.binary(max_size=40)
key_text = st.lists(st.sampled_from(_PIECES[:12]), max_size=5).map(b"".join).map(
    lambda b: b.decode("utf-8"))


@st.composite
def batches(draw):  # type: ignore[no-untyped-def]
    log_append = draw(st.booleans())
    codec = draw(st.sampled_from([0, 1, 2, 3]))
    base_offset = draw(st.integers(0, 2**40))
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    n = draw(st.integers(1, 12))
    delta = 0
    for _ in range(n):
        delta += draw(st.integers(0, 3))
        headers = draw(st.lists(st.tuples(key_text, data), max_size=3))
        builder.append(delta, timestamp=draw(st.integers(-1, 2**45)), key=draw(data), value=draw(data),
                       headers=headers)
        delta += 1
    buf = bytearray(builder.build())
    buf[0:8] = base_offset.to_bytes(8, "big")
    if log_append:  # the broker's LogAppendTime: attribute bit 3, its time in MaxTimestamp, re-signed
        buf[22] |= 0x08
        buf[35:43] = draw(st.integers(0, 2**45)).to_bytes(8, "big")
        buf[17:21] = crc32c.crc32c(bytes(buf[21:])).to_bytes(4, "big")
    return bytes(buf)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=batches(), topic=st.sampled_from(["orders", "tópico-ü", 'q"uote']), partition=st.integers(0, 99),
       bounds=st.tuples(st.integers(0, 40), st.integers(0, 40)))
def test_counted_length_equals_rendered_length(batch: bytes, topic: str, partition: int,
                                               bounds: tuple[int, int]) -> None:
    header = parse_batch_header(batch, 0, 0)
    records = default_batch.decode_records(batch, header)
    first, stop = header.base_offset + bounds[0], header.base_offset + bounds[0] + bounds[1]
    selected = [r for r in records if first <= r.offset < stop]
    prefix = line_prefix(topic, partition)
    lines = render_line_list(prefix, selected)
    payload = default_batch.records_payload(batch, header)
    counted = speedups.count_jsonl(payload, header.record_count, header.base_offset, header.first_timestamp,
                                   header.timestamp_type, header.max_timestamp, prefix, first, stop)
    assert counted == (sum(map(len, lines)), len(selected), selected[0].offset if selected else -1)


def test_a_malformed_payload_is_left_to_the_decoder() -> None:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    builder.append(0, timestamp=1, key=b"k", value=b"v" * 50, headers=[])
    batch = bytes(builder.build())
    header = parse_batch_header(batch, 0, 0)
    payload = default_batch.records_payload(batch, header)
    for cut in range(len(payload)):
        assert speedups.count_jsonl(payload[:cut], 1, 0, 0, "CreateTime", 0, "{", 0, 10) is None
    assert speedups.count_jsonl(payload + b"\x00", 1, 0, 0, "CreateTime", 0, "{", 0, 10) is None
