"""The fuzz campaign's `payloads` target: registry-framed Avro and Protobuf payloads with valid framing
and mutated datums, through a decoded view's JSON lines (docs/spec.md section 9).

An input is a partition of 1-8 records whose keys and values are the golden payloads of
tests/fixtures/schema-registry (Avro by Confluent's AvroSerializer, Protobuf by its ProtobufSerializer,
JSON Schema; framed by id, by GUID after byte 1, or by a `__value_schema_id` header), their framing
kept and their datums mutated: bits flipped, cut short, bytes inserted or deleted, huge varints put
where a length or count may be read, a union index out of range written over one, and for Protobuf a
message-index list replaced by a bad one (a huge or negative count, indexes naming no message, cut
short). Decoded with the fixture's registry (its `_schemas` topic), through DecodedLog.

The oracle, for each record, against independent decoders of the same bytes: fastavro's own
`schemaless_reader` over the schema as registered (not kfs's rewrite) then fastavro's JSON-encoding
writer for Avro; the harness's own index-list reader and a descriptor pool compiled from files on
disk by protoc, then protobuf's parser and `json_format` for Protobuf; `json.loads` for JSON Schema.
kfs's line for each record carries either the value the independent decoder gives (and its
`value_schema` names the framed id) or one `value_decode_error` sentence naming the id, where the
independent decoder fails too (or where kfs refuses on purpose: a datum declaring more array items or
nesting deeper than its bounds). Never a traceback's text (an exception kfs's decoders did not mean),
never a line dropped or added, the view's size its bytes' length, and the input's peak memory bounded.
"""

from __future__ import annotations

import atexit
import io
import json
import math
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import fuzz_targets as t
from fuzz_targets import Failure

from kfs.registry import Registry, load_registry
from kfs.registry.avro import INDEX_OUT_OF_RANGE
from kfs.storage import KfsError, LogDirs
from kfs.views.decoded import DecodedLog

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "schema-registry" / "logdir"
SEED_TOPICS = ("orders", "users", "customers", "payments", "events", "newer", "newer_proto", "legacy", "gone")
TOPIC = "fuzzed"
# where a varint over 64 bits may be: kfs walks such a datum first (kfs/registry/avro.py's _LONG_RUN)
HIGH_BIT_RUN = re.compile(rb"[\x80-\xff]{9}[\x02-\xff]")
# where an int, union index or enum index may be read otherwise by Java's BinaryDecoder.readInt (5 bytes at
# most, the low 32 bits) than by fastavro (a long): kfs reads those as Java does (kfs/registry/avro.py, _java_int)
JAVA_INT_RUN = re.compile(rb"[\x80-\xff]{4}[\x10-\xff]")
MAX_PEAK_GROWTH = 256 << 20  # bytes of resident memory an input may add at its peak
HUGE_VARINTS = (b"\xfe\xff\xff\xff\x0f", b"\xff\xff\xff\xff\xff\xff\xff\xff\x7f", b"\x81\x80\x80\x80\x80\x01",
                b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", b"\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01",
                b"\xfd\xff\xff\xff\x0f")


class _Seeds:
    """The fixture's registry, its framed records, and the independent decoders' compiled schemas."""

    def __init__(self) -> None:
        registry = load_registry([str(FIXTURE)])
        assert registry is not None
        self.registry: Registry = registry
        self.records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]] = []
        logdirs = LogDirs([str(FIXTURE)])
        for topic in SEED_TOPICS:
            for records in logdirs.partition(f"{topic}-0").record_lists():
                for r in records:
                    if r.value is not None:
                        self.records.append((None if r.key is None else bytes(r.key), bytes(r.value),
                                             [(name, bytes(v)) for name, v in r.headers]))
        self._avro: dict[int, Any] = {}
        self._proto: dict[int, Any] = {}
        self._proto_dir = Path(tempfile.mkdtemp(prefix="kfs-fuzz-proto-"))
        atexit.register(self.close)

    def avro_schema(self, schema_id: int) -> Any:
        """The schema as registered (references first, logical types dropped), parsed by fastavro."""
        parsed = self._avro.get(schema_id)
        if parsed is None:
            from fastavro import parse_schema

            known = self.registry.state.by_id[schema_id]
            named: dict[str, Any] = {}
            for ref in known.references:
                target = self.registry.state.version(ref.subject, ref.version)
                assert target is not None
                parse_schema(_without_logical_types(json.loads(target.schema)), named_schemas=named)
            parsed = parse_schema(_without_logical_types(json.loads(known.schema)), named_schemas=named)
            self._avro[schema_id] = parsed
        return parsed

    def proto_file(self, schema_id: int) -> Any:
        """The schema's FileDescriptor in a pool of its own, compiled from files on disk by protoc."""
        known = self._proto.get(schema_id)
        if known is None:
            from google.protobuf import descriptor_pb2, descriptor_pool

            schema = self.registry.state.by_id[schema_id]
            root = self._proto_dir / str(schema_id)
            root.mkdir(parents=True, exist_ok=True)
            for ref in schema.references:
                target = self.registry.state.version(ref.subject, ref.version)
                assert target is not None
                (root / ref.name).parent.mkdir(parents=True, exist_ok=True)
                (root / ref.name).write_text(target.schema)
            (root / "main.proto").write_text(schema.schema)
            import grpc_tools

            well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
            out = root / "set.pb"
            subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{root}", f"-I{well_known}",
                            "--include_imports", f"--descriptor_set_out={out}", "main.proto"], check=True)
            pool = descriptor_pool.DescriptorPool()
            for f in descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file:
                pool.Add(f)
            known = (pool, pool.FindFileByName("main.proto"))
            self._proto[schema_id] = known
        return known

    def close(self) -> None:
        shutil.rmtree(self._proto_dir, ignore_errors=True)


