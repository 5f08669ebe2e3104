"""OPEN, READ and RELEASE of small rendered files answered in C, inside libfuse.

A `cat offset/<N>.value` is four requests: LOOKUP renders the value (Python: the lookup), then OPEN,
READ and RELEASE hand out bytes already rendered. Through mfusepy each is a ctypes callback into
Python, which costs more than the request does (a minimal mfusepy file system: ~30 us a request over
a C one here). `kfs/_native/csrc/fuse/small_files.c` answers those three for a file the tree rendered
within its reuse time (`tree.SMALL_TTL`, the rule of `KfsTree._fresh_small`) from a copy the tree
handed it (`keep`), and passes every other request to mfusepy's callbacks, kept as they were: it is
a cache in front of the Python path, whose miss is the Python path. Its read_buf also answers the
READs of page-cached decoded files from their windows (kfs.fuse.native_read, read_windows.c) first.

`installed()` puts the C callbacks in the operations table mfusepy gives `fuse_main_real`, by
wrapping that function for the one call `FUSE()` makes. Not used with `kfs mount -v` (the C path
would not log its requests), with libfuse2, with another major version of mfusepy than the one below,
or without the compiled extension.

Why here, and what it assumes: the patching is the mount's business (the fuse layer), and it leans on
mfusepy's internals, written against mfusepy 3.1.1 on libfuse 3 (MFUSEPY_MAJOR):
- `FUSE.__init__` fills a ctypes `fuse_operations` with its callbacks and hands a pointer to it to
  the module global `fuse_main_real(argc, argv, ops, size, user_data)`, once: wrapping that global is
  the one moment the table can be changed (libfuse copies it in fuse_new, inside that call);
- mfusepy's ctypes `fuse_operations` and `fuse_file_info` are libfuse 3's layouts: the offsets of
  `open`, `read_buf`, `release`, `fh`, `flags` and the `direct_io` bit are read from them and handed to
  small_files.c, which writes and reads libfuse's structs there.
tests/test_fuse_libfuse_table.py fails when either stops holding (an mfusepy upgrade), before a mount
would run C callbacks in a table laid out otherwise.
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


#: The mfusepy major version whose FUSE.__init__ and ctypes layouts the patching was written against
#: (3.1.1); another major version is answered in Python.
MFUSEPY_MAJOR = 3


def mfusepy_major() -> int | None:
    """The installed mfusepy's major version (None: not installed, or no version to read)."""
    from importlib.metadata import PackageNotFoundError, version  # (not at import: ~10 ms a `kfs cat`)

    try:
        return int(version("mfusepy").split(".")[0])
    except (PackageNotFoundError, ValueError):
        return None


def available() -> bool:
    """The compiled extension is here and libfuse3 is driven by the mfusepy it was written against."""
    return native.small_files_install is not None and binding.HAS_READ_BUF and mfusepy_major() == MFUSEPY_MAJOR


def serving(tree: object) -> bool:
    """Whether libfuse's table holds the C callbacks for `tree`'s mount (its read_buf also answers
    decoded files' windows: kfs.fuse.native_read)."""
    return _owner[0] is tree


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
