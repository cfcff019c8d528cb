"""Golden tests for pulsar_model.positions (docs §1.12 scenarios 1-6) and the edge rows of §1.3-§1.11.

Every scenario is a managed-ledger state (one topic each) plus cursor/request rows; all frames of this
module are computed once by a module fixture (fetched as JSON rows), then each test reads its
rows. Ledger ids: ``L1 = 1, L2 = 2, ...``; the open ledger is listed with 0 entries / 0 bytes, as Pulsar
lists it. "new" = Pulsar 4.1.3, "3x" = 3.0.7, "2.10" = 2.10.1, "old" = 2.8.0 (docs/semantics "2.x-old").
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pulsar_model import positions as P
from pulsar_model.backlog import precise_backlog
from pulsar_model.plans import cursor_operation_plans
from tests.contract_frames import CURSOR_STATE, LEDGER_STATE, MANAGED_LEDGER_STATE, contract_schema
from tests.spark_conf import session_conf

LEDGERS = contract_schema("ledgers", LEDGER_STATE)
ML = contract_schema("managed_ledgers", MANAGED_LEDGER_STATE)
CURSORS = contract_schema("cursors", CURSOR_STATE)
PAN_REQ = contract_schema(
    "plan_requests",
    ["cluster", "topic", "request_id", ("start_position", "position"), "n", ("bound", "string")],
)
SKIP_REQ = contract_schema(
    "plan_requests", ["cluster", "topic", "cursor_name", "n", "deleted_entries", "request_id"]
)
POS_REQ = contract_schema("plan_requests", ["cluster", "topic", "request_id", ("position", "position")])
RANGE_REQ = contract_schema(
    "plan_requests",
    [
        "cluster",
        "topic",
        "request_id",
        ("lower", "position"),
        ("lower_closed", "boolean"),
        ("upper", "position"),
        ("upper_closed", "boolean"),
    ],
)
CLEAR_REQ = contract_schema("plan_requests", ["cluster", "topic", "cursor_name", "request_id"])
RESET_REQ = contract_schema(
    "plan_requests", ["cluster", "topic", "cursor_name", "request_id", "target_kind", "target"]
)

NEW, V3, V210, OLD = "4.1.3", "3.0.7", "2.10.1", "2.8.0"
EXCL, INCL = "startExcluded", "startIncluded"
ENTRY = 100  # bytes per entry in every state below

Pos = tuple[int, int]


class State:
    """One topic's managed-ledger state: closed ledgers, the open ledger and LAC."""

    def __init__(self, topic: str, closed: list[tuple[int, int]], current: int | None, cle: int, lac: Pos):
        self.topic, self.closed, self.current, self.cle, self.lac = topic, closed, current, cle, lac

    def ledger_rows(self) -> list[tuple[Any, ...]]:
        rows = [("c", self.topic, lid, n, n * ENTRY) for lid, n in self.closed]
        if self.current is not None:
            rows.append(("c", self.topic, self.current, 0, 0))
        return rows

    def ml_row(self) -> tuple[Any, ...]:
        total = sum(n for _, n in self.closed) * ENTRY + self.cle * ENTRY
        return ("c", self.topic, self.current, self.cle, self.cle * ENTRY, self.lac, total)


STATES = [
    # §1.12-1 testGetPositionAfterN: L1 (0..4), L2 (0..4) closed, L3 open and empty, LAC = L2:4.
    State("s1", [(1, 5), (2, 5)], 3, 0, (2, 4)),
    # the same 10 entries in the 2.x era (next ledger created lazily): L2 is still the open ledger.
    State("s1_old", [(1, 5)], 2, 5, (2, 4)),
    # §1.12-2 first part: p1..p5 = L1:0..4; newer copies roll over to an empty L2, old copies keep L1 open.
    State("s2a", [(1, 5)], 2, 0, (1, 4)),
    State("s2a_old", [], 1, 5, (1, 4)),
    # §1.12-2 second part: 5 more entries L2:0..4.
    State("s2b", [(1, 5), (2, 5)], 3, 0, (2, 4)),
    State("s2b_old", [(1, 5)], 2, 5, (2, 4)),
    # §1.12-3 testSkipEntries, maxEntriesPerLedger=2.
    State("s3a", [], 1, 0, (1, -1)),
    State("s3b", [(1, 2)], 2, 0, (1, 1)),
    State("s3b_old", [], 1, 2, (1, 1)),
    State("s3d", [(1, 2), (2, 2), (3, 2), (4, 2)], 5, 0, (4, 1)),
    State("s3d_old", [(1, 2), (2, 2), (3, 2)], 4, 2, (4, 1)),
    # §1.12-4 testClearBacklog, maxEntriesPerLedger=1.
    State("s4", [(1, 1), (2, 1), (3, 1)], 4, 0, (3, 0)),
    State("s4_old", [(1, 1), (2, 1)], 3, 1, (3, 0)),
    # §1.12-5 deleteSingleMessageTwice: 4 entries in one (open) ledger.
    State("s5", [], 1, 4, (1, 3)),
    # §1.12-6 testRateLimitMarkDelete: 3 entries.
    State("s6", [], 1, 3, (1, 2)),
    # edge states: deleted ledger 12 between 10 and 15, open ledger 20 with 4 entries.
    State("e1", [(10, 3), (15, 2)], 20, 4, (20, 3)),
    # LAC in a closed ledger, empty open ledger.
    State("e2", [(10, 3), (15, 2)], 20, 0, (15, 1)),
    # no open ledger.
    State("e3", [(10, 3), (15, 2)], None, 0, (15, 1)),
    # no ledgers at all.
    State("e4", [], None, 0, (5, -1)),
    # only empty ledgers before the open one.
    State("e5", [(3, 0), (4, 0)], 5, 2, (5, 1)),
]


def _cursor(
    topic: str, name: str, md: Pos, idm: Iterable[tuple[Pos, Pos]] = (), order: int = 1
) -> tuple[Any, ...]:
    return ("c", topic, name, order, True, md, [(lo, hi) for lo, hi in idm])


