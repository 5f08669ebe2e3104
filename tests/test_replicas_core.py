"""`kfs replicas` and its API over copies written in Python (tests/replica_copies.py): Kafka's truncation
rule round by round, the loss figures, the first difference, the checkpoint notes, and the refusals.
The golden scenarios written with Kafka's own classes are tests/test_replicas_golden.py's."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES, run_kfs
from replica_copies import NAME, Batch, CopySpec, run_of, write_copy

from kfs.replicas import EpochCache, LogView, ReplicaSet, follower_truncation
from kfs.storage import KfsError

INTERNAL = FIXTURES.parent / "internal-topics" / "logdirs" / "broker-a"


def _set(tmp_path: Path, *specs: CopySpec) -> list[str]:
    return [str(write_copy(tmp_path, spec)) for spec in specs]


def _by_broker(found: dict) -> dict[int, dict]:
    return {r["broker"]: r for r in found["replicas"]}


def test_identical_copies_lose_nothing(tmp_path: Path) -> None:
    batches = run_of(0, 0, 20) + run_of(1, 20, 30)
    dirs = _set(tmp_path, CopySpec(1, batches, 30, [(0, 0), (1, 20)]), CopySpec(2, batches, 30, [(0, 0), (1, 20)]))
    result = run_kfs("replicas", *dirs, NAME, "--json")
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["leader"] == 1 and found["leader_from"] == "highest last epoch"  # (tie: longest, then lowest id)
    for r in found["replicas"]:
        assert (r["truncate_to"], r["truncated_records"], r["lost_committed_records"]) == (30, 0, 0)
        assert r["first_difference"] is None and r["epochs"] == [[0, 0], [1, 20]] and r["notes"] == []
    assert _by_broker(found)[2]["compared"] == "batches"


def test_follower_behind_keeps_everything(tmp_path: Path) -> None:
    leader = run_of(0, 0, 20) + run_of(1, 20, 40)
    dirs = _set(tmp_path, CopySpec(1, leader, 40), CopySpec(2, leader[:6], 25))
    found = ReplicaSet(dirs).compare(NAME)
    follower = found.replica(2)
    assert found.leader == 1
    assert (follower.truncation.truncate_to, follower.truncated_records, follower.lost_committed_records) == (30, 0, 0)
    assert follower.first_difference is None  # none before the shorter log end


def test_unclean_election_loses_committed_records_exit_4(tmp_path: Path) -> None:
    """KIP-101's case: broker 1 took writes 20..29 at epoch 0 (acknowledged: its high watermark is 30),
    broker 2 was elected at epoch 1 without them and wrote 20..24 of its own."""
    old = run_of(0, 0, 30, "old")
    new = run_of(0, 0, 20, "old") + run_of(1, 20, 25, "new")
    dirs = _set(tmp_path, CopySpec(1, old, 30, [(0, 0)]), CopySpec(2, new, 20, [(0, 0), (1, 20)]))
    result = run_kfs("replicas", *dirs, "--json")
    assert result.returncode == 4, result.stderr
    found = json.loads(result.stdout)
    assert found["leader"] == 2
    old_copy = _by_broker(found)[1]
    assert old_copy["truncation_rounds"] == [{"requested_epoch": 0, "leader_epoch": 0, "leader_end_offset": 20,
                                              "truncate_to": 20, "completed": True}]
    assert (old_copy["truncate_to"], old_copy["truncated_records"], old_copy["lost_committed_records"]) == (20, 10, 10)
    assert old_copy["first_difference"] == 20
    lines = run_kfs("replicas", *dirs, NAME, "--truncated", "1")
    assert lines.returncode == 0, lines.stderr
    got = [json.loads(line) for line in lines.stdout.splitlines()]
    assert [(g["offset"], g["key"], g["value"]) for g in got] == [(o, f"k{o}", f"old-{o}") for o in range(20, 30)]
    table = run_kfs("replicas", *dirs)
    assert table.returncode == 4 and b"LOSES 10 committed record(s)" in table.stdout


def test_truncation_in_several_rounds_kip_279(tmp_path: Path) -> None:
    """The follower's epoch 2 is unknown to the leader, whose answer (epoch 1, ends at 20) is an epoch
    the follower never had: it truncates to its own epoch 0's end, asks again with epoch 0 (KIP-279)."""
    leader = run_of(0, 0, 5, "a") + run_of(1, 5, 20, "b") + run_of(3, 20, 30, "d")
    follower = run_of(0, 0, 10, "a") + run_of(2, 10, 15, "c")
    dirs = _set(tmp_path, CopySpec(1, leader, 30), CopySpec(2, follower, 15))
    found = ReplicaSet(dirs).compare(NAME)
    rounds = [(r.requested_epoch, r.leader_epoch, r.leader_end_offset, r.truncate_to, r.completed)
              for r in found.replica(2).truncation.rounds]
    assert rounds == [(2, 1, 20, 10, False), (0, 0, 5, 5, True)]
    report = found.replica(2)
    assert (report.truncation.truncate_to, report.truncated_records, report.lost_committed_records) == (5, 10, 10)
    assert report.first_difference == 5


