"""The decoded views' compiled loops (csrc/views/): each the function of _speedups.pyi, or None unbuilt.

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

from kfs._native import BUILT, extension

render_jsonl = extension.render_jsonl if BUILT else None
count_jsonl = extension.count_jsonl if BUILT else None
render_v2_jsonl = extension.render_v2_jsonl if BUILT else None
walk_v2_run = extension.walk_v2_run if BUILT else None
