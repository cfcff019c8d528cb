"""Column -> Column helpers for Pulsar positions and managed-ledger arithmetic (SPEC §0.1, §1, §2.2).

A position is ``struct<ledger_id: bigint, entry_id: bigint>``; Spark compares structs field by field,
which is Pulsar's ordering (§0.1), so ``<``/``>``/``==`` on position columns are the broker's
``compareTo``.

The managed-ledger functions (``isValidPosition``, ``getNextValidPosition``, ``getPreviousPosition``,
``getNumberOfEntries``) need facts about the ledger a position points at. Those facts are carried in
two struct columns built by :mod:`pulsar_model.positions`:

* a **topic context** (``ctx``): the managed-ledger row (current ledger, LAC, sizes) plus a summary of
  the ledger list (first/max ledger ids, the open ledger's and the last ledger's rows, ...);
* a **ledger lookup** (``lk``) per position: whether its ledger is in the map, that ledger's listed
  entries and size, running sums of entries/sizes of the ledgers before it, the last non-empty ledger
  before it, the next ledger after it, ... (built by :func:`ledger_lookup` from the ledger row found by a
  floor seek on the ledger id).

All helpers are pure column expressions: nothing here triggers a Spark job.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, LongType, StructField, StructType

from pulsar_model.versions import Behaviour

#: Java ``Long.MAX_VALUE``; ``LATEST = (MAX, MAX)`` (SPEC §0.1) and the 4.x "unbounded ledger" size (§1.7).
LONG_MAX = 9223372036854775807

#: ``PositionFactory.EARLIEST`` / ``PositionImpl.EARLIEST`` (SPEC §0.1).
EARLIEST = (-1, -1)
#: ``PositionFactory.LATEST`` (SPEC §0.1).
LATEST = (LONG_MAX, LONG_MAX)

#: Entry id of "before the first entry of the ledger" (SPEC §0.1: ``(L,-1)`` is a legal position).
BEFORE_FIRST_ENTRY = -1

POSITION_TYPE = StructType([StructField("ledger_id", LongType()), StructField("entry_id", LongType())])


# --- position builders and comparisons -----------------------------------------------------------------


def position(ledger_id: Column | int, entry_id: Column | int) -> Column:
    """Build a position struct from two columns (or ints)."""
    ledger = ledger_id if isinstance(ledger_id, Column) else F.lit(ledger_id)
    entry = entry_id if isinstance(entry_id, Column) else F.lit(entry_id)
    return F.struct(ledger.cast("long").alias("ledger_id"), entry.cast("long").alias("entry_id"))


def null_position() -> Column:
    """A typed null position."""
    return F.lit(None).cast(POSITION_TYPE)


def as_position(col: Column) -> Column:
    """Normalise any ``struct<ledger_id, entry_id>`` column to :data:`POSITION_TYPE` (null stays null)."""
    return F.when(col.isNull(), null_position()).otherwise(position(col["ledger_id"], col["entry_id"]))


def compare(a: Column, b: Column) -> Column:
    """Three-way comparison (-1, 0, 1) of two orderable columns, like Java ``compareTo``."""
    return F.when(a < b, F.lit(-1)).when(a > b, F.lit(1)).when(a == b, F.lit(0))


def position_string(p: Column) -> Column:
    """``"L:E"``, the broker's ``Position.toString()``."""
    return F.concat(p["ledger_id"].cast("string"), F.lit(":"), p["entry_id"].cast("string"))


def range_string(lo: Column, lo_closed: Column, hi: Column, hi_closed: Column) -> Column:
    """Guava ``Range.toString()`` of a position range, e.g. ``(3:1..3:4]``."""
    return F.concat(
        F.when(lo_closed, F.lit("[")).otherwise(F.lit("(")),
        position_string(lo),
        F.lit(".."),
        position_string(hi),
        F.when(hi_closed, F.lit("]")).otherwise(F.lit(")")),
    )


def guava_range_invalid(lo: Column, lo_closed: Column, hi: Column, hi_closed: Column) -> Column:
    """True when Guava cannot build the range: ``lo > hi``, or ``open(a, a)`` (Guava's ``Range`` contract).

    ``openClosed(a, a)``/``closedOpen(a, a)`` are legal empty ranges, ``open(a, a)`` is not.
    """
    return (lo > hi) | ((lo == hi) & ~lo_closed & ~hi_closed)


