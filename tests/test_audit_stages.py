"""The failover, transactions and schema stages end to end on a small demo (issue 7; docs §6, §8, §9).

One module-scoped run: generate_demo -> ingest_export -> the three stages; then the transactions stage runs
again with an injected "now" ten days later (the rerun must replace the partition, and every open
transaction becomes long-open). Results are checked against the generator's ground truth
(``_ground_truth/cursors.jsonl`` active consumers, ``topics.jsonl`` transactions and maxReadPosition, the
schema families of the demo) and, for the what-ifs, against the plain-Python oracle of docs §6.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pulsar_model.demo import DemoSpec, generate_demo
from pulsar_model.ingest.pipeline import ingest_export
from pulsar_model.pipeline.stages.audit import (
    FAILOVER_TABLES,
    SCHEMA_TABLES,
    TRANSACTION_TABLES,
    run_failover_stage,
    run_schema_stage,
    run_transactions_stage,
)
from pulsar_model.tables import contracts
from pulsar_model.tables.delta_io import DeltaTables
from tests.oracle.failover import OConsumer, select_active

#: Demo end to end (generate, ingest, stage runs): minutes on 2 cores, run by `make test-long`, not CI.
pytestmark = pytest.mark.long

# A 2.x cluster (non-partitioned Failover = first in arrival order) and a 4.1 cluster (hash ring; the
# consistent-hashing setting exists). 8 topics per namespace give every special feature (txn, open-txn,
# schema-incompatible) and the compatible-schema partitioned topic to both clusters.
VERSIONS = {"us-east": "2.10.6", "us-west": "4.1.3"}
SMALL = dataclasses.replace(
    DemoSpec(),
    clusters=tuple(VERSIONS),
    pulsar_versions=VERSIONS,
    namespaces=("acme/orders", "public/default"),
    topics_per_namespace=8,
    replicated_namespace=None,
    replicated_topics=0,
    partitions=2,
    messages_per_topic=(20, 60),
)
DEFAULT_VERSION = "4.1.3"
LATER = dt.timedelta(days=10)
ALL_TABLES = (*FAILOVER_TABLES, *TRANSACTION_TABLES, *SCHEMA_TABLES)


def _rows(tables: DeltaTables, table: str) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in tables.read(table).collect()]


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _pos(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    ledger, entry = text.split(":")
    return (int(ledger), int(entry))


def _p(value: dict[str, int] | None) -> tuple[int, int] | None:
    return None if value is None else (value["ledger_id"], value["entry_id"])


@pytest.fixture(scope="module")
def audit_run(spark, tmp_path_factory):
    out = tmp_path_factory.mktemp("audit-demo")
    generate_demo(out, SMALL, overwrite=True)
    tables = DeltaTables(spark, str(tmp_path_factory.mktemp("audit-wh")))
    day = ingest_export(spark, tables, str(out)).export_date
    rows1: dict[str, int] = {}
    versions1: dict[str, int] = {}
    for run in (run_failover_stage, run_transactions_stage, run_schema_stage):
        rows, versions = run(tables, day, DEFAULT_VERSION)
        rows1 |= rows
        versions1 |= versions
    first = {name: _rows(tables, name) for name in ALL_TABLES}
    managed = _rows(tables, "managed_ledgers")
    exported_at = max(m["exported_at"] for m in managed)
    rows2, versions2 = run_transactions_stage(tables, day, DEFAULT_VERSION, now=exported_at + LATER)
    truth = out / "_ground_truth"
    return SimpleNamespace(
        tables=tables,
        day=day,
        first=first,
        rows1=rows1,
        versions1=versions1,
        rows2=rows2,
        versions2=versions2,
        transactions2=_rows(tables, "transactions"),
        consumers=_rows(tables, "consumers"),
        managed=managed,
        cursor_truth=_jsonl(truth / "cursors.jsonl"),
        topic_truth=_jsonl(truth / "topics.jsonl"),
    )


def test_audit_stages_tables_match_contracts(audit_run):
    tables = audit_run.tables
    for table in ALL_TABLES:
        contracts.check_schema(tables.read(table), table, check_nullability=False)
        assert not contracts.schema_differences(tables.schema(table), table), table
        assert tables.partition_columns(table) == ("export_date",)
        rows = audit_run.first[table]
        assert rows, table  # the demo exercises every table
        assert len(rows) == audit_run.rows1[table], table
        c = contracts.contract(table)
        required = [col.name for col in c.columns if not col.nullable]
        assert not {n for r in rows for n in required if r[n] is None}, table
        keys = {tuple(r[k] for k in c.key) for r in rows}
        assert len(keys) == len(rows), table
        assert {r["pulsar_version"] for r in rows} <= set(VERSIONS.values()), table
        assert {r["export_date"] for r in rows} == {audit_run.day}, table


def test_failover_active_consumers_match_truth_and_stats(audit_run):
    """Every Failover subscription: the computed active consumer is the generator's (docs §6.3/§6.4 by
    version) and the broker's activeConsumerName from stats."""
    truth = {
        (c["cluster"], c["topic"], c["cursor"]): c["active_consumer"]
        for c in audit_run.cursor_truth
        if c["subscription_type"] == "Failover" and c["active_consumer"] is not None
    }
    got = {(r["cluster"], r["topic"], r["subscription"]): r for r in audit_run.first["failover_assignments"]}
    assert set(got) == set(truth)
    for key, r in got.items():
        assert r["active_consumer_name"] == truth[key], key
        assert r["stats_active_consumer_name"] == truth[key] and r["matches_stats"] is True, key
        assert r["subscription_type"] == "Failover" and r["consistent_hashing"] is False
        assert r["pulsar_version"] == VERSIONS[r["cluster"]]
        partitioned = re.search(r"-partition-\d+$", r["topic"]) is not None
        non_partitioned_mode = {"us-east": "first_arrival", "us-west": "hash_ring"}[r["cluster"]]
        assert r["selection_mode"] == ("modulo" if partitioned else non_partitioned_mode), key
    modes = {r["selection_mode"] for r in got.values()}
    assert modes == {"modulo", "first_arrival", "hash_ring"}, modes


