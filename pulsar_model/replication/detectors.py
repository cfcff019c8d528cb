"""Stall and risk detectors of replicated subscriptions (docs §4.2-§4.8, §12.8, §12.9).

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

Snapshot-cache eviction of useful snapshots (§4.6, §4.8, §12.9) needs the version-dependent cache replay
of :mod:`pulsar_model.replication.cache`, so it has its own entry point,
:func:`snapshot_cache_evicted_useful` (same columns; the stage unions it in, one replay for every cluster):

* ``snapshot_cache_evicted_useful`` - mark-delete advances of a replicated subscription for which the
  bounded cache returned an older snapshot, or none, than an unbounded cache of the same generation would
  have: the newest snapshot not after the mark-delete had been evicted, so the UPDATE (if any) sends the
  remote cursors to an older position [such advances]; ``warning``.

Every input holds one export per (cluster, topic). Pure and lazy.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any, Final

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.window import Window

from pulsar_model.backlog_exact import unacked_entry_totals
from pulsar_model.engine.columns import POSITION_SQL_TYPE, POSITION_TYPE, as_position
from pulsar_model.engine.grouped import map_groups
from pulsar_model.replication.cache import (
    CACHE_GENERATION_NEW,
    EVENT_COLUMNS,
    EXPORT_KEYS,
    OP_ADD,
    OP_ADVANCE,
    CachedSnapshot,
    NewSnapshotCache,
    OldSnapshotCache,
)
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
    "KIND_CACHE_EVICTED_USEFUL",
    "KIND_MARKER_BACKLOG",
    "KIND_MULTI_CLUSTER_CONSUMERS",
    "KIND_REPLICATOR_DISCONNECTED",
    "KIND_SNAPSHOTS_NEVER_COMPLETE",
    "KIND_SNAPSHOTS_TIMING_OUT",
    "KIND_SYSTEM_SUBSCRIPTION_REPLICATED",
    "SEVERITY_CRITICAL",
    "SEVERITY_INFO",
    "SEVERITY_WARNING",
    "evicted_useful_snapshots",
    "replication_findings",
    "snapshot_cache_evicted_useful",
]

KIND_ACK_HOLES: Final = "ack_holes_hold_mark_delete"
KIND_SNAPSHOTS_NEVER_COMPLETE: Final = "snapshots_never_complete"
KIND_SNAPSHOTS_TIMING_OUT: Final = "snapshots_timing_out"
KIND_REPLICATOR_DISCONNECTED: Final = "replicator_disconnected"
KIND_SYSTEM_SUBSCRIPTION_REPLICATED: Final = "system_subscription_replicated"
KIND_MULTI_CLUSTER_CONSUMERS: Final = "consumers_on_multiple_clusters"
KIND_MARKER_BACKLOG: Final = "marker_backlog_on_idle_subscription"
KIND_CACHE_EVICTED_USEFUL: Final = "snapshot_cache_evicted_useful"

SEVERITY_INFO: Final = "info"
SEVERITY_WARNING: Final = "warning"
SEVERITY_CRITICAL: Final = "critical"

#: ``replicatedSubscriptionsSnapshotTimeoutSeconds`` default (docs §4.2).
DEFAULT_SNAPSHOT_TIMEOUT_SECONDS: Final = 30
#: Share of marker entries in an idle subscription's backlog from which the finding is a warning.
MARKER_SHARE_WARNING: Final = 0.5
#: Name of the compaction cursor (docs §1.11, §10.2).
COMPACTION_CURSOR: Final = "__compaction"

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
    kind: str | Column,
    severity: Column,
    subscription: Column | None,
    related: Column | None,
    measure: Column | None,
    position: Column | None,
    detail: Column,
) -> list[Column]:
    """The output columns of one finding kind, or of the kind a column names (``cluster``/``topic`` taken
    from the frame)."""
    return [
        (F.lit(kind) if isinstance(kind, str) else kind).alias("kind"),
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
    # acked entries past the mark-delete: the listed entries inside the acked ranges, counted in
    # (md, last acked] in one pass over the ledger list, straight onto the cursor rows
    counted = existing_entries_between(
        holes, ledgers, managed_ledgers, ["cursor_name"], out="_unacked", acked_out="_acked_past"
    )
    whole = counted.join(
        managed_ledgers.select("cluster", "topic", "exported_at"), ["cluster", "topic"], "left"
    )
    acked_past = F.col("_acked_past")
    stuck_seconds = (F.unix_millis(F.col("exported_at")) - F.unix_millis(F.col("_moved_at"))) / 1000.0
    severity = F.when(
        F.coalesce(stuck_seconds > F.lit(stall_after_seconds), F.lit(False)), F.lit(SEVERITY_CRITICAL)
    ).otherwise(F.lit(SEVERITY_WARNING))
    detail = F.format_string(
        "%d acknowledged range(s), %d entries acknowledged past the mark-delete, mark-delete unmoved for "
        "%s s; only the mark-delete is replicated (docs §4.8), remote cursors stay behind the first hole",
        F.col("_ranges"),
        acked_past,
        F.coalesce(F.round(stuck_seconds, 1).cast("string"), F.lit("unknown")),
    )
    return whole.select(
        *_finding(KIND_ACK_HOLES, severity, F.col("cursor_name"), None, acked_past, F.col("lower"), detail)
    )


def _snapshot_findings(markers: DataFrame, managed_ledgers: DataFrame, timeout_seconds: int) -> DataFrame:
    local = markers.where(F.col("replicated_from").isNull())
    keys = ["cluster", "topic", "snapshot_id"]
    is_request = F.col("marker_type") == MARKER_SNAPSHOT_REQUEST
    is_snapshot = F.col("marker_type") == MARKER_SNAPSHOT
    # requests and SNAPSHOT markers meet in one aggregate per snapshot id (not an aggregate, a distinct
    # and a join); a SNAPSHOT completes a request only under equal, known keys, as an equality join would
    known = F.col("cluster").isNotNull() & F.col("topic").isNotNull()
    per_id = (
        local.where(is_request | is_snapshot)
        .groupBy(*keys)
        .agg(
            F.bool_or(is_request).alias("_is_request"),
            F.min(F.when(is_request, F.col("publish_time_ms").cast("long"))).alias("_requested_ms"),
            F.bool_or(is_snapshot & known).alias("_is_snapshot"),
            F.bool_or(is_snapshot & known & F.col("snapshot_id").isNotNull()).alias("_done"),
        )
        .join(managed_ledgers.select("cluster", "topic", "exported_at"), ["cluster", "topic"], "left")
    )
    requested = F.col("_is_request")
    timed_out = requested & ~F.col("_done")
    timed_out = timed_out & (
        F.col("_requested_ms") + F.lit(timeout_seconds * 1000) < F.unix_millis(F.col("exported_at"))
    )
    per_topic = (
        per_id.groupBy("cluster", "topic")
        .agg(
            F.count(F.when(requested, F.lit(1))).alias("_requested"),
            F.sum(F.when(requested & F.col("_done"), F.lit(1)).otherwise(F.lit(0)).cast("long")).alias(
                "_completed"
            ),
            F.sum(timed_out.cast("long")).alias("_timed_out"),
            F.count(F.when(F.col("_is_snapshot"), F.lit(1))).alias("_any_done"),
        )
        .where(F.col("_requested") > 0)
    )
    # both kinds from the one per-topic aggregate: a topic gives a row per kind that applies
    kinds = F.filter(
        F.array(
            F.when(F.coalesce(F.col("_any_done"), F.lit(0)) == 0, F.lit(KIND_SNAPSHOTS_NEVER_COMPLETE)),
            F.when(F.col("_timed_out") > 0, F.lit(KIND_SNAPSHOTS_TIMING_OUT)),
        ),
        lambda k: k.isNotNull(),
    )
    never = F.col("kind") == KIND_SNAPSHOTS_NEVER_COMPLETE
    return per_topic.select("*", F.explode(kinds).alias("kind")).select(
        *_finding(
            F.col("kind"),
            F.when(never, F.lit(SEVERITY_CRITICAL)).otherwise(F.lit(SEVERITY_WARNING)),
            None,
            None,
            F.when(never, F.col("_requested")).otherwise(F.col("_timed_out")),
            None,
            F.when(
                never,
                F.format_string(
                    "%d snapshot(s) requested, none completed (no SNAPSHOT marker written): no UPDATE can be "
                    "written for any replicated subscription of the topic (docs §4.4, §4.5)",
                    F.col("_requested"),
                ),
            ).otherwise(
                F.format_string(
                    "%d of %d snapshot(s) requested more than %d s before the export have no SNAPSHOT marker "
                    "(timed out, docs §4.5); a slow or disconnected replicator delays the remote cursors",
                    F.col("_timed_out"),
                    F.col("_requested"),
                    F.lit(timeout_seconds),
                )
            ),
        )
    )


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
                "disconnected (docs §4.4), so no replicated subscription of the topic is translated",
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
                "clusters like a subscription's (docs §4.2)",
                F.col("cursor_name"),
                F.col("cursor_kind"),
            ),
        )
    )


def _multi_cluster_consumers(cursors: DataFrame, consumers: DataFrame) -> DataFrame:
    replicated = cursors.where(
        (F.col("cursor_kind") == CURSOR_KIND_SUBSCRIPTION) & F.coalesce(F.col("is_replicated"), F.lit(False))
    ).select("cluster", "topic", F.col("cursor_name").alias("subscription"))
    # the consumers are distributed once by (topic, subscription): the per-cluster count and the spread
    # over clusters (a window, not an aggregate joined back) both read that distribution
    per_cluster = (
        consumers.repartition("topic", "subscription")
        .groupBy("cluster", "topic", "subscription")
        .agg(F.count(F.lit(1)).alias("_consumers"))
        .join(F.broadcast(replicated), ["cluster", "topic", "subscription"], "inner")
    )
    spread = Window.partitionBy("topic", "subscription")
    listed = F.format_string("%s (%d)", F.col("cluster"), F.col("_consumers"))
    rows = per_cluster.select(
        "*",
        F.count(F.lit(1)).over(spread).alias("_clusters"),
        F.array_join(F.array_sort(F.collect_list(listed).over(spread)), ", ").alias("_where"),
    ).where(F.col("_clusters") > 1)
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
                "UPDATE markers of one overwrite the other's position (docs §4.4)",
                F.col("_clusters"),
                F.col("_where"),
            ),
        )
    )


def _marker_backlog(
    cursors: DataFrame, entries: DataFrame, managed_ledgers: DataFrame, consumers: DataFrame | None
) -> DataFrame:
    # a finding needs a marker entry in the backlog: only topics whose dump holds one are read (all of
    # their entries, so the transaction states of the totals are unchanged); broadcast: one row per topic
    with_markers = entries.where(F.col("marker_type").isNotNull()).select("cluster", "topic").distinct()
    entries = entries.join(F.broadcast(with_markers), ["cluster", "topic"], "left_semi")
    subs = cursors.where(F.col("cursor_kind") == CURSOR_KIND_SUBSCRIPTION).join(
        F.broadcast(with_markers), ["cluster", "topic"], "left_semi"
    )
    if consumers is not None:
        # an anti join needs no distinct; broadcast: one row per consumer, metadata-sized
        with_consumers = consumers.select("cluster", "topic", F.col("subscription").alias("cursor_name"))
        subs = subs.join(F.broadcast(with_consumers), ["cluster", "topic", "cursor_name"], "left_anti")
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
                "without a dispatcher; they inflate msgBacklog and backlog size (docs §4.3, §12.8)",
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
    """One row per finding of the module's detector kinds (see the module docstring; docs §4, §12.8-§12.9).

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
        parts.append(_snapshot_findings(markers, managed_ledgers, snapshot_timeout_seconds))
    if consumers is not None:
        parts.append(_multi_cluster_consumers(cursors, consumers))
    if entries is not None:
        parts.append(_marker_backlog(cursors, entries, managed_ledgers, consumers))
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out.select(*FINDING_COLUMNS)


