"""The Spark source's compiled columns (kfs.spark.arrow_columns, kfs/_native/csrc/spark/arrow_columns.c)
give the batches the Record path gives (kfs.spark.source.arrow_batches, the reference), column for
column and batch for batch: on every fixture log dir the Spark tests read (all codecs, transactions
read committed and not, control records, compacted gaps, headers, null keys and values, legacy
messages, internal topics), from and to offsets inside batches, on random batches (hypothesis), and
on damaged batches, where both raise the same error."""

from __future__ import annotations

import random
import shutil
import struct
import tempfile
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

import crc32c
import pyarrow as pa
import pyarrow.compute as pc
from builders import v2_batches
from conftest import LOGDIRS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql.pandas.types import to_arrow_schema
from test_plain_runs import _rebased, plain_batches

from kfs.record import default_batch, parse_batch_header
from kfs.record.types import BatchHeader, CorruptBatchError, Record
from kfs.spark import arrow_columns
from kfs.spark.arrow_columns import BYTES_PER_BATCH, compiled_arrow_batches
from kfs.spark.options import parse_options
from kfs.spark.plan import plan_splits
from kfs.spark.source import ROWS_PER_BATCH, arrow_batches, kafka_schema, piece_batches
from kfs.spark.tasks import PlannedPartitions
from kfs.storage import CorruptBatch, CorruptLogError, KfsError, LogDirs, PartitionLog

pytestmark = pytest.mark.skipif(not arrow_columns.AVAILABLE, reason="extension not built")

FIXTURES = Path(__file__).parent / "fixtures"
LOG_DIRS = [*LOGDIRS, str(FIXTURES / "schema-registry" / "logdir"), str(FIXTURES / "schema-evolution" / "logdir"),
            *(str(p) for p in sorted((FIXTURES / "internal-topics" / "logdirs").iterdir())),
            *(str(p) for p in sorted((FIXTURES / "replicas" / "logdirs").glob("*/*")) if p.is_dir())]
SCHEMAS = {h: to_arrow_schema(kafka_schema(h), timezone="UTC") for h in (False, True)}


def python_batches(plog: PartitionLog, start: int, end: int | None, isolation: str, headers: bool,
                   rows: int, on_corrupt: str = "fail", max_bytes: int = BYTES_PER_BATCH) -> list[pa.RecordBatch]:
    """The reference: the Record path, as `piece_batches` takes it without the extension
    (`piece_record_lists`: with onCorrupt=skip, a corrupt batch's CorruptBatch left out)."""
    lists = (records for records in plog.record_lists(start, isolation=isolation, end_offset=end, on_corrupt=on_corrupt)
             if type(records[0]) is not CorruptBatch)
    return list(arrow_batches(plog.topic, plog.partition, lists, SCHEMAS[headers], headers, rows,
                              max_bytes=max_bytes))


def compiled_batches(plog: PartitionLog, start: int, end: int | None, isolation: str, headers: bool,
                     rows: int, on_corrupt: str = "fail", max_bytes: int = BYTES_PER_BATCH) -> list[pa.RecordBatch]:
    return list(compiled_arrow_batches(plog.topic, plog.partition, plog, start, end, isolation, SCHEMAS[headers],
                                       headers, rows, on_corrupt=on_corrupt, max_bytes=max_bytes))


def assert_same_batches(got: list[pa.RecordBatch], expected: list[pa.RecordBatch]) -> None:
    assert [b.num_rows for b in got] == [b.num_rows for b in expected]
    for g, e in zip(got, expected, strict=True):
        assert g.schema == e.schema
        for name in e.schema.names:  # (column by column: a failure names the column)
            assert g.column(name).equals(e.column(name)), (name, g.column(name), e.column(name))
        g.validate(full=True)


def partitions() -> Iterator[tuple[str, str]]:
    for logdir in LOG_DIRS:
        for name in LogDirs([logdir]).partition_names():
            yield logdir, name


PARTITIONS = list(partitions())


