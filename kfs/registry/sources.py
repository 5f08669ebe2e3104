"""Where the registry's schemas come from (docs/spec.md section 9): the `_schemas` topic of the log dirs
given, other log dirs (`--schemas PATH`, `schemas=PATH`), or a directory of `<id>.avsc`,
`<id>.proto` and `<id>.json` files.

The topic is read with kfs's own partition reading, as `kfs groups` reads `__consumer_offsets`:
every record in offset order, control records and aborted transactions left out (what the
registry's read_committed consumer sees). A partition that is damaged gives what comes before the
damage, and the daemon log says where.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from typing import Any

from kfs.registry.state import RegistryState, SchemaVersion
from kfs.storage import KfsError, LogDirs, NotALogDir
from kfs.storage.logdir import check_log_dir

log = logging.getLogger("kfs")

DEFAULT_TOPIC = "_schemas"
_FILE_TYPES = {".avsc": "AVRO", ".proto": "PROTOBUF", ".json": "JSON"}
MAX_SCHEMA_FILE = 16 << 20  # a schema file larger than this is not a schema


class SchemasSourceError(ValueError):
    """`--schemas PATH` names nothing kfs can read schemas from: one sentence."""


def topic_partitions(logdirs: LogDirs, topic: str) -> list[str]:
    """The names of `topic`'s partition directories in the log dirs."""
    return [name for name in logdirs.partition_names() if name.rpartition("-")[0] == topic]


def state_from_logdirs(logdirs: LogDirs, topic: str = DEFAULT_TOPIC) -> RegistryState | None:
    """The registry rebuilt from `topic` in `logdirs`; None when no log dir holds it."""
    names = topic_partitions(logdirs, topic)
    if not names:
        return None
    state = RegistryState()
    for name in names:  # (the registry's topic has one partition; more are read one after the other)
        plog = logdirs.partition(name)
        state.sources += [os.path.dirname(plog.path), plog.path] + [s.log_path for s in plog.segments()]
        try:
            for records in plog.record_lists(isolation="read_committed"):
                for record in records:
                    state.apply(record.key, record.value, f"{name} offset {record.offset}")
        except KfsError as e:
            log.warning("schema registry topic %s: read up to the damage: %s", name, e)
    return state


