"""`kfs dump` of a `.log` or a KRaft snapshot `.checkpoint`: `DumpLogSegments.dumpLog`, batch lines and
with deep iteration record lines, control records included (transaction markers, and KRaft's control
records decoded by kfs's schema interpreter and printed as Kafka's JSON converters print them)."""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterator

from kfs._native import cli as native
from kfs.cli.dump_common import (
    NO_SEQUENCE,
    RECORD_INDENT,
    Out,
    Problems,
    base_offset_of_file,
    increment_sequence,
    java_bool,
    segment_of_file,
)
from kfs.cli.dump_decoders import MessageParser, string_parser
from kfs.internal_topics import DecodeError, decode_control
from kfs.internal_topics.render import kafka_json
from kfs.record import (
    BatchHeader,
    CorruptBatchError,
    Record,
    crc_is_valid,
    decode_records,
    default_batch,
    legacy_message_checks,
    parse_control_record,
)
from kfs.record.compression import MAX_BATCH_RECORDS
from kfs.storage import CorruptLogError, KfsError, LogSegment

BOOTSTRAP_CHECKPOINT = "bootstrap.checkpoint"  # BootstrapDirectory.BINARY_BOOTSTRAP_FILENAME
SNAPSHOT_NAME = re.compile(r"(\d{20})-(\d{10})\.checkpoint")  # Snapshots.parse
_BATCHES_PER_WRITE = 128  # pieces (a batch line, a batch's record lines) joined into one write
_render_v2_dump = native.render_v2_dump  # the compiled twin of _v2_data_lines, or None


def dump_log(path: str, out: Out, problems: Problems, *, deep: bool, print_data: bool,
             skip_metadata: bool, max_bytes: int | None, parser: MessageParser = string_parser) -> None:
    """`DumpLogSegments.dumpLog`: batches from position 0, `position` being the bytes before each."""
    out(_first_line(path))
    segment = segment_of_file(path) if path.endswith(".log") else LogSegment(
        os.path.dirname(path) or ".", 0, log_path=path, follow_links=True)
    pending: list[str] = []  # written a few batches at a time: one write per batch cost a tenth of a dump
    emit = pending.append
    try:
        file_size = segment.file_size()
        end = file_size if max_bytes is None else min(file_size, max_bytes)
        valid_bytes = 0
        last_offset = -1
        abs_path = os.path.abspath(path)
        fast = deep and print_data and not skip_metadata and parser is string_parser
        for header, body in segment.batches(0, end):
            is_valid = crc_is_valid(body, header)
            if fast and header.magic >= 2 and not header.is_control:
                # The common case (`--deep-iteration --print-data-log` of a data batch) a batch at a time:
                # compiled from the batch's bytes when it can be (its batch line too), else in Python.
                fused = _fused_data_lines(header, body, last_offset, valid_bytes) if is_valid else None
                if fused is not None:
                    text, last_offset, gaps = fused
                    if gaps:
                        _note_packed_gaps(problems.non_consecutive.setdefault(abs_path, {}), gaps)
                    emit(text)
                else:
                    emit(_batch_line(header, valid_bytes, is_valid))
                    records = _checked_records(segment, header, body, is_valid)
                    text, gap = _v2_data_lines(header, records, last_offset + 1 if last_offset != -1 else -1)
                    if gap is not None:
                        _note_gaps(problems.non_consecutive.setdefault(abs_path, {}), last_offset, records)
                    if records:
                        last_offset = records[-1].offset
                    emit(text)
            else:
                emit(_batch_line(header, valid_bytes, is_valid))
                if deep:
                    for record, record_line in _record_lines(segment, header, body, print_data, skip_metadata,
                                                             parser):
                        if last_offset != -1 and record.offset != last_offset + 1:  # dumpLog starts at the first
                            problems.non_consecutive.setdefault(abs_path, {})[last_offset] = record.offset
                        last_offset = record.offset
                        emit(record_line)
            valid_bytes += header.size
            if len(pending) >= _BATCHES_PER_WRITE:
                text = "".join(pending)
                pending.clear()
                out(text)
    finally:
        try:
            if pending:  # the lines before an error too: the batch line is printed before it, as Kafka does
                out("".join(pending))
        finally:
            segment.close()
    # A live segment may end in a batch still being written, or in a preallocated log's zeros.
    if max_bytes is None and file_size > valid_bytes:
        out(f"Found {file_size - valid_bytes} invalid bytes at the end of {os.path.basename(path)}\n")