def test_rule_against_kafka_endoffsetfor_cases() -> None:
    """LeaderEpochFileCache.endOffsetFor's four cases, as its unit tests state them."""
    cache = EpochCache([(2, 6), (3, 8), (5, 12)])
    assert cache.end_offset_for(5, 20) == (5, 20)      # the latest epoch: the log end
    assert cache.end_offset_for(3, 20) == (3, 12)      # known: the next epoch's start
    assert cache.end_offset_for(4, 20) == (3, 12)      # unknown, between: the epoch below, the next start
    assert cache.end_offset_for(1, 20) == (1, 6)       # below all: the first start
    assert cache.end_offset_for(6, 20) == (-1, -1)     # above all
    assert cache.end_offset_for(-1, 20) == (-1, -1)
    cache.assign(4, 10)  # non-monotonic: epoch 5 at 12 goes
    assert cache.entries() == [(2, 6), (3, 8), (4, 10)]


def test_follower_without_epochs_truncates_to_its_high_watermark() -> None:
    leader = LogView(EpochCache([(0, 0), (1, 50)]), 0, 80, 80)
    legacy = LogView(EpochCache(), 0, 70, 40)
    assert follower_truncation(leader, legacy).truncate_to == 40
    unknown = LogView(EpochCache(), 10, 70, None)  # no checkpoint: 0, raised to the log start
    assert follower_truncation(leader, unknown).truncate_to == 10


def test_leader_named_by_option_and_refused_when_absent(tmp_path: Path) -> None:
    old = run_of(0, 0, 30, "old")
    new = run_of(0, 0, 20, "old") + run_of(1, 20, 25, "new")
    dirs = _set(tmp_path, CopySpec(1, old, 30), CopySpec(2, new, 20))
    found = json.loads(run_kfs("replicas", *dirs, NAME, "--json", "--leader", "1").stdout)
    assert found["leader"] == 1 and found["leader_from"] == "--leader"
    # Broker 1 knows no epoch 1 (endOffsetFor above every epoch: -1, -1): broker 2 keeps its log end, as
    # getOffsetTruncationState does, and the copies stay apart from 20 on: said in a note.
    new_copy = _by_broker(found)[2]
    assert (new_copy["truncate_to"], new_copy["truncated_records"], new_copy["lost_committed_records"]) == (25, 0, 0)
    assert new_copy["first_difference"] == 20
    assert new_copy["notes"][-1:] == ["differs from the reference from offset 20, below where Kafka's rule "
                                      "truncates it (25): the copies would stay apart there"]
    absent = run_kfs("replicas", *dirs, NAME, "--leader", "7")
    assert absent.returncode == 1
    assert absent.stderr.decode() == f"kfs: broker 7 holds no copy of {NAME} here (copies on brokers 1, 2)\n"


def test_topic_id_mismatch_is_one_sentence(tmp_path: Path) -> None:
    batches = run_of(0, 0, 10)
    dirs = _set(tmp_path, CopySpec(1, batches, topic_id="AAAAAAAAAAAAAAAAAAAAAA"),
                CopySpec(2, batches, topic_id="BBBBBBBBBBBBBBBBBBBBBB"))
    result = run_kfs("replicas", *dirs, NAME)
    assert result.returncode == 1 and result.stdout == b""
    assert result.stderr.decode() == (
        "kfs: orders-0 has different topic ids on its brokers (broker 1: AAAAAAAAAAAAAAAAAAAAAA; broker 2: "
        "BBBBBBBBBBBBBBBBBBBBBB): these are different partitions that share a name (a topic deleted and created "
        "again), not compared\n")
    listed = run_kfs("replicas", *dirs, "--json")
    assert listed.returncode == 1 and listed.stdout == b"" and listed.stderr == result.stderr


