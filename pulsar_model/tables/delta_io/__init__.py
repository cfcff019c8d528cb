"""Delta Lake I/O: the only place in pulsar-analytics that reads or writes tables (DESIGN.md).

Usage::

    tables = DeltaTables(spark, warehouse="/data/warehouse")          # backend chosen automatically
    tables.replace_partitions("ledgers", df, {"export_date": date(2024, 5, 1)})
    ledgers = tables.read("ledgers", partition_filter={"export_date": "2024-05-01"})

Every table is a standard Delta table (protocol 1/2 when this module creates it) that Spark,
delta-rs, Polars and DuckDB read. One table = one folder; unmapped tables live in
``<warehouse>/<name>``, ``table_locations`` maps names to other paths/URIs (cluster config).

Backends
--------
``spark``
    delta-spark's connector (``--packages io.delta:delta-spark_2.13:<version>``, or Databricks).
    Chosen by ``backend="auto"`` when ``io.delta.tables.DeltaTable`` loads in the session's JVM
    (Spark Connect: Databricks, or Delta's SQL extension configured). Delta does the commits, time
    travel (``versionAsOf``), ``replaceWhere`` partition replacement, restore and its own
    partition-aware conflict detection; this module adds the schema guard and ``write_all``'s rollback.
    Asking for ``backend="spark"`` without the jars raises ``DeltaBackendUnavailableError`` saying
    what to add.
``bridge`` (the default on a machine without the connector, e.g. offline: Maven unreachable)
    Executors write Parquet with Spark; the driver commits the files with the Rust ``deltalake``
    package (delta-rs). Needs a local path, or a POSIX filesystem shared by driver and executors.

How the bridge commits a write
------------------------------
1. Load the table snapshot (``deltalake.DeltaTable``) BEFORE any Spark job, refuse tables whose
   protocol needs more than plain Parquet files (deletion vectors, column mapping, type widening,
   check constraints, generated/identity columns, change data feed, row tracking ...:
   ``UnsupportedTableFeatureError``), and run the schema guard (below).
2. Spark writes the DataFrame (columns in the table's order, missing nullable columns as nulls) with
   ``partitionBy`` into ``<table>/_pulsar_staging/<timestamp>-<id>/`` (TIMESTAMP_MICROS forced for
   the job: INT96 has no statistics).
3. The driver lists the staged files, skipping ``_SUCCESS``, ``.crc`` and hidden files; 0-row files
   are deleted. Partition values come from Spark's folder names (Spark's ``%XX`` escaping undone,
   ``__HIVE_DEFAULT_PARTITION__`` = null) - for files already in the table they always come from
   the Delta log, never from folder names (writers escape differently). ``numRecords`` and, from
   the Parquet footer, ``minValues``/``maxValues``/``nullCount`` become the file's statistics.
4. ``replace_partitions`` checks every staged file's partition values against ``partition_values``
   (``ContractError`` naming the offending values) and selects the table's files to remove by the
   partition values logged for them.
5. Commit, one table after another: if ``_delta_log`` moved past the snapshot's version ->
   ``ConcurrentWriteError`` (table, expected and found version, "rerun after the other writer
   finishes"). Otherwise the files are moved into the table root with a no-replace move
   (``os.link`` + ``unlink``; copy with exclusive create where hard links are unsupported) and
   committed as ONE transaction: ``create_table_with_add_actions`` for a new table,
   ``DeltaTable.create_write_transaction`` on the pre-job snapshot with ``max_commit_retries=0``
   otherwise, so a commit racing ours makes ours fail instead of being retried on top of it.
   ``AddAction.path`` is the raw relative path (delta-rs URL-encodes it). Commit info carries
   ``pulsar.operation`` (append / overwrite / replace_partitions / create / restore / rollback).
6. On any failure the moved files are deleted; the staging folder is deleted in every case.

Guarantees
----------
- Atomic per table: readers see the previous version or the new one, never a mix.
- Idempotent nightly writes: ``replace_partitions`` removes every file whose logged partition
  values equal ``partition_values`` (a subset of the partition columns) and adds the new rows in
  the same commit; rerunning with the same DataFrame yields the same content, never duplicates.
- Concurrent writers to one table fail clearly (``ConcurrentWriteError``), never corrupt it. delta-rs
  conflict detection is not partition-aware: two runs replacing *different* partitions of one
  table also conflict - rerun the loser.
- ``write_all`` stages every table's files first (all Spark jobs), then commits them one after
  another; when a commit fails, the tables already committed by the call are restored to their
  previous version (a table the call created is removed again) and the error is re-raised.
  Not a distributed transaction: a reader may briefly see the first tables' new versions, and a
  killed driver between commits leaves the earlier tables committed until :meth:`DeltaTables.cleanup_staging`
  (``pulsar-analytics cleanup``) restores them: before the first commit every staging folder gets a
  manifest (``_pulsar_write.json``: the files to move, the base version, the other tables of the call).
- Schema-change guard: the DataFrame's columns must equal the table's (names, order-insensitive;
  types including nested fields; nullability differences are accepted and the TABLE's schema is
  recorded). Otherwise ``SchemaChangeError`` lists missing / extra / type-changed columns. With
  ``allow_schema_change=True`` an overwrite may replace the schema (and, with ``partition_by``, the
  partitioning); append and replace_partitions may add columns (recorded nullable; through a
  separate schema commit just before the data commit) and leave out nullable columns (written as
  nulls). delta-rs alone would silently replace (overwrite) or silently hide (append) columns.

Limits
------
- Bridge partition columns must be string, date, integral or boolean (Spark's folder form of those
  is exactly Delta's partition-value string). Spark writes an empty-string partition value as null.
- Reads through the bridge return every column nullable (Spark file sources always do); the table's
  declared schema, with nullability, is :meth:`DeltaTables.schema`.
- Files moved into a table by a driver killed before its commit stay there unreferenced (harmless:
  readers follow the log) until :meth:`DeltaTables.cleanup_staging` deletes them with the staging folder.

Crash testing
-------------
``PULSAR_ANALYTICS_FAULT=<table>:<phase>[:<nth>]`` is a TEST HOOK (``_faults.py``): the bridge SIGKILLs
its own process at ``staging`` (during the Spark job), ``staged``, ``moved`` (files in the table root,
not committed) or ``committed`` (before the next table of the call commits). Unset, it costs one
environment lookup per phase. ``tests/test_crash_points.py`` kills every write mode at every phase.
- The bridge needs local/shared POSIX paths; object stores need the Spark connector. A table
  location must not contain '%' (delta-rs 1.6 percent-decodes table paths, even ``file:`` URIs);
  partition values and file names may.
- Reads attach partition values by the path of each row's file (``_metadata.file_path``): a literal
  map for up to 2000 files, a broadcast join beyond; an unknown file fails the query.
- Schema evolution of an append is two commits (schema, then data); a failure between them leaves
  the new nullable column in the schema (``write_all`` restores it away).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from pulsar_model.errors import SchemaChangeError, TableNotFoundError
from pulsar_model.tables.delta_io._bridge import STAGING_DIR, BridgeBackend, remove_orphan_staging
from pulsar_model.tables.delta_io._common import (
    Backend,
    BackendName,
    TableWrite,
    connector_hint,
    delta_connector_available,
    select_backend,
)
from pulsar_model.tables.delta_io._connector import SparkConnectorBackend, replace_where_predicate
from pulsar_model.tables.delta_io._paths import TABLE_NAME_RE, TableLocator, redact_uri, validate_table_name
from pulsar_model.tables.delta_io._schema import check_partition_columns, diff_schemas

log = logging.getLogger(__name__)

__all__ = [
    "STAGING_DIR",
    "TABLE_NAME_RE",
    "DeltaTables",
    "TableWrite",
    "cleanup_staging",
    "connector_hint",
    "delta_connector_available",
    "redact_uri",
    "replace_where_predicate",
    "select_backend",
    "validate_table_name",
]


class DeltaTables:
    """Read and write the project's Delta tables (one instance per warehouse; driver-side).

    ``backend``: ``auto`` (the connector when its jars are loaded, else the bridge), ``spark`` or
    ``bridge``; the resolved name is in :attr:`backend`. Write methods return the table version
    they committed.
    """

    backend: str

    def __init__(
        self,
        spark: SparkSession,
        warehouse: str,
        table_locations: Mapping[str, str] | None = None,
        backend: BackendName = "auto",
    ) -> None:
        self._spark = spark
        self._locator = TableLocator(warehouse, table_locations)
        self.backend = select_backend(spark, backend)
        self._impl: Backend = (
            BridgeBackend(spark) if self.backend == "bridge" else SparkConnectorBackend(spark)
        )
        log.info("Delta I/O backend %s, warehouse %s", self.backend, redact_uri(warehouse))

    @property
    def spark(self) -> SparkSession:
        """The session the tables are read and written with."""
        return self._spark

    # -- metadata ------------------------------------------------------------------------------------

    def location(self, table: str) -> str:
        """Absolute path (local tables) or URI of ``table``; ``UnsafePathError`` for unsafe names/paths."""
        return self._locator.locate(table).uri

    def exists(self, table: str) -> bool:
        """True when ``table`` is a Delta table (has a ``_delta_log`` with a commit)."""
        return self._impl.exists(self._locator.locate(table))

    def version(self, table: str) -> int | None:
        """Latest committed version, ``None`` when the table does not exist."""
        return self._impl.version(self._locator.locate(table))

    def schema(self, table: str) -> T.StructType:
        """The table's declared schema (with nullability and column comments) from the Delta log."""
        return self._schema_and_partitions(table)[0]

    def partition_columns(self, table: str) -> tuple[str, ...]:
        """The table's partition columns, in order."""
        return self._schema_and_partitions(table)[1]

    def _schema_and_partitions(self, table: str) -> tuple[T.StructType, tuple[str, ...]]:
        location = self._locator.locate(table)
        found = self._impl.table_schema(location)
        if found is None:
            raise TableNotFoundError(f"Table {table!r} does not exist at {location.uri!r}.")
        return found

    def create(
        self,
        table: str,
        schema: T.StructType,
        partition_by: Sequence[str] = (),
        *,
        description: str | None = None,
    ) -> None:
        """Create an empty table. Idempotent: an existing table with the same columns (names, types;
        nullability ignored) and partitioning is left alone; a different one raises ``SchemaChangeError``."""
        location = self._locator.locate(table)
        parts = check_partition_columns(table, schema, tuple(partition_by))
        found = self._impl.table_schema(location)
        if found is None:
            self._impl.create(location, schema, parts, description)
            return
        current, current_parts = found
        diff = diff_schemas(current, schema)
        if not diff.empty or current_parts != parts:
            problems = [diff.describe()] if not diff.empty else []
            if current_parts != parts:
                problems.append(f"partition columns {list(current_parts)} -> {list(parts)}")
            raise SchemaChangeError(
                f"Table {table!r} already exists with a different definition: {'; '.join(problems)}. "
                "Migrate it with overwrite(..., allow_schema_change=True) or choose another table name."
            )

    # -- reads ---------------------------------------------------------------------------------------

    def read(
        self,
        table: str,
        *,
        version: int | None = None,
        partition_filter: Mapping[str, object] | None = None,
    ) -> DataFrame:
        """The table's rows at ``version`` (default: latest) as a lazy DataFrame with the table's columns.

        ``partition_filter`` selects partitions by equality (``None`` = null partition; dates and
        timestamps may be ISO strings); only the matching files are read. An empty table (or an
        empty selection) gives an empty DataFrame with the table's schema.
        """
        return self._impl.read(self._locator.locate(table), version, partition_filter)

    def count_rows(self, table: str, *, partition_filter: Mapping[str, object] | None = None) -> int:
        """Rows in the current version (or the selected partitions), from the Delta log's statistics
        when every file has them (no data scan), else by a Spark count."""
        return self._impl.count_rows(self._locator.locate(table), partition_filter)

    def partition_values(self, table: str, column: str) -> list[object]:
        """The distinct values of partition column ``column`` in the current version (``None`` for the null
        partition), in no order: from the Delta log where the backend reads it (no Spark job), else by a
        Spark ``distinct``."""
        return self._impl.partition_values(self._locator.locate(table), column)

    # -- writes --------------------------------------------------------------------------------------

    def append(
        self,
        table: str,
        df: DataFrame,
        *,
        partition_by: Sequence[str] = (),
        allow_schema_change: bool = False,
    ) -> int:
        """Add ``df``'s rows (creating the table, partitioned by ``partition_by``, if missing)."""
        return self._write_one(TableWrite(table, df, "append", None, partition_by, allow_schema_change))

    def overwrite(
        self,
        table: str,
        df: DataFrame,
        *,
        partition_by: Sequence[str] = (),
        allow_schema_change: bool = False,
    ) -> int:
        """Replace the whole table's content with ``df`` in one commit (creating the table if missing)."""
        return self._write_one(TableWrite(table, df, "overwrite", None, partition_by, allow_schema_change))

    def replace_partitions(
        self,
        table: str,
        df: DataFrame,
        partition_values: Mapping[str, object],
        *,
        allow_schema_change: bool = False,
    ) -> int:
        """Idempotent partial overwrite: in ONE commit, remove every file whose partition values equal
        ``partition_values`` (a subset of the partition columns) and add ``df``'s rows. Rows of ``df``
        outside ``partition_values`` raise ``ContractError``. A missing table is created, partitioned
        by the keys of ``partition_values``."""
        return self._write_one(
            TableWrite(table, df, "replace_partitions", partition_values, (), allow_schema_change)
        )

    def write_all(self, writes: Sequence[TableWrite]) -> dict[str, int]:
        """Write several tables, all or (in effect) nothing; return ``{table: new_version}``.

        Every write is guarded before any Spark job; the files of all writes are staged before the
        first commit; if a commit fails, tables already committed by this call are restored to their
        previous content (tables it created are removed) and the error is re-raised.
        """
        return self._impl.write_all([(self._locator.locate(w.table), w) for w in writes])

    def _write_one(self, write: TableWrite) -> int:
        return self.write_all([write])[write.table]

    # -- history and maintenance ----------------------------------------------------------------------

    def history(self, table: str) -> list[dict[str, Any]]:
        """Commits, newest first: ``version``, ``timestamp`` (UTC datetime), ``operation`` (this
        project's operation name when it wrote the commit, else Delta's), ``delta_operation``,
        ``parameters`` and ``partition_values`` (replace_partitions)."""
        return self._impl.history(self._locator.locate(table))

    def restore(self, table: str, version: int) -> int:
        """Commit a new version whose content (and schema) equals ``version``; return it.

        Restoring to the latest version is a no-op that returns it. Needs the data files of
        ``version`` (not yet vacuumed)."""
        return self._impl.restore(self._locator.locate(table), version)

    def cleanup_staging(self, table: str | None = None, older_than_seconds: float = 0) -> list[str]:
        """Remove bridge staging folders (left by killed writers) untouched for ``older_than_seconds``.

        Before a folder goes, what its killed write left in the table is undone (logged at WARNING):
        data files it moved in but never committed are deleted, and when it was one table of a
        ``write_all`` that did not commit all its tables, the tables it committed are restored to
        their previous version (removed when it created them). ``table=None`` scans every table
        folder of a local warehouse and every mapped local table (do that after a killed multi-table
        write, so every table of it is restored). With the default 0 every staging folder goes: call
        it when no writer runs, or pass a margin longer than your longest write. Returns the removed
        folders.
        """
        return _cleanup(self._locator, table, older_than_seconds)


def cleanup_staging(
    warehouse: str,
    table_locations: Mapping[str, str] | None = None,
    older_than_seconds: float = 0,
    table: str | None = None,
) -> list[str]:
    """:meth:`DeltaTables.cleanup_staging` without a SparkSession (no JVM start: the ``cleanup`` command)."""
    return _cleanup(TableLocator(warehouse, table_locations), table, older_than_seconds)


def _cleanup(locator: TableLocator, table: str | None, older_than_seconds: float) -> list[str]:
    locations = [locator.locate(table)] if table is not None else locator.local_tables()
    removed: list[str] = []
    for location in locations:
        if location.local_path is not None and os.path.isdir(location.local_path):
            removed += remove_orphan_staging(location.local_path, older_than_seconds)
    return removed
