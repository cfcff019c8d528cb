"""Trend analytics across nightly runs: history rows, Burrow-style subscription status, run changes.

Driver-side orchestration only (reads, one tiny query for the previous run dates, two materialisations,
writes); the logic is the pure, lazy transforms of this module. Output tables, partitioned by
``export_date`` (the run date); each run replaces its own date's partition, so a rerun of a date (or a
back-fill of an older one) is idempotent and only ever reads history at or before the run date:

* ``subscription_history`` - one row per (cluster, topic, cursor) per run date: :func:`subscription_history`;
* ``topic_history`` - one row per (cluster, topic) per run date: :func:`topic_history`;
* ``subscription_status`` - one row per durable cursor per run date: :func:`subscription_status`;
* ``run_changes`` - one row per change against the previous run date: :func:`run_changes`.

Inputs: the run date's ``managed_ledgers`` and ``cursors`` (always present after ingest) and, when their
stages have run (the table exists), ``cursor_backlog``, ``topic_backlog``, ``quota_status``,
``compaction_summary``, ``replication_positions``, ``replication_failover_duplicates`` and
``replication_findings``; the history columns of a missing table are null. The history stage applies no
broker semantics of its own: it only compares the other stages' outputs across run dates.

Subscription status (Burrow's consumer lag evaluation rules, adapted)
----------------------------------------------------------------------
Burrow (linkedin/Burrow, "Consumer Lag Evaluation Rules") judges a Kafka consumer by a sliding window of
its last committed offsets and their lags instead of a lag threshold. Here the window is the cursor's
``subscription_history`` rows of the newest ``window_runs`` (K, default 10) run dates up to the run date;
the *offset* is the mark-delete position, the *lag* the precise backlog in entries (docs §1.8,
``cursor_backlog.backlog_entries``), the *head* the topic's LAC. Rules, the first that applies wins:

1. ``UNKNOWN`` - the run date's lag is null (no backlog stage, or the broker would throw);
2. ``OK`` - the run date's lag is 0;
3. ``REWIND`` - the mark-delete went backwards between two consecutive runs of the window (a reset cursor,
   a re-created subscription) and the lag has not been 0 since (Burrow rule 2, with Burrow PR #716's
   "recovered" check: a rewind followed by a run with lag 0 no longer counts);
4. ``OK`` - the lag was 0 in some run of the window (Burrow rule 1);
5. ``UNKNOWN`` - fewer than 2 runs in the window: no trend to judge (a single run with lag 0 is OK by 2);
6. ``STOP`` - the mark-delete did not move over the window, the topic's LAC did not move either (idle
   topic: nobody produces, nobody consumes the rest) and the mark-delete is unchanged for longer than
   ``stop_after_seconds`` (default one day) - Burrow rule 3 ("the consumer stopped committing"), with a
   fixed threshold because nightly snapshots have no per-commit timestamps;
7. ``STALL`` - the mark-delete did not move over the window while there is a backlog (Burrow rule 4):
   producers write (LAC moved), or the topic is idle but for less than the STOP threshold;
8. ``WARN`` - the mark-delete moved but the lag never decreased between two consecutive runs of the
   window (Burrow rule 5: the consumer works but falls behind; a flat lag counts as not decreasing);
9. ``OK`` - otherwise (the consumer moves and the lag dropped at least once: it is catching up).

The time the mark-delete last changed is known only to the export's resolution: the export time of the
first run of the window with the current position, or the exported ``lastMarkDeleteAdvancedTimestamp``
when that is earlier; ``mark_delete_unchanged_seconds`` is therefore a lower bound.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Sequence
from typing import Final

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from pulsar_model.tables.contracts import contract

#: Output tables of the stage, in write order.
OUTPUT_TABLES: Final = ("subscription_history", "topic_history", "subscription_status", "run_changes")
#: Default K: run dates a subscription_status window spans (Burrow's default window is 10 offsets).
DEFAULT_WINDOW_RUNS: Final = 10
#: Default STOP threshold: seconds the mark-delete must be unchanged on an idle topic (one nightly period).
DEFAULT_STOP_AFTER_SECONDS: Final = 86400.0
#: Default threshold of the backlog changes reported in run_changes, in percent of the previous backlog.
DEFAULT_BACKLOG_CHANGE_PERCENT: Final = 50.0

STATUS_OK: Final = "OK"
STATUS_WARN: Final = "WARN"
STATUS_STALL: Final = "STALL"
STATUS_STOP: Final = "STOP"
STATUS_REWIND: Final = "REWIND"
STATUS_UNKNOWN: Final = "UNKNOWN"

#: replication_positions.status, worst first (docs §4.8): the history keeps the worst target's.
REPLICATION_STATUS_SEVERITY: Final = ("stalled", "lagging", "inactive", "in_sync")
QUOTA_TYPE_SIZE: Final = "destination_storage"
QUOTA_TYPE_TIME: Final = "message_age"

_TOPIC_EXPORT = ["cluster", "topic", "export_id"]
_CURSOR = ["cluster", "topic", "cursor_name"]


# -- trend tables -----------------------------------------------------------------------------------------


def _one_row_per_key(keys: list[str], pieces: list[tuple[DataFrame, list[Column]]]) -> DataFrame | None:
    """Side inputs brought to one row per ``keys`` by ONE aggregate over their union (not a join each).

    Each piece is a frame of ``keys`` + its own columns and the aggregations of those columns; rows of the
    other pieces carry nulls there, which the aggregations ignore. None when there is no piece.
    """
    if not pieces:
        return None
    union = functools.reduce(
        lambda a, b: a.unionByName(b, allowMissingColumns=True), [frame for frame, _ in pieces]
    )
    return union.groupBy(*keys).agg(*[agg for _, aggs in pieces for agg in aggs])


def _max_of(columns: tuple[str, ...]) -> list[Column]:
    return [F.max(c).alias(c) for c in columns]


_BACKLOG_COLUMNS = (
    "backlog_entries",
    "backlog_messages",
    "backlog_bytes",
    "exported_entries_complete",
    "estimated_backlog_size_bytes",
    "estimate_minus_exact_bytes",
    "non_precise_backlog_entries",
    "oldest_unacked_age_seconds",
)
_REPLICATION_COLUMNS = {
    "remote_behind_entries": "replication_remote_behind_entries",
    "source_lead_entries": "replication_source_lead_entries",
    "seconds_since_last_update": "replication_seconds_since_last_update",
}
_DUPLICATE_COLUMNS = {
    "failover_duplicate_messages": "failover_duplicate_messages",
    "failover_duplicate_entries": "failover_duplicate_entries",
    "failover_duplicate_bytes": "failover_duplicate_bytes",
    "consumed_on_source_entries_upper_bound": "failover_duplicate_entries_upper_bound",
}


def _source_keys() -> list[Column]:
    """The subscription key of a replication row, the source cluster being the cursor's cluster."""
    return [
        F.col("source_cluster").alias("cluster"),
        F.col("topic"),
        F.col("subscription").alias("cursor_name"),
        F.col("export_id"),
    ]


