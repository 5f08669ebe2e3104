"""Broker-local log dirs in one Spark job (kfs.spark.broker_local): a barrier stage with a task in
every slot, each reading the log dirs placed on its own host.

The placing rules are checked in this process: `parse_placed`, `owners` (a partition several hosts
hold is read once, from the first host listed) and a task's share of its host's splits, given every
task's listing as `allGather` would hand it over. Then a real standalone cluster of two Workers, one
core each, the second Worker's executors another host by `KFS_HOST` (tests/spark_cluster.py): the
driver script (tests/spark_broker_local_job.py) reads broker-a's log dir on one host and broker-b's
on the other, and gets the rows `format("kfs")` reads from a shared path; a host given log dirs but
no task, and a log dir missing on its host, fail the job with the host and the path named.
"""

from __future__ import annotations

import json
import pickle
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from conftest import LOGDIRS, kfs_command
from spark_cluster import Cluster, cluster_session

from kfs.spark.broker_local import GrepTask, HostTask, decoded_columns, owners, parse_placed, this_host
from kfs.spark.options import OptionError, parse_options
from kfs.spark.plan import plan_splits
from kfs.spark.source import KafkaLogDataSource, kafka_schema, selected_topics
from kfs.storage import KfsError, LogDirs

TESTS = Path(__file__).parent
JOB = TESTS / "spark_broker_local_job.py"
OPTIONS = {"maxSplitBytes": "8192"}
FIXTURES = TESTS / "fixtures"
REGISTRY_LOGDIR = str(FIXTURES / "schema-registry" / "logdir")
INTERNAL_LOGDIR = str(FIXTURES / "internal-topics" / "logdirs" / "broker-a")


def test_placed_log_dirs_keep_the_hosts_order_and_must_be_absolute() -> None:
    assert parse_placed("b2:/x/logs, b1:/y,b2:/z") == {"b2": ["/x/logs", "/z"], "b1": ["/y"]}
    assert parse_placed({"h": ["/a"]}) == {"h": ["/a"]}
    for bad in ("/x/logs", ":/x", "b1:relative/logs", ""):
        with pytest.raises(OptionError):
            parse_placed(bad)


def test_a_partition_several_hosts_hold_is_read_by_the_first_listed() -> None:
    placed = {"b2": ["/l"], "b1": ["/l"], "b3": ["/l"]}
    held = {"b1": ["a-0", "b-0"], "b2": ["b-0", "c-0"], "b3": ["c-0", "d-0"]}
    assert owners(placed, held) == {"b-0": "b2", "c-0": "b2", "a-0": "b1", "d-0": "b3"}


def test_the_host_is_kfs_host_else_the_host_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KFS_HOST", raising=False)
    assert this_host() == socket.gethostname()
    monkeypatch.setenv("KFS_HOST", "broker-7")
    assert this_host() == "broker-7"


def _listing(host: str, dirs: list[str]) -> dict[str, Any]:
    return {"host": host, "partitions": LogDirs(dirs).partition_names()}


def _offsets(task: HostTask, found: list[dict[str, Any]], index: int) -> set[tuple[str, int, int]]:
    return {(t, p, o) for b in task.read(found, index)
            for t, p, o in zip(*(b.column(c).to_pylist() for c in ("topic", "partition", "offset")), strict=True)}


def test_the_tasks_of_each_host_read_its_partitions_once_between_them() -> None:
    """Three tasks on host a (broker-a's log dir), two on host b (broker-b's), one on a host given nothing:
    each record of either log dir read by exactly one task, a task of the host that holds it, and each
    partition by one task only."""
    hosts = {"a": [LOGDIRS[0]], "b": [LOGDIRS[1]]}
    task = HostTask(hosts, OPTIONS, kafka_schema(False), None)
    found = [_listing("a", hosts["a"]), _listing("b", hosts["b"]), _listing("a", hosts["a"]),
             {"host": "idle", "partitions": []}, _listing("b", hosts["b"]), _listing("a", hosts["a"])]
    read = [_offsets(task, found, i) for i in range(len(found))]
    assert read[3] == set()
    everything = [r for got in read for r in got]
    assert len(everything) == len(set(everything))  # (no record twice)
    expected: dict[str, set[tuple[str, int, int]]] = {}
    for host, dirs in hosts.items():
        opts = parse_options({**OPTIONS, "path": ",".join(dirs)})
        expected[host] = {(p.topic, p.partition, o) for s in plan_splits(opts) for p in s.pieces
                          for o in range(p.start_offset, p.end_offset)}
    by_host = {h: set().union(*(read[i] for i, f in enumerate(found) if f["host"] == h)) for h in hosts}
    owned = owners(hosts, {h: LogDirs(d).partition_names() for h, d in hosts.items()})
    for host in hosts:
        assert by_host[host] <= expected[host]
        assert {(t, p) for t, p, _ in by_host[host]} == {
            (t, p) for t, p, _ in expected[host] if owned[f"{t}-{p}"] == host}
    assert all(len(read[i]) > 0 for i, f in enumerate(found) if f["host"] in hosts)  # (every task has a share)
    partitions = [{(t, p) for t, p, _ in got} for got in read]
    assert sum(len(ps) for ps in partitions) == len(set().union(*partitions))


