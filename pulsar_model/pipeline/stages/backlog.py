"""The nightly ``backlog`` stage: per-cursor and per-topic backlog tables for one run date.

Driver-side orchestration only (reads, writes); the arithmetic is the pure transforms of
:mod:`pulsar_model.backlog`, called once with ``pulsar_version=None``: every topic carries its cluster's
version (:mod:`pulsar_model.pipeline.stages.cluster_versions`) and the transforms branch on its flags, so
one plan serves every cluster whatever mix of versions the export has (docs §0.3).
"""

from __future__ import annotations

import datetime as dt

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pulsar_model.backlog import BacklogNumbers, backlog_numbers
from pulsar_model.backlog_exact import KINDS, MEASURES, exact_backlog_measures
from pulsar_model.engine.entry_coverage import COLUMN as COMPLETE
from pulsar_model.engine.entry_coverage import topic_entries_complete
from pulsar_model.pinning import pinning_report, unmoved_cursors
from pulsar_model.pipeline.stages.cluster_versions import day_cluster_versions, with_cluster_version
from pulsar_model.tables.delta_io import DeltaTables
from pulsar_model.tables.stage_io import write_day_outputs

#: Output tables of the stage.
OUTPUT_TABLES = ("cursor_backlog", "topic_backlog", "topic_pinning", "unmoved_cursors")
#: Columns of :func:`pulsar_model.backlog_exact.exact_backlog` kept in ``cursor_backlog``.
EXACT_COLUMNS = (
    "backlog_entries_exported",
    "backlog_messages",
    "backlog_bytes",
    *[f"backlog_{kind}_{m}" for kind in KINDS for m in MEASURES],
    "oldest_unacked_position",
    "oldest_unacked_publish_time_ms",
    "oldest_unacked_age_seconds",
    "expected_backlog_entries",
    "exported_entries_complete",
    "non_precise_backlog_entries",
)
#: How far back ``unmoved_cursors`` looks for consecutive exports with the same mark-delete position.
HISTORY_DAYS = 30
_TOPIC = ["cluster", "topic"]


def cursor_backlog(
    managed_ledgers: DataFrame,
    ledgers: DataFrame,
    cursors: DataFrame,
    pulsar_version: str | None,
    entries: DataFrame | None = None,
    numbers: BacklogNumbers | None = None,
) -> DataFrame:
    """One row per cursor: precise backlog, entries in storage, §2.4 estimate, broker counter drift, and
    (with ``entries``) the exact messages/bytes by kind, the oldest unacked message and the estimate's error
    (docs §1.8, §2.4). ``pulsar_version`` None: each topic's ``managed_ledgers.pulsar_version``. ``numbers``:
    the :func:`~pulsar_model.backlog.backlog_numbers` of these inputs, when the caller has them already.
    """
    if numbers is None:
        numbers = backlog_numbers(managed_ledgers, ledgers, cursors, pulsar_version)
    carry = _version_carry(pulsar_version)
    out = cursors.join(numbers.cursors, [*_TOPIC, "cursor_name"], "left").drop("pulsar_version")
    if entries is not None:
        exact = exact_backlog_measures(
            cursors,
            entries,
            managed_ledgers,
            pulsar_version=pulsar_version,
            ledgers=ledgers,
            precise=numbers.ledger_counts,
        ).select(*_TOPIC, "cursor_name", *EXACT_COLUMNS)
        out = out.join(exact, [*_TOPIC, "cursor_name"], "left")
        # the export's own word on the topic (cap, failed fetches, --entries none: ingest's coverage), and
        # bytes only where every entry's stored size is known (REST entries may not tell it)
        unsized = entries.where(F.col("entry_size_bytes").isNull()).select(*_TOPIC).distinct()
        # the topic's own version rides along: one join of the managed ledgers, not two
        topic = topic_entries_complete(managed_ledgers, carry=carry).withColumnRenamed(COMPLETE, "_topic_ok")
        out = out.join(topic, _TOPIC, "left").join(
            unsized.withColumn("_unsized", F.lit(True)), _TOPIC, "left"
        )
        byte_columns = [c for c in EXACT_COLUMNS if c.endswith("_bytes")]
        out = out.withColumns(
            {
                COMPLETE: F.col(COMPLETE) & F.coalesce(F.col("_topic_ok"), F.lit(True)),
                **{c: F.when(F.col("_unsized").isNull(), F.col(c)) for c in byte_columns},
            }
        ).drop("_topic_ok", "_unsized")
        error = F.when(
            F.col("exported_entries_complete"), F.col("estimated_backlog_size_bytes") - F.col("backlog_bytes")
        )
        out = out.withColumn("estimate_minus_exact_bytes", error)
    elif carry:
        out = out.join(managed_ledgers.select(*_TOPIC, *carry), _TOPIC, "left")
    return _labelled(out, pulsar_version).select(
        "*", (F.col("stats_msg_backlog") - F.col("backlog_entries")).alias("counter_minus_precise")
    )


def _version_carry(pulsar_version: str | None) -> list[str]:
    """The managed-ledger columns a join of them carries for :func:`_labelled`: the topic's own version
    (argument None), none with an argument. The joined side must not have its own ``pulsar_version``."""
    return ["pulsar_version"] if pulsar_version is None else []


