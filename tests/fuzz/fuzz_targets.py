"""What the campaign runs on each input, and what counts as a failure.

Three targets:

- `record`: a buffer of 1-3 (mutated) batches through everything a reader does with a segment's bytes
  (peek_size, parse_batch_header, the legacy wrapper's header, the CRC, decode_records, the control
  parser, the JSON-lines renderer, `kfs dump`'s record lines), once on the compiled path and once on
  the pure-Python path: both must give the same records and lines, or the same error type.
- `index`: an intact Kafka-written partition with mutated `.index`/`.timeindex`/`.txnindex` files;
  offset and time lookups, the log end offset and largest timestamps must equal a brute-force scan
  of the intact log (the indexes are hints: a damaged one may cost time, never a wrong answer or an
  error).
- `partition`: a partition directory damaged as a whole (truncated or missing segments, holes,
  segments out of order, batches whose base offset or length -- outside the CRC -- are wrong); the
  records `kfs cat` prints and the bytes the mount's `messages.jsonl` gives must agree (same records,
  or the same error after the same records), on both paths; `.value` lookups (`record_at`) too, the
  index target's against the intact log.

Anything raised other than kfs's own errors (CorruptBatchError in the record layer, KfsError above)
is a failure, and so is any difference. A `Failure` says which kind.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import random
import shutil
import struct
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path

import fuzz_mutators as mut

import kfs.storage.index as index_module
import kfs.storage.partition as partition_module
import kfs.storage.segment as segment_module
from kfs._native import cli as native_cli
from kfs._native import fuse as native_fuse
from kfs._native import record as native_record
from kfs._native import registry as native_registry
from kfs._native import storage as native_storage
from kfs._native import views as native_views
from kfs.cli import dump_log
from kfs.fuse import zerocopy
from kfs.record import (
    HEADER_PROBE_SIZE,
    CorruptBatchError,
    complete_legacy_header,
    crc_is_valid,
    decode_records,
    default_batch,
    parse_batch_header,
    parse_control_record,
    peek_size,
)
from kfs.registry import avro as registry_avro
from kfs.registry import lines as registry_lines
from kfs.storage import KfsError
from kfs.views import batch_lines, jsonl, plain_runs

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "kafka-written"
LOGDIRS = FIXTURES / "logdirs"
PARTITIONS = sorted(p.name for p in (FIXTURES / "golden").iterdir() if p.is_dir())


class Failure(Exception):
    """A finding: kind is 'exception', 'disagreement' or 'wrong-answer'."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


# ---- the two paths -----------------------------------------------------------------------------

_COMPILED = {"decode": native_record.decode_v2_records, "render": native_views.render_jsonl,
             "fused": native_views.render_v2_jsonl, "gather": native_fuse.gather, "dump": native_cli.render_v2_dump,
             "walk": native_views.walk_v2_run, "find": native_storage.find_v2_batch,
             "record_at": native_storage.v2_record_at, "slot": native_storage.index_slot, "crc": native_record.crc32c,
             "avro_program": native_registry.avro_program, "render_avro": native_registry.render_avro}


def install_compiled(decode, render, fused, gather, dump, walk, find=None, record_at=None,  # type: ignore[no-untyped-def]
                     slot=None, crc=None, avro_program=None, render_avro=None) -> None:
    """Use these compiled functions (e.g. from a sanitizer build) as the C path."""
    _COMPILED.update(decode=decode, render=render, fused=fused, gather=gather, dump=dump, walk=walk, find=find,
                     record_at=record_at, slot=slot, crc=crc, avro_program=avro_program, render_avro=render_avro)


def has_compiled() -> bool:
    return _COMPILED["decode"] is not None


