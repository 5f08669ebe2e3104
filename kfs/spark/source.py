"""The `kfs` PySpark data source: Kafka log dirs as a DataFrame with Spark's Kafka-source schema.

    spark.read.format("kfs").option("startingOffsets", '{"orders": {"0": 23}}').load("/data/a,/data/b")

Planning (`plan.py`) runs on the driver side, reading (`read`) in the executors' Python workers;
both go through `kfs.storage`, so the decoding is the one every kfs front end uses. Batches go to
Spark as Arrow record batches, not rows: the Python-to-JVM hand-off is what costs most per record.

Schema, as `KafkaRecordToRowConverter` in Spark's Kafka source: `timestampType` is Kafka's
`TimestampType.id` (0 CreateTime, 1 LogAppendTime, -1 NoTimestampType for magic v0 messages,
whose `timestamp` is then Kafka's -1 ms, 1969-12-31 23:59:59.999 UTC, as Spark shows it). With a
schema registry in reach (its `_schemas` topic in the log dirs, or the `schemas` option) and
`decode=auto`, four columns follow: `key_decoded`, `value_decoded` (typed by the topic's subject
when one topic is read), `key_decode_error`, `value_decode_error` (kfs.spark.typed).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import gc
import logging
import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import FrameType

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kfs.record.types import Record
from kfs.registry import Registry, load_registry
from kfs.spark import arrow_columns
from kfs.spark.aggregates import AggregatePlan
from kfs.spark.arrow_columns import BYTES_PER_BATCH
from kfs.spark.options import ReadOptions, parse_options
from kfs.spark.plan import Bounds, Piece, Split, plan_splits
from kfs.spark.pruning import build_schema, project, whole_types
from kfs.spark.tasks import PlannedPartitions, missing_here
from kfs.spark.typed import PartPlan, RowDecoder, decoded_fields, plan_from_field, row_decoder, wants_decoded_columns
from kfs.storage import KfsError, LogDirs, PartitionLog, parse_partition_dir
from kfs.storage.record_stream import CorruptBatch

log = logging.getLogger("kfs.spark")

# Kafka's TimestampType ids (org.apache.kafka.common.record.TimestampType), as Spark shows them.
TIMESTAMP_TYPE_IDS = {"CreateTime": 0, "LogAppendTime": 1, "NoTimestampType": -1}
# Columns no row has null (a v0 message's timestamp is Kafka's -1 ms): `IS NOT NULL` on them holds for every row.
NEVER_NULL = frozenset({("topic",), ("partition",), ("offset",), ("timestamp",), ("timestampType",)})
ROWS_PER_BATCH = 16384
# A task that aggregates its rows (kfs.spark.aggregates) sends none: its batches can be larger, fewer
# rounds of per-batch Python (a count's task 18% less CPU in one process). Their bytes stay bounded by
# BYTES_PER_BATCH, as every batch's are.
AGGREGATED_ROWS_PER_BATCH = 65536

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


def kafka_schema(include_headers: bool = False) -> StructType:
    """Spark's Kafka source schema (`KafkaRecordToRowConverter.kafkaSchema`)."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


class KafkaLogDataSource(DataSource):
    """`format("kfs")`: one log dir or several, comma-separated."""

    # Tasks per wave, as the session that registered the source knows it (`with_parallelism`);
    # the planner runs in a Python worker that has no SparkContext to ask.
    default_parallelism: int | None = None

    @classmethod
    def name(cls) -> str:
        return "kfs"

    @classmethod
    def with_parallelism(cls, parallelism: int | None, name: str = "kfs") -> type[KafkaLogDataSource]:
        """A subclass carrying the session's parallelism (PySpark pickles it by value), registered as
        `name` (`kfs_python` behind kfs's JVM front: kfs.spark.jvm)."""
        return type(cls.__name__, (cls,), {"default_parallelism": parallelism, "__module__": __name__,
                                           "__qualname__": f"{cls.__qualname__}.with_parallelism",
                                           "name": classmethod(lambda _cls: name)})

    def _options(self) -> ReadOptions:
        options = dict(self.options)
        if self.default_parallelism and not any(k.lower() == "parallelism" for k in options):
            options["parallelism"] = str(self.default_parallelism)
        return parse_options(options)

    def schema(self) -> StructType:
        _freeze_planner_heap()
        opts = self._options()
        schema = kafka_schema(opts.include_headers)
        registry = registry_for(opts)
        topics = selected_topics(opts) if opts.decode != "raw" else None
        if opts.decode != "raw" and wants_decoded_columns(registry, topics):
            for field in decoded_fields(registry, topics):
                schema.add(field)
        return schema

    def reader(self, schema: StructType) -> DataSourceReader:
        _freeze_planner_heap()
        cls = KafkaLogFilteringReader if _asked_by_pushdown_worker() else KafkaLogReader
        full = self.schema()
        aggregation = AggregatePlan.from_schema(schema)  # (kfs's JVM front pushed an aggregation)
        if aggregation is not None:
            read = aggregation.input_schema(full)
            built = build_schema(read, full)
            return cls(self._options(), read, built, whole_types(built, full), aggregation)
        if schema == full:
            return cls(self._options(), schema)
        built = build_schema(schema, full)
        return cls(self._options(), schema, built, whole_types(built, full))


