"""Kafka's internal-topic messages packed by hand, field by field, the way Kafka's generated
`write()` lays them out (MessageDataGenerator): independent of kfs's schema interpreter."""

from __future__ import annotations

import base64
import struct


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def string(s: str | None) -> bytes:  # non-flexible: int16 length, -1 null
    if s is None:
        return i16(-1)
    b = s.encode()
    return i16(len(b)) + b


def blob(b: bytes | None) -> bytes:  # non-flexible bytes: int32 length, -1 null
    return i32(-1) if b is None else i32(len(b)) + b


def uv(v: int) -> bytes:  # unsigned varint
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def cstring(s: str | None) -> bytes:  # flexible: uvarint length + 1, 0 null
    if s is None:
        return uv(0)
    b = s.encode()
    return uv(len(b) + 1) + b


def carray(items: list[bytes] | None) -> bytes:
    return uv(0) if items is None else uv(len(items) + 1) + b"".join(items)


def tags(fields: dict[int, bytes]) -> bytes:
    return uv(len(fields)) + b"".join(uv(t) + uv(len(v)) + v for t, v in sorted(fields.items()))


def kafka_uuid(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def commit_key(version: int, group: str = "billing", topic: str = "orders", partition: int = 3) -> bytes:
    return i16(version) + string(group) + string(topic) + i32(partition)


def subscription_v1(topics: list[str], owned: dict[str, list[int]]) -> bytes:
    return (i16(1) + i32(len(topics)) + b"".join(string(t) for t in topics) + blob(None)
            + i32(len(owned)) + b"".join(string(t) + i32(len(ps)) + b"".join(i32(p) for p in ps)
                                         for t, ps in owned.items()))


def assignment_v0(assigned: dict[str, list[int]], user_data: bytes | None) -> bytes:
    return (i16(0) + i32(len(assigned))
            + b"".join(string(t) + i32(len(ps)) + b"".join(i32(p) for p in ps) for t, ps in assigned.items())
            + blob(user_data))


def group_value_v3(protocol_type: str, subscription: bytes, assignment: bytes) -> bytes:
    member = (string("m-1") + string(None) + string("client") + string("/10.0.0.1") + i32(300000) + i32(10000)
              + blob(subscription) + blob(assignment))
    return (i16(3) + string(protocol_type) + i32(5) + string("range") + string("m-1") + i64(99)
            + i32(1) + member)


def metadata_frame(api_key: int, version: int, body: bytes) -> bytes:
    return uv(1) + uv(api_key) + uv(version) + body
