"""The nightly ``plans`` stage: dry-run cursor operations and reader starts for operator requests.

Requests (see :mod:`pulsar_model.domain.plan_requests`) come from, in this order: the configured request
file
(``plans.requests_file`` / ``--requests``), the operator-maintained ``plan_requests`` Delta table when it
exists, and ``_requests/plan_requests.json`` inside the export folder. Requests that cannot be parsed
go to the quarantine table (source ``plan-requests``) with the reason; requests that parse but do not
fit the export (unknown topic or cursor) get a row with ``error`` set. Outputs, replaced per run date:

* ``skip_plans`` – one row per skip / clear_backlog / reset / reset_by_time request (docs §1.10, §1.11);
* ``reader_starts`` – one row per reader_start request (docs §7).

Driver-side orchestration only (reading a small request file; one ``distinct`` of the request actions
present when a request table exists); every number is computed by the pure transforms of
:mod:`pulsar_model.plans`, :mod:`pulsar_model.positions`,
:mod:`pulsar_model.readers` and :mod:`pulsar_model.backlog_exact`, called once with
``pulsar_version=None``: every topic carries its cluster's version
(:mod:`pulsar_model.pipeline.stages.cluster_versions`) and the transforms branch on its flags, so one plan
serves every cluster whatever mix of versions the export has (docs §0.3). A request for a topic without a
managed-ledger row is labelled with the configured default version.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
from collections.abc import Sequence
from pathlib import Path
from typing import cast

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_model.domain.plan_requests import (
    ACTION_READER_START,
    CURSOR_ACTIONS,
    ParsedRequests,
    RejectedRequest,
    parse_plan_requests,
)
from pulsar_model.engine.entry_coverage import topic_entries_complete, with_entries_complete
from pulsar_model.errors import ConfigError
from pulsar_model.pipeline.stages.cluster_versions import day_cluster_versions, with_cluster_version
from pulsar_model.plans import PlanInputs, cursor_plans, reader_plans, with_entry_effects
from pulsar_model.positions import cursor_basis
from pulsar_model.tables.contracts import conform, contract
from pulsar_model.tables.delta_io import DeltaTables, TableWrite

OUTPUT_TABLES = ("skip_plans", "reader_starts")
REQUESTS_TABLE = "plan_requests"
EXPORT_REQUESTS_FILE = Path("_requests") / "plan_requests.json"
QUARANTINE_SOURCE = "plan-requests"
_TOPIC = ["cluster", "topic"]


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


def _default_label(df: DataFrame, default_version: str) -> DataFrame:
    """A request for a topic without a managed-ledger row (no version of its own, an ``error`` row) is
    labelled with the configured default version."""
    return df.withColumn("pulsar_version", F.coalesce(F.col("pulsar_version"), F.lit(default_version)))


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
    has_table = tables.exists(requests_table)
    if has_table:
        sources.append(conform(tables.read(requests_table), REQUESTS_TABLE))
    # No empty side in the union: only the sources that can hold requests (see requests_frame).
    requests = functools.reduce(DataFrame.unionByName, sources) if sources else requests_frame(spark, parsed)
    day = {"export_date": run_date}
    raw = tables.read("managed_ledgers", partition_filter=day)
    # every topic carries its cluster's version: one plan for every cluster (docs §0.3)
    managed = with_cluster_version(raw, day_cluster_versions(tables, day, default_version), default_version)
    # rows of topics without a managed-ledger row have no version and no analysis
    scope = raw.select(*_TOPIC)
    inputs = PlanInputs(
        managed_ledgers=managed,
        ledgers=tables.read("ledgers", partition_filter=day).join(scope, _TOPIC, "left_semi"),
        cursors=tables.read("cursors", partition_filter=day).join(scope, _TOPIC, "left_semi"),
        entries=tables.read("entries", partition_filter=day).join(scope, _TOPIC, "left_semi"),
        messages=tables.read("messages", partition_filter=day).join(scope, _TOPIC, "left_semi"),
    )
    # Which actions have requests. Only those transforms are built - each is a large plan that Spark
    # analyses even for zero rows. The request files are parsed here already; only a request table needs a
    # Spark job (a few rows of request metadata).
    present = {str(r.get("action")) for r in parsed.requests}
    if has_table:
        present |= {str(r[0]) for r in requests.select("action").distinct().collect()}
    cursor_actions = present & set(CURSOR_ACTIONS)
    skip_parts: list[DataFrame] = []
    reader_parts: list[DataFrame] = []
    # Reader starts read a ledger view and topic context: built and materialised once (on the executors) so
    # the reader plans start from small leaves.
    basis = None
    if ACTION_READER_START in present:
        basis = cursor_basis(
            inputs.cursors,
            inputs.ledgers,
            inputs.managed_ledgers,
            None,
            with_state=False,
            materialise=lambda df: df.localCheckpoint(),
        )
    if cursor_actions:
        # Skip, clear_backlog and reset are one grouped pass per topic; it, the time search and the cursor
        # state before are materialised once (one action, on the executors: nothing comes to the driver)
        # where the entry totals start, which read them four times.
        plans = cursor_plans(requests, inputs, None, cursor_actions)
        skip_parts.append(
            _default_label(
                with_entry_effects(plans, inputs, materialise=lambda df: df.localCheckpoint()),
                default_version,
            )
        )
    if ACTION_READER_START in present:
        reader_parts.append(_default_label(reader_plans(requests, inputs, None, basis), default_version))
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
    # the export id labels rejected requests only: no Spark job when there are none
    export_ids = (
        [r[0] for r in managed.select("export_id").distinct().limit(1).collect()] if parsed.rejected else []
    )
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
