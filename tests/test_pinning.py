"""Tests for pulsar_model.pinning: pinning report (goldens + property vs oracle) and unmoved cursors.

Goldens are computed by hand from the trimming rule quoted in ``pulsar_model/pinning.py`` (docs §1.11 for
the slowest durable cursor). Every golden topic is built into one set of DataFrames and the report of both
version families is fetched with one Spark action (module fixture); each test reads its topic's rows.
Version families: ``NEW`` = 4.1.3 (a slowest md at the last entry of a closed ledger releases it), ``OLD`` =
2.10.6 (it does not: the 2.10.1 source).
"""

from __future__ import annotations

import functools
from datetime import date
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pulsar_model.backlog import backlog_numbers
from pulsar_model.errors import ContractError
from pulsar_model.pinning import pinning_report, trims_ledger_of_mark_delete_at_last_entry, unmoved_cursors
from tests.oracle import pinning as op
from tests.oracle import strategies as S

POS = "struct<ledger_id:bigint,entry_id:bigint>"
LEDGERS = "cluster string, topic string, ledger_id bigint, entries bigint, size_bytes bigint"
ML = (
    "cluster string, topic string, current_ledger_id bigint, current_ledger_entries bigint, "
    f"current_ledger_size_bytes bigint, last_confirmed_entry {POS}, total_size_bytes bigint"
)
CURSORS = (
    "cluster string, topic string, cursor_name string, cursor_order int, cursor_kind string, "
    f"is_durable boolean, mark_delete_position {POS}"
)
NEW, OLD = "4.1.3", "2.10.6"

Pos = tuple[int, int]
LedgerSpec = tuple[int, int, int]  # (ledger id, entries, bytes)


def state(
    topic: str, closed: list[LedgerSpec], current: int | None, cle: int, lac: Pos, cluster: str = "c"
) -> tuple[list[tuple[Any, ...]], tuple[Any, ...]]:
    """Ledger rows (the open ledger listed 0/0, docs §0.2) and the managed-ledger row of one topic."""
    rows: list[tuple[Any, ...]] = [(cluster, topic, lid, n, size) for lid, n, size in closed]
    if current is not None:
        rows.append((cluster, topic, current, 0, 0))
    cls = cle * 100
    total = sum(size for _, _, size in closed) + cls
    return rows, (cluster, topic, current, cle, cls, lac, total)


def cursor(
    topic: str, name: str, md: Pos | None, order: int, durable: bool = True, cluster: str = "c"
) -> tuple[Any, ...]:
    kind = "reader" if not durable else ("replicator" if name.startswith("pulsar.repl.") else "subscription")
    return (cluster, topic, name, order, kind, durable, md)


# --- golden topics ------------------------------------------------------------------------------------
STATES = {
    # ties broken by cursor_order: two subscriptions at 1:2
    "ties": state("ties", [(1, 5, 500), (2, 5, 500)], 3, 2, (3, 1)),
    # non-contiguous ids, a reader slower than the only subscription
    "reader": state("reader", [(10, 4, 400), (12, 4, 400)], 15, 3, (15, 2)),
    # md at the last entry of a closed ledger; empty open ledger, LAC in the closed ledger 21
    "last_entry": state("last_entry", [(20, 3, 300), (21, 3, 300)], 22, 0, (21, 2)),
    # md (L,-1) on an empty closed ledger 30
    "minus_one": state("minus_one", [(30, 0, 0), (31, 2, 200)], 32, 1, (32, 0)),
    # deleted ledgers 40 and 42: both durable mds point into them
    "deleted": state("deleted", [(41, 2, 200), (43, 2, 200)], 44, 0, (43, 1)),
    # only a reader: every ledger before the current one goes
    "no_durable": state("no_durable", [(50, 1, 10), (51, 1, 10)], 52, 0, (51, 0)),
    # no open ledger: the last (closed) ledger stays the broker's currentLedger
    "no_open": state("no_open", [(60, 2, 20), (61, 3, 30)], None, 0, (61, 2)),
    # a replicator is the slowest durable cursor, a subscription next; md (L,-1) on a non-empty ledger
    "repl": state("repl", [(70, 2, 20), (71, 2, 20), (72, 2, 20)], 73, 1, (73, 0)),
    # same topic name as "ties" in another cluster: must not mix
    "other_cluster": state("ties", [(1, 5, 500)], 2, 0, (1, 4), cluster="c2"),
}
CURSOR_ROWS = [
    cursor("ties", "sub-b", (1, 2), order=1),
    cursor("ties", "sub-a", (1, 2), order=0),
    cursor("ties", "sub-c", (2, 4), order=2),
    cursor("reader", "reader-1", (10, 0), order=0, durable=False),
    cursor("reader", "sub", (12, 1), order=1),
    cursor("last_entry", "sub-a", (20, 2), order=0),
    cursor("last_entry", "sub-b", (21, 2), order=1),
    cursor("minus_one", "sub", (30, -1), order=0),
    cursor("deleted", "sub-a", (42, 5), order=0),
    cursor("deleted", "sub-b", (40, 1), order=1),
    cursor("no_durable", "reader-1", (50, 0), order=0, durable=False),
    cursor("no_open", "sub", (61, 2), order=0),
    cursor("repl", "pulsar.repl.c2", (71, -1), order=1),
    cursor("repl", "sub", (72, 1), order=0),
    cursor("repl", "reader-9", (70, 0), order=2, durable=False),
    cursor("ties", "sub", (1, 4), order=0, cluster="c2"),
]


