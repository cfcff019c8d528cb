"""The nightly history stage over four hand-built run dates (issue 8, part 2).

One module-scoped run: the input tables of four run dates (one cluster, topics A and B on every date, C
until D3, D only on D4) are written once; the stage runs D1 (replication, compaction tables still absent),
then those tables appear, then D2, D3, D4, and finally D4 and D2 again (rerun and back-fill) with the
status window K = 3. Every cursor's backlog is ``LAC entry - mark-delete entry`` on a single ledger, so the
Burrow statuses below are derived by hand from the positions:

topic A (LAC 10, 20, 30, 40)           mark-delete by date     lag              D1 D2 D3 D4
  s-window       lag 0 leaves the window    10 15 24 33     0  5  6  7       OK OK OK WARN
  s-warn         moves, lag grows           5 10 14 17      5 10 16 23       UN WARN WARN WARN
  s-stall        stuck, producers write     2  2  2  2      8 18 28 38       UN STALL STALL STALL
  s-rewind       back on D3                 8 18  5 30      2  2 25 10       UN WARN REWIND REWIND
  s-catchup      lag drops now and then     1 12 20 33      9  8 10  7       UN OK OK OK
  s-rr           back on D2, 0 on D3        10 3 30 35      0 17  0  5       OK REWIND OK OK
  s-gone         D1-D3 only                 10 20 30        0  0  0          OK OK OK -
  reader-x       non-durable, D1 only: history row, no status
topic B (idle, LAC 50)
  s-stop         stuck since before D1      20 20 20 20     30 each          UN STALL STOP STOP
  s-stop-stats   lastMarkDeleteAdvanced D1 00:00, 45 ...    5 each           UN STOP STOP STOP
topic C (D1-D3): s-c lag 0 -> OK; topic D (D4): s-new lag 6 -> UNKNOWN, s-err backlog error -> UNKNOWN

Exports are at 02:00 UTC, one day apart: s-stop's mark-delete is unchanged for exactly 86400 s on D2 (not
more than the one-day STOP threshold: STALL), 172800 s on D3; s-stop-stats' exported timestamp adds 2 h.
"""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace
from typing import Any

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_model.history import subscription_status
from pulsar_model.pipeline.stages.history import OUTPUT_TABLES, run_history_stage
from pulsar_model.tables import contracts
from pulsar_model.tables.delta_io import DeltaTables

#: What the stage stores is under test, not how Spark runs it (tests/spark_conf.py).
pytestmark = pytest.mark.usefixtures("fast_spark_conf")

CLUSTER = "c1"
DATES = [dt.date(2026, 11, d) for d in (1, 2, 3, 4)]
D1, D2, D3, D4 = DATES
A, B, C, D = (f"persistent://t/ns/{x}" for x in "abcd")
VERSION = "3.0.7"
WINDOW = 3
LEDGER = {A: 1, B: 2, C: 3, D: 4}
LAC = {A: [10, 20, 30, 40], B: [50] * 4, C: [5, 5, 5, None], D: [None, None, None, 9]}
#: cursor -> (topic, mark-delete entry per date (None = absent))
MARK_DELETES = {
    "s-window": (A, [10, 15, 24, 33]),
    "s-warn": (A, [5, 10, 14, 17]),
    "s-stall": (A, [2, 2, 2, 2]),
    "s-rewind": (A, [8, 18, 5, 30]),
    "s-catchup": (A, [1, 12, 20, 33]),
    "s-rr": (A, [10, 3, 30, 35]),
    "s-gone": (A, [10, 20, 30, None]),
    "reader-x": (A, [9, None, None, None]),
    "s-stop": (B, [20, 20, 20, 20]),
    "s-stop-stats": (B, [45, 45, 45, 45]),
    "s-c": (C, [5, 5, 5, None]),
    "s-new": (D, [None, None, None, 3]),
    "s-err": (D, [None, None, None, 9]),
}
TOPIC_ESTIMATE = {A: [1000, 1200, 2000, 900], B: [500] * 4, C: [0] * 3 + [None], D: [None] * 3 + [100]}
SIZE_PERCENT = [50.0, 80.0, 120.0, 90.0]  # topic A's size quota: breach from D3, over on D4


