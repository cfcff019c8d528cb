"""Golden tests for pulsar_model.readers: docs §7.4 reader scenarios, the §3.8 item 5 ``findNewestMatching``
scenarios through the reset by time, and the broker's ``PersistentMessageFinderTest`` cases.

All frames of the module are computed by one module fixture in one Spark action (rows fetched as JSON),
then each test reads its rows. Versions: "new" = 4.1.3 (searches a closed range, 4.0.5+ narrowing, 4.x
counts, ledger ``hasMoreEntries``), "210" = 2.10.6 (classic search from the first ledger, ledger
``hasMoreEntries`` since apache/pulsar#20457 in 2.10.5), "2104" = 2.10.4 (the reset search asks the
cursor's ``hasMoreEntries``), "301" = 3.0.1 (reader ``md = p``). The 4.0.3/4.0.4 narrowing variant is
covered by tests/test_properties_readers.py.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pulsar_model import readers as R
from pulsar_model.engine.columns import LATEST
from tests.contract_frames import CURSOR_STATE, LEDGER_STATE, MANAGED_LEDGER_STATE, contract_schema
from tests.spark_conf import session_conf

LEDGERS = contract_schema("ledgers", [*LEDGER_STATE, "closed_at"])
ML = contract_schema("managed_ledgers", [*MANAGED_LEDGER_STATE, "exported_at"])
CURSORS = contract_schema("cursors", CURSOR_STATE)
ENTRIES = contract_schema(
    "entries", ["cluster", "topic", "ledger_id", "entry_id", "publish_time_ms", "broker_timestamp"]
)
MESSAGES = contract_schema(
    "messages",
    [
        "cluster",
        "topic",
        "ledger_id",
        "entry_id",
        "batch_index",
        "marker_type",
        "compacted_out",
        "publish_time_ms",
    ],
)
READER_REQ = contract_schema(
    "plan_requests",
    [
        "cluster",
        "topic",
        "request_id",
        "start_kind",
        "start_message_id",
        "inclusive",
        "rollback_seconds",
        "read_compacted",
        "initial_position",
    ],
)
RESET_REQ = contract_schema(
    "plan_requests", ["cluster", "topic", "request_id", "cursor_name", "timestamp_ms"]
)

NEW, V210, V301 = "4.1.3", "2.10.6", "3.0.1"
V2104 = "2.10.4"  # the last 2.10 patch without apache/pulsar#20457
T1 = 1_000_000  # base publish time (ms) of the PersistentMessageFinderTest topic

Pos = tuple[int, int]


def _ts(ms: int | None) -> Any:
    import datetime as dt

    return None if ms is None else dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)


class Topic:
    """One topic: closed ledgers ``(id, entries, closed_ms)``, the open ledger, LAC and publish times."""

    def __init__(
        self,
        name: str,
        closed: list[tuple[int, int, int | None]],
        current: int | None,
        cle: int,
        lac: Pos,
        publish: dict[Pos, int] | None = None,
        exported_ms: int | None = 10_000,
    ):
        self.name, self.closed, self.current, self.cle, self.lac = name, closed, current, cle, lac
        self.publish = publish or {}
        self.exported_ms = exported_ms

    def ledger_rows(self) -> list[tuple[Any, ...]]:
        rows = [("c", self.name, lid, n, n * 100, _ts(closed)) for lid, n, closed in self.closed]
        if self.current is not None:
            rows.append(("c", self.name, self.current, 0, 0, None))
        return rows

    def ml_row(self) -> tuple[Any, ...]:
        total = (sum(n for _, n, _ in self.closed) + self.cle) * 100
        return (
            "c",
            self.name,
            self.current,
            self.cle,
            self.cle * 100,
            self.lac,
            total,
            _ts(self.exported_ms),
        )

    def entry_rows(self, skip: frozenset[Pos] = frozenset()) -> list[tuple[Any, ...]]:
        return [
            ("c", self.name, p[0], p[1], ms, None) for p, ms in sorted(self.publish.items()) if p not in skip
        ]


def _times(positions: list[Pos], times: list[int]) -> dict[Pos, int]:
    return dict(zip(positions, times, strict=True))


# r1 - docs §7.4-3's state: L1 (0..4 closed), L2 open (0..2), LAC L2:2; publish 1000..5000, 6000..8000.
R1_POS = [(1, e) for e in range(5)] + [(2, e) for e in range(3)]
R1 = Topic("r1", [(1, 5, 5500)], 2, 3, (2, 2), _times(R1_POS, [1000 * (i + 1) for i in range(8)]))
# r5 - the first ledger is empty (closed): earliest reads "the first existing entry".
R5 = Topic("r5", [(1, 0, 100)], 2, 3, (2, 2), _times([(2, e) for e in range(3)], [1000, 2000, 3000]))
# odd / even - ManagedCursorTest.testFindNewestMatchingOdd*/Even*: 5 (4) entries p1.. in open ledger 7.
ODD = Topic("odd", [], 7, 5, (7, 4), _times([(7, e) for e in range(5)], [1000, 2000, 3000, 4000, 5000]))
EVEN = Topic("even", [], 7, 4, (7, 3), _times([(7, e) for e in range(4)], [1000, 2000, 3000, 4000]))
# out-of-order publish times: binary search and linear scan disagree.
SHUFFLED = Topic(
    "shuffled", [], 3, 5, (3, 4), _times([(3, e) for e in range(5)], [1000, 5000, 6000, 2000, 7000])
)
# PersistentMessageFinderTest.testPersistentMessageFinder (entriesPerLedger=2, reopened: L4 open and empty).
PMF_POS = [(1, 0), (1, 1), (2, 0), (2, 1), (3, 0)]
PMF = Topic(
    "pmf",
    [(1, 2, T1 + 150), (2, 2, T1 + 310), (3, 1, T1 + 1400)],
    4,
    0,
    (3, 0),
    _times(PMF_POS, [T1, T1 + 100, T1 + 200, T1 + 310, T1 + 320]),
)
# PersistentMessageFinderTest.testPersistentMessageFinderWhenLastMessageDelete: 4 entries, last one acked.
LASTDEL = Topic("lastdel", [], 5, 4, (5, 3), _times([(5, e) for e in range(4)], [1000, 2000, 3000, 4000]))
# an entry of the searched range is missing from the export
HOLE = Topic("hole", [], 9, 4, (9, 3), _times([(9, e) for e in range(4)], [1000, 2000, 3000, 4000]))
# fidelity/reader_batch_index_on_single_message.json: L1 closed (5 entries, 1:2 a 5-message batch), L2 open
# (3 entries, 2:0 a marker), LAC 2:2.
FA = 1_700_000_000_000
FID_A_POS = [(1, e) for e in range(5)] + [(2, e) for e in range(3)]
FID_A = Topic(
    "fid-a",
    [(1, 5, FA + 5500)],
    2,
    3,
    (2, 2),
    _times(FID_A_POS, [FA + t for t in (1000, 2000, 3000, 4000, 5000, 6500, 7500, 8500)]),
    exported_ms=FA + 18_500,
)
# fidelity/reader_rollback_search_fails.json: an empty closed first ledger 2, ledger 4 closed with 3 entries,
# ledger 5 open with 2; "now" 1700000016000.
FID_B_POS = [(4, 0), (4, 1), (4, 2), (5, 0), (5, 1)]
FID_B = Topic(
    "fid-b",
    [(2, 0, FA + 500), (4, 3, FA + 4000)],
    5,
    2,
    (5, 1),
    _times(FID_B_POS, [FA + t for t in (1500, 2500, 3500, 5000, 6000)]),
    exported_ms=FA + 16_000,
)
# 4.0.5+ narrowing starts at the last entry of the last ledger closed before t - skew: the empty closed
# ledger 4 gives (4,-1), a position no read can return.
NARROW_POS = [(3, 0), (3, 1), (3, 2), (6, 0), (6, 1)]
NARROW = Topic(
    "narrow",
    [(3, 3, 3500), (4, 0, 4000)],
    6,
    2,
    (6, 1),
    _times(NARROW_POS, [1000, 2000, 3000, 5000, 6000]),
    exported_ms=100_000,
)
TOPICS = [R1, R5, ODD, EVEN, SHUFFLED, PMF, LASTDEL, HOLE, FID_A, FID_B, NARROW]

MESSAGES_ROWS = [
    ("c", "r1", 1, 0, -1, None, False, 1000),
    ("c", "r1", 1, 1, -1, None, False, 2000),
    *[("c", "r1", 1, 2, i, None, False, 3000) for i in range(5)],  # a 5-message batch
    ("c", "r1", 1, 3, -1, None, False, 4000),
    ("c", "r1", 1, 4, -1, None, False, 5000),
    ("c", "r1", 2, 0, -1, 10, False, 6000),  # a replicated-subscription marker: never delivered
    ("c", "r1", 2, 1, -1, None, False, 7000),
    ("c", "r1", 2, 2, -1, None, False, 8000),
    *[("c", "r5", 2, e, -1, None, False, 1000 * (e + 1)) for e in range(3)],
    # fidelity/reader_batch_index_on_single_message.json ("batch_size" 5 at 1:2, "marker_type" 12 at 2:0)
    *[
        ("c", "fid-a", p[0], p[1], i, 12 if p == (2, 0) else None, False, FID_A.publish[p])
        for p in FID_A_POS
        for i in (range(5) if p == (1, 2) else [-1])
    ],
    *[("c", "fid-b", p[0], p[1], -1, None, False, FID_B.publish[p]) for p in FID_B_POS],
    *[("c", "narrow", p[0], p[1], -1, None, False, NARROW.publish[p]) for p in NARROW_POS],
    # hole: the search range's entry 9:1 is missing from the export
    *[("c", "hole", 9, e, -1, None, False, HOLE.publish[(9, e)]) for e in (0, 2, 3)],
]


def _reader(
    topic: str,
    rid: str,
    kind: str,
    sid: tuple[int, int, int] | None = None,
    inclusive: bool = False,
    rollback: int = 0,
    compacted: bool = False,
    initial: str = "Latest",
) -> tuple[Any, ...]:
    return ("c", topic, rid, kind, sid, inclusive, rollback, compacted, initial)


READER_ROWS = [
    _reader("r1", "s1-exclusive", "message_id", (1, 1, -1)),
    _reader("r1", "s2-exclusive", "message_id", (1, 2, 2)),
    _reader("r1", "s2-inclusive", "message_id", (1, 2, 2), inclusive=True),
    _reader("r1", "s2-last-index", "message_id", (1, 2, 4)),
    _reader("r1", "s3-latest", "latest"),
    _reader("r1", "s4-earliest", "earliest"),
    _reader("r5", "s4-earliest-empty-first", "earliest"),
    _reader("r1", "marker-skipped", "message_id", (1, 4, -1)),
    _reader("r1", "compacted", "message_id", (1, 5, -1), compacted=True),
    _reader("r1", "not-compacted", "message_id", (1, 5, -1)),
    _reader("r1", "ledger-start", "message_id", (2, 0, -1)),
    _reader("r1", "beyond-latest", "message_id", (2, 5, -1)),
    _reader("r1", "beyond-earliest", "message_id", (2, 5, -1), initial="Earliest"),
    _reader("r1", "latest-earliest", "latest", initial="Earliest"),
    _reader("r1", "rollback-5s", "earliest", rollback=5),
    _reader("r1", "rollback-100s", "earliest", rollback=100),
    _reader("r1", "bogus-kind", "middle"),
    _reader("r1", "bogus-initial", "earliest", initial="Sideways"),
    _reader("r1", "null-id", "message_id"),
    _reader("nope", "missing-topic", "earliest"),
    # ConsumerImpl's start filter, every batch-index / batched-entry combination (1:2 batched, 1:3 single)
    _reader("r1", "single-bi-inclusive", "message_id", (1, 3, 3), inclusive=True),
    _reader("r1", "single-bi-exclusive", "message_id", (1, 3, 3)),
    _reader("r1", "single-inclusive", "message_id", (1, 3, -1), inclusive=True),
    _reader("r1", "batch-no-bi-exclusive", "message_id", (1, 2, -1)),
    _reader("r1", "batch-no-bi-inclusive", "message_id", (1, 2, -1), inclusive=True),
    _reader("r1", "batch-bi-past-end-inclusive", "message_id", (1, 2, 7), inclusive=True),
    _reader("r1", "batch-bi-int-max", "message_id", (1, 2, 2**31 - 1)),
    _reader("r1", "marker-bi-inclusive", "message_id", (2, 0, 1), inclusive=True),
    _reader("r1", "compacted-single-bi-inclusive", "message_id", (1, 4, 0), inclusive=True, compacted=True),
    _reader("r1", "latest-inclusive", "latest", inclusive=True),
    # a rollback whose search fails on a read: the message id is replaced by earliest as well
    _reader("fid-b", "rollback-message-id", "message_id", (4, 1, -1), rollback=3),
    _reader("hole", "rollback-not-exported", "earliest", rollback=5),
]

#: Both fidelity cases and the other rollback reads that fail, run on every version line.
FID_READER_ROWS = [
    _reader("fid-a", "fidelity", "message_id", (1, 3, 3), inclusive=True),
    _reader("fid-b", "fidelity", "earliest", rollback=3),
    _reader("narrow", "rollback-empty-closed-ledger", "earliest", rollback=10),
    _reader("narrow", "rollback-empty-closed-ledger-compacted", "earliest", rollback=10, compacted=True),
]
#: frame of each version line: 4.1.3 answers them in ``reader_new``, the older lines in frames of their own
FID_FRAMES = {
    "210": "fidelity_210",
    "307": "fidelity_307",
    "337": "fidelity_337",
    "404": "fidelity_404",
    "new": "reader_new",
}
#: 3.3.7 received #22792, #23919 and #24219 together (its release notes): the 4.0.5+ search
FID_VERSIONS = {"210": V210, "307": "3.0.7", "337": "3.3.7", "404": "4.0.4"}


def _reset(topic: str, rid: str, t: int | None, cursor: str = "sub") -> tuple[Any, ...]:
    return ("c", topic, rid, cursor, t)


RESET_ROWS = [
    *[_reset("odd", f"k{k}", 1000 * k + 500) for k in range(6)],  # k entries older than the timestamp
    *[_reset("even", f"k{k}", 1000 * k + 500) for k in range(5)],
    _reset("odd", "equal-time", 3000),  # "published earlier than": an entry at exactly t does not match
    _reset("shuffled", "t3000", 3000),
    _reset("pmf", "timestamp", T1 + 300),
    _reset("pmf", "begin", T1 - 10),
    _reset("pmf", "end", T1 + 1500),
    _reset("lastdel", "end", 100_000),
    _reset("hole", "t2500", 2500),
    _reset("odd", "no-cursor", 2500, cursor="ghost"),
    _reset("odd", "null-time", None),
    _reset("nope", "missing-topic", 2500),
    _reset("fid-b", "first-ledger-empty", FA + 13_000),  # the fidelity rollback, asked through the admin API
]

CURSOR_ROWS = [
    ("c", t.name, "sub", 0, True, (t.lac[0], -1), [] if t is not LASTDEL else [((5, 2), (5, 3))])
    for t in TOPICS
]


def _json_rows(name: str, df: DataFrame) -> DataFrame:
    body = F.to_json(F.struct(*[F.col(f"`{c}`") for c in df.columns]), {"ignoreNullFields": "false"})
    return df.select(F.lit(name).alias("frame"), body.alias("row"))


@pytest.fixture(scope="module")
def out(spark: SparkSession) -> dict[str, dict[tuple[str, str], dict[str, Any]]]:
    """``out[frame][(topic, request_id)] -> row`` for every frame, all computed in one Spark action."""
    ledgers = spark.createDataFrame([r for t in TOPICS for r in t.ledger_rows()], LEDGERS)
    mls = spark.createDataFrame([t.ml_row() for t in TOPICS], ML)
    entries = spark.createDataFrame(
        [r for t in TOPICS for r in t.entry_rows(frozenset({(9, 1)}) if t is HOLE else frozenset())], ENTRIES
    )
    messages = spark.createDataFrame(MESSAGES_ROWS, MESSAGES)
    cursors = spark.createDataFrame(CURSOR_ROWS, CURSORS)
    readers = spark.createDataFrame(READER_ROWS + FID_READER_ROWS, READER_REQ)
    fid_readers = spark.createDataFrame(FID_READER_ROWS, READER_REQ)
    resets = spark.createDataFrame(RESET_ROWS, RESET_REQ)
    builders: dict[str, Callable[[], DataFrame]] = {
        "reader_new": partial(R.reader_start_positions, readers, ledgers, mls, messages, NEW),
        # no messages and no rollback column: the cheap plan of the older mark-delete rule
        "reader_301": partial(
            R.reader_start_positions, readers.drop("rollback_seconds"), ledgers, mls, None, V301
        ),
    }
    for tag, version in FID_VERSIONS.items():
        builders[f"fidelity_{tag}"] = partial(
            R.reader_start_positions, fid_readers, ledgers, mls, messages, version
        )
    for tag, version in (("new", NEW), ("210", V210), ("2104", V2104)):
        builders[f"reset_{tag}"] = partial(
            R.reset_cursor_by_time_plan,
            resets,
            cursors,
            ledgers,
            mls,
            entries,
            version,
            ledger_close_clock_skew_ms=0,
        )
    with session_conf(spark):
        frames = [_json_rows(name, build()) for name, build in builders.items()]
        union = frames[0]
        for frame in frames[1:]:
            union = union.unionByName(frame)
        rows = union.collect()
    result: dict[str, dict[tuple[str, str], dict[str, Any]]] = defaultdict(dict)
    for row in rows:
        data = json.loads(row["row"])
        key = (data["topic"], data["request_id"])
        assert key not in result[row["frame"]], f"duplicate output row {key} in {row['frame']}"
        result[row["frame"]][key] = data
    return result


def pos(value: dict[str, int] | None) -> Pos | None:
    return None if value is None else (value["ledger_id"], value["entry_id"])


def mid(value: dict[str, int] | None) -> tuple[int, int, int] | None:
    return None if value is None else (value["ledger_id"], value["entry_id"], value["batch_index"])


def state(row: dict[str, Any]) -> tuple[Pos | None, Pos | None]:
    return pos(row["mark_delete_position"]), pos(row["read_position"])


# --- docs §7.4 ---------------------------------------------------------------------------------------------


def test_reader_start_positions_scenario1_exclusive_message_id(out: dict[str, Any]) -> None:
    """docs §7.4-1: "start L:E (non-batched, exclusive) -> broker cursor md = previous(L:E), rp = L:E; client
    drops L:E, first delivered message is the entry after L:E."
    """
    row = out["reader_new"][("r1", "s1-exclusive")]
    assert pos(row["broker_start_position"]) == (1, 0)  # stepped back one entry (§7.2)
    assert state(row) == ((1, 0), (1, 1))
    assert mid(row["first_delivered"]) == (1, 2, 0)  # L1:2 is a batch: its first message
    assert row["error"] is None


def test_reader_start_positions_scenario2_batch_index(out: dict[str, Any]) -> None:
    """docs §7.4-2: "start L:E batch index 2 of a 5-message batch, exclusive -> broker re-sends entry L:E;
    client delivers batch indexes 3 and 4 then continues; inclusive -> indexes 2, 3, 4."
    """
    rows = out["reader_new"]
    for rid in ("s2-exclusive", "s2-inclusive", "s2-last-index"):
        assert state(rows[("r1", rid)]) == ((1, 1), (1, 2)), rid  # the entry itself is read again
    assert mid(rows[("r1", "s2-exclusive")]["first_delivered"]) == (1, 2, 3)
    assert mid(rows[("r1", "s2-inclusive")]["first_delivered"]) == (1, 2, 2)
    # every index of the batch up to the last one was seen: delivery continues with the next entry
    assert mid(rows[("r1", "s2-last-index")]["first_delivered"]) == (1, 3, -1)


def test_reader_start_positions_scenario3_latest(out: dict[str, Any]) -> None:
    """docs §7.4-3: "start latest, ledgers L1 (0..4 closed), L2 open (0..2), LAC L2:2 -> md = L2:2,
    rp = L2:3." Nothing is delivered until a new message arrives."""
    row = out["reader_new"][("r1", "s3-latest")]
    assert pos(row["broker_start_position"]) == (LATEST[0], LATEST[1] - 1)
    assert state(row) == ((2, 2), (2, 3))
    assert row["first_delivered"] is None and row["error"] is None


