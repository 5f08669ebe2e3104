"""`__consumer_offsets`' decoded columns from Arrow arrays (kfs.spark.internal_rows.InternalRows.array_columns:
offset commits written in C, kfs/_native/csrc/spark/offsets_text.c, the other rows by the line decoder)
equal the line decoder's own, row for row: the text `kfs cat` shows for each key and value, and each
row's error.

Over random batches of offset commits (OffsetCommitKey types 0 and 1, OffsetCommitValue versions 0 to
4, tombstones), group metadata keys, null and foreign keys, strings with quotes, backslashes, control
characters, non-ASCII and invalid UTF-8, and byte mutations of all of them, read from sliced arrays.
The Kafka-written fixtures go through it end to end in tests/test_spark_typed.py
(test_internal_topics_decode_as_kfs_cat_shows_them)."""

from __future__ import annotations

import random
import struct

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("pyspark")

from kfs._native.spark import offsets_text_columns
from kfs.spark.internal_rows import InternalRows
from kfs.spark.typed import ArrayRow

pytestmark = pytest.mark.skipif(offsets_text_columns is None, reason="the compiled extension is not built")

TYPES = [pa.string(), pa.string()]
TEXTS = [b"", b"group-1", b"orders", b'quo"te', b"back\\slash", b"tab\tnew\nline", b"\x01\x1f", b"caf\xc3\xa9",
         b"\xf0\x9f\x98\x80", b"bad\xff", b"\xed\xa0\x80", b"\xc3", b"x" * 300]


def short_string(rnd: random.Random) -> bytes:
    text = b"".join(rnd.choice(TEXTS) for _ in range(rnd.randint(0, 2)))
    return struct.pack(">h", len(text)) + text


def commit_key(rnd: random.Random) -> bytes:
    return struct.pack(">h", rnd.choice([0, 1])) + short_string(rnd) + short_string(rnd) + \
        struct.pack(">i", rnd.choice([0, 7, -1, 2**31 - 1]))


def commit_value(rnd: random.Random) -> bytes:
    version = rnd.choice([0, 1, 2, 3, 3, 3, 4])
    offset = struct.pack(">q", rnd.choice([0, 42, -1, 2**63 - 1, -(2**63)]))
    stamp = struct.pack(">q", rnd.choice([0, 1735689601126, -1]))
    if version == 3:
        return struct.pack(">h", 3) + offset + struct.pack(">i", rnd.choice([-1, 0, 5])) + short_string(rnd) + stamp
    if version == 1:
        return struct.pack(">h", 1) + offset + short_string(rnd) + stamp + stamp
    return struct.pack(">h", version) + offset + short_string(rnd) + stamp


def mutate(rnd: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rnd.randint(1, 3)):
        what = rnd.random()
        if what < 0.4 and out:
            out[rnd.randrange(len(out))] = rnd.randrange(256)
        elif what < 0.7:
            del out[rnd.randrange(len(out) + 1):]
        else:
            out += rnd.randbytes(rnd.randint(1, 4))
    return bytes(out)


def row(rnd: random.Random) -> tuple[bytes | None, bytes | None]:
    kind = rnd.random()
    if kind < 0.6:
        key, value = commit_key(rnd), (None if rnd.random() < 0.1 else commit_value(rnd))
    elif kind < 0.7:  # a classic group's metadata: the line decoder's
        key, value = struct.pack(">h", 2) + short_string(rnd), rnd.randbytes(rnd.randint(0, 20))
    elif kind < 0.75:
        key, value = None, commit_value(rnd)
    else:
        key, value = commit_key(rnd), commit_value(rnd)
        if rnd.random() < 0.5:
            key = mutate(rnd, key)
        else:
            value = mutate(rnd, value)
    return key, value


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.randoms(use_true_random=False))
def test_commit_columns_equal_the_line_decoders(rnd: random.Random) -> None:
    rows = [row(rnd) for _ in range(rnd.randint(1, 40))]
    cut = rnd.randint(0, 3)  # (arrays sliced: their buffers start before the rows)
    keys = pa.array([None] * cut + [k for k, _ in rows], pa.binary())[cut:]
    values = pa.array([None] * cut + [v for _, v in rows], pa.binary())[cut:]
    decoder = InternalRows("__consumer_offsets", None)
    assert decoder.commits_in_c
    got = decoder.array_columns(keys, values, None, TYPES)
    want = decoder.columns([ArrayRow(k, v, []) for k, v in rows], TYPES)
    for g, w in zip(got, want, strict=True):
        g.validate(full=True)
        assert g.to_pylist() == w.to_pylist()


def test_plain_commits_are_written_in_c() -> None:
    """The compiled writer takes what it is for (so the test above compares it, not the fallback twice)."""
    rnd = random.Random(7)
    keys = [struct.pack(">h", 1) + struct.pack(">h", 5) + b"group" + struct.pack(">h", 1) + b"t" + struct.pack(">i", 3)]
    values = [struct.pack(">hqih", 3, 42, -1, 0) + struct.pack(">q", 1735689601126), None]
    keys.append(keys[0])
    keys += [commit_key(rnd) for _ in range(20)]
    values += [commit_value(rnd) for _ in range(20)]
    key_array, value_array = pa.array(keys, pa.binary()), pa.array(values, pa.binary())
    status, *_ = offsets_text_columns(len(keys), *key_array.buffers(), 0, *value_array.buffers(), 0)
    assert status[:2] == b"\0\0"
    assert np.frombuffer(status, dtype=np.uint8).sum() < len(keys) - 2  # (most random ones too)
    got = InternalRows("__consumer_offsets", None).array_columns(key_array, value_array, None, TYPES)
    assert got[0][0].as_py() == ('{"type": "OffsetCommitKey", "version": 1, "data": {"group": "group", "topic": "t", '
                                 '"partition": 3}}')
    assert got[1][0].as_py() == ('{"type": "OffsetCommitValue", "version": 3, "data": {"offset": 42, '
                                 '"leaderEpoch": -1, "metadata": "", "commitTimestamp": 1735689601126}}')
    assert got[1][1].as_py() == "null"  # (a tombstone, as kfs cat shows it)


