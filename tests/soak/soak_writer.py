"""The soak's writer: one partition written the way a broker writes it, with a manifest of every byte.

    python -m soak.soak_writer LOGDIR MANIFEST --seconds S [--rate-kb 300] [--segment-bytes N]

What a broker does, and kfs must read through (docs/spec.md section 1, "A live broker's directory"):
- v2 batches from kafka-python's `DefaultRecordBatchBuilder` (none, gzip, snappy, lz4, zstd; keys,
  headers, tombstones; idempotent and transactional producers, COMMIT/ABORT markers), appended to
  the active segment, sometimes in two writes (a reader may meet a half-written batch);
- the active segment's `.index`/`.timeindex` preallocated (`segment.index.bytes`, zero tail) and
  given an entry every `index.interval.bytes` (`LogSegment.append`);
- rolls at `segment.bytes`: the closing segment gets its last time index entry and its indexes
  trimmed to their entries (`LogSegment.onBecomeInactiveSegment`);
- retention: the oldest segment's files renamed to `.deleted`, unlinked `file.delete.delay.ms`
  later (`UnifiedLog.deleteSegmentFiles`), and the log start written to `log-start-offset-checkpoint`;
- the log cleaner: a closed segment rewritten keeping each key's latest record (`LogCleaner.cleanInto`),
  as `.cleaned` files, renamed to `.swap`, the old files to `.deleted`, then the `.swap` files to
  the segment's names (`UnifiedLog.replaceSegments`).

The manifest (JSON lines, outside the log dir) says what each batch is before its bytes reach
the log, so a reader can always check what it read; its last line holds the checksum of every
file the writer left, computed from the bytes it wrote (never read back): kfs must not write.
Needs kafka-python with python-snappy, lz4 and zstandard (the `test` extra).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import struct
import time
from dataclasses import dataclass, field
from typing import IO

from soak import soak_records as R

INDEX_BYTES = 10 << 20  # segment.index.bytes: the active segment's indexes are preallocated to it,
PREALLOCATED = {".index": INDEX_BYTES - INDEX_BYTES % 8,  # rounded down to whole entries (AbstractIndex)
                ".timeindex": INDEX_BYTES - INDEX_BYTES % 12}
INDEX_INTERVAL_BYTES = 4096  # index.interval.bytes
DELETE_DELAY = 3.0  # file.delete.delay.ms (Kafka: 60 s), seconds a `.deleted` file stays
CODECS = (0, 1, 2, 3, 4)  # none, gzip, snappy, lz4, zstd
ABORT, COMMIT = 0, 1


@dataclass
class Batch:
    """What the cleaner needs to rebuild a batch: its attributes and the offsets of its records."""

    base: int
    offsets: list[int]
    codec: int = 0
    producer_id: int = -1
    epoch: int = -1
    sequence: int = -1
    transactional: bool = False
    control: bytes | None = None  # a marker batch's bytes, copied as they are


@dataclass
class Segment:
    base: int
    size: int = 0
    log_hash: hashlib._Hash = field(default_factory=hashlib.sha256)
    offset_entries: bytearray = field(default_factory=bytearray)
    time_entries: bytearray = field(default_factory=bytearray)
    last_time_entry: int = -1
    since_entry: int = 0
    max_ts: int = -1
    max_ts_offset: int = -1
    batches: list[Batch] = field(default_factory=list)
    active: bool = True
    cleaned: bool = False

    def index_append(self, last_offset: int, position: int, appended: int) -> list[tuple[str, int, bytes]]:
        """`LogSegment.append`'s index step: (file suffix, position, bytes) to write."""
        writes = []
        if self.since_entry > INDEX_INTERVAL_BYTES:
            entry = struct.pack(">ii", last_offset - self.base, position)
            writes.append((".index", len(self.offset_entries), entry))
            self.offset_entries += entry
            writes.extend(self.time_append())
            self.since_entry = 0
        self.since_entry += appended
        return writes

    def time_append(self) -> list[tuple[str, int, bytes]]:
        """`TimeIndex.maybeAppend`: only a larger timestamp than the last entry's."""
        if self.max_ts <= self.last_time_entry:
            return []
        entry = struct.pack(">qi", self.max_ts, self.max_ts_offset - self.base)
        self.last_time_entry = self.max_ts
        at = len(self.time_entries)
        self.time_entries += entry
        return [(".timeindex", at, entry)]

    def checksums(self, stem: str) -> dict[str, str]:
        def padded(entries: bytearray, suffix: str) -> bytes:
            return bytes(entries) + bytes(max(0, PREALLOCATED[suffix] - len(entries)) if self.active else 0)

        return {
            stem + ".log": self.log_hash.hexdigest(),
            stem + ".index": _sha(padded(self.offset_entries, ".index")),
            stem + ".timeindex": _sha(padded(self.time_entries, ".timeindex")),
        }


