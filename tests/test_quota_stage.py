"""The nightly quota stage end to end on a small generated demo (issue 4, item 5; docs §3).

One module-scoped run: generate_demo -> ingest_export -> run_backlog_stage -> run_quota_stage, then a topic
policy with a tiny size limit is added to the run date's backlog_quotas and the stage runs again (the rerun
must replace the partition, and the tiny limit exercises the §3.6 size eviction end to end).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from types import SimpleNamespace
from typing import Any

import pytest

from pulsar_model.demo import DemoSpec, generate_demo
from pulsar_model.ingest.pipeline import ingest_export
from pulsar_model.pipeline.stages.backlog import run_backlog_stage
from pulsar_model.pipeline.stages.quota import OUTPUT_TABLES, run_quota_stage
from pulsar_model.quota.policy import (
    POLICY_CONSUMER_BACKLOG_EVICTION,
    QUOTA_TYPE_SIZE,
    QUOTA_TYPE_TIME,
)
from pulsar_model.tables import contracts
from pulsar_model.tables.delta_io import DeltaTables

#: What the stage stores is under test, not how Spark runs it (tests/spark_conf.py).
pytestmark = pytest.mark.usefixtures("fast_spark_conf")

# Two clusters on one 3.x broker version (each version is a pass of every transform; one keeps the file
# fast): us-east runs the non-precise time check, us-west the precise one; 3.x stats carry
# backlogQuotaLimitSize/Time, 3.x stats-internal the ledger close times. Two namespaces + the replicated one.
VERSION = "3.0.7"
SMALL = dataclasses.replace(
    DemoSpec(),
    clusters=("us-east", "us-west"),
    pulsar_versions={"us-east": VERSION, "us-west": VERSION},
    namespaces=("acme/orders", "public/default"),
    topics_per_namespace=2,
    replicated_topics=1,
    partitions=2,
    replicated_partitions=2,
    messages_per_topic=(20, 60),
)
DEFAULT_VERSION = "4.1.3"
STATUS_KEY = ("cluster", "topic", "quota_type")
EVICTION_KEY = ("cluster", "topic", "quota_type", "cursor_name")


def _rows(tables: DeltaTables, table: str) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in tables.read(table).collect()]


def _pos(p: dict[str, int] | None) -> tuple[int, int] | None:
    return None if p is None else (p["ledger_id"], p["entry_id"])


def _tiny_limit_override(spark, status: list[dict[str, Any]], managed: list[dict[str, Any]], day: dt.date):
    """A topic-level destination_storage quota at half the largest enabled topic's backlog, as eviction."""
    candidates = [
        r
        for r in status
        if r["quota_type"] == QUOTA_TYPE_SIZE
        and r["limit_size_bytes"] >= 0
        and not r["is_system_topic"]
        and (r["estimated_backlog_size_bytes"] or 0) >= 2000
    ]
    target = max(candidates, key=lambda r: (r["estimated_backlog_size_bytes"], r["cluster"], r["topic"]))
    export_id = next(
        m["export_id"] for m in managed if (m["cluster"], m["topic"]) == (target["cluster"], target["topic"])
    )
    row = {
        "cluster": target["cluster"],
        "topic": target["topic"],
        "export_id": export_id,
        "export_date": day,
        "level": "topic",
        "scope": target["topic"],
        "quota_type": QUOTA_TYPE_SIZE,
        "limit_size_bytes": target["estimated_backlog_size_bytes"] // 2,
        "limit_time_seconds": -1,
        "policy": POLICY_CONSUMER_BACKLOG_EVICTION,
        "source_shape": "limit_size_time",
        "source_file": "tests/tiny-limit.json",
    }
    schema = contracts.spark_schema("backlog_quotas")
    df = spark.createDataFrame([tuple(row.get(f.name) for f in schema.fields)], schema)
    return (target["cluster"], target["topic"]), row["limit_size_bytes"], df


