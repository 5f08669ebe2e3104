"""The Spark benchmark's data: one topic's records as a Kafka log dir and, the same records, as JSON lines.

- `<root>/logdir/orders-<p>/`: `partitions` partitions of v2 batches (500 records, uncompressed),
  segments rolled at `segment_bytes`, `.index`/`.timeindex` entries by Kafka's rule
  (`LogSegment.append`, index.interval.bytes 4096); values framed as a schema registry's Avro
  serializer frames them (magic 0, schema id, Avro binary of `ORDER`), registered in
  `<root>/logdir/_schemas-0` as the registry itself writes its topic;
- `<root>/records.jsonl/part-<p>.jsonl`: every record of the log, one JSON line each: topic,
  partition, offset, timestamp (ms), key, and the value as the JSON object it decodes to.

A partition holds a few distinct batches built by kafka-python's builder (independent of kfs),
copied with their base offsets and timestamps moved on (re-signed: the CRC covers the timestamps);
the JSON lines of a copy are written from the same fields at the same time, so the two cannot
disagree. The sizes: about 210 bytes of log and 300 of JSON per record.
"""

from __future__ import annotations

import io
import json
import os
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import crc32c

TOPIC = "orders"
SUBJECT = f"{TOPIC}-value"
SCHEMA_ID = 1
ORDER = {"type": "record", "name": "Order", "namespace": "bench", "fields": [
    {"name": "n", "type": "long"},
    {"name": "user", "type": "string"},
    {"name": "amount", "type": "long"},
    {"name": "note", "type": "string"},
]}
T0 = 1_700_000_000_000
PER_BATCH = 500
DISTINCT = 8  # distinct batches per partition, copied round-robin
INDEX_INTERVAL = 4096
NOTE = "n" * 160


def _zigzag(n: int) -> bytes:
    """An Avro long (zig-zag varint)."""
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _avro_string(s: str) -> bytes:
    data = s.encode()
    return _zigzag(len(data)) + data


def order(n: int) -> dict[str, Any]:
    return {"n": n, "user": f"user-{n % 977}", "amount": (n * 7919) % 100_000, "note": NOTE}


def framed(value: dict[str, Any]) -> bytes:
    """Confluent's wire format: magic byte 0, the schema id (4 bytes), the Avro binary datum."""
    datum = (_zigzag(value["n"]) + _avro_string(value["user"]) + _zigzag(value["amount"])
             + _avro_string(value["note"]))
    return b"\0" + struct.pack(">I", SCHEMA_ID) + datum


def _batch(records: Sequence[tuple[int, int, bytes | None, bytes]]) -> bytes:
    """A v2 batch from kafka-python's builder: (offset delta, timestamp, key, value) per record."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    for delta, timestamp, key, value in records:
        builder.append(delta, timestamp=timestamp, key=key, value=value, headers=[])
    return bytes(builder.build())


@dataclass
class _Distinct:
    batch: bytes
    lines: list[str]  # each record's JSON line after its offset and timestamp: ', "key": ..., "value": {...}}'


def _distinct_batches(partition: int) -> list[_Distinct]:
    out = []
    for b in range(DISTINCT):
        first = (partition * DISTINCT + b) * PER_BATCH
        values = [order(first + i) for i in range(PER_BATCH)]
        records = [(i, T0 + i, f"user-{(first + i) % 977}".encode(), framed(v)) for i, v in enumerate(values)]
        lines = [f', "timestampType": 0, "key": "{k.decode()}", "value": {json.dumps(v)}}}\n'
                 for (_, _, k, _), v in zip(records, values, strict=True)]
        out.append(_Distinct(_batch(records), lines))
    return out


class _Segments:
    """Appends batches to a partition's segments with their indexes, rolling at `segment_bytes`."""

    def __init__(self, directory: str, segment_bytes: int) -> None:
        self.directory, self.segment_bytes = directory, segment_bytes
        self.files: list[io.BufferedWriter] = []
        self.base = self.position = self.since_entry = 0
        self.max_ts = self.last_time_entry = self.max_ts_offset = -1

    def _roll(self, offset: int) -> None:
        self.close()
        self.base, self.position, self.since_entry, self.max_ts, self.last_time_entry = offset, 0, 0, -1, -1
        self.files = [open(os.path.join(self.directory, f"{offset:020d}.{ext}"), "wb")  # noqa: SIM115
                      for ext in ("log", "index", "timeindex")]

    def append(self, batch: bytes, base_offset: int, last_offset: int, max_ts: int) -> None:
        if not self.files or self.position + len(batch) > self.segment_bytes:
            self._roll(base_offset)
        log, index, timeindex = self.files
        log.write(batch)
        if max_ts > self.max_ts:
            self.max_ts, self.max_ts_offset = max_ts, last_offset
        if self.since_entry > INDEX_INTERVAL:  # LogSegment.append, TimeIndex.maybeAppend
            index.write(struct.pack(">ii", last_offset - self.base, self.position))
            if self.max_ts > self.last_time_entry:
                timeindex.write(struct.pack(">qi", self.max_ts, self.max_ts_offset - self.base))
                self.last_time_entry = self.max_ts
            self.since_entry = 0
        self.since_entry += len(batch)
        self.position += len(batch)

    def close(self) -> None:
        for f in self.files:
            f.close()
        self.files = []


