"""The nightly compaction stage end to end on a small generated demo (issue 6, items 3-4; docs §5).

One module-scoped run: generate_demo -> ingest_export -> run_compaction_stage with the broker defaults, then
again with a configured broker threshold of 1 byte (the rerun must replace the partition). Two clusters on
two versions (4.1.3: current compactor without key-less messages; 3.0.7: current compactor, PIP-318
back-port default retain=true), each with one ``compaction`` topic that the simulated broker compacted
(or tried to) mid-history. Results are checked against the demo's ``_ground_truth/``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pulsar_model.compaction import CompactionThresholds
from pulsar_model.demo import DemoSpec, generate_demo
from pulsar_model.ingest.pipeline import ingest_export
from pulsar_model.pipeline.stages.compaction import OUTPUT_TABLES, run_compaction_stage
from pulsar_model.tables import contracts
from pulsar_model.tables.delta_io import DeltaTables

#: Demo end to end (generate, ingest, stage runs): minutes on 2 cores, run by `make test-long`, not CI.
pytestmark = pytest.mark.long

VERSIONS = {"us-east": "4.1.3", "us-west": "3.0.7"}
SMALL = dataclasses.replace(
    DemoSpec(),
    clusters=("us-east", "us-west"),
    pulsar_versions=VERSIONS,
    namespaces=("acme/orders", "public/default"),
    topics_per_namespace=2,
    replicated_topics=1,
    partitions=2,
    replicated_partitions=2,
    messages_per_topic=(20, 60),
)
DEFAULT_VERSION = "4.1.3"
TRIGGER = CompactionThresholds(broker_bytes=1)


def _rows(tables: DeltaTables, table: str) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in tables.read(table).collect()]


def _truth(root: Path, name: str) -> list[dict[str, Any]]:
    with (root / "_ground_truth" / f"{name}.jsonl").open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def _pos(text: str) -> tuple[int, int]:
    ledger, entry = text.split(":")
    return int(ledger), int(entry)


@pytest.fixture(scope="module")
def stage_run(spark, tmp_path_factory):
    out = tmp_path_factory.mktemp("compaction-demo")
    generate_demo(out, SMALL, overwrite=True)
    tables = DeltaTables(spark, str(tmp_path_factory.mktemp("compaction-wh")))
    day = ingest_export(spark, tables, str(out)).export_date
    rows1, versions1 = run_compaction_stage(tables, day, DEFAULT_VERSION)
    first = {name: _rows(tables, name) for name in OUTPUT_TABLES}
    rows2, versions2 = run_compaction_stage(tables, day, DEFAULT_VERSION, thresholds=TRIGGER)
    second = {name: _rows(tables, name) for name in OUTPUT_TABLES}
    return SimpleNamespace(
        tables=tables,
        managed=_rows(tables, "managed_ledgers"),
        rows1=rows1,
        rows2=rows2,
        versions1=versions1,
        versions2=versions2,
        first=first,
        second=second,
        topics=_truth(out, "topics"),
        cursors=_truth(out, "cursors"),
    )


def test_run_compaction_stage_tables_match_contracts(stage_run):
    tables = stage_run.tables
    for table in OUTPUT_TABLES:
        contracts.check_schema(tables.read(table), table, check_nullability=False)
        assert not contracts.schema_differences(tables.schema(table), table), table
        assert tables.partition_columns(table) == ("export_date",)
        c = contracts.contract(table)
        required = [col.name for col in c.columns if not col.nullable]
        for run in (stage_run.first, stage_run.second):
            assert run[table], table
            nulls = {name for r in run[table] for name in required if r[name] is None}
            assert not nulls, (table, nulls)


def test_run_compaction_stage_rerun_replaces_the_partition(stage_run):
    """Idempotent per date: same rows, one new table version each, no duplicate keys."""
    assert stage_run.rows1 == stage_run.rows2
    assert stage_run.rows1 == {name: len(stage_run.first[name]) for name in OUTPUT_TABLES}
    for name in OUTPUT_TABLES:
        assert stage_run.versions2[name] == stage_run.versions1[name] + 1
        key = contracts.contract(name).key
        keys = [tuple(str(r[k]) for k in key) for r in stage_run.second[name]]
        assert len(keys) == len(set(keys)), name
    for name in ("compaction_horizons", "compaction_ledger"):
        assert sorted(map(str, stage_run.first[name])) == sorted(map(str, stage_run.second[name])), name
    trigger = ("threshold_bytes", "threshold_source", "trigger_enabled", "would_trigger")

    def counts(run: dict[str, list[dict[str, Any]]]) -> list[str]:
        return sorted(
            str({k: v for k, v in r.items() if k not in trigger}) for r in run["compaction_summary"]
        )

    assert counts(stage_run.first) == counts(stage_run.second)


def test_run_compaction_stage_one_summary_row_per_topic_with_its_version(stage_run):
    topics = {(m["cluster"], m["topic"]): m for m in stage_run.managed}
    summary = stage_run.first["compaction_summary"]
    assert {(r["cluster"], r["topic"]) for r in summary} == set(topics) and len(summary) == len(topics)
    for r in summary:
        m = topics[(r["cluster"], r["topic"])]
        assert (r["export_id"], r["export_date"]) == (m["export_id"], m["export_date"])
        assert r["pulsar_version"] == VERSIONS[r["cluster"]]


def test_run_compaction_stage_compacted_ledger_matches_ground_truth(stage_run):
    """The demo's preview compacts every stored entry from the topic start (docs §5.4-5.5, the
    simulator's compactor); the stage starts after the __compaction mark-delete, so its survivors are the
    preview's survivors after that position, and its horizon is the preview's (last entry <= LAC)."""
    md = {
        (c["cluster"], c["topic"]): _pos(c["mark_delete_position"])
        for c in stage_run.cursors
        if c["cursor"] == "__compaction"
    }
    checked = 0
    for doc in stage_run.topics:
        if "compaction" not in doc:
            continue
        key = (doc["cluster"], doc["topic"])
        start = md[key]
        expected = sorted(
            (lid, eid, bidx, k)
            for lid, eid, bidx, k in doc["compaction"]["preview_retained_messages"]
            if (lid, eid) > start
        )
        got = sorted(
            (r["ledger_id"], r["entry_id"], r["batch_index"], r["key"])
            for r in stage_run.first["compaction_ledger"]
            if (r["cluster"], r["topic"]) == key and not r["compacted_out"]
        )
        assert got == expected, key
        (hz,) = [r for r in stage_run.first["compaction_horizons"] if (r["cluster"], r["topic"]) == key]
        assert (hz["horizon"]["ledger_id"], hz["horizon"]["entry_id"]) == _pos(
            doc["compaction"]["preview_horizon"]
        )
        (summary,) = [r for r in stage_run.first["compaction_summary"] if (r["cluster"], r["topic"]) == key]
        assert (summary["last_horizon"]["ledger_id"], summary["last_horizon"]["entry_id"]) == start
        assert summary["messages_after"] == len(expected)
        assert summary["null_key_kept"] == sum(1 for *_, k in expected if k is None)
        checked += 1
    assert checked == 2
    # 4.1.3 drops key-less messages, 3.0.7 keeps them (retain default true before 3.2.0)
    kept = {
        r["cluster"]: r["null_key_kept"]
        for r in stage_run.first["compaction_summary"]
        if r["topic"].endswith("/orders")
    }
    assert kept["us-east"] == 0


def test_run_compaction_stage_trigger_estimates_match_ground_truth(stage_run):
    """docs §5.3 estimate per topic: the __compaction cursor's estimated size since its mark-delete,
    else the total size when no durable subscription exists, else the topic backlogSize (§2.3); with a
    1-byte broker threshold every topic whose estimate is > 1 triggers. Dirty bytes after the last
    horizon = the exact bytes of the __compaction cursor's backlog (everything when never compacted)."""
    cursors: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for c in stage_run.cursors:
        cursors.setdefault((c["cluster"], c["topic"]), []).append(c)
    truth = {(d["cluster"], d["topic"]): d for d in stage_run.topics}
    for r in stage_run.second["compaction_summary"]:
        key = (r["cluster"], r["topic"])
        own = cursors.get(key, [])
        comp = [c for c in own if c["cursor"] == "__compaction"]
        durable_sub = any(c["kind"] == "subscription" and c["durable"] for c in own)
        if comp:
            expected = (comp[0]["estimated_backlog_size_bytes"], "compaction_cursor")
            assert r["dirty_bytes"] == comp[0]["backlog_bytes"], key
        elif not durable_sub:
            expected = (truth[key]["total_size_bytes"], "total_size")
            assert r["dirty_bytes"] == truth[key]["total_size_bytes"], key
        else:
            expected = (truth[key]["estimated_backlog_size_bytes"], "backlog_size")
            assert r["dirty_bytes"] == truth[key]["total_size_bytes"], key
        assert (r["backlog_estimate_bytes"], r["estimate_source"]) == expected, key
        assert (r["threshold_bytes"], r["threshold_source"], r["trigger_enabled"]) == (1, "broker", True)
        assert r["would_trigger"] == (expected[0] > 1), key
    # broker default 0: automatic compaction is off everywhere (docs §5.2)
    assert {(r["trigger_enabled"], r["would_trigger"]) for r in stage_run.first["compaction_summary"]} == {
        (False, False)
    }


def test_run_compaction_stage_without_adaptive_execution_gives_the_same_tables(stage_run):
    """With AQE off (the cluster test's settings) the horizons' join of the topic list with the ranges of
    the checkpointed compaction rows was a self-join Spark could not de-duplicate ("Failure when resolving
    conflicting references in Join"); the stage must run and write the same rows."""
    spark = stage_run.tables.spark
    saved = spark.conf.get("spark.sql.adaptive.enabled")
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        rows, _ = run_compaction_stage(
            stage_run.tables,
            stage_run.first["compaction_summary"][0]["export_date"],
            DEFAULT_VERSION,
            thresholds=TRIGGER,
        )
    finally:
        spark.conf.set("spark.sql.adaptive.enabled", saved)
    assert rows == stage_run.rows2
    again = {name: _rows(stage_run.tables, name) for name in OUTPUT_TABLES}
    for name in OUTPUT_TABLES:
        key = sorted(map(repr, again[name])) == sorted(map(repr, stage_run.second[name]))
        assert key, name