def use_path(path: str) -> None:
    """'c': the compiled decoder and renderer; 'python': the pure-Python loops."""
    compiled = path == "c"
    default_batch._decode_v2_records = _COMPILED["decode"] if compiled else None
    jsonl._render_jsonl = _COMPILED["render"] if compiled else None
    batch_lines._render_v2_jsonl = _COMPILED["fused"] if compiled else None
    dump_log._render_v2_dump = _COMPILED["dump"] if compiled else None
    plain_runs._walk_v2_run = _COMPILED["walk"] if compiled else None  # the partition target's walks
    native_fuse.gather = _COMPILED["gather"] if compiled else None  # (kfs.fuse.zerocopy looks it up per reply)
    segment_module._find_v2_batch = _COMPILED["find"] if compiled else None  # a `.value`'s lookup
    partition_module._v2_record_at = _COMPILED["record_at"] if compiled else None
    index_module._index_slot = _COMPILED["slot"] if compiled else None
    native_record.crc32c = _COMPILED["crc"] if compiled else None  # (kfs.record.crc_is_valid looks it up per batch)
    # Avro schemas compiled (a Registry made on either path keeps its programs); datums rendered by them, and
    # framed lines written whole by render_jsonl, on the C path only (FramedLines reads it when made)
    registry_avro.avro_program = _COMPILED["avro_program"]
    registry_avro.render_avro = registry_lines.render_avro = _COMPILED["render_avro"] if compiled else None


def paths() -> tuple[str, ...]:
    return ("c", "python") if has_compiled() else ("python",)


# ---- the corpus --------------------------------------------------------------------------------

def segment_files(partition: str) -> list[Path]:
    found = []
    for logdir in sorted(LOGDIRS.iterdir()):
        d = logdir / partition
        if d.is_dir():
            found += [f for f in d.iterdir() if f.name.endswith(".log")]
    return sorted(found, key=lambda f: int(f.name[:-4]))


def fixture_batches() -> list[bytes]:
    """Every batch of every Kafka-written segment: each magic, codec, control type and quirk."""
    out = []
    for partition in PARTITIONS:
        for seg in segment_files(partition):
            data = seg.read_bytes()
            pos = 0
            while pos + 17 <= len(data):
                size, _ = peek_size(data, pos)
                if pos + size > len(data):
                    break
                out.append(data[pos:pos + size])
                pos += size
    return out


class Corpus:
    def __init__(self) -> None:
        self.batches = fixture_batches()
        self.donors: list[list] = []  # well-formed records to splice into others
        for b in self.batches:
            if b[16] == 2 and len(self.donors) < 400:
                try:
                    f = mut.v2_fields(b)
                    codec = mut.CODECS[f["attributes"] & 7]
                    self.donors += mut.parse_v2_records(mut.decompress(codec, b[61:]), f["count"])[:3]
                except Exception:
                    pass


# ---- record target -----------------------------------------------------------------------------

def _record_fields(r) -> tuple:  # type: ignore[no-untyped-def]
    return (r.offset, r.timestamp, r.timestamp_type, r.key, r.value, tuple(r.headers))


_PREFIX = '{"topic": "t", "partition": 0, "offset": '


def _replied(pieces: list) -> bytes:  # type: ignore[type-arg]
    """The bytes a read_buf reply of `pieces` hands libfuse (kfs.fuse.zerocopy), freed as libfuse does."""
    bufpp = ctypes.pointer(ctypes.c_void_p())
    zerocopy.reply_pieces(bufpp, pieces)
    vector = zerocopy.FuseBufvec.from_address(bufpp.contents.value)  # type: ignore[arg-type]
    buf = vector.buf[0]
    got = ctypes.string_at(buf.mem, buf.size) if buf.size else b""
    zerocopy._libc.free(buf.mem)
    zerocopy._libc.free(bufpp.contents.value)
    return got


