"""Replicated-subscription position translation across clusters (docs §4.4, §4.6, §4.8).

A replicated subscription's mark-delete on a *source* cluster reaches a *target* cluster only through the
UPDATE markers (type 13) the source writes when its mark-delete passes a cached snapshot (§4.6); the target
applies the position listed for itself in the UPDATE (the **last** ``ClusterMessageId`` naming it wins,
§4.4 ``receiveSubscriptionUpdated``) as a cumulative ack. This module reads that chain back from the
exported markers and cursors of all clusters at once:

* :func:`replicated_pairs` - one row per (topic, subscription, source cluster, target cluster);
* :func:`subscription_updates` - the UPDATE markers a source wrote, one row per named cluster;
* :func:`position_translation` - per pair: the source mark-delete, the UPDATE and snapshot that apply,
  the target position the broker sets (expected) beside the target cursor's exported one (actual), whether
  the UPDATE reached the target, and ``in_sync`` / ``lagging`` / ``stalled`` / ``inactive``;
* :func:`existing_entries_between` - entries the ledger list says exist in ``(lower, upper]`` minus acked
  ranges (docs §0.2), shared by the duplicate bounds and the detectors.

Every input holds one export per (cluster, topic) (a run date); extra columns are ignored. Pure and lazy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pulsar_model.engine.columns import POSITION_SQL_TYPE, as_position
from pulsar_model.errors import ContractError

__all__ = [
    "CURSOR_KIND_SUBSCRIPTION",
    "DEFAULT_STALL_AFTER_SECONDS",
    "DEFAULT_STALL_LEAD_ENTRIES",
    "MARKER_SNAPSHOT",
    "MARKER_SNAPSHOT_REQUEST",
    "MARKER_SNAPSHOT_RESPONSE",
    "MARKER_UPDATE",
    "STATUS_INACTIVE",
    "STATUS_IN_SYNC",
    "STATUS_LAGGING",
    "STATUS_STALLED",
    "existing_entries_between",
    "last_cluster_position",
    "position_translation",
    "replicated_pairs",
    "subscription_updates",
]

#: ``MarkerType`` numbers of the replicated-subscription markers (docs §4.3).
MARKER_SNAPSHOT_REQUEST: Final = 10
MARKER_SNAPSHOT_RESPONSE: Final = 11
MARKER_SNAPSHOT: Final = 12
MARKER_UPDATE: Final = 13

#: ``cursors.cursor_kind`` of a subscription (replicators, ``__compaction``, dedup never translate).
CURSOR_KIND_SUBSCRIPTION: Final = "subscription"

#: Translation statuses (see :func:`position_translation`).
STATUS_IN_SYNC: Final = "in_sync"
STATUS_LAGGING: Final = "lagging"
STATUS_STALLED: Final = "stalled"
STATUS_INACTIVE: Final = "inactive"

#: Default stall thresholds: with ``replicatedSubscriptionsSnapshotFrequencyMillis`` = 1 s (docs §4.2) an
#: active subscription normally sees a new UPDATE within seconds; ten minutes without one while the source
#: mark-delete moved on, or a source mark-delete this many entries past the last UPDATE, means snapshots
#: stopped completing or the cache no longer returns them (§4.8 "other sources of duplicates").
DEFAULT_STALL_AFTER_SECONDS: Final = 600
DEFAULT_STALL_LEAD_ENTRIES: Final = 1000

MARKER_COLUMNS: Final = (
    "cluster",
    "topic",
    "position",
    "marker_type",
    "publish_time_ms",
    "replicated_from",
    "snapshot_id",
    "local_position",
    "clusters",
    "subscription_name",
)
CURSOR_COLUMNS: Final = (
    "cluster",
    "topic",
    "cursor_name",
    "cursor_kind",
    "is_replicated",
    "mark_delete_position",
    "individually_deleted",
)
ML_COLUMNS: Final = (
    "cluster",
    "topic",
    "exported_at",
    "last_confirmed_entry",
    "current_ledger_id",
    "current_ledger_entries",
)
LEDGER_COLUMNS: Final = ("cluster", "topic", "ledger_id", "entries")
CONSUMER_COLUMNS: Final = ("cluster", "topic", "subscription")
PAIR_KEY: Final = ("topic", "subscription", "source_cluster", "target_cluster")
_RANGES_SQL_TYPE: Final = f"array<struct<lower:{POSITION_SQL_TYPE},upper:{POSITION_SQL_TYPE}>>"


def require(df: DataFrame, columns: Sequence[str], what: str) -> None:
    """Raise :class:`ContractError` naming the columns ``df`` lacks."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ContractError(
            f"{what} is missing column(s) {', '.join(missing)}; it needs at least {', '.join(columns)}"
        )


