"""Log dirs on the brokers' own disks, read in one Spark job: a barrier stage with a task in every slot.

A Python data source cannot say where its tasks must run (docs/spark.md, "Many brokers"), so the
simple case is a path every worker sees. When each broker host holds its own log dirs and nothing is
shared, `read(spark, "b1:/data/kafka-logs,b2:/data/kafka-logs")` runs one barrier stage
(`mapInArrow(..., barrier=True)`) of as many tasks as the application has slots: Spark launches them
all at once, so with every slot taken every executor runs one, and each task

1. tells the others its host (`$KFS_HOST`, else `socket.gethostname()`) and the partitions its
   host's log dirs hold (`BarrierTaskContext.allGather`);
2. checks that every host given log dirs has a task (else every task fails, naming the hosts
   without one: never a result without their records);
3. takes the partitions its host is the first (in the order given) to hold, a partition held by
   several hosts (replicas) being read once, as `load("a,b")` reads the first log dir listed; the
   tasks of one host divide those partitions by their rank among that host's tasks (each partition
   planned and read by one task, so a live log growing between two tasks' plans loses or repeats
   nothing);
4. plans and reads its partitions as any task does (kfs.spark.plan, kfs.spark.source.read_split), the
   Arrow batches of Spark's Kafka source columns, and the decoded columns where there are any.

Decoded columns: the DataFrame's schema is fixed on the driver before any task runs, and the registry's
`_schemas` log is on some broker's disk. The registry is the `schemas` option's, read on the driver (a
copy of the `_schemas` partition, or a directory of schema files, as `kfs cat --schemas`); without it,
one barrier stage first rebuilds it on the host that is the first to hold `_schemas` and sends it back,
the same stage that lists the topics a pattern or `assign` selects there (`survey_hosts`). Either goes
to every task with the stage: the columns are typed (`subscribe` of one topic, or of topics sharing a
schema; a pattern or `assign` selecting one) or the decoded JSON text, as the data source makes them.
Kafka's internal topics read on their own (`subscribe=__consumer_offsets`) get their decoded columns
with no registry.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import socket
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType

from kfs.registry import Registry
from kfs.registry.state import RegistryState
from kfs.spark.options import OptionError, ReadOptions, parse_options
from kfs.storage import KfsError, LogDirs
from kfs.storage.logdir import parse_partition_dir

HOST_VARIABLE = "KFS_HOST"


class HostsNotCovered(KfsError):
    """Log dirs were placed on a host where no task of the barrier stage ran."""


def parse_placed(placed: str | Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """`"HOST:/path,HOST:/path2,OTHER:/path"` (or a mapping) as {host: [log dirs]}, hosts in the order
    given. Paths must be absolute: they are read on their host, from no working directory of ours."""
    pairs: list[tuple[str, str]] = []
    if isinstance(placed, str):
        for entry in (e.strip() for e in placed.split(",")):
            if not entry:
                continue
            host, sep, path = entry.partition(":")
            if not sep or not host:
                raise OptionError(f"{entry!r}: a broker-local log dir is HOST:/path")
            pairs.append((host, path))
    else:
        pairs = [(host, path) for host, paths in placed.items() for path in paths]
    out: dict[str, list[str]] = {}
    for host, path in pairs:
        if not os.path.isabs(path):
            raise OptionError(f"{host}:{path}: the path must be absolute (it is read on {host})")
        out.setdefault(host, []).append(path)
    if not out:
        raise OptionError("no broker-local log dirs given (HOST:/path,...)")
    return out


def this_host() -> str:
    """The name this host's log dirs are placed under: $KFS_HOST (containers, whose host names are
    not the brokers'), else the host name."""
    return os.environ.get(HOST_VARIABLE) or socket.gethostname()


