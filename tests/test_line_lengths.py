"""The length of a batch's JSON lines, counted without rendering (`count_jsonl` in
kfs/_native/csrc/views/count_jsonl.c), is the length of what the renderer writes: random records (hypothesis,
kafka-python's builder) with every kind of byte a key, value or header may hold, compared with
`render_jsonl` as the oracle."""

from __future__ import annotations

import pytest
from builders import v2_batches as batches
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from kfs._native import views as native_views
from kfs.record import default_batch, parse_batch_header
from kfs.views.jsonl import line_prefix, render_line_list

pytestmark = pytest.mark.skipif(native_views.count_jsonl is None, reason="extension not built")

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
    counted = native_views.count_jsonl(payload, header.record_count, header.base_offset, header.first_timestamp,
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
        assert native_views.count_jsonl(payload[:cut], 1, 0, 0, "CreateTime", 0, "{", 0, 10) is None
    assert native_views.count_jsonl(payload + b"\x00", 1, 0, 0, "CreateTime", 0, "{", 0, 10) is None


def _one_record_count(key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes]]) -> None:
    """count_jsonl of a one-record batch equals the length render_jsonl gives it."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    builder.append(0, timestamp=1_700_000_000_000, key=key, value=value, headers=headers)
    batch = bytes(builder.build())
    header = parse_batch_header(batch, 0, 0)
    prefix = line_prefix("orders", 0)
    rendered = render_line_list(prefix, default_batch.decode_records(batch, header))
    payload = default_batch.records_payload(batch, header)
    counted = native_views.count_jsonl(payload, header.record_count, header.base_offset, header.first_timestamp,
                                   header.timestamp_type, header.max_timestamp, prefix, 0, 1)
    assert counted == (sum(map(len, rendered)), 1, 0)


# The counter takes 16 bytes at a time: quotes summed per byte position (every 255 blocks), control
# characters from the table, a non-ASCII byte anywhere sends the whole value to the UTF-8 pass, and the
# last block of a key or value is read whole and masked when the payload goes on after it.
_SPECIAL = [b'"', b"\\", b"\n", b"\x00", b"\x1f", b"\x7f", "é".encode(), b"\xff", b"a"]


@pytest.mark.parametrize("length", [0, 1, 15, 16, 17, 31, 32, 255 * 16 - 1, 255 * 16, 255 * 16 + 1, 600 * 16 + 7])
def test_long_runs_of_quotes_count_as_rendered(length: int) -> None:
    """Every byte a '"' (past 255 blocks, where a per-position count of one byte would wrap)."""
    _one_record_count(b'"' * length, b"\\" * length, [("h", b'"' * length)])


@settings(max_examples=300, deadline=None)
@given(length=st.integers(0, 80), at=st.integers(0, 79), special=st.sampled_from(_SPECIAL),
       after=st.sampled_from(_SPECIAL), base=st.sampled_from([b"x", b'"', b"ab\"cd"]))
def test_one_special_byte_anywhere_in_a_block_counts_as_rendered(length: int, at: int, special: bytes,
                                                                  after: bytes, base: bytes) -> None:
    """One special byte at any position of any block, and special bytes right after the key and value in
    the payload (read with the last block, masked off)."""
    plain = (base * (length // len(base) + 1))[:length]
    value = plain[:at] + special + plain[at:] if at <= length else plain
    _one_record_count(value[:length] + after * 3, value, [("k", after * 20), ("k2", value)])
    _one_record_count(plain, plain + after, [])


def test_a_record_at_the_last_offset_is_counted_as_it_is_rendered() -> None:
    """End 2**63 - 1 is no end (the Python path's end=None): the renderers showed a record at offset
    2**63 - 1 and count_jsonl left it out, a view's size one line short of its lines. One rule
    (renderers.h record_shown) now decides for both, and for walk_v2_run's counting."""
    from conftest import v2_batch

    top = (1 << 63) - 1
    batch = v2_batch(top - 1, [(top - 1, 1, b"k", b"v", []), (top, 2, b"k2", b"v2", [("h", b"x")])])
    header = parse_batch_header(batch, 0, 0)
    payload = default_batch.records_payload(batch, header)
    prefix = line_prefix("t", 0)
    assert native_views.render_v2_jsonl is not None
    rendered = native_views.render_v2_jsonl(payload, header.record_count, header.base_offset, header.first_timestamp,
                                            header.timestamp_type, header.max_timestamp, prefix, 0, top, False,
                                            header.last_offset)
    assert rendered == b"".join(render_line_list(prefix, default_batch.decode_records(batch, header)))
    counted = native_views.count_jsonl(payload, header.record_count, header.base_offset, header.first_timestamp,
                                       header.timestamp_type, header.max_timestamp, prefix, 0, top, header.last_offset)
    assert counted == (len(rendered), 2, top - 1)
