"""`MOUNTPOINT/.groups/`: `kfs groups` as files (docs/spec.md section 8).

    .groups/                        lists <group>.json for every group at the log end, and all.jsonl
    .groups/all.jsonl               `kfs groups --json` at the log end
    .groups/<group>.json            one group at the log end: {"group", "at", "state", "offsets": [...]}
    .groups/<group>/at/<T>.json     the same as of T (milliseconds or ISO-8601)
    .groups/all/at/<T>.jsonl        `kfs groups --json --at T`

`.groups` is looked up, not listed at the root (so `grep -r` and `find` over the mount do not
replay the offsets), and `at/` lists nothing: its names are times. `<group>` is the group id as a
name the tree can carry (`file_name`: one name per id, and back; the README says how). Every file is
rendered when stat'ed, so st_size is exact, and the rendering is reused for the kernel's attribute
timeout. `<group>/` exists for every group a record names (a deleted group too: it may have had
offsets at an earlier T).
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import threading
import time

from kfs.fuse.access import Access, access_of, as_directory, as_search, narrow
from kfs.fuse.handles import Attr, BytesHandle, Handle, TreeError
from kfs.groups.reader import GroupsReader
from kfs.groups.render import group_json, json_lines
from kfs.groups.replay import offsets_partitions
from kfs.groups.state import Snapshot
from kfs.storage import BadSpec, LogDirs
from kfs.storage.specs import parse_time_spec
from kfs.views.pacing import Foreground

GROUPS_DIR = ".groups"
ALL = "all"
SMALL_TTL = 1.0  # seconds a rendering is reused (the kernel's attribute timeout)


NAME_MAX = 255  # bytes in a directory entry's name (FUSE_NAME_MAX; a longer one failed the whole listing)
_NAME_BYTES = NAME_MAX - len(".json")  # a group's name, so that its file's name fits too
_ESCAPES = {"%": "%25", "/": "%2F", "\0": "%00"}
_UNESCAPES = {"25": "%", "2F": "/", "00": "\0", "2E": "."}
_EMPTY = "%"  # the empty id's name (a lone % is no escape)
_HASHED = "%~"  # in a long id's name: the escaped id's first bytes, this, then HASH_HEX hex digits of its hash
_HASH_HEX = 32  # of the SHA-256 of the id's UTF-8 bytes: 128 bits


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def file_name(group: str) -> str:
    """A group id as a name in `.groups/` (its directory; its file is this + `.json`), one name per id:
    `%`, `/` and NUL written `%25`, `%2F`, `%00`; a leading `.` (so `.`, `..` and hidden names) and the
    `.` of a trailing `.json` or `.jsonl` (a directory's name would read as a file's) written `%2E`; the
    empty id `%`. An id whose name would pass NAME_MAX bytes with `.json` is its name's first bytes
    (whole characters and escapes) then `%~` and 32 hex digits of the SHA-256 of the id's UTF-8 bytes."""
    if not group:
        return _EMPTY
    pieces = [_ESCAPES.get(c, c) for c in group]
    if group[0] == ".":
        pieces[0] = "%2E"
    for suffix in (".jsonl", ".json"):
        if group.endswith(suffix):
            pieces[len(group) - len(suffix)] = "%2E"
            break
    name = "".join(pieces)
    if len(_utf8(name)) <= _NAME_BYTES:
        return name
    budget, used, kept = _NAME_BYTES - len(_HASHED) - _HASH_HEX, 0, []
    for piece in pieces:
        used += len(_utf8(piece))
        if used > budget:
            break
        kept.append(piece)
    return "".join(kept) + _HASHED + hashlib.sha256(_utf8(group)).hexdigest()[:_HASH_HEX]


def group_name(name: str) -> str | None:
    """The id `file_name` gave `name`, or None: a long id's name (found among the ids a record names:
    GroupsTree), or a name file_name gives no id (`%2f` for `%2F`, say: one name per id)."""
    if name == _EMPTY:
        return ""
    if _HASHED in name:
        return None
    out = []
    i = 0
    while i < len(name):
        c = name[i]
        if c == "%":
            c = _UNESCAPES.get(name[i + 1:i + 3], "")
            if not c:
                return None
            i += 2
        out.append(c)
        i += 1
    group = "".join(out)
    return group if file_name(group) == name else None


