"""What the report reads: the run date's rows of each output table, whether its stage ran, and the findings.

Driver-side: every function here runs small Spark jobs (counts, ``orderBy(...).limit(n)``) whose bounded
results are the only data that reach the driver.

**Computed or not.** A table is *computed* for the run date when its stage has a succeeded ``run_log`` row
for that date (a stage that ran and found nothing wrote an empty partition: its zeros are real). A table
that does not exist, or whose stage did not run for the date, is *not computed*: the report says so and
never shows zeros for it. A warehouse without ``run_log`` (tables written by hand or by notebooks) counts a
table as computed when it holds rows for the date.

**Findings** (:func:`findings_frame`): one row per thing an operator should look at, from every computed
table, with a severity (``critical`` > ``warning`` > ``info``), the cluster, topic and subscription, an
impact number that ranks findings of one severity, and the facts the wording needs
(:mod:`pulsar_model.report.findings` turns them into words and a next step).
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_model.tables.contracts import POSITION_TYPE, derive
from pulsar_model.tables.delta_io import DeltaTables

#: Which stage writes each table the report reads.
TABLE_STAGES: Mapping[str, str] = {
    "quarantine": "ingest",
    "cursor_backlog": "backlog",
    "topic_backlog": "backlog",
    "topic_pinning": "backlog",
    "unmoved_cursors": "backlog",
    "quota_status": "quota",
    "quota_evictions": "quota",
    "replication_positions": "replication",
    "replication_failover_duplicates": "replication",
    "replication_findings": "replication",
    "compaction_summary": "compaction",
    "failover_assignments": "failover",
    "failover_balance": "failover",
    "transactions": "transactions",
    "transaction_holdback": "transactions",
    "schema_verdicts": "schemas",
    "topic_history": "history",
    "subscription_history": "history",
    "subscription_status": "history",
    "run_changes": "history",
}

SEVERITIES = ("critical", "warning", "info")


def severity_rank(column: Column) -> Column:
    """0 for critical, 1 for warning, 2 for anything else: order by severity, never alphabetically."""
    return F.when(column == "critical", 0).when(column == "warning", 1).otherwise(2)


@dataclass
class Context:
    """State of one report build: where to read, what was read or missing (and why), the counts gathered."""

    tables: DeltaTables
    run_date: dt.date
    top_rows: int
    read_tables: list[str] = field(default_factory=list)
    missing: dict[str, str] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    frames: dict[str, DataFrame | None] = field(default_factory=dict)
    _stages_run: frozenset[str] | None = None
    _run_log_known: bool | None = None

    def stages_run(self) -> frozenset[str] | None:
        """Stages with a succeeded run_log row for the run date; None when the warehouse has no run_log."""
        if self._run_log_known is None:
            self._run_log_known = self.tables.exists("run_log")
            if self._run_log_known:
                # a dozen rows per run: one task, one job (no exchange for the distinct)
                rows = (
                    self.tables.read("run_log")
                    .where((F.col("run_date") == F.lit(self.run_date)) & (F.col("status") == "succeeded"))
                    .select("stage")
                    .transform(_one_task)
                    .distinct()
                    .collect()
                )
                self._stages_run = frozenset(str(r[0]) for r in rows)
        return self._stages_run

    def _day(self, table: str) -> DataFrame:
        partitions = self.tables.partition_columns(table)
        for column in ("export_date", "run_date"):
            if column in partitions:
                return self.tables.read(table, partition_filter={column: self.run_date})
        df = self.tables.read(table)
        for column in ("export_date", "run_date"):
            if column in df.columns:
                return df.where(F.col(column) == F.lit(self.run_date))
        return df

    def read(self, table: str) -> DataFrame | None:
        """The run date's rows of ``table``, or None (noted in :attr:`missing` with the reason) when the table
        is not computed for the run date (module docstring). Read once per build."""
        if table not in self.frames:
            self.frames[table] = self._read(table)
        return self.frames[table]

    def _read(self, table: str) -> DataFrame | None:
        stage = TABLE_STAGES.get(table, "?")
        if not self.tables.exists(table):
            self.missing[table] = (
                f"the table does not exist: the {stage} stage has never run on this warehouse"
            )
            return None
        df = self._day(table)
        ran = self.stages_run()
        if ran is None:
            if not df.take(1):
                self.missing[table] = (
                    f"no rows for {self.run_date.isoformat()} and no run_log to tell whether the {stage} "
                    "stage ran for it"
                )
                return None
        elif stage not in ran:
            self.missing[table] = f"the {stage} stage did not run for {self.run_date.isoformat()}"
            return None
        self.read_tables.append(table)
        return df

    def read_history(self, table: str) -> tuple[DataFrame, str] | None:
        """Every run of a history table up to the run date, with its date column; None when not computed."""
        if self.read(table) is None:
            return None
        df = self.tables.read(table)
        for column in ("run_date", "export_date"):
            if column in df.columns:
                return df.where(F.col(column) <= F.lit(self.run_date)), column
        return None


def _one_task(df: DataFrame) -> DataFrame:
    """``df`` in one partition: an aggregation over it needs no exchange (the distribution it requires is
    already there), so it runs as one Spark job."""
    return df.coalesce(1)


def aggregate(ctx: Context, table: str, df: DataFrame, **measures: Column) -> dict[str, int]:
    """One Spark job: the row count (kept in ``ctx.rows``) and ``measures`` (nulls read as 0).

    The table's rows go to one task (:func:`_one_task`): a report table has a row per topic or cursor at
    most, and a global aggregate spread over tasks is two jobs (partial sums, then their exchange)."""
    row = (
        _one_task(df)
        .agg(F.count(F.lit(1)).alias("_rows"), *(m.alias(k) for k, m in measures.items()))
        .first()
    )
    values = {} if row is None else row.asDict()
    ctx.rows[table] = int(values.get("_rows") or 0)
    return {k: int(values.get(k) or 0) for k in measures}


def count_if(condition: Column) -> Column:
    return F.sum(F.when(condition, 1).otherwise(0))


def top(df: DataFrame, order: Sequence[Column], limit: int, *, when: int = 1) -> list[dict[str, Any]]:
    """The first ``limit`` rows by ``order`` (a bounded collect) as plain dicts (nested rows too); no Spark
    job when ``when`` is 0 (an aggregate already counted no matching row)."""
    if not when:
        return []
    return [r.asDict(recursive=True) for r in df.orderBy(*order).limit(limit).collect()]


def grouped_counts(df: DataFrame, column: str) -> dict[str, int]:
    """Rows per value of a low-cardinality column (status, severity, verdict): one small job (one task, as
    for :func:`aggregate`)."""
    rows: list[Row] = _one_task(df).groupBy(column).count().limit(100).collect()
    return {str(r[column]): int(r["count"]) for r in rows}


def keys(*more: str) -> list[Column]:
    return [F.col("cluster"), F.col("topic"), *(F.col(c) for c in more)]


# -- findings ------------------------------------------------------------------------------------------


def _facts(**values: Column) -> Column:
    pairs: list[Column] = []
    for name, value in values.items():
        pairs += [F.lit(name), value.cast("string")]
    return F.create_map(*pairs)


def _pos(column: str) -> Column:
    """A position column as the ``L:E`` text the tables' ``<name>_str`` columns hold."""
    return derive(F.col(column), POSITION_TYPE, T.StringType())


