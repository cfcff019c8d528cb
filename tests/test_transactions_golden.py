"""Golden tests for pulsar_model.transactions (SPEC §8.4, §8.5, golden scenarios §8.7).

Topics (one scenario each, all in one DataFrame):

* ``open``/``committed``/``aborted``: SPEC §8.7 "Entries in one ledger: 1:0 normal, 1:1 T1, 1:2 normal,
  1:3 T1, 1:4 normal" with T1 open, committed (marker 21 at 1:5) or aborted (marker 22 at 1:5);
* ``cross``: ledgers 1 (3 entries), 2 (empty), 3 (open); T2 opens at 3:0 -> previous(3:0) = 1:2 (§1.3);
* ``trimmed``: ledger 1 deleted, T3 opens at 2:0 of the first ledger -> previous = (2,-1) (§1.3);
* ``two``: T1 at 1:1, T2 at 1:2, T1 committed at 1:4 -> T2 is now the oldest open: previous(1:2) = 1:1.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession

from pulsar_model.transactions import (
    long_open_transactions,
    max_read_positions,
    transaction_states,
    transaction_visibility,
)

POS = "struct<ledger_id:bigint,entry_id:bigint>"
ENTRIES = (
    f"cluster string, topic string, position {POS}, txnid_most_bits bigint, txnid_least_bits bigint, "
    "marker_type int, publish_time_ms bigint, message_count int"
)
LEDGERS = "cluster string, topic string, ledger_id bigint, entries bigint, size_bytes bigint"
ML = (
    "cluster string, topic string, current_ledger_id bigint, current_ledger_entries bigint, "
    f"current_ledger_size_bytes bigint, last_confirmed_entry {POS}, total_size_bytes bigint"
)
T1, T2, T3 = (0, 1), (0, 2), (1, 7)
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
    # SPEC §8.7: "while T1 open: maxReadPosition = previous(1:1) = 1:0 -> only 1:0 is dispatchable."
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
}
EXPECTED_MAX_READ = {
    "open": (1, 0),
    "committed": (1, 5),
    "aborted": (1, 5),
    "cross": (1, 2),
    "trimmed": (2, -1),
    "two": (1, 1),
}


def test_transaction_visibility_golden_8_7(frames: tuple[DataFrame, DataFrame, DataFrame]) -> None:
    """SPEC §8.7 (see EXPECTED_DISPATCH), getPreviousPosition from the exported entries only."""
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
    """SPEC §8.4 with getPreviousPosition from the ledgers (§1.3): every entry after the oldest open
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
    }
    assert (rows["aborted"]["aborted_entries_skipped"], rows["aborted"]["aborted_messages_skipped"]) == (2, 4)
    assert rows["committed"]["aborted_messages_skipped"] == 0
    assert rows["two"]["txn_marker_entries"] == 1
    assert rows["two"]["oldest_open_first_position"] == {"ledger_id": 1, "entry_id": 2}


def test_transaction_states_state_positions_counts_duration(
    frames: tuple[DataFrame, DataFrame, DataFrame],
) -> None:
    """SPEC §8.3: marker 21 = committed, 22 = aborted, none = open; publish_time_ms = 1000 * (10 L + E)."""
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
    }
    old = long_open_transactions(states, now_ms=30_000, threshold_ms=15_000).collect()
    # open T1 first published at 11 s (age 19 s), T2 of "two" at 12 s (18 s); too young: cross T2 at 30 s,
    # trimmed T3 at 20 s
    assert sorted((r["topic"].rsplit("/", 1)[1], r["open_age_ms"]) for r in old) == [
        ("open", 19000),
        ("two", 18000),
    ]


# --- property: maxReadPosition against a replay of SPEC §8.4 ------------------------------------------------

Op = tuple[str, int]
ops = st.lists(
    st.one_of(
        st.just(("normal", 0)),
        st.just(("roll", 0)),
        st.just(("snapshot_marker", 0)),
        st.tuples(st.sampled_from(["append", "append", "commit", "abort"]), st.integers(0, 3)),
    ),
    max_size=25,
)


