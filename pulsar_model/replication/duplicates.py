"""Failover duplicates of replicated subscriptions: what a switch to another cluster redelivers (docs §4.8).

If the consumers of a replicated subscription moved from the *source* cluster to a *target* cluster now,
the target redelivers every message after the target's mark-delete that is not individually acked there
(individual acks are never replicated, §4.8) - and each of those the source had already acknowledged is a
duplicate. Markers never count (they are never delivered, §4.3, §8.5).

Exact, from the exported entries (:func:`failover_duplicates`, ``method = exact``): a replicated message
keeps its producer name and sequence id on every cluster (§4.7 rule 9 forwards the entry unchanged), so a
message is identified by ``(producer_name, sequence_id)``; a batch entry of ``n`` messages holds sequence
ids ``sequence_id .. sequence_id + n - 1`` (the broker's assignment; the entry bytes are forwarded as they
are, so both clusters derive the same ids). A message is acknowledged on the source when its entry is at or
before the source mark-delete or inside one of its individually-deleted ranges, or when it was trimmed from
the source: a sequence id below the smallest one the source's export holds for that producer (ledgers are
trimmed only below every durable cursor's mark-delete, docs §0.2; a producer absent from the source's
export altogether is not credited, so the count is then a lower bound).

Bounds from the ledgers and the snapshot markers alone (every row, also without an entry dump), in
*entries* (marker entries included: without the dump they cannot be told apart):

* ``consumed_on_source_entries_lower_bound`` - target entries in ``(target md, P]`` not individually acked
  on the target, where ``P`` is the target's position in the newest SNAPSHOT whose ``local_message_id``
  the source mark-delete has passed. By the snapshot guarantee (§4.5) every message the target held before
  ``P`` is stored on the source before ``local_message_id``, hence acknowledged there: every *data* entry
  in that range is a duplicate. 0 when no passed snapshot names the target.
* ``consumed_on_source_entries_upper_bound`` - target entries in ``(target md, LAC]`` not individually
  acked on the target: nothing else can be redelivered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from pulsar_model.engine.columns import POSITION_SQL_TYPE, as_position, null_position
from pulsar_model.replication.translation import (
    MARKER_COLUMNS,
    MARKER_SNAPSHOT,
    PAIR_KEY,
    existing_entries_between,
    last_cluster_position,
    replicated_pairs,
    require,
)

__all__ = ["ENTRY_COLUMNS", "METHOD_EXACT", "METHOD_SNAPSHOT_BOUNDS", "failover_duplicates"]

METHOD_EXACT: Final = "exact"
METHOD_SNAPSHOT_BOUNDS: Final = "snapshot_bounds"

ENTRY_COLUMNS: Final = (
    "cluster",
    "topic",
    "position",
    "entry_size_bytes",
    "producer_name",
    "sequence_id",
    "message_count",
    "marker_type",
)


def _in_ranges(pos: Column, ranges: Column) -> Column:
    """``pos`` lies inside one of the open-closed ``(lower, upper]`` ranges (null array = none)."""
    return F.coalesce(
        F.exists(ranges, lambda r: (pos > as_position(r["lower"])) & (pos <= as_position(r["upper"]))),
        F.lit(False),
    )


def _exact_counts(entries: DataFrame, pairs: DataFrame) -> DataFrame:
    """Per pair of ``pairs``: the exact columns of :func:`failover_duplicates`, from the exported entries.

    One row per pair whose source or target topic has exported entries: ``_src_x`` / ``_tgt_x`` (that side
    has any), ``_x_exported`` (target entries of any kind in ``(target md, target LAC]`` outside the
    target's individually-deleted ranges), ``_x_entries`` / ``_x_messages`` (the data entries and messages
    among them), ``_x_dup_messages`` / ``_x_dup_entries`` / ``_x_dup_bytes`` (those acknowledged on the
    source, module docstring). Every source message and every target entry is tagged with its pair (both
    joins broadcast the pairs: metadata-sized) and the tagged rows are distributed once by pair: the
    per-producer first sequence id, the per-message "acked on the source" and the per-entry and per-pair
    counts all read that one distribution (a pair's rows share a partition).
    """
    is_data = F.col("marker_type").isNull()
    rows = entries.select(
        "cluster",
        "topic",
        as_position(F.col("position")).alias("_pos"),
        is_data.alias("_data"),
        F.col("entry_size_bytes").cast("long").alias("_bytes"),
        F.greatest(F.coalesce(F.col("message_count").cast("long"), F.lit(1).cast("long")), F.lit(1)).alias(
            "_msgs"
        ),
        F.when(is_data, F.col("producer_name")).alias("_producer"),
        F.when(is_data, F.col("sequence_id").cast("long")).alias("_seq0"),
    )
    pos = F.col("_pos")
    entry_cols = [c for c in rows.columns if c not in ("cluster", "topic")]

    def per_pair(side: str, cursor_cols: list[str], *tags: Column) -> DataFrame:
        """``rows`` of the pairs' ``side`` cluster, one copy per pair, with that side's ``tags``."""
        side_pairs = pairs.select(*PAIR_KEY, F.col(f"{side}_cluster").alias("cluster"), *cursor_cols)
        return rows.join(F.broadcast(side_pairs), ["cluster", "topic"], "inner").select(
            *PAIR_KEY, *entry_cols, *tags
        )

    source = per_pair(
        "source",
        ["source_mark_delete_position", "source_individually_deleted"],
        F.lit(True).alias("_is_src"),
        F.lit(False).alias("_in_range"),
        F.coalesce(
            (pos <= F.col("source_mark_delete_position"))
            | _in_ranges(pos, F.col("source_individually_deleted")),
            F.lit(False),
        ).alias("_acked"),
    )
    target = per_pair(
        "target",
        [
            "target_cursor_exists",
            "target_mark_delete_position",
            "target_individually_deleted",
            "target_last_confirmed_entry",
        ],
        F.lit(False).alias("_is_src"),
        F.coalesce(
            F.col("target_cursor_exists")
            & (pos > F.col("target_mark_delete_position"))
            & (pos <= F.col("target_last_confirmed_entry"))
            & ~_in_ranges(pos, F.col("target_individually_deleted")),
            F.lit(False),
        ).alias("_in_range"),
        F.lit(False).alias("_acked"),
    )
    # a data entry holds one message per batch slot (sequence ids _seq0 .. _seq0 + n - 1); a target entry
    # outside the range only says that the target has entries: it stays one row
    expand = F.col("_data") & (F.col("_is_src") | F.col("_in_range"))
    slot = F.explode(
        F.when(expand, F.sequence(F.lit(0).cast("long"), F.col("_msgs") - 1)).otherwise(
            F.array(F.lit(None).cast("long"))
        )
    ).alias("_slot")
    tagged = (
        source.unionByName(target)
        .select("*", slot)
        .select(
            "*",
            F.when(F.col("_slot").isNotNull(), F.col("_seq0") + F.col("_slot")).alias("_seq"),
        )
        .repartition(*PAIR_KEY)
    )
    by_producer = Window.partitionBy(*PAIR_KEY, "_producer")
    by_message = Window.partitionBy(*PAIR_KEY, "_producer", "_seq")
    first_seq = F.min(F.when(F.col("_is_src") & F.col("_slot").isNotNull(), F.col("_seq"))).over(by_producer)
    acked_on_source = F.max(F.col("_is_src") & F.col("_acked") & F.col("_slot").isNotNull()).over(by_message)
    # a message is named by (producer, sequence id): one without either is never matched
    named = F.col("_producer").isNotNull() & F.col("_seq").isNotNull()
    dup = named & (
        F.coalesce(acked_on_source, F.lit(False)) | F.coalesce(F.col("_seq") < first_seq, F.lit(False))
    )
    counted = F.col("_in_range") & F.col("_data")
    per_entry = (
        tagged.select(
            *PAIR_KEY, "_is_src", "_pos", "_in_range", "_data", "_bytes", counted.alias("_c"), dup.alias("_d")
        )
        .groupBy(*PAIR_KEY, "_is_src", "_pos")
        .agg(
            F.max("_in_range").alias("_in_range"),
            F.max("_data").alias("_data"),
            F.first("_bytes").alias("_bytes"),
            F.sum(F.col("_c").cast("long")).alias("_n"),
            F.sum((F.col("_c") & F.col("_d")).cast("long")).alias("_dups"),
        )
    )
    zero = F.lit(0).cast("long")
    in_target = ~F.col("_is_src") & F.col("_in_range")
    return per_entry.groupBy(*PAIR_KEY).agg(
        F.max("_is_src").alias("_src_x"),
        F.max(~F.col("_is_src")).alias("_tgt_x"),
        F.sum(in_target.cast("long")).alias("_x_exported"),
        F.sum((in_target & F.col("_data")).cast("long")).alias("_x_entries"),
        F.sum("_n").alias("_x_messages"),
        F.sum("_dups").alias("_x_dup_messages"),
        F.sum((F.col("_dups") > 0).cast("long")).alias("_x_dup_entries"),
        F.sum(F.when(F.col("_dups") > 0, F.col("_bytes")).otherwise(zero)).alias("_x_dup_bytes"),
    )


def _passed_snapshot_positions(markers: DataFrame, pairs: DataFrame) -> DataFrame:
    """Per pair: ``_passed_position`` - the target's position in the newest SNAPSHOT of the source whose
    ``local_position`` is at or before the source mark-delete (§4.5, §4.6)."""
    snaps = markers.where(
        (F.col("marker_type") == MARKER_SNAPSHOT)
        & F.col("replicated_from").isNull()
        & F.col("local_position").isNotNull()
    ).select(
        F.col("cluster").alias("source_cluster"),
        "topic",
        as_position(F.col("local_position")).alias("_local"),
        F.coalesce(F.col("clusters"), F.array()).alias("_clusters"),
    )
    cand = pairs.select(*PAIR_KEY, "source_mark_delete_position").join(
        snaps, ["source_cluster", "topic"], "inner"
    )
    cand = cand.where(F.col("_local") <= F.col("source_mark_delete_position")).select(
        *PAIR_KEY, "_local", last_cluster_position(F.col("_clusters"), F.col("target_cluster")).alias("_p")
    )
    cand = cand.where(F.col("_p").isNotNull())
    return cand.groupBy(*PAIR_KEY).agg(F.max_by(F.col("_p"), F.col("_local")).alias("_passed_position"))


def failover_duplicates(
    cursors: DataFrame,
    entries: DataFrame | None,
    markers: DataFrame | None,
    ledgers: DataFrame,
    managed_ledgers: DataFrame,
    *,
    materialise: Callable[[DataFrame], DataFrame] | None = None,
    pairs: DataFrame | None = None,
) -> DataFrame:
    """Messages a failover from source to target would redeliver although the source acked them (docs §4.8).

    One row per (topic, subscription, source cluster, target cluster) of :func:`replicated_pairs`.
    ``method``: ``exact`` when both clusters' topics have exported entries, else ``snapshot_bounds`` (the
    exact columns are then null). Exact columns (target entries in ``(target md, target LAC]`` outside the
    target's individually-deleted ranges, data only): ``remote_data_entries_after_mark_delete``,
    ``remote_data_messages_after_mark_delete``, ``failover_duplicate_messages`` (acked on the source, see the
    module docstring), ``failover_duplicate_entries`` (entries holding at least one), and
    ``failover_duplicate_bytes`` (their stored ``entry_size_bytes``: the broker redelivers whole entries).
    ``target_entries_complete``: the export holds every entry the ledger list says exists in that range.
    Bounds (module docstring): ``passed_snapshot_remote_position``,
    ``consumed_on_source_entries_lower_bound``, ``consumed_on_source_entries_upper_bound``. Every count is
    null when the target has no cursor for the subscription (it would be created at its initial position).
    ``materialise`` (e.g. the driver's ``localCheckpoint``) is applied to the pairs, which every part
    reads; default: as they are. ``pairs``: the :func:`replicated_pairs` of ``cursors`` and
    ``managed_ledgers`` when the caller has them already (used as given, not materialised again); default:
    computed here. Pure and lazy (with the defaults).
    """
    if pairs is None:
        pairs = replicated_pairs(cursors, managed_ledgers)
        if materialise is not None:
            pairs = materialise(pairs)
    zero = F.lit(0).cast("long")
    ranges_type = f"array<struct<lower:{POSITION_SQL_TYPE},upper:{POSITION_SQL_TYPE}>>"

    # --- bounds from the ledgers and snapshots --------------------------------------------------------------
    if markers is not None:
        require(markers, MARKER_COLUMNS, "markers")
        passed = _passed_snapshot_positions(markers, pairs)
        # at most one row per pair (metadata-sized): broadcast, the pairs are not shuffled for it
        with_passed = pairs.join(F.broadcast(passed), list(PAIR_KEY), "left")
    else:
        with_passed = pairs.withColumn("_passed_position", null_position())
    pkeys = [f"_p_{k}" for k in PAIR_KEY]
    md, lac = F.col("target_mark_delete_position"), F.col("target_last_confirmed_entry")
    target_acked = F.col("target_individually_deleted").cast(ranges_type)
    bound_requests = [
        with_passed.select(
            F.col("target_cluster").alias("cluster"),
            "topic",
            *[F.col(k).alias(f"_p_{k}") for k in PAIR_KEY],
            F.lit(kind).alias("_p_bound"),
            md.alias("lower"),
            upper.alias("upper"),
            target_acked.alias("acked"),
        )
        for kind, upper in (("low", F.least(F.greatest(md, F.col("_passed_position")), lac)), ("high", lac))
    ]
    # both bounds of a pair in one pass over the ledger list: one request per (pair, bound)
    counted = existing_entries_between(
        bound_requests[0].unionByName(bound_requests[1]),
        ledgers,
        managed_ledgers,
        [*pkeys, "_p_bound"],
        out="_n",
        few_requests=True,
    )
    bounds = counted.groupBy(*pkeys).agg(
        *[F.max(F.when(F.col("_p_bound") == k, F.col("_n"))).alias(f"_{k}") for k in ("low", "high")]
    )
    on = [F.col(k) == F.col(f"_p_{k}") for k in PAIR_KEY]
    bounded = with_passed.join(F.broadcast(bounds), on, "left").drop(*pkeys)

    # --- exact, from the exported entries -------------------------------------------------------------------
    if entries is None:
        exact = None
    else:
        require(entries, ENTRY_COLUMNS, "entries")
        # only the pairs' topics (on either side) are read: scope the dump first (the topics with a
        # replicated subscription are usually few; broadcast: at most two rows per pair, metadata-sized)
        pair_topics = pairs.select(F.col("source_cluster").alias("cluster"), "topic").union(
            pairs.select(F.col("target_cluster").alias("cluster"), "topic")
        )
        entries = entries.join(F.broadcast(pair_topics), ["cluster", "topic"], "left_semi")
        exact = _exact_counts(entries, pairs)
        bounded = bounded.join(F.broadcast(exact), list(PAIR_KEY), "left")
    if exact is None:
        bounded = bounded.select(
            "*",
            F.lit(False).alias("_src_x"),
            F.lit(False).alias("_tgt_x"),
            *[
                F.lit(None).cast("long").alias(c)
                for c in (
                    "_x_entries",
                    "_x_messages",
                    "_x_dup_messages",
                    "_x_dup_entries",
                    "_x_dup_bytes",
                    "_x_exported",
                )
            ],
        )
    is_exact = F.coalesce(F.col("_src_x"), F.lit(False)) & F.coalesce(F.col("_tgt_x"), F.lit(False))
    has_cursor = F.col("target_cursor_exists")

    def exact_count(name: str) -> Column:
        return F.when(is_exact & has_cursor, F.coalesce(F.col(name), zero))

    return bounded.select(
        *PAIR_KEY,
        F.when(is_exact, F.lit(METHOD_EXACT)).otherwise(F.lit(METHOD_SNAPSHOT_BOUNDS)).alias("method"),
        F.col("source_mark_delete_position"),
        F.col("target_cursor_exists"),
        F.col("target_mark_delete_position").alias("target_mark_delete_position"),
        F.col("target_last_confirmed_entry"),
        exact_count("_x_entries").alias("remote_data_entries_after_mark_delete"),
        exact_count("_x_messages").alias("remote_data_messages_after_mark_delete"),
        exact_count("_x_dup_messages").alias("failover_duplicate_messages"),
        exact_count("_x_dup_entries").alias("failover_duplicate_entries"),
        exact_count("_x_dup_bytes").alias("failover_duplicate_bytes"),
        F.when(is_exact & has_cursor, F.coalesce(F.col("_x_exported"), zero) == F.col("_high")).alias(
            "target_entries_complete"
        ),
        F.col("_passed_position").alias("passed_snapshot_remote_position"),
        F.when(has_cursor, F.coalesce(F.col("_low"), zero)).alias("consumed_on_source_entries_lower_bound"),
        F.when(has_cursor, F.col("_high")).alias("consumed_on_source_entries_upper_bound"),
    )