# --- ledger lookups --------------------------------------------------------------------------------------


#: Fields of a ledger-view row (see ``positions._ledger_view``) without its nested ``nv0_row``.
BASE_ROW_FIELDS = (
    "lid",
    "ent",
    "sz",
    "cum_ent",
    "cum_sz",
    "is_cur",
    "walk",
    "cum_walk",
    "prev_ne_lid",
    "prev_ne_ent",
    "nv0_gt",
    "succ_lid",
)
BASE_ROW_TYPE = StructType(
    [StructField(name, BooleanType() if name == "is_cur" else LongType()) for name in BASE_ROW_FIELDS]
)


def base_row(row: Column) -> Column:
    """Project a ledger-view row (with or without ``nv0_row``) to :data:`BASE_ROW_TYPE`."""
    return F.when(row.isNull(), F.lit(None).cast(BASE_ROW_TYPE)).otherwise(
        F.struct(*[row[name].alias(name) for name in BASE_ROW_FIELDS]).cast(BASE_ROW_TYPE)
    )


def ledger_lookup(ledger_id: Column, floor: Column, ctx: Column, nv0_row: Column | None = None) -> Column:
    """Facts about ledger ``ledger_id`` of one topic, from the ledger row ``floor`` (largest id <= it).

    ``floor`` is a ledger-view row struct (see ``positions._ledger_view``) or null when no ledger id is
    <= ``ledger_id``. Fields of the result:

    * ``lid``: the ledger id asked for; ``exists``: it is in the ledger map;
    * ``ent``/``sz``: its listed entries/size (the open ledger lists 0/0, SPEC §0.2), null when absent;
    * ``cum_ent_le``/``cum_ent_lt``: listed entries of ledgers with id <= / < it; ``sz_lt`` likewise sizes;
    * ``is_cur``: it is the open ledger; ``any_lt``: some ledger has a smaller id;
    * ``prev_ne_lid``/``prev_ne_ent``: the last non-empty ledger with a smaller id (§1.3);
    * ``nv0_gt``: the first ledger with a larger id whose entry 0 is a valid position (§1.5), and
      ``nv0_row`` its view row (without its own ``nv0_row``); ``nv0_row`` overrides it (e.g. a null
      for lookups built from such a nested row);
    * ``next_lid``: the next ledger id in the map (``ceilingKey(id + 1)``);
    * ``cum_walk_le``: running sum of ``getPositionAfterN``'s per-ledger totals up to it (§1.9);
    * ``walk``: ``getPositionAfterN``'s total for this ledger, null when absent from the map.
    """
    exists = F.coalesce(floor["lid"] == ledger_id, F.lit(False))
    floor_is_null = floor.isNull()
    is_cur = F.coalesce(ctx["cur_id"] == ledger_id, F.lit(False))
    floor_nonempty = F.coalesce(floor["ent"] > 0, F.lit(False))
    prev_ne_lid = (
        F.when(floor_is_null, F.lit(None).cast("long"))
        .when(exists, floor["prev_ne_lid"])
        .when(floor_nonempty, floor["lid"])
        .otherwise(floor["prev_ne_lid"])
    )
    prev_ne_ent = (
        F.when(floor_is_null, F.lit(None).cast("long"))
        .when(exists, floor["prev_ne_ent"])
        .when(floor_nonempty, floor["ent"])
        .otherwise(floor["prev_ne_ent"])
    )
    if nv0_row is None:
        nv0_row = F.when(floor_is_null, ctx["first_valid0_row"]).otherwise(floor["nv0_row"])
    cum_ent_le = F.coalesce(floor["cum_ent"], F.lit(0).cast("long"))
    cum_sz_le = F.coalesce(floor["cum_sz"], F.lit(0).cast("long"))
    return F.struct(
        ledger_id.cast("long").alias("lid"),
        exists.alias("exists"),
        F.when(exists, floor["ent"]).alias("ent"),
        F.when(exists, floor["sz"]).alias("sz"),
        cum_ent_le.alias("cum_ent_le"),
        F.when(exists, cum_ent_le - floor["ent"]).otherwise(cum_ent_le).alias("cum_ent_lt"),
        F.when(exists, cum_sz_le - floor["sz"]).otherwise(cum_sz_le).alias("sz_lt"),
        is_cur.alias("is_cur"),
        prev_ne_lid.alias("prev_ne_lid"),
        prev_ne_ent.alias("prev_ne_ent"),
        F.coalesce(ctx["first_lid"] < ledger_id, F.lit(False)).alias("any_lt"),
        F.when(floor_is_null, ctx["first_valid0_lid"]).otherwise(floor["nv0_gt"]).alias("nv0_gt"),
        nv0_row.cast(BASE_ROW_TYPE).alias("nv0_row"),
        F.when(floor_is_null, ctx["first_lid"]).otherwise(floor["succ_lid"]).alias("next_lid"),
        F.coalesce(floor["cum_walk"], F.lit(0).cast("long")).alias("cum_walk_le"),
        F.when(is_cur, ctx["w_cur"]).when(exists, floor["walk"]).alias("walk"),
    )


