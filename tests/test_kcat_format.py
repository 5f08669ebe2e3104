"""`kfs cat -f FMT` prints what `kcat -C -f FMT` prints for the same records, byte for byte.

The answers are kcat's own (tests/kcat_oracle.py): asked afresh from kcat and librdkafka's mock
cluster when kcat is installed (CI installs it), and kept in tests/fixtures/kcat/ for machines without.
"""

from __future__ import annotations

from pathlib import Path

import kcat_oracle
import pytest
from conftest import GOLDEN_PARTITIONS, golden_logdir, run_kfs

from kfs.cli.main import main
from kfs.record import Record
from kfs.views import plain_runs
from kfs.views.kcat_format import BadFormat, KcatFormat


def _sources() -> list:
    live = pytest.param("kcat", marks=pytest.mark.skipif(not kcat_oracle.kcat_available(),
                                                         reason="kcat is not installed (apt-get install kcat)"))
    return ["kept", live]


@pytest.fixture(scope="module", params=_sources())
def answers_and_logdir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    answers = kcat_oracle.load() if request.param == "kept" else kcat_oracle.ask_kcat()
    logdir = tmp_path_factory.mktemp(f"kcat-{request.param}")
    kcat_oracle.write_log(logdir, answers)
    return answers, logdir


@pytest.mark.parametrize("compiled", [True, False], ids=["walker", "python"])
def test_every_format_prints_what_kcat_prints(answers_and_logdir: tuple[kcat_oracle.Answers, Path],
                                              capsysbinary: pytest.CaptureFixture[bytes],
                                              monkeypatch: pytest.MonkeyPatch, compiled: bool) -> None:
    """`kfs cat` run in this process (a process per format took minutes; the command as users run it
    is in the tests below), with the compiled walker's kcat mode (render_kcat.c) and without it."""
    if not compiled:
        monkeypatch.setattr(plain_runs, "_walk_v2_run", None)
    elif not plain_runs.available():
        pytest.skip("extension not built")
    answers, logdir = answers_and_logdir
    compared = 0
    for (topic, fmt, null_as_word), expected in answers.printed.items():
        if fmt == "-J":
            continue  # (below)
        if null_as_word and topic == "fmt":
            continue  # kcat -Z prints NULL for an empty key or value too: kfs prints them empty (below)
        code = main(["cat", str(logdir), f"{topic}-0", "-f", fmt, *(["--null", "NULL"] if null_as_word else [])])
        out, err = capsysbinary.readouterr()
        assert code == 0, err
        assert out == expected, (topic, fmt, null_as_word)
        compared += 1
    assert compared == len(kcat_oracle.FORMATS) * 3


@pytest.mark.parametrize("compiled", [True, False], ids=["walker", "python"])
def test_the_json_envelope_is_kcats(answers_and_logdir: tuple[kcat_oracle.Answers, Path],
                                    capsysbinary: pytest.CaptureFixture[bytes], monkeypatch: pytest.MonkeyPatch,
                                    compiled: bool) -> None:
    """`kfs cat -J` prints kcat -J's lines byte for byte: its escapes (control characters as \\u00XX
    in capitals, bytes that are not UTF-8 as they are), headers as a flat list, null keys and values,
    and the broker id from the log dir's meta.properties (the mock cluster's broker is 1); with the
    compiled walker's envelope (render_kcat.c) and without it."""
    if not compiled:
        monkeypatch.setattr(plain_runs, "_walk_v2_run", None)
    elif not plain_runs.available():
        pytest.skip("extension not built")
    answers, logdir = answers_and_logdir
    for topic in answers.records:
        assert main(["cat", str(logdir), f"{topic}-0", "-J"]) == 0
        assert capsysbinary.readouterr().out == answers.printed[topic, "-J", False], topic


def test_the_json_envelope_without_a_broker_id_and_with_count(tmp_path: Path) -> None:
    kcat_oracle.write_log(tmp_path, kcat_oracle.load())
    (tmp_path / "meta.properties").unlink()
    done = run_kfs("cat", str(tmp_path), "fmtz-0", "--offset", "1", "--count", "1", "-J")
    assert done.returncode == 0
    assert done.stdout.startswith(b'{"topic":"fmtz","partition":0,"offset":1,"tstype":"create","ts":')
    assert done.stdout.endswith(b',"broker":-1,"headers":["n",null],"key":null,"payload":"v-with-null-key"}\n')
    assert b"cannot go with" in run_kfs("cat", str(tmp_path), "fmtz-0", "-J", "-f", "%o").stderr


def test_kept_answers_cover_every_format() -> None:
    """The kept answers are for the formats the oracle asks today (rewrite them after changing it)."""
    kept = kcat_oracle.load()
    assert {fmt for _, fmt, _ in kept.printed} == {*kcat_oracle.FORMATS, "-J"}


