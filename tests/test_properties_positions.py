"""Property tests: pulsar_model.positions transforms agree with the plain-Python oracle (docs §1).

Each hypothesis example is 40-60 random topics (tests/oracle/strategies.py), one DataFrame per input, the
transform run once per version (unioned, one collect), every row compared with
tests/oracle/managed_ledger.py.

Version mapping (``tests.oracle.managed_ledger.semantics_for_version``, one switch per change, docs §1):

* ``2.8.0`` -> "2.x-old" position arithmetic (§1.4 2.x-old isValid, §1.5 NPE->LAC.next, §1.9: no
  currentLedgerEntries guard, NPE in deleted ledgers, ``lastKey()+1``, no LAC clamp);
* ``2.8.2`` -> the open-ledger guard and clamp of #12266, still an NPE in a deleted ledger;
* ``2.10.2`` -> the 2.10.1 form: deleted ledgers count 0 (#14481), no unread guard, ``lastKey()+1`` (a walk
  past the last ledger never returns: the transform's error row);
* ``2.10.6`` -> the newer isValid order (#21248) and the §1.9 loop of #17971 (unread guard, ``lastKey()``
  fallback);
* ``2.11.2`` -> the 2.x isValid order (#21248 came with 2.11.3) with the 2.10.6 loop;
* ``3.0.7`` -> the 3.x loop and the 2.x/3.x ``getNumberOfEntries``;
* ``4.1.3`` -> 3.x/4.x loop and the 4.x ``getNumberOfEntries`` (IllegalArgumentException when lower > upper).
"""

from __future__ import annotations

import inspect
from types import ModuleType
from typing import Any, cast

import pytest
from hypothesis import assume, given
from pyspark.sql import SparkSession

from tests.oracle import managed_ledger as o
from tests.oracle import strategies as S

POSITION_AFTER_N_VERSIONS = ["2.8.0", "2.8.2", "2.10.2", "2.10.6", "2.11.2", "3.0.7", "4.1.3"]
RANGE_VERSIONS = ["2.8.0", "2.10.6", "3.0.7", "4.1.3"]
SKIP_VERSIONS = ["2.8.0", "2.10.2", "2.10.6", "2.11.2", "3.0.7", "4.1.3"]
VALIDITY_VERSIONS = ["2.8.0", "2.11.2", "3.0.7", "4.1.3"]

#: Each property is one Spark job per example over every version; the transforms cost 10-25 s a job here.
pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:Generating overly large repr")]

PROPERTY_SETTINGS = S.PROPERTY_SETTINGS


@pytest.fixture(scope="module")
def positions() -> ModuleType:
    module: ModuleType = pytest.importorskip("pulsar_model.positions")
    return module


def _takes_version(fn: Any) -> bool:
    return "pulsar_version" in inspect.signature(fn).parameters


def _error_of(row: Any) -> Any:
    return row.asDict().get("error")


#: What the transforms' error says where the broker's getPositionAfterN loop never ends (docs §1.9).
_NEVER_RETURNS = "never returns"


# ---------------------------------------------------------------------------------------- §1.9


@PROPERTY_SETTINGS
@given(cases=S.case_lists(S.position_after_n_cases()))
def test_position_after_n_matches_oracle(
    spark: SparkSession, positions: ModuleType, cases: list[S.Case]
) -> None:
    assume(S.is_informative(cases))
    ledgers, mls, _ = S.input_frames(spark, cases)
    requests = spark.createDataFrame(S.position_after_n_rows(cases), S.POSITION_AFTER_N_REQUESTS_SCHEMA)
    rows = S.run_versions_as_data(
        lambda f, v: positions.position_after_n(
            f["requests"], f["ledgers"], f["managed_ledgers"], pulsar_version=v
        ),
        POSITION_AFTER_N_VERSIONS,
        {"requests": requests, "ledgers": ledgers, "managed_ledgers": mls},
    )
    actual = {(r["_version"], r["request_id"]): (S.pos(r["position"]), _error_of(r)) for r in rows}
    mismatches: list[S.Mismatch] = []
    for v in POSITION_AFTER_N_VERSIONS:
        sem = o.semantics_for_version(v)
        for i, case in enumerate(cases):
            for j, req in enumerate(case.position_after_n):
                try:
                    expected: Any = (
                        o.position_after_n(case.ml, req.start, req.n, cast(o.Bound, req.bound), sem),
                        None,
                    )
                except o.OracleNPEError:
                    expected = (None, "<error>")
                except o.OracleEndlessLoopError:
                    expected = (None, _NEVER_RETURNS)
                got = actual.get((v, S.request_id(i, j)), "<missing row>")
                ok = got == expected or (
                    expected[1] is not None
                    and isinstance(got, tuple)
                    and got[0] is None
                    and got[1] is not None
                    and (expected[1] != _NEVER_RETURNS or _NEVER_RETURNS in got[1])
                )
                if not ok:
                    mismatches.append(S.Mismatch(v, i, f"{req}", expected, got))
    assert not mismatches, S.mismatch_report(mismatches, cases)