def test_failover_balance_counts_assignments(audit_run):
    """Balance rows recount the assignments per partitioned topic (docs §6.3 modulo spreads partitions)."""
    expected: dict[tuple[str, str, str], dict[str, int]] = {}
    groups: dict[tuple[str, str, str], set[str]] = {}
    for r in audit_run.first["failover_assignments"]:
        base = re.sub(r"-partition-\d+$", "", r["topic"]) if r["partition_index"] >= 0 else r["topic"]
        key = (r["cluster"], base, r["subscription"])
        counts = expected.setdefault(key, {})
        counts[r["active_consumer_name"]] = counts.get(r["active_consumer_name"], 0) + 1
        groups.setdefault(key, set()).update(r["top_group_consumers"])
    got = {(r["cluster"], r["topic"], r["subscription"]): r for r in audit_run.first["failover_balance"]}
    assert set(got) == set(expected)
    for key, r in got.items():
        per = {name: expected[key].get(name, 0) for name in groups[key]}
        assert r["partitions_per_consumer"] == per, key
        assert r["partitions"] == sum(per.values()) and r["consumers"] == len(per), key
        assert (r["max_partitions"], r["min_partitions"]) == (max(per.values()), min(per.values())), key
        assert r["imbalance"] == r["max_partitions"] - r["min_partitions"], key
        assert r["idle_consumers"] == sorted(n for n, k in per.items() if k == 0), key
    assert any(r["partitions"] == 2 for r in got.values())