def subscription_history(
    managed_ledgers: DataFrame,
    cursors: DataFrame,
    cursor_backlog: DataFrame | None = None,
    replication_positions: DataFrame | None = None,
    replication_failover_duplicates: DataFrame | None = None,
) -> DataFrame:
    """One row per (cluster, topic, export, cursor_name): the ``subscription_history`` row of one run date.

    Every cursor of ``cursors`` whose topic has a ``managed_ledgers`` row, with the topic's export time and
    LAC; the exact backlog and the broker's estimate from ``cursor_backlog`` (docs §1.8, §2.4); for a
    replicated subscription, this cluster being the source, the worst target's translation lag from
    ``replication_positions`` (targets counted, status by severity stalled > lagging > inactive > in_sync,
    largest lags; docs §4.4) and the largest failover duplicates from ``replication_failover_duplicates``
    (docs §4.8). An input passed as None (its stage did not run) leaves its columns null. Pure and lazy.
    """
    keys = [*_TOPIC_EXPORT, "cursor_name"]
    pieces: list[tuple[DataFrame, list[Column]]] = []
    if cursor_backlog is not None:
        pieces.append((cursor_backlog.select(*keys, *_BACKLOG_COLUMNS), _max_of(_BACKLOG_COLUMNS)))
    if replication_positions is not None:
        severity = F.array(*[F.lit(s) for s in REPLICATION_STATUS_SEVERITY])
        rank = F.coalesce(
            F.array_position(severity, F.col("status")), F.lit(len(REPLICATION_STATUS_SEVERITY))
        )
        frame = replication_positions.select(
            *_source_keys(),
            F.lit(1).alias("_target"),
            rank.cast("int").alias("_severity"),
            *[F.col(c).alias(name) for c, name in _REPLICATION_COLUMNS.items()],
        )
        aggs = [
            F.sum("_target").cast("int").alias("replication_targets"),
            # try_element_at: under ANSI, Spark 4.1's element_at of a literal array at a NULL index (a key
            # without replication rows) returns the array's last element instead of null.
            F.try_element_at(severity, F.min("_severity")).alias("replication_status"),
            *_max_of(tuple(_REPLICATION_COLUMNS.values())),
        ]
        pieces.append((frame, aggs))
    if replication_failover_duplicates is not None:
        frame = replication_failover_duplicates.select(
            *_source_keys(), *[F.col(c).alias(name) for c, name in _DUPLICATE_COLUMNS.items()]
        )
        pieces.append((frame, _max_of(tuple(_DUPLICATE_COLUMNS.values()))))
    rows = cursors.select(
        *_TOPIC_EXPORT,
        "export_date",
        "cursor_name",
        "cursor_kind",
        "is_durable",
        "subscription_type",
        F.col("stats_consumer_count").alias("consumers"),
        "mark_delete_position",
        "stats_last_mark_delete_advanced_at",
        "stats_msg_backlog",
    ).join(managed_ledgers.select(*_TOPIC_EXPORT, "exported_at", "last_confirmed_entry"), _TOPIC_EXPORT)
    side = _one_row_per_key(keys, pieces)
    return rows if side is None else rows.join(side, keys, "left")


