"""`kfs cat -J -s avro` and `-f FMT -s avro` (kfs.registry.kcat): kcat's schema-registry Avro
deserializer (`kcat -s avro -r URL`: kcat.c's `-s`, json.c and format.c in edenhill/kcat 1.7) over the
golden records of tests/fixtures/schema-registry, with the schemas from the log dir's `_schemas`.

kcat -J writes a decoded key or payload verbatim as JSON followed by `key_schema_id` / `value_schema_id`,
or `null` followed by `key_error` / `payload_error`; -f's %k / %s print the decoded JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_kfs

FIXTURE = Path(__file__).parent / "fixtures" / "schema-registry"
LOGDIR = str(FIXTURE / "logdir")
AVRO_TOPICS = ("orders", "users", "customers", "legacy", "gone", "newer")
NOT_FRAMED = "message not produced with Schema-Registry Avro framing"  # (kcat's words: avro.c)


def golden(topic: str) -> list[dict]:
    return json.loads((FIXTURE / "golden" / f"{topic}.json").read_text())


def lines(*args: str) -> tuple[list[dict], str]:
    done = run_kfs("cat", LOGDIR, *args)
    assert done.returncode == 0, done.stderr
    text = done.stdout.decode("utf-8", "surrogateescape")  # (-J without -s: values as stored, not UTF-8)
    return [json.loads(line) for line in text.splitlines()], done.stderr.decode()


@pytest.mark.parametrize("topic", AVRO_TOPICS)
def test_json_envelope_carries_the_decoded_payload_and_its_schema_id(topic: str) -> None:
    decoded, _ = lines(f"{topic}-0", "-J", "-s", "value=avro")
    plain, _ = lines(f"{topic}-0", "-J")
    expected = golden(topic)
    assert len(decoded) == len(plain) == len(expected)
    for got, raw, want in zip(decoded, plain, expected, strict=True):
        assert got["offset"] == want["offset"]
        if want.get("value") is None:
            assert got["payload"] is None and "value_schema_id" not in got and "payload_error" not in got
        else:
            assert got["payload"] == want["value"]
            assert got["value_schema_id"] == want["value_schema"]["id"]
        # the rest of the envelope is -J's, keys included (only values asked for)
        assert {k: v for k, v in got.items() if k not in ("payload", "value_schema_id")} == \
            {k: v for k, v in raw.items() if k != "payload"}
        assert list(got)[-2:] == (["payload", "value_schema_id"] if want.get("value") is not None else
                                  ["key", "payload"])


def test_s_avro_decodes_keys_too() -> None:
    decoded, stderr = lines("users-0", "-J", "-s", "avro")
    for got, want in zip(decoded, golden("users"), strict=True):
        assert got["key"] == want["key"] and got["key_schema_id"] == want["key_schema"]["id"]
        keys = list(got)
        assert keys[keys.index("key") + 1] == "key_schema_id"
    assert stderr == ""


@pytest.mark.parametrize("topic", AVRO_TOPICS)
def test_format_s_prints_the_decoded_json(topic: str) -> None:
    done = run_kfs("cat", LOGDIR, f"{topic}-0", "-f", "%o:%s\\n", "-s", "value=avro")
    assert done.returncode == 0
    for line, want in zip(done.stdout.decode("utf-8").splitlines(), golden(topic), strict=True):
        offset, _, value = line.partition(":")
        assert int(offset) == want["offset"]
        assert (json.loads(value) if value else None) == want.get("value")


def test_payloads_that_do_not_decode_say_why_and_the_stream_goes_on() -> None:
    decoded, stderr = lines("mixed-0", "-J", "-s", "value=avro")
    expected = golden("mixed")
    assert [d["offset"] for d in decoded] == [e["offset"] for e in expected]
    # kcat's answer where the mount's differs: a JSON Schema id is not Avro, and a value not framed
    # (text, too short) is kcat's "not produced with Schema-Registry Avro framing"
    otherwise = {4: NOT_FRAMED, 7: "schema id 6: a JSON schema, not Avro (-s avro decodes Avro)", 8: NOT_FRAMED}
    for got, want in zip(decoded, expected, strict=True):
        error = otherwise.get(got["offset"], want.get("value_decode_error"))
        if error is None:
            assert got["payload"] == want["value"] and "payload_error" not in got
            continue
        assert got["payload"] is None and "value_schema_id" not in got and got["payload_error"].startswith(error)
        assert (f"% ERROR: Failed to deserialize value in message in mixed [0] at offset {got['offset']}: "
                f"{got['payload_error']}\n") in stderr
    assert stderr.count("% ERROR:") == sum(1 for d in decoded if "payload_error" in d) == 10


def test_a_protobuf_payload_is_not_avro() -> None:
    decoded, _ = lines("payments-0", "-J", "-s", "avro")
    assert decoded and all(d["payload"] is None and d["payload_error"] ==
                           "schema id 8: a PROTOBUF schema, not Avro (-s avro decodes Avro)" for d in decoded)


def test_format_prints_a_value_that_does_not_decode_as_stored() -> None:
    raw = run_kfs("cat", LOGDIR, "mixed-0", "-f", "%o %s\\n")
    decoded = run_kfs("cat", LOGDIR, "mixed-0", "-f", "%o %s\\n", "-s", "value=avro")
    assert decoded.returncode == 0
    raw_lines, decoded_lines = raw.stdout.split(b"\n"), decoded.stdout.split(b"\n")
    assert raw_lines[1:] == decoded_lines[1:] != []  # (offset 0 decodes; the rest do not, or are not framed)
    assert b"% ERROR: Failed to format message in mixed [0] at offset 1: Avro/Schema-registry message " \
           b"deserialization: schema id 999: not in the schema registry\n" in decoded.stderr


@pytest.mark.parametrize("args, message", [
    (["-s", "avro"], "-s (kcat's deserializer) goes with -J or -f."),
    (["-J", "-s", "key=i"], "kcat's pack-str deserializers are not supported"),
    (["-J", "-s", "avro", "--decode", "raw"], "cannot go with --decode raw"),
])
def test_s_refuses_what_it_does_not_do(args: list[str], message: str) -> None:
    done = run_kfs("cat", LOGDIR, "orders-0", *args)
    assert done.returncode != 0 and message in done.stderr.decode() and "Traceback" not in done.stderr.decode()


def test_s_avro_without_a_registry_topic_says_so(tmp_path: Path) -> None:
    done = run_kfs("cat", LOGDIR, "orders-0", "-J", "-s", "avro", "--schemas-topic", "no_such_topic")
    assert done.returncode != 0 and "-s avro needs the schema registry's schemas" in done.stderr.decode()


def test_r_is_accepted_and_not_used() -> None:
    with_r = run_kfs("cat", LOGDIR, "orders-0", "-J", "-s", "value=avro", "-r", "http://localhost:8081")
    without = run_kfs("cat", LOGDIR, "orders-0", "-J", "-s", "value=avro")
    assert with_r.returncode == 0 and with_r.stdout == without.stdout
