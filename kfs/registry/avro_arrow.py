"""The registry layer's compiled Avro- and Protobuf-to-Arrow calls, for the layers above it (kfs.spark.typed).

Only a layer's own Python reaches its C (`kfs._native.<layer>`, checked by tests/test_native.py): the
decoder lives in csrc/registry/, so Spark reaches it through here. Each name is None when the
extension is not built (the per-row path then answers every datum).
"""

from __future__ import annotations

from kfs._native.registry import (
    avro_arrow_decode,
    avro_arrow_program,
    avro_text_column,
    protobuf_arrow_decode,
    protobuf_arrow_program,
)

__all__ = ["avro_arrow_decode", "avro_arrow_program", "avro_text_column", "protobuf_arrow_decode",
           "protobuf_arrow_program"]
