"""Scale test: 1,000 topics through position_after_n, skip_entries, precise_backlog and
estimated_backlog_size, one call each, one Spark action per result.

Topic ``t0042`` has ledgers 421, 422, 423 (closed, 5 entries of 100 B each) and the empty open ledger
424; LAC = 423:4; a durable cursor ``sub`` at 421:2 (odd topics also acked ``(422:0, 422:2]``) and a
non-durable reader at 421:0. The inputs are generated on the executors (no driver-side rows).
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from pulsar_model.backlog import estimated_backlog_size, precise_backlog
from pulsar_model.positions import position_after_n, skip_entries
from tests.spark_conf import session_conf

TOPICS = 1000
POS = "struct<ledger_id:bigint,entry_id:bigint>"


def pos(ledger: Column, entry: Column | int) -> Column:
    entry_col = entry if isinstance(entry, Column) else F.lit(entry)
    return F.struct(ledger.cast("long").alias("ledger_id"), entry_col.cast("long").alias("entry_id"))


def inputs(spark: SparkSession) -> dict[str, DataFrame]:
    topics = spark.range(TOPICS).select(
        F.lit("c").alias("cluster"),
        F.format_string("t%04d", F.col("id")).alias("topic"),
        (F.col("id") * 10).alias("base"),
        (F.col("id") % 2 == 1).alias("odd"),
    )
    base = F.col("base")
    ledgers = topics.select(
        "cluster", "topic", F.explode(F.array(*[F.lit(i) for i in (1, 2, 3, 4)])).alias("k"), "base"
    ).select(
        "cluster",
        "topic",
        (base + F.col("k")).alias("ledger_id"),
        F.when(F.col("k") < 4, 5).otherwise(0).cast("long").alias("entries"),
        F.when(F.col("k") < 4, 500).otherwise(0).cast("long").alias("size_bytes"),
    )
    mls = topics.select(
        "cluster",
        "topic",
        (base + 4).alias("current_ledger_id"),
        F.lit(0).cast("long").alias("current_ledger_entries"),
        F.lit(0).cast("long").alias("current_ledger_size_bytes"),
        pos(base + 3, 4).alias("last_confirmed_entry"),
        F.lit(1500).cast("long").alias("total_size_bytes"),
    )
    idm = F.when(
        F.col("odd"), F.array(F.struct(pos(base + 2, 0).alias("lower"), pos(base + 2, 2).alias("upper")))
    ).otherwise(
        F.array().cast(
            "array<struct<lower:struct<ledger_id:bigint,entry_id:bigint>,upper:struct<ledger_id:bigint,entry_id:bigint>>>"
        )
    )
    sub = topics.select(
        "cluster",
        "topic",
        F.lit("sub").alias("cursor_name"),
        F.lit(1).alias("cursor_order"),
        F.lit(True).alias("is_durable"),
        pos(base + 1, 2).alias("mark_delete_position"),
        idm.alias("individually_deleted"),
    )
    reader = topics.select(
        "cluster",
        "topic",
        F.lit("reader").alias("cursor_name"),
        F.lit(2).alias("cursor_order"),
        F.lit(False).alias("is_durable"),
        pos(base + 1, 0).alias("mark_delete_position"),
        F.array().cast(sub.schema["individually_deleted"].dataType).alias("individually_deleted"),
    )
    # (a struct built in the same select as a generator loses its field names: two selects)
    pan = topics.select(
        "cluster", "topic", "base", F.explode(F.array(F.lit(3), F.lit(100))).alias("n")
    ).select(
        "cluster",
        "topic",
        F.col("n").cast("long").alias("n"),
        pos(base + 1, 2).alias("start_position"),
        F.lit("startExcluded").alias("bound"),
        F.concat(F.col("topic"), F.lit("/"), F.col("n").cast("string")).alias("request_id"),
    )
    skip = topics.select(
        "cluster",
        "topic",
        F.lit("sub").alias("cursor_name"),
        F.lit(3).cast("long").alias("n"),
        F.lit("Include").alias("deleted_entries"),
        F.col("topic").alias("request_id"),
    )
    return {"ledgers": ledgers, "mls": mls, "cursors": sub.unionByName(reader), "pan": pan, "skip": skip}


def test_scale_1000_topics_in_one_call_each(spark: SparkSession) -> None:
    """1,000 topics; every topic's answer is checked (even: no acked ranges, odd: one acked range)."""
    d = inputs(spark)
    frames = {
        "pan": position_after_n(d["pan"], d["ledgers"], d["mls"]),
        "skip": skip_entries(d["skip"], d["cursors"], d["ledgers"], d["mls"]),
        "backlog": precise_backlog(d["cursors"], d["ledgers"], d["mls"]),
        "size": estimated_backlog_size(d["mls"], d["ledgers"], d["cursors"]),
    }

    def run(name: str) -> list[tuple[str, dict[str, Any]]]:
        df = frames[name]
        body = F.to_json(F.struct(*[F.col(f"`{c}`") for c in df.columns]), {"ignoreNullFields": "false"})
        return [(name, json.loads(r["row"])) for r in df.select(body.alias("row")).collect()]

    # four independent actions, planned in parallel
    with session_conf(spark), ThreadPoolExecutor(max_workers=4) as pool:
        rows = [row for part in pool.map(run, frames) for row in part]

    def p(value: dict[str, int] | None) -> tuple[int, int] | None:
        return None if value is None else (value["ledger_id"], value["entry_id"])

    by_frame: dict[str, list[dict[str, Any]]] = {name: [] for name in frames}
    for frame, data in rows:
        by_frame[frame].append(data)
    assert [len(by_frame[f]) for f in ("pan", "skip", "backlog", "size")] == [
        2 * TOPICS,
        TOPICS,
        2 * TOPICS,
        TOPICS,
    ]
    for row in by_frame["pan"]:
        b = int(row["topic"][1:]) * 10
        expected = (b + 2, 0) if row["n"] == 3 else (b + 3, 4)  # n = 100 overshoots: LAC
        assert p(row["position"]) == expected, row
    for row in by_frame["skip"]:
        i = int(row["topic"][1:])
        b = i * 10
        assert p(row["target_position"]) == (b + 2, 0), row
        if i % 2:  # the acked (b+2:0, b+2:2] is swallowed by the mark-delete extension
            assert (p(row["mark_delete_position"]), p(row["read_position"])) == ((b + 2, 2), (b + 2, 3)), row
        else:
            assert (p(row["mark_delete_position"]), p(row["read_position"])) == ((b + 2, 0), (b + 2, 1)), row
        assert row["skipped_entries"] == 3 and row["individually_deleted"] == [] and row["error"] is None
    for row in by_frame["backlog"]:
        i = int(row["topic"][1:])
        if row["cursor_name"] == "sub":
            assert row["backlog_entries"] == (10 if i % 2 else 12), row
            assert row["entries_in_storage"] == 12
        else:
            assert row["backlog_entries"] == 14 and row["entries_in_storage"] == 14, row
    for row in by_frame["size"]:
        assert row["slowest_cursor_name"] == "sub"
        assert row["estimated_backlog_size_bytes"] == 1200, row  # 1500 - 3 x 100 consumed of ledger b+1


