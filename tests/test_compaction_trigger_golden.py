"""Golden tests for the automatic compaction trigger (docs §5.3) and the dirty part since the last horizon.

Every topic has the managed ledger of docs §2.6 scenario 2: ledger 1 closed with 5 entries / 5000 B,
ledger 2 open with 3 entries / 3000 B (listed 0/0), totalSize 8000, LAC 2:2 - so the estimates are
known numbers: ``getTotalSize()`` = 8000, ``getEstimatedBacklogSize()`` with the slowest md at 1:1 =
6000, ``estimateBacklogFromPosition(1:4)`` = 3000. The topics differ in cursors, name and thresholds.
One DataFrame per input, both trigger generations (4.1.3 = "3.x" rule, 2.9.3 = "2.8/2.9" rule) unioned and
collected once.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from pulsar_model import compaction as C
from pulsar_model.errors import ContractError
from pulsar_model.tables.contracts import spark_schema
from tests.contract_frames import contract_frame

CLUSTER = "c1"
DAY = dt.date(2026, 11, 1)
NEW, OLD = "4.1.3", "2.9.3"


def t(name: str) -> str:
    return f"persistent://acme/orders/{name}"


SYSTEM = "persistent://pulsar/system/__change_events"
HEARTBEAT = "persistent://pulsar/c1/broker-1:8080/healthcheck"
# topic -> cursors: (name, kind, durable, md)
TOPICS: dict[str, list[tuple[str, str, bool, tuple[int, int]]]] = {
    t("no-subs"): [],
    t("no-subs-low"): [],
    t("reader-only"): [("reader-1", "reader", False, (1, 3))],
    t("durable-sub"): [("billing", "subscription", True, (1, 1))],
    t("compacted"): [("billing", "subscription", True, (1, 0)), ("__compaction", "compaction", True, (1, 4))],
    t("partitioned-partition-0"): [],
    t("disabled"): [],
    t("negative"): [],
    SYSTEM: [],
    HEARTBEAT: [],
}
THRESHOLDS = C.CompactionThresholds.parse(
    broker_bytes=0,
    namespaces={"acme/orders": "8000", "pulsar/system": "0"},
    topics={
        t("no-subs-low"): 7999,
        t("reader-only"): 7999,
        t("durable-sub"): 5999,
        t("compacted"): 3000,
        t("partitioned"): 100,  # the partitioned topic's policy covers its partitions
        t("disabled"): 0,
        t("negative"): -1,
        SYSTEM: 0,
        HEARTBEAT: 0,
    },
)


def _row(table: str, values: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(values.get(f.name) for f in spark_schema(table).fields)


@pytest.fixture(scope="module")
def results(spark: SparkSession) -> dict[tuple[str, str], dict[str, Any]]:
    ident = {"cluster": CLUSTER, "export_id": "e1", "export_date": DAY}
    ml, led, cur, ent = [], [], [], []
    for topic, cursors in TOPICS.items():
        ml.append(
            _row(
                "managed_ledgers",
                {
                    **ident,
                    "topic": topic,
                    "exported_at": dt.datetime(2026, 11, 1, 2, 0),
                    "partition_index": -1,
                    "total_size_bytes": 8000,
                    "current_ledger_id": 2,
                    "current_ledger_entries": 3,
                    "current_ledger_size_bytes": 3000,
                    "last_confirmed_entry": (2, 2),
                    "ledger_count": 2,
                    "cursor_count": len(cursors),
                    "compacted_ledger_size_bytes": 600 if topic == t("compacted") else None,
                },
            )
        )
        for order, (lid, entries, size, current) in enumerate([(1, 5, 5000, False), (2, 0, 0, True)]):
            led.append(
                _row(
                    "ledgers",
                    {
                        **ident,
                        "topic": topic,
                        "ledger_id": lid,
                        "entries": entries,
                        "size_bytes": size,
                        "offloaded": False,
                        "is_current": current,
                        "ledger_order": order,
                    },
                )
            )
        for order, (name, kind, durable, md) in enumerate(cursors):
            cur.append(
                _row(
                    "cursors",
                    {
                        **ident,
                        "topic": topic,
                        "cursor_name": name,
                        "cursor_order": order,
                        "cursor_kind": kind,
                        "is_durable": durable,
                        "is_replicated": False,
                        "mark_delete_position": md,
                        "read_position": (md[0], md[1] + 1),
                        "individually_deleted": [],
                        "messages_consumed_counter": 0,
                    },
                )
            )
        if topic in (t("compacted"), t("no-subs")):
            ent += [(CLUSTER, topic, 1, e, 1000) for e in range(5)] + [
                (CLUSTER, topic, 2, e, 1000) for e in range(3)
            ]
    managed = spark.createDataFrame(ml, spark_schema("managed_ledgers"))
    ledgers = spark.createDataFrame(led, spark_schema("ledgers"))
    cursors = spark.createDataFrame(cur, spark_schema("cursors"))
    entries = contract_frame(
        spark, "entries", ["cluster", "topic", "ledger_id", "entry_id", "entry_size_bytes"], ent
    )
    parts = [
        C.compaction_trigger(managed, ledgers, cursors, THRESHOLDS, v, entries=entries).select(
            F.lit(v).alias("version"), "*"
        )
        for v in (NEW, OLD)
    ]
    rows = parts[0].unionByName(parts[1]).collect()
    return {(r["version"], r["topic"]): r.asDict(recursive=True) for r in rows}


def _decision(r: dict[str, Any]) -> tuple[Any, ...]:
    return (
        r["threshold_bytes"],
        r["threshold_source"],
        r["backlog_estimate_bytes"],
        r["estimate_source"],
        r["trigger_enabled"],
        r["would_trigger"],
    )


def test_compaction_trigger_3x_decisions(results: dict[tuple[str, str], dict[str, Any]]) -> None:
    """§5.3 3.x: ``threshold = topic ?? namespace ?? broker``; enabled iff threshold > 0 (system topics:
    unless heartbeat); estimate: __compaction sub > total size (no durable subs) > backlog size; strict
    '>'."""
    got = {topic: _decision(results[(NEW, topic)]) for topic in TOPICS}
    assert got == {
        t("no-subs"): (8000, "namespace", 8000, "total_size", True, False),  # 8000 > 8000 is false
        t("no-subs-low"): (7999, "topic", 8000, "total_size", True, True),
        t("reader-only"): (7999, "topic", 8000, "total_size", True, True),  # readers are not durable
        t("durable-sub"): (5999, "topic", 6000, "backlog_size", True, True),  # §2.3: 8000 - 2 x 1000
        t("compacted"): (3000, "topic", 3000, "compaction_cursor", True, False),  # §2.4 from 1:4 = 3000
        t("partitioned-partition-0"): (100, "topic", 8000, "total_size", True, True),
        t("disabled"): (0, "topic", 8000, "total_size", False, False),
        t("negative"): (-1, "topic", 8000, "total_size", False, False),
        SYSTEM: (0, "topic", 8000, "total_size", True, True),
        HEARTBEAT: (0, "topic", 8000, "total_size", False, False),
    }


def test_compaction_trigger_2x_precedence_bug(results: dict[tuple[str, str], dict[str, Any]]) -> None:
    """§5.3 2.8/2.9: ``isSystemTopic() or threshold != 0`` - a negative threshold enables (and always
    fires), every system topic (heartbeat too) is checked even with threshold 0 (§12 item 10)."""
    enabled = {topic: results[(OLD, topic)]["trigger_enabled"] for topic in TOPICS}
    fires = {topic: results[(OLD, topic)]["would_trigger"] for topic in TOPICS}
    assert enabled == {**{topic: True for topic in TOPICS}, t("disabled"): False}
    assert fires == {
        **{topic: True for topic in TOPICS},
        t("no-subs"): False,
        t("compacted"): False,
        t("disabled"): False,
    }


def test_compaction_trigger_dirty_since_last_horizon(results: dict[tuple[str, str], dict[str, Any]]) -> None:
    """Dirty part: entries after the __compaction mark-delete (all when never compacted) vs the compacted
    ledger's size."""
    compacted = results[(NEW, t("compacted"))]
    assert (
        compacted["last_horizon"],
        compacted["dirty_entries"],
        compacted["dirty_bytes"],
        compacted["compacted_ledger_size_bytes"],
        compacted["dirty_ratio"],
    ) == ({"ledger_id": 1, "entry_id": 4}, 3, 3000, 600, pytest.approx(3000 / 3600))
    never = results[(NEW, t("no-subs"))]
    assert (never["last_horizon"], never["dirty_entries"], never["dirty_bytes"], never["dirty_ratio"]) == (
        None,
        8,
        8000,
        1.0,
    )
    # no entries exported for the topic: nothing dirty is known to be stored, ratio undefined
    other = results[(NEW, t("durable-sub"))]
    assert (other["dirty_entries"], other["dirty_bytes"], other["dirty_ratio"]) == (0, 0, None)


