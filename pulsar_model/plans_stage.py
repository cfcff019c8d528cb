"""The nightly ``plans`` stage: dry-run cursor operations and reader starts for operator requests.

Requests (see :mod:`pulsar_model.plan_requests`) come from, in this order: the configured request file
(``plans.requests_file`` / ``--requests``), the operator-maintained ``plan_requests`` Delta table when it
exists, and ``_requests/plan_requests.json`` inside the export folder. Requests that cannot be parsed
go to the quarantine table (source ``plan-requests``) with the reason; requests that parse but do not
fit the export (unknown topic or cursor) get a row with ``error`` set. Outputs, replaced per run date:

* ``skip_plans`` – one row per skip / clear_backlog / reset / reset_by_time request (docs §1.10, §1.11);
* ``reader_starts`` – one row per reader_start request (docs §7).

Driver-side orchestration only (reading a small request file, one ``distinct`` of the Pulsar versions
present); every number is computed by the pure transforms of :mod:`pulsar_model.positions`,
:mod:`pulsar_model.readers` and :mod:`pulsar_model.backlog_exact`, once per broker version.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_model.backlog_exact import unacked_entry_totals
from pulsar_model.contracts import conform, contract
from pulsar_model.delta_io import DeltaTables, TableWrite
from pulsar_model.entry_coverage import topic_entries_complete, with_entries_complete
from pulsar_model.errors import ConfigError
from pulsar_model.plan_requests import (
    ACTION_CLEAR_BACKLOG,
    ACTION_READER_START,
    ACTION_RESET,
    ACTION_RESET_BY_TIME,
    ACTION_SKIP,
    CURSOR_ACTIONS,
    ParsedRequests,
    RejectedRequest,
    parse_plan_requests,
)
from pulsar_model.positions import (
    CursorBasis,
    clear_backlog_plan,
    cursor_basis,
    reset_cursor_plan,
    skip_entries,
)
from pulsar_model.readers import reader_start_positions, reset_cursor_by_time_plan

OUTPUT_TABLES = ("skip_plans", "reader_starts")
REQUESTS_TABLE = "plan_requests"
EXPORT_REQUESTS_FILE = Path("_requests") / "plan_requests.json"
QUARANTINE_SOURCE = "plan-requests"
_TOPIC = ["cluster", "topic"]
_POS = "struct<ledger_id:bigint,entry_id:bigint>"
_RANGES = f"array<struct<lower:{_POS},upper:{_POS}>>"
_PLAN_REQUEST_COLUMNS = (
    "request_id",
    "cluster",
    "topic",
    "action",
    "cursor_name",
    "n",
    "deleted_entries",
    "target_kind",
    "target",
    "timestamp_ms",
)


@dataclass(frozen=True)
class PlanInputs:
    """The run date's input tables the plans are computed on (one broker version's topics)."""

    managed_ledgers: DataFrame
    ledgers: DataFrame
    cursors: DataFrame
    entries: DataFrame
    messages: DataFrame


def read_request_files(paths: Sequence[str | os.PathLike[str]]) -> ParsedRequests:
    """Parse every request file in ``paths``; a missing file is a :class:`ConfigError` naming it."""
    requests: list[dict[str, object]] = []
    rejected: list[RejectedRequest] = []
    for path in paths:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(
                f"Plan request file {str(p)!r} not found; fix plans.requests_file / --requests or remove it"
            )
        parsed = parse_plan_requests(p.read_text(encoding="utf-8"), str(p))
        requests.extend(parsed.requests)
        rejected.extend(parsed.rejected)
    return ParsedRequests(tuple(requests), tuple(rejected))


def _all_nullable(data_type: T.DataType) -> T.DataType:
    """``data_type`` with every field, element and value nullable (nested too), as a file scan reads it."""
    if isinstance(data_type, T.StructType):
        return T.StructType(
            [T.StructField(f.name, _all_nullable(f.dataType), True, f.metadata) for f in data_type.fields]
        )
    if isinstance(data_type, T.ArrayType):
        return T.ArrayType(_all_nullable(data_type.elementType), True)
    if isinstance(data_type, T.MapType):
        return T.MapType(data_type.keyType, _all_nullable(data_type.valueType), True)
    return data_type


def requests_frame(spark: SparkSession, parsed: ParsedRequests) -> DataFrame:
    """The accepted requests as a DataFrame of the ``plan_requests`` contract's columns, all nullable.

    Nullable like the ``plan_requests`` table's scan, so a union of the two keeps one type per column:
    a Union's constraints use its first child's attributes, and when those differ in nullability from the
    Union's output, a later ``localCheckpoint`` keeps constraints on an attribute Spark 4.1 cannot
    re-map when the checkpoint is re-instanced (``key not found: action#N`` at the ``skip_plans`` write).
    """
    c = contract(REQUESTS_TABLE)
    rows = [tuple(r.get(name) for name in c.column_names) for r in parsed.requests]
    return spark.createDataFrame(rows, cast(T.StructType, _all_nullable(c.spark_schema)))


# --- the transforms the stage applies (pure, lazy) ---------------------------------------------------------


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
    pulsar_version: str,
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
    return functools.reduce(DataFrame.unionByName, parts).select(
        "*", F.lit(pulsar_version).alias("pulsar_version")
    )


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
        *_PLAN_REQUEST_COLUMNS,
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
    requests: DataFrame, inputs: PlanInputs, pulsar_version: str, basis: CursorBasis | None = None
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
    return out.join(ids, _TOPIC, "left").select(
        *req.columns,
        "export_id",
        F.lit(pulsar_version).alias("pulsar_version"),
        "mark_delete_position",
        "read_position",
        "first_delivered",
        "rollback_failure",
        "error",
    )


# --- stage orchestration (driver) ----------------------------------------------------------------------


def _quarantine_rows(
    rejected: Sequence[RejectedRequest], run_date: dt.date, export_id: str, run_id: str
) -> list[dict[str, object]]:
    return [
        {
            "cluster": r.cluster,
            "topic": r.topic,
            "export_id": export_id,
            "export_date": run_date,
            "run_id": run_id,
            "source": QUARANTINE_SOURCE,
            "source_file": r.reason.split(" ", 1)[0],
            "record_locator": r.locator,
            "reason_code": r.reason_code,
            "reason": r.reason,
            "record_excerpt": r.excerpt or None,
        }
        for r in rejected
    ]


def _union_or_empty(spark: SparkSession, parts: Sequence[DataFrame], table: str) -> DataFrame:
    if parts:
        return functools.reduce(DataFrame.unionByName, parts)
    return spark.createDataFrame([], contract(table).spark_schema).drop("export_date")


def run_plans_stage(
    tables: DeltaTables,
    run_date: dt.date,
    default_version: str,
    *,
    run_id: str,
    request_files: Sequence[str] = (),
    export_dir: str | None = None,
    requests_table: str = REQUESTS_TABLE,
) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """Compute and write ``skip_plans`` / ``reader_starts`` for ``run_date``.

    Returns (rows written per output table, table versions, requests in/quarantined counts).
    """
    spark = tables.spark
    files = list(request_files)
    if export_dir is not None and (Path(export_dir) / EXPORT_REQUESTS_FILE).is_file():
        files.append(str(Path(export_dir) / EXPORT_REQUESTS_FILE))
    parsed = read_request_files(files)
    sources = [requests_frame(spark, parsed)] if parsed.requests else []
    if tables.exists(requests_table):
        sources.append(conform(tables.read(requests_table), REQUESTS_TABLE))
    # No empty side in the union: only the sources that can hold requests (see requests_frame).
    requests = functools.reduce(DataFrame.unionByName, sources) if sources else requests_frame(spark, parsed)
    day = {"export_date": run_date}
    managed = tables.read("managed_ledgers", partition_filter=day).withColumn(
        "pulsar_version", F.coalesce("pulsar_version", F.lit(default_version))
    )
    ledgers = tables.read("ledgers", partition_filter=day)
    cursors = tables.read("cursors", partition_filter=day)
    entries = tables.read("entries", partition_filter=day)
    messages = tables.read("messages", partition_filter=day)
    topic_versions = managed.select(*_TOPIC, "pulsar_version")
    requests = requests.join(topic_versions, _TOPIC, "left").withColumn(
        "pulsar_version", F.coalesce("pulsar_version", F.lit(default_version))
    )
    # Which (version, action) pairs have requests: a few rows of request metadata. Only those transforms
    # are built - each is a large plan that Spark analyses even for zero rows.
    present: dict[str, set[str]] = {}
    for version, action in requests.select("pulsar_version", "action").distinct().collect():
        present.setdefault(version, set()).add(action)
    skip_parts: list[DataFrame] = []
    reader_parts: list[DataFrame] = []
    for version in sorted(present):
        ml = managed.where(F.col("pulsar_version") == version)
        scope = ml.select(*_TOPIC)
        inputs = PlanInputs(
            managed_ledgers=ml,
            ledgers=ledgers.join(scope, _TOPIC, "left_semi"),
            cursors=cursors.join(scope, _TOPIC, "left_semi"),
            entries=entries.join(scope, _TOPIC, "left_semi"),
            messages=messages.join(scope, _TOPIC, "left_semi"),
        )
        mine = requests.where(F.col("pulsar_version") == version).drop("pulsar_version")
        cursor_actions = present[version] & set(CURSOR_ACTIONS)
        # The ledger view, topic context and (for skip / clear_backlog) cursor state are the same for every
        # request kind of the version: built and materialised once (on the executors) and shared, instead
        # of each action's plan building, compiling and computing its own copy (tier s: a third of the
        # stage's CPU).
        basis = None
        if present[version] & {ACTION_SKIP, ACTION_CLEAR_BACKLOG, ACTION_RESET, ACTION_READER_START}:
            basis = cursor_basis(
                inputs.cursors,
                inputs.ledgers,
                inputs.managed_ledgers,
                version,
                with_state=bool(present[version] & {ACTION_SKIP, ACTION_CLEAR_BACKLOG}),
                materialise=lambda df: df.localCheckpoint(),
            )
        if cursor_actions:
            # The actions' plans start from the materialised basis, so they are small; they and the cursor
            # state before are materialised once more (one action, on the executors: nothing comes to the
            # driver) where the entry totals start, which read them four times.
            plans = functools.reduce(
                DataFrame.unionByName,
                [cursor_plans(mine, inputs, version, {action}, basis) for action in sorted(cursor_actions)],
            )
            skip_parts.append(with_entry_effects(plans, inputs, materialise=lambda df: df.localCheckpoint()))
        if ACTION_READER_START in present[version]:
            reader_parts.append(reader_plans(mine, inputs, version, basis))
    outputs = {
        "skip_plans": with_entries_complete(
            _union_or_empty(spark, skip_parts, "skip_plans"), topic_entries_complete(managed)
        ),
        "reader_starts": _union_or_empty(spark, reader_parts, "reader_starts"),
    }
    writes = []
    for name in OUTPUT_TABLES:
        c = contract(name)
        tables.create(name, c.spark_schema, c.partitioned_by, description=c.description)
        df = outputs[name].withColumn("export_date", F.lit(run_date))
        writes.append(
            TableWrite(
                table=name,
                df=conform(df, name),
                mode="replace_partitions",
                partition_values=day,
                partition_by=c.partitioned_by,
            )
        )
    # Rejected requests replace this stage's earlier rejects of the date (idempotent reruns) and keep
    # every other source's quarantine rows of the date: one replace of the date partition.
    q = contract("quarantine")
    export_ids = [r[0] for r in managed.select("export_id").distinct().limit(1).collect()]
    rows = _quarantine_rows(parsed.rejected, run_date, export_ids[0] if export_ids else "none", run_id)
    new_rejects = spark.createDataFrame([tuple(r[c] for c in q.column_names) for r in rows], q.spark_schema)
    if tables.exists("quarantine"):
        kept = tables.read("quarantine", partition_filter=day).where(F.col("source") != QUARANTINE_SOURCE)
        had_rejects = (
            tables.read("quarantine", partition_filter=day)
            .where(F.col("source") == QUARANTINE_SOURCE)
            .limit(1)
            .count()
            > 0
        )
        if parsed.rejected or had_rejects:
            writes.append(
                TableWrite(
                    table="quarantine",
                    df=conform(kept.unionByName(new_rejects), "quarantine"),
                    mode="replace_partitions",
                    partition_values=day,
                    partition_by=q.partitioned_by,
                )
            )
    elif parsed.rejected:
        tables.create("quarantine", q.spark_schema, q.partitioned_by, description=q.description)
        writes.append(
            TableWrite(
                table="quarantine",
                df=new_rejects,
                mode="replace_partitions",
                partition_values=day,
                partition_by=q.partitioned_by,
            )
        )
    versions_written = tables.write_all(writes)
    rows_out = {name: tables.count_rows(name, partition_filter=day) for name in OUTPUT_TABLES}
    counts = {
        "plan_requests_in": len(parsed.requests) + len(parsed.rejected),
        "plan_requests_quarantined": len(parsed.rejected),
    }
    return rows_out, versions_written, counts
