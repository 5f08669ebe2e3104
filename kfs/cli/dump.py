"""`kfs dump FILE ...`: what Kafka's `kafka-dump-log.sh` prints, without a JVM (SPEC section 5).

Follows `org.apache.kafka.tools.DumpLogSegments` (tools/src/main/java/..., Kafka 4.x) line for line:

    .log        "Log starting offset: N", one line per batch as `FileRecords` iterates it, and with
                --deep-iteration / --print-data-log one "| offset: ..." line per record
    .index      "offset: N position: P"; each entry checked against the batch at P in the .log beside it
    .timeindex  "timestamp: T offset: O"; each entry checked against the batch holding O
    .txnindex   "version: 0 producerId: ... firstOffset: ... lastOffset: ... lastStableOffset: ..."

The index problems are collected and printed to stderr after every file is dumped, as Kafka does:
"Mismatches in :<file>" (reverse offset order, one per index offset), "Found timestamp mismatch in :",
"Found out of order timestamp in :", "The following indexed offsets are not found in the log.",
and with deep iteration "Non-consecutive offsets in <file>". Exit status 0, as Kafka's.

Where Kafka's tool would crash with a stack trace, kfs says one sentence instead:
- an index entry pointing past the log (or at no complete batch) is a mismatch with log offset -1,
  the value Kafka's time index check already uses for "not found";
- a missing file, a name that is not `<base offset>.<suffix>` or an unknown suffix is an error
  before anything is dumped (Kafka prints "Ignoring unknown file" and carries on);
- a corrupt batch ends the dump after the lines before it, naming the file and position.

Live segments: a running broker's active `.index` / `.timeindex` are preallocated with a zero tail.
Kafka's dump loop stops at the first zero entry ("since it is a sparse file ... stop if we see one");
kfs lists the entries before the tail, which are the ones the broker holds in memory. The
--index-sanity-check is the broker's startup check, which sees every slot of the file: a zero tail
fails it for a time index (the broker rebuilds such an index after an unclean shutdown), and kfs
says so beside Kafka's message.

Everything is read through the project's own layers: `kfs.storage` (LogSegment, the index classes,
read_txn_index) and `kfs.record` (headers, CRCs, records, control markers). The one thing decoded
here is the value of KRaft control records (LeaderChange, snapshot header/footer, kraft.version),
which `kfs.record.control` names and leaves as bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
from collections.abc import Callable, Iterator

from kfs.cli.arguments import non_negative_int
from kfs.record import (
    BatchHeader,
    CorruptBatchError,
    Record,
    crc_is_valid,
    decompress,
    legacy,
    parse_batch_header,
    parse_control_record,
    peek_size,
)
from kfs.storage import CorruptLogError, KfsError, LogSegment, VanishedError
from kfs.storage.index import OffsetIndex, SegmentIndex, TimeIndex
from kfs.storage.txn_index import read_txn_index

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)

RECORD_INDENT = "|"
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024  # DumpLogSegments' --max-message-size default
INT32_MAX = 2**31 - 1
NO_SEQUENCE = -1

Out = Callable[[str], object]


# ---- the command ------------------------------------------------------------------------------



def add_dump_command(subparsers: argparse._SubParsersAction) -> None:
    """Add `kfs dump` to the `kfs` parser (called by kfs.cli.main)."""
    p = subparsers.add_parser(
        "dump", help="what kafka-dump-log.sh prints for .log, .index, .timeindex and .txnindex files",
        description="Print segment files as Kafka's kafka-dump-log.sh (DumpLogSegments) does, "
                    "checking indexes against the .log beside them.")
    p.add_argument("files", nargs="*", metavar="FILE", help="segment files: .log, .index, .timeindex, .txnindex")
    p.add_argument("--files", dest="files_csv", metavar="FILE1,FILE2", action="append", default=[],
                   help="comma-separated files, as kafka-dump-log.sh takes them")
    p.add_argument("--deep-iteration", action="store_true", help="print every record, not only batches")
    p.add_argument("--print-data-log", action="store_true",
                   help="print record keys and values as UTF-8 (implies --deep-iteration)")
    p.add_argument("--skip-record-metadata", action="store_true",
                   help="print only keys and values of records (with --print-data-log)")
    p.add_argument("--verify-index-only", action="store_true",
                   help="check .index/.timeindex entries against the log without printing them")
    p.add_argument("--index-sanity-check", action="store_true",
                   help="only the check a broker runs on startup to decide whether to rebuild an index")
    p.add_argument("--max-bytes", type=non_negative_int, metavar="N",
                   help="read only the batches within the first N bytes of each .log")
    p.add_argument("--max-message-size", type=non_negative_int, default=DEFAULT_MAX_MESSAGE_SIZE, metavar="N",
                   help="the largest batch an index entry may point at (default 5 MiB)")
    p.set_defaults(func=run_dump)


def run_dump(args: argparse.Namespace) -> int:
    files = list(args.files) + [f for csv in args.files_csv for f in csv.split(",") if f]
    if not files:
        raise KfsError("dump needs at least one FILE (a .log, .index, .timeindex or .txnindex)")
    for path in files:
        _check_file(path)
    deep = args.deep_iteration or args.print_data_log
    problems = _Problems()
    out = sys.stdout.write
    status = 0
    for path in files:
        out(f"Dumping {path}\n")
        suffix = _suffix(path)
        if suffix == LOG_SUFFIX:
            _dump_log(path, out, problems, deep=deep, print_data=args.print_data_log,
                      skip_metadata=args.skip_record_metadata, max_bytes=args.max_bytes)
        elif suffix == TXN_INDEX_SUFFIX:
            _dump_txn_index(path, out)
        elif args.index_sanity_check:
            if not _sanity_check(path, suffix, out):
                status = 1
        elif suffix == INDEX_SUFFIX:
            _dump_offset_index(path, out, problems, verify_only=args.verify_index_only,
                               max_message_size=args.max_message_size)
        else:
            _dump_time_index(path, out, problems, verify_only=args.verify_index_only)
    sys.stdout.flush()
    problems.report(sys.stderr.write)
    return status


def _suffix(path: str) -> str:
    name = os.path.basename(path)
    return name[name.rfind("."):] if "." in name else ""


def _check_file(path: str) -> None:
    """Every file is checked before any is dumped, so a typo costs no half-printed output."""
    if not os.path.exists(path):
        raise KfsError(f"{path}: no such file")
    if not os.path.isfile(path):
        raise KfsError(f"{path}: not a file")
    suffix = _suffix(path)
    if suffix not in SUFFIXES:
        raise KfsError(f"{path}: not a file kfs dump reads (.log, .index, .timeindex or .txnindex)")
    _base_offset(path)


def _base_offset(path: str) -> int:
    """The segment's base offset, from its name, as `UnifiedLog.offsetFromFile` reads it."""
    stem = os.path.basename(path).split(".")[0]
    if not stem.isdigit():
        raise KfsError(f"{path}: not a segment file name (<base offset>{_suffix(path)})")
    return int(stem)


