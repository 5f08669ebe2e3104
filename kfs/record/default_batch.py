"""Magic v2 record batches (DefaultRecordBatch.java, DefaultRecord.java; KIP-98).

Batch header, 61 bytes, big-endian:

    offset  size  field
    0       8     BaseOffset            int64
    8       4     Length                int32   (bytes after this field)
    12      4     PartitionLeaderEpoch  int32
    16      1     Magic                 int8    (= 2)
    17      4     CRC                   uint32  (CRC-32C of bytes 21..end)
    21      2     Attributes            int16
    23      4     LastOffsetDelta       int32
    27      8     BaseTimestamp         int64   (the delete horizon when attribute bit 6 is set)
    35      8     MaxTimestamp          int64
    43      8     ProducerId            int64
    51      2     ProducerEpoch         int16
    53      4     BaseSequence          int32
    57      4     RecordsCount          int32
    61      ...   Records               (compressed as a whole when attributes bits 0-2 say so)

Attributes:

    | unused 7-15 | delete horizon 6 | control 5 | transactional 4 | timestamp type 3 | codec 0-2 |

Record (varints are zigzag, as in protobuf):

    Length          varint   (bytes after this field)
    Attributes      int8     (unused)
    TimestampDelta  varlong  (from BaseTimestamp)
    OffsetDelta     varint   (from BaseOffset)
    KeyLength       varint   (-1: null key)
    Key             bytes
    ValueLength     varint   (-1: null value)
    Value           bytes
    HeadersCount    varint
    Headers         { KeyLength varint | Key utf-8 | ValueLength varint (-1: null) | Value bytes }*

With the delete horizon set (KIP-534) the log cleaner rewrote BaseTimestamp to the horizon and the
record deltas relative to it, so BaseTimestamp + TimestampDelta is still each record's timestamp.
"""

from __future__ import annotations

import struct

from kfs._native import record as native
from kfs.record.compression import MAX_BATCH_RECORDS, DecompressionError, codec_name, decompress
from kfs.record.types import TIMESTAMP_TYPES, BatchHeader, Buffer, CorruptBatchError, Record

BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57
RECORDS_OFFSET = 61
RECORD_BATCH_OVERHEAD = RECORDS_OFFSET

COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

# The whole header in one unpack; its layout is the table above.
HEADER = struct.Struct(">qiibIhiqqqhii")
assert HEADER.size == RECORD_BATCH_OVERHEAD
_CODEC_NAMES = tuple(codec_name(i) for i in range(COMPRESSION_CODEC_MASK + 1))
_new = object.__new__


def parse_header(buf: Buffer, at: int, position: int) -> BatchHeader:
    """Fill a BatchHeader from the 61 header bytes at buf[at]."""
    try:
        (base_offset, length, leader_epoch, magic, crc, attributes, last_delta, base_ts, max_ts,
         producer_id, producer_epoch, base_sequence, count) = HEADER.unpack_from(buf, at)
    except struct.error as e:
        raise CorruptBatchError(f"record batch header truncated at position {position}", position) from e
    if length < RECORD_BATCH_OVERHEAD - LENGTH_OFFSET - 4:
        raise CorruptBatchError(f"impossible record batch length {length} at position {position}", position)
    h = _new(BatchHeader)  # every slot is set below: skip __init__'s defaults, this runs once per batch
    h.position = position
    h.size = 12 + length
    h.magic = magic
    h.base_offset = base_offset
    h.last_offset = base_offset + last_delta
    h.compression = _CODEC_NAMES[attributes & COMPRESSION_CODEC_MASK]
    h.timestamp_type = TIMESTAMP_TYPES[1 if attributes & TIMESTAMP_TYPE_MASK else 0]
    h.first_timestamp = base_ts
    h.max_timestamp = max_ts
    h.crc = crc
    h.is_transactional = bool(attributes & TRANSACTIONAL_FLAG_MASK)
    h.is_control = bool(attributes & CONTROL_FLAG_MASK)
    h.producer_id = producer_id
    h.producer_epoch = producer_epoch
    h.base_sequence = base_sequence
    h.partition_leader_epoch = leader_epoch
    h.delete_horizon_ms = base_ts if attributes & DELETE_HORIZON_FLAG_MASK else None
    h.record_count = count
    return h


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """The zigzag varint at data[pos] (any length up to 10 bytes) and the position after it.

    The hot loop reads 1- and 2-byte varints inline and calls this only for longer ones.
    """
    result = 0
    shift = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def records_payload(batch: Buffer, header: BatchHeader) -> bytes:
    """The records section of the batch as bytes, decompressed once if the batch is compressed."""
    if len(batch) < header.size or header.size < RECORD_BATCH_OVERHEAD:
        raise CorruptBatchError(f"record batch at position {header.position} is truncated: "
                                f"{len(batch)} bytes of {header.size}", header.position)
    payload = batch[RECORDS_OFFSET:header.size]
    codec = header.compression
    if codec == "none":
        return bytes(payload)
    try:
        return decompress(codec, payload)
    except DecompressionError as e:
        raise CorruptBatchError(f"record batch at position {header.position}: {e}", header.position) from e