@pytest.mark.parametrize(("logdir", "name"), PARTITIONS, ids=[f"{Path(d).name}/{n}" for d, n in PARTITIONS])
def test_every_fixture_partition_gives_the_record_paths_batches(logdir: str, name: str) -> None:
    plog = LogDirs([logdir]).partition(name)
    first, end = plog.log_start_offset(), plog.log_end_offset()
    rnd = random.Random(name)
    bounds = [(first, None), (first, end)] + [tuple(sorted(rnd.sample(range(first, end + 1), 2))) for _ in range(6)
                                              if end - first >= 2]
    for isolation in ("read_uncommitted", "read_committed"):
        for headers in (False, True):
            for rows in (ROWS_PER_BATCH, 1, 7):
                for start, stop in bounds:
                    try:
                        expected = python_batches(plog, start, stop, isolation, headers, rows)
                    except CorruptLogError as e:  # (a fixture's damage: the same error, after the same rows)
                        with pytest.raises(CorruptLogError) as raised:
                            compiled_batches(plog, start, stop, isolation, headers, rows)
                        assert str(raised.value) == str(e)
                        # onCorrupt=skip: the same rows, the damaged batches left out alike
                        assert_same_batches(compiled_batches(plog, start, stop, isolation, headers, rows, "skip"),
                                            python_batches(plog, start, stop, isolation, headers, rows, "skip"))
                        continue
                    assert_same_batches(compiled_batches(plog, start, stop, isolation, headers, rows), expected)


def test_the_fixtures_hold_what_the_compiled_path_must_mix_and_decline() -> None:
    """The fixtures above are not all plain v2 batches: legacy messages (the Python decoder's, mixed in),
    compressed batches of every codec, transactions, headers, null keys and values."""
    kinds: set[str] = set()
    for logdir, name in PARTITIONS:
        plog = LogDirs([logdir]).partition(name)
        try:
            for _, header, _, _ in plog.selected_batches(plog.log_start_offset(), control="show"):
                kinds.add(f"magic {header.magic}")
                kinds.add(header.compression)
                kinds.update(["transactional"] if header.is_transactional else [])
                kinds.update(["control"] if header.is_control else [])
        except CorruptLogError:
            continue
    assert {"magic 0", "magic 1", "magic 2", "none", "gzip", "snappy", "lz4", "zstd", "transactional",
            "control"} <= kinds, kinds


@pytest.mark.parametrize("on_corrupt", ["fail", "skip"])
def test_the_source_takes_the_compiled_path_and_its_rows_are_the_tasks(tmp_path: Path, on_corrupt: str) -> None:
    """`read_split`'s pieces go through the compiled builder (a whole split equals the Record path's),
    with either `onCorrupt`."""
    opts = parse_options({"path": ",".join(LOGDIRS), "includeHeaders": "true", "maxSplitBytes": "4096",
                          "onCorrupt": on_corrupt})
    calls = 0
    original = arrow_columns.compiled_arrow_batches

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        nonlocal calls
        calls += 1
        return original(*args, **kwargs)

    arrow_columns.compiled_arrow_batches = counting  # type: ignore[assignment]
    try:
        for split in plan_splits(opts):
            planned = PlannedPartitions()
            for piece in split.pieces:
                plog = planned.open(piece)
                got = list(piece_batches(plog, piece, opts, SCHEMAS[True]))
                lists = plog.record_lists(piece.start_offset, isolation=opts.isolation, end_offset=piece.end_offset,
                                          on_corrupt=on_corrupt)
                expected = list(arrow_batches(piece.topic, piece.partition, lists, SCHEMAS[True], True))
                assert_same_batches(got, expected)
    finally:
        arrow_columns.compiled_arrow_batches = original  # type: ignore[assignment]
    assert calls > 0


# ---- random batches -------------------------------------------------------------------------------

class _Segment:
    """What ColumnBuilder.add reads of a segment, for a batch outside any log dir."""

    base_offset = 0

    @staticmethod
    def records_of(header: BatchHeader, body: memoryview) -> list[Record]:
        return default_batch.decode_records(body, header)