_SEEDS: _Seeds | None = None


def seeds() -> _Seeds:
    global _SEEDS
    if _SEEDS is None:
        _SEEDS = _Seeds()
    return _SEEDS


# ---- making an input -----------------------------------------------------------------------------

def _varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63) if n >= 0 else ((n << 1) ^ -1) & ((1 << 64) - 1)
    out = bytearray()
    while True:
        b = z & 0x7F
        z >>= 7
        if z:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _mutate(rnd: random.Random, datum: bytearray, protobuf: bool, damage: list[str]) -> None:
    """`datum` mutated in place (the framing before it is not part of it)."""
    for _ in range(rnd.randint(1, 4)):
        kinds = ["flip", "cut", "insert", "varint", "delete", "union"]
        if protobuf:
            kinds += ["indexes", "indexes"]
        kind = rnd.choice(kinds)
        at = rnd.randint(0, len(datum))
        if kind == "flip" and datum:
            at = min(at, len(datum) - 1)
            datum[at] ^= 1 << rnd.randrange(8)
        elif kind == "cut":
            del datum[at:]
        elif kind == "insert":
            datum[at:at] = rnd.randbytes(rnd.randint(1, 8))
        elif kind == "varint":
            datum[at:at + rnd.choice([0, 1])] = rnd.choice(HUGE_VARINTS)
        elif kind == "delete":
            del datum[at:at + rnd.randint(1, 4)]
        elif kind == "union":  # a union branch (or enum symbol, or count) index out of range over one byte
            datum[at:at + 1] = _varint(rnd.choice([-1, -2, 3, 4, 7, 63, 64, 1000, -(1 << 31), (1 << 40)]))
        elif kind == "indexes":  # a bad message-index list in place of the first one
            count = rnd.choice([-1, -5, 65, 1000, 1 << 40, 2, 3, 1])
            indexes = b"".join(_varint(rnd.choice([0, 1, 2, -1, 5, 1 << 33])) for _ in range(rnd.randint(0, 4)))
            start = _index_list_end(bytes(datum))
            datum[:start if start is not None else 0] = _varint(count) + indexes
        damage.append(kind)


def _index_list_end(data: bytes) -> int | None:
    try:
        return read_indexes(data)[1]
    except ValueError:
        return None


