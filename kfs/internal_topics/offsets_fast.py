"""The commonest `__consumer_offsets` keys and values read in one step each, beside the generic reader.

Nearly every record of `__consumer_offsets` is an offset commit: key record type 0 or 1
(`OffsetCommitKey`: group, topic, partition) and an `OffsetCommitValue` of versions 0-3, or a
classic group's `GroupMetadataKey` (type 2). The generic reader (kfs.internal_topics.reader) walks
their fields one reader at a time; here each is a couple of unpacks and slices, which is what
`ls MOUNTPOINT/.groups`, `kfs groups` and the decoded sizes of the topic's `messages.jsonl` spend
their time on.

The result is the generic reader's, or None: anything not plainly well formed (a negative or
overlong length, bytes missing, bytes left over, a flexible version) goes to the generic reader,
which says what is wrong, so the two never disagree on an answer (tests/test_internal_decode.py
compares them). The layouts are checked against the schemas when this module is imported: a
schema that changes shape turns the fast path off instead of answering wrongly.
"""

from __future__ import annotations

import json
import struct
from typing import Any

from kfs.internal_topics.schemas.group_coordinator import GROUP_COORDINATOR

_TYPE_AND_LENGTH = struct.Struct(">hh").unpack_from
_INT16 = struct.Struct(">h").unpack_from
_INT32 = struct.Struct(">i").unpack_from
_INT64 = struct.Struct(">q").unpack_from
_INT64_INT16 = struct.Struct(">qh").unpack_from
_INT64_INT64 = struct.Struct(">qq").unpack_from
_INT64_INT32_INT16 = struct.Struct(">qih").unpack_from

_KEY_FIELDS = {"OffsetCommitKey": ["group", "topic", "partition"], "GroupMetadataKey": ["group"]}
_VALUE_FIELDS = {  # OffsetCommitValue: the fields of each non-flexible version, in schema order
    0: ["offset", "metadata", "commitTimestamp"],
    1: ["offset", "metadata", "commitTimestamp", "expireTimestamp"],
    2: ["offset", "metadata", "commitTimestamp"],
    3: ["offset", "leaderEpoch", "metadata", "commitTimestamp"],
}
_TYPES = {"group": "string", "topic": "string", "partition": "int32", "offset": "int64", "metadata": "string",
          "commitTimestamp": "int64", "expireTimestamp": "int64", "leaderEpoch": "int32"}


def _layouts_hold() -> bool:
    """Whether the schemas still have the layouts read here (versions, fields, types, no nulls)."""
    for name, names in _KEY_FIELDS.items():
        message = GROUP_COORDINATOR[name]
        for version in range(message.versions.low, message.versions.high + 1):
            present = [f for f in message.body.fields if version in f.versions]
            if ([f.name for f in present] != names or any(
                    f.array or f.type != _TYPES[f.name] or version in f.nullable or version in f.tagged
                    for f in present) or version in message.flexible):
                return False
    value = GROUP_COORDINATOR["OffsetCommitValue"]
    for version, names in _VALUE_FIELDS.items():
        present = [f for f in value.body.fields if version in f.versions]
        if ([f.name for f in present] != names or version in value.flexible or any(
                f.array or f.type != _TYPES[f.name] or version in f.nullable or version in f.tagged
                for f in present)):
            return False
    return ([*range(GROUP_COORDINATOR["OffsetCommitKey"].versions.low,
                    GROUP_COORDINATOR["OffsetCommitKey"].versions.high + 1)] == [0, 1]
            and GROUP_COORDINATOR["GroupMetadataKey"].versions.low == 2)


ENABLED = _layouts_hold()


def _text(data: bytes, start: int, end: int) -> str:
    return str(data[start:end], "utf-8", "replace")  # as the generic reader: Java's String(bytes, UTF_8)


def offsets_key(key: bytes) -> tuple[str, int, dict[str, Any]] | None:
    """(schema name, record type, fields) of an `OffsetCommitKey` (types 0, 1) or `GroupMetadataKey`
    (type 2) that is plainly well formed; None for anything else."""
    size = len(key)
    if not ENABLED or size < 4:
        return None
    record_type, length = _TYPE_AND_LENGTH(key, 0)
    group_end = 4 + length
    if length < 0 or not 0 <= record_type <= 2:
        return None
    if record_type == 2:
        if group_end != size:
            return None
        return "GroupMetadataKey", 2, {"group": _text(key, 4, group_end)}
    if group_end + 2 > size:
        return None
    topic_length = _INT16(key, group_end)[0]
    topic_end = group_end + 2 + topic_length
    if topic_length < 0 or topic_end + 4 != size:
        return None
    return "OffsetCommitKey", record_type, {"group": _text(key, 4, group_end),
                                            "topic": _text(key, group_end + 2, topic_end),
                                            "partition": _INT32(key, topic_end)[0]}


def offset_commit_value(value: bytes) -> tuple[int, dict[str, Any]] | None:
    """(version, fields) of an `OffsetCommitValue` of version 0-3 that is plainly well formed (the
    key said record type 0 or 1); None for anything else."""
    size = len(value)
    if not ENABLED or size < 12:
        return None
    version = _INT16(value, 0)[0]
    if version == 3:
        if size < 16:
            return None
        offset, leader_epoch, length = _INT64_INT32_INT16(value, 2)
        start = 16
    elif 0 <= version <= 2:
        offset, length = _INT64_INT16(value, 2)
        start = 12
    else:
        return None
    end = start + length
    if length < 0:
        return None
    if version == 1:
        if end + 16 != size:
            return None
        commit, expire = _INT64_INT64(value, end)
        return 1, {"offset": offset, "metadata": _text(value, start, end), "commitTimestamp": commit,
                   "expireTimestamp": expire}
    if end + 8 != size:
        return None
    commit = _INT64(value, end)[0]
    if version == 3:
        return 3, {"offset": offset, "leaderEpoch": leader_epoch, "metadata": _text(value, start, end),
                   "commitTimestamp": commit}
    return version, {"offset": offset, "metadata": _text(value, start, end), "commitTimestamp": commit}


_encode_str = json.encoder.encode_basestring  # what json's C encoder writes for a str (ensure_ascii=False)


def offset_commit_value_jsonl(value: bytes) -> str | None:
    """`jsonl(decode_value(...))` of an offset commit's value (the key's record type is 0 or 1) written
    straight from the bytes, no dict and no JSON encoder between: what the decoded sizes of
    `__consumer_offsets`' `messages.jsonl` spend their time on. None where `offset_commit_value` is."""
    fields = offset_commit_value(value)
    if fields is None:
        return None
    version, data = fields
    return ('{"type": "OffsetCommitValue", "version": ' + str(version) + ', "data": {'
            + ", ".join(['"' + name + '": ' + (_encode_str(v) if isinstance(v, str) else str(v))
                         for name, v in data.items()]) + "}}")