def _at(day: dt.date) -> dt.datetime:
    return dt.datetime.combine(day, dt.time(2, 0), tzinfo=dt.UTC)


def _export(topic: str, day: dt.date) -> dict[str, Any]:
    return {"cluster": CLUSTER, "topic": topic, "export_id": f"e-{day}", "export_date": day}


def _frame(spark, table: str, rows: list[dict[str, Any]]):
    """The rows with the contract's types for the columns they name, conformed to the whole contract."""
    names = {k for r in rows for k in r}
    fields = [f for f in contracts.spark_schema(table).fields if f.name in names]
    df = spark.createDataFrame([tuple(r.get(f.name) for f in fields) for r in rows], T.StructType(fields))
    return contracts.conform(df, table)


def _lag(cursor: str, i: int) -> int | None:
    topic, mds = MARK_DELETES[cursor]
    lac = LAC[topic][i]
    return None if cursor == "s-err" or lac is None or mds[i] is None else lac - mds[i]


def _base_inputs() -> dict[str, list[dict[str, Any]]]:
    managed, cursors, backlog, topic_backlog, quota = [], [], [], [], []
    for i, day in enumerate(DATES):
        for topic, lacs in LAC.items():
            if lacs[i] is None:
                continue
            names = [c for c, (t, mds) in MARK_DELETES.items() if t == topic and mds[i] is not None]
            managed.append(
                _export(topic, day)
                | {
                    "exported_at": _at(day),
                    "partition_index": -1,
                    "total_size_bytes": 10_000,
                    "current_ledger_entries": lacs[i] + 1,
                    "current_ledger_size_bytes": 10_000,
                    "ledger_count": 1,
                    "cursor_count": len(names),
                    "last_confirmed_entry": (LEDGER[topic], lacs[i]),
                    "stats_backlog_size_bytes": TOPIC_ESTIMATE[topic][i],
                }
            )
            topic_backlog.append(
                _export(topic, day)
                | {"pulsar_version": VERSION, "estimated_backlog_size_bytes": TOPIC_ESTIMATE[topic][i]}
            )
            for order, name in enumerate(names):
                durable = not name.startswith("reader")
                md = (LEDGER[topic], MARK_DELETES[name][1][i])
                stats_at = _at(D1) - dt.timedelta(hours=2) if name == "s-stop-stats" else None
                kind = "subscription" if durable else "reader"
                cursors.append(
                    _export(topic, day)
                    | {
                        "cursor_name": name,
                        "cursor_order": order,
                        "cursor_kind": kind,
                        "is_durable": durable,
                        "is_replicated": False,
                        "mark_delete_position": md,
                        "individually_deleted": [],
                        "subscription_type": "Shared",
                        "stats_consumer_count": 1,
                        "stats_last_mark_delete_advanced_at": stats_at,
                    }
                )
                lag = _lag(name, i)
                backlog.append(
                    _export(topic, day)
                    | {
                        "cursor_name": name,
                        "cursor_kind": kind,
                        "is_durable": durable,
                        "pulsar_version": VERSION,
                        "mark_delete_position": md,
                        "backlog_entries": lag,
                        "backlog_bytes": None if lag is None else 100 * lag,
                        "estimated_backlog_size_bytes": 110 * (lag or 0),
                        "error": "entry missing" if lag is None else None,
                    }
                )
        for quota_type, percent, exceeded in (
            ("destination_storage", SIZE_PERCENT[i], SIZE_PERCENT[i] >= 100),
            ("message_age", 10.0, False),
        ):
            quota.append(
                _export(A, day)
                | {
                    "pulsar_version": VERSION,
                    "quota_type": quota_type,
                    "namespace": "t/ns",
                    "limit_size_bytes": 1000,
                    "limit_time_seconds": 3600,
                    "source_level": "namespace",
                    "resolved_from_type": quota_type,
                    "precise_time_check": False,
                    "check_interval_seconds": 60,
                    "check_enabled": True,
                    "is_system_topic": False,
                    "percent_of_quota": percent,
                    "size_exceeded": SIZE_PERCENT[i] >= 100,
                    "time_exceeded": False,
                    "exceeded": exceeded,
                }
            )
    return {
        "managed_ledgers": managed,
        "cursors": cursors,
        "cursor_backlog": backlog,
        "topic_backlog": topic_backlog,
        "quota_status": quota,
    }