def _plain(value: Any) -> Any:
    """Collected values as plain Python: positions as tuples, arrays as lists."""
    if value is None:
        return None
    if hasattr(value, "asDict"):
        return (value["ledger_id"], value["entry_id"])
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _frames(spark: SparkSession) -> tuple[DataFrame, DataFrame, DataFrame]:
    ledger_rows = [r for rows, _ in STATES.values() for r in rows]
    ml_rows = [ml for _, ml in STATES.values()]
    return (
        spark.createDataFrame(ml_rows, ML),
        spark.createDataFrame(ledger_rows, LEDGERS),
        spark.createDataFrame(CURSOR_ROWS, CURSORS),
    )


def _report_of_the_backlog_pass(
    mls: DataFrame, ledgers: DataFrame, cursors: DataFrame, pulsar_version: str
) -> DataFrame:
    """The pinning columns of the backlog stage's grouped pass (``backlog_numbers(...).pinning``)."""
    acked = cursors.withColumn(
        "individually_deleted", F.lit(None).cast(f"array<struct<lower:{POS},upper:{POS}>>")
    )
    return backlog_numbers(mls, ledgers, acked, pulsar_version=pulsar_version).pinning


@pytest.fixture(scope="module", params=["set_based", "backlog_pass"])
def golden(request: pytest.FixtureRequest, spark: SparkSession) -> dict[tuple[str, str, str], dict[str, Any]]:
    """``(version, cluster, topic) -> report row`` for every golden topic, one Spark action; once from
    :func:`pinning_report`, once from the backlog stage's grouped pass (the same rule, in Python)."""
    mls, ledgers, cursors = _frames(spark)
    report = pinning_report if request.param == "set_based" else _report_of_the_backlog_pass
    frames = [report(mls, ledgers, cursors, pulsar_version=v).withColumn("_v", F.lit(v)) for v in (NEW, OLD)]
    rows = functools.reduce(DataFrame.unionByName, frames).collect()
    return {(r["_v"], r["cluster"], r["topic"]): {k: _plain(v) for k, v in r.asDict().items()} for r in rows}


def expect(
    slowest: str | None,
    slowest_md: Pos | None,
    tie: bool,
    nxt: str | None,
    nxt_md: Pos | None,
    target: Pos | None,
    boundary: int | None,
    pinned: list[int],
    pinned_bytes: int,
    now: list[int],
    now_bytes: int,
    kind: str | None = "subscription",
) -> dict[str, Any]:
    return {
        "slowest_cursor_name": slowest,
        "slowest_cursor_kind": kind if slowest else None,
        "slowest_mark_delete_position": slowest_md,
        "slowest_cursor_tie": tie,
        "next_slowest_cursor_name": nxt,
        "next_slowest_mark_delete_position": nxt_md,
        "pin_target_position": target,
        "trim_boundary_ledger_id": boundary,
        "pinned_ledgers": len(pinned),
        "pinned_bytes": pinned_bytes,
        "pinned_ledger_ids": pinned,
        "oldest_pinned_ledger_id": pinned[0] if pinned else None,
        "trimmable_now_ledgers": len(now),
        "trimmable_now_bytes": now_bytes,
        "trimmable_now_ledger_ids": now,
    }


