"""OPEN, READ and RELEASE of small rendered files answered in C, inside libfuse.

A `cat offset/<N>.value` is four requests: LOOKUP renders the value (Python: the lookup), then OPEN,
READ and RELEASE hand out bytes already rendered. Through mfusepy each is a ctypes callback into
Python, which costs more than the request does (a minimal mfusepy file system: ~30 us a request over
a C one here). `kfs/_native/csrc/fuse/small_files.c` answers those three for a file the tree rendered
within its reuse time (`tree.SMALL_TTL`, the rule of `KfsTree._fresh_small`) from a copy the tree
handed it (`keep`), and passes every other request to mfusepy's callbacks, kept as they were: it is
a cache in front of the Python path, whose miss is the Python path.

`installed()` puts the C callbacks in the operations table mfusepy gives `fuse_main_real`, by
wrapping that function for the one call `FUSE()` makes. Not used with `kfs mount -v` (the C path
would not log its requests), with libfuse2 or without the compiled extension.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
from collections.abc import Iterator
from typing import Any

from kfs._native import fuse as native
from kfs.fuse import binding

log = logging.getLogger("kfs.fuse")

# The tree whose mount has the C path (one per process: libfuse's table is patched once; a second
# mount in the same process keeps Python's callbacks, and its files must not enter the C table).
_owner: list[object | None] = [None]


def available() -> bool:
    """The compiled extension is here and libfuse3 is driven by mfusepy (its table is known)."""
    return native.small_files_install is not None and binding.HAS_READ_BUF


def keep(tree: object, path: str, data: bytes, rendered: float) -> None:
    """A small file `tree` rendered at `rendered` (time.monotonic()), for the C path when it is the
    tree of the mount that has it."""
    if _owner[0] is tree:
        assert native.small_files_put is not None
        # (a name that is not UTF-8 or holds a NUL, which libfuse cannot have given as it is: Python serves it)
        with contextlib.suppress(UnicodeEncodeError, ValueError):
            native.small_files_put(path, data, rendered)


@contextlib.contextmanager
def installed(tree: object, reuse_seconds: float, all_direct_io: bool) -> Iterator[None]:
    """Within it, `binding.FUSE(...)` starts libfuse with the C open, read_buf and release in place,
    serving the small files `tree` keeps."""
    module = binding.module
    original = module.fuse_main_real

    def fuse_main_real(argc: Any, argv: Any, operations: Any, size: Any, user_data: Any) -> Any:  # (libfuse's)
        table, info = module.fuse_operations, module.fuse_file_info
        assert native.small_files_install is not None
        try:
            native.small_files_install(
                ctypes.addressof(operations.contents), table.open.offset, table.read_buf.offset,
                table.release.offset, info.fh.offset, info.flags.offset, info.direct_io.offset,
                info.direct_io.size & 0xFFFF, reuse_seconds, all_direct_io)
            _owner[0] = tree
        except (AttributeError, RuntimeError, TypeError, ValueError) as exc:  # (installed already; a binding
            # laid out otherwise)
            log.warning("small files are answered in Python: %s", exc)
        return original(argc, argv, operations, size, user_data)

    module.fuse_main_real = fuse_main_real
    try:
        yield
    finally:
        module.fuse_main_real = original
        if _owner[0] is tree:
            _owner[0] = None
            assert native.small_files_clear is not None
            opens, reads = native.small_files_clear()
            log.info("small files answered in C: %d opens, %d reads", opens, reads)
