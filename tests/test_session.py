"""Session settings: which driver JVM options a session gets (no Spark needed)."""

from __future__ import annotations

from pulsar_model.pipeline.session import (
    FAST_START_JAVA_OPTIONS,
    THROUGHPUT_JAVA_OPTIONS,
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
