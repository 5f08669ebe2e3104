"""The fuzz campaign's `kcat` target: kcat formats' memory (issue 29 item 5).

An input is a few random records (null, empty, short and long keys and values up to 256 KiB, headers
with null values and non-ASCII names), written as one to four v2 batches (kafka-python's builder, an
encoder independent of kfs) into a segment, and a random kcat format: tokens repeated up to 300
times, literals up to 20 KB, escapes with numbers of up to 5,000 digits, text that is no token, and
a `--null` text of up to 10 KB.

The oracle: a format kcat refuses is BadFormat and nothing else; `KcatFormat.pieces` joined is the
template rendering of each record (the one-shot rendering, done only where it is small enough to make);
every piece is bounded: at most 2 x CHUNK or one token's bytes (a value, a literal), or for a format
holding each field once a group of 64 records' own bytes; `kfs cat -f`'s stream (kfs.views.batch_lines
.joined_lines) is the same with the compiled walker's kcat mode and without, and no walker call gives
more than its budget and KCAT_BATCH_OUTPUT (8 MiB) of output.
"""

from __future__ import annotations

import random
import struct
import zlib
from pathlib import Path

import fuzz_targets as t
from fuzz_targets import Failure

from kfs.record import PlainRun, Record
from kfs.storage import KfsError
from kfs.views import batch_lines, plain_runs
from kfs.views.kcat_format import CHUNK, BadFormat, KcatFormat

PARTITION = "kcat-0"
T0 = 1_700_000_000_000
TOKENS = ["%o", "%k", "%K", "%s", "%S", "%R", "%T", "%h", "%t", "%p", "%%"]
WALKER_CALL_MAX = plain_runs.RENDER_BUDGET + (64 << 10) + (8 << 20)  # budget, slack, KCAT_BATCH_OUTPUT
ONE_SHOT_MAX = 48 << 20  # the reference rendering is made only this big