def check(
    golden: dict[tuple[str, str, str], dict[str, Any]],
    version: str,
    topic: str,
    want: dict[str, Any],
    cluster: str = "c",
) -> None:
    got = golden[(version, cluster, topic)]
    got = {k: got[k] for k in want}
    assert got == want, f"{version} {cluster}/{topic}"


def test_pinning_report_one_row_per_managed_ledger(
    golden: dict[tuple[str, str, str], dict[str, Any]],
) -> None:
    expected = {(v, ml[0], ml[1]) for v in (NEW, OLD) for _, ml in STATES.values()}
    assert set(golden) == expected


def test_pinning_report_tie_broken_by_cursor_order_pins_nothing(
    golden: dict[tuple[str, str, str], dict[str, Any]],
) -> None:
    # sub-a (order 0) and sub-b (order 1) both at 1:2 (not the last entry of ledger 1 of 5 entries): bound 1
    want = expect("sub-a", (1, 2), True, "sub-b", (1, 2), (1, 2), 1, [], 0, [], 0)
    check(golden, NEW, "ties", want)
    check(golden, OLD, "ties", want)


def test_pinning_report_readers_never_pin(golden: dict[tuple[str, str, str], dict[str, Any]]) -> None:
    # reader at 10:0 ignored; sub at 12:1 -> 10 trimmable now; moved to LAC 15:2 (open ledger) also 12 goes
    want = expect("sub", (12, 1), False, None, None, (15, 2), 12, [12], 400, [10], 400)
    check(golden, NEW, "reader", want)
    check(golden, OLD, "reader", want)


def test_pinning_report_md_at_last_entry_of_closed_ledger(
    golden: dict[tuple[str, str, str], dict[str, Any]],
) -> None:
    # 3.x+: 20:2 is the last entry of closed ledger 20 -> bound 21; next sub-b at 21:2 releases 21 too
    check(
        golden,
        NEW,
        "last_entry",
        expect("sub-a", (20, 2), False, "sub-b", (21, 2), (21, 2), 21, [21], 300, [20], 300),
    )
    # 2.10: bound is md's ledger itself
    check(
        golden,
        OLD,
        "last_entry",
        expect("sub-a", (20, 2), False, "sub-b", (21, 2), (21, 2), 20, [20], 300, [], 0),
    )


def test_pinning_report_md_minus_one_on_empty_closed_ledger(
    golden: dict[tuple[str, str, str], dict[str, Any]],
) -> None:
    # 30 has 0 entries: entries == -1 + 1 releases it (3.x+); moved to LAC 32:0 (open ledger) 31 goes as well
    check(
        golden, NEW, "minus_one", expect("sub", (30, -1), False, None, None, (32, 0), 31, [31], 200, [30], 0)
    )
    check(
        golden,
        OLD,
        "minus_one",
        expect("sub", (30, -1), False, None, None, (32, 0), 30, [30, 31], 200, [], 0),
    )


def test_pinning_report_md_in_deleted_ledgers(golden: dict[tuple[str, str, str], dict[str, Any]]) -> None:
    # slowest 40:1 (deleted, below every listed ledger) keeps all; next 42:5 (deleted) would free 41
    want = expect("sub-b", (40, 1), False, "sub-a", (42, 5), (42, 5), 41, [41], 200, [], 0)
    check(golden, NEW, "deleted", want)
    check(golden, OLD, "deleted", want)


def test_pinning_report_without_durable_cursor_trims_all_but_current(
    golden: dict[tuple[str, str, str], dict[str, Any]],
) -> None:
    want = expect(None, None, False, None, None, None, 52, [], 0, [50, 51], 20)
    check(golden, NEW, "no_durable", want)
    check(golden, OLD, "no_durable", want)


