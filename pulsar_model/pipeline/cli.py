"""``pulsar-analytics`` command line: argument parsing, config, session, then the library.

Subcommands:
  export          export live clusters over the admin REST API into an export folder (no Spark)
  generate-demo   write a deterministic demo export of N simulated Pulsar clusters
  ingest          read an export folder into the input Delta tables
  nightly         ingest + every analytics stage for a run date (``--stages`` for a subset)
  backlog         the backlog stage alone: exact and estimated backlog per cursor, pinning per topic
  quota           the quota stage alone: effective quotas, breaches, what-if eviction, producer outcomes
  replication     the replication stage alone: remote cursor translation, failover duplicates, findings
  compaction      the compaction stage alone: preview, trigger, savings
  failover        the failover stage alone: active consumers, balance, what-ifs
  transactions    the transactions stage alone: transaction states, maxReadPosition hold-back
  schemas         the schemas stage alone: registration verdicts, compatibility matrix
  skip-plan       the plans stage alone: dry-run skip / clear-backlog / reset / reader-start requests
  history         the history stage alone: trends, subscription status, changes since the previous run
  report          write the static HTML report of a run date and print the verdict and top findings
  cleanup         remove staging folders left behind by killed writers

Exit status: 0 success, 1 failure, 2 usage error (bad option, config or argument), 3 findings at the
``--fail-on`` severity exist, 130 / 143 stopped by Ctrl-C / SIGTERM (Spark and its JVM are stopped first).
Everything a command prints goes to stdout, except ``--json``, where stdout is one JSON document and the
human lines go to stderr; errors, warnings and the live progress line always go to stderr.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import logging
import os
import signal
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from pulsar_model import __version__
from pulsar_model.errors import (
    ConfigError,
    NoDataError,
    PulsarAnalyticsError,
    failure_summary,
    is_resource_failure,
)
from pulsar_model.pipeline.config import DEFAULT_CONFIG_PATH, AppConfig, flatten_config, load_config

log = logging.getLogger("pulsar_model.cli")

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_FINDINGS = 0, 1, 2, 3
EXIT_SIGINT, EXIT_SIGTERM = 128 + signal.SIGINT, 128 + signal.SIGTERM
#: Severities ``--fail-on`` accepts.
FAIL_ON = ("warning", "critical")
LOG_LEVELS = ("debug", "info", "warning", "error")

EXAMPLES = """\
examples:
  pulsar-analytics generate-demo --out demo-export          # a demo export of 3 simulated clusters
  pulsar-analytics nightly --export-dir demo-export         # ingest + every stage + the HTML report
  pulsar-analytics nightly --export-dir exports/2026-11-21 --fail-on critical -q   # cron: exit 3 on critical
  pulsar-analytics nightly --stages backlog,quota,report --export-date 2026-11-21
  pulsar-analytics report --export-date 2026-11-21 --open   # rewrite the report, open it in a browser
  pulsar-analytics nightly --export-dir DIR --json > run.json   # machine-readable summary on stdout

exit status: 0 success, 1 failure, 2 usage error, 3 findings at the --fail-on severity,
130/143 stopped by Ctrl-C/SIGTERM (Spark stopped first). Every command: pulsar-analytics COMMAND --help
"""


class Terminated(BaseException):
    """SIGTERM arrived: unwinds the command like Ctrl-C does, so Spark is stopped on the way out."""


#: The stop signal that arrived, if any: an interrupted py4j call may surface as a Py4JError instead of
#: the exception the handler raised, and the command must still exit as stopped, not as failed.
_stopped_by: list[int] = []


def _on_signal(signum: int, frame: FrameType | None) -> None:
    _stopped_by.append(signum)
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated(signum)


def _date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date; write it as YYYY-MM-DD") from exc


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the epilogs' examples and defaults as written."""


def _defaults_epilog(examples: str = "") -> str:
    """The examples, then every configuration default (the embedded file), one ``key = value`` a line."""
    from pulsar_model.pipeline.session import auto_driver_memory

    try:
        config = load_config(None)
    except ConfigError as exc:  # a broken embedded default is reported by the command itself
        return f"{examples}\nconfiguration defaults: unreadable ({exc})"
    lines = [
        examples.rstrip(),
        "",
        f"configuration defaults (embedded {DEFAULT_CONFIG_PATH.name} of the package; --config FILE replaces "
        "it, --set KEY=VALUE overrides one key):",
    ]
    for key, value in flatten_config(config).items():
        shown = json.dumps(value) if isinstance(value, dict | list | tuple) else str(value)
        if key == "spark.driver_memory" and value == "auto":
            shown += f"   (half of this machine's memory: {auto_driver_memory()} here)"
        lines.append(f"  {key} = {shown}")
    return "\n".join(line for line in lines if line is not None).lstrip("\n")