def owners(placed: Mapping[str, Sequence[str]], held: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """Each partition's reading host: the first host (in `placed`'s order) whose log dirs hold it."""
    owner: dict[str, str] = {}
    for host in placed:
        for name in held.get(host, ()):
            owner.setdefault(name, host)
    return owner


def read(spark: Any, placed: str | Mapping[str, Sequence[str]], options: Mapping[str, str] | None = None,
         tasks: int | None = None, registry: Registry | None = None, find_registry: bool = True) -> Any:
    """A DataFrame of Spark's Kafka source columns over log dirs placed on their hosts (module doc).
    `options`: the data source's (`startingOffsets`, `subscribe`, `includeHeaders`, `onCorrupt`, ...);
    `tasks`: the barrier stage's size, by default the application's slots (`defaultParallelism`);
    `registry`: one `survey_hosts` found already; `find_registry` False: none is looked for here
    (the caller looked, and `registry` is what it found)."""
    from kfs.spark.source import kafka_schema

    hosts, read_options, opts, n = _stage(spark, placed, options, tasks)
    schema = kafka_schema(opts.include_headers)
    # (the topics a pattern or `assign` selects, as the shared path lists its log dirs, and the hosts' own
    # registry: one barrier stage finds what is needed of both)
    topics, found = survey_hosts(spark, hosts, read_options, n,
                                 topics=opts.decode != "raw" and (opts.subscribe_pattern is not None
                                                                  or opts.assign is not None),
                                 registry=registry is None and find_registry)
    registry, decoded = decoded_columns(opts, topics, registry if registry is not None else found)
    for field in decoded:
        schema.add(field)
    task = HostTask(hosts, read_options, schema, registry.state if registry is not None else None)
    return spark.range(n, numPartitions=n).mapInArrow(task, schema, barrier=True)


def _stage(spark: Any, placed: str | Mapping[str, Sequence[str]], options: Mapping[str, str] | None,
           tasks: int | None) -> tuple[dict[str, list[str]], dict[str, str], ReadOptions, int]:
    """A barrier stage's plan, checked before it runs: the hosts' log dirs, the read options (without
    `path`), as parsed over every log dir, and the stage's size (by default every slot, at least one a
    host)."""
    hosts = parse_placed(placed)
    read_options = {k: v for k, v in (options or {}).items() if k.lower() != "path"}
    opts = parse_options({**read_options, "path": ",".join(p for paths in hosts.values() for p in paths)})
    n = tasks or spark.sparkContext.defaultParallelism
    if n < len(hosts):
        raise OptionError(f"{n} tasks cannot cover {len(hosts)} hosts ({', '.join(hosts)}): the application "
                          f"has {n} task slots; run an executor on every broker host")
    return hosts, read_options, opts, n


def decoded_columns(opts: ReadOptions, selected: Sequence[str] | None = None, found: Registry | None = None
                    ) -> tuple[Registry | None, list[StructField]]:
    """The registry (the `schemas` option's, read here on the driver, else `found`: the hosts' own, from
    `registry_for_hosts`) and the decoded columns a read gains, as `format("kfs")` types them
    (kfs.spark.source.selected_topics): by the topics `subscribe` names, or those a pattern or `assign`
    selects on the hosts (`selected`, listed there by `topics_on_hosts`); none with decode=raw, or
    without a registry but for internal topics."""
    from kfs.registry import load_registry
    from kfs.spark.typed import decoded_fields, wants_decoded_columns

    if opts.decode == "raw":
        return None, []
    registry = load_registry([], opts.schemas, opts.schemas_topic) if opts.schemas is not None else found
    if opts.subscribe_pattern is not None or opts.assign is not None:
        topics = sorted(selected) if selected is not None else None
    else:
        topics = sorted(opts.subscribe) if opts.subscribe is not None else None
    if not wants_decoded_columns(registry, topics):
        return registry, []
    return registry, decoded_fields(registry, topics)


class HostTask:
    """One barrier task's work (pickled to the executors, the driver's registry state with it)."""

    def __init__(self, hosts: dict[str, list[str]], options: dict[str, str], schema: StructType,
                 registry: RegistryState | None) -> None:
        self.hosts = hosts
        self.options = options
        self.schema = schema
        self.registry = registry

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import BarrierTaskContext

        for _ in batches:  # (spark.range's one row: this task's index)
            pass
        context = BarrierTaskContext.get()
        host = this_host()
        mine = self.hosts.get(host, [])
        listing: dict[str, Any] = {"host": host}
        try:
            listing["partitions"] = LogDirs(mine).partition_names() if mine else []
        except KfsError as e:
            listing["error"] = f"{host}: {e}"
        found = [json.loads(m) for m in context.allGather(json.dumps(listing))]
        yield from self.read(found, context.partitionId())

    def read(self, found: list[dict[str, Any]], index: int) -> Iterator[pa.RecordBatch]:
        """This task's batches, given every task's listing (`found`, by task index)."""
        from pyspark.sql.pandas.types import to_arrow_schema

        from kfs.spark.plan import plan_splits
        from kfs.spark.source import read_split
        from kfs.spark.typed import plan_from_field

        opts = self.own_options(found, index)
        if opts is None:
            return
        schema = to_arrow_schema(self.schema, timezone="UTC")
        names = self.schema.fieldNames()
        plans = [plan_from_field(self.schema[f"{part}_decoded"]) for part in ("key", "value")
                 if f"{part}_decoded" in names]
        registry = Registry(self.registry) if self.registry is not None else None
        for split in plan_splits(opts):  # (only this task's partitions: each is planned and read by one task)
            yield from read_split(split, opts, schema, plans, registry=registry)

    def own_options(self, found: list[dict[str, Any]], index: int,
                    options: Mapping[str, str] | None = None) -> ReadOptions | None:
        """The read options (`options`, by default the task's) of this task's share (its host's log dirs,
        `assign` its partitions), given every task's listing; None: nothing to read. Raises what every
        task raises alike."""
        errors = sorted({f["error"] for f in found if "error" in f})
        if errors:
            raise KfsError("; ".join(errors))
        ran = [f["host"] for f in found]
        missing = [h for h in self.hosts if h not in ran]
        if missing:
            raise HostsNotCovered(
                f"log dirs are placed on {', '.join(missing)}, but no task ran there (tasks ran on "
                f"{', '.join(sorted(set(ran)))}): run an executor on every broker host, the stage with a task "
                f"in every slot (docs/spark.md)")
        host = found[index]["host"]
        if host not in self.hosts:
            return None
        held: dict[str, list[str]] = {}
        for f in found:  # (a host's partitions as its first task listed them: every task agrees on them)
            held.setdefault(f["host"], f["partitions"])
        owner = owners(self.hosts, held)
        peers = [i for i, f in enumerate(found) if f["host"] == host]
        ours = [name for name in held[host] if owner[name] == host][peers.index(index)::len(peers)]
        wanted = frozenset(p for p in (parse_partition_dir(name) for name in ours) if p is not None)
        opts = parse_options({**(self.options if options is None else options), "path": ",".join(self.hosts[host])})
        opts = dataclasses.replace(opts, assign=wanted if opts.assign is None else wanted & opts.assign)
        return opts if opts.assign else None


def survey_hosts(spark: Any, placed: str | Mapping[str, Sequence[str]], options: Mapping[str, str] | None = None,
                 tasks: int | None = None, topics: bool = True, registry: bool = True
                 ) -> tuple[list[str] | None, Registry | None]:
    """What a read of log dirs placed on their hosts must know before it is planned, found there by one
    barrier stage with the checks `read` makes (the driver cannot list the hosts' disks):

    - with `topics`, the topics the read selects (`subscribe`, `subscribePattern`, `assign` of
      `options`; kfs.spark.jobs: `kfs spark export --on-hosts` writes each typed topic apart);
    - with `registry`, the registry it decodes with when no `schemas` option names one: rebuilt from the
      registry's topic (`schemasTopic`, `_schemas`) on the host that is the first (in the order given)
      to hold it, as `load("a,b")` would read it, and sent back to the driver, which types the columns
      with it and ships it with the read. None when the options need none (`schemas` given,
      decode=raw, only internal topics) or no host holds the topic.

    (None, None) and no stage when neither is asked for."""
    from kfs.internal_topics.framing import internal_topic

    hosts, read_options, opts, n = _stage(spark, placed, options, tasks)
    registry = registry and not (opts.schemas is not None or opts.decode == "raw" or (
        opts.subscribe is not None and opts.subscribe_pattern is None and opts.assign is None
        and all(internal_topic(t) for t in opts.subscribe)))
    if not topics and not registry:
        return None, None
    task = SurveyTask(hosts, read_options, SURVEY_SCHEMA, None, topics, opts.schemas_topic if registry else None)
    rows = spark.range(n, numPartitions=n).mapInArrow(task, SURVEY_SCHEMA, barrier=True).collect()
    states = [row.state for row in rows if row.state is not None]
    return (sorted({row.topic for row in rows if row.topic is not None}) if topics else None,
            Registry(pickle.loads(states[0])) if states else None)


def topics_on_hosts(spark: Any, placed: str | Mapping[str, Sequence[str]], options: Mapping[str, str] | None = None,
                    tasks: int | None = None) -> list[str]:
    """The topics a read of log dirs placed on their hosts selects (`survey_hosts`)."""
    return survey_hosts(spark, placed, options, tasks, topics=True, registry=False)[0] or []


def registry_for_hosts(spark: Any, placed: str | Mapping[str, Sequence[str]],
                       options: Mapping[str, str] | None = None, tasks: int | None = None) -> Registry | None:
    """The hosts' own registry for a read of log dirs placed on their hosts (`survey_hosts`)."""
    return survey_hosts(spark, placed, options, tasks, topics=False, registry=True)[1]


# A survey's rows: a partition the read selects (topic, partition), or the registry's state (state).
SURVEY_SCHEMA = StructType([StructField("topic", StringType()), StructField("partition", IntegerType()),
                            StructField("state", BinaryType())])


class SurveyTask(HostTask):
    """One barrier task of `survey_hosts`: the partitions of its share that the options select (with
    `topics`), and the registry's state from its topic's first partition when that is in its share
    (`registry_topic`; at most one such row in all)."""

    def __init__(self, hosts: dict[str, list[str]], options: dict[str, str], schema: StructType,
                 registry: RegistryState | None, topics: bool, registry_topic: str | None) -> None:
        super().__init__(hosts, options, schema, registry)
        self.topics = topics
        self.registry_topic = registry_topic

    def read(self, found: list[dict[str, Any]], index: int) -> Iterator[pa.RecordBatch]:
        from pyspark.sql.pandas.types import to_arrow_schema

        from kfs.registry.sources import state_from_logdirs

        arrow_schema = to_arrow_schema(SURVEY_SCHEMA)
        opts = self.own_options(found, index)
        if self.topics and opts is not None and opts.assign is not None:
            selected = sorted((t, p) for t, p in opts.assign if opts.wants(t, p))
            if selected:
                yield pa.RecordBatch.from_arrays([pa.array([t for t, _ in selected], pa.string()),
                                                  pa.array([p for _, p in selected], pa.int32()),
                                                  pa.nulls(len(selected), pa.binary())], schema=arrow_schema)
        if self.registry_topic is None:
            return
        # (the share of every partition, whatever the read selects: `_schemas` need not be among them)
        share = self.own_options(found, index, {"subscribe": self.registry_topic})
        if share is None or share.assign is None or (self.registry_topic, 0) not in share.assign:
            return
        state = state_from_logdirs(LogDirs(list(share.logdirs)), self.registry_topic)
        if state is not None:
            yield pa.RecordBatch.from_arrays([pa.nulls(1, pa.string()), pa.nulls(1, pa.int32()),
                                              pa.array([pickle.dumps(state)], pa.binary())], schema=arrow_schema)


GREP_SCHEMA = StructType([StructField("topic", StringType()), StructField("partition", IntegerType()),
                          StructField("start", LongType()), StructField("seq", IntegerType()),
                          StructField("lines", BinaryType())])


def grep_lines(spark: Any, placed: str | Mapping[str, Sequence[str]], pattern: str | bytes, regex: bool,
               decode: str = "auto", options: Mapping[str, str] | None = None, tasks: int | None = None) -> Any:
    """`kfs spark grep`'s matching JSON lines over log dirs placed on their hosts, read there by one barrier
    stage as `read` does: a DataFrame of (topic, partition, start offset of the piece, chunk number,
    lines), in the order `orderBy` of the first four gives. Framed payloads decode with the registry of
    the `schemas` option (read on the driver) when given, else with the hosts' own (`registry_for_hosts`:
    the first host to hold `_schemas`), on every host alike."""
    hosts, read_options, opts, n = _stage(spark, placed, options, tasks)
    registry = None
    if decode != "raw" and opts.schemas is not None:
        from kfs.registry import load_registry

        registry = load_registry([], opts.schemas, opts.schemas_topic)
    elif decode != "raw":
        registry = registry_for_hosts(spark, hosts, read_options, n)
    task = GrepTask(hosts, read_options, registry.state if registry is not None else None, pattern, regex, decode)
    return spark.range(n, numPartitions=n).mapInArrow(task, GREP_SCHEMA, barrier=True)


class GrepTask(HostTask):
    """One barrier task of `grep_lines`: its share's matching records as JSON lines, in chunks."""

    def __init__(self, hosts: dict[str, list[str]], options: dict[str, str], registry: RegistryState | None,
                 pattern: str | bytes, regex: bool, decode: str) -> None:
        super().__init__(hosts, options, GREP_SCHEMA, registry)
        self.pattern = pattern
        self.regex = regex
        self.decode = decode

    def read(self, found: list[dict[str, Any]], index: int) -> Iterator[pa.RecordBatch]:
        from pyspark.sql.pandas.types import to_arrow_schema

        from kfs.spark.jobs import grep_split
        from kfs.spark.plan import Split, plan_splits

        opts = self.own_options(found, index)
        if opts is None:
            return
        schema = to_arrow_schema(GREP_SCHEMA)
        registry = Registry(self.registry) if self.registry is not None else None
        for split in plan_splits(opts):
            for piece in split.pieces:  # (a piece's chunks, numbered: the driver orders the pieces)
                one = Split(split.index, (piece,))
                for seq, chunk in enumerate(grep_split(one, opts, self.pattern, self.regex, self.decode, registry)):
                    yield pa.RecordBatch.from_arrays(
                        [pa.array([piece.topic]), pa.array([piece.partition], pa.int32()),
                         pa.array([piece.start_offset], pa.int64()), pa.array([seq], pa.int32()),
                         pa.array([chunk], pa.binary())], schema=schema)
