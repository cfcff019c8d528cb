"""The generator's demo ingests cleanly into every input table with its contract (issue: foundation)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import deltalake
import pytest

from pulsar_model.demo import DemoSpec, generate_demo
from pulsar_model.ingest.pipeline import INPUT_TABLES, ingest_export
from pulsar_model.tables import contracts
from pulsar_model.tables.delta_io import DeltaTables
from pulsar_model.tables.delta_io._schema import delta_json_to_spark

#: What the stages store is under test, not how Spark runs it (tests/spark_conf.py).
pytestmark = pytest.mark.usefixtures("fast_spark_conf")

SMALL = dataclasses.replace(
    DemoSpec(),
    topics_per_namespace=2,
    replicated_topics=1,
    partitions=2,
    replicated_partitions=2,
    messages_per_topic=(20, 60),
)


@pytest.fixture(scope="module")
def demo_tables(spark, tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    summary = generate_demo(out, SMALL, overwrite=True)
    warehouse = tmp_path_factory.mktemp("wh")
    tables = DeltaTables(spark, str(warehouse))
    result = ingest_export(spark, tables, str(out))
    return summary, result, tables, warehouse, out


def test_demo_ingests_without_quarantine(demo_tables):
    summary, result, _, _, _ = demo_tables
    assert sum(result.rows_quarantined.values()) == 0, result.rows_quarantined
    assert result.rows_out["entries"] == summary.entries
    assert result.rows_out["markers"] == summary.marker_entries
    # one messages row per data message (batch slot) plus one per marker entry
    assert result.rows_out["messages"] == summary.messages + summary.marker_entries
    for table in INPUT_TABLES:
        if table != "quarantine":
            assert result.rows_out[table] > 0, table


def test_demo_tables_match_contracts(demo_tables):
    _, _, tables, warehouse, _ = demo_tables
    for table in INPUT_TABLES:
        contracts.check_schema(tables.read(table), table, check_nullability=False)
        logged = delta_json_to_spark(deltalake.DeltaTable(str(Path(warehouse) / table)).schema().to_json())
        assert not contracts.schema_differences(logged, table), table


def test_demo_non_nullable_columns_hold_no_nulls(demo_tables):
    from pyspark.sql import functions as F

    _, _, tables, _, _ = demo_tables
    for table in INPUT_TABLES:
        required = [c.name for c in contracts.contract(table).columns if not c.nullable]
        df = tables.read(table)
        nulls = df.select([F.sum(F.col(c).isNull().cast("int")).alias(c) for c in required]).collect()[0]
        assert all((nulls[c] or 0) == 0 for c in required), (table, nulls.asDict())


def test_demo_cursors_match_ground_truth(demo_tables):
    """Cursor IDM + stats match the generator's own bookkeeping (cursors.jsonl ground truth)."""
    _, _, tables, _, out = demo_tables
    truth = {}
    for line in (Path(out) / "_ground_truth" / "cursors.jsonl").read_text().splitlines():
        row = json.loads(line)
        truth[(row["cluster"], row["topic"], row["cursor"])] = row
    cursors = {(r.cluster, r.topic, r.cursor_name): r for r in tables.read("cursors").collect()}
    assert set(truth) <= set(cursors)
    for key, row in truth.items():
        cursor = cursors[key]
        md = cursor.mark_delete_position
        assert f"{md.ledger_id}:{md.entry_id}" == row["mark_delete_position"], key
        assert (cursor.cursor_kind, cursor.is_durable, cursor.cursor_order) == (
            row["kind"],
            row["durable"],
            row["cursor_order"],
        ), key
        assert cursor.stats_msg_backlog in (None, row["stats_msg_backlog"]), key


@pytest.fixture(scope="module")
def backlog_tables(demo_tables):
    from pulsar_model import DEFAULT_PULSAR_VERSION
    from pulsar_model.pipeline.stages.backlog import run_backlog_stage

    _, result, tables, _, out = demo_tables
    rows, versions = run_backlog_stage(tables, result.export_date, DEFAULT_PULSAR_VERSION)
    return rows, versions, tables, out


def _truth(out, name):
    return [json.loads(line) for line in (Path(out) / "_ground_truth" / name).read_text().splitlines()]


def test_backlog_stage_matches_ground_truth_per_cursor(backlog_tables):
    """Precise backlog and the §2.4 estimate of every cursor equal the simulator's exact bookkeeping."""
    rows, _, tables, out = backlog_tables
    got = {(r.cluster, r.topic, r.cursor_name): r for r in tables.read("cursor_backlog").collect()}
    truth = _truth(out, "cursors.jsonl")
    assert rows["cursor_backlog"] == len(got) >= len(truth) > 0
    for t in truth:
        r = got[(t["cluster"], t["topic"], t["cursor"])]
        assert r.error is None, (t, r.error)
        assert r.backlog_entries == t["backlog_entries"], (t["cluster"], t["topic"], t["cursor"])
        assert r.estimated_backlog_size_bytes == t["estimated_backlog_size_bytes"], t["cursor"]
        assert r.counter_minus_precise in (None, 0)