def _finding(
    df: DataFrame,
    kind: str,
    severity: Column,
    *,
    cluster: Column | None = None,
    subscription: Column | None = None,
    impact: Column,
    **facts: Column,
) -> DataFrame:
    return df.select(
        severity.alias("severity"),
        F.lit(kind).alias("kind"),
        (cluster if cluster is not None else F.col("cluster")).cast("string").alias("cluster"),
        F.col("topic").cast("string").alias("topic"),
        (subscription if subscription is not None else F.lit(None)).cast("string").alias("subscription"),
        F.coalesce(impact.cast("double"), F.lit(0.0)).alias("impact"),
        _facts(**facts).alias("facts"),
    )


def _quota(df: DataFrame) -> DataFrame:
    return _finding(
        df.where(F.col("exceeded") == F.lit(True)),
        "quota_breach",
        F.when(F.col("is_handled") == F.lit(True), "critical").otherwise("warning"),
        subscription=F.col("slowest_cursor_name"),
        impact=F.col("percent_of_quota"),
        quota_type=F.col("quota_type"),
        percent=F.format_number(F.col("percent_of_quota"), 1),
        limit_size_bytes=F.col("limit_size_bytes"),
        limit_time_seconds=F.col("limit_time_seconds"),
        policy=F.col("policy"),
        source_level=F.col("source_level"),
        handled=F.col("is_handled"),
        namespace=F.col("namespace"),
    )


def _cursor_errors(df: DataFrame) -> DataFrame:
    return _finding(
        df.where(F.col("error").isNotNull()),
        "cursor_error",
        F.lit("warning"),
        subscription=F.col("cursor_name"),
        impact=F.col("entries_in_storage"),
        error=F.col("error"),
        mark_delete=_pos("mark_delete_position"),
    )


