"""The nightly HTML report: one self-contained static file per run date, and a short terminal summary.

:func:`build_report` reads the run date's partitions of the nightly output tables (README "Tables"),
aggregates each table to a small frame with Spark (counts, sums and ``orderBy(...).limit(n)``; only those
bounded results reach the driver) and writes ONE HTML file that opens offline: no scripts, no external
style sheets, fonts or images; the plots are inline SVG drawn here. A Content-Security-Policy ``meta``
(``default-src 'none'``) makes the browser refuse any script or remote load, as a second line of defence
behind the escaping: every string that comes from the data goes through :func:`html.escape`
(control characters replaced), so a topic named ``<script>alert(1)</script>`` renders as text.

Sections (each table is optional: a table that does not exist makes its part say "not computed for this
run"): backlog (exact vs estimated bytes per cursor, docs §1.8, §2.3-2.5; pinning §1.11), backlog quotas
(proximity and the eviction preview, §3), replication (cursor translation status, failover duplicates per
subscription, findings, §4), compaction savings (§5), failover balance (§6), transactions (§8), schema
verdicts (§9) and history (trends from ``topic_history`` / ``subscription_history``, Burrow-style
``subscription_status``, ``run_changes``).

:func:`format_terminal_summary` turns the returned :class:`ReportSummary` into a few lines for the terminal.
Driver-side module (like the stages): it reads tables and writes a file; no transform lives here.
"""

from __future__ import annotations

import datetime as dt
import html
import logging
import math
import os
import tempfile
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_model import __version__
from pulsar_model.tables.delta_io import DeltaTables

log = logging.getLogger(__name__)

#: Rows of a "top findings" table (bounded: the only data that reaches the driver).
TOP_ROWS = 50
#: Bars of a bar chart.
CHART_ROWS = 30
#: Points of the backlog scatter plot.
SCATTER_POINTS = 400
#: Runs shown by the trend plots.
TREND_RUNS = 60
#: Percent of a quota from which a topic counts as "near" its limit.
NEAR_QUOTA_PERCENT = 80.0
#: Display length of a string cell; the full value stays in the cell's tooltip.
MAX_CELL_CHARS = 120