def finding_kinds() -> Sequence[str]:
    """Every kind the detectors emit (``replication_findings`` and ``snapshot_cache_evicted_useful``)."""
    return (
        KIND_ACK_HOLES,
        KIND_SNAPSHOTS_NEVER_COMPLETE,
        KIND_SNAPSHOTS_TIMING_OUT,
        KIND_REPLICATOR_DISCONNECTED,
        KIND_SYSTEM_SUBSCRIPTION_REPLICATED,
        KIND_MULTI_CLUSTER_CONSUMERS,
        KIND_MARKER_BACKLOG,
        KIND_CACHE_EVICTED_USEFUL,
    )


# --- snapshot cache: useful snapshots evicted (docs §4.6, §4.8) -------------------------------------------

#: Columns of :func:`pulsar_model.replication.cache.replay_snapshot_cache` output the detector reads.
REPLAY_COLUMNS: Final = (
    "cluster",
    "topic",
    "subscription",
    "seq",
    "snapshot_id",
    "snapshot_local_position",
    "evicted_since_previous_advance",
    "cache_generation",
)
#: Capacity of the reference cache: nothing is ever evicted for size, only consumed by advances (and, in
#: the new generation, cleared when positions go backwards, as the bounded cache does too).
_UNBOUNDED: Final = sys.maxsize
_EVICTED_FIELDS: Final = [
    T.StructField("seq", T.LongType(), False),
    T.StructField("mark_delete_position", POSITION_TYPE, True),
    T.StructField("applied_snapshot_id", T.StringType(), True),
    T.StructField("applied_local_position", POSITION_TYPE, True),
    T.StructField("useful_snapshot_id", T.StringType(), True),
    T.StructField("useful_local_position", POSITION_TYPE, False),
    T.StructField("useful_was_evicted", T.BooleanType(), False),
    T.StructField("evicted_before_advance", T.ArrayType(T.StringType()), False),
    T.StructField("cache_generation", T.StringType(), False),
]