@pytest.mark.parametrize(
    ("version", "rule"),
    [
        ("2.8.4", "2.x"),
        ("2.9.3", "2.x"),
        ("2.9.5", "2.x"),
        ("2.10.0", "2.x"),
        ("2.10.1", "3.x"),
        ("2.11.0", "3.x"),
        ("2.11.4", "3.x"),
        ("3.0.0", "3.x"),
        ("4.1.3", "3.x"),
    ],
)
def test_trigger_rule_by_version(version: str, rule: str) -> None:
    """§5.3 Correction: ``PersistentTopic.checkCompaction`` reads ``isCompactionEnabled()`` from tag v2.10.1
    (apache/pulsar#14643) and in every 2.11.x; v2.10.0 still has ``isSystemTopic() || threshold != 0``."""
    assert C.trigger_rule(version) == rule


@pytest.mark.parametrize("bad", ["1MB", "", True])
def test_compaction_thresholds_parse_rejects_non_integers(bad: Any) -> None:
    from pulsar_model.errors import ConfigError

    with pytest.raises(ConfigError, match="byte count"):
        C.CompactionThresholds.parse(broker_bytes=bad)


def test_compaction_trigger_per_row_versions_need_the_version_column(spark: SparkSession) -> None:
    """``pulsar_version=None`` reads each topic's ``managed_ledgers.pulsar_version``: without the column the
    call says so (before any Spark job) instead of failing inside the plan."""
    managed = spark.createDataFrame([], spark_schema("managed_ledgers")).drop("pulsar_version")
    ledgers = spark.createDataFrame([], spark_schema("ledgers"))
    cursors = spark.createDataFrame([], spark_schema("cursors"))
    with pytest.raises(ContractError, match=r"managed_ledgers\.pulsar_version"):
        C.compaction_trigger(managed, ledgers, cursors, THRESHOLDS, None)