#: Which stage writes each table the report reads (for the "not computed" hint).
TABLE_STAGES: Mapping[str, str] = {
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

#: Counts of :attr:`ReportSummary.counts`, in terminal order: key -> label.
COUNT_LABELS: Mapping[str, str] = {
    "quota_breaches": "quota breaches (broker's rule)",
    "quota_breaches_exact": "quota breaches on exact data",
    "quota_near_limit": f"quotas at >= {NEAR_QUOTA_PERCENT:.0f}% not yet breached",
    "eviction_cursors": "cursors a backlog eviction would skip",
    "eviction_cursors_handled_now": "  of which evicted at the next check",
    "cursor_errors": "cursors the broker would throw on",
    "stuck_cursors": "stuck cursors (mark-delete unmoved, topic advancing)",
    "subscriptions_stalled": "subscriptions STALL/STOP (history status)",
    "subscriptions_warn": "subscriptions WARN (history status)",
    "replication_stalled": "replicated subscriptions stalled",
    "replication_lagging": "replicated subscriptions lagging",
    "failover_duplicate_messages": "messages a cluster failover would redeliver (exact)",
    "replication_critical_findings": "critical replication findings",
    "compaction_would_trigger": "topics whose compaction would trigger",
    "compaction_bytes_saved": "payload bytes compaction would save",
    "failover_stats_mismatches": "failover active consumers differing from stats",
    "failover_imbalanced": "failover subscriptions imbalanced (spread > 1)",
    "transactions_open": "open transactions",
    "transactions_long_open": "long-open transactions",
    "schema_incompatible": "schema versions incompatible",
}


@dataclass(frozen=True)
class SectionStatus:
    """One report section: its anchor, title, the tables it read and those that did not exist."""

    anchor: str
    title: str
    tables_read: tuple[str, ...]
    tables_missing: tuple[str, ...]

    @property
    def computed(self) -> bool:
        """At least one of the section's tables exists."""
        return bool(self.tables_read)


@dataclass(frozen=True)
class ReportSummary:
    """What :func:`build_report` wrote: the file, the sections, the run date's rows per table read and the
    headline counts (keys of :data:`COUNT_LABELS`; a count is absent when its table was not computed)."""

    run_date: dt.date
    out_path: str
    generated_at: dt.datetime
    sections: tuple[SectionStatus, ...]
    rows: Mapping[str, int]
    counts: Mapping[str, int]

    @property
    def tables_missing(self) -> tuple[str, ...]:
        """Tables no stage has written (their parts say "not computed for this run")."""
        return tuple(t for s in self.sections for t in s.tables_missing)


def default_report_path(report_dir: str, run_date: dt.date | str) -> str:
    """``<report_dir>/pulsar-report-<YYYY-MM-DD>.html`` (config ``report_dir``)."""
    return str(Path(report_dir) / f"pulsar-report-{_as_date(run_date).isoformat()}.html")


def build_report(
    tables: DeltaTables,
    run_date: dt.date | str,
    out_path: str | os.PathLike[str],
    *,
    generated_at: dt.datetime | None = None,
    top_rows: int = TOP_ROWS,
) -> ReportSummary:
    """Write the HTML report of ``run_date`` to ``out_path`` (parent folders created; the file is replaced
    atomically) and return its :class:`ReportSummary`.

    Reads the run date's partition of every table of :data:`TABLE_STAGES` that exists; aggregations and
    top-``top_rows`` selections run in Spark, at most a few hundred rows per section reach the driver.
    ``generated_at`` (default: now, UTC) is printed in the header (inject it for reproducible files).
    """
    day = _as_date(run_date)
    stamp = generated_at or dt.datetime.now(dt.UTC)
    ctx = _Context(tables, day, max(1, top_rows))
    spark_context = tables.spark.sparkContext
    parts: list[str] = []
    statuses: list[SectionStatus] = []
    try:
        for anchor, title, builder in _SECTIONS:
            spark_context.setJobDescription(f"report {day.isoformat()}: {title}")
            read_before, missing_before = len(ctx.read_tables), len(ctx.missing_tables)
            body = builder(ctx)
            statuses.append(
                SectionStatus(
                    anchor,
                    title,
                    tuple(ctx.read_tables[read_before:]),
                    tuple(ctx.missing_tables[missing_before:]),
                )
            )
            parts.append(f'<section id="{anchor}"><h2>{_e(title)}</h2>{body}</section>')
    finally:
        spark_context.setJobDescription(None)  # type: ignore[arg-type]
    summary = ReportSummary(
        run_date=day,
        out_path=str(out_path),
        generated_at=stamp,
        sections=tuple(statuses),
        rows=dict(ctx.rows),
        counts={k: ctx.counts[k] for k in COUNT_LABELS if k in ctx.counts},
    )
    document = _document(summary, parts)
    _write_atomically(Path(out_path), document)
    log.info("report for %s written to %s", day, out_path)
    return summary


def format_terminal_summary(summary: ReportSummary) -> str:
    """A few lines for the terminal: the file, every headline count, the tables not computed."""
    lines = [f"report {summary.run_date.isoformat()} -> {summary.out_path}"]
    width = max(len(label) for label in COUNT_LABELS.values())
    for key, label in COUNT_LABELS.items():
        value = summary.counts.get(key)
        shown = "not computed" if value is None else f"{value:,}"
        lines.append(f"  {label:<{width}}  {shown:>12}")
    if summary.tables_missing:
        lines.append(f"  not computed for this run: {', '.join(summary.tables_missing)}")
    return "\n".join(lines)


# -- reading ------------------------------------------------------------------------------------------


@dataclass
class _Context:
    """Mutable state of one report build: where to read, what was read, the counts gathered."""

    tables: DeltaTables
    run_date: dt.date
    top_rows: int
    read_tables: list[str] = field(default_factory=list)
    missing_tables: list[str] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    def read(self, table: str) -> DataFrame | None:
        """The run date's rows of ``table``; ``None`` (and noted as missing) when the table does not exist.

        Tables partitioned by ``export_date`` (or ``run_date``) are pruned by partition; otherwise a date
        column of that name filters the rows; a table with neither is read whole.
        """
        if not self.tables.exists(table):
            self.missing_tables.append(table)
            return None
        self.read_tables.append(table)
        partitions = self.tables.partition_columns(table)
        for column in ("export_date", "run_date"):
            if column in partitions:
                return self.tables.read(table, partition_filter={column: self.run_date})
        df = self.tables.read(table)
        for column in ("export_date", "run_date"):
            if column in df.columns:
                return df.where(F.col(column) == F.lit(self.run_date))
        return df

    def read_history(self, table: str) -> tuple[DataFrame, str] | None:
        """Every run of a history table up to the run date, with its date column; ``None`` when missing."""
        if not self.tables.exists(table):
            self.missing_tables.append(table)
            return None
        self.read_tables.append(table)
        df = self.tables.read(table)
        for column in ("run_date", "export_date"):
            if column in df.columns:
                return df.where(F.col(column) <= F.lit(self.run_date)), column
        return None


def _aggregate(ctx: _Context, table: str, df: DataFrame, **measures: Column) -> dict[str, int]:
    """One Spark job: the row count (kept in ``ctx.rows``) and ``measures`` (nulls read as 0)."""
    row = df.agg(F.count(F.lit(1)).alias("_rows"), *(m.alias(k) for k, m in measures.items())).first()
    values = {} if row is None else row.asDict()
    ctx.rows[table] = int(values.get("_rows") or 0)
    return {k: int(values.get(k) or 0) for k in measures}


def _count_if(condition: Column) -> Column:
    return F.sum(F.when(condition, 1).otherwise(0))


def _top(df: DataFrame, order: Sequence[Column], limit: int, *, when: int = 1) -> list[dict[str, Any]]:
    """The first ``limit`` rows by ``order`` (a bounded collect) as plain dicts (nested rows too); no Spark
    job when ``when`` is 0 (an aggregate already counted no matching row)."""
    if not when:
        return []
    return [r.asDict(recursive=True) for r in df.orderBy(*order).limit(limit).collect()]


def _grouped_counts(df: DataFrame, column: str) -> dict[str, int]:
    """Rows per value of a low-cardinality column (status, severity, verdict): one small job."""
    rows: list[Row] = df.groupBy(column).count().limit(100).collect()
    return {str(r[column]): int(r["count"]) for r in rows}


# -- sections -----------------------------------------------------------------------------------------


def _section_overview(ctx: _Context) -> str:
    # Filled in by _document once every other section has run (it needs their counts).
    return ""


def _section_backlog(ctx: _Context) -> str:
    parts: list[str] = []
    cursors = ctx.read("cursor_backlog")
    if cursors is None:
        parts.append(_not_computed("cursor_backlog"))
    else:
        agg = _aggregate(
            ctx,
            "cursor_backlog",
            cursors,
            with_error=_count_if(F.col("error").isNotNull()),
            counter_drift=_count_if(F.col("counter_minus_precise") != 0),
            incomplete=_count_if(F.col("exported_entries_complete") == F.lit(False)),
            exact_bytes=F.sum("backlog_bytes"),
            estimated_bytes=F.sum("estimated_backlog_size_bytes"),
            max_age=F.max("oldest_unacked_age_seconds"),
        )
        ctx.counts["cursor_errors"] = agg["with_error"]
        parts.append(
            _cards(
                [
                    ("cursors", _num(ctx.rows["cursor_backlog"])),
                    ("exact backlog", _bytes(agg["exact_bytes"])),
                    ("broker estimate", _bytes(agg["estimated_bytes"])),
                    ("oldest unacked", _duration(agg["max_age"])),
                    ("broker would throw", _num(agg["with_error"]), agg["with_error"] > 0),
                    ("counter drift", _num(agg["counter_drift"]), agg["counter_drift"] > 0),
                    ("export incomplete", _num(agg["incomplete"])),
                ]
            )
        )
        points = _top(
            cursors.where(F.col("backlog_bytes").isNotNull()),
            [
                F.abs(F.col("estimate_minus_exact_bytes")).desc_nulls_last(),
                F.col("backlog_bytes").desc(),
                *_keys("cursor_name"),
            ],
            SCATTER_POINTS,
            when=ctx.rows["cursor_backlog"],
        )
        parts.append(
            "<h3>Broker estimate vs exact backlog, per cursor</h3><p class=note>Each dot is a cursor: its "
            "exact backlog bytes from the exported entries (acked ranges subtracted) against the "
            "per-position estimate the broker reports (docs §2.4). Dots off the diagonal are where the "
            "estimate is wrong; red: off by more than 10%. "
            f"The {len(points)} cursors with the largest error are plotted.</p>"
        )
        parts.append(
            _scatter_svg(
                [
                    _Point(
                        x=float(p["backlog_bytes"] or 0),
                        y=float(p["estimated_backlog_size_bytes"] or 0),
                        tooltip=f"{p['cluster']} {p['topic']} {p['cursor_name']}: exact "
                        f"{_bytes(p['backlog_bytes'])}, estimate {_bytes(p['estimated_backlog_size_bytes'])}",
                        bad=_relative_error(p["estimated_backlog_size_bytes"], p["backlog_bytes"]) > 0.1,
                    )
                    for p in points
                ],
                x_label="exact backlog bytes",
                y_label="broker estimate bytes",
                caption="broker estimate vs exact backlog bytes per cursor",
            )
        )
        parts.append("<h3>Cursors with the largest estimate error</h3>")
        parts.append(
            _table_of(
                points[: ctx.top_rows],
                "cluster; topic; cursor=cursor_name; kind=cursor_kind; backlog entries=#backlog_entries; "
                "exact bytes=#backlog_bytes; estimate bytes=#estimated_backlog_size_bytes; "
                "estimate − exact=#estimate_minus_exact_bytes; oldest unacked=~oldest_unacked_age_seconds",
            )
        )
        if agg["with_error"] > 0:
            failing = _top(cursors.where(F.col("error").isNotNull()), _keys("cursor_name"), ctx.top_rows)
            parts.append("<h3>Cursors whose state makes the broker throw</h3>")
            parts.append(
                _table_of(
                    failing, "cluster; topic; cursor=cursor_name; mark-delete=mark_delete_position; error"
                )
            )
    topics = ctx.read("topic_backlog")
    if topics is None:
        parts.append(_not_computed("topic_backlog"))
    else:
        differs = F.col("estimate_minus_stats_bytes") != 0
        agg = _aggregate(ctx, "topic_backlog", topics, mismatches=_count_if(differs))
        parts.append(
            f"<h3>Topic backlogSize replayed vs exported stats</h3><p>{_num(ctx.rows['topic_backlog'])} "
            f"topics; {_num(agg['mismatches'])} where the replayed §2.3 formula and the exported "
            "<code>backlogSize</code> disagree.</p>"
        )
        if agg["mismatches"] > 0:
            rows = _top(
                topics.where(differs),
                [F.abs(F.col("estimate_minus_stats_bytes")).desc(), *_keys()],
                ctx.top_rows,
            )
            parts.append(
                _table_of(
                    rows,
                    "cluster; topic; slowest cursor=slowest_cursor_name; "
                    "replayed bytes=#estimated_backlog_size_bytes; stats bytes=#stats_backlog_size_bytes; "
                    "difference=#estimate_minus_stats_bytes",
                )
            )
    pinning = ctx.read("topic_pinning")
    if pinning is None:
        parts.append(_not_computed("topic_pinning"))
    else:
        agg = _aggregate(
            ctx,
            "topic_pinning",
            pinning,
            pinned_topics=_count_if(F.col("pinned_bytes") > 0),
            pinned_bytes=F.sum("pinned_bytes"),
            trimmable_bytes=F.sum("trimmable_now_bytes"),
        )
        parts.append(
            "<h3>Ledgers kept alive by one slow cursor</h3>"
            f"<p>{_num(agg['pinned_topics'])} topics have a slowest cursor that alone keeps "
            f"{_bytes(agg['pinned_bytes'])} of ledgers alive; the next trim would delete "
            f"{_bytes(agg['trimmable_bytes'])} (retention ignored: the exports do not carry it).</p>"
        )
        rows = _top(
            pinning.where(F.col("pinned_bytes") > 0),
            [F.col("pinned_bytes").desc(), *_keys()],
            CHART_ROWS,
            when=agg["pinned_topics"],
        )
        parts.append(
            _hbar_svg(
                [
                    _Bar(
                        label=f"{r['cluster']} · {r['topic']} · {r['slowest_cursor_name']}",
                        value=float(r["pinned_bytes"]),
                        text=_bytes(r["pinned_bytes"]),
                        tooltip=f"{r['slowest_cursor_name']} ({r['slowest_cursor_kind']}) pins "
                        f"{r['pinned_ledgers']} ledgers of {r['cluster']} {r['topic']}",
                    )
                    for r in rows
                ],
                caption="bytes the slowest cursor alone keeps alive",
            )
        )
    unmoved = ctx.read("unmoved_cursors")
    if unmoved is None:
        parts.append(_not_computed("unmoved_cursors"))
    else:
        stuck = F.col("topic_advanced") == F.lit(True)
        agg = _aggregate(ctx, "unmoved_cursors", unmoved, stuck=_count_if(stuck))
        ctx.counts["stuck_cursors"] = agg["stuck"]
        parts.append(
            f"<h3>Unmoved cursors</h3><p>{_num(ctx.rows['unmoved_cursors'])} cursors kept their mark-delete "
            f"over their last exports; {_num(agg['stuck'])} of them while producers kept writing (stuck).</p>"
        )
        if agg["stuck"] > 0:
            rows = _top(
                unmoved.where(stuck), [F.col("unmoved_exports").desc(), *_keys("cursor_name")], ctx.top_rows
            )
            parts.append(
                _table_of(
                    rows,
                    "cluster; topic; cursor=cursor_name; kind=cursor_kind; mark-delete=mark_delete_position; "
                    "unmoved since=unmoved_since_export_date; exports=#unmoved_exports",
                )
            )
    return "".join(parts)


def _section_quota(ctx: _Context) -> str:
    parts: list[str] = []
    status = ctx.read("quota_status")
    if status is None:
        parts.append(_not_computed("quota_status"))
    else:
        near = (F.col("percent_of_quota") >= NEAR_QUOTA_PERCENT) & ~F.coalesce(
            F.col("exceeded"), F.lit(False)
        )
        agg = _aggregate(
            ctx,
            "quota_status",
            status,
            breaches=_count_if(F.col("exceeded") == F.lit(True)),
            exact=_count_if(F.col("exact_exceeded") == F.lit(True)),
            handled=_count_if(F.col("is_handled") == F.lit(True)),
            near=_count_if(near),
        )
        ctx.counts["quota_breaches"] = agg["breaches"]
        ctx.counts["quota_breaches_exact"] = agg["exact"]
        ctx.counts["quota_near_limit"] = agg["near"]
        parts.append(
            _cards(
                [
                    ("topic × quota rows", _num(ctx.rows["quota_status"])),
                    ("breached (broker rule)", _num(agg["breaches"]), agg["breaches"] > 0),
                    ("breached on exact data", _num(agg["exact"]), agg["exact"] > 0),
                    ("acted on at next check", _num(agg["handled"]), agg["handled"] > 0),
                    (f"at ≥ {NEAR_QUOTA_PERCENT:.0f}%", _num(agg["near"])),
                ]
            )
        )
        rows = _top(
            status.where(F.col("percent_of_quota").isNotNull()),
            [F.col("percent_of_quota").desc(), *_keys("quota_type")],
            max(ctx.top_rows, CHART_ROWS),
            when=ctx.rows["quota_status"],
        )
        rows = [
            {**r, "quota": _quota_kind(r["quota_type"]), "limit": _limit_text(r), "percent": _pct(r)}
            for r in rows
        ]
        parts.append(
            "<h3>Quota proximity</h3><p class=note>Percent of the effective limit (size: the §2.3 "
            "estimate; time: the age the broker's check sees). Red: breached by the broker's rule. "
            "Bars are cut at 200%.</p>"
        )
        parts.append(
            _hbar_svg(
                [
                    _Bar(
                        label=f"{r['cluster']} · {r['topic']} · {r['quota']}",
                        value=float(r["percent_of_quota"]),
                        text=r["percent"],
                        tooltip=f"{r['cluster']} {r['topic']} {r['quota_type']}: {r['percent']} of "
                        f"{r['limit']} ({r['policy']})",
                        css="bar bad" if r["exceeded"] else "bar",
                    )
                    for r in rows[:CHART_ROWS]
                ],
                caption="percent of the backlog quota used",
                reference=100.0,
                reference_label="limit",
                cap=200.0,
            )
            or "<p>No topic has an enabled quota to compare with.</p>"
        )
        parts.append(
            _table_of(
                rows[: ctx.top_rows],
                "cluster; topic; quota; policy; from=source_level; limit; percent; breached=exceeded; "
                "breached (exact)=exact_exceeded; acted on=is_handled; reason",
            )
        )
    evictions = ctx.read("quota_evictions")
    if evictions is None:
        parts.append(_not_computed("quota_evictions"))
    else:
        touched = F.col("skipped_entries") > 0
        agg = _aggregate(
            ctx,
            "quota_evictions",
            evictions,
            touched=_count_if(touched),
            handled=_count_if(touched & (F.col("handled_now") == F.lit(True))),
            system=_count_if(touched & F.col("is_system_cursor")),
            lost_messages=F.sum(F.when(touched, F.col("lost_messages"))),
        )
        ctx.counts["eviction_cursors"] = agg["touched"]
        ctx.counts["eviction_cursors_handled_now"] = agg["handled"]
        parts.append(
            "<h3>Eviction preview</h3><p class=note>What <code>consumer_backlog_eviction</code> would skip "
            "on each cursor for every enabled limit, whatever the configured policy (docs §3.6, §3.7). "
            "Red: the broker really runs it at its next check.</p>"
            + _cards(
                [
                    ("cursors skipped", _num(agg["touched"]), agg["touched"] > 0),
                    ("at the next check", _num(agg["handled"]), agg["handled"] > 0),
                    ("system cursors hit", _num(agg["system"]), agg["system"] > 0),
                    ("messages lost", _num(agg["lost_messages"])),
                ]
            )
        )
        rows = _top(
            evictions.where(touched),
            [
                F.col("skipped_entries").desc(),
                F.col("lost_bytes").desc_nulls_last(),
                *_keys("quota_type", "cursor_name"),
            ],
            max(ctx.top_rows, CHART_ROWS),
            when=agg["touched"],
        )
        rows = [{**r, "quota": _quota_kind(r["quota_type"])} for r in rows]
        parts.append(
            _hbar_svg(
                [
                    _Bar(
                        label=f"{r['cluster']} · {r['topic']} · {r['cursor_name']}",
                        value=float(r["skipped_entries"]),
                        text=f"{_num(r['skipped_entries'])} entries",
                        tooltip=f"{r['quota']} eviction of {r['cursor_name']}: "
                        f"{_num(r['lost_messages'])} messages, {_bytes(r['lost_bytes'])} lost",
                        css="bar bad" if r["handled_now"] else "bar",
                    )
                    for r in rows[:CHART_ROWS]
                ],
                caption="entries a backlog eviction would skip per cursor",
            )
            or "<p>No eviction would skip anything.</p>"
        )
        parts.append(
            _table_of(
                rows[: ctx.top_rows],
                "cluster; topic; quota; cursor=cursor_name; kind=cursor_kind; "
                "system cursor=is_system_cursor; "
                "mark-delete before=mark_delete_position_before; after=mark_delete_position_after; "
                "entries skipped=#skipped_entries; messages lost=#lost_messages; bytes lost=#lost_bytes; "
                "runs now=handled_now; loop stop=stop_reason",
            )
        )
    return "".join(parts)


def _section_replication(ctx: _Context) -> str:
    parts: list[str] = []
    positions = ctx.read("replication_positions")
    if positions is None:
        parts.append(_not_computed("replication_positions"))
    else:
        by_status = _grouped_counts(positions, "status")
        ctx.rows["replication_positions"] = sum(by_status.values())
        ctx.counts["replication_stalled"] = by_status.get("stalled", 0)
        ctx.counts["replication_lagging"] = by_status.get("lagging", 0)
        names = ("in_sync", "lagging", "stalled", "inactive")
        parts.append(
            "<h3>Replicated subscription cursors</h3>"
            + _cards(
                [(s, _num(by_status.get(s, 0)), s == "stalled" and by_status.get(s, 0) > 0) for s in names]
            )
        )
        rows = _top(
            positions.where(F.col("status").isin("stalled", "lagging")),
            [
                F.when(F.col("status") == "stalled", 0).otherwise(1),
                F.col("remote_behind_entries").desc_nulls_last(),
                *_replication_keys(),
            ],
            ctx.top_rows,
            when=by_status.get("stalled", 0) + by_status.get("lagging", 0),
        )
        parts.append(
            _table_of(
                [{**r, "direction": _direction(r)} for r in rows],
                "topic; subscription; source → target=direction; status; "
                "target behind (entries)=#remote_behind_entries; source lead (entries)=#source_lead_entries; "
                "since last update=~seconds_since_last_update; why=status_reason",
            )
        )
    duplicates = ctx.read("replication_failover_duplicates")
    if duplicates is None:
        parts.append(_not_computed("replication_failover_duplicates"))
    else:
        shown = F.coalesce(
            F.col("failover_duplicate_messages"), F.col("consumed_on_source_entries_upper_bound")
        )
        agg = _aggregate(
            ctx,
            "replication_failover_duplicates",
            duplicates,
            messages=F.sum("failover_duplicate_messages"),
            bytes=F.sum("failover_duplicate_bytes"),
            with_duplicates=_count_if(shown > 0),
        )
        ctx.counts["failover_duplicate_messages"] = agg["messages"]
        parts.append(
            "<h3>Failover duplicates per subscription</h3><p class=note>Messages a consumer moving from the "
            "source to the target cluster would receive again although the source acknowledged them "
            "(docs/semantics §4.4, §4.8). Blue: exact from both clusters' entries; grey: snapshot upper "
            "bound in entries when the entries were not exported.</p>"
            + _cards(
                [
                    ("subscription × direction", _num(ctx.rows["replication_failover_duplicates"])),
                    ("with duplicates", _num(agg["with_duplicates"]), agg["with_duplicates"] > 0),
                    ("duplicate messages (exact)", _num(agg["messages"])),
                    ("duplicate bytes (exact)", _bytes(agg["bytes"])),
                ]
            )
        )
        rows = _top(
            duplicates.where(shown > 0),
            [shown.desc(), *_replication_keys()],
            max(ctx.top_rows, CHART_ROWS),
            when=agg["with_duplicates"],
        )
        rows = [
            {
                **r,
                "direction": _direction(r),
                "bound": _bound_text(
                    r["consumed_on_source_entries_lower_bound"], r["consumed_on_source_entries_upper_bound"]
                ),
            }
            for r in rows
        ]
        parts.append(
            _hbar_svg(
                [_duplicate_bar(r) for r in rows[:CHART_ROWS]],
                caption="messages redelivered by a failover, per subscription",
            )
        )
        parts.append(
            _table_of(
                rows[: ctx.top_rows],
                "topic; subscription; source → target=direction; method; "
                "duplicate messages=#failover_duplicate_messages; "
                "duplicate entries=#failover_duplicate_entries; "
                "duplicate bytes=#failover_duplicate_bytes; bound (entries)=bound; "
                "target entries complete=target_entries_complete",
            )
        )
    findings = ctx.read("replication_findings")
    if findings is None:
        parts.append(_not_computed("replication_findings"))
    else:
        by_severity = _grouped_counts(findings, "severity")
        ctx.rows["replication_findings"] = sum(by_severity.values())
        ctx.counts["replication_critical_findings"] = by_severity.get("critical", 0)
        levels = ("critical", "warning", "info")
        parts.append(
            "<h3>Replication findings</h3>"
            + _cards(
                [
                    (s, _num(by_severity.get(s, 0)), s == "critical" and by_severity.get(s, 0) > 0)
                    for s in levels
                ]
            )
        )
        rows = _top(
            findings,
            [
                F.when(F.col("severity") == "critical", 0)
                .when(F.col("severity") == "warning", 1)
                .otherwise(2),
                F.col("measure").desc_nulls_last(),
                F.col("kind"),
                *_keys("subscription"),
            ],
            ctx.top_rows,
            when=ctx.rows["replication_findings"],
        )
        parts.append(
            _table_of(
                rows,
                "severity; kind; cluster; topic; subscription; other cluster=related_cluster; "
                "measure=#measure; "
                "detail",
            )
        )
    return "".join(parts)


def _duplicate_bar(row: Mapping[str, Any]) -> _Bar:
    exact = row["failover_duplicate_messages"] is not None
    value = row["failover_duplicate_messages"] if exact else row["consumed_on_source_entries_upper_bound"]
    return _Bar(
        label=f"{row['topic']} · {row['subscription']} · {row['direction']}",
        value=float(value),
        text=f"{_num(value)} msgs" if exact else f"≤ {_num(value)} entries",
        tooltip=f"{row['subscription']} on {row['topic']}, failover {row['direction']} ({row['method']})",
        css="bar" if exact else "bar muted",
    )


def _section_compaction(ctx: _Context) -> str:
    summary = ctx.read("compaction_summary")
    if summary is None:
        return _not_computed("compaction_summary")
    agg = _aggregate(
        ctx,
        "compaction_summary",
        summary,
        would_trigger=_count_if(F.col("would_trigger") == F.lit(True)),
        before=F.sum("payload_bytes_before"),
        saved=F.sum("payload_bytes_saved"),
        sticky=F.sum("tombstones_never_removed"),
    )
    ctx.counts["compaction_would_trigger"] = agg["would_trigger"]
    ctx.counts["compaction_bytes_saved"] = agg["saved"]
    rows = _top(
        summary,
        [F.col("payload_bytes_saved").desc(), F.col("payload_bytes_before").desc(), *_keys()],
        max(ctx.top_rows, CHART_ROWS),
        when=ctx.rows["compaction_summary"],
    )
    pairs = [
        _Pair(
            label=f"{r['cluster']} · {r['topic']}",
            before=float(r["payload_bytes_before"]),
            after=float(r["payload_bytes_after"]),
            text=f"{_bytes(r['payload_bytes_before'])} → {_bytes(r['payload_bytes_after'])}",
            tooltip=f"{r['cluster']} {r['topic']}: {_num(r['distinct_keys'])} keys, "
            f"saves {_bytes(r['payload_bytes_saved'])}",
        )
        for r in rows[:CHART_ROWS]
    ]
    return (
        _cards(
            [
                ("topics", _num(ctx.rows["compaction_summary"])),
                ("payload read", _bytes(agg["before"])),
                ("payload saved", _bytes(agg["saved"])),
                ("trigger fires", _num(agg["would_trigger"]), agg["would_trigger"] > 0),
                ("tombstones never removed", _num(agg["sticky"]), agg["sticky"] > 0),
            ]
        )
        + "<p class=note>Uncompressed payload bytes the compactor reads (grey) and writes (blue) per topic "
        "(docs §5.4, §5.5), largest savings first.</p>"
        + _paired_svg(pairs, caption="payload bytes before and after compaction per topic")
        + _table_of(
            rows[: ctx.top_rows],
            "cluster; topic; keys=#distinct_keys; live keys=#live_keys; messages before=#messages_before; "
            "after=#messages_after; bytes before=#payload_bytes_before; after=#payload_bytes_after; "
            "saved=%savings_ratio; trigger fires=would_trigger; threshold=#threshold_bytes; "
            "estimate=#backlog_estimate_bytes; dirty=%dirty_ratio",
        )
    )


def _section_failover(ctx: _Context) -> str:
    parts: list[str] = []
    assignments = ctx.read("failover_assignments")
    if assignments is None:
        parts.append(_not_computed("failover_assignments"))
    else:
        differs = F.col("matches_stats") == F.lit(False)
        agg = _aggregate(ctx, "failover_assignments", assignments, differs=_count_if(differs))
        ctx.counts["failover_stats_mismatches"] = agg["differs"]
        parts.append(
            f"<h3>Active consumers</h3><p>{_num(ctx.rows['failover_assignments'])} Failover subscriptions; "
            f"{_num(agg['differs'])} where the consumer the broker's rule picks differs from "
            "<code>activeConsumerName</code> in the exported stats.</p>"
        )
        if agg["differs"] > 0:
            rows = _top(assignments.where(differs), _keys("subscription"), ctx.top_rows)
            parts.append(
                _table_of(
                    rows,
                    "cluster; topic; subscription; rule=selection_mode; picked=active_consumer_name; "
                    "stats say=stats_active_consumer_name; priority group=top_group_consumers",
                )
            )
    balance = ctx.read("failover_balance")
    if balance is None:
        parts.append(_not_computed("failover_balance"))
    else:
        agg = _aggregate(
            ctx,
            "failover_balance",
            balance,
            imbalanced=_count_if(F.col("imbalance") > 1),
            with_idle=_count_if(F.size("idle_consumers") > 0),
        )
        ctx.counts["failover_imbalanced"] = agg["imbalanced"]
        parts.append(
            "<h3>Partitions per active consumer</h3><p class=note>One bar per subscription of a partitioned "
            "topic, one segment per consumer of the highest-priority group: how many partitions it is "
            f"active on (docs §6.3). {_num(agg['imbalanced'])} subscriptions have a spread above one "
            f"partition, {_num(agg['with_idle'])} have idle consumers.</p>"
        )
        rows = _top(
            balance,
            [F.col("imbalance").desc(), F.col("partitions").desc(), *_keys("subscription")],
            max(ctx.top_rows, CHART_ROWS),
            when=ctx.rows["failover_balance"],
        )
        stacks = [
            _Stack(
                label=f"{r['cluster']} · {r['topic']} · {r['subscription']}",
                segments=tuple(
                    sorted((str(k), int(v or 0)) for k, v in (r["partitions_per_consumer"] or {}).items())
                ),
                text=f"spread {r['imbalance']}",
                bad=int(r["imbalance"]) > 1,
            )
            for r in rows[:CHART_ROWS]
        ]
        parts.append(_stacked_svg(stacks, caption="partitions per active consumer"))
        parts.append(
            _table_of(
                rows[: ctx.top_rows],
                "cluster; topic; subscription; partitions=#partitions; consumers=#consumers; "
                "max=#max_partitions; min=#min_partitions; spread=#imbalance; idle=idle_consumers",
            )
        )
    return "".join(parts)


def _section_transactions(ctx: _Context) -> str:
    parts: list[str] = []
    txns = ctx.read("transactions")
    if txns is None:
        parts.append(_not_computed("transactions"))
    else:
        is_open = F.col("state") == "open"
        agg = _aggregate(
            ctx,
            "transactions",
            txns,
            open=_count_if(is_open),
            aborted=_count_if(F.col("state") == "aborted"),
            committed=_count_if(F.col("state") == "committed"),
            long_open=_count_if(F.col("is_long_open") == F.lit(True)),
        )
        ctx.counts["transactions_open"] = agg["open"]
        ctx.counts["transactions_long_open"] = agg["long_open"]
        parts.append(
            _cards(
                [
                    ("committed", _num(agg["committed"])),
                    ("aborted", _num(agg["aborted"])),
                    ("open", _num(agg["open"]), agg["open"] > 0),
                    ("long open", _num(agg["long_open"]), agg["long_open"] > 0),
                ]
            )
        )
        if agg["open"] > 0:
            rows = _top(txns.where(is_open), [F.col("open_age_ms").desc_nulls_last(), *_keys("txn_id")], 20)
            rows = [
                {**r, "open_s": None if r["open_age_ms"] is None else r["open_age_ms"] / 1000} for r in rows
            ]
            parts.append("<h3>Open transactions, oldest first</h3>")
            parts.append(
                _table_of(
                    rows,
                    "cluster; topic; transaction=txn_id; first position=first_position; "
                    "messages=#message_count; open for=~open_s; long open=is_long_open",
                )
            )
    holdback = ctx.read("transaction_holdback")
    if holdback is None:
        parts.append(_not_computed("transaction_holdback"))
    else:
        held = F.col("held_back_entries") > 0
        agg = _aggregate(
            ctx,
            "transaction_holdback",
            holdback,
            held_topics=_count_if(held),
            held_entries=F.sum("held_back_entries"),
        )
        parts.append(
            f"<h3>Held back by maxReadPosition</h3><p>{_num(agg['held_topics'])} topics hold "
            f"{_num(agg['held_entries'])} entries back from every dispatcher until their oldest open "
            "transaction ends (docs §8.4).</p>"
        )
        rows = _top(
            holdback.where(held),
            [F.col("held_back_entries").desc(), *_keys()],
            max(ctx.top_rows, CHART_ROWS),
            when=agg["held_topics"],
        )
        bars = [
            _Bar(
                label=f"{r['cluster']} · {r['topic']}",
                value=float(r["held_back_entries"]),
                text=f"{_num(r['held_back_entries'])} entries",
                tooltip=f"held back by {r['oldest_open_txn_id']} since "
                f"{_fmt(r['oldest_open_first_position'])}",
                css="bar warn",
            )
            for r in rows[:CHART_ROWS]
        ]
        parts.append(_hbar_svg(bars, caption="entries held back by an open transaction per topic"))
        parts.append(
            _table_of(
                rows[: ctx.top_rows],
                "cluster; topic; open txns=#open_txn_count; oldest open=oldest_open_txn_id; "
                "maxReadPosition=max_read_position; held entries=#held_back_entries; "
                "held messages=#held_back_messages",
            )
        )
    return "".join(parts)


def _section_schemas(ctx: _Context) -> str:
    verdicts = ctx.read("schema_verdicts")
    if verdicts is None:
        return _not_computed("schema_verdicts")
    by_verdict = _grouped_counts(verdicts, "verdict")
    ctx.rows["schema_verdicts"] = sum(by_verdict.values())
    ctx.counts["schema_incompatible"] = by_verdict.get("incompatible", 0)
    names = ("accepted_first", "accepted_identical", "compatible", "incompatible")
    parts = [_cards([(v.replace("_", " "), _num(by_verdict.get(v, 0)), v == "incompatible") for v in names])]
    if by_verdict.get("incompatible", 0) > 0:
        rows = _top(verdicts.where(F.col("verdict") == "incompatible"), _keys("version"), ctx.top_rows)
        parts.append("<h3>Versions the registry would refuse</h3>")
        parts.append(
            _table_of(
                rows,
                "cluster; topic; version=#version; type=schema_type; strategy; "
                "checked against=checked_versions; why=reasons",
            )
        )
    return "".join(parts)


def _section_history(ctx: _Context) -> str:
    parts: list[str] = []
    for table, title in (("topic_history", "Topic trends"), ("subscription_history", "Subscription trends")):
        parts.append(f"<h3>{_e(title)}</h3>")
        history = ctx.read_history(table)
        parts.append(_not_computed(table) if history is None else _trends(ctx, table, *history))
    parts.append("<h3>Subscription status (last runs)</h3>")
    status = ctx.read("subscription_status")
    if status is None:
        parts.append(_not_computed("subscription_status"))
    elif "status" not in status.columns:
        parts.append("<p>The table has no <code>status</code> column.</p>")
    else:
        by_status: dict[str, int] = {}
        for name, count in _grouped_counts(status, "status").items():
            by_status[name.upper()] = by_status.get(name.upper(), 0) + count
        ctx.rows["subscription_status"] = sum(by_status.values())
        ctx.counts["subscriptions_stalled"] = by_status.get("STALL", 0) + by_status.get("STOP", 0)
        ctx.counts["subscriptions_warn"] = by_status.get("WARN", 0)
        names = ["OK", "WARN", "STALL", "STOP", "REWIND"]
        names += sorted(k for k in by_status if k not in names)
        parts.append(
            _cards([(n, _num(by_status.get(n, 0)), n != "OK" and by_status.get(n, 0) > 0) for n in names])
        )
        parts.append(
            _generic_table(status.where(F.upper(F.col("status")) != "OK"), ctx.top_rows, first=("status",))
        )
    parts.append("<h3>What changed since the previous run</h3>")
    changes = ctx.read("run_changes")
    if changes is None:
        parts.append(_not_computed("run_changes"))
    else:
        parts.append(_generic_table(changes, ctx.top_rows, first=("change", "change_kind", "kind")))
    return "".join(parts)


#: Numeric columns a trend plot prefers, in order (history tables are built elsewhere; any numeric
#: column is plotted when none of these exists).
_TREND_PREFERRED = (
    "backlog_bytes",
    "exact_backlog_bytes",
    "estimated_backlog_size_bytes",
    "backlog_entries",
    "percent_of_quota",
    "quota_percent",
    "failover_duplicate_messages",
    "duplicate_messages",
    "remote_behind_entries",
    "lag_entries",
    "payload_bytes_saved",
    "savings_ratio",
)
_TREND_MAX_SERIES = 6
_NUMERIC_TYPES = (T.LongType, T.IntegerType, T.ShortType, T.DoubleType, T.FloatType, T.DecimalType)


def _trends(ctx: _Context, table: str, df: DataFrame, date_column: str) -> str:
    """Per-run totals (max for percents and ratios) of a history table's numeric columns, one plot each."""
    numeric = [
        f.name
        for f in df.schema.fields
        if isinstance(f.dataType, _NUMERIC_TYPES) and not f.name.endswith(("_id", "_order", "_index"))
    ]
    chosen = [c for c in _TREND_PREFERRED if c in numeric] + [c for c in numeric if c not in _TREND_PREFERRED]
    chosen = chosen[:_TREND_MAX_SERIES]
    if not chosen:
        return "<p>No numeric column to plot.</p>"
    measures = [
        (F.max(c) if ("percent" in c or "ratio" in c) else F.sum(c)).cast("double").alias(c) for c in chosen
    ]
    rows = (
        df.groupBy(F.col(date_column).cast("string").alias("_run"))
        .agg(F.count(F.lit(1)).alias("_rows"), *measures)
        .orderBy(F.col("_run").desc())
        .limit(TREND_RUNS)
        .collect()
    )
    runs = sorted((r.asDict() for r in rows), key=lambda r: str(r["_run"]))
    if not runs:
        return "<p>No run up to this date.</p>"
    current = next((r for r in runs if r["_run"] == ctx.run_date.isoformat()), None)
    ctx.rows[table] = 0 if current is None else int(current["_rows"])
    note = (
        f"<p class=note>{len(runs)} runs up to {ctx.run_date.isoformat()}; per run the sum over all rows "
        "(the maximum for percents and ratios).</p>"
    )
    plots = [
        _line_svg(
            [str(r["_run"]) for r in runs],
            [None if r[c] is None else float(r[c]) for r in runs],
            caption=c.replace("_", " "),
        )
        for c in chosen
    ]
    return note + '<div class="grid">' + "".join(plots) + "</div>"


def _generic_table(df: DataFrame, limit: int, *, first: Sequence[str] = ()) -> str:
    """Up to ``limit`` rows of a table whose columns this module does not know (history tables)."""
    columns = [c for c in first if c in df.columns] + [
        c for c in df.columns if c not in first and c not in ("export_date", "run_date", "export_id")
    ]
    columns = columns[:10]
    if not columns:
        return "<p>No columns.</p>"
    rows = _top(df.select(*columns), [F.col(c).asc_nulls_last() for c in columns[:4]], limit)
    if not rows:
        return "<p>No rows for this run.</p>"
    return _table(columns, [[_Num(r[c]) if _is_number(r[c]) else r[c] for c in columns] for r in rows])


_SECTIONS: tuple[tuple[str, str, Callable[[_Context], str]], ...] = (
    ("overview", "Overview", _section_overview),
    ("backlog", "Backlog: broker estimate vs exact", _section_backlog),
    ("quota", "Backlog quotas and eviction preview", _section_quota),
    ("replication", "Geo-replication", _section_replication),
    ("compaction", "Compaction savings", _section_compaction),
    ("failover", "Failover subscriptions", _section_failover),
    ("transactions", "Transactions", _section_transactions),
    ("schemas", "Schema registrations", _section_schemas),
    ("history", "History and trends", _section_history),
)


def _keys(*more: str) -> list[Column]:
    return [F.col("cluster"), F.col("topic"), *(F.col(c) for c in more)]


def _replication_keys() -> list[Column]:
    return [F.col(c) for c in ("topic", "subscription", "source_cluster", "target_cluster")]


def _direction(row: Mapping[str, Any]) -> str:
    return f"{row['source_cluster']} → {row['target_cluster']}"


# -- the document ---------------------------------------------------------------------------------------

_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"

_CSS = """
:root{--fg:#1d2733;--muted:#5f6b7a;--line:#d9dee5;--bg:#f6f8fa;--blue:#2f6fb0;--red:#c8372d;--amber:#c98a12;
--grey:#9aa5b1}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;
color:var(--fg);background:#fff}
header{background:#15202b;color:#fff;padding:18px 28px}
header h1{margin:0 0 4px;font-size:22px}
header p{margin:0;color:#c5ced8}
nav{margin-top:10px}
nav a{color:#9cc7f2;margin-right:14px;text-decoration:none}
main{padding:8px 28px 40px;max-width:1400px}
section{border-bottom:1px solid var(--line);padding:10px 0 22px}
h2{font-size:19px;margin:18px 0 10px}
h3{font-size:15px;margin:18px 0 8px}
.note{color:var(--muted);max-width:980px}
.missing{color:var(--muted);background:var(--bg);border:1px dashed var(--line);padding:8px 12px;
border-radius:6px}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:8px 0 12px}
.card{background:var(--bg);border:1px solid var(--line);border-radius:8px;padding:8px 14px;min-width:140px}
.card .v{font-size:20px;font-weight:600}
.card .k{color:var(--muted);font-size:12px}
.card.alert{border-color:var(--red)}
.card.alert .v{color:var(--red)}
.tablewrap{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;margin:6px 0 14px;font-size:12.5px}
th,td{border-bottom:1px solid var(--line);padding:4px 8px;text-align:left;vertical-align:top;
overflow-wrap:anywhere;max-width:420px}
th{background:var(--bg);font-weight:600;white-space:nowrap}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.grid{display:flex;flex-wrap:wrap;gap:12px}
svg{display:block;max-width:100%;height:auto;margin:6px 0 12px}
svg text{font:11px system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;fill:var(--fg)}
svg .axis{stroke:var(--line);stroke-width:1}
svg .tick{fill:var(--muted)}
svg .ref{stroke:var(--red);stroke-dasharray:4 3;stroke-width:1.5}
svg .diag{stroke:var(--grey);stroke-dasharray:4 3}
.bar{fill:var(--blue)}.bar.bad{fill:var(--red)}.bar.warn{fill:var(--amber)}.bar.muted{fill:var(--grey)}
.before{fill:#c3ccd6}.after{fill:var(--blue)}
.dot{fill:var(--blue);fill-opacity:.65}.dot.bad{fill:var(--red)}
.line{fill:none;stroke:var(--blue);stroke-width:2}
.seg0{fill:#2f6fb0}.seg1{fill:#e08a2e}.seg2{fill:#4a9d5b}.seg3{fill:#8b5fbf}.seg4{fill:#c8372d}
.seg5{fill:#3aa3a3}.seg6{fill:#b0852f}.seg7{fill:#d4619a}.seg8{fill:#6b7785}.seg9{fill:#95b83b}
.segtext{fill:#fff}
footer{color:var(--muted);padding:0 28px 28px;font-size:12px}
"""


def _document(summary: ReportSummary, parts: Sequence[str]) -> str:
    day = summary.run_date.isoformat()
    nav = "".join(f'<a href="#{s.anchor}">{_e(s.title)}</a>' for s in summary.sections)
    body = list(parts)
    body[0] = body[0].replace("</h2>", "</h2>" + _overview(summary), 1)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>pulsar-analytics report {_e(day)}</title><style>{_CSS}</style></head><body>"
        f"<header><h1>pulsar-analytics report</h1><p>run date {_e(day)} · generated "
        f"{_e(summary.generated_at.strftime('%Y-%m-%d %H:%M:%S %Z').strip())} · pulsar-analytics "
        f"{_e(__version__)}</p><nav>{nav}</nav></header><main>"
        + "".join(body)
        + "</main><footer>Static report: no scripts, no network. Numbers follow the broker's semantics per "
        "Pulsar version (docs/semantics/); the tables behind each part are listed in the overview.</footer>"
        "</body></html>\n"
    )


