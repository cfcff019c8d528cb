"""A failed stage says what failed and what to do, not a Java stack trace (no Spark needed)."""

from __future__ import annotations

from pulsar_model.errors import failure_summary, is_resource_failure

# The shape py4j gives a JVM failure: the call, then Java's trace with nested causes.
_OOM = """An error occurred while calling o14674.parquet.
: java.util.concurrent.ExecutionException: Boxed Exception
\tat scala.concurrent.impl.Promise$.resolveTry(Promise.scala:99)
\tSuppressed: org.apache.spark.util.Utils$OriginalTryStackTraceException: Full stacktrace
\t\tat scala.concurrent.impl.Promise$.resolveTry(Promise.scala:99)
Caused by: java.lang.OutOfMemoryError: GC overhead limit exceeded
\tat org.codehaus.janino.UnitCompiler.compile(UnitCompiler.java:1575)
"""

_CAUSED = """An error occurred while calling o77.save.
: org.apache.spark.SparkException: Job aborted due to stage failure
\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2898)
Caused by: java.io.IOException: No space left on device
\tat java.base/java.io.FileOutputStream.writeBytes(Native Method)
"""


def test_driver_out_of_memory_names_the_setting_and_the_fix():
    message = failure_summary(RuntimeError(_OOM), "1g")
    assert "ran out of memory" in message and "GC overhead limit exceeded" in message
    assert "spark.driver_memory=1g" in message and "--set spark.driver_memory=" in message
    assert "\tat " not in message and "\n" not in message


def test_java_failure_keeps_the_call_and_the_root_cause_only():
    message = failure_summary(RuntimeError(_CAUSED))
    assert message.startswith("An error occurred while calling o77.save.")
    assert "java.io.IOException: No space left on device" in message
    assert "DAGScheduler" not in message and "--log-level debug" in message


def test_python_failure_is_left_as_it_is():
    assert failure_summary(ValueError("bad value 'x': use 'y'")) == "bad value 'x': use 'y'"


def test_a_driver_jvm_that_died_is_an_environment_failure_with_the_fix():
    exc = ConnectionRefusedError(111, "Connection refused")
    message = failure_summary(exc, "1g")
    assert message.startswith("Spark's driver JVM stopped during the run with spark.driver_memory=1g")
    assert "--set spark.driver_memory=" in message
    assert is_resource_failure(exc) and is_resource_failure(RuntimeError(_OOM))
    assert not is_resource_failure(RuntimeError(_CAUSED))
