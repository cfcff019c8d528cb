"""Backlog counts and backlog-size estimates as DataFrame transforms (SPEC §1.8, §2, §11.6-§11.8, §12.4).

* :func:`precise_backlog` - the precise entry backlog of every cursor and its entries in storage;
* :func:`estimated_backlog_size` - the topic ``backlogSize`` of ``pulsar-admin topics stats``
  (slowest durable cursor, integer-average ``consumedLedgerSize``);
* :func:`estimate_backlog_from_position` - the per-position estimate (subscription ``backlogSize``);
* :func:`estimated_size_since_mark_delete` - ``cursor.getEstimatedSizeSinceMarkDeletePosition()``;
* :func:`consumed_ledger_size` - the ``consumedLedgerSize`` column helper (three generations).

All transforms are pure and lazy and never mix topics or clusters. Version-dependent behaviour is
selected with ``pulsar_version`` (see :mod:`pulsar_model.versions`).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from pulsar_model import DEFAULT_PULSAR_VERSION
from pulsar_model import columns as C
from pulsar_model.columns import (
    EARLIEST,
    as_position,
    open_closed_count,
    position,
)
from pulsar_model.positions import CTX, CURSOR_KEY, KEY, _ctx_missing_error, _cursor_state, _Env, _keep
from pulsar_model.versions import Behaviour, behaviour

__all__ = [
    "consumed_ledger_size",
    "estimate_backlog_from_position",
    "estimated_backlog_size",
    "estimated_size_since_mark_delete",
    "precise_backlog",
]


def consumed_ledger_size(
    size_col: Column, entries_col: Column, entry_id_col: Column, generation: int
) -> Column:
    """``consumedLedgerSize(size, entries, entryId)`` (SPEC §2.2) as a column expression.

    Generation 1 (≤2.8): ``(entryId + 1) * (size div entries)``, no full-ledger shortcut (a fully consumed
    ledger keeps the division remainder as phantom backlog); 2 (2.9/2.10): ``size`` when
    ``entries == entryId + 1``; 3 (3.x/4.x): ``size`` when ``entries <= entryId + 1``. ``entries <= 0``
    -> 0; ``entryId < 0`` -> 0. Java long division truncates toward zero.
    """
    return C.consumed_ledger_size(size_col, entries_col, entry_id_col, generation)


# --- §1.8 precise backlog -------------------------------------------------------------------------


def precise_backlog(
    cursors: DataFrame,
    ledgers: DataFrame,
    managed_ledgers: DataFrame,
    pulsar_version: str = DEFAULT_PULSAR_VERSION,
) -> DataFrame:
    """Add ``backlog_entries``, ``entries_in_storage`` and ``error`` to every cursor (SPEC §1.8).

    One row per cursor. ``backlog_entries`` is ``getNumberOfEntriesInBacklog(true)``: 0 when
    ``md >= LAC`` (3.x+), else the cursor count of ``(md, LAC]`` - the ML count (version arithmetic, §1.7)
    minus the ML count of each acked range's intersection with it. 2.x has no guard: ``md > LAC`` makes
    Guava throw (null + ``error``). ``entries_in_storage`` is ``getNumberOfEntriesInStorage()``: the ML
    count of ``(md, LAC]`` (3.x+) or ``(md, LAC.next]`` (2.x-old); IDM not subtracted. Pure and lazy.
    """
    beh = behaviour(pulsar_version)
    env = _Env.build(ledgers, managed_ledgers, beh)
    state = _cursor_state(env, cursors, with_plan=False)
    ctx = F.col(CTX)
    lac, lac_lk = ctx["lac"], ctx["lac_lk"]
    md, md_lk = F.col("_pa_md"), F.col("_pa_md_lk")
    ml_count, ml_error = C.entries_between(md, md_lk, F.lit(False), lac, lac_lk, F.lit(True), ctx, beh)
    # 2.x-old counted (md, LAC.next], 3.x+ (md, LAC] (SPEC §1.8)
    storage_hi = position(lac["ledger_id"], lac["entry_id"] + 1) if beh.storage_counts_lac_next else lac
    storage, storage_error = C.entries_between(
        md, md_lk, F.lit(False), storage_hi, lac_lk, F.lit(True), ctx, beh
    )
    staged = state.select(
        *CURSOR_KEY,
        CTX,
        "_pa_md",
        "_pa_idm_lac",
        ml_count.alias("_b_count"),
        ml_error.alias("_b_err"),
        storage.alias("_s_count"),
        storage_error.alias("_s_err"),
    )
    if beh.precise_backlog_guard:  # 3.x+: 0 when md >= LAC, no range is built
        backlog = F.when(md >= lac, F.lit(0).cast("long")).otherwise(F.col("_b_count") - F.col("_pa_idm_lac"))
        backlog_error = F.when(md < lac, F.col("_b_err"))
    else:
        backlog = F.col("_b_count") - F.col("_pa_idm_lac")
        backlog_error = F.col("_b_err")
    staged = staged.select("*", backlog.alias("_b"), backlog_error.alias("_b_error"))
    error = F.coalesce(
        _ctx_missing_error(),
        F.when(md.isNull(), F.lit("mark_delete_position is null")),
        F.when(F.col("_b_error").isNotNull(), F.concat(F.lit("backlog: "), F.col("_b_error"))),
        F.when(F.col("_s_err").isNotNull(), F.concat(F.lit("entries_in_storage: "), F.col("_s_err"))),
    )
    computed = staged.select(
        *CURSOR_KEY,
        F.when(F.col("_b_error").isNull(), F.col("_b")).alias("backlog_entries"),
        F.when(F.col("_s_err").isNull(), F.col("_s_count")).alias("entries_in_storage"),
        error.alias("error"),
    )
    added = ["backlog_entries", "entries_in_storage", "error"]
    base = cursors.select(*_keep(cursors.columns, added))
    return base.join(computed, on=list(CURSOR_KEY), how="left")


# --- §2.3 topic backlog size ----------------------------------------------------------------------


def _estimate_from_position(pos: Column, lk: Column, ctx: Column, beh: Behaviour) -> Column:
    """``estimateBacklogFromPosition(pos)`` (SPEC §2.4) for a non-null position with lookup ``lk``."""
    after = ctx["total_size"] - lk["sz_lt"]
    gen = beh.consumed_generation
    missing = ctx["total_size"] if beh.estimate_deleted_total_size else after
    is_open = F.coalesce(pos["ledger_id"] == ctx["cur_id"], F.lit(False))
    return (
        F.when(~lk["exists"], missing)
        .when(is_open, after - C.consumed_ledger_size(ctx["cls"], ctx["cle"], pos["entry_id"], gen))
        .otherwise(after - C.consumed_ledger_size(lk["sz"], lk["ent"], pos["entry_id"], gen))
    )


def estimated_backlog_size(
    managed_ledgers: DataFrame,
    ledgers: DataFrame,
    cursors: DataFrame,
    pulsar_version: str = DEFAULT_PULSAR_VERSION,
) -> DataFrame:
    """Topic ``backlogSize`` = ``ManagedLedgerImpl.getEstimatedBacklogSize()`` (SPEC §2.3).

    One row per managed ledger: ``cluster, topic, slowest_cursor_name, slowest_mark_delete_position,
    estimated_backlog_size_bytes, slowest_cursor_tie``. The slowest cursor is the durable cursor with the
    smallest mark-delete position (a null md counts as EARLIEST, and then the estimate is 0 as in the
    broker); ties go to the smallest ``cursor_order`` (3.1+: the TreeSet keeps insertion order). Up to 3.0
    the heap's tie order is arbitrary: the smallest ``cursor_order`` is still reported and
    ``slowest_cursor_tie`` is true. No durable cursor -> null cursor, 0 bytes.

    Size: ``totalSize - sizes of ledgers before md's ledger``; a deleted md ledger stops there; a ledger
    listing 0 entries (the open ledger) uses ``currentLedgerSize/Entries``; otherwise minus
    ``consumedLedgerSize`` of md's ledger (generation by version, §2.2). Pure and lazy.
    """
    beh = behaviour(pulsar_version)
    env = _Env.build(ledgers, managed_ledgers, beh)
    earliest = position(*EARLIEST)
    durable = cursors.where(F.coalesce(F.col("is_durable").cast("boolean"), F.lit(False))).select(
        *KEY,
        F.col("cursor_name"),
        F.col("cursor_order").cast("long").alias("_order"),
        as_position(F.col("mark_delete_position")).alias("_md"),
    )
    durable = durable.select("*", F.coalesce(F.col("_md"), earliest).alias("_md_key"))
    ranked = durable.select(
        "*",
        F.row_number()
        .over(Window.partitionBy(*KEY).orderBy("_md_key", "_order", "cursor_name"))
        .alias("_rank"),
        F.count(F.lit(1)).over(Window.partitionBy(*KEY, "_md_key")).alias("_same_md"),
    )
    slowest = ranked.where(F.col("_rank") == 1).select(
        *KEY,
        F.col("cursor_name").alias("slowest_cursor_name"),
        F.col("_md").alias("slowest_mark_delete_position"),
        (F.lit(not beh.slowest_ties_by_insertion) & (F.col("_same_md") > 1)).alias("slowest_cursor_tie"),
    )
    topics = env.ctx.join(slowest, on=list(KEY), how="left")
    topics = env.lookup(topics, F.col("slowest_mark_delete_position.ledger_id"), "_lk")
    ctx, lk, pos = F.col(CTX), F.col("_lk"), F.col("slowest_mark_delete_position")
    size = ctx["total_size"] - lk["sz_lt"]
    gen = beh.consumed_generation
    estimate = (
        F.when(pos.isNull(), F.lit(0).cast("long"))
        .when(~lk["exists"], size)
        .when(lk["ent"] == 0, size - C.consumed_ledger_size(ctx["cls"], ctx["cle"], pos["entry_id"], gen))
        .otherwise(size - C.consumed_ledger_size(lk["sz"], lk["ent"], pos["entry_id"], gen))
    )
    return topics.select(
        *KEY,
        "slowest_cursor_name",
        "slowest_mark_delete_position",
        estimate.alias("estimated_backlog_size_bytes"),
        F.coalesce(F.col("slowest_cursor_tie"), F.lit(False)).alias("slowest_cursor_tie"),
    )


# --- §2.4 per-position estimate -------------------------------------------------------------------


def estimate_backlog_from_position(
    positions: DataFrame,
    ledgers: DataFrame,
    managed_ledgers: DataFrame,
    pulsar_version: str = DEFAULT_PULSAR_VERSION,
) -> DataFrame:
    """Add ``estimated_backlog_size_bytes``: ``getEstimatedBacklogSize(position)`` (SPEC §2.4).

    One row per input row (``cluster, topic, position`` + any columns). Null position -> 0. Bytes of the
    ledgers from the position's ledger on, minus ``consumedLedgerSize`` of that ledger (the open ledger
    uses ``currentLedgerSize/Entries``). A position in a deleted ledger gives those bytes as they are;
    2.9/2.10 (and earlier) returned ``totalSize`` instead (§12.4). A topic without a managed-ledger row gives
    null. Pure and lazy.
    """
    beh = behaviour(pulsar_version)
    env = _Env.build(ledgers, managed_ledgers, beh)
    df = env.lookup(env.with_ctx(positions), F.col("position.ledger_id"), "_pa_lk")
    pos, ctx = as_position(F.col("position")), F.col(CTX)
    estimate = (
        F.when(pos.isNull(), F.lit(0).cast("long"))
        .when(ctx.isNull(), F.lit(None).cast("long"))
        .otherwise(_estimate_from_position(pos, F.col("_pa_lk"), ctx, beh))
    )
    added = ["estimated_backlog_size_bytes"]
    return df.select(*_keep(positions.columns, added), estimate.alias("estimated_backlog_size_bytes"))


# --- §2.5 getEstimatedSizeSinceMarkDeletePosition -------------------------------------------------


def estimated_size_since_mark_delete(
    cursors: DataFrame,
    ledgers: DataFrame,
    managed_ledgers: DataFrame,
    pulsar_version: str = DEFAULT_PULSAR_VERSION,
) -> DataFrame:
    """Add ``estimated_size_since_mark_delete_bytes``: ``getEstimatedSizeSinceMarkDeletePosition()`` (§2.5).

    One row per cursor. Up to the versions without PR #25089 it is ``estimateBacklogFromPosition(md)``
    (acked ranges ignored). Master: with ``d`` acked entries in ``(md, LAC]`` and ``n`` the ML count of
    ``(md, LAC]``: ``d == 0`` -> the estimate; ``n == 0`` or ``n <= d`` -> ``max(0, estimate)``; else
    ``estimate - d * (estimate div n)``. Null md -> null. Pure and lazy.
    """
    beh = behaviour(pulsar_version)
    env = _Env.build(ledgers, managed_ledgers, beh)
    state = _cursor_state(env, cursors, with_plan=False)
    ctx = F.col(CTX)
    lac, lac_lk = ctx["lac"], ctx["lac_lk"]
    md, md_lk = F.col("_pa_md"), F.col("_pa_md_lk")
    staged = state.select(
        *CURSOR_KEY,
        CTX,
        "_pa_md",
        _estimate_from_position(md, md_lk, ctx, beh).alias("_total"),
        F.when(md < lac, F.col("_pa_idm_lac")).otherwise(F.lit(0).cast("long")).alias("_acked"),
        F.when(md < lac, open_closed_count(md, md_lk, lac, lac_lk, ctx, beh))
        .otherwise(F.lit(0).cast("long"))
        .alias("_in_range"),
    )
    total, acked, in_range = F.col("_total"), F.col("_acked"), F.col("_in_range")
    if beh.size_since_md_subtracts_acks:
        result = (
            F.when(acked == 0, total)
            .when((in_range == 0) | (in_range <= acked), F.greatest(F.lit(0).cast("long"), total))
            .otherwise(total - acked * F.call_function("div", total, in_range))
        )
    else:  # estimateBacklogFromPosition(md): acked ranges ignored
        result = total
    result = F.when(md.isNull() | ctx.isNull(), F.lit(None).cast("long")).otherwise(result)
    computed = staged.select(
        "cluster", "topic", "cursor_name", result.alias("estimated_size_since_mark_delete_bytes")
    )
    added = ["estimated_size_since_mark_delete_bytes"]
    base = cursors.select(*_keep(cursors.columns, added))
    return base.join(computed, on=["cluster", "topic", "cursor_name"], how="left")
