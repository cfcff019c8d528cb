"""Scale test: 10,000 topics through drop_backlog_for_size_limit and drop_backlog_for_time_limit (docs §3.6,
§3.7), one call each, inputs generated on the executors (no driver-side rows), one Spark action per result.

Topic ``t00042`` (base ``b = 420``): closed ledgers ``b+1..b+3`` with 5 entries of 100 B (closed at
``b+1``: 3 h, ``b+2``: 2 h, ``b+3``: 10 min before the export), the empty open ledger ``b+4``,
LAC = ``b+3:4``, totalSize 1500; a durable subscription ``sub`` at ``b+1:-1``, a non-durable reader at
``b+1:0`` and, on odd topics, a replicator cursor ``pulsar.repl.r2`` at ``b+1:2``. Size limit 1000 B
(4.x target 900); time limit 3600 s.

Size (hand-computed from §3.6): ``sub`` is slowest, 15 entries, toSkip = (1500-900)*15/1500 = 6 ->
``b+2:0``, estimate 1500-500-100 = 900 -> stop (even topics). Odd topics: then the replicator is slowest
(estimate 1500-300 = 1200), 12 entries, toSkip = 300*12/1200 = 3 -> ``b+2:0``, estimate 900 -> stop.
Time (non-precise, §3.7): the slowest cursor leaves ``b+1`` and ``b+2`` (closed > 1 h ago) for ``b+3:-1``;
``b+3`` closed 10 min ago -> ``not_expired``. Odd topics: the replicator moves the same way.
"""

from __future__ import annotations

import datetime as dt
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from pulsar_model.quota.eviction import drop_backlog_for_size_limit, drop_backlog_for_time_limit

TOPICS = 10_000
EXPORTED_AT = dt.datetime(2026, 1, 1, 2, 0, tzinfo=dt.UTC)
POS_TYPE = "struct<ledger_id:bigint,entry_id:bigint>"
IDM_TYPE = f"array<struct<lower:{POS_TYPE},upper:{POS_TYPE}>>"


def pos(ledger: Column, entry: int) -> Column:
    return F.struct(ledger.cast("long").alias("ledger_id"), F.lit(entry).cast("long").alias("entry_id"))


def inputs(spark: SparkSession) -> dict[str, DataFrame]:
    topics = spark.range(TOPICS, numPartitions=4).select(
        F.lit("c").alias("cluster"),
        F.format_string("t%05d", F.col("id")).alias("topic"),
        (F.col("id") * 10).alias("base"),
        (F.col("id") % 2 == 1).alias("odd"),
    )
    base = F.col("base")
    exported = F.lit(EXPORTED_AT).cast("timestamp")
    ledgers = topics.select(
        "cluster", "topic", "base", F.explode(F.array(*[F.lit(i) for i in (1, 2, 3, 4)])).alias("k")
    )
    closed_minutes = F.element_at(
        F.array(F.lit(180), F.lit(120), F.lit(10)), F.least(F.col("k"), F.lit(3)).cast("int")
    )
    ledgers = ledgers.select(
        "cluster",
        "topic",
        (base + F.col("k")).alias("ledger_id"),
        F.when(F.col("k") < 4, 5).otherwise(0).cast("long").alias("entries"),
        F.when(F.col("k") < 4, 500).otherwise(0).cast("long").alias("size_bytes"),
        F.when(F.col("k") < 4, exported - F.make_interval(mins=closed_minutes)).alias("closed_at"),
    )
    mls = topics.select(
        "cluster",
        "topic",
        (base + 4).alias("current_ledger_id"),
        F.lit(0).cast("long").alias("current_ledger_entries"),
        F.lit(0).cast("long").alias("current_ledger_size_bytes"),
        pos(base + 3, 4).alias("last_confirmed_entry"),
        F.lit(1500).cast("long").alias("total_size_bytes"),
        exported.alias("exported_at"),
    )

    def cursor(df: DataFrame, name: str, order: int, durable: bool, md: Column) -> DataFrame:
        return df.select(
            "cluster",
            "topic",
            F.lit(name).alias("cursor_name"),
            F.lit(order).alias("cursor_order"),
            F.lit(durable).alias("is_durable"),
            md.alias("mark_delete_position"),
            F.array().cast(IDM_TYPE).alias("individually_deleted"),
        )

    cursors = (
        cursor(topics, "sub", 0, True, pos(base + 1, -1))
        .unionByName(cursor(topics, "reader-1", 1, False, pos(base + 1, 0)))
        .unionByName(cursor(topics.where("odd"), "pulsar.repl.r2", 2, True, pos(base + 1, 2)))
    )
    size_limits = topics.select("cluster", "topic", F.lit(1000).cast("long").alias("limit_size_bytes"))
    time_limits = topics.select("cluster", "topic", F.lit(3600).cast("long").alias("limit_time_seconds"))
    return {"ledgers": ledgers, "mls": mls, "cursors": cursors, "size": size_limits, "time": time_limits}


def rows(df: DataFrame, columns: list[str]) -> list[dict[str, Any]]:
    body = F.to_json(F.struct(*[F.col(c) for c in columns]))
    return [json.loads(r["j"]) for r in df.select(body.alias("j")).collect()]


def test_eviction_10000_topics_in_one_call_each(spark: SparkSession) -> None:
    """10,000 topics; every cursor row of every topic is checked against the hand-computed result."""
    d = inputs(spark)
    size = drop_backlog_for_size_limit(
        d["mls"], d["ledgers"], d["cursors"], d["size"], pulsar_version="4.1.3"
    )
    time_ = drop_backlog_for_time_limit(
        d["mls"], d["ledgers"], d["cursors"], d["time"], pulsar_version="4.1.3"
    )
    cols = ["topic", "cursor_name", "mark_delete_position", "stop_reason", "iteration_count"]
    with ThreadPoolExecutor(max_workers=2) as pool:  # two independent actions, planned in parallel
        size_job = pool.submit(rows, size, [*cols, "estimated_backlog_size_bytes_after", "skipped_entries"])
        time_job = pool.submit(rows, time_, cols)
        size_rows, time_rows = size_job.result(), time_job.result()
    expected_rows = TOPICS * 2 + TOPICS // 2
    assert len(size_rows) == expected_rows and len(time_rows) == expected_rows
    for r in size_rows:
        i = int(r["topic"][1:])
        b, odd = i * 10, i % 2 == 1
        md = (r["mark_delete_position"]["ledger_id"], r["mark_delete_position"]["entry_id"])
        assert (r["stop_reason"], r["iteration_count"], r["estimated_backlog_size_bytes_after"]) == (
            "below_target",
            2 if odd else 1,
            900,
        ), r
        if r["cursor_name"] == "sub":
            assert md == (b + 2, 0) and r["skipped_entries"] == 6, r
        elif r["cursor_name"] == "pulsar.repl.r2":
            assert md == (b + 2, 0) and r["skipped_entries"] == 3, r
        else:
            assert md == (b + 1, 0) and r["skipped_entries"] == 0, r
    for r in time_rows:
        i = int(r["topic"][1:])
        b, odd = i * 10, i % 2 == 1
        md = (r["mark_delete_position"]["ledger_id"], r["mark_delete_position"]["entry_id"])
        assert (r["stop_reason"], r["iteration_count"]) == ("not_expired", 4 if odd else 2), r
        assert md == ((b + 1, 0) if r["cursor_name"] == "reader-1" else (b + 3, -1)), r