def _overview(summary: ReportSummary) -> str:
    cards = []
    for key, label in COUNT_LABELS.items():
        if key in summary.counts and not label.startswith(" "):
            value = summary.counts[key]
            shown = _bytes(value) if key.endswith("_bytes_saved") else _num(value)
            alert = value > 0 and key not in ("compaction_bytes_saved", "transactions_open")
            cards.append((label, shown, alert))
    rows: list[list[object]] = []
    for section in summary.sections[1:]:
        for table in section.tables_read:
            rows.append([table, section.title, _Num(summary.rows.get(table)), "computed"])
        for table in section.tables_missing:
            rows.append(
                [table, section.title, None, f"not computed for this run ({TABLE_STAGES[table]} stage)"]
            )
    return (
        _cards(cards) + "<h3>Tables of this run</h3>" + _table(["table", "section", "rows", "status"], rows)
    )


def _not_computed(table: str) -> str:
    return (
        f'<p class="missing">{_e(table)}: not computed for this run (the table does not exist; '
        f"it is written by the {_e(TABLE_STAGES.get(table, '?'))} stage).</p>"
    )


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; a report is meant to be shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# -- formatting (every data string is escaped here) ------------------------------------------------------


def _e(value: object) -> str:
    """HTML-escape any value for text or a quoted attribute; control characters become U+FFFD."""
    text = str(value)
    if any(unicodedata.category(ch) in ("Cc", "Cs") and ch not in "\t\n" for ch in text):
        text = "".join(
            "\ufffd" if unicodedata.category(ch) in ("Cc", "Cs") and ch not in "\t\n" else ch for ch in text
        )
    return html.escape(text, quote=True)


