"""Decoded sizes and seek maps of closed segments, kept between mounts (ratarmount's index cache).

A closed segment never changes, so the length of its JSON lines and its seek map are facts about
the file: computed once, they are stored under `$XDG_CACHE_HOME/kfs/sizes` (`~/.cache/kfs/sizes`),
never in the log dir. An entry is keyed by the segment file's identity (device, inode, size, mtime,
ctime: an in-place rewrite can restore size and mtime, never ctime) and by everything else that
shapes the bytes: topic and partition (in every line), the offsets the run covers, isolation and
control, the aborted transactions read_committed hides, and a fingerprint of the installed kfs
(another version may render differently, so it starts afresh). The key is stored in the entry and
compared on load: an entry that does not match or does not parse is ignored and computed again.
Each seek-map entry also carries a probe of the file's bytes where its batch starts, checked when a
reader starts there (kfs.views.cursor): a file changed under the same identity is never served by
the old map. Writes are atomic (a temporary file renamed into place). The store is bounded
(`MAX_BYTES`): past it, the entries least recently used (their mtime, renewed on each use) are
removed.

The store runs as root on broker hosts, so it owns nothing that is not its own: its directory is
one kfs created (marked by a CACHEDIR.TAG naming kfs) or an empty one it then marks; it is never a
log dir, inside one, or holding one; every name it reads or unlinks is one of its own entry names,
opened without following symlinks and read only when it is a regular file of bounded size that
starts with the entry header.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import re
import stat
import sys
import threading
import zlib
from array import array
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from kfs.storage import KfsError

log = logging.getLogger("kfs")

MAGIC = b"kfs-decoded-map 2\n"
ENTRY_PREFIX = b"kfs-decoded-map "  # every version's entries start so: what prune may remove
MAX_BYTES = 1 << 30  # the store's bound: ~1000 maps of 1 GiB segments, or far more smaller ones
MAX_ENTRY_BYTES = 64 << 20  # no map is this large (24 bytes per 32 KiB of lines): a larger file is not ours
PRUNE_TO = 0.9  # a save that finds the store past its bound prunes it to this share of it
MAX_QUEUED_BYTES = 64 << 20  # entries waiting for the writer thread; past it a save writes its own
PROBE_BYTES = 21  # a v2 batch header up to its CRC: base offset, length, epoch, magic, CRC
TAG_NAME = "CACHEDIR.TAG"
TAG = (b"Signature: 8a477f597d28d172789f06886806bc55\n"
       b"# kfs size cache: decoded sizes and seek maps of Kafka segments (kfs.views.size_cache).\n"
       b"# kfs reads and removes only its own entries here. See https://bford.info/cachedir/\n")
SHARD_NAME = re.compile(r"[0-9a-f]{2}\Z")
ENTRY_NAME = re.compile(r"[0-9a-f]{40}\Z")
TEMP_NAME = re.compile(r"\.tmp-\d+-[0-9a-f]{8}-\d+\Z")
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_fingerprint: str | None = None


class CacheDirectoryError(KfsError):
    """A size cache directory kfs may not use; the message is one sentence."""


def default_directory() -> str:
    """`$XDG_CACHE_HOME/kfs/sizes`, or `~/.cache/kfs/sizes` (the XDG base directory rule)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "kfs", "sizes")


def code_fingerprint() -> str:
    """A digest of the installed kfs files (names, sizes, mtimes): any change of the code that
    renders lines, including an edit of an editable install, gives new keys."""
    global _fingerprint
    if _fingerprint is None:
        import kfs

        root = Path(kfs.__file__).parent
        digest = hashlib.sha256(kfs.__version__.encode())
        for path in sorted(root.rglob("*")):
            if path.suffix in (".py", ".so", ".c", ".pyd"):
                st = path.stat()
                digest.update(f"{path.relative_to(root)}:{st.st_size}:{st.st_mtime_ns};".encode())
        _fingerprint = digest.hexdigest()[:16]
    return _fingerprint


def probe_value(data: bytes) -> int:
    """What a probe keeps of the bytes at its position (a batch header through its CRC, whose CRC
    covers the rest of the batch): a checksum of them, never the bytes themselves."""
    return zlib.crc32(data[:PROBE_BYTES]) | (len(data[:PROBE_BYTES]) << 32)


@dataclass
class SavedMap:
    """A segment run as stored: its length, how far it is mapped, its seek map and its damage.
    `probes`: per seek-map entry, the file position of a batch start near it (-1: none) and
    `probe_value` of the bytes there when mapped."""

    length: int
    mapped_to: int
    positions: array
    offsets: array
    error: str | None = None
    probe_positions: array = field(default_factory=lambda: array("q"))
    probe_values: array = field(default_factory=lambda: array("q"))
    damaged_at: int = -1  # with `error`: the offset below which every record was counted


