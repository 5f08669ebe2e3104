"""`kfs`: mount Kafka log dirs, or ask them questions from the shell.

Every error a user can cause is one sentence on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
from collections.abc import Callable, Iterator

import kfs
from kfs.cli.arguments import non_negative_int
from kfs.cli.tree_help import TREE_HELP
from kfs.internal_topics.lines import DECODE_MODES, line_decoder
from kfs.registry import Registry, SchemasSourceError, load_registry
from kfs.storage import (
    CorruptBatch,
    KfsError,
    Location,
    LogDirs,
    OffsetOutOfRange,
    PartitionLog,
    VanishedError,
    parse_partition_dir,
)
from kfs.storage.files import open_regular
from kfs.storage.logdir import split_log_dirs
from kfs.storage.specs import iso_ms
from kfs.views import plain_runs
from kfs.views.batch_lines import joined_lines
from kfs.views.jsonl import line_prefix, render_lines, walker_decoding
from kfs.views.kcat_format import KcatFormat, KcatJson, broker_id

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_TOMBSTONE = 3  # `kfs cat --format value`: the value (or one of the K values) is a tombstone (null)


class CliError(Exception):
    """A one-sentence error for the user."""


def _logdirs(paths: list[str]) -> LogDirs:
    """The log dirs named (comma-separated lists too), each checked: NotALogDir says what a log dir is."""
    return LogDirs(paths)


def _write(data: bytes) -> None:
    sys.stdout.buffer.write(data)


# ---- kfs ls -----------------------------------------------------------------------------------

def cmd_ls(args: argparse.Namespace) -> int:
    paths = list(args.paths)
    if args.partition is None and len(paths) > 1 and parse_partition_dir(paths[-1]) and not os.path.isdir(paths[-1]):
        args.partition = paths.pop()
    dirs = _logdirs(paths)
    names = [args.partition] if args.partition else dirs.partition_names()
    infos = [dirs.partition(name).info() for name in names]
    if args.json:
        print(json.dumps(infos[0] if args.partition else infos, indent=2))
        return 0
    for info in infos:
        damaged = sum(1 for s in info["segments"] if s.get("problems"))
        print(f"{info['topic']}-{info['partition']}  log start {info['log_start_offset']}  "
              f"log end {info['log_end_offset']}  {len(info['segments'])} segment(s)  {info['path']}"
              + (f"  DAMAGED: {damaged} segment(s), see kfs ls LOGDIR {info['topic']}-{info['partition']}"
                 if damaged and not args.partition else ""))
        if args.partition:
            print(f"  {'base offset':>20}  {'size':>12}  {'index':>6}  {'time':>6}  largest timestamp")
            for s in info["segments"]:
                print(f"  {s['base_offset']:>20}  {s['size']:>12}  {s['offset_index_entries']:>6}  "
                      f"{s['time_index_entries']:>6}  {s['largest_timestamp']} ({iso_ms(s['largest_timestamp'])})"
                      f"{'  (active)' if s['active'] else ''}")
                for problem in s.get("problems", []):  # "position N: ...", or a sentence naming its file
                    print(f"  {'':>20}  DAMAGED{' at ' if problem.startswith('position ') else ': '}{problem}")
    return 0


# ---- kfs locate -------------------------------------------------------------------------------

def _log_dirs_and_partition(args: argparse.Namespace) -> tuple[list[str], str]:
    """`LOGDIR... TOPIC-PARTITION`: the log dirs are given as to every command (`kfs ls A B`), the
    partition last."""
    if len(args.paths) < 2:
        raise CliError(f"kfs {args.command} needs LOGDIR... and TOPIC-PARTITION (e.g. kfs {args.command} "
                       "/var/lib/kafka/data orders-0).")
    return args.paths[:-1], args.paths[-1]


def cmd_locate(args: argparse.Namespace) -> int:
    logdirs, partition = _log_dirs_and_partition(args)
    plog = _logdirs(logdirs).partition(partition)
    axis, spec = ("offset", args.offset) if args.offset is not None else ("time", args.time)
    print(json.dumps(plog.locate(axis, spec).as_dict()))
    return 0


# ---- kfs cat ----------------------------------------------------------------------------------

def cmd_cat(args: argparse.Namespace) -> int:
    if args.kcat_format is not None and args.format != "jsonl":
        raise CliError(f"-f (a kcat format) prints records its own way: it cannot go with --format {args.format}.")
    if args.kcat_json and (args.format != "jsonl" or args.kcat_format is not None):
        raise CliError("-J (kcat's JSON envelope) prints records its own way: it cannot go with -f or --format "
                       f"{args.format}.")
    if args.kcat_serdes and not (args.kcat_json or args.kcat_format is not None):
        raise CliError("-s (kcat's deserializer) goes with -J or -f.")
    if args.kcat_serdes and args.decode == "raw":
        raise CliError("-s avro decodes framed payloads: it cannot go with --decode raw.")
    args.logdirs, partition = _log_dirs_and_partition(args)
    plog = _logdirs(args.logdirs).partition(partition)
    if args.format == "value" and args.count is None:
        axis, spec = ("time", args.time) if args.time is not None else ("offset", args.offset or "earliest")
        record = plog.value_record(axis, spec, isolation=args.isolation)
        _write(record.value if record.value is not None else _escapes(args.null or ""))
        return EXIT_TOMBSTONE if record.value is None else 0
    if args.time is not None:
        start = plog.offset_for_time(plog.parse_time(args.time))
    else:
        start = plog.resolve_offset(args.offset) if args.offset is not None else plog.log_start_offset()
    if args.format == "value":
        return _cat_values(plog, start, args)
    if args.format == "raw":
        location = plog.locate("time", args.time) if args.time is not None else plog.locate_offset(start)
        return _cat_raw(plog, location, args.count)
    if args.kcat_format is not None or args.kcat_json:
        return _cat_kcat_format(plog, start, args)
    prefix = line_prefix(plog.topic, plog.partition)
    decoder = line_decoder(plog.topic, args.decode, plog, _registry(args))
    remaining = args.count
    if remaining == 0:
        return 0
    if remaining is None and args.on_corrupt == "fail":  # the whole log: rendered batch by batch from its bytes
        # (`__consumer_offsets`: the walker renders runs of offset-commit batches, the decoder the rest)
        _write_all(joined_lines(plog, start, isolation=args.isolation, control=args.control, prefix=prefix,
                                render=lambda records: render_lines(prefix, records, decoder),
                                fused=decoder is None, decoded=walker_decoding(decoder)))
        return 0
    for records in plog.record_lists(start, isolation=args.isolation, control=args.control,
                                     on_corrupt=args.on_corrupt):
        if remaining is not None:
            records = records[:remaining]
            remaining -= len(records)
        _write(render_lines(prefix, records, decoder))
        if remaining == 0:
            break
    return 0


def _registry(args: argparse.Namespace) -> Registry | None:
    """The schema registry's state for decoding framed payloads (kfs.registry), unless --decode raw."""
    if args.decode == "raw":
        return None
    try:
        return load_registry(args.logdirs, args.schemas, args.schemas_topic)
    except SchemasSourceError as e:
        raise CliError(str(e)) from None


