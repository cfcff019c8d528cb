"""The nightly audit stages: failover assignment (docs §6), transactions (§8), schema compatibility (§9).

Driver-side orchestration only (reads, writes); the logic is the pure transforms of
:mod:`pulsar_model.failover`, :mod:`pulsar_model.transactions` and :mod:`pulsar_model.schema_compat`,
called once with ``pulsar_version=None``: every input row carries its cluster's version
(:mod:`pulsar_model.pipeline.stages.cluster_versions`: the ``managed_ledgers.pulsar_version`` of the run
date, the configured default when null or when the cluster has no managed-ledger row) and the transforms
branch on its flags, so one plan serves every cluster whatever mix of versions the export has (docs §0.3).

Each ``run_*_stage`` reads the run date's partition of its inputs and replaces that ``export_date``
partition of each output table, also by an empty result, so a rerun of a date leaves no stale rows:

* failover: ``consumers`` (+ ``cursors`` for the subscription type and the broker's
  ``activeConsumerName``) -> ``failover_assignments``, ``failover_balance``, ``failover_what_ifs``;
* transactions: ``entries`` (transaction markers are entries with ``marker_type`` 20-22 and the txn id,
  so ``markers`` is not needed) + ``ledgers``/``managed_ledgers`` -> ``transactions``,
  ``transaction_holdback``;
* schema: ``schema_versions`` -> ``schema_verdicts``, ``schema_compatibility``.

No export carries the broker settings ``activeConsumerFailoverConsistentHashing`` and
``schemaCompatibilityStrategy`` or the namespace/topic schema policies: they are parameters with the
broker defaults (``false``, ``FULL``), so every topic resolves its strategy at the broker level (§9.3).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping
from typing import Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pulsar_model.engine.entry_coverage import topic_entries_complete, with_entries_complete
from pulsar_model.failover import (
    active_consumers,
    compare_with_stats,
    failover_balance,
    failover_what_ifs,
)
from pulsar_model.pipeline.stages.cluster_versions import day_cluster_versions, with_cluster_version
from pulsar_model.schema_compat import (
    BROKER_DEFAULT_STRATEGY,
    compatibility_matrix,
    effective_strategies,
    registration_verdicts,
)
from pulsar_model.tables.delta_io import DeltaTables
from pulsar_model.tables.stage_io import read_day, write_day_outputs
from pulsar_model.transactions import STATE_OPEN, max_read_positions, transaction_states

log = logging.getLogger(__name__)

FAILOVER_TABLES: Final = ("failover_assignments", "failover_balance", "failover_what_ifs")
TRANSACTION_TABLES: Final = ("transactions", "transaction_holdback")
SCHEMA_TABLES: Final = ("schema_verdicts", "schema_compatibility")

#: Failover selection applies to these subscriptions (docs §6.2; Exclusive has a single consumer).
FAILOVER: Final = "Failover"
#: Broker ``activeConsumerFailoverConsistentHashing`` default (docs §6.2).
DEFAULT_CONSISTENT_HASHING: Final = False
#: Age from which an open transaction is reported as long-open. A project choice (an hour of holding
#: every later entry back from dispatch, docs §8.4), not a broker setting.
DEFAULT_LONG_OPEN_THRESHOLD_MS: Final = 3_600_000

_EXPORT = ("export_id", "export_date")
_TOPIC = ("cluster", "topic")

Rows = dict[str, int]


# --- shared helpers -------------------------------------------------------------------------------------


def _cluster_versions(
    tables: DeltaTables, day: Mapping[str, dt.date], default_version: str
) -> dict[str, str] | None:
    """Each cluster's broker version on the run date (:func:`cluster_versions`)."""
    return day_cluster_versions(tables, day, default_version)


def _versioned(
    outputs: Mapping[str, DataFrame], versions: Mapping[str, str] | None, default_version: str
) -> dict[str, list[DataFrame]]:
    """Every output with ``pulsar_version``: the version of its row's cluster."""
    return {name: [with_cluster_version(df, versions, default_version)] for name, df in outputs.items()}