def row_lookup(row: Column, ctx: Column) -> Column:
    """:func:`ledger_lookup` for a full ledger-view row itself (the row is its own floor)."""
    return ledger_lookup(row["lid"], row, ctx)


def base_row_lookup(row: Column, ctx: Column) -> Column:
    """:func:`ledger_lookup` for a base row (no ``nv0_row``): its own ``nv0_row`` is left null."""
    return ledger_lookup(row["lid"], row, ctx, nv0_row=F.lit(None).cast(BASE_ROW_TYPE))


# --- §1.3 - §1.6 ------------------------------------------------------------------------------------------


def previous_position(p: Column, lk: Column, ctx: Column) -> Column:
    """``getPreviousPosition(P)`` (SPEC §1.3, identical 2.x-4.x); ``lk`` is the lookup of ``P.ledger``."""
    e = p["entry_id"]
    return (
        F.when(p.isNull(), null_position())
        .when(e > 0, position(p["ledger_id"], e - 1))
        .when(~lk["any_lt"], position(p["ledger_id"], BEFORE_FIRST_ENTRY))
        .when(lk["prev_ne_lid"].isNotNull(), position(lk["prev_ne_lid"], lk["prev_ne_ent"] - 1))
        .otherwise(position(ctx["first_lid"], BEFORE_FIRST_ENTRY))
    )


def is_valid_position(p: Column, lk: Column, ctx: Column, beh: Behaviour) -> Column:
    """``isValidPosition(P)`` (SPEC §1.4): 3.x/4.x order or the 2.x-old order, per ``beh``."""
    lac = ctx["lac"]
    led, e = p["ledger_id"], p["entry_id"]
    if beh.new_valid_position:
        inner = (
            F.when(lk["is_cur"], ((led == lac["ledger_id"]) & (e <= lac["entry_id"] + 1)) | (e == 0))
            .when(led == lac["ledger_id"], e <= lac["entry_id"])
            .otherwise(e < lk["ent"])
        )
        return F.when(~lk["exists"], F.lit(False)).when(e < 0, F.lit(False)).otherwise(inner)
    return (
        F.when(e < 0, F.lit(False))
        .when(led > lac["ledger_id"], F.lit(False))
        .when(led == lac["ledger_id"], e <= lac["entry_id"] + 1)
        .when(~lk["exists"], F.when(led < lac["ledger_id"], F.lit(False)).otherwise(e == 0))
        .otherwise(e < lk["ent"])
    )


def next_valid_fallback(ctx: Column, beh: Behaviour) -> Column:
    """Where ``getNextValidPosition`` lands when no later ledger has a valid entry 0 (SPEC §1.5)."""
    lac = ctx["lac"]
    lac_next = position(lac["ledger_id"], lac["entry_id"] + 1)
    if beh.new_valid_position:
        empty_open = ctx["cur_id"].isNotNull() & (ctx["cle"] == 0)
        return F.when(empty_open, position(ctx["cur_id"], 0)).otherwise(lac_next)
    return lac_next  # 2.x-old: the internal NPE is caught and answered with LAC.next