def _sibling(path: str, suffix: str) -> str:
    name = os.path.basename(path)
    return os.path.join(os.path.dirname(path), name.split(".")[0] + suffix)


def _segment(log_path: str) -> LogSegment:
    """A LogSegment for this very file (its name need not be the 20-digit form)."""
    segment = LogSegment(os.path.dirname(log_path) or ".", _base_offset(log_path))
    segment.log_path = log_path
    return segment


def _java_bool(value: bool) -> str:
    return "true" if value else "false"


def _increment_sequence(sequence: int, increment: int) -> int:
    """`DefaultRecordBatch.incrementSequence`: sequences wrap at Integer.MAX_VALUE."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


# ---- .log -------------------------------------------------------------------------------------

def _dump_log(path: str, out: Out, problems: _Problems, *, deep: bool, print_data: bool,
              skip_metadata: bool, max_bytes: int | None) -> None:
    """`DumpLogSegments.dumpLog`: batches from position 0, `position` being the bytes before each."""
    out(f"Log starting offset: {_base_offset(path)}\n")
    segment = _segment(path)
    try:
        file_size = segment.file_size()
        end = file_size if max_bytes is None else min(file_size, max_bytes)
        valid_bytes = 0
        last_offset = -1
        abs_path = os.path.abspath(path)
        for header, body in segment.batches(0, end):
            out(_batch_line(header, valid_bytes, crc_is_valid(body, header)))
            if deep:
                for record, line in _record_lines(segment, header, body, print_data, skip_metadata):
                    if record.offset != last_offset + 1:
                        problems.non_consecutive.setdefault(abs_path, {})[last_offset] = record.offset
                    last_offset = record.offset
                    out(line)
            valid_bytes += header.size
    finally:
        segment.close()
    # A live segment may end in a batch still being written, or in a preallocated log's zeros.
    if max_bytes is None and file_size > valid_bytes:
        out(f"Found {file_size - valid_bytes} invalid bytes at the end of {os.path.basename(path)}\n")


def _batch_line(h: BatchHeader, position: int, is_valid: bool) -> str:
    """`DumpLogSegments.printBatchLevel`."""
    if h.magic >= 2:
        last_sequence = (NO_SEQUENCE if h.base_sequence == NO_SEQUENCE
                         else _increment_sequence(h.base_sequence, h.last_offset - h.base_offset))
        # Java prints the OptionalLong of RecordBatch.deleteHorizonMs() as it is.
        horizon = "OptionalLong.empty" if h.delete_horizon_ms is None else f"OptionalLong[{h.delete_horizon_ms}]"
        head = (f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.record_count} "
                f"baseSequence: {h.base_sequence} lastSequence: {last_sequence} producerId: {h.producer_id} "
                f"producerEpoch: {h.producer_epoch} partitionLeaderEpoch: {h.partition_leader_epoch} "
                f"isTransactional: {_java_bool(h.is_transactional)} isControl: {_java_bool(h.is_control)} "
                f"deleteHorizonMs: {horizon}")
    else:
        head = f"offset: {h.last_offset}"
    return (f"{head} position: {position} {h.timestamp_type}: {h.max_timestamp} size: {h.size} "
            f"magic: {h.magic} compresscodec: {h.compression} crc: {h.crc} isvalid: {_java_bool(is_valid)}\n")


def _record_lines(segment: LogSegment, header: BatchHeader, body, print_data: bool,
                  skip_metadata: bool) -> Iterator[tuple[Record, str]]:
    """`DumpLogSegments.dumpBatchRecords`: one line per record of the batch, control records too."""
    records = segment.records_of(header, body)
    legacy_checks = _legacy_record_checks(segment, header, body) if header.magic < 2 else None
    for i, record in enumerate(records):
        parts = []
        if not skip_metadata:
            parts.append(_record_metadata(segment, header, record,
                                          legacy_checks[i] if legacy_checks else None))
        if print_data and not header.is_control:
            parts.append(_record_contents(record, f"{RECORD_INDENT} " if skip_metadata else " "))
        yield record, "".join(parts) + "\n"


def _record_metadata(segment: LogSegment, header: BatchHeader, record: Record,
                     legacy_check: tuple[int, bool] | None) -> str:
    """`DumpLogSegments.printRecordMetadata`."""
    key_size = -1 if record.key is None else len(record.key)
    value_size = -1 if record.value is None else len(record.value)
    line = (f"{RECORD_INDENT} offset: {record.offset} {header.timestamp_type}: {record.timestamp} "
            f"keySize: {key_size} valueSize: {value_size}")
    if header.magic >= 2:
        sequence = (NO_SEQUENCE if header.base_sequence < 0
                    else _increment_sequence(header.base_sequence, record.offset - header.base_offset))
        line += f" sequence: {sequence} headerKeys: [{','.join(k for k, _ in record.headers)}]"
    if legacy_check is not None:
        crc, valid = legacy_check
        line += f" isValid: {_java_bool(valid)} crc: {crc}"
    if header.is_control:
        line += _control_record(segment, header, record)
    return line


def _record_contents(record: Record, prefix: str) -> str:
    """`DumpLogSegments.printRecordContents` with Kafka's default StringDecoder (UTF-8, malformed replaced)."""
    text = ""
    if record.key is not None:
        text += f"{prefix}key: {bytes(record.key).decode('utf-8', 'replace')}"
        prefix = " "
    if record.value is not None:
        text += f"{prefix}payload: {bytes(record.value).decode('utf-8', 'replace')}"
    return text


