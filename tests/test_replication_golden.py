"""Golden tests for replicated-subscription snapshots and the snapshot cache (docs §4.5, §4.6, §4.9).

Every docs §4.9 scenario is expressed as data: the snapshot-builder tests as ``markers`` rows of the
source and remote clusters fed to ``snapshot_assembly`` (one topic per scenario step, one Spark job per
test), the cache tests as ``add``/``advance`` events fed to ``replay_snapshot_cache``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from pulsar_model.errors import ConfigError, ContractError
from pulsar_model.replication import (
    CachedSnapshot,
    NewSnapshotCache,
    OldSnapshotCache,
    predicted_updates,
    replay_snapshot_cache,
    snapshot_assembly,
    snapshot_cache_events,
    uses_new_snapshot_cache,
)
from pulsar_model.tables.contracts import spark_schema
from tests.contract_frames import LEDGER_STATE, MANAGED_LEDGER_STATE, contract_schema

Position = tuple[int, int]
EXPORT_ID = "e1"
EXPORT_DATE = dt.date(2026, 11, 21)
MARKERS = spark_schema("markers")
CURSORS = contract_schema(
    "cursors",
    [
        "cluster",
        "topic",
        "export_id",
        "export_date",
        "cursor_name",
        "is_replicated",
        "mark_delete_position",
        "read_position",
    ],
)
#: ``replay_snapshot_cache`` events: the subscription key and seq of ``replication_cache_replay``, the event.
EVENTS = contract_schema(
    "replication_cache_replay",
    [
        "cluster",
        "topic",
        "subscription",
        "seq",
        ("op", "string"),
        ("snapshot_id", "string"),
        ("local_position", "position"),
        ("snapshot_clusters", "array<struct<cluster:string,position:position>>"),
        "mark_delete_position",
    ],
)
LEDGERS = contract_schema("ledgers", LEDGER_STATE)
MANAGED_LEDGERS = contract_schema("managed_ledgers", MANAGED_LEDGER_STATE)
_NAMES = {10: "REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST", 11: "REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE"}
_NAMES |= {12: "REPLICATED_SUBSCRIPTION_SNAPSHOT", 13: "REPLICATED_SUBSCRIPTION_UPDATE"}


# --- builders of input rows -------------------------------------------------------------------------------


def marker(
    cluster: str,
    topic: str,
    pos: Position,
    marker_type: int,
    t: int = 0,
    *,
    replicated_from: str | None = None,
    replicate_to: Sequence[str] = (),
    snapshot_id: str | None = None,
    source_cluster: str | None = None,
    response_cluster: str | None = None,
    response_position: Position | None = None,
    local_position: Position | None = None,
    clusters: Sequence[tuple[str, Position]] | None = None,
    subscription_name: str | None = None,
) -> tuple[Any, ...]:
    """One ``markers`` row (schemas/markers.yaml)."""
    return (
        cluster,
        topic,
        EXPORT_ID,
        EXPORT_DATE,
        pos[0],
        pos[1],
        pos,
        marker_type,
        _NAMES[marker_type],
        t,
        replicated_from,
        list(replicate_to),
        snapshot_id,
        source_cluster,
        response_cluster,
        response_position,
        local_position,
        None if clusters is None else [(c, p) for c, p in clusters],
        subscription_name,
        None,
        None,
    )


def markers_frame(spark: SparkSession, rows: Sequence[tuple[Any, ...]]) -> DataFrame:
    return spark.createDataFrame(list(rows), schema=MARKERS)


def to_py(value: Any) -> Any:
    """Rows -> plain Python: positions become ``(ledger, entry)`` tuples, other structs dicts."""
    if isinstance(value, Row):
        d = value.asDict()
        if set(d) == {"ledger_id", "entry_id"}:
            return (d["ledger_id"], d["entry_id"])
        return {k: to_py(v) for k, v in d.items()}
    if isinstance(value, list):
        return [to_py(v) for v in value]
    return value


def collect_by(df: DataFrame, *keys: str) -> dict[tuple[Any, ...], dict[str, Any]]:
    return {tuple(r[k] for k in keys): to_py(r) for r in df.collect()}


def request(cluster: str, topic: str, pos: Position, sid: str, t: int = 0) -> tuple[Any, ...]:
    return marker(cluster, topic, pos, 10, t, snapshot_id=sid, source_cluster=cluster)


def landed(cluster: str, topic: str, pos: Position, sid: str, source: str, t: int = 0) -> tuple[Any, ...]:
    return marker(cluster, topic, pos, 10, t, replicated_from=source, snapshot_id=sid, source_cluster=source)


def response_written(
    cluster: str, topic: str, pos: Position, sid: str, source: str, lac: Position, t: int = 0
) -> tuple[Any, ...]:
    return marker(
        cluster,
        topic,
        pos,
        11,
        t,
        replicate_to=[source],
        snapshot_id=sid,
        response_cluster=cluster,
        response_position=lac,
    )


def response_received(
    source: str, topic: str, pos: Position, sid: str, responder: str, lac: Position, t: int = 0
) -> tuple[Any, ...]:
    return marker(
        source,
        topic,
        pos,
        11,
        t,
        replicated_from=responder,
        replicate_to=[source],
        snapshot_id=sid,
        response_cluster=responder,
        response_position=lac,
    )


def snapshot_marker(
    source: str,
    topic: str,
    pos: Position,
    sid: str,
    local: Position,
    clusters: Sequence[tuple[str, Position]],
    t: int = 0,
) -> tuple[Any, ...]:
    return marker(
        source,
        topic,
        pos,
        12,
        t,
        replicate_to=[source],
        snapshot_id=sid,
        local_position=local,
        clusters=clusters,
    )


def kept(*pairs: tuple[str, Position]) -> list[dict[str, Any]]:
    return [{"cluster": c, "position": p} for c, p in pairs]


def resp(
    cluster: str,
    rnd: int | None,
    lac: Position,
    written: Position | None,
    received: Position | None,
    t: int | None,
    outcome: str,
) -> dict[str, Any]:
    return {
        "cluster": cluster,
        "round": rnd,
        "response_position": lac,
        "written_position": written,
        "received_position": received,
        "received_publish_time_ms": t,
        "outcome": outcome,
    }


# --- §4.9.1 testBuildSnapshotWith2Clusters ----------------------------------------------------------------


def test_snapshot_assembly_two_clusters_one_round(spark: SparkSession) -> None:
    """§4.9.1: local "a", remote ["b"]; start -> one REQUEST with source "a"; b's response (11,11)
    received at local (1,1) -> SNAPSHOT with clusters [b:(11,11)], local_message_id (1,1).

    Topic ``t2-pred`` has the markers up to the response only (what the builder must write is predicted);
    ``t2-done`` also has the SNAPSHOT marker the broker wrote (the replay must agree with it).
    """
    rows = []
    for topic in ("t2-pred", "t2-done"):
        rows += [
            request("a", topic, (1, 0), "K", 0),
            landed("b", topic, (11, 11), "K", "a", 80),
            response_written("b", topic, (11, 12), "K", "a", (11, 11), 85),
            response_received("a", topic, (1, 1), "K", "b", (11, 11), 170),
        ]
    rows.append(snapshot_marker("a", "t2-done", (1, 2), "K", (1, 1), [("b", (11, 11))], 171))
    out = collect_by(snapshot_assembly(markers_frame(spark, rows)), "cluster", "topic", "snapshot_id")
    assert set(out) == {("a", "t2-pred", "K"), ("a", "t2-done", "K")}
    common = {
        "cluster": "a",
        "export_id": EXPORT_ID,
        "export_date": EXPORT_DATE,
        "snapshot_id": "K",
        "remote_clusters": ["b"],
        "rounds_needed": 1,
        "rounds_completed": 1,
        "request_count": 1,
        "request_round1_position": (1, 0),
        "request_round2_position": None,
        "started_ms": 0,
        "timeout_at_ms": 30_000,
        "requests_landed": [{"cluster": "b", "round": 1, "position": (11, 11), "publish_time_ms": 80}],
        "responses": [resp("b", 1, (11, 11), (11, 12), (1, 1), 170, "kept")],
        "kept_clusters": kept(("b", (11, 11))),
        "round1_completed_position": (1, 1),
        "predicted_local_position": (1, 1),
        "late_responses": 0,
        "gap_from_previous_ms": None,
        "gap_periods": None,
    }
    assert out[("a", "t2-pred", "K")] == {
        **common,
        "topic": "t2-pred",
        "status": "pending",
        "checked_at_ms": 171,  # the newest marker of cluster "a" in the export (any topic)
        "snapshot_position": None,
        "snapshot_local_position": None,
        "snapshot_clusters": None,
        "snapshot_publish_time_ms": None,
        "snapshot_matches": None,
        "latency_ms": None,
    }
    assert out[("a", "t2-done", "K")] == {
        **common,
        "topic": "t2-done",
        "status": "complete",
        "checked_at_ms": 171,
        "snapshot_position": (1, 2),
        "snapshot_local_position": (1, 1),
        "snapshot_clusters": kept(("b", (11, 11))),
        "snapshot_publish_time_ms": 171,
        "snapshot_matches": True,
        "latency_ms": 171,
    }


# --- §4.9.2 testBuildSnapshotWith3Clusters ----------------------------------------------------------------


def _three_cluster_rows(topic: str, steps: int) -> list[tuple[Any, ...]]:
    """§4.9.2 markers in "a" after ``steps`` responses (plus the second REQUEST once round 1 completed)."""
    rows = [request("a", topic, (1, 0), "K", 0)]
    responses = [
        ("b", (11, 11), (1, 1)),
        ("c", (22, 22), (2, 2)),
        ("b", (33, 33), (3, 3)),
        ("c", (44, 44), (4, 4)),
    ]
    for i, (cl, lac, at) in enumerate(responses[:steps]):
        rows.append(response_received("a", topic, at, "K", cl, lac, 10 * (i + 1)))
        if i == 1:
            rows.append(request("a", topic, (2, 3), "K", 21))
    return rows


def test_snapshot_assembly_three_clusters_two_rounds(spark: SparkSession) -> None:
    """§4.9.2: remote ["b","c"]: b:(11,11) at (1,1) -> no marker; c:(22,22) at (2,2) -> second REQUEST;
    b:(33,33) at (3,3) -> no marker; c:(44,44) at (4,4) -> SNAPSHOT with clusters [b:(11,11), c:(22,22)]
    (round-1 values) and local_message_id (4,4). One topic per step (markers up to that step)."""
    rows = []
    for steps in (1, 2, 3, 4):
        rows += _three_cluster_rows(f"t3-step{steps}", steps)
    rows += _three_cluster_rows("t3-done", 4)
    rows.append(snapshot_marker("a", "t3-done", (4, 5), "K", (4, 4), [("b", (11, 11)), ("c", (22, 22))], 41))
    # "b" and "c" are the remote clusters: their replicator cursors on "a"
    cursors = spark.createDataFrame(
        [
            ("a", f"t3-{s}", EXPORT_ID, EXPORT_DATE, f"pulsar.repl.{r}", False, (0, -1), None)
            for s in ("step1", "step2", "step3", "step4", "done")
            for r in ("b", "c")
        ],
        schema=CURSORS,
    )
    df = snapshot_assembly(markers_frame(spark, rows), cursors=cursors)
    got = {
        r["topic"]: (
            r["status"],
            r["rounds_needed"],
            r["rounds_completed"],
            r["request_count"],
            r["round1_completed_position"],
            r["predicted_local_position"],
            r["kept_clusters"],
            [(x["cluster"], x["round"], x["outcome"]) for x in r["responses"]],
            r["snapshot_matches"],
        )
        for r in (to_py(row) for row in df.collect())
    }
    b1, c1 = ("b", (11, 11)), ("c", (22, 22))
    assert got == {
        "t3-step1": ("pending", 2, 0, 1, None, None, kept(b1), [("b", 1, "kept")], None),
        "t3-step2": (
            "pending",
            2,
            1,
            2,
            (2, 2),
            None,
            kept(b1, c1),
            [("b", 1, "kept"), ("c", 1, "kept")],
            None,
        ),
        "t3-step3": (
            "pending",
            2,
            1,
            2,
            (2, 2),
            None,
            kept(b1, c1),
            [("b", 1, "kept"), ("c", 1, "kept"), ("b", 2, "not_kept")],
            None,
        ),
        "t3-step4": (
            "pending",
            2,
            2,
            2,
            (2, 2),
            (4, 4),
            kept(b1, c1),
            [("b", 1, "kept"), ("c", 1, "kept"), ("b", 2, "not_kept"), ("c", 2, "not_kept")],
            None,
        ),
        "t3-done": (
            "complete",
            2,
            2,
            2,
            (2, 2),
            (4, 4),
            kept(b1, c1),
            [("b", 1, "kept"), ("c", 1, "kept"), ("b", 2, "not_kept"), ("c", 2, "not_kept")],
            True,
        ),
    }


# --- §4.9.3 testBuildTimeout -------------------------------------------------------------------------------


def test_snapshot_assembly_timeout_via_checked_at(spark: SparkSession) -> None:
    """§4.9.3 (timeout 3 s): started at t=0 -> not timed out at 2000 ms, timed out at 5000 ms."""
    rows = [request("a", "tt", (1, 0), "K", 0), landed("b", "tt", (7, 0), "K", "a", 50)]
    markers = markers_frame(spark, rows)
    at_2000 = snapshot_assembly(markers, timeout_seconds=3, checked_at=2000)
    at_5000 = snapshot_assembly(
        markers, timeout_seconds=3, checked_at=dt.datetime(1970, 1, 1, 0, 0, 5, tzinfo=dt.UTC)
    )
    got = sorted(
        (r["checked_at_ms"], r["timeout_at_ms"], r["status"]) for r in at_2000.unionByName(at_5000).collect()
    )
    assert got == [(2000, 3000, "pending"), (5000, 3000, "timed_out")]


def test_snapshot_assembly_flags_late_unprocessed_and_orphan_responses(spark: SparkSession) -> None:
    """Edge rows (§4.4, §4.5, §4.7): a response after completion is late (ignored), one forwarded by a
    cluster without a replicator on the source is not processed, one whose request is not exported is an
    orphan, a response written but not yet arrived is in flight, a SNAPSHOT marker whose REQUEST was
    trimmed is complete but cannot be checked; cadence is the start-to-start gap."""
    topic = "te"
    rows = [
        request("a", topic, (3, 0), "K1", 1000),
        response_received("a", topic, (3, 1), "K1", "x", (90, 1), 1010),  # no pulsar.repl.x cursor on "a"
        response_received("a", topic, (3, 2), "K1", "b", (9, 4), 1020),
        snapshot_marker("a", topic, (3, 3), "K1", (3, 2), [("b", (9, 4))], 1021),
        response_received("a", topic, (3, 4), "K1", "b", (9, 8), 1030),  # a duplicate answer after completion
        request("a", topic, (3, 5), "K2", 3500),
        response_written("b", topic, (9, 20), "K2", "a", (9, 19), 3600),  # not arrived yet
        response_received("a", topic, (3, 6), "K0", "b", (9, 1), 3700),  # K0's request is not exported
        snapshot_marker("a", topic, (3, 7), "K9", (2, 9), [("b", (8, 8))], 3800),  # K9's markers were trimmed
    ]
    cursors = spark.createDataFrame(
        [("a", topic, EXPORT_ID, EXPORT_DATE, "pulsar.repl.b", False, (3, -1), None)], schema=CURSORS
    )
    out = collect_by(snapshot_assembly(markers_frame(spark, rows), cursors=cursors), "snapshot_id")
    assert {
        k[0]: (v["status"], v["responses"], v["late_responses"]) for k, v in out.items() if k != ("K9",)
    } == {
        "K1": (
            "complete",
            [
                resp("x", None, (90, 1), None, (3, 1), 1010, "ignored_no_replicator"),
                resp("b", 1, (9, 4), None, (3, 2), 1020, "kept"),
                resp("b", None, (9, 8), None, (3, 4), 1030, "late"),
            ],
            1,
        ),
        "K2": ("pending", [resp("b", None, (9, 19), (9, 20), None, None, "in_flight")], 0),
        "K0": ("orphan", [resp("b", None, (9, 1), None, (3, 6), 3700, "orphan")], 0),
    }
    assert (out[("K1",)]["snapshot_matches"], out[("K1",)]["latency_ms"]) == (True, 21)
    assert (out[("K2",)]["gap_from_previous_ms"], out[("K2",)]["gap_periods"]) == (2500, 2.5)
    assert out[("K0",)]["started_ms"] is None
    k9 = out[("K9",)]
    assert (k9["status"], k9["request_count"], k9["responses"], k9["snapshot_matches"]) == (
        "complete",
        0,
        [],
        None,
    )


# --- §4.9.4 / §4.9.5 snapshot caches ---------------------------------------------------------------------

ADD, ADVANCE = "add", "advance"


def cache_events(sub: str, steps: Sequence[tuple[str, Position]], topic: str = "tc") -> list[tuple[Any, ...]]:
    """``add`` steps get snapshot id ``s<ledger>:<entry>`` and one remote position; ``advance`` steps a md."""
    rows = []
    for seq, (op, p) in enumerate(steps, start=1):
        if op == ADD:
            rows.append(("c1", topic, sub, seq, op, f"s{p[0]}:{p[1]}", p, [("r", (p[0] + 100, p[1]))], None))
        else:
            rows.append(("c1", topic, sub, seq, op, None, None, None, p))
    return rows


def evicted(r: Row) -> list[str]:
    return list(r["evicted_since_previous_advance"])


def advances(df: DataFrame) -> dict[str, list[tuple[int, str | None, int, list[str]]]]:
    out: dict[str, list[tuple[int, str | None, int, list[str]]]] = {}
    for r in sorted(df.collect(), key=lambda r: (r["subscription"], r["seq"])):
        out.setdefault(r["subscription"], []).append(
            (r["seq"], r["snapshot_id"], r["cache_size_after"], evicted(r))
        )
    return out


OLD_CACHE_STEPS = [(ADD, (1, 1)), (ADD, (2, 2)), (ADD, (5, 5)), (ADD, (7, 7))] + [
    (ADVANCE, p) for p in [(0, 0), (1, 0), (1, 1), (5, 6), (2, 2), (5, 5)]
]
OLD_PRUNING_STEPS = [(ADD, (i, i)) for i in (1, 2, 3, 4)] + [(ADVANCE, p) for p in [(1, 1), (2, 2), (5, 5)]]
NEW_PRUNING_STEPS = [(ADD, (i, i)) for i in (1, 2, 3, 4)] + [(ADVANCE, p) for p in [(2, 2), (5, 5)]]


def test_replay_snapshot_cache_old_generation(spark: SparkSession) -> None:
    """§4.9.4 old testSnapshotCache: snapshots (1,1),(2,2),(5,5),(7,7): advanced(0,0)=null,
    advanced(1,0)=null, advanced(1,1)=snapshot(1,1), advanced(5,6)=snapshot(5,5) (also removes (2,2)),
    then advanced(2,2)=null, advanced(5,5)=null. Old testSnapshotCachePruning (max 3): add (1,1)..(4,4)
    -> (1,1) evicted; advanced(1,1)=null; advanced(2,2)=(2,2); advanced(5,5)=(4,4)."""
    events = spark.createDataFrame(cache_events("cache", OLD_CACHE_STEPS), schema=EVENTS)
    pruning = spark.createDataFrame(cache_events("pruning", OLD_PRUNING_STEPS), schema=EVENTS)
    empty_l = spark.createDataFrame([], schema=LEDGERS)
    empty_ml = spark.createDataFrame([], schema=MANAGED_LEDGERS)
    df = replay_snapshot_cache(events, empty_l, empty_ml, pulsar_version="3.0.7").unionByName(
        replay_snapshot_cache(pruning, empty_l, empty_ml, max_cached=3, pulsar_version="4.1.2")
    )
    assert advances(df) == {
        "cache": [
            (5, None, 4, []),
            (6, None, 4, []),
            (7, "s1:1", 3, []),
            (8, "s5:5", 1, []),
            (9, None, 1, []),
            (10, None, 1, []),
        ],
        "pruning": [(5, None, 3, ["s1:1"]), (6, "s2:2", 2, []), (7, "s4:4", 0, [])],
    }
    assert {r["cache_generation"] for r in df.collect()} == {"old"}


def _one_ledger_state(spark: SparkSession, entries: int) -> tuple[DataFrame, DataFrame]:
    """Ledger 1 closed with ``entries`` entries, ledger 2 open and empty; LAC = (1, entries-1)."""
    ledgers = spark.createDataFrame(
        [("c1", "tc", 1, entries, entries), ("c1", "tc", 2, 0, 0)], schema=LEDGERS
    )
    ml = spark.createDataFrame([("c1", "tc", 2, 0, 0, (1, entries - 1), entries)], schema=MANAGED_LEDGERS)
    return ledgers, ml


def test_replay_snapshot_cache_per_row_versions_need_the_version_column(spark: SparkSession) -> None:
    """``pulsar_version=None`` counts the new cache's distances by each topic's
    ``managed_ledgers.pulsar_version``: without the column the call says so before any Spark job."""
    events = spark.createDataFrame(cache_events("cache", OLD_CACHE_STEPS), schema=EVENTS).withColumn(
        "pulsar_version", F.lit("4.1.3")
    )
    ledgers = spark.createDataFrame([], schema=LEDGERS)
    mls = spark.createDataFrame([], schema=MANAGED_LEDGERS)
    if "pulsar_version" in mls.columns:
        mls = mls.drop("pulsar_version")
    with pytest.raises(ContractError, match=r"managed_ledgers\.pulsar_version"):
        replay_snapshot_cache(events, ledgers, mls, pulsar_version=None)


def test_replay_snapshot_cache_new_generation_pruning(spark: SparkSession) -> None:
    """§4.9.5 new testSnapshotCachePruning (max 3, distance always 1): add (1,1)..(4,4) -> (2,2) evicted;
    advanced(2,2) returns (1,1); advanced(5,5) returns (4,4). Run with the ``constant`` test hook and with
    the broker's entry counts over ledgers 1-4 of 5 entries each (every gap is 5: the same tie)."""
    events = spark.createDataFrame(cache_events("pruning", NEW_PRUNING_STEPS), schema=EVENTS)
    ledgers = spark.createDataFrame(
        [("c1", "tc", lid, 5, 50) for lid in (1, 2, 3, 4)] + [("c1", "tc", 5, 0, 0)], schema=LEDGERS
    )
    ml = spark.createDataFrame([("c1", "tc", 5, 2, 20, (5, 1), 220)], schema=MANAGED_LEDGERS)
    constant = replay_snapshot_cache(events, ledgers, ml, max_cached=3, distance="constant")
    entries = replay_snapshot_cache(events, ledgers, ml, max_cached=3, pulsar_version="4.0.9")
    expected = [(5, "s1:1", 2, ["s2:2"]), (6, "s4:4", 0, [])]
    got = sorted(
        (
            r["distance"],
            r["seq"],
            r["snapshot_id"],
            r["cache_size_after"],
            list(r["evicted_since_previous_advance"]),
        )
        for r in constant.selectExpr("'constant' AS distance", "*")
        .unionByName(entries.selectExpr("'entries' AS distance", "*"))
        .collect()
    )
    assert got == sorted([("constant", *e) for e in expected] + [("entries", *e) for e in expected])


