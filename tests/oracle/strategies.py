"""Hypothesis strategies for random managed-ledger states, cursors and requests, plus DataFrame converters.

States stay within what a broker can produce (docs §0.2, §1.2) but include the ugly corners: sparse and
huge ledger ids, trimmed (deleted) ledgers, empty closed ledgers, an empty or non-empty open ledger, no
open ledger, LAC left in a trimmed ledger, cursors at ``(L,-1)``, beyond LAC, past a ledger's end or in
deleted ledgers, and individually-deleted ranges spanning ledgers or starting at ``(L,-1)``.

Excluded as unreachable (docs §1.9): no current ledger with an empty last ledger (infinite loop), and an
empty ledger map.

One generated :class:`Case` = one topic ``persistent://t/ns/case-<i>`` in cluster ``c1``; converters turn
a list of cases into rows matching the DataFrame contracts (DESIGN.md "Acceptance-facing API").
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import Row as Row_
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from tests.oracle.managed_ledger import (
    Cursor,
    IdmRange,
    ManagedLedger,
    Position,
    get_previous_position,
)

CLUSTER = "c1"


def topic_name(i: int) -> str:
    return f"persistent://t/ns/case-{i}"


# --------------------------------------------------------------------------------------------------
# Generated state
# --------------------------------------------------------------------------------------------------


@dataclass
class MLState:
    """A managed ledger plus what the generator knows about ids that are not in the map."""

    ml: ManagedLedger
    trimmed: list[tuple[int, int]]  # deleted prefix: (ledger id, entries it had)
    gap_ids: list[int]  # ids between/after existing ledgers that are not in the map

    def real_entries(self, ledger_id: int) -> int:
        """Entries really stored in an existing ledger (the open one: current_ledger_entries)."""
        if ledger_id == self.ml.current_ledger_id:
            return self.ml.current_ledger_entries
        return self.ml.ledgers[ledger_id][0]

    def existing_entries(self) -> list[Position]:
        """Every entry that exists, in position order."""
        return [(lid, e) for lid in self.ml.ledgers for e in range(self.real_entries(lid))]

    @property
    def total_entries(self) -> int:
        return sum(self.real_entries(lid) for lid in self.ml.ledgers)


@dataclass
class PositionAfterNRequest:
    start: Position
    n: int
    bound: str


@dataclass
class RangeRequest:
    lower: Position
    lower_closed: bool
    upper: Position
    upper_closed: bool


@dataclass
class SkipRequest:
    cursor_name: str
    n: int
    deleted_entries: str


@dataclass
class Case:
    state: MLState
    cursors: list[Cursor] = field(default_factory=list)
    position_after_n: list[PositionAfterNRequest] = field(default_factory=list)
    ranges: list[RangeRequest] = field(default_factory=list)
    skips: list[SkipRequest] = field(default_factory=list)
    points: list[Position] = field(default_factory=list)

    @property
    def ml(self) -> ManagedLedger:
        return self.state.ml

    def describe(self) -> str:
        ml = self.ml
        lines = [
            f"  ledgers (id: entries/size) = {ml.ledgers}",
            f"  current_ledger_id={ml.current_ledger_id} current_ledger_entries={ml.current_ledger_entries}"
            f" current_ledger_size={ml.current_ledger_size} LAC={ml.lac} total_size={ml.total_size}",
            f"  trimmed={self.state.trimmed} gap_ids={self.state.gap_ids}",
        ]
        for c in self.cursors:
            lines.append(
                f"  cursor {c.name!r} order={c.order} durable={c.durable} md={c.mark_delete}"
                f" idm={c.individually_deleted}"
            )
        return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# Managed-ledger state
# --------------------------------------------------------------------------------------------------

_small_gap = st.integers(1, 3)
_big_gap = st.integers(4, 10**9)


@st.composite
def ml_states(draw: st.DrawFn, max_ledgers: int = 8) -> MLState:
    """A random managed ledger (docs §0.2) with 1..max_ledgers ledgers in the map."""
    n_trimmed = draw(st.integers(0, 2))
    n_existing = draw(st.integers(1, max_ledgers))
    first_id = draw(st.one_of(st.integers(0, 20), st.integers(10**6, 10**12)))
    ids = [first_id]
    for _ in range(n_trimmed + n_existing - 1):
        gap = draw(st.one_of(_small_gap, _small_gap, _big_gap))
        ids.append(ids[-1] + gap)
    trimmed_ids, existing_ids = ids[:n_trimmed], ids[n_trimmed:]
    trimmed = [(lid, draw(st.integers(1, 8))) for lid in trimmed_ids]
    has_open = draw(st.integers(0, 4)) > 0  # mostly an open ledger
    ledgers: dict[int, tuple[int, int]] = {}
    closed_ids = existing_ids[:-1] if has_open else existing_ids
    for lid in closed_ids:
        entries = draw(st.one_of(st.just(0), st.integers(1, 6), st.integers(1, 12)))
        if not has_open and lid == closed_ids[-1]:
            entries = max(entries, 1)  # docs §1.9: a null currentLedger with an empty last ledger loops
        ledgers[lid] = (entries, _ledger_size(draw, entries))
    current_id: int | None = None
    cur_entries = cur_size = 0
    if has_open:
        current_id = existing_ids[-1]
        ledgers[current_id] = (0, 0)  # listed with 0/0 until closed
        cur_entries = draw(st.one_of(st.just(0), st.integers(1, 10)))
        cur_size = _ledger_size(draw, cur_entries)
    # LAC (docs §0.2): last entry added; walked back over empty ledgers on restart
    if current_id is not None and cur_entries > 0:
        lac: Position = (current_id, cur_entries - 1)
    else:
        non_empty = [lid for lid, (e, _s) in ledgers.items() if e > 0]
        if non_empty:
            lac = (non_empty[-1], ledgers[non_empty[-1]][0] - 1)
        elif bool(trimmed) and draw(st.booleans()):
            lac = (trimmed[-1][0], trimmed[-1][1] - 1)  # LAC left in a trimmed ledger after roll-over
        else:
            lac = (existing_ids[0], -1)
    total = sum(s for _e, s in ledgers.values()) + cur_size
    ml = ManagedLedger(ledgers, current_id, cur_entries, cur_size, lac, total)
    gap_ids = sorted(
        {lid + 1 for lid in ids if lid + 1 not in ledgers and lid + 1 not in trimmed_ids}
        | {ids[-1] + draw(st.integers(2, 10**6))}
    )
    return MLState(ml, trimmed, gap_ids)


def _ledger_size(draw: st.DrawFn, entries: int) -> int:
    if entries == 0:
        return 0
    avg = draw(st.one_of(st.integers(1, 10), st.integers(11, 5000)))
    remainder = draw(st.integers(0, entries - 1))  # sizes not divisible by entries (docs §2.2)
    return entries * avg + remainder


# --------------------------------------------------------------------------------------------------
# Positions
# --------------------------------------------------------------------------------------------------


@st.composite
def positions(draw: st.DrawFn, state: MLState) -> Position:
    """Any position a request may carry: existing entries, (L,-1), past-the-end, deleted ledgers, LAC..."""
    ml = state.ml
    existing = state.existing_entries()
    kinds = ["minus_one", "past_end", "deleted", "lac", "lac_next", "outside"]
    if existing:
        kinds += ["entry", "entry", "entry"]
    kind = draw(st.sampled_from(kinds))
    ids = list(ml.ledgers)
    if kind == "entry":
        return draw(st.sampled_from(existing))
    if kind == "minus_one":
        return (draw(st.sampled_from(ids)), -1)
    if kind == "past_end":
        lid = draw(st.sampled_from(ids))
        return (lid, state.real_entries(lid) + draw(st.integers(0, 3)))
    if kind == "deleted":
        options = [lid for lid, _e in state.trimmed] + state.gap_ids
        lid = draw(st.sampled_from(options))
        return (lid, draw(st.integers(-1, 9)))
    if kind == "lac":
        return ml.lac
    if kind == "lac_next":
        return ml.lac_next
    return draw(st.sampled_from([(-1, -1), (-1, 0), (ids[-1] + 10**7, 0)]))


@st.composite
def mark_delete_positions(draw: st.DrawFn, state: MLState) -> Position:
    """Mark-delete positions a broker can hold (docs §1.2): mostly <= LAC, or (nextLedger,-1) beyond it."""
    ml = state.ml
    existing = [p for p in state.existing_entries() if p <= ml.lac]
    kinds = ["minus_one", "lac", "deleted", "past_end"]
    if existing:
        kinds += ["entry", "entry", "entry", "entry"]
    kind = draw(st.sampled_from(kinds))
    if kind == "entry":
        return draw(st.sampled_from(existing))
    if kind == "minus_one":
        return (draw(st.sampled_from(list(ml.ledgers))), -1)
    if kind == "lac":
        return ml.lac
    if kind == "deleted":
        if bool(state.trimmed) and draw(st.booleans()):
            lid, entries = draw(st.sampled_from(state.trimmed))
            return (lid, draw(st.sampled_from([entries - 1, entries - 1, -1, 0])))
        return (draw(st.sampled_from(state.gap_ids)), draw(st.integers(-1, 5)))
    closed = [lid for lid in ml.ledgers if lid != ml.current_ledger_id]
    if not closed:
        return ml.lac
    lid = draw(st.sampled_from(closed))
    return (lid, ml.ledgers[lid][0] + draw(st.integers(0, 2)))  # rare: past a closed ledger's end


@st.composite
def individually_deleted(draw: st.DrawFn, state: MLState, md: Position) -> list[IdmRange]:
    """Sorted, non-connected open-closed ranges of acked positions strictly after md, up to LAC."""
    ml = state.ml
    entries = [p for p in state.existing_entries() if md < p <= ml.lac]
    if not entries:
        return []
    mode = draw(st.sampled_from(["none", "none", "acks", "acks", "arbitrary"]))
    if mode == "none":
        return []
    if mode == "acks":
        # individual acks: each acked p adds (previous(p), p]; connected ranges coalesce (docs §1.2)
        acked: set[Position] = set()
        for _ in range(draw(st.integers(1, 3))):
            start = draw(st.integers(0, len(entries) - 1))
            length = draw(st.integers(1, 4))
            acked.update(entries[start : start + length])
        ack_ranges = [(max(get_previous_position(ml, p), md), p) for p in sorted(acked)]
        return _coalesce(ack_ranges)
    # arbitrary endpoints: lowers may be md, (L,-1) or any entry; uppers are existing entries
    points = sorted({md} | set(entries) | {(lid, -1) for lid in ml.ledgers if md < (lid, -1) <= ml.lac})
    k = draw(st.integers(1, 3))
    chosen = sorted(draw(st.sets(st.integers(0, len(points) - 1), min_size=1, max_size=2 * k)))
    ranges: list[IdmRange] = []
    for lo_i, hi_i in zip(chosen[::2], chosen[1::2], strict=False):
        lo, hi = points[lo_i], points[hi_i]
        if hi[1] >= 0:
            ranges.append((lo, hi))
    return ranges


def _coalesce(ranges: Sequence[IdmRange]) -> list[IdmRange]:
    out: list[IdmRange] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


_CURSOR_NAMES = ["sub-a", "sub-b", "pulsar.repl.c2", "__compaction", "pulsar.dedup", "reader-1"]


@st.composite
def cursors_for(draw: st.DrawFn, state: MLState, max_cursors: int = 4, min_cursors: int = 0) -> list[Cursor]:
    """0..max_cursors cursors with distinct names, a random insertion order, ties on md on purpose."""
    k = draw(st.integers(min_cursors, max_cursors))
    names = draw(st.permutations(_CURSOR_NAMES))[:k]
    orders = draw(st.permutations(list(range(k))))
    out: list[Cursor] = []
    for name, order in zip(names, orders, strict=True):
        if out and draw(st.integers(0, 3)) == 0:
            md = draw(st.sampled_from([c.mark_delete for c in out]))  # same md -> slowest-cursor tie
        else:
            md = draw(mark_delete_positions(state))
        durable = not name.startswith("reader") and draw(st.integers(0, 5)) > 0
        idm = draw(individually_deleted(state, md))
        out.append(Cursor(name, order, durable, md, idm))
    return out


# --------------------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------------------


def _counts(state: MLState) -> st.SearchStrategy[int]:
    total = state.total_entries
    return st.one_of(st.integers(0, 3), st.integers(0, total + 3), st.integers(total, total + 30))


@st.composite
def position_after_n_cases(draw: st.DrawFn) -> Case:
    state = draw(ml_states())
    reqs = [
        PositionAfterNRequest(
            draw(positions(state)),
            draw(_counts(state)),
            draw(st.sampled_from(["startIncluded", "startExcluded"])),
        )
        for _ in range(draw(st.integers(1, 4)))
    ]
    return Case(state, position_after_n=reqs)


@st.composite
def range_cases(draw: st.DrawFn) -> Case:
    state = draw(ml_states())
    reqs: list[RangeRequest] = []
    for _ in range(draw(st.integers(1, 4))):
        a, b = draw(positions(state)), draw(positions(state))
        if draw(st.integers(0, 4)) > 0:
            a, b = min(a, b), max(a, b)  # mostly well-formed; sometimes lower > upper
        reqs.append(RangeRequest(a, draw(st.booleans()), b, draw(st.booleans())))
    return Case(state, ranges=reqs)


@st.composite
def point_cases(draw: st.DrawFn) -> Case:
    state = draw(ml_states())
    return Case(state, points=draw(st.lists(positions(state), min_size=1, max_size=5)))


@st.composite
def cursor_cases(draw: st.DrawFn, min_cursors: int = 0) -> Case:
    state = draw(ml_states())
    return Case(state, cursors=draw(cursors_for(state, min_cursors=min_cursors)))


@st.composite
def skip_cases(draw: st.DrawFn) -> Case:
    state = draw(ml_states())
    cursors = draw(cursors_for(state, max_cursors=3, min_cursors=1))
    skips = [
        SkipRequest(c.name, draw(_counts(state)), draw(st.sampled_from(["Include", "Exclude"])))
        for c in cursors
        for _ in range(draw(st.integers(1, 2)))
    ]
    return Case(state, cursors=cursors, skips=skips)


#: docs §1.7 says the 2.x/3.x count has "no validation" and §1.8 that 2.x precise backlog has no md >= LAC
#: guard. But every caller builds a Guava Range first (Range.openClosed / Range.closedOpen / Range.open), and
#: Guava throws IllegalArgumentException for lower > upper and for an empty open range (x, x) before the
#: count runs: the broker throws where the docs' arithmetic would return a number. The oracle follows Java
#: (the gap is documented in docs/semantics); PULSAR_ORACLE_GUAVA_RANGES=0 runs the literal arithmetic.
JAVA_GUAVA_RANGE_CHECKS = os.environ.get("PULSAR_ORACLE_GUAVA_RANGES", "1") == "1"

#: Hypothesis examples per property (each one Spark job over 40-80 topics); raise for deeper runs, e.g.
#: ``PULSAR_PROPERTY_EXAMPLES=20 pytest tests/test_properties_positions.py``.
PROPERTY_EXAMPLES = int(os.environ.get("PULSAR_PROPERTY_EXAMPLES", "1"))

#: The settings of the property tests that run Spark: every example is a Spark job over 40-80 topics.
PROPERTY_SETTINGS = settings(
    max_examples=PROPERTY_EXAMPLES,
    deadline=None,
    database=None,
    phases=[Phase.generate],  # no shrinking: every shrink step would be another Spark job
    verbosity=Verbosity.quiet,  # the assertion message carries the failing cases, not the whole list
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)


def is_informative(cases: Sequence[Case]) -> bool:
    """False for Hypothesis' first "simplest" example (every case the same minimal topic): skip it cheaply."""
    return len({c.describe() for c in cases}) > len(cases) // 4


