"""`kfs dump` of a `.log` or a KRaft snapshot `.checkpoint`: `DumpLogSegments.dumpLog`, batch lines and
with deep iteration record lines, control records included (transaction markers, and KRaft's control
records decoded by kfs's schema interpreter and printed as Kafka's JSON converters print them)."""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterator

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
from kfs.internal import DecodeError, decode_control
from kfs.internal.render import kafka_json
from kfs.record import (
    BatchHeader,
    CorruptBatchError,
    Record,
    crc_is_valid,
    legacy_message_checks,
    parse_control_record,
)
from kfs.storage import CorruptLogError, KfsError, LogSegment

BOOTSTRAP_CHECKPOINT = "bootstrap.checkpoint"  # BootstrapDirectory.BINARY_BOOTSTRAP_FILENAME
SNAPSHOT_NAME = re.compile(r"(\d{20})-(\d{10})\.checkpoint")  # Snapshots.parse


def dump_log(path: str, out: Out, problems: Problems, *, deep: bool, print_data: bool,
             skip_metadata: bool, max_bytes: int | None, parser: MessageParser = string_parser) -> None:
    """`DumpLogSegments.dumpLog`: batches from position 0, `position` being the bytes before each."""
    out(_first_line(path))
    segment = segment_of_file(path) if path.endswith(".log") else LogSegment(
        os.path.dirname(path) or ".", 0, log_path=path)
    try:
        file_size = segment.file_size()
        end = file_size if max_bytes is None else min(file_size, max_bytes)
        valid_bytes = 0
        last_offset = -1
        abs_path = os.path.abspath(path)
        for header, body in segment.batches(0, end):
            out(_batch_line(header, valid_bytes, crc_is_valid(body, header)))
            if deep and print_data and not skip_metadata and parser is string_parser and header.magic >= 2 \
                    and not header.is_control:
                # The common case (`--deep-iteration --print-data-log` of a data batch) a batch at a time.
                records = segment.records_of(header, body)
                for record in records:
                    if last_offset != -1 and record.offset != last_offset + 1:
                        problems.non_consecutive.setdefault(abs_path, {})[last_offset] = record.offset
                    last_offset = record.offset
                out(_v2_data_lines(header, records))
            elif deep:
                for record, line in _record_lines(segment, header, body, print_data, skip_metadata, parser):
                    if last_offset != -1 and record.offset != last_offset + 1:  # dumpLog starts at the first
                        problems.non_consecutive.setdefault(abs_path, {})[last_offset] = record.offset
                    last_offset = record.offset
                    out(line)
            valid_bytes += header.size
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


def _v2_data_lines(header: BatchHeader, records: list[Record]) -> str:
    """What `_record_lines` prints for a v2 data batch with the string decoder, in one loop: per-record
    calls were 80% of a deep dump's time."""
    timestamp_type, base, base_sequence = header.timestamp_type, header.base_offset, header.base_sequence
    lines = []
    for r in records:
        key, value = r.key, r.value
        sequence = NO_SEQUENCE if base_sequence < 0 else increment_sequence(base_sequence, r.offset - base)
        line = (f"{RECORD_INDENT} offset: {r.offset} {timestamp_type}: {r.timestamp} "
                f"keySize: {-1 if key is None else len(key)} valueSize: {-1 if value is None else len(value)} "
                f"sequence: {sequence} headerKeys: [{','.join([h[0] for h in r.headers])}]")
        if key is not None:
            line += " key: " + bytes(key).decode("utf-8", "replace")
        if value is not None:
            line += " payload: " + bytes(value).decode("utf-8", "replace")
        lines.append(line)
    lines.append("")
    return "\n".join(lines)


def _record_lines(segment: LogSegment, header: BatchHeader, body, print_data: bool,
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
