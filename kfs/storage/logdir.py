"""Log dirs (a broker's `log.dirs`): which directories are partitions, and their `PartitionLog`s.

A partition directory is `<topic>-<partition>`: the topic may contain `-`, `.` and `_`, the
partition is the number after the last `-`. Directories the broker is moving or deleting
(`-delete`, `-future`, `-stray` suffixes after a `.<uuid>`) end in a word, not a number, so
they are not partitions of this log dir.

What counts as a log dir (`check_log_dir`): a directory holding `meta.properties` (every broker
writes one into each of its log dirs at startup), or at least one `<topic>-<partition>` directory
holding a `<20-digit base offset>.log` segment file (a copy without its `meta.properties`).
Anything else (`/etc`, a partition directory, the directory above the log dirs, an empty one)
is refused with a sentence that says what was given and what a log dir looks like.
"""

from __future__ import annotations

import difflib
import os
import re
import threading

from kfs.storage.checkpoints import CheckpointReader
from kfs.storage.errors import KfsError, NotALogDir, UnknownPartition
from kfs.storage.lru import LruCache
from kfs.storage.partition import PartitionLog
from kfs.storage.topic_configs import METADATA_PARTITION, TopicPolicies, read_policies

MAX_PARTITION_LOGS = 1024  # partition logs kept open-ready (LRU); more are re-listed when asked again
_PARTITION_DIR = re.compile(r"^([A-Za-z0-9._-]+)-([0-9]+)$")
_SEGMENT_FILE = re.compile(r"^[0-9]{20}\.log$")
LOG_DIR_RULE = ("a Kafka log dir holds meta.properties or <topic>-<partition> directories "
                "with <20-digit base offset>.log segment files")


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """('orders', 0) for 'orders-0'; None for anything that is not a partition directory."""
    m = _PARTITION_DIR.match(name)
    return (m.group(1), int(m.group(2))) if m else None


def split_log_dirs(paths: list[str]) -> list[str]:
    """Log dirs given one per argument or comma-separated as in the broker's `log.dirs`.

    A path that exists as written is kept whole, even with a comma in its name."""
    found: list[str] = []
    for path in paths:
        parts = [path] if os.path.exists(path) else [p.strip() for p in path.split(",")]
        found.extend(p for p in parts if p)
    return list(dict.fromkeys(found))


def _has_segment_files(path: str) -> bool:
    try:
        with os.scandir(path) as entries:
            return any(_SEGMENT_FILE.match(entry.name) for entry in entries)
    except OSError:
        return False


def _partition_dirs(path: str) -> list[str]:
    """`<topic>-<partition>` subdirectories of `path` (names only)."""
    try:
        with os.scandir(path) as entries:
            return [e.name for e in entries if parse_partition_dir(e.name) and e.is_dir()]
    except OSError:
        return []


def is_log_dir(path: str) -> bool:
    """The rule of this module's docstring: meta.properties, or a partition directory with segments."""
    if os.path.isfile(os.path.join(path, "meta.properties")):
        return True
    return any(_has_segment_files(os.path.join(path, name)) for name in _partition_dirs(path))


def check_log_dir(path: str) -> None:
    """Raise NotALogDir, in one sentence, unless `path` is a log dir by `is_log_dir`'s rule."""
    if not os.path.exists(path):
        raise NotALogDir(f"{path}: no such directory ({LOG_DIR_RULE}).")
    if not os.path.isdir(path):
        raise NotALogDir(f"{path} is a file, not a log dir ({LOG_DIR_RULE}).")
    if not os.access(path, os.R_OK | os.X_OK):
        raise NotALogDir(f"{path}: permission denied (kfs needs to list and read the log dir).")
    if is_log_dir(path):
        return
    parent = os.path.dirname(os.path.abspath(path))
    if parse_partition_dir(os.path.basename(os.path.abspath(path))) and _has_segment_files(path):
        raise NotALogDir(f"{path} is a partition directory, not a log dir: give its parent {parent} "
                         f"({LOG_DIR_RULE}).")
    try:
        with os.scandir(path) as entries:
            children = sorted(e.name for e in entries if e.is_dir())
    except OSError:
        children = []
    inner = [name for name in children[:1000] if is_log_dir(os.path.join(path, name))]
    if inner:
        shown = ",".join(os.path.join(path, name) for name in inner[:4]) + (",..." if len(inner) > 4 else "")
        raise NotALogDir(f"{path} holds log dirs rather than partitions: give the log dirs, e.g. {shown} "
                         f"({LOG_DIR_RULE}).")
    what = "an empty directory" if not os.listdir(path) else "not a Kafka log dir"
    raise NotALogDir(f"{path} is {what}: {LOG_DIR_RULE}.")


