"""The fuzz campaign's `cache` target: a size cache directory tampered with, and segments rewritten in place.

An input is a small partition (two versions of it whose segment files have the same sizes and
other lines), a size cache filled by counting it, then a random mix of what a hostile or careless
hand does: entries flipped, truncated, lengthened, swapped for one another, replaced by links (to
/dev/zero, to a file outside, to another entry), FIFOs or directories; foreign files put beside
them under entry names and others; an entry directory replaced by a link to a directory outside;
closed segments overwritten in place with the other version's bytes and their mtime restored.

The oracle: a view measured through that cache has the size and bytes of the same view counted
with no cache at all (never the old map), and a prune down to nothing removes none of the foreign
files, inside the cache or behind its links, and changes none of their bytes.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import struct
from pathlib import Path

from fuzz_targets import Failure

from kfs.storage import KfsError, LogDirs
from kfs.views.decoded import DecodedLog
from kfs.views.size_cache import SizeCache

PARTITION = "cached-0"
SEGMENTS = 3


def _v2_batch(base_offset: int, values: list[bytes]) -> bytes:
    """A v2 batch of records with `values` (kafka-python's builder: an encoder independent of kfs)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, value in enumerate(values):
        builder.append(i, timestamp=1_700_000_000_000 + base_offset + i, key=b"k", value=value, headers=[])
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, base_offset)
    return bytes(data)


def write_versions(root: Path, rnd: random.Random) -> tuple[Path, Path]:
    """Two log dirs holding PARTITION, segment files of equal sizes, values that render differently."""
    batches = rnd.randint(1, 30)
    records = rnd.randint(1, 8)
    width = rnd.randint(1, 300)
    dirs = []
    for name, byte in (("logdir", b"a"), ("other", b"\x01")):
        directory = root / name / PARTITION
        directory.mkdir(parents=True)
        offset = 0
        for _ in range(SEGMENTS):
            base = offset
            data = bytearray()
            for _ in range(batches):
                data += _v2_batch(offset, [byte * width] * records)
                offset += records
            (directory / f"{base:020d}.log").write_bytes(bytes(data))
            (directory / f"{base:020d}.index").write_bytes(b"")
            (directory / f"{base:020d}.timeindex").write_bytes(b"")
        dirs.append(root / name)
    return dirs[0], dirs[1]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _view_bytes(logdir: Path, cache: SizeCache) -> tuple[int, bytes]:
    plog = LogDirs([str(logdir)]).partition(PARTITION)
    view = DecodedLog(plog, cache=cache).view(None)
    size = view.size()
    data = view.cursor().read(0, size + 1)
    return size, data


def run_cache_input(rnd: random.Random, scratch: Path) -> None:
    """One input (see the module docstring); raises Failure on a wrong size or bytes, a foreign
    file removed or changed, or an error that is not kfs's own."""
    root = scratch / "cache-input"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    logdir, other = write_versions(root, rnd)
    cache_dir = root / "cache"
    cache = SizeCache(str(cache_dir))
    _view_bytes(logdir, cache)
    cache.flush(10)
    entries = sorted(p for p in cache_dir.glob("*/*") if p.is_file())
    outside = root / "outside"
    outside.mkdir()
    (outside / ("ab" * 20)).write_bytes(b"someone else's")
    foreign: list[Path] = [outside / ("ab" * 20)]
    segments = sorted((logdir / PARTITION).glob("*.log"))[:-1]  # closed ones
    for _ in range(rnd.randint(1, 6)):
        action = rnd.choice(["flip", "truncate", "append", "swap", "link-zero", "link-outside", "link-entry",
                             "fifo", "directory", "foreign-name", "foreign-entry-name", "link-shard", "rewrite"])
        entry = rnd.choice(entries) if entries else None
        if action == "rewrite":
            segment = rnd.choice(segments)
            st = segment.stat()
            with open(segment, "r+b") as f:
                f.write((other / PARTITION / segment.name).read_bytes())
            os.utime(segment, ns=(st.st_atime_ns, st.st_mtime_ns))
        elif action in ("foreign-name", "foreign-entry-name"):
            shard = cache_dir / f"{rnd.randrange(256):02x}"
            shard.mkdir(exist_ok=True)
            name = f"{rnd.getrandbits(160):040x}" if action == "foreign-entry-name" else f"notes-{rnd.randrange(99)}"
            path = shard / name
            if not path.exists():
                path.write_bytes(rnd.choice([b"", b"kfs", b"x" * rnd.randint(1, 5000)]))
                foreign.append(path)
        elif action == "link-shard":
            shard = cache_dir / f"{rnd.randrange(256):02x}"
            if not shard.exists():
                shard.symlink_to(outside)
        elif entry is None or not entry.is_file() or entry.is_symlink():
            continue
        elif action == "flip":
            data = bytearray(entry.read_bytes())
            for _ in range(rnd.randint(1, 4)):
                data[rnd.randrange(len(data))] ^= 1 << rnd.randrange(8)
            entry.write_bytes(bytes(data))
        elif action == "truncate":
            data = entry.read_bytes()
            entry.write_bytes(data[:rnd.randrange(len(data))])
        elif action == "append":
            with open(entry, "ab") as f:
                f.write(os.urandom(rnd.randint(1, 64)))
        elif action == "swap" and len(entries) > 1:
            other_entry = rnd.choice(entries)
            if other_entry.is_file() and not other_entry.is_symlink():
                entry.write_bytes(other_entry.read_bytes())
        else:
            entry.unlink()
            if action == "link-zero":
                entry.symlink_to("/dev/zero")
            elif action == "link-outside":
                entry.symlink_to(outside / ("ab" * 20))
            elif action == "link-entry":
                entry.symlink_to(rnd.choice(entries))
            elif action == "fifo":
                os.mkfifo(entry)
            elif action == "directory":
                entry.mkdir()
    digests = {path: _digest(path) for path in foreign}
    try:
        expected = _view_bytes(logdir, SizeCache(None))
        cached = SizeCache(str(cache_dir))
        got = _view_bytes(logdir, cached)
        cached.flush(10)
    except KfsError as e:
        raise Failure("exception", f"{type(e).__name__}: {e}") from None
    if got != expected:
        raise Failure("wrong-answer", f"through the cache: size {got[0]}, without it: {expected[0]} "
                                      f"(bytes {'equal' if got[1] == expected[1] else 'differ'})")
    cached.max_bytes = 0
    cached.prune()
    for path, digest in digests.items():
        if not path.exists() or path.is_symlink() or _digest(path) != digest:
            raise Failure("wrong-answer", f"the cache's prune removed or changed a file not its own: {path}")
