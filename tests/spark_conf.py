"""Session settings some test modules run under, set on the shared session and restored afterwards.

The suite's session (``tests/conftest.py``) keeps Spark's defaults: the property tests of the transforms
run under them (ANSI on, adaptive execution, whole-stage code generation), as in a user's session. On the
tests' tiny inputs with the transforms' very wide plans, adaptive re-planning (one extra job per shuffle)
and code generation cost far more than they save, so the golden tests and the stage tests (which check
what a stage stores, not how Spark runs it) use :data:`FAST_CONF`. The nightly crash test and the
spark-submit cluster run pass the same settings to their child processes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager

from pyspark.sql import SparkSession

#: Interpreted evaluation without adaptive re-planning; ANSI stays as the session has it (what it saves:
#: README.md, Development).
FAST_CONF: dict[str, str] = {
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}


@contextmanager
def session_conf(
    spark: SparkSession, conf: Mapping[str, str] = FAST_CONF, *, also_restore: Iterable[str] = ()
) -> Iterator[None]:
    """Run the block with ``conf`` set on ``spark``; every key of ``conf`` and ``also_restore`` (keys the
    block itself may set) gets its previous value back, or is unset if it had none."""
    saved = {key: spark.conf.get(key, None) for key in (*conf, *also_restore)}
    try:
        for key, value in conf.items():
            spark.conf.set(key, value)
        yield
    finally:
        for key, previous in saved.items():
            if previous is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, previous)
