# Databricks notebook source
# MAGIC %md
# MAGIC # pulsar-analytics · 01 backlog and dry-run plans
# MAGIC
# MAGIC * **Backlog** (docs §1.8, §2): the precise backlog of every cursor beside the broker's estimate and
# MAGIC   its `msgBacklog` counter, and per topic the `backlogSize` estimate beside the exported stats.
# MAGIC * **Pinning** (docs §1.11): the ledgers the slowest durable cursor alone keeps alive.
# MAGIC * **Plans** (docs §1, §7): what skip / clear-backlog / reset / reader-start requests would do, as a
# MAGIC   dry run.

# COMMAND ----------

# MAGIC %run ./00_setup

# COMMAND ----------

# `%run ./00_setup` defines spark, read, show, tables, RUN_DATE and CLUSTER_VERSIONS in this notebook.
# ruff: noqa: F821, E402
from pyspark.sql import functions as F

# COMMAND ----------

# MAGIC %md
# MAGIC ## Estimate vs exact, per cursor
# MAGIC `estimate_minus_exact_bytes` is how far the broker's size estimate (§2.4) is from the bytes the
# MAGIC entries export proves unacknowledged; `counter_minus_precise` is the `msgBacklog` counter's drift.

# COMMAND ----------

cursor_backlog = read("cursor_backlog")
backlog_estimate_vs_exact = cursor_backlog.select(
    "cluster",
    "topic",
    "cursor_name",
    "pulsar_version",
    "backlog_entries",
    "stats_msg_backlog",
    "counter_minus_precise",
    "estimated_backlog_size_bytes",
    "backlog_bytes",
    "estimate_minus_exact_bytes",
).orderBy(F.abs(F.coalesce("estimate_minus_exact_bytes", F.lit(0))).desc(), "cluster", "topic", "cursor_name")
show(backlog_estimate_vs_exact)

# COMMAND ----------

# MAGIC %md
# MAGIC ## Backlog per cluster
# MAGIC One row per cluster: cursors, entries behind, and how often the estimate misses the exact size.

# COMMAND ----------

backlog_by_cluster = (
    cursor_backlog.groupBy("cluster", "pulsar_version")
    .agg(
        F.count("*").alias("cursors"),
        F.sum("backlog_entries").alias("backlog_entries"),
        F.sum("backlog_bytes").alias("exact_backlog_bytes"),
        F.sum("estimated_backlog_size_bytes").alias("estimated_backlog_bytes"),
        F.sum((F.coalesce("estimate_minus_exact_bytes", F.lit(0)) != 0).cast("int")).alias("estimate_off"),
    )
    .orderBy("cluster")
)
show(backlog_by_cluster)

# COMMAND ----------

# MAGIC %md
# MAGIC ## The same estimate straight from the library
# MAGIC Every analysis is a pure DataFrame transform; here `estimated_backlog_size` (§2.3) on the input tables
# MAGIC of one cluster, with that cluster's broker version.

# COMMAND ----------

from pulsar_model.backlog import estimated_backlog_size

first_cluster = sorted(CLUSTER_VERSIONS)[0]
in_cluster = F.col("cluster") == first_cluster
estimated_now = estimated_backlog_size(
    read("managed_ledgers").where(in_cluster),
    read("ledgers").where(in_cluster),
    read("cursors").where(in_cluster),
    pulsar_version=CLUSTER_VERSIONS[first_cluster],
)
show(estimated_now)

# COMMAND ----------

# MAGIC %md
# MAGIC ## Pinned ledgers
# MAGIC Topics whose slowest cursor alone keeps ledgers from being trimmed, biggest first.

# COMMAND ----------

topic_pinning = read("topic_pinning")
pinned_topics = topic_pinning.select(
    "cluster",
    "topic",
    "slowest_cursor_name",
    "slowest_mark_delete_position",
    "pinned_ledgers",
    "pinned_bytes",
    "trimmable_now_ledgers",
    "trimmable_now_bytes",
).orderBy(F.col("pinned_bytes").desc_nulls_last(), "cluster", "topic")
show(pinned_topics)
show(read("unmoved_cursors"))

# COMMAND ----------

# MAGIC %md
# MAGIC ## Dry-run plans
# MAGIC `skip_plans`: where each cursor would land and what it would skip or redeliver; `reader_starts`: the
# MAGIC first message a reader would get. Nothing is sent to a broker.

# COMMAND ----------

skip_plans = read("skip_plans").select(
    "request_id",
    "cluster",
    "topic",
    "action",
    "cursor_name",
    "mark_delete_position_before",
    "mark_delete_position",
    "skipped_entries",
    "skipped_messages",
    "redelivered_entries",
    "error",
)
show(skip_plans.orderBy("request_id"))
reader_starts = read("reader_starts").select(
    "request_id",
    "cluster",
    "topic",
    "start_kind",
    "start_message_id",
    "inclusive",
    "first_delivered",
    "error",
)
show(reader_starts.orderBy("request_id"))

# COMMAND ----------

# MAGIC %md
# MAGIC ## In SQL: the subscriptions furthest behind
# MAGIC The tables are registered by name (00 setup); `pulsar_run_date` is the run date.

# COMMAND ----------

# MAGIC %sql
# MAGIC SELECT cluster, topic, cursor_name AS subscription, backlog_entries, backlog_bytes,
# MAGIC        estimated_backlog_size_bytes, mark_delete_position_str AS mark_delete,
# MAGIC        oldest_unacked_publish_time, oldest_unacked_age_seconds
# MAGIC FROM cursor_backlog
# MAGIC WHERE export_date = pulsar_run_date AND error IS NULL
# MAGIC ORDER BY backlog_bytes DESC NULLS LAST, cluster, topic, subscription
# MAGIC LIMIT 20
