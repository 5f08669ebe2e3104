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

Bounded: a batch is hostile input, and 66 bytes of snappy can claim 4 GiB, 183 KB of zstd can hold
286 M records. Like a Kafka consumer bounds what one fetch may cost, kfs decompresses at most
`MAX_BATCH_BYTES` from one batch: every codec stops as soon as its output passes the limit (gzip and
zstd are read in steps whose output is capped, lz4 a block of at most 4 MiB at a time, snappy's
claimed length is checked before cramjam allocates it) and the batch is refused with
`BatchTooLargeError`, a `DecompressionError`. Memory per decoded batch stays near the limit.
"""

from __future__ import annotations

import struct
import threading
import zlib
from types import ModuleType
from typing import TYPE_CHECKING

from kfs.record.types import COMPRESSION_NAMES, Buffer

if TYPE_CHECKING:
    import zstandard


def _codec_library(name: str) -> ModuleType:
    """The codec's library, imported on first use: lz4, zstandard and cramjam cost ~15 ms of every
    command's start-up, and a log of uncompressed or lz4 batches (the compiled walker decompresses
    Kafka's lz4 itself, kfs.views.plain_runs) may never need them."""
    import importlib
    return importlib.import_module(name)

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


# The most bytes kfs takes from one batch: its records section once decompressed, and its size on disk.
# Kafka's own limits are lower by default (message.max.bytes and max.partition.fetch.bytes, 1 MiB).
MAX_BATCH_BYTES = 64 << 20
# The most records kfs decodes from one batch: ~200 bytes of Python objects each, so about 200 MB.
MAX_BATCH_RECORDS = 1 << 20
# The most output one byte of zstd input can give (an RLE block: 3 + 1 bytes for 128 KiB, 2^15), rounded up:
# how much input a bounded step may feed. A step is at least _ZSTD_MIN_STEP bytes (<= 4 MiB of output).
_ZSTD_MAX_RATIO = 1 << 15
_ZSTD_MIN_STEP = 64


class DecompressionError(ValueError):
    """The payload is not valid data for its codec; the record layer turns it into a CorruptBatchError."""


class BatchTooLargeError(DecompressionError):
    """The payload expands past the limit: refused before the memory is taken."""

    def __init__(self, codec: str, limit: int) -> None:
        super().__init__(f"its {codec} records expand past {limit >> 20} MiB, kfs's limit for one batch")
        self.limit = limit


def _gzip(data: Buffer, limit: int) -> bytes:
    parts = []
    total = 0
    rest = data
    while True:
        d = zlib.decompressobj(31)
        out = d.decompress(rest, limit - total + 1)  # one byte past the limit tells it was passed
        total += len(out)
        if total > limit:
            raise BatchTooLargeError("gzip", limit)
        parts.append(out)
        if not d.eof:
            raise DecompressionError("gzip stream ends early")
        rest = d.unused_data
        if not rest:
            break
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _snappy_claimed_length(block: Buffer) -> int:
    """The uncompressed length a raw snappy block starts with (a varint of up to 32 bits): cramjam
    allocates that much before it reads anything, so it is checked first."""
    result = shift = 0
    for i in range(min(5, len(block))):
        b = block[i]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result
        shift += 7
    raise DecompressionError("snappy: bad block length")


def _snappy_block(block: Buffer, budget: int) -> bytes:
    if _snappy_claimed_length(block) > budget:
        raise BatchTooLargeError("snappy", budget)
    return bytes(_codec_library("cramjam").snappy.decompress_raw(block))


def _snappy(data: Buffer, limit: int) -> bytes:
    mv = memoryview(data)
    if bytes(mv[:8]) != SNAPPY_XERIAL_MAGIC:
        return _snappy_block(mv, limit)
    parts = []
    total = 0
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
        if _snappy_claimed_length(mv[pos:pos + n]) > limit - total:
            raise BatchTooLargeError("snappy", limit)
        out = bytes(_codec_library("cramjam").snappy.decompress_raw(mv[pos:pos + n]))
        total += len(out)
        parts.append(out)
        pos += n
    return b"".join(parts)


def _lz4(data: Buffer, limit: int) -> bytes:
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
    decompress = _codec_library("lz4.block").decompress
    parts: list[bytes] = []
    total = 0
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
        total += len(out)
        if total > limit:
            raise BatchTooLargeError("lz4", limit)
        parts.append(out)
        if linked:
            window = (window + out)[-LZ4_LINKED_WINDOW:]
        pos += n + block_checksum
    return parts[0] if len(parts) == 1 else b"".join(parts)


# One decompressor per thread: a ZstdDecompressor's context is shared by its decompressobj()s and is
# not thread-safe, and the daemon decodes on many FUSE threads at once (sharing one gave wrong frames
# and a segfault in zstandard's C backend under the live-writer soak, tests/soak).
_ZSTD = threading.local()


def _zstd_decompressor() -> zstandard.ZstdDecompressor:
    decompressor = getattr(_ZSTD, "decompressor", None)
    if decompressor is None:
        decompressor = _ZSTD.decompressor = _codec_library("zstandard").ZstdDecompressor()
    return decompressor


def _zstd(data: Buffer, limit: int) -> bytes:
    """Frame after frame, fed in steps small enough that one step cannot expand far past the limit:
    zstandard's decompressobj has no output cap of its own."""
    parts = []
    total = 0
    rest = bytes(data)
    while True:
        d = _zstd_decompressor().decompressobj()
        pos = 0
        while not d.eof:
            if pos >= len(rest):
                raise DecompressionError("zstd stream ends early")
            step = max(_ZSTD_MIN_STEP, (limit - total) // _ZSTD_MAX_RATIO)
            out = d.decompress(rest[pos:pos + step])
            pos += step
            total += len(out)
            if total > limit:
                raise BatchTooLargeError("zstd", limit)
            if out:
                parts.append(out)
        rest = d.unused_data + rest[pos:]
        if not rest:
            break
    return parts[0] if len(parts) == 1 else b"".join(parts)


_CODECS = {"gzip": _gzip, "snappy": _snappy, "lz4": _lz4, "zstd": _zstd}


def decompress(codec: str, data: Buffer, limit: int = MAX_BATCH_BYTES) -> bytes:
    """The decompressed bytes of `data` (bytes-like) for a codec name of COMPRESSION_NAMES.

    Raises BatchTooLargeError past `limit` bytes of output, DecompressionError for anything the codec
    rejects, whatever exception its library uses.
    """
    fn = _CODECS.get(codec)
    if fn is None:
        if codec == "none":
            return bytes(data)
        raise DecompressionError(f"unknown compression codec {codec!r}")
    try:
        return fn(data, limit)
    except (DecompressionError, ImportError):  # (a codec library missing is not a corrupt batch)
        raise
    except Exception as e:  # zlib.error, LZ4BlockError, ZstdError, cramjam's errors...
        raise DecompressionError(f"{codec}: {e}") from e


def codec_name(codec_id: int) -> str:
    """The codec name for attribute bits 0-2; ids Kafka does not define are named `unknown(n)`."""
    return COMPRESSION_NAMES[codec_id] if codec_id < len(COMPRESSION_NAMES) else f"unknown({codec_id})"
