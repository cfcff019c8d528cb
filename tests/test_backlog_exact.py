"""Tests of pulsar_model.backlog_exact: exact backlog of exported entries (docs §1.2, §1.8, §2.5, §8.3-§8.5).

Goldens are computed by hand from the docs' rules (each expected row says why); the properties compare the
transforms with the plain-Python oracle tests/oracle/exact_backlog.py on random managed-ledger states of
tests/oracle/strategies.py decorated with random exported entries (batches, markers, transactions, entries
missing from the export, entries written after LAC), many topics per Spark job.
"""

from __future__ import annotations

import datetime as dt
import functools
import random
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pulsar_model.backlog import backlog_numbers
from pulsar_model.backlog_exact import TOTAL_COLUMNS, exact_backlog, unacked_entry_totals
from pulsar_model.errors import ConfigError, ContractError
from tests.oracle import exact_backlog as xo
from tests.oracle import managed_ledger as mo
from tests.oracle import strategies as S

POS = "struct<ledger_id:bigint,entry_id:bigint>"
RANGES = f"array<struct<lower:{POS},upper:{POS}>>"
ENTRIES = (
    f"cluster string, topic string, position {POS}, entry_size_bytes bigint, publish_time_ms bigint, "
    "marker_type int, txnid_most_bits bigint, txnid_least_bits bigint, message_count int"
)
REQUESTS = (
    f"cluster string, topic string, request_key string, lower {POS}, upper {POS}, acked_ranges {RANGES}, "
    "expected_entries bigint"
)
LEDGERS = "cluster string, topic string, ledger_id bigint, entries bigint, size_bytes bigint"
ML = (
    "cluster string, topic string, current_ledger_id bigint, current_ledger_entries bigint, "
    f"current_ledger_size_bytes bigint, last_confirmed_entry {POS}, total_size_bytes bigint, "
    "exported_at timestamp, entries_added_counter bigint"
)
CURSORS = (
    "cluster string, topic string, cursor_name string, cursor_order int, is_durable boolean, "
    f"mark_delete_position {POS}, individually_deleted {RANGES}, messages_consumed_counter bigint"
)
TXNS = "cluster string, topic string, txnid_most_bits bigint, txnid_least_bits bigint, state string"

T1, T2 = (0, 1), (0, 2)
SNAPSHOT, SNAPSHOT_REQUEST, COMMIT, ABORT = 12, 10, 21, 22  # MarkerType values (docs §4.3, §8.3)
MEASURE_COLUMNS = [c for c in TOTAL_COLUMNS if c not in ("oldest_position", "oldest_publish_time_ms")]
MEASURE_COLUMNS.remove("exported_entries_complete")


#: Tiny inputs and very wide plans: interpreted, without adaptive re-planning (tests/spark_conf.py).
pytestmark = pytest.mark.usefixtures("fast_spark_conf")


def _frame(spark: SparkSession, rows: list[tuple[Any, ...]], schema: str) -> DataFrame:
    """An input frame, materialised once: every later scan reads JVM blocks instead of re-running the
    Python rows through a Python worker (the transforms scan their inputs several times)."""
    return spark.createDataFrame(rows, schema).localCheckpoint()


def _t(name: str) -> str:
    return f"persistent://t/ns/{name}"


def _entry(
    cluster: str,
    topic: str,
    pos: tuple[int, int],
    msgs: int,
    size: int,
    publish: int,
    marker: int | None = None,
    txn: tuple[int, int] | None = None,
) -> tuple[Any, ...]:
    most, least = txn if txn else (None, None)
    return (cluster, _t(topic), pos, size, publish, marker, most, least, msgs)


def _measures(data: tuple[int, int, int] = (0, 0, 0), **kinds: tuple[int, int, int]) -> dict[str, int]:
    """Expected measure columns: per kind (entries, messages, bytes) and the totals."""
    per_kind = {"data": data, "marker": (0, 0, 0), "aborted": (0, 0, 0), "uncommitted": (0, 0, 0)} | kinds
    out = {
        f"{k}_{m}": v[i] for k, v in per_kind.items() for i, m in enumerate(("entries", "messages", "bytes"))
    }
    for i, m in enumerate(("entries", "messages", "bytes")):
        out[m] = sum(v[i] for v in per_kind.values())
    return out


def _pos(value: Any) -> tuple[int, int] | None:
    return None if value is None else (value["ledger_id"], value["entry_id"])


# ------------------------------------------------------------------------------------------------ goldens