def _late_inputs() -> dict[str, list[dict[str, Any]]]:
    """Tables of stages that first run after D1: replication on D4 (findings D3, D4), compaction on D4."""
    pair = {"topic": A, "subscription": "s-warn", "source_cluster": CLUSTER, "export_id": f"e-{D4}"}
    common = pair | {"export_date": D4, "source_mark_delete_position": (1, 17), "target_cursor_exists": True}
    positions = [
        common
        | {
            "target_cluster": target,
            "source_individually_deleted_ranges": 0,
            "source_consumers": 1,
            "source_active": True,
            "updates_written": 3,
            "update_delivered": True,
            "remote_behind_entries": behind,
            "source_lead_entries": 2,
            "seconds_since_last_update": seconds,
            "status": status,
            "status_reason": "test",
        }
        for target, behind, seconds, status in (("c2", 4, 30.0, "lagging"), ("c3", 0, 10.0, "in_sync"))
    ]
    duplicates = [
        common
        | {
            "target_cluster": "c2",
            "method": "exact",
            "failover_duplicate_messages": 12,
            "failover_duplicate_entries": 3,
            "failover_duplicate_bytes": 300,
            "consumed_on_source_entries_upper_bound": 5,
        }
    ]
    holes = {"kind": "ack_holes_hold_mark_delete", "severity": "warning", "subscription": "s-stall"}
    disconnected = {"kind": "replicator_disconnected", "severity": "critical", "related_cluster": "c2"}
    findings = [
        _export(A, D3) | holes | {"measure": 3, "detail": "holes"},
        _export(A, D4) | holes | {"measure": 4, "detail": "holes"},
        _export(A, D4) | disconnected | {"measure": 40, "detail": "replicator to c2 disconnected"},
    ]
    zero = dict.fromkeys(
        (
            "distinct_keys",
            "live_keys",
            "tombstones",
            "tombstones_never_removed",
            "null_key_messages",
            "null_key_kept",
            "null_key_dropped",
            "markers",
            "entries_before",
            "entries_after",
            "messages_before",
            "messages_after",
            "payload_bytes_after",
        ),
        0,
    )
    compaction = [
        _export(A, D4)
        | zero
        | {
            "pulsar_version": VERSION,
            "payload_bytes_before": 1000,
            "payload_bytes_saved": 400,
            "savings_ratio": 0.4,
            "would_trigger": True,
        }
    ]
    return {
        "replication_positions": positions,
        "replication_failover_duplicates": duplicates,
        "replication_findings": findings,
        "compaction_summary": compaction,
    }


def _snapshot(tables: DeltaTables) -> dict[str, list[dict[str, Any]]]:
    return {name: [r.asDict(recursive=True) for r in tables.read(name).collect()] for name in OUTPUT_TABLES}


def _write(spark, tables: DeltaTables, inputs: dict[str, list[dict[str, Any]]]) -> None:
    for table, rows in inputs.items():
        tables.append(table, _frame(spark, table, rows), partition_by=("export_date",))


