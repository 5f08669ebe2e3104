"""The fused renderer (`render_v2_jsonl` in kfs/_native/csrc/views/render_v2_jsonl.c, used by
kfs.views.batch_lines) writes the bytes the decoder and the Python renderer write, record for record:
random batches with every kind of byte (hypothesis), malformed payloads (left to the decoder, never a
crash), the Kafka-written fixtures through `kfs cat`, and it runs without the GIL."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
from itertools import accumulate

import pytest
from builders import v2_batches
from conftest import GOLDEN_PARTITIONS, LOGDIRS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kfs._native import record as native_record
from kfs._native import views as native_views
from kfs.record import CorruptBatchError, default_batch, parse_batch_header
from kfs.views import jsonl
from kfs.views.jsonl import line_prefix

pytestmark = pytest.mark.skipif(native_views.render_v2_jsonl is None, reason="extension not built")


def python_lines(prefix: str, batch: bytes, first: int, stop: int) -> list[bytes]:
    """The reference: the Python renderer's lines of the decoded records in [first, stop)."""
    header = parse_batch_header(batch, 0, 0)
    return [jsonl.render_line(prefix, r).encode("utf-8") for r in default_batch.decode_records(batch, header)
            if first <= r.offset < stop]


def fused(prefix: str, payload: bytes, header, first: int, stop: int, lines: bool = False):  # type: ignore[no-untyped-def]
    assert native_views.render_v2_jsonl is not None
    return native_views.render_v2_jsonl(payload, header.record_count, header.base_offset, header.first_timestamp,
                                    header.timestamp_type, header.max_timestamp, prefix, first, stop, lines)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=v2_batches(), topic=st.sampled_from(["orders", "tópico-ü", 'q"uote', "a\\b\x01"]),
       partition=st.integers(0, 99), bounds=st.tuples(st.integers(0, 40), st.integers(0, 40)))
def test_fused_lines_are_the_python_renderers(batch: bytes, topic: str, partition: int,
                                               bounds: tuple[int, int]) -> None:
    header = parse_batch_header(batch, 0, 0)
    first, stop = header.base_offset + bounds[0], header.base_offset + bounds[0] + bounds[1]
    prefix = line_prefix(topic, partition)
    expected = python_lines(prefix, batch, first, stop)
    payload = default_batch.records_payload(batch, header)
    offsets = [r.offset for r in default_batch.decode_records(batch, header) if first <= r.offset < stop]
    got = fused(prefix, payload, header, first, stop)
    assert native_views.count_jsonl is not None
    counted = native_views.count_jsonl(payload, header.record_count, header.base_offset, header.first_timestamp,
                                   header.timestamp_type, header.max_timestamp, prefix, first, stop)
    if got is None:  # left to the decoder: only what the counter leaves to it too (an invalid UTF-8 header key)
        assert counted is None
        return
    assert got == b"".join(expected)
    marks, data = fused(prefix, payload, header, first, stop, lines=True)
    packed = memoryview(marks).cast("q")
    assert data == got and packed[0::2].tolist() == offsets
    assert packed[1::2].tolist() == list(accumulate(map(len, expected)))
    assert counted is not None and counted[0] == len(got)


def test_a_malformed_payload_is_left_to_the_decoder() -> None:
    rnd = random.Random(7)
    from kafka.record.default_records import DefaultRecordBatchBuilder
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 30)
    for i in range(3):
        builder.append(i, timestamp=1, key=b"k", value=b'v"\\' * 20, headers=[("h", b"x"), ("k2", None)])
    batch = bytes(builder.build())
    header = parse_batch_header(batch, 0, 0)
    payload = default_batch.records_payload(batch, header)
    prefix = line_prefix("t", 0)
    assert fused(prefix, payload, header, 0, 10) == b"".join(python_lines(prefix, batch, 0, 10))
    for cut in range(len(payload)):
        assert fused(prefix, payload[:cut], header, 0, 10) is None
    assert fused(prefix, payload + b"\x00", header, 0, 10) is None
    # Random damage: either left to the decoder, or exactly what the decoder and renderer give.
    for _ in range(3000):
        damaged = bytearray(payload)
        for _ in range(rnd.randrange(1, 4)):
            damaged[rnd.randrange(len(damaged))] = rnd.randrange(256)
        got = native_views.render_v2_jsonl(bytes(damaged), 3, 0, 1, "CreateTime", 0, prefix, 0, 10)
        if got is None:
            continue
        records = native_record.decode_v2_records(bytes(damaged), 3, 0, 1, "CreateTime", 0)
        assert got == b"".join(jsonl.render_line(prefix, r).encode() for r in records if 0 <= r.offset < 10)


def test_a_prefix_utf8_cannot_encode_is_left_to_python() -> None:
    assert native_views.render_v2_jsonl is not None
    assert native_views.render_v2_jsonl(b"", 0, 0, 0, "CreateTime", 0, "\udcff", 0, 10) is None
    with pytest.raises(CorruptBatchError):
        native_record.decode_v2_records(b"\x00", 1, 0, 0, "CreateTime", 0)


