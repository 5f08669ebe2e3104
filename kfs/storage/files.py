"""The one way kfs opens a file of a log dir: segments (`.log`), indexes (`.index`, `.timeindex`,
`.txnindex`) and checkpoints (`*-checkpoint`, `meta.properties`), only when they are regular files.

Kafka writes nothing else into a log dir. Anything else under such a name was put there by hand or by
a tool, and opening it would do harm: a FIFO blocks open() until a writer comes (a daemon thread,
and every client waiting on it, stuck for good), a device may act on being opened, a directory or
a socket has no bytes to give. A symbolic link is refused too, dangling or not, wherever it points:
kfs runs as root on broker hosts, and a link would make it read (and serve through the mount, or
echo in an error) a file outside the log dir, such as /etc/shadow; Kafka never makes one, so a copy
that holds links is made whole with `cp -L`. Directories on the way (the log dir, a partition
directory) may be links, as a log dir mounted elsewhere is.

`open_regular` looks before it opens (`lstat`: a device is never opened), then opens with
O_NOFOLLOW (a link put in place meanwhile fails), O_NONBLOCK (a FIFO put in place meanwhile does
not block) and O_CLOEXEC, checks what it opened (`fstat`), and clears O_NONBLOCK on the regular
file it keeps. Anything else is `NotARegularFile`: one sentence, "<path> is a FIFO, not a regular
file: kfs reads only regular files". Listings notice odd entries by their directory entry type
(`scandir`'s d_type, an `lstat` only where the file system gives none), without opening them:
`entry_refusal`.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable

from kfs.storage.errors import CorruptLogError, KfsError

_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symbolic link"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def kind_of(mode: int) -> str:
    """What a file of `mode` is, as the sentence says it: "a FIFO", "a directory", ..."""
    return next((name for test, name in _KINDS if test(mode)), "not a file kfs knows")


class NotARegularFile(CorruptLogError):
    """A path of a log dir that is not a regular file. For a segment it is damage at its first byte
    (a CorruptLogError at position 0: reads end there, after the records before it); for an index
    or a checkpoint, callers take the file as unusable or missing and say so."""

    def __init__(self, path: str, mode: int) -> None:
        reason = f"is {kind_of(mode)}, not a regular file: kfs reads only regular files"
        KfsError.__init__(self, f"{path} {reason}")
        self.path = path
        self.position = 0
        self.reason = reason
        self.mode = mode


def refusal(path: str, mode: int) -> NotARegularFile | None:
    """NotARegularFile for a file of `mode` (an lstat's), None for a regular file."""
    return None if stat.S_ISREG(mode) else NotARegularFile(path, mode)


def refusals(paths: Iterable[tuple[str, str]]) -> list[str]:
    """For each (path, what is done instead) whose file is there but is not a regular file (its
    entry's type: nothing is opened), a sentence saying so and what is done instead."""
    found = []
    for path, instead in paths:
        try:
            refused = refusal(path, os.lstat(path).st_mode)
        except OSError:
            continue
        if refused is not None:
            found.append(f"{refused}; {instead}")
    return found


def entry_refusal(entry: os.DirEntry) -> NotARegularFile | None:
    """The directory entry's refusal, from its type (no open; an lstat only when the file system
    gives no type, or to name an odd one); None for a regular file. FileNotFoundError when it is gone."""
    if entry.is_file(follow_symlinks=False):
        return None
    return refusal(entry.path, entry.stat(follow_symlinks=False).st_mode)


def open_regular(path: str, follow: bool = False) -> int:
    """A read-only descriptor of `path` if it is a regular file (module docstring); NotARegularFile
    otherwise. OSError as open() raises it (FileNotFoundError, PermissionError, ...). `follow`: a
    symbolic link is followed (only for files a user names on the command line, `kfs dump`'s)."""
    found = refusal(path, (os.stat(path) if follow else os.lstat(path)).st_mode)
    if found is not None:
        raise found
    try:
        fd = os.open(path, _FLAGS & ~os.O_NOFOLLOW if follow else _FLAGS)
    except OSError as e:
        if e.errno == errno.ELOOP:  # replaced by a symbolic link since the lstat
            raise NotARegularFile(path, stat.S_IFLNK) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        found = refusal(path, mode)
        if found is not None:
            raise found
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: str, limit: int | None = None, follow: bool = False) -> bytes:
    """The bytes of a small file (a checkpoint, a `.txnindex`) opened by `open_regular`; at most
    `limit` bytes when given."""
    fd = open_regular(path, follow)
    try:
        chunks = []
        left = limit
        while left is None or left > 0:
            chunk = os.read(fd, 1 << 20 if left is None else min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            if left is not None:
                left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
