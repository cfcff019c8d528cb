# Databricks notebook source
# MAGIC %md
# MAGIC # pulsar-analytics · 02 backlog quotas
# MAGIC
# MAGIC * **Effective quota** (docs §3.2): which limit the broker applies to each topic and where it
# MAGIC   comes from.
# MAGIC * **Proximity and breaches** (§3.4): how close each topic is to its size/time limit,
# MAGIC   estimated and exact.
# MAGIC * **Eviction preview** (§3.6, §3.7): what `consumer_backlog_eviction` would move and lose.
# MAGIC * **Producer outcomes** (§3.5): what a producer would see under the other policies.

# COMMAND ----------

# MAGIC %run ./00_setup

# COMMAND ----------

# `%run ./00_setup` defines spark, read, show, tables, RUN_DATE and CLUSTER_VERSIONS in this notebook.
# ruff: noqa: F821, E402
from pyspark.sql import functions as F

# COMMAND ----------

# MAGIC %md
# MAGIC ## Proximity: percent of quota
# MAGIC One row per enabled limit, closest to the limit first.

# COMMAND ----------

quota_status = read("quota_status")
quota_near_limit = (
    quota_status.where("check_enabled")
    .select(
        "cluster",
        "topic",
        "quota_type",
        "policy",
        "source_level",
        "limit_size_bytes",
        "limit_time_seconds",
        "estimated_backlog_size_bytes",
        "backlog_age_seconds",
        "percent_of_quota",
        "exceeded",
        "exact_exceeded",
        "reason",
    )
    .orderBy(F.col("percent_of_quota").desc_nulls_last(), "cluster", "topic", "quota_type")
)
show(quota_near_limit)

# COMMAND ----------

quota_overview = (
    quota_status.groupBy("cluster", "quota_type", "policy")
    .agg(
        F.count("*").alias("topics"),
        F.sum(F.col("check_enabled").cast("int")).alias("enabled"),
        F.sum(F.col("exceeded").cast("int")).alias("exceeded"),
        F.sum(F.col("exact_exceeded").cast("int")).alias("exact_exceeded"),
        F.max("percent_of_quota").alias("max_percent_of_quota"),
    )
    .orderBy("cluster", "quota_type", "policy")
)
show(quota_overview)

# COMMAND ----------

# MAGIC %md
# MAGIC ## Where the limit comes from, straight from the library
# MAGIC `effective_quotas` resolves topic > namespace > broker defaults for one cluster's broker version.

# COMMAND ----------

from pulsar_model.quota import effective_quotas

first_cluster = sorted(CLUSTER_VERSIONS)[0]
in_cluster = F.col("cluster") == first_cluster
effective_now = effective_quotas(
    read("backlog_quotas").where(in_cluster),
    read("managed_ledgers").where(in_cluster),
    pulsar_version=CLUSTER_VERSIONS[first_cluster],
)
show(effective_now)

# COMMAND ----------

# MAGIC %md
# MAGIC ## Eviction preview
# MAGIC Per topic and limit: cursors the what-if eviction moves and the entries/messages/bytes
# MAGIC they would lose.

# COMMAND ----------

quota_evictions = read("quota_evictions")
eviction_preview = (
    quota_evictions.groupBy("cluster", "topic", "quota_type", "precise")
    .agg(
        F.count("cursor_name").alias("cursors"),
        F.sum("skipped_entries").alias("skipped_entries"),
        F.sum("lost_messages").alias("lost_messages"),
        F.sum("lost_bytes").alias("lost_bytes"),
        F.max("stop_reason").alias("stop_reason"),
    )
    .orderBy(F.col("lost_bytes").desc_nulls_last(), "cluster", "topic", "quota_type")
)
show(eviction_preview)

# COMMAND ----------

producer_outcomes = read("quota_producer_outcomes").select(
    "cluster",
    "topic",
    "handled_type",
    "handled_policy",
    "producers_disconnected",
    "new_producers_blocked",
    "new_producer_error_name",
    "client_exception",
    "reason",
)
show(producer_outcomes.orderBy("cluster", "topic"))

# COMMAND ----------

# MAGIC %md
# MAGIC ## In SQL: quotas at 80% or more
# MAGIC The tables are registered by name (00 setup); `pulsar_run_date` is the run date.

# COMMAND ----------

# MAGIC %sql
# MAGIC SELECT cluster, topic, quota_type, policy, percent_of_quota, exceeded, exact_exceeded, reason
# MAGIC FROM quota_status
# MAGIC WHERE export_date = pulsar_run_date AND check_enabled AND percent_of_quota >= 80
# MAGIC ORDER BY percent_of_quota DESC, cluster, topic, quota_type
