"""Property tests: pulsar_model.readers agrees with the plain-Python oracle tests/oracle/readers.py.

Each hypothesis example is 30-45 random topics (managed-ledger states from tests/oracle/strategies.py:
deleted and empty ledgers, ``(L,-1)`` and past-the-end positions, sparse ledger ids, no open ledger, LAC in
a trimmed ledger) with random publish times (ties, out-of-order runs, broker-entry timestamps), ledger
close times, batched / non-batched / marker messages, entries missing from the export, and reader /
reset requests: start ids carrying any batch index on any entry (batched, single messages, markers,
positions that do not exist, ``Integer.MAX_VALUE``), rollbacks reaching before the first entry, and
rollback searches that fail on a read (an empty first ledger, a narrowed start ``(L,-1)`` in an empty
closed ledger). Every version is run on the same frames, unioned and collected in one Spark action.

Versions: 2.8.0 (2.x-old arithmetic, reader ``md = p``, classic search asking the cursor), 2.10.6 (3.x
arithmetic, cursor ``hasMoreEntries``), 3.0.7 (ledger ``hasMoreEntries``), 4.0.4 (closed-range search,
first-entry narrowing, 3.x counts), 4.1.3 (last-entry narrowing, 4.x counts). The Spark property and the
search function without Spark run all of them.

``PULSAR_PROPERTY_EXAMPLES`` (default 1) sets the number of examples of the Spark property; the property
without Spark runs 60 times as many.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, Verbosity, assume, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pulsar_model import readers as R
from tests.oracle import readers as o
from tests.oracle import strategies as S
from tests.oracle.managed_ledger import Cursor, ManagedLedger, Position
from tests.spark_conf import session_conf

VERSIONS = ["2.8.0", "2.10.6", "3.0.7", "4.0.4", "4.1.3"]
#: The Spark property runs the reader mapping and the reset on every version (one plan each in the action);
#: the per-topic search function itself is checked on every version without Spark, on many more examples.
READER_VERSIONS = VERSIONS
RESET_VERSIONS = VERSIONS
#: Clock skew of the 4.0.3+ narrowing in these tests: small next to the generated time steps, so it narrows.
SKEW_MS = 1500
BASE_MS = 1_700_000_000_000

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:Generating overly large repr")]

PROPERTY_SETTINGS = S.PROPERTY_SETTINGS

POS = "struct<ledger_id:bigint,entry_id:bigint>"
MID = "struct<ledger_id:bigint,entry_id:bigint,batch_index:int>"
LEDGERS = (
    "cluster string, topic string, ledger_id bigint, entries bigint, size_bytes bigint, closed_at timestamp"
)
ML = (
    "cluster string, topic string, current_ledger_id bigint, current_ledger_entries bigint, "
    f"current_ledger_size_bytes bigint, last_confirmed_entry {POS}, total_size_bytes bigint, "
    "exported_at timestamp"
)
ENTRIES = (
    "cluster string, topic string, ledger_id bigint, entry_id bigint, publish_time_ms bigint, "
    "broker_timestamp timestamp"
)
MESSAGES = (
    "cluster string, topic string, ledger_id bigint, entry_id bigint, batch_index int, marker_type int, "
    "compacted_out boolean, publish_time_ms bigint"
)
READER_REQ = (
    f"cluster string, topic string, request_id bigint, start_kind string, start_message_id {MID}, "
    "inclusive boolean, rollback_seconds bigint, read_compacted boolean, initial_position string"
)

RESET_REQ = "cluster string, topic string, request_id bigint, cursor_name string, timestamp_ms bigint"


@dataclass
class TimeCase:
    state: S.MLState
    stamps: dict[Position, o.Stamp]
    exported: set[Position]
    closed_at: dict[int, int | None]
    exported_ms: int
    messages: list[o.Message] = field(default_factory=list)
    cursors: list[Cursor] = field(default_factory=list)
    readers: list[o.ReaderRequest] = field(default_factory=list)
    resets: list[tuple[str, int]] = field(default_factory=list)

    def describe(self) -> str:
        ml = self.state.ml
        lines = [
            f"  ledgers={ml.ledgers} current={ml.current_ledger_id}/{ml.current_ledger_entries} LAC={ml.lac}",
            f"  closed_at={self.closed_at} exported_ms={self.exported_ms}",
            f"  stamps={[(p, s.publish_ms - BASE_MS, s.broker_ms) for p, s in sorted(self.stamps.items())]}",
            f"  not exported={sorted(set(self.stamps) - self.exported)}",
            f"  batches={sorted({(m.ledger, m.entry) for m in self.messages if m.batch_index >= 0})}",
            f"  markers={sorted({(m.ledger, m.entry) for m in self.messages if m.marker})}",
        ]
        lines += [f"  cursor {c.name} idm={c.individually_deleted}" for c in self.cursors]
        return "\n".join(lines)


def _without_empty_head(state: S.MLState) -> S.MLState:
    """The state with its leading empty closed ledgers trimmed (the broker deletes empty ledgers on close).

    Kept only when a later ledger has entries, so LAC stays where it is.
    """
    ml = state.ml
    ids = list(ml.ledgers)
    drop: list[int] = []
    for lid in ids[:-1]:
        if lid == ml.current_ledger_id or ml.ledgers[lid][0] > 0:
            break
        drop.append(lid)
    if not drop or state.total_entries == 0:
        return state
    ledgers = {lid: v for lid, v in ml.ledgers.items() if lid not in drop}
    trimmed = ManagedLedger(
        ledgers,
        ml.current_ledger_id,
        ml.current_ledger_entries,
        ml.current_ledger_size,
        ml.lac,
        ml.total_size,
    )
    return S.MLState(trimmed, state.trimmed + [(lid, 1) for lid in drop], state.gap_ids)


@st.composite
def time_cases(draw: st.DrawFn) -> TimeCase:
    # an empty closed first ledger makes the classic search fail at its first read (the broker reads
    # (first ledger, 0)): keep such states, but not in every case
    state = draw(S.ml_states())
    if draw(st.booleans()):
        state = _without_empty_head(state)
    ml = state.ml
    existing = state.existing_entries()
    # publish times: mostly increasing with ties, sometimes an out-of-order entry; some broker timestamps
    stamps: dict[Position, o.Stamp] = {}
    now = BASE_MS
    shuffled = draw(st.integers(0, 3)) == 0
    with_broker = draw(st.integers(0, 3)) == 0
    for i, p in enumerate(existing):
        now += draw(st.sampled_from([0, 1, 500, 1000, 2500]))
        publish = now - draw(st.integers(0, 4000)) if shuffled and draw(st.integers(0, 3)) == 0 else now
        broker = BASE_MS + 1000 * i + 7 if with_broker and draw(st.booleans()) else None
        stamps[p] = o.Stamp(publish, broker)
    exported = set(stamps)
    if existing and draw(st.integers(0, 7)) == 0:
        exported -= set(draw(st.lists(st.sampled_from(existing), min_size=1, max_size=2)))
    # close times: around the last publish time of the ledger, sometimes missing
    closed_at: dict[int, int | None] = {}
    last_close = BASE_MS
    for lid in ml.ledgers:
        if lid == ml.current_ledger_id:
            continue
        own = [stamps[p].publish_ms for p in existing if p[0] == lid]
        last_close = max([last_close, *own]) + draw(st.sampled_from([0, 1, 200, 3000]))
        closed_at[lid] = None if draw(st.integers(0, 9)) == 0 else last_close
    exported_ms = max([BASE_MS, *(s.publish_ms for s in stamps.values())]) + draw(st.integers(0, 5000))
    case = TimeCase(state, stamps, exported, closed_at, exported_ms)
    case.messages = draw(_messages(existing))
    case.cursors = draw(S.cursors_for(state, max_cursors=2, min_cursors=1))
    times = [s.publish_ms for s in stamps.values()] or [BASE_MS]
    for c in case.cursors:
        for _ in range(draw(st.integers(1, 2))):
            pick = draw(st.sampled_from(times)) + draw(st.sampled_from([-1, 0, 1, 700]))
            case.resets.append(
                (c.name, draw(st.one_of(st.just(pick), st.integers(BASE_MS - 2000, max(times) + 3000))))
            )
    case.readers = [draw(_reader_requests(state, case)) for _ in range(draw(st.integers(1, 4)))]
    return case


@st.composite
def _messages(draw: st.DrawFn, existing: list[Position]) -> list[o.Message]:
    out: list[o.Message] = []
    for p in existing:
        kind = draw(st.sampled_from(["single", "single", "batch", "marker"]))
        if kind == "batch":
            out += [o.Message(p[0], p[1], i) for i in range(draw(st.integers(1, 4)))]
        else:
            out.append(o.Message(p[0], p[1], -1, marker=kind == "marker"))
    return out


@st.composite
def _reader_requests(draw: st.DrawFn, state: S.MLState, case: TimeCase) -> o.ReaderRequest:
    batches: dict[Position, int] = {}
    for m in case.messages:
        if m.batch_index >= 0:
            batches[(m.ledger, m.entry)] = max(batches.get((m.ledger, m.entry), 0), m.batch_index + 1)
    kind = draw(st.sampled_from(["message_id"] * 5 + ["earliest", "latest", "bogus"]))
    start: tuple[int, int, int] | None = None
    if kind == "message_id":
        p = draw(S.positions(state))
        # any batch index on any entry: a batch index survives a re-publish or a hand-built id, so it also
        # reaches non-batched entries, markers and positions that do not exist
        size = batches.get(p, 1)
        bi = draw(st.one_of(st.just(-1), st.integers(0, size + 1), st.just(2**31 - 1)))
        start = (p[0], p[1], bi)
    span = max(1, (case.exported_ms - BASE_MS) // 1000 + 2)
    rollback = draw(st.one_of(st.just(0), st.just(0), st.integers(1, span)))
    return o.ReaderRequest(
        start_kind=kind,
        start_id=start,
        inclusive=draw(st.booleans()),
        rollback_seconds=rollback,
        read_compacted=draw(st.integers(0, 3)) == 0,
        initial_position=draw(st.sampled_from(["Latest", "Latest", "Earliest", "Sideways"])),
    )


def _ts(ms: int | None) -> Any:
    return None if ms is None else dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)


def _frames(spark: SparkSession, cases: list[TimeCase]) -> dict[str, DataFrame]:
    ledgers, mls, entries, messages = [], [], [], []
    for i, case in enumerate(cases):
        topic, ml = S.topic_name(i), case.state.ml
        for lid, (n, size) in ml.ledgers.items():
            ledgers.append((S.CLUSTER, topic, lid, n, size, _ts(case.closed_at.get(lid))))
        mls.append(
            (
                S.CLUSTER,
                topic,
                ml.current_ledger_id,
                ml.current_ledger_entries,
                ml.current_ledger_size,
                ml.lac,
                ml.total_size,
                _ts(case.exported_ms),
            )
        )
        for p, s in sorted(case.stamps.items()):
            if p in case.exported:
                entries.append((S.CLUSTER, topic, p[0], p[1], s.publish_ms, _ts(s.broker_ms)))
        for m in case.messages:
            publish = case.stamps[(m.ledger, m.entry)].publish_ms
            marker = 10 if m.marker else None
            messages.append((S.CLUSTER, topic, m.ledger, m.entry, m.batch_index, marker, False, publish))
    readers = [
        (S.CLUSTER, S.topic_name(i), S.request_id(i, j), r.start_kind, r.start_id, r.inclusive,
         r.rollback_seconds, r.read_compacted, r.initial_position)
        for i, case in enumerate(cases)
        for j, r in enumerate(case.readers)
    ]  # fmt: skip
    resets = [
        (S.CLUSTER, S.topic_name(i), S.request_id(i, j), name, t)
        for i, case in enumerate(cases)
        for j, (name, t) in enumerate(case.resets)
    ]
    return {
        "ledgers": spark.createDataFrame(ledgers, LEDGERS),
        "mls": spark.createDataFrame(mls, ML),
        "entries": spark.createDataFrame(entries, ENTRIES),
        "messages": spark.createDataFrame(messages, MESSAGES),
        "cursors": spark.createDataFrame(S.cursor_rows(cases), S.CURSORS_SCHEMA),  # type: ignore[arg-type]
        "readers": spark.createDataFrame(readers, READER_REQ),
        "resets": spark.createDataFrame(resets, RESET_REQ),
    }


def _collect(spark: SparkSession, frames: dict[str, DataFrame]) -> dict[str, list[dict[str, Any]]]:
    """Every frame as JSON rows in one Spark action: ``{frame name: [row dicts]}``."""
    tagged = [
        df.select(
            F.lit(name).alias("frame"),
            F.to_json(F.struct(*[F.col(f"`{c}`") for c in df.columns]), {"ignoreNullFields": "false"}).alias(
                "row"
            ),
        )
        for name, df in frames.items()
    ]
    with session_conf(spark):
        rows = functools.reduce(lambda a, b: a.unionByName(b), tagged).collect()
    out: dict[str, list[dict[str, Any]]] = {name: [] for name in frames}
    for row in rows:
        out[row["frame"]].append(json.loads(row["row"]))
    return out


def _informative(cases: list[TimeCase]) -> bool:
    return len({c.describe() for c in cases}) > len(cases) // 4


def _mid(value: Any) -> tuple[int, int, int] | None:
    return None if value is None else (value["ledger_id"], value["entry_id"], value["batch_index"])


def _report(mismatches: list[tuple[str, int, str, Any, Any]], cases: list[TimeCase], limit: int = 4) -> str:
    lines = [f"{len(mismatches)} row(s) differ from the oracle; examples:"]
    seen: set[int] = set()
    for version, i, request, expected, actual in mismatches:
        if i in seen:
            continue
        seen.add(i)
        lines.append(
            f"- version={version} case={i} request: {request}\n  oracle:    {expected}\n"
            f"  transform: {actual}\n{cases[i].describe()}"
        )
        if len(seen) == limit:
            break
    return "\n".join(lines)


@PROPERTY_SETTINGS
@given(cases=st.lists(time_cases(), min_size=30, max_size=45))
def test_reader_start_positions_and_reset_cursor_by_time_plan_match_oracle(
    spark: SparkSession, cases: list[TimeCase]
) -> None:
    """Both transforms on the same generated topics, every version's frame in one Spark action."""
    assume(_informative(cases))
    f = _frames(spark, cases)
    frames: dict[str, DataFrame] = {}
    for v in READER_VERSIONS:
        frames[f"reader {v}"] = R.reader_start_positions(
            f["readers"],
            f["ledgers"],
            f["mls"],
            f["messages"],
            v,
            entries=f["entries"],
            ledger_close_clock_skew_ms=SKEW_MS,
        ).select(
            "request_id",
            "mark_delete_position",
            "read_position",
            "first_delivered",
            "rollback_failure",
            "error",
        )
    for v in RESET_VERSIONS:
        frames[f"reset {v}"] = R.reset_cursor_by_time_plan(
            f["resets"], f["cursors"], f["ledgers"], f["mls"], f["entries"], v,
            ledger_close_clock_skew_ms=SKEW_MS,
        ).select(
            "request_id", "found_position", "linear_scan_position", "publish_times_monotonic",
            "mark_delete_position", "read_position", "error",
        )  # fmt: skip
    out = _collect(spark, frames)
    mismatches = _reader_mismatches(out, cases) + _reset_mismatches(out, cases)
    assert not mismatches, _report(mismatches, cases)