def _common(parser: argparse.ArgumentParser, *, report: bool = False) -> None:
    parser.add_argument(
        "--config",
        default=None,
        metavar="FILE",
        help="YAML config file replacing the embedded default (default: the embedded "
        f"pulsar_model/resources/{DEFAULT_CONFIG_PATH.name}, listed below)",
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, e.g. --set spark.driver_memory=8g (repeatable; default: none)",
    )
    parser.add_argument(
        "--warehouse", default=None, help="warehouse folder/URI (default: storage.warehouse, below)"
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also list rows and Delta versions per table and every headline count; log at INFO",
    )
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="print nothing but errors (and the --json document)"
    )
    parser.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default=None,
        help="log level of the project and of Spark's JVM (default: warning for the project, error for "
        "Spark: its WARN lines are noise in a local run)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print a machine-readable summary (stages, rows, findings, quarantine, report path, exit "
        "code) on stdout; the human lines go to stderr",
    )
    if report:
        parser.add_argument(
            "--fail-on",
            choices=FAIL_ON,
            default=None,
            help="exit 3 when findings of this severity or worse exist (default: findings do not change "
            "the exit status)",
        )


#: Subcommands that run one analytics stage on already-ingested tables: name -> (help, description).
STAGE_COMMANDS: dict[str, tuple[str, str]] = {
    "backlog": (
        "exact and estimated backlog per cursor, pinning per topic, for a run date",
        "Run the backlog stage on already-ingested tables: cursor_backlog, topic_backlog, topic_pinning and "
        "unmoved_cursors for the run date (default: the newest ingested export date).",
    ),
    "quota": (
        "effective backlog quotas, breaches, what-if eviction and producer outcomes for a run date",
        "Run the quota stage on already-ingested tables (after the backlog stage): quota_status, "
        "quota_evictions, quota_eviction_trace and quota_producer_outcomes for the run date (default: the "
        "newest export date).",
    ),
    "replication": (
        "replicated subscriptions: remote cursor translation, failover duplicates, findings, for a run date",
        "Run the replication stage on already-ingested tables of all clusters: replication_positions "
        "(source mark-delete, the snapshot that applies, expected vs actual remote cursor), "
        "replication_failover_duplicates (messages a failover would redeliver), replication_findings "
        "(stall and risk detectors) and replication_snapshots (snapshot assembly) for the run date "
        "(default: the newest export date).",
    ),
    "compaction": (
        "compaction preview, automatic-trigger decision and savings per topic, for a run date",
        "Run the compaction stage on already-ingested tables: compaction_horizons, compaction_ledger (what "
        "the compactor would write, placeholders included) and compaction_summary (keys, tombstones, "
        "savings, dirty ratio, whether the threshold trigger fires) for the run date (default: the newest "
        "export date).",
    ),
    "failover": (
        "active consumer of every Failover subscription, balance and what-ifs for a run date",
        "Run the failover stage on already-ingested tables: failover_assignments (active consumer checked "
        "against the stats), failover_balance and failover_what_ifs (consumer added/removed, consistent "
        "hashing switched) for the run date (default: the newest export date).",
    ),
    "transactions": (
        "transaction states and what maxReadPosition holds back, for a run date",
        "Run the transactions stage on already-ingested tables: transactions (state, positions, messages, "
        "duration, long-open flag) and transaction_holdback (maxReadPosition per topic and what it holds "
        "back from dispatch) for the run date (default: the newest export date).",
    ),
    "schemas": (
        "schema registration verdicts and the compatibility matrix, for a run date",
        "Run the schemas stage on already-ingested tables: schema_verdicts (would each version be accepted "
        "in order, and why) and schema_compatibility (every version pair, both directions, with reasons) "
        "for the run date (default: the newest export date).",
    ),
    "history": (
        "trend tables, Burrow-style subscription status and changes since the previous run",
        "Run the history stage (after the other stages): subscription_history, topic_history, "
        "subscription_status (OK/WARN/STALL/STOP/REWIND/UNKNOWN over the last 10 run dates) and "
        "run_changes for the run date (default: the newest export date).",
    ),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pulsar-analytics",
        description="Offline analytics over exported Apache Pulsar managed-ledger data (Spark + Delta Lake).",
        epilog=EXAMPLES,
        formatter_class=_Formatter,
    )
    parser.add_argument("--version", action="version", version=f"pulsar-analytics {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _export_parser(sub)
    stage_list = ", ".join(_stage_names())

    def add(name: str, help_text: str, description: str, examples: str) -> argparse.ArgumentParser:
        return sub.add_parser(
            name,
            help=help_text,
            description=textwrap.fill(description, 100),
            epilog=_defaults_epilog(examples),
            formatter_class=_Formatter,
        )

    demo = add(
        "generate-demo",
        "write a deterministic demo export of simulated Pulsar clusters",
        "Simulate N Pulsar clusters (ledgers, cursors, batches, markers, transactions, replicated "
        "subscriptions) and write raw exports in the real admin-tool formats. No Spark.",
        "examples:\n  pulsar-analytics generate-demo --out demo-export\n"
        "  pulsar-analytics generate-demo --out big-demo --scale 10 --seed 7\n",
    )
    _common(demo)
    demo.add_argument("--out", default=None, help="export folder to write (default: demo.export_dir, below)")
    demo.add_argument("--seed", type=int, default=None, help="random seed (default: demo.seed, below)")
    demo.add_argument("--scale", type=float, default=1.0, help="multiply the number of topics (default: 1.0)")

    ingest = add(
        "ingest",
        "read an export folder into the input Delta tables",
        "Parse stats-internal, stats, quota, consumer, schema and entry-dump exports into Delta tables; bad "
        "records go to the quarantine table with a reason (summarised at the end). Rerunning a date "
        "replaces it. Exit status 1 when every record of the export was quarantined.",
        "examples:\n  pulsar-analytics ingest --export-dir exports/2026-11-21\n"
        "  pulsar-analytics ingest --export-dir exports/latest --export-date 2026-11-21\n",
    )
    _common(ingest)
    ingest.add_argument("--export-dir", required=True, help="export folder (<cluster>/<kind>/... layout)")
    ingest.add_argument(
        "--export-date",
        type=_date,
        default=None,
        help="UTC date of the export (default: manifest.json's exported_at, else a YYYY-MM-DD in the "
        "folder name)",
    )

    nightly = add(
        "nightly",
        "ingest + all analytics stages + the report for a run date",
        "Run the nightly pipeline: live progress while a stage runs, one run_log row per stage; a rerun of "
        "a date replaces that date's outputs. The last lines are the verdict, the top findings, the total "
        f"time and the report's path. Stages, in order: {stage_list}.",
        "examples:\n  pulsar-analytics nightly --export-dir exports/2026-11-21\n"
        "  pulsar-analytics nightly --export-dir exports/2026-11-21 --fail-on critical\n"
        "  pulsar-analytics nightly --stages quota,report --export-date 2026-11-21   # no ingest\n",
    )
    _common(nightly, report=True)
    nightly.add_argument(
        "--export-dir",
        default=None,
        help="export folder to ingest (needed by the ingest stage; default: none)",
    )
    nightly.add_argument(
        "--export-date",
        type=_date,
        default=None,
        help="run date (default: the export's date when ingesting, else the newest ingested date)",
    )
    nightly.add_argument(
        "--stages",
        default=None,
        metavar="LIST",
        help=f"comma-separated subset of the stages, run in the order given (default: all: {stage_list})",
    )
    nightly.add_argument(
        "--requests",
        action="append",
        default=[],
        metavar="FILE",
        help="plan request file (JSON / JSON Lines, see README 'Plan requests'); repeatable (default: none)",
    )

    for name, (help_text, description) in STAGE_COMMANDS.items():
        stage = add(
            name,
            help_text,
            description,
            f"examples:\n  pulsar-analytics {name}\n  pulsar-analytics {name} --export-date 2026-11-21\n",
        )
        _common(stage)
        stage.add_argument(
            "--export-date", type=_date, default=None, help="run date (default: the newest ingested date)"
        )

    plans = add(
        "skip-plan",
        "dry-run skip / clear-backlog / reset / reader-start requests for a run date",
        "Run the plans stage on already-ingested tables: answer the requests of --requests FILE, of "
        "plans.requests_file and of the plan_requests table into skip_plans and reader_starts.",
        "examples:\n  pulsar-analytics skip-plan --requests requests.json\n",
    )
    _common(plans)
    plans.add_argument(
        "--export-date", type=_date, default=None, help="run date (default: the newest ingested date)"
    )
    plans.add_argument(
        "--requests",
        action="append",
        default=[],
        metavar="FILE",
        help="plan request file; repeatable (default: none)",
    )
    plans.add_argument(
        "--export-dir",
        default=None,
        help="export folder whose _requests/plan_requests.json to include (default: none)",
    )

    report = add(
        "report",
        "write the static HTML report of a run date and print the verdict and top findings",
        "Read the run date's output tables and write one self-contained HTML file (inline SVG plots, no "
        "scripts, opens offline) that opens with what to do: findings ranked by severity and impact, each "
        "with its next step, and a roll-up per cluster. A stage that did not run for the date is shown as "
        "not computed (never as zeros). A date without ingested data fails and names the dates that have "
        "data.",
        "examples:\n  pulsar-analytics report\n  pulsar-analytics report --export-date 2026-11-21 --open\n"
        "  pulsar-analytics report --fail-on warning --json\n",
    )
    _common(report, report=True)
    report.add_argument(
        "--export-date", type=_date, default=None, help="run date (default: the newest ingested date)"
    )
    report.add_argument(
        "--out", default=None, help="HTML file to write (default: <report_dir>/pulsar-report-<date>.html)"
    )
    report.add_argument(
        "--open", action="store_true", help="open the written report in the default browser (default: no)"
    )

    cleanup = add(
        "cleanup",
        "remove staging folders left by killed writers",
        "Delete orphaned staging folders inside the warehouse tables (never committed data) and, with "
        "--break-lock, the run lock a killed run on another host left behind. No Spark.",
        "examples:\n  pulsar-analytics cleanup\n  pulsar-analytics cleanup --older-than 0 --break-lock\n",
    )
    _common(cleanup)
    cleanup.add_argument(
        "--older-than",
        type=float,
        default=3600.0,
        metavar="SECONDS",
        help="only folders untouched for more than SECONDS (default: 3600, one hour: a live writer's "
        "staging folder is younger)",
    )
    cleanup.add_argument(
        "--break-lock",
        action="store_true",
        help="also remove the warehouse's run lock left by a run that is known to be gone (default: no)",
    )
    return parser


def _stage_names() -> list[str]:
    from pulsar_model.pipeline.nightly import STAGES

    return list(STAGES)


def _export_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from pulsar_model.export.options import (
        DEFAULT_CONCURRENCY,
        DEFAULT_MAX_ENTRIES_PER_TOPIC,
        DEFAULT_MAX_RATE,
        ENTRIES_MODES,
        TOKEN_ENV_VARS,
    )

    ex = sub.add_parser(
        "export",
        help="export live Pulsar clusters over the admin REST API (stats, quotas, schemas, entries)",
        description="Walk each cluster's admin REST API v2 and write an export folder that 'ingest' reads: "
        "stats-internal, stats, backlog quotas (broker, namespace, topic), schemas and, per --entries, the "
        "stored entries including server-only markers (rest-entries/). Plain Python, no Spark. Exit status "
        "1 when anything failed (the summary and manifest.json say what).",
    )
    ex.add_argument(
        "--admin-url",
        action="append",
        required=True,
        metavar="URL",
        help="a broker's (or proxy's) admin URL, e.g. https://broker:8443; repeat for several clusters",
    )
    ex.add_argument(
        "--cluster",
        action="append",
        default=[],
        metavar="NAME",
        help="the cluster name of the --admin-url at the same position (default: read from the cluster)",
    )
    ex.add_argument("--out", required=True, help="export folder to write (new or empty; see --resume)")
    ex.add_argument(
        "--entries",
        choices=ENTRIES_MODES,
        default="backlog",
        help="none: metadata only; backlog (default): entries after the slowest durable cursor's "
        "mark-delete; all: every entry of every ledger",
    )
    ex.add_argument(
        "--max-entries-per-topic",
        type=int,
        default=DEFAULT_MAX_ENTRIES_PER_TOPIC,
        metavar="N",
        help=f"fetch at most N entries per topic partition (default {DEFAULT_MAX_ENTRIES_PER_TOPIC}; 0 = no "
        "cap); the rest is listed as missing and the analyses mark the topic incomplete",
    )
    ex.add_argument(
        "--concurrency",
        type=int,
        default=DEFAULT_CONCURRENCY,
        help=f"requests in flight per cluster (default {DEFAULT_CONCURRENCY})",
    )
    ex.add_argument(
        "--max-rate",
        type=float,
        default=DEFAULT_MAX_RATE,
        metavar="REQ_PER_S",
        help=f"requests started per second per cluster (default {DEFAULT_MAX_RATE:g})",
    )
    ex.add_argument("--tenant", action="append", default=[], metavar="GLOB", help="tenants to export (glob)")
    ex.add_argument(
        "--namespace",
        action="append",
        default=[],
        metavar="GLOB",
        help="namespaces tenant/ns to export (glob)",
    )
    ex.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="GLOB",
        help="topics to export (glob on the full name or tenant/ns/topic)",
    )
    ex.add_argument("--auth-token", default=None, help="token (visible in the process list: prefer a file)")
    ex.add_argument(
        "--auth-token-file", default=None, help=f"file holding the token (else ${TOKEN_ENV_VARS[0]})"
    )
    ex.add_argument("--tls-trust-certs", default=None, metavar="PEM", help="CA certificates to trust")
    ex.add_argument("--tls-cert", default=None, metavar="PEM", help="client certificate (mutual TLS)")
    ex.add_argument("--tls-key", default=None, metavar="PEM", help="client certificate's private key")
    ex.add_argument(
        "--tls-insecure",
        action="store_true",
        help="do not verify the brokers' certificates (test setups only)",
    )
    ex.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS", help="per request (default 30)")
    ex.add_argument("--retries", type=int, default=5, help="retries for 429, 5xx and timeouts (default 5)")
    ex.add_argument("--resume", action="store_true", help="continue an interrupted export in --out")
    ex.add_argument("--no-topic-policies", action="store_true", help="skip the topic-level backlog quotas")
    ex.add_argument("--no-schemas", action="store_true", help="skip the schemas")
    ex.add_argument(
        "--progress",
        choices=("auto", "always", "never"),
        default="auto",
        help="progress bar per cluster (auto: when stderr is a terminal)",
    )
    ex.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")