def check_log_dirs(paths: list[str]) -> list[str]:
    """The log dirs named by `paths` (comma-separated lists split), each checked; NotALogDir otherwise."""
    dirs = split_log_dirs(paths)
    if not dirs:
        raise NotALogDir(f"no log dir given ({LOG_DIR_RULE}).")
    for path in dirs:
        check_log_dir(path)
    return dirs


class LogDirs:
    """One or several log dirs seen as one broker's partitions. Nothing is opened until asked."""

    def __init__(self, paths: list[str]) -> None:
        paths = check_log_dirs(paths)
        self.paths = [os.path.abspath(p) for p in paths]
        self._checkpoints = {p: CheckpointReader(p) for p in self.paths}
        # Bounded: a walk over thousands of partitions keeps the most recently used ones (their
        # listings and tail walks); an evicted one still in use by an open file lives on there.
        self._partitions: LruCache[str, PartitionLog] = LruCache(MAX_PARTITION_LOGS)
        self._lock = threading.Lock()
        # What the metadata log says of topics' cleanup.policy (kfs.storage.topic_configs), and the
        # metadata log's (listing, log end) it was read at: read on from there when only its end moved.
        self._policies: tuple[tuple[int, int], TopicPolicies] | None = None
        self._policies_lock = threading.Lock()

    def never_compacted(self, topic: str) -> bool:
        """Whether the KRaft metadata log among the log dirs says the topic was never compacted
        (kfs.storage.topic_configs); False when it is not among them. Read when first asked, then
        what was appended to it since (all of it again when its segments changed)."""
        if topic == METADATA_PARTITION.rsplit("-", 1)[0] \
                or not any(os.path.isdir(os.path.join(p, METADATA_PARTITION)) for p in self.paths):
            return False  # (the metadata log's own segments: its reads ask this, not the cleaner's topic)
        try:
            metadata = self.partition(METADATA_PARTITION)
            with self._policies_lock:
                seen = (metadata.listing(), metadata.log_end_offset())
                if self._policies is None or self._policies[0] != seen:
                    same_segments = self._policies is not None and self._policies[0][0] == seen[0]
                    known = self._policies[1] if self._policies is not None and same_segments else None
                    self._policies = (seen, read_policies(metadata, known))
                return self._policies[1].never_compacted(topic)
        except KfsError:
            return False

    def _scan(self) -> dict[str, tuple[str, str, int]]:
        """name -> (log dir, topic, partition); the first log dir holding a name wins."""
        found: dict[str, tuple[str, str, int]] = {}
        for logdir in self.paths:
            try:
                entries = os.scandir(logdir)
            except OSError:
                continue
            with entries:
                for entry in entries:
                    parsed = parse_partition_dir(entry.name)
                    if parsed and entry.name not in found and entry.is_dir():
                        found[entry.name] = (logdir, *parsed)
        return found

    def partition_names(self) -> list[str]:
        return sorted(self._scan())

    def partition(self, name: str) -> PartitionLog:
        with self._lock:
            cached = self._partitions.get(name)
            if cached is not None and os.path.isdir(cached.path):
                return cached
            parsed = parse_partition_dir(name)
            if parsed is not None:
                for logdir in self.paths:
                    path = os.path.join(logdir, name)
                    if os.path.isdir(path):
                        plog = PartitionLog(path, parsed[0], parsed[1], self._checkpoints[logdir],
                                            self.never_compacted)
                        self._partitions.put(name, plog)
                        return plog
            if cached is not None:
                self._partitions.pop(name)
                cached.close()
        raise UnknownPartition(self._unknown(name))

    def _unknown(self, name: str) -> str:
        """"no partition X in ...", with the partitions whose names are nearest (a typo, a wrong
        partition number), so a user need not list the log dir to find the right one."""
        try:
            names = self.partition_names()
        except OSError:
            names = []
        nearest = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
        if not nearest:
            topic = name.rpartition("-")[0]
            nearest = [n for n in names if n.rpartition("-")[0] == topic][:3]
        hint = (f" (nearest: {', '.join(nearest)})" if nearest
                else f" ({len(names)} partitions there: kfs ls lists them)")
        return f"no partition {name} in {', '.join(self.paths)}{hint}"

    def close(self) -> None:
        with self._lock:
            for plog in self._partitions.values():
                plog.close()
            self._partitions.clear()
