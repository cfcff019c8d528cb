"""Schema guard and partition-value codec shared by both backends (driver-side, no Spark jobs)."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pyspark.sql import types as T

from pulsar_model.errors import ContractError, SchemaChangeError

WriteMode = Literal["append", "overwrite", "replace_partitions"]

#: Types the bridge can write as partition columns: their Spark folder-name form is already the Delta
#: partition-value string (timestamps would be formatted in the session time zone, floats are ambiguous).
WRITABLE_PARTITION_TYPES: tuple[type[T.DataType], ...] = (
    T.StringType,
    T.DateType,
    T.ByteType,
    T.ShortType,
    T.IntegerType,
    T.LongType,
    T.BooleanType,
)

#: Spark writes a null (or empty-string) partition value as this folder name.
HIVE_NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"

_SPARK_ESCAPE_RE = re.compile(r"%([0-9A-Fa-f]{2})")


def spark_to_delta_json(schema: T.StructType) -> str:
    """Delta's schemaString is Spark's StructType JSON; field metadata (comments) is kept."""
    return schema.json()


def delta_json_to_spark(schema_json: str) -> T.StructType:
    """Inverse of :func:`spark_to_delta_json`."""
    return T.StructType.fromJson(json.loads(schema_json))


def type_string(data_type: T.DataType) -> str:
    """A type's identity for the guard: names and types, nested included, nullability ignored."""
    return data_type.simpleString()


def with_nullable(schema: T.StructType) -> T.StructType:
    """``schema`` with every top-level field nullable (used for columns added by schema evolution)."""
    return T.StructType([T.StructField(f.name, f.dataType, True, f.metadata) for f in schema.fields])


@dataclass(frozen=True)
class SchemaDiff:
    """Difference between a table schema and an incoming DataFrame schema (names case-sensitive)."""

    missing: tuple[T.StructField, ...] = ()
    extra: tuple[T.StructField, ...] = ()
    changed: tuple[tuple[T.StructField, T.StructField], ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.missing or self.extra or self.changed)

    def describe(self) -> str:
        parts = []
        if self.missing:
            parts.append(
                "missing columns: " + ", ".join(f"{f.name} ({type_string(f.dataType)})" for f in self.missing)
            )
        if self.extra:
            parts.append(
                "extra columns: " + ", ".join(f"{f.name} ({type_string(f.dataType)})" for f in self.extra)
            )
        if self.changed:
            parts.append(
                "type changed: "
                + ", ".join(
                    f"{t.name}: {type_string(t.dataType)} -> {type_string(d.dataType)}"
                    for t, d in self.changed
                )
            )
        return "; ".join(parts)


def diff_schemas(table: T.StructType, incoming: T.StructType) -> SchemaDiff:
    """Compare column sets and types, ignoring column order, nullability and field metadata."""
    names = [f.name for f in incoming.fields]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ContractError(
            f"The DataFrame has duplicate column names {duplicates}; rename them before writing."
        )
    by_name = {f.name: f for f in incoming.fields}
    table_names = {f.name for f in table.fields}
    missing = tuple(f for f in table.fields if f.name not in by_name)
    extra = tuple(f for f in incoming.fields if f.name not in table_names)
    changed = tuple(
        (f, by_name[f.name])
        for f in table.fields
        if f.name in by_name and type_string(f.dataType) != type_string(by_name[f.name].dataType)
    )
    return SchemaDiff(missing, extra, changed)


@dataclass(frozen=True)
class SchemaPlan:
    """What a write does to the table's metadata and how the DataFrame must be shaped.

    ``target`` is the schema recorded in the log after the write (the TABLE's schema unless a change was
    allowed); ``fill_null`` lists table columns the DataFrame lacks and that are written as nulls;
    ``added`` lists columns appended to the table schema (schema evolution of an append);
    ``replace_schema`` is set when an overwrite records a new schema; ``repartition`` when it also
    changes the partition columns.
    """

    target: T.StructType
    partition_by: tuple[str, ...]
    create: bool
    fill_null: tuple[T.StructField, ...] = ()
    added: tuple[T.StructField, ...] = ()
    replace_schema: bool = False
    repartition: bool = False
    diff: SchemaDiff = field(default_factory=SchemaDiff)


