"""The mount's compiled helpers (csrc/fuse/), each None when not built.

- `gather`: b"".join(pieces) into malloc'd memory without the GIL: a decoded read's reply for libfuse
  (kfs/fuse/zerocopy.py);
- `small_files_*`: the OPEN, READ and RELEASE of small files the mount rendered (`.value`, info.json)
  answered in C inside libfuse, Python's callbacks taking every other (kfs/fuse/fast_small.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kfs._native import extension

gather: Callable[[Sequence[bytes | memoryview]], int] | None = getattr(extension, "gather", None)
small_files_put: Callable[[str, bytes, float], None] | None = getattr(extension, "small_files_put", None)
small_files_clear: Callable[[], tuple[int, int]] | None = getattr(extension, "small_files_clear", None)
small_files_install: Callable[..., None] | None = getattr(extension, "small_files_install", None)