def case_lists(
    case: st.SearchStrategy[Case], min_size: int = 50, max_size: int = 80
) -> st.SearchStrategy[list[Case]]:
    return st.lists(case, min_size=min_size, max_size=max_size)


# --------------------------------------------------------------------------------------------------
# DataFrame contracts and converters
# --------------------------------------------------------------------------------------------------

POSITION = StructType([StructField("ledger_id", LongType(), True), StructField("entry_id", LongType(), True)])
IDM_RANGE = StructType([StructField("lower", POSITION, True), StructField("upper", POSITION, True)])


def _key_fields() -> list[StructField]:
    return [StructField("cluster", StringType(), True), StructField("topic", StringType(), True)]


LEDGERS_SCHEMA = StructType(
    [
        *_key_fields(),
        StructField("ledger_id", LongType(), True),
        StructField("entries", LongType(), True),
        StructField("size_bytes", LongType(), True),
    ]
)
MANAGED_LEDGERS_SCHEMA = StructType(
    [
        *_key_fields(),
        StructField("current_ledger_id", LongType(), True),
        StructField("current_ledger_entries", LongType(), True),
        StructField("current_ledger_size_bytes", LongType(), True),
        StructField("last_confirmed_entry", POSITION, True),
        StructField("total_size_bytes", LongType(), True),
    ]
)
CURSORS_SCHEMA = StructType(
    [
        *_key_fields(),
        StructField("cursor_name", StringType(), True),
        StructField("cursor_order", IntegerType(), True),
        StructField("is_durable", BooleanType(), True),
        StructField("mark_delete_position", POSITION, True),
        StructField("individually_deleted", ArrayType(IDM_RANGE, True), True),
    ]
)
POSITION_AFTER_N_REQUESTS_SCHEMA = StructType(
    [
        *_key_fields(),
        StructField("request_id", LongType(), True),
        StructField("start_position", POSITION, True),
        StructField("n", LongType(), True),
        StructField("bound", StringType(), True),
    ]
)
RANGE_REQUESTS_SCHEMA = StructType(
    [
        *_key_fields(),
        StructField("request_id", LongType(), True),
        StructField("lower", POSITION, True),
        StructField("lower_closed", BooleanType(), True),
        StructField("upper", POSITION, True),
        StructField("upper_closed", BooleanType(), True),
    ]
)
SKIP_REQUESTS_SCHEMA = StructType(
    [
        *_key_fields(),
        StructField("request_id", LongType(), True),
        StructField("cursor_name", StringType(), True),
        StructField("n", LongType(), True),
        StructField("deleted_entries", StringType(), True),
    ]
)
POINT_REQUESTS_SCHEMA = StructType(
    [*_key_fields(), StructField("request_id", LongType(), True), StructField("position", POSITION, True)]
)

