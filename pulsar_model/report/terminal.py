"""The report in the terminal: the verdict, the top findings with their next step, the headline counts."""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

from pulsar_model.report.html import COUNT_LABELS

if TYPE_CHECKING:
    from pulsar_model.report import ReportSummary

#: Findings the terminal lists (the report has them all).
TOP_FINDINGS = 5
_WIDTH = 110


def verdict_lines(summary: ReportSummary, limit: int = TOP_FINDINGS) -> list[str]:
    """``verdict: ...`` then the first ``limit`` findings (severity, where, what, next step)."""
    lines = [f"verdict {summary.run_date.isoformat()}: {summary.verdict}"]
    shown = summary.top_findings[:limit]
    if shown:
        lines.append("top findings:")
    for number, finding in enumerate(shown, start=1):
        head = f"  {number}. {finding.severity.upper():<8} {finding.where()}"
        lines.append(head)
        lines += textwrap.wrap(finding.title, _WIDTH, initial_indent="       ", subsequent_indent="       ")
        lines += textwrap.wrap(
            "next: " + finding.next_step, _WIDTH, initial_indent="       ", subsequent_indent="             "
        )
    more = summary.findings.total - len(shown)
    if more > 0:
        lines.append(f"  ... and {more:,} more in the report")
    return lines


def counts_lines(summary: ReportSummary) -> list[str]:
    """Every headline count (``not computed`` when its table is not), and the tables not computed."""
    lines = ["headline counts:"]
    width = max(len(label) for label in COUNT_LABELS.values())
    for key, label in COUNT_LABELS.items():
        value = summary.counts.get(key)
        shown = "not computed" if value is None else f"{value:,}"
        lines.append(f"  {label:<{width}}  {shown:>12}")
    if summary.tables_missing:
        lines.append(f"  not computed for this run: {', '.join(summary.tables_missing)}")
    return lines


def format_terminal_summary(summary: ReportSummary, *, verbose: bool = False) -> str:
    """The verdict and the top findings, the headline counts with ``verbose``, then the report's path."""
    lines = verdict_lines(summary)
    if verbose:
        lines += counts_lines(summary)
    lines.append(f"report: {summary.out_path}")
    return "\n".join(lines)
