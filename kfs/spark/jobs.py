"""Jobs on top of the data source: `kfs spark export` (Parquet) and `kfs spark grep` (JSON lines).

Both plan with `plan_splits`, so offset and timestamp ranges never read splits that cannot match,
and both read with the same record path as the DataFrame (`piece_records`). `grep` skips the
DataFrame: a match is decided and rendered (`kfs.views.jsonl`, the lines `kfs cat` prints) in the task that
decoded the record, so only matching lines cross to the driver, in split order, which is
partition order and then offset order.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

from kfs.spark.options import ReadOptions, parse_options
from kfs.spark.plan import Split, plan_splits

if TYPE_CHECKING:
    from kfs.registry import Registry

DEFAULT_MASTER = "local[*]"
_CHUNK = 1 << 20  # matching lines travel to the driver in chunks of about this many bytes


def _progress(message: str) -> None:
    sys.stderr.write(f"kfs: {message}\n")
    sys.stderr.flush()


def spark_session(master: str = DEFAULT_MASTER, app_name: str = "kfs") -> Any:
    """A session for a job. On a local master: bound to loopback, no UI, patient heartbeats
    (a loaded machine can outlast the default 10 s heartbeat while starting Python workers)."""
    from pyspark.sql import SparkSession

    from kfs.spark import jvm

    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.ui.showConsoleProgress", "true")
               .config("spark.sql.python.filterPushdown.enabled", "true"))
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = (builder.config("spark.ui.enabled", "false")
                   .config("spark.executor.heartbeatInterval", "600s")
                   .config("spark.network.timeout", "1200s"))
    spark = jvm.configure(builder).getOrCreate()  # (kfs's JVM front on every executor: kfs.spark.jvm)
    spark.sparkContext.setLogLevel("WARN")
    return spark


def _session(spark: Any, master: str, app_name: str) -> tuple[Any, bool]:
    """The session to run in, and whether the job owns (so stops) it. A session already active in
    this process (a notebook's, a test's) is used as it is: stopping it would pull it from under
    its owner, and its master was chosen by whoever started it."""
    if spark is not None:
        return spark, False
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    return spark_session(master, app_name), True


def _describe(splits: Sequence[Split]) -> str:
    partitions = {p.partition_name for s in splits for p in s.pieces}
    size = sum(s.size for s in splits)
    return f"{len(partitions)} partition(s), {size / 2**20:.1f} MiB in {len(splits)} task(s)"


def _options(logdirs: Sequence[str], options: Mapping[str, str] | None, **extra: str) -> dict[str, str]:
    merged = dict(options or {})
    merged.update(extra)
    # Absolute: a relative path means the driver's working directory, wherever a task runs.
    merged["path"] = ",".join(os.path.abspath(p) for p in logdirs)
    return merged


def _with_parallelism(options: dict[str, str], spark: Any) -> dict[str, str]:
    """Plan whole waves for this session's cores, as the registered data source does."""
    if any(k.lower() == "parallelism" for k in options):
        return options
    try:
        return {**options, "parallelism": str(spark.sparkContext.defaultParallelism)}
    except Exception:  # Spark Connect: no SparkContext
        return options


def export(logdirs: Sequence[str], out: str, master: str = DEFAULT_MASTER, *,
           options: Mapping[str, str] | None = None, mode: str = "errorifexists", spark: Any = None,
           on_hosts: bool = False) -> None:
    """Write the log dirs as Parquet under `out`, partitioned by topic and partition, with headers.

    Rows are sorted by offset within each file, so Parquet's min/max statistics on `offset` let a
    later reader skip row groups much as the offset index lets kfs skip splits. Each topic whose
    subject types its payloads (kfs.spark.typed), and each of Kafka's internal topics, is written by
    a read of that topic alone, so its `topic=` directory holds its typed `key_decoded` / `value_decoded`
    (an internal topic's by Kafka's schemas: kfs.spark.internal_types); the other topics are written
    together (with a registry in reach, their decoded columns JSON text).

    `on_hosts`: each log dir is `HOST:/path` on that broker host's own disk, read there by barrier stages
    (kfs.spark.broker_local): one lists the topics, then the reads above, each typed topic apart when
    the `schemas` option gives the registry (read here, on the driver); internal topics decode without.
    """
    from kfs.spark import register

    if on_hosts:
        _export_on_hosts(logdirs, out, master, options, mode, spark)
        return
    opts = _options(logdirs, options, includeHeaders="true")
    parse_options(opts)  # a bad option fails here, before Spark starts
    spark, own = _session(spark, master, "kfs export")
    started = time.monotonic()
    try:
        splits = plan_splits(_with_parallelism(opts, spark))
        _progress(f"export: {_describe(splits)} to {out}")
        register(spark)
        for i, read in enumerate(_export_reads(opts, sorted({p.topic for s in splits for p in s.pieces}))):
            _write_export(spark.read.format("kfs").options(**read).load(), out, mode if i == 0 else "append")
    finally:
        if own:
            spark.stop()
    _progress(f"export: done in {time.monotonic() - started:.1f} s")