def _legacy_record_checks(segment: LogSegment, header: BatchHeader, body) -> list[tuple[int, bool]]:
    """(stored CRC, CRC valid) of each legacy record, as `AbstractLegacyRecordBatch.checksum/isValid` give.

    An uncompressed message is its own record. A compressed wrapper's inner messages have the
    message layout too, so the record layer's header parser and CRC check read them from the
    decompressed message set.
    """
    if header.compression == "none":
        return [(header.crc, crc_is_valid(body, header))]
    try:
        key_pos = legacy.KEY_SIZE_OFFSET_V0 if header.magic == 0 else legacy.KEY_SIZE_OFFSET_V1
        _key, value, _after = legacy._key_value(body, key_pos, header.size)
        inner = decompress(header.compression, value or b"")
        checks = []
        at = 0
        while at < len(inner):
            size, _magic = peek_size(inner, at)
            inner_header = parse_batch_header(inner, at, at)
            checks.append((inner_header.crc, crc_is_valid(memoryview(inner)[at:at + size], inner_header)))
            at += size
        return checks
    except (CorruptBatchError, ValueError, struct.error) as e:
        raise CorruptLogError(segment.log_path, header.position, f"compressed message set: {e}") from None


# ---- control records --------------------------------------------------------------------------

def _control_record(segment: LogSegment, header: BatchHeader, record: Record) -> str:
    """`DumpLogSegments.printControlRecord`."""
    try:
        name, coordinator_epoch = parse_control_record(record)
    except CorruptBatchError as e:
        raise CorruptLogError(segment.log_path, header.position, str(e)) from None
    if coordinator_epoch is not None:
        return f" endTxnMarker: {name} coordinatorEpoch: {coordinator_epoch}"
    rendering = _KRAFT_CONTROL_VALUES.get(name)
    if rendering is None:
        type_id = struct.unpack_from(">h", record.key or b"\0\0\0\0", 2)[0]
        return f" controlType: {name}({type_id})"
    label, parse = rendering
    try:
        return f" {label}{json.dumps(parse(_Reader(record.value or b'')), separators=(',', ':'))}"
    except (IndexError, struct.error, ValueError) as e:
        raise CorruptLogError(segment.log_path, header.position,
                              f"{name} control record at offset {record.offset} is malformed ({e})") from None