def test_pinning_report_without_open_ledger_keeps_last_ledger(
    golden: dict[tuple[str, str, str], dict[str, Any]],
) -> None:
    # 61:2 is the last entry of 61, but 61 is the broker's currentLedger (closed, no new ledger yet)
    want = expect("sub", (61, 2), False, None, None, (61, 2), 61, [], 0, [60], 20)
    check(golden, NEW, "no_open", want)
    check(golden, OLD, "no_open", want)


def test_pinning_report_replicator_pins_for_subscription(
    golden: dict[tuple[str, str, str], dict[str, Any]],
) -> None:
    # replicator at 71:-1 (ledger 71 has 2 entries: not released) -> 70 goes now; sub at 72:1 (the last entry
    # of closed 72) would free 71 and, from 3.x, 72 as well
    repl = ("pulsar.repl.c2", (71, -1), False, "sub", (72, 1), (72, 1), 71)
    check(golden, NEW, "repl", expect(*repl, [71, 72], 40, [70], 20, kind="replicator"))
    check(golden, OLD, "repl", expect(*repl, [71], 20, [70], 20, kind="replicator"))


def test_pinning_report_no_leak_across_clusters(golden: dict[tuple[str, str, str], dict[str, Any]]) -> None:
    # c2/ties: one cursor at 1:4 = last entry of 1 and LAC; c/ties' cursors must not appear
    check(
        golden,
        NEW,
        "ties",
        expect("sub", (1, 4), False, None, None, (1, 4), 2, [], 0, [1], 500),
        cluster="c2",
    )
    # 2.10: ledger 1 waits for the roll-over to move md to (2,-1); moving the cursor to LAC frees nothing
    check(
        golden, OLD, "ties", expect("sub", (1, 4), False, None, None, (1, 4), 1, [], 0, [], 0), cluster="c2"
    )


def test_pinning_report_keys_by_export_id(spark: SparkSession) -> None:
    """Two exports of one topic in the same frames give two independent rows."""
    ml_schema = f"export_id string, export_date date, {ML}"
    d1, d2 = date(2026, 1, 1), date(2026, 1, 2)
    mls = spark.createDataFrame(
        [("e1", d1, "c", "t", 3, 0, 0, (2, 1), 400), ("e2", d2, "c", "t", 4, 0, 0, (3, 1), 400)], ml_schema
    )
    ledgers = spark.createDataFrame(
        [
            ("e1", "c", "t", 1, 2, 200),
            ("e1", "c", "t", 2, 2, 200),
            ("e1", "c", "t", 3, 0, 0),
            ("e2", "c", "t", 2, 2, 200),
            ("e2", "c", "t", 3, 2, 200),
            ("e2", "c", "t", 4, 0, 0),
        ],
        f"export_id string, {LEDGERS}",
    )
    cursors = spark.createDataFrame(
        [
            ("e1", "c", "t", "sub", 0, "subscription", True, (1, 0)),
            ("e2", "c", "t", "sub", 0, "subscription", True, (3, 1)),
        ],
        f"export_id string, {CURSORS}",
    )
    rows = pinning_report(mls, ledgers, cursors).select(
        "export_id", "export_date", "trimmable_now_ledger_ids", "pinned_ledger_ids"
    )
    got = {
        r["export_id"]: (r["export_date"], r["trimmable_now_ledger_ids"], r["pinned_ledger_ids"])
        for r in rows.collect()
    }
    # e1: md 1:0 keeps 1; LAC 2:1 would free 1 and 2. e2: md 3:1 = last entry of closed 3 -> 2 and 3 go
    assert got == {"e1": (d1, [], [1, 2]), "e2": (d2, [2, 3], [])}


def test_pinning_report_rejects_export_id_on_managed_ledgers_only(spark: SparkSession) -> None:
    mls = spark.createDataFrame([("e1", "c", "t", 2, 0, 0, (1, 0), 0)], f"export_id string, {ML}")
    ledgers = spark.createDataFrame([("c", "t", 1, 1, 1)], LEDGERS)
    cursors = spark.createDataFrame([], CURSORS)
    with pytest.raises(ContractError, match="ledgers, cursors"):
        pinning_report(mls, ledgers, cursors)