def _position(ledger: Any, entry: Any) -> tuple[int, int] | None:
    if ledger is None or entry is None or pd.isna(ledger) or pd.isna(entry):
        return None
    return (int(ledger), int(entry))


def _position_out(p: tuple[int, int] | None) -> dict[str, int] | None:
    return None if p is None else {"ledger_id": p[0], "entry_id": p[1]}


def _evicted_useful_fn(summary: bool) -> Callable[[pd.DataFrame], list[dict[str, Any]]]:
    """One subscription's cache events and replayed advances (rows with ``_replayed``) -> its rows, without
    the keys: one per advance that got an evicted useful snapshot, or with ``summary`` at most one per
    subscription that has such advances (``_hits``, the ``_latest`` of them, ``_generation`` and the
    ``_advances`` the replay made)."""

    def fn(pdf: pd.DataFrame) -> list[dict[str, Any]]:
        records = pdf.to_dict("records")
        applied = {int(r["seq"]): r for r in records if r["_replayed"]}
        rows = sorted((r for r in records if not r["_replayed"]), key=lambda r: int(r["seq"]))
        answers = [applied.get(int(r["seq"])) for r in rows]
        generation = next((a["_gen"] for a in answers if a is not None and isinstance(a["_gen"], str)), None)
        if generation is None:  # no replayed advance: nothing was asked of the cache
            return []
        reference: OldSnapshotCache | NewSnapshotCache
        if generation == CACHE_GENERATION_NEW:
            reference = NewSnapshotCache(lambda _a, _b: 1, _UNBOUNDED)
        else:
            reference = OldSnapshotCache(_UNBOUNDED)
        evicted: list[str | None] = []
        out: list[dict[str, Any]] = []
        for r, a in zip(rows, answers, strict=True):
            op = str(r["op"]).lower()
            if op == OP_ADD:
                p = _position(r["_pl"], r["_pe"])
                if p is not None:
                    reference.add(CachedSnapshot(r["snapshot_id"], p))
                continue
            if op != OP_ADVANCE:
                continue
            if a is not None and a["_evicted"] is not None:
                evicted.extend(list(a["_evicted"]))
            md = _position(r["_ml"], r["_me"])
            if md is None:  # the replay reports the error; the cache was left alone
                continue
            useful = reference.advanced(md)
            applied_at = None if a is None else _position(a["_al"], a["_ae"])
            if useful is None or (applied_at is not None and applied_at >= useful.position):
                continue
            applied_id = None if a is None else a["_aid"]
            out.append(
                dict(
                    seq=int(r["seq"]),
                    mark_delete_position=_position_out(md),
                    applied_snapshot_id=applied_id if isinstance(applied_id, str) else None,
                    applied_local_position=_position_out(applied_at),
                    useful_snapshot_id=useful.snapshot_id,
                    useful_local_position=_position_out(useful.position),
                    useful_was_evicted=useful.snapshot_id is not None and useful.snapshot_id in evicted,
                    evicted_before_advance=[e for e in evicted if e is not None],
                    cache_generation=generation,
                )
            )
        if not summary or not out:
            return out
        latest = out[-1]  # the rows are in seq order
        return [
            dict(
                _hits=len(out),
                _latest=dict(
                    md=latest["mark_delete_position"],
                    useful_id=latest["useful_snapshot_id"],
                    useful_pos=latest["useful_local_position"],
                    applied_id=latest["applied_snapshot_id"],
                    applied_pos=latest["applied_local_position"],
                ),
                _generation=generation,
                _advances=len(applied),
            )
        ]

    return fn


