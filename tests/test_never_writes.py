"""kfs never writes: every modifying call through a mount answers EROFS, and no kfs process (the
mount's daemon, `kfs cat/ls/locate/dump`) opens a file under a log dir for writing or changes one,
checked with `strace -f` over the whole process tree while the tree is read and the sweep runs.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import LOGDIRS
from mounts import mounted, needs_fuse

needs_strace = pytest.mark.skipif(not shutil.which("strace"), reason="needs strace")

OPEN_FLAGS = {
    "O_WRONLY": os.O_WRONLY, "O_RDWR": os.O_RDWR, "O_CREAT": os.O_CREAT | os.O_RDONLY,
    "O_TRUNC": os.O_TRUNC | os.O_RDONLY, "O_APPEND|O_WRONLY": os.O_APPEND | os.O_WRONLY,
    "O_CREAT|O_EXCL|O_WRONLY": os.O_CREAT | os.O_EXCL | os.O_WRONLY,
}


def targets(mnt: Path) -> dict[str, tuple[str, Path]]:
    """One path of every kind the tree has, and new names in its directories: kind -> (role, path)."""
    partition = mnt / "orders-0"
    return {
        "root": ("root", mnt), "partition dir": ("dir", partition), "offset dir": ("dir", partition / "offset"),
        "messages.jsonl": ("file", partition / "messages.jsonl"), "info.json": ("file", partition / "info.json"),
        "offset value": ("file", partition / "offset" / "700.value"),
        "offset view": ("file", partition / "offset" / "700.jsonl"),
        "time view": ("file", partition / "time" / "1526384725718.jsonl"),
        "new name in root": ("new", mnt / "new-0"), "new name in a partition": ("new", partition / "new.log"),
        "new name in offset": ("new", partition / "offset" / "5.txt"),
    }


def calls(role: str, path: Path, other: Path) -> Iterator[tuple[str, Callable[[], object]]]:
    """Every call that would modify `path` (`other`: an existing file of the mount, for rename and link).

    Only calls where a read-only filesystem has nothing to answer but EROFS: POSIX checks come first
    elsewhere (EISDIR for a directory opened for writing, EEXIST for creating an existing name, and
    the mount root's own name belongs to the filesystem above it)."""
    if role == "file":
        for name in ("O_WRONLY", "O_RDWR", "O_TRUNC", "O_APPEND|O_WRONLY"):
            yield f"open({name})", lambda flags=OPEN_FLAGS[name]: os.close(os.open(path, flags))
        yield "truncate", lambda: os.truncate(path, 0)
        yield "unlink", lambda: os.unlink(path)
    if role in ("file", "dir"):
        yield "rename", lambda: os.rename(path, path.with_name(path.name + ".moved"))
        yield "rename onto", lambda: os.rename(other, path)
    if role == "dir":
        yield "rmdir", lambda: os.rmdir(path)
    if role in ("file", "dir", "root"):
        yield "chmod", lambda: os.chmod(path, 0o777)
        yield "chown", lambda: os.chown(path, os.getuid(), os.getgid())
        yield "utime", lambda: os.utime(path, (0, 0))
        yield "setxattr", lambda: os.setxattr(path, "user.kfs", b"x")
        yield "removexattr", lambda: os.removexattr(path, "user.kfs")
    if role == "new":
        for name in ("O_WRONLY", "O_CREAT", "O_CREAT|O_EXCL|O_WRONLY"):
            yield f"open({name})", lambda flags=OPEN_FLAGS[name] | os.O_CREAT: os.close(os.open(path, flags, 0o644))
        yield "mkdir", lambda: os.mkdir(path)
        yield "symlink", lambda: os.symlink("/etc/passwd", path)
        yield "link", lambda: os.link(other, path)
        yield "mknod", lambda: os.mknod(path, stat.S_IFIFO | 0o644)
        yield "rename into", lambda: os.rename(other, path)


def sweep(mnt: Path) -> list[str]:
    """Run every call on every kind of path; what did not fail with EROFS."""
    wrong = []
    paths = targets(mnt)
    n = 0
    for kind, (role, path) in paths.items():
        other = paths["info.json"][1] if kind != "info.json" else paths["messages.jsonl"][1]
        for call, fn in calls(role, path, other):
            n += 1
            try:
                fn()
            except OSError as e:
                if e.errno != errno.EROFS:
                    wrong.append(f"{call} on {kind}: {errno.errorcode.get(e.errno, e.errno)}")
            else:
                wrong.append(f"{call} on {kind}: succeeded")
    assert n > 80
    # fallocate needs a descriptor open for writing, which every open above refused: on a read-only
    # descriptor it must fail without writing (EBADF), never succeed.
    fd = os.open(paths["messages.jsonl"][1], os.O_RDONLY)
    try:
        os.posix_fallocate(fd, 0, 4096)
        wrong.append("fallocate on a read-only descriptor: succeeded")
    except OSError as e:
        if e.errno not in (errno.EBADF, errno.EROFS):
            wrong.append(f"fallocate: {errno.errorcode.get(e.errno, e.errno)}")
    finally:
        os.close(fd)
    return wrong


def digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() + oct(p.stat().st_mode)
            for p in sorted(root.rglob("*")) if p.is_file()}