def _cat(logdir: str, partition: str, pure: bool) -> subprocess.CompletedProcess:
    env = dict(os.environ, KFS_PURE_PYTHON="1" if pure else "")
    return subprocess.run([sys.executable, "-m", "kfs.cli.main", "cat", logdir, partition], env=env,
                          capture_output=True, check=False)


@pytest.mark.parametrize("partition", GOLDEN_PARTITIONS)
def test_kfs_cat_of_the_kafka_written_fixtures_is_the_pure_python_output(partition: str) -> None:
    logdir = next(d for d in LOGDIRS if os.path.isdir(os.path.join(d, partition)))
    fused_run, pure_run = _cat(logdir, partition, False), _cat(logdir, partition, True)
    assert (fused_run.returncode, fused_run.stdout) == (pure_run.returncode, pure_run.stdout)


def test_the_fused_renderer_runs_without_the_gil() -> None:
    """A Python thread runs while one long call renders: it could not if the call held the GIL."""
    from kafka.record.default_records import DefaultRecordBatchBuilder
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 30)
    value = b'{"order_id": 1, "note": "a value with \\"quotes\\""}' * 20
    for i in range(40000):
        builder.append(i, timestamp=1, key=b"key-%d" % i, value=value, headers=[("trace-id", b"ab12")])
    batch = bytes(builder.build())
    header = parse_batch_header(batch, 0, 0)
    payload = default_batch.records_payload(batch, header)
    prefix = line_prefix("t", 0)
    seen: list[float] = []
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            seen.append(time.perf_counter())

    thread = threading.Thread(target=spin)
    thread.start()
    try:
        for _ in range(20):
            time.sleep(0.001)
            seen.clear()
            start = time.perf_counter()
            out = fused(prefix, payload, header, 0, 1 << 40)
            end = time.perf_counter()
            # Holding the GIL, the call lets the spinner run at most one switch interval (5 ms) after
            # `start` (the Python code before the C call): only what runs well inside counts.
            margin = max(0.015, (end - start) / 4)
            inside = [t for t in seen if start + margin < t < end - margin]
            if inside:
                break
    finally:
        stop.set()
        thread.join()
    assert out is not None and out.count(b"\n") == 40000
    assert inside, "no Python bytecode ran while the fused renderer worked: it held the GIL"


@pytest.mark.parametrize("last_offset_delta", [-1, -(1 << 31)])
def test_a_negative_last_offset_delta_at_the_lowest_base_offset_is_left_to_the_decoder(
        last_offset_delta: int) -> None:
    """The campaign's two OverflowErrors in 10^6 inputs: base offset -2^63 (outside the CRC) and a
    negative last offset delta (CRC recomputed) made the batch's last offset pass int64's low end."""
    import struct

    import crc32c
    from kafka.record.default_records import DefaultRecordBatchBuilder

    from kfs.views import batch_lines

    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 30)
    for i in range(2):
        builder.append(i, timestamp=1, key=b"k", value=b"v", headers=[])
    batch = bytearray(builder.build())
    struct.pack_into(">q", batch, 0, -(1 << 63))
    struct.pack_into(">i", batch, 23, last_offset_delta)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    header = parse_batch_header(bytes(batch), 0, 0)
    assert header.last_offset < -(1 << 63)
    assert batch_lines.fused_lines(header, memoryview(bytes(batch)), line_prefix("t", 0), -(1 << 63), None) is None
    # what the decoder gives lies above the batch's last offset: LogSegment.records_of refuses it
    assert default_batch.decode_records(bytes(batch), header)[0].offset > header.last_offset


# Text the way JSON values look (a quote or backslash every few bytes), with now and then a control
# character or a non-ASCII one: what the escaper's 16-byte path takes, and where it hands over.
_JSONISH = st.text(alphabet=st.sampled_from('ab {}:,"\\0x') | st.sampled_from("\n\x01\x7fé€\U0001f600"),
                   max_size=300)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(st.tuples(_JSONISH, st.one_of(st.none(), _JSONISH)), min_size=1, max_size=6))
def test_json_like_values_render_and_count_as_python_renders_them(values: list[tuple[str, str | None]]) -> None:
    from conftest import v2_batch
    records = [(i, 1_700_000_000_000 + i, None if key is None else key.encode(), value.encode(),
                [("h", value.encode())]) for i, (value, key) in enumerate(values)]
    batch = v2_batch(0, records)
    header = parse_batch_header(batch, 0, 0)
    prefix = line_prefix("orders", 0)
    expected = b"".join(python_lines(prefix, batch, 0, 1 << 62))
    payload = default_batch.records_payload(batch, header)
    assert fused(prefix, payload, header, 0, 1 << 62) == expected
    assert native_views.count_jsonl is not None
    counted = native_views.count_jsonl(payload, header.record_count, header.base_offset, header.first_timestamp,
                                   header.timestamp_type, header.max_timestamp, prefix, 0, 1 << 62)
    assert counted is not None and counted[0] == len(expected)
