"""The nightly ``history`` stage (runs last): reads the run date's tables and the previous runs' history,
applies the transforms of :mod:`pulsar_model.history` and writes ``subscription_history``,
``topic_history``, ``subscription_status`` and ``run_changes`` (the previous run dates from the Delta log,
the run date's subscription rows materialised once, the status too when run_changes reads it; one write).
"""

from __future__ import annotations

import datetime as dt
import logging

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pulsar_model.history import (
    DEFAULT_BACKLOG_CHANGE_PERCENT,
    DEFAULT_STOP_AFTER_SECONDS,
    DEFAULT_WINDOW_RUNS,
    OUTPUT_TABLES,
    run_changes,
    subscription_history,
    subscription_status,
    topic_history,
)
from pulsar_model.tables.contracts import conform, contract
from pulsar_model.tables.delta_io import DeltaTables
from pulsar_model.tables.stage_io import read_day, write_day_outputs

log = logging.getLogger(__name__)


def previous_run_dates(tables: DeltaTables, run_date: dt.date, limit: int) -> list[dt.date]:
    """The newest ``limit`` run dates before ``run_date`` in ``topic_history``, newest first (its partition
    values, read from the Delta log where the backend can: they bound the history reads)."""
    if limit < 1 or not tables.exists("topic_history"):
        return []
    values = tables.partition_values("topic_history", "export_date")
    earlier = sorted((d for d in values if isinstance(d, dt.date) and d < run_date), reverse=True)
    return earlier[:limit]


def _dates_with_rows(tables: DeltaTables, name: str, dates: list[dt.date]) -> list[dt.date]:
    """Those of ``dates`` for which table ``name`` has a partition (from the Delta log where the backend
    reads it): the earlier run dates the status window can hold."""
    if not dates or not tables.exists(name):
        return []
    present = set(tables.partition_values(name, "export_date"))
    return [d for d in dates if d in present]


def run_history_stage(
    tables: DeltaTables,
    run_date: dt.date,
    default_version: str,
    *,
    window_runs: int = DEFAULT_WINDOW_RUNS,
    stop_after_seconds: float = DEFAULT_STOP_AFTER_SECONDS,
    backlog_change_percent: float = DEFAULT_BACKLOG_CHANGE_PERCENT,
) -> tuple[dict[str, int], dict[str, int]]:
    """Compute and write the stage's tables for ``run_date``; return (rows written, table versions).

    Every table's ``run_date`` partition is replaced, also by an empty result; history of later dates is
    never read, so reruns and back-fills are idempotent. The history read is the newest ``window_runs - 1``
    run dates before ``run_date`` (at least the previous one, for run_changes). ``default_version`` is
    accepted for the stage signature only: the history compares the other stages' outputs and applies no
    broker semantics.
    """
    del default_version  # no version-dependent rule here (see the docstring)
    if window_runs < 1:
        raise ValueError(f"window_runs={window_runs} must be at least 1 (run dates in the status window)")
    day = {"export_date": run_date}
    earlier_dates = previous_run_dates(tables, run_date, max(window_runs - 1, 1))
    previous_date = earlier_dates[0] if earlier_dates else None
    for name in OUTPUT_TABLES:
        c = contract(name)
        tables.create(name, c.spark_schema, c.partitioned_by, description=c.description)
    managed = tables.read("managed_ledgers", partition_filter=day)
    findings_today = read_day(tables, "replication_findings", day)
    # The run date's rows feed their own table, the status window and the changes: materialised once each
    # (eager, lineage cut) so the later plans stay small.
    subs_today = conform(
        subscription_history(
            managed,
            tables.read("cursors", partition_filter=day),
            read_day(tables, "cursor_backlog", day),
            read_day(tables, "replication_positions", day),
            read_day(tables, "replication_failover_duplicates", day),
        ),
        "subscription_history",
    ).localCheckpoint()
    topics_today = conform(
        topic_history(
            managed,
            subs_today,
            read_day(tables, "topic_backlog", day),
            read_day(tables, "quota_status", day),
            read_day(tables, "compaction_summary", day),
            findings_today,
        ),
        "topic_history",
    )

    def with_earlier(name: str, today: DataFrame) -> DataFrame:
        if not earlier_dates:
            return today
        earlier = tables.read(name).where(F.col("export_date").isin(*[F.lit(d) for d in earlier_dates]))
        return earlier.select(*today.columns).unionByName(today)

    subs_all = with_earlier("subscription_history", subs_today)
    status_today = conform(
        subscription_status(
            subs_all,
            run_date,
            window_runs=window_runs,
            stop_after_seconds=stop_after_seconds,
            run_dates=_dates_with_rows(tables, "subscription_history", earlier_dates),
        ),
        "subscription_status",
    )
    if previous_date is not None:
        # read by its own write and by run_changes: computed once
        status_today = status_today.localCheckpoint()
    changes = conform(
        run_changes(
            with_earlier("topic_history", topics_today),
            subs_all,
            with_earlier("subscription_status", status_today),
            tables.read("replication_findings") if findings_today is not None else None,
            run_date,
            previous_date,
            backlog_change_percent=backlog_change_percent,
        ),
        "run_changes",
    )
    outputs = {
        "subscription_history": subs_today,
        "topic_history": topics_today,
        "subscription_status": status_today,
        "run_changes": changes,
    }
    rows, versions_written = write_day_outputs(tables, day, outputs, stage="history")
    return rows, versions_written