@dataclass(frozen=True)
class _Num:
    """A table cell holding a number (right-aligned)."""

    value: object


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _fmt(value: object) -> str:
    """Display text of a collected value (positions as ``L:E``, lists joined, maps as ``k=v``)."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return "—" if math.isnan(value) else f"{value:,.2f}"
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, Mapping):
        if set(value) == {"ledger_id", "entry_id"}:
            return f"{value['ledger_id']}:{value['entry_id']}"
        return ", ".join(f"{_fmt(k)}={_fmt(v)}" for k, v in sorted(value.items(), key=lambda kv: str(kv[0])))
    if isinstance(value, list | tuple):
        return ", ".join(_fmt(v) for v in value)
    return str(value)


def _num(value: object) -> str:
    return _fmt(0 if value is None else value)


def _bytes(value: object) -> str:
    if value is None or not _is_number(value):
        return "—"
    number = float(value)  # type: ignore[arg-type]
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(number) < 1024 or unit == "TiB":
            return f"{number:,.0f} {unit}" if unit == "B" else f"{number:,.1f} {unit}"
        number /= 1024
    return f"{number:,.1f} TiB"  # pragma: no cover


def _duration(seconds: object) -> str:
    if seconds is None or not _is_number(seconds):
        return "—"
    total = float(seconds)  # type: ignore[arg-type]
    if total < 120:
        return f"{total:,.0f} s"
    if total < 7200:
        return f"{total / 60:,.1f} min"
    if total < 172800:
        return f"{total / 3600:,.1f} h"
    return f"{total / 86400:,.1f} d"


def _percent(ratio: object) -> str:
    return "—" if ratio is None or not _is_number(ratio) else f"{100 * float(ratio):,.1f}%"  # type: ignore[arg-type]


def _relative_error(estimate: object, exact: object) -> float:
    if not _is_number(estimate) or not _is_number(exact):
        return 0.0
    e, x = float(estimate), float(exact)  # type: ignore[arg-type]
    return abs(e - x) / max(abs(x), 1.0)


def _quota_kind(quota_type: object) -> str:
    return {"destination_storage": "size", "message_age": "time"}.get(str(quota_type), str(quota_type))


def _limit_text(row: Mapping[str, Any]) -> str:
    if row.get("quota_type") == "message_age":
        return _duration(row.get("limit_time_seconds"))
    return _bytes(row.get("limit_size_bytes"))


def _pct(row: Mapping[str, Any]) -> str:
    return f"{float(row['percent_of_quota']):,.1f}%"


def _bound_text(lower: object, upper: object) -> str:
    if lower is None and upper is None:
        return "—"
    return f"{_num(lower)} … {_num(upper)}"


def _cards(items: Iterable[tuple[str, str] | tuple[str, str, bool]]) -> str:
    out = []
    for item in items:
        label, value = item[0], item[1]
        alert = len(item) > 2 and bool(item[2])
        css = "card alert" if alert else "card"
        out.append(
            f'<div class="{css}"><div class="v">{_e(value)}</div><div class="k">{_e(label)}</div></div>'
        )
    return '<div class="cards">' + "".join(out) + "</div>"


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    if not rows:
        return "<p>No rows.</p>"
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = []
        for cell in row:
            if isinstance(cell, _Num):
                cells.append(f'<td class="n">{_e(_fmt(cell.value))}</td>')
                continue
            text = _fmt(cell)
            if len(text) > MAX_CELL_CHARS:
                cells.append(f'<td title="{_e(text)}">{_e(text[: MAX_CELL_CHARS - 1] + "…")}</td>')
            else:
                cells.append(f"<td>{_e(text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (
        f'<div class="tablewrap"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _table_of(rows: Sequence[Mapping[str, Any]], spec: str) -> str:
    """A table of collected rows described by ``spec``: ``"header=key; key; ..."`` where a key may start
    with ``#`` (number, right-aligned), ``~`` (seconds as a duration) or ``%`` (ratio as a percent); a
    bare key is its own header."""
    columns: list[tuple[str, str, str]] = []
    for item in spec.split(";"):
        header, _, key = item.strip().rpartition("=")
        kind = key[0] if key[:1] in ("#", "~", "%") else ""
        key = key[len(kind) :]
        columns.append((header or key.replace("_", " "), key, kind))
    cells: list[list[object]] = []
    for row in rows:
        line: list[object] = []
        for _, key, kind in columns:
            value = row.get(key)
            if kind == "#":
                line.append(_Num(value))
            elif kind == "~":
                line.append(_duration(value))
            elif kind == "%":
                line.append(_Num(_percent(value)))
            else:
                line.append(value)
        cells.append(line)
    return _table([c[0] for c in columns], cells)


# -- inline SVG plots --------------------------------------------------------------------------------------

_WIDTH = 980
_LABEL_WIDTH = 380
_VALUE_WIDTH = 130
_ROW = 20
_TOP = 26
_MAX_LABEL = 58


def _short(label: str, limit: int = _MAX_LABEL) -> str:
    return label if len(label) <= limit else "…" + label[-(limit - 1) :]


def _svg_open(height: float, caption: str, width: float = _WIDTH) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="{_e(caption)}">'
        f"<title>{_e(caption)}</title>"
    )


def _nice_ticks(maximum: float, count: int = 5) -> list[float]:
    if maximum <= 0:
        return [0.0]
    raw = maximum / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    ticks, value = [], 0.0
    while value <= maximum * 1.0001:
        ticks.append(value)
        value += step
    return ticks


def _tick_text(value: float) -> str:
    for unit, size in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= size:
            return f"{value / size:g}{unit}"
    return f"{value:g}"


@dataclass(frozen=True)
class _Bar:
    label: str
    value: float
    text: str
    tooltip: str
    css: str = "bar"


def _hbar_svg(
    bars: Sequence[_Bar],
    *,
    caption: str,
    reference: float | None = None,
    reference_label: str = "",
    cap: float | None = None,
) -> str:
    """Horizontal bars, one row per item, with a top axis and an optional dashed reference line."""
    if not bars:
        return ""
    top = max([max(b.value, 0.0) for b in bars] + [reference or 0.0]) or 1.0
    if cap is not None:
        top = min(top, cap)
    x0 = _LABEL_WIDTH + 8
    plot = _WIDTH - x0 - _VALUE_WIDTH
    height = _TOP + len(bars) * _ROW + 8
    out = [_svg_open(height, caption)]
    for tick in _nice_ticks(top):
        x = x0 + plot * tick / top
        out.append(f'<line class="axis" x1="{x:.1f}" y1="{_TOP - 6}" x2="{x:.1f}" y2="{height - 6}"/>')
        out.append(
            f'<text class="tick" x="{x:.1f}" y="{_TOP - 10}" text-anchor="middle">{_tick_text(tick)}</text>'
        )
    for i, bar in enumerate(bars):
        y = _TOP + i * _ROW
        width = plot * min(max(bar.value, 0.0), top) / top
        out.append(
            f"<g><title>{_e(bar.tooltip)}</title>"
            f'<text x="{_LABEL_WIDTH:.0f}" y="{y + 14}" text-anchor="end">{_e(_short(bar.label))}</text>'
            f'<rect class="{_e(bar.css)}" x="{x0}" y="{y + 3}" width="{max(width, 1.0):.1f}" '
            f'height="{_ROW - 6}"/>'
            f'<text x="{x0 + width + 5:.1f}" y="{y + 14}">{_e(bar.text)}</text></g>'
        )
    if reference is not None and reference <= top:
        x = x0 + plot * reference / top
        out.append(f'<line class="ref" x1="{x:.1f}" y1="{_TOP - 4}" x2="{x:.1f}" y2="{height - 6}"/>')
        out.append(f'<text class="tick" x="{x + 4:.1f}" y="{height - 8}">{_e(reference_label)}</text>')
    out.append("</svg>")
    return "".join(out)


@dataclass(frozen=True)
class _Pair:
    label: str
    before: float
    after: float
    text: str
    tooltip: str


def _paired_svg(pairs: Sequence[_Pair], *, caption: str) -> str:
    """Two bars per row: ``before`` (light) under ``after`` (blue), one scale."""
    if not pairs:
        return ""
    top = max(max(p.before, p.after, 0.0) for p in pairs) or 1.0
    x0 = _LABEL_WIDTH + 8
    plot = _WIDTH - x0 - _VALUE_WIDTH - 60
    height = _TOP + len(pairs) * _ROW + 8
    out = [_svg_open(height, caption)]
    for tick in _nice_ticks(top):
        x = x0 + plot * tick / top
        out.append(f'<line class="axis" x1="{x:.1f}" y1="{_TOP - 6}" x2="{x:.1f}" y2="{height - 6}"/>')
        out.append(
            f'<text class="tick" x="{x:.1f}" y="{_TOP - 10}" text-anchor="middle">{_tick_text(tick)}</text>'
        )
    for i, pair in enumerate(pairs):
        y = _TOP + i * _ROW
        wb = plot * max(pair.before, 0.0) / top
        wa = plot * max(pair.after, 0.0) / top
        out.append(
            f"<g><title>{_e(pair.tooltip)}</title>"
            f'<text x="{_LABEL_WIDTH:.0f}" y="{y + 14}" text-anchor="end">{_e(_short(pair.label))}</text>'
            f'<rect class="before" x="{x0}" y="{y + 2}" width="{max(wb, 1.0):.1f}" height="{_ROW - 4}"/>'
            f'<rect class="after" x="{x0}" y="{y + 6}" width="{max(wa, 1.0):.1f}" height="{_ROW - 12}"/>'
            f'<text x="{x0 + max(wa, wb) + 5:.1f}" y="{y + 14}">{_e(pair.text)}</text></g>'
        )
    out.append("</svg>")
    return "".join(out)


@dataclass(frozen=True)
class _Stack:
    label: str
    segments: tuple[tuple[str, int], ...]
    text: str
    bad: bool


def _stacked_svg(stacks: Sequence[_Stack], *, caption: str) -> str:
    """One bar per row split into segments (name, count), colours cycling; names inside wide segments."""
    if not stacks:
        return ""
    top = max(sum(max(v, 0) for _, v in s.segments) for s in stacks) or 1
    x0 = _LABEL_WIDTH + 8
    plot = _WIDTH - x0 - _VALUE_WIDTH
    height = _TOP + len(stacks) * _ROW + 8
    out = [_svg_open(height, caption)]
    for tick in _nice_ticks(float(top)):
        x = x0 + plot * tick / top
        out.append(f'<line class="axis" x1="{x:.1f}" y1="{_TOP - 6}" x2="{x:.1f}" y2="{height - 6}"/>')
        out.append(
            f'<text class="tick" x="{x:.1f}" y="{_TOP - 10}" text-anchor="middle">{_tick_text(tick)}</text>'
        )
    for i, stack in enumerate(stacks):
        y = _TOP + i * _ROW
        out.append(
            f'<text x="{_LABEL_WIDTH:.0f}" y="{y + 14}" text-anchor="end">{_e(_short(stack.label))}</text>'
        )
        x = float(x0)
        for j, (name, value) in enumerate(stack.segments):
            width = plot * max(value, 0) / top
            out.append(
                f"<g><title>{_e(name)}: {value} partitions</title>"
                f'<rect class="seg{j % 10}" x="{x:.1f}" y="{y + 3}" width="{max(width, 0.0):.1f}" '
                f'height="{_ROW - 6}"/>'
            )
            if width > 7 * len(name) + 6:
                out.append(f'<text class="segtext" x="{x + 3:.1f}" y="{y + 14}">{_e(name)}</text>')
            out.append("</g>")
            x += width
        css = ' class="tick"' if not stack.bad else ' fill="#c8372d"'
        out.append(f'<text{css} x="{x + 5:.1f}" y="{y + 14}">{_e(stack.text)}</text>')
    out.append("</svg>")
    return "".join(out)


@dataclass(frozen=True)
class _Point:
    x: float
    y: float
    tooltip: str
    bad: bool


def _log_scale(value: float) -> float:
    return math.log10(1.0 + max(value, 0.0))


def _scatter_svg(points: Sequence[_Point], *, x_label: str, y_label: str, caption: str) -> str:
    """Log-log scatter (log10(1 + v)) with the y = x diagonal."""
    if not points:
        return "<p>No cursor with exact backlog bytes (no entries export).</p>"
    size, margin = 520, 64
    top = max(max(_log_scale(p.x), _log_scale(p.y)) for p in points)
    top = max(1.0, math.ceil(top))
    scale = (size - 2 * margin) / top
    width = size + 40

    def sx(v: float) -> float:
        return margin + _log_scale(v) * scale

    def sy(v: float) -> float:
        return size - margin - _log_scale(v) * scale

    out = [_svg_open(size, caption, width)]
    for power in range(int(top) + 1):
        pos = margin + power * scale
        text = _tick_text(10.0**power - (1 if power == 0 else 0))
        out.append(f'<line class="axis" x1="{pos:.1f}" y1="{margin}" x2="{pos:.1f}" y2="{size - margin}"/>')
        out.append(
            f'<line class="axis" x1="{margin}" y1="{size - pos:.1f}" x2="{size - margin}" '
            f'y2="{size - pos:.1f}"/>'
        )
        out.append(
            f'<text class="tick" x="{pos:.1f}" y="{size - margin + 16}" text-anchor="middle">{text}</text>'
        )
        out.append(
            f'<text class="tick" x="{margin - 6}" y="{size - pos + 4:.1f}" text-anchor="end">{text}</text>'
        )
    out.append(f'<line class="diag" x1="{margin}" y1="{size - margin}" x2="{size - margin}" y2="{margin}"/>')
    out.append(f'<text x="{size / 2:.0f}" y="{size - 18}" text-anchor="middle">{_e(x_label)} (log)</text>')
    out.append(
        f'<text x="16" y="{size / 2:.0f}" text-anchor="middle" transform="rotate(-90 16 {size / 2:.0f})">'
        f"{_e(y_label)} (log)</text>"
    )
    for p in points:
        css = "dot bad" if p.bad else "dot"
        out.append(
            f'<circle class="{css}" cx="{sx(p.x):.1f}" cy="{sy(p.y):.1f}" r="4">'
            f"<title>{_e(p.tooltip)}</title></circle>"
        )
    out.append("</svg>")
    return "".join(out)


def _line_svg(runs: Sequence[str], values: Sequence[float | None], *, caption: str) -> str:
    """A small line plot of one measure over the runs (dates on x), nulls left as gaps."""
    width, height, left, right, top_pad, bottom = 460, 210, 58, 14, 26, 34
    known = [v for v in values if v is not None]
    top = max([*known, 0.0]) or 1.0
    low = min([*known, 0.0])
    span = (top - low) or 1.0
    n = len(runs)
    plot_w, plot_h = width - left - right, height - top_pad - bottom

    def sx(i: int) -> float:
        return left + (plot_w * i / (n - 1) if n > 1 else plot_w / 2)

    def sy(v: float) -> float:
        return top_pad + plot_h * (1 - (v - low) / span)

    out = [_svg_open(height, caption, width)]
    out.append(f'<text x="{left}" y="16">{_e(caption)}</text>')
    for tick in _nice_ticks(top):
        if tick < low:
            continue
        out.append(
            f'<line class="axis" x1="{left}" y1="{sy(tick):.1f}" x2="{width - right}" y2="{sy(tick):.1f}"/>'
        )
        out.append(
            f'<text class="tick" x="{left - 4}" y="{sy(tick) + 4:.1f}" text-anchor="end">'
            f"{_tick_text(tick)}</text>"
        )
    for i, anchor in ((0, "start"), (n - 1, "end")) if n > 1 else ((0, "middle"),):
        out.append(
            f'<text class="tick" x="{sx(i):.1f}" y="{height - 12}" text-anchor="{anchor}">'
            f"{_e(runs[i])}</text>"
        )
    segment: list[str] = []
    lines: list[list[str]] = []
    for i, v in enumerate(values):
        if v is None:
            if segment:
                lines.append(segment)
            segment = []
            continue
        segment.append(f"{sx(i):.1f},{sy(v):.1f}")
    if segment:
        lines.append(segment)
    for pts in lines:
        out.append(f'<polyline class="line" points="{" ".join(pts)}"/>')
    for i, v in enumerate(values):
        if v is not None:
            out.append(
                f'<circle class="dot" cx="{sx(i):.1f}" cy="{sy(v):.1f}" r="3">'
                f"<title>{_e(runs[i])}: {_e(_tick_text(v))}</title></circle>"
            )
    out.append("</svg>")
    return "".join(out)


def _as_date(value: dt.date | str) -> dt.date:
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    return dt.date.fromisoformat(str(value))