def topic_history(
    managed_ledgers: DataFrame,
    subscription_history_rows: DataFrame,
    topic_backlog: DataFrame | None = None,
    quota_status: DataFrame | None = None,
    compaction_summary: DataFrame | None = None,
    replication_findings: DataFrame | None = None,
) -> DataFrame:
    """One row per (cluster, topic, export): the ``topic_history`` row of one run date.

    The broker's backlogSize estimate (``topic_backlog``, docs §2.3) beside the stats value and the largest
    exact backlog of a durable cursor (from the same run date's :func:`subscription_history` rows, i.e.
    ``cursor_backlog``, docs §1.8); the size and time quota rows of ``quota_status`` side by side (limit,
    ``percent_of_quota``, the check's result, docs §3.4); compaction savings (``compaction_summary``,
    docs §5.5); the topic's count of ``replication_findings`` (0 when the table exists without a finding for
    the topic). None inputs leave their columns null. Pure and lazy.
    """
    durable = F.col("is_durable")
    pieces: list[tuple[DataFrame, list[Column]]] = [
        (
            subscription_history_rows.select(
                *_TOPIC_EXPORT, "is_durable", "backlog_entries", "backlog_bytes"
            ),
            [
                F.count(F.when(durable, F.lit(1))).cast("int").alias("durable_cursors"),
                F.max(F.when(durable, F.col("backlog_entries"))).alias("exact_backlog_entries"),
                F.max(F.when(durable, F.col("backlog_bytes"))).alias("exact_backlog_bytes"),
            ],
        )
    ]
    if topic_backlog is not None:
        column = ("estimated_backlog_size_bytes",)
        pieces.append((topic_backlog.select(*_TOPIC_EXPORT, *column), _max_of(column)))
    if quota_status is not None:
        is_size = F.col("quota_type") == F.lit(QUOTA_TYPE_SIZE)
        is_time = F.col("quota_type") == F.lit(QUOTA_TYPE_TIME)
        per_type = {
            "size_limit_bytes": F.when(is_size, F.col("limit_size_bytes")),
            "size_percent_of_quota": F.when(is_size, F.col("percent_of_quota")),
            "size_exceeded": F.when(is_size, F.col("size_exceeded")),
            "time_limit_seconds": F.when(is_time, F.col("limit_time_seconds")),
            "time_percent_of_quota": F.when(is_time, F.col("percent_of_quota")),
            "time_exceeded": F.when(is_time, F.col("time_exceeded")),
            "quota_handled_type": F.col("handled_type"),
        }
        frame = quota_status.select(*_TOPIC_EXPORT, *[c.alias(name) for name, c in per_type.items()])
        pieces.append((frame, _max_of(tuple(per_type))))
    if compaction_summary is not None:
        renamed = {
            "payload_bytes_before": "compaction_payload_bytes_before",
            "payload_bytes_saved": "compaction_payload_bytes_saved",
            "savings_ratio": "compaction_savings_ratio",
            "would_trigger": "compaction_would_trigger",
        }
        frame = compaction_summary.select(*_TOPIC_EXPORT, *[F.col(c).alias(n) for c, n in renamed.items()])
        pieces.append((frame, _max_of(tuple(renamed.values()))))
    if replication_findings is not None:
        frame = replication_findings.select(*_TOPIC_EXPORT, F.lit(1).alias("_finding"))
        pieces.append((frame, [F.count("_finding").alias("_findings")]))
    # the managed-ledger row is one more piece (flagged), not a join: one shuffle for the whole table
    topic_columns = (
        "export_date",
        "exported_at",
        "partitioned_topic",
        "last_confirmed_entry",
        "total_size_bytes",
        "stats_backlog_size_bytes",
    )
    pieces.insert(
        0,
        (
            managed_ledgers.select(*_TOPIC_EXPORT, *topic_columns, F.lit(True).alias("_managed")),
            [*_max_of(topic_columns), F.bool_or("_managed").alias("_managed")],
        ),
    )
    side = _one_row_per_key(_TOPIC_EXPORT, pieces)
    assert side is not None  # the managed-ledger piece is always there
    joined = side.where(F.col("_managed"))
    findings = F.coalesce(F.col("_findings"), F.lit(0)) if replication_findings is not None else F.lit(None)
    estimate = F.col("estimated_backlog_size_bytes") if topic_backlog is not None else F.lit(None)
    return joined.select(
        *[c for c in joined.columns if c not in ("durable_cursors", "_findings", "_managed")],
        F.coalesce(F.col("durable_cursors"), F.lit(0)).alias("durable_cursors"),
        (estimate - F.col("exact_backlog_bytes")).cast("long").alias("estimate_minus_exact_bytes"),
        findings.cast("long").alias("replication_findings"),
    )