def test_reader_start_positions_scenario4_earliest(out: dict[str, Any]) -> None:
    """docs §7.4-4: "start earliest, first ledger L1 -> md = (L1,-1), rp = L1:0 (or the first existing
    entry)."
    """
    row = out["reader_new"][("r1", "s4-earliest")]
    assert state(row) == ((1, -1), (1, 0))
    assert mid(row["first_delivered"]) == (1, 0, -1)
    empty_first = out["reader_new"][("r5", "s4-earliest-empty-first")]
    assert state(empty_first) == ((1, -1), (2, 0))
    assert mid(empty_first["first_delivered"]) == (2, 0, -1)


def test_reader_start_positions_skips_markers(out: dict[str, Any]) -> None:
    """Markers never reach clients: after the dropped start entry L1:4 the marker L2:0 is skipped too."""
    row = out["reader_new"][("r1", "marker-skipped")]
    assert state(row) == ((1, 3), (1, 4))
    assert mid(row["first_delivered"]) == (2, 1, -1)


def test_reader_start_positions_read_compacted_reads_p_next(out: dict[str, Any]) -> None:
    """docs §7.2 recover(p): "rp = p.next if readCompacted else nextValid(p)" - start L1:5 (past the closed
    ledger's end) -> p = L1:4: the compacted reader keeps the non-existent L1:5, the plain one moves to L2:0;
    md = previous(rp) = L1:4 either way."""
    assert state(out["reader_new"][("r1", "compacted")]) == ((1, 4), (1, 5))
    assert state(out["reader_new"][("r1", "not-compacted")]) == ((1, 4), (2, 0))
    assert mid(out["reader_new"][("r1", "compacted")]["first_delivered"]) == (2, 1, -1)


