"""kcat itself as the oracle of `kfs cat -f`: records produced into librdkafka's mock cluster (hosted by a
kcat consumer started with `-X test.mock.num.brokers=1`) with `kcat -P`, then printed by `kcat -C -f FMT`
for each format below. The same records, written into a log dir by kafka-python's batch builder (a
writer independent of kfs), must print the same bytes with `kfs cat -f FMT`.

`python tests/kcat_oracle.py` (kcat on PATH: `apt-get install kcat`) rewrites the answers kept in
tests/fixtures/kcat/ for machines without kcat; with kcat the tests also ask it afresh.
"""

from __future__ import annotations

import base64
import json
import random
import re
import shutil
import struct
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatchBuilder

KEPT = Path(__file__).parent / "fixtures" / "kcat" / "answers.json"
KEY_DELIMITER, MESSAGE_DELIMITER = b"\x1f", b"\x1e"

# What is produced: (topic, kcat -P flags, messages as KEY\x1fVALUE or VALUE (no key: a null key)).
# "fmtz" holds no empty key or value: kcat -Z prints NULL for those as for nulls (a kcat bug), so
# only there do -Z and `--null NULL` agree.
PRODUCED: list[tuple[str, list[str], list[bytes]]] = [
    ("fmt", ["-H", "h1=v1", "-H", "h2=x y"], [b"k1\x1fhello", b"\x1fempty key", b"no key at all"]),
    ("fmt", ["-Z", "-H", "h", "-H", "e="], [b"k3\x1f", b"\xff\x00bin\x1fcaf\xc3\xa9\n\tq\"", b"\x1f"]),
    ("fmt", [], [b"50% \\n literal, %s", b"k\x1f" + b"long " * 1000]),
    ("fmt", ["-H", "bin=\udcff\udcfe", "-H", "ключ=значение", "-H", "a=1", "-H", "a=2"], [b"k\x1fv"]),
    ("fmtz", ["-Z", "-H", "n"], [b"k1\x1f", b"v-with-null-key", b"k2\x1fv2"]),
    ("fmt", ["-H", "c=\x01\x1b\x7f\"\\/"], [b"ctl\x01\x08\x0c\x1b\x7f\x1d\"\\/\r\x00end"]),
]



def random_formats(count: int, seed: int = 20261126) -> list[str]:
    """Formats made of random tokens, text and escapes; each numeric escape ends at a '|' so that the
    digits after it are its own, and none makes a NUL byte (kcat cuts its text there, or fails)."""
    pieces = ["%o", "%k", "%K", "%s", "%S", "%R", "%T", "%h", "%t", "%p", "%%", "\\n", "\\t", "\\r", "\\\\",
              "\\x41|", "\\x7e|", "\\x4|", "\\x414|", "\\x9f|", "\\65|", "\\0101|", "\\0x2A|", "\\1|",
              "\\xg", "\\q", "a", "Z", " ", "|", ",", "=", "é", "\\9|", "x", "0"]
    rnd = random.Random(seed)
    return ["".join(rnd.choice(pieces) for _ in range(rnd.randrange(1, 12))) for _ in range(count)]


FORMATS = [
    "%o|%k|%s|%K|%S|%T|%h|%t|%p\n",
    "%R%s",
    "Topic %t [%p] at offset %o: key %k: %s\n",
    "\\x41\\x4a\\x414\\t\\r\\\\|\\101|\\017|\\0x41|\\x0x42|\\xZZ|\\xff|\\q|\\9|100%%|%k\\n",
    "%s",
    "%h;%K;%S\\n",
    *random_formats(40),
]


@dataclass
class Answers:
    """Per topic: the records (offset, timestamp, key, value, headers) kcat consumed, and per
    (format, with -Z) what it printed."""

    records: dict[str, list[tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]]
    printed: dict[tuple[str, str, bool], bytes]


def kcat_available() -> bool:
    return shutil.which("kcat") is not None