def test_backlog_stage_topic_estimate_equals_exported_stats(backlog_tables):
    """The replayed backlogSize (docs §2.3) equals what each cluster's stats reported, per its version."""
    rows, _, tables, out = backlog_tables
    got = {(r.cluster, r.topic): r for r in tables.read("topic_backlog").collect()}
    truth = _truth(out, "topics.jsonl")
    assert rows["topic_backlog"] == len(got) == len(truth)
    for t in truth:
        r = got[(t["cluster"], t["topic"])]
        assert r.estimated_backlog_size_bytes == t["estimated_backlog_size_bytes"], (t["cluster"], t["topic"])
        assert r.slowest_cursor_name == t["slowest_cursor"], (t["cluster"], t["topic"])
        assert r.estimate_minus_stats_bytes == 0, (t["cluster"], t["topic"])
    assert {r.pulsar_version for r in got.values()} == {"4.1.3", "3.0.7", "4.0.8"}


def test_backlog_stage_exact_messages_and_bytes_match_ground_truth(backlog_tables):
    """Exact backlog from the exported entries equals the simulator's count of unacked messages and bytes,
    the non-precise counter equals the broker's msgBacklog, and the estimate's error is estimate - exact."""
    _, _, tables, out = backlog_tables
    got = {(r.cluster, r.topic, r.cursor_name): r for r in tables.read("cursor_backlog").collect()}
    truth = _truth(out, "cursors.jsonl")
    kinds_seen = set()
    for t in truth:
        r = got[(t["cluster"], t["topic"], t["cursor"])]
        key = (t["cluster"], t["topic"], t["cursor"])
        assert r.exported_entries_complete is True, key
        assert r.backlog_entries_exported == r.backlog_entries == t["backlog_entries"], key
        assert r.backlog_messages == t["backlog_messages"], key
        assert r.backlog_bytes == t["backlog_bytes"], key
        split = [getattr(r, f"backlog_{k}_messages") for k in ("data", "marker", "aborted", "uncommitted")]
        assert sum(split) == r.backlog_messages, key
        # the simulator's "data" counts transactional data whatever its outcome
        assert split[0] + split[2] + split[3] == t["backlog_data_messages"], key
        kinds_seen |= {
            k for k, v in zip(("data", "marker", "aborted", "uncommitted"), split, strict=True) if v
        }
        assert r.non_precise_backlog_entries == t["stats_msg_backlog"], key
        assert r.estimate_minus_exact_bytes == r.estimated_backlog_size_bytes - r.backlog_bytes, key
        if r.backlog_entries:
            assert r.oldest_unacked_publish_time_ms is not None and r.oldest_unacked_age_seconds >= 0, key
        else:
            assert r.oldest_unacked_position is None, key
    assert {"data", "marker"} <= kinds_seen, kinds_seen


def test_backlog_stage_pinning_agrees_with_topic_backlog(backlog_tables):
    """topic_pinning names the same slowest durable cursor as the §2.3 replay, and pins only listed bytes."""
    rows, _, tables, out = backlog_tables
    pin = {(r.cluster, r.topic): r for r in tables.read("topic_pinning").collect()}
    topics = {(r.cluster, r.topic): r for r in tables.read("managed_ledgers").collect()}
    assert rows["topic_pinning"] == len(pin) == len(topics)
    for t in _truth(out, "topics.jsonl"):
        p = pin[(t["cluster"], t["topic"])]
        assert p.slowest_cursor_name == t["slowest_cursor"], (t["cluster"], t["topic"])
        total = topics[(t["cluster"], t["topic"])].total_size_bytes
        assert 0 <= p.pinned_bytes + p.trimmable_now_bytes <= total
        if p.slowest_cursor_tie:
            assert p.pinned_ledgers == 0
    assert rows["unmoved_cursors"] == 0  # one export: nothing can have stood still across exports