def test_reader_start_positions_old_mark_delete_is_p(out: dict[str, Any]) -> None:
    """docs §7.2: "md = getPreviousPosition(rp) # 3.x; older: md = p" - start L2:0 -> p = (L2,-1)."""
    assert state(out["reader_new"][("r1", "ledger-start")]) == ((1, 4), (2, 0))
    assert state(out["reader_301"][("r1", "ledger-start")]) == ((2, -1), (2, 0))
    assert out["reader_301"][("r1", "ledger-start")]["first_delivered"] is None  # no messages given


def test_reader_start_positions_beyond_lac_uses_initial_position(out: dict[str, Any]) -> None:
    """docs §7.2: "if start is None or start > LAC: Latest: md = LAC; rp = nextValid(LAC); Earliest: md =
    (firstLedger, -1); rp = nextValid(md)"."""
    rows = out["reader_new"]
    assert state(rows[("r1", "beyond-latest")]) == ((2, 2), (2, 3))
    assert state(rows[("r1", "beyond-earliest")]) == ((1, -1), (1, 0))
    assert state(rows[("r1", "latest-earliest")]) == ((1, -1), (1, 0))


def test_reader_start_positions_rollback_resets_by_publish_time(out: dict[str, Any]) -> None:
    """docs §7.2: "if start_message_rollback_duration_sec > 0: resetCursor(timestamp = now - sec*1000)".
    Export at 10 s: 5 s back -> newest entry before 5000 ms is L1:3 -> rp = L1:4; 100 s back -> nothing
    older -> (first ledger, 0). The client starts from earliest, so nothing is filtered."""
    rows = out["reader_new"]
    assert state(rows[("r1", "rollback-5s")]) == ((1, 3), (1, 4))
    assert mid(rows[("r1", "rollback-5s")]["first_delivered"]) == (1, 4, -1)
    assert state(rows[("r1", "rollback-100s")]) == ((1, -1), (1, 0))


