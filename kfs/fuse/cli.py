"""Command-line entry points of the FUSE layer, called by `kfs.cli.main`.

    kfs mount [-f] [-o OPTS] LOGDIR [LOGDIR ...] MOUNTPOINT    add_mount_commands(subparsers)
    kfs umount MOUNTPOINT
    kfs LOGDIR [LOGDIR ...] MOUNTPOINT -o OPTS                 main_mount_helper(argv)

The last form is what mount.fuse3 runs for `mount -t fuse.kfs LOGDIR MOUNTPOINT` and for an
fstab line `LOGDIR MOUNTPOINT fuse.kfs defaults,allow_other 0 0` (LOGDIR may be a comma-separated
list, as in `log.dirs`). Options: `allow_other` (implies `default_permissions`),
`isolation=read_committed`, `control=show`, `decode=raw` (internal topics and registry-framed payloads
as bytes), `schemas=PATH` and `schemas_topic=NAME` (the schema registry's schemas: kfs.registry), `log=PATH`,
`verbose` (log every request), `size_cache=DIR|none` (where decoded sizes are kept; default
$XDG_CACHE_HOME/kfs/decoded; `off`, `no` and `false` mean none too, a directory so named is
`./off`), `size_scan=no` (map sizes on demand only, no background scan),
`nonempty` (mount over a non-empty directory), `readahead=KIB` (the kernel's readahead window for
the mount, raised to 1024 by default where the daemon may: kfs.fuse.readahead; 0 leaves the
kernel's), `native_read=no` (every READ of a decoded file in Python, not from the lines rendered
ahead in C: kfs.fuse.native_read), `debug`; others go to libfuse.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kfs.cli.tree_help import TREE_HELP
from kfs.fuse.mount import MountError, mount, parse_options, unmount


def add_mount_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="LOGDIR [LOGDIR ...] MOUNTPOINT")
    parser.add_argument("-o", dest="options", action="append", default=[], metavar="OPTS",
                        help="comma-separated: allow_other, isolation=read_committed, control=show, decode=raw, "
                             "schemas=PATH, schemas_topic=NAME, log=PATH, verbose, size_cache=DIR|none, size_scan=no, "
                             "readahead=KIB, native_read=no, nonempty, or any libfuse option")
    parser.add_argument("-f", "--foreground", action="store_true", help="stay in the foreground")
    parser.add_argument("--isolation", choices=("read_uncommitted", "read_committed"))
    parser.add_argument("--control", choices=("hide", "show"))
    parser.add_argument("--decode", choices=("auto", "raw"),
                        help="auto (default): Kafka's internal topics and schema-registry framed payloads decoded; "
                             "raw: their bytes, as any topic")
    parser.add_argument("--schemas", metavar="PATH",
                        help="where the schema registry's schemas are: log dirs holding its topic (comma-separated), "
                             "or a directory of <id>.avsc|.proto|.json files (default: the registry topic in LOGDIRs)")
    parser.add_argument("--schemas-topic", metavar="NAME", help="the schema registry's topic (default: _schemas)")
    parser.add_argument("--allow-other", action="store_true", help="let other users read (with default_permissions)")
    parser.add_argument("--log", metavar="PATH", help="the daemon's log file")


def add_mount_commands(subparsers: Any) -> None:
    p = subparsers.add_parser("mount", help="mount log dirs read-only (returns once the mount answers)",
                              epilog=TREE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_mount_arguments(p)
    p.add_argument("-v", "--verbose", action="store_true", help="log every request to the daemon log")
    p.set_defaults(func=run_mount)
    p = subparsers.add_parser("umount", help="unmount a kfs mount (also one whose daemon died)")
    p.add_argument("mountpoint", metavar="MOUNTPOINT")
    p.add_argument("-z", "--lazy", action="store_true", help="detach now, clean up when no longer busy")
    p.set_defaults(func=run_umount)


def options_from_args(args: argparse.Namespace) -> dict[str, Any]:
    options = parse_options(args.options)
    for key in ("isolation", "control", "decode", "log", "schemas", "schemas_topic"):
        if getattr(args, key, None):
            options[key] = getattr(args, key)
    if getattr(args, "allow_other", False):
        options["allow_other"] = True
    if getattr(args, "verbose", False):
        options["verbose"] = True
    return options


def run_mount(args: argparse.Namespace) -> int:
    if len(args.paths) < 2:
        raise MountError("kfs mount needs at least one LOGDIR and a MOUNTPOINT.")
    options = options_from_args(args)
    foreground = args.foreground or bool(options.pop("foreground", False))
    mount(args.paths[:-1], args.paths[-1], options, foreground=foreground)
    return 0


def run_umount(args: argparse.Namespace) -> int:
    unmount(args.mountpoint, lazy=args.lazy)
    return 0


def main_mount_helper(argv: list[str]) -> int:
    """`kfs LOGDIR... MOUNTPOINT [-o OPTS] [-f]`; returns an exit status, errors in one sentence."""
    parser = argparse.ArgumentParser(prog="kfs", description="mount.fuse form of `kfs mount`")
    add_mount_arguments(parser)
    parser.add_argument("-n", action="store_true", help=argparse.SUPPRESS)  # mount(8): no mtab write
    parser.add_argument("-s", action="store_true", help=argparse.SUPPRESS)  # mount(8): sloppy options
    parser.add_argument("-v", action="store_true", help=argparse.SUPPRESS)
    args, _unknown = parser.parse_known_args(argv)
    try:
        return run_mount(args)
    except MountError as exc:
        sys.stderr.write(f"kfs: {exc}\n")
        return 1
    except Exception as exc:  # a sentence, not a traceback, for mount(8)'s user
        sys.stderr.write(f"kfs: {exc}\n")
        return 1
