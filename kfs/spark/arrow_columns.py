"""A piece's rows as Arrow record batches whose undecoded columns are built in C, no Record per record.

The Python path (`kfs.spark.source.arrow_batches`) decodes each Kafka batch into `Record`s and copies
their fields into Python lists, then into Arrow: ~0.5 us of Python a record, most of a `decode=raw`
task. Here the storage layer still selects the batches (`PartitionLog.selected_batches`: the offset
range, control batches hidden and checked, aborted transactions under read_committed, the checks of
the segment walk), and each plain v2 batch (CRC valid, decompressed where it must be, as the fused
JSON renderer takes it: kfs.views.batch_lines) has its records section walked by
`arrow_append_v2` (kfs/_native/csrc/spark/arrow_columns.c) straight into Arrow's buffers, which are
wrapped without a copy. Runs of plain batches (uncompressed or lz4) are taken many at a time from the
segment walk's window by `arrow_append_run` (`run_taker`), with the checks the views' compiled walker
makes (kfs.views.plain_runs): no Python between them. Every other batch (legacy messages, a damaged
one, a header key that is not UTF-8) is decoded by the Python decoder, which raises what is wrong
with it (the same CorruptLogError as the Python path) or gives its Records, appended to the same
builder in order. The rows, and where one Arrow batch ends and the next begins, are the Python path's:
tests/test_spark_arrow_columns.py holds the two to equal batches.

`onCorrupt=skip` skips a corrupt batch here too: its decoding raises, the batch is logged and left out,
and the walk goes on after it, resynchronised past a header that does not read
(kfs.storage.record_stream.selected_batches_skipping_corrupt), the Record path's rows. A decoder without
`array_columns` keeps the Python path (kfs.spark.typed: the decoded columns of Kafka's internal topics
are made from Records).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from kfs._native import spark as native
from kfs.record import BatchHeader, PlainRun, crc_is_valid, default_batch
from kfs.record.compression import MAX_BATCH_RECORDS
from kfs.storage import CorruptLogError, LogSegment, PartitionLog, batch_records
from kfs.storage.partition_reads import SelectedTaker

log = logging.getLogger("kfs")

# KFS_SPARK_RECORD_PATH=1 keeps the Record path with the extension built (to compare the two in Spark, as
# benchmarks/bench_spark.py --record-path does, or to rule this path out); KFS_PURE_PYTHON=1 does too.
AVAILABLE = native.arrow_builder is not None and not os.environ.get("KFS_SPARK_RECORD_PATH")
_NO_END = (1 << 63) - 1  # to arrow_append_v2: no end
# The most bytes of one binary column's data in a builder (Arrow's int32 offsets): past it the rows so far
# are taken as an Arrow batch of their own (`ColumnBuilder.take` gives more than one). Lowered by a test.
DATA_LIMIT = (1 << 31) - 1
# The bytes of keys, values and headers after which an Arrow batch is closed, whatever its rows: a
# batch is closed after the Kafka batch that brings it to its rows or to these bytes (16,384 rows of
# 1 MiB records would be 16 GiB in one worker; 16,384 of 2 KiB are these 32 MiB).
BYTES_PER_BATCH = 32 << 20
_EMPTY = pa.py_buffer(b"")
_PAYLOAD_SPANS = (2, 5, 11, 14)  # arrow_take's data buffers: key, value, header key, header value
# Spark's headers type (kfs.spark.source.HEADERS_TYPE as Arrow), for a schema without the column: the
# decoded columns' decoder is handed the headers whether Spark shows them or not.
HEADERS_ARROW_TYPE = pa.list_(pa.field("element", pa.struct([pa.field("key", pa.string()),
                                                             pa.field("value", pa.binary())])))


class ArrayDecoder(Protocol):
    """The decoded columns' filler (kfs.spark.typed's decoders that have `array_columns`)."""

    def array_columns(self, keys: pa.Array, values: pa.Array, headers: pa.ListArray | None,
                      types: Sequence[pa.DataType]) -> list[pa.Array]: ...


class ColumnBuilder:
    """The compiled builder of one piece's undecoded columns, fed a selected batch at a time."""

    def __init__(self, headers_type: pa.DataType, payloads: bool = True) -> None:
        assert native.arrow_builder is not None
        self._builder = native.arrow_builder(DATA_LIMIT, payloads)
        self._headers_type = headers_type
        self._pending: list[tuple[Any, ...]] = []  # rows taken when the builder was full, for `take`
        self._done = False
        self.rows = 0

    def add(self, segment: LogSegment, header: BatchHeader, body: memoryview, first: int, end: int | None) -> bool:
        """The batch's records in [first, end) appended as rows; whether the piece ends with this batch
        (its last record is at or past `end`, where kfs.storage.record_stream.record_lists_from stops).
        Raises CorruptLogError as the Python path does."""
        if self._compiled(segment, header, body, first, end):
            return self._done
        records = batch_records(segment, header, body, first, None)  # (raises what is wrong with the batch)
        done = end is not None and bool(records) and records[-1].offset >= end
        if done:
            records = [r for r in records if r.offset < end]  # type: ignore[operator]
        if records:
            self._append(native.arrow_append_records, records)
        return done

    def _compiled(self, segment: LogSegment, header: BatchHeader, body: memoryview, first: int,
                  end: int | None) -> bool:
        """Whether the compiled walk took the batch (then `_done` says whether the piece ends with it)."""
        if header.magic != 2 or header.is_control or not 0 < header.record_count <= MAX_BATCH_RECORDS \
                or not segment.base_offset <= header.base_offset <= header.last_offset \
                or not crc_is_valid(body, header):
            return False  # (records outside the batch's offsets, a bad CRC: the decoder says what it is)
        payload = default_batch.section_for_compiled(body, header)  # in place, or decompressed
        if payload is None:
            return False
        append_time = header.max_timestamp if header.timestamp_type == "LogAppendTime" else None
        out = self._append(native.arrow_append_v2, payload, header.record_count, header.base_offset,
                           header.first_timestamp, append_time, first, _NO_END if end is None else min(end, _NO_END),
                           min(header.last_offset, _NO_END))
        if out is None:
            return False
        self._done = end is not None and out[1] >= end
        return True

    def _append(self, append: Any, *args: Any) -> Any:
        """`append(builder, *args)`, once more after taking the rows when the builder is full (a binary
        column would pass DATA_LIMIT); the taken rows wait in `_pending` for `take`."""
        out = append(self._builder, *args)
        if out is False:
            self._pending.append(self._take_buffers())
            out = append(self._builder, *args)
        if out is not None and out is not False:
            self.rows = self._pending_rows() + (out if isinstance(out, int) else out[0])
        return out

    def _pending_rows(self) -> int:
        return sum(taken[0][0] for taken in self._pending)

    def payload_bytes(self) -> int:
        """The bytes of keys, values and headers (keys and values) of the rows so far."""
        assert native.arrow_payload_bytes is not None
        return self._pending_bytes() + native.arrow_payload_bytes(self._builder)

    def _pending_bytes(self) -> int:
        return sum(spans[i][1] for _, _, spans in self._pending for i in _PAYLOAD_SPANS)

    def _take_buffers(self) -> tuple[Any, ...]:
        assert native.arrow_take is not None
        return native.arrow_take(self._builder)

    def take(self) -> list[tuple[list[pa.Array], pa.Array, pa.Array, pa.ListArray]]:
        """The rows so far as (offset, timestamp µs, timestampType) arrays and the key, value and
        headers arrays, one tuple per chunk (more than one only when a column reached DATA_LIMIT); the
        builder is left empty."""
        chunks = [*self._pending, self._take_buffers()]
        self._pending = []
        self.rows = 0
        return [self._arrays(chunk) for chunk in chunks if chunk[0][0]]

    def _arrays(self, taken: tuple[Any, ...]) -> tuple[list[pa.Array], pa.Array, pa.Array, pa.ListArray]:
        (n, key_nulls, value_nulls, n_headers, header_value_nulls), owner, spans = taken
        b = [pa.foreign_buffer(address, size, base=owner) if size else _EMPTY for address, size in spans]
        keys = pa.Array.from_buffers(pa.binary(), n, [b[0] if key_nulls else None, b[1], b[2]], null_count=key_nulls)
        values = pa.Array.from_buffers(pa.binary(), n, [b[3] if value_nulls else None, b[4], b[5]],
                                       null_count=value_nulls)
        numbers = [pa.Array.from_buffers(pa.int64(), n, [None, b[6]], null_count=0),
                   pa.Array.from_buffers(pa.int64(), n, [None, b[7]], null_count=0),
                   pa.Array.from_buffers(pa.int32(), n, [None, b[8]], null_count=0)]
        header_keys = pa.Array.from_buffers(pa.string(), n_headers, [None, b[10], b[11]], null_count=0)
        header_values = pa.Array.from_buffers(pa.binary(), n_headers,
                                              [b[12] if header_value_nulls else None, b[13], b[14]],
                                              null_count=header_value_nulls)
        struct = pa.StructArray.from_arrays([header_keys, header_values], fields=list(self._headers_type.value_type))
        headers = pa.Array.from_buffers(self._headers_type, n, [None, b[9]], null_count=0, children=[struct])
        return numbers, keys, values, headers