def test_reader_start_positions_reports_errors(out: dict[str, Any]) -> None:
    rows = out["reader_new"]
    assert "unknown start_kind middle" in rows[("r1", "bogus-kind")]["error"]
    assert "unknown initial_position Sideways" in rows[("r1", "bogus-initial")]["error"]
    assert "start_message_id" in rows[("r1", "null-id")]["error"]
    assert "no managed_ledgers row" in rows[("nope", "missing-topic")]["error"]
    for rid in ("bogus-kind", "null-id"):
        assert state(rows[("r1", rid)]) == (None, None) and rows[("r1", rid)]["first_delivered"] is None


# --- §3.8 item 5: findNewestMatching through the reset by time ---------------------------------------------


def test_reset_cursor_by_time_plan_find_newest_matching_odd(out: dict[str, Any]) -> None:
    """docs §3.8-5: "ManagedCursorTest.testFindNewestMatchingOdd1..5: 5 entries where the first k are
    'expired' -> result is the k-th entry (k=1 -> p1, ..., k=5 -> p5)"; and "testFindNewestMatching: 5
    entries, none expired -> null" (then the reset goes to the first position)."""
    for frame in ("reset_new", "reset_210"):
        rows = out[frame]
        for k in range(6):
            row = rows[("odd", f"k{k}")]
            found = None if k == 0 else (7, k - 1)
            assert pos(row["found_position"]) == found, (frame, k)
            assert pos(row["linear_scan_position"]) == found
            assert row["publish_times_monotonic"] is True
            assert state(row) == ((7, k - 1), (7, k)), (frame, k)  # found.getNext(); none -> (7, 0)
            assert row["individually_deleted"] == [] and row["error"] is None


