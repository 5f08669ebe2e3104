"""The FUSE callbacks: paths in, errno out, per-handle state in a table. Nothing else.

All knowledge of the tree is in `tree.KfsTree`; this class translates its answers for libfuse
(ratarmount's split between MountSource and the FUSE class). Read-only: every modifying call
answers EROFS. Raw views are answered through `read_buf` with file-descriptor ranges, so libfuse
splices segment bytes to the kernel without copying them through Python.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from kfs.fuse import binding
from kfs.fuse.handles import Attr, DecodedHandle, Handle, TreeError
from kfs.fuse.native_read import NativeReads
from kfs.fuse.size_scan import start_size_scan
from kfs.fuse.tree import KfsTree
from kfs.storage.open_files import OPEN_FILES
from kfs.views.decoded import Piece

log = logging.getLogger("kfs.fuse")
requests = logging.getLogger("kfs.requests")  # every call, when asked for (kfs mount -v)

ATTR_TIMEOUT = 1.0  # seconds the kernel trusts a stat: a live partition's growth shows within this
ENTRY_TIMEOUT = 1.0
#: libfuse's cache options kfs sets unless the user gives them (`-o attr_timeout=30`, `-o direct_io`):
#: given, libfuse's parse of them stands. direct_io sends every read to the daemon at the reader's
#: own size and keeps no decoded page in the page cache (see the README on when that pays).
CACHE_DEFAULTS: dict[str, float | int] = {"attr_timeout": ATTR_TIMEOUT, "entry_timeout": ENTRY_TIMEOUT,
                                          "negative_timeout": 0.0, "direct_io": 0}
IDLE_CHECK_SECONDS = 30.0
IDLE_CLOSE_SECONDS = 60.0  # an index or segment file unused this long is closed (reopened on use)
CACHE_FLUSH_SECONDS = 10.0  # unmounting waits this long at most for decoded sizes still being kept


_WORKER = threading.local()


def _keep_thread_state() -> None:
    """Keep this libfuse worker thread's Python thread state from one callback to the next.

    ctypes makes a thread state for each callback from a thread Python did not start and frees it
    on return (an allocation, a 16 KiB frame stack mmapped and unmapped: per FUSE request). One
    PyGILState_Ensure never released keeps it: later callbacks only take the GIL. libfuse keeps
    its workers (libfuse3 reaps none by default), so this is once per worker thread."""
    if not getattr(_WORKER, "kept", False):
        _WORKER.kept = True
        ctypes.pythonapi.PyGILState_Ensure()


def _translated(method: Callable) -> Callable:
    """Turn tree errors into errnos and log the ones a user must hear about (EIO, bugs); with
    `kfs mount -v` log every call, its answer and its time."""

    @functools.wraps(method)
    def wrapper(self: KfsOperations, path: str, *args: Any) -> Any:
        _keep_thread_state()
        if not requests.isEnabledFor(logging.INFO):
            return _call(method, self, path, args)
        began = time.perf_counter()
        outcome = "?"
        try:
            result = _call(method, self, path, args)
            outcome = _describe(result)
            return result
        except binding.FuseOSError as exc:
            outcome = os.strerror(exc.errno)
            raise
        finally:
            shown = "".join(f" {a}" for a in args if isinstance(a, int | str))
            requests.info("%s %s%s -> %s (%.2f ms)", method.__name__, path, shown, outcome,
                          1000 * (time.perf_counter() - began))

    return wrapper


def _call(method: Callable, self: KfsOperations, path: str, args: tuple) -> Any:
    try:
        return method(self, path, *args)
    except TreeError as exc:
        if exc.errno == errno.EIO:
            log.error("%s %s: %s", method.__name__, path, exc.cause or exc)
        raise binding.FuseOSError(exc.errno) from None
    except binding.FuseOSError:
        raise
    except OSError as exc:
        code = exc.errno or errno.EIO
        if code != errno.ENOENT:
            log.error("%s %s: %s", method.__name__, path, exc)
        raise binding.FuseOSError(code) from None
    except Exception as exc:
        log.exception("%s %s: %s", method.__name__, path, exc)
        raise binding.FuseOSError(errno.EIO) from None


def _describe(result: Any) -> str:
    if isinstance(result, bytes):
        return f"{len(result)} bytes"
    if isinstance(result, list):
        return f"{len(result)} entries"
    if isinstance(result, dict) and "st_size" in result:
        return f"size {result['st_size']}"
    return "ok"


def reader_read(fi: Any) -> bool:
    """Whether a READ is a reader's own read passed through (a direct_io file's read(2)), not a fill
    of the kernel's page cache (readahead, a page fault, the splice path behind sendfile and
    copy_file_range, which reads even a direct_io file through the page cache). The kernel sends the
    reader's lock owner with the first only (FUSE_READ_LOCKOWNER, fuse_direct_io in fs/fuse/file.c;
    its page-cache requests leave it 0). Only such a read may be answered short before damage: a fill
    answered short is the end of the file to the kernel (fuse_short_read), and a copy ends there."""
    return bool(getattr(fi, "lock_owner", 0))


def _read_only(*_: Any) -> Any:
    raise binding.FuseOSError(errno.EROFS)


class KfsOperations(binding.Operations):
    """Callbacks for `binding.FUSE(..., raw_fi=True)`."""

    use_ns = binding.USE_NS

    def __init__(self, tree: KfsTree, size_scan: bool = True, given: frozenset[str] = frozenset()) -> None:
        self.tree = tree
        self.size_scan = size_scan
        self.given = given  # the CACHE_DEFAULTS given with -o: libfuse keeps them as it parsed them
        self.all_direct_io = "direct_io" in given
        self._scan_stop: threading.Event | None = None
        self._handles: dict[int, Handle] = {}
        self._next_fh = itertools.count(1)
        self._lock = threading.Lock()
        # Set by the mount when libfuse's read_buf is small_files.c's: decoded files' READs from windows.
        self.native_reads: NativeReads | None = None

    # ---- attributes and directories -------------------------------------------------------------

    def _stat(self, attr: Attr) -> dict[str, Any]:
        scale = 1 if self.use_ns else 1e-9
        return {
            "st_mode": attr.mode, "st_size": attr.size, "st_uid": attr.uid, "st_gid": attr.gid,
            "st_nlink": attr.nlink, "st_blksize": 1 << 20, "st_blocks": (attr.size + 511) // 512,
            "st_mtime": attr.mtime_ns * scale, "st_ctime": attr.ctime_ns * scale,
            "st_atime": attr.atime_ns * scale,
        }

    @_translated
    def getattr(self, path: str, fh: Any = None) -> dict[str, Any]:
        return self._stat(self.tree.getattr(path))

    @_translated
    def readdir(self, path: str, fh: Any) -> list[str]:
        return [".", "..", *self.tree.readdir(path)]

    @_translated
    def access(self, path: str, amode: int) -> int:
        self.tree.getattr(path)
        if amode & os.W_OK:
            raise binding.FuseOSError(errno.EROFS)
        return 0

    def statfs(self, path: str) -> dict[str, int]:
        """The log dirs' filesystems' numbers (each filesystem counted once), so `df` shows the disk the
        data lives on and how full it is; answering 0 free made `df` report the mount 100% full."""
        seen: set[int] = set()
        blocks = bfree = bavail = files = ffree = 0
        frsize = 4096
        for logdir in self.tree.logdirs.paths:
            try:
                device = os.stat(logdir).st_dev
                st = os.statvfs(logdir)
            except OSError:
                continue
            if device in seen:
                continue
            if not seen:
                frsize = st.f_frsize or 4096
            seen.add(device)
            blocks += st.f_blocks * st.f_frsize // frsize
            bfree += st.f_bfree * st.f_frsize // frsize
            bavail += st.f_bavail * st.f_frsize // frsize
            files += st.f_files
            ffree += st.f_ffree
        return {"f_bsize": frsize, "f_frsize": frsize, "f_blocks": blocks, "f_bfree": bfree, "f_bavail": bavail,
                "f_files": files, "f_ffree": ffree, "f_favail": ffree, "f_namemax": 255}

    # ---- files ----------------------------------------------------------------------------------

    @_translated
    def open(self, path: str, fi: Any) -> int:
        if fi.flags & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC | os.O_APPEND | os.O_CREAT):
            raise binding.FuseOSError(errno.EROFS)
        handle = self.tree.open(path)
        if self.all_direct_io:  # -o direct_io: libfuse makes every open direct_io; the handle knows it
            handle.direct_io, handle.keep_cache = True, False
        with self._lock:
            fh = next(self._next_fh)
            self._handles[fh] = handle
        fi.fh = fh
        fi.direct_io = int(handle.direct_io)
        fi.keep_cache = int(handle.keep_cache)
        return 0

    def _handle(self, fi: Any) -> Handle:
        handle = self._handles.get(fi.fh)
        if handle is None:
            raise binding.FuseOSError(errno.EBADF)
        return handle

    @_translated
    def read(self, path: str, size: int, offset: int, fi: Any) -> bytes:
        return self._read(path, size, offset, fi)

    def _read(self, path: str, size: int, offset: int, fi: Any) -> bytes:
        return b"".join(self._read_pieces(path, size, offset, fi))

    def _read_pieces(self, path: str, size: int, offset: int, fi: Any) -> list[Piece]:
        self.tree.foreground.touch()
        try:
            return self._handle(fi).read_pieces(size, offset, reader_read(fi))
        except TreeError:
            raise
        except Exception as exc:
            raise TreeError(errno.EIO, path, exc) from exc

    if binding.HAS_READ_BUF:
        from kfs.fuse import zerocopy as _zerocopy

        @_translated
        def read_buf(self, path: str, bufpp: Any, size: int, offset: int, fi: Any) -> int:
            """Hand libfuse an fd range when the bytes lie in one segment file (no copy in Python)."""
            handle = self._handle(fi)
            try:
                piece = handle.fd_range(size, offset, reader_read(fi))
            except Exception as exc:
                raise TreeError(errno.EIO, path, exc) from exc
            if piece is not None:
                self._zerocopy.reply_fd(bufpp, *piece)
                return 0
            pieces = self._read_pieces(path, size, offset, fi)
            self._zerocopy.reply_pieces(bufpp, pieces)
            reads = self.native_reads
            if reads is not None and reads.wanted(handle):  # (its next READs from C: kfs.fuse.native_read)
                reads.served_by_python(fi.fh, handle, offset, pieces)
            return 0

    def release(self, path: str, fi: Any) -> int:
        _keep_thread_state()
        with self._lock:
            handle = self._handles.pop(fi.fh, None)
        if self.native_reads is not None:
            self.native_reads.close(fi.fh)
        if handle is not None:
            handle.release()
        return 0

    # ---- libfuse setup --------------------------------------------------------------------------

    def init_with_config(self, conn: Any, config: Any) -> None:
        """libfuse3: ask for splice replies; short attr/entry timeouts, no negative caching, so
        partitions created after mounting appear at once and growing files grow."""
        if conn is not None:
            from kfs.fuse.zerocopy import FUSE_CAP_SPLICE_MOVE, FUSE_CAP_SPLICE_WRITE
            conn.want |= conn.capable & (FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE)
        if config is not None:
            for name, value in CACHE_DEFAULTS.items():
                if name not in self.given:
                    setattr(config, name, value)
            config.kernel_cache = 0  # keep_cache is decided per open (kernel_cache is refused at mount)
            log.info("attr_timeout %g s, entry_timeout %g s, negative_timeout %g s, direct_io %s",
                     config.attr_timeout, config.entry_timeout, config.negative_timeout,
                     "on" if config.direct_io else "off")
        log.info("mounted %s (%s)", ", ".join(self.tree.logdirs.paths), binding.BINDING_NAME)
        threading.Thread(target=_close_idle_files, args=(self._forget_idle_lines,), name="kfs-idle-closer",
                         daemon=True).start()
        if self.size_scan:
            self._scan_stop = start_size_scan(self.tree)

    def _forget_idle_lines(self, idle_seconds: float) -> int:
        """Drop the lines the cursors of decoded files open but unread for `idle_seconds` keep."""
        with self._lock:
            handles = list(self._handles.items())
        dropped = 0
        for fh, handle in handles:
            if isinstance(handle, DecodedHandle) and handle.cursor is not None:
                kept = handle.cursor.forget_kept(idle_seconds)  # (> 0: idle, its renderer too)
                if kept and self.native_reads is not None:
                    kept += self.native_reads.forget(fh)  # (the window's lines are mostly the same bytes)
                dropped += kept
        return dropped

    def destroy(self, path: str) -> None:
        if self._scan_stop is not None:
            self._scan_stop.set()
        with self._lock:
            handles, self._handles = list(self._handles.values()), {}
        if self.native_reads is not None:
            self.native_reads.close_all()
            log.info("decoded READs answered in C: %s", self.native_reads.summary())
        for handle in handles:
            handle.release()
        if not self.tree.cache.flush(CACHE_FLUSH_SECONDS):
            log.warning("unmounting before every decoded size was kept; the next mount computes the rest")
        self.tree.logdirs.close()

    # ---- read-only ------------------------------------------------------------------------------

    chmod = chown = create = link = mkdir = mknod = rename = rmdir = _read_only
    symlink = truncate = unlink = utimens = write = setxattr = removexattr = _read_only


def _close_idle_files(forget_idle_lines: Callable[[float], int]) -> None:
    """Indexes and segment files are opened on first use; close them once idle, so a mount of
    thousands of partitions holds few descriptors. And the lines decoded files left open keep."""
    while True:
        time.sleep(IDLE_CHECK_SECONDS)
        closed = OPEN_FILES.close_idle(IDLE_CLOSE_SECONDS)
        if closed:
            log.debug("closed %d idle segment files and indexes", closed)
        dropped = forget_idle_lines(IDLE_CLOSE_SECONDS)
        if dropped:
            log.debug("dropped %d bytes of lines kept by decoded files open but idle", dropped)
