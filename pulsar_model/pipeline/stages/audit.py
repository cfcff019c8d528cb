"""The nightly audit stages: failover assignment (docs §6), transactions (§8), schema compatibility (§9).

Driver-side orchestration only (reads, one tiny ``distinct`` of the broker versions present, writes); the
logic is the pure transforms of :mod:`pulsar_model.failover`, :mod:`pulsar_model.transactions` and
:mod:`pulsar_model.schema_compat`, applied once per broker version so that every cluster gets its own
version's semantics. A cluster's version is its ``managed_ledgers.pulsar_version`` on the run date (the
configured default when null or when the cluster has no managed-ledger row).

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
from collections.abc import Callable, Mapping
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


def _cluster_versions(tables: DeltaTables, day: Mapping[str, dt.date]) -> DataFrame | None:
    """One row per cluster: the broker version its managed-ledger rows of the day name (max if several)."""
    managed = read_day(tables, "managed_ledgers", day)
    if managed is None:
        return None
    return managed.groupBy("cluster").agg(F.max("pulsar_version").alias("_cluster_version"))


def _with_version(df: DataFrame, versions: DataFrame | None, default_version: str) -> DataFrame:
    """Add ``pulsar_version``: the cluster's broker version, else ``default_version``."""
    if versions is None:
        return df.select("*", F.lit(default_version).alias("pulsar_version"))
    joined = df.join(F.broadcast(versions), on="cluster", how="left")
    version = F.coalesce(F.col("_cluster_version"), F.lit(default_version))
    return joined.select(*[F.col(f"`{c}`") for c in df.columns], version.alias("pulsar_version"))


def _versions_present(df: DataFrame) -> list[str]:
    """The distinct broker versions of ``df`` (a handful of strings: one tiny driver query)."""
    return sorted(str(r[0]) for r in df.select("pulsar_version").distinct().collect())


def _per_version(
    df: DataFrame, run: Callable[[DataFrame, str], dict[str, DataFrame]]
) -> dict[str, list[DataFrame]]:
    """``run(df restricted to one version, version)`` for every version present, outputs tagged."""
    out: dict[str, list[DataFrame]] = {}
    for version in _versions_present(df):
        part = df.where(F.col("pulsar_version") == F.lit(version))
        for name, result in run(part, version).items():
            out.setdefault(name, []).append(result.select("*", F.lit(version).alias("pulsar_version")))
    return out


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
        failover = _with_version(
            failover_consumers(consumers, cursors), _cluster_versions(tables, day), default_version
        )

        def run(part: DataFrame, version: str) -> dict[str, DataFrame]:
            assignments = active_consumers(part, consistent_hashing, version)
            if cursors is not None:
                assignments = compare_with_stats(assignments, cursors)
            sub_types = part.select(*_TOPIC, *_EXPORT, "subscription", "subscription_type").distinct()
            assignments = assignments.join(sub_types, on=[*_TOPIC, *_EXPORT, "subscription"], how="left")
            balance = failover_balance(assignments).withColumnRenamed("base_topic", "topic")
            return {
                "failover_assignments": assignments.select(
                    "*", F.lit(consistent_hashing).alias("consistent_hashing")
                ),
                "failover_balance": balance,
                "failover_what_ifs": failover_what_ifs(part, consistent_hashing, version),
            }

        outputs = _per_version(failover, run)
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
        txn_entries = _with_version(
            entries.join(has_txn, on=[*_TOPIC, *_EXPORT], how="left_semi"),
            _cluster_versions(tables, day),
            default_version,
        )
        now_ms = (
            F.lit(int(now.timestamp() * 1000)).cast("long")
            if now is not None
            else F.floor(F.unix_micros(F.col("exported_at")) / F.lit(1000)).cast("long")
        )
        exported = managed.select(*_TOPIC, *_EXPORT, "exported_at")

        def run(part: DataFrame, version: str) -> dict[str, DataFrame]:
            states = transaction_states(part).join(exported, on=[*_TOPIC, *_EXPORT], how="left")
            age = F.when(F.col("state") == STATE_OPEN, now_ms - F.col("first_publish_time_ms"))
            transactions = states.select(
                *[c for c in states.columns if c != "exported_at"],
                age.alias("open_age_ms"),
                F.when(age.isNotNull(), age > F.lit(int(long_open_threshold_ms))).alias("is_long_open"),
                F.lit(int(long_open_threshold_ms)).cast("long").alias("long_open_threshold_ms"),
            )
            holdback = max_read_positions(part, ledgers, managed, pulsar_version=version)
            complete = topic_entries_complete(managed)
            return {
                "transactions": with_entries_complete(transactions, complete),
                "transaction_holdback": with_entries_complete(holdback, complete),
            }

        outputs = _per_version(txn_entries, run)
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
        schemas = _with_version(versions_df, _cluster_versions(tables, day), default_version)

        def run(part: DataFrame, version: str) -> dict[str, DataFrame]:
            topics = part.select(*_TOPIC).distinct()
            strategies = effective_strategies(topics, broker_strategy, version)
            verdicts = registration_verdicts(part, strategies, pulsar_version=version).join(
                strategies.select(*_TOPIC, "strategy_source"), on=list(_TOPIC), how="left"
            )
            return {"schema_verdicts": verdicts, "schema_compatibility": compatibility_matrix(part)}

        outputs = _per_version(schemas, run)
    return _write(tables, day, SCHEMA_TABLES, outputs, "schema")
