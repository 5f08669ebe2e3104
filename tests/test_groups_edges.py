"""`kfs groups` and `.groups/` at the edges (issue 29 items 2 and 5): times no date can show, and group
ids the tree cannot carry as they are.

- A commit timestamp or an `--at` past year 9999 (or anything else no date can show) is its number,
  said to be out of range where the table shows a date; JSON has the number. One such commit never
  breaks the table (it was a datetime traceback).
- Every group id is listed in `.groups/` and reachable there, under a name the tree can carry
  (kfs.fuse.groups_tree.file_name, documented in the README): an id over 255 bytes made `ls` fail
  with EIO for every group; a NUL or `/`, `.`, `..`, `""` and ids ending in `.json` named nothing
  that opens, or something else.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import offsets_log as ol
import pytest
from conftest import run_kfs
from hypothesis import given, settings
from hypothesis import strategies as st
from mounts import mounted, needs_fuse

from kfs.fuse.groups_tree import NAME_MAX, file_name, group_name

FIXTURES_ROOT = Path(__file__).parent / "fixtures"

YEAR_10000 = 253402300800000  # 10000-01-01T00:00:00Z: the first millisecond Python's datetime cannot show
FAR = 2**62


def _write(logdir: Path, commits: list[tuple[str, int]], at: int = 1000) -> None:
    writer = ol.PartitionWriter(str(logdir), 0)
    for i, (group, commit_timestamp) in enumerate(commits):
        value = ol.offset_commit_value(5 + i, "", commit_timestamp, 0)
        writer.append([(at + i, ol.offset_commit_key(group, "t", 0), value)])
    writer.close()


@pytest.fixture(scope="module")
def far_logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    logdir = tmp_path_factory.mktemp("far")
    _write(logdir, [("near", 1000), ("far", FAR), ("y10k", YEAR_10000), ("last", YEAR_10000 - 1), ("neg", -7)])
    return logdir


def test_times_past_what_a_date_shows_are_numbers_in_the_table(far_logdir: Path) -> None:
    for args in ([], ["--at", str(YEAR_10000)], ["--at", str(FAR)], ["--at", str(2**63 - 1)], ["--group", "far"]):
        done = run_kfs("groups", str(far_logdir), *args)
        out, err = done.stdout.decode(), done.stderr.decode()
        assert done.returncode == 0 and "Traceback" not in err, (args, err)
        if "--group" not in args:
            assert f"{FAR} (out of range)" in out and f"{YEAR_10000} (out of range)" in out, out
            assert "9999-12-31T23:59:59.999Z" in out and "1970-01-01T00:00:01.000Z" in out and " -7 " in out + " "
        if "--at" in args:
            assert out.startswith(f"Committed offsets as of {args[1]} (out of range):"), out
    done = run_kfs("groups", str(far_logdir), "--json", "--at", str(FAR))
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert {line["group"]: line["commit_timestamp"] for line in lines} == {
        "near": 1000, "far": FAR, "y10k": YEAR_10000, "last": YEAR_10000 - 1, "neg": -7}


@needs_fuse
def test_the_mount_shows_far_times_as_the_command_does(far_logdir: Path, tmp_path: Path) -> None:
    with mounted(tmp_path, [str(far_logdir)]) as mnt:
        assert (mnt / ".groups" / "all" / "at" / f"{YEAR_10000}.jsonl").read_bytes() == run_kfs(
            "groups", str(far_logdir), "--json", "--at", str(YEAR_10000)).stdout
        assert json.loads((mnt / ".groups" / "far.json").read_bytes())["offsets"][0]["commit_timestamp"] == FAR


# ---- group ids as names ----------------------------------------------------------------------------

LONG = "g" * 300
IDS = ["plain", "..", ".", "", "all.jsonl", "all.json", "all", "x.json", "x.jsonl", "a/b", "x\0y", "%", "%2F",
       "%25", ".hidden", "é" * 200, LONG, LONG + "-other", "日本語/グループ", "tab\there", "100%", "a%2", "%~"]


def test_every_id_has_a_name_the_tree_can_carry_and_back() -> None:
    names = {file_name(group): group for group in IDS}
    assert len(names) == len(IDS)  # one name per id
    for name, group in names.items():
        _check_name(name)
        assert group_name(name) in (group, None)  # None: a long id's name, found among the known ids


def _check_name(name: str) -> None:
    raw = name.encode("utf-8", "surrogateescape")
    assert 0 < len(raw) + len(".json") <= NAME_MAX, name
    assert "/" not in name and "\0" not in name and not name.startswith("."), name
    assert not name.endswith((".json", ".jsonl")), name  # (so its directory is not taken for a file)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.characters(codec="utf-8") | st.sampled_from(["%", "/", ".", "\0", "%2F", ".json", "é" * 60,
                                                                      "x" * 100, "%~"]),
                         max_size=40).map("".join), unique=True, max_size=5))
def test_names_are_carried_and_reversible_for_any_ids(groups: list[str]) -> None:
    names = [file_name(g) for g in groups]
    assert len(set(names)) == len(groups)
    for group, name in zip(groups, names, strict=True):
        _check_name(name)
        decoded = group_name(name)
        assert decoded == group or (decoded is None and len(group.encode("utf-8", "surrogatepass")) > 200)


@pytest.fixture(scope="module")
def odd_logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    logdir = tmp_path_factory.mktemp("odd-ids")
    _write(logdir, [(group, 1000 + i) for i, group in enumerate(IDS)])
    return logdir


def test_the_command_lists_every_id(odd_logdir: Path) -> None:
    done = run_kfs("groups", str(odd_logdir), "--json")
    assert done.returncode == 0, done.stderr
    assert sorted(json.loads(line)["group"] for line in done.stdout.splitlines()) == sorted(IDS)


@needs_fuse
def test_every_group_is_listed_and_reachable_in_the_mount(odd_logdir: Path, tmp_path: Path) -> None:
    with mounted(tmp_path, [str(odd_logdir)]) as mnt:
        groups_dir = mnt / ".groups"
        listed = os.listdir(groups_dir)
        assert sorted(listed) == sorted([file_name(g) + ".json" for g in IDS] + ["all.jsonl"])
        found = {}
        for name in listed:
            if name == "all.jsonl":
                continue
            doc = json.loads((groups_dir / name).read_bytes())
            found[name] = doc["group"]
            assert doc["offsets"][0]["group"] == doc["group"]
            # the group's own directory: at/ lists nothing, its names are times
            directory = groups_dir / name[:-len(".json")]
            assert os.listdir(directory) == ["at"] and os.listdir(directory / "at") == []
            at = json.loads((directory / "at" / "2100-01-01T00:00:00Z.json").read_bytes())
            assert at["group"] == doc["group"] and at["offsets"] == doc["offsets"]
        assert sorted(found.values()) == sorted(IDS)
        assert [json.loads(line)["group"] for line in (groups_dir / "all.jsonl").read_bytes().splitlines()] == \
            [json.loads(line)["group"] for line in run_kfs("groups", str(odd_logdir), "--json").stdout.splitlines()]
        for wrong in ("a%2fb.json", "%2E%2E.json", "nope.json", file_name(LONG)[:-1] + ".json", "%zz.json"):
            assert not (groups_dir / wrong).exists(), wrong  # one name per group: no aliases


# Java's own answers (`Utils.abs(s.hashCode()) % 50`, run with javac/java 17 here): the partition the
# group coordinator keeps each group in, non-ASCII and a surrogate pair included.
COORDINATOR_PARTITIONS = {"billing-service": 39, "adhoc-tool": 42, "": 0, "é😀x": 42, "polygenelubricants": 0,
                          "group-Aa": 20}


def test_the_coordinator_partition_is_kafkas() -> None:
    from kfs.groups.replay import coordinator_partition

    assert {g: coordinator_partition(g) for g in COORDINATOR_PARTITIONS} == COORDINATOR_PARTITIONS


def test_kfs_groups_says_which_offsets_partitions_it_read_and_where_a_missing_group_lives() -> None:
    logdirs = [str(p) for p in sorted((FIXTURES_ROOT / "internal-topics" / "logdirs").iterdir())]
    done = run_kfs("groups", *logdirs)
    assert done.returncode == 0
    assert b"read __consumer_offsets partitions 0-2: 3 of 50" in done.stdout and done.stderr == b""
    assert b"read __consumer_offsets" not in run_kfs("groups", *logdirs, "--json").stdout  # (JSON: records only)
    missing = run_kfs("groups", *logdirs, "--group", "nope")
    assert missing.returncode == 1
    assert b"no group nope: its partition, __consumer_offsets-4 (of 50), is not in these log dirs" in missing.stderr