@pytest.fixture(scope="module")
def quota_run(spark, tmp_path_factory):
    out = tmp_path_factory.mktemp("quota-demo")
    generate_demo(out, SMALL, overwrite=True)
    tables = DeltaTables(spark, str(tmp_path_factory.mktemp("quota-wh")))
    day = ingest_export(spark, tables, str(out)).export_date
    run_backlog_stage(tables, day, DEFAULT_VERSION)
    rows1, versions1 = run_quota_stage(tables, day, DEFAULT_VERSION)
    first = {name: _rows(tables, name) for name in OUTPUT_TABLES}
    managed = _rows(tables, "managed_ledgers")
    key, limit, override = _tiny_limit_override(spark, first["quota_status"], managed, day)
    tables.append("backlog_quotas", override)
    rows2, versions2 = run_quota_stage(tables, day, DEFAULT_VERSION)
    second = {name: _rows(tables, name) for name in OUTPUT_TABLES}
    return SimpleNamespace(
        tables=tables,
        day=day,
        managed=managed,
        cursor_backlog=_rows(tables, "cursor_backlog"),
        rows1=rows1,
        rows2=rows2,
        versions1=versions1,
        versions2=versions2,
        first=first,
        second=second,
        tiny_key=key,
        tiny_limit=limit,
    )


def test_run_quota_stage_tables_match_contracts(quota_run):
    tables = quota_run.tables
    for table in OUTPUT_TABLES:
        contracts.check_schema(tables.read(table), table, check_nullability=False)
        assert not contracts.schema_differences(tables.schema(table), table), table
        c = contracts.contract(table)
        assert all(col.comment for col in c.columns), table
        assert tables.partition_columns(table) == ("export_date",)
        required = [col.name for col in c.columns if not col.nullable]
        for run in (quota_run.first, quota_run.second):
            nulls = {name for r in run[table] for name in required if r[name] is None}
            assert not nulls, (table, nulls)


def test_run_quota_stage_one_row_per_topic_and_quota_type(quota_run):
    topics = {(m["cluster"], m["topic"]): m for m in quota_run.managed}
    for run in (quota_run.first, quota_run.second):
        status = run["quota_status"]
        assert len(status) == 2 * len(topics)
        types: dict[tuple[str, str], set[str]] = {}
        for r in status:
            types.setdefault((r["cluster"], r["topic"]), set()).add(r["quota_type"])
            m = topics[(r["cluster"], r["topic"])]
            assert (r["export_id"], r["export_date"]) == (m["export_id"], m["export_date"])
            assert r["pulsar_version"] == (m["pulsar_version"] or DEFAULT_VERSION)
        assert types == {k: {QUOTA_TYPE_SIZE, QUOTA_TYPE_TIME} for k in topics}
        outcomes = {(r["cluster"], r["topic"]) for r in run["quota_producer_outcomes"]}
        assert len(run["quota_producer_outcomes"]) == len(topics) and outcomes == set(topics)
    assert {r["pulsar_version"] for r in quota_run.first["quota_status"]} == {VERSION}


def test_run_quota_stage_limits_agree_with_exported_stats(quota_run):
    """The resolved limit equals the broker's own backlogQuotaLimitSize / backlogQuotaLimitTime (3.x+)."""
    stats = {
        (m["cluster"], m["topic"]): (
            m["stats_backlog_quota_limit_size_bytes"],
            m["stats_backlog_quota_limit_time_seconds"],
        )
        for m in quota_run.managed
    }
    compared = 0
    for r in quota_run.first["quota_status"]:
        size, time = stats[(r["cluster"], r["topic"])]
        exported = size if r["quota_type"] == QUOTA_TYPE_SIZE else time
        resolved = r["limit_size_bytes"] if r["quota_type"] == QUOTA_TYPE_SIZE else r["limit_time_seconds"]
        if exported is not None:
            compared += 1
            assert resolved == exported == r["stats_limit"], r
            assert r["stats_limit_matches"] is True, r
    assert compared == len(quota_run.first["quota_status"])  # both clusters are 3.x+: every row compared
    levels = {r["source_level"] for r in quota_run.first["quota_status"]}
    assert {"namespace", "broker"} <= levels, levels


