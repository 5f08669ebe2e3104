"""What the mounted tree hands the FUSE layer: attributes, open files, and errors with an errno.

`KfsTree` makes them; `operations.py` serves them. A handle reads its own bytes: raw views from
segment file ranges (spliced by libfuse when one file holds them), decoded views from a cursor.
"""

from __future__ import annotations

import bisect
import errno
import os
import stat
import threading
from dataclasses import dataclass, field

from kfs.storage import (
    BadSpec,
    Extent,
    KfsError,
    Location,
    NoRecordAtOffset,
    OffsetOutOfRange,
    PartitionLog,
    TimestampNotFound,
    UnknownPartition,
    VanishedError,
)
from kfs.storage.files import open_regular
from kfs.views.cursor import Cursor, Piece
from kfs.views.decoded import Measure

WRITE_BITS = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH
_NOT_FOUND = (UnknownPartition, OffsetOutOfRange, TimestampNotFound, NoRecordAtOffset, BadSpec)


class _AsErrno:
    """as_errno's context manager: a class, not a generator (every lookup goes through one)."""

    __slots__ = ("path",)

    def __init__(self, path: str) -> None:
        self.path = path

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if exc_type is None or issubclass(exc_type, OSError):
            return
        if issubclass(exc_type, _NOT_FOUND):
            raise TreeError(errno.ENOENT, self.path) from exc
        if issubclass(exc_type, KfsError):
            raise TreeError(errno.EIO, self.path, exc) from exc


def as_errno(path: str) -> _AsErrno:
    """The core's errors as the errno a path gets: not in the log is ENOENT, unreadable is EIO."""
    return _AsErrno(path)


class TreeError(OSError):
    """An errno for the kernel, and (for EIO) the storage error that caused it, for the log."""

    def __init__(self, code: int, path: str, cause: BaseException | None = None) -> None:
        super().__init__(code, os.strerror(code), path)
        self.cause = cause


@dataclass
class Attr:
    """What `stat` shows. Times are integer nanoseconds."""

    mode: int
    size: int = 0
    uid: int = 0
    gid: int = 0
    mtime_ns: int = 0
    ctime_ns: int = 0
    atime_ns: int = 0
    nlink: int = 1
    exact_size: bool = True

    @classmethod
    def of_dir(cls, st: os.stat_result) -> Attr:
        return cls(st.st_mode, 0, st.st_uid, st.st_gid, st.st_mtime_ns, st.st_ctime_ns, st.st_atime_ns, 2)

    @classmethod
    def of_view(cls, st: os.stat_result, size: int, last: os.stat_result | None = None,
                exact: bool = True) -> Attr:
        """A file made from segment data: the segment's owner and mode without write bits."""
        newest = last or st
        mode = stat.S_IFREG | (stat.S_IMODE(st.st_mode) & ~WRITE_BITS)
        return cls(mode, size, st.st_uid, st.st_gid, newest.st_mtime_ns, newest.st_ctime_ns,
                   newest.st_atime_ns, 1, exact)


@dataclass
class Handle:
    """An open file. `direct_io`: the kernel sends every read to us; `keep_cache`: the kernel may
    keep pages from an earlier open (the content is unchanged)."""

    attr: Attr
    direct_io: bool = False
    keep_cache: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def read(self, size: int, offset: int) -> bytes:
        raise NotImplementedError

    def read_pieces(self, size: int, offset: int, direct: bool = False) -> list[Piece]:
        """`read` in pieces, for a reply that joins them (kfs.fuse.zerocopy.reply_pieces). `direct`: the
        request is a reader's own read passed through by the kernel (kfs.fuse.operations.reader_read),
        which may be answered short before damage; a fill of the page cache never may (the kernel
        takes a short one for the end of the file, and a sendfile copy ends there without an error)."""
        return [self.read(size, offset)]

    def fd_range(self, size: int, offset: int, direct: bool = False) -> tuple[int, int, int] | None:
        """(fd, position, length) when the bytes lie in one file, so libfuse can splice them."""
        return None

    def release(self) -> None:
        pass


def view_length(extent: Extent) -> int:
    """The bytes `extent` takes in a raw view: a damage extent at least one, that cannot be read. At a
    batch boundary it holds no bytes of its file, and a view that ended there (its last closed
    segment cut, the active one empty) had the size of the bytes before the damage: a copy by size
    (tar, rsync, sendfile) stopped there with no error."""
    length = extent.end - extent.start
    return max(length, 1) if extent.damage is not None else length


@dataclass
class BytesHandle(Handle):
    data: bytes = b""

    def read(self, size: int, offset: int) -> bytes:
        return self.data[offset:offset + size]