def section_for_compiled(batch: Buffer, header: BatchHeader) -> Buffer | None:
    """The records section the compiled renderers and counter take: a view in place when the batch is
    uncompressed, decompressed otherwise; None when the batch is the decoder's to read (truncated, or
    not decompressible: the decoder raises what is wrong with it)."""
    if header.compression == "none":
        if not RECORDS_OFFSET <= header.size <= len(batch):
            return None
        return batch[RECORDS_OFFSET:header.size]
    try:
        return records_payload(batch, header)
    except CorruptBatchError:
        return None

# The zigzag-decoded value of every 1- and 2-byte varint, indexed by its 14 payload bits: a table
# lookup is cheaper in CPython than the shifts and masks, and nearly every length, delta and count of
# a real record fits in 2 bytes.
_ZIGZAG = tuple((v >> 1) ^ -(v & 1) for v in range(1 << 14))


# The compiled twin of decode_records's loop below (kfs/_native/csrc/record/decode_records.c), when built; None: the
# loop runs.
_decode_v2_records = native.decode_v2_records


# Header keys repeat from record to record ("trace-id", "content-type"): decode each once.
_HEADER_KEYS: dict[bytes, str] = {}
_HEADER_KEYS_MAX = 4096
_HEADER_KEY_CACHED_MAX = 256  # bytes; longer keys are decoded every time


def _header_key(raw: bytes) -> str:
    """A header key as str. Java's String decoding replaces malformed UTF-8, so does kfs, rather than fail."""
    key = raw.decode("utf-8", "replace")
    if len(raw) <= _HEADER_KEY_CACHED_MAX:
        if len(_HEADER_KEYS) >= _HEADER_KEYS_MAX:
            _HEADER_KEYS.clear()
        _HEADER_KEYS[raw] = key
    return key