#: §4.9.5 testSnapshotCachePruningScenarios (max 5, ledger 1): adds 1,2,10,15,25 then 100 -> 1:2 evicted;
#: 110 -> 1:10; 112 -> 1:110; 113 -> 1:112; 200 -> 1:15; 50 (<= last) -> cache cleared, only 1:50 remains.
#: An advance to (0,0) after each add returns nothing and shows that add's evictions.
SCENARIO_ADDS = [1, 2, 10, 15, 25, 100, 110, 112, 113, 200, 50]
SCENARIO_EVICTIONS = [[], [], [], [], [], ["s1:2"], ["s1:10"], ["s1:110"], ["s1:112"], ["s1:15"]]
SCENARIO_EVICTIONS.append(["s1:1", "s1:25", "s1:100", "s1:113", "s1:200"])


def test_replay_snapshot_cache_new_generation_pruning_scenarios(spark: SparkSession) -> None:
    """§4.9.5 new testSnapshotCachePruningScenarios with the ``entry_id`` hook (the Pulsar test's distance)
    and with the broker's count (entries strictly between = entry-id difference - 1 on one ledger: every
    sum shifts by 2, the same choices). Trace of the first step: d = [0,1,8,5,10,75]; sums 9,13,15,85."""
    steps: list[tuple[str, Position]] = []
    for e in SCENARIO_ADDS:
        steps += [(ADD, (1, e)), (ADVANCE, (0, 0))]
    steps.append((ADVANCE, (1, 1000)))
    events = spark.createDataFrame(cache_events("scenarios", steps), schema=EVENTS)
    ledgers, ml = _one_ledger_state(spark, 300)
    by_id = replay_snapshot_cache(events, ledgers, ml, max_cached=5, distance="entry_id")
    by_entries = replay_snapshot_cache(events, ledgers, ml, max_cached=5)
    sizes = [1, 2, 3, 4, 5, 5, 5, 5, 5, 5, 1]
    expected = [(2 * (i + 1), None, sizes[i], SCENARIO_EVICTIONS[i]) for i in range(len(SCENARIO_ADDS))]
    expected.append((2 * len(SCENARIO_ADDS) + 1, "s1:50", 0, []))
    both = by_id.selectExpr("'id' AS subscription_tag", "*").unionByName(
        by_entries.selectExpr("'entries' AS subscription_tag", "*")
    )
    rows = both.collect()
    for tag in ("id", "entries"):
        got = sorted(
            (r["seq"], r["snapshot_id"], r["cache_size_after"], evicted(r))
            for r in rows
            if r["subscription_tag"] == tag
        )
        assert got == expected, tag
    assert {(r["cache_generation"], r["error"]) for r in rows} == {("new", None)}


