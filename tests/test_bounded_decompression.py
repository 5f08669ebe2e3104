"""Decompression bombs: valid batches (right CRC) whose payload expands to gigabytes are refused at
kfs's limit for one batch (kfs.record.MAX_BATCH_BYTES, MAX_BATCH_RECORDS) with one sentence, under a
memory limit, by `kfs cat` and by a mounted daemon, which survives and keeps serving the rest.
"""

from __future__ import annotations

import errno
import os
import resource
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import crc32c
import lz4.block
import pytest
import zstandard
from mounts import needs_fuse

from kfs.record import MAX_BATCH_BYTES, MAX_BATCH_RECORDS, CorruptBatchError, decode_records, parse_batch_header

REPO = Path(__file__).resolve().parent.parent
MEMORY_LIMIT = 512 << 20  # RLIMIT_AS for the processes under test: kfs cat needs ~35 MB of address space
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def varint(v: int) -> bytes:
    u = (v << 1) if v >= 0 else ((-v) << 1) - 1
    out = bytearray()
    while True:
        out.append((u & 0x7F) | (0x80 if u > 0x7F else 0))
        u >>= 7
        if not u:
            return bytes(out)


def record(offset_delta: int, value: bytes) -> bytes:
    body = b"\x00" + varint(0) + varint(offset_delta) + varint(-1) + varint(len(value)) + value + varint(0)
    return varint(len(body)) + body


def batch(base_offset: int, codec: str, payload: bytes, count: int, timestamp: int = 1_700_000_000_000) -> bytes:
    """A v2 batch around an already compressed records section, with a right CRC."""
    body = struct.pack(">hiqqqhii", CODEC_IDS[codec], count - 1, timestamp, timestamp, -1, -1, -1, count) + payload
    crc = crc32c.crc32c(body)
    return struct.pack(">qiibI", base_offset, 4 + 1 + 4 + len(body), 0, 2, crc) + body


def snappy_bomb(base: int) -> bytes:
    """66 bytes: a raw snappy block whose preamble claims 4 GiB (cramjam would allocate it up front)."""
    return batch(base, "snappy", b"\xff\xff\xff\xff\x0f" + b"\x00", 1)