def test_null_and_empty_keys_and_values_differ_with_null_text(tmp_path: Path) -> None:
    kcat_oracle.write_log(tmp_path, kcat_oracle.load())
    done = run_kfs("cat", str(tmp_path), "fmt-0", "--null", "NULL", "-f", "%o:%k:%s:%K:%S\\n")
    lines = done.stdout.split(b"\n")
    assert lines[1] == b"1::empty key:0:9"  # an empty key: empty, as stored (kcat -Z: NULL)
    assert lines[2] == b"2:NULL:no key at all:-1:13"  # a null key
    assert lines[3] == b"3:k3:NULL:2:-1"  # a null value (a tombstone)


def test_count_and_offset_select_records_as_for_json_lines(tmp_path: Path) -> None:
    answers = kcat_oracle.load()
    kcat_oracle.write_log(tmp_path, answers)
    done = run_kfs("cat", str(tmp_path), "fmt-0", "--offset", "2", "--count", "3", "-f", "%o,")
    assert done.stdout == b"2,3,4,"


@pytest.mark.parametrize(("fmt", "says"), [("bad %x", "%x, which kcat does not know"),
                                           ("ends in %", "ends in a lone %")])
def test_a_format_kcat_refuses_is_one_sentence(tmp_path: Path, fmt: str, says: str) -> None:
    kcat_oracle.write_log(tmp_path, kcat_oracle.load())
    done = run_kfs("cat", str(tmp_path), "fmt-0", "-f", fmt)
    assert done.returncode == 1 and done.stdout == b""
    assert done.stderr.decode().count("\n") == 1 and says in done.stderr.decode()


def test_f_does_not_go_with_raw_or_value(tmp_path: Path) -> None:
    kcat_oracle.write_log(tmp_path, kcat_oracle.load())
    for other in ("raw", "value"):
        done = run_kfs("cat", str(tmp_path), "fmt-0", "-f", "%o", "--format", other)
        assert done.returncode != 0 and b"cannot go with --format" in done.stderr


def test_escapes_make_the_bytes_kcat_makes() -> None:
    """kcat's escapes, where its answer is no NUL: hex after \\x only when it starts with 0-9 (all its hex
    digits, the low byte kept), decimal, octal or 0x-hex after \\, any other character itself."""
    record = Record(5, 7, "CreateTime", b"K", b"V", [])
    cases = {"\\x41": b"A", "\\x414": b"\x14", "\\xff": b"ff", "\\xZ": b"Z", "\\65": b"A", "\\0101": b"A",
             "\\0x41": b"A", "\\09": b"\x009", "\\q": b"q", "\\\\": b"\\", "a\\": b"a\\", "\\x0x42": b"B",
             "\\x99999999999999999999": b"\xff", "%%%o": b"%5"}
    for fmt, expected in cases.items():
        assert KcatFormat(fmt, "t", 0).render([record]) == expected, fmt
    with pytest.raises(BadFormat):
        KcatFormat("%", "t", 0)


@pytest.mark.parametrize("partition", GOLDEN_PARTITIONS)
def test_records_are_the_json_lines_records_on_kafka_written_logs(partition: str,
                                                                 capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    """On every Kafka-written partition (every codec, transactions, compaction, legacy formats) and
    every isolation and control setting, -f prints the records the JSON lines show: their offsets,
    timestamps, key lengths and values (internal topics' as stored: --decode raw's lines)."""
    import base64
    import json

    def stored(field: object) -> bytes:
        if field is None:
            return b"NULL"
        if isinstance(field, dict):
            return base64.b64decode(field["base64"])
        return str(field).encode()

    logdir = golden_logdir(partition)
    for isolation in ("read_uncommitted", "read_committed"):
        for control in ("hide", "show"):
            settings = ["--isolation", isolation, "--control", control]
            assert main(["cat", logdir, partition, *settings, "--decode", "raw"]) == 0
            lines = [json.loads(line) for line in capsysbinary.readouterr().out.splitlines()]
            # %R frames each value: the values may hold any byte
            assert main(["cat", logdir, partition, *settings, "--null", "NULL", "-f", "%o %T %K %S %R%s"]) == 0
            out = capsysbinary.readouterr().out
            got = []
            while out:
                offset, timestamp, key_length, value_length, rest = out.split(b" ", 4)
                framed = int.from_bytes(rest[:4], "big", signed=True)
                value = rest[4:4 + max(framed, 4 if framed < 0 else 0)]
                out = rest[4 + len(value):]
                got.append((int(offset), int(timestamp), int(key_length), int(value_length), framed, value))
            assert got == [(r["offset"], r["timestamp"], -1 if r["key"] is None else len(stored(r["key"])),
                            -1 if r["value"] is None else len(stored(r["value"])),
                            -1 if r["value"] is None else len(stored(r["value"])), stored(r["value"]))
                           for r in lines], (partition, isolation, control)
