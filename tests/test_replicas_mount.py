"""A real mount of two brokers' log dirs (tests/replica_copies.py): the reference copy as `<tp>/`, each
broker's copy under `.replicas/<broker>/<tp>/`, `replicas.json` and `truncated.jsonl` as the command
gives them; a partition on one broker only, and a mount of one broker, as before."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import run_kfs
from mounts import mounted, needs_fuse
from replica_copies import NAME, CopySpec, run_of, write_copy

pytestmark = needs_fuse


@pytest.fixture
def unclean(tmp_path: Path) -> list[str]:
    """Broker 1 holds 0..29 at epoch 0 (high watermark 30); broker 2 was elected at epoch 1 without
    20..29 and wrote 20..24 of its own; broker 2 alone holds solo-0."""
    dirs = [str(write_copy(tmp_path / "logs", CopySpec(1, run_of(0, 0, 30, "old"), 30, [(0, 0)]))),
            str(write_copy(tmp_path / "logs", CopySpec(2, run_of(0, 0, 20, "old") + run_of(1, 20, 25, "new"), 20,
                                                       [(0, 0), (1, 20)])))]
    solo = Path(dirs[1]) / "solo-0"
    solo.mkdir()
    (solo / f"{0:020d}.log").write_bytes(b"")
    return dirs


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_replicated_partition_reference_and_copies(tmp_path: Path, unclean: list[str]) -> None:
    with mounted(tmp_path, unclean) as mnt:
        assert sorted(os.listdir(mnt)) == [NAME, "solo-0"]  # (.replicas looked up, not listed)
        assert sorted(os.listdir(mnt / NAME)) == ["info.json", "messages.jsonl", "offset", "replicas.json", "time"]
        reference = _lines(mnt / NAME / "messages.jsonl")
        assert [r["value"] for r in reference[-2:]] == ["new-23", "new-24"]  # broker 2's copy: the highest epoch
        assert sorted(os.listdir(mnt / ".replicas")) == ["1", "2"]
        assert os.listdir(mnt / ".replicas" / "1") == [NAME] and os.listdir(mnt / ".replicas" / "2") == [NAME]
        old = mnt / ".replicas" / "1" / NAME
        assert sorted(os.listdir(old)) == ["info.json", "messages.jsonl", "offset", "time", "truncated.jsonl"]
        assert [r["value"] for r in _lines(old / "messages.jsonl")[-1:]] == ["old-29"]
        assert (old / "offset" / "25.value").read_bytes() == b"old-25"
        assert not (mnt / NAME / "offset" / "25.value").exists()  # (the reference ends at 25)
        truncated = old / "truncated.jsonl"
        expected = run_kfs("replicas", *unclean, NAME, "--truncated", "1").stdout
        assert truncated.read_bytes() == expected and os.stat(truncated).st_size == len(expected)
        assert [r["offset"] for r in _lines(truncated)] == list(range(20, 30))
        assert (mnt / ".replicas" / "2" / NAME / "truncated.jsonl").read_bytes() == b""
        shown = json.loads((mnt / NAME / "replicas.json").read_bytes())
        given = json.loads(run_kfs("replicas", *unclean, NAME, "--json").stdout)
        assert shown == given and shown["leader"] == 2
        assert {r["broker"]: r["lost_committed_records"] for r in shown["replicas"]} == {1: 10, 2: 0}
        # A partition on one broker: as ever, no replicas.json, nothing under .replicas.
        assert "replicas.json" not in os.listdir(mnt / "solo-0")
        for missing in (mnt / "solo-0" / "replicas.json", mnt / ".replicas" / "2" / "solo-0",
                        mnt / ".replicas" / "3", mnt / ".replicas" / "x", mnt / ".replicas" / "1" / NAME / "nope"):
            assert not missing.exists(), missing


def test_one_broker_mount_has_no_replicas(tmp_path: Path) -> None:
    one = str(write_copy(tmp_path / "logs", CopySpec(1, run_of(0, 0, 10), 10)))
    with mounted(tmp_path, [one]) as mnt:
        assert sorted(os.listdir(mnt / NAME)) == ["info.json", "messages.jsonl", "offset", "time"]
        assert not (mnt / ".replicas").exists()
