"""The partition target through a real mount: `kfs cat` against `cat MNT/<partition>/messages.jsonl`.

The in-process differential (fuzz_targets.run_partition_input) reads the decoded view the way the
daemon does; this runs the real commands on the same damaged log dir: `kfs cat`, `kfs mount` (a
detached daemon, no size cache), `stat` and `cat` through the kernel, `fusermount3 -u`. A mount costs
about a second, so the campaign does it for every K-th partition input (`--mount-every K`).

They agree when `kfs cat` exits 0 and `cat` gives the same bytes (and `st_size` is their length),
or when `kfs cat` exits 1 after N bytes and `cat` fails with EIO after all N bytes (a view known to
hold damage is opened direct_io), and the size covers that byte. A sendfile copy (`shutil.copyfile`,
which the kernel serves through the page cache even for a direct_io file) is the same bytes, or ends
with EIO after every page before the one holding byte N: never a short copy without an error.
Each input is read through both mounts. A traceback or an error in the daemon log other than
the damage, or a daemon that dies, is a finding too.
"""

from __future__ import annotations

import errno
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

from fuzz_targets import Failure, truth

PAGE = 4096


def _env(scratch: Path) -> dict[str, str]:
    """The commands' environment: kfs's own build (not the campaign's sanitizer copy or pure-Python
    switch), and a cache directory of their own."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS", "KFS_PURE_PYTHON")}
    env["XDG_CACHE_HOME"] = str(scratch / "cache")
    return env


def _kfs(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kfs.cli.main", *args], capture_output=True, env=env,
                          timeout=timeout)


VALUES_PER_MOUNT = 6  # `.value` files read through each page-cached mount


def run_mount_input(partition: str, logdir: Path, scratch: Path) -> None:
    """`kfs cat` and `cat` through a fresh mount agree on the damaged `partition` of `logdir`; so do
    `kfs cat --format value` and `cat offset/<N>.value` for a few of the intact log's offsets."""
    env = _env(scratch)
    shutil.rmtree(scratch / "cache", ignore_errors=True)
    expected = _kfs("cat", str(logdir), partition, env=env)
    if b"Traceback" in expected.stderr or expected.returncode not in (0, 1):
        raise Failure("exception", f"{partition}: kfs cat exit {expected.returncode}: "
                                   f"{expected.stderr.decode(errors='replace')[-400:]}")
    offsets = truth(partition).offsets
    rnd = random.Random(len(expected.stdout))  # (the input's own numbers: a replay reads the same offsets)
    values = [rnd.choice(offsets) for _ in range(VALUES_PER_MOUNT)] if offsets else []
    for direct_io in (False, True):
        _check_through_mount(partition, logdir, scratch, env, expected, direct_io, [] if direct_io else values)


def _check_values(partition: str, logdir: Path, mountpoint: Path, env: dict[str, str], offsets: list[int]) -> None:
    """`cat offset/<N>.value` through the mount against `kfs cat --offset N --format value`: the same
    bytes (a tombstone, exit 3, is an empty file), or both fail, ENOENT where kfs cat says the offset
    holds no record or is out of range, EIO where it says the log is damaged."""
    for offset in offsets:
        want = _kfs("cat", str(logdir), partition, "--offset", str(offset), "--format", "value", env=env)
        got = subprocess.run(["cat", str(mountpoint / partition / "offset" / f"{offset}.value")], capture_output=True,
                             timeout=60)
        said = want.stderr.decode(errors="replace").strip()
        if b"Traceback" in want.stderr or want.returncode not in (0, 1, 3):
            raise Failure("exception", f"{partition}: kfs cat --format value at {offset}: exit {want.returncode}: "
                                       f"{said[-400:]}")
        if want.returncode in (0, 3):
            agree = got.returncode == 0 and got.stdout == want.stdout
        else:
            absent = "out of range" in said or "no record" in said
            agree = got.returncode != 0 and not got.stdout and \
                (b"No such file" if absent else b"Input/output error") in got.stderr
        if not agree:
            cat_said = got.stderr.decode(errors="replace").strip()
            raise Failure("mount-disagreement", f"{partition}: offset {offset}: kfs cat --format value exit "
                                                f"{want.returncode} {len(want.stdout)} bytes ({said[-200:]}); cat "
                                                f"{offset}.value exit {got.returncode} {len(got.stdout)} bytes "
                                                f"({cat_said})")


