# Databricks notebook source
# MAGIC %md
# MAGIC # pulsar-analytics · 05 failover, transactions, schemas
# MAGIC
# MAGIC * **Failover subscriptions** (docs §6): the active consumer of every partition, checked against the
# MAGIC   stats, the balance over consumers, and what-ifs (a consumer added/removed, consistent
# MAGIC   hashing switched).
# MAGIC * **Transactions** (§8): state of every transaction and what `maxReadPosition` holds back
# MAGIC   from dispatch.
# MAGIC * **Schemas** (§9): would each registered version be accepted in order, and which pairs can read
# MAGIC   each other.

# COMMAND ----------

# MAGIC %run ./00_setup

# COMMAND ----------

# `%run ./00_setup` defines spark, read, show, tables, RUN_DATE and CLUSTER_VERSIONS in this notebook.
# ruff: noqa: F821, E402
from pyspark.sql import functions as F

failover_balance = (
    read("failover_balance")
    .select(
        "cluster",
        "topic",
        "subscription",
        "partitions",
        "consumers",
        "max_partitions",
        "min_partitions",
        "imbalance",
        "idle_consumers",
    )
    .orderBy(F.col("imbalance").desc_nulls_last(), "cluster", "topic", "subscription")
)
show(failover_balance)

# COMMAND ----------

failover_assignments = read("failover_assignments")
assignment_mismatches = failover_assignments.where(~F.coalesce(F.col("matches_stats"), F.lit(True)))
show(assignment_mismatches)
failover_what_ifs = (
    read("failover_what_ifs")
    .groupBy("scenario")
    .agg(F.count("*").alias("partitions"), F.sum(F.col("active_changed").cast("int")).alias("active_changed"))
    .orderBy("scenario")
)
show(failover_what_ifs)

# COMMAND ----------

# MAGIC %md
# MAGIC ## Transactions
# MAGIC `transaction_states` straight from the library on the exported entries, then the stage's
# MAGIC hold-back table.

# COMMAND ----------

from pulsar_model.transactions import transaction_states

transaction_state_counts = (
    transaction_states(read("entries")).groupBy("cluster", "state").count().orderBy("cluster", "state")
)
show(transaction_state_counts)
transactions = read("transactions")
show(transactions.where("is_long_open").orderBy(F.col("open_age_ms").desc_nulls_last()))
transaction_holdback = (
    read("transaction_holdback")
    .select(
        "cluster",
        "topic",
        "open_txn_count",
        "oldest_open_txn_id",
        "max_read_position",
        "held_back_entries",
        "held_back_messages",
        "aborted_messages_skipped",
    )
    .orderBy(F.col("held_back_entries").desc_nulls_last(), "cluster", "topic")
)
show(transaction_holdback)

# COMMAND ----------

# MAGIC %md
# MAGIC ## Schemas

# COMMAND ----------

schema_verdicts = read("schema_verdicts").select(
    "cluster", "topic", "version", "schema_type", "strategy", "strategy_source", "verdict", "reasons"
)
show(schema_verdicts.orderBy("cluster", "topic", "version"))
compatibility_matrix = read("schema_compatibility").select(
    "cluster", "topic", "reader_version", "writer_version", "can_read", "reasons"
)
show(compatibility_matrix.where(~F.col("can_read")).orderBy("cluster", "topic", "reader_version"))

# COMMAND ----------

# MAGIC %md
# MAGIC ## In SQL: open transactions, oldest first, and incompatible schema versions
# MAGIC The tables are registered by name (00 setup); `pulsar_run_date` is the run date.

# COMMAND ----------

# MAGIC %sql
# MAGIC SELECT cluster, topic, txn_id, state, open_age_ms / 1000 AS open_age_seconds, is_long_open
# MAGIC FROM transactions
# MAGIC WHERE export_date = pulsar_run_date AND state = 'open'
# MAGIC ORDER BY open_age_ms DESC NULLS LAST, cluster, topic, txn_id

# COMMAND ----------

# MAGIC %sql
# MAGIC SELECT cluster, topic, version, verdict, reasons
# MAGIC FROM schema_verdicts
# MAGIC WHERE export_date = pulsar_run_date AND verdict = 'incompatible'
# MAGIC ORDER BY cluster, topic, version
