"""Property tests: pulsar_model.quota.eviction agrees with the plain-Python oracle (docs §3.6, §3.7).

Random managed-ledger states from tests/oracle/strategies.py (sparse ids, trimmed and empty ledgers, an
empty or missing open ledger, cursors at ``(L,-1)``/past a ledger end/in deleted ledgers, acked ranges, ties
on the slowest md, replicator/compaction/dedup/reader cursors) plus, per topic, a size limit, a time limit,
exported counters (sometimes drifting or negative), ledger close times (sometimes missing) and entry
publish times (mostly increasing, sometimes not, some entries not exported). The oracle is
tests/oracle/quota.py on top of tests/oracle/managed_ledger.py.

* the Spark properties batch 40-60 topics per example, run each transform once per version (unioned, one
  collect; the three transforms in parallel) and compare every cursor and topic;
* the engine property runs the per-topic engine itself (no Spark) on many more examples.

``PULSAR_PROPERTY_EXAMPLES`` scales both (default 1 Spark example, 60 engine examples).
"""

from __future__ import annotations

import datetime as dt
import functools
import random
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, Verbosity, assume, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, LongType, StructField, StructType, TimestampType

from pulsar_model.engine import topic_engine as eng
from pulsar_model.quota.eviction import (
    SUBSCRIPTION_MAP_KINDS,
    drop_backlog_for_size_limit,
    drop_backlog_for_time_limit,
    drop_backlog_what_ifs,
    expiry_checks_ledger_close_time,
    expiry_skips_unclosed_ledgers,
    size_eviction_uses_long_target,
    time_limit_compared_as_millis,
    time_limit_millis_overflow_int,
)
from tests.oracle import managed_ledger as o
from tests.oracle import quota as q
from tests.oracle import strategies as S
from tests.spark_conf import session_conf
from tests.test_properties_topic_engine import engine_ml

VERSIONS = ["2.8.0", "2.10.2", "2.10.6", "3.0.7", "4.1.3"]
#: 2.8.0: the "2.x-old" getPositionAfterN (NPEs, no LAC clamp) and storage count to ``LAC.next``; 2.10.2: the
#: 2.10.1 form of getPositionAfterN (deleted ledgers count 0, no unread guard, ``lastKey()+1``: docs §1.9).
ENGINE_VERSIONS = [*VERSIONS, "3.0.3"]  # 3.0.3: the ledger-closure step without #22335
NOW = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
NOW_MS = int(NOW.timestamp() * 1000)
HOUR_MS = 3_600_000

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:Generating overly large repr")]

