"""Tests of pulsar_model.quota.policy: effective quotas, breach detection, producer outcomes (docs §3.2-§3.5).

Golden frames are computed once by a module fixture (a few Spark jobs, run in parallel) and each test
reads its rows; the property test compares breach detection on random managed-ledger states with the
plain-Python oracle in ``tests/oracle/quota_policy.py`` (one Spark job per example, every version in it).
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from chispa import assert_df_equality
from hypothesis import assume, given
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pulsar_model.errors import ContractError
from pulsar_model.ingest.parsers import RecordContext, name_hint_from_file_name, parse_file, parse_jsonl_line
from pulsar_model.quota import policy as quota_policy
from pulsar_model.quota.policy import (
    BROKER_ERROR_MESSAGE,
    CLIENT_EXCEPTION,
    dedup_snapshot_instead_of_disconnect,
    default_limit_size_bytes,
    effective_quotas,
    is_system_topic_name,
    non_precise_skips_last_ledger,
    producer_outcomes,
    quota_breaches,
    time_quota_from_size_quota,
    time_quota_supported,
)
from pulsar_model.tables.contracts import spark_schema
from tests.oracle import managed_ledger as o
from tests.oracle import quota_policy as q
from tests.oracle import strategies as S
from tests.spark_conf import FAST_CONF, session_conf

POS = "struct<ledger_id:bigint,entry_id:bigint>"
LEDGERS = (
    "cluster string, topic string, ledger_id bigint, entries bigint, size_bytes bigint, closed_at timestamp"
)
ML = (
    "cluster string, topic string, current_ledger_id bigint, current_ledger_entries bigint, "
    f"current_ledger_size_bytes bigint, last_confirmed_entry {POS}, total_size_bytes bigint, "
    "exported_at timestamp"
)
CURSORS = (
    "cluster string, topic string, cursor_name string, cursor_order int, is_durable boolean, "
    f"mark_delete_position {POS}, individually_deleted array<struct<lower:{POS},upper:{POS}>>"
)
ENTRIES = (
    "cluster string, topic string, ledger_id bigint, entry_id bigint, publish_time_ms bigint, "
    "broker_timestamp timestamp"
)
EFFECTIVE = (
    "cluster string, topic string, quota_type string, limit_size_bytes bigint, limit_time_seconds bigint, "
    "policy string, precise_time_check boolean, check_enabled boolean"
)
EXACT = (
    "cluster string, topic string, cursor_name string, backlog_bytes bigint, "
    "oldest_unacked_publish_time_ms bigint"
)
BREACHES = (
    "cluster string, topic string, quota_type string, exceeded boolean, is_handled boolean, "
    f"is_system_topic boolean, slowest_cursor_name string, slowest_mark_delete_position {POS}, "
    "slowest_cursor_tie boolean, dedup_at_slowest boolean, reason string"
)
OUT_EFFECTIVE = "cluster string, topic string, quota_type string, policy string, check_enabled boolean"
#: Tiny inputs: one task per stage.
TEST_CONF = {**FAST_CONF, "spark.sql.shuffle.partitions": "1"}
HOLD, EXC, EVICT = "producer_request_hold", "producer_exception", "consumer_backlog_eviction"
SIZE, TIME = "destination_storage", "message_age"
GIB = 1024**3
UTC = dt.UTC
NOW = dt.datetime(2024, 1, 1, 12, 0, 0, tzinfo=UTC)
NOW_MS = int(NOW.timestamp() * 1000)
NEW, OLD_TIME, NO_TIME = "4.1.3", "2.8.0", "2.7.0"
FIXTURES = Path(__file__).parent / "fixtures" / "exports"

Pos = tuple[int, int]
Row = tuple[Any, ...]


def ago(seconds: float) -> dt.datetime:
    return NOW - dt.timedelta(seconds=seconds)


def ago_ms(seconds: float) -> int:
    return NOW_MS - int(seconds * 1000)


def t(name: str) -> str:
    return f"persistent://t/ns/{name}"


# ======================================================================================================
# Inputs of the breach scenarios (one topic each)
# ======================================================================================================
LEDGER_ROWS: list[Row] = []
ML_ROWS: list[Row] = []
CURSOR_ROWS: list[Row] = []
ENTRY_ROWS: list[Row] = []
EFFECTIVE_ROWS: list[Row] = []


def topic_state(
    name: str,
    closed: list[tuple[int, int, int, float | None]],  # (ledger id, entries, bytes, closed seconds ago)
    current: tuple[int, int, int] | None,  # (ledger id, entries, bytes) of the open ledger
    lac: Pos,
    cursors: list[tuple[str, Pos, bool]],  # (name, mark-delete, durable)
) -> None:
    topic = t(name)
    for lid, n, size, closed_s in closed:
        LEDGER_ROWS.append(("c", topic, lid, n, size, None if closed_s is None else ago(closed_s)))
    cle = cls = 0
    if current is not None:
        LEDGER_ROWS.append(("c", topic, current[0], 0, 0, None))
        cle, cls = current[1], current[2]
    total = sum(size for _, _, size, _ in closed) + cls
    ML_ROWS.append(("c", topic, None if current is None else current[0], cle, cls, lac, total, NOW))
    for order, (cname, md, durable) in enumerate(cursors):
        CURSOR_ROWS.append(("c", topic, cname, order, durable, md, []))


def quota(
    name: str,
    size: int = -1,
    time: int = -1,
    precise: bool = False,
    size_policy: str = HOLD,
    time_policy: str = HOLD,
    enabled: bool = True,
) -> None:
    EFFECTIVE_ROWS.append(("c", t(name), SIZE, size, time, size_policy, precise, enabled))
    EFFECTIVE_ROWS.append(("c", t(name), TIME, size, time, time_policy, precise, enabled))


def one_ledger(name: str, md: Pos, entries: int = 10, entry_bytes: int = 100) -> None:
    """One open ledger 1 with ``entries`` entries of ``entry_bytes`` bytes, one durable cursor."""
    topic_state(name, [], (1, entries, entries * entry_bytes), (1, entries - 1), [("sub", md, True)])


# --- size (§3.4 isSizeBacklogExceeded, §3.8 / §11.9) ---------------------------------------------------
one_ledger("size_equal", (1, -1))  # backlog 1000
quota("size_equal", size=1000)
one_ledger("size_below", (1, -1))
quota("size_below", size=1001)
one_ledger("size_zero_no_backlog", (1, 9))  # backlog 0, limit 0 -> still exceeded
quota("size_zero_no_backlog", size=0)
one_ledger("size_off", (1, -1))
quota("size_off", size=-1)

# --- §3.8 item 3: L1 closed (5), L2 closed (5), L3 open (4); close times 2 h and 1 h ago ----------------
G3_LEDGERS = [(1, 5, 500, 7200.0), (2, 5, 500, 3600.0)]
for suffix, md in [
    ("start", (1, -1)),
    ("l1_end", (1, 4)),
    ("l2_end", (2, 4)),
    ("open", (3, 1)),
    ("mid", (2, 2)),
]:
    topic_state(f"g3_{suffix}", G3_LEDGERS, (3, 4, 400), (3, 3), [("sub1", md, True), ("sub2", (3, 3), True)])
    quota(f"g3_{suffix}", time=5400 if suffix == "mid" else 1800)
# time limit 0 disables the check even though L1 closed 2 h ago (unlike a size limit of 0)
topic_state("time_zero", G3_LEDGERS, (3, 4, 400), (3, 3), [("sub", (1, -1), True)])
quota("time_zero", time=0)
# close timestamps not exported (stats-internal LedgerInfo has none): undecidable
topic_state(
    "no_close_time", [(1, 5, 500, None), (2, 5, 500, None)], (3, 4, 400), (3, 3), [("s", (1, -1), True)]
)
quota("no_close_time", time=1800)
# md in a trimmed ledger 4 -> nextValid(md) = 5:0 -> ledger 5 closed 2 h ago
topic_state("trimmed_md", [(5, 3, 300, 7200.0)], (6, 2, 200), (6, 1), [("s", (4, 7), True)])
quota("trimmed_md", time=1800)
# the last ledger is closed (no open ledger): 4.x never checks it; 2.8.0 (before PR #15663) does
topic_state("closed_last", [(1, 5, 500, 7200.0)], None, (1, 4), [("s", (1, 1), True)])
quota("closed_last", time=1800)

# --- precise (entry at nextValid(md); now > t + limit*1000) ----------------------------------------------
for name, md in [("p_old", (1, -1)), ("p_equal", (1, 0)), ("p_over", (1, 1)), ("p_broker_ts", (1, 2))]:
    topic_state(name, G3_LEDGERS, (3, 4, 400), (3, 3), [("sub", md, True)])
    quota(name, time=1800, precise=True)
topic_state("p_missing", G3_LEDGERS, (3, 4, 400), (3, 3), [("sub", (1, 3), True)])  # entry 1:4 not exported
quota("p_missing", time=1800, precise=True)
topic_state("p_no_backlog", G3_LEDGERS, (3, 4, 400), (3, 3), [("sub", (3, 3), True)])  # md = LAC
quota("p_no_backlog", time=1, precise=True)
for topic_name in ("p_old", "p_equal", "p_over", "p_broker_ts", "p_missing"):
    ENTRY_ROWS += [
        ("c", t(topic_name), 1, 0, ago_ms(7300), None),
        ("c", t(topic_name), 1, 1, ago_ms(1800), None),  # exactly the limit: not exceeded (strict >)
        ("c", t(topic_name), 1, 2, ago_ms(1800) - 1, None),  # 1 ms over the limit
        ("c", t(topic_name), 1, 3, ago_ms(10), ago(4000)),  # broker timestamp wins over publish time
    ]

# --- handling order, check disabled, system topics ------------------------------------------------------
topic_state("both", G3_LEDGERS, (3, 4, 400), (3, 3), [("sub", (1, -1), True)])
quota("both", size=100, time=1800)  # size first
topic_state("time_only", G3_LEDGERS, (3, 4, 400), (3, 3), [("sub", (1, -1), True)])
quota("time_only", size=10**9, time=1800)
topic_state("check_off", G3_LEDGERS, (3, 4, 400), (3, 3), [("sub", (1, -1), True)])
quota("check_off", size=100, time=1800, enabled=False)
topic_state("__change_events", G3_LEDGERS, (3, 4, 400), (3, 3), [("__compaction", (1, -1), True)])
quota("__change_events", size=0, time=1)
# no durable cursor: backlog 0 (the reader does not count), no oldest position
topic_state("readers_only", G3_LEDGERS, (3, 4, 400), (3, 3), [("reader-1", (1, -1), False)])
quota("readers_only", size=0, time=1)
# docs §3.9: slowest position shared (sub2, pulsar.dedup at 1:-1; export order names sub2) or held alone
topic_state(
    "dedup_tie",
    G3_LEDGERS,
    (3, 4, 400),
    (3, 3),
    [("sub1", (2, 0), True), ("sub2", (1, -1), True), ("pulsar.dedup", (1, -1), True), ("r", (1, -1), False)],
)
quota("dedup_tie", size=100)
topic_state(
    "dedup_alone", G3_LEDGERS, (3, 4, 400), (3, 3), [("sub1", (2, 0), True), ("pulsar.dedup", (1, 2), True)]
)
quota("dedup_alone", size=100)

# exact view: the estimate says 1000 B (>= 1000) but the exact backlog of the durable cursor is 900 B; the
# reader's 5000 B do not count. On g3_start the ledger close time says 2 h but the oldest unacked entry is
# 1000 s old. ``is_durable`` is taken from ``cursors`` (the exact frame lacks the column).
CURSOR_ROWS.append(("c", t("size_equal"), "reader-9", 5, False, (1, -1), []))
EXACT_ROWS: list[Row] = [
    ("c", t("size_equal"), "sub", 900, ago_ms(50)),
    ("c", t("size_equal"), "reader-9", 5000, ago_ms(99999)),
    ("c", t("g3_start"), "sub1", 1400, ago_ms(1000)),
    ("c", t("g3_start"), "sub2", 0, None),
]


# ======================================================================================================
# Inputs of the resolution scenarios: the fixture export parsed by the real ingest parser
# ======================================================================================================
def parsed_quota_rows() -> list[dict[str, Any]]:
    """``backlog_quotas`` rows of tests/fixtures/exports/us-east/backlog-quotas as the parser writes them."""
    rows: list[dict[str, Any]] = []
    folder = FIXTURES / "us-east" / "backlog-quotas"
    for path in sorted(folder.iterdir()):
        rel = f"us-east/backlog-quotas/{path.name}"
        if path.suffix == ".jsonl":
            for number, line in enumerate(path.read_bytes().split(b"\n"), start=1):
                if line.strip():
                    context = RecordContext("us-east", "backlog-quotas", rel, f"line {number}", None)
                    rows += parse_jsonl_line("backlog-quotas", line, context).rows.get("backlog_quotas", [])
        else:
            context = RecordContext("us-east", "backlog-quotas", rel, "file", name_hint_from_file_name(rel))
            rows += parse_file("backlog-quotas", path.read_bytes(), context).rows.get("backlog_quotas", [])
    # a second cluster whose broker enables the precise check, a 30 s interval and disables the checker
    rows += [
        {
            "cluster": "eu",
            "topic": None,
            "level": "broker",
            "scope": "eu",
            "quota_type": qt,
            "limit_size_bytes": 5,
            "limit_time_seconds": 7,
            "policy": EXC,
            "source_shape": "broker_config",
            "precise_time_check": True,
            "check_interval_seconds": 30,
            "check_enabled": False,
            "source_file": "eu/backlog-quotas/broker.json",
        }
        for qt in (SIZE, TIME)
    ]
    export = {"export_id": "nightly-2024-01-01", "export_date": dt.date(2024, 1, 1)}
    return [{**row, **export} for row in rows]


RESOLUTION_TOPICS = [
    ("us-east", "persistent://tenant-a/ns1/payments"),
    ("us-east", "persistent://tenant-a/ns1/payments-partition-2"),
    ("us-east", "persistent://tenant-a/ns1/orders"),
    ("us-east", "persistent://tenant-a/legacy27/t"),
    ("us-east", "persistent://tenant-b/ns290/t"),
    ("us-east", "persistent://tenant-a/empty/t"),
    ("us-east", "persistent://tenant-c/cli30/t"),
    ("us-east", "persistent://tenant-c/cli28/t"),
    ("us-east", "persistent://tenant-d/policies/t"),
    ("us-east", "persistent://tenant-e/ns5/ticks"),
    ("us-east", "persistent://tenant-a/ns1/__change_events"),
    ("us-east", "persistent://pulsar/us-east/10.0.0.1:8080/healthcheck"),
    ("us-west", "persistent://tenant-a/ns1/x"),
    ("eu", "persistent://x/y/z"),
]
#: broker's own view from `topics stats` (3.x+): (backlogQuotaLimitSize, backlogQuotaLimitTime)
RESOLUTION_STATS = {
    "persistent://tenant-a/ns1/payments": (10 * GIB, 1800),
    "persistent://tenant-a/ns1/orders": (10 * GIB, 999),
}


# ======================================================================================================
# Inputs of the producer-outcome scenarios (literal breach rows)
# ======================================================================================================
OUT_BREACHES: list[Row] = []
OUT_EFFECTIVE_ROWS: list[Row] = []


def outcome(
    name: str,
    size: tuple[bool | None, str | None],  # (exceeded, policy) of destination_storage
    time: tuple[bool | None, str | None],
    handled: str | None,
    slowest: str = "sub",
    enabled: bool = True,
    time_handled_unknown: bool = False,
    reason: str | None = None,
    tie: bool = False,
    dedup_at_slowest: bool = False,
) -> None:
    topic = t(name)
    for qtype, (exceeded, policy) in ((SIZE, size), (TIME, time)):
        is_handled: bool | None = handled == qtype
        if qtype == TIME and time_handled_unknown:
            is_handled = None
        OUT_BREACHES.append(
            (
                "c",
                topic,
                qtype,
                exceeded,
                is_handled,
                False,
                slowest,
                (7, 3),
                tie,
                dedup_at_slowest or slowest == "pulsar.dedup",
                reason if qtype == TIME else None,
            )
        )
        OUT_EFFECTIVE_ROWS.append(("c", topic, qtype, policy, enabled))


outcome("o_hold", (True, HOLD), (False, HOLD), SIZE)
outcome("o_exception", (True, EXC), (False, HOLD), SIZE)
outcome("o_evict", (True, EVICT), (False, EVICT), SIZE)
outcome("o_time", (False, HOLD), (True, EXC), TIME)
outcome("o_size_first", (True, HOLD), (True, EXC), SIZE)
outcome("o_evict_then_time", (True, EVICT), (True, HOLD), SIZE)
outcome("o_dedup", (True, HOLD), (False, HOLD), SIZE, slowest="pulsar.dedup")
# pulsar.dedup on the slowest position with a subscription (export order puts the subscription first)
outcome("o_dedup_tie", (True, HOLD), (False, HOLD), SIZE, slowest="sub", tie=True, dedup_at_slowest=True)
# a tie without the dedup cursor changes nothing for producers
outcome("o_tie", (True, EXC), (False, HOLD), SIZE, tie=True)
outcome("o_check_off", (True, HOLD), (False, HOLD), None, enabled=False)
outcome("o_none", (False, HOLD), (False, EXC), None)
outcome("o_undecidable", (False, HOLD), (None, HOLD), None, time_handled_unknown=True, reason="why not")


# ======================================================================================================
# Module fixture: every golden frame, computed once
# ======================================================================================================
Frames = dict[str, dict[tuple[str, ...], dict[str, Any]]]


def _run_parallel(spark: SparkSession, jobs: dict[str, Callable[[], list[Any]]]) -> dict[str, list[Any]]:
    with session_conf(spark, TEST_CONF), ThreadPoolExecutor(max_workers=3) as pool:  # planning dominates
        futures = {name: pool.submit(job) for name, job in jobs.items()}
        return {name: future.result() for name, future in futures.items()}


@pytest.fixture(scope="module")
def frames(spark: SparkSession) -> Frames:
    ledgers = spark.createDataFrame(LEDGER_ROWS, LEDGERS)
    mls = spark.createDataFrame(ML_ROWS, ML)
    cursors = spark.createDataFrame(CURSOR_ROWS, CURSORS)
    entries = spark.createDataFrame(ENTRY_ROWS, ENTRIES)
    effective = spark.createDataFrame(EFFECTIVE_ROWS, EFFECTIVE)
    exact = spark.createDataFrame(EXACT_ROWS, EXACT)

    def breaches() -> list[Any]:
        frames = [
            quota_breaches(effective, mls, ledgers, cursors, entries, exact, pulsar_version=v).select(
                "*", F.lit(v).alias("_version")
            )
            for v in (NEW, OLD_TIME, NO_TIME)
        ]
        return functools.reduce(DataFrame.unionByName, frames).collect()

    bq = spark.createDataFrame(parsed_quota_rows(), spark_schema("backlog_quotas"))
    res_ml = spark.createDataFrame(
        [(c, topic, *RESOLUTION_STATS.get(topic, (None, None))) for c, topic in RESOLUTION_TOPICS],
        "cluster string, topic string, stats_backlog_quota_limit_size_bytes bigint, "
        "stats_backlog_quota_limit_time_seconds bigint",
    )

    def resolution() -> list[Any]:
        calls = {
            "new": effective_quotas(bq, res_ml, NEW),
            "no_topic_policies": effective_quotas(bq, res_ml, NEW, topic_policies_enabled=False),
            "2.8.0": effective_quotas(bq, res_ml, "2.8.0"),
            "2.6.0": effective_quotas(bq, res_ml, "2.6.0"),
            "2.0.5": effective_quotas(bq, res_ml, "2.0.5"),
        }
        tagged = [df.select("*", F.lit(call).alias("_call")) for call, df in calls.items()]
        return functools.reduce(DataFrame.unionByName, tagged).collect()

    out_breaches = spark.createDataFrame(OUT_BREACHES, BREACHES)
    out_effective = spark.createDataFrame(OUT_EFFECTIVE_ROWS, OUT_EFFECTIVE)

    def outcomes() -> list[Any]:
        tagged = [
            producer_outcomes(out_breaches, out_effective, pulsar_version=v).select(
                "*", F.lit(v).alias("_version")
            )
            for v in ("4.1.3", "3.0.0", "2.7.0")
        ]
        return functools.reduce(DataFrame.unionByName, tagged).collect()

    raw = _run_parallel(spark, {"breaches": breaches, "resolution": resolution, "outcomes": outcomes})
    result: Frames = {}
    result["breaches"] = {
        (r["_version"], r["topic"], r["quota_type"]): r.asDict(recursive=True) for r in raw["breaches"]
    }
    result["resolution"] = {
        (r["_call"], r["topic"], r["quota_type"]): r.asDict(recursive=True) for r in raw["resolution"]
    }
    result["outcomes"] = {(r["_version"], r["topic"]): r.asDict(recursive=True) for r in raw["outcomes"]}
    return result


def b(frames: Frames, name: str, qtype: str, version: str = NEW) -> dict[str, Any]:
    return frames["breaches"][(version, t(name), qtype)]


def pick(row: dict[str, Any], *cols: str) -> tuple[Any, ...]:
    return tuple(row[c] for c in cols)


# ======================================================================================================
# Version predicates and system topic names (no Spark)
# ======================================================================================================
def test_version_predicates_follow_the_documented_boundaries() -> None:
    assert [time_quota_supported(v) for v in ("2.7.4", "2.8.0", "3.0.7")] == [False, True, True]
    assert [time_quota_from_size_quota(v) for v in ("2.8.0", "2.8.1")] == [True, False]
    assert [
        non_precise_skips_last_ledger(v) for v in ("2.8.3", "2.8.4", "2.9.3", "2.10.0", "2.10.1", "2.11.0")
    ] == [
        False,
        True,
        True,
        False,
        True,
        True,
    ]
    # apache/pulsar#20951: release tags v2.11.3, v3.0.2, v3.2.0; not v2.10.6 nor any 3.1.x
    assert [
        dedup_snapshot_instead_of_disconnect(v)
        for v in ("2.10.6", "2.11.2", "2.11.3", "3.0.1", "3.0.2", "3.1.0", "3.1.3", "3.2.0")
    ] == [False, False, True, False, True, False, False, True]
    assert dedup_snapshot_instead_of_disconnect("4.0.0")
    assert default_limit_size_bytes("2.0.1") == 50 * GIB
    assert default_limit_size_bytes("2.1.0") == -1


@pytest.mark.parametrize(
    ("topic", "expected"),
    [
        ("persistent://t/ns/orders", False),
        ("persistent://t/ns/__change_events", True),
        ("persistent://t/ns/__change_events-partition-3", True),
        ("persistent://t/ns/my__change_events", False),  # exact local name (3.x+)
        ("persistent://t/ns/__change_events-partition-03", False),  # not a canonical partition suffix
        ("persistent://t/ns/__transaction_buffer_snapshot", True),
        ("persistent://t/ns/__transaction_buffer_snapshot_segments", True),
        ("persistent://t/ns/__topic_trace_events", True),
        ("persistent://t/ns/orders-sub__transaction_pending_ack", True),
        ("persistent://pulsar/system/transaction_coordinator_assign-partition-0", True),
        ("persistent://pulsar/system/anything", True),
        ("persistent://pulsar/us-east/10.0.0.1:8080/healthcheck", True),  # heartbeat v1
        ("persistent://pulsar/10.0.0.1:8080/healthcheck", True),  # heartbeat v2
        ("persistent://sla-monitor/us-east/10.0.0.1:8080/x", True),
        ("persistent://pulsar/ns/orders", False),
    ],
)
def test_is_system_topic_name_covers_system_namespaces_and_system_topics(topic: str, expected: bool) -> None:
    assert is_system_topic_name(topic) is expected


# ======================================================================================================
# effective_quotas (docs §3.2 resolution order, every JSON shape via the parser)
# ======================================================================================================
RESOLVED = (
    "limit_size_bytes",
    "limit_time_seconds",
    "policy",
    "source_level",
    "source_scope",
    "source_shape",
)


def test_effective_quotas_topic_level_wins_then_namespace_then_broker(frames: Frames) -> None:
    r = frames["resolution"]
    payments = "persistent://tenant-a/ns1/payments"
    assert pick(r[("new", payments, TIME)], *RESOLVED) == (
        -1,
        1800,
        EVICT,
        "topic",
        payments,
        "limit_size_time",
    )
    assert pick(r[("new", payments, SIZE)], *RESOLVED) == (
        10 * GIB, -1, HOLD, "namespace", "tenant-a/ns1", "limit_size_time"
    )  # fmt: skip
    # a partition inherits the policy of its partitioned topic
    partition = r[("new", payments + "-partition-2", TIME)]
    assert pick(partition, *RESOLVED) == (-1, 1800, EVICT, "topic", payments, "limit_size_time")
    # no topic-level policy: namespace
    assert pick(r[("new", "persistent://tenant-a/ns1/orders", TIME)], *RESOLVED) == (
        -1, 3600, EVICT, "namespace", "tenant-a/ns1", "limit_size_time"
    )  # fmt: skip


def test_effective_quotas_old_json_shapes_and_missing_types(frames: Frames) -> None:
    r = frames["resolution"]
    broker = (int(2.5 * GIB), -1, HOLD, "broker", "us-east", "broker_config")  # broker.json: GB 2.5 wins
    legacy = "persistent://tenant-a/legacy27/t"  # {"limit", "policy"} (before the time quota)
    assert pick(r[("new", legacy, SIZE)], *RESOLVED) == (
        10 * GIB, -1, HOLD, "namespace", "tenant-a/legacy27", "limit_only"
    )  # fmt: skip
    assert pick(r[("new", legacy, TIME)], *RESOLVED) == broker  # type missing in the namespace map
    cli28 = "persistent://tenant-c/cli28/t"  # CLI text "BacklogQuota{limit=..., policy=...}"
    assert pick(r[("new", cli28, SIZE)], *RESOLVED) == (
        10 * GIB, -1, HOLD, "namespace", "tenant-c/cli28", "plain_string"
    )  # fmt: skip
    cli30 = "persistent://tenant-c/cli30/t"  # Lombok toString, limitSize=null falls back to limit
    assert pick(r[("new", cli30, TIME)], *RESOLVED) == (
        -1,
        600,
        EVICT,
        "namespace",
        "tenant-c/cli30",
        "plain_string",
    )
    ns290 = "persistent://tenant-b/ns290/t"  # ≈2.9.0 limitSize/limitTime without the alias
    assert pick(r[("new", ns290, SIZE)], *RESOLVED)[:3] == (2 * GIB, 0, EXC)
    assert pick(r[("new", ns290, TIME)], *RESOLVED)[:3] == (0, 7200, HOLD)
    policies = "persistent://tenant-d/policies/t"  # `namespaces policies` document: backlog_quota_map
    assert pick(r[("new", policies, SIZE)], *RESOLVED)[:4] == (20 * GIB, -1, EVICT, "namespace")
    ticks = "persistent://tenant-e/ns5/ticks"  # JSON Lines: namespace line; the topic line is an empty map
    assert pick(r[("new", ticks, TIME)], *RESOLVED) == (
        -1,
        300,
        HOLD,
        "namespace",
        "tenant-e/ns5",
        "limit_size_time",
    )
    assert pick(r[("new", ticks, SIZE)], *RESOLVED) == broker
    assert pick(r[("new", "persistent://tenant-a/empty/t", SIZE)], *RESOLVED) == broker


def test_effective_quotas_broker_settings_and_defaults(frames: Frames) -> None:
    r = frames["resolution"]
    settings_cols = ("precise_time_check", "check_interval_seconds", "check_enabled")
    assert pick(r[("new", "persistent://tenant-a/ns1/orders", SIZE)], *settings_cols) == (False, 60, True)
    eu = r[("new", "persistent://x/y/z", TIME)]
    assert pick(eu, *RESOLVED[:4], *settings_cols) == (5, 7, EXC, "broker", True, 30, False)
    # a cluster without any quota row: docs §3.2 defaults (50 GiB before 2.1.0)
    west = "persistent://tenant-a/ns1/x"
    expected_default = (-1, -1, HOLD, "default", None, None, False, 60, True)
    assert pick(r[("new", west, SIZE)], *RESOLVED, *settings_cols) == expected_default
    assert pick(r[("2.0.5", west, SIZE)], *RESOLVED)[:4] == (50 * GIB, -1, HOLD, "default")


def test_effective_quotas_topic_policies_disabled_or_unsupported(frames: Frames) -> None:
    r = frames["resolution"]
    payments = "persistent://tenant-a/ns1/payments"
    namespace_time = (-1, 3600, EVICT, "namespace", "tenant-a/ns1", "limit_size_time")
    assert pick(r[("no_topic_policies", payments, TIME)], *RESOLVED) == namespace_time
    assert pick(r[("2.6.0", payments, TIME)], *RESOLVED) == namespace_time  # topic level from 2.7.0


def test_effective_quotas_2_8_0_reads_the_time_quota_from_the_size_quota(frames: Frames) -> None:
    r = frames["resolution"]
    orders = r[("2.8.0", "persistent://tenant-a/ns1/orders", TIME)]
    assert pick(orders, *RESOLVED[:4], "resolved_from_type") == (10 * GIB, -1, HOLD, "namespace", SIZE)
    assert r[("new", "persistent://tenant-a/ns1/orders", TIME)]["resolved_from_type"] == TIME


def test_effective_quotas_system_topics_namespaces_and_stats_cross_check(frames: Frames) -> None:
    r = frames["resolution"]
    for _cluster, topic in RESOLUTION_TOPICS:
        row = r[("new", topic, SIZE)]
        assert row["is_system_topic"] is is_system_topic_name(topic), topic
    assert r[("new", "persistent://tenant-a/ns1/__change_events", SIZE)]["is_system_topic"] is True
    assert r[("new", "persistent://pulsar/us-east/10.0.0.1:8080/healthcheck", SIZE)]["namespace"] == (
        "pulsar/us-east/10.0.0.1:8080"
    )
    payments, orders = "persistent://tenant-a/ns1/payments", "persistent://tenant-a/ns1/orders"
    assert pick(r[("new", payments, SIZE)], "stats_limit", "stats_limit_matches") == (10 * GIB, True)
    assert pick(r[("new", payments, TIME)], "stats_limit", "stats_limit_matches") == (1800, True)
    assert pick(r[("new", orders, TIME)], "stats_limit", "stats_limit_matches") == (999, False)
    assert pick(r[("new", "persistent://tenant-a/empty/t", TIME)], "stats_limit", "stats_limit_matches") == (
        None,
        None,
    )
    assert len([k for k in r if k[0] == "new"]) == 2 * len(RESOLUTION_TOPICS)


# ======================================================================================================
# quota_breaches: size (docs §3.4, §11.9, §12.7)
# ======================================================================================================
SIZE_COLS = ("estimated_backlog_size_bytes", "exceeded", "size_exceeded", "percent_of_quota")


def test_quota_breaches_size_threshold_is_greater_or_equal(frames: Frames) -> None:
    assert pick(b(frames, "size_equal", SIZE), *SIZE_COLS) == (1000, True, True, 100.0)
    row = b(frames, "size_below", SIZE)
    assert pick(row, *SIZE_COLS[:3]) == (1000, False, False)
    assert row["percent_of_quota"] == pytest.approx(100.0 * 1000 / 1001)


def test_quota_breaches_size_limit_zero_always_exceeded_and_minus_one_disabled(frames: Frames) -> None:
    assert pick(b(frames, "size_zero_no_backlog", SIZE), *SIZE_COLS) == (0, True, True, None)
    assert pick(b(frames, "size_off", SIZE), *SIZE_COLS) == (1000, False, False, None)


# ======================================================================================================
# quota_breaches: time (docs §3.4, §3.8 item 3)
# ======================================================================================================
TIME_COLS = ("time_check_mode", "checked_position", "backlog_age_seconds", "exceeded", "reason")


def test_quota_breaches_non_precise_uses_ledger_close_time_and_open_ledger_never_expires(
    frames: Frames,
) -> None:
    mode = "non_precise"
    assert pick(b(frames, "g3_start", TIME), *TIME_COLS) == (
        mode,
        {"ledger_id": 1, "entry_id": -1},
        7200.0,
        True,
        None,
    )
    # md at the end of L1: the oldest unacked entry is in L2 (closed 1 h ago)
    assert pick(b(frames, "g3_l1_end", TIME), *TIME_COLS) == (
        mode,
        {"ledger_id": 2, "entry_id": 0},
        3600.0,
        True,
        None,
    )
    # md at the end of L2: nextValid is the open L3, whose LedgerInfo timestamp is 0 -> never old
    assert pick(b(frames, "g3_l2_end", TIME), *TIME_COLS) == (
        mode,
        {"ledger_id": 3, "entry_id": 0},
        None,
        False,
        None,
    )
    # md inside the last (open) ledger: not checked
    assert pick(b(frames, "g3_open", TIME), "exceeded", "backlog_age_seconds") == (False, None)
    mid = b(frames, "g3_mid", TIME)
    assert pick(mid, "exceeded", "backlog_age_seconds") == (False, 3600.0)
    assert mid["percent_of_quota"] == pytest.approx(100.0 * 3600 / 5400)
    assert mid["reference_time_ms"] == ago_ms(3600)


def test_quota_breaches_time_limit_zero_disables_the_check(frames: Frames) -> None:
    assert pick(b(frames, "time_zero", TIME), "exceeded", "percent_of_quota", "reason") == (False, None, None)


def test_quota_breaches_non_precise_without_close_time_is_undecidable(frames: Frames) -> None:
    row = b(frames, "no_close_time", TIME)
    assert row["exceeded"] is None and row["time_exceeded"] is None and row["handled_type"] is None
    assert "close timestamp of ledger 1" in row["reason"] and "undecidable" in row["reason"]


def test_quota_breaches_non_precise_mark_delete_in_trimmed_ledger_moves_to_next_valid(frames: Frames) -> None:
    assert pick(b(frames, "trimmed_md", TIME), "checked_position", "exceeded") == (
        {"ledger_id": 5, "entry_id": 0},
        True,
    )


def test_quota_breaches_last_closed_ledger_checked_only_before_pr_15663(frames: Frames) -> None:
    assert b(frames, "closed_last", TIME)["exceeded"] is False
    assert pick(b(frames, "closed_last", TIME, OLD_TIME), "exceeded", "backlog_age_seconds") == (True, 7200.0)


def test_quota_breaches_precise_uses_entry_time_with_strict_comparison(frames: Frames) -> None:
    old = b(frames, "p_old", TIME)
    assert pick(old, "time_check_mode", "checked_position", "reference_time_ms", "exceeded") == (
        "precise",
        {"ledger_id": 1, "entry_id": 0},
        ago_ms(7300),
        True,
    )
    assert pick(b(frames, "p_equal", TIME), "exceeded", "percent_of_quota") == (
        False,
        100.0,
    )  # now == t + limit
    assert b(frames, "p_over", TIME)["exceeded"] is True  # 1 ms later
    broker_ts = b(frames, "p_broker_ts", TIME)  # broker-entry timestamp 4000 s ago, publish time 10 s ago
    assert pick(broker_ts, "reference_time_ms", "exceeded") == (ago_ms(4000), True)


def test_quota_breaches_precise_without_the_entry_is_undecidable(frames: Frames) -> None:
    row = b(frames, "p_missing", TIME)
    assert row["exceeded"] is None
    assert "entry 1:4" in row["reason"] and "not in the entries export" in row["reason"]


def test_quota_breaches_no_backlog_or_no_durable_cursor_is_never_old(frames: Frames) -> None:
    assert pick(b(frames, "p_no_backlog", TIME), "exceeded", "reason") == (False, None)
    readers = b(frames, "readers_only", TIME)
    assert pick(readers, "slowest_cursor_name", "estimated_backlog_size_bytes", "exceeded") == (
        None,
        0,
        False,
    )
    assert b(frames, "readers_only", SIZE)["exceeded"] is True  # limit 0: the size quota still trips


def test_quota_breaches_slowest_cursor_tie_and_dedup(frames: Frames) -> None:
    """docs §3.9: the slowest cursor is the root of the cursor heap built in export order (sub2 before
    pulsar.dedup, both at 1:-1; the reader never counts); the tie and the dedup cursor's place are flagged.
    pulsar.dedup alone on the slowest position is the root itself."""
    tie = b(frames, "dedup_tie", SIZE)
    assert pick(tie, "slowest_cursor_name", "slowest_cursor_tie", "dedup_at_slowest") == ("sub2", True, True)
    alone = b(frames, "dedup_alone", SIZE)
    assert pick(alone, "slowest_cursor_name", "slowest_cursor_tie", "dedup_at_slowest") == (
        "pulsar.dedup",
        False,
        True,
    )
    one = b(frames, "both", SIZE)
    assert pick(one, "slowest_cursor_name", "slowest_cursor_tie", "dedup_at_slowest") == ("sub", False, False)
    readers = b(frames, "readers_only", SIZE)
    assert pick(readers, "slowest_cursor_tie", "dedup_at_slowest") == (False, False)


# ======================================================================================================
# quota_breaches: handling order, system topics, versions, exact view
# ======================================================================================================
HANDLED = ("size_exceeded", "time_exceeded", "is_handled", "handled_type")


def test_quota_breaches_size_is_handled_before_time(frames: Frames) -> None:
    assert pick(b(frames, "both", SIZE), *HANDLED) == (True, True, True, SIZE)
    assert pick(b(frames, "both", TIME), *HANDLED) == (True, True, False, SIZE)
    assert pick(b(frames, "time_only", TIME), *HANDLED) == (False, True, True, TIME)
    assert pick(b(frames, "check_off", SIZE), *HANDLED) == (True, True, False, None)


def test_quota_breaches_system_topic_never_exceeds(frames: Frames) -> None:
    for qtype in (SIZE, TIME):
        row = b(frames, "__change_events", qtype)
        assert pick(row, "is_system_topic", "exceeded", "handled_type") == (True, False, None)
        assert row["reason"].startswith("system topic")
    assert b(frames, "__change_events", SIZE)["estimated_backlog_size_bytes"] == 1400


def test_quota_breaches_before_2_8_checks_size_only(frames: Frames) -> None:
    row = b(frames, "time_only", TIME, NO_TIME)
    assert pick(row, "time_check_mode", "exceeded", "handled_type", "percent_of_quota") == (
        None,
        False,
        None,
        None,
    )
    assert "before Pulsar 2.8.0" in row["reason"]
    assert b(frames, "both", SIZE, NO_TIME)["handled_type"] == SIZE
    assert b(frames, "time_only", TIME, OLD_TIME)["handled_type"] == TIME


def test_quota_breaches_exact_view_uses_durable_cursors(frames: Frames) -> None:
    size = b(frames, "size_equal", SIZE)
    assert pick(size, "exceeded", "exact_backlog_bytes", "exact_backlog_cursor_name", "exact_exceeded") == (
        True,
        900,
        "sub",
        False,
    )
    time = b(frames, "g3_start", TIME)
    assert pick(time, "exceeded", "true_oldest_unacked_age_seconds", "exact_exceeded") == (
        True,
        1000.0,
        False,
    )
    assert pick(b(frames, "g3_l1_end", TIME), "exact_backlog_bytes", "exact_exceeded") == (None, None)


def test_quota_breaches_keep_carries_effective_columns_and_exact_completeness(spark: SparkSession) -> None:
    """``keep``: the rows equal the breaches joined back onto ``effective`` and onto the completeness of
    the durable cursors' exact backlogs (the non-durable ``reader-9`` does not count; null is incomplete)."""
    complete = {"sub": True, "reader-9": False, "sub1": True, "sub2": None}
    exact = spark.createDataFrame(
        [(*r, complete[r[2]]) for r in EXACT_ROWS], f"{EXACT}, exported_entries_complete boolean"
    )
    effective = spark.createDataFrame(EFFECTIVE_ROWS, EFFECTIVE)
    inputs = (
        effective,
        spark.createDataFrame(ML_ROWS, ML),
        spark.createDataFrame(LEDGER_ROWS, LEDGERS),
        spark.createDataFrame(CURSOR_ROWS, CURSORS),
        spark.createDataFrame(ENTRY_ROWS, ENTRIES),
        exact,
    )
    kept = quota_breaches(*inputs, pulsar_version=NEW, keep=["precise_time_check", "exact_backlog_complete"])
    completeness = spark.createDataFrame(
        [("c", t("size_equal"), True), ("c", t("g3_start"), False)],
        "cluster string, topic string, exact_backlog_complete boolean",
    )
    keys = ["cluster", "topic", "quota_type"]
    joined = (
        quota_breaches(*inputs, pulsar_version=NEW)
        .join(effective.select(*keys, "precise_time_check"), keys, "left")
        .join(completeness, ["cluster", "topic"], "left")
        .select(*kept.columns)
    )
    assert kept.columns[-2:] == ["precise_time_check", "exact_backlog_complete"]
    assert_df_equality(kept, joined, ignore_row_order=True)
    with pytest.raises(ContractError, match="no_such_column"):
        quota_breaches(*inputs, pulsar_version=NEW, keep=["no_such_column"])


