"""A task's partial aggregates, when kfs's JVM front pushes a query's aggregation into the read.

Without it a `groupBy("topic").count()` or a `sum(value_decoded.amount)` copies every row out of the
Python worker into the JVM, which then aggregates them: on two cores that JVM work competes with the
decoding for the same CPU. With it (kfs/spark/java/kfs/spark/AggregatePushdown.java) Spark plans the read
with a schema of partial rows (the grouping columns, then one column an aggregate, each field's metadata
saying which), and each task aggregates its own rows here and sends Spark one row a group; Spark then
aggregates those rows as it aggregates its own partials (a count's partials are summed).

The rows aggregated are the rows the scan would have sent: the reader builds the columns the aggregates
read (`input_schema`, pruned as kfs.spark.pruning prunes) by the same read, so a decode error's null is
skipped as Spark would skip it. Sums are exact (a batch that could overflow a long is summed in
decimal); a task's sum past a long is an error in ANSI mode, as Spark's own sum is, and wraps otherwise,
as Spark's legacy sum of longs does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import DataType, StructField, StructType

from kfs.storage import KfsError

KIND = "kfs.aggregate"  # AggregatePushdown.KIND
COLUMN = "kfs.column"
ANSI = "kfs.ansi"
_LONG = 1 << 63
_FUNCTIONS = ("count_star", "count", "sum", "min", "max")


class AggregateOverflowError(KfsError, ArithmeticError):
    """A task's sum does not fit a long in ANSI mode (Spark's own sum raises there too)."""


@dataclasses.dataclass(frozen=True)
class Aggregate:
    """One pushed aggregate: its function and the path of the column it reads (none for count(*))."""

    function: str
    path: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class AggregatePlan:
    """A pushed aggregation: the grouping columns, the aggregates, and the partial rows' schema."""

    groups: tuple[str, ...]
    aggregates: tuple[Aggregate, ...]
    output: StructType
    ansi: bool

    @classmethod
    def from_schema(cls, schema: StructType) -> AggregatePlan | None:
        """The aggregation a read schema describes (AggregatePushdown's metadata), or None: a plain read."""
        if not schema.fields or any(KIND not in field.metadata for field in schema.fields):
            return None
        groups: list[str] = []
        aggregates: list[Aggregate] = []
        for field in schema.fields:
            kind, path = field.metadata[KIND], tuple(field.metadata.get(COLUMN, ()))
            if kind == "group" and len(path) == 1 and not aggregates:
                groups.append(path[0])
            elif kind in _FUNCTIONS and (kind == "count_star") == (not path):
                aggregates.append(Aggregate(kind, path))
            else:
                raise ValueError(f"kfs: a pushed aggregation's field {field.name} is {kind} of {path}")
        ansi = bool(schema.fields[0].metadata.get(ANSI, True))
        return cls(tuple(groups), tuple(aggregates), schema, ansi)

    def paths(self) -> list[tuple[str, ...]]:
        """The columns read, in order: the grouping columns, then each aggregate's (once each)."""
        seen: list[tuple[str, ...]] = [(group,) for group in self.groups]
        for aggregate in self.aggregates:
            if aggregate.path and aggregate.path not in seen:
                seen.append(aggregate.path)
        return seen

    def input_schema(self, full: StructType) -> StructType:
        """The columns of `full` the aggregates and groups read, nested structs cut to the fields read;
        `partition` alone when nothing is read (count(*): the batches still carry their row counts)."""
        paths = self.paths() or [("partition",)]
        for path in paths:
            if not _resolves(full, path):
                raise KfsError(f"kfs: a pushed aggregate reads {'.'.join(path)}, which this read's schema does "
                               "not have (a schema given with .schema()?): read with aggregatePushdown=false")
        return _pruned(full, paths)

    def reduce(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """The partial rows of a task's batches (of `input_schema`): one a group met, or exactly one
        when nothing is grouped (a count of 0 and nulls for a task that read no row)."""
        partials: dict[tuple[Any, ...], list[Any]] = {}
        for batch in batches:
            if batch.num_rows:
                for key, values in self._batch_partials(batch):
                    if key in partials:
                        partials[key] = [_merge(a.function, old, new)
                                         for a, old, new in zip(self.aggregates, partials[key], values, strict=True)]
                    else:
                        partials[key] = values
        if not self.groups and () not in partials:
            partials[()] = [0 if a.function in ("count_star", "count") else None for a in self.aggregates]
        yield self._output(partials)

    def _batch_partials(self, batch: pa.RecordBatch) -> list[tuple[tuple[Any, ...], list[Any]]]:
        columns = {path: _column_at(batch, path) for path in self.paths()}
        inputs = [_prepared(a, columns[a.path]) if a.path else None for a in self.aggregates]
        keys = [columns[(group,)] for group in self.groups]
        if all(_constant(key) for key in keys):  # (a piece's batch: one topic and partition, the usual case)
            return [(tuple(key[0].as_py() for key in keys),
                     [_scalar_partial(a, column, batch.num_rows) for a, column in zip(self.aggregates, inputs,
                                                                                       strict=True)])]
        names = [f"g{i}" for i in range(len(self.groups))]
        table = pa.table({**{name: columns[(group,)] for name, group in zip(names, self.groups, strict=True)},
                          **{f"a{i}": column for i, column in enumerate(inputs) if column is not None}})
        wanted = [(names[0], "count", pc.CountOptions(mode="all")) if a.function == "count_star"
                  else (f"a{i}", "count" if a.function == "count" else a.function)
                  for i, a in enumerate(self.aggregates)]
        grouped = table.group_by(names, use_threads=False).aggregate(wanted)
        rows = grouped.to_pydict()  # (each aggregate's column named "<column>_<function>")
        agg_columns = [rows[f"{column}_{function}"] for column, function, *_ in wanted]
        key_columns = [rows[name] for name in names]
        return [(tuple(key[r] for key in key_columns), [_int_or_none(column[r]) for column in agg_columns])
                for r in range(grouped.num_rows)]

    def _output(self, partials: dict[tuple[Any, ...], list[Any]]) -> pa.RecordBatch:
        arrow = to_arrow_schema(self.output, timezone="UTC")
        keys = list(partials)
        arrays = [pa.array([key[i] for key in keys], arrow.field(i).type) for i in range(len(self.groups))]
        for i, aggregate in enumerate(self.aggregates):
            field = arrow.field(len(self.groups) + i)
            values = [self._final(aggregate, partials[key][i]) for key in keys]
            if pa.types.is_timestamp(field.type):
                arrays.append(pa.array(values, pa.int64()).cast(field.type))
            else:
                arrays.append(pa.array(values, field.type))
        return pa.RecordBatch.from_arrays(arrays, schema=arrow)

    def _final(self, aggregate: Aggregate, value: int | None) -> int | None:
        if aggregate.function != "sum" or value is None or -_LONG <= value < _LONG:
            return value
        if self.ansi:
            raise AggregateOverflowError(
                f"kfs: sum({'.'.join(aggregate.path)}) overflows a long in this task "
                "(ANSI mode, as Spark's own sum raises); spark.sql.ansi.enabled=false wraps it")
        return (value + _LONG) % (1 << 64) - _LONG


def _pruned(full: StructType, paths: Sequence[tuple[str, ...]]) -> StructType:
    """`full` cut to the fields on `paths` (in `full`'s order), each kept field's metadata kept."""
    fields = []
    for field in full.fields:
        below = [path[1:] for path in paths if path[0] == field.name]
        if not below:
            continue
        data_type: DataType = field.dataType
        if all(below) and isinstance(data_type, StructType):
            data_type = _pruned(data_type, below)
        fields.append(StructField(field.name, data_type, field.nullable, field.metadata))
    return StructType(fields)


def _constant(column: pa.Array) -> bool:
    """Whether every row of `column` holds its first row's value, not null."""
    return column.null_count == 0 and bool(pc.all(pc.equal(column, column[0])).as_py())


def _resolves(schema: StructType, path: tuple[str, ...]) -> bool:
    data_type: DataType = schema
    for name in path:
        if not isinstance(data_type, StructType) or name not in data_type.fieldNames():
            return False
        data_type = data_type[name].dataType
    return True


def _column_at(batch: pa.RecordBatch, path: tuple[str, ...]) -> pa.Array:
    """The column at `path`; a nested field is null where any struct above it is."""
    column = batch.column(batch.schema.get_field_index(path[0]))
    for name in path[1:]:
        column = pc.struct_field(column, name)
    return column


def _prepared(aggregate: Aggregate, column: pa.Array) -> pa.Array:
    """The column as its aggregate reads it: timestamps as their microseconds; a sum that could pass a
    long (its largest magnitude times its count) in decimal, so it is exact."""
    if pa.types.is_timestamp(column.type):
        return column.cast(pa.int64())
    if aggregate.function == "sum":
        column = column.cast(pa.int64())
        bounds = pc.min_max(column)
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        if low is not None and max(abs(low), abs(high)) * len(column) >= _LONG:
            return column.cast(pa.decimal128(38, 0))
    return column


def _scalar_partial(aggregate: Aggregate, column: pa.Array | None, rows: int) -> int | None:
    if aggregate.function == "count_star":
        return rows
    assert column is not None
    if aggregate.function == "count":
        return len(column) - column.null_count
    return _int_or_none(getattr(pc, aggregate.function)(column).as_py())


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


def _merge(function: str, old: int | None, new: int | None) -> int | None:
    if old is None:
        return new
    if new is None:
        return old
    if function in ("count_star", "count", "sum"):
        return old + new
    return min(old, new) if function == "min" else max(old, new)