_WRITE_SIZE = 1 << 18  # bytes gathered before one write: a batch's lines are a few KiB


def _write_all(pieces: Iterator[bytes]) -> None:
    """Write the pieces in writes of about _WRITE_SIZE (a write per batch costs a system call each);
    what was gathered before an error is written before it propagates."""
    gathered: list[bytes] = []
    size = 0
    try:
        for piece in pieces:
            if len(piece) >= _WRITE_SIZE:  # written as it is, not copied into a join (a kcat format's value)
                if gathered:
                    _write(b"".join(gathered))
                    gathered, size = [], 0
                _write(piece)
                continue
            gathered.append(piece)
            size += len(piece)
            if size >= _WRITE_SIZE:
                _write(b"".join(gathered))
                gathered, size = [], 0
    finally:
        if gathered:
            _write(b"".join(gathered))


def _cat_kcat_format(plog: PartitionLog, start: int, args: argparse.Namespace) -> int:
    """`-f FMT` or `-J`: the records from `start` as kcat's `-f FMT` or `-J` prints them; a corrupt batch
    skipped with --on-corrupt skip is said on stderr (by the storage layer's warning), not printed.
    Written in pieces (`pieces`), in memory bounded whatever the format."""
    fmt: KcatFormat | KcatJson
    if args.kcat_serdes:
        fmt = _kcat_avro(plog, args)
    elif args.kcat_json:
        fmt = KcatJson(plog.topic, plog.partition, broker_id(os.path.dirname(plog.path)))
    else:
        fmt = KcatFormat(args.kcat_format, plog.topic, plog.partition, _escapes(args.null or ""))
    remaining = args.count
    if remaining == 0:
        return 0
    # runs of plain batches printed by the compiled walker (which does not decode: not with -s)
    if remaining is None and args.on_corrupt == "fail" and not args.kcat_serdes:
        take = plain_runs.kcat_taker(fmt.program(), fmt.null, args.isolation == "read_committed") \
            if plain_runs.available() else None
        _write_all(joined_lines(plog, start, isolation=args.isolation, control=args.control, prefix="",
                                render=fmt.pieces, fused=False, take=take))
        return 0

    def printed() -> Iterator[bytes]:
        left = remaining
        for records in plog.record_lists(start, isolation=args.isolation, control=args.control,
                                         on_corrupt=args.on_corrupt):
            if left is not None:
                records = records[:left]
                left -= len(records)
            yield from fmt.pieces([r for r in records if type(r) is not CorruptBatch])
            if left == 0:
                break

    _write_all(printed())
    return 0