def test_exact_view_names_the_smallest_cursor_among_equal_backlogs(spark: SparkSession) -> None:
    """Two durable cursors with the same exact backlog: the name does not depend on the rows' order."""
    schema = (
        "cluster string, topic string, cursor_name string, is_durable boolean, backlog_bytes long, "
        "oldest_unacked_publish_time_ms long"
    )
    rows = [
        ("c", "t", "zeta", True, 900, 5),
        ("c", "t", "alpha", True, 900, 7),
        ("c", "t", "reader", False, 999, 1),
        ("c", "t", "unknown", True, None, None),
    ]
    for ordered in (rows, rows[::-1]):
        view = quota_policy._exact_view(spark.createDataFrame(ordered, schema).coalesce(1), spark.range(0))
        assert view is not None
        got = view.select("exact_backlog_bytes", "exact_backlog_cursor_name", "_oldest_ms").collect()
        assert [tuple(r) for r in got] == [(900, "alpha", 5)]


def test_quota_breaches_one_row_per_topic_and_quota_type(frames: Frames) -> None:
    keys = [k for k in frames["breaches"] if k[0] == NEW]
    assert len(keys) == len(EFFECTIVE_ROWS)
    assert all(b(frames, name, SIZE)["checked_at"] is not None for name in ("size_equal", "g3_start"))


