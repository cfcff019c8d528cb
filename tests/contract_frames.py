"""Test frames typed by the table contracts (``pulsar_model/_schemas``), not by re-declared DDL strings.

A golden case names only the columns it needs; their types come from the contract of the table the frame
stands for, so a type changed in a contract changes every test frame with it::

    ledgers = contract_frame(spark, "ledgers", ["cluster", "topic", "ledger_id", "entries", "size_bytes"],
                             [("c", "t", 1, 5, 500)])
    expected = contract_frame(spark, "cursor_backlog", ["topic", "cursor_name", "backlog_entries"], rows)
    assert_df_equality(got.select(*expected.columns), expected, ignore_row_order=True, ignore_nullable=True)

Every field is nullable: a case leaves a column null when the scenario has no value for it, which is
what the transforms must tolerate (an output's own nullability is checked by ``check_schema``).
Columns that are not in the contract (a transform's request columns such as ``request_id``) are given
with an explicit type: ``("request_id", "string")``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from pulsar_model.tables.contracts import contract, parse_type

Column = str | tuple[str, str]


def contract_schema(table: str, columns: Sequence[Column]) -> T.StructType:
    """The contract types of ``columns`` of ``table``, in the given order, every field nullable.

    A column given as ``(name, type)`` is not looked up (types in the contracts' grammar: ``position``,
    ``array<struct<lower:position,upper:position>>``...).
    """
    table_contract = contract(table)
    fields = []
    for column in columns:
        if isinstance(column, tuple):
            name, data_type = column[0], parse_type(column[1])
        else:
            name, data_type = column, table_contract.column(column).data_type
        fields.append(T.StructField(name, data_type, True))
    return T.StructType(fields)


def contract_frame(
    spark: SparkSession, table: str, columns: Sequence[Column], rows: Iterable[Sequence[Any]]
) -> DataFrame:
    """A DataFrame of ``rows`` (tuples in ``columns`` order) typed by :func:`contract_schema`.

    Positions are ``(ledger_id, entry_id)`` tuples, ranges ``((l, e), (l, e))``, as Spark builds structs.
    """
    return spark.createDataFrame([tuple(r) for r in rows], contract_schema(table, columns))


#: The columns of a managed-ledger state the position transforms read (docs §0.2): the ledger list, the
#: topic's managed-ledger row and its cursors; a golden file adds what its area reads besides.
LEDGER_STATE: tuple[str, ...] = ("cluster", "topic", "ledger_id", "entries", "size_bytes")
MANAGED_LEDGER_STATE: tuple[str, ...] = (
    "cluster",
    "topic",
    "current_ledger_id",
    "current_ledger_entries",
    "current_ledger_size_bytes",
    "last_confirmed_entry",
    "total_size_bytes",
)
CURSOR_STATE: tuple[str, ...] = (
    "cluster",
    "topic",
    "cursor_name",
    "cursor_order",
    "is_durable",
    "mark_delete_position",
    "individually_deleted",
)