def consume(buf: bytes) -> list[tuple]:
    """Everything a reader does with a segment's bytes; stops at the first error, as a reader does."""
    out: list[tuple] = []
    pos = 0
    previous = -1  # the offset of the last record before, as `kfs dump` keeps it (-1: none)
    try:
        while pos < len(buf):
            size, _ = peek_size(buf, pos)
            if pos + size > len(buf):
                out.append(("tail", size))
                break
            h = parse_batch_header(buf[pos:pos + HEADER_PROBE_SIZE], 0, pos)
            batch = memoryview(buf)[pos:pos + size]
            complete_legacy_header(h, batch)
            valid = crc_is_valid(batch, h)
            # The fused renderer (C path only) gives the decoder's and renderer's lines, or leaves the
            # batch to them: a difference is recorded, and the C path then disagrees with Python's.
            fused = batch_lines.fused_lines(h, batch, _PREFIX, -(1 << 63), None)
            # `kfs dump`'s compiled record lines (C path only) likewise: they must be the Python path's.
            dumped = dump_log._fused_data_lines(h, batch, previous, pos) \
                if valid and h.magic >= 2 and not h.is_control else None
            try:
                records = decode_records(batch, h)
            except CorruptBatchError:
                if fused is not None:
                    out.append(("fused rendered a batch the decoder refuses", fused[:200]))
                if dumped is not None:
                    out.append(("dump lines of a batch the decoder refuses", dumped[0][:200]))
                raise
            if dumped is not None:
                want_text, _ = dump_log._v2_data_lines(h, records, previous + 1 if previous != -1 else -1)
                want_text = dump_log._batch_line(h, pos, True) + want_text
                want_gaps: dict[int, int] = {}
                dump_log._note_gaps(want_gaps, previous, records)
                got_gaps: dict[int, int] = {}
                dump_log._note_packed_gaps(got_gaps, dumped[2])
                if (dumped[0], dumped[1], got_gaps) != (want_text, records[-1].offset, want_gaps):
                    out.append(("dump lines differ", dumped[0][:200], want_text[:200]))
            if records:
                previous = records[-1].offset
            controls = [parse_control_record(r) for r in records] if h.is_control else []
            lines = jsonl.render_lines(_PREFIX, records)
            if fused is not None and fused != lines:
                out.append(("fused lines differ", fused[:200], lines[:200]))
            # Its lines mode (the mount's cursor): the same bytes, each line's offset and end.
            first = min(h.base_offset + 1, (1 << 63) - 1)  # from the second record on
            marked = batch_lines.fused_lines(h, batch, _PREFIX, first, None, lines=True)
            if marked is not None:
                shown = [r for r in records if r.offset >= first]
                want = jsonl.render_line_list(_PREFIX, shown)
                if (marked.data, list(marked.offsets), list(marked.ends)) != (
                        b"".join(want), [r.offset for r in shown], list(accumulate(map(len, want)))):
                    out.append(("fused lines mode differs", marked.data[:200]))
            # A read reply made of pieces (the mount's decoded reads): the lines cut around the batch.
            cut = len(lines) // 3
            pieces = [lines[:cut], batch, b"", lines[cut:]]
            if _replied(pieces) != b"".join(pieces):
                out.append(("read reply differs", len(lines), len(batch)))
            out.append(("batch", h.base_offset, h.last_offset, h.record_count, valid,
                        [_record_fields(r) for r in records], controls, lines))
            pos += size
    except CorruptBatchError as e:
        out.append(("error", type(e).__name__))
    return out


def run_record_input(buf: bytes) -> None:
    """Both paths on one buffer; raises Failure on a foreign exception or a disagreement."""
    results = {}
    for path in paths():
        use_path(path)
        try:
            results[path] = consume(buf)
        except Exception as e:
            raise Failure("exception", f"{path} path: {type(e).__name__}: {e}") from e
    if len(results) == 2 and results["c"] != results["python"]:
        raise Failure("disagreement", f"C: {_short(results['c'])} / Python: {_short(results['python'])}")


def _short(result: list[tuple]) -> str:
    parts = []
    for item in result:
        if item[0] == "batch":
            parts.append(f"batch {item[1]}..{item[2]} ({len(item[5])} records)")
        else:
            parts.append(repr(item))
    return "; ".join(parts)[:400]


def make_record_input(rnd: random.Random, corpus: Corpus) -> bytes:
    n = rnd.choice((1, 1, 1, 2, 3))
    parts = []
    for _ in range(n):
        batch = rnd.choice(corpus.batches)
        if rnd.random() < 0.9:
            batch = mut.mutate_batch(rnd, batch, corpus.donors)
        parts.append(batch)
    return b"".join(parts)


# ---- a partition copied into a scratch log dir --------------------------------------------------

