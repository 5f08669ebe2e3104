"""`kfs ls`, `kfs locate`, `kfs cat` as a user runs them (docs/spec.md section 5), against the golden answers,
and every user error as one sentence on stderr with a non-zero exit (docs/spec.md section 7)."""

from __future__ import annotations

import base64
import datetime as dt
import json
from pathlib import Path

import pytest
from conftest import GOLDEN, GOLDEN_PARTITIONS, golden_logdir, read_jsonl, run_kfs

SAMPLE = ("orders-0", "payments-0", "inventory-2", "metrics_raw-0", "legacy-0")


def _ok(*args: str) -> bytes:
    result = run_kfs(*args)
    assert result.returncode == 0, result.stderr.decode()
    assert b"Traceback" not in result.stderr
    return result.stdout


def _jsonl(data: bytes) -> list[dict]:
    return [json.loads(line) for line in data.splitlines() if line.strip()]


def _sample(lines: list[dict], n: int = 6) -> list[dict]:
    """First, last, and evenly spread lines between."""
    step = max(1, len(lines) // n)
    picked = [*range(0, len(lines), step), len(lines) - 1]
    return [dict(lines[i]) for i in sorted(set(picked))]


@pytest.mark.parametrize("partition", GOLDEN_PARTITIONS)
def test_ls_json_of_a_partition_is_its_info(partition: str) -> None:
    expected = json.loads((GOLDEN / partition / "info.json").read_text())
    info = json.loads(_ok("ls", "--json", golden_logdir(partition), partition))
    assert {k: info[k] for k in expected if k != "segments"} == {k: v for k, v in expected.items() if k != "segments"}
    assert [{k: s[k] for k in e} for s, e in zip(info["segments"], expected["segments"], strict=True)] == \
        expected["segments"]


def test_ls_json_of_a_log_dir_lists_its_partitions() -> None:
    logdir = golden_logdir("orders-0")
    infos = json.loads(_ok("ls", "--json", logdir))
    names = [f"{i['topic']}-{i['partition']}" for i in infos]
    assert names == sorted(p for p in GOLDEN_PARTITIONS if golden_logdir(p) == logdir)


@pytest.mark.parametrize("partition", SAMPLE)
def test_cat_prints_the_golden_records(partition: str) -> None:
    assert _jsonl(_ok("cat", golden_logdir(partition), partition)) == read_jsonl(GOLDEN / partition / "records.jsonl")


def test_cat_read_committed_hides_aborted_records() -> None:
    out = _ok("cat", golden_logdir("payments-0"), "payments-0", "--isolation", "read_committed")
    assert _jsonl(out) == read_jsonl(GOLDEN / "payments-0" / "records.read_committed.jsonl")


def test_cat_control_show_lists_the_markers() -> None:
    shown = {r["offset"]: r for r in _jsonl(_ok("cat", golden_logdir("payments-0"), "payments-0",
                                                 "--control", "show")) if "control" in r}
    expected = read_jsonl(GOLDEN / "payments-0" / "control.jsonl")
    assert [{k: shown[e["offset"]][k] for k in e} for e in expected] == expected


@pytest.mark.parametrize("partition", SAMPLE)
def test_locate_offset_equals_kafkas_fetch(partition: str) -> None:
    for line in _sample([x for x in read_jsonl(GOLDEN / partition / "offset-lookups.jsonl") if "error" not in x]):
        target = line.pop("target")
        got = json.loads(_ok("locate", golden_logdir(partition), partition, "--offset", str(target)))
        assert {k: got[k] for k in line} == line, target


@pytest.mark.parametrize("partition", SAMPLE)
def test_locate_time_equals_kafkas_list_offsets(partition: str) -> None:
    for line in _sample([x for x in read_jsonl(GOLDEN / partition / "time-lookups.jsonl") if "error" not in x]):
        target = line.pop("target")
        got = json.loads(_ok("locate", golden_logdir(partition), partition, "--time", str(target)))
        assert {k: got[k] for k in line} == line, target


def test_locate_time_accepts_iso_8601_in_utc() -> None:
    line = next(x for x in read_jsonl(GOLDEN / "orders-0" / "time-lookups.jsonl") if "error" not in x)
    iso = dt.datetime.fromtimestamp(line["target"] / 1000, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
    for spec in (iso + "Z", iso):
        got = json.loads(_ok("locate", golden_logdir("orders-0"), "orders-0", "--time", spec))
        assert got["offset"] == line["offset"], spec


def test_cat_from_time_starts_at_the_located_record() -> None:
    line = next(x for x in read_jsonl(GOLDEN / "audit.events-v2-3" / "time-lookups.jsonl")[20:] if "error" not in x)
    out = _jsonl(_ok("cat", golden_logdir("audit.events-v2-3"), "audit.events-v2-3", "--time", str(line["target"]),
                     "--count", "2"))
    records = read_jsonl(GOLDEN / "audit.events-v2-3" / "records.jsonl")
    first = next(i for i, r in enumerate(records) if r["offset"] == line["offset"])
    assert out == records[first:first + 2]


def test_cat_offset_count_latest_and_from_end() -> None:
    logdir, name = golden_logdir("orders-0"), "orders-0"
    records = read_jsonl(GOLDEN / name / "records.jsonl")
    assert _jsonl(_ok("cat", logdir, name, "--offset", str(records[100]["offset"]), "--count", "5")) == \
        records[100:105]
    assert _jsonl(_ok("cat", logdir, name, "--offset", "latest")) == records[-1:]
    assert _jsonl(_ok("cat", logdir, name, "--offset", "-3")) == records[-3:]
    assert _jsonl(_ok("cat", logdir, name, "--offset", "earliest", "--count", "2")) == records[:2]


def test_cat_value_prints_the_exact_value_bytes() -> None:
    records = read_jsonl(GOLDEN / "audit.events-v2-3" / "records.jsonl")
    for r in (records[0], next(r for r in records if isinstance(r["value"], dict)),
              next(r for r in records if r["value"] is None)):
        done = run_kfs("cat", golden_logdir("audit.events-v2-3"), "audit.events-v2-3", "--offset", str(r["offset"]),
                       "--format", "value")
        value = r["value"]
        expected = b"" if value is None else (base64.b64decode(value["base64"]) if isinstance(value, dict)
                                              else value.encode())
        assert done.stdout == expected, r["offset"]
        assert done.returncode == (3 if value is None else 0)  # 3: a tombstone, not an empty value


def test_cat_raw_prints_the_batches_byte_for_byte() -> None:
    logdir, name = golden_logdir("orders-0"), "orders-0"
    line = read_jsonl(GOLDEN / name / "offset-lookups.jsonl")[400]
    out = _ok("cat", logdir, name, "--offset", str(line["target"]), "--format", "raw")
    info = json.loads((GOLDEN / name / "info.json").read_text())
    expected = b""
    for s in info["segments"]:
        if s["base_offset"] >= line["segment_base_offset"]:
            data = Path(logdir, name, f"{s['base_offset']:020d}.log").read_bytes()[:s["size"]]
            expected += data[line["position"]:] if s["base_offset"] == line["segment_base_offset"] else data
    assert out == expected


# ---- errors: one sentence, non-zero exit, no traceback -----------------------------------------------

def _fails(*args: str) -> str:
    result = run_kfs(*args)
    err = result.stderr.decode()
    assert result.returncode != 0, args
    assert "Traceback" not in err, err
    assert result.stdout == b"", args
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0], err
    return lines[0]


def test_unknown_partition_is_one_sentence() -> None:
    assert "nosuch-7" in _fails("cat", golden_logdir("orders-0"), "nosuch-7")
    assert "nosuch-7" in _fails("locate", golden_logdir("orders-0"), "nosuch-7", "--offset", "0")
    assert "nosuch-7" in _fails("ls", "--json", golden_logdir("orders-0"), "nosuch-7")


def test_missing_log_dir_is_one_sentence(tmp_path) -> None:
    missing = str(tmp_path / "gone")
    assert "gone" in _fails("cat", missing, "orders-0")
    assert "gone" in _fails("ls", missing)
    assert "gone" in _fails("locate", missing, "orders-0", "--offset", "0")


@pytest.mark.parametrize("offset", ["-1000000", "999999999", "4"])
def test_offset_out_of_range_is_one_sentence(offset: str) -> None:
    # metrics_raw-0's log starts at 5000000367 (log-start-offset-checkpoint): offset 4 is below it
    logdir = golden_logdir("metrics_raw-0")
    assert "out of range" in _fails("locate", logdir, "metrics_raw-0", "--offset", offset)
    assert "out of range" in _fails("cat", logdir, "metrics_raw-0", "--offset", offset)


@pytest.mark.parametrize("spec", ["yesterday", "2018-13-45T00:00:00Z", "12:00"])
def test_bad_time_spec_is_one_sentence(spec: str) -> None:
    assert spec in _fails("locate", golden_logdir("orders-0"), "orders-0", "--time", spec)
    assert spec in _fails("cat", golden_logdir("orders-0"), "orders-0", "--time", spec)


def test_bad_offset_spec_is_one_sentence() -> None:
    assert "soon" in _fails("locate", golden_logdir("orders-0"), "orders-0", "--offset", "soon")


def test_time_after_every_record_is_one_sentence() -> None:
    _fails("locate", golden_logdir("orders-0"), "orders-0", "--time", "4102444800000")


def test_value_of_a_gap_is_one_sentence() -> None:
    offsets = {r["offset"] for r in read_jsonl(GOLDEN / "inventory-2" / "records.jsonl")}
    info = json.loads((GOLDEN / "inventory-2" / "info.json").read_text())
    gap = next(o for o in range(info["log_start_offset"], info["log_end_offset"]) if o not in offsets)
    assert str(gap) in _fails("cat", golden_logdir("inventory-2"), "inventory-2", "--offset", str(gap),
                              "--format", "value")
