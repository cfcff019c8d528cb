"""When ``skip_plans`` may count entries: ``entries_exported`` and the measures it gates (docs §1.10, §1.11).

:func:`pulsar_model.plans.with_entry_effects` counts what a plan skips only for a topic whose entries were
exported, or whose ledgers hold none (an empty topic has nothing to export: zero is exact, not unknown).
A topic whose ledgers list entries that the export does not hold gives null messages and bytes, never a
zero that looks like a measurement; a request for a topic without a managed-ledger row is an error row.
One ``clear_backlog`` per topic, one DataFrame compared whole.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from chispa import assert_df_equality
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pulsar_model.plans import PlanInputs, cursor_plans, with_entry_effects
from pulsar_model.tables.contracts import conform, contract

DAY = dt.date(2026, 11, 1)
VERSION = "4.1.3"
T0_MS = 1_793_500_000_000
EXPORTED = "persistent://t/ns/exported"  # ledger 10 (2 entries) + current 11 (1 entry), all exported
EMPTY = "persistent://t/ns/empty"  # current ledger 20 without entries: nothing to export
NOT_EXPORTED = "persistent://t/ns/not-exported"  # ledger 30 lists 2 entries; the export holds none
UNKNOWN = "persistent://t/ns/unknown"  # no managed-ledger row


def _pos(ledger: int, entry: int) -> dict[str, int]:
    return {"ledger_id": ledger, "entry_id": entry}


def _frame(spark: SparkSession, table: str, rows: list[dict[str, Any]]) -> DataFrame:
    c = contract(table)
    data = [tuple(r.get(name) for name in c.column_names) for r in rows]
    return conform(spark.createDataFrame(data, c.spark_schema), table)


def _row(topic: str, **fields: Any) -> dict[str, Any]:
    return {"cluster": "c1", "topic": topic, "export_id": "e1", "export_date": DAY, **fields}


def _managed(topic: str, current: int, current_entries: int, lac: dict[str, int]) -> dict[str, Any]:
    return _row(
        topic,
        exported_at=dt.datetime(2026, 11, 1, 12, 0, tzinfo=dt.UTC),
        partition_index=-1,
        state="LedgerOpened",
        total_size_bytes=0,
        current_ledger_id=current,
        current_ledger_entries=current_entries,
        current_ledger_size_bytes=100 * current_entries,
        ledger_count=2,
        cursor_count=1,
        last_confirmed_entry=lac,
        pulsar_version=VERSION,
    )


def _ledger(topic: str, ledger: int, entries: int, current: bool, order: int) -> dict[str, Any]:
    return _row(
        topic,
        ledger_id=ledger,
        entries=entries,
        size_bytes=100 * entries,
        offloaded=False,
        is_current=current,
        ledger_order=order,
    )


def _cursor(topic: str, md: dict[str, int]) -> dict[str, Any]:
    rp = {"ledger_id": md["ledger_id"], "entry_id": md["entry_id"] + 1}
    return _row(
        topic,
        cursor_name="sub",
        cursor_order=0,
        cursor_kind="subscription",
        is_durable=True,
        is_replicated=False,
        mark_delete_position=md,
        read_position=rp,
        individually_deleted=[],
    )


def _entry(topic: str, ledger: int, entry: int) -> dict[str, Any]:
    return _row(
        topic,
        ledger_id=ledger,
        entry_id=entry,
        position=_pos(ledger, entry),
        entry_size_bytes=100,
        producer_name="p",
        sequence_id=entry,
        publish_time=dt.datetime.fromtimestamp((T0_MS + entry) / 1000, dt.UTC),
        publish_time_ms=T0_MS + entry,
        replicate_to=[],
        compression="NONE",
        null_value=False,
        is_encrypted=False,
        is_chunk=False,
        source_file="f",
        message_count=2,
        is_batch=True,
    )


def _inputs(spark: SparkSession) -> PlanInputs:
    managed = [
        _managed(EXPORTED, 11, 1, _pos(11, 0)),
        _managed(EMPTY, 20, 0, _pos(20, -1)),
        _managed(NOT_EXPORTED, 31, 0, _pos(30, 1)),
    ]
    ledgers = [
        _ledger(EXPORTED, 10, 2, False, 0),
        _ledger(EXPORTED, 11, 1, True, 1),
        _ledger(EMPTY, 20, 0, True, 0),
        _ledger(NOT_EXPORTED, 30, 2, False, 0),
        _ledger(NOT_EXPORTED, 31, 0, True, 1),
    ]
    cursors = [
        _cursor(EXPORTED, _pos(10, 0)),
        _cursor(EMPTY, _pos(20, -1)),
        _cursor(NOT_EXPORTED, _pos(30, -1)),
    ]
    entries = [_entry(EXPORTED, 10, 0), _entry(EXPORTED, 10, 1), _entry(EXPORTED, 11, 0)]
    return PlanInputs(
        managed_ledgers=_frame(spark, "managed_ledgers", managed),
        ledgers=_frame(spark, "ledgers", ledgers),
        cursors=_frame(spark, "cursors", cursors),
        entries=_frame(spark, "entries", entries),
        messages=_frame(spark, "messages", []),
    )


def test_entry_effects_count_only_what_the_export_holds(spark: SparkSession) -> None:
    """Exported: clear_backlog skips 10:1 and 11:0 (two entries of two messages each). Empty: nothing to
    skip, and zero is exact. Not exported: the engine still counts two entries from the ledger list, but
    messages and bytes are unknown (null). Unknown topic: an error row, nothing counted."""
    requests = _frame(
        spark,
        "plan_requests",
        [
            {
                "request_id": topic.rsplit("/", 1)[1],
                "cluster": "c1",
                "topic": topic,
                "action": "clear_backlog",
                "cursor_name": "sub",
                "source": "ops",
            }
            for topic in (EXPORTED, EMPTY, NOT_EXPORTED, UNKNOWN)
        ],
    )
    inputs = _inputs(spark)
    plans = with_entry_effects(cursor_plans(requests, inputs, None, ["clear_backlog"]), inputs)
    got = plans.select(
        "request_id",
        "export_id",
        "entries_exported",
        "skipped_entries",
        "skipped_messages",
        "skipped_bytes",
        F.col("error").isNotNull().alias("failed"),
    )
    expected = spark.createDataFrame(
        [
            ("exported", "e1", True, 2, 4, 200, False),
            ("empty", "e1", True, 0, 0, 0, False),
            ("not-exported", "e1", False, 2, None, None, False),
            ("unknown", None, False, None, None, None, True),
        ],
        "request_id string, export_id string, entries_exported boolean, skipped_entries bigint, "
        "skipped_messages bigint, skipped_bytes bigint, failed boolean",
    )
    assert_df_equality(got, expected, ignore_row_order=True, ignore_nullable=True)