def copy_partition(partition: str, scratch: Path) -> Path:
    """The fixture partition (and its log dir's checkpoints) copied under scratch/logdir."""
    logdir = scratch / "logdir"
    if logdir.exists():
        shutil.rmtree(logdir)
    logdir.mkdir(parents=True)
    source_dir = next(d for d in sorted(LOGDIRS.iterdir()) if (d / partition).is_dir())
    for name in ("log-start-offset-checkpoint", "meta.properties"):
        if (source_dir / name).exists():
            shutil.copyfile(source_dir / name, logdir / name)
    shutil.copytree(source_dir / partition, logdir / partition,
                    ignore=shutil.ignore_patterns("*.deleted", "*.cleaned", "*.swap"))
    return logdir


def open_partition(logdir: Path, partition: str):  # type: ignore[no-untyped-def]
    from kfs.storage import LogDirs

    return LogDirs([str(logdir)]).partition(partition)


# ---- the brute-force answers of an intact log ----------------------------------------------------

@dataclass
class TruthBatch:
    segment: int
    position: int
    base: int
    last: int
    max_ts: int
    is_control: bool
    records: list[tuple[int, int]]  # (offset, timestamp) of every record, control ones included
    producer_id: int = -1
    transactional: bool = False
    aborts: bool = False  # a control batch holding an ABORT marker


class Truth:
    """A partition's answers computed by walking every batch of the intact log: no index involved."""

    def __init__(self, partition: str) -> None:
        self.partition = partition
        self.segments: list[int] = []
        self.batches: list[TruthBatch] = []
        for seg in segment_files(partition):
            base = int(seg.name[:-4])
            self.segments.append(base)
            data = seg.read_bytes()
            pos = 0
            while pos + 12 <= len(data) and data[pos:pos + 12] != bytes(12):
                size, _ = peek_size(data, pos)
                if pos + size > len(data):
                    break
                h = parse_batch_header(data, pos, pos)
                body = memoryview(data)[pos:pos + size]
                complete_legacy_header(h, body)
                decoded = decode_records(body, h)
                recs = [(r.offset, r.timestamp) for r in decoded]
                aborts = h.is_control and any(parse_control_record(r)[0] == "ABORT" for r in decoded)
                self.batches.append(TruthBatch(base, pos, h.base_offset, h.last_offset, h.max_timestamp,
                                               h.is_control, recs, h.producer_id, h.is_transactional, aborts))
                pos += size
        plog = open_partition(LOGDIRS / next(d.name for d in sorted(LOGDIRS.iterdir())
                                             if (d / partition).is_dir()), partition)
        checkpointed = plog._log.checkpoints.log_start_offset(plog.topic, plog.partition)
        first = self.segments[0] if self.segments else 0
        self.log_start = max(first, checkpointed) if checkpointed is not None else first
        last_segment = [b for b in self.batches if b.segment == self.segments[-1]]
        self.log_end = max((b.last + 1 for b in last_segment), default=self.segments[-1])
        self.largest_ts = {s: max((b.max_ts for b in self.batches if b.segment == s), default=-1)
                           for s in self.segments}
        self.timestamps = sorted({t for b in self.batches for _, t in b.records})
        self.offsets = sorted({b.base for b in self.batches} | {b.last for b in self.batches})
        self.positions = sorted({b.position for b in self.batches})

    def read_committed(self) -> list[int]:
        """The offsets a read_committed consumer gets from the log start: a producer's transactional
        batches from its first one after a marker to an ABORT marker are dropped, as the markers say
        (no .txnindex involved)."""
        open_from: dict[int, int] = {}
        aborted: list[tuple[int, int, int]] = []
        for b in self.batches:
            if not b.transactional:
                continue
            if not b.is_control:
                open_from.setdefault(b.producer_id, b.base)
            else:
                start = open_from.pop(b.producer_id, b.last)
                if b.aborts:
                    aborted.append((b.producer_id, start, b.last))
        return [o for b in self.batches if not b.is_control
                and not (b.transactional and any(p == b.producer_id and f <= b.base <= last
                                                 for p, f, last in aborted))
                for o, _ in b.records if o >= self.log_start]

    def offset_lookup(self, target: int) -> tuple | None:
        """Kafka's fetch: (segment, position, batch base, batch last, record offset, record timestamp)."""
        if not self.log_start <= target < self.log_end:
            return None
        floor = max((s for s in self.segments if s <= target), default=self.segments[0])
        for i, b in enumerate(self.batches):
            if b.segment >= floor and b.last >= target:
                record = next(((o, t) for c in self.batches[i:] if not c.is_control for o, t in c.records
                               if o >= target), (None, None))
                return (b.segment, b.position, b.base, b.last, *record)
        return None

    def time_lookup(self, target: int) -> tuple | None:
        """Kafka's ListOffsets: (segment, offset, timestamp) of the first record with timestamp >= T."""
        for s in self.segments:
            if self.largest_ts[s] >= target:
                for b in self.batches:
                    if b.segment == s and b.max_ts >= target:
                        for o, t in b.records:
                            if t >= target and o >= self.log_start:
                                return (s, o, t)
                return None
        return None


