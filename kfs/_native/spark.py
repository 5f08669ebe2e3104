"""The Spark source's compiled loops (csrc/spark/): each the function of _speedups.pyi, or None unbuilt.

- `arrow_builder`, `arrow_append_v2`, `arrow_append_records`, `arrow_take`, `arrow_payload_bytes`: the
  undecoded columns of Spark's Kafka schema (key, value, offset, timestamp, timestampType, headers)
  built in Arrow's layout in C buffers, a v2 records section at a time without a Record per record,
  and handed to Arrow without a copy (kfs/spark/arrow_columns.py; the Python path,
  kfs.spark.source.arrow_batches, stays the reference and the fallback);
- `arrow_append_run`: many plain batches of a segment window appended in one call, with the segment
  walk's checks (as views' walk_v2_run renders them), no Python between batches;
- `offsets_text_columns`: the decoded JSON-text columns of `__consumer_offsets`' offset commits
  (kfs.spark.internal_rows.InternalRows), from the key and value arrays, no Python per record;
- `offsets_typed_columns`: the same commits' fields as Arrow buffers, for their typed columns
  (kfs.spark.internal_types).
"""

from __future__ import annotations

from kfs._native import BUILT, extension

arrow_builder = extension.arrow_builder if BUILT else None
arrow_append_v2 = extension.arrow_append_v2 if BUILT else None
arrow_append_run = extension.arrow_append_run if BUILT else None
arrow_append_records = extension.arrow_append_records if BUILT else None
arrow_take = extension.arrow_take if BUILT else None
arrow_payload_bytes = extension.arrow_payload_bytes if BUILT else None
offsets_text_columns = extension.offsets_text_columns if BUILT else None
offsets_typed_columns = extension.offsets_typed_columns if BUILT else None