def _golden_entries() -> list[tuple[Any, ...]]:
    return [
        # c1/a: ledgers 1 and 3; T1 aborted (its marker at 3:1), T2 has no end marker (open)
        _entry("c1", "a", (1, 0), 3, 100, 1000),  # a batch of 3
        _entry("c1", "a", (1, 1), 1, 10, 1100),
        _entry("c1", "a", (1, 2), 1, 50, 1200, marker=SNAPSHOT),
        _entry("c1", "a", (1, 3), 2, 20, 1300, txn=T1),
        _entry("c1", "a", (3, 0), 1, 30, 1400, txn=T2),
        _entry("c1", "a", (3, 1), 1, 40, 1500, marker=ABORT, txn=T1),
        _entry("c1", "a", (3, 2), 4, 400, 900),  # published "before" 1:0: position order decides oldest
        # c1/b: the same txn id T1 is committed here - states never leak across topics
        _entry("c1", "b", (1, 0), 1, 7, 10),
        _entry("c1", "b", (1, 1), 2, 8, 20),
        _entry("c1", "b", (1, 2), 1, 5, 30, txn=T1),
        _entry("c1", "b", (1, 3), 1, 6, 40, marker=COMMIT, txn=T1),
        # c2/a: same topic name in another cluster
        _entry("c2", "a", (1, 0), 1, 1, 5),
    ]


def _golden_requests() -> list[tuple[Any, ...]]:
    a, b = _t("a"), _t("b")
    return [
        ("c1", a, "r1-all", (1, -1), (3, 2), [], 7),
        ("c1", a, "r2-range-at-lower", (1, 0), (3, 1), [((1, 0), (1, 2))], 4),
        ("c1", a, "r3-range-across-ledgers", (1, -1), (3, 2), [((1, 2), (3, 0))], None),
        ("c1", a, "r4-lower-eq-upper", (3, 2), (3, 2), [], 0),
        ("c1", a, "r5-lower-past-upper", (3, 5), (3, 2), [], None),
        ("c1", a, "r6-null-ranges-gap-ledger", (2, -1), (3, 0), None, None),
        ("c1", a, "r7-all-acked", (1, -1), (1, 3), [((0, 5), (1, 3))], None),
        (
            "c1",
            a,
            "r8-overlapping-ranges",
            (1, -1),
            (3, 2),
            [((1, 0), (1, 1)), ((1, 0), (1, 2)), ((3, 1), (3, 2))],
            None,
        ),
        ("c1", a, "r9-range-with-null-bound", (1, -1), (1, 1), [(None, (1, 1))], None),
        ("c1", a, "r10-null-upper", (1, -1), None, [], 3),
        ("c1", b, "r11-other-topic", (1, -1), (1, 3), [], None),
        ("c2", a, "r12-other-cluster", (1, -1), (3, 2), [], None),
        ("c1", _t("none"), "r13-no-entries", (1, -1), (5, 5), [], 2),
    ]


GOLDEN_TOTALS: dict[str, tuple[dict[str, int], tuple[int, int] | None, int | None, bool | None]] = {
    # (1,-1)..3:2: data 1:0, 1:1, 3:2 (3+1+4 msgs, 510 B); markers 1:2 and the abort marker 3:1 (§8.3);
    # aborted T1 data 1:3; uncommitted T2 data 3:0 (no end marker, §8.4). Oldest = 1:0 (position order).
    "r1-all": (
        _measures((3, 8, 510), marker=(2, 2, 90), aborted=(1, 2, 20), uncommitted=(1, 1, 30)),
        (1, 0),
        1000,
        True,
    ),
    # (1:0, 1:2] acked (a range starting at lower): 1:3, 3:0, 3:1 remain; 3 != expected 4 -> incomplete
    "r2-range-at-lower": (
        _measures(marker=(1, 1, 40), aborted=(1, 2, 20), uncommitted=(1, 1, 30)),
        (1, 3),
        1300,
        False,
    ),
    # (1:2, 3:0] acked across ledgers 1 -> 3: 1:3 and 3:0 gone
    "r3-range-across-ledgers": (_measures((3, 8, 510), marker=(2, 2, 90)), (1, 0), 1000, None),
    "r4-lower-eq-upper": (_measures(), None, None, True),  # md == LAC: nothing
    "r5-lower-past-upper": (_measures(), None, None, None),  # md past LAC: nothing
    "r6-null-ranges-gap-ledger": (_measures(uncommitted=(1, 1, 30)), (3, 0), 1400, None),
    "r7-all-acked": (_measures(), None, None, None),
    # union of (1:0,1:1], (1:0,1:2], (3:1,3:2]: 1:1, 1:2, 3:2 acked
    "r8-overlapping-ranges": (
        _measures((1, 3, 100), marker=(1, 1, 40), aborted=(1, 2, 20), uncommitted=(1, 1, 30)),
        (1, 0),
        1000,
        None,
    ),
    "r9-range-with-null-bound": (
        _measures((2, 4, 110)),
        (1, 0),
        1000,
        None,
    ),  # a half-null range acks nothing
    # committed T1 data of topic b is data; the commit marker is a marker
    "r11-other-topic": (_measures((3, 4, 20), marker=(1, 1, 6)), (1, 0), 10, None),
    "r12-other-cluster": (_measures((1, 1, 1)), (1, 0), 5, None),
    "r13-no-entries": (_measures(), None, None, False),
}


