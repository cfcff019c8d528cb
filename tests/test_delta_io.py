"""Tests of pulsar_model.tables.delta_io (bridge backend; backend selection for the connector).

Tables are written under ``tmp_path``. Every Delta table is read back by Spark and, where the test is
about the on-disk format, by delta-rs, Polars and DuckDB too.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import os
import re
import time
from functools import reduce
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_model.errors import (
    ConcurrentWriteError,
    ConfigError,
    ContractError,
    DeltaBackendUnavailableError,
    SchemaChangeError,
    TableNotFoundError,
    UnsafePathError,
    UnsupportedTableFeatureError,
)
from pulsar_model.tables.delta_io import (
    STAGING_DIR,
    DeltaTables,
    TableWrite,
    _bridge,
    delta_connector_available,
)
from pulsar_model.tables.delta_io._bridge import BridgeBackend
from pulsar_model.tables.delta_io._connector import replace_where_predicate
from pulsar_model.tables.delta_io._schema import coerce_partition_value, spark_folder_unescape
from pulsar_model.tables.delta_io._stats import MAX_STRING_STAT_CHARS
from tests.spark_jobs import spark_jobs

POSITION = T.StructType([T.StructField("ledger_id", T.LongType()), T.StructField("entry_id", T.LongType())])
EVENTS = T.StructType(
    [
        T.StructField("topic", T.StringType(), False),
        T.StructField("seq", T.LongType(), False),
        T.StructField("published_at", T.TimestampType()),
        T.StructField("position", POSITION),
        T.StructField("acked", T.ArrayType(POSITION)),
        T.StructField("label", T.StringType()),
    ]
)
#: Partition values that Spark, delta-rs and Hadoop each escape differently.
SPECIAL_LABELS = ["a b", "x/y=z", "100%", "c:d{e}[*]?", "ü+q", None]

DAILY = T.StructType(
    [
        T.StructField("export_date", T.DateType(), False),
        T.StructField("cluster", T.StringType(), False),
        T.StructField("topic", T.StringType(), False),
        T.StructField("entries", T.LongType(), False),
    ]
)
D1, D2, D3 = dt.date(2024, 5, 1), dt.date(2024, 5, 2), dt.date(2024, 5, 3)


@pytest.fixture
def tables(spark: SparkSession, tmp_path: Path) -> DeltaTables:
    return DeltaTables(spark, str(tmp_path / "warehouse"))


def _events(spark: SparkSession) -> DataFrame:
    ts = dt.datetime(2024, 5, 1, 12, 30, 45, 123456)
    rows = [
        (
            "persistent://t/ns/a",
            i,
            ts + dt.timedelta(seconds=i) if i % 3 else None,
            (i, i * 10) if i % 4 else None,
            [(i, 0), (i, 1)] if i % 2 else ([] if i % 5 == 0 else None),
            label,
        )
        for i, label in enumerate(SPECIAL_LABELS)
    ]
    rows.append(("persistent://t/ns/b", 99, ts, (1, -1), [(1, -1)], "a b"))
    return spark.createDataFrame(rows, EVENTS)


def _daily(spark: SparkSession, rows: list[tuple[dt.date, str, str, int]]) -> DataFrame:
    return spark.createDataFrame(rows, DAILY)


def _plain(value: Any) -> Any:
    """Engine-neutral form of a value: structs -> tuples, aware timestamps -> naive UTC."""
    if isinstance(value, dict):
        return tuple(_plain(v) for v in value.values())
    if hasattr(value, "asDict"):
        return tuple(_plain(v) for v in value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    return value


def _rows(records: list[Any], columns: list[str]) -> list[tuple[Any, ...]]:
    out = []
    for record in records:
        if isinstance(record, dict) or hasattr(record, "asDict"):
            out.append(tuple(_plain(record[c]) for c in columns))
        else:
            out.append(tuple(_plain(v) for v in record))
    return sorted(out, key=repr)


def _spark_rows(df: DataFrame) -> list[tuple[Any, ...]]:
    return _rows(df.collect(), df.columns)


def _data_files(root: str) -> set[str]:
    """Every Parquet file under a table root outside ``_delta_log`` and staging."""
    return {
        os.path.join(d, f)
        for d, _dirs, files in os.walk(root)
        if "_delta_log" not in d and STAGING_DIR not in d
        for f in files
        if f.endswith(".parquet")
    }


def _staging_folders(root: str) -> list[str]:
    parent = os.path.join(root, STAGING_DIR)
    return os.listdir(parent) if os.path.isdir(parent) else []


def _duckdb_extension() -> str:
    spec = importlib.util.find_spec("duckdb_ext")
    assert spec is not None and spec.submodule_search_locations
    base = next(iter(spec.submodule_search_locations))
    return os.path.join(base, "extensions", "v1.4.4", "linux_amd64", "delta.duckdb_extension")


# ----------------------------------------------------------------------------------------------------
# Backend selection, names and paths (no Spark jobs)
# ----------------------------------------------------------------------------------------------------


def test_backend_auto_picks_bridge_without_connector_jars(spark: SparkSession, tmp_path: Path) -> None:
    assert not delta_connector_available(spark)
    assert DeltaTables(spark, str(tmp_path)).backend == "bridge"
    assert DeltaTables(spark, str(tmp_path), backend="bridge").backend == "bridge"


def test_backend_spark_without_jars_says_what_to_add(spark: SparkSession, tmp_path: Path) -> None:
    with pytest.raises(DeltaBackendUnavailableError) as err:
        DeltaTables(spark, str(tmp_path), backend="spark")
    message = str(err.value)
    assert "--packages io.delta:delta-spark_2.13:" in message
    assert "Databricks" in message and "backend='bridge'" in message
    with pytest.raises(ConfigError, match="'delta'"):
        DeltaTables(spark, str(tmp_path), backend="delta")  # type: ignore[arg-type]


def test_delta_connector_available_detects_connect_sessions(monkeypatch: pytest.MonkeyPatch) -> None:
    class ConnectSession:  # Spark Connect: no JVM handle, only the session conf
        def __init__(self, extensions: str) -> None:
            self.conf = {"spark.sql.extensions": extensions}

        @property
        def _jvm(self) -> None:
            raise AttributeError("no JVM in Spark Connect")

    monkeypatch.delenv("DATABRICKS_RUNTIME_VERSION", raising=False)
    assert delta_connector_available(ConnectSession("io.delta.sql.DeltaSparkSessionExtension"))
    assert not delta_connector_available(ConnectSession(""))
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "15.4")
    assert delta_connector_available(ConnectSession(""))


def test_location_rejects_unsafe_names_and_paths(spark: SparkSession, tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    tables = DeltaTables(spark, str(warehouse), {"mapped": str(tmp_path / "elsewhere"), "inside": "sub/dir"})
    assert tables.location("ledgers") == str(warehouse / "ledgers")
    assert tables.location("mapped") == str(tmp_path / "elsewhere")  # explicit mappings may point anywhere
    assert tables.location("inside") == str(warehouse / "sub" / "dir")
    for bad in ["../etc", "Ledgers", "a/b", "", "1abc", "a" * 64, "a.b", "a-b", "a\x00b"]:
        with pytest.raises(UnsafePathError, match="must match"):
            tables.location(bad)
    with pytest.raises(UnsafePathError, match="must match"):
        tables.read("../../etc")
    (warehouse / "escaped").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(UnsafePathError, match="escapes the warehouse root"):
        tables.location("escaped")
    with pytest.raises(UnsafePathError, match="escapes the warehouse root"):
        DeltaTables(spark, str(warehouse), {"up": "../other"}).location("up")
    with pytest.raises(UnsafePathError, match="must match"):
        DeltaTables(spark, str(warehouse), {"Bad Name": "/x"})
    with pytest.raises(UnsafePathError, match="non-empty"):
        DeltaTables(spark, str(warehouse), {"empty": ""})
    remote = DeltaTables(spark, "s3://bucket/wh")
    assert remote.location("ledgers") == "s3://bucket/wh/ledgers"
    with pytest.raises(ConfigError, match="POSIX path"):
        remote.exists("ledgers")


def test_partition_value_codec_units() -> None:
    assert spark_folder_unescape("x%2Fy%3Dz%2520") == "x/y=z%20"
    assert spark_folder_unescape("ü+q") == "ü+q"
    assert coerce_partition_value("t", "d", "2024-05-01", T.DateType()) == D1
    assert coerce_partition_value("t", "n", "7", T.LongType()) == 7
    with pytest.raises(ContractError, match="d=datetime"):
        coerce_partition_value("t", "d", dt.datetime(2024, 5, 1), T.DateType())
    with pytest.raises(ContractError, match="n='x'"):
        coerce_partition_value("t", "n", "x", T.LongType())
    predicate = replace_where_predicate(
        {"export_date": D1, "cluster": "it's", "flag": True, "n": 3, "k": None}
    )
    assert predicate == (
        "`export_date` = DATE'2024-05-01' AND `cluster` = 'it\\'s' AND `flag` = true AND `n` = 3 "
        "AND `k` IS NULL"
    )


# ----------------------------------------------------------------------------------------------------
# On-disk format: real Delta tables
# ----------------------------------------------------------------------------------------------------


def test_append_writes_delta_table_read_identically_by_spark_deltalake_polars_duckdb(
    spark: SparkSession, tables: DeltaTables
) -> None:
    import duckdb
    import polars as pl

    tables.create("events", EVENTS, ["label"], description="Events for the interop test")
    assert tables.append("events", _events(spark)) == 1
    path = tables.location("events")
    columns = EVENTS.fieldNames()
    expected = _spark_rows(_events(spark))

    assert _spark_rows(tables.read("events")) == expected
    delta = DeltaTable(path)
    assert delta.metadata().description == "Events for the interop test"
    assert delta.metadata().partition_columns == ["label"]
    arrow = delta.to_pyarrow_table(filesystem=pafs.SubTreeFileSystem(path, pafs.LocalFileSystem()))
    assert _rows(arrow.to_pylist(), columns) == expected
    assert _rows(pl.read_delta(path).to_dicts(), columns) == expected
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute(f"LOAD '{_duckdb_extension()}'")
    cols = ", ".join(columns)
    assert _rows(con.execute(f"SELECT {cols} FROM delta_scan('{path}')").fetchall(), columns) == expected
    # statistics from the Parquet footers: exact microsecond bounds let engines skip files correctly
    cutoff = "TIMESTAMPTZ '2024-05-01 12:30:49.123455+00'"
    late = con.execute(f"SELECT seq FROM delta_scan('{path}') WHERE published_at > {cutoff}").fetchall()
    assert sorted(late) == [(4,), (5,)]  # seq 4 is alone in its file: its max bound must be exact
    stats = pa.table(delta.get_add_actions(flatten=True)).to_pylist()
    assert sum(s["num_records"] for s in stats) == len(expected)
    assert all(s["num_records"] and s["min.seq"] is not None and s["null_count.seq"] == 0 for s in stats)
    # special characters round-trip through partition pruning too
    pruned = [
        tables.read("events", partition_filter={"label": label}).select("label", F.lit(i).alias("asked"))
        for i, label in enumerate(SPECIAL_LABELS)
    ]
    got = {(r.asked, r.label) for r in reduce(DataFrame.unionByName, pruned).collect()}  # one Spark job
    assert got == set(enumerate(SPECIAL_LABELS))
    assert _staging_folders(path) == []


def test_read_handles_glob_and_unicode_characters_in_the_table_path(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Spark globs read paths and percent-encodes _metadata.file_path, which keys the partition values
    tables = DeltaTables(spark, str(tmp_path / "ware house [1] {a,b} ü +"))
    rows = [(D1, "c1", "t1", 1), (D2, "c[2]*", "t2", 2), (D2, "c1", "t3", 3)]
    tables.overwrite("daily", _daily(spark, rows), partition_by=["export_date", "cluster"])
    expected = sorted(rows, key=repr)
    assert _spark_rows(tables.read("daily")) == expected
    monkeypatch.setattr(_bridge, "MAX_FILES_FOR_MAP_LOOKUP", 0)  # many files: broadcast join, not a map
    assert _spark_rows(tables.read("daily")) == expected
    with pytest.raises(ConfigError, match="without '%'"):  # delta-rs percent-decodes table paths
        DeltaTables(spark, str(tmp_path / "100%")).exists("daily")


def test_read_empty_table_returns_empty_frame_with_table_schema(
    spark: SparkSession, tables: DeltaTables
) -> None:
    tables.create("daily", DAILY, ["export_date"])
    empty = tables.read("daily")
    assert empty.schema == DAILY and empty.collect() == []
    assert tables.read("daily", partition_filter={"export_date": D1}).collect() == []
    assert tables.schema("daily") == DAILY and tables.partition_columns("daily") == ("export_date",)
    with pytest.raises(TableNotFoundError, match="'missing'"):
        tables.read("missing")
    with pytest.raises(TableNotFoundError, match="no version 5"):
        tables.read("daily", version=5)
    with pytest.raises(ContractError, match="not partition columns"):
        tables.read("daily", partition_filter={"topic": "x"})


def test_create_is_idempotent_and_refuses_a_different_definition(tables: DeltaTables) -> None:
    assert not tables.exists("daily") and tables.version("daily") is None
    tables.create("daily", DAILY, ["export_date"])
    tables.create("daily", DAILY, ["export_date"])
    assert tables.version("daily") == 0
    with pytest.raises(SchemaChangeError, match="partition columns"):
        tables.create("daily", DAILY, ["cluster"])
    other = T.StructType([*DAILY.fields[:3], T.StructField("entries", T.IntegerType())])
    with pytest.raises(SchemaChangeError, match="entries: bigint -> int"):
        tables.create("daily", other, ["export_date"])
    with pytest.raises(ContractError, match="string, date, integral or boolean"):
        tables.create("events", EVENTS, ["published_at"])
    assert tables.version("daily") == 0 and not tables.exists("events")


def test_unsupported_reader_features_are_refused(tables: DeltaTables) -> None:
    path = tables.location("dv")
    write_deltalake(path, pa.table({"a": [1, 2]}), configuration={"delta.enableDeletionVectors": "true"})
    with pytest.raises(UnsupportedTableFeatureError, match="deletionVectors"):
        tables.read("dv")


# ----------------------------------------------------------------------------------------------------
# Writes, versions, history, restore
# ----------------------------------------------------------------------------------------------------


def test_append_overwrite_version_history_and_restore(spark: SparkSession, tables: DeltaTables) -> None:
    first = [(D1, "c1", "t1", 1), (D1, "c1", "t2", 2)]
    second = [(D2, "c1", "t1", 3)]
    replaced = [(D3, "c2", "t9", 9)]
    assert tables.append("daily", _daily(spark, first), partition_by=["export_date"]) == 0
    assert tables.append("daily", _daily(spark, second)) == 1
    assert tables.overwrite("daily", _daily(spark, replaced)) == 2
    assert _spark_rows(tables.read("daily")) == sorted(replaced, key=repr)
    assert _spark_rows(tables.read("daily", version=0)) == sorted(first, key=repr)
    assert _spark_rows(tables.read("daily", version=1)) == sorted(first + second, key=repr)
    assert tables.restore("daily", 1) == 3
    assert _spark_rows(tables.read("daily")) == sorted(first + second, key=repr)
    assert tables.restore("daily", 3) == 3  # already there: no new commit
    history = tables.history("daily")
    assert [(h["version"], h["operation"]) for h in history] == [
        (3, "restore"),
        (2, "overwrite"),
        (1, "append"),
        (0, "create"),
    ]
    assert all(isinstance(h["timestamp"], dt.datetime) for h in history)
    with pytest.raises(ContractError, match=r"versions 0\.\.3"):
        tables.restore("daily", 7)


def test_replace_partitions_is_idempotent_and_leaves_other_partitions(
    spark: SparkSession, tables: DeltaTables
) -> None:
    base = [(D1, "c1", "t1", 1), (D1, "c2", "t1", 2), (D2, "c1", "t1", 3), (D2, "c2", "t1", 4)]
    tables.overwrite("daily", _daily(spark, base), partition_by=["export_date", "cluster"])
    path = tables.location("daily")
    files_before = set(DeltaTable(path).file_uris())
    rerun = _daily(spark, [(D2, "c1", "t1", 30), (D2, "c1", "t2", 31)])
    assert tables.replace_partitions("daily", rerun, {"export_date": D2, "cluster": "c1"}) == 1
    assert tables.replace_partitions("daily", rerun, {"export_date": "2024-05-02", "cluster": "c1"}) == 2
    expected = [base[0], base[1], base[3], (D2, "c1", "t1", 30), (D2, "c1", "t2", 31)]
    assert _spark_rows(tables.read("daily")) == sorted(expected, key=repr)
    untouched = {f for f in files_before if "cluster=c1" not in f or "2024-05-01" in f}
    assert untouched <= set(DeltaTable(path).file_uris())  # other partitions' files are the same files
    # a subset of the partition columns replaces every cluster of that date
    assert tables.replace_partitions("daily", _daily(spark, [(D1, "c3", "t1", 5)]), {"export_date": D1}) == 3
    assert sorted(r.entries for r in tables.read("daily").collect()) == [4, 5, 30, 31]
    assert tables.history("daily")[0]["partition_values"] == {"export_date": "2024-05-01"}


def test_replace_partitions_rejects_rows_outside_partition_values(
    spark: SparkSession, tables: DeltaTables
) -> None:
    tables.overwrite("daily", _daily(spark, [(D1, "c1", "t1", 1)]), partition_by=["export_date", "cluster"])
    stray = _daily(spark, [(D2, "c1", "t1", 2), (D3, "c1", "t1", 3)])
    with pytest.raises(ContractError, match=r"export_date=2024-05-03"):
        tables.replace_partitions("daily", stray, {"export_date": D2})
    with pytest.raises(ContractError, match="not partition columns"):
        tables.replace_partitions("daily", stray, {"topic": "t1"})
    with pytest.raises(ContractError, match="non-empty partition_values"):
        tables.replace_partitions("daily", stray, {})
    path = tables.location("daily")
    assert tables.version("daily") == 0 and _staging_folders(path) == []
    assert sorted(os.listdir(path)) == ["_delta_log", "export_date=2024-05-01"]  # no stray files moved in


def test_schema_guard_rejects_missing_extra_and_changed_columns(
    spark: SparkSession, tables: DeltaTables
) -> None:
    tables.overwrite("daily", _daily(spark, [(D1, "c1", "t1", 1)]), partition_by=["export_date"])
    df = _daily(spark, [(D1, "c1", "t1", 2)])
    cases = {
        "missing columns: entries (bigint)": df.drop("entries"),
        "extra columns: size_bytes (int)": df.selectExpr("*", "1 AS size_bytes"),
        "type changed: entries: bigint -> int": df.selectExpr(
            "export_date", "cluster", "topic", "CAST(entries AS INT) AS entries"
        ),
    }
    for message, bad in cases.items():
        for write in (tables.append, tables.overwrite):
            with pytest.raises(SchemaChangeError, match=re.escape(message)) as err:
                write("daily", bad)
            assert "allow_schema_change=True" in str(err.value)
        with pytest.raises(SchemaChangeError, match=re.escape(message)):
            tables.replace_partitions("daily", bad, {"export_date": D1})
    with pytest.raises(SchemaChangeError, match="partition columns"):
        tables.append("daily", df, partition_by=["cluster"])
    assert tables.version("daily") == 0
    assert _spark_rows(tables.read("daily")) == [(D1, "c1", "t1", 1)]


def test_schema_guard_accepts_nullability_and_allowed_changes(
    spark: SparkSession, tables: DeltaTables
) -> None:
    tables.overwrite("daily", _daily(spark, [(D1, "c1", "t1", 1)]), partition_by=["export_date"])
    nullable = spark.createDataFrame(
        [(D2, "c1", "t1", 2)], T.StructType([T.StructField(f.name, f.dataType) for f in DAILY])
    )
    assert tables.append("daily", nullable.select("entries", "topic", "cluster", "export_date")) == 1
    assert tables.schema("daily") == DAILY  # the table's schema is kept, not the DataFrame's
    wider = _daily(spark, [(D3, "c1", "t1", 3)]).selectExpr("*", "'big' AS note")
    assert tables.append("daily", wider, allow_schema_change=True) == 3  # schema commit, then data commit
    assert tables.schema("daily")["note"].nullable
    assert sorted((r.entries, r.note) for r in tables.read("daily").collect()) == [
        (1, None),
        (2, None),
        (3, "big"),
    ]
    retyped = _daily(spark, [(D1, "c9", "t9", 9)]).selectExpr(
        "export_date", "cluster", "CAST(entries AS INT) AS n"
    )
    with pytest.raises(SchemaChangeError, match="only overwrite"):
        tables.append("daily", retyped.withColumnRenamed("n", "entries"), allow_schema_change=True)
    assert tables.overwrite("daily", retyped, partition_by=["cluster"], allow_schema_change=True) == 4
    assert tables.partition_columns("daily") == ("cluster",)
    assert [f.name for f in tables.schema("daily")] == ["export_date", "cluster", "n"]
    assert _spark_rows(tables.read("daily")) == [(D1, "c9", 9)]


# ----------------------------------------------------------------------------------------------------
# Concurrency, write_all, staging
# ----------------------------------------------------------------------------------------------------


def _commit_after_staging(monkeypatch: pytest.MonkeyPatch, table: str, commit: Any) -> None:
    """Let another writer commit to ``table`` right after this writer's Spark job (snapshot already taken)."""
    original = BridgeBackend._stage
    fired: list[bool] = []

    def stage_then_commit(self: BridgeBackend, bw: Any) -> None:
        original(self, bw)
        if bw.table == table and not fired:
            fired.append(True)  # the other writer's own staging must not trigger it again
            commit()

    monkeypatch.setattr(BridgeBackend, "_stage", stage_then_commit)


