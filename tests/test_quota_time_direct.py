"""The direct end state of the non-precise time eviction equals the stepwise loop (docs §3.7, §1.2, §3.9).

``_topic_engine.drop_backlog_for_time_limit_direct`` jumps over each cursor's path instead of stepping the
loop one mark-delete at a time; ``drop_backlog_for_time_limit_ledgers`` (run without a step cap) is the
stepwise loop, itself checked against the plain-Python oracle in ``tests/test_properties_quota.py``. Pure
Python, no Spark:

* a hypothesis property over many random topics (sparse ledger ids, deleted and empty ledgers, an open,
  missing or listed-empty current ledger, LACs anywhere, close times unknown / 0 / expired / young, mds at
  ``(L,-1)``, mid-ledger, in deleted ledgers, past the LAC or null, acked ranges across ledgers, ties on the
  md and on ``cursor_order``, non-durable cursors) on every version the quota code tells apart, including
  3.x's 32-bit ``limit * 1000``: every output field must be equal;
* a 200,000-ledger x 2,000-cursor topic whose loop takes ~200 million steps: the direct computation is
  fast and lands where a hand count says.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from pulsar_model.domain.versions import behaviour
from pulsar_model.engine import topic_engine as eng
from pulsar_model.quota.eviction import time_limit_millis_overflow_int
from tests.oracle import strategies as S

#: Versions whose time-loop arithmetic differs: 2.x-old / new isValidPosition (2.10.5 / 2.10.6), the 4.x
#: entry count (4.0.7 / 4.1.3), the 3.x int overflow of the limit (3.x / 4.x).
VERSIONS = ("2.8.0", "2.10.5", "2.10.6", "3.0.7", "3.1.4", "4.0.7", "4.1.3")
NOW_MS = 1_772_366_400_000
HOUR_MS = 3_600_000
THIRTY_DAYS_S = 30 * 24 * 3600  # 2,592,000,000 ms: wraps to a negative int up to 3.x

DIRECT_SETTINGS = settings(
    max_examples=500 * S.PROPERTY_EXAMPLES,
    deadline=None,
    database=None,
    phases=[Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@dataclass
class TimeCase:
    ledgers: list[tuple[int, int, int]]
    current_ledger_id: int | None
    current_ledger_entries: int
    lac: eng.Position
    closed_at: dict[int, int | None]
    limit_seconds: int
    cursors: list[tuple[str, int, bool, eng.Position | None, list[eng.IdmRange], int | None]]

    def managed_ledger(self, version: str) -> eng.ManagedLedger:
        total = sum(s for _, _, s in self.ledgers) + 100 * self.current_ledger_entries
        return eng.ManagedLedger(
            self.ledgers,
            self.current_ledger_id,
            self.current_ledger_entries,
            100 * self.current_ledger_entries,
            self.lac,
            total,
            behaviour(version),
        )

    def engine_cursors(self) -> list[eng.Cursor]:
        out = [
            eng.Cursor(name, order, durable, "subscription" if durable else "reader", md, list(idm), consumed)
            for name, order, durable, md, idm, consumed in self.cursors
        ]
        out.sort(key=lambda c: (c.order, c.name))  # as eviction._Topic orders them
        return out


@st.composite
def time_cases(draw: st.DrawFn) -> TimeCase:
    ids = sorted(draw(st.sets(st.integers(0, 40), min_size=0, max_size=14)))
    entries = {lid: draw(st.sampled_from([0, 0, 1, 2, 3, 4])) for lid in ids}
    open_kind = draw(st.sampled_from(["listed", "listed", "missing", "none"]))
    current: int | None = None
    cle = draw(st.integers(0, 4))
    if open_kind == "listed" and ids:
        current = ids[-1]
        entries[current] = 0  # stats-internal lists the open ledger with 0 entries
    elif open_kind == "missing":
        current = (ids[-1] + 1) if ids else draw(st.integers(0, 5))
    ledgers = [(lid, entries[lid], 100 * entries[lid]) for lid in ids]
    pool = [*ids, *(lid + 1 for lid in ids), 0, 45]  # listed, often deleted neighbours, beyond the end
    lac_kind = draw(st.sampled_from(["last", "last", "current", "anywhere"]))
    with_entries = [lid for lid in ids if entries[lid] > 0]
    if lac_kind == "current" and current is not None:
        lac = (current, cle - 1)
    elif lac_kind == "last" and with_entries:
        lac = (with_entries[-1], entries[with_entries[-1]] - 1)
    else:
        lac = (draw(st.sampled_from(pool)), draw(st.integers(-1, 4)))
    if current is not None and lac > (current, cle - 1):
        # a LAC past the current ledger cannot happen, and there §1.2's extension loop never ends (nextValid
        # falls back to (current, 0) inside an acked range, again and again)
        lac = (current, cle - 1)
    ages = st.sampled_from(["unknown", "zero", *["old"] * 8, "young", "ancient"])
    closed_at: dict[int, int | None] = {}
    for lid in ids:
        if lid == current:
            continue
        age = draw(ages)
        closed_at[lid] = {
            "unknown": None,
            "zero": 0,
            "old": NOW_MS - 5 * HOUR_MS,
            "young": NOW_MS - 10 * 60 * 1000,
            "ancient": NOW_MS - 40 * 24 * HOUR_MS,
        }[age]
    limit_seconds = draw(st.sampled_from([3600, 3600, 7200, THIRTY_DAYS_S]))

    def position() -> eng.Position:
        return (draw(st.sampled_from(pool)), draw(st.integers(-1, 4)))

    n_cursors = draw(st.integers(1, 6))
    shared_mds = [position() for _ in range(2)]
    cursors = []
    for i in range(n_cursors):
        md_kind = draw(st.sampled_from(["shared", "shared", "fresh", "ledger_start", "null"]))
        md: eng.Position | None
        if md_kind == "null" and draw(st.integers(0, 9)) == 0:
            md = None
        elif md_kind == "ledger_start" and ids:
            md = (draw(st.sampled_from(ids)), -1)
        elif md_kind == "fresh":
            md = position()
        else:
            md = draw(st.sampled_from(shared_mds))
        idm: list[eng.IdmRange] = []
        if md is not None:
            bounds = sorted({position() for _ in range(draw(st.integers(0, 6)))})
            bounds = [p for p in bounds if p > md]
            for a, b in zip(bounds[::2], bounds[1::2], strict=False):
                idm.append((a, b))  # disjoint (lower, upper] ranges above md, often across ledgers
        order = draw(st.integers(0, 3))  # duplicates: ties broken by name, then list index
        durable = draw(st.integers(0, 7)) > 0
        consumed = draw(st.one_of(st.none(), st.integers(0, 50)))
        cursors.append((f"c{i}", order, durable, md, idm, consumed))
    return TimeCase(ledgers, current, cle, lac, closed_at, limit_seconds, cursors)


def outcome(result: eng.TimeResult, cursors: list[eng.Cursor]) -> dict[str, Any]:
    return {
        "stop_reason": result.stop_reason,
        "stop_cursor_name": result.stop_cursor_name,
        "iteration_count": result.iteration_count,
        "tie_ambiguous": result.tie_ambiguous,
        "undecidable": result.undecidable,
        "error": result.error,
        "cursors": [(c.name, c.md, sorted(c.idm), c.skipped, c.skips, c.consumed) for c in cursors],
    }


@DIRECT_SETTINGS
@given(case=time_cases())
def test_time_direct_matches_stepwise_loop(case: TimeCase) -> None:
    for version in VERSIONS:
        overflow = time_limit_millis_overflow_int(version)
        ml = case.managed_ledger(version)
        stepped = case.engine_cursors()
        slow = eng.drop_backlog_for_time_limit_ledgers(
            ml, stepped, case.closed_at, case.limit_seconds, NOW_MS, overflow
        )
        assert slow.iteration_count == len(slow.steps)
        jumped = case.engine_cursors()
        fast = eng.drop_backlog_for_time_limit_direct(
            ml, jumped, case.closed_at, case.limit_seconds, NOW_MS, overflow
        )
        assert fast.steps == []
        assert outcome(fast, jumped) == outcome(slow, stepped), f"version {version}\n{case}"
        # the traced variant: the same end state, the stepwise trace cut at the limit
        traced_cursors = case.engine_cursors()
        limit = max(1, len(slow.steps) // 2)
        traced = eng.time_eviction_ledgers(
            ml, traced_cursors, case.closed_at, case.limit_seconds, NOW_MS, overflow, limit
        )
        assert traced.steps == slow.steps[:limit]
        assert outcome(traced, traced_cursors) == outcome(slow, stepped)


def test_time_direct_disabled_and_no_durable_cursor() -> None:
    ml = eng.ManagedLedger([(1, 2, 200), (2, 0, 0)], 2, 0, 0, (1, 1), 200, behaviour("4.1.3"))
    reader = [eng.Cursor("r", 0, False, "reader", (1, -1), [], None)]
    got = eng.drop_backlog_for_time_limit_direct(ml, reader, {1: NOW_MS - 5 * HOUR_MS}, 3600, NOW_MS, False)
    assert (got.stop_reason, got.stop_cursor_name, got.iteration_count) == ("no_cursor", None, 0)
    assert reader[0].md == (1, -1)
    for limit in (0, -1, None):
        off = eng.drop_backlog_for_time_limit_direct(ml, reader, {}, limit, NOW_MS, False)
        assert off.stop_reason == "quota_disabled"


@pytest.mark.slow
def test_time_direct_200k_ledgers_2k_cursors() -> None:
    """200,000 ledgers (ids 1..200,000) of 2 entries, the last one open and empty; ledgers 1..199,899 closed
    five hours ago, the next 100 ten minutes ago (limit one hour). Cursor i (order i) starts at
    ``(s, 0)``, ``s = 1 + 99 i``, with entry ``(s, 1)`` and the first entry of the next ledger acked. The
    stepwise loop moves every cursor ledger by ledger to the first young ledger: the sum over i of
    ``199,900 - s`` is ~200 million steps. By hand: ``(s, 0) -> (s+1, -1)`` extended over the ack to
    ``(s+1, 0)`` (nothing new consumed) ``-> (s+2, -1)`` (1 entry) ``-> (s+3, -1) -> ... -> (199,900, -1)``
    (2 entries per ledger): every cursor ends at ``(199,900, -1)`` after ``199,900 - s`` mark-deletes having
    consumed ``1 + 2 (199,898 - s)`` entries; the loop stops with ``not_expired``; the paths share states
    (cursor 0 passes through every later cursor's), so the tie flag is set. All 2,000 cursors end on
    ``(199,900, -1)``: which one the heap holds at its root then depends on every earlier sift (docs §3.9);
    replaying ~2,000 staggered cursors merging one by one exceeds the replay budget, so the name is null."""
    n_ledgers, n_cursors, young_from = 200_000, 2_000, 199_900
    ledgers = [
        (lid, 2 if lid < n_ledgers else 0, 200 if lid < n_ledgers else 0) for lid in range(1, n_ledgers + 1)
    ]
    closed = {
        lid: NOW_MS - (5 * HOUR_MS if lid < young_from else 10 * 60 * 1000) for lid in range(1, n_ledgers)
    }
    ml = eng.ManagedLedger(
        ledgers, n_ledgers, 0, 0, (n_ledgers - 1, 1), 2 * (n_ledgers - 1) * 100, behaviour("4.1.3")
    )
    cursors = []
    for i in range(n_cursors):
        start = 1 + 99 * i
        idm = [((start, 0), (start, 1)), ((start + 1, -1), (start + 1, 0))]
        cursors.append(eng.Cursor(f"sub-{i:05d}", i, True, "subscription", (start, 0), idm, 1000))
    started = time.monotonic()
    result = eng.drop_backlog_for_time_limit_direct(ml, cursors, closed, 3600, NOW_MS, False)
    elapsed = time.monotonic() - started
    assert elapsed < 60, elapsed  # the stepwise loop: ~200M steps of ~10 us, over half an hour
    assert (result.stop_reason, result.stop_cursor_name, result.error) == ("not_expired", None, None)
    assert result.tie_ambiguous is True
    expected_steps = 0
    for i, c in enumerate(cursors):
        start = 1 + 99 * i
        expected_steps += young_from - start
        skipped = 1 + 2 * (young_from - 2 - start)
        assert (c.md, c.idm, c.skipped, c.consumed) == ((young_from, -1), [], skipped, 1000 + skipped), i
    assert result.iteration_count == expected_steps > 190_000_000


def staggered_topic(n_cursors: int, young_from: int) -> tuple[eng.ManagedLedger, list[eng.Cursor], dict]:
    """Ledgers 1..young_from+10 of 2 entries (the last open and empty), those before ``young_from`` expired;
    cursor i at ``(1 + 3 i, 0)`` with its next entry acked, so cursors join the group ahead one by one."""
    n_ledgers = young_from + 10
    ledgers = [
        (lid, 2 if lid < n_ledgers else 0, 200 if lid < n_ledgers else 0) for lid in range(1, n_ledgers + 1)
    ]
    closed = {lid: NOW_MS - (5 * HOUR_MS if lid < young_from else 60_000) for lid in range(1, n_ledgers)}
    ml = eng.ManagedLedger(
        ledgers, n_ledgers, 0, 0, (n_ledgers - 1, 1), 200 * (n_ledgers - 1), behaviour("4.1.3")
    )
    cursors = [
        eng.Cursor(
            f"s{i:03d}", i, True, "subscription", (1 + 3 * i, 0), [((1 + 3 * i, 0), (1 + 3 * i, 1))], None
        )
        for i in range(n_cursors)
    ]
    return ml, cursors, closed


def test_time_direct_names_the_heap_root_of_a_merged_group() -> None:
    """docs §3.9: 40 staggered cursors catch up with each other and walk the rest in lockstep (the replay
    applies those rounds as permutations of heap slots); the cursor the loop stops on is the stepwise heap
    loop's, not the smallest ``cursor_order``."""
    ml, stepped, closed = staggered_topic(40, 400)
    slow = eng.drop_backlog_for_time_limit_ledgers(ml, stepped, closed, 3600, NOW_MS, False)
    _, jumped, _ = staggered_topic(40, 400)
    fast = eng.drop_backlog_for_time_limit_direct(ml, jumped, closed, 3600, NOW_MS, False)
    assert outcome(fast, jumped) == outcome(slow, stepped)
    assert fast.stop_reason == "not_expired" and fast.stop_cursor_name not in (None, "s000")
    assert {c.md for c in jumped} == {(400, -1)}


def test_time_direct_replay_budget_leaves_the_name_null() -> None:
    """A replay that would spend more than its budget gives up on the name only; with a single cursor on the
    stopping position no replay is needed."""
    ml, cursors, closed = staggered_topic(40, 400)
    full = eng.drop_backlog_for_time_limit_direct(ml, cursors, closed, 3600, NOW_MS, False)
    ml, cursors, closed = staggered_topic(40, 400)
    cut = eng.drop_backlog_for_time_limit_direct(ml, cursors, closed, 3600, NOW_MS, False, replay_budget=10)
    assert cut.stop_cursor_name is None and full.stop_cursor_name is not None
    assert (cut.iteration_count, cut.tie_ambiguous) == (full.iteration_count, True)
    ml, cursors, closed = staggered_topic(1, 400)
    alone = eng.drop_backlog_for_time_limit_direct(ml, cursors, closed, 3600, NOW_MS, False, replay_budget=0)
    assert (alone.stop_cursor_name, alone.tie_ambiguous) == ("s000", False)


@pytest.mark.timeout(60)
def test_mark_delete_extension_ends_on_an_export_whose_lac_is_past_the_current_ledger() -> None:
    """Inconsistent export: current ledger 2 is empty but the LAC says (3, 5). After a mark-delete to (1, 0)
    the extension over the acked range (1:0, 2:0] reaches (2, 0), whose next valid position falls back to
    (2, 0) itself - still at or below the LAC and inside the same range. The literal loop never ended
    there (a hung Python worker); it now stops at (2, 0)."""
    ml = eng.ManagedLedger([(1, 2, 200), (2, 0, 0)], 2, 0, 0, (3, 5), 200, behaviour("4.1.3"))
    cursor = eng.Cursor("s", 0, True, "subscription", (1, -1), [((1, 0), (2, 0))], None)
    ml.mark_delete(cursor, (1, 0))
    assert cursor.md == (2, 0) and cursor.idm == []