def test_reset_cursor_by_time_plan_find_newest_matching_even(out: dict[str, Any]) -> None:
    """docs §3.8-5: "testFindNewestMatchingEven1..: same rule with 4 entries"."""
    for frame in ("reset_new", "reset_210"):
        for k in range(5):
            row = out[frame][("even", f"k{k}")]
            assert pos(row["found_position"]) == (None if k == 0 else (7, k - 1)), (frame, k)
            assert state(row) == ((7, k - 1), (7, k))


def test_reset_cursor_by_time_plan_entry_at_timestamp_is_not_older(out: dict[str, Any]) -> None:
    """apache/pulsar#6393 "Seek to the first one >= timestamp": the finder matches ``ts < t``."""
    row = out["reset_new"][("odd", "equal-time")]
    assert pos(row["found_position"]) == (7, 1)
    assert pos(row["read_position"]) == (7, 2)  # the entry published at exactly t is read first


def test_reset_cursor_by_time_plan_binary_search_differs_from_linear_scan(out: dict[str, Any]) -> None:
    """Publish times 1000, 5000, 6000, 2000, 7000 and t = 3000: the binary search probes p1, p5, p3, p2 and
    settles on p1; a linear scan finds p4 (2000 ms)."""
    for frame in ("reset_new", "reset_210"):
        row = out[frame][("shuffled", "t3000")]
        assert pos(row["found_position"]) == (3, 0)
        assert pos(row["linear_scan_position"]) == (3, 3)
        assert row["publish_times_monotonic"] is False
        assert state(row) == ((3, 0), (3, 1))


