"""Dry-run cursor operations and reader starts for operator requests, as DataFrame transforms.

* :func:`cursor_plans` - one row per skip / clear_backlog / reset / reset_by_time request: where the cursor
  would land (docs §1.10, §1.11, §3.7): :func:`cursor_operation_plans` (one grouped pass per topic through
  the topic engine, equal to the set-based transforms of :mod:`pulsar_model.positions`) and the time
  search of :mod:`pulsar_model.readers`;
* :func:`with_entry_effects` - the entries, messages and bytes each plan skips or redelivers, from the
  exported entries (:func:`pulsar_model.backlog_exact.unacked_entry_totals`);
* :func:`reader_plans` - one row per reader_start request (docs §7).

Requests come as rows of the ``plan_requests`` contract (:mod:`pulsar_model.domain.plan_requests` parses the
request files); the nightly ``plans`` stage (:mod:`pulsar_model.pipeline.stages.plans`) reads them and writes
``skip_plans`` and ``reader_starts``. Pure and lazy.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, Final

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_model.backlog_exact import request_totals
from pulsar_model.domain.plan_requests import (
    ACTION_CLEAR_BACKLOG,
    ACTION_READER_START,
    ACTION_RESET,
    ACTION_RESET_BY_TIME,
    ACTION_SKIP,
    CURSOR_ACTIONS,
    REQUEST_COLUMNS,
)
from pulsar_model.engine import topic_engine as eng
from pulsar_model.engine import topic_rows
from pulsar_model.engine.columns import LATEST, POSITION_TYPE
from pulsar_model.engine.grouped import map_groups, records
from pulsar_model.positions import (
    DELETED_ENTRIES_EXCLUDE,
    DELETED_ENTRIES_INCLUDE,
    MISSING_CURSOR,
    MISSING_TOPIC,
    TARGET_EARLIEST,
    TARGET_LATEST,
    TARGET_POSITION,
    CursorBasis,
    require_version_column,
)
from pulsar_model.readers import reader_start_positions, reset_cursor_by_time_plan

_TOPIC = ["cluster", "topic"]
_POS = "struct<ledger_id:bigint,entry_id:bigint>"
_RANGES = f"array<struct<lower:{_POS},upper:{_POS}>>"
#: The request columns every cursor plan row carries: the normalised request up to ``timestamp_ms`` (the
#: reader-start fields belong to ``reader_starts``).
PLAN_REQUEST_COLUMNS = REQUEST_COLUMNS[: REQUEST_COLUMNS.index("timestamp_ms") + 1]


@dataclass(frozen=True)
class PlanInputs:
    """The run date's input tables the plans are computed on."""

    managed_ledgers: DataFrame
    ledgers: DataFrame
    cursors: DataFrame
    entries: DataFrame
    messages: DataFrame