def test_replay_snapshot_cache_new_distance_counts_entries_across_ledgers(spark: SparkSession) -> None:
    """The new cache's distance is the entry count strictly between two positions (§4.6, §1.7 4.x):
    ledgers 10 (50 entries), 20 (4), 25 (empty), 30 (deleted, absent), 40 (6), 50 open (10 entries, LAC 50:9).
    Snapshots (10,1), (20,2), (40,1), (50,2), (50,4), (50,6), max 3. Gaps: open((10,1),(20,2)) = 48+2 = 50,
    open((20,2),(40,1)) = 1+0+1 = 2, open((40,1),(50,2)) = 4+2 = 6 -> sums 52 / 8: evict (40,1); (50,2)
    inherits 2+6 = 8 (the broker adds the gaps; counting again would say 9); add (50,4) (gap 1): sums
    58 / 9 -> evict (50,2), (50,4) inherits 9; add (50,6) (gap 1): sums 59 / 10 -> evict (50,4). The old
    cache (max 3) evicts the oldest instead. A topic without managed-ledger rows gets an error and
    distance 0."""
    adds = [(10, 1), (20, 2), (40, 1), (50, 2), (50, 4), (50, 6)]
    steps = [(ADD, p) for p in adds] + [(ADVANCE, (20, 2)), (ADVANCE, (60, 0))]
    rows = cache_events("s", steps, topic="tl") + cache_events("s", steps, topic="t-missing")
    events = spark.createDataFrame(rows, schema=EVENTS)
    ledgers = spark.createDataFrame(
        [("c1", "tl", lid, n, n * 10) for lid, n in [(10, 50), (20, 4), (25, 0), (40, 6), (50, 0)]],
        schema=LEDGERS,
    )
    ml = spark.createDataFrame([("c1", "tl", 50, 10, 100, (50, 9), 700)], schema=MANAGED_LEDGERS)
    new = replay_snapshot_cache(events, ledgers, ml, max_cached=3)
    old = replay_snapshot_cache(events, ledgers, ml, max_cached=3, pulsar_version="4.0.8")
    got = sorted(
        (
            r["topic"],
            r["cache_generation"],
            r["seq"],
            r["snapshot_id"],
            list(r["evicted_since_previous_advance"]),
        )
        for r in new.unionByName(old).collect()
    )
    assert got == [
        ("t-missing", "new", 7, "s10:1", ["s20:2", "s40:1", "s50:2"]),
        ("t-missing", "new", 8, "s50:6", []),
        ("t-missing", "old", 7, None, ["s10:1", "s20:2", "s40:1"]),
        ("t-missing", "old", 8, "s50:6", []),
        ("tl", "new", 7, "s20:2", ["s40:1", "s50:2", "s50:4"]),
        ("tl", "new", 8, "s50:6", []),
        ("tl", "old", 7, None, ["s10:1", "s20:2", "s40:1"]),
        ("tl", "old", 8, "s50:6", []),
    ]
    errors = {(r["topic"], r["error"] is not None) for r in new.collect()}
    assert errors == {("tl", False), ("t-missing", True)}


