"""`kfs dump FILE ...`: what Kafka's `kafka-dump-log.sh` prints, without a JVM.

Follows `org.apache.kafka.tools.DumpLogSegments` (tools/src/main/java/..., Kafka 4.x) line for line:

    .log        "Log starting offset: N", one line per batch as `FileRecords` iterates it, and with
                --deep-iteration / --print-data-log one "| offset: ..." line per record
    .index      "offset: N position: P"; each entry checked against the batch at P in the .log beside it
    .timeindex  "timestamp: T offset: O"; each entry checked against the batch holding O
    .txnindex   "version: 0 producerId: ... firstOffset: ... lastOffset: ... lastStableOffset: ..."
    .snapshot   the producer-state snapshot, one line per producer (kfs/cli/dump_files.py)
    .checkpoint a KRaft snapshot, dumped as a log ("Snapshot end offset: N, epoch: E")
    *-checkpoint, partition.metadata   the log dir's and partition's checkpoints (not read by Kafka's tool)

--offsets-decoder, --transaction-log-decoder and --cluster-metadata-decoder print the records of
`__consumer_offsets`, `__transaction_state` and `__cluster_metadata` as Kafka's JSON converters do
(kfs/cli/dump_decoders.py), with kfs's schema interpreter (kfs.internal_topics) doing the decoding.

The index problems are collected and printed to stderr after every file is dumped, as Kafka does:
"Mismatches in :<file>" (reverse offset order, one per index offset), "Found timestamp mismatch in :",
"Found out of order timestamp in :", "The following indexed offsets are not found in the log.",
and with deep iteration "Non-consecutive offsets in <file>". Exit status 0, as Kafka's.

Where Kafka's tool would crash with a stack trace, kfs says one sentence instead:
- an index entry pointing past the log (or at no complete batch) is a mismatch with log offset -1,
  the value Kafka's time index check already uses for "not found";
- a missing file, a name that is not `<base offset>.<suffix>` or an unknown suffix is an error
  before anything is dumped (Kafka prints "Ignoring unknown file" and carries on);
- a corrupt batch ends the dump after the lines before it, naming the file and position.

Live segments: a running broker's active `.index` / `.timeindex` are preallocated with a zero tail.
Kafka's dump loop stops at the first zero entry ("since it is a sparse file ... stop if we see one");
kfs lists the entries before the tail, which are the ones the broker holds in memory. The
--index-sanity-check is the broker's startup check, which sees every slot of the file: a zero tail
fails it for a time index (the broker rebuilds such an index after an unclean shutdown), and kfs
says so beside Kafka's message.

Everything is read through the project's own layers: `kfs.storage` (LogSegment, the index classes,
read_txn_index), `kfs.record` (headers, CRCs, records, control markers) and `kfs.internal_topics` (Kafka's
message schemas: the decoders, KRaft's control records, the producer snapshot).
"""

from __future__ import annotations

import argparse
import os
import sys

from kfs.cli.arguments import non_negative_int
from kfs.cli.dump_common import (
    DEFAULT_MAX_MESSAGE_SIZE,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SUFFIXES,
    TXN_INDEX_SUFFIX,
    Problems,
    base_offset_of_file,
    file_suffix,
)
from kfs.cli.dump_decoders import message_parser, string_parser
from kfs.cli.dump_files import SNAPSHOT_SUFFIX, dump_checkpoint, dump_producer_snapshot, is_checkpoint_file
from kfs.cli.dump_index import dump_offset_index, dump_time_index, dump_txn_index, sanity_check
from kfs.cli.dump_log import dump_log
from kfs.storage import KfsError

KRAFT_SNAPSHOT_SUFFIX = ".checkpoint"

# ---- the command ------------------------------------------------------------------------------



