"""`kfs cat --format value`: one exact value, or with `--count K` K values each followed by
`--delimiter` (a newline by default); a tombstone is told from an empty value by exit status 3 and
`--null TEXT`, and its JSON line keeps `"value": null`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from builders import golden_bytes
from conftest import GOLDEN, LOGDIRS, golden_logdir, read_jsonl, run_kfs, v2_batch, write_segment

TOMBSTONE = 3


def test_count_prints_k_values_one_per_line() -> None:
    records = read_jsonl(GOLDEN / "orders-0" / "records.jsonl")
    start = 700
    expected = [r for r in records if r["offset"] >= start][:25]
    done = run_kfs("cat", golden_logdir("orders-0"), "orders-0", "--offset", str(start), "--count", "25",
                   "--format", "value", "--null", "<tombstone>")
    values = done.stdout.split(b"\n")
    assert values[-1] == b"" and len(values) == 26
    assert values[:-1] == [golden_bytes(r["value"]) if r["value"] is not None else b"<tombstone>" for r in expected]
    assert done.returncode == (TOMBSTONE if any(r["value"] is None for r in expected) else 0)


def test_a_delimiter_of_nul_for_xargs_0() -> None:
    records = read_jsonl(GOLDEN / "orders-0" / "records.jsonl")
    done = run_kfs("cat", golden_logdir("orders-0"), "orders-0", "--count", str(len(records)), "--format", "value",
                   "--delimiter", "\\0")
    assert done.stdout.split(b"\0")[:-1] == [golden_bytes(r["value"]) or b"" for r in records]
    assert done.stdout.endswith(b"\0")


def test_count_from_a_gap_starts_at_the_next_record_and_reaches_the_log_end() -> None:
    records = read_jsonl(GOLDEN / "inventory-2" / "records.jsonl")  # compacted: gaps
    gap = next(r["offset"] - 1 for r in records[1:] if r["offset"] - 1 not in {x["offset"] for x in records})
    after = [r for r in records if r["offset"] > gap]
    done = run_kfs("cat", golden_logdir("inventory-2"), "inventory-2", "--offset", str(gap), "--count", "100000",
                   "--format", "value")
    assert done.stdout.split(b"\n")[:-1] == [golden_bytes(r["value"]) or b"" for r in after]
    exact = run_kfs("cat", golden_logdir("inventory-2"), "inventory-2", "--offset", str(gap), "--format", "value")
    assert exact.returncode == 1 and b"no record at offset" in exact.stderr  # one value is exact
    assert run_kfs("cat", LOGDIRS[1], "inventory-2", "--count", "0", "--format", "value").stdout == b""


def test_a_tombstone_is_not_an_empty_value(tmp_path: Path) -> None:
    partition = tmp_path / "logdir" / "kv-0"
    partition.mkdir(parents=True)
    shutil.copy(Path(LOGDIRS[0]) / "meta.properties", tmp_path / "logdir")
    rows = [(0, 1000, b"a", b"", []), (1, 1001, b"a", None, []), (2, 1002, b"b", b"x", [])]
    write_segment(str(partition), 0, [[(v2_batch(0, rows), rows)]])
    logdir = str(tmp_path / "logdir")

    empty = run_kfs("cat", logdir, "kv-0", "--offset", "0", "--format", "value")
    tombstone = run_kfs("cat", logdir, "kv-0", "--offset", "1", "--format", "value")
    assert (empty.returncode, empty.stdout, empty.stderr) == (0, b"", b"")
    assert (tombstone.returncode, tombstone.stdout, tombstone.stderr) == (TOMBSTONE, b"", b"")
    marked = run_kfs("cat", logdir, "kv-0", "--offset", "1", "--format", "value", "--null", "NULL")
    assert (marked.returncode, marked.stdout) == (TOMBSTONE, b"NULL")

    listed = run_kfs("cat", logdir, "kv-0", "--count", "3", "--format", "value", "--null", "\\x00null")
    assert (listed.returncode, listed.stdout) == (TOMBSTONE, b"\n\x00null\nx\n")
    assert run_kfs("cat", logdir, "kv-0", "--offset", "2", "--count", "1", "--format", "value").returncode == 0

    lines = [json.loads(x) for x in run_kfs("cat", logdir, "kv-0").stdout.splitlines()]
    assert [line["value"] for line in lines] == ["", None, "x"]