def test_trims_ledger_of_mark_delete_at_last_entry_by_version() -> None:
    assert not trims_ledger_of_mark_delete_at_last_entry("2.10.6")
    assert trims_ledger_of_mark_delete_at_last_entry("3.0.7")
    assert trims_ledger_of_mark_delete_at_last_entry("4.1.3")


# --- property: pinning_report vs the oracle -------------------------------------------------------------

PROPERTY_SETTINGS = S.PROPERTY_SETTINGS
PROPERTY_VERSIONS = (OLD, NEW)
REPORT_FIELDS = (
    "slowest_cursor_name",
    "slowest_mark_delete_position",
    "slowest_cursor_tie",
    "next_slowest_cursor_name",
    "next_slowest_mark_delete_position",
    "pin_target_position",
    "trim_boundary_ledger_id",
    "pinned_ledgers",
    "pinned_bytes",
    "pinned_ledger_ids",
    "oldest_pinned_ledger_id",
    "trimmable_now_ledger_ids",
    "trimmable_now_bytes",
)


@PROPERTY_SETTINGS
@given(cases=S.case_lists(S.cursor_cases(), min_size=60, max_size=80))
def test_pinning_report_matches_oracle(spark: SparkSession, cases: list[S.Case]) -> None:
    assume(S.is_informative(cases))
    ledgers, mls, cursors = S.input_frames(spark, cases)
    rows = S.run_versions(
        lambda v: pinning_report(mls, ledgers, cursors, pulsar_version=v), PROPERTY_VERSIONS
    )
    actual = {(r["_version"], r["topic"]): r for r in rows}
    assert len(rows) == len(PROPERTY_VERSIONS) * len(cases), "expected one row per topic and version"
    mismatches: list[S.Mismatch] = []
    for v in PROPERTY_VERSIONS:
        rule = trims_ledger_of_mark_delete_at_last_entry(v)
        for i, case in enumerate(cases):
            want = op.pinning(case.ml, case.cursors, rule)
            got_row = actual[(v, S.topic_name(i))]
            for name in REPORT_FIELDS:
                expected, got = getattr(want, name), _plain(got_row[name])
                if got != expected:
                    mismatches.append(S.Mismatch(v, i, name, expected, got))
    assert not mismatches, S.mismatch_report(mismatches, cases)


# --- unmoved_cursors ----------------------------------------------------------------------------------

HIST_CURSORS = (
    f"cluster string, topic string, export_id string, export_date date, cursor_name string, "
    f"cursor_kind string, is_durable boolean, mark_delete_position {POS}"
)
HIST_ML = f"cluster string, topic string, export_id string, export_date date, last_confirmed_entry {POS}"
DATES = [date(2026, 3, d) for d in (1, 2, 3, 4)]


