"""A segment's `.log` file: opened on first use, read with `pread`, closed when idle or retired.

Never mmapped: a segment truncated under a mapping would SIGBUS the daemon. The descriptor is held
under a lock while a read uses it, so the open-files LRU (kfs.storage.open_files) can close idle
files without closing one under a reader; a file deleted or swapped by the log cleaner is retired
and never reopened by its name.

Opened only as a regular file (kfs.storage.files.open_regular). A `.log` that is something else (a
FIFO, a directory, a symbolic link, a device: `refused`, from the directory listing or from the
open) is never opened: it reads as an empty file, and its segment is damaged at position 0
(PartitionLog.damage), so a read that reaches it fails there, after the records before it.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable

from kfs.storage.errors import VanishedError
from kfs.storage.files import NotARegularFile, open_regular
from kfs.storage.open_files import OPEN_FILES

_LOOKUP = threading.local()  # .reads: {LogFile: [size, (position, bytes, to_end), ...]} inside one_lookup()
_KEPT_READS = 4  # reads kept per file within one lookup
LOOKUP_READ = 16 * 1024  # the least a lookup reads at once: its walk from an index entry mostly ends within it


class _OneLookup:
    """one_lookup's context manager (a class, not a generator: every `.value` goes through one)."""

    __slots__ = ("outer",)

    def __enter__(self) -> None:
        self.outer = getattr(_LOOKUP, "reads", None) is None  # nested: the outer lookup keeps the reads
        if self.outer:
            _LOOKUP.reads = {}

    def __exit__(self, *exc_info: object) -> None:
        if self.outer:
            _LOOKUP.reads = None


def one_lookup() -> _OneLookup:
    """Within it, this thread reads each `.log` page once and takes each file's size once.

    A lookup checks its index entry's batch, walks the headers from there, then reads the batch it
    found: each step used to pread the same page again and fstat the file again (five preads and
    five fstats for one `.value`). The bytes and sizes are those of one moment, as a single read
    would give; nothing is kept once the lookup is over (a live segment may be truncated later).
    """
    return _OneLookup()


