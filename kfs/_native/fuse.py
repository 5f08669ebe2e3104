"""The mount's compiled helpers (csrc/fuse/): each the function of _speedups.pyi, or None unbuilt.

- `gather`: b"".join(pieces) into malloc'd memory without the GIL: a decoded read's reply for libfuse
  (kfs/fuse/zerocopy.py);
- `small_files_*`: the OPEN, READ and RELEASE of small files the mount rendered (`.value`, info.json)
  answered in C inside libfuse, Python's callbacks taking every other (kfs/fuse/fast_small.py, which
  says what of mfusepy and libfuse small_files.c assumes);
- `read_windows_*`: a page-cached decoded file's READs answered in C from lines rendered ahead by a
  Python thread (kfs/fuse/native_read.py), through small_files.c's read_buf.
"""

from __future__ import annotations

from kfs._native import BUILT, extension

gather = extension.gather if BUILT else None
small_files_put = extension.small_files_put if BUILT else None
small_files_clear = extension.small_files_clear if BUILT else None
small_files_install = extension.small_files_install if BUILT else None
read_windows_open = extension.read_windows_open if BUILT else None
read_windows_publish = extension.read_windows_publish if BUILT else None
read_windows_note = extension.read_windows_note if BUILT else None
read_windows_await = extension.read_windows_await if BUILT else None
read_windows_stall = extension.read_windows_stall if BUILT else None
read_windows_close = extension.read_windows_close if BUILT else None
read_windows_forget = extension.read_windows_forget if BUILT else None
read_windows_stats = extension.read_windows_stats if BUILT else None