CURSORS_ROWS = [
    _cursor("s1", "md13", (1, 3)),
    _cursor("s1_old", "md13", (1, 3)),
    # §1.12-2: individually deleted p2 (L1:1) and p4 (L1:3) -> ranges (L1:0, L1:1], (L1:2, L1:3].
    _cursor("s2a", "sub", (1, -1), [((1, 0), (1, 1)), ((1, 2), (1, 3))]),
    _cursor("s2a_old", "sub", (1, -1), [((1, 0), (1, 1)), ((1, 2), (1, 3))]),
    _cursor("s2b", "sub", (1, 4), [((2, 0), (2, 1)), ((2, 2), (2, 3))]),
    _cursor("s2b_old", "sub", (1, 4), [((2, 0), (2, 1)), ((2, 2), (2, 3))]),
    _cursor("s3a", "A", (1, -1)),
    _cursor("s3b", "B", (1, -1)),
    _cursor("s3b", "C", (1, 0)),
    _cursor("s3b_old", "B", (1, -1)),
    _cursor("s3b_old", "C", (1, 0)),
    _cursor("s3d", "D", (1, 1)),
    _cursor("s3d", "E", (4, 0)),
    _cursor("s3d_old", "D", (1, 1)),
    _cursor("s3d_old", "E", (4, 0)),
    _cursor("s4", "c1", (1, -1), order=1),
    _cursor("s4", "c2", (1, 0), order=2),
    _cursor("s4", "c3", (2, 0), order=3),
    _cursor("s4_old", "c1", (1, -1), order=1),
    _cursor("s4_old", "c3", (2, 0), order=3),
    _cursor("e1", "x1", (10, 0), [((10, 1), (10, 2)), ((15, -1), (15, 0))]),
    _cursor("e1", "x2", (12, 3)),
    _cursor("e2", "y1", (15, 0)),
    _cursor("e2", "y2", (15, 1)),
    _cursor("e2", "y3", (20, -1)),
]

# Cursor states whose precise backlog is asserted (after-the-fact states of the scenarios).
BACKLOG_ROWS = [
    _cursor("s1", "md13", (1, 3)),
    _cursor("s1_old", "md13", (1, 3)),
    # §1.12-3 entries left after each skip
    _cursor("s3b", "after_B", (1, 0)),
    _cursor("s3b", "after_C", (1, 1)),
    _cursor("s3d", "after_D", (4, 0)),
    _cursor("s3d", "after_E", (4, 1)),
    # §1.12-4 before and after clearBacklog
    _cursor("s4", "c1", (1, -1)),
    _cursor("s4", "c2", (1, 0)),
    _cursor("s4", "c3", (2, 0)),
    _cursor("s4", "c1_cleared", (3, 0)),
    _cursor("s4_old", "c1", (1, -1)),
    _cursor("s4_old", "c2", (1, 0)),
    _cursor("s4_old", "c3", (2, 0)),
    # §1.12-5 after deleting p1 (twice: same state), p2, p3, p4; and p1 still as an acked range
    _cursor("s5", "p0", (1, -1)),
    _cursor("s5", "p1", (1, 0)),
    _cursor("s5", "p1_as_range", (1, -1), [((1, -1), (1, 0))]),
    _cursor("s5", "p2", (1, 1)),
    _cursor("s5", "p3", (1, 2)),
    _cursor("s5", "p4", (1, 3)),
    # §1.12-6 in-memory (p3) vs persisted (p1) mark-delete
    _cursor("s6", "in_memory", (1, 2)),
    _cursor("s6", "persisted", (1, 0)),
    # edges
    _cursor("e1", "b1", (10, 0), [((10, 1), (10, 2))]),
    _cursor("e1", "b2", (12, 3)),
    _cursor("e2", "b3", (15, 1)),
    _cursor("e2", "b4", (20, -1)),
    _cursor("e3", "b5", (10, -1)),
]

PAN_ROWS = [
    ("s1", "a", (1, 0), 1, EXCL),
    ("s1", "b", (1, 0), 4, EXCL),
    ("s1", "c", (1, 4), 6, EXCL),
    ("s1_old", "c", (1, 4), 6, EXCL),
    ("e1", "p1", (10, 0), 4, INCL),
    ("e1", "p2", (12, 0), 2, INCL),
    ("e1", "p3", (10, 2), 100, EXCL),
    ("e1", "p4", (20, -1), 0, INCL),
    ("e2", "p5", (15, 1), 5, EXCL),
    ("e2", "p6", (15, 1), 1, EXCL),
    ("e3", "p7", (10, 0), 7, INCL),
    ("e3", "p7b", (10, 0), 9, INCL),
    ("e4", "p8", (5, -1), 1, EXCL),
    ("e1", "neg", (10, 1), -1, INCL),
    ("e1", "badbound", (10, 1), 1, "sideways"),
]

SKIP_ROWS = [
    ("s2a", "sub", 3, "Exclude", "s2-exclude3"),
    ("s2a_old", "sub", 3, "Exclude", "s2-exclude3"),
    ("s2b", "sub", 4, "Include", "s2-include4"),
    ("s2b_old", "sub", 4, "Include", "s2-include4"),
    ("s3a", "A", 1, "Include", "s3-A"),
    ("s3b", "B", 1, "Include", "s3-B"),
    ("s3b", "C", 1, "Include", "s3-C"),
    ("s3b_old", "B", 1, "Include", "s3-B"),
    ("s3b_old", "C", 1, "Include", "s3-C"),
    ("s3d", "D", 5, "Include", "s3-D"),
    ("s3d", "E", 10, "Include", "s3-E"),
    ("s3d_old", "D", 5, "Include", "s3-D"),
    ("s3d_old", "E", 10, "Include", "s3-E"),
    ("e1", "x1", 1, "Exclude", "x1-ex1"),
    ("e1", "x1", 2, "Exclude", "x1-ex2"),
    ("e1", "x1", 0, "Include", "x1-zero"),
    ("e2", "y1", 5, "Include", "y1-in5"),
    ("e2", "y2", 1, "Include", "y2-in1"),
    ("e2", "nobody", 1, "Include", "missing-cursor"),
]