@needs_fuse
def test_every_modifying_call_through_the_mount_answers_erofs(tmp_path: Path) -> None:
    before = {d: digest(Path(d)) for d in LOGDIRS}
    with mounted(tmp_path) as mnt:
        wrong = sweep(mnt)
        assert (mnt / "orders-0" / "offset" / "700.value").read_bytes()  # the mount still reads
    assert not wrong, "\n".join(wrong)
    assert {d: digest(Path(d)) for d in LOGDIRS} == before


# ---- strace over every kfs process -------------------------------------------------------------------

MODIFYING = ("open", "openat", "openat2", "creat", "truncate", "ftruncate", "unlink", "unlinkat", "rename",
             "renameat", "renameat2", "mkdir", "mkdirat", "rmdir", "link", "linkat", "symlink", "symlinkat",
             "chmod", "fchmod", "fchmodat", "chown", "fchown", "lchown", "fchownat", "utimensat", "utimes",
             "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr", "mknod",
             "mknodat", "fallocate")
WRITE_FLAGS = re.compile(r"O_WRONLY|O_RDWR|O_CREAT|O_TRUNC|O_APPEND")


def writes_under(trace: str, root: str) -> list[str]:
    """The traced calls that open a file under `root` for writing or change something there."""
    found = []
    for line in trace.splitlines():
        m = re.match(r"\d+\s+(\w+)\((.*)", line)
        if not m or root not in line:
            continue
        call, args = m.groups()
        if call in ("open", "openat", "openat2", "creat"):
            if call == "creat" or WRITE_FLAGS.search(args):
                found.append(line)
        elif call != "ftruncate":
            found.append(line)
    return found


def strace(out: Path, command: list[str], **kwargs: object) -> subprocess.Popen:
    # -y: a descriptor argument shows its path, so calls relative to a directory descriptor
    # (the size cache's openat/unlinkat/renameat) name where they act.
    return subprocess.Popen(["strace", "-f", "-qq", "-y", "-o", str(out), "-e", "trace=" + ",".join(MODIFYING),
                             *command], **kwargs)  # type: ignore[call-overload]


FD_PATH = re.compile(r"\b(?:AT_FDCWD|\d+<([^>]*)>),\s*\"([^\"]*)\"")
PATH_ARG = re.compile(r"\"([^\"]*)\"")
FD_ONLY_CALLS = ("ftruncate", "fchmod", "fchown", "fsetxattr", "fremovexattr", "fallocate")


def changed_paths(trace: str) -> Iterator[tuple[str, str, str]]:
    """(call, absolute path, line) of every call in `trace` that succeeded and created, opened for
    writing, removed, renamed or changed a name (calls on a descriptor alone change what was opened
    for writing already, and are counted there)."""
    for line in trace.splitlines():
        m = re.match(r"\d+\s+(\w+)\((.*)", line)
        if not m or re.search(r"= -1 E", line) or m.group(1) in FD_ONLY_CALLS:
            continue
        call, args = m.groups()
        if call in ("open", "openat", "openat2") and not WRITE_FLAGS.search(args):
            continue
        relative = {name: directory for directory, name in FD_PATH.findall(args)}
        for name in PATH_ARG.findall(args):
            directory = relative.get(name)
            yield call, os.path.join(directory, name) if directory and not name.startswith("/") else name, line


