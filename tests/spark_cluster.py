"""A real Spark standalone cluster for the tests: one Master and one Worker on 127.0.0.1.

Started from the pip-installed PySpark, as a user without a Spark distribution would (the wheel has
`bin/spark-class` but no `sbin/start-master.sh`). Each daemon runs in a process group of its own,
so stopping kills everything it started (the Worker's executor JVMs and their Python workers);
each dies with the test process too (PR_SET_PDEATHSIG), so a killed pytest leaves no JVM behind.

Ports are the daemons' own choice (`--port 0`), read back from their logs: no race for a port
picked in advance. The driver talks to the cluster through `spark-defaults.conf` in `conf_dir`
(`SPARK_CONF_DIR`), which every driver started with `env()` reads, `kfs spark ...` included.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

SPARK_HOME = os.path.dirname(pyspark.__file__)
PR_SET_PDEATHSIG = 1

# What a driver of a test needs on a loaded 2-core machine (SPARK-NOTES): patient heartbeats (the
# first task can start after the default 10 s), no UI; each application takes 2 of the Worker's
# cores (slots, not CPUs), so that a Worker of 6 runs three applications side by side.
DRIVER_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.executor.heartbeatInterval": "600s",
    "spark.network.timeout": "1200s",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.executor.memory": "1g",
    "spark.cores.max": "2",
    "spark.driver.host": "127.0.0.1",
    # Executors live for one test's application: C1 alone (tests/conftest.py: TEST_JVM_OPTIONS).
    "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1",
}


def _die_with_parent() -> None:  # runs in the child between fork and exec
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class Daemon:
    """A Spark daemon (Master or Worker) and the file its output goes to."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, pattern: str, timeout: float) -> re.Match[str]:
        """The first match of `pattern` in the log, waiting for it; the log's tail if it never comes."""
        deadline = time.monotonic() + timeout
        while True:
            found = re.search(pattern, self.text())
            if found:
                return found
            if self.process.poll() is not None or time.monotonic() > deadline:
                state = f"exited {self.process.returncode}" if self.process.poll() is not None else "timed out"
                raise RuntimeError(f"Spark {self.name} {state} before /{pattern}/:\n{self.text()[-3000:]}")
            time.sleep(0.2)

    def stop(self) -> None:
        """Kill the daemon's process group (its executors and Python workers with it), reap the
        daemon, and wait until no member of the group is left (SIGKILL after 10 s of SIGTERM)."""
        pgid = self.process.pid
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                break
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=10)
            if _group_gone(pgid, timeout=10):
                break
        self.process.wait(timeout=10)


def _group_gone(pgid: int, timeout: float) -> bool:
    """Whether process group `pgid` empties within `timeout` s (the init process reaps orphans)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


@dataclass
class Cluster:
    master_url: str
    master: Daemon
    worker: Daemon
    conf_dir: Path
    work_dir: Path
    more_workers: list[Daemon] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        """The environment of a driver for this cluster (a `kfs spark` command, a test script)."""
        return {**os.environ, "SPARK_HOME": SPARK_HOME, "SPARK_CONF_DIR": str(self.conf_dir),
                "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
                "PYSPARK_DRIVER_PYTHON": sys.executable}

    def executor_logs(self) -> str:
        """What the executors wrote (the Worker's work dir: app-*/N/stderr), for failure messages."""
        return "\n".join(p.read_text(errors="replace")[-2000:] for p in sorted(self.work_dir.glob("app-*/*/stderr")))

    def add_worker(self, name: str, cores: int, memory: str, env: dict[str, str], timeout: float = 240) -> Daemon:
        """Another Worker of the Master, its environment (which its executors inherit) with `env` too:
        `{"KFS_HOST": "broker-b"}` makes it another host to kfs.spark.broker_local."""
        root = self.work_dir.parent
        worker = _daemon(name, "org.apache.spark.deploy.worker.Worker",
                         ["--host", "127.0.0.1", "--port", "0", "--webui-port", "0", "--cores", str(cores),
                          "--memory", memory, "--work-dir", str(self.work_dir), self.master_url], root,
                         {**_daemon_env(self.conf_dir), **env})
        self.more_workers.append(worker)
        worker.wait_for(r"Successfully registered with master", timeout)
        return worker

    def stop(self) -> None:
        for worker in self.more_workers:
            worker.stop()
        self.worker.stop()
        self.master.stop()


def _daemon(name: str, cls: str, args: list[str], root: Path, env: dict[str, str]) -> Daemon:
    log = root / f"{name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen([os.path.join(SPARK_HOME, "bin", "spark-class"), cls, *args],
                                   stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                                   cwd=root, start_new_session=True, preexec_fn=_die_with_parent)
    return Daemon(name, process, log)


def _daemon_env(conf_dir: Path) -> dict[str, str]:
    return {**os.environ, "SPARK_HOME": SPARK_HOME, "SPARK_CONF_DIR": str(conf_dir), "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable, "SPARK_NO_DAEMONIZE": "1",
            # Daemons take little: the executor's heap is spark.executor.memory.
            "SPARK_DAEMON_MEMORY": "512m"}


def start_cluster(root: Path, cores: int = 2, memory: str = "2g", timeout: float = 240) -> Cluster:
    """A Master and a Worker of `cores` cores on 127.0.0.1, the Worker registered; stopped on failure."""
    conf_dir, work_dir = root / "conf", root / "work"
    conf_dir.mkdir(parents=True, exist_ok=True)
    work_dir.mkdir(exist_ok=True)
    (conf_dir / "spark-defaults.conf").write_text("".join(f"{k} {v}\n" for k, v in DRIVER_CONF.items()))
    (conf_dir / "log4j2.properties").write_text(
        "rootLogger.level = info\nrootLogger.appenderRef.stdout.ref = console\n"
        "appender.console.type = Console\nappender.console.name = console\nappender.console.target = SYSTEM_ERR\n"
        "appender.console.layout.type = PatternLayout\nappender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n\n"
        "logger.jetty.name = org.sparkproject.jetty\nlogger.jetty.level = warn\n")
    env = _daemon_env(conf_dir)
    master = _daemon("master", "org.apache.spark.deploy.master.Master",
                     ["--host", "127.0.0.1", "--port", "0", "--webui-port", "0"], root, env)
    worker: Daemon | None = None
    try:
        url = master.wait_for(r"Starting Spark master at (spark://127\.0\.0\.1:\d+)", timeout).group(1)
        worker = _daemon("worker", "org.apache.spark.deploy.worker.Worker",
                         ["--host", "127.0.0.1", "--port", "0", "--webui-port", "0", "--cores", str(cores),
                          "--memory", memory, "--work-dir", str(work_dir), url], root, env)
        worker.wait_for(r"Successfully registered with master", timeout)
        return Cluster(url, master, worker, conf_dir, work_dir)
    except BaseException:
        if worker is not None:
            worker.stop()
        master.stop()
        raise


def cluster_session(root: Path, cores: int = 2, memory: str = "2g") -> Iterator[Cluster]:
    """A started cluster, stopped afterwards whatever happened (the body of a pytest fixture)."""
    cluster = start_cluster(root, cores, memory)
    try:
        yield cluster
    finally:
        cluster.stop()