def test_run_quota_stage_evictions_never_move_cursors_backwards(quota_run):
    for run in (quota_run.first, quota_run.second):
        evictions = run["quota_evictions"]
        assert evictions
        for r in evictions:
            key = tuple(r[k] for k in EVICTION_KEY)
            before, after = _pos(r["mark_delete_position_before"]), _pos(r["mark_delete_position_after"])
            assert after is not None and after >= before, key
            if after == before:
                assert r["skipped_entries"] == r["lost_entries"] == 0, key
            b, a = r["estimated_backlog_size_bytes_before"], r["estimated_backlog_size_bytes_after"]
            if b is not None:
                assert 0 <= a <= b, key
            assert r["skipped_entries"] >= 0 and r["lost_entries"] >= 0 and r["lost_bytes"] >= 0, key
            if r["quota_type"] == QUOTA_TYPE_SIZE:
                assert r["limit_size_bytes"] >= 0 and r["precise"] is None, key
            else:
                assert r["limit_time_seconds"] > 0 and r["precise"] is not None, key


def test_run_quota_stage_trace_table_holds_each_step_once(quota_run):
    """quota_eviction_trace: one row per loop step (never repeated per cursor row), keyed by iteration; a
    cursor's steps chain from its md before to its md after and add up to its skipped entries; the topic's
    steps number 1..iteration_count (no trace is truncated on the demo)."""
    trace_table = "quota_eviction_trace"
    for run in (quota_run.first, quota_run.second):
        trace = run[trace_table]
        by_topic: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        for t in trace:
            by_topic.setdefault((t["cluster"], t["topic"], t["quota_type"]), []).append(t)
        evictions: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        for r in run["quota_evictions"]:
            evictions.setdefault((r["cluster"], r["topic"], r["quota_type"]), []).append(r)
        assert set(by_topic) <= set(evictions)
        looped = 0
        for key, rows in evictions.items():
            steps = sorted(by_topic.get(key, []), key=lambda t: t["iteration"])
            counts = {r["iteration_count"] for r in rows}
            assert len(counts) == 1 and not any(r["trace_truncated"] for r in rows), key
            assert [t["iteration"] for t in steps] == list(range(1, counts.pop() + 1)), key
            assert sum(r["trace_steps"] for r in rows) == len(steps), key
            looped += bool(steps)
            for r in rows:
                own = [t for t in steps if t["cursor_name"] == r["cursor_name"]]
                assert len(own) == r["trace_steps"], (key, r["cursor_name"])
                if not own:
                    continue
                assert _pos(own[0]["mark_delete_before"]) == _pos(r["mark_delete_position_before"]), key
                assert _pos(own[-1]["mark_delete_after"]) == _pos(r["mark_delete_position_after"]), key
                assert sum(t["skipped_entries"] for t in own) == r["skipped_entries"], key
                for t in own:
                    assert (t["export_id"], t["export_date"], t["pulsar_version"]) == (
                        r["export_id"],
                        r["export_date"],
                        r["pulsar_version"],
                    ), key
                    if key[2] == QUOTA_TYPE_SIZE:
                        assert t["to_skip"] > 0 and t["ledger_id"] is None and t["action"] is None, t
                    else:
                        assert t["action"] in {"expired_ledger", "deleted_ledger"} and t["to_skip"] is None, t
                        assert r["precise"] is False, key
        assert looped  # the non-precise time loop moves cursors on the demo
    tiny = (*quota_run.tiny_key, QUOTA_TYPE_SIZE)
    assert any((t["cluster"], t["topic"], t["quota_type"]) == tiny for t in quota_run.second[trace_table])
    keys = [
        tuple(t[k] for k in ("cluster", "topic", "export_id", "quota_type", "iteration"))
        for t in quota_run.second["quota_eviction_trace"]
    ]
    assert len(keys) == len(set(keys)) == quota_run.rows2["quota_eviction_trace"]