def test_bad_buffers_are_refused() -> None:
    keys = pa.array([b"abc"], pa.binary())
    _, offsets, data = keys.buffers()
    with pytest.raises(ValueError, match="shorter than the array"):
        offsets_text_columns(5, None, offsets, data, 0, None, offsets, data, 0)
    bad = struct.pack("<ii", 0, 99)
    with pytest.raises(ValueError, match="outside the data"):
        offsets_text_columns(1, None, bad, data, 0, None, offsets, data, 0)


# ---- the typed columns (a read of __consumer_offsets alone: kfs.spark.internal_types) ------------------

def typed_types() -> list[pa.DataType]:
    from kfs.spark.internal_types import internal_type
    from kfs.spark.pruning import arrow_type

    return [arrow_type(internal_type("__consumer_offsets", part)) for part in ("key", "value")]


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.randoms(use_true_random=False))
def test_typed_commit_columns_equal_the_row_decoders(rnd: random.Random) -> None:
    """The commits' fields read in C (offsets_typed_columns) and the rows it declines, put together, equal
    every row decoded in Python (kfs.internal_topics.framing, the decoder `kfs cat` renders)."""
    rows = [row(rnd) for _ in range(rnd.randint(1, 40))]
    cut = rnd.randint(0, 3)
    keys = pa.array([None] * cut + [k for k, _ in rows], pa.binary())[cut:]
    values = pa.array([None] * cut + [v for _, v in rows], pa.binary())[cut:]
    types = typed_types()
    decoder = InternalRows("__consumer_offsets", None, ["key", "value"])
    assert decoder.typed_commits_in_c and not decoder.commits_in_c
    got = decoder.array_columns(keys, values, None, types)
    want = decoder.columns([ArrayRow(k, v, []) for k, v in rows], types)
    for g, w in zip(got, want, strict=True):
        g.validate(full=True)
        assert g.to_pylist() == w.to_pylist()


def test_plain_commits_are_typed_in_c() -> None:
    from kfs._native.spark import offsets_typed_columns

    rnd = random.Random(7)
    keys = [struct.pack(">h", 1) + struct.pack(">h", 5) + b"group" + struct.pack(">h", 1) + b"t" + struct.pack(">i", 3)]
    values = [struct.pack(">hqih", 3, 42, 9, 0) + struct.pack(">q", 1735689601126), None]
    keys.append(keys[0])
    keys += [commit_key(rnd) for _ in range(20)]
    values += [commit_value(rnd) for _ in range(20)]
    key_array, value_array = pa.array(keys, pa.binary()), pa.array(values, pa.binary())
    status, *_ = offsets_typed_columns(len(keys), *key_array.buffers(), 0, *value_array.buffers(), 0)
    assert status[:2] == b"\0\0"
    assert np.frombuffer(status, dtype=np.uint8).sum() < len(keys) - 2
    got = InternalRows("__consumer_offsets", None, ["key", "value"]).array_columns(
        key_array, value_array, None, typed_types())
    key, value = got[0][0].as_py(), got[1][0].as_py()
    assert (key["type"], key["version"], key["OffsetCommitKey"]) == (
        "OffsetCommitKey", 1, {"group": "group", "topic": "t", "partition": 3})
    assert [k for k, v in key.items() if v is not None] == ["type", "version", "OffsetCommitKey"]
    assert (value["type"], value["version"], value["OffsetCommitValue"]) == ("OffsetCommitValue", 3, {
        "offset": 42, "leaderEpoch": 9, "metadata": "", "commitTimestamp": 1735689601126, "expireTimestamp": None})
    assert got[1][1].as_py() is None  # (a tombstone)


def test_typed_columns_pruned_and_hidden() -> None:
    """Pruned to the one field a query reads, and a part the query does not show left null."""
    from kfs.spark.pruning import project_array

    rnd = random.Random(3)
    rows = [row(rnd) for _ in range(60)]
    keys, values = pa.array([k for k, _ in rows], pa.binary()), pa.array([v for _, v in rows], pa.binary())
    whole = InternalRows("__consumer_offsets", None, ["key", "value"]).array_columns(keys, values, None, typed_types())
    offsets_only = pa.struct([pa.field("OffsetCommitValue", pa.struct([pa.field("offset", pa.int64())]))])
    got = InternalRows("__consumer_offsets", None, ["key", "value"], frozenset({"key"})).array_columns(
        keys, values, None, [typed_types()[0], offsets_only])
    assert got[0].null_count == len(rows)
    assert got[1].to_pylist() == project_array(whole[1], offsets_only).to_pylist()
    assert any(v and v["OffsetCommitValue"] for v in got[1].to_pylist())
