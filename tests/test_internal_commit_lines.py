"""`__consumer_offsets`' JSON lines (`kfs cat`, the mount's messages.jsonl): the offset commits the
compiled renderer writes itself (render_jsonl's `commits`, kfs/_native/csrc/views/offsets_json.h)
are the bytes the line decoder's Python rendering gives, line for line, and every other record is
still the decoder's (group metadata, foreign and damaged keys and values, invalid UTF-8, headers,
control records).

Over random batches of commits and their byte mutations (tests/test_spark_internal_columns.py's
generators), as whole batches (render_lines) and line lists (render_line_list); the Kafka-written
fixtures' lines are held to the golden answers by tests/test_internal_golden.py."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
from test_spark_internal_columns import row

from kfs._native import views as native
from kfs.internal_topics.lines import line_decoder
from kfs.record import Record
from kfs.storage.record_stream import ControlRecord
from kfs.views.jsonl import line_prefix, render_line, render_line_list, render_lines

pytestmark = pytest.mark.skipif(native.render_jsonl is None, reason="the compiled extension is not built")

PREFIX = line_prefix("__consumer_offsets", 7)


def records(rnd: random.Random) -> list[Record]:
    out: list[Record] = []
    for offset in range(rnd.randint(1, 30)):
        key, value = row(rnd)
        headers = [("h", b"v")] if rnd.random() < 0.05 else []
        if rnd.random() < 0.03:
            marker = Record(offset, 5, "CreateTime", b"\0\0\0\1", b"\0\0\0\0\0\0", [])
            out.append(ControlRecord(marker, "COMMIT", 1000, 0))
            continue
        out.append(Record(offset, rnd.choice([0, 1735689601126, -1]), rnd.choice(["CreateTime", "LogAppendTime"]),
                          key, value, headers))
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.randoms(use_true_random=False))
def test_commit_lines_equal_the_line_decoders(rnd: random.Random) -> None:
    decoder = line_decoder("__consumer_offsets")
    assert decoder is not None and decoder.commits_in_c  # type: ignore[attr-defined]
    batch = records(rnd)
    want = [render_line(PREFIX, r, decoder).encode() for r in batch]
    assert render_lines(PREFIX, batch, decoder) == b"".join(want)
    assert render_line_list(PREFIX, batch, decoder) == want


def test_plain_commits_are_written_in_c() -> None:
    """The compiled renderer takes a commit itself: the Python fallback is not called for it."""
    decoder = line_decoder("__consumer_offsets")
    key = b"\0\1\0\5group\0\1t\0\0\0\3"
    value = b"\0\3" + (42).to_bytes(8, "big") + b"\xff\xff\xff\xff\0\0" + (1735689601126).to_bytes(8, "big")
    batch = [Record(9, 17, "CreateTime", key, value, []), Record(10, 18, "CreateTime", key, None, [])]
    called: list[Record] = []

    def fallback(prefix: str, record: Record) -> str:
        called.append(record)
        return render_line(prefix, record, decoder)

    assert native.render_jsonl is not None
    lines = native.render_jsonl(PREFIX, batch, fallback, lines=True, commits=True)
    assert called == []
    assert lines == [render_line(PREFIX, r, decoder).encode() for r in batch]
    assert lines[1].endswith(b'"value": null, "headers": []}\n')