POSITION_ROWS = [
    ("s1", "nv-md", (1, 3)),
    ("s4_old", "nv-lac", (3, 0)),
    ("s5", "nv-p1", (1, 0)),
    ("s5", "nv-p4", (1, 3)),
    ("e1", "q15_0", (15, 0)),
    ("e1", "q12_5", (12, 5)),
    ("e1", "q12_0", (12, 0)),
    ("e1", "q10_m1", (10, -1)),
    ("e1", "q20_0", (20, 0)),
    ("e1", "q10_0", (10, 0)),
    ("e1", "q10_2", (10, 2)),
    ("e1", "q10_3", (10, 3)),
    ("e1", "q12_3", (12, 3)),
    ("e1", "q20_3", (20, 3)),
    ("e1", "q20_4", (20, 4)),
    ("e1", "q20_5", (20, 5)),
    ("e1", "q25_0", (25, 0)),
    ("e2", "q15_1", (15, 1)),
    ("e2", "q15_2", (15, 2)),
    ("e2", "q20_0", (20, 0)),
    ("e3", "q15_1", (15, 1)),
    ("e3", "q15_2", (15, 2)),
    ("e4", "q5_m1", (5, -1)),
    ("e4", "q5_0", (5, 0)),
    ("e5", "q5_0", (5, 0)),
    ("nope", "no-topic", (1, 1)),
]

RANGE_ROWS = [
    ("e1", "r1", (10, 0), False, (20, 3), True),
    ("e1", "r2", (12, 1), True, (15, 1), True),
    ("e1", "r3", (10, -1), False, (10, 7), True),
    ("e1", "r4", (10, 1), False, (15, 5), True),
    ("e1", "r5", (10, -1), True, (15, 0), True),
    ("e1", "r6", (15, 1), False, (10, 0), True),
    ("e1", "r7", (10, 1), False, (10, 1), False),
    ("e1", "r8", (10, 1), False, (10, 1), True),
    ("e2", "r9", (15, 1), False, (20, 0), True),
    ("e4", "r10", (5, -1), False, (5, -1), True),
]

CLEAR_ROWS = [("s4", "c1", "s4-c1"), ("s4", "c3", "s4-c3"), ("e1", "x1", "e1-x1")]
CLEAR_ROWS += [("e2", "y3", "e2-y3")]

RESET_ROWS = [
    ("e1", "x1", "earliest", "earliest", None),
    ("e1", "x1", "latest", "latest", None),
    ("e1", "x1", "deleted", "position", (12, 1)),
    ("e1", "x1", "valid", "position", (15, 0)),
    ("e1", "x1", "earliest-as-position", "position", (-1, -1)),
    ("e2", "y1", "latest", "latest", None),
    ("e2", "y1", "bogus", "middle", None),
]


def collect_frames(spark: SparkSession, builders: dict[str, Callable[[], DataFrame]]) -> list[Any]:
    """Build every frame and fetch it as JSON rows tagged with its name (settings restored afterwards).

    Planning these wide plans costs more than running them on test data, so frames are built and
    collected on a few threads (PySpark pins one JVM thread per Python thread).
    """

    def run(name: str) -> list[Any]:
        return _json_rows(name, builders[name]()).collect()

    with session_conf(spark), ThreadPoolExecutor(max_workers=3) as pool:
        return [row for rows in pool.map(run, builders) for row in rows]


def _json_rows(name: str, df: DataFrame) -> DataFrame:
    body = F.to_json(F.struct(*[F.col(f"`{c}`") for c in df.columns]), {"ignoreNullFields": "false"})
    return df.select(F.lit(name).alias("frame"), body.alias("row"))


def _as_plan_requests(requests: DataFrame, action: str) -> DataFrame:
    """``requests`` with the ``plan_requests`` columns a cursor operation reads (absent ones null)."""
    schema = contract_schema(
        "plan_requests", ["action", "cursor_name", "n", "deleted_entries", "target_kind", "target"]
    )
    missing = [
        F.lit(None).cast(f.dataType).alias(f.name) for f in schema.fields if f.name not in requests.columns
    ]
    return requests.select("*", *missing).withColumn("action", F.lit(action))


@pytest.fixture(scope="module")
def out(spark: SparkSession) -> dict[str, dict[tuple[str, str], dict[str, Any]]]:
    """All frames of this module, computed in one Spark action: ``out[frame][(topic, id)] -> row``."""
    ledgers = spark.createDataFrame([r for s in STATES for r in s.ledger_rows()], LEDGERS)
    mls = spark.createDataFrame([s.ml_row() for s in STATES], ML)
    cursors = spark.createDataFrame(CURSORS_ROWS, CURSORS)
    backlog_cursors = spark.createDataFrame(BACKLOG_ROWS, CURSORS)
    pan = spark.createDataFrame([("c", t, i, s, n, b) for t, i, s, n, b in PAN_ROWS], PAN_REQ)
    skip = spark.createDataFrame([("c", t, cn, n, d, i) for t, cn, n, d, i in SKIP_ROWS], SKIP_REQ)
    poss = spark.createDataFrame([("c", t, i, p) for t, i, p in POSITION_ROWS], POS_REQ)
    ranges = spark.createDataFrame([("c", *r) for r in RANGE_ROWS], RANGE_REQ)
    clear = spark.createDataFrame([("c", *r) for r in CLEAR_ROWS], CLEAR_REQ)
    reset = spark.createDataFrame([("c", *r) for r in RESET_ROWS], RESET_REQ)
    builders: dict[str, Callable[[], DataFrame]] = {
        "prev": lambda: P.previous_position(poss, ledgers, mls),
        "clear_new": lambda: P.clear_backlog_plan(clear, cursors, ledgers, mls, NEW),
    }
    for tag, version in (("new", NEW), ("old", OLD)):
        builders[f"valid_{tag}"] = partial(P.is_valid_position, poss, ledgers, mls, version)
        builders[f"nv_{tag}"] = partial(P.next_valid_position, poss, ledgers, mls, version)
    for tag, version in (("new", NEW), ("3x", V3)):
        builders[f"eb_{tag}"] = partial(P.entries_between, ranges, ledgers, mls, version)
    for tag, version in (("new", NEW), ("210", V210), ("old", OLD)):
        builders[f"pan_{tag}"] = partial(P.position_after_n, pan, ledgers, mls, version)
    for tag, version in (("new", NEW), ("old", OLD)):
        builders[f"skip_{tag}"] = partial(P.skip_entries, skip, cursors, ledgers, mls, version)
        builders[f"prec_{tag}"] = partial(precise_backlog, backlog_cursors, ledgers, mls, version)
        builders[f"reset_{tag}"] = partial(P.reset_cursor_plan, reset, cursors, ledgers, mls, version)
    # the plans stage's grouped pass on the same states and requests (compared below)
    for tag, version in (("new", NEW), ("old", OLD)):
        for action, requests in (("skip", skip), ("clear_backlog", clear), ("reset", reset)):
            builders[f"ops_{action}_{tag}"] = partial(
                cursor_operation_plans, _as_plan_requests(requests, action), cursors, ledgers, mls, version
            )
    rows = collect_frames(spark, builders)
    result: dict[str, dict[tuple[str, str], dict[str, Any]]] = defaultdict(dict)
    for row in rows:
        data = json.loads(row["row"])
        ident = data.get("request_id") or data.get("cursor_name")
        key = (data["topic"], ident)
        assert key not in result[row["frame"]], f"duplicate output row {key} in {row['frame']}"
        result[row["frame"]][key] = data
    return result


