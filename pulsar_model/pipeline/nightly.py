"""The nightly pipeline: ingest an export, then run every analytics stage for its date.

Each stage reads the input tables of the run date and writes its outputs with
``replace_partitions`` (a rerun of a date replaces that date). Progress goes to the terminal
("stage n of m"), the Spark UI shows the stage as the job description, and every stage appends
one ``run_log`` row, also when it fails (then with the error, and the job exits non-zero).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import SparkSession

from pulsar_model import __version__
from pulsar_model.errors import ConfigError, NoDataError, failure_summary
from pulsar_model.ingest.pipeline import IngestResult, append_run_log, ingest_export
from pulsar_model.pipeline.config import AppConfig
from pulsar_model.pipeline.progress import Progress
from pulsar_model.pipeline.session import driver_memory_setting
from pulsar_model.tables.delta_io import DeltaTables
from pulsar_model.tables.run_lock import warehouse_run_lock

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StageContext:
    """What a stage gets: the session, the tables, the run's identity and config values."""

    spark: SparkSession
    tables: DeltaTables
    config: AppConfig
    run_id: str
    export_dir: str | None
    export_date: dt.date | None
    request_files: tuple[str, ...] = ()
    echo: Callable[[str], None] = print

    def run_date(self, stage: str) -> dt.date:
        """The date this stage works on: the given/ingested one, else the newest ingested export date."""
        if self.export_date is not None:
            return self.export_date
        dates = ingested_dates(self.tables)
        if dates:
            return dates[-1]
        raise NoDataError(
            f"The {stage} stage needs ingested data and the warehouse "
            f"{self.tables.location('managed_ledgers')} has none: ingest an export first "
            "(pulsar-analytics ingest --export-dir DIR, or nightly --export-dir DIR)"
        )


def _log_failure(spark: SparkSession, tables: DeltaTables, rows: list[dict[str, Any]]) -> None:
    """Record a failed stage in ``run_log``; a JVM that died with the stage cannot, and must not hide
    the stage's own error behind its own."""
    try:
        append_run_log(spark, tables, rows)
    except Exception:  # the stage's error is re-raised by the caller
        log.warning("could not record the failed stage in run_log", exc_info=True)


def ingested_dates(tables: DeltaTables) -> list[dt.date]:
    """Export dates with ingested data (partitions of ``managed_ledgers``, read from its Delta log where the
    backend can), oldest first; [] when none."""
    if not tables.exists("managed_ledgers"):
        return []
    values = tables.partition_values("managed_ledgers", "export_date")
    return sorted(d for d in values if isinstance(d, dt.date))


def check_run_date(tables: DeltaTables, run_date: dt.date, what: str) -> None:
    """Raise :class:`NoDataError` naming the available dates when ``run_date`` has no ingested data."""
    dates = ingested_dates(tables)
    if run_date in dates:
        return
    shown = ", ".join(d.isoformat() for d in dates[-10:]) or "none (ingest an export first)"
    more = f" (the newest 10 of {len(dates)})" if len(dates) > 10 else ""
    raise NoDataError(
        f"No ingested data for {run_date.isoformat()}, so {what} would be empty. Dates with data{more}: "
        f"{shown}. Pass one of them with --export-date, or ingest that date's export first."
    )


@dataclass(frozen=True)
class StageOutcome:
    """What a stage reports back (counts for the run log and the summary)."""

    run_date: dt.date
    export_id: str | None
    rows_in: dict[str, int]
    rows_accepted: dict[str, int]
    rows_quarantined: dict[str, int]
    rows_out: dict[str, int]
    table_versions: dict[str, int]
    #: Accepted records per source the parsers noted an assumption about (``ingest_notes``).
    rows_noted: dict[str, int] = field(default_factory=dict)
    #: The report stage's :class:`~pulsar_model.report.ReportSummary` (None for every other stage).
    report: Any = None