class GroupsTree:
    """The paths under `.groups/` (given without it, as parts)."""

    def __init__(self, logdirs: LogDirs, foreground: Foreground | None = None) -> None:
        self.logdirs = logdirs
        self.reader = GroupsReader(logdirs)
        self.foreground = foreground or Foreground()
        self._rendered: dict[str, tuple[float, Attr, bytes]] = {}
        self._long_names: tuple[object, dict[str, str]] = (None, {})  # (snapshot, long ids by name) (_group)
        self._read_from: tuple[float, Access, os.stat_result, os.stat_result] | None = None  # see _access
        self._lock = threading.Lock()

    def _snapshot(self, at: int | None = None, group: str | None = None) -> Snapshot:
        """The reader's snapshot; the mount's background size scan pauses while it is made (the first
        replay of a large `__consumer_offsets` takes seconds: it gets the cores, kfs.views.pacing)."""
        with self.foreground.working():
            return self.reader.snapshot(at, group)

    def exists(self) -> bool:
        return bool(offsets_partitions(self.logdirs))

    def getattr(self, parts: list[str], path: str) -> Attr:
        if not self.exists():
            raise TreeError(errno.ENOENT, path)
        if self._is_dir(parts, path):
            return self._dir_attr()
        return self._render(parts, path)[0]

    def readdir(self, parts: list[str], path: str) -> list[str]:
        if not self._is_dir(parts, path):
            self.getattr(parts, path)
            raise TreeError(errno.ENOTDIR, path)
        if not parts:
            snapshot = self._snapshot()
            return [file_name(g) + ".json" for g in snapshot.group_names()] + [ALL + ".jsonl"]
        if len(parts) == 1:
            return ["at"]
        return []  # at/: names are times, looked up

    def open(self, parts: list[str], path: str) -> Handle:
        if self._is_dir(parts, path):
            raise TreeError(errno.EISDIR, path)
        attr, data = self._render(parts, path)
        return BytesHandle(attr, data=data)

    # ---- names ----------------------------------------------------------------------------------

    def _is_dir(self, parts: list[str], path: str) -> bool:
        """Whether the path is a directory; ENOENT for a group directory no record names.
        A name ending in .json or .jsonl is a file (a group called "x.json" has no at/ here)."""
        if not parts:
            return self.exists()
        name = parts[0]
        if len(parts) == 1 and name.endswith((".json", ".jsonl")):
            return False
        if len(parts) > 2 or (len(parts) == 2 and parts[1] != "at"):
            return False
        if name == ALL:
            return True
        self._group(name, path)
        return True

    def _group(self, name: str, path: str) -> str:
        """The group id `name` stands for (file_name), if a record names it; else ENOENT."""
        snapshot = self._snapshot()
        group = group_name(name)
        if group is None and _HASHED in name:
            kept, long_names = self._long_names
            if kept is not snapshot:
                long_names = {}
                for known in snapshot.known:
                    known_name = file_name(known)
                    if _HASHED in known_name:
                        long_names[known_name] = known
                self._long_names = (snapshot, long_names)
            group = long_names.get(name)
        if group is None or group not in snapshot.known:
            raise TreeError(errno.ENOENT, path)
        return group

    def _render(self, parts: list[str], path: str) -> tuple[Attr, bytes]:
        cached = self._rendered.get(path)
        if cached and time.monotonic() - cached[0] < SMALL_TTL:
            return cached[1], cached[2]
        data = self._content(parts, path)
        attr = self._file_attr(len(data))
        with self._lock:
            if len(self._rendered) > 1024:
                self._rendered.clear()
            self._rendered[path] = (time.monotonic(), attr, data)
        return attr, data

    def _content(self, parts: list[str], path: str) -> bytes:
        if len(parts) == 1 and parts[0] == ALL + ".jsonl":
            return "".join(json_lines(self._snapshot())).encode()
        if len(parts) == 1 and parts[0].endswith(".json"):
            return self._group_doc(self._snapshot(), self._group(parts[0][:-len(".json")], path), path)
        if len(parts) == 3 and parts[1] == "at":
            name = parts[2]
            if parts[0] == ALL and name.endswith(".jsonl"):
                return "".join(json_lines(self._snapshot(self._time(name[:-len(".jsonl")], path)))).encode()
            if name.endswith(".json"):
                group = self._group(parts[0], path)
                at = self._time(name[:-len(".json")], path)
                return self._group_doc(self._snapshot(at, group), group, path)
        raise TreeError(errno.ENOENT, path)

    @staticmethod
    def _group_doc(snapshot: Snapshot, group: str, path: str) -> bytes:
        if group not in snapshot.groups and group not in snapshot.offsets:
            raise TreeError(errno.ENOENT, path)
        return group_json(snapshot, group)

    @staticmethod
    def _time(spec: str, path: str) -> int:
        try:
            return parse_time_spec(spec)
        except BadSpec as exc:
            raise TreeError(errno.ENOENT, path) from exc

    # ---- attributes -----------------------------------------------------------------------------

    def _access(self) -> tuple[Access, os.stat_result, os.stat_result]:
        """What every file here is made from, no more open than any of it (kfs.fuse.access): the
        combined access of the log dirs and directories of the `__consumer_offsets` partitions (their
        search bits: kfs.fuse.access.as_search) and of their segments (as a directory's: a group's name
        listed is read from them); the stat of the directory that comes first (owner, times of the
        directories); the newest segment's stat (the files change when it does). Taken at most once
        per SMALL_TTL: it stats every segment."""
        now = time.monotonic()
        kept = self._read_from
        if kept is not None and now - kept[0] < SMALL_TTL:
            return kept[1], kept[2], kept[3]
        plogs = offsets_partitions(self.logdirs)
        first = os.stat(os.path.dirname(plogs[0].path) if plogs else self.logdirs.paths[0])
        acc, newest = as_search(access_of(first)), os.stat(self.logdirs.paths[0])
        logdirs_seen: set[str] = set()
        for plog in plogs:
            logdir = os.path.dirname(plog.path)
            if logdir not in logdirs_seen:
                logdirs_seen.add(logdir)
                acc = narrow(acc, *as_search(access_of(os.stat(logdir))))
            acc = narrow(acc, *as_search(access_of(os.stat(plog.path))))
            for segment in plog.segments():
                try:
                    st = os.lstat(segment.log_path)
                except FileNotFoundError:  # deleted since the listing: not read any more
                    continue
                acc = narrow(acc, *as_directory(access_of(st)))
                if st.st_mtime_ns > newest.st_mtime_ns:
                    newest = st
        self._read_from = (now, acc, first, newest)
        return acc, first, newest

    def _dir_attr(self) -> Attr:
        acc, first, _newest = self._access()
        attr = Attr.of_dir(first)
        attr.mode = acc[2]
        return attr

    def _file_attr(self, size: int) -> Attr:
        acc, first, newest = self._access()
        return Attr(stat.S_IFREG | (stat.S_IMODE(acc[2]) & 0o444), size, first.st_uid, first.st_gid,
                    newest.st_mtime_ns, newest.st_ctime_ns, newest.st_atime_ns)