def _opt(df: DataFrame, name: str, sql_type: str) -> Column:
    """Column ``name`` of ``df`` or a typed null when the frame does not carry it."""
    return F.col(name).cast(sql_type) if name in df.columns else F.lit(None).cast(sql_type)


def last_cluster_position(clusters: Column, cluster: Column) -> Column:
    """The position listed for ``cluster`` in a marker's ``clusters`` array; the **last** match wins
    (docs §4.4 ``receiveSubscriptionUpdated``); null when the cluster is not listed."""
    matching = F.filter(clusters, lambda c: c["cluster"] == cluster)
    return F.when(F.size(matching) > 0, as_position(F.try_element_at(matching, F.lit(-1))["position"]))


def _clusters_key(clusters: Column) -> Column:
    """A canonical text of a ``clusters`` array (sorted by cluster, then position) for equality joins."""
    return F.to_json(F.array_sort(clusters))


# --- entry counting from the ledger list ------------------------------------------------------------------


def _entries_in(lid: Column, n: Column, lo: Column, hi: Column) -> Column:
    """Entries ``0..n-1`` of ledger ``lid`` inside the open-closed range ``(lo, hi]``."""
    first = F.when(lid < lo["ledger_id"], n).when(lid == lo["ledger_id"], lo["entry_id"] + 1).otherwise(0)
    last = (
        F.when(lid > hi["ledger_id"], F.lit(-1))
        .when(lid == hi["ledger_id"], F.least(hi["entry_id"], n - 1))
        .otherwise(n - 1)
    )
    return F.greatest(last - F.greatest(first, F.lit(0)) + 1, F.lit(0)).cast("long")


def existing_entries_between(
    requests: DataFrame,
    ledgers: DataFrame,
    managed_ledgers: DataFrame,
    keys: Sequence[str],
    *,
    out: str = "entries",
    acked_out: str | None = None,
    few_requests: bool = False,
) -> DataFrame:
    """Add ``out``: entries the ledger list says exist in ``(lower, upper]`` minus those inside ``acked``
    (and ``acked_out``, when named: those inside ``acked``, each range counted on its own).

    ``few_requests``: the requests are metadata-sized (e.g. two per replicated pair), so their counts are
    broadcast back onto them instead of a join that shuffles the requests first.

    One row per request (every request column kept). ``requests`` needs ``cluster, topic``, the unique
    request ``keys``, ``lower`` and ``upper`` (positions) and ``acked`` (``array<struct<lower, upper>>`` of
    disjoint open-closed ranges, null = none). The open ledger holds ``current_ledger_entries`` (it is listed
    0/0, docs §0.2); trimmed ledgers hold nothing. 0 when ``lower >= upper``; null when a bound is null.
    Pure and lazy.
    """
    require(requests, ["cluster", "topic", *keys, "lower", "upper", "acked"], "requests")
    require(ledgers, LEDGER_COLUMNS, "ledgers")
    ml = managed_ledgers.select(
        "cluster",
        "topic",
        F.col("current_ledger_id").cast("long").alias("_cur"),
        F.coalesce(F.col("current_ledger_entries").cast("long"), F.lit(0).cast("long")).alias("_cle"),
    )
    led = ledgers.select(
        "cluster",
        "topic",
        F.col("ledger_id").cast("long").alias("_lid"),
        F.coalesce(F.col("entries").cast("long"), F.lit(0).cast("long")).alias("_ent"),
    ).join(ml, ["cluster", "topic"], "left")
    led = led.select(
        "cluster",
        "topic",
        "_lid",
        F.when(F.col("_lid") == F.col("_cur"), F.col("_cle")).otherwise(F.col("_ent")).alias("_n"),
    )
    slim = requests.select(
        "cluster",
        "topic",
        *[F.col(k).alias(f"_k_{k}") for k in keys],
        as_position(F.col("lower")).alias("_lo"),
        as_position(F.col("upper")).alias("_hi"),
        F.coalesce(F.col("acked"), F.array()).alias("_acked"),
    ).where(F.col("_lo").isNotNull() & F.col("_hi").isNotNull() & (F.col("_lo") < F.col("_hi")))
    lo, hi, lid, n = F.col("_lo"), F.col("_hi"), F.col("_lid"), F.col("_n")
    pieces = slim.join(led, ["cluster", "topic"]).where((lid >= lo["ledger_id"]) & (lid <= hi["ledger_id"]))
    acked = F.aggregate(
        F.filter(F.col("_acked"), lambda r: r["lower"].isNotNull() & r["upper"].isNotNull()),
        F.lit(0).cast("long"),
        lambda acc, r: (
            acc
            + _entries_in(
                lid, n, F.greatest(lo, as_position(r["lower"])), F.least(hi, as_position(r["upper"]))
            )
        ),
    )
    counts = pieces.groupBy("cluster", "topic", *[f"_k_{k}" for k in keys]).agg(
        F.sum(_entries_in(lid, n, lo, hi) - acked).alias("_count"), F.sum(acked).alias("_acked_count")
    )
    renamed = counts.withColumnsRenamed({"cluster": "_k_cluster", "topic": "_k_topic"})
    joined = requests.join(
        F.broadcast(renamed) if few_requests else renamed,
        [F.col("cluster") == F.col("_k_cluster"), F.col("topic") == F.col("_k_topic")]
        + [F.col(k).eqNullSafe(F.col(f"_k_{k}")) for k in keys],
        "left",
    )
    known = F.col("lower").isNotNull() & F.col("upper").isNotNull()
    zero = F.lit(0).cast("long")
    return joined.select(
        *[F.col(f"`{c}`") for c in requests.columns if c not in (out, acked_out)],
        F.when(known, F.coalesce(F.col("_count"), zero)).alias(out),
        *([F.when(known, F.coalesce(F.col("_acked_count"), zero)).alias(acked_out)] if acked_out else []),
    )


