"""Property tests: snapshot cache replay and snapshot assembly agree with tests/oracle/replication.py.

* cache: random managed-ledger states (tests/oracle/strategies.py: sparse ids, trimmed and empty ledgers,
  open or no open ledger) with random add/advance sequences per subscription (adds mostly increasing,
  sometimes going back; positions in deleted ledgers, at ``(L,-1)`` or past a ledger's end), replayed by
  the oracle caches of docs §4.6 with the oracle's 4.x ``getNumberOfEntries(open(a, b))`` as distance;
* assembly: a discrete simulation of 2-4 clusters running §4.4/§4.5/§4.7 with random interleavings of
  marker arrival; its markers go through ``snapshot_assembly`` and must give back the simulation's own
  record of every snapshot.

The Spark properties batch many subscriptions / worlds into one DataFrame (one job per example,
``S.PROPERTY_EXAMPLES`` examples); the pure-Python engines run on many more examples without Spark.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pulsar_model.replication import replay_snapshot_cache, snapshot_assembly
from pulsar_model.replication.cache import (
    CachedSnapshot,
    CacheEvent,
    EntryCounts,
    distance_function,
    replay_events,
)
from pulsar_model.replication.snapshots import MarkerRecord, assemble_snapshots
from tests.oracle import replication as orc
from tests.oracle import strategies as S
from tests.oracle.managed_ledger import ManagedLedger, number_of_entries
from tests.test_replication_golden import (
    CURSORS,
    EVENTS,
    EXPORT_DATE,
    EXPORT_ID,
    marker,
    markers_frame,
    to_py,
)

Position = tuple[int, int]
EARLIEST: Position = (-1, -1)

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:Generating overly large repr")]

SPARK_SETTINGS = settings(
    max_examples=S.PROPERTY_EXAMPLES,
    deadline=None,
    database=None,
    phases=[Phase.generate],
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
ENGINE_SETTINGS = settings(
    max_examples=60 * S.PROPERTY_EXAMPLES,
    deadline=None,
    database=None,
    phases=[Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# --- cache cases --------------------------------------------------------------------------------------------


@dataclass
class CacheCase:
    state: S.MLState
    events: list[orc.Event]


@st.composite
def cache_cases(draw: st.DrawFn) -> CacheCase:
    state = draw(S.ml_states())
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))
    ml = state.ml
    pool = set(state.existing_entries()) | {(lid, -1) for lid in ml.ledgers}  # snapshot positions, and
    pool |= {(lid, e - 1) for lid, e in state.trimmed} | {
        (lid, 0) for lid in state.gap_ids
    }  # deleted ledgers,
    pool |= {(lid, state.real_entries(lid) + 1) for lid in ml.ledgers}  # past a ledger's end
    pool |= {p for p in draw(st.lists(S.positions(state), max_size=3)) if p[0] >= 0}
    existing = sorted(state.existing_entries())
    if existing and rnd.random() < 0.5:
        # a run of consecutive entries: every gap is 0 entries, the eviction is decided by ties alone
        start = rnd.randrange(len(existing))
        adds = existing[start : start + draw(st.integers(1, 16))]
    else:
        adds = sorted(rnd.sample(sorted(pool), min(len(pool), draw(st.integers(1, 16)))))
    for _ in range(rnd.choice([0, 0, 1, 2])):  # equal or earlier positions: the new cache clears
        if len(adds) > 2:
            i = rnd.randrange(1, len(adds))
            adds.insert(i, adds[rnd.randrange(0, i)])
    mds = [p for p in draw(st.lists(S.positions(state), min_size=1, max_size=4)) if p[0] >= 0]
    ops: list[tuple[str, Position]] = [("add", p) for p in adds]
    for md in mds:  # advances anywhere between the adds (adds keep their order)
        ops.insert(rnd.randrange(0, len(ops) + 1), ("advance", md))
    events = []
    for seq, (op, p) in enumerate(ops, start=1):
        if op == "add":
            clusters = tuple((c, (p[0] + k, p[1] + k)) for k, c in enumerate(rnd.sample(["b", "c", "d"], 2)))
            events.append(orc.Event(seq, "add", snap=orc.Snap(f"s{seq}", p, tuple(sorted(clusters)))))
        else:
            events.append(orc.Event(seq, "advance", md=p))
    return CacheCase(state, events)


def entry_id_distance(a: Position, b: Position) -> int:
    """The entry-id difference Pulsar's testSnapshotCachePruningScenarios uses (docs §4.9)."""
    return b[1] - a[1]


