"""The object-store and delta-connector config examples load, validate and say what they claim (issue 8)."""

from __future__ import annotations

import re
from pathlib import Path

import pyspark
import pytest
from delta import configure_spark_with_delta_pip
from pyspark.sql import SparkSession

from pulsar_model.pipeline.config import load_config
from pulsar_model.tables.delta_io._paths import TableLocator

CONF = Path(__file__).resolve().parent.parent / "conf"
S3 = CONF / "cluster.s3.example.yaml"
CONNECTOR = CONF / "cluster.delta-connector.example.yaml"
DELTA_EXTENSIONS = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}
PACKAGES = re.compile(r"--packages (\S+)")


def _packages_in_comments(path: Path) -> list[str]:
    """Every ``--packages a,b`` coordinate written in the file's comments."""
    found: list[str] = []
    for match in PACKAGES.finditer(path.read_text(encoding="utf-8")):
        found.extend(match.group(1).split(","))
    return found


def _delta_coordinate() -> str:
    """The connector coordinate delta-spark's own helper builds for the installed pyspark/delta-spark."""
    options: dict[str, str] = configure_spark_with_delta_pip(SparkSession.builder)._options
    return options["spark.jars.packages"]


@pytest.mark.parametrize("path", [S3, CONNECTOR], ids=lambda p: p.name)
def test_conf_example_loads_for_spark_submit_with_the_connector(path):
    config = load_config(path)
    assert config.spark.master is None, "spark-submit chooses the master"
    assert config.storage.delta_backend == "spark"
    assert {k: config.spark.conf.get(k) for k in DELTA_EXTENSIONS} == DELTA_EXTENSIONS
    assert load_config(path, ["storage.warehouse=/tmp/elsewhere"]).storage.warehouse == "/tmp/elsewhere"


@pytest.mark.parametrize("path", [S3, CONNECTOR], ids=lambda p: p.name)
def test_conf_example_packages_match_the_installed_delta_spark(path):
    packages = _packages_in_comments(path)
    delta = [p for p in packages if p.startswith("io.delta:")]
    assert delta == [_delta_coordinate()], (delta, _delta_coordinate())


def test_conf_s3_example_object_store_paths_and_s3a_settings():
    config = load_config(S3)
    assert config.storage.warehouse.startswith("s3a://")
    assert all(v.startswith("s3a://") for v in config.storage.table_locations.values())
    s3a = {k: v for k, v in config.spark.conf.items() if k.startswith("spark.hadoop.fs.s3a.")}
    assert s3a["spark.hadoop.fs.s3a.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    assert "spark.hadoop.fs.s3a.aws.credentials.provider" in s3a
    assert not [k for k in s3a if "secret" in k or "access.key" in k], "no credentials in the example"
    locator = TableLocator(config.storage.warehouse, config.storage.table_locations)
    assert locator.locate("ledgers").uri == "s3a://pulsar-analytics/warehouse/ledgers"
    assert locator.locate("quarantine").uri == "s3a://pulsar-analytics-audit/quarantine"


def test_conf_s3_example_hadoop_aws_matches_sparks_hadoop():
    jars = Path(pyspark.__file__).resolve().parent / "jars"
    (client,) = jars.glob("hadoop-client-api-*.jar")
    hadoop_version = client.name.removeprefix("hadoop-client-api-").removesuffix(".jar")
    hadoop_aws = [p for p in _packages_in_comments(S3) if p.startswith("org.apache.hadoop:hadoop-aws:")]
    assert hadoop_aws == [f"org.apache.hadoop:hadoop-aws:{hadoop_version}"]


def test_conf_connector_example_warehouse_is_shared_storage_path():
    config = load_config(CONNECTOR)
    assert config.storage.warehouse.startswith("/")
    assert TableLocator(config.storage.warehouse).locate("run_log").uri.endswith("/warehouse/run_log")