@dataclass
class RawHandle(Handle):
    """`offset/<N>`, `time/<T>`: file ranges of complete batches, snapshotted at open and
    re-snapshotted when a reader asks past the end (the partition grew)."""

    plog: PartitionLog | None = None
    location: Location | None = None
    extents: list[Extent] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    fds: dict[str, int] = field(default_factory=dict)

    __hash__ = object.__hash__  # by identity: the tree keeps its open raw readers in a WeakSet

    def __post_init__(self) -> None:
        self._index()
        if any(extent.damage for extent in self.extents):
            # Reads as the reader asks for them, not in the kernel's readahead windows: every byte
            # before the damage is served (a short read), and the read that starts there fails.
            self.direct_io, self.keep_cache = True, False

    def _index(self) -> None:
        self.starts, total = [], 0
        for extent in self.extents:
            self.starts.append(total)
            total += view_length(extent)
        self.size = total

    def _refresh(self) -> None:
        """Take in what the partition grew by, if the files already in view are the same files
        (a segment swapped by the cleaner has other bytes at those positions: then no growth)."""
        assert self.plog is not None and self.location is not None
        extents = self.plog.raw_extents(self.location)
        if self.grows_into(extents):
            self.extents = extents
            self._index()

    def grows_into(self, extents: list[Extent]) -> bool:
        """Whether `extents` (the view from this handle's batch as the log is now) are this handle's
        file or its growth: the same files and ranges, the last one maybe longer, more after it. Not
        when a segment it reads was deleted or replaced since it was opened."""
        known = len(self.extents)
        return bool(known and len(extents) >= known and extents[:known - 1] == self.extents[:-1]
                    and (extents[known - 1].path, extents[known - 1].start, extents[known - 1].file_id)
                    == (self.extents[-1].path, self.extents[-1].start, self.extents[-1].file_id))

    def _fd(self, extent: Extent) -> int:
        """The extent's file, opened on first use: the very file it was measured in, or VanishedError."""
        fd = self.fds.get(extent.path)
        if fd is None:
            try:
                fd = open_regular(extent.path)  # (never a FIFO or a link put there since it was measured)
            except FileNotFoundError as exc:
                raise VanishedError(f"{extent.path}: segment file vanished before it was read") from exc
            if extent.file_id is not None and os.fstat(fd).st_ino != extent.file_id:
                os.close(fd)
                raise VanishedError(f"{extent.path}: segment replaced before it was read")
            self.fds[extent.path] = fd
        return fd

    def _pieces(self, size: int, offset: int, direct: bool) -> list[tuple[int, int, int]]:
        with self.lock:
            if offset + size > self.size:
                self._refresh()
            size = self._check_damage(size, offset, direct)
            pieces = []
            i = bisect.bisect_right(self.starts, offset) - 1
            while size > 0 and 0 <= i < len(self.extents):
                extent = self.extents[i]
                skip = offset - self.starts[i]
                n = min(size, extent.end - extent.start - skip)
                if n > 0:
                    pieces.append((self._fd(extent), extent.start + skip, n))
                    size -= n
                    offset += n
                i += 1
            return pieces

    def _check_damage(self, size: int, offset: int, direct: bool) -> int:
        """The part of a read before the first damage extent; a read that starts there fails (EIO), and
        so does a page-cache fill that reaches it (`direct` False: answered short, the kernel would end
        the file there). The handle is direct_io then, so a reader's own read gets every byte before it."""
        for start, extent in zip(self.starts, self.extents, strict=True):
            if extent.damage is not None and start < offset + size:
                if offset >= start or not direct:
                    raise extent.damage_error()
                return start - offset
        return size

    def fd_range(self, size: int, offset: int, direct: bool = False) -> tuple[int, int, int] | None:
        pieces = self._pieces(size, offset, direct)
        return pieces[0] if len(pieces) == 1 else None

    def read(self, size: int, offset: int, direct: bool = False) -> bytes:
        return b"".join(os.pread(fd, n, position) for fd, position, n in self._pieces(size, offset, direct))

    def read_pieces(self, size: int, offset: int, direct: bool = False) -> list[Piece]:
        return [self.read(size, offset, direct)]

    def release(self) -> None:
        with self.lock:
            for fd in self.fds.values():
                os.close(fd)
            self.fds.clear()


@dataclass
class DecodedHandle(Handle):
    cursor: Cursor | None = None
    measure: Measure | None = None  # the size at open and the files it was measured over

    __hash__ = object.__hash__  # by identity: the tree keeps its open readers in a WeakSet

    def read(self, size: int, offset: int) -> bytes:
        return b"".join(self.read_pieces(size, offset))

    def read_pieces(self, size: int, offset: int, direct: bool = False) -> list[Piece]:
        assert self.cursor is not None
        # A page-cache fill answered short would be taken for the end of the file: a fill that meets
        # damage fails whole. A reader's own read of a direct_io file gets what it is: the bytes before
        # the damage, then the read that starts there fails (as `kfs cat` stops), no line lost.
        return self.cursor.read_pieces(offset, size, partial=self.direct_io and direct)
