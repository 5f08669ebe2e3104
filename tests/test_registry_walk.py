"""`kfs cat` and the mount of a topic framed by the schema registry: the compiled walker renders runs of
batches whose every value is framed by a schema id the decoder has compiled (walk_v2_run's `avro`,
kfs/_native/csrc/views/render_v2_jsonl.c avro_line), and each batch holding anything else stays the
Python walk's: render_jsonl's `avro` step and the decoder, which tests/test_registry_avro_native.py holds
to the Python path.

Over random partitions (several segments; uncompressed, lz4 and gzip batches; values of a schema without
floats and of one with them, which the walker renders holding the GIL; ids met for the first time
mid-log, an id the registry lacks, declined and damaged datums, headers, framed keys, null and unframed
values), from every kind of start offset and both isolation levels: the bytes with the walker are the
bytes without it, and the walker's counts (a mount's sizes) are the lines' lengths. A real mount and
`kfs cat` agree on a partition the walker takes most of."""

from __future__ import annotations

import io
import json
import math
import os
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import run_kfs, v2_batch, write_segment
from fastavro import parse_schema, schemaless_writer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mounts import mounted, needs_fuse

from kfs._native.registry import render_avro
from kfs.internal_topics.lines import line_decoder
from kfs.registry import load_registry
from kfs.storage import LogDirs, OffsetOutOfRange
from kfs.views import plain_runs
from kfs.views.batch_lines import joined_lines
from kfs.views.jsonl import line_prefix, render_line_list, render_lines, walker_decoding
from kfs.views.line_lengths import counted_batches

pytestmark = pytest.mark.skipif(not plain_runs.available() or render_avro is None,
                                reason="the compiled extension is not built")

ORDER = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "user", "type": "string"},
    {"name": "note", "type": ["null", "string"]}, {"name": "tags", "type": {"type": "map", "values": "int"}},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["NEW", "PAID"]}},
    {"name": "blob", "type": "bytes"}, {"name": "pin", "type": {"type": "fixed", "name": "Pin", "size": 2}}]}
PRICED = {"type": "record", "name": "Priced", "fields": [
    {"name": "id", "type": "long"}, {"name": "price", "type": "double"}, {"name": "ratio", "type": "float"}]}
SCHEMAS = {7: ORDER, 8: PRICED}
# Protobuf schemas (walk_v2_run's `protobuf`): without floats (rendered without the GIL) and with them
PROTOS = {12: 'syntax = "proto3"; package shop; enum Kind { NEW = 0; PAID = 1; } message Refund { int64 id = 1; '
              'string user = 2; repeated int32 parts = 3; Kind kind = 4; message Why { string text = 1; } '
              'Why why = 5; optional bytes blob = 6; } message Other { int32 x = 1; }',
          13: 'syntax = "proto3"; message Rate { int64 id = 1; double rate = 2; float ratio = 3; }'}
_CLASSES: dict[int, Any] = {}
UNKNOWN_ID = 99
TEXTS = ["", "a", 'q"uote', "é\n", "日本", "\U0001f600", "\x00\x1f"]
GZIP, LZ4 = 1, 3  # (kafka-python's codec numbers)


def framed(schema_id: int, value: Any) -> bytes:
    out = io.BytesIO()
    schemaless_writer(out, parse_schema(SCHEMAS[schema_id]), value)
    return b"\0" + schema_id.to_bytes(4, "big") + out.getvalue()


def message_class(schema_id: int, indexes: tuple[int, ...] = (0,)) -> Any:
    from kfs.registry.protobuf import ProtobufRenderer

    if schema_id not in _CLASSES:
        _CLASSES[schema_id] = ProtobufRenderer(PROTOS[schema_id], [])
    return _CLASSES[schema_id]._message_class(indexes)[0]


