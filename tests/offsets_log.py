"""A fast writer of `__consumer_offsets` partitions, for the `kfs groups` benchmark and tests.

It writes what the group coordinator writes: v2 record batches (uncompressed, CreateTime, CRC-32C)
of offset commits (`OffsetCommitKey` v1, `OffsetCommitValue` v3 or v1), classic group metadata
(`GroupMetadataKey` v2, `GroupMetadataValue` v3 with the consumer protocol's subscription and
assignment), KIP-848 consumer-group records, tombstones, transactional offset commits and their
COMMIT/ABORT markers. The encodings follow the schemas in Kafka's
group-coordinator/src/main/resources/common/message/ (non-flexible versions: int16-length strings,
int32-length bytes and arrays; flexible versions: compact lengths as unsigned varints + 1 and an
empty tagged-field section). Kafka's own serializers write the golden fixtures; this writer only
has to be quick and plausible.

Batch layout: see kfs/record/default_batch.py.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import BinaryIO

import crc32c

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_HEADER_AFTER_CRC = struct.Struct(">hiqqqhii")  # attributes .. records count
_HEAD = struct.Struct(">qiib")  # base offset, length, partition leader epoch, magic
TRANSACTIONAL = 0x10
CONTROL = 0x20


# ---- primitive encodings ------------------------------------------------------------------------

def varint(n: int) -> bytes:
    """A zigzag varint (record fields)."""
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def uvarint(n: int) -> bytes:
    """An unsigned varint (compact lengths and tagged fields of flexible versions)."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def string(s: str | None) -> bytes:
    if s is None:
        return _I16.pack(-1)
    b = s.encode()
    return _I16.pack(len(b)) + b


def byte_array(b: bytes | None) -> bytes:
    return _I32.pack(-1) if b is None else _I32.pack(len(b)) + b