# ======================================================================================================
# producer_outcomes (docs §3.3, §3.5)
# ======================================================================================================
def o_row(frames: Frames, name: str, version: str = "4.1.3") -> dict[str, Any]:
    return frames["outcomes"][(version, t(name))]


BLOCK = ("new_producers_blocked", "blocking_quota_type", "new_producer_error_code", "new_producer_error_name")


def test_producer_outcomes_on_one_frame_with_breaches_and_policies_equals_the_join(
    spark: SparkSession,
) -> None:
    """The quota stage passes one frame as both arguments: read once, it gives what the two frames give."""
    version = F.when(F.length("topic") % 2 == 0, F.lit("4.1.3")).otherwise(F.lit("2.7.0"))
    breaches = spark.createDataFrame(OUT_BREACHES, BREACHES)
    effective = spark.createDataFrame(OUT_EFFECTIVE_ROWS, OUT_EFFECTIVE).select(
        "*", version.alias("pulsar_version")
    )
    both = breaches.join(effective, ["cluster", "topic", "quota_type"], "left")
    assert_df_equality(
        producer_outcomes(both, both, pulsar_version=None),
        producer_outcomes(breaches, effective, pulsar_version=None),
        ignore_row_order=True,
    )


def test_producer_outcomes_hold_and_exception_codes(frames: Frames) -> None:
    hold = o_row(frames, "o_hold")
    assert pick(hold, "producers_disconnected", *BLOCK) == (
        True,
        True,
        SIZE,
        7,
        "ProducerBlockedQuotaExceededError",
    )
    assert hold["broker_error_message"] == BROKER_ERROR_MESSAGE
    assert hold["client_exception"] == CLIENT_EXCEPTION
    assert hold["client_error_message"] == (
        "Cannot create producer on topic with backlog quota exceeded. "
        "Error code: ProducerBlockedQuotaExceededError"
    )
    assert pick(hold, "holding_cursor_name", "holding_mark_delete_position") == (
        "sub",
        {"ledger_id": 7, "entry_id": 3},
    )
    exception = o_row(frames, "o_exception")
    assert pick(exception, "producers_disconnected", *BLOCK) == (
        True,
        True,
        SIZE,
        8,
        "ProducerBlockedQuotaExceededException",
    )


