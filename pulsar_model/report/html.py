"""The HTML of the report: the sections, the "what to do" opening, tables and the document around them.

The report opens with what to do (:func:`todo_html`): the verdict, every finding ranked by severity and
impact with its cluster, topic and subscription, why it matters and the next step, and a roll-up per
cluster. Then one section per area (backlog, quotas, replication, compaction, failover, transactions,
schemas, history) with cards, charts (:mod:`pulsar_model.report.svg`) and tables, and at the end the tables
behind it and whether each was computed for the run date.

Tables show their first :data:`PREVIEW_ROWS` rows and every other row behind a ``<details>`` disclosure (no
script), and say how many rows there are; a table with more than the report's row cap says how many it
left out and which table holds them. Cells break only at ``/`` and spaces (``<wbr>`` after each ``/``),
never inside a word or a position. Every string from the data is escaped (:func:`~pulsar_model.report.svg.
esc`); a Content-Security-Policy ``meta`` (``default-src 'none'``) refuses any script or remote load.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_model import __version__
from pulsar_model.report.findings import Finding
from pulsar_model.report.queries import (
    SEVERITIES,
    Context,
    FindingsResult,
    aggregate,
    count_if,
    grouped_counts,
    keys,
    top,
)
from pulsar_model.report.svg import (
    Bar,
    Pair,
    Point,
    Stack,
    bar_label,
    esc,
    hbar_svg,
    line_svg,
    paired_svg,
    scatter_svg,
    stacked_svg,
)
from pulsar_model.report.text import duration, fmt, is_number, num, percent, plural, size

if TYPE_CHECKING:
    from pulsar_model.report import ReportSummary

#: Rows of a table shown before its disclosure.
PREVIEW_ROWS = 10
#: Most rows of one table in the report (the rest is named, never silently dropped).
MAX_TABLE_ROWS = 1000
#: Bars of a bar chart.
CHART_ROWS = 30
#: Points of the backlog scatter plot.
SCATTER_POINTS = 400
#: Runs shown by the trend plots.
TREND_RUNS = 60
#: Percent of a quota from which a topic counts as "near" its limit.
NEAR_QUOTA_PERCENT = 80.0
#: Findings listed in "What to do" (all counted; the rest named with the tables that hold them).
MAX_FINDINGS = 500

#: Counts of :attr:`ReportSummary.counts`: key -> label.
COUNT_LABELS: Mapping[str, str] = {
    "quota_breaches": "quota breaches (broker's rule)",
    "quota_breaches_exact": "quota breaches on exact data",
    "quota_near_limit": f"quotas at >= {NEAR_QUOTA_PERCENT:.0f}% not yet breached",
    "eviction_cursors": "subscriptions a backlog eviction would skip",
    "eviction_cursors_handled_now": "  of which evicted at the next check",
    "cursor_errors": "subscriptions in a state the broker fails on",
    "stuck_cursors": "stuck subscriptions (position unmoved, topic advancing)",
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


# -- sections -----------------------------------------------------------------------------------------


def _section_backlog(ctx: Context) -> str:
    parts: list[str] = []
    cursors = ctx.read("cursor_backlog")
    if cursors is None:
        parts.append(_not_computed(ctx, "cursor_backlog"))
    else:
        agg = aggregate(
            ctx,
            "cursor_backlog",
            cursors,
            with_error=count_if(F.col("error").isNotNull()),
            counter_drift=count_if(F.col("counter_minus_precise") != 0),
            incomplete=count_if(F.col("exported_entries_complete") == F.lit(False)),
            exact_bytes=F.sum("backlog_bytes"),
            estimated_bytes=F.sum("estimated_backlog_size_bytes"),
            max_age=F.max("oldest_unacked_age_seconds"),
        )
        ctx.counts["cursor_errors"] = agg["with_error"]
        parts.append(
            _cards(
                [
                    ("cursors", num(ctx.rows["cursor_backlog"])),
                    ("exact backlog", size(agg["exact_bytes"])),
                    ("broker estimate", size(agg["estimated_bytes"])),
                    ("oldest unacked", duration(agg["max_age"])),
                    ("broker would throw", num(agg["with_error"]), agg["with_error"] > 0),
                    ("counter drift", num(agg["counter_drift"]), agg["counter_drift"] > 0),
                    ("export incomplete", num(agg["incomplete"])),
                ]
            )
        )
        points = top(
            cursors.where(F.col("backlog_bytes").isNotNull()),
            [
                F.abs(F.col("estimate_minus_exact_bytes")).desc_nulls_last(),
                F.col("backlog_bytes").desc(),
                *keys("cursor_name"),
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
            scatter_svg(
                [
                    Point(
                        x=float(p["backlog_bytes"] or 0),
                        y=float(p["estimated_backlog_size_bytes"] or 0),
                        tooltip=f"{p['cluster']} {p['topic']} {p['cursor_name']}: exact "
                        f"{size(p['backlog_bytes'])}, estimate {size(p['estimated_backlog_size_bytes'])}",
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
            failing = top(cursors.where(F.col("error").isNotNull()), keys("cursor_name"), ctx.top_rows)
            parts.append("<h3>Cursors whose state makes the broker throw</h3>")
            parts.append(
                _table_of(
                    failing, "cluster; topic; cursor=cursor_name; mark-delete=mark_delete_position; error"
                )
            )
    topics = ctx.read("topic_backlog")
    if topics is None:
        parts.append(_not_computed(ctx, "topic_backlog"))
    else:
        differs = F.col("estimate_minus_stats_bytes") != 0
        agg = aggregate(ctx, "topic_backlog", topics, mismatches=count_if(differs))
        parts.append(
            f"<h3>Topic backlogSize replayed vs exported stats</h3><p>{num(ctx.rows['topic_backlog'])} "
            f"topics; {num(agg['mismatches'])} where the replayed §2.3 formula and the exported "
            "<code>backlogSize</code> disagree.</p>"
        )
        if agg["mismatches"] > 0:
            rows = top(
                topics.where(differs),
                [F.abs(F.col("estimate_minus_stats_bytes")).desc(), *keys()],
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
        parts.append(_not_computed(ctx, "topic_pinning"))
    else:
        agg = aggregate(
            ctx,
            "topic_pinning",
            pinning,
            pinned_topics=count_if(F.col("pinned_bytes") > 0),
            pinned_bytes=F.sum("pinned_bytes"),
            trimmable_bytes=F.sum("trimmable_now_bytes"),
        )
        parts.append(
            "<h3>Ledgers kept alive by one slow cursor</h3>"
            f"<p>{num(agg['pinned_topics'])} topics have a slowest cursor that alone keeps "
            f"{size(agg['pinned_bytes'])} of ledgers alive; the next trim would delete "
            f"{size(agg['trimmable_bytes'])} (retention ignored: the exports do not carry it).</p>"
        )
        rows = top(
            pinning.where(F.col("pinned_bytes") > 0),
            [F.col("pinned_bytes").desc(), *keys()],
            CHART_ROWS,
            when=agg["pinned_topics"],
        )
        parts.append(
            hbar_svg(
                [
                    Bar(
                        label=bar_label(r["cluster"], r["topic"], r["slowest_cursor_name"]),
                        value=float(r["pinned_bytes"]),
                        text=size(r["pinned_bytes"]),
                        tooltip=f"{r['slowest_cursor_name']} ({r['slowest_cursor_kind']}) pins "
                        f"{r['pinned_ledgers']} ledgers of {r['cluster']} {r['topic']}",
                    )
                    for r in rows
                ],
                caption="bytes the slowest cursor alone keeps alive",
                unit="bytes",
            )
        )
    unmoved = ctx.read("unmoved_cursors")
    if unmoved is None:
        parts.append(_not_computed(ctx, "unmoved_cursors"))
    else:
        stuck = F.col("topic_advanced") == F.lit(True)
        agg = aggregate(ctx, "unmoved_cursors", unmoved, stuck=count_if(stuck))
        ctx.counts["stuck_cursors"] = agg["stuck"]
        parts.append(
            f"<h3>Unmoved cursors</h3><p>{num(ctx.rows['unmoved_cursors'])} cursors kept their mark-delete "
            f"over their last exports; {num(agg['stuck'])} of them while producers kept writing (stuck).</p>"
        )
        if agg["stuck"] > 0:
            rows = top(
                unmoved.where(stuck), [F.col("unmoved_exports").desc(), *keys("cursor_name")], ctx.top_rows
            )
            parts.append(
                _table_of(
                    rows,
                    "cluster; topic; cursor=cursor_name; kind=cursor_kind; mark-delete=mark_delete_position; "
                    "unmoved since=unmoved_since_export_date; exports=#unmoved_exports",
                )
            )
    return "".join(parts)


def _section_quota(ctx: Context) -> str:
    parts: list[str] = []
    status = ctx.read("quota_status")
    if status is None:
        parts.append(_not_computed(ctx, "quota_status"))
    else:
        near = (F.col("percent_of_quota") >= NEAR_QUOTA_PERCENT) & ~F.coalesce(
            F.col("exceeded"), F.lit(False)
        )
        agg = aggregate(
            ctx,
            "quota_status",
            status,
            breaches=count_if(F.col("exceeded") == F.lit(True)),
            exact=count_if(F.col("exact_exceeded") == F.lit(True)),
            handled=count_if(F.col("is_handled") == F.lit(True)),
            near=count_if(near),
        )
        ctx.counts["quota_breaches"] = agg["breaches"]
        ctx.counts["quota_breaches_exact"] = agg["exact"]
        ctx.counts["quota_near_limit"] = agg["near"]
        parts.append(
            _cards(
                [
                    ("topic × quota rows", num(ctx.rows["quota_status"])),
                    ("breached (broker rule)", num(agg["breaches"]), agg["breaches"] > 0),
                    ("breached on exact data", num(agg["exact"]), agg["exact"] > 0),
                    ("acted on at next check", num(agg["handled"]), agg["handled"] > 0),
                    (f"at ≥ {NEAR_QUOTA_PERCENT:.0f}%", num(agg["near"])),
                ]
            )
        )
        rows = top(
            status.where(F.col("percent_of_quota").isNotNull()),
            [F.col("percent_of_quota").desc(), *keys("quota_type")],
            ctx.top_rows,
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
            hbar_svg(
                [
                    Bar(
                        label=bar_label(r["cluster"], r["topic"], r["quota"]),
                        value=float(r["percent_of_quota"]),
                        text=r["percent"],
                        tooltip=f"{r['cluster']} {r['topic']} {r['quota_type']}: {r['percent']} of "
                        f"{r['limit']} ({r['policy']})",
                        css="bar bad" if r["exceeded"] else "bar",
                    )
                    for r in rows[:CHART_ROWS]
                ],
                caption="percent of the backlog quota used",
                unit="%",
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
        parts.append(_not_computed(ctx, "quota_evictions"))
    else:
        touched = F.col("skipped_entries") > 0
        agg = aggregate(
            ctx,
            "quota_evictions",
            evictions,
            touched=count_if(touched),
            handled=count_if(touched & (F.col("handled_now") == F.lit(True))),
            system=count_if(touched & F.col("is_system_cursor")),
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
                    ("cursors skipped", num(agg["touched"]), agg["touched"] > 0),
                    ("at the next check", num(agg["handled"]), agg["handled"] > 0),
                    ("system cursors hit", num(agg["system"]), agg["system"] > 0),
                    ("messages lost", num(agg["lost_messages"])),
                ]
            )
        )
        rows = top(
            evictions.where(touched),
            [
                F.col("skipped_entries").desc(),
                F.col("lost_bytes").desc_nulls_last(),
                *keys("quota_type", "cursor_name"),
            ],
            ctx.top_rows,
            when=agg["touched"],
        )
        rows = [{**r, "quota": _quota_kind(r["quota_type"])} for r in rows]
        parts.append(
            hbar_svg(
                [
                    Bar(
                        label=bar_label(r["cluster"], r["topic"], r["cursor_name"]),
                        value=float(r["skipped_entries"]),
                        text=f"{num(r['skipped_entries'])} entries",
                        tooltip=f"{r['quota']} eviction of {r['cursor_name']}: "
                        f"{num(r['lost_messages'])} messages, {size(r['lost_bytes'])} lost",
                        css="bar bad" if r["handled_now"] else "bar",
                    )
                    for r in rows[:CHART_ROWS]
                ],
                caption="entries a backlog eviction would skip per cursor",
                unit="entries",
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


def _section_replication(ctx: Context) -> str:
    parts: list[str] = []
    positions = ctx.read("replication_positions")
    if positions is None:
        parts.append(_not_computed(ctx, "replication_positions"))
    else:
        by_status = grouped_counts(positions, "status")
        ctx.rows["replication_positions"] = sum(by_status.values())
        ctx.counts["replication_stalled"] = by_status.get("stalled", 0)
        ctx.counts["replication_lagging"] = by_status.get("lagging", 0)
        names = ("in_sync", "lagging", "stalled", "inactive")
        parts.append(
            "<h3>Replicated subscription cursors</h3>"
            + _cards(
                [(s, num(by_status.get(s, 0)), s == "stalled" and by_status.get(s, 0) > 0) for s in names]
            )
        )
        rows = top(
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
        parts.append(_not_computed(ctx, "replication_failover_duplicates"))
    else:
        shown = F.coalesce(
            F.col("failover_duplicate_messages"), F.col("consumed_on_source_entries_upper_bound")
        )
        agg = aggregate(
            ctx,
            "replication_failover_duplicates",
            duplicates,
            messages=F.sum("failover_duplicate_messages"),
            bytes=F.sum("failover_duplicate_bytes"),
            with_duplicates=count_if(shown > 0),
        )
        ctx.counts["failover_duplicate_messages"] = agg["messages"]
        parts.append(
            "<h3>Failover duplicates per subscription</h3><p class=note>Messages a consumer moving from the "
            "source to the target cluster would receive again although the source acknowledged them "
            "(docs/semantics §4.4, §4.8). Blue: exact from both clusters' entries; grey: snapshot upper "
            "bound in entries when the entries were not exported.</p>"
            + _cards(
                [
                    ("subscription × direction", num(ctx.rows["replication_failover_duplicates"])),
                    ("with duplicates", num(agg["with_duplicates"]), agg["with_duplicates"] > 0),
                    ("duplicate messages (exact)", num(agg["messages"])),
                    ("duplicate bytes (exact)", size(agg["bytes"])),
                ]
            )
        )
        rows = top(
            duplicates.where(shown > 0),
            [shown.desc(), *_replication_keys()],
            ctx.top_rows,
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
            hbar_svg(
                [_duplicate_bar(r) for r in rows[:CHART_ROWS]],
                caption="messages redelivered by a failover, per subscription",
                unit="messages (grey bars: entries, upper bound)",
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
        parts.append(_not_computed(ctx, "replication_findings"))
    else:
        by_severity = grouped_counts(findings, "severity")
        ctx.rows["replication_findings"] = sum(by_severity.values())
        ctx.counts["replication_critical_findings"] = by_severity.get("critical", 0)
        levels = ("critical", "warning", "info")
        parts.append(
            "<h3>Replication findings</h3>"
            + _cards(
                [
                    (s, num(by_severity.get(s, 0)), s == "critical" and by_severity.get(s, 0) > 0)
                    for s in levels
                ]
            )
        )
        rows = top(
            findings,
            [
                F.when(F.col("severity") == "critical", 0)
                .when(F.col("severity") == "warning", 1)
                .otherwise(2),
                F.col("measure").desc_nulls_last(),
                F.col("kind"),
                *keys("subscription"),
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


def _duplicate_bar(row: Mapping[str, Any]) -> Bar:
    exact = row["failover_duplicate_messages"] is not None
    value = row["failover_duplicate_messages"] if exact else row["consumed_on_source_entries_upper_bound"]
    return Bar(
        label=bar_label(
            row["source_cluster"], row["topic"], f"{row['subscription']} → {row['target_cluster']}"
        ),
        value=float(value),
        text=f"{num(value)} msgs" if exact else f"≤ {num(value)} entries",
        tooltip=f"{row['subscription']} on {row['topic']}, failover {row['direction']} ({row['method']})",
        css="bar" if exact else "bar muted",
    )


def _section_compaction(ctx: Context) -> str:
    summary = ctx.read("compaction_summary")
    if summary is None:
        return _not_computed(ctx, "compaction_summary")
    agg = aggregate(
        ctx,
        "compaction_summary",
        summary,
        would_trigger=count_if(F.col("would_trigger") == F.lit(True)),
        before=F.sum("payload_bytes_before"),
        saved=F.sum("payload_bytes_saved"),
        sticky=F.sum("tombstones_never_removed"),
    )
    ctx.counts["compaction_would_trigger"] = agg["would_trigger"]
    ctx.counts["compaction_bytes_saved"] = agg["saved"]
    rows = top(
        summary,
        [F.col("payload_bytes_saved").desc(), F.col("payload_bytes_before").desc(), *keys()],
        ctx.top_rows,
        when=ctx.rows["compaction_summary"],
    )
    pairs = [
        Pair(
            label=bar_label(r["cluster"], r["topic"]),
            before=float(r["payload_bytes_before"]),
            after=float(r["payload_bytes_after"]),
            text=f"{size(r['payload_bytes_before'])} → {size(r['payload_bytes_after'])}",
            tooltip=f"{r['cluster']} {r['topic']}: {num(r['distinct_keys'])} keys, "
            f"saves {size(r['payload_bytes_saved'])}",
        )
        for r in rows[:CHART_ROWS]
    ]
    return (
        _cards(
            [
                ("topics", num(ctx.rows["compaction_summary"])),
                ("payload read", size(agg["before"])),
                ("payload saved", size(agg["saved"])),
                ("trigger fires", num(agg["would_trigger"]), agg["would_trigger"] > 0),
                ("tombstones never removed", num(agg["sticky"]), agg["sticky"] > 0),
            ]
        )
        + "<p class=note>Uncompressed payload bytes the compactor reads (grey) and writes (blue) per topic "
        "(docs §5.4, §5.5), largest savings first.</p>"
        + paired_svg(pairs, caption="payload bytes before and after compaction per topic", unit="bytes")
        + _table_of(
            rows[: ctx.top_rows],
            "cluster; topic; keys=#distinct_keys; live keys=#live_keys; messages before=#messages_before; "
            "after=#messages_after; bytes before=#payload_bytes_before; after=#payload_bytes_after; "
            "saved=%savings_ratio; trigger fires=would_trigger; threshold=#threshold_bytes; "
            "estimate=#backlog_estimate_bytes; dirty=%dirty_ratio",
        )
    )


def _section_failover(ctx: Context) -> str:
    parts: list[str] = []
    assignments = ctx.read("failover_assignments")
    if assignments is None:
        parts.append(_not_computed(ctx, "failover_assignments"))
    else:
        differs = F.col("matches_stats") == F.lit(False)
        agg = aggregate(ctx, "failover_assignments", assignments, differs=count_if(differs))
        ctx.counts["failover_stats_mismatches"] = agg["differs"]
        parts.append(
            f"<h3>Active consumers</h3><p>{num(ctx.rows['failover_assignments'])} Failover subscriptions; "
            f"{num(agg['differs'])} where the consumer the broker's rule picks differs from "
            "<code>activeConsumerName</code> in the exported stats.</p>"
        )
        if agg["differs"] > 0:
            rows = top(assignments.where(differs), keys("subscription"), ctx.top_rows)
            parts.append(
                _table_of(
                    rows,
                    "cluster; topic; subscription; rule=selection_mode; picked=active_consumer_name; "
                    "stats say=stats_active_consumer_name; priority group=top_group_consumers",
                )
            )
    balance = ctx.read("failover_balance")
    if balance is None:
        parts.append(_not_computed(ctx, "failover_balance"))
    else:
        agg = aggregate(
            ctx,
            "failover_balance",
            balance,
            imbalanced=count_if(F.col("imbalance") > 1),
            with_idle=count_if(F.size("idle_consumers") > 0),
        )
        ctx.counts["failover_imbalanced"] = agg["imbalanced"]
        parts.append(
            "<h3>Partitions per active consumer</h3><p class=note>One bar per subscription of a partitioned "
            "topic, one segment per consumer of the highest-priority group: how many partitions it is "
            f"active on (docs §6.3). {num(agg['imbalanced'])} subscriptions have a spread above one "
            f"partition, {num(agg['with_idle'])} have idle consumers.</p>"
        )
        rows = top(
            balance,
            [F.col("imbalance").desc(), F.col("partitions").desc(), *keys("subscription")],
            ctx.top_rows,
            when=ctx.rows["failover_balance"],
        )
        stacks = [
            Stack(
                label=bar_label(r["cluster"], r["topic"], r["subscription"]),
                segments=tuple(
                    sorted((str(k), int(v or 0)) for k, v in (r["partitions_per_consumer"] or {}).items())
                ),
                text=f"spread {r['imbalance']}",
                bad=int(r["imbalance"]) > 1,
            )
            for r in rows[:CHART_ROWS]
        ]
        parts.append(stacked_svg(stacks, caption="partitions per active consumer", unit="partitions"))
        parts.append(
            _table_of(
                rows[: ctx.top_rows],
                "cluster; topic; subscription; partitions=#partitions; consumers=#consumers; "
                "max=#max_partitions; min=#min_partitions; spread=#imbalance; idle=idle_consumers",
            )
        )
    return "".join(parts)


def _section_transactions(ctx: Context) -> str:
    parts: list[str] = []
    txns = ctx.read("transactions")
    if txns is None:
        parts.append(_not_computed(ctx, "transactions"))
    else:
        is_open = F.col("state") == "open"
        agg = aggregate(
            ctx,
            "transactions",
            txns,
            open=count_if(is_open),
            aborted=count_if(F.col("state") == "aborted"),
            committed=count_if(F.col("state") == "committed"),
            long_open=count_if(F.col("is_long_open") == F.lit(True)),
        )
        ctx.counts["transactions_open"] = agg["open"]
        ctx.counts["transactions_long_open"] = agg["long_open"]
        parts.append(
            _cards(
                [
                    ("committed", num(agg["committed"])),
                    ("aborted", num(agg["aborted"])),
                    ("open", num(agg["open"]), agg["open"] > 0),
                    ("long open", num(agg["long_open"]), agg["long_open"] > 0),
                ]
            )
        )
        if agg["open"] > 0:
            rows = top(txns.where(is_open), [F.col("open_age_ms").desc_nulls_last(), *keys("txn_id")], 20)
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
        parts.append(_not_computed(ctx, "transaction_holdback"))
    else:
        held = F.col("held_back_entries") > 0
        agg = aggregate(
            ctx,
            "transaction_holdback",
            holdback,
            held_topics=count_if(held),
            held_entries=F.sum("held_back_entries"),
        )
        parts.append(
            f"<h3>Held back by maxReadPosition</h3><p>{num(agg['held_topics'])} topics hold "
            f"{num(agg['held_entries'])} entries back from every dispatcher until their oldest open "
            "transaction ends (docs §8.4).</p>"
        )
        rows = top(
            holdback.where(held),
            [F.col("held_back_entries").desc(), *keys()],
            ctx.top_rows,
            when=agg["held_topics"],
        )
        bars = [
            Bar(
                label=bar_label(r["cluster"], r["topic"]),
                value=float(r["held_back_entries"]),
                text=f"{num(r['held_back_entries'])} entries",
                tooltip=f"held back by {r['oldest_open_txn_id']} since "
                f"{fmt(r['oldest_open_first_position'])}",
                css="bar warn",
            )
            for r in rows[:CHART_ROWS]
        ]
        parts.append(
            hbar_svg(bars, caption="entries held back by an open transaction per topic", unit="entries")
        )
        parts.append(
            _table_of(
                rows[: ctx.top_rows],
                "cluster; topic; open txns=#open_txn_count; oldest open=oldest_open_txn_id; "
                "maxReadPosition=max_read_position; held entries=#held_back_entries; "
                "held messages=#held_back_messages",
            )
        )
    return "".join(parts)


def _section_schemas(ctx: Context) -> str:
    verdicts = ctx.read("schema_verdicts")
    if verdicts is None:
        return _not_computed(ctx, "schema_verdicts")
    by_verdict = grouped_counts(verdicts, "verdict")
    ctx.rows["schema_verdicts"] = sum(by_verdict.values())
    ctx.counts["schema_incompatible"] = by_verdict.get("incompatible", 0)
    names = ("accepted_first", "accepted_identical", "compatible", "incompatible")
    parts = [_cards([(v.replace("_", " "), num(by_verdict.get(v, 0)), v == "incompatible") for v in names])]
    if by_verdict.get("incompatible", 0) > 0:
        rows = top(verdicts.where(F.col("verdict") == "incompatible"), keys("version"), ctx.top_rows)
        parts.append("<h3>Versions the registry would refuse</h3>")
        parts.append(
            _table_of(
                rows,
                "cluster; topic; version=#version; type=schema_type; strategy; "
                "checked against=checked_versions; why=reasons",
            )
        )
    return "".join(parts)


def _section_history(ctx: Context) -> str:
    parts: list[str] = []
    for table, title in (("topic_history", "Topic trends"), ("subscription_history", "Subscription trends")):
        parts.append(f"<h3>{esc(title)}</h3>")
        history = ctx.read_history(table)
        parts.append(_not_computed(ctx, table) if history is None else _trends(ctx, table, *history))
    parts.append("<h3>Subscription status (last runs)</h3>")
    status = ctx.read("subscription_status")
    if status is None:
        parts.append(_not_computed(ctx, "subscription_status"))
    elif "status" not in status.columns:
        parts.append("<p>The table has no <code>status</code> column.</p>")
    else:
        by_status: dict[str, int] = {}
        for name, count in grouped_counts(status, "status").items():
            by_status[name.upper()] = by_status.get(name.upper(), 0) + count
        ctx.rows["subscription_status"] = sum(by_status.values())
        ctx.counts["subscriptions_stalled"] = by_status.get("STALL", 0) + by_status.get("STOP", 0)
        ctx.counts["subscriptions_warn"] = by_status.get("WARN", 0)
        names = ["OK", "WARN", "STALL", "STOP", "REWIND"]
        names += sorted(k for k in by_status if k not in names)
        parts.append(
            _cards([(n, num(by_status.get(n, 0)), n != "OK" and by_status.get(n, 0) > 0) for n in names])
        )
        not_ok = F.upper(F.col("status")) != "OK"
        rows = top(
            status.where(not_ok),
            [
                F.when(F.upper(F.col("status")).isin("STALL", "STOP", "REWIND"), 0)
                .when(F.upper(F.col("status")) == "WARN", 1)
                .otherwise(2),
                F.col("backlog_entries").desc_nulls_last(),
                *keys("cursor_name"),
            ],
            ctx.top_rows,
            when=sum(v for k, v in by_status.items() if k != "OK"),
        )
        parts.append(
            _table_of(
                rows,
                "status; cluster; topic; subscription=cursor_name; backlog entries=#backlog_entries; "
                "runs=#window_runs; why=status_reason",
                total=sum(v for k, v in by_status.items() if k != "OK"),
                table="subscription_status",
            )
        )
    parts.append("<h3>What changed since the previous run</h3>")
    changes = ctx.read("run_changes")
    if changes is None:
        parts.append(_not_computed(ctx, "run_changes"))
    else:
        n_changes = aggregate(ctx, "run_changes", changes)
        del n_changes
        rows = top(
            changes,
            [
                F.col("change_type"),
                F.col("cluster").asc_nulls_last(),
                F.col("topic").asc_nulls_last(),
                F.col("subscription").asc_nulls_last(),
                F.col("item").asc_nulls_last(),
            ],
            ctx.top_rows,
            when=ctx.rows["run_changes"],
        )
        parts.append(
            _table_of(
                rows,
                "change=change_type; cluster; topic; subscription; item; before=old_value; after=new_value; "
                "detail",
                total=ctx.rows["run_changes"],
                table="run_changes",
            )
        )
    return "".join(parts)


#: Numeric columns a trend plot prefers, in order (history tables are built elsewhere; any numeric
#: column is plotted when none of these exists).
_TREND_PREFERRED = (
    "exact_backlog_bytes",
    "backlog_bytes",
    "estimated_backlog_size_bytes",
    "backlog_entries",
    "size_percent_of_quota",
    "time_percent_of_quota",
    "percent_of_quota",
    "failover_duplicate_messages",
    "duplicate_messages",
    "remote_behind_entries",
    "lag_entries",
    "payload_bytes_saved",
    "savings_ratio",
)
_TREND_MAX_SERIES = 6
_NUMERIC_TYPES = (T.LongType, T.IntegerType, T.ShortType, T.DoubleType, T.FloatType, T.DecimalType)


def _trends(ctx: Context, table: str, df: DataFrame, date_column: str) -> str:
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
    current = next((r for r in runs if r["_run"] == ctx.run_date.isoformat()), None)
    ctx.rows[table] = 0 if current is None else int(current["_rows"])
    if len(runs) < 2:
        only = f" ({esc(runs[0]['_run'])})" if runs else ""
        return (
            f"<p>Trends need at least two runs; this warehouse has {len(runs)} run up to this date{only}. "
            "They appear from the next nightly run on.</p>"
        )
    note = (
        f"<p class=note>{len(runs)} runs up to {ctx.run_date.isoformat()}; per run the sum over all rows "
        "(the maximum for percents and ratios).</p>"
    )
    plots = [
        line_svg(
            [str(r["_run"]) for r in runs],
            [None if r[c] is None else float(r[c]) for r in runs],
            caption=c.replace("_", " "),
            unit=_unit_of(c),
        )
        for c in chosen
    ]
    return note + '<div class="grid">' + "".join(plots) + "</div>"


def _unit_of(column: str) -> str:
    """The unit of a history column, from its name (README: columns carry their unit)."""
    for suffix, unit in (
        ("_bytes", "bytes"),
        ("_entries", "entries"),
        ("_messages", "messages"),
        ("_seconds", "seconds"),
        ("_ratio", "ratio (0-1)"),
    ):
        if column.endswith(suffix):
            return unit
    return "%" if "percent" in column else "count"


SECTIONS: tuple[tuple[str, str, Callable[[Context], str]], ...] = (
    ("backlog", "Backlog: broker estimate vs exact", _section_backlog),
    ("quota", "Backlog quotas and eviction preview", _section_quota),
    ("replication", "Geo-replication", _section_replication),
    ("compaction", "Compaction savings", _section_compaction),
    ("failover", "Failover subscriptions", _section_failover),
    ("transactions", "Transactions", _section_transactions),
    ("schemas", "Schema registrations", _section_schemas),
    ("history", "History and trends", _section_history),
)


def _direction(row: Mapping[str, Any]) -> str:
    return f"{row['source_cluster']} → {row['target_cluster']}"


def _replication_keys() -> list[Any]:
    return [F.col(c) for c in ("topic", "subscription", "source_cluster", "target_cluster")]


# -- what to do ---------------------------------------------------------------------------------------


def verdict_text(findings: FindingsResult, not_checked: Sequence[str]) -> str:
    """One sentence: how many findings of which severity, and what was not checked."""
    totals = findings.totals
    if findings.total:
        parts = [plural(totals[s], f"{s} finding") for s in SEVERITIES if totals.get(s)]
        text = ", ".join(parts)
    else:
        text = "no findings in what was checked"
    if not_checked:
        text += f"; NOT checked (stage not run for this date): {', '.join(not_checked)}"
    return text


def todo_html(findings: FindingsResult, described: Sequence[Finding], not_checked: Sequence[str]) -> str:
    """The opening: verdict, ranked findings (past the first few behind a disclosure), per-cluster roll-up."""
    css = (
        "verdict bad" if findings.totals.get("critical") else "verdict warn" if findings.total else "verdict"
    )
    if not_checked and not findings.total:
        css = "verdict warn"
    out = [f'<p class="{css}">{esc(verdict_text(findings, not_checked).capitalize())}.</p>']
    if not_checked:
        out.append(
            '<p class="missing">Not checked: '
            + esc(", ".join(not_checked))
            + ". No stage of these areas ran for this date, so their findings are unknown (not zero). Run "
            "them, e.g. <code>pulsar-analytics nightly --stages "
            + esc(",".join(not_checked))
            + " --export-date DATE</code>.</p>"
        )
    if described:
        rows = [
            [
                _Sev(f.severity),
                f.cluster,
                _Wrap(f.topic),
                f.subscription,
                _Rich(f.title, f.why),
                _Wrap(f.next_step),
            ]
            for f in described
        ]
        out.append(
            _table(
                ["severity", "cluster", "topic", "subscription", "what and why", "next step"],
                rows,
                total=findings.total,
                table="the tables named in each next step",
                css="findings",
            )
        )
    out.append("<h3>Per cluster</h3>")
    if findings.by_cluster:
        clusters = sorted(findings.by_cluster)
        out.append(
            _table(
                ["cluster", *SEVERITIES, "total"],
                [
                    [
                        c,
                        *(_Num(findings.by_cluster[c].get(s, 0)) for s in SEVERITIES),
                        _Num(sum(findings.by_cluster[c].values())),
                    ]
                    for c in clusters
                ],
            )
        )
    else:
        out.append("<p>No cluster has a finding in what was checked.</p>")
    return "".join(out)


def tables_html(summary: ReportSummary) -> str:
    """Every table the report reads: computed (with its rows for the date) or not, and why not."""
    rows: list[list[object]] = []
    for section in summary.sections:
        for table in section.tables_read:
            rows.append([table, section.title, _Num(summary.rows.get(table)), "computed"])
        for table, reason in section.tables_missing.items():
            rows.append([table, section.title, None, f"not computed: {reason}"])
    return _table(["table", "section", "rows", "status"], rows)


# -- the document ---------------------------------------------------------------------------------------

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"

CSS = """
:root{--fg:#1d2733;--muted:#5f6b7a;--line:#d9dee5;--bg:#f6f8fa;--blue:#2f6fb0;--red:#c8372d;--amber:#c98a12;
--grey:#9aa5b1}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;
color:var(--fg);background:#fff}
header{background:#15202b;color:#fff;padding:18px 28px}
header h1{margin:0 0 4px;font-size:22px}
header p{margin:0;color:#c5ced8}
nav{margin-top:10px;display:flex;flex-wrap:wrap;gap:4px 14px}
nav a{color:#9cc7f2;text-decoration:none;white-space:nowrap}
main{padding:8px 28px 40px;max-width:1400px}
section{border-bottom:1px solid var(--line);padding:10px 0 22px}
h2{font-size:19px;margin:18px 0 10px}
h3{font-size:15px;margin:18px 0 8px}
.note{color:var(--muted);max-width:980px}
.missing{color:var(--muted);background:var(--bg);border:1px dashed var(--line);padding:8px 12px;
border-radius:6px}
.verdict{font-size:17px;font-weight:600;padding:10px 14px;border-radius:6px;background:#e6f4ea;
border-left:6px solid #2e7d32}
.verdict.warn{background:#fff6e0;border-left-color:var(--amber)}
.verdict.bad{background:#fdecea;border-left-color:var(--red)}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:8px 0 12px}
.card{background:var(--bg);border:1px solid var(--line);border-radius:8px;padding:8px 14px;min-width:140px}
.card .v{font-size:20px;font-weight:600}
.card .k{color:var(--muted);font-size:12px}
.card.alert{border-color:var(--red)}
.card.alert .v{color:var(--red)}
.tablewrap{overflow-x:auto;max-width:100%}
.rowcount{color:var(--muted);font-size:12px;margin:2px 0}
table{border-collapse:collapse;margin:6px 0 10px;font-size:12.5px}
th,td{border-bottom:1px solid var(--line);padding:4px 8px;text-align:left;vertical-align:top;
overflow-wrap:normal;word-break:normal;hyphens:none;max-width:420px}
th{background:var(--bg);font-weight:600;white-space:nowrap}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.nowrap,.nw{white-space:nowrap}
table.findings td{max-width:460px}
.sev{font-weight:700;text-transform:uppercase;font-size:11px;white-space:nowrap}
.sev.critical{color:var(--red)}.sev.warning{color:var(--amber)}.sev.info{color:var(--muted)}
.why{color:var(--muted)}
details{margin:0 0 14px}
summary{cursor:pointer;color:var(--blue)}
.grid{display:flex;flex-wrap:wrap;gap:12px}
svg{display:block;max-width:100%;height:auto;margin:6px 0 12px}
svg text{font:11px system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;fill:var(--fg)}
svg .axis{stroke:var(--line);stroke-width:1}
svg .tick{fill:var(--muted)}
svg .axistitle{fill:var(--muted);font-style:italic}
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


def document(summary: ReportSummary, todo: str, parts: Sequence[tuple[str, str, str]]) -> str:
    """The whole file: header with navigation, "What to do", the sections, the tables of this run."""
    day = summary.run_date.isoformat()
    anchors = [("todo", "What to do"), *((a, t) for a, t, _ in parts), ("tables", "Tables of this run")]
    nav = "".join(f'<a href="#{a}">{esc(t)}</a>' for a, t in anchors)
    sections = [f'<section id="todo"><h2>What to do</h2>{todo}</section>']
    sections += [f'<section id="{a}"><h2>{esc(t)}</h2>{body}</section>' for a, t, body in parts]
    sections.append(f'<section id="tables"><h2>Tables of this run</h2>{tables_html(summary)}</section>')
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>pulsar-analytics report {esc(day)}</title><style>{CSS}</style></head><body>"
        f"<header><h1>pulsar-analytics report</h1><p>run date {esc(day)} · generated "
        f"{esc(summary.generated_at.strftime('%Y-%m-%d %H:%M:%S %Z').strip())} · pulsar-analytics "
        f"{esc(__version__)}</p><nav>{nav}</nav></header><main>"
        + "".join(sections)
        + "</main><footer>Static report: no scripts, no network. Numbers follow the broker's semantics per "
        "Pulsar version (docs/semantics/); the tables behind each part are listed at the end.</footer>"
        "</body></html>\n"
    )


def _not_computed(ctx: Context, table: str) -> str:
    reason = ctx.missing.get(table, "the table was not read")
    return f'<p class="missing">{esc(table)}: not computed for this run ({esc(reason)}).</p>'


# -- tables (every data string is escaped here) -------------------------------------------------------------


@dataclass(frozen=True)
class _Num:
    """A table cell holding a number (right-aligned)."""

    value: object


@dataclass(frozen=True)
class _Wrap:
    """A long name (topic, command) that may break after ``/`` and at spaces, nowhere else."""

    value: object


@dataclass(frozen=True)
class _Sev:
    """A severity label."""

    value: str


@dataclass(frozen=True)
class _Rich:
    """A title with an explanation under it."""

    title: str
    why: str


def _wrap_html(text: str, *, slashes: bool = True) -> str:
    """``text`` escaped, breakable at spaces and (with ``slashes``) after each ``/``, never at a hyphen:
    browsers break after ``-`` (``eu-`` / ``central``, ``get-`` / ``backlog-quotas``), so every hyphenated
    run is kept whole."""
    out = []
    for part in _BREAKS.split(text):
        if part == "/":
            out.append("/<wbr>" if slashes else "/")
        elif "-" in part and not part.isspace():
            out.append(f'<span class="nw">{esc(part)}</span>')
        else:
            out.append(esc(part))
    return "".join(out)


_BREAKS = re.compile(r"(\s+|/)")


def _cell(cell: object) -> str:
    if isinstance(cell, _Num):
        return f'<td class="n">{esc(fmt(cell.value))}</td>'
    if isinstance(cell, _Sev):
        return f'<td><span class="sev {esc(cell.value)}">{esc(cell.value)}</span></td>'
    if isinstance(cell, _Rich):
        return f'<td><b>{_wrap_html(cell.title)}</b><br><span class="why">{_wrap_html(cell.why)}</span></td>'
    if isinstance(cell, _Wrap):
        return f"<td>{_wrap_html(fmt(cell.value))}</td>"
    if isinstance(cell, Mapping) and set(cell) == {"ledger_id", "entry_id"}:
        return f'<td class="nowrap">{esc(fmt(cell))}</td>'
    text = fmt(cell)
    if " " not in text and "/" in text:
        return f"<td>{_wrap_html(text)}</td>"
    return f"<td>{_wrap_html(text, slashes=False)}</td>"


def _table(
    headers: Sequence[str],
    rows: Sequence[Sequence[object]],
    *,
    total: int | None = None,
    table: str | None = None,
    css: str = "",
) -> str:
    """A table: the first :data:`PREVIEW_ROWS` rows, then the others behind a ``<details>`` disclosure; the
    row count above it, and when ``total`` exceeds the rows given, how many were left out and where."""
    if not rows:
        return "<p>No rows.</p>"
    count = len(rows)
    total = count if total is None else max(total, count)
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    klass = f' class="{css}"' if css else ""

    def render(part: Sequence[Sequence[object]]) -> str:
        body = "".join("<tr>" + "".join(_cell(c) for c in row) + "</tr>" for row in part)
        return (
            f'<div class="tablewrap"><table{klass}><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>"
        )

    if total > count:
        note = (
            f"{plural(total, 'row')}; the report shows the first {count:,} in rank order, the other "
            f"{total - count:,} are in {table or 'the table'}."
        )
    elif count >= MAX_TABLE_ROWS:
        note = (
            f"the first {count:,} rows in rank order; there may be more: query {table or 'the table'} for "
            "all of them."
        )
    else:
        note = plural(count, "row")
    out = [f'<p class="rowcount">{esc(note)}</p>', render(rows[:PREVIEW_ROWS])]
    if count > PREVIEW_ROWS:
        out.append(
            f"<details><summary>Show the other {count - PREVIEW_ROWS:,} rows "
            f"({count:,} in all)</summary>{render(rows[PREVIEW_ROWS:])}</details>"
        )
    return "".join(out)


def _table_of(
    rows: Sequence[Mapping[str, Any]], spec: str, *, total: int | None = None, table: str | None = None
) -> str:
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
                line.append(duration(value))
            elif kind == "%":
                line.append(_Num(percent(value)))
            else:
                line.append(value)
        cells.append(line)
    return _table([c[0] for c in columns], cells, total=total, table=table)


def _cards(items: Iterable[tuple[str, str] | tuple[str, str, bool]]) -> str:
    out = []
    for item in items:
        label, value = item[0], item[1]
        alert = len(item) > 2 and bool(item[2])
        css = "card alert" if alert else "card"
        out.append(
            f'<div class="{css}"><div class="v">{esc(value)}</div><div class="k">{esc(label)}</div></div>'
        )
    return '<div class="cards">' + "".join(out) + "</div>"


def _chart_note(shown: int, total: int, what: str) -> str:
    """Says when a chart shows only the largest ``shown`` of ``total`` items (the table below has all)."""
    if total <= shown:
        return ""
    return (
        f'<p class="note">The chart shows the {shown:,} largest of {total:,} {esc(what)}; the table below '
        "lists them all.</p>"
    )


def _relative_error(estimate: object, exact: object) -> float:
    if not is_number(estimate) or not is_number(exact):
        return 0.0
    e, x = float(estimate), float(exact)  # type: ignore[arg-type]
    return abs(e - x) / max(abs(x), 1.0)


def _quota_kind(quota_type: object) -> str:
    return {"destination_storage": "size", "message_age": "time"}.get(str(quota_type), str(quota_type))


def _limit_text(row: Mapping[str, Any]) -> str:
    if row.get("quota_type") == "message_age":
        return duration(row.get("limit_time_seconds"))
    return size(row.get("limit_size_bytes"))


def _pct(row: Mapping[str, Any]) -> str:
    return f"{float(row['percent_of_quota']):,.1f}%"


def _bound_text(lower: object, upper: object) -> str:
    if lower is None and upper is None:
        return "—"
    return f"{num(lower)} … {num(upper)}"


def as_date(value: dt.date | str) -> dt.date:
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    return dt.date.fromisoformat(str(value))
