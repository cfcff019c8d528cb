"""Golden tests for pulsar_model.backlog (docs §2.6 scenarios 1-4) and the edge rows of §2.2-§2.5.

All frames of this module are computed once by a module fixture (fetched as JSON rows); each test reads
its rows.
Version families: v1 = 2.8.0 (consumedLedgerSize without the full-ledger shortcut), v2 = 2.10.6 (``==``
shortcut, deleted-ledger estimate = totalSize), v3 = 4.1.3 (``<=`` shortcut, master size-since-mark-delete);
"pre" = 3.0.7 for the size-since-mark-delete. Every version keeps the durable cursors in the same heap
(docs §3.9).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pulsar_model.backlog import (
    consumed_ledger_size,
    estimate_backlog_from_position,
    estimated_backlog_size,
    estimated_size_since_mark_delete,
)
from tests.contract_frames import CURSOR_STATE, LEDGER_STATE, MANAGED_LEDGER_STATE, contract_schema
from tests.spark_conf import session_conf

LEDGERS = contract_schema("ledgers", LEDGER_STATE)
ML = contract_schema("managed_ledgers", MANAGED_LEDGER_STATE)
CURSORS = contract_schema("cursors", CURSOR_STATE)
POSITIONS = contract_schema("plan_requests", ["cluster", "topic", "request_id", ("position", "position")])
V1, V2, V3, PRE = "2.5.1", "2.10.6", "4.1.3", "3.0.7"
V211, V2111 = "2.11.0", "2.11.1"  # consumedLedgerSize "==" in 2.11.0, "<=" from 2.11.1 (#20069, docs §2.2)
Pos = tuple[int, int]
LedgerSpec = tuple[int, int, int]  # (ledger id, entries, bytes)


def state(
    topic: str, closed: list[LedgerSpec], current: int | None, cle: int, cls: int, lac: Pos
) -> tuple[list[tuple[Any, ...]], tuple[Any, ...]]:
    """Ledger rows (the open ledger listed 0/0) and the managed-ledger row of one topic."""
    rows: list[tuple[Any, ...]] = [("c", topic, lid, n, size) for lid, n, size in closed]
    if current is not None:
        rows.append(("c", topic, current, 0, 0))
    total = sum(size for _, _, size in closed) + cls
    return rows, ("c", topic, current, cle, cls, lac, total)


def cursor(
    topic: str,
    name: str,
    md: Pos | None,
    order: int = 1,
    durable: bool = True,
    idm: list[tuple[Pos, Pos]] | None = None,
) -> tuple[Any, ...]:
    return ("c", topic, name, order, durable, md, idm or [])


# --- managed-ledger states ------------------------------------------------------------------------
STATES = {}
# §2.6-1: 5 entries of 1024 bytes in the open ledger L, one cursor (one topic per md).
for suffix in ("m1", "1", "4"):
    STATES[f"b1_{suffix}"] = state(f"b1_{suffix}", [], 1, 5, 5120, (1, 4))
# §2.6-2: L1 closed (5 entries, 5000 B), L2 open (3 entries, 3000 B), totalSize 8000.
for suffix in ("11", "14", "20"):
    STATES[f"b2_{suffix}"] = state(f"b2_{suffix}", [(1, 5, 5000)], 2, 3, 3000, (2, 2))
# §2.6-3: a ledger of 1001 bytes and 3 entries.
for suffix in ("last", "first"):
    STATES[f"b3_{suffix}"] = state(f"b3_{suffix}", [(1, 3, 1001)], 2, 0, 0, (1, 2))
# §2.6-4 / §3.8-6: one open ledger, 20 entries x 1000 B.
for suffix in ("both", "one", "after"):
    STATES[f"b4_{suffix}"] = state(f"b4_{suffix}", [], 1, 20, 20000, (1, 19))
# edges: deleted ledger 12, open ledger 20 with 4 entries (400 B)
STATES["e1"] = state("e1", [(10, 3, 300), (15, 2, 200)], 20, 4, 400, (20, 3))
# LAC in a closed ledger, empty open ledger
STATES["e2"] = state("e2", [(10, 3, 300), (15, 2, 200)], 20, 0, 0, (15, 1))
# no open ledger
STATES["e3"] = state("e3", [(10, 3, 300), (15, 2, 200)], None, 0, 0, (15, 1))
# no ledgers at all
STATES["e4"] = state("e4", [], None, 0, 0, (5, -1))
# an empty closed ledger before the open one
STATES["e5"] = state("e5", [(3, 0, 0), (4, 0, 0)], 5, 2, 200, (5, 1))
# PR #25089 example: 5 messages (500 B), 3 of them individually acked
STATES["a1"] = state("a1", [], 1, 5, 500, (1, 4))
# a topic without any cursor
STATES["n1"] = state("n1", [(1, 2, 200)], 2, 0, 0, (1, 1))

CURSOR_ROWS = [
    cursor("b1_m1", "sub", (1, -1)),
    cursor("b1_1", "sub", (1, 1)),
    cursor("b1_4", "sub", (1, 4)),
    cursor("b2_11", "sub", (1, 1)),
    cursor("b2_14", "sub", (1, 4)),
    cursor("b2_20", "sub", (2, 0)),
    cursor("b3_last", "sub", (1, 2)),
    cursor("b3_first", "sub", (1, 0)),
    cursor("b4_both", "s1", (1, -1), order=1),
    cursor("b4_both", "s2", (1, -1), order=2),
    cursor("b4_one", "s1", (1, 10), order=1),
    cursor("b4_one", "s2", (1, -1), order=2),
    cursor("b4_after", "s1", (1, 10), order=1),
    cursor("b4_after", "s2", (1, 10), order=2),
    # e1: the slowest durable cursor points at the deleted ledger 12; a reader is slower but non-durable
    cursor("e1", "a", (12, 3), order=1),
    cursor("e1", "b", (15, 0), order=2),
    cursor("e1", "reader", (10, 0), order=3, durable=False),
    cursor("e1", "acked", (10, 0), order=4, durable=False, idm=[((10, 1), (10, 2))]),
    # e2: two durable cursors tie; the one added first (order 1) is reported
    cursor("e2", "x", (15, 1), order=2),
    cursor("e2", "y", (15, 1), order=1),
    # e3: only a reader
    cursor("e3", "reader", (10, 0), durable=False),
    # e5: md at entry 0 of an empty closed ledger -> the open ledger's size/entries are used (§2.3)
    cursor("e5", "odd", (4, 0)),
    cursor("a1", "sub", (1, -1), idm=[((1, 0), (1, 3))]),
]

POSITION_ROWS = [
    ("b2_11", "p11", (1, 1)),
    ("b2_11", "p14", (1, 4)),
    ("b2_11", "p20", (2, 0)),
    ("e1", "deleted", (12, 3)),
    ("e1", "open", (20, 1)),
    ("e1", "null", None),
    ("e1", "last_of_10", (10, 2)),
    ("b3_last", "past_end", (1, 5)),
    ("e3", "no_open", (15, 0)),
    ("e4", "no_ledgers", (5, -1)),
    ("zz", "no_topic", (1, 1)),
]


def _json_rows(name: str, df: DataFrame) -> DataFrame:
    body = F.to_json(F.struct(*[F.col(f"`{c}`") for c in df.columns]), {"ignoreNullFields": "false"})
    return df.select(F.lit(name).alias("frame"), body.alias("row"))


@pytest.fixture(scope="module")
def out(spark: SparkSession) -> dict[str, dict[tuple[str, str], dict[str, Any]]]:
    """All frames, computed once: ``out[frame][(topic, cursor_name | request_id | "")] -> row``."""
    ledgers = spark.createDataFrame([r for rows, _ in STATES.values() for r in rows], LEDGERS)
    mls = spark.createDataFrame([ml for _, ml in STATES.values()], ML)
    cursors = spark.createDataFrame(CURSOR_ROWS, CURSORS)
    positions = spark.createDataFrame([("c", *r) for r in POSITION_ROWS], POSITIONS)
    consumed = spark.createDataFrame(
        [("c", "consumed", f"{s}/{n}/{e}", s, n, e) for s, n, e in CONSUMED_CASES],
        contract_schema(
            "plan_requests",
            [
                "cluster",
                "topic",
                "request_id",
                ("size", "bigint"),
                ("entries", "bigint"),
                ("entry", "bigint"),
            ],
        ),
    )
    builders: dict[str, Callable[[], DataFrame]] = {}
    for tag, version in (("v1", V1), ("v2", V2), ("v3", V3)):
        builders[f"est_{tag}"] = partial(estimated_backlog_size, mls, ledgers, cursors, version)
    for tag, version in (("v2", V2), ("v3", V3), ("211", V211), ("2111", V2111)):
        builders[f"efp_{tag}"] = partial(estimate_backlog_from_position, positions, ledgers, mls, version)
    for tag, version in (("master", V3), ("pre", PRE)):
        builders[f"since_{tag}"] = partial(estimated_size_since_mark_delete, cursors, ledgers, mls, version)
    builders["consumed"] = lambda: consumed.select(
        "topic",
        "request_id",
        *[
            consumed_ledger_size(F.col("size"), F.col("entries"), F.col("entry"), g).alias(f"g{g}")
            for g in (1, 2, 3)
        ],
    )

    def run(name: str) -> list[Any]:
        return _json_rows(name, builders[name]()).collect()

    with session_conf(spark), ThreadPoolExecutor(max_workers=3) as pool:  # planning dominates on test data
        rows = [row for part in pool.map(run, builders) for row in part]
    result: dict[str, dict[tuple[str, str], dict[str, Any]]] = defaultdict(dict)
    for row in rows:
        data = json.loads(row["row"])
        key = (data["topic"], data.get("request_id") or data.get("cursor_name") or "")
        assert key not in result[row["frame"]], f"duplicate output row {key} in {row['frame']}"
        result[row["frame"]][key] = data
    return result


CONSUMED_CASES = [
    (1001, 3, 2),
    (1001, 3, 0),
    (1001, 3, -1),
    (1001, 3, 5),
    (0, 0, 3),
    (-7, 2, 0),
    (5120, 5, 1),
]


def est(out: dict[str, Any], tag: str, topic: str) -> Any:
    return out[f"est_{tag}"][(topic, "")]["estimated_backlog_size_bytes"]


# --- §2.2 consumedLedgerSize ----------------------------------------------------------------------


def test_consumed_ledger_size_three_generations(out: dict[str, Any]) -> None:
    """docs §2.2: "size 1001, entries 3, md = L:2 -> v1: 3*333 = 999 consumed (2 bytes of phantom backlog);
    v2/v3: 1001 consumed. md = L:0 -> 333 in every version"; entryId beyond the ledger: v3 ``<=`` shortcut
    only; Java long division truncates toward zero (-7 / 2 = -3)."""
    rows = out["consumed"]
    got = {k[1]: (v["g1"], v["g2"], v["g3"]) for k, v in rows.items()}
    assert got == {
        "1001/3/2": (999, 1001, 1001),
        "1001/3/0": (333, 333, 333),
        "1001/3/-1": (0, 0, 0),
        "1001/3/5": (1998, 1998, 1001),
        "0/0/3": (0, 0, 0),
        "-7/2/0": (-3, -3, -3),
        "5120/5/1": (2048, 2048, 2048),
    }


# --- §2.6 scenarios -------------------------------------------------------------------------------


def test_estimated_backlog_size_scenario1_single_open_ledger(out: dict[str, Any]) -> None:
    """docs §2.6-1 ManagedLedgerTest.testEstimatedBacklogSize: "5 entries of 1024 bytes each in the open
    ledger L, one cursor. md = (L,-1) -> 5120; md = L:1 -> 3072 (2 entries x 1024 consumed); md = L:4
    (last) -> 0."
    """
    for tag in ("v1", "v2", "v3"):
        assert [est(out, tag, t) for t in ("b1_m1", "b1_1", "b1_4")] == [5120, 3072, 0], tag
    row = out["est_v3"][("b1_1", "")]
    assert row["slowest_cursor_name"] == "sub"
    assert row["slowest_mark_delete_position"] == {"ledger_id": 1, "entry_id": 1}


def test_estimated_backlog_size_scenario2_closed_and_open_ledger(out: dict[str, Any]) -> None:
    """docs §2.6-2 (computed): "ledgers L1 (closed, 5 entries, 5000 B), L2 (open, 3 entries, 3000 B),
    totalSize 8000; slowest md = L1:1 -> 8000 - 0 - 2x1000 = 6000; md = L1:4 -> 3000 (v1: 8000 - 5x1000 = 3000
    too); md = L2:0 -> 8000 - 5000 - 1000 = 2000."
    """
    for tag in ("v1", "v2", "v3"):
        assert [est(out, tag, t) for t in ("b2_11", "b2_14", "b2_20")] == [6000, 3000, 2000], tag


def test_estimated_backlog_size_scenario3_integer_average_remainder(out: dict[str, Any]) -> None:
    """docs §2.6-3 (computed): "ledger with size 1001 and 3 entries, md at its last entry -> v1 leaves 2
    bytes, v2/v3 leave 0"; md = L:0 consumes 333 in every version."""
    assert [est(out, tag, "b3_last") for tag in ("v1", "v2", "v3")] == [2, 0, 0]
    assert [est(out, tag, "b3_first") for tag in ("v1", "v2", "v3")] == [668, 668, 668]