# ---- index target --------------------------------------------------------------------------------

_TRUTHS: dict[str, Truth] = {}


def truth(partition: str) -> Truth:
    if partition not in _TRUTHS:
        _TRUTHS[partition] = Truth(partition)
    return _TRUTHS[partition]


INDEX_PARTITIONS = [p for p in PARTITIONS if p != "__cluster_metadata-0"] + ["__cluster_metadata-0"]


def make_index_input(rnd: random.Random, scratch: Path) -> tuple[str, Path]:
    """A copy of a fixture partition whose index files are damaged (the logs are intact)."""
    LAST_DAMAGE.clear()
    partition = rnd.choice(INDEX_PARTITIONS)
    t = truth(partition)
    logdir = copy_partition(partition, scratch)
    pdir = logdir / partition
    files = sorted(f for f in pdir.iterdir() if f.suffix in (".index", ".timeindex", ".txnindex"))
    for _ in range(rnd.choice((1, 1, 2, 3))):
        if not files:
            break
        f = rnd.choice(files)
        data = f.read_bytes() if f.exists() else b""
        base = int(f.name.split(".")[0])
        if rnd.random() < 0.05:
            f.unlink(missing_ok=True)
            continue
        seg_positions = [b.position for b in t.batches if b.segment == base] or [0]
        if f.suffix == ".index":
            data = mut.mutate_index(rnd, data, 8, seg_positions, t.offsets, t.timestamps or [0], base)
        elif f.suffix == ".timeindex":
            data = mut.mutate_index(rnd, data, 12, seg_positions, t.offsets, t.timestamps or [0], base)
        else:
            data = mut.mutate_txn_index(rnd, data, t.offsets)
        LAST_DAMAGE.append(f.name)
        f.write_bytes(data)
    return partition, logdir


def _location_tuple(loc) -> tuple:  # type: ignore[no-untyped-def]
    return (loc.segment_base_offset, loc.position, loc.batch_base_offset, loc.batch_last_offset,
            loc.offset, loc.timestamp)


