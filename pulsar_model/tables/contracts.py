"""Table contracts: the YAML files of ``schemas/`` as Spark and Arrow schemas.

``schemas/`` is the single source of truth for every Delta table (columns, types, nullability,
comments, partitioning, key). This module parses it without a SparkSession (the Spark DDL parser
needs the JVM, so type strings are parsed here) and offers:

* :func:`contract` / :func:`spark_schema` / :func:`arrow_schema` – the contract of one table;
* :func:`conform` – a transform that selects and casts a DataFrame to a contract (extra columns
  dropped, missing nullable columns added as nulls, missing non-nullable columns an error);
* :func:`check_schema` – compare a DataFrame schema with a contract (names, types, nullability);
* :func:`derive` – the SQL-friendly companion of a column (``derived_from`` in a contract): a position
  as the ``ledgerId:entryId`` text Pulsar prints, an epoch-millisecond point in time as a TIMESTAMP.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import pyarrow as pa
import yaml
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_model.errors import ContractError

#: Alias used in the contracts for Pulsar's (ledgerId, entryId) position (docs §0.1).
POSITION_DDL = "struct<ledger_id:bigint,entry_id:bigint>"
POSITION_TYPE = T.StructType(
    [T.StructField("ledger_id", T.LongType(), True), T.StructField("entry_id", T.LongType(), True)]
)

_PRIMITIVES: dict[str, T.DataType] = {
    "string": T.StringType(),
    "bigint": T.LongType(),
    "long": T.LongType(),
    "int": T.IntegerType(),
    "integer": T.IntegerType(),
    "smallint": T.ShortType(),
    "tinyint": T.ByteType(),
    "boolean": T.BooleanType(),
    "double": T.DoubleType(),
    "float": T.FloatType(),
    "timestamp": T.TimestampType(),
    "date": T.DateType(),
    "binary": T.BinaryType(),
}


def parse_type(text: str) -> T.DataType:
    """Parse a Spark DDL simple type string (``array<struct<a:bigint>>``, ``map<string,string>``...).

    ``position`` is accepted as an alias of :data:`POSITION_DDL`. Nested struct fields are nullable.
    """
    return _TypeParser(text).parse()


class _TypeParser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = re.findall(r"[A-Za-z_][A-Za-z0-9_]*|[<>,:]", text)
        self.i = 0

    def parse(self) -> T.DataType:
        result = self._type()
        if self.i != len(self.tokens):
            raise ContractError(f"Unexpected text after type in {self.text!r}")
        return result

    def _next(self) -> str:
        if self.i >= len(self.tokens):
            raise ContractError(f"Type string ended early: {self.text!r}")
        token: str = self.tokens[self.i]
        self.i += 1
        return token

    def _expect(self, token: str) -> None:
        got = self._next()
        if got != token:
            raise ContractError(f"Expected {token!r} but found {got!r} in type {self.text!r}")

    def _type(self) -> T.DataType:
        name = self._next().lower()
        if name in _PRIMITIVES:
            return _PRIMITIVES[name]
        if name == "position":
            return POSITION_TYPE
        if name == "array":
            self._expect("<")
            element = self._type()
            self._expect(">")
            return T.ArrayType(element, True)
        if name == "map":
            self._expect("<")
            key = self._type()
            self._expect(",")
            value = self._type()
            self._expect(">")
            return T.MapType(key, value, True)
        if name == "struct":
            self._expect("<")
            fields: list[T.StructField] = []
            while True:
                field_name = self._next()
                self._expect(":")
                fields.append(T.StructField(field_name, self._type(), True))
                sep = self._next()
                if sep == ">":
                    return T.StructType(fields)
                if sep != ",":
                    raise ContractError(f"Expected ',' or '>' but found {sep!r} in type {self.text!r}")
        raise ContractError(f"Unknown type {name!r} in {self.text!r}; use Spark DDL names such as bigint")


@dataclass(frozen=True)
class ColumnContract:
    """One column of a table contract."""

    name: str
    type_text: str
    nullable: bool
    comment: str
    derived_from: str | None = None
    """The column this one is computed from by :func:`derive` (writers never supply it)."""

    @property
    def data_type(self) -> T.DataType:
        return parse_type(self.type_text)


@dataclass(frozen=True)
class TableContract:
    """The contract of one Delta table, as written in ``schemas/<table>.yaml``."""

    table: str
    description: str
    grain: str
    partitioned_by: tuple[str, ...]
    key: tuple[str, ...]
    columns: tuple[ColumnContract, ...]

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def spark_schema(self) -> T.StructType:
        return T.StructType(
            [
                T.StructField(c.name, c.data_type, c.nullable, metadata={"comment": c.comment})
                for c in self.columns
            ]
        )

    @property
    def arrow_schema(self) -> pa.Schema:
        return pa.schema(
            [pa.field(c.name, spark_to_arrow(c.data_type), nullable=c.nullable) for c in self.columns]
        )

    def column(self, name: str) -> ColumnContract:
        for c in self.columns:
            if c.name == name:
                return c
        raise ContractError(f"Table {self.table!r} has no column {name!r}; columns: {self.column_names}")


def schemas_dir() -> Traversable:
    """Folder holding the contract YAML files (packaged copy first, then the source tree).

    A :class:`~importlib.resources.abc.Traversable`, not a ``Path``: when the package is imported from a
    zip (``spark-submit --py-files pulsar_analytics.zip``) the packaged copy lives inside the archive,
    which ``open()`` cannot read; ``joinpath(...).read_text()`` and ``iterdir()`` work in both cases.
    """
    try:
        packaged = resources.files("pulsar_model").joinpath("_schemas")
        if packaged.is_dir():
            return packaged
    except (ModuleNotFoundError, FileNotFoundError):  # pragma: no cover - defensive
        pass
    source = Path(__file__).resolve().parents[2] / "schemas"
    if source.is_dir():
        return source
    raise ContractError(
        "Cannot find the table contracts (schemas/*.yaml). Install pulsar-analytics from its source "
        "tree, a built wheel or the --py-files zip of tools/build_dist.py, which ship them as "
        "pulsar_model/_schemas."
    )


@functools.cache
def _common_groups() -> Mapping[str, list[dict[str, Any]]]:
    loaded: dict[str, list[dict[str, Any]]] = yaml.safe_load(
        schemas_dir().joinpath("_common.yaml").read_text(encoding="utf-8")
    )
    return loaded


@functools.cache
def contract(table: str) -> TableContract:
    """Return the contract of ``table`` (``schemas/<table>.yaml``)."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", table) or not schemas_dir().joinpath(f"{table}.yaml").is_file():
        raise ContractError(f"No contract for table {table!r}; known tables: {', '.join(table_names())}")
    raw = yaml.safe_load(schemas_dir().joinpath(f"{table}.yaml").read_text(encoding="utf-8"))
    cols: list[dict[str, Any]] = []
    for group in raw.get("include", []) or []:
        cols.extend(_common_groups()[group])
    cols.extend(raw.get("columns", []))
    columns = tuple(
        ColumnContract(
            name=c["name"],
            type_text=str(c["type"]),
            nullable=bool(c["nullable"]),
            comment=c.get("comment", ""),
            derived_from=c.get("derived_from"),
        )
        for c in cols
    )
    names = [c.name for c in columns]
    if len(set(names)) != len(names):
        raise ContractError(f"Contract {table!r} lists a column twice: {names}")
    for index, col in enumerate(columns):
        if col.derived_from is None:
            continue
        sources = {c.name: c for c in columns[:index] if c.derived_from is None}
        if col.derived_from not in sources:
            raise ContractError(
                f"Contract {table!r}: {col.name} is derived from {col.derived_from!r}, which is not a "
                "stored column listed before it"
            )
        source = sources[col.derived_from]
        _derivation(source.data_type, col.data_type, f"{table}.{col.name}")
        if col.nullable != source.nullable:
            raise ContractError(
                f"Contract {table!r}: {col.name} must have the nullability of {source.name}, its source"
            )
    result = TableContract(
        table=raw["table"],
        description=raw.get("description", ""),
        grain=raw.get("grain", ""),
        partitioned_by=tuple(raw.get("partitioned_by", []) or []),
        key=tuple(raw.get("key", []) or []),
        columns=columns,
    )
    for name in (*result.partitioned_by, *result.key):
        result.column(name)
    return result