SPARK_SETTINGS = settings(
    max_examples=S.PROPERTY_EXAMPLES,
    deadline=None,
    database=None,
    phases=[Phase.generate],
    verbosity=Verbosity.quiet,
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


@dataclass
class QuotaCase:
    """A generated topic plus everything the quota transforms read beyond the ML state."""

    case: S.Case
    limit_size: int
    limit_time: int
    entries_added: int | None
    consumed: list[int | None]
    closed_at: dict[int, int | None]
    timestamps: dict[o.Position, int]

    def describe(self) -> str:
        return (
            f"{self.case.describe()}\n  limit_size={self.limit_size} limit_time={self.limit_time} "
            f"entries_added={self.entries_added} consumed={self.consumed}\n  closed_at={self.closed_at}\n"
            f"  timestamps={sorted(self.timestamps.items())}"
        )


@st.composite
def quota_cases(draw: st.DrawFn) -> QuotaCase:
    case = draw(S.cursor_cases(min_cursors=1))
    ml = case.ml
    total = max(ml.total_size, 1)
    limit_size = draw(st.one_of(st.integers(-1, 0), st.integers(0, total), st.integers(0, 2 * total)))
    limit_time = draw(st.one_of(st.integers(-1, 2), st.integers(1, 4 * 3600), st.just(30 * 24 * 3600)))
    entries_added = draw(st.one_of(st.none(), st.integers(0, 80)))
    consumed = [draw(st.one_of(st.none(), st.integers(0, 80))) for _ in case.cursors]
    ages = st.one_of(st.none(), st.integers(0, 5 * HOUR_MS), st.just(40 * 24 * HOUR_MS))
    closed_at: dict[int, int | None] = {}
    for lid in ml.ledgers:
        if lid != ml.current_ledger_id:
            age = draw(ages)
            closed_at[lid] = None if age is None else NOW_MS - age
    # publish times from a drawn seed (one draw instead of several per entry keeps examples small): mostly
    # increasing, one in ten steps back, one in sixteen entries not exported
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))
    timestamps: dict[o.Position, int] = {}
    t = NOW_MS - rnd.randint(0, 6 * HOUR_MS)
    for p in case.state.existing_entries():
        t += rnd.randint(-HOUR_MS, 0) if rnd.randint(0, 9) == 0 else rnd.randint(0, HOUR_MS // 2)
        if rnd.randint(0, 15) > 0:
            timestamps[p] = t
    return QuotaCase(case, limit_size, limit_time, entries_added, consumed, closed_at, timestamps)


#: Cursor names of the tie-heavy strategy: up to seven durable cursors (subscriptions and system cursors).
TIED_NAMES = ["sub-a", "sub-b", "sub-c", "sub-d", "pulsar.repl.c2", "__compaction", "pulsar.dedup"]


@st.composite
def tied_quota_cases(draw: st.DrawFn, max_ledgers: int = 12, max_cursors: int = 7) -> QuotaCase:
    """Topics built for ties on the slowest cursor (docs §3.9): 2..7 durable cursors whose mark-deletes come
    from a pool of one to three positions, few acked ranges and mostly no counters (equal positions then
    have equal backlogs, so the size loop's skips land them on the same position again), most closed
    ledgers expired (the time loop moves groups of cursors in lockstep), limits that need several skips."""
    state = draw(S.ml_states(max_ledgers=max_ledgers))
    ml = state.ml
    k = draw(st.integers(2, max_cursors))
    names = draw(st.permutations(TIED_NAMES))[:k]
    orders = draw(st.permutations(list(range(k))))
    pool = [draw(S.mark_delete_positions(state)) for _ in range(draw(st.integers(1, 3)))]
    cursors = []
    for name, order in zip(names, orders, strict=True):
        md = draw(st.sampled_from(pool))
        idm = draw(S.individually_deleted(state, md)) if draw(st.integers(0, 4)) == 0 else []
        cursors.append(o.Cursor(name, order, draw(st.integers(0, 9)) > 0, md, idm))
    total = max(ml.total_size, 1)
    limit_size = draw(st.one_of(st.integers(0, total // 2), st.integers(0, total)))
    limit_time = draw(st.one_of(st.just(3600), st.integers(1, 4 * 3600)))
    entries_added = draw(st.one_of(st.none(), st.none(), st.integers(0, 80)))
    same = draw(st.integers(0, 80))
    consumed = [draw(st.one_of(st.none(), st.just(same))) for _ in cursors]
    closed_at: dict[int, int | None] = {}
    for lid in ml.ledgers:
        if lid != ml.current_ledger_id:
            age = draw(st.one_of(st.just(3 * HOUR_MS), st.just(3 * HOUR_MS), st.integers(0, 5 * HOUR_MS)))
            closed_at[lid] = NOW_MS - age
    return QuotaCase(
        S.Case(state, cursors=cursors), limit_size, limit_time, entries_added, consumed, closed_at, {}
    )


def kind_of(c: o.Cursor) -> str:
    if c.name.startswith("pulsar.repl."):
        return "replicator"
    if c.name in ("__compaction", "pulsar.dedup"):
        return {"__compaction": "compaction", "pulsar.dedup": "dedup"}[c.name]
    return "subscription" if c.durable else "reader"


def qcursors(qc: QuotaCase) -> list[q.QCursor]:
    return [
        q.QCursor(c.name, c.order, c.durable, kind_of(c), c.mark_delete, list(c.individually_deleted), n)
        for c, n in zip(qc.case.cursors, qc.consumed, strict=True)
    ]


# --- expected results from the oracle -----------------------------------------------------------------------
Expected = dict[tuple[str, str, str], Any]


def oracle_size(qc: QuotaCase, version: str) -> tuple[Any, dict[str, Any]]:
    cursors = qcursors(qc)
    out = q.size_eviction(qc.case.ml, cursors, qc.limit_size, version, qc.entries_added, True)
    topic = (
        out.stop_reason,
        out.stop_cursor,
        out.tie,
        out.backlog_before,
        out.backlog_after,
        [(t[0], t[3], t[4]) for t in out.trace],
    )
    per_cursor = {
        c.name: (c.mark_delete, sorted(c.individually_deleted), c.skipped, c.consumed) for c in cursors
    }
    return topic, per_cursor


def oracle_time(qc: QuotaCase, version: str) -> tuple[Any, dict[str, Any]]:
    cursors = qcursors(qc)
    out = q.time_eviction_ledgers(qc.case.ml, cursors, qc.closed_at, qc.limit_time, NOW_MS, version)
    topic = (out.stop_reason, out.stop_cursor, out.tie, out.trace)
    return topic, {
        c.name: (c.mark_delete, sorted(c.individually_deleted), c.skipped, c.consumed, c.skips)
        for c in cursors
    }


def oracle_precise(qc: QuotaCase, version: str) -> dict[str, Any]:
    if qc.limit_time <= 0:
        return {c.name: (c.mark_delete, None, False) for c in qc.case.cursors}
    ttl = int(0.9 * qc.limit_time)
    closed = qc.closed_at if expiry_checks_ledger_close_time(version) else None
    result: dict[str, Any] = {}
    for c in qcursors(qc):
        if c.kind not in SUBSCRIPTION_MAP_KINDS:
            result[c.name] = (c.mark_delete, None, False)
            continue
        res = q.expire(qc.case.ml, c, ttl, NOW_MS, qc.timestamps, closed, version)
        result[c.name] = (c.mark_delete, res.found, res.error)
    return result


# --- Spark inputs -------------------------------------------------------------------------------------------
def frames(spark: SparkSession, cases: list[QuotaCase]) -> dict[str, DataFrame]:
    plain = [qc.case for qc in cases]
    ledgers = spark.createDataFrame(
        [
            (S.CLUSTER, S.topic_name(i), lid, n, size, _dt(qc.closed_at.get(lid)))
            for i, qc in enumerate(cases)
            for lid, (n, size) in qc.case.ml.ledgers.items()
        ],
        extend(S.LEDGERS_SCHEMA, ("closed_at", TimestampType())),
    )
    mls = spark.createDataFrame(
        [(*row, qc.entries_added, NOW) for row, qc in zip(S.managed_ledger_rows(plain), cases, strict=True)],
        extend(
            S.MANAGED_LEDGERS_SCHEMA, ("entries_added_counter", LongType()), ("exported_at", TimestampType())
        ),
    )
    consumed = [n for qc in cases for n in qc.consumed]
    cursors = spark.createDataFrame(
        [(*row, n) for row, n in zip(S.cursor_rows(plain), consumed, strict=True)],
        extend(S.CURSORS_SCHEMA, ("messages_consumed_counter", LongType())),
    )
    limits = spark.createDataFrame(
        [(S.CLUSTER, S.topic_name(i), qc.limit_size, qc.limit_time) for i, qc in enumerate(cases)],
        "cluster string, topic string, limit_size_bytes bigint, limit_time_seconds bigint",
    )
    entries = spark.createDataFrame(
        [
            (S.CLUSTER, S.topic_name(i), p[0], p[1], ts)
            for i, qc in enumerate(cases)
            for p, ts in qc.timestamps.items()
        ],
        "cluster string, topic string, ledger_id bigint, entry_id bigint, publish_time_ms bigint",
    )
    return {"ledgers": ledgers, "mls": mls, "cursors": cursors, "limits": limits, "entries": entries}


def extend(schema: StructType, *fields: tuple[str, DataType]) -> StructType:
    """A copy of a strategies schema with extra nullable columns (the shared schema is not mutated)."""
    return StructType([*schema.fields, *(StructField(name, dtype, True) for name, dtype in fields)])


def _dt(ms: int | None) -> dt.datetime | None:
    return None if ms is None else dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=ms)


def _p(v: Any) -> o.Position | None:
    return None if v is None else (v["ledger_id"], v["entry_id"])


def topic_traces(rows: list[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(version, topic) -> the topic's trace: the union of its cursor rows' own steps in loop order.

    Checks the per-cursor shape: a row carries only its cursor's steps, ``trace_steps`` counts them, the
    iterations are 1..n, n = ``iteration_count`` (the default cap is never reached here).
    """
    merged: dict[tuple[str, str], list[dict[str, Any]]] = {}
    counts: dict[tuple[str, str], set[int]] = {}
    for r in rows:
        assert all(s["cursor_name"] == r["cursor_name"] for s in r["iterations"]), r["cursor_name"]
        assert r["trace_steps"] == len(r["iterations"]) and r["trace_truncated"] is False
        merged.setdefault((r["_version"], r["topic"]), []).extend(r["iterations"])
        counts.setdefault((r["_version"], r["topic"]), set()).add(r["iteration_count"])
    for key, steps in merged.items():
        steps.sort(key=lambda s: s["iteration"])
        assert [s["iteration"] for s in steps] == list(range(1, len(steps) + 1)), key
        assert counts[key] == {len(steps)}, key
    return merged


def _run(transform: Any) -> list[dict[str, Any]]:
    union = functools.reduce(
        lambda a, b: a.unionByName(b), [transform(v).withColumn("_version", F.lit(v)) for v in VERSIONS]
    )
    return [r.asDict(recursive=True) for r in union.collect()]


def what_if_limits(limits: DataFrame) -> DataFrame:
    """Each topic's limits as the three rows of :func:`drop_backlog_what_ifs`: size, time, precise time."""
    runs = [("destination_storage", None), ("message_age", False), ("message_age", True)]
    run = F.explode(
        F.array(
            *[
                F.struct(F.lit(t).alias("quota_type"), F.lit(p).cast("boolean").alias("precise"))
                for t, p in runs
            ]
        )
    )
    return limits.select("*", run.alias("_r")).select("*", "_r.quota_type", "_r.precise").drop("_r")


def assert_what_ifs_equal_single_calls(
    what_ifs: list[dict[str, Any]], single: dict[str, list[dict[str, Any]]]
) -> None:
    """Every row of each single call has its twin in the one-pass rows: equal on every column the single
    call has (the losses aside: only the precise call was given entries), steps included; the columns
    of the other call are null."""

    def run(r: dict[str, Any]) -> str:
        return "size" if r["quota_type"] == "destination_storage" else "precise" if r["precise"] else "time"

    twins = {(r["_version"], r["topic"], r["cursor_name"], run(r)): r for r in what_ifs}
    losses = {"lost_entries", "lost_messages", "lost_bytes"}
    for name, result in single.items():
        for r in result:
            twin = twins[(r["_version"], r["topic"], r["cursor_name"], name)]
            for field, value in r.items():
                if field in losses:
                    continue
                got = twin[field]
                if field == "iterations":
                    got = [{k: step[k] for k in mine} for step, mine in zip(got, value, strict=True)]
                assert got == value, (name, r["_version"], r["topic"], r["cursor_name"], field, value, got)
            others = set(twin) - set(r) - {"quota_type", "precise"}
            assert all(twin[f] is None for f in others), (name, {f: twin[f] for f in others})


@SPARK_SETTINGS
@given(
    cases=st.lists(quota_cases(), min_size=25, max_size=35),
    tied=st.lists(tied_quota_cases(), min_size=15, max_size=25),
)
def test_drop_backlog_matches_oracle(
    spark: SparkSession, cases: list[QuotaCase], tied: list[QuotaCase]
) -> None:
    """Size (§3.6), non-precise and precise time (§3.7) eviction: every cursor and topic vs the oracle,
    on random topics and on topics built for ties on the slowest cursor (§3.9)."""
    cases = cases + tied
    assume(S.is_informative([qc.case for qc in cases]))
    d = frames(spark, cases)
    jobs = {
        "size": lambda v: drop_backlog_for_size_limit(
            d["mls"], d["ledgers"], d["cursors"], d["limits"], pulsar_version=v
        ),
        "time": lambda v: drop_backlog_for_time_limit(
            d["mls"], d["ledgers"], d["cursors"], d["limits"], pulsar_version=v
        ),
        "precise": lambda v: drop_backlog_for_time_limit(
            d["mls"],
            d["ledgers"],
            d["cursors"],
            d["limits"],
            entries=d["entries"],
            precise=True,
            pulsar_version=v,
        ),
        # the three evictions of every topic in one grouped pass: must equal the single calls row for row
        "what_ifs": lambda v: drop_backlog_what_ifs(
            d["mls"], d["ledgers"], d["cursors"], what_if_limits(d["limits"]), d["entries"], pulsar_version=v
        ),
    }
    with session_conf(spark), ThreadPoolExecutor(max_workers=4) as pool:
        futures = {name: pool.submit(_run, fn) for name, fn in jobs.items()}
        rows = {name: f.result() for name, f in futures.items()}
    what_ifs = rows.pop("what_ifs")
    mismatches: list[S.Mismatch] = []
    n_cursors = sum(len(qc.case.cursors) for qc in cases)
    for name, result in rows.items():
        assert len(result) == len(VERSIONS) * n_cursors, f"{name}: one row per cursor and version expected"
    assert len(what_ifs) == 3 * len(VERSIONS) * n_cursors
    assert_what_ifs_equal_single_calls(what_ifs, rows)
    by_key = {
        name: {(r["_version"], r["topic"], r["cursor_name"]): r for r in result}
        for name, result in rows.items()
    }
    traces = {name: topic_traces(result) for name, result in rows.items()}
    for v in VERSIONS:
        for i, qc in enumerate(cases):
            topic = S.topic_name(i)
            size_topic, size_cursors = oracle_size(qc, v)
            time_topic, time_cursors = oracle_time(qc, v)
            precise = oracle_precise(qc, v)
            for c in qc.case.cursors:
                key = (v, topic, c.name)
                r = by_key["size"][key]
                got_topic = (
                    r["stop_reason"],
                    r["stop_cursor_name"],
                    r["slowest_tie_ambiguous"],
                    r["estimated_backlog_size_bytes_before"],
                    r["estimated_backlog_size_bytes_after"],
                    [
                        (s["cursor_name"], s["to_skip"], _p(s["mark_delete_after"]))
                        for s in traces["size"][(v, topic)]
                    ],
                )
                got_cursor = (
                    _p(r["mark_delete_position"]),
                    sorted((_p(x["lower"]), _p(x["upper"])) for x in r["individually_deleted"]),
                    r["skipped_entries"],
                    r["messages_consumed_counter"],
                )
                if (got_topic, got_cursor) != (size_topic, size_cursors[c.name]):
                    mismatches.append(
                        S.Mismatch(
                            v,
                            i,
                            f"size {c.name}",
                            (size_topic, size_cursors[c.name]),
                            (got_topic, got_cursor),
                        )
                    )
                r = by_key["time"][key]
                got_t = (
                    r["stop_reason"],
                    r["stop_cursor_name"],
                    r["slowest_tie_ambiguous"],
                    [
                        (s["cursor_name"], _p(s["mark_delete_before"]), _p(s["mark_delete_after"]))
                        for s in traces["time"][(v, topic)]
                    ],
                )
                got_c = (
                    _p(r["mark_delete_position"]),
                    sorted((_p(x["lower"]), _p(x["upper"])) for x in r["individually_deleted"]),
                    r["skipped_entries"],
                    r["messages_consumed_counter"],
                    r["skip_count"],
                )
                if (got_t, got_c) != (time_topic, time_cursors[c.name]):
                    mismatches.append(
                        S.Mismatch(v, i, f"time {c.name}", (time_topic, time_cursors[c.name]), (got_t, got_c))
                    )
                r = by_key["precise"][key]
                got_p = (_p(r["mark_delete_position"]), _p(r["expired_position"]), r["error"] is not None)
                if got_p != precise[c.name]:
                    mismatches.append(S.Mismatch(v, i, f"precise {c.name}", precise[c.name], got_p))
    if mismatches:
        first = mismatches[0]
        raise AssertionError(
            S.mismatch_report(mismatches, [qc.case for qc in cases])
            + "\nfirst case:\n"
            + cases[first.case_index].describe()
        )


# --- the engine alone, many examples ---------------------------------------------------------------------
def _engine_cursors(qc: QuotaCase) -> list[eng.Cursor]:
    return [
        eng.Cursor(c.name, c.order, c.durable, kind_of(c), c.mark_delete, list(c.individually_deleted), n)
        for c, n in zip(qc.case.cursors, qc.consumed, strict=True)
    ]


@ENGINE_SETTINGS
@given(qc=st.one_of(quota_cases(), tied_quota_cases()))
def test_topic_engine_matches_oracle(qc: QuotaCase) -> None:
    """The per-topic engine vs the oracle on four versions, many more topics than the Spark property (half
    of them built for ties on the slowest cursor)."""
    for v in ENGINE_VERSIONS:
        ml = engine_ml(qc.case.ml, v)
        cursors = _engine_cursors(qc)
        res = eng.drop_backlog_for_size_limit(
            ml, cursors, qc.limit_size, qc.entries_added, True, size_eviction_uses_long_target(v)
        )
        got = (
            res.stop_reason,
            res.stop_cursor_name,
            res.tie_ambiguous,
            res.backlog_before,
            res.backlog_after,
            [(s.cursor_name, s.to_skip, s.mark_delete_after) for s in res.steps],
        )
        try:
            expected = oracle_size(qc, v)
        except o.OracleUnreachableError:
            continue
        got_cursors = {c.name: (c.md, sorted(c.idm), c.skipped, c.consumed) for c in cursors}
        assert (got, got_cursors) == expected, f"size, version {v}\n{qc.describe()}"

        ml = engine_ml(qc.case.ml, v)
        cursors = _engine_cursors(qc)
        tres = eng.drop_backlog_for_time_limit_ledgers(
            ml,
            cursors,
            qc.closed_at,
            qc.limit_time,
            NOW_MS,
            time_limit_millis_overflow_int(v),
            compared_as_millis=time_limit_compared_as_millis(v),
        )
        steps = [(s.cursor_name, s.mark_delete_before, s.mark_delete_after) for s in tres.steps]
        got_t = (
            (tres.stop_reason, tres.stop_cursor_name, tres.tie_ambiguous, steps),
            {c.name: (c.md, sorted(c.idm), c.skipped, c.consumed, c.skips) for c in cursors},
        )
        expected_t = oracle_time(qc, v)
        assert got_t == expected_t, f"time, version {v}\n{qc.describe()}"
        # the direct end state (what the eviction outputs) against the oracle too
        cursors = _engine_cursors(qc)
        dres = eng.drop_backlog_for_time_limit_direct(
            ml,
            cursors,
            qc.closed_at,
            qc.limit_time,
            NOW_MS,
            time_limit_millis_overflow_int(v),
            compared_as_millis=time_limit_compared_as_millis(v),
        )
        got_d = (
            (dres.stop_reason, dres.stop_cursor_name, dres.tie_ambiguous, dres.iteration_count),
            {c.name: (c.md, sorted(c.idm), c.skipped, c.consumed, c.skips) for c in cursors},
        )
        expected_d = ((*expected_t[0][:3], len(expected_t[0][3])), expected_t[1])
        assert got_d == expected_d, f"time direct, version {v}\n{qc.describe()}"

        if qc.limit_time <= 0:
            continue
        ml = engine_ml(qc.case.ml, v)
        stamps = eng.Timestamps(qc.timestamps.items())
        closed = qc.closed_at if expiry_checks_ledger_close_time(v) else None
        got_p: dict[str, Any] = {}
        for c in _engine_cursors(qc):
            if c.kind not in SUBSCRIPTION_MAP_KINDS:
                got_p[c.name] = (c.md, None, False)
                continue
            ttl = eng.java_d2i(0.9 * qc.limit_time)
            pres = eng.expire_messages(ml, c, ttl, NOW_MS, stamps, closed, expiry_skips_unclosed_ledgers(v))
            got_p[c.name] = (c.md, pres.found_position, pres.error is not None)
        assert got_p == oracle_precise(qc, v), f"precise, version {v}\n{qc.describe()}"


@ENGINE_SETTINGS
@given(qc=tied_quota_cases(max_ledgers=40))
def test_time_direct_replays_the_heap_on_lockstep_groups(qc: QuotaCase) -> None:
    """§3.7/§3.9: groups of tied cursors walking up to 40 ledgers in lockstep. The direct path (end state per
    cursor path, the heap replay with rounds applied as slot permutations for the cursor it stops on) vs
    the oracle's stepwise loop on its own heap."""
    for v in VERSIONS:
        ml = engine_ml(qc.case.ml, v)
        cursors = _engine_cursors(qc)
        dres = eng.drop_backlog_for_time_limit_direct(
            ml,
            cursors,
            qc.closed_at,
            qc.limit_time,
            NOW_MS,
            time_limit_millis_overflow_int(v),
            compared_as_millis=time_limit_compared_as_millis(v),
        )
        (reason, name, tie, trace), ends = oracle_time(qc, v)
        got = (dres.stop_reason, dres.stop_cursor_name, dres.tie_ambiguous, dres.iteration_count)
        assert got == (reason, name, tie, len(trace)), f"version {v}\n{qc.describe()}"
        assert {c.name: (c.md, sorted(c.idm), c.skipped, c.consumed, c.skips) for c in cursors} == ends