def next_valid_position(
    p: Column, lk: Column, ctx: Column, beh: Behaviour, q_valid: Column | None = None
) -> Column:
    """``getNextValidPosition(P)`` (SPEC §1.5); ``lk`` is the lookup of ``P.ledger``.

    Validity inside a ledger is a prefix of entry ids, so the loop of §1.5 reduces to: ``P.next`` if
    valid, else entry 0 of the first later ledger whose entry 0 is valid, else the fallback. ``q_valid``
    may pass a precomputed ``isValid(P.next)`` column.
    """
    q = position(p["ledger_id"], p["entry_id"] + 1)
    if q_valid is None:
        q_valid = is_valid_position(q, lk, ctx, beh)
    return (
        F.when(p.isNull() | ctx.isNull(), null_position())
        .when(q_valid, q)
        .when(lk["nv0_gt"].isNotNull(), position(lk["nv0_gt"], 0))
        .otherwise(next_valid_fallback(ctx, beh))
    )


def next_position_is_valid(p: Column, lk: Column, ctx: Column, beh: Behaviour) -> Column:
    """``isValidPosition(P.next)`` - the first test of ``getNextValidPosition(P)``."""
    return F.coalesce(
        is_valid_position(position(p["ledger_id"], p["entry_id"] + 1), lk, ctx, beh), F.lit(False)
    )


def next_valid_lookup(q_valid: Column, lk: Column, ctx: Column, beh: Behaviour) -> Column:
    """The ledger lookup of ``getNextValidPosition(P)`` given ``q_valid`` = ``isValid(P.next)`` (§1.5).

    Same ledger as ``P`` when ``P.next`` is valid; the first later valid ledger (from ``lk.nv0_row``, whose
    own ``nv0_row`` is left null); otherwise the open ledger's or LAC's lookup (the fallbacks).
    """
    if beh.new_valid_position:
        empty_open = ctx["cur_id"].isNotNull() & (ctx["cle"] == 0)
        fallback = F.when(empty_open, ctx["cur_lk"]).otherwise(ctx["lac_lk"])
    else:
        fallback = ctx["lac_lk"]
    return (
        F.when(q_valid, lk)
        .when(lk["nv0_gt"].isNotNull(), base_row_lookup(lk["nv0_row"], ctx))
        .otherwise(fallback)
    )


def first_position(ctx: Column) -> Column:
    """``getFirstPosition()`` (SPEC §1.6): ``(first ledger, -1)``, LAC's ledger if earlier, null if none."""
    lac_ledger = ctx["lac"]["ledger_id"]
    return (
        F.when(ctx["first_lid"].isNull(), null_position())
        .when(ctx["first_lid"] > lac_ledger, position(lac_ledger, BEFORE_FIRST_ENTRY))
        .otherwise(position(ctx["first_lid"], BEFORE_FIRST_ENTRY))
    )


# --- §1.7 getNumberOfEntries(range) ---------------------------------------------------------------------


def _flag(b: Column) -> Column:
    return F.when(b, F.lit(1)).otherwise(F.lit(0)).cast("long")


def compare_positions_4x(
    a: Column,
    a_lk: Column,
    b: Column,
    b_lk: Column,
    ctx: Column,
    beh: Behaviour,
    *,
    b_is_lac: bool = False,
) -> Column:
    """4.x ``ManagedLedgerImpl.comparePositions`` (used by its ``getNumberOfEntries``).

    Ordinary ordering, except when both positions lie between the first position and LAC's ledger in
    different ledgers and one of them is not a valid position: then their next valid positions are compared
    (so ``1:{last entry}`` and ``2:-1`` compare equal). ``b_is_lac`` reuses LAC's precomputed validity and
    next valid position from the topic context.
    """
    lac_ledger = ctx["lac"]["ledger_id"]
    first_ledger = ctx["first_pos_lid"]
    trivial = (
        (F.coalesce(ctx["n_ledgers"], F.lit(0)) == 0)
        | (a["ledger_id"] < first_ledger)
        | (b["ledger_id"] < first_ledger)
        | (a["ledger_id"] > lac_ledger)
        | (b["ledger_id"] > lac_ledger)
    )
    b_valid = ctx["lac_valid"] if b_is_lac else is_valid_position(b, b_lk, ctx, beh)
    b_next = ctx["lac_next"] if b_is_lac else next_valid_position(b, b_lk, ctx, beh)
    either_invalid = ~is_valid_position(a, a_lk, ctx, beh) | ~b_valid
    return (
        F.when(trivial, compare(a, b))
        .when(a["ledger_id"] == b["ledger_id"], compare(a["entry_id"], b["entry_id"]))
        .when(either_invalid, compare(next_valid_position(a, a_lk, ctx, beh), b_next))
        .otherwise(compare(a, b))
    )