def _events_with_answers(events: DataFrame, replay: DataFrame) -> tuple[DataFrame, list[str]]:
    """(the cache events and the replay's answers as one frame, the subscription keys).

    One row per event and one per replayed advance (``_replayed``), paired by ``seq`` inside the group
    function: a union distributed once by :func:`map_groups`, not a join that distributes both sides first.
    """
    require(events, EVENT_COLUMNS, "events")
    require(replay, REPLAY_COLUMNS, "replay")
    export_keys = [k for k in EXPORT_KEYS if k in events.columns and k in replay.columns]
    keys = ["cluster", "topic", "subscription", *export_keys]
    long_null = F.lit(None).cast("long")
    string_null = F.lit(None).cast("string")
    answers = replay.select(
        *keys,
        F.col("seq").cast("long").alias("seq"),
        F.lit(True).alias("_replayed"),
        string_null.alias("op"),
        string_null.alias("snapshot_id"),
        *[long_null.alias(c) for c in ("_pl", "_pe", "_ml", "_me")],
        F.col("snapshot_id").cast("string").alias("_aid"),
        F.col("snapshot_local_position.ledger_id").cast("long").alias("_al"),
        F.col("snapshot_local_position.entry_id").cast("long").alias("_ae"),
        F.col("evicted_since_previous_advance").cast(T.ArrayType(T.StringType())).alias("_evicted"),
        F.col("cache_generation").cast("string").alias("_gen"),
    )
    asked = events.select(
        *keys,
        F.col("seq").cast("long").alias("seq"),
        F.lit(False).alias("_replayed"),
        F.col("op").cast("string").alias("op"),
        F.col("snapshot_id").cast("string").alias("snapshot_id"),
        F.col("local_position.ledger_id").cast("long").alias("_pl"),
        F.col("local_position.entry_id").cast("long").alias("_pe"),
        F.col("mark_delete_position.ledger_id").cast("long").alias("_ml"),
        F.col("mark_delete_position.entry_id").cast("long").alias("_me"),
        string_null.alias("_aid"),
        long_null.alias("_al"),
        long_null.alias("_ae"),
        F.lit(None).cast(T.ArrayType(T.StringType())).alias("_evicted"),
        string_null.alias("_gen"),
    )
    return asked.unionByName(answers), keys


