"""spark-submit runtime: the --py-files zip and a real standalone cluster on 127.0.0.1 (issue 8, runtimes).

The slow test starts a Spark standalone master and two 1-core workers as subprocesses of this test
(``bin/spark-class`` of the pip pyspark, PLATFORM.md "A real Spark cluster on loopback"), submits
``jobs/nightly.py`` with the zip built by ``tools/build_dist.py`` on a tiny demo export, checks the
run log and a few tables with delta-rs, and stops exactly the processes it started.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow.fs as pafs
import pyspark
import pytest
from deltalake import DeltaTable

from pulsar_model import contracts
from pulsar_model.demo import DemoSpec, generate_demo
from pulsar_model.nightly import STAGES

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SPARK_BIN = Path(pyspark.__file__).resolve().parent / "bin"
#: The smallest demo on which every stage has rows: two clusters (geo-replication needs two) on ONE broker
#: version. Cost is Spark jobs, not rows: every stage plans its transforms once per broker version present,
#: so the default three versions tripled the jobs and the plan sizes (issue 8 measurements).
TINY = dataclasses.replace(
    DemoSpec(),
    clusters=("us-east", "us-west"),
    pulsar_versions={"us-east": "4.1.3", "us-west": "4.1.3"},
    topics_per_namespace=2,
    replicated_topics=1,
    partitions=2,
    replicated_partitions=2,
    messages_per_topic=(20, 60),
)
#: Tables read back after the cluster run: inputs and one output of several stages.
CHECKED_TABLES = ("ledgers", "cursors", "cursor_backlog", "quota_status", "compaction_summary")
READY_TIMEOUT_S = 90.0
#: A safety net, not a budget: the nightly takes minutes on a quiet 2-core box, but on a shared box at load
#: ~18 (issue 8 measurements) 1200 s was not enough; CI's own 60-minute limit bounds the whole run.
SUBMIT_TIMEOUT_S = 2700
#: The job's config: executors get the cheap-JIT options too (the session's base settings would replace
#: a ``--conf spark.executor.extraJavaOptions``); the warehouse and ``master: null`` come as ``--set``.
#: Tiny data and very wide plans: adaptive re-planning (one extra job per shuffle) and code generation cost
#: far more than they save (as the golden tests' ``FAST_CONF``); two shuffle partitions keep both executors
#: busy.
CLUSTER_CONFIG = """
spark:
  master: local[2]
  app_name: pulsar-analytics-cluster-test
  conf:
    spark.executor.extraJavaOptions: "-Duser.timezone=UTC -XX:+UseSerialGC -XX:TieredStopAtLevel=1"
    spark.sql.shuffle.partitions: "2"
    spark.default.parallelism: "2"
    spark.sql.adaptive.enabled: "false"
    spark.sql.codegen.wholeStage: "false"
    spark.sql.codegen.factoryMode: "NO_CODEGEN"
"""
#: Printed by the probe job so the test can parse where pulsar_model came from on each side.
_PROBE = """
import json, sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()

def where(_):
    import pulsar_model
    from pulsar_model import contracts
    yield (pulsar_model.__file__, len(contracts.table_names()))

import pulsar_model
from pulsar_model import contracts
executors = sorted(set(spark.sparkContext.parallelize(range(2), 2).mapPartitions(where).collect()))
print("PROBE " + json.dumps({"driver": [pulsar_model.__file__, len(contracts.table_names())],
                            "executors": executors}))
spark.stop()
"""


def _build_dist() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_dist", PROJECT_ROOT / "tools" / "build_dist.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _free_ports(count: int) -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _spark_env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOCAL_DIRS": str(tmp / "local"),
            "SPARK_LOG_DIR": str(tmp / "logs"),
            "SPARK_DAEMON_MEMORY": "512m",
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "TZ": "UTC",
        }
    )
    env.pop("PYTHONPATH", None)  # the zip must be what provides pulsar_model on the cluster
    return env


def _stop(process: subprocess.Popen[Any]) -> None:
    """Stop one process group this test started (spark-class execs the JVM in it)."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=20)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass


