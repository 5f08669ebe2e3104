"""The mounted tree (README: "The mounted tree") as a "mount source": paths in, attributes and handles out.

No FUSE in here (ratarmount's MountSource idea): `operations.py` only translates. Every answer
comes from the storage core (`kfs.storage`) and the decoded views (`kfs.views.decoded`):

    /<topic>-<partition>/offset/<N>          RawHandle    batches as stored, from N's batch to the log end
    /<topic>-<partition>/offset/<N>.jsonl    DecodedHandle
    /<topic>-<partition>/offset/<N>.value    BytesHandle  (exact offset; a gap is ENOENT)
    /<topic>-<partition>/offset/<N>.json     BytesHandle  the value alone as its JSON line shows it (decoded)
    /<topic>-<partition>/time/<T>[.jsonl|.value|.json]
    /<topic>-<partition>/messages.jsonl      = offset/<log start>.jsonl
    /<topic>-<partition>/info.json
    /.groups/...                             committed offsets and groups (kfs.fuse.groups_tree)
    /.schemas/...                            the schema registry's state (kfs.fuse.schemas_tree)

Errors leave as OSError with an errno: ENOENT for names outside the log, EIO for a corrupt or
vanished log (with the storage error chained, so the daemon log names file and position).
"""

from __future__ import annotations

import errno
import json
import os
import stat
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from kfs.fuse import fast_small
from kfs.fuse.access import Access, access_of, as_search, combined, narrow, suffixes
from kfs.fuse.groups_tree import GROUPS_DIR, GroupsTree
from kfs.fuse.handles import Attr, BytesHandle, DecodedHandle, Handle, RawHandle, TreeError, as_errno, view_length
from kfs.fuse.schemas_tree import SCHEMAS_DIR, SchemasTree
from kfs.registry.decode import Registry
from kfs.registry.sources import RegistryWatch
from kfs.storage import Extent, Location, LogDirs, OffsetOutOfRange, PartitionLog, UnknownPartition, VanishedError
from kfs.storage.lru import LruCache
from kfs.views.decoded import DecodedLog, DecodedView, Measure
from kfs.views.pacing import Foreground
from kfs.views.size_cache import SizeCache

T = TypeVar("T")

BLOCK_SIZE = 1 << 20  # st_blksize: cat/cp size their reads by it (max(128 KiB, st_blksize))
SMALL_TTL = 1.0  # seconds an info.json / .value rendering is reused (the kernel's attr timeout)
MAX_SMALL_FILES = 1024  # rendered info.jsons and .values kept (LRU) ...
MAX_SMALL_BYTES = 16 << 20  # ... and their bytes at most (a .value may be large)
MAX_DECODED_LOGS = 256  # partitions whose decoded runs and seek maps stay in memory (the size cache keeps the rest)
MAX_LOCATIONS = 2048  # offset/time lookups reused within SMALL_TTL (older ones are of no use)
MAX_SIGNATURES = 4096  # (size, mtime) of files opened lately, for keep_cache
MAX_DECODED_PATHS = 512  # decoded files whose last stat and open readers are tracked (see _open_decoded)
KERNEL_TRUSTS_STAT = 2.0  # seconds: the kernel's attribute timeout (operations.ATTR_TIMEOUT), with slack
VANISHED_RETRIES = 3  # answers tried afresh when a segment file vanished under them
PARTITION_DIR_NAMES = ("info.json", "messages.jsonl", "offset", "time")


@dataclass(frozen=True)
class ViewName:
    """A parsed `offset/<spec>[.jsonl|.value]` or `time/<spec>[...]`."""

    axis: str  # "offset" or "time"
    spec: str
    kind: str  # "raw", "jsonl", "value" or "json" (the value as its JSON line shows it: decoded where it is)

    @classmethod
    def parse(cls, axis: str, name: str) -> ViewName:
        for kind in ("jsonl", "value", "json"):
            if name.endswith("." + kind) and len(name) > len(kind) + 1:
                return cls(axis, name[:-len(kind) - 1], kind)
        return cls(axis, name, "raw")