def add_dump_command(subparsers: argparse._SubParsersAction) -> None:
    """Add `kfs dump` to the `kfs` parser (called by kfs.cli.main)."""
    p = subparsers.add_parser(
        "dump", help="what kafka-dump-log.sh prints for .log, .index, .timeindex, .txnindex, .snapshot and "
                     ".checkpoint files; also checkpoint files",
        description="Print segment files as Kafka's kafka-dump-log.sh (DumpLogSegments) does, "
                    "checking indexes against the .log beside them.")
    p.add_argument("files", nargs="*", metavar="FILE",
                   help="segment files (.log, .index, .timeindex, .txnindex), producer snapshots (.snapshot), "
                        "KRaft snapshots (.checkpoint), *-checkpoint and partition.metadata files")
    p.add_argument("--files", dest="files_csv", metavar="FILE1,FILE2", action="append", default=[],
                   help="comma-separated files, as kafka-dump-log.sh takes them")
    p.add_argument("--deep-iteration", action="store_true", help="print every record, not only batches")
    p.add_argument("--print-data-log", action="store_true",
                   help="print record keys and values as UTF-8 (implies --deep-iteration)")
    p.add_argument("--skip-record-metadata", action="store_true",
                   help="print only keys and values of records (with --print-data-log)")
    p.add_argument("--verify-index-only", action="store_true",
                   help="check .index/.timeindex entries against the log without printing them")
    p.add_argument("--index-sanity-check", action="store_true",
                   help="only the check a broker runs on startup to decide whether to rebuild an index")
    p.add_argument("--max-bytes", type=non_negative_int, metavar="N",
                   help="read only the batches within the first N bytes of each .log")
    p.add_argument("--max-message-size", type=non_negative_int, default=DEFAULT_MAX_MESSAGE_SIZE, metavar="N",
                   help="the largest batch an index entry may point at (default 5 MiB)")
    p.add_argument("--offsets-decoder", action="store_true",
                   help="print records as __consumer_offsets records (implies --print-data-log)")
    p.add_argument("--transaction-log-decoder", action="store_true",
                   help="print records as __transaction_state records (implies --print-data-log)")
    p.add_argument("--cluster-metadata-decoder", action="store_true",
                   help="print records as KRaft metadata records (implies --print-data-log)")
    p.set_defaults(func=run_dump)


def run_dump(args: argparse.Namespace) -> int:
    files = list(args.files) + [f for csv in args.files_csv for f in csv.split(",") if f]
    if not files:
        raise KfsError("dump needs at least one FILE (a .log, .index, .timeindex, .txnindex, .snapshot or "
                       ".checkpoint file, or a checkpoint file)")
    for path in files:
        _check_file(path)
    parser = message_parser(args.offsets_decoder, args.transaction_log_decoder, args.cluster_metadata_decoder)
    print_data = args.print_data_log or parser is not None
    deep = args.deep_iteration or print_data
    problems = Problems()
    out = sys.stdout.write
    status = 0
    for path in files:
        out(f"Dumping {path}\n")
        suffix = file_suffix(path)
        if is_checkpoint_file(path):
            sys.stdout.flush()
            dump_checkpoint(path, out, sys.stderr.write)
        elif suffix in (LOG_SUFFIX, KRAFT_SNAPSHOT_SUFFIX):
            dump_log(path, out, problems, deep=deep, print_data=print_data,
                     skip_metadata=args.skip_record_metadata, max_bytes=args.max_bytes,
                     parser=parser or string_parser)
        elif suffix == SNAPSHOT_SUFFIX:
            sys.stdout.flush()
            dump_producer_snapshot(path, out, sys.stderr.write)
        elif suffix == TXN_INDEX_SUFFIX:
            dump_txn_index(path, out)
        elif args.index_sanity_check:
            if not sanity_check(path, suffix, out):
                status = 1
        elif suffix == INDEX_SUFFIX:
            dump_offset_index(path, out, problems, verify_only=args.verify_index_only,
                               max_message_size=args.max_message_size)
        else:
            dump_time_index(path, out, problems, verify_only=args.verify_index_only)
    sys.stdout.flush()
    problems.report(sys.stderr.write)
    return status


def _check_file(path: str) -> None:
    """Every file is checked before any is dumped, so a typo costs no half-printed output."""
    if not os.path.exists(path):
        raise KfsError(f"{path}: no such file")
    if not os.path.isfile(path):
        raise KfsError(f"{path}: not a file")
    if is_checkpoint_file(path):
        return
    suffix = file_suffix(path)
    if suffix == KRAFT_SNAPSHOT_SUFFIX:
        return  # its name is checked when it is dumped, as Kafka's Snapshots.parse does
    if suffix not in (*SUFFIXES, SNAPSHOT_SUFFIX):
        raise KfsError(f"{path}: not a file kfs dump reads (.log, .index, .timeindex, .txnindex, .snapshot, "
                       ".checkpoint, *-checkpoint or partition.metadata)")
    base_offset_of_file(path)