# --- pairs and updates -----------------------------------------------------------------------------------


def replicated_pairs(cursors: DataFrame, managed_ledgers: DataFrame) -> DataFrame:
    """One row per (topic, subscription, source cluster, target cluster) (docs §4.2, §4.4).

    The source is every cluster where the subscription's cursor is a replicated subscription
    (``is_replicated``, ``cursor_kind = subscription``); the targets are the other clusters whose export
    has the topic (a missing target cursor is kept: the UPDATE would create it). Columns: the key,
    ``source_mark_delete_position``, ``source_individually_deleted``, ``source_consumer_count`` (stats),
    ``target_cursor_exists``, ``target_mark_delete_position``, ``target_individually_deleted``,
    ``target_is_replicated``, ``target_last_mark_delete_advanced_at``, ``target_last_confirmed_entry``,
    ``source_exported_at``, ``target_exported_at``. Pure and lazy.
    """
    require(cursors, CURSOR_COLUMNS, "cursors")
    require(managed_ledgers, ML_COLUMNS, "managed_ledgers")
    source = cursors.where(
        (F.col("cursor_kind") == CURSOR_KIND_SUBSCRIPTION) & F.coalesce(F.col("is_replicated"), F.lit(False))
    ).select(
        F.col("topic"),
        F.col("cursor_name").alias("subscription"),
        F.col("cluster").alias("source_cluster"),
        as_position(F.col("mark_delete_position")).alias("source_mark_delete_position"),
        F.col("individually_deleted").alias("source_individually_deleted"),
        _opt(cursors, "stats_consumer_count", "int").alias("source_consumer_count"),
    )
    source_ml = managed_ledgers.select(
        F.col("cluster").alias("source_cluster"),
        "topic",
        F.col("exported_at").alias("source_exported_at"),
        as_position(F.col("last_confirmed_entry")).alias("source_last_confirmed_entry"),
    )
    target_ml = managed_ledgers.select(
        F.col("cluster").alias("target_cluster"),
        "topic",
        F.col("exported_at").alias("target_exported_at"),
        as_position(F.col("last_confirmed_entry")).alias("target_last_confirmed_entry"),
    )
    target_cursor = cursors.where(F.col("cursor_kind") == CURSOR_KIND_SUBSCRIPTION).select(
        F.col("topic"),
        F.col("cursor_name").alias("subscription"),
        F.col("cluster").alias("target_cluster"),
        F.lit(True).alias("target_cursor_exists"),
        as_position(F.col("mark_delete_position")).alias("target_mark_delete_position"),
        F.col("individually_deleted").alias("target_individually_deleted"),
        F.col("is_replicated").alias("target_is_replicated"),
        _opt(cursors, "stats_last_mark_delete_advanced_at", "timestamp").alias(
            "target_last_mark_delete_advanced_at"
        ),
    )
    # the managed-ledger sides are one row per topic (metadata-sized): broadcast
    pairs = (
        source.join(F.broadcast(source_ml), ["source_cluster", "topic"], "inner")
        .join(F.broadcast(target_ml), ["topic"], "inner")
        .where(F.col("source_cluster") != F.col("target_cluster"))
        .join(target_cursor, ["topic", "subscription", "target_cluster"], "left")
    )
    return pairs.select(
        *PAIR_KEY,
        *[c for c in pairs.columns if c not in PAIR_KEY and c != "target_cursor_exists"],
        F.coalesce(F.col("target_cursor_exists"), F.lit(False)).alias("target_cursor_exists"),
    )


