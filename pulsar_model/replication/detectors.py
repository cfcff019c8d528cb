"""Stall and risk detectors of replicated subscriptions (SPEC §4.2-§4.8, §12.8, §12.9).

:func:`replication_findings` returns one row per finding: ``kind, severity, cluster, topic, subscription,
related_cluster, measure, position, detail``. Kinds (``measure`` in brackets):

* ``ack_holes_hold_mark_delete`` - a replicated subscription with individually acked ranges past its
  mark-delete: only the mark-delete is replicated (§4.8), so every hole keeps the remote cursors back
  [acked entries past the mark-delete]; ``critical`` when the mark-delete has not moved for
  ``stall_after_seconds``, else ``warning``;
* ``snapshots_never_complete`` - a cluster wrote snapshot REQUESTs for the topic but no SNAPSHOT marker
  at all: nothing can be translated from it (§4.4, §4.5) [snapshot ids requested]; ``critical``;
* ``snapshots_timing_out`` - snapshot ids requested more than
  ``replicatedSubscriptionsSnapshotTimeoutSeconds`` before the export without a SNAPSHOT marker
  (§4.5 ``isTimedOut``) [such snapshot ids]; ``warning``;
* ``replicator_disconnected`` - a replicator the stats report as not connected: ``startNewSnapshot`` starts
  no snapshot while any replicator is disconnected (§4.4) [replication backlog]; ``critical``;
* ``system_subscription_replicated`` - a system cursor (``__compaction``, dedup, replicator) flagged
  replicated; ``warning``;
* ``consumers_on_multiple_clusters`` - a replicated subscription with consumers on more than one cluster:
  each cluster acks independently and the UPDATEs overwrite each other (§4.4) [clusters with consumers],
  one row per cluster with consumers; ``warning``;
* ``marker_backlog_on_idle_subscription`` - a subscription without consumers whose backlog ``(md, LAC]``
  holds marker entries: nothing auto-acks them (§4.3, §12.8) [marker entries]; ``warning`` when markers
  are at least half of the backlog's entries, else ``info``.

Snapshot-cache eviction of useful snapshots (§4.6, §12.9) is not detected here: it needs the cache replay
of :mod:`pulsar_model.replication.cache`. Every input holds one export per (cluster, topic). Pure and lazy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pulsar_model.backlog_exact import unacked_entry_totals
from pulsar_model.columns import POSITION_SQL_TYPE, as_position
from pulsar_model.replication.translation import (
    CURSOR_COLUMNS,
    CURSOR_KIND_SUBSCRIPTION,
    DEFAULT_STALL_AFTER_SECONDS,
    MARKER_COLUMNS,
    MARKER_SNAPSHOT,
    MARKER_SNAPSHOT_REQUEST,
    existing_entries_between,
    require,
)

__all__ = [
    "FINDING_COLUMNS",
    "KIND_ACK_HOLES",
    "KIND_MARKER_BACKLOG",
    "KIND_MULTI_CLUSTER_CONSUMERS",
    "KIND_REPLICATOR_DISCONNECTED",
    "KIND_SNAPSHOTS_NEVER_COMPLETE",
    "KIND_SNAPSHOTS_TIMING_OUT",
    "KIND_SYSTEM_SUBSCRIPTION_REPLICATED",
    "SEVERITY_CRITICAL",
    "SEVERITY_INFO",
    "SEVERITY_WARNING",
    "replication_findings",
]

KIND_ACK_HOLES: Final = "ack_holes_hold_mark_delete"
KIND_SNAPSHOTS_NEVER_COMPLETE: Final = "snapshots_never_complete"
KIND_SNAPSHOTS_TIMING_OUT: Final = "snapshots_timing_out"
KIND_REPLICATOR_DISCONNECTED: Final = "replicator_disconnected"
KIND_SYSTEM_SUBSCRIPTION_REPLICATED: Final = "system_subscription_replicated"
KIND_MULTI_CLUSTER_CONSUMERS: Final = "consumers_on_multiple_clusters"
KIND_MARKER_BACKLOG: Final = "marker_backlog_on_idle_subscription"

SEVERITY_INFO: Final = "info"
SEVERITY_WARNING: Final = "warning"
SEVERITY_CRITICAL: Final = "critical"

#: ``replicatedSubscriptionsSnapshotTimeoutSeconds`` default (SPEC §4.2).
DEFAULT_SNAPSHOT_TIMEOUT_SECONDS: Final = 30
#: Share of marker entries in an idle subscription's backlog from which the finding is a warning.
MARKER_SHARE_WARNING: Final = 0.5
#: Name of the compaction cursor (SPEC §1.11, §10.2).
COMPACTION_CURSOR: Final = "__compaction"
_RANGES_SQL_TYPE: Final = f"array<struct<lower:{POSITION_SQL_TYPE},upper:{POSITION_SQL_TYPE}>>"

FINDING_COLUMNS: Final = (
    "kind",
    "severity",
    "cluster",
    "topic",
    "subscription",
    "related_cluster",
    "measure",
    "position",
    "detail",
)


def _finding(
    kind: str,
    severity: Column,
    subscription: Column | None,
    related: Column | None,
    measure: Column | None,
    position: Column | None,
    detail: Column,
) -> list[Column]:
    """The output columns of one finding kind (``cluster``/``topic`` taken from the frame)."""
    return [
        F.lit(kind).alias("kind"),
        severity.alias("severity"),
        F.col("cluster"),
        F.col("topic"),
        (subscription if subscription is not None else F.lit(None).cast("string")).alias("subscription"),
        (related if related is not None else F.lit(None).cast("string")).alias("related_cluster"),
        (measure if measure is not None else F.lit(None)).cast("long").alias("measure"),
        (position if position is not None else F.lit(None).cast(POSITION_SQL_TYPE)).alias("position"),
        detail.alias("detail"),
    ]


def _ack_holes(
    cursors: DataFrame, ledgers: DataFrame, managed_ledgers: DataFrame, stall_after_seconds: int
) -> DataFrame:
    holes = cursors.where(
        (F.col("cursor_kind") == CURSOR_KIND_SUBSCRIPTION)
        & F.coalesce(F.col("is_replicated"), F.lit(False))
        & (F.size(F.coalesce(F.col("individually_deleted"), F.array())) > 0)
    ).select(
        "cluster",
        "topic",
        "cursor_name",
        as_position(F.col("mark_delete_position")).alias("lower"),
        F.col("individually_deleted").alias("acked"),
        F.array_max(F.transform(F.col("individually_deleted"), lambda r: as_position(r["upper"]))).alias(
            "upper"
        ),
        F.size(F.col("individually_deleted")).alias("_ranges"),
        (
            F.col("stats_last_mark_delete_advanced_at")
            if "stats_last_mark_delete_advanced_at" in cursors.columns
            else F.lit(None).cast("timestamp")
        ).alias("_moved_at"),
    )
    # acked entries past the mark-delete = entries in (md, last acked] minus the unacked ones among them
    unacked = existing_entries_between(holes, ledgers, managed_ledgers, ["cursor_name"], out="_unacked")
    whole = existing_entries_between(
        unacked.withColumn("acked", F.lit(None).cast(_RANGES_SQL_TYPE)),
        ledgers,
        managed_ledgers,
        ["cursor_name"],
        out="_whole",
    ).join(managed_ledgers.select("cluster", "topic", "exported_at"), ["cluster", "topic"], "left")
    acked_past = F.col("_whole") - F.col("_unacked")
    stuck_seconds = (F.unix_millis(F.col("exported_at")) - F.unix_millis(F.col("_moved_at"))) / 1000.0
    severity = F.when(
        F.coalesce(stuck_seconds > F.lit(stall_after_seconds), F.lit(False)), F.lit(SEVERITY_CRITICAL)
    ).otherwise(F.lit(SEVERITY_WARNING))
    detail = F.format_string(
        "%d acknowledged range(s), %d entries acknowledged past the mark-delete, mark-delete unmoved for "
        "%s s; only the mark-delete is replicated (SPEC §4.8), remote cursors stay behind the first hole",
        F.col("_ranges"),
        acked_past,
        F.coalesce(F.round(stuck_seconds, 1).cast("string"), F.lit("unknown")),
    )
    return whole.select(
        *_finding(KIND_ACK_HOLES, severity, F.col("cursor_name"), None, acked_past, F.col("lower"), detail)
    )


def _snapshot_findings(
    markers: DataFrame, managed_ledgers: DataFrame, timeout_seconds: int
) -> tuple[DataFrame, DataFrame]:
    local = markers.where(F.col("replicated_from").isNull())
    requests = (
        local.where(F.col("marker_type") == MARKER_SNAPSHOT_REQUEST)
        .groupBy("cluster", "topic", "snapshot_id")
        .agg(F.min(F.col("publish_time_ms").cast("long")).alias("_requested_ms"))
    )
    snapshots = (
        local.where(F.col("marker_type") == MARKER_SNAPSHOT)
        .select("cluster", "topic", "snapshot_id", F.lit(True).alias("_done"))
        .distinct()
    )
    ml = managed_ledgers.select("cluster", "topic", "exported_at")
    per_id = requests.join(snapshots, ["cluster", "topic", "snapshot_id"], "left").join(
        ml, ["cluster", "topic"], "left"
    )
    timed_out = F.coalesce(F.col("_done"), F.lit(False)) == F.lit(False)
    timed_out = timed_out & (
        F.col("_requested_ms") + F.lit(timeout_seconds * 1000) < F.unix_millis(F.col("exported_at"))
    )
    per_topic = per_id.groupBy("cluster", "topic").agg(
        F.count(F.lit(1)).alias("_requested"),
        F.sum(F.coalesce(F.col("_done").cast("long"), F.lit(0).cast("long"))).alias("_completed"),
        F.sum(timed_out.cast("long")).alias("_timed_out"),
    )
    completed_any = snapshots.groupBy("cluster", "topic").agg(F.count(F.lit(1)).alias("_any_done"))
    per_topic = per_topic.join(completed_any, ["cluster", "topic"], "left")
    never = per_topic.where(F.coalesce(F.col("_any_done"), F.lit(0)) == 0).select(
        *_finding(
            KIND_SNAPSHOTS_NEVER_COMPLETE,
            F.lit(SEVERITY_CRITICAL),
            None,
            None,
            F.col("_requested"),
            None,
            F.format_string(
                "%d snapshot(s) requested, none completed (no SNAPSHOT marker written): no UPDATE can be "
                "written for any replicated subscription of the topic (SPEC §4.4, §4.5)",
                F.col("_requested"),
            ),
        )
    )
    timing_out = per_topic.where(F.col("_timed_out") > 0).select(
        *_finding(
            KIND_SNAPSHOTS_TIMING_OUT,
            F.lit(SEVERITY_WARNING),
            None,
            None,
            F.col("_timed_out"),
            None,
            F.format_string(
                "%d of %d snapshot(s) requested more than %d s before the export have no SNAPSHOT marker "
                "(timed out, SPEC §4.5); a slow or disconnected replicator delays the remote cursors",
                F.col("_timed_out"),
                F.col("_requested"),
                F.lit(timeout_seconds),
            ),
        )
    )
    return never, timing_out


def _replicators(cursors: DataFrame) -> DataFrame:
    connected = (
        F.col("stats_replicator_connected")
        if "stats_replicator_connected" in cursors.columns
        else F.lit(None).cast("boolean")
    )
    backlog = (
        F.col("stats_replication_backlog")
        if "stats_replication_backlog" in cursors.columns
        else F.lit(None).cast("long")
    )
    remote = (
        F.col("replicator_remote_cluster")
        if "replicator_remote_cluster" in cursors.columns
        else F.lit(None).cast("string")
    )
    down = cursors.where((F.col("cursor_kind") == "replicator") & (connected == F.lit(False)))
    return down.select(
        *_finding(
            KIND_REPLICATOR_DISCONNECTED,
            F.lit(SEVERITY_CRITICAL),
            None,
            remote,
            backlog,
            as_position(F.col("mark_delete_position")),
            F.format_string(
                "replicator to %s not connected: no new snapshot starts while a replicator is "
                "disconnected (SPEC §4.4), so no replicated subscription of the topic is translated",
                F.coalesce(remote, F.col("cursor_name")),
            ),
        )
    )


def _system_replicated(cursors: DataFrame) -> DataFrame:
    system = (F.col("cursor_kind") != CURSOR_KIND_SUBSCRIPTION) | (F.col("cursor_name") == COMPACTION_CURSOR)
    flagged = cursors.where(system & F.coalesce(F.col("is_replicated"), F.lit(False)))
    return flagged.select(
        *_finding(
            KIND_SYSTEM_SUBSCRIPTION_REPLICATED,
            F.lit(SEVERITY_WARNING),
            F.col("cursor_name"),
            None,
            None,
            as_position(F.col("mark_delete_position")),
            F.format_string(
                "system cursor %s (%s) is flagged replicated: its position would be propagated to other "
                "clusters like a subscription's (SPEC §4.2)",
                F.col("cursor_name"),
                F.col("cursor_kind"),
            ),
        )
    )


def _multi_cluster_consumers(cursors: DataFrame, consumers: DataFrame) -> DataFrame:
    replicated = cursors.where(
        (F.col("cursor_kind") == CURSOR_KIND_SUBSCRIPTION) & F.coalesce(F.col("is_replicated"), F.lit(False))
    ).select("cluster", "topic", F.col("cursor_name").alias("subscription"))
    per_cluster = (
        consumers.groupBy("cluster", "topic", "subscription")
        .agg(F.count(F.lit(1)).alias("_consumers"))
        .join(replicated, ["cluster", "topic", "subscription"], "inner")
    )
    spread = per_cluster.groupBy("topic", "subscription").agg(
        F.count(F.lit(1)).alias("_clusters"),
        F.array_join(
            F.array_sort(F.collect_list(F.format_string("%s (%d)", F.col("cluster"), F.col("_consumers")))),
            ", ",
        ).alias("_where"),
    )
    rows = per_cluster.join(spread.where(F.col("_clusters") > 1), ["topic", "subscription"], "inner")
    return rows.select(
        *_finding(
            KIND_MULTI_CLUSTER_CONSUMERS,
            F.lit(SEVERITY_WARNING),
            F.col("subscription"),
            None,
            F.col("_clusters"),
            None,
            F.format_string(
                "replicated subscription consumed on %d clusters: %s; each cluster acks on its own and the "
                "UPDATE markers of one overwrite the other's position (SPEC §4.4)",
                F.col("_clusters"),
                F.col("_where"),
            ),
        )
    )


def _marker_backlog(
    cursors: DataFrame, entries: DataFrame, managed_ledgers: DataFrame, consumers: DataFrame | None
) -> DataFrame:
    subs = cursors.where(F.col("cursor_kind") == CURSOR_KIND_SUBSCRIPTION)
    if consumers is not None:
        with_consumers = consumers.select(
            "cluster", "topic", F.col("subscription").alias("cursor_name")
        ).distinct()
        subs = subs.join(with_consumers, ["cluster", "topic", "cursor_name"], "left_anti")
    if "stats_consumer_count" in cursors.columns:
        subs = subs.where(F.coalesce(F.col("stats_consumer_count"), F.lit(0)) == 0)
    lac = managed_ledgers.select(
        "cluster", "topic", as_position(F.col("last_confirmed_entry")).alias("upper")
    )
    requests = subs.select(
        "cluster",
        "topic",
        F.col("cursor_name").alias("request_key"),
        as_position(F.col("mark_delete_position")).alias("lower"),
        F.col("individually_deleted").alias("acked_ranges"),
    ).join(lac, ["cluster", "topic"], "inner")
    totals = unacked_entry_totals(requests, entries)
    found = totals.where(F.col("marker_entries") > 0)
    share = F.col("marker_entries") / F.col("entries")
    return found.select(
        *_finding(
            KIND_MARKER_BACKLOG,
            F.when(share >= F.lit(MARKER_SHARE_WARNING), F.lit(SEVERITY_WARNING)).otherwise(
                F.lit(SEVERITY_INFO)
            ),
            F.col("request_key"),
            None,
            F.col("marker_entries"),
            F.col("lower"),
            F.format_string(
                "no consumer: %d of %d backlog entries are marker entries (%d data), never auto-acked "
                "without a dispatcher; they inflate msgBacklog and backlog size (SPEC §4.3, §12.8)",
                F.col("marker_entries"),
                F.col("entries"),
                F.col("data_entries"),
            ),
        )
    )


def replication_findings(
    markers: DataFrame | None,
    cursors: DataFrame,
    entries: DataFrame | None,
    ledgers: DataFrame,
    managed_ledgers: DataFrame,
    consumers: DataFrame | None = None,
    *,
    snapshot_timeout_seconds: int = DEFAULT_SNAPSHOT_TIMEOUT_SECONDS,
    stall_after_seconds: int = DEFAULT_STALL_AFTER_SECONDS,
) -> DataFrame:
    """One row per finding of the module's detector kinds (see the module docstring; SPEC §4, §12.8-§12.9).

    ``markers``/``entries`` may be None (no entry dump): the snapshot and marker-backlog detectors are then
    skipped; ``consumers`` None skips the multi-cluster detector (the marker-backlog one then relies on
    ``stats_consumer_count``). Columns: :data:`FINDING_COLUMNS`. Pure and lazy.
    """
    require(cursors, CURSOR_COLUMNS, "cursors")
    parts: list[DataFrame] = [
        _ack_holes(cursors, ledgers, managed_ledgers, stall_after_seconds),
        _replicators(cursors),
        _system_replicated(cursors),
    ]
    if markers is not None:
        require(markers, MARKER_COLUMNS, "markers")
        parts.extend(_snapshot_findings(markers, managed_ledgers, snapshot_timeout_seconds))
    if consumers is not None:
        parts.append(_multi_cluster_consumers(cursors, consumers))
    if entries is not None:
        parts.append(_marker_backlog(cursors, entries, managed_ledgers, consumers))
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out.select(*FINDING_COLUMNS)


def finding_kinds() -> Sequence[str]:
    """Every kind :func:`replication_findings` can emit."""
    return (
        KIND_ACK_HOLES,
        KIND_SNAPSHOTS_NEVER_COMPLETE,
        KIND_SNAPSHOTS_TIMING_OUT,
        KIND_REPLICATOR_DISCONNECTED,
        KIND_SYSTEM_SUBSCRIPTION_REPLICATED,
        KIND_MULTI_CLUSTER_CONSUMERS,
        KIND_MARKER_BACKLOG,
    )
