"""Mounting and unmounting: `mount()` returns once the mount answers; `unmount()` undoes it.

The daemon is a fresh interpreter (`python -m kfs.fuse.mount --serve ...`) rather than a fork:
forking a process that may hold threads is unsafe, and a new session with stdin/stdout on
/dev/null detaches it from the caller, so `out=$(kfs mount ...)` returns. Its stderr goes to the
daemon log, where libfuse's own complaints ("mountpoint is not empty") land too. A status pipe
tells the caller "failed, because ..." in one sentence, or closes when libfuse calls `init`,
i.e. when the kernel has the mount.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from kfs.fuse.mounts import MountError, is_dead, is_mounted, unmount
from kfs.fuse.readahead import DEFAULT_KIB as DEFAULT_READAHEAD_KIB
from kfs.fuse.readahead import start_widening
from kfs.internal_topics.lines import DECODE_MODES
from kfs.storage import check_log_dirs

__all__ = ["MountError", "is_mounted", "mount", "parse_options", "unmount"]

log = logging.getLogger("kfs.fuse")

MOUNT_TIMEOUT = 30.0  # seconds to wait for the daemon to answer
#: Generic mount(8) options that mount.fuse passes along and that mean nothing here.
IGNORED_OPTIONS = frozenset({
    "rw", "ro", "dev", "nodev", "suid", "nosuid", "exec", "noexec", "auto", "noauto", "user", "nouser",
    "users", "owner", "group", "_netdev", "nofail", "defaults", "async", "sync", "atime", "noatime",
    "relatime", "norelatime", "strictatime", "lazytime", "diratime", "nodiratime", "loop", "x-systemd.automount",
})
#: kfs's own options; everything else is handed to libfuse as `-o key[=value]`.
KFS_OPTIONS = frozenset({"isolation", "control", "decode", "log", "size_cache", "size_scan", "verbose", "debug",
                         "foreground", "readahead", "schemas", "schemas_topic",
                         "nonempty", "native_read"})
#: libfuse options that would keep a file's cached pages across opens whatever changed under it.
REFUSED_CACHE_OPTIONS = ("kernel_cache", "auto_cache")


def parse_options(strings: list[str] | None) -> dict[str, Any]:
    """`["allow_other,isolation=read_committed", "ro"]` -> {"allow_other": True, "isolation": ...}."""
    options: dict[str, Any] = {}
    for string in strings or []:
        for item in string.split(","):
            item = item.strip()
            if not item:
                continue
            key, sep, value = item.partition("=")
            if key in IGNORED_OPTIONS or key.startswith("x-") or key.startswith("comment="):
                continue
            options[key] = value if sep else True
    return options


# What a user may mean by "no size cache": all are `none`, never a directory created under that name.
NO_SIZE_CACHE = frozenset({"none", "off", "no", "false"})


def check_options(options: dict[str, Any]) -> None:
    """Refuse an option's value in one sentence; normalise `size_cache`'s ways of saying none."""
    isolation = options.get("isolation", "read_uncommitted")
    if isolation not in ("read_uncommitted", "read_committed"):
        raise MountError(f"isolation must be read_uncommitted or read_committed, not {isolation}.")
    control = options.get("control", "hide")
    if control not in ("hide", "show"):
        raise MountError(f"control must be hide or show, not {control}.")
    decode = options.get("decode", "auto")
    if decode not in DECODE_MODES:
        raise MountError(f"decode must be auto or raw, not {decode}.")
    if str(options.get("native_read", "yes")) not in ("yes", "no", "True"):
        raise MountError(f"native_read must be yes or no, not {options['native_read']}.")
    cache = options.get("size_cache")
    if isinstance(cache, str) and cache.lower() in NO_SIZE_CACHE:  # (a directory of that name: ./off)
        options["size_cache"] = "none"
    scan = str(options.get("size_scan", "yes"))
    if scan not in ("yes", "no", "True"):
        raise MountError(f"size_scan must be yes or no, not {scan}.")
    readahead = str(options.get("readahead", DEFAULT_READAHEAD_KIB))
    if not readahead.isdigit():
        raise MountError(f"readahead must be a size in KiB (0: the kernel's), not {readahead}.")
    for name in REFUSED_CACHE_OPTIONS:
        if options.get(name):
            raise MountError(f"{name} is not supported: kfs decides at each open whether the pages the kernel "
                             "cached are still the file's bytes (a segment grows, rolls, or is replaced by the "
                             "log cleaner); -o direct_io keeps decoded files out of the page cache instead.")


def default_log_path(mountpoint: str) -> str:
    """$XDG_RUNTIME_DIR/kfs/<mountpoint>.log, else /tmp/kfs-<uid>/<mountpoint>.log."""
    name = os.path.abspath(mountpoint).strip("/").replace("/", "_") or "root"
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    base = os.path.join(runtime, "kfs") if runtime and os.access(runtime, os.W_OK) else f"/tmp/kfs-{os.getuid()}"
    return os.path.join(base, name + ".log")


def mount(logdirs: list[str], mountpoint: str, options: dict[str, Any] | None = None,
          foreground: bool = False) -> int | None:
    """Mount `logdirs` read-only at `mountpoint`. Returns the daemon's pid (None in the foreground,
    where it returns when unmounted). Raises MountError with one sentence when it cannot."""
    options = dict(options or {})
    check_options(options)
    logdirs = [os.path.abspath(p) for p in check_log_dirs(logdirs)]
    check_mountpoint(mountpoint, bool(options.get("nonempty")))
    check_size_cache(options, logdirs)
    if options.get("schemas"):  # (checked here, in the caller: one sentence, not a daemon that fails)
        from kfs.registry.sources import SchemasSourceError, check_schemas_source
        try:
            options["schemas"] = check_schemas_source(str(options["schemas"]))
        except SchemasSourceError as exc:
            raise MountError(str(exc)) from None
    mountpoint = os.path.abspath(mountpoint)
    log_path = os.path.abspath(str(options.get("log") or default_log_path(mountpoint)))
    options["log"] = log_path
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    try:  # fail here, in the caller, with one sentence when libfuse is missing
        from kfs.fuse import binding  # noqa: F401
    except ImportError as exc:
        raise MountError(str(exc)) from None
    if foreground:
        serve(logdirs, mountpoint, options, stderr_too=True)
        return None
    return _spawn(logdirs, mountpoint, options, log_path)


def check_size_cache(options: dict[str, Any], logdirs: list[str]) -> None:
    """A `size_cache=DIR` the daemon may use (kfs.views.size_cache.claim_directory), said here in one
    sentence rather than in the daemon log: never a log dir or near one, never a directory of others'
    files. An unwritable one is the daemon's to report (it goes on without a cache)."""
    directory = options.get("size_cache")
    if not directory or directory is True or directory == "none":
        return
    from kfs.views.size_cache import CacheDirectoryError, claim_directory

    try:
        options["size_cache"] = claim_directory(str(directory), logdirs)
    except CacheDirectoryError as exc:
        raise MountError(str(exc)) from None
    except OSError:
        pass


