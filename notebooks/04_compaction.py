# Databricks notebook source
# MAGIC %md
# MAGIC # pulsar-analytics · 04 compaction
# MAGIC
# MAGIC * **Preview** (docs §5): what the two-phase compactor would keep per key, tombstones and key-less
# MAGIC   messages included, and what that saves.
# MAGIC * **Trigger** (§5.3): would the broker's threshold check start a compaction now (topic > namespace >
# MAGIC   broker threshold, strict `>`)?

# COMMAND ----------

# MAGIC %run ./00_setup

# COMMAND ----------

# `%run ./00_setup` defines spark, read, show, tables, RUN_DATE and CLUSTER_VERSIONS in this notebook.
# ruff: noqa: F821, E402
from pyspark.sql import functions as F

compaction_summary = read("compaction_summary")
compaction_savings = compaction_summary.select(
    "cluster",
    "topic",
    "distinct_keys",
    "tombstones",
    "messages_before",
    "messages_after",
    "payload_bytes_before",
    "payload_bytes_after",
    "payload_bytes_saved",
    "savings_ratio",
    "dirty_ratio",
    "would_trigger",
).orderBy(F.col("payload_bytes_saved").desc_nulls_last(), "cluster", "topic")
show(compaction_savings)

# COMMAND ----------

# MAGIC %md
# MAGIC ## Savings per cluster

# COMMAND ----------

savings_by_cluster = (
    compaction_summary.groupBy("cluster")
    .agg(
        F.count("*").alias("topics"),
        F.sum("payload_bytes_before").alias("payload_bytes_before"),
        F.sum("payload_bytes_saved").alias("payload_bytes_saved"),
        F.sum(F.col("would_trigger").cast("int")).alias("would_trigger"),
    )
    .withColumn("savings_ratio", F.col("payload_bytes_saved") / F.col("payload_bytes_before"))
    .orderBy("cluster")
)
show(savings_by_cluster)

# COMMAND ----------

# MAGIC %md
# MAGIC ## The trigger with a threshold you choose, straight from the library
# MAGIC The stage uses `compaction.*` of the config (0 = off); here every topic of one cluster is checked
# MAGIC against a 1 KiB broker threshold to see which would compact.

# COMMAND ----------

from pulsar_model.compaction import CompactionThresholds, compaction_trigger

first_cluster = sorted(CLUSTER_VERSIONS)[0]
in_cluster = F.col("cluster") == first_cluster
compaction_triggers = compaction_trigger(
    read("managed_ledgers").where(in_cluster),
    read("ledgers").where(in_cluster),
    read("cursors").where(in_cluster),
    thresholds=CompactionThresholds.parse(1024, {}, {}),
    pulsar_version=CLUSTER_VERSIONS[first_cluster],
)
show(compaction_triggers)

# COMMAND ----------

show(read("compaction_horizons"))

# COMMAND ----------

# MAGIC %md
# MAGIC ## In SQL: where compaction saves the most
# MAGIC The tables are registered by name (00 setup); `pulsar_run_date` is the run date.

# COMMAND ----------

# MAGIC %sql
# MAGIC SELECT cluster, topic, payload_bytes_before, payload_bytes_after, payload_bytes_saved, savings_ratio,
# MAGIC        would_trigger
# MAGIC FROM compaction_summary
# MAGIC WHERE export_date = pulsar_run_date
# MAGIC ORDER BY payload_bytes_saved DESC NULLS LAST, cluster, topic
# MAGIC LIMIT 20
