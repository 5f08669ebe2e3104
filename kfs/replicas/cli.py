"""`kfs replicas LOGDIR... [TOPIC-PARTITION] [--leader BROKER] [--json] [--truncated BROKER]`
(docs/spec.md section 10, docs/replicas.md)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from kfs.replicas.render import table
from kfs.replicas.replica_set import ReplicaSet
from kfs.replicas.report import PartitionReplicas, truncated_lines
from kfs.storage import KfsError, parse_partition_dir

EXIT_LOST_COMMITTED = 4  # a copy would lose records below its high watermark
EXIT_ERROR = 1


def add_replicas_command(subparsers: argparse._SubParsersAction) -> None:
    """Add `kfs replicas` to the `kfs` parser (called by kfs.cli.main)."""
    p = subparsers.add_parser(
        "replicas", help="a partition's copies on several brokers side by side: where they part, what each loses",
        description="Compare the copies of partitions held by several brokers (each log dir's meta.properties "
                    "names its broker) by Kafka's leader-epoch truncation rule. Exit status 4 when a copy "
                    "would lose records below its high watermark.")
    p.add_argument("paths", nargs="+", metavar="LOGDIR... [TOPIC-PARTITION]",
                   help="the log dirs of two brokers or more (also comma-separated), then a partition to show alone")
    p.add_argument("--leader", type=int, metavar="BROKER",
                   help="the broker whose copy is the reference (default: the last leader __cluster_metadata "
                        "names, else the copy whose last batch has the highest leader epoch)")
    p.add_argument("--json", action="store_true", help="one JSON object per partition (docs/spec.md section 10)")
    p.add_argument("--truncated", type=int, metavar="BROKER",
                   help="print the records BROKER's copy of TOPIC-PARTITION would lose, as kfs cat's JSON lines")
    p.set_defaults(func=cmd_replicas)


def cmd_replicas(args: argparse.Namespace) -> int:
    paths, partition = list(args.paths), None
    if len(paths) > 1 and parse_partition_dir(paths[-1]) and not os.path.isdir(paths[-1]):
        partition = paths.pop()
    replicas = ReplicaSet(paths)
    if len(replicas.brokers) < 2:
        raise KfsError(f"these log dirs are all broker {replicas.brokers[0].id}'s: kfs replicas compares the "
                       "copies of several brokers (give each broker's log dirs)")
    if args.truncated is not None:
        if partition is None:
            raise KfsError("--truncated BROKER prints one partition's records: name it (TOPIC-PARTITION)")
        found = replicas.compare(partition, args.leader)
        if found.error is not None:
            raise KfsError(found.error)
        for data in truncated_lines(found.replica(args.truncated)):
            sys.stdout.buffer.write(data)
        return 0
    results: list[PartitionReplicas] = []
    names = [partition] if partition is not None else replicas.partition_names()
    if not names:
        sys.stderr.write(f"kfs: no partition is held by two of brokers "
                         f"{', '.join(str(b) for b in replicas.broker_ids())}: nothing to compare\n")
    for name in names:
        if partition is None and args.leader is not None and args.leader not in {b.id for b in replicas.holders(name)}:
            continue
        found = replicas.compare(name, args.leader)
        if found.error is not None and partition is not None:
            raise KfsError(found.error)
        results.append(found)
        if found.error is not None:  # (said on stderr: not a partition's copies compared)
            sys.stderr.write(f"kfs: {found.error}\n")
            continue
        sys.stdout.write(json.dumps(found.as_json()) + "\n" if args.json else table(found))
        sys.stdout.flush()
    errors = [r.error for r in results if r.error is not None]
    if any(r.lost_committed() for r in results):
        return EXIT_LOST_COMMITTED
    return EXIT_ERROR if errors else 0
