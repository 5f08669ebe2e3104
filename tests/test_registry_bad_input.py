"""Framed payloads that do not decode (docs/spec.md section 9): one sentence in `*_decode_error`, section 3's
bytes kept, nothing dropped, bounded memory and stack, the stream and the daemon go on."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_kfs, v2_batch, write_segment
from mounts import mounted, needs_fuse

SCHEMAS = {
    1: {"type": "record", "name": "Node", "fields": [{"name": "v", "type": "int"},
                                                     {"name": "next", "type": ["null", "Node"]}]},
    2: {"type": "array", "items": "null"},
    3: {"type": "record", "name": "Holder", "fields": [{"name": "empties", "type": {"type": "array", "items": {
        "type": "record", "name": "Empty", "fields": []}}}]},
    4: {"type": "record", "name": "S", "fields": [{"name": "s", "type": "string"}, {"name": "b", "type": "bytes"}]},
    5: {"type": "record", "name": "U", "fields": [
        {"name": "u", "type": ["null", "int"]},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A"]}}]},
    6: {"type": "map", "values": "long"},
}
BAD_TEXT = {7: '{"type": "record", "name": "X", "fields": [', 8: '{"type": "nosuch"}'}
PROTO = {10: 'syntax = "proto3"; package p; message A { int32 x = 1; message B { string s = 1; } }',
         11: 'syntax = "proto3"; message Broken { nosuch.Type x = 1; }'}


def framed(schema_id: int, body: bytes) -> bytes:
    return b"\x00" + struct.pack(">I", schema_id) + body


# (payload, the start of its decode error or None, its decoded value)
CASES: list[tuple[bytes, str | None, object]] = [
    (framed(1, b"\x02\x02\x04\x02\x06\x00"), None, {"v": 1, "next": {"Node": {"v": 2, "next": {"Node": {
        "v": 3, "next": None}}}}}),
    (framed(1, b"\x00\x02" * 100_000 + b"\x00\x00"), "schema id 1: the datum nests deeper than 200 levels", None),
    (framed(2, b"\xfe\xff\xff\xff\xff\x0f\x00"), "schema id 2: the datum declares more than", None),
    (framed(2, b"\x06\x00"), None, [None, None, None]),
    (framed(3, b"\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01\x00"), "schema id 3: the datum declares more than", None),
    (framed(4, b"\xfe\xff\xff\xff\x0fab"), "schema id 4: the datum ends early", None),
    (framed(4, b"\x02a\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f"), "schema id 4: the datum", None),
    (framed(4, b"\x02a\x02\xff"), None, {"s": "a", "b": "\u00ff"}),
    (framed(4, b"\x04\xc3"), "schema id 4: the datum", None),  # invalid UTF-8 in a string
    (framed(5, b"\x08\x00"), "schema id 5: the datum holds a union branch or enum symbol index out of range", None),
    (framed(5, b"\x00\x04"), "schema id 5: the datum holds a union branch or enum symbol index out of range", None),
    (framed(5, b"\x02\xfe\xff\xff\xff\x1f\x00"), None, {"u": {"int": 2147483647}, "e": "A"}),  # Java's low 32 bits
    (framed(5, b"\x02\x80\x80\x80\x80\x80\x01\x00"), "schema id 5: the datum holds an int of more than 5 bytes", None),
    (framed(6, b"\x01\x02\x02k\x04\x00"), None, {"k": 2}),  # a negative block count (with its byte size)
    (framed(6, b"\x02\x02k"), "schema id 6: the datum ends early", None),
    (framed(7, b"\x00"), "schema id 7: the schema is not JSON", None),
    (framed(8, b"\x00"), "schema id 8: the schema does not parse as Avro", None),
    (framed(9, b"{\"a\": " * 100_000), "schema id 9: the value is not JSON text", None),
    (framed(9, b"\xff"), "schema id 9: the value is not JSON text", None),
    (framed(12345, b""), "schema id 12345: not in the schema registry", None),
    (framed(10, b"\x00\x08\x96\x01"), None, {"x": 150}),
    (framed(10, b"\x04\x00\x00\x0a\x01z"), None, {"s": "z"}),
    (framed(10, b"\x02\x02\x08\x01"), "schema id 10: the message indexes [1] name no message of the schema", None),
    (framed(10, b"\x00\x08"), "schema id 10: the p.A message does not decode", None),
    (framed(10, b"\xfe\xff\xff\xff\x0f"), "schema id 10: the message-index list declares", None),
    (framed(10, b"\x02"), "schema id 10: the message-index list ends early", None),
    (framed(11, b"\x00"), "schema id 11: the schema does not compile as Protobuf", None),
    (framed(1, b""), "schema id 1: the datum ends early", None),
]


@pytest.fixture(scope="module")
def logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bad-registry") / "logdir"
    (root / "bad-0").mkdir(parents=True)
    (root / "_schemas-0").mkdir()
    (root / "meta.properties").write_text("version=1\nnode.id=1\n")
    registry = []
    texts = {i: json.dumps(s) for i, s in SCHEMAS.items()} | BAD_TEXT
    for i, text in sorted(texts.items()):
        registry.append((json.dumps({"keytype": "SCHEMA", "subject": f"s{i}", "version": 1, "magic": 1}).encode(),
                         json.dumps({"subject": f"s{i}", "version": 1, "id": i, "schema": text,
                                     "deleted": False}).encode()))
    for i, text in PROTO.items():
        registry.append((json.dumps({"keytype": "SCHEMA", "subject": f"s{i}", "version": 1, "magic": 1}).encode(),
                         json.dumps({"subject": f"s{i}", "version": 1, "id": i, "schemaType": "PROTOBUF",
                                     "schema": text, "deleted": False}).encode()))
    registry.append((json.dumps({"keytype": "SCHEMA", "subject": "j", "version": 1, "magic": 1}).encode(),
                     json.dumps({"subject": "j", "version": 1, "id": 9, "schemaType": "JSON", "schema": "{}",
                                 "deleted": False}).encode()))
    records = [(i, 1000 + i, k, v, []) for i, (k, v) in enumerate(registry)]
    write_segment(str(root / "_schemas-0"), 0, [[(v2_batch(0, records), records)]], closed=False)
    records = [(i, 1000 + i, None, payload, []) for i, (payload, _, _) in enumerate(CASES)]
    batches = [[(v2_batch(i, records[i:i + 3]), records[i:i + 3])] for i in range(0, len(records), 3)]
    write_segment(str(root / "bad-0"), 0, batches, closed=False)
    return root


def check(lines: list[dict]) -> None:
    assert len(lines) == len(CASES)  # nothing dropped
    for line, (payload, error, value) in zip(lines, CASES, strict=True):
        if error is None:
            assert "value_decode_error" not in line, line
            assert line["value"] == value
            assert line["value_schema"]["id"] == int.from_bytes(payload[1:5], "big")
        else:
            assert line["value_decode_error"].startswith(error), (line["value_decode_error"], error)
            assert "\n" not in line["value_decode_error"] and len(line["value_decode_error"]) < 300
            assert "value_schema" not in line
            assert isinstance(line["value"], (str, dict)) and "value" in line  # section 3's bytes


def test_kfs_cat_gives_one_sentence_per_bad_payload_in_bounded_memory(logdir: Path) -> None:
    # the process's peak memory stays small: no count or length inside a datum is believed
    # (VmHWM, the peak of this process's own memory: ru_maxrss would also count the pytest process
    # it was started from, which Linux carries across fork and exec)
    code = ("import sys; from kfs.cli.main import main; rc = main(['cat', sys.argv[1], 'bad-0']); "
            "hwm = next(l for l in open('/proc/self/status') if l.startswith('VmHWM:')).split()[1]; "
            "sys.stderr.write(hwm); sys.exit(rc)")
    result = subprocess.run([sys.executable, "-c", code, str(logdir)], capture_output=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    check([json.loads(line) for line in result.stdout.splitlines()])
    assert int(result.stderr.decode().strip().splitlines()[-1]) < 300_000  # KiB


def test_cat_count_and_offsets_through_bad_payloads(logdir: Path) -> None:
    result = run_kfs("cat", str(logdir), "bad-0", "--offset", "1", "--count", "3")
    assert result.returncode == 0
    assert [json.loads(line)["offset"] for line in result.stdout.splitlines()] == [1, 2, 3]


@needs_fuse
def test_the_daemon_survives_bad_payloads(tmp_path: Path, logdir: Path) -> None:
    with mounted(tmp_path, [str(logdir)], size_cache="none") as mnt:
        path = mnt / "bad-0" / "messages.jsonl"
        data = path.read_bytes()
        assert path.stat().st_size == len(data)
        check([json.loads(line) for line in data.splitlines()])
        assert (mnt / "bad-0" / "offset" / "1.jsonl").read_bytes() == b"".join(data.splitlines(True)[1:])