Row = tuple[Any, ...]


def request_id(case_index: int, j: int) -> int:
    """Globally unique request id: case index and the request's index inside the case."""
    return case_index * 1000 + j


def ledger_rows(cases: Sequence[Case]) -> list[Row]:
    return [
        (CLUSTER, topic_name(i), lid, entries, size)
        for i, case in enumerate(cases)
        for lid, (entries, size) in case.ml.ledgers.items()
    ]


def managed_ledger_rows(cases: Sequence[Case]) -> list[Row]:
    return [
        (
            CLUSTER,
            topic_name(i),
            case.ml.current_ledger_id,
            case.ml.current_ledger_entries,
            case.ml.current_ledger_size,
            case.ml.lac,
            case.ml.total_size,
        )
        for i, case in enumerate(cases)
    ]


def cursor_rows(cases: Sequence[Case]) -> list[Row]:
    return [
        (
            CLUSTER,
            topic_name(i),
            c.name,
            c.order,
            c.durable,
            c.mark_delete,
            [(lo, hi) for lo, hi in c.individually_deleted],
        )
        for i, case in enumerate(cases)
        for c in case.cursors
    ]


def position_after_n_rows(cases: Sequence[Case]) -> list[Row]:
    return [
        (CLUSTER, topic_name(i), request_id(i, j), r.start, r.n, r.bound)
        for i, case in enumerate(cases)
        for j, r in enumerate(case.position_after_n)
    ]


