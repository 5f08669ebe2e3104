"""Decompression of a batch's records payload, one codec per attribute value (CompressionType.java).

Each codec is decoded the way Kafka's `*Factory.wrapForInput` reads it:

gzip:   one or more gzip members (GZIPInputStream).
snappy: xerial framing (SnappyInputStream), or a plain unframed snappy block:
          magic "\\x82SNAPPY\\x00" (8) | version int32 | compat int32 | { length int32 | raw snappy block }*
lz4:    the LZ4 frame format (KafkaLZ4BlockInputStream):
          magic 0x184D2204 LE (4) | FLG (1) | BD (1) | [content size u64 LE] | [dict id u32 LE] | HC (1)
          { block size u32 LE (high bit: stored uncompressed; 0: end mark) | data | [checksum u32] }*
          [content checksum u32]
        Kafka wrote the header checksum of magic v0 frames over the magic bytes too, so HC is never checked;
        the batch CRC already covers these bytes.
zstd:   one or more zstd frames, without a content size in the frame header (zstd-jni streams).
"""

from __future__ import annotations

import struct
import zlib

import cramjam
import lz4.block
import zstandard

from kfs.record.types import COMPRESSION_NAMES

# --- snappy (xerial) ---
SNAPPY_XERIAL_MAGIC = b"\x82SNAPPY\x00"
SNAPPY_XERIAL_HEADER_SIZE = 16  # magic (8) + version int32 + compatible-version int32
_INT32 = struct.Struct(">i")

# --- lz4 frame ---
LZ4_FRAME_MAGIC = 0x184D2204
LZ4_FLG_VERSION_MASK = 0xC0
LZ4_FLG_VERSION = 0x40
LZ4_FLG_BLOCK_INDEPENDENT = 0x20
LZ4_FLG_BLOCK_CHECKSUM = 0x10
LZ4_FLG_CONTENT_SIZE = 0x08
LZ4_FLG_CONTENT_CHECKSUM = 0x04
LZ4_FLG_DICT_ID = 0x01
LZ4_BD_BLOCK_SIZE_SHIFT = 4
LZ4_BLOCK_UNCOMPRESSED_FLAG = 0x80000000
LZ4_LINKED_WINDOW = 64 * 1024  # linked blocks may refer to the previous 64 KiB of output
_LZ4_BLOCK_MAX_SIZES = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}
_U32LE = struct.Struct("<I")


class DecompressionError(ValueError):
    """The payload is not valid data for its codec; the record layer turns it into a CorruptBatchError."""


def _gzip(data) -> bytes:
    parts = []
    rest = data
    while True:
        d = zlib.decompressobj(31)
        parts.append(d.decompress(rest))
        if not d.eof:
            raise DecompressionError("gzip stream ends early")
        rest = d.unused_data
        if not rest:
            break
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _snappy(data) -> bytes:
    raw = cramjam.snappy.decompress_raw
    mv = memoryview(data)
    if bytes(mv[:8]) != SNAPPY_XERIAL_MAGIC:
        return bytes(raw(mv))
    parts = []
    pos = SNAPPY_XERIAL_HEADER_SIZE
    end = len(mv)
    if pos > end:
        raise DecompressionError("snappy: truncated xerial header")
    while pos < end:
        if pos + 4 > end:
            raise DecompressionError("snappy: truncated block length")
        (n,) = _INT32.unpack_from(mv, pos)
        pos += 4
        if n < 0 or pos + n > end:
            raise DecompressionError(f"snappy: block length {n} runs past the end")
        parts.append(bytes(raw(mv[pos:pos + n])))
        pos += n
    return b"".join(parts)


def _lz4(data) -> bytes:
    mv = memoryview(data)
    end = len(mv)
    if end < 7 or _U32LE.unpack_from(mv, 0)[0] != LZ4_FRAME_MAGIC:
        raise DecompressionError("lz4: not an lz4 frame")
    flg = mv[4]
    bd = mv[5]
    if flg & LZ4_FLG_VERSION_MASK != LZ4_FLG_VERSION:
        raise DecompressionError(f"lz4: unsupported frame version (FLG {flg:#x})")
    max_block = _LZ4_BLOCK_MAX_SIZES.get((bd >> LZ4_BD_BLOCK_SIZE_SHIFT) & 7)
    if max_block is None:
        raise DecompressionError(f"lz4: unsupported block size (BD {bd:#x})")
    pos = 6
    if flg & LZ4_FLG_CONTENT_SIZE:
        pos += 8
    if flg & LZ4_FLG_DICT_ID:
        pos += 4
    pos += 1  # header checksum: not verified (Kafka's magic v0 quirk)
    block_checksum = 4 if flg & LZ4_FLG_BLOCK_CHECKSUM else 0
    linked = not flg & LZ4_FLG_BLOCK_INDEPENDENT
    decompress = lz4.block.decompress
    parts: list[bytes] = []
    window = b""
    while True:
        if pos + 4 > end:
            raise DecompressionError("lz4: frame ends without an end mark")
        (n,) = _U32LE.unpack_from(mv, pos)
        pos += 4
        if n == 0:
            break
        stored = n & LZ4_BLOCK_UNCOMPRESSED_FLAG
        n &= ~LZ4_BLOCK_UNCOMPRESSED_FLAG
        if pos + n + block_checksum > end:
            raise DecompressionError(f"lz4: block of {n} bytes runs past the end")
        block = mv[pos:pos + n]
        if stored:
            out = bytes(block)
        elif linked and window:
            out = decompress(block, uncompressed_size=max_block, dict=window)
        else:
            out = decompress(block, uncompressed_size=max_block)
        parts.append(out)
        if linked:
            window = (window + out)[-LZ4_LINKED_WINDOW:]
        pos += n + block_checksum
    return parts[0] if len(parts) == 1 else b"".join(parts)


_ZSTD = zstandard.ZstdDecompressor()


def _zstd(data) -> bytes:
    parts = []
    rest = data
    while True:
        d = _ZSTD.decompressobj()
        parts.append(d.decompress(rest))
        if not d.eof:
            raise DecompressionError("zstd stream ends early")
        rest = d.unused_data
        if not rest:
            break
    return parts[0] if len(parts) == 1 else b"".join(parts)


_CODECS = {"gzip": _gzip, "snappy": _snappy, "lz4": _lz4, "zstd": _zstd}


def decompress(codec: str, data) -> bytes:
    """The decompressed bytes of `data` (bytes-like) for a codec name of COMPRESSION_NAMES.

    Raises DecompressionError for anything the codec rejects, whatever exception its library uses.
    """
    fn = _CODECS.get(codec)
    if fn is None:
        if codec == "none":
            return bytes(data)
        raise DecompressionError(f"unknown compression codec {codec!r}")
    try:
        return fn(data)
    except DecompressionError:
        raise
    except Exception as e:  # zlib.error, LZ4BlockError, ZstdError, cramjam's errors...
        raise DecompressionError(f"{codec}: {e}") from e


def codec_name(codec_id: int) -> str:
    """The codec name for attribute bits 0-2; ids Kafka does not define are named `unknown(n)`."""
    return COMPRESSION_NAMES[codec_id] if codec_id < len(COMPRESSION_NAMES) else f"unknown({codec_id})"