@pytest.fixture(scope="module")
def history(spark, tmp_path_factory):
    tables = DeltaTables(spark, str(tmp_path_factory.mktemp("history-wh")))
    _write(spark, tables, _base_inputs())
    results = {D1: run_history_stage(tables, D1, VERSION, window_runs=WINDOW)}
    _write(spark, tables, _late_inputs())
    for day in (D2, D3, D4):
        results[day] = run_history_stage(tables, day, VERSION, window_runs=WINDOW)
    first = _snapshot(tables)
    rerun_d4 = run_history_stage(tables, D4, VERSION, window_runs=WINDOW)
    rerun_d2 = run_history_stage(tables, D2, VERSION, window_runs=WINDOW)
    second = _snapshot(tables)
    reruns = {D4: rerun_d4, D2: rerun_d2}
    return SimpleNamespace(tables=tables, results=results, first=first, second=second, rerun=reruns)


def _by_date(rows: list[dict[str, Any]], day: dt.date) -> list[dict[str, Any]]:
    return [r for r in rows if r["export_date"] == day]


def _sorted(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted((tuple(sorted((k, repr(v)) for k, v in r.items())) for r in rows), key=repr)


def test_history_stage_tables_match_contracts(history):
    tables = history.tables
    for table in OUTPUT_TABLES:
        assert not contracts.schema_differences(tables.schema(table), table), table
        assert tables.partition_columns(table) == ("export_date",)
        required = [c.name for c in contracts.contract(table).columns if not c.nullable]
        nulls = {name for r in history.first[table] for name in required if r[name] is None}
        assert not nulls, (table, nulls)
        key = contracts.contract(table).key
        keys = [tuple(r[k] for k in key) for r in history.first[table]]
        assert len(keys) == len(set(keys)), table
    for day in DATES:
        rows, _ = history.results[day]
        assert rows == {t: len(_by_date(history.first[t], day)) for t in OUTPUT_TABLES}


def test_subscription_status_follows_burrow_rules(history):
    un, ok, warn, stall, stop, rewind = "UNKNOWN", "OK", "WARN", "STALL", "STOP", "REWIND"
    expected = {
        "s-window": [ok, ok, ok, warn],
        "s-warn": [un, warn, warn, warn],
        "s-stall": [un, stall, stall, stall],
        "s-rewind": [un, warn, rewind, rewind],
        "s-catchup": [un, ok, ok, ok],
        "s-rr": [ok, rewind, ok, ok],
        "s-gone": [ok, ok, ok, None],
        "s-stop": [un, stall, stop, stop],
        "s-stop-stats": [un, stop, stop, stop],
        "s-c": [ok, ok, ok, None],
        "s-new": [None, None, None, un],
        "s-err": [None, None, None, un],
    }
    want = {
        (DATES[i], name): status
        for name, statuses in expected.items()
        for i, status in enumerate(statuses)
        if status is not None
    }
    rows = history.first["subscription_status"]
    assert {(r["export_date"], r["cursor_name"]): r["status"] for r in rows} == want
    d4 = {r["cursor_name"]: r for r in _by_date(rows, D4)}
    window = d4["s-window"]
    assert (window["window_runs"], window["window_start_date"], window["window_runs_limit"]) == (3, D2, 3)
    assert (window["backlog_entries_min"], window["backlog_entries_max"], window["lag_zero_in_window"]) == (
        5,
        7,
        False,
    )
    d3 = {r["cursor_name"]: r for r in _by_date(rows, D3)}
    # s-rr: rewound on D2, lag 0 on D3 (recovered); on D4 the D1 -> D2 step has left the window
    assert (d3["s-rr"]["last_rewind_date"], d3["s-rr"]["last_lag_zero_date"]) == (D2, D3)
    assert (d4["s-rr"]["last_rewind_date"], d4["s-rr"]["last_lag_zero_date"]) == (None, D3)
    assert d4["s-rewind"]["last_rewind_date"] == D3
    stop = d4["s-stop"]  # the window starts on D2: the unchanged time is a lower bound from D2's export
    assert (stop["lac_moved"], stop["mark_delete_moved"], stop["mark_delete_unchanged_seconds"]) == (
        False,
        False,
        172800.0,
    )
    assert stop["last_mark_delete_change_at"] == _at(D2).replace(tzinfo=None)
    stats = d4["s-stop-stats"]  # the exported lastMarkDeleteAdvancedTimestamp is earlier: it wins
    assert stats["mark_delete_unchanged_seconds"] == 3 * 86400.0 + 2 * 3600.0
    d2 = {r["cursor_name"]: r for r in _by_date(rows, D2)}
    assert d2["s-stop"]["mark_delete_unchanged_seconds"] == 86400.0  # not > the threshold: STALL
    assert d4["s-stall"]["lac_moved"] is True and "LAC moved" in d4["s-stall"]["status_reason"]
    assert all(r["status_reason"] for r in rows)


def _changes(history, day: dt.date) -> set[tuple[Any, ...]]:
    short = {A: "A", B: "B", C: "C", D: "D"}
    out = set()
    for r in _by_date(history.first["run_changes"], day):
        percent = None if r["change_percent"] is None else round(r["change_percent"], 2)
        values = (r["item"], r["old_value"], r["new_value"], percent)
        out.add((r["change_type"], short[r["topic"]], r["subscription"], *values))
        assert r["cluster"] == CLUSTER and r["detail"]
        assert r["previous_export_date"] == day - dt.timedelta(days=1)
    return out


def test_run_changes_compare_with_the_previous_run_date(history):
    assert _changes(history, D1) == set()
    assert _changes(history, D3) == {
        ("status_changed", "A", "s-rewind", None, "WARN", "REWIND", None),
        ("status_changed", "A", "s-rr", None, "REWIND", "OK", None),
        ("status_changed", "B", "s-stop", None, "STALL", "STOP", None),
        ("subscription_backlog_changed", "A", "s-warn", None, "10", "16", 60.0),
        ("subscription_backlog_changed", "A", "s-stall", None, "18", "28", 55.56),
        ("subscription_backlog_changed", "A", "s-rewind", None, "2", "25", 1150.0),
        ("subscription_backlog_changed", "A", "s-rr", None, "17", "0", -100.0),
        ("topic_backlog_changed", "A", None, None, "1200", "2000", 66.67),
        ("quota_breach_started", "A", None, "destination_storage", "80.0", "120.0", None),
        ("replication_finding_new", "A", "s-stall", "ack_holes_hold_mark_delete", None, "3", None),
    }
    assert _changes(history, D4) == {
        ("topic_added", "D", None, None, None, None, None),
        ("topic_removed", "C", None, None, None, None, None),
        ("subscription_added", "D", "s-new", None, None, None, None),
        ("subscription_added", "D", "s-err", None, None, None, None),
        ("subscription_removed", "A", "s-gone", None, None, None, None),
        ("subscription_removed", "C", "s-c", None, None, None, None),
        ("status_changed", "A", "s-window", None, "OK", "WARN", None),
        ("subscription_backlog_changed", "A", "s-rewind", None, "25", "10", -60.0),
        ("subscription_backlog_changed", "A", "s-rr", None, "0", "5", None),
        ("topic_backlog_changed", "A", None, None, "2000", "900", -55.0),
        ("quota_breach_ended", "A", None, "destination_storage", "120.0", "90.0", None),
        ("replication_finding_new", "A", None, "replicator_disconnected -> c2", None, "40", None),
    }


def test_subscription_history_rows(history):
    rows = {(r["export_date"], r["cursor_name"]): r for r in history.first["subscription_history"]}
    assert len(rows) == sum(1 for _, mds in MARK_DELETES.values() for md in mds if md is not None)
    for (day, name), r in rows.items():
        i = DATES.index(day)
        topic, mds = MARK_DELETES[name]
        lag = _lag(name, i)
        assert r["topic"] == topic and r["exported_at"] == _at(day).replace(tzinfo=None)
        assert r["mark_delete_position"] == {"ledger_id": LEDGER[topic], "entry_id": mds[i]}
        assert r["last_confirmed_entry"] == {"ledger_id": LEDGER[topic], "entry_id": LAC[topic][i]}
        assert (r["backlog_entries"], r["backlog_bytes"]) == (lag, None if lag is None else 100 * lag)
        assert r["estimated_backlog_size_bytes"] == 110 * (lag or 0)
        assert r["is_durable"] is (name != "reader-x")
        replicated = (day, name) == (D4, "s-warn")
        got = tuple(
            r[c]
            for c in (
                "replication_targets",
                "replication_status",
                "replication_remote_behind_entries",
                "replication_source_lead_entries",
                "replication_seconds_since_last_update",
                "failover_duplicate_messages",
                "failover_duplicate_entries",
                "failover_duplicate_bytes",
                "failover_duplicate_entries_upper_bound",
            )
        )
        assert got == ((2, "lagging", 4, 2, 30.0, 12, 3, 300, 5) if replicated else (None,) * 9), (day, name)


def test_topic_history_rows(history):
    rows = {(r["export_date"], r["topic"]): r for r in history.first["topic_history"]}
    present = {(DATES[i], t) for t, lacs in LAC.items() for i, lac in enumerate(lacs) if lac is not None}
    assert set(rows) == present
    a = [rows[(day, A)] for day in DATES]
    assert [r["estimated_backlog_size_bytes"] for r in a] == TOPIC_ESTIMATE[A]
    assert [r["exact_backlog_entries"] for r in a] == [9, 18, 28, 38]  # largest durable cursor lag
    assert [r["estimate_minus_exact_bytes"] for r in a] == [100, -600, -800, -2900]
    assert [r["size_percent_of_quota"] for r in a] == SIZE_PERCENT
    assert [r["size_exceeded"] for r in a] == [False, False, True, False]
    assert [(r["time_percent_of_quota"], r["time_exceeded"], r["size_limit_bytes"]) for r in a] == [
        (10.0, False, 1000)
    ] * 4
    assert [r["durable_cursors"] for r in a] == [7, 7, 7, 6]  # reader-x excluded; s-gone leaves on D4
    # D1 ran before the replication and compaction tables existed: null, then 0 / counts
    assert [r["replication_findings"] for r in a] == [None, 0, 1, 2]
    assert rows[(D2, B)]["replication_findings"] == 0
    names = ("compaction_payload_bytes_before", "compaction_payload_bytes_saved", "compaction_would_trigger")
    compaction = [tuple(r[n] for n in names) for r in a]
    assert compaction == [(None, None, None)] * 3 + [(1000, 400, True)]
    b = rows[(D4, B)]
    assert (b["size_percent_of_quota"], b["size_exceeded"], b["exact_backlog_entries"]) == (None, None, 30)


def test_history_stage_rerun_and_backfill_give_identical_rows(history):
    """Rerunning D4, then back-filling D2 after D4 exists, replaces each date with the same rows."""
    for day in (D4, D2):
        assert history.rerun[day][0] == history.results[day][0]
    assert history.rerun[D2][1] == {t: v + 1 for t, v in history.rerun[D4][1].items()}
    for table in OUTPUT_TABLES:
        assert _sorted(history.second[table]) == _sorted(history.first[table]), table


def test_subscription_status_with_known_run_dates_equals_the_window_read_from_the_rows(history):
    """The stage's literal window (run dates from the Delta log) gives the rows of the data-driven one, for
    every run date and window size."""
    subs = history.tables.read("subscription_history")

    def every_case(**known: Any):
        frames = [
            subscription_status(subs, day, window_runs=window, **known).withColumn(
                "_case", F.lit(f"{day}/{window}")
            )
            for day in DATES
            for window in (1, 2, WINDOW)
        ]
        out = frames[0]
        for frame in frames[1:]:
            out = out.unionByName(frame)
        return out

    assert_df_equality(every_case(), every_case(run_dates=DATES), ignore_row_order=True)
