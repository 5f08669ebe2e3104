"""Kafka's internal topics as the Spark source's decoded columns (docs/spec.md section 8).

A read of `__consumer_offsets`, `__transaction_state` or `__cluster_metadata` shows each record's key and
value as the JSON `kfs cat` prints, or, read on its own, typed by Kafka's own schemas
(kfs.spark.internal_types). kfs.spark.typed.row_decoder hands a piece of such a topic to InternalRows;
registry-framed payloads are kfs.spark.typed's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kfs._native.spark import offsets_text_columns, offsets_typed_columns
from kfs.spark.pruning import arrow_type, project_array
from kfs.spark.typed import ArrayRow, RowDecoder

__all__ = ["InternalRows"]


class InternalRows(RowDecoder):
    """A Kafka internal topic's records (docs/spec.md section 8): their key and value as the JSON `kfs cat`
    prints, or, for the `typed` parts (a read of that topic alone), as Kafka's schemas type them
    (kfs.spark.internal_types); a record that does not decode has its reason in `value_decode_error`.

    From Arrow arrays (`array_columns`), `__consumer_offsets`' offset commits are written in C
    (kfs/_native/csrc/spark/offsets_text.c: the text kfs.internal_topics.offsets_fast gives, ~165 ns a
    commit against ~8 µs by the line decoder); every other row, and every row of the other internal
    topics, by the line decoder, record by record."""

    def __init__(self, topic: str, plog: Any, typed: Sequence[str] = (), hidden: frozenset[str] = frozenset()) -> None:
        from kfs.internal_topics import offsets_fast
        from kfs.internal_topics.framing import CONSUMER_OFFSETS
        from kfs.internal_topics.lines import line_decoder, parts_decoder

        self.topic = topic
        self.typed = tuple(typed)
        self.hidden = hidden
        self._whole: dict[str, pa.StructType] = {}  # each typed part's whole Arrow type
        self._null_members: dict[tuple[str, str], pa.Array] = {}  # (part, member): nulls, sliced per batch
        self.decode = None if self.typed else line_decoder(topic, "auto", plog, None)  # (typed: parts_decoder's)
        self.decode_parts = parts_decoder(topic, plog) if self.typed else None
        self.commits_in_c = (topic == CONSUMER_OFFSETS and offsets_fast.ENABLED and offsets_text_columns is not None
                             and self.decode is not None and not self.typed)
        self.typed_commits_in_c = (topic == CONSUMER_OFFSETS and offsets_fast.ENABLED
                                   and offsets_typed_columns is not None and bool(self.typed))

    def _typed_columns(self, records: Sequence[Any], types: Sequence[pa.DataType],
                       hidden: frozenset[str] | None = None) -> list[pa.Array]:
        from kfs.spark.internal_types import typed_internal

        assert self.decode_parts is not None
        keys: list[Any] = []
        values: list[Any] = []
        errors: list[str | None] = []
        for r in records:
            key, value, error = self.decode_parts(r)
            keys.append(key)
            values.append(value)
            errors.append(error)
        columns = []
        for part, decoded, data_type in (("key", keys, types[0]), ("value", values, types[1])):
            if part in (self.hidden if hidden is None else hidden):
                columns.append(pa.nulls(len(records), data_type))
                continue
            whole = self._whole_type(part)
            column = pa.array([typed_internal(d) for d in decoded], whole)
            columns.append(column if whole.equals(data_type) else project_array(column, data_type))
        return [*columns, pa.nulls(len(records), pa.string()), pa.array(errors, pa.string())]

    def _whole_type(self, part: str) -> pa.StructType:
        whole = self._whole.get(part)
        if whole is None:
            from kfs.spark.internal_types import internal_type

            whole = self._whole[part] = arrow_type(internal_type(self.topic, part))
        return whole

    def _nulls(self, part: str, field: pa.Field, n: int) -> pa.Array:
        """A member's n nulls: a slice of nulls made once (a nested member's nulls have a buffer per leaf)."""
        nulls = self._null_members.get((part, field.name))
        if nulls is None or len(nulls) < n:
            nulls = self._null_members[(part, field.name)] = pa.nulls(max(n, 4096), field.type)
        return nulls.slice(0, n)

    def _typed_commit_columns(self, keys: pa.Array, values: pa.Array, types: Sequence[pa.DataType]) -> list[pa.Array]:
        """The typed columns of a `__consumer_offsets` batch, its offset commits' fields read in C
        (offsets_typed_columns) and put in their members; every other row (declined by C) decoded as
        `_typed_columns` does, and each member that such rows have set put in place by a `take` of it
        alone (a `take` of the whole struct, every member's nulls with it, was half of the batch's time)."""
        assert offsets_typed_columns is not None
        n = len(keys)
        (status, record_type, group_offsets, group_data, topic_offsets, topic_data, partition, has_value, value_version,
         offset, leader_epoch, metadata_offsets, metadata_data, commit_timestamp, expire_timestamp) = \
            offsets_typed_columns(n, *_binary_buffers(keys), *_binary_buffers(values))
        declined = np.frombuffer(status, dtype=np.uint8).astype(bool)
        version = np.frombuffer(value_version, dtype=np.int16)

        def strings(offsets: bytes, data: bytes) -> pa.Array:
            return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])

        def numbers(buffer: bytes, dtype: Any, absent: np.ndarray | None = None) -> pa.Array:
            return pa.array(np.frombuffer(buffer, dtype=dtype), mask=absent)

        fields = {"group": strings(group_offsets, group_data), "topic": strings(topic_offsets, topic_data),
                  "partition": numbers(partition, np.int32),
                  "offset": numbers(offset, np.int64), "leaderEpoch": numbers(leader_epoch, np.int32, version != 3),
                  "metadata": strings(metadata_offsets, metadata_data),
                  "commitTimestamp": numbers(commit_timestamp, np.int64),
                  "expireTimestamp": numbers(expire_timestamp, np.int64, version != 1)}
        where = np.flatnonzero(declined)
        slow: list[pa.Array] = []
        if len(where):
            rows = [ArrayRow(keys[i].as_py(), values[i].as_py(), []) for i in where.tolist()]
            slow = self._typed_columns(rows, [self._whole_type("key"), self._whole_type("value")], frozenset())
        # row i of the batch is row at[i] of `slow` (null: a row C read)
        at = np.full(n, -1, dtype=np.int64)
        at[where] = np.arange(len(where), dtype=np.int64)
        from_slow = pa.array(at, mask=at < 0)
        parts = []
        for index, (part, name, versions, absent) in enumerate((
                ("key", "OffsetCommitKey", np.frombuffer(record_type, dtype=np.int16), declined),
                ("value", "OffsetCommitValue", version, ~np.frombuffer(has_value, dtype=np.uint8).astype(bool)))):
            whole = self._whole_type(part)
            slow_part = slow[index] if len(where) else None
            children = []
            for field in whole:
                if field.name == "type":
                    fast: pa.Array = pa.repeat(pa.scalar(name, pa.string()), n)
                elif field.name == "version":
                    fast = pa.array(versions)
                elif field.name == name:
                    fast = pa.StructArray.from_arrays([fields[f.name] for f in field.type], fields=list(field.type),
                                                      mask=pa.array(declined))
                else:
                    fast = self._nulls(part, field, n)
                if slow_part is not None:
                    member = slow_part.field(field.name)
                    if member.null_count < len(member):  # (set in a declined row: C's null there)
                        slow_member = member.take(from_slow)
                        fast = slow_member if field.name not in ("type", "version", name) else \
                            pc.if_else(pa.array(declined), slow_member, fast)
                children.append(fast)
            if slow_part is not None:  # a declined row is null where its Python row is
                absent = absent.copy()
                absent[where] = np.asarray(slow_part.is_null())
            parts.append(pa.StructArray.from_arrays(children, fields=list(whole), mask=pa.array(absent)))
        errors = pa.nulls(n, pa.string()) if not len(where) else slow[3].take(from_slow)
        columns = []
        for part, column, data_type in zip(("key", "value"), parts, types, strict=False):
            if part in self.hidden:
                columns.append(pa.nulls(n, data_type))
            else:
                columns.append(column if column.type.equals(data_type) else project_array(column, data_type))
        return [*columns, pa.nulls(n, pa.string()), errors]

    def columns(self, records: Sequence[Any], types: Sequence[pa.DataType]) -> list[pa.Array]:
        if self.typed:
            return self._typed_columns(records, types)
        if self.decode is None:  # (a __cluster_metadata partition that is not a metadata log)
            return super().columns(records, types)
        keys: list[str | None] = []
        values: list[str | None] = []
        errors: list[str | None] = []
        for r in records:
            key, value, error, _ = self.decode(r)
            keys.append(key)
            values.append(value)
            errors.append(error)
        return [pa.array(keys, types[0]), pa.array(values, types[1]), pa.nulls(len(records), pa.string()),
                pa.array(errors, pa.string())]

    def array_columns(self, keys: pa.Array, values: pa.Array, headers: pa.ListArray | None,
                      types: Sequence[pa.DataType]) -> list[pa.Array]:
        """`columns` of a batch given as Arrow arrays (the line decoder reads no header)."""
        if self.typed_commits_in_c:
            return self._typed_commit_columns(keys, values, types)
        if not self.commits_in_c or offsets_text_columns is None:
            return self.columns([ArrayRow(k, v, []) for k, v in zip(keys.to_pylist(), values.to_pylist(), strict=True)],
                                types)
        n = len(keys)
        status, key_offsets, key_text, value_offsets, value_text = offsets_text_columns(
            n, *_binary_buffers(keys), *_binary_buffers(values))
        key_column = pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(key_offsets), pa.py_buffer(key_text)])
        value_column = pa.Array.from_buffers(pa.string(), n,
                                             [None, pa.py_buffer(value_offsets), pa.py_buffer(value_text)])
        declined = np.flatnonzero(np.frombuffer(status, dtype=np.uint8))
        if not len(declined):
            return [key_column, value_column, pa.nulls(n, pa.string()), pa.nulls(n, pa.string())]
        rows = [ArrayRow(keys[i].as_py(), values[i].as_py(), []) for i in declined.tolist()]
        slow = self.columns(rows, types)
        # (each declined row's place taken by its row of `slow`, at n + k of the columns laid end to end)
        indices = np.arange(n, dtype=np.int64)
        indices[declined] = n + np.arange(len(declined), dtype=np.int64)
        take = pa.array(indices)
        errors = np.full(n, None, dtype=object)
        errors[declined] = slow[3].to_numpy(zero_copy_only=False)
        return [pa.concat_arrays([key_column, slow[0]]).take(take),
                pa.concat_arrays([value_column, slow[1]]).take(take), pa.nulls(n, pa.string()),
                pa.array(errors, pa.string())]


def _binary_buffers(array: pa.Array) -> tuple[Any, Any, Any, int]:
    """A binary array as the commit columns' C takes it: validity, offsets, data (an empty array's
    missing buffers as empty ones), and its offset."""
    validity, offsets, data = array.buffers()
    return (validity, offsets if offsets is not None else b"\0" * 4, data if data is not None else b"",
            array.offset)