def _history_rows() -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Four nightly exports: topic T1 in all of them, T2 only in exports 2 and 4, c2/T1 in all."""
    d = DATES
    e = {day: f"e{i + 1}" for i, day in enumerate(d)}
    lac_t1 = [(1, 5), (1, 9), (2, 3), (2, 3)]
    mds: dict[str, list[Pos | None]] = {  # None = cursor absent from that export
        "stuck": [(1, 2), (1, 2), (1, 2), (1, 2)],
        "moved_then_stuck": [(1, 0), (1, 4), (1, 4), (1, 4)],
        "idle": [None, None, (2, 3), (2, 3)],
        "moving": [(1, 0), (1, 1), (1, 2), (1, 3)],
        "gap": [(1, 1), (1, 1), None, (1, 1)],
        "gone": [(1, 3), (1, 3), (1, 3), None],
        "reader-x": [None, None, (1, 1), (1, 1)],
    }
    cursors: list[tuple[Any, ...]] = []
    for name, seq in mds.items():
        kind, durable = ("reader", False) if name.startswith("reader") else ("subscription", True)
        for day, md in zip(d, seq, strict=True):
            if md is not None:
                cursors.append(("c", "T1", e[day], day, name, kind, durable, md))
    for day in (d[1], d[3]):
        cursors.append(("c", "T2", e[day], day, "stuck", "subscription", True, (5, 0)))
    for i, day in enumerate(d):
        cursors.append(("c2", "T1", e[day], day, "stuck", "subscription", True, (9, i)))
    mls = [("c", "T1", e[day], day, lac) for day, lac in zip(d, lac_t1, strict=True)]
    mls += [("c", "T2", e[day], day, (5, 0)) for day in (d[1], d[3])]
    mls += [("c2", "T1", e[day], day, (9, 3)) for day in d]
    return cursors, mls


@pytest.fixture(scope="module")
def unmoved_golden(spark: SparkSession) -> dict[tuple[str, str, str, str], dict[str, Any]]:
    """``(variant, cluster, topic, cursor) -> row`` for three calls in one Spark action."""
    cursor_rows, ml_rows = _history_rows()
    history = spark.createDataFrame(cursor_rows, HIST_CURSORS)
    mls = spark.createDataFrame(ml_rows, HIST_ML)
    variants = {
        "ml2": unmoved_cursors(history, mls, min_exports=2),
        "ml3": unmoved_cursors(history, mls, min_exports=3),
        "plain": unmoved_cursors(history),
    }
    frames = [df.withColumn("_variant", F.lit(name)) for name, df in variants.items()]
    rows = functools.reduce(DataFrame.unionByName, frames).collect()
    return {
        (r["_variant"], r["cluster"], r["topic"], r["cursor_name"]): {
            k: _plain(v) for k, v in r.asDict().items()
        }
        for r in rows
    }


def unmoved_row(
    md: Pos, since: int, last: int, k: int, present: bool, advanced: bool | None, durable: bool = True
) -> dict[str, Any]:
    return {
        "mark_delete_position": md,
        "unmoved_since_export_date": DATES[since],
        "last_export_date": DATES[last],
        "unmoved_exports": k,
        "present_in_latest_export": present,
        "topic_advanced": advanced,
        "is_durable": durable,
    }


def _pick(
    rows: dict[tuple[str, str, str, str], dict[str, Any]], variant: str
) -> dict[tuple[str, str, str], dict[str, Any]]:
    fields = ("mark_delete_position", "unmoved_since_export_date", "last_export_date", "unmoved_exports")
    more = ("present_in_latest_export", "topic_advanced", "is_durable")
    return {key[1:]: {f: row[f] for f in fields + more} for key, row in rows.items() if key[0] == variant}


def test_unmoved_cursors_with_managed_ledger_history(
    unmoved_golden: dict[tuple[str, str, str, str], dict[str, Any]],
) -> None:
    assert _pick(unmoved_golden, "ml2") == {
        # LAC 1:5 -> 2:3 while the cursor stood still: stuck
        ("c", "T1", "stuck"): unmoved_row((1, 2), 0, 3, 4, True, True),
        ("c", "T1", "moved_then_stuck"): unmoved_row((1, 4), 1, 3, 3, True, True),
        # LAC 2:3 in both exports: an idle topic, not a stuck cursor
        ("c", "T1", "idle"): unmoved_row((2, 3), 2, 3, 2, True, False),
        # deleted before the last export: reported, but no longer present
        ("c", "T1", "gone"): unmoved_row((1, 3), 0, 2, 3, False, True),
        ("c", "T1", "reader-x"): unmoved_row((1, 1), 2, 3, 2, True, False, durable=False),
        # T2 missing from exports 1 and 3: exports 2 and 4 are consecutive for it
        ("c", "T2", "stuck"): unmoved_row((5, 0), 1, 3, 2, True, False),
        # "moving", "gap" (absent in export 3 breaks the run) and c2/T1 "stuck" (moves) are not reported
    }


def test_unmoved_cursors_min_exports_filters_short_runs(
    unmoved_golden: dict[tuple[str, str, str, str], dict[str, Any]],
) -> None:
    assert set(_pick(unmoved_golden, "ml3")) == {
        ("c", "T1", "stuck"),
        ("c", "T1", "moved_then_stuck"),
        ("c", "T1", "gone"),
    }


def test_unmoved_cursors_without_managed_ledger_history(
    unmoved_golden: dict[tuple[str, str, str, str], dict[str, Any]],
) -> None:
    plain = _pick(unmoved_golden, "plain")
    with_ml = _pick(unmoved_golden, "ml2")
    assert set(plain) == set(with_ml)
    for key, row in plain.items():
        assert row == {**with_ml[key], "topic_advanced": None}, key


def test_unmoved_cursors_rejects_min_exports_below_one(spark: SparkSession) -> None:
    history = spark.createDataFrame([], HIST_CURSORS)
    with pytest.raises(ValueError, match="min_exports"):
        unmoved_cursors(history, min_exports=0)


# --- property: unmoved_cursors vs the oracle -------------------------------------------------------------

_MD_POOL: list[Pos] = [(1, 0), (1, 1), (2, -1), (2, 0)]
_LAC_POOL: list[Pos] = [(1, 1), (2, 0), (2, 3)]
_NAMES = ["s1", "s2", "s3"]


@st.composite
def topic_histories(draw: st.DrawFn) -> list[op.Snapshot]:
    """2-6 exports of one topic on distinct dates, cursors appearing/disappearing, mds from a small pool."""
    days = sorted(draw(st.sets(st.integers(1, 12), min_size=2, max_size=6)))
    snaps: list[op.Snapshot] = []
    for day in days:
        present = draw(st.lists(st.sampled_from(_NAMES), unique=True, max_size=3))
        mds = {name: draw(st.sampled_from(_MD_POOL)) for name in present}
        snaps.append(op.Snapshot(date(2026, 5, day), draw(st.sampled_from(_LAC_POOL)), mds))
    return snaps


@PROPERTY_SETTINGS
@given(
    histories=st.lists(topic_histories(), min_size=30, max_size=50),
    min_exports=st.integers(1, 3),
)
def test_unmoved_cursors_matches_oracle(
    spark: SparkSession, histories: list[list[op.Snapshot]], min_exports: int
) -> None:
    cursor_rows = [
        ("c", f"t{i}", f"e{s.export_date.isoformat()}", s.export_date, name, "subscription", True, md)
        for i, snaps in enumerate(histories)
        for s in snaps
        for name, md in s.cursors.items()
    ]
    ml_rows = [
        ("c", f"t{i}", f"e{s.export_date.isoformat()}", s.export_date, s.lac)
        for i, snaps in enumerate(histories)
        for s in snaps
    ]
    history = spark.createDataFrame(cursor_rows, HIST_CURSORS)
    mls = spark.createDataFrame(ml_rows, HIST_ML)
    union = (
        unmoved_cursors(history, mls, min_exports=min_exports)
        .withColumn("_lac", F.lit(True))
        .unionByName(unmoved_cursors(history, min_exports=min_exports).withColumn("_lac", F.lit(False)))
    )
    actual = {(r["_lac"], r["topic"], r["cursor_name"]): r for r in union.collect()}
    expected: dict[tuple[bool, str, str], op.UnmovedRow] = {}
    for with_lac in (True, False):
        for i, snaps in enumerate(histories):
            # without the managed-ledger history a topic "exists" only in exports that list a cursor
            seen = snaps if with_lac else [s for s in snaps if s.cursors]
            for name, row in op.unmoved(seen, min_exports, with_lac).items():
                expected[(with_lac, f"t{i}", name)] = row
    assert set(actual) == set(expected)
    for key, want in expected.items():
        got = actual[key]
        got_plain = op.UnmovedRow(
            mark_delete_position=_plain(got["mark_delete_position"]),
            unmoved_since_export_date=got["unmoved_since_export_date"],
            last_export_date=got["last_export_date"],
            unmoved_exports=got["unmoved_exports"],
            present_in_latest_export=got["present_in_latest_export"],
            topic_advanced=got["topic_advanced"],
        )
        assert got_plain == want, (key, histories[int(key[1][1:])])