def test_failover_what_ifs_match_oracle(audit_run):
    """Every scenario of every subscription against the docs §6 oracle (consumer removed, added at the
    top priority, consistent hashing switched on)."""
    consumers: dict[tuple[str, str, str], list[OConsumer]] = {}
    for c in audit_run.consumers:
        consumers.setdefault((c["cluster"], c["topic"], c["subscription"]), []).append(
            OConsumer(c["consumer_name"], c["priority_level"], c["connect_order"])
        )
    assignments = {
        (r["cluster"], r["topic"], r["subscription"]) for r in audit_run.first["failover_assignments"]
    }
    seen: dict[tuple[str, str, str], set[tuple[str, str | None]]] = {}
    changed = 0
    for r in audit_run.first["failover_what_ifs"]:
        key = (r["cluster"], r["topic"], r["subscription"])
        rule = "2.10" if r["cluster"] == "us-east" else "3x"
        base = consumers[key]
        if r["scenario"] == "remove_consumer":
            after = [c for c in base if c.name != r["scenario_consumer"]]
        elif r["scenario"] == "add_consumer":
            top = min(c.priority for c in base)
            after = [*base, OConsumer(r["scenario_consumer"], top, max(c.arrival for c in base) + 1)]
        else:
            after = base
        hashing = r["what_if_consistent_hashing"]
        expected = select_active(r["topic"], after, consistent_hashing=hashing and rule == "3x", rule=rule)
        baseline = select_active(r["topic"], base, consistent_hashing=False, rule=rule)
        assert r["what_if_active_consumer_name"] == expected, r
        assert r["baseline_active_consumer_name"] == baseline, r
        assert r["active_changed"] is (expected != baseline), r
        changed += r["active_changed"]
        seen.setdefault(key, set()).add((r["scenario"], r["scenario_consumer"]))
    assert set(seen) == assignments
    for key, scenarios in seen.items():
        names = {c.name for c in consumers[key]}
        assert scenarios == {("remove_consumer", n) for n in names} | {
            ("add_consumer", "what-if-consumer"),
            ("toggle_consistent_hashing", None),
        }
    assert changed > 0


def _txn_truth(topic_truth: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (t["cluster"], t["topic"]): t
        for t in topic_truth
        if t["transactions"]["ongoing"] or t["transactions"]["committed"] or t["transactions"]["aborted"]
    }


def test_transactions_states_match_generator(audit_run):
    """Every transaction the entries export shows has the generator's outcome (docs §8.3); every open one
    starts where the broker's ongoing map says; every end marker still stored is found."""
    truth = _txn_truth(audit_run.topic_truth)
    got: dict[tuple[str, str], dict[tuple[int, int], dict[str, Any]]] = {}
    for r in audit_run.first["transactions"]:
        got.setdefault((r["cluster"], r["topic"]), {})[(r["txnid_most_bits"], r["txnid_least_bits"])] = r
    assert set(got) == set(truth)
    opened = 0
    for key, txns in got.items():
        t = truth[key]["transactions"]
        committed = {tuple(x) for x in t["committed"]}
        aborted = {tuple(x) for x in t["aborted"]}
        ongoing = {tuple(x["txn"]): _pos(x["first_position"]) for x in t["ongoing"]}
        for txn, r in txns.items():
            state = "committed" if txn in committed else "aborted" if txn in aborted else "open"
            assert r["state"] == state, (key, txn)
            assert r["txn_id"] == f"({txn[0]},{txn[1]})"
        assert {txn: _p(r["first_position"]) for txn, r in txns.items() if r["state"] == "open"} == ongoing
        opened += len(ongoing)
        listed = {_pos(x["marker_position"]) for x in t.get("log", []) if x["marker_position"]}
        found = {_p(r["end_marker_position"]) for r in txns.values() if r["end_marker_position"]}
        assert found <= listed, key
        for r in txns.values():
            if r["state"] == "open":
                assert r["open_age_ms"] > 0 and r["is_long_open"] is (r["open_age_ms"] > 3_600_000)
            else:
                assert r["open_age_ms"] is None and r["is_long_open"] is None
                if r["first_position"] is not None:
                    assert r["duration_ms"] >= 0
    assert opened == len(VERSIONS)  # one open-txn topic per cluster