def _collect_totals(df: DataFrame) -> dict[str, dict[str, Any]]:
    return {r["request_key"]: r.asDict(recursive=True) for r in df.collect()}


@pytest.fixture(scope="module")
def golden_frames(spark: SparkSession) -> tuple[DataFrame, DataFrame]:
    return (
        _frame(spark, _golden_entries(), ENTRIES),
        _frame(spark, _golden_requests(), REQUESTS),
    )


def _renamed_requests(requests: DataFrame) -> DataFrame:
    """The golden requests keyed by ``rid``, with a stale ``entries`` column and no ``expected_entries``."""
    return (
        requests.withColumnRenamed("request_key", "rid")
        .withColumn("entries", F.lit("stale"))
        .drop("expected_entries")
    )


@pytest.fixture(scope="module")
def golden_totals(spark: SparkSession, golden_frames: tuple[DataFrame, DataFrame]) -> dict[str, Any]:
    """Three runs of the golden requests, one Spark job: entries' own txn states, a precomputed
    ``transactions`` frame (T2 of c1/a committed) and a custom key column."""
    entries, requests = golden_frames
    txns = _frame(spark, [("c1", _t("a"), 0, 2, "committed")], TXNS)
    custom = unacked_entry_totals(_renamed_requests(requests), entries, key="rid")
    runs = [
        unacked_entry_totals(requests, entries).withColumn("_run", F.lit("derived")),
        unacked_entry_totals(requests, entries, txns).withColumn("_run", F.lit("given")),
        custom.withColumnRenamed("rid", "request_key").withColumn("_run", F.lit("custom")),
    ]
    union = runs[0].unionByName(runs[1]).unionByName(runs[2], allowMissingColumns=True)
    rows: dict[str, Any] = {"custom_columns": custom.columns}
    for r in union.collect():
        rows.setdefault(r["_run"], {})[r["request_key"]] = r.asDict(recursive=True)
    return rows


def test_unacked_entry_totals_golden(golden_totals: dict[str, Any]) -> None:
    """Every request of _golden_requests gets exactly the hand-computed GOLDEN_TOTALS row."""
    got = golden_totals["derived"]
    assert len(got) == len(_golden_requests()), "one row per request"
    for name, (measures, oldest, publish, complete) in GOLDEN_TOTALS.items():
        row = got[name]
        assert {c: row[c] for c in MEASURE_COLUMNS} == measures, name
        assert (_pos(row["oldest_position"]), row["oldest_publish_time_ms"]) == (oldest, publish), name
        assert row["exported_entries_complete"] is complete, name


def test_unacked_entry_totals_null_bound_gives_nulls(golden_totals: dict[str, Any]) -> None:
    """An unknown interval (null upper, e.g. no LAC) is not an empty one: every measure is null."""
    row = golden_totals["derived"]["r10-null-upper"]
    assert all(row[c] is None for c in (*MEASURE_COLUMNS, "oldest_position", "exported_entries_complete"))


def test_unacked_entry_totals_uses_given_transactions(golden_totals: dict[str, Any]) -> None:
    """A precomputed ``transactions`` frame replaces the entries' own states (one row: c1/a T2 committed)."""
    given = golden_totals["given"]
    # T2's data 3:0 is now committed data
    row = given["r6-null-ranges-gap-ledger"]
    assert (row["data_entries"], row["uncommitted_entries"]) == (1, 0)
    # T1 of c1/a is not in the frame: no known end -> uncommitted, although the entries hold its abort marker
    row = given["r1-all"]
    assert (row["data_entries"], row["aborted_entries"], row["uncommitted_entries"]) == (4, 0, 1)
    # the frame's row is for topic a only: T1 of c1/b (committed in its entries) is unknown there
    assert given["r11-other-topic"]["uncommitted_entries"] == 1


def test_unacked_entry_totals_keeps_request_columns_and_custom_key(golden_totals: dict[str, Any]) -> None:
    """Any key column name; request columns kept first; a request column named like an output is replaced."""
    columns = golden_totals["custom_columns"]
    assert columns[:6] == ["cluster", "topic", "rid", "lower", "upper", "acked_ranges"]
    assert columns[6:] == list(TOTAL_COLUMNS)
    for name, row in golden_totals["custom"].items():
        want = golden_totals["derived"][name]
        assert (row["entries"], row["bytes"], row["exported_entries_complete"]) == (
            want["entries"],
            want["bytes"],
            None,
        ), name