def _one_batch(batch: bytes, first: int, end: int | None, rows: int = ROWS_PER_BATCH
               ) -> tuple[list[pa.RecordBatch], list[pa.RecordBatch], bool]:
    """The compiled builder's batches of one Kafka batch, the Record path's, and whether the compiled walk
    took it (or declined it to the decoder)."""
    header = parse_batch_header(batch, 0, 0)
    records = [r for r in default_batch.decode_records(batch, header)
               if r.offset >= first and (end is None or r.offset < end)]
    schema = SCHEMAS[True]
    expected = list(arrow_batches("t", 3, [records] if records else [], schema, True, rows))
    builder = arrow_columns.ColumnBuilder(schema.field("headers").type)
    took = builder._compiled(_Segment(), header, memoryview(batch), first, end)  # type: ignore[arg-type]
    if not took:
        builder.add(_Segment(), header, memoryview(batch), first, end)  # type: ignore[arg-type]
    got = list(arrow_columns._batches("t", 3, builder, schema, schema.field("timestamp").type, True, None)) \
        if builder.rows else []
    return got, expected, took


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=v2_batches(), bounds=st.tuples(st.integers(0, 40), st.integers(0, 40)), open_end=st.booleans())
def test_random_batches_give_the_record_paths_rows(batch: bytes, bounds: tuple[int, int], open_end: bool) -> None:
    base = int.from_bytes(batch[:8], "big")
    first = base + bounds[0]
    got, expected, took = _one_batch(batch, first, None if open_end else first + bounds[1])
    assert took  # (every batch the builder makes is one the compiled walk reads)
    assert_same_batches(got, expected)


def _with_crc(batch: bytearray) -> bytes:
    batch[17:21] = crc32c.crc32c(bytes(batch[21:])).to_bytes(4, "big")
    return bytes(batch)


def _plain_batch(headers: list[tuple[str, bytes | None]]) -> bytearray:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 30)
    builder.append(0, timestamp=5, key=None, value=b"v0", headers=[])
    builder.append(1, timestamp=6, key=b"", value=None, headers=headers)
    builder.append(2, timestamp=7, key=b"k2", value=b"", headers=[("h", b"x")])
    return bytearray(builder.build())


def test_a_header_key_that_is_not_utf8_is_the_decoders_replacement_characters() -> None:
    batch = _plain_batch([("A\x7f", b"x"), ("B", None)])
    at = bytes(batch).index(b"A\x7f")
    batch[at:at + 2] = b"\xff\xfe"
    got, expected, took = _one_batch(_with_crc(batch), 0, None)
    assert not took  # declined: the decoder's str, appended as a Record
    assert_same_batches(got, expected)
    assert got[0].column("headers")[1].as_py()[0]["key"] == "\ufffd\ufffd"


def test_a_malformed_records_section_is_declined_or_read_as_the_decoder_reads_it() -> None:
    """Bytes changed inside the CRC (the CRC then made to match): the walk declines, and the decoder raises
    or decodes; never a row the decoder does not give."""
    batch = _plain_batch([("trace", b"ab")])
    rnd = random.Random(11)
    declined = taken = 0
    for _ in range(1500):
        damaged = bytearray(batch)
        for _ in range(rnd.randrange(1, 4)):
            damaged[rnd.randrange(61, len(damaged))] = rnd.randrange(256)
        data = _with_crc(damaged)
        try:
            got, expected, took = _one_batch(data, 0, None)
        except CorruptBatchError as e:  # the decoder's error: the compiled walk declined it too
            header = parse_batch_header(data, 0, 0)
            builder = arrow_columns.ColumnBuilder(SCHEMAS[True].field("headers").type)
            assert not builder._compiled(_Segment(), header, memoryview(data), 0, None), e  # type: ignore[arg-type]
            assert builder.rows == 0
            declined += 1
            continue
        taken += took
        assert_same_batches(got, expected)
    assert declined > 100 and taken > 100, (declined, taken)


# ---- damaged log dirs: the same error ---------------------------------------------------------------

