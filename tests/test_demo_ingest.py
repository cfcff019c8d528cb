"""The generator's demo ingests cleanly into every input table with its contract (issue: foundation)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import deltalake
import pytest

from pulsar_model import contracts
from pulsar_model.config import PulsarConfig
from pulsar_model.delta_io import DeltaTables
from pulsar_model.delta_io._schema import delta_json_to_spark
from pulsar_model.demo import DemoSpec, generate_demo
from pulsar_model.ingest.pipeline import INPUT_TABLES, ingest_export

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
    result = ingest_export(spark, tables, str(out), pulsar=PulsarConfig())
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
    from pulsar_model.backlog_stage import run_backlog_stage

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
    """The replayed backlogSize (SPEC §2.3) equals what each cluster's stats reported, per its version."""
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