def _status(df: DataFrame) -> DataFrame:
    status = F.upper(F.col("status"))
    return _finding(
        df.where(status.isin("STALL", "STOP", "REWIND", "WARN")),
        "subscription_status",
        F.when(status == "WARN", "warning").otherwise("critical"),
        subscription=F.col("cursor_name"),
        impact=F.col("backlog_entries"),
        status=status,
        reason=F.col("status_reason"),
        runs=F.col("window_runs"),
        backlog_entries=F.col("backlog_entries"),
    )


def _stuck(df: DataFrame) -> DataFrame:
    return _finding(
        df.where(F.col("topic_advanced") == F.lit(True)),
        "stuck_cursor",
        F.lit("warning"),
        subscription=F.col("cursor_name"),
        impact=F.col("unmoved_exports"),
        since=F.col("unmoved_since_export_date"),
        exports=F.col("unmoved_exports"),
        mark_delete=_pos("mark_delete_position"),
    )


def _replication(df: DataFrame) -> DataFrame:
    return _finding(
        df.where(F.col("status").isin("stalled", "lagging")),
        "replication_status",
        F.when(F.col("status") == "stalled", "critical").otherwise("warning"),
        cluster=F.col("source_cluster"),
        subscription=F.col("subscription"),
        impact=F.col("remote_behind_entries"),
        status=F.col("status"),
        target=F.col("target_cluster"),
        behind=F.col("remote_behind_entries"),
        reason=F.col("status_reason"),
    )


def _replication_findings(df: DataFrame) -> DataFrame:
    return _finding(
        df,
        "replication_finding",
        F.lower(F.col("severity")),
        subscription=F.col("subscription"),
        impact=F.col("measure"),
        finding=F.col("kind"),
        detail=F.col("detail"),
        related=F.col("related_cluster"),
        measure=F.col("measure"),
    )


def _long_open(df: DataFrame) -> DataFrame:
    return _finding(
        df.where((F.col("state") == "open") & (F.col("is_long_open") == F.lit(True))),
        "long_open_transaction",
        F.lit("warning"),
        impact=F.col("open_age_ms") / 1000,
        txn=F.col("txn_id"),
        most=F.col("txnid_most_bits"),
        least=F.col("txnid_least_bits"),
        open_seconds=(F.col("open_age_ms") / 1000).cast("long"),
        messages=F.col("message_count"),
    )


def _holdback(df: DataFrame) -> DataFrame:
    return _finding(
        df.where(F.col("held_back_entries") > 0),
        "transaction_holdback",
        F.lit("info"),
        impact=F.col("held_back_entries"),
        entries=F.col("held_back_entries"),
        txn=F.col("oldest_open_txn_id"),
    )


def _schemas(df: DataFrame) -> DataFrame:
    return _finding(
        df.where(F.col("verdict") == "incompatible"),
        "schema_incompatible",
        F.lit("warning"),
        impact=F.col("version"),
        version=F.col("version"),
        strategy=F.col("strategy"),
        reason=F.try_element_at(F.col("reasons"), F.lit(1)),
    )


def _failover_mismatch(df: DataFrame) -> DataFrame:
    return _finding(
        df.where(F.col("matches_stats") == F.lit(False)),
        "failover_mismatch",
        F.lit("info"),
        subscription=F.col("subscription"),
        impact=F.col("consumer_count"),
        picked=F.col("active_consumer_name"),
        stats=F.col("stats_active_consumer_name"),
    )


def _failover_balance(df: DataFrame) -> DataFrame:
    return _finding(
        df.where(F.col("imbalance") > 1),
        "failover_imbalance",
        F.lit("info"),
        subscription=F.col("subscription"),
        impact=F.col("imbalance"),
        spread=F.col("imbalance"),
        partitions=F.col("partitions"),
        consumers=F.col("consumers"),
    )


def _compaction(df: DataFrame) -> DataFrame:
    return _finding(
        df.where(F.col("would_trigger") == F.lit(True)),
        "compaction_trigger",
        F.lit("info"),
        impact=F.col("payload_bytes_saved"),
        saved=F.col("payload_bytes_saved"),
        ratio=F.format_number(F.col("savings_ratio") * 100, 0),
    )


def _duplicates(df: DataFrame) -> DataFrame:
    return _finding(
        df.where(F.col("failover_duplicate_messages") > 0),
        "failover_duplicates",
        F.lit("info"),
        cluster=F.col("source_cluster"),
        subscription=F.col("subscription"),
        impact=F.col("failover_duplicate_messages"),
        target=F.col("target_cluster"),
        messages=F.col("failover_duplicate_messages"),
    )


def _pinning(df: DataFrame) -> DataFrame:
    return _finding(
        df.where(F.col("pinned_bytes") > 0),
        "pinned_ledgers",
        F.lit("info"),
        subscription=F.col("slowest_cursor_name"),
        impact=F.col("pinned_bytes"),
        bytes=F.col("pinned_bytes"),
        ledgers=F.col("pinned_ledgers"),
    )