def selected_topics(opts: ReadOptions) -> list[str] | None:
    """The topics a read selects, which type its decoded columns (kfs.spark.typed.part_plan): those
    `subscribe` names; with `subscribePattern` or `assign`, the log dirs' topics they select; None
    without any of them (every topic: the decoded JSON text, whatever topics the log dirs hold)."""
    if opts.subscribe_pattern is None and opts.assign is None:
        return sorted(opts.subscribe) if opts.subscribe is not None else None
    found = set()
    for name in LogDirs(list(opts.logdirs)).partition_names():
        parsed = parse_partition_dir(name)
        if parsed is not None and opts.wants(*parsed):
            found.add(parsed[0])
    return sorted(found)


def _asked_by_pushdown_worker() -> bool:
    """Whether PySpark's filter-pushdown planner is creating the reader.

    PySpark fails every query of a reader that overrides `pushFilters` unless
    `spark.sql.python.filterPushdown.enabled=true` (off by default), and does not tell the data
    source whether it is on. It is on exactly when the planner runs in
    `pyspark/sql/worker/data_source_pushdown_filters.py`, so that caller gets the reader that pushes
    filters and every other caller the plain one. Should PySpark rename that module, filters are
    simply not pushed: slower, never wrong.
    """
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if os.path.basename(frame.f_code.co_filename) == "data_source_pushdown_filters.py":
            return True
        frame = frame.f_back
    return False


_REGISTRIES: dict[tuple[tuple[str, ...], str | None, str], tuple[float, Registry | None]] = {}
REGISTRY_SECONDS = 1.0  # a worker's registry is read again when older than this (a live broker's grows)


def registry_for(opts: ReadOptions) -> Registry | None:
    """The schema registry for these log dirs (None with decode=raw or no registry topic), kept a
    second per process: every task of a query in a worker would read `_schemas` again otherwise."""
    if opts.decode == "raw":
        return None
    import time

    key = (opts.logdirs, opts.schemas, opts.schemas_topic)
    now = time.monotonic()
    cached = _REGISTRIES.get(key)
    if cached is not None and now - cached[0] < REGISTRY_SECONDS:
        return cached[1]
    registry = load_registry(list(opts.logdirs), opts.schemas, opts.schemas_topic)
    _REGISTRIES[key] = (now, registry)
    return registry


# ---- filter pushdown ----------------------------------------------------------------------------

