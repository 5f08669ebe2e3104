"""The values the record layer hands out: batch headers and records.

Names follow Kafka's `RecordBatch` / `Record` interfaces (clients/.../common/record/).
Plain classes with `__slots__`: millions are made per second on the hot path.
"""

from __future__ import annotations

from typing import TypeAlias

#: What the record layer reads: a segment's bytes as read, a slice of them, or a view.
Buffer: TypeAlias = "bytes | bytearray | memoryview"


COMPRESSION_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
NO_TIMESTAMP_TYPE = "NoTimestampType"

# Control record types (ControlRecordType.java); the key of a control record is (version int16, type int16).
CONTROL_TYPES = {
    0: "ABORT",
    1: "COMMIT",
    2: "LEADER_CHANGE",
    3: "SNAPSHOT_HEADER",
    4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION",
    6: "KRAFT_VOTERS",
}


class BatchHeader:
    """One batch as `FileRecords` iterates it: a v2 record batch or a legacy (v0/v1) message/wrapper.

    `position` is the byte position of the batch in its segment file, `size` its length on disk
    (LOG_OVERHEAD + the length field). For a legacy compressed wrapper the base offset is only
    known after decompression; `base_offset` is then computed lazily by the record layer.
    """

    __slots__ = (  # noqa: RUF023 (in the order of the on-disk fields)
        "position", "size", "magic", "base_offset", "last_offset", "compression", "timestamp_type",
        "first_timestamp", "max_timestamp", "crc", "is_transactional", "is_control", "producer_id",
        "producer_epoch", "base_sequence", "partition_leader_epoch", "delete_horizon_ms", "record_count",
    )

    def __init__(self) -> None:
        self.position = 0
        self.size = 0
        self.magic = 2
        self.base_offset = 0
        self.last_offset = 0
        self.compression = "none"
        self.timestamp_type = "CreateTime"
        self.first_timestamp = -1
        self.max_timestamp = -1
        self.crc = 0
        self.is_transactional = False
        self.is_control = False
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = -1
        self.partition_leader_epoch = -1
        self.delete_horizon_ms: int | None = None
        self.record_count = 0

    @property
    def next_position(self) -> int:
        return self.position + self.size

    def __repr__(self) -> str:
        return (f"BatchHeader(position={self.position}, size={self.size}, magic={self.magic}, "
                f"offsets={self.base_offset}..{self.last_offset}, compression={self.compression})")


class PlainRun(BatchHeader):
    """Several consecutive plain v2 batches a segment walk took at once (kfs.views.plain_runs: the
    compiled walker took, checked and rendered or counted them without the GIL). It stands in the
    batch stream where their headers would: `position` and `size` span them all, `base_offset` is
    the first's, `last_offset` the last's, `record_count` the records shown; `taken` is what the
    walker made of them (their lines, or their lengths)."""

    __slots__ = ("taken",)
    taken: object

    @classmethod
    def of(cls, position: int, size: int, base_offset: int, last_offset: int, records: int,
           taken: object) -> PlainRun:
        run = cls()
        run.position, run.size = position, size
        run.base_offset, run.last_offset, run.record_count = base_offset, last_offset, records
        run.taken = taken
        return run


class Record:
    """One record as a consumer sees it. `key`/`value` are bytes or None; headers are (str, bytes|None).

    The v2 decoder's hot loop fills the slots of `object.__new__(Record)` itself, to skip the cost of
    an `__init__` call per record: keep `__init__` a plain assignment of these six slots.
    """

    __slots__ = ("offset", "timestamp", "timestamp_type", "key", "value", "headers")  # noqa: RUF023

    def __init__(self, offset: int, timestamp: int, timestamp_type: str, key: bytes | None,
                 value: bytes | None, headers: list[tuple[str, bytes | None]]) -> None:
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self.headers = headers

    def __repr__(self) -> str:
        return (f"Record(offset={self.offset}, timestamp={self.timestamp}, key={self.key!r}, "
                f"value={self.value!r})")


class CorruptBatchError(Exception):
    """A batch that cannot be parsed or whose CRC does not match; says where."""

    def __init__(self, message: str, position: int | None = None) -> None:
        super().__init__(message)
        self.position = position
