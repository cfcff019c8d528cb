"""spark-submit runtime: the --py-files zip and a real standalone cluster on 127.0.0.1 (issue 8, runtimes).

The zip tests build ``tools/build_dist.py``'s zip and load the package and its contracts from it. The slow
test checks the session's cluster run (``tests/standalone_cluster.py``, fixture ``cluster_nightly`` in
``tests/conftest.py``): a master and two 1-core workers, a probe job showing that the driver and both
executors import ``pulsar_model`` from the zip, and ``jobs/nightly.py`` on a tiny demo export, whose run log
and a few tables are read back with delta-rs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile

import pytest

from pulsar_model.pipeline.nightly import STAGES
from pulsar_model.tables import contracts
from tests.standalone_cluster import TINY, ClusterNightly, build_dist_module, read_delta

#: Tables read back after the cluster run: inputs and one output of several stages.
CHECKED_TABLES = ("ledgers", "cursors", "cursor_backlog", "quota_status", "compaction_summary")


def test_build_zip_carries_package_resources_and_contracts(tmp_path):
    zip_path = build_dist_module().build_zip(tmp_path)
    names = set(zipfile.ZipFile(zip_path).namelist())
    assert {
        "pulsar_model/__init__.py",
        "pulsar_model/pipeline/cli.py",
        "pulsar_model/resources/log4j2.properties",
        "pulsar_model/wire/_generated/pulsar_api_pb2.py",
        "pulsar_model/wire/proto/pulsar_api.proto",
        "pulsar_model/_schemas/_common.yaml",
    } <= names
    assert {f"pulsar_model/_schemas/{t}.yaml" for t in contracts.table_names()} <= names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    again = build_dist_module().build_zip(tmp_path / "again")
    assert zip_path.read_bytes() == again.read_bytes(), "deterministic"


def test_build_zip_contracts_load_from_the_zip(tmp_path):
    """A fresh interpreter with only the zip providing pulsar_model reads every contract from it."""
    zip_path = build_dist_module().build_zip(tmp_path)
    code = (
        "import pulsar_model, pulsar_model.tables.contracts as c; "
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
@pytest.mark.timeout(3300)  # covers the session fixture: the whole nightly on the standalone cluster
def test_spark_submit_nightly_on_standalone_cluster(cluster_nightly: ClusterNightly):
    where = cluster_nightly.probe
    n_contracts = len(contracts.table_names())
    from_zip = "pulsar_analytics.zip/pulsar_model/__init__.py"
    assert where["driver"][0].endswith(from_zip) and where["driver"][1] == n_contracts, where
    assert where["executors"] and all(
        path.endswith(from_zip) and count == n_contracts for path, count in where["executors"]
    ), where

    stdout = cluster_nightly.stdout
    print("\n".join(line for line in stdout.splitlines() if line.startswith("[")))  # per-stage times
    assert f"[{len(STAGES)}/{len(STAGES)}]" in stdout, stdout[-3000:]
    assert "pulsar-analytics-cluster-test" in cluster_nightly.completed_apps, "the job ran on the cluster"

    warehouse = cluster_nightly.warehouse
    run_log = read_delta(warehouse / "run_log")
    assert len({r["run_id"] for r in run_log}) == 1, run_log
    assert sorted((r["stage"], r["status"]) for r in run_log) == sorted((s, "succeeded") for s in STAGES)
    assert {r["run_date"] for r in run_log} == {TINY.exported_at.date()}
    for table in CHECKED_TABLES:
        rows = read_delta(warehouse / table)
        assert rows, f"{table} is empty after the cluster run"
        assert set(rows[0]) == set(contracts.contract(table).column_names), table
        assert {r["export_date"] for r in rows} == {TINY.exported_at.date()}, table