def test_producer_outcomes_eviction_never_blocks_producers(frames: Frames) -> None:
    evict = o_row(frames, "o_evict")
    assert pick(evict, "handled_policy", "producers_disconnected", *BLOCK) == (
        EVICT,
        False,
        False,
        None,
        None,
        None,
    )
    assert evict["client_error_message"] is None
    # size evicts (periodic check), but admission also checks the time quota, whose policy blocks
    mixed = o_row(frames, "o_evict_then_time")
    assert pick(mixed, "handled_type", "producers_disconnected", *BLOCK) == (
        SIZE,
        False,
        True,
        TIME,
        7,
        "ProducerBlockedQuotaExceededError",
    )


def test_producer_outcomes_admission_checks_size_before_time(frames: Frames) -> None:
    assert pick(o_row(frames, "o_time"), "handled_type", "producers_disconnected", *BLOCK[:3]) == (
        TIME,
        True,
        True,
        TIME,
        8,
    )
    assert pick(o_row(frames, "o_size_first"), *BLOCK[:3]) == (True, SIZE, 7)


def test_producer_outcomes_dedup_cursor_gets_a_snapshot_from_pr_20951(frames: Frames) -> None:
    new = o_row(frames, "o_dedup", "4.1.3")
    assert pick(new, "producers_disconnected", "dedup_snapshot_taken", "new_producers_blocked") == (
        False,
        True,
        True,
    )
    old = o_row(frames, "o_dedup", "3.0.0")
    assert pick(old, "producers_disconnected", "dedup_snapshot_taken", "new_producers_blocked") == (
        True,
        False,
        True,
    )