def _unlink(path: str) -> None:
    """A `.deleted` name may have been reused (a cleaned segment's old files, then the segment itself
    deleted by retention): the rename replaced the older file, as Kafka's atomic move does."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def build_batch(batch: Batch) -> bytes:
    """A v2 batch of the records at `batch.offsets` (kafka-python's builder; base offset patched in)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=batch.codec, is_transactional=batch.transactional,
                                        producer_id=batch.producer_id, producer_epoch=batch.epoch,
                                        base_sequence=batch.sequence, batch_size=1 << 30)
    for offset in batch.offsets:
        builder.append(offset - batch.base, timestamp=R.timestamp(offset), key=R.key(offset),
                       value=R.value(offset), headers=R.headers(offset))
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, batch.base)  # outside the CRC
    return bytes(data)


def build_marker(offset: int, producer_id: int, epoch: int, kind: int) -> bytes:
    """A control batch (attributes: transactional | control) holding one COMMIT or ABORT marker."""
    from kafka.record.default_records import DefaultRecordBatchBuilder
    from kafka.record.util import calc_crc32c

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True, producer_id=producer_id,
                                        producer_epoch=epoch, base_sequence=-1, batch_size=1 << 30)
    builder.append(0, timestamp=R.timestamp(offset), key=struct.pack(">hh", 0, kind),
                   value=struct.pack(">hi", 0, 7), headers=[])
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, offset)
    attributes, = struct.unpack_from(">h", data, 21)
    struct.pack_into(">h", data, 21, attributes | 0x20)
    struct.pack_into(">I", data, 17, calc_crc32c(bytes(data[21:])))
    return bytes(data)