def range_rows(cases: Sequence[Case]) -> list[Row]:
    return [
        (CLUSTER, topic_name(i), request_id(i, j), r.lower, r.lower_closed, r.upper, r.upper_closed)
        for i, case in enumerate(cases)
        for j, r in enumerate(case.ranges)
    ]


def skip_rows(cases: Sequence[Case]) -> list[Row]:
    return [
        (CLUSTER, topic_name(i), request_id(i, j), r.cursor_name, r.n, r.deleted_entries)
        for i, case in enumerate(cases)
        for j, r in enumerate(case.skips)
    ]


def point_rows(cases: Sequence[Case]) -> list[Row]:
    return [
        (CLUSTER, topic_name(i), request_id(i, j), p)
        for i, case in enumerate(cases)
        for j, p in enumerate(case.points)
    ]


# --------------------------------------------------------------------------------------------------
# Test harness: DataFrames from cases, one Spark job per property example, readable mismatch reports
# --------------------------------------------------------------------------------------------------


@dataclass
class Mismatch:
    version: str
    case_index: int
    request: str
    expected: Any
    actual: Any


def input_frames(spark: SparkSession, cases: Sequence[Case]) -> tuple[DataFrame, DataFrame, DataFrame]:
    """``(ledgers, managed_ledgers, cursors)`` DataFrames with explicit schemas, one topic per case."""
    return (
        spark.createDataFrame(ledger_rows(cases), LEDGERS_SCHEMA),
        spark.createDataFrame(managed_ledger_rows(cases), MANAGED_LEDGERS_SCHEMA),
        spark.createDataFrame(cursor_rows(cases), CURSORS_SCHEMA),
    )


