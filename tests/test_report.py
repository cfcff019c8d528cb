"""The nightly HTML report (issue 8 item 3, issue 9 item 5): built from a small hand-made warehouse.

The warehouse holds a few rows per output table (written through the contracts) with hostile strings in
every free-text place a report shows: a topic ``<script>alert(1)</script>``, a cursor
``"><img src=x onerror=alert(1)>``, control characters, ``&`` and quotes; plus ``topic_history`` of a
made-up shape and ``subscription_status``, while ``subscription_history`` and ``run_changes`` are left
out, so their parts must say "not computed for this run". A second warehouse (two clusters, 27 quota
rows, one run) checks the disclosure of long tables and the first-run trend note.

Rendering is checked in headless Chromium (Debian's ``chromium``; ``apt-get install chromium``), two ways:

1. the report file itself, ``--screenshot`` with ``--enable-logging=stderr``: Chromium writes every console
   message of the page (errors, CSP refusals such as "Executing inline script violates ...") to stderr as
   ``...:INFO:CONSOLE:<line>] "<message>"``; the report has no script at all, so any CONSOLE line is a
   failure. The PNG is decoded here (zlib + PNG row filters, numpy) and must show content: several colours,
   the header band and a share of non-background pixels.
2. a copy with the Content-Security-Policy removed (so that unescaped data WOULD execute) and a small
   hook script injected first in ``<head>``: it replaces ``alert``/``confirm``/``prompt`` (a real alert
   blocks headless Chromium), records ``window.onerror``, failed resource loads (capture-phase ``error``
   events: an injected ``<img src=x>`` fails), CSP violations and ``console.error`` into an attribute of
   ``<html>``; ``--dump-dom`` prints the DOM after load and the attribute must hold an empty list, the DOM
   must hold exactly one ``<script>`` (the hook) and no ``<img>``, and the hostile strings must be text.

3. the layout, at two window widths with every disclosure open: a script run after load lists a page wider
   than the window, a section with nothing visible, anything past the right edge (outside a table's own
   scroll box), a cell whose content overflows it and an SVG text cut off by its chart; the list must
   be empty.

Canary pages prove the detectors see an alert, an uncaught error, console.error, a failed image, and
each layout problem.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import re
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pyspark.sql import types as T

from pulsar_model.report import (
    CHECKED_STAGES,
    COUNT_LABELS,
    ReportSummary,
    build_report,
    default_report_path,
    format_terminal_summary,
)
from pulsar_model.tables import contracts
from pulsar_model.tables.delta_io import DeltaTables, TableWrite

DAY = dt.date(2026, 11, 21)
PREVIOUS = dt.date(2026, 11, 20)
GENERATED = dt.datetime(2026, 11, 21, 6, 30, tzinfo=dt.UTC)
SCRIPT_TOPIC = "<script>alert(1)</script>"
IMG_CURSOR = '"><img src=x onerror=alert(1)>'
AMP_CURSOR = "audit&co 'quoted' \u0007bell"
ERROR_TEXT = "ManagedLedgerException: <b>bold</b> & </td></tr></table><script>alert(3)</script>"
TOPIC = "persistent://acme/orders/payments-partition-0"
TOPIC_1 = "persistent://acme/orders/payments-partition-1"
SVG_BREAK = "</text></svg><svg onload=alert(4)>"
CHROMIUM_TIMEOUT = 90
MISSING_TABLES = ("subscription_history", "run_changes")


# -- the hand-made warehouse --------------------------------------------------------------------------------


def _default(field: T.StructField) -> Any:
    """A value for a non-nullable column the row does not name (contract types only)."""
    kind = field.dataType
    if field.nullable:
        return None
    if isinstance(kind, T.StringType):
        return "x"
    if isinstance(kind, T.LongType | T.IntegerType):
        return 0
    if isinstance(kind, T.DoubleType):
        return 0.0
    if isinstance(kind, T.BooleanType):
        return False
    if isinstance(kind, T.TimestampType):
        return GENERATED
    if isinstance(kind, T.DateType):
        return DAY
    if isinstance(kind, T.StructType):
        return dict.fromkeys(kind.fieldNames(), 0)
    if isinstance(kind, T.ArrayType):
        return []
    if isinstance(kind, T.MapType):
        return {}
    raise AssertionError(f"no default for {field}")


def _contract_frame(spark, table: str, rows: list[dict[str, Any]]):
    schema = contracts.spark_schema(table)
    common = {"export_id": "exp-1", "export_date": DAY}
    full = []
    for row in rows:
        merged = {**common, **row}
        full.append(tuple(merged[f.name] if f.name in merged else _default(f) for f in schema))
    return contracts.conform(spark.createDataFrame(full, schema=schema), table)


def _pos(ledger: int, entry: int) -> dict[str, int]:
    return {"ledger_id": ledger, "entry_id": entry}


def _warehouse_rows() -> dict[str, list[dict[str, Any]]]:
    east, west = "us-east", "us-west"
    # fmt: off
    return {
        "cursor_backlog": [
            dict(cluster=east, topic=SCRIPT_TOPIC, cursor_name=IMG_CURSOR, backlog_entries=10,
                 backlog_bytes=1000,
                 estimated_backlog_size_bytes=1500, estimate_minus_exact_bytes=500, counter_minus_precise=2,
                 oldest_unacked_age_seconds=3600, cursor_kind="subscription"),
            dict(cluster=east, topic=TOPIC, cursor_name="billing", backlog_entries=200, backlog_bytes=20000,
                 estimated_backlog_size_bytes=20000, estimate_minus_exact_bytes=0, counter_minus_precise=0),
            dict(cluster=west, topic=TOPIC_1, cursor_name=AMP_CURSOR, error=ERROR_TEXT,
                 mark_delete_position=_pos(7, 99)),
            dict(cluster=west, topic=TOPIC_1, cursor_name="second-error", error="IllegalArgumentException"),
        ],
        "topic_backlog": [
            dict(cluster=east, topic=SCRIPT_TOPIC, estimated_backlog_size_bytes=1500,
                 stats_backlog_size_bytes=1400,
                 estimate_minus_stats_bytes=100, slowest_cursor_name=IMG_CURSOR),
            dict(cluster=east, topic=TOPIC, estimated_backlog_size_bytes=5, stats_backlog_size_bytes=5,
                 estimate_minus_stats_bytes=0),
        ],
        "topic_pinning": [
            dict(cluster=east, topic=SCRIPT_TOPIC, slowest_cursor_name=IMG_CURSOR, pinned_bytes=5000,
                 pinned_ledgers=2, trimmable_now_bytes=100),
            dict(cluster=east, topic=TOPIC, slowest_cursor_name="billing", pinned_bytes=0),
        ],
        "unmoved_cursors": [
            dict(cluster=east, topic=SCRIPT_TOPIC, cursor_name=IMG_CURSOR, topic_advanced=True,
                 unmoved_exports=4),
            dict(cluster=east, topic=TOPIC, cursor_name="idle", topic_advanced=False, unmoved_exports=3),
        ],
        "quota_status": [
            dict(cluster=east, topic=SCRIPT_TOPIC, quota_type="destination_storage", percent_of_quota=150.0,
                 exceeded=True, exact_exceeded=True, is_handled=True, limit_size_bytes=1000, policy=SVG_BREAK,
                 reason=SVG_BREAK),
            dict(cluster=east, topic=SCRIPT_TOPIC, quota_type="message_age", percent_of_quota=85.0,
                 exceeded=False,
                 limit_time_seconds=3600),
            dict(cluster=east, topic=TOPIC, quota_type="destination_storage", percent_of_quota=130.0,
                 exceeded=True,
                 exact_exceeded=False, limit_size_bytes=10),
            dict(cluster=west, topic=TOPIC_1, quota_type="destination_storage", percent_of_quota=10.0,
                 exceeded=False),
        ],
        "quota_evictions": [
            dict(cluster=east, topic=SCRIPT_TOPIC, quota_type="destination_storage", cursor_name=IMG_CURSOR,
                 skipped_entries=5, handled_now=True, lost_messages=7, lost_bytes=700,
                 stop_reason=SCRIPT_TOPIC),
            dict(cluster=east, topic=TOPIC, quota_type="destination_storage", cursor_name="billing",
                 skipped_entries=3, handled_now=False, lost_messages=4, is_system_cursor=True),
            dict(cluster=east, topic=TOPIC, quota_type="destination_storage", cursor_name="untouched",
                 skipped_entries=0, lost_messages=100),
        ],
        "replication_positions": [
            dict(topic=SCRIPT_TOPIC, subscription=IMG_CURSOR, source_cluster=east, target_cluster=west,
                 status="stalled", remote_behind_entries=40, status_reason=ERROR_TEXT),
            dict(topic=TOPIC, subscription="billing", source_cluster=east, target_cluster=west,
                 status="lagging",
                 remote_behind_entries=3),
            dict(topic=TOPIC, subscription="billing", source_cluster=west, target_cluster=east,
                 status="lagging"),
            dict(topic=TOPIC_1, subscription="billing", source_cluster=east, target_cluster=west,
                 status="in_sync"),
        ],
        "replication_failover_duplicates": [
            dict(topic=SCRIPT_TOPIC, subscription=IMG_CURSOR, source_cluster=east, target_cluster=west,
                 method="exact", failover_duplicate_messages=12, failover_duplicate_bytes=1200,
                 failover_duplicate_entries=3),
            dict(topic=TOPIC, subscription="billing", source_cluster=east, target_cluster=west,
                 method="exact", failover_duplicate_messages=5),
            dict(topic=TOPIC_1, subscription="billing", source_cluster=west, target_cluster=east,
                 method="snapshot_bounds", consumed_on_source_entries_lower_bound=10,
                 consumed_on_source_entries_upper_bound=30),
        ],
        "replication_findings": [
            dict(kind="ack_holes_hold_mark_delete", severity="critical", cluster=east, topic=SCRIPT_TOPIC,
                 subscription=IMG_CURSOR, measure=9, detail=ERROR_TEXT),
            dict(kind="markers_inflate_idle_backlog", severity="info", cluster=west, topic=TOPIC,
                 detail="idle"),
        ],
        "compaction_summary": [
            dict(cluster=east, topic=SCRIPT_TOPIC, payload_bytes_before=1000, payload_bytes_after=100,
                 payload_bytes_saved=900, savings_ratio=0.9, would_trigger=True, distinct_keys=3),
            dict(cluster=east, topic=TOPIC, payload_bytes_before=50, payload_bytes_after=30,
                 payload_bytes_saved=20,
                 would_trigger=False),
        ],
        "failover_assignments": [
            dict(cluster=east, topic=SCRIPT_TOPIC, subscription=IMG_CURSOR, active_consumer_name=SCRIPT_TOPIC,
                 stats_active_consumer_name="other", matches_stats=False,
                 top_group_consumers=[SCRIPT_TOPIC, "b"]),
            dict(cluster=east, topic=TOPIC, subscription="billing", active_consumer_name="a",
                 matches_stats=True),
        ],
        "failover_balance": [
            dict(cluster=east, topic="persistent://acme/orders/payments", subscription=IMG_CURSOR,
                 partitions=4,
                 consumers=3, partitions_per_consumer={"c1": 3, "c2": 1, SCRIPT_TOPIC: 0}, max_partitions=3,
                 min_partitions=0, imbalance=3, idle_consumers=[SCRIPT_TOPIC]),
            dict(cluster=east, topic="persistent://acme/orders/refunds", subscription="ok", partitions=2,
                 consumers=2, partitions_per_consumer={"a": 1, "b": 1}, max_partitions=1, min_partitions=1),
        ],
        "transactions": [
            dict(cluster=east, topic=SCRIPT_TOPIC, txnid_most_bits=1, txnid_least_bits=1, txn_id="(1,1)",
                 state="committed"),
            dict(cluster=east, topic=SCRIPT_TOPIC, txnid_most_bits=1, txnid_least_bits=2, txn_id="(1,2)",
                 state="aborted"),
            dict(cluster=east, topic=SCRIPT_TOPIC, txnid_most_bits=1, txnid_least_bits=3, txn_id="(1,3)",
                 state="open", open_age_ms=7_200_000, is_long_open=True, first_position=_pos(3, 4)),
            dict(cluster=west, topic=TOPIC, txnid_most_bits=2, txnid_least_bits=1, txn_id="(2,1)",
                 state="open",
                 open_age_ms=60_000, is_long_open=False),
        ],
        "transaction_holdback": [
            dict(cluster=east, topic=SCRIPT_TOPIC, held_back_entries=4, held_back_messages=8,
                 oldest_open_txn_id="(1,3)", max_read_position=_pos(3, 3), open_txn_count=1),
        ],
        "schema_verdicts": [
            dict(cluster=east, topic=SCRIPT_TOPIC, version=0, verdict="accepted_first"),
            dict(cluster=east, topic=SCRIPT_TOPIC, version=1, verdict="incompatible", reasons=[ERROR_TEXT],
                 checked_versions=[0]),
        ],
    }
    # fmt: on


#: Rows the previous day's partition adds to some tables: a report of DAY must not count them.
_PREVIOUS_DAY_ROWS = {
    "quota_status": [dict(cluster="us-east", topic=TOPIC, quota_type="destination_storage", exceeded=True,
                          exact_exceeded=True, percent_of_quota=999.0, export_date=PREVIOUS)],
    "replication_positions": [dict(topic=TOPIC, subscription="old", source_cluster="a", target_cluster="b",
                                   status="stalled", export_date=PREVIOUS)],
}  # fmt: skip

EXPECTED_COUNTS = {
    "quota_breaches": 2,
    "quota_breaches_exact": 1,
    "quota_near_limit": 1,
    "eviction_cursors": 2,
    "eviction_cursors_handled_now": 1,
    "cursor_errors": 2,
    "stuck_cursors": 1,
    "subscriptions_stalled": 2,
    "subscriptions_warn": 1,
    "replication_stalled": 1,
    "replication_lagging": 2,
    "failover_duplicate_messages": 17,
    "replication_critical_findings": 1,
    "compaction_would_trigger": 1,
    "compaction_bytes_saved": 920,
    "failover_stats_mismatches": 1,
    "failover_imbalanced": 1,
    "transactions_open": 2,
    "transactions_long_open": 1,
    "schema_incompatible": 1,
}

EXPECTED_ROWS = {
    "cursor_backlog": 4,
    "topic_backlog": 2,
    "topic_pinning": 2,
    "unmoved_cursors": 2,
    "quota_status": 4,
    "quota_evictions": 3,
    "replication_positions": 4,
    "replication_failover_duplicates": 3,
    "replication_findings": 2,
    "compaction_summary": 2,
    "failover_assignments": 2,
    "failover_balance": 2,
    "transactions": 4,
    "transaction_holdback": 1,
    "schema_verdicts": 2,
    "topic_history": 2,
    "subscription_status": 4,
}


def _history_frames(spark):
    """``topic_history`` of a made-up shape (the trend plots take any numeric column): 3 runs, 2 topics;
    ``subscription_status`` per its contract."""
    topic_history = spark.createDataFrame(
        [
            (d, "us-east", topic, backlog, pct)
            for d, scale in ((dt.date(2026, 11, 19), 1), (PREVIOUS, 2), (DAY, 4))
            for topic, backlog, pct in ((SCRIPT_TOPIC, 100 * scale, 20.0 * scale), (TOPIC, 10 * scale, 5.0))
        ],
        "export_date date, cluster string, topic string, backlog_bytes bigint, percent_of_quota double",
    )
    status = _contract_frame(
        spark,
        "subscription_status",
        [
            dict(cluster="us-east", topic=SCRIPT_TOPIC, cursor_name=IMG_CURSOR, status="STALL",
                 backlog_entries=40, status_reason=ERROR_TEXT),
            dict(cluster="us-east", topic=TOPIC, cursor_name="billing", status="ok"),
            dict(cluster="us-east", topic=TOPIC, cursor_name="audit", status="WARN", backlog_entries=5),
            dict(cluster="us-west", topic=TOPIC, cursor_name="gone", status="STOP"),
            dict(cluster="us-west", topic=TOPIC, cursor_name="older", status="STALL", export_date=PREVIOUS),
        ],
    )  # fmt: skip
    return {"topic_history": topic_history, "subscription_status": status}


@pytest.fixture(scope="module")
def warehouse(spark, tmp_path_factory) -> DeltaTables:
    tables = DeltaTables(spark, str(tmp_path_factory.mktemp("report-warehouse")), backend="bridge")
    writes = []
    for table, rows in _warehouse_rows().items():
        frame = _contract_frame(spark, table, rows + _PREVIOUS_DAY_ROWS.get(table, []))
        writes.append(TableWrite(table, frame, "overwrite", None, ("export_date",), False))
    for table, frame in _history_frames(spark).items():
        writes.append(TableWrite(table, frame, "overwrite", None, ("export_date",), False))
    tables.write_all(writes)
    return tables


@pytest.fixture(scope="module")
def report(warehouse, tmp_path_factory) -> tuple[ReportSummary, Path]:
    out = tmp_path_factory.mktemp("reports") / "nested" / "report.html"
    summary = build_report(warehouse, DAY, out, generated_at=GENERATED)
    return summary, out


# -- HTML checks ------------------------------------------------------------------------------------------


class _Structure(HTMLParser):
    """Start tags, attributes and text of a document, as a browser's tokenizer sees them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attributes: list[tuple[str, str, str | None]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attributes += [(tag, name, value) for name, value in attrs]

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _structure(document: str) -> _Structure:
    parser = _Structure()
    parser.feed(document)
    parser.close()
    return parser


