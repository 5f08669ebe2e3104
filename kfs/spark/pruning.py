"""The columns a query reads: what a reader builds for a pruned schema, and its batches cut down to it.

With kfs's JVM front (kfs.spark.jvm) Spark plans a read with only the columns the query uses (a count:
one; `sum(value_decoded.amount)`: that one field of the struct), and the reader is given that schema.
The reader builds the top-level columns named in it (`build_schema`), leaving out what nothing asks
for (the decoded columns above all: decoding is most of a task). A typed decoded column is built as
the query reads it: the compiled decoder reads the fields nobody asked for past (checked, not
written), and the per-row paths cut their whole values down (`project_array`). `project` cuts each
batch down to the exact types Spark expects, nested fields included. Without the JVM front the reader
gets the whole schema and all of these are the identity.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import DataType, StructField, StructType

DECODED = ("key_decoded", "value_decoded", "key_decode_error", "value_decode_error")  # filled together


def build_schema(read: StructType, full: StructType) -> StructType:
    """The columns to build for `read`: Spark's Kafka columns in their full form (all are made in one
    pass anyway), `headers` if `read` names it, and the four decoded columns (kfs.spark.typed) if it
    names one of them, each decoded column of the type `read` gives it (the fields of a typed struct
    the query reads: the compiled decoder reads the others past) with its plan (`full`'s metadata).

    A schema that names a column `full` does not have (one a user gave with `.schema(...)`) is built
    as it is, as before pruning existed."""
    names = set(read.fieldNames())
    if not names <= set(full.fieldNames()):
        return read
    wanted = {field.name for field in full.fields if field.name not in DECODED and field.name != "headers"}
    if names & set(DECODED):
        wanted.update(DECODED)
    if "headers" in names:
        wanted.add("headers")
    return StructType([StructField(field.name, read[field.name].dataType, field.nullable, field.metadata)
                       if field.name in DECODED and field.name in names else field
                       for field in full.fields if field.name in wanted])


def whole_types(built: StructType, full: StructType) -> dict[str, pa.DataType]:
    """The whole Arrow type of each decoded part ("key", "value") that `built` prunes."""
    whole = {}
    for part in ("key", "value"):
        name = f"{part}_decoded"
        if name in built.fieldNames() and built[name].dataType != full[name].dataType:
            whole[part] = arrow_type(full[name].dataType)
    return whole


def arrow_type(data_type: DataType) -> pa.DataType:
    """A Spark type as the Arrow type PySpark gives its column (UTC timestamps)."""
    return to_arrow_schema(StructType([StructField("t", data_type)]), timezone="UTC").field(0).type


def project(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """`batch` with exactly `schema`'s columns and types (a subset of its own, nested fields too)."""
    if batch.schema.equals(schema):
        return batch
    columns = [project_array(batch.column(field.name), field.type) for field in schema]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def project_array(array: pa.Array, target: pa.DataType) -> pa.Array:
    """`array` cut down to `target`: a struct to the fields `target` names, lists and maps by their
    items. Zero-copy: children are taken, never rebuilt value by value."""
    if array.type.equals(target):
        return array
    mask = array.is_null() if array.null_count else None
    if pa.types.is_struct(target):
        children = [project_array(_struct_child(array, field.name), field.type) for field in target]
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if pa.types.is_map(target):
        offsets = _list_offsets(array)
        keys = project_array(array.keys, target.key_type)
        items = project_array(array.items, target.item_type)
        return pa.MapArray.from_arrays(offsets, keys, items, type=target, mask=mask)
    if pa.types.is_list(target) or pa.types.is_large_list(target):
        offsets = _list_offsets(array)
        values = project_array(array.values, target.value_type)
        cls = pa.LargeListArray if pa.types.is_large_list(target) else pa.ListArray
        return cls.from_arrays(offsets, values, type=target, mask=mask)
    return array.cast(target)  # (a leaf Spark types as another Arrow type: never so far)


def _struct_child(array: pa.StructArray, name: str) -> pa.Array:
    """A struct's child by name, sliced as the struct is."""
    child = array.field(name)
    if len(child) != len(array):
        child = child.slice(array.offset, len(array))
    return child


def _list_offsets(array: pa.Array) -> pa.Array:
    """A list's or map's offsets (`offsets` has no nulls: `from_arrays` takes the list's as `mask`)."""
    offsets = array.offsets
    if offsets.offset:  # (from_arrays takes no slice of offsets with a mask: copy the n + 1 of them)
        offsets = pa.array(offsets.to_numpy(zero_copy_only=False), offsets.type)
    return offsets