# ---------------------------------------------------------------------------------------- §1.7


@PROPERTY_SETTINGS
@given(cases=S.case_lists(S.range_cases()))
def test_entries_between_matches_oracle(
    spark: SparkSession, positions: ModuleType, cases: list[S.Case]
) -> None:
    assume(S.is_informative(cases))
    ledgers, mls, _ = S.input_frames(spark, cases)
    requests = spark.createDataFrame(S.range_rows(cases), S.RANGE_REQUESTS_SCHEMA)
    rows = S.run_versions_as_data(
        lambda f, v: positions.entries_between(
            f["requests"], f["ledgers"], f["managed_ledgers"], pulsar_version=v
        ),
        RANGE_VERSIONS,
        {"requests": requests, "ledgers": ledgers, "managed_ledgers": mls},
    )
    actual = {(r["_version"], r["request_id"]): (r["entries"], _error_of(r)) for r in rows}
    mismatches: list[S.Mismatch] = []
    for v in RANGE_VERSIONS:
        family = o.semantics_for_version(v).count_family
        for i, case in enumerate(cases):
            for j, req in enumerate(case.ranges):
                try:
                    expected: Any = (
                        o.number_of_entries(
                            case.ml,
                            req.lower,
                            req.lower_closed,
                            req.upper,
                            req.upper_closed,
                            family,
                            guava=S.JAVA_GUAVA_RANGE_CHECKS,
                        ),
                        None,
                    )
                except o.OracleIllegalArgumentError:
                    expected = (None, "<error>")
                got = actual.get((v, S.request_id(i, j)), "<missing row>")
                ok = got == expected or (
                    expected[1] is not None
                    and isinstance(got, tuple)
                    and got[0] is None
                    and got[1] is not None
                )
                if not ok:
                    mismatches.append(S.Mismatch(v, i, f"{req}", expected, got))
    assert not mismatches, S.mismatch_report(mismatches, cases)


# ---------------------------------------------------------------------------------------- §1.10


@PROPERTY_SETTINGS
@given(cases=S.case_lists(S.skip_cases(), min_size=40, max_size=60))
def test_skip_entries_matches_oracle(spark: SparkSession, positions: ModuleType, cases: list[S.Case]) -> None:
    assume(S.is_informative(cases))
    ledgers, mls, cursors = S.input_frames(spark, cases)
    requests = spark.createDataFrame(S.skip_rows(cases), S.SKIP_REQUESTS_SCHEMA)
    rows = S.run_versions_as_data(
        lambda f, v: positions.skip_entries(
            f["requests"], f["cursors"], f["ledgers"], f["managed_ledgers"], pulsar_version=v
        ).select(
            "cluster",
            "request_id",
            "target_position",
            "mark_delete_position",
            "read_position",
            "individually_deleted",
            "error",
        ),
        SKIP_VERSIONS,
        {"requests": requests, "cursors": cursors, "ledgers": ledgers, "managed_ledgers": mls},
    )
    actual = {
        (r["_version"], r["request_id"]): (
            S.pos(r["target_position"]),
            S.pos(r["mark_delete_position"]),
            S.pos(r["read_position"]),
            S.idm_value(r["individually_deleted"]),
        )
        for r in rows
    }
    errors = {(r["_version"], r["request_id"]): (S.pos(r["target_position"]), r["error"]) for r in rows}
    mismatches: list[S.Mismatch] = []
    for v in SKIP_VERSIONS:
        sem = o.semantics_for_version(v)
        for i, case in enumerate(cases):
            by_name = {c.name: c for c in case.cursors}
            for j, req in enumerate(case.skips):
                c = by_name[req.cursor_name]
                key = (v, S.request_id(i, j))
                try:
                    res = o.skip_entries(
                        case.ml,
                        c.mark_delete,
                        c.individually_deleted,
                        req.n,
                        cast(o.DeletedEntries, req.deleted_entries),
                        sem,
                    )
                except o.OracleMarkDeleteRejectedError as exc:
                    # the target lies past LAC (2.x-old: no clamp) and the broker rejects the mark-delete:
                    # the row keeps the target the oracle rejected and names the rejection
                    target, error = errors.get(key, (None, None))
                    if f"position {target} " not in str(exc) or "Invalid mark deleted position" not in (
                        error or ""
                    ):
                        mismatches.append(S.Mismatch(v, i, f"{req}", str(exc), (target, error)))
                    continue
                except (o.OracleNPEError, o.OracleEndlessLoopError) as exc:
                    # the broker's skip throws or never returns: no target, and the row says why
                    target, error = errors.get(key, (None, None))
                    if target is not None or not error:
                        mismatches.append(S.Mismatch(v, i, f"{req}", type(exc).__name__, (target, error)))
                    continue
                expected = (res.target, res.mark_delete, res.read_position, sorted(res.individually_deleted))
                got = actual.get(key, "<missing row>")
                if got != expected:
                    mismatches.append(S.Mismatch(v, i, f"{req}", expected, got))
    assert not mismatches, S.mismatch_report(mismatches, cases)


