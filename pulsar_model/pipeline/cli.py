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
  report          write the static HTML report of a run date and print a short summary
  cleanup         remove staging folders left behind by killed writers
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import logging
import sys
import time
from collections.abc import Sequence

from pulsar_model.errors import ConfigError, PulsarAnalyticsError
from pulsar_model.pipeline.config import AppConfig, load_config


def _date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date; write it as YYYY-MM-DD") from exc


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", default=None, help="YAML config file (default: conf/local.yaml if present)"
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, e.g. --set spark.master=local[1] (repeatable)",
    )
    parser.add_argument(
        "--warehouse", default=None, help="warehouse folder/URI (overrides storage.warehouse)"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")


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
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _export_parser(sub)

    demo = sub.add_parser(
        "generate-demo",
        help="write a deterministic demo export of simulated Pulsar clusters",
        description="Simulate N Pulsar clusters (ledgers, cursors, batches, markers, transactions, "
        "replicated subscriptions) and write raw exports in the real admin-tool formats.",
    )
    _common(demo)
    demo.add_argument("--out", default=None, help="export folder to write (default: demo.export_dir)")
    demo.add_argument("--seed", type=int, default=None, help="random seed (default: demo.seed)")
    demo.add_argument("--scale", type=float, default=1.0, help="multiply the number of topics/messages")

    ingest = sub.add_parser(
        "ingest",
        help="read an export folder into the input Delta tables",
        description="Parse stats-internal, stats, quota, consumer, schema and entry-dump exports into Delta "
        "tables; bad records go to the quarantine table with a reason. Rerunning a date replaces it.",
    )
    _common(ingest)
    ingest.add_argument("--export-dir", required=True, help="export folder (<cluster>/<kind>/... layout)")
    ingest.add_argument("--export-date", type=_date, default=None, help="UTC date of the export (YYYY-MM-DD)")

    nightly = sub.add_parser(
        "nightly",
        help="ingest + all analytics stages for a run date",
        description="Run the nightly pipeline: stage n of m progress, one run_log row per stage, "
        "a rerun of a date replaces that date's outputs.",
    )
    _common(nightly)
    nightly.add_argument(
        "--export-dir", default=None, help="export folder to ingest (needed by the ingest stage)"
    )
    nightly.add_argument(
        "--export-date", type=_date, default=None, help="run date (default: from the export)"
    )
    nightly.add_argument("--stages", default=None, help="comma-separated subset of stages to run")
    nightly.add_argument(
        "--requests",
        action="append",
        default=[],
        metavar="FILE",
        help="plan request file (JSON / JSON Lines, see README 'Plan requests'); repeatable",
    )

    for name, (help_text, description) in STAGE_COMMANDS.items():
        stage = sub.add_parser(name, help=help_text, description=description)
        _common(stage)
        stage.add_argument(
            "--export-date", type=_date, default=None, help="run date (default: newest export)"
        )

    plans = sub.add_parser(
        "skip-plan",
        help="dry-run skip / clear-backlog / reset / reader-start requests for a run date",
        description="Run the plans stage on already-ingested tables: answer the requests of --requests FILE, "
        "of plans.requests_file and of the plan_requests table into skip_plans and reader_starts.",
    )
    _common(plans)
    plans.add_argument("--export-date", type=_date, default=None, help="run date (default: newest export)")
    plans.add_argument(
        "--requests", action="append", default=[], metavar="FILE", help="plan request file; repeatable"
    )
    plans.add_argument(
        "--export-dir", default=None, help="export folder whose _requests/plan_requests.json to include"
    )

    report = sub.add_parser(
        "report",
        help="write the static HTML report of a run date and print a short summary",
        description="Read the run date's output tables (a table no stage wrote is shown as 'not computed for "
        "this run') and write one self-contained HTML file: inline SVG plots, no scripts, opens offline. "
        "Prints the headline counts (breaches, stalled subscriptions, duplicates, ...).",
    )
    _common(report)
    report.add_argument("--export-date", type=_date, default=None, help="run date (default: newest export)")
    report.add_argument(
        "--out", default=None, help="HTML file to write (default: <report_dir>/pulsar-report-<date>.html)"
    )

    cleanup = sub.add_parser(
        "cleanup",
        help="remove staging folders left by killed writers",
        description="Delete orphaned staging folders inside the warehouse tables (never committed data) and, "
        "with --break-lock, the run lock a killed run on another host left behind.",
    )
    _common(cleanup)
    cleanup.add_argument("--older-than", type=float, default=3600.0, help="only folders older than N seconds")
    cleanup.add_argument(
        "--break-lock",
        action="store_true",
        help="also remove the warehouse's run lock left by a run that is known to be gone",
    )
    return parser


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
    import os

    path = args.config
    if path is None and os.path.isfile("conf/local.yaml"):
        path = "conf/local.yaml"
    overrides = list(args.overrides)
    if getattr(args, "warehouse", None):
        overrides.append(f"storage.warehouse={args.warehouse}")
    return load_config(path, overrides)


def _session(config: AppConfig):  # type: ignore[no-untyped-def]
    from pulsar_model.pipeline.session import build_session

    spark = build_session(config.spark.app_name, master=config.spark.master, conf=config.spark.conf)
    spark.sparkContext.setLogLevel("WARN")
    return spark


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        if args.command == "export":
            return _export(args)
        config = _config(args)
        if args.command == "generate-demo":
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
            print(
                f"demo export of {len(spec.clusters)} clusters written to {out} in "
                f"{time.monotonic() - t0:.1f}s: {summary.topics} topic partitions, "
                f"{summary.entries} entries, {summary.marker_entries} markers"
            )
            return 0
        if args.command == "cleanup":
            from pulsar_model.tables.delta_io import cleanup_staging
            from pulsar_model.tables.run_lock import break_lock, live_holder

            if args.break_lock:
                holder = break_lock(config.storage.warehouse)
                print(
                    "no run lock"
                    if holder is None
                    else f"removed the run lock of {holder.get('run_id', '?')}"
                )
            running = live_holder(config.storage.warehouse)
            if running is not None:
                print(
                    f"error: run {running.get('run_id', '?')} (pid {running.get('pid', '?')}) holds the run "
                    "lock of this warehouse and is alive: cleanup would delete the files it is writing. Wait "
                    "for it to finish, or stop it and run 'pulsar-analytics cleanup --break-lock'.",
                    file=sys.stderr,
                )
                return 2
            # No JVM: staging folders, orphan files and the rollback of a half-committed write_all are
            # plain file and Delta-log operations.
            removed = cleanup_staging(
                config.storage.warehouse, config.storage.table_locations, older_than_seconds=args.older_than
            )
            print(f"removed {len(removed)} staging folder(s)")
            for path in removed:
                print(f"  {path}")
            return 0
        if args.command == "report":
            from pulsar_model.pipeline.nightly import StageContext
            from pulsar_model.report import build_report, default_report_path, format_terminal_summary
            from pulsar_model.tables.delta_io import DeltaTables

            spark = _session(config)
            tables = DeltaTables(
                spark,
                config.storage.warehouse,
                config.storage.table_locations,
                backend=config.storage.delta_backend,  # type: ignore[arg-type]
            )
            context = StageContext(spark, tables, config, "report", None, args.export_date)
            run_date = context.run_date("report")
            out = args.out or default_report_path(config.report_dir, run_date)
            print(format_terminal_summary(build_report(tables, run_date, out)))
            return 0
        from pulsar_model.pipeline.nightly import format_summary, run_nightly

        spark = _session(config)
        stages: list[str] | None = None
        if args.command == "ingest":
            stages = ["ingest"]
        elif args.command == "skip-plan":
            stages = ["plans"]
        elif args.command in STAGE_COMMANDS:
            stages = [args.command]
        elif args.stages:
            stages = [s.strip() for s in str(args.stages).split(",") if s.strip()]
        outcomes = run_nightly(
            spark,
            config,
            export_dir=getattr(args, "export_dir", None),
            export_date=args.export_date,
            stages=stages,
            request_files=getattr(args, "requests", []),
        )
        print(format_summary(outcomes))
        return 0
    except PulsarAnalyticsError as exc:
        print(f"pulsar-analytics: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