def run_index_input(rnd: random.Random, partition: str, logdir: Path, lookups: int = 12) -> None:
    """Lookups on the damaged indexes against the brute-force answers of the intact log."""
    from kfs.storage import NoRecordAtOffset, OffsetOutOfRange, TimestampNotFound

    t = truth(partition)
    plog = open_partition(logdir, partition)
    try:
        end = plog.log_end_offset()
        if end != t.log_end:
            raise Failure("wrong-answer", f"{partition}: log end offset {end}, the log says {t.log_end}")
        for seg in plog.segments():
            got = plog.largest_timestamp(seg)
            if got != t.largest_ts[seg.base_offset]:
                raise Failure("wrong-answer", f"{partition}: largest timestamp of segment {seg.base_offset} "
                                              f"{got}, the log says {t.largest_ts[seg.base_offset]}")
        targets = [rnd.randrange(t.log_start - 2, t.log_end + 3) for _ in range(lookups)]
        targets += [rnd.choice(t.offsets) for _ in range(lookups // 2)]
        if any(b.transactional for b in t.batches):
            committed = [r.offset for r in plog.records(isolation="read_committed")]
            if committed != t.read_committed():
                raise Failure("wrong-answer", f"{partition}: read_committed gives {len(committed)} records, the "
                                              f"log's markers say {len(t.read_committed())}")
        for target in targets:
            expected = t.offset_lookup(target)
            try:
                got = _location_tuple(plog.locate_offset(target))
            except OffsetOutOfRange:
                got = None
            if got != expected:
                raise Failure("wrong-answer", f"{partition}: offset {target}: kfs {got}, the log says {expected}")
        data_offsets = {o: ts for b in t.batches if not b.is_control for o, ts in b.records
                        if t.log_start <= o < t.log_end}
        for target in targets:  # `.value`: exactly the record at the offset, or none
            expected_record = (target, data_offsets[target]) if target in data_offsets else None
            try:
                record = plog.record_at(target)
                got_record: tuple | None = (record.offset, record.timestamp)
            except (NoRecordAtOffset, OffsetOutOfRange):
                got_record = None
            if got_record != expected_record:
                raise Failure("wrong-answer", f"{partition}: record at {target}: kfs {got_record}, the log says "
                                              f"{expected_record}")
        stamps = [rnd.choice(t.timestamps) + rnd.choice((-1, 0, 0, 1)) for _ in range(lookups)] if t.timestamps else []
        for target in stamps:
            expected = t.time_lookup(target)
            try:
                loc = plog.locate_time(target)
                got = (loc.segment_base_offset, loc.offset, loc.timestamp)
            except TimestampNotFound:
                got = None
            if got != expected:
                raise Failure("wrong-answer", f"{partition}: time {target}: kfs {got}, the log says {expected}")
    except KfsError as e:
        raise Failure("wrong-answer", f"{partition}: an error on an intact log: {e}") from e
    except Failure:
        raise
    except Exception as e:
        raise Failure("exception", f"{partition}: {type(e).__name__}: {e}") from e
    finally:
        plog.close()


# ---- partition target ----------------------------------------------------------------------------

def _set_batch_field(data: bytearray, rnd: random.Random, positions: list[int], field: str) -> None:
    if not positions:
        return
    p = rnd.choice(positions)
    if field == "base_offset":
        value = rnd.choice((2**32, 2**63 - 1, 2**63 - 2**20, 2**31, -1, -(2**63),
                            struct.unpack_from(">q", data, p)[0] + rnd.choice((-1, 1, 5))))
        struct.pack_into(">q", data, p, _wrapped(value, 64))  # an edge set earlier, moved past int64: wraps
    else:
        value = rnd.choice((2**31 - 1, 2**30,
                            struct.unpack_from(">i", data, p + 8)[0] + rnd.choice((-1, 1, 100, 100000))))
        struct.pack_into(">i", data, p + 8, _wrapped(value, 32))


def _wrapped(value: int, bits: int) -> int:
    """`value` as a signed `bits`-bit field holds it (two's complement wrap-around)."""
    half = 1 << (bits - 1)
    return (value + half) % (1 << bits) - half


def batch_positions(data: bytes) -> list[int]:
    """Where the batches of a segment's bytes start, as far as their lengths lead."""
    out = []
    pos = 0
    while pos + 17 <= len(data):
        try:
            size, _ = peek_size(data, pos)
        except CorruptBatchError:
            break
        if pos + size > len(data):
            break
        out.append(pos)
        pos += size
    return out


_DAMAGE = ("truncated", "a hole", "a segment missing", "two segments swapped", "renamed", "base offset set",
           "a middle batch's length set", "garbage or a duplicate batch appended", "a batch mutated", "bytes mutated")
LAST_DAMAGE: list[str] = []  # what the last make_*_input did, for the finding's report


def make_partition_input(rnd: random.Random, scratch: Path) -> tuple[str, Path]:
    """A fixture partition damaged as a whole: what a bad disk, a bad copy or a bad hand does."""
    LAST_DAMAGE.clear()
    partition = rnd.choice(PARTITIONS)
    truth(partition)
    logdir = copy_partition(partition, scratch)
    pdir = logdir / partition
    logs = sorted(pdir.glob("*.log"))
    for _ in range(rnd.choice((1, 1, 2))):
        if not logs:
            break
        f = rnd.choice(logs)
        data = bytearray(f.read_bytes())
        positions = batch_positions(bytes(data))
        op = rnd.randrange(10)
        LAST_DAMAGE.append(f"{f.name}: {_DAMAGE[op]}")
        if op == 0 and data:  # truncated at any byte, or at a batch boundary
            cut = rnd.choice(positions[1:] or [0]) if rnd.random() < 0.4 else rnd.randrange(len(data))
            del data[cut:]
        elif op == 1 and data:  # a hole: a range zeroed (a sparse file's missing blocks)
            at = rnd.randrange(len(data))
            data[at:at + rnd.choice((12, 61, 512, 4096))] = bytes(min(len(data) - at, 4096))
        elif op == 2 and len(logs) > 1:  # a segment missing
            os.unlink(f)
            logs.remove(f)
            continue
        elif op == 3 and len(logs) > 1:  # segments out of order: a segment's file under another base
            other = rnd.choice([x for x in logs if x != f])
            a, b = f.read_bytes(), other.read_bytes()
            f.write_bytes(b)
            other.write_bytes(a)
            continue
        elif op == 4:  # a segment renamed to a wrong base offset
            new_base = max(0, int(f.name[:-4]) + rnd.choice((-5, -1, 1, 7, 1000, 2**32)))
            target = pdir / f"{new_base:020d}.log"
            if not target.exists():
                os.rename(f, target)
                logs = sorted(pdir.glob("*.log"))
            continue
        elif op == 5:  # a batch's base offset, outside the CRC
            _set_batch_field(data, rnd, positions, "base_offset")
        elif op == 6:  # a middle batch's length, outside the CRC
            _set_batch_field(data, rnd, positions[:-1] or positions, "length")
        elif op == 7:  # garbage appended, or a batch duplicated at the end
            if positions and rnd.random() < 0.5:
                p = rnd.choice(positions)
                size, _ = peek_size(bytes(data), p)
                data += data[p:p + size]
            else:
                data += rnd.randbytes(rnd.randrange(1, 200))
        elif op == 8 and positions:  # one batch mutated structurally (CRC recomputed)
            p = rnd.choice(positions)
            size, _ = peek_size(bytes(data), p)
            data[p:p + size] = mut.mutate_batch(rnd, bytes(data[p:p + size]), [])
        else:
            data = bytearray(mut.mutate_bytes(rnd, bytes(data), 1))
        f.write_bytes(bytes(data))
    return partition, logdir


_PREFIX_PARTS = ('{"topic": ', '"partition": ')


def _cat(plog) -> tuple[bytes, str | None]:  # type: ignore[no-untyped-def]
    """What `kfs cat` prints (record_lists from the log start, rendered) and the error it ends with."""
    from kfs.internal_topics.lines import line_decoder

    out = []
    prefix = jsonl.line_prefix(plog.topic, plog.partition)
    decoder = line_decoder(plog.topic, "auto", plog)  # as `kfs cat` and the mount, by default
    try:
        for records in plog.record_lists(plog.log_start_offset()):
            out.append(jsonl.render_lines(prefix, records, decoder))
    except KfsError as e:
        return b"".join(out), type(e).__name__
    return b"".join(out), None


KCAT_FORMAT = "%o|%k|%K|%s|%S|%R|%T|%h|%t|%p\\n"  # every field kcat's -f has


def _cat_kcat(plog) -> tuple[bytes, str | None]:  # type: ignore[no-untyped-def]
    """What `kfs cat -f KCAT_FORMAT --null NULL` and `kfs cat -J` print, each with the error it ends with
    (the walker's kcat mode where the path has it)."""
    from kfs.views import batch_lines, plain_runs
    from kfs.views.kcat_format import KcatFormat, KcatJson

    out = []
    for fmt in (KcatFormat(KCAT_FORMAT, plog.topic, plog.partition, b"NULL"), KcatJson(plog.topic, plog.partition, 7)):
        take = plain_runs.kcat_taker(fmt.program(), fmt.null, False) if plain_runs.available() else None
        try:
            for piece in batch_lines.joined_lines(plog, plog.log_start_offset(), isolation="read_uncommitted",
                                                  control="hide", prefix="", render=fmt.render, fused=False,
                                                  take=take):
                out.append(piece)
        except KfsError as e:
            out.append(type(e).__name__.encode())
        out.append(b"\0")
    return b"".join(out), None


def _messages_jsonl(plog, size_first: bool = False) -> tuple[bytes, str | None]:  # type: ignore[no-untyped-def]
    """What reading the mount's `messages.jsonl` gives: the decoded view from the log start, read in
    64 KiB reads until EOF or an error. `size_first`: as through the mount, where a stat counts every
    run before the first read; then the size must fit what the reads give (every byte read, and the
    unreadable byte of damage at exactly where the reads stopped), else Failure."""
    from kfs.views.decoded import DamagedLog, DecodedLog

    out = []
    view = DecodedLog(plog).view(plog.log_start_offset())
    size = view.size() if size_first else None
    cursor = view.cursor()
    error = None
    try:
        position = 0
        while True:
            data = cursor.read(position, 65536)
            if not data:
                break
            out.append(data)
            position += len(data)
    except KfsError as e:
        error = "CorruptLogError" if isinstance(e, DamagedLog) else type(e).__name__  # (damage met mapping it)
    got = b"".join(out)
    if size is not None:
        if error is None and size != len(got):
            raise Failure("view-disagreement", f"{plog.name}: messages.jsonl's size is {size}, its reads give "
                                               f"{len(got)} bytes and no error")
        if error is not None:
            try:
                view.cursor().read(len(got), 1, partial=False)
            except KfsError:
                pass
            else:
                raise Failure("view-disagreement", f"{plog.name}: reads of messages.jsonl stop at {len(got)} "
                                                   "with an error, a read of that byte alone does not")
            if size <= len(got):
                raise Failure("view-disagreement", f"{plog.name}: messages.jsonl's size {size} does not cover "
                                                   f"the damage its reads meet at {len(got)}")
    return got, error


def run_partition_input(rnd: random.Random, partition: str, logdir: Path) -> None:
    """`kfs cat` and `messages.jsonl` agree on both paths; the other calls raise only kfs errors."""
    from kfs.storage import OffsetOutOfRange

    results = {}
    t = truth(partition)
    value_targets = [rnd.choice(t.offsets) for _ in range(8)] + [rnd.randrange(t.log_start - 1, t.log_end + 2)
                                                                 for _ in range(4)]
    for path in paths():
        use_path(path)
        plog = open_partition(logdir, partition)
        try:
            cat = _cat(plog)
            for size_first in (False, True):  # a reader alone, and a stat before the reads (the mount's way)
                view = _messages_jsonl(plog, size_first)
                if cat != view:
                    raise Failure("view-disagreement", f"{partition} ({path}{', size first' if size_first else ''}): "
                                                       f"kfs cat {len(cat[0])} bytes, error {cat[1]}; messages.jsonl "
                                                       f"{len(view[0])} bytes, error {view[1]}")
            values = []  # `.value` lookups on the damaged log: the same record or error on both paths
            for target in value_targets:
                try:
                    r = plog.record_at(target)
                    values.append((r.offset, r.timestamp, r.key, r.value))
                except (KfsError, OffsetOutOfRange) as e:
                    values.append(type(e).__name__)
            results[path] = (cat, values, _cat_kcat(plog))
            if path == "python":
                continue
            with contextlib.suppress(KfsError):
                plog.info()
            with contextlib.suppress(KfsError):
                list(plog.records(on_corrupt="skip"))
            for target in [rnd.choice(t.offsets) for _ in range(4)]:
                with contextlib.suppress(KfsError, OffsetOutOfRange):
                    plog.locate_offset(target)
            for target in [rnd.choice(t.timestamps) for _ in range(3)] if t.timestamps else []:
                with contextlib.suppress(KfsError):
                    plog.locate_time(target)
        except Failure:
            raise
        except Exception as e:
            raise Failure("exception", f"{partition} ({path}): {type(e).__name__}: {e}") from e
        finally:
            plog.close()
    if len(results) == 2 and results["c"] != results["python"]:
        what = next(what for i, what in enumerate(("kfs cat", ".value lookups", "kfs cat -f"))
                    if results["c"][i] != results["python"][i])
        raise Failure("disagreement", f"{partition}: C and Python paths differ ({what})")
