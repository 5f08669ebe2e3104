"""Damage the indexes prove, with or without a `cleaner-offset-checkpoint` (kfs.storage.damage, rule 3).

A closed segment cut at a batch boundary ends on a whole batch, so rule 1 cannot see it, and without
the cleaner checkpoint (a copied log dir often has none) rule 2 cannot tell the gap before the next
segment from compaction's. But Kafka writes a segment's indexes with its log, and the cleaner writes
new ones with the log it cleans: an offset index whose last entries point past the log's end, and a
time index whose last entries name offsets the log no longer has, are the log's own lost tail. A
damaged index alone (one entry, in one file) is never taken for it: it costs a scan, never an error.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest
from builders import Oracle, make_log, partition_log
from conftest import run_kfs, v2_batch, write_segment

from kfs.storage import CorruptLogError


def _read_until_error(plog) -> tuple[list[int], CorruptLogError | None]:  # type: ignore[no-untyped-def]
    got = []
    try:
        for record in plog.records():
            got.append(record.offset)
    except CorruptLogError as exc:
        return got, exc
    return got, None


def _cut(directory: Path, segment, count: int) -> int:  # type: ignore[no-untyped-def]
    """The segment's `.log` cut at a batch boundary, `count` batches before its end (its indexes kept)."""
    cut = segment.batches[-count].position
    os.truncate(directory / f"{segment.base_offset:020d}.log", cut)
    return cut


@pytest.mark.parametrize("count", [2, 5, 12])
def test_a_closed_segment_cut_at_a_batch_boundary_is_damage_without_a_cleaner_checkpoint(tmp_path: Path,
                                                                                         count: int) -> None:
    directory, written = make_log(tmp_path)
    assert not (directory.parent / "cleaner-offset-checkpoint").exists()
    victim = written[1]
    cut = _cut(directory, victim, count)
    lost = victim.batches[-count].base_offset
    before = [r[0] for b, r in Oracle(written).records if b.base_offset < lost]
    plog = partition_log(directory)

    got, error = _read_until_error(plog)
    assert got == before
    assert error is not None and error.position == cut
    assert str(directory / f"{victim.base_offset:020d}.log") in str(error)
    assert "index" in str(error) and f"offsets {lost} to {written[2].base_offset - 1}" in str(error)
    with pytest.raises(CorruptLogError):  # a lost offset is the error, not the next segment's first record
        plog.locate_offset(lost + 1)
    problems = [s["problems"] for s in plog.info()["segments"]]
    assert problems[0] == [] and problems[2] == [] and len(problems[1]) == 1 and f"position {cut}" in problems[1][0]


def test_kfs_cat_and_ls_report_the_cut(tmp_path: Path) -> None:
    directory, written = make_log(tmp_path)
    cut = _cut(directory, written[0], 3)
    lost = written[0].batches[-3].base_offset
    done = run_kfs("cat", str(directory.parent), directory.name)
    assert done.returncode == 1
    assert [json.loads(line)["offset"] for line in done.stdout.splitlines()] == list(range(lost))
    last = done.stderr.decode().splitlines()[-1]
    assert last.startswith("kfs: ") and f"position {cut}" in last and "Traceback" not in done.stderr.decode()
    listed = json.loads(run_kfs("ls", "--json", str(directory.parent), directory.name).stdout)
    assert [bool(s["problems"]) for s in listed["segments"]] == [True, False, False]


def test_the_cleaners_rewritten_indexes_leave_its_gap_alone(tmp_path: Path) -> None:
    """A cleaned segment (batches dropped from its end, its indexes written with it) ends before the
    next segment's base offset: compaction's gap, not damage, when no checkpoint says otherwise."""
    directory, written = make_log(tmp_path)
    kept = written[0].batches[:-4]
    appends = [[(_batch_bytes(directory, written[0], b), b.records)] for b in kept]
    os.remove(directory / f"{0:020d}.log")
    write_segment(str(directory), 0, appends, 200)
    got, error = _read_until_error(partition_log(directory))
    assert error is None and got[:len(got) - 120] == [r[0] for b in kept for r in b.records]
    assert not any(s["problems"] for s in partition_log(directory).info()["segments"])


def _batch_bytes(directory: Path, segment, batch) -> bytes:  # type: ignore[no-untyped-def]
    with open(directory / f"{segment.base_offset:020d}.log", "rb") as f:
        f.seek(batch.position)
        return f.read(batch.size)


def _entries(path: Path, fmt: str) -> list[tuple[int, int]]:
    data = path.read_bytes()
    size = struct.calcsize(fmt)
    return [struct.unpack_from(fmt, data, i) for i in range(0, len(data) - len(data) % size, size)]


def _write_entries(path: Path, fmt: str, entries: list[tuple[int, int]]) -> None:
    path.write_bytes(b"".join(struct.pack(fmt, *e) for e in entries))


@pytest.mark.parametrize("damage", ["offset entry past the end", "time entry past the end",
                                    "both, out of order", "offset entries past the end, out of order"])
