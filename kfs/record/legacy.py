"""Legacy message sets, magic v0 and v1 (LegacyRecord.java, AbstractLegacyRecordBatch.java; KIP-31/32).

A message on disk, big-endian:

    offset  size  field
    0       8     Offset       int64   (of the message; of the last inner message for a compressed wrapper)
    8       4     Size         int32   (bytes after this field)
    12      4     CRC          uint32  (CRC-32 of bytes 16..end)
    16      1     Magic        int8    (0 or 1)
    17      1     Attributes   int8    (bits 0-2: codec; v1 bit 3: LogAppendTime)
    18      8     Timestamp    int64   (v1 only)
    18/26   4     KeyLength    int32   (-1: null)
    ...           Key
    ...     4     ValueLength  int32   (-1: null)
    ...           Value        (for a compressed wrapper: the compressed message set of the inner messages)

The inner messages of a wrapper have the same layout. Their offsets are absolute in v0 and relative
(0, 1, ...) in v1, where the wrapper's offset is the absolute offset of the last inner message.
"""

from __future__ import annotations

import struct

from kfs.record.compression import MAX_BATCH_RECORDS, DecompressionError, codec_name, decompress
from kfs.record.types import NO_TIMESTAMP_TYPE, BatchHeader, Buffer, CorruptBatchError, Record

OFFSET_OFFSET = 0
SIZE_OFFSET = 8
CRC_OFFSET = 12
MAGIC_OFFSET = 16
ATTRIBUTES_OFFSET = 17
TIMESTAMP_OFFSET = 18
KEY_SIZE_OFFSET_V0 = 18
KEY_SIZE_OFFSET_V1 = 26
LOG_OVERHEAD = 12
RECORD_OVERHEAD_V0 = 14  # crc + magic + attributes + key length + value length
RECORD_OVERHEAD_V1 = 22  # ... + timestamp

COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08

MESSAGE_HEAD = struct.Struct(">qiIbb")  # Offset, Size, CRC, Magic, Attributes
TIMESTAMP = struct.Struct(">q")
LENGTH = struct.Struct(">i")


def parse_header(buf: Buffer, at: int, position: int) -> BatchHeader:
    """Fill a BatchHeader from the first 18 (v0) or 26 (v1) bytes of a message."""
    try:
        offset, size, crc, magic, attributes = MESSAGE_HEAD.unpack_from(buf, at)
        timestamp = TIMESTAMP.unpack_from(buf, at + TIMESTAMP_OFFSET)[0] if magic == 1 else -1
    except struct.error as e:
        raise CorruptBatchError(f"message header truncated at position {position}", position) from e
    if magic not in (0, 1) or size < (RECORD_OVERHEAD_V0 if magic == 0 else RECORD_OVERHEAD_V1):
        raise CorruptBatchError(f"impossible message (magic {magic}, size {size}) at position {position}",
                                position)
    h = BatchHeader()
    h.position = position
    h.size = LOG_OVERHEAD + size
    h.magic = magic
    h.last_offset = offset
    h.compression = codec_name(attributes & COMPRESSION_CODEC_MASK)
    if magic == 0:
        h.timestamp_type = NO_TIMESTAMP_TYPE
    else:
        h.timestamp_type = "LogAppendTime" if attributes & TIMESTAMP_TYPE_MASK else "CreateTime"
    h.first_timestamp = timestamp
    h.max_timestamp = timestamp
    h.crc = crc
    if h.compression == "none":
        h.base_offset = offset
        h.record_count = 1
    else:
        h.base_offset = -1
        h.record_count = -1
    return h


def key_value(data: Buffer, pos: int, end: int) -> tuple[bytes | None, bytes | None, int]:
    """(key, value, position after the value) for the KeyLength field at data[pos]."""
    out: list[bytes | None] = []
    for _ in range(2):
        if pos + 4 > end:
            raise ValueError("length field runs past the end of the message")
        (n,) = LENGTH.unpack_from(data, pos)
        pos += 4
        if n < 0:
            out.append(None)
        else:
            if pos + n > end:
                raise ValueError(f"field of {n} bytes runs past the end of the message")
            out.append(bytes(data[pos:pos + n]))
            pos += n
    return out[0], out[1], pos


