"""Benchmark tier ``s`` generated straight into the input tables (issue 10): contracts, invariants,
determinism, skew, the data shapes every stage needs, and the nightly stages running on it.

One module-scoped generation into ``tmp_path_factory``'s warehouse; each test is one or a few Spark jobs.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from benchmarks.datagen import TABLES, TIERS, generate_tier, tier_frames
from pulsar_model.pipeline.config import load_config
from pulsar_model.pipeline.nightly import STAGES, run_nightly
from pulsar_model.tables.contracts import contract, schema_differences
from pulsar_model.tables.delta_io import DeltaTables

DAY = dt.date(2026, 11, 1)
SEED = 7
#: Every nightly stage that reads the input tables (ingest reads an export folder, report writes HTML).
ANALYTIC_STAGES = [s for s in STAGES if s not in ("ingest", "report")]


@pytest.fixture(scope="module")
def generated(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    warehouse = tmp_path_factory.mktemp("bench_s")
    tables = DeltaTables(spark, str(warehouse))
    lines: list[str] = []
    rows = generate_tier(spark, tables, "s", seed=SEED, export_date=DAY, echo=lines.append)
    return {"warehouse": str(warehouse), "tables": tables, "rows": rows, "log": lines}


def _read(generated: dict[str, Any], table: str) -> DataFrame:
    tables: DeltaTables = generated["tables"]
    if contract(table).partitioned_by:
        return tables.read(table, partition_filter={"export_date": DAY})
    return tables.read(table)


def test_generate_tier_writes_every_input_table(generated):
    rows = generated["rows"]
    assert list(rows) == list(TABLES)
    assert all(n > 0 for n in rows.values()), rows
    spec = TIERS["s"]
    assert rows["managed_ledgers"] == spec.topics
    # hash draws land near the tier's targets
    assert 0.7 * spec.ledgers <= rows["ledgers"] <= 1.5 * spec.ledgers
    assert 0.7 * spec.cursors <= rows["cursors"] <= 1.5 * spec.cursors
    assert 0.7 * spec.entries <= rows["entries"] <= 1.5 * spec.entries
    assert 1.5 * rows["entries"] <= rows["messages"] <= 2.5 * rows["entries"]
    assert "generated in" in generated["log"][-1]


def test_generate_tier_rows_satisfy_their_contracts(generated):
    problems: dict[str, Any] = {}
    for table in TABLES:
        c = contract(table)
        df = _read(generated, table)
        diff = schema_differences(df.schema, table, check_nullability=False)
        required = [col.name for col in c.columns if not col.nullable]
        stats = df.agg(
            F.count(F.lit(1)).alias("rows"),
            F.count_distinct(F.struct(*c.key)).alias("keys"),
            *[F.sum(F.col(name).isNull().cast("int")).alias(f"null_{name}") for name in required],
        ).first()
        assert stats is not None
        nulls = {k: v for k, v in stats.asDict().items() if k.startswith("null_") and v}
        if diff or nulls or stats["rows"] != stats["keys"]:
            problems[table] = (diff, nulls, stats["rows"], stats["keys"])
    assert problems == {}


def test_generate_tier_entries_lie_inside_listed_ledgers_and_sizes_add_up(generated):
    ledgers = _read(generated, "ledgers")
    managed = _read(generated, "managed_ledgers")
    entries = _read(generated, "entries")
    keys = ["cluster", "topic", "ledger_id"]
    per_ledger = entries.groupBy(*keys).agg(
        F.count(F.lit(1)).alias("n"),
        F.max("entry_id").alias("max_id"),
        F.min("entry_id").alias("min_id"),
        F.sum("entry_size_bytes").alias("bytes"),
        F.min("position.entry_id").alias("pos_check"),
    )
    listed = ledgers.join(
        managed.select(
            "cluster",
            "topic",
            F.col("current_ledger_id").alias("ledger_id"),
            "current_ledger_entries",
            "current_ledger_size_bytes",
        ),
        keys,
        "left",
    )
    joined = listed.join(per_ledger, keys, "full_outer")
    expected_n = F.when(F.col("is_current"), F.col("current_ledger_entries")).otherwise(F.col("entries"))
    expected_bytes = F.when(F.col("is_current"), F.col("current_ledger_size_bytes")).otherwise(
        F.col("size_bytes")
    )
    bad = joined.where(
        F.col("entries").isNull()  # an entry outside every listed ledger
        | (F.coalesce(F.col("n"), F.lit(0)) != expected_n)
        | (F.coalesce(F.col("bytes"), F.lit(0)) != expected_bytes)
        | (F.coalesce(F.col("max_id"), F.lit(-1)) != expected_n - 1)
        | (F.coalesce(F.col("min_id"), F.lit(0)) != 0)
        | (F.col("is_current") & ((F.col("entries") != 0) | (F.col("size_bytes") != 0)))
    )
    totals = ledgers.join(
        managed.select("cluster", "topic", "current_ledger_size_bytes", "total_size_bytes", "ledger_count"),
        ["cluster", "topic"],
    )
    bad_totals = (
        totals.groupBy("cluster", "topic", "total_size_bytes", "current_ledger_size_bytes", "ledger_count")
        .agg(F.sum("size_bytes").alias("closed"), F.count(F.lit(1)).alias("n"))
        .where(
            (F.col("closed") + F.col("current_ledger_size_bytes") != F.col("total_size_bytes"))
            | (F.col("n") != F.col("ledger_count"))
        )
    )
    assert bad.limit(5).collect() == []
    assert bad_totals.limit(5).collect() == []


def test_generate_tier_messages_and_markers_match_entries(generated):
    keys = ["cluster", "topic", "ledger_id", "entry_id"]
    entries = _read(generated, "entries")
    messages = (
        _read(generated, "messages")
        .groupBy(*keys)
        .agg(
            F.count(F.lit(1)).alias("slots"),
            F.max("batch_size").alias("batch_size"),
            F.max("batch_index").alias("max_index"),
            F.max("marker_type").alias("m_marker"),
        )
    )
    markers = _read(generated, "markers").select(*keys, F.col("marker_type").alias("k_marker"))
    joined = entries.join(messages, keys, "full_outer").join(markers, keys, "full_outer")
    bad = joined.where(
        F.col("message_count").isNull()
        | (F.col("slots") != F.col("message_count"))
        | (F.col("batch_size") != F.col("message_count"))
        | (F.col("max_index") != F.when(F.col("is_batch"), F.col("message_count") - 1).otherwise(F.lit(-1)))
        | ~F.col("marker_type").eqNullSafe(F.col("m_marker"))
        | ~F.col("marker_type").eqNullSafe(F.col("k_marker"))
    )
    assert bad.limit(5).collect() == []


def test_generate_tier_cursors_never_pass_the_lac(generated):
    cursors = _read(generated, "cursors").join(
        _read(generated, "managed_ledgers").select("cluster", "topic", "last_confirmed_entry"),
        ["cluster", "topic"],
    )
    after_lac = cursors.where(F.col("mark_delete_position") > F.col("last_confirmed_entry"))
    holes = cursors.select(
        "mark_delete_position", "last_confirmed_entry", F.explode("individually_deleted").alias("r")
    )
    bad_holes = holes.where(
        (F.col("r.lower") <= F.col("mark_delete_position"))
        | (F.col("r.upper") <= F.col("r.lower"))
        | (F.col("r.upper") > F.col("last_confirmed_entry"))
    )
    assert after_lac.limit(5).collect() == [] and bad_holes.limit(5).collect() == []


def test_generate_tier_covers_every_feature_the_stages_need(generated):
    markers = _read(generated, "markers")
    messages = _read(generated, "messages")
    cursors = _read(generated, "cursors")
    ledgers = _read(generated, "ledgers")
    m = markers.agg(
        F.sort_array(F.collect_set("marker_type")).alias("types"),
        F.sum((F.col("replicated_from").isNotNull()).cast("int")).alias("landed"),
    ).first()
    msg = messages.agg(
        F.sum((F.col("batch_index") >= 0).cast("int")).alias("batched"),
        F.sum((F.col("key").isNull() & F.col("marker_type").isNull()).cast("int")).alias("keyless"),
        F.sum(((F.col("payload_size_bytes") == 0) & F.col("key").isNotNull()).cast("int")).alias(
            "tombstones"
        ),
        F.sum(F.col("is_null_value").cast("int")).alias("null_values"),
        F.sum(F.col("txnid_most_bits").isNotNull().cast("int")).alias("txn"),
    ).first()
    listed = ledgers.groupBy("cluster", "topic").agg(F.collect_set("ledger_id").alias("ids"))
    cur = (
        cursors.join(listed, ["cluster", "topic"])
        .agg(
            F.sum((F.col("mark_delete_position.entry_id") == -1).cast("int")).alias("minus_one"),
            F.sum((F.size("individually_deleted") > 0).cast("int")).alias("holes"),
            F.sum(
                F.exists(
                    "individually_deleted", lambda r: r["lower"]["ledger_id"] != r["upper"]["ledger_id"]
                ).cast("int")
            ).alias("cross_ledger_holes"),
            F.sum((~F.array_contains("ids", F.col("mark_delete_position.ledger_id"))).cast("int")).alias(
                "md_trimmed"
            ),
            F.sort_array(F.collect_set("cursor_kind")).alias("kinds"),
            F.sum(F.col("is_replicated").cast("int")).alias("replicated"),
            F.sum((F.col("subscription_type") == "Failover").cast("int")).alias("failover"),
        )
        .first()
    )
    empty = ledgers.where(~F.col("is_current") & (F.col("entries") == 0)).count()
    assert m is not None and msg is not None and cur is not None
    assert m["types"] == [10, 11, 12, 13, 21, 22] and m["landed"] > 0
    assert all(msg[k] > 0 for k in ("batched", "keyless", "tombstones", "null_values", "txn")), msg.asDict()
    assert all(
        cur[k] > 0 for k in ("minus_one", "holes", "cross_ledger_holes", "md_trimmed", "replicated")
    ), cur.asDict()
    assert cur["failover"] > 0
    assert cur["kinds"] == ["compaction", "dedup", "reader", "replicator", "subscription"]
    assert empty > 0


def test_generate_tier_is_skewed(generated):
    stats = (
        _read(generated, "managed_ledgers")
        .agg(F.max("ledger_count").alias("top"), F.percentile_approx("ledger_count", 0.5).alias("median"))
        .first()
    )
    assert stats is not None and stats["top"] >= 10 * stats["median"]


def _sorted_rows(df: DataFrame) -> list[Any]:
    return sorted(df.collect(), key=lambda r: (r["cluster"], r["topic"], str(r)))


def test_tier_frames_are_deterministic_by_seed(spark, generated):
    same = tier_frames(spark, TIERS["s"], seed=SEED, export_date=DAY)
    other = tier_frames(spark, TIERS["s"], seed=SEED + 1, export_date=DAY)
    try:
        for table in ("cursors", "managed_ledgers"):
            written = _sorted_rows(_read(generated, table))
            assert _sorted_rows(same.frames[table]) == written
            assert _sorted_rows(other.frames[table]) != written
    finally:
        same.release()
        other.release()


#: Stages run by :func:`test_nightly_stages_run_on_tier_s`: all but ``plans`` (known failure, below).
NIGHTLY_STAGES = [s for s in ANALYTIC_STAGES if s != "plans"]


@pytest.mark.long  # ~10 min on the shared 2-core machine (every stage's fixed Spark cost)
def test_nightly_stages_run_on_tier_s(spark, generated):
    config = load_config(None, [f"storage.warehouse={generated['warehouse']}"])
    lines: list[str] = []
    outcomes = run_nightly(
        spark, config, export_dir=None, export_date=DAY, stages=NIGHTLY_STAGES, echo=lines.append
    )
    rows = {t: n for o in outcomes for t, n in o.rows_out.items()}
    main_outputs = (
        "cursor_backlog",
        "topic_backlog",
        "topic_pinning",
        "quota_status",
        "quota_evictions",
        "quota_producer_outcomes",
        "replication_positions",
        "replication_failover_duplicates",
        "replication_findings",
        "replication_snapshots",
        "replication_cache_replay",
        "compaction_horizons",
        "compaction_ledger",
        "compaction_summary",
        "failover_assignments",
        "failover_balance",
        "failover_what_ifs",
        "transactions",
        "transaction_holdback",
        "schema_verdicts",
        "schema_compatibility",
        "subscription_history",
        "topic_history",
        "subscription_status",
    )
    assert {t: rows.get(t, 0) for t in main_outputs if not rows.get(t)} == {}, lines
    tables: DeltaTables = generated["tables"]
    day = {"export_date": DAY}
    statuses = {
        r["status"]: r["n"]
        for r in tables.read("replication_snapshots", partition_filter=day)
        .groupBy("status")
        .count()
        .withColumnRenamed("count", "n")
        .collect()
    }
    states = {
        r["state"]
        for r in tables.read("transactions", partition_filter=day).select("state").distinct().collect()
    }
    assert statuses.get("complete", 0) > 0, statuses
    assert states == {"committed", "aborted", "open"}


@pytest.mark.long  # the plans stage on tier s (requests from the plan_requests table): minutes of Spark
def test_plans_stage_on_tier_s(spark, generated):
    config = load_config(None, [f"storage.warehouse={generated['warehouse']}"])
    outcomes = run_nightly(
        spark, config, export_dir=None, export_date=DAY, stages=["plans"], echo=lambda _: None
    )
    rows = outcomes[0].rows_out
    assert rows["skip_plans"] > 0 and rows["reader_starts"] > 0


def test_generating_a_subset_names_unknown_tables():
    with pytest.raises(ValueError, match="unknown table\\(s\\) entrys; choose from managed_ledgers"):
        generate_tier(None, None, "s", only=["ledgers", "entrys"])  # type: ignore[arg-type]