# -- subscription status ----------------------------------------------------------------------------------


def window_run_dates(history: DataFrame, run_date: dt.date, window_runs: int) -> DataFrame:
    """One row: ``window_start_date``, the oldest of the newest ``window_runs`` run dates <= ``run_date``
    present in ``history`` (no row when there is none). Pure and lazy."""
    if window_runs < 1:
        raise ValueError(f"window_runs={window_runs} must be at least 1 (run dates in the status window)")
    dates = F.sort_array(F.collect_set("export_date"), asc=False)
    return (
        history.where(F.col("export_date") <= F.lit(run_date))
        .agg(dates.alias("_dates"))
        .where(F.size("_dates") > 0)
        .select(
            F.element_at("_dates", F.least(F.size("_dates"), F.lit(window_runs))).alias("window_start_date")
        )
    )


def subscription_status(
    history: DataFrame,
    run_date: dt.date,
    *,
    window_runs: int = DEFAULT_WINDOW_RUNS,
    stop_after_seconds: float = DEFAULT_STOP_AFTER_SECONDS,
    run_dates: Sequence[dt.date] | None = None,
) -> DataFrame:
    """One row per durable (cluster, topic, cursor_name) present on ``run_date``: its Burrow-style status.

    ``history`` holds ``subscription_history`` rows of any run dates (later ones are ignored). The window is
    the newest ``window_runs`` run dates <= ``run_date`` present in ``history``; within it each cursor's
    rows are compared with the cursor's previous row (a window over run dates per cursor, then one
    aggregate per cursor). Rules in the module docstring. ``run_dates``: the run dates ``history`` holds
    rows of, when the caller knows them already (a stage reads them from the table's Delta log); the
    window is then cut at a literal date instead of by :func:`window_run_dates`, an aggregate over
    ``history`` and its own Spark jobs. A date listed without rows only narrows the window; ``run_date``
    itself need not be listed (without rows of ``run_date`` there is no output row). Pure and lazy.
    """
    rows = history.where(F.col("is_durable") & (F.col("export_date") <= F.lit(run_date)))
    if run_dates is None:
        start = window_run_dates(history, run_date, window_runs)
        rows = rows.join(F.broadcast(start), F.col("export_date") >= F.col("window_start_date"), "inner")
    else:
        if window_runs < 1:
            raise ValueError(f"window_runs={window_runs} must be at least 1 (run dates in the status window)")
        window = sorted({d for d in run_dates if d <= run_date} | {run_date}, reverse=True)[:window_runs]
        rows = rows.where(F.col("export_date") >= F.lit(window[-1]))
    order = Window.partitionBy(*_CURSOR).orderBy("export_date")
    has_previous = F.lag("export_date").over(order).isNotNull()
    md, previous_md = F.col("mark_delete_position"), F.lag("mark_delete_position").over(order)
    lag, previous_lag = F.col("backlog_entries"), F.lag("backlog_entries").over(order)
    lac, previous_lac = F.col("last_confirmed_entry"), F.lag("last_confirmed_entry").over(order)
    steps = rows.select(
        "*",
        (has_previous & (md != previous_md)).alias("_md_changed"),
        (has_previous & (md < previous_md)).alias("_md_rewound"),
        (has_previous & ~lac.eqNullSafe(previous_lac)).alias("_lac_changed"),
        (lag < previous_lag).alias("_lag_decreased"),
    )
    newest = F.col("export_date")

    def current(name: str) -> Column:
        return F.max_by(F.col(name), newest).alias(name)

    per_cursor = (
        steps.groupBy(*_CURSOR)
        .agg(
            F.max("export_date").alias("_newest_date"),
            current("export_id"),
            current("cursor_kind"),
            current("backlog_entries"),
            current("mark_delete_position"),
            current("exported_at"),
            current("stats_last_mark_delete_advanced_at"),
            F.count(F.lit(1)).cast("int").alias("window_runs"),
            F.min("export_date").alias("window_start_date"),
            F.min("backlog_entries").alias("backlog_entries_min"),
            F.max("backlog_entries").alias("backlog_entries_max"),
            F.coalesce(F.bool_or(lag == 0), F.lit(False)).alias("lag_zero_in_window"),
            F.coalesce(F.bool_or("_lag_decreased"), F.lit(False)).alias("lag_decreased"),
            F.bool_or("_md_changed").alias("mark_delete_moved"),
            F.max(F.when(F.col("_md_rewound"), newest)).alias("last_rewind_date"),
            F.max(F.when(lag == 0, newest)).alias("last_lag_zero_date"),
            F.bool_or("_lac_changed").alias("lac_moved"),
            F.coalesce(F.max(F.when(F.col("_md_changed"), F.col("exported_at"))), F.min("exported_at")).alias(
                "_current_md_since"
            ),
        )
        .where(F.col("_newest_date") == F.lit(run_date))
    )
    changed_at = F.least(F.col("_current_md_since"), F.col("stats_last_mark_delete_advanced_at"))
    with_times = per_cursor.select(
        "*",
        changed_at.alias("last_mark_delete_change_at"),
        (F.col("exported_at").cast("double") - changed_at.cast("double")).alias(
            "mark_delete_unchanged_seconds"
        ),
    )
    status, reason = _status_rules(stop_after_seconds)
    return with_times.select(
        *_CURSOR,
        "export_id",
        F.col("_newest_date").alias("export_date"),
        "cursor_kind",
        status.alias("status"),
        reason.alias("status_reason"),
        "window_runs",
        F.lit(window_runs).cast("int").alias("window_runs_limit"),
        "window_start_date",
        "backlog_entries",
        "backlog_entries_min",
        "backlog_entries_max",
        "lag_zero_in_window",
        "lag_decreased",
        "mark_delete_position",
        "mark_delete_moved",
        "last_rewind_date",
        "last_lag_zero_date",
        "lac_moved",
        "last_mark_delete_change_at",
        "mark_delete_unchanged_seconds",
        F.lit(float(stop_after_seconds)).alias("stop_after_seconds"),
    )


