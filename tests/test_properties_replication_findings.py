"""Property test: ``replication_findings`` agrees with tests/oracle/replication_findings.py.

Random worlds of three clusters and two topics each (own and replicated snapshot REQUEST / SNAPSHOT /
UPDATE markers with ids from a small pool or none, request times on both sides of the 30 s timeout, topics
with and without an export row; subscription, compaction, replicator, dedup and reader cursors, replicated
or not, replicators connected, disconnected or unknown; consumers listed on any cluster, also for cursors
that are not replicated subscriptions or do not exist), many worlds batched into one DataFrame per example
(a world's topics are its own). The kinds the oracle covers are compared row for row; the ledger-counting
kinds have their own tests.
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from pulsar_model.replication.detectors import (
    DEFAULT_SNAPSHOT_TIMEOUT_SECONDS,
    KIND_ACK_HOLES,
    KIND_MARKER_BACKLOG,
    replication_findings,
)
from tests.oracle import replication_findings as orc
from tests.oracle import strategies as S
from tests.test_replication_translation import CONSUMERS, CURSORS, LEDGERS, MARKERS, ML

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("fast_spark_conf")]

CLUSTERS = ("A", "B", "C")
EXPORTED_AT = dt.datetime(2026, 11, 21, 2, 0, 0, tzinfo=dt.UTC)
EXPORTED_MS = int(EXPORTED_AT.timestamp() * 1000)
TIMEOUT_MS = DEFAULT_SNAPSHOT_TIMEOUT_SECONDS * 1000
#: Request ages around the timeout: inside, exactly at it (not timed out: the check is strict), past it.
AGES_MS = (0, TIMEOUT_MS - 1, TIMEOUT_MS, TIMEOUT_MS + 1, 20 * TIMEOUT_MS)
MARKER_TYPES = (10, 10, 12, 12, 13, 11)
CURSOR_NAMES = ("s1", "s2", "__compaction", "pulsar.repl.X", "pulsar.dedup", "reader-1")
WORLDS_PER_EXAMPLE = 40


def _world(rng: random.Random, w: int) -> dict[str, list[dict[str, Any]]]:
    markers: list[dict[str, Any]] = []
    cursors: list[dict[str, Any]] = []
    consumers: list[dict[str, Any]] = []
    exported: list[dict[str, Any]] = []
    for topic in (f"w{w}/a", f"w{w}/b"):
        for cluster in CLUSTERS:
            if rng.random() < 0.85:
                exported.append({"cluster": cluster, "topic": topic})
            for i in range(rng.randrange(0, 7)):
                markers.append(
                    {
                        "cluster": cluster,
                        "topic": topic,
                        "position": (1, i),
                        "marker_type": rng.choice(MARKER_TYPES),
                        "publish_time_ms": EXPORTED_MS - rng.choice(AGES_MS),
                        "replicated_from": None if rng.random() < 0.75 else rng.choice(CLUSTERS),
                        "snapshot_id": rng.choice((None, "s1", "s2", "s3")),
                    }
                )
            for name in rng.sample(CURSOR_NAMES, rng.randrange(0, len(CURSOR_NAMES) + 1)):
                kind = {
                    "s1": "subscription",
                    "s2": "subscription",
                    "__compaction": rng.choice(("compaction", "subscription")),
                    "pulsar.repl.X": "replicator",
                    "pulsar.dedup": "dedup",
                    "reader-1": "reader",
                }[name]
                replicator = kind == "replicator"
                cursors.append(
                    {
                        "cluster": cluster,
                        "topic": topic,
                        "cursor_name": name,
                        "cursor_kind": kind,
                        "is_replicated": rng.random() < 0.6,
                        "replicator_remote_cluster": rng.choice(CLUSTERS) if replicator else None,
                        "stats_replicator_connected": rng.choice((True, False, None)) if replicator else None,
                        "stats_replication_backlog": rng.choice((None, 0, 17)) if replicator else None,
                    }
                )
            for sub in ("s1", "s2", "ghost"):
                for k in range(rng.choice((0, 0, 1, 2))):
                    consumers.append(
                        {"cluster": cluster, "topic": topic, "subscription": sub, "name": f"c{k}"}
                    )
    return {"markers": markers, "cursors": cursors, "consumers": consumers, "exported": exported}


def _frames(spark: SparkSession, worlds: list[dict[str, list[dict[str, Any]]]]) -> dict[str, Any]:
    markers = [m for w in worlds for m in w["markers"]]
    cursors = [c for w in worlds for c in w["cursors"]]
    consumers = [k for w in worlds for k in w["consumers"]]
    exported = [e for w in worlds for e in w["exported"]]
    marker_rows = [
        (
            m["cluster"],
            m["topic"],
            m["position"],
            m["marker_type"],
            m["publish_time_ms"],
            m["replicated_from"],
            [],
            m["snapshot_id"],
            None,
            None,
            None,
            None,
            None,
            None,
        )
        for m in markers
    ]
    cursor_rows = [
        (
            c["cluster"],
            c["topic"],
            c["cursor_name"],
            c["cursor_kind"],
            True,
            c["is_replicated"],
            c["replicator_remote_cluster"],
            (1, 0),
            [],
            EXPORTED_AT,
            0,
            c["stats_replicator_connected"],
            c["stats_replication_backlog"],
        )
        for c in cursors
    ]
    return {
        "markers": spark.createDataFrame(marker_rows, MARKERS),
        "cursors": spark.createDataFrame(cursor_rows, CURSORS),
        "consumers": spark.createDataFrame(
            [(k["cluster"], k["topic"], k["subscription"], k["name"]) for k in consumers], CONSUMERS
        ),
        "managed_ledgers": spark.createDataFrame(
            [(e["cluster"], e["topic"], EXPORTED_AT, (1, 5), 1, 6) for e in exported], ML
        ),
        "ledgers": spark.createDataFrame([], LEDGERS),
    }


@settings(
    max_examples=S.PROPERTY_EXAMPLES,
    deadline=None,
    database=None,
    phases=[Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(seed=st.integers(0, 2**32 - 1))
def test_replication_findings_match_oracle(spark: SparkSession, seed: int):
    rng = random.Random(seed)
    worlds = [_world(rng, w) for w in range(WORLDS_PER_EXAMPLE)]
    f = _frames(spark, worlds)
    # no entry dump: the marker-backlog kind is left out; ack holes need holes, and the cursors have none
    out = replication_findings(
        f["markers"], f["cursors"], None, f["ledgers"], f["managed_ledgers"], f["consumers"]
    ).where(~F.col("kind").isin(KIND_ACK_HOLES, KIND_MARKER_BACKLOG))
    got = sorted(
        (
            (
                r["kind"],
                r["severity"],
                r["cluster"],
                r["topic"],
                r["subscription"],
                r["related_cluster"],
                r["measure"],
            )
            for r in out.collect()
        ),
        key=lambda f: tuple("" if v is None else str(v) for v in f),
    )
    expected = orc.replication_findings(
        [m for w in worlds for m in w["markers"]],
        [c for w in worlds for c in w["cursors"]],
        [k for w in worlds for k in w["consumers"]],
        {(e["cluster"], e["topic"]): EXPORTED_MS for w in worlds for e in w["exported"]},
        DEFAULT_SNAPSHOT_TIMEOUT_SECONDS,
    )
    assert got == expected, f"seed {seed}"
    assert {k for k, *_ in expected} >= {
        "snapshots_never_complete",
        "snapshots_timing_out",
        "replicator_disconnected",
        "system_subscription_replicated",
        "consumers_on_multiple_clusters",
    }, "the worlds should exercise every covered kind"
