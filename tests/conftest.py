"""Shared test paths and helpers: the Kafka-written fixtures, the `kfs` command, and a small log writer.

The writer builds v2 batches with kafka-python's `DefaultRecordBatchBuilder` (an implementation of
the format independent of kfs) and lays out segments and sparse indexes by Kafka's own rule
(`LogSegment.append`): before an append, if more than `index_interval_bytes` were appended since the
last entry, add an offset index entry (the append's last offset, the position of its first batch)
and a time index entry (the largest timestamp so far and the last offset of its batch) when that
timestamp grew. A segment that is not the last one gets the closing time index entry
(`LogSegment.onBecomeInactiveSegment`).
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures" / "kafka-written"
GOLDEN = FIXTURES / "golden"
LOGDIRS = [str(FIXTURES / "logdirs" / "broker-a"), str(FIXTURES / "logdirs" / "broker-b")]
GOLDEN_PARTITIONS = sorted(p.name for p in GOLDEN.iterdir() if p.is_dir())
KFS = shutil.which("kfs")  # the installed console script; `python -m kfs.cli.main` otherwise

# Mounts and commands keep decoded sizes in $XDG_CACHE_HOME/kfs: the tests' go to a directory of their own.
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="kfs-test-cache-")
# The tests' JVMs (local sessions' and `kfs spark`'s drivers, a cluster's daemons; its executors through
# tests/spark_cluster.py) live seconds: C1 alone compiles what they run. C2's threads, which pay off only
# over many queries, took a third of the machine in small queries (docs/spark.md); a Spark test module
# took 72 s with them and 55 s without. Not for the benchmarks, whose JVMs run warm.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"
os.environ.setdefault("SPARK_SUBMIT_OPTS", TEST_JVM_OPTIONS)
os.environ.setdefault("SPARK_DAEMON_JAVA_OPTS", TEST_JVM_OPTIONS)


# The test files that take minutes (a Spark cluster's start-up and jobs, a Spark application of their own),
# slowest first: collected first, so pytest-xdist (`--dist loadfile` hands files out in collection order)
# starts them at once, and the suite does not end with one worker running a cluster while the others idle.
SLOW_FILES_FIRST = ("test_spark_cluster.py", "test_spark_broker_local.py", "test_spark_pruning.py",
                    "test_spark_aggregates.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(SLOW_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # (stable: each file keeps its order)


@pytest.fixture(autouse=True)
def _compiled_path_after_each_test() -> Iterator[None]:
    """The fuzz tests switch kfs's modules between the compiled and the pure-Python path
    (tests/fuzz/fuzz_targets.py use_path): each test leaves them compiled, as it found them. Left on
    the Python path, the test modules after them compared the Python path with itself
    (tests/test_plain_runs.py's walker tests passed without the walker)."""
    yield
    fuzz_targets = sys.modules.get("fuzz_targets")
    if fuzz_targets is not None:
        fuzz_targets.use_path("c")


def read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def golden_logdir(partition: str) -> str:
    """The fixture log dir that holds `partition`."""
    return next(d for d in LOGDIRS if os.path.isdir(os.path.join(d, partition)))


def kfs_command() -> list[str]:
    """The `kfs` command: the installed console script, or this Python running kfs's CLI (a checkout
    with kfs importable but not installed, or a venv not on PATH)."""
    return [KFS] if KFS else [sys.executable, "-m", "kfs.cli.main"]


def run_kfs(*args: str) -> subprocess.CompletedProcess:
    """`kfs ARGS...` as a user runs it, output captured as bytes."""
    return subprocess.run([*kfs_command(), *args], capture_output=True, timeout=120)


# ---- a log writer independent of kfs -------------------------------------------------------------

@dataclass
class WrittenBatch:
    segment_base_offset: int
    position: int
    size: int
    base_offset: int
    last_offset: int
    records: list[tuple[int, int, bytes | None, bytes | None, list]]  # (offset, timestamp, key, value, headers)

    @property
    def max_timestamp(self) -> int:
        return max(r[1] for r in self.records)


@dataclass
class WrittenSegment:
    base_offset: int
    batches: list[WrittenBatch] = field(default_factory=list)
    offset_index: list[tuple[int, int]] = field(default_factory=list)   # (absolute offset, position)
    time_index: list[tuple[int, int]] = field(default_factory=list)     # (timestamp, absolute offset)


def v2_batch(base_offset: int, records: list[tuple[int, int, bytes | None, bytes | None, list]],
             codec: int = 0) -> bytes:
    """A v2 batch from kafka-python's builder; records are (absolute offset, timestamp, key, value, headers)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    for offset, timestamp, key, value, headers in records:
        builder.append(offset - base_offset, timestamp=timestamp, key=key, value=value, headers=headers)
    buf = builder.build()
    struct.pack_into(">q", buf, 0, base_offset)  # the base offset is outside the CRC
    return bytes(buf)


def write_segment(directory: str, base_offset: int, appends: list[list[tuple[bytes, list]]],
                  index_interval_bytes: int = 4096, closed: bool = True) -> WrittenSegment:
    """Write `<base>.log`, `.index`, `.timeindex`; appends are lists of (batch bytes, its records)."""
    seg = WrittenSegment(base_offset)
    log = bytearray()
    since_entry = 0
    max_ts, max_ts_offset = -1, -1
    for append in appends:
        first_position = len(log)
        for data, records in append:
            base, = struct.unpack_from(">q", data, 0)
            batch = WrittenBatch(base_offset, len(log), len(data), base, records[-1][0], records)
            seg.batches.append(batch)
            log += data
            if batch.max_timestamp > max_ts:
                max_ts, max_ts_offset = batch.max_timestamp, batch.last_offset
        if since_entry > index_interval_bytes:
            seg.offset_index.append((append[-1][1][-1][0], first_position))
            if not seg.time_index or max_ts > seg.time_index[-1][0]:
                seg.time_index.append((max_ts, max_ts_offset))
            since_entry = 0
        since_entry += len(log) - first_position
    if closed and seg.batches and (not seg.time_index or max_ts > seg.time_index[-1][0]):
        seg.time_index.append((max_ts, max_ts_offset))
    stem = os.path.join(directory, f"{base_offset:020d}")
    Path(stem + ".log").write_bytes(log)
    Path(stem + ".index").write_bytes(offset_index_bytes(seg.offset_index, base_offset))
    Path(stem + ".timeindex").write_bytes(time_index_bytes(seg.time_index, base_offset))
    return seg


def offset_index_bytes(entries: list[tuple[int, int]], base_offset: int) -> bytes:
    return b"".join(struct.pack(">ii", offset - base_offset, position) for offset, position in entries)


def time_index_bytes(entries: list[tuple[int, int]], base_offset: int) -> bytes:
    return b"".join(struct.pack(">qi", timestamp, offset - base_offset) for timestamp, offset in entries)