def good_value(rnd: random.Random, schema_id: int) -> bytes:
    if schema_id == 12:
        message = message_class(12)(id=rnd.randint(-2**63, 2**63 - 1), user=rnd.choice(TEXTS),
                                    parts=[rnd.randint(-5, 5) for _ in range(rnd.randint(0, 3))],
                                    kind=rnd.choice([0, 1, 9]))
        if rnd.random() < 0.5:
            message.why.text = rnd.choice(TEXTS)
        if rnd.random() < 0.5:
            message.blob = rnd.randbytes(rnd.randint(0, 3))
        return b"\0\0\0\0\x0c\0" + message.SerializeToString()
    if schema_id == 13:
        message = message_class(13)(id=rnd.randint(0, 99), rate=rnd.choice([0.1, 2.5, math.inf, math.nan, 0.0]),
                                    ratio=rnd.choice([0.1, 1.5, 3.4e38]))
        return b"\0\0\0\0\x0d\0" + message.SerializeToString()
    if schema_id == 7:
        return framed(7, {"id": rnd.randint(-2**63, 2**63 - 1), "user": rnd.choice(TEXTS) + str(rnd.randint(0, 99)),
                          "note": rnd.choice([None, *TEXTS]), "tags": {t: rnd.randint(-5, 5) for t in TEXTS[:3]},
                          "kind": rnd.choice(["NEW", "PAID"]), "blob": rnd.randbytes(rnd.randint(0, 4)),
                          "pin": rnd.randbytes(2)})
    return framed(8, {"id": rnd.randint(0, 10**6), "price": rnd.choice([0.1, -2.5, 1e300, math.inf, math.nan]),
                      "ratio": rnd.choice([0.1, 1.5, -0.0, 3.4e38])})


def odd_record(rnd: random.Random) -> tuple[bytes | None, bytes | None, list]:
    """A record the walker leaves to the Python walk (its batch with it)."""
    good = good_value(rnd, 7)
    return rnd.choice([
        (b"k", good[:-1], []),  # a datum that ends early: the decoder's error sentence
        (b"k", good + b"\0", []),  # a byte left after it
        (b"k", b"\0" + UNKNOWN_ID.to_bytes(4, "big") + good[5:], []),  # an id the registry lacks
        (b"k", good, [("h", b"v")]),  # a header
        (b"\0\0\0\0\x07\x02", good, []),  # a framed key
        (b"k", None, []),  # a tombstone
        (b"k", b'{"json": 1}', []),  # not framed
        (b"k", b"\0\0\0\0\x0c\x02\x02" + message_class(12, (1,))(x=3).SerializeToString(), []),  # another message
        (b"k", b"\0\0\0\0\x0c\x02\x08\x05", []),  # message indexes [4], whose bytes would read as a field
        (b"k", good_value(rnd, 12) + b"\x40\x01", []),  # a Protobuf field the schema lacks: the decoder's
        (b"k", good_value(rnd, 12)[:-1] + b"\xff", []),  # a damaged one
    ])


def write_registry(logdir: Path) -> None:
    (logdir / "_schemas-0").mkdir(parents=True)
    records = []
    texts = [(i, json.dumps(s), "AVRO") for i, s in sorted(SCHEMAS.items())] + \
        [(i, t, "PROTOBUF") for i, t in sorted(PROTOS.items())]
    for offset, (schema_id, text, kind) in enumerate(texts):
        key = {"keytype": "SCHEMA", "subject": "orders-value", "version": offset + 1, "magic": 1}
        value = {"subject": "orders-value", "version": offset + 1, "id": schema_id, "schema": text, "schemaType": kind}
        records.append((offset, 1000, json.dumps(key).encode(), json.dumps(value).encode(), []))
    write_segment(str(logdir / "_schemas-0"), 0, [[(v2_batch(0, records), records)]], closed=False)


