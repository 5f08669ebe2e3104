"""The schema registry's compiled renderer and Arrow decoder (csrc/registry/): each the function of
_speedups.pyi, or None unbuilt.

- `avro_program`: a program of kfs/registry/avro_program.py, checked and kept for `render_avro`;
- `render_avro`: an Avro datum's JSON text by that program, exactly kfs.registry.avro.AvroRenderer's
  Python path's, or None where that path answers (an error, or a datum fastavro reads in its own way);
- `avro_arrow_program`: a program of kfs/registry/avro_arrow_program.py, checked and kept for
  `avro_arrow_decode`;
- `avro_arrow_decode`: a batch of registry-framed values (an Arrow binary array's buffers) into the
  buffers of Spark's typed column, each row the per-row path's value or declined to it;
- `protobuf_program`, `render_protobuf`: the same as `avro_program` and `render_avro` for Protobuf
  messages (kfs/registry/protobuf_program.py), the Python path being kfs.registry.protobuf's;
- `protobuf_arrow_program`, `protobuf_arrow_decode`: the same for Protobuf messages (the reader's first
  message), each row the per-row path's value or declined to it;
- `avro_text_column`: a batch of framed Avro values into an Arrow string column of their JSON text
  (`render_avro`'s), each row rendered or declined to the per-row path.
"""

from __future__ import annotations

from kfs._native import BUILT, extension

avro_program = extension.avro_program if BUILT else None
render_avro = extension.render_avro if BUILT else None
avro_arrow_program = extension.avro_arrow_program if BUILT else None
avro_arrow_decode = extension.avro_arrow_decode if BUILT else None
avro_text_column = extension.avro_text_column if BUILT else None
protobuf_program = extension.protobuf_program if BUILT else None
render_protobuf = extension.render_protobuf if BUILT else None
protobuf_arrow_program = extension.protobuf_arrow_program if BUILT else None
protobuf_arrow_decode = extension.protobuf_arrow_decode if BUILT else None