def _kcat_avro(plog: PartitionLog, args: argparse.Namespace) -> KcatFormat | KcatJson:
    """-J or -f with kcat's -s avro (kfs.registry.kcat)."""
    from kfs.registry.kcat import AvroDecoder, AvroKcatFormat, AvroKcatJson, parse_serdes

    try:
        keys, values = parse_serdes(args.kcat_serdes)
    except ValueError as e:
        raise CliError(str(e)) from None
    registry = _registry(args)
    if registry is None:
        raise CliError(f"-s avro needs the schema registry's schemas: no {args.schemas_topic} topic in the log "
                       "dirs (kcat asks a registry at -r URL; kfs reads its topic: give --schemas PATH)")
    decoder = AvroDecoder(registry, plog.topic, plog.partition)
    if args.kcat_json:
        return AvroKcatJson(plog.topic, plog.partition, broker_id(os.path.dirname(plog.path)), decoder, keys, values)
    return AvroKcatFormat(args.kcat_format, plog.topic, plog.partition, _escapes(args.null or ""), decoder, keys,
                          values)


def _cat_values(plog: PartitionLog, start: int, args: argparse.Namespace) -> int:
    """`--format value --count K`: the values of K records from `start`, each followed by the delimiter;
    a tombstone is `--null` TEXT (empty by default) and makes the exit status EXIT_TOMBSTONE."""
    delimiter, null = _escapes(args.delimiter), _escapes(args.null or "")
    remaining, tombstone = args.count, False
    if remaining == 0:
        return 0
    for records in plog.record_lists(start, isolation=args.isolation):
        records = records[:remaining]
        remaining -= len(records)
        tombstone = tombstone or any(r.value is None for r in records)
        _write(b"".join((null if r.value is None else r.value) + delimiter for r in records))
        if remaining == 0:
            break
    return EXIT_TOMBSTONE if tombstone else 0


_ESCAPE = re.compile(rb"\\(x[0-9a-fA-F]{2}|[0ntr\\])")
_ESCAPES = {b"0": b"\0", b"n": b"\n", b"t": b"\t", b"r": b"\r", b"\\": b"\\"}


def _escapes(text: str) -> bytes:
    """`--delimiter '\\0'`, `'\\t'`, `'\\x1e'`: a shell argument cannot hold a NUL, so escapes stand for bytes."""
    return _ESCAPE.sub(lambda m: bytes([int(m.group(1)[1:], 16)]) if m.group(1).startswith(b"x")
                       else _ESCAPES[m.group(1)], os.fsencode(text))


