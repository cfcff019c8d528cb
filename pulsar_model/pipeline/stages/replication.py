"""The nightly ``replication`` stage: replicated-subscription translation, failover duplicates, findings.

Driver-side orchestration only (reads, the clusters' versions (one tiny job per run),
``localCheckpoint`` of the metadata inputs and of the intermediates read more than once, writes); the logic is
the pure transforms of :mod:`pulsar_model.replication` over the run date's tables of **all clusters at
once** (a replicated subscription spans clusters, docs §4). Output tables, partitioned by ``export_date``:

* ``replication_positions`` - one row per (topic, subscription, source cluster, target cluster): the
  expected remote mark-delete from the source's last UPDATE beside the target's actual one, and the status
  (:func:`pulsar_model.replication.translation.position_translation`, §4.4-§4.8);
* ``replication_failover_duplicates`` - per the same pairs: what a failover would redeliver although the
  source acknowledged it, exact from the entry dump or bounded from the snapshots
  (:func:`pulsar_model.replication.duplicates.failover_duplicates`, §4.8);
* ``replication_findings`` - one row per finding of the stall and risk detectors
  (:func:`pulsar_model.replication.detectors.replication_findings`, plus
  :func:`~pulsar_model.replication.detectors.snapshot_cache_evicted_useful` from the cache replay);
* ``replication_snapshots`` - one row per (source cluster, topic, snapshot id): the snapshot protocol
  reassembled from the markers (:func:`pulsar_model.replication.snapshots.snapshot_assembly`, §4.3-§4.5),
  timeouts checked at the source cluster's export time (``managed_ledgers.exported_at``); empty without a
  marker export;
* ``replication_cache_replay`` - one row per observed or predicted UPDATE marker of every replicated
  subscription: the snapshot-cache replay of the cluster's broker version beside the UPDATEs it wrote
  (:func:`pulsar_model.replication.cache.predicted_updates`, §4.6); empty without a marker export.

Inputs: the run date's ``managed_ledgers``, ``ledgers``, ``cursors`` and, when they exist, ``markers``,
``entries`` (no entry dump: translation sees no UPDATE markers, duplicates fall back to the bounds, the
marker detectors are skipped) and ``consumers``. Only the snapshot cache differs between the broker versions
docs §0.3 covers (§4.6: old cache before PR #25044, new since 4.0.9 / 4.1.3 / 4.2): the cache replay and
its detector run once over every cluster, each subscription's events carrying its cluster's version
(:mod:`pulsar_model.pipeline.stages.cluster_versions`; ``default_version`` for clusters without one) whose
flag ``new_snapshot_cache`` picks the generation; the other tables are version-independent.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Mapping

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pulsar_model.engine.entry_coverage import COLUMN as COMPLETE
from pulsar_model.engine.entry_coverage import topic_entries_complete, with_entries_complete
from pulsar_model.engine.flags import FLAGS_COLUMN, with_flags
from pulsar_model.pipeline.stages.cluster_versions import day_cluster_versions, with_cluster_version
from pulsar_model.replication.cache import (
    CACHE_GENERATION_NEW,
    CACHE_GENERATION_OLD,
    MAX_CACHED_NEW,
    MAX_CACHED_OLD,
    compare_predicted_updates,
    replay_snapshot_cache,
    snapshot_cache_events,
)
from pulsar_model.replication.detectors import replication_findings, snapshot_cache_evicted_useful
from pulsar_model.replication.duplicates import failover_duplicates
from pulsar_model.replication.snapshots import snapshot_assembly
from pulsar_model.replication.translation import position_translation, replicated_pairs
from pulsar_model.tables.contracts import contract
from pulsar_model.tables.delta_io import DeltaTables
from pulsar_model.tables.stage_io import read_day, write_day_outputs

log = logging.getLogger(__name__)

#: Output tables of the stage.
OUTPUT_TABLES = (
    "replication_positions",
    "replication_failover_duplicates",
    "replication_findings",
    "replication_snapshots",
    "replication_cache_replay",
)
_TOPIC = ["cluster", "topic"]


def snapshots_at_export_time(markers: DataFrame, cursors: DataFrame, managed_ledgers: DataFrame) -> DataFrame:
    """:func:`snapshot_assembly` with each source cluster's timeouts checked at its export time (§4.5).

    ``isTimedOut`` compares with "now"; for an export that is the moment the cluster was exported
    (``managed_ledgers.exported_at``), not the newest marker. One :func:`snapshot_assembly` over every
    cluster's markers and cursors (the protocol spans them) with ``checked_at_by_topic`` = each (cluster,
    topic)'s export time, keeping the rows whose (source cluster, topic) has an export, each with its
    topic's ``exported_entries_complete`` (one join does both). Pure and lazy.
    """
    export_times = managed_ledgers.select(*_TOPIC, F.unix_millis(F.col("exported_at")).alias("checked_at_ms"))
    assembled = snapshot_assembly(markers, cursors=cursors, checked_at_by_topic=export_times)
    return assembled.join(topic_entries_complete(managed_ledgers), _TOPIC, "inner")


def cache_replay(
    markers: DataFrame,
    cursors: DataFrame,
    ledgers: DataFrame,
    managed_ledgers: DataFrame,
    versions: Mapping[str, str] | None,
    default_version: str,
    reuse: Callable[[DataFrame], DataFrame] | None = None,
) -> tuple[DataFrame, DataFrame]:
    """The snapshot-cache replay of every cluster, each by its own broker version (docs §4.4, §4.6).

    Inputs are scoped to the topics of ``managed_ledgers`` (whose ``pulsar_version`` is its cluster's);
    ``versions`` is :func:`cluster_versions` (None: every cluster on ``default_version``). Returns
    (``replication_cache_replay`` rows: :func:`predicted_updates` with ``pulsar_version``,
    ``cache_generation`` and the ``max_cached`` used; the ``snapshot_cache_evicted_useful`` findings,
    :data:`FINDING_COLUMNS` without export keys). Both use each generation's default capacity and are built
    from one set of cache events and one replay, which go through ``reuse`` (default: as they are) so a
    caller can persist them. Pure and lazy.
    """
    keep = reuse or (lambda df: df)
    scope = managed_ledgers.select(*_TOPIC)
    mk, cur, led = (df.join(scope, _TOPIC, "left_semi") for df in (markers, cursors, ledgers))
    events = keep(with_cluster_version(snapshot_cache_events(mk, cur), versions, default_version))
    replay = keep(replay_snapshot_cache(events, led, managed_ledgers, None, None))
    compared = compare_predicted_updates(events, replay)
    kept = [c for c in compared.columns if c not in ("pulsar_version", "cache_generation", "max_cached")]
    flagged = with_flags(with_cluster_version(compared, versions, default_version))
    new_cache = F.coalesce(F.col(FLAGS_COLUMN)["new_snapshot_cache"], F.lit(False))
    rows = flagged.select(
        *kept,
        "pulsar_version",
        F.when(new_cache, F.lit(CACHE_GENERATION_NEW))
        .otherwise(F.lit(CACHE_GENERATION_OLD))
        .alias("cache_generation"),
        F.when(new_cache, F.lit(MAX_CACHED_NEW)).otherwise(F.lit(MAX_CACHED_OLD)).alias("max_cached"),
    )
    return rows, snapshot_cache_evicted_useful(events, replay)


def replication_outputs(
    managed_ledgers: DataFrame,
    ledgers: DataFrame,
    cursors: DataFrame,
    markers: DataFrame | None,
    entries: DataFrame | None,
    consumers: DataFrame | None,
    versions: Mapping[str, str] | None,
    default_version: str,
    reuse: Callable[[DataFrame], DataFrame] | None = None,
) -> dict[str, DataFrame]:
    """The stage's tables for one export (one row set per table, export identity attached). Pure and lazy.

    ``managed_ledgers.pulsar_version`` must be its cluster's version (:func:`with_cluster_version` of
    ``versions``, :func:`cluster_versions`; ``default_version`` for clusters without a row there; its
    ``exported_at`` is each topic's export time). Without ``markers`` an
    empty marker frame stands in for the translation (no UPDATE was exported, so every active pair reads
    ``stalled``: nothing can be said about its translation) and the snapshot and cache tables are empty.
    ``reuse`` receives the intermediates read more than once - by several tables (the replicated pairs,
    the cache events and replay, see :func:`cache_replay`) or several times by one (the translation's
    pairs with their UPDATEs) - and returns what to read them from; the stage passes ``localCheckpoint`` so
    each is computed once and the plans built on it stay small. Default: as they are (pure and lazy).
    """
    spark = managed_ledgers.sparkSession
    marker_frame = markers
    if marker_frame is None:
        marker_frame = spark.createDataFrame([], contract("markers").spark_schema)
    ids = managed_ledgers.select("cluster", "topic", "export_id", "export_date")
    source_ids = ids.withColumnRenamed("cluster", "source_cluster")
    complete = topic_entries_complete(managed_ledgers)
    # a topic's export identity and entry completeness in one row: the tables that need both join once
    identity = topic_entries_complete(managed_ledgers, carry=("export_id", "export_date"))
    # the replicated pairs, which both per-pair tables start from, are computed once
    pairs = replicated_pairs(cursors, managed_ledgers)
    if reuse is not None:
        pairs = reuse(pairs)
    positions = position_translation(
        marker_frame, cursors, ledgers, managed_ledgers, consumers, materialise=reuse, pairs=pairs
    )
    duplicates = failover_duplicates(
        cursors, entries, markers, ledgers, managed_ledgers, materialise=reuse, pairs=pairs
    )
    findings = replication_findings(markers, cursors, entries, ledgers, managed_ledgers, consumers)
    snapshots = None
    replay_table = None
    if markers is not None:
        snapshots = snapshots_at_export_time(markers, cursors, managed_ledgers)
        rows, evicted = cache_replay(
            markers, cursors, ledgers, managed_ledgers, versions, default_version, reuse
        )
        replay_table = rows.drop("export_id", "export_date", COMPLETE).join(identity, _TOPIC, "inner")
        findings = findings.unionByName(evicted)
    if snapshots is None:
        snapshots = spark.createDataFrame([], contract("replication_snapshots").spark_schema)
    if replay_table is None:
        replay_table = spark.createDataFrame([], contract("replication_cache_replay").spark_schema)

    def both_sides(df: DataFrame) -> DataFrame:
        # a pair reads the entries/markers of the source and the target topic: whole only if both are
        source = with_entries_complete(df, complete, "source_cluster")
        target = with_entries_complete(source.withColumnRenamed(COMPLETE, "_src"), complete, "target_cluster")
        return target.withColumn(COMPLETE, F.col("_src") & F.col(COMPLETE)).drop("_src")

    return {
        "replication_positions": both_sides(positions.join(source_ids, ["source_cluster", "topic"], "inner")),
        "replication_failover_duplicates": both_sides(
            duplicates.join(source_ids, ["source_cluster", "topic"], "inner")
        ),
        "replication_findings": findings.join(ids, _TOPIC, "inner"),
        "replication_snapshots": snapshots,
        "replication_cache_replay": replay_table,
    }


def _materialise(df: DataFrame) -> DataFrame:
    """Compute ``df`` once, now, for the several output tables that read it (driver-side).

    ``localCheckpoint`` also cuts the lineage: the plans built on it are analysed and optimised without
    the (wide) plan that produced it.
    """
    return df.localCheckpoint()


def run_replication_stage(
    tables: DeltaTables, run_date: dt.date, default_version: str
) -> tuple[dict[str, int], dict[str, int]]:
    """Compute and write the stage's tables for ``run_date``; return (rows written, table versions).

    The run date's inputs but the entry dump (small: one export's metadata) and the intermediates
    :func:`replication_outputs` reads more than once are ``localCheckpoint``-ed (:func:`_materialise`):
    the five tables are five writes, i.e. five queries, and without that each one recomputed the shared
    parts and Spark analysed and optimised plans of hundreds of thousands of characters (tier ``s``, issue
    10: 224 Spark jobs -> 157, the stage's CPU time 108 s -> 58 s;
    ``benchmarks/results/replication_stage_before_after.json``). The entry dump is read from its Delta files
    by its two readers, each scoping it to a few topics first (tier ``l``: checkpointing its 26M rows took
    94 s and most of the stage's garbage collection).

    Every table's ``run_date`` partition is replaced, also by an empty result (a rerun leaves no stale rows);
    all tables go in one ``write_all``. ``default_version`` is the broker version of clusters whose export
    names none (it selects their snapshot-cache generation).
    """
    day = {"export_date": run_date}
    raw = tables.read("managed_ledgers", partition_filter=day)
    # every topic carries its cluster's version: one plan for every cluster (docs §0.3)
    versions = day_cluster_versions(tables, day, default_version)
    managed = _materialise(with_cluster_version(raw, versions, default_version))
    ledgers, cursors = (_materialise(tables.read(n, partition_filter=day)) for n in ("ledgers", "cursors"))
    markers, consumers = (
        None if df is None else _materialise(df)
        for df in (read_day(tables, n, day) for n in ("markers", "consumers"))
    )
    # not checkpointed (see the docstring): its two readers scope it to a few topics first
    entries = read_day(tables, "entries", day)
    outputs = replication_outputs(
        managed,
        ledgers,
        cursors,
        markers,
        entries,
        consumers,
        versions,
        default_version,
        reuse=_materialise,
    )
    rows, versions_written = write_day_outputs(
        tables, day, {name: outputs[name] for name in OUTPUT_TABLES}, stage="replication"
    )
    return rows, versions_written