def test_producer_outcomes_dedup_cursor_in_a_tie_is_undecidable(frames: Frames) -> None:
    """docs §3.9: pulsar.dedup shares the slowest position with a subscription; the broker's heap may hold
    either at the root (dedup snapshot or disconnection). A tie without pulsar.dedup disconnects as usual."""
    new = o_row(frames, "o_dedup_tie", "4.1.3")
    assert pick(new, "producers_disconnected", "dedup_snapshot_taken", "new_producers_blocked") == (
        None,
        False,
        True,
    )
    assert "pulsar.dedup shares the slowest mark-delete position" in new["reason"]
    old = o_row(frames, "o_dedup_tie", "3.0.0")  # before PR #20951: disconnected whoever is the root
    assert pick(old, "producers_disconnected", "dedup_snapshot_taken", "reason") == (True, False, None)
    tie = o_row(frames, "o_tie", "4.1.3")
    assert pick(tie, "producers_disconnected", "dedup_snapshot_taken", "reason") == (True, False, None)


def test_producer_outcomes_disabled_check_still_blocks_new_producers(frames: Frames) -> None:
    row = o_row(frames, "o_check_off")
    assert pick(row, "handled_type", "producers_disconnected", *BLOCK[:3]) == (None, False, True, SIZE, 7)


