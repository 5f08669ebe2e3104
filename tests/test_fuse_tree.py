"""The mounted tree (docs/spec.md section 2) agrees with Kafka's golden answers, through a real mount."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

import mounts
import pytest
from conftest import GOLDEN, GOLDEN_PARTITIONS, golden_logdir, read_jsonl
from mounts import golden_value, mounted, needs_fuse

kfs_mount = mounts.kfs_mount

pytestmark = needs_fuse


def _segment_ends(partition: str) -> dict[int, int]:
    ends: dict[int, int] = {}
    for batch in read_jsonl(GOLDEN / partition / "batches.jsonl"):
        base = batch["segment_base_offset"]
        ends[base] = max(ends.get(base, 0), batch["position"] + batch["size"])
    return ends


def _expected_raw(partition: str, segment_base: int, position: int) -> bytes:
    """Every complete batch from (segment, position) to the log end, read from the segment files."""
    directory = Path(golden_logdir(partition)) / partition
    out = bytearray()
    for base, end in sorted(_segment_ends(partition).items()):
        if base < segment_base:
            continue
        data = (directory / f"{base:020d}.log").read_bytes()
        out += data[position if base == segment_base else 0:end]
    return bytes(out)


def _lines(path: Path) -> list[dict]:
    with path.open("rb") as f:
        return [json.loads(line) for line in f]


def test_root_lists_exactly_the_partitions(kfs_mount: Path) -> None:
    assert sorted(os.listdir(kfs_mount)) == GOLDEN_PARTITIONS


@pytest.mark.parametrize("partition", GOLDEN_PARTITIONS)
def test_partition_directory_layout(kfs_mount: Path, partition: str) -> None:
    assert sorted(os.listdir(kfs_mount / partition)) == ["info.json", "messages.jsonl", "offset", "time"]
    assert os.listdir(kfs_mount / partition / "offset") == []
    assert os.listdir(kfs_mount / partition / "time") == []


@pytest.mark.parametrize("partition", GOLDEN_PARTITIONS)
def test_messages_jsonl_is_the_golden_decoding_with_an_exact_size(kfs_mount: Path, partition: str) -> None:
    path = kfs_mount / partition / "messages.jsonl"
    data = path.read_bytes()
    assert os.stat(path).st_size == len(data)
    assert [json.loads(line) for line in data.splitlines()] == read_jsonl(GOLDEN / partition / "records.jsonl")


@pytest.mark.parametrize("partition", GOLDEN_PARTITIONS)
def test_info_json_matches_golden(kfs_mount: Path, partition: str) -> None:
    info = json.loads((kfs_mount / partition / "info.json").read_bytes())
    golden = json.loads((GOLDEN / partition / "info.json").read_bytes())
    for key in ("topic", "partition", "log_start_offset", "log_end_offset"):
        assert info[key] == golden[key]
    segments = zip(info["segments"], golden["segments"], strict=True)
    assert [{k: s[k] for k in g} for s, g in segments] == golden["segments"]


@pytest.mark.parametrize("partition", GOLDEN_PARTITIONS)
def test_offset_views_follow_kafka_fetch_semantics(kfs_mount: Path, partition: str) -> None:
    base = kfs_mount / partition / "offset"
    lookups = read_jsonl(GOLDEN / partition / "offset-lookups.jsonl")
    for i, lookup in enumerate(lookups):
        target = lookup["target"]
        if "error" in lookup:
            for suffix in ("", ".jsonl", ".value"):
                with pytest.raises(FileNotFoundError):
                    os.stat(base / f"{target}{suffix}")
            continue
        if i % 5 and i != len(lookups) - 3:  # every 5th offset through all views; the rest by stat
            assert os.stat(base / str(target)).st_size > 0
            continue
        raw = (base / str(target)).read_bytes()
        assert raw == _expected_raw(partition, lookup["segment_base_offset"], lookup["position"])
        assert os.stat(base / str(target)).st_size == len(raw)
        with (base / f"{target}.jsonl").open("rb") as f:
            first = json.loads(f.readline())
        assert first["offset"] == lookup["offset"]


@pytest.mark.parametrize("partition", GOLDEN_PARTITIONS)
def test_value_files_are_exact_and_gaps_are_enoent(kfs_mount: Path, partition: str) -> None:
    base = kfs_mount / partition / "offset"
    records = read_jsonl(GOLDEN / partition / "records.jsonl")
    present = {r["offset"] for r in records}
    for record in records[::3] + records[-2:]:
        path = base / f"{record['offset']}.value"
        assert path.read_bytes() == golden_value(record["value"])
        assert os.stat(path).st_size == len(golden_value(record["value"]))
    info = json.loads((GOLDEN / partition / "info.json").read_bytes())
    gaps = [o for o in range(info["log_start_offset"], info["log_end_offset"]) if o not in present]
    for offset in gaps[:50]:
        with pytest.raises(FileNotFoundError):
            (base / f"{offset}.value").read_bytes()


@pytest.mark.parametrize("partition", GOLDEN_PARTITIONS)
def test_offset_jsonl_starts_exactly_at_n_and_runs_to_the_log_end(kfs_mount: Path, partition: str) -> None:
    records = read_jsonl(GOLDEN / partition / "records.jsonl")
    for k in (0, len(records) // 3, len(records) - 1):
        n = records[k]["offset"]
        assert _lines(kfs_mount / partition / "offset" / f"{n}.jsonl") == records[k:]


@pytest.mark.parametrize("partition", GOLDEN_PARTITIONS)
def test_time_views_follow_list_offsets_semantics(kfs_mount: Path, partition: str) -> None:
    base = kfs_mount / partition / "time"
    records = read_jsonl(GOLDEN / partition / "records.jsonl")
    index = {r["offset"]: i for i, r in enumerate(records)}
    for i, lookup in enumerate(read_jsonl(GOLDEN / partition / "time-lookups.jsonl")):
        target = lookup["target"]
        if "error" in lookup:
            for suffix in ("", ".jsonl", ".value"):
                with pytest.raises(FileNotFoundError):
                    os.stat(base / f"{target}{suffix}")
            continue
        if i % 7:
            continue
        with (base / f"{target}.jsonl").open("rb") as f:
            first = json.loads(f.readline())
        # The record found, or (a control marker found, as in payments-0) the next listed record.
        assert first["offset"] >= lookup["offset"]
        assert first == records[min(i for o, i in index.items() if o >= lookup["offset"])]
        assert (base / f"{target}.value").read_bytes() == golden_value(first["value"])
        raw = (base / str(target)).read_bytes()
        position = _batch_position(partition, lookup["offset"])
        assert raw == _expected_raw(partition, lookup["segment_base_offset"], position)


def _batch_position(partition: str, offset: int) -> int:
    """The position of the batch holding `offset` (the raw time view starts at the batch Kafka found)."""
    for batch in read_jsonl(GOLDEN / partition / "batches.jsonl"):
        if batch["base_offset"] <= offset <= batch["last_offset"]:
            return batch["position"]
    raise AssertionError(offset)


def test_time_accepts_iso_8601(kfs_mount: Path) -> None:
    first = json.loads((kfs_mount / "orders-0" / "messages.jsonl").open("rb").readline())
    iso = "2018-05-15T11:45:18.288Z"
    assert first["timestamp"] == 1526384718288
    line = json.loads((kfs_mount / "orders-0" / "time" / f"{iso}.jsonl").open("rb").readline())
    assert line == first
    no_zone = json.loads((kfs_mount / "orders-0" / "time" / "2018-05-15T11:45:18.288.jsonl").open("rb").readline())
    assert no_zone == first


@pytest.mark.parametrize("partition", GOLDEN_PARTITIONS)
def test_earliest_latest_and_minus_k(kfs_mount: Path, partition: str) -> None:
    records = read_jsonl(GOLDEN / partition / "records.jsonl")
    info = json.loads((GOLDEN / partition / "info.json").read_bytes())
    base = kfs_mount / partition / "offset"
    assert _lines(base / "earliest.jsonl") == records
    assert (base / "earliest").read_bytes() == (base / str(info["log_start_offset"])).read_bytes()
    last = _lines(base / "latest.jsonl")  # empty when the last offset is a control marker (payments-0)
    assert last == [r for r in records if r["offset"] >= info["log_end_offset"] - 1]
    minus = _lines(base / "-3.jsonl")
    assert minus == [r for r in records if r["offset"] >= info["log_end_offset"] - 3]


def test_read_committed_mount_hides_aborted_records(tmp_path: Path) -> None:
    with mounted(tmp_path, isolation="read_committed") as mnt:
        for partition in GOLDEN_PARTITIONS:
            assert _lines(mnt / partition / "messages.jsonl") == read_jsonl(
                GOLDEN / partition / "records.read_committed.jsonl"), partition


def test_control_show_lists_the_markers(tmp_path: Path) -> None:
    with mounted(tmp_path, control="show") as mnt:
        lines = _lines(mnt / "payments-0" / "messages.jsonl")
    controls = read_jsonl(GOLDEN / "payments-0" / "control.jsonl")
    shown = [line for line in lines if "control" in line]
    assert [(c["offset"], c["control"]) for c in shown] == [(c["offset"], c["control"]) for c in controls]
    assert [line for line in lines if "control" not in line] == read_jsonl(GOLDEN / "payments-0" / "records.jsonl")


def test_every_modifying_call_is_erofs(kfs_mount: Path) -> None:
    part = kfs_mount / "orders-0"
    attempts = [
        lambda: os.open(part / "messages.jsonl", os.O_WRONLY | os.O_APPEND),
        lambda: os.open(part / "offset" / "0", os.O_RDWR),
        lambda: os.open(part / "new-file", os.O_WRONLY | os.O_CREAT),
        lambda: os.mkdir(part / "dir"),
        lambda: os.rmdir(part / "offset"),
        lambda: os.unlink(part / "info.json"),
        lambda: os.rename(part / "info.json", part / "x.json"),
        lambda: os.chmod(part / "info.json", 0o777),
        lambda: os.truncate(part / "info.json", 0),
        lambda: os.utime(part / "info.json"),
        lambda: os.symlink("x", part / "link"),
    ]
    for attempt in attempts:
        with pytest.raises(OSError) as info:
            attempt()
        assert info.value.errno == errno.EROFS


@pytest.mark.parametrize("partition", ["orders-0", "payments-0"])
def test_files_take_owner_and_mode_of_what_they_come_from(kfs_mount: Path, partition: str) -> None:
    source = Path(golden_logdir(partition)) / partition
    part_stat, source_stat = os.stat(kfs_mount / partition), os.stat(source)
    assert (part_stat.st_uid, part_stat.st_gid, stat.S_IMODE(part_stat.st_mode)) == (
        source_stat.st_uid, source_stat.st_gid, stat.S_IMODE(source_stat.st_mode))
    segment = os.stat(sorted(source.glob("*.log"))[0])
    for view in ("messages.jsonl", "offset/earliest", "offset/earliest.jsonl"):
        st = os.stat(kfs_mount / partition / view)
        assert stat.S_ISREG(st.st_mode)
        assert stat.S_IMODE(st.st_mode) == stat.S_IMODE(segment.st_mode) & ~0o222
        assert (st.st_uid, st.st_gid) == (segment.st_uid, segment.st_gid)
        assert st.st_blksize >= 256 * 1024


def test_names_outside_the_log_are_enoent(kfs_mount: Path) -> None:
    for name in ("nope-0", "orders-0/offset/banana", "orders-0/time/yesterday", "orders-0/offset/99999999.jsonl",
                 "orders-0/other", "orders-9"):
        with pytest.raises(FileNotFoundError):
            os.stat(kfs_mount / name)
