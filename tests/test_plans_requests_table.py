"""The plans stage with its requests read only from the ``plan_requests`` Delta table (issue 10).

Regression: cursor requests of several actions from the table (reset with reset_by_time triggers it) made
the ``skip_plans`` write fail with ``NoSuchElementException: key not found: action#N`` while the same
requests from a file worked. One tiny topic (docs §1.10, §1.11, §7.4), one stage run, full rows compared.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from pulsar_model.pipeline.stages.plans import run_plans_stage
from pulsar_model.tables.contracts import conform, contract
from pulsar_model.tables.delta_io import DeltaTables

#: What the stages store is under test, not how Spark runs it (tests/spark_conf.py).
pytestmark = pytest.mark.usefixtures("fast_spark_conf")

DAY = dt.date(2026, 11, 1)
VERSION = "4.1.3"
CLUSTER = "c1"
TOPIC = "persistent://t/ns/plans-table"
EXPORT_ID = "e1"
EXPORTED_AT = dt.datetime(2026, 11, 1, 12, 0, tzinfo=dt.UTC)
T0_MS = 1_793_500_000_000
SUB = "sub"
# Ledger 10 (closed, 3 entries) and the current ledger 11 (2 entries, LAC = 11:1), one message of 100 bytes
# per entry. Cursor ``sub``: md = 10:0, 10:2 individually acked (IDM (10:1, 10:2]), rp = 10:1.
ENTRIES = [(10, 0), (10, 1), (10, 2), (11, 0), (11, 1)]


def _pos(ledger: int, entry: int) -> dict[str, int]:
    return {"ledger_id": ledger, "entry_id": entry}


def _frame(spark, table: str, rows: list[dict[str, Any]]):
    c = contract(table)
    data = [tuple(r.get(name) for name in c.column_names) for r in rows]
    return conform(spark.createDataFrame(data, c.spark_schema), table)


def _topic(**fields: Any) -> dict[str, Any]:
    return {"cluster": CLUSTER, "topic": TOPIC, "export_id": EXPORT_ID, "export_date": DAY, **fields}


def _inputs(spark) -> dict[str, list[dict[str, Any]]]:
    return {
        "managed_ledgers": [
            _topic(
                exported_at=EXPORTED_AT,
                partition_index=-1,
                state="LedgerOpened",
                entries_added_counter=5,
                number_of_entries=5,
                total_size_bytes=500,
                current_ledger_id=11,
                current_ledger_entries=2,
                current_ledger_size_bytes=200,
                last_confirmed_entry=_pos(11, 1),
                ledger_count=2,
                cursor_count=1,
            )
        ],
        "ledgers": [
            _topic(
                ledger_id=10, entries=3, size_bytes=300, offloaded=False, is_current=False, ledger_order=0
            ),
            _topic(ledger_id=11, entries=2, size_bytes=200, offloaded=False, is_current=True, ledger_order=1),
        ],
        "cursors": [
            _topic(
                cursor_name=SUB,
                cursor_order=0,
                cursor_kind="subscription",
                is_durable=True,
                is_replicated=False,
                mark_delete_position=_pos(10, 0),
                read_position=_pos(10, 1),
                individually_deleted=[{"lower": _pos(10, 1), "upper": _pos(10, 2)}],
            )
        ],
        "entries": [
            _topic(
                ledger_id=ledger,
                entry_id=entry,
                position=_pos(ledger, entry),
                entry_size_bytes=100,
                payload_size_bytes=90,
                has_checksum=True,
                producer_name="p",
                sequence_id=i,
                publish_time=dt.datetime.fromtimestamp((T0_MS + 1000 * i) / 1000, dt.UTC),
                publish_time_ms=T0_MS + 1000 * i,
                replicate_to=[],
                compression="NONE",
                is_batch=False,
                message_count=1,
                null_value=False,
                is_encrypted=False,
                is_chunk=False,
                source_file="f",
            )
            for i, (ledger, entry) in enumerate(ENTRIES)
        ],
        "messages": [
            _topic(
                ledger_id=ledger,
                entry_id=entry,
                batch_index=-1,
                batch_size=1,
                key_b64_encoded=False,
                payload_size_bytes=90,
                is_null_value=False,
                compacted_out=False,
                producer_name="p",
                sequence_id=i,
                publish_time_ms=T0_MS + 1000 * i,
            )
            for i, (ledger, entry) in enumerate(ENTRIES)
        ],
    }


def _request(request_id: str, action: str, **fields: Any) -> dict[str, Any]:
    return {
        "request_id": request_id,
        "cluster": CLUSTER,
        "topic": TOPIC,
        "action": action,
        "source": "ops",
        **fields,
    }


REQUESTS = [
    _request("skip-1", "skip", cursor_name=SUB, n=1, deleted_entries="Exclude"),
    _request("clear", "clear_backlog", cursor_name=SUB),
    _request("reset-earliest", "reset", cursor_name=SUB, target_kind="earliest"),
    _request("reset-time", "reset_by_time", cursor_name=SUB, timestamp_ms=T0_MS + 3000),
    _request(
        "reader-earliest",
        "reader_start",
        start_kind="earliest",
        inclusive=False,
        rollback_seconds=0,
        read_compacted=False,
        initial_position="Latest",
    ),
    _request(
        "reader-at",
        "reader_start",
        start_kind="message_id",
        start_message_id={"ledger_id": 10, "entry_id": 1, "batch_index": -1},
        inclusive=True,
        rollback_seconds=0,
        read_compacted=False,
        initial_position="Latest",
    ),
]


@pytest.fixture(scope="module")
def stage_from_table(spark, tmp_path_factory):
    tables = DeltaTables(spark, str(tmp_path_factory.mktemp("plans_table_wh")))
    for name, rows in _inputs(spark).items():
        tables.replace_partitions(name, _frame(spark, name, rows), {"export_date": DAY})
    tables.overwrite("plan_requests", _frame(spark, "plan_requests", REQUESTS))
    result = run_plans_stage(tables, DAY, VERSION, run_id="r1")
    return result, tables


def _rows(tables: DeltaTables, table: str) -> dict[str, dict[str, Any]]:
    return {r.request_id: r.asDict(recursive=True) for r in tables.read(table).collect()}


def _derived_columns(table: str, row: dict[str, Any]) -> dict[str, Any]:
    """The columns the writer derives: ``<position>_str`` as Pulsar prints positions, an epoch-ms
    point in time as the naive local datetime PySpark's ``collect`` returns for a TIMESTAMP."""
    derived: dict[str, Any] = {}
    for col in contract(table).columns:
        source = row.get(col.derived_from) if col.derived_from else None
        if not col.derived_from or source is None:
            derived.update({col.name: None} if col.derived_from else {})
        elif col.type_text == "string":
            batch = source.get("batch_index")
            suffix = f":{batch}" if batch is not None and batch >= 0 else ""
            derived[col.name] = f"{source['ledger_id']}:{source['entry_id']}{suffix}"
        else:
            derived[col.name] = dt.datetime.fromtimestamp(source // 1000).replace(
                microsecond=source % 1000 * 1000
            )
    return derived