def test_concurrent_commit_is_detected(
    spark: SparkSession, tables: DeltaTables, monkeypatch: pytest.MonkeyPatch
) -> None:
    tables.overwrite("daily", _daily(spark, [(D1, "c1", "t1", 1)]), partition_by=["export_date"])
    other_writer = DeltaTables(spark, tables.location("daily").rsplit("/", 1)[0])
    other_rows = _daily(spark, [(D2, "c2", "t2", 2)])
    _commit_after_staging(monkeypatch, "daily", lambda: other_writer.append("daily", other_rows))
    with pytest.raises(ConcurrentWriteError) as err:
        tables.replace_partitions("daily", _daily(spark, [(D1, "c1", "t1", 10)]), {"export_date": D1})
    message = str(err.value)
    assert "'daily'" in message and "expected version 0" in message and "found version 1" in message
    assert "rerun after the other writer finishes" in message.lower()
    assert tables.version("daily") == 1
    assert _spark_rows(tables.read("daily")) == [(D1, "c1", "t1", 1), (D2, "c2", "t2", 2)]
    path = tables.location("daily")
    assert _staging_folders(path) == [] and _data_files(path) == set(DeltaTable(path).file_uris())


def test_failed_commit_deletes_moved_files(
    spark: SparkSession, tables: DeltaTables, monkeypatch: pytest.MonkeyPatch
) -> None:
    tables.overwrite("daily", _daily(spark, [(D1, "c1", "t1", 1)]), partition_by=["export_date"])
    path = tables.location("daily")
    referenced = set(DeltaTable(path).file_uris())

    def lose_the_race(*args: Any, **kwargs: Any) -> None:
        raise CommitFailedError("Failed to commit transaction: 0")

    monkeypatch.setattr(DeltaTable, "create_write_transaction", lose_the_race)
    with pytest.raises(ConcurrentWriteError, match="'daily'"):
        tables.append("daily", _daily(spark, [(D2, "c1", "t1", 2)]))
    assert tables.version("daily") == 0
    assert _data_files(path) == referenced and not os.path.exists(
        os.path.join(path, "export_date=2024-05-02")
    )
    assert _staging_folders(path) == []