def _damaged_copy(tmp_path: Path, fix_crc: bool) -> tuple[PartitionLog, int]:
    """A copy of payments-0 with a byte of a record changed in its second batch (the CRC made to match when
    `fix_crc`: the records walk meets the damage; else the CRC check does); and that batch's position."""
    source = next(Path(d) / "payments-0" for d in LOGDIRS if (Path(d) / "payments-0").is_dir())
    copy = tmp_path / "logdir"
    copy.mkdir()
    shutil.copytree(source, copy / "payments-0")
    segment = sorted((copy / "payments-0").glob("*.log"))[0]
    data = bytearray(segment.read_bytes())
    first_size = 12 + int.from_bytes(data[8:12], "big")
    at = first_size
    header = parse_batch_header(bytes(data), at, at)
    assert header.magic == 2 and header.compression == "none" and header.record_count > 1
    data[at + 61] = 0x7F  # the first record's length: past the batch's end
    if fix_crc:
        end = at + header.size
        data[at + 17:at + 21] = crc32c.crc32c(bytes(data[at + 21:end])).to_bytes(4, "big")
    segment.write_bytes(bytes(data))
    return LogDirs([str(copy)]).partition("payments-0"), header.base_offset


@pytest.mark.parametrize("fix_crc", [False, True], ids=["crc", "records"])
def test_a_damaged_batch_raises_the_record_paths_error(tmp_path: Path, fix_crc: bool) -> None:
    plog, damaged_at = _damaged_copy(tmp_path, fix_crc)
    start = plog.log_start_offset()
    with pytest.raises(CorruptLogError) as expected:
        python_batches(plog, start, None, "read_uncommitted", True, 1)
    with pytest.raises(CorruptLogError) as got:
        compiled_batches(plog, start, None, "read_uncommitted", True, 1)
    assert str(got.value) == str(expected.value)
    assert ("CRC" in str(got.value)) != fix_crc
    # Rows before the damage come first, as on the Record path: a batch of 1 row is yielded per record.
    rows = []
    with pytest.raises(CorruptLogError):
        for b in compiled_arrow_batches(plog.topic, plog.partition, plog, start, None, "read_uncommitted",
                                        SCHEMAS[False], False, 1):
            rows += b.column("offset").to_pylist()
    assert rows == list(range(start, damaged_at))


@pytest.mark.parametrize("fix_crc", [False, True], ids=["crc", "records"])
def test_on_corrupt_skip_leaves_out_the_damaged_batch_as_the_record_path_does(tmp_path: Path, fix_crc: bool,
                                                                             caplog: pytest.LogCaptureFixture) -> None:
    plog, damaged_at = _damaged_copy(tmp_path, fix_crc)
    start = plog.log_start_offset()
    data = sorted((tmp_path / "logdir" / "payments-0").glob("*.log"))[0].read_bytes()
    at = 12 + int.from_bytes(data[8:12], "big")  # (the damaged batch: the second)
    skipped = set(range(damaged_at, parse_batch_header(data, at, at).last_offset + 1))
    assert skipped
    source = LogDirs([next(d for d in LOGDIRS if (Path(d) / "payments-0").is_dir())]).partition("payments-0")
    undamaged = [o for b in python_batches(source, start, None, "read_uncommitted", True, ROWS_PER_BATCH)
                 for o in b.column("offset").to_pylist()]
    for rows in (1, 7, ROWS_PER_BATCH):
        expected = python_batches(plog, start, None, "read_uncommitted", True, rows, "skip")
        with caplog.at_level("WARNING", logger="kfs"):
            caplog.clear()
            got = compiled_batches(plog, start, None, "read_uncommitted", True, rows, "skip")
        assert_same_batches(got, expected)
        assert [o for b in got for o in b.column("offset").to_pylist()] == [o for o in undamaged if o not in skipped]
        assert any("skipped" in r.getMessage() and ("CRC" in r.getMessage()) != fix_crc for r in caplog.records)


def test_records_of_another_type_are_refused() -> None:
    from kfs._native import spark as native

    assert native.arrow_builder is not None and native.arrow_append_records is not None
    builder = native.arrow_builder()
    with pytest.raises(TypeError):
        native.arrow_append_records(builder, [object()])
    good = Record(1, 2, "CreateTime", b"k", None, [("h", None)])
    assert native.arrow_append_records(builder, [good]) == 1
    with pytest.raises(KeyError):
        native.arrow_append_records(builder, [good, Record(2, 2, "Sometime", None, None, [])])
    assert native.arrow_append_records(builder, [good]) == 2  # (the failed call left the builder as it was)


