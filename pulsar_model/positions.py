"""Cursor and position arithmetic of the managed ledger as DataFrame transforms (SPEC §1, §11, §12).

Every transform is pure and lazy, works per ``(cluster, topic)`` and keeps one output row per input
request row (extra request columns are carried through). Version-dependent behaviour is selected with
``pulsar_version`` (see :mod:`pulsar_model.versions`).

How the sequential broker loops are expressed set-based:

* **ledger view**: one row per ledger with running sums (entries, sizes, ``getPositionAfterN`` totals),
  the last non-empty ledger before it, the next ledger after it and the first later ledger whose entry 0
  is valid - all window functions over the ledger list ordered by ledger id (§0.4 entry-index trick);
* **seeks**: "the ledger row with the largest id <= x" (and "the first ledger whose running total
  reaches v") are found by a union of the probe rows with the ledger rows and one running window - a
  sort per seek, no per-topic cross join;
* the ``getPositionAfterN`` walk becomes index arithmetic on the running totals, including the
  version-specific ends of the loop (clamp, phantom open-ledger entries, endless loops, NPEs);
* the per-cursor acked ranges are exploded once, decorated with their ledger lookups, the
  ``getNumIndividualDeletedEntriesToSkip`` running gaps and the mark-delete-extension chains, and
  collected back into one sorted array per cursor; per request the walk and the extension are then plain
  higher-order-function expressions over that array.

Errors the broker would raise (NPEs of old versions, Guava "Invalid range", "Invalid mark deleted
position", endless loops) never fail the job: the row gets a null result and an ``error`` string.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, StructField, StructType

from pulsar_model import DEFAULT_PULSAR_VERSION
from pulsar_model import columns as C
from pulsar_model.columns import (
    BASE_ROW_FIELDS,
    BASE_ROW_TYPE,
    LATEST,
    POSITION_TYPE,
    as_position,
    base_row,
    base_row_lookup,
    first_position,
    ledger_lookup,
    null_position,
    open_closed_count,
    position,
    remove_at_most,
    row_lookup,
)
from pulsar_model.versions import Behaviour, behaviour

__all__ = [
    "BOUND_START_EXCLUDED",
    "BOUND_START_INCLUDED",
    "DELETED_ENTRIES_EXCLUDE",
    "DELETED_ENTRIES_INCLUDE",
    "clear_backlog_plan",
    "entries_between",
    "is_valid_position",
    "next_valid_position",
    "position_after_n",
    "previous_position",
    "reset_cursor_plan",
    "skip_entries",
]

log = logging.getLogger(__name__)

#: ``PositionBound`` values of ``getPositionAfterN`` (SPEC §1.1, §1.9).
BOUND_START_INCLUDED = "startIncluded"
BOUND_START_EXCLUDED = "startExcluded"
#: ``ManagedCursor.IndividualDeletedEntries`` values of ``skipEntries`` (SPEC §1.1, §1.10).
DELETED_ENTRIES_INCLUDE = "Include"
DELETED_ENTRIES_EXCLUDE = "Exclude"
#: ``resetCursor`` target kinds (SPEC §1.11).
TARGET_POSITION = "position"
TARGET_EARLIEST = "earliest"
TARGET_LATEST = "latest"

KEY = ("cluster", "topic")
CURSOR_KEY = ("cluster", "topic", "cursor_name")

# Internal column names (prefixed so they never collide with request columns).
CTX = "_pa_ctx"

SeekMode = Literal["floor", "floor_strict", "ceil"]


# --- environment: ledger view, topic context, seeks --------------------------------------------------------


def _ml_frame(managed_ledgers: DataFrame) -> DataFrame:
    """One row per managed ledger with the normalised columns the arithmetic needs (SPEC §0.2)."""
    return managed_ledgers.select(
        F.col("cluster"),
        F.col("topic"),
        F.col("current_ledger_id").cast("long").alias("cur_id"),
        F.coalesce(F.col("current_ledger_entries").cast("long"), F.lit(0).cast("long")).alias("cle"),
        F.coalesce(F.col("current_ledger_size_bytes").cast("long"), F.lit(0).cast("long")).alias("cls"),
        as_position(F.col("last_confirmed_entry")).alias("lac"),
        F.coalesce(F.col("total_size_bytes").cast("long"), F.lit(0).cast("long")).alias("total_size"),
    )


def _open_ledger_walk_total(cle: Column, lac: Column, beh: Behaviour) -> Column:
    """``getPositionAfterN``'s entry count for the open ledger (SPEC §1.9, §11.2).

    3.x+ (and 2.10.1): ``LAC.entry + 1`` only when ``currentLedgerEntries > 0``; 2.x-old always
    ``LAC.entry + 1`` - the phantom entries of an empty open ledger.
    """
    lac_count = lac["entry_id"] + 1
    if beh.pan_current_ledger_guard:
        return F.when(cle > 0, lac_count).otherwise(F.lit(0).cast("long"))
    return lac_count


def _valid_entry0(lid: Column, ent: Column, is_cur: Column, lac: Column, beh: Behaviour) -> Column:
    """``isValidPosition((lid, 0))`` for a ledger present in the map (SPEC §1.4)."""
    if beh.new_valid_position:
        expr = is_cur | F.when(lid == lac["ledger_id"], lac["entry_id"] >= 0).otherwise(ent > 0)
    else:
        expr = (
            F.when(lid > lac["ledger_id"], F.lit(False))
            .when(lid == lac["ledger_id"], lac["entry_id"] + 1 >= 0)
            .otherwise(ent > 0)
        )
    return F.coalesce(expr, F.lit(False))


@dataclass(frozen=True)
class _Env:
    """The ledger view and topic context of one call, plus the seek helpers built on them."""

    beh: Behaviour
    view: DataFrame
    ctx: DataFrame

    @classmethod
    def build(cls, ledgers: DataFrame, managed_ledgers: DataFrame, beh: Behaviour) -> _Env:
        ml = _ml_frame(managed_ledgers)
        view = _ledger_view(ledgers, ml, beh)
        ctx = _context(ml, view, beh)
        return cls(beh=beh, view=view, ctx=ctx)

    def with_ctx(self, df: DataFrame) -> DataFrame:
        """Left-join the topic context struct ``_pa_ctx`` (null when the topic has no managed ledger)."""
        return df.join(self.ctx, on=list(KEY), how="left")

    def lookup(self, df: DataFrame, ledger_id: Column, out: str) -> DataFrame:
        """Add ``out``: the :func:`ledger_lookup` of ``ledger_id`` (needs ``_pa_ctx`` on ``df``)."""
        view = self.view.select(
            *KEY, F.col("lid").alias("_key"), F.col("lid").alias("_tb"), F.col("row").alias("_payload")
        )
        sought = _seek(df, ledger_id, view, "_pa_floor", mode="floor")
        cols = [F.col(f"`{c}`") for c in sought.columns if c != "_pa_floor"]
        return sought.select(*cols, ledger_lookup(ledger_id, F.col("_pa_floor"), F.col(CTX)).alias(out))

    def walk_stop(self, df: DataFrame, target: Column, out: str) -> DataFrame:
        """Add ``out``: the first ledger row (by id) whose running walk total is >= ``target`` (§1.9)."""
        view = self.view.select(
            *KEY,
            F.col("row.cum_walk").alias("_key"),
            F.col("lid").alias("_tb"),
            F.col("row").alias("_payload"),
        )
        return _seek(df, target, view, out, mode="ceil")


def _ledger_view(ledgers: DataFrame, ml: DataFrame, beh: Behaviour) -> DataFrame:
    """One row per ledger: ``cluster, topic, lid, valid0, cur_id, lac_lid, row``.

    ``row`` (the struct seeks return) has the :data:`~pulsar_model.columns.BASE_ROW_FIELDS`: ``lid, ent,
    sz`` (as listed: the open ledger is 0/0, SPEC §0.2), ``cum_ent, cum_sz`` (running sums including this
    ledger), ``is_cur``, ``walk`` (``getPositionAfterN`` total, §1.9), ``cum_walk``, ``prev_ne_lid,
    prev_ne_ent`` (last non-empty ledger before it, §1.3), ``nv0_gt`` (first later ledger whose entry 0 is
    valid, §1.5), ``succ_lid`` (next ledger id); plus ``nv0_row``, the base row of ledger ``nv0_gt``.
    """
    base = ledgers.select(
        F.col("cluster"),
        F.col("topic"),
        F.col("ledger_id").cast("long").alias("lid"),
        F.coalesce(F.col("entries").cast("long"), F.lit(0).cast("long")).alias("ent"),
        F.coalesce(F.col("size_bytes").cast("long"), F.lit(0).cast("long")).alias("sz"),
    ).where(F.col("lid").isNotNull())
    joined = base.join(ml.select(*KEY, "cur_id", "cle", "lac"), on=list(KEY), how="left")
    is_cur = F.coalesce(F.col("cur_id") == F.col("lid"), F.lit(False))
    walk = F.when(is_cur, _open_ledger_walk_total(F.col("cle"), F.col("lac"), beh)).otherwise(F.col("ent"))
    step1 = joined.select(
        *KEY,
        "lid",
        "ent",
        "sz",
        "cur_id",
        F.col("lac.ledger_id").alias("lac_lid"),
        is_cur.alias("is_cur"),
        walk.alias("walk"),
        _valid_entry0(F.col("lid"), F.col("ent"), is_cur, F.col("lac"), beh).alias("valid0"),
    )
    by_id = Window.partitionBy(*KEY).orderBy("lid")
    running = by_id.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    before = by_id.rowsBetween(Window.unboundedPreceding, -1)
    step2 = step1.select(
        "*",
        F.sum("ent").over(running).alias("cum_ent"),
        F.sum("sz").over(running).alias("cum_sz"),
        F.sum("walk").over(running).alias("cum_walk"),
        F.last(F.when(F.col("ent") > 0, F.struct("lid", "ent")), ignorenulls=True)
        .over(before)
        .alias("prev_ne"),
        F.lead("lid").over(by_id).alias("succ_lid"),
    )
    step2 = step2.select(
        "*", F.col("prev_ne.lid").alias("prev_ne_lid"), F.col("prev_ne.ent").alias("prev_ne_ent")
    )
    # "first later ledger with a valid entry 0": a running frame over the ids in descending order. Its
    # nested row leaves that ledger's own nv0_gt null: nothing walks two "next valid" steps from it.
    after = Window.partitionBy(*KEY).orderBy(F.col("lid").desc()).rowsBetween(Window.unboundedPreceding, -1)
    nested = F.struct(
        *[
            (F.lit(None).cast("long") if name == "nv0_gt" else F.col(name)).alias(name)
            for name in BASE_ROW_FIELDS
        ]
    ).cast(BASE_ROW_TYPE)
    step4 = step2.select(
        "*", F.last(F.when(F.col("valid0"), nested), ignorenulls=True).over(after).alias("nv0_row")
    )
    step4 = step4.select("*", F.col("nv0_row.lid").alias("nv0_gt"))
    row = F.struct(*[F.col(name) for name in BASE_ROW_FIELDS], F.col("nv0_row"))
    return step4.select(*KEY, "lid", "valid0", "cur_id", "lac_lid", row.alias("row"))


def _context(ml: DataFrame, view: DataFrame, beh: Behaviour) -> DataFrame:
    """One row per managed ledger: ``cluster, topic, _pa_ctx`` (the topic context struct, see columns.py).

    Besides the managed-ledger columns it carries the ledger-list summary (first/max ids, the open,
    last and first-valid ledger rows, the total of the ``getPositionAfterN`` walk) and the lookups of LAC's
    ledger (``lac_lk``) and of the open ledger (``cur_lk``), found by aggregation (largest id <= x).
    """
    below_lac = F.col("lid") <= F.col("lac_lid")
    below_cur = F.col("lid") <= F.col("cur_id")
    summary = view.groupBy(*KEY).agg(
        F.min("lid").alias("first_lid"),
        F.max("lid").alias("max_lid"),
        F.count(F.lit(1)).alias("n_ledgers"),
        F.min(F.when(F.col("valid0"), F.col("lid"))).alias("first_valid0_lid"),
        F.min_by(
            F.when(F.col("valid0"), base_row(F.col("row"))), F.when(F.col("valid0"), F.col("lid"))
        ).alias("first_valid0_row"),
        F.first(F.when(F.col("row.is_cur"), base_row(F.col("row"))), ignorenulls=True).alias("cur_row"),
        F.max_by(base_row(F.col("row")), F.col("lid")).alias("max_row"),
        F.sum("row.walk").alias("total_walk"),
        F.max_by(F.when(below_lac, F.col("row")), F.when(below_lac, F.col("lid"))).alias("_lac_floor"),
        F.max_by(F.when(below_cur, F.col("row")), F.when(below_cur, F.col("lid"))).alias("_cur_floor"),
    )
    joined = ml.join(summary, on=list(KEY), how="left")
    ctx0 = F.struct(
        "cur_id",
        "cle",
        "cls",
        "lac",
        "total_size",
        "first_lid",
        "max_lid",
        F.coalesce(F.col("n_ledgers"), F.lit(0).cast("long")).alias("n_ledgers"),
        "first_valid0_lid",
        F.col("first_valid0_row").cast(BASE_ROW_TYPE).alias("first_valid0_row"),
        _open_ledger_walk_total(F.col("cle"), F.col("lac"), beh).alias("w_cur"),
        F.coalesce(F.col("total_walk"), F.lit(0).cast("long")).alias("total_walk"),
        "cur_row",
        "max_row",
    )
    staged = joined.select(*KEY, ctx0.alias(CTX), "_lac_floor", "_cur_floor")
    ctx = F.col(CTX)
    lac_lk = ledger_lookup(ctx["lac"]["ledger_id"], F.col("_lac_floor"), ctx)
    cur_lk = ledger_lookup(ctx["cur_id"], F.col("_cur_floor"), ctx)
    staged = staged.select(*KEY, ctx.withField("lac_lk", lac_lk).withField("cur_lk", cur_lk).alias(CTX))
    # LAC's validity and next valid position and getFirstPosition()'s ledger, used by the 4.x
    # comparePositions (§1.7)
    lac_valid = F.coalesce(C.is_valid_position(ctx["lac"], ctx["lac_lk"], ctx, beh), F.lit(False))
    lac_next = C.next_valid_position(ctx["lac"], ctx["lac_lk"], ctx, beh)
    first_pos_lid = first_position(ctx)["ledger_id"]
    return staged.select(
        *KEY,
        ctx.withField("lac_valid", lac_valid)
        .withField("lac_next", lac_next)
        .withField("first_pos_lid", first_pos_lid)
        .alias(CTX),
    )


def _seek(
    df: DataFrame,
    key: Column,
    view: DataFrame,
    out: str,
    *,
    mode: SeekMode,
    part: Sequence[str] = KEY,
) -> DataFrame:
    """Add ``out``: the ``_payload`` of the ``view`` row matched by each ``df`` row (same ``part`` values).

    ``view`` has the columns ``part``, ``_key``, ``_tb`` (tie-break) and ``_payload``. Modes:
    ``floor``: largest ``_key <= key``; ``floor_strict``: largest ``_key < key`` (ties: largest ``_tb``);
    ``ceil``: smallest ``_key >= key`` (ties: smallest ``_tb``). Implemented as a union of both sides and one
    running ``last(ignorenulls)`` window; every ``df`` row is kept exactly once. Null keys match nothing.
    """
    payload_type = view.schema["_payload"].dataType
    key_type = view.schema["_key"].dataType
    probe_o, view_o = (0, 1) if mode == "floor_strict" else (1, 0)
    probes = df.select(
        "*",
        key.cast(key_type).alias("_sk_key"),
        F.lit(probe_o).alias("_sk_o"),
        F.lit(None).cast("long").alias("_sk_tb"),
        F.lit(None).cast(payload_type).alias("_sk_pl"),
        F.lit(True).alias("_sk_probe"),
    )
    views = view.select(
        *[F.col(f"`{c}`") for c in part],
        F.col("_key").alias("_sk_key"),
        F.lit(view_o).alias("_sk_o"),
        F.col("_tb").cast("long").alias("_sk_tb"),
        F.col("_payload").alias("_sk_pl"),
    )
    union = probes.unionByName(views, allowMissingColumns=True)
    if mode == "ceil":
        order = [F.col("_sk_key").desc_nulls_last(), F.col("_sk_o"), F.col("_sk_tb").desc()]
    else:
        order = [F.col("_sk_key").asc_nulls_first(), F.col("_sk_o"), F.col("_sk_tb")]
    window = (
        Window.partitionBy(*[F.col(f"`{c}`") for c in part])
        .orderBy(*order)
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    found = F.when(F.col("_sk_key").isNotNull(), F.last("_sk_pl", ignorenulls=True).over(window))
    matched = union.select(*[F.col(f"`{c}`") for c in df.columns], found.alias(out), "_sk_probe")
    return matched.where(F.col("_sk_probe")).drop("_sk_probe")


def _keep(df_columns: Sequence[str], added: Sequence[str]) -> list[Column]:
    """The request columns, minus any that an output column of the same name replaces."""
    return [F.col(f"`{c}`") for c in df_columns if c not in added]


def _ctx_missing_error() -> Column:
    return F.when(F.col(CTX).isNull(), F.lit("no managed_ledgers row for this cluster/topic"))


# --- §1.3 - §1.5 public transforms ----------------------------------------------------------------------


def previous_position(requests: DataFrame, ledgers: DataFrame, managed_ledgers: DataFrame) -> DataFrame:
    """Add ``previous_position``: ``getPreviousPosition(position)`` (SPEC §1.3, identical 2.x-4.x).

    One row per request (``cluster, topic, request_id, position``). ``(L,0)`` and ``(L,-1)`` both step to
    the last entry of the last earlier non-empty ledger, ``(first ledger, -1)`` when the earlier ledgers are
    all empty, ``(L,-1)`` when there is no earlier ledger. Null position -> null. Pure and lazy.
    """
    env = _Env.build(ledgers, managed_ledgers, behaviour(DEFAULT_PULSAR_VERSION))
    df = env.lookup(env.with_ctx(requests), F.col("position.ledger_id"), "_pa_lk")
    p = as_position(F.col("position"))
    result = F.when(F.col(CTX).isNull(), null_position()).otherwise(
        C.previous_position(p, F.col("_pa_lk"), F.col(CTX))
    )
    return df.select(*_keep(requests.columns, ["previous_position"]), result.alias("previous_position"))


def is_valid_position(
    requests: DataFrame,
    ledgers: DataFrame,
    managed_ledgers: DataFrame,
    pulsar_version: str = DEFAULT_PULSAR_VERSION,
) -> DataFrame:
    """Add ``is_valid``: ``isValidPosition(position)`` (SPEC §1.4) in the version's order.

    One row per request. 3.x/4.x: a position in a deleted ledger is never valid; the open ledger accepts
    entries up to ``LAC.entry+1`` (when LAC is in it) or entry 0; a closed LAC ledger accepts up to LAC.
    2.x-old: everything after LAC's ledger is invalid, LAC's ledger accepts ``LAC.entry+1``. Null when the
    position is null or the topic has no managed-ledger row. Pure and lazy.
    """
    beh = behaviour(pulsar_version)
    env = _Env.build(ledgers, managed_ledgers, beh)
    df = env.lookup(env.with_ctx(requests), F.col("position.ledger_id"), "_pa_lk")
    p = as_position(F.col("position"))
    result = F.when(p.isNull() | F.col(CTX).isNull(), F.lit(None).cast("boolean")).otherwise(
        C.is_valid_position(p, F.col("_pa_lk"), F.col(CTX), beh)
    )
    return df.select(*_keep(requests.columns, ["is_valid"]), result.alias("is_valid"))


def next_valid_position(
    requests: DataFrame,
    ledgers: DataFrame,
    managed_ledgers: DataFrame,
    pulsar_version: str = DEFAULT_PULSAR_VERSION,
) -> DataFrame:
    """Add ``next_valid_position``: ``getNextValidPosition(position)`` (SPEC §1.5).

    One row per request. ``P.next`` when valid, else entry 0 of the first later ledger where that is
    valid, else (3.x/4.x) ``(open ledger, 0)`` when the open ledger is empty or ``LAC.next``; 2.x-old
    always falls back to ``LAC.next``. Null position -> null. Pure and lazy.
    """
    beh = behaviour(pulsar_version)
    env = _Env.build(ledgers, managed_ledgers, beh)
    df = env.lookup(env.with_ctx(requests), F.col("position.ledger_id"), "_pa_lk")
    p = as_position(F.col("position"))
    result = C.next_valid_position(p, F.col("_pa_lk"), F.col(CTX), beh)
    return df.select(*_keep(requests.columns, ["next_valid_position"]), result.alias("next_valid_position"))


def entries_between(
    requests: DataFrame,
    ledgers: DataFrame,
    managed_ledgers: DataFrame,
    pulsar_version: str = DEFAULT_PULSAR_VERSION,
) -> DataFrame:
    """Add ``entries`` and ``error``: ``ManagedLedgerImpl.getNumberOfEntries(range)`` (SPEC §1.7).

    One row per request (``cluster, topic, request_id, lower, lower_closed, upper, upper_closed``).
    2.x/3.x arithmetic (``hi.entry`` taken literally, a deleted ``lo`` ledger contributes nothing) or the
    4.x arithmetic (clamps, deleted ledgers, ``(L,-1)`` lower ends). ``error`` is set and ``entries`` null
    when the broker throws: Guava cannot build a range with ``lower > upper`` (or ``open(a, a)``) in any
    version, and 4.x also rejects ``comparePositions(lower, upper) > 0`` ("Invalid range ..."). Pure and lazy.
    """
    beh = behaviour(pulsar_version)
    env = _Env.build(ledgers, managed_ledgers, beh)
    df = env.with_ctx(requests)
    df = env.lookup(df, F.col("lower.ledger_id"), "_pa_lk_lo")
    df = env.lookup(df, F.col("upper.ledger_id"), "_pa_lk_hi")
    lo, hi = as_position(F.col("lower")), as_position(F.col("upper"))
    lo_closed = F.coalesce(F.col("lower_closed").cast("boolean"), F.lit(False))
    hi_closed = F.coalesce(F.col("upper_closed").cast("boolean"), F.lit(False))
    count, err = C.entries_between(
        lo, F.col("_pa_lk_lo"), lo_closed, hi, F.col("_pa_lk_hi"), hi_closed, F.col(CTX), beh
    )
    df = df.select("*", count.alias("_pa_count"), err.alias("_pa_err"))
    error = F.coalesce(
        _ctx_missing_error(),
        F.when(lo.isNull() | hi.isNull(), F.lit("lower and upper must not be null")),
        F.col("_pa_err"),
    )
    df = df.select("*", error.alias("_pa_error"))
    return df.select(
        *_keep(requests.columns, ["entries", "error"]),
        F.when(F.col("_pa_error").isNull(), F.col("_pa_count")).alias("entries"),
        F.col("_pa_error").alias("error"),
    )


# --- §1.9 getPositionAfterN ------------------------------------------------------------------------------


def _position_after_n(
    env: _Env,
    df: DataFrame,
    start: Column,
    n: Column,
    bound: Column,
    prefix: str,
    start_lk: Column | None = None,
) -> DataFrame:
    """Add ``{prefix}_pos`` and ``{prefix}_err``: ``getPositionAfterN(start, n, bound)`` (SPEC §1.9).

    ``df`` must carry ``_pa_ctx``; ``start_lk`` may pass an existing lookup of the start's ledger. The
    walk is index arithmetic on the running per-ledger totals (``cum_walk``): after the first ledger the
    loop stops at the first ledger whose running total reaches ``base + remaining`` or at the open ledger,
    whichever comes first; past the last ledger each version ends differently (see versions.py).
    """
    beh = env.beh
    ctx = F.col(CTX)

    def c(name: str) -> Column:
        return F.col(f"{prefix}_{name}")

    df = df.select(
        "*",
        as_position(start).alias(f"{prefix}_s"),
        n.cast("long").alias(f"{prefix}_n"),
        bound.alias(f"{prefix}_bound"),
    )
    if start_lk is None:
        df = env.lookup(df, c("s")["ledger_id"], f"{prefix}_lk_s")
    else:
        df = df.select("*", start_lk.alias(f"{prefix}_lk_s"))
    s_pos, lk_s, nn, bd = c("s"), c("lk_s"), c("n"), c("bound")
    df = df.select("*", C.next_position_is_valid(s_pos, lk_s, ctx, beh).alias(f"{prefix}_qv"))
    excluded = bd == BOUND_START_EXCLUDED
    included = bd == BOUND_START_INCLUDED
    cur0 = (
        F.when(included, s_pos)
        .when(excluded, C.next_valid_position(s_pos, lk_s, ctx, beh, q_valid=c("qv")))
        .otherwise(null_position())
    )
    lk0 = F.when(included, lk_s).when(excluded, C.next_valid_lookup(c("qv"), lk_s, ctx, beh))
    df = df.select("*", cur0.alias(f"{prefix}_c0"), lk0.alias(f"{prefix}_lk0"))
    c0, lk0c = c("c0"), c("lk0")
    e0 = c0["entry_id"]
    total0 = F.coalesce(lk0c["walk"], F.lit(0).cast("long"))
    if beh.pan_unread_guard:
        unread0 = F.when(total0 > 0, total0 - e0).otherwise(F.lit(0).cast("long"))
    else:
        unread0 = total0 - e0
    negative = nn < 0  # "while (entriesToSkip >= 0)" never runs
    # 2.x-old: ledgers.get(id).getEntries() on a ledger missing from the map throws an NPE
    npe_first = F.lit(False) if beh.pan_deleted_ledger_as_empty else ~negative & lk0c["walk"].isNull()
    df = df.select(
        "*",
        total0.alias(f"{prefix}_t0"),
        unread0.alias(f"{prefix}_u0"),
        F.coalesce(negative, F.lit(False)).alias(f"{prefix}_neg"),
        F.coalesce(npe_first, F.lit(False)).alias(f"{prefix}_npe"),
    )
    first = ~c("neg") & ~c("npe") & (c("u0") >= nn)
    walk_needed = ~c("neg") & ~c("npe") & ~first & ~F.coalesce(lk0c["is_cur"], F.lit(False))
    df = df.select(
        "*",
        F.coalesce(first, F.lit(False)).alias(f"{prefix}_first"),
        F.coalesce(walk_needed, F.lit(False)).alias(f"{prefix}_walk"),
        (lk0c["cum_walk_le"] + (nn - c("u0"))).alias(f"{prefix}_target"),
    )
    df = env.walk_stop(df, F.when(c("walk"), c("target")), f"{prefix}_stop")

    a_row, tgt = c("stop"), c("target")
    cur_row, max_row = ctx["cur_row"], ctx["max_row"]
    open_ahead = cur_row.isNotNull() & (ctx["cur_id"] > c0["ledger_id"])
    use_a = a_row.isNotNull() & (~open_ahead | (a_row["lid"] < ctx["cur_id"]))
    df = df.select(
        "*",
        F.coalesce(use_a, F.lit(False)).alias(f"{prefix}_use_a"),
        F.coalesce(open_ahead & ~use_a, F.lit(False)).alias(f"{prefix}_use_open"),
        (tgt - ctx["total_walk"]).alias(f"{prefix}_rem"),
    )
    remaining = c("rem")
    if beh.pan_past_end == "revisit_last_ledger":
        max_walk = max_row["walk"]
        end_pos = (
            F.when(max_row.isNull(), null_position())
            .when(max_row["is_cur"], position(max_row["lid"], F.least(remaining, ctx["w_cur"])))
            .when(max_walk > 0, position(max_row["lid"], F.pmod(remaining - 1, max_walk) + 1))
            .otherwise(null_position())
        )
        end_error = (
            F.when(
                max_row.isNull(), F.lit("NoSuchElementException: ledgers.lastKey() on an empty ledger map")
            )
            .when(max_row["is_cur"] | (max_walk > 0), F.lit(None).cast("string"))
            .otherwise(
                F.lit(
                    "getPositionAfterN never returns: the last ledger is empty and not the open ledger, so "
                    "the broker re-visits ledgers.lastKey() forever"
                )
            )
        )
    elif beh.pan_past_end == "loop_forever":
        end_pos = null_position()
        end_error = F.lit(
            "getPositionAfterN never returns: past the last ledger it moves to ledgers.lastKey()+1, which is "
            "absent from the map and counts 0 entries, forever"
        )
    else:
        end_pos = null_position()
        end_error = F.lit(
            "NullPointerException: getPositionAfterN ran past the last ledger (ledgers.lastKey()+1 is not in "
            "the ledger map)"
        )
    neg, npe, first_c, use_a_c, use_open = c("neg"), c("npe"), c("first"), c("use_a"), c("use_open")
    at_open = F.coalesce(lk0c["is_cur"], F.lit(False))
    cur = (
        F.when(neg, c0)
        .when(npe, null_position())
        .when(first_c, position(c0["ledger_id"], e0 + nn))
        .when(at_open, position(c0["ledger_id"], c("t0")))
        .when(use_a_c, position(a_row["lid"], tgt - (a_row["cum_walk"] - a_row["walk"])))
        .when(
            use_open,
            position(ctx["cur_id"], F.least(tgt - (cur_row["cum_walk"] - ctx["w_cur"]), ctx["w_cur"])),
        )
        .otherwise(end_pos)
    )
    cur_lk = (
        F.when(neg | first_c | at_open, lk0c)
        .when(use_a_c, row_lookup(a_row, ctx))
        .when(use_open, base_row_lookup(cur_row, ctx))
        .when(max_row.isNotNull(), base_row_lookup(max_row, ctx))
    )
    walk_error = F.when(~(neg | npe | first_c | at_open | use_a_c | use_open), end_error)
    npe_error = F.when(
        npe,
        F.concat(
            F.lit("NullPointerException: getPositionAfterN reads ledgers.get("),
            c0["ledger_id"].cast("string"),
            F.lit(").getEntries() of a ledger missing from the map"),
        ),
    )
    bound_error = F.when(
        ~F.coalesce(bd.isin(BOUND_START_INCLUDED, BOUND_START_EXCLUDED), F.lit(False)),
        F.concat(
            F.lit("unknown bound "),
            F.coalesce(bd, F.lit("null")),
            F.lit("; expected startIncluded|startExcluded"),
        ),
    )
    error = F.coalesce(
        _ctx_missing_error(),
        F.when(s_pos.isNull(), F.lit("start position is null")),
        F.when(nn.isNull(), F.lit("n is null")),
        bound_error,
        npe_error,
        walk_error,
    )
    df = df.select(
        "*", cur.alias(f"{prefix}_cur"), cur_lk.alias(f"{prefix}_cur_lk"), error.alias(f"{prefix}_err")
    )
    df = df.select("*", C.previous_position(c("cur"), c("cur_lk"), ctx).alias(f"{prefix}_prev"))
    result = c("prev")
    if beh.pan_lac_clamp:
        result = F.when(result > ctx["lac"], ctx["lac"]).otherwise(result)
    return df.select("*", F.when(c("err").isNull(), result).alias(f"{prefix}_pos"))


def position_after_n(
    requests: DataFrame,
    ledgers: DataFrame,
    managed_ledgers: DataFrame,
    pulsar_version: str = DEFAULT_PULSAR_VERSION,
) -> DataFrame:
    """Add ``position`` and ``error``: ``getPositionAfterN(start_position, n, bound)`` (SPEC §1.9).

    One row per request (``cluster, topic, request_id, start_position, n, bound``). ``startExcluded`` starts
    from ``nextValid(start)``; the open ledger counts ``LAC.entry+1`` entries (3.x+: only when it has
    entries; 2.x-old: always - phantom entries); deleted ledgers count 0 (2.x-old: NPE); the result is
    ``getPreviousPosition`` of where the walk stops, clamped to LAC from 2.10.1 on. Overshooting N lands on
    LAC (3.x+). When the broker would throw or loop forever, ``position`` is null and ``error`` says why.
    Pure and lazy.
    """
    beh = behaviour(pulsar_version)
    env = _Env.build(ledgers, managed_ledgers, beh)
    df = _position_after_n(
        env, env.with_ctx(requests), F.col("start_position"), F.col("n"), F.col("bound"), "_pa_pan"
    )
    return df.select(
        *_keep(requests.columns, ["position", "error"]),
        F.col("_pa_pan_pos").alias("position"),
        F.col("_pa_pan_err").alias("error"),
    )


# --- cursor state: acked ranges with lookups, gaps and extension chains ------------------------------------


def _cursor_state(env: _Env, cursors: DataFrame, *, with_plan: bool) -> DataFrame:
    """One row per cursor: key, ``_pa_md`` (+ ``_pa_md_lk``), ``_pa_ctx``, ``_pa_rng`` and ``_pa_idm_lac``.

    ``_pa_rng`` is the sorted array of acked ranges ``(a, b]`` with ``idx, a, b, a_lk, b_lk`` and, when
    ``with_plan``: ``processed, gap, cumgap, del`` (the ``getNumIndividualDeletedEntriesToSkip`` walk,
    §1.10), ``chain_upper, chain_upper_lk`` (where the mark-delete extension of §1.2 ends when it enters
    this range) and ``inter_md`` (ML count of the range's part after md). ``_pa_idm_lac`` is the ML count
    of the acked entries in ``(md, LAC]`` - the IDM part of the cursor count (§1.8), computed per range
    as the count of the Guava intersection ``(max(a, md), min(b, LAC)]`` when the ranges connect.
    """
    beh = env.beh
    base = cursors.select(
        *CURSOR_KEY,
        as_position(F.col("mark_delete_position")).alias("_pa_md"),
        F.col("individually_deleted").alias("_pa_idm"),
    )
    base = env.lookup(env.with_ctx(base), F.col("_pa_md.ledger_id"), "_pa_md_lk")
    exploded = base.select(
        *CURSOR_KEY,
        "_pa_md",
        "_pa_md_lk",
        CTX,
        F.explode(F.coalesce(F.col("_pa_idm"), F.array())).alias("_pa_r"),
    ).where(F.col("_pa_r").isNotNull() & F.col("_pa_r.lower").isNotNull() & F.col("_pa_r.upper").isNotNull())
    exploded = exploded.select(
        *CURSOR_KEY,
        "_pa_md",
        "_pa_md_lk",
        CTX,
        as_position(F.col("_pa_r.lower")).alias("a"),
        as_position(F.col("_pa_r.upper")).alias("b"),
    )
    by_range = Window.partitionBy(*CURSOR_KEY).orderBy("a", "b")
    exploded = exploded.select("*", F.row_number().over(by_range).alias("idx"))
    exploded = env.lookup(exploded, F.col("a.ledger_id"), "a_lk")
    exploded = env.lookup(exploded, F.col("b.ledger_id"), "b_lk")
    ctx = F.col(CTX)
    md, md_lk = F.col("_pa_md"), F.col("_pa_md_lk")
    a_after_md = F.col("a") >= md
    b_before_lac = F.col("b") <= ctx["lac"]
    exploded = exploded.select(
        "*",
        F.when(a_after_md, F.col("a")).otherwise(md).alias("_pa_ilo"),
        F.when(a_after_md, F.col("a_lk")).otherwise(md_lk).alias("_pa_ilo_lk"),
        F.when(b_before_lac, F.col("b")).otherwise(ctx["lac"]).alias("_pa_ihi"),
        F.when(b_before_lac, F.col("b_lk")).otherwise(ctx["lac_lk"]).alias("_pa_ihi_lk"),
    )
    ilo, ilo_lk, ihi, ihi_lk = F.col("_pa_ilo"), F.col("_pa_ilo_lk"), F.col("_pa_ihi"), F.col("_pa_ihi_lk")
    inter_lac = F.when(ilo <= ihi, open_closed_count(ilo, ilo_lk, ihi, ihi_lk, ctx, beh)).otherwise(
        F.lit(0).cast("long")
    )
    exploded = exploded.select("*", inter_lac.alias("_pa_inter_lac"))
    fields: list[Column] = [F.col("idx"), F.col("a"), F.col("b"), F.col("a_lk"), F.col("b_lk")]
    if with_plan:
        inter_md = F.when(
            F.col("b") > md, open_closed_count(ilo, ilo_lk, F.col("b"), F.col("b_lk"), ctx, beh)
        ).otherwise(F.lit(0).cast("long"))
        exploded = exploded.select("*", inter_md.alias("inter_md"))
        # Extension links: from the upper end b, nextValid(b) <= LAC and inside a later acked range.
        exploded = exploded.select(
            "*", C.next_position_is_valid(F.col("b"), F.col("b_lk"), ctx, beh).alias("_pa_qv")
        )
        exploded = exploded.select(
            "*",
            C.next_valid_position(F.col("b"), F.col("b_lk"), ctx, beh, q_valid=F.col("_pa_qv")).alias(
                "_pa_p"
            ),
        )
        ranges_view = exploded.select(
            *CURSOR_KEY,
            F.col("a").alias("_key"),
            F.col("idx").alias("_tb"),
            F.struct("idx", "a", "b").alias("_payload"),
        )
        exploded = _seek(
            exploded, F.col("_pa_p"), ranges_view, "_pa_cont", mode="floor_strict", part=CURSOR_KEY
        )
        link = (
            (F.col("_pa_p") <= ctx["lac"])
            & F.col("_pa_cont").isNotNull()
            & (F.col("_pa_p") <= F.col("_pa_cont.b"))
        )
        link = F.coalesce(link, F.lit(False))
        chain_frame = (
            Window.partitionBy(*CURSOR_KEY)
            .orderBy(F.col("idx").desc())
            .rowsBetween(Window.unboundedPreceding, Window.currentRow)
        )
        chain = F.last(
            F.when(~link, F.struct(F.col("b").alias("u"), F.col("b_lk").alias("u_lk"))), ignorenulls=True
        )
        processed = F.coalesce(F.col("a") >= F.col("_pa_md"), F.lit(False))
        by_idx = Window.partitionBy(*CURSOR_KEY).orderBy("idx")
        exploded = exploded.select(
            "*",
            chain.over(chain_frame).alias("_pa_chain"),
            processed.alias("processed"),
            F.lag(processed).over(by_idx).alias("_pa_prev_processed"),
            F.lag("b").over(by_idx).alias("_pa_prev_b"),
            F.lag("b_lk").over(by_idx).alias("_pa_prev_b_lk"),
        )
        from_prev = F.col("processed") & F.coalesce(F.col("_pa_prev_processed"), F.lit(False))
        start = F.when(from_prev, F.col("_pa_prev_b")).otherwise(F.col("_pa_md"))
        start_lk = F.when(from_prev, F.col("_pa_prev_b_lk")).otherwise(F.col("_pa_md_lk"))
        gap = F.when(
            F.col("processed"), open_closed_count(start, start_lk, F.col("a"), F.col("a_lk"), ctx, beh)
        )
        deleted = F.when(
            F.col("processed"),
            open_closed_count(F.col("a"), F.col("a_lk"), F.col("b"), F.col("b_lk"), ctx, beh),
        )
        exploded = exploded.select("*", gap.alias("gap"), deleted.alias("del"))
        running = by_idx.rowsBetween(Window.unboundedPreceding, Window.currentRow)
        exploded = exploded.select("*", F.sum("gap").over(running).alias("cumgap"))
        fields += [
            F.col("processed"),
            F.col("gap"),
            F.col("cumgap"),
            F.col("del"),
            F.col("_pa_chain.u").alias("chain_upper"),
            F.col("_pa_chain.u_lk").alias("chain_upper_lk"),
            F.col("inter_md"),
        ]
    collected = exploded.groupBy(*CURSOR_KEY).agg(
        F.array_sort(F.collect_list(F.struct(*fields))).alias("_pa_rng"),
        F.sum("_pa_inter_lac").alias("_pa_idm_lac"),
    )
    element = collected.schema["_pa_rng"].dataType
    assert isinstance(element, ArrayType)
    empty = F.array().cast(element)
    joined = base.join(collected, on=list(CURSOR_KEY), how="left")
    return joined.select(
        *CURSOR_KEY,
        "_pa_md",
        "_pa_md_lk",
        CTX,
        F.coalesce(F.col("_pa_rng"), empty).alias("_pa_rng"),
        F.coalesce(F.col("_pa_idm_lac"), F.lit(0).cast("long")).alias("_pa_idm_lac"),
    )


def _ranges_out(ranges: Column) -> Column:
    """The internal range array as ``array<struct<lower, upper>>`` (the ``individually_deleted`` shape)."""
    return F.transform(ranges, lambda r: F.struct(r["a"].alias("lower"), r["b"].alias("upper")))


def _mark_delete(env: _Env, df: DataFrame, target: Column, target_error: Column, prefix: str) -> DataFrame:
    """``asyncMarkDelete(target)`` on the cursor state of each row (SPEC §1.2, §1.10, §1.11).

    Adds ``{prefix}_md`` (final mark-delete), ``{prefix}_rp``, ``{prefix}_idm``, ``{prefix}_newly`` (entries
    newly covered that were not already acked) and ``{prefix}_err``. Rules, as in ``asyncMarkDelete`` and
    ``setAcknowledgedPosition``: a target beyond LAC is rejected ("Invalid mark deleted position") unless
    the cursor finished its ledger and the target is in the ledger after LAC's; a target before md is
    ignored (``MarkDeletingMarkedPosition`` is reported as success by skip/clear); a target equal to md
    changes nothing but ``removeAtMost(md)``; otherwise md moves and extends over acked ranges starting at
    ``nextValid(md)`` while that is ``<= LAC``.
    """
    beh = env.beh
    ctx = F.col(CTX)
    lac = ctx["lac"]
    md, md_lk, rng = F.col("_pa_md"), F.col("_pa_md_lk"), F.col("_pa_rng")

    def c(name: str) -> Column:
        return F.col(f"{prefix}_{name}")

    df = df.select("*", target.alias(f"{prefix}_t"), target_error.alias(f"{prefix}_terr"))
    df = env.lookup(df, c("t")["ledger_id"], f"{prefix}_lk_t")
    t, lk_t = c("t"), c("lk_t")
    next_after_lac = ctx["lac_lk"]["next_lid"]
    finished_ledger = F.coalesce(md_lk["exists"] & (md["entry_id"] + 1 >= md_lk["ent"]), F.lit(False))
    may_pass_lac = F.coalesce(
        next_after_lac.isNotNull() & finished_ledger & (t["ledger_id"] == next_after_lac), F.lit(False)
    )
    failed = c("terr").isNotNull() | t.isNull() | md.isNull() | ctx.isNull()
    rejected = ~failed & (t > lac) & ~may_pass_lac
    df = df.select(
        "*",
        C.next_position_is_valid(t, lk_t, ctx, beh).alias(f"{prefix}_qv"),
        F.coalesce(failed, F.lit(True)).alias(f"{prefix}_failed"),
        F.coalesce(rejected, F.lit(False)).alias(f"{prefix}_rej"),
    )
    forward = ~c("failed") & ~c("rej") & (t > md)
    df = df.select(
        "*",
        F.coalesce(forward, F.lit(False)).alias(f"{prefix}_fwd"),
        C.next_valid_position(t, lk_t, ctx, beh, q_valid=c("qv")).alias(f"{prefix}_p0"),
    )
    p0 = c("p0")
    containing = F.element_at(F.filter(rng, lambda r: (r["a"] < p0) & (p0 <= r["b"])), 1)
    df = df.select("*", F.when(c("fwd") & (p0 <= lac), containing).alias(f"{prefix}_cont"))
    fwd, cont = c("fwd"), c("cont")
    extended = fwd & cont.isNotNull()
    final = F.when(extended, cont["chain_upper"]).when(fwd, t).otherwise(md)
    final_lk = F.when(extended, cont["chain_upper_lk"]).when(fwd, lk_t).otherwise(md_lk)
    df = df.select("*", final.alias(f"{prefix}_fm"), final_lk.alias(f"{prefix}_fm_lk"))
    fm, fm_lk = c("fm"), c("fm_lk")
    # acked entries inside (md, final]: ranges ending by final count their part after md (precomputed);
    # a range straddling final counts (max(a, md), final]
    straddler = F.element_at(F.filter(rng, lambda r: (r["a"] < fm) & (fm < r["b"])), 1)
    before_final = F.aggregate(
        F.filter(rng, lambda r: r["b"] <= fm), F.lit(0).cast("long"), lambda acc, r: acc + r["inter_md"]
    )
    df = df.select("*", straddler.alias(f"{prefix}_st"), before_final.alias(f"{prefix}_bf"))
    st = c("st")
    st_from_a = st["a"] >= md
    df = df.select(
        "*",
        F.when(st_from_a, st["a"]).otherwise(md).alias(f"{prefix}_st_lo"),
        F.when(st_from_a, st["a_lk"]).otherwise(md_lk).alias(f"{prefix}_st_lo_lk"),
    )
    straddled = F.when(
        st.isNotNull(), open_closed_count(c("st_lo"), c("st_lo_lk"), fm, fm_lk, ctx, beh)
    ).otherwise(F.lit(0).cast("long"))
    newly = F.when(fwd, open_closed_count(md, md_lk, fm, fm_lk, ctx, beh) - c("bf") - straddled).otherwise(
        F.lit(0).cast("long")
    )
    ignored = c("failed") | c("rej") | (t < md)  # setAcknowledgedPosition never ran (or threw first)
    idm = F.when(F.coalesce(ignored, F.lit(True)), _ranges_out(rng)).otherwise(remove_at_most(rng, fm))
    error = F.coalesce(
        _ctx_missing_error(),
        F.when(md.isNull(), F.lit("cursor not found or its mark_delete_position is null")),
        c("terr"),
        F.when(c("rej"), F.lit("ManagedLedgerException: Invalid mark deleted position")),
    )
    df = df.select(
        "*",
        C.next_position_is_valid(fm, fm_lk, ctx, beh).alias(f"{prefix}_fqv"),
        idm.alias(f"{prefix}_idm"),
        newly.alias(f"{prefix}_newly"),
        error.alias(f"{prefix}_err"),
    )
    return df.select(
        "*",
        fm.alias(f"{prefix}_md"),
        C.next_valid_position(fm, fm_lk, ctx, beh, q_valid=c("fqv")).alias(f"{prefix}_rp"),
    )


def _join_cursor_state(env: _Env, requests: DataFrame, state: DataFrame) -> DataFrame:
    """Requests + their cursor's state (null when the cursor is unknown) + the topic context."""
    return env.with_ctx(requests.join(state.drop(CTX), on=list(CURSOR_KEY), how="left"))


# --- §1.10 skipEntries -------------------------------------------------------------------------------------


def skip_entries(
    requests: DataFrame,
    cursors: DataFrame,
    ledgers: DataFrame,
    managed_ledgers: DataFrame,
    pulsar_version: str = DEFAULT_PULSAR_VERSION,
) -> DataFrame:
    """Dry-run ``cursor.skipEntries(n, deletedEntries)`` (SPEC §1.10): one row per request.

    Requests: ``cluster, topic, cursor_name, n, deleted_entries`` (``Include``|``Exclude``), any other
    column (e.g. ``request_id``) is carried through. Adds:

    * ``target_position``: ``getPositionAfterN(md, n + extra, startExcluded)``; ``extra`` is
      ``getNumIndividualDeletedEntriesToSkip(n)`` for ``Exclude`` (acked entries met before the n-th
      unacked one), 0 for ``Include``;
    * ``mark_delete_position``: after ``asyncMarkDelete(target)``: never backwards (a target before the
      current md leaves it), extended over acked ranges that start right after it (§1.2);
    * ``read_position``: ``nextValid(mark_delete_position)``;
    * ``individually_deleted``: the remaining acked ranges, ``removeAtMost(md)`` - ranges ``<= md`` are
      dropped, a range straddling md is cut to ``(md, upper]``;
    * ``skipped_entries``: entries newly covered by md that were not already acked (cursor count of
      ``(old md, new md]``);
    * ``error``: why the broker would fail (e.g. 2.x-old NPE, "Invalid mark deleted position" when an
      unclamped 2.x target lies beyond LAC); the cursor is then left unchanged.

    Pure and lazy.
    """
    beh = behaviour(pulsar_version)
    env = _Env.build(ledgers, managed_ledgers, beh)
    state = _cursor_state(env, cursors, with_plan=True)
    df = _join_cursor_state(env, requests, state)
    n = F.col("n").cast("long")
    rng = F.col("_pa_rng")
    stop = F.array_min(
        F.transform(F.filter(rng, lambda r: r["processed"] & (r["cumgap"] >= n)), lambda r: r["idx"])
    )
    df = df.select("*", stop.alias("_pa_stop_idx"))
    stop_col = F.col("_pa_stop_idx")
    extra = F.aggregate(
        F.filter(rng, lambda r: r["processed"] & (stop_col.isNull() | (r["idx"] < stop_col))),
        F.lit(0).cast("long"),
        lambda acc, r: acc + F.coalesce(r["del"], F.lit(0).cast("long")),
    )
    mode = F.col("deleted_entries")
    extra = F.when(mode == DELETED_ENTRIES_EXCLUDE, extra).otherwise(F.lit(0).cast("long"))
    df = df.select("*", extra.alias("_pa_extra"))
    df = _position_after_n(
        env, df, F.col("_pa_md"), n + F.col("_pa_extra"), F.lit(BOUND_START_EXCLUDED), "_pa_sk"
    )
    mode_error = F.when(
        ~mode.isin(DELETED_ENTRIES_INCLUDE, DELETED_ENTRIES_EXCLUDE) | mode.isNull(),
        F.concat(
            F.lit("unknown deleted_entries "),
            F.coalesce(mode, F.lit("null")),
            F.lit("; expected Include|Exclude"),
        ),
    )
    md_missing = F.when(
        F.col("_pa_md").isNull(), F.lit("cursor not found or its mark_delete_position is null")
    )
    target_error = F.coalesce(md_missing, mode_error, F.col("_pa_sk_err"))
    df = _mark_delete(env, df, F.col("_pa_sk_pos"), target_error, "_pa_mdp")
    added = [
        "target_position",
        "mark_delete_position",
        "read_position",
        "individually_deleted",
        "skipped_entries",
        "error",
    ]
    return df.select(
        *_keep(requests.columns, added),
        F.when(target_error.isNull(), F.col("_pa_sk_pos")).alias("target_position"),
        F.col("_pa_mdp_md").alias("mark_delete_position"),
        F.col("_pa_mdp_rp").alias("read_position"),
        F.col("_pa_mdp_idm").alias("individually_deleted"),
        F.col("_pa_mdp_newly").alias("skipped_entries"),
        F.col("_pa_mdp_err").alias("error"),
    )


# --- §1.11 clearBacklog / resetCursor ---------------------------------------------------------------


def clear_backlog_plan(
    requests: DataFrame,
    cursors: DataFrame,
    ledgers: DataFrame,
    managed_ledgers: DataFrame,
    pulsar_version: str = DEFAULT_PULSAR_VERSION,
) -> DataFrame:
    """Dry-run ``cursor.clearBacklog()`` = mark-delete at LAC (SPEC §1.11): one row per request.

    Requests: ``cluster, topic, cursor_name`` (+ carried columns). Adds ``mark_delete_position`` (LAC, or
    unchanged when the cursor is already past LAC), ``read_position`` (``nextValid(md)``),
    ``individually_deleted`` (``removeAtMost(md)``), ``cleared_entries`` (not-yet-acked entries in
    ``(old md, LAC]``) and ``error``. Pure and lazy.
    """
    beh = behaviour(pulsar_version)
    env = _Env.build(ledgers, managed_ledgers, beh)
    state = _cursor_state(env, cursors, with_plan=True)
    df = _join_cursor_state(env, requests, state)
    df = _mark_delete(env, df, F.col(f"{CTX}.lac"), F.lit(None).cast("string"), "_pa_mdp")
    added = ["mark_delete_position", "read_position", "individually_deleted", "cleared_entries", "error"]
    return df.select(
        *_keep(requests.columns, added),
        F.col("_pa_mdp_md").alias("mark_delete_position"),
        F.col("_pa_mdp_rp").alias("read_position"),
        F.col("_pa_mdp_idm").alias("individually_deleted"),
        F.col("_pa_mdp_newly").alias("cleared_entries"),
        F.col("_pa_mdp_err").alias("error"),
    )


def reset_cursor_plan(
    requests: DataFrame,
    cursors: DataFrame,
    ledgers: DataFrame,
    managed_ledgers: DataFrame,
    pulsar_version: str = DEFAULT_PULSAR_VERSION,
) -> DataFrame:
    """Dry-run ``cursor.resetCursor(target)`` (SPEC §1.11, ``asyncResetCursor``/``internalResetCursor``).

    Requests: ``cluster, topic, cursor_name, target_kind`` (``position``|``earliest``|``latest``) and
    ``target`` (a position, used for ``position``; ``(-1,-1)`` / ``(MAX,MAX)`` mean earliest / latest).
    A target that is not a valid position moves to ``nextValid(target)``; earliest reads from
    ``getFirstPosition()``; latest from ``nextValid(LAC)`` (3.x+) or ``LAC.next`` (2.x). Adds
    ``mark_delete_position`` = ``getPreviousPosition(read_position)``, ``read_position``, an empty
    ``individually_deleted`` and ``error``. Reset by publish time is not covered here. Pure and lazy.
    """
    beh = behaviour(pulsar_version)
    env = _Env.build(ledgers, managed_ledgers, beh)
    ctx = F.col(CTX)
    lac = ctx["lac"]
    has_target = "target" in requests.columns
    cursor_md = cursors.select(*CURSOR_KEY, as_position(F.col("mark_delete_position")).alias("_pa_md"))
    df = env.with_ctx(requests.join(cursor_md, on=list(CURSOR_KEY), how="left"))
    kind = F.col("target_kind")
    raw = as_position(F.col("target")) if has_target else null_position()
    earliest, latest = position(-1, -1), position(*LATEST)
    proposed = (
        F.when(kind == TARGET_EARLIEST, earliest)
        .when(kind == TARGET_LATEST, latest)
        .when(kind == TARGET_POSITION, raw)
        .otherwise(null_position())
    )
    df = df.select("*", proposed.alias("_pa_prop"))
    prop = F.col("_pa_prop")
    df = env.lookup(df, prop["ledger_id"], "_pa_lk_prop")
    special = (prop == earliest) | (prop == latest)
    valid = C.is_valid_position(prop, F.col("_pa_lk_prop"), ctx, beh)
    actual = F.when(special | valid, prop).otherwise(
        C.next_valid_position(prop, F.col("_pa_lk_prop"), ctx, beh)
    )
    if beh.reset_latest_next_valid:
        latest_read = C.next_valid_position(lac, ctx["lac_lk"], ctx, beh)
    else:
        latest_read = position(lac["ledger_id"], lac["entry_id"] + 1)
    new_read = (
        F.when(actual == earliest, first_position(ctx)).when(actual == latest, latest_read).otherwise(actual)
    )
    df = df.select("*", new_read.alias("_pa_read"))
    rd = F.col("_pa_read")
    df = env.lookup(df, rd["ledger_id"], "_pa_lk_read")
    new_md = C.previous_position(rd, F.col("_pa_lk_read"), ctx)
    kind_error = F.when(
        ~kind.isin(TARGET_POSITION, TARGET_EARLIEST, TARGET_LATEST) | kind.isNull(),
        F.concat(
            F.lit("unknown target_kind "),
            F.coalesce(kind, F.lit("null")),
            F.lit("; expected position|earliest|latest"),
        ),
    )
    error = F.coalesce(
        _ctx_missing_error(),
        F.when(F.col("_pa_md").isNull(), F.lit("cursor not found or its mark_delete_position is null")),
        kind_error,
        F.when(prop.isNull(), F.lit("target is null for target_kind 'position'")),
        F.when(rd.isNull(), F.lit("NullPointerException: getFirstPosition() is null (no ledgers)")),
    )
    empty_ranges = F.array().cast(
        ArrayType(StructType([StructField("lower", POSITION_TYPE), StructField("upper", POSITION_TYPE)]))
    )
    added = ["mark_delete_position", "read_position", "individually_deleted", "error"]
    return df.select(
        *_keep(requests.columns, added),
        F.when(error.isNull(), new_md).alias("mark_delete_position"),
        F.when(error.isNull(), rd).alias("read_position"),
        F.when(error.isNull(), empty_ranges).alias("individually_deleted"),
        error.alias("error"),
    )