def table_names() -> list[str]:
    """All tables that have a contract."""
    return sorted(
        p.name.removesuffix(".yaml")
        for p in schemas_dir().iterdir()
        if p.name.endswith(".yaml") and not p.name.startswith("_")
    )


def spark_schema(table: str) -> T.StructType:
    return contract(table).spark_schema


def arrow_schema(table: str) -> pa.Schema:
    return contract(table).arrow_schema


def spark_to_arrow(data_type: T.DataType) -> pa.DataType:
    """Arrow type of a Spark type (timestamps as UTC microseconds, as Spark writes them)."""
    simple: dict[type, pa.DataType] = {
        T.StringType: pa.string(),
        T.LongType: pa.int64(),
        T.IntegerType: pa.int32(),
        T.ShortType: pa.int16(),
        T.ByteType: pa.int8(),
        T.BooleanType: pa.bool_(),
        T.DoubleType: pa.float64(),
        T.FloatType: pa.float32(),
        T.TimestampType: pa.timestamp("us", tz="UTC"),
        T.DateType: pa.date32(),
        T.BinaryType: pa.binary(),
    }
    for spark_cls, arrow_type in simple.items():
        if isinstance(data_type, spark_cls):
            return arrow_type
    if isinstance(data_type, T.ArrayType):
        return pa.list_(spark_to_arrow(data_type.elementType))
    if isinstance(data_type, T.MapType):
        return pa.map_(spark_to_arrow(data_type.keyType), spark_to_arrow(data_type.valueType))
    if isinstance(data_type, T.StructType):
        return pa.struct([pa.field(f.name, spark_to_arrow(f.dataType), f.nullable) for f in data_type.fields])
    raise ContractError(f"No Arrow mapping for Spark type {data_type.simpleString()}")