def test_unacked_entry_totals_rejects_missing_columns(golden_frames: tuple[DataFrame, DataFrame]) -> None:
    entries, requests = golden_frames
    with pytest.raises(ContractError, match="acked_ranges"):
        unacked_entry_totals(requests.drop("acked_ranges"), entries)
    with pytest.raises(ContractError, match="entry_size_bytes"):
        unacked_entry_totals(requests, entries.drop("entry_size_bytes"))


EXPORTED_AT = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
E_MS = int(EXPORTED_AT.timestamp() * 1000)


def _exact_frames(spark: SparkSession) -> tuple[DataFrame, DataFrame, DataFrame, DataFrame]:
    x, y, z, w = _t("x"), _t("y"), _t("z"), _t("w")
    entries = [
        # c1/x: ledgers 10 (3 entries), 12 (2), 15 open (2 written); LAC 15:1. T1 open, T2 aborted.
        _entry("c1", "x", (10, 0), 5, 500, E_MS - 3_600_500),
        _entry("c1", "x", (10, 1), 1, 100, E_MS - 1_999),
        _entry("c1", "x", (10, 2), 1, 60, E_MS - 1_000, marker=SNAPSHOT_REQUEST),
        _entry("c1", "x", (12, 0), 2, 200, E_MS - 900, txn=T1),
        _entry("c1", "x", (12, 1), 1, 100, E_MS - 800, txn=T2),
        _entry("c1", "x", (15, 0), 1, 50, E_MS - 700, marker=ABORT, txn=T2),
        _entry("c1", "x", (15, 1), 3, 300, E_MS - 600),
        _entry("c1", "x", (15, 2), 1, 100, E_MS + 5),  # written after the stats snapshot: past LAC
        # c1/y: ledger 20 has 4 entries, the export holds only two of them
        _entry("c1", "y", (20, 0), 1, 10, 1),
        _entry("c1", "y", (20, 3), 1, 10, 2),
        # c2/x: same topic name in another cluster
        _entry("c2", "x", (10, 0), 7, 70, E_MS - 10_000),
    ]
    ledgers = [
        ("c1", x, 10, 3, 660),
        ("c1", x, 12, 2, 300),
        ("c1", x, 15, 0, 0),  # the open ledger is listed 0/0 (docs §0.2)
        ("c1", y, 20, 4, 40),
        ("c1", y, 21, 0, 0),
        ("c1", z, 30, 3, 30),
        ("c2", x, 10, 0, 0),
    ]
    mls = [
        ("c1", x, 15, 2, 350, (15, 1), 1310, EXPORTED_AT, 100),
        ("c1", y, 21, 0, 0, (20, 3), 40, None, 4),
        ("c1", z, None, 0, 0, (30, 2), 30, EXPORTED_AT, None),
        ("c2", x, 10, 1, 70, (10, 0), 70, EXPORTED_AT, 1),
    ]
    cursors = [
        ("c1", x, "md-minus-one", 0, True, (10, -1), [], 93),
        ("c1", x, "ranges", 1, True, (10, 0), [((10, 1), (12, 0)), ((12, 1), (15, 0))], 101),
        ("c1", x, "at-lac", 2, True, (15, 1), [], None),
        ("c1", x, "past-lac", 3, True, (15, 3), [], 150),
        ("c1", y, "gap", 0, True, (20, -1), [], 0),
        ("c1", z, "nothing-exported", 0, True, (30, 0), [], 0),
        ("c2", x, "md-minus-one", 0, True, (10, -1), [], 1),
        ("c1", w, "orphan", 0, True, (1, -1), [], 0),  # no managed-ledger row
    ]
    return (
        _frame(spark, cursors, CURSORS),
        _frame(spark, entries, ENTRIES),
        _frame(spark, mls, ML),
        _frame(spark, ledgers, LEDGERS),
    )


