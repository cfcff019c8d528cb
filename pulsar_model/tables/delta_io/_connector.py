"""The ``spark`` backend: delta-spark's connector (``--packages io.delta:delta-spark_2.13:<v>``, Databricks).

Kept deliberately thin: Delta itself does the commit, time travel, restore and (partition-aware)
conflict detection. Not integration-tested on the offline development machine (no jars there).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_model.errors import ConcurrentWriteError, ContractError, TableNotFoundError
from pulsar_model.tables.delta_io._common import (
    PreparedWrite,
    TableWrite,
    check_unique_tables,
    prepare_write,
    quote_column,
    shape_frame,
)
from pulsar_model.tables.delta_io._paths import Location
from pulsar_model.tables.delta_io._schema import coerce_partition_filter

log = logging.getLogger(__name__)


def sql_literal(value: object) -> str:
    """Spark SQL literal of a typed partition value (for ``replaceWhere``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, dt.datetime):
        utc = value.astimezone(dt.UTC) if value.tzinfo else value
        return f"TIMESTAMP'{utc.strftime('%Y-%m-%d %H:%M:%S.%f')}{'Z' if value.tzinfo else ''}'"
    if isinstance(value, dt.date):
        return f"DATE'{value.isoformat()}'"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    raise ContractError(
        f"Cannot express partition value {value!r} ({type(value).__name__}) in a replaceWhere predicate."
    )


def replace_where_predicate(values: Mapping[str, object]) -> str:
    """``replaceWhere`` predicate for equality on partition columns (``None`` means IS NULL)."""
    parts = [
        f"{quote_column(col)} IS NULL" if value is None else f"{quote_column(col)} = {sql_literal(value)}"
        for col, value in values.items()
    ]
    return " AND ".join(parts)


def _is_concurrency_error(exc: BaseException) -> bool:
    text = f"{type(exc).__name__} {exc}"
    return "Concurrent" in text or "DELTA_CONCURRENT" in text