def _status_rules(stop_after_seconds: float) -> tuple[Column, Column]:
    """``status`` and ``status_reason`` over the per-cursor window aggregates (rules 1-9 of the module)."""
    lag = F.col("backlog_entries")
    rewind_unrecovered = F.col("last_rewind_date").isNotNull() & (
        F.col("last_lag_zero_date").isNull() | (F.col("last_rewind_date") > F.col("last_lag_zero_date"))
    )
    idle_too_long = ~F.col("lac_moved") & (F.col("mark_delete_unchanged_seconds") > F.lit(stop_after_seconds))
    runs, first_lag = F.col("window_runs"), F.col("backlog_entries_min")
    rules: list[tuple[Column, str, Column]] = [
        (
            lag.isNull(),
            STATUS_UNKNOWN,
            F.lit("no precise backlog on the run date (backlog stage missing or error)"),
        ),
        (lag == 0, STATUS_OK, F.lit("no backlog on the run date")),
        (
            rewind_unrecovered,
            STATUS_REWIND,
            F.format_string(
                "mark-delete moved backwards on %s and the backlog has not been 0 since (%d entries now)",
                F.col("last_rewind_date").cast("string"),
                lag,
            ),
        ),
        (
            F.col("lag_zero_in_window"),
            STATUS_OK,
            F.format_string(
                "backlog was 0 on %s, inside the window of %d runs",
                F.col("last_lag_zero_date").cast("string"),
                runs,
            ),
        ),
        (runs < 2, STATUS_UNKNOWN, F.lit("a single run in the window: no trend to judge yet")),
        (
            ~F.col("mark_delete_moved") & idle_too_long,
            STATUS_STOP,
            F.format_string(
                "mark-delete unchanged for %.0f s (> %.0f s) with %d entries of backlog on an idle topic "
                "(LAC unchanged over %d runs)",
                F.col("mark_delete_unchanged_seconds"),
                F.lit(float(stop_after_seconds)),
                lag,
                runs,
            ),
        ),
        (
            ~F.col("mark_delete_moved"),
            STATUS_STALL,
            F.when(
                F.col("lac_moved"),
                F.format_string(
                    "mark-delete unchanged over %d runs while producers write (LAC moved); backlog %d",
                    runs,
                    lag,
                ),
            ).otherwise(
                F.format_string(
                    "mark-delete unchanged over %d runs with %d entries of backlog on an idle topic, "
                    "for %.0f s (STOP after %.0f s)",
                    runs,
                    lag,
                    F.col("mark_delete_unchanged_seconds"),
                    F.lit(float(stop_after_seconds)),
                )
            ),
        ),
        (
            ~F.col("lag_decreased"),
            STATUS_WARN,
            F.format_string(
                "mark-delete moves but the backlog never decreased over %d runs (%d to %d entries)",
                runs,
                first_lag,
                F.col("backlog_entries_max"),
            ),
        ),
    ]
    status: Column | None = None
    reason: Column | None = None
    for condition, name, text in rules:
        status = F.when(condition, F.lit(name)) if status is None else status.when(condition, F.lit(name))
        reason = F.when(condition, text) if reason is None else reason.when(condition, text)
    assert status is not None and reason is not None
    ok_text = F.lit("mark-delete moves and the backlog decreased within the window (catching up)")
    return status.otherwise(F.lit(STATUS_OK)), reason.otherwise(ok_text)