def _clamped(n: int) -> int:
    return max(min(n, _NO_END), -_NO_END)


def run_taker(builder: ColumnBuilder, end: int | None, read_committed: bool, rows: int,
              max_bytes: int = BYTES_PER_BATCH) -> SelectedTaker:
    """A taker (PartitionLog.selected_batches' `take`) appending each window's run of plain batches to
    `builder` in one compiled call (arrow_append_run, the checks of kfs.views.plain_runs' walker): the
    run stands in the batch stream as one PlainRun whose `taken` says whether the piece ends with it.
    A run ends after the batch that brings the builder to `rows` rows or `max_bytes` payload bytes."""
    stop = _NO_END if end is None else _clamped(end)
    append_run = native.arrow_append_run
    assert append_run is not None

    def take(first: int, segment: LogSegment, window: memoryview, position: int, previous_last: int | None,
             below: int) -> PlainRun | None:
        if segment.base_offset > _NO_END or not (previous_last is None or -_NO_END <= previous_last <= _NO_END):
            return None  # (numbers a hostile file may hold past int64: the Python walk's)
        got = append_run(builder._builder, window, segment.base_offset, previous_last, _clamped(below),
                         _clamped(first), stop, read_committed, rows - builder._pending_rows(),
                         max_bytes - builder._pending_bytes())
        if got is None:
            return None
        used, base_offset, last_offset, walked, now = got
        builder.rows = builder._pending_rows() + now
        return PlainRun.of(position, used, base_offset, last_offset, 0, end is not None and walked >= end)

    return take


