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

#: Driver JVM options of a session that works on data (jobs, notebooks, benchmarks): the full tiered JIT
#: (C2) and the parallel collector. Benchmark tier l's backlog stage (local[2], 8 GiB heap, same host):
#: 222 s / 395 CPU s with the C1-only JIT and the serial collector, 184 s with C2 and G1 (the JVM's
#: default), 153 s / 297 CPU s with C2 and the parallel collector
#: (``benchmarks/results/jvm_options_before_after.json``).
THROUGHPUT_JAVA_OPTIONS = "-Duser.timezone=UTC -XX:+UseParallelGC -XX:ReservedCodeCacheSize=256m"
#: Driver JVM options of short sessions on tiny data (the tests, ``build_session(fast_start=True)``): C1
#: only and the serial collector start faster and use half the JVM CPU there (PLATFORM.md: 30 tests
#: 32 s -> 24 s), and cost about a third more time on real data. C1's default 48 MiB code cache filled
#: within 97 s of the tier-s benchmark ("CodeCache is full. Compiler has been disabled": everything
#: after ran interpreted), hence 256 MiB in both.
FAST_START_JAVA_OPTIONS = (
    "-Duser.timezone=UTC -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=256m"
)

#: Settings every session gets: UTC everywhere, Arrow on, microsecond Parquet timestamps (INT96 has no
#: statistics, PLATFORM.md), small shuffles for laptop-sized data.
BASE_CONF: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.extraJavaOptions": THROUGHPUT_JAVA_OPTIONS,
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


def session_settings(
    master: str | None = "local[2]",
    conf: Mapping[str, str] | None = None,
    *,
    fast_start: bool = False,
) -> dict[str, str]:
    """The Spark settings :func:`build_session` applies: :data:`BASE_CONF`, the driver JVM options
    (:data:`FAST_START_JAVA_OPTIONS` with ``fast_start``, else :data:`THROUGHPUT_JAVA_OPTIONS`), then
    ``conf``, which wins. A local master also gets the project's quiet log4j configuration."""
    jvm = {"spark.driver.extraJavaOptions": FAST_START_JAVA_OPTIONS} if fast_start else {}
    settings = {**BASE_CONF, **jvm, **(conf or {})}
    if master is not None and master.startswith("local"):
        # Quiet local runs: warnings and errors only (clusters keep their own log4j configuration).
        log4j = Path(__file__).resolve().parents[1] / "resources" / "log4j2.properties"
        settings["spark.driver.extraJavaOptions"] = (
            f"{settings['spark.driver.extraJavaOptions']} -Dlog4j2.configurationFile=file:{log4j}"
        )
    return settings


def build_session(
    app_name: str = "pulsar-analytics",
    master: str | None = "local[2]",
    conf: Mapping[str, str] | None = None,
    *,
    fast_start: bool = False,
) -> SparkSession:
    """Return a SparkSession with the project's base settings plus ``conf`` (:func:`session_settings`).

    ``master=None`` leaves the master to ``spark-submit``/Databricks (an existing session is reused).
    ``fast_start``: the driver JVM options for short sessions on tiny data (the tests); jobs, notebooks
    and benchmarks keep the throughput options.
    """
    if master is not None and master.startswith("local"):
        check_java()
        # Python workers must run the driver's interpreter (the venv with pandas/pyarrow), not `python3`.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        # Local mode binds to loopback only (no need to resolve or expose the host's address).
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    settings = session_settings(master, conf, fast_start=fast_start)
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