def _export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from pulsar_model.export import ClusterTarget, ExportOptions, TlsOptions, resolve_token, run_with

    urls = list(args.admin_url)
    names = list(args.cluster)
    if len(names) > len(urls):
        raise ConfigError(
            f"{len(names)} --cluster names for {len(urls)} --admin-url values; give one per URL"
        )
    names += [None] * (len(urls) - len(names))
    options = ExportOptions(
        targets=tuple(ClusterTarget(u, n) for u, n in zip(urls, names, strict=True)),
        out=Path(args.out),
        entries=args.entries,
        max_entries_per_topic=args.max_entries_per_topic or None,
        concurrency=args.concurrency,
        max_rate=args.max_rate,
        tenants=tuple(args.tenant),
        namespaces=tuple(args.namespace),
        topics=tuple(args.topic),
        token=resolve_token(args.auth_token, args.auth_token_file),
        tls=TlsOptions(
            trust_certs=Path(args.tls_trust_certs) if args.tls_trust_certs else None,
            cert=Path(args.tls_cert) if args.tls_cert else None,
            key=Path(args.tls_key) if args.tls_key else None,
            insecure=args.tls_insecure,
        ),
        timeout_seconds=args.timeout,
        retries=args.retries,
        resume=args.resume,
        topic_policies=not args.no_topic_policies,
        schemas=not args.no_schemas,
        progress={"auto": None, "always": True, "never": False}[args.progress],
    )
    return run_with(options)