def test_log_dir_without_broker_id_is_refused(tmp_path: Path) -> None:
    batches = run_of(0, 0, 10)
    dirs = _set(tmp_path, CopySpec(1, batches), CopySpec(2, batches, meta=False))
    result = run_kfs("replicas", *dirs)
    assert result.returncode == 1
    assert result.stderr.decode() == (
        f"kfs: {dirs[1]} names no broker (meta.properties with broker.id or node.id): kfs replicas tells the copies "
        "of a partition apart by the broker that holds them\n")
    one = run_kfs("replicas", dirs[0])
    assert one.returncode == 1 and b"are all broker 1's" in one.stderr


def test_two_log_dirs_of_one_broker_are_one_broker(tmp_path: Path) -> None:
    batches = run_of(0, 0, 10)
    a = write_copy(tmp_path, CopySpec(1, batches), "b1-a")
    other = write_copy(tmp_path, CopySpec(2, batches), "b2")
    (a.parent / "b1-b").mkdir()
    (a.parent / "b1-b" / "meta.properties").write_text("node.id=1\n")
    replicas = ReplicaSet([str(a), str(a.parent / "b1-b"), str(other)])
    assert replicas.broker_ids() == [1, 2] and replicas.brokers[0].paths == [str(a), str(a.parent / "b1-b")]
    assert replicas.partition_names() == [NAME]


def test_checkpoint_notes_stale_and_missing(tmp_path: Path) -> None:
    batches = run_of(0, 0, 10) + run_of(2, 10, 20)
    dirs = _set(tmp_path, CopySpec(1, batches, 20, [(0, 0), (2, 10), (3, 20)]), CopySpec(2, batches, 20, None))
    found = ReplicaSet(dirs).compare(NAME)
    assert found.replica(1).copy.notes == [
        "leader-epoch-checkpoint is stale: epoch 3 at 20 start at or past the log end 20 (normal after a crash: "
        "Kafka drops them on loading)"]
    assert found.replica(2).copy.notes == [
        "no leader-epoch-checkpoint: the epochs are the batches' (Kafka rebuilds the file from them)"]
    assert found.replica(1).as_json()["checkpoint_epochs"] == [[0, 0], [2, 10], [3, 20]]
    assert found.replica(2).as_json()["checkpoint_epochs"] is None
    assert not found.lost_committed()


def test_checkpoint_disagreeing_is_named(tmp_path: Path) -> None:
    batches = run_of(0, 0, 10) + run_of(2, 10, 20)
    dirs = _set(tmp_path, CopySpec(1, batches, 20, [(0, 0), (1, 5), (2, 10)]), CopySpec(2, batches, 20, [(0, 0)]))
    found = ReplicaSet(dirs).compare(NAME)
    assert found.replica(1).copy.notes == [
        "leader-epoch-checkpoint disagrees with the batches: epoch 1 at 5 in the checkpoint and not in the batches "
        "(an epoch with no batch left, or batches since removed); the batches' epochs are used"]
    assert "epoch 2 at 10 in the batches and not in the checkpoint" in found.replica(2).copy.notes[0]


def test_cleaned_ranges_compare_records(tmp_path: Path) -> None:
    """Broker 2's cleaner removed offsets of its first batches (other batches, same records): below
    its cleaner point records are compared, and the copies agree; a record changed below it is found."""
    full = run_of(0, 0, 20)
    cleaned = [Batch(0, 0, 10, offsets=[1, 3, 9]), *run_of(0, 10, 20)]
    dirs = _set(tmp_path, CopySpec(1, full, 20), CopySpec(2, cleaned, 20, cleaned_to=10))
    report = ReplicaSet(dirs).compare(NAME, leader=1).replica(2)
    assert (report.first_difference, report.compared) == (None, "records below 10, then batches")
    changed = [Batch(0, 0, 10, offsets=[1, 3, 9]), *run_of(0, 10, 20)]
    changed[0].tag = "other"
    dirs2 = [str(write_copy(tmp_path / "x", CopySpec(1, full, 20))),
             str(write_copy(tmp_path / "x", CopySpec(2, changed, 20, cleaned_to=10)))]
    report = ReplicaSet(dirs2).compare(NAME, leader=1).replica(2)
    assert (report.first_difference, report.compared) == (1, "records below 10, then batches")


