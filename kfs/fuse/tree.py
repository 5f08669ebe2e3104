"""The mounted tree of SPEC section 2 as a "mount source": paths in, attributes and handles out.

No FUSE in here (ratarmount's MountSource idea): `operations.py` only translates. Every answer
comes from the storage core (`kfs.storage`) and the decoded views (`kfs.views.decoded`):

    /<topic>-<partition>/offset/<N>          RawHandle    batches as stored, from N's batch to the log end
    /<topic>-<partition>/offset/<N>.jsonl    DecodedHandle
    /<topic>-<partition>/offset/<N>.value    BytesHandle  (exact offset; a gap is ENOENT)
    /<topic>-<partition>/time/<T>[.jsonl|.value]
    /<topic>-<partition>/messages.jsonl      = offset/<log start>.jsonl
    /<topic>-<partition>/info.json

Errors leave as OSError with an errno: ENOENT for names outside the log, EIO for a corrupt or
vanished log (with the storage error chained, so the daemon log names file and position).
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import json
import os
import stat
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from kfs.storage import (
    BadSpec,
    KfsError,
    LogDirs,
    NoRecordAtOffset,
    OffsetOutOfRange,
    TimestampNotFound,
    UnknownPartition,
    VanishedError,
)
from kfs.views.decoded import DEFAULT_SIZE_BUDGET, Cursor, DecodedLog, DecodedView

BLOCK_SIZE = 1 << 20  # st_blksize: cat/cp size their reads by it (max(128 KiB, st_blksize))
SMALL_TTL = 1.0  # seconds an info.json / .value rendering is reused (the kernel's attr timeout)
PARTITION_DIR_NAMES = ("info.json", "messages.jsonl", "offset", "time")
WRITE_BITS = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH
_NOT_FOUND = (UnknownPartition, OffsetOutOfRange, TimestampNotFound, NoRecordAtOffset, BadSpec)


@contextlib.contextmanager
def _as_errno(path: str) -> Iterator[None]:
    """The core's errors as the errno a path gets: not in the log is ENOENT, unreadable is EIO."""
    try:
        yield
    except OSError:
        raise
    except _NOT_FOUND as exc:
        raise TreeError(errno.ENOENT, path) from exc
    except KfsError as exc:
        raise TreeError(errno.EIO, path, exc) from exc


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

    def fd_range(self, size: int, offset: int) -> tuple[int, int, int] | None:
        """(fd, position, length) when the bytes lie in one file, so libfuse can splice them."""
        return None

    def release(self) -> None:
        pass


@dataclass
class BytesHandle(Handle):
    data: bytes = b""

    def read(self, size: int, offset: int) -> bytes:
        return self.data[offset:offset + size]


@dataclass
class RawHandle(Handle):
    """`offset/<N>`, `time/<T>`: file ranges of complete batches, snapshotted at open and
    re-snapshotted when a reader asks past the end (the partition grew)."""

    plog: Any = None
    location: Any = None
    extents: list = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    fds: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._index()

    def _index(self) -> None:
        self.starts, total = [], 0
        for extent in self.extents:
            self.starts.append(total)
            total += extent.end - extent.start
        self.size = total

    def _refresh(self) -> None:
        extents = self.plog.raw_extents(self.location)
        if extents and self.extents and extents[0].start == self.extents[0].start:
            self.extents = extents
            self._index()

    def _fd(self, path: str) -> int:
        fd = self.fds.get(path)
        if fd is None:
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError as exc:
                raise VanishedError(f"{path}: segment file vanished before it was read") from exc
            self.fds[path] = fd
        return fd

    def _pieces(self, size: int, offset: int) -> list[tuple[int, int, int]]:
        with self.lock:
            if offset + size > self.size:
                self._refresh()
            pieces = []
            i = bisect.bisect_right(self.starts, offset) - 1
            while size > 0 and 0 <= i < len(self.extents):
                extent = self.extents[i]
                skip = offset - self.starts[i]
                n = min(size, extent.end - extent.start - skip)
                if n > 0:
                    pieces.append((self._fd(extent.path), extent.start + skip, n))
                    size -= n
                    offset += n
                i += 1
            return pieces

    def fd_range(self, size: int, offset: int) -> tuple[int, int, int] | None:
        pieces = self._pieces(size, offset)
        return pieces[0] if len(pieces) == 1 else None

    def read(self, size: int, offset: int) -> bytes:
        return b"".join(os.pread(fd, n, position) for fd, position, n in self._pieces(size, offset))

    def release(self) -> None:
        with self.lock:
            for fd in self.fds.values():
                os.close(fd)
            self.fds.clear()


@dataclass
class DecodedHandle(Handle):
    cursor: Cursor | None = None

    def read(self, size: int, offset: int) -> bytes:
        assert self.cursor is not None
        return self.cursor.read(offset, size)