def entries_between_3x(
    lo: Column, lo_lk: Column, lo_closed: Column, hi: Column, hi_lk: Column, hi_closed: Column
) -> Column:
    """2.x/3.x ``getNumberOfEntries(range)`` arithmetic (SPEC §1.7), no validation."""
    lc, hc = _flag(lo_closed), _flag(hi_closed)
    same = lo["ledger_id"] == hi["ledger_id"]
    lo_part = F.when(lo_lk["exists"], lo_lk["ent"] - (lo["entry_id"] + 1) + lc).otherwise(
        F.lit(0).cast("long")
    )
    between = hi_lk["cum_ent_lt"] - lo_lk["cum_ent_le"]
    return F.when(same, hi["entry_id"] - lo["entry_id"] - 1 + lc + hc).otherwise(
        hi["entry_id"] + hc + lo_part + between
    )


def entries_between_4x(
    lo: Column,
    lo_lk: Column,
    lo_closed: Column,
    hi: Column,
    hi_lk: Column,
    hi_closed: Column,
    ctx: Column,
    beh: Behaviour,
) -> Column:
    """4.x ``getNumberOfEntries(range)`` arithmetic (SPEC §1.7), without its "Invalid range" check."""
    lc, hc = _flag(lo_closed), _flag(hi_closed)
    lo_l, lo_e, hi_l, hi_e = lo["ledger_id"], lo["entry_id"], hi["ledger_id"], hi["entry_id"]
    lac = ctx["lac"]
    same = lo_l == hi_l
    zero = (lo_l > hi_l) | (same & (lo_e > hi_e)) | (same & (lo_e < 0) & (hi_e < 0))
    same_count = F.when(
        hi_lk["exists"],
        hi_e - lo_e - 1 + _flag(lo_closed & (lo_e >= 0)) + _flag(hi_closed & (hi_e >= 0)),
    ).otherwise(F.lit(0).cast("long"))
    unbounded = (compare_positions_4x(hi, hi_lk, lac, ctx["lac_lk"], ctx, beh, b_is_lac=True) >= 0) | (
        hi_l == lac["ledger_id"]
    )
    capped_hi = F.when(unbounded, F.least(hi_e, F.lit(LONG_MAX - 1))).otherwise(
        F.least(hi_e, hi_lk["ent"] - 1)
    )
    hi_part = F.when((hi_e >= 0) & hi_lk["exists"], capped_hi + hc).otherwise(F.lit(0).cast("long"))
    lo_part = F.when(
        lo_lk["exists"],
        F.when(lo_e < 0, lo_lk["ent"]).otherwise(lo_lk["ent"] - (lo_e + 1) + lc),
    ).otherwise(F.lit(0).cast("long"))
    between = hi_lk["cum_ent_lt"] - lo_lk["cum_ent_le"]
    return F.when(zero, F.lit(0).cast("long")).when(same, same_count).otherwise(hi_part + lo_part + between)


def entries_between(
    lo: Column,
    lo_lk: Column,
    lo_closed: Column,
    hi: Column,
    hi_lk: Column,
    hi_closed: Column,
    ctx: Column,
    beh: Behaviour,
) -> tuple[Column, Column]:
    """``getNumberOfEntries(range)`` per version (SPEC §1.7) -> ``(count, error)``.

    ``error`` is non-null when the broker would throw: Guava cannot build the range (``lo > hi``, or
    ``open(a, a)``) in every version, and the 4.x ``comparePositions(lo, hi) > 0`` check; ``count`` is the
    bare arithmetic - callers null it where ``error`` is set. Both are sizeable expressions: select them
    into columns before combining them.
    """
    guava_bad = guava_range_invalid(lo, lo_closed, hi, hi_closed)
    text = range_string(lo, lo_closed, hi, hi_closed)
    guava_error = F.concat(F.lit("IllegalArgumentException: Invalid range: "), text)
    if beh.entry_count_4x:
        count = entries_between_4x(lo, lo_lk, lo_closed, hi, hi_lk, hi_closed, ctx, beh)
        cmp_bad = F.coalesce(compare_positions_4x(lo, lo_lk, hi, hi_lk, ctx, beh) > 0, F.lit(False))
        error = F.when(guava_bad, guava_error).when(
            cmp_bad, F.concat(F.lit("IllegalArgumentException: Invalid range "), text)
        )
    else:
        count = entries_between_3x(lo, lo_lk, lo_closed, hi, hi_lk, hi_closed)
        error = F.when(guava_bad, guava_error)
    return count, error