def test_write_all_rolls_back_committed_tables_when_a_later_commit_fails(
    spark: SparkSession, tables: DeltaTables, monkeypatch: pytest.MonkeyPatch
) -> None:
    tables.overwrite("first", _daily(spark, [(D1, "c1", "t1", 1)]), partition_by=["export_date"])
    tables.overwrite("third", _daily(spark, [(D1, "c1", "t1", 100)]))
    before = _spark_rows(tables.read("first"))
    writes = [
        TableWrite("first", _daily(spark, [(D1, "c1", "t1", 2)]), "replace_partitions", {"export_date": D1}),
        TableWrite("second", _daily(spark, [(D2, "c2", "t2", 3)]), "overwrite", partition_by=("cluster",)),
        TableWrite("third", _daily(spark, [(D3, "c3", "t3", 4)]), "append"),
    ]
    # a schema change in any write is caught before anything is staged or committed
    bad = TableWrite("third", _daily(spark, [(D3, "c3", "t3", 4)]).drop("topic"), "append")
    with pytest.raises(SchemaChangeError, match="missing columns: topic"):
        tables.write_all([*writes[:2], bad])
    assert tables.version("first") == 0 and not tables.exists("second")
    # a commit failure after earlier commits: those tables go back to their previous content
    intruder = DeltaTables(spark, str(Path(tables.location("third")).parent))
    _commit_after_staging(
        monkeypatch, "third", lambda: intruder.append("third", _daily(spark, [(D3, "c9", "t9", 9)]))
    )
    with pytest.raises(ConcurrentWriteError, match="'third'"):
        tables.write_all(writes)
    assert _spark_rows(tables.read("first")) == before
    assert [h["operation"] for h in tables.history("first")[:2]] == ["rollback", "replace_partitions"]
    assert not tables.exists("second") and not os.path.exists(tables.location("second"))
    assert sorted(r.entries for r in tables.read("third").collect()) == [9, 100]
    monkeypatch.undo()
    assert tables.write_all(writes) == {"first": 3, "second": 0, "third": 2}
    assert sorted(r.entries for r in tables.read("second").collect()) == [3]