def evicted_useful_snapshots(events: DataFrame, replay: DataFrame) -> DataFrame:
    """One row per mark-delete advance whose useful snapshot the bounded cache had evicted (docs §4.6).

    ``events`` are cache events (:func:`pulsar_model.replication.cache.snapshot_cache_events` or hand-built
    with :data:`~pulsar_model.replication.cache.EVENT_COLUMNS`), ``replay`` their
    :func:`~pulsar_model.replication.cache.replay_snapshot_cache` output. Per subscription (export keys
    too when both frames have them), inside :func:`~pulsar_model.engine.grouped.map_groups`, the events run
    again
    through an *unbounded* cache of the replay's generation: its answer to an advance is the newest snapshot
    not after the mark-delete that no earlier advance consumed (the old cache's sorted-map semantics; the new
    cache's clear on a non-increasing position applies to both). A row is emitted when that snapshot exists
    and the replay returned none (``applied_*`` null) or an older one - only a capacity eviction can cause
    that.

    Columns: the subscription key, ``seq``, ``mark_delete_position``, ``applied_snapshot_id`` /
    ``applied_local_position`` (what the bounded cache returned), ``useful_snapshot_id`` /
    ``useful_local_position`` (what it should have kept), ``useful_was_evicted`` (its id is among the ids
    the replay reported evicted up to this advance; false only for snapshots without an id),
    ``evicted_before_advance`` (every id evicted up to this advance) and ``cache_generation``. Advances
    without a mark-delete are skipped (the replay reports them). Pure and lazy.
    """
    flat, keys = _events_with_answers(events, replay)
    key_fields = [f for f in flat.schema.fields if f.name in keys]
    schema = T.StructType([*key_fields, *_EVICTED_FIELDS])
    return map_groups(flat, keys, _evicted_useful_fn(summary=False), schema, order=["seq"])