def changes_outside(traces: list[str], allowed: list[str]) -> tuple[int, list[str]]:
    """How many changing calls the traces hold, and those acting outside `allowed` (prefixes).
    Python's own bytecode cache (__pycache__) is not kfs's doing and is left out."""
    count, outside = 0, []
    for trace in traces:
        for _call, path, line in changed_paths(trace):
            count += 1
            if "/__pycache__/" in path or any(path == a.rstrip("/") or path.startswith(a.rstrip("/") + "/")
                                              for a in allowed):
                continue
            outside.append(line)
    return count, outside


@needs_fuse
@needs_strace
def test_no_kfs_process_opens_a_log_dir_file_for_writing(tmp_path: Path) -> None:
    logdirs = []
    for d in LOGDIRS:  # a copy: its path marks every call that touches it in the trace
        copy = tmp_path / "data" / Path(d).name
        shutil.copytree(d, copy)
        logdirs.append(str(copy))
    root = str(tmp_path / "data")
    before = digest(tmp_path / "data")
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    kfs = [sys.executable, "-m", "kfs.cli.main"]
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    trace = tmp_path / "mount.trace"
    daemon = strace(trace, [*kfs, "mount", "-f", "-o", f"log={tmp_path / 'daemon.log'}", *logdirs, str(mnt)],
                    env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not os.path.ismount(mnt):
            assert daemon.poll() is None and time.monotonic() < deadline, daemon.stderr.read() if daemon.stderr else ""
            time.sleep(0.2)
        for partition in sorted(p.name for p in mnt.iterdir()):
            for name in ("messages.jsonl", "info.json"):
                with contextlib.suppress(OSError):
                    (mnt / partition / name).read_bytes()
            with contextlib.suppress(OSError):
                (mnt / partition / "offset" / "3.value").read_bytes()
        (mnt / "orders-0" / "time" / "1526384725718.jsonl").read_bytes()
        device = os.stat(mnt).st_dev
        own_readahead = f"/sys/class/bdi/{os.major(device)}:{os.minor(device)}/read_ahead_kb"  # (kfs.fuse.readahead)
        wrong = sweep(mnt)
    finally:
        subprocess.run(["fusermount3", "-u", str(mnt)], check=False)
        try:
            daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=30)
    assert not wrong, "\n".join(wrong)
    traces = [trace.read_text()]
    segment = next(Path(logdirs[0]).glob("orders-0/*.log"))
    for i, command in enumerate((["ls", *logdirs], ["cat", logdirs[0], "orders-0"],
                                 ["cat", logdirs[1], "payments-0", "--isolation", "read_committed"],
                                 ["locate", logdirs[0], "orders-0", "--time", "1526384725718"],
                                 ["dump", str(segment), "--deep-iteration", "--print-data-log"],
                                 ["dump", str(segment.with_suffix(".index")), "--verify-index-only"])):
        out = tmp_path / f"cli{i}.trace"
        done = strace(out, [*kfs, *command], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        assert done.wait(timeout=300) == 0, (command, done.stderr.read() if done.stderr else "")
        traces.append(out.read_text())
    assert sum(t.count(root) for t in traces) > 0, "the trace saw no call on the log dirs at all"
    found = [line for t in traces for line in writes_under(t, root)]
    assert not found, "\n".join(found[:20])
    assert digest(tmp_path / "data") == before
    # Nor anywhere else: every file created, opened for writing, removed or renamed by any kfs
    # process is in its size cache, its log, a device (/dev/fuse, /dev/null) or the mount's own
    # readahead setting.
    changes, outside = changes_outside(traces, [str(tmp_path / "cache"), str(tmp_path / "daemon.log"), "/dev/",
                                                own_readahead])
    print(f"audit: {sum(len(t.splitlines()) for t in traces)} calls traced, {changes} changing a name or "
          f"opening for writing, {len(outside)} outside the cache, the log and /dev")
    assert not outside, "\n".join(outside[:20])
    assert changes > 0  # (the cache was written: the audit sees the calls it checks)