#: fidelity/snapshot_cache_tie.json: ledger 4 is the open ledger (listed 0/0, 11 entries, LAC 4:10), max 4.
TIE_CLUSTERS = {
    "snap-0": [("local", (4, 1)), ("remote-0", (100, 502)), ("remote-1", (101, 952))],
    "snap-1": [("local", (4, 2)), ("remote-0", (100, 422)), ("remote-1", (101, 353))],
    "snap-2": [("local", (4, 3)), ("remote-0", (100, 611))],
    "snap-3": [("local", (4, 4)), ("remote-0", (100, 877)), ("remote-1", (101, 364))],
    "snap-4": [("local", (4, 5))],
    "snap-5": [("local", (4, 6)), ("remote-0", (100, 319))],
    "snap-6": [("local", (4, 7)), ("remote-0", (100, 318))],
    "snap-7": [("local", (4, 8))],
}
TIE_OPS: list[tuple[str, str | None, Position]] = [
    (ADD, "snap-0", (4, 1)),
    (ADVANCE, None, (4, 5)),
    (ADD, "snap-1", (4, 2)),
    (ADVANCE, None, (4, -1)),
    (ADD, "snap-2", (4, 3)),
    (ADD, "snap-3", (4, 4)),
    (ADD, "snap-4", (4, 5)),
    (ADD, "snap-5", (4, 6)),
    (ADD, "snap-6", (4, 7)),
    (ADD, "snap-7", (4, 8)),
    (ADVANCE, None, (4, 5)),
]


