"""The nightly ``quota`` stage: effective backlog quotas, breaches, what-if eviction, producer outcomes.

Driver-side orchestration only (reads, one materialised status, one materialised eviction pass feeding
both eviction tables, writes); the logic is the pure transforms of :mod:`pulsar_model.quota`, called once
with ``pulsar_version=None``: every topic carries its cluster's version
(:mod:`pulsar_model.pipeline.stages.cluster_versions`) and the transforms branch on its flags, so one plan
serves every cluster whatever mix of versions the export has (docs §0.3, §3). Output tables, partitioned
by ``export_date``:

* ``quota_status`` - one row per (cluster, topic, export, quota_type): the effective quota (§3.2) beside
  the broker's breach decision at export time and the exact-data view (§3.4);
* ``quota_evictions`` - one row per (cluster, topic, export, quota_type, cursor): what
  ``consumer_backlog_eviction`` would do to each cursor (§3.6 size, §3.7 time) for every topic with an
  enabled limit of that type, whatever its configured policy (the "what if we switched" question);
* ``quota_eviction_trace`` - one row per (cluster, topic, export, quota_type, iteration): the steps of those
  loops in loop order, the first ``trace_max_iterations`` per topic and type (each step once, not repeated
  per cursor row);
* ``quota_producer_outcomes`` - one row per (cluster, topic, export): disconnections and the error new
  producers get (§3.3, §3.5).

Inputs: the run date's ``managed_ledgers``, ``ledgers``, ``cursors``, ``backlog_quotas`` (absent table =
no policies, every topic on the version's defaults) and, when they exist, ``entries`` and the backlog
stage's ``cursor_backlog`` (exact per-cursor bytes and oldest unacknowledged publish time). Policies are
those of the run date's export only: an export is a snapshot, a policy missing from it no longer applies.
"""

from __future__ import annotations

import datetime as dt
import logging

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pulsar_model.engine.entry_coverage import topic_entries_complete, with_entries_complete
from pulsar_model.engine.flags import FLAGS_COLUMN, with_flags
from pulsar_model.pipeline.stages.cluster_versions import day_cluster_versions, with_cluster_version
from pulsar_model.quota.eviction import (
    DEFAULT_TRACE_MAX_ITERATIONS,
    STEP,
    drop_backlog_what_ifs,
    eviction_losses,
)
from pulsar_model.quota.policy import (
    BREACH_COLUMNS,
    EXACT_COMPLETE,
    POLICY_CONSUMER_BACKLOG_EVICTION,
    QUOTA_TYPE_SIZE,
    QUOTA_TYPE_TIME,
    effective_quotas,
    producer_outcomes,
    quota_breaches,
)
from pulsar_model.tables.contracts import contract
from pulsar_model.tables.delta_io import DeltaTables
from pulsar_model.tables.stage_io import read_day, write_day_outputs

log = logging.getLogger(__name__)

#: Output tables of the stage.
OUTPUT_TABLES = ("quota_status", "quota_evictions", "quota_eviction_trace", "quota_producer_outcomes")
_TOPIC = ["cluster", "topic"]
#: Columns of ``cursor_backlog`` the exact-data view of :func:`quota_breaches` reads (docs §3.4).
_EXACT_COLUMNS = (
    "cluster",
    "topic",
    "cursor_name",
    "is_durable",
    "backlog_bytes",
    "oldest_unacked_publish_time_ms",
    "exported_entries_complete",
)
#: Eviction output columns renamed so that every before/after pair reads alike in ``quota_evictions``.
_AFTER_RENAMES = {
    "mark_delete_position": "mark_delete_position_after",
    "individually_deleted": "individually_deleted_after",
    "messages_consumed_counter": "messages_consumed_counter_after",
}


def enabled_limit(quota_type: str) -> Column:
    """The ``quota_type`` row has an enabled limit (docs §3.4: size < 0 and time <= 0 disable the check)."""
    if quota_type == QUOTA_TYPE_SIZE:
        return (F.col("quota_type") == QUOTA_TYPE_SIZE) & (F.col("limit_size_bytes") >= 0)
    return (F.col("quota_type") == QUOTA_TYPE_TIME) & (F.col("limit_time_seconds") > 0)