def test_build_report_summary_counts_only_the_run_date(report):
    summary, out = report
    assert summary.run_date == DAY
    assert summary.out_path == str(out)
    assert dict(summary.counts) == EXPECTED_COUNTS
    assert dict(summary.rows) == EXPECTED_ROWS
    assert summary.tables_missing == MISSING_TABLES
    assert [s.anchor for s in summary.sections] == [
        "backlog", "quota", "replication", "compaction", "failover", "transactions", "schemas", "history",
    ]  # fmt: skip
    assert all(s.computed for s in summary.sections)
    assert summary.not_checked == ()


def test_build_report_escapes_every_data_string(report):
    _, out = report
    document = out.read_text(encoding="utf-8")
    parsed = _structure(document)
    # Only the report's own markup: no element or attribute can come from the data.
    assert set(parsed.tags) <= {
        "html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "h3", "p", "nav", "a", "main",
        "section", "div", "table", "thead", "tbody", "tr", "th", "td", "code", "svg", "g", "text", "rect",
        "line", "circle", "polyline", "footer", "span", "b", "br", "wbr", "details", "summary",
    }  # fmt: skip
    assert not [a for a in parsed.attributes if a[1].startswith("on") or a[1] in ("src", "srcset", "style")]
    assert all(v is not None and v.startswith("#") for tag, name, v in parsed.attributes if name == "href")
    # The hostile strings are text (the tokenizer returns them unescaped as character data).
    text = "".join(parsed.text)
    for hostile in (SCRIPT_TOPIC, IMG_CURSOR, ERROR_TEXT, SVG_BREAK, "audit&co 'quoted' \ufffdbell"):
        assert hostile in text, hostile
    assert "\u0007" not in document
    assert html.escape(SCRIPT_TOPIC) in document
    assert "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;" in document
    assert "<script" not in document.lower()
    # Self-contained and locked down: no URL other than the SVG namespace, scripts refused by CSP.
    assert {v for _, name, v in parsed.attributes if name == "xmlns"} == {"http://www.w3.org/2000/svg"}
    assert "url(" not in document and "@import" not in document
    assert "Content-Security-Policy\" content=\"default-src 'none';" in document


