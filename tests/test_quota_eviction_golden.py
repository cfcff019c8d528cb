"""Golden tests for pulsar_model.quota.eviction (docs §3.5-§3.8 scenarios 1-6 and the edge rows of §3.6/§3.7).

Every scenario is one topic; all topics go through each transform in one call per version (3.0.5: double
target and ``(a / b) * c``, ``limitTime * 1000`` in ints; 4.2.2: long target and ``a * c / b`` of
apache/pulsar#25624, ``SECONDS.toMillis``), computed once by a module fixture (Spark actions run in
parallel). Two more jobs run the size and time loops on the patch releases around the boundaries of those
two changes (docs §3.6, §3.7). Each test reads its topic's rows. Entries are 1000 B unless stated.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pulsar_model.errors import ConfigError
from pulsar_model.quota.eviction import (
    drop_backlog_for_size_limit,
    drop_backlog_for_time_limit,
    drop_backlog_what_ifs,
)
from tests.contract_frames import CURSOR_STATE, MANAGED_LEDGER_STATE, contract_schema
from tests.spark_conf import FAST_CONF, session_conf

V30, V4 = "3.0.5", "4.2.2"
VERSIONS = (V30, V4)
#: Patch releases on both sides of #25624 (4.0.11, 4.2.2; not 4.1.x) and of #21816 / #22740 (3.0.6, 3.3.0).
SIZE_BOUNDARY_VERSIONS = ("4.0.10", "4.0.11", "4.1.3", "4.2.1")
TIME_BOUNDARY_VERSIONS = ("3.0.6", "3.1.3", "3.2.4", "3.3.0")
#: Patch releases on both sides of #17957 (the limit compared in seconds before it).
RAW_LIMIT_VERSIONS = ("2.8.4", "2.9.3", "2.9.4", "2.10.2", "2.10.3", "2.11.0", "2.11.1", "3.0.0")
NOW = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
NOW_MS = int(NOW.timestamp() * 1000)
HOUR_MS = 3_600_000

ML_SCHEMA = contract_schema(
    "managed_ledgers", [*MANAGED_LEDGER_STATE, "entries_added_counter", "exported_at"]
)
LEDGER_SCHEMA = contract_schema(
    "ledgers", ["cluster", "topic", "ledger_id", "entries", "size_bytes", "closed_at"]
)
CURSOR_SCHEMA = contract_schema("cursors", [*CURSOR_STATE, "messages_consumed_counter"])
ENTRY_SCHEMA = contract_schema(
    "entries",
    [
        "cluster",
        "topic",
        "ledger_id",
        "entry_id",
        "publish_time_ms",
        "broker_timestamp",
        "message_count",
        "entry_size_bytes",
    ],
)
#: Tiny inputs: one shuffle bucket, one Python worker per stage.
TEST_CONF = {**FAST_CONF, "spark.sql.shuffle.partitions": "1"}

Pos = tuple[int, int]


@dataclass
class Topic:
    """One scenario: closed ledgers ``(id, entries, bytes, closed_at_ms)``, the open ledger, cursors."""

    name: str
    closed: list[tuple[int, int, int, int | None]]
    current: tuple[int, int, int] | None  # (id, entries, bytes); None = no open ledger
    cursors: list[tuple[str, bool, Pos, list[tuple[Pos, Pos]], int | None]] = field(default_factory=list)
    limit: int | None = None
    entries_added: int | None = None
    timestamps: dict[Pos, int] = field(default_factory=dict)  # exported entries -> publish time (ms)

    @property
    def lac(self) -> Pos:
        if self.current is not None and self.current[1] > 0:
            return (self.current[0], self.current[1] - 1)
        non_empty = [(lid, n) for lid, n, _, _ in self.closed if n > 0]
        return (non_empty[-1][0], non_empty[-1][1] - 1)


def open_ledger(n: int, size: int = 1000, lid: int = 1) -> tuple[int, int, int]:
    return (lid, n, n * size)


def subs(
    *names: str, md: Pos, counter: int | None = None
) -> list[tuple[str, bool, Pos, list[Any], int | None]]:
    return [(name, True, md, [], counter) for name in names]


def old_entries(ledger: int, n: int, old: int, young_ms: int = NOW_MS) -> dict[Pos, int]:
    """Entries ``(ledger, 0..n-1)``: the first ``old`` published a day ago, the others at ``young_ms``."""
    return {(ledger, e): (NOW_MS - 24 * HOUR_MS + e if e < old else young_ms) for e in range(n)}


# --- scenarios --------------------------------------------------------------------------------------------
SIZE: dict[str, Topic] = {}
TIME: dict[str, Topic] = {}
PRECISE: dict[str, Topic] = {}


def add(group: dict[str, Topic], topic: Topic) -> None:
    group[topic.name] = topic


# §3.8-1 testConsumerBacklogEvictionSizeQuota: limit 10 KiB, 2 subscriptions never ack, 20 messages of 1 KiB
add(SIZE, Topic("s1_two_subs_1k", [], open_ledger(20, 1024), subs("sub1", "sub2", md=(1, -1)), 10 * 1024))
# §3.8-4 testConsumerBacklogEvictionWithAckSizeQuota: sub1 acked everything, sub2 never acks
add(
    SIZE,
    Topic(
        "s4_one_acks",
        [],
        open_ledger(20, 1024),
        [("sub1", True, (1, 19), [], None), ("sub2", True, (1, -1), [], None)],
        10 * 1024,
    ),
)

# §3.8-6 computed: one open ledger, 20 x 1000 B, limit 10000 -> target 9000; two subs, then one sub
add(SIZE, Topic("s6_two_subs", [], open_ledger(20), subs("s1", "s2", md=(1, -1)), 10_000))
add(SIZE, Topic("s6_one_sub", [], open_ledger(20), subs("s1", md=(1, -1)), 10_000))
# double vs long target: same target 27000, (28000 / 55000) * 55 = 27.999999999999996 -> 27,
# 28000 * 55 / 55000 = 28
add(SIZE, Topic("formula_order", [], open_ledger(55), subs("s1", md=(1, -1)), 30_000))
# double vs long target: limit 10001 -> target 9000.9 (3.0) vs 9000 (#25624): toSkip 10 vs 11
add(SIZE, Topic("formula_target", [], open_ledger(20), subs("s1", md=(1, -1)), 10_001))
# counters: entriesAddedCounter 120 - messagesConsumedCounter 90 = 30 entries (drift) instead of 20
add(SIZE, Topic("counter_drift", [], open_ledger(20), subs("s1", md=(1, -1), counter=90), 10_000, 120))
# counter below the consumed counter -> precise fallback
add(SIZE, Topic("counter_negative", [], open_ledger(20), subs("s1", md=(1, -1), counter=500), 10_000, 120))
# a replicator cursor is the slowest and is skipped first; the reader never counts
add(
    SIZE,
    Topic(
        "system_cursor",
        [(1, 10, 10_000, None)],
        open_ledger(10, lid=2),
        [
            ("sub", True, (1, 4), [], None),
            ("pulsar.repl.west", True, (1, -1), [], None),
            ("reader-1", False, (1, -1), [], None),
        ],
        10_000,
    ),
)
# acked ranges after md: skip(Include) counts them, the mark-delete extension swallows (1:11, 1:13]
add(
    SIZE,
    Topic(
        "acked_ranges",
        [],
        open_ledger(20),
        [("s1", True, (1, -1), [((1, 11), (1, 13)), ((1, 15), (1, 16))], None)],
        10_000,
    ),
)
# md in a deleted (trimmed) ledger 1: the estimate keeps everything after it; empty closed ledger 3
add(
    SIZE,
    Topic("deleted_ledger", [(2, 10, 10_000, None), (3, 0, 0, None)], open_ledger(10, lid=4),
          subs("s1", md=(1, 7)), 10_000),
)  # fmt: skip
add(SIZE, Topic("disabled", [], open_ledger(20), subs("s1", md=(1, -1)), -1))
add(SIZE, Topic("limit_zero", [], open_ledger(20), subs("s1", md=(1, -1)), 0))
add(SIZE, Topic("below_target", [], open_ledger(5), subs("s1", md=(1, -1)), 10_000))
# entries to skip truncated to 0: 1 entry left above the target by 1 byte... 9001 B in 1 entry
add(SIZE, Topic("zero_skip", [], (1, 1, 9001), subs("s1", md=(1, -1)), 10_000))
add(SIZE, Topic("readers_only", [], open_ledger(20), [("reader-1", False, (1, -1), [], None)], 10_000))
# /work/shared/fidelity/size_eviction_tie.json: ledgers 3 (4 x 1 B), 4 (24 x 1 B), 6 (5 x 1 B), 7 (31 x 2 B),
# 8 (3 x 2 B), open 11 with 1 entry of 2 B (LAC 11:0, totalSize 103); sub-a 4:14, sub-b 4:16, sub-c 4:3
# added to the cursor heap in this order; limit 81
add(
    SIZE,
    Topic(
        "fidelity_heap_tie",
        [(3, 4, 4, None), (4, 24, 24, None), (6, 5, 5, None), (7, 31, 62, None), (8, 3, 6, None)],
        (11, 1, 2),
        [
            ("sub-a", True, (4, 14), [], None),
            ("sub-b", True, (4, 16), [], None),
            ("sub-c", True, (4, 3), [], None),
        ],
        81,
    ),
)

# §3.8-3 testConsumerBacklogEvictionTimeQuota (non-precise): L1: 5, L2: 5 closed 2 h ago, L3 open with 4
TIME_LEDGERS = [(1, 5, 5000, NOW_MS - 2 * HOUR_MS), (2, 5, 5000, NOW_MS - 2 * HOUR_MS)]
add(TIME, Topic("t3_ledgers", TIME_LEDGERS, open_ledger(4, lid=3), subs("sub1", "sub2", md=(1, -1)), 3600))
# §3.8-4 testConsumerBacklogEvictionWithAckTimeQuota: sub1 acked everything, sub2 14 -> 4
add(
    TIME,
    Topic(
        "t4_one_acks",
        TIME_LEDGERS,
        open_ledger(4, lid=3),
        [("sub1", True, (3, 3), [], None), ("sub2", True, (1, -1), [], None)],
        3600,
    ),
)
# L2 closed only 10 minutes ago: not expired
add(
    TIME,
    Topic("t_young", [(1, 5, 5000, NOW_MS - 2 * HOUR_MS), (2, 5, 5000, NOW_MS - 600_000)],
          open_ledger(4, lid=3), subs("s1", md=(1, 2)), 3600),
)  # fmt: skip
# close time not exported (stats-internal has none): undecidable
add(
    TIME,
    Topic("t_unknown", [(1, 5, 5000, NOW_MS - 2 * HOUR_MS), (2, 5, 5000, None)], open_ledger(4, lid=3),
          subs("s1", md=(1, -1)), 3600),
)  # fmt: skip
# md in a deleted ledger 7 -> (next ledger, -1) whatever the time
add(TIME, Topic("t_deleted", [(8, 5, 5000, NOW_MS)], open_ledger(4, lid=9), subs("s1", md=(7, 3)), 3600))
# 30-day limit: before #21816 / #22740 limitTime * 1000 is computed in 32-bit ints (wraps negative) and the
# 10-minute-old ledger is evicted; SECONDS.toMillis does not
add(
    TIME,
    Topic("t_overflow", [(1, 5, 5000, NOW_MS - 600_000)], open_ledger(4, lid=2), subs("s1", md=(1, -1)),
          30 * 24 * 3600),
)  # fmt: skip
# closed 10 s ago, limit 1 hour: before #17957 the age in ms (10000) is compared with 3600 unconverted and
# the ledger expires; with the * 1000 it does not
add(
    TIME,
    Topic("t_raw_seconds", [(1, 5, 5000, NOW_MS - 10_000)], open_ledger(4, lid=2), subs("s1", md=(1, -1)),
          3600),
)  # fmt: skip
# no open ledger and the last ledger expired: no next ledger (the broker's NullPointerException)
add(TIME, Topic("t_no_next", [(1, 5, 5000, NOW_MS - 2 * HOUR_MS)], None, subs("s1", md=(1, 2)), 3600))
add(TIME, Topic("t_disabled", TIME_LEDGERS, open_ledger(4, lid=3), subs("s1", md=(1, -1)), 0))

# §3.8-2 testConsumerBacklogEvictionTimeQuotaPrecise: 9 messages, both subscriptions 9 -> 0
add(
    PRECISE,
    Topic("p2_nine", [], open_ledger(9), subs("sub1", "sub2", md=(1, -1)), 10, None, old_entries(1, 9, 9)),
)
# §3.8-4 testConsumerBacklogEvictionWithAckTimeQuotaPrecise: sub1 acked (0), sub2 9 -> 0
add(
    PRECISE,
    Topic(
        "p4_one_acks",
        [],
        open_ledger(9),
        [("sub1", True, (1, 8), [], None), ("sub2", True, (1, -1), [], None)],
        10,
        None,
        old_entries(1, 9, 9),
    ),
)
# §3.8-5 testFindNewestMatchingOdd1..5 / Even1..4 / none: the first k of 5 (4) entries expired
for k in range(6):
    add(
        PRECISE,
        Topic(f"p5_odd{k}", [], open_ledger(5), subs("c1", md=(1, -1)), 10, None, old_entries(1, 5, k)),
    )
for k in range(1, 5):
    add(
        PRECISE,
        Topic(f"p5_even{k}", [], open_ledger(4), subs("c1", md=(1, -1)), 10, None, old_entries(1, 4, k)),
    )
# replicators and the dedup cursor are not subscriptions; readers and __compaction are
add(
    PRECISE,
    Topic(
        "p_kinds",
        [],
        open_ledger(5),
        [
            ("pulsar.repl.west", True, (1, -1), [], None),
            ("pulsar.dedup", True, (1, -1), [], None),
            ("__compaction", True, (1, -1), [], None),
            ("reader-1", False, (1, -1), [], None),
        ],
        10,
        None,
        old_entries(1, 5, 3),
    ),
)
# non-monotonic publish times: the search assumes order and misses the later expired entry 1:3
NON_MONOTONIC = old_entries(1, 5, 2)
NON_MONOTONIC[(1, 3)] = NOW_MS - 24 * HOUR_MS
add(PRECISE, Topic("p_non_monotonic", [], open_ledger(5), subs("c1", md=(1, -1)), 10, None, NON_MONOTONIC))
# a probed entry missing from the export: undecidable
MISSING = old_entries(1, 5, 3)
del MISSING[(1, 2)]
add(PRECISE, Topic("p_missing", [], open_ledger(5), subs("c1", md=(1, -1)), 10, None, MISSING))
# whole closed ledger older than the TTL but with young (skewed) publish times: the ledger-closure step
# (apache/pulsar#21940) expires it, the binary search alone would not
add(
    PRECISE,
    Topic(
        "p_closure",
        [(1, 3, 3000, NOW_MS - 2 * HOUR_MS)],
        open_ledger(2, lid=2),
        subs("c1", md=(1, -1)),
        3600,
        None,
        {**old_entries(1, 3, 0), **old_entries(2, 2, 0)},
    ),
)

# ... and a ledger closed 10 minutes ago (younger than the TTL of 3240 s) is not
add(
    PRECISE,
    Topic(
        "p_closure_young",
        [(1, 3, 3000, NOW_MS - 600_000)],
        open_ledger(2, lid=2),
        subs("c1", md=(1, -1)),
        3600,
        None,
        {**old_entries(1, 3, 0), **old_entries(2, 2, 0)},
    ),
)


# --- frames -------------------------------------------------------------------------------------------------
def frames(spark: SparkSession, group: dict[str, Topic], limit_col: str) -> dict[str, DataFrame]:
    mls, ledgers, cursors, limits, entries = [], [], [], [], []
    for t in group.values():
        cur = t.current
        total = sum(size for _, _, size, _ in t.closed) + (cur[2] if cur else 0)
        mls.append(
            ("c", t.name, cur[0] if cur else None, cur[1] if cur else 0, cur[2] if cur else 0, t.lac, total,
             t.entries_added, NOW)
        )  # fmt: skip
        for lid, n, size, closed_ms in t.closed:
            closed_at = None if closed_ms is None else dt.datetime.fromtimestamp(closed_ms / 1000, tz=dt.UTC)
            ledgers.append(("c", t.name, lid, n, size, closed_at))
        if cur:
            ledgers.append(("c", t.name, cur[0], 0, 0, None))
        for order, (name, durable, md, idm, counter) in enumerate(t.cursors):
            cursors.append(("c", t.name, name, order, durable, md, idm, counter))
        limits.append(("c", t.name, t.limit))
        for (lid, e), ts in t.timestamps.items():
            entries.append(("c", t.name, lid, e, ts, None, 2, 1000))
    return {
        "ml": spark.createDataFrame(mls, ML_SCHEMA),
        "ledgers": spark.createDataFrame(ledgers, LEDGER_SCHEMA),
        "cursors": spark.createDataFrame(cursors, CURSOR_SCHEMA),
        "limits": spark.createDataFrame(
            limits, contract_schema("backlog_quotas", ["cluster", "topic", limit_col])
        ),
        "entries": spark.createDataFrame(entries, ENTRY_SCHEMA),
    }


def lost_entries_frame(spark: SparkSession) -> DataFrame:
    """Exported entries of the size topics (2 messages, 1000 B each) for the lost_* columns."""
    rows = [
        ("c", name, 1, e, NOW_MS, None, 2, 1000)
        for name in ("s6_one_sub", "acked_ranges")
        for e in range(20)
        if not (name == "s6_one_sub" and e == 5)  # one entry missing from the export
    ]
    return spark.createDataFrame(rows, ENTRY_SCHEMA)


Result = dict[tuple[str, str], dict[str, dict[str, Any]]]  # (version, topic) -> cursor -> row


def collect(df_for: Any, spark: SparkSession, versions: tuple[str, ...] = VERSIONS) -> Result:
    union = None
    for v in versions:
        df = df_for(v).withColumn("_version", F.lit(v))
        union = df if union is None else union.unionByName(df)
    assert union is not None
    out: Result = {}
    for row in union.collect():
        d = row.asDict(recursive=True)
        out.setdefault((d["_version"], d["topic"]), {})[d["cursor_name"]] = d
    for rows in out.values():
        for d in rows.values():
            d["_topic_rows"] = rows  # steps(row) reassembles the topic's trace from its cursor rows
    return out


@pytest.fixture(scope="module")
def results(spark: SparkSession) -> Iterator[dict[str, Result]]:
    size, time_, precise = (
        frames(spark, SIZE, "limit_size_bytes"),
        frames(spark, TIME, "limit_time_seconds"),
        frames(spark, PRECISE, "limit_time_seconds"),
    )
    lost = lost_entries_frame(spark)
    jobs = {
        "size": lambda v: drop_backlog_for_size_limit(
            size["ml"], size["ledgers"], size["cursors"], size["limits"], pulsar_version=v, entries=lost
        ),
        "size_precise_counter": lambda v: drop_backlog_for_size_limit(
            size["ml"], size["ledgers"], size["cursors"], size["limits"], pulsar_version=v, counter="precise"
        ),
        "time": lambda v: drop_backlog_for_time_limit(
            time_["ml"], time_["ledgers"], time_["cursors"], time_["limits"], pulsar_version=v
        ),
        "time_trace_1": lambda v: drop_backlog_for_time_limit(
            time_["ml"],
            time_["ledgers"],
            time_["cursors"],
            time_["limits"],
            pulsar_version=v,
            trace_max_iterations=1,
        ),
        "size_trace_1": lambda v: drop_backlog_for_size_limit(
            size["ml"],
            size["ledgers"],
            size["cursors"],
            size["limits"],
            pulsar_version=v,
            trace_max_iterations=1,
        ),
        "precise": lambda v: drop_backlog_for_time_limit(
            precise["ml"],
            precise["ledgers"],
            precise["cursors"],
            precise["limits"],
            entries=precise["entries"],
            precise=True,
            pulsar_version=v,
        ),
    }
    with session_conf(spark, TEST_CONF), ThreadPoolExecutor(max_workers=4) as pool:
        futures = {
            name: pool.submit(collect, fn, spark, VERSIONS if name in FULL_VERSION_JOBS else (V4,))
            for name, fn in jobs.items()
        }
        futures["size_bounds"] = pool.submit(collect, jobs["size"], spark, SIZE_BOUNDARY_VERSIONS)
        futures["time_bounds"] = pool.submit(collect, jobs["time"], spark, TIME_BOUNDARY_VERSIONS)
        futures["time_raw"] = pool.submit(collect, jobs["time"], spark, RAW_LIMIT_VERSIONS)
        yield {name: f.result() for name, f in futures.items()}


#: Fixture jobs run on every version (the others on V4 only).
FULL_VERSION_JOBS = ("size", "time", "precise")


def md(row: dict[str, Any]) -> Pos:
    p = row["mark_delete_position"]
    return (p["ledger_id"], p["entry_id"])


def steps(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The topic's trace: the union of its cursor rows' own steps, in loop order.

    Checks the shape on the way: a row carries only steps of its own cursor, ``trace_steps`` counts them,
    every step is on exactly one row, iterations are 1..n and n is the topic's ``iteration_count`` unless
    ``trace_truncated``.
    """
    rows = row["_topic_rows"]
    merged: list[dict[str, Any]] = []
    for name, r in rows.items():
        assert all(s["cursor_name"] == name for s in r["iterations"]), (name, r["iterations"])
        assert r["trace_steps"] == len(r["iterations"]), name
        merged.extend(r["iterations"])
    merged.sort(key=lambda s: s["iteration"])
    assert [s["iteration"] for s in merged] == list(range(1, len(merged) + 1))
    if not row["trace_truncated"]:
        assert len(merged) == row["iteration_count"], (len(merged), row["iteration_count"])
    else:
        assert len(merged) < row["iteration_count"]
    return merged