def _strip_nullability(data_type: T.DataType) -> T.DataType:
    if isinstance(data_type, T.StructType):
        return T.StructType(
            [T.StructField(f.name, _strip_nullability(f.dataType), True) for f in data_type.fields]
        )
    if isinstance(data_type, T.ArrayType):
        return T.ArrayType(_strip_nullability(data_type.elementType), True)
    if isinstance(data_type, T.MapType):
        return T.MapType(_strip_nullability(data_type.keyType), _strip_nullability(data_type.valueType), True)
    return data_type


def schema_differences(actual: T.StructType, table: str, *, check_nullability: bool = True) -> list[str]:
    """Human-readable differences between ``actual`` and the contract of ``table`` (empty = equal)."""
    expected = contract(table)
    problems: list[str] = []
    actual_fields = {f.name: f for f in actual.fields}
    for col in expected.columns:
        field = actual_fields.get(col.name)
        if field is None:
            problems.append(f"missing column {col.name} ({col.type_text})")
            continue
        want = _strip_nullability(col.data_type)
        got = _strip_nullability(field.dataType)
        if want != got:
            problems.append(f"column {col.name} is {got.simpleString()}, contract says {want.simpleString()}")
        if check_nullability and field.nullable != col.nullable:
            problems.append(
                f"column {col.name} is {'nullable' if field.nullable else 'not nullable'}, "
                f"contract says {'nullable' if col.nullable else 'not nullable'}"
            )
    extra = [name for name in actual_fields if name not in set(expected.column_names)]
    problems.extend(f"extra column {name}" for name in extra)
    return problems


def check_schema(df: DataFrame, table: str, *, check_nullability: bool = True) -> None:
    """Raise :class:`ContractError` listing every difference between ``df`` and the contract."""
    problems = schema_differences(df.schema, table, check_nullability=check_nullability)
    if problems:
        raise ContractError(f"DataFrame does not match the contract of {table!r}: " + "; ".join(problems))


def conform(df: DataFrame, table: str, *, defaults: Mapping[str, Column] | None = None) -> DataFrame:
    """Select ``df``'s columns in contract order, cast to contract types; pure and lazy.

    Missing nullable columns become typed nulls (or ``defaults[name]``); a missing non-nullable column
    without a default raises :class:`ContractError`. Derived columns (``derived_from``) are always
    computed from their conformed source by :func:`derive`, whatever ``df`` carries under that name.
    Nullability is asserted in the schema only (``F.assert_true`` would cost a pass); writers check
    non-null columns via the contract.
    """
    expected = contract(table)
    available = set(df.columns)
    defaults = defaults or {}
    stored: dict[str, Column] = {}
    missing_required: list[str] = []
    for col in expected.columns:
        if col.derived_from is not None:
            continue
        data_type = col.data_type
        if col.name in available:
            stored[col.name] = F.col(col.name).cast(data_type)
        elif col.name in defaults:
            stored[col.name] = defaults[col.name].cast(data_type)
        elif col.nullable:
            stored[col.name] = F.lit(None).cast(data_type)
        else:
            missing_required.append(col.name)
    if missing_required:
        raise ContractError(
            f"Cannot conform to {table!r}: required columns missing: {', '.join(missing_required)}"
        )
    return df.select(*with_derived(table, stored))