# ---- with the decoded columns (kfs.spark.typed's decoders) ----------------------------------------

DECODED_READS = [(str(FIXTURES / "schema-registry" / "logdir"), {}),  # JSON text: every topic
                 (str(FIXTURES / "schema-registry" / "logdir"), {"subscribe": "orders"}),  # typed Avro
                 (str(FIXTURES / "schema-registry" / "logdir"), {"subscribe": "payments"}),  # typed Protobuf
                 (str(FIXTURES / "schema-evolution" / "logdir"), {"subscribe": "readings"})]  # resolved


@pytest.mark.parametrize(("logdir", "options"), DECODED_READS, ids=["json_text", "avro", "protobuf", "resolved"])
def test_decoded_columns_from_the_arrays_equal_those_from_records(logdir: str, options: dict[str, str]) -> None:
    """A decoder with `array_columns` is handed the compiled key, value and headers arrays; its columns equal
    what `columns` makes of the Records (the interface with kfs.spark.typed)."""
    from kfs.spark.source import KafkaLogDataSource, registry_for
    from kfs.spark.typed import plan_from_field, row_decoder

    opts = parse_options({"path": logdir, **options})
    spark_schema = KafkaLogDataSource({"path": logdir, **options}).schema()
    schema = to_arrow_schema(spark_schema, timezone="UTC")
    plans = [plan_from_field(spark_schema[f"{part}_decoded"]) for part in ("key", "value")]
    registry = registry_for(opts)
    dirs = LogDirs([logdir])
    checked = 0
    for name in dirs.partition_names():
        plog = dirs.partition(name)
        if opts.subscribe is not None and plog.topic not in opts.subscribe:
            continue
        decoder = row_decoder(registry, plans, plog.topic, plog)
        if not hasattr(decoder, "array_columns"):
            continue  # (the Record path's: kfs.spark.source.piece_batches)
        start = plog.log_start_offset()
        lists = plog.record_lists(start, isolation=opts.isolation)
        expected = list(arrow_batches(plog.topic, plog.partition, lists, schema, False, 5, decoder))
        got = list(compiled_arrow_batches(plog.topic, plog.partition, plog, start, None, opts.isolation, schema,
                                          False, 5, decoder))
        assert_same_batches(got, expected)
        checked += 1
    if checked == 0:
        pytest.skip("no decoder here has array_columns yet (kfs.spark.typed)")


# ---- random segments: the run walker (arrow_append_run) and the batch-at-a-time path ------------------

def _outcome(read: Callable[[], list[pa.RecordBatch]]) -> tuple[list[pa.RecordBatch], str | None]:
    """A read's batches up to its error, and the error (type and message)."""
    batches: list[pa.RecordBatch] = []
    try:
        for b in read():  # type: ignore[attr-defined]
            batches.append(b)
    except KfsError as e:
        return batches, f"{type(e).__name__}: {e}"
    return batches, None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(st.one_of(plain_batches(), plain_batches(), v2_batches()), min_size=1, max_size=8),
       data=st.data())
