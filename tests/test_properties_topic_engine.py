"""Property tests: the per-topic engine (pulsar_model.engine.topic_engine) equals the oracle (docs §1-§2).

The managed-ledger rules exist twice in the package: as SQL builders for the set-based transforms
(:mod:`pulsar_model.positions`, :mod:`pulsar_model.backlog`) and as the sequential Python engine the
eviction loops run per topic (docs §3.5-§3.7). ``tests/test_properties_positions.py`` and
``tests/test_properties_backlog.py`` prove the SQL builders equal to the plain-Python oracle
(tests/oracle/managed_ledger.py); this module proves the engine equal to the same oracle, rule by rule and
version by version, on the same random managed-ledger states (deleted and empty ledgers, ``(L,-1)``,
positions past the last entry, ties between cursors, acked ranges across ledgers). Together: the two
definitions are equal.

No Spark: each example is one topic, so Hypothesis runs hundreds of them in seconds.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pulsar_model.domain.versions import behaviour
from pulsar_model.engine import topic_engine as eng
from tests.oracle import managed_ledger as o
from tests.oracle import strategies as S

#: One version per distinct combination of the switches the engine reads (docs §1, §2 version notes):
#: 2.8.0 old isValid order, no clamp, NPE in deleted ledgers, lastKey()+1; 2.10.6 new order with the 2.10
#: loop; 2.11.2 old order, 2.10 loop, lastKey fallback; 3.0.7 3.x loop and guard; 4.1.3 4.x counts.
VERSIONS = [
    "2.5.1",
    "2.8.0",
    "2.8.2",
    "2.10.2",
    "2.10.6",
    "2.11.2",
    "3.0.7",
    "3.1.1",
    "4.0.7",
    "4.0.8",
    "4.1.3",
]

ENGINE_SETTINGS = settings(
    max_examples=int(os.environ.get("PULSAR_ENGINE_EXAMPLES", "100")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

versions = st.sampled_from(VERSIONS)


def engine_ml(ml: o.ManagedLedger, version: str) -> eng.ManagedLedger:
    """The engine's view of the oracle's ledger map (rows as stats-internal lists them)."""
    return eng.ManagedLedger(
        [(lid, entries, size) for lid, (entries, size) in ml.ledgers.items()],
        ml.current_ledger_id,
        ml.current_ledger_entries,
        ml.current_ledger_size,
        ml.lac,
        ml.total_size,
        behaviour(version),
    )


def _engine_cursor(c: o.Cursor) -> eng.Cursor:
    return eng.Cursor(
        name=c.name,
        order=c.order,
        durable=c.durable,
        kind="subscription",
        md=c.mark_delete,
        idm=list(c.individually_deleted),
        consumed=None,
    )


def _outcome(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``fn``'s value, or ``"<error>"`` when the modelled broker code throws (either side's exception)."""
    try:
        return fn(*args, **kwargs)
    except (eng.BrokerError, o.OracleError):
        return "<error>"


# ---------------------------------------------------------------------------------------- §1.3-§1.5


@ENGINE_SETTINGS
@given(case=S.point_cases(), version=versions)
def test_previous_valid_and_next_valid_positions_match_oracle(case: S.Case, version: str) -> None:
    ml = case.ml
    family = o.semantics_for_version(version).position_family
    engine = engine_ml(ml, version)
    for p in case.points:
        assert engine.previous(p) == o.get_previous_position(ml, p), (p, case.describe())
        assert engine.is_valid(p) == o.is_valid_position(ml, p, family), (version, p, case.describe())
        assert engine.next_valid(p) == o.get_next_valid_position(ml, p, family), (version, p, case.describe())


# ---------------------------------------------------------------------------------------- §1.7


def _engine_count(engine: eng.ManagedLedger, r: S.RangeRequest) -> int:
    engine.check_range(r.lower, r.lower_closed, r.upper, r.upper_closed)
    return engine.count(r.lower, r.lower_closed, r.upper, r.upper_closed)


@ENGINE_SETTINGS
@given(case=S.range_cases(), version=versions)
def test_number_of_entries_matches_oracle(case: S.Case, version: str) -> None:
    ml = case.ml
    family = o.semantics_for_version(version).count_family
    engine = engine_ml(ml, version)
    for r in case.ranges:
        expected = _outcome(
            o.number_of_entries, ml, r.lower, r.lower_closed, r.upper, r.upper_closed, family, guava=True
        )
        assert _outcome(_engine_count, engine, r) == expected, (version, r, case.describe())


# ---------------------------------------------------------------------------------------- §1.8


@ENGINE_SETTINGS
@given(case=S.cursor_cases(min_cursors=1), version=versions)
def test_precise_backlog_and_entries_in_storage_match_oracle(case: S.Case, version: str) -> None:
    ml = case.ml
    sem = o.semantics_for_version(version)
    beh = behaviour(version)
    engine = engine_ml(ml, version)
    for c in case.cursors:
        md, idm = c.mark_delete, c.individually_deleted
        expected = _outcome(
            o.precise_backlog, ml, md, idm, sem.count_family, guard=sem.precise_backlog_guard, guava=True
        )
        assert _outcome(engine.precise_backlog, md, list(idm)) == expected, (version, c, case.describe())
        stored = _outcome(
            o.number_of_entries,
            ml,
            md,
            False,
            ml.lac_next if beh.storage_counts_lac_next else ml.lac,
            True,
            sem.count_family,
            guava=True,
        )
        assert _outcome(engine.entries_in_storage, md) == stored, (version, c, case.describe())


