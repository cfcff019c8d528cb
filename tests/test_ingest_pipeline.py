"""Ingestion end to end: real-shape fixtures + an entry dump + bad records -> Delta tables.

One export is built in tmp_path from tests/fixtures/exports (hand-written from docs §10 for several
Pulsar versions), an entry dump encoded with the wire codec, and hostile records; it is ingested
twice (the rerun must change nothing but the table versions).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import shutil
from pathlib import Path

import deltalake
import pytest

from pulsar_model.ingest.pipeline import INPUT_TABLES, ingest_export
from pulsar_model.tables import contracts
from pulsar_model.tables.delta_io import DeltaTables
from pulsar_model.tables.delta_io._schema import delta_json_to_spark
from pulsar_model.wire.codec import BatchItem, encode_batch_entry, encode_marker_entry, encode_message_entry
from pulsar_model.wire.markers import Snapshot, SnapshotRequest, TxnMarker

FIXTURES = Path(__file__).parent / "fixtures" / "exports"
TOPIC = "persistent://tenant-a/ns1/payments"
EXPORT_DATE = dt.date(2026, 11, 21)


def _line(topic: str | None, ledger: int, entry: int, data: bytes) -> str:
    record = {"ledger_id": ledger, "entry_id": entry, "data": base64.b64encode(data).decode()}
    if topic is not None:
        record["topic"] = topic
    return json.dumps(record)


def _build_export(root: Path) -> None:
    shutil.copytree(FIXTURES / "us-east", root / "us-east", ignore=shutil.ignore_patterns("_*"))
    (root / "manifest.json").write_text(
        json.dumps(
            {
                "export_id": "fixture-export",
                "exported_at": "2026-11-21T02:00:00Z",
                "clusters": {"us-east": {"pulsar_version": "3.0.7"}},
            }
        )
    )
    entries = root / "us-east" / "entries"
    entries.mkdir()
    plain = encode_message_entry(
        producer_name="p1", sequence_id=1, publish_time_ms=1_700_000_000_000, key="k1", payload=b"x" * 10
    )
    batch = encode_batch_entry(
        producer_name="p1",
        sequence_id=2,
        publish_time_ms=1_700_000_000_500,
        items=[
            BatchItem(key="k1", payload=b"abc"),
            BatchItem(key="k2", payload=b"", null_value=True),
            BatchItem(payload=b"zz"),
        ],
    )
    request = encode_marker_entry(SnapshotRequest("snap-1", "us-east"), publish_time_ms=1_700_000_001_000)
    snapshot = encode_marker_entry(
        Snapshot("snap-1", (17, 1), (("us-west", (5, 9)),)),
        publish_time_ms=1_700_000_002_000,
        replicate_to=["us-east"],
    )
    commit = encode_marker_entry(TxnMarker(21), publish_time_ms=1_700_000_003_000, txn_id=(3, 77))
    corrupt = bytearray(plain)
    corrupt[-1] ^= 0xFF  # payload byte flipped: CRC32C no longer matches
    lines = [
        _line(TOPIC, 15, 0, plain),
        _line(TOPIC, 15, 1, batch),
        _line(TOPIC, 15, 2, request),
        _line(TOPIC, 15, 3, snapshot),
        _line(TOPIC, 15, 4, commit),
        _line(TOPIC, 15, 1, batch),  # duplicate entry, identical bytes
        _line(TOPIC, 15, 5, bytes(corrupt)),  # bad checksum
        '{"topic": "x", "ledger_id": 1',  # truncated JSON
        _line(TOPIC, -3, 0, plain),  # impossible position
    ]
    (entries / "dump.jsonl").write_text("\n".join(lines) + "\n")
    # a per-topic file: topic from the file name
    (entries / "persistent%3A%2F%2Ftenant-b%2Fns2%2Fclicks.jsonl").write_text(
        _line(None, 20, 0, plain) + "\n"
    )
    bad = root / "us-east" / "stats-internal"
    (bad / "persistent%3A%2F%2Ft%2Fns%2Fbroken.json").write_text('{"entriesAddedCounter": 3, "ledgers": [')
    payments = json.loads((bad / "persistent%3A%2F%2Ftenant-a%2Fns1%2Fpayments.json").read_text())
    envelope = {"cluster": "us-east", "topic": TOPIC, "stats": payments}
    (bad / "zz-again.jsonl").write_text(json.dumps(envelope) + "\n")  # same topic exported twice
    (root / "us-east" / "stats" / "README.txt").write_text("not an export file")


#: RDDs the fixture's first ingest left persisted (what ``getPersistentRDDs`` gained).
LEFTOVER_CACHE: dict[str, set[int]] = {}


@pytest.fixture(scope="module")
def ingested(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("export")
    _build_export(root)
    warehouse = tmp_path_factory.mktemp("warehouse")
    tables = DeltaTables(spark, str(warehouse))
    cached_before = _persisted_rdds(spark)
    first = ingest_export(spark, tables, str(root), run_id="run-1")
    LEFTOVER_CACHE["run-1"] = _persisted_rdds(spark) - cached_before
    snapshot = {t: sorted(map(str, tables.read(t).drop("run_id").collect())) for t in INPUT_TABLES}
    second = ingest_export(spark, tables, str(root), run_id="run-2")
    return tables, first, second, snapshot, warehouse


def _persisted_rdds(spark) -> set[int]:
    return {int(k) for k in spark.sparkContext._jsc.getPersistentRDDs().keySet().toArray()}


def test_ingest_leaves_nothing_cached(ingested):
    """A nightly runs its stages after ingest in the same driver: the parsed records and decoded entries
    ingest persists must not keep holding its storage memory (the 1 GiB driver of issue #24)."""
    assert ingested is not None
    assert LEFTOVER_CACHE["run-1"] == set()


def test_ingest_accounting_holds_per_source(ingested):
    _, first, _, _, _ = ingested
    for source, rows_in in first.rows_in.items():
        assert rows_in == first.rows_accepted[source] + first.rows_quarantined[source], source
    assert first.rows_in["entries"] == 10
    assert first.rows_accepted["entries"] == 6  # 5 distinct good entries + the per-topic file
    assert first.rows_quarantined["entries"] == 4  # duplicate, checksum, truncated JSON, bad position
    assert first.rows_quarantined["stats-internal"] == 2  # malformed file + duplicate topic
    assert first.rows_quarantined["layout"] == 1  # README.txt


def test_ingest_quarantine_reasons(ingested):
    tables, _, _, _, _ = ingested
    rows = tables.read("quarantine").collect()
    by_code = {}
    for r in rows:
        by_code.setdefault(r.reason_code, []).append(r)
    assert set(by_code) == {
        "duplicate_entry",
        "bad_checksum",
        "malformed_json",
        "bad_position",
        "duplicate_topic",
        "duplicate_quota",
        "unsupported_file",
    }
    # broker.json and a broker line of quotas.jsonl both describe the us-east broker: the first file wins
    (quota_dup,) = by_code["duplicate_quota"]
    assert quota_dup.source_file.endswith("quotas.jsonl") and "broker us-east" in quota_dup.reason
    assert "kept the record in us-east/backlog-quotas/broker.json" in quota_dup.reason
    dup = by_code["duplicate_entry"][0]
    assert "15:1" in dup.reason and "identical bytes" in dup.reason
    assert "mismatch" in by_code["bad_checksum"][0].reason
    assert {r.source for r in by_code["malformed_json"]} == {"entries", "stats-internal"}
    assert "-3" in by_code["bad_position"][0].reason
    topic_dup = by_code["duplicate_topic"][0]
    assert topic_dup.topic == TOPIC and topic_dup.source_file.endswith("zz-again.jsonl")
    # no payload bytes: excerpts of stored entries only describe the header
    for r in by_code["bad_checksum"]:
        assert r.record_excerpt.startswith("stored entry of")


def test_ingest_entries_messages_markers(ingested):
    tables, _, _, _, _ = ingested
    entries = {(r.topic, r.ledger_id, r.entry_id): r for r in tables.read("entries").collect()}
    assert set(entries) == {(TOPIC, 15, e) for e in range(5)} | {("persistent://tenant-b/ns2/clicks", 20, 0)}
    assert entries[(TOPIC, 15, 1)].is_batch and entries[(TOPIC, 15, 1)].message_count == 3
    assert entries[(TOPIC, 15, 4)].txnid_most_bits == 3 and entries[(TOPIC, 15, 4)].txnid_least_bits == 77
    messages = sorted(
        (r.entry_id, r.batch_index, r.key, r.payload_size_bytes, r.is_null_value)
        for r in tables.read("messages").where(f"topic = '{TOPIC}'").collect()
    )
    assert messages[:4] == [
        (0, -1, "k1", 10, False),
        (1, 0, "k1", 3, False),
        (1, 1, "k2", 0, True),
        (1, 2, None, 2, False),
    ]
    markers = {r.entry_id: r for r in tables.read("markers").collect()}
    assert (
        markers[2].marker_name == "REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST"
        and markers[2].source_cluster == "us-east"
    )
    assert markers[3].local_position.ledger_id == 17 and markers[3].clusters[0].cluster == "us-west"
    assert markers[3].clusters[0].position.entry_id == 9 and list(markers[3].replicate_to) == ["us-east"]
    assert markers[4].marker_type == 21


def test_ingest_spec_example_parsed(ingested):
    tables, _, _, _, _ = ingested
    ml = (
        tables.read("managed_ledgers")
        .where("topic = 'persistent://public/default/spec-example'")
        .collect()[0]
    )
    assert (ml.last_confirmed_entry.ledger_id, ml.last_confirmed_entry.entry_id) == (12, 9)
    assert ml.current_ledger_id == 13 and ml.total_size_bytes == 20480 and ml.pulsar_version == "3.0.7"
    assert ml.compacted_ledger_id is None
    cursor = tables.read("cursors").where("topic = 'persistent://public/default/spec-example'").collect()[0]
    assert cursor.cursor_name == "sub1" and cursor.cursor_kind == "subscription" and cursor.is_durable
    assert [(r.lower.entry_id, r.upper.entry_id) for r in cursor.individually_deleted] == [(5, 6)]


def test_ingest_rerun_is_idempotent(ingested):
    tables, first, second, snapshot, _ = ingested
    assert second.rows_out == first.rows_out
    for table in INPUT_TABLES:
        assert sorted(map(str, tables.read(table).drop("run_id").collect())) == snapshot[table], table
        assert second.table_versions[table] == first.table_versions[table] + 1


def test_ingest_tables_match_their_contracts(ingested):
    tables, _, _, _, warehouse = ingested
    for table in INPUT_TABLES:
        df = tables.read(table)
        contracts.check_schema(df, table, check_nullability=False)
        logged = delta_json_to_spark(deltalake.DeltaTable(str(Path(warehouse) / table)).schema().to_json())
        assert not contracts.schema_differences(logged, table), table