class KfsTree:
    """The whole mounted tree over some log dirs. Thread-safe; nothing is opened until asked."""

    def __init__(self, logdirs: LogDirs, isolation: str = "read_uncommitted", control: str = "hide",
                 cache: SizeCache | None = None, decode: str = "auto", registry: Registry | None = None,
                 registry_watch: RegistryWatch | None = None) -> None:
        """`registry`: the schema registry's state (kfs.registry) for framed payloads; `registry_watch`:
        one that follows its source as it changes (a live broker's _schemas), the mount's."""
        self.logdirs = logdirs
        self.isolation = isolation
        self.control = control
        self.decode = decode
        self._registry_watch = registry_watch
        self.registry = registry_watch.registry if registry_watch is not None else registry
        self.cache = cache or SizeCache(None)
        self.foreground = Foreground()  # reads mark it; the background size scan gives way (kfs.views.pacing)
        # Every cache is bounded (kfs.storage.lru): the daemon's memory stays flat however many
        # partitions and files are read (figures: benchmarks/bench_memory.py).
        self._decoded: LruCache[str, DecodedLog] = LruCache(MAX_DECODED_LOGS)
        self._small: LruCache[str, tuple[float, Attr, bytes]] = LruCache(
            MAX_SMALL_FILES, MAX_SMALL_BYTES, weigh=lambda item: len(item[2]) + 200)
        self._signatures: LruCache[str, tuple[int, int, int, int]] = LruCache(MAX_SIGNATURES)
        self._locations: LruCache[tuple[str, str, str], tuple[float, PartitionLog, Location, int]] = LruCache(
            MAX_LOCATIONS)
        # Decoded files: the last size the kernel was given, and the readers open (see _open_decoded).
        self._answered: LruCache[str, tuple[float, Measure]] = LruCache(MAX_DECODED_PATHS)
        self._readers: LruCache[str, weakref.WeakSet[DecodedHandle]] = LruCache(MAX_DECODED_PATHS)
        # Raw files: the readers open (see _kept_raw_size).
        self._raw_readers: LruCache[str, weakref.WeakSet[RawHandle]] = LruCache(MAX_DECODED_PATHS)
        # Per partition, the combined access of its segments from each one to the last (_segments_access).
        self._kept_access: LruCache[str, _SegmentsAccess] = LruCache(MAX_DECODED_LOGS)
        self._lock = threading.Lock()
        self.groups = GroupsTree(logdirs, self.foreground)  # its replays pause the size scan too
        self.schemas = SchemasTree(self.registry) if self.registry is not None else None

    # ---- paths ----------------------------------------------------------------------------------

    def getattr(self, path: str) -> Attr:
        small = self._fresh_small(path)
        if small is not None:  # the open (or stat) that follows a lookup: no parsing, no partition check
            return small[0]
        return self._settled(path, self._getattr)

    def open(self, path: str) -> Handle:
        small = self._fresh_small(path)
        if small is not None:
            return self._cached(path, BytesHandle(small[0], data=small[1]))
        return self._settled(path, self._open)

    def _settled(self, path: str, answer: Callable[[str], T]) -> T:
        """`answer(path)`, again after a fresh listing when a segment file it used vanished between
        the partition's listing and its use (retention, the cleaner's swap): such a name is still
        there, and a `stat` or `open` of it must not fail (a new `tail -f messages.jsonl` got ENOENT)."""
        for attempt in range(VANISHED_RETRIES):
            try:
                return answer(path)
            except (FileNotFoundError, TreeError) as e:
                vanished = isinstance(e, FileNotFoundError) or isinstance(getattr(e, "cause", None), VanishedError)
                parts = _split(path)
                if not vanished or attempt + 1 == VANISHED_RETRIES or len(parts) < 2 \
                        or parts[0] in (GROUPS_DIR, SCHEMAS_DIR):
                    raise
                try:
                    self.logdirs.partition(parts[0]).refresh(force=True)
                except UnknownPartition:
                    raise e from None
        raise AssertionError("unreachable")

    def _getattr(self, path: str) -> Attr:
        parts = _split(path)
        with as_errno(path):
            if not parts:
                return _dir_attr([os.stat(p) for p in self.logdirs.paths])
            if parts[0] == GROUPS_DIR:
                return self.groups.getattr(parts[1:], path)
            schemas = self._schemas() if parts[0] == SCHEMAS_DIR else None
            if schemas is not None:
                return schemas.getattr(parts[1:], path)
            plog = self._partition(parts[0], path)
            if len(parts) == 1 or (len(parts) == 2 and parts[1] in ("offset", "time")):
                return _partition_dir_attr(plog)
            if len(parts) == 2 and parts[1] == "info.json":
                return self._info(plog, path)[0]
            if len(parts) == 2 and parts[1] == "messages.jsonl":
                return self._decoded_attr(path, self._decoded_view(plog, None))[0]
            if len(parts) == 3 and parts[1] in ("offset", "time"):
                return self._view_attr(path, plog, ViewName.parse(parts[1], parts[2]))
        raise TreeError(errno.ENOENT, path)

    def readdir(self, path: str) -> list[str]:
        parts = _split(path)
        if not parts:
            return self.logdirs.partition_names()
        if parts[0] == GROUPS_DIR:
            with as_errno(path):
                return self.groups.readdir(parts[1:], path)
        schemas = self._schemas() if parts[0] == SCHEMAS_DIR else None
        if schemas is not None:
            with as_errno(path):
                return schemas.readdir(parts[1:], path)
        if len(parts) == 1:
            self._partition(parts[0], path)
            return list(PARTITION_DIR_NAMES)
        if len(parts) == 2 and parts[1] in ("offset", "time"):
            self._partition(parts[0], path)
            return []  # names are looked up, not listed: `grep -r` reads messages.jsonl once
        self.getattr(path)  # ENOENT when nothing is there
        raise TreeError(errno.ENOTDIR, path)

    def _open(self, path: str) -> Handle:
        parts = _split(path)
        with as_errno(path):
            if parts and parts[0] == GROUPS_DIR:
                return self.groups.open(parts[1:], path)
            schemas = self._schemas() if parts and parts[0] == SCHEMAS_DIR else None
            if schemas is not None:
                return schemas.open(parts[1:], path)
            if len(parts) == 2 and parts[1] == "info.json":
                plog = self._partition(parts[0], path)
                attr, data = self._info(plog, path)
                return self._cached(path, BytesHandle(attr, data=data))
            if len(parts) == 2 and parts[1] == "messages.jsonl":
                plog = self._partition(parts[0], path)
                return self._open_decoded(path, self._decoded_view(plog, None))
            if len(parts) == 3 and parts[1] in ("offset", "time"):
                plog = self._partition(parts[0], path)
                name = ViewName.parse(parts[1], parts[2])
                if name.kind == "raw":
                    location = self._locate(plog, name)
                    extents = plog.raw_extents(location)
                    handle = RawHandle(self._raw_attr(plog, extents), plog=plog, location=location, extents=extents)
                    others = self._raw_reader_opened(path, handle)
                    if not name.spec.isdigit() or any(not other.grows_into(extents) for other in others):
                        # `latest`, `earliest`, `-K` move: the size the kernel holds for the name may
                        # be of another batch, and it would end the read there (a batch cut short).
                        # So may a reader still open on a file that lost a segment since (the size is
                        # kept for it: _kept_raw_size); a short read here would end that file too.
                        handle.direct_io, handle.keep_cache = True, False
                        return handle
                    return self._cached(path, handle, _extent_files(extents))
                if name.kind in ("value", "json"):
                    attr, data = self._value(plog, name, path)
                    return self._cached(path, BytesHandle(attr, data=data))
                return self._open_decoded(path, self._decoded_view(plog, name))
        self.getattr(path)  # ENOENT when nothing is there
        raise TreeError(errno.EISDIR, path)

    # ---- views ----------------------------------------------------------------------------------

    def _partition(self, name: str, path: str) -> PartitionLog:
        try:
            return self.logdirs.partition(name)
        except UnknownPartition as exc:
            raise TreeError(errno.ENOENT, path) from exc

    def _locate(self, plog: PartitionLog, name: ViewName) -> Location:
        """The batch a name points at. A lookup decodes a batch, and the kernel asks for a name
        several times per use (lookup, getattr, open), so answers are reused for SMALL_TTL, the
        kernel's own attribute timeout ("latest" and "-K" move as the log grows)."""
        key = (plog.name, name.axis, name.spec)
        now = time.monotonic()
        listing = plog.listing()
        cached = self._locations.get(key)
        if cached and now - cached[0] < SMALL_TTL and cached[1] is plog and cached[3] == listing:
            return cached[2]  # (not after a segment was deleted or replaced: its positions may be in no file)
        location = plog.locate(name.axis, name.spec, with_record=False)
        self._locations.put(key, (now, plog, location, listing))
        return location

    def _view_attr(self, path: str, plog: PartitionLog, name: ViewName) -> Attr:
        if name.kind == "raw":
            extents = plog.raw_extents(self._locate(plog, name))
            return self._kept_raw_size(path, self._raw_attr(plog, extents), extents)
        if name.kind in ("value", "json"):
            return self._value(plog, name, path)[0]
        return self._decoded_attr(path, self._decoded_view(plog, name))[0]

    def _raw_reader_opened(self, path: str, handle: RawHandle) -> list[RawHandle]:
        """Keep `handle` among the path's open raw readers; the others open."""
        with self._lock:
            readers = self._raw_readers.get(path)
            if readers is None:
                readers = weakref.WeakSet()
                self._raw_readers.put(path, readers)
            others = list(readers)
            readers.add(handle)
        return others

    def _kept_raw_size(self, path: str, attr: Attr, extents: list[Extent]) -> Attr:
        """`attr` of a raw file as the log is now, never smaller than the file of a reader still open on
        it whose segments changed since (one deleted or replaced). The kernel ends a page-cached file at
        the size a getattr last gave, whoever asked: a smaller one cut the open reader's file short
        with no error (`cp` kept a short file). That reader goes on reading its file as it was opened:
        the bytes its open files still hold, EIO where a file it had not read yet is gone. A reader
        opening the name meanwhile reads direct_io (_open), so its own end is not taken for the file's."""
        with self._lock:
            readers = self._raw_readers.get(path)
            others = list(readers) if readers is not None else []
        for other in others:
            if other.size > attr.size and not other.grows_into(extents):
                attr.size = other.size
        return attr

    def _raw_attr(self, plog: PartitionLog, extents: list[Extent]) -> Attr:
        """The batches' size; the mode no more open than any segment the extents are in (kfs.fuse.access)."""
        if not extents:
            raise OffsetOutOfRange("no complete batch from here")
        # (lstat, here and for every segment below: the entry itself; kfs follows no link to a segment)
        first, last = os.lstat(extents[0].path), os.lstat(extents[-1].path)
        attr = Attr.of_view(first, sum(view_length(e) for e in extents), last)  # (damage: at least a byte)
        return self._narrowed(attr, plog, extents[0].segment_base_offset, last)

    def _narrowed(self, attr: Attr, plog: PartitionLog, base_offset: int, last: os.stat_result) -> Attr:
        """`attr` (a view of the segments from `base_offset` to the last, made from the first's stat)
        no more open than any of them: the first and last as stat'ed now, the ones between as
        stat'ed within SMALL_TTL (_segments_access)."""
        acc = narrow((attr.uid, attr.gid, attr.mode), *self._segments_access(plog, base_offset))
        attr.mode = narrow(acc, *access_of(last))[2]
        return attr

    def _segments_access(self, plog: PartitionLog, base_offset: int) -> Access:
        """The combined access (kfs.fuse.access) of the partition's segments from the one at
        `base_offset` to the last. A view's attributes are asked for at every lookup and getattr, and a
        decoded or raw view may span every segment: the segments are stat'ed once per listing and
        SMALL_TTL (the kernel's own attribute timeout, so a chmod shows as soon as anything else),
        and the combination from each segment to the last kept, so that each answer is a lookup."""
        now = time.monotonic()
        kept = self._kept_access.get(plog.name)
        if (kept is None or kept.plog is not plog or kept.listing != plog.listing_seen()
                or now - kept.taken >= SMALL_TTL or base_offset not in kept.positions):
            listing = plog.listing_seen()  # (before the listing: a change after it is seen next time)
            segments = plog.segments()
            suffix = suffixes([access_of(os.lstat(segment.log_path)) for segment in segments])
            kept = _SegmentsAccess(plog, listing, now, {s.base_offset: i for i, s in enumerate(segments)}, suffix)
            self._kept_access.put(plog.name, kept)
        position = kept.positions.get(base_offset)
        if position is not None:
            return kept.suffix[position]
        # A segment that rolled in between the listings: each file stat'ed now.
        return combined([access_of(os.lstat(s.log_path)) for s in plog.segments() if s.base_offset >= base_offset]
                        or [access_of(os.stat(plog.path))])

    def _current_registry(self) -> None:
        """Follow the registry's source (at most a look a second, RegistryWatch): on a new state,
        partitions' decoded logs are made afresh with it (their sizes are counted and cached under
        its digest; a reader open on an old one keeps its bytes) and `.schemas/` shows it."""
        if self._registry_watch is None:
            return
        registry = self._registry_watch.current()
        if registry is not self.registry:
            with self._lock:
                self.registry = registry
                self.schemas = SchemasTree(registry) if registry is not None else None
                self._decoded.clear()

    def _decoded_log(self, plog: PartitionLog) -> DecodedLog:
        self._current_registry()
        with self._lock:
            log = self._decoded.get(plog.name)
            if log is None or log.plog is not plog:
                log = DecodedLog(plog, self.isolation, self.control, self.cache, self.decode, self.registry)
                self._decoded.put(plog.name, log)
            return log

    def _decoded_view(self, plog: PartitionLog, name: ViewName | None) -> DecodedView:
        start: int | None
        if name is None:
            start = None  # messages.jsonl: from the log start wherever it is at each read and stat
        elif name.axis == "offset":
            start = plog.resolve_offset(name.spec)
            self._locate(plog, name)  # ENOENT outside the log
        else:
            start = plog.offset_for_time(plog.parse_time(name.spec))
        return self._decoded_log(plog).view(start)

    def _decoded_attr(self, path: str, view: DecodedView, answered: bool = True) -> tuple[Attr, Measure | None]:
        """Always the exact size (kfs.views.decoded): counted on the first stat that needs it, or
        known from the background scan or the size cache. `answered`: the kernel gets this size
        (a getattr or lookup, not an open), and trusts it for its attribute timeout."""
        segments = view.log.plog.segments()
        if not segments:  # a partition directory with no segment yet: an empty log
            attr = Attr.of_view(os.stat(view.log.plog.path), 0)
            attr.mode &= ~0o111
            return attr, None
        measure = view.measured()
        first_segment = view.log.plog.floor_segment(measure.start) or segments[0]
        first, last = os.lstat(first_segment.log_path), os.lstat(segments[-1].log_path)
        if answered:
            self._answered.put(path, (time.monotonic(), measure))
        attr = Attr.of_view(first, measure.size, last)
        attr = self._narrowed(attr, view.log.plog, first_segment.base_offset, last)
        if view.log.registry_digest is not None:
            attr = self._narrowed_by_registry(attr)
        return attr, measure

    def _narrowed_by_registry(self, attr: Attr) -> Attr:
        """A file decoded with the registry's schemas (their field names and symbols are in it): no
        more readable than the registry topic's segments or the schema files (kfs.fuse.access)."""
        schemas = self.schemas
        if schemas is not None:
            attr.mode = narrow((attr.uid, attr.gid, attr.mode), *schemas.decoded_access())[2]
        return attr

    def _open_decoded(self, path: str, view: DecodedView) -> Handle:
        """An ordinary page-cached file of exact size: mmap, sendfile and readahead work, and a
        growing partition's new size shows at the next getattr. A view known to hold damage is
        opened direct_io: a reader's reads get every line before the damage, then EIO; the kernel's
        page-cache fills (sendfile, which reads a direct_io file through the page cache) fail whole
        at the page holding it, never short (DecodedHandle: the kernel takes a short fill for the end
        of the file, and a copy would end there without a word).

        Except while the file's bytes changed other than at its end (retention, the cleaner: see
        kfs.views.cursor.Cursor) under the kernel's feet: when the size the kernel may still
        trust (answered within KERNEL_TRUSTS_STAT) or a reader still open was measured over other
        segments than now, this open is direct_io. The kernel would otherwise end the file at the
        old size (records lost at the end, a line cut), or serve pages the other reader cached
        (other lines at its positions); direct_io reads come to the cursor, which serves the file
        as it is now."""
        attr, measure = self._decoded_attr(path, view, answered=False)
        handle = DecodedHandle(attr, cursor=view.cursor(measure))
        if measure is None:
            return self._cached(path, handle)
        answered = self._answered.get(path)
        with self._lock:
            readers = self._readers.get(path)
            if readers is None:
                readers = weakref.WeakSet()
                self._readers.put(path, readers)
            earlier = [h.measure for h in list(readers) if h.measure is not None]
            readers.add(handle)
        if answered is not None and time.monotonic() - answered[0] < KERNEL_TRUSTS_STAT:
            earlier.append(answered[1])
        handle.measure = measure
        if any(not measure.extends(m) for m in earlier):
            handle.direct_io = True
            return handle
        if view.damaged():
            # Page-cached, the page holding the damage fails whole, and up to 4 KiB of lines before it
            # never reach the reader. direct_io, a reader's own reads get every line before the damage
            # (a short read), then EIO: what `kfs cat` prints before it fails. The page-cache fills a
            # direct_io file still gets (sendfile's splice path) fail whole at that page, never short.
            handle.direct_io = True
            return handle
        return self._cached(path, handle, measure.runs)

    def _schemas(self) -> SchemasTree | None:
        self._current_registry()
        return self.schemas

    def decoded_logs(self) -> Iterator[DecodedLog]:
        """The decoded log of every partition, for the background size scan."""
        for name in self.logdirs.partition_names():
            try:
                yield self._decoded_log(self.logdirs.partition(name))
            except UnknownPartition:
                continue

    def _fresh_small(self, path: str) -> tuple[Attr, bytes] | None:
        """An info.json or `.value` rendered within SMALL_TTL (the kernel asks for one several times
        per use: lookup, open, getattr), or None."""
        cached = self._small.get(path)
        if cached and time.monotonic() - cached[0] < SMALL_TTL:
            return cached[1], cached[2]
        return None

    def _value(self, plog: PartitionLog, name: ViewName, path: str) -> tuple[Attr, bytes]:
        cached = self._fresh_small(path)
        if cached is not None:
            return cached
        record = plog.value_record(name.axis, name.spec, isolation=self.isolation)
        data = record.value or b""
        decoded_log = None
        if name.kind == "json":  # the value alone as its JSON line shows it: decoded (docs/spec.md sections 8, 9)
            decoded_log = self._decoded_log(plog)
            line = decoded_log.render([record])[0]
            data = json.dumps(json.loads(line)["value"], ensure_ascii=False).encode("utf-8") + b"\n"
        segment = plog.floor_segment(record.offset)
        assert segment is not None
        attr = Attr.of_view(os.lstat(segment.log_path), len(data))
        if decoded_log is not None and decoded_log.registry_digest is not None:
            attr = self._narrowed_by_registry(attr)
        self._keep_small(path, attr, data)
        return attr, data

    def _keep_small(self, path: str, attr: Attr, data: bytes) -> None:
        """A rendered info.json or `.value`, reused for SMALL_TTL (here, and by the OPEN, READ and
        RELEASE answered in C: kfs.fuse.fast_small)."""
        rendered = time.monotonic()
        self._small.put(path, (rendered, attr, data))
        fast_small.keep(self, path, data, rendered)

    def _info(self, plog: PartitionLog, path: str) -> tuple[Attr, bytes]:
        cached = self._fresh_small(path)
        if cached is not None:
            return cached
        data = (json.dumps(plog.info(), indent=2) + "\n").encode()
        dir_attr = _partition_dir_attr(plog)
        attr = Attr(stat.S_IFREG | (dir_attr.mode & 0o444), len(data), dir_attr.uid, dir_attr.gid,
                    dir_attr.mtime_ns, dir_attr.ctime_ns, dir_attr.atime_ns)
        segments = plog.segments()
        if segments:
            newest = os.lstat(segments[-1].log_path)
            attr.mtime_ns = max(attr.mtime_ns, newest.st_mtime_ns)
        self._keep_small(path, attr, data)
        return attr, data

    def _cached(self, path: str, handle: Handle, files: object = None) -> Handle:
        """keep_cache when the file looks as it did at its last open (libfuse's auto_cache rule):
        closed segments never change, and a live file that changed size or mtime (or, `files`,
        the segment files a decoded view was measured over) starts afresh (the kernel also drops
        the pages when a getattr shows a new size)."""
        signature = (handle.attr.size, handle.attr.mtime_ns, handle.attr.ctime_ns, hash(files))
        with self._lock:
            handle.keep_cache = self._signatures.get(path) == signature
            self._signatures.put(path, signature)
        return handle