def subscription_updates(markers: DataFrame) -> DataFrame:
    """One row per (UPDATE marker written locally, cluster it names) (docs §4.4 ``localSubscriptionUpdated``).

    Only UPDATE markers (type 13) a cluster wrote itself (``replicated_from`` null) - copies that arrived
    from elsewhere are the other cluster's. Columns: ``source_cluster, topic, subscription,
    update_position, update_publish_time_ms, clusters, clusters_key, target_cluster, target_position``
    (the last entry for that cluster wins, §4.4). Pure and lazy.
    """
    require(markers, MARKER_COLUMNS, "markers")
    local_updates = markers.where(
        (F.col("marker_type") == MARKER_UPDATE)
        & F.col("replicated_from").isNull()
        & F.col("subscription_name").isNotNull()
    ).select(
        F.col("cluster").alias("source_cluster"),
        "topic",
        F.col("subscription_name").alias("subscription"),
        as_position(F.col("position")).alias("update_position"),
        F.col("publish_time_ms").cast("long").alias("update_publish_time_ms"),
        F.coalesce(F.col("clusters"), F.array()).alias("clusters"),
    )
    named = local_updates.select(
        "*",
        _clusters_key(F.col("clusters")).alias("clusters_key"),
        F.explode(F.array_distinct(F.transform(F.col("clusters"), lambda c: c["cluster"]))).alias(
            "target_cluster"
        ),
    )
    return named.select(
        "*", last_cluster_position(F.col("clusters"), F.col("target_cluster")).alias("target_position")
    )