def test_replay_snapshot_cache_new_ties_fidelity_snapshot_cache_tie(spark: SparkSession) -> None:
    """fidelity/snapshot_cache_tie.json (Pulsar 4.1's ReplicatedSubscriptionSnapshotCache, max 4): the
    broker's advances return snap-0, nothing, snap-1 (at 4:2) and it keeps snap-5, snap-6, snap-7.
    Every gap is 0 (consecutive entries): adding 4:6 evicts 4:3 (all sums 0, smallest position), and 4:4
    inherits 0+0; adding 4:7 evicts 4:4, adding 4:8 evicts 4:5, so 4:2 survives until the advance to 4:5.
    Measuring the merged gap again (1 entry between 4:2 and 4:4) keeps 4:4 and returns it instead."""
    rows = []
    for seq, (op, sid, p) in enumerate(TIE_OPS, start=1):
        if op == ADD:
            assert sid is not None
            rows.append(("c1", "tie", "sub", seq, op, sid, p, TIE_CLUSTERS[sid], None))
        else:
            rows.append(("c1", "tie", "sub", seq, op, None, None, None, p))
    events = spark.createDataFrame(rows, schema=EVENTS)
    ledgers = spark.createDataFrame([("c1", "tie", 4, 0, 0)], schema=LEDGERS)
    ml = spark.createDataFrame([("c1", "tie", 4, 11, 1047, (4, 10), 1047)], schema=MANAGED_LEDGERS)
    columns = [
        "subscription",
        "seq",
        "snapshot_id",
        "snapshot_local_position",
        "snapshot_clusters",
        "cache_size_after",
        "evicted_since_previous_advance",
        "error",
    ]
    got = replay_snapshot_cache(events, ledgers, ml, max_cached=4, pulsar_version="4.1.3").select(*columns)
    expected = spark.createDataFrame(
        [
            ("sub", 2, "snap-0", (4, 1), TIE_CLUSTERS["snap-0"], 0, [], None),
            ("sub", 4, None, None, None, 1, [], None),
            ("sub", 11, "snap-1", (4, 2), TIE_CLUSTERS["snap-1"], 3, ["snap-2", "snap-3", "snap-4"], None),
        ],
        schema=got.schema,
    )
    assert_df_equality(got, expected, ignore_row_order=True)


