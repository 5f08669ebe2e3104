"""Replies to libfuse3's `read_buf` that keep segment bytes out of Python.

libfuse's `read_buf` hands the filesystem a `struct fuse_bufvec **` to fill (fuse_common.h):

    struct fuse_buf    { size_t size; enum fuse_buf_flags flags; void *mem; int fd; off_t pos; };
    struct fuse_bufvec { size_t count; size_t idx; size_t off; struct fuse_buf buf[1]; };

A buffer flagged FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK names a file descriptor and a position:
libfuse then moves the bytes itself, with splice(2) from the segment file through a pipe
into /dev/fuse when the kernel granted FUSE_CAP_SPLICE_WRITE, else with a pread in C.
libfuse frees the vector with free() after replying (and frees `mem` of non-fd buffers),
so both must come from libc's malloc. mfusepy declares `buf` as a pointer, not the inline
array it is, so the struct is declared here.

We always reply with a one-buffer vector (an fd range inside one segment, or, for the rare
read that crosses a segment boundary, a malloc'd copy), which keeps us independent of the
size of `struct fuse_buf` in future libfuse versions; the allocation is padded with zeros
for fields they may append.
"""

from __future__ import annotations

import ctypes

from kfs._native import fuse as native
from kfs.views.decoded import Piece

FUSE_BUF_IS_FD = 1 << 1
FUSE_BUF_FD_SEEK = 1 << 2
FUSE_CAP_SPLICE_WRITE = 1 << 7
FUSE_CAP_SPLICE_MOVE = 1 << 8


class FuseBuf(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("flags", ctypes.c_int), ("mem", ctypes.c_void_p),
                ("fd", ctypes.c_int), ("pos", ctypes.c_int64)]


class FuseBufvec(ctypes.Structure):
    _fields_ = [("count", ctypes.c_size_t), ("idx", ctypes.c_size_t), ("off", ctypes.c_size_t),
                ("buf", FuseBuf * 1)]


_libc = ctypes.CDLL(None)
_libc.calloc.restype = ctypes.c_void_p
_libc.calloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
_libc.malloc.restype = ctypes.c_void_p
_libc.malloc.argtypes = [ctypes.c_size_t]
_libc.free.restype = None
_libc.free.argtypes = [ctypes.c_void_p]
_PADDED = ctypes.sizeof(FuseBufvec) + 64


def _new_vector(bufpp: object) -> FuseBuf:
    address = _libc.calloc(1, _PADDED)
    if not address:
        raise MemoryError("calloc failed for fuse_bufvec")
    vector = FuseBufvec.from_address(address)
    vector.count = 1
    ctypes.cast(bufpp, ctypes.POINTER(ctypes.c_void_p))[0] = address  # type: ignore[arg-type]
    return vector.buf[0]


def reply_fd(bufpp: object, fd: int, position: int, size: int) -> None:
    """Answer a read_buf with `size` bytes of `fd` at `position`; libfuse moves them."""
    buf = _new_vector(bufpp)
    buf.size = size
    buf.flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK
    buf.fd = fd
    buf.pos = position


def reply_bytes(bufpp: object, data: bytes) -> None:
    """Answer a read_buf with bytes made in Python (copied once into malloc'd memory)."""
    buf = _new_vector(bufpp)
    if data:
        mem = _libc.malloc(len(data))
        if not mem:
            raise MemoryError("malloc failed for a read reply")
        ctypes.memmove(mem, data, len(data))
        buf.mem = mem
    buf.size = len(data)


def reply_pieces(bufpp: object, pieces: list[Piece]) -> None:
    """Answer a read_buf with the pieces one after another: joined straight into malloc'd memory,
    without the GIL (`gather`), where `reply_bytes(b"".join(pieces))` copies twice, the join with
    it (two readers of one mount waited on each other's joins)."""
    if native.gather is None:
        reply_bytes(bufpp, b"".join(pieces))
        return
    size = sum(map(len, pieces))
    mem = native.gather(pieces)
    try:
        buf = _new_vector(bufpp)
    except MemoryError:
        _libc.free(mem)
        raise
    buf.mem = mem or None
    buf.size = size
