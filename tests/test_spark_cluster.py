"""kfs's Spark source and jobs on a real standalone cluster give `local[2]`'s answers.

One Master and one Worker (2 cores) from the pip-installed PySpark on 127.0.0.1 for the module
(tests/spark_cluster.py); the tasks run in the Worker's executor JVM and its Python workers, so
readers, plans and splits are pickled across processes as on any cluster. The same driver script
(tests/spark_cluster_job.py) runs on `local[2]` (started first, alongside the cluster's start-up)
and on the cluster; then `kfs spark grep` and `kfs spark export` run as a user runs them, with
`--master spark://127.0.0.1:PORT`. The last test stops the cluster and checks nothing is left.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

import pyarrow.dataset as ds
from builders import golden_rows
from conftest import GOLDEN_PARTITIONS, LOGDIRS, kfs_command
from spark_cluster import Cluster, cluster_session

from kfs.spark.cli import spark_error_gist

TESTS = Path(__file__).parent
JOB = TESTS / "spark_cluster_job.py"
READS = ["all_with_headers", "read_committed", "offset_ranges", "pushed_filters", "relative_path", "relative_typed"]
JOB_TIMEOUT = 600


def _run_job(master: str, out: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(JOB), master, str(out)], cwd=TESTS, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _finish(job: subprocess.Popen[str], out: Path, cluster: Cluster | None = None) -> dict[str, Any]:
    try:
        _, stderr = job.communicate(timeout=JOB_TIMEOUT)
    finally:
        _kill(job)
    logs = f"\nexecutors:\n{cluster.executor_logs()}" if cluster else ""
    assert job.returncode == 0, f"{stderr[-4000:]}{logs}"
    return json.loads((out / "results.json").read_text())


def _kill(job: subprocess.Popen[str]) -> None:
    """The driver and its JVM (its own process group), if still there."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(job.pid, signal.SIGKILL)
    job.wait()


@pytest.fixture(scope="module")
def local_job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    out = tmp_path_factory.mktemp("local-job")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    job = _run_job("local[2]", out, env)
    yield job, out
    _kill(job)