#: Pulsar's new ReplicatedSubscriptionSnapshotCacheTest.testSnapshotCache (max 10, distance 0): s1 (1,1),
#: s2 (2,2), s5 (5,5), s7 (7,7); before any add advanced(0,0) and advanced(100,0) are null; then
#: advanced(0,0) = null, advanced(1,0) = null, advanced(1,1) = (1,1), advanced(5,6) = (5,5),
#: advanced(2,2) = null, advanced(5,5) = null.
NEW_CACHE_STEPS = [(ADVANCE, (0, 0)), (ADVANCE, (100, 0))]
NEW_CACHE_STEPS += [(ADD, (1, 1)), (ADD, (2, 2)), (ADD, (5, 5)), (ADD, (7, 7))]
NEW_CACHE_STEPS += [(ADVANCE, p) for p in [(0, 0), (1, 0), (1, 1), (5, 6), (2, 2), (5, 5)]]


def test_replay_snapshot_cache_new_generation_test_snapshot_cache(spark: SparkSession) -> None:
    """The new testSnapshotCache (see NEW_CACHE_STEPS): no eviction at 4 of 10, so the distance plays no
    part (``constant`` hook); the advances pop like the old cache's."""
    events = spark.createDataFrame(cache_events("cache", NEW_CACHE_STEPS), schema=EVENTS)
    empty_l = spark.createDataFrame([], schema=LEDGERS)
    empty_ml = spark.createDataFrame([], schema=MANAGED_LEDGERS)
    df = replay_snapshot_cache(
        events, empty_l, empty_ml, max_cached=10, pulsar_version="4.1.3", distance="constant"
    )
    assert advances(df) == {
        "cache": [
            (1, None, 0, []),
            (2, None, 0, []),
            (7, None, 4, []),
            (8, None, 4, []),
            (9, "s1:1", 3, []),
            (10, "s5:5", 1, []),
            (11, None, 1, []),
            (12, None, 1, []),
        ]
    }