def _check_through_mount(partition: str, logdir: Path, scratch: Path, env: dict[str, str],
                         expected: subprocess.CompletedProcess, direct_io: bool, values: list[int]) -> None:
    """`cat` and a sendfile copy through a fresh mount (`-o direct_io` or page-cached) against `kfs cat`'s
    `expected`: `cat` gets every byte before the damage (a short read of a direct_io view), as `kfs cat`
    prints it; sendfile fills the page cache, where the page holding the damage fails whole."""
    mountpoint = scratch / "mnt"
    log_path = scratch / "mount.log"
    shutil.rmtree(mountpoint, ignore_errors=True)
    mountpoint.mkdir()
    log_path.unlink(missing_ok=True)
    options = f"size_cache=none,log={log_path}" + (",direct_io" if direct_io else "")
    done = _kfs("mount", str(logdir), str(mountpoint), "-o", options, env=env, timeout=60)
    if done.returncode != 0:
        raise Failure("mount-disagreement", f"{partition}: kfs mount failed: {done.stderr.decode(errors='replace')}")
    try:
        view = mountpoint / partition / "messages.jsonl"
        size = os.stat(view).st_size
        got = subprocess.run(["cat", str(view)], capture_output=True, timeout=120)
        copied, copy_error = _sendfile_copy(view, scratch / "copy")
        _check_values(partition, logdir, mountpoint, env, values)
    finally:
        _unmount(mountpoint)
    want = expected.stdout
    mode = "-o direct_io" if direct_io else "page-cached"
    problem = None
    if expected.returncode == 0:
        if got.returncode != 0 or got.stdout != want or size != len(want) or copied != want:
            problem = (f"kfs cat {len(want)} bytes, exit 0; cat through the mount ({mode}) {len(got.stdout)} bytes, "
                       f"exit {got.returncode} ({got.stderr.decode(errors='replace').strip()}); st_size {size}; "
                       f"sendfile copy {len(copied)} bytes ({copy_error})")
    else:
        at = len(want)
        if got.returncode == 0 or b"Input/output error" not in got.stderr or got.stdout != want or size <= at \
                or copy_error != errno.EIO or copied != want[:at - at % PAGE]:
            problem = (f"kfs cat {at} bytes, then: {expected.stderr.decode(errors='replace').strip()[-300:]}; "
                       f"cat through the mount ({mode}) {len(got.stdout)} bytes, exit {got.returncode} "
                       f"({got.stderr.decode(errors='replace').strip()}); st_size {size}; "
                       f"sendfile copy {len(copied)} bytes (errno {copy_error})")
    if problem:
        raise Failure("mount-disagreement", f"{partition}: {problem}")
    text = log_path.read_text(errors="replace") if log_path.exists() else ""
    if "Traceback" in text or " CRITICAL " in text:
        raise Failure("exception", f"{partition}: the daemon logged a traceback ({mode}): {text[-600:]}")


def _sendfile_copy(view: Path, target: Path) -> tuple[bytes, int | None]:
    """`shutil.copyfile` (sendfile) of `view`: what it copied, and the errno it ended with (None: none)."""
    target.unlink(missing_ok=True)
    code = None
    try:
        shutil.copyfile(view, target)
    except OSError as e:
        code = e.errno
    copied = target.read_bytes() if target.exists() else b""
    target.unlink(missing_ok=True)
    return copied, code


def _unmount(mountpoint: Path) -> None:
    for _ in range(100):
        if subprocess.run(["fusermount3", "-u", str(mountpoint)], capture_output=True).returncode == 0:
            return
        time.sleep(0.1)
    subprocess.run(["fusermount3", "-uz", str(mountpoint)], capture_output=True)
