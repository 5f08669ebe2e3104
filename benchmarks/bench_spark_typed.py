"""CPU per decoded value of the Spark source's `value_decoded` column (issue 26), by each path that can
fill it, on the Spark benchmark's schema and values (benchmarks/spark_data.py: `n` long, `user` string,
`amount` long, `note` string of 160 chars, registry-framed):

- per-row: fastavro's reader, the converter, pa.array (kfs.spark.typed._column: the reference);
- json-shaped: the compiled JSON renderer and Arrow's JSON reader (kfs.spark.typed._fast_column, the
  default before the compiled Arrow decoder);
- c-arrow: the compiled Arrow decoder (kfs/_native/csrc/registry/avro_arrow.c) from the values as an
  Arrow binary array (`array_columns`, as kfs.spark.source hands it the C-built undecoded columns);
- c-arrow from Records: the same from a list of Records (`columns`: the values gathered into an
  array first);
- JSON text (a read of several topics: `value_decoded` is the decoded JSON text) per row, and by the
  compiled renderer into the string column in one call (avro_text_column);
- c-arrow, one field shown: a query that reads `value_decoded.amount` (kfs.spark.pruning), the other
  fields read past;
- an older version: the same values written with an older version of the subject (`amount` an int,
  promoted; a `legacy` string field since dropped), resolved to the latest per row (fastavro) and by
  the compiled decoder;
- Protobuf: the same values as a Protobuf message of the same four fields (ProtobufSerializer's
  framing), per row (the protobuf package's parser, the converter, pa.array) and by the compiled
  Protobuf decoder (kfs/_native/csrc/registry/protobuf_arrow.c), whole and with `amount` alone.

CPU seconds of this process (time.process_time), best of `--rounds`, so that other work on the machine
moves the figures less than wall time would; the load average is printed with them.

    python -m benchmarks.bench_spark_typed [--records N] [--rounds R]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa


def _registry() -> Any:
    from benchmarks.spark_data import ORDER, SCHEMA_ID, SUBJECT
    from kfs.registry.decode import Registry
    from kfs.registry.state import RegistryState

    state = RegistryState()
    key = {"keytype": "SCHEMA", "subject": SUBJECT, "version": 1, "magic": 1}
    value = {"subject": SUBJECT, "version": 1, "id": SCHEMA_ID, "schema": json.dumps(ORDER)}
    state.apply(json.dumps(key).encode(), json.dumps(value).encode())
    return Registry(state)


OLDER_ID = 9  # (an older version of the subject: `amount` an int, and a `legacy` field the latest dropped)


def _older_schema() -> dict[str, Any]:
    from benchmarks.spark_data import ORDER

    latest: dict[str, Any] = ORDER
    fields = [{**f, "type": "int"} if f["name"] == "amount" else f for f in latest["fields"]]
    return {**latest, "fields": [*fields, {"name": "legacy", "type": "string"}]}


def _with_older(registry: Any) -> None:
    """`registry` with the older version as version 0 of the subject (the latest stays the reader)."""
    from benchmarks.spark_data import SUBJECT

    key = {"keytype": "SCHEMA", "subject": SUBJECT, "version": 0, "magic": 1}
    value = {"subject": SUBJECT, "version": 0, "id": OLDER_ID, "schema": json.dumps(_older_schema())}
    registry.state.apply(json.dumps(key).encode(), json.dumps(value).encode())


def _older_framed(value: dict[str, Any]) -> bytes:
    import io

    from fastavro import parse_schema, schemaless_writer

    out = io.BytesIO()
    schemaless_writer(out, parse_schema(_older_schema()), {**value, "legacy": "gone"})
    return b"\0" + OLDER_ID.to_bytes(4, "big") + out.getvalue()


PROTO_ID, PROTO_TOPIC = 11, "orders_pb"
PROTO_ORDER = """syntax = "proto3";
package bench;
message Order {
  int64 n = 1;
  string user = 2;
  int64 amount = 3;
  string note = 4;
}
"""


def _with_protobuf(registry: Any) -> Any:
    """The Protobuf twin of the order schema as subject `orders_pb-value`; its message class."""
    from google.protobuf import message_factory

    key = {"keytype": "SCHEMA", "subject": f"{PROTO_TOPIC}-value", "version": 1, "magic": 1}
    value = {"subject": f"{PROTO_TOPIC}-value", "version": 1, "id": PROTO_ID, "schema": PROTO_ORDER,
             "schemaType": "PROTOBUF"}
    registry.state.apply(json.dumps(key).encode(), json.dumps(value).encode())
    renderer = registry.compiled(PROTO_ID).renderer
    return message_factory.GetMessageClass(renderer.file.message_types_by_name["Order"])


def _best(rounds: int, run: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        run()
        best = min(best, time.process_time() - started)
    return best


def main(argv: list[str] | None = None) -> int:
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    from benchmarks.spark_data import TOPIC, framed, order
    from kfs.spark.typed import ArrayRow, FramedRows, PartPlan, _column, _fast_column, decoded_fields, plan_from_field

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)

    registry = _registry()
    _with_older(registry)
    fields = decoded_fields(registry, [TOPIC])
    data_type = to_arrow_schema(StructType(fields), timezone="UTC").field("value_decoded").type
    rows = FramedRows(registry, [plan_from_field(f) for f in fields[:2]], TOPIC)
    decoder = rows.parts[1]
    records = [ArrayRow(None, framed(order(n)), []) for n in range(args.records)]
    keys = pa.nulls(len(records), pa.binary())
    values = pa.array([r.value for r in records], pa.binary())
    headers = pa.nulls(len(records), pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))
    types = [pa.string(), data_type]
    reference = _column(decoder, records, data_type)[0]
    assert rows.array_columns(keys, values, headers, types)[1].equals(reference)
    assert rows.columns(records, types)[1].equals(reference)
    fast = _fast_column(decoder, records, data_type)
    assert fast is not None and fast[0].equals(reference)

    text = FramedRows(registry, [PartPlan("key"), PartPlan("value")], TOPIC)  # (a read of several topics)
    text_types = [pa.string(), pa.string()]
    assert text.array_columns(keys, values, headers, text_types)[1].equals(
        text._record_columns(records, text_types)[1])
    amount = pa.struct([pa.field("amount", pa.int64(), False)])
    pruned = FramedRows(registry, [plan_from_field(f) for f in fields[:2]], TOPIC, whole={"value": data_type})
    assert pruned.array_columns(keys, values, headers, [pa.string(), amount])[1].equals(
        pa.StructArray.from_arrays([reference.field("amount")], fields=[amount.field(0)]))
    older = [ArrayRow(None, _older_framed(order(n)), []) for n in range(args.records)]
    older_values = pa.array([r.value for r in older], pa.binary())
    assert rows.array_columns(keys, older_values, headers, types)[1].equals(reference)
    assert _column(decoder, older, data_type)[0].equals(reference)
    assert decoder.arrow_program(data_type, None, OLDER_ID) is not None
    order_class = _with_protobuf(registry)
    proto_prefix = b"\0" + PROTO_ID.to_bytes(4, "big") + b"\0"
    proto_records = [ArrayRow(None, proto_prefix + order_class(**order(n)).SerializeToString(), [])
                     for n in range(args.records)]
    proto_values = pa.array([r.value for r in proto_records], pa.binary())
    proto_fields = decoded_fields(registry, [PROTO_TOPIC])
    proto_type = to_arrow_schema(StructType(proto_fields), timezone="UTC").field("value_decoded").type
    proto_rows = FramedRows(registry, [plan_from_field(f) for f in proto_fields[:2]], PROTO_TOPIC)
    proto_pruned = FramedRows(registry, [plan_from_field(f) for f in proto_fields[:2]], PROTO_TOPIC,
                              whole={"value": proto_type})
    proto_amount = pa.struct([pa.field("amount", pa.int64())])
    proto_reference = _column(proto_rows.parts[1], proto_records, proto_type)[0]
    assert proto_rows.array_columns(keys, proto_values, headers, [pa.string(), proto_type])[1].equals(proto_reference)
    assert proto_rows.parts[1].arrow_program(proto_type) is not None
    paths: list[tuple[str, Callable[[], object]]] = [
        ("per-row (fastavro, pa.array)", lambda: _column(decoder, records, data_type)),
        ("json-shaped (C renderer, Arrow's JSON reader)", lambda: _fast_column(decoder, records, data_type)),
        ("c-arrow (array_columns)", lambda: rows.array_columns(keys, values, headers, types)),
        ("c-arrow from Records (columns)", lambda: rows.columns(records, types)),
        ("JSON text, per row (Records)", lambda: text._record_columns(records, text_types)),
        ("JSON text, c-arrow (array_columns)", lambda: text.array_columns(keys, values, headers, text_types)),
        ("c-arrow, `amount` shown alone (pruned)",
         lambda: pruned.array_columns(keys, values, headers, [pa.string(), amount])),
        ("older version, per-row (fastavro resolves)", lambda: _column(decoder, older, data_type)),
        ("older version, c-arrow (resolved in C)", lambda: rows.array_columns(keys, older_values, headers, types)),
        ("Protobuf, per-row (protobuf parser, pa.array)", lambda: _column(proto_rows.parts[1], proto_records,
                                                                         proto_type)),
        ("Protobuf, c-arrow (array_columns)",
         lambda: proto_rows.array_columns(keys, proto_values, headers, [pa.string(), proto_type])),
        ("Protobuf, c-arrow, `amount` shown alone",
         lambda: proto_pruned.array_columns(keys, proto_values, headers, [pa.string(), proto_amount])),
    ]
    print(f"{args.records:,} values of {data_type}; CPU ns per value, best of {args.rounds}; "
          f"load average {os.getloadavg()[0]:.2f}")
    for name, run in paths:
        seconds = _best(args.rounds, run)
        print(f"  {name:48s} {seconds / args.records * 1e9:8.0f} ns")
    print(f"  (load average after: {os.getloadavg()[0]:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
