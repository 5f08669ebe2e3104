"""`kfs groups LOGDIR... [--group G] [--at T] [--json]` (docs/spec.md section 8)."""

from __future__ import annotations

import argparse
import sys

from kfs.groups import parallel
from kfs.groups.render import json_lines, table
from kfs.storage import KfsError, LogDirs
from kfs.storage.specs import parse_time_spec


def add_groups_command(subparsers: argparse._SubParsersAction) -> None:
    """Add `kfs groups` to the `kfs` parser (called by kfs.cli.main)."""
    p = subparsers.add_parser(
        "groups", help="every group's committed offsets and state, at the log end or as of a time",
        description="Replay __consumer_offsets up to a moment: the committed offset of every "
                    "(group, topic, partition) and each group's state, as the group coordinator "
                    "would have loaded them.")
    p.add_argument("logdirs", nargs="+", metavar="LOGDIR", help="log dirs (also comma-separated, as log.dirs)")
    p.add_argument("--group", "-g", metavar="G", help="only this group")
    p.add_argument("--at", metavar="T",
                   help="as of this time: milliseconds since the epoch or ISO-8601 (default: the log end)")
    p.add_argument("--json", action="store_true", help="one JSON object per line (docs/spec.md section 8)")
    p.set_defaults(func=cmd_groups)


def cmd_groups(args: argparse.Namespace) -> int:
    at = parse_time_spec(args.at) if args.at is not None else None
    snapshot = parallel.snapshot(LogDirs(args.logdirs), at, args.group)
    if args.group is not None and args.group not in snapshot.group_names():
        raise KfsError(f"no group {args.group} in __consumer_offsets"
                       + ("" if at is None else f" as of {args.at}"))
    out = sys.stdout
    for text in (json_lines if args.json else table)(snapshot, args.group):
        out.write(text)
    if snapshot.undecodable:
        sys.stderr.write(f"kfs: {snapshot.undecodable} record(s) of __consumer_offsets did not decode "
                         "and were left out\n")
    return 0