def _traffic(topic_ops: list[Op]) -> tuple[list[tuple[Any, ...]], list[int]]:
    """Entries ``(pos, most, least, marker)`` from random ops and the non-empty ledger ids in order.

    Ledgers roll only after at least one entry, so no ledger is empty (the entries-only previous-position
    path is then exact, SPEC §1.3). Ended transactions are never appended to again (a slot gets a new id).
    """
    ledger, entry, seq = 3, 0, 0
    ledgers = [ledger]
    slot_txn: dict[int, tuple[int, int]] = {}
    has_data: set[tuple[int, int]] = set()
    out: list[tuple[Any, ...]] = []

    def txn_of(slot: int) -> tuple[int, int]:
        nonlocal seq
        if slot not in slot_txn:
            seq += 1
            slot_txn[slot] = (slot % 2, seq)
        return slot_txn[slot]

    for kind, slot in topic_ops:
        if kind == "roll":
            if entry > 0:
                ledger, entry = ledger + 2, 0
                ledgers.append(ledger)
            continue
        if kind in ("commit", "abort"):
            txn = txn_of(slot)
            if txn not in has_data:
                continue  # no marker on a topic the transaction never touched (SPEC §8.3)
            out.append(((ledger, entry), *txn, 21 if kind == "commit" else 22))
            del slot_txn[slot]
        elif kind == "append":
            txn = txn_of(slot)
            has_data.add(txn)
            out.append(((ledger, entry), *txn, None))
        elif kind == "snapshot_marker":
            out.append(((ledger, entry), None, None, 12))
        else:
            out.append(((ledger, entry), None, None, None))
        entry += 1
    if entry == 0 and len(ledgers) > 1:
        ledgers.pop()
    return out, ledgers


def _replay(rows: list[tuple[Any, ...]]) -> tuple[int, int] | None:
    """SPEC §8.4 line by line; getPreviousPosition from SPEC §1.3 over the appended entries."""
    entries_by_ledger: dict[int, int] = {}
    for (lid, eid), *_ in rows:
        entries_by_ledger[lid] = max(entries_by_ledger.get(lid, 0), eid + 1)

    def previous(p: tuple[int, int]) -> tuple[int, int]:
        if p[1] > 0:
            return (p[0], p[1] - 1)
        earlier = sorted((lid for lid in entries_by_ledger if lid < p[0]), reverse=True)
        if not earlier:
            return (p[0], -1)
        for lid in earlier:
            if entries_by_ledger[lid] > 0:
                return (lid, entries_by_ledger[lid] - 1)
        return (min(earlier), -1)

    ongoing: dict[tuple[int, int], tuple[int, int]] = {}
    aborted: dict[tuple[int, int], tuple[int, int]] = {}
    max_read: tuple[int, int] | None = None
    for pos, most, least, marker in rows:
        txn = (most, least)
        if most is not None and marker is None:  # transactional append
            if txn not in ongoing and txn not in aborted:
                ongoing[txn] = pos
            max_read = previous(next(iter(ongoing.values())))
        elif most is not None:  # commit / abort marker
            ongoing.pop(txn, None)
            if marker == 22:
                aborted[txn] = pos
            max_read = pos if not ongoing else previous(next(iter(ongoing.values())))
        elif not ongoing:  # normal append (markers other than txn markers are published normally)
            max_read = pos
    return max_read


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(topics=st.lists(ops, min_size=1, max_size=12))
@example(
    topics=[
        [("append", 0), ("append", 1), ("normal", 0)],  # two open: the older one (3:0) limits reads
        [("append", 0), ("normal", 0), ("append", 1), ("append", 0), ("commit", 0), ("normal", 0)],
        [("normal", 0), ("roll", 0), ("append", 2), ("abort", 2), ("append", 1), ("roll", 0), ("append", 3)],
        [("append", 3), ("roll", 0), ("snapshot_marker", 0), ("commit", 3), ("normal", 0)],
    ]
)
def test_max_read_positions_matches_replay(spark: SparkSession, topics: list[list[Op]]) -> None:
    """SPEC §8.4 replay vs the set-based transform, many topics per example (one Spark job)."""
    rows: list[tuple[Any, ...]] = []
    expected: dict[str, tuple[int, int] | None] = {}
    for i, topic_ops in enumerate(topics):
        traffic, _ = _traffic(topic_ops)
        if not traffic:
            continue
        expected[f"p{i}"] = _replay(traffic)
        rows += [("c", _t(f"p{i}"), pos, most, least, marker, 0, 1) for pos, most, least, marker in traffic]
    if not rows:
        return
    got: dict[str, tuple[int, int]] = {}
    for r in transaction_visibility(spark.createDataFrame(rows, ENTRIES)).collect():
        name = r["topic"].rsplit("/", 1)[1]
        got[name] = (r["max_read_position"]["ledger_id"], r["max_read_position"]["entry_id"])
        position = (r["position"]["ledger_id"], r["position"]["entry_id"])
        assert (r["dispatch"] == HELD) == (position > got[name]), (name, position)
    assert got == expected