def _write(
    tables: DeltaTables,
    day: Mapping[str, dt.date],
    names: tuple[str, ...],
    outputs: Mapping[str, list[DataFrame]],
    stage: str,
) -> tuple[Rows, Rows]:
    """Replace the run date's partition of every table in ``names`` (empty when no output)."""
    return write_day_outputs(tables, day, {name: outputs.get(name, []) for name in names}, stage=stage)


# --- failover (docs §6) ---------------------------------------------------------------------------------


def failover_consumers(consumers: DataFrame, cursors: DataFrame | None) -> DataFrame:
    """The consumers of Failover subscriptions: ``consumers.subscription_type`` (client config), else the
    stats type of the subscription's cursor (``cursors.subscription_type``). Adds ``subscription_type``.

    One row per input consumer row of a Failover subscription. Pure and lazy.
    """
    keys = [*_TOPIC, *_EXPORT]
    sub_type: Column = F.col("subscription_type")
    if cursors is not None:
        stats = cursors.select(
            *keys,
            F.col("cursor_name").alias("subscription"),
            F.col("subscription_type").alias("_stats_type"),
        )
        consumers = consumers.join(stats, on=[*keys, "subscription"], how="left")
        sub_type = F.coalesce(F.col("subscription_type"), F.col("_stats_type"))
    kept = [c for c in consumers.columns if c not in ("subscription_type", "_stats_type")]
    return consumers.where(sub_type == F.lit(FAILOVER)).select(*kept, sub_type.alias("subscription_type"))


def run_failover_stage(
    tables: DeltaTables,
    run_date: dt.date,
    default_version: str,
    *,
    consistent_hashing: bool = DEFAULT_CONSISTENT_HASHING,
) -> tuple[Rows, Rows]:
    """Active consumer, balance and what-ifs of every Failover subscription on ``run_date`` (docs §6).

    ``consistent_hashing`` is the brokers' ``activeConsumerFailoverConsistentHashing`` (not exported;
    versions without PIP-392 ignore it). Returns (rows written per table, table versions).
    """
    day = {"export_date": run_date}
    consumers = read_day(tables, "consumers", day)
    outputs: dict[str, list[DataFrame]] = {}
    if consumers is not None:
        cursors = read_day(tables, "cursors", day)
        versions = _cluster_versions(tables, day, default_version)
        failover = with_cluster_version(failover_consumers(consumers, cursors), versions, default_version)
        assignments = active_consumers(failover, consistent_hashing, None).drop("pulsar_version")
        if cursors is not None:
            assignments = compare_with_stats(assignments, cursors)
        # Every row of ``failover`` is of a Failover subscription (failover_consumers keeps only those) and
        # every assignment comes from those rows: the type is known without a join back. The assignments
        # and the balance both read the grouped pass: materialised once, on the executors.
        assignments = assignments.withColumn("subscription_type", F.lit(FAILOVER)).localCheckpoint()
        balance = failover_balance(assignments).withColumnRenamed("base_topic", "topic")
        outputs = _versioned(
            {
                "failover_assignments": assignments.select(
                    "*", F.lit(consistent_hashing).alias("consistent_hashing")
                ),
                "failover_balance": balance,
                "failover_what_ifs": failover_what_ifs(failover, consistent_hashing, None),
            },
            versions,
            default_version,
        )
    return _write(tables, day, FAILOVER_TABLES, outputs, "failover")


# --- transactions (docs §8) -----------------------------------------------------------------------------


