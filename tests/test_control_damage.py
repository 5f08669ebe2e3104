"""Damaged transaction markers are damage like any other batch's (issue 29 item 2).

A control batch whose marker has a short or null key or value (a valid batch: its CRC holds; Kafka's
`ControlRecordType.parse` and `EndTransactionMarker.deserializeValue` refuse it) is met by the reads
that parse markers (read_committed, control=show): one sentence naming the file and position, after
every record before it. A control batch whose CRC fails is met by every read that reaches it (a
consumer checks every batch's CRC, markers too). read_committed decides the damaged marker's
transaction from the `.txnindex` and follows the markers around it, so a read from past the damage is
whole. The mount answers as `kfs cat` does under read_committed and control=show: only the views reaching the
damage fail, after the lines before it (every one, as for any damage through the mount).
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
from pathlib import Path

import crc32c
import pytest
from conftest import LOGDIRS, read_jsonl, run_kfs
from mounts import mounted, needs_fuse

PARTITION = "payments-0"
SOURCE = Path(LOGDIRS[1]) / PARTITION
SEGMENT = "00000000000000000000.log"
COMMIT_AT = 4209  # position of the COMMIT marker of producer 4001 at offset 24 (it closes offsets 12-23)
MARKER_OFFSET = 24
NEXT_SEGMENT = 119  # the base offset of the segment after the damaged one


def _varint(v: int) -> bytes:
    u = (v << 1) ^ (v >> 63)
    out = bytearray()
    while True:
        out.append((u & 0x7F) | (0x80 if u > 0x7F else 0))
        u >>= 7
        if not u:
            return bytes(out)


def _marker_record(key: bytes | None, value: bytes | None, headers: list[tuple[bytes, bytes | None]]) -> bytes:
    body = b"\x00" + _varint(0) + _varint(0)
    for field in (key, value):
        body += _varint(-1) if field is None else _varint(len(field)) + field
    body += _varint(len(headers))
    for name, v in headers:
        body += _varint(len(name)) + name + (_varint(-1) if v is None else _varint(len(v)) + v)
    return _varint(len(body)) + body


# Markers of the original's size (78 bytes: a 4-byte key, a 6-byte value, no headers), so that no index
# entry moves: a header pads what the key or value lost.
BROKEN_MARKERS = {
    "short key": _marker_record(b"\x00\x00", b"\x00\x00\x00\x00\x00\x07", [(b"", None)]),
    "null key": _marker_record(None, b"\x00\x00\x00\x00\x00\x07", [(b"ab", None)]),
    "short value": _marker_record(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00", [(b"", None)]),
}


def _copy(tmp_path: Path) -> Path:
    logdir = tmp_path / "logdir"
    shutil.copytree(SOURCE, logdir / PARTITION)
    shutil.copy(Path(LOGDIRS[1]) / "meta.properties", logdir)
    return logdir


def _rewrite_marker(logdir: Path, record: bytes) -> None:
    """The marker batch at COMMIT_AT with `record` instead of its own, its CRC made right."""
    path = logdir / PARTITION / SEGMENT
    data = bytearray(path.read_bytes())
    length, = struct.unpack_from(">i", data, COMMIT_AT + 8)
    end = COMMIT_AT + 12 + length
    assert end - (COMMIT_AT + 61) == len(record), "the marker keeps its size"
    data[COMMIT_AT + 61:end] = record
    struct.pack_into(">I", data, COMMIT_AT + 17, crc32c.crc32c(bytes(data[COMMIT_AT + 21:end])))
    path.write_bytes(bytes(data))


def _break_crc(logdir: Path) -> None:
    path = logdir / PARTITION / SEGMENT
    data = bytearray(path.read_bytes())
    data[COMMIT_AT + 77] ^= 0x01  # the coordinator epoch's last byte: the CRC no longer holds
    path.write_bytes(bytes(data))


def _healthy(*settings: str) -> list[bytes]:
    done = run_kfs("cat", LOGDIRS[1], PARTITION, *settings)
    assert done.returncode == 0
    return done.stdout.splitlines(keepends=True)


def _offset(line: bytes) -> int:
    return json.loads(line)["offset"]


def _before(lines: list[bytes], offset: int) -> bytes:
    return b"".join(line for line in lines if _offset(line) < offset)


def _from(lines: list[bytes], offset: int) -> bytes:
    return b"".join(line for line in lines if _offset(line) >= offset)


def _one_sentence(done: subprocess.CompletedProcess, *words: str) -> None:
    err = done.stderr.decode()
    assert done.returncode == 1, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert f"{SEGMENT}: corrupt batch at position {COMMIT_AT}" in err, err
    for word in words:
        assert word in err, err


SETTINGS = {"read_committed": ["--isolation", "read_committed"], "control=show": ["--control", "show"],
            "both": ["--isolation", "read_committed", "--control", "show"]}


def test_read_committed_with_control_show_lists_every_marker() -> None:
    """Markers are checked where a reader passes them, and never hidden as aborted data: under
    read_committed an ABORT marker lies in its transaction's span, and control=show lists it."""
    golden = Path(__file__).parent / "fixtures" / "kafka-written" / "golden" / PARTITION
    committed = [r["offset"] for r in read_jsonl(golden / "records.read_committed.jsonl")]
    markers = [c["offset"] for c in read_jsonl(golden / "control.jsonl")]
    shown = [_offset(line) for line in _healthy("--isolation", "read_committed", "--control", "show")]
    assert shown == sorted(committed + markers)


