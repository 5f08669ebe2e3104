"""`kfs groups LOGDIR... [--group G] [--at T] [--json]` (docs/spec.md section 8)."""

from __future__ import annotations

import argparse
import sys

from kfs.groups import parallel
from kfs.groups.render import json_lines, table
from kfs.groups.replay import DEFAULT_OFFSETS_PARTITIONS, coordinator_partition, offsets_partitions
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
    logdirs = LogDirs(args.logdirs)
    present = [plog.partition for plog in offsets_partitions(logdirs)]
    count = max(DEFAULT_OFFSETS_PARTITIONS, max(present, default=-1) + 1)
    snapshot = parallel.snapshot(logdirs, at, args.group)
    if args.group is not None and args.group not in snapshot.group_names():
        home = coordinator_partition(args.group, count)
        where = (f"its partition, __consumer_offsets-{home} (of {count}), is not in these log dirs"
                 if home not in present else f"__consumer_offsets-{home} holds no commit of it")
        raise KfsError(f"no group {args.group}" + ("" if at is None else f" as of {args.at}") + f": {where}")
    out = sys.stdout
    note = ""
    if len(present) < count and not args.json:
        note = (f"(read __consumer_offsets partitions {_ranges(present) or 'none'}: {len(present)} of {count}, "
                "offsets.topic.num.partitions' default or more; groups kept in the others, on other brokers' "
                "log dirs, are not shown)\n")
    for text in (json_lines if args.json else table)(snapshot, args.group):
        out.write(text)
        if note:  # (under the table's first line, which says as of when)
            out.write(note)
            note = ""
    if snapshot.undecodable:
        sys.stderr.write(f"kfs: {snapshot.undecodable} record(s) of __consumer_offsets did not decode "
                         "and were left out\n")
    return 0


def _ranges(numbers: list[int]) -> str:
    """0-2, 7, 9-11"""
    spans: list[list[int]] = []
    for n in sorted(numbers):
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)
