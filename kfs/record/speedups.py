"""The compiled hot loops (kfs/record/csrc/) when built, else None: callers keep their Python loop.

`pip install` compiles the C files of `kfs/record/csrc/` when a C compiler is there (pyproject.toml marks the
extension optional, so an install without one still succeeds). Twelve jobs, each the twin of (or, for
small_files, a cache in front of) Python code that stays the reference and the fallback:

- `decode_v2_records`, the loop of `default_batch.decode_records`;
- `render_jsonl`, `jsonl.render_line` over many records;
- `count_jsonl`, the length `render_jsonl` would give for a v2 records section, without decoding it
  into records (the size of a decoded view; kfs/views/line_lengths.py);
- `render_v2_jsonl`, `render_jsonl` of `decode_v2_records` fused: a records section straight to its JSON
  lines, no record created, without the GIL (kfs/views/batch_lines.py);
- `render_v2_dump`, the record lines of `kfs dump --deep-iteration --print-data-log` straight from a
  records section, fused as `render_v2_jsonl` (kfs/cli/dump_log.py, whose `_v2_data_lines` is its twin);
- `gather`, `b"".join(pieces)` into malloc'd memory without the GIL: a decoded read's reply for
  libfuse (kfs/fuse/zerocopy.py);
- `walk_v2_run`, the segment walk, the batch checks and `render_v2_jsonl` (or `count_jsonl`, or kcat's
  -f output, `KcatFormat.render`'s twin) of many plain batches in one call without the GIL; it
  declines every batch that is not plain, to the Python walk (kfs/views/plain_runs.py);
- `find_v2_batch`, the walk of `LogSegment.indexed_batch` over one index interval (a `.value`
  lookup), accepting only intervals whose every check holds and declining the rest to Python's;
- `v2_record_at`, the one record of a batch `LogSegment.records_of` would give at an offset, for
  an uncompressed or lz4 batch it walks cleanly (a `.value`), declining the rest to records_of;
- `index_slot`, `SegmentIndex._largest_lower_bound_slot` (Kafka's warm/cold search), slot for slot;
- `small_files_*`, the OPEN, READ and RELEASE of small files the mount rendered (`.value`, info.json)
  answered in C inside libfuse, Python's callbacks taking every other (kfs/fuse/fast_small.py);
- `crc32c`, the CRC-32C `walk_v2_run` checks each batch with (crc32c.crc32c's value), exposed so
  tests hold the two to the same value (None without SSE 4.2).

Set KFS_PURE_PYTHON=1 to ignore the extension (to compare, or to rule it out).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from kfs.record.types import CorruptBatchError, Record

decode_v2_records: Callable[..., list[Record]] | None = None
render_jsonl: Callable[..., bytes | list[bytes]] | None = None
count_jsonl: Callable[..., tuple[int, int, int] | None] | None = None
render_v2_jsonl: Callable[..., bytes | tuple[bytes, bytes] | None] | None = None
render_v2_dump: Callable[..., tuple[str, int, bytes] | None] | None = None
gather: Callable[[Sequence[bytes | memoryview]], int] | None = None
walk_v2_run: Callable[..., tuple[int, int, int, int, bytes, bytes | None] | None] | None = None
crc32c: Callable[[bytes | memoryview], int | None] | None = None
find_v2_batch: Callable[..., tuple[int, int] | int | None] | None = None
v2_record_at: Callable[..., Record | bool | None] | None = None
index_slot: Callable[..., int] | None = None
small_files_put: Callable[[str, bytes, float], None] | None = None
small_files_clear: Callable[[], tuple[int, int]] | None = None
small_files_install: Callable[..., None] | None = None

if not os.environ.get("KFS_PURE_PYTHON"):
    try:
        from kfs.record import _speedups  # type: ignore[attr-defined]
    except ImportError:
        _speedups = None
    # A build older than this code (no `gather`; its lines mode gave a list per line) is ignored, as
    # no build is: `pip install -e .` rebuilds it. Used, it failed every decoded read.
    if _speedups is not None and hasattr(_speedups, "gather"):
        _speedups.init(Record, CorruptBatchError)
        decode_v2_records = _speedups.decode_v2_records
        render_jsonl = _speedups.render_jsonl
        count_jsonl = _speedups.count_jsonl
        render_v2_jsonl = _speedups.render_v2_jsonl
        gather = _speedups.gather
        walk_v2_run = getattr(_speedups, "walk_v2_run", None)
        render_v2_dump = getattr(_speedups, "render_v2_dump", None)  # (a build older than this code: Python's)
        crc32c = getattr(_speedups, "crc32c", None)
        find_v2_batch = getattr(_speedups, "find_v2_batch", None)
        v2_record_at = getattr(_speedups, "v2_record_at", None)
        index_slot = getattr(_speedups, "index_slot", None)
        small_files_put = getattr(_speedups, "small_files_put", None)
        small_files_clear = getattr(_speedups, "small_files_clear", None)
        small_files_install = getattr(_speedups, "small_files_install", None)