def _cat_raw(plog: PartitionLog, location: Location, count: int | None) -> int:
    """The batches byte for byte from the located one; with a count, up to the batch holding the K-th record."""
    if count is None:
        for extent in plog.raw_extents(location):
            if extent.damage is not None:
                raise extent.damage_error()
            fd = open_regular(extent.path)  # (never a FIFO or a link put there since the listing)
            try:
                if extent.file_id is not None and os.fstat(fd).st_ino != extent.file_id:
                    raise VanishedError(f"{extent.path}: segment replaced since it was measured")
                position, remaining = extent.start, extent.end - extent.start
                while remaining > 0:
                    chunk = os.pread(fd, min(remaining, 1 << 20), position)
                    if not chunk:
                        raise KfsError(f"{extent.path} ended early at position {position}")
                    _write(chunk)
                    position += len(chunk)
                    remaining -= len(chunk)
            finally:
                os.close(fd)
        return 0
    seen = 0
    segment = plog.floor_segment(location.segment_base_offset)
    if segment is None:
        raise KfsError(f"{plog.name}: the segment at {location.segment_base_offset} is gone")
    for seg, header, body in plog.batches_from(segment, location.position):
        _write(bytes(body))
        if not header.is_control:
            seen += sum(1 for r in seg.records_of(header, body) if r.offset >= (location.offset or 0))
        if seen >= count:
            break
    return 0


# ---- the parser -------------------------------------------------------------------------------



class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"kfs: {message}\n")
        sys.exit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kfs", description="Read Apache Kafka log directories without a broker.",
                     epilog=TREE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"kfs {kfs.__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what kfs does to stderr")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    p = sub.add_parser("ls", help="partitions, segments, offsets and sizes")
    p.add_argument("paths", nargs="+", metavar="LOGDIR... [TOPIC-PARTITION]",
                   help="one or more Kafka log dirs, and a partition to show alone")
    p.add_argument("--partition", "-p", metavar="TOPIC-PARTITION", help=argparse.SUPPRESS)
    p.add_argument("--json", action="store_true", help="print info.json objects")
    p.set_defaults(func=cmd_ls)

    p = sub.add_parser("locate", help="where an offset or a time is: segment, index entry, batch, record")
    p.add_argument("paths", nargs="+", metavar="LOGDIR... TOPIC-PARTITION",
                   help="one or more Kafka log dirs (a broker's log.dirs; comma-separated or apart), then a "
                        "partition directory's name such as orders-0")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--offset", metavar="N", help="an offset, earliest, latest or -K")
    g.add_argument("--time", metavar="T", help="milliseconds since the epoch or ISO-8601")
    p.set_defaults(func=cmd_locate)

    p = sub.add_parser("cat", help="records from an offset or a time, decoded or raw")
    p.add_argument("paths", nargs="+", metavar="LOGDIR... TOPIC-PARTITION",
                   help="one or more Kafka log dirs (a broker's log.dirs; comma-separated or apart), then a "
                        "partition directory's name such as orders-0")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--offset", metavar="N", help="an offset, earliest, latest or -K (default: the log start)")
    g.add_argument("--time", metavar="T", help="milliseconds since the epoch or ISO-8601")
    p.add_argument("--count", type=non_negative_int, metavar="K",
                   help="stop after K records (with --format value: K values, each followed by --delimiter)")
    p.add_argument("--format", choices=("jsonl", "raw", "value"), default="jsonl",
                   help="value: the value bytes of the record at N (exact: a gap is an error); exit status 3 "
                        "when it is a tombstone (null value), which prints as --null")
    p.add_argument("--delimiter", default="\\n", metavar="TEXT",
                   help="with --format value --count K: what follows each value (default: a newline; "
                        "escapes \\n \\t \\0 \\xHH)")
    p.add_argument("-f", dest="kcat_format", metavar="FMT",
                   help="print each record as kcat -C -f FMT does: %%o offset, %%k key, %%K key length, %%s value, "
                        "%%S value length, %%R value length (binary int32), %%T timestamp, %%h headers, %%t topic, "
                        "%%p partition, %%%% a percent sign; \\n \\r \\t \\xHH escapes. Keys and values "
                        "as stored, internal topics too")
    p.add_argument("-J", dest="kcat_json", action="store_true",
                   help="print each record in kcat -J's JSON envelope (topic, partition, offset, tstype, ts, broker, "
                        "headers, key, payload), as kcat writes it: bytes as they are")
    p.add_argument("-s", dest="kcat_serdes", action="append", metavar="avro|key=avro|value=avro",
                   help="with -J or -f: decode schema-registry framed Avro keys and values to JSON, as kcat -s "
                        "avro -r URL does (the schemas from the log dirs' registry topic, or --schemas)")
    p.add_argument("-r", dest="kcat_registry_url", metavar="URL",
                   help="kcat's schema registry URL: accepted for kcat scripts, not used (the schemas are the "
                        "registry topic's)")
    p.add_argument("--null", metavar="TEXT",
                   help="with --format value: what a tombstone prints (default: nothing, as its .value file); "
                        "with -f: what a null key or value prints (default: nothing; kcat -Z is --null NULL)")
    p.add_argument("--isolation", choices=("read_uncommitted", "read_committed"), default="read_uncommitted",
                   help="read_committed: hide the records of aborted transactions, as a consumer with "
                        "isolation.level=read_committed (default: read_uncommitted, every record)")
    p.add_argument("--control", choices=("hide", "show"), default="hide",
                   help="show: also print control records (transaction markers, KRaft's), with control, "
                        "producer_id and coordinator_epoch keys (default: hide, as consumers do)")
    p.add_argument("--on-corrupt", choices=("fail", "skip"), default="fail",
                   help='skip: a corrupt batch becomes an {"error": ...} line and reading goes on (jsonl)')
    p.add_argument("--decode", choices=DECODE_MODES, default="auto",
                   help="auto: keys and values of Kafka's internal topics, and schema-registry framed ones, "
                        "decoded; raw: as bytes")
    p.add_argument("--schemas", metavar="PATH",
                   help="where the schema registry's schemas are: log dirs holding its topic (comma-separated), "
                        "or a directory of <id>.avsc|.proto|.json files (default: the registry topic in LOGDIR)")
    p.add_argument("--schemas-topic", default="_schemas", metavar="NAME",
                   help="the schema registry's topic (default: _schemas)")
    p.set_defaults(func=cmd_cat)

    for hook in _extension_hooks():
        hook(sub)
    return parser