def _position_text(col: Column) -> Column:
    return F.concat(col["ledger_id"].cast("string"), F.lit(":"), col["entry_id"].cast("string"))


def snapshot_cache_evicted_useful(events: DataFrame, replay: DataFrame) -> DataFrame:
    """Findings of kind ``snapshot_cache_evicted_useful``: one row per replicated subscription with at least
    one advance of :func:`evicted_useful_snapshots` (docs §4.6, §4.8, §12.9).

    ``measure`` = such advances, ``position`` = the mark-delete of the latest one; the detail names the
    cache generation, the snapshot that should have been used and what the cache returned instead.
    Columns: :data:`FINDING_COLUMNS` (no export keys: the caller attaches the export identity, one export
    per (cluster, topic)). Pure and lazy.
    """
    # one grouped pass gives each subscription's count, latest hit and advances (no aggregate of the hits
    # and of the replay joined together afterwards)
    flat, keys = _events_with_answers(events, replay)
    latest = T.StructType(
        [
            T.StructField("md", POSITION_TYPE, True),
            T.StructField("useful_id", T.StringType(), True),
            T.StructField("useful_pos", POSITION_TYPE, True),
            T.StructField("applied_id", T.StringType(), True),
            T.StructField("applied_pos", POSITION_TYPE, True),
        ]
    )
    schema = T.StructType(
        [
            *[f for f in flat.schema.fields if f.name in keys],
            T.StructField("_hits", T.LongType(), False),
            T.StructField("_latest", latest, False),
            T.StructField("_generation", T.StringType(), False),
            T.StructField("_advances", T.LongType(), False),
        ]
    )
    per_sub = map_groups(flat, keys, _evicted_useful_fn(summary=True), schema, order=["seq"])
    returned = F.when(
        F.col("_latest.applied_pos").isNull(), F.lit("no snapshot (no UPDATE written)")
    ).otherwise(
        F.format_string(
            "the older %s at %s",
            F.coalesce(F.col("_latest.applied_id"), F.lit("?")),
            _position_text(F.col("_latest.applied_pos")),
        )
    )
    detail = F.format_string(
        "%d of %d mark-delete advance(s) got an older snapshot or none from the %s snapshot cache: the "
        "newest snapshot not after the mark-delete had been evicted (latest: md %s should have applied %s "
        "at %s, the cache returned %s); the remote cursors are sent to older positions and a failover "
        "redelivers more (docs §4.6, §4.8)",
        F.col("_hits"),
        F.col("_advances"),
        F.col("_generation"),
        _position_text(F.col("_latest.md")),
        F.coalesce(F.col("_latest.useful_id"), F.lit("?")),
        _position_text(F.col("_latest.useful_pos")),
        returned,
    )
    return per_sub.select(
        *_finding(
            KIND_CACHE_EVICTED_USEFUL,
            F.lit(SEVERITY_WARNING),
            F.col("subscription"),
            None,
            F.col("_hits"),
            F.col("_latest.md"),
            detail,
        )
    )