def test_build_report_sections_show_plots_and_missing_tables(report):
    _, out = report
    document = out.read_text(encoding="utf-8")
    text = "".join(_structure(document).text)
    for table in MISSING_TABLES:
        assert f"{table}: not computed for this run" in text
    for caption in (
        "broker estimate vs exact backlog bytes per cursor",
        "bytes the slowest cursor alone keeps alive",
        "percent of the backlog quota used",
        "entries a backlog eviction would skip per cursor",
        "messages redelivered by a failover, per subscription",
        "payload bytes before and after compaction per topic",
        "partitions per active consumer",
        "entries held back by an open transaction per topic",
        "backlog bytes",
        "percent of quota",
    ):
        assert f"<title>{caption}</title>" in document, caption
    # The trend of topic_history covers the three runs up to the run date, summed per run.
    assert "<title>2026-11-21: 440 B</title>" in document
    assert "<title>2026-11-19: 110 B</title>" in document
    # The previous day's 999% row is not in the quota chart.
    assert "999.0%" not in text
    assert "150.0%" in text and "130.0%" in text


def test_build_report_date_without_rows_counts_only_what_has_rows(warehouse, tmp_path):
    """The previous day: most tables exist but hold no row for it and there is no run_log to say whether
    their stage ran, so they are "not computed" (never zeros that read as an all-clear); only the
    previous day's own rows count."""
    summary = build_report(warehouse, PREVIOUS, tmp_path / "previous.html", generated_at=GENERATED)
    assert dict(summary.counts) == {
        "quota_breaches": 1,
        "quota_breaches_exact": 1,
        "quota_near_limit": 0,
        "replication_stalled": 1,
        "replication_lagging": 0,
        "subscriptions_stalled": 1,
        "subscriptions_warn": 0,
    }
    assert dict(summary.rows) == {
        "quota_status": 1,
        "replication_positions": 1,
        "topic_history": 2,
        "subscription_status": 1,
    }
    assert set(summary.not_checked) == {"backlog", "compaction", "failover", "transactions", "schemas"}
    text = "".join(_structure((tmp_path / "previous.html").read_text(encoding="utf-8")).text)
    assert "999.0%" in text
    assert "cursor_backlog: not computed for this run (no rows for 2026-11-20 and no run_log" in text
    assert "NOT checked" in summary.verdict