def test_three_replicas_each_against_the_reference(tmp_path: Path) -> None:
    a = run_of(0, 0, 10, "x") + run_of(1, 10, 20, "y")
    b = run_of(0, 0, 10, "x") + run_of(1, 10, 15, "y")
    c = run_of(0, 0, 14, "x")
    dirs = _set(tmp_path, CopySpec(1, a, 20), CopySpec(2, b, 15), CopySpec(3, c, 14))
    found = ReplicaSet(dirs).compare(NAME)
    assert found.leader == 1
    assert [(r.copy.broker, r.truncation.truncate_to, r.truncated_records, r.lost_committed_records)
            for r in found.replicas] == [(1, 20, 0, 0), (2, 15, 0, 0), (3, 10, 4, 4)]
    assert found.replica(3).first_difference == 10


def test_no_shared_partition_and_unknown_partition(tmp_path: Path) -> None:
    one = write_copy(tmp_path, CopySpec(1, run_of(0, 0, 5)))
    two = tmp_path / "broker-2"
    (two / "other-0").mkdir(parents=True)
    (two / "meta.properties").write_text("broker.id=2\n")
    result = run_kfs("replicas", str(one), str(two))
    assert result.returncode == 0 and result.stdout == b""
    assert result.stderr == b"kfs: no partition is held by two of brokers 1, 2: nothing to compare\n"
    with pytest.raises(KfsError, match="only broker 1 holds orders-0"):
        ReplicaSet([str(one), str(two)]).compare(NAME)


def test_cluster_metadata_names_the_reference_and_is_shown(tmp_path: Path) -> None:
    """The internal-topics fixture's metadata log (written by Kafka's classes) creates orders-0 led by
    broker 1 at epoch 0, then a PartitionChangeRecord makes broker 2 leader (epoch 1): broker 2's copy
    is the reference even though broker 1's last batch carries the higher epoch."""
    topic_id = "b8tX5GHfRnulZGRvXVmOJw"
    a = run_of(0, 0, 10) + run_of(3, 10, 15)
    b = run_of(0, 0, 10) + run_of(1, 10, 12)
    dirs = _set(tmp_path, CopySpec(1, a, 12, topic_id=topic_id), CopySpec(2, b, 12, topic_id=topic_id))
    shutil.copytree(INTERNAL / "__cluster_metadata-0", Path(dirs[0]) / "__cluster_metadata-0")
    result = run_kfs("replicas", *dirs, "--json")
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)  # (one line: __cluster_metadata-0 is on one broker, and never listed)
    assert (found["leader"], found["leader_from"]) == (2, "__cluster_metadata")
    history = [(h["offset"], h["record"], h["leader"], h["leader_epoch"], h["isr"], h["leader_recovery_state"])
               for h in found["witness"]["history"]]
    assert history == [(14, "PartitionRecord", 1, 0, [1, 2], "RECOVERED"),
                       (47, "PartitionChangeRecord", 2, 1, [2, 1], "RECOVERED")]
    # Its epoch 3 is past every epoch broker 2 knows (no answer): it fetches from its log end, out of range
    # past broker 2's end, 12, where it truncates; its batches differ from 10 on.
    old = _by_broker(found)[1]
    assert (old["truncate_to"], old["truncated_records"], old["lost_committed_records"], old["first_difference"]) \
        == (12, 3, 0, 10)
    assert old["truncation_rule"] == "leader epochs, then the leader's log end (the fetch offset was out of range)"
    table = run_kfs("replicas", *dirs).stdout.decode()
    assert "reference: broker 2 (__cluster_metadata)" in table
    assert "PartitionChangeRecord: leader 2, epoch 1, isr [2, 1], RECOVERED" in table


def test_legacy_follower_truncates_to_its_high_watermark(tmp_path: Path) -> None:
    """Broker 2's copy is v1 messages (no leader epochs): Kafka truncates it to its high watermark."""
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    dirs = _set(tmp_path, CopySpec(1, run_of(0, 0, 10, "v2") + run_of(1, 10, 12, "v2"), 12),
                CopySpec(2, [], 6))
    builder = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    for offset in range(10):
        builder.append(offset, timestamp=1_700_000_000_000 + offset, key=b"k%d" % offset, value=b"v1-%d" % offset)
    (Path(dirs[1]) / NAME / f"{0:020d}.log").write_bytes(bytes(builder.build()))
    (Path(dirs[1]) / NAME / f"{0:020d}.index").write_bytes(b"")
    found = json.loads(run_kfs("replicas", *dirs, NAME, "--json").stdout)
    legacy = _by_broker(found)[2]
    assert (legacy["epochs"], legacy["log_end_offset"], legacy["truncate_to"], legacy["truncated_records"],
            legacy["lost_committed_records"]) == ([], 10, 6, 4, 0)
    assert legacy["truncation_rule"] == "high watermark (no leader epochs in the follower's batches)"
    assert legacy["first_difference"] == 0  # (a v1 message is another batch than a v2 batch)


