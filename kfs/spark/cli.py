"""`kfs spark export` and `kfs spark grep`, added to the `kfs` command by `kfs.cli.main`.

Importing this module does not import PySpark (an optional extra): `kfs --help` stays fast and
works without it; the commands say how to install it when it is missing.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

from kfs.spark.jobs import DEFAULT_MASTER

EXIT_ERROR = 1
# A kfs error raised in a task reaches the driver inside Spark's exception text, as the last line
# of the Python worker's traceback: "kfs.spark.tasks.PlannedDataMissing: <sentence>".
_TASK_ERROR = re.compile(r"^kfs\.[\w.]+: (.+)$", re.MULTILINE)


def _fail(message: str) -> int:
    sys.stderr.write(f"kfs: {message}\n")
    return EXIT_ERROR


def spark_error_gist(error: BaseException) -> str:
    """One sentence for a failed Spark job: a task's kfs error as kfs wrote it, else the first line
    (Spark's errors carry pages of JVM and Python traces)."""
    text = str(error).strip()
    found = _TASK_ERROR.findall(text)
    if found:
        return str(found[-1])
    return text.splitlines()[0] if text else type(error).__name__


def _parse_option(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, not {text!r}")
    return key, value


def _run(args: argparse.Namespace) -> int:
    on_hosts = getattr(args, "on_hosts", False)
    for path in [] if on_hosts else args.logdirs:  # (HOST:/path log dirs are on their hosts, not here)
        if not os.path.isdir(path):
            return _fail(f"{path}: no such log dir")
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return _fail("kfs spark needs PySpark: pip install 'kfs[spark]'")
    from kfs.spark import jobs
    from kfs.spark.options import OptionError
    from kfs.storage import KfsError

    options = dict(args.option or [])
    try:
        if args.spark_command == "export":
            jobs.export(args.logdirs, args.out, args.master, options=options,
                        mode="overwrite" if args.overwrite else "errorifexists", on_hosts=on_hosts)
        else:
            jobs.grep(args.pattern, args.logdirs, args.regex, args.master, options=options, decode=args.decode,
                      on_hosts=on_hosts)
    except (OptionError, KfsError, ValueError) as e:
        return _fail(str(e))
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as e:
        return _fail(f"spark {args.spark_command} failed: {spark_error_gist(e)}")
    return 0


def add_spark_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add `kfs spark export LOGDIR... --out DIR` and `kfs spark grep PATTERN LOGDIR...`."""
    spark = subparsers.add_parser("spark", help="run a Spark job over log dirs (needs PySpark)")
    sub = spark.add_subparsers(dest="spark_command", metavar="{export,grep}")
    sub.required = True

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--master", default=DEFAULT_MASTER, help=f"Spark master (default {DEFAULT_MASTER})")
        p.add_argument("-o", "--option", action="append", type=_parse_option, metavar="KEY=VALUE",
                       help="a read option of the kfs data source, e.g. startingOffsets=earliest, "
                            "isolation=read_committed, onCorrupt=skip, minPartitions=64 (repeatable)")
        p.set_defaults(func=_run)

    p = sub.add_parser("export", help="write Parquet partitioned by topic and partition")
    p.add_argument("logdirs", nargs="+", metavar="LOGDIR")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory (Parquet)")
    p.add_argument("--overwrite", action="store_true", help="replace DIR if it exists")
    p.add_argument("--on-hosts", action="store_true",
                   help="each LOGDIR is HOST:/path on that broker host's own disk: one barrier stage with a task "
                        "in every slot reads each host's log dirs there (typed topics: by the registry the "
                        "first host holding _schemas rebuilds, or -o schemas=PATH read here; internal topics "
                        "decode without)")
    common(p)

    p = sub.add_parser("grep", help="print records whose key, value or a header value contains PATTERN")
    p.add_argument("pattern", metavar="PATTERN")
    p.add_argument("logdirs", nargs="+", metavar="LOGDIR")
    p.add_argument("--regex", action="store_true", help="PATTERN is a (Python) regular expression over the bytes")
    p.add_argument("--decode", choices=("auto", "raw"), default="auto",
                   help="auto: Kafka's internal topics print decoded (the match is on the bytes); raw: as bytes")
    p.add_argument("--on-hosts", action="store_true",
                   help="each LOGDIR is HOST:/path on that broker host's own disk, read there by one barrier "
                        "stage (payloads decode with -o schemas=PATH, else the registry the first host "
                        "holding _schemas rebuilds)")
    common(p)