@dataclass
class _SegmentsAccess:
    """A partition's segments' combined access from each one to the last (KfsTree._segments_access)."""

    plog: PartitionLog
    listing: int
    taken: float
    positions: dict[int, int]  # base offset -> index in suffix
    suffix: list[Access]  # suffix[i]: segments i.. combined


def _partition_dir_attr(plog: PartitionLog) -> Attr:
    """A partition's directory (and its offset/ and time/, and info.json's mode): the partition
    directory on disk, no more open than its log dir lets anyone reach it (a partition of a 0700
    log dir is closed; of a 0711 one, open as on disk: kfs.fuse.access.as_search)."""
    st = os.stat(plog.path)
    attr = Attr.of_dir(st)
    attr.mode = narrow(access_of(st), *as_search(access_of(os.stat(os.path.dirname(plog.path)))))[2]
    return attr


def _dir_attr(stats: list[os.stat_result]) -> Attr:
    """A directory made from these directories: the first's owner and times, no more open than any
    (kfs.fuse.access)."""
    attr = Attr.of_dir(stats[0])
    attr.mode = combined([access_of(st) for st in stats])[2]
    return attr


def _extent_files(extents: list[Extent]) -> tuple[tuple[str, int, int, int, int], ...]:
    """Each file a raw view reads, as (path, inode, size, mtime, ctime): a file rewritten in place
    (its ctime), or one of the middle replaced, is another file for the kernel's kept pages."""
    files = []
    for extent in extents:
        st = os.lstat(extent.path)  # (a damage extent's file may be a dangling link: never followed)
        files.append((extent.path, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    return tuple(files)


def _split(path: str) -> list[str]:
    return [p for p in path.split("/") if p]
