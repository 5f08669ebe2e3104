"""`kfs cat -f` in bounded memory whatever the format, and numbers past what Python's int() reads
saturating as kcat's do (issue 29 item 5).

A format repeating `%s` (or a long literal, or a long `--null`, over a batch of many records) made
the whole batch's output in memory: 3.1 GB for one 1 MiB value, a MemoryError under a limit, where
kcat writes token by token. Now a record whose output is large is written a token at a time (each
token's bytes are already in memory: the value, the literal), the rest a few hundred KiB at a time,
and the compiled walker hands a batch whose output passes its limit to that Python path. The peak
RSS of `kfs cat` is measured by a wrapper process (RUSAGE_CHILDREN) while hundreds of MB go through
a pipe and are checked by their CRC.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from conftest import KFS, run_kfs, v2_batch, write_segment

from kfs.views.kcat_format import CHUNK, KcatFormat, broker_id

PEAK_LIMIT = 96 << 20  # kfs cat's RSS for these logs with a plain format: ~30 MB
MEMORY_LIMIT = 1 << 30  # RLIMIT_AS: a limit the old renderings passed, so that they fail by measure, not by crash
T0 = 1_700_000_000_000
VALUE = bytes(range(256)) * 4096  # 1 MiB
SMALL_VALUE = bytes(range(256)) * 800  # 200 KiB: a batch the compiled walker's first window (256 KiB) holds
LITERAL = "x" * 100_000


def _write(logdir: Path, name: str, batches: list[list[tuple[bytes | None, bytes | None]]], codec: int = 0) -> None:
    directory = logdir / name
    directory.mkdir(parents=True)
    appends, offset = [], 0
    for batch in batches:
        records = [(offset + i, T0 + offset + i, key, value, []) for i, (key, value) in enumerate(batch)]
        appends.append([(v2_batch(offset, records, codec), records)])
        offset += len(batch)
    write_segment(str(directory), 0, appends)


@pytest.fixture(scope="module")
def logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("kcat-bounds")
    _write(root, "big-0", [[(b"k", VALUE)]])  # one batch larger than the walker's first window
    _write(root, "bigz-0", [[(b"k", VALUE)]], codec=1)  # gzip: always the Python path
    _write(root, "small-0", [[(b"k", SMALL_VALUE)] for _ in range(4)])  # batches the walker takes
    _write(root, "many-0", [[(b"k", b"v")] * 2000])  # many records in one small batch
    _write(root, "nulls-0", [[(b"k", None)] * 2000])
    return root


def _peak_run(*args: str, expect: tuple[int, int]) -> None:
    """`kfs ARGS` with its output's length and CRC-32 checked as it streams, its peak RSS under PEAK_LIMIT."""
    kfs = [KFS] if KFS else [sys.executable, "-m", "kfs.cli.main"]
    wrapper = ("import resource, subprocess, sys; done = subprocess.run(sys.argv[1:]); "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
               "sys.exit(done.returncode)")

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    proc = subprocess.Popen([sys.executable, "-c", wrapper, *kfs, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, preexec_fn=limited)
    assert proc.stdout is not None and proc.stderr is not None
    length, crc = 0, 0
    while chunk := proc.stdout.read(1 << 20):
        length += len(chunk)
        crc = zlib.crc32(chunk, crc)
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 0, err
    *said, peak_kib = err.strip().splitlines()
    assert not said, said
    assert (length, crc) == expect, args
    assert int(peak_kib) * 1024 < PEAK_LIMIT, f"{args[:3]}: peak RSS {int(peak_kib) >> 10} MiB"


def _expected(pieces: list[bytes], times: int = 1) -> tuple[int, int]:
    length, crc = 0, 0
    for _ in range(times):
        for piece in pieces:
            length += len(piece)
            crc = zlib.crc32(piece, crc)
    return length, crc


@pytest.mark.parametrize("partition", ["big-0", "bigz-0"])
@pytest.mark.parametrize("tokens", [300, 700])  # (up to 512 parts the compiled walker may take the batch)
def test_a_format_repeating_s_streams_the_value(logdir: Path, partition: str, tokens: int) -> None:
    _peak_run("cat", str(logdir), partition, "-f", "%s" * tokens, expect=_expected([VALUE], tokens))
    _peak_run("cat", str(logdir), partition, "-f", "%s" * tokens, "--count", "1", expect=_expected([VALUE], tokens))


def test_batches_the_walker_takes_are_handed_back_when_their_output_is_large(logdir: Path) -> None:
    _peak_run("cat", str(logdir), "small-0", "-f", "%k%s" * 255, expect=_expected([b"k", SMALL_VALUE], 255 * 4))


def test_a_long_literal_or_null_text_over_many_records_is_written_a_record_at_a_time(logdir: Path) -> None:
    lines = [b"%d" % i + LITERAL.encode() + b"\n" for i in range(2000)]
    _peak_run("cat", str(logdir), "many-0", "-f", "%o" + LITERAL + "\\n", expect=_expected(lines))
    _peak_run("cat", str(logdir), "nulls-0", "-f", "%s%s", "--null", LITERAL,
              expect=_expected([LITERAL.encode()], 2 * 2000))


def test_pieces_are_the_rendering() -> None:
    """What is written a piece at a time is what the one-bytes rendering gives (the oracle)."""
    from kfs.record import Record

    records = [Record(i, T0 + i, "CreateTime", None if i % 3 == 0 else b"key%d" % i,
                      None if i % 4 == 0 else bytes([i % 256]) * (i * 997 % 300_000), [("h", b"v"), ("n", None)])
               for i in range(60)]
    largest = max(len(r.key or b"") + len(r.value or b"") + 16 for r in records)
    for fmt in ("%s", "%k|%s|%h|%K|%S|%R|%T|%o\\n", "%s" * 9 + LITERAL, "%o %t %p\\n", "%s%s", LITERAL + "%o"):
        form = KcatFormat(fmt, "t", 3, null=b"NULL")
        whole = b"".join(form.template % form._values(r) for r in records)
        pieces = list(form.pieces(records))
        assert b"".join(pieces) == whole, fmt
        # a piece: records up to CHUNK, a record's tokens, or (a format holding each field at most once, and a
        # few KiB else) a group of 64 records, at most their own bytes and 4 KiB each
        assert max(map(len, pieces)) <= max(2 * CHUNK, 64 * (largest + 4096)), fmt
    assert max(map(len, KcatFormat("%s" * 9 + LITERAL, "t", 3).pieces(records))) <= 2 * CHUNK  # (records, or tokens)


# ---- numbers past Python's int() limit -----------------------------------------------------------------

DIGITS = "9" * 5000


def test_escapes_past_ulong_saturate_as_strtoul_does() -> None:
    from kfs.record import Record

    record = Record(5, 7, "CreateTime", b"K", b"V", [])
    for fmt in ("\\" + DIGITS, "\\x0" + "f" * 5000, "\\0" + "7" * 5000, "\\0x" + "F" * 5000, "\\1" + "0" * 25):
        assert KcatFormat(fmt + "|", "t", 0).render([record]) == b"\xff|", fmt[:6]
    assert KcatFormat("\\0" * 3 + "\\" + "0" * 5000 + "101|", "t", 0).render([record]) == b"\0\0\0A|"


def test_escapes_past_the_int_limit_on_the_command_line(logdir: Path) -> None:
    done = run_kfs("cat", str(logdir), "many-0", "--count", "2", "-f", "\\" + DIGITS)
    assert done.returncode == 0 and done.stdout == b"\xff\xff", done.stderr


@pytest.mark.parametrize(("written", "expected"), [
    (DIGITS, -1), ("-" + DIGITS, -1), ("0" * 5000 + "7", 7), ("2147483647", 2147483647), ("2147483648", -1),
    ("-2147483648", -2147483648), ("+3", 3), ("\u00b2", -1), ("\u0663", 3), (" 12 ", 12), ("1_000", -1)])
def test_a_broker_id_is_what_kafka_reads_else_unknown(tmp_path: Path, written: str, expected: int) -> None:
    """Kafka reads broker.id / node.id with Integer.parseInt (an int32; the broker refuses anything else
    at start); kcat -J's broker is an int32 librdkafka got from the cluster, -1 where unknown: an id no
    broker could have run with is unknown (-1), never a traceback."""
    (tmp_path / "meta.properties").write_text(f"version=0\nbroker.id={written}\n", encoding="utf-8")
    assert broker_id(str(tmp_path)) == expected


def test_a_huge_broker_id_on_the_command_line(logdir: Path, tmp_path: Path) -> None:
    import shutil

    shutil.copytree(logdir / "many-0", tmp_path / "many-0")
    (tmp_path / "meta.properties").write_text(f"broker.id={DIGITS}\n")
    done = run_kfs("cat", str(tmp_path), "many-0", "--count", "1", "-J")
    assert done.returncode == 0 and b',"broker":-1,' in done.stdout, done.stderr


@pytest.mark.parametrize("args", [["cat", "--offset", DIGITS], ["cat", "--time", DIGITS],
                                  ["locate", "--offset", DIGITS], ["cat", "--offset", "-" + DIGITS]])
def test_offsets_and_times_past_the_int_limit_are_one_sentence(logdir: Path, args: list[str]) -> None:
    done = run_kfs(args[0], str(logdir), "many-0", *args[1:])
    err = done.stderr.decode()
    assert done.returncode == 1 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert len(err) < 300, err  # (the number is not echoed in full)


def test_groups_at_past_the_int_limit(tmp_path: Path) -> None:
    import offsets_log as ol

    writer = ol.PartitionWriter(str(tmp_path), 0)
    writer.append([(1000, ol.offset_commit_key("g", "t", 0), ol.offset_commit_value(5, "", 1000, 0))])
    writer.close()
    done = run_kfs("groups", str(tmp_path), "--at", DIGITS)
    assert done.returncode == 0 and b"(out of range)" in done.stdout and b"GROUP g" in done.stdout, done.stderr