def oracle_distance(ml: ManagedLedger) -> Any:
    return lambda a, b: number_of_entries(ml, a, False, b, False, "4x")


def constant_distance(_a: Position, _b: Position) -> int:
    """The constant distance of Pulsar's testSnapshotCachePruning (docs §4.9): every sum ties."""
    return 1


def expected_cache(case: CacheCase, new: bool, max_cached: int, mode: str) -> list[tuple[Any, ...]]:
    dist = {"entries": oracle_distance(case.state.ml), "entry_id": entry_id_distance}.get(
        mode, constant_distance
    )
    snaps = {e.snap.sid: e.snap for e in case.events if e.snap is not None}
    out = []
    for seq, sid, size, evicted in orc.replay(case.events, new, max_cached, dist):
        clusters = None if sid is None else list(snaps[sid].clusters)
        out.append((seq, sid, size, evicted, clusters))
    return out


#: (pulsar version, max_cached, distance): old cache, new cache with the broker's entry counts, new cache
#: with the Pulsar tests' entry-id and constant distances. The Spark property runs SPARK_CACHE_SETTINGS
#: (each ``entries`` replay adds a count plan to the job); the engine property runs them all.
CACHE_SETTINGS = [
    ("3.0.7", 3, "entries"),
    ("4.1.3", 3, "entries"),
    ("4.0.9", 4, "entries"),
    ("4.2.0", 4, "entry_id"),
    ("4.1.3", 3, "constant"),
]
SPARK_CACHE_SETTINGS = [CACHE_SETTINGS[0], CACHE_SETTINGS[1], CACHE_SETTINGS[3], CACHE_SETTINGS[4]]


@ENGINE_SETTINGS
@given(case=cache_cases())
def test_cache_engine_matches_oracle(case: CacheCase) -> None:
    """cache.replay_events + the EntryCounts decomposition == oracle caches with the oracle's counts."""
    ml = case.state.ml
    positions = {e.snap.pos for e in case.events if e.snap is not None}
    counts = {
        p: EntryCounts(
            number_of_entries(ml, EARLIEST, False, p, False, "4x"),
            number_of_entries(ml, EARLIEST, False, p, True, "4x"),
            number_of_entries(ml, EARLIEST, False, (p[0], -1), False, "4x"),
        )
        for p in positions
    }
    for _version, max_cached, mode in CACHE_SETTINGS:
        for new in (False, True):
            dist, unknown = distance_function(mode, counts)
            events = [
                CacheEvent(
                    e.seq,
                    e.op,
                    snapshot=None
                    if e.snap is None
                    else CachedSnapshot(e.snap.sid, e.snap.pos, e.snap.clusters),
                    mark_delete=e.md,
                )
                for e in case.events
            ]
            got = [
                (
                    r.seq,
                    None if r.applied is None else r.applied.snapshot_id,
                    r.cache_size_after,
                    r.evicted_since_previous_advance,
                    None if r.applied is None else list(r.applied.clusters),
                )
                for r in replay_events(events, new_cache=new, max_cached=max_cached, distance=dist)
            ]
            assert got == expected_cache(case, new, max_cached, mode), case.state.ml
            assert not unknown


def _cache_frames(spark: SparkSession, cases: Sequence[CacheCase]) -> tuple[DataFrame, DataFrame, DataFrame]:
    rows = []
    for i, case in enumerate(cases):
        for e in case.events:
            if e.snap is not None:
                rows.append(
                    (
                        S.CLUSTER,
                        S.topic_name(i),
                        "sub",
                        e.seq,
                        "add",
                        e.snap.sid,
                        e.snap.pos,
                        list(e.snap.clusters),
                        None,
                    )
                )
            else:
                rows.append((S.CLUSTER, S.topic_name(i), "sub", e.seq, "advance", None, None, None, e.md))
    wrapped = [S.Case(c.state) for c in cases]
    events = spark.createDataFrame(rows, schema=EVENTS)
    ledgers = spark.createDataFrame(S.ledger_rows(wrapped), schema=S.LEDGERS_SCHEMA)
    mls = spark.createDataFrame(S.managed_ledger_rows(wrapped), schema=S.MANAGED_LEDGERS_SCHEMA)
    return events, ledgers, mls