def compact_string(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    b = s.encode()
    return uvarint(len(b) + 1) + b


def compact_array(items: list[bytes]) -> bytes:
    return uvarint(len(items) + 1) + b"".join(items)


NO_TAGS = b"\x00"


# ---- __consumer_offsets keys and values ---------------------------------------------------------

def offset_commit_key(group: str, topic: str, partition: int, version: int = 1) -> bytes:
    return _I16.pack(version) + string(group) + string(topic) + _I32.pack(partition)


def offset_commit_value(offset: int, metadata: str, commit_timestamp: int, leader_epoch: int = -1,
                        version: int = 3, expire_timestamp: int = -1) -> bytes:
    out = _I16.pack(version) + struct.pack(">q", offset)
    if version >= 3:
        out += _I32.pack(leader_epoch)
    out += string(metadata) + struct.pack(">q", commit_timestamp)
    if version == 1:
        out += struct.pack(">q", expire_timestamp)
    return out


def group_metadata_key(group: str) -> bytes:
    return _I16.pack(2) + string(group)


@dataclass
class ClassicMember:
    member_id: str
    client_id: str
    client_host: str
    topics: list[str]
    assigned: dict[str, list[int]]
    group_instance_id: str | None = None
    rebalance_timeout: int = 300000
    session_timeout: int = 45000


def subscription(topics: list[str]) -> bytes:
    """ConsumerProtocolSubscription v0: topics, user data (null)."""
    return _I16.pack(0) + _I32.pack(len(topics)) + b"".join(string(t) for t in topics) + byte_array(None)


def assignment(assigned: dict[str, list[int]]) -> bytes:
    """ConsumerProtocolAssignment v0: (topic, partitions)*, user data (null)."""
    body = b"".join(string(t) + _I32.pack(len(ps)) + b"".join(_I32.pack(p) for p in ps)
                    for t, ps in assigned.items())
    return _I16.pack(0) + _I32.pack(len(assigned)) + body + byte_array(None)


def group_metadata_value(protocol_type: str, generation: int, protocol: str | None, leader: str | None,
                         members: list[ClassicMember], current_state_timestamp: int = -1) -> bytes:
    """GroupMetadataValue v3 (what Kafka 2.3 to 3.x writes)."""
    out = _I16.pack(3) + string(protocol_type) + _I32.pack(generation) + string(protocol) + string(leader)
    out += struct.pack(">q", current_state_timestamp) + _I32.pack(len(members))
    for m in members:
        out += (string(m.member_id) + string(m.group_instance_id) + string(m.client_id) + string(m.client_host)
                + _I32.pack(m.rebalance_timeout) + _I32.pack(m.session_timeout)
                + byte_array(subscription(m.topics)) + byte_array(assignment(m.assigned)))
    return out


def consumer_group_metadata_key(group: str) -> bytes:
    return _I16.pack(3) + string(group)


def consumer_group_metadata_value(epoch: int) -> bytes:
    return _I16.pack(0) + _I32.pack(epoch) + NO_TAGS


def consumer_group_member_key(group: str, member_id: str) -> bytes:
    return _I16.pack(5) + string(group) + string(member_id)


def consumer_group_member_value(client_id: str, client_host: str, topics: list[str],
                                instance_id: str | None = None, rack_id: str | None = None) -> bytes:
    return (_I16.pack(0) + compact_string(instance_id) + compact_string(rack_id) + compact_string(client_id)
            + compact_string(client_host) + compact_array([compact_string(t) for t in topics])
            + compact_string(None) + _I32.pack(300000) + compact_string(None) + NO_TAGS)


def consumer_group_assignment_key(group: str, member_id: str) -> bytes:
    return _I16.pack(8) + string(group) + string(member_id)


def consumer_group_assignment_value(member_epoch: int, previous_epoch: int, state: int,
                                    assigned: list[tuple[bytes, list[int]]]) -> bytes:
    topics = [topic_id + compact_array([_I32.pack(p) for p in ps]) + NO_TAGS for topic_id, ps in assigned]
    return (_I16.pack(0) + _I32.pack(member_epoch) + _I32.pack(previous_epoch) + bytes([state & 0xFF])
            + compact_array(topics) + compact_array([]) + NO_TAGS)


def consumer_group_target_metadata_key(group: str) -> bytes:
    return _I16.pack(6) + string(group)


def consumer_group_target_metadata_value(assignment_epoch: int) -> bytes:
    return _I16.pack(0) + _I32.pack(assignment_epoch) + NO_TAGS


def end_txn_marker(commit: bool, coordinator_epoch: int = 0) -> tuple[bytes, bytes]:
    """(key, value) of a COMMIT or ABORT control record (ControlRecordType, EndTransactionMarker)."""
    return _I16.pack(0) + _I16.pack(1 if commit else 0), _I16.pack(0) + _I32.pack(coordinator_epoch)


# ---- batches and segments -----------------------------------------------------------------------

def batch(base_offset: int, records: list[tuple[int, bytes | None, bytes | None]], *, producer_id: int = -1,
          producer_epoch: int = -1, transactional: bool = False, control: bool = False,
          leader_epoch: int = 0) -> bytes:
    """One v2 batch of (timestamp, key, value) records at consecutive offsets from base_offset."""
    base_ts = records[0][0]
    body = bytearray()
    for delta, (ts, key, value) in enumerate(records):
        rec = (b"\x00" + varint(ts - base_ts) + varint(delta)
               + (varint(-1) if key is None else varint(len(key)) + key)
               + (varint(-1) if value is None else varint(len(value)) + value) + b"\x00")
        body += varint(len(rec)) + rec
    attributes = (TRANSACTIONAL if transactional else 0) | (CONTROL if control else 0)
    after_crc = _HEADER_AFTER_CRC.pack(attributes, len(records) - 1, base_ts, max(r[0] for r in records),
                                       producer_id, producer_epoch, -1, len(records)) + body
    crc = crc32c.crc32c(after_crc)
    return _HEAD.pack(base_offset, 4 + 1 + 4 + len(after_crc), leader_epoch, 2) + struct.pack(">I", crc) + after_crc


class PartitionWriter:
    """Appends batches to `<dir>/__consumer_offsets-<n>/`, rolling segments at `segment_bytes`.

    `index_interval`: write `.index` / `.timeindex` entries as a broker's LogSegment.append does (one
    after more than that many bytes went by since the last; the time index only when the largest
    timestamp grew); None leaves them empty (an index-less segment, walked whole)."""

    def __init__(self, logdir: str, partition: int, segment_bytes: int = 100 << 20,
                 topic: str = "__consumer_offsets", index_interval: int | None = None) -> None:
        self.path = os.path.join(logdir, f"{topic}-{partition}")
        os.makedirs(self.path, exist_ok=True)
        self.segment_bytes = segment_bytes
        self.index_interval = index_interval
        self.next_offset = 0
        self._file: BinaryIO | None = None
        self._indexes: tuple[BinaryIO, BinaryIO] | None = None
        self._size = 0
        self.bytes_written = 0
        self._roll()

    @classmethod
    def reopen(cls, logdir: str, partition: int, next_offset: int, topic: str = "__consumer_offsets"
               ) -> PartitionWriter:
        """Append to the last segment of a partition written before (a live broker's active segment)."""
        writer = cls.__new__(cls)
        writer.path = os.path.join(logdir, f"{topic}-{partition}")
        writer.segment_bytes = 1 << 62
        writer.next_offset = next_offset
        last = max(n for n in os.listdir(writer.path) if n.endswith(".log"))
        writer._file = open(os.path.join(writer.path, last), "ab")  # noqa: SIM115
        writer._size = writer._file.tell()
        writer.bytes_written = 0
        writer.index_interval = None
        writer._indexes = None
        return writer

    def _roll(self) -> None:
        self.close()
        stem = os.path.join(self.path, f"{self.next_offset:020d}")
        for suffix in (".index", ".timeindex"):
            open(stem + suffix, "wb").close()
        if self.index_interval is not None:
            self._indexes = (open(stem + ".index", "ab"), open(stem + ".timeindex", "ab"))  # noqa: SIM115
        self._file = open(stem + ".log", "wb")  # noqa: SIM115 (kept open across appends)
        self._size = 0
        self._segment_base = self.next_offset
        self._since_entry = 0
        self._max_ts = self._max_ts_offset = self._last_time_entry = -1

    def append(self, records: list[tuple[int, bytes | None, bytes | None]], **flags: object) -> int:
        """Append one batch; returns its base offset."""
        if self._size >= self.segment_bytes:
            self._roll()
        base = self.next_offset
        data = batch(base, records, **flags)  # type: ignore[arg-type]
        assert self._file is not None
        self._file.write(data)
        if self._indexes is not None and self.index_interval is not None:
            self._index(max(r[0] for r in records), base + len(records) - 1)
            self._since_entry += len(data)
        self._size += len(data)
        self.bytes_written += len(data)
        self.next_offset += len(records)
        return base

    def _index(self, max_ts: int, last: int) -> None:
        assert self._indexes is not None and self.index_interval is not None
        if max_ts > self._max_ts:
            self._max_ts, self._max_ts_offset = max_ts, last
        if self._since_entry > self.index_interval:
            offset_index, time_index = self._indexes
            offset_index.write(struct.pack(">ii", last - self._segment_base, self._size))
            if self._max_ts > self._last_time_entry:
                time_index.write(struct.pack(">qi", self._max_ts, self._max_ts_offset - self._segment_base))
                self._last_time_entry = self._max_ts
            self._since_entry = 0

    def skip(self, count: int) -> None:
        """Leave a gap of `count` offsets (what compaction leaves behind)."""
        self.next_offset += count

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        for index in self._indexes or ():
            index.close()
        self._indexes = None