def decode_records(batch: Buffer, header: BatchHeader) -> list[Record]:
    """Every record of a v2 batch. The hot loop of kfs: 1- and 2-byte varints inline, no calls per field."""
    position = header.position
    count = header.record_count
    if count <= 0:
        if count < 0:
            raise CorruptBatchError(f"record batch at position {position} has a negative record count",
                                    position)
        if len(batch) < header.size:
            raise CorruptBatchError(f"record batch at position {position} is truncated", position)
        return []  # as DefaultRecordBatch.iterator(): an empty batch's payload is not even decompressed
    if count > MAX_BATCH_RECORDS:
        # Checked before decompressing: 183 KB of zstd can hold 286 M tiny records (~60 GB as objects).
        raise CorruptBatchError(f"record batch at position {position} holds {count} records, more than "
                                f"{MAX_BATCH_RECORDS}, kfs's limit for one batch", position)
    data = records_payload(batch, header)
    if _decode_v2_records is not None:
        try:
            return _decode_v2_records(data, count, header.base_offset, header.first_timestamp,
                                      header.timestamp_type, header.max_timestamp, position)
        except OverflowError:
            pass  # a header with fields beyond int64 (made by hand, not parsed): the loop below takes it
    end = len(data)
    base_offset = header.base_offset
    base_ts = header.first_timestamp
    ts_type = header.timestamp_type
    zz = _ZIGZAG
    key_names = _HEADER_KEYS
    varint = _varint
    new = object.__new__
    record_class = Record
    records: list[Record] = []
    append = records.append
    pos = 0
    previous_delta = -1
    try:
        for _ in range(count):
            # Length
            b = data[pos]
            if b < 0x80:
                length = zz[b]
                pos += 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    length = zz[(b & 0x7F) | (c << 7)]
                    pos += 2
                else:
                    length, pos = varint(data, pos)
            record_end = pos + length  # checked once the fields are read; the check after the loop
            # catches a last record whose fields and length both run past the end
            # Attributes (unused), then TimestampDelta
            b = data[pos + 1]
            if b < 0x80:
                ts_delta = zz[b]
                pos += 2
            else:
                c = data[pos + 2]
                if c < 0x80:
                    ts_delta = zz[(b & 0x7F) | (c << 7)]
                    pos += 3
                else:
                    ts_delta, pos = varint(data, pos + 1)
            # OffsetDelta
            b = data[pos]
            if b < 0x80:
                offset_delta = zz[b]
                pos += 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    offset_delta = zz[(b & 0x7F) | (c << 7)]
                    pos += 2
                else:
                    offset_delta, pos = varint(data, pos)
            if offset_delta <= previous_delta:  # Kafka assigns them in order; the cleaner keeps it
                raise ValueError(f"its offset delta {offset_delta} is not above the one before")
            previous_delta = offset_delta
            # Key
            b = data[pos]
            if b < 0x80:
                n = zz[b]
                pos += 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    n = zz[(b & 0x7F) | (c << 7)]
                    pos += 2
                else:
                    n, pos = varint(data, pos)
            if n >= 0:
                key = data[pos:pos + n]
                pos += n
            else:
                key = None
            # Value
            b = data[pos]
            if b < 0x80:
                n = zz[b]
                pos += 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    n = zz[(b & 0x7F) | (c << 7)]
                    pos += 2
                else:
                    n, pos = varint(data, pos)
            if n >= 0:
                value = data[pos:pos + n]
                pos += n
            else:
                value = None
            # Headers
            b = data[pos]
            pos += 1
            headers: list[tuple[str, bytes | None]] = []
            if b:
                if b < 0x80:
                    n_headers = zz[b]
                else:
                    n_headers, pos = varint(data, pos - 1)
                if n_headers < 0:
                    raise ValueError(f"negative header count {n_headers}")
                while n_headers:  # cheaper than a range() per record
                    n_headers -= 1
                    b = data[pos]
                    if b < 0x80:
                        n = zz[b]
                        pos += 1
                    else:
                        n, pos = varint(data, pos)
                    if n < 0:
                        raise ValueError(f"negative header key length {n}")
                    raw_key = data[pos:pos + n]
                    pos += n
                    h_key = key_names.get(raw_key)
                    if h_key is None:
                        h_key = _header_key(raw_key)
                    b = data[pos]
                    if b < 0x80:
                        n = zz[b]
                        pos += 1
                    else:
                        n, pos = varint(data, pos)
                    if n >= 0:
                        headers.append((h_key, data[pos:pos + n]))
                        pos += n
                    else:
                        headers.append((h_key, None))
            if pos != record_end:
                raise ValueError(f"record fields end at {pos}, its length says {record_end}")
            # Record's slots filled directly: object.__new__ skips the cost of calling Record.__init__.
            r = new(record_class)
            r.offset = base_offset + offset_delta
            r.timestamp = base_ts + ts_delta
            r.timestamp_type = ts_type
            r.key = key
            r.value = value
            r.headers = headers
            append(r)
    except (IndexError, ValueError) as e:
        raise CorruptBatchError(
            f"record batch at position {position}: record {len(records)} of {count} is malformed ({e})",
            position) from e
    if pos != end:
        raise CorruptBatchError(
            f"record batch at position {position}: {end - pos} bytes left after its {count} records",
            position)
    if ts_type == "LogAppendTime":
        # The broker's append time, in MaxTimestamp, is every record's timestamp (DefaultRecord.readFrom).
        # Set here rather than tested per record in the loop above.
        append_time = header.max_timestamp
        for r in records:
            r.timestamp = append_time
    return records
