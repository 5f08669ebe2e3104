"""The read options, named and meant as in Spark's Kafka source (`KafkaSourceProvider`).

Pure Python: the options are parsed on the driver and again on the workers, neither of which
needs a SparkContext. Spark hands every option over as a string.

Where kfs differs from Spark's Kafka source, on purpose:
- a partition left out of a `startingOffsets` / `endingOffsets` JSON takes the default
  (Spark requires every assigned partition to be listed);
- an offset outside the log is clamped to `[log start, log end]` (Spark fails the query with
  "some data may have been lost", unless `failOnDataLoss=false`): a log dir is a snapshot, not a
  broker that could be asked again;
- there is no `subscribe` requirement: without `subscribe`, `subscribePattern` or `assign`,
  every partition of the log dirs is read.

kfs's own options: `isolation` (`read_uncommitted` | `read_committed`), `onCorrupt` (`fail` |
`skip`), `maxSplitBytes` (bytes per task at most, 512 MiB by default: PySpark's Python data source
costs each task ~75 ms of its slot, three times what a JVM task costs, and Spark's own Kafka source
reads a whole Kafka partition per task), `parallelism` (tasks per
wave; `kfs.spark.register` sets it to the session's default parallelism), and for schema-registry
framed payloads (kfs.spark.typed) `decode` (`auto` | `raw`), `schemas` (other log dirs holding the
registry's topic, or a directory of `<id>.avsc|.proto|.json` files, as `kfs cat --schemas`) and
`schemasTopic` (`_schemas` by default). `aggregatePushdown` (`true` | `false`) is read by kfs's JVM
front only (kfs.spark.aggregates): whether it takes a query's aggregation into the read.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

EARLIEST = -2  # Spark's Kafka source (and ListOffsets): -2 earliest, -1 latest
LATEST = -1

# A Python data source's task costs its slot ~75 ms whatever it reads (docs/spark.md): few, large tasks.
DEFAULT_MAX_SPLIT_BYTES = 512 * 1024 * 1024


class OptionError(ValueError):
    """An option Spark's Kafka source would also reject; the message is one sentence."""


# A start or end: EARLIEST/LATEST, or {topic: {partition: offset}} on top of a default.
@dataclass(frozen=True)
class OffsetSpec:
    default: int
    per_partition: Mapping[tuple[str, int], int] = field(default_factory=dict)

    def for_partition(self, topic: str, partition: int) -> int:
        return self.per_partition.get((topic, partition), self.default)


@dataclass(frozen=True)
class TimestampSpec:
    """A global timestamp (`startingTimestamp`) or per partition (`startingOffsetsByTimestamp`)."""

    default: int | None
    per_partition: Mapping[tuple[str, int], int] = field(default_factory=dict)

    def for_partition(self, topic: str, partition: int) -> int | None:
        return self.per_partition.get((topic, partition), self.default)


@dataclass(frozen=True)
class ReadOptions:
    logdirs: tuple[str, ...]
    starting_offsets: OffsetSpec
    ending_offsets: OffsetSpec
    starting_timestamp: TimestampSpec | None
    ending_timestamp: TimestampSpec | None
    no_match_starting_latest: bool  # startingOffsetsByTimestampStrategy=latest
    include_headers: bool
    min_partitions: int | None
    max_split_bytes: int
    parallelism: int | None
    isolation: str
    on_corrupt: str
    subscribe: frozenset[str] | None
    subscribe_pattern: str | None
    assign: frozenset[tuple[str, int]] | None
    decode: str = "auto"
    schemas: str | None = None
    schemas_topic: str = "_schemas"

    def wants(self, topic: str, partition: int) -> bool:
        """Whether `subscribe` / `subscribePattern` / `assign` select this partition."""
        if self.subscribe is not None and topic not in self.subscribe:
            return False
        if self.subscribe_pattern is not None and not re.fullmatch(self.subscribe_pattern, topic):
            return False
        return self.assign is None or (topic, partition) in self.assign


def _get(options: Mapping[str, str], name: str) -> str | None:
    """Spark's options are case-insensitive; a plain dict (tests, `plan_splits`) may not be."""
    if name in options:
        return options[name]
    lowered = name.lower()
    for key, value in options.items():
        if key.lower() == lowered:
            return value
    return None


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    text = _get(options, name)
    if text is None:
        return default
    if text.strip().lower() in ("true", "1", "yes"):
        return True
    if text.strip().lower() in ("false", "0", "no"):
        return False
    raise OptionError(f"option {name} must be true or false, not {text!r}")


def _int(options: Mapping[str, str], name: str) -> int | None:
    text = _get(options, name)
    if text is None:
        return None
    try:
        return int(text.strip())
    except ValueError:
        raise OptionError(f"option {name} must be an integer, not {text!r}") from None


def _json_partitions(name: str, text: str) -> dict[tuple[str, int], int]:
    """`{"orders": {"0": 23, "1": -2}}` → {("orders", 0): 23, ("orders", 1): -2}."""
    try:
        parsed = json.loads(text)
        return {(topic, int(p)): int(v) for topic, parts in parsed.items() for p, v in parts.items()}
    except (ValueError, AttributeError, TypeError):
        raise OptionError(f'option {name} must be earliest, latest or JSON like {{"topic": {{"0": 23}}}}, '
                          f"not {text!r}") from None