def _stage_ingest(ctx: StageContext) -> StageOutcome:
    if ctx.export_dir is None:
        raise ConfigError("The ingest stage needs --export-dir DIR (the export folder to read)")
    result: IngestResult = ingest_export(
        ctx.spark,
        ctx.tables,
        ctx.export_dir,
        cluster_versions=ctx.config.pulsar.cluster_versions,
        export_date=ctx.export_date,
        run_id=ctx.run_id,
    )
    return StageOutcome(
        run_date=result.export_date,
        export_id=result.export_id,
        rows_in=result.rows_in,
        rows_accepted=result.rows_accepted,
        rows_quarantined=result.rows_quarantined,
        rows_out=result.rows_out,
        table_versions=result.table_versions,
        rows_noted=result.rows_noted,
    )


def _outcome(run_date: dt.date, rows: dict[str, int], versions: dict[str, int]) -> StageOutcome:
    """The outcome of an analytics stage that reads tables only (no input counts, no quarantine)."""
    return StageOutcome(
        run_date=run_date,
        export_id=None,
        rows_in={},
        rows_accepted={},
        rows_quarantined={},
        rows_out=rows,
        table_versions=versions,
    )


def _stage_backlog(ctx: StageContext) -> StageOutcome:
    from pulsar_model.pipeline.stages.backlog import run_backlog_stage

    run_date = ctx.run_date("backlog")
    return _outcome(run_date, *run_backlog_stage(ctx.tables, run_date, ctx.config.pulsar.default_version))


def _stage_plans(ctx: StageContext) -> StageOutcome:
    from pulsar_model.pipeline.stages.plans import run_plans_stage

    run_date = ctx.run_date("plans")
    files = list(ctx.request_files)
    if ctx.config.plans.requests_file and ctx.config.plans.requests_file not in files:
        files.append(ctx.config.plans.requests_file)
    rows, versions, counts = run_plans_stage(
        ctx.tables,
        run_date,
        ctx.config.pulsar.default_version,
        run_id=ctx.run_id,
        request_files=files,
        export_dir=ctx.export_dir,
        requests_table=ctx.config.plans.requests_table,
    )
    n_in, n_bad = counts["plan_requests_in"], counts["plan_requests_quarantined"]
    return StageOutcome(
        run_date=run_date,
        export_id=None,
        rows_in={"plan-requests": n_in},
        rows_accepted={"plan-requests": n_in - n_bad},
        rows_quarantined={"plan-requests": n_bad},
        rows_out=rows,
        table_versions=versions,
    )


def _stage_quota(ctx: StageContext) -> StageOutcome:
    from pulsar_model.pipeline.stages.quota import run_quota_stage

    run_date = ctx.run_date("quota")
    trace_max = ctx.config.quota.trace_max_iterations
    return _outcome(
        run_date,
        *run_quota_stage(
            ctx.tables, run_date, ctx.config.pulsar.default_version, trace_max_iterations=trace_max
        ),
    )


def _stage_replication(ctx: StageContext) -> StageOutcome:
    from pulsar_model.pipeline.stages.replication import run_replication_stage

    run_date = ctx.run_date("replication")
    return _outcome(run_date, *run_replication_stage(ctx.tables, run_date, ctx.config.pulsar.default_version))


def _stage_compaction(ctx: StageContext) -> StageOutcome:
    from pulsar_model.compaction import CompactionThresholds
    from pulsar_model.pipeline.stages.compaction import run_compaction_stage

    run_date = ctx.run_date("compaction")
    cfg = ctx.config.compaction
    thresholds = CompactionThresholds.parse(
        cfg.broker_threshold_bytes, cfg.namespace_thresholds, cfg.topic_thresholds
    )
    return _outcome(
        run_date,
        *run_compaction_stage(ctx.tables, run_date, ctx.config.pulsar.default_version, thresholds),
    )


def _stage_failover(ctx: StageContext) -> StageOutcome:
    from pulsar_model.pipeline.stages.audit import run_failover_stage

    run_date = ctx.run_date("failover")
    consistent = ctx.config.broker.active_consumer_failover_consistent_hashing
    return _outcome(
        run_date,
        *run_failover_stage(
            ctx.tables, run_date, ctx.config.pulsar.default_version, consistent_hashing=consistent
        ),
    )


def _stage_transactions(ctx: StageContext) -> StageOutcome:
    from pulsar_model.pipeline.stages.audit import run_transactions_stage

    run_date = ctx.run_date("transactions")
    threshold = ctx.config.broker.transaction_long_open_threshold_ms
    return _outcome(
        run_date,
        *run_transactions_stage(
            ctx.tables, run_date, ctx.config.pulsar.default_version, long_open_threshold_ms=threshold
        ),
    )