class Writer:
    def __init__(self, logdir: str, manifest: IO[str], rng: random.Random, segment_bytes: int, keep_segments: int,
                 clean_every: float) -> None:
        self.logdir = logdir
        self.dir = os.path.join(logdir, R.PARTITION_DIR)
        self.manifest = manifest
        self.rng = rng
        self.segment_bytes = segment_bytes
        self.keep_segments = keep_segments
        self.clean_every = clean_every
        self.segments: list[Segment] = []
        self.fds: dict[str, int] = {}
        self.next_offset = 0
        self.pending_unlinks: list[tuple[float, str]] = []
        self.files: dict[str, str] = {}  # checksums of files outside the segments
        self.latest_for_key: dict[bytes, int] = {}
        self.producer = (1000, 0, 0)  # id, epoch, next sequence
        self.transaction: tuple[int, int] | None = None  # (batches left, first offset)
        self.last_clean = time.monotonic()
        os.makedirs(self.dir)
        self._write_file("meta.properties", b"version=1\nbroker.id=0\ncluster.id=soak-cluster-0000000000\n")
        self._roll()

    # ---- manifest and files ---------------------------------------------------------------------

    def note(self, **event: object) -> None:
        self.manifest.write(json.dumps(event) + "\n")
        self.manifest.flush()

    def _write_file(self, name: str, data: bytes) -> None:
        """A log dir file written as Kafka writes checkpoints: a temporary file, then a rename."""
        path = os.path.join(self.logdir, name)
        with open(path + ".tmp", "wb") as f:
            f.write(data)
        os.replace(path + ".tmp", path)
        self.files[name] = _sha(data)

    def _stem(self, base: int) -> str:
        return os.path.join(R.PARTITION_DIR, f"{base:020d}")

    # ---- appending ------------------------------------------------------------------------------

    def append_one(self) -> int:
        """Append the next batch (or transaction marker); returns its size in bytes."""
        offset = self.next_offset
        pid, epoch, seq = self.producer
        if self.transaction is None and self.rng.random() < 0.08:
            self.producer = pid, epoch, seq = pid + 1, 0, 0
            self.transaction = (self.rng.randint(1, 4), offset)
        if self.transaction is not None and self.transaction[0] == 0:
            kind = COMMIT if self.rng.random() < 0.7 else ABORT
            data = build_marker(offset, pid, epoch, kind)
            batch = Batch(offset, [offset], producer_id=pid, epoch=epoch, transactional=True, control=data)
            self.transaction = None
        else:
            n = self.rng.choice((1, 1, 2, 5, 20, 60, 150))
            batch = Batch(offset, list(range(offset, offset + n)), codec=self.rng.choice(CODECS))
            if self.transaction is not None or self.rng.random() < 0.5:  # idempotent or transactional
                batch.producer_id, batch.epoch, batch.sequence = pid, epoch, seq
                batch.transactional = self.transaction is not None
                self.producer = pid, epoch, seq + n
            if self.transaction is not None:
                self.transaction = (self.transaction[0] - 1, self.transaction[1])
            data = build_batch(batch)
        if self.segments[-1].size + len(data) > self.segment_bytes and self.segments[-1].size:
            self._roll()
        self._append(batch, data)
        return len(data)

    def _append(self, batch: Batch, data: bytes) -> None:
        segment = self.segments[-1]
        last = batch.offsets[-1]
        self.note(e="batch", seg=segment.base, pos=segment.size, base=batch.base, last=last, len=len(data),
                  sha=_sha(data), control=batch.control is not None, txn=batch.transactional)
        fd = self.fds[".log"]
        if len(data) > 200 and self.rng.random() < 0.2:
            half = self.rng.randint(1, len(data) - 1)
            os.write(fd, data[:half])  # a reader may see this half: it must never show it
            time.sleep(0.003)
            os.write(fd, data[half:])
        else:
            os.write(fd, data)
        position = segment.size
        segment.size += len(data)
        segment.log_hash.update(data)
        segment.batches.append(batch)
        segment.max_ts, segment.max_ts_offset = R.timestamp(last), last
        for suffix, at, entry in segment.index_append(last, position, len(data)):
            os.pwrite(self.fds[suffix], entry, at)
        if batch.control is None:
            for offset in batch.offsets:
                self.latest_for_key[R.key(offset)] = offset
        self.next_offset = last + 1

    def _roll(self) -> None:
        if self.segments:
            old = self.segments[-1]
            for suffix, at, entry in old.time_append():  # onBecomeInactiveSegment
                os.pwrite(self.fds[suffix], entry, at)
            os.ftruncate(self.fds[".index"], len(old.offset_entries))
            os.ftruncate(self.fds[".timeindex"], len(old.time_entries))
            old.active = False
            for fd in self.fds.values():
                os.close(fd)
        segment = Segment(self.next_offset)
        self.note(e="roll", base=segment.base)
        stem = os.path.join(self.logdir, self._stem(segment.base))
        self.fds = {".log": os.open(stem + ".log", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)}
        for suffix in (".index", ".timeindex"):
            self.fds[suffix] = os.open(stem + suffix, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            os.ftruncate(self.fds[suffix], PREALLOCATED[suffix])  # preallocated: a zero tail
        self.segments.append(segment)

    # ---- retention and cleaning -----------------------------------------------------------------

    def housekeeping(self) -> None:
        now = time.monotonic()
        while self.pending_unlinks and self.pending_unlinks[0][0] <= now:
            _unlink(self.pending_unlinks.pop(0)[1])
        if len(self.segments) > self.keep_segments:
            self._delete_oldest()
        if now - self.last_clean >= self.clean_every:
            self.last_clean = now
            self._clean()

    def _retire_files(self, base: int) -> None:
        """Rename a segment's files to `.deleted` and unlink them after DELETE_DELAY."""
        stem = os.path.join(self.logdir, self._stem(base))
        for suffix in (".log", ".index", ".timeindex"):
            os.rename(stem + suffix, stem + suffix + ".deleted")
            self.pending_unlinks.append((time.monotonic() + DELETE_DELAY, stem + suffix + ".deleted"))

    def _delete_oldest(self) -> None:
        oldest = self.segments.pop(0)
        log_start = self.segments[0].base
        self.note(e="delete", base=oldest.base, log_start=log_start)
        self._retire_files(oldest.base)
        self._write_file("log-start-offset-checkpoint", b"0\n1\n%s %d %d\n" % (R.TOPIC.encode(), R.PARTITION,
                                                                               log_start))

    def _clean(self) -> None:
        """Rewrite one closed, not yet cleaned segment without the records a later one with the same key
        replaces (the dirty section ends at the active segment, as Kafka's cleaner's does)."""
        candidates = [s for s in self.segments[1:-1] if not s.cleaned]
        if not candidates:
            return
        old = self.rng.choice(candidates)
        new = Segment(old.base, active=False, cleaned=True)
        log_bytes = bytearray()
        removed: list[int] = []
        dropped: list[int] = []
        written: list[dict] = []
        for batch in old.batches:
            if batch.control is not None:
                kept, data = batch, batch.control
            else:
                offsets = [o for o in batch.offsets if self.latest_for_key[R.key(o)] == o]
                kept_set = set(offsets)
                removed.extend(o for o in batch.offsets if o not in kept_set)
                if not offsets:
                    dropped.append(batch.base)
                    continue
                kept = Batch(batch.base, offsets, batch.codec, batch.producer_id, batch.epoch, batch.sequence,
                             batch.transactional)
                data = build_batch(kept)
            new.batches.append(kept)
            new.max_ts, new.max_ts_offset = R.timestamp(kept.offsets[-1]), kept.offsets[-1]
            new.index_append(kept.offsets[-1], len(log_bytes), len(data))
            written.append({"base": kept.base, "last": kept.offsets[-1], "pos": len(log_bytes), "len": len(data),
                            "sha": _sha(data)})
            log_bytes += data
        new.time_append()
        new.size = len(log_bytes)
        new.log_hash.update(log_bytes)
        self.note(e="clean", base=old.base, removed=removed, dropped=dropped, batches=written)
        stem = os.path.join(self.logdir, self._stem(old.base))
        contents = {".log": bytes(log_bytes), ".index": bytes(new.offset_entries),
                    ".timeindex": bytes(new.time_entries)}
        for suffix, data in contents.items():
            with open(stem + suffix + ".cleaned", "wb") as f:
                f.write(data)
        for suffix in contents:
            os.rename(stem + suffix + ".cleaned", stem + suffix + ".swap")
        self._retire_files(old.base)
        for suffix in contents:
            os.rename(stem + suffix + ".swap", stem + suffix)
        self.segments[self.segments.index(old)] = new
        self.note(e="swapped", base=old.base)

    def finish(self) -> None:
        """Unlink what is pending, then write every file's checksum (from the bytes written) last."""
        for fd in self.fds.values():
            os.close(fd)
        for _, path in self.pending_unlinks:
            _unlink(path)
        files = dict(self.files)
        for segment in self.segments:
            files.update(segment.checksums(self._stem(segment.base)))
        self.note(e="end", log_end=self.next_offset, files=files)


def run(logdir: str, manifest_path: str, seconds: float, rate_kb: float, seed: int, segment_bytes: int,
        keep_segments: int, clean_every: float) -> None:
    with open(manifest_path, "w") as manifest:
        writer = Writer(logdir, manifest, random.Random(seed), segment_bytes, keep_segments, clean_every)
        start = time.monotonic()
        written = 0
        while time.monotonic() - start < seconds:
            written += writer.append_one()
            writer.housekeeping()
            ahead = written / (rate_kb * 1024) - (time.monotonic() - start)
            if ahead > 0:
                time.sleep(ahead)
        writer.finish()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logdir")
    parser.add_argument("manifest")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--rate-kb", type=float, default=300, help="log bytes written per second (KiB)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--segment-bytes", type=int, default=1 << 20)
    parser.add_argument("--keep-segments", type=int, default=8, help="retention: segments kept")
    parser.add_argument("--clean-every", type=float, default=20, help="seconds between cleaner swaps")
    args = parser.parse_args(argv)
    run(args.logdir, args.manifest, args.seconds, args.rate_kb, args.seed, args.segment_bytes, args.keep_segments,
        args.clean_every)


if __name__ == "__main__":
    main()
