# Databricks notebook source
# MAGIC %md
# MAGIC # pulsar-analytics · 03 replicated subscriptions
# MAGIC
# MAGIC * **Positions** (docs §4): each source cursor's mark-delete, the snapshot that applies, and the remote
# MAGIC   cursor it should have produced against the one exported.
# MAGIC * **Failover duplicates**: messages a consumer switching cluster now would receive again.
# MAGIC * **Findings**: stall and risk detectors (no snapshots, update not delivered, remote cursor behind
# MAGIC   ...).

# COMMAND ----------

# MAGIC %run ./00_setup

# COMMAND ----------

# `%run ./00_setup` defines spark, read, show, tables, RUN_DATE and CLUSTER_VERSIONS in this notebook.
# ruff: noqa: F821
from pyspark.sql import functions as F

from pulsar_model.report.queries import severity_rank  # critical, warning, info: by rank, not by name

replication_positions = read("replication_positions")
replication_status = (
    replication_positions.groupBy("source_cluster", "target_cluster", "status")
    .agg(
        F.count("*").alias("subscriptions"),
        F.max("remote_behind_entries").alias("max_remote_behind_entries"),
        F.max("seconds_since_last_update").alias("max_seconds_since_last_update"),
    )
    .orderBy("source_cluster", "target_cluster", "status")
)
show(replication_status)

# COMMAND ----------

show(
    replication_positions.select(
        "topic",
        "subscription",
        "source_cluster",
        "target_cluster",
        "source_mark_delete_position",
        "applied_snapshot_id",
        "expected_remote_mark_delete",
        "actual_remote_mark_delete",
        "remote_behind_entries",
        "status",
        "status_reason",
    ).orderBy("topic", "subscription", "source_cluster", "target_cluster")
)

# COMMAND ----------

# MAGIC %md
# MAGIC ## Duplicates after a failover, per subscription
# MAGIC Messages already consumed on the source that the target cluster would deliver again.

# COMMAND ----------

failover_duplicates = (
    read("replication_failover_duplicates")
    .groupBy("subscription", "source_cluster", "target_cluster")
    .agg(
        F.count("*").alias("topics"),
        F.sum("failover_duplicate_messages").alias("duplicate_messages"),
        F.sum("failover_duplicate_bytes").alias("duplicate_bytes"),
        F.min(F.col("target_entries_complete").cast("int")).cast("boolean").alias("complete"),
    )
    .orderBy(
        F.col("duplicate_messages").desc_nulls_last(), "subscription", "source_cluster", "target_cluster"
    )
)
show(failover_duplicates)

# COMMAND ----------

replication_findings = read("replication_findings")
findings_by_kind = (
    replication_findings.groupBy("kind", "severity")
    .count()
    .orderBy(severity_rank(F.col("severity")), F.col("count").desc(), "kind")
)
show(findings_by_kind)
show(
    replication_findings.select(
        "cluster", "topic", "kind", "severity", "subscription", "related_cluster", "detail"
    ).orderBy(severity_rank(F.col("severity")), "kind", "cluster", "topic")
)
show(read("replication_snapshots"))

# COMMAND ----------

# MAGIC %md
# MAGIC ## In SQL: findings, most severe first
# MAGIC Severity by rank (critical, warning, info), not alphabetically.

# COMMAND ----------

# MAGIC %sql
# MAGIC SELECT severity, kind, cluster, topic, subscription, related_cluster, detail
# MAGIC FROM replication_findings
# MAGIC WHERE export_date = pulsar_run_date
# MAGIC ORDER BY CASE severity WHEN 'critical' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END, kind, cluster, topic