def test_one_damaged_index_is_never_taken_for_a_lost_tail(tmp_path: Path, damage: str) -> None:
    """An intact log whose index holds entries past its end that do not add up to a lost tail: a
    single entry in one file, or entries out of order. The log is read whole, with no error."""
    directory, written = make_log(tmp_path)
    segment = written[0]
    size = os.path.getsize(directory / f"{0:020d}.log")
    end = segment.batches[-1].last_offset + 1
    index, timeindex = directory / f"{0:020d}.index", directory / f"{0:020d}.timeindex"
    offsets, times = _entries(index, ">ii"), _entries(timeindex, ">qi")
    if damage == "offset entry past the end":
        offsets.append((end + 3, size + 100))
    elif damage == "time entry past the end":
        times.append((times[-1][0] + 5, end + 3))
    elif damage == "both, out of order":
        offsets.append((offsets[-1][0] - 1, size + 100))
        times.append((times[-1][0] - 1, end + 3))
    else:
        offsets += [(end + 3, size + 100), (end + 2, size + 200)]
    _write_entries(index, ">ii", offsets)
    _write_entries(timeindex, ">qi", times)
    got, error = _read_until_error(partition_log(directory))
    assert error is None and got == [r[0] for _, r in Oracle(written).records]
    assert not any(s["problems"] for s in partition_log(directory).info()["segments"])


# ---- rule 2 from the topic's configs in the metadata log -----------------------------------------

def _compact_string(text: str | None) -> bytes:
    if text is None:
        return b"\0"
    data = text.encode()
    return _uvarint(len(data) + 1) + data


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _config_record(resource_type: int, resource: str, name: str, value: str | None) -> bytes:
    """A ConfigRecord (api key 4, version 0, flexible) in the metadata log's frame (version 1)."""
    return (b"\x01\x04\x00" + bytes([resource_type]) + _compact_string(resource) + _compact_string(name)
            + _compact_string(value) + b"\0")


def _metadata_log(logdir: Path, configs: list[bytes]) -> None:
    directory = logdir / "__cluster_metadata-0"
    directory.mkdir()
    records: list[tuple[int, int, bytes | None, bytes | None, list]] = [
        (i, 1_700_000_000_000 + i, None, value, []) for i, value in enumerate(configs)]
    write_segment(str(directory), 0, [[(v2_batch(0, records), records)]])


@pytest.mark.parametrize("policies", [["delete"], ["compact"], ["delete", "compact,delete"], [],
                                      ["delete", "cluster default compact"]])
def test_a_gap_where_the_metadata_log_says_the_topic_was_never_compacted(tmp_path: Path,
                                                                        policies: list[str]) -> None:
    """No cleaner checkpoint and no index to show the cut (rule 3): the topic's cleanup.policy in the
    `__cluster_metadata` log among the log dirs decides. Set to delete, and never to compact (nor the
    cluster's default log.cleanup.policy), the segments were never compacted and the gap is damage
    (rule 2); any compact, or no policy in the log (the broker's own default decides), and it is not."""
    from kfs.internal_topics.framing import decode_metadata
    from kfs.storage import LogDirs

    directory, written = make_log(tmp_path)
    cut = _cut(directory, written[0], 2)
    for suffix in (".index", ".timeindex"):
        (directory / f"{0:020d}{suffix}").unlink()
    configs = [_config_record(2, "orders", "cleanup.policy", "compact")]  # another topic's
    for policy in policies:
        if policy == "cluster default compact":
            configs.append(_config_record(4, "", "log.cleanup.policy", "compact"))
        else:
            configs.append(_config_record(2, "bad.input", "cleanup.policy", policy))
    assert decode_metadata(configs[-1]).type == "ConfigRecord"
    _metadata_log(directory.parent, configs)
    plog = LogDirs([str(directory.parent)]).partition(directory.name)
    got, error = _read_until_error(plog)
    lost = written[0].batches[-2].base_offset
    kept = [r[0] for _, r in Oracle(written).records if not lost <= r[0] < written[1].base_offset]
    if policies == ["delete"]:
        assert error is not None and error.position == cut and "never compacted" in str(error)
        assert got == list(range(lost)) and plog.info()["segments"][0]["problems"]
    else:
        assert error is None and got == kept and not any(s["problems"] for s in plog.info()["segments"])


def test_a_compact_policy_appended_to_the_metadata_log_since_is_seen(tmp_path: Path) -> None:
    """The metadata log is read again from where it was read when it grows: a later cleanup.policy
    with compact makes the same gap compaction's."""
    from kfs.storage import LogDirs

    directory, written = make_log(tmp_path)
    _cut(directory, written[0], 2)
    for suffix in (".index", ".timeindex"):
        (directory / f"{0:020d}{suffix}").unlink()
    _metadata_log(directory.parent, [_config_record(2, "bad.input", "cleanup.policy", "delete")])
    logdirs = LogDirs([str(directory.parent)])
    plog = logdirs.partition(directory.name)
    assert _read_until_error(plog)[1] is not None
    later: list[tuple[int, int, bytes | None, bytes | None, list]] = [
        (1, 1_700_000_000_001, None, _config_record(2, "bad.input", "cleanup.policy", "compact"), [])]
    with open(directory.parent / "__cluster_metadata-0" / f"{0:020d}.log", "ab") as f:
        f.write(v2_batch(1, later))
    assert logdirs.partition("__cluster_metadata-0").log_end_offset() == 2
    assert _read_until_error(plog)[1] is None
