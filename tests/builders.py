"""Builders shared by several test modules, in one place so that no test module imports another.

- `kafka_python_batches`: v2 batches written by kafka-python (a writer independent of kfs);
- `make_log`, `partition_log`, `Oracle`: a partition written with conftest's log writer, and a
  brute-force model of what was written, to compare every lookup and read with;
- `golden_batches`, `golden_rows`: the Kafka-written fixtures walked batch by batch, and their golden
  records as tuples (topic, partition, offset, timestamp, type, key, value, headers).
"""

from __future__ import annotations

import base64
import json
import random
import struct
from pathlib import Path

import crc32c
from conftest import FIXTURES, LOGDIRS, WrittenBatch, WrittenSegment, v2_batch, write_segment
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from kfs.record import HEADER_PROBE_SIZE, complete_legacy_header, parse_batch_header, peek_size
from kfs.storage import LogDirs, PartitionLog


def kafka_python_batches(rnd: random.Random, n_batches: int, per_batch: int, headers: bool,
                         codec: int = 0) -> bytes:
    alphabet = b'abcdefghij {}":,0123456789'
    out = bytearray()
    for n in range(n_batches):
        builder = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 30)
        for i in range(per_batch):
            value = bytes(rnd.choice(alphabet) for _ in range(rnd.randrange(50, 150)))
            builder.append(i, 1526384718288 + 3 * i, b"user-%d" % rnd.randrange(1000), value,
                           [("trace-id", b"ab12cd34"), ("content-type", b"json")] if headers else [])
        batch = builder.build()
        struct.pack_into(">q", batch, 0, n * per_batch)
        out += batch
    return bytes(out)


class Oracle:
    """Brute force over what was written."""

    def __init__(self, segments: list[WrittenSegment]) -> None:
        self.segments = segments
        self.batches: list[WrittenBatch] = [b for s in segments for b in s.batches]
        self.records = [(b, r) for b in self.batches for r in b.records]
        self.log_start = segments[0].base_offset
        last = segments[-1]
        self.log_end = last.batches[-1].last_offset + 1 if last.batches else last.base_offset

    def records_from(self, n: int) -> list[tuple]:
        return [r for _, r in self.records if r[0] >= n]

    def locate_offset(self, n: int) -> dict:
        batch = next(b for b in self.batches if b.last_offset >= n)
        record = next(r for _, r in self.records if r[0] >= n)
        return {"segment_base_offset": batch.segment_base_offset, "position": batch.position,
                "batch_base_offset": batch.base_offset, "batch_last_offset": batch.last_offset,
                "offset": record[0], "timestamp": record[1]}

    def locate_time(self, t: int) -> dict | None:
        for seg in self.segments:
            if seg.batches and max(b.max_timestamp for b in seg.batches) >= t:
                batch, record = next((b, r) for b in seg.batches for r in b.records if r[1] >= t)
                return {"segment_base_offset": seg.base_offset, "position": batch.position,
                        "batch_base_offset": batch.base_offset, "batch_last_offset": batch.last_offset,
                        "offset": record[0], "timestamp": record[1]}
        return None


T0 = 1_700_000_000_000


PEAK = T0 + 10**6


def make_log(tmp_path: Path, segments: int = 3, codec: int = 0, peak: bool = False):
    """A partition of `segments` segments, 12 batches of 5 records each, out-of-order timestamps; with
    `peak`, the last record of segment 0's 7th batch has the partition's largest timestamp, PEAK."""
    directory = tmp_path / "bad.input-0"
    directory.mkdir()
    rng = random.Random(7)
    offset, ts, written = 0, T0, []
    for s in range(segments):
        appends = []
        for b in range(12):
            records = []
            for r in range(5):
                ts += rng.randint(-30, 50)
                value = f"value-{offset}-{'x' * rng.randint(0, 60)}".encode()
                stamp = PEAK if peak and (s, b, r) == (0, 6, 4) else ts
                records.append((offset, stamp, f"k{offset}".encode(), value, [("h", b"v")]))
                offset += 1
            appends.append([(v2_batch(records[0][0], records, codec), records)])
        written.append(write_segment(str(directory), appends[0][0][1][0][0], appends, 200, closed=s < segments - 1))
    return directory, written


def partition_log(directory: Path) -> PartitionLog:
    """The PartitionLog of a partition directory written by make_log or write_segment."""
    return LogDirs([str(directory.parent)]).partition(directory.name)


def golden_segment_files(partition: str) -> list[Path]:
    """The partition's .log files, in base offset order, from whichever log dir holds it."""
    found = []
    for logdir in sorted((FIXTURES / "logdirs").iterdir()):
        d = logdir / partition
        if d.is_dir() and not d.name.endswith(("-delete", "-future", "-stray")):
            found += [f for f in d.iterdir() if f.name.endswith(".log")]
    return sorted(found, key=lambda f: int(f.name[:-4]))