class _Reader:
    """Just enough of Kafka's flexible-version message encoding (KIP-482) for the KRaft control values."""

    def __init__(self, data: bytes) -> None:
        self.data = bytes(data)
        self.pos = 0

    def int16(self) -> int:
        (v,) = struct.unpack_from(">h", self.data, self.pos)
        self.pos += 2
        return v

    def int32(self) -> int:
        (v,) = struct.unpack_from(">i", self.data, self.pos)
        self.pos += 4
        return v

    def int64(self) -> int:
        (v,) = struct.unpack_from(">q", self.data, self.pos)
        self.pos += 8
        return v

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value
            shift += 7
            if shift > 28:
                raise ValueError("varint too long")

    def tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.pos += self.uvarint()

    def compact_array(self, element: Callable[[_Reader], dict]) -> list[dict]:
        n = self.uvarint() - 1
        if n < 0:
            raise ValueError("a non-nullable array was serialized as null")
        return [element(self) for _ in range(n)]


def _voter(r: _Reader) -> dict:
    voter = {"voterId": r.int32()}
    r.tagged_fields()
    return voter


def _leader_change(r: _Reader) -> dict:
    """LeaderChangeMessage v0 (clients/.../common/message/LeaderChangeMessage.json)."""
    message = {"version": r.int16(), "leaderId": r.int32(), "voters": r.compact_array(_voter),
               "grantingVoters": r.compact_array(_voter)}
    r.tagged_fields()
    return message