def test_staging_is_removed_and_orphans_are_cleaned_up(spark: SparkSession, tables: DeltaTables) -> None:
    tables.overwrite("daily", _daily(spark, [(D1, "c1", "t1", 1)]), partition_by=["export_date"])
    path = tables.location("daily")
    assert _staging_folders(path) == [] and not os.path.exists(os.path.join(path, STAGING_DIR))
    old = Path(path, STAGING_DIR, "20200101T000000-deadbeef0000", "export_date=2024-05-01")
    old.mkdir(parents=True)
    (old / "part-00000.parquet").write_bytes(b"killed writer")
    fresh = Path(path, STAGING_DIR, "20990101T000000-live00000000")
    fresh.mkdir()
    an_hour_ago = time.time() - 3600
    for p in (old / "part-00000.parquet", old, old.parent):
        os.utime(p, (an_hour_ago, an_hour_ago))
    assert tables.cleanup_staging("daily", older_than_seconds=600) == [str(old.parent)]
    assert _staging_folders(path) == [fresh.name]
    assert tables.cleanup_staging() == [str(fresh)]
    assert not os.path.exists(os.path.join(path, STAGING_DIR))
    assert _spark_rows(tables.read("daily")) == [(D1, "c1", "t1", 1)]


def test_string_statistics_bounds_are_valid(spark: SparkSession, tables: DeltaTables) -> None:
    long_topic = "persistent://tenant/namespace/" + "x" * MAX_STRING_STAT_CHARS
    rows = _daily(spark, [(D1, "c1", long_topic, 1), (D1, "c1", "persistent://a", 2)]).coalesce(1)
    tables.append("daily", rows)
    (add,) = pa.table(DeltaTable(tables.location("daily")).get_add_actions(flatten=True)).to_pylist()
    assert add["min.topic"] == "persistent://a" and add.get("max.topic") is None  # no truncated upper bound
    assert add["min.export_date"] == D1 and add["max.entries"] == 2 and add["num_records"] == 2
    log0 = Path(tables.location("daily"), "_delta_log", f"{0:020d}.json").read_text().splitlines()
    add_json = next(json.loads(line)["add"] for line in log0 if '"add"' in line)
    assert json.loads(add_json["stats"])["nullCount"] == {
        "export_date": 0,
        "cluster": 0,
        "topic": 0,
        "entries": 0,
    }