def _inside(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _is_ours(root_fd: int) -> bool:
    """The directory holds kfs's CACHEDIR.TAG (a regular file, not a link)."""
    try:
        fd = os.open(TAG_NAME, READ_FLAGS, dir_fd=root_fd)
    except OSError:
        return False
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode) and os.read(fd, len(TAG)) == TAG
    finally:
        os.close(fd)


def claim_directory(directory: str, logdirs: Sequence[str] = ()) -> str:
    """The cache directory to use, made or checked: created `0700` and tagged when missing, used
    when kfs's tag is in it or it is empty (then tagged); refused with CacheDirectoryError (one
    sentence) when it is, holds or lies inside a log dir, or holds files kfs did not make. OSError
    (an unwritable disk) is left to the caller, which goes on without a cache."""
    real = os.path.realpath(os.path.abspath(directory))
    for logdir in logdirs:
        real_logdir = os.path.realpath(os.path.abspath(logdir))
        if _inside(real, real_logdir) or _inside(real_logdir, real):
            raise CacheDirectoryError(
                f"the size cache directory {directory} is, holds or lies inside the log dir {logdir}: kfs never "
                "writes into a log dir (give -o size_cache=ANOTHER_DIRECTORY, or size_cache=none).")
    if not os.path.lexists(real):
        os.makedirs(os.path.dirname(real), exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.mkdir(real, 0o700)
    try:
        root_fd = os.open(real, DIR_FLAGS)
    except OSError as e:
        if e.errno in (errno.ENOTDIR, errno.ELOOP):
            raise CacheDirectoryError(f"the size cache directory {directory} is not a directory.") from None
        raise
    try:
        if _is_ours(root_fd):
            return real
        if os.listdir(root_fd):
            raise CacheDirectoryError(
                f"the size cache directory {directory} holds files kfs did not make (it has no kfs {TAG_NAME}): "
                "kfs keeps its cache only in a directory of its own, since it deletes old entries there "
                "(give a new or empty directory, or size_cache=none).")
        fd = os.open(TAG_NAME, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                     dir_fd=root_fd)
        try:
            os.write(fd, TAG)
        finally:
            os.close(fd)
        return real
    finally:
        os.close(root_fd)


class SizeCache:
    """The store. `directory=None` turns it off (every mount computes afresh). `logdirs`: the log
    dirs being read, which the directory must stay clear of (claim_directory)."""

    def __init__(self, directory: str | None, max_bytes: int = MAX_BYTES, logdirs: Sequence[str] = ()) -> None:
        self.max_bytes = max_bytes
        self._warned = False
        self.hits = self.misses = self.stores = 0  # for the daemon log (and the tests)
        self._stored: int | None = None  # the store's bytes as last counted, plus what was saved since
        self._token = f"{os.getpid()}-{os.urandom(4).hex()}"  # this store's temporary names: no other writer's
        # Entries waiting for the writer thread, and their bytes (see save)
        self._queue: deque[tuple[str, bytes]] = deque()
        self._queued_bytes = 0
        self._changed = threading.Condition()
        self._writer: threading.Thread | None = None
        self.directory: str | None = None
        if directory:
            try:
                self.directory = claim_directory(directory, logdirs)
            except OSError as e:
                log.warning("cannot keep decoded sizes in %s (%s); every mount will compute them",
                            directory, e.strerror or e)
                self._warned = True

    def _name(self, key: dict[str, Any]) -> tuple[str, str, bytes]:
        encoded = json.dumps(key, sort_keys=True, separators=(",", ":")).encode()
        name = hashlib.sha256(encoded).hexdigest()[:40]
        return name[:2], name, encoded

    def _path(self, key: dict[str, Any]) -> tuple[str, bytes]:
        """Where `key`'s entry is (for the tests and the log), and the key as stored."""
        assert self.directory is not None
        shard, name, encoded = self._name(key)
        return os.path.join(self.directory, shard, name), encoded

    @contextlib.contextmanager
    def _shard(self, shard: str, create: bool = False) -> Iterator[int | None]:
        """A descriptor of one of the store's own subdirectories (None when missing), opened
        without following a symlink: a link put in its place leads nowhere."""
        assert self.directory is not None
        root = os.open(self.directory, DIR_FLAGS)
        try:
            try:
                fd = os.open(shard, DIR_FLAGS, dir_fd=root)
            except FileNotFoundError:
                if not create:
                    yield None
                    return
                with contextlib.suppress(FileExistsError):
                    os.mkdir(shard, 0o700, dir_fd=root)
                fd = os.open(shard, DIR_FLAGS, dir_fd=root)
        finally:
            os.close(root)
        try:
            yield fd
        finally:
            os.close(fd)

    def load(self, key: dict[str, Any]) -> SavedMap | None:
        if self.directory is None:
            return None
        shard, name, encoded = self._name(key)
        saved = None
        try:
            with self._shard(shard) as shard_fd:
                if shard_fd is not None:
                    data = _read_entry(name, shard_fd)
                    saved = _parse(data, encoded) if data is not None else None
                    if saved is not None:
                        with contextlib.suppress(OSError):
                            os.utime(name, dir_fd=shard_fd, follow_symlinks=False)  # used now: pruned last
        except OSError:
            saved = None
        except (ValueError, KeyError, TypeError, AttributeError, IndexError, OverflowError):  # (tampered: ignored)
            log.warning("ignoring the unreadable size cache entry %s", os.path.join(self.directory, shard, name))
            saved = None
        if saved is None:
            self.misses += 1
        else:
            self.hits += 1
        return saved

    def discard(self, key: dict[str, Any]) -> None:
        """Remove `key`'s entry (its file changed under the same identity): checked as ours first."""
        if self.directory is None:
            return
        shard, name, _ = self._name(key)
        with contextlib.suppress(OSError), self._shard(shard) as shard_fd:
            if shard_fd is not None:
                _unlink_entry(name, shard_fd)

    def save(self, key: dict[str, Any], saved: SavedMap) -> None:
        if self.directory is None:
            return
        shard, name, encoded = self._name(key)
        header = json.dumps({"key": encoded.decode(), "length": saved.length, "mapped_to": saved.mapped_to,
                             "entries": len(saved.positions), "error": saved.error,
                             "probes": len(saved.probe_positions), "damaged_at": saved.damaged_at}).encode()
        arrays = [array("q", a) for a in (saved.positions, saved.offsets, saved.probe_positions, saved.probe_values)]
        if sys.byteorder != "little":
            for a in arrays:
                a.byteswap()
        data = MAGIC + header + b"\n" + b"".join(a.tobytes() for a in arrays)
        if len(data) > MAX_ENTRY_BYTES:
            return  # (cannot happen for a real segment; a load would refuse it)
        path = f"{shard}/{name}"
        with self._changed:
            if self._queued_bytes + len(data) <= MAX_QUEUED_BYTES:
                self._queue.append((path, data))
                self._queued_bytes += len(data)
                if self._writer is None:
                    self._writer = threading.Thread(target=self._write_queued, name="kfs-size-cache", daemon=True)
                    self._writer.start()
                self._changed.notify_all()
                return
        self._store(path, data)  # the writer is that far behind: this caller waits for its own

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every entry saved so far is written; False if `timeout` passed first."""
        with self._changed:
            return self._changed.wait_for(lambda: not self._queue, timeout)

    def _write_queued(self) -> None:
        """The writer thread: entries are written in the order saved. A count's caller (a `stat`)
        does not wait for them: creating a file here costs 0.15-0.25 ms (ext4, an entry directory
        each), as much as counting a 64 KiB segment, and a first `stat` of 1,973 such segments
        took 1.1-1.4 s with the writes in it against 0.55 s without. An entry not written yet is
        a miss for a load, as before it was saved; one not written when the daemon is killed is
        computed again by the next mount."""
        while True:
            with self._changed:
                self._changed.wait_for(lambda: bool(self._queue))
                path, data = self._queue[0]
            try:
                self._store(path, data)
            except Exception:  # never let the writer die with entries queued: flush would wait on them
                log.exception("size cache: keeping %s failed", path)
            finally:
                with self._changed:
                    self._queue.popleft()
                    self._queued_bytes -= len(data)
                    self._changed.notify_all()

    def _store(self, path: str, data: bytes) -> None:
        try:
            self._write(path, data)
            self.stores += 1
            self._stored = None if self._stored is None else self._stored + len(data)
            if self._stored is None or self._stored > self.max_bytes:
                self.prune(PRUNE_TO * self.max_bytes)
        except OSError as e:
            if not self._warned:
                log.warning("cannot keep decoded sizes in %s (%s); every mount will compute them",
                            self.directory, e.strerror or e)
                self._warned = True

    def _write(self, path: str, data: bytes) -> None:
        """`data` at `path` (shard/name), atomically: written under a name of this store and thread,
        renamed over the entry's name (a rename replaces a link put there, never follows it)."""
        shard, name = path.split("/")
        with self._shard(shard, create=True) as shard_fd:
            assert shard_fd is not None
            tmp = f".tmp-{self._token}-{threading.get_ident()}"
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=shard_fd)  # (this store's and thread's own name, left by a failed write)
            fd = os.open(tmp, flags, 0o600, dir_fd=shard_fd)
            try:
                try:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view):]
                finally:
                    os.close(fd)
                os.replace(tmp, name, src_dir_fd=shard_fd, dst_dir_fd=shard_fd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=shard_fd)
                raise

    def prune(self, target: float | None = None) -> int:
        """Remove the least recently used entries while the store holds more than `target` bytes
        (`max_bytes` if not given); returns how many were removed. A save prunes only when the
        store may be past `max_bytes` (counted once, then added to), and then to PRUNE_TO of it.
        Only the store's own names count (two hex digits, then forty, or a temporary name), as
        regular files seen without following links, and each is checked to start with an entry
        header before it is unlinked: anything else in the directory is left alone."""
        if self.directory is None:
            return 0
        bound = self.max_bytes if target is None else target
        entries: list[tuple[int, int, str, str]] = []
        try:
            root = os.open(self.directory, DIR_FLAGS)
        except OSError:
            return 0
        try:
            shards = [e.name for e in os.scandir(root)
                      if SHARD_NAME.match(e.name) and e.is_dir(follow_symlinks=False)]
        finally:
            os.close(root)
        for shard in shards:
            with contextlib.suppress(OSError), self._shard(shard) as shard_fd:
                if shard_fd is None:
                    continue
                for entry in os.scandir(shard_fd):
                    if not (ENTRY_NAME.match(entry.name) or TEMP_NAME.match(entry.name)):
                        continue
                    with contextlib.suppress(OSError):
                        st = entry.stat(follow_symlinks=False)
                        if stat.S_ISREG(st.st_mode):
                            entries.append((st.st_mtime_ns, st.st_size, shard, entry.name))
        total = sum(size for _, size, _, _ in entries)
        removed = 0
        for _, size, shard, name in sorted(entries):
            if total <= bound:
                break
            with contextlib.suppress(OSError), self._shard(shard) as shard_fd:
                if shard_fd is not None and _unlink_entry(name, shard_fd):
                    total -= size
                    removed += 1
        self._stored = total
        return removed


