"""The nightly ``compaction`` stage: compaction preview, trigger decision and savings per topic (docs §5).

Driver-side orchestration only (reads, cached copies of phase one's rows and of the per-topic ranges,
writes); the logic is the pure transforms of :mod:`pulsar_model.compaction`, called once with
``pulsar_version=None``: every topic and message carries its cluster's version
(:mod:`pulsar_model.pipeline.stages.cluster_versions`) and the transforms pick each cluster's compactor
generation and trigger rule from its flags (docs §0.3, §5.3-5.5), one plan for every cluster. Output
tables, partitioned by ``export_date``:

* ``compaction_horizons`` - one row per (cluster, topic, export) with messages or a ``__compaction`` cursor:
  the horizon and the phase-two range the compactor would use now (§5.4);
* ``compaction_ledger`` - one row per slot of every entry the compactor would write (§5.5), placeholders
  included;
* ``compaction_summary`` - one row per (cluster, topic, export): keys, tombstones (also those that never
  leave the compacted ledger), key-less messages, savings, the dirty part since the last horizon and the
  automatic trigger's decision (§5.3).

Inputs: the run date's ``managed_ledgers``, ``ledgers``, ``cursors`` and, when the export had entry dumps,
``messages`` and ``entries``. Phase one starts after the ``__compaction`` cursor's mark-delete (the last
horizon), at the topic start when there is none (§5.4). Thresholds come from configuration
(:class:`~pulsar_model.compaction.CompactionThresholds`; the exports carry none), defaulting to the
broker's ``brokerServiceCompactionThresholdInBytes = 0`` (automatic compaction off).

:func:`write_compacted_entries` writes a compacted ledger in the stored-entry dump format the ingest reads.
"""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pulsar_model.compaction import (
    COMPACTION_CURSOR,
    CompactionPhases,
    CompactionThresholds,
    compacted_entry_records,
    compacted_ledger,
    compaction_horizons,
    compaction_phases,
    compaction_summary,
    compaction_trigger,
    with_uncompressed_size_flag,
)
from pulsar_model.engine.entry_coverage import COLUMN as COMPLETE
from pulsar_model.engine.entry_coverage import compaction_entries_complete
from pulsar_model.pipeline.stages.cluster_versions import day_cluster_versions, with_cluster_version
from pulsar_model.tables.delta_io import DeltaTables
from pulsar_model.tables.stage_io import read_day, write_day_outputs

log = logging.getLogger(__name__)

#: Output tables of the stage.
OUTPUT_TABLES = ("compaction_horizons", "compaction_ledger", "compaction_summary")
_TOPIC = ["cluster", "topic"]


def compaction_start_positions(cursors: DataFrame) -> DataFrame:
    """One row per topic with a ``__compaction`` cursor: ``cluster, topic, position`` = its mark-delete,
    the last horizon, where phase one starts reading (docs §5.4, §5.6). Pure and lazy."""
    return cursors.where(F.col("cursor_name") == F.lit(COMPACTION_CURSOR)).select(
        *_TOPIC, F.col("mark_delete_position").alias("position")
    )


def _outputs(
    managed: DataFrame,
    ledgers: DataFrame,
    cursors: DataFrame,
    messages: DataFrame | None,
    entries: DataFrame | None,
    thresholds: CompactionThresholds,
    retain_null_key: bool | None,
    cached: list[CompactionPhases],
) -> dict[str, DataFrame | None]:
    """The three tables (before the export identity is added), each topic by its own ``pulsar_version``
    (``managed`` and ``messages`` carry it); the phases it persists are appended to ``cached``, to be
    released after the writes."""
    starts = compaction_start_positions(cursors)
    trigger = compaction_trigger(managed, ledgers, cursors, thresholds, None, entries=entries)
    if messages is None:
        return {"compaction_horizons": None, "compaction_ledger": None, "compaction_summary": trigger}
    # Both phases once, materialised: the three tables are three writes, each would recompute phase one's
    # two windows over every message (tier m: 3 x ~140 s of task time).
    phases = compaction_phases(messages, retain_null_key, None, starts, materialise=True)
    cached.append(phases)
    rows = phases.rows
    return {
        "compaction_horizons": compaction_horizons(
            messages, retain_null_key, None, starts, ranges=phases.ranges
        ),
        "compaction_ledger": compacted_ledger(messages, retain_null_key, None, starts, rows=rows),
        "compaction_summary": compaction_summary(
            messages, retain_null_key, None, starts, trigger=trigger, rows=rows
        ),
    }


