"""The CLI's compiled loop (csrc/cli/): the function of _speedups.pyi, or None unbuilt.

- `render_v2_dump`: the record lines of `kfs dump --deep-iteration --print-data-log` straight from a
  records section, fused as render_v2_jsonl (kfs/cli/dump_log.py, whose `_v2_data_lines` is its twin).
"""

from __future__ import annotations

from kfs._native import BUILT, extension

render_v2_dump = extension.render_v2_dump if BUILT else None