def compiled_arrow_batches(topic: str, partition: int, plog: PartitionLog, start: int, end: int | None,
                           isolation: str, schema: pa.Schema, include_headers: bool, rows: int,
                           decoder: ArrayDecoder | None = None, payloads: bool = True,
                           on_corrupt: str = "fail", max_bytes: int = BYTES_PER_BATCH) -> Iterator[pa.RecordBatch]:
    """The records of [start, end) of one partition as Arrow record batches of exactly `schema` (Spark's),
    as `kfs.spark.source.arrow_batches` makes them from `piece_record_lists`: the same rows, a batch
    closed after the Kafka batch that brings it to `rows` rows or `max_bytes` bytes of keys, values and
    headers, or more (none counted without payloads: none are copied). `decoder`: the decoded columns.
    `payloads` False (a pruned read that shows none of them, and no decoder): every key and value null,
    no headers, none of their bytes copied. `on_corrupt="skip"`: a corrupt batch is logged and skipped,
    and the walk goes on after it, as `piece_record_lists` does (a row cannot carry the error)."""
    ts_type = schema.field("timestamp").type
    headers_type = schema.field("headers").type if include_headers else HEADERS_ARROW_TYPE
    builder = ColumnBuilder(headers_type, payloads)
    take = run_taker(builder, end, isolation == "read_committed", rows, max_bytes)
    for segment, header, body, first in plog.selected_batches(start, isolation=isolation, end_offset=end, take=take,
                                                              on_corrupt=on_corrupt):
        try:
            done = header.taken if type(header) is PlainRun else builder.add(segment, header, body, first, end)
        except CorruptLogError as e:  # (a declined append leaves no row)
            if on_corrupt != "skip":
                raise
            log.warning("kfs: %s; skipped", e)
            continue
        if builder.rows >= rows or builder.payload_bytes() >= max_bytes:
            yield from _batches(topic, partition, builder, schema, ts_type, include_headers, decoder)
        if done:
            break
    if builder.rows:
        yield from _batches(topic, partition, builder, schema, ts_type, include_headers, decoder)


def _batches(topic: str, partition: int, builder: ColumnBuilder, schema: pa.Schema, ts_type: pa.DataType,
             include_headers: bool, decoder: ArrayDecoder | None) -> Iterator[pa.RecordBatch]:
    for (offsets, stamps, types), keys, values, headers in builder.take():
        n = len(keys)
        columns = [
            keys,
            values,
            pa.repeat(pa.scalar(topic, pa.string()), n),
            pa.array(np.full(n, partition, dtype=np.int32), pa.int32()),
            offsets,
            stamps.view(ts_type),  # (Kafka ms -> Spark µs: done in C)
            types,
        ]
        if include_headers:
            columns.append(headers)
        if decoder is not None:  # (headers None: no row has any, which most batches are)
            columns.extend(decoder.array_columns(keys, values, headers if len(headers.values) else None,
                                                 (schema.field("key_decoded").type,
                                                  schema.field("value_decoded").type)))
        yield pa.RecordBatch.from_arrays(columns, schema=schema)