def run_transactions_stage(
    tables: DeltaTables,
    run_date: dt.date,
    default_version: str,
    *,
    now: dt.datetime | None = None,
    long_open_threshold_ms: int = DEFAULT_LONG_OPEN_THRESHOLD_MS,
) -> tuple[Rows, Rows]:
    """Transactions and the maxReadPosition hold-back of every topic with transactional entries (docs §8).

    ``now`` (UTC) dates the open transactions; None = each topic's ``managed_ledgers.exported_at``
    (the first entries' publish times are compared with it). Open transactions older than
    ``long_open_threshold_ms`` are flagged ``is_long_open``. Returns (rows per table, table versions).
    """
    day = {"export_date": run_date}
    entries = read_day(tables, "entries", day)
    outputs: dict[str, list[DataFrame]] = {}
    if entries is not None:
        managed = tables.read("managed_ledgers", partition_filter=day)
        ledgers = tables.read("ledgers", partition_filter=day)
        has_txn = entries.where(F.col("txnid_most_bits").isNotNull()).select(*_TOPIC, *_EXPORT).distinct()
        versions = _cluster_versions(tables, day, default_version)
        txn_entries = with_cluster_version(
            entries.join(has_txn, on=[*_TOPIC, *_EXPORT], how="left_semi"), versions, default_version
        )
        now_ms = (
            F.lit(int(now.timestamp() * 1000)).cast("long")
            if now is not None
            else F.floor(F.unix_micros(F.col("exported_at")) / F.lit(1000)).cast("long")
        )
        exported = managed.select(*_TOPIC, *_EXPORT, "exported_at")
        states = transaction_states(txn_entries.drop("pulsar_version")).join(
            exported, on=[*_TOPIC, *_EXPORT], how="left"
        )
        age = F.when(F.col("state") == STATE_OPEN, now_ms - F.col("first_publish_time_ms"))
        transactions = states.select(
            *[c for c in states.columns if c != "exported_at"],
            age.alias("open_age_ms"),
            F.when(age.isNotNull(), age > F.lit(int(long_open_threshold_ms))).alias("is_long_open"),
            F.lit(int(long_open_threshold_ms)).cast("long").alias("long_open_threshold_ms"),
        )
        holdback = max_read_positions(txn_entries, ledgers, managed, pulsar_version=None)
        complete = topic_entries_complete(managed)
        outputs = _versioned(
            {
                "transactions": with_entries_complete(transactions, complete),
                "transaction_holdback": with_entries_complete(holdback, complete),
            },
            versions,
            default_version,
        )
    return _write(tables, day, TRANSACTION_TABLES, outputs, "transactions")


# --- schema compatibility (docs §9) ---------------------------------------------------------------------


def run_schema_stage(
    tables: DeltaTables,
    run_date: dt.date,
    default_version: str,
    *,
    broker_strategy: str = BROKER_DEFAULT_STRATEGY,
) -> tuple[Rows, Rows]:
    """Registration verdicts and the version-pair matrix of every topic's schemas (docs §9).

    The strategy is resolved per topic by :func:`pulsar_model.schema_compat.effective_strategies` with no
    topic/namespace policy (none is exported) and ``broker_strategy`` (broker ``schemaCompatibilityStrategy``,
    default FULL), and the registry's rules (how an identical version is found) by the cluster's version.
    Returns (rows per table, table versions).
    """
    day = {"export_date": run_date}
    versions_df = read_day(tables, "schema_versions", day)
    outputs: dict[str, list[DataFrame]] = {}
    if versions_df is not None:
        versions = _cluster_versions(tables, day, default_version)
        schemas = with_cluster_version(versions_df, versions, default_version)
        topics = schemas.select(*_TOPIC, "pulsar_version").distinct()
        strategies = effective_strategies(topics, broker_strategy, None).drop("pulsar_version")
        verdicts = registration_verdicts(schemas, strategies, pulsar_version=None).join(
            strategies.select(*_TOPIC, "strategy_source"), on=list(_TOPIC), how="left"
        )
        outputs = _versioned(
            {
                "schema_verdicts": verdicts,
                "schema_compatibility": compatibility_matrix(schemas.drop("pulsar_version")),
            },
            versions,
            default_version,
        )
    return _write(tables, day, SCHEMA_TABLES, outputs, "schema")
