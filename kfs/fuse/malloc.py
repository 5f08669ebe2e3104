"""The daemon's C heap: two malloc arenas, and read buffers reused rather than mapped anew.

libfuse runs up to ten worker threads, and every decoded read reply is a malloc'd block of up to
256 KiB (kfs.fuse.zerocopy). glibc gives each thread an arena of its own (up to 8 per core), and
after the first such block is freed it raises its mmap threshold past that size, so later replies
come from the arenas, which keep what they grew to: the live-writer soak's daemon grew ~17 MB a
minute that way (tests/soak; with MALLOC_ARENA_MAX=2 and a fixed threshold it stayed flat).
Setting the threshold explicitly (mallopt) turns glibc's adjustment off. It is set at 8 MiB, above
a reply (256 KiB) and a segment read window (4 MiB, kfs.storage.segment): a block mmapped and
unmapped per use cost a page fault per page (and zeroed pages, and a TLB shootdown at munmap), and
perf of a first `cat messages.jsonl` (478 MiB of lines) through the mount showed it: at glibc's
128 KiB, 1.67 s; at 1 MiB (replies reused), 1.43 s; at 8 MiB (windows reused too) the daemon's
system time 0.37 -> 0.25 s. And glibc gives freed memory at the top of a heap back past 128 KiB
(M_TRIM_THRESHOLD), which the next read faulted in again: up to 8 MiB of it is kept. The daemon's
RSS after such a read: ~60 MB (45 MB at 1 MiB). A no-op off glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger("kfs")

M_MMAP_THRESHOLD = -3  # glibc's malloc.h
M_ARENA_MAX = -8
M_TRIM_THRESHOLD = -1
MMAP_THRESHOLD = 8 * 1024 * 1024  # above a read reply (256 KiB) and a segment read window (4 MiB): heap blocks, reused
ARENA_MAX = 2
TRIM_THRESHOLD = 8 << 20  # freed heap kept for the next reads and windows (32 MiB: no faster)


def bound_heap() -> bool:
    """Call once, before the daemon's threads start; True when glibc took the settings."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    settings = ((M_MMAP_THRESHOLD, MMAP_THRESHOLD), (M_ARENA_MAX, ARENA_MAX), (M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    done = all([mallopt(option, value) for option, value in settings])
    if not done:
        log.debug("mallopt did not take the daemon's heap settings")
    return done
