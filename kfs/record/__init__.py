"""The record layer: Kafka's on-disk batch formats, parsed from any buffer (bytes, memoryview, mmap).

Everything here is pure: no files, no I/O. The storage layer hands in bytes and positions.
`default_batch` is magic v2, `legacy` magic v0/v1, `compression` the codecs, `control` the markers.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

from kfs._native import record as native
from kfs.record import default_batch, legacy
from kfs.record.compression import (
    MAX_BATCH_BYTES,
    MAX_BATCH_RECORDS,
    BatchTooLargeError,
    DecompressionError,
    decompress,
)
from kfs.record.control import parse_control_record
from kfs.record.types import (
    COMPRESSION_NAMES,
    CONTROL_TYPES,
    NO_TIMESTAMP_TYPE,
    TIMESTAMP_TYPES,
    BatchHeader,
    Buffer,
    CorruptBatchError,
    PlainRun,
    Record,
)

__all__ = [
    "COMPRESSION_NAMES",
    "CONTROL_TYPES",
    "HEADER_PROBE_SIZE",
    "LOG_OVERHEAD",
    "MAGIC_OFFSET",
    "MAX_BATCH_BYTES",
    "MAX_BATCH_RECORDS",
    "NO_TIMESTAMP_TYPE",
    "TIMESTAMP_TYPES",
    "BatchHeader",
    "BatchTooLargeError",
    "CorruptBatchError",
    "DecompressionError",
    "PlainRun",
    "Record",
    "complete_legacy_header",
    "crc_is_valid",
    "decode_records",
    "decompress",
    "legacy_message_checks",
    "parse_batch_header",
    "parse_control_record",
    "peek_size",
]

LOG_OVERHEAD = 12  # offset int64 + length int32: every format starts with these (Records.LOG_OVERHEAD)
MAGIC_OFFSET = 16  # byte 16 is the magic in every format
HEADER_SIZE_UP_TO_MAGIC = MAGIC_OFFSET + 1
HEADER_PROBE_SIZE = default_batch.RECORD_BATCH_OVERHEAD  # 61: the longest header, v2's

# The smallest length field each magic allows (FileLogInputStream, DefaultRecordBatch.ensureValid).
_MIN_LENGTH = (
    legacy.RECORD_OVERHEAD_V0,
    legacy.RECORD_OVERHEAD_V1,
    default_batch.RECORD_BATCH_OVERHEAD - LOG_OVERHEAD,
)
_LENGTH = struct.Struct(">i")


def peek_size(buf: Buffer, at: int) -> tuple[int, int]:
    """(size on disk, magic) of the batch at buf[at], from its first 17 bytes, as FileLogInputStream reads."""
    if len(buf) - at < HEADER_SIZE_UP_TO_MAGIC:
        raise CorruptBatchError(f"batch header truncated: {len(buf) - at} bytes at {at}", at)
    (length,) = _LENGTH.unpack_from(buf, at + 8)
    magic = buf[at + MAGIC_OFFSET]
    if magic > 2:  # bytes-likes give 0..255; a negative int8 magic is > 2 here as well
        raise CorruptBatchError(f"unknown magic {magic} at {at}", at)
    if length < _MIN_LENGTH[magic]:
        raise CorruptBatchError(f"impossible batch length {length} for magic {magic} at {at}", at)
    return LOG_OVERHEAD + length, magic


def parse_batch_header(buf: Buffer, at: int, position: int) -> BatchHeader:
    """The header of the batch at buf[at]; needs min(HEADER_PROBE_SIZE, size) bytes, not the whole batch.

    `position` is the batch's position in its segment file, kept in the header and in every error.
    """
    try:
        magic = buf[at + MAGIC_OFFSET]
    except IndexError:
        raise CorruptBatchError(f"batch header truncated at position {position}", position) from None
    if magic == 2:
        return default_batch.parse_header(buf, at, position)  # both check the length as peek_size does
    return legacy.parse_header(buf, at, position)


def complete_legacy_header(header: BatchHeader, batch: Buffer) -> None:
    """For a legacy compressed wrapper, decompress `batch` to set base_offset and record_count."""
    if header.magic < 2:
        legacy.complete_header(header, batch)


def decode_records(batch: Buffer, header: BatchHeader) -> list[Record]:
    """All records of the batch (exactly header.size bytes) in offset order, as a consumer sees them."""
    if header.magic == 2:
        return default_batch.decode_records(batch, header)
    return legacy.decode_records(batch, header)


_package_crc32c: Callable[..., int] | None = None


def _crc32c(data: memoryview) -> int:
    """CRC-32C of `data`: the extension's (the CPU's instruction; tests/test_speedups.py holds it to the
    crc32c package's value) when it has one, else the crc32c package's, imported on first use: the
    package imports importlib.metadata, ~13 ms of a `kfs cat --count 1`."""
    compiled = native.crc32c
    if compiled is not None:
        crc = compiled(data)
        if crc is not None:
            return crc
    global _package_crc32c
    if _package_crc32c is None:
        from crc32c import crc32c
        _package_crc32c = crc32c
    return _package_crc32c(data)


def crc_is_valid(batch: Buffer, header: BatchHeader) -> bool:
    """v2: CRC-32C of bytes 21..end; legacy: CRC-32 of bytes 16..end; against the stored CRC."""
    size = header.size
    if len(batch) < size:
        return False
    mv = memoryview(batch)
    if header.magic == 2:
        return _crc32c(mv[default_batch.ATTRIBUTES_OFFSET:size]) == header.crc
    return zlib.crc32(mv[legacy.MAGIC_OFFSET:size]) == header.crc


def legacy_message_checks(batch: Buffer, header: BatchHeader) -> list[tuple[int, bool]]:
    """(stored CRC, CRC valid) of each record of a legacy message set, as
    `AbstractLegacyRecordBatch.checksum/isValid` give them (DumpLogSegments prints both).

    An uncompressed message is its own record. A compressed wrapper's inner messages have the
    message layout too, so they are read with the same header parser and CRC check from the
    decompressed message set. Raises CorruptBatchError when the wrapper cannot be opened.
    """
    if header.compression == "none":
        return [(header.crc, crc_is_valid(batch, header))]
    try:
        key_pos = legacy.KEY_SIZE_OFFSET_V0 if header.magic == 0 else legacy.KEY_SIZE_OFFSET_V1
        _key, value, _after = legacy.key_value(batch, key_pos, header.size)
        inner = decompress(header.compression, value or b"")
        checks = []
        at = 0
        while at < len(inner):
            size, _magic = peek_size(inner, at)
            inner_header = parse_batch_header(inner, at, at)
            checks.append((inner_header.crc, crc_is_valid(memoryview(inner)[at:at + size], inner_header)))
            at += size
        return checks
    except (DecompressionError, ValueError, struct.error) as e:
        raise CorruptBatchError(f"compressed message set: {e}") from None