def test_run_quota_stage_evictions_cover_every_enabled_limit(quota_run):
    """Every topic with an enabled limit and cursors gets eviction rows for that type, whatever its policy;
    handled_now = eviction policy and the periodic check handles that type."""
    cursors = {}
    for c in quota_run.cursor_backlog:
        cursors.setdefault((c["cluster"], c["topic"]), set()).add(c["cursor_name"])
    for run in (quota_run.first, quota_run.second):
        status = {tuple(r[k] for k in STATUS_KEY): r for r in run["quota_status"]}
        got: dict[tuple[str, str, str], set[str]] = {}
        for r in run["quota_evictions"]:
            got.setdefault((r["cluster"], r["topic"], r["quota_type"]), set()).add(r["cursor_name"])
            s = status[(r["cluster"], r["topic"], r["quota_type"])]
            assert r["configured_policy"] == s["policy"]
            if s["policy"] != POLICY_CONSUMER_BACKLOG_EVICTION:
                assert r["handled_now"] is False
            else:
                assert r["handled_now"] is s["is_handled"]  # null stays null: the check is undecidable
            if r["quota_type"] == QUOTA_TYPE_TIME:
                assert r["precise"] == s["precise_time_check"]
        enabled = {
            k
            for k, s in status.items()
            if (k[2] == QUOTA_TYPE_SIZE and s["limit_size_bytes"] >= 0)
            or (k[2] == QUOTA_TYPE_TIME and s["limit_time_seconds"] > 0)
        }
        assert set(got) == {k for k in enabled if cursors.get(k[:2])}
        assert all(got[k] == cursors[k[:2]] for k in got)
    policies = {r["configured_policy"] for r in quota_run.first["quota_evictions"]}
    assert POLICY_CONSUMER_BACKLOG_EVICTION in policies and len(policies) > 1, policies


def test_run_quota_stage_time_checks_and_time_evictions_exercised(quota_run):
    """The demo's 4 h / 1 h / 2 h time quotas are exceeded on both clusters - us-west by the precise check
    (publish time of the oldest unacked entry), us-east by the non-precise one (ledger close time) - and
    both what-if time evictions acknowledge entries (docs §3.4, §3.7)."""
    status = quota_run.first["quota_status"]
    over = [r for r in status if r["quota_type"] == QUOTA_TYPE_TIME and r["exceeded"]]
    assert {r["time_check_mode"] for r in over} == {"precise", "non_precise"}
    for r in over:
        assert r["backlog_age_seconds"] > r["limit_time_seconds"] and r["percent_of_quota"] > 100, r
        assert r["time_exceeded"] is True and r["reference_time_ms"] is not None, r
        # exact-data view (cursor_backlog): complete, and the true oldest unacked entry is at least as old
        assert r["exact_backlog_complete"] is True and r["exact_exceeded"] is True, r
        # (precise: the same entry; non-precise: a ledger closes after its entries were published)
        assert r["true_oldest_unacked_age_seconds"] >= r["backlog_age_seconds"] - 1e-6, r
    undecided = [r for r in status if r["exceeded"] is None]
    assert all(r["reason"] for r in undecided)
    moved = [
        r
        for r in quota_run.first["quota_evictions"]
        if r["quota_type"] == QUOTA_TYPE_TIME and r["skipped_entries"] > 0
    ]
    assert {r["precise"] for r in moved} == {True, False}
    for r in moved:
        assert r["lost_entries"] >= 1 and r["lost_messages"] >= r["lost_entries"], r
        if r["precise"]:
            assert r["expiry_ttl_seconds"] == int(0.9 * r["limit_time_seconds"]), r
        else:
            assert r["iteration_count"] >= 1 and r["stop_reason"], r


def test_run_quota_stage_tiny_size_limit_evicts(quota_run):
    """A topic policy at half the topic's backlog: the size check fires (§3.4), the broker would evict now,
    the slowest cursors lose entries and the estimate drops (§3.6); producers are left alone (§3.5)."""
    cluster, topic = quota_run.tiny_key
    status = {
        r["quota_type"]: r
        for r in quota_run.second["quota_status"]
        if (r["cluster"], r["topic"]) == (cluster, topic)
    }
    size = status[QUOTA_TYPE_SIZE]
    assert (size["source_level"], size["policy"], size["limit_size_bytes"]) == (
        "topic",
        POLICY_CONSUMER_BACKLOG_EVICTION,
        quota_run.tiny_limit,
    )
    assert size["exceeded"] is True and size["is_handled"] is True and size["handled_type"] == QUOTA_TYPE_SIZE
    assert size["percent_of_quota"] >= 200 - 1e-9
    assert status[QUOTA_TYPE_TIME]["is_handled"] is False  # size first (§3.4)
    rows = [
        r
        for r in quota_run.second["quota_evictions"]
        if (r["cluster"], r["topic"], r["quota_type"]) == (cluster, topic, QUOTA_TYPE_SIZE)
    ]
    assert rows and all(r["handled_now"] is True and r["quota_exceeded_before"] is True for r in rows)
    r0 = rows[0]
    assert r0["estimated_backlog_size_bytes_after"] < r0["estimated_backlog_size_bytes_before"]
    assert r0["target_size_bytes"] == pytest.approx(0.9 * quota_run.tiny_limit, abs=1.0)
    assert r0["iteration_count"] >= 1 and r0["stop_reason"]
    moved = [r for r in rows if r["skipped_entries"] > 0]
    assert moved and all(r["lost_entries"] > 0 and r["lost_bytes"] > 0 for r in moved)
    outcome = next(
        r
        for r in quota_run.second["quota_producer_outcomes"]
        if (r["cluster"], r["topic"]) == (cluster, topic)
    )
    assert outcome["handled_type"] == QUOTA_TYPE_SIZE
    assert outcome["handled_policy"] == POLICY_CONSUMER_BACKLOG_EVICTION
    assert outcome["producers_disconnected"] is False and outcome["new_producer_error_code"] is None
    assert outcome["holding_cursor_name"] == size["slowest_cursor_name"]


