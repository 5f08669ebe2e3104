"""The storage core answers as Kafka does, on log dirs Kafka's own classes wrote.

Every golden answer of tests/fixtures/kafka-written/ (its README says how they were computed) is
checked: decoded records (both isolation levels), every offset lookup, every time lookup, the
partition summary, the index entries, and the control markers.
"""

from __future__ import annotations

import itertools
import json
import os

import pytest
from conftest import GOLDEN, GOLDEN_PARTITIONS, LOGDIRS, read_jsonl

from kfs.storage import LogDirs, OffsetOutOfRange, TimestampNotFound
from kfs.views.jsonl import render_record

LOCATION_FIELDS = ("segment_base_offset", "index_entry", "position", "batch_base_offset", "batch_last_offset",
                   "offset", "timestamp")


@pytest.fixture(scope="module")
def logdirs():
    dirs = LogDirs(LOGDIRS)
    yield dirs
    dirs.close()


def _rendered(plog, **kwargs) -> list[dict]:
    return [json.loads(render_record(plog.topic, plog.partition, r)) for r in plog.records(**kwargs)]


def test_partition_names_are_the_golden_partitions_and_skip_moved_dirs(logdirs) -> None:
    assert logdirs.partition_names() == GOLDEN_PARTITIONS


@pytest.mark.parametrize("partition", GOLDEN_PARTITIONS)
def test_records_render_as_golden_jsonl(logdirs, partition: str) -> None:
    expected = read_jsonl(GOLDEN / partition / "records.jsonl")
    assert _rendered(logdirs.partition(partition)) == expected


@pytest.mark.parametrize("partition", GOLDEN_PARTITIONS)
def test_read_committed_records_render_as_golden_jsonl(logdirs, partition: str) -> None:
    expected = read_jsonl(GOLDEN / partition / "records.read_committed.jsonl")
    assert _rendered(logdirs.partition(partition), isolation="read_committed") == expected


@pytest.mark.parametrize("partition", GOLDEN_PARTITIONS)
def test_control_show_lists_every_golden_marker(logdirs, partition: str) -> None:
    expected = read_jsonl(GOLDEN / partition / "control.jsonl")
    shown = {r["offset"]: r for r in _rendered(logdirs.partition(partition), control="show") if "control" in r}
    assert [{k: shown.get(e["offset"], {}).get(k) for k in e} for e in expected] == expected
    assert len(shown) == len(expected)


@pytest.mark.parametrize("partition", GOLDEN_PARTITIONS)
def test_every_offset_lookup_equals_kafkas_fetch(logdirs, partition: str) -> None:
    plog = logdirs.partition(partition)
    mismatches = []
    for line in read_jsonl(GOLDEN / partition / "offset-lookups.jsonl"):
        target = line.pop("target")
        try:
            got = plog.locate_offset(target).as_dict()
        except OffsetOutOfRange:
            got = {"error": "OFFSET_OUT_OF_RANGE"}
        if got != line:
            mismatches.append((target, got, line))
    assert mismatches == []


@pytest.mark.parametrize("partition", GOLDEN_PARTITIONS)
def test_every_time_lookup_equals_kafkas_list_offsets(logdirs, partition: str) -> None:
    plog = logdirs.partition(partition)
    mismatches = []
    for line in read_jsonl(GOLDEN / partition / "time-lookups.jsonl"):
        target = line.pop("target")
        try:
            location = plog.locate_time(target).as_dict()
            got = {k: location[k] for k in line}
        except TimestampNotFound:
            got = {"error": "NOT_FOUND"}
        if got != line:
            mismatches.append((target, got, line))
    assert mismatches == []


@pytest.mark.parametrize("partition", GOLDEN_PARTITIONS)
def test_info_equals_the_brokers_view(logdirs, partition: str) -> None:
    expected = json.loads((GOLDEN / partition / "info.json").read_text())
    info = logdirs.partition(partition).info()
    got = {k: info[k] for k in expected if k != "segments"}
    got["segments"] = [{k: s[k] for k in e} for s, e in zip(info["segments"], expected["segments"], strict=True)]
    assert got == expected


@pytest.mark.parametrize("partition", GOLDEN_PARTITIONS)
def test_index_entries_equal_the_index_files(logdirs, partition: str) -> None:
    """indexes.json holds the files as they were when the golden answers were computed. Some last
    segments were closed afterwards (`LogSegment.close`: indexes trimmed, one closing time index entry
    of the largest timestamp appended); for those, the broker's in-memory view is the golden one."""
    expected = json.loads((GOLDEN / partition / "indexes.json").read_text())
    plog = logdirs.partition(partition)
    segments = {s.base_offset: s for s in plog.segments()}
    assert sorted(segments) == sorted(int(b) for b in expected)
    for base, files in expected.items():
        segment = segments[int(base)]
        offsets = [list(e) for e in segment.offset_index_entries()]
        times = [list(e) for e in segment.time_index_entries()]
        assert offsets == files["offset_index"], base
        on_disk = (os.path.getsize(segment.offset_index.path), os.path.getsize(segment.time_index.path))
        if on_disk == (files["offset_index_file_bytes"], files["time_index_file_bytes"]):
            assert times == files["time_index"], base
        else:
            assert plog.is_active(segment), base
            assert [list(e) for e in segment.time_index_entries(active=True)] == files["time_index"], base
            assert times[:len(files["time_index"])] == files["time_index"], base
            assert [e[0] for e in times[len(files["time_index"]):]] in ([], [segment.largest_timestamp()]), base


@pytest.mark.parametrize("partition", GOLDEN_PARTITIONS)
def test_log_start_and_end_offsets(logdirs, partition: str) -> None:
    expected = json.loads((GOLDEN / partition / "info.json").read_text())
    plog = logdirs.partition(partition)
    assert (plog.log_start_offset(), plog.log_end_offset()) == (expected["log_start_offset"],
                                                                 expected["log_end_offset"])
    records = read_jsonl(GOLDEN / partition / "records.jsonl")
    if records:
        assert plog.resolve_offset("latest") == expected["log_end_offset"] - 1
        assert plog.resolve_offset("earliest") == expected["log_start_offset"]


@pytest.mark.parametrize("partition", GOLDEN_PARTITIONS)
def test_records_from_every_offset_start_at_the_first_record_at_or_after_it(logdirs, partition: str) -> None:
    plog = logdirs.partition(partition)
    offsets = [r["offset"] for r in read_jsonl(GOLDEN / partition / "records.jsonl")]
    start, end = plog.log_start_offset(), plog.log_end_offset()
    for target in range(start, end, max(1, (end - start) // 40)):
        expected = [o for o in offsets if o >= target][:3]
        got = [r.offset for r in itertools.islice(plog.records(target), 3)]
        assert got == expected, target