def _snapshot_header(r: _Reader) -> dict:
    message = {"version": r.int16(), "lastContainedLogTimestamp": r.int64()}
    r.tagged_fields()
    return message


def _snapshot_footer(r: _Reader) -> dict:
    message = {"version": r.int16()}
    r.tagged_fields()
    return message


def _kraft_version(r: _Reader) -> dict:
    message = {"version": r.int16(), "kRaftVersion": r.int16()}
    r.tagged_fields()
    return message


# name -> (what Kafka prints before the JSON, parser); KRAFT_VOTERS falls back to "controlType: ...".
_KRAFT_CONTROL_VALUES: dict[str, tuple[str, Callable[[_Reader], dict]]] = {
    "LEADER_CHANGE": ("LeaderChange: ", _leader_change),
    "SNAPSHOT_HEADER": ("SnapshotHeader ", _snapshot_header),
    "SNAPSHOT_FOOTER": ("SnapshotFooter ", _snapshot_footer),
    "KRAFT_VERSION": ("KRaftVersion ", _kraft_version),
}


# ---- .index and .timeindex --------------------------------------------------------------------

def _index_entries(index: SegmentIndex, path: str) -> list[tuple[int, int]]:
    """The entries before a live index's zero tail, stopping, as Kafka's dump loop does, at an
    entry that repeats the base offset (a zero entry of a crashed broker's sparse file)."""
    try:
        entries = index.entries()
    except (OSError, ValueError) as e:
        raise KfsError(f"{path}: cannot read the index ({e})") from None
    key = 0 if isinstance(index, OffsetIndex) else 1  # where the offset is in an entry
    for i, entry in enumerate(entries):
        if i > 0 and entry[key] == index.base_offset:
            return entries[:i]
    return entries


def _log_beside(index_path: str) -> LogSegment:
    log_path = _sibling(index_path, LOG_SUFFIX)
    if not os.path.isfile(log_path):
        raise KfsError(f"{index_path}: no {os.path.basename(log_path)} beside it to check the index against")
    return _segment(log_path)


def _dump_offset_index(path: str, out: Out, problems: _Problems, *, verify_only: bool,
                       max_message_size: int) -> None:
    """`DumpLogSegments.dumpIndex`: the batch at each entry's position must end at the entry's offset."""
    index = OffsetIndex(path, _base_offset(path))
    segment = _log_beside(path)
    try:
        entries = _index_entries(index, path)
        if not entries:
            out(f"{path} is empty.\n")
            return
        mismatches = problems.index_mismatches.setdefault(os.path.abspath(path), {})
        file_size = segment.file_size()
        for offset, position in entries:
            last_offset = _first_batch_last_offset(segment, position, min(file_size, position + max_message_size))
            if last_offset != offset:
                mismatches[offset] = last_offset
            if not verify_only:
                out(f"offset: {offset} position: {position}\n")
    finally:
        index.close()
        segment.close()