def _first_line(path: str) -> str:
    """The log's base offset, or a snapshot's id (Snapshots.parse: `<end offset>-<epoch>.checkpoint`)."""
    name = os.path.basename(path)
    if name.endswith(".log"):
        return f"Log starting offset: {base_offset_of_file(path)}\n"
    if name == BOOTSTRAP_CHECKPOINT:
        return "KRaft bootstrap snapshot\n"
    match = SNAPSHOT_NAME.fullmatch(name)
    if match is None:
        raise KfsError(f"{path}: not a KRaft snapshot name (<20-digit end offset>-<10-digit epoch>.checkpoint)")
    return f"Snapshot end offset: {int(match[1])}, epoch: {int(match[2])}\n"


def _batch_line(h: BatchHeader, position: int, is_valid: bool) -> str:
    """`DumpLogSegments.printBatchLevel`."""
    if h.magic >= 2:
        last_sequence = (NO_SEQUENCE if h.base_sequence == NO_SEQUENCE
                         else increment_sequence(h.base_sequence, h.last_offset - h.base_offset))
        # Java prints the OptionalLong of RecordBatch.deleteHorizonMs() as it is.
        horizon = "OptionalLong.empty" if h.delete_horizon_ms is None else f"OptionalLong[{h.delete_horizon_ms}]"
        head = (f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.record_count} "
                f"baseSequence: {h.base_sequence} lastSequence: {last_sequence} producerId: {h.producer_id} "
                f"producerEpoch: {h.producer_epoch} partitionLeaderEpoch: {h.partition_leader_epoch} "
                f"isTransactional: {java_bool(h.is_transactional)} isControl: {java_bool(h.is_control)} "
                f"deleteHorizonMs: {horizon}")
    else:
        head = f"offset: {h.last_offset}"
    return (f"{head} position: {position} {h.timestamp_type}: {h.max_timestamp} size: {h.size} "
            f"magic: {h.magic} compresscodec: {h.compression} crc: {h.crc} isvalid: {java_bool(is_valid)}\n")


def _checked_records(segment: LogSegment, header: BatchHeader, body: memoryview, is_valid: bool) -> list[Record]:
    """The batch's records; its CRC was just checked for the batch line, so it is not checked twice."""
    if not is_valid:
        return segment.records_of(header, body)  # the CRC error, naming file and position
    try:
        return decode_records(body, header)
    except CorruptBatchError as e:
        raise CorruptLogError(segment.log_path, header.position, str(e)) from None


def _fused_data_lines(header: BatchHeader, body: memoryview, previous: int, position: int
                      ) -> tuple[str, int, bytes] | None:
    """`_batch_line` and `_v2_data_lines` of a data batch whose CRC is valid, rendered by `render_v2_dump`
    (kfs/_native/csrc/cli/render_v2_dump.c) straight from its bytes: (lines, last offset, gaps packed as int64
    pairs). None when the batch takes the decoder's path, which raises what is wrong with it or prints
    what is unusual."""
    if _render_v2_dump is None or not 0 < header.record_count <= MAX_BATCH_RECORDS:
        return None
    payload = default_batch.section_for_compiled(body, header)
    if payload is None:
        return None
    try:
        return _render_v2_dump(payload, header.record_count, header.base_offset, header.first_timestamp,
                               header.timestamp_type, header.max_timestamp, header.base_sequence, previous,
                               body, position, header.compression)
    except OverflowError:  # a field beyond int64 (a header made by hand): the decoder's path
        return None


def _note_packed_gaps(gaps: dict[int, int], packed: bytes) -> None:
    """`_note_gaps` for the gaps render_v2_dump found, (offset before, offset) int64 pairs."""
    pairs = memoryview(packed).cast("q")
    for i in range(0, len(pairs), 2):
        gaps[pairs[i]] = pairs[i + 1]


def _note_gaps(gaps: dict[int, int], last_offset: int, records: list[Record]) -> None:
    """DumpLogSegments' non-consecutive offsets: each offset that does not follow the one before."""
    for record in records:
        if last_offset != -1 and record.offset != last_offset + 1:
            gaps[last_offset] = record.offset
        last_offset = record.offset