def test_producer_outcomes_nothing_exceeded_or_undecidable(frames: Frames) -> None:
    none = o_row(frames, "o_none")
    assert pick(none, "producers_disconnected", "new_producers_blocked", "holding_cursor_name", "reason") == (
        False,
        False,
        None,
        None,
    )
    unknown = o_row(frames, "o_undecidable")
    assert pick(unknown, "producers_disconnected", "new_producers_blocked", "new_producer_error_code") == (
        None,
        None,
        None,
    )
    assert unknown["reason"] == "why not"
    # before 2.8.0 the time quota is never checked, so an exceeded time quota blocks nobody
    assert pick(o_row(frames, "o_time", "2.7.0"), "new_producers_blocked", "new_producer_error_code") == (
        False,
        None,
    )


# ======================================================================================================
# Property: breach detection agrees with the oracle on random managed-ledger states
# ======================================================================================================
PROPERTY_VERSIONS = ["2.8.0", "4.1.3"]
PROPERTY_SETTINGS = S.PROPERTY_SETTINGS


class QuotaCase:
    """A random topic (tests/oracle/strategies.py) plus quota, times and exact per-cursor backlogs."""

    def __init__(
        self,
        case: S.Case,
        quota_: q.TopicQuota,
        times: q.TopicTimes,
        exact: list[q.ExactCursor] | None,
        system: bool,
    ) -> None:
        self.case, self.quota, self.times, self.exact, self.system = case, quota_, times, exact, system

    def topic(self, i: int) -> str:
        return (
            S.topic_name(i).replace("case-", "__change_events-partition-") if self.system else S.topic_name(i)
        )