def test_reset_cursor_by_time_plan_persistent_message_finder_test(out: dict[str, Any]) -> None:
    """PersistentMessageFinderTest.testPersistentMessageFinder (entriesPerLedger=2): retained1..3, the
    timestamp, afterresetposition, not-read; after a reopen: find(timestamp) = retained3's position,
    find(beginTimestamp) = null, find(endTimestamp) = the last position. 4.1.3 narrows the range by ledger
    close times (clock skew 0, as the test passes) and its "check last" probe reads one entry past the
    narrowed end; 2.10.6 searches from the first ledger."""
    for frame in ("reset_new", "reset_210"):
        rows = out[frame]
        assert pos(rows[("pmf", "timestamp")]["found_position"]) == (2, 0), frame
        assert pos(rows[("pmf", "begin")]["found_position"]) is None, frame
        assert state(rows[("pmf", "begin")]) == ((1, -1), (1, 0))
        assert pos(rows[("pmf", "end")]["found_position"]) == (3, 0), frame
        # L3's last entry + 1 is not valid (L3 closed): the reset reads from the empty open ledger L4
        assert state(rows[("pmf", "end")]) == ((3, 0), (4, 0)), frame


def test_reset_cursor_by_time_plan_acked_tail_stops_cursor_search(out: dict[str, Any]) -> None:
    """PersistentMessageFinderTest.testPersistentMessageFinderWhenLastMessageDelete (issue #20368): the
    last entry is acknowledged; brokers that ask the cursor's ``hasMoreEntries`` (2.10.4) stop at the first
    entry, those asking the ledger (apache/pulsar#20457: ``ManagedCursorImpl.asyncFindNewestMatching``
    builds ``OpFindNewest`` over the ledger from tag v2.10.5 on) find the last position."""
    assert pos(out["reset_new"][("lastdel", "end")]["found_position"]) == (5, 3)
    assert pos(out["reset_210"][("lastdel", "end")]["found_position"]) == (5, 3)
    old = out["reset_2104"][("lastdel", "end")]
    assert pos(old["found_position"]) == (5, 0)
    assert state(old) == ((5, 0), (5, 1))


