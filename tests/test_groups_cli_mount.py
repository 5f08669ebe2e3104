"""`kfs groups` as users run it, and `.groups/` through a real mount, against the oracle.

One random `__consumer_offsets` (three partitions, transactions, tombstones, group metadata) is
written once per module; the command line and the mounted files must give the oracle's answer at
the log end and at instants in between, and agree with each other byte for byte.
"""

from __future__ import annotations

import errno
import json
import os
import random
import time
from collections.abc import Iterator
from pathlib import Path

import offsets_log as ol
import pytest
from conftest import run_kfs
from groups_oracle import Written, comparable, oracle, write_log
from mounts import mounted, needs_fuse

SEED = 20241105


@pytest.fixture(scope="module")
def offsets_log(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Written]]:
    logdir = tmp_path_factory.mktemp("logdir")
    written = write_log(logdir, random.Random(SEED), 3, 150)
    return logdir, written


def middle_instants(written: list[Written], n: int = 5) -> list[int]:
    stamps = sorted({w.timestamp for w in written})
    return [stamps[i * (len(stamps) - 1) // (n - 1)] for i in range(n)]


def cli_lines(*args: str) -> list[dict]:
    result = run_kfs("groups", *args)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_cli_json_is_the_replay_at_the_log_end_and_at_each_instant(offsets_log) -> None:
    logdir, written = offsets_log
    assert comparable(cli_lines(str(logdir), "--json")) == oracle(written, None)
    for at in middle_instants(written):
        assert comparable(cli_lines(str(logdir), "--json", "--at", str(at))) == oracle(written, at), at


def test_cli_takes_iso_times_and_one_group(offsets_log) -> None:
    logdir, written = offsets_log
    at = middle_instants(written)[2]
    iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at // 1000)) + f".{at % 1000:03d}Z"
    expected = oracle(written, at)
    group = expected[0]["group"]
    lines = cli_lines(str(logdir), "--json", "--at", iso, "--group", group)
    assert comparable(lines) == [line for line in expected if line["group"] == group]


def test_cli_table_shows_every_group_and_committed_partition(offsets_log) -> None:
    logdir, written = offsets_log
    result = run_kfs("groups", str(logdir))
    assert result.returncode == 0, result.stderr
    text = result.stdout.decode()
    expected = oracle(written, None)
    for line in expected:
        if "topic" not in line:
            assert f"GROUP {line['group']}  classic  {line['state']}  generation {line['generation']}" in text
    rows = [r.split() for r in text.splitlines() if r.startswith("  ") and not r.strip().startswith("TOPIC")]
    offsets = [line for line in expected if "topic" in line]
    assert [(r[0], int(r[1]), int(r[2]), int(r[3])) for r in rows if r[0] != "(no"] == [
        (o["topic"], o["partition"], o["offset"], o["leader_epoch"]) for o in offsets]
    header = next(r for r in text.splitlines() if r.strip().startswith("TOPIC"))
    first_row = next(r for r in text.splitlines() if r.startswith("  ") and r.split()[0] in ("a", "b"))
    assert header.index("COMMITTED-AT") == first_row.index(first_row.split()[4])  # columns line up


@pytest.mark.parametrize("args, message", [
    (["/nonexistent/logdir"], "no such directory"),
    (["LOGDIR", "--at", "yesterday"], "is not a time"),
    (["LOGDIR", "--group", "no-such-group"], "no group no-such-group"),
])
def test_cli_errors_are_one_sentence(offsets_log, args: list[str], message: str) -> None:
    logdir, _ = offsets_log
    result = run_kfs("groups", *[str(logdir) if a == "LOGDIR" else a for a in args])
    assert result.returncode == 1
    err = result.stderr.decode()
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_cli_on_a_log_dir_without_consumer_offsets_prints_no_groups(tmp_path: Path) -> None:
    (tmp_path / "meta.properties").write_text("version=1\n")
    result = run_kfs("groups", str(tmp_path), "--json")
    assert result.returncode == 0 and result.stdout == b""


# ---- the mount -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def groups_mount(offsets_log, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    logdir, _ = offsets_log
    with mounted(tmp_path_factory.mktemp("groups-mount"), [str(logdir)]) as mountpoint:
        yield mountpoint


def file_name(group: str) -> str:
    return group.replace("%", "%25").replace("/", "%2F")


@needs_fuse
def test_mount_all_jsonl_is_the_cli_output(offsets_log, groups_mount: Path) -> None:
    logdir, written = offsets_log
    cli = run_kfs("groups", str(logdir), "--json").stdout
    path = groups_mount / ".groups" / "all.jsonl"
    assert path.read_bytes() == cli
    assert os.stat(path).st_size == len(cli)
    at = middle_instants(written)[1]
    at_path = groups_mount / ".groups" / "all" / "at" / f"{at}.jsonl"
    assert at_path.read_bytes() == run_kfs("groups", str(logdir), "--json", "--at", str(at)).stdout


@needs_fuse
def test_mount_group_files_are_the_replay(offsets_log, groups_mount: Path) -> None:
    _, written = offsets_log
    expected = oracle(written, None)
    groups = sorted({line["group"] for line in expected})
    listed = sorted(os.listdir(groups_mount / ".groups"))
    assert listed == sorted([file_name(g) + ".json" for g in groups] + ["all.jsonl"])
    for group in groups:
        path = groups_mount / ".groups" / f"{file_name(group)}.json"
        data = path.read_bytes()
        assert os.stat(path).st_size == len(data)
        doc = json.loads(data)
        lines = ([doc["state"]] if doc["state"] else []) + doc["offsets"]
        assert comparable(lines) == [line for line in expected if line["group"] == group]
    for at in middle_instants(written):
        expected_at = oracle(written, at)
        for group in groups:
            path = groups_mount / ".groups" / file_name(group) / "at" / f"{at}.json"
            mine = [line for line in expected_at if line["group"] == group]
            if not mine:
                with pytest.raises(FileNotFoundError):
                    path.read_bytes()
                continue
            doc = json.loads(path.read_bytes())
            assert doc["at"] == at
            assert comparable(([doc["state"]] if doc["state"] else []) + doc["offsets"]) == mine


@needs_fuse
def test_mount_groups_dir_is_looked_up_read_only_and_at_lists_nothing(offsets_log, groups_mount: Path) -> None:
    _, written = offsets_log
    group = oracle(written, None)[0]["group"]
    assert ".groups" not in os.listdir(groups_mount)
    assert os.listdir(groups_mount / ".groups" / file_name(group) / "at") == []
    with pytest.raises(FileNotFoundError):
        os.stat(groups_mount / ".groups" / "no-such-group" / "at")
    with pytest.raises(FileNotFoundError):
        os.stat(groups_mount / ".groups" / file_name(group) / "at" / "not-a-time.json")
    with pytest.raises(OSError) as raised:
        open(groups_mount / ".groups" / "all.jsonl", "w")  # noqa: SIM115
    assert raised.value.errno == errno.EROFS
    iso = groups_mount / ".groups" / file_name(group) / "at" / "2100-01-01T00:00:00Z.json"
    assert json.loads(iso.read_bytes())["offsets"] == json.loads(
        (groups_mount / ".groups" / f"{file_name(group)}.json").read_bytes())["offsets"]


@needs_fuse
def test_mount_sees_new_commits(tmp_path: Path) -> None:
    logdir = tmp_path / "logdir"
    writer = ol.PartitionWriter(str(logdir), 0)
    writer.append([(1000, ol.offset_commit_key("g", "t", 0), ol.offset_commit_value(5, "", 1000, 0))])
    writer.close()
    with mounted(tmp_path, [str(logdir)]) as mountpoint:
        path = mountpoint / ".groups" / "g.json"
        assert json.loads(path.read_bytes())["offsets"][0]["offset"] == 5
        writer = ol.PartitionWriter.reopen(str(logdir), 0, 1)
        writer.append([(2000, ol.offset_commit_key("g", "t", 0), ol.offset_commit_value(9, "", 2000, 0))])
        writer.close()
        deadline = time.monotonic() + 10
        while json.loads(path.read_bytes())["offsets"][0]["offset"] != 9:
            assert time.monotonic() < deadline, "the new commit never showed"
            time.sleep(0.2)
        assert os.stat(path).st_size == len(path.read_bytes())
        assert json.loads((mountpoint / ".groups" / "g" / "at" / "1500.json").read_bytes())["offsets"][0]["offset"] == 5