def test_damaged_copy_is_an_error_not_an_answer(tmp_path: Path) -> None:
    dirs = _set(tmp_path, CopySpec(1, run_of(0, 0, 20), 20, segment_every=2), CopySpec(2, run_of(0, 0, 20), 20))
    segment = Path(dirs[0]) / NAME / f"{0:020d}.log"
    data = bytearray(segment.read_bytes())
    data[-5] ^= 0xFF  # a record's byte of the closed segment's last batch: its CRC fails
    segment.write_bytes(bytes(data))
    result = run_kfs("replicas", *dirs, NAME, "--json")
    assert result.returncode == 1 and result.stdout == b""
    assert result.stderr.startswith(f"kfs: {segment}".encode()) and b"CRC" in result.stderr, result.stderr


def test_missing_high_watermark_is_said(tmp_path: Path) -> None:
    dirs = _set(tmp_path, CopySpec(1, run_of(0, 0, 10) + run_of(1, 10, 12), 12), CopySpec(2, run_of(0, 0, 15)))
    report = ReplicaSet(dirs).compare(NAME).replica(2)
    assert (report.truncation.truncate_to, report.truncated_records, report.lost_committed_records) == (10, 5, 0)
    assert report.copy.notes[-1] == ("no replication-offset-checkpoint entry: its high watermark is not known, so "
                                     "none of the 5 truncated record(s) is counted as committed")


GOLDEN = FIXTURES.parent / "replicas"


@pytest.mark.parametrize("run", [r for r in json.loads((GOLDEN / "golden" / "runs.json").read_text()) if r["golden"]],
                         ids=lambda r: r["run"])
def test_api_gives_kafkas_answers(run: dict) -> None:
    """The golden runs of tests/fixtures/replicas (Kafka's answers) through the Python API."""
    args = list(run["args"])
    leader = int(args[args.index("--leader") + 1]) if "--leader" in args else None
    named = [a for a in args if not a.startswith("--") and not a.lstrip("-").isdigit()]
    replicas = ReplicaSet([str(GOLDEN / d) for d in run["logdirs"]])
    found = [replicas.compare(named[0], leader)] if named else list(replicas.compare_all(leader))
    want = [json.loads(line) for line in (GOLDEN / run["golden"]).read_text().splitlines()]
    fields = ("broker", "truncate_to", "truncated_records", "lost_committed_records", "first_difference", "compared",
              "epochs", "high_watermark", "log_start_offset", "log_end_offset", "checkpoint_epochs")
    assert [(f.name, f.leader, [{k: r.as_json()[k] for k in fields} for r in f.replicas]) for f in found] == \
        [(f"{w['topic']}-{w['partition']}", w["leader"], [{k: r[k] for k in fields} for r in w["replicas"]])
         for w in want]
    assert any(f.lost_committed() for f in found) == (run["exit_status"] == 4)


def test_odd_checkpoint_files_are_said_not_read(tmp_path: Path) -> None:
    """A leader-epoch-checkpoint that is a FIFO is never opened, one that contradicts its own count is
    not used; a garbled partition.metadata names no topic id; an empty copy compares as a log of 0."""
    dirs = _set(tmp_path, CopySpec(1, run_of(0, 0, 10), 10), CopySpec(2, []))
    copy = Path(dirs[1]) / NAME
    for f in copy.iterdir():
        f.unlink()
    os.mkfifo(copy / "leader-epoch-checkpoint")
    (Path(dirs[0]) / NAME / "leader-epoch-checkpoint").write_text("0\n2\n0 0\n")
    (Path(dirs[0]) / NAME / "partition.metadata").write_text("garbage")
    found = json.loads(run_kfs("replicas", *dirs, NAME, "--json").stdout)
    one, two = _by_broker(found)[1], _by_broker(found)[2]
    assert one["notes"] == [f"{dirs[0]}/{NAME}/leader-epoch-checkpoint says 2 entries and holds 1; the epochs are "
                            "the batches'"]
    assert two["notes"] == [f"{copy}/leader-epoch-checkpoint is a FIFO, not a regular file: kfs reads only regular "
                            "files; the epochs are the batches'"]
    assert (one["topic_id"], two["checkpoint_epochs"], two["log_end_offset"], two["truncate_to"]) == (None, None, 0, 0)
