"""Backlog counts and backlog-size estimates as DataFrame transforms (docs §1.8, §2, §11.6-§11.8, §12.4).

* :func:`precise_backlog` - the precise entry backlog of every cursor and its entries in storage;
* :func:`estimated_backlog_size` - the topic ``backlogSize`` of ``pulsar-admin topics stats``
  (slowest durable cursor, integer-average ``consumedLedgerSize``);
* :func:`estimate_backlog_from_position` - the per-position estimate (subscription ``backlogSize``);
* :func:`estimated_size_since_mark_delete` - ``cursor.getEstimatedSizeSinceMarkDeletePosition()``;
* :func:`consumed_ledger_size` - the ``consumedLedgerSize`` column helper (three generations);
* :func:`backlog_numbers` - the first three in one grouped pass per topic through the topic engine, for a
  stage that needs them all (property-tested equal to the transforms above).

All transforms are pure and lazy and never mix topics or clusters. Version-dependent behaviour is
selected with ``pulsar_version`` (see :mod:`pulsar_model.domain.versions`): a version string for every row,
or ``None`` for each topic's own ``managed_ledgers.pulsar_version`` (docs §0.3).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import pandas as pd
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_model import DEFAULT_PULSAR_VERSION
from pulsar_model.domain.versions import flag
from pulsar_model.engine import columns as C
from pulsar_model.engine import topic_engine as eng
from pulsar_model.engine import topic_rows
from pulsar_model.engine.columns import (
    EARLIEST,
    POSITION_TYPE,
    as_position,
    case,
    consumed_ledger_size_flags_sql,
    entries_between_sql,
    fld,
    open_closed_count_sql,
    pos_sql,
    ref,
)
from pulsar_model.engine.flags import SqlFlags, sql_flags
from pulsar_model.engine.grouped import map_groups, records
from pulsar_model.positions import (
    CTX,
    KEY,
    LAC,
    MISSING_TOPIC,
    MISSING_TOPIC_SQL,
    NULL_STRING,
    ZERO,
    E,
    VersionArg,
    X,
    _by_topic,
    _coalesce_sql,
    _cursor_state,
    _Env,
    _err_if,
    _keep,
    require_version_column,
    shared_result,
)

__all__ = [
    "BacklogNumbers",
    "backlog_numbers",
    "consumed_ledger_size",
    "estimate_backlog_from_position",
    "estimated_backlog_size",
    "estimated_size_since_mark_delete",
    "precise_backlog",
]


def consumed_ledger_size(
    size_col: Column, entries_col: Column, entry_id_col: Column, generation: int
) -> Column:
    """``consumedLedgerSize(size, entries, entryId)`` (docs §2.2) as a column expression.

    Generation 1 (≤2.8): ``(entryId + 1) * (size div entries)``, no full-ledger shortcut (a fully consumed
    ledger keeps the division remainder as phantom backlog); 2 (2.9/2.10): ``size`` when
    ``entries == entryId + 1``; 3 (2.11+/3.x/4.x): ``size`` when ``entries <= entryId + 1``.
    ``entries <= 0`` -> 0; ``entryId < 0`` -> 0. Java long division truncates toward zero.
    """
    return C.consumed_ledger_size(size_col, entries_col, entry_id_col, generation)


def _original_columns(cursors: DataFrame, added: list[str]) -> list[Column]:
    """The input cursor columns, from the ``_pa_orig`` struct the cursor state carries."""
    return [F.col("_pa_orig")[c].alias(c) for c in cursors.columns if c not in added]


# --- §1.8 precise backlog ---------------------------------------------------------------------------


def precise_backlog(
    cursors: DataFrame,
    ledgers: DataFrame,
    managed_ledgers: DataFrame,
    pulsar_version: VersionArg = DEFAULT_PULSAR_VERSION,
) -> DataFrame:
    """Add ``backlog_entries``, ``entries_in_storage`` and ``error`` to every cursor (docs §1.8).

    One row per cursor. ``backlog_entries`` is ``getNumberOfEntriesInBacklog(true)``: 0 when
    ``md >= LAC`` (3.x+), else the cursor count of ``(md, LAC]`` - the ML count (version arithmetic, §1.7)
    minus the ML count of each acked range's intersection with it. 2.x has no guard: ``md > LAC`` makes
    Guava throw (null + ``error``). ``entries_in_storage`` is ``getNumberOfEntriesInStorage()``: the ML
    count of ``(md, LAC]`` (3.x+) or ``(md, LAC.next]`` (2.x-old); IDM not subtracted. A null ``md``
    gives both counts null and ``error`` "mark_delete_position is null"; a null LAC both counts null.
    Pure and lazy.
    """
    version = None if pulsar_version is None else str(pulsar_version)
    return shared_result(
        "precise_backlog",
        (cursors, ledgers, managed_ledgers),
        version,
        lambda: _precise_backlog(cursors, ledgers, managed_ledgers, pulsar_version),
    )


def _precise_backlog(
    cursors: DataFrame, ledgers: DataFrame, managed_ledgers: DataFrame, pulsar_version: VersionArg
) -> DataFrame:
    env = _Env.build(ledgers, managed_ledgers, sql_flags(pulsar_version))
    beh = env.beh
    state = _cursor_state(env, cursors, with_plan=False)
    md, md_lk, lac_lk = ref("_pa_md"), ref("_pa_md_lk"), fld(X, "lac_lk")
    count, count_error = entries_between_sql(md, md_lk, "false", LAC, lac_lk, "true", X, beh)
    # 2.x-old counted (md, LAC.next], 3.x+ (md, LAC] (docs §1.8)
    storage_hi_sql = beh.pick(
        "storage_counts_lac_next", pos_sql(fld(LAC, "ledger_id"), f"{fld(LAC, 'entry_id')} + 1"), LAC
    )
    # a column, not the text: the range builders repeat their bounds dozens of times, and parsing the
    # inlined text cost seconds per stage in a fresh JVM (benchmarks/README.md "SQL text size")
    state = state.select("*", E(storage_hi_sql).alias("_pa_storage_hi"))
    storage_hi = ref("_pa_storage_hi")
    storage, storage_error = entries_between_sql(md, md_lk, "false", storage_hi, lac_lk, "true", X, beh)
    staged = state.select(
        "_pa_orig",
        CTX,
        "_pa_md",
        "_pa_idm_lac",
        E(count).alias("_b_count"),
        E(count_error).alias("_b_err"),
        E(storage).alias("_s_count"),
        E(storage_error).alias("_s_err"),
    )
    # 3.x+: 0 when md >= LAC, no range is built
    backlog = beh.pick(
        "precise_backlog_guard",
        f"IF({md} >= {LAC}, {ZERO}, `_b_count` - `_pa_idm_lac`)",
        "`_b_count` - `_pa_idm_lac`",
    )
    backlog_error = beh.pick(
        "precise_backlog_guard", f"IF({md} < {LAC}, `_b_err`, {NULL_STRING})", "`_b_err`"
    )
    staged = staged.select("*", E(backlog).alias("_b"), E(backlog_error).alias("_b_error"))
    error = _coalesce_sql(
        MISSING_TOPIC_SQL,
        _err_if(f"{md} IS NULL", "mark_delete_position is null"),
        "concat('backlog: ', `_b_error`)",
        "concat('entries_in_storage: ', `_s_err`)",
    )
    added = ["backlog_entries", "entries_in_storage", "error"]
    # without md or LAC there is no range to count (the range builders' arithmetic would still give numbers)
    bounded = f"({md} IS NOT NULL AND {LAC} IS NOT NULL)"
    return staged.select(
        *_original_columns(cursors, added),
        E(f"IF(`_b_error` IS NULL AND {bounded}, `_b`, CAST(NULL AS BIGINT))").alias("backlog_entries"),
        E(f"IF(`_s_err` IS NULL AND {bounded}, `_s_count`, CAST(NULL AS BIGINT))").alias(
            "entries_in_storage"
        ),
        E(error).alias("error"),
    )


# --- §2.3 topic backlog size ----------------------------------------------------------------------------


def _estimate_from_position_sql(pos: str, lk: str, beh: SqlFlags) -> str:
    """``estimateBacklogFromPosition(pos)`` (docs §2.4) for a non-null position with lookup ``lk``."""
    after = f"({fld(X, 'total_size')} - {fld(lk, 'sz_lt')})"
    missing = beh.pick("estimate_deleted_total_size", fld(X, "total_size"), after)
    is_open = f"coalesce({fld(pos, 'ledger_id')} = {fld(X, 'cur_id')}, false)"
    e = fld(pos, "entry_id")
    return case(
        (f"NOT {fld(lk, 'exists')}", missing),
        (is_open, f"{after} - {consumed_ledger_size_flags_sql(fld(X, 'cls'), fld(X, 'cle'), e, beh)}"),
        otherwise=f"{after} - {consumed_ledger_size_flags_sql(fld(lk, 'sz'), fld(lk, 'ent'), e, beh)}",
    )


def estimated_backlog_size(
    managed_ledgers: DataFrame,
    ledgers: DataFrame,
    cursors: DataFrame,
    pulsar_version: VersionArg = DEFAULT_PULSAR_VERSION,
) -> DataFrame:
    """Topic ``backlogSize`` = ``ManagedLedgerImpl.getEstimatedBacklogSize()`` (docs §2.3).

    One row per managed ledger: ``cluster, topic, slowest_cursor_name, slowest_mark_delete_position,
    estimated_backlog_size_bytes, slowest_cursor_tie``. The slowest cursor is the durable cursor with the
    smallest mark-delete position (a null md counts as EARLIEST, and then the estimate is 0 as in the
    broker): the root of the broker's cursor heap built in export order, i.e. among equal positions the
    smallest ``cursor_order`` (docs §3.9). The broker's own heap was built in recovery order and reshaped by
    every mark-delete, which no export carries, so a tie is flagged by ``slowest_cursor_tie`` in every
    version (the estimate is the same whichever tied cursor the broker holds). No durable cursor -> null
    cursor, 0 bytes.

    Size: ``totalSize - sizes of ledgers before md's ledger``; a deleted md ledger stops there; a ledger
    listing 0 entries (the open ledger) uses ``currentLedgerSize/Entries``; otherwise minus
    ``consumedLedgerSize`` of md's ledger (generation by version, §2.2). Pure and lazy.
    """
    env = _Env.build(ledgers, managed_ledgers, sql_flags(pulsar_version))
    beh = env.beh
    earliest = _position_col(*EARLIEST)
    durable = (
        _by_topic(cursors)
        .where(F.coalesce(F.col("is_durable").cast("boolean"), F.lit(False)))
        .select(
            *KEY,
            F.col("cursor_name"),
            F.col("cursor_order").cast("long").alias("_order"),
            as_position(F.col("mark_delete_position")).alias("_md"),
        )
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
        # no line's heap order is in the export (slowest_cursor_tie_known_from_export, docs §3.9)
        (F.col("_same_md") > 1).alias("slowest_cursor_tie"),
    )
    topics = env.ctx.join(slowest, on=list(KEY), how="left")
    topics = env.lookup(topics, fld(ref("slowest_mark_delete_position"), "ledger_id"), "_lk")
    pos, lk = ref("slowest_mark_delete_position"), ref("_lk")
    size = f"({fld(X, 'total_size')} - {fld(lk, 'sz_lt')})"
    e = fld(pos, "entry_id")
    estimate = case(
        (f"{pos} IS NULL", ZERO),
        (f"NOT {fld(lk, 'exists')}", size),
        (
            f"{fld(lk, 'ent')} = 0",
            f"{size} - {consumed_ledger_size_flags_sql(fld(X, 'cls'), fld(X, 'cle'), e, beh)}",
        ),
        otherwise=f"{size} - {consumed_ledger_size_flags_sql(fld(lk, 'sz'), fld(lk, 'ent'), e, beh)}",
    )
    return topics.select(
        *KEY,
        "slowest_cursor_name",
        "slowest_mark_delete_position",
        E(estimate).alias("estimated_backlog_size_bytes"),
        F.coalesce(F.col("slowest_cursor_tie"), F.lit(False)).alias("slowest_cursor_tie"),
    )


def _position_col(ledger_id: int, entry_id: int) -> Column:
    return C.position(ledger_id, entry_id)


# --- §2.4 per-position estimate ----------------------------------------------------------------------------


def estimate_backlog_from_position(
    positions: DataFrame,
    ledgers: DataFrame,
    managed_ledgers: DataFrame,
    pulsar_version: VersionArg = DEFAULT_PULSAR_VERSION,
) -> DataFrame:
    """Add ``estimated_backlog_size_bytes``: ``getEstimatedBacklogSize(position)`` (docs §2.4).

    One row per input row (``cluster, topic, position`` + any columns). Null position -> 0. Bytes of the
    ledgers from the position's ledger on, minus ``consumedLedgerSize`` of that ledger (the open ledger
    uses ``currentLedgerSize/Entries``). A position in a deleted ledger gives those bytes as they are;
    2.9/2.10 (and earlier) returned ``totalSize`` instead (§12.4). A topic without a managed-ledger row gives
    null. (3.x dereferences ``currentLedger`` unguarded; without an open ledger this is computed as "not the
    open ledger".) Pure and lazy.
    """
    env = _Env.build(ledgers, managed_ledgers, sql_flags(pulsar_version))
    beh = env.beh
    df = env.with_ctx(_by_topic(positions)).select("*", as_position(F.col("position")).alias("_pa_p"))
    df = env.lookup(df, fld(ref("_pa_p"), "ledger_id"), "_pa_lk")
    estimate = case(
        ("`_pa_p` IS NULL", ZERO),
        (f"{X} IS NULL", "CAST(NULL AS BIGINT)"),
        otherwise=_estimate_from_position_sql("`_pa_p`", "`_pa_lk`", beh),
    )
    added = ["estimated_backlog_size_bytes"]
    return df.select(*_keep(positions.columns, added), E(estimate).alias("estimated_backlog_size_bytes"))


# --- §2.5 getEstimatedSizeSinceMarkDeletePosition -----------------------------------------------------------


def estimated_size_since_mark_delete(
    cursors: DataFrame,
    ledgers: DataFrame,
    managed_ledgers: DataFrame,
    pulsar_version: VersionArg = DEFAULT_PULSAR_VERSION,
) -> DataFrame:
    """Add ``estimated_size_since_mark_delete_bytes``: ``getEstimatedSizeSinceMarkDeletePosition()`` (§2.5).

    One row per cursor. Up to the versions without PR #25089 it is ``estimateBacklogFromPosition(md)``
    (acked ranges ignored). Master: with ``d`` acked entries in ``(md, LAC]`` and ``n`` the ML count of
    ``(md, LAC]``: ``d == 0`` -> the estimate; ``n == 0`` or ``n <= d`` -> ``max(0, estimate)``; else
    ``estimate - d * (estimate div n)``. Null md -> null. Pure and lazy.
    """
    env = _Env.build(ledgers, managed_ledgers, sql_flags(pulsar_version))
    beh = env.beh
    state = _cursor_state(env, cursors, with_plan=False)
    md, md_lk = ref("_pa_md"), ref("_pa_md_lk")
    in_range = open_closed_count_sql(md, md_lk, LAC, fld(X, "lac_lk"), X, beh)
    staged = state.select(
        "_pa_orig",
        CTX,
        "_pa_md",
        E(_estimate_from_position_sql(md, md_lk, beh)).alias("_total"),
        E(f"IF({md} < {LAC}, `_pa_idm_lac`, {ZERO})").alias("_acked"),
        E(f"IF({md} < {LAC}, {in_range}, {ZERO})").alias("_in_range"),
    )
    subtracting = case(
        ("_acked = 0", "_total"),
        ("_in_range = 0 OR _in_range <= _acked", f"greatest({ZERO}, _total)"),
        otherwise="_total - _acked * (_total div _in_range)",
    )
    # without #25089: estimateBacklogFromPosition(md), acked ranges ignored
    result = beh.pick("size_since_md_subtracts_acks", subtracting, "_total")
    result = f"IF({md} IS NULL OR {X} IS NULL, CAST(NULL AS BIGINT), {result})"
    added = ["estimated_size_since_mark_delete_bytes"]
    return staged.select(
        *_original_columns(cursors, added), E(result).alias("estimated_size_since_mark_delete_bytes")
    )


# --- §1.8, §2.3, §2.4 in one grouped pass -------------------------------------------------------------------

_CURSOR: Final = topic_rows.K_FIRST_OWN
_PASS_INPUT: Final = topic_rows.packed_schema(
    (*topic_rows.CURSOR_FIELDS, T.StructField("c_kind", T.StringType()))
)
_LEDGER_IDS: Final = T.ArrayType(T.LongType())
#: The :func:`pulsar_model.pinning.pinning_report` columns the pass gives on a topic row.
PINNING_FIELDS: Final = (
    T.StructField("slowest_cursor_kind", T.StringType()),
    T.StructField("next_slowest_cursor_name", T.StringType()),
    T.StructField("next_slowest_mark_delete_position", POSITION_TYPE),
    T.StructField("pin_target_position", POSITION_TYPE),
    T.StructField("trim_boundary_ledger_id", T.LongType()),
    T.StructField("pinned_ledgers", T.LongType()),
    T.StructField("pinned_bytes", T.LongType()),
    T.StructField("pinned_ledger_ids", _LEDGER_IDS),
    T.StructField("oldest_pinned_ledger_id", T.LongType()),
    T.StructField("trimmable_now_ledgers", T.LongType()),
    T.StructField("trimmable_now_bytes", T.LongType()),
    T.StructField("trimmable_now_ledger_ids", _LEDGER_IDS),
)
#: Output rows: one per topic with a managed-ledger row (``_topic`` true: the slowest-cursor fields and
#: ``estimated_backlog_size_bytes`` of §2.3) and one per cursor (``_topic`` false: ``cursor_name``, the §1.8
#: counts and ``error``, and ``estimated_backlog_size_bytes`` of §2.4 from its mark-delete).
_PASS_OUTPUT: Final = T.StructType(
    [
        *_PASS_INPUT.fields[:2],
        T.StructField("_topic", T.BooleanType()),
        T.StructField("cursor_name", T.StringType()),
        T.StructField("backlog_entries", T.LongType()),
        T.StructField("entries_in_storage", T.LongType()),
        T.StructField("error", T.StringType()),
        T.StructField("estimated_backlog_size_bytes", T.LongType()),
        T.StructField("slowest_cursor_name", T.StringType()),
        T.StructField("slowest_mark_delete_position", POSITION_TYPE),
        T.StructField("slowest_cursor_tie", T.BooleanType()),
        T.StructField("expected_backlog_entries", T.LongType()),
        *PINNING_FIELDS,
    ]
)


#: The topic fields of a cursor row (every output row names every field: pandas would read a missing
#: struct as NaN).
_NO_TOPIC_FIELDS: Final = {
    "slowest_cursor_name": None,
    "slowest_mark_delete_position": None,
    "slowest_cursor_tie": None,
    **{f.name: None for f in PINNING_FIELDS},
}


@dataclass(frozen=True)
class BacklogNumbers:
    """What :func:`backlog_numbers` computed, as two lazy frames over its one (materialised) pass.

    * ``cursors``: one row per cursor, ``cluster, topic, cursor_name, backlog_entries, entries_in_storage,
      error`` as :func:`precise_backlog` adds them and ``estimated_backlog_size_bytes`` as
      :func:`estimate_backlog_from_position` gives it for the cursor's mark-delete position;
    * ``topics``: one row per managed ledger, the columns of :func:`estimated_backlog_size`;
    * ``pinning``: one row per managed ledger, ``cluster, topic`` and the columns of
      :func:`pulsar_model.pinning.pinning_report` from ``slowest_cursor_name`` on (its export columns are
      the caller's to join);
    * ``ledger_counts``: one row per cursor, ``cluster, topic, cursor_name``, the precise
      ``backlog_entries`` and ``expected_backlog_entries`` as
      :func:`pulsar_model.backlog_exact.exact_backlog` computes it (positions the ledger list says exist
      in ``(md, LAC]`` outside the acked ranges; null without a LAC or mark-delete): its ``precise``
      argument.
    """

    cursors: DataFrame
    topics: DataFrame
    pinning: DataFrame
    ledger_counts: DataFrame


def _listed(rows: list[dict[str, Any]]) -> list[tuple[int, int, int]]:
    """The topic's listed ledgers as packed, ``(id, entries, size)`` with nulls as 0, duplicates kept."""
    return [
        (int(r["l_id"]), int(topic_rows.value(r["l_ent"]) or 0), int(topic_rows.value(r["l_sz"]) or 0))
        for r in rows
        if r["_k"] == topic_rows.K_LEDGER
    ]


def _pinning_fields(
    ml: eng.ManagedLedger,
    lac: eng.Position | None,
    listed: list[tuple[int, int, int]],
    cursors: list[eng.Cursor],
) -> tuple[eng.LedgerPinning, dict[str, Any]]:
    """The topic's :func:`~pulsar_model.engine.topic_engine.ledger_pinning` and its report fields."""
    pin = eng.ledger_pinning(listed, ml.cur_id, lac, cursors, flag("md_last_entry_trim", ml.beh.version))
    second = pin.next_slowest
    pinned = [lid for lid, _ in pin.pinned]
    return pin, {
        "slowest_cursor_kind": None if pin.slowest is None else (pin.slowest.kind or None),
        "next_slowest_cursor_name": None if second is None else second.name,
        "next_slowest_mark_delete_position": topic_rows.position_struct(
            None if second is None else second.md
        ),
        "pin_target_position": topic_rows.position_struct(pin.pin_target),
        "trim_boundary_ledger_id": pin.trim_boundary_ledger_id,
        "pinned_ledgers": len(pinned),
        "pinned_bytes": sum(size for _, size in pin.pinned),
        "pinned_ledger_ids": pinned,
        "oldest_pinned_ledger_id": pinned[0] if pinned else None,
        "trimmable_now_ledgers": len(pin.trimmable_now),
        "trimmable_now_bytes": sum(size for _, size in pin.trimmable_now),
        "trimmable_now_ledger_ids": [lid for lid, _ in pin.trimmable_now],
    }


def _cursor_numbers(
    ml: eng.ManagedLedger | None, lac: eng.Position | None, md: eng.Position | None, idm: list[eng.IdmRange]
) -> dict[str, Any]:
    """One cursor's §1.8 counts, error and §2.4 estimate, null and worded as the SQL transforms give them."""
    out: dict[str, Any] = {
        "backlog_entries": None,
        "entries_in_storage": None,
        "error": None,
        # a null position estimates 0 even without a managed ledger (docs §2.4)
        "estimated_backlog_size_bytes": 0 if md is None else None,
    }
    if ml is None:
        out["error"] = MISSING_TOPIC
        return out
    if md is None:
        out["error"] = "mark_delete_position is null"
        return out
    out["estimated_backlog_size_bytes"] = ml.estimate_from_position(md)
    if lac is None:  # no range can be built: no count, no broker error
        return out
    errors: list[str] = []
    try:
        out["backlog_entries"] = ml.precise_backlog(md, idm)
    except eng.BrokerError as exc:
        errors.append(f"backlog: {exc}")
    try:
        out["entries_in_storage"] = ml.entries_in_storage(md)
    except eng.BrokerError as exc:
        errors.append(f"entries_in_storage: {exc}")
    out["error"] = errors[0] if errors else None  # the first, as the set-based coalesce reports it
    return out


def _backlog_numbers_fn(version: str | None) -> Callable[[pd.DataFrame], list[dict[str, Any]]]:
    """One topic's packed rows -> its topic row (when it has one managed-ledger row) and its cursor rows."""

    def fn(pdf: pd.DataFrame) -> list[dict[str, Any]]:
        rows = records(pdf)
        ml, lac = topic_rows.managed_ledger_of(rows, version)
        cursors = topic_rows.cursors_in_export_order(rows, _CURSOR)
        listed = _listed(rows)

        def expected(c: eng.Cursor) -> int | None:
            if ml is None or lac is None or c.md is None:
                return None
            pairs = [(lid, n) for lid, n, _ in listed]
            return eng.listed_positions_unacked(pairs, ml.cur_id, ml.cle, c.md, lac, c.idm)

        out: list[dict[str, Any]] = [
            {
                **_NO_TOPIC_FIELDS,
                "_topic": False,
                "cursor_name": c.name,
                **_cursor_numbers(ml, lac, c.md, c.idm),
                "expected_backlog_entries": expected(c),
            }
            for c in cursors
        ]
        if ml is None:
            return out
        # the slowest cursor of §2.3 is the pinning's (eng.slowest_durable's rule)
        pin, pinning = _pinning_fields(ml, lac, listed, cursors)
        slowest, tie = pin.slowest, pin.tie
        md = None if slowest is None else slowest.md
        out.append(
            {
                "_topic": True,
                "cursor_name": None,
                "backlog_entries": None,
                "entries_in_storage": None,
                "error": None,
                "estimated_backlog_size_bytes": ml.estimate_from_slowest(md),
                "slowest_cursor_name": None if slowest is None else slowest.name,
                "slowest_mark_delete_position": topic_rows.position_struct(md),
                "slowest_cursor_tie": tie,
                "expected_backlog_entries": None,
                **pinning,
            }
        )
        return out

    return fn


def backlog_numbers(
    managed_ledgers: DataFrame,
    ledgers: DataFrame,
    cursors: DataFrame,
    pulsar_version: str | None = DEFAULT_PULSAR_VERSION,
    materialise: Callable[[DataFrame], DataFrame] = lambda df: df,
) -> BacklogNumbers:
    """:func:`precise_backlog`, :func:`estimate_backlog_from_position` of every mark-delete position and
    :func:`estimated_backlog_size` (docs §1.8, §2.3, §2.4) in one grouped pass per topic.

    Each topic's managed-ledger row, ledgers and cursors go through the topic engine
    (:mod:`pulsar_model.engine.topic_engine`) once; the set-based transforms compute the same over a ledger
    view and topic context whose plans cost a stage most of its Spark jobs. The two are proven equal, nulls
    and error texts included, by ``tests/test_properties_backlog.py``. ``materialise`` is applied to the
    pass (a stage passes ``localCheckpoint``: both frames of the result read it). Expects one
    managed-ledger row per topic (a topic with several, or with an unknown ``pulsar_version``, counts as
    having none). ``pulsar_version`` None: each managed-ledger row's ``pulsar_version``. Pure and lazy
    unless ``materialise`` acts.
    """
    version = None if pulsar_version is None else str(pulsar_version)
    if version is None:
        require_version_column(managed_ledgers, "managed_ledgers")
    else:
        sql_flags(version)  # validates the version string before any plan is built
    kind = F.col("cursor_kind") if "cursor_kind" in cursors.columns else F.lit(None)
    packed = topic_rows.tagged(cursors, _CURSOR, {**topic_rows.cursor_values(), "c_kind": kind}, _PASS_INPUT)
    state = topic_rows.topic_state_rows(managed_ledgers, ledgers, _PASS_INPUT, version)
    done = materialise(map_groups(state.unionByName(packed), KEY, _backlog_numbers_fn(version), _PASS_OUTPUT))
    cursor_rows = done.where(~F.col("_topic")).select(
        *KEY, "cursor_name", "backlog_entries", "entries_in_storage", "error", "estimated_backlog_size_bytes"
    )
    topic_rows_ = done.where(F.col("_topic")).select(
        *KEY,
        "slowest_cursor_name",
        "slowest_mark_delete_position",
        "estimated_backlog_size_bytes",
        "slowest_cursor_tie",
    )
    ledger_counts = done.where(~F.col("_topic")).select(
        *KEY, "cursor_name", "backlog_entries", "expected_backlog_entries"
    )
    pinning = done.where(F.col("_topic")).select(
        *KEY,
        "slowest_cursor_name",
        "slowest_cursor_kind",
        "slowest_mark_delete_position",
        "slowest_cursor_tie",
        *[f.name for f in PINNING_FIELDS if f.name != "slowest_cursor_kind"],
    )
    return BacklogNumbers(
        cursors=cursor_rows, topics=topic_rows_, pinning=pinning, ledger_counts=ledger_counts
    )
