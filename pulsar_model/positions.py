"""Cursor and position arithmetic of the managed ledger as DataFrame transforms (docs §1, §11, §12).

Every transform is pure and lazy, works per ``(cluster, topic)`` and keeps one output row per input
request row (extra request columns are carried through). Version-dependent behaviour is selected with
``pulsar_version`` (see :mod:`pulsar_model.domain.versions`): a version string applies that version to every
row; ``None`` applies each topic's own ``managed_ledgers.pulsar_version`` (null = the default version), so
one plan serves clusters of several versions (docs §0.3).

How the sequential broker loops are expressed set-based:

* **ledger view**: one row per ledger with running sums (entries, sizes, ``getPositionAfterN`` totals),
  the last non-empty ledger before it, the next ledger after it and the first later ledger whose entry 0
  is valid - window functions over the ledger list ordered by ledger id (§0.4 entry-index trick);
* **seeks**: "the ledger row with the largest id <= x" (and "the first ledger whose running total
  reaches v") are found by a union of the probe rows with the ledger rows and one running window. All
  inputs are hash-partitioned by ``(cluster, topic)`` once and every step is keyed on the topic, so the
  whole plan needs one shuffle per input, not one per step;
* the ``getPositionAfterN`` walk becomes index arithmetic on the running totals, including the
  version-specific ends of the loop (clamp, phantom open-ledger entries, endless loops, NPEs);
* the per-cursor acked ranges are exploded once, decorated with their ledger lookups, the
  ``getNumIndividualDeletedEntriesToSkip`` running gaps and the mark-delete-extension chains, and
  collected back into one sorted array per cursor; per request the walk and the extension are then plain
  higher-order-function expressions over that array.

The arithmetic itself is written as Spark-SQL text by the ``*_sql`` builders of
:mod:`pulsar_model.engine.columns` (one ``F.expr`` per materialised column).

Errors the broker would raise (NPEs of old versions, Guava "Invalid range", "Invalid mark deleted
position", endless loops) never fail the job: the row gets a null result and an ``error`` string.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Literal, cast

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from pulsar_model import DEFAULT_PULSAR_VERSION
from pulsar_model.engine.columns import (
    BASE_ROW_FIELDS,
    BASE_ROW_SQL_TYPE,
    LATEST,
    NULL_POS_SQL,
    POSITION_SQL_TYPE,
    as_position,
    base_row_lookup_sql,
    base_row_sql,
    case,
    entries_between_sql,
    first_position_sql,
    fld,
    is_valid_position_sql,
    ledger_lookup_sql,
    next_position_is_valid_sql,
    next_valid_lookup_sql,
    next_valid_position_sql,
    open_closed_count_sql,
    pos_sql,
    previous_position_sql,
    ref,
    remove_at_most_sql,
    row_lookup_sql,
)
from pulsar_model.engine.flags import FLAGS_COLUMN, VERSION_COLUMN, SqlFlags, sql_flags, with_flags
from pulsar_model.errors import ContractError

__all__ = [
    "BOUND_START_EXCLUDED",
    "BOUND_START_INCLUDED",
    "DELETED_ENTRIES_EXCLUDE",
    "DELETED_ENTRIES_INCLUDE",
    "TARGET_EARLIEST",
    "TARGET_LATEST",
    "TARGET_POSITION",
    "CursorBasis",
    "clear_backlog_plan",
    "cursor_basis",
    "entries_between",
    "is_valid_position",
    "next_valid_position",
    "position_after_n",
    "previous_position",
    "reset_cursor_plan",
    "skip_entries",
]

#: The type of every public transform's ``pulsar_version`` argument: a version string ("every row has this
#: version") or ``None`` ("each topic's own ``managed_ledgers.pulsar_version``", docs §0.3).
VersionArg = str | None

#: ``PositionBound`` values of ``getPositionAfterN`` (docs §1.1, §1.9).
BOUND_START_INCLUDED = "startIncluded"
BOUND_START_EXCLUDED = "startExcluded"
#: ``ManagedCursor.IndividualDeletedEntries`` values of ``skipEntries`` (docs §1.1, §1.10).
DELETED_ENTRIES_INCLUDE = "Include"
DELETED_ENTRIES_EXCLUDE = "Exclude"
#: ``resetCursor`` target kinds (docs §1.11).
TARGET_POSITION = "position"
TARGET_EARLIEST = "earliest"
TARGET_LATEST = "latest"

KEY = ("cluster", "topic")
CURSOR_KEY = ("cluster", "topic", "cursor_name")

#: Internal column holding the topic context struct (prefixed so it never collides with request columns).
CTX = "_pa_ctx"
X = ref(CTX)
LAC = fld(X, "lac")
ZERO = "CAST(0 AS BIGINT)"
NULL_LONG = "CAST(NULL AS BIGINT)"
NULL_STRING = "CAST(NULL AS STRING)"
MISSING_TOPIC = "no managed_ledgers row for this cluster/topic"
MISSING_CURSOR = "cursor not found or its mark_delete_position is null"

SeekMode = Literal["floor", "floor_strict", "ceil"]


def E(sql: str) -> Column:  # noqa: N802 - short on purpose: it wraps every SQL builder result
    """A column from Spark-SQL text."""
    return F.expr(sql)


def _sql_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


# --- environment: ledger view, topic context, seeks --------------------------------------------------------


def _by_topic(df: DataFrame) -> DataFrame:
    """Hash-partition an input by ``(cluster, topic)`` once.

    Every later join, aggregation, window and seek is keyed on the topic (a cursor or range search orders
    by its cursor inside the topic), and Spark keeps that partitioning through unions, so the whole plan
    needs one shuffle per input instead of one per step.
    """
    return df.repartition(*[F.col(c) for c in KEY])


def _ml_frame(managed_ledgers: DataFrame, flags: SqlFlags) -> DataFrame:
    """One row per managed ledger with the normalised columns the arithmetic needs (docs §0.2), plus the
    flags struct of its ``pulsar_version`` when ``flags`` are per row."""
    extra: list[Column] = []
    if flags.per_row:
        require_version_column(managed_ledgers, "managed_ledgers")
        managed_ledgers = with_flags(managed_ledgers)
        extra.append(F.col(FLAGS_COLUMN))
    return managed_ledgers.select(
        F.col("cluster"),
        F.col("topic"),
        F.col("current_ledger_id").cast("long").alias("cur_id"),
        F.coalesce(F.col("current_ledger_entries").cast("long"), F.lit(0).cast("long")).alias("cle"),
        F.coalesce(F.col("current_ledger_size_bytes").cast("long"), F.lit(0).cast("long")).alias("cls"),
        as_position(F.col("last_confirmed_entry")).alias("lac"),
        F.coalesce(F.col("total_size_bytes").cast("long"), F.lit(0).cast("long")).alias("total_size"),
        *extra,
    )


def require_version_column(df: DataFrame, name: str) -> None:
    """Raise :class:`ContractError` when a per-row call (``pulsar_version=None``) gets no version column."""
    if VERSION_COLUMN not in df.columns:
        raise ContractError(
            f"pulsar_version=None reads each row's broker version from {name}.{VERSION_COLUMN}, which "
            f"{name} does not have: add the column (e.g. from the managed_ledgers table) or pass a version "
            "string such as '4.1.3'"
        )


def _open_ledger_walk_total_sql(cle: str, lac: str, beh: SqlFlags) -> str:
    """``getPositionAfterN``'s entry count for the open ledger (docs §1.9, §11.2).

    3.x+ (and 2.10.1): ``LAC.entry + 1`` only when ``currentLedgerEntries > 0``; 2.x-old always
    ``LAC.entry + 1`` - the phantom entries of an empty open ledger.
    """
    lac_count = f"({fld(lac, 'entry_id')} + 1)"
    # the guard came with the LAC clamp, in the same method version (docs §1.9)
    return beh.pick("pan_lac_clamp", f"IF({cle} > 0, {lac_count}, {ZERO})", lac_count)


def _valid_entry0_sql(beh: SqlFlags) -> str:
    """``isValidPosition((lid, 0))`` for a ledger present in the map (docs §1.4); view-row columns."""
    lac_l, lac_e = fld("lac", "ledger_id"), fld("lac", "entry_id")
    new = f"(is_cur OR IF(lid = {lac_l}, {lac_e} >= 0, ent > 0))"
    old = case((f"lid > {lac_l}", "false"), (f"lid = {lac_l}", f"{lac_e} + 1 >= 0"), otherwise="ent > 0")
    return f"coalesce({beh.pick('new_valid_position', new, old)}, false)"


@dataclass
class _EnvMemo:
    """What one :func:`shared_ledger_view` block built, by name, input frames and arguments."""

    materialise: Callable[[DataFrame], DataFrame]
    # keyed by id(); the frames are kept in the value so an id cannot be reused while the block lasts
    built: dict[tuple[object, ...], tuple[tuple[DataFrame, ...], object]]

    def get(
        self, name: str, frames: Sequence[DataFrame], args: object, build: Callable[[], object]
    ) -> object:
        """What ``build()`` returned for these ``name``, ``frames`` and ``args`` in this block."""
        key = (name, *(id(f) for f in frames), args)
        if key not in self.built:
            self.built[key] = (tuple(frames), build())
        return self.built[key][1]


_ENV_MEMO: ContextVar[_EnvMemo | None] = ContextVar("pulsar_model_env_memo", default=None)


@contextmanager
def shared_ledger_view(materialise: Callable[[DataFrame], DataFrame]) -> Iterator[None]:
    """Inside the block, the transforms of this module given the same ``ledgers`` and ``managed_ledgers``
    frames (the same objects) and the same version argument share one ledger view and topic context,
    each passed once through ``materialise`` (a stage passes ``localCheckpoint``).

    A stage computes several analyses over one export; without the block each builds its own ledger view
    (window passes over every ledger) into its plan, so a stage's query carried that plan four times.
    Results are the same with or without the block; outside it every call is pure and lazy.
    """
    token = _ENV_MEMO.set(_EnvMemo(materialise=materialise, built={}))
    try:
        yield
    finally:
        _ENV_MEMO.reset(token)


def shared_result(
    name: str, frames: Sequence[DataFrame], args: object, build: Callable[[], DataFrame]
) -> DataFrame:
    """``build()``; inside :func:`shared_ledger_view`, built and materialised once per ``name``, input
    ``frames`` (the same objects) and hashable ``args`` - for a transform several analyses of one stage
    read (:func:`pulsar_model.backlog.precise_backlog`)."""
    memo = _ENV_MEMO.get()
    if memo is None:
        return build()
    return cast(DataFrame, memo.get(name, frames, args, lambda: memo.materialise(build())))


@dataclass(frozen=True)
class _Env:
    """The ledger view and topic context of one call, plus the seek helpers built on them.

    ``source`` is the call's :class:`SqlFlags` as resolved from ``pulsar_version``; ``beh`` the same flags
    bound to the topic context (``_pa_ctx.flags`` per row), which every builder on a ``_pa_ctx`` frame reads.
    """

    source: SqlFlags
    beh: SqlFlags
    view: DataFrame
    ctx: DataFrame

    @classmethod
    def build(
        cls,
        ledgers: DataFrame,
        managed_ledgers: DataFrame,
        flags: SqlFlags,
        materialise: Callable[[DataFrame], DataFrame] | None = None,
    ) -> _Env:
        """The environment of ``ledgers``/``managed_ledgers``; ``materialise`` (e.g. the caller's
        ``localCheckpoint``) is applied to the ledger view, then to the context built on it. Inside
        :func:`shared_ledger_view` (and without ``materialise``) one environment per inputs and flags."""
        memo = _ENV_MEMO.get() if materialise is None else None
        if memo is None:
            return cls._build(ledgers, managed_ledgers, flags, materialise)
        values = None if flags.values is None else tuple(sorted(flags.values.items()))
        env = memo.get(
            "env",
            (ledgers, managed_ledgers),
            values,
            lambda: cls._build(ledgers, managed_ledgers, flags, memo.materialise),
        )
        return cast(_Env, env)

    @classmethod
    def _build(
        cls,
        ledgers: DataFrame,
        managed_ledgers: DataFrame,
        flags: SqlFlags,
        materialise: Callable[[DataFrame], DataFrame] | None,
    ) -> _Env:
        keep = materialise or (lambda df: df)
        ml = _ml_frame(managed_ledgers, flags)
        row_flags = flags.at(ref(FLAGS_COLUMN))
        view = keep(_ledger_view(_by_topic(ledgers), ml, row_flags))
        beh = flags.at(fld(X, "flags"))
        ctx = keep(_context(ml, view, row_flags, beh))
        return cls(source=flags, beh=beh, view=view, ctx=ctx)

    def with_ctx(self, df: DataFrame) -> DataFrame:
        """Left-join the topic context struct ``_pa_ctx`` (null when the topic has no managed ledger)."""
        return df.join(self.ctx, on=list(KEY), how="left")

    def lookup(self, df: DataFrame, ledger_id_sql: str, out: str) -> DataFrame:
        """Add ``out``: the ledger lookup of ``ledger_id_sql`` (needs ``_pa_ctx`` on ``df``)."""
        view = self.view.select(
            *KEY, F.col("lid").alias("_key"), F.col("lid").alias("_tb"), F.col("row").alias("_payload")
        )
        sought = _seek(df, E(ledger_id_sql), view, "_pa_floor", mode="floor")
        cols = [F.col(f"`{c}`") for c in sought.columns if c != "_pa_floor"]
        return sought.select(*cols, E(ledger_lookup_sql(ledger_id_sql, ref("_pa_floor"), X)).alias(out))

    def walk_stop(self, df: DataFrame, target_sql: str, out: str) -> DataFrame:
        """Add ``out``: the first ledger row (by id) whose running walk total is >= the target (§1.9)."""
        view = self.view.select(
            *KEY,
            F.col("row.cum_walk").alias("_key"),
            F.col("lid").alias("_tb"),
            F.col("row").alias("_payload"),
        )
        return _seek(df, E(target_sql), view, out, mode="ceil")


def _ledger_view(ledgers: DataFrame, ml: DataFrame, beh: SqlFlags) -> DataFrame:
    """One row per ledger: ``cluster, topic, lid, valid0, cur_id, lac_lid, row``.

    ``row`` (the struct seeks return) has the :data:`~pulsar_model.engine.columns.BASE_ROW_FIELDS`: ``lid,
    ent,
    sz`` (as listed: the open ledger is 0/0, docs §0.2), ``cum_ent, cum_sz`` (running sums including this
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
    flag_cols = [FLAGS_COLUMN] if beh.per_row else []
    joined = base.join(ml.select(*KEY, "cur_id", "cle", "lac", *flag_cols), on=list(KEY), how="left")
    joined = joined.select("*", E("coalesce(cur_id = lid, false)").alias("is_cur"))
    walk = f"IF(is_cur, {_open_ledger_walk_total_sql('cle', 'lac', beh)}, ent)"
    step1 = joined.select(
        *KEY,
        "lid",
        "ent",
        "sz",
        "cur_id",
        F.col("lac.ledger_id").alias("lac_lid"),
        "is_cur",
        E(walk).alias("walk"),
        E(_valid_entry0_sql(beh)).alias("valid0"),
    )
    by_id = Window.partitionBy(*KEY).orderBy("lid")
    running = by_id.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    before = by_id.rowsBetween(Window.unboundedPreceding, -1)
    step2 = step1.select(
        "*",
        F.sum("ent").over(running).alias("cum_ent"),
        F.sum("sz").over(running).alias("cum_sz"),
        F.sum("walk").over(running).alias("cum_walk"),
        F.last(E("IF(ent > 0, named_struct('lid', lid, 'ent', ent), NULL)"), ignorenulls=True)
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
    nested_fields = ", ".join(
        f"'{name}', {NULL_LONG if name == 'nv0_gt' else name}" for name in BASE_ROW_FIELDS
    )
    nested = E(f"IF(valid0, CAST(named_struct({nested_fields}) AS {BASE_ROW_SQL_TYPE}), NULL)")
    step3 = step2.select("*", F.last(nested, ignorenulls=True).over(after).alias("nv0_row"))
    step3 = step3.select("*", F.col("nv0_row.lid").alias("nv0_gt"))
    row = F.struct(*[F.col(name) for name in BASE_ROW_FIELDS], F.col("nv0_row"))
    return step3.select(*KEY, "lid", "valid0", "cur_id", "lac_lid", row.alias("row"))


def _context(ml: DataFrame, view: DataFrame, row_beh: SqlFlags, beh: SqlFlags) -> DataFrame:
    """One row per managed ledger: ``cluster, topic, _pa_ctx`` (the topic context struct, see columns.py).

    Besides the managed-ledger columns it carries the ledger-list summary (first/max ids, the open, last
    and first-valid ledger rows, the total of the ``getPositionAfterN`` walk), the lookups of LAC's ledger
    (``lac_lk``) and of the open ledger (``cur_lk``) - found by aggregation (largest id <= x) -, LAC's
    validity and next valid position and ``getFirstPosition()``'s ledger.
    """
    below_lac = F.col("lid") <= F.col("lac_lid")
    below_cur = F.col("lid") <= F.col("cur_id")
    summary = view.groupBy(*KEY).agg(
        F.min("lid").alias("first_lid"),
        F.max("lid").alias("max_lid"),
        F.count(F.lit(1)).alias("n_ledgers"),
        F.min(F.when(F.col("valid0"), F.col("lid"))).alias("first_valid0_lid"),
        F.min_by(E(f"IF(valid0, {base_row_sql('row')}, NULL)"), F.when(F.col("valid0"), F.col("lid"))).alias(
            "first_valid0_row"
        ),
        F.first(E(f"IF(row.is_cur, {base_row_sql('row')}, NULL)"), ignorenulls=True).alias("cur_row"),
        F.max_by(E(base_row_sql("row")), F.col("lid")).alias("max_row"),
        F.sum("row.walk").alias("total_walk"),
        F.max_by(F.when(below_lac, F.col("row")), F.when(below_lac, F.col("lid"))).alias("_lac_floor"),
        F.max_by(F.when(below_cur, F.col("row")), F.when(below_cur, F.col("lid"))).alias("_cur_floor"),
    )
    joined = ml.join(summary, on=list(KEY), how="left")
    flag_fields = [F.col(FLAGS_COLUMN).alias("flags")] if beh.per_row else []
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
        E(f"CAST(first_valid0_row AS {BASE_ROW_SQL_TYPE})").alias("first_valid0_row"),
        E(_open_ledger_walk_total_sql("cle", "lac", row_beh)).alias("w_cur"),
        F.coalesce(F.col("total_walk"), F.lit(0).cast("long")).alias("total_walk"),
        "cur_row",
        "max_row",
        *flag_fields,
    )
    staged = joined.select(*KEY, ctx0.alias(CTX), "_lac_floor", "_cur_floor")
    lac_lk = ledger_lookup_sql(fld(LAC, "ledger_id"), ref("_lac_floor"), X)
    cur_lk = ledger_lookup_sql(fld(X, "cur_id"), ref("_cur_floor"), X)
    staged = staged.select(
        *KEY, F.col(CTX).withField("lac_lk", E(lac_lk)).withField("cur_lk", E(cur_lk)).alias(CTX)
    )
    # LAC's validity and next valid position and getFirstPosition()'s ledger, used by the 4.x
    # comparePositions (§1.7)
    lac_valid = f"coalesce({is_valid_position_sql(LAC, fld(X, 'lac_lk'), X, beh)}, false)"
    lac_next = next_valid_position_sql(LAC, fld(X, "lac_lk"), X, beh)
    return staged.select(
        *KEY,
        F.col(CTX)
        .withField("lac_valid", E(lac_valid))
        .withField("lac_next", E(lac_next))
        .withField("first_pos_lid", E(fld(first_position_sql(X), "ledger_id")))
        .alias(CTX),
    )


def _seek(
    df: DataFrame,
    key: Column,
    view: DataFrame,
    out: str,
    *,
    mode: SeekMode,
    group: str | None = None,
) -> DataFrame:
    """Add ``out``: the ``_payload`` of the ``view`` row matched by each ``df`` row of the same topic.

    ``view`` has the columns ``cluster, topic``, ``_key``, ``_tb`` (tie-break) and ``_payload``. Modes:
    ``floor``: largest ``_key <= key``; ``floor_strict``: largest ``_key < key`` (ties: largest ``_tb``);
    ``ceil``: smallest ``_key >= key`` (ties: smallest ``_tb``). Implemented as a union of both sides and one
    running ``last(ignorenulls)`` window partitioned by topic, so inputs that are already hash-partitioned
    by ``(cluster, topic)`` need no shuffle. With ``group`` (a column of both sides) the search runs inside
    each group value: the window orders by it first and a payload of another group is discarded (the
    payload must then carry the group value in a field of the same name). Every ``df`` row is kept exactly
    once; null keys match nothing.
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
    grouping = [group] if group else []
    views = view.select(
        *[F.col(f"`{c}`") for c in (*KEY, *grouping)],
        F.col("_key").alias("_sk_key"),
        F.lit(view_o).alias("_sk_o"),
        F.col("_tb").cast("long").alias("_sk_tb"),
        F.col("_payload").alias("_sk_pl"),
    )
    union = probes.unionByName(views, allowMissingColumns=True)
    order = [F.col(f"`{g}`") for g in grouping]
    if mode == "ceil":
        order += [F.col("_sk_key").desc_nulls_last(), F.col("_sk_o"), F.col("_sk_tb").desc()]
    else:
        order += [F.col("_sk_key").asc_nulls_first(), F.col("_sk_o"), F.col("_sk_tb")]
    window = (
        Window.partitionBy(*[F.col(c) for c in KEY])
        .orderBy(*order)
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    found = F.last("_sk_pl", ignorenulls=True).over(window)
    if group:
        found = F.when(found[group] == F.col(f"`{group}`"), found)
    found = F.when(F.col("_sk_key").isNotNull(), found)
    matched = union.select(*[F.col(f"`{c}`") for c in df.columns], found.alias(out), "_sk_probe")
    return matched.where(F.col("_sk_probe")).drop("_sk_probe")


def _keep(df_columns: Sequence[str], added: Sequence[str]) -> list[Column]:
    """The request columns, minus any that an output column of the same name replaces."""
    return [F.col(f"`{c}`") for c in df_columns if c not in added]


def _coalesce_sql(*parts: str) -> str:
    return "coalesce(" + ", ".join(parts) + ")"


def _err_if(cond: str, message: str) -> str:
    return f"IF({cond}, {_sql_string(message)}, {NULL_STRING})"


MISSING_TOPIC_SQL = _err_if(f"{X} IS NULL", MISSING_TOPIC)


# --- §1.3 - §1.5 public transforms ----------------------------------------------------------------------


def previous_position(requests: DataFrame, ledgers: DataFrame, managed_ledgers: DataFrame) -> DataFrame:
    """Add ``previous_position``: ``getPreviousPosition(position)`` (docs §1.3, identical 2.x-4.x).

    One row per request (``cluster, topic, request_id, position``). ``(L,0)`` and ``(L,-1)`` both step to
    the last entry of the last earlier non-empty ledger, ``(first ledger, -1)`` when the earlier ledgers are
    all empty, ``(L,-1)`` when there is no earlier ledger. Null position, or a topic without
    managed-ledger row -> null. Pure and lazy.
    """
    env = _Env.build(ledgers, managed_ledgers, sql_flags(DEFAULT_PULSAR_VERSION))
    df = env.with_ctx(_by_topic(requests)).select("*", as_position(F.col("position")).alias("_pa_p"))
    df = env.lookup(df, fld(ref("_pa_p"), "ledger_id"), "_pa_lk")
    result = f"IF({X} IS NULL, {NULL_POS_SQL}, {previous_position_sql(ref('_pa_p'), ref('_pa_lk'), X)})"
    return df.select(*_keep(requests.columns, ["previous_position"]), E(result).alias("previous_position"))


def is_valid_position(
    requests: DataFrame,
    ledgers: DataFrame,
    managed_ledgers: DataFrame,
    pulsar_version: VersionArg = DEFAULT_PULSAR_VERSION,
) -> DataFrame:
    """Add ``is_valid``: ``isValidPosition(position)`` (docs §1.4) in the version's order.

    One row per request. 3.x/4.x: a position in a deleted ledger is never valid; the open ledger accepts
    entries up to ``LAC.entry+1`` (when LAC is in it) or entry 0; a closed LAC ledger accepts up to LAC.
    2.x-old: everything after LAC's ledger is invalid, LAC's ledger accepts ``LAC.entry+1``. Null when the
    position is null or the topic has no managed-ledger row. Pure and lazy.
    """
    env = _Env.build(ledgers, managed_ledgers, sql_flags(pulsar_version))
    beh = env.beh
    df = env.with_ctx(_by_topic(requests)).select("*", as_position(F.col("position")).alias("_pa_p"))
    df = env.lookup(df, fld(ref("_pa_p"), "ledger_id"), "_pa_lk")
    valid = is_valid_position_sql(ref("_pa_p"), ref("_pa_lk"), X, beh)
    result = f"IF(`_pa_p` IS NULL OR {X} IS NULL, CAST(NULL AS BOOLEAN), {valid})"
    return df.select(*_keep(requests.columns, ["is_valid"]), E(result).alias("is_valid"))


def next_valid_position(
    requests: DataFrame,
    ledgers: DataFrame,
    managed_ledgers: DataFrame,
    pulsar_version: VersionArg = DEFAULT_PULSAR_VERSION,
) -> DataFrame:
    """Add ``next_valid_position``: ``getNextValidPosition(position)`` (docs §1.5).

    One row per request. ``P.next`` when valid, else entry 0 of the first later ledger where that is
    valid, else (3.x/4.x) ``(open ledger, 0)`` when the open ledger is empty or ``LAC.next``; 2.x-old
    always falls back to ``LAC.next``. Null position -> null. Pure and lazy.
    """
    env = _Env.build(ledgers, managed_ledgers, sql_flags(pulsar_version))
    beh = env.beh
    df = env.with_ctx(_by_topic(requests)).select("*", as_position(F.col("position")).alias("_pa_p"))
    df = env.lookup(df, fld(ref("_pa_p"), "ledger_id"), "_pa_lk")
    result = next_valid_position_sql(ref("_pa_p"), ref("_pa_lk"), X, beh)
    return df.select(
        *_keep(requests.columns, ["next_valid_position"]), E(result).alias("next_valid_position")
    )


def entries_between(
    requests: DataFrame,
    ledgers: DataFrame,
    managed_ledgers: DataFrame,
    pulsar_version: VersionArg = DEFAULT_PULSAR_VERSION,
) -> DataFrame:
    """Add ``entries`` and ``error``: ``ManagedLedgerImpl.getNumberOfEntries(range)`` (docs §1.7).

    One row per request (``cluster, topic, request_id, lower, lower_closed, upper, upper_closed``).
    2.x/3.x arithmetic (``hi.entry`` taken literally, a deleted ``lo`` ledger contributes nothing) or the
    4.x arithmetic (clamps, deleted ledgers, ``(L,-1)`` lower ends). ``error`` is set and ``entries`` null
    when the broker throws: Guava cannot build a range with ``lower > upper`` (or ``open(a, a)``) in any
    version, and 4.x also rejects ``comparePositions(lower, upper) > 0`` ("Invalid range ..."). Pure and lazy.
    """
    env = _Env.build(ledgers, managed_ledgers, sql_flags(pulsar_version))
    beh = env.beh
    df = env.with_ctx(_by_topic(requests)).select(
        "*",
        as_position(F.col("lower")).alias("_pa_lo"),
        as_position(F.col("upper")).alias("_pa_hi"),
        F.coalesce(F.col("lower_closed").cast("boolean"), F.lit(False)).alias("_pa_lc"),
        F.coalesce(F.col("upper_closed").cast("boolean"), F.lit(False)).alias("_pa_hc"),
    )
    df = env.lookup(df, fld(ref("_pa_lo"), "ledger_id"), "_pa_lk_lo")
    df = env.lookup(df, fld(ref("_pa_hi"), "ledger_id"), "_pa_lk_hi")
    count, err = entries_between_sql(
        ref("_pa_lo"), ref("_pa_lk_lo"), ref("_pa_lc"), ref("_pa_hi"), ref("_pa_lk_hi"), ref("_pa_hc"), X, beh
    )
    df = df.select("*", E(count).alias("_pa_count"), E(err).alias("_pa_err"))
    error = _coalesce_sql(
        MISSING_TOPIC_SQL,
        _err_if("`_pa_lo` IS NULL OR `_pa_hi` IS NULL", "lower and upper must not be null"),
        "`_pa_err`",
    )
    df = df.select("*", E(error).alias("_pa_error"))
    return df.select(
        *_keep(requests.columns, ["entries", "error"]),
        E("IF(`_pa_error` IS NULL, `_pa_count`, CAST(NULL AS BIGINT))").alias("entries"),
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
    start_lk: str | None = None,
) -> DataFrame:
    """Add ``{prefix}_pos`` and ``{prefix}_err``: ``getPositionAfterN(start, n, bound)`` (docs §1.9).

    ``df`` must carry ``_pa_ctx``; ``start_lk`` may name an existing lookup column of the start's ledger.
    The walk is index arithmetic on the running per-ledger totals (``cum_walk``): after the first ledger
    the loop stops at the first ledger whose running total reaches ``base + remaining`` or at the open
    ledger, whichever comes first; past the last ledger each version ends differently (see versions.py).
    """
    beh = env.beh

    def c(name: str) -> str:
        return ref(f"{prefix}_{name}")

    df = df.select(
        "*",
        as_position(start).alias(f"{prefix}_s"),
        n.cast("long").alias(f"{prefix}_n"),
        bound.alias(f"{prefix}_bound"),
    )
    if start_lk is None:
        df = env.lookup(df, fld(c("s"), "ledger_id"), f"{prefix}_lk_s")
    else:
        df = df.select("*", F.col(start_lk).alias(f"{prefix}_lk_s"))
    s, lk_s, nn, bd = c("s"), c("lk_s"), c("n"), c("bound")
    df = df.select("*", E(next_position_is_valid_sql(s, lk_s, X, beh)).alias(f"{prefix}_qv"))
    incl, excl = f"{bd} = '{BOUND_START_INCLUDED}'", f"{bd} = '{BOUND_START_EXCLUDED}'"
    cur0 = case(
        (incl, s), (excl, next_valid_position_sql(s, lk_s, X, beh, q_valid=c("qv"))), otherwise=NULL_POS_SQL
    )
    lk0 = case((incl, lk_s), (excl, next_valid_lookup_sql(c("qv"), lk_s, X, beh)))
    df = df.select("*", E(cur0).alias(f"{prefix}_c0"), E(lk0).alias(f"{prefix}_lk0"))
    c0, lk0c = c("c0"), c("lk0")
    e0 = fld(c0, "entry_id")
    total0 = f"coalesce({fld(lk0c, 'walk')}, {ZERO})"
    unread0 = beh.pick("pan_unread_guard", f"IF({total0} > 0, {total0} - {e0}, {ZERO})", f"({total0} - {e0})")
    negative = f"coalesce({nn} < 0, false)"  # "while (entriesToSkip >= 0)" never runs
    # 2.x-old: ledgers.get(id).getEntries() on a ledger missing from the map throws an NPE
    npe_first = beh.pick(
        "pan_deleted_ledger_as_empty", "false", f"(NOT {negative} AND {fld(lk0c, 'walk')} IS NULL)"
    )
    df = df.select(
        "*",
        E(total0).alias(f"{prefix}_t0"),
        E(unread0).alias(f"{prefix}_u0"),
        E(negative).alias(f"{prefix}_neg"),
        E(f"coalesce({npe_first}, false)").alias(f"{prefix}_npe"),
    )
    first = f"coalesce(NOT {c('neg')} AND NOT {c('npe')} AND {c('u0')} >= {nn}, false)"
    at_open = f"coalesce({fld(lk0c, 'is_cur')}, false)"
    df = df.select(
        "*",
        E(first).alias(f"{prefix}_first"),
        E(at_open).alias(f"{prefix}_open0"),
        E(f"{fld(lk0c, 'cum_walk_le')} + ({nn} - {c('u0')})").alias(f"{prefix}_target"),
    )
    walk_needed = f"NOT {c('neg')} AND NOT {c('npe')} AND NOT {c('first')} AND NOT {c('open0')}"
    df = env.walk_stop(df, f"IF({walk_needed}, {c('target')}, NULL)", f"{prefix}_stop")

    a_row, tgt = c("stop"), c("target")
    cur_row, max_row, cur_id, w_cur = fld(X, "cur_row"), fld(X, "max_row"), fld(X, "cur_id"), fld(X, "w_cur")
    open_ahead = f"({cur_row} IS NOT NULL AND {cur_id} > {fld(c0, 'ledger_id')})"
    use_a = f"({a_row} IS NOT NULL AND (NOT {open_ahead} OR {fld(a_row, 'lid')} < {cur_id}))"
    df = df.select(
        "*",
        E(f"coalesce({use_a}, false)").alias(f"{prefix}_use_a"),
        E(f"coalesce({open_ahead} AND NOT {use_a}, false)").alias(f"{prefix}_use_open"),
        E(f"{tgt} - {fld(X, 'total_walk')}").alias(f"{prefix}_rem"),
    )
    remaining = c("rem")
    # past the last ledger (see versions.py _past_end): re-walk the last key, loop forever, or NPE
    max_walk = fld(max_row, "walk")
    revisit_pos = case(
        (f"{max_row} IS NULL", NULL_POS_SQL),
        (fld(max_row, "is_cur"), pos_sql(fld(max_row, "lid"), f"least({remaining}, {w_cur})")),
        (f"{max_walk} > 0", pos_sql(fld(max_row, "lid"), f"pmod({remaining} - 1, {max_walk}) + 1")),
        otherwise=NULL_POS_SQL,
    )
    revisit_error = case(
        (
            f"{max_row} IS NULL",
            _sql_string("NoSuchElementException: ledgers.lastKey() on an empty ledger map"),
        ),
        (f"{fld(max_row, 'is_cur')} OR {max_walk} > 0", NULL_STRING),
        otherwise=_sql_string(
            "getPositionAfterN never returns: the last ledger is empty and not the open ledger, so the "
            "broker re-visits ledgers.lastKey() forever"
        ),
    )
    loop_error = _sql_string(
        "getPositionAfterN never returns: past the last ledger it moves to ledgers.lastKey()+1, which is "
        "absent from the map and counts 0 entries, forever"
    )
    npe_end_error = _sql_string(
        "NullPointerException: getPositionAfterN ran past the last ledger (ledgers.lastKey()+1 is not in "
        "the ledger map)"
    )
    end_pos = beh.pick("pan_falls_back_to_last_key", revisit_pos, NULL_POS_SQL)
    end_error = beh.pick(
        "pan_falls_back_to_last_key",
        revisit_error,
        beh.pick("pan_deleted_ledger_as_empty", loop_error, npe_end_error),
    )
    neg, npe, first_c, use_a_c, use_open, open0 = (
        c("neg"),
        c("npe"),
        c("first"),
        c("use_a"),
        c("use_open"),
        c("open0"),
    )
    cur = case(
        (neg, c0),
        (npe, NULL_POS_SQL),
        (first_c, pos_sql(fld(c0, "ledger_id"), f"{e0} + {nn}")),
        (open0, pos_sql(fld(c0, "ledger_id"), c("t0"))),
        (use_a_c, pos_sql(fld(a_row, "lid"), f"{tgt} - ({fld(a_row, 'cum_walk')} - {fld(a_row, 'walk')})")),
        (use_open, pos_sql(cur_id, f"least({tgt} - ({fld(cur_row, 'cum_walk')} - {w_cur}), {w_cur})")),
        otherwise=end_pos,
    )
    cur_lk = case(
        (f"{neg} OR {first_c} OR {open0}", lk0c),
        (use_a_c, row_lookup_sql(a_row, X)),
        (use_open, base_row_lookup_sql(cur_row, X)),
        (f"{max_row} IS NOT NULL", base_row_lookup_sql(max_row, X)),
    )
    walk_error = (
        f"IF({neg} OR {npe} OR {first_c} OR {open0} OR {use_a_c} OR {use_open}, {NULL_STRING}, {end_error})"
    )
    npe_error = (
        f"IF({npe}, concat('NullPointerException: getPositionAfterN reads ledgers.get(', "
        f"CAST({fld(c0, 'ledger_id')} AS STRING), "
        f"').getEntries() of a ledger missing from the map'), {NULL_STRING})"
    )
    bound_error = (
        f"IF(coalesce({bd} IN ('{BOUND_START_INCLUDED}', '{BOUND_START_EXCLUDED}'), false), {NULL_STRING}, "
        f"concat('unknown bound ', coalesce({bd}, 'null'), '; expected startIncluded|startExcluded'))"
    )
    error = _coalesce_sql(
        MISSING_TOPIC_SQL,
        _err_if(f"{s} IS NULL", "start position is null"),
        _err_if(f"{nn} IS NULL", "n is null"),
        bound_error,
        npe_error,
        walk_error,
    )
    df = df.select(
        "*",
        E(cur).alias(f"{prefix}_cur"),
        E(cur_lk).alias(f"{prefix}_cur_lk"),
        E(error).alias(f"{prefix}_err"),
    )
    df = df.select("*", E(previous_position_sql(c("cur"), c("cur_lk"), X)).alias(f"{prefix}_prev"))
    result = beh.pick("pan_lac_clamp", f"IF({c('prev')} > {LAC}, {LAC}, {c('prev')})", c("prev"))
    return df.select("*", E(f"IF({c('err')} IS NULL, {result}, {NULL_POS_SQL})").alias(f"{prefix}_pos"))


def position_after_n(
    requests: DataFrame,
    ledgers: DataFrame,
    managed_ledgers: DataFrame,
    pulsar_version: VersionArg = DEFAULT_PULSAR_VERSION,
) -> DataFrame:
    """Add ``position`` and ``error``: ``getPositionAfterN(start_position, n, bound)`` (docs §1.9).

    One row per request (``cluster, topic, request_id, start_position, n, bound``). ``startExcluded`` starts
    from ``nextValid(start)``; the open ledger counts ``LAC.entry+1`` entries (3.x+: only when it has
    entries; 2.x-old: always - phantom entries); deleted ledgers count 0 (2.x-old: NPE); the result is
    ``getPreviousPosition`` of where the walk stops, clamped to LAC from 2.10.1 on. Overshooting N lands on
    LAC (3.x+). When the broker would throw or loop forever, ``position`` is null and ``error`` says why.
    Pure and lazy.
    """
    env = _Env.build(ledgers, managed_ledgers, sql_flags(pulsar_version))
    df = _position_after_n(
        env, env.with_ctx(_by_topic(requests)), F.col("start_position"), F.col("n"), F.col("bound"), "_pa_pan"
    )
    return df.select(
        *_keep(requests.columns, ["position", "error"]),
        F.col("_pa_pan_pos").alias("position"),
        F.col("_pa_pan_err").alias("error"),
    )


# --- cursor state: acked ranges with lookups, gaps and extension chains ------------------------------------


def _cursor_state(env: _Env, cursors: DataFrame, *, with_plan: bool) -> DataFrame:
    """One row per cursor: ``cluster, topic, cursor_name, _pa_orig`` (the input row as a struct),
    ``_pa_md`` (+ ``_pa_md_lk``), ``_pa_ctx``, ``_pa_rng`` and ``_pa_idm_lac``.

    ``_pa_rng`` is the sorted array of acked ranges ``(a, b]`` with ``idx, a, b, a_lk, b_lk`` and, when
    ``with_plan``: ``processed, gap, cumgap, del`` (the ``getNumIndividualDeletedEntriesToSkip`` walk,
    §1.10), ``chain_upper, chain_upper_lk`` (where the mark-delete extension of §1.2 ends when it enters
    this range) and ``inter_md`` (ML count of the range's part after md). ``_pa_idm_lac`` is the ML count
    of the acked entries in ``(md, LAC]`` - the IDM part of the cursor count (§1.8), computed per range
    as the count of the Guava intersection ``(max(a, md), min(b, LAC)]`` when the ranges connect.
    """
    beh = env.beh
    base = _by_topic(cursors).select(
        *CURSOR_KEY,
        F.struct(*[F.col(f"`{c}`") for c in cursors.columns]).alias("_pa_orig"),
        as_position(F.col("mark_delete_position")).alias("_pa_md"),
        F.col("individually_deleted").alias("_pa_idm"),
    )
    base = env.lookup(env.with_ctx(base), fld(ref("_pa_md"), "ledger_id"), "_pa_md_lk")
    cursor_cols = [*CURSOR_KEY, "_pa_orig", "_pa_md", "_pa_md_lk", CTX]
    exploded = base.select(*cursor_cols, F.explode_outer(F.col("_pa_idm")).alias("_pa_r"))
    has_range = "(`_pa_r` IS NOT NULL AND `_pa_r`.lower IS NOT NULL AND `_pa_r`.upper IS NOT NULL)"
    exploded = exploded.select(
        *cursor_cols,
        E(f"IF({has_range}, {pos_sql('`_pa_r`.lower.ledger_id', '`_pa_r`.lower.entry_id')}, NULL)").alias(
            "a"
        ),
        E(f"IF({has_range}, {pos_sql('`_pa_r`.upper.ledger_id', '`_pa_r`.upper.entry_id')}, NULL)").alias(
            "b"
        ),
    )
    by_range = Window.partitionBy(*CURSOR_KEY).orderBy("a", "b")
    exploded = exploded.select("*", F.row_number().over(by_range).alias("idx"))
    exploded = env.lookup(exploded, "a.ledger_id", "a_lk")
    exploded = env.lookup(exploded, "b.ledger_id", "b_lk")
    md, md_lk = ref("_pa_md"), ref("_pa_md_lk")
    exploded = exploded.select(
        "*",
        E(f"IF(a >= {md}, a, {md})").alias("_pa_ilo"),
        E(f"IF(a >= {md}, a_lk, {md_lk})").alias("_pa_ilo_lk"),
        E(f"IF(b <= {LAC}, b, {LAC})").alias("_pa_ihi"),
        E(f"IF(b <= {LAC}, b_lk, {fld(X, 'lac_lk')})").alias("_pa_ihi_lk"),
    )
    inter_lac = open_closed_count_sql("`_pa_ilo`", "`_pa_ilo_lk`", "`_pa_ihi`", "`_pa_ihi_lk`", X, beh)
    exploded = exploded.select(
        "*", E(f"IF(a IS NULL, NULL, IF(`_pa_ilo` <= `_pa_ihi`, {inter_lac}, {ZERO}))").alias("_pa_inter_lac")
    )
    fields: list[Column] = [F.col("idx"), F.col("a"), F.col("b"), F.col("a_lk"), F.col("b_lk")]
    if with_plan:
        inter_md = open_closed_count_sql("`_pa_ilo`", "`_pa_ilo_lk`", "b", "b_lk", X, beh)
        # Extension links: from the upper end b, nextValid(b) <= LAC and inside a later acked range.
        exploded = exploded.select(
            "*",
            E(f"IF(b > {md}, {inter_md}, {ZERO})").alias("inter_md"),
            E(next_position_is_valid_sql("b", "b_lk", X, beh)).alias("_pa_qv"),
        )
        exploded = exploded.select(
            "*", E(next_valid_position_sql("b", "b_lk", X, beh, q_valid="`_pa_qv`")).alias("_pa_p")
        )
        ranges_view = exploded.where(F.col("a").isNotNull()).select(
            *CURSOR_KEY,
            F.col("a").alias("_key"),
            F.col("idx").alias("_tb"),
            F.struct("cursor_name", "idx", "a", "b").alias("_payload"),
        )
        exploded = _seek(
            exploded, F.col("_pa_p"), ranges_view, "_pa_cont", mode="floor_strict", group="cursor_name"
        )
        link = f"coalesce(`_pa_p` <= {LAC} AND `_pa_cont` IS NOT NULL AND `_pa_p` <= `_pa_cont`.b, false)"
        chain_frame = (
            Window.partitionBy(*CURSOR_KEY)
            .orderBy(F.col("idx").desc())
            .rowsBetween(Window.unboundedPreceding, Window.currentRow)
        )
        chain = F.last(E(f"IF({link}, NULL, named_struct('u', b, 'u_lk', b_lk))"), ignorenulls=True)
        processed = E(f"coalesce(a >= {md}, false)")
        by_idx = Window.partitionBy(*CURSOR_KEY).orderBy("idx")
        exploded = exploded.select(
            "*",
            chain.over(chain_frame).alias("_pa_chain"),
            processed.alias("processed"),
            F.lag(processed).over(by_idx).alias("_pa_prev_processed"),
            F.lag("b").over(by_idx).alias("_pa_prev_b"),
            F.lag("b_lk").over(by_idx).alias("_pa_prev_b_lk"),
        )
        from_prev = "(processed AND coalesce(`_pa_prev_processed`, false))"
        exploded = exploded.select(
            "*",
            E(f"IF({from_prev}, `_pa_prev_b`, {md})").alias("_pa_start"),
            E(f"IF({from_prev}, `_pa_prev_b_lk`, {md_lk})").alias("_pa_start_lk"),
        )
        gap = open_closed_count_sql("`_pa_start`", "`_pa_start_lk`", "a", "a_lk", X, beh)
        deleted = open_closed_count_sql("a", "a_lk", "b", "b_lk", X, beh)
        exploded = exploded.select(
            "*",
            E(f"IF(processed, {gap}, NULL)").alias("gap"),
            E(f"IF(processed, {deleted}, NULL)").alias("del"),
        )
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
    # one row per cursor again; the aggregation is keyed inside the topic partitioning (no shuffle)
    return exploded.groupBy(*CURSOR_KEY).agg(
        F.first("_pa_orig").alias("_pa_orig"),
        F.first("_pa_md").alias("_pa_md"),
        F.first("_pa_md_lk").alias("_pa_md_lk"),
        F.first(CTX).alias(CTX),
        F.array_sort(F.collect_list(F.when(F.col("a").isNotNull(), F.struct(*fields)))).alias("_pa_rng"),
        F.coalesce(F.sum("_pa_inter_lac"), F.lit(0).cast("long")).alias("_pa_idm_lac"),
    )


def _ranges_out_sql(ranges: str) -> str:
    """The internal range array as ``array<struct<lower, upper>>`` (the ``individually_deleted`` shape)."""
    return f"transform({ranges}, r -> named_struct('lower', r.a, 'upper', r.b))"


def _mark_delete(env: _Env, df: DataFrame, target: str, target_error: str, prefix: str) -> DataFrame:
    """``asyncMarkDelete(target)`` on the cursor state of each row (docs §1.2, §1.10, §1.11).

    Adds ``{prefix}_md`` (final mark-delete), ``{prefix}_rp``, ``{prefix}_idm``, ``{prefix}_newly`` (entries
    newly covered that were not already acked) and ``{prefix}_err``. Rules, as in ``asyncMarkDelete`` and
    ``setAcknowledgedPosition``: a target beyond LAC is rejected ("Invalid mark deleted position") unless
    the cursor finished its ledger and the target is in the ledger after LAC's; a target before md is
    ignored (``MarkDeletingMarkedPosition`` is reported as success by skip/clear); a target equal to md
    changes nothing but ``removeAtMost(md)``; otherwise md moves and extends over acked ranges starting at
    ``nextValid(md)`` while that is ``<= LAC``.
    """
    beh = env.beh
    md, md_lk, rng = ref("_pa_md"), ref("_pa_md_lk"), ref("_pa_rng")

    def c(name: str) -> str:
        return ref(f"{prefix}_{name}")

    df = df.select("*", E(target).alias(f"{prefix}_t"), E(target_error).alias(f"{prefix}_terr"))
    df = env.lookup(df, fld(c("t"), "ledger_id"), f"{prefix}_lk_t")
    t, lk_t = c("t"), c("lk_t")
    next_after_lac = fld(fld(X, "lac_lk"), "next_lid")
    finished_ledger = (
        f"coalesce({fld(md_lk, 'exists')} AND {fld(md, 'entry_id')} + 1 >= {fld(md_lk, 'ent')}, false)"
    )
    into_next = f"{fld(t, 'ledger_id')} = {next_after_lac}"
    may_pass_lac = f"coalesce({next_after_lac} IS NOT NULL AND {finished_ledger} AND {into_next}, false)"
    failed = f"coalesce({c('terr')} IS NOT NULL OR {t} IS NULL OR {md} IS NULL OR {X} IS NULL, true)"
    df = df.select(
        "*",
        E(next_position_is_valid_sql(t, lk_t, X, beh)).alias(f"{prefix}_qv"),
        E(failed).alias(f"{prefix}_failed"),
    )
    rejected = f"coalesce(NOT {c('failed')} AND {t} > {LAC} AND NOT {may_pass_lac}, false)"
    df = df.select("*", E(rejected).alias(f"{prefix}_rej"))
    df = df.select(
        "*",
        E(f"coalesce(NOT {c('failed')} AND NOT {c('rej')} AND {t} > {md}, false)").alias(f"{prefix}_fwd"),
        E(next_valid_position_sql(t, lk_t, X, beh, q_valid=c("qv"))).alias(f"{prefix}_p0"),
    )
    p0 = c("p0")
    containing = f"try_element_at(filter({rng}, r -> r.a < {p0} AND {p0} <= r.b), 1)"
    df = df.select("*", E(f"IF({c('fwd')} AND {p0} <= {LAC}, {containing}, NULL)").alias(f"{prefix}_cont"))
    fwd, cont = c("fwd"), c("cont")
    extended = f"({fwd} AND {cont} IS NOT NULL)"
    df = df.select(
        "*",
        E(case((extended, fld(cont, "chain_upper")), (fwd, t), otherwise=md)).alias(f"{prefix}_fm"),
        E(case((extended, fld(cont, "chain_upper_lk")), (fwd, lk_t), otherwise=md_lk)).alias(
            f"{prefix}_fm_lk"
        ),
    )
    fm, fm_lk = c("fm"), c("fm_lk")
    # acked entries inside (md, final]: ranges ending by final count their part after md (precomputed);
    # a range straddling final counts (max(a, md), final]
    straddler = f"try_element_at(filter({rng}, r -> r.a < {fm} AND {fm} < r.b), 1)"
    before_final = f"aggregate(filter({rng}, r -> r.b <= {fm}), {ZERO}, (acc, r) -> acc + r.inter_md)"
    df = df.select("*", E(straddler).alias(f"{prefix}_st"), E(before_final).alias(f"{prefix}_bf"))
    st = c("st")
    df = df.select(
        "*",
        E(f"IF({fld(st, 'a')} >= {md}, {fld(st, 'a')}, {md})").alias(f"{prefix}_st_lo"),
        E(f"IF({fld(st, 'a')} >= {md}, {fld(st, 'a_lk')}, {md_lk})").alias(f"{prefix}_st_lo_lk"),
    )
    straddled = (
        f"IF({st} IS NULL, {ZERO}, {open_closed_count_sql(c('st_lo'), c('st_lo_lk'), fm, fm_lk, X, beh)})"
    )
    newly = (
        f"IF({fwd}, {open_closed_count_sql(md, md_lk, fm, fm_lk, X, beh)} - {c('bf')} - {straddled}, {ZERO})"
    )
    ignored = (
        f"coalesce({c('failed')} OR {c('rej')} OR {t} < {md}, true)"  # setAcknowledgedPosition never ran
    )
    idm = f"IF({ignored}, {_ranges_out_sql(rng)}, {remove_at_most_sql(rng, fm)})"
    error = _coalesce_sql(
        _err_if(f"`_pa_no_cursor` OR {md} IS NULL", MISSING_CURSOR),
        MISSING_TOPIC_SQL,
        c("terr"),
        _err_if(c("rej"), "ManagedLedgerException: Invalid mark deleted position"),
    )
    df = df.select(
        "*",
        E(next_position_is_valid_sql(fm, fm_lk, X, beh)).alias(f"{prefix}_fqv"),
        E(idm).alias(f"{prefix}_idm"),
        E(newly).alias(f"{prefix}_newly"),
        E(error).alias(f"{prefix}_err"),
    )
    return df.select(
        "*",
        F.col(f"{prefix}_fm").alias(f"{prefix}_md"),
        E(next_valid_position_sql(fm, fm_lk, X, beh, q_valid=c("fqv"))).alias(f"{prefix}_rp"),
    )


def _join_cursor_state(requests: DataFrame, state: DataFrame) -> DataFrame:
    """Requests + their cursor's state and topic context (all null when the cursor is unknown).

    An exact seek on ``cursor_name`` inside the topic (no join on three keys, so no extra shuffle); the
    topic context travels with the cursor state, so it is not joined a second time.
    """
    fields = ["cursor_name", "_pa_md", "_pa_md_lk", "_pa_rng", "_pa_idm_lac", CTX]
    view = state.select(
        *KEY,
        F.col("cursor_name").alias("_key"),
        F.lit(0).cast("long").alias("_tb"),
        F.struct(*fields).alias("_payload"),
    )
    sought = _seek(_by_topic(requests), F.col("cursor_name"), view, "_pa_found", mode="floor")
    sought = sought.select(
        "*", E("IF(`_pa_found`.cursor_name = cursor_name, `_pa_found`, NULL)").alias("_pa_state")
    )
    element = state.schema["_pa_rng"].dataType
    return sought.select(
        *[F.col(f"`{c}`") for c in requests.columns],
        F.col("_pa_state._pa_md").alias("_pa_md"),
        F.col("_pa_state._pa_md_lk").alias("_pa_md_lk"),
        F.coalesce(F.col("_pa_state._pa_rng"), F.array().cast(element)).alias("_pa_rng"),
        F.coalesce(F.col("_pa_state._pa_idm_lac"), F.lit(0).cast("long")).alias("_pa_idm_lac"),
        F.col(f"_pa_state.{CTX}").alias(CTX),
        F.col("_pa_state").isNull().alias("_pa_no_cursor"),
    )


# --- shared basis of several cursor operations ---------------------------------------------------------


@dataclass(frozen=True)
class CursorBasis:
    """The ledger view and topic context (``env``) and, optionally, the per-cursor state (``state``, one row
    per cursor, see :func:`_cursor_state` with the skip plan) of one broker version's inputs.

    What :func:`skip_entries`, :func:`clear_backlog_plan`, :func:`reset_cursor_plan` and
    :func:`pulsar_model.readers.reader_start_positions` start from; build it once with
    :func:`cursor_basis` and pass it to several of them so they share it instead of each building (and
    Spark analysing, compiling and computing) its own copy.
    """

    env: _Env
    state: DataFrame | None

    def check(self, pulsar_version: VersionArg, *, needs_state: bool = False) -> None:
        """Raise ``ValueError`` when built for another version's behaviour (or without a needed state)."""
        if self.env.source != sql_flags(pulsar_version):
            raise ValueError(f"CursorBasis built for another Pulsar version than {pulsar_version!r}")
        if needs_state and self.state is None:
            raise ValueError("CursorBasis built without the cursor state (with_state=False)")


def cursor_basis(
    cursors: DataFrame,
    ledgers: DataFrame,
    managed_ledgers: DataFrame,
    pulsar_version: VersionArg = DEFAULT_PULSAR_VERSION,
    *,
    with_state: bool = True,
    materialise: Callable[[DataFrame], DataFrame] | None = None,
) -> CursorBasis:
    """The :class:`CursorBasis` of the inputs: ledger view + topic context, and the cursor state when
    ``with_state`` (skip and clear need it; reset and reader starts only need the view and context).

    ``materialise`` is applied to the view, the context and the state, each built on the previous ones:
    a driver passes ``DataFrame.localCheckpoint`` so later plans start from small leaves (pure and lazy
    without it).
    """
    env = _Env.build(ledgers, managed_ledgers, sql_flags(pulsar_version), materialise)
    state = None
    if with_state:
        state = _cursor_state(env, cursors, with_plan=True)
        if materialise is not None:
            state = materialise(state)
    return CursorBasis(env=env, state=state)


# --- §1.10 skipEntries -------------------------------------------------------------------------------------


def _env_and_state(
    cursors: DataFrame,
    ledgers: DataFrame,
    managed_ledgers: DataFrame,
    pulsar_version: VersionArg,
    basis: CursorBasis | None,
) -> tuple[_Env, DataFrame]:
    """The basis' environment and cursor state, or freshly built ones when ``basis`` is None."""
    if basis is None:
        basis = cursor_basis(cursors, ledgers, managed_ledgers, pulsar_version)
    basis.check(pulsar_version, needs_state=True)
    assert basis.state is not None
    return basis.env, basis.state


def skip_entries(
    requests: DataFrame,
    cursors: DataFrame,
    ledgers: DataFrame,
    managed_ledgers: DataFrame,
    pulsar_version: VersionArg = DEFAULT_PULSAR_VERSION,
    *,
    basis: CursorBasis | None = None,
) -> DataFrame:
    """Dry-run ``cursor.skipEntries(n, deletedEntries)`` (docs §1.10): one row per request.

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

    ``basis``: a :func:`cursor_basis` (with the state) of these same cursors, ledgers and managed ledgers,
    used instead of building one. Pure and lazy.
    """
    env, state = _env_and_state(cursors, ledgers, managed_ledgers, pulsar_version, basis)
    df = _join_cursor_state(requests, state)
    df = df.select(
        "*",
        E(
            "array_min(transform(filter(`_pa_rng`, r -> r.processed AND r.cumgap >= CAST(n AS BIGINT)), "
            "r -> r.idx))"
        ).alias("_pa_stop_idx"),
    )
    extra = (
        "aggregate(filter(`_pa_rng`, "
        "r -> r.processed AND (`_pa_stop_idx` IS NULL OR r.idx < `_pa_stop_idx`)), "
        f"{ZERO}, (acc, r) -> acc + coalesce(r.del, {ZERO}))"
    )
    df = df.select(
        "*", E(f"IF(deleted_entries = '{DELETED_ENTRIES_EXCLUDE}', {extra}, {ZERO})").alias("_pa_extra")
    )
    df = _position_after_n(
        env,
        df,
        F.col("_pa_md"),
        F.col("n").cast("long") + F.col("_pa_extra"),
        F.lit(BOUND_START_EXCLUDED),
        "_pa_sk",
        start_lk="_pa_md_lk",
    )
    mode_error = (
        f"IF(coalesce(deleted_entries IN ('{DELETED_ENTRIES_INCLUDE}', '{DELETED_ENTRIES_EXCLUDE}'), false), "
        f"{NULL_STRING}, concat('unknown deleted_entries ', coalesce(deleted_entries, 'null'), "
        "'; expected Include|Exclude'))"
    )
    target_error = _coalesce_sql(_err_if("`_pa_md` IS NULL", MISSING_CURSOR), mode_error, "`_pa_sk_err`")
    df = df.select("*", E(target_error).alias("_pa_target_err"))
    df = _mark_delete(env, df, "`_pa_sk_pos`", "`_pa_target_err`", "_pa_mdp")
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
        E(f"IF(`_pa_target_err` IS NULL, `_pa_sk_pos`, {NULL_POS_SQL})").alias("target_position"),
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
    pulsar_version: VersionArg = DEFAULT_PULSAR_VERSION,
    *,
    basis: CursorBasis | None = None,
) -> DataFrame:
    """Dry-run ``cursor.clearBacklog()`` = mark-delete at LAC (docs §1.11): one row per request.

    Requests: ``cluster, topic, cursor_name`` (+ carried columns). Adds ``mark_delete_position`` (LAC, or
    unchanged when the cursor is already past LAC), ``read_position`` (``nextValid(md)``),
    ``individually_deleted`` (``removeAtMost(md)``), ``cleared_entries`` (not-yet-acked entries in
    ``(old md, LAC]``) and ``error``. ``basis``: as for :func:`skip_entries`. Pure and lazy.
    """
    env, state = _env_and_state(cursors, ledgers, managed_ledgers, pulsar_version, basis)
    df = _join_cursor_state(requests, state)
    df = _mark_delete(env, df, LAC, NULL_STRING, "_pa_mdp")
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
    pulsar_version: VersionArg = DEFAULT_PULSAR_VERSION,
    *,
    basis: CursorBasis | None = None,
) -> DataFrame:
    """Dry-run ``cursor.resetCursor(target)`` (docs §1.11, ``asyncResetCursor``/``internalResetCursor``).

    Requests: ``cluster, topic, cursor_name, target_kind`` (``position``|``earliest``|``latest``) and
    ``target`` (a position, used for ``position``; ``(-1,-1)`` / ``(MAX,MAX)`` mean earliest / latest).
    A target that is not a valid position moves to ``nextValid(target)``; earliest reads from
    ``getFirstPosition()``; latest from ``nextValid(LAC)`` (3.x+) or ``LAC.next`` (2.x). Adds
    ``mark_delete_position`` = ``getPreviousPosition(read_position)``, ``read_position``, an empty
    ``individually_deleted`` and ``error``. Reset by publish time is not covered here. ``basis``: a
    :func:`cursor_basis` of these same ledgers and managed ledgers (its view and context are used; the
    state is not needed). Pure and lazy.
    """
    if basis is None:
        env = _Env.build(ledgers, managed_ledgers, sql_flags(pulsar_version))
    else:
        basis.check(pulsar_version)
        env = basis.env
    beh = env.beh
    cursor_md = _by_topic(cursors).select(
        *KEY,
        F.col("cursor_name").alias("_key"),
        F.lit(0).cast("long").alias("_tb"),
        F.struct("cursor_name", as_position(F.col("mark_delete_position")).alias("md")).alias("_payload"),
    )
    df = _seek(_by_topic(requests), F.col("cursor_name"), cursor_md, "_pa_cur", mode="floor")
    target = as_position(F.col("target")) if "target" in requests.columns else E(NULL_POS_SQL)
    df = df.select(
        *[F.col(f"`{c}`") for c in requests.columns],
        E("IF(`_pa_cur`.cursor_name = cursor_name, `_pa_cur`.md, NULL)").alias("_pa_md"),
        target.alias("_pa_target"),
    )
    df = env.with_ctx(df)
    earliest, latest = pos_sql("-1", "-1"), pos_sql(str(LATEST[0]), str(LATEST[1]))
    proposed = case(
        (f"target_kind = '{TARGET_EARLIEST}'", earliest),
        (f"target_kind = '{TARGET_LATEST}'", latest),
        (f"target_kind = '{TARGET_POSITION}'", "`_pa_target`"),
        otherwise=NULL_POS_SQL,
    )
    df = df.select("*", E(proposed).alias("_pa_prop"))
    prop = ref("_pa_prop")
    df = env.lookup(df, fld(prop, "ledger_id"), "_pa_lk_prop")
    special = f"({prop} = {earliest} OR {prop} = {latest})"
    valid = is_valid_position_sql(prop, "`_pa_lk_prop`", X, beh)
    moved = next_valid_position_sql(prop, "`_pa_lk_prop`", X, beh)
    actual = f"IF(coalesce({special} OR {valid}, false), {prop}, {moved})"
    df = df.select("*", E(actual).alias("_pa_actual"))
    latest_read = beh.pick(
        "reset_latest_next_valid",
        next_valid_position_sql(LAC, fld(X, "lac_lk"), X, beh),
        pos_sql(fld(LAC, "ledger_id"), f"{fld(LAC, 'entry_id')} + 1"),
    )
    new_read = case(
        (f"`_pa_actual` = {earliest}", first_position_sql(X)),
        (f"`_pa_actual` = {latest}", latest_read),
        otherwise="`_pa_actual`",
    )
    df = df.select("*", E(new_read).alias("_pa_read"))
    df = env.lookup(df, fld(ref("_pa_read"), "ledger_id"), "_pa_lk_read")
    kind_error = (
        f"IF(coalesce(target_kind IN ('{TARGET_POSITION}', '{TARGET_EARLIEST}', '{TARGET_LATEST}'), false), "
        f"{NULL_STRING}, concat('unknown target_kind ', coalesce(target_kind, 'null'), "
        "'; expected position|earliest|latest'))"
    )
    error = _coalesce_sql(
        MISSING_TOPIC_SQL,
        _err_if("`_pa_md` IS NULL", MISSING_CURSOR),
        kind_error,
        _err_if(f"{prop} IS NULL", "target is null for target_kind 'position'"),
        _err_if("`_pa_read` IS NULL", "NullPointerException: getFirstPosition() is null (no ledgers)"),
    )
    df = df.select(
        "*",
        E(error).alias("_pa_error"),
        E(previous_position_sql("`_pa_read`", "`_pa_lk_read`", X)).alias("_pa_new_md"),
    )
    empty = f"CAST(array() AS ARRAY<STRUCT<lower: {POSITION_SQL_TYPE}, upper: {POSITION_SQL_TYPE}>>)"
    added = ["mark_delete_position", "read_position", "individually_deleted", "error"]
    return df.select(
        *_keep(requests.columns, added),
        E(f"IF(`_pa_error` IS NULL, `_pa_new_md`, {NULL_POS_SQL})").alias("mark_delete_position"),
        E(f"IF(`_pa_error` IS NULL, `_pa_read`, {NULL_POS_SQL})").alias("read_position"),
        E(f"IF(`_pa_error` IS NULL, {empty}, NULL)").alias("individually_deleted"),
        F.col("_pa_error").alias("error"),
    )