# -- run changes ------------------------------------------------------------------------------------------


def _candidate(
    condition: Column,
    change_type: str,
    detail: Column,
    *,
    subscription: Column | None = None,
    item: Column | None = None,
    old_value: Column | None = None,
    new_value: Column | None = None,
    change_percent: Column | None = None,
) -> Column:
    """A run_changes row as a struct when ``condition`` holds (null condition = no change), else null."""

    def text(c: Column | None) -> Column:
        return F.lit(None).cast("string") if c is None else c.cast("string")

    row = F.struct(
        F.lit(change_type).alias("change_type"),
        text(subscription).alias("subscription"),
        text(item).alias("item"),
        text(old_value).alias("old_value"),
        text(new_value).alias("new_value"),
        (F.lit(None) if change_percent is None else change_percent).cast("double").alias("change_percent"),
        detail.cast("string").alias("detail"),
    )
    return F.when(F.coalesce(condition, F.lit(False)), row)


def _rows_of(per_key: DataFrame, keys: list[str], candidates: list[Column]) -> DataFrame:
    """One row per non-null candidate struct of each ``per_key`` row (keys kept)."""
    changes = F.filter(F.array(*candidates), lambda c: c.isNotNull())
    return per_key.select(*keys, F.inline(changes))


def _percent_change(old: Column, new: Column) -> Column:
    """100 * (new - old) / old; null when old is 0 or either is null."""
    return F.when(old != 0, (new - old) * F.lit(100.0) / old)


def _backlog_moved(old: Column, new: Column, threshold_percent: float) -> Column:
    """Both known and ``new`` moved by at least ``threshold_percent`` of ``old`` (any growth from 0)."""
    return (
        old.isNotNull()
        & new.isNotNull()
        & F.when(old == 0, new > 0).otherwise(F.abs(_percent_change(old, new)) >= F.lit(threshold_percent))
    )


