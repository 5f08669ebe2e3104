"""Damage is never hidden (docs/spec.md section 7, kfs.storage.damage): a closed segment that ends inside a
batch or in bytes that are no batch, or (where the log was never compacted) whose batches stop
short of the next segment's base offset, fails the read that reaches it, after every record
before it; `kfs ls --json` / `info.json` list it under the segment's `problems`. The active
segment's half-written tail stays silent, and Kafka's own fixtures show no problem at all."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from builders import Oracle, make_log, partition_log
from conftest import GOLDEN, LOGDIRS, read_jsonl, run_kfs

from kfs.storage import CorruptBatch, CorruptLogError, LogDirs


def _rows(records) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in records]


def _read_until_error(plog) -> tuple[list[tuple], CorruptLogError | None]:
    got = []
    try:
        for record in plog.records():
            got.append(record)
    except CorruptLogError as exc:
        return _rows(got), exc
    return _rows(got), None


def _cleaner_checkpoint(logdir: Path, entries: dict[str, int]) -> None:
    """What a broker with the log cleaner enabled keeps in every log dir (OffsetCheckpointFile)."""
    lines = ["0", str(len(entries))] + [f"{n.rsplit('-', 1)[0]} {n.rsplit('-', 1)[1]} {o}" for n, o in entries.items()]
    (logdir / "cleaner-offset-checkpoint").write_text("\n".join(lines) + "\n")


def _drop_last_batches(directory: Path, segment, count: int) -> int:
    """Truncate a segment at a batch boundary, `count` batches before its end; returns the cut position."""
    cut = segment.batches[-count].position
    os.truncate(directory / f"{segment.base_offset:020d}.log", cut)
    return cut


def test_a_closed_segment_ending_inside_a_batch(tmp_path: Path) -> None:
    directory, written = make_log(tmp_path)
    victim = written[1].batches[7]
    os.truncate(directory / f"{written[1].base_offset:020d}.log", victim.position + 30)
    oracle = Oracle(written)
    before = [r for b, r in oracle.records if b.base_offset < victim.base_offset]
    plog = partition_log(directory)

    got, error = _read_until_error(plog)
    assert got == before
    assert error is not None and error.position == victim.position and "ends inside the batch" in str(error)
    assert str(directory / f"{written[1].base_offset:020d}.log") in str(error)
    with pytest.raises(CorruptLogError):  # a lost offset is the error, not the next segment's first record
        plog.locate_offset(victim.base_offset + 2)
    assert plog.locate_offset(written[2].base_offset).offset == written[2].base_offset  # after it: readable

    problems = [s["problems"] for s in plog.info()["segments"]]
    assert problems[0] == [] and problems[2] == []
    assert len(problems[1]) == 1 and f"position {victim.position}" in problems[1][0]

    skipped = [r for records in plog.record_lists(on_corrupt="skip") for r in records]
    errors = [r for r in skipped if isinstance(r, CorruptBatch)]
    assert len(errors) == 1 and errors[0].offset == victim.base_offset
    after = [r for b, r in oracle.records if b.segment_base_offset == written[2].base_offset]
    assert _rows([r for r in skipped if not isinstance(r, CorruptBatch)]) == before + after


def test_a_closed_segment_ending_in_zeros(tmp_path: Path) -> None:
    directory, written = make_log(tmp_path)
    with open(directory / f"{written[0].base_offset:020d}.log", "ab") as f:
        f.write(bytes(4096))  # a preallocated tail that was never trimmed
    got, error = _read_until_error(partition_log(directory))
    assert error is not None and "4096 zero bytes" in str(error)
    assert got == [r for b, r in Oracle(written).records if b.segment_base_offset == 0]


@pytest.mark.parametrize("index", [True, False])
def test_a_closed_segment_with_a_hole_before_its_last_batch_says_so(tmp_path: Path, index: bool) -> None:
    """Zeros over the batches before the last one: the damage is where the zeros start, after every
    record before them. With the segment's index, its tail walk found the batch after the hole, so the
    zeros are damage where the walk meets them; without it, the tail walk stopped at the hole, and the
    bytes past the last complete batch are not called a zero tail, since other bytes follow the zeros."""
    directory, written = make_log(tmp_path)
    segment = written[0]
    hole_start, last = segment.batches[-4].position, segment.batches[-1].position
    with open(directory / f"{segment.base_offset:020d}.log", "r+b") as f:
        f.seek(hole_start)
        f.write(bytes(last - hole_start))
    if not index:
        (directory / f"{segment.base_offset:020d}.index").unlink()
    got, error = _read_until_error(partition_log(directory))
    assert error is not None and error.position == hole_start
    if index:
        assert "zeroed bytes where a batch should start" in str(error)
    else:
        assert "zero bytes after" not in str(error) and "begin with zeros" in str(error) and "a hole" in str(error)
    assert got == [r for b, r in Oracle(written).records
                   if b.segment_base_offset == 0 and b.position < hole_start]


def test_batches_missing_at_a_batch_boundary_where_the_log_was_never_compacted(tmp_path: Path) -> None:
    directory, written = make_log(tmp_path)
    cut = _drop_last_batches(directory, written[0], 2)
    lost = written[0].batches[-2].base_offset
    oracle = Oracle(written)
    before = [r for b, r in oracle.records if b.base_offset < lost]

    # no cleaner-offset-checkpoint (a copy without it): the segment's indexes name the lost batches (rule 3)
    got, error = _read_until_error(partition_log(directory))
    assert got == before and error is not None and error.position == cut and "its indexes" in str(error)
    # without its indexes either, a gap may be compaction's: rule 1 only
    for suffix in (".index", ".timeindex"):
        (directory / f"{written[0].base_offset:020d}{suffix}").unlink()
    got, error = _read_until_error(partition_log(directory))
    assert error is None and len(got) == len(oracle.records) - 10
    # the broker's cleaner checkpoint does not list the partition: never compacted, so records are missing
    _cleaner_checkpoint(directory.parent, {})
    plog = partition_log(directory)
    got, error = _read_until_error(plog)
    assert got == before
    assert error is not None and error.position == cut
    assert f"offsets {lost} to {written[1].base_offset - 1} are missing" in str(error)
    assert plog.info()["segments"][0]["problems"]
    # compacted up to past this segment: the gap is the cleaner's, not damage
    _cleaner_checkpoint(directory.parent, {directory.name: written[1].base_offset + 3})
    got, error = _read_until_error(partition_log(directory))
    assert error is None and not any(s["problems"] for s in partition_log(directory).info()["segments"])


def test_the_active_segments_half_written_batch_is_silent(tmp_path: Path) -> None:
    directory, written = make_log(tmp_path)
    last = written[-1].batches[-1]
    os.truncate(directory / f"{written[-1].base_offset:020d}.log", last.position + last.size - 3)
    _cleaner_checkpoint(directory.parent, {})
    plog = partition_log(directory)
    got, error = _read_until_error(plog)
    assert error is None and got[-1][0] == last.base_offset - 1
    assert not any(s["problems"] for s in plog.info()["segments"])


def test_kafkas_fixtures_have_no_problems_even_with_a_cleaner_checkpoint(tmp_path: Path) -> None:
    copies = []
    for logdir in LOGDIRS:
        copy = tmp_path / Path(logdir).name
        shutil.copytree(logdir, copy, symlinks=True)
        _cleaner_checkpoint(copy, {})  # as if none was ever compacted: rule 2 everywhere
        copies.append(str(copy))
    for dirs in (LogDirs(LOGDIRS), LogDirs(copies)):
        for name in dirs.partition_names():
            plog = dirs.partition(name)
            assert all(s["problems"] == [] for s in plog.info()["segments"]), name
            assert _read_until_error(plog)[1] is None, name


# ---- the commands -----------------------------------------------------------------------------

def _damaged_orders(tmp_path: Path) -> tuple[Path, dict]:
    """orders-0 (Kafka-written) with its segment 661 cut in the middle of its 4th batch."""
    logdir = tmp_path / "logdir"
    shutil.copytree(Path(LOGDIRS[0]) / "orders-0", logdir / "orders-0")
    shutil.copy(Path(LOGDIRS[0]) / "meta.properties", logdir)
    batches = [b for b in read_jsonl(GOLDEN / "orders-0" / "batches.jsonl") if b["segment_base_offset"] == 661]
    victim = batches[3]
    os.truncate(logdir / "orders-0" / f"{661:020d}.log", victim["position"] + 30)
    return logdir, victim


def test_kfs_cat_prints_every_record_before_the_damage_then_one_sentence(tmp_path: Path) -> None:
    logdir, victim = _damaged_orders(tmp_path)
    records = read_jsonl(GOLDEN / "orders-0" / "records.jsonl")
    before = [r for r in records if r["offset"] < victim["base_offset"]]
    done = run_kfs("cat", str(logdir), "orders-0")
    assert done.returncode == 1
    assert [json.loads(x) for x in done.stdout.splitlines()] == before
    last = done.stderr.decode().splitlines()[-1]
    assert last.startswith("kfs: ") and f"{661:020d}.log: corrupt batch at position {victim['position']}" in last
    assert "Traceback" not in done.stderr.decode()

    skip = run_kfs("cat", str(logdir), "orders-0", "--on-corrupt", "skip")
    lines = [json.loads(x) for x in skip.stdout.splitlines()]
    errors = [line for line in lines if "error" in line]
    assert skip.returncode == 0 and len(errors) == 1 and errors[0]["offset"] == victim["base_offset"]
    assert [line for line in lines if "error" not in line] == before + [r for r in records if r["offset"] >= 940]

    raw = run_kfs("cat", str(logdir), "orders-0", "--format", "raw")
    assert raw.returncode == 1 and len(raw.stdout) == 31963 + 32433 + victim["position"]
    lost = run_kfs("cat", str(logdir), "orders-0", "--offset", str(victim["base_offset"] + 1), "--count", "1")
    assert lost.returncode == 1 and lost.stdout == b""

    listed = json.loads(run_kfs("ls", "--json", str(logdir), "orders-0").stdout)
    assert [bool(s["problems"]) for s in listed["segments"]] == [s["base_offset"] == 661 for s in listed["segments"]]
    table = run_kfs("ls", str(logdir), "orders-0").stdout.decode()
    assert "truncated" in table and str(victim["position"]) in table
