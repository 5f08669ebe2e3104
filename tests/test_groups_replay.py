"""The group replay against a brute-force oracle, on `__consumer_offsets` logs written here.

The oracle (tests/groups_oracle.py) is the coordinator's replay taken literally: every record of a
partition in offset order, each decoded, skipped when its timestamp is after T; a commit sets, a
tombstone removes (also from open transactions), transactional commits wait for their marker and
then win only over older record offsets. kfs's scan keeps the last record per raw key and decodes
afterwards; the two must agree at every record timestamp (and around it), and at the log end.

The keys and values are written in Kafka's binary formats by tests/offsets_log.py (offset commit
values v1 and v3, keys v0 and v1: two key versions name the same partition) and decoded by
kfs.internal_topics for the oracle as for kfs; the Kafka-written golden data pins the decoding itself
(test_groups_golden.py).
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import offsets_log as ol
import pytest
from groups_oracle import Written, commit_key, comparable, instants, observed, oracle, write_log
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from offsets_log import PartitionWriter

from kfs.groups import parallel
from kfs.groups.reader import GroupsReader
from kfs.groups.render import offset_line
from kfs.groups.replay import CONSUMER_OFFSETS
from kfs.groups.state import CommittedOffset
from kfs.storage import LogDirs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), partitions=st.integers(1, 3), batches=st.integers(1, 80))
def test_replay_agrees_with_the_oracle_at_every_instant(tmp_path_factory: pytest.TempPathFactory, seed: int,
                                                        partitions: int, batches: int) -> None:
    tmp = tmp_path_factory.mktemp("offsets")
    written = write_log(tmp, random.Random(seed), partitions, batches)
    reader = GroupsReader(LogDirs([str(tmp)]))
    for at in instants(written):
        expected = oracle(written, at)
        assert observed(reader, at) == expected, f"at {at}"
        for group in ("g0", "g3"):  # one group's replay reads only the partitions naming it
            mine = comparable(list(reader.snapshot(at, group).lines()))
            assert mine == [line for line in expected if line["group"] == group], f"{group} at {at}"


def test_the_log_end_view_follows_appends(tmp_path: Path) -> None:
    """A kept reader continues its scans as partitions grow, and starts over when a segment is replaced."""
    rnd = random.Random(7)
    written = write_log(tmp_path, rnd, 2, 60)
    reader = GroupsReader(LogDirs([str(tmp_path)]))
    assert observed(reader, None) == oracle(written, None)
    writer = PartitionWriter.reopen(str(tmp_path), 0, max(w.offset for w in written if w.partition == 0) + 1)
    ts = max(w.timestamp for w in written) + 10
    key = commit_key("g0", "a", 0, 1)
    value = ol.offset_commit_value(424242, "", ts, 1)
    base = writer.append([(ts, key, value)])
    writer.close()
    written.append(Written(0, base, ts, key, value, -1, False, False))
    assert observed(reader, None) == oracle(written, None)
    assert any(line.get("offset") == 424242 for line in observed(reader, None))
    # The log cleaner's way: segment files replaced by new ones (new inodes) under the same names.
    other = tmp_path / "other"
    rewritten = write_log(other, random.Random(8), 2, 60)
    for partition_dir in other.iterdir():
        for old in (tmp_path / partition_dir.name).iterdir():
            old.unlink()
        for new in partition_dir.iterdir():
            os.replace(new, tmp_path / partition_dir.name / new.name)
    reader.logdirs.partition(f"{CONSUMER_OFFSETS}-0").refresh(force=True)
    reader.logdirs.partition(f"{CONSUMER_OFFSETS}-1").refresh(force=True)
    assert observed(reader, None) == oracle(rewritten, None)


@settings(max_examples=200, deadline=None)
@given(group=st.text(), topic=st.text(), partition=st.integers(0, 2**31 - 1), offset=st.integers(-1, 2**63 - 1),
       epoch=st.integers(-1, 2**31 - 1), metadata=st.none() | st.text(), stamps=st.lists(st.integers(-1, 2**62),
                                                                                    min_size=3, max_size=3))
def test_offset_lines_are_the_json_of_their_fields(group: str, topic: str, partition: int, offset: int, epoch: int,
                                                   metadata: str | None, stamps: list[int]) -> None:
    committed = CommittedOffset(group, topic, partition, offset, epoch, metadata, stamps[0], stamps[1], 3,
                                offset // 2, stamps[2])
    line = offset_line(committed)
    assert line == json.dumps(committed.as_json(), ensure_ascii=False) + "\n"
    assert json.loads(line) == committed.as_json()


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_worker_processes_give_the_same_snapshot(tmp_path: Path, workers: int) -> None:
    written = write_log(tmp_path, random.Random(workers), 4, 120)
    dirs = LogDirs([str(tmp_path)])
    for at in [None, *instants(written)[1::17]]:
        lines = list(parallel.snapshot(dirs, at, workers=workers).lines())
        assert lines == list(GroupsReader(dirs).snapshot(at).lines())
        assert comparable(lines) == oracle(written, at)


def test_the_collector_is_paused_during_replays_and_back_after_the_last() -> None:
    """Replays overlap in a mount's threads: the collector is off while any runs, on after the
    last one (only if it was on before the first), and the replay's answer is the same."""
    import gc
    import threading

    from kfs.groups.collector import collector_paused

    assert gc.isenabled()
    first_in, second_done = threading.Event(), threading.Event()
    seen: list[bool] = []

    def second() -> None:
        first_in.wait(5)
        with collector_paused():
            seen.append(gc.isenabled())
        second_done.set()

    worker = threading.Thread(target=second)
    worker.start()
    with collector_paused():
        first_in.set()
        second_done.wait(5)  # the second replay began and ended inside the first
        seen.append(gc.isenabled())
    worker.join(5)
    assert seen == [False, False]
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled(), "a collector someone else turned off was turned on"
    finally:
        gc.enable()