def _entry_totals(
    df: DataFrame, entries: DataFrame, intervals: Sequence[tuple[str, str, str, str | None]]
) -> DataFrame:
    """Add ``{prefix}_entries``/``_messages``/``_bytes`` per ``(prefix, lower, upper, acked ranges)``:
    exported, not-acked entries in ``(lower, upper]`` (null bounds: no row, so the measures stay null).

    All intervals go through ONE :func:`request_totals` call (stacked, keyed by request and prefix) and
    one join back onto ``df``, so the request lineage appears twice in the plan, not twice per interval;
    :func:`~pulsar_model.backlog_exact.unacked_entry_totals`' rule (zeros for a known interval without
    entries) is applied after it.
    """
    stacked = functools.reduce(
        DataFrame.unionByName,
        [
            df.select(
                *_TOPIC,
                F.concat_ws("\u0000", F.col("request_id"), F.lit(prefix)).alias("_totals_key"),
                F.col(lower).alias("lower"),
                F.col(upper).alias("upper"),
                (F.col(ranges) if ranges else F.lit(None).cast(_RANGES)).alias("acked_ranges"),
            ).where(F.col("lower").isNotNull() & F.col("upper").isNotNull())
            for prefix, lower, upper, ranges in intervals
        ],
    )
    totals = request_totals(stacked, entries, key="_totals_key")
    measures = ("entries", "messages", "bytes")
    wide = totals.groupBy(*_TOPIC, F.split(F.col("_k"), "\u0000")[0].alias("request_id")).agg(
        *[
            F.max(F.when(F.col("_k").endswith("\u0000" + prefix), F.col(m))).alias(f"_wt{prefix}_{m}")
            for prefix, _, _, _ in intervals
            for m in measures
        ]
    )
    # one row per request (operator requests are few): broadcast, the plan rows are not shuffled
    joined = df.join(F.broadcast(wide), [*_TOPIC, "request_id"], "left")
    keyed = F.col("cluster").isNotNull() & F.col("topic").isNotNull() & F.col("request_id").isNotNull()
    zero = F.lit(0).cast("long")
    return joined.select(
        *[F.col(f"`{c}`") for c in df.columns],
        *[
            F.when(
                keyed & F.col(lower).isNotNull() & F.col(upper).isNotNull(),
                F.coalesce(F.col(f"_wt{prefix}_{m}"), zero),
            ).alias(f"{prefix}_{m}")
            for prefix, lower, upper, _ in intervals
            for m in measures
        ],
    )


# --- skip, clear_backlog and reset in one grouped pass per topic ------------------------------------------

#: The error of a plan on a managed ledger without a LAC: where the cursor would land depends on it.
NO_LAC: Final = "last_confirmed_entry is null (stats-internal gave no LAC): the operation cannot be planned"
#: The actions the grouped pass answers (reset_by_time searches the exported entries: set-based).
ENGINE_ACTIONS: Final = (ACTION_SKIP, ACTION_CLEAR_BACKLOG, ACTION_RESET)
_K_CURSOR: Final = topic_rows.K_FIRST_OWN
_K_REQUEST: Final = topic_rows.K_FIRST_OWN + 1
#: A request's fields in the pass (a struct keeps ``n`` an exact integer: pandas reads a nullable bigint
#: column as float).
_REQUEST_TYPE: Final = T.StructType(
    [
        T.StructField("action", T.StringType()),
        T.StructField("cursor_name", T.StringType()),
        T.StructField("n", T.LongType()),
        T.StructField("deleted_entries", T.StringType()),
        T.StructField("target_kind", T.StringType()),
        T.StructField("target", POSITION_TYPE),
    ]
)
_OPS_FIELDS: Final = (
    T.StructField("target_position", POSITION_TYPE),
    T.StructField("mark_delete_position", POSITION_TYPE),
    T.StructField("read_position", POSITION_TYPE),
    T.StructField("individually_deleted", topic_rows.IDM_TYPE),
    T.StructField("skipped_entries", T.LongType()),
    T.StructField("error", T.StringType()),
)


def _ops_schemas(request_type: T.StructType) -> tuple[T.StructType, T.StructType]:
    """The pass' input and output schemas: the request row travels whole as ``_request``."""
    carried = T.StructField("_request", request_type)
    own = [*topic_rows.CURSOR_FIELDS, T.StructField("r", _REQUEST_TYPE), carried]
    packed = topic_rows.packed_schema(own)
    return packed, T.StructType([*packed.fields[:2], carried, *_OPS_FIELDS])


def _remove_at_most(ranges: Sequence[eng.IdmRange], md: eng.Position) -> list[eng.IdmRange]:
    """``individualDeletedMessages.removeAtMost(md)``: ranges ending by md go, one straddling it is cut."""
    return [(max(a, md), b) for a, b in ranges if b > md]


def _acked_to_skip(ml: eng.ManagedLedger, md: eng.Position, ranges: Sequence[eng.IdmRange], n: int) -> int:
    """``getNumIndividualDeletedEntriesToSkip(n)`` (docs §1.10): the acked entries met, walking the acked
    ranges from md, before the n-th unacked entry (ranges starting before md are not walked)."""
    extra, gaps, start = 0, 0, md
    previous_walked = False
    for a, b in ranges:
        walked = a >= md
        if not walked:
            previous_walked = False
            continue
        gaps += ml.count(start if previous_walked else md, False, a, True)
        if gaps >= n:
            break
        extra += ml.count(a, False, b, True)
        start, previous_walked = b, True
    return extra