def run_versions(transform: Callable[[str], DataFrame], versions: Iterable[str]) -> list[Row_]:
    """Run ``transform(version)`` for every version, union (tagged ``_version``) and collect once."""
    frames = [transform(v).withColumn("_version", F.lit(v)) for v in versions]
    union = functools.reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)
    return union.collect()


#: Separates a case's cluster from the version whose copy of the inputs a row belongs to.
_VERSION_SEPARATOR = "@"


def _copies_per_version(df: DataFrame, versions: Sequence[str], managed_ledgers: bool) -> DataFrame:
    """Each row once per version, its ``cluster`` tagged with the version (so every version's copy is a
    cluster of its own); managed-ledger rows also get that ``pulsar_version``."""
    tagged = F.explode(
        F.array(*[F.concat(F.col("cluster"), F.lit(_VERSION_SEPARATOR + v)) for v in versions])
    ).alias("cluster")
    out = df.select(*[tagged if c == "cluster" else F.col(c) for c in df.columns if c != "pulsar_version"])
    if managed_ledgers:
        out = out.withColumn("pulsar_version", F.substring_index(F.col("cluster"), _VERSION_SEPARATOR, -1))
    return out


def run_versions_as_data(
    transform: Callable[[dict[str, DataFrame], str | None], DataFrame],
    versions: Sequence[str],
    frames: dict[str, DataFrame],
    *,
    argument_version: str = "4.1.3",
) -> list[Row_]:
    """Every version in one plan, the way a stage runs a mixed-version export (versions as data).

    ``frames`` (keyword arguments of the transform; one of them ``managed_ledgers``) are copied once per
    version of ``versions``, each copy's clusters tagged with its version and its managed-ledger rows
    carrying it as ``pulsar_version``; ``transform(copies, None)`` then computes every version at once
    (its rows must keep ``cluster``). The rows come back with the case's own ``cluster`` and ``_version``,
    as :func:`run_versions` gives them. ``transform(frames, argument_version)`` (the version passed as the
    argument, the other way the transforms take it) runs in the same job and must give exactly that
    version's rows. One collect.
    """
    assert "managed_ledgers" in frames and argument_version in versions
    copies = {
        name: _copies_per_version(df, versions, name == "managed_ledgers") for name, df in frames.items()
    }
    per_row = transform(copies, None)
    tag = F.col("cluster")
    per_row = per_row.select(
        *[
            F.substring_index(tag, _VERSION_SEPARATOR, 1).alias(c) if c == "cluster" else F.col(c)
            for c in per_row.columns
        ],
        F.substring_index(tag, _VERSION_SEPARATOR, -1).alias("_version"),
        F.lit(False).alias("_argument"),
    )
    fixed = transform(frames, argument_version).select(
        "*", F.lit(argument_version).alias("_version"), F.lit(True).alias("_argument")
    )
    rows = per_row.unionByName(fixed).collect()
    by_row = [r for r in rows if not r["_argument"]]
    as_argument = sorted(repr(r.asDict() | {"_argument": None}) for r in rows if r["_argument"])
    same_version = sorted(
        repr(r.asDict() | {"_argument": None}) for r in by_row if r["_version"] == argument_version
    )
    assert as_argument == same_version, (
        f"pulsar_version={argument_version!r} and the per-row version {argument_version} differ: "
        f"{sorted(set(as_argument) ^ set(same_version))[:5]}"
    )
    return by_row