class SparkConnectorBackend:
    """Reads and writes through ``format("delta")`` and ``delta.tables.DeltaTable``."""

    name = "spark"

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    def _delta_table(self, location: Location) -> Any:
        from delta.tables import DeltaTable  # delta-spark's Python API (needs the jars at runtime)

        return DeltaTable.forPath(self.spark, location.uri)

    def exists(self, location: Location) -> bool:
        from delta.tables import DeltaTable

        return bool(DeltaTable.isDeltaTable(self.spark, location.uri))

    def version(self, location: Location) -> int | None:
        if not self.exists(location):
            return None
        row = self._delta_table(location).history(1).select("version").first()
        return int(row[0]) if row is not None else None

    def table_schema(self, location: Location) -> tuple[T.StructType, tuple[str, ...]] | None:
        if not self.exists(location):
            return None
        detail = self._delta_table(location).detail().select("partitionColumns").first()
        schema = self.spark.read.format("delta").load(location.uri).schema
        return schema, tuple(detail[0] if detail is not None else ())

    def create(
        self, location: Location, schema: T.StructType, partition_by: tuple[str, ...], description: str | None
    ) -> None:
        from delta.tables import DeltaTable

        builder = DeltaTable.createIfNotExists(self.spark).location(location.uri).addColumns(schema)
        if partition_by:
            builder = builder.partitionedBy(*partition_by)
        if description:
            builder = builder.comment(description)
        builder.execute()

    def read(
        self, location: Location, version: int | None, partition_filter: Mapping[str, object] | None
    ) -> DataFrame:
        found = self.table_schema(location)
        if found is None:
            raise TableNotFoundError(f"Table {location.table!r} does not exist at {location.uri!r}.")
        schema, partition_by = found
        wanted = coerce_partition_filter(
            location.table, schema, partition_by, partition_filter or {}, "partition_filter"
        )
        reader = self.spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        df = reader.load(location.uri)
        for col, value in wanted.items():
            column = F.col(quote_column(col))
            df = df.where(column.isNull() if value is None else column == F.lit(value))
        return df

    def count_rows(self, location: Location, partition_filter: Mapping[str, object] | None) -> int:
        return self.read(location, None, partition_filter).count()

    def partition_values(self, location: Location, column: str) -> list[object]:
        rows = self.read(location, None, None).select(quote_column(column)).distinct().collect()
        return [r[0] for r in rows]

    def history(self, location: Location) -> list[dict[str, Any]]:
        if not self.exists(location):
            raise TableNotFoundError(f"Table {location.table!r} does not exist at {location.uri!r}.")
        rows = (
            self._delta_table(location)
            .history()
            .select("version", "timestamp", "operation", "operationParameters")
        )
        return [
            {
                "version": int(r["version"]),
                "timestamp": r["timestamp"],
                "operation": r["operation"],
                "delta_operation": r["operation"],
                "parameters": dict(r["operationParameters"] or {}),
                "partition_values": None,
            }
            for r in rows.collect()  # commit metadata, not data: a handful of rows
        ]

    def restore(self, location: Location, version: int) -> int:
        latest = self.version(location)
        if latest is None:
            raise TableNotFoundError(f"Table {location.table!r} does not exist at {location.uri!r}.")
        if not 0 <= version <= latest:
            raise ContractError(
                f"Cannot restore table {location.table!r} to version {version}: versions 0..{latest} exist."
            )
        if version == latest:
            return latest
        self._delta_table(location).restoreToVersion(version)
        return int(self.version(location) or 0)

    def _prepare(self, location: Location, write: TableWrite) -> PreparedWrite:
        found = self.table_schema(location)
        schema, partition_by = found if found is not None else (None, ())
        return prepare_write(location, write, self.version(location) if found else None, schema, partition_by)

    def _write(self, p: PreparedWrite) -> int:
        plan = p.plan
        mode = p.write.mode
        writer = shape_frame(p.write.df, plan).write.format("delta")
        if plan.partition_by:
            writer = writer.partitionBy(*plan.partition_by)
        if mode == "append" or plan.create:
            writer = writer.mode("append")
            if plan.added:
                writer = writer.option("mergeSchema", "true")
        elif mode == "overwrite":
            writer = writer.mode("overwrite")
            if plan.replace_schema:
                writer = writer.option("overwriteSchema", "true")
        if mode == "replace_partitions" and not plan.create:
            writer = writer.mode("overwrite").option("replaceWhere", replace_where_predicate(p.wanted or {}))
            if plan.added:
                writer = writer.option("mergeSchema", "true")
        try:
            writer.save(p.location.uri)
        except Exception as exc:
            if _is_concurrency_error(exc):
                raise ConcurrentWriteError(
                    f"Table {p.table!r} changed while this write ran (read at version {p.base_version}): "
                    f"{exc}. "
                    "Rerun after the other writer finishes."
                ) from exc
            if "REPLACE_WHERE_MISMATCH" in str(exc) or "does not conform" in str(exc):
                raise ContractError(
                    f"replace_partitions on table {p.table!r}: the DataFrame has rows outside "
                    f"partition_values {p.write.partition_values}: {exc}"
                ) from exc
            raise
        return int(self.version(p.location) or 0)

    def write_all(self, writes: Sequence[tuple[Location, TableWrite]]) -> dict[str, int]:
        """Guard every write first, then write one table after another; on failure restore the
        tables already written (a table this call created is emptied with a DELETE commit)."""
        check_unique_tables([w for _, w in writes])
        prepared = [self._prepare(location, write) for location, write in writes]
        done: list[tuple[PreparedWrite, int]] = []
        for p in prepared:
            try:
                done.append((p, self._write(p)))
            except BaseException as exc:
                for q, _version in reversed(done):
                    try:
                        if q.base_version is None:
                            self._delta_table(q.location).delete()
                        else:
                            self.restore(q.location, q.base_version)
                    except Exception as rollback_exc:
                        exc.add_note(f"Rollback of table {q.table!r} failed: {rollback_exc!r}")
                raise
        return {p.table: version for p, version in done}