def _micros(value: dt.datetime) -> int:
    """A pushed timestamp literal in µs since the epoch (naive values are taken as UTC)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    return (value - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)) // dt.timedelta(microseconds=1)


def bounds_from_filters(filters: Sequence[Filter]) -> tuple[Bounds, list[Filter]]:
    """Turn AND-ed filters into `Bounds`; returns the filters Spark must still evaluate.

    Offset, topic and partition filters are applied exactly by the plan, so Spark drops them.
    A timestamp filter only gives a lower bound (Kafka timestamps need not grow with offsets),
    so it prunes splits but stays for Spark to evaluate on the rows read. `IS NOT NULL` on a column no
    row has null is true of every row, so Spark drops it too.
    """
    offset_lo: int | None = None
    offset_hi: int | None = None
    ts_lo: int | None = None
    topics: frozenset[str] | None = None
    partitions: frozenset[int] | None = None
    remaining: list[Filter] = []

    def lo(current: int | None, new: int) -> int:
        return new if current is None else max(current, new)

    def hi(current: int | None, new: int) -> int:
        return new if current is None else min(current, new)

    for f in filters:
        column = getattr(f, "attribute", None)
        value = getattr(f, "value", None)
        if isinstance(f, IsNotNull) and column in NEVER_NULL:
            continue  # (true of every row: Spark need not test it, nor read the column for it)
        if column == ("offset",) and isinstance(value, int) and not isinstance(value, bool):
            if isinstance(f, GreaterThan):
                offset_lo = lo(offset_lo, value + 1)
            elif isinstance(f, GreaterThanOrEqual):
                offset_lo = lo(offset_lo, value)
            elif isinstance(f, LessThan):
                offset_hi = hi(offset_hi, value)
            elif isinstance(f, LessThanOrEqual):
                offset_hi = hi(offset_hi, value + 1)
            elif isinstance(f, EqualTo):
                offset_lo, offset_hi = lo(offset_lo, value), hi(offset_hi, value + 1)
            else:
                remaining.append(f)
        elif column == ("offset",) and isinstance(f, In) and value and all(isinstance(v, int) for v in value):
            offset_lo, offset_hi = lo(offset_lo, min(value)), hi(offset_hi, max(value) + 1)
            remaining.append(f)  # only the range is pruned; Spark keeps the exact set
        elif column == ("topic",) and isinstance(f, (EqualTo, In)):
            wanted = frozenset(value if isinstance(value, tuple) else (value,))
            topics = wanted if topics is None else topics & wanted
        elif column == ("partition",) and isinstance(f, (EqualTo, In)):
            wanted = frozenset(value if isinstance(value, tuple) else (value,))
            partitions = wanted if partitions is None else partitions & wanted
        elif column == ("timestamp",) and isinstance(value, dt.datetime):
            us = _micros(value)
            if isinstance(f, (GreaterThanOrEqual, EqualTo)):
                ts_lo = lo(ts_lo, -(-us // 1000))  # ms * 1000 >= us
            elif isinstance(f, GreaterThan):
                ts_lo = lo(ts_lo, us // 1000 + 1)  # ms * 1000 > us
            remaining.append(f)
        else:
            remaining.append(f)
    return Bounds(offset_lo, offset_hi, ts_lo, topics, partitions), remaining


# ---- reading --------------------------------------------------------------------------------------

def piece_records(plog: PartitionLog, piece: Piece, opts: ReadOptions) -> Iterator[Record]:
    """The records of one piece in offset order; `onCorrupt=skip` goes on after corrupt batches
    (the storage layer resynchronises; a row cannot carry the error, so it is logged)."""
    for record in plog.records(piece.start_offset, isolation=opts.isolation, end_offset=piece.end_offset,
                               on_corrupt=opts.on_corrupt):
        if isinstance(record, CorruptBatch):
            log.warning("kfs: %s; skipped", record.error)
            continue
        yield record


def piece_record_lists(plog: PartitionLog, piece: Piece, opts: ReadOptions) -> Iterator[list[Record]]:
    """`piece_records` a batch at a time (one list per Kafka batch): no generator step per record."""
    for records in plog.record_lists(piece.start_offset, isolation=opts.isolation, end_offset=piece.end_offset,
                                     on_corrupt=opts.on_corrupt):
        if type(records[0]) is CorruptBatch:  # (with onCorrupt=skip a corrupt batch comes as a list of its own)
            log.warning("kfs: %s; skipped", records[0].error)
            continue
        yield records


class _Offsets:
    """A batch's offsets as runs: a Kafka batch's records mostly have consecutive offsets (compaction
    leaves gaps), so most of a column is `arange`s and no Python int per record is kept."""

    def __init__(self) -> None:
        self.parts: list[tuple[int, int] | list[int]] = []  # (first, count) runs, or explicit offsets

    def add(self, records: list[Record]) -> None:
        first, n = records[0].offset, len(records)
        if records[-1].offset - first == n - 1:  # increasing, so consecutive
            last = self.parts[-1] if self.parts else None
            if type(last) is tuple and last[0] + last[1] == first:
                self.parts[-1] = (last[0], last[1] + n)
            else:
                self.parts.append((first, n))
        else:
            self.parts.append([r.offset for r in records])

    def array(self) -> pa.Array:
        pieces = [np.arange(p[0], p[0] + p[1], dtype=np.int64) if type(p) is tuple else np.array(p, dtype=np.int64)
                  for p in self.parts]
        return pa.array(pieces[0] if len(pieces) == 1 else np.concatenate(pieces), pa.int64())


def arrow_batches(topic: str, partition: int, record_lists: Iterable[list[Record]], schema: pa.Schema,
                  include_headers: bool, rows: int = ROWS_PER_BATCH,
                  decoder: RowDecoder | None = None, max_bytes: int = BYTES_PER_BATCH) -> Iterator[pa.RecordBatch]:
    """One partition's records (a list per Kafka batch) as Arrow record batches of exactly the schema
    Spark expects, each closed after the Kafka batch that brings it to `rows` rows or `max_bytes` bytes
    of keys, values and headers (UTF-8 keys and values, shown or not: the compiled builder's count).

    Only keys, values and timestamps are gathered a record at a time; offsets are runs (`_Offsets`),
    the timestamp type is the batch's (one per list), topic and partition are constants. The `Record`s
    are dropped a list at a time (under `no_cyclic_gc`: holding them made every GC pass walk them).
    `decoder` fills the decoded columns (kfs.spark.typed).
    """
    ts_type = schema.field("timestamp").type
    headers_type = schema.field("headers").type if include_headers else None
    type_ids = TIMESTAMP_TYPE_IDS
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    stamps: list[int] = []
    types: list[tuple[int, int]] = []  # (timestamp type id, how many rows), a run per list
    offsets = _Offsets()
    decoded: list[Record] = []
    h_keys: list[str] = []
    h_values: list[bytes | None] = []
    h_ends = [0]
    size = 0  # the bytes of keys, values and headers in the batch so far
    for records in record_lists:
        kinds = {r.timestamp_type for r in records}
        if len(kinds) == 1:
            types.append((type_ids[kinds.pop()], len(records)))
        else:  # (legacy messages may differ: a run per record)
            types.extend((type_ids[r.timestamp_type], 1) for r in records)
        offsets.add(records)
        for r in records:
            keys.append(r.key)
            values.append(r.value)
            stamps.append(r.timestamp)
            size += len(r.key or b"") + len(r.value or b"")
            for k, v in r.headers:
                size += len(k.encode()) + len(v or b"")
        if decoder is not None:
            decoded.extend(records)
        if headers_type is not None:
            for r in records:
                for k, v in r.headers:
                    h_keys.append(k)
                    h_values.append(v)
                h_ends.append(len(h_keys))
        if len(keys) >= rows or size >= max_bytes:
            yield _batch(topic, partition, keys, values, stamps, types, offsets, schema, ts_type, headers_type,
                         h_keys, h_values, h_ends, decoder, decoded)
            keys, values, stamps, types, offsets, decoded = [], [], [], [], _Offsets(), []
            h_keys, h_values, h_ends = [], [], [0]
            size = 0
    if keys:
        yield _batch(topic, partition, keys, values, stamps, types, offsets, schema, ts_type, headers_type,
                     h_keys, h_values, h_ends, decoder, decoded)


def _batch(topic: str, partition: int, keys: list[bytes | None], values: list[bytes | None], stamps: list[int],
           types: list[tuple[int, int]], offsets: _Offsets, schema: pa.Schema, ts_type: pa.DataType,
           headers_type: pa.DataType | None, h_keys: list[str], h_values: list[bytes | None], h_ends: list[int],
           decoder: RowDecoder | None, decoded: list[Record]) -> pa.RecordBatch:
    n = len(keys)
    if len({t for t, _ in types}) == 1:
        type_column = pa.array(np.full(n, types[0][0], dtype=np.int32), pa.int32())
    else:
        type_column = pa.array(np.repeat(np.array([t for t, _ in types], dtype=np.int32),
                                         [c for _, c in types]), pa.int32())
    columns = [
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.array(np.full(n, partition, dtype=np.int32), pa.int32()),
        offsets.array(),
        pa.array(np.array(stamps, dtype=np.int64) * 1000, pa.int64()).cast(ts_type),  # Kafka ms -> Spark µs
        type_column,
    ]
    if headers_type is not None:
        struct = pa.StructArray.from_arrays([pa.array(h_keys, pa.string()), pa.array(h_values, pa.binary())],
                                            fields=list(headers_type.value_type))
        columns.append(pa.ListArray.from_arrays(pa.array(h_ends, pa.int32()), struct, type=headers_type))
    if decoder is not None:
        columns.extend(decoder.columns(decoded, (schema.field("key_decoded").type, schema.field("value_decoded").type)))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


@contextlib.contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector for a task.

    Decoding allocates millions of `Record`s; a batch's worth survive each young-generation pass,
    get promoted, and soon trigger full passes over every object of the worker (PySpark, Arrow):
    measured, that cost as much as decoding. Records hold no reference cycles, so reference
    counting frees them all; the collector runs again when the task is done.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def freeze_worker_heap() -> None:
    """Exempt what a Python worker holds when a task starts (PySpark, pyarrow, numpy, kfs: modules, classes,
    functions, caches) from the cyclic garbage collector (`gc.freeze`), at every task.

    PySpark's daemon runs a full `gc.collect()` after every task of a reused worker (pyspark/daemon.py),
    and each one walked all of those objects again: measured with perf in the workers of a `decode=raw`
    read of 1 M records on local[1], garbage collection was ~40% of their CPU. Freezing once, before the
    first task, still left what that task imported (the decoders, the registry) to be walked after every
    task: 5% of a 1 GB count's CPU. That collection has just run when a task starts, so what is frozen
    then is what lives on; frozen objects are still freed by reference counting, and only a reference
    cycle among them that became garbage later would stay. Objects made by the task are collected as before.

    The planner's calls (`schema`, `reader` and its `partitions`: Spark runs each in a reused Python worker
    of the driver, several a query) freeze too: each was followed by the same full collection, ~20 ms of
    CPU a call against ~7 ms of planning, so a query's planning took 58 ms of Python CPU, now 13 ms
    (87 -> 57 ms of wall time to plan a 1 GB read, benchmarks/spark_compare.py's log dir)."""
    gc.freeze()


def _freeze_planner_heap() -> None:
    """`freeze_worker_heap` for the planner's calls, in a Python worker Spark started only (its factory's
    secret is in the environment): another process calling the source directly keeps its collector whole."""
    if "PYTHON_WORKER_FACTORY_SECRET" in os.environ:
        freeze_worker_heap()


_ALLOCATOR_SET = False
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)