@pytest.mark.parametrize("broken", sorted(BROKEN_MARKERS))
def test_a_marker_with_a_short_key_or_value_is_one_sentence_after_the_records_before_it(
        tmp_path: Path, broken: str) -> None:
    logdir = _copy(tmp_path)
    _rewrite_marker(logdir, BROKEN_MARKERS[broken])
    for name, settings in SETTINGS.items():
        done = run_kfs("cat", str(logdir), PARTITION, *settings)
        _one_sentence(done, "key" if "key" in broken else "value")
        assert done.stdout == _before(_healthy(*settings), MARKER_OFFSET), name
        # a read from past the damage is whole: the damaged marker's transaction is the .txnindex's
        after = run_kfs("cat", str(logdir), PARTITION, "--offset", "30", *settings)
        assert after.returncode == 0, (name, after.stderr)
        assert after.stdout == _from(_healthy(*settings), 30), name
        # -f prints the same records (the kcat path)
        kcat = run_kfs("cat", str(logdir), PARTITION, "-f", "%o\\n", *settings)
        _one_sentence(kcat)
        assert kcat.stdout == b"".join(b"%d\n" % _offset(line)
                                       for line in _healthy(*settings) if _offset(line) < MARKER_OFFSET)
    # a read_uncommitted consumer never parses the markers it hides (Kafka's neither): nothing to say
    plain = run_kfs("cat", str(logdir), PARTITION)
    assert plain.returncode == 0 and plain.stdout == b"".join(_healthy()), plain.stderr


def test_a_marker_whose_crc_fails_is_damage_for_every_reader(tmp_path: Path) -> None:
    logdir = _copy(tmp_path)
    _break_crc(logdir)
    for settings in ([], *SETTINGS.values()):
        done = run_kfs("cat", str(logdir), PARTITION, *settings)
        _one_sentence(done, "CRC")
        assert done.stdout == _before(_healthy(*settings), MARKER_OFFSET), settings
        after = run_kfs("cat", str(logdir), PARTITION, "--offset", "30", *settings)
        assert after.returncode == 0 and after.stdout == _from(_healthy(*settings), 30), (settings, after.stderr)
    # --on-corrupt skip: one error line where the marker was, every record after it
    for settings in ([], ["--isolation", "read_committed"]):
        skipped = run_kfs("cat", str(logdir), PARTITION, "--on-corrupt", "skip", *settings)
        assert skipped.returncode == 0 and b"Traceback" not in skipped.stderr, skipped.stderr
        lines = skipped.stdout.splitlines(keepends=True)
        errors = [line for line in lines if b'"error"' in line]
        assert len(errors) == 1 and b"position 4209" in errors[0], errors
        assert b"".join(line for line in lines if line not in errors) == b"".join(_healthy(*settings)), settings
    # before the damage, a read that ends there is whole
    head = run_kfs("cat", str(logdir), PARTITION, "--isolation", "read_committed", "--count", "3")
    assert head.returncode == 0 and head.stdout == b"".join(_healthy("--isolation", "read_committed")[:3])
    # the damaged segment's committed records before the marker are all there (they were dropped: 12-23)
    committed = run_kfs("cat", str(logdir), PARTITION, "--isolation", "read_committed")
    offsets = [_offset(line) for line in committed.stdout.splitlines()]
    golden = [r["offset"] for r in read_jsonl(Path(__file__).parent / "fixtures" / "kafka-written" / "golden"
                                             / PARTITION / "records.read_committed.jsonl")]
    assert offsets == [o for o in golden if o < MARKER_OFFSET] and 12 in offsets and 23 in offsets


@needs_fuse
@pytest.mark.parametrize("damage", ["short key", "crc"])
def test_the_mount_fails_only_the_views_reaching_the_damaged_marker(tmp_path: Path, damage: str) -> None:
    logdir = _copy(tmp_path)
    if damage == "crc":
        _break_crc(logdir)
    else:
        _rewrite_marker(logdir, BROKEN_MARKERS[damage])
    for options in ({"isolation": "read_committed"}, {"control": "show"}):
        settings = ["--isolation", "read_committed"] if "isolation" in options else ["--control", "show"]
        healthy = _healthy(*settings)
        with mounted(tmp_path, [str(logdir)], expect_errors=True, name="mnt-" + "-".join(options),
                     **options) as mnt:
            part = mnt / PARTITION
            whole = subprocess.run(["cat", str(part / "messages.jsonl")], capture_output=True, timeout=60)
            assert whole.returncode != 0 and b"Input/output error" in whole.stderr, options
            # a view known to hold damage is opened direct_io (kfs.fuse.tree): every line before it
            before = _before(healthy, MARKER_OFFSET)
            assert whole.stdout == before, options
            # the next segment's views read whole (a view starting past the damage in its own segment
            # opens at the damage, as for any damage in the mount: kfs.views.decoded.DecodedView.skip)
            assert (part / "offset" / f"{NEXT_SEGMENT}.jsonl").read_bytes() == _from(healthy, NEXT_SEGMENT), options
            fifth = json.loads(next(line for line in healthy if _offset(line) == 5))
            assert (part / "offset" / "5.value").read_bytes() == fifth["value"].encode()
            info = json.loads((part / "info.json").read_bytes())
            assert info["log_end_offset"] == json.loads(
                (Path(__file__).parent / "fixtures" / "kafka-written" / "golden" / PARTITION / "info.json")
                .read_text())["log_end_offset"]
