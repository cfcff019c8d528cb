"""The nightly ``compaction`` stage: compaction preview, trigger decision and savings per topic (docs §5).

Driver-side orchestration only (reads, a tiny ``distinct`` of the Pulsar versions present, cached
copies of phase one's rows and of the per-topic ranges per version, writes); the logic is the pure
transforms of :mod:`pulsar_model.compaction`, applied once per broker version so that every cluster gets
its own compactor generation and trigger rule (docs §5.3-5.5). Output tables, partitioned by ``export_date``:

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


def _version_outputs(
    version: str,
    managed: DataFrame,
    ledgers: DataFrame,
    cursors: DataFrame,
    messages: DataFrame | None,
    entries: DataFrame | None,
    thresholds: CompactionThresholds,
    retain_null_key: bool | None,
    cached: list[CompactionPhases],
) -> dict[str, DataFrame | None]:
    """The three tables for the topics of one broker version (before the export identity is added); the
    phases it persists are appended to ``cached``, to be released after the writes."""
    ml = managed.where(F.col("pulsar_version") == version)
    scope = ml.select(*_TOPIC)
    led = ledgers.join(scope, _TOPIC, "left_semi")
    cur = cursors.join(scope, _TOPIC, "left_semi")
    ent = entries.join(scope, _TOPIC, "left_semi") if entries is not None else None
    starts = compaction_start_positions(cur)
    trigger = compaction_trigger(ml, led, cur, thresholds, version, entries=ent)
    if messages is None:
        return {"compaction_horizons": None, "compaction_ledger": None, "compaction_summary": trigger}
    msg = messages.join(scope, _TOPIC, "left_semi")
    # Both phases once, materialised: the three tables are three writes, each would recompute phase one's
    # two windows over every message (tier m: 3 x ~140 s of task time).
    phases = compaction_phases(msg, retain_null_key, version, starts, materialise=True)
    cached.append(phases)
    rows = phases.rows
    return {
        "compaction_horizons": compaction_horizons(
            msg, retain_null_key, version, starts, ranges=phases.ranges
        ),
        "compaction_ledger": compacted_ledger(msg, retain_null_key, version, starts, rows=rows),
        "compaction_summary": compaction_summary(
            msg, retain_null_key, version, starts, trigger=trigger, rows=rows
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
    managed = tables.read("managed_ledgers", partition_filter=day).withColumn(
        "pulsar_version", F.coalesce("pulsar_version", F.lit(default_version))
    )
    ledgers = tables.read("ledgers", partition_filter=day)
    cursors = tables.read("cursors", partition_filter=day)
    entries = read_day(tables, "entries", day)
    messages = read_day(tables, "messages", day)
    if messages is not None and entries is not None:
        messages = with_uncompressed_size_flag(messages, entries)
    # A handful of distinct version strings: each runs the transforms with its own semantics.
    versions = sorted(r[0] for r in managed.select("pulsar_version").distinct().collect())
    outputs: dict[str, list[DataFrame]] = {name: [] for name in OUTPUT_TABLES}
    cached: list[CompactionPhases] = []
    complete = compaction_entries_complete(managed, cursors)
    try:
        for version in versions:
            parts = _version_outputs(
                version, managed, ledgers, cursors, messages, entries, thresholds, retain_null_key, cached
            )
            ids = (
                managed.where(F.col("pulsar_version") == version)
                .select(*_TOPIC, "export_id", "export_date", "pulsar_version")
                .join(complete, _TOPIC, "left")
            )
            for name, part in parts.items():
                if part is not None:
                    outputs[name].append(part.drop(COMPLETE).join(ids, _TOPIC, "inner"))
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