@pytest.fixture(scope="module")
def plans_tables(backlog_tables, demo_tables, tmp_path_factory):
    from pulsar_model import DEFAULT_PULSAR_VERSION
    from pulsar_model.pipeline.stages.plans import run_plans_stage

    _, result, tables, _, out = demo_tables
    bad = tmp_path_factory.mktemp("req") / "bad.jsonl"
    bad.write_text('{"request_id": "x", "action": "teleport"}\nnot json\n')
    first = run_plans_stage(
        tables,
        result.export_date,
        DEFAULT_PULSAR_VERSION,
        run_id="r1",
        request_files=[str(bad)],
        export_dir=str(out),
    )
    second = run_plans_stage(
        tables,
        result.export_date,
        DEFAULT_PULSAR_VERSION,
        run_id="r2",
        request_files=[str(bad)],
        export_dir=str(out),
    )
    return first, second, tables, out


@pytest.mark.long  # the plans stage twice on the demo: ~8 min on 2 cores, `make test-long`
def test_plans_stage_answers_every_demo_request(plans_tables):
    (rows, _, counts), (rows2, _, _), tables, out = plans_tables
    requests = json.loads((Path(out) / "_requests" / "plan_requests.json").read_text())
    n_reader = sum(r["action"] == "reader_start" for r in requests)
    assert rows == rows2 == {"skip_plans": len(requests) - n_reader, "reader_starts": n_reader}
    assert counts == {"plan_requests_in": len(requests) + 2, "plan_requests_quarantined": 2}
    plans = tables.read("skip_plans").collect()
    starts = tables.read("reader_starts").collect()
    assert [p.request_id for p in plans if p.error] == []
    assert [s.request_id for s in starts if s.error] == []
    quarantined = tables.read("quarantine").where("source = 'plan-requests'").collect()
    assert sorted(q.reason_code for q in quarantined) == [
        "malformed_json",
        "unknown_action",
    ]  # rerun: no dups


@pytest.mark.long  # the plans stage twice on the demo: ~8 min on 2 cores, `make test-long`
def test_plans_stage_clear_and_skip_all_match_the_exact_backlog(plans_tables):
    """clear_backlog and skip-everything land on LAC and skip exactly the cursor's exact backlog; reset to
    earliest redelivers every entry that was acked before (entries after the first position - backlog)."""
    _, _, tables, out = plans_tables
    truth = {(t["cluster"], t["topic"], t["cursor"]): t for t in _truth(out, "cursors.jsonl")}
    lac = {(r.cluster, r.topic): r.last_confirmed_entry for r in tables.read("managed_ledgers").collect()}
    entries = {}
    for r in tables.read("entries").collect():
        entries[(r.cluster, r.topic)] = entries.get((r.cluster, r.topic), 0) + 1
    checked = 0
    for p in tables.read("skip_plans").collect():
        t = truth[(p.cluster, p.topic, p.cursor_name)]
        if p.request_id.endswith(("-clear", "-skip-all")):
            assert p.mark_delete_position == lac[(p.cluster, p.topic)], p.request_id
            assert p.skipped_entries == t["backlog_entries"], p.request_id
            assert p.skipped_messages == t["backlog_messages"], p.request_id
            assert p.skipped_bytes == t["backlog_bytes"], p.request_id
            assert p.individually_deleted == [], p.request_id
            checked += 1
        if p.request_id.endswith("-reset-earliest"):
            exported = entries.get((p.cluster, p.topic), 0)  # an empty topic has no entries rows
            assert p.redelivered_entries == exported - t["backlog_entries"], p.request_id
            assert p.individually_deleted == []
        if p.request_id.endswith("-skip-include") and t["backlog_entries"] >= 3:
            assert p.mark_delete_position > p.mark_delete_position_before, p.request_id
    assert checked >= 4


@pytest.mark.long  # the plans stage twice on the demo: ~8 min on 2 cores, `make test-long`
def test_plans_stage_reader_starts_earliest_and_latest(plans_tables):
    """docs §7.4 on the demo: latest -> md = LAC; earliest -> md = (first ledger, -1)."""
    _, _, tables, _ = plans_tables
    lac = {(r.cluster, r.topic): r.last_confirmed_entry for r in tables.read("managed_ledgers").collect()}
    first = {}
    for r in tables.read("ledgers").collect():
        key = (r.cluster, r.topic)
        first[key] = min(first.get(key, r.ledger_id), r.ledger_id)
    has_entries = {(r.cluster, r.topic) for r in tables.read("entries").select("cluster", "topic").collect()}
    for s in tables.read("reader_starts").collect():
        key = (s.cluster, s.topic)
        if s.request_id.endswith("-reader-latest"):
            assert s.mark_delete_position == lac[key], s.request_id
            assert s.first_delivered is None, s.request_id
        if s.request_id.endswith("-reader-earliest"):
            assert (s.mark_delete_position.ledger_id, s.mark_delete_position.entry_id) == (first[key], -1)
            # an empty topic delivers nothing from earliest either
            assert (s.first_delivered is not None) == (key in has_entries), s.request_id
