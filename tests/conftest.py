"""Shared pytest fixtures: one session-scoped SparkSession for the whole run (PLATFORM.md)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from pulsar_model.pipeline.session import build_session
from tests.spark_conf import session_conf
from tests.standalone_cluster import ClusterNightly, run_cluster_nightly

os.environ.setdefault("TZ", "UTC")


#: The suite runs with Spark's defaults (ANSI on, as in Spark 4 and Databricks); ``make test`` runs the golden
#: and property tests a second time with ``PULSAR_TEST_ANSI=false`` for sessions that turn ANSI off.
ANSI = os.environ.get("PULSAR_TEST_ANSI", "true")


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = build_session(
        "pulsar-analytics-tests",
        master="local[2]",
        fast_start=True,
        conf={
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.ui.enabled": "false",
            "spark.sql.adaptive.coalescePartitions.enabled": "true",
            "spark.driver.memory": "2g",
            "spark.sql.ansi.enabled": ANSI,
            # experiments: PULSAR_TEST_SPARK_CONF={"spark.sql.adaptive.enabled": "false"}
            **json.loads(os.environ.get("PULSAR_TEST_SPARK_CONF", "{}")),
        },
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def fast_spark_conf(spark: SparkSession) -> Iterator[None]:
    """The module runs under :data:`tests.spark_conf.FAST_CONF` (``pytestmark =
    pytest.mark.usefixtures("fast_spark_conf")`` sets it before the module's own fixtures run)."""
    with session_conf(spark):
        yield


@pytest.fixture(scope="session")
def cluster_nightly(tmp_path_factory: pytest.TempPathFactory) -> ClusterNightly:
    """The nightly job spark-submitted once per session to a standalone cluster on 127.0.0.1 (stopped again).

    Used by the cluster test (the run itself) and the notebook test (the warehouse it wrote).
    """
    return run_cluster_nightly(tmp_path_factory.mktemp("cluster-nightly"))


#: Test files that share the session's standalone-cluster run (:func:`cluster_nightly`): one pytest-xdist
#: worker runs them all, so the cluster starts once per ``make test``.
CLUSTER_NIGHTLY_FILES = frozenset({"test_cluster_runtime.py", "test_notebooks.py"})

#: The groups whose module fixtures run whole pipelines, slowest first (``--durations`` of ``make test``):
#: handed out before the rest so that neither worker ends the run alone with one of them.
SLOW_GROUPS = (
    "cluster-nightly",
    "test_nightly_crash.py",
    "test_quota_stage.py",
    "test_cli_process.py",
    "test_replication_stage.py",
    "test_demo_ingest.py",
    "test_versions_mixed.py",
    "test_history_stage.py",
    "test_ingest_pipeline.py",
)


def xdist_work_unit(nodeid: str) -> str:
    """The pytest-xdist work unit of a test: its file, or ``cluster-nightly`` for the files that read the
    cluster run. A unit runs whole on one worker, so its module fixtures are built once."""
    name = nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
    return "cluster-nightly" if name in CLUSTER_NIGHTLY_FILES else name


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``make test``'s ``--dist loadgroup``: one work unit per :func:`xdist_work_unit`, slow groups first.

    xdist's own loadgroup reads ``xdist_group`` marks by rewriting each item's ``_nodeid``, which pytest 9.2
    no longer reads (node ids live in ``_id``): every test became its own unit, and the demo pipelines of the
    module fixtures ran once on each worker. This groups by node id instead (no marks, no pytest internals),
    through the two methods xdist's own LoadGroupScheduling overrides; ``tests/test_xdist_grouping.py``
    fails if an xdist release changes them.
    """
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FileGroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return xdist_work_unit(nodeid)

        def _assign_work_unit(self, node: object) -> None:
            for group in SLOW_GROUPS:
                if group in self.workqueue:
                    self.workqueue.move_to_end(group, last=False)
                    break
            super()._assign_work_unit(node)

    return FileGroupScheduling(config, log)
