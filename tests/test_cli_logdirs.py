"""Only Kafka log dirs are read: every wrong LOGDIR is one sentence naming what is wrong and what a log
dir looks like, for `kfs ls/cat/locate/mount` and Spark's planner alike; comma-separated lists work."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import GOLDEN, LOGDIRS, read_jsonl, run_kfs

RULE = "a Kafka log dir holds meta.properties or <topic>-<partition> directories"


def _wrong_logdirs(tmp_path: Path) -> dict[str, tuple[str, str]]:
    """case -> (path, what the sentence must say about it)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    parent = Path(LOGDIRS[0]).parent
    return {
        "/etc": ("/etc", "is not a Kafka log dir"),
        "a partition directory": (str(Path(LOGDIRS[0]) / "orders-0"), f"give its parent {LOGDIRS[0]}"),
        "the parent of the log dirs": (str(parent), f"holds log dirs rather than partitions: give the log dirs, "
                                                    f"e.g. {LOGDIRS[0]},{LOGDIRS[1]}"),
        "an empty directory": (str(empty), "is an empty directory"),
        "a missing directory": (str(tmp_path / "missing"), "no such directory"),
        "a file": (str(Path(LOGDIRS[0]) / "meta.properties"), "is a file, not a log dir"),
    }


def _one_sentence(stderr: bytes) -> str:
    text = stderr.decode()
    assert text.startswith("kfs: ") and text.count("\n") == 1 and "Traceback" not in text, text
    return text


@pytest.mark.parametrize("command", ["ls", "cat", "locate", "mount"])
def test_every_wrong_logdir_is_one_sentence_naming_it_and_the_rule(tmp_path: Path, command: str) -> None:
    (tmp_path / "mnt").mkdir()
    for case, (path, says) in _wrong_logdirs(tmp_path).items():
        args = {"ls": ["ls", path], "cat": ["cat", path, "orders-0"],
                "locate": ["locate", path, "orders-0", "--offset", "0"],
                "mount": ["mount", "-o", f"log={tmp_path / 'log'}", path, str(tmp_path / "mnt")]}[command]
        done = run_kfs(*args)
        assert done.returncode == 1, (case, done)
        text = _one_sentence(done.stderr)
        assert path in text and says in text and RULE in text, (case, text)
        assert not os.path.ismount(tmp_path / "mnt")


def test_the_mount_helper_form_refuses_a_wrong_logdir(tmp_path: Path) -> None:
    (tmp_path / "mnt").mkdir()
    done = run_kfs("/etc", str(tmp_path / "mnt"), "-o", "ro")  # what mount.fuse3 runs for an fstab line
    assert done.returncode == 1
    assert "/etc is not a Kafka log dir" in _one_sentence(done.stderr)


def test_a_copy_without_meta_properties_is_a_log_dir_by_its_partitions(tmp_path: Path) -> None:
    shutil.copytree(Path(LOGDIRS[1]) / "web_clicks-1", tmp_path / "copy" / "web_clicks-1")
    done = run_kfs("cat", str(tmp_path / "copy"), "web_clicks-1")
    assert done.returncode == 0, done.stderr
    assert [json.loads(x) for x in done.stdout.splitlines()] == read_jsonl(GOLDEN / "web_clicks-1" / "records.jsonl")
    # a partition directory without segment files does not make its parent a log dir
    (tmp_path / "bare" / "orders-0").mkdir(parents=True)
    assert "is not a Kafka log dir" in _one_sentence(run_kfs("ls", str(tmp_path / "bare")).stderr)


def test_comma_separated_log_dirs_as_in_log_dirs(tmp_path: Path) -> None:
    both = ",".join(LOGDIRS)
    listed = json.loads(run_kfs("ls", "--json", both).stdout)
    assert sorted(f"{p['topic']}-{p['partition']}" for p in listed) == sorted(
        p.name for d in LOGDIRS for p in Path(d).iterdir() if p.is_dir() and "." not in p.name.rsplit("-", 1)[-1]
        and p.name.rsplit("-", 1)[-1].isdigit())
    for partition in ("orders-0", "payments-0"):  # one in each log dir
        done = run_kfs("cat", both, partition)
        assert done.returncode == 0, done.stderr
        assert [json.loads(x) for x in done.stdout.splitlines()] == read_jsonl(GOLDEN / partition / "records.jsonl")
    done = run_kfs("locate", both, "payments-0", "--offset", "0")
    assert done.returncode == 0 and json.loads(done.stdout)["offset"] == 0
    bad = run_kfs("ls", f"{LOGDIRS[0]},/etc")
    assert bad.returncode == 1 and "/etc is not a Kafka log dir" in _one_sentence(bad.stderr)


def test_spark_planning_refuses_a_wrong_logdir() -> None:
    from kfs.spark.options import parse_options
    from kfs.spark.plan import plan_splits
    from kfs.storage import NotALogDir

    with pytest.raises(NotALogDir, match="is not a Kafka log dir"):
        plan_splits(parse_options({"path": f"{LOGDIRS[0]},/etc"}))