def test_estimated_backlog_size_scenario4_quota_example(out: dict[str, Any]) -> None:
    """docs §2.6-4 referencing the §3.8-6 computed example: "one open ledger, 20 entries x 1000 B (totalSize
    20000), subs s1,s2 at (L,-1) ... s1.md = L:10; backlog still 20000 (s2); ... s2.md = L:10; backlog =
    20000 - 11x1000 = 9000". The two subs tie at (L,-1): the root of the cursor heap built in export order
    (s1) is reported; which one the broker's heap holds is not in the export, flagged by
    ``slowest_cursor_tie`` in every version (docs §3.9)."""
    for tag in ("v1", "v2", "v3"):
        assert [est(out, tag, t) for t in ("b4_both", "b4_one", "b4_after")] == [20000, 20000, 9000], tag
    assert out["est_v3"][("b4_both", "")]["slowest_cursor_name"] == "s1"
    assert out["est_v3"][("b4_both", "")]["slowest_cursor_tie"] is True
    assert out["est_v2"][("b4_both", "")]["slowest_cursor_name"] == "s1"
    assert out["est_v2"][("b4_both", "")]["slowest_cursor_tie"] is True
    assert out["est_v2"][("b4_one", "")]["slowest_cursor_name"] == "s2"
    assert out["est_v2"][("b4_one", "")]["slowest_cursor_tie"] is False


