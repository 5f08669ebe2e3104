"""Control records: the markers in control batches (ControlRecordType.java, EndTransactionMarker.java).

    Key:   Version int16 | Type int16                    (ControlRecordType)
    Value: Version int16 | CoordinatorEpoch int32        (COMMIT / ABORT: EndTransactionMarker)

Other types (LEADER_CHANGE, the KRaft snapshot and voter records) carry their own schemas in the value;
kfs names them and leaves the value as bytes.
"""

from __future__ import annotations

import struct

from kfs.record.types import CONTROL_TYPES, CorruptBatchError, Record

CONTROL_KEY = struct.Struct(">hh")  # version, type
END_TXN_MARKER = struct.Struct(">hi")  # version, coordinator epoch
ABORT_TYPE = 0
COMMIT_TYPE = 1


def parse_control_record(record: Record) -> tuple[str, int | None]:
    """(type name, coordinator epoch for COMMIT/ABORT else None) of a record of a control batch."""
    key = record.key
    if key is None or len(key) < CONTROL_KEY.size:
        raise CorruptBatchError(f"control record at offset {record.offset} has no valid key")
    _version, type_id = CONTROL_KEY.unpack_from(key, 0)
    name = CONTROL_TYPES.get(type_id, f"UNKNOWN({type_id})")
    if type_id not in (ABORT_TYPE, COMMIT_TYPE):
        return name, None
    value = record.value
    if value is None or len(value) < END_TXN_MARKER.size:
        raise CorruptBatchError(f"{name} marker at offset {record.offset} has no valid value")
    _version, coordinator_epoch = END_TXN_MARKER.unpack_from(value, 0)
    return name, coordinator_epoch