Mismatch = tuple[str, int, str, Any, Any]


def _reader_mismatches(out: dict[str, list[dict[str, Any]]], cases: list[TimeCase]) -> list[Mismatch]:
    mismatches: list[Mismatch] = []
    for v in READER_VERSIONS:
        actual = {
            r["request_id"]: (
                S.pos(r["mark_delete_position"]),
                S.pos(r["read_position"]),
                _mid(r["first_delivered"]),
                r["rollback_failure"] is not None,
                r["error"] is not None,
            )
            for r in out[f"reader {v}"]
        }
        for i, case in enumerate(cases):
            stamps = {p: s for p, s in case.stamps.items() if p in case.exported}
            for j, req in enumerate(case.readers):
                res = o.reader_start(
                    case.state.ml, req, v, case.messages, stamps, case.exported_ms, case.closed_at, SKEW_MS
                )
                expected = (
                    res.mark_delete,
                    res.read_position,
                    res.first_delivered,
                    res.rollback_failed,
                    res.error is not None,
                )
                got = actual.get(S.request_id(i, j), "<missing row>")
                if got != expected:
                    mismatches.append((f"reader {v}", i, f"{req}", expected, got))
    return mismatches


def _reset_mismatches(out: dict[str, list[dict[str, Any]]], cases: list[TimeCase]) -> list[Mismatch]:
    mismatches: list[Mismatch] = []
    for v in RESET_VERSIONS:
        actual = {
            r["request_id"]: (
                S.pos(r["found_position"]),
                S.pos(r["linear_scan_position"]),
                r["publish_times_monotonic"],
                S.pos(r["mark_delete_position"]),
                S.pos(r["read_position"]),
                None if r["error"] is None else r["error"].startswith("entries not exported"),
            )
            for r in out[f"reset {v}"]
        }
        for i, case in enumerate(cases):
            stamps = {p: s for p, s in case.stamps.items() if p in case.exported}
            idm = {c.name: c.individually_deleted for c in case.cursors}
            for j, (name, t) in enumerate(case.resets):
                res = o.reset_cursor_by_time(case.state.ml, t, stamps, v, case.closed_at, SKEW_MS, idm[name])
                error = None if res.error is None else issubclass(res.error, o.OracleNotExportedError)
                expected = (res.found, res.linear, res.monotonic, res.mark_delete, res.read_position, error)
                got = actual.get(S.request_id(i, j), "<missing row>")
                if got != expected:
                    mismatches.append((f"reset {v}", i, f"cursor={name} t={t - BASE_MS:+d}", expected, got))
    return mismatches