class LogFile:
    """One `.log` file by path; thread-safe for concurrent readers."""

    def __init__(self, log_path: str, refused: NotARegularFile | None = None, follow_links: bool = False) -> None:
        self.log_path = log_path
        self.follow_links = follow_links  # (a file named on the command line: `kfs dump`'s)
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._retired = False
        self._file_id: int | None = None  # the inode first opened
        self._refused = refused  # not a regular file (the listing's entry type, or the open's fstat)

    @property
    def refused(self) -> NotARegularFile | None:
        """Why this `.log` is not read (it is not a regular file), as found so far; None otherwise."""
        return self._refused

    def refusal(self) -> NotARegularFile | None:
        """`refused`, once the file was tried: opened now if it never was (a regular file at listing
        may be something else by the time it is opened)."""
        if self._refused is None and self._file_id is None and not self._retired:
            with contextlib.suppress(VanishedError):
                self._file_size()
        return self._refused

    def _open_locked(self) -> int | None:
        """The `.log` descriptor, opened on first use; None when the file is refused (not a regular
        file: it reads as empty). The caller holds self._lock, so an eviction (which only try-locks)
        can never close it under a read in progress."""
        if self._fd is None:
            if self._refused is not None:
                return None
            if self._retired:
                raise VanishedError(f"{self.log_path}: segment deleted or replaced while reading")
            try:
                fd = open_regular(self.log_path, self.follow_links)
            except FileNotFoundError:
                raise VanishedError(f"{self.log_path}: segment deleted while reading") from None
            except NotARegularFile as e:
                if self._file_id is not None:  # a regular file when first opened: replaced since
                    raise VanishedError(f"{self.log_path}: segment replaced while reading") from None
                self._refused = e
                return None
            # No kernel read-ahead: a lookup reads a header or two and one batch, and read-ahead
            # would pull in tens of pages around each; long walks ask for what follows themselves.
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
            file_id = os.fstat(fd).st_ino
            if self._file_id is not None and file_id != self._file_id:
                # Reopened after an idle close, but the cleaner swapped in another file meanwhile:
                # what this object knows (positions, sizes) is about the old one.
                os.close(fd)
                raise VanishedError(f"{self.log_path}: segment replaced while reading")
            self._fd, self._file_id = fd, file_id
        return self._fd

    @property
    def retired(self) -> bool:
        """Deleted or replaced: what is known about it is kept by nobody (see kfs.views.decoded)."""
        return self._retired

    @property
    def file_id(self) -> int | None:
        """The inode of the `.log` this object has read (None before the first read)."""
        return self._file_id

    def close(self) -> None:
        """Close the `.log` descriptor (reopened on next use)."""
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
        OPEN_FILES.forget(self)

    def retire(self) -> None:
        """The file was deleted or replaced: close it, and never reopen it by its name."""
        self._retired = True
        self.close()

    def evict(self) -> None:
        """Close the `.log` descriptor unless a read holds it now (see kfs.storage.open_files)."""
        if self._lock.acquire(blocking=False):
            try:
                if self._fd is not None:
                    os.close(self._fd)
                    self._fd = None
            finally:
                self._lock.release()

    def __del__(self, _close: Callable[[int], None] = os.close) -> None:  # os may be gone at interpreter exit
        fd = getattr(self, "_fd", None)
        if fd is not None:
            try:  # noqa: SIM105  # no module globals here: they may be gone at interpreter exit
                _close(fd)
            except OSError:
                pass

    def file_identity(self) -> list[int]:
        """(device, inode, size, mtime ns, ctime ns) of the file this object reads, not of what is at
        its path now: after a cleaner swap those differ, and facts about one must not be taken for the
        other. The ctime is what an in-place rewrite cannot keep: `cp -p`, `rsync -t --inplace` and
        `touch -r` restore size and mtime, but no utime call sets ctime."""
        with self._lock:
            try:
                fd = self._open_locked()
                st = os.fstat(fd) if fd is not None else os.lstat(self.log_path)  # (refused: the entry's own)
            except OSError as e:
                raise VanishedError(f"{self.log_path}: {e.strerror}") from None
        if fd is None:
            return [st.st_dev, st.st_ino, 0, st.st_mtime_ns, st.st_ctime_ns]  # read as empty
        OPEN_FILES.touch(self)
        return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]

    def file_size(self) -> int:
        reads = getattr(_LOOKUP, "reads", None)
        if reads is not None:
            kept = reads.get(self)
            if kept is not None:
                return kept[0]
        size = self._file_size()
        if reads is not None:
            reads[self] = [size]
        return size

    def _file_size(self) -> int:
        with self._lock:
            try:
                fd = self._open_locked()
                if fd is None:
                    return 0  # refused: read as empty (its segment is damaged at position 0)
                size = os.fstat(fd).st_size
            except OSError as e:
                raise VanishedError(f"{self.log_path}: {e.strerror}") from None
        OPEN_FILES.touch(self)
        return size

    def read(self, position: int, length: int, ahead: int = 0, *, sized: bool = False) -> bytes:
        """`length` bytes at `position`; `ahead`: the next bytes a walk will want, read in the background.
        `sized`: the caller knows how much it needs; within one_lookup, read no more (LOOKUP_READ)."""
        reads = getattr(_LOOKUP, "reads", None)
        if reads is not None:
            kept = reads.get(self)
            for start, data, to_end in kept[1:] if kept else ():
                if start <= position and (to_end or position + length <= start + len(data)):
                    return data if position == start and length >= len(data) else \
                        data[position - start:position - start + length]
        if reads is None:
            return self._read(position, length, ahead)
        asked = length if sized else max(length, LOOKUP_READ)
        data = self._read(position, asked, ahead)
        kept = reads.setdefault(self, [self.file_size()])
        kept.append((position, data, len(data) < asked))  # a short read: the file ended there
        if len(kept) > _KEPT_READS + 1:
            del kept[1]
        return data if len(data) <= length else data[:length]

    def _read(self, position: int, length: int, ahead: int) -> bytes:
        with self._lock:
            try:
                fd = self._open_locked()
                if fd is None:
                    return b""  # refused: read as empty
                data = os.pread(fd, length, position)
                if ahead:
                    os.posix_fadvise(fd, position + length, ahead, os.POSIX_FADV_WILLNEED)
            except OSError as e:
                raise VanishedError(f"{self.log_path}: {e.strerror} at position {position}") from None
        OPEN_FILES.touch(self)
        return data
