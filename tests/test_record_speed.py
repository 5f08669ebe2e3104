"""decode_records against kafka-python's MemoryRecords iteration, on the same few MB of v2 batches.

Timing is meaningless on a loaded machine, so this runs only when asked: `KFS_BENCH=1 python -m pytest
tests/test_record_speed.py -s`. It prints records/s of both for each codec and asserts kfs is the faster
by a margin (the goal is 3x on 100-record batches; the assertion leaves room for noise).
"""

from __future__ import annotations

import os
import random
import time

import pytest
from kafka.record.memory_records import MemoryRecords
from test_speedups import kafka_python_batches

from kfs.record import decode_records, parse_batch_header, peek_size

pytestmark = pytest.mark.skipif(not os.environ.get("KFS_BENCH"), reason="benchmark: set KFS_BENCH=1")


def _kafka_python(buf: bytes) -> int:
    n = 0
    records = MemoryRecords(buf)
    while (batch := records.next_batch()) is not None:
        for _ in batch:
            n += 1
    return n


def _kfs(buf: bytes) -> int:
    n = 0
    pos = 0
    view = memoryview(buf)
    while pos < len(buf):
        size, _ = peek_size(buf, pos)
        header = parse_batch_header(buf, pos, pos)
        n += len(decode_records(view[pos:pos + size], header))
        pos += size
    return n


def _rates(buf: bytes, reps: int = 9) -> tuple[float, float]:
    """Best records/s of kafka-python and of kfs, runs interleaved so that both see the same load."""
    best_theirs = best_ours = float("inf")
    for _ in range(reps):
        start = time.process_time()
        n_theirs = _kafka_python(buf)
        best_theirs = min(best_theirs, time.process_time() - start)
        start = time.process_time()
        n_ours = _kfs(buf)
        best_ours = min(best_ours, time.process_time() - start)
        assert n_ours == n_theirs
    return n_theirs / best_theirs, n_ours / best_ours


@pytest.mark.parametrize("headers", [False, True])
@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4], ids=["none", "gzip", "snappy", "lz4", "zstd"])
def test_decode_records_is_faster_than_kafka_python(codec: int, headers: bool) -> None:
    buf = kafka_python_batches(random.Random(1), 200, 100, headers, codec)
    theirs, ours = _rates(buf)
    print(f"\ncodec {codec} headers {headers}: kafka-python {theirs:,.0f} rec/s, kfs {ours:,.0f} rec/s, "
          f"x{ours / theirs:.2f}")
    assert ours > 2 * theirs
