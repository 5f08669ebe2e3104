"""A task whose planned data is not there fails, naming the path and the host; it never reads less.

The driver plans from the log dirs it sees; a task may run on another host or later. These run a
task's work (`read_split`) in this process, on copies of a fixture log dir changed between planning
and reading; tests/test_spark_cluster.py shows the same errors reaching the driver from a real
executor.
"""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from builders import golden_rows
from conftest import LOGDIRS
from pyspark.sql.pandas.types import to_arrow_schema

from kfs.spark.options import parse_options
from kfs.spark.plan import Split, plan_splits
from kfs.spark.source import kafka_schema, read_split
from kfs.spark.tasks import PlannedDataMissing

SCHEMA = to_arrow_schema(kafka_schema(False), timezone="UTC")
BROKER_B = LOGDIRS[1]


def read_all(splits: list[Split], path: str) -> list[int]:
    """The offsets of payments-0 the tasks read, as the tasks of a query would."""
    opts = parse_options({"path": path, "maxSplitBytes": "65536"})
    offsets: list[int] = []
    for split in splits:
        for batch in read_split(split, opts, SCHEMA):
            topics = batch.column("topic").to_pylist()
            offsets += [o for t, o in zip(topics, batch.column("offset").to_pylist(), strict=True) if t == "payments"]
    return offsets


def planned(path: str) -> list[Split]:
    return plan_splits({"path": path, "maxSplitBytes": "65536"})


def copy_of_broker_b(tmp_path: Path, name: str = "copy") -> Path:
    copy = tmp_path / name
    shutil.copytree(BROKER_B, copy)
    return copy


def assert_names_path_and_host(error: pytest.ExceptionInfo[PlannedDataMissing], path: Path) -> None:
    message = str(error.value)
    assert str(path) in message and f"host {socket.gethostname()}" in message, message


def test_copies_read_whole_as_planned(tmp_path):
    copy = copy_of_broker_b(tmp_path)
    assert read_all(planned(str(copy)), str(copy)) == [r[2] for r in golden_rows("payments-0")]


def test_a_task_reads_the_log_dir_it_was_planned_on_never_a_replica_of_the_same_name(tmp_path):
    # Two brokers' log dirs both hold payments-0 (a leader and its follower): the plan takes the
    # first's; if that copy is gone when the task runs, the task must not read the other's.
    first, second = copy_of_broker_b(tmp_path, "broker-1"), copy_of_broker_b(tmp_path, "broker-2")
    both = f"{first},{second}"
    splits = planned(both)
    assert {p.log_dir for s in splits for p in s.pieces if p.topic == "payments"} == {str(first)}
    shutil.rmtree(first / "payments-0")
    with pytest.raises(PlannedDataMissing) as error:
        read_all(splits, both)
    assert_names_path_and_host(error, first / "payments-0")


def test_a_log_dir_gone_after_planning_fails_naming_path_and_host(tmp_path):
    copy = copy_of_broker_b(tmp_path)
    splits = planned(str(copy))
    shutil.rmtree(copy)
    with pytest.raises(PlannedDataMissing) as error:
        read_all(splits, str(copy))
    assert_names_path_and_host(error, copy)
    assert "no such directory" in str(error.value)


def test_a_shorter_copy_fails_rather_than_reading_fewer_records(tmp_path):
    # The host running the task holds an older copy (or the log was truncated): its last segment
    # ends before the planned end. Reading to its end would be a short answer.
    copy = copy_of_broker_b(tmp_path)
    splits = planned(str(copy))
    last = copy / "payments-0" / "00000000000000000639.log"
    with last.open("r+b") as f:
        f.truncate(0)
    with pytest.raises(PlannedDataMissing) as error:
        read_all(splits, str(copy))
    assert_names_path_and_host(error, copy / "payments-0")
    assert "holds offsets 0..638" in str(error.value) and "..644" in str(error.value)


def test_segments_deleted_after_planning_fail_rather_than_start_later(tmp_path):
    copy = copy_of_broker_b(tmp_path)
    splits = planned(str(copy))
    (copy / "payments-0" / "00000000000000000000.log").unlink()  # retention, between planning and reading
    with pytest.raises(PlannedDataMissing) as error:
        read_all(splits, str(copy))
    assert "holds offsets 119..644" in str(error.value)


def test_a_relative_path_means_the_drivers_directory_wherever_the_task_runs(tmp_path, monkeypatch):
    # A cluster's executor runs in its own working directory (the Worker's work dir).
    copy = copy_of_broker_b(tmp_path)
    monkeypatch.chdir(tmp_path)
    splits = planned("copy")
    assert {p.log_dir for s in splits for p in s.pieces} == {str(copy)}
    elsewhere = tmp_path / "executor"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert read_all(splits, "copy") == [r[2] for r in golden_rows("payments-0")]
    assert os.getcwd() == str(elsewhere)


def test_grep_tasks_whose_log_dir_is_gone_say_so_with_the_host(tmp_path):
    # kfs spark grep's task also reads the schema registry of the log dirs (decode=auto): that read
    # must fail as the partitions' do, with the host, not as a bare "no such directory".
    from kfs.spark.jobs import grep_split

    copy = copy_of_broker_b(tmp_path)
    opts = parse_options({"path": str(copy)})
    splits = plan_splits(opts)
    shutil.rmtree(copy)
    with pytest.raises(PlannedDataMissing) as error:
        for split in splits:
            list(grep_split(split, opts, "x", regex=False))
    assert_names_path_and_host(error, copy)


def test_typed_read_whose_registry_log_dir_is_gone_says_so_with_the_host(tmp_path):
    # A read with decoded columns also reads the schema registry in the task (kfs.spark.typed).
    from kfs.spark import source as source_module
    from kfs.spark.source import KafkaLogDataSource

    copy = tmp_path / "evolution"
    shutil.copytree(Path(LOGDIRS[0]).parents[2] / "schema-evolution" / "logdir", copy)
    source = KafkaLogDataSource({"path": str(copy), "subscribe": "readings"})
    reader = source.reader(source.schema())
    assert "value_decoded" in source.schema().fieldNames()
    partitions = list(reader.partitions())
    shutil.rmtree(copy)
    source_module._REGISTRIES.clear()  # as in an executor's fresh Python worker: no registry read yet
    with pytest.raises(PlannedDataMissing) as error:
        for partition in partitions:
            list(reader.read(partition))
    assert_names_path_and_host(error, copy)
