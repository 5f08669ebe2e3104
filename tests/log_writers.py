"""Log dirs of generated records, written the way Kafka lays them out: shared by the tests and the
benchmarks (benchmarks/), so that both measure and check the same data.

- `build_batches`, `write_log_dir`: one partition `bench-0` of v2 batches with Kafka's segment files
  and indexes (index.interval.bytes 4096), segments rolled at a size;
- `build_chunk`, `write_generated_segment`: ~1 MiB of mixed-codec v2 batches, copied (offsets and
  timestamps moved on) into one large segment with its indexes;
- `build_logdir`, `memory`: a log dir of one large partition and many small ones (hard links to one
  segment), and a process's resident memory, for the memory bounds.
"""

from __future__ import annotations

import array
import os
import random
import struct
import sys
from pathlib import Path
from typing import BinaryIO

import crc32c

T0 = 1_700_000_000_000
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
TOPIC, PARTITION = "bench", 0
INDEX_INTERVAL = 4096
_OFFSET = struct.Struct(">q")
_TIMESTAMPS = struct.Struct(">qq")  # baseTimestamp, maxTimestamp at byte 27 of a v2 batch


def build_batches(distinct: int, per_batch: int, value_size: int) -> list[bytes]:
    """`distinct` v2 batches of `per_batch` records each (key, value, one header), uncompressed."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    batches = []
    ts = 1_700_000_000_000
    for b in range(distinct):
        builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                            producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                            batch_size=1 << 30)
        for i in range(per_batch):
            n = b * per_batch + i
            value = (f'{{"n": {n}, "user": "user-{n % 977}", "pad": "' + "x" * value_size)[:value_size] + '"}'
            builder.append(i, timestamp=ts + n, key=f"user-{n % 977}".encode(), value=value.encode(),
                           headers=[("trace-id", f"{n:016x}".encode())])
        batches.append(bytes(builder.build()))
    return batches


def write_log_dir(path: str, records: int, segment_bytes: int, per_batch: int = 500,
                  value_size: int = 100) -> None:
    """One partition `bench-0` of about `records` records, with Kafka's segment files and indexes."""
    partition = os.path.join(path, "bench-0")
    os.makedirs(partition)
    batches = build_batches(16, per_batch, value_size)
    offset = 0
    segment = None
    log: BinaryIO | None = None
    index: BinaryIO | None = None
    timeindex: BinaryIO | None = None
    position = since_entry = 0
    max_ts = last_time_entry = max_ts_offset = -1
    n = 0
    while offset < records:
        batch = bytearray(batches[n % len(batches)])
        n += 1
        if segment is None or position + len(batch) > segment_bytes:
            for f in (log, index, timeindex):
                if f is not None:
                    f.close()
            segment, position, since_entry, max_ts, last_time_entry = offset, 0, 0, -1, -1
            log = open(os.path.join(partition, f"{segment:020d}.log"), "wb")  # noqa: SIM115
            index = open(os.path.join(partition, f"{segment:020d}.index"), "wb")  # noqa: SIM115
            timeindex = open(os.path.join(partition, f"{segment:020d}.timeindex"), "wb")  # noqa: SIM115
        assert log is not None and index is not None and timeindex is not None
        # A copy's base offset is not under the CRC; its timestamps are, so moving them on re-signs it.
        _OFFSET.pack_into(batch, 0, offset)
        shift = (n - 1) // len(batches) * len(batches) * per_batch
        base_ts, batch_max_ts = _TIMESTAMPS.unpack_from(batch, 27)
        batch_max_ts += shift
        _TIMESTAMPS.pack_into(batch, 27, base_ts + shift, batch_max_ts)
        struct.pack_into(">I", batch, 17, crc32c.crc32c(memoryview(batch)[21:]))
        last = offset + per_batch - 1
        log.write(batch)
        if batch_max_ts > max_ts:
            max_ts, max_ts_offset = batch_max_ts, last
        # LogSegment.append: index entries once more than index.interval.bytes went by since the
        # last; the time index only when the largest timestamp grew (TimeIndex.maybeAppend).
        if since_entry > INDEX_INTERVAL:
            index.write(struct.pack(">ii", last - segment, position))
            if max_ts > last_time_entry:
                timeindex.write(struct.pack(">qi", max_ts, max_ts_offset - segment))
                last_time_entry = max_ts
            since_entry = 0
        since_entry += len(batch)
        position += len(batch)
        offset = last + 1
    for f in (log, index, timeindex):
        if f is not None:
            f.close()


