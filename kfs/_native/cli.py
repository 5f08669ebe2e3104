"""The CLI's compiled loop (csrc/cli/), None when not built.

- `render_v2_dump`: the record lines of `kfs dump --deep-iteration --print-data-log` straight from a
  records section, fused as render_v2_jsonl (kfs/cli/dump_log.py, whose `_v2_data_lines` is its twin).
"""

from __future__ import annotations

from collections.abc import Callable

from kfs._native import extension

render_v2_dump: Callable[..., tuple[str, int, bytes] | None] | None = getattr(extension, "render_v2_dump", None)