def _mark_delete_plan(
    ml: eng.ManagedLedger,
    lac: eng.Position,
    md: eng.Position,
    ranges: list[eng.IdmRange],
    target: eng.Position | None,
) -> tuple[eng.Position, list[eng.IdmRange], int, str | None]:
    """``asyncMarkDelete(target)`` on a cursor at ``md`` with acked ``ranges`` (docs §1.2): the final
    mark-delete, the acked ranges left, the entries newly covered and the broker's refusal (None when it
    accepts). No target (an earlier failure) leaves the cursor as it is; a target before md is ignored
    (``MarkDeletingMarkedPosition``, which skip and clear report as success)."""
    if target is None:
        return md, ranges, 0, None
    try:
        ml.check_mark_delete(md, target)
    except eng.BrokerError as exc:
        if target < md:
            return md, ranges, 0, None
        return md, ranges, 0, str(exc)
    if target == md:
        return md, _remove_at_most(ranges, md), 0, None
    final = target
    p = ml.next_valid(final)
    while p <= lac:
        containing = next((r for r in ranges if r[0] < p <= r[1]), None)
        if containing is None or containing[1] <= final:
            break
        final = containing[1]
        p = ml.next_valid(final)
    newly = ml.cursor_count(ranges, eng.Rng(md, False, final, True))
    return final, _remove_at_most(ranges, final), newly, None


def _skip_target(
    ml: eng.ManagedLedger, md: eng.Position, ranges: Sequence[eng.IdmRange], req: dict[str, Any]
) -> tuple[eng.Position | None, str | None]:
    """``skipEntries(n, deletedEntries)``'s target, ``getPositionAfterN(md, n + extra, startExcluded)``
    (docs §1.10), or the reason there is none."""
    mode, n = req.get("deleted_entries"), req.get("n")
    if mode not in (DELETED_ENTRIES_INCLUDE, DELETED_ENTRIES_EXCLUDE):
        return (
            None,
            f"unknown deleted_entries {mode if mode is not None else 'null'}; expected Include|Exclude",
        )
    if n is None:
        return None, "n is null"
    extra = _acked_to_skip(ml, md, ranges, int(n)) if mode == DELETED_ENTRIES_EXCLUDE else 0
    try:
        return ml.position_after_n(md, int(n) + extra), None
    except eng.BrokerError as exc:
        return None, str(exc)


def _reset_plan(ml: eng.ManagedLedger, lac: eng.Position, req: dict[str, Any]) -> dict[str, Any]:
    """``resetCursor(target)`` (docs §1.11): the new read position and mark-delete, or the error."""
    kind = req.get("target_kind")
    target = topic_rows.engine_position(req.get("target"))
    proposed: eng.Position | None = {TARGET_EARLIEST: eng.EARLIEST, TARGET_LATEST: LATEST}.get(
        kind or "", target if kind == TARGET_POSITION else None
    )
    if kind not in (TARGET_POSITION, TARGET_EARLIEST, TARGET_LATEST):
        named = kind if kind is not None else "null"
        return {"error": f"unknown target_kind {named}; expected position|earliest|latest"}
    if proposed is None:
        return {"error": "target is null for target_kind 'position'"}
    if proposed == eng.EARLIEST:
        first = ml.first_position_ledger()
        if first is None:
            return {"error": "NullPointerException: getFirstPosition() is null (no ledgers)"}
        read: eng.Position = (first, -1)
    elif proposed == LATEST:
        read = ml.next_valid(lac) if ml.beh.reset_latest_next_valid else (lac[0], lac[1] + 1)
    else:
        read = proposed if ml.is_valid(proposed) else ml.next_valid(proposed)
    return {
        "mark_delete_position": topic_rows.position_struct(ml.previous(read)),
        "read_position": topic_rows.position_struct(read),
        "individually_deleted": [],
        "error": None,
    }


