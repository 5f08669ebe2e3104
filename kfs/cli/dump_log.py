"""`kfs dump` of a `.log`: `DumpLogSegments.dumpLog`, batch lines and with deep iteration record lines,
control records included (transaction markers and KRaft's control records decoded as Kafka prints them)."""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable, Iterator

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
from kfs.record import (
    BatchHeader,
    CorruptBatchError,
    Record,
    crc_is_valid,
    legacy_message_checks,
    parse_control_record,
)
from kfs.storage import CorruptLogError, LogSegment


def dump_log(path: str, out: Out, problems: Problems, *, deep: bool, print_data: bool,
              skip_metadata: bool, max_bytes: int | None) -> None:
    """`DumpLogSegments.dumpLog`: batches from position 0, `position` being the bytes before each."""
    out(f"Log starting offset: {base_offset_of_file(path)}\n")
    segment = segment_of_file(path)
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
                    else increment_sequence(header.base_sequence, record.offset - header.base_offset))
        line += f" sequence: {sequence} headerKeys: [{','.join(k for k, _ in record.headers)}]"
    if legacy_check is not None:
        crc, valid = legacy_check
        line += f" isValid: {java_bool(valid)} crc: {crc}"
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