# --- §2.3 edges -----------------------------------------------------------------------------------


def test_estimated_backlog_size_edges(out: dict[str, Any]) -> None:
    """§2.3: md in a deleted ledger stops at "totalSize - sizes before it"; readers never count; ties by
    cursor order; no durable cursor -> 0; a ledger listing 0 entries uses the open ledger's size/entries."""
    for tag in ("v1", "v2", "v3"):
        assert est(out, tag, "e1") == 600, tag  # 900 - 300, ledger 12 is gone
        assert out[f"est_{tag}"][("e1", "")]["slowest_cursor_name"] == "a"
        assert est(out, tag, "e2") == 0  # md = LAC = last entry of ledger 15
        assert out[f"est_{tag}"][("e2", "")]["slowest_cursor_name"] == "y"
        assert (est(out, tag, "e3"), out[f"est_{tag}"][("e3", "")]["slowest_cursor_name"]) == (0, None)
        assert (est(out, tag, "n1"), out[f"est_{tag}"][("n1", "")]["slowest_cursor_name"]) == (0, None)
        assert est(out, tag, "e5") == 100  # 200 - consumed(200 B, 2 entries, entry 0) of the open ledger
    assert out["est_v2"][("e2", "")]["slowest_cursor_tie"] is True
    assert out["est_v3"][("e2", "")]["slowest_cursor_tie"] is True
    assert est(out, "v3", "e4") == 0