def _keep_window_pages() -> None:
    """Have glibc's allocator keep the pages of the worker's read windows, once per process.

    A task reads its segments through `pread` into 1 MiB buffers (kfs.storage.batch_walk: the log is
    never mmapped), and glibc maps each buffer of that size afresh and unmaps it when freed: every window
    cost the kernel its page faults and the zeroing of its pages, ~3% of a 1 GB count's CPU in perf. With
    allocations under 32 MiB served from the heap, and up to 256 MiB of it kept when freed, the next
    window reuses the last one's pages. Not glibc (another libc, no mallopt): nothing changes."""
    global _ALLOCATOR_SET
    if _ALLOCATOR_SET:
        return
    _ALLOCATOR_SET = True
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)
        libc.mallopt(_M_TRIM_THRESHOLD, 256 << 20)
    except (OSError, AttributeError):
        pass


def read_split(split: Split, opts: ReadOptions, schema: pa.Schema,
               plans: Sequence[PartPlan] = (), payloads: bool = True,
               hidden: frozenset[str] = frozenset(),
               whole: Mapping[str, pa.DataType] | None = None,
               registry: Registry | None = None, aggregated: bool = False) -> Iterator[pa.RecordBatch]:
    """What one Spark task does: its pieces' records, in order, as Arrow record batches. `plans`:
    how the decoded columns are filled (kfs.spark.typed; none without a registry). `payloads` False:
    the query shows no key, value or header, so the compiled path copies none (they come as nulls).
    `hidden`: the parts whose decoded columns the query does not show (not decoded: null); `whole`:
    the whole type of a part whose column in `schema` is a pruned part of it (kfs.spark.pruning).
    `registry`: the one the driver planned with (kfs.spark.broker_local), else the log dirs' own.
    `aggregated`: the batches are aggregated in the worker, not sent (larger ones: `batch_rows`)."""
    planned = PlannedPartitions()  # per task: the log dirs the driver planned on, checked (kfs.spark.tasks)
    try:
        if registry is None and plans:
            registry = registry_for(opts)
    except KfsError as e:  # the log dirs were there when the driver planned
        raise missing_here(",".join(opts.logdirs), e) from None
    with no_cyclic_gc():
        for piece in split.pieces:
            plog = planned.open(piece)
            decoder = row_decoder(registry, plans, piece.topic, plog, hidden, whole) if plans else None
            rows = batch_rows(aggregated)
            yield from piece_batches(plog, piece, opts, schema, decoder, rows, payloads)