def check_partition_columns(table: str, schema: T.StructType, partition_by: Sequence[str]) -> tuple[str, ...]:
    """Validate partition columns of a table the bridge or the connector will create or write."""
    cols = tuple(partition_by)
    by_name = {f.name: f for f in schema.fields}
    if len(set(cols)) != len(cols):
        raise ContractError(f"Table {table!r}: duplicate partition columns {list(cols)}.")
    for col in cols:
        if col not in by_name:
            raise ContractError(
                f"Table {table!r}: partition column {col!r} is not a column of the schema "
                f"({sorted(by_name)})."
            )
        if not isinstance(by_name[col].dataType, WRITABLE_PARTITION_TYPES):
            raise ContractError(
                f"Table {table!r}: partition column {col!r} has type {type_string(by_name[col].dataType)}; "
                "partition columns must be string, date, integral or boolean."
            )
    if cols and len(cols) == len(schema.fields):
        raise ContractError(
            f"Table {table!r}: every column is a partition column; keep at least one data column."
        )
    return cols


def plan_schema(
    table: str,
    table_schema: T.StructType | None,
    table_partition_by: Sequence[str],
    incoming: T.StructType,
    mode: WriteMode,
    partition_by: Sequence[str],
    allow_schema_change: bool,
) -> SchemaPlan:
    """Apply the schema-change guard (module docstring) and return the write's :class:`SchemaPlan`."""
    asked = tuple(partition_by)
    if table_schema is None:
        return SchemaPlan(incoming, check_partition_columns(table, incoming, asked), create=True)
    current = tuple(table_partition_by)
    hint = (
        "If the change is intended, pass allow_schema_change=True (overwrite may replace the schema; "
        "append and replace_partitions may only add nullable columns)."
    )
    diff = diff_schemas(table_schema, incoming)
    repartition = bool(asked) and asked != current
    if diff.empty and not repartition:
        return SchemaPlan(table_schema, current, create=False)
    if not allow_schema_change:
        parts = [diff.describe()] if not diff.empty else []
        if repartition:
            parts.append(f"partition columns {list(current)} -> {list(asked)}")
        raise SchemaChangeError(
            f"Write to table {table!r} would change its schema: {'; '.join(parts)}. {hint}"
        )
    if mode == "overwrite":
        new_parts = asked if asked else current
        return SchemaPlan(
            incoming,
            check_partition_columns(table, incoming, new_parts),
            create=False,
            replace_schema=True,
            repartition=new_parts != current,
            diff=diff,
        )
    problems = []
    if repartition:
        problems.append(
            f"partition columns {list(current)} -> {list(asked)} (only overwrite can repartition)"
        )
    if diff.changed:
        problems.append(
            "type changed: "
            + ", ".join(
                f"{t.name}: {type_string(t.dataType)} -> {type_string(d.dataType)}" for t, d in diff.changed
            )
            + " (only overwrite(..., allow_schema_change=True) can change a column's type)"
        )
    required = [f for f in diff.missing if not f.nullable or f.name in current]
    if required:
        problems.append(
            "missing non-nullable or partition columns: "
            + ", ".join(f.name for f in required)
            + " (cannot fill them)"
        )
    if problems:
        raise SchemaChangeError(
            f"{mode} to table {table!r} cannot apply this schema change: {'; '.join(problems)}."
        )
    added = tuple(T.StructField(f.name, f.dataType, True, f.metadata) for f in diff.extra)
    target = T.StructType(list(table_schema.fields) + list(added))
    return SchemaPlan(target, current, create=False, fill_null=diff.missing, added=added, diff=diff)


# ----------------------------------------------------------------------------------------------------
# Partition values
# ----------------------------------------------------------------------------------------------------


def spark_folder_unescape(text: str) -> str:
    """Undo Spark's partition-folder escaping (``%XX`` for one ASCII character; ``%`` itself is escaped)."""
    return _SPARK_ESCAPE_RE.sub(lambda m: chr(int(m.group(1), 16)), text)


def _parse_timestamp(text: str) -> dt.datetime:
    value = text.strip().replace("T", " ")
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    parsed = dt.datetime.fromisoformat(value)
    return parsed.replace(tzinfo=dt.UTC) if parsed.tzinfo is None else parsed.astimezone(dt.UTC)


