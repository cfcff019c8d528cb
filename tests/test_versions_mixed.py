"""Versions as data (docs §0.3): a mixed-version export gives, row for row, the single-version answers.

Each test builds one random set of managed-ledger states (tests/oracle/strategies.py), copies it into three
clusters of different version lines, each managed-ledger row carrying its cluster's ``pulsar_version``, and
runs a public transform twice: once with ``pulsar_version=None`` (each row's own version, one plan for
every cluster) and once per cluster with that cluster's version as the argument on that cluster's rows
alone. The first result must equal the union of the others, whole frame against whole frame. The three
versions sit on different sides of most flags of :data:`pulsar_model.domain.versions.FLAGS` that the
transforms read (2.10.1: 2.x counts, no precise-backlog guard, LAC clamp; 3.0.7: the 3.x rules; 4.1.3: the
4.x entry count and size-since-mark-delete of #24938 / #25089).
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Sequence

import pytest
from chispa import assert_df_equality
from hypothesis import HealthCheck, Phase, Verbosity, assume, given, settings
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pulsar_model.backlog import estimated_backlog_size, estimated_size_since_mark_delete, precise_backlog
from pulsar_model.domain.versions import FLAGS
from pulsar_model.engine.flags import FLAGS_COLUMN, with_flags
from pulsar_model.pinning import pinning_report
from pulsar_model.pipeline.stages.cluster_versions import (
    cluster_versions,
    day_cluster_versions,
    with_cluster_version,
)
from pulsar_model.positions import position_after_n
from pulsar_model.tables.delta_io import DeltaTables
from tests.oracle import strategies as S
from tests.spark_jobs import spark_jobs

#: cluster -> broker version of the mixed export.
CLUSTERS = {"c-old": "2.10.1", "c-mid": "3.0.7", "c-new": "4.1.3"}

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:Generating overly large repr")]

MIXED_SETTINGS = settings(
    max_examples=S.PROPERTY_EXAMPLES,
    deadline=None,
    database=None,
    phases=[Phase.generate],
    verbosity=Verbosity.quiet,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)

#: A transform called on named inputs with a ``pulsar_version`` argument.
Transform = Callable[[dict[str, DataFrame], str | None], DataFrame]


def _in_cluster(df: DataFrame, cluster: str) -> DataFrame:
    """``df`` (every row of cluster ``c1``) moved to ``cluster``, the managed ledgers with its version."""
    moved = df.withColumn("cluster", F.lit(cluster))
    if "current_ledger_id" in df.columns:  # the managed-ledger frame: the version is per row
        moved = moved.withColumn("pulsar_version", F.lit(CLUSTERS[cluster]))
    return moved


def assert_mixed_equals_single_runs(inputs: dict[str, DataFrame], transform: Transform) -> None:
    """``transform(mixed export, None)`` == union over clusters of ``transform(its rows, its version)``."""
    per_cluster = {c: {k: _in_cluster(df, c) for k, df in inputs.items()} for c in CLUSTERS}
    mixed = {
        k: functools.reduce(DataFrame.unionByName, [per_cluster[c][k] for c in CLUSTERS]) for k in inputs
    }
    actual = transform(mixed, None)
    singles: Sequence[DataFrame] = [transform(per_cluster[c], v) for c, v in CLUSTERS.items()]
    expected = functools.reduce(DataFrame.unionByName, singles)
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def _cursor_inputs(spark: SparkSession, cases: list[S.Case]) -> dict[str, DataFrame]:
    ledgers, managed, cursors = S.input_frames(spark, cases)
    return {"ledgers": ledgers, "managed": managed, "cursors": cursors}


@MIXED_SETTINGS
@given(cases=S.case_lists(S.cursor_cases(), min_size=12, max_size=20))
def test_precise_backlog_mixed_versions(spark: SparkSession, cases: list[S.Case]) -> None:
    assume(S.is_informative(cases))
    assert_mixed_equals_single_runs(
        _cursor_inputs(spark, cases),
        lambda i, v: precise_backlog(i["cursors"], i["ledgers"], i["managed"], pulsar_version=v),
    )


@MIXED_SETTINGS
@given(cases=S.case_lists(S.cursor_cases(), min_size=12, max_size=20))
def test_estimated_backlog_size_mixed_versions(spark: SparkSession, cases: list[S.Case]) -> None:
    assume(S.is_informative(cases))
    assert_mixed_equals_single_runs(
        _cursor_inputs(spark, cases),
        lambda i, v: estimated_backlog_size(i["managed"], i["ledgers"], i["cursors"], pulsar_version=v),
    )


@MIXED_SETTINGS
@given(cases=S.case_lists(S.cursor_cases(), min_size=12, max_size=20))
def test_size_since_mark_delete_mixed_versions(spark: SparkSession, cases: list[S.Case]) -> None:
    assume(S.is_informative(cases))
    assert_mixed_equals_single_runs(
        _cursor_inputs(spark, cases),
        lambda i, v: estimated_size_since_mark_delete(
            i["cursors"], i["ledgers"], i["managed"], pulsar_version=v
        ),
    )


@MIXED_SETTINGS
@given(cases=S.case_lists(S.cursor_cases(), min_size=12, max_size=20))
def test_pinning_report_mixed_versions(spark: SparkSession, cases: list[S.Case]) -> None:
    assume(S.is_informative(cases))
    assert_mixed_equals_single_runs(
        _cursor_inputs(spark, cases),
        lambda i, v: pinning_report(i["managed"], i["ledgers"], i["cursors"], pulsar_version=v),
    )


@MIXED_SETTINGS
@given(cases=S.case_lists(S.position_after_n_cases(), min_size=12, max_size=20))
def test_position_after_n_mixed_versions(spark: SparkSession, cases: list[S.Case]) -> None:
    assume(S.is_informative(cases))
    ledgers, managed, _ = S.input_frames(spark, cases)
    requests = spark.createDataFrame(S.position_after_n_rows(cases), S.POSITION_AFTER_N_REQUESTS_SCHEMA)
    assert_mixed_equals_single_runs(
        {"ledgers": ledgers, "managed": managed, "requests": requests},
        lambda i, v: position_after_n(i["requests"], i["ledgers"], i["managed"], pulsar_version=v),
    )


def test_cluster_version_is_the_latest_release_by_number(spark: SparkSession) -> None:
    """The stages' one version per cluster: 4.10.0 is later than 4.9.0 (a text maximum says otherwise), a
    cluster whose rows name no version and a cluster without managed-ledger rows get the default."""
    managed = spark.createDataFrame(
        [("a", "t1", "4.9.0"), ("a", "t2", "4.10.0"), ("b", "t1", "2.10.6"), ("c", "t1", None)],
        "cluster string, topic string, pulsar_version string",
    )
    versions = cluster_versions(managed, "3.0.7")
    rows = spark.createDataFrame(
        [("a", "x"), ("b", "x"), ("c", "x"), ("d", "x")], "cluster string, topic string"
    )
    expected = spark.createDataFrame(
        [("a", "x", "4.10.0"), ("b", "x", "2.10.6"), ("c", "x", "3.0.7"), ("d", "x", "3.0.7")],
        "cluster string, topic string, pulsar_version string",
    )
    assert_df_equality(
        with_cluster_version(rows, versions, "3.0.7"), expected, ignore_row_order=True, ignore_nullable=True
    )


def test_the_stages_of_a_run_share_one_version_lookup(spark: SparkSession, tmp_path) -> None:
    """Every stage asks for the run date's versions; the same handle answers from memory (no Spark job)
    until ``managed_ledgers`` gets a new version (a rerun of ingest)."""
    tables = DeltaTables(spark, str(tmp_path))
    day = {"export_date": dt.date(2026, 1, 1)}
    schema = "cluster string, topic string, pulsar_version string, export_date date"
    tables.overwrite(
        "managed_ledgers",
        spark.createDataFrame([("a", "t", "3.0.7", day["export_date"])], schema),
        partition_by=["export_date"],
    )
    assert day_cluster_versions(tables, day, "4.1.3") == {"a": "3.0.7"}
    with spark_jobs(spark) as jobs:
        assert day_cluster_versions(tables, day, "4.1.3") == {"a": "3.0.7"}
    assert jobs == []
    tables.overwrite(
        "managed_ledgers",
        spark.createDataFrame([("a", "t", "4.0.9", day["export_date"])], schema),
        partition_by=["export_date"],
    )
    assert day_cluster_versions(tables, day, "4.1.3") == {"a": "4.0.9"}
    assert day_cluster_versions(DeltaTables(spark, str(tmp_path / "empty")), day, "4.1.3") is None


def test_flags_of_the_version_column_equal_each_flags_release_rule(spark: SparkSession) -> None:
    """``with_flags`` (the SQL every version-as-data plan reads) gives, flag by flag, :meth:`Flag.holds`:
    on every release either side of a flag's boundaries and back-ports, and null flags for texts that are
    not a modelled version."""
    releases: set[tuple[int, int, int]] = {(4, 1, 3)}
    for f in FLAGS.values():
        bounds = [f.since, *(f.until for _ in [0] if f.until is not None)]
        bounds += [(line[0], line[1], patch) for line, patch in f.backports]
        for major, minor, patch in bounds:
            releases |= {(major, minor, patch), (major, minor, max(patch - 1, 0)), (major, minor + 1, 0)}
            releases |= {(major, max(minor - 1, 0), 99)}
    texts = [f"{a}.{b}.{c}" for a, b, c in sorted(releases) if a in (2, 3, 4)]
    bad = ["1.22.0", "5.0.0", "4.1", "x"]
    frame = spark.createDataFrame([(t,) for t in [*texts, *bad]], "pulsar_version string")
    rows = {r["pulsar_version"]: r[FLAGS_COLUMN] for r in with_flags(frame).collect()}
    wrong = [
        (text, name)
        for text in texts
        for name, f in FLAGS.items()
        if rows[text] is None or rows[text][name] != f.holds(text)
    ]
    assert not wrong, wrong[:20]
    assert all(rows[text] is None for text in bad)