def _first_batch_last_offset(segment: LogSegment, position: int, end: int) -> int:
    """The last offset of the batch at `position`; -1 if there is no complete, readable batch there."""
    if not 0 <= position < end:
        return -1
    try:
        for header in segment.headers(position, end):
            return header.last_offset
    except (CorruptLogError, VanishedError):
        pass
    return -1


def _dump_time_index(path: str, out: Out, problems: _Problems, *, verify_only: bool) -> None:
    """`DumpLogSegments.dumpTimeIndex`: the batch holding each entry's offset must end at that offset,
    and its largest record timestamp must be the entry's timestamp; timestamps must increase."""
    base_offset = _base_offset(path)
    time_index = TimeIndex(path, base_offset)
    index_path = _sibling(path, INDEX_SUFFIX)
    offset_index = OffsetIndex(index_path, base_offset) if os.path.isfile(index_path) else None
    segment = _log_beside(path)
    abs_path = os.path.abspath(path)
    try:
        valid_size = segment.valid_size()
        previous_timestamp = -1  # RecordBatch.NO_TIMESTAMP
        for timestamp, offset in _index_entries(time_index, path):
            found = _batch_holding(segment, offset_index, offset, valid_size)
            if found is None:
                problems.time_not_found.setdefault(abs_path, []).append((offset, -1))
            elif found[0].last_offset != offset:
                problems.time_not_found.setdefault(abs_path, []).append((offset, found[0].last_offset))
            else:
                header, body = found
                max_timestamp = max((r.timestamp for r in segment.records_of(header, body)), default=-1)
                if max_timestamp != timestamp:
                    problems.time_mismatches.setdefault(abs_path, []).append((timestamp, max_timestamp))
                if previous_timestamp >= timestamp:
                    problems.time_out_of_order.setdefault(abs_path, []).append((timestamp, previous_timestamp))
            if not verify_only:
                out(f"timestamp: {timestamp} offset: {offset}\n")
            previous_timestamp = timestamp
    finally:
        time_index.close()
        if offset_index is not None:
            offset_index.close()
        segment.close()


def _batch_holding(segment: LogSegment, offset_index: OffsetIndex | None, offset: int, end: int):  # type: ignore[no-untyped-def]
    """The first batch whose last offset is >= `offset`, scanning from the offset index's entry for it."""
    start = 0
    if offset_index is not None:
        try:
            entry = offset_index.lookup(offset)
        except (OSError, ValueError):
            entry = None
        if entry is not None and 0 <= entry[1] < end:
            start = entry[1]
    try:
        for header in segment.headers(start, end):
            if header.last_offset >= offset:
                return segment.batch_at(header.position)
    except (CorruptLogError, VanishedError):
        if start == 0:
            raise
        return _batch_holding(segment, None, offset, end)  # a bad index position: scan from the start
    return None