# --- §2.4 per-position estimate -------------------------------------------------------------------


def test_estimate_backlog_from_position(out: dict[str, Any]) -> None:
    """§2.4 (+ §12.4): bytes from the position's ledger on minus consumedLedgerSize; the open ledger uses
    currentLedgerSize/Entries; a deleted ledger gives "size after" (3.x) or totalSize (2.9/2.10); null -> 0;
    no managed-ledger row -> null."""
    v2, v3 = out["efp_v2"], out["efp_v3"]

    def got(rows: dict[tuple[str, str], dict[str, Any]], topic: str, rid: str) -> Any:
        return rows[(topic, rid)]["estimated_backlog_size_bytes"]

    for rows in (v2, v3):
        assert [got(rows, "b2_11", r) for r in ("p11", "p14", "p20")] == [6000, 3000, 2000]
        assert got(rows, "e1", "open") == 200  # 900 - 500 before ledger 20 - 2 x 100 consumed
        assert got(rows, "e1", "null") == 0
        assert got(rows, "e1", "last_of_10") == 600
        assert got(rows, "e3", "no_open") == 100
        assert got(rows, "e4", "no_ledgers") == 0
        assert got(rows, "zz", "no_topic") is None
    assert got(v3, "e1", "deleted") == 600
    assert got(v2, "e1", "deleted") == 900