def _copies(distinct: list[_Distinct], records: int) -> Iterator[tuple[bytearray, int, int, int, _Distinct]]:
    """(batch, base offset, timestamp shift, max timestamp, its distinct batch) for each copy."""
    offset = n = 0
    while offset < records:
        d = distinct[n % len(distinct)]
        batch = bytearray(d.batch)
        struct.pack_into(">q", batch, 0, offset)
        shift = offset  # timestamps grow with offsets: T0 + offset
        base_ts, max_ts = struct.unpack_from(">qq", batch, 27)
        struct.pack_into(">qq", batch, 27, base_ts + shift, max_ts + shift)
        struct.pack_into(">I", batch, 17, crc32c.crc32c(memoryview(batch)[21:]))
        yield batch, offset, shift, max_ts + shift, d
        offset += PER_BATCH
        n += 1


def write_partition(logdir: str, json_dir: str, partition: int, records: int, segment_bytes: int) -> int:
    """One partition of about `records` records (whole batches) and its JSON lines; returns the count."""
    directory = os.path.join(logdir, f"{TOPIC}-{partition}")
    os.makedirs(directory)
    segments = _Segments(directory, segment_bytes)
    count = 0
    prefix = f'{{"topic": "{TOPIC}", "partition": {partition}, "offset": '
    with open(os.path.join(json_dir, f"part-{partition}.jsonl"), "w") as out:
        for batch, base, shift, max_ts, d in _copies(_distinct_batches(partition), records):
            segments.append(bytes(batch), base, base + PER_BATCH - 1, max_ts)
            out.write("".join(f"{prefix}{base + i}, \"timestamp\": {T0 + i + shift}{line}"
                              for i, line in enumerate(d.lines)))
            count += PER_BATCH
    segments.close()
    return count


def write_schemas(logdir: str) -> None:
    """`_schemas-0`: the one record the registry writes when `orders-value` version 1 is registered."""
    key = {"keytype": "SCHEMA", "subject": SUBJECT, "version": 1, "magic": 1}
    value = {"subject": SUBJECT, "version": 1, "id": SCHEMA_ID, "schema": json.dumps(ORDER), "deleted": False}
    directory = os.path.join(logdir, "_schemas-0")
    os.makedirs(directory)
    segments = _Segments(directory, 1 << 30)
    segments.append(_batch([(0, T0, json.dumps(key).encode(), json.dumps(value).encode())]), 0, 0, T0)
    segments.close()


def write(root: str, records: int, partitions: int, segment_bytes: int) -> int:
    """The log dir and the JSON lines under `root` (which must not exist); returns the record count."""
    logdir, json_dir = os.path.join(root, "logdir"), os.path.join(root, "records.jsonl")
    os.makedirs(logdir)
    os.makedirs(json_dir)
    with open(os.path.join(logdir, "meta.properties"), "w") as f:
        f.write("version=1\nnode.id=1\ncluster.id=kfs-bench-spark\n")
    write_schemas(logdir)
    per = -(-records // partitions)
    return sum(write_partition(logdir, json_dir, p, per, segment_bytes) for p in range(partitions))
