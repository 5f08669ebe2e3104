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
import tempfile
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("kfs")

MAGIC = b"kfs-decoded-map 1\n"
MAX_BYTES = 1 << 30  # the store's bound: ~1000 maps of 1 GiB segments, or far more smaller ones
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
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(MAGIC + header + b"\n" + positions.tobytes() + offsets.tobytes())
                os.replace(tmp, path)
                self.stores += 1
                if self.stores % 256 == 0:
                    self.prune()
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError as e:
            if not self._warned:
                log.warning("cannot keep decoded sizes in %s (%s); every mount will compute them",
                            self.directory, e.strerror or e)
                self._warned = True


    def prune(self) -> int:
        """Remove the least recently used entries while the store holds more than `max_bytes`;
        returns how many were removed."""
        if self.directory is None:
            return 0
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
            if total <= self.max_bytes:
                break
            with contextlib.suppress(OSError):
                path.unlink()
                total -= size
                removed += 1
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