def ask_kcat() -> Answers:
    """Produce PRODUCED into a fresh mock cluster and read back what kcat prints."""
    host = subprocess.Popen(["kcat", "-C", "-X", "test.mock.num.brokers=1", "-b", "localhost:1", "-t", "fmt",
                             "-p", "0", "-o", "beginning", "-q", "-f", "%o"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert host.stderr is not None
        bootstrap = None
        for line in host.stderr:
            found = re.search(rb"replaced with (127\.0\.0\.1:\d+)", line)
            if found:
                bootstrap = found.group(1).decode()
                break
        assert bootstrap, "kcat did not start a mock cluster"
        for topic, flags, messages in PRODUCED:
            subprocess.run(["kcat", "-P", "-b", bootstrap, "-t", topic, "-p", "0", "-D", "\\x1e", "-K", "\\x1f",
                            *[f.encode("utf-8", "surrogateescape") for f in flags]],
                           input=MESSAGE_DELIMITER.join(messages) + MESSAGE_DELIMITER, check=True, timeout=60)
        topics = sorted({topic for topic, _, _ in PRODUCED})

        def consume(topic: str, fmt: str | None, *flags: str) -> bytes:
            return subprocess.run(["kcat", "-C", "-b", bootstrap, "-t", topic, "-p", "0", "-o", "beginning", "-q",
                                   "-X", "fetch.wait.max.ms=1", *(["-f", fmt] if fmt is not None else []), *flags],
                                  capture_output=True, check=True, timeout=60).stdout

        records = {topic: _records_of(consume(topic, "%o %T %K %S\n", "-e"), topic) for topic in topics}
        asked = [(topic, fmt, z) for topic in topics for fmt in FORMATS for z in (False, True)]
        # (a kcat consumer sometimes idles half a second before it exits: many at once)
        with ThreadPoolExecutor(16) as pool:
            outputs = pool.map(lambda a: consume(a[0], a[1], "-c", str(len(records[a[0]])), *(["-Z"] if a[2] else [])),
                               asked)
            printed = dict(zip(asked, outputs, strict=True))
        for topic in topics:  # kcat -J, the JSON envelope (its "broker" is the mock's broker id, 1)
            printed[topic, "-J", False] = consume(topic, None, "-c", str(len(records[topic])), "-J")
        return Answers(records, printed)
    finally:
        host.kill()
        host.wait()


def _records_of(listing: bytes, topic: str) -> list:
    """The records of `topic` as produced, with the offsets and timestamps kcat consumed them with."""
    produced = [(flags, m) for t, flags, messages in PRODUCED if t == topic for m in messages]
    lines = listing.splitlines()
    assert len(lines) == len(produced), (listing, produced)
    records = []
    for line, (flags, message) in zip(lines, produced, strict=True):
        offset, timestamp, key_length, value_length = (int(x) for x in line.split())
        key, _, value = message.rpartition(KEY_DELIMITER) if KEY_DELIMITER in message else (None, b"", message)
        if "-Z" in flags:
            key = None if key == b"" else key
            value = None if value == b"" else value
        assert (key_length, value_length) == (-1 if key is None else len(key), -1 if value is None else len(value))
        headers = []
        for flag, header in pairwise(flags):
            if flag == "-H":
                name, eq, header_value = header.partition("=")
                headers.append((name, header_value.encode("utf-8", "surrogateescape") if eq else None))
        records.append((offset, timestamp, key, value, headers))
    return records


def write_log(logdir: Path, answers: Answers) -> None:
    """The records of every topic as a partition `<topic>-0` of `logdir`, one v2 batch per record."""
    for topic, records in answers.records.items():
        partition = logdir / f"{topic}-0"
        partition.mkdir(parents=True)
        segment = bytearray()
        for offset, timestamp, key, value, headers in records:
            builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 30)
            builder.append(0, timestamp, key, value, headers)
            batch = builder.build()
            struct.pack_into(">q", batch, 0, offset)
            segment += batch
        (partition / f"{0:020d}.log").write_bytes(bytes(segment))
    (logdir / "meta.properties").write_text("version=0\nbroker.id=1\n")  # the mock cluster's broker (kcat -J)


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def save(answers: Answers, path: Path = KEPT) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    kept = {
        "kcat": subprocess.run(["kcat", "-V"], capture_output=True, text=True).stdout.splitlines()[3].strip(),
        "records": {topic: [[o, t, _b64(k), _b64(v), [[n, _b64(hv)] for n, hv in h]] for o, t, k, v, h in records]
                    for topic, records in answers.records.items()},
        "printed": [[topic, fmt, z, _b64(out)] for (topic, fmt, z), out in answers.printed.items()],
    }
    path.write_text(json.dumps(kept, indent=1, ensure_ascii=False) + "\n")


def load(path: Path = KEPT) -> Answers:
    kept = json.loads(path.read_text())
    records = {topic: [(o, t, _unb64(k), _unb64(v), [(n, _unb64(hv)) for n, hv in h]) for o, t, k, v, h in rows]
               for topic, rows in kept["records"].items()}
    printed = {(topic, fmt, z): _unb64(out) or b"" for topic, fmt, z, out in kept["printed"]}
    return Answers(records, printed)


if __name__ == "__main__":
    if not kcat_available():
        sys.exit("kcat is not installed (apt-get install kcat)")
    save(ask_kcat())
    print(f"wrote {KEPT}")