def test_scale_1000_topics_exact_backlog_and_pinning_in_one_call_each(spark: SparkSession) -> None:
    """The same 1,000 topics with 15 exported entries each (100 B): exact backlog per cursor and the
    pinning report, one call and one action each; every topic's answer is checked."""
    from pulsar_model.backlog_exact import exact_backlog
    from pulsar_model.pinning import pinning_report

    d = inputs(spark)
    entries = (
        d["ledgers"]
        .where(F.col("entries") > 0)
        .select("cluster", "topic", "ledger_id", F.explode(F.sequence(F.lit(0), F.lit(4))).alias("entry_id"))
        .select(
            "cluster",
            "topic",
            "ledger_id",
            F.col("entry_id").cast("long").alias("entry_id"),
            pos(F.col("ledger_id"), F.col("entry_id")).alias("position"),
            F.lit(100).cast("long").alias("entry_size_bytes"),
            (F.col("ledger_id") * 10 + F.col("entry_id")).alias("publish_time_ms"),
            F.lit(1).alias("message_count"),
            F.lit(None).cast("int").alias("marker_type"),
            F.lit(None).cast("long").alias("txnid_most_bits"),
            F.lit(None).cast("long").alias("txnid_least_bits"),
        )
    )
    with session_conf(spark):
        exact = (
            exact_backlog(d["cursors"], entries, d["mls"], ledgers=d["ledgers"])
            .select(
                "topic",
                "cursor_name",
                "backlog_entries_exported",
                "backlog_bytes",
                "exported_entries_complete",
            )
            .collect()
        )
        pins = (
            pinning_report(d["mls"], d["ledgers"], d["cursors"])
            .select("topic", "slowest_cursor_name", "trimmable_now_ledgers", "pinned_ledgers", "pinned_bytes")
            .collect()
        )
    assert len(exact) == 2 * TOPICS and len(pins) == TOPICS
    for row in exact:
        odd = int(row.topic[1:]) % 2 == 1
        expected = 14 if row.cursor_name == "reader" else (10 if odd else 12)
        assert (row.backlog_entries_exported, row.backlog_bytes) == (expected, 100 * expected), row
        assert row.exported_entries_complete is True, row
    for row in pins:
        # the only durable cursor pins b+1..b+3 (b+3 ends at LAC, its last entry: trimmable in 3.x+)
        assert (row.slowest_cursor_name, row.trimmable_now_ledgers) == ("sub", 0), row
        assert (row.pinned_ledgers, row.pinned_bytes) == (3, 1500), row