def quota_status(
    effective: DataFrame,
    managed_ledgers: DataFrame,
    ledgers: DataFrame,
    cursors: DataFrame,
    entries: DataFrame | None,
    exact_backlog: DataFrame | None,
) -> DataFrame:
    """One row per (cluster, topic, quota_type): :func:`effective_quotas` beside :func:`quota_breaches`
    (``pulsar_version=None``: each topic's own), and with ``exact_backlog`` (the backlog stage's
    ``cursor_backlog``) ``exact_backlog_complete``: the entries export covers the whole backlog of every
    durable cursor (``exported_entries_complete``), so the exact-data view is exact; null when the topic
    has no durable cursor.

    The quota columns both carry (policy, limits, ``check_enabled``, ``is_system_topic``,
    ``source_level``) are the breach rows', equal to ``effective``'s: the other effective columns ride
    through :func:`quota_breaches` (``keep``) instead of a join back, so the effective quotas are planned
    once. Pure and lazy.
    """
    completeness = [EXACT_COMPLETE] if exact_backlog is not None else []
    exact = exact_backlog.select(*_EXACT_COLUMNS) if exact_backlog is not None else None
    keep = [c for c in effective.columns if c not in BREACH_COLUMNS]
    rows = quota_breaches(
        effective,
        managed_ledgers,
        ledgers,
        cursors,
        entries=entries,
        exact_backlog=exact,
        pulsar_version=None,
        keep=[*keep, *completeness],
    )
    extra = [c for c in BREACH_COLUMNS if c not in effective.columns]
    return rows.select(*effective.columns, *extra, *completeness)


def _eviction_columns(result: DataFrame) -> DataFrame:
    """Eviction output with the ``_after`` names, so that every before/after pair reads alike."""
    return result.select(*[F.col(f"`{c}`").alias(_AFTER_RENAMES.get(c, c)) for c in result.columns])


def eviction_trace(evictions: DataFrame) -> DataFrame:
    """One row per recorded loop step: the per-cursor ``iterations`` of :func:`quota_evictions` exploded.

    Every step is carried by the row of the cursor it moved only, so the union of the cursor rows' steps
    is the topic's trace (up to ``trace_max_iterations`` steps), each once. Keeps the columns of
    ``evictions`` other than the cursor's own (``cluster``, ``topic``, ``quota_type`` and whatever identity
    columns were joined, e.g. ``export_id``) that the ``quota_eviction_trace`` contract names. Pure and lazy.
    """
    keep = [
        c
        for c in ("cluster", "topic", "export_id", "export_date", "pulsar_version")
        if c in evictions.columns
    ]
    steps = evictions.select(*keep, "quota_type", F.explode("iterations").alias("_step"))
    return steps.select(
        *keep, "quota_type", *[F.col("_step")[name].alias(name) for name in STEP.fieldNames()]
    )


def quota_evictions(
    status: DataFrame,
    managed_ledgers: DataFrame,
    ledgers: DataFrame,
    cursors: DataFrame,
    entries: DataFrame | None,
    trace_max_iterations: int = DEFAULT_TRACE_MAX_ITERATIONS,
    losses: bool = True,
) -> DataFrame:
    """One row per (cluster, topic, quota_type, cursor): what-if ``consumer_backlog_eviction`` (§3.6, §3.7).

    ``status`` is :func:`quota_status` output (with each topic's ``pulsar_version``). Every topic with an
    enabled limit of a type is evaluated whatever its configured policy: size when ``limit_size_bytes >= 0``
    (§3.4: ``limit < 0`` disables), time when ``limit_time_seconds > 0`` and the topic's version checks time
    quotas (2.8.0+, flag ``time_quota_supported``); time eviction is precise or not as the effective broker
    setting ``precise_time_check`` says (§3.7). All of a topic's evictions come from one grouped pass
    (:func:`~pulsar_model.quota.eviction.drop_backlog_what_ifs`). ``configured_policy`` is the effective
    policy and ``handled_now`` says whether the broker runs this eviction at its next check (the policy is
    ``consumer_backlog_eviction`` and this type is the one the periodic check handles; null when that check
    is undecidable). Without ``entries`` the precise time rows are undecidable (no entry timestamps) and the
    ``lost_*`` columns are null.

    ``iterations``: this cursor's steps among the first ``trace_max_iterations`` of its topic's loop (one
    struct type for both loops; :func:`eviction_trace` turns them into ``quota_eviction_trace`` rows).
    ``losses=False`` leaves the ``lost_*`` columns null, for
    :func:`~pulsar_model.quota.eviction.eviction_losses` (``by=("quota_type", "cursor_name")``,
    ``after="mark_delete_position_after"``) to add them after the grouped pass is materialised (the losses
    read the eviction rows twice). Pure and lazy.
    """
    supported = F.coalesce(F.col(FLAGS_COLUMN)["time_quota_supported"], F.lit(False))
    limits = (
        with_flags(status)
        .where(enabled_limit(QUOTA_TYPE_SIZE) | (enabled_limit(QUOTA_TYPE_TIME) & supported))
        .select(
            *_TOPIC,
            "quota_type",
            F.col("precise_time_check").alias("precise"),
            "limit_size_bytes",
            "limit_time_seconds",
        )
    )
    what_ifs = drop_backlog_what_ifs(
        managed_ledgers, ledgers, cursors, limits, entries, None, trace_max_iterations
    )
    out = _eviction_columns(what_ifs)
    if losses:
        out = eviction_losses(
            out, entries, by=("quota_type", "cursor_name"), after="mark_delete_position_after"
        )
    policy = status.select(
        *_TOPIC,
        "quota_type",
        F.col("policy").alias("configured_policy"),
        "is_system_topic",
        F.when(
            F.coalesce(F.col("policy") == F.lit(POLICY_CONSUMER_BACKLOG_EVICTION), F.lit(False)),
            F.col("is_handled"),
        )
        .otherwise(F.lit(False))
        .alias("handled_now"),
    )
    # at most one row per topic and quota type (metadata-sized): broadcast, the eviction rows stay put
    return out.join(F.broadcast(policy), [*_TOPIC, "quota_type"], "left")


