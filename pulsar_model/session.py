"""SparkSession construction for jobs, tests and the laptop default (driver-side only)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession

from pulsar_model.errors import MachineSetupError

#: Settings every session gets: UTC everywhere, Arrow on, microsecond Parquet timestamps (INT96 has no
#: statistics, PLATFORM.md), small shuffles for laptop-sized data.
BASE_CONF: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    # C1 only starts fast, but its default 48 MiB code cache filled within 97 s of the tier-s benchmark
    # ("CodeCache is full. Compiler has been disabled": everything after runs interpreted); 256 MiB.
    "spark.driver.extraJavaOptions": (
        "-Duser.timezone=UTC -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=256m"
    ),
    "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.pyspark.fallback.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.adaptive.enabled": "true",
    # Spark 4.1: a union that advertises its children's hash partitioning can run as a plain union after
    # exchange reuse, and a join above it fails "Can't zip RDDs with unequal numbers of partitions"
    # (compaction_trigger over estimated_backlog_size in the notebooks); off = the 4.0 behaviour.
    "spark.sql.unionOutputPartitioning": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.ansi.enabled": "false",
    "spark.sql.debug.maxToStringFields": "1000",
}


def check_java() -> str:
    """Return the ``java -version`` banner, or raise with what to install when Java 17+ is missing."""
    java = (
        shutil.which("java", path=os.path.join(os.environ["JAVA_HOME"], "bin"))
        if "JAVA_HOME" in os.environ
        else None
    )
    java = java or shutil.which("java")
    hint = (
        "Spark 4 needs Java 17 or newer. Install it, e.g. `apt-get install openjdk-17-jre-headless` on "
        "Debian/Ubuntu or `brew install openjdk@17` on macOS, and make `java` reachable on PATH or via "
        "JAVA_HOME."
    )
    if java is None:
        raise MachineSetupError(f"No `java` found on PATH. {hint}")
    out = subprocess.run([java, "-version"], capture_output=True, text=True, check=False).stderr
    first = out.splitlines()[0] if out else ""
    try:
        quoted = first.split('"')[1]
        major = int(quoted.split(".")[0]) if not quoted.startswith("1.") else int(quoted.split(".")[1])
    except (IndexError, ValueError):
        return first
    if major < 17:
        raise MachineSetupError(f"Found Java {quoted} at {java}. {hint}")
    return first


def build_session(
    app_name: str = "pulsar-analytics",
    master: str | None = "local[2]",
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """Return a SparkSession with the project's base settings plus ``conf``.

    ``master=None`` leaves the master to ``spark-submit``/Databricks (an existing session is reused).
    """
    if master is not None and master.startswith("local"):
        check_java()
        # Python workers must run the driver's interpreter (the venv with pandas/pyarrow), not `python3`.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        # Local mode binds to loopback only (no need to resolve or expose the host's address).
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    settings = {**BASE_CONF, **(conf or {})}
    if master is not None and master.startswith("local"):
        # Quiet local runs: warnings and errors only (clusters keep their own log4j configuration).
        log4j = Path(__file__).resolve().parent / "resources" / "log4j2.properties"
        settings["spark.driver.extraJavaOptions"] = (
            f"{settings['spark.driver.extraJavaOptions']} -Dlog4j2.configurationFile=file:{log4j}"
        )
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
