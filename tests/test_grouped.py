"""``map_groups``: per-group Python over sorted Arrow batches (groups cut across batches, null keys)."""

from __future__ import annotations

import random
from collections import defaultdict

import pandas as pd
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from pulsar_model.engine.grouped import OUTPUT_BATCH_ROWS, map_groups, records

SOURCE = T.StructType(
    [
        T.StructField("cluster", T.StringType(), True),
        T.StructField("topic", T.StringType(), False),
        T.StructField("version", T.LongType(), False),
        T.StructField("value", T.LongType(), False),
    ]
)
OUT = T.StructType(
    [
        T.StructField("cluster", T.StringType(), True),
        T.StructField("topic", T.StringType(), False),
        T.StructField("versions", T.ArrayType(T.LongType()), False),
        T.StructField("total", T.LongType(), False),
    ]
)


def _summary(pdf: pd.DataFrame) -> list[dict[str, object]]:
    """The versions in the order given (must be sorted) and their sum; nothing for an all-zero group."""
    if not pdf["value"].any():
        return []
    return [{"versions": [int(v) for v in pdf["version"]], "total": int(pdf["value"].sum())}]


@pytest.mark.parametrize("batch_rows", ["2", "3", "10000"])
def test_every_group_is_seen_whole_and_once_in_version_order(spark: SparkSession, batch_rows: str) -> None:
    rng = random.Random(int(batch_rows))
    rows = []
    for g in range(60):
        cluster = None if g % 7 == 0 else f"c{g % 3}"  # null clusters are a group of their own
        size = rng.choice([1, 1, 2, 3, 5, 9]) if g != 5 else 40  # one group spans many batches
        versions = rng.sample(range(1, 100), size)
        zero = g % 11 == 0
        rows += [(cluster, f"t{g // 3}", v, 0 if zero else rng.randint(1, 9)) for v in versions]
    rng.shuffle(rows)
    expected: dict[tuple[object, ...], list[tuple[int, int]]] = defaultdict(list)
    for cluster, topic, version, value in rows:
        expected[(cluster, topic)].append((version, value))
    want = {
        k: (sorted(v for v, _ in vs), sum(x for _, x in vs))
        for k, vs in expected.items()
        if any(x for _, x in vs)
    }
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    saved = spark.conf.get(key)
    spark.conf.set(key, batch_rows)
    try:
        frame = spark.createDataFrame(rows, SOURCE).repartition(3)
        got_rows = map_groups(frame, ["cluster", "topic"], _summary, OUT, order=["version"]).collect()
    finally:
        spark.conf.set(key, saved)
    got = {(r["cluster"], r["topic"]): (r["versions"], r["total"]) for r in got_rows}
    assert len(got_rows) == len(got) == len(want)
    assert got == want


def test_output_is_yielded_in_bounded_batches(spark: SparkSession) -> None:
    rows = [("c", f"t{i % 3}", i, 1) for i in range(3 * OUTPUT_BATCH_ROWS)]
    frame = spark.createDataFrame(rows, SOURCE).coalesce(1)

    def explode(pdf: pd.DataFrame) -> list[dict[str, object]]:
        return [{"versions": [int(v)], "total": 1} for v in pdf["version"]]

    out = map_groups(frame, ["cluster", "topic"], explode, OUT)
    assert out.count() == len(rows)


def test_records_equal_pandas_to_dict_records() -> None:
    """The column-wise conversion gives the rows ``to_dict("records")`` gives: Python ints, NaN for a
    null in a numeric column, None and nested dicts in object columns, and nothing for no rows."""
    pdf = pd.DataFrame(
        {
            "_k": [0, 1, 2],
            "l_id": [None, 7.0, None],
            "name": ["a", None, "c"],
            "md": [None, {"ledger_id": 3, "entry_id": -1}, {"ledger_id": 4, "entry_id": 0}],
        }
    )
    got, want = records(pdf), pdf.to_dict("records")
    assert [list(r) for r in got] == [list(r) for r in want]
    assert repr(got) == repr(want)  # NaN != NaN: compare the rendering
    assert all(type(r["_k"]) is int for r in got)
    assert records(pdf.iloc[0:0]) == []
