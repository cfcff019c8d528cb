"""Stage output writes (``pulsar_model.tables.stage_io``): an output table written under an older contract."""

from __future__ import annotations

import datetime as dt

import pytest
from pyspark.sql import types as T

from pulsar_model.errors import SchemaChangeError
from pulsar_model.tables.contracts import contract
from pulsar_model.tables.delta_io import DeltaTables
from pulsar_model.tables.stage_io import write_day_outputs


def test_output_table_of_an_older_contract_names_the_table_folder_and_the_rerun(spark, tmp_path):
    """``quota_evictions`` as an earlier release wrote it (``iterations_json``, no ``trace_steps``): the
    stage fails before writing anything, and the message says what to move and which stage to rerun."""
    tables = DeltaTables(spark, str(tmp_path / "warehouse"))
    current = contract("quota_evictions")
    old_fields = [f for f in current.spark_schema.fields if f.name not in {"trace_steps", "trace_truncated"}]
    old = T.StructType([*old_fields, T.StructField("iterations_json", T.StringType(), False)])
    tables.create("quota_evictions", old, current.partitioned_by)
    before = tables.version("quota_evictions")
    day = {"export_date": dt.date(2026, 11, 1)}
    empty = spark.createDataFrame([], current.spark_schema)
    with pytest.raises(SchemaChangeError) as caught:
        write_day_outputs(tables, day, {"quota_evictions": empty}, stage="quota")
    message = str(caught.value)
    assert "iterations_json" in message and "trace_steps" in message, message
    assert tables.location("quota_evictions") in message, message
    assert "--stages quota --export-date" in message, message
    assert tables.version("quota_evictions") == before