def case_index_of(topic: str) -> int:
    return int(topic.rsplit("-", 1)[1])


def pos(value: Any) -> Position | None:
    """A collected position struct as a tuple (None stays None)."""
    if value is None:
        return None
    return (value["ledger_id"], value["entry_id"])


def idm_value(value: Any) -> list[IdmRange] | None:
    if value is None:
        return None
    out: list[IdmRange] = []
    for r in value:
        lo, hi = pos(r["lower"]), pos(r["upper"])
        assert lo is not None and hi is not None
        out.append((lo, hi))
    return sorted(out)


def mismatch_report(mismatches: Sequence[Mismatch], cases: Sequence[Case], limit: int = 5) -> str:
    """Per-version mismatch counts, then up to ``limit`` mismatches from distinct cases with the full case."""
    per_version: dict[str, int] = {}
    for m in mismatches:
        per_version[m.version] = per_version.get(m.version, 0) + 1
    shown: list[Mismatch] = []
    seen: set[int] = set()
    for m in mismatches:
        if m.case_index not in seen:
            seen.add(m.case_index)
            shown.append(m)
        if len(shown) == limit:
            break
    lines = [f"{len(mismatches)} row(s) differ from the oracle (per version: {per_version}); examples:"]
    for m in shown:
        lines.append(
            f"- version={m.version} case={m.case_index} ({topic_name(m.case_index)}) request: {m.request}\n"
            f"  oracle:    {m.expected}\n  transform: {m.actual}\n{cases[m.case_index].describe()}"
        )
    return "\n".join(lines)