def open_closed_count(
    lo: Column, lo_lk: Column, hi: Column, hi_lk: Column, ctx: Column, beh: Behaviour
) -> Column:
    """ML count of ``(lo, hi]`` for internal, well-formed ranges (``lo <= hi``): the arithmetic only.

    The broker builds these ranges itself (cursor counts, IDM walks); for consistent ledger data its
    "Invalid range" checks cannot fire, so they are left out of the expression.
    """
    if beh.entry_count_4x:
        return entries_between_4x(lo, lo_lk, F.lit(False), hi, hi_lk, F.lit(True), ctx, beh)
    return entries_between_3x(lo, lo_lk, F.lit(False), hi, hi_lk, F.lit(True))


def idm_entries_in(
    ranges: Column, lo: Column, lo_lk: Column, hi: Column, hi_lk: Column, ctx: Column, beh: Behaviour
) -> Column:
    """Sum over acked ranges ``(a, b]`` of the ML count of their intersection with ``(lo, hi]`` (§1.8).

    ``ranges`` elements carry ``a``, ``b`` and their lookups ``a_lk``, ``b_lk``. Guava ``isConnected`` for
    two open-closed ranges is ``max(a, lo) <= min(b, hi)``; the intersection is ``(max, min]``. Two
    higher-order steps keep the count expression free of repeated sub-expressions.
    """
    ends = F.transform(
        ranges,
        lambda r: F.struct(
            F.when(r["a"] >= lo, r["a"]).otherwise(lo).alias("lo"),
            F.when(r["a"] >= lo, r["a_lk"]).otherwise(lo_lk).alias("lo_lk"),
            F.when(r["b"] <= hi, r["b"]).otherwise(hi).alias("hi"),
            F.when(r["b"] <= hi, r["b_lk"]).otherwise(hi_lk).alias("hi_lk"),
        ),
    )
    return F.aggregate(
        ends,
        F.lit(0).cast("long"),
        lambda acc, x: (
            acc
            + F.when(
                x["lo"] <= x["hi"],
                F.coalesce(
                    open_closed_count(x["lo"], x["lo_lk"], x["hi"], x["hi_lk"], ctx, beh),
                    F.lit(0).cast("long"),
                ),
            ).otherwise(F.lit(0).cast("long"))
        ),
    )


def remove_at_most(ranges: Column, md: Column) -> Column:
    """``individualDeletedMessages.removeAtMost(md)`` on open-closed ranges as ``struct<lower, upper>``.

    Guava ``RangeSet.remove(Range.atMost(md))`` (and the bitset implementation, which clears the bits
    ``<= md``) drops ranges whose upper end is ``<= md`` and cuts a range straddling ``md`` to
    ``(md, upper]``.
    """
    kept = F.filter(ranges, lambda r: r["b"] > md)
    return F.transform(
        kept,
        lambda r: F.struct(
            F.when(r["a"] < md, md).otherwise(r["a"]).alias("lower"),
            r["b"].alias("upper"),
        ),
    )


# --- §2.2 consumedLedgerSize ----------------------------------------------------------------------------


def consumed_ledger_size(
    size_col: Column, entries_col: Column, entry_id_col: Column, generation: int
) -> Column:
    """``consumedLedgerSize(size, entries, entryId)`` of generation 1, 2 or 3 (SPEC §2.2).

    Java long division (truncating toward zero) for the integer average; ``entryId`` is an index, so
    ``entryId + 1`` entries are consumed; ``(L,-1)`` consumes nothing.
    """
    if generation not in (1, 2, 3):
        raise ValueError(f"consumedLedgerSize generation {generation!r} is not 1, 2 or 3")
    average = F.call_function("div", size_col.cast("long"), entries_col.cast("long"))
    partial = F.when(entry_id_col >= 0, (entry_id_col + 1) * average).otherwise(F.lit(0).cast("long"))
    result = F.when(entries_col <= 0, F.lit(0).cast("long"))
    if generation == 2:
        result = result.when(entries_col == entry_id_col + 1, size_col.cast("long"))
    elif generation == 3:
        result = result.when(entries_col <= entry_id_col + 1, size_col.cast("long"))
    return result.otherwise(partial)