def _inner_records(data: bytes, header: BatchHeader) -> list[Record]:
    """The inner messages of a compressed wrapper, as DeepRecordsIterator yields them."""
    wrapper_magic = header.magic
    log_append = header.timestamp_type == "LogAppendTime"
    wrapper_ts = header.max_timestamp
    wrapper_ts_type = header.timestamp_type
    end = len(data)
    pos = 0
    records: list[Record] = []
    while pos < end:
        offset, size, _crc, magic, attributes = MESSAGE_HEAD.unpack_from(data, pos)
        msg_end = pos + LOG_OVERHEAD + size
        if size < RECORD_OVERHEAD_V0 or msg_end > end:
            raise ValueError(f"inner message size {size} is impossible")
        if magic > 1 or magic < 0:
            raise ValueError(f"inner message magic {magic}")
        if attributes & COMPRESSION_CODEC_MASK:
            raise ValueError("inner messages must not be compressed")
        if magic == 0:
            timestamp, ts_type = -1, NO_TIMESTAMP_TYPE
            key_pos = pos + KEY_SIZE_OFFSET_V0
        else:
            if size < RECORD_OVERHEAD_V1:
                raise ValueError(f"inner message size {size} is too small for magic 1")
            timestamp = wrapper_ts if log_append else TIMESTAMP.unpack_from(data, pos + TIMESTAMP_OFFSET)[0]
            ts_type = wrapper_ts_type
            key_pos = pos + KEY_SIZE_OFFSET_V1
        key, value, after = key_value(data, key_pos, msg_end)
        if after != msg_end:
            raise ValueError(f"inner message at {pos} has {msg_end - after} bytes after its value")
        if records and offset <= records[-1].offset:
            raise ValueError(f"inner offset {offset} is not above the one before")
        records.append(Record(offset, timestamp, ts_type, key, value, []))
        if len(records) > MAX_BATCH_RECORDS:
            raise ValueError(f"more than {MAX_BATCH_RECORDS} inner messages, kfs's limit for one batch")
        pos = msg_end
    if not records:
        raise ValueError("compressed message set with no inner messages")
    if wrapper_magic > 0:
        # v1: inner offsets are relative; the wrapper's offset is the absolute offset of the last one.
        shift = header.last_offset - records[-1].offset
        for r in records:
            r.offset += shift
    return records


def decode_records(batch: Buffer, header: BatchHeader) -> list[Record]:
    """The record(s) of a legacy message: itself when uncompressed, else its inner messages."""
    position = header.position
    size = header.size
    magic = header.magic
    key_pos = KEY_SIZE_OFFSET_V0 if magic == 0 else KEY_SIZE_OFFSET_V1
    try:
        if len(batch) < size:
            raise ValueError(f"{len(batch)} bytes given for a message of {size}")
        key, value, after = key_value(batch, key_pos, size)
        if after != size:
            raise ValueError(f"{size - after} bytes after the value")
        if header.compression == "none":
            return [Record(header.last_offset, header.max_timestamp, header.timestamp_type, key, value, [])]
        if value is None:
            raise ValueError("compressed wrapper with a null value")
        return _inner_records(decompress(header.compression, value), header)
    except (ValueError, IndexError, struct.error, DecompressionError) as e:
        raise CorruptBatchError(f"message at position {position} is malformed ({e})", position) from e


def complete_header(header: BatchHeader, batch: Buffer) -> None:
    """Set a compressed wrapper's base offset and record count, known only from its inner messages."""
    if header.compression == "none" or header.record_count >= 0:
        return
    records = decode_records(batch, header)
    header.base_offset = records[0].offset
    header.record_count = len(records)
