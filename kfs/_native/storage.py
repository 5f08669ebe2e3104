"""The storage layer's compiled lookups (csrc/storage/): each the function of _speedups.pyi, or None unbuilt.

- `find_v2_batch`: the walk of LogSegment.indexed_batch over one index interval (a `.value` lookup),
  accepting only intervals whose every check holds and declining the rest to Python's;
- `v2_record_at`: the one record of a batch LogSegment.records_of would give at an offset, for an
  uncompressed or lz4 batch it walks cleanly, declining the rest to records_of;
- `index_slot`: SegmentIndex._largest_lower_bound_slot (Kafka's warm/cold search), slot for slot;
- `walk_v2_headers`: the tail walk's run of plain v2 batch headers (LogSegment._refresh_tail), with the
  walk marks it leaves, stopping at the first header the Python walk must judge.
"""

from __future__ import annotations

from kfs._native import BUILT, extension

find_v2_batch = extension.find_v2_batch if BUILT else None
v2_record_at = extension.v2_record_at if BUILT else None
index_slot = extension.index_slot if BUILT else None
walk_v2_headers = extension.walk_v2_headers if BUILT else None
