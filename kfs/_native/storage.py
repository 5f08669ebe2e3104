"""The storage layer's compiled lookups (csrc/storage/), each None when not built.

- `find_v2_batch`: the walk of LogSegment.indexed_batch over one index interval (a `.value` lookup),
  accepting only intervals whose every check holds and declining the rest to Python's;
- `v2_record_at`: the one record of a batch LogSegment.records_of would give at an offset, for an
  uncompressed or lz4 batch it walks cleanly, declining the rest to records_of;
- `index_slot`: SegmentIndex._largest_lower_bound_slot (Kafka's warm/cold search), slot for slot.
"""

from __future__ import annotations

from collections.abc import Callable

from kfs._native import extension
from kfs.record.types import Record

find_v2_batch: Callable[..., tuple[int, int] | int | None] | None = getattr(extension, "find_v2_batch", None)
v2_record_at: Callable[..., Record | bool | None] | None = getattr(extension, "v2_record_at", None)
index_slot: Callable[..., int] | None = getattr(extension, "index_slot", None)
