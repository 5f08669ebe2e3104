"""The Spark source's planning and reading, without a SparkSession: options, splits, records.

Reads go through `read_split` exactly as a Spark task runs it, so the boundary cases (a split at
every offset-index entry, ranges, transactions, corruption) are checked here in seconds, and the
DataFrame tests (`test_spark_dataframe.py`) only need to show that Spark sees the same rows.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
from pathlib import Path

import pytest
from builders import ALL_LOGDIRS, golden_rows, orders_with_a_crc_mismatch
from conftest import FIXTURES, LOGDIRS
from conftest import GOLDEN_PARTITIONS as PARTITIONS

from kfs.spark.options import OptionError, parse_options
from kfs.spark.plan import Bounds, plan_splits


def info(partition: str) -> dict:
    return json.loads((FIXTURES / "golden" / partition / "info.json").read_text())


def covered(splits, partition: str) -> list[tuple[int, int]]:
    return [(p.start_offset, p.end_offset) for s in splits for p in s.pieces if p.partition_name == partition]


# ---- options ------------------------------------------------------------------------------------

def test_options_are_case_insensitive_and_default_as_spark():
    opts = parse_options({"PATH": ALL_LOGDIRS, "startingoffsets": "earliest", "INCLUDEHEADERS": "true"})
    assert opts.logdirs == tuple(LOGDIRS)
    assert opts.include_headers and opts.isolation == "read_uncommitted" and opts.on_corrupt == "fail"


@pytest.mark.parametrize("options", [
    {"startingOffsets": "latest"},              # Spark: batch queries cannot start at latest
    {"endingOffsets": "earliest"},
    {"startingOffsets": '{"orders": {"0": -1}}'},
    {"startingOffsets": "{not json"},
    {"isolation": "serializable"},
    {"onCorrupt": "ignore"},
    {"minPartitions": "0"},
    {"includeHeaders": "perhaps"},
    {"startingOffsetsByTimestampStrategy": "earliest"},
])
def test_bad_options_are_one_sentence_errors(options):
    with pytest.raises(OptionError):
        parse_options({"path": ALL_LOGDIRS, **options})


def test_no_path_is_an_error():
    with pytest.raises(OptionError):
        parse_options({})


def test_paths_option_from_a_list_load():
    assert parse_options({"paths": json.dumps(LOGDIRS)}).logdirs == tuple(LOGDIRS)


# ---- planning -----------------------------------------------------------------------------------

@pytest.mark.parametrize("max_split_bytes", ["1", "5000", "33554432"])
def test_pieces_tile_each_partition_from_log_start_to_log_end(max_split_bytes):
    splits = plan_splits({"path": ALL_LOGDIRS, "maxSplitBytes": max_split_bytes})
    for partition in PARTITIONS:
        ranges = covered(splits, partition)
        assert ranges[0][0] == info(partition)["log_start_offset"]
        assert ranges[-1][1] == info(partition)["log_end_offset"]
        assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))


def test_big_segments_are_cut_at_offset_index_entries():
    indexes = json.loads((FIXTURES / "golden" / "orders-0" / "indexes.json").read_text())
    entries = {(int(base), o, pos) for base, seg in indexes.items() for o, pos in seg["offset_index"]}
    bases = {(s["base_offset"], s["base_offset"], 0) for s in info("orders-0")["segments"]}
    splits = plan_splits({"path": ALL_LOGDIRS, "subscribe": "orders", "maxSplitBytes": "1"})
    starts = {(p.segment_base_offset, p.start_offset, p.start_position) for s in splits for p in s.pieces}
    assert starts == entries | bases  # with 1-byte splits, every entry starts one


def test_min_partitions_fans_one_partition_out():
    splits = plan_splits({"path": ALL_LOGDIRS, "subscribe": "orders", "minPartitions": "12"})
    assert len(splits) >= 12
    assert {p.partition_name for s in splits for p in s.pieces} == {"orders-0"}


def test_splits_balance_bytes_in_whole_waves_of_the_sessions_cores():
    splits = plan_splits({"path": ALL_LOGDIRS, "maxSplitBytes": "100000", "parallelism": "4"})
    assert len(splits) == 8  # 550 kB / 100 kB = 6 tasks, rounded up to two waves of 4
    sizes = [s.size for s in splits]
    assert max(sizes) < 1.3 * min(sizes)


def test_small_partitions_are_packed_into_one_task_by_default():
    assert len(plan_splits({"path": ALL_LOGDIRS})) == 1


def test_offset_range_plans_fewer_splits():
    base = {"path": ALL_LOGDIRS, "maxSplitBytes": "4096"}
    everything = plan_splits(base)
    ranged = plan_splits({**base, "startingOffsets": '{"orders": {"0": 700}}',
                          "endingOffsets": '{"orders": {"0": 800}}', "subscribe": "orders"})
    assert covered(ranged, "orders-0")[0][0] == 700 and covered(ranged, "orders-0")[-1][1] == 800
    assert len(ranged) < len([s for s in everything if any(p.topic == "orders" for p in s.pieces)]) / 4
    # Only segment 661 (offsets 661..939) is touched.
    assert {p.segment_base_offset for s in ranged for p in s.pieces} == {661}


def test_left_out_partitions_take_the_default():
    splits = plan_splits({"path": ALL_LOGDIRS, "startingOffsets": '{"orders": {"0": 1500}}'})
    assert covered(splits, "orders-0")[0][0] == 1500
    assert covered(splits, "payments-0")[0][0] == 0


def test_offsets_outside_the_log_are_clamped():
    splits = plan_splits({"path": ALL_LOGDIRS, "subscribe": "metrics_raw",
                          "startingOffsets": '{"metrics_raw": {"0": 0}}',
                          "endingOffsets": '{"metrics_raw": {"0": 99999999999}}'})
    lso, leo = info("metrics_raw-0")["log_start_offset"], info("metrics_raw-0")["log_end_offset"]
    assert covered(splits, "metrics_raw-0") == [(lso, leo)]


def _time_lookups(partition: str) -> list[dict]:
    return [json.loads(x) for x in (FIXTURES / "golden" / partition / "time-lookups.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("partition", ["orders-0", "audit.events-v2-3", "web_clicks-1"])
def test_timestamp_options_follow_kafka_list_offsets(partition):
    found = [x for x in _time_lookups(partition) if "error" not in x]
    start, end = found[len(found) // 4], found[3 * len(found) // 4]
    topic = partition.rsplit("-", 1)[0]
    splits = plan_splits({"path": ALL_LOGDIRS, "subscribe": topic, "startingTimestamp": str(start["target"]),
                          "endingTimestamp": str(end["target"])})
    if start["offset"] < end["offset"]:
        assert covered(splits, partition)[0][0] == start["offset"]
        assert covered(splits, partition)[-1][1] == end["offset"]
    else:
        assert covered(splits, partition) == []


def test_starting_timestamp_after_every_record_fails_unless_strategy_latest():
    late = str(max(s["largest_timestamp"] for p in PARTITIONS for s in info(p)["segments"]) + 1)
    with pytest.raises(OptionError):
        plan_splits({"path": ALL_LOGDIRS, "startingTimestamp": late})
    assert plan_splits({"path": ALL_LOGDIRS, "startingTimestamp": late,
                        "startingOffsetsByTimestampStrategy": "latest"}) == []


def test_ending_timestamp_after_every_record_means_the_log_end():
    late = str(max(s["largest_timestamp"] for p in PARTITIONS for s in info(p)["segments"]) + 1)
    splits = plan_splits({"path": ALL_LOGDIRS, "endingTimestamp": late})
    assert covered(splits, "orders-0")[-1][1] == info("orders-0")["log_end_offset"]


def test_timestamp_lower_bound_prunes_through_list_offsets():
    lookups = [x for x in _time_lookups("orders-0") if "error" not in x]
    probe = lookups[-len(lookups) // 5]
    splits = plan_splits({"path": ALL_LOGDIRS, "subscribe": "orders", "maxSplitBytes": "4096"},
                         Bounds(timestamp_lo=probe["target"]))
    assert covered(splits, "orders-0")[0][0] == probe["offset"]
    assert len(splits) < len(plan_splits({"path": ALL_LOGDIRS, "subscribe": "orders", "maxSplitBytes": "4096"})) / 2


def test_topic_and_partition_bounds_select_partitions():
    splits = plan_splits({"path": ALL_LOGDIRS}, Bounds(topics=frozenset({"orders", "payments"}),
                                               partitions=frozenset({0})))
    assert {p.partition_name for s in splits for p in s.pieces} == {"orders-0", "payments-0"}


# ---- reading (a task's work, without Spark) ----------------------------------------------------

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")


def read_all(options: dict) -> list[tuple]:
    from pyspark.sql.pandas.types import to_arrow_schema

    from kfs.spark.source import kafka_schema, read_split

    opts = parse_options(options)
    schema = to_arrow_schema(kafka_schema(opts.include_headers), timezone="UTC")
    rows = []
    for split in plan_splits(opts):
        for batch in read_split(split, opts, schema):
            assert batch.schema.equals(schema)
            for r in batch.to_pylist():
                rows.append(arrow_row(r))
    return rows


EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
TYPES = {0: "CreateTime", 1: "LogAppendTime", -1: "NoTimestampType"}


def arrow_row(r: dict) -> tuple:
    ms = (r["timestamp"] - EPOCH) // dt.timedelta(milliseconds=1)
    return (r["topic"], r["partition"], r["offset"], ms, TYPES[r["timestampType"]], r["key"], r["value"],
            [(h["key"], h["value"]) for h in r.get("headers") or []])


@pytest.mark.parametrize("max_split_bytes", ["1", "33554432"])
def test_tasks_read_exactly_the_golden_records(max_split_bytes):
    rows = read_all({"path": ALL_LOGDIRS, "includeHeaders": "true", "maxSplitBytes": max_split_bytes})
    assert rows == [r for p in PARTITIONS for r in golden_rows(p)]


def test_read_committed_hides_aborted_records():
    rows = read_all({"path": ALL_LOGDIRS, "subscribe": "payments", "isolation": "read_committed",
                     "includeHeaders": "true", "maxSplitBytes": "2000"})
    assert rows == golden_rows("payments-0", "records.read_committed.jsonl")


def test_v0_messages_have_kafkas_no_timestamp():
    rows = read_all({"path": ALL_LOGDIRS, "subscribe": "legacy"})
    v0 = [r for r in rows if r[4] == "NoTimestampType"]
    assert v0 and all(r[3] == -1 for r in v0)


@pytest.fixture
def corrupt_logdir(tmp_path: Path) -> tuple[str, range]:
    """orders-0 with one byte flipped inside a batch of segment 313 (offsets 344..354)."""
    return str(tmp_path), orders_with_a_crc_mismatch(tmp_path)


def test_on_corrupt_fail_raises(corrupt_logdir):
    from kfs.storage import CorruptLogError

    with pytest.raises(CorruptLogError):
        read_all({"path": corrupt_logdir[0]})


def test_on_corrupt_skip_drops_only_the_corrupt_batch(corrupt_logdir):
    path, bad = corrupt_logdir
    offsets = [r[2] for r in read_all({"path": path, "onCorrupt": "skip", "maxSplitBytes": "3000"})]
    assert offsets == [r[2] for r in golden_rows("orders-0") if r[2] not in bad]


# ---- filter pushdown, translated ----------------------------------------------------------------

def test_pushed_filters_become_bounds():
    from pyspark.sql.datasource import EqualTo, GreaterThan, GreaterThanOrEqual, In, LessThan, StringContains

    from kfs.spark.source import bounds_from_filters

    t = dt.datetime(2018, 5, 15, 11, 45, 18, 288500, tzinfo=dt.timezone.utc)
    filters = [GreaterThan(("offset",), 10), LessThan(("offset",), 20), EqualTo(("topic",), "orders"),
               In(("partition",), (0, 1)), GreaterThanOrEqual(("timestamp",), t), StringContains(("key",), "x")]
    bounds, remaining = bounds_from_filters(filters)
    assert bounds == Bounds(11, 20, 1526384718289, frozenset({"orders"}), frozenset({0, 1}))
    # Offsets, topics and partitions are exact; timestamps only prune, so Spark keeps them.
    assert remaining == [filters[4], filters[5]] and remaining[0] is filters[4]


# ---- grep, a task's work ------------------------------------------------------------------------

@pytest.mark.parametrize(("pattern", "regex"), [("user-4", False), ("61f4", False), (r"refund|INFO", True)])
def test_grep_split_matches_key_value_and_header_values(pattern, regex):
    import re

    from kfs.spark.jobs import grep_split

    opts = parse_options({"path": ALL_LOGDIRS, "maxSplitBytes": "8000"})
    lines = b"".join(chunk for split in plan_splits(opts) for chunk in grep_split(split, opts, pattern, regex))
    got = [json.loads(x) for x in lines.splitlines()]
    needle = pattern.encode()

    def hit(data: bytes | None) -> bool:
        return data is not None and (re.search(needle, data) is not None if regex else needle in data)

    want = [r for p in PARTITIONS for r in golden_rows(p) if hit(r[5]) or hit(r[6]) or any(hit(v) for _, v in r[7])]
    assert want
    assert [(g["topic"], g["partition"], g["offset"]) for g in got] == [r[:3] for r in want]
