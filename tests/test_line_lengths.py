"""The length of a batch's JSON lines, counted without rendering (`count_jsonl` in
kfs/record/csrc/count_jsonl.c), is the length of what the renderer writes: random records (hypothesis,
kafka-python's builder) with every kind of byte a key, value or header may hold, compared with
`render_jsonl` as the oracle."""

from __future__ import annotations

import pytest
from builders import v2_batches as batches
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from kfs.record import default_batch, parse_batch_header, speedups
from kfs.views.jsonl import line_prefix, render_line_list

pytestmark = pytest.mark.skipif(speedups.count_jsonl is None, reason="extension not built")

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
