"""Session settings: which driver JVM options a session gets (no Spark needed)."""

from __future__ import annotations

from pulsar_model.pipeline.session import (
    FAST_START_JAVA_OPTIONS,
    THROUGHPUT_JAVA_OPTIONS,
    auto_driver_memory,
    machine_memory_bytes,
    memory_bytes,
    memory_warning,
    session_settings,
)

JVM = "spark.driver.extraJavaOptions"


def test_session_settings_data_sessions_get_the_full_jit_and_the_parallel_collector() -> None:
    options = session_settings("local[2]")[JVM]
    assert options.startswith(THROUGHPUT_JAVA_OPTIONS)
    assert "-XX:+UseParallelGC" in options
    assert "TieredStopAtLevel" not in options
    assert "-Duser.timezone=UTC" in options


def test_session_settings_fast_start_gets_c1_and_the_serial_collector() -> None:
    options = session_settings("local[2]", fast_start=True)[JVM]
    assert options.startswith(FAST_START_JAVA_OPTIONS)
    assert "-XX:TieredStopAtLevel=1" in options
    assert "-Duser.timezone=UTC" in options


def test_session_settings_conf_wins_over_both() -> None:
    conf = {JVM: "-Duser.timezone=UTC -XX:+UseG1GC", "spark.sql.shuffle.partitions": "7"}
    settings = session_settings("local[2]", conf, fast_start=True)
    assert settings[JVM].startswith("-Duser.timezone=UTC -XX:+UseG1GC ")
    assert settings["spark.sql.shuffle.partitions"] == "7"


def test_session_settings_log4j_only_for_a_local_master() -> None:
    assert "log4j2.configurationFile" in session_settings("local[1]")[JVM]
    assert session_settings(None)[JVM] == THROUGHPUT_JAVA_OPTIONS


def test_auto_driver_memory_is_half_the_machine_within_bounds() -> None:
    gib = 1024**3
    assert auto_driver_memory(24 * gib) == "12g"
    assert auto_driver_memory(1 * gib) == "1g"
    assert auto_driver_memory(256 * gib) == "32g"
    assert auto_driver_memory(None if machine_memory_bytes() is None else machine_memory_bytes()).endswith(
        "g"
    )


def test_session_settings_driver_memory_only_for_a_local_master_and_conf_wins() -> None:
    assert session_settings("local[2]", driver_memory="6g")["spark.driver.memory"] == "6g"
    assert session_settings("local[2]", driver_memory="auto")["spark.driver.memory"] == auto_driver_memory()
    assert "spark.driver.memory" not in session_settings(None, driver_memory="6g")
    conf = {"spark.driver.memory": "3g"}
    assert session_settings("local[2]", conf, driver_memory="6g")["spark.driver.memory"] == "3g"


def test_memory_warning_names_the_setting_when_too_small() -> None:
    gib = 1024**3
    assert memory_warning("8g", 2 * gib, "the export folder") is None
    text = memory_warning("1g", 100 * 1024**2, "the export folder")
    assert text is not None and "spark.driver_memory = 1g" in text and "--set spark.driver_memory=2g" in text
    assert "(100 MiB)" in text
    big = memory_warning("4g", 20 * gib, "the warehouse's input tables")
    assert big is not None and "(20.0 GiB)" in big and "--set spark.driver_memory=10g" in big
    assert memory_bytes("512m") == 512 * 1024**2 and memory_bytes("2G") == 2 * gib


def test_a_small_driver_keeps_whole_stage_codegen() -> None:
    """The demo's whole nightly runs with code generation in Spark's default 1 GiB driver now that the SQL
    parser's cache is flushed (benchmarks/README.md): no session turns it off behind the user's back."""
    key = "spark.sql.codegen.wholeStage"
    assert key not in session_settings("local[2]")  # nothing set: Spark's 1g
    assert key not in session_settings("local[2]", driver_memory="1024m")
    assert session_settings("local[2]", {key: "false"}, driver_memory="1g")[key] == "false"


def test_sessions_flush_the_sql_parsers_dfa_cache(spark) -> None:
    """The transforms' long SQL texts would otherwise fill ANTLR's DFA cache for good (benchmarks/README.md,
    the 1 GiB driver); the settings are ones this Spark knows (a misspelt key would be silently ignored)."""
    settings = session_settings("local[2]", {})
    assert settings["spark.sql.parser.manageParserCaches"] == "true"
    assert settings["spark.sql.parser.parserDfaCacheFlushRatio"] == "10"
    for key in ("spark.sql.parser.manageParserCaches", "spark.sql.parser.parserDfaCacheFlushRatio"):
        assert spark.conf.isModifiable(key), f"{key} is not a SQL setting of this Spark"
        assert spark.conf.get(key) == settings[key], key