def _labelled(df: DataFrame, pulsar_version: str | None) -> DataFrame:
    """``df`` with ``pulsar_version`` as its last column: the argument, or (None) the topic's own version
    a join of the managed ledgers carried (:func:`_version_carry`)."""
    label = F.col("pulsar_version") if pulsar_version is None else F.lit(pulsar_version)
    kept = [F.col(f"`{c}`") for c in df.columns if c != "pulsar_version"]
    return df.select(*kept, label.alias("pulsar_version"))


def topic_backlog(
    managed_ledgers: DataFrame,
    ledgers: DataFrame,
    cursors: DataFrame,
    pulsar_version: str | None,
    numbers: BacklogNumbers | None = None,
) -> DataFrame:
    """One row per topic: the broker's backlogSize estimate beside the exported stats value (docs §2.3).
    ``pulsar_version`` None: each topic's ``managed_ledgers.pulsar_version``; ``numbers`` as for
    :func:`cursor_backlog`."""
    if numbers is None:
        numbers = backlog_numbers(managed_ledgers, ledgers, cursors, pulsar_version)
    # the stats value and the topic's own version in one join of the managed ledgers
    stats = managed_ledgers.select(
        *_TOPIC, "export_id", "export_date", "stats_backlog_size_bytes", *_version_carry(pulsar_version)
    )
    joined = numbers.topics.drop("pulsar_version").join(stats, _TOPIC, "left")
    return _labelled(joined, pulsar_version).select(
        "*",
        (F.col("estimated_backlog_size_bytes") - F.col("stats_backlog_size_bytes")).alias(
            "estimate_minus_stats_bytes"
        ),
    )


def topic_pinning(
    managed_ledgers: DataFrame,
    ledgers: DataFrame,
    cursors: DataFrame,
    pulsar_version: str | None,
    numbers: BacklogNumbers | None = None,
) -> DataFrame:
    """One row per topic: the ledgers the slowest durable cursor alone keeps alive (docs §1.11).
    ``pulsar_version`` None: each topic's ``managed_ledgers.pulsar_version``. With ``numbers`` (the
    :func:`~pulsar_model.backlog.backlog_numbers` of these inputs) the report is read from its pass (the
    rows of :func:`pinning_report`, proven equal by ``tests/test_properties_backlog.py``) instead of
    being planned set-based."""
    carry = _version_carry(pulsar_version)
    if numbers is None:
        report = pinning_report(managed_ledgers, ledgers, cursors, pulsar_version=pulsar_version)
        if carry:
            report = report.drop("pulsar_version").join(
                managed_ledgers.select(*_TOPIC, *carry), _TOPIC, "left"
            )
    else:
        # the export identity and the topic's own version in the one join of the managed ledgers
        export = [c for c in ("export_id", "export_date") if c in managed_ledgers.columns]
        report = managed_ledgers.select(*_TOPIC, *export, *carry).join(
            numbers.pinning.drop("pulsar_version"), _TOPIC, "inner"
        )
    return _labelled(report, pulsar_version)


def unmoved_cursors_as_of(
    tables: DeltaTables, run_date: dt.date, history_days: int = HISTORY_DAYS
) -> DataFrame:
    """Cursors unmoved across the exports of the ``history_days`` up to ``run_date`` (one row per cursor)."""
    window = (F.col("export_date") <= F.lit(run_date)) & (
        F.col("export_date") > F.lit(run_date - dt.timedelta(days=history_days))
    )
    history = tables.read("cursors").where(window)
    ml_history = tables.read("managed_ledgers").where(window)
    found = unmoved_cursors(history, ml_history, min_exports=2)
    # only cursors still standing still in the run date's export are news for that date
    return found.where(F.col("last_export_date") == F.lit(run_date)).withColumn(
        "export_date", F.lit(run_date)
    )


def run_backlog_stage(
    tables: DeltaTables, run_date: dt.date, default_version: str
) -> tuple[dict[str, int], dict[str, int]]:
    """Compute and write the stage's tables for ``run_date``; return (rows written, table versions)."""
    day = {"export_date": run_date}
    raw = tables.read("managed_ledgers", partition_filter=day)
    # every topic carries its cluster's version: one plan for every cluster (docs §0.3)
    managed = with_cluster_version(raw, day_cluster_versions(tables, day, default_version), default_version)
    # rows of topics without a managed-ledger row have no version and no analysis
    scope = raw.select(*_TOPIC)
    ledgers = tables.read("ledgers", partition_filter=day).join(scope, _TOPIC, "left_semi")
    cursors = tables.read("cursors", partition_filter=day).join(scope, _TOPIC, "left_semi")
    entries = (
        tables.read("entries", partition_filter=day).join(scope, _TOPIC, "left_semi")
        if tables.exists("entries")
        else None
    )
    # the cursor, topic and pinning tables read one grouped pass per topic, computed once
    numbers = backlog_numbers(managed, ledgers, cursors, None, materialise=lambda df: df.localCheckpoint())
    outputs: dict[str, DataFrame | None] = {
        "cursor_backlog": cursor_backlog(managed, ledgers, cursors, None, entries, numbers),
        "topic_backlog": topic_backlog(managed, ledgers, cursors, None, numbers),
        "topic_pinning": topic_pinning(managed, ledgers, cursors, None, numbers),
        "unmoved_cursors": unmoved_cursors_as_of(tables, run_date),
    }
    rows, versions_written = write_day_outputs(
        tables, day, {name: outputs[name] for name in OUTPUT_TABLES}, stage="backlog"
    )
    return rows, versions_written
