"""A reader field's `bytes` or `fixed` default, as Apache Avro's Java reader gives it to a record whose
writer lacks the field: the default's JSON string taken a character a byte (ISO-8859-1, `?` for one past
255), at any depth of the default (a record's field, an array's item, a union's first branch). fastavro
hands the JSON string on as it is, and Spark's typed column held its UTF-8 (`"\\u00ff"` as c3 bf, a 2-byte
fixed 3 bytes long). The oracle is Avro's Java library itself (java/AvroResolve.java), where it is
installed (Debian's libavro-java, which .ci/run installs); its answers are also kept below."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_writer
from test_spark_typed_arrow import _state, arrays, typed_rows

from kfs.registry.decode import Registry
from kfs.spark.typed import ArrayRow

WRITER = {"type": "record", "name": "R", "fields": [{"name": "n", "type": "int"}]}
FIXED = {"type": "fixed", "name": "F", "size": 2}
INNER = {"type": "record", "name": "In", "fields": [
    {"name": "x", "type": "bytes"}, {"name": "l", "type": {"type": "array", "items": "bytes"}},
    {"name": "m", "type": {"type": "map", "values": "bytes"}}]}
READER = {"type": "record", "name": "R", "fields": [
    {"name": "n", "type": "long"},
    {"name": "b", "type": "bytes", "default": "\u00ff\u0100"},  # (U+0100: past ISO-8859-1)
    {"name": "f", "type": FIXED, "default": "\u00ffa"},
    {"name": "g", "type": "F", "default": "zz"},
    {"name": "u", "type": ["bytes", "null"], "default": "\u00fe"},
    {"name": "e", "type": "bytes", "default": ""},
    {"name": "rec", "type": INNER, "default": {"x": "\u00e9", "l": ["\u00ff", "a"], "m": {"k": "\u0080"}}},
]}
# Avro's Java reader (libavro-java 1.8.2, java/AvroResolve.java) on a datum of WRITER with n = 1, its JSON
# encoding's bytes strings taken back to bytes a character a byte
JAVA = {"n": 1, "b": b"\xff?", "f": b"\xffa", "g": b"zz", "u": b"\xfe", "e": b"",
        "rec": {"x": b"\xe9", "l": [b"\xff", b"a"], "m": {"k": b"\x80"}}}
JAVA_CLASSPATH = ["/usr/share/java/avro.jar", "/usr/share/java/jackson-core-asl.jar",
                  "/usr/share/java/jackson-mapper-asl.jar", "/usr/share/java/slf4j-api.jar"]
AVRO_RESOLVE = Path(__file__).parent / "fixtures" / "schema-registry" / "java" / "AvroResolve.java"


def _datum(n: int) -> bytes:
    out = io.BytesIO()
    schemaless_writer(out, parse_schema(WRITER), {"n": n})
    return out.getvalue()


def _typed_value(reader: dict[str, Any]) -> dict[str, Any]:
    """kfs's typed `value_decoded` of WRITER's datum (schema id 3) read as `reader` (id 7)."""
    rows, types = typed_rows(Registry(_state([(3, WRITER), (7, reader)])), "t")
    columns = rows.array_columns(*arrays([ArrayRow(None, b"\0\0\0\0\3" + _datum(1), [])]), types)
    assert columns[3].to_pylist() == [None]
    (value,) = columns[1].to_pylist()
    value["rec"]["m"] = dict(value["rec"]["m"])  # (a Spark map comes as key-value pairs)
    return value


def _as_bytes(value: Any) -> Any:
    """Avro's JSON encoding back to Python: a bytes or fixed string a character a byte, a union's
    `{"branch": value}` its value (every string in READER is of bytes or fixed)."""
    if isinstance(value, str):
        return value.encode("latin-1")
    if isinstance(value, list):
        return [_as_bytes(v) for v in value]
    if isinstance(value, dict):
        if len(value) == 1 and next(iter(value)) == "bytes":
            return _as_bytes(value["bytes"])
        return {k: _as_bytes(v) for k, v in value.items()}
    return value


def test_byte_defaults_are_javas_bytes() -> None:
    assert _typed_value(READER) == JAVA


def test_a_reader_of_the_writers_own_version_is_untouched() -> None:
    """The same schema on both sides (no default used) reads as before, and the schema kfs parsed keeps
    its JSON defaults (the copy fastavro reads with is another)."""
    rows, types = typed_rows(Registry(_state([(7, READER)])), "t")
    parsed = parse_schema(READER)
    out = io.BytesIO()
    value = {**JAVA, "u": b"\x01", "rec": {"x": b"", "l": [], "m": {}}}
    schemaless_writer(out, parsed, value)
    columns = rows.array_columns(*arrays([ArrayRow(None, b"\0\0\0\0\7" + out.getvalue(), [])]), types)
    assert columns[1].to_pylist()[0]["u"] == b"\x01" and columns[3].to_pylist() == [None]
    assert READER["fields"][1]["default"] == "\u00ff\u0100"


@pytest.mark.skipif(shutil.which("javac") is None or not all(Path(j).exists() for j in JAVA_CLASSPATH),
                    reason="no JDK or Avro's Java library here (.ci/run installs libavro-java)")
def test_against_avros_java_reader(tmp_path: Path) -> None:
    """READER and variations of it (each default alone, a union's default, defaults past 255 and empty),
    read by Avro's Java library and by kfs: the same bytes."""
    classpath = ":".join([str(tmp_path), *JAVA_CLASSPATH])
    subprocess.run(["javac", "-nowarn", "-d", str(tmp_path), "-cp", classpath, str(AVRO_RESOLVE)], check=True)
    readers = [READER]
    for text in ("", "a", "\u00ff", "\u0100\u00ff", "\u20ac", "\x00\x7f\x80"):
        readers.append({**READER, "fields": [READER["fields"][0], {"name": "b", "type": "bytes", "default": text},
                                             {"name": "u", "type": ["bytes", "string"], "default": text}]})
    lines = "".join(f"{json.dumps(WRITER)}\t{json.dumps(r)}\t{_datum(1).hex()}\n" for r in readers)
    out = subprocess.run(["java", "-cp", classpath, "AvroResolve"], input=lines, capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert len(out) == len(readers) and not any(line.startswith("ERROR") for line in out), out
    assert _as_bytes(json.loads(out[0])) == JAVA
    for reader, java in zip(readers[1:], out[1:], strict=True):
        want = _as_bytes(json.loads(java))
        rows, types = typed_rows(Registry(_state([(3, WRITER), (7, reader)])), "t")
        columns = rows.array_columns(*arrays([ArrayRow(None, b"\0\0\0\0\3" + _datum(1), [])]), types)
        (got,) = columns[1].to_pylist()
        assert got == {"n": 1, "b": want["b"], "u": {"member0": want["u"], "member1": None}}, (reader, java)
