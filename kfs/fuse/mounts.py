"""What the kernel has mounted where, and undoing a mount, dead daemon or not.

`os.path.ismount` stats the path, and a FUSE mount whose daemon died answers every stat with
ENOTCONN ("Transport endpoint is not connected"), so the mount table (`/proc/self/mountinfo`)
is asked instead: a dead mount is still listed there until someone unmounts it.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import subprocess

from kfs.storage import KfsError


class MountError(KfsError):
    """A mount or unmount that did not happen; the message is one sentence."""


_OCTAL_ESCAPE = re.compile(r"\\([0-7]{3})")


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash in paths as \\040, \\011, \\012, \\134."""
    return _OCTAL_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), field)


def mount_table() -> dict[str, tuple[str, str, str]]:
    """mount point -> (mount id, filesystem type, source) from /proc/self/mountinfo, the topmost
    mount where several are stacked (listed last); {} without /proc."""
    found: dict[str, tuple[str, str, str]] = {}
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
            for line in f:
                fields = line.split()
                if "-" in fields[6:]:
                    separator = fields.index("-", 6)
                    fstype = fields[separator + 1] if separator + 1 < len(fields) else ""
                    source = _unescape(fields[separator + 2]) if separator + 2 < len(fields) else ""
                    found[_unescape(fields[4])] = (fields[0], fstype, source)
    except OSError:
        pass
    return found


def mount_points() -> dict[str, str]:
    """mount point -> filesystem type (`fuse.kfs`, ...) from /proc/self/mountinfo; {} without /proc."""
    return {point: fstype for point, (_id, fstype, _source) in mount_table().items()}


def is_kfs_mount(fstype: str, source: str) -> bool:
    """kfs mounts with `subtype=kfs` and `fsname=kfs:<logdir>`: the kernel lists them as `fuse.kfs`;
    where the subtype did not reach the kernel (libfuse 2, an old fusermount), as `fuse` with that
    source (or `kfs#<fsname>`, fusermount's spelling of the subtype then)."""
    return fstype == "fuse.kfs" or (fstype == "fuse" and source.startswith(("kfs:", "kfs#")))


def _canonical(path: str) -> str:
    """The absolute path with symlinks resolved, as the mount table spells it (never raises)."""
    return os.path.realpath(os.path.abspath(path))


def is_mounted(mountpoint: str) -> bool:
    """Something is mounted at `mountpoint`, answering or not."""
    points = mount_points()
    if points:
        return _canonical(mountpoint) in points
    try:
        return os.path.ismount(mountpoint)
    except OSError:
        return False


def is_dead(mountpoint: str) -> bool:
    """A FUSE mount whose daemon is gone: statfs fails with ENOTCONN (a stat may still be answered
    from the kernel's attribute cache; statfs never is)."""
    try:
        os.statvfs(mountpoint)
    except OSError as exc:
        # ECONNABORTED: a request in flight when the daemon's /dev/fuse closed; ENOTCONN ever after.
        return exc.errno in (errno.ENOTCONN, errno.ECONNABORTED)
    return False


def unmount(mountpoint: str, lazy: bool = False) -> None:
    """`fusermount3 -u` (or `fusermount -u`, or umount as root), also for a mount whose daemon died;
    only a kfs mount (`is_kfs_mount`): anything else mounted there is left alone, whoever asks (as
    root, `kfs umount /var/lib/kafka` would unmount a broker's data disk). Raises MountError in one
    sentence."""
    mountpoint = os.path.abspath(mountpoint)
    target = _canonical(mountpoint)
    table = mount_table()
    if not table:  # no /proc: only FUSE's own tools, which refuse what is not FUSE
        if not is_mounted(mountpoint):
            raise MountError(f"{mountpoint} is not mounted.")
    elif target not in table:
        raise MountError(f"{mountpoint} is not mounted.")
    mount_id, fstype, source = table.get(target, ("", "", ""))
    if table and not is_kfs_mount(fstype, source):
        raise MountError(f"{mountpoint} is not a kfs mount (it is {fstype or 'unknown'}): "
                         "kfs umount unmounts only kfs's own mounts.")
    dead = is_dead(mountpoint)
    commands = []
    for tool in ("fusermount3", "fusermount"):
        if shutil.which(tool):
            commands.append([tool, "-u", *(["-z"] if lazy else []), target])
    if table and os.geteuid() == 0 and shutil.which("umount"):  # (a kfs mount, checked above)
        commands.append(["umount", *(["-l"] if lazy else []), target])
    if dead and not lazy:  # a dead mount still held open by a shell's cwd: detach it, nothing to wait for
        commands += [[*c[:-1], "-l" if c[0] == "umount" else "-z", c[-1]] for c in list(commands)]
    error = "no fusermount3, fusermount or umount found"
    for command in commands:
        # Done once that mount is gone: what is (or is again) mounted there is not ours to touch.
        if table and _topmost_id(target) != mount_id:
            return
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode == 0 and (_topmost_id(target) != mount_id if table else not is_mounted(target)):
            return
        error = (done.stderr.strip().splitlines() or [f"{command[0]} failed"])[-1]
    raise MountError(f"could not unmount {mountpoint}: {error}.")


def _topmost_id(target: str) -> str | None:
    entry = mount_table().get(target)
    return entry[0] if entry else None
