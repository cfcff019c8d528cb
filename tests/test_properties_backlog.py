"""Property tests: pulsar_model.backlog transforms agree with the plain-Python oracle (docs §1.8, §2).

Each hypothesis example is 40-60 random topics (tests/oracle/strategies.py), one DataFrame per input, the
transform run once per version (unioned, one collect), every row compared with
tests/oracle/managed_ledger.py.

Version mapping (docs §0.3, §1.8, §2.2-§2.4, §3.9):

* ``2.8.0`` / ``2.10.0``: the "2.x-old" positions, no ``md >= LAC`` guard, and the storage count of
  ``(md, LAC.next]`` (apache/pulsar#15627 came with 2.8.4 and 2.10.1); consumed-size v2, estimate for a
  deleted ledger = totalSize.
* ``2.10.2``: as 2.10.0 but the storage count of ``(md, LAC]``.
* ``2.10.6``: consumed-size v2 (``entries == e + 1`` shortcut), the ``md >= LAC`` guard and the newer
  positions of apache/pulsar#21248, 2.x/3.x ``getNumberOfEntries``, estimate for a deleted ledger = totalSize.
* ``2.11.2``: consumed-size v3 and deleted ledger = size after it (apache/pulsar#19017, back-ported by
  #20069 in 2.11.1), "2.x-old" positions and no guard (#21248 came with 2.11.3).
* ``3.0.7``: consumed-size v3 (``entries <= e + 1``), guard on, deleted ledger = size after it.
* ``4.1.3``: like 3.0.7 plus the 4.x ``getNumberOfEntries`` and the acked entries subtracted from the
  size since the mark-delete (apache/pulsar#25089, docs §2.5).

The slowest cursor is the same in every version: the root of the cursor heap built in export order (among
equal positions the smallest ``cursor_order``).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest
from hypothesis import assume, given
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from pulsar_model.backlog_exact import exact_backlog
from pulsar_model.domain.versions import size_since_mark_delete_subtracts_individual_acks
from pulsar_model.pinning import pinning_report
from pulsar_model.tables.contracts import contract
from tests.oracle import managed_ledger as o
from tests.oracle import strategies as S

VERSIONS = ["2.8.0", "2.10.0", "2.10.2", "2.10.6", "2.11.2", "3.0.7", "4.1.3"]

#: Each property is one Spark job per example over every version; the transforms cost 10-25 s a job here.
pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:Generating overly large repr")]

PROPERTY_SETTINGS = S.PROPERTY_SETTINGS


@pytest.fixture(scope="module")
def backlog() -> ModuleType:
    module: ModuleType = pytest.importorskip("pulsar_model.backlog")
    return module


# ---------------------------------------------------------------------------------------- §1.8


@PROPERTY_SETTINGS
@given(cases=S.case_lists(S.cursor_cases()))
def test_precise_backlog_matches_oracle(
    spark: SparkSession, backlog: ModuleType, cases: list[S.Case]
) -> None:
    assume(S.is_informative(cases))
    ledgers, mls, cursors = S.input_frames(spark, cases)
    rows = S.run_versions_as_data(
        lambda f, v: backlog.precise_backlog(
            f["cursors"], f["ledgers"], f["managed_ledgers"], pulsar_version=v
        ).select("cluster", "topic", "cursor_name", "backlog_entries"),
        VERSIONS,
        {"cursors": cursors, "ledgers": ledgers, "managed_ledgers": mls},
    )
    actual = {(r["_version"], r["topic"], r["cursor_name"]): r["backlog_entries"] for r in rows}
    mismatches: list[S.Mismatch] = []
    for v in VERSIONS:
        sem = o.semantics_for_version(v)
        for i, case in enumerate(cases):
            for c in case.cursors:
                try:
                    expected: int | None = o.precise_backlog(
                        case.ml,
                        c.mark_delete,
                        c.individually_deleted,
                        sem.count_family,
                        sem.precise_backlog_guard,
                        guava=S.JAVA_GUAVA_RANGE_CHECKS,
                    )
                except o.OracleIllegalArgumentError:
                    expected = None  # Java throws; the transform reports no count
                got = actual.get((v, S.topic_name(i), c.name), "<missing row>")
                if got != expected:
                    mismatches.append(S.Mismatch(v, i, f"cursor={c.name}", expected, got))
    expected_rows = len(VERSIONS) * sum(len(c.cursors) for c in cases)
    assert len(rows) == expected_rows, (
        f"expected one row per cursor and version ({expected_rows}), got {len(rows)}"
    )
    assert not mismatches, S.mismatch_report(mismatches, cases)


# ---------------------------------------------------------------------------------------- §2.3


@PROPERTY_SETTINGS
@given(cases=S.case_lists(S.cursor_cases()))
def test_estimated_backlog_size_matches_oracle(
    spark: SparkSession, backlog: ModuleType, cases: list[S.Case]
) -> None:
    assume(S.is_informative(cases))
    ledgers, mls, cursors = S.input_frames(spark, cases)
    rows = S.run_versions_as_data(
        lambda f, v: backlog.estimated_backlog_size(
            f["managed_ledgers"], f["ledgers"], f["cursors"], pulsar_version=v
        ).select("cluster", "topic", "slowest_cursor_name", "estimated_backlog_size_bytes"),
        VERSIONS,
        {"cursors": cursors, "ledgers": ledgers, "managed_ledgers": mls},
    )
    actual = {
        (r["_version"], r["topic"]): (r["slowest_cursor_name"], r["estimated_backlog_size_bytes"])
        for r in rows
    }
    mismatches: list[S.Mismatch] = []
    for v in VERSIONS:
        sem = o.semantics_for_version(v)
        for i, case in enumerate(cases):
            name, size = o.estimated_backlog_size(case.ml, case.cursors, sem)
            got: Any = actual.get((v, S.topic_name(i)), "<missing row>")
            # docs §3.9: the root of the cursor heap built in insertion order, in every version
            if got != (name, size):
                mismatches.append(S.Mismatch(v, i, "topic", (name, size), got))
    assert len(rows) == len(VERSIONS) * len(cases), "expected one row per topic and version"
    assert not mismatches, S.mismatch_report(mismatches, cases)


# ---------------------------------------------------------------------------------------- §2.4


@PROPERTY_SETTINGS
@given(cases=S.case_lists(S.point_cases()))
def test_estimate_backlog_from_position_matches_oracle(
    spark: SparkSession, backlog: ModuleType, cases: list[S.Case]
) -> None:
    assume(S.is_informative(cases))
    ledgers, mls, _ = S.input_frames(spark, cases)
    positions = spark.createDataFrame(S.point_rows(cases), S.POINT_REQUESTS_SCHEMA)
    rows = S.run_versions_as_data(
        lambda f, v: backlog.estimate_backlog_from_position(
            f["positions"], f["ledgers"], f["managed_ledgers"], pulsar_version=v
        ).select("cluster", "request_id", "estimated_backlog_size_bytes"),
        VERSIONS,
        {"positions": positions, "ledgers": ledgers, "managed_ledgers": mls},
    )
    actual = {(r["_version"], r["request_id"]): r["estimated_backlog_size_bytes"] for r in rows}
    mismatches: list[S.Mismatch] = []
    for v in VERSIONS:
        sem = o.semantics_for_version(v)
        for i, case in enumerate(cases):
            for j, p in enumerate(case.points):
                got = actual.get((v, S.request_id(i, j)), "<missing row>")
                try:
                    allowed: list[Any] = [o.estimate_backlog_from_position(case.ml, p, sem)]
                except o.OracleNPEError:
                    # docs §2.4 dereferences currentLedger; with none, Java throws. Accept null or the
                    # value of reading "no current ledger" as "pos is not in the current ledger".
                    allowed = [None, o.estimate_backlog_from_position_no_current(case.ml, p, sem)]
                if got not in allowed:
                    mismatches.append(S.Mismatch(v, i, f"position={p}", allowed, got))
    assert not mismatches, S.mismatch_report(mismatches, cases)


# ---------------------------------------------------------------------------------------- §2.5


@PROPERTY_SETTINGS
@given(cases=S.case_lists(S.cursor_cases()))
def test_estimated_size_since_mark_delete_matches_oracle(
    spark: SparkSession, backlog: ModuleType, cases: list[S.Case]
) -> None:
    """``getEstimatedSizeSinceMarkDeletePosition()`` of every cursor: the §2.4 estimate of its md, minus
    the average size of its acked entries in ``(md, LAC]`` since PR #25089 (4.1.3 here)."""
    assume(S.is_informative(cases))
    ledgers, mls, cursors = S.input_frames(spark, cases)
    rows = S.run_versions_as_data(
        lambda f, v: backlog.estimated_size_since_mark_delete(
            f["cursors"], f["ledgers"], f["managed_ledgers"], pulsar_version=v
        ).select("cluster", "topic", "cursor_name", "estimated_size_since_mark_delete_bytes"),
        VERSIONS,
        {"cursors": cursors, "ledgers": ledgers, "managed_ledgers": mls},
    )
    actual = {
        (r["_version"], r["topic"], r["cursor_name"]): r["estimated_size_since_mark_delete_bytes"]
        for r in rows
    }
    mismatches: list[S.Mismatch] = []
    for v in VERSIONS:
        sem = o.semantics_for_version(v)
        master = size_since_mark_delete_subtracts_individual_acks(v)
        for i, case in enumerate(cases):
            for c in case.cursors:
                expected = o.estimated_size_since_mark_delete(
                    case.ml, c.mark_delete, c.individually_deleted, sem, master, no_current_as_other=True
                )
                got = actual.get((v, S.topic_name(i), c.name), "<missing row>")
                if got != expected:
                    mismatches.append(S.Mismatch(v, i, f"cursor={c.name}", expected, got))
    assert len(rows) == len(VERSIONS) * sum(len(c.cursors) for c in cases)
    assert not mismatches, S.mismatch_report(mismatches, cases)