# ---------------------------------------------------------------------------------------- §1.9


@ENGINE_SETTINGS
@given(case=S.position_after_n_cases(), version=versions)
def test_position_after_n_matches_oracle(case: S.Case, version: str) -> None:
    ml = case.ml
    sem = o.semantics_for_version(version)
    engine = engine_ml(ml, version)
    for req in case.position_after_n:
        expected = _outcome(o.position_after_n, ml, req.start, req.n, req.bound, sem)
        got = _outcome(engine.position_after_n, req.start, req.n, start_excluded=req.bound == "startExcluded")
        assert got == expected, (version, req, case.describe())


# ---------------------------------------------------------------------------------------- §1.10 + §1.2


@ENGINE_SETTINGS
@given(case=S.skip_cases(), version=versions)
def test_skip_include_matches_oracle(case: S.Case, version: str) -> None:
    """``skipEntries(n, Include)`` then the mark-delete: final mark-delete and remaining acked ranges."""
    ml = case.ml
    sem = o.semantics_for_version(version)
    engine = engine_ml(ml, version)
    by_name = {c.name: c for c in case.cursors}
    for skip in case.skips:
        if skip.deleted_entries != "Include":
            continue
        oc = by_name[skip.cursor_name]
        try:
            res = o.skip_entries(ml, oc.mark_delete, oc.individually_deleted, skip.n, "Include", sem)
            expected: Any = (res.mark_delete, sorted(res.individually_deleted))
        except o.OracleError:
            expected = "<error>"
        ec = _engine_cursor(oc)
        try:
            engine.skip_include(ec, skip.n)
            got: Any = (ec.md, sorted(ec.idm))
        except eng.BrokerError:
            got = "<error>"
        assert got == expected, (version, skip, oc, case.describe())


# ---------------------------------------------------------------------------------------- §2.3, §3.9


@ENGINE_SETTINGS
@given(case=S.cursor_cases(), version=versions)
def test_slowest_cursor_and_estimated_backlog_size_match_oracle(case: S.Case, version: str) -> None:
    """The root of the cursor heap built in export order, and ``getEstimatedBacklogSize()`` from it."""
    ml = case.ml
    sem = o.semantics_for_version(version)
    engine = engine_ml(ml, version)
    cursors = [_engine_cursor(c) for c in case.cursors]
    name, size = o.estimated_backlog_size(ml, case.cursors, sem)
    slowest, _ = eng.CursorHeap(cursors).root()
    assert (slowest.name if slowest else None) == name, (version, case.describe())
    assert eng.estimated_backlog(engine, cursors) == size, (version, case.describe())


@ENGINE_SETTINGS
@given(case=S.cursor_cases(min_cursors=1), version=versions)
def test_estimate_from_position_and_size_since_mark_delete_match_oracle(case: S.Case, version: str) -> None:
    """``estimateBacklogFromPosition(md)`` (§2.4) and ``getEstimatedSizeSinceMarkDeletePosition()`` (§2.5)
    of every cursor: the compaction trigger's estimate of the ``__compaction`` cursor."""
    ml = case.ml
    sem = o.semantics_for_version(version)
    beh = behaviour(version)
    engine = engine_ml(ml, version)
    for c in case.cursors:
        md = c.mark_delete
        try:
            total = o.estimate_backlog_from_position(ml, md, sem)
        except o.OracleNPEError:  # 3.x dereferences a null currentLedger: read as "not the open ledger"
            total = o.estimate_backlog_from_position_no_current(ml, md, sem)
        assert engine.estimate_from_position(md) == total, (version, c, case.describe())
        expected = o.estimated_size_since_mark_delete(
            ml,
            md,
            c.individually_deleted,
            sem,
            master=beh.size_since_md_subtracts_acks,
            no_current_as_other=True,
        )
        got = engine.size_since_mark_delete(md, list(c.individually_deleted))
        assert got == expected, (version, c, case.describe())


@pytest.mark.parametrize("version", VERSIONS)
def test_every_engine_switch_is_the_oracles(version: str) -> None:
    """The switches both sides read for one version agree (a renamed or re-dated flag shows here first)."""
    sem = o.semantics_for_version(version)
    beh = behaviour(version)
    assert beh.new_valid_position == (sem.position_family != "2x-old")
    assert beh.next_valid_open_ledger_fallback == (sem.position_family == "3x")
    assert beh.entry_count_4x == (sem.count_family == "4x")
    assert beh.entry_count_same_ledger_deleted_zero == (sem.count_family != "3x")
    assert beh.storage_counts_lac_next == sem.storage_counts_lac_next
    assert (beh.pan_past_end == "revisit_last_ledger") == sem.pan_fallback_last_key
    assert beh.precise_backlog_guard == sem.precise_backlog_guard
    assert beh.pan_unread_guard == sem.pan_unread_guard
    assert beh.pan_lac_clamp == sem.pan_clamp
    assert beh.pan_deleted_ledger_as_empty == sem.pan_deleted_as_empty
    assert beh.consumed_generation == {"v1": 1, "v2": 2, "v3": 3}[sem.consumed_generation]
    assert beh.estimate_deleted_total_size == sem.estimate_deleted_returns_total