def _quarantine(df: DataFrame) -> DataFrame:
    grouped = df.groupBy("source").agg(
        F.count(F.lit(1)).alias("records"),
        F.min(F.struct("reason_code", "reason", "source_file")).alias("first"),
    )
    return _finding(
        grouped.withColumn("cluster", F.lit(None)).withColumn("topic", F.lit(None)),
        "quarantined_records",
        F.lit("warning"),
        impact=F.col("records"),
        source=F.col("source"),
        records=F.col("records"),
        reason_code=F.col("first.reason_code"),
        reason=F.col("first.reason"),
        file=F.col("first.source_file"),
    )


#: Table -> the findings it yields.
FINDING_QUERIES: Mapping[str, Callable[[DataFrame], DataFrame]] = {
    "quarantine": _quarantine,
    "quota_status": _quota,
    "cursor_backlog": _cursor_errors,
    "subscription_status": _status,
    "unmoved_cursors": _stuck,
    "replication_positions": _replication,
    "replication_findings": _replication_findings,
    "transactions": _long_open,
    "transaction_holdback": _holdback,
    "schema_verdicts": _schemas,
    "failover_assignments": _failover_mismatch,
    "failover_balance": _failover_balance,
    "compaction_summary": _compaction,
    "replication_failover_duplicates": _duplicates,
    "topic_pinning": _pinning,
}


@dataclass(frozen=True)
class FindingRow:
    """One finding as collected: severity, kind, where, the impact that ranks it and its facts."""

    severity: str
    kind: str
    cluster: str | None
    topic: str | None
    subscription: str | None
    impact: float
    facts: Mapping[str, str | None]


@dataclass(frozen=True)
class FindingsResult:
    """The findings of a run date: totals per severity, per cluster × severity and per kind, the top rows in
    rank order, and the tables they were looked for in (those not computed are not checked)."""

    totals: Mapping[str, int]
    by_cluster: Mapping[str, Mapping[str, int]]
    by_kind: Mapping[tuple[str, str], int]
    top: tuple[FindingRow, ...]
    checked_tables: tuple[str, ...]

    @property
    def total(self) -> int:
        return sum(self.totals.values())


def findings_frame(ctx: Context, frames: Mapping[str, DataFrame | None]) -> DataFrame | None:
    """The union of every computed table's findings (None when no table with findings is computed)."""
    parts = [FINDING_QUERIES[t](df) for t, df in frames.items() if df is not None and t in FINDING_QUERIES]
    if not parts:
        return None
    return functools.reduce(DataFrame.unionByName, parts)


def collect_findings(ctx: Context, frames: Mapping[str, DataFrame | None], limit: int) -> FindingsResult:
    """Counts (one job) and the first ``limit`` findings by rank (one job) of :func:`findings_frame`."""
    checked = tuple(t for t, df in frames.items() if df is not None and t in FINDING_QUERIES)
    union = findings_frame(ctx, frames)
    if union is None:
        return FindingsResult(dict.fromkeys(SEVERITIES, 0), {}, {}, (), checked)
    counted = union.groupBy("severity", "kind", "cluster").count().collect()
    totals = dict.fromkeys(SEVERITIES, 0)
    by_cluster: dict[str, dict[str, int]] = {}
    by_kind: dict[tuple[str, str], int] = {}
    for r in counted:
        severity = str(r["severity"]) if r["severity"] in SEVERITIES else "info"
        n = int(r["count"])
        totals[severity] += n
        cluster = str(r["cluster"]) if r["cluster"] is not None else "(no cluster)"
        by_cluster.setdefault(cluster, dict.fromkeys(SEVERITIES, 0))[severity] += n
        by_kind[(severity, str(r["kind"]))] = by_kind.get((severity, str(r["kind"])), 0) + n
    rows = top(
        union,
        [
            severity_rank(F.col("severity")),
            F.col("impact").desc(),
            F.col("kind"),
            F.col("cluster").asc_nulls_last(),
            F.col("topic").asc_nulls_last(),
            F.col("subscription").asc_nulls_last(),
        ],
        limit,
        when=sum(totals.values()),
    )
    found = tuple(
        FindingRow(
            severity=str(r["severity"]),
            kind=str(r["kind"]),
            cluster=r["cluster"],
            topic=r["topic"],
            subscription=r["subscription"],
            impact=float(r["impact"] or 0.0),
            facts=dict(r["facts"] or {}),
        )
        for r in rows
    )
    return FindingsResult(totals, by_cluster, by_kind, found, checked)
