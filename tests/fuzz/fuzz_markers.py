"""The fuzz campaign's `markers` target: transaction markers with short or null keys and values, and
markers whose CRC fails (issue 29 item 2).

An input is a copy of the Kafka-written `payments-0` (six segments, 38 COMMIT and ABORT markers, each
segment's `.txnindex`) in which one to three control batches are changed, each keeping its size (a
header pads what a key or value lost, so no index entry moves): a key of 0 to 3 bytes or null, a
COMMIT/ABORT value of 0 to 5 bytes or null (all with a CRC made right: valid batches Kafka's
`ControlRecordType.parse` / `EndTransactionMarker.deserializeValue` refuse), or a byte of the records
flipped (the CRC fails).

The oracle, from the intact log (fuzz_targets.Truth), on both paths and under each isolation and
control setting: `kfs cat` prints exactly the records before the first damaged marker that setting
meets (a bad CRC: every setting; a short marker: read_committed and control=show, which parse them),
then a CorruptLogError at that batch's position, and everything when it meets none; a read from past
the last damaged marker is whole, read_committed deciding a damaged marker's transaction from the
`.txnindex` as it was; the decoded view (messages.jsonl under the same setting) gives the same bytes and
error; no error but kfs's own.
"""

from __future__ import annotations

import json
import random
import struct
from pathlib import Path

import crc32c
import fuzz_targets as t
from fuzz_targets import Failure

from kfs.storage import CorruptLogError, KfsError

PARTITION = "payments-0"
SETTINGS = (("read_uncommitted", "hide"), ("read_committed", "hide"), ("read_uncommitted", "show"),
            ("read_committed", "show"))
KINDS = ("short key", "null key", "short value", "null value", "crc")


def _varint(v: int) -> bytes:
    u = (v << 1) ^ (v >> 63)
    out = bytearray()
    while True:
        out.append((u & 0x7F) | (0x80 if u > 0x7F else 0))
        u >>= 7
        if not u:
            return bytes(out)


def _record(key: bytes | None, value: bytes | None, pad: int | None) -> bytes:
    body = b"\x00" + _varint(0) + _varint(0)
    for field in (key, value):
        body += _varint(-1) if field is None else _varint(len(field)) + field
    if pad is None:
        body += _varint(0)
    else:
        body += _varint(1) + _varint(pad) + b"p" * pad + _varint(-1)
    return _varint(len(body)) + body


def marker_record(key: bytes | None, value: bytes | None, size: int) -> bytes | None:
    """A control record of exactly `size` bytes with this key and value (a header pads it), or None."""
    for pad in (None, *range(0, 60)):
        record = _record(key, value, pad)
        if len(record) == size:
            return record
    return None


def _broken(rnd: random.Random, kind: str, original: bytes) -> bytes | None:
    """The records section of a marker batch made `kind` (None where it cannot keep its size)."""
    key, value = b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x07"  # a COMMIT marker's
    if kind == "short key":
        key = bytes(rnd.randrange(256) for _ in range(rnd.randrange(4)))
    elif kind == "null key":
        key = None
    elif kind == "short value":
        value = bytes(rnd.randrange(256) for _ in range(rnd.randrange(6)))
    elif kind == "null value":
        value = None
    if kind in ("short value", "null value"):
        key = b"\x00\x00\x00" + bytes([rnd.randrange(2)])  # a COMMIT or an ABORT: those carry a value
    return marker_record(key, value, len(original))


def make_markers_input(rnd: random.Random, scratch: Path) -> tuple[Path, dict[int, tuple[str, int, int]]]:
    """The partition copied with one to three control batches changed: {marker offset: (kind, segment, position)}."""
    logdir = t.copy_partition(PARTITION, scratch)
    truth = t.truth(PARTITION)
    markers = [b for b in truth.batches if b.is_control and b.base >= truth.log_start]
    made: dict[int, tuple[str, int, int]] = {}
    for batch in rnd.sample(markers, rnd.randint(1, 3)):
        path = logdir / PARTITION / f"{batch.segment:020d}.log"
        data = bytearray(path.read_bytes())
        length, = struct.unpack_from(">i", data, batch.position + 8)
        start, end = batch.position + 61, batch.position + 12 + length
        kind = rnd.choice(KINDS)
        if kind == "crc":
            data[rnd.randrange(start, end)] ^= 1 << rnd.randrange(8)
        else:
            section = _broken(rnd, kind, bytes(data[start:end]))
            if section is None:
                continue
            data[start:end] = section
            struct.pack_into(">I", data, batch.position + 17, crc32c.crc32c(bytes(data[batch.position + 21:end])))
        path.write_bytes(bytes(data))
        made[batch.base] = (kind, batch.segment, batch.position)
    return logdir, made