def _extension_hooks() -> list[Callable[[argparse._SubParsersAction], None]]:
    """Subcommands that live with their layer (dump, mount, spark), added when importable."""
    hooks = []
    for module, name in (("kfs.cli.dump", "add_dump_command"), ("kfs.fuse.cli", "add_mount_commands"),
                         ("kfs.spark.cli", "add_spark_commands"), ("kfs.groups.cli", "add_groups_command"),
                         ("kfs.registry.cli", "add_schemas_command"), ("kfs.replicas.cli", "add_replicas_command")):
        try:
            mod = __import__(module, fromlist=[name])
        except ImportError:
            continue
        hook = getattr(mod, name, None)
        if hook is not None:
            hooks.append(hook)
    return hooks


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    mount_form = _mount_helper_form(argv)
    if mount_form is not None:
        return mount_form()
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="kfs: %(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return args.func(args)
    except BrokenPipeError:
        # `kfs cat ... | head`: the reader left; not an error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (KfsError, CliError, OffsetOutOfRange) as e:
        sys.stderr.write(f"kfs: {e}\n")
        return EXIT_ERROR
    except OSError as e:
        sys.stderr.write(f"kfs: {e.filename or ''}{': ' if e.filename else ''}{e.strerror or e}\n")
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130


def subcommand_names() -> frozenset[str]:
    """Every subcommand the parser knows, the layers' hooks included (read from it: a list kept by hand
    here had lost `schemas`, so `kfs schemas LOGDIR` was taken for the mount form wherever `./schemas`
    was a directory)."""
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return frozenset(action.choices)
    return frozenset()


def _mount_helper_form(argv: list[str]) -> Callable[[], int] | None:
    """`kfs LOGDIR MOUNTPOINT -o OPTS`, the form mount.fuse uses: hand it to the FUSE layer."""
    if len(argv) >= 2 and not argv[0].startswith("-") and (
            "/" in argv[0] or any(os.path.isdir(p) for p in split_log_dirs([argv[0]]))) \
            and argv[0] not in subcommand_names():
        try:
            from kfs.fuse import cli as fuse_cli
        except ImportError as e:
            sys.stderr.write(f"kfs: cannot mount: {e}\n")
            return lambda: EXIT_ERROR
        return lambda: fuse_cli.main_mount_helper(argv)
    return None


if __name__ == "__main__":
    sys.exit(main())
