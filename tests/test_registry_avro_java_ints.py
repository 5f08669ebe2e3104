"""Avro ints (and union and enum indexes) as Apache Avro's Java reader reads them, the console consumer's
answer: BinaryDecoder.readInt takes at most 5 bytes and keeps the low 32 bits of the varint (the zigzag of
those), and refuses a longer one ("Invalid int encoding"); fastavro reads the same bytes as a long and
shows another number. kfs shows Java's number, or an error sentence where Java refuses, in both the
compiled renderer and the Python path."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from kfs._native.registry import render_avro
from kfs.registry.avro import AvroDatumError, AvroRenderer

SCHEMA = {"type": "record", "name": "R", "fields": [
    {"name": "i", "type": "int"}, {"name": "u", "type": ["null", "int"]},
    {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}}]}
TOO_LONG = "the datum holds an int of more than 5 bytes (Java: Invalid int encoding)"

# (datum of SCHEMA, what Avro's Java reader printed: java/AvroJson.java run with Debian's libavro-java 1.8.2,
# GenericDatumReader then JsonEncoder; None where it threw "java.io.IOException: Invalid int encoding")
JAVA = [
    (b"\x80\x80\x80\x80\x10\x00\x00", {"i": 0, "u": None, "e": "A"}),  # 2^31 written as a long
    (b"\x81\x80\x80\x80\x10\x00\x00", {"i": -1, "u": None, "e": "A"}),  # -2^31 - 1
    (b"\x8a\x80\x80\x80\x40\x02\x02\x00", {"i": 5, "u": {"int": 1}, "e": "A"}),  # 2^33 + 5
    (b"\xfe\xff\xff\xff\x1f\x00\x00", {"i": 2147483647, "u": None, "e": "A"}),  # fastavro: 4294967295
    (b"\xff\xff\xff\xff\x0f\x00\x00", {"i": -2147483648, "u": None, "e": "A"}),  # in range: both read it
    (b"\xff\xff\xff\xff\x7f\x00\x00", {"i": -2147483648, "u": None, "e": "A"}),
    (b"\x02\x82\x80\x80\x80\x10\x04\x00", {"i": 1, "u": {"int": 2}, "e": "A"}),  # union index 2^32 + 1 -> 1
    (b"\x02\x00\x82\x80\x80\x80\x10", {"i": 1, "u": None, "e": "B"}),  # enum index 2^32 + 1 -> 1
    (b"\x80\x80\x80\x80\x80\x40\x00\x00", None),  # 2^40: six bytes
    (b"\x80\x80\x80\x80\x80\x00\x00\x00", None),  # 0 in six bytes
]


def java_answer(renderer: AvroRenderer, datum: bytes, python: bool) -> object:
    try:
        return json.loads(renderer.render_python(datum) if python else renderer.render(datum))
    except AvroDatumError as e:
        return str(e)


@pytest.mark.parametrize("python", [False, True], ids=["compiled", "python"])
def test_ints_read_as_javas_reader_reads_them(python: bool) -> None:
    renderer = AvroRenderer(json.dumps(SCHEMA))
    for datum, expected in JAVA:
        assert java_answer(renderer, datum, python) == (TOO_LONG if expected is None else expected), datum.hex()


@pytest.mark.skipif(render_avro is None, reason="the compiled extension is not built")
def test_the_compiled_renderer_answers_them_itself() -> None:
    """A 5-byte int is the compiled renderer's (not declined to the Python path); a longer one is declined
    and the Python path has the sentence."""
    renderer = AvroRenderer(json.dumps(SCHEMA))
    for datum, expected in JAVA:
        text = render_avro(renderer.program, datum)  # type: ignore[misc]
        assert (text is None) == (expected is None), datum.hex()
        if text is not None:
            assert json.loads(text) == expected


def test_a_datum_walked_first_reads_them_so_too() -> None:
    """A recursive schema's datums are walked first (kfs.registry.avro._Skipper): the same numbers."""
    renderer = AvroRenderer(json.dumps({"type": "record", "name": "N", "fields": [
        {"name": "v", "type": "int"}, {"name": "next", "type": ["null", "N"]}]}))
    assert renderer.checked_first
    datum = b"\xfe\xff\xff\xff\x1f\x02\x81\x80\x80\x80\x10\x00"
    for python in (False, True):
        assert java_answer(renderer, datum, python) == {"v": 2147483647, "next": {"N": {"v": -1, "next": None}}}
        assert java_answer(renderer, b"\x00\x02\x80\x80\x80\x80\x80\x01\x00", python) == TOO_LONG