def golden_batches(partition: str):
    """(segment base offset, header, batch bytes) of every batch, with only the probe read for the header."""
    for seg in golden_segment_files(partition):
        data = seg.read_bytes()
        pos = 0
        while pos < len(data):
            size, _magic = peek_size(data, pos)
            probe = data[pos:pos + min(HEADER_PROBE_SIZE, size)]
            header = parse_batch_header(probe, 0, pos)
            batch = memoryview(data)[pos:pos + size]
            complete_legacy_header(header, batch)
            yield int(seg.name[:-4]), header, batch
            pos += size


ALL_LOGDIRS = ",".join(LOGDIRS)


def golden_bytes(v: object) -> bytes | None:
    if v is None:
        return None
    if isinstance(v, dict):
        return base64.b64decode(v["base64"])
    assert isinstance(v, str)
    return v.encode("utf-8")


def golden_rows(partition: str, name: str = "records.jsonl") -> list[tuple]:
    """(topic, partition, offset, timestamp ms, type, key, value, headers) per golden record."""
    out = []
    for line in (FIXTURES / "golden" / partition / name).read_text().splitlines():
        r = json.loads(line)
        out.append((r["topic"], r["partition"], r["offset"], r["timestamp"], r["timestamp_type"],
                    golden_bytes(r["key"]), golden_bytes(r["value"]), [(k, golden_bytes(v)) for k, v in r["headers"]]))
    return out


# Bytes that exercise every branch: plain ASCII, escapes, control characters, UTF-8 of each
# length, and sequences that are not UTF-8 (base64).
_PIECES = [b"a", b"xyz12345", b'"', b"\\", b"\n", b"\t", b"\x00", b"\x1f", b"\x7f", "é".encode(),
           "€".encode(), "😀".encode(), b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xe0\x80\x80", b"\xf4\x90\x80\x80"]
data = st.none() | st.lists(st.sampled_from(_PIECES), max_size=12).map(b"".join) | st.binary(max_size=40)
key_text = st.lists(st.sampled_from(_PIECES[:12]), max_size=5).map(b"".join).map(
    lambda b: b.decode("utf-8"))


@st.composite
def v2_batches(draw):  # type: ignore[no-untyped-def]
    """A v2 batch (kafka-python's builder, any codec, maybe LogAppendTime) of 1-12 records holding every
    kind of byte a key, value or header may hold; offsets with gaps, as compaction leaves them."""
    log_append = draw(st.booleans())
    codec = draw(st.sampled_from([0, 1, 2, 3]))
    base_offset = draw(st.integers(0, 2**40))
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    n = draw(st.integers(1, 12))
    delta = 0
    for _ in range(n):
        delta += draw(st.integers(0, 3))
        headers = draw(st.lists(st.tuples(key_text, data), max_size=3))
        builder.append(delta, timestamp=draw(st.integers(-1, 2**45)), key=draw(data), value=draw(data),
                       headers=headers)
        delta += 1
    buf = bytearray(builder.build())
    buf[0:8] = base_offset.to_bytes(8, "big")
    if log_append:  # the broker's LogAppendTime: attribute bit 3, its time in MaxTimestamp, re-signed
        buf[22] |= 0x08
        buf[35:43] = draw(st.integers(0, 2**45)).to_bytes(8, "big")
        buf[17:21] = crc32c.crc32c(bytes(buf[21:])).to_bytes(4, "big")
    return bytes(buf)


def write_numbered_segment(directory: Path, base: int, offsets: list[int]) -> None:
    """A segment of 5-record v2 batches holding `offsets` (key k<o>, value value-<o>), indexed every 200
    bytes: what the live-segment tests roll, delete and swap."""
    appends = []
    for i in range(0, len(offsets), 5):
        records = [(o, 1_700_000_000_000 + o, b"k%d" % o, b"value-%d" % o, []) for o in offsets[i:i + 5]]
        appends.append([(v2_batch(records[0][0], records), records)])
    write_segment(str(directory), base, appends, 200)


def orders_with_a_crc_mismatch(root: Path) -> range:
    """A copy of orders-0 under `root` with one byte flipped inside a batch of segment 313 (its CRC no
    longer matches); the offsets of that batch (344..354)."""
    import shutil

    shutil.copytree(FIXTURES / "logdirs" / "broker-a" / "orders-0", root / "orders-0")
    batches = [json.loads(x) for x in (FIXTURES / "golden" / "orders-0" / "batches.jsonl").read_text().splitlines()]
    batch = [b for b in batches if b["segment_base_offset"] == 313][5]
    log = root / "orders-0" / "00000000000000000313.log"
    data = bytearray(log.read_bytes())
    data[batch["position"] + batch["size"] - 5] ^= 0xFF
    log.write_bytes(bytes(data))
    return range(batch["base_offset"], batch["last_offset"] + 1)