# --- the per-topic search function, without Spark -----------------------------------------------------------


def _search_table(case: TimeCase, version: str) -> pa.Table:
    """The Arrow group ``applyInArrow`` hands to the search function for one topic (same columns/kinds)."""
    ml = case.state.ml
    rows: list[dict[str, Any]] = []

    def add(kind: str, **values: Any) -> None:
        row = {"cluster": S.CLUSTER, "topic": "t", "_k": kind, **dict.fromkeys([*SEARCH_COLUMNS, "_pa_ver"])}
        row.update(values)
        rows.append(row)

    lac_l, lac_e = ml.lac
    add(
        "m",
        v1=ml.current_ledger_id,
        v2=ml.current_ledger_entries,
        v3=lac_l,
        v4=lac_e,
        v5=case.exported_ms,
        _pa_ver=version,
    )
    for lid, (n, _size) in ml.ledgers.items():
        add("l", v1=lid, v2=n, v3=case.closed_at.get(lid))
    for p, stamp in case.stamps.items():
        if p in case.exported:
            # v3 the publish time, v4 the broker-entry timestamp (else the publish time): the rules pick one
            broker = stamp.broker_ms if stamp.broker_ms is not None else stamp.publish_ms
            add("e", v1=p[0], v2=p[1], v3=stamp.publish_ms, v4=broker)
    for c in case.cursors:
        add("c", **{R._SUB: c.name})
        for lo, hi in c.individually_deleted:
            add("a", **{R._SUB: c.name}, v1=lo[0], v2=lo[1], v3=hi[0], v4=hi[1])
    for name, t in case.resets:
        add("r", **{R._SUB: name, R._TS: t, R._RB: False})
    for r in case.readers:
        if r.rollback_seconds > 0:
            add("r", **{R._SUB: "", R._TS: r.rollback_seconds, R._RB: True})
    fields = [pa.field(n, pa.string()) for n in ("cluster", "topic", "_k", R._SUB, "_pa_ver")]
    fields += [pa.field(R._TS, pa.int64()), pa.field(R._RB, pa.bool_())]
    fields += [pa.field(f"v{k}", pa.int64()) for k in range(1, 6)]
    return pa.Table.from_pylist(rows, schema=pa.schema(fields))