#: (cluster, cursor) -> expected columns; "precise"/"non_precise" per version where they differ.
GOLDEN_EXACT: dict[tuple[str, str], dict[str, Any]] = {
    # (10:-1, 15:1]: data 10:0 (5), 10:1, 15:1 (3); markers 10:2, 15:0; aborted 12:1; uncommitted 12:0;
    # 15:2 is past LAC. Oldest 10:0: 3600.5 s before the export -> 3600. Counter 100 - 93 = 7.
    ("c1", "md-minus-one"): {
        "m": _measures((3, 9, 900), marker=(2, 2, 110), aborted=(1, 1, 100), uncommitted=(1, 2, 200)),
        "oldest": ((10, 0), E_MS - 3_600_500, 3600),
        "expected": (7, True),
        "precise": {"4.1.3": 7, "2.10.6": 7},
        "non_precise": {"4.1.3": 7, "2.10.6": 7},
    },
    # md 10:0, acked 10:2, 12:0 (range across ledgers) and 15:0: left 10:1, 12:1 (aborted), 15:1.
    # Oldest 10:1, 1.999 s -> 1. Counter 100 - 101 < 0 -> the precise count 3.
    ("c1", "ranges"): {
        "m": _measures((2, 4, 400), aborted=(1, 1, 100)),
        "oldest": ((10, 1), E_MS - 1_999, 1),
        "expected": (3, True),
        "precise": {"4.1.3": 3, "2.10.6": 3},
        "non_precise": {"4.1.3": 3, "2.10.6": 3},
    },
    # md == LAC: no backlog in any version; no consumed counter -> non-precise unknown
    ("c1", "at-lac"): {
        "m": _measures(),
        "oldest": (None, None, None),
        "expected": (0, True),
        "precise": {"4.1.3": 0, "2.10.6": 0},
        "non_precise": {"4.1.3": None, "2.10.6": None},
    },
    # md past LAC: exact 0; the precise guard of apache/pulsar#21248 (tag v2.10.6 has it) -> 0; releases
    # before it build Range.openClosed(md, LAC), which throws (docs §1.8)
    ("c1", "past-lac"): {
        "m": _measures(),
        "oldest": (None, None, None),
        "expected": (0, True),
        "precise": {"4.1.3": 0, "2.10.6": 0},
        "non_precise": {"4.1.3": 0, "2.10.6": 0},
    },
    # 2 of the 4 existing entries exported -> incomplete; no exported_at -> no age
    ("c1", "gap"): {
        "m": _measures((2, 2, 20)),
        "oldest": ((20, 0), 1, None),
        "expected": (4, False),
        "precise": {"4.1.3": 4, "2.10.6": 4},
        "non_precise": {"4.1.3": 4, "2.10.6": 4},
    },
    # no entry of the topic exported: zeros, 2 existing entries expected; entries_added_counter missing
    ("c1", "nothing-exported"): {
        "m": _measures(),
        "oldest": (None, None, None),
        "expected": (2, False),
        "precise": {"4.1.3": 2, "2.10.6": 2},
        "non_precise": {"4.1.3": None, "2.10.6": None},
    },
    ("c2", "md-minus-one"): {
        "m": _measures((1, 7, 70)),
        "oldest": ((10, 0), E_MS - 10_000, 10),
        "expected": (1, True),
        "precise": {"4.1.3": 1, "2.10.6": 1},
        "non_precise": {"4.1.3": 0, "2.10.6": 0},
    },
}


@pytest.fixture(scope="module")
def golden_exact(spark: SparkSession) -> dict[tuple[str, str, str], dict[str, Any]]:
    """exact_backlog of _exact_frames for 4.1.3 and 2.10.6 with ledgers, and 4.1.3 without (one Spark job)."""
    cursors, entries, mls, ledgers = _exact_frames(spark)
    # the backlog stage's call: precise and expected counts from its grouped pass
    numbers = backlog_numbers(mls, ledgers, cursors, "4.1.3")
    pass_counts = exact_backlog(
        cursors, entries, mls, "4.1.3", ledgers=ledgers, precise=numbers.ledger_counts
    )
    runs = [
        exact_backlog(cursors, entries, mls, "4.1.3", ledgers=ledgers).withColumn("_run", F.lit("4.1.3")),
        exact_backlog(cursors, entries, mls, "2.10.6", ledgers=ledgers).withColumn("_run", F.lit("2.10.6")),
        exact_backlog(cursors, entries, mls).withColumn("_run", F.lit("no-ledgers")),
        pass_counts.withColumn("_run", F.lit("4.1.3-pass")),
    ]
    union = functools.reduce(DataFrame.unionByName, runs)
    return {(r["_run"], r["cluster"], r["cursor_name"]): r.asDict(recursive=True) for r in union.collect()}


@pytest.mark.parametrize("run", ["4.1.3", "2.10.6", "4.1.3-pass"])
def test_exact_backlog_golden_per_version(
    golden_exact: dict[tuple[str, str, str], dict[str, Any]], run: str
) -> None:
    """GOLDEN_EXACT: the exact split, oldest entry and age, completeness, precise and non-precise counts
    (``4.1.3-pass``: with the precise and expected counts of ``backlog_numbers``, as the stage calls it)."""
    assert len(golden_exact) == 4 * (len(GOLDEN_EXACT) + 1), "one row per cursor and run"
    version = run.removesuffix("-pass")
    for (cluster, name), want in GOLDEN_EXACT.items():
        row = golden_exact[(run, cluster, name)]
        measures = {
            ("entries" if c == "backlog_entries_exported" else c.removeprefix("backlog_")): row[c]
            for c in row
            if c.startswith("backlog_")
        }
        assert measures == want["m"], (cluster, name)
        oldest = (
            _pos(row["oldest_unacked_position"]),
            row["oldest_unacked_publish_time_ms"],
            row["oldest_unacked_age_seconds"],
        )
        assert oldest == want["oldest"], (cluster, name)
        assert (row["expected_backlog_entries"], row["exported_entries_complete"]) == want["expected"], name
        assert row["precise_backlog_entries"] == want["precise"][version], (cluster, name)
        assert row["non_precise_backlog_entries"] == want["non_precise"][version], (cluster, name)