def _stage_schemas(ctx: StageContext) -> StageOutcome:
    from pulsar_model.pipeline.stages.audit import run_schema_stage

    run_date = ctx.run_date("schemas")
    strategy = ctx.config.broker.schema_compatibility_strategy
    return _outcome(
        run_date,
        *run_schema_stage(ctx.tables, run_date, ctx.config.pulsar.default_version, broker_strategy=strategy),
    )


def _stage_history(ctx: StageContext) -> StageOutcome:
    from pulsar_model.pipeline.stages.history import run_history_stage

    run_date = ctx.run_date("history")
    return _outcome(run_date, *run_history_stage(ctx.tables, run_date, ctx.config.pulsar.default_version))


def _stage_report(ctx: StageContext) -> StageOutcome:
    from pulsar_model.report import build_report, default_report_path

    run_date = ctx.run_date("report")
    summary = build_report(ctx.tables, run_date, default_report_path(ctx.config.report_dir, run_date))
    return dataclasses.replace(_outcome(run_date, {}, {}), report=summary)


#: Stages in run order. Analytics stages register here as they land.
STAGES: dict[str, Callable[[StageContext], StageOutcome]] = {
    "ingest": _stage_ingest,
    "backlog": _stage_backlog,
    "plans": _stage_plans,
    "quota": _stage_quota,
    "replication": _stage_replication,
    "compaction": _stage_compaction,
    "failover": _stage_failover,
    "transactions": _stage_transactions,
    "schemas": _stage_schemas,
    "history": _stage_history,
    "report": _stage_report,
}


def run_nightly(
    spark: SparkSession,
    config: AppConfig,
    *,
    export_dir: str | None,
    export_date: dt.date | None = None,
    stages: Sequence[str] | None = None,
    run_id: str | None = None,
    request_files: Sequence[str] = (),
    echo: Callable[[str], None] = print,
    progress: Progress | None = None,
) -> list[StageOutcome]:
    """Run ``stages`` (default: all) in order; stop at the first failure (after logging it).

    The run holds the warehouse's run lock (:mod:`pulsar_model.tables.run_lock`) throughout: a concurrent run
    against the same warehouse fails at once with ``RunLockedError`` and writes nothing. Without the ingest
    stage, an ``export_date`` that has no ingested data fails at once (:class:`NoDataError` naming the dates
    that have data) instead of writing empty outputs. ``progress`` shows what a running stage computes.
    """
    chosen = check_stages(stages)
    run_id = run_id or f"nightly-{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"
    tables = DeltaTables(
        spark,
        config.storage.warehouse,
        table_locations=config.storage.table_locations,
        backend=config.storage.delta_backend,  # type: ignore[arg-type]
    )
    if export_date is not None and "ingest" not in chosen:
        check_run_date(tables, export_date, f"the {', '.join(chosen)} stage(s)")
    with warehouse_run_lock(config.storage.warehouse, run_id):
        return _run_stages(
            spark, tables, config, chosen, run_id, export_dir, export_date, request_files, echo, progress
        )


def check_stages(stages: Sequence[str] | None) -> list[str]:
    """The stages to run, in the order given (default: all of :data:`STAGES`); unknown names fail with the
    list of stages (no Spark needed: the command line checks them before the session starts)."""
    chosen = list(stages) if stages else list(STAGES)
    unknown = [s for s in chosen if s not in STAGES]
    if unknown:
        raise ConfigError(f"Unknown stage(s) {', '.join(unknown)}; available stages: {', '.join(STAGES)}")
    if not chosen:
        raise ConfigError(f"No stage given; available stages: {', '.join(STAGES)}")
    return chosen


