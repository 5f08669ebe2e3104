"""`kfs replicas --json` against Kafka's answers (issue 25, SPEC section 10).

The log dirs of tests/fixtures/replicas were written by Kafka's own classes, one scenario a directory
(identical copies, a follower behind, KIP-101, KIP-279, an unclean election, stale and missing
leader-epoch-checkpoints, an epoch without batches, compacted copies, three replicas, legacy v0/v1
batches, a recreated topic); golden/runs.json names each run (log dirs, arguments, exit status) and its
golden/<run>.jsonl holds the partition objects, one a line as `--json` prints them, that Kafka's
LeaderEpochFileCache and the fetcher's truncation rule give (see the fixture's README). Each run is
compared field by field: every field of SPEC section 10 and `compared`; kfs may print more. The same
objects are read from a mount's `<tp>/replicas.json`, and `--truncated BROKER` offers the records counted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import run_kfs
from mounts import mounted, needs_fuse

FIXTURE = Path(__file__).parent / "fixtures" / "replicas"
RUNS: list[dict[str, Any]] = json.loads((FIXTURE / "golden" / "runs.json").read_text())


def _replicas_json(run: dict[str, Any]) -> tuple[int, bytes, bytes]:
    logdirs = [str(FIXTURE / d) for d in run["logdirs"]]
    proc = run_kfs("replicas", *logdirs, *run["args"], "--json")
    return proc.returncode, proc.stdout, proc.stderr


def _where(run: dict[str, Any], part: dict[str, Any], broker: int | None = None) -> str:
    place = f"{run['run']}: {part['topic']}-{part['partition']}"
    return place if broker is None else f"{place}, broker {broker}'s copy"


def _compare_partition(run: dict[str, Any], got: dict[str, Any], want: dict[str, Any]) -> list[str]:
    """Every field of the golden partition object, as `field: kfs says X, Kafka says Y` lines."""
    problems = []
    for key in ("topic", "partition", "leader"):
        if got.get(key) != want[key]:
            problems.append(f"{_where(run, want)}: {key}: kfs says {got.get(key)!r}, Kafka says {want[key]!r}")
    got_brokers = [r.get("broker") for r in got.get("replicas", [])]
    want_brokers = [r["broker"] for r in want["replicas"]]
    if got_brokers != want_brokers:
        problems.append(f"{_where(run, want)}: replicas (broker-id order): kfs has {got_brokers}, Kafka {want_brokers}")
        return problems
    for got_r, want_r in zip(got["replicas"], want["replicas"], strict=True):
        for field, expected in want_r.items():
            if field not in got_r:
                problems.append(f"{_where(run, want, want_r['broker'])}: no {field!r} (Kafka says {expected!r})")
            elif got_r[field] != expected:
                problems.append(f"{_where(run, want, want_r['broker'])}: {field}: kfs says {got_r[field]!r}, "
                                f"Kafka says {expected!r}")
    return problems


@pytest.mark.parametrize("run", [r for r in RUNS if r["golden"]], ids=lambda r: r["run"])
def test_replicas_json_is_kafkas_answer(run: dict[str, Any]) -> None:
    """`kfs replicas LOGDIR... [args] --json`: Kafka's answer field by field, and its exit status."""
    status, out, err = _replicas_json(run)
    want = [json.loads(line) for line in (FIXTURE / run["golden"]).read_text().splitlines()]
    assert status == run["exit_status"], (
        f"{run['run']}: exit status {status}, Kafka's answer gives {run['exit_status']} "
        f"(4 when a copy lost committed records); stderr: {err.decode(errors='replace')}")
    got = [json.loads(line) for line in out.decode().splitlines()]
    assert [(p.get("topic"), p.get("partition")) for p in got] == [(p["topic"], p["partition"]) for p in want], (
        f"{run['run']}: the partitions compared (held by two or more brokers, in topic-partition order)")
    problems = [line for g, w in zip(got, want, strict=True) for line in _compare_partition(run, g, w)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("run", [r for r in RUNS if not r["golden"]], ids=lambda r: r["run"])
def test_replicas_refuses_different_partitions_sharing_a_name(run: dict[str, Any]) -> None:
    """A deleted and recreated topic: the same name, another topic id. kfs refuses in one sentence
    naming the partition and both topic ids, and prints no comparison."""
    status, out, err = _replicas_json(run)
    assert status == run["exit_status"], f"{run['run']}: exit status {status}, not {run['exit_status']}"
    message = err.decode()
    assert message.count("\n") == 1 and message.startswith("kfs: "), f"{run['run']}: not one sentence: {message!r}"
    for name in run["stderr_names"]:
        assert name in message, f"{run['run']}: {name} not named in {message!r}"
    assert out.strip() in (b"", b"[]"), f"{run['run']}: printed a comparison: {out[:200]!r}"


def test_every_scenario_has_a_run() -> None:
    """A scenario directory no run reads is a golden answer nobody checks."""
    read = {d.split("/")[1] for r in RUNS for d in r["logdirs"]}
    assert read == {d.name for d in (FIXTURE / "logdirs").iterdir()}


@pytest.mark.parametrize("run", [r for r in RUNS if r["golden"] and not r["args"]], ids=lambda r: r["run"])
def test_truncated_records_are_offered_as_lines(run: dict[str, Any]) -> None:
    """`--truncated BROKER`: exactly the records the golden counts, each at or after truncate_to."""
    logdirs = [str(FIXTURE / d) for d in run["logdirs"]]
    for line in (FIXTURE / run["golden"]).read_text().splitlines():
        part = json.loads(line)
        name = f"{part['topic']}-{part['partition']}"
        for want in part["replicas"]:
            proc = run_kfs("replicas", *logdirs, name, "--truncated", str(want["broker"]))
            assert proc.returncode == 0, f"{run['run']}: {name} broker {want['broker']}: {proc.stderr!r}"
            offsets = [json.loads(x)["offset"] for x in proc.stdout.decode().splitlines()]
            assert len(offsets) == want["truncated_records"], f"{_where(run, part, want['broker'])}: {offsets}"
            assert all(o >= want["truncate_to"] for o in offsets), f"{_where(run, part, want['broker'])}: {offsets}"
            assert offsets == sorted(set(offsets)), f"{_where(run, part, want['broker'])}: {offsets}"


@needs_fuse
@pytest.mark.parametrize("run", [r for r in RUNS if r["golden"] and not r["args"]], ids=lambda r: r["run"])
def test_mount_shows_each_copy_and_replicas_json(run: dict[str, Any], tmp_path: Path) -> None:
    """The mount of a scenario's log dirs: `<tp>/replicas.json` is the golden object, `<tp>/` the
    reference copy, `.replicas/<broker>/<tp>/` each broker's copy (its info.json's log end)."""
    want = [json.loads(line) for line in (FIXTURE / run["golden"]).read_text().splitlines()]
    with mounted(tmp_path, [str(FIXTURE / d) for d in run["logdirs"]]) as mnt:
        for part in want:
            name = f"{part['topic']}-{part['partition']}"
            got = json.loads((mnt / name / "replicas.json").read_bytes())
            problems = _compare_partition(run, got, part)
            assert not problems, "\n".join(problems)
            ends = {r["broker"]: r["log_end_offset"] for r in part["replicas"]}
            info = json.loads((mnt / name / "info.json").read_bytes())
            assert info["log_end_offset"] == ends[part["leader"]], f"{_where(run, part)}: {name}/ is not the reference"
            for broker, end in ends.items():
                info = json.loads((mnt / ".replicas" / str(broker) / name / "info.json").read_bytes())
                assert info["log_end_offset"] == end, f"{_where(run, part, broker)}: .replicas/{broker}/{name}/"
        compared = {f"{p['topic']}-{p['partition']}" for p in want}
        for single in sorted(p.name for p in mnt.iterdir() if p.name not in compared and not p.name.startswith(".")):
            assert not (mnt / single / "replicas.json").exists(), f"{run['run']}: {single} is held by one broker"
