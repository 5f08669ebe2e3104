"""The one place kfs imports a FUSE binding.

kfs is written against the fusepy API (`FUSE`, `Operations`, `FuseOSError`) and runs on
mfusepy, the maintained fork, loaded on **libfuse3**: libfuse3 gets 256 KiB read requests from
the kernel where libfuse2 gets 128 KiB (half the Python calls), and its `read_buf` takes an
fd-backed `fuse_bufvec`, so raw segment bytes are spliced by libfuse from the segment file to
/dev/fuse and never enter Python (README, "How it performs", has the measurements). mfusepy
loads libfuse2 when both are installed, so we ask it for fuse3 first; libfuse2 (mfusepy or
fusepy) still works, through plain `read`.
"""

from __future__ import annotations

import os
from ctypes.util import find_library
from typing import Any


class BindingError(ImportError):
    """No usable libfuse: the message is the one sentence the CLI prints."""


MISSING = ("kfs needs libfuse to mount: install the fuse3 package (Debian/Ubuntu: apt install fuse3) "
           "and pip install mfusepy; `kfs ls/cat/locate` work without it.")


def _load() -> Any:
    if not (os.environ.get("FUSE_LIBRARY_PATH") or os.environ.get("FUSE_LIBRARY_NAME")) and find_library("fuse3"):
        os.environ["FUSE_LIBRARY_NAME"] = "fuse3"
    try:
        import mfusepy as fuse_module
    except (ImportError, OSError, AttributeError):
        try:
            import fuse as fuse_module  # fusepy, libfuse2
        except (ImportError, OSError, EnvironmentError, AttributeError) as exc:  # noqa: UP024
            raise BindingError(MISSING) from exc
    return fuse_module


_fuse = _load()

module = _fuse  # the binding's module itself (kfs.fuse.fast_small wraps its fuse_main_real)
FUSE = _fuse.FUSE
Operations = _fuse.Operations
FuseOSError = _fuse.FuseOSError
fuse_get_context = _fuse.fuse_get_context
#: libfuse major version actually loaded (3 on the fast path).
LIBFUSE_MAJOR: int = int(getattr(_fuse, "fuse_version_major", 2))
#: True when read_buf (fd-backed replies, no bytes through Python) can be offered to libfuse.
HAS_READ_BUF: bool = _fuse.__name__ == "mfusepy" and LIBFUSE_MAJOR == 3
BINDING_NAME: str = f"{_fuse.__name__} on libfuse{LIBFUSE_MAJOR}"
#: mfusepy takes times as integer nanoseconds when the Operations class sets `use_ns`.
USE_NS: bool = _fuse.__name__ == "mfusepy"