def trace(row: dict[str, Any]) -> list[tuple[str, int, int, Pos, int]]:
    return [
        (
            s["cursor_name"],
            s["entries_counter"],
            s["to_skip"],
            (s["mark_delete_after"]["ledger_id"], s["mark_delete_after"]["entry_id"]),
            s["backlog_after"],
        )
        for s in steps(row)
    ]


# --- §3.6 size ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", VERSIONS)
def test_drop_backlog_for_size_limit_two_subscriptions_1k_messages(
    results: dict[str, Result], version: str
) -> None:
    """§3.8-1 testConsumerBacklogEvictionSizeQuota: "namespace quota limitSize = 10*1024, policy
    consumer_backlog_eviction; 2 subscriptions that never ack; 20 messages of 1 KB; after the quota check
    runs, the test asserts the topic backlogSize is below the 10*1024-byte limit". Target 9216: each sub
    skips int(11264/20480 x 20) = 11 entries, the estimate ends at 20480 - 11 x 1024 = 9216."""
    rows = results["size"][(version, "s1_two_subs_1k")]
    sub1 = rows["sub1"]
    assert sub1["estimated_backlog_size_bytes_before"] == 20480
    assert sub1["estimated_backlog_size_bytes_after"] == 9216 < 10 * 1024
    assert {md(r) for r in rows.values()} == {(1, 10)}
    assert trace(sub1) == [("sub1", 20, 11, (1, 10), 20480), ("sub2", 20, 11, (1, 10), 9216)]
    assert (sub1["stop_reason"], sub1["above_target_after"], sub1["quota_exceeded_before"]) == (
        "below_target",
        False,
        True,
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_drop_backlog_for_size_limit_acking_subscription_untouched(
    results: dict[str, Result], version: str
) -> None:
    """§3.8-4 testConsumerBacklogEvictionWithAckSizeQuota: "one sub acks, the other does not → backlog
    ends ≤ 10240". Only the non-acking sub2 is skipped (11 entries); sub1 stays at its last entry."""
    rows = results["size"][(version, "s4_one_acks")]
    assert (md(rows["sub1"]), md(rows["sub2"])) == ((1, 19), (1, 10))
    assert rows["sub2"]["estimated_backlog_size_bytes_after"] == 9216 <= 10240
    assert (rows["sub1"]["skipped_entries"], rows["sub2"]["skipped_entries"]) == (0, 11)
    assert rows["sub2"]["iteration_count"] == 1


@pytest.mark.parametrize("version", VERSIONS)
def test_drop_backlog_for_size_limit_computed_example_two_subs(
    results: dict[str, Result], version: str
) -> None:
    """§3.8-6: "one open ledger, 20 entries × 1000 B (totalSize 20000), subs s1,s2 at (L,-1), limit 10000 →
    target 9000. Run: slowest s1, entries 20, toSkip = int(11000/20000·20) = 11 → s1.md = L:10; backlog
    still 20000 (s2); slowest s2 → toSkip 11 → s2.md = L:10; backlog = 20000 − 11·1000 = 9000, not > 9000
    → stop." """
    rows = results["size"][(version, "s6_two_subs")]
    assert trace(rows["s1"]) == [("s1", 20, 11, (1, 10), 20000), ("s2", 20, 11, (1, 10), 9000)]
    assert (md(rows["s1"]), md(rows["s2"])) == ((1, 10), (1, 10))
    assert rows["s1"]["target_size_bytes"] == 9000.0
    assert rows["s2"]["stop_reason"] == "below_target"


@pytest.mark.parametrize("version", VERSIONS)
def test_drop_backlog_for_size_limit_computed_example_one_sub(
    results: dict[str, Result], version: str
) -> None:
    """§3.8-6: "With a single sub the same run stops after one skip." Also the lost_* columns: 11 entries of
    2 messages / 1000 B, one of them (1:5) not exported."""
    row = results["size"][(version, "s6_one_sub")]["s1"]
    assert trace(row) == [("s1", 20, 11, (1, 10), 9000)]
    assert (row["stop_reason"], row["iteration_count"], row["skipped_entries"]) == ("below_target", 1, 11)
    assert (row["lost_entries"], row["lost_messages"], row["lost_bytes"]) == (10, 20, 10_000)


def test_drop_backlog_for_size_limit_formula_operation_order(results: dict[str, Result]) -> None:
    """§3.6 "(a/b)*c and a*c/b can differ in the last bit and flip the truncated result": 55 entries of
    1000 B, limit 30000 (target 27000 in both): 3.0 (28000/55000)*55 = 27.999999999999996 -> 27 (then the
    same cursor is slowest again: stop above the target); 4.x 28000*55/55000 = 28 -> exactly the target."""
    r30 = results["size"][(V30, "formula_order")]["s1"]
    r4 = results["size"][(V4, "formula_order")]["s1"]
    assert trace(r30) == [("s1", 55, 27, (1, 26), 28000)]
    assert (r30["stop_reason"], r30["above_target_after"]) == ("same_cursor", True)
    assert trace(r4) == [("s1", 55, 28, (1, 27), 27000)]
    assert (r4["stop_reason"], r4["above_target_after"]) == ("below_target", False)


def test_drop_backlog_for_size_limit_formula_target_type(results: dict[str, Result]) -> None:
    """§3.6 "target = 0.9 * quota.limitSize  # 3.0: double ; 4.x/master: (long)(0.9 * limit)": limit 10001 ->
    3.0 target 9000.9, toSkip int(10999.1/20000 x 20) = 10; 4.x target 9000, toSkip 11."""
    r30 = results["size"][(V30, "formula_target")]["s1"]
    r4 = results["size"][(V4, "formula_target")]["s1"]
    assert r30["target_size_bytes"] == pytest.approx(9000.9) and r4["target_size_bytes"] == 9000.0
    assert trace(r30)[0][2] == 10 and trace(r4)[0][2] == 11
    assert (md(r30), md(r4)) == ((1, 9), (1, 10))


def test_drop_backlog_for_size_limit_long_target_by_patch_release(results: dict[str, Result]) -> None:
    """§3.6 Correction: the long target of apache/pulsar#25624 is in 4.0.11 and 4.2.2 (release notes), not in
    4.0.10, 4.2.1 or any 4.1.x (and in no tag up to v4.0.6): limit 10001 gives target 9000.9 and toSkip 10
    there, 9000 and 11 from the first patch carrying it; the operation-order topic 27 vs 28."""
    got = {
        v: (
            results["size_bounds"][(v, "formula_target")]["s1"]["target_size_bytes"],
            trace(results["size_bounds"][(v, "formula_target")]["s1"])[0][2],
            trace(results["size_bounds"][(v, "formula_order")]["s1"])[0][2],
        )
        for v in SIZE_BOUNDARY_VERSIONS
    }
    assert got == {
        "4.0.10": (pytest.approx(9000.9), 10, 27),
        "4.0.11": (9000.0, 11, 28),
        "4.1.3": (pytest.approx(9000.9), 10, 27),
        "4.2.1": (pytest.approx(9000.9), 10, 27),
    }


@pytest.mark.parametrize("version", VERSIONS)
def test_drop_backlog_for_size_limit_uses_non_precise_counter(
    results: dict[str, Result], version: str
) -> None:
    """§1.8/§3.6: entries = entriesAddedCounter - messagesConsumedCounter = 120 - 90 = 30 (the precise
    backlog is 20): toSkip = int(0.55 x 30) = 16; the skip consumes 16 entries (counter 106)."""
    row = results["size"][(version, "counter_drift")]["s1"]
    assert steps(row)[0]["entries_source"] == "counter"
    assert trace(row) == [("s1", 30, 16, (1, 15), 4000)]
    assert (row["messages_consumed_counter_before"], row["messages_consumed_counter"]) == (90, 106)


def test_drop_backlog_for_size_limit_precise_counter_option(results: dict[str, Result]) -> None:
    """``counter="precise"`` ignores the exported counters: 20 entries (not 30), toSkip 11."""
    row = results["size_precise_counter"][(V4, "counter_drift")]["s1"]
    assert steps(row)[0]["entries_source"] == "precise"
    assert trace(row) == [("s1", 20, 11, (1, 10), 9000)]


def test_drop_backlog_for_size_limit_rejects_unknown_counter(spark: SparkSession) -> None:
    """The ``counter`` option is validated before anything is planned."""
    d = frames(spark, {"x": SIZE["s6_one_sub"]}, "limit_size_bytes")
    with pytest.raises(ConfigError, match="counter must be"):
        drop_backlog_for_size_limit(d["ml"], d["ledgers"], d["cursors"], d["limits"], counter="exact")


def test_drop_backlog_what_ifs_names_the_missing_limit_columns(spark: SparkSession) -> None:
    """A ``limits`` frame of the single calls' shape (no ``quota_type``) is refused with what it needs."""
    d = frames(spark, {"x": SIZE["s6_one_sub"]}, "limit_size_bytes")
    with pytest.raises(ConfigError, match=r"\['quota_type', 'limit_time_seconds'\].*one row per eviction"):
        drop_backlog_what_ifs(d["ml"], d["ledgers"], d["cursors"], d["limits"])


@pytest.mark.parametrize("version", VERSIONS)
def test_drop_backlog_for_size_limit_negative_counter_falls_back(
    results: dict[str, Result], version: str
) -> None:
    """§1.8: "non-precise: entriesAddedCounter - messagesConsumedCounter; if that is negative, fall back to
    precise" (120 - 500 < 0 -> 20 entries)."""
    row = results["size"][(version, "counter_negative")]["s1"]
    assert steps(row)[0]["entries_source"] == "precise_fallback"
    assert trace(row) == [("s1", 20, 11, (1, 10), 9000)]


@pytest.mark.parametrize("version", VERSIONS)
def test_drop_backlog_for_size_limit_tie_order_flag(results: dict[str, Result], version: str) -> None:
    """§3.9: every version keeps the cursors in a heap whose order among equal positions is not in the
    export: the tie of s1 and s2 at (1,-1) is flagged in 3.0 and 4.x alike; a single subscription is not."""
    assert results["size"][(version, "s6_two_subs")]["s1"]["slowest_tie_ambiguous"] is True
    assert [s["slowest_tie"] for s in steps(results["size"][(version, "s6_two_subs")]["s1"])] == [True, False]
    assert results["size"][(version, "s6_one_sub")]["s1"]["slowest_tie_ambiguous"] is False


def test_drop_backlog_for_size_limit_heap_keeps_moved_cursor_at_root_4x(results: dict[str, Result]) -> None:
    """Fidelity case size_eviction_tie.json (BacklogQuotaManager.dropBacklogForSizeLimit 4.x formula,
    ManagedCursorContainerImpl, ManagedCursorImpl.skipEntries): "cursors are added to the container in list
    order; the broker stops after the third cursor reaches 6:0". The broker's trace, cursor by cursor: c 60
    entries skip 14 -> 4:17; a 49/7 -> 4:21; b 47/5 -> 4:21; c 46/5 -> 4:22; b 42/2 -> 4:23 (b, not a: c's
    sift-down put b at the root); a 42/2 -> 4:23; c 41/2 -> 6:0; a 40/1 -> 6:0; b 40/1 -> 6:0, and b lands
    on the others' 6:0 and stays at the root (equal positions never swap): b again, "cursors not
    progressing". Estimate 95 before, 74 after (docs §3.9)."""
    row = results["size"][(V4, "fidelity_heap_tie")]["sub-a"]
    assert [(s[0], s[1], s[2], s[3]) for s in trace(row)] == [
        ("sub-c", 60, 14, (4, 17)),
        ("sub-a", 49, 7, (4, 21)),
        ("sub-b", 47, 5, (4, 21)),
        ("sub-c", 46, 5, (4, 22)),
        ("sub-b", 42, 2, (4, 23)),
        ("sub-a", 42, 2, (4, 23)),
        ("sub-c", 41, 2, (6, 0)),
        ("sub-a", 40, 1, (6, 0)),
        ("sub-b", 40, 1, (6, 0)),
    ]
    assert [s[4] for s in trace(row)] == [84, 82, 81, 77, 77, 76, 75, 75, 74]
    rows = results["size"][(V4, "fidelity_heap_tie")]
    assert {name: md(r) for name, r in rows.items()} == {"sub-a": (6, 0), "sub-b": (6, 0), "sub-c": (6, 0)}
    assert (row["estimated_backlog_size_bytes_before"], row["estimated_backlog_size_bytes_after"]) == (95, 74)
    assert (row["stop_reason"], row["stop_cursor_name"], row["slowest_tie_ambiguous"]) == (
        "same_cursor",
        "sub-b",
        True,
    )
    assert all(r["individually_deleted"] == [] for r in rows.values())


def test_drop_backlog_for_size_limit_heap_keeps_moved_cursor_at_root_30(results: dict[str, Result]) -> None:
    """The same fidelity topic with the 3.0 formula (target 72.9, ``(a / b) * c``): the skips differ from the
    first one on (c skips 13, not 14), the heap rule is the same. After c (4:16) sifts below a (4:14) and a
    (4:20) below c (4:16, the right child, equal to b), c is the root again, then b; at the end a lands on
    4:23 with b and c and stays at the root: "cursors not progressing" with every cursor at 4:23, estimate
    75 (hand-computed from docs §3.6 and §3.9)."""
    row = results["size"][(V30, "fidelity_heap_tie")]["sub-a"]
    assert trace(row) == [
        ("sub-c", 60, 13, (4, 16), 84),
        ("sub-a", 49, 6, (4, 20), 82),
        ("sub-c", 47, 5, (4, 21), 82),
        ("sub-b", 47, 5, (4, 21), 78),
        ("sub-a", 43, 2, (4, 22), 77),
        ("sub-b", 42, 2, (4, 23), 77),
        ("sub-c", 42, 2, (4, 23), 76),
        ("sub-a", 41, 1, (4, 23), 75),
    ]
    rows = results["size"][(V30, "fidelity_heap_tie")]
    assert {name: md(r) for name, r in rows.items()} == {"sub-a": (4, 23), "sub-b": (4, 23), "sub-c": (4, 23)}
    assert (row["stop_reason"], row["stop_cursor_name"], row["slowest_tie_ambiguous"]) == (
        "same_cursor",
        "sub-a",
        True,
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_drop_backlog_for_size_limit_skips_system_cursors(results: dict[str, Result], version: str) -> None:
    """§3.6 "Replicator cursors, __compaction and other durable system cursors are eligible slowest cursors
    and get skipped too"; "Readers (non-durable cursors) are never considered". Ledger 1: 10 x 1000 B closed,
    ledger 2 open with 10: the replicator (1:-1, 20 entries) skips int(0.55 x 20) = 11 -> 2:0; then sub
    (1:4, 15 entries, estimate 15000) skips int(0.4 x 15) = 6 -> 2:0, estimate 9000."""
    rows = results["size"][(version, "system_cursor")]
    assert trace(rows["sub"]) == [
        ("pulsar.repl.west", 20, 11, (2, 0), 15000),
        ("sub", 15, 6, (2, 0), 9000),
    ]
    assert rows["pulsar.repl.west"]["is_system_cursor"] is True and rows["sub"]["is_system_cursor"] is False
    assert rows["pulsar.repl.west"]["cursor_kind"] == "replicator"
    assert (md(rows["reader-1"]), rows["reader-1"]["cursor_kind"]) == ((1, -1), "reader")


@pytest.mark.parametrize("version", VERSIONS)
def test_drop_backlog_for_size_limit_include_counts_acked(results: dict[str, Result], version: str) -> None:
    """§3.6 skipEntries(toSkip, Include) "already-acked entries count toward toSkip": entries = 20 - 3 acked
    = 17, toSkip = int(0.55 x 17) = 9 -> target 1:8 (acked 1:12, 1:13 untouched); the extension does not
    reach (1:11, 1:13]. lost_* count the 9 unacked entries 1:0..1:8."""
    row = results["size"][(version, "acked_ranges")]["s1"]
    assert trace(row)[0][:4] == ("s1", 17, 9, (1, 8))
    assert row["skipped_entries"] == 9
    assert row["lost_entries"] == 9 and row["lost_messages"] == 18


@pytest.mark.parametrize("version", VERSIONS)
def test_drop_backlog_for_size_limit_deleted_and_empty_ledgers(
    results: dict[str, Result], version: str
) -> None:
    """§2.3 a md in a deleted ledger keeps every byte after it (20000); the skip walks ledger 2 (10), the
    empty closed ledger 3 (0) and the open ledger 4: int(0.55 x 20) = 11 -> 4:0, estimate 9000."""
    row = results["size"][(version, "deleted_ledger")]["s1"]
    assert row["estimated_backlog_size_bytes_before"] == 20000
    assert trace(row) == [("s1", 20, 11, (4, 0), 9000)]


@pytest.mark.parametrize("version", VERSIONS)
def test_drop_backlog_for_size_limit_stop_reasons(results: dict[str, Result], version: str) -> None:
    """§3.6 break conditions and §3.4 edges: a negative limit never evicts; limit 0 (always exceeded,
    target 0) evicts everything; an estimate at or below the target does nothing; toSkip 0 stops (1 entry
    of 9001 B, target 9000: int(1/9001 x 1) = 0); readers only: estimate 0."""
    get = results["size"]
    assert get[(version, "disabled")]["s1"]["stop_reason"] == "quota_disabled"
    assert md(get[(version, "disabled")]["s1"]) == (1, -1)
    zero = get[(version, "limit_zero")]["s1"]
    assert (md(zero), zero["estimated_backlog_size_bytes_after"], zero["stop_reason"]) == (
        (1, 19),
        0,
        "below_target",
    )
    below = get[(version, "below_target")]["s1"]
    assert (below["stop_reason"], below["iteration_count"], below["quota_exceeded_before"]) == (
        "below_target",
        0,
        False,
    )
    skip0 = get[(version, "zero_skip")]["s1"]
    assert (skip0["stop_reason"], skip0["stop_cursor_name"], skip0["above_target_after"]) == (
        "zero_skip",
        "s1",
        True,
    )
    readers = get[(version, "readers_only")]["reader-1"]
    assert (readers["estimated_backlog_size_bytes_before"], readers["stop_reason"]) == (0, "below_target")


# --- §3.7 non-precise ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", VERSIONS)
def test_drop_backlog_for_time_limit_whole_ledgers(results: dict[str, Result], version: str) -> None:
    """§3.8-3 testConsumerBacklogEvictionTimeQuota: "14 messages with ledgers rolling every 5 messages (L1: 5,
    L2: 5, L3 open: 4); once L1/L2 close-times are older than the limit the backlog becomes 4 (the open
    ledger never expires)". The heap (§3.9): sub1 leaves L1 and sifts below sub2; sub2 leaves L1, lands on
    sub1's (2,-1) and stays the root, so it also leaves L2 first; then sub1 joins it at (3,-1), stays the
    root and stops the loop."""
    rows = results["time"][(version, "t3_ledgers")]
    assert {name: md(r) for name, r in rows.items()} == {"sub1": (3, -1), "sub2": (3, -1)}
    assert rows["sub1"]["stop_reason"] == "open_ledger" and rows["sub1"]["iteration_count"] == 4
    assert (rows["sub1"]["stop_cursor_name"], rows["sub1"]["slowest_tie_ambiguous"]) == ("sub1", True)
    assert rows["sub1"]["estimated_backlog_size_bytes_after"] == 4000
    assert [s["action"] for s in steps(rows["sub1"])] == ["expired_ledger"] * 4
    assert [s["cursor_name"] for s in steps(rows["sub1"])] == ["sub1", "sub2", "sub2", "sub1"]
    assert [s["ledger_id"] for s in steps(rows["sub1"])] == [1, 1, 2, 2]
    assert (rows["sub1"]["trace_steps"], rows["sub2"]["trace_steps"]) == (2, 2)
    assert rows["sub1"]["trace_truncated"] is False


@pytest.mark.parametrize("version", VERSIONS)
def test_drop_backlog_for_time_limit_acking_subscription(results: dict[str, Result], version: str) -> None:
    """§3.8-4 testConsumerBacklogEvictionWithAckTimeQuota: "sub2 14 → 4" (sub1 acked everything)."""
    rows = results["time"][(version, "t4_one_acks")]
    assert (md(rows["sub1"]), md(rows["sub2"])) == ((3, 3), (3, -1))
    assert rows["sub2"]["skipped_entries"] == 10


@pytest.mark.parametrize("version", VERSIONS)
def test_drop_backlog_for_time_limit_edges(results: dict[str, Result], version: str) -> None:
    """§3.7: a ledger closed 10 min ago is kept (not_expired); an unexported close time is undecidable; a md
    in a deleted ledger moves to (next ledger, -1); no next ledger -> the broker's NPE; limit 0 disables."""
    t = results["time"]
    young = t[(version, "t_young")]["s1"]
    assert (md(young), young["stop_reason"]) == ((2, -1), "not_expired")
    unknown = t[(version, "t_unknown")]["s1"]
    assert (md(unknown), unknown["stop_reason"], unknown["undecidable"]) == (
        (2, -1),
        "unknown_close_time",
        True,
    )
    assert "not exported" in unknown["error"]
    deleted = t[(version, "t_deleted")]["s1"]
    assert [s["action"] for s in steps(deleted)] == ["deleted_ledger"]
    assert (md(deleted), deleted["stop_reason"]) == ((8, -1), "not_expired")
    no_next = t[(version, "t_no_next")]["s1"]
    assert (md(no_next), no_next["stop_reason"]) == ((1, 2), "no_next_ledger")
    assert t[(version, "t_disabled")]["s1"]["stop_reason"] == "quota_disabled"


def test_drop_backlog_for_time_limit_int_overflow_before_the_fix(results: dict[str, Result]) -> None:
    """``limitTime * 1000`` in ints (3.0.5): 30 days = 2,592,000,000 ms wraps to -1,702,967,296, so a ledger
    closed 10 minutes ago counts as expired; ``SECONDS.toMillis`` (4.2.2) keeps it."""
    r30 = results["time"][(V30, "t_overflow")]["s1"]
    r4 = results["time"][(V4, "t_overflow")]["s1"]
    assert (md(r30), r30["stop_reason"]) == ((2, -1), "open_ledger")
    assert (md(r4), r4["stop_reason"]) == ((1, -1), "not_expired")


def test_drop_backlog_for_time_limit_int_overflow_by_patch_release(results: dict[str, Result]) -> None:
    """§3.7 Correction: ``SECONDS.toMillis`` came with apache/pulsar#21816 (3.3.0) and #22740 (3.0.6); tags
    v3.1.3 and v3.2.4 still multiply in ints, so the 10-minute-old ledger expires there only."""
    got = {
        v: (
            md(results["time_bounds"][(v, "t_overflow")]["s1"]),
            results["time_bounds"][(v, "t_overflow")]["s1"]["stop_reason"],
        )
        for v in TIME_BOUNDARY_VERSIONS
    }
    assert got == {
        "3.0.6": ((1, -1), "not_expired"),
        "3.1.3": ((2, -1), "open_ledger"),
        "3.2.4": ((2, -1), "open_ledger"),
        "3.3.0": ((1, -1), "not_expired"),
    }


def test_drop_backlog_for_time_limit_compares_seconds_as_millis_before_17957(
    results: dict[str, Result],
) -> None:
    """§3.7: before apache/pulsar#17957 ``dropBacklogForTimeLimit`` compared ``now - closeTime`` (ms) with
    ``limitTime`` (s) unconverted (tags v2.8.4, v2.9.3, v2.10.2, v2.11.0); from v2.9.4, v2.10.3, v2.11.1 and
    v3.0.0 it multiplies by 1000. A ledger closed 10 s ago under a 1-hour limit expires only before."""
    got = {
        v: (
            md(results["time_raw"][(v, "t_raw_seconds")]["s1"]),
            results["time_raw"][(v, "t_raw_seconds")]["s1"]["stop_reason"],
        )
        for v in RAW_LIMIT_VERSIONS
    }
    expired, kept = ((2, -1), "open_ledger"), ((1, -1), "not_expired")
    assert got == {
        "2.8.4": expired,
        "2.9.3": expired,
        "2.9.4": kept,
        "2.10.2": expired,
        "2.10.3": kept,
        "2.11.0": expired,
        "2.11.1": kept,
        "3.0.0": kept,
    }
    assert [results["time"][(v, "t_raw_seconds")]["s1"]["stop_reason"] for v in VERSIONS] == [
        "not_expired",
        "not_expired",
    ]


# --- §3.7 precise -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", VERSIONS)
def test_drop_backlog_for_time_limit_precise_all_expired(results: dict[str, Result], version: str) -> None:
    """§3.8-2 testConsumerBacklogEvictionTimeQuotaPrecise: "9 messages; both subscriptions' backlog goes from
    9 to 0 after the limit elapses" (TTL int(0.9 x 10) = 9 s)."""
    rows = results["precise"][(version, "p2_nine")]
    assert {name: md(r) for name, r in rows.items()} == {"sub1": (1, 8), "sub2": (1, 8)}
    assert rows["sub1"]["expiry_ttl_seconds"] == 9
    assert rows["sub1"]["evaluated_at"].replace(tzinfo=dt.UTC) == NOW


@pytest.mark.parametrize("version", VERSIONS)
def test_drop_backlog_for_time_limit_precise_acking_subscription(
    results: dict[str, Result], version: str
) -> None:
    """§3.8-4 testConsumerBacklogEvictionWithAckTimeQuotaPrecise: "sub1 acked → 0, sub2 9 → 0"."""
    rows = results["precise"][(version, "p4_one_acks")]
    assert (md(rows["sub1"]), md(rows["sub2"])) == ((1, 8), (1, 8))
    assert rows["sub1"]["expired_position"] is None  # nothing after its md to search


@pytest.mark.parametrize("version", VERSIONS)
def test_drop_backlog_for_time_limit_find_newest_matching(results: dict[str, Result], version: str) -> None:
    """§3.8-5 ManagedCursorTest.testFindNewestMatchingOdd1..5: "5 entries where the first k are 'expired' →
    result is the k-th entry (k=1 → p1, …, k=5 → p5); testFindNewestMatchingEven1..: same rule with 4
    entries; testFindNewestMatching: 5 entries, none expired → null"."""
    p = results["precise"]
    for k in range(1, 6):
        row = p[(version, f"p5_odd{k}")]["c1"]
        assert (row["expired_position"]["entry_id"], md(row)) == (k - 1, (1, k - 1)), k
    for k in range(1, 5):
        row = p[(version, f"p5_even{k}")]["c1"]
        assert (row["expired_position"]["entry_id"], md(row)) == (k - 1, (1, k - 1)), k
    none = p[(version, "p5_odd0")]["c1"]
    assert (none["expired_position"], md(none), none["expiry_reads"]) == (None, (1, -1), 1)


@pytest.mark.parametrize("version", VERSIONS)
def test_drop_backlog_for_time_limit_precise_subscription_map(
    results: dict[str, Result], version: str
) -> None:
    """§3.7 "for every subscription of the topic (the topic's subscription map, which also holds reader
    subscriptions; replicators are not subscriptions)": __compaction (a CompactorSubscription) and the
    reader expire 3 entries, the replicator and the dedup cursor are untouched."""
    rows = results["precise"][(version, "p_kinds")]
    assert {name: md(r) for name, r in rows.items()} == {
        "pulsar.repl.west": (1, -1),
        "pulsar.dedup": (1, -1),
        "__compaction": (1, 2),
        "reader-1": (1, 2),
    }


@pytest.mark.parametrize("version", VERSIONS)
def test_drop_backlog_for_time_limit_precise_search_quirks(results: dict[str, Result], version: str) -> None:
    """§3.7 "Expiry search is a binary search (findNewestMatching) assuming publish times are monotone":
    with 1:3 older than 1:2 the search stops at 1:1 (flagged); a probed entry that was not exported makes the
    search undecidable (cursor unchanged)."""
    nm = results["precise"][(version, "p_non_monotonic")]["c1"]
    assert (md(nm), nm["publish_times_non_monotonic"]) == ((1, 1), True)
    missing = results["precise"][(version, "p_missing")]["c1"]
    assert (md(missing), missing["undecidable"]) == ((1, -1), True)
    assert "not in the exported entries" in missing["error"]


@pytest.mark.parametrize("version", VERSIONS)
def test_drop_backlog_for_time_limit_precise_ledger_closure(results: dict[str, Result], version: str) -> None:
    """apache/pulsar#21940 (3.0.3+, tags): a closed ledger whose close time is older than the TTL expires
    whole even when its publish times are young (client clock skew); the open ledger is searched."""
    row = results["precise"][(version, "p_closure")]["c1"]
    assert (row["ledger_closure_position"]["entry_id"], md(row)) == (2, (1, 2))
    assert row["expired_position"] is None
    young = results["precise"][(version, "p_closure_young")]["c1"]
    assert (young["ledger_closure_position"], young["expired_position"], md(young)) == (None, None, (1, -1))


#: The ledger-closure step by release (docs §3.7): none before apache/pulsar#21940; #21940 alone takes the
#: open ledger's LedgerInfo timestamp 0 as expired and reaches (open, -1); #22335 stops there.
CLOSURE_BY_VERSION = {
    "2.10.6": None,
    "2.11.4": None,
    "3.0.2": None,
    "3.0.3": (2, -1),
    "3.1.3": (2, -1),
    "3.2.1": (2, -1),
    "3.0.4": (1, 2),
    "3.2.2": (1, 2),
    "3.3.0": (1, 2),
    "4.0.9": (1, 2),
}


def test_ledger_closure_step_by_release(spark: SparkSession) -> None:
    """Release tags: #21940 in v3.0.3, v3.1.3, v3.2.1, v3.3.0 (no 2.10.x/2.11.x tag); #22335 (stop at the open
    ledger, timestamp 0) in v3.0.4, v3.2.2, v3.3.0. Every version is one cluster of one call."""
    d = frames(spark, {"p_closure": PRECISE["p_closure"]}, "limit_time_seconds")

    def per_version(df: DataFrame, with_version: bool = False) -> DataFrame:
        parts = [
            df.withColumn("cluster", F.lit(v)).select(
                *df.columns, *([F.lit(v).alias("pulsar_version")] if with_version else [])
            )
            for v in CLOSURE_BY_VERSION
        ]
        out = parts[0]
        for part in parts[1:]:
            out = out.unionByName(part)
        return out

    with session_conf(spark, TEST_CONF):
        rows = drop_backlog_for_time_limit(
            per_version(d["ml"], with_version=True),
            per_version(d["ledgers"]),
            per_version(d["cursors"]),
            per_version(d["limits"]),
            entries=per_version(d["entries"]),
            precise=True,
            pulsar_version=None,
        ).collect()
    got = {}
    for r in rows:
        closure = r["ledger_closure_position"]
        got[r["cluster"]] = (
            None if closure is None else (closure["ledger_id"], closure["entry_id"]),
            md(r.asDict(recursive=True)),
        )
    expected = {v: (c, c if c is not None else (1, -1)) for v, c in CLOSURE_BY_VERSION.items()}
    assert got == expected


def test_drop_backlog_for_time_limit_precise_needs_entries(spark: SparkSession) -> None:
    """Precise expiry reads entry timestamps: no entries -> ConfigError naming the fix."""
    d = frames(spark, {"x": PRECISE["p2_nine"]}, "limit_time_seconds")
    with pytest.raises(ConfigError, match="pass entries"):
        drop_backlog_for_time_limit(d["ml"], d["ledgers"], d["cursors"], d["limits"], precise=True)


# --- the trace cap ------------------------------------------------------------------------------------------
def test_drop_backlog_trace_is_capped_not_the_loop(results: dict[str, Result]) -> None:
    """``trace_max_iterations=1``: the loops run to the same end (same md, counts, estimate) but only their
    first step is recorded, on the row of the cursor it moved; ``trace_truncated`` flags the topic."""
    for job, full_job, topic, first_cursor in (
        ("time_trace_1", "time", "t3_ledgers", "sub1"),
        ("size_trace_1", "size", "s6_two_subs", "s1"),
    ):
        capped, full = results[job][(V4, topic)], results[full_job][(V4, topic)]
        for name, row in capped.items():
            for column in (
                "mark_delete_position",
                "skipped_entries",
                "iteration_count",
                "stop_reason",
                "estimated_backlog_size_bytes_after",
            ):
                assert row[column] == full[name][column], (job, name, column)
            assert row["trace_truncated"] is (full[name]["iteration_count"] > 1), (job, name)
        recorded = steps(capped[first_cursor])
        assert [(s["iteration"], s["cursor_name"]) for s in recorded] == [(1, first_cursor)], job
        assert recorded == steps(full[first_cursor])[:1], job
        assert sum(r["trace_steps"] for r in capped.values()) == 1, job
    # a loop shorter than the cap is not truncated
    one = results["size_trace_1"][(V4, "s6_one_sub")]["s1"]
    assert (one["iteration_count"], one["trace_truncated"], one["trace_steps"]) == (1, False, 1)


def test_drop_backlog_rejects_a_negative_trace_cap(spark: SparkSession) -> None:
    d = frames(spark, {"x": SIZE["s6_one_sub"]}, "limit_size_bytes")
    with pytest.raises(ConfigError, match="trace_max_iterations"):
        drop_backlog_for_size_limit(d["ml"], d["ledgers"], d["cursors"], d["limits"], trace_max_iterations=-1)