def test_exact_backlog_keeps_cursor_columns(golden_exact: dict[tuple[str, str, str], dict[str, Any]]) -> None:
    row = golden_exact[("4.1.3", "c1", "ranges")]
    assert (row["cursor_order"], row["is_durable"], row["messages_consumed_counter"]) == (1, True, 101)
    assert row["individually_deleted"][0]["upper"] == {"ledger_id": 12, "entry_id": 0}


def test_exact_backlog_without_managed_ledger_is_null(
    golden_exact: dict[tuple[str, str, str], dict[str, Any]],
) -> None:
    """A cursor whose topic has no managed-ledger row (no LAC): unknown, not zero."""
    row = golden_exact[("4.1.3", "c1", "orphan")]
    nulls = (
        "backlog_entries_exported",
        "backlog_bytes",
        "expected_backlog_entries",
        "precise_backlog_entries",
    )
    assert all(row[c] is None for c in nulls)


def test_exact_backlog_without_ledgers_has_no_broker_counts(
    golden_exact: dict[tuple[str, str, str], dict[str, Any]],
) -> None:
    """Without ``ledgers``: the exact split is the same, the ledger-based columns are null."""
    for (cluster, name), want in GOLDEN_EXACT.items():
        row = golden_exact[("no-ledgers", cluster, name)]
        assert (row["backlog_entries_exported"], row["backlog_bytes"]) == (
            want["m"]["entries"],
            want["m"]["bytes"],
        )
        broker = ("expected_backlog_entries", "exported_entries_complete", "precise_backlog_entries")
        assert all(row[c] is None for c in broker), name
        # the counter itself needs no ledgers; only its negative fallback (the precise count) does
        assert row["non_precise_backlog_entries"] == NON_PRECISE_WITHOUT_LEDGERS[(cluster, name)], name


#: entries_added_counter - messages_consumed_counter when both are known and the difference is >= 0
NON_PRECISE_WITHOUT_LEDGERS = {
    ("c1", "md-minus-one"): 7,  # 100 - 93
    ("c1", "ranges"): None,  # 100 - 101 < 0 and no precise count to fall back to
    ("c1", "at-lac"): None,  # no consumed counter
    ("c1", "past-lac"): None,  # 100 - 150 < 0
    ("c1", "gap"): 4,  # 4 - 0
    ("c1", "nothing-exported"): None,  # no entries_added_counter
    ("c2", "md-minus-one"): 0,  # 1 - 1
}


def test_exact_backlog_rejects_unknown_version(spark: SparkSession) -> None:
    cursors, entries, mls, _ = _exact_frames(spark)
    with pytest.raises(ConfigError):
        exact_backlog(cursors, entries, mls, "9.9")
    with pytest.raises(ContractError, match="individually_deleted"):
        exact_backlog(cursors.drop("individually_deleted"), entries, mls)


# ------------------------------------------------------------------------------------------------ properties

#: One Spark job per example (60-80 topics each); PULSAR_PROPERTY_EXAMPLES raises the count (strategies.py).
PROPERTY_SETTINGS = S.PROPERTY_SETTINGS
TXN_POOL = [(0, 1), (0, 2), (1, 1), (1, 2)]
REPLICATION_MARKERS = [10, 11, 12, 13]
TXN_MARKERS = [20, 21, 22]


def _entry_for(rng: random.Random, p: tuple[int, int]) -> xo.Entry:
    """One stored entry at ``p``: plain (maybe a batch), a marker, transactional data or a txn marker."""
    kind = rng.choice(["plain", "plain", "plain", "marker", "txn", "txn", "txn_marker"])
    msgs = rng.choice([1, 1, rng.randint(2, 50)])
    size = rng.randint(1, 10_000)
    publish = rng.randint(0, 10**7)  # not monotonic on purpose: "oldest" is by position
    if kind == "marker":
        return xo.Entry(p, 1, size, publish, marker_type=rng.choice(REPLICATION_MARKERS))
    if kind == "txn":
        return xo.Entry(p, msgs, size, publish, txn=rng.choice(TXN_POOL))
    if kind == "txn_marker":
        return xo.Entry(p, 1, size, publish, marker_type=rng.choice(TXN_MARKERS), txn=rng.choice(TXN_POOL))
    return xo.Entry(p, msgs, size, publish)