def test_build_report_empty_warehouse_says_not_computed(spark, tmp_path):
    tables = DeltaTables(spark, str(tmp_path / "empty"), backend="bridge")
    out = default_report_path(str(tmp_path / "reports"), DAY)
    summary = build_report(tables, "2026-11-21", out, generated_at=GENERATED)
    assert out.endswith("reports/pulsar-report-2026-11-21.html")
    assert summary.counts == {}
    assert summary.rows == {}
    assert not any(s.computed for s in summary.sections)
    text = "".join(_structure(Path(out).read_text(encoding="utf-8")).text)
    assert text.count("not computed for this run") == 19  # each table in its part
    assert text.count("not computed: ") == 19  # and in the list of the run's tables
    # Nothing ran: every area is "not checked", never an all-clear.
    assert summary.not_checked == CHECKED_STAGES and "NOT checked" in summary.verdict
    assert 'class="verdict"' not in Path(out).read_text(encoding="utf-8")


def test_format_terminal_summary_verdict_top_findings_then_the_path(report):
    summary, out = report
    lines = format_terminal_summary(summary).splitlines()
    assert lines[0] == f"verdict 2026-11-21: {summary.verdict}"
    assert summary.verdict.startswith("5 critical findings, 9 warning findings")
    assert lines[1] == "top findings:"
    assert lines[2].startswith("  1. CRITICAL ")
    assert any(line.strip().startswith("next: ") for line in lines)
    assert lines[-2] == f"  ... and {summary.findings.total - 5:,} more in the report"
    assert lines[-1] == f"report: {out}"
    # -v adds every headline count, "not computed" where its table is not.
    verbose = format_terminal_summary(summary, verbose=True).splitlines()
    counts = verbose[verbose.index("headline counts:") + 1 : -1]
    shown = {line.rsplit("  ", 1)[0].strip(): line.rsplit(" ", 1)[1] for line in counts[:-1]}
    assert shown == {label.strip(): f"{EXPECTED_COUNTS[key]:,}" for key, label in COUNT_LABELS.items()}
    assert counts[-1] == "  not computed for this run: subscription_history, run_changes"