def _assert_rows(tables: DeltaTables, table: str, expected: dict[str, dict[str, Any]]) -> None:
    """Every row equal to its expected row; a difference is reported as {column: (got, expected)}."""
    got = _rows(tables, table)
    assert sorted(got) == sorted(expected), table
    for request_id, row in expected.items():
        row = {**row, **_derived_columns(table, row)}
        diff = {k: (got[request_id].get(k), row.get(k)) for k in got[request_id].keys() | row.keys()}
        assert not {k: v for k, v in diff.items() if v[0] != v[1]}, (table, request_id, diff)


def _plan(request_id: str, action: str, **fields: Any) -> dict[str, Any]:
    row = dict.fromkeys(contract("skip_plans").column_names)
    row.update(_topic(), request_id=request_id, action=action, cursor_name=SUB, pulsar_version=VERSION)
    row.update(mark_delete_position_before=_pos(10, 0), entries_exported=True, individually_deleted=[])
    # the export says nothing about its entries (no manifest entries section): taken as whole
    row.update(exported_entries_complete=True)
    return {**row, **fields}


def _start(request_id: str, **fields: Any) -> dict[str, Any]:
    row = dict.fromkeys(contract("reader_starts").column_names)
    row.update(_topic(), request_id=request_id, pulsar_version=VERSION, rollback_seconds=0)
    row.update(read_compacted=False, initial_position="Latest")
    return {**row, **fields}


def test_run_plans_stage_answers_cursor_and_reader_requests_from_the_table(stage_from_table):
    """skip 1 (Exclude) lands on 10:1 and the md extends over the acked 10:2; clear_backlog lands on LAC
    and skips the three unacked entries; reset to earliest redelivers the two acked ones (10:0, 10:2);
    reset_by_time finds 10:2, the newest entry before the time, and resets after it (md 10:2, rp 11:0);
    readers start at the first entry or at 10:1 inclusive."""
    (rows, _, counts), tables = stage_from_table
    assert rows == {"skip_plans": 4, "reader_starts": 2}
    assert counts == {"plan_requests_in": 0, "plan_requests_quarantined": 0}
    one = {"skipped_entries": 1, "skipped_messages": 1, "skipped_bytes": 100}
    none = {"skipped_entries": 0, "skipped_messages": 0, "skipped_bytes": 0}
    _assert_rows(
        tables,
        "skip_plans",
        {
            "skip-1": _plan(
                "skip-1",
                "skip",
                n=1,
                deleted_entries="Exclude",
                target_position=_pos(10, 1),
                mark_delete_position=_pos(10, 2),
                read_position=_pos(11, 0),
                **one,
            ),
            "clear": _plan(
                "clear",
                "clear_backlog",
                mark_delete_position=_pos(11, 1),
                read_position=_pos(11, 2),
                skipped_entries=3,
                skipped_messages=3,
                skipped_bytes=300,
            ),
            "reset-earliest": _plan(
                "reset-earliest",
                "reset",
                target_kind="earliest",
                mark_delete_position=_pos(10, -1),
                read_position=_pos(10, -1),
                redelivered_entries=2,
                redelivered_messages=2,
                **none,
            ),
            "reset-time": _plan(
                "reset-time",
                "reset_by_time",
                timestamp_ms=T0_MS + 3000,
                target_position=_pos(10, 2),
                linear_scan_position=_pos(10, 2),
                publish_times_monotonic=True,
                mark_delete_position=_pos(10, 2),
                read_position=_pos(11, 0),
                redelivered_entries=0,
                redelivered_messages=0,
                **one,
            ),
        },
    )
    _assert_rows(
        tables,
        "reader_starts",
        {
            "reader-earliest": _start(
                "reader-earliest",
                start_kind="earliest",
                inclusive=False,
                mark_delete_position=_pos(10, -1),
                read_position=_pos(10, 0),
                first_delivered={"ledger_id": 10, "entry_id": 0, "batch_index": -1},
            ),
            "reader-at": _start(
                "reader-at",
                start_kind="message_id",
                start_message_id={"ledger_id": 10, "entry_id": 1, "batch_index": -1},
                inclusive=True,
                mark_delete_position=_pos(10, 0),
                read_position=_pos(10, 1),
                first_delivered={"ledger_id": 10, "entry_id": 1, "batch_index": -1},
            ),
        },
    )