@SPARK_SETTINGS
@given(cases=st.lists(cache_cases(), min_size=25, max_size=40))
def test_replay_snapshot_cache_matches_oracle(spark: SparkSession, cases: list[CacheCase]) -> None:
    """Every advance of every subscription, for the old and both new-cache settings, in one Spark job."""
    # Hypothesis' first example is the minimal one (every subscription one add): skip it cheaply
    assume(
        len({repr(c.events) for c in cases}) > len(cases) // 2 and sum(len(c.events) > 6 for c in cases) > 5
    )
    events, ledgers, mls = _cache_frames(spark, cases)
    parts = [
        replay_snapshot_cache(
            events,
            ledgers,
            mls,
            max_cached=m,
            pulsar_version=v,
            distance=d,
        ).select(F.lit(k).alias("setting"), "*")
        for k, (v, m, d) in enumerate(SPARK_CACHE_SETTINGS)
    ]
    union = parts[0]
    for p in parts[1:]:
        union = union.unionByName(p)
    got: dict[tuple[int, str], list[tuple[Any, ...]]] = {}
    for r in union.collect():
        row = to_py(r)
        clusters = (
            None
            if row["snapshot_clusters"] is None
            else [(x["cluster"], x["position"]) for x in row["snapshot_clusters"]]
        )
        got.setdefault((row["setting"], row["topic"]), []).append(
            (
                row["seq"],
                row["snapshot_id"],
                row["cache_size_after"],
                row["evicted_since_previous_advance"],
                clusters,
            )
        )
        assert row["error"] is None, row
    for k, (v, m, d) in enumerate(SPARK_CACHE_SETTINGS):
        new = v != "3.0.7"
        for i, case in enumerate(cases):
            expected = expected_cache(case, new, m, d)
            actual = sorted(got.get((k, S.topic_name(i)), []))
            assert actual == expected, f"setting {SPARK_CACHE_SETTINGS[k]} case {i}: {case.state.ml}"


# --- assembly: simulated worlds -----------------------------------------------------------------------------


#: ``replicatedSubscriptionsSnapshotTimeoutSeconds`` is whole seconds; simulated steps take 0-700 ms.
TIMEOUTS_MS = [1000, 5000, 30000]


@st.composite
def worlds(draw: st.DrawFn, timeout_ms: int) -> orc.World:
    n = draw(st.integers(2, 4))
    seed = draw(st.integers(0, 2**32 - 1))
    steps = draw(st.integers(10, 90))
    w = orc.World(random.Random(seed), ["a", "b", "c", "d"][:n], timeout_ms)
    w.run(steps, max_snapshots=draw(st.integers(1, 6)))
    return w


def _records_for(w: orc.World, source: str) -> list[MarkerRecord]:
    """Route the world's markers to ``source`` the way snapshot_assembly documents it."""
    out = []
    for e in w.marker_rows():
        role = None
        local = e.replicated_from is None
        if e.marker_type == orc.REQUEST and local and e.cluster == source:
            role = "request"
        elif e.marker_type == orc.REQUEST and not local and e.source_cluster == source:
            role = "landed"
        elif e.marker_type == orc.RESPONSE and local and source in e.replicate_to:
            role = "response_written"
        elif e.marker_type == orc.RESPONSE and not local and e.cluster == source:
            role = "response_received"
        elif e.marker_type == orc.SNAPSHOT and local and e.cluster == source:
            role = "snapshot"
        if role is not None:
            out.append(
                MarkerRecord(
                    role,
                    e.snapshot_id,
                    e.cluster,
                    e.position,
                    e.t,
                    e.replicated_from,
                    e.response_cluster,
                    e.response_position,
                    e.local_position,
                    e.clusters,
                )
            )
    return out