def _cursor_ops_fn(version: str | None) -> Callable[[pd.DataFrame], list[dict[str, Any]]]:
    """One topic's packed rows -> one row per skip / clear_backlog / reset request of the topic."""

    def fn(pdf: pd.DataFrame) -> list[dict[str, Any]]:
        rows = records(pdf)
        requests = [r for r in rows if r["_k"] == _K_REQUEST]
        if not requests:
            return []
        ml, lac = topic_rows.managed_ledger_of(rows, version)
        cursors: dict[str, eng.Cursor] = {}
        for c in topic_rows.cursors_in_export_order(rows, _K_CURSOR):
            cursors.setdefault(c.name, c)
        return [{"_request": r["_request"], **_cursor_op(ml, lac, cursors, r["r"])} for r in requests]

    return fn


def _cursor_op(
    ml: eng.ManagedLedger | None,
    lac: eng.Position | None,
    cursors: dict[str, eng.Cursor],
    req: dict[str, Any],
) -> dict[str, Any]:
    """One request's row of the pass, nulls and error texts as the set-based transforms give them."""
    out: dict[str, Any] = {
        "target_position": None,
        "mark_delete_position": None,
        "read_position": None,
        "individually_deleted": None,
        "skipped_entries": None,
        "error": None,
    }
    cursor = cursors.get(req.get("cursor_name"))  # type: ignore[arg-type]
    md = None if cursor is None else cursor.md
    if req["action"] == ACTION_RESET:
        if ml is None:
            out["error"] = MISSING_TOPIC
        elif md is None:
            out["error"] = MISSING_CURSOR
        elif lac is None:
            out["error"] = NO_LAC
        else:
            out.update(_reset_plan(ml, lac, req))
        return out
    ranges = [] if cursor is None else sorted(cursor.idm)
    out["individually_deleted"] = topic_rows.acked_ranges_struct(ranges)
    out["skipped_entries"] = 0
    out["mark_delete_position"] = topic_rows.position_struct(md)
    if md is None:
        out["error"] = MISSING_CURSOR
        return out
    if ml is None:
        out["error"] = MISSING_TOPIC
        return out
    if lac is None:
        out["error"] = NO_LAC
        return out
    if req["action"] == ACTION_SKIP:
        target, target_error = _skip_target(ml, md, ranges, req)
        out["target_position"] = topic_rows.position_struct(target)
    else:
        target, target_error = lac, None
    final, left, newly, refused = _mark_delete_plan(ml, lac, md, ranges, target)
    out.update(
        {
            "mark_delete_position": topic_rows.position_struct(final),
            "read_position": topic_rows.position_struct(ml.next_valid(final)),
            "individually_deleted": topic_rows.acked_ranges_struct(left),
            "skipped_entries": newly,
            "error": target_error or refused,
        }
    )
    return out