@dataclasses.dataclass
class Cluster:
    """A standalone master and its workers, all started by the fixture."""

    url: str
    web_ui: str
    processes: list[subprocess.Popen[bytes]]
    env: dict[str, str]
    logs: Path

    def alive_workers(self) -> int:
        try:
            with urllib.request.urlopen(f"{self.web_ui}/json/", timeout=2) as response:
                state = json.load(response)
        except OSError:
            return 0
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")

    def completed_apps(self) -> list[str]:
        with urllib.request.urlopen(f"{self.web_ui}/json/", timeout=5) as response:
            state = json.load(response)
        return [app.get("name", "") for app in state.get("completedapps", [])]

    def log_tail(self, lines: int = 30) -> str:
        parts = []
        for log in sorted(self.logs.glob("*.log")):
            tail = log.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"--- {log.name}\n" + "\n".join(tail))
        return "\n".join(parts)


def _start(command: Sequence[str], log: Path, env: dict[str, str], cwd: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(
            list(command), stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True
        )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("cluster")
    for folder in ("local", "logs", "work"):
        (tmp / folder).mkdir()
    env = _spark_env(tmp)
    master_port, master_ui, ui_1, ui_2 = _free_ports(4)
    spark_class = str(SPARK_BIN / "spark-class")
    url = f"spark://127.0.0.1:{master_port}"
    result = Cluster(url, f"http://127.0.0.1:{master_ui}", [], env, tmp / "logs")
    try:
        master = [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1"]
        master += ["--port", str(master_port), "--webui-port", str(master_ui)]
        result.processes.append(_start(master, tmp / "logs" / "master.log", env, tmp))
        for number, web_ui in enumerate((ui_1, ui_2), start=1):
            worker = [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1"]
            worker += ["--cores", "1", "--memory", "1g", "--webui-port", str(web_ui)]
            worker += ["--work-dir", str(tmp / "work" / f"worker-{number}")]
            result.processes.append(_start(worker, tmp / "logs" / f"worker-{number}.log", env, tmp))
        deadline = time.monotonic() + READY_TIMEOUT_S
        while result.alive_workers() < 2:
            dead = [p.args for p in result.processes if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                pytest.fail(f"cluster not ready (exited: {dead})\n{result.log_tail()}")
            time.sleep(0.5)
        yield result
    finally:
        for process in reversed(result.processes):
            _stop(process)


@pytest.fixture(scope="module")
def py_files_zip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path: Path = _build_dist().build_zip(tmp_path_factory.mktemp("dist"))
    return path


def _submit(cluster: Cluster, zip_path: Path, script: Path, args: Sequence[str], cwd: Path) -> str:
    command = [str(SPARK_BIN / "spark-submit"), "--master", cluster.url]
    for key, value in {
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
    }.items():
        command += ["--conf", f"{key}={value}"]
    command += ["--driver-memory", "1g", "--executor-memory", "768m", "--total-executor-cores", "2"]
    command += ["--py-files", str(zip_path), str(script), *args]
    # Own process group: on a timeout the whole submit (JVM + Python driver) is stopped, nothing else.
    with subprocess.Popen(
        command,
        cwd=cwd,
        env=cluster.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=SUBMIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            _stop(process)
            stdout, stderr = process.communicate()
            pytest.fail(
                f"spark-submit {script.name} took over {SUBMIT_TIMEOUT_S}s\n--- stdout\n{stdout[-4000:]}\n"
                f"--- stderr\n{stderr[-4000:]}"
            )
    done = subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
    assert done.returncode == 0, (
        f"spark-submit {script.name} exited {done.returncode}\n--- stdout\n{done.stdout[-6000:]}\n"
        f"--- stderr\n{done.stderr[-6000:]}\n{cluster.log_tail()}"
    )
    return done.stdout


def _read_delta(path: Path) -> list[dict[str, object]]:
    # An explicit filesystem: without it to_pyarrow_table can abort the interpreter at exit (PLATFORM.md).
    table = DeltaTable(str(path)).to_pyarrow_table(
        filesystem=pafs.SubTreeFileSystem(str(path), pafs.LocalFileSystem())
    )
    rows: list[dict[str, object]] = table.to_pylist()
    return rows


def test_build_zip_carries_package_resources_and_contracts(tmp_path):
    zip_path = _build_dist().build_zip(tmp_path)
    names = set(zipfile.ZipFile(zip_path).namelist())
    assert {
        "pulsar_model/__init__.py",
        "pulsar_model/cli.py",
        "pulsar_model/resources/log4j2.properties",
        "pulsar_model/wire/_generated/pulsar_api_pb2.py",
        "pulsar_model/wire/proto/pulsar_api.proto",
        "pulsar_model/_schemas/_common.yaml",
    } <= names
    assert {f"pulsar_model/_schemas/{t}.yaml" for t in contracts.table_names()} <= names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert zip_path.read_bytes() == _build_dist().build_zip(tmp_path / "again").read_bytes(), "deterministic"


def test_build_zip_contracts_load_from_the_zip(tmp_path):
    """A fresh interpreter with only the zip providing pulsar_model reads every contract from it."""
    zip_path = _build_dist().build_zip(tmp_path)
    code = (
        "import pulsar_model, pulsar_model.contracts as c; "
        "print(pulsar_model.__file__); print(len(c.table_names())); print(c.contract('run_log').table)"
    )
    env = {**os.environ, "PYTHONPATH": str(zip_path)}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    origin, count, table = done.stdout.split()
    assert origin.startswith(str(zip_path)) and int(count) == len(contracts.table_names()) > 0
    assert table == "run_log"


@pytest.mark.slow
@pytest.mark.runtime
@pytest.mark.timeout(3300)
def test_spark_submit_nightly_on_standalone_cluster(cluster, py_files_zip, tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(_PROBE)
    probe_out = _submit(cluster, py_files_zip, probe, [], tmp_path)
    line = next(ln for ln in probe_out.splitlines() if ln.startswith("PROBE "))
    where = json.loads(line.split("PROBE ", 1)[1])
    n_contracts = len(contracts.table_names())
    from_zip = "pulsar_analytics.zip/pulsar_model/__init__.py"
    assert where["driver"][0].endswith(from_zip) and where["driver"][1] == n_contracts, where
    assert where["executors"] and all(
        path.endswith(from_zip) and count == n_contracts for path, count in where["executors"]
    ), where

    export, warehouse = tmp_path / "export", tmp_path / "warehouse"
    generate_demo(export, TINY, overwrite=True)
    config = tmp_path / "cluster.yaml"
    config.write_text(CLUSTER_CONFIG)
    args = ["--config", str(config), "--export-dir", str(export), "--set", f"storage.warehouse={warehouse}"]
    args += ["--set", "spark.master=null"]  # leave the master to spark-submit
    stdout = _submit(cluster, py_files_zip, PROJECT_ROOT / "jobs" / "nightly.py", args, tmp_path)
    print("\n".join(line for line in stdout.splitlines() if line.startswith("[")))  # per-stage times
    assert f"[{len(STAGES)}/{len(STAGES)}]" in stdout, stdout[-3000:]

    assert "pulsar-analytics-cluster-test" in cluster.completed_apps(), "the job ran on the cluster"

    run_log = _read_delta(warehouse / "run_log")
    assert len({r["run_id"] for r in run_log}) == 1, run_log
    assert sorted((r["stage"], r["status"]) for r in run_log) == sorted((s, "succeeded") for s in STAGES)
    assert {r["run_date"] for r in run_log} == {TINY.exported_at.date()}
    for table in CHECKED_TABLES:
        rows = _read_delta(warehouse / table)
        assert rows, f"{table} is empty after the cluster run"
        assert set(rows[0]) == set(contracts.contract(table).column_names), table
        assert {r["export_date"] for r in rows} == {TINY.exported_at.date()}, table