SEARCH_COLUMNS = [R._SUB, R._TS, R._RB, "v1", "v2", "v3", "v4", "v5"]


@settings(
    max_examples=60 * S.PROPERTY_EXAMPLES,
    deadline=None,
    database=None,
    phases=[Phase.generate],
    verbosity=Verbosity.quiet,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=time_cases())
def test_reset_search_function_matches_oracle_without_spark(case: TimeCase) -> None:
    """The ``applyInArrow`` function of the time search, fed one topic's group directly, on every version."""
    stamps = {p: s for p, s in case.stamps.items() if p in case.exported}
    idm = {c.name: c.individually_deleted for c in case.cursors}
    for v in VERSIONS:
        group = _search_table(case, v)
        out = R._search_fn(R.find_rules(v, SKEW_MS), SKEW_MS)(group).to_pylist()
        # pulsar_version=None: the rules come from the group's managed-ledger row, with the same result
        assert R._search_fn(None, SKEW_MS)(group).to_pylist() == out, v
        got = {(r[R._SUB], r[R._TS], r[R._RB]): r for r in out}
        wanted: list[tuple[tuple[str, int, bool], o.ResetByTime]] = [
            (
                (name, t, False),
                o.reset_cursor_by_time(case.state.ml, t, stamps, v, case.closed_at, SKEW_MS, idm[name]),
            )
            for name, t in case.resets
        ]
        for r in case.readers:
            if r.rollback_seconds > 0:
                t = case.exported_ms - r.rollback_seconds * 1000
                res = o.reset_cursor_by_time(case.state.ml, t, stamps, v, case.closed_at, SKEW_MS)
                wanted.append((("", r.rollback_seconds, True), res))
        for key, res in wanted:
            row = got[key]

            def at(name: str, row: dict[str, Any] = row) -> Position | None:
                led = row[f"_pa_{name}_l"]
                return None if led is None else (led, row[f"_pa_{name}_e"])

            actual = (
                at("found"),
                at("linear"),
                row["_pa_mono"],
                at("md"),
                at("rp"),
                row["_pa_serr"] is not None,
                row["_pa_rfail"],
            )
            expected = (
                res.found,
                res.linear,
                res.monotonic,
                res.mark_delete,
                res.read_position,
                res.error is not None,
                res.error is o.OracleReadError,  # a failed read, not an entry missing from the export
            )
            assert actual == expected, f"version={v} request={key} error={row['_pa_serr']}\n{case.describe()}"