def write_partition(rnd: random.Random, logdir: Path, batches: int) -> None:
    """orders-0 in segments of a few batches each, mostly batches of framed values alone."""
    (logdir / "meta.properties").write_text("version=0\nbroker.id=1\n")
    write_registry(logdir)
    (logdir / "orders-0").mkdir()
    offset, segment_base, appends = 0, 0, []
    for _ in range(batches):
        kind = rnd.random()
        rows: list[tuple[bytes | None, bytes | None, list]] = []
        for _ in range(rnd.randint(1, 20)):
            if kind < 0.65:  # framed values alone: the walker's
                schema_id = 7 if kind < 0.3 else 8 if kind < 0.4 else 12 if kind < 0.55 else 13
                rows.append((rnd.choice([b"k", None, b"\x01"]), good_value(rnd, schema_id), []))
            else:
                rows.append(odd_record(rnd) if rnd.random() < 0.5 else (b"k", good_value(rnd, 7), []))
        records = [(offset + i, 1_700_000_000_000 + offset + i, k, v, h) for i, (k, v, h) in enumerate(rows)]
        codec = rnd.choice([0, 0, 0, LZ4, GZIP])
        appends.append([(v2_batch(offset, records, codec), records)])
        offset += len(records) + (rnd.randint(1, 3) if rnd.random() < 0.05 else 0)  # (compaction's gaps)
        if rnd.random() < 0.15:
            write_segment(str(logdir / "orders-0"), segment_base, appends, index_interval_bytes=rnd.choice([0, 4096]))
            segment_base, appends = offset, []
    write_segment(str(logdir / "orders-0"), segment_base, appends, closed=False)


def decoder_and_prefix(logdir: Path) -> tuple[Any, str]:
    plog = LogDirs([str(logdir)]).partition("orders-0")
    decoder = line_decoder("orders", "auto", plog, load_registry([str(logdir)]))  # (a fresh table each time)
    assert decoder is not None and walker_decoding(decoder) is not None
    return decoder, line_prefix("orders", 0)


def lines(logdir: Path, start: int, isolation: str, walker: bool, taken: list[int]) -> bytes:
    """The partition's decoded lines from `start`, as `kfs cat` gives them, with or without the walker."""
    plog = LogDirs([str(logdir)]).partition("orders-0")
    decoder, prefix = decoder_and_prefix(logdir)
    take = None
    if walker:
        inner = plain_runs.line_taker(prefix, None, isolation == "read_committed", decoded=walker_decoding(decoder))

        def take(*args):  # type: ignore[no-untyped-def]
            got = inner(*args)
            if got is not None:
                taken.append(got.record_count)
            return got

    return b"".join(joined_lines(plog, start, isolation=isolation, control="hide", prefix=prefix,
                                 render=lambda records: render_lines(prefix, records, decoder), fused=False,
                                 take=take))


def counts(logdir: Path, start: int, end: int, isolation: str, walker: bool) -> list[tuple[int, int, int, int]]:
    """The decoded view's per-batch line counts (first offset, next offset, bytes, records)."""
    plog = LogDirs([str(logdir)]).partition("orders-0")
    decoder, prefix = decoder_and_prefix(logdir)
    got = counted_batches(plog, start, end, isolation=isolation, control="hide", prefix=prefix,
                          render=lambda records: render_line_list(prefix, records, decoder), countable=False,
                          decoded=walker_decoding(decoder) if walker else None)
    return [(c.first_offset, c.next_offset, c.length, c.records) for c in got]


@settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.randoms(use_true_random=False))
def test_the_walkers_lines_and_counts_are_the_python_walks(tmp_path_factory: pytest.TempPathFactory,
                                                           rnd: random.Random) -> None:
    logdir = tmp_path_factory.mktemp("framed")
    write_partition(rnd, logdir, rnd.randint(1, 40))
    plog = LogDirs([str(logdir)]).partition("orders-0")
    end = plog.log_end_offset()
    for start in {plog.log_start_offset(), rnd.randint(0, max(end, 1)), end}:
        for isolation in ("read_uncommitted", "read_committed"):
            try:
                rendered = lines(logdir, start, isolation, False, [])
            except OffsetOutOfRange:  # (a gap after the last batch, before an empty segment: Kafka's answer too)
                with pytest.raises(OffsetOutOfRange):
                    lines(logdir, start, isolation, True, [])
                continue
            assert lines(logdir, start, isolation, True, []) == rendered
            stop = rnd.randint(start, end + 1)
            shown = [x for x in rendered.splitlines(keepends=True) if json.loads(x)["offset"] < stop]
            with_walker = counts(logdir, start, stop, isolation, True)
            assert sum(c[2] for c in with_walker) == sum(map(len, shown)), (start, stop, isolation)
            assert sum(c[3] for c in with_walker) == len(shown)


