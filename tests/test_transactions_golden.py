"""Golden tests for pulsar_model.transactions (docs §8.4, §8.5, golden scenarios §8.7).

Topics (one scenario each, all in one DataFrame):

* ``open``/``committed``/``aborted``: docs §8.7 "Entries in one ledger: 1:0 normal, 1:1 T1, 1:2 normal,
  1:3 T1, 1:4 normal" with T1 open, committed (marker 21 at 1:5) or aborted (marker 22 at 1:5);
* ``cross``: ledgers 1 (3 entries), 2 (empty), 3 (open); T2 opens at 3:0 -> previous(3:0) = 1:2 (§1.3);
* ``trimmed``: ledger 1 deleted, T3 opens at 2:0 of the first ledger -> previous = (2,-1) (§1.3);
* ``two``: T1 at 1:1, T2 at 1:2, T1 committed at 1:4 -> T2 is now the oldest open: previous(1:2) = 1:1;
* ``deleted``: ledgers 1 (2 entries), 2 deleted (absent), 4 open; T4 opens at 4:0 -> previous = 1:1;
* ``commit_empty``: ledgers 1 (3 entries), 2 (empty), 3 open; T1 at 1:1, T2 at 3:0, T1 committed at 3:1 ->
  T2 is the oldest open: previous(3:0) = 1:2.

``cross``, ``deleted`` and ``commit_empty`` are where the broker lines differ (docs §8.4): in 2.x, 3.0.0-3.0.2
and 3.1.0-3.1.2 the buffer writes ``(L, E-1)`` = ``(3,-1)`` / ``(4,-1)`` / ``(3,-1)``; 3.2.0 does so after a
transaction's first message (``cross``, ``deleted``) but asks ``getPreviousPosition`` after a commit
(``commit_empty``: ``1:2``).
"""

from __future__ import annotations

from typing import Any

import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pulsar_model.transactions import (
    long_open_transactions,
    max_read_positions,
    max_read_uses_previous_position,
    transaction_states,
    transaction_visibility,
)
from tests.contract_frames import LEDGER_STATE, MANAGED_LEDGER_STATE, contract_frame, contract_schema

ENTRIES = contract_schema(
    "entries",
    [
        "cluster",
        "topic",
        "position",
        "txnid_most_bits",
        "txnid_least_bits",
        "marker_type",
        "publish_time_ms",
        "message_count",
    ],
)
LEDGERS = contract_schema("ledgers", LEDGER_STATE)
ML = contract_schema("managed_ledgers", MANAGED_LEDGER_STATE)
T1, T2, T3, T4 = (0, 1), (0, 2), (1, 7), (2, 3)
N = None  # non-transactional


def _t(name: str) -> str:
    return f"persistent://t/ns/{name}"


def _entries() -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []

    def add(
        topic: str, pos: tuple[int, int], txn: tuple[int, int] | None, marker: int | None, count: int = 1
    ):
        most, least = txn if txn else (None, None)
        rows.append(("c", _t(topic), pos, most, least, marker, 1000 * (pos[0] * 10 + pos[1]), count))

    for topic in ("open", "committed", "aborted"):
        add(topic, (1, 0), N, None)
        add(topic, (1, 1), T1, None, 3)  # a batch of 3 messages
        add(topic, (1, 2), N, None)
        add(topic, (1, 3), T1, None)
        add(topic, (1, 4), N, None)
    add("committed", (1, 5), T1, 21)
    add("aborted", (1, 5), T1, 22)
    for e in range(3):
        add("cross", (1, e), N, None)
    add("cross", (3, 0), T2, None)
    add("cross", (3, 1), N, None)
    add("trimmed", (2, 0), T3, None)
    add("trimmed", (2, 1), N, None)
    add("two", (1, 0), N, None)
    add("two", (1, 1), T1, None)
    add("two", (1, 2), T2, None)
    add("two", (1, 3), T1, None)
    add("two", (1, 4), T1, 21)
    add("two", (1, 5), N, 12)  # a replicated-subscription snapshot marker
    add("deleted", (1, 0), N, None)
    add("deleted", (1, 1), N, None)
    add("deleted", (4, 0), T4, None)
    add("deleted", (4, 1), N, None)
    add("commit_empty", (1, 0), N, None)
    add("commit_empty", (1, 1), T1, None)
    add("commit_empty", (1, 2), N, None)
    add("commit_empty", (3, 0), T2, None)
    add("commit_empty", (3, 1), T1, 21)
    add("commit_empty", (3, 2), N, None)
    return rows