#: Topics beside the random ones, for what the generator never draws: a cursor without mark-delete
#: position, a managed ledger without LAC, cursors of a topic without managed-ledger row, ties in
#: ``cursor_order`` broken by name, a null ``cursor_order``. Each has cursors ``a`` and ``b``.
EDGE_TOPICS = ("edge/no-md", "edge/no-lac", "edge/no-ml")


def with_edge_rows(
    spark: SparkSession, ledgers: DataFrame, mls: DataFrame, cursors: DataFrame
) -> tuple[DataFrame, DataFrame, DataFrame]:
    """``(ledgers, managed_ledgers, cursors)`` with the rows of :data:`EDGE_TOPICS` added (cluster ``c``)."""
    no_md, no_lac, no_ml = EDGE_TOPICS
    p = Row_("ledger_id", "entry_id")
    rng = Row_("lower", "upper")
    mls = mls.unionByName(
        spark.createDataFrame(
            [("c", no_md, 7, 2, 20, p(7, 1), 120), ("c", no_lac, 7, 0, 0, None, 100)], MANAGED_LEDGERS_SCHEMA
        )
    )
    ledgers = ledgers.unionByName(
        spark.createDataFrame(
            [("c", t, lid, e, e * 10) for t in (no_md, no_lac) for lid, e in ((5, 10), (7, 0))],
            LEDGERS_SCHEMA,
        )
    )
    cursors = cursors.unionByName(
        spark.createDataFrame(
            [
                ("c", no_md, "a", 0, True, None, None),
                ("c", no_md, "b", 1, True, p(5, 3), [rng(p(5, 4), p(5, 6))]),
                ("c", no_md, "c", 1, True, p(5, 3), [rng(None, p(5, 6))]),
                ("c", no_md, "r", None, False, p(5, 9), None),
                ("c", no_lac, "a", None, True, p(5, 3), None),
                ("c", no_lac, "b", None, True, p(5, 3), [rng(p(5, 4), p(5, 6))]),
                ("c", no_ml, "a", 0, True, p(5, 3), None),
                ("c", no_ml, "b", 1, True, None, None),
            ],
            CURSORS_SCHEMA,
        )
    )
    return ledgers, mls, cursors
