"""Shared pytest fixtures: one session-scoped SparkSession for the whole run (PLATFORM.md)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from pulsar_model.pipeline.session import build_session
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


@pytest.fixture(scope="session")
def cluster_nightly(tmp_path_factory: pytest.TempPathFactory) -> ClusterNightly:
    """The nightly job spark-submitted once per session to a standalone cluster on 127.0.0.1 (stopped again).

    Used by the cluster test (the run itself) and the notebook test (the warehouse it wrote).
    """
    return run_cluster_nightly(tmp_path_factory.mktemp("cluster-nightly"))


#: Test files that share the session's standalone-cluster run (:func:`cluster_nightly`): one pytest-xdist
#: worker runs them all, so the cluster starts once per ``make test``.
CLUSTER_NIGHTLY_FILES = frozenset({"test_cluster_runtime.py", "test_notebooks.py"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``--dist loadgroup`` (``make test``) a test file is one group, except the files that read the
    cluster run, which form one group together; without pytest-xdist this does nothing."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        name = item.path.name
        group = "cluster-nightly" if name in CLUSTER_NIGHTLY_FILES else name
        item.add_marker(pytest.mark.xdist_group(group))