# ------------------------------------------------------------------------------ §1.8 + §2.3 + §2.4, one pass


def _with_edge_rows(
    spark: SparkSession, ledgers: Any, mls: Any, cursors: Any, versions: dict[str, str]
) -> tuple[Any, Any, Any]:
    for i, t in enumerate(S.EDGE_TOPICS):
        versions[t] = VERSIONS[i]
    return S.with_edge_rows(spark, ledgers, mls, cursors)


@PROPERTY_SETTINGS
@given(cases=S.case_lists(S.cursor_cases()))
def test_backlog_numbers_equal_the_set_based_transforms(
    spark: SparkSession, backlog: ModuleType, cases: list[S.Case]
) -> None:
    """The grouped pass gives, row for row, what precise_backlog, estimate_backlog_from_position (of the
    mark-delete), estimated_backlog_size, pinning_report and exact_backlog's expected entries give, nulls
    and error texts included: per-row versions (every line of VERSIONS in one frame), with a fixed
    version, and on the edge rows above."""
    assume(S.is_informative(cases))
    ledgers, mls, cursors = S.input_frames(spark, cases)
    versions = {S.topic_name(i): VERSIONS[i % len(VERSIONS)] for i in range(len(cases))}
    ledgers, mls, cursors = _with_edge_rows(spark, ledgers, mls, cursors, versions)
    by_topic = F.create_map(*[F.lit(x) for kv in sorted(versions.items()) for x in kv])
    mls = mls.withColumn("pulsar_version", by_topic[F.col("topic")])
    cursor_key = ["topic", "cursor_name"]
    for version in (None, "4.1.3"):
        numbers = backlog.backlog_numbers(mls, ledgers, cursors, pulsar_version=version)
        precise = backlog.precise_backlog(cursors, ledgers, mls, pulsar_version=version)
        estimate = backlog.estimate_backlog_from_position(
            cursors.withColumnRenamed("mark_delete_position", "position"),
            ledgers,
            mls,
            pulsar_version=version,
        )
        expected_cursors = precise.join(
            estimate.select(*cursor_key, "estimated_backlog_size_bytes"), cursor_key, "left"
        ).select(*numbers.cursors.columns)
        topic = backlog.estimated_backlog_size(mls, ledgers, cursors, pulsar_version=version)
        pinning = pinning_report(mls, ledgers, cursors, pulsar_version=version)
        no_entries = spark.createDataFrame([], contract("entries").spark_schema)
        exact = exact_backlog(cursors, no_entries, mls, pulsar_version=version, ledgers=ledgers)
        for got, want, key in (
            (
                numbers.ledger_counts,
                exact.withColumnRenamed("precise_backlog_entries", "backlog_entries").select(
                    *numbers.ledger_counts.columns
                ),
                cursor_key,
            ),
            (numbers.cursors, expected_cursors, cursor_key),
            (numbers.topics, topic.select(*numbers.topics.columns), ["topic"]),
            (numbers.pinning, pinning.select(*numbers.pinning.columns), ["topic"]),
        ):
            assert got.columns == want.columns
            got_rows = sorted(got.collect(), key=lambda r: tuple(str(r[k]) for k in key))
            want_rows = sorted(want.collect(), key=lambda r: tuple(str(r[k]) for k in key))
            assert len(got_rows) == len(want_rows), (version, key)
            diffs = [(g, w) for g, w in zip(got_rows, want_rows, strict=True) if g != w]
            assert not diffs, (version, diffs[:5])