def test_new_snapshot_cache_adds_gaps_instead_of_counting_again() -> None:
    """§4.6 eviction with the broker's kind of distance (entries strictly between, one ledger): gaps of
    snapshots at 1:0, 1:2, 1:4, 1:6 are 0, 1, 1, 1; adding 1:8 (gap 1) evicts 1:2 (sums 2, 2, 2: the
    smallest position) and 1:4 inherits 1+1 = 2, not the 3 entries between 1:0 and 1:4; adding 1:10
    then evicts 1:6 (sums 3, 2, 2 -> 1:6 before 1:8), 1:8 inherits 2."""
    cache = NewSnapshotCache(lambda a, b: b[1] - a[1] - 1, 4)
    for e in (0, 2, 4, 6):
        cache.add(CachedSnapshot(f"s{e}", (1, e)))
    assert [s.snapshot_id for s in cache.add(CachedSnapshot("s8", (1, 8)))] == ["s2"]
    assert cache.distances() == [0, 2, 1, 1]
    assert [s.snapshot_id for s in cache.add(CachedSnapshot("s10", (1, 10)))] == ["s6"]
    assert cache.distances() == [0, 2, 2, 1]
    assert cache.advanced((1, 4)) == CachedSnapshot("s4", (1, 4))
    assert cache.distances() == [0, 1]


# --- events from an export and predicted UPDATE markers -------------------------------------------------