COMPARED = [
    "status",
    "remote_clusters",
    "rounds_needed",
    "rounds_completed",
    "request_count",
    "request_round1_position",
    "request_round2_position",
    "started_ms",
    "requests_landed",
    "responses",
    "kept_clusters",
    "round1_completed_position",
    "predicted_local_position",
    "snapshot_position",
    "snapshot_matches",
    "late_responses",
    "gap_from_previous_ms",
]


def _normalise(row: dict[str, Any]) -> dict[str, Any]:
    """Assembly output (plain Python) -> the simulation's shapes."""
    out = {k: row[k] for k in COMPARED}
    out["requests_landed"] = [(x["cluster"], x["round"], x["position"]) for x in row["requests_landed"]]
    out["responses"] = [
        (
            x["cluster"],
            x["round"],
            x["response_position"],
            x["written_position"],
            x["received_position"],
            x["outcome"],
        )
        for x in row["responses"]
    ]
    out["kept_clusters"] = [(x["cluster"], x["position"]) for x in row["kept_clusters"]]
    return out


def _tuple_positions(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"ledger_id", "entry_id"}:
        return (value["ledger_id"], value["entry_id"])
    if isinstance(value, dict):
        return {k: _tuple_positions(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_tuple_positions(v) for v in value]
    return value


def _expected(w: orc.World, checked_at: int) -> dict[tuple[str, str], dict[str, Any]]:
    return {(e["cluster"], e["snapshot_id"]): {k: e[k] for k in COMPARED} for e in w.expected(checked_at)}


@ENGINE_SETTINGS
@given(timeout_ms=st.sampled_from(TIMEOUTS_MS), data=st.data())
def test_assembly_engine_matches_simulation(timeout_ms: int, data: st.DataObject) -> None:
    w = data.draw(worlds(timeout_ms))
    checked_at = w.now
    got = {}
    for source in w.names:
        remotes = [r for r in w.names if r != source]
        rows = assemble_snapshots(
            _records_for(w, source),
            remotes,
            timeout_ms=timeout_ms,
            frequency_ms=1000,
            checked_at_ms=checked_at,
        )
        for row in rows:
            got[(source, row["snapshot_id"])] = _normalise(_tuple_positions(row))
    assert got == _expected(w, checked_at)


@SPARK_SETTINGS
@given(timeout_ms=st.sampled_from(TIMEOUTS_MS), data=st.data())
def test_snapshot_assembly_matches_simulation(
    spark: SparkSession, timeout_ms: int, data: st.DataObject
) -> None:
    """10-20 simulated worlds (one topic each) in one DataFrame, one Spark job."""
    ws = data.draw(st.lists(worlds(timeout_ms), min_size=10, max_size=20))
    assume(sum(len(w.snaps) > 1 for w in ws) > len(ws) // 2)  # not Hypothesis' minimal example
    checked_at = max(w.now for w in ws) + 1
    rows, cursor_rows = [], []
    for i, w in enumerate(ws):
        topic = f"persistent://t/ns/w{i}"
        for e in w.marker_rows():
            rows.append(
                marker(
                    e.cluster,
                    topic,
                    e.position,
                    e.marker_type or 0,
                    e.t,
                    replicated_from=e.replicated_from,
                    replicate_to=e.replicate_to,
                    snapshot_id=e.snapshot_id,
                    source_cluster=e.source_cluster,
                    response_cluster=e.response_cluster,
                    response_position=e.response_position,
                    local_position=e.local_position,
                    clusters=e.clusters,
                )
            )
        for a in w.names:
            for b in w.names:
                if a != b:
                    cursor_rows.append(
                        (a, topic, EXPORT_ID, EXPORT_DATE, f"pulsar.repl.{b}", False, (0, -1), None)
                    )
    cursors = spark.createDataFrame(cursor_rows, schema=CURSORS)
    df = snapshot_assembly(
        markers_frame(spark, rows), cursors=cursors, timeout_seconds=timeout_ms // 1000, checked_at=checked_at
    )
    got = {(r["topic"], r["cluster"], r["snapshot_id"]): _normalise(to_py(r)) for r in df.collect()}
    expected = {
        (f"persistent://t/ns/w{i}", c, sid): v
        for i, w in enumerate(ws)
        for (c, sid), v in _expected(w, checked_at).items()
    }
    assert got == expected