def test_the_walker_takes_framed_batches_floats_too_and_leaves_the_rest(tmp_path: Path) -> None:
    """Batches of framed values alone go through the walker once their ids are known, Avro's and
    Protobuf's (a float schema's too); a batch with a header, a damaged datum, an unknown id or another
    message of a Protobuf schema does not, and its lines are still every record's, errors said."""
    rnd = random.Random(35)
    write_registry(tmp_path)
    (tmp_path / "orders-0").mkdir()
    rows = [[(b"k", good_value(rnd, [7, 8, 12, 13][i // 5]), []) for _ in range(10)] for i in range(20)]
    rows.append([(b"k", good_value(rnd, 7), []), (b"k", good_value(rnd, 7)[:-1], [])])
    rows.append([(b"k", b"\0" + UNKNOWN_ID.to_bytes(4, "big") + b"\x02", [])])
    rows.append([(b"k", good_value(rnd, 12), []), (b"k", b"\0\0\0\0\x0c\x02\x08\x05", [])])
    appends, offset = [], 0
    for batch in rows:
        records = [(offset + i, 1_700_000_000_000, k, v, h) for i, (k, v, h) in enumerate(batch)]
        appends.append([(v2_batch(offset, records), records)])
        offset += len(records)
    write_segment(str(tmp_path / "orders-0"), 0, appends, closed=False)
    taken: list[int] = []
    with_walker = lines(tmp_path, 0, "read_uncommitted", True, taken)
    assert with_walker == lines(tmp_path, 0, "read_uncommitted", False, [])
    parsed = [json.loads(x) for x in with_walker.splitlines()]
    assert len(parsed) == 205
    assert sum(taken) >= 160  # (the first batch of each id is the decoder's: it compiles the id's program)
    assert parsed[70]["value_schema"] == {"id": 8, "subject": "orders-value", "version": 2, "type": "AVRO"}
    assert parsed[120]["value_schema"] == {"id": 12, "subject": "orders-value", "version": 3, "type": "PROTOBUF",
                                           "message": "shop.Refund"}
    assert set(parsed[170]["value"]) <= {"id", "rate", "ratio"} and parsed[170]["value_schema"]["id"] == 13
    assert parsed[-4]["value_decode_error"] == "schema id 7: the datum ends early"
    assert parsed[-3]["value_decode_error"] == "schema id 99: not in the schema registry"
    assert parsed[-1]["value_decode_error"] == "schema id 12: the message indexes [4] name no message of the schema"


@needs_fuse
def test_a_mount_sizes_and_serves_the_walkers_lines(tmp_path: Path) -> None:
    """Through a real mount: `messages.jsonl` of a framed partition is `kfs cat`'s bytes, its size their
    length, and `tail` and `grep` of it see the decoded values."""
    logdir = tmp_path / "logdir"
    logdir.mkdir()
    write_partition(random.Random(2635), logdir, 60)
    done = run_kfs("cat", str(logdir), "orders-0")
    assert done.returncode == 0, done.stderr
    want = done.stdout
    assert want.count(b'"value_schema"') > 300
    with mounted(tmp_path, [str(logdir)], name="framed", decode="auto") as mnt:
        path = mnt / "orders-0" / "messages.jsonl"
        assert os.stat(path).st_size == len(want)
        assert path.read_bytes() == want
        tail = subprocess.run(["tail", "-n", "3", str(path)], capture_output=True, check=True).stdout
        assert tail == b"".join(want.splitlines(keepends=True)[-3:])
        paid = subprocess.run(["grep", "-c", '"kind": "PAID"', str(path)], capture_output=True).stdout
        assert int(paid) == want.count(b'"kind": "PAID"') > 0