def pos(value: dict[str, int] | None) -> Pos | None:
    return None if value is None else (value["ledger_id"], value["entry_id"])


def ranges_of(value: list[dict[str, Any]] | None) -> list[tuple[Pos | None, Pos | None]] | None:
    return None if value is None else [(pos(r["lower"]), pos(r["upper"])) for r in value]


# --- §1.12 scenario 1 -----------------------------------------------------------------------------


def test_position_after_n_scenario1_get_position_after_n(out: dict[str, Any]) -> None:
    """docs §1.12-1 ManagedLedgerTest.testGetPositionAfterN: "maxEntriesPerLedger=5, 10 entries -> L1
    (0..4, closed), L2 (0..4, closed), L3 open and empty; LAC = L2:4; cursor md = L1:3.
    getPositionAfterN(L1:0, 1, startExcluded) = L1:1; getPositionAfterN(L1:0, 4, startExcluded) = L1:4;
    getPositionAfterN(L1:4, 6, startExcluded) = L2:4 (loop ends at (L3,0), previous = L2:4 = LAC)."
    """
    for frame in ("pan_new", "pan_210"):
        rows = out[frame]
        assert pos(rows[("s1", "a")]["position"]) == (1, 1)
        assert pos(rows[("s1", "b")]["position"]) == (1, 4)
        assert pos(rows[("s1", "c")]["position"]) == (2, 4)
    # 2.x-old on the same state credits the empty open ledger with LAC.entry+1 phantom entries and has no
    # clamp: the result lies in the empty L3 (docs §1.9 2.x-old differences).
    assert pos(out["pan_old"][("s1", "c")]["position"]) == (3, 0)
    # in its own era (L2 still open) 2.x-old answers LAC as well
    assert pos(out["pan_old"][("s1_old", "c")]["position"]) == (2, 4)


def test_next_valid_position_scenario1_after_mark_delete(out: dict[str, Any]) -> None:
    """docs §1.12-1: "nextValid(md=L1:3) = L1:4"."""
    for frame in ("nv_new", "nv_old"):
        assert pos(out[frame][("s1", "nv-md")]["next_valid_position"]) == (1, 4)


def test_precise_backlog_scenario1_entries_in_storage(out: dict[str, Any]) -> None:
    """docs §1.12-1: "getNumberOfEntriesInStorage = 6 (L1:4 + 5 in L2)"; 2.x-old counted (md, LAC.next],
    one more because LAC.next is in LAC's ledger (§1.8)."""
    assert out["prec_new"][("s1", "md13")]["entries_in_storage"] == 6
    assert out["prec_new"][("s1", "md13")]["backlog_entries"] == 6
    assert out["prec_old"][("s1_old", "md13")]["entries_in_storage"] == 7
    assert out["prec_old"][("s1_old", "md13")]["backlog_entries"] == 6


# --- §1.12 scenario 2 -----------------------------------------------------------------------------


def test_skip_entries_scenario2_exclude_individually_deleted(out: dict[str, Any]) -> None:
    """docs §1.12-2 ManagedCursorTest.testSkipEntriesWithIndividualDeletedMessages: "entries p1..p5 =
    L1:0..L1:4, individually delete p2 (L1:1) and p4 (L1:3), skipEntries(3, Exclude):
    getNumIndividualDeletedEntriesToSkip(3) = 2 -> getPositionAfterN(md, 5, startExcluded) -> md = p5
    (L1:4), getNumberOfEntries() = 0. Read position: old copies assert p5.next (L1:5, lazily-created next
    ledger); newer copies assert (L1+1, 0) (next ledger created at roll-over)."
    """
    new = out["skip_new"][("s2a", "s2-exclude3")]
    assert pos(new["target_position"]) == (1, 4)
    assert pos(new["mark_delete_position"]) == (1, 4)
    assert pos(new["read_position"]) == (2, 0)
    assert ranges_of(new["individually_deleted"]) == []
    assert new["skipped_entries"] == 3 and new["error"] is None
    old = out["skip_old"][("s2a_old", "s2-exclude3")]
    assert pos(old["mark_delete_position"]) == (1, 4)
    assert pos(old["read_position"]) == (1, 5)
    # the old read rule on the new state also gives p5.next: 2.x-old accepts LAC.entry+1 in LAC's ledger
    assert pos(out["skip_old"][("s2a", "s2-exclude3")]["read_position"]) == (1, 5)


def test_skip_entries_scenario2_include_counts_acked_entries(out: dict[str, Any]) -> None:
    """docs §1.12-2: "Then 5 more entries p1..p5 = L2:0..L2:4, delete p2, p4, skipEntries(4, Include) ->
    md = p4 (L2:3), rp = p5 (L2:4), getNumberOfEntries() = 1."
    """
    for frame, topic in (("skip_new", "s2b"), ("skip_old", "s2b_old")):
        row = out[frame][(topic, "s2-include4")]
        assert pos(row["mark_delete_position"]) == (2, 3)
        assert pos(row["read_position"]) == (2, 4)
        assert ranges_of(row["individually_deleted"]) == []
        assert row["skipped_entries"] == 2  # L1:4 and L2:2; L2:1 and L2:3 were already acked


# --- §1.12 scenario 3 -----------------------------------------------------------------------------