def cursor_operation_plans(
    requests: DataFrame,
    cursors: DataFrame,
    ledgers: DataFrame,
    managed_ledgers: DataFrame,
    pulsar_version: str | None,
) -> DataFrame:
    """Dry-run skip, clear_backlog and reset requests in one grouped pass per topic (docs §1.10, §1.11).

    Grain: one row per request (``action`` one of :data:`ENGINE_ACTIONS`; other rows are dropped). Adds the
    columns :func:`~pulsar_model.positions.skip_entries` adds (``target_position``, ``mark_delete_position``,
    ``read_position``, ``individually_deleted``, ``skipped_entries``, ``error``), with clear_backlog's
    ``cleared_entries`` as ``skipped_entries`` and reset's as null, computed by the topic engine
    (:mod:`pulsar_model.engine.topic_engine`) instead of the set-based plans of
    :func:`~pulsar_model.positions.skip_entries`, :func:`~pulsar_model.positions.clear_backlog_plan` and
    :func:`~pulsar_model.positions.reset_cursor_plan`; ``tests/test_properties_plans.py`` proves the two
    equal, nulls and error texts included, except on a managed ledger without a LAC: the set-based plans
    compute positions against the missing LAC, the pass says :data:`NO_LAC`. A cursor is found by name
    (the first in export order when a topic lists a name twice). ``pulsar_version`` None: each
    managed-ledger row's ``pulsar_version``. Pure and lazy.
    """
    version = None if pulsar_version is None else str(pulsar_version)
    if version is None:
        require_version_column(managed_ledgers, "managed_ledgers")
    mine = requests.where(F.col("action").isin(*ENGINE_ACTIONS))
    packed_input, packed_output = _ops_schemas(mine.schema)
    packed_requests = topic_rows.tagged(
        mine,
        _K_REQUEST,
        {
            "_request": F.struct(*[F.col(f"`{c}`") for c in mine.columns]),
            "r": F.struct(
                "action",
                "cursor_name",
                F.col("n").cast("long").alias("n"),
                "deleted_entries",
                "target_kind",
                F.col("target").cast(POSITION_TYPE).alias("target"),
            ),
        },
        packed_input,
    )
    packed_cursors = topic_rows.tagged(cursors, _K_CURSOR, topic_rows.cursor_values(), packed_input)
    state = topic_rows.topic_state_rows(managed_ledgers, ledgers, packed_input, version)
    done = map_groups(
        state.unionByName(packed_cursors).unionByName(packed_requests),
        ["cluster", "topic"],
        _cursor_ops_fn(version),
        packed_output,
    )
    added = [f.name for f in _OPS_FIELDS]
    kept = [c for c in mine.columns if c not in added]
    return done.select(*[F.col(f"_request.`{c}`").alias(c) for c in kept], *added)


def cursor_plans(
    requests: DataFrame,
    inputs: PlanInputs,
    pulsar_version: str | None,
    actions: Collection[str] = CURSOR_ACTIONS,
) -> DataFrame:
    """One row per cursor request (skip / clear_backlog / reset / reset_by_time): where the cursor lands.

    Grain: one row per request. Skip, clear_backlog and reset come from :func:`cursor_operation_plans` (the
    broker arithmetic of docs §1.10/§1.11 in one grouped pass per topic), ``reset_by_time`` from the time
    search of :func:`pulsar_model.readers.reset_cursor_by_time_plan`; :func:`with_entry_effects` adds what
    each does to the exported entries. ``actions`` limits the plans built to the actions present (the
    time search is a large plan that Spark analyses even when no request uses it).
    """
    ml, led, cur = inputs.managed_ledgers, inputs.ledgers, inputs.cursors
    base = requests.select(
        "request_id",
        *_TOPIC,
        "action",
        "cursor_name",
        "n",
        "deleted_entries",
        "target_kind",
        "target",
        "timestamp_ms",
    )
    parts: list[DataFrame] = []
    if set(actions) & set(ENGINE_ACTIONS):
        operations = cursor_operation_plans(
            base.where(F.col("action").isin(*(a for a in ENGINE_ACTIONS if a in actions))),
            cur,
            led,
            ml,
            pulsar_version,
        )
        parts.append(
            operations.select(
                *base.columns,
                "target_position",
                F.lit(None).cast(_POS).alias("linear_scan_position"),
                F.lit(None).cast("boolean").alias("publish_times_monotonic"),
                "mark_delete_position",
                "read_position",
                "individually_deleted",
                "skipped_entries",
                "error",
            )
        )
    if ACTION_RESET_BY_TIME in actions or not parts:
        by_time = reset_cursor_by_time_plan(
            base.where(F.col("action") == ACTION_RESET_BY_TIME),
            cur,
            led,
            ml,
            inputs.entries,
            pulsar_version=pulsar_version,
        ).select(
            *base.columns,
            F.col("found_position").alias("target_position"),
            "linear_scan_position",
            "publish_times_monotonic",
            "mark_delete_position",
            "read_position",
            "individually_deleted",
            F.lit(None).cast("long").alias("skipped_entries"),
            "error",
        )
        parts.append(by_time if ACTION_RESET_BY_TIME in actions else by_time.limit(0))
    return _with_version_label(functools.reduce(DataFrame.unionByName, parts), ml, pulsar_version)