def test_random_segments_give_the_record_paths_batches_and_errors(batches: list[bytes], data: st.DataObject) -> None:
    """Random segments of random batches (uncompressed, lz4 frames, every codec, gaps, LogAppendTime), maybe
    with a base offset edited and one byte of damage anywhere, in one segment or two named near their
    first base offsets (as tests/test_plain_runs.py makes them): the same rows, Arrow batch for Arrow
    batch, and the same error after them, from random start and end offsets."""
    rebased = _rebased(batches, data.draw(st.lists(st.integers(0, 3), min_size=len(batches),
                                                   max_size=len(batches))))
    if data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(rebased) - 1))
        base, batch = rebased[i]
        base = max(0, base + data.draw(st.integers(-3, 2)))
        rebased[i] = (base, struct.pack(">q", base) + batch[8:])
    split = data.draw(st.integers(1, len(rebased))) if len(rebased) > 1 else len(rebased)
    segments = [rebased[:split], rebased[split:]] if split < len(rebased) else [rebased]
    names: list[int] = []
    for part in segments:
        low = names[-1] + 1 if names else 0
        names.append(max(low, part[0][0] + data.draw(st.sampled_from([0, 0, 0, -2, -1, 1]))))
    files = [bytearray(b"".join(batch for _, batch in part)) for part in segments]
    if data.draw(st.integers(0, 3)) == 0:
        damaged = files[data.draw(st.integers(0, len(files) - 1))]
        at = data.draw(st.integers(0, len(damaged) - 1))
        if data.draw(st.booleans()):
            damaged[at] ^= data.draw(st.integers(1, 255))
        else:
            del damaged[at:]
    with tempfile.TemporaryDirectory() as tmp:
        pdir = Path(tmp) / "walk-0"
        pdir.mkdir()
        for name, log in zip(names, files, strict=True):
            (pdir / f"{name:020d}.log").write_bytes(bytes(log))
        last_base, last_batch = segments[-1][-1]
        if len(segments[-1]) > 1 and data.draw(st.booleans()):  # the log end found from an index entry
            header = parse_batch_header(last_batch, 0, 0)
            last = last_base + header.last_offset - header.base_offset
            position = sum(len(batch) for _, batch in segments[-1][:-1])
            if 0 <= last - names[-1] < 2**31:
                (pdir / f"{names[-1]:020d}.index").write_bytes(struct.pack(">ii", last - names[-1], position))
        plog = LogDirs([tmp]).partition("walk-0")
        try:
            log_end = max(plog.log_end_offset(), 1)
        except KfsError:
            return
        start = data.draw(st.integers(0, log_end))
        end = data.draw(st.one_of(st.none(), st.integers(start, log_end + 2)))
        isolation = data.draw(st.sampled_from(["read_uncommitted", "read_committed"]))
        rows = data.draw(st.sampled_from([1, 3, ROWS_PER_BATCH]))
        max_bytes = data.draw(st.sampled_from([1, 40, 300, BYTES_PER_BATCH]))
        for on_corrupt in ("fail", "skip"):  # (skip: every batch but the damaged ones, resynchronised alike)
            expected, expected_error = _outcome(partial(python_batches, plog, start, end, isolation, True, rows,
                                                        on_corrupt, max_bytes))
            got, error = _outcome(partial(compiled_batches, plog, start, end, isolation, True, rows, on_corrupt,
                                          max_bytes))
            assert error == expected_error, on_corrupt
            assert_same_batches(got, expected)


def test_the_compiled_walk_runs_without_the_gil() -> None:
    """A Python thread runs while one long call appends a run of batches' rows: it could not if the call
    held the GIL (a Spark worker's other threads, and two readers in one process, go on meanwhile)."""
    import threading
    import time

    from kafka.record.default_records import DefaultRecordBatchBuilder

    from kfs._native import spark as native

    assert native.arrow_builder is not None and native.arrow_append_run is not None
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 30)
    for i in range(10000):
        builder.append(i, timestamp=1, key=b"key-%d" % i, value=b"v" * 20, headers=[("trace-id", b"ab12")])
    batch = bytes(builder.build())
    window = b"".join(struct.pack(">q", 10000 * k) + batch[8:] for k in range(30))  # (the base is outside the CRC)
    seen: list[float] = []
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            seen.append(time.perf_counter())

    thread = threading.Thread(target=spin)
    thread.start()
    inside: list[float] = []
    try:
        for _ in range(10):
            columns = native.arrow_builder()
            time.sleep(0.001)
            seen.clear()
            start, cpu = time.perf_counter(), time.thread_time()
            out = native.arrow_append_run(columns, window, 0, None, 1 << 40, 0, (1 << 63) - 1, False, 1 << 40)
            worked = time.thread_time() - cpu
            # Holding the GIL, the call would let the spinner run only once it returned (after `worked`
            # seconds at least), for a switch interval or more: only the first half of its work counts.
            inside = [t for t in seen if start + 0.002 < t < start + worked / 2]
            if inside and worked > 0.01:
                break
    finally:
        stop.set()
        thread.join()
    assert out == (len(window), 0, 299999, 299999, 300000)
    assert inside, "no Python bytecode ran while the compiled walk worked: it held the GIL"