def test_predicted_updates_from_exported_markers(spark: SparkSession) -> None:
    """§4.6/§4.8: on "a", subscription S read SNAPSHOT markers K1 (local 1:4) and K2 (local 1:9); the
    UPDATE for K1 is at 1:12, the consumer then acked up to 1:30 (current md) without an UPDATE for K2
    being exported -> K1 matched, K2 predicted but not observed. Subscription T's UPDATE carries clusters
    no exported snapshot has -> observed, not predicted. A non-replicated cursor and a SNAPSHOT marker
    past S's read position are ignored."""
    topic = "tp"
    k1, k2 = [("b", (7, 3))], [("b", (7, 8))]
    rows = [
        snapshot_marker("a", topic, (1, 5), "K1", (1, 4), k1),
        snapshot_marker("a", topic, (1, 10), "K2", (1, 9), k2),
        marker("a", topic, (1, 12), 13, subscription_name="S", clusters=k1),
        marker("a", topic, (1, 14), 13, subscription_name="T", clusters=[("b", (6, 6))]),
        marker("a", topic, (1, 15), 13, replicated_from="b", subscription_name="S", clusters=[("a", (1, 1))]),
        snapshot_marker("a", topic, (1, 40), "K3", (1, 39), [("b", (7, 20))]),
    ]
    cursors = spark.createDataFrame(
        [
            ("a", topic, EXPORT_ID, EXPORT_DATE, "S", True, (1, 30), (1, 31)),
            ("a", topic, EXPORT_ID, EXPORT_DATE, "T", True, (1, 2), (1, 3)),
            ("a", topic, EXPORT_ID, EXPORT_DATE, "plain", False, (1, 30), (1, 41)),
        ],
        schema=CURSORS,
    )
    markers = markers_frame(spark, rows)
    events = snapshot_cache_events(markers, cursors)
    got_events = sorted(
        (r["subscription"], r["seq"], r["op"], r["snapshot_id"], r["mark_delete_position"], r["event_source"])
        for r in (to_py(x) for x in events.collect())
    )
    assert got_events == [
        ("S", 1, "add", "K1", None, "snapshot_marker"),
        ("S", 2, "add", "K2", None, "snapshot_marker"),
        ("S", 3, "advance", None, (1, 4), "update_marker"),
        ("S", 4, "advance", None, (1, 30), "cursor"),
        ("T", 1, "advance", None, (1, 13), "update_marker"),
        ("T", 2, "advance", None, (1, 2), "cursor"),
    ]
    ledgers, ml = _one_ledger_state(spark, 50)
    ledgers = ledgers.selectExpr("'a' AS cluster", "'tp' AS topic", "ledger_id", "entries", "size_bytes")
    ml = ml.selectExpr(
        "'a' AS cluster", "'tp' AS topic", *[c for c in ml.columns if c not in ("cluster", "topic")]
    )
    ledgers = ledgers.selectExpr("*", f"'{EXPORT_ID}' AS export_id", "DATE'2026-11-21' AS export_date")
    ml = ml.selectExpr("*", f"'{EXPORT_ID}' AS export_id", "DATE'2026-11-21' AS export_date")
    pred = predicted_updates(markers, cursors, ledgers, ml)
    got = sorted(
        (
            r["subscription"],
            r["seq"],
            r["update_position"],
            r["predicted_snapshot_id"],
            r["outcome"],
        )
        for r in (to_py(x) for x in pred.collect())
    )
    assert got == [
        ("S", 3, (1, 12), "K1", "matched"),
        ("S", 4, None, "K2", "predicted_not_observed"),
        ("T", 1, (1, 14), None, "observed_not_predicted"),
    ]


# --- plain-Python caches and version selection -------------------------------------------------------------


def test_uses_new_snapshot_cache_by_version() -> None:
    """PR #25044 shipped in 4.0.9 and 4.1.3 (docs §4.2); 4.2+ has it; 2.x/3.x never."""
    got = {
        v: uses_new_snapshot_cache(v)
        for v in ["2.10.6", "3.0.7", "4.0.8", "4.0.9", "4.1.2", "4.1.3", "4.2.0"]
    }
    assert got == {
        "2.10.6": False,
        "3.0.7": False,
        "4.0.8": False,
        "4.0.9": True,
        "4.1.2": False,
        "4.1.3": True,
        "4.2.0": True,
    }


def test_snapshot_caches_reject_capacities_they_cannot_honour() -> None:
    """The new cache's constructor throws below 3 ("maxSnapshotToCache must be >= 3", docs §4.6)."""
    with pytest.raises(ConfigError, match="max_cached=2"):
        NewSnapshotCache(lambda _a, _b: 1, 2)
    with pytest.raises(ConfigError, match="max_cached=0"):
        OldSnapshotCache(0)


def test_new_snapshot_cache_pruning_scenarios_distances() -> None:
    """§4.9.5 trace of the first step without Spark: gaps [0,1,8,5,10,75] -> remove index 1 (1:2)."""
    cache = NewSnapshotCache(lambda a, b: b[1] - a[1], 5)
    for e in [1, 2, 10, 15, 25]:
        cache.add(CachedSnapshot(f"s{e}", (1, e)))
    assert cache.distances() == [0, 1, 8, 5, 10]
    assert [s.snapshot_id for s in cache.add(CachedSnapshot("s100", (1, 100)))] == ["s2"]
    assert cache.distances() == [0, 9, 5, 10, 75]
