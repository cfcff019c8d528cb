"""SparkSession construction for jobs, tests and the laptop default (driver-side only)."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession

from pulsar_model.errors import ConfigError
from pulsar_model.pipeline.java import ensure_java

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
    # The position transforms build their expressions as long SQL texts (engine/columns.py); ANTLR keeps a
    # DFA cache of every text the SQL parser saw and never releases it: in the demo's nightly with a
    # 1 GiB driver it held about 270 MB of the heap (ATNConfig, DFAState) by the backlog stage
    # (benchmarks/README.md). Spark's own caches flush it past 10 % of the driver memory.
    "spark.sql.parser.manageParserCaches": "true",
    "spark.sql.parser.parserDfaCacheFlushRatio": "10",
}


def check_java() -> str:
    """Describe the Java runtime Spark will start with (:func:`pulsar_model.pipeline.java.ensure_java`, which
    also exports ``JAVA_HOME``), or raise with what to install when there is no Java 17+."""
    return ensure_java().describe()


#: ``spark.driver_memory: auto`` gives the driver this share of the machine's memory (local mode: the driver
#: JVM is also the only executor)...
AUTO_MEMORY_SHARE = 0.5
#: ... at least this much and at most this much (GiB): a bigger heap only lengthens full collections.
AUTO_MEMORY_MIN_GIB, AUTO_MEMORY_MAX_GIB = 1, 32
#: Spark's own driver memory when nothing sets it.
SPARK_DEFAULT_DRIVER_MEMORY = "1g"
#: A run needs at least this much driver memory (GiB), and ...
MEMORY_FLOOR_GIB = 2.0
#: ... this many bytes of heap per byte of input on disk (exports are JSON; tables compressed Parquet).
#: A rule of thumb from the benchmarks: tier l (8 GiB driver) ran; a 1 GiB driver on the demo thrashed.
MEMORY_PER_INPUT_BYTE = 0.5

_MEMORY_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def machine_memory_bytes() -> int | None:
    """Physical memory, or the cgroup's memory limit when it is smaller (containers); None when unknown."""
    try:
        total = int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        return None
    for limit_file in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(limit_file).read_text(encoding="ascii").strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) < total:
            total = int(text)
    return total


def auto_driver_memory(machine_bytes: int | None = None) -> str:
    """The driver memory ``auto`` stands for: half the machine, whole GiB, between 1g and 32g (4g if the
    machine's memory cannot be read)."""
    total = machine_bytes if machine_bytes is not None else machine_memory_bytes()
    if total is None:
        return "4g"
    gib = int(total * AUTO_MEMORY_SHARE // 1024**3)
    return f"{min(max(gib, AUTO_MEMORY_MIN_GIB), AUTO_MEMORY_MAX_GIB)}g"


def memory_bytes(text: str) -> int:
    """Bytes of a JVM memory setting such as ``4g``, ``512m`` or ``1024`` (bytes)."""
    match = re.fullmatch(r"(\d+)\s*([bkmgt]?)b?", text.strip().lower())
    if match is None:
        raise ConfigError(f"memory setting {text!r} is not a size; write it like 4g, 512m or auto")
    return int(match.group(1)) * _MEMORY_UNITS[match.group(2)]


def _size_text(n_bytes: int) -> str:
    """``20.0 GiB`` from one GiB up, else ``100 MiB`` (a small export is not "0.0 GiB")."""
    if n_bytes >= 1024**3:
        return f"{n_bytes / 1024**3:,.1f} GiB"
    return f"{n_bytes / 1024**2:,.0f} MiB"


def memory_warning(driver_memory: str, input_bytes: int, what: str) -> str | None:
    """A warning naming the setting when ``driver_memory`` looks too small for ``input_bytes`` of input, else
    None. ``what`` says what was measured (e.g. "the export folder")."""
    needed = max(MEMORY_FLOOR_GIB * 1024**3, MEMORY_PER_INPUT_BYTE * input_bytes)
    have = memory_bytes(driver_memory)
    if have >= needed:
        return None
    suggest = max(int(-(-needed // 1024**3)), int(MEMORY_FLOOR_GIB))
    return (
        f"spark.driver_memory = {driver_memory} looks too small for {what} "
        f"({_size_text(input_bytes)}): stages may slow down in garbage collection or fail with "
        f"OutOfMemoryError. Give the driver at least {suggest}g, e.g. --set spark.driver_memory={suggest}g "
        "(or 'auto': half of this machine's memory)."
    )


def session_settings(
    master: str | None = "local[2]",
    conf: Mapping[str, str] | None = None,
    *,
    fast_start: bool = False,
    driver_memory: str | None = None,
) -> dict[str, str]:
    """The Spark settings :func:`build_session` applies: :data:`BASE_CONF`, the driver JVM options
    (:data:`FAST_START_JAVA_OPTIONS` with ``fast_start``, else :data:`THROUGHPUT_JAVA_OPTIONS`), then
    ``conf``, which wins. A local master also gets the project's quiet log4j configuration and, with
    ``driver_memory`` (``auto`` = :func:`auto_driver_memory`), ``spark.driver.memory`` unless ``conf`` sets it
    (elsewhere the driver JVM is already running when the session is built: spark-submit sizes it)."""
    jvm = {"spark.driver.extraJavaOptions": FAST_START_JAVA_OPTIONS} if fast_start else {}
    settings = {**BASE_CONF, **jvm, **(conf or {})}
    if master is not None and master.startswith("local"):
        if driver_memory is not None and "spark.driver.memory" not in settings:
            settings["spark.driver.memory"] = (
                auto_driver_memory() if driver_memory == "auto" else driver_memory
            )
        # Quiet local runs: errors only (clusters keep their own log4j configuration).
        log4j = Path(__file__).resolve().parents[1] / "resources" / "log4j2.properties"
        settings["spark.driver.extraJavaOptions"] = (
            f"{settings['spark.driver.extraJavaOptions']} -Dlog4j2.configurationFile=file:{log4j}"
        )
    return settings


def driver_memory_setting(spark: SparkSession) -> str | None:
    """The running driver's ``spark.driver.memory``, for a failure message; None when unset or when the
    JVM no longer answers (a message must not fail on a JVM that is already broken)."""
    try:
        return spark.sparkContext.getConf().get("spark.driver.memory")
    except Exception:
        return None


def build_session(
    app_name: str = "pulsar-analytics",
    master: str | None = "local[2]",
    conf: Mapping[str, str] | None = None,
    *,
    fast_start: bool = False,
    driver_memory: str | None = None,
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
    settings = session_settings(master, conf, fast_start=fast_start, driver_memory=driver_memory)
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