def _offsets(options: Mapping[str, str], name: str, default: int) -> OffsetSpec:
    text = _get(options, name)
    if text is None:
        return OffsetSpec(default)
    word = text.strip().lower()
    if word == "earliest":
        return OffsetSpec(EARLIEST)
    if word == "latest":
        return OffsetSpec(LATEST)
    return OffsetSpec(default, _json_partitions(name, text))


def _timestamps(options: Mapping[str, str], global_name: str, json_name: str) -> TimestampSpec | None:
    """Spark's precedence: the global timestamp option over the per-partition JSON one."""
    ts = _int(options, global_name)
    if ts is not None:
        return TimestampSpec(ts)
    text = _get(options, json_name)
    if text is None:
        return None
    return TimestampSpec(None, _json_partitions(json_name, text))


def _paths(options: Mapping[str, str]) -> tuple[str, ...]:
    """`load("a,b")` gives `path`; `load(["a", "b"])` gives Spark's `paths` (a JSON array)."""
    found: list[str] = []
    text = _get(options, "paths")
    if text:
        try:
            found.extend(json.loads(text))
        except ValueError:
            found.extend(text.split(","))
    text = _get(options, "path")
    if text:
        found.extend(text.split(","))
    # Absolute (the driver parses the options): a relative path means the driver's working
    # directory, also for a task on an executor, whose working directory is the Worker's.
    dirs = tuple(dict.fromkeys(os.path.abspath(p.strip()) for p in found if p.strip()))
    if not dirs:
        raise OptionError('no log dir given: spark.read.format("kfs").load("/path/to/logdir[,...]")')
    return dirs


def parse_options(options: Mapping[str, str]) -> ReadOptions:
    starting = _offsets(options, "startingOffsets", EARLIEST)
    ending = _offsets(options, "endingOffsets", LATEST)
    # KafkaSourceProvider.validateBatchOptions: a batch query cannot start at latest or end at earliest.
    if starting.default == LATEST or LATEST in starting.per_partition.values():
        raise OptionError("startingOffsets cannot be latest for batch queries (as in Spark's Kafka source)")
    if ending.default == EARLIEST or EARLIEST in ending.per_partition.values():
        raise OptionError("endingOffsets cannot be earliest for batch queries (as in Spark's Kafka source)")

    strategy = (_get(options, "startingOffsetsByTimestampStrategy") or "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError(f"startingOffsetsByTimestampStrategy must be error or latest, not {strategy!r}")
    isolation = (_get(options, "isolation") or "read_uncommitted").strip().lower()
    if isolation not in ("read_uncommitted", "read_committed"):
        raise OptionError(f"isolation must be read_uncommitted or read_committed, not {isolation!r}")
    on_corrupt = (_get(options, "onCorrupt") or "fail").strip().lower()
    if on_corrupt not in ("fail", "skip"):
        raise OptionError(f"onCorrupt must be fail or skip, not {on_corrupt!r}")

    decode = (_get(options, "decode") or "auto").strip().lower()
    if decode not in ("auto", "raw"):
        raise OptionError(f"decode must be auto or raw, not {decode!r}")
    schemas = _get(options, "schemas")
    if schemas is not None:
        from kfs.registry.sources import SchemasSourceError, check_schemas_source

        try:
            schemas = check_schemas_source(schemas)
        except SchemasSourceError as e:
            raise OptionError(str(e)) from None
    schemas_topic = (_get(options, "schemasTopic") or "_schemas").strip()

    min_partitions = _int(options, "minPartitions")
    if min_partitions is not None and min_partitions < 1:
        raise OptionError(f"minPartitions must be positive, not {min_partitions}")
    parallelism = _int(options, "parallelism")
    if parallelism is not None and parallelism < 1:
        raise OptionError(f"parallelism must be positive, not {parallelism}")
    max_split_bytes = _int(options, "maxSplitBytes") or DEFAULT_MAX_SPLIT_BYTES
    if max_split_bytes < 1:
        raise OptionError(f"maxSplitBytes must be positive, not {max_split_bytes}")

    subscribe_text = _get(options, "subscribe")
    subscribe = (frozenset(t.strip() for t in subscribe_text.split(",") if t.strip())
                 if subscribe_text is not None else None)
    pattern = _get(options, "subscribePattern")
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as e:
            raise OptionError(f"subscribePattern is not a regular expression: {e}") from None
    assign_text = _get(options, "assign")
    assign = None
    if assign_text is not None:
        try:
            assign = frozenset((t, int(p)) for t, parts in json.loads(assign_text).items() for p in parts)
        except (ValueError, AttributeError, TypeError):
            raise OptionError(f'assign must be JSON like {{"topic": [0, 1]}}, not {assign_text!r}') from None

    return ReadOptions(
        logdirs=_paths(options),
        starting_offsets=starting,
        ending_offsets=ending,
        starting_timestamp=_timestamps(options, "startingTimestamp", "startingOffsetsByTimestamp"),
        ending_timestamp=_timestamps(options, "endingTimestamp", "endingOffsetsByTimestamp"),
        no_match_starting_latest=strategy == "latest",
        include_headers=_bool(options, "includeHeaders", False),
        min_partitions=min_partitions,
        max_split_bytes=max_split_bytes,
        parallelism=parallelism,
        isolation=isolation,
        on_corrupt=on_corrupt,
        subscribe=subscribe,
        subscribe_pattern=pattern,
        assign=assign,
        decode=decode,
        schemas=schemas,
        schemas_topic=schemas_topic,
    )