def test_a_host_without_a_task_or_with_a_listing_error_fails_every_task() -> None:
    task = HostTask({"a": [LOGDIRS[0]], "z": ["/nowhere"]}, OPTIONS, kafka_schema(False), None)
    found = [_listing("a", [LOGDIRS[0]])]
    with pytest.raises(KfsError, match="placed on z, but no task ran there"):
        list(task.read(found, 0))
    with pytest.raises(KfsError, match=r"z: .*nowhere"):
        list(task.read([*found, {"host": "z", "error": "z: /nowhere: no such log dir"}], 0))


def _host_task(host: str, logdir: str, options: dict[str, str]) -> tuple[HostTask, list[dict[str, Any]]]:
    """A task of a one-host read (as broker_local.read makes it, pickled and back as Spark ships it) and
    the listing allGather would give it."""
    opts = parse_options({**options, "path": logdir})
    # (what topics_on_hosts' listing stage gives a pattern or `assign` on one host: its log dir's topics)
    registry, decoded = decoded_columns(opts, selected_topics(opts))
    schema = kafka_schema(opts.include_headers)
    for field in decoded:
        schema.add(field)
    task = HostTask({host: [logdir]}, options, schema, registry.state if registry is not None else None)
    return pickle.loads(pickle.dumps(task)), [_listing(host, [logdir])]


def _source_rows(logdir: str, options: dict[str, str]) -> tuple[Any, list[dict[str, Any]]]:
    """The data source's schema and rows (in process: its reader, every partition) over the same log dir."""
    source = KafkaLogDataSource({**options, "path": logdir})
    schema = source.schema()
    reader = source.reader(schema)
    got = [row for part in reader.partitions() for batch in reader.read(part) for row in batch.to_pylist()]
    return schema, sorted(got, key=lambda r: (r["topic"], r["partition"], r["offset"]))


@pytest.mark.parametrize(("logdir", "options"), [
    (REGISTRY_LOGDIR, {"subscribe": "orders", "schemas": REGISTRY_LOGDIR}),  # typed by the registry
    (REGISTRY_LOGDIR, {"subscribe": "orders,payments", "schemas": REGISTRY_LOGDIR}),  # JSON text
    (REGISTRY_LOGDIR, {"subscribePattern": "pay.*", "schemas": REGISTRY_LOGDIR}),  # one topic: typed
    (REGISTRY_LOGDIR, {"assign": '{"orders": [0]}', "schemas": REGISTRY_LOGDIR}),
    (REGISTRY_LOGDIR, {"subscribePattern": "(orders|payments)", "schemas": REGISTRY_LOGDIR}),  # JSON text
    (INTERNAL_LOGDIR, {"subscribe": "__consumer_offsets"}),  # Kafka's own topics: no registry needed
])
def test_decoded_columns_are_the_data_sources(logdir: str, options: dict[str, str]) -> None:
    """With `schemas` read on the driver, or for internal topics, a broker-local read has the data
    source's decoded columns, value for value (the registry's state travels with the task)."""
    task, found = _host_task("a", logdir, options)
    want_schema, want = _source_rows(logdir, options)
    assert task.schema == want_schema
    assert "value_decoded" in task.schema.fieldNames()
    got = sorted((row for batch in task.read(found, 0) for row in batch.to_pylist()),
                 key=lambda r: (r["topic"], r["partition"], r["offset"]))
    assert got and got == want
    assert any(r["value_decoded"] is not None for r in got)


