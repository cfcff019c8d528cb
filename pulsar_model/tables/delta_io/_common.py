"""Pieces shared by both backends: the write request, write preparation, backend selection."""

from __future__ import annotations

import importlib.metadata
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_model.errors import ConfigError, ContractError, DeltaBackendUnavailableError
from pulsar_model.tables.delta_io._paths import Location
from pulsar_model.tables.delta_io._schema import (
    SchemaPlan,
    WriteMode,
    coerce_partition_filter,
    plan_schema,
)

BackendName = Literal["auto", "spark", "bridge"]
_WRITE_MODES: tuple[str, ...] = ("append", "overwrite", "replace_partitions")

#: Used in the "add the connector" hint when delta-spark's Python package is not installed.
FALLBACK_DELTA_SPARK_VERSION = "4.0.0"
#: PySpark 4 is built for Scala 2.13; the connector artifact carries the Scala suffix.
SCALA_BINARY_VERSION = "2.13"
_DELTA_CLASS = "io.delta.tables.DeltaTable"


@dataclass(frozen=True)
class TableWrite:
    """One table write of :meth:`DeltaTables.write_all` (also what the single-table writes build).

    ``mode``: ``append`` | ``overwrite`` | ``replace_partitions``; ``partition_values`` only (and
    always) with ``replace_partitions``; ``partition_by`` partitions a table the write creates (for an
    existing table it must be empty or equal to the table's partitioning, unless an overwrite with
    ``allow_schema_change=True`` repartitions it).
    """

    table: str
    df: DataFrame
    mode: WriteMode
    partition_values: Mapping[str, object] | None = None
    partition_by: Sequence[str] = ()
    allow_schema_change: bool = False

    def __post_init__(self) -> None:
        if self.mode not in _WRITE_MODES:
            raise ContractError(
                f"TableWrite({self.table!r}): mode {self.mode!r} is not one of {list(_WRITE_MODES)}."
            )
        if self.mode == "replace_partitions" and not self.partition_values:
            raise ContractError(
                f"TableWrite({self.table!r}): replace_partitions needs non-empty partition_values "
                "(use overwrite to replace the whole table)."
            )
        if self.mode != "replace_partitions" and self.partition_values is not None:
            raise ContractError(
                f"TableWrite({self.table!r}): partition_values is only valid with replace_partitions."
            )
        if isinstance(self.partition_by, str):
            object.__setattr__(self, "partition_by", (self.partition_by,))
        else:
            object.__setattr__(self, "partition_by", tuple(self.partition_by))
        if self.partition_values is not None:
            object.__setattr__(self, "partition_values", dict(self.partition_values))


@dataclass
class PreparedWrite:
    """A write after the guard: its location, the table state it was checked against, its schema plan."""

    location: Location
    write: TableWrite
    base_version: int | None
    plan: SchemaPlan
    wanted: dict[str, object] | None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def table(self) -> str:
        return self.write.table


def prepare_write(
    location: Location,
    write: TableWrite,
    base_version: int | None,
    table_schema: T.StructType | None,
    table_partition_by: Sequence[str],
) -> PreparedWrite:
    """Run the schema guard and type the replace_partitions values (no Spark job)."""
    asked = tuple(write.partition_by)
    if table_schema is None and write.mode == "replace_partitions" and not asked:
        asked = tuple(write.partition_values or {})
    plan = plan_schema(
        write.table,
        table_schema,
        table_partition_by,
        write.df.schema,
        write.mode,
        asked,
        write.allow_schema_change,
    )
    wanted = None
    if write.mode == "replace_partitions":
        wanted = coerce_partition_filter(
            write.table, plan.target, plan.partition_by, write.partition_values or {}, "partition_values"
        )
    return PreparedWrite(location, write, base_version, plan, wanted)


def quote_column(name: str) -> str:
    """Backtick-quote a column name for ``F.col``/SQL (dots and spaces are literal)."""
    return "`" + name.replace("`", "``") + "`"