def test_skip_entries_scenario3_skip_sequence(out: dict[str, Any]) -> None:
    """docs §1.12-3 ManagedCursorTest.testSkipEntries (maxEntriesPerLedger=2): "skip on an empty ledger leaves
    md/rp unchanged; with 2 entries, skip 1 -> 1 entry left; skip 1 more -> md = last entry; add 6 entries,
    skip 5 -> 1 left; skip 10 (more than available) -> 0 left, hasMoreEntries()=false, md = last entry
    written, rp = last.next (old copies) / (new current ledger, 0) (newer copies)."
    """
    new, old = out["skip_new"], out["skip_old"]
    a = new[("s3a", "s3-A")]
    assert (pos(a["mark_delete_position"]), pos(a["read_position"])) == ((1, -1), (1, 0))
    assert pos(old[("s3a", "s3-A")]["mark_delete_position"]) == (1, -1)
    expected_md = {"s3-B": (1, 0), "s3-C": (1, 1), "s3-D": (4, 0), "s3-E": (4, 1)}
    for request, md in expected_md.items():
        topic = "s3b" if request in ("s3-B", "s3-C") else "s3d"
        assert pos(new[(topic, request)]["mark_delete_position"]) == md, request
        assert pos(old[(f"{topic}_old", request)]["mark_delete_position"]) == md, request
    assert pos(new[("s3d", "s3-E")]["read_position"]) == (5, 0)
    assert pos(old[("s3d_old", "s3-E")]["read_position"]) == (4, 2)
    left = {"after_B": 1, "after_C": 0, "after_D": 1, "after_E": 0}
    for cursor, entries in left.items():
        topic = "s3b" if cursor in ("after_B", "after_C") else "s3d"
        assert out["prec_new"][(topic, cursor)]["backlog_entries"] == entries, cursor


def test_skip_entries_2x_old_phantom_target_beyond_lac_is_rejected(out: dict[str, Any]) -> None:
    """2.x-old getPositionAfterN credits the empty open ledger with phantom entries and does not clamp
    (§1.9), so on the newer roll-over state skip 10 targets L5:1 > LAC; asyncMarkDelete rejects it
    ("Invalid mark deleted position", §1.2) because md L4:0 has not finished its ledger."""
    row = out["skip_old"][("s3d", "s3-E")]
    assert pos(row["target_position"]) == (5, 1)
    assert row["error"] == "ManagedLedgerException: Invalid mark deleted position"
    assert pos(row["mark_delete_position"]) == (4, 0)
    assert row["skipped_entries"] == 0


# --- §1.12 scenario 4 -----------------------------------------------------------------------------


def test_clear_backlog_plan_scenario4(out: dict[str, Any]) -> None:
    """docs §1.12-4 ManagedCursorTest.testClearBacklog: "maxEntriesPerLedger=1; c1 opened, entry1, c2 opened,
    entry2, c3 opened, entry3 -> backlogs c1=3, c2=2, c3=1; after c1.clearBacklog() and c3.clearBacklog():
    c1=0, c2=2, c3=0 (and the same after reopening the ledger)."
    """
    for frame, topic in (("prec_new", "s4"), ("prec_old", "s4_old")):
        before = {c: out[frame][(topic, c)]["backlog_entries"] for c in ("c1", "c2", "c3")}
        assert before == {"c1": 3, "c2": 2, "c3": 1}
    c1 = out["clear_new"][("s4", "s4-c1")]
    assert pos(c1["mark_delete_position"]) == (3, 0)
    assert c1["cleared_entries"] == 3 and c1["error"] is None
    assert out["clear_new"][("s4", "s4-c3")]["cleared_entries"] == 1
    assert pos(c1["read_position"]) == (4, 0)
    # 2.x-old: the read position after clearing is nextValid(LAC) = LAC.next in the lazily rolled ledger
    assert pos(out["nv_old"][("s4_old", "nv-lac")]["next_valid_position"]) == (3, 1)
    assert out["prec_new"][("s4", "c1_cleared")]["backlog_entries"] == 0


# --- §1.12 scenario 5 -----------------------------------------------------------------------------


def test_precise_backlog_scenario5_delete_single_message_twice(out: dict[str, Any]) -> None:
    """docs §1.12-5 ManagedCursorTest.deleteSingleMessageTwice: "4 entries p1..p4 in one ledger; deleting p1
    -> backlog 3, md=p1, rp=p2; deleting p1 again is a no-op; deleting p2, p3, p4 in order -> backlog 2,1,0;
    final md=p4, rp=p4.next."
    """
    for frame in ("prec_new", "prec_old"):
        rows = out[frame]
        backlog = [rows[("s5", c)]["backlog_entries"] for c in ("p0", "p1", "p1_as_range", "p2", "p3", "p4")]
        assert backlog == [4, 3, 3, 2, 1, 0]
    for frame in ("nv_new", "nv_old"):
        assert pos(out[frame][("s5", "nv-p1")]["next_valid_position"]) == (1, 1)
        assert pos(out[frame][("s5", "nv-p4")]["next_valid_position"]) == (1, 4)


# --- §1.12 scenario 6 -----------------------------------------------------------------------------


def test_precise_backlog_scenario6_rate_limited_mark_delete(out: dict[str, Any]) -> None:
    """docs §1.12-6 ManagedCursorTest.testRateLimitMarkDelete: "throttleMarkDelete=1/s, 3 entries, markDelete
    p1, p2, p3 quickly -> in-memory backlog 0; after reopen only the first persisted -> backlog 2."
    """
    for frame in ("prec_new", "prec_old"):
        assert out[frame][("s6", "in_memory")]["backlog_entries"] == 0
        assert out[frame][("s6", "persisted")]["backlog_entries"] == 2


# --- edge rows: §1.3 previous position ------------------------------------------------------------


def test_previous_position_edges(out: dict[str, Any]) -> None:
    """§1.3: entry > 0 steps back in the ledger (even a deleted one); (L,0) and (L,-1) go to the last entry of
    the last earlier non-empty ledger; (L,-1) when nothing is earlier; (first, -1) when earlier ledgers are
    all empty; a topic without managed-ledger row gives null."""
    rows = out["prev"]
    expected = {
        ("e1", "q15_0"): (10, 2),
        ("e1", "q12_5"): (12, 4),
        ("e1", "q12_0"): (10, 2),
        ("e1", "q10_m1"): (10, -1),
        ("e1", "q20_0"): (15, 1),
        ("e1", "q10_0"): (10, -1),
        ("e2", "q20_0"): (15, 1),
        ("e4", "q5_0"): (5, -1),
        ("e5", "q5_0"): (3, -1),
        ("nope", "no-topic"): None,
    }
    assert {k: pos(rows[k]["previous_position"]) for k in expected} == expected


# --- edge rows: §1.4 / §1.5 -----------------------------------------------------------------------