def test_count_rows_uses_log_statistics_and_partition_filter(spark, tmp_path):
    tables = DeltaTables(spark, str(tmp_path))
    df = spark.createDataFrame([("a", 1), ("a", 2), ("b", 3)], "part string, v int")
    tables.overwrite("counted", df, partition_by=["part"])
    assert tables.count_rows("counted") == 3
    assert tables.count_rows("counted", partition_filter={"part": "a"}) == 2
    assert tables.count_rows("counted", partition_filter={"part": "zz"}) == 0


def test_partition_values_come_from_the_log_without_a_spark_job(spark, tmp_path):
    """``ingested_dates`` (the run-date check of every stage) reads the dates from the Delta log: no job."""
    tables = DeltaTables(spark, str(tmp_path))
    day1, day2 = dt.date(2026, 1, 1), dt.date(2026, 1, 2)
    rows = [(day1, "a", 1), (day1, "b", 2), (day2, "a", 3), (None, "c", 4)]
    df = spark.createDataFrame(rows, "export_date date, part string, v int")
    tables.overwrite("dated", df, partition_by=["export_date", "part"])
    with spark_jobs(spark) as jobs:
        dates = tables.partition_values("dated", "export_date")
        parts = tables.partition_values("dated", "part")
    assert jobs == []
    with spark_jobs(spark) as control:  # the count sees a job when there is one
        tables.read("dated").count()
    assert control
    assert len(dates) == 3 and set(dates) == {day1, day2, None}
    assert sorted(parts) == ["a", "b", "c"]
    with pytest.raises(ValueError, match="'v' is not a partition column of table 'dated'"):
        tables.partition_values("dated", "v")