def test_run_quota_stage_rerun_replaces_the_partition(quota_run):
    """Same row counts after the rerun (the trace: the tiny limit changes its loops), one commit more per
    table, no duplicate keys, new values visible."""
    trace = "quota_eviction_trace"
    assert {t: n for t, n in quota_run.rows1.items() if t != trace} == {
        t: n for t, n in quota_run.rows2.items() if t != trace
    }
    assert {t: v + 1 for t, v in quota_run.versions1.items()} == quota_run.versions2
    for table, key in (
        ("quota_status", STATUS_KEY),
        ("quota_evictions", EVICTION_KEY),
        ("quota_eviction_trace", ("cluster", "topic", "quota_type", "iteration")),
        ("quota_producer_outcomes", ("cluster", "topic")),
    ):
        rows = quota_run.second[table]
        assert len(rows) == quota_run.rows2[table] == len({tuple(r[k] for k in key) for r in rows}), table
    before = {tuple(r[k] for k in STATUS_KEY): r["limit_size_bytes"] for r in quota_run.first["quota_status"]}
    after = {tuple(r[k] for k in STATUS_KEY): r["limit_size_bytes"] for r in quota_run.second["quota_status"]}
    changed = {k for k in after if after[k] != before[k]}
    assert changed == {(*quota_run.tiny_key, QUOTA_TYPE_SIZE)}


def test_run_quota_stage_lost_columns_recount_the_exported_entries(quota_run):
    """Every eviction row's lost_* are the exported entries in (md before, md after] outside the acked ranges
    before, recounted here in plain Python per (topic, quota type, cursor): the stage adds them after
    materialising the grouped passes, keyed by quota type and cursor (size and time rows of one cursor)."""
    entries: dict[tuple[str, str], list[tuple[tuple[int, int], int, int]]] = {}
    for e in _rows(quota_run.tables, "entries"):
        if e["export_date"] == quota_run.day:
            entries.setdefault((e["cluster"], e["topic"]), []).append(
                (_pos(e["position"]), e["message_count"] or 1, e["entry_size_bytes"] or 0)
            )
    checked = 0
    for run in (quota_run.first, quota_run.second):
        kinds: dict[tuple[str, str, str], set[str]] = {}
        for r in run["quota_evictions"]:
            key = (r["cluster"], r["topic"], r["cursor_name"])
            kinds.setdefault(key, set()).add(r["quota_type"])
            lo, hi = _pos(r["mark_delete_position_before"]), _pos(r["mark_delete_position_after"])
            acked = [(_pos(a["lower"]), _pos(a["upper"])) for a in r["individually_deleted_before"] or []]
            lost = [
                (m, b)
                for p, m, b in entries.get((r["cluster"], r["topic"]), [])
                if lo is not None
                and hi is not None
                and lo < p <= hi
                and not any(a[0] is not None and a[1] is not None and a[0] < p <= a[1] for a in acked)
            ]
            expected = (len(lost), sum(m for m, _ in lost), sum(b for _, b in lost))
            assert (r["lost_entries"], r["lost_messages"], r["lost_bytes"]) == expected, r
            checked += bool(lost)
        assert any(len(k) == 2 for k in kinds.values())  # size and time rows of the same cursor
    assert checked >= 3
