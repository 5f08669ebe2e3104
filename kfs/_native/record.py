"""The record layer's compiled loops (csrc/record/): each the function of _speedups.pyi, or None unbuilt.

- `decode_v2_records`: the loop of kfs.record.default_batch.decode_records;
- `crc32c`: the CRC-32C the compiled walks check each batch with (crc32c.crc32c's value; None without
  SSE 4.2), exposed so that kfs.record.crc_is_valid uses it and tests hold the two to the same value.
"""

from __future__ import annotations

from kfs._native import BUILT, extension

decode_v2_records = extension.decode_v2_records if BUILT else None
crc32c = extension.crc32c if BUILT else None