def _v2_data_lines(header: BatchHeader, records: list[Record], expected: int) -> tuple[str, int | None]:
    """What `_record_lines` prints for a v2 data batch with the string decoder, in one loop (per-record
    calls were 80% of a deep dump's time), and whether an offset did not follow the one before
    (`expected`: the offset that should come first, -1 for any): None when all did.

    The hot loop of `kfs dump`: one f-string per record, the batch's constant parts made once."""
    base, base_sequence = header.base_offset, header.base_sequence
    start = f"{RECORD_INDENT} offset: "
    stamp = f" {header.timestamp_type}: "
    lines: list[str] = []
    append = lines.append
    gap: int | None = None
    for r in records:
        offset, key, value, headers = r.offset, r.key, r.value, r.headers
        if offset != expected and expected != -1:
            gap = offset
        expected = offset + 1
        sequence = NO_SEQUENCE if base_sequence < 0 else increment_sequence(base_sequence, offset - base)
        names = headers[0][0] if len(headers) == 1 else ",".join([h[0] for h in headers])
        if key is not None and value is not None:
            append(f"{start}{offset}{stamp}{r.timestamp} keySize: {len(key)} valueSize: {len(value)} "
                   f"sequence: {sequence} headerKeys: [{names}] key: {key.decode('utf-8', 'replace')} "
                   f"payload: {value.decode('utf-8', 'replace')}")
            continue
        line = (f"{start}{offset}{stamp}{r.timestamp} keySize: {-1 if key is None else len(key)} "
                f"valueSize: {-1 if value is None else len(value)} sequence: {sequence} headerKeys: [{names}]")
        if key is not None:
            line += " key: " + key.decode("utf-8", "replace")
        if value is not None:
            line += " payload: " + value.decode("utf-8", "replace")
        append(line)
    append("")
    return "\n".join(lines), gap


def _record_lines(segment: LogSegment, header: BatchHeader, body: memoryview, print_data: bool,
                  skip_metadata: bool, parser: MessageParser) -> Iterator[tuple[Record, str]]:
    """`DumpLogSegments.dumpBatchRecords`: one line per record of the batch, control records too."""
    records = segment.records_of(header, body)
    legacy_checks = _legacy_record_checks(segment, header, body) if header.magic < 2 else None
    for i, record in enumerate(records):
        parts = []
        if not skip_metadata:
            parts.append(_record_metadata(segment, header, record,
                                          legacy_checks[i] if legacy_checks else None))
        if print_data and not header.is_control:
            parts.append(_record_contents(record, f"{RECORD_INDENT} " if skip_metadata else " ", parser))
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
                    else increment_sequence(header.base_sequence, record.offset - header.base_offset))
        line += f" sequence: {sequence} headerKeys: [{','.join(k for k, _ in record.headers)}]"
    if legacy_check is not None:
        crc, valid = legacy_check
        line += f" isValid: {java_bool(valid)} crc: {crc}"
    if header.is_control:
        line += _control_record(segment, header, record)
    return line


def _record_contents(record: Record, prefix: str, parser: MessageParser) -> str:
    """`DumpLogSegments.printRecordContents`: what the message parser makes of the key and the value."""
    key, payload = parser(record)
    text = ""
    if key is not None:
        text += f"{prefix}key: {key}"
        prefix = " "
    if payload is not None:
        text += f"{prefix}payload: {payload}"
    return text


def _legacy_record_checks(segment: LogSegment, header: BatchHeader, body: memoryview) -> list[tuple[int, bool]]:
    try:
        return legacy_message_checks(body, header)
    except CorruptBatchError as e:
        raise CorruptLogError(segment.log_path, header.position, str(e)) from None


# ---- control records --------------------------------------------------------------------------

def _control_record(segment: LogSegment, header: BatchHeader, record: Record) -> str:
    """`DumpLogSegments.printControlRecord`."""
    try:
        name, coordinator_epoch = parse_control_record(record)
    except CorruptBatchError as e:
        raise CorruptLogError(segment.log_path, header.position, str(e)) from None
    if coordinator_epoch is not None:
        return f" endTxnMarker: {name} coordinatorEpoch: {coordinator_epoch}"
    label = _KRAFT_CONTROL_LABELS.get(name)
    if label is None:
        type_id = struct.unpack_from(">h", record.key or b"\0\0\0\0", 2)[0]
        return f" controlType: {name}({type_id})"
    try:
        message = decode_control(name, record.value)
    except DecodeError as e:
        raise CorruptLogError(segment.log_path, header.position,
                              f"{name} control record at offset {record.offset} is malformed ({e})") from None
    assert message is not None
    return f" {label}{kafka_json(message.data)}"


# What DumpLogSegments prints before each KRaft control record's JSON.
_KRAFT_CONTROL_LABELS = {"LEADER_CHANGE": "LeaderChange: ", "SNAPSHOT_HEADER": "SnapshotHeader ",
                         "SNAPSHOT_FOOTER": "SnapshotFooter ", "KRAFT_VERSION": "KRaftVersion ",
                         "KRAFT_VOTERS": "KRaftVoters "}
