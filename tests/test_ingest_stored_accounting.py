"""Accepted means stored: per source, records in = records found in the tables + quarantine rows.

The ingest's own counters say ``rows in = accepted + quarantined``; these tests check the other half by
reading the written tables back: every accepted record left a trace in its table, so nothing is counted
that is not stored. The export holds good and bad records of every source, and the cases that used to
slip through: stats of a topic without stats-internal (absent, quarantined, or a non-persistent topic)
and a subscription in stats that stats-internal does not list.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from urllib.parse import quote

import pytest
from pyspark.sql import functions as F

from pulsar_model.ingest.pipeline import ingest_export
from pulsar_model.tables.delta_io import DeltaTables
from pulsar_model.wire.codec import encode_marker_entry, encode_message_entry
from pulsar_model.wire.markers import SnapshotRequest

#: What the stages store is under test, not how Spark runs it (tests/spark_conf.py).
pytestmark = pytest.mark.usefixtures("fast_spark_conf")

FIXTURES = Path(__file__).parent / "fixtures" / "exports" / "us-east"
PAYMENTS = "persistent%3A%2F%2Ftenant-a%2Fns1%2Fpayments.json"
C = "c1"
T1, T2, T3, T4 = (f"persistent://acct/ns/t{i}" for i in range(1, 5))
NP = "non-persistent://acct/ns/np"


def _file(root: Path, kind: str, topic_or_name: str, text: str) -> None:
    name = (
        topic_or_name
        if topic_or_name.endswith((".json", ".jsonl", ".csv"))
        else quote(topic_or_name, safe="")
    )
    path = root / C / kind / (name if name.endswith((".json", ".jsonl", ".csv")) else name + ".json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _build(root: Path) -> None:
    internal = json.loads((FIXTURES / "stats-internal" / PAYMENTS).read_text())
    stats = json.loads((FIXTURES / "stats" / PAYMENTS).read_text())
    (root / "manifest.json").write_text(json.dumps({"exported_at": "2026-11-21T02:00:00Z"}))
    _file(root, "stats-internal", T1, json.dumps(internal))
    _file(root, "stats-internal", "lines.jsonl", json.dumps({"cluster": C, "topic": T2, "stats": internal}))
    _file(root, "stats-internal", T3, '{"entriesAddedCounter": 3, "ledgers": [')  # quarantined
    extra_sub = json.loads(json.dumps(stats))
    extra_sub["subscriptions"]["only-in-stats"] = next(iter(stats["subscriptions"].values()))
    extra_sub["fieldOfANewerPulsar"] = 1
    _file(root, "stats", T1, json.dumps(extra_sub))  # stored; one subscription has no cursor
    _file(root, "stats", "lines.jsonl", json.dumps({"cluster": C, "topic": T2, "stats": stats}))
    _file(root, "stats", T3, json.dumps(stats))  # its stats-internal record was quarantined
    _file(root, "stats", T4, json.dumps(stats))  # no stats-internal at all
    _file(root, "stats", NP, json.dumps(stats))  # non-persistent: has no managed ledger
    _file(root, "stats", "persistent://acct/ns/broken", "{not json")
    _file(root, "backlog-quotas", "broker.json", (FIXTURES / "backlog-quotas" / "broker.json").read_text())
    _file(
        root,
        "backlog-quotas",
        "acct%2Fns.json",
        (FIXTURES / "backlog-quotas" / "tenant-a%2Fns1.json").read_text(),
    )
    _file(root, "backlog-quotas", "acct%2Fbad.json", '{"destination_storage": {"policy": 5}}')
    _file(
        root,
        "consumers",
        "clients.csv",
        "topic,subscription,consumer_name,priority_level,subscription_type\n"
        f"{T1},s1,w-1,0,Failover\n{T1},s1,w-2,1,Failover\n{T1},s1,w-3,-4,Failover\n",
    )
    _file(root, "schemas", T1, (FIXTURES / "schemas" / PAYMENTS).read_text())
    _file(root, "schemas", T2, '[{"version": "one"}]')
    plain = encode_message_entry(
        producer_name="p", sequence_id=1, publish_time_ms=1_700_000_000_000, payload=b"x"
    )
    marker = encode_marker_entry(SnapshotRequest("snap-1", C), publish_time_ms=1_700_000_001_000)
    lines = [
        {"topic": T1, "ledger_id": 15, "entry_id": 0, "data": base64.b64encode(plain).decode()},
        {"topic": T1, "ledger_id": 15, "entry_id": 1, "data": base64.b64encode(marker).decode()},
        {"topic": T1, "ledger_id": -5, "entry_id": 0, "data": base64.b64encode(plain).decode()},
    ]
    _file(root, "entries", "dump.jsonl", "\n".join(json.dumps(x) for x in lines) + "\n")


@pytest.fixture(scope="module")
def ingested(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("accounting-export")
    _build(root)
    tables = DeltaTables(spark, str(tmp_path_factory.mktemp("accounting-warehouse")))
    result = ingest_export(spark, tables, str(root), run_id="acct")
    return tables, result


def _stored(tables: DeltaTables) -> dict[str, int]:
    """Accepted records of each source found in the tables (one record = one trace, see _build)."""
    ml = tables.read("managed_ledgers")
    return {
        "stats-internal": ml.select("topic").distinct().count(),
        "stats": ml.where(F.col("stats_storage_size_bytes").isNotNull()).select("topic").distinct().count(),
        "backlog-quotas": tables.read("backlog_quotas").select("level", "scope").distinct().count(),
        "consumers": tables.read("consumers").where(F.col("consumer_name").startswith("w-")).count(),
        "schemas": tables.read("schema_versions").select("topic").distinct().count(),
        "entries": tables.read("entries").count(),
        "markers": tables.read("markers").count(),
    }


def test_ingest_every_source_stores_what_it_accepts(ingested):
    tables, result = ingested
    quarantined = {
        r["source"]: r["n"]
        for r in tables.read("quarantine").groupBy("source").agg(F.count("*").alias("n")).collect()
    }
    stored = _stored(tables)
    for source, stored_records in stored.items():
        assert result.rows_in[source] == stored_records + quarantined.get(source, 0), source
        assert result.rows_accepted[source] == stored_records, source
    assert stored == {
        "stats-internal": 2,
        "stats": 2,
        "backlog-quotas": 2,
        "consumers": 2,
        "schemas": 1,
        "entries": 2,
        "markers": 1,
    }


def test_ingest_quarantines_stats_without_stats_internal_saying_why(ingested):
    tables, _ = ingested
    rows = {
        r["topic"]: r
        for r in tables.read("quarantine")
        .where(F.col("reason_code") == "stats_without_stats_internal")
        .collect()
    }
    assert set(rows) == {T3, T4, NP}
    assert "was quarantined" in rows[T3]["reason"]
    assert "no stats-internal record for this topic" in rows[T4]["reason"]
    assert "non-persistent" in rows[NP]["reason"]
    assert rows[T4]["record_locator"] == f"file topic {T4}"
    # nothing of a quarantined stats record is stored, its consumers included
    assert tables.read("consumers").where(F.col("topic").isin(T3, T4, NP)).count() == 0


def test_ingest_notes_what_it_assumed_per_record(ingested):
    tables, result = ingested
    notes = tables.read("ingest_notes")
    orphan = {
        (r["topic"], r["note_subject"]): r["note"]
        for r in notes.where(F.col("note_code") == "subscription_without_cursor").collect()
    }
    # the fixture's reader subscription is in stats only, as real stats of non-durable cursors are
    assert set(orphan) == {(T1, "only-in-stats"), (T1, "reader-a1b2c3d4e5"), (T2, "reader-a1b2c3d4e5")}
    assert "created or deleted between the two admin calls" in orphan[(T1, "only-in-stats")]
    assert orphan[(T2, "reader-a1b2c3d4e5")].startswith("non-durable (reader) subscription")
    assert all(note.endswith("its subscription stats were not stored") for note in orphan.values())
    unknown = notes.where(F.col("note_code") == "unknown_field").collect()
    assert [(r["topic"], r["note_subject"]) for r in unknown] == [(T1, "topic_stats.fieldOfANewerPulsar")]
    assert "topic_stats.fieldOfANewerPulsar is not read" in unknown[0]["note"]
    assert (
        result.rows_noted["stats"]
        == notes.where(F.col("source") == "stats").select("source_file", "record_locator").distinct().count()
    )