def _bytes(rnd: random.Random, big: bool) -> bytes | None:
    roll = rnd.random()
    if roll < 0.15:
        return None
    if roll < 0.25:
        return b""
    size = rnd.choice([rnd.randrange(1, 64), rnd.randrange(64, 4096)] + ([rnd.randrange(4096, 256 << 10)] if big
                                                                         else []))
    return bytes(rnd.randrange(256) for _ in range(min(size, 64))) * (size // 64 + 1)


def _records(rnd: random.Random) -> list[list[tuple[bytes | None, bytes | None, list]]]:
    batches = []
    for _ in range(rnd.randint(1, 4)):
        batch = []
        for _ in range(rnd.choice([1, 2, 5, rnd.randint(1, 400)])):
            headers = [(rnd.choice(["h", "ключ", "", "trace-id"]), _bytes(rnd, False))
                       for _ in range(rnd.choice([0, 0, 1, 3]))]
            batch.append((_bytes(rnd, False), _bytes(rnd, rnd.random() < 0.3), headers))
        batches.append(batch)
    return batches


def _format(rnd: random.Random) -> str:
    parts = []
    for _ in range(rnd.randint(1, 8)):
        roll = rnd.random()
        if roll < 0.45:
            parts.append(rnd.choice(TOKENS) * rnd.choice([1, 1, 2, rnd.randint(1, 300)]))
        elif roll < 0.6:
            parts.append("x" * rnd.choice([1, 10, rnd.randint(1, 20_000)]))
        elif roll < 0.75:
            digits = rnd.choice(["9", "7", "0", "f", "1"]) * rnd.choice([1, 3, 25, rnd.randint(1, 5000)])
            parts.append(rnd.choice(["\\", "\\x", "\\0", "\\0x", "\\x0"]) + digits + "|")
        elif roll < 0.85:
            parts.append(rnd.choice(["\\n", "\\t", "\\r", "\\\\", "\\q", "é", "%"]))
        else:
            parts.append(rnd.choice(["%x", "%", "%%%", "100%"]))  # (some are no token: BadFormat)
    return "".join(parts)


def make_kcat_input(rnd: random.Random, scratch: Path) -> tuple[Path, str, bytes, list[list[Record]]]:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    logdir = scratch / "kcat-logdir"
    directory = logdir / PARTITION
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.iterdir():
        old.unlink()
    data = bytearray()
    offset = 0
    written = []
    for batch in _records(rnd):
        builder = DefaultRecordBatchBuilder(magic=2, compression_type=rnd.choice([0, 0, 1]), is_transactional=False,
                                            producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
        records = []
        for i, (key, value, headers) in enumerate(batch):
            builder.append(i, timestamp=T0 + offset + i, key=key, value=value, headers=headers)
            records.append(Record(offset + i, T0 + offset + i, "CreateTime", key, value, headers))
        built = bytearray(builder.build())
        struct.pack_into(">q", built, 0, offset)
        data += built
        offset += len(batch)
        written.append(records)
    (directory / f"{0:020d}.log").write_bytes(bytes(data))
    null = b"N" * rnd.choice([0, 4, rnd.randint(0, 10_000)])
    return logdir, _format(rnd), null, written


def _headers_size(r: Record) -> int:
    return sum(4 * len(name) + 6 + len(value or b"") for name, value in r.headers)


def _bound(fmt: KcatFormat, records: list[Record]) -> int:
    """The most one piece may hold: 2 x CHUNK (records gathered), one token's bytes (a record given a token
    at a time), or a group of 64 records' own bytes and 4 KiB each (a format holding each field once)."""
    literal = max((len(text) for op, text in fmt.parts if op == "L"), default=0)
    fields = max((max(len(r.key or b""), len(r.value or b""), _headers_size(r)) for r in records), default=0)
    own = max((len(r.key or b"") + len(r.value or b"") + _headers_size(r) + 16 for r in records), default=0)
    return max(2 * CHUNK, literal, fields, len(fmt.null), 64 * (own + 4096))


def run_kcat_input(logdir: Path, text: str, null: bytes, written: list[list[Record]]) -> None:
    try:
        fmt = KcatFormat(text, "kcat", 0, null)
    except BadFormat:
        return
    except Exception as e:
        raise Failure("exception", f"format {text[:80]!r}: {type(e).__name__}: {e}") from e
    records = [r for batch in written for r in batch]
    bound = _bound(fmt, records)
    total, crc_of_pieces = 0, 0
    pieces = []
    try:
        for batch in written:
            for piece in fmt.pieces(batch):
                if len(piece) > bound:
                    raise Failure("unbounded", f"format {text[:80]!r}: a piece of {len(piece)} bytes (bound {bound})")
                total += len(piece)
                crc_of_pieces = zlib.crc32(piece, crc_of_pieces)
                if total <= ONE_SHOT_MAX:
                    pieces.append(piece)
    except Failure:
        raise
    except Exception as e:
        raise Failure("exception", f"format {text[:80]!r}: {type(e).__name__}: {e}") from e
    if total <= ONE_SHOT_MAX:
        reference = b"".join(fmt.template % fmt._values(r) for r in records)
        if b"".join(pieces) != reference:
            raise Failure("wrong-answer", f"format {text[:80]!r}: the pieces are not the rendering")
    if total > 4 * ONE_SHOT_MAX:
        return  # (the walk below would take long: the pieces were checked)
    for path in t.paths():
        t.use_path(path)
        plog = t.open_partition(logdir, PARTITION)
        try:
            length, crc = _stream(plog, fmt, text, bound)
        except Failure:
            raise
        except KfsError as e:
            raise Failure("wrong-answer", f"format {text[:80]!r} ({path}): {e}") from e
        except Exception as e:
            raise Failure("exception", f"format {text[:80]!r} ({path}): {type(e).__name__}: {e}") from e
        finally:
            plog.close()
        if (length, crc) != (total, crc_of_pieces):
            raise Failure("wrong-answer", f"format {text[:80]!r} ({path}): kfs cat -f wrote {length} bytes, "
                                          f"not the records' {total}")


def _stream(plog, fmt: KcatFormat, text: str, bound: int) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """`kfs cat -f`'s stream of the partition (the walker's kcat mode where the path has it): its length
    and CRC-32, each piece and each walker call checked against its bound."""
    take = plain_runs.kcat_taker(fmt.program(), fmt.null, False) if plain_runs.available() else None

    def checked(first, segment, window, position, previous_last, below):  # type: ignore[no-untyped-def]
        got = take(first, segment, window, position, previous_last, below)  # type: ignore[misc]
        if isinstance(got, PlainRun) and len(got.taken[1]) > WALKER_CALL_MAX:
            raise Failure("unbounded", f"format {text[:80]!r}: a walker call gave {len(got.taken[1])} bytes")
        return got

    crc, length = 0, 0
    for piece in batch_lines.joined_lines(plog, 0, isolation="read_uncommitted", control="hide", prefix="",
                                          render=fmt.pieces, fused=False, take=checked if take is not None else None):
        if len(piece) > max(bound, WALKER_CALL_MAX):
            raise Failure("unbounded", f"format {text[:80]!r}: a piece of {len(piece)} bytes")
        crc, length = zlib.crc32(piece, crc), length + len(piece)
    return length, crc