# ---------------------------------------------------------------------------------------- §1.3 - §1.5


@PROPERTY_SETTINGS
@given(cases=S.case_lists(S.point_cases()))
def test_previous_position_matches_oracle(
    spark: SparkSession, positions: ModuleType, cases: list[S.Case]
) -> None:
    assume(S.is_informative(cases))
    ledgers, mls, _ = S.input_frames(spark, cases)
    requests = spark.createDataFrame(S.point_rows(cases), S.POINT_REQUESTS_SCHEMA)
    rows = (
        positions.previous_position(requests, ledgers, mls)
        .select("request_id", "previous_position")
        .collect()
    )
    actual = {r["request_id"]: S.pos(r["previous_position"]) for r in rows}
    mismatches = [
        S.Mismatch("all", i, f"position={p}", o.get_previous_position(case.ml, p), got)
        for i, case in enumerate(cases)
        for j, p in enumerate(case.points)
        if (got := actual.get(S.request_id(i, j), "<missing row>")) != o.get_previous_position(case.ml, p)
    ]
    assert not mismatches, S.mismatch_report(mismatches, cases)


def _validity_versions(fn: Any) -> list[str]:
    return VALIDITY_VERSIONS if _takes_version(fn) else ["3.0.7"]


def _point_rows(fn: Any, requests: Any, ledgers: Any, mls: Any, column: str) -> list[Any]:
    """``fn``'s ``request_id`` and ``column`` for every version it takes (all in one plan), tagged
    ``_version``."""
    if not _takes_version(fn):
        return S.run_versions(lambda _v: fn(requests, ledgers, mls).select("request_id", column), ["3.0.7"])
    return S.run_versions_as_data(
        lambda f, v: fn(f["requests"], f["ledgers"], f["managed_ledgers"], pulsar_version=v).select(
            "cluster", "request_id", column
        ),
        VALIDITY_VERSIONS,
        {"requests": requests, "ledgers": ledgers, "managed_ledgers": mls},
    )


@PROPERTY_SETTINGS
@given(cases=S.case_lists(S.point_cases()))
def test_next_valid_position_matches_oracle(
    spark: SparkSession, positions: ModuleType, cases: list[S.Case]
) -> None:
    assume(S.is_informative(cases))
    ledgers, mls, _ = S.input_frames(spark, cases)
    requests = spark.createDataFrame(S.point_rows(cases), S.POINT_REQUESTS_SCHEMA)
    fn = positions.next_valid_position
    versions = _validity_versions(fn)
    rows = _point_rows(fn, requests, ledgers, mls, "next_valid_position")
    actual = {(r["_version"], r["request_id"]): S.pos(r["next_valid_position"]) for r in rows}
    mismatches: list[S.Mismatch] = []
    for v in versions:
        family = o.semantics_for_version(v).position_family
        for i, case in enumerate(cases):
            for j, p in enumerate(case.points):
                expected = o.get_next_valid_position(case.ml, p, family)
                got = actual.get((v, S.request_id(i, j)), "<missing row>")
                if got != expected:
                    mismatches.append(S.Mismatch(v, i, f"position={p}", expected, got))
    assert not mismatches, S.mismatch_report(mismatches, cases)


@PROPERTY_SETTINGS
@given(cases=S.case_lists(S.point_cases()))
def test_is_valid_position_matches_oracle(
    spark: SparkSession, positions: ModuleType, cases: list[S.Case]
) -> None:
    assume(S.is_informative(cases))
    ledgers, mls, _ = S.input_frames(spark, cases)
    requests = spark.createDataFrame(S.point_rows(cases), S.POINT_REQUESTS_SCHEMA)
    fn = positions.is_valid_position
    versions = _validity_versions(fn)
    rows = _point_rows(fn, requests, ledgers, mls, "is_valid")
    actual = {(r["_version"], r["request_id"]): r["is_valid"] for r in rows}
    mismatches: list[S.Mismatch] = []
    for v in versions:
        family = o.semantics_for_version(v).position_family
        for i, case in enumerate(cases):
            for j, p in enumerate(case.points):
                expected = o.is_valid_position(case.ml, p, family)
                got = actual.get((v, S.request_id(i, j)), "<missing row>")
                if got != expected:
                    mismatches.append(S.Mismatch(v, i, f"position={p}", expected, got))
    assert not mismatches, S.mismatch_report(mismatches, cases)