@st.composite
def _exported(draw: st.DrawFn, state: S.MLState) -> list[xo.Entry]:
    """The export of a topic: every existing entry, or a random subset, plus entries written after LAC.

    The entries come from a seeded ``random.Random`` (one draw per topic): drawing each entry from
    Hypothesis would exceed its per-example data budget with 60+ topics of up to ~100 entries.
    """
    rng = random.Random(draw(st.integers(0, 2**32)))
    existing = state.existing_entries()
    if rng.randint(0, 3) == 0:
        existing = [p for p in existing if rng.randint(0, 3) > 0]
    late: list[tuple[int, int]] = []
    ml = state.ml
    if ml.current_ledger_id is not None and rng.randint(0, 3) == 0:
        late = [(ml.current_ledger_id, ml.current_ledger_entries + k) for k in range(rng.randint(1, 2))]
    return [_entry_for(rng, p) for p in [*existing, *late]]


@st.composite
def _acked(draw: st.DrawFn, state: S.MLState, lower: tuple[int, int]) -> list[S.IdmRange] | None:
    mode = draw(st.sampled_from(["cursor", "cursor", "arbitrary", "none"]))
    if mode == "none":
        return None
    if mode == "cursor":
        return draw(S.individually_deleted(state, lower))
    # any pairs of positions: overlapping, reversed, spanning ledgers, (L,-1) ends
    return [(draw(S.positions(state)), draw(S.positions(state))) for _ in range(draw(st.integers(0, 3)))]


@st.composite
def _totals_cases(draw: st.DrawFn) -> tuple[S.MLState, list[xo.Entry], list[tuple[Any, ...]]]:
    state = draw(S.ml_states())
    entries = draw(_exported(state))
    requests: list[tuple[Any, ...]] = []
    for _ in range(draw(st.integers(1, 4))):
        lower, upper = draw(S.positions(state)), draw(S.positions(state))
        if draw(st.integers(0, 4)) > 0:
            lower, upper = min(lower, upper), max(lower, upper)
        acked = draw(_acked(state, lower))
        expected = draw(st.sampled_from([None, 0, 1, "truth", "truth"]))
        requests.append((lower, upper, acked, expected))
    return state, entries, requests


def _entry_rows(topic: str, entries: list[xo.Entry]) -> list[tuple[Any, ...]]:
    return [
        (
            S.CLUSTER,
            topic,
            e.position,
            e.size_bytes,
            e.publish_time_ms,
            e.marker_type,
            *(e.txn or (None, None)),
            e.message_count,
        )
        for e in entries
    ]


def _compare(got: dict[str, Any], want: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    diff = {}
    for c, w in want.items():
        g = _pos(got[c]) if c.endswith("position") and got[c] is not None else got[c]
        if g != w:
            diff[c] = (w, g)
    return diff


@PROPERTY_SETTINGS
@given(cases=st.lists(_totals_cases(), min_size=60, max_size=80))
def test_unacked_entry_totals_matches_oracle(spark: SparkSession, cases: list[Any]) -> None:
    _check_totals_against_oracle(spark, cases)


@PROPERTY_SETTINGS
@given(cases=st.lists(_totals_cases(), min_size=60, max_size=80))
def test_unacked_entry_totals_matches_oracle_when_topics_span_arrow_batches(
    spark: SparkSession, cases: list[Any]
) -> None:
    """The prefix sweep walks Arrow batches of 3 rows: nearly every topic's entries and gap bounds span
    several batches (pieces joined before the walk; a topic starting exactly at a batch boundary)."""
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    saved = spark.conf.get(key, None)
    spark.conf.set(key, "3")
    try:
        _check_totals_against_oracle(spark, cases)
    finally:
        if saved is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, saved)


def _check_totals_against_oracle(spark: SparkSession, cases: list[Any]) -> None:
    assume(len({repr(c[0].ml) for c in cases}) > len(cases) // 4)
    entry_rows: list[tuple[Any, ...]] = []
    request_rows: list[tuple[Any, ...]] = []
    expected: dict[str, dict[str, Any] | None] = {}
    for i, (_state, entries, requests) in enumerate(cases):
        topic = S.topic_name(i)
        entry_rows += _entry_rows(topic, entries)
        for j, (lower, upper, acked, exp) in enumerate(requests):
            rid = f"{i}-{j}"
            totals = xo.unacked_totals(entries, lower, upper, acked)
            assert totals is not None
            want = totals.as_dict()
            exp_value = totals.entries if exp == "truth" else exp
            want["exported_entries_complete"] = None if exp_value is None else exp_value == totals.entries
            expected[rid] = want
            request_rows.append((S.CLUSTER, topic, rid, lower, upper, acked, exp_value))
    entries_df = _frame(spark, entry_rows, ENTRIES)
    requests_df = _frame(spark, request_rows, REQUESTS)
    got = _collect_totals(unacked_entry_totals(requests_df, entries_df))
    assert len(got) == len(request_rows), "one row per request"
    mismatches = {rid: d for rid, want in expected.items() if (d := _compare(got[rid], want or {}))}
    if mismatches:
        rid = next(iter(mismatches))
        i, j = map(int, rid.split("-"))
        state, entries, requests = cases[i]
        pytest.fail(
            f"{len(mismatches)} request(s) differ, e.g. {rid}: {mismatches[rid]}\n"
            f"request={requests[j]}\nentries={entries}\n{state.ml}"
        )


def _ms_to_ts(ms: int | None) -> dt.datetime | None:
    return None if ms is None else dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=ms)


