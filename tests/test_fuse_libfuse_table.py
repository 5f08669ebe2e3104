"""What the small files' C path (kfs/fuse/fast_small.py, kfs/_native/csrc/fuse/small_files.c) assumes of
mfusepy and libfuse 3, each checked without mounting: the mfusepy major version it was written against,
libfuse 3's layouts in mfusepy's ctypes declarations, and the one call through the module global
`fuse_main_real` that hands libfuse the table. An mfusepy upgrade that breaks one fails here, where a
mount would have run C callbacks in a table laid out otherwise (or silently kept Python's)."""

from __future__ import annotations

import ctypes
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from kfs.fuse import binding, fast_small

pytestmark = pytest.mark.skipif(binding.module.__name__ != "mfusepy" or binding.LIBFUSE_MAJOR != 3,
                                reason="the C path is for mfusepy on libfuse 3 only")

# struct fuse_operations of libfuse 3 (fuse.h, FUSE_USE_VERSION 3x), member by member: the order
# fixes every offset small_files.c is handed.
LIBFUSE3_OPERATIONS = (
    "getattr", "readlink", "mknod", "mkdir", "unlink", "rmdir", "symlink", "rename", "link", "chmod", "chown",
    "truncate", "open", "read", "write", "statfs", "flush", "release", "fsync", "setxattr", "getxattr",
    "listxattr", "removexattr", "opendir", "readdir", "releasedir", "fsyncdir", "init", "destroy", "access",
    "create", "lock", "utimens", "bmap", "ioctl", "poll", "write_buf", "read_buf", "flock", "fallocate",
)


def test_mfusepy_is_the_major_version_the_c_path_was_written_for() -> None:
    """fast_small.MFUSEPY_MAJOR is the mfusepy whose internals the patching relies on; a new major
    version is answered in Python (available() is false) until this is checked again and moved."""
    assert int(version("mfusepy").split(".")[0]) == fast_small.MFUSEPY_MAJOR
    assert fast_small.mfusepy_major() == fast_small.MFUSEPY_MAJOR


def test_mfusepy_declares_libfuse3s_operations_and_file_info() -> None:
    """The members small_files.c patches and reads sit where libfuse 3 has them."""
    ops = binding.module.fuse_operations
    names = [field[0] for field in ops._fields_]
    assert names[:len(LIBFUSE3_OPERATIONS)] == list(LIBFUSE3_OPERATIONS)
    pointer = ctypes.sizeof(ctypes.c_void_p)
    for member in ("open", "read_buf", "release"):
        assert getattr(ops, member).offset == LIBFUSE3_OPERATIONS.index(member) * pointer, member
    info = binding.module.fuse_file_info
    assert (info.flags.offset, info.flags.size) == (0, 4)  # int flags
    assert info.direct_io.offset == 4  # the bitfield word after flags: writepage is bit 0, direct_io bit 1
    assert (info.direct_io.size & 0xFFFF, info.direct_io.size >> 16) == (1, 1)  # (ctypes: bit offset, bit width)
    assert (info.fh.offset, info.fh.size) == (16, 8)  # after the 32 bits of padding2


def test_fuse_hands_its_table_to_the_module_global_fuse_main_real(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """FUSE() calls binding.module.fuse_main_real (looked up when it runs: the global fast_small wraps)
    once, with a pointer to its fuse_operations holding the callbacks of open, read_buf and release."""
    calls: list[tuple[Any, int]] = []

    def fuse_main_real(argc: Any, argv: Any, operations: Any, size: int, user_data: Any) -> int:
        calls.append((operations, size))
        return 1  # (an error: FUSE raises it, nothing is mounted)

    class Ops(binding.Operations):  # type: ignore[misc]
        use_ns = True

        def open(self, path: str, flags: int) -> int:
            return 0

        def read_buf(self, path: str, size: int, offset: int, fh: int) -> bytes:
            return b""

        def release(self, path: str, fh: int) -> int:
            return 0

    monkeypatch.setattr(binding.module, "fuse_main_real", fuse_main_real)
    with pytest.raises(RuntimeError):
        binding.FUSE(Ops(), str(tmp_path), foreground=True)
    assert len(calls) == 1
    operations, size = calls[0]
    table = operations.contents
    assert isinstance(table, binding.module.fuse_operations) and size == ctypes.sizeof(table)
    for member in ("open", "read_buf", "release"):
        assert ctypes.cast(getattr(table, member), ctypes.c_void_p).value, member