def check_mountpoint(mountpoint: str, nonempty: bool = False) -> None:
    """An empty directory that nothing is mounted on (a non-empty one with `nonempty`)."""
    if is_dead(mountpoint):
        raise MountError(f"{mountpoint} is a mount whose daemon died (Transport endpoint is not connected): "
                         f"clear it with `kfs umount {mountpoint}` and mount again.")
    if not os.path.isdir(mountpoint):
        raise MountError(f"mount point {mountpoint} is not a directory.")
    if is_mounted(mountpoint):
        raise MountError(f"{mountpoint} is already a mount point (`kfs umount {mountpoint}` first).")
    if not nonempty and os.listdir(mountpoint):
        raise MountError(f"mount point {mountpoint} is not empty: the mount would hide its files "
                         "(give -o nonempty to mount over them anyway).")


def _spawn(logdirs: list[str], mountpoint: str, options: dict[str, Any], log_path: str) -> int:
    read_end, write_end = os.pipe()
    request = json.dumps({"logdirs": logdirs, "mountpoint": mountpoint, "options": options, "status_fd": write_end})
    with open(log_path, "ab") as log_file:
        child = subprocess.Popen(
            [sys.executable, "-m", "kfs.fuse.mount", "--serve", request],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log_file,
            pass_fds=(write_end,), start_new_session=True, close_fds=True,
            cwd="/", env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    os.close(write_end)
    message = b""
    deadline = time.monotonic() + MOUNT_TIMEOUT
    poller = select.poll()  # not select(): it fails on descriptors >= 1024
    poller.register(read_end, select.POLLIN | select.POLLHUP)
    try:
        while time.monotonic() < deadline:
            if poller.poll(50):
                chunk = os.read(read_end, 4096)
                if chunk:
                    message += chunk
                    continue
                break  # closed: the daemon reached init, or died
            if child.poll() is not None:
                break
    finally:
        os.close(read_end)
    deadline = time.monotonic() + MOUNT_TIMEOUT
    while not message and child.poll() is None and not is_mounted(mountpoint) and time.monotonic() < deadline:
        time.sleep(0.01)
    if message or not is_mounted(mountpoint):
        if child.poll() is None:
            child.terminate()
        reason = message.decode(errors="replace").strip() or _last_log_line(log_path) or "the daemon exited"
        raise MountError(f"could not mount at {mountpoint}: {reason} (log: {log_path}).")
    return child.pid


def _last_log_line(log_path: str) -> str:
    try:
        with open(log_path, "rb") as f:
            f.seek(max(0, os.path.getsize(log_path) - 4096))
            lines = [line.strip() for line in f.read().decode(errors="replace").splitlines() if line.strip()]
        return lines[-1] if lines else ""
    except OSError:
        return ""


def setup_logging(log_path: str, debug: bool = False, stderr_too: bool = False) -> None:
    handlers: list[logging.Handler] = [logging.FileHandler(log_path)]
    if stderr_too:
        handlers.append(logging.StreamHandler())
    logging.basicConfig(level=logging.DEBUG if debug else logging.INFO, handlers=handlers, force=True,
                        format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s")
    logging.getLogger("fuse").setLevel(logging.DEBUG if debug else logging.WARNING)
    logging.getLogger("kfs.requests").setLevel(logging.INFO if debug else logging.WARNING)


def serve(logdirs: list[str], mountpoint: str, options: dict[str, Any], status_fd: int | None = None,
          stderr_too: bool = False) -> None:
    """Run the daemon in this process until unmounted, or until SIGINT/SIGTERM/SIGHUP (libfuse's
    handlers end its loop and unmount): both are a clean stop. MountError when it cannot mount."""
    setup_logging(options["log"], bool(options.get("debug")), stderr_too)
    if options.get("verbose"):
        logging.getLogger("kfs.requests").setLevel(logging.INFO)
    try:
        from kfs.fuse import binding, fast_small, native_read
        from kfs.fuse.malloc import bound_heap
        from kfs.fuse.operations import CACHE_DEFAULTS, KfsOperations
        from kfs.fuse.replicas_tree import mount_tree
        from kfs.fuse.tree import SMALL_TTL
        from kfs.views.size_cache import CacheDirectoryError, SizeCache, default_directory

        cache_dir = str(options.get("size_cache") or default_directory())
        try:
            cache = SizeCache(None if cache_dir == "none" else os.path.abspath(cache_dir), logdirs=logdirs)
        except CacheDirectoryError as exc:
            if options.get("size_cache"):
                raise
            log.warning("%s Going on without a size cache.", exc)  # (the default directory: not worth failing for)
            cache = SizeCache(None)
        watch = None
        if options.get("decode", "auto") != "raw":  # the schema registry's state, followed as it changes
            from kfs.registry.sources import RegistryWatch
            watch = RegistryWatch(logdirs, options.get("schemas") or None,
                                  str(options.get("schemas_topic") or "_schemas"))
        # (several brokers' log dirs: their replicas too, kfs.fuse.replicas_tree)
        tree = mount_tree(logdirs, isolation=options.get("isolation", "read_uncommitted"),
                          control=options.get("control", "hide"), decode=options.get("decode", "auto"), cache=cache,
                          registry_watch=watch)
        operations = KfsOperations(tree, size_scan=str(options.get("size_scan", "yes")) != "no",
                                   given=frozenset(name for name in CACHE_DEFAULTS if name in options))
        fuse_options = {k: v for k, v in options.items() if k not in KFS_OPTIONS}
        fuse_options.pop("ro", None)
        if fuse_options.get("allow_other"):
            fuse_options["default_permissions"] = True
        if options.get("nonempty") and binding.LIBFUSE_MAJOR == 2:  # libfuse3 always allows it, and
            fuse_options["nonempty"] = True                          # rejects the option as unknown
        fuse_options.setdefault("fsname", "kfs:" + logdirs[0])
        fuse_options.setdefault("subtype", "kfs")
        bound_heap()
    except Exception as exc:
        log.error("could not mount at %s: %s", mountpoint, exc)
        _report(status_fd, f"{exc}")
        raise MountError(f"could not mount at {mountpoint}: {exc}") from None
    libfuse_stderr = _LibfuseStderr()
    mounted = threading.Event()

    def on_init() -> None:
        libfuse_stderr.release()
        mounted.set()
        start_widening(mountpoint, int(options.get("readahead", DEFAULT_READAHEAD_KIB)))

    _hook_init(operations, on_init, status_fd)
    log.info("starting daemon for %s at %s with %s", logdirs, mountpoint, fuse_options)
    fast: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
    if fast_small.available() and not options.get("verbose"):  # (-v logs every request: all of them in Python)
        fast = fast_small.installed(tree, SMALL_TTL, operations.all_direct_io)
        if native_read.available() and str(options.get("native_read", "yes")) != "no":
            operations.native_reads = native_read.NativeReads(tree.foreground.touch,
                                                              lambda: fast_small.serving(tree))
    try:
        with fast:
            binding.FUSE(operations, mountpoint, foreground=True, ro=True, raw_fi=True, **fuse_options)
    except Exception as exc:
        said = libfuse_reason(libfuse_stderr.release())
        if mounted.is_set() and not is_mounted(mountpoint):
            # libfuse's loop ended on SIGINT/SIGTERM/SIGHUP (fuse_main reports that as 8) and unmounted.
            log.info("stopped by a signal (libfuse status %s); unmounted %s", exc, mountpoint)
            return
        reason = said or f"libfuse status {exc}"
        log.error("could not mount at %s: libfuse says: %s", mountpoint, reason)
        _report(status_fd, f"libfuse says: {reason}")
        raise MountError(f"could not mount at {mountpoint}: libfuse says: {reason}.") from None
    finally:
        libfuse_stderr.release()
    log.info("unmounted %s", mountpoint)


def libfuse_reason(text: str) -> str:
    """libfuse's own lines from what it wrote to stderr ("fuse: unknown option(s): `-o foo'",
    "fusermount3: option allow_other only allowed if 'user_allow_other' is set in /etc/fuse.conf")."""
    lines = []
    for line in text.splitlines():
        line = line.strip()
        if not line or _LOG_LINE.match(line) or line.startswith(_NOISE.decode()):
            continue
        lines.append(line.removeprefix("fuse: "))
    return "; ".join(lines)


#: libfuse 3.14's fuse_main warns about its own unset thread limit on every mount: not news to a user.
_NOISE = b"Ignoring invalid max threads value"
_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ \d+ [A-Z]+ ")


class _LibfuseStderr:
    """libfuse says why a mount failed only on stderr (fd 2), so fd 2 points at a temporary file from
    the mount until `init` (or failure); then it is restored and what was caught is written to it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # A memory file, not a temporary one: the daemon creates no file outside its log and cache.
        self._file = os.fdopen(os.memfd_create("kfs-libfuse-stderr", os.MFD_CLOEXEC), "w+b")
        sys.stderr.flush()
        self._saved: int | None = os.dup(2)
        os.dup2(self._file.fileno(), 2)

    def release(self) -> str:
        """Restore fd 2 (once), replay the caught bytes there, and return them as text."""
        with self._lock:
            if self._saved is None:
                return ""
            sys.stderr.flush()
            os.dup2(self._saved, 2)
            os.close(self._saved)
            self._saved = None
            self._file.seek(0)
            caught = self._file.read()
            self._file.close()
        shown = b"".join(line for line in caught.splitlines(keepends=True) if not line.startswith(_NOISE))
        if shown:
            with contextlib.suppress(OSError):
                os.write(2, shown)
        return caught.decode(errors="replace")


def _report(status_fd: int | None, message: str) -> None:
    if status_fd is not None:
        try:
            os.write(status_fd, message.encode())
            os.close(status_fd)
        except OSError:
            pass


def _hook_init(operations: Any, on_init: Callable[[], None], status_fd: int | None) -> None:
    """Call `on_init` when libfuse has the mount (init runs on the first kernel request), then close
    the status pipe: the caller takes a close without a message as success."""
    pending = [status_fd] if status_fd is not None else []

    def close_once() -> None:
        while pending:
            with contextlib.suppress(OSError):
                os.close(pending.pop())

    for name in ("init_with_config", "init"):
        original = getattr(type(operations), name, None)
        if original is None:
            continue

        def hooked(*args: Any, _original: Any = original) -> Any:
            on_init()
            try:
                return _original(operations, *args)
            finally:
                close_once()

        setattr(operations, name, hooked)


def _main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--serve":
        request = json.loads(argv[1])
        try:
            serve(request["logdirs"], request["mountpoint"], request["options"], request["status_fd"])
        except MountError:  # logged, and the caller has the sentence through the status pipe
            return 1
        return 0
    print("usage: python -m kfs.fuse.mount --serve JSON (internal; use `kfs mount`)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
