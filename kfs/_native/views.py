"""The decoded views' compiled loops (csrc/views/), each None when not built.

- `render_jsonl`: kfs.views.jsonl.render_line over many records;
- `count_jsonl`: the length render_jsonl would give a v2 records section, without decoding it into
  records (the size of a decoded view; kfs/views/line_lengths.py);
- `render_v2_jsonl`: render_jsonl of decode_v2_records fused: a records section straight to its JSON
  lines, no record created, without the GIL (kfs/views/batch_lines.py);
- `walk_v2_run`: the segment walk, the batch checks and render_v2_jsonl (or count_jsonl, or kcat's -f /
  -J output, KcatFormat.render's twin) of many plain batches in one call without the GIL; it declines
  every batch that is not plain, to the Python walk (kfs/views/plain_runs.py).
"""

from __future__ import annotations

from collections.abc import Callable

from kfs._native import extension

render_jsonl: Callable[..., bytes | list[bytes]] | None = getattr(extension, "render_jsonl", None)
count_jsonl: Callable[..., tuple[int, int, int] | None] | None = getattr(extension, "count_jsonl", None)
render_v2_jsonl: Callable[..., bytes | tuple[bytes, bytes] | None] | None = getattr(extension, "render_v2_jsonl", None)
walk_v2_run: Callable[..., tuple[int, int, int, int, bytes, bytes | None] | None] | None = getattr(
    extension, "walk_v2_run", None)