def test_is_valid_position_edges_both_orders(out: dict[str, Any]) -> None:
    """§1.4 3.x/4.x vs 2.x-old: deleted ledgers, (L,-1), beyond LAC, a closed LAC ledger with an empty open
    ledger (2.x-old accepts LAC.entry+1 there, 3.x+ accepts only (open, 0)), no open ledger."""
    cases = {
        ("e1", "q12_0"): (False, False),
        ("e1", "q10_2"): (True, True),
        ("e1", "q10_3"): (False, False),
        ("e1", "q10_m1"): (False, False),
        ("e1", "q20_4"): (True, True),
        ("e1", "q20_5"): (False, False),
        ("e1", "q25_0"): (False, False),
        ("e2", "q15_2"): (False, True),
        ("e2", "q20_0"): (True, False),
        ("e2", "q15_1"): (True, True),
        ("e3", "q15_2"): (False, True),
        ("e3", "q15_1"): (True, True),
    }
    got = {k: (out["valid_new"][k]["is_valid"], out["valid_old"][k]["is_valid"]) for k in cases}
    assert got == cases
    assert out["valid_new"][("nope", "no-topic")]["is_valid"] is None


def test_next_valid_position_edges_both_families(out: dict[str, Any]) -> None:
    """§1.5: P.next, else entry 0 of the next ledger with a valid entry 0, else (open, 0) for an empty open
    ledger / LAC.next (3.x+); 2.x-old always LAC.next. Deleted ledgers are skipped."""
    cases = {
        ("e1", "q10_2"): ((15, 0), (15, 0)),
        ("e1", "q12_3"): ((15, 0), (15, 0)),
        ("e1", "q20_3"): ((20, 4), (20, 4)),
        ("e1", "q20_4"): ((20, 4), (20, 4)),
        ("e1", "q10_m1"): ((10, 0), (10, 0)),
        ("e2", "q15_1"): ((20, 0), (15, 2)),
        ("e2", "q20_0"): ((20, 0), (15, 2)),
        ("e3", "q15_1"): ((15, 2), (15, 2)),
        ("e4", "q5_m1"): ((5, 0), (5, 0)),
    }
    got = {
        k: (pos(out["nv_new"][k]["next_valid_position"]), pos(out["nv_old"][k]["next_valid_position"]))
        for k in cases
    }
    assert got == cases


# --- edge rows: §1.7 entries between --------------------------------------------------------------


def test_entries_between_edges_3x_vs_4x(out: dict[str, Any]) -> None:
    """§1.7: 3.x takes hi.entry literally and ignores a deleted lo ledger; 4.x clamps hi to a closed ledger's
    size and counts a whole ledger for lo = (L,-1) even when closed at lo; Guava rejects lo > hi and
    open(a, a) in every version."""
    cases = {"r1": (8, 8), "r2": (2, 2), "r3": (8, 8), "r4": (7, 3), "r5": (5, 4), "r8": (0, 0)}
    for request, (v3, v4) in cases.items():
        assert out["eb_3x"][("e1", request)]["entries"] == v3, request
        assert out["eb_new"][("e1", request)]["entries"] == v4, request
        assert out["eb_new"][("e1", request)]["error"] is None
    for frame in ("eb_3x", "eb_new"):
        assert out[frame][("e2", "r9")]["entries"] == 1
        assert out[frame][("e4", "r10")]["entries"] == 0
        bad = out[frame][("e1", "r6")]
        assert bad["entries"] is None and bad["error"].startswith("IllegalArgumentException: Invalid range")
        assert "(15:1..10:0]" in bad["error"]
        assert out[frame][("e1", "r7")]["entries"] is None


# --- edge rows: §1.9 getPositionAfterN ------------------------------------------------------------


def test_position_after_n_edges_across_generations(out: dict[str, Any]) -> None:
    """§1.9 / §12.1 on deleted ledgers, (L,-1) starts, empty open ledgers, no open ledger, no ledgers."""
    new, v210, old = out["pan_new"], out["pan_210"], out["pan_old"]
    same = {("e1", "p1"): (15, 0), ("e1", "p3"): (20, 3), ("e1", "p4"): (15, 1)}
    for key, expected in same.items():
        for rows in (new, v210, old):
            assert pos(rows[key]["position"]) == expected, key
    # start in a deleted ledger: counted as empty (3.x, 2.10.1), NPE in 2.x-old
    assert pos(new[("e1", "p2")]["position"]) == (15, 1)
    assert pos(v210[("e1", "p2")]["position"]) == (15, 1)
    assert old[("e1", "p2")]["position"] is None and old[("e1", "p2")]["error"].startswith(
        "NullPointerException"
    )
    # empty open ledger: overshoot lands on LAC with the clamp, in the phantom entries of 2.x-old without it
    assert pos(new[("e2", "p5")]["position"]) == (15, 1)
    assert pos(v210[("e2", "p5")]["position"]) == (15, 1)
    assert pos(old[("e2", "p5")]["position"]) == (20, 1)
    assert pos(new[("e2", "p6")]["position"]) == (15, 1)
    assert pos(old[("e2", "p6")]["position"]) == (20, 0)
    # no open ledger: 3.x re-walks the last ledger, 2.10.1 loops forever, 2.x-old throws
    assert pos(new[("e3", "p7")]["position"]) == (15, 1)
    assert pos(new[("e3", "p7b")]["position"]) == (15, 1)
    assert v210[("e3", "p7")]["position"] is None and "never returns" in v210[("e3", "p7")]["error"]
    assert old[("e3", "p7")]["error"].startswith("NullPointerException")
    # no ledgers at all: ledgers.lastKey() throws
    assert new[("e4", "p8")]["error"].startswith("NoSuchElementException")
    # n < 0: the loop never runs; an unknown bound is reported
    assert pos(new[("e1", "neg")]["position"]) == (10, 0)
    assert "unknown bound" in new[("e1", "badbound")]["error"]


# --- edge rows: §1.10 skipEntries -----------------------------------------------------------------


def test_skip_entries_extends_over_ranges_across_ledgers(out: dict[str, Any]) -> None:
    """§1.2 mark-delete extension across ledgers: md L10:0, acked (10:1, 10:2] and (15:-1, 15:0]; skipping 1
    lands on 10:1, nextValid is inside the first range, then nextValid(10:2) = 15:0 is inside the second."""
    for frame in ("skip_new", "skip_old"):
        row = out[frame][("e1", "x1-ex1")]
        assert pos(row["target_position"]) == (10, 1)
        assert pos(row["mark_delete_position"]) == (15, 0)
        assert pos(row["read_position"]) == (15, 1)
        assert ranges_of(row["individually_deleted"]) == []
        assert row["skipped_entries"] == 1
        two = out[frame][("e1", "x1-ex2")]  # Exclude: both acked ranges are crossed before the 2nd unacked
        assert pos(two["target_position"]) == (15, 1)
        assert two["skipped_entries"] == 2


