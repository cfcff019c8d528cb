"""The nightly ``replication`` stage: replicated-subscription translation, failover duplicates, findings.

Driver-side orchestration only (reads, writes); the logic is the pure transforms of
:mod:`pulsar_model.replication` over the run date's tables of **all clusters at once** (a replicated
subscription spans clusters, SPEC §4). Output tables, partitioned by ``export_date``:

* ``replication_positions`` - one row per (topic, subscription, source cluster, target cluster): the
  expected remote mark-delete from the source's last UPDATE beside the target's actual one, and the status
  (:func:`pulsar_model.replication.translation.position_translation`, §4.4-§4.8);
* ``replication_failover_duplicates`` - per the same pairs: what a failover would redeliver although the
  source acknowledged it, exact from the entry dump or bounded from the snapshots
  (:func:`pulsar_model.replication.duplicates.failover_duplicates`, §4.8);
* ``replication_findings`` - one row per finding of the stall and risk detectors
  (:func:`pulsar_model.replication.detectors.replication_findings`);
* ``replication_snapshots`` - one row per (source cluster, topic, snapshot id): the snapshot protocol
  reassembled from the markers (:func:`pulsar_model.replication.snapshots.snapshot_assembly`, §4.3-§4.5);
  empty without a marker export.

Inputs: the run date's ``managed_ledgers``, ``ledgers``, ``cursors`` and, when they exist, ``markers``,
``entries`` (no entry dump: translation sees no UPDATE markers, duplicates fall back to the bounds, the
marker detectors are skipped) and ``consumers``. The semantics used here do not differ between the broker
versions SPEC §0.3 covers, so ``default_version`` is not needed by these tables.
"""

from __future__ import annotations

import datetime as dt
import logging

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pulsar_model.contracts import conform, contract
from pulsar_model.delta_io import DeltaTables, TableWrite
from pulsar_model.replication.detectors import replication_findings
from pulsar_model.replication.duplicates import failover_duplicates
from pulsar_model.replication.snapshots import snapshot_assembly
from pulsar_model.replication.translation import position_translation

log = logging.getLogger(__name__)

#: Output tables of the stage.
OUTPUT_TABLES = (
    "replication_positions",
    "replication_failover_duplicates",
    "replication_findings",
    "replication_snapshots",
)


def _read_day(tables: DeltaTables, name: str, day: dict[str, dt.date]) -> DataFrame | None:
    return tables.read(name, partition_filter=day) if tables.exists(name) else None


def replication_outputs(
    managed_ledgers: DataFrame,
    ledgers: DataFrame,
    cursors: DataFrame,
    markers: DataFrame | None,
    entries: DataFrame | None,
    consumers: DataFrame | None,
) -> dict[str, DataFrame]:
    """The stage's tables for one export (one row set per table, export identity attached). Pure and lazy.

    Without ``markers`` an empty marker frame stands in for the translation (no UPDATE was exported, so
    every active pair reads ``stalled``: nothing can be said about its translation).
    """
    spark = managed_ledgers.sparkSession
    marker_frame = markers
    if marker_frame is None:
        marker_frame = spark.createDataFrame([], contract("markers").spark_schema)
    ids = managed_ledgers.select("cluster", "topic", "export_id", "export_date")
    source_ids = ids.withColumnRenamed("cluster", "source_cluster")
    positions = position_translation(marker_frame, cursors, ledgers, managed_ledgers, consumers)
    duplicates = failover_duplicates(cursors, entries, markers, ledgers, managed_ledgers)
    findings = replication_findings(markers, cursors, entries, ledgers, managed_ledgers, consumers)
    snapshots = snapshot_assembly(markers, cursors=cursors) if markers is not None else None
    if snapshots is None:
        snapshots = spark.createDataFrame([], contract("replication_snapshots").spark_schema)
    return {
        "replication_positions": positions.join(source_ids, ["source_cluster", "topic"], "inner"),
        "replication_failover_duplicates": duplicates.join(source_ids, ["source_cluster", "topic"], "inner"),
        "replication_findings": findings.join(ids, ["cluster", "topic"], "inner"),
        "replication_snapshots": snapshots,
    }


def run_replication_stage(
    tables: DeltaTables, run_date: dt.date, default_version: str
) -> tuple[dict[str, int], dict[str, int]]:
    """Compute and write the stage's tables for ``run_date``; return (rows written, table versions).

    Every table's ``run_date`` partition is replaced, also by an empty result (a rerun leaves no stale rows).
    ``default_version`` is accepted for the stage signature (see the module docstring).
    """
    day = {"export_date": run_date}
    managed = tables.read("managed_ledgers", partition_filter=day).withColumn(
        "pulsar_version", F.coalesce("pulsar_version", F.lit(default_version))
    )
    outputs = replication_outputs(
        managed,
        tables.read("ledgers", partition_filter=day),
        tables.read("cursors", partition_filter=day),
        _read_day(tables, "markers", day),
        _read_day(tables, "entries", day),
        _read_day(tables, "consumers", day),
    )
    writes = []
    for name in OUTPUT_TABLES:
        c = contract(name)
        tables.create(name, c.spark_schema, c.partitioned_by, description=c.description)
        writes.append(
            TableWrite(
                table=name,
                df=conform(outputs[name], name),
                mode="replace_partitions",
                partition_values=day,
                partition_by=c.partitioned_by,
            )
        )
    versions_written = tables.write_all(writes)
    rows = {name: tables.count_rows(name, partition_filter=day) for name in OUTPUT_TABLES}
    log.info("replication stage %s: rows %s", run_date, rows)
    return rows, versions_written