def run_quota_stage(
    tables: DeltaTables,
    run_date: dt.date,
    default_version: str,
    trace_max_iterations: int = DEFAULT_TRACE_MAX_ITERATIONS,
) -> tuple[dict[str, int], dict[str, int]]:
    """Compute and write the stage's tables for ``run_date``; return (rows written, table versions).

    Every table's ``run_date`` partition is replaced, also by an empty result (a rerun leaves no stale rows).
    ``trace_max_iterations`` (config ``quota.trace_max_iterations``): loop steps kept per topic and quota
    type in ``quota_eviction_trace``.
    """
    day = {"export_date": run_date}
    raw = tables.read("managed_ledgers", partition_filter=day)
    # every topic carries its cluster's version: one plan for every cluster (docs §0.3)
    versions = day_cluster_versions(tables, day, default_version)
    managed = with_cluster_version(raw, versions, default_version)
    # rows of topics without a managed-ledger row have no version and no analysis
    scope = raw.select(*_TOPIC)
    ledgers = tables.read("ledgers", partition_filter=day).join(scope, _TOPIC, "left_semi")
    cursors = tables.read("cursors", partition_filter=day).join(scope, _TOPIC, "left_semi")
    entries = read_day(tables, "entries", day)
    quotas = read_day(tables, "backlog_quotas", day)
    if quotas is None:
        quotas = tables.spark.createDataFrame([], contract("backlog_quotas").spark_schema)
    # The exact-data view needs the backlog stage's exact columns, which exist only with an entries export.
    backlog = read_day(tables, "cursor_backlog", day) if entries is not None else None
    if entries is not None:
        entries = entries.join(scope, _TOPIC, "left_semi")
    exact = backlog.join(scope, _TOPIC, "left_semi") if backlog is not None else None
    effective = effective_quotas(quotas, managed, None)
    status = quota_status(effective, managed, ledgers, cursors, entries, exact)
    # status feeds every table and the evictions' limits: materialised once (eager) with its
    # lineage cut - the breach plan is large, and re-planning it under every later operator costs far more
    # than the data. The blocks live on the executors and are cleaned up once unreferenced.
    status = status.localCheckpoint()
    ids = managed.select(*_TOPIC, "export_id", "export_date")
    outputs: dict[str, list[DataFrame]] = {name: [] for name in OUTPUT_TABLES}

    def identified(df: DataFrame) -> DataFrame:
        """With the export identity and ``pulsar_version`` (its cluster's) of its topic."""
        return with_cluster_version(df.join(ids, _TOPIC, "inner"), versions, default_version)

    evictions = quota_evictions(
        status, managed, ledgers, cursors, entries, trace_max_iterations, losses=False
    )
    # both eviction tables and the losses read the grouped eviction pass (the expensive part of the
    # stage): run it once, materialised on the executors, instead of once per reference
    evictions = identified(evictions).localCheckpoint()
    with_losses = eviction_losses(
        evictions,
        entries,
        by=("quota_type", "cursor_name"),
        after="mark_delete_position_after",
        scope_entries=True,
    )
    complete = topic_entries_complete(managed)
    outputs["quota_evictions"].append(with_entries_complete(with_losses, complete))
    outputs["quota_eviction_trace"].append(eviction_trace(evictions))
    for name, part in (
        ("quota_status", status),
        ("quota_producer_outcomes", producer_outcomes(status, status, None)),
    ):
        outputs[name].append(identified(part))
    rows, versions_written = write_day_outputs(
        tables, day, {name: outputs[name] for name in OUTPUT_TABLES}, stage="quota"
    )
    return rows, versions_written
