"""Decoded sizes and seek maps of closed segments, kept between mounts (ratarmount's index cache).

A closed segment never changes, so the length of its JSON lines and its seek map are facts about
the file: computed once, they are stored under `$XDG_CACHE_HOME/kfs/decoded` (`~/.cache/kfs/decoded`),
never in the log dir. An entry is keyed by the segment file's identity (device, inode, size, mtime)
and by everything else that shapes the bytes: topic and partition (in every line), the offsets the
run covers, isolation and control, the aborted transactions read_committed hides, and a fingerprint
of the installed kfs (another version may render differently, so it starts afresh). The key is
stored in the entry and compared on load: an entry that does not match or does not parse is
ignored and computed again. Writes are atomic (a temporary file renamed into place). The store is
bounded (`MAX_BYTES`): past it, the entries least recently used (their mtime, renewed on each use)
are removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sys
import threading
from array import array
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("kfs")

MAGIC = b"kfs-decoded-map 1\n"
MAX_BYTES = 1 << 30  # the store's bound: ~1000 maps of 1 GiB segments, or far more smaller ones
PRUNE_TO = 0.9  # a save that finds the store past its bound prunes it to this share of it
MAX_QUEUED_BYTES = 64 << 20  # entries waiting for the writer thread; past it a save writes its own
_fingerprint: str | None = None


def default_directory() -> str:
    """`$XDG_CACHE_HOME/kfs/decoded`, or `~/.cache/kfs/decoded` (the XDG base directory rule)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "kfs", "decoded")


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


def file_identity(path: str) -> list[int]:
    """(device, inode, size, mtime ns) of a file: a different file, or the same one changed, differs."""
    st = os.stat(path)
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]


@dataclass
class SavedMap:
    """A segment run as stored: its length, how far it is mapped, its seek map and its damage."""

    length: int
    mapped_to: int
    positions: array
    offsets: array
    error: str | None = None


class SizeCache:
    """The store. `directory=None` turns it off (every mount computes afresh)."""

    def __init__(self, directory: str | None, max_bytes: int = MAX_BYTES) -> None:
        self.directory = directory or None
        self.max_bytes = max_bytes
        self._warned = False
        self.hits = self.misses = self.stores = 0  # for the daemon log (and the tests)
        self._made: set[str] = set()  # entry directories known to exist
        self._stored: int | None = None  # the store's bytes as last counted, plus what was saved since
        self._token = f"{os.getpid()}-{os.urandom(4).hex()}"  # this store's temporary names: no other writer's
        # Entries waiting for the writer thread, and their bytes (see save)
        self._queue: deque[tuple[str, bytes]] = deque()
        self._queued_bytes = 0
        self._changed = threading.Condition()
        self._writer: threading.Thread | None = None

    @classmethod
    def default(cls) -> SizeCache:
        return cls(default_directory())

    def _path(self, key: dict[str, Any]) -> tuple[str, bytes]:
        assert self.directory is not None
        encoded = json.dumps(key, sort_keys=True, separators=(",", ":")).encode()
        name = hashlib.sha256(encoded).hexdigest()[:40]
        return os.path.join(self.directory, name[:2], name), encoded

    def load(self, key: dict[str, Any]) -> SavedMap | None:
        if self.directory is None:
            return None
        path, encoded = self._path(key)
        try:
            with open(path, "rb") as f:
                data = f.read()
            saved = _parse(data, encoded)
        except OSError:
            saved = None
        except (ValueError, KeyError, TypeError):
            log.warning("ignoring the unreadable size cache entry %s", path)
            saved = None
        if saved is None:
            self.misses += 1
        else:
            self.hits += 1
            with contextlib.suppress(OSError):
                os.utime(path)  # used now: the last to be pruned
        return saved

    def save(self, key: dict[str, Any], saved: SavedMap) -> None:
        if self.directory is None:
            return
        path, encoded = self._path(key)
        header = json.dumps({"key": encoded.decode(), "length": saved.length, "mapped_to": saved.mapped_to,
                             "entries": len(saved.positions), "error": saved.error}).encode()
        positions, offsets = array("q", saved.positions), array("q", saved.offsets)
        if sys.byteorder != "little":
            positions.byteswap()
            offsets.byteswap()
        data = MAGIC + header + b"\n" + positions.tobytes() + offsets.tobytes()
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
        """`data` at `path`, atomically: written under a name of this store and thread, renamed.

        A first count of a partition of 1,973 small segments saved 1,973 maps: with a directory
        made, a random name drawn and a Python file object each time (and the whole store listed
        every 256 saves to bound it), saving took longer than counting (0.6 s of 1.15 s)."""
        directory = os.path.dirname(path)
        if directory not in self._made:
            os.makedirs(directory, exist_ok=True)
            self._made.add(directory)
        tmp = os.path.join(directory, f".tmp-{self._token}-{threading.get_ident()}")
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(tmp, flags, 0o600)  # this store's and thread's own name: no one else writes it
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def prune(self, target: float | None = None) -> int:
        """Remove the least recently used entries while the store holds more than `target` bytes
        (`max_bytes` if not given); returns how many were removed. A save prunes only when the
        store may be past `max_bytes` (counted once, then added to), and then to PRUNE_TO of it."""
        if self.directory is None:
            return 0
        bound = self.max_bytes if target is None else target
        entries = []
        for path in Path(self.directory).glob("*/*"):
            try:
                st = path.stat()
            except OSError:
                continue
            entries.append((st.st_mtime_ns, st.st_size, path))
        total = sum(size for _, size, _ in entries)
        removed = 0
        for _, size, path in sorted(entries):
            if total <= bound:
                break
            with contextlib.suppress(OSError):
                path.unlink()
                total -= size
                removed += 1
        self._stored = total
        return removed


def _parse(data: bytes, encoded_key: bytes) -> SavedMap | None:
    if not data.startswith(MAGIC):
        raise ValueError("not a kfs size cache entry")
    end = data.index(b"\n", len(MAGIC))
    header = json.loads(data[len(MAGIC):end])
    if header["key"].encode() != encoded_key:
        return None  # a hash collision, or a stale file under a reused name
    n = int(header["entries"])
    body = data[end + 1:]
    if len(body) != 16 * n:
        raise ValueError("truncated")
    positions, offsets = array("q"), array("q")
    positions.frombytes(body[:8 * n])
    offsets.frombytes(body[8 * n:])
    if sys.byteorder != "little":
        positions.byteswap()
        offsets.byteswap()
    error = header.get("error")
    return SavedMap(int(header["length"]), int(header["mapped_to"]), positions, offsets,
                    str(error) if error is not None else None)
