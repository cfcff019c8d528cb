# Databricks notebook source
# MAGIC %md
# MAGIC # pulsar-analytics · 00 setup
# MAGIC
# MAGIC Run once per workspace (or after the nightly job wrote a new date); every area notebook starts with
# MAGIC `%run ./00_setup`, which then only reads. It builds `spark`, the Delta tables (`tables`), the run date
# MAGIC (`RUN_DATE`, also the SQL session variable `pulsar_run_date`) and two helpers, `read(name)` (one
# MAGIC table, restricted to the run date) and `show(df)`; and it makes every table queryable by name from
# MAGIC `%sql` cells: registered in the catalog schema `schema` (`CREATE TABLE ... USING DELTA LOCATION`)
# MAGIC when the session has Delta Lake's catalog (Databricks), else as temporary views.
# MAGIC
# MAGIC **Settings** (Databricks widgets; locally, variables defined before this notebook runs win):
# MAGIC
# MAGIC * `base_path`: where the demo export and the warehouse go by default; on Databricks
# MAGIC   `dbfs:/pulsar-analytics`, which every executor sees (a folder on the driver would not be).
# MAGIC * `warehouse`: folder/URI of the Delta tables (`dbfs:/...`, `s3a://...`, `abfss://...`, a local
# MAGIC   folder); default `<base_path>/warehouse`.
# MAGIC * `export_dir`: where the demo export goes (the driver writes it with Python: a `dbfs:/` path is
# MAGIC   written through its `/dbfs/` mount); default `<base_path>/demo-export`.
# MAGIC * `generate_demo`: `auto` (default) writes the demo export and runs the nightly job only while the
# MAGIC   warehouse holds no ingested date; `true` always does (replacing the demo's date); `false` never.
# MAGIC * `demo_scale`: multiplies the demo's topics per namespace (as `generate-demo --scale`).
# MAGIC * `run_date`: `YYYY-MM-DD`; empty = the newest ingested export date.
# MAGIC * `schema`: the catalog schema the tables are registered in (default `pulsar_analytics`); empty =
# MAGIC   temporary views only.
# MAGIC
# MAGIC On a warehouse the nightly job already fills, point `warehouse` at it: `auto` then generates nothing.

# COMMAND ----------

# MAGIC %pip install /Workspace/Shared/pulsar-analytics/pulsar_analytics-0.1.0-py3-none-any.whl

# COMMAND ----------

import dataclasses
import datetime as dt
import os
import re
import tempfile
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pulsar_model.demo import DemoSpec, generate_demo
from pulsar_model.pipeline.config import load_config
from pulsar_model.pipeline.nightly import format_summary, ingested_dates, run_nightly
from pulsar_model.tables import contracts
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


ON_DATABRICKS = globals().get("dbutils") is not None
# A DBFS path is visible to every executor; locally, one fixed folder so that a second run reuses the data.
BASE_PATH = setting(
    "base_path",
    "dbfs:/pulsar-analytics"
    if ON_DATABRICKS
    else os.path.join(tempfile.gettempdir(), "pulsar-analytics-notebooks"),
)


def local_path(uri: str) -> str:
    """The path Python code on the driver writes ``uri`` at (``dbfs:/x`` -> ``/dbfs/x``, FUSE)."""
    return "/dbfs/" + uri.removeprefix("dbfs:").lstrip("/") if uri.startswith("dbfs:") else uri


WAREHOUSE = setting("warehouse", f"{BASE_PATH.rstrip('/')}/warehouse")
EXPORT_DIR = local_path(setting("export_dir", f"{BASE_PATH.rstrip('/')}/demo-export"))
GENERATE_DEMO = setting("generate_demo", "auto").strip().lower()
if GENERATE_DEMO not in {"auto", "true", "false"}:
    raise ValueError(f"generate_demo must be auto, true or false, not {GENERATE_DEMO!r}")
DEMO_SCALE = float(setting("demo_scale", "0.25"))
SCHEMA = setting("schema", "pulsar_analytics").strip()
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
# MAGIC When `generate_demo` asks for it (`auto`: only while the warehouse is empty), the demo simulates
# MAGIC three Pulsar clusters (ledgers, cursors, batches, markers, transactions, replicated subscriptions)
# MAGIC and writes the raw admin-tool exports; `run_nightly` ingests them and runs every analytics stage,
# MAGIC one `run_log` row per stage. The area notebooks run this notebook again and find the data there:
# MAGIC nothing is recomputed.

# COMMAND ----------

config = load_config(None, [f"storage.warehouse={WAREHOUSE}", "spark.master=null"])
tables = DeltaTables(spark, WAREHOUSE, backend=config.storage.delta_backend)  # type: ignore[arg-type]
if GENERATE_DEMO == "true" or (GENERATE_DEMO == "auto" and not ingested_dates(tables)):
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
else:
    print(f"using the tables already in {WAREHOUSE} (generate_demo={GENERATE_DEMO})")

# COMMAND ----------

_dates = ingested_dates(tables)
_run_date_text = setting("run_date", "").strip()
if not _dates:
    raise ValueError(f"No ingested export in {WAREHOUSE}: set generate_demo=auto or run the nightly job")
RUN_DATE = dt.date.fromisoformat(_run_date_text) if _run_date_text else _dates[-1]
if RUN_DATE not in _dates:
    raise ValueError(f"No ingested data for {RUN_DATE} in {WAREHOUSE}; dates with data: {_dates[-10:]}")
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

# COMMAND ----------

# MAGIC %md
# MAGIC ## Tables by name, for `%sql` cells
# MAGIC Every table of the warehouse becomes `<schema>.<table>` (the current schema afterwards, so `%sql`
# MAGIC cells name tables alone): an external Delta table over the warehouse folder, registered once; the
# MAGIC tables keep their data where the nightly job writes it. Without Delta Lake's catalog (a local session)
# MAGIC or without the right to create the schema, temporary views of the same names serve the same cells.
# MAGIC `pulsar_run_date` is a SQL session variable holding `RUN_DATE`.

# COMMAND ----------

TABLE_NAMES = [name for name in contracts.table_names() if tables.exists(name)]


def register_tables(schema: str) -> str:
    """Register every table in ``schema`` (external Delta tables) or, failing that, as temporary views;
    returns how they were registered."""
    if schema and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?", schema):
        raise ValueError(f"schema must be a plain (catalog.)schema name, not {schema!r}")
    if schema and tables.backend == "spark":
        try:
            spark.sql(f"CREATE SCHEMA IF NOT EXISTS {schema}")
            for name in TABLE_NAMES:
                location = tables.location(name).replace("'", "\\'")
                spark.sql(f"CREATE TABLE IF NOT EXISTS {schema}.{name} USING DELTA LOCATION '{location}'")
            spark.sql(f"USE {schema}")
            return f"catalog schema {schema}"
        except Exception as exc:  # no metastore, no permission, Unity Catalog without an external location
            print(f"could not register the tables in {schema} ({type(exc).__name__}: {str(exc)[:200]})")
    for name in TABLE_NAMES:
        tables.read(name).createOrReplaceTempView(name)
    return "temporary views"


print(f"{len(TABLE_NAMES)} tables as {register_tables(SCHEMA)}: {', '.join(TABLE_NAMES)}")
spark.sql(f"DECLARE OR REPLACE VARIABLE pulsar_run_date DATE DEFAULT DATE'{RUN_DATE.isoformat()}'")