def test_reset_cursor_by_time_plan_reports_missing_entries_and_errors(out: dict[str, Any]) -> None:
    rows = out["reset_new"]
    hole = rows[("hole", "t2500")]
    assert hole["error"].startswith("entries not exported for hole")
    assert state(hole) == (None, None) and hole["found_position"] is None
    assert "cursor not found" in rows[("odd", "no-cursor")]["error"]
    assert rows[("odd", "null-time")]["error"] == "timestamp_ms is null"
    assert "no managed_ledgers row" in rows[("nope", "missing-topic")]["error"]
    assert rows[("nope", "missing-topic")]["individually_deleted"] is None


# --- fidelity cases: Pulsar's own code disagreed with the library (docs §7.3, §7.5) -------------------------


def _expected_row(
    topic: str,
    rid: str,
    request: tuple[Any, ...],
    start: Pos,
    md: Pos,
    rp: Pos,
    first: tuple[int, int, int] | None,
    rollback_failure: str | None,
) -> dict[str, Any]:
    """A whole output row of ``reader_start_positions`` (the request columns carried, then the answer)."""
    names = READER_REQ.fieldNames()
    row = dict(zip(names, request, strict=True))
    sid = row["start_message_id"]
    row["start_message_id"] = (
        None if sid is None else dict(zip(("ledger_id", "entry_id", "batch_index"), sid, strict=True))
    )

    def p(value: Pos) -> dict[str, int]:
        return {"ledger_id": value[0], "entry_id": value[1]}

    return {
        **row,
        "broker_start_position": p(start),
        "mark_delete_position": p(md),
        "read_position": p(rp),
        "first_delivered": None
        if first is None
        else dict(zip(("ledger_id", "entry_id", "batch_index"), first, strict=True)),
        "rollback_failure": rollback_failure,
        "error": None,
    }


def _fid_request(topic: str, rid: str) -> tuple[Any, ...]:
    return next(r for r in FID_READER_ROWS if r[1] == topic and r[2] == rid)


def test_reader_start_positions_fidelity_batch_index_on_single_message(out: dict[str, Any]) -> None:
    """fidelity/reader_batch_index_on_single_message.json: "batch index 3 on non-batched 1:3, inclusive: the
    client keeps it (isPriorEntryIndex)" - broker start 1:2, md 1:2, rp 1:3, first received 1:3 (batch
    index -1). ConsumerImpl sends a message without batch metadata down the single-message path, which
    compares entry ids only; every version line answers the same (the filter is the client's)."""
    expected = _expected_row(
        "fid-a", "fidelity", _fid_request("fid-a", "fidelity"), (1, 2), (1, 2), (1, 3), (1, 3, -1), None
    )
    for tag, frame in FID_FRAMES.items():
        assert out[frame][("fid-a", "fidelity")] == expected, tag


def test_reader_start_positions_fidelity_rollback_search_fails(out: dict[str, Any]) -> None:
    """fidelity/reader_rollback_search_fails.json: "first ledger empty: the search reads (2,0) and fails;
    the reader is created anyway" - broker start (-1,-1), md (2,-1), rp 4:0, first received 4:0; the
    reset's failure ("BookKeeper read of 2:0 failed") is only logged by resetSubscriptionCursor. The search
    range is not narrowed on any line (60 s skew: no ledger closed before t - skew), so 2.10, 3.0 and 4.x
    all read (2,0) first."""
    expected = _expected_row(
        "fid-b",
        "fidelity",
        _fid_request("fid-b", "fidelity"),
        (-1, -1),
        (2, -1),
        (4, 0),
        (4, 0, -1),
        "ManagedLedgerException: reading entry 2:0 fails (no such entry)",
    )
    for tag, frame in FID_FRAMES.items():
        assert out[frame][("fid-b", "fidelity")] == expected, tag


