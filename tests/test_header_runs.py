"""The tail walk with runs of headers taken in C (kfs.storage.header_runs, walk_v2_headers.c) against the
Python walk alone: the same tail (file size, end of the complete batches, next offset, largest timestamp),
the same walk marks, the same damage found, on every segment of the Kafka-written fixtures with their
indexes emptied (so each walk reads every header and leaves marks) and on random segments, damaged by
flipped, zeroed, cut and appended bytes (hypothesis)."""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any

import offsets_log as ol
import pytest
from conftest import LOGDIRS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kfs._native.storage import walk_v2_headers
from kfs.storage import LogDirs
from kfs.storage import segment as segment_module
from kfs.storage.errors import KfsError

pytestmark = pytest.mark.skipif(walk_v2_headers is None, reason="the compiled extension is not built")

INTERNAL = Path(__file__).parent / "fixtures" / "internal-topics" / "logdirs" / "broker-a"


def tails(logdir: str, compiled: bool, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Each segment's tail, marks and damage, walked afresh with or without the compiled runs."""
    used: list[int] = []
    real = segment_module.header_runner

    def counting(base: int, marks: Any = None) -> Any:
        runner = real(base, marks)
        if runner is None:
            return None

        def run(*args: Any) -> Any:
            got = runner(*args)
            if got is not None:
                used.append(got.count)
            return got
        return run

    monkeypatch.setattr(segment_module, "header_runner", counting if compiled else lambda base, marks=None: None)
    out: list[Any] = []
    dirs = LogDirs([logdir])
    for name in sorted(dirs.partition_names()):
        try:
            segments = dirs.partition(name).segments()
        except KfsError as e:
            out.append((name, "error", str(e)))
            continue
        for s in segments:
            try:
                tail = s._refresh_tail()
            except KfsError as e:
                out.append((name, s.base_offset, "error", str(e)))
                continue
            marks = s._marks
            out.append((name, s.base_offset, tail, str(s._tail_error),
                        None if marks is None else (marks.to, list(marks.offsets), list(marks.positions),
                                                    list(marks.times_before), marks.largest_time)))
    monkeypatch.setattr(segment_module, "header_runner", real)
    return [out, sum(used)]


def without_indexes(source: Path, target: Path) -> str:
    shutil.copytree(source, target)
    for index in [*target.rglob("*.index"), *target.rglob("*.timeindex")]:
        index.write_bytes(b"")
    return str(target)


@pytest.mark.parametrize("source", [*LOGDIRS, str(INTERNAL)], ids=["broker-a", "broker-b", "internal-topics"])
def test_fixture_tails_equal_the_python_walks(source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    logdir = without_indexes(Path(source), tmp_path / "copy")
    python, _ = tails(logdir, False, monkeypatch)
    compiled, taken = tails(logdir, True, monkeypatch)
    assert compiled == python
    assert taken > 0  # (the runs took headers: this compares them, not the Python walk twice)


def damaged_segment(rnd: random.Random, path: Path) -> None:
    """A partition of random v2 batches in two segments, then a few bytes of its first segment damaged."""
    writer = ol.PartitionWriter(str(path), 0, segment_bytes=rnd.choice([2000, 6000, 1 << 20]),
                                index_interval=rnd.choice([None, 500]))
    stamp = 1_700_000_000_000
    for _ in range(rnd.randint(1, 60)):
        records = [(stamp + rnd.randint(-5, 50), rnd.randbytes(rnd.randint(0, 8)) or None,
                    rnd.randbytes(rnd.randint(0, 300)) or None) for _ in range(rnd.randint(1, 4))]
        writer.append(records)
        if rnd.random() < 0.2:
            writer.skip(rnd.randint(1, 3))
    writer.close()
    logs = sorted((path / "__consumer_offsets-0").glob("*.log"))
    target = rnd.choice(logs)
    data = bytearray(target.read_bytes())
    starts = batch_starts(data)
    for _ in range(rnd.randint(0, 3)):
        what = rnd.random()
        if not data:
            break
        if what < 0.3 and starts:  # a header's offsets (outside the CRC, or not read by a header walk)
            at = rnd.choice(starts)
            if at + 27 <= len(data):
                field = rnd.choice([(0, 8), (23, 27)])
                if rnd.random() < 0.5:
                    data[at + rnd.randrange(*field)] = rnd.randrange(256)
                else:  # a base offset moved back or forward a little, or to a far one
                    base = int.from_bytes(data[at:at + 8], "big", signed=True)
                    moved = rnd.choice([base - rnd.randint(1, 5), base + rnd.randint(1, 5), -1, 2**63 - 1, 2**31])
                    data[at:at + 8] = moved.to_bytes(8, "big", signed=True)
        elif what < 0.5:
            data[rnd.randrange(len(data))] = rnd.randrange(256)
        elif what < 0.6:
            at = rnd.randrange(len(data))
            data[at:at + rnd.randint(1, 80)] = bytes(min(len(data) - at, rnd.randint(1, 80)))
        elif what < 0.75:
            del data[rnd.randrange(len(data)):]
        elif what < 0.85:
            data += bytes(rnd.randint(1, 200))  # (a preallocated tail)
        else:
            data += rnd.randbytes(rnd.randint(1, 70))
    target.write_bytes(bytes(data))


def batch_starts(data: bytes) -> list[int]:
    """Where the batches of an undamaged segment start (by their length fields)."""
    starts, at = [], 0
    while at + 12 <= len(data):
        starts.append(at)
        at += 12 + int.from_bytes(data[at + 8:at + 12], "big")
    return starts


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.randoms(use_true_random=False))
def test_random_damaged_tails_equal_the_python_walks(rnd: random.Random) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as monkeypatch:
        damaged_segment(rnd, Path(tmp))
        python, _ = tails(tmp, False, monkeypatch)
        compiled, _ = tails(tmp, True, monkeypatch)
        assert compiled == python