JAVA_CLASSPATH = ["/usr/share/java/avro.jar", "/usr/share/java/jackson-core-asl.jar",
                  "/usr/share/java/jackson-mapper-asl.jar", "/usr/share/java/slf4j-api.jar"]
AVRO_JSON = Path(__file__).parent / "fixtures" / "schema-registry" / "java" / "AvroJson.java"


def varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


@pytest.mark.skipif(shutil.which("javac") is None or not all(Path(j).exists() for j in JAVA_CLASSPATH),
                    reason="no javac or Debian's libavro-java")
def test_random_ints_against_javas_reader(tmp_path: Path) -> None:
    """Random varints of 1 to 7 bytes in the int, union-index and enum-index places, read by Avro's Java
    library itself (java/AvroJson.java) and by kfs: the same JSON, or an error on both sides."""
    rnd = random.Random(24)

    def some_int() -> bytes:  # canonical varints up to 2^36, 5 bytes past 32 bits, random ones of 1 to 7 bytes
        kind = rnd.random()
        if kind < 0.4:
            return varint(rnd.randrange(1 << rnd.choice([7, 31, 32, 36])))
        if kind < 0.7:
            return bytes(rnd.randrange(0x80, 0x100) for _ in range(4)) + bytes([rnd.randrange(0x10, 0x80)])
        return bytes(rnd.randrange(0x80, 0x100) for _ in range(rnd.randint(0, 6))) + bytes([rnd.randrange(0x80)])

    # union and enum indexes: 0 and 1, 1 and 0 in 5 bytes past 32 bits, 1 in 6 bytes
    indexes = [b"\x00", b"\x02", varint((1 << 32) + 2), varint(1 << 32), b"\x82\x80\x80\x80\x80\x00"]
    datums = []
    for _ in range(400):
        union = rnd.choice(indexes)
        datums.append(some_int() + union + (some_int() if union[0] == 2 else b"") + rnd.choice(indexes))
    classpath = ":".join([str(tmp_path), *JAVA_CLASSPATH])
    subprocess.run(["javac", "-nowarn", "-d", str(tmp_path), "-cp", classpath, str(AVRO_JSON)], check=True)
    text = json.dumps(SCHEMA)
    out = subprocess.run(["java", "-cp", classpath, "AvroJson"], input="".join(f"{text}\t{d.hex()}\n" for d in datums),
                         capture_output=True, text=True, check=True).stdout.splitlines()
    assert len(out) == len(datums)
    renderer = AvroRenderer(text)
    for datum, java in zip(datums, out, strict=True):
        for python in (False, True):
            ours = java_answer(renderer, datum, python)
            if java.startswith("ERROR"):
                assert isinstance(ours, str), (datum.hex(), java, ours)
            else:
                assert ours == json.loads(java), (datum.hex(), java, ours)
    # (the draw holds both kinds, and ints past 32 bits that Java reads: not only the easy cases)
    fastavro_differs = sum(1 for d, j in zip(datums, out, strict=True) if not j.startswith("ERROR") and
                           any(b >= 0x10 and all(x >= 0x80 for x in d[k - 4:k]) for k, b in enumerate(d) if k >= 4))
    assert sum(j.startswith("ERROR") for j in out) > 50 and fastavro_differs > 50
