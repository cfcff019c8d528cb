"""Column helpers and Spark-SQL expression builders for Pulsar positions (docs §0.1, §1, §2.2).

A position is ``struct<ledger_id: bigint, entry_id: bigint>``; Spark compares structs field by field,
which is Pulsar's ordering (§0.1), so ``<``/``>``/``=`` on position columns are the broker's ``compareTo``.

Two kinds of helpers live here:

* small ``Column -> Column`` helpers (:func:`position`, :func:`as_position`, :func:`consumed_ledger_size`);
* **SQL builders** (``*_sql``, ``str -> str``) for the managed-ledger arithmetic: ``isValidPosition``,
  ``getNextValidPosition``, ``getPreviousPosition``, ``getNumberOfEntries``, ... Their arguments are
  Spark-SQL fragments (normally column references such as ```_pa_md``` or ```_pa_ctx`.lac``) and the
  result is one SQL expression that the caller turns into a column with ``F.expr`` - one JVM call per
  expression instead of thousands of py4j calls for the same tree built from ``Column`` objects.
  Arguments are inserted textually: pass column references (materialise big sub-expressions in a
  previous ``select``), not large expressions.

The managed-ledger builders read two structs built by :mod:`pulsar_model.positions`:

* a **topic context** (``ctx``): the managed-ledger row (``cur_id, cle, cls, lac, total_size``), a summary
  of the ledger list (``first_lid, max_lid, n_ledgers, first_valid0_lid, first_valid0_row, w_cur,
  total_walk, cur_row, max_row``), the lookups of LAC's and the open ledger's ledger (``lac_lk``,
  ``cur_lk``), LAC's validity and next valid position (``lac_valid``, ``lac_next``) and
  ``getFirstPosition()``'s ledger (``first_pos_lid``);
* a **ledger lookup** (``lk``) per position: see :func:`ledger_lookup_sql`.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, LongType, StructField, StructType

from pulsar_model.engine.flags import SqlFlags

#: Java ``Long.MAX_VALUE``; ``LATEST = (MAX, MAX)`` (docs §0.1) and the 4.x "unbounded ledger" size (§1.7).
LONG_MAX = 9223372036854775807

#: ``PositionFactory.EARLIEST`` / ``PositionImpl.EARLIEST`` (docs §0.1).
EARLIEST = (-1, -1)
#: ``PositionFactory.LATEST`` (docs §0.1).
LATEST = (LONG_MAX, LONG_MAX)

#: Entry id of "before the first entry of the ledger" (docs §0.1: ``(L,-1)`` is a legal position).
BEFORE_FIRST_ENTRY = -1

POSITION_TYPE = StructType([StructField("ledger_id", LongType()), StructField("entry_id", LongType())])
POSITION_SQL_TYPE = "STRUCT<ledger_id: BIGINT, entry_id: BIGINT>"

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
BASE_ROW_SQL_TYPE = (
    "STRUCT<"
    + ", ".join(f"{name}: {'BOOLEAN' if name == 'is_cur' else 'BIGINT'}" for name in BASE_ROW_FIELDS)
    + ">"
)


# --- Column helpers --------------------------------------------------------------------------------------


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


def consumed_ledger_size(
    size_col: Column, entries_col: Column, entry_id_col: Column, generation: int
) -> Column:
    """``consumedLedgerSize(size, entries, entryId)`` of generation 1, 2 or 3 (docs §2.2).

    Java long division (truncating toward zero, Spark's ``div``) for the integer average; ``entryId`` is
    an index, so ``entryId + 1`` entries are consumed; ``(L,-1)`` consumes nothing.
    """
    _check_generation(generation)
    average = F.call_function("div", size_col.cast("long"), entries_col.cast("long"))
    partial = F.when(entry_id_col >= 0, (entry_id_col + 1) * average).otherwise(F.lit(0).cast("long"))
    result = F.when(entries_col <= 0, F.lit(0).cast("long"))
    if generation == 2:
        result = result.when(entries_col == entry_id_col + 1, size_col.cast("long"))
    elif generation == 3:
        result = result.when(entries_col <= entry_id_col + 1, size_col.cast("long"))
    return result.otherwise(partial)


def _check_generation(generation: int) -> None:
    if generation not in (1, 2, 3):
        raise ValueError(f"consumedLedgerSize generation {generation!r} is not 1, 2 or 3")


# --- SQL building blocks ----------------------------------------------------------------------------------


def ref(name: str) -> str:
    """A quoted column reference."""
    return f"`{name}`"


def fld(expr: str, field: str) -> str:
    """Struct field access on any expression (field names quoted: ``exists`` is an SQL keyword)."""
    return f"({expr}).`{field}`"


def case(*branches: tuple[str, str], otherwise: str = "NULL") -> str:
    """``CASE WHEN c1 THEN v1 ... ELSE otherwise END``."""
    body = " ".join(f"WHEN {cond} THEN {value}" for cond, value in branches)
    return f"CASE {body} ELSE {otherwise} END"


def pos_sql(ledger_id: str, entry_id: str) -> str:
    """A position struct."""
    return f"named_struct('ledger_id', CAST({ledger_id} AS BIGINT), 'entry_id', CAST({entry_id} AS BIGINT))"


NULL_POS_SQL = f"CAST(NULL AS {POSITION_SQL_TYPE})"
NULL_BASE_ROW_SQL = f"CAST(NULL AS {BASE_ROW_SQL_TYPE})"


#: Operands longer than this are bound once (:func:`compare_sql`) instead of being repeated in the SQL.
_INLINE_OPERAND_CHARS = 200


def compare_sql(a: str, b: str) -> str:
    """Three-way comparison (-1, 0, 1) like Java ``compareTo`` (null when either side is null).

    The comparison names each operand three times; long operands (a next-valid-position expression) are
    bound once through a one-element ``transform``, Spark SQL's only way to name a value, so the
    expression - and the plans that the analyser and optimiser walk on the driver - grow with the sum of
    the operands, not three times it. Both operands are evaluated either way, so the results (and ANSI
    errors) are the same.
    """
    if len(a) + len(b) <= _INLINE_OPERAND_CHARS:
        return case((f"{a} < {b}", "-1"), (f"{a} > {b}", "1"), (f"{a} = {b}", "0"))
    body = case(("_c.a < _c.b", "-1"), ("_c.a > _c.b", "1"), ("_c.a = _c.b", "0"))
    return f"transform(array(named_struct('a', {a}, 'b', {b})), _c -> {body})[0]"


def position_string_sql(p: str) -> str:
    """``"L:E"``, the broker's ``Position.toString()``."""
    return f"concat(CAST({fld(p, 'ledger_id')} AS STRING), ':', CAST({fld(p, 'entry_id')} AS STRING))"


def range_string_sql(lo: str, lo_closed: str, hi: str, hi_closed: str) -> str:
    """Guava ``Range.toString()`` of a position range, e.g. ``(3:1..3:4]``."""
    return (
        f"concat(IF({lo_closed}, '[', '('), {position_string_sql(lo)}, '..', "
        f"{position_string_sql(hi)}, IF({hi_closed}, ']', ')'))"
    )


def guava_range_invalid_sql(lo: str, lo_closed: str, hi: str, hi_closed: str) -> str:
    """True when Guava cannot build the range: ``lo > hi``, or ``open(a, a)`` (Guava's ``Range`` contract).

    ``openClosed(a, a)``/``closedOpen(a, a)`` are legal empty ranges, ``open(a, a)`` is not.
    """
    return f"(({lo} > {hi}) OR ({lo} = {hi} AND NOT {lo_closed} AND NOT {hi_closed}))"


def base_row_sql(row: str) -> str:
    """Project a ledger-view row (with or without ``nv0_row``) to :data:`BASE_ROW_TYPE`."""
    fields = ", ".join(f"'{name}', {fld(row, name)}" for name in BASE_ROW_FIELDS)
    return f"IF({row} IS NULL, {NULL_BASE_ROW_SQL}, CAST(named_struct({fields}) AS {BASE_ROW_SQL_TYPE}))"


# --- ledger lookups ----------------------------------------------------------------------------------------


def ledger_lookup_sql(ledger_id: str, floor: str, ctx: str, nv0_row: str | None = None) -> str:
    """Facts about ledger ``ledger_id`` of one topic, from the ledger row ``floor`` (largest id <= it).

    ``floor`` is a ledger-view row (see ``positions._ledger_view``) or null when no ledger id is
    <= ``ledger_id``. Fields of the result:

    * ``lid``: the ledger id asked for; ``exists``: it is in the ledger map;
    * ``ent``/``sz``: its listed entries/size (the open ledger lists 0/0, docs §0.2), null when absent;
    * ``cum_ent_le``/``cum_ent_lt``: listed entries of ledgers with id <= / < it; ``sz_lt`` likewise sizes;
    * ``is_cur``: it is the open ledger; ``any_lt``: some ledger has a smaller id;
    * ``prev_ne_lid``/``prev_ne_ent``: the last non-empty ledger with a smaller id (§1.3);
    * ``nv0_gt``: the first ledger with a larger id whose entry 0 is a valid position (§1.5), and
      ``nv0_row`` its view row (whose own ``nv0_gt`` is left null); ``nv0_row`` overrides it;
    * ``next_lid``: the next ledger id in the map (``ceilingKey(id + 1)``);
    * ``cum_walk_le``: running sum of ``getPositionAfterN``'s per-ledger totals up to it (§1.9);
    * ``walk``: ``getPositionAfterN``'s total for this ledger, null when absent from the map.
    """
    exists = f"coalesce({fld(floor, 'lid')} = {ledger_id}, false)"
    floor_null = f"({floor} IS NULL)"
    is_cur = f"coalesce({fld(ctx, 'cur_id')} = {ledger_id}, false)"
    floor_nonempty = f"coalesce({fld(floor, 'ent')} > 0, false)"

    def prev(field: str, own: str) -> str:
        return case(
            (floor_null, "CAST(NULL AS BIGINT)"),
            (exists, fld(floor, field)),
            (floor_nonempty, fld(floor, own)),
            otherwise=fld(floor, field),
        )

    if nv0_row is None:
        nv0_row = f"IF({floor_null}, {fld(ctx, 'first_valid0_row')}, {fld(floor, 'nv0_row')})"
    cum_ent_le = f"coalesce({fld(floor, 'cum_ent')}, CAST(0 AS BIGINT))"
    cum_sz_le = f"coalesce({fld(floor, 'cum_sz')}, CAST(0 AS BIGINT))"
    fields = {
        "lid": f"CAST({ledger_id} AS BIGINT)",
        "exists": exists,
        "ent": f"IF({exists}, {fld(floor, 'ent')}, NULL)",
        "sz": f"IF({exists}, {fld(floor, 'sz')}, NULL)",
        "cum_ent_le": cum_ent_le,
        "cum_ent_lt": f"IF({exists}, {cum_ent_le} - {fld(floor, 'ent')}, {cum_ent_le})",
        "sz_lt": f"IF({exists}, {cum_sz_le} - {fld(floor, 'sz')}, {cum_sz_le})",
        "is_cur": is_cur,
        "prev_ne_lid": prev("prev_ne_lid", "lid"),
        "prev_ne_ent": prev("prev_ne_ent", "ent"),
        "any_lt": f"coalesce({fld(ctx, 'first_lid')} < {ledger_id}, false)",
        "nv0_gt": f"IF({floor_null}, {fld(ctx, 'first_valid0_lid')}, {fld(floor, 'nv0_gt')})",
        "nv0_row": f"CAST({nv0_row} AS {BASE_ROW_SQL_TYPE})",
        "next_lid": f"IF({floor_null}, {fld(ctx, 'first_lid')}, {fld(floor, 'succ_lid')})",
        "cum_walk_le": f"coalesce({fld(floor, 'cum_walk')}, CAST(0 AS BIGINT))",
        "walk": case((is_cur, fld(ctx, "w_cur")), (exists, fld(floor, "walk"))),
    }
    return "named_struct(" + ", ".join(f"'{name}', {value}" for name, value in fields.items()) + ")"


def row_lookup_sql(row: str, ctx: str) -> str:
    """:func:`ledger_lookup_sql` for a full ledger-view row itself (the row is its own floor)."""
    return ledger_lookup_sql(fld(row, "lid"), row, ctx)


def base_row_lookup_sql(row: str, ctx: str) -> str:
    """:func:`ledger_lookup_sql` for a base row (no ``nv0_row``): its own ``nv0_row`` is left null."""
    return ledger_lookup_sql(fld(row, "lid"), row, ctx, nv0_row=NULL_BASE_ROW_SQL)


# --- §1.3 - §1.6 -------------------------------------------------------------------------------------------


def previous_position_sql(p: str, lk: str, ctx: str) -> str:
    """``getPreviousPosition(P)`` (docs §1.3, identical 2.x-4.x); ``lk`` is the lookup of ``P.ledger``."""
    led, ent = fld(p, "ledger_id"), fld(p, "entry_id")
    return case(
        (f"{p} IS NULL", NULL_POS_SQL),
        (f"{ent} > 0", pos_sql(led, f"{ent} - 1")),
        (f"NOT {fld(lk, 'any_lt')}", pos_sql(led, "-1")),
        (
            f"{fld(lk, 'prev_ne_lid')} IS NOT NULL",
            pos_sql(fld(lk, "prev_ne_lid"), f"{fld(lk, 'prev_ne_ent')} - 1"),
        ),
        otherwise=pos_sql(fld(ctx, "first_lid"), "-1"),
    )


def is_valid_position_sql(p: str, lk: str, ctx: str, beh: SqlFlags) -> str:
    """``isValidPosition(P)`` (docs §1.4): 3.x/4.x order or the 2.x-old order, per ``beh``."""
    lac = fld(ctx, "lac")
    lac_l, lac_e = fld(lac, "ledger_id"), fld(lac, "entry_id")
    led, e = fld(p, "ledger_id"), fld(p, "entry_id")
    inner = case(
        (fld(lk, "is_cur"), f"(({led} = {lac_l} AND {e} <= {lac_e} + 1) OR {e} = 0)"),
        (f"{led} = {lac_l}", f"{e} <= {lac_e}"),
        otherwise=f"{e} < {fld(lk, 'ent')}",
    )
    new = case((f"NOT {fld(lk, 'exists')}", "false"), (f"{e} < 0", "false"), otherwise=inner)
    old = case(
        (f"{e} < 0", "false"),
        (f"{led} > {lac_l}", "false"),
        (f"{led} = {lac_l}", f"{e} <= {lac_e} + 1"),
        (f"NOT {fld(lk, 'exists')}", f"IF({led} < {lac_l}, false, {e} = 0)"),
        otherwise=f"{e} < {fld(lk, 'ent')}",
    )
    return beh.pick("new_valid_position", new, old)


def next_valid_fallback_sql(ctx: str, beh: SqlFlags) -> str:
    """Where ``getNextValidPosition`` lands when no later ledger has a valid entry 0 (docs §1.5)."""
    lac = fld(ctx, "lac")
    lac_next = pos_sql(fld(lac, "ledger_id"), f"{fld(lac, 'entry_id')} + 1")
    empty_open = f"({fld(ctx, 'cur_id')} IS NOT NULL AND {fld(ctx, 'cle')} = 0)"
    new = f"IF({empty_open}, {pos_sql(fld(ctx, 'cur_id'), '0')}, {lac_next})"
    # before #22034 (and 2.x-old, whose NPE is caught): LAC.next
    return beh.pick("next_valid_open_ledger_fallback", new, lac_next)


def next_position_is_valid_sql(p: str, lk: str, ctx: str, beh: SqlFlags) -> str:
    """``isValidPosition(P.next)`` - the first test of ``getNextValidPosition(P)``."""
    q = pos_sql(fld(p, "ledger_id"), f"{fld(p, 'entry_id')} + 1")
    return f"coalesce({is_valid_position_sql(q, lk, ctx, beh)}, false)"


def next_valid_position_sql(p: str, lk: str, ctx: str, beh: SqlFlags, q_valid: str | None = None) -> str:
    """``getNextValidPosition(P)`` (docs §1.5); ``lk`` is the lookup of ``P.ledger``.

    Validity inside a ledger is a prefix of entry ids, so the loop of §1.5 reduces to: ``P.next`` if
    valid, else entry 0 of the first later ledger whose entry 0 is valid, else the fallback. ``q_valid``
    may pass a precomputed :func:`next_position_is_valid_sql` column.
    """
    q = pos_sql(fld(p, "ledger_id"), f"{fld(p, 'entry_id')} + 1")
    if q_valid is None:
        q_valid = next_position_is_valid_sql(p, lk, ctx, beh)
    return case(
        (f"{p} IS NULL OR {ctx} IS NULL", NULL_POS_SQL),
        (q_valid, q),
        (f"{fld(lk, 'nv0_gt')} IS NOT NULL", pos_sql(fld(lk, "nv0_gt"), "0")),
        otherwise=next_valid_fallback_sql(ctx, beh),
    )


def next_valid_lookup_sql(q_valid: str, lk: str, ctx: str, beh: SqlFlags) -> str:
    """The ledger lookup of ``getNextValidPosition(P)`` given ``q_valid`` = ``isValid(P.next)`` (§1.5).

    Same ledger as ``P`` when ``P.next`` is valid; the first later valid ledger (from ``lk.nv0_row``, whose
    own ``nv0_row`` is left null); otherwise the open ledger's or LAC's lookup (the fallbacks).
    """
    empty_open = f"({fld(ctx, 'cur_id')} IS NOT NULL AND {fld(ctx, 'cle')} = 0)"
    fallback = beh.pick(
        "next_valid_open_ledger_fallback",
        f"IF({empty_open}, {fld(ctx, 'cur_lk')}, {fld(ctx, 'lac_lk')})",
        fld(ctx, "lac_lk"),
    )
    return case(
        (q_valid, lk),
        (f"{fld(lk, 'nv0_gt')} IS NOT NULL", base_row_lookup_sql(fld(lk, "nv0_row"), ctx)),
        otherwise=fallback,
    )


def first_position_sql(ctx: str) -> str:
    """``getFirstPosition()`` (docs §1.6): ``(first ledger, -1)``, LAC's ledger if earlier, null if none."""
    first, lac_l = fld(ctx, "first_lid"), fld(fld(ctx, "lac"), "ledger_id")
    return case(
        (f"{first} IS NULL", NULL_POS_SQL),
        (f"{first} > {lac_l}", pos_sql(lac_l, "-1")),
        otherwise=pos_sql(first, "-1"),
    )


# --- §1.7 getNumberOfEntries(range) -----------------------------------------------------------------------


def _flag(cond: str) -> str:
    return f"IF({cond}, CAST(1 AS BIGINT), CAST(0 AS BIGINT))"


def compare_positions_4x_sql(
    a: str, a_lk: str, b: str, b_lk: str, ctx: str, beh: SqlFlags, *, b_is_lac: bool = False
) -> str:
    """4.x ``ManagedLedgerImpl.comparePositions`` (used by its ``getNumberOfEntries``).

    Ordinary ordering, except when both positions lie between the first position and LAC's ledger in
    different ledgers and one of them is not a valid position: then their next valid positions are compared
    (so ``1:{last entry}`` and ``2:-1`` compare equal). ``b_is_lac`` reuses LAC's precomputed validity and
    next valid position from the topic context.
    """
    lac_l = fld(fld(ctx, "lac"), "ledger_id")
    first_l = fld(ctx, "first_pos_lid")
    a_l, b_l = fld(a, "ledger_id"), fld(b, "ledger_id")
    trivial = (
        f"(coalesce({fld(ctx, 'n_ledgers')}, 0) = 0 OR {a_l} < {first_l} OR {b_l} < {first_l} "
        f"OR {a_l} > {lac_l} OR {b_l} > {lac_l})"
    )
    b_valid = fld(ctx, "lac_valid") if b_is_lac else is_valid_position_sql(b, b_lk, ctx, beh)
    b_next = fld(ctx, "lac_next") if b_is_lac else next_valid_position_sql(b, b_lk, ctx, beh)
    either_invalid = f"(NOT {is_valid_position_sql(a, a_lk, ctx, beh)} OR NOT {b_valid})"
    return case(
        (trivial, compare_sql(a, b)),
        (f"{a_l} = {b_l}", compare_sql(fld(a, "entry_id"), fld(b, "entry_id"))),
        (either_invalid, compare_sql(next_valid_position_sql(a, a_lk, ctx, beh), b_next)),
        otherwise=compare_sql(a, b),
    )


def entries_between_3x_sql(
    lo: str, lo_lk: str, lo_closed: str, hi: str, hi_lk: str, hi_closed: str, beh: SqlFlags
) -> str:
    """2.x/3.x ``getNumberOfEntries(range)`` arithmetic (docs §1.7), no validation; with
    ``entry_count_same_ledger_deleted_zero`` (apache/pulsar#24852) a range inside one ledger missing from
    the map counts 0."""
    lc, hc = _flag(lo_closed), _flag(hi_closed)
    lo_l, lo_e, hi_l, hi_e = (
        fld(lo, "ledger_id"),
        fld(lo, "entry_id"),
        fld(hi, "ledger_id"),
        fld(hi, "entry_id"),
    )
    lo_part = f"IF({fld(lo_lk, 'exists')}, {fld(lo_lk, 'ent')} - ({lo_e} + 1) + {lc}, CAST(0 AS BIGINT))"
    between = f"({fld(hi_lk, 'cum_ent_lt')} - {fld(lo_lk, 'cum_ent_le')})"
    plain = f"{hi_e} - {lo_e} - 1 + {lc} + {hc}"
    same = beh.pick(
        "entry_count_same_ledger_deleted_zero",
        f"IF({fld(hi_lk, 'exists')}, {plain}, CAST(0 AS BIGINT))",
        plain,
    )
    return f"IF({lo_l} = {hi_l}, {same}, {hi_e} + {hc} + {lo_part} + {between})"


def entries_between_4x_sql(
    lo: str, lo_lk: str, lo_closed: str, hi: str, hi_lk: str, hi_closed: str, ctx: str, beh: SqlFlags
) -> str:
    """4.x ``getNumberOfEntries(range)`` arithmetic (docs §1.7), without its "Invalid range" check."""
    lc, hc = _flag(lo_closed), _flag(hi_closed)
    lo_l, lo_e, hi_l, hi_e = (
        fld(lo, "ledger_id"),
        fld(lo, "entry_id"),
        fld(hi, "ledger_id"),
        fld(hi, "entry_id"),
    )
    lac = fld(ctx, "lac")
    same = f"({lo_l} = {hi_l})"
    zero = f"({lo_l} > {hi_l} OR ({same} AND {lo_e} > {hi_e}) OR ({same} AND {lo_e} < 0 AND {hi_e} < 0))"
    same_count = (
        f"IF({fld(hi_lk, 'exists')}, {hi_e} - {lo_e} - 1 + {_flag(f'{lo_closed} AND {lo_e} >= 0')} "
        f"+ {_flag(f'{hi_closed} AND {hi_e} >= 0')}, CAST(0 AS BIGINT))"
    )
    unbounded = (
        f"({compare_positions_4x_sql(hi, hi_lk, lac, fld(ctx, 'lac_lk'), ctx, beh, b_is_lac=True)} >= 0 "
        f"OR {hi_l} = {fld(lac, 'ledger_id')})"
    )
    capped = f"IF({unbounded}, least({hi_e}, {LONG_MAX - 1}), least({hi_e}, {fld(hi_lk, 'ent')} - 1))"
    hi_part = f"IF({hi_e} >= 0 AND {fld(hi_lk, 'exists')}, {capped} + {hc}, CAST(0 AS BIGINT))"
    lo_part = (
        f"IF({fld(lo_lk, 'exists')}, IF({lo_e} < 0, {fld(lo_lk, 'ent')}, "
        f"{fld(lo_lk, 'ent')} - ({lo_e} + 1) + {lc}), CAST(0 AS BIGINT))"
    )
    between = f"({fld(hi_lk, 'cum_ent_lt')} - {fld(lo_lk, 'cum_ent_le')})"
    return case(
        (zero, "CAST(0 AS BIGINT)"), (same, same_count), otherwise=f"{hi_part} + {lo_part} + {between}"
    )


def entries_between_sql(
    lo: str, lo_lk: str, lo_closed: str, hi: str, hi_lk: str, hi_closed: str, ctx: str, beh: SqlFlags
) -> tuple[str, str]:
    """``getNumberOfEntries(range)`` per version (docs §1.7) -> ``(count, error)`` SQL.

    ``error`` is non-null when the broker would throw: Guava cannot build the range (``lo > hi``, or
    ``open(a, a)``) in every version, and the 4.x ``comparePositions(lo, hi) > 0`` check; ``count`` is the
    bare arithmetic - callers null it where ``error`` is set (select both into columns first).
    """
    text = range_string_sql(lo, lo_closed, hi, hi_closed)
    guava = (
        guava_range_invalid_sql(lo, lo_closed, hi, hi_closed),
        f"concat('IllegalArgumentException: Invalid range: ', {text})",
    )
    four = beh.constant("entry_count_4x")
    count_4x = error_4x = count_3x = error_3x = ""
    if four is not False:
        count_4x = entries_between_4x_sql(lo, lo_lk, lo_closed, hi, hi_lk, hi_closed, ctx, beh)
        cmp_bad = f"coalesce({compare_positions_4x_sql(lo, lo_lk, hi, hi_lk, ctx, beh)} > 0, false)"
        error_4x = case(guava, (cmp_bad, f"concat('IllegalArgumentException: Invalid range ', {text})"))
    if four is not True:
        count_3x = entries_between_3x_sql(lo, lo_lk, lo_closed, hi, hi_lk, hi_closed, beh)
        error_3x = case(guava)
    return beh.pick("entry_count_4x", count_4x, count_3x), beh.pick("entry_count_4x", error_4x, error_3x)


def open_closed_count_sql(lo: str, lo_lk: str, hi: str, hi_lk: str, ctx: str, beh: SqlFlags) -> str:
    """ML count of ``(lo, hi]`` for internal, well-formed ranges (``lo <= hi``): the arithmetic only.

    The broker builds these ranges itself (cursor counts, IDM walks); for consistent ledger data its
    "Invalid range" checks cannot fire, so they are left out of the expression.
    """
    four = beh.constant("entry_count_4x")
    count_4x = (
        "" if four is False else entries_between_4x_sql(lo, lo_lk, "false", hi, hi_lk, "true", ctx, beh)
    )
    count_3x = "" if four is True else entries_between_3x_sql(lo, lo_lk, "false", hi, hi_lk, "true", beh)
    return beh.pick("entry_count_4x", count_4x, count_3x)


def remove_at_most_sql(ranges: str, md: str) -> str:
    """``individualDeletedMessages.removeAtMost(md)`` on the internal ``(a, b]`` ranges -> ``lower/upper``.

    Guava ``RangeSet.remove(Range.atMost(md))`` (and the bitset implementation, which clears the bits
    ``<= md``) drops ranges whose upper end is ``<= md`` and cuts a range straddling ``md`` to
    ``(md, upper]``.
    """
    return (
        f"transform(filter({ranges}, r -> r.b > {md}), "
        f"r -> named_struct('lower', IF(r.a < {md}, {md}, r.a), 'upper', r.b))"
    )


def consumed_ledger_size_flags_sql(size: str, entries: str, entry_id: str, beh: SqlFlags) -> str:
    """:func:`consumed_ledger_size_sql` with the generation read from the version flags (docs §2.2):
    ``consumed_size_whole_ledger`` (2 and 3) and ``consumed_size_at_or_past_last`` (3)."""
    whole, past = beh.constant("consumed_size_whole_ledger"), beh.constant("consumed_size_at_or_past_last")
    if whole is not None and past is not None:
        return consumed_ledger_size_sql(size, entries, entry_id, 1 if not whole else 3 if past else 2)
    partial = (
        f"IF({entry_id} >= 0, ({entry_id} + 1) * (CAST({size} AS BIGINT) div CAST({entries} AS BIGINT)), 0)"
    )
    return case(
        (f"{entries} <= 0", "CAST(0 AS BIGINT)"),
        (
            f"{beh.all('consumed_size_at_or_past_last')} AND {entries} <= {entry_id} + 1",
            f"CAST({size} AS BIGINT)",
        ),
        (
            f"{beh.all('consumed_size_whole_ledger')} AND {entries} = {entry_id} + 1",
            f"CAST({size} AS BIGINT)",
        ),
        otherwise=f"CAST({partial} AS BIGINT)",
    )


def consumed_ledger_size_sql(size: str, entries: str, entry_id: str, generation: int) -> str:
    """SQL form of :func:`consumed_ledger_size` (docs §2.2)."""
    _check_generation(generation)
    partial = (
        f"IF({entry_id} >= 0, ({entry_id} + 1) * (CAST({size} AS BIGINT) div CAST({entries} AS BIGINT)), 0)"
    )
    branches = [(f"{entries} <= 0", "CAST(0 AS BIGINT)")]
    if generation == 2:
        branches.append((f"{entries} = {entry_id} + 1", f"CAST({size} AS BIGINT)"))
    elif generation == 3:
        branches.append((f"{entries} <= {entry_id} + 1", f"CAST({size} AS BIGINT)"))
    return case(*branches, otherwise=f"CAST({partial} AS BIGINT)")
