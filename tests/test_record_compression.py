"""Each codec reads every framing Kafka (and other producers) have written, and rejects garbage cleanly."""

from __future__ import annotations

import contextlib
import gzip
import os
import random
import struct

import cramjam
import lz4.frame
import pytest
import zstandard
from kafka.codec import snappy_encode

from kfs.record import DecompressionError, decompress

DATA = b"".join(b'{"n": %d, "event": "login", "pad": "%s"}' % (i, os.urandom(i % 40).hex().encode())
                for i in range(3000))  # ~200 KB: more than one lz4 block, more than one xerial block


def test_gzip_reads_one_member_and_concatenated_members() -> None:
    assert decompress("gzip", gzip.compress(DATA)) == DATA
    assert decompress("gzip", gzip.compress(DATA[:1000]) + gzip.compress(DATA[1000:])) == DATA


def test_snappy_reads_xerial_framing_with_many_blocks_and_plain_blocks() -> None:
    framed = snappy_encode(DATA, xerial_compatible=True, xerial_blocksize=32 * 1024)
    assert framed.startswith(b"\x82SNAPPY\x00")
    assert decompress("snappy", framed) == DATA
    assert decompress("snappy", bytes(cramjam.snappy.compress_raw(DATA))) == DATA


@pytest.mark.parametrize("linked", [False, True])
@pytest.mark.parametrize("checksums", [False, True])
def test_lz4_reads_frames_with_independent_or_linked_blocks(linked: bool, checksums: bool) -> None:
    frame = lz4.frame.compress(DATA, block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=linked,
                               content_checksum=checksums, block_checksum=checksums,
                               store_size=checksums)
    assert decompress("lz4", frame) == DATA


def test_lz4_does_not_check_the_header_checksum_kafka_v0_got_wrong() -> None:
    # KafkaLZ4BlockInputStream: magic v0 frames carry a header checksum computed over the magic too.
    frame = bytearray(lz4.frame.compress(DATA[:5000], store_size=False))
    frame[6] ^= 0xFF  # the HC byte after magic, FLG and BD
    assert decompress("lz4", bytes(frame)) == DATA[:5000]


def test_lz4_reads_stored_uncompressed_blocks() -> None:
    payload = os.urandom(1000)
    frame = (struct.pack("<I", 0x184D2204) + bytes([0x60, 0x40, 0x00])
             + struct.pack("<I", 0x80000000 | len(payload)) + payload + struct.pack("<I", 0))
    assert decompress("lz4", frame) == payload


def test_zstd_reads_frames_without_content_size_and_concatenated_frames() -> None:
    cobj = zstandard.ZstdCompressor().compressobj()  # streaming: no content size, like zstd-jni
    stream = cobj.compress(DATA) + cobj.flush()
    assert decompress("zstd", stream) == DATA
    two = zstandard.ZstdCompressor().compress(DATA[:100]) + zstandard.ZstdCompressor().compress(DATA[100:])
    assert decompress("zstd", two) == DATA


_SEEDED = random.Random(0x6B6673)  # (fixed bytes: the same test ids in every process, pytest-xdist's too)
JUNK = [b"", b"\x00", b"\xff" * 64, _SEEDED.randbytes(64), _SEEDED.randbytes(5000),
        b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x7f\xff\xff\xff",  # xerial block past the end
        struct.pack("<I", 0x184D2204) + b"\x60\x70\x00",  # lz4 frame without an end mark
        struct.pack("<I", 0x184D2204) + b"\x60\x40\x00" + struct.pack("<I", 5000) + b"\x00" * 10]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("junk", JUNK)
def test_garbage_decodes_or_is_a_decompression_error_never_anything_else(codec: str, junk: bytes) -> None:
    with contextlib.suppress(DecompressionError):
        decompress(codec, junk)


@pytest.mark.parametrize("codec", ["gzip", "lz4", "zstd"])
def test_data_without_the_codecs_magic_is_a_decompression_error(codec: str) -> None:
    for junk in (b"", b"\xff" * 64, b"hello world, not compressed"):
        with pytest.raises(DecompressionError):
            decompress(codec, junk)


def test_an_unknown_codec_is_a_decompression_error() -> None:
    with pytest.raises(DecompressionError):
        decompress("unknown(5)", b"abc")


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_truncated_streams_are_a_decompression_error(codec: str) -> None:
    packed = {"gzip": gzip.compress, "snappy": lambda d: snappy_encode(d, True, 32 * 1024),
              "lz4": lz4.frame.compress, "zstd": zstandard.ZstdCompressor().compress}[codec](DATA)
    for cut in (1, 7, 17, len(packed) // 2, len(packed) - 1):
        try:
            out = decompress(codec, packed[:cut])
        except DecompressionError:
            continue
        assert out != DATA  # a cut at a block boundary may decode a prefix: never the whole


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_threads_decompressing_at_once_each_get_their_own_bytes(codec: str) -> None:
    """The daemon decodes on many FUSE threads at once. One zstd decompression context shared by
    all of them (zstandard's objects are not thread-safe) gave 'Unknown frame descriptor' errors and,
    under the live-writer soak, killed the daemon with a segfault in zstandard's C backend."""
    import threading

    payloads = [os.urandom(150_000) + bytes(i) for i in range(4)]  # incompressible: many zstd steps
    compress = {"gzip": gzip.compress, "zstd": zstandard.ZstdCompressor().compress,
                "lz4": lambda d: lz4.frame.compress(d, block_size=lz4.frame.BLOCKSIZE_MAX64KB),
                "snappy": lambda d: snappy_encode(d, xerial_compatible=True, xerial_blocksize=32 * 1024)}[codec]
    frames = [compress(p) for p in payloads]
    failures: list[str] = []

    def work(i: int) -> None:
        for _ in range(60):
            try:
                if decompress(codec, frames[i % 4]) != payloads[i % 4]:
                    failures.append("wrong bytes")
            except DecompressionError as e:
                failures.append(str(e))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