@st.composite
def quota_cases(draw: st.DrawFn) -> QuotaCase:
    case = draw(S.cursor_cases())
    ml = case.ml
    limit_time = draw(st.sampled_from([-1, 0, 60, 600, 600, 3600, 3600]))  # mostly enabled
    total = ml.total_size
    limit_size = draw(st.one_of(st.sampled_from([-1, 0]), st.integers(1, max(1, total + 10))))
    quota_ = q.TopicQuota(
        limit_size, limit_time, precise=draw(st.booleans()), check_enabled=draw(st.integers(0, 5)) > 0
    )
    now_ms = 1_700_000_000_000
    boundary = max(limit_time, 1) * 1000

    def when() -> int:  # around the limit, so that both sides of the strict comparison occur
        return now_ms - draw(st.sampled_from([boundary, boundary + 1, boundary - 1, 0, 2 * boundary]))

    closed: dict[int, int | None] = {}
    for lid in ml.ledgers:
        closed[lid] = None if draw(st.integers(0, 6)) == 0 else when()
    entry_ms: dict[o.Position, int] | None = None
    if draw(st.integers(0, 5)) > 0:
        entry_ms = {p: when() for p in case.state.existing_entries() if draw(st.integers(0, 8)) > 0}
    exact = None
    if draw(st.booleans()):
        exact = [
            q.ExactCursor(
                c.name,
                c.durable,
                draw(st.integers(0, total + 5)),
                draw(st.one_of(st.none(), st.just(when()))),
            )
            for c in case.cursors
        ]
    return QuotaCase(
        case, quota_, q.TopicTimes(now_ms, closed, entry_ms), exact, draw(st.integers(0, 9)) == 0
    )


