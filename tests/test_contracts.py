"""The table contracts of schemas/ load, convert and guard DataFrames (no drift between YAML and code)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql import functions as F
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


def test_conform_derives_position_text_and_timestamps_from_their_sources(spark):
    """``transactions`` as a stage hands it over (derived columns absent or stale): the writer's conform
    adds ``first_position_str`` (``L:E``, ``L:-1`` kept, null for a null position) and
    ``first_publish_time`` (the broker's epoch ms as a TIMESTAMP; null outside the TIMESTAMP range
    instead of an ANSI overflow error)."""
    c = contracts.contract("transactions")
    assert c.column("first_position_str").derived_from == "first_position"
    assert c.column("first_publish_time").derived_from == "first_publish_time_ms"
    required = [col.name for col in c.columns if col.derived_from is None and not col.nullable]
    schema = T.StructType(
        [T.StructField(n, c.column(n).data_type, True) for n in required]
        + [
            T.StructField("first_position", contracts.POSITION_TYPE, True),
            T.StructField("first_publish_time_ms", T.LongType(), True),
            T.StructField("first_position_str", T.StringType(), True),
        ]
    )
    cases = [((66, 136), 1_700_000_000_123), ((5, -1), 0), (None, None), ((7, None), 9 * 10**18)]
    rows = [(None,) * len(required) + (pos, ms, "stale") for pos, ms in cases]
    out = contracts.conform(spark.createDataFrame(rows, schema), "transactions")
    assert out.schema["first_publish_time"].dataType == T.TimestampType()
    got = out.select("first_position_str", F.unix_millis("first_publish_time").alias("back_to_ms")).collect()
    assert [tuple(r) for r in got] == [("66:136", 1_700_000_000_123), ("5:-1", 0), (None, None), (None, None)]


def test_batch_position_text_carries_the_batch_index_when_there_is_one(spark):
    batch = contracts.parse_type("struct<ledger_id:bigint,entry_id:bigint,batch_index:int>")
    rows = [((3, 4, 2),), ((3, 4, None),), ((3, 4, -1),), ((3, 4, 0),)]
    df = spark.createDataFrame(rows, T.StructType([T.StructField("p", batch)]))
    out = df.select(contracts.derive(F.col("p"), batch, T.StringType()).alias("s"))
    assert [r.s for r in out.collect()] == ["3:4:2", "3:4", "3:4", "3:4:0"]


def test_contract_derivations_are_checked_when_loaded():
    with pytest.raises(ContractError, match="cannot derive"):
        contracts._derivation(T.LongType(), T.StringType(), "t.c")


def test_every_output_position_and_ms_point_in_time_has_a_sql_friendly_companion():
    """Issue #26 item 8: positions also as ``L:E`` text, points in time as TIMESTAMPs, on every table an
    analytics stage writes (the input tables keep the export's shape; entries has ``publish_time``)."""
    inputs = set(INPUT_TABLES) | {"ingest_notes", "plan_requests"}
    missing = []
    for table in set(contracts.table_names()) - inputs:
        c = contracts.contract(table)
        derived = {col.derived_from for col in c.columns if col.derived_from}
        for col in c.columns:
            is_position = col.type_text == "position" or col.type_text.startswith("struct<ledger_id")
            is_instant = col.type_text == "bigint" and col.name.endswith(
                ("time_ms", "_at_ms", "started_ms", "timestamp_ms")
            )
            if (is_position or is_instant) and col.name not in derived:
                missing.append(f"{table}.{col.name}")
    assert not missing, missing