def test_each_read_freezes_what_the_worker_holds() -> None:
    """PySpark's daemon collects garbage fully after every task of a reused worker: what the worker holds
    when a read starts is frozen out of those collections (kfs.spark.source.freeze_worker_heap): at the
    first read its modules, at the next what the first one imported.
    (In a child process: freezing this one would keep the test session's garbage cycles.)"""
    import subprocess
    import sys

    script = f"""
import gc
from kfs.spark.options import parse_options
from kfs.spark.plan import plan_splits
from kfs.spark.source import KafkaLogReader, kafka_schema
from pyspark.sql.datasource import InputPartition
opts = parse_options({{"path": {LOGDIRS[1]!r}, "maxSplitBytes": "4096"}})
reader = KafkaLogReader(opts, kafka_schema(False))
assert gc.get_freeze_count() == 0
counts = []
for split in plan_splits(opts):
    sum(b.num_rows for b in reader.read(InputPartition(split)))
    counts.append(gc.get_freeze_count())
print(counts[0] > 1000, len(counts) > 2 and counts[1] > counts[0] and counts == sorted(counts))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True"], out.stdout + out.stderr


@pytest.mark.parametrize("limit", [300, 20000])
def test_a_column_at_its_data_limit_is_taken_as_a_batch_of_its_own(monkeypatch: pytest.MonkeyPatch,
                                                                   limit: int) -> None:
    """A builder whose binary column would pass its data limit (Arrow's int32 offsets: 2 GiB) hands the
    rows so far over as a batch of their own and goes on: the same rows, in more batches. Here the limit
    is lowered to a few batches' worth, on every fixture partition of the Kafka-written log dirs."""
    monkeypatch.setattr(arrow_columns, "DATA_LIMIT", limit)
    split_any = overflowed = False
    for logdir in LOGDIRS:
        for name in LogDirs([logdir]).partition_names():
            plog = LogDirs([logdir]).partition(name)
            start = plog.log_start_offset()
            try:
                expected = python_batches(plog, start, None, "read_uncommitted", True, ROWS_PER_BATCH)
            except CorruptLogError:
                continue
            try:
                got = compiled_batches(plog, start, None, "read_uncommitted", True, ROWS_PER_BATCH)
            except OverflowError:  # one Kafka batch past the lowered limit: said, never cut
                overflowed = True
                continue
            split_any |= len(got) > len(expected)
            if not expected:
                assert not got
                continue
            table = pa.Table.from_batches(got, schema=expected[0].schema)
            assert table.equals(pa.Table.from_batches(expected)), name
            for b in got:
                b.validate(full=True)
                assert all(len(b.column(c).buffers()[2] or b"") <= limit for c in ("key", "value"))
    assert split_any and overflowed == (limit < 2000)


def _records_bytes(records: list[Record]) -> int:
    """The bytes of keys, values and headers of one Kafka batch's records, counted from the Records."""
    return sum(len(r.key or b"") + len(r.value or b"") + sum(len(k.encode()) + len(v or b"") for k, v in r.headers)
               for r in records)


def _payload_bytes(batch: pa.RecordBatch) -> int:
    """What a batch holds of keys, values and headers (the bytes BYTES_PER_BATCH bounds)."""
    headers = batch.column("headers").flatten()
    return sum(pc.sum(pc.binary_length(column)).as_py() or 0
               for column in (batch.column("key"), batch.column("value"), *headers.flatten()))


@pytest.mark.parametrize("max_bytes", [1, 700, 9000])
def test_a_batch_is_closed_at_its_bytes_as_at_its_rows(max_bytes: int) -> None:
    """A batch is closed after the Kafka batch that brings its keys, values and headers to `max_bytes`
    bytes (BYTES_PER_BATCH: 32 MiB), whatever its rows: 16,384 records of 1 MiB are not one batch of
    16 GiB. On every fixture partition, with the limit lowered: the Record path's batches, every one but
    the last at the limit or past it, and none past it by more than the partition's largest Kafka batch."""
    closed_early = 0
    for logdir, name in PARTITIONS:
        plog = LogDirs([logdir]).partition(name)
        start = plog.log_start_offset()
        try:
            expected = python_batches(plog, start, None, "read_uncommitted", True, ROWS_PER_BATCH, max_bytes=max_bytes)
            largest = max(map(_records_bytes, plog.record_lists(start)), default=0)
        except CorruptLogError:
            continue
        got = compiled_batches(plog, start, None, "read_uncommitted", True, ROWS_PER_BATCH, max_bytes=max_bytes)
        assert_same_batches(got, expected)
        sizes = [_payload_bytes(b) for b in got]
        assert all(size >= max_bytes for size in sizes[:-1]), (name, sizes)
        assert all(size < max_bytes + largest for size in sizes), (name, sizes, largest)
        closed_early += len(got) - len(python_batches(plog, start, None, "read_uncommitted", True, ROWS_PER_BATCH))
    assert closed_early > 0


@pytest.mark.parametrize("record_path", [False, True])
def test_a_tasks_batches_are_bounded_by_their_bytes(monkeypatch: pytest.MonkeyPatch, record_path: bool) -> None:
    """A Spark task (the reader's `read`, compiled or on the Record path) closes its batches at
    BYTES_PER_BATCH as it reads: lowered to 4 KiB, the same rows as with 32 MiB, in batches none of
    which holds more than 4 KiB and one Kafka batch's keys, values and headers."""
    from pyspark.sql.datasource import InputPartition

    from kfs.spark.source import KafkaLogReader

    monkeypatch.setattr(arrow_columns, "AVAILABLE", not record_path)
    opts = parse_options({"path": LOGDIRS[0], "includeHeaders": "true"})
    reader = KafkaLogReader(opts, kafka_schema(True))

    def read() -> list[pa.RecordBatch]:
        return [b for split in plan_splits(opts) for b in reader.read(InputPartition(split))]

    whole = read()
    monkeypatch.setattr(arrow_columns, "BYTES_PER_BATCH", 4096)
    bounded = read()
    assert len(bounded) > 2 * len(whole)
    assert pa.Table.from_batches(bounded).equals(pa.Table.from_batches(whole))
    largest = max(_records_bytes(records)
                  for plog in map(LogDirs([LOGDIRS[0]]).partition, LogDirs([LOGDIRS[0]]).partition_names())
                  for records in plog.record_lists(plog.log_start_offset(), on_corrupt="skip")
                  if type(records[0]) is not CorruptBatch)
    assert max(_payload_bytes(b) for b in bounded) < 4096 + largest


def test_the_headers_type_without_the_column_is_sparks() -> None:
    """A decoder is handed headers of Spark's type whether the schema shows the column or not."""
    assert SCHEMAS[True].field("headers").type == arrow_columns.HEADERS_ARROW_TYPE


@pytest.mark.parametrize("log_dir", LOG_DIRS)
def test_without_payloads_every_other_column_is_the_same(log_dir):
    """A pruned read that shows no key, value or header (kfs.spark.pruning) copies none: they come null
    and empty, every other column exactly as with them, batch for batch."""
    dirs = LogDirs([log_dir])
    for name in dirs.partition_names():
        plog = dirs.partition(name)
        start = plog.log_start_offset()
        with_them = compiled_batches(plog, start, None, "read_uncommitted", True, 7)
        without = list(compiled_arrow_batches(plog.topic, plog.partition, plog, start, None, "read_uncommitted",
                                              SCHEMAS[True], True, 7, payloads=False))
        assert [b.num_rows for b in without] == [b.num_rows for b in with_them]
        for got, full in zip(without, with_them, strict=True):
            got.validate(full=True)
            for column in ("topic", "partition", "offset", "timestamp", "timestampType"):
                assert got.column(column).equals(full.column(column)), (name, column)
            assert got.column("key").null_count == got.column("value").null_count == got.num_rows
            assert all(len(h) == 0 for h in got.column("headers").to_pylist())