# -- headless Chromium ---------------------------------------------------------------------------------------

_HOOK = (
    "<script>(function(){var d=document.documentElement,e=[];"
    'function r(k,m){e.push(k+": "+m);d.setAttribute("data-harness-errors",JSON.stringify(e));}'
    'd.setAttribute("data-harness-errors","[]");'
    'window.alert=window.confirm=window.prompt=function(m){r("alert",String(m));};'
    'window.addEventListener("error",function(v){var t=v.target;'
    'r(t&&t!==window?"resource":"error",v.message||(t&&(t.src||t.href||t.tagName))||"?");},true);'
    'window.addEventListener("unhandledrejection",function(v){r("rejection",String(v.reason));});'
    'document.addEventListener("securitypolicyviolation",function(v){r("csp",v.violatedDirective);});'
    "var c=console.error;console.error=function(){"
    'r("console.error",Array.prototype.join.call(arguments," "));c.apply(console,arguments);};})();</script>'
)
_CONSOLE = re.compile(r":CONSOLE(?::\d+)?\]\s*(.*)")


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail(
            "headless Chromium is needed to render the report: install Debian's package with "
            "'apt-get install -y chromium' (CI: .ci/run installs it)"
        )
    return found


def _run_chromium(url: str, profile: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [
        _chromium(),
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=5000",
        *extra,
        url,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=CHROMIUM_TIMEOUT, check=False)


def _console_messages(stderr: str) -> list[str]:
    return [m.group(1) for m in map(_CONSOLE.search, stderr.splitlines()) if m]


def _harness_dom(page: Path, profile: Path) -> tuple[str, list[str], list[str]]:
    """Load ``page`` with the hook injected and the CSP removed: (dumped DOM, hook records, console lines)."""
    source = page.read_text(encoding="utf-8")
    source = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", source)
    hooked = page.with_name(page.stem + "-hooked.html")
    hooked.write_text(source.replace('<meta charset="utf-8">', '<meta charset="utf-8">' + _HOOK, 1), "utf-8")
    result = _run_chromium(hooked.as_uri(), profile, "--dump-dom")
    assert result.returncode == 0, result.stderr[-3000:]
    match = re.search(r'<html[^>]*\bdata-harness-errors="([^"]*)"', result.stdout)
    assert match is not None, f"the hook did not run; DOM starts {result.stdout[:500]!r}"
    return result.stdout, json.loads(html.unescape(match.group(1))), _console_messages(result.stderr)


def _decode_png(data: bytes) -> np.ndarray:
    """RGB(A) pixels of a non-interlaced 8-bit PNG (what Chromium writes), row filters undone."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, [], None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
    assert header is not None
    width, height, depth, color, _, _, interlace = header
    assert depth == 8 and interlace == 0 and color in (2, 6), header
    bpp = 3 if color == 2 else 4
    stride = width * bpp
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), dtype=np.uint8).reshape(height, stride + 1)
    out = np.zeros((height, stride), dtype=np.uint8)
    prev = np.zeros(stride, dtype=np.uint8)
    for y in range(height):
        kind, line = int(raw[y, 0]), raw[y, 1:].copy()
        if kind == 1:  # Sub: running sum per channel, modulo 256
            line = np.cumsum(line.reshape(width, bpp), axis=0, dtype=np.uint8).reshape(stride)
        elif kind == 2:  # Up
            line = line + prev
        elif kind in (3, 4):  # Average / Paeth: depend on the left neighbour, byte by byte
            row, up = line.astype(np.int32).tolist(), prev.astype(np.int32).tolist()
            for i in range(stride):
                a = row[i - bpp] if i >= bpp else 0
                b, c = up[i], (up[i - bpp] if i >= bpp else 0)
                if kind == 3:
                    row[i] = (row[i] + (a + b) // 2) & 255
                else:
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    row[i] = (row[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
            line = np.array(row, dtype=np.uint8)
        out[y] = line
        prev = line
    return out.reshape(height, width, bpp)[:, :, :3]


def test_decode_png_round_trips_filters():
    """The decoder against a PNG written here with every filter type (so the screenshot check can fail)."""
    rng = np.random.default_rng(7)
    pixels = rng.integers(0, 256, size=(10, 6, 3), dtype=np.uint8)
    rows, prev = [], np.zeros(18, dtype=np.int32)
    for y in range(10):
        kind, line = y % 5, pixels[y].reshape(18).astype(np.int32)
        left = np.concatenate([np.zeros(3, dtype=np.int32), line[:-3]])
        upleft = np.concatenate([np.zeros(3, dtype=np.int32), prev[:-3]])
        if kind == 4:
            pred = []
            for a, b, c in zip(left, prev, upleft, strict=True):
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred.append(a if pa <= pb and pa <= pc else b if pb <= pc else c)
            predictor = np.array(pred)
        else:
            predictor = [np.zeros(18, dtype=np.int32), left, prev, (left + prev) // 2][kind]
        rows.append(bytes([kind]) + ((line - predictor) % 256).astype(np.uint8).tobytes())
        prev = line

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    png = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", 6, 10, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(b"".join(rows)))
        + chunk(b"IEND", b"")
    )
    assert np.array_equal(_decode_png(png), pixels)


def test_chromium_harness_detects_errors_and_alerts(tmp_path):
    """Canary: both detectors see what a broken report would do (else the render test could not fail)."""
    page = tmp_path / "canary.html"
    page.write_text(
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>canary</title></head><body>'
        '<script>console.error("canary-console");alert("canary-alert");</script>'
        '<script>undefinedCanaryCall();</script><img src="missing.png" onerror="alert(2)"></body></html>',
        "utf-8",
    )
    _, records, console = _harness_dom(page, tmp_path / "profile")
    assert records[:3] == [
        "console.error: canary-console",
        "alert: canary-alert",
        "error: Uncaught ReferenceError: undefinedCanaryCall is not defined",
    ]
    assert records[3].startswith("resource: file://") and records[3].endswith("/missing.png")
    assert records[4:] == ["alert: 2"]
    assert any("canary-console" in line for line in console), console


def test_report_renders_in_headless_chromium(report, tmp_path):
    _, out = report
    # 1. The report as shipped: a non-blank screenshot and not one console message.
    png = tmp_path / "report.png"
    shot = _run_chromium(
        out.as_uri(), tmp_path / "profile-1", f"--screenshot={png}", "--window-size=1280,2000"
    )
    assert shot.returncode == 0, shot.stderr[-3000:]
    assert _console_messages(shot.stderr) == []
    pixels = _decode_png(png.read_bytes())
    assert pixels.shape == (2000, 1280, 3)
    colours, counts = np.unique(pixels.reshape(-1, 3), axis=0, return_counts=True)
    background_share = counts.max() / counts.sum()
    assert len(colours) > 50, f"only {len(colours)} colours: blank page?"
    assert background_share < 0.97, f"{background_share:.1%} of the page is one colour"
    assert np.all(pixels[5, 5] == (0x15, 0x20, 0x2B)), f"header band missing: {pixels[5, 5]}"
    # 2. Without the CSP and with the hook: nothing from the data executes, loads or alerts.
    dom, records, console = _harness_dom(out, tmp_path / "profile-2")
    assert records == []
    assert console == []
    assert dom.lower().count("<script") == 1  # the hook
    assert "<img" not in dom.lower()
    assert html.escape(SCRIPT_TOPIC, quote=False) in dom
    assert "&lt;img src=x onerror=alert(1)&gt;" in dom


# -- layout in headless Chromium -----------------------------------------------------------------------------

#: Runs after load and records layout problems in an attribute of ``<html>``: the page wider than the window;
#: a section with nothing visible under its title; an element (outside a table's own scroll box) reaching past
#: the window's right edge; a table cell whose content is wider than the cell (text over its neighbour); an
#: SVG text outside its chart (cut off: a bar label losing its cluster).
_LAYOUT = (
    "<script>window.addEventListener('load',function(){"
    "var d=document.documentElement,p=[],W=window.innerWidth;"
    "function name(e){var c=e.getAttribute('class');return e.tagName.toLowerCase()+(c?'.'+c:'')+' '"
    "+JSON.stringify((e.textContent||'').slice(0,50));}"
    "if(d.scrollWidth>W+1)p.push('page '+d.scrollWidth+'px wide in '+W+'px');"
    "document.querySelectorAll('section').forEach(function(s){var shown=[].slice.call(s.children).filter("
    "function(c){return c.tagName!=='H2'&&c.getBoundingClientRect().height>0&&c.textContent.trim();});"
    "if(!shown.length)p.push('empty section #'+s.id);});"
    "document.querySelectorAll('body *').forEach(function(e){var r=e.getBoundingClientRect();"
    "if(!r.width||e.closest('.tablewrap'))return;if(r.right>W+1)p.push('past the edge: '+name(e));});"
    "document.querySelectorAll('td,th').forEach(function(e){if(e.getBoundingClientRect().width&&"
    "e.scrollWidth>e.clientWidth+1)p.push('cell overflow: '+name(e));});"
    "document.querySelectorAll('svg').forEach(function(s){var v=s.getBoundingClientRect();"
    "s.querySelectorAll('text').forEach(function(t){var b=t.getBoundingClientRect();if(b.width&&("
    "b.left<v.left-0.5||b.right>v.right+0.5||b.top<v.top-0.5||b.bottom>v.bottom+0.5))"
    "p.push('svg text cut: '+name(t));});});"
    "d.setAttribute('data-layout',JSON.stringify(p));});</script>"
)


def _layout_problems(page: Path, profile: Path, width: int) -> list[str]:
    source = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page.read_text(encoding="utf-8"))
    # Every disclosure open: the rows behind them must lay out as well as the preview.
    source = source.replace("<details>", "<details open>")
    hooked = page.with_name(f"{page.stem}-layout-{width}.html")
    hooked.write_text(
        source.replace('<meta charset="utf-8">', '<meta charset="utf-8">' + _LAYOUT, 1), "utf-8"
    )
    result = _run_chromium(hooked.as_uri(), profile, "--dump-dom", f"--window-size={width},1000")
    assert result.returncode == 0, result.stderr[-3000:]
    match = re.search(r'<html[^>]*\bdata-layout="([^"]*)"', result.stdout)
    assert match is not None, f"the layout script did not run; DOM starts {result.stdout[:500]!r}"
    return list(json.loads(html.unescape(match.group(1))))


def test_layout_canary_sees_overflow_cut_labels_and_empty_sections(tmp_path):
    """The layout script reports what a broken report would do (else the layout test could not fail)."""
    page = tmp_path / "canary.html"
    page.write_text(
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>c</title></head><body><main>'
        '<section id="empty"><h2>Empty</h2><p></p></section>'
        '<section id="wide"><h2>Wide</h2><div style="width:3000px">wide</div>'
        '<table><tr><td style="max-width:40px;overflow:hidden">unbreakable-long-token-here</td></tr></table>'
        '<svg viewBox="0 0 100 20" width="100" height="20"><text x="90" y="14">cut off label</text></svg>'
        "</section></main></body></html>",
        "utf-8",
    )
    problems = _layout_problems(page, tmp_path / "profile", 800)
    kinds = {p.split(":")[0].split(" #")[0].split(" ")[0] for p in problems}
    assert {"page", "empty", "past", "cell", "svg"} <= kinds, problems


@pytest.mark.parametrize("width", [1280, 900])
def test_report_layout_has_no_overflow_cut_label_or_empty_section(report, tmp_path, width):
    _, out = report
    assert _layout_problems(out, tmp_path / "profile", width) == []


def test_report_opens_with_ranked_findings_next_steps_and_a_cluster_roll_up(report):
    summary, out = report
    document = out.read_text(encoding="utf-8")
    sections = re.findall(r'<section id="([a-z]+)">', document)
    assert sections[0] == "todo" and sections[-1] == "tables", sections
    todo = document[document.index('<section id="todo">') : document.index('<section id="backlog">')]
    ranks = {"critical": 0, "warning": 1, "info": 2}
    shown = [ranks[s] for s in re.findall(r'<span class="sev (critical|warning|info)">', todo)]
    assert shown and shown == sorted(shown), "findings ranked by severity, not by name"
    assert summary.top_findings[0].severity == "critical"
    for finding in summary.top_findings:
        assert finding.cluster and finding.why and finding.next_step, finding
        assert "pulsar-admin " in finding.next_step or "table " in finding.next_step, finding.next_step
    assert "<h3>Per cluster</h3>" in todo
    roll_up = todo[todo.index("<h3>Per cluster</h3>") :]
    for cluster, counts in summary.findings.by_cluster.items():
        assert f'<td><span class="nw">{cluster}</span></td>' in roll_up
        assert f'<td class="n">{sum(counts.values()):,}</td>' in roll_up
    assert set(summary.findings.by_cluster) == {"us-east", "us-west"}


def test_report_cells_break_only_after_slashes_and_positions_stay_whole(report):
    _, out = report
    document = out.read_text(encoding="utf-8")
    css = document[document.index("<style>") : document.index("</style>")]
    assert "break-all" not in css and "anywhere" not in css and "hyphens:auto" not in css
    # A topic may break after each "/" (never inside a word, never at a hyphen); a position never breaks.
    assert (
        'persistent:/<wbr>/<wbr>acme/<wbr>orders/<wbr><span class="nw">payments-partition-0</span>'
        in document
    )
    assert '<td><span class="nw">us-east</span></td>' in document
    assert re.search(r'<td class="nowrap">\d+:\d+</td>', document)
    # Every bar label starts with its cluster (the topic is what gets shortened, never the cluster).
    labels = re.findall(r'<text x="400" y="\d+" text-anchor="end">([^<]*)</text>', document)
    assert len(labels) >= 10 and all(label.startswith(("us-east · ", "us-west · ")) for label in labels), (
        labels
    )
    # Every chart axis is titled with its unit.
    for chart in re.findall(r"<svg .*?</svg>", document):
        if '<rect class="bar' in chart or "<polyline" in chart:
            assert re.search(r'<text class="axistitle"[^>]*>[^<]+</text>', chart), chart[:300]


def _long_warehouse(spark, root: Path) -> DeltaTables:
    """One run of two clusters: 27 quota rows (more than a table's preview), one history run."""
    tables = DeltaTables(spark, str(root), backend="bridge")
    rows = [
        dict(cluster=cluster, topic=f"persistent://acme/orders/t-{i:02d}", quota_type="destination_storage",
             percent_of_quota=50.0 + i * 5, exceeded=50.0 + i * 5 > 100, exact_exceeded=50.0 + i * 5 > 100,
             limit_size_bytes=1000, check_enabled=True)
        for cluster, count in (("us-east", 15), ("eu-central", 12))
        for i in range(count)
    ]  # fmt: skip
    history = spark.createDataFrame(
        [(DAY, "us-east", TOPIC, 10)], "export_date date, cluster string, topic string, backlog_bytes bigint"
    )
    tables.write_all(
        [
            TableWrite("quota_status", _contract_frame(spark, "quota_status", rows), "overwrite", None,
                       ("export_date",), False),
            TableWrite("topic_history", history, "overwrite", None, ("export_date",), False),
        ]
    )  # fmt: skip
    return tables


def test_report_long_tables_show_every_row_behind_a_disclosure_and_first_run_trends(spark, tmp_path):
    tables = _long_warehouse(spark, tmp_path / "warehouse")
    out = tmp_path / "long.html"
    summary = build_report(tables, DAY, out, generated_at=GENERATED)
    document = out.read_text(encoding="utf-8")
    quota = document[document.index('<section id="quota">') : document.index('<section id="replication">')]
    assert "Show the other" in quota and "(27 in all)</summary>" in quota
    assert quota.count('persistent:/<wbr>/<wbr>acme/<wbr>orders/<wbr><span class="nw">t-') >= 27, "all rows"
    for cluster in ("us-east", "eu-central"):
        assert quota.count(f'<td><span class="nw">{cluster}</span></td>') >= 12, cluster
    # A first run: no one-dot trend chart, a sentence saying trends need another run.
    history = document[document.index('<section id="history">') : document.index('<section id="tables">')]
    assert "Trends need at least two runs" in history and "<polyline" not in history
    # Stages that did not run are "not checked", never an all-clear.
    assert "backlog" in summary.not_checked and "NOT checked" in summary.verdict
    assert 'class="verdict"' not in document