def batch_rows(aggregated: bool) -> int:
    """The rows a batch reaches before it is closed (AGGREGATED_ROWS_PER_BATCH's comment)."""
    return AGGREGATED_ROWS_PER_BATCH if aggregated else ROWS_PER_BATCH


def piece_batches(plog: PartitionLog, piece: Piece, opts: ReadOptions, schema: pa.Schema,
                  decoder: RowDecoder | None = None, rows: int = ROWS_PER_BATCH,
                  payloads: bool = True) -> Iterator[pa.RecordBatch]:
    """One piece's Arrow batches: their undecoded columns built in C (kfs.spark.arrow_columns) when the
    extension is built, else (and for a decoder that fills its columns from Records only) from the
    decoder's Records (`arrow_batches`, the reference). The two give equal batches, `onCorrupt=skip` too."""
    if arrow_columns.AVAILABLE and (decoder is None or hasattr(decoder, "array_columns")):
        return arrow_columns.compiled_arrow_batches(piece.topic, piece.partition, plog, piece.start_offset,
                                                    piece.end_offset, opts.isolation, schema, opts.include_headers,
                                                    rows, decoder, payloads or decoder is not None, opts.on_corrupt,
                                                    arrow_columns.BYTES_PER_BATCH)
    return arrow_batches(piece.topic, piece.partition, piece_record_lists(plog, piece, opts), schema,
                         opts.include_headers, rows, decoder, arrow_columns.BYTES_PER_BATCH)