def build_chunk(codecs: list[str], target_bytes: int = 1 << 20, seed: int = 1) -> tuple[bytes, list[int], int]:
    """~1 MiB of v2 batches from offset 0: (bytes, batch positions, records in the chunk)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    rng = random.Random(seed)
    out = bytearray()
    positions: list[int] = []
    offset = 0
    ts = T0
    while len(out) < target_bytes:
        codec = CODECS[codecs[len(positions) % len(codecs)]]
        builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                            producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=16384)
        delta = 0
        while True:
            ts += rng.randint(0, 3)
            key = f"user-{rng.randint(0, 99999)}".encode()
            value = (f'{{"n": {offset + delta}, "event": "{rng.choice(["view", "click", "buy"])}", '
                     f'"pad": "{"x" * rng.randint(20, 200)}"}}').encode()
            headers = [("trace-id", rng.randbytes(8).hex().encode())] if delta % 3 == 0 else []
            if builder.append(delta, timestamp=ts, key=key, value=value, headers=headers) is None:
                break
            delta += 1
        batch = builder.build()
        struct.pack_into(">q", batch, 0, offset)
        positions.append(len(out))
        out += batch
        offset += delta
    return bytes(out), positions, offset


def write_generated_segment(directory: str, size_mb: int, codecs: list[str]) -> tuple[str, int, int]:
    """`<dir>/bench-0/00000000000000000000.log` with its indexes (Kafka's rule, 4096-byte interval)."""
    chunk, positions, chunk_records = build_chunk(codecs)
    partition_dir = os.path.join(directory, f"{TOPIC}-{PARTITION}")
    os.makedirs(partition_dir, exist_ok=True)
    copies = max(1, (size_mb << 20) // len(chunk))
    bases = [struct.unpack_from(">q", chunk, p)[0] for p in positions]
    ends = [*positions[1:], len(chunk)]
    offset_entries = array.array("i")
    time_entries: list[tuple[int, int]] = []
    since_entry = 0
    with open(os.path.join(partition_dir, f"{0:020d}.log"), "wb") as log:
        for copy in range(copies):
            buf = bytearray(chunk)
            shift = copy * chunk_records
            for p, base in zip(positions, bases, strict=True):
                struct.pack_into(">q", buf, p, base + shift)
            for p, end in zip(positions, ends, strict=True):  # every batch is an append
                if since_entry > 4096:
                    last = struct.unpack_from(">i", buf, p + 23)[0] + struct.unpack_from(">q", buf, p)[0]
                    offset_entries.extend((last, copy * len(chunk) + p))
                    if not time_entries:
                        time_entries.append((struct.unpack_from(">q", buf, p + 35)[0], last))
                    since_entry = 0
                since_entry += end - p
            log.write(buf)
        log.flush()
        os.fsync(log.fileno())
    if sys.byteorder == "little":
        offset_entries.byteswap()
    with open(os.path.join(partition_dir, f"{0:020d}.index"), "wb") as f:
        f.write(offset_entries.tobytes())
    with open(os.path.join(partition_dir, f"{0:020d}.timeindex"), "wb") as f:
        f.write(b"".join(struct.pack(">qi", t, o) for t, o in time_entries))
    return partition_dir, copies * len(chunk), copies * chunk_records


def memory(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of a process, in KiB."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0])
    return found


def build_logdir(root: Path, partitions: int, values: int) -> tuple[Path, int]:
    """The log dir; returns it and the number of records in bench-0."""
    logdir = root / "logdir"
    logdir.mkdir()
    (logdir / "meta.properties").write_text("version=1\nnode.id=0\ncluster.id=bench\n")
    size_mb = 1
    while True:  # bench_core's 1 MiB chunks hold a few thousand records each
        _, _, records = write_generated_segment(str(logdir), size_mb, ["none"])
        if records > values:
            break
        size_mb = max(size_mb + 1, size_mb * values // max(records, 1) + 1)
    chunk, _, _ = build_chunk(["none"], target_bytes=32 * 1024)
    small = root / "small.log"
    small.write_bytes(chunk)
    for i in range(partitions):
        directory = logdir / f"wide-{i}"
        directory.mkdir()
        os.link(small, directory / f"{0:020d}.log")  # (kfs follows no symbolic link to a segment)
    return logdir, records
