"""Who may read what through the mount: never more than on disk (README: "Permissions").

The mount is served by a daemon that may run as root, and with `allow_other` the kernel checks each
access against the owner, group and mode kfs reports (`default_permissions`). A file of the mount is
made from several files on disk (a decoded view from every segment it reads, the mount root from
every log dir), so what it reports must let through no one who could not read every one of them:

    access(view) = narrow(narrow(access(f1), f2), ..., fn)

The view takes the first file's owner and group (V_u, V_g), and each class of the view keeps a
permission bit only where every file grants it to everyone that class may hold, whatever their
other groups (group lists are never looked up):

- owner (the one user V_u): a file owned by V_u grants its owner bits; any other file its group
  bits AND its other bits (V_u may or may not be in that file's group);
- group (users of V_g other than V_u): a file of group V_g grants its group bits, any other file
  group AND other; and where the file's owner is not V_u, AND its owner bits (that owner may be a
  member of V_g, and on disk gets only the owner bits);
- other: the file's other bits; AND its owner bits where its owner is not V_u, AND its group bits
  where its group is not V_g (such a user may be that owner, or in that group).

A directory that holds what a view reads counts for its search bits only (`as_search`: reaching
inside a directory takes its search bit, not its read bit): a partition directory of the mount is the
partition directory on disk narrowed by its log dir's search bits. The mount root is every log dir
combined whole (it lists them all), and a directory whose names are read from files (`.groups`)
counts those files' read bits as its search bits too (`as_directory`).

Where every file has the same owner and group this is the AND of their modes. Where owners differ
the view's owner falls back to what the files grant the group and other classes: never more than
on disk, at times less (the price of not looking up group lists). Special bits (setgid on a
directory) are the first file's; they grant no reading. Combining a combined result with another
file the same way stays within the rule (a combined result is a "file" no class of which grants
more than each of its files), so per-partition results can be kept and combined (kfs.fuse.tree).
ACLs are not read: the mode's group bits are an ACL's mask, but a named user's entry that denies
what the other class grants is not seen.
"""

from __future__ import annotations

import os
import stat

PERMISSIONS = 0o777

#: (uid, gid, mode) of a file on disk, or of a combination of files.
Access = tuple[int, int, int]


def access_of(st: os.stat_result) -> Access:
    return st.st_uid, st.st_gid, st.st_mode


def narrow(acc: Access, uid: int, gid: int, mode: int) -> Access:
    """`acc` (the view so far, its owner and group stay) further limited to what the file
    (`uid`, `gid`, `mode`) lets each of its classes read (the rule in the module docstring)."""
    view_uid, view_gid, view_mode = acc
    if uid == view_uid and gid == view_gid:
        return view_uid, view_gid, view_mode & (mode | ~PERMISSIONS)
    owner, group, other = (mode >> 6) & 7, (mode >> 3) & 7, mode & 7
    same_group = gid == view_gid
    if uid == view_uid:
        allowed_owner = owner
        allowed_group = group if same_group else group & other
        allowed_other = other & (7 if same_group else group)
    else:
        allowed_owner = group & other
        allowed_group = (group if same_group else group & other) & owner
        allowed_other = other & owner & (7 if same_group else group)
    allowed = allowed_owner << 6 | allowed_group << 3 | allowed_other
    return view_uid, view_gid, view_mode & (allowed | ~PERMISSIONS)


def narrow_by(acc: Access, other: Access) -> Access:
    return narrow(acc, *other)


def combined(accesses: list[Access]) -> Access:
    """The access of a file made from all of `accesses` (at least one), owned as the first."""
    acc = accesses[0]
    for other in accesses[1:]:
        acc = narrow(acc, *other)
    return acc


def suffixes(accesses: list[Access]) -> list[Access]:
    """[combined access of accesses[i:] for each i], each owned as accesses[i], in one pass from the
    end (each is the file at i narrowed by the combination after it, taken as one file)."""
    out = list(accesses)
    for i in range(len(out) - 2, -1, -1):
        out[i] = narrow(out[i], *out[i + 1])
    return out


def as_directory(acc: Access) -> Access:
    """A file's access as a directory's made from it: its read bits also allow searching
    (listing or looking up a name in a directory made from a file reveals that file's content)."""
    uid, gid, mode = acc
    readable = mode & (stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    return uid, gid, (mode & ~0o111) | (readable >> 2)


def as_search(acc: Access) -> Access:
    """A directory's access as what it gates below it: on disk a directory's read bit lists its own
    names only, and its search bit decides whether anything inside can be reached at all. So a
    class that may search it keeps every bit, one that may not keeps none."""
    uid, gid, mode = acc
    return uid, gid, (mode & ~PERMISSIONS) | (mode & 0o111) * 7

