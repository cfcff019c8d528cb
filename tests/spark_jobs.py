"""Count the Spark jobs a block of test code runs (the tests that prove a lookup needs no job)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession

#: The job-group properties ``SparkContext.setJobGroup`` sets on the calling thread.
_GROUP_PROPERTIES = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")


@contextmanager
def spark_jobs(spark: SparkSession) -> Iterator[list[int]]:
    """Yield a list that holds, after the block, the ids of the Spark jobs the block ran.

    The block runs in a job group of its own; afterwards the group is removed (``setJobGroup("", "")``
    would leave every later job of the session in group "", hidden from ``getJobIdsForGroup()``) and
    the listener bus is drained, since the status tracker learns of jobs asynchronously."""
    sc = spark.sparkContext
    group = f"counted-{uuid.uuid4().hex}"
    sc.setJobGroup(group, "jobs counted by a test")
    jobs: list[int] = []
    try:
        yield jobs
    finally:
        for key in _GROUP_PROPERTIES:
            sc.setLocalProperty(key, None)  # type: ignore[arg-type]
        sc._jsc.sc().listenerBus().waitUntilEmpty(30_000)  # type: ignore[union-attr]
        jobs.extend(sc.statusTracker().getJobIdsForGroup(group))