def _write_export(df: Any, out: str, mode: str) -> None:
    """One read of an export written under `out`: by topic and partition, sorted by offset in each."""
    (df.sortWithinPartitions("topic", "partition", "offset")
       .write.mode(mode).partitionBy("topic", "partition").parquet(out))


def _export_on_hosts(logdirs: Sequence[str], out: str, master: str, options: Mapping[str, str] | None, mode: str,
                     spark: Any) -> None:
    from kfs.spark import broker_local

    placed = broker_local.parse_placed(",".join(logdirs))
    read = {**(options or {}), "includeHeaders": "true"}
    read["path"] = ",".join(p for paths in placed.values() for p in paths)  # (broker_local.read takes it out)
    opts = parse_options(read)  # a bad option fails here, before Spark starts
    registry, _ = broker_local.decoded_columns(opts)
    spark, own = _session(spark, master, "kfs export")
    started = time.monotonic()
    try:
        _progress(f"export: the log dirs of {len(placed)} host(s), read on each, to {out}")
        # (the topics, and without a `schemas` option the hosts' own registry, found once for every read)
        listed, found = broker_local.survey_hosts(spark, placed, read, topics=opts.decode != "raw",
                                                  registry=registry is None)
        topics = listed or []
        registry = registry if registry is not None else found
        for i, each in enumerate(_export_reads(read, topics, registry, local=False)):
            _write_export(broker_local.read(spark, placed, each, registry=registry, find_registry=False), out,
                          mode if i == 0 else "append")
    finally:
        if own:
            spark.stop()
    _progress(f"export: done in {time.monotonic() - started:.1f} s")


def _export_reads(opts: dict[str, str], topics: list[str], registry: Registry | None = None,
                  local: bool = True) -> list[dict[str, str]]:
    """The reads an export runs: one per topic that decodes on its own (its subject types its payloads,
    or it is one of Kafka's internal topics: kfs.spark.typed) and one for the rest, or with
    `decode=raw` one for everything. `local`: the registry is the log dirs' own (else `registry`, the
    one a broker-local export read from the `schemas` option)."""
    from kfs.internal_topics.framing import internal_topic
    from kfs.spark.source import registry_for
    from kfs.spark.typed import PARTS, part_plan

    parsed = parse_options(opts)
    if parsed.decode == "raw" or not topics:
        return [opts]
    if local:
        registry = registry_for(parsed)
    wanted = [t for t in topics if parsed.subscribe is None or t in parsed.subscribe]
    alone = [t for t in wanted if internal_topic(t)
             or any(part_plan(registry, [t], part)[0].schema_id is not None for part in PARTS)]
    rest = [t for t in wanted if t not in alone]
    reads = [{**opts, "subscribe": t} for t in alone]
    if rest:
        reads.append({**opts, "subscribe": ",".join(rest)})
    return reads


def matcher(pattern: str | bytes, regex: bool = False) -> Callable[[bytes], bool]:
    """A test on bytes: substring (as `grep -F`), or a Python regular expression over the bytes."""
    needle = pattern.encode("utf-8") if isinstance(pattern, str) else pattern
    if regex:
        return re.compile(needle).search  # type: ignore[return-value]
    return lambda data: needle in data


def record_matches(record: Any, test: Callable[[bytes], bool]) -> bool:
    """Whether the key, the value or any header value matches (header keys are names, not data)."""
    if record.key is not None and test(record.key):
        return True
    if record.value is not None and test(record.value):
        return True
    return any(v is not None and test(v) for _, v in record.headers)