def test_a_grep_tasks_lines_are_grep_splits_over_its_share() -> None:
    """Two hosts' grep tasks, from fabricated listings: together every matching line of both log dirs,
    each once, each piece's chunks numbered in order (the driver sorts on them)."""
    from kfs.spark.jobs import grep_split

    hosts = {"a": [LOGDIRS[0]], "b": [LOGDIRS[1]]}
    task = pickle.loads(pickle.dumps(GrepTask(hosts, OPTIONS, None, "user-4", False, "auto")))
    found = [_listing("a", hosts["a"]), _listing("b", hosts["b"]), _listing("a", hosts["a"])]
    rows = sorted((r for i in range(len(found)) for b in task.read(found, i) for r in b.to_pylist()),
                  key=lambda r: (r["topic"], r["partition"], r["start"], r["seq"]))
    got = b"".join(r["lines"] for r in rows).decode()
    want = []
    for dirs in hosts.values():
        opts = parse_options({**OPTIONS, "path": ",".join(dirs)})
        want += [line for s in plan_splits(opts) for chunk in grep_split(s, opts, "user-4", False)
                 for line in chunk.decode().splitlines()]
    assert got.count("\n") > 10
    assert sorted(got.splitlines()) == sorted(want)


def test_the_listing_tasks_give_the_topics_the_options_select() -> None:
    """topics_on_hosts' tasks, from fabricated listings: together the topics of both hosts' log dirs that
    `subscribePattern` selects."""
    from kfs.spark.broker_local import SURVEY_SCHEMA, SurveyTask

    hosts = {"a": [LOGDIRS[0]], "b": [LOGDIRS[1]]}
    found = [_listing("a", hosts["a"]), _listing("b", hosts["b"]), _listing("a", hosts["a"])]
    all_topics = {n.rsplit("-", 1)[0] for d in LOGDIRS for n in LogDirs([d]).partition_names()}
    for options, want in (({}, all_topics), ({"subscribePattern": "o.*"}, {t for t in all_topics if t[0] == "o"})):
        task = SurveyTask(hosts, options, SURVEY_SCHEMA, None, True, None)
        rows = [r for i in range(len(found)) for b in task.read(found, i) for r in b.to_pylist()]
        assert {r["topic"] for r in rows} == want and want
        assert all(r["state"] is None for r in rows)


def test_the_registry_comes_from_the_first_host_to_hold_its_topic() -> None:
    """registry_for_hosts' tasks, from fabricated listings: one row in all, from the task whose share
    `_schemas-0` is (host b's: a, listed first, does not hold it; c's copy is not read), the registry
    the log dir's own; none where no host holds it."""
    from kfs.registry.sources import load_state
    from kfs.spark.broker_local import SURVEY_SCHEMA, SurveyTask

    hosts = {"a": [LOGDIRS[0]], "b": [REGISTRY_LOGDIR], "c": [REGISTRY_LOGDIR]}
    found = [_listing("a", hosts["a"]), _listing("b", hosts["b"]), _listing("c", hosts["c"]),
             _listing("b", hosts["b"])]
    # (the read's own options select no `_schemas`: the registry is looked for in every task's share)
    task = pickle.loads(pickle.dumps(SurveyTask(hosts, {"subscribe": "orders"}, SURVEY_SCHEMA, None, False,
                                                "_schemas")))
    rows = [(i, r) for i in range(len(found)) for b in task.read(found, i) for r in b.to_pylist()]
    assert [i for i, _ in rows] == [1]
    got, want = pickle.loads(rows[0][1]["state"]), load_state([REGISTRY_LOGDIR])
    assert want is not None and got.by_id.keys() == want.by_id.keys() != set()
    assert got.digest() == pickle.loads(pickle.dumps(want)).digest()  # (the same records applied)
    only_a = SurveyTask({"a": [LOGDIRS[0]]}, {"subscribe": "_schemas"}, SURVEY_SCHEMA, None, False, "_schemas")
    assert not [b for b in only_a.read([_listing("a", [LOGDIRS[0]])], 0)]
    both = SurveyTask(hosts, {"subscribePattern": "o.*"}, SURVEY_SCHEMA, None, True, "_schemas")  # (one stage)
    rows = [r for i in range(len(found)) for b in both.read(found, i) for r in b.to_pylist()]
    assert len([r for r in rows if r["state"] is not None]) == 1
    assert {r["topic"] for r in rows if r["state"] is None} == {
        n.rsplit("-", 1)[0] for d in (LOGDIRS[0], REGISTRY_LOGDIR) for n in LogDirs([d]).partition_names()
        if n.startswith("o")}


def test_without_schemas_a_broker_local_read_has_kafkas_columns_only() -> None:
    """The hosts' `_schemas` is not read on the driver: without `schemas`, no decoded columns (the
    module doc says why); `decode=raw` drops them even with it."""
    for options in ({"subscribe": "orders"}, {"subscribe": "orders", "schemas": REGISTRY_LOGDIR, "decode": "raw"}):
        task, _ = _host_task("a", REGISTRY_LOGDIR, options)
        assert task.schema == kafka_schema(False)


