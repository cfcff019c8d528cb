"""The nightly report: one self-contained static HTML file per run date, and the terminal summary.

:func:`build_report` reads the run date's partitions of the nightly output tables (README "Tables"),
aggregates each with Spark (counts, sums and ``orderBy(...).limit(n)``: only bounded results reach the
driver), ranks the findings, and writes ONE HTML file that opens offline: no scripts, no external style
sheets, fonts or images, inline SVG charts, every data string escaped. It opens with what to do (verdict,
findings ranked by severity and impact with the next step, a roll-up per cluster); a stage that did not run
for the date is "not computed" and listed as not checked, never shown as zeros.

Modules: :mod:`~pulsar_model.report.queries` (what is read, computed-or-not, the findings queries),
:mod:`~pulsar_model.report.findings` (findings in an operator's words), :mod:`~pulsar_model.report.html`
(sections and document), :mod:`~pulsar_model.report.svg` (charts), :mod:`~pulsar_model.report.terminal`
(the end of a run in the terminal). Driver-side: it reads tables and writes a file; no transform lives here.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pulsar_model.report.findings import Finding, describe
from pulsar_model.report.html import (
    COUNT_LABELS,
    MAX_FINDINGS,
    MAX_TABLE_ROWS,
    SECTIONS,
    as_date,
    document,
    todo_html,
    verdict_text,
)
from pulsar_model.report.queries import TABLE_STAGES, Context, FindingsResult, collect_findings
from pulsar_model.report.terminal import format_terminal_summary
from pulsar_model.tables.delta_io import DeltaTables

log = logging.getLogger(__name__)

#: Checks of the report by stage: a stage that did not run for the date is "not checked".
CHECKED_STAGES = ("backlog", "quota", "replication", "compaction", "failover", "transactions",
                  "schemas", "history")  # fmt: skip

__all__ = [
    "COUNT_LABELS",
    "TABLE_STAGES",
    "Finding",
    "ReportSummary",
    "SectionStatus",
    "build_report",
    "default_report_path",
    "format_terminal_summary",
]


@dataclass(frozen=True)
class SectionStatus:
    """One report section: its anchor, title, the tables it read and those not computed (with why)."""

    anchor: str
    title: str
    tables_read: tuple[str, ...]
    tables_missing: Mapping[str, str]

    @property
    def computed(self) -> bool:
        """At least one of the section's tables is computed for the run date."""
        return bool(self.tables_read)


@dataclass(frozen=True)
class ReportSummary:
    """What :func:`build_report` wrote: the file, the sections, the run date's rows per table read, the
    headline counts (keys of :data:`COUNT_LABELS`; absent when not computed), the findings (counts and the
    ranked top ones in words) and the stages whose tables were not computed for the date."""

    run_date: dt.date
    out_path: str
    generated_at: dt.datetime
    sections: tuple[SectionStatus, ...]
    rows: Mapping[str, int]
    counts: Mapping[str, int]
    findings: FindingsResult
    top_findings: tuple[Finding, ...]
    not_checked: tuple[str, ...]

    @property
    def tables_missing(self) -> tuple[str, ...]:
        """Tables not computed for the run date (their parts say so)."""
        return tuple(t for s in self.sections for t in s.tables_missing)

    @property
    def verdict(self) -> str:
        """One sentence: findings per severity and what was not checked."""
        return verdict_text(self.findings, self.not_checked)

    def findings_at_or_above(self, severity: str) -> int:
        """Findings of ``severity`` or worse (``critical`` > ``warning`` > ``info``)."""
        order = ("critical", "warning", "info")
        return sum(self.findings.totals.get(s, 0) for s in order[: order.index(severity) + 1])


def default_report_path(report_dir: str, run_date: dt.date | str) -> str:
    """``<report_dir>/pulsar-report-<YYYY-MM-DD>.html`` (config ``report_dir``)."""
    return str(Path(report_dir) / f"pulsar-report-{as_date(run_date).isoformat()}.html")


def build_report(
    tables: DeltaTables,
    run_date: dt.date | str,
    out_path: str | os.PathLike[str],
    *,
    generated_at: dt.datetime | None = None,
    top_rows: int = MAX_TABLE_ROWS,
) -> ReportSummary:
    """Write the HTML report of ``run_date`` to ``out_path`` (parent folders created; the file is replaced
    atomically) and return its :class:`ReportSummary`.

    Reads the run date's partition of every table of :data:`TABLE_STAGES` that is computed for it; the
    aggregations and the first-``top_rows`` selections run in Spark. ``generated_at`` (default: now, UTC)
    is printed in the header (inject it for reproducible files).
    """
    day = as_date(run_date)
    stamp = generated_at or dt.datetime.now(dt.UTC)
    ctx = Context(tables, day, max(1, top_rows))
    spark_context = tables.spark.sparkContext
    parts: list[tuple[str, str, str]] = []
    statuses: list[SectionStatus] = []
    try:
        for anchor, title, builder in SECTIONS:
            spark_context.setJobDescription(f"report {day.isoformat()}: {title}")
            read_before, missing_before = len(ctx.read_tables), set(ctx.missing)
            body = builder(ctx)
            statuses.append(
                SectionStatus(
                    anchor,
                    title,
                    tuple(ctx.read_tables[read_before:]),
                    {t: r for t, r in ctx.missing.items() if t not in missing_before},
                )
            )
            parts.append((anchor, title, body))
        spark_context.setJobDescription(f"report {day.isoformat()}: findings")
        ctx.read("quarantine")
        findings = collect_findings(ctx, ctx.frames, MAX_FINDINGS)
    finally:
        spark_context.setJobDescription(None)  # type: ignore[arg-type]
    computed_stages = {TABLE_STAGES[t] for t in ctx.read_tables if t in TABLE_STAGES}
    not_checked = tuple(s for s in CHECKED_STAGES if s not in computed_stages)
    described = tuple(describe(r) for r in findings.top)
    summary = ReportSummary(
        run_date=day,
        out_path=str(out_path),
        generated_at=stamp,
        sections=tuple(statuses),
        rows=dict(ctx.rows),
        counts={k: ctx.counts[k] for k in COUNT_LABELS if k in ctx.counts},
        findings=findings,
        top_findings=described,
        not_checked=not_checked,
    )
    text = document(summary, todo_html(findings, described, not_checked), parts)
    _write_atomically(Path(out_path), text)
    log.info("report for %s written to %s", day, out_path)
    return summary


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
