"""The table contracts of schemas/ load, convert and guard DataFrames (no drift between YAML and code)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql import types as T

from pulsar_model.errors import ContractError
from pulsar_model.tables import contracts

INPUT_TABLES = [
    "managed_ledgers",
    "ledgers",
    "cursors",
    "entries",
    "messages",
    "markers",
    "backlog_quotas",
    "consumers",
    "schema_versions",
    "quarantine",
    "run_log",
]


def test_contract_every_required_table_has_one():
    assert set(INPUT_TABLES) <= set(contracts.table_names())


@pytest.mark.parametrize("table", contracts.table_names())
def test_contract_is_complete(table):
    c = contracts.contract(table)
    assert c.description and c.grain and c.key
    for col in c.columns:
        assert col.comment, f"{table}.{col.name} has no comment"
        assert col.name == col.name.lower() and " " not in col.name
    assert c.spark_schema.names == c.column_names
    assert c.arrow_schema.names == c.column_names


@pytest.mark.parametrize("table", [t for t in INPUT_TABLES if t != "run_log"])
def test_contract_rows_carry_export_identity(table):
    names = contracts.contract(table).column_names
    assert {"cluster", "topic", "export_id", "export_date"} <= set(names)
    assert contracts.contract(table).partitioned_by == ("export_date",)


def test_parse_type_position_alias_and_nesting():
    parsed = contracts.parse_type("array<struct<lower:position,upper:position>>")
    assert parsed == T.ArrayType(
        T.StructType(
            [
                T.StructField("lower", contracts.POSITION_TYPE, True),
                T.StructField("upper", contracts.POSITION_TYPE, True),
            ]
        ),
        True,
    )
    assert contracts.parse_type("map<string,bigint>") == T.MapType(T.StringType(), T.LongType(), True)
    # a field *named* position is a name, not the alias
    named = contracts.parse_type("struct<cluster:string,position:position>")
    assert isinstance(named, T.StructType) and named["position"].dataType == contracts.POSITION_TYPE


@pytest.mark.parametrize("bad", ["struct<a bigint>", "array<bigint", "decimalish", "map<string>"])
def test_parse_type_rejects_bad_text(bad):
    with pytest.raises(ContractError):
        contracts.parse_type(bad)


def test_cursor_contract_matches_design_api_columns():
    cursors = contracts.contract("cursors")
    assert cursors.column("mark_delete_position").data_type == contracts.POSITION_TYPE
    idm = cursors.column("individually_deleted").data_type
    assert isinstance(idm, T.ArrayType) and isinstance(idm.elementType, T.StructType)
    assert idm.elementType.names == ["lower", "upper"]
    for name in ("cursor_kind", "is_durable", "is_replicated", "cursor_order"):
        assert not cursors.column(name).nullable


def test_arrow_schema_types():
    schema = contracts.arrow_schema("entries")
    assert schema.field("publish_time").type == pa.timestamp("us", tz="UTC")
    assert schema.field("position").type == pa.struct([("ledger_id", pa.int64()), ("entry_id", pa.int64())])
    assert schema.field("replicate_to").type == pa.list_(pa.string())


def test_unknown_table_names_known_ones():
    with pytest.raises(ContractError, match="known tables"):
        contracts.contract("legers")


def test_conform_and_check_schema(spark):
    df = spark.createDataFrame(
        [("c", "t", "e1", "2026-11-21", 7, 3, 300, True, "extra")],
        "cluster string, topic string, export_id string, export_date string, ledger_id int, entries long, "
        "size_bytes long, offloaded boolean, junk string",
    )
    from pyspark.sql import functions as F

    out = contracts.conform(df, "ledgers", defaults={"is_current": F.lit(False), "ledger_order": F.lit(0)})
    contracts.check_schema(out, "ledgers", check_nullability=False)
    row = out.collect()[0]
    assert row.ledger_id == 7 and row.closed_at is None and str(row.export_date) == "2026-11-21"
    with pytest.raises(ContractError, match="required columns missing: is_current, ledger_order"):
        contracts.conform(df, "ledgers")
    with pytest.raises(ContractError, match="extra column junk"):
        contracts.check_schema(df, "ledgers")