@st.composite
def _cursor_cases(draw: st.DrawFn) -> tuple[S.Case, list[xo.Entry], int | None, int | None, list[int | None]]:
    case = draw(S.cursor_cases())
    entries = draw(_exported(case.state))
    added = draw(st.one_of(st.none(), st.integers(0, 60)))
    exported_at = draw(st.one_of(st.none(), st.integers(10**7, 2 * 10**7)))
    consumed = [draw(st.one_of(st.none(), st.integers(0, 70))) for _ in case.cursors]
    return case, entries, added, exported_at, consumed


@PROPERTY_SETTINGS
@given(
    cases=st.lists(_cursor_cases(), min_size=50, max_size=70),
    version=st.sampled_from(["2.10.6", "3.0.7", "4.1.3"]),
)
def test_exact_backlog_matches_oracle(spark: SparkSession, cases: list[Any], version: str) -> None:
    """Every output column for every cursor, against the oracle; one broker version per example (the
    version changes only the precise count and its use as the non-precise fallback, docs §1.8)."""
    assume(S.is_informative([c[0] for c in cases]))
    plain = [c[0] for c in cases]
    ledger_rows = S.ledger_rows(plain)
    ml_rows = [
        (*row, _ms_to_ts(exported_at), added)
        for row, (_c, _e, added, exported_at, _k) in zip(S.managed_ledger_rows(plain), cases, strict=True)
    ]
    cursor_rows: list[tuple[Any, ...]] = []
    entry_rows: list[tuple[Any, ...]] = []
    for i, (case, entries, _a, _x, consumed) in enumerate(cases):
        entry_rows += _entry_rows(S.topic_name(i), entries)
        cursor_rows += [
            (
                S.CLUSTER,
                S.topic_name(i),
                c.name,
                c.order,
                c.durable,
                c.mark_delete,
                list(c.individually_deleted),
                k,
            )
            for c, k in zip(case.cursors, consumed, strict=True)
        ]
    cursors = _frame(spark, cursor_rows, CURSORS)
    entries_df = _frame(spark, entry_rows, ENTRIES)
    mls = _frame(spark, ml_rows, ML)
    ledgers = _frame(spark, ledger_rows, LEDGERS)
    versions = [version]
    rows = S.run_versions(lambda v: exact_backlog(cursors, entries_df, mls, v, ledgers=ledgers), versions)
    got = {(r["_version"], r["topic"], r["cursor_name"]): r.asDict(recursive=True) for r in rows}
    assert len(rows) == len(versions) * len(cursor_rows), "one row per cursor and version"
    mismatches: list[S.Mismatch] = []
    for v in versions:
        sem = mo.semantics_for_version(v)
        for i, (case, entries, added, exported_at, consumed) in enumerate(cases):
            existing = case.state.existing_entries()
            for c, k in zip(case.cursors, consumed, strict=True):
                md, idm, lac = c.mark_delete, c.individually_deleted, case.ml.lac
                totals = xo.unacked_totals(entries, md, lac, idm)
                assert totals is not None
                t = totals.as_dict()
                try:
                    precise: int | None = mo.precise_backlog(
                        case.ml,
                        md,
                        idm,
                        sem.count_family,
                        sem.precise_backlog_guard,
                        guava=S.JAVA_GUAVA_RANGE_CHECKS,
                    )
                except mo.OracleIllegalArgumentError:
                    precise = None
                expected_existing = xo.existing_unacked(existing, md, lac, idm)
                want = {
                    "backlog_entries_exported": t["entries"],
                    **{f"backlog_{name}": t[name] for name in MEASURE_COLUMNS if name != "entries"},
                    "oldest_unacked_position": t["oldest_position"],
                    "oldest_unacked_publish_time_ms": t["oldest_publish_time_ms"],
                    "oldest_unacked_age_seconds": xo.age_seconds(exported_at, t["oldest_publish_time_ms"]),
                    "expected_backlog_entries": expected_existing,
                    "exported_entries_complete": expected_existing == t["entries"],
                    "precise_backlog_entries": precise,
                    "non_precise_backlog_entries": xo.non_precise_backlog(added, k, precise),
                }
                d = _compare(got[(v, S.topic_name(i), c.name)], want)
                if d:
                    mismatches.append(
                        S.Mismatch(v, i, f"cursor={c.name} consumed={k} added={added}", d, entries)
                    )
    assert not mismatches, S.mismatch_report(mismatches, [c[0] for c in cases])