def _property_frames(spark: SparkSession, cases: list[QuotaCase]) -> tuple[DataFrame, ...]:
    ledgers, mls, cursors, entries, effective, exact = [], [], [], [], [], []
    for i, qc in enumerate(cases):
        topic, ml = qc.topic(i), qc.case.ml
        now = dt.datetime.fromtimestamp(qc.times.now_ms / 1000, tz=UTC)
        for lid, (n, size) in ml.ledgers.items():
            closed_ms = qc.times.closed_ms.get(lid)
            closed = None if closed_ms is None else dt.datetime.fromtimestamp(closed_ms / 1000, tz=UTC)
            ledgers.append(("c1", topic, lid, n, size, closed))
        mls.append(
            (
                "c1",
                topic,
                ml.current_ledger_id,
                ml.current_ledger_entries,
                ml.current_ledger_size,
                ml.lac,
                ml.total_size,
                now,
            )
        )
        for c in qc.case.cursors:
            cursors.append(
                ("c1", topic, c.name, c.order, c.durable, c.mark_delete, list(c.individually_deleted))
            )
        for p, ms in (qc.times.entry_ms or {}).items():
            entries.append(("c1", topic, p[0], p[1], ms, None))
        for qtype in (SIZE, TIME):
            effective.append(
                (
                    "c1",
                    topic,
                    qtype,
                    qc.quota.limit_size,
                    qc.quota.limit_time,
                    HOLD,
                    qc.quota.precise,
                    qc.quota.check_enabled,
                )
            )
        for e in qc.exact or []:
            exact.append(("c1", topic, e.name, e.backlog_bytes, e.oldest_unacked_ms))
    return (
        spark.createDataFrame(ledgers, LEDGERS),
        spark.createDataFrame(mls, ML),
        spark.createDataFrame(cursors, CURSORS),
        spark.createDataFrame(entries, ENTRIES),
        spark.createDataFrame(effective, EFFECTIVE),
        spark.createDataFrame(exact, EXACT),
    )


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(cases=st.lists(quota_cases(), min_size=40, max_size=60))
def test_quota_breaches_matches_oracle(spark: SparkSession, cases: list[QuotaCase]) -> None:
    assume(S.is_informative([qc.case for qc in cases]))
    ledgers, mls, cursors, entries, effective, exact = _property_frames(spark, cases)
    cols = ("topic", "quota_type", "estimated_backlog_size_bytes", "exceeded", "handled_type")
    exact_cols = ("exact_backlog_bytes", "exact_exceeded")
    rows = _run_parallel(
        spark,
        {
            "all": lambda: S.run_versions(
                lambda v: quota_breaches(
                    effective, mls, ledgers, cursors, entries, exact, pulsar_version=v
                ).select(*cols, *exact_cols),
                PROPERTY_VERSIONS,
            )
        },
    )["all"]
    actual = {(r["_version"], r["topic"], r["quota_type"]): r for r in rows}
    mismatches: list[S.Mismatch] = []
    for v in PROPERTY_VERSIONS:
        for i, qc in enumerate(cases):
            exact_known = qc.exact is not None and any(e.durable for e in qc.exact)
            want = q.breach(qc.case.ml, qc.case.cursors, qc.quota, qc.times, v, qc.system, qc.exact)
            for qtype, exceeded, exact_exceeded in (
                (SIZE, want.size_exceeded, want.exact_size_exceeded),
                (TIME, want.time_exceeded, want.exact_time_exceeded),
            ):
                expected = (
                    want.estimated_backlog_size,
                    exceeded,
                    want.handled_type,
                    want.exact_backlog_bytes if exact_known else None,
                    exact_exceeded if exact_known else None,
                )
                row = actual.get((v, qc.topic(i), qtype))
                got = None if row is None else tuple(row[c] for c in (*cols[2:], *exact_cols))
                if got != expected:
                    detail = (
                        f"{qtype} quota={qc.quota} now={qc.times.now_ms} "
                        f"closed={qc.times.closed_ms} system={qc.system}"
                    )
                    mismatches.append(S.Mismatch(v, i, detail, expected, got))
    assert len(rows) == 2 * len(PROPERTY_VERSIONS) * len(cases)
    assert not mismatches, S.mismatch_report(mismatches, [qc.case for qc in cases])