def make_payloads_input(rnd: random.Random, scratch: Path) -> tuple[Path, list[tuple[bytes | None, bytes | None,
                                                                                       list[tuple[str, bytes]]]]]:
    """A log dir holding TOPIC-0, and the records written to it (key, value, headers), in offset order."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    s = seeds()
    logdir = scratch / "payloads-logdir"
    shutil.rmtree(logdir, ignore_errors=True)
    (logdir / f"{TOPIC}-0").mkdir(parents=True)
    written = []
    for _ in range(rnd.randint(1, 8)):
        key, value, headers = rnd.choice(s.records)
        damage: list[str] = []
        parts = [key, value]
        for which in (1, 0) if rnd.random() < 0.2 else (1,):
            data = parts[which]
            if data is None or rnd.random() < 0.1:  # some go unmutated: they must decode
                continue
            header = next((v for n, v in headers if n == ("__value_schema_id" if which else "__key_schema_id")), None)
            if header is not None:
                frame = 0
                named = s.registry.state.by_id.get(_schema_id_of(s.registry, header) or -1)
                if which and named is not None and named.type == "PROTOBUF" and rnd.random() < 0.5:
                    # the index list is in the header: mutate it there
                    indexes = bytearray(header[17:])
                    _mutate(rnd, indexes, True, damage)
                    headers = [(n, header[:17] + bytes(indexes)) if n == "__value_schema_id" else (n, v)
                               for n, v in headers]
                    continue
            else:
                frame = 17 if data[:1] == b"\1" else 5
            schema_id = _schema_id_of(s.registry, data if header is None else header)
            known = s.registry.state.by_id.get(schema_id) if schema_id is not None else None
            protobuf = known is not None and known.type == "PROTOBUF" and header is None
            datum = bytearray(data[frame:])
            _mutate(rnd, datum, protobuf, damage)
            parts[which] = data[:frame] + bytes(datum)
        written.append((parts[0], parts[1], headers))
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=rnd.choice([0, 0, 1]), is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    for i, (key, value, headers) in enumerate(written):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=key, value=value, headers=headers)
    (logdir / f"{TOPIC}-0" / f"{0:020d}.log").write_bytes(bytes(builder.build()))
    (logdir / f"{TOPIC}-0" / f"{0:020d}.index").write_bytes(b"")
    (logdir / f"{TOPIC}-0" / f"{0:020d}.timeindex").write_bytes(b"")
    return logdir, written


def _schema_id_of(registry: Registry, source: bytes) -> int | None:
    if len(source) >= 5 and source[0] == 0:
        return int.from_bytes(source[1:5], "big")
    if len(source) >= 17 and source[0] == 1:
        known = registry.state.by_guid.get(source[1:17])
        return None if known is None else known.id
    return None


# ---- the independent decoders ---------------------------------------------------------------------

class Undecodable(Exception):
    """The independent decoder does not decode the payload (`read`: fastavro's reader did, its JSON
    writer refused the value: an int beyond 32 bits, of which kfs shows the low 32 bits, as Java's
    BinaryDecoder reads it)."""

    def __init__(self, why: str, read: bool = False) -> None:
        super().__init__(why)
        self.read = read


def read_indexes(data: bytes) -> tuple[list[int], int]:
    """A Confluent message-index list (zigzag varints: a count, that many indexes; 0 alone is [0]),
    read from its description in Confluent's ProtobufSerializer docs, and where the message starts."""
    pos = 0

    def zigzag() -> int:
        nonlocal pos
        n = shift = 0
        while True:
            if pos >= len(data) or shift >= 64:
                raise ValueError("cut short")
            b = data[pos]
            pos += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return (n >> 1) ^ -(n & 1)

    count = zigzag()
    if count == 0:
        return [0], pos
    if count < 0 or count > len(data):
        raise ValueError(f"count {count}")
    return [zigzag() for _ in range(count)], pos


def independent(registry: Registry, data: bytes, header: bytes | None) -> tuple[int, Any]:
    """(schema id, the decoded JSON value) by the independent decoders; Undecodable when they fail."""
    s = seeds()
    source = data if header is None else header
    schema_id = _schema_id_of(registry, source)
    if schema_id is None:
        raise Undecodable("framing")
    known = registry.state.by_id.get(schema_id)
    if known is None:
        raise Undecodable("unknown id")
    rest = source[5:] if source[0] == 0 else source[17:]
    if known.type == "AVRO":
        from fastavro import json_writer
        from fastavro.read import schemaless_reader

        body = rest if header is None else data
        try:
            schema = s.avro_schema(schema_id)
        except Exception as e:
            raise Undecodable(f"schema: {e}") from None
        stream = io.BytesIO(body)
        try:
            value = schemaless_reader(stream, schema, None)
        except Exception as e:
            raise Undecodable(f"reader: {type(e).__name__}") from None
        if stream.tell() != len(body):
            raise Undecodable("bytes left")
        out = io.StringIO()
        try:
            json_writer(out, schema, [value])
        except Exception as e:
            raise Undecodable(f"json writer: {type(e).__name__}: {e}", read=True) from None
        return schema_id, json.loads(out.getvalue())
    if known.type == "PROTOBUF":
        from google.protobuf import json_format, message_factory

        body = rest if header is None else rest + data
        try:
            indexes, start = read_indexes(body)
        except ValueError as e:
            raise Undecodable(f"indexes: {e}") from None
        pool, file = s.proto_file(schema_id)
        candidates = list(file.message_types_by_name.values())
        descriptor = None
        for index in indexes:
            if not 0 <= index < len(candidates):
                raise Undecodable("no such message")
            descriptor = candidates[index]
            candidates = list(descriptor.nested_types)
        assert descriptor is not None
        message = message_factory.GetMessageClass(descriptor)()
        try:
            message.ParseFromString(body[start:])
            return schema_id, json_format.MessageToDict(message, descriptor_pool=pool)
        except Exception as e:
            raise Undecodable(f"parser: {type(e).__name__}") from None
    body = rest if header is None else data
    try:
        return schema_id, json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise Undecodable(f"json: {type(e).__name__}") from None