class KafkaLogReader(DataSourceReader):
    """Plans splits from the indexes (`plan.py`) and reads them as Arrow batches.

    `schema` is what Spark reads; `built`, the columns built for it (kfs.spark.pruning: the same
    unless kfs's JVM front pruned columns); `whole`, the whole Arrow type of a decoded part that
    `built` prunes; `aggregation`, an aggregation the front pushed (kfs.spark.aggregates): the task
    sends its partial rows, aggregated from the rows of `schema`."""

    def __init__(self, opts: ReadOptions, schema: StructType, built: StructType | None = None,
                 whole: Mapping[str, pa.DataType] | None = None,
                 aggregation: AggregatePlan | None = None) -> None:
        self.opts = opts
        self.schema = schema
        self.built = schema if built is None else built
        self.whole = dict(whole or {})
        self.aggregation = aggregation
        self.bounds = Bounds()

    def partitions(self) -> Sequence[InputPartition]:
        splits = plan_splits(self.opts, self.bounds)
        return [InputPartition(s) for s in splits] or [InputPartition(Split(0))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if self.aggregation is not None:
            return self.aggregation.reduce(self._rows(partition))
        return self._rows(partition)

    def _rows(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        freeze_worker_heap()
        _keep_window_pages()
        built = to_arrow_schema(self.built, timezone="UTC")
        names = self.built.fieldNames()
        plans = [plan_from_field(self.built[f"{part}_decoded"]) for part in ("key", "value")
                 if f"{part}_decoded" in names]
        opts = self.opts
        if opts.include_headers and "headers" not in names:
            opts = dataclasses.replace(opts, include_headers=False)
        shown = set(self.schema.fieldNames())
        payloads = not {"key", "value", "headers"}.isdisjoint(shown)  # (a decoder gets them anyway: piece_batches)
        hidden = frozenset(part for part in ("key", "value")
                           if not {f"{part}_decoded", f"{part}_decode_error"} & shown) if plans else frozenset()
        batches = read_split(partition.value, opts, built, plans, payloads, hidden, self.whole,
                             aggregated=self.aggregation is not None)
        if self.built == self.schema:
            yield from batches
        else:
            wanted = to_arrow_schema(self.schema, timezone="UTC")
            for batch in batches:
                yield project(batch, wanted)


class KafkaLogFilteringReader(KafkaLogReader):
    """The reader when filter pushdown is on: offset, topic, partition and timestamp filters prune."""

    def pushFilters(self, filters: list[Filter]) -> list[Filter]:
        self.bounds, remaining = bounds_from_filters(filters)
        return remaining