def with_derived(table: str, stored: Mapping[str, Column]) -> list[Column]:
    """``table``'s columns in contract order: the ``stored`` expressions (by column name), each derived
    column computed from its source's expression by :func:`derive`. Columns neither in ``stored`` nor
    derived from a column in it are left out (callers that own some columns, e.g. the stage's)."""
    expected = contract(table)
    return [
        (
            stored[col.name]
            if col.derived_from is None
            else derive(stored[col.derived_from], expected.column(col.derived_from).data_type, col.data_type)
        ).alias(col.name)
        for col in expected.columns
        if col.name in stored or col.derived_from in stored
    ]


#: The TIMESTAMP range (0001-01-01 .. 9999-12-31 UTC) in epoch milliseconds: outside it a derived
#: timestamp is null instead of an ANSI overflow error on a hostile export value.
_TIMESTAMP_MS_RANGE = (-62_135_596_800_000, 253_402_300_799_999)


def _derivation(source: T.DataType, target: T.DataType, where: str) -> str:
    is_position = isinstance(source, T.StructType) and source.names[:2] == ["ledger_id", "entry_id"]
    if isinstance(target, T.StringType) and is_position:
        return "position_text"
    if isinstance(target, T.TimestampType) and isinstance(source, T.LongType):
        return "epoch_ms_timestamp"
    raise ContractError(
        f"{where}: cannot derive {target.simpleString()} from {source.simpleString()}; derived columns "
        "are a position as text (string from a ledger_id/entry_id struct) or an epoch-ms point in time "
        "as a timestamp (timestamp from bigint)"
    )


def derive(source: Column, source_type: T.DataType, target_type: T.DataType) -> Column:
    """The derived companion of ``source`` (docs §0.1, README "Reading the tables").

    * a position (``struct<ledger_id, entry_id[, batch_index]>``) as text: ``ledgerId:entryId`` as
      Pulsar's ``Position.toString()`` prints it, ``ledgerId:entryId:batchIndex`` for a batch-level
      position with a batch index (``-1``, a message id outside a batch, and null print ``L:E``); null
      when the position (or one of its two ids) is null;
    * an epoch-millisecond point in time as a TIMESTAMP (UTC); null when null or outside the
      TIMESTAMP range, so a hostile value cannot fail a write under ANSI mode.
    """
    kind = _derivation(source_type, target_type, "derive")
    if kind == "position_text":
        text = F.concat(source["ledger_id"].cast("string"), F.lit(":"), source["entry_id"].cast("string"))
        if isinstance(source_type, T.StructType) and "batch_index" in source_type.names:
            batch = source["batch_index"]
            text = F.concat(
                text, F.when(batch >= 0, F.concat(F.lit(":"), batch.cast("string"))).otherwise("")
            )
        return text
    low, high = _TIMESTAMP_MS_RANGE
    return F.when(source.between(low, high), F.timestamp_millis(source))


def with_contract_nullability(schema: T.StructType, table: str) -> T.StructType:
    """``schema`` with the top-level nullability of the contract (for createDataFrame in tests/writers)."""
    expected = {c.name: c.nullable for c in contract(table).columns}
    return T.StructType(
        [
            T.StructField(f.name, f.dataType, expected.get(f.name, f.nullable), f.metadata)
            for f in schema.fields
        ]
    )


def rows_to_arrow(
    rows: Iterable[Mapping[str, Any]], table: str, columns: Sequence[str] | None = None
) -> pa.Table:
    """Build an Arrow table with the contract's types from dict rows (missing keys become null)."""
    schema = arrow_schema(table)
    if columns is not None:
        schema = pa.schema([schema.field(name) for name in columns])
    materialised = list(rows)
    arrays = [pa.array([row.get(field.name) for row in materialised], type=field.type) for field in schema]
    return pa.Table.from_arrays(arrays, schema=pa.schema([f.with_nullable(True) for f in schema]))