def _last_updates(markers: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(per pair: the last UPDATE naming the target; per source subscription: count and last UPDATE)."""
    updates = subscription_updates(markers)
    src_key = ["source_cluster", "topic", "subscription"]
    newest = updates.groupBy(*src_key, "target_cluster").agg(
        F.max_by(
            F.struct(
                "update_position", "update_publish_time_ms", "clusters_key", "target_position", "clusters"
            ),
            F.col("update_position"),
        ).alias("_u")
    )
    per_pair = newest.select(
        *src_key,
        "target_cluster",
        F.col("_u.update_position").alias("applied_update_position"),
        F.col("_u.update_publish_time_ms").alias("applied_update_publish_time_ms"),
        F.col("_u.clusters_key").alias("_clusters_key"),
        F.col("_u.target_position").alias("expected_remote_mark_delete"),
    )
    local = markers.where(
        (F.col("marker_type") == MARKER_UPDATE)
        & F.col("replicated_from").isNull()
        & F.col("subscription_name").isNotNull()
    )
    per_source = local.groupBy(
        F.col("cluster").alias("source_cluster"), "topic", F.col("subscription_name").alias("subscription")
    ).agg(
        F.count(F.lit(1)).alias("updates_written"),
        F.max(as_position(F.col("position"))).alias("last_update_position"),
        F.max(F.col("publish_time_ms").cast("long")).alias("last_update_publish_time_ms"),
    )
    return per_pair, per_source


def _delivered_updates(markers: DataFrame) -> DataFrame:
    """UPDATE copies that arrived in a target: ``target_cluster, topic, subscription, source_cluster,
    _clusters_key, update_delivered_position`` (the newest copy with that payload)."""
    arrived = markers.where(
        (F.col("marker_type") == MARKER_UPDATE)
        & F.col("replicated_from").isNotNull()
        & F.col("subscription_name").isNotNull()
    )
    return arrived.groupBy(
        F.col("cluster").alias("target_cluster"),
        "topic",
        F.col("subscription_name").alias("subscription"),
        F.col("replicated_from").alias("source_cluster"),
        _clusters_key(F.coalesce(F.col("clusters"), F.array())).alias("_clusters_key"),
    ).agg(F.max(as_position(F.col("position"))).alias("update_delivered_position"))


def _snapshots(markers: DataFrame) -> DataFrame:
    """SNAPSHOT markers (type 12) a cluster wrote: ``source_cluster, topic, snapshot_id, snapshot_position,
    snapshot_local_position, clusters, _clusters_key`` (docs §4.5)."""
    return markers.where(
        (F.col("marker_type") == MARKER_SNAPSHOT) & F.col("replicated_from").isNull()
    ).select(
        F.col("cluster").alias("source_cluster"),
        "topic",
        "snapshot_id",
        as_position(F.col("position")).alias("snapshot_position"),
        as_position(F.col("local_position")).alias("snapshot_local_position"),
        F.coalesce(F.col("clusters"), F.array()).alias("clusters"),
        _clusters_key(F.coalesce(F.col("clusters"), F.array())).alias("_clusters_key"),
    )


def _applied_snapshots(per_pair: DataFrame, snapshots: DataFrame) -> DataFrame:
    """Per pair with an UPDATE: the snapshot it came from - the newest SNAPSHOT of the source written
    before the UPDATE with the same cluster positions (§4.6: the UPDATE copies the snapshot's clusters)."""
    # the pairs' side is metadata-sized (one row per pair): broadcast it, the snapshots stream through
    asked = per_pair.select(
        "source_cluster",
        "topic",
        "subscription",
        "target_cluster",
        "applied_update_position",
        "_clusters_key",
    )
    cand = F.broadcast(asked).join(snapshots, ["source_cluster", "topic", "_clusters_key"], "inner")
    cand = cand.where(F.col("snapshot_position") < F.col("applied_update_position"))
    return cand.groupBy("source_cluster", "topic", "subscription", "target_cluster").agg(
        F.max_by(F.struct("snapshot_id", "snapshot_local_position"), F.col("snapshot_position")).alias("_s")
    )


def _consumer_counts(consumers: DataFrame | None) -> DataFrame | None:
    if consumers is None:
        return None
    require(consumers, CONSUMER_COLUMNS, "consumers")
    return consumers.groupBy(F.col("cluster").alias("source_cluster"), "topic", "subscription").agg(
        F.count(F.lit(1)).cast("int").alias("_listed_consumers")
    )


def _seconds_between(later: Column, earlier_ms: Column) -> Column:
    """``later`` (timestamp) minus ``earlier_ms`` (epoch ms) in seconds (double)."""
    return (F.unix_millis(later) - earlier_ms).cast("double") / 1000.0


def position_translation(
    markers: DataFrame,
    cursors: DataFrame,
    ledgers: DataFrame,
    managed_ledgers: DataFrame,
    consumers: DataFrame | None = None,
    *,
    stall_after_seconds: int = DEFAULT_STALL_AFTER_SECONDS,
    stall_lead_entries: int = DEFAULT_STALL_LEAD_ENTRIES,
    materialise: Callable[[DataFrame], DataFrame] | None = None,
    pairs: DataFrame | None = None,
) -> DataFrame:
    """Expected vs actual remote mark-delete per (topic, subscription, source, target) (docs §4.4-§4.8).

    One row per :func:`replicated_pairs` row. From the source's own markers: ``updates_written`` and the
    last UPDATE it wrote for the subscription (``last_update_position``/``_publish_time_ms``); the last
    UPDATE that names the target (``applied_update_position``) and the target's position in it
    (``expected_remote_mark_delete``: what the broker sets on the target, the last entry for the target
    wins), the snapshot it came from (``applied_snapshot_id``, ``applied_snapshot_local_position``: the
    source's SNAPSHOT marker with the same cluster positions). From the target: ``update_delivered`` (the
    UPDATE with that payload is in the target's topic with ``replicated_from`` = source; a copy trimmed
    away on the target reads as not delivered), ``actual_remote_mark_delete`` (the exported cursor, null
    when the target has no such cursor), ``remote_behind_entries`` (existing target entries in
    ``(actual, expected]``), ``seconds_since_target_moved`` (target export time minus
    ``stats_last_mark_delete_advanced_at``). ``source_lead_entries``: source entries in ``(last UPDATE,
    source mark-delete]`` - consumption not yet translated. ``source_active``: the source has consumers
    (consumers table or stats) or wrote an UPDATE for the subscription.

    ``status`` (first that applies) with ``status_reason``:

    * ``inactive`` - the source is not active: nothing to translate from it;
    * ``stalled`` - no UPDATE naming the target, or the last UPDATE is older than ``stall_after_seconds``
      at the source's export time while the source mark-delete is past it, or ``source_lead_entries``
      exceeds ``stall_lead_entries``;
    * ``lagging`` - the UPDATE has not reached the target, the target has no cursor, or actual < expected;
    * ``in_sync`` - actual >= expected (a target consumer may have acked further).

    ``materialise`` (e.g. the driver's ``localCheckpoint``) is applied to the pairs with their UPDATEs and
    snapshots, which the result and both entry counts read; default: as they are. ``pairs``: the
    :func:`replicated_pairs` of ``cursors`` and ``managed_ledgers`` when the caller has them already (e.g.
    computed once for this and :func:`~pulsar_model.replication.duplicates.failover_duplicates`); default:
    computed here. Pure and lazy (with the defaults).
    """
    require(markers, MARKER_COLUMNS, "markers")
    if pairs is None:
        pairs = replicated_pairs(cursors, managed_ledgers)
    per_pair, per_source = _last_updates(markers)
    src_key = ["source_cluster", "topic", "subscription"]
    pair_cols = [*src_key, "target_cluster"]
    applied = _applied_snapshots(per_pair, _snapshots(markers))
    # per_source, per_pair, applied and listed have at most one row per replicated subscription or pair
    # (metadata-sized): broadcast, the pairs are not shuffled for each of them; the delivered UPDATEs are
    # one row per distinct payload that arrived (as many as UPDATEs) and keep adaptive execution
    df = (
        pairs.join(F.broadcast(per_source), src_key, "left")
        .join(F.broadcast(per_pair), pair_cols, "left")
        .join(_delivered_updates(markers), [*pair_cols, "_clusters_key"], "left")
        .join(F.broadcast(applied), pair_cols, "left")
    )
    listed = _consumer_counts(consumers)
    if listed is not None:
        df = df.join(F.broadcast(listed), src_key, "left")
    else:
        df = df.withColumn("_listed_consumers", F.lit(None).cast("int"))
    source_consumers = F.greatest(
        F.coalesce(F.col("_listed_consumers"), F.lit(0)), F.coalesce(F.col("source_consumer_count"), F.lit(0))
    )
    staged = df.select(
        *[c for c in df.columns if c not in ("_s", "_listed_consumers", "_clusters_key")],
        F.col("_s.snapshot_id").alias("applied_snapshot_id"),
        F.col("_s.snapshot_local_position").alias("applied_snapshot_local_position"),
        source_consumers.cast("int").alias("source_consumers"),
        F.coalesce(F.col("updates_written"), F.lit(0).cast("long")).alias("_updates"),
        # counting requests for the ledger arithmetic
        F.col("source_cluster").alias("_lead_cluster"),
        F.col("target_cluster").alias("_behind_cluster"),
    )
    if materialise is not None:
        staged = materialise(staged)
    lead = staged.select(
        F.col("_lead_cluster").alias("cluster"),
        F.col("topic"),
        *[F.col(k).alias(f"_p_{k}") for k in PAIR_KEY],
        F.lit("lead").alias("_p_count"),
        F.col("last_update_position").alias("lower"),
        F.when(
            F.col("last_update_position").isNotNull(),
            F.greatest(F.col("source_mark_delete_position"), F.col("last_update_position")),
        ).alias("upper"),
        F.lit(None).cast(_RANGES_SQL_TYPE).alias("acked"),
    )
    behind = staged.select(
        F.col("_behind_cluster").alias("cluster"),
        F.col("topic"),
        *[F.col(k).alias(f"_p_{k}") for k in PAIR_KEY],
        F.lit("behind").alias("_p_count"),
        F.col("target_mark_delete_position").alias("lower"),
        F.greatest(F.col("target_mark_delete_position"), F.col("expected_remote_mark_delete")).alias("upper"),
        F.lit(None).cast(_RANGES_SQL_TYPE).alias("acked"),
    )
    pkeys = [f"_p_{k}" for k in PAIR_KEY]
    # both counts of a pair in one pass over the ledger list: one request per (pair, count)
    counted = existing_entries_between(
        lead.unionByName(behind), ledgers, managed_ledgers, [*pkeys, "_p_count"], out="_n", few_requests=True
    )
    counts = counted.groupBy(*pkeys).agg(
        *[F.max(F.when(F.col("_p_count") == k, F.col("_n"))).alias(f"_{k}") for k in ("lead", "behind")]
    )
    # one row per pair (metadata-sized): broadcast, the staged pairs are not shuffled for it
    on = [F.col(k) == F.col(f"_p_{k}") for k in PAIR_KEY]
    joined = staged.join(F.broadcast(counts), on, "left").drop(*pkeys)
    expected, actual = F.col("expected_remote_mark_delete"), F.col("actual_remote_mark_delete")
    delivered = F.col("update_delivered_position").isNotNull()
    since_update = _seconds_between(F.col("source_exported_at"), F.col("last_update_publish_time_ms"))
    md_past_update = F.col("source_mark_delete_position") > F.col("last_update_position")
    lead_col = F.coalesce(F.col("_lead"), F.lit(0).cast("long"))
    active = (F.col("source_consumers") > 0) | (F.col("_updates") > 0)
    with_actual = joined.select(
        "*",
        F.when(F.col("target_cursor_exists"), F.col("target_mark_delete_position")).alias(
            "actual_remote_mark_delete"
        ),
    )
    reason = (
        F.when(~active, F.lit("source has no consumers and wrote no UPDATE for the subscription"))
        .when(expected.isNull(), F.lit("source wrote no UPDATE naming the target cluster"))
        .when(
            (since_update > F.lit(stall_after_seconds)) & md_past_update,
            F.lit(
                f"last UPDATE older than {stall_after_seconds}s while the source mark-delete moved past it"
            ),
        )
        .when(
            lead_col > F.lit(stall_lead_entries),
            F.lit(f"source mark-delete more than {stall_lead_entries} entries past the last UPDATE"),
        )
        .when(~F.col("target_cursor_exists"), F.lit("target has no cursor for the subscription"))
        .when(~delivered, F.lit("UPDATE not (yet) in the target's topic"))
        .when(actual < expected, F.lit("target mark-delete behind the UPDATE's position"))
        .otherwise(F.lit("target mark-delete at or past the UPDATE's position"))
    )
    status = (
        F.when(~active, F.lit(STATUS_INACTIVE))
        .when(
            expected.isNull()
            | ((since_update > F.lit(stall_after_seconds)) & md_past_update)
            | (lead_col > F.lit(stall_lead_entries)),
            F.lit(STATUS_STALLED),
        )
        .when(~F.col("target_cursor_exists") | ~delivered | (actual < expected), F.lit(STATUS_LAGGING))
        .otherwise(F.lit(STATUS_IN_SYNC))
    )
    return with_actual.select(
        *PAIR_KEY,
        F.col("source_mark_delete_position"),
        F.coalesce(F.size(F.col("source_individually_deleted")), F.lit(0)).alias(
            "source_individually_deleted_ranges"
        ),
        F.col("source_consumers"),
        active.alias("source_active"),
        F.col("_updates").alias("updates_written"),
        F.col("last_update_position"),
        F.col("last_update_publish_time_ms"),
        F.col("applied_update_position"),
        F.col("applied_snapshot_id"),
        F.col("applied_snapshot_local_position"),
        expected.alias("expected_remote_mark_delete"),
        delivered.alias("update_delivered"),
        F.col("update_delivered_position"),
        F.col("target_cursor_exists"),
        actual.alias("actual_remote_mark_delete"),
        F.when(
            actual.isNotNull() & expected.isNotNull(), F.coalesce(F.col("_behind"), F.lit(0).cast("long"))
        ).alias("remote_behind_entries"),
        F.when(F.col("last_update_position").isNotNull(), lead_col).alias("source_lead_entries"),
        since_update.alias("seconds_since_last_update"),
        _seconds_between(
            F.col("target_exported_at"), F.unix_millis(F.col("target_last_mark_delete_advanced_at"))
        ).alias("seconds_since_target_moved"),
        status.alias("status"),
        reason.alias("status_reason"),
    )
