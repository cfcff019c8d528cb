"""Dry-run cursor operations and reader starts for operator requests, as DataFrame transforms.

* :func:`cursor_plans` - one row per skip / clear_backlog / reset / reset_by_time request: where the cursor
  would land (docs §1.10, §1.11, §3.7), computed by :mod:`pulsar_model.positions` and
  :mod:`pulsar_model.readers`;
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

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pulsar_model.backlog_exact import unacked_entry_totals
from pulsar_model.domain.plan_requests import (
    ACTION_CLEAR_BACKLOG,
    ACTION_READER_START,
    ACTION_RESET,
    ACTION_RESET_BY_TIME,
    ACTION_SKIP,
    CURSOR_ACTIONS,
    REQUEST_COLUMNS,
)
from pulsar_model.positions import (
    CursorBasis,
    clear_backlog_plan,
    reset_cursor_plan,
    skip_entries,
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

    All intervals go through ONE :func:`unacked_entry_totals` call (stacked, keyed by request and prefix)
    and one join back, so the request lineage appears twice in the plan, not twice per interval.
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
    totals = unacked_entry_totals(stacked, entries, key="_totals_key")
    measures = ("entries", "messages", "bytes")
    wide = totals.groupBy(*_TOPIC, F.split(F.col("_totals_key"), "\u0000")[0].alias("request_id")).agg(
        *[
            F.max(F.when(F.col("_totals_key").endswith("\u0000" + prefix), F.col(m))).alias(f"{prefix}_{m}")
            for prefix, _, _, _ in intervals
            for m in measures
        ]
    )
    return df.join(wide, [*_TOPIC, "request_id"], "left")


def cursor_plans(
    requests: DataFrame,
    inputs: PlanInputs,
    pulsar_version: str | None,
    actions: Collection[str] = CURSOR_ACTIONS,
    basis: CursorBasis | None = None,
) -> DataFrame:
    """One row per cursor request (skip / clear_backlog / reset / reset_by_time): where the cursor lands.

    Grain: one row per request. Positions come from the broker arithmetic of docs §1.10/§1.11 (and the
    time search for ``reset_by_time``, :mod:`pulsar_model.readers`); :func:`with_entry_effects` adds
    what it does to the exported entries. ``actions`` limits the transforms built to the actions present
    (each is a large plan that Spark analyses even when no request uses it). ``basis``: the
    :func:`~pulsar_model.positions.cursor_basis` of ``inputs`` shared by skip, clear_backlog and reset (with
    the cursor state when skip or clear_backlog is among ``actions``); built per action when None.
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

    def skip() -> DataFrame:
        return skip_entries(
            base.where(F.col("action") == ACTION_SKIP),
            cur,
            led,
            ml,
            pulsar_version=pulsar_version,
            basis=basis,
        ).select(
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

    def clear() -> DataFrame:
        return clear_backlog_plan(
            base.where(F.col("action") == ACTION_CLEAR_BACKLOG),
            cur,
            led,
            ml,
            pulsar_version=pulsar_version,
            basis=basis,
        ).select(
            *base.columns,
            F.lit(None).cast(_POS).alias("target_position"),
            F.lit(None).cast(_POS).alias("linear_scan_position"),
            F.lit(None).cast("boolean").alias("publish_times_monotonic"),
            "mark_delete_position",
            "read_position",
            "individually_deleted",
            F.col("cleared_entries").alias("skipped_entries"),
            "error",
        )

    def reset() -> DataFrame:
        return reset_cursor_plan(
            base.where(F.col("action") == ACTION_RESET),
            cur,
            led,
            ml,
            pulsar_version=pulsar_version,
            basis=basis,
        ).select(
            *base.columns,
            F.lit(None).cast(_POS).alias("target_position"),
            F.lit(None).cast(_POS).alias("linear_scan_position"),
            F.lit(None).cast("boolean").alias("publish_times_monotonic"),
            "mark_delete_position",
            "read_position",
            "individually_deleted",
            F.lit(None).cast("long").alias("skipped_entries"),
            "error",
        )

    def by_time() -> DataFrame:
        return reset_cursor_by_time_plan(
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

    chosen = {
        ACTION_SKIP: skip,
        ACTION_CLEAR_BACKLOG: clear,
        ACTION_RESET: reset,
        ACTION_RESET_BY_TIME: by_time,
    }
    parts = [build() for action, build in chosen.items() if action in actions]
    if not parts:
        parts = [reset().limit(0)]
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
    lac = ml.select(*_TOPIC, "export_id", F.col("last_confirmed_entry").alias("_lac"))
    # A topic's entry numbers are known when its entries were exported, or when its ledgers hold none
    # (an empty topic has nothing to export: zero is then exact, not unknown).
    exported = inputs.entries.select(*_TOPIC).distinct().select(*_TOPIC, F.lit(True).alias("_exported"))
    stored = (
        inputs.ledgers.groupBy(*_TOPIC)
        .agg(F.sum("entries").alias("_listed"))
        .join(ml.select(*_TOPIC, "current_ledger_entries"), _TOPIC, "right")
        .select(
            *_TOPIC,
            (F.coalesce("_listed", F.lit(0)) + F.coalesce("current_ledger_entries", F.lit(0)) == 0).alias(
                "_empty_topic"
            ),
        )
    )
    df = (
        plans.join(before, [*_TOPIC, "cursor_name"], "left")
        .join(lac, _TOPIC, "left")
        .join(exported, _TOPIC, "left")
        .join(stored, _TOPIC, "left")
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
    ids = inputs.managed_ledgers.select(*_TOPIC, "export_id")
    return _with_version_label(out.join(ids, _TOPIC, "left"), inputs.managed_ledgers, pulsar_version).select(
        *req.columns,
        "export_id",
        "pulsar_version",
        "mark_delete_position",
        "read_position",
        "first_delivered",
        "rollback_failure",
        "error",
    )


# --- stage orchestration (driver) ----------------------------------------------------------------------