def _ledgers() -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    ledgers: list[tuple[Any, ...]] = []
    mls: list[tuple[Any, ...]] = []
    for topic, lac in (("open", 4), ("committed", 5), ("aborted", 5), ("two", 5)):
        ledgers.append(("c", _t(topic), 1, 0, 0))  # the open ledger is listed with 0 / 0
        mls.append(("c", _t(topic), 1, lac + 1, 100 * (lac + 1), (1, lac), 100 * (lac + 1)))
    ledgers += [("c", _t("cross"), 1, 3, 300), ("c", _t("cross"), 2, 0, 0), ("c", _t("cross"), 3, 0, 0)]
    mls.append(("c", _t("cross"), 3, 2, 200, (3, 1), 500))
    ledgers.append(("c", _t("trimmed"), 2, 0, 0))
    mls.append(("c", _t("trimmed"), 2, 2, 200, (2, 1), 200))
    ledgers += [("c", _t("deleted"), 1, 2, 200), ("c", _t("deleted"), 4, 0, 0)]  # ledger 2 deleted
    mls.append(("c", _t("deleted"), 4, 2, 200, (4, 1), 400))
    ledgers += [("c", _t("commit_empty"), 1, 3, 300), ("c", _t("commit_empty"), 2, 0, 0)]
    ledgers.append(("c", _t("commit_empty"), 3, 0, 0))
    mls.append(("c", _t("commit_empty"), 3, 3, 300, (3, 2), 600))
    return ledgers, mls


@pytest.fixture(scope="module")
def frames(spark: SparkSession) -> tuple[DataFrame, DataFrame, DataFrame]:
    ledgers, mls = _ledgers()
    return (
        spark.createDataFrame(_entries(), ENTRIES),
        spark.createDataFrame(ledgers, LEDGERS),
        spark.createDataFrame(mls, ML),
    )


HELD, DELIVERED, MARKER, ABORTED, OTHER = (
    "held_back",
    "delivered",
    "skipped_txn_marker",
    "skipped_aborted",
    "skipped_marker",
)

EXPECTED_DISPATCH = {
    # docs §8.7: "while T1 open: maxReadPosition = previous(1:1) = 1:0 -> only 1:0 is dispatchable."
    "open": {(1, 0): DELIVERED, (1, 1): HELD, (1, 2): HELD, (1, 3): HELD, (1, 4): HELD},
    # "T1 committed: commit marker at 1:5 ... maxReadPosition = LAC = 1:5; consumers receive 1:1..1:4;
    #  1:5 is auto-acked."
    "committed": {(1, e): DELIVERED for e in range(5)} | {(1, 5): MARKER},
    # "T1 aborted: ... 1:1 and 1:3 are auto-acked and dropped; consumers receive 1:2 and 1:4."
    "aborted": {(1, 0): DELIVERED, (1, 1): ABORTED, (1, 2): DELIVERED, (1, 3): ABORTED, (1, 4): DELIVERED}
    | {(1, 5): MARKER},
    "cross": {(1, 0): DELIVERED, (1, 1): DELIVERED, (1, 2): DELIVERED, (3, 0): HELD, (3, 1): HELD},
    "trimmed": {(2, 0): HELD, (2, 1): HELD},
    "two": {(1, 0): DELIVERED, (1, 1): DELIVERED, (1, 2): HELD, (1, 3): HELD, (1, 4): HELD, (1, 5): HELD},
    "deleted": {(1, 0): DELIVERED, (1, 1): DELIVERED, (4, 0): HELD, (4, 1): HELD},
    "commit_empty": {(1, 0): DELIVERED, (1, 1): DELIVERED, (1, 2): DELIVERED}
    | {(3, 0): HELD, (3, 1): HELD, (3, 2): HELD},
}
EXPECTED_MAX_READ = {
    "open": (1, 0),
    "committed": (1, 5),
    "aborted": (1, 5),
    "cross": (1, 2),
    "trimmed": (2, -1),
    "two": (1, 1),
    "deleted": (1, 1),
    "commit_empty": (1, 2),
}


def test_transaction_visibility_golden_8_7(frames: tuple[DataFrame, DataFrame, DataFrame]) -> None:
    """docs §8.7 (see EXPECTED_DISPATCH), getPreviousPosition from the exported entries only."""
    got: dict[str, dict[tuple[int, int], str]] = {}
    max_read: dict[str, tuple[int, int]] = {}
    for r in transaction_visibility(frames[0]).collect():
        name = r["topic"].rsplit("/", 1)[1]
        got.setdefault(name, {})[(r["position"]["ledger_id"], r["position"]["entry_id"])] = r["dispatch"]
        max_read[name] = (r["max_read_position"]["ledger_id"], r["max_read_position"]["entry_id"])
    assert got == EXPECTED_DISPATCH
    assert max_read == EXPECTED_MAX_READ