@pytest.fixture(scope="module")
def cluster(local_job: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    # 6 cores for three applications of 2 at once (tests/spark_cluster.py): slots, not CPUs.
    yield from cluster_session(tmp_path_factory.mktemp("spark-cluster"), cores=6, memory="3g")


def _kfs(cluster: Cluster, *args: str) -> subprocess.Popen[str]:
    """`kfs spark ARGS... --master spark://...` as a user runs it, started (not waited for)."""
    return subprocess.Popen([*kfs_command(), "spark", *args, "--master", cluster.master_url], env=cluster.env(),
                            cwd=TESTS, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


@pytest.fixture(scope="module")
def results(local_job: tuple[subprocess.Popen[str], Path], cluster: Cluster,
            tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Every run at once (the cluster runs up to three applications side by side): the JVMs'
    start-ups overlap, which is most of their wall time."""
    out = tmp_path_factory.mktemp("cluster-job")
    job = _run_job(cluster.master_url, out, cluster.env())
    grep = _kfs(cluster, "grep", "user-4", *LOGDIRS, "-o", "maxSplitBytes=16384")
    # Relative log dirs: the driver's directory, not the executor's.
    export = _kfs(cluster, "export", *[os.path.relpath(d, TESTS) for d in LOGDIRS], "--out", str(out / "cli-parquet"))
    try:
        cli = {}
        for name, command in (("grep", grep), ("export", export)):
            stdout, stderr = command.communicate(timeout=JOB_TIMEOUT)
            cli[name] = {"returncode": command.returncode, "stdout": stdout, "stderr": stderr}
        on_cluster = _finish(job, out, cluster)
    finally:
        for command in (job, grep, export):
            _kill(command)
    on_cluster.update(out=str(out), cli=cli)
    local = _finish(*local_job)
    local["out"] = str(local_job[1])
    return {"local": local, "cluster": on_cluster}


def parquet_rows(path: str | Path) -> list[dict[str, Any]]:
    """Every row of a `topic=/partition=` Parquet tree, sorted; the columns as written."""
    table = ds.dataset(str(path), format="parquet", partitioning="hive").to_table()
    return sorted(table.to_pylist(), key=lambda r: (r["topic"], r["partition"], r["offset"]))


def test_both_read_through_the_columnar_scan(results):
    """Started with the front's jar (kfs.spark.jvm.configure), the cluster's executors load it too."""
    assert results["local"]["scans"] == results["cluster"]["scans"] == ["ColumnarPythonScan"]


def test_tasks_ran_in_the_clusters_executor(results):
    assert results["cluster"]["master"].startswith("spark://127.0.0.1:")
    assert results["cluster"]["task_hosts"] == ["executor"]
    assert results["local"]["task_hosts"] == ["driver"]


@pytest.mark.parametrize("read", READS)
def test_data_source_reads_equal_local(results, read):
    local, on_cluster = results["local"][read], results["cluster"][read]
    assert local["rows"], read
    assert on_cluster["rows"] == local["rows"]
    if read not in ("read_committed", "relative_typed"):  # one small partition: one task
        assert on_cluster["tasks"] > 1, "small splits, so the executor runs many tasks"


def test_pushed_aggregates_equal_local(results):
    local, on_cluster = results["local"]["aggregates"], results["cluster"]["aggregates"]
    assert on_cluster == local
    assert all(query["pushed"] == [True] and query["rows"] for query in local.values()), local
    n = local["typed_sum"]["rows"][0][0]
    assert n == len(results["local"]["relative_typed"]["rows"]) > 0


def test_without_the_jar_on_the_executors_spark_runs_the_pushed_read(results):
    """A session whose executors were not given the front's jar (spark.jars empty, the jar on the driver):
    on the cluster the front plans the read, pushed aggregates included, and Spark's own PythonScan runs
    it in the executors; the answers are the columnar scan's."""
    local, on_cluster = results["local"]["without_the_jar"], results["cluster"]["without_the_jar"]
    assert local["scans"] == ["ColumnarPythonScan"] and on_cluster["scans"] == ["PythonScan"]
    assert on_cluster["aggregates"] == local["aggregates"] == results["local"]["aggregates"]


def test_typed_reads_on_the_cluster_equal_local(results):
    """Typed columns (kfs.spark.typed): their plans travel in the columns' metadata and each executor
    reads `_schemas` itself; Avro, Protobuf, older versions resolved, and the JSON text of a read across
    topics give the local session's rows."""
    local, on_cluster = results["local"]["without_the_jar"]["typed"], results["cluster"]["without_the_jar"]["typed"]
    assert set(local) == {"avro", "protobuf", "resolved", "json_text"} and all(local.values()), local
    assert on_cluster == local
    assert any('"value_decoded":{' in row for row in local["protobuf"])


def test_the_rows_are_every_record(results):
    rows = results["cluster"]["all_with_headers"]["rows"]
    assert len(rows) == sum(len(golden_rows(p)) for p in GOLDEN_PARTITIONS)
    assert len(results["cluster"]["relative_path"]["rows"]) == sum(
        len(golden_rows(p)) for p in GOLDEN_PARTITIONS if (Path(LOGDIRS[1]) / p).is_dir())


def test_export_writes_the_same_parquet(results):
    local = parquet_rows(Path(results["local"]["out"]) / "parquet")
    assert local and parquet_rows(Path(results["cluster"]["out"]) / "parquet") == local


def test_grep_prints_the_same_lines(results):
    assert results["local"]["grep"].count("\n") > 10
    assert results["cluster"]["grep"] == results["local"]["grep"]


@pytest.mark.parametrize("case", ["log_dir", "partition_dir", "first_segment"])
def test_planned_data_gone_fails_the_task_naming_path_and_host(results, case):
    for where in ("local", "cluster"):
        text = results[where]["vanished"][case]
        assert "PlannedDataMissing" in text, (where, text[-2000:])
        gist = spark_error_gist(RuntimeError(text))
        assert f"vanish-{case}" in gist and f"host {socket.gethostname()}" in gist, (where, gist)


def test_cli_grep_on_the_cluster_prints_local_lines(results):
    done = results["cluster"]["cli"]["grep"]
    assert done["returncode"] == 0, done["stderr"][-3000:]
    assert done["stdout"] == results["local"]["grep"]


def test_cli_export_on_the_cluster_writes_local_parquet(results):
    done = results["cluster"]["cli"]["export"]
    assert done["returncode"] == 0, done["stderr"][-3000:]
    assert parquet_rows(Path(results["cluster"]["out"]) / "cli-parquet") == \
        parquet_rows(Path(results["local"]["out"]) / "parquet")


def test_stopping_the_cluster_leaves_no_process(cluster):
    groups = [cluster.master.process.pid, cluster.worker.process.pid]
    cluster.stop()
    for pgid in groups:
        with pytest.raises(ProcessLookupError):
            os.killpg(pgid, 0)
    left = [pid for pid in os.listdir("/proc") if pid.isdigit() and _cwd_under(pid, cluster.work_dir)]
    assert left == []


def _cwd_under(pid: str, root: Path) -> bool:
    """Whether process `pid` runs in `root` (an executor runs in the Worker's work dir)."""
    try:
        return os.readlink(f"/proc/{pid}/cwd").startswith(str(root))
    except OSError:
        return False