def _expected(isolation: str, control: str) -> list[int]:
    """The offsets the intact log shows under a setting (fuzz_targets.Truth: markers, no index)."""
    truth = t.truth(PARTITION)
    committed = set(truth.read_committed()) if isolation == "read_committed" else None
    return [o for b in truth.batches for o, _ in b.records if o >= truth.log_start
            and (control == "show" if b.is_control else committed is None or o in committed)]


def _cat(plog, start: int, isolation: str, control: str) -> tuple[bytes, KfsError | None]:  # type: ignore[no-untyped-def]
    from kfs.views import jsonl

    out = []
    prefix = jsonl.line_prefix(plog.topic, plog.partition)
    try:
        for records in plog.record_lists(start, isolation=isolation, control=control):
            out.append(jsonl.render_lines(prefix, records, None))
    except KfsError as e:
        return b"".join(out), e
    return b"".join(out), None


def _view(plog, isolation: str, control: str) -> tuple[bytes, bool]:  # type: ignore[no-untyped-def]
    """messages.jsonl under the setting, read in 64 KiB reads: its bytes, and whether a read failed."""
    from kfs.views.decoded import DecodedLog

    view = DecodedLog(plog, isolation=isolation, control=control, decode="raw").view(plog.log_start_offset())
    cursor = view.cursor()
    out: list[bytes] = []
    position = 0
    try:
        while data := cursor.read(position, 65536):
            out.append(data)
            position += len(data)
    except KfsError:
        return b"".join(out), True
    return b"".join(out), False


def _offsets(rendered: bytes) -> list[int]:
    return [json.loads(line)["offset"] for line in rendered.splitlines()]


def run_markers_input(logdir: Path, made: dict[int, tuple[str, int, int]]) -> None:
    if not made:
        return
    truth = t.truth(PARTITION)
    after = max(made) + 1
    results = {}
    for path in t.paths():
        t.use_path(path)
        plog = t.open_partition(logdir, PARTITION)
        try:
            for isolation, control in SETTINGS:
                parses = isolation == "read_committed" or control == "show"
                met = sorted(offset for offset, (kind, _, _) in made.items() if kind == "crc" or parses)
                expected = _expected(isolation, control)
                rendered, error = _cat(plog, truth.log_start, isolation, control)
                setting = f"{PARTITION} ({path}, {isolation}, control={control})"
                if met:
                    kind, segment, position = made[met[0]]
                    want = [o for o in expected if o < met[0]]
                    if not isinstance(error, CorruptLogError) or error.position != position \
                            or not error.path.endswith(f"{segment:020d}.log"):
                        raise Failure("wrong-answer", f"{setting}: the {kind} marker at {met[0]} (position "
                                                      f"{position}) was met as {error!r}")
                else:
                    want = expected
                    if error is not None:
                        raise Failure("wrong-answer", f"{setting}: no damaged marker is met, yet {error!r}")
                got = _offsets(rendered)
                if got != want:
                    raise Failure("wrong-answer", f"{setting}: {len(got)} records, expected {len(want)} "
                                                  f"(damaged markers {made})")
                view, failed = _view(plog, isolation, control)
                if view != rendered or failed != bool(met):
                    raise Failure("view-disagreement", f"{setting}: kfs cat {len(rendered)} bytes, error {error!r}; "
                                                       f"messages.jsonl {len(view)} bytes, failed {failed}")
                past, past_error = _cat(plog, after, isolation, control)
                if past_error is not None or _offsets(past) != [o for o in expected if o >= after]:
                    raise Failure("wrong-answer", f"{setting}: a read from {after}, past the damage, gave "
                                                  f"{len(_offsets(past))} records and {past_error!r}")
                results[path, isolation, control] = (rendered, past)
        except Failure:
            raise
        except Exception as e:
            raise Failure("exception", f"{PARTITION} ({path}): {type(e).__name__}: {e}") from e
        finally:
            plog.close()
    if any(results["c", i, c] != results["python", i, c] for i, c in SETTINGS if ("c", i, c) in results
           and ("python", i, c) in results):
        raise Failure("disagreement", f"{PARTITION}: C and Python paths differ")
