"""READs of page-cached decoded files answered in C from lines rendered ahead: no GIL per request.

Two readers of two partitions through one mount got 74-83% of what two cores allow over one reader
where two mounts (two daemons) got 88-103%: a 1 MiB READ through mfusepy took the GIL ~12 times and
waited for it after each system call or copy while the other reader's Python held it (docs/
performance.md, "Two readers in one daemon"). Here, once a decoded file is read, a thread of its own
renders its lines ahead of the kernel's requests through the file's own cursor (`Cursor.read_pieces`,
the Python READ's very call, so the bytes and the errors are the Python path's), and hands the pieces
to the file's window in C (kfs/_native/csrc/fuse/read_windows.c), which libfuse's threads answer the
kernel's READs from (small_files.c's read_buf asks it first) without entering Python. What the window
does not hold goes to the Python path as before, which then tells the window (`served`): a read from
position 0, a seek, the end of the file or an error met by the renderer (which only stops; the READ
meets the error itself in Python, as it did without the window).

Only for decoded files opened page-cached: a direct_io file (damage known at open, `-o direct_io`, a
file changed under an open reader) answers a reader's own reads, short before damage, by the
FUSE_READ_LOCKOWNER rule (kfs.fuse.operations.reader_read), which stays in Python. And only where
kfs.fuse.fast_small put its callbacks in libfuse's table (read_buf is its); `-o native_read=no` keeps
every READ in Python.

What it changes for a reader whose file changes under it (kfs.views.cursor.Cursor's rule): a READ the
window holds is answered with lines rendered before the change, up to ~6 MiB of them (what the window
holds: up to 4 MiB ahead of the reader's furthest READ and 2 MiB behind it): lines that continue what
the reader has, as they were when rendered; the first READ past them meets the change in Python (EIO).
Those are also the memory a reader's window keeps, mostly the very chunks its cursor keeps; the mount's
idle closer drops both from a file left open unread.

The renderer renders up to 2 MiB a step (STEP): each step takes the GIL ~7 times (its wake, the cursor's
layout and file checks, the walker's calls), 3.4-3.7 a MiB where a Python READ of 1 MiB took 8.3-9.0
(perf uprobes on take_gil, 2026-11-27).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from kfs._native import fuse as native
from kfs.fuse.handles import DecodedHandle, Handle
from kfs.views.cursor import FUSE_MAX_READ, Piece

log = logging.getLogger("kfs.fuse")

STEP = 2 * FUSE_MAX_READ  # the most a renderer renders before publishing (READs waiting for it are answered then)
MIN_STEP = 64 * 1024


def available() -> bool:
    """The compiled windows are here (their READ side runs in kfs.fuse.fast_small's read_buf)."""
    return native.read_windows_open is not None


class NativeReads:
    """The windows of one mount's open decoded files, and their renderer threads."""

    def __init__(self, touch: Callable[[], None] = lambda: None, serving: Callable[[], bool] = lambda: True) -> None:
        self._touch = touch  # (the tree's foreground mark: the size scan yields to readers)
        self._serving = serving  # (libfuse's read_buf is small_files.c's: kfs.fuse.fast_small.serving)
        self._lock = threading.Lock()
        self._open: set[int] = set()
        self.served = 0  # READs the closed windows answered

    def wanted(self, handle: Handle) -> bool:
        """A handle whose READs a window may answer: a page-cached decoded file, on a mount whose
        read_buf asks the windows."""
        return (isinstance(handle, DecodedHandle) and not handle.direct_io and handle.cursor is not None
                and self._serving())

    def served_by_python(self, fh: int, handle: Handle, position: int, pieces: list[Piece]) -> None:
        """A READ of `handle` the Python path answered with `pieces`: its window follows (or is made,
        with its renderer, at the first READ)."""
        with self._lock:
            known = fh in self._open
        if known:
            assert native.read_windows_note is not None
            native.read_windows_note(fh, position, pieces)
            return
        assert native.read_windows_open is not None
        if not native.read_windows_open(fh, position + sum(map(len, pieces))):
            return  # (every window taken: this file stays on the Python path)
        with self._lock:
            self._open.add(fh)
        assert isinstance(handle, DecodedHandle)
        threading.Thread(target=self._render, args=(fh, handle), name=f"kfs-render-{fh}", daemon=True).start()

    def close(self, fh: int) -> None:
        """The file was released: its window goes (its renderer ends)."""
        with self._lock:
            if fh not in self._open:
                return
            self._open.discard(fh)
        assert native.read_windows_close is not None
        self.served += native.read_windows_close(fh)

    def forget(self, fh: int) -> int:
        """Drop the lines `fh`'s window holds (a file open but idle); returns how many bytes."""
        with self._lock:
            if fh not in self._open:
                return 0
        assert native.read_windows_forget is not None
        return native.read_windows_forget(fh)

    def summary(self) -> str:
        """What the windows did (the daemon logs it at unmount; tests read it there)."""
        assert native.read_windows_stats is not None
        _, size, waited, gave_up, missed = native.read_windows_stats()
        return (f"{self.served} ({size / 2**20:.1f} MiB; {waited} waited for the renderer, "
                f"{gave_up} gave up waiting; {missed} READs of windowed files in Python)")

    def close_all(self) -> None:
        with self._lock:
            open_ = list(self._open)
        for fh in open_:
            self.close(fh)

    def _render(self, fh: int, handle: DecodedHandle) -> None:
        """Render `handle`'s lines where its window is asked to reach, until the file is released."""
        try:
            self._render_until_closed(fh, handle)
        except BaseException:  # (a bug: its READs go to Python after their wait; the log says why)
            log.exception("renderer of handle %d failed", fh)
            raise

    def _render_until_closed(self, fh: int, handle: DecodedHandle) -> None:
        assert native.read_windows_await is not None and native.read_windows_publish is not None
        assert native.read_windows_stall is not None and handle.cursor is not None
        cursor = handle.cursor
        while True:
            asked = native.read_windows_await(fh)
            if asked is None:
                log.debug("renderer of handle %d: closed", fh)
                return
            position, target = asked
            step = min(STEP, max(MIN_STEP, target - position))
            try:
                self._touch()
                pieces = cursor.read_pieces(position, step, partial=False)
            except Exception as exc:  # (the READ that needs these lines meets the error in Python)
                log.debug("renderer of handle %d stopped at %d: %s", fh, position, exc)
                native.read_windows_stall(fh, position)
                continue
            served = sum(map(len, pieces))
            if served and not native.read_windows_publish(fh, position, pieces):
                continue  # (the window moved meanwhile: a seek)
            if served < step:  # the end of the file as it is now
                native.read_windows_stall(fh, position + served)