def test_estimate_backlog_from_position_2_11_0_keeps_the_equal_shortcut(out: dict[str, Any]) -> None:
    """§2.2: "2: entries == e + 1 ... 2.5.2 - 2.11.0"; a position past the last entry of a closed ledger
    (1001 B, 3 entries, position 1:5) consumes 6 x 333 = 1998 B with "==" (2.10, 2.11.0: 1001 - 1998) and
    the whole ledger with "<=" (2.11.1 with #20069, 3.x: 0)."""

    def got(tag: str) -> Any:
        return out[f"efp_{tag}"][("b3_last", "past_end")]["estimated_backlog_size_bytes"]

    assert (got("v2"), got("211"), got("2111"), got("v3")) == (-997, -997, 0, 0)


# --- §2.5 getEstimatedSizeSinceMarkDeletePosition -------------------------------------------------


def test_estimated_size_since_mark_delete_master_subtracts_acks(out: dict[str, Any]) -> None:
    """§2.5 master (PR #25089 "5 messages (500 bytes total), individual ack of 3 messages: before fix 500,
    after fix 200"): total - d x (total div n); older versions ignore the acked ranges."""
    master, pre = out["since_master"], out["since_pre"]
    col = "estimated_size_since_mark_delete_bytes"
    assert (master[("a1", "sub")][col], pre[("a1", "sub")][col]) == (200, 500)
    # e1 "acked": md 10:0, (10:1, 10:2] acked; total 800, n = 8, d = 1 -> 800 - 100
    assert (master[("e1", "acked")][col], pre[("e1", "acked")][col]) == (700, 800)
    assert (master[("e1", "b")][col], pre[("e1", "b")][col]) == (500, 500)
    # the input columns are carried through
    assert master[("e1", "acked")]["is_durable"] is False
