# Databricks notebook source
# MAGIC %md
# MAGIC # pulsar-analytics · 00 setup
# MAGIC
# MAGIC Builds what every other notebook uses: `spark`, the Delta tables (`tables`), the run date (`RUN_DATE`)
# MAGIC and two helpers, `read(name)` (one table, restricted to the run date) and `show(df)`.
# MAGIC
# MAGIC **Settings** (Databricks widgets; locally, variables defined before this notebook runs win):
# MAGIC
# MAGIC | widget | meaning |
# MAGIC |---|---|
# MAGIC | `warehouse` | folder/URI of the Delta tables (`dbfs:/...`, `s3a://...`, a local folder) |
# MAGIC | `generate_demo` | `true`: write the demo export, run the nightly job into `warehouse` |
# MAGIC | `export_dir` | where the demo export goes (a local or FUSE path, e.g. `/dbfs/tmp/...`) |
# MAGIC | `demo_scale` | multiplies the demo's topics per namespace (as `generate-demo --scale`) |
# MAGIC | `run_date` | `YYYY-MM-DD`; empty = the newest ingested export date |
# MAGIC
# MAGIC On a warehouse the nightly job already filled, set `generate_demo` to `false` and point `warehouse`
# MAGIC at it.

# COMMAND ----------

# MAGIC %pip install /Workspace/Shared/pulsar-analytics/pulsar_analytics-0.1.0-py3-none-any.whl

# COMMAND ----------

import dataclasses
import datetime as dt
import tempfile
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pulsar_model.demo import DemoSpec, generate_demo
from pulsar_model.pipeline.config import load_config
from pulsar_model.pipeline.nightly import format_summary, run_nightly
from pulsar_model.tables.delta_io import DeltaTables


def setting(name: str, default: str) -> str:
    """A predefined variable ``NAME`` (local runs, tests), else the Databricks widget, else ``default``."""
    predefined = globals().get(name.upper())
    if predefined is not None:
        return str(predefined)
    widgets = globals().get("dbutils")
    if widgets is not None:
        widgets.widgets.text(name, default)
        return str(widgets.widgets.get(name))
    return default


_scratch = tempfile.mkdtemp(prefix="pulsar-analytics-notebooks-")
WAREHOUSE = setting("warehouse", f"{_scratch}/warehouse")
EXPORT_DIR = setting("export_dir", f"{_scratch}/demo-export")
GENERATE_DEMO = setting("generate_demo", "true").strip().lower() in {"true", "yes", "1"}
DEMO_SCALE = float(setting("demo_scale", "0.25"))
print(f"warehouse={WAREHOUSE} export_dir={EXPORT_DIR} generate_demo={GENERATE_DEMO}")

# COMMAND ----------

# MAGIC %md
# MAGIC ## The session
# MAGIC Databricks (and the notebook test) predefine `spark`; elsewhere the project's local session is built.

# COMMAND ----------

if "spark" not in globals():
    from pulsar_model.pipeline.session import build_session

    spark = build_session("pulsar-analytics-notebooks", master="local[2]")

# Spark 4.1 bug: a union that passes its children's hash partitioning through
# (spark.sql.unionOutputPartitioning, new in 4.1) can run as a plain union of 2N partitions after exchange
# reuse, and the join above it fails with "Can't zip RDDs with unequal numbers of partitions" (seen on
# 04_compaction's compaction_trigger). The pre-4.1 union plan avoids it.
spark.conf.set("spark.sql.unionOutputPartitioning", "false")


def show(df: DataFrame, rows: int = 20) -> None:
    """Databricks' ``display`` (tables and charts) when available, else a plain text table."""
    databricks_display = globals().get("display")
    if callable(databricks_display):
        databricks_display(df.limit(rows))
    else:
        df.show(rows, truncate=False)


# COMMAND ----------

# MAGIC %md
# MAGIC ## Demo export and the nightly pipeline
# MAGIC `generate_demo` simulates three Pulsar clusters (ledgers, cursors, batches, markers, transactions,
# MAGIC replicated subscriptions) and writes the raw admin-tool exports; `run_nightly` ingests them and runs
# MAGIC every analytics stage, one `run_log` row per stage.

# COMMAND ----------

config = load_config(None, [f"storage.warehouse={WAREHOUSE}", "spark.master=null"])
if GENERATE_DEMO:
    demo_spec = globals().get("DEMO_SPEC") or DemoSpec()
    if "DEMO_SPEC" not in globals() and DEMO_SCALE != 1.0:
        demo_spec = dataclasses.replace(
            demo_spec,
            topics_per_namespace=max(1, round(demo_spec.topics_per_namespace * DEMO_SCALE)),
            replicated_topics=max(1, round(demo_spec.replicated_topics * DEMO_SCALE)),
        )
    demo_summary = generate_demo(EXPORT_DIR, demo_spec, overwrite=True)
    print(f"demo: {demo_summary.topics} topic partitions, {demo_summary.entries} entries")
    outcomes = run_nightly(spark, config, export_dir=EXPORT_DIR)
    print(format_summary(outcomes))

# COMMAND ----------

tables = DeltaTables(spark, WAREHOUSE, backend=config.storage.delta_backend)  # type: ignore[arg-type]
_run_date_text = setting("run_date", "").strip()
if _run_date_text:
    RUN_DATE = dt.date.fromisoformat(_run_date_text)
else:
    _newest = tables.read("managed_ledgers").agg(F.max("export_date")).first()
    if _newest is None or _newest[0] is None:
        raise ValueError(f"No ingested export in {WAREHOUSE}: set generate_demo=true or run the nightly job")
    RUN_DATE = _newest[0]
DAY: dict[str, Any] = {"export_date": RUN_DATE.isoformat()}


def read(name: str) -> DataFrame:
    """The run date's rows of table ``name`` (every pulsar-analytics table is partitioned by export_date)."""
    return tables.read(name, partition_filter=DAY)


# Broker version of every cluster (the analyses depend on it, docs §0.3): a handful of rows.
CLUSTER_VERSIONS = {
    row.cluster: row.pulsar_version
    for row in read("managed_ledgers").select("cluster", "pulsar_version").distinct().collect()
}
print(f"run date {RUN_DATE}; clusters and broker versions: {CLUSTER_VERSIONS}")
run_log = tables.read("run_log").where(F.col("run_date") == F.lit(RUN_DATE))
show(run_log.select("run_id", "stage", "status", "started_at", "finished_at", "error"))
