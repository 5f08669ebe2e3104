"""`MOUNTPOINT/.schemas/`: the schema registry's state (docs/spec.md section 9) as files.

    .schemas/all.jsonl                          `kfs schemas --json`: one object per subject version
    .schemas/ids/<id>.avsc|.json|.proto         the schema behind each id (deleted ones too: old records use them)
    .schemas/subjects/<subject>/<version>.avsc  each subject version's schema (.json, .proto by its type)

The state is the one the mount decodes with (read when mounting). `.schemas` is looked up, not
listed at the root, so `grep -r` over the mount reads records, not schemas. A subject is named as
`.groups/` names a group id (kfs.fuse.groups_tree.file_name: `/` written `%2F`, ...). Files are no
more readable than the registry topic's segments (or the schema files) they come from, and neither
is a file whose lines were decoded with them (`decoded_access`: their field names are in it).
"""

from __future__ import annotations

import errno
import json
import os
import stat
import time

from kfs.fuse.access import Access, access_of, as_directory, as_search, narrow
from kfs.fuse.groups_tree import file_name
from kfs.fuse.handles import Attr, BytesHandle, Handle, TreeError
from kfs.registry.decode import Registry
from kfs.registry.state import SchemaVersion

SCHEMAS_DIR = ".schemas"
SUFFIX = {"AVRO": ".avsc", "JSON": ".json", "PROTOBUF": ".proto"}
_ACCESS_TTL = 1.0  # seconds the combined access of the sources is kept


class SchemasTree:
    """The paths under `.schemas/` (given without it, as parts), from one registry state."""

    def __init__(self, registry: Registry) -> None:
        state = registry.state
        self.all = "".join(json.dumps(v.listing(), ensure_ascii=False) + "\n" for v in state.listing()).encode()
        self.ids = {f"{i}{SUFFIX[v.type]}": v for i, v in state.by_id.items()}
        self.subjects: dict[str, dict[str, SchemaVersion]] = {}
        for v in state.listing():
            self.subjects.setdefault(file_name(v.subject), {})[f"{v.version}{SUFFIX[v.type]}"] = v
        self.sources = state.sources
        self._kept: tuple[float, Access, os.stat_result, os.stat_result] | None = None
        self._kept_decoded: tuple[float, Access] | None = None

    def getattr(self, parts: list[str], path: str) -> Attr:
        if self._is_dir(parts, path):
            acc, first, _ = self._access()
            attr = Attr.of_dir(first)
            attr.mode = stat.S_IFDIR | stat.S_IMODE(acc[2])
            return attr
        return self._file_attr(len(self._content(parts, path)))

    def readdir(self, parts: list[str], path: str) -> list[str]:
        if not self._is_dir(parts, path):
            self.getattr(parts, path)
            raise TreeError(errno.ENOTDIR, path)
        if not parts:
            return ["all.jsonl", "ids", "subjects"]
        if parts == ["ids"]:
            return sorted(self.ids, key=lambda n: int(n.split(".")[0]))
        if parts == ["subjects"]:
            return sorted(self.subjects)
        return sorted(self.subjects[parts[1]], key=lambda n: int(n.split(".")[0]))

    def open(self, parts: list[str], path: str) -> Handle:
        if self._is_dir(parts, path):
            raise TreeError(errno.EISDIR, path)
        data = self._content(parts, path)
        return BytesHandle(self._file_attr(len(data)), data=data)

    def _is_dir(self, parts: list[str], path: str) -> bool:
        if not parts or parts in (["ids"], ["subjects"]):
            return True
        if len(parts) == 2 and parts[0] == "subjects":
            if parts[1] not in self.subjects:
                raise TreeError(errno.ENOENT, path)
            return True
        return False

    def _content(self, parts: list[str], path: str) -> bytes:
        found: SchemaVersion | None = None
        if parts == ["all.jsonl"]:
            return self.all
        if len(parts) == 2 and parts[0] == "ids":
            found = self.ids.get(parts[1])
        elif len(parts) == 3 and parts[0] == "subjects":
            found = self.subjects.get(parts[1], {}).get(parts[2])
        if found is None:
            raise TreeError(errno.ENOENT, path)
        return found.schema.encode("utf-8")

    def _access(self) -> tuple[Access, os.stat_result, os.stat_result]:
        """The combined access of what the state was read from (directories by their search bits,
        files by their read bits: kfs.fuse.access), the first one's stat and the newest's."""
        now = time.monotonic()
        if self._kept is not None and now - self._kept[0] < _ACCESS_TTL:
            return self._kept[1], self._kept[2], self._kept[3]
        first = newest = os.stat(self.sources[0])
        acc = as_search(access_of(first))
        for source in self.sources[1:]:
            try:
                st = os.lstat(source)
            except FileNotFoundError:
                continue
            acc = narrow(acc, *(as_search(access_of(st)) if stat.S_ISDIR(st.st_mode) else as_directory(access_of(st))))
            if st.st_mtime_ns > newest.st_mtime_ns:
                newest = st
        self._kept = (now, acc, first, newest)
        return acc, first, newest

    def decoded_access(self) -> Access:
        """What a file decoded with these schemas may grant: no more than the files and directories
        the state was read from (directories by their search bits, files by their read bits)."""
        now = time.monotonic()
        if self._kept_decoded is not None and now - self._kept_decoded[0] < _ACCESS_TTL:
            return self._kept_decoded[1]
        acc = as_search(access_of(os.stat(self.sources[0])))
        for source in self.sources[1:]:
            try:
                st = os.lstat(source)
            except FileNotFoundError:
                continue
            acc = narrow(acc, *(as_search(access_of(st)) if stat.S_ISDIR(st.st_mode) else access_of(st)))
        self._kept_decoded = (now, acc)
        return acc

    def _file_attr(self, size: int) -> Attr:
        acc, first, newest = self._access()
        return Attr(stat.S_IFREG | (stat.S_IMODE(acc[2]) & 0o444), size, first.st_uid, first.st_gid,
                    newest.st_mtime_ns, newest.st_ctime_ns, newest.st_atime_ns)
