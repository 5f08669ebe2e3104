"""`kfs schemas LOGDIR... [--json]`: the schema registry's state rebuilt from its topic (docs/spec.md section 9)."""

from __future__ import annotations

import argparse
import json
import sys

from kfs.registry.sources import DEFAULT_TOPIC, SchemasSourceError, load_state
from kfs.storage import KfsError, LogDirs


def add_schemas_command(subparsers: argparse._SubParsersAction) -> None:
    """Add `kfs schemas` to the `kfs` parser (called by kfs.cli.main)."""
    p = subparsers.add_parser(
        "schemas", help="the schema registry's subjects, versions and schemas, from its _schemas topic",
        description="Rebuild the schema registry's state from its topic in the log dirs, as the registry "
                    "does when it starts: one line per subject version (soft-deleted ones too, marked).")
    p.add_argument("logdirs", nargs="+", metavar="LOGDIR", help="log dirs (also comma-separated, as log.dirs)")
    p.add_argument("--json", action="store_true",
                   help="one JSON object per subject version: subject, version, id, type, deleted, references, "
                        "schema")
    p.add_argument("--schemas-topic", default=DEFAULT_TOPIC, metavar="NAME",
                   help="the schema registry's topic (default: _schemas)")
    p.set_defaults(func=cmd_schemas)


def cmd_schemas(args: argparse.Namespace) -> int:
    LogDirs(args.logdirs)  # each checked: one sentence for a path that is not a log dir
    try:
        state = load_state(args.logdirs, None, args.schemas_topic)
    except SchemasSourceError as e:
        raise KfsError(str(e)) from None
    if state is None:
        raise KfsError(f"no {args.schemas_topic} partition in {', '.join(args.logdirs)} "
                       "(the schema registry's topic; --schemas-topic names another)")
    out = sys.stdout
    for schema in state.listing():
        if args.json:
            out.write(json.dumps(schema.listing(), ensure_ascii=False) + "\n")
        else:
            refs = ",".join(f"{r.name}={r.subject}/{r.version}" for r in schema.references)
            out.write(f"{schema.subject}\t{schema.version}\t{schema.id}\t{schema.type}"
                      f"\t{'deleted' if schema.deleted else 'live'}\t{refs or '-'}\t{_one_line(schema.schema)}\n")
    return 0


def _one_line(text: str) -> str:
    """A schema's text on one line (Protobuf and pretty-printed JSON hold newlines)."""
    return " ".join(text.split())