def test_max_read_positions_counts_held_back_and_aborted(
    frames: tuple[DataFrame, DataFrame, DataFrame],
) -> None:
    """docs §8.4 with getPreviousPosition from the ledgers (§1.3): every entry after the oldest open
    txn's first message is held back; §8.5: aborted data before maxReadPosition is dropped (T1's batch
    of 3 at 1:1 plus 1:3 = 4 messages in 2 entries)."""
    entries, ledgers, mls = frames
    rows = {
        r["topic"].rsplit("/", 1)[1]: r.asDict(recursive=True)
        for r in max_read_positions(entries, ledgers, mls).collect()
    }
    assert {
        k: (v["max_read_position"]["ledger_id"], v["max_read_position"]["entry_id"]) for k, v in rows.items()
    } == (EXPECTED_MAX_READ)
    pick = ("open_txn_count", "oldest_open_txn_id", "held_back_entries", "held_back_messages")
    assert {k: tuple(rows[k][c] for c in pick) for k in rows} == {
        "open": (1, "(0,1)", 4, 6),
        "committed": (0, None, 0, 0),
        "aborted": (0, None, 0, 0),
        "cross": (1, "(0,2)", 2, 2),
        "trimmed": (1, "(1,7)", 2, 2),
        "two": (1, "(0,2)", 4, 4),
        "deleted": (1, "(2,3)", 2, 2),
        "commit_empty": (1, "(0,2)", 3, 3),
    }
    assert (rows["aborted"]["aborted_entries_skipped"], rows["aborted"]["aborted_messages_skipped"]) == (2, 4)
    assert rows["committed"]["aborted_messages_skipped"] == 0
    assert rows["two"]["txn_marker_entries"] == 1
    assert rows["two"]["oldest_open_first_position"] == {"ledger_id": 1, "entry_id": 2}


def test_transaction_states_state_positions_counts_duration(
    frames: tuple[DataFrame, DataFrame, DataFrame],
) -> None:
    """docs §8.3: marker 21 = committed, 22 = aborted, none = open; publish_time_ms = 1000 * (10 L + E)."""
    entries = frames[0]
    states = transaction_states(entries)
    got = {
        (r["topic"].rsplit("/", 1)[1], r["txn_id"]): (
            r["state"],
            tuple(r["first_position"]),
            tuple(r["last_position"]),
            None if r["end_marker_position"] is None else tuple(r["end_marker_position"]),
            r["entry_count"],
            r["message_count"],
            r["duration_ms"],
        )
        for r in states.collect()
    }
    assert got == {
        ("open", "(0,1)"): ("open", (1, 1), (1, 3), None, 2, 4, None),
        ("committed", "(0,1)"): ("committed", (1, 1), (1, 3), (1, 5), 2, 4, 4000),
        ("aborted", "(0,1)"): ("aborted", (1, 1), (1, 3), (1, 5), 2, 4, 4000),
        ("cross", "(0,2)"): ("open", (3, 0), (3, 0), None, 1, 1, None),
        ("trimmed", "(1,7)"): ("open", (2, 0), (2, 0), None, 1, 1, None),
        ("two", "(0,1)"): ("committed", (1, 1), (1, 3), (1, 4), 2, 2, 3000),
        ("two", "(0,2)"): ("open", (1, 2), (1, 2), None, 1, 1, None),
        ("deleted", "(2,3)"): ("open", (4, 0), (4, 0), None, 1, 1, None),
        ("commit_empty", "(0,1)"): ("committed", (1, 1), (1, 1), (3, 1), 1, 1, 20000),
        ("commit_empty", "(0,2)"): ("open", (3, 0), (3, 0), None, 1, 1, None),
    }
    old = long_open_transactions(states, now_ms=30_000, threshold_ms=15_000).collect()
    # open T1 first published at 11 s (age 19 s), T2 of "two" at 12 s (18 s); too young: cross T2 at 30 s,
    # trimmed T3 at 20 s
    assert sorted((r["topic"].rsplit("/", 1)[1], r["open_age_ms"]) for r in old) == [
        ("open", 19000),
        ("two", 18000),
    ]


#: docs §8.4 per broker line: ``maxReadPosition`` while the oldest open transaction starts at ``(L, 0)``:
#: ``(L, E-1)`` on 2.10.6, ``getPreviousPosition`` on 4.1.3, and on 3.2.0 the rule of the place that wrote
#: it last: ``(L, E-1)`` after a first message, ``getPreviousPosition`` after a commit (``commit_empty``;
#: in ``two`` the commit comes last too, where both rules give ``1:1``). Boundaries: the test below.
BY_ENTRY_ID = {
    "cross": (3, -1),
    "deleted": (4, -1),
    "commit_empty": (3, -1),
    "trimmed": (2, -1),
    "two": (1, 1),
}
BY_LEDGERS = {k: EXPECTED_MAX_READ[k] for k in BY_ENTRY_ID}
BY_LAST_EVENT = {**BY_ENTRY_ID, "commit_empty": BY_LEDGERS["commit_empty"]}
LINE_VERSIONS = {"2.10.6": BY_ENTRY_ID, "3.2.0": BY_LAST_EVENT, "4.1.3": BY_LEDGERS}