def _sanity_check(path: str, suffix: str, out: Out) -> bool:
    """`OffsetIndex.sanityCheck` / `TimeIndex.sanityCheck`, the broker's startup check.

    The broker opens an index as every slot of the file, so a preallocated zero tail's last slot
    is its "last entry": (base offset, position 0) for an offset index, which passes, and
    (timestamp 0, base offset) for a time index, which fails whenever real entries precede it.
    """
    base_offset = _base_offset(path)
    abs_path = os.path.abspath(path)
    is_offset_index = suffix == INDEX_SUFFIX
    index: SegmentIndex = OffsetIndex(path, base_offset) if is_offset_index else TimeIndex(path, base_offset)
    try:
        length = os.path.getsize(path)
        slots = length // index.entry_size
        entries = _index_entries(index, path)
    finally:
        index.close()
    zero_tail = slots > len(entries)
    if is_offset_index and slots == 0:
        out(f"{path} is empty.\n")
        return True
    problem = None
    if is_offset_index:
        last_offset = base_offset if zero_tail else entries[-1][0]
        if slots and last_offset < base_offset:
            problem = (f"Corrupt index found, index file ({abs_path}) has non-zero size but the last offset "
                       f"is {last_offset} which is less than the base offset {base_offset}")
    else:
        first_timestamp = entries[0][0] if entries else 0
        last_timestamp, last_offset = (0, base_offset) if zero_tail else entries[-1]
        if slots and last_timestamp < first_timestamp:
            problem = (f"Corrupt time index found, time index file ({abs_path}) has non-zero size but the last "
                       f"timestamp is {last_timestamp} which is less than the first timestamp {first_timestamp}")
        elif slots and last_offset < base_offset:
            problem = (f"Corrupt time index found, time index file ({abs_path}) has non-zero size but the last "
                       f"offset is {last_offset} which is less than the first offset {base_offset}")
    if problem is None and length % index.entry_size:
        kind = "Index" if is_offset_index else "Time index"
        problem = (f"{kind} file {abs_path} is corrupt, found {length} bytes which is neither positive nor "
                   f"a multiple of {index.entry_size}")
    if problem is None:
        out(f"{path} passed sanity check.\n")
        return True
    if zero_tail:
        problem += (f" (the file is preallocated: {len(entries)} entries, then {slots - len(entries)} zero slots, "
                    f"as a live broker's active segment has; a broker rebuilds this index after an unclean shutdown)")
    sys.stdout.flush()
    sys.stderr.write(f"kfs: {problem}\n")
    return False


# ---- .txnindex --------------------------------------------------------------------------------

def _dump_txn_index(path: str, out: Out) -> None:
    """`DumpLogSegments.dumpTxnIndex`. Kafka reads only version 0 entries (AbortedTxn.CURRENT_VERSION)."""
    try:
        aborted = read_txn_index(path)
    except OSError as e:
        raise KfsError(f"{path}: {e.strerror}") from None
    for txn in aborted:
        out(f"version: 0 producerId: {txn.producer_id} firstOffset: {txn.first_offset} "
            f"lastOffset: {txn.last_offset} lastStableOffset: {txn.last_stable_offset}\n")


# ---- what is reported after the dump ----------------------------------------------------------

class _Problems:
    """The index and offset problems DumpLogSegments collects, printed to stderr after every file."""

    def __init__(self) -> None:
        self.index_mismatches: dict[str, dict[int, int]] = {}   # index offset -> log offset
        self.time_mismatches: dict[str, list[tuple[int, int]]] = {}
        self.time_out_of_order: dict[str, list[tuple[int, int]]] = {}
        self.time_not_found: dict[str, list[tuple[int, int]]] = {}
        self.non_consecutive: dict[str, dict[int, int]] = {}    # previous offset -> next offset

    def report(self, err: Out) -> None:
        for path, mismatches in self.index_mismatches.items():
            if mismatches:
                err(f"Mismatches in :{path}\n")
                for index_offset in sorted(mismatches, reverse=True):  # Kafka's TreeMap(reverseOrder())
                    err(f"  Index offset: {index_offset}, log offset: {mismatches[index_offset]}\n")
        for path, found in self.time_mismatches.items():
            err(f"Found timestamp mismatch in :{path}\n")
            for index_timestamp, log_timestamp in found:
                err(f"  Index timestamp: {index_timestamp}, log timestamp: {log_timestamp}\n")
        for path, found in self.time_out_of_order.items():
            err(f"Found out of order timestamp in :{path}\n")
            for index_timestamp, previous in found:
                err(f"  Index timestamp: {index_timestamp}, Previously indexed timestamp: {previous}\n")
        for found in self.time_not_found.values():
            err("The following indexed offsets are not found in the log.\n")
            for index_offset, log_offset in found:
                err(f"Indexed offset: {index_offset}, found log offset: {log_offset}\n")
        for path, pairs in self.non_consecutive.items():
            err(f"Non-consecutive offsets in {path}\n")
            for previous in sorted(pairs):
                err(f"  {previous} is followed by {pairs[previous]}\n")