def gzip_bomb(base: int) -> bytes:
    """One record with a 2 GB value, as gzip members: ~2 MB on disk."""
    size = 2 << 30
    head = b"\x00" + varint(0) + varint(0) + varint(-1) + varint(size)
    prefix = varint(len(head) + size + 1) + head
    zeros = zlib.compressobj(9, zlib.DEFLATED, 31)
    member = zeros.compress(bytes(64 << 20)) + zeros.flush()
    tail = zlib.compressobj(9, zlib.DEFLATED, 31)
    end = tail.compress(varint(0)) + tail.flush()
    start = zlib.compressobj(9, zlib.DEFLATED, 31)
    return batch(base, "gzip", start.compress(prefix) + start.flush() + member * (size // (64 << 20)) + end, 1)


def zstd_bomb(base: int) -> bytes:
    """286 M tiny records in 286 zstd frames of 1 M records each (a few hundred KB on disk)."""
    one = record(0, b"")
    frame = zstandard.ZstdCompressor(level=19, write_content_size=False).compress(one * 1_000_000)
    return batch(base, "zstd", frame * 286, 286_000_000)


def lz4_bomb(base: int) -> bytes:
    """An lz4 frame of 4 MiB blocks of zeros, 1 GiB in all."""
    block = lz4.block.compress(bytes(4 << 20), store_size=False)
    frame = struct.pack("<I", 0x184D2204) + bytes([0x60, 0x70, 0]) + b"".join(
        struct.pack("<I", len(block)) + block for _ in range(256)) + bytes(4)
    return batch(base, "lz4", frame, 1)


BOMBS = {"snappy": snappy_bomb, "gzip": gzip_bomb, "zstd": zstd_bomb, "lz4": lz4_bomb}
STARTS: list[tuple[int, int]] = []  # (bomb base offset, base offset of the good batch after it), in the log


def good(base: int, n: int = 3) -> bytes:
    return batch(base, "none", b"".join(record(i, b"value-%d" % (base + i)) for i in range(n)), n)


@pytest.mark.parametrize("codec", sorted(BOMBS))
def test_a_bomb_is_refused_with_the_limit_named(codec: str) -> None:
    data = BOMBS[codec](0)
    header = parse_batch_header(data, 0, 4096)
    with pytest.raises(CorruptBatchError, match="kfs's limit for one batch"):
        decode_records(data, header)


def test_the_limits_are_what_the_readme_says() -> None:
    readme = (REPO / "README.md").read_text()
    assert f"{MAX_BATCH_BYTES >> 20} MiB" in readme
    assert f"{MAX_BATCH_RECORDS:,}" in readme


def write_logdir(root: Path) -> Path:
    """bombs-0: three good records, then each bomb, each followed by good records; clean-0: good only."""
    logdir = root / "logdir"
    (logdir / "bombs-0").mkdir(parents=True)
    (logdir / "clean-0").mkdir()
    data = good(0)
    base = 3
    for codec in sorted(BOMBS):
        bomb = BOMBS[codec](base)
        after = base + parse_batch_header(bomb, 0, 0).record_count
        data += bomb + good(after)
        STARTS.append((base, after))
        base = after + 3
    (logdir / "bombs-0" / f"{0:020d}.log").write_bytes(data)
    (logdir / "clean-0" / f"{0:020d}.log").write_bytes(good(0, 5))
    return logdir


def limited(limit: int):  # type: ignore[no-untyped-def]
    def set_limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return set_limit


@pytest.fixture(scope="module")
def bomb_logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_logdir(tmp_path_factory.mktemp("bombs"))


def test_kfs_cat_stops_at_each_bomb_with_one_sentence_under_a_memory_limit(bomb_logdir: Path) -> None:
    for start, expected_lines in [(0, 3)] + [(after - 1, 0) for _, after in STARTS]:
        done = subprocess.run([sys.executable, "-m", "kfs.cli.main", "cat", str(bomb_logdir), "bombs-0",
                               "--offset", str(start)], capture_output=True, timeout=120,
                              preexec_fn=limited(MEMORY_LIMIT))
        err = done.stderr.decode()
        assert done.returncode == 1, err
        assert "Traceback" not in err and "MemoryError" not in err, err
        assert len(err.strip().splitlines()) == 1 and "kfs's limit for one batch" in err, err
        assert len(done.stdout.splitlines()) == expected_lines, (start, done.stdout[:300])


@needs_fuse
def test_the_daemon_refuses_a_bomb_with_eio_and_keeps_serving(bomb_logdir: Path, tmp_path: Path) -> None:
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    log = tmp_path / "daemon.log"
    # Mounted from a process with the memory limit: the daemon it starts inherits it.
    subprocess.run([sys.executable, "-c", "import sys; from kfs.fuse.mount import mount; "
                    "mount([sys.argv[1]], sys.argv[2], {'log': sys.argv[3]})", str(bomb_logdir), str(mountpoint),
                    str(log)], check=True, timeout=60, preexec_fn=limited(MEMORY_LIMIT + (256 << 20)))
    try:
        pid = int(subprocess.run(["pgrep", "-f", f"serve.*{mountpoint}"], capture_output=True, text=True)
                  .stdout.split()[0])
        for _ in range(2):  # twice: the first error is not cached into success
            with pytest.raises(OSError) as e:
                (mountpoint / "bombs-0" / "messages.jsonl").read_bytes()
            assert e.value.errno == errno.EIO
        for offset in [o for start in STARTS for o in start]:  # at a bomb, and at the records after it
            # As messages.jsonl: the view opens (its size covers the bomb's unreadable byte), its read EIO
            view = mountpoint / "bombs-0" / "offset" / f"{offset}.jsonl"
            assert view.stat().st_size >= 1
            fd = os.open(view, os.O_RDONLY)
            try:
                with pytest.raises(OSError) as e:
                    os.read(fd, 65536)
                assert e.value.errno == errno.EIO
            finally:
                os.close(fd)
        assert (mountpoint / "clean-0" / "messages.jsonl").read_bytes().count(b"\n") == 5
        after = STARTS[0][1]
        assert (mountpoint / "bombs-0" / "offset" / f"{after}.value").read_bytes() == b"value-%d" % after
        assert (mountpoint / "bombs-0" / "offset" / f"{after + 2}.value").read_bytes() == b"value-%d" % (after + 2)
        status = Path(f"/proc/{pid}/status").read_text()
        peak_kb = int(status.split("VmHWM:")[1].split()[0])
        # The bombs never grew the daemon past the limit: the kernel may send two reads at once, each
        # decompressing up to one batch's limit (with its copy); an unbounded bomb is gigabytes.
        assert peak_kb < (MAX_BATCH_BYTES >> 10) * 6, status
    finally:
        subprocess.run(["fusermount3", "-u", str(mountpoint)], check=False)
    assert "kfs's limit for one batch" in log.read_text()
    assert "Traceback" not in log.read_text() and "MemoryError" not in log.read_text()