def test_skip_entries_zero_leaves_the_cursor(out: dict[str, Any]) -> None:
    """§1.9 with n = 0 from md: target = md, setAcknowledgedPosition changes nothing (no extension)."""
    row = out["skip_new"][("e1", "x1-zero")]
    assert pos(row["mark_delete_position"]) == (10, 0)
    assert ranges_of(row["individually_deleted"]) == [((10, 1), (10, 2)), ((15, -1), (15, 0))]
    assert row["skipped_entries"] == 0


def test_skip_entries_empty_open_ledger_both_families(out: dict[str, Any]) -> None:
    """LAC in a closed ledger and an empty open ledger: 3.x+ clamps to LAC, rp = (open, 0); 2.x-old targets a
    phantom position, rejected unless md finished its ledger (then md moves into the empty ledger)."""
    new = out["skip_new"][("e2", "y1-in5")]
    assert pos(new["mark_delete_position"]) == (15, 1) and pos(new["read_position"]) == (20, 0)
    old = out["skip_old"][("e2", "y1-in5")]
    assert pos(old["target_position"]) == (20, 1)
    assert old["error"] == "ManagedLedgerException: Invalid mark deleted position"
    moved = out["skip_old"][("e2", "y2-in1")]
    assert pos(moved["mark_delete_position"]) == (20, 0) and moved["error"] is None
    assert pos(moved["read_position"]) == (15, 2)
    assert out["skip_new"][("e2", "missing-cursor")]["error"].startswith("cursor not found")


# --- edge rows: §1.8 precise backlog --------------------------------------------------------------


def test_precise_backlog_edges_both_families(out: dict[str, Any]) -> None:
    """§1.8: IDM subtracted; md in a deleted ledger; md == LAC; md > LAC (3.x+ guard -> 0, 2.x Guava throws);
    no open ledger; entries in storage (md, LAC] vs (md, LAC.next]."""
    new, old = out["prec_new"], out["prec_old"]
    assert (new[("e1", "b1")]["backlog_entries"], old[("e1", "b1")]["backlog_entries"]) == (7, 7)
    assert (new[("e1", "b2")]["backlog_entries"], old[("e1", "b2")]["backlog_entries"]) == (6, 6)
    assert (new[("e1", "b2")]["entries_in_storage"], old[("e1", "b2")]["entries_in_storage"]) == (6, 7)
    assert (new[("e2", "b3")]["backlog_entries"], old[("e2", "b3")]["backlog_entries"]) == (0, 0)
    assert (new[("e2", "b3")]["entries_in_storage"], old[("e2", "b3")]["entries_in_storage"]) == (0, 1)
    assert new[("e2", "b4")]["backlog_entries"] == 0
    assert old[("e2", "b4")]["backlog_entries"] is None
    assert "backlog: IllegalArgumentException: Invalid range" in old[("e2", "b4")]["error"]
    assert (new[("e3", "b5")]["backlog_entries"], old[("e3", "b5")]["backlog_entries"]) == (5, 5)


# --- edge rows: §1.11 clear / reset ---------------------------------------------------------------


def test_clear_backlog_plan_edges(out: dict[str, Any]) -> None:
    """clearBacklog = mark-delete at LAC; acked entries are not counted as cleared; a cursor already past
    LAC stays (MarkDeletingMarkedPosition is treated as success)."""
    row = out["clear_new"][("e1", "e1-x1")]
    assert pos(row["mark_delete_position"]) == (20, 3) and pos(row["read_position"]) == (20, 4)
    assert ranges_of(row["individually_deleted"]) == [] and row["cleared_entries"] == 6
    past = out["clear_new"][("e2", "e2-y3")]
    assert pos(past["mark_delete_position"]) == (20, -1) and past["cleared_entries"] == 0
    assert past["error"] is None


def test_reset_cursor_plan_edges(out: dict[str, Any]) -> None:
    """§1.11 resetCursor: earliest -> getFirstPosition(); latest -> nextValid(LAC) (3.x+) / LAC.next (2.x);
    invalid positions move to nextValid; md = getPreviousPosition(read); IDM cleared."""
    new, old = out["reset_new"], out["reset_old"]
    expected = {
        ("e1", "earliest"): ((10, -1), (10, -1)),
        ("e1", "latest"): ((20, 3), (20, 4)),
        ("e1", "deleted"): ((10, 2), (15, 0)),
        ("e1", "valid"): ((10, 2), (15, 0)),
        ("e1", "earliest-as-position"): ((10, -1), (10, -1)),
    }
    for key, (md, rp) in expected.items():
        for rows in (new, old):
            assert (pos(rows[key]["mark_delete_position"]), pos(rows[key]["read_position"])) == (md, rp), key
            assert rows[key]["individually_deleted"] == []
    assert pos(new[("e2", "latest")]["read_position"]) == (20, 0)
    assert pos(old[("e2", "latest")]["read_position"]) == (15, 2)
    assert pos(new[("e2", "latest")]["mark_delete_position"]) == (15, 1)
    assert "unknown target_kind" in new[("e2", "bogus")]["error"]


def test_position_after_n_2_10_deleted_start_ledger_unguarded_unread(spark: SparkSession) -> None:
    """docs §1.9, case ``fidelity/position_after_n_2x_deleted_start`` (the broker's own method answered it).

    Ledgers 3 (4 entries), 7 (6), 8 (2), open 12 (3 entries, LAC 12:2); start 5:1 lies in the deleted
    ledger 5, n = 3, startIncluded. 2.10.0-2.10.2 compute ``unread = total - entry = 0 - 1`` for the
    deleted ledger, so 4 entries remain to skip: 7:4, previous 7:3. apache/pulsar#17971 (tags v2.9.4,
    v2.10.3, v2.11.0 and later) guards ``unread`` with ``total > 0`` (0 unread, 3 to skip: 7:3, previous
    7:2), so the broker that answered 7:3 ran the 2.10.0-2.10.2 body (2.10.2 here).
    """
    ledgers = spark.createDataFrame(
        [("c", "f", 3, 4, 40), ("c", "f", 7, 6, 60), ("c", "f", 8, 2, 20), ("c", "f", 12, 0, 0)], LEDGERS
    )
    mls = spark.createDataFrame([("c", "f", 12, 3, 30, (12, 2), 150)], ML)
    requests = spark.createDataFrame([("c", "f", "r", (5, 1), 3, INCL)], PAN_REQ)
    got = {
        version: P.position_after_n(requests, ledgers, mls, pulsar_version=version)
        .select("position", "error")
        .collect()
        for version in ("2.10.2", "2.10.3", "2.11.0", "3.0.7", "4.1.3")
    }
    assert {v: [(tuple(r["position"]), r["error"]) for r in rows] for v, rows in got.items()} == {
        "2.10.2": [((7, 3), None)],
        "2.10.3": [((7, 2), None)],
        "2.11.0": [((7, 2), None)],
        "3.0.7": [((7, 2), None)],
        "4.1.3": [((7, 2), None)],
    }