def shape_frame(df: DataFrame, plan: SchemaPlan) -> DataFrame:
    """The DataFrame's columns in the target schema's order; columns it lacks become typed nulls."""
    have = {f.name for f in df.schema.fields}
    cols: list[Column] = [
        F.col(quote_column(f.name)) if f.name in have else F.lit(None).cast(f.dataType).alias(f.name)
        for f in plan.target.fields
    ]
    return df.select(*cols)


def check_unique_tables(writes: Sequence[TableWrite]) -> None:
    seen: set[str] = set()
    for w in writes:
        if w.table in seen:
            raise ContractError(
                f"write_all got table {w.table!r} twice; combine its DataFrames into one write."
            )
        seen.add(w.table)


class Backend(Protocol):
    """What :class:`DeltaTables` needs from a backend (``pulsar_model.tables.delta_io``)."""

    name: str

    def exists(self, location: Location) -> bool: ...
    def version(self, location: Location) -> int | None: ...
    def table_schema(self, location: Location) -> tuple[T.StructType, tuple[str, ...]] | None: ...
    def create(
        self, location: Location, schema: T.StructType, partition_by: tuple[str, ...], description: str | None
    ) -> None: ...
    def read(
        self, location: Location, version: int | None, partition_filter: Mapping[str, object] | None
    ) -> DataFrame: ...
    def write_all(self, writes: Sequence[tuple[Location, TableWrite]]) -> dict[str, int]: ...
    def history(self, location: Location) -> list[dict[str, Any]]: ...
    def count_rows(self, location: Location, partition_filter: Mapping[str, object] | None) -> int: ...
    def partition_values(self, location: Location, column: str) -> list[object]: ...
    def restore(self, location: Location, version: int) -> int: ...


# ----------------------------------------------------------------------------------------------------
# Backend selection
# ----------------------------------------------------------------------------------------------------


def delta_spark_version() -> str:
    """Version of the installed delta-spark Python package (the matching jar version)."""
    try:
        return importlib.metadata.version("delta-spark")
    except importlib.metadata.PackageNotFoundError:
        return FALLBACK_DELTA_SPARK_VERSION


def connector_hint() -> str:
    version = delta_spark_version()
    return (
        "Add Delta Lake's Spark connector to the session: spark-submit --packages "
        f"io.delta:delta-spark_{SCALA_BINARY_VERSION}:{version} "
        "--conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension "
        "--conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog "
        f"(offline: --jars delta-spark_{SCALA_BINARY_VERSION}-{version}.jar,delta-storage-{version}.jar), "
        "or run on Databricks, where Delta is built in. Without the connector use backend='bridge' "
        "(or 'auto'), which commits through the deltalake (delta-rs) package."
    )


def delta_connector_available(spark: Any) -> bool:
    """True when the Delta Spark connector's classes load in this session's JVM.

    Classic sessions: ``Class.forName("io.delta.tables.DeltaTable")`` through the context class
    loader (``--packages``/``--jars`` add to it). Spark Connect sessions have no JVM handle: there the
    connector is assumed present on Databricks or when ``spark.sql.extensions`` names Delta's extension.
    """
    try:
        jvm = spark._jvm
    except Exception:  # Spark Connect sessions raise on JVM access
        jvm = None
    if jvm is not None:
        try:
            loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
            jvm.java.lang.Class.forName(_DELTA_CLASS, False, loader)
            return True
        except Exception:
            return False
    if os.environ.get("DATABRICKS_RUNTIME_VERSION"):
        return True
    try:
        extensions = spark.conf.get("spark.sql.extensions", "") or ""
    except Exception:
        return False
    return "DeltaSparkSessionExtension" in str(extensions)


def select_backend(spark: SparkSession | Any, requested: str) -> str:
    """Resolve ``auto`` | ``spark`` | ``bridge`` to the backend this session can run."""
    if requested not in ("auto", "spark", "bridge"):
        raise ConfigError(f"Unknown Delta backend {requested!r}; use 'auto', 'spark' or 'bridge'.")
    if requested == "bridge":
        return "bridge"
    available = delta_connector_available(spark)
    if requested == "spark" and not available:
        raise DeltaBackendUnavailableError(
            f"backend='spark' needs the Delta Lake Spark connector, but {_DELTA_CLASS} is not on this "
            f"session's classpath. {connector_hint()}"
        )
    return "spark" if available else "bridge"