def _with_version_label(df: DataFrame, managed_ledgers: DataFrame, pulsar_version: str | None) -> DataFrame:
    """Add ``pulsar_version``: the version applied - the argument, or (``None``) the topic's own
    ``managed_ledgers.pulsar_version`` (null for a topic without a managed-ledger row)."""
    if pulsar_version is not None:
        return df.select("*", F.lit(pulsar_version).alias("pulsar_version"))
    versions = managed_ledgers.select(*_TOPIC, "pulsar_version")
    return df.join(versions, _TOPIC, "left")


def with_entry_effects(
    plans: DataFrame,
    inputs: PlanInputs,
    materialise: Callable[[DataFrame], DataFrame] | None = None,
) -> DataFrame:
    """Add the cursor's state before the plan and what the plan does to exported entries (``skip_plans``).

    Grain: one row per plan (the output of :func:`cursor_plans`). skipped = not-yet-acked entries in
    ``(md before, md after]``; redelivered (resets only, which clear the acked ranges) = entries after the
    new mark-delete that were acked before (at or below the old mark-delete or inside an old acked range).
    Messages and bytes need the topic's entries in the export (``entries_exported``).

    ``materialise`` (e.g. the driver's ``localCheckpoint``) is applied to the plans joined with the state
    before, which the entry totals read four times (three intervals, and the join back).
    """
    ml, cur = inputs.managed_ledgers, inputs.cursors
    before = cur.select(
        *_TOPIC,
        "cursor_name",
        F.col("mark_delete_position").alias("mark_delete_position_before"),
        F.col("individually_deleted").alias("_idm_before"),
    )
    lac = ml.select(
        *_TOPIC,
        "export_id",
        F.col("last_confirmed_entry").alias("_lac"),
        F.coalesce("current_ledger_entries", F.lit(0)).alias("_current_entries"),
    )
    # Per topic, in one aggregate: whether its entries were exported and how many entries its closed
    # ledgers list. A topic's entry numbers are known when its entries were exported, or when its ledgers
    # hold none (an empty topic has nothing to export: zero is then exact, not unknown).
    per_topic = (
        inputs.entries.select(*_TOPIC, F.lit(True).alias("_exported"), F.lit(None).cast("long").alias("_n"))
        .unionByName(
            inputs.ledgers.select(
                *_TOPIC, F.lit(None).cast("boolean").alias("_exported"), F.col("entries").alias("_n")
            )
        )
        .groupBy(*_TOPIC)
        .agg(F.max("_exported").alias("_exported"), F.sum("_n").alias("_listed"))
    )
    df = (
        plans.join(before, [*_TOPIC, "cursor_name"], "left")
        .join(lac, _TOPIC, "left")
        .join(per_topic, _TOPIC, "left")
        .select(
            "*",
            # only a topic with a managed-ledger row can be known empty
            (F.coalesce("_listed", F.lit(0)) + F.col("_current_entries") == 0).alias("_empty_topic"),
        )
    )
    is_reset = F.col("action").isin(ACTION_RESET, ACTION_RESET_BY_TIME)
    df = df.select(
        "*",
        (F.coalesce("_exported", F.lit(False)) | F.coalesce("_empty_topic", F.lit(False))).alias(
            "entries_exported"
        ),
        # Everything acked before the operation: (-inf, md] plus the old acked ranges.
        F.when(
            F.col("mark_delete_position_before").isNotNull(),
            F.concat(
                F.array(
                    F.struct(
                        F.struct(
                            F.lit(-1).cast("long").alias("ledger_id"),
                            F.lit(-1).cast("long").alias("entry_id"),
                        ).alias("lower"),
                        F.col("mark_delete_position_before").alias("upper"),
                    )
                ),
                F.coalesce("_idm_before", F.array().cast(_RANGES)),
            ),
        ).alias("_acked_before"),
        F.when(
            F.col("error").isNull() & (F.col("mark_delete_position") > F.col("mark_delete_position_before")),
            F.col("mark_delete_position"),
        ).alias("_skip_upper"),
        F.when(F.col("error").isNull() & is_reset, F.col("mark_delete_position")).alias("_reset_lower"),
    )
    if materialise is not None:
        df = materialise(df)
    df = _entry_totals(
        df,
        inputs.entries,
        [
            ("_sk", "mark_delete_position_before", "_skip_upper", "_idm_before"),
            ("_all", "_reset_lower", "_lac", None),
            ("_unacked", "_reset_lower", "_lac", "_acked_before"),
        ],
    )
    exported_ok = F.col("entries_exported") & F.col("error").isNull()
    zero = F.lit(0).cast("long")
    skipped_entries = F.when(
        F.col("error").isNull(),
        F.coalesce(
            F.col("skipped_entries"),
            F.when(F.col("entries_exported"), F.coalesce("_sk_entries", zero)),
        ),
    )
    redelivered = F.when(
        exported_ok & is_reset, F.coalesce("_all_entries", zero) - F.coalesce("_unacked_entries", zero)
    )
    redelivered_msgs = F.when(
        exported_ok & is_reset, F.coalesce("_all_messages", zero) - F.coalesce("_unacked_messages", zero)
    )
    return df.select(
        *PLAN_REQUEST_COLUMNS,
        "export_id",
        "pulsar_version",
        "mark_delete_position_before",
        "target_position",
        "linear_scan_position",
        "publish_times_monotonic",
        "mark_delete_position",
        "read_position",
        "individually_deleted",
        skipped_entries.alias("skipped_entries"),
        F.when(exported_ok, F.coalesce("_sk_messages", zero)).alias("skipped_messages"),
        F.when(exported_ok, F.coalesce("_sk_bytes", zero)).alias("skipped_bytes"),
        redelivered.alias("redelivered_entries"),
        redelivered_msgs.alias("redelivered_messages"),
        "entries_exported",
        "error",
    )