@dataclass(frozen=True)
class ViewName:
    """A parsed `offset/<spec>[.jsonl|.value]` or `time/<spec>[...]`."""

    axis: str  # "offset" or "time"
    spec: str
    kind: str  # "raw", "jsonl" or "value"

    @classmethod
    def parse(cls, axis: str, name: str) -> ViewName:
        for kind in ("jsonl", "value"):
            if name.endswith("." + kind) and len(name) > len(kind) + 1:
                return cls(axis, name[:-len(kind) - 1], kind)
        return cls(axis, name, "raw")


class KfsTree:
    """The whole mounted tree over some log dirs. Thread-safe; nothing is opened until asked."""

    def __init__(self, logdirs: LogDirs, isolation: str = "read_uncommitted", control: str = "hide",
                 size_budget: int = DEFAULT_SIZE_BUDGET) -> None:
        self.logdirs = logdirs
        self.isolation = isolation
        self.control = control
        self.size_budget = size_budget
        self._decoded: dict[str, DecodedLog] = {}
        self._small: dict[str, tuple[float, Attr, bytes]] = {}
        self._signatures: dict[str, tuple[int, int]] = {}
        self._locations: dict[tuple[str, str, str], tuple[float, Any, Any]] = {}
        self._lock = threading.Lock()

    # ---- paths ----------------------------------------------------------------------------------

    def getattr(self, path: str) -> Attr:
        parts = _split(path)
        with _as_errno(path):
            if not parts:
                return Attr.of_dir(os.stat(self.logdirs.paths[0]))
            plog = self._partition(parts[0], path)
            if len(parts) == 1 or (len(parts) == 2 and parts[1] in ("offset", "time")):
                return Attr.of_dir(os.stat(plog.path))
            if len(parts) == 2 and parts[1] == "info.json":
                return self._info(plog, path)[0]
            if len(parts) == 2 and parts[1] == "messages.jsonl":
                return self._decoded_attr(path, self._decoded_view(plog, None))
            if len(parts) == 3 and parts[1] in ("offset", "time"):
                return self._view_attr(path, plog, ViewName.parse(parts[1], parts[2]))
        raise TreeError(errno.ENOENT, path)

    def readdir(self, path: str) -> list[str]:
        parts = _split(path)
        if not parts:
            return self.logdirs.partition_names()
        if len(parts) == 1:
            self._partition(parts[0], path)
            return list(PARTITION_DIR_NAMES)
        if len(parts) == 2 and parts[1] in ("offset", "time"):
            self._partition(parts[0], path)
            return []  # names are looked up, not listed: `grep -r` reads messages.jsonl once
        self.getattr(path)  # ENOENT when nothing is there
        raise TreeError(errno.ENOTDIR, path)

    def open(self, path: str) -> Handle:
        parts = _split(path)
        with _as_errno(path):
            if len(parts) == 2 and parts[1] == "info.json":
                plog = self._partition(parts[0], path)
                attr, data = self._info(plog, path)
                return self._cached(path, BytesHandle(attr, data=data))
            if len(parts) == 2 and parts[1] == "messages.jsonl":
                plog = self._partition(parts[0], path)
                return self._open_decoded(path, self._decoded_view(plog, None))
            if len(parts) == 3 and parts[1] in ("offset", "time"):
                plog = self._partition(parts[0], path)
                name = ViewName.parse(parts[1], parts[2])
                if name.kind == "raw":
                    location = self._locate(plog, name)
                    extents = plog.raw_extents(location)
                    handle = RawHandle(self._raw_attr(extents), plog=plog, location=location, extents=extents)
                    return self._cached(path, handle)
                if name.kind == "value":
                    attr, data = self._value(plog, name, path)
                    return self._cached(path, BytesHandle(attr, data=data))
                return self._open_decoded(path, self._decoded_view(plog, name))
        self.getattr(path)  # ENOENT when nothing is there
        raise TreeError(errno.EISDIR, path)

    # ---- views ----------------------------------------------------------------------------------

    def _partition(self, name: str, path: str) -> Any:
        try:
            return self.logdirs.partition(name)
        except UnknownPartition as exc:
            raise TreeError(errno.ENOENT, path) from exc

    def _locate(self, plog: Any, name: ViewName) -> Any:
        """The batch a name points at. A lookup decodes a batch, and the kernel asks for a name
        several times per use (lookup, getattr, open), so answers are reused for SMALL_TTL, the
        kernel's own attribute timeout ("latest" and "-K" move as the log grows)."""
        key = (plog.name, name.axis, name.spec)
        now = time.monotonic()
        cached = self._locations.get(key)
        if cached and now - cached[0] < SMALL_TTL and cached[1] is plog:
            return cached[2]
        if name.axis == "offset":
            location = plog.locate_offset(plog.resolve_offset(name.spec), with_record=False)
        else:
            location = plog.locate_time(plog.parse_time(name.spec))
        with self._lock:
            if len(self._locations) > 65536:
                self._locations.clear()
            self._locations[key] = (now, plog, location)
        return location

    def _view_attr(self, path: str, plog: Any, name: ViewName) -> Attr:
        if name.kind == "raw":
            return self._raw_attr(plog.raw_extents(self._locate(plog, name)))
        if name.kind == "value":
            return self._value(plog, name, path)[0]
        return self._decoded_attr(path, self._decoded_view(plog, name))

    def _raw_attr(self, extents: list) -> Attr:
        if not extents:
            raise OffsetOutOfRange("no complete batch from here")
        first, last = os.stat(extents[0].path), os.stat(extents[-1].path)
        return Attr.of_view(first, sum(e.end - e.start for e in extents), last)

    def _decoded_log(self, plog: Any) -> DecodedLog:
        with self._lock:
            log = self._decoded.get(plog.name)
            if log is None or log.plog is not plog:
                log = self._decoded[plog.name] = DecodedLog(plog, self.isolation, self.control)
            return log

    def _decoded_view(self, plog: Any, name: ViewName | None) -> DecodedView:
        if name is None:
            start = plog.log_start_offset()
        elif name.axis == "offset":
            start = plog.resolve_offset(name.spec)
            self._locate(plog, name)  # ENOENT outside the log
        else:
            start = self._locate(plog, name).offset
        return self._decoded_log(plog).view(start)

    def _decoded_attr(self, path: str, view: DecodedView) -> Attr:
        segments = view.log.plog.segments()
        if not segments:  # a partition directory with no segment yet: an empty log
            attr = Attr.of_view(os.stat(view.log.plog.path), 0)
            attr.mode &= ~0o111
            return attr
        first, last = os.stat(segments[0].log_path), os.stat(segments[-1].log_path)
        size = view.size(self.size_budget)
        return Attr.of_view(first, size or 0, last, exact=size is not None)

    def _open_decoded(self, path: str, view: DecodedView) -> Handle:
        """Always direct_io: every read comes to us, whatever st_size the kernel holds (0 while
        unknown, or a size a growing partition has outgrown). See kfs.views.decoded."""
        attr = self._decoded_attr(path, view)
        return DecodedHandle(attr, direct_io=True, cursor=view.cursor())

    def _value(self, plog: Any, name: ViewName, path: str) -> tuple[Attr, bytes]:
        cached = self._small.get(path)
        if cached and time.monotonic() - cached[0] < SMALL_TTL:
            return cached[1], cached[2]
        if name.axis == "offset":
            offset = plog.resolve_offset(name.spec)
            record = plog.record_at(offset, isolation=self.isolation)
        else:
            # The record ListOffsets finds, or (when that is a control marker) the first record
            # after it: the first line of time/<T>.jsonl, so the two views agree.
            start = self._locate(plog, name).offset
            record = next(iter(plog.records(start, isolation=self.isolation)), None)
            if record is None:
                raise NoRecordAtOffset(f"{plog.name}: no record at or after {start}")
        data = record.value or b""
        segment = plog.floor_segment(record.offset)
        attr = Attr.of_view(os.stat(segment.log_path), len(data))
        self._small[path] = (time.monotonic(), attr, data)
        return attr, data

    def _info(self, plog: Any, path: str) -> tuple[Attr, bytes]:
        cached = self._small.get(path)
        if cached and time.monotonic() - cached[0] < SMALL_TTL:
            return cached[1], cached[2]
        data = (json.dumps(plog.info(), indent=2) + "\n").encode()
        st = os.stat(plog.path)
        attr = Attr(stat.S_IFREG | (stat.S_IMODE(st.st_mode) & 0o444), len(data), st.st_uid, st.st_gid,
                    st.st_mtime_ns, st.st_ctime_ns, st.st_atime_ns)
        segments = plog.segments()
        if segments:
            newest = os.stat(segments[-1].log_path)
            attr.mtime_ns = max(attr.mtime_ns, newest.st_mtime_ns)
        self._small[path] = (time.monotonic(), attr, data)
        if len(self._small) > 4096:
            self._small.clear()
        return attr, data

    def _cached(self, path: str, handle: Handle) -> Handle:
        """keep_cache when the file looks as it did at its last open (libfuse's auto_cache rule):
        closed segments never change, and a live file that changed size or mtime starts afresh
        (the kernel also drops the pages when a getattr shows a new size)."""
        signature = (handle.attr.size, handle.attr.mtime_ns)
        with self._lock:
            handle.keep_cache = self._signatures.get(path) == signature
            self._signatures[path] = signature
            if len(self._signatures) > 65536:
                self._signatures.clear()
        return handle


def _split(path: str) -> list[str]:
    return [p for p in path.split("/") if p]