def _read_entry(name: str, shard_fd: int) -> bytes | None:
    """An entry's bytes: a regular file (no link followed, no FIFO waited on) of bounded size, or None."""
    try:
        fd = os.open(name, READ_FLAGS, dir_fd=shard_fd)
    except FileNotFoundError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_ENTRY_BYTES:
            raise ValueError("not a kfs size cache entry")
        chunks = []
        left = st.st_size
        while left > 0:
            chunk = os.read(fd, left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _unlink_entry(name: str, shard_fd: int) -> bool:
    """Unlink one of the store's names if it is a regular file starting with an entry header."""
    try:
        fd = os.open(name, READ_FLAGS, dir_fd=shard_fd)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode) or os.read(fd, len(ENTRY_PREFIX)) != ENTRY_PREFIX:
            return False
    finally:
        os.close(fd)
    os.unlink(name, dir_fd=shard_fd)
    return True


def _parse(data: bytes, encoded_key: bytes) -> SavedMap | None:
    if not data.startswith(MAGIC):
        if data.startswith(ENTRY_PREFIX):
            return None  # another version's entry: computed again
        raise ValueError("not a kfs size cache entry")
    end = data.index(b"\n", len(MAGIC))
    header = json.loads(data[len(MAGIC):end])
    if not isinstance(header, dict) or not isinstance(header.get("key"), str):
        raise ValueError("not a kfs size cache entry")
    if header["key"].encode() != encoded_key:
        return None  # a hash collision, or a stale file under a reused name
    n, probes = int(header["entries"]), int(header["probes"])
    body = data[end + 1:]
    if n < 1 or probes not in (0, n) or len(body) != 8 * (2 * n + 2 * probes):
        raise ValueError("truncated")
    arrays = []
    for i, count in enumerate((n, n, probes, probes)):
        a = array("q")
        before = 8 * (n * min(i, 2) + probes * max(i - 2, 0))
        a.frombytes(body[before:before + 8 * count])
        if sys.byteorder != "little":
            a.byteswap()
        arrays.append(a)
    positions, offsets, probe_positions, probe_values = arrays
    length, mapped_to = int(header["length"]), int(header["mapped_to"])
    if (positions[0] != 0 or length < 0 or any(b < a for a, b in pairwise(positions))
            or positions[-1] > length or any(b < a for a, b in pairwise(offsets))):
        raise ValueError("not a seek map")
    error = header.get("error")
    return SavedMap(length, mapped_to, positions, offsets, str(error) if error is not None else None,
                    probe_positions, probe_values, int(header.get("damaged_at", -1)))