def _side(now: Column, column: str, on_run_date: bool) -> Column:
    """``column`` of the run date's row (or of the previous run date's row) within one key's group."""
    return F.max(F.when(now if on_run_date else ~now, F.col(column)))


def run_changes(
    topic_history_rows: DataFrame,
    subscription_history_rows: DataFrame,
    subscription_status_rows: DataFrame,
    replication_findings: DataFrame | None,
    run_date: dt.date,
    previous_date: dt.date | None,
    *,
    backlog_change_percent: float = DEFAULT_BACKLOG_CHANGE_PERCENT,
) -> DataFrame:
    """One row per change between ``run_date`` and ``previous_date`` (the newest run date before it, as the
    caller found it in ``topic_history``); no rows when ``previous_date`` is None. Inputs may hold rows of
    other dates (ignored). Each entity's two rows meet in one aggregate per key (no join per change kind).

    Changes: topics (``topic_history``) and durable cursors (``subscription_history``) added / removed;
    ``subscription_status`` changed; a subscription's precise backlog entries or a topic's backlogSize
    estimate moving by at least ``backlog_change_percent`` percent of the previous value (any growth from 0
    counts; ``change_percent`` null then); a size or time quota check turning exceeded (started; also on a
    new topic) or no longer exceeded (ended, topic still present); a replication finding (kind, cluster,
    topic, subscription, related cluster) absent on the previous run date. Pure and lazy.
    """
    schema = contract("run_changes").spark_schema
    spark = topic_history_rows.sparkSession
    if previous_date is None:
        return spark.createDataFrame([], schema)
    both = F.col("export_date").isin(F.lit(run_date), F.lit(previous_date))
    now = F.col("export_date") == F.lit(run_date)
    parts = [
        _topic_changes(topic_history_rows.where(both), now, backlog_change_percent),
        _subscription_changes(
            subscription_history_rows.where(both & F.col("is_durable")),
            subscription_status_rows.where(both),
            now,
            backlog_change_percent,
        ),
    ]
    if replication_findings is not None:
        parts.append(_finding_changes(replication_findings.where(both), now))
    changes = functools.reduce(DataFrame.unionByName, parts)
    return changes.select(
        F.lit(run_date).alias("export_date"), F.lit(previous_date).alias("previous_export_date"), "*"
    )


def _topic_changes(topics: DataFrame, now: Column, threshold: float) -> DataFrame:
    """Topic added / removed, backlogSize estimate moved, size / time quota breach started / ended."""
    keys = ["cluster", "topic"]
    columns = (
        "estimated_backlog_size_bytes",
        "size_exceeded",
        "size_percent_of_quota",
        "time_exceeded",
        "time_percent_of_quota",
    )
    per_topic = topics.groupBy(*keys).agg(
        F.bool_or(now).alias("_now"),
        F.bool_or(~now).alias("_before"),
        *[_side(now, c, True).alias(f"{c}_now") for c in columns],
        *[_side(now, c, False).alias(f"{c}_before") for c in columns],
    )
    present_now, present_before = F.col("_now"), F.col("_before")
    old, new = F.col("estimated_backlog_size_bytes_before"), F.col("estimated_backlog_size_bytes_now")
    candidates = [
        _candidate(
            present_now & ~present_before,
            "topic_added",
            F.lit("topic present on the run date, absent on the previous run date"),
        ),
        _candidate(
            present_before & ~present_now,
            "topic_removed",
            F.lit("topic absent on the run date, present on the previous run date"),
        ),
        _candidate(
            _backlog_moved(old, new, threshold),
            "topic_backlog_changed",
            F.format_string("backlogSize estimate %d -> %d bytes", old, new),
            old_value=old,
            new_value=new,
            change_percent=_percent_change(old, new),
        ),
    ]
    for quota_type, prefix in ((QUOTA_TYPE_SIZE, "size"), (QUOTA_TYPE_TIME, "time")):
        exceeded_now = F.coalesce(F.col(f"{prefix}_exceeded_now"), F.lit(False))
        exceeded_before = F.coalesce(F.col(f"{prefix}_exceeded_before"), F.lit(False))
        pct_now, pct_before = (
            F.col(f"{prefix}_percent_of_quota_now"),
            F.col(f"{prefix}_percent_of_quota_before"),
        )
        for change_type, condition, words in (
            ("quota_breach_started", present_now & exceeded_now & ~exceeded_before, "now exceeded"),
            ("quota_breach_ended", present_now & exceeded_before & ~exceeded_now, "no longer exceeded"),
        ):
            candidates.append(
                _candidate(
                    condition,
                    change_type,
                    F.format_string(
                        "%s quota %s (percent of quota %s -> %s)",
                        F.lit(quota_type),
                        F.lit(words),
                        F.coalesce(F.format_number(pct_before, 1), F.lit("n/a")),
                        F.coalesce(F.format_number(pct_now, 1), F.lit("n/a")),
                    ),
                    item=F.lit(quota_type),
                    old_value=pct_before,
                    new_value=pct_now,
                )
            )
    return _rows_of(per_topic, keys, candidates)