def state_from_files(directory: str) -> RegistryState:
    """Schemas from `<id>.avsc|.proto|.json` files: ids without a subject (subject "", version 0)."""
    state = RegistryState()
    state.sources.append(directory)
    for entry in sorted(os.scandir(directory), key=lambda e: e.name):
        stem, ext = os.path.splitext(entry.name)
        if ext not in _FILE_TYPES or not stem.isdigit() or not entry.is_file():
            continue
        if entry.stat().st_size > MAX_SCHEMA_FILE:
            log.warning("%s: larger than %d bytes, not read as a schema", entry.path, MAX_SCHEMA_FILE)
            continue
        with open(entry.path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        schema_id = int(stem)
        state.sources.append(entry.path)
        state.by_id[schema_id] = SchemaVersion("", 0, schema_id, _FILE_TYPES[ext], text)
        state._hash.update(f"{entry.name}\0{len(text)}\0".encode() + text.encode())
    return state


def load_state(logdir_paths: list[str], schemas: str | None = None,
               topic: str = DEFAULT_TOPIC) -> RegistryState | None:
    """The registry for decoding: from `schemas` when given (log dirs, comma-separated, or a
    directory of schema files), else from `topic` in the log dirs read; None when there is none."""
    if schemas is None:
        return state_from_logdirs(LogDirs(logdir_paths), topic)
    files, paths = _schemas_source(schemas)
    if files:
        return state_from_files(paths[0])
    state = state_from_logdirs(LogDirs(paths), topic)
    if state is None:
        raise SchemasSourceError(f"--schemas {schemas}: no {topic} partition there (the registry's topic; "
                                 "--schemas-topic names another).")
    return state


def _holds_schema_files(directory: str) -> bool:
    try:
        return any(os.path.splitext(name)[1] in _FILE_TYPES and os.path.splitext(name)[0].isdigit()
                   for name in os.listdir(directory))
    except OSError:
        return False


def _schemas_source(schemas: str) -> tuple[bool, list[str]]:
    """What `--schemas` names: (True, [a directory of schema files]) or (False, log dirs), each path
    absolute; SchemasSourceError (one sentence) when it is neither."""
    paths = [os.path.abspath(p) for p in schemas.split(",") if p]
    if not paths:
        raise SchemasSourceError("--schemas: no path given.")
    if len(paths) == 1 and os.path.isdir(paths[0]) and _holds_schema_files(paths[0]):
        return True, paths
    for path in paths:
        try:
            check_log_dir(path)
        except NotALogDir:
            raise SchemasSourceError(f"--schemas {path}: neither a log dir nor a directory of <id>.avsc, "
                                     "<id>.proto or <id>.json schema files.") from None
    return False, paths


def check_schemas_source(schemas: str) -> str:
    """`schemas` with each path made absolute, once it names log dirs or a directory of schema
    files; SchemasSourceError (one sentence) otherwise."""
    return ",".join(_schemas_source(schemas)[1])


class RegistryWatch:
    """A mount's registry, rebuilt when what it was read from changed (looked at most once a second).

    A schema registered on a live broker makes old records decodable: the registry topic's segment
    files (or the schema files) are stat'ed, and on a change the state is read again. A new state
    (another digest) is a new `Registry`: decoded logs made with it count and cache their sizes under
    its digest, so no size measured with the old state is served for the new one."""

    CHECK_SECONDS = 1.0

    def __init__(self, logdir_paths: list[str], schemas: str | None = None, topic: str = DEFAULT_TOPIC) -> None:
        from kfs.registry.decode import Registry

        self._make = Registry
        self.logdir_paths = logdir_paths
        self.schemas = schemas
        self.topic = topic
        self._lock = threading.Lock()
        self._checked = time.monotonic()
        self._signature = self._source_signature()
        state = load_state(logdir_paths, schemas, topic)
        self.registry = None if state is None else Registry(state)

    def current(self) -> Any:
        """The registry now (a kfs.registry.decode.Registry, or None): the same object while nothing changed."""
        if time.monotonic() - self._checked < self.CHECK_SECONDS:
            return self.registry
        with self._lock:
            if time.monotonic() - self._checked < self.CHECK_SECONDS:
                return self.registry
            signature = self._source_signature()  # (before reading: a change after it is seen next time)
            self._checked = time.monotonic()
            if signature != self._signature:
                self._signature = signature
                try:
                    state = load_state(self.logdir_paths, self.schemas, self.topic)
                except (OSError, KfsError, SchemasSourceError) as e:
                    log.warning("schema registry not read again (%s): decoding goes on with the state read before", e)
                    return self.registry
                if state is None:
                    if self.registry is not None:
                        log.info("schema registry topic %s gone: framed payloads shown as bytes", self.topic)
                    self.registry = None
                elif self.registry is None or state.digest() != self.registry.digest():
                    log.info("schema registry changed: %d subject versions, %d ids", len(state.versions),
                             len(state.by_id))
                    self.registry = self._make(state)
            return self.registry

    def _source_signature(self) -> tuple[tuple[str, int, int, int], ...]:
        """(path, inode, size, mtime) of every file the state is read from, and of their directories."""
        paths: list[str] = []
        if self.schemas is not None and len(self.schemas.split(",")) == 1 and _holds_schema_files(self.schemas):
            paths = [self.schemas]
            with contextlib.suppress(OSError):
                paths += [os.path.join(self.schemas, n) for n in sorted(os.listdir(self.schemas))]
        else:
            for logdir in (self.schemas.split(",") if self.schemas else self.logdir_paths):
                try:
                    names = sorted(n for n in os.listdir(logdir) if n.rpartition("-")[0] == self.topic)
                except OSError:
                    continue
                for name in names:
                    directory = os.path.join(logdir, name)
                    paths.append(directory)
                    with contextlib.suppress(OSError):
                        paths += [os.path.join(directory, n) for n in sorted(os.listdir(directory))
                                  if n.endswith(".log")]
        signature = []
        for path in paths:
            try:
                st = os.lstat(path)
            except OSError:
                continue
            signature.append((path, st.st_ino, st.st_size, st.st_mtime_ns))
        return tuple(signature)