def _config(args: argparse.Namespace) -> AppConfig:
    overrides = list(args.overrides)
    if getattr(args, "warehouse", None):
        overrides.append(f"storage.warehouse={args.warehouse}")
    return load_config(args.config, overrides)


class Console:
    """Where a command's lines go: stdout (stderr with ``--json``), nothing with ``-q``; warnings and errors
    to stderr. :attr:`result` collects the ``--json`` document."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.quiet = bool(getattr(args, "quiet", False))
        self.verbose = bool(getattr(args, "verbose", False))
        self.json = bool(getattr(args, "json", False))
        self.stream: TextIO = sys.stderr if self.json else sys.stdout
        self.result: dict[str, Any] = {"command": args.command, "version": __version__}

    def say(self, text: str = "") -> None:
        if not self.quiet:
            print(text, file=self.stream, flush=True)

    def warn(self, text: str) -> None:
        print(f"pulsar-analytics: warning: {text}", file=sys.stderr, flush=True)

    def error(self, text: str) -> None:
        print(f"pulsar-analytics: error: {text}", file=sys.stderr, flush=True)


class SparkHolder:
    """The command's SparkSession, built on first use; :meth:`stop` stops it and the JVM it started."""

    def __init__(self) -> None:
        self.spark: Any = None
        self.owned = False
        self.java: str | None = None

    def driver_memory(self) -> str | None:
        """The running driver's memory setting, for a failure message (None without a usable JVM)."""
        from pulsar_model.pipeline.session import driver_memory_setting

        return None if self.spark is None else driver_memory_setting(self.spark)

    def get(self, config: AppConfig, spark_log_level: str) -> Any:
        if self.spark is not None:
            return self.spark
        from pyspark import SparkContext

        from pulsar_model.pipeline.java import ensure_java
        from pulsar_model.pipeline.session import build_session

        if config.spark.master is not None and config.spark.master.startswith("local"):
            self.java = ensure_java().describe()
        self.owned = SparkContext._active_spark_context is None
        self.spark = build_session(
            config.spark.app_name,
            master=config.spark.master,
            conf=config.spark.conf,
            driver_memory=config.spark.driver_memory,
        )
        self.spark.sparkContext.setLogLevel(spark_log_level)
        if threading_is_main():
            # pyspark's own SIGINT handler calls cancelAllJobs over py4j from inside the interrupted py4j
            # call (a reentrant socket read that fails): Ctrl-C then looks like a Py4JError. Ours unwinds
            # the command and main() stops Spark on the way out.
            signal.signal(signal.SIGINT, _on_signal)
        return self.spark

    def stop(self) -> None:
        """Stop the session this command created and the JVM pyspark launched for it (not an existing one,
        e.g. spark-submit's, which owns its JVM)."""
        if self.spark is None or not self.owned:
            return
        from pyspark import SparkContext

        try:
            self.spark.sparkContext.cancelAllJobs()
            self.spark.stop()
        except Exception as exc:  # stopping anyway: the JVM below
            log.debug("stopping Spark: %s", exc)
        finally:
            gateway = SparkContext._gateway
            process = getattr(gateway, "proc", None)
            if gateway is not None:
                try:
                    gateway.shutdown()
                except Exception as exc:
                    log.debug("closing the py4j gateway: %s", exc)
            if process is not None:
                _end_process(process)
            SparkContext._gateway = None
            SparkContext._jvm = None
            self.spark = None