def parse_partition_value(text: object, data_type: T.DataType) -> object:
    """Typed Python value of a logged partition value (``None`` stays ``None``).

    Accepts the Delta log's string form and the already-typed values delta-rs returns from
    ``get_add_actions`` (dates as ``date``, timestamps as aware ``datetime`` ...).
    """
    if text is None:
        return None
    if not isinstance(text, str):
        if isinstance(data_type, T.TimestampType) and isinstance(text, dt.datetime):
            return text.replace(tzinfo=dt.UTC) if text.tzinfo is None else text.astimezone(dt.UTC)
        return text
    if isinstance(data_type, T.StringType):
        return text
    if isinstance(data_type, T.BooleanType):
        return text.lower() == "true"
    if isinstance(data_type, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        return int(text)
    if isinstance(data_type, T.DateType):
        return dt.date.fromisoformat(text)
    if isinstance(data_type, T.TimestampType):
        return _parse_timestamp(text)
    if isinstance(data_type, T.TimestampNTZType):
        return dt.datetime.fromisoformat(text.replace("T", " "))
    if isinstance(data_type, T.DecimalType):
        return decimal.Decimal(text)
    if isinstance(data_type, (T.FloatType, T.DoubleType)):
        return float(text)
    if isinstance(data_type, T.BinaryType):
        return text.encode("utf-8")
    raise ContractError(f"Unsupported partition column type {type_string(data_type)} in a Delta log.")


def coerce_partition_value(table: str, column: str, value: object, data_type: T.DataType) -> object:
    """Typed value of a caller-supplied partition value (ISO strings accepted for dates/timestamps)."""
    if value is None:
        return None
    try:
        if isinstance(data_type, T.StringType) and isinstance(value, str):
            return value
        if isinstance(data_type, T.BooleanType) and isinstance(value, bool):
            return value
        if isinstance(data_type, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)) and not isinstance(
            value, bool
        ):
            if isinstance(value, int):
                return value
            if isinstance(value, str):
                return int(value)
        if isinstance(data_type, T.DateType):
            if isinstance(value, dt.datetime):
                raise TypeError("datetime for a date column")
            if isinstance(value, dt.date):
                return value
            if isinstance(value, str):
                return dt.date.fromisoformat(value)
        if isinstance(data_type, (T.TimestampType, T.TimestampNTZType)) and isinstance(
            value, (dt.datetime, str)
        ):
            if isinstance(value, str):
                return parse_partition_value(value, data_type)
            if isinstance(data_type, T.TimestampType):
                return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)
            return value
        if not isinstance(data_type, (T.StringType, T.BooleanType)) and isinstance(value, (int, float, str)):
            return parse_partition_value(str(value), data_type)
    except (TypeError, ValueError, decimal.InvalidOperation) as exc:
        raise ContractError(
            f"Table {table!r}: partition value {column}={value!r} does not fit type "
            f"{type_string(data_type)}: {exc}."
        ) from exc
    raise ContractError(
        f"Table {table!r}: partition value {column}={value!r} ({type(value).__name__}) does not fit "
        f"column type {type_string(data_type)}; pass a {type_string(data_type)} value."
    )


def coerce_partition_filter(
    table: str,
    schema: T.StructType,
    partition_by: Sequence[str],
    values: Mapping[str, object],
    what: str,
) -> dict[str, object]:
    """Validate ``values`` (keys must be partition columns) and return them typed."""
    by_name = {f.name: f.dataType for f in schema.fields}
    unknown = [k for k in values if k not in partition_by]
    if unknown:
        raise ContractError(
            f"Table {table!r}: {what} names {unknown}, which are not partition columns; "
            f"the table is partitioned by {list(partition_by)}."
        )
    return {k: coerce_partition_value(table, k, v, by_name[k]) for k, v in values.items()}


def matches(values: Mapping[str, object], wanted: Mapping[str, object]) -> bool:
    """Equality of typed partition values on the keys of ``wanted`` (``None`` matches null)."""
    return all(values.get(k) == v for k, v in wanted.items())


def delta_partition_string(value: object) -> str | None:
    """Delta log string of a typed partition value of a bridge-writable type (None stays None)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.date):
        return value.isoformat()
    return str(value)


def format_partition_value(value: object) -> str:
    """Human-readable partition value for messages and commit metadata."""
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    return repr(value) if not isinstance(value, str) else value