# ---- a real cluster: two Workers, two hosts -----------------------------------------------------------

@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    gen = cluster_session(tmp_path_factory.mktemp("broker-local-cluster"), cores=1, memory="2g")
    cluster = next(gen)
    try:
        cluster.add_worker("worker-b", 1, "2g", {"KFS_HOST": "broker-b"})
        yield cluster
    finally:
        gen.close()


@pytest.fixture(scope="module")
def results(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("broker-local-job")
    job = subprocess.run([sys.executable, str(JOB), cluster.master_url, str(out), socket.gethostname(), "broker-b"],
                         cwd=TESTS, env=cluster.env(), capture_output=True, text=True, timeout=600)
    assert job.returncode == 0, f"{job.stderr[-4000:]}\nexecutors:\n{cluster.executor_logs()}"
    return json.loads((out / "results.json").read_text())


def test_each_host_reads_its_own_log_dirs_and_together_they_give_every_record(results: dict[str, Any]) -> None:
    assert results["slots"] == 2
    assert results["broker_local"] and results["broker_local"] == results["shared_path"]


def test_typed_columns_decoded_on_another_host_equal_the_data_sources(results: dict[str, Any]) -> None:
    assert results["typed_on_b"] and results["typed_on_b"] == results["typed_shared"]
    assert any(r[-2] is not None for r in results["typed_on_b"])  # (value_decoded, as JSON)


def test_without_schemas_the_registry_on_another_host_types_the_columns(results: dict[str, Any]) -> None:
    schema, got = results["registry_from_b"]
    assert "value_decoded:struct<" in schema and got
    assert results["registry_from_b"] == results["registry_shared"]


def test_a_pattern_read_on_hosts_is_typed_by_the_one_topic_it_selects_there(results: dict[str, Any]) -> None:
    schema, got = results["pattern_on_b"]
    assert "value_decoded:struct<" in schema and got
    assert results["pattern_on_b"] == results["pattern_shared"]


def test_grep_on_hosts_prints_the_shared_paths_lines_in_its_order(results: dict[str, Any]) -> None:
    assert results["grep_on_hosts_count"] > 10
    assert results["grep_on_hosts"] == results["grep_shared"]


@pytest.mark.parametrize("topic", ["orders", "payments"])  # (Avro, Protobuf)
def test_export_on_hosts_writes_each_typed_topic_as_the_data_source_types_it(results: dict[str, Any],
                                                                              topic: str) -> None:
    assert results["typed_export_status"] == 0
    on_hosts, shared = results[f"typed-on-hosts-{topic}"], results[f"typed-shared-{topic}"]
    assert ":struct<" in on_hosts[0] and on_hosts == shared
    assert on_hosts[1] and any(r[-2] is not None for r in on_hosts[1])


def test_kfs_spark_export_on_hosts_writes_every_record_as_parquet(results: dict[str, Any]) -> None:
    assert results["export_status"] == 0
    assert results["exported"] == results["shared_path"]


@pytest.mark.parametrize("command", [["export", "--on-hosts", LOGDIRS[0], "--out", "OUT"],
                                     ["grep", "--on-hosts", "user-4", LOGDIRS[0]]])
def test_kfs_spark_on_hosts_refuses_a_log_dir_without_its_host(tmp_path: Path, command: list[str]) -> None:
    command = [str(tmp_path / "o") if c == "OUT" else c for c in command]
    done = subprocess.run([*kfs_command(), "spark", *command], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "is HOST:/path" in done.stderr and "Traceback" not in done.stderr


def test_a_partition_on_both_hosts_is_read_once(results: dict[str, Any]) -> None:
    assert results["replicated"] and results["replicated"] == results["only_b"]


def test_a_host_without_a_task_fails_the_job_naming_it(results: dict[str, Any]) -> None:
    error = results["no_task_there"]
    assert error is not None and "placed on broker-z, but no task ran there" in error


def test_more_hosts_than_slots_is_refused_before_the_job(results: dict[str, Any]) -> None:
    error = results["too_few_slots"]
    assert error is not None and "2 tasks cannot cover 3 hosts" in error


def test_a_log_dir_missing_on_its_host_fails_the_job_naming_both(results: dict[str, Any]) -> None:
    error = results["missing_on_b"]
    assert error is not None and "broker-b: " in error and f"{LOGDIRS[1]}-gone" in error