def _grep_on_hosts(pattern: str | bytes, logdirs: Sequence[str], regex: bool, master: str,
                   options: Mapping[str, str] | None, out: IO[bytes], spark: Any, decode: str) -> int:
    from kfs.spark import broker_local

    placed = broker_local.parse_placed(",".join(logdirs))
    parse_options({**(options or {}), "path": ",".join(p for paths in placed.values() for p in paths)})
    spark, own = _session(spark, master, "kfs grep")
    started = time.monotonic()
    count = 0
    try:
        _progress(f"grep: the log dirs of {len(placed)} host(s), read on each")
        df = broker_local.grep_lines(spark, placed, pattern, regex, decode, options)
        # (sorted into partition and offset order: a shuffle of the matches only)
        for row in df.orderBy("topic", "partition", "start", "seq").select("lines").toLocalIterator():
            out.write(row.lines)
            count += row.lines.count(b"\n")
        out.flush()
    finally:
        if own:
            spark.stop()
    _progress(f"grep: {count} matching record(s) in {time.monotonic() - started:.1f} s")
    return count


def grep_split(split: Split, opts: ReadOptions, pattern: str | bytes, regex: bool,
               decode: str = "auto", registry: Registry | None = None) -> Iterator[bytes]:
    """The matching records of one split as JSON lines, joined into chunks of about `_CHUNK` bytes.
    `registry`: the one the driver read (kfs.spark.broker_local), else the log dirs' own."""
    from kfs.internal_topics.lines import line_decoder
    from kfs.spark.source import no_cyclic_gc, piece_records
    from kfs.spark.tasks import PlannedPartitions, missing_here
    from kfs.storage import KfsError
    from kfs.views.jsonl import line_prefix, render_line

    test = matcher(pattern, regex)
    planned = PlannedPartitions()
    if decode != "raw" and registry is None:  # schema-registry framed payloads: the registry of these log dirs
        from kfs.registry import load_registry

        try:
            registry = load_registry(list(opts.logdirs), opts.schemas, opts.schemas_topic)
        except KfsError as e:  # the log dirs were there when the driver planned
            raise missing_here(",".join(opts.logdirs), e) from None
    chunk: list[bytes] = []
    size = 0
    with no_cyclic_gc():
        for piece in split.pieces:
            prefix = line_prefix(piece.topic, piece.partition)
            plog = planned.open(piece)
            decoder = line_decoder(piece.topic, decode, plog, registry)
            for record in piece_records(plog, piece, opts):
                if record_matches(record, test):
                    line = render_line(prefix, record, decoder).encode("utf-8")
                    chunk.append(line)
                    size += len(line)
                    if size >= _CHUNK:
                        yield b"".join(chunk)
                        chunk, size = [], 0
    if chunk:
        yield b"".join(chunk)


def grep(pattern: str | bytes, logdirs: Sequence[str], regex: bool = False, master: str = DEFAULT_MASTER, *,
         options: Mapping[str, str] | None = None, out: IO[bytes] | None = None, spark: Any = None,
         decode: str = "auto", on_hosts: bool = False) -> int:
    """Print the records whose key, value or a header value contains `pattern`; returns how many.

    Output is each partition's matches in offset order (partitions in name order), as JSON lines.
    `on_hosts`: each log dir is `HOST:/path` on that broker host's own disk, read there by one barrier
    stage (kfs.spark.broker_local.grep_lines).
    """
    if regex:
        try:
            re.compile(pattern.encode("utf-8") if isinstance(pattern, str) else pattern)
        except re.error as e:
            raise ValueError(f"not a regular expression: {e}") from None
    out = out if out is not None else sys.stdout.buffer
    if on_hosts:
        return _grep_on_hosts(pattern, logdirs, regex, master, options, out, spark, decode)
    parse_options(_options(logdirs, options))  # a bad option fails here, before Spark starts
    spark, own = _session(spark, master, "kfs grep")
    started = time.monotonic()
    count = 0
    try:
        opts = parse_options(_with_parallelism(_options(logdirs, options), spark))
        splits = plan_splits(opts)
        _progress(f"grep: {_describe(splits)}")
        if splits:
            rdd = spark.sparkContext.parallelize(splits, len(splits))
            lines = rdd.flatMap(lambda split: grep_split(split, opts, pattern, regex, decode))
            # toLocalIterator keeps the split order and fetches one task's output at a time, so the
            # driver never holds more than a task's matches.
            for chunk in lines.toLocalIterator(prefetchPartitions=True):
                out.write(chunk)
                count += chunk.count(b"\n")
            out.flush()
    finally:
        if own:
            spark.stop()
    _progress(f"grep: {count} matching record(s) in {time.monotonic() - started:.1f} s")
    return count