def test_entries_between_same_deleted_ledger_counts_zero_from_24852(spark: SparkSession) -> None:
    """docs §1.7, apache/pulsar#24852: with both ends in one ledger that is no longer in the ledger map,
    ``getNumberOfEntries`` counts 0 from 3.0.15, 4.0.8 and 4.1.2 on (the 4.0.9+ / 4.1.3+ count has the
    same rule); earlier patches take ``hi.E - lo.E - 1 + bounds`` literally.

    Ledgers 3 (4 entries), 7 (6), open 12 (3 entries, LAC 12:2); ledger 5 was deleted. ``(5:2, 5:3]`` is
    the PR's own example (mark-delete and read position inside a deleted ledger: 1 before, 0 after);
    ``(7:1, 7:4]`` (a listed ledger, 3) and ``(12:0, 12:2]`` (the open ledger, 2) do not change.
    """
    ledgers = spark.createDataFrame(
        [("c", "d", 3, 4, 40), ("c", "d", 7, 6, 60), ("c", "d", 12, 0, 0)], LEDGERS
    )
    mls = spark.createDataFrame([("c", "d", 12, 3, 30, (12, 2), 130)], ML)
    requests = spark.createDataFrame(
        [
            ("c", "d", "deleted", (5, 2), False, (5, 3), True),
            ("c", "d", "listed", (7, 1), False, (7, 4), True),
            ("c", "d", "open", (12, 0), False, (12, 2), True),
        ],
        RANGE_REQ,
    )
    versions = ("3.0.14", "3.0.15", "4.0.7", "4.0.8", "4.0.9", "4.1.1", "4.1.2", "4.1.3")
    frames = [
        P.entries_between(requests, ledgers, mls, pulsar_version=v).select(
            F.lit(v).alias("version"), "request_id", "entries", "error"
        )
        for v in versions
    ]
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    got = {(r["version"], r["request_id"]): (r["entries"], r["error"]) for r in union.collect()}
    deleted = {
        "3.0.14": 1,
        "3.0.15": 0,
        "4.0.7": 1,
        "4.0.8": 0,
        "4.0.9": 0,
        "4.1.1": 1,
        "4.1.2": 0,
        "4.1.3": 0,
    }
    expected = {}
    for v in versions:
        expected[(v, "deleted")] = (deleted[v], None)
        expected[(v, "listed")] = (3, None)
        expected[(v, "open")] = (2, None)
    assert got == expected


def test_next_valid_position_open_ledger_fallback_from_22034(spark: SparkSession) -> None:
    """docs §1.5: past the last ledger, ``getNextValidPosition`` answers ``(open, 0)`` for an empty open
    ledger only from apache/pulsar#22034 (+ #22552) on - release tags v3.0.5, v3.2.3, v3.3.0 and 4.x;
    v2.10.6, v2.11.4, v3.0.2-v3.0.4 and v3.2.0-v3.2.2 (the #21248 order already) still answer LAC.next.

    Ledgers 10 (3 entries), 15 (2), open 20 with no entries, LAC 15:1: ``nextValid(20:0)`` - 20:1 is not
    valid and no later ledger exists (``nextValid(15:1)`` is 20:0 in every #21248 version: the open ledger's
    entry 0 is valid there).
    """
    ledgers = spark.createDataFrame(
        [("c", "f", 10, 3, 30), ("c", "f", 15, 2, 20), ("c", "f", 20, 0, 0)], LEDGERS
    )
    mls = spark.createDataFrame([("c", "f", 20, 0, 0, (15, 1), 50)], ML)
    requests = spark.createDataFrame([("c", "f", "q", (20, 0))], POS_REQ)
    expected = {
        "2.10.6": (15, 2),
        "2.11.4": (15, 2),
        "3.0.4": (15, 2),
        "3.0.5": (20, 0),
        "3.1.3": (15, 2),
        "3.2.2": (15, 2),
        "3.2.3": (20, 0),
        "3.3.0": (20, 0),
        "4.1.3": (20, 0),
    }
    frames = [
        P.next_valid_position(requests, ledgers, mls, pulsar_version=v).select(
            F.lit(v).alias("version"), "next_valid_position"
        )
        for v in expected
    ]
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    got = {r["version"]: pos(r["next_valid_position"]) for r in union.collect()}
    assert got == expected


@pytest.mark.parametrize(
    ("frame", "action"),
    [
        ("skip_new", "skip"),
        ("skip_old", "skip"),
        ("clear_new", "clear_backlog"),
        ("reset_new", "reset"),
        ("reset_old", "reset"),
    ],
)
def test_cursor_operation_plans_give_the_golden_rows(out: dict[str, Any], frame: str, action: str) -> None:
    """The plans stage's grouped pass (``plans.cursor_operation_plans``) gives, on every state and request of
    this module's skip / clear_backlog / reset scenarios, the rows the set-based transforms give (which the
    tests above check against Pulsar's scenarios)."""
    want, got = out[frame], out[f"ops_{action}_{frame.rsplit('_', 1)[1]}"]
    assert set(got) == set(want)
    counted = {"skip": "skipped_entries", "clear_backlog": "cleared_entries"}.get(action)
    for key, expected in want.items():
        row = got[key]
        for column in ("mark_delete_position", "read_position", "individually_deleted", "error"):
            assert row[column] == expected[column], (key, column)
        if action == "skip":
            assert row["target_position"] == expected["target_position"], key
        if counted is not None:
            assert row["skipped_entries"] == expected[counted], key