# ---- running it -----------------------------------------------------------------------------------

def _peak_reset() -> int:
    """Resets the process's peak resident size (Linux's clear_refs 5) and returns the resident size now."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    return _status("VmRSS")


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def run_payloads_input(logdir: Path, written: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]]
                       ) -> None:
    """One input (see the module docstring); raises Failure on a finding. With the extension, on both
    paths (the compiled Avro renderer and line renderer, then the Python path's), which must agree."""
    s = seeds()
    before = _peak_reset()
    answers: dict[str, tuple[int, bytes]] = {}
    for path in t.paths():
        t.use_path(path)
        try:
            plog = LogDirs([str(logdir)]).partition(f"{TOPIC}-0")
            view = DecodedLog(plog, registry=s.registry).view(None)
            size = view.size()
            answers[path] = size, view.cursor().read(0, size + 1)
        except KfsError as e:
            raise Failure("exception", f"{path}: {type(e).__name__}: {e}") from None
        except Exception as e:
            raise Failure("exception", f"{path}: a traceback: {type(e).__name__}: {e}") from e
    size, data = answers[t.paths()[-1]]
    if any(answer != (size, data) for answer in answers.values()):
        raise Failure("disagreement", "the compiled path's decoded lines are not the Python path's")
    growth = _status("VmHWM") - before
    if growth > MAX_PEAK_GROWTH:
        raise Failure("wrong-answer", f"the input's peak memory grew by {growth >> 20} MB")
    if len(data) != size:
        raise Failure("wrong-answer", f"the view's size is {size}, its bytes {len(data)}")
    lines = data.decode("utf-8").splitlines()
    if len(lines) != len(written):
        raise Failure("wrong-answer", f"{len(written)} records written, {len(lines)} lines")
    for offset, (line, (key, value, headers)) in enumerate(zip(lines, written, strict=True)):
        obj = json.loads(line)
        if obj.get("offset") != offset:
            raise Failure("wrong-answer", f"line {offset} says offset {obj.get('offset')}")
        header = dict(headers)
        for part, payload, name in (("value", value, "__value_schema_id"), ("key", key, "__key_schema_id")):
            _check_part(s.registry, obj, part, payload, header.get(name), offset)
    _check_kcat(plog, s.registry, [json.loads(line) for line in lines])


def _check_kcat(plog: Any, registry: Registry, decoded: list[dict[str, Any]]) -> None:
    """`kfs cat -J -s avro` (kfs.registry.kcat) over the same records: each payload and key the line's
    decoded Avro value with its id, or null and a `*_error` where the line has none for an Avro one."""
    from kfs.registry.kcat import AvroDecoder, AvroKcatJson

    fmt = AvroKcatJson(TOPIC, 0, -1, AvroDecoder(registry, TOPIC, 0, warn=lambda text: None), True, True)
    try:
        out = b"".join(fmt.pieces([r for records in plog.record_lists() for r in records]))
    except Exception as e:
        raise Failure("exception", f"kcat -J -s avro: a traceback: {type(e).__name__}: {e}") from e
    kcat_lines = [json.loads(line) for line in out.decode("utf-8", "surrogateescape").splitlines()]
    if len(kcat_lines) != len(decoded):
        raise Failure("wrong-answer", f"kcat -J -s avro: {len(kcat_lines)} lines for {len(decoded)} records")
    for got, line in zip(kcat_lines, decoded, strict=True):
        for part, name in (("value", "payload"), ("key", "key")):
            schema = line.get(f"{part}_schema")
            if isinstance(schema, dict) and schema.get("type") == "AVRO":
                if got.get(name) != line[part] or got.get(f"{part}_schema_id") != schema["id"]:
                    raise Failure("wrong-answer", f"offset {line['offset']}: kcat -J -s avro's {name} "
                                                  f"{json.dumps(got.get(name))[:200]} is not the line's "
                                                  f"{json.dumps(line[part])[:200]}")
            elif got.get(name) is not None and f"{part}_schema_id" in got:
                raise Failure("wrong-answer", f"offset {line['offset']}: kcat -J -s avro decoded a {part} the "
                                              "line does not show as Avro")


def _check_part(registry: Registry, obj: dict[str, Any], part: str, payload: bytes | None, header: bytes | None,
                offset: int) -> None:
    if payload is None:
        return
    error = obj.get(f"{part}_decode_error")
    framed_here = header is not None or (len(payload) >= 5 and payload[0] == 0 and payload[1:5] != b"\0\0\0\0") or \
        (len(payload) >= 17 and payload[0] == 1)
    if not framed_here:
        return
    try:
        schema_id, expected = independent(registry, payload, header)
    except Undecodable as e:
        if error is None and (e.read or JAVA_INT_RUN.search(payload) is not None):
            return  # (an int, union or enum index past 32 bits: kfs reads its low 32 bits, as Java does)
        if error is None:
            raise Failure("wrong-answer", f"offset {offset}: kfs decoded a {part} the independent decoder does "
                                          f"not ({e}): {json.dumps(obj[part])[:200]}") from None
        _check_sentence(error, offset, part)
        return
    if error is not None:
        _check_sentence(error, offset, part)
        if "declares more than" in error or "nests deeper than" in error:
            return  # refused on purpose: the bound, where fastavro builds them all
        if error.endswith(("a varint longer than 10 bytes", "a varint beyond 64 bits")) \
                and HIGH_BIT_RUN.search(payload) is not None:
            return  # refused on purpose: fastavro keeps such a varint's low 64 bits, a number not in the datum
        if error.endswith("(Java: Invalid int encoding)") and JAVA_INT_RUN.search(payload) is not None:
            return  # refused on purpose, as Java refuses an int of more than 5 bytes
        if error.endswith(INDEX_OUT_OF_RANGE):
            return  # kfs refuses a negative union or enum index, as Java does; fastavro counts from the end
        raise Failure("wrong-answer", f"offset {offset}: the independent decoder decodes the {part}, kfs says "
                                      f"{error!r}; expected {json.dumps(expected)[:200]}")
    schema = obj.get(f"{part}_schema")
    if not isinstance(schema, dict) or schema.get("id") != schema_id:
        raise Failure("wrong-answer", f"offset {offset}: {part}_schema {schema!r}, the framing names id {schema_id}")
    if not same(obj[part], expected, JAVA_INT_RUN.search(payload) is not None):
        raise Failure("wrong-answer", f"offset {offset}: kfs's {part} {json.dumps(obj[part])[:300]} != the "
                                      f"independent decoder's {json.dumps(expected)[:300]}")


def _check_sentence(error: object, offset: int, part: str) -> None:
    if not isinstance(error, str) or not error.startswith(("schema id ", "schema guid ", "the schema id header")) \
            or "\n" in error or len(error) > 500 or "Traceback" in error:
        raise Failure("wrong-answer", f"offset {offset}: {part}_decode_error is not one sentence of kfs's: {error!r}")


def same(a: object, b: object, java_ints: bool = False) -> bool:
    """kfs's value and the independent decoder's: a float32 is kfs's shortest digits against the double
    fastavro read; a non-finite double is Jackson's string against the float json reads back; with
    `java_ints` (the datum has a 5-byte varint past 32 bits), an int fastavro read beyond 32 bits is the
    number Java's BinaryDecoder.readInt reads from the same varint (its low 32 bits); kfs's false may be
    fastavro's true (a boolean byte over 1, which Java reads as false)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], java_ints) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y, java_ints) for x, y in zip(a, b, strict=True))
    if java_ints and type(a) is int and type(b) is int and not -(1 << 31) <= b < 1 << 31:
        low = ((b << 1) ^ (b >> 63)) & 0xFFFFFFFF  # the varint's low 32 bits
        return a == b or a == (low >> 1) ^ -(low & 1)
    if isinstance(b, float) and not math.isfinite(b):
        return a == ("NaN" if math.isnan(b) else "Infinity" if b > 0 else "-Infinity") or \
            (isinstance(a, float) and (a == b or (math.isnan(a) and math.isnan(b))))
    if isinstance(a, float) and isinstance(b, float):
        return a == b or struct.pack("<f", a) == struct.pack("<f", b) or \
            abs(a - b) <= 1e-6 * max(abs(a), abs(b))
    if isinstance(a, float) and isinstance(b, int) and not isinstance(b, bool):
        return a == b
    if a is False and b is True:  # a boolean byte over 1: Java's readBoolean reads false, fastavro true
        return True
    return a == b and type(a) is type(b)


def _without_logical_types(schema: object) -> object:
    if isinstance(schema, dict):
        return {k: _without_logical_types(v) for k, v in schema.items() if k != "logicalType"}
    if isinstance(schema, list):
        return [_without_logical_types(v) for v in schema]
    return schema