def _run_stages(
    spark: SparkSession,
    tables: DeltaTables,
    config: AppConfig,
    chosen: Sequence[str],
    run_id: str,
    export_dir: str | None,
    export_date: dt.date | None,
    request_files: Sequence[str],
    echo: Callable[[str], None],
    progress: Progress | None = None,
) -> list[StageOutcome]:
    outcomes: list[StageOutcome] = []
    for number, name in enumerate(chosen, start=1):
        ctx = StageContext(spark, tables, config, run_id, export_dir, export_date, tuple(request_files), echo)
        label = f"[{number}/{len(chosen)}] {name}"
        echo(f"{label} ...")
        spark.sparkContext.setJobDescription(f"{run_id} stage {number}/{len(chosen)}: {name}")
        started = dt.datetime.now(dt.UTC)
        t0 = time.monotonic()
        if progress is not None:
            progress.start(label)
        try:
            outcome = STAGES[name](ctx)
        except Exception as exc:
            finished = dt.datetime.now(dt.UTC)
            reason = failure_summary(exc, driver_memory_setting(spark))
            echo(f"[{number}/{len(chosen)}] {name} FAILED after {time.monotonic() - t0:.1f}s: {reason}")
            _log_failure(
                spark,
                tables,
                [
                    {
                        "run_id": run_id,
                        "job": "nightly",
                        "stage": name,
                        "run_date": export_date or started.date(),
                        "export_id": None,
                        "started_at": started,
                        "finished_at": finished,
                        "status": "failed",
                        "error": f"{type(exc).__name__}: {exc}"[:4000],
                        "code_version": __version__,
                        "pulsar_version": config.pulsar.default_version,
                    }
                ],
            )
            raise
        finally:
            if progress is not None:
                progress.finish()
        finished = dt.datetime.now(dt.UTC)
        append_run_log(
            spark,
            tables,
            [
                {
                    "run_id": run_id,
                    "job": "nightly",
                    "stage": name,
                    "run_date": outcome.run_date,
                    "export_id": outcome.export_id,
                    "started_at": started,
                    "finished_at": finished,
                    "status": "succeeded",
                    "error": None,
                    "rows_in": outcome.rows_in,
                    "rows_accepted": outcome.rows_accepted,
                    "rows_quarantined": outcome.rows_quarantined,
                    "rows_noted": outcome.rows_noted,
                    "rows_out": outcome.rows_out,
                    "table_versions": outcome.table_versions,
                    "code_version": __version__,
                    "pulsar_version": config.pulsar.default_version,
                }
            ],
        )
        export_date = export_date or outcome.run_date
        echo(f"{label} done in {time.monotonic() - t0:.1f}s{_rows_text(outcome)}")
        outcomes.append(outcome)
    spark.sparkContext.setJobDescription(None)  # type: ignore[arg-type]
    return outcomes


def _rows_text(outcome: StageOutcome) -> str:
    """``: 4 tables, 12,345 rows`` (the per-table listing is :func:`format_summary`, shown with ``-v``)."""
    if outcome.report is not None:
        return f": {outcome.report.out_path}"
    if not outcome.rows_out:
        return ""
    total = sum(outcome.rows_out.values())
    return f": {len(outcome.rows_out)} table{'s' if len(outcome.rows_out) != 1 else ''}, {total:,} rows"


def format_summary(outcomes: Sequence[StageOutcome]) -> str:
    """The per-table listing of a run: sources in / accepted / quarantined, rows and version per table."""
    lines = []
    for outcome in outcomes:
        export = f"  export {outcome.export_id}" if outcome.export_id else ""
        lines.append(f"run date {outcome.run_date}{export}")
        if outcome.rows_in:
            lines.append(f"  {'source':<16}{'in':>10}{'accepted':>10}{'quarantined':>13}{'noted':>8}")
            for source in sorted(outcome.rows_in):
                lines.append(
                    f"  {source:<16}{outcome.rows_in[source]:>10}{outcome.rows_accepted.get(source, 0):>10}"
                    f"{outcome.rows_quarantined.get(source, 0):>13}{outcome.rows_noted.get(source, 0):>8}"
                )
            if any(outcome.rows_noted.values()):
                lines.append(
                    "  noted: accepted records the parsers assumed something about (unknown fields, typos, "
                    "defaults); see table ingest_notes"
                )
        lines.append(f"  {'table':<18}{'rows':>10}{'version':>9}")
        for table in sorted(outcome.rows_out):
            lines.append(
                f"  {table:<18}{outcome.rows_out[table]:>10}{outcome.table_versions.get(table, -1):>9}"
            )
    return "\n".join(lines)
