"""Round trip: the demo's clusters served by the fake admin server -> ``export`` -> ``ingest`` gives the
same input tables as ingesting the demo's direct export, except what the REST API cannot carry (listed
in :data:`DIFFERENCES`); and a capped export reaches the analyses as incomplete topics.

One tiny demo (two clusters, two header styles), two ingests, one backlog + transactions stage run.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pulsar_model.demo import DemoSpec, generate_demo
from pulsar_model.export import ClusterTarget, ExportOptions, run_export
from pulsar_model.ingest.pipeline import ingest_export
from pulsar_model.pipeline.stages.audit import run_transactions_stage
from pulsar_model.pipeline.stages.backlog import run_backlog_stage
from pulsar_model.tables.delta_io import DeltaTables
from tests.fake_pulsar_admin import FakeAdminServer, load_export

#: What the stages store is under test, not how Spark runs it (tests/spark_conf.py).
pytestmark = pytest.mark.usefixtures("fast_spark_conf")

DAY = dt.date(2026, 11, 21)
#: Columns that differ between the direct export and the REST export, and why.
DIFFERENCES: dict[str, set[str]] = {
    # identity of the export and of the files
    "*": {"export_id", "exported_at", "source_file"},
    # the broker strips the checksum and sends the payload decompressed; the REST rows say which fields
    # they could not carry (docs/semantics/export-rest.md "What cannot be recovered")
    "entries": {
        "has_checksum",
        "entry_size_bytes",
        "payload_size_bytes",
        "source_format",
        "unrecovered_fields",
        "rest_txn_aborted",
        "rest_txn_uncommitted",
    },
    # the export records what it fetched (manifest entries section); the demo says nothing
    "managed_ledgers": {"exported_entries_mode", "exported_entries_complete", "exported_entries_missing"},
    # the REST API answers every quota as BacklogQuotaImpl JSON (the demo also wrote Java toString text)
    "backlog_quotas": {"source_shape"},
    # priority levels come from client configurations, which no admin endpoint returns (docs §6.2)
    "consumers": {"priority_level", "priority_source", "subscription_type"},
}
TABLES = (
    "managed_ledgers",
    "ledgers",
    "cursors",
    "entries",
    "messages",
    "markers",
    "backlog_quotas",
    "schema_versions",
    "consumers",
)


def _rows(df: DataFrame, drop: set[str]) -> list[tuple[Any, ...]]:
    columns = sorted(c for c in df.columns if c not in drop)

    def norm(value: Any) -> Any:
        if isinstance(value, dict):
            return tuple(sorted(value.items()))
        if isinstance(value, list):
            return tuple(norm(v) for v in value)
        if hasattr(value, "asDict"):
            return tuple(sorted((k, norm(v)) for k, v in value.asDict().items()))
        return value

    return sorted((tuple(norm(r[c]) for c in columns) for r in df.select(*columns).collect()), key=repr)


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("rt")
    demo = root / "demo-2026-11-21"
    spec = DemoSpec(
        clusters=("us-east", "us-west"),
        pulsar_versions={"us-east": "4.1.3", "us-west": "3.0.7"},
        namespaces=("acme/orders",),
        topics_per_namespace=2,
        replicated_topics=1,
        partitions=2,
        replicated_partitions=1,
        messages_per_topic=(20, 60),
        replicated_messages_per_cluster=(20, 40),
    )
    generate_demo(demo, spec, overwrite=True)
    clusters = load_export(demo)
    common: dict[str, Any] = {"max_rate": None, "concurrency": 8, "progress": False}
    with FakeAdminServer(clusters["us-east"]) as east, FakeAdminServer(clusters["us-west"]) as west:
        targets = (ClusterTarget(east.url), ClusterTarget(west.url))
        full = run_export(ExportOptions(targets=targets, out=root / "rest", entries="all", **common))
        capped = run_export(
            ExportOptions(
                targets=targets, out=root / "capped", entries="backlog", max_entries_per_topic=3, **common
            )
        )
    assert not full.failed and not capped.failed
    return demo, root / "rest", root / "capped"


@pytest.fixture(scope="module")
def warehouses(spark, exports, tmp_path_factory):  # type: ignore[no-untyped-def]
    demo, rest, _ = exports
    out = {}
    for name, folder in (("demo", demo), ("rest", rest)):
        tables = DeltaTables(spark, str(tmp_path_factory.mktemp(f"wh-{name}")))
        result = ingest_export(spark, tables, str(folder), export_date=DAY)
        assert sum(result.rows_quarantined.values()) == 0, (name, result.rows_quarantined)
        out[name] = tables
    return out


def test_export_then_ingest_gives_the_direct_exports_input_tables(warehouses) -> None:  # type: ignore[no-untyped-def]
    demo, rest = warehouses["demo"], warehouses["rest"]
    for table in TABLES:
        drop = DIFFERENCES["*"] | DIFFERENCES.get(table, set())
        want, got = _rows(demo.read(table), drop), _rows(rest.read(table), drop)
        assert got == want, table
    entries = rest.read("entries")
    # what could be carried is exact: every batch's stored size, every uncompressed payload size
    assert entries.where(F.col("is_batch") & F.col("entry_size_bytes").isNull()).count() == 0
    assert entries.where((F.col("compression") == "NONE") & F.col("payload_size_bytes").isNull()).count() == 0
    assert (
        entries.where(
            F.col("entry_size_bytes").isNull() != F.array_contains("unrecovered_fields", "entry_size_bytes")
        ).count()
        == 0
    )
    flags = (
        rest.read("managed_ledgers").select("exported_entries_mode", "exported_entries_complete").distinct()
    )
    assert [tuple(r) for r in flags.collect()] == [("all", True)]


@pytest.mark.long
def test_capped_export_reaches_the_analyses_as_incomplete(spark, exports, tmp_path) -> None:  # type: ignore[no-untyped-def]
    _, _, capped_dir = exports
    tables = DeltaTables(spark, str(tmp_path / "wh-capped"))
    ingest_export(spark, tables, str(capped_dir), export_date=DAY)
    manifest = json.loads((capped_dir / "manifest.json").read_text())
    incomplete = {
        (cluster, topic)
        for cluster, section in manifest["clusters"].items()
        for topic in section["entries"]["incomplete_topics"]
    }
    assert incomplete
    ml = {(r.cluster, r.topic): r for r in tables.read("managed_ledgers").collect()}
    for key, row in ml.items():
        assert row.exported_entries_mode == "backlog"
        assert row.exported_entries_complete is (key not in incomplete), key
        assert (row.exported_entries_missing is not None) == (key in incomplete)
    run_backlog_stage(tables, DAY, "4.1.3")
    cursor_rows = tables.read("cursor_backlog").where(F.col("cursor_name") != "__compaction").collect()
    for row in cursor_rows:
        if (row.cluster, row.topic) in incomplete:
            assert row.exported_entries_complete is False, (row.cluster, row.topic, row.cursor_name)
    run_transactions_stage(tables, DAY, "4.1.3")
    for table in ("transactions", "transaction_holdback"):
        for row in tables.read(table).collect():
            assert row.exported_entries_complete is ((row.cluster, row.topic) not in incomplete), table