def _end_process(process: Any) -> None:
    """End the JVM pyspark started: EOF on its stdin is its signal to exit; terminate, then kill, if not."""
    try:
        if process.stdin is not None:
            process.stdin.close()
        process.wait(timeout=15)
    except Exception:
        process.terminate()
        try:
            process.wait(timeout=10)
        except Exception:
            process.kill()
            process.wait(timeout=10)


def _levels(args: argparse.Namespace) -> tuple[int, str]:
    """(Python logging level, Spark log level) from ``--log-level`` / ``-v`` / ``-q``."""
    chosen = getattr(args, "log_level", None)
    if chosen is not None:
        return getattr(logging, chosen.upper()), {"warning": "WARN"}.get(chosen, chosen.upper())
    if getattr(args, "quiet", False):
        return logging.ERROR, "ERROR"
    return (logging.INFO if getattr(args, "verbose", False) else logging.WARNING), "ERROR"


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return its exit status (see the module docstring)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help / --version (0) or a usage error (2), already printed by argparse
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    python_level, spark_level = _levels(args)
    logging.basicConfig(level=python_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(max(python_level, logging.WARNING))
    console = Console(args)
    holder = SparkHolder()
    previous = previous_int = None
    _stopped_by.clear()
    if threading_is_main():
        previous = signal.signal(signal.SIGTERM, _on_signal)
        previous_int = signal.signal(signal.SIGINT, _on_signal)
    started = time.monotonic()
    code = EXIT_OK
    try:
        code = _dispatch(args, console, holder, spark_level, started)
    except ConfigError as exc:
        code = _fail(console, EXIT_USAGE, str(exc))
    except PulsarAnalyticsError as exc:
        code = _fail(console, EXIT_FAILURE, str(exc))
    except KeyboardInterrupt:
        code = _stopped(console, signal.SIGINT)
    except Terminated:
        code = _stopped(console, signal.SIGTERM)
    except Exception as exc:
        log.debug("unexpected error", exc_info=True)
        if _stopped_by:  # the signal interrupted a py4j call, which failed instead of unwinding
            code = _stopped(console, _stopped_by[0])
        else:
            summary = failure_summary(exc, holder.driver_memory())
            code = _fail(
                console,
                EXIT_FAILURE,
                summary
                if is_resource_failure(exc)
                else f"{type(exc).__name__}: {summary} (this is a bug or an unexpected environment; "
                "--log-level debug shows the traceback)",
            )
    finally:
        if previous is not None:  # let the cleanup finish
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            holder.stop()
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
                signal.signal(signal.SIGINT, previous_int or signal.default_int_handler)
    if console.json and args.command != "export":
        console.result["exit_code"] = code
        console.result.setdefault("seconds", round(time.monotonic() - started, 1))
        print(json.dumps(console.result, indent=2, default=str), flush=True)
    return code


def threading_is_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _stopped(console: Console, signum: int) -> int:
    if signum == signal.SIGINT:
        return _fail(
            console, EXIT_SIGINT, "interrupted (Ctrl-C): Spark stopped, nothing half-written is kept"
        )
    return _fail(console, EXIT_SIGTERM, "terminated (SIGTERM): Spark stopped, nothing half-written is kept")


def _fail(console: Console, code: int, message: str) -> int:
    console.error(message)
    console.result["status"] = "failed"
    console.result["error"] = message
    return code


def _dispatch(
    args: argparse.Namespace, console: Console, holder: SparkHolder, spark_level: str, started: float
) -> int:
    if args.command == "export":
        return _export(args)
    config = _config(args)
    console.result["warehouse"] = config.storage.warehouse
    if args.command == "generate-demo":
        return _generate_demo(args, config, console)
    if args.command == "cleanup":
        return _cleanup(args, config, console)
    if args.command == "report":
        return _report_command(args, config, console, holder, spark_level, started)
    return _pipeline_command(args, config, console, holder, spark_level, started)


def _generate_demo(args: argparse.Namespace, config: AppConfig, console: Console) -> int:
    from pulsar_model.demo import DemoSpec, generate_demo

    out = args.out or config.demo.export_dir
    spec = DemoSpec(seed=args.seed if args.seed is not None else config.demo.seed)
    if tuple(config.demo.clusters) != spec.clusters:
        spec = dataclasses.replace(spec, clusters=tuple(config.demo.clusters), pulsar_versions={})
    if args.scale != 1.0:
        if args.scale <= 0:
            raise ConfigError(f"--scale {args.scale} must be positive, e.g. 0.5 or 10")
        spec = dataclasses.replace(
            spec,
            topics_per_namespace=max(1, round(spec.topics_per_namespace * args.scale)),
            replicated_topics=max(1, round(spec.replicated_topics * args.scale)),
        )
    t0 = time.monotonic()
    summary = generate_demo(out, spec, overwrite=True)
    console.say(
        f"demo export of {len(spec.clusters)} clusters written to {out} in {time.monotonic() - t0:.1f}s: "
        f"{summary.topics} topic partitions, {summary.entries} entries, {summary.marker_entries} markers"
    )
    console.result.update(
        status="succeeded",
        export_dir=str(Path(out).resolve()),
        topics=summary.topics,
        entries=summary.entries,
    )
    return EXIT_OK


def _cleanup(args: argparse.Namespace, config: AppConfig, console: Console) -> int:
    from pulsar_model.tables.delta_io import cleanup_staging
    from pulsar_model.tables.run_lock import break_lock, live_holder

    if args.break_lock:
        holder = break_lock(config.storage.warehouse)
        console.say(
            "no run lock" if holder is None else f"removed the run lock of {holder.get('run_id', '?')}"
        )
    running = live_holder(config.storage.warehouse)
    if running is not None:
        return _fail(
            console,
            EXIT_FAILURE,
            f"run {running.get('run_id', '?')} (pid {running.get('pid', '?')}) holds the run lock of this "
            "warehouse and is alive: cleanup would delete the files it is writing. Wait for it to finish, or "
            "stop it and run 'pulsar-analytics cleanup --break-lock'.",
        )
    # No JVM: staging folders, orphan files and the rollback of a half-committed write_all are plain file
    # and Delta-log operations.
    removed = cleanup_staging(
        config.storage.warehouse, config.storage.table_locations, older_than_seconds=args.older_than
    )
    console.say(f"removed {len(removed)} staging folder(s) older than {args.older_than:g}s")
    for path in removed:
        console.say(f"  {path}")
    console.result.update(status="succeeded", removed=list(removed))
    return EXIT_OK


def _start(
    config: AppConfig,
    console: Console,
    holder: SparkHolder,
    spark_level: str,
    input_bytes: tuple[int, str] | None,
) -> Any:
    """Start Spark and print the one-line header (version, warehouse, Java, driver memory)."""
    from pulsar_model.pipeline.session import auto_driver_memory, memory_warning

    memory = config.spark.driver_memory
    local = config.spark.master is not None and config.spark.master.startswith("local")
    effective = config.spark.conf.get("spark.driver.memory") or (
        auto_driver_memory() if memory == "auto" else memory
    )
    if local and input_bytes is not None:
        warning = memory_warning(effective, *input_bytes)
        if warning:
            console.warn(warning)
    spark = holder.get(config, spark_level)
    where = (
        os.path.abspath(config.storage.warehouse)
        if "://" not in config.storage.warehouse
        else (config.storage.warehouse)
    )
    parts = [f"pulsar-analytics {__version__}", f"warehouse {where}"]
    if local:
        parts += [f"{config.spark.master}", f"driver memory {effective}"]
    if holder.java:
        parts.append(holder.java)
    console.say(" · ".join(parts))
    console.result.update(java=holder.java, driver_memory=effective if local else None)
    return spark


def _folder_bytes(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total


def _input_bytes(config: AppConfig, export_dir: str | None) -> tuple[int, str] | None:
    """What the run reads, on disk: the export folder when ingesting, else the warehouse's input tables
    (local folders only; None when unknown)."""
    if export_dir is not None and os.path.isdir(export_dir):
        return _folder_bytes(export_dir), "the export folder"
    warehouse = config.storage.warehouse
    if "://" in warehouse and not warehouse.startswith("file:"):
        return None
    root = warehouse.removeprefix("file:")
    tables = ("managed_ledgers", "ledgers", "cursors", "entries", "messages", "markers")
    total = sum(_folder_bytes(os.path.join(root, t)) for t in tables if os.path.isdir(os.path.join(root, t)))
    return (total, "the warehouse's input tables") if total else None


def _tables(spark: Any, config: AppConfig) -> Any:
    from pulsar_model.tables.delta_io import DeltaTables

    return DeltaTables(
        spark,
        config.storage.warehouse,
        config.storage.table_locations,
        backend=config.storage.delta_backend,  # type: ignore[arg-type]
    )


def _pipeline_command(
    args: argparse.Namespace,
    config: AppConfig,
    console: Console,
    holder: SparkHolder,
    spark_level: str,
    started: float,
) -> int:
    from pulsar_model.pipeline.nightly import check_stages, format_summary, run_nightly
    from pulsar_model.pipeline.progress import Progress

    stages: list[str] | None
    if args.command == "ingest":
        stages = ["ingest"]
    elif args.command == "skip-plan":
        stages = ["plans"]
    elif args.command in STAGE_COMMANDS:
        stages = [args.command]
    else:
        stages = [s.strip() for s in str(args.stages).split(",")] if args.stages else None
    chosen = check_stages(stages)  # before Spark starts
    export_dir = getattr(args, "export_dir", None)
    if "ingest" in chosen and not export_dir:
        raise ConfigError(
            "The ingest stage needs --export-dir DIR (the export folder to read); to analyse already "
            f"ingested data, leave ingest out, e.g. --stages {','.join(s for s in chosen if s != 'ingest')}"
        )
    if export_dir and not os.path.isdir(export_dir):
        raise ConfigError(f"--export-dir {export_dir!r} is not a folder; pass the export folder to read")
    spark = _start(config, console, holder, spark_level, _input_bytes(config, export_dir))
    progress = Progress(spark, sys.stderr, terminal=sys.stderr.isatty(), enabled=not console.quiet)
    run_id = f"nightly-{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}-{os.urandom(4).hex()}"
    console.result.update(run_id=run_id, stages=[])
    try:
        outcomes = run_nightly(
            spark,
            config,
            export_dir=export_dir,
            export_date=args.export_date,
            stages=chosen,
            run_id=run_id,
            request_files=getattr(args, "requests", []),
            echo=console.say,
            progress=progress,
        )
    finally:
        progress.close()
    console.result["stages"] = [
        {
            "name": name,
            "status": "succeeded",
            "rows_out": outcome.rows_out,
            "table_versions": outcome.table_versions,
        }
        for name, outcome in zip(chosen, outcomes, strict=True)
    ]
    run_date = outcomes[-1].run_date
    console.result.update(status="succeeded", run_date=run_date.isoformat())
    console.result["rows"] = {t: n for o in outcomes for t, n in o.rows_out.items()}
    if console.verbose:
        console.say(format_summary(outcomes))
    code = EXIT_OK
    tables = _tables(spark, config)
    ingest = next((o for o, name in zip(outcomes, chosen, strict=True) if name == "ingest"), None)
    if ingest is not None:
        code = _quarantine_summary(tables, ingest, run_id, console)
    report = next((o.report for o in outcomes if o.report is not None), None)
    if report is None and getattr(args, "fail_on", None):
        from pulsar_model.report import build_report, default_report_path

        report = build_report(tables, run_date, default_report_path(config.report_dir, run_date))
    if report is not None:
        code = max(code, _report_lines(report, console, getattr(args, "fail_on", None)))
    _closing(console, started, report)
    return code


def _quarantine_summary(tables: Any, ingest: Any, run_id: str, console: Console) -> int:
    """The quarantine lines of an ingest (counts, first reasons, where to query); exit 1 when every record
    was quarantined (nothing to analyse)."""
    from pyspark.sql import functions as F

    total_in = sum(ingest.rows_in.values())
    bad = sum(ingest.rows_quarantined.values())
    location = tables.location("quarantine")
    day = ingest.run_date.isoformat()
    reasons: list[dict[str, Any]] = []
    if bad:
        rows = (
            tables.read("quarantine", partition_filter={"export_date": ingest.run_date})
            .where(F.col("run_id") == run_id)
            .groupBy("source", "reason_code")
            .agg(F.count(F.lit(1)).alias("records"), F.min("reason").alias("reason"))
            .orderBy(F.col("records").desc(), "source", "reason_code")
            .limit(5)
            .collect()
        )
        reasons = [r.asDict() for r in rows]
        by_source = ", ".join(f"{s} {n:,}" for s, n in sorted(ingest.rows_quarantined.items()) if n)
        console.say(
            f"quarantine: {bad:,} of {total_in:,} input records quarantined ({by_source}); first reasons:"
        )
        for r in reasons:
            console.say(f"  {r['source']} {r['reason_code']} ({r['records']:,}): {str(r['reason'])[:160]}")
        console.say(
            f"  all of them: table quarantine ({location}), export_date = '{day}', e.g. in DuckDB: "
            f"SELECT source, source_file, record_locator, reason FROM delta_scan('{location}') "
            f"WHERE export_date = '{day}'"
        )
    console.result["quarantine"] = {
        "records_in": total_in,
        "quarantined": bad,
        "by_source": {s: n for s, n in ingest.rows_quarantined.items() if n},
        "first_reasons": reasons,
        "table": location,
    }
    if total_in and not sum(ingest.rows_accepted.values()):
        console.error(
            f"every one of the {total_in:,} input records was quarantined: nothing to analyse. The reasons "
            "above say what is wrong with the export."
        )
        console.result["status"] = "failed"
        return EXIT_FAILURE
    return EXIT_OK


def _report_lines(report: Any, console: Console, fail_on: str | None) -> int:
    """The verdict and the top findings; 3 when findings at ``fail_on`` or worse exist."""
    from pulsar_model.report.terminal import counts_lines, verdict_lines

    if console.verbose:
        for line in counts_lines(report):
            console.say(line)
    for line in verdict_lines(report):
        console.say(line)
    findings = report.findings
    console.result["findings"] = {
        **{s: findings.totals.get(s, 0) for s in ("critical", "warning", "info")},
        "by_cluster": findings.by_cluster,
        "not_checked": list(report.not_checked),
        "top": [
            {
                "severity": f.severity,
                "kind": f.kind,
                "cluster": f.cluster,
                "topic": f.topic,
                "subscription": f.subscription,
                "title": f.title,
                "why": f.why,
                "next_step": f.next_step,
            }
            for f in report.top_findings[:20]
        ],
    }
    console.result["report_path"] = os.path.abspath(report.out_path)
    console.result["verdict"] = report.verdict
    if fail_on and report.findings_at_or_above(fail_on):
        console.result["status"] = "findings"
        return EXIT_FINDINGS
    return EXIT_OK


def _closing(console: Console, started: float, report: Any) -> None:
    seconds = time.monotonic() - started
    console.result["seconds"] = round(seconds, 1)
    minutes, rest = divmod(round(seconds), 60)
    console.say(f"total time {minutes}m{rest:02d}s" if minutes else f"total time {seconds:.1f}s")
    if report is not None:
        console.say(f"report: {os.path.abspath(report.out_path)}")


def _report_command(
    args: argparse.Namespace,
    config: AppConfig,
    console: Console,
    holder: SparkHolder,
    spark_level: str,
    started: float,
) -> int:
    from pulsar_model.pipeline.nightly import check_run_date, ingested_dates
    from pulsar_model.report import build_report, default_report_path

    spark = _start(config, console, holder, spark_level, None)
    tables = _tables(spark, config)
    run_date = args.export_date
    if run_date is None:
        dates = ingested_dates(tables)
        if not dates:
            raise NoDataError(
                f"The warehouse {os.path.abspath(config.storage.warehouse)} has no ingested data, so there "
                "is nothing to report: ingest an export first (pulsar-analytics nightly --export-dir DIR)"
            )
        run_date = dates[-1]
    else:
        check_run_date(tables, run_date, "the report")
    out = args.out or default_report_path(config.report_dir, run_date)
    report = build_report(tables, run_date, out)
    console.result.update(status="succeeded", run_date=run_date.isoformat())
    code = _report_lines(report, console, args.fail_on)
    _closing(console, started, report)
    if args.open:
        import webbrowser

        if not webbrowser.open(Path(report.out_path).resolve().as_uri()):
            console.warn(f"no browser could be started; open {os.path.abspath(report.out_path)} yourself")
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