def _subscription_changes(history: DataFrame, status: DataFrame, now: Column, threshold: float) -> DataFrame:
    """Durable cursor added / removed, status changed, precise backlog moved."""
    rows = history.select(
        *_CURSOR, "export_date", "cursor_kind", "backlog_entries", F.lit(True).alias("_in_history")
    ).unionByName(
        status.select(*_CURSOR, "export_date", "status", "status_reason", F.lit(False).alias("_in_history")),
        allowMissingColumns=True,
    )
    in_history = F.col("_in_history")
    per_cursor = rows.groupBy(*_CURSOR).agg(
        F.bool_or(now & in_history).alias("_now"),
        F.bool_or(~now & in_history).alias("_before"),
        F.max("cursor_kind").alias("cursor_kind"),
        _side(now, "backlog_entries", True).alias("_lag_now"),
        _side(now, "backlog_entries", False).alias("_lag_before"),
        _side(now, "status", True).alias("_status_now"),
        _side(now, "status", False).alias("_status_before"),
        _side(now, "status_reason", True).alias("_reason_now"),
    )
    present_now, present_before = F.col("_now"), F.col("_before")
    old, new = F.col("_lag_before"), F.col("_lag_now")
    status_now, status_before = F.col("_status_now"), F.col("_status_before")
    cursor = F.col("cursor_name")
    candidates = [
        _candidate(
            present_now & ~present_before,
            "subscription_added",
            F.format_string("new %s cursor", F.col("cursor_kind")),
            subscription=cursor,
        ),
        _candidate(
            present_before & ~present_now,
            "subscription_removed",
            F.format_string("%s cursor no longer exported", F.col("cursor_kind")),
            subscription=cursor,
        ),
        _candidate(
            status_now != status_before,
            "status_changed",
            F.format_string("%s -> %s: %s", status_before, status_now, F.col("_reason_now")),
            subscription=cursor,
            old_value=status_before,
            new_value=status_now,
        ),
        _candidate(
            _backlog_moved(old, new, threshold),
            "subscription_backlog_changed",
            F.format_string("backlog %d -> %d entries", old, new),
            subscription=cursor,
            old_value=old,
            new_value=new,
            change_percent=_percent_change(old, new),
        ),
    ]
    return _rows_of(per_cursor, ["cluster", "topic"], candidates)


def _finding_changes(findings: DataFrame, now: Column) -> DataFrame:
    """Findings of the run date without an equal (kind, cluster, topic, subscription, related) one before
    (grouping treats null subscriptions / related clusters as equal)."""
    keys = ["kind", "cluster", "topic", "subscription", "related_cluster"]
    per_finding = findings.groupBy(*keys).agg(
        F.bool_or(now).alias("_now"),
        F.bool_or(~now).alias("_before"),
        _side(now, "severity", True).alias("_severity"),
        _side(now, "detail", True).alias("_detail"),
        _side(now, "measure", True).alias("_measure"),
    )
    candidate = _candidate(
        F.col("_now") & ~F.col("_before"),
        "replication_finding_new",
        F.format_string("new %s finding: %s", F.col("_severity"), F.col("_detail")),
        subscription=F.col("subscription"),
        item=F.concat_ws(" -> ", F.col("kind"), F.col("related_cluster")),
        new_value=F.col("_measure"),
    )
    return _rows_of(per_finding, ["cluster", "topic"], [candidate])


# -- the stage ----------------------------------------------------------------------------------------------