def test_max_read_uses_previous_position_by_version() -> None:
    """Release tags of ``TopicTransactionBuffer``: ``handleTransactionMessage`` calls ``getPreviousPosition``
    from v3.0.3, v3.1.3, v3.2.1 and v3.3.0 (#22024), ``updateMaxReadPosition`` from v3.0.3, v3.1.3 and
    v3.2.0 (#21466); every 2.x and the releases before subtract one from the entry id."""
    versions = [
        "2.10.6", "2.11.4", "3.0.2", "3.0.3", "3.0.7", "3.1.2", "3.1.3", "3.2.0", "3.2.1", "3.3.0", "4.0.8",
        "4.1.3",
    ]  # fmt: skip
    got = {
        v: (max_read_uses_previous_position(v), max_read_uses_previous_position(v, after_txn_end=True))
        for v in versions
    }
    new = (True, True)
    assert got == {
        "2.10.6": (False, False),
        "2.11.4": (False, False),
        "3.0.2": (False, False),
        "3.0.3": new,
        "3.0.7": new,
        "3.1.2": (False, False),
        "3.1.3": new,
        "3.2.0": (False, True),
        "3.2.1": new,
        "3.3.0": new,
        "4.0.8": new,
        "4.1.3": new,
    }


def test_max_read_positions_per_version_line_after_empty_and_deleted_ledgers(
    spark: SparkSession, frames: tuple[DataFrame, DataFrame, DataFrame]
) -> None:
    """docs §8.4: the oldest open transaction opens a ledger after an empty ledger (``cross``), after a
    deleted one (``deleted``), or becomes the oldest when an older one commits (``commit_empty``). The
    2.10 buffer (``handleTransactionMessage``/``updateMaxReadPosition``: ``(L, E-1)``) says ``(L, -1)``;
    from PR #22024 the buffer asks ``getPreviousPosition``: the newest earlier non-empty ledger's last
    entry. ``trimmed`` (no earlier ledger) and ``two`` (entry 1 > 0) agree on every line. The same entries
    are held back on every line."""
    entries, ledgers, mls = frames
    names = list(BY_ENTRY_ID)
    parts = [
        max_read_positions(entries, ledgers, mls, pulsar_version=v).select(
            F.lit(v).alias("pulsar_version"),
            F.substring_index("topic", "/", -1).alias("name"),
            "max_read_position",
            "held_back_entries",
        )
        for v in LINE_VERSIONS
    ]
    got = parts[0]
    for part in parts[1:]:
        got = got.unionByName(part)
    got = got.where(F.col("name").isin(*names))
    held = {"cross": 2, "deleted": 2, "commit_empty": 3, "trimmed": 2, "two": 4}
    expected = contract_frame(
        spark,
        "transaction_holdback",
        ["pulsar_version", ("name", "string"), "max_read_position", "held_back_entries"],
        [(v, n, want[n], held[n]) for v, want in LINE_VERSIONS.items() for n in names],
    )
    assert_df_equality(got, expected, ignore_row_order=True, ignore_nullable=True)


def test_transaction_visibility_from_entries_follows_the_version_line(
    frames: tuple[DataFrame, DataFrame, DataFrame],
) -> None:
    """Without ledgers the 2.10 rule needs nothing but the first open position: ``(L, E-1)``; the
    getPreviousPosition line falls back to the exported entries (the last one before ``(L, 0)``); 3.2.0
    takes the rule of the topic's last transaction event."""
    got = {
        (v, r["topic"].rsplit("/", 1)[1]): (
            r["max_read_position"]["ledger_id"],
            r["max_read_position"]["entry_id"],
        )
        for v in ("2.10.6", "3.2.0", "4.1.3")
        for r in transaction_visibility(frames[0], pulsar_version=v)
        .select("topic", "max_read_position")
        .distinct()
        .collect()
    }
    assert {k: p for k, p in got.items() if k[1] in ("cross", "deleted", "commit_empty")} == {
        ("2.10.6", "cross"): (3, -1),
        ("2.10.6", "deleted"): (4, -1),
        ("2.10.6", "commit_empty"): (3, -1),
        ("3.2.0", "cross"): (3, -1),
        ("3.2.0", "deleted"): (4, -1),
        ("3.2.0", "commit_empty"): (1, 2),
        ("4.1.3", "cross"): (1, 2),
        ("4.1.3", "deleted"): (1, 1),
        ("4.1.3", "commit_empty"): (1, 2),
    }