def test_reader_start_positions_rollback_from_empty_closed_ledger_start(out: dict[str, Any]) -> None:
    """4.0.5+ narrowing (apache/pulsar#24219) starts the search at (4,-1), the "last entry" of the empty
    ledger 4 closed before t - skew: that read fails, the reader stays at earliest (md (3,-1), rp 3:0; with
    readCompacted rp = (3,-1).next, the same). 4.0.4 starts at entry 0 of the open ledger instead (its
    second-to-last rule), 2.10 and 3.0 at (3,0): they find 6:1 and reset after it (md 6:1, rp 6:2). 3.3.7
    got the three search PRs at once (its release notes) and fails like 4.1.3."""
    for rid in ("rollback-empty-closed-ledger", "rollback-empty-closed-ledger-compacted"):
        for frame in ("reader_new", FID_FRAMES["337"]):
            new = out[frame][("narrow", rid)]
            assert state(new) == ((3, -1), (3, 0)), (frame, rid)
            failure = "ManagedLedgerException: reading entry 4:-1 fails (no such entry)"
            assert new["rollback_failure"] == failure, (frame, rid)
            assert mid(new["first_delivered"]) == (3, 0, -1) and new["error"] is None, (frame, rid)
        for tag in ("210", "307", "404"):
            old = out[FID_FRAMES[tag]][("narrow", rid)]
            assert state(old) == ((6, 1), (6, 2)), (tag, rid)
            assert old["rollback_failure"] is None and old["first_delivered"] is None, (tag, rid)


def test_reader_start_positions_rollback_ignores_message_id_and_failure_keeps_earliest(
    out: dict[str, Any],
) -> None:
    """ReaderBuilderImpl.createAsync: a rollback duration makes the client subscribe from earliest, so a
    failed search leaves the earliest cursor whatever start id was asked, and nothing is filtered."""
    row = out["reader_new"][("fid-b", "rollback-message-id")]
    assert pos(row["broker_start_position"]) == (-1, -1)
    assert state(row) == ((2, -1), (4, 0))
    assert mid(row["first_delivered"]) == (4, 0, -1)
    assert (
        row["rollback_failure"].startswith("ManagedLedgerException: reading entry 2:0")
        and row["error"] is None
    )


def test_reader_start_positions_rollback_other_failures_stay_errors(out: dict[str, Any]) -> None:
    """Only a failed read is logged and forgiven; a search the export cannot answer (entry 9:1 of the range
    missing) is an error with no positions, and readers without rollback never report a reset failure."""
    row = out["reader_new"][("hole", "rollback-not-exported")]
    assert row["error"].startswith("entries not exported for hole")
    assert state(row) == (None, None) and row["rollback_failure"] is None
    assert all(r["rollback_failure"] is None for r in out["reader_new"].values() if not r["rollback_seconds"])


def test_reset_cursor_by_time_plan_failed_read_is_an_error(out: dict[str, Any]) -> None:
    """The same search through the admin reset (PersistentSubscription.resetCursor(long)) fails the call:
    only the reader's rollback path swallows the failure (2.10 reads (2,0) first)."""
    row = out["reset_210"][("fid-b", "first-ledger-empty")]
    assert row["error"] == "ManagedLedgerException: reading entry 2:0 fails (no such entry)"
    assert state(row) == (None, None)


# --- ConsumerImpl's start filter: every batch-index / entry-kind combination (docs §7.3) --------------------


@pytest.mark.parametrize(
    ("rid", "first"),
    [
        ("single-bi-inclusive", (1, 3, -1)),  # isPriorEntryIndex: 3 < 3 is false -> kept
        ("single-bi-exclusive", (1, 4, -1)),  # 3 <= 3 -> dropped, the next entry
        ("single-inclusive", (1, 3, -1)),
        ("batch-no-bi-exclusive", (1, 2, 0)),  # isPriorBatchIndex(i): i <= -1 never holds: whole batch
        ("batch-no-bi-inclusive", (1, 2, 0)),
        ("batch-bi-past-end-inclusive", (1, 3, -1)),  # every index of the 5-message batch is prior to 7
        ("batch-bi-int-max", (1, 3, -1)),  # Integer.MAX_VALUE + 1 stays a BIGINT (ANSI)
        ("marker-bi-inclusive", (2, 1, -1)),  # a marker is never dispatched, whatever the filter says
        ("compacted-single-bi-inclusive", (1, 4, -1)),  # readCompacted: rp = p.next = the start entry
    ],
)
def test_reader_start_positions_client_filter_of_the_start_entry(
    out: dict[str, Any], rid: str, first: tuple[int, int, int]
) -> None:
    row = out["reader_new"][("r1", rid)]
    assert mid(row["first_delivered"]) == first
    assert row["error"] is None and row["rollback_failure"] is None


def test_reader_start_positions_latest_inclusive_delivers_nothing_yet(out: dict[str, Any]) -> None:
    """latest + startMessageIdInclusive: the Java client subscribes from latest (isSameEntry never holds for
    (MAX, MAX)); only hasMessageAvailable() seeks to the last message (apache/pulsar#10483, PIP-150)."""
    row = out["reader_new"][("r1", "latest-inclusive")]
    assert state(row) == ((2, 2), (2, 3)) and row["first_delivered"] is None