def test_transaction_holdback_matches_generator_max_read_position(audit_run):
    """maxReadPosition of every transactional topic equals the simulated broker's (docs §8.4); with an open
    transaction every later entry is held back."""
    truth = _txn_truth(audit_run.topic_truth)
    got = {(r["cluster"], r["topic"]): r for r in audit_run.first["transaction_holdback"]}
    assert set(got) == set(truth)
    for key, r in got.items():
        t = truth[key]
        assert _p(r["max_read_position"]) == _pos(t["max_read_position"]), key
        assert r["open_txn_count"] == len(t["transactions"]["ongoing"]), key
        if r["open_txn_count"]:
            assert r["held_back_entries"] > 0 and r["held_back_messages"] >= r["held_back_entries"], key
            assert r["oldest_open_txn_id"] == "({},{})".format(*t["transactions"]["ongoing"][0]["txn"])
        else:
            assert r["held_back_entries"] == 0 and _p(r["max_read_position"]) == _pos(
                t["last_confirmed_entry"]
            )
    assert any(r["aborted_entries_skipped"] > 0 for r in got.values())
    assert all(r["txn_marker_entries"] > 0 for r in got.values() if r["open_txn_count"] == 0)


def test_transactions_rerun_replaces_partition_with_new_now(audit_run):
    """The rerun with now = export + 10 days replaces the partition: same rows, one commit more, every open
    transaction now long-open."""
    assert audit_run.rows2 == {t: audit_run.rows1[t] for t in TRANSACTION_TABLES}
    assert audit_run.versions2 == {t: audit_run.versions1[t] + 1 for t in TRANSACTION_TABLES}
    before = {(r["cluster"], r["topic"], r["txn_id"]): r for r in audit_run.first["transactions"]}
    after = {(r["cluster"], r["topic"], r["txn_id"]): r for r in audit_run.transactions2}
    assert set(before) == set(after)
    for key, r in after.items():
        if r["state"] == "open":
            assert r["open_age_ms"] == before[key]["open_age_ms"] + LATER.total_seconds() * 1000
            assert r["is_long_open"] is True
        else:
            assert r == before[key]


#: docs §9.4 on the demo's schemas under the broker default FULL: the "compatible" family adds fields with
#: defaults (fact 1); the "incompatible" family's v2 changes ``id`` long -> string (both directions fail).
EXPECTED_VERDICTS = {
    "compatible": {0: "accepted_first", 1: "compatible", 2: "compatible"},
    "incompatible": {0: "accepted_first", 1: "compatible", 2: "incompatible"},
}
EXPECTED_UNREADABLE = {"compatible": set(), "incompatible": {(0, 2), (2, 0), (1, 2), (2, 1)}}


def test_schema_verdicts_and_matrix_on_demo_schemas(audit_run):
    families: dict[tuple[str, str], str] = {}
    for t in audit_run.topic_truth:
        family = {"schema": "compatible", "schema-incompatible": "incompatible"}.get(t["feature"])
        if family:
            families[(t["cluster"], re.sub(r"-partition-\d+$", "", t["topic"]))] = family
    verdicts: dict[tuple[str, str], dict[int, dict[str, Any]]] = {}
    for r in audit_run.first["schema_verdicts"]:
        verdicts.setdefault((r["cluster"], r["topic"]), {})[r["version"]] = r
    assert set(verdicts) == set(families)
    for key, rows in verdicts.items():
        family = families[key]
        assert {v: r["verdict"] for v, r in rows.items()} == EXPECTED_VERDICTS[family], key
        assert {(r["strategy"], r["strategy_source"]) for r in rows.values()} == {("FULL", "broker")}
        if family == "incompatible":
            reasons = rows[2]["reasons"]
            assert rows[2]["checked_versions"] == [1]
            new_fails = "v1: new cannot read old: incompatible_schema_types"
            assert any(x.startswith(new_fails) for x in reasons), reasons
            assert any("old cannot read new" in x for x in reasons), reasons
    matrix: dict[tuple[str, str], dict[tuple[int, int], bool]] = {}
    for r in audit_run.first["schema_compatibility"]:
        matrix.setdefault((r["cluster"], r["topic"]), {})[(r["reader_version"], r["writer_version"])] = r[
            "can_read"
        ]
    assert set(matrix) == set(families)
    for key, pairs in matrix.items():
        assert set(pairs) == {(a, b) for a in range(3) for b in range(3) if a != b}, key
        assert {p for p, ok in pairs.items() if not ok} == EXPECTED_UNREADABLE[families[key]], key