def reader_plans(
    requests: DataFrame, inputs: PlanInputs, pulsar_version: str | None, basis: CursorBasis | None = None
) -> DataFrame:
    """One row per ``reader_start`` request: the ``reader_starts`` rows (docs §7).

    ``basis``: a :func:`~pulsar_model.positions.cursor_basis` of ``inputs`` (its ledger view and topic
    context are used), e.g. the one the cursor plans share; built when None.
    """
    req = requests.where(F.col("action") == ACTION_READER_START).select(
        "request_id",
        *_TOPIC,
        "start_kind",
        "start_message_id",
        F.coalesce("inclusive", F.lit(False)).alias("inclusive"),
        F.coalesce("rollback_seconds", F.lit(0).cast("long")).alias("rollback_seconds"),
        F.coalesce("read_compacted", F.lit(False)).alias("read_compacted"),
        F.coalesce("initial_position", F.lit("Latest")).alias("initial_position"),
    )
    out = reader_start_positions(
        req,
        inputs.ledgers,
        inputs.managed_ledgers,
        messages=inputs.messages,
        pulsar_version=pulsar_version,
        basis=basis,
    )
    # the export id and the topic's own version (the label without an argument) in one join
    own = [F.col("pulsar_version").alias("_own_version")] if pulsar_version is None else []
    ids = inputs.managed_ledgers.select(*_TOPIC, "export_id", *own)
    label = F.col("_own_version") if pulsar_version is None else F.lit(pulsar_version)
    return out.join(ids, _TOPIC, "left").select(
        *req.columns,
        "export_id",
        label.alias("pulsar_version"),
        "mark_delete_position",
        "read_position",
        "first_delivered",
        "rollback_failure",
        "error",
    )


# --- stage orchestration (driver) ----------------------------------------------------------------------
