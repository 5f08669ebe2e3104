"""The record layer's compiled loops (csrc/record/), each None when not built.

- `decode_v2_records`: the loop of kfs.record.default_batch.decode_records;
- `crc32c`: the CRC-32C the compiled walks check each batch with (crc32c.crc32c's value; None without
  SSE 4.2), exposed so that kfs.record.crc_is_valid uses it and tests hold the two to the same value.
"""

from __future__ import annotations

from collections.abc import Callable

from kfs._native import extension
from kfs.record.types import Record

decode_v2_records: Callable[..., list[Record]] | None = getattr(extension, "decode_v2_records", None)
crc32c: Callable[[bytes | memoryview], int | None] | None = getattr(extension, "crc32c", None)