def run_compaction_stage(
    tables: DeltaTables,
    run_date: dt.date,
    default_version: str,
    thresholds: CompactionThresholds | None = None,
    retain_null_key: bool | None = None,
) -> tuple[dict[str, int], dict[str, int]]:
    """Compute and write the stage's tables for ``run_date``; return (rows written, table versions).

    ``thresholds``: the configured compaction thresholds (default: broker 0, no policies);
    ``retain_null_key``: ``topicCompactionRetainNullKey`` for every cluster, ``None`` = each version's
    broker default (docs §5.2). Every table's ``run_date`` partition is replaced, also by an empty result
    (a rerun leaves no stale rows). Without an entries export only ``compaction_summary`` gets rows (the
    trigger; zero counts, null dirty columns).
    """
    thresholds = thresholds or CompactionThresholds()
    day = {"export_date": run_date}
    raw = tables.read("managed_ledgers", partition_filter=day)
    # every topic carries its cluster's version: one plan for every cluster (docs §0.3)
    versions = day_cluster_versions(tables, day, default_version)
    managed = with_cluster_version(raw, versions, default_version)
    # rows of topics without a managed-ledger row have no version and no analysis
    scope = raw.select(*_TOPIC)
    ledgers = tables.read("ledgers", partition_filter=day).join(scope, _TOPIC, "left_semi")
    all_cursors = tables.read("cursors", partition_filter=day)
    cursors = all_cursors.join(scope, _TOPIC, "left_semi")
    entries = read_day(tables, "entries", day)
    messages = read_day(tables, "messages", day)
    if messages is not None and entries is not None:
        messages = with_uncompressed_size_flag(messages, entries)
    if messages is not None:
        messages = with_cluster_version(messages.join(scope, _TOPIC, "left_semi"), versions, default_version)
    if entries is not None:
        entries = entries.join(scope, _TOPIC, "left_semi")
    outputs: dict[str, list[DataFrame]] = {name: [] for name in OUTPUT_TABLES}
    cached: list[CompactionPhases] = []
    complete = compaction_entries_complete(managed, all_cursors)
    try:
        parts = _outputs(managed, ledgers, cursors, messages, entries, thresholds, retain_null_key, cached)
        # one row per topic that every table joins: computed once (the completeness reads the cursors) and
        # broadcast, as it is metadata-sized by construction
        ids = (
            managed.select(*_TOPIC, "export_id", "export_date", "pulsar_version")
            .join(complete, _TOPIC, "left")
            .localCheckpoint()
        )
        for name, part in parts.items():
            if part is not None:
                outputs[name].append(
                    part.drop(COMPLETE, "pulsar_version").join(F.broadcast(ids), _TOPIC, "inner")
                )
        return write_day_outputs(
            tables, day, {name: outputs[name] for name in OUTPUT_TABLES}, stage="compaction"
        )
    finally:
        for phases in cached:
            phases.release()


def write_compacted_entries(
    compacted: DataFrame, messages: DataFrame, entries: DataFrame, out_dir: str | Path
) -> list[str]:
    """Write ``compacted`` (:func:`~pulsar_model.compaction.compacted_ledger` rows) as entry dumps.

    Layout: ``<out_dir>/<cluster>/entries/part-*.json``, one stored entry per line
    ``{"topic", "ledger_id", "entry_id", "data": base64}`` - what ``ingest`` reads (README "Export layout"),
    so ingesting ``out_dir`` gives back the compacted entries (see
    :func:`~pulsar_model.compaction.compacted_entry_records` for what is re-encoded). The encoding runs on
    the executors; the driver only lists the clusters (one Spark file write per cluster, as the layout
    needs one folder per cluster). Existing ``entries`` folders of those clusters are replaced. Returns the
    folders written.
    """
    records = compacted_entry_records(compacted, messages, entries).persist()
    try:
        clusters = sorted(r[0] for r in records.select("cluster").distinct().collect())
        written = []
        for cluster in clusters:
            folder = f"{str(out_dir).rstrip('/')}/{cluster}/entries"
            records.where(F.col("cluster") == F.lit(cluster)).select(
                "topic", "ledger_id", "entry_id", "data"
            ).write.mode("overwrite").json(folder)
            written.append(folder)
        return written
    finally:
        records.unpersist()
