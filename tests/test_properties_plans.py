"""Property test: the plans' grouped pass (pulsar_model.plans.cursor_operation_plans) gives, row for row, what
the set-based skip_entries, clear_backlog_plan and reset_cursor_plan of pulsar_model.positions give (docs
§1.10, §1.11), nulls and error texts included.

Each example is 40-60 random topics (tests/oracle/strategies.py) with skip (Include, Exclude, an unknown
mode, a null n), clear_backlog and reset (position, earliest, latest, an unknown kind, a null target)
requests, some naming a cursor the topic does not have, plus three edge topics (a cursor without a
mark-delete, a managed ledger without a LAC, cursors without a managed ledger). The versions are per row
(every line below in one frame). The set-based transforms are
themselves compared with the plain-Python oracle in tests/test_properties_positions.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from pulsar_model import plans, positions
from tests.oracle import strategies as S

VERSIONS = ["2.8.0", "2.8.2", "2.10.2", "2.10.6", "2.11.2", "3.0.7", "4.1.3"]

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:Generating overly large repr")]

PROPERTY_SETTINGS = S.PROPERTY_SETTINGS

REQUESTS_SCHEMA = StructType(
    [
        StructField("cluster", StringType(), True),
        StructField("topic", StringType(), True),
        StructField("request_id", StringType(), True),
        StructField("action", StringType(), True),
        StructField("cursor_name", StringType(), True),
        StructField("n", LongType(), True),
        StructField("deleted_entries", StringType(), True),
        StructField("target_kind", StringType(), True),
        StructField("target", S.POSITION, True),
    ]
)
_EDGE_REQUESTS = [
    ("skip", "a", 3, "Include", None, None),
    ("skip", "b", 3, "Exclude", None, None),
    ("clear_backlog", "a", None, None, None, None),
    ("clear_backlog", "b", None, None, None, None),
    ("reset", "a", None, None, "earliest", None),
    ("reset", "b", None, None, "position", (5, 2)),
    ("reset", "b", None, None, "latest", None),
]
_OUT = ["request_id", "target_position", "mark_delete_position", "read_position", "individually_deleted"]


@st.composite
def plan_cases(draw: st.DrawFn) -> tuple[S.Case, list[tuple[Any, ...]]]:
    """A topic, its cursors and requests (action, cursor_name, n, deleted_entries, target_kind, target)."""
    state = draw(S.ml_states())
    cursors = draw(S.cursors_for(state, max_cursors=3, min_cursors=1))
    names = [c.name for c in cursors] + ["no-such-cursor"]
    requests: list[tuple[Any, ...]] = []
    for _ in range(draw(st.integers(2, 5))):
        name = draw(st.sampled_from(names))
        action = draw(st.sampled_from(["skip", "skip", "clear_backlog", "reset", "reset"]))
        if action == "skip":
            n = draw(st.one_of(st.integers(-1, 2 * state.total_entries + 3), st.none()))
            mode = draw(st.sampled_from(["Include", "Exclude", "Exclude", "Bogus"]))
            requests.append((action, name, n, mode, None, None))
        elif action == "clear_backlog":
            requests.append((action, name, None, None, None, None))
        else:
            kind = draw(st.sampled_from(["position", "position", "position", "earliest", "latest", "bogus"]))
            target = draw(st.one_of(S.positions(state), st.none())) if kind == "position" else None
            requests.append((action, name, None, None, kind, target))
    return S.Case(state, cursors=cursors), requests


def _frames(spark: SparkSession, drawn: list[tuple[S.Case, list[tuple[Any, ...]]]]) -> tuple[DataFrame, ...]:
    cases = [case for case, _ in drawn]
    ledgers, mls, cursors = S.input_frames(spark, cases)
    p = Row("ledger_id", "entry_id")
    rows = [
        (S.CLUSTER, S.topic_name(i), f"{i}-{j}", a, c, n, m, k, None if t is None else p(*t))
        for i, (_, reqs) in enumerate(drawn)
        for j, (a, c, n, m, k, t) in enumerate(reqs)
    ]
    for t in S.EDGE_TOPICS:
        for j, (a, c, n, m, k, tg) in enumerate(_EDGE_REQUESTS):
            rows.append(("c", t, f"{t}-{j}", a, c, n, m, k, None if tg is None else p(*tg)))
    ledgers, mls, cursors = S.with_edge_rows(spark, ledgers, mls, cursors)
    versions = {S.topic_name(i): VERSIONS[i % len(VERSIONS)] for i in range(len(cases))}
    versions.update({t: VERSIONS[i] for i, t in enumerate(S.EDGE_TOPICS)})
    by_topic = F.create_map(*[F.lit(x) for kv in sorted(versions.items()) for x in kv])
    mls = mls.withColumn("pulsar_version", by_topic[F.col("topic")])
    return spark.createDataFrame(rows, REQUESTS_SCHEMA), ledgers, mls, cursors


def _set_based(
    requests: DataFrame, ledgers: DataFrame, mls: DataFrame, cursors: DataFrame, version: Any
) -> Any:
    def of(action: str) -> DataFrame:
        return requests.where(F.col("action") == action)

    skip = positions.skip_entries(of("skip"), cursors, ledgers, mls, pulsar_version=version)
    clear = positions.clear_backlog_plan(of("clear_backlog"), cursors, ledgers, mls, pulsar_version=version)
    reset = positions.reset_cursor_plan(of("reset"), cursors, ledgers, mls, pulsar_version=version)
    return (
        skip.select(*_OUT, "skipped_entries", "error")
        .unionByName(
            clear.select(
                "request_id",
                F.lit(None).cast(S.POSITION).alias("target_position"),
                *_OUT[2:],
                F.col("cleared_entries").alias("skipped_entries"),
                "error",
            )
        )
        .unionByName(
            reset.select(
                "request_id",
                F.lit(None).cast(S.POSITION).alias("target_position"),
                *_OUT[2:],
                F.lit(None).cast("long").alias("skipped_entries"),
                "error",
            )
        )
    )


@PROPERTY_SETTINGS
@given(drawn=st.lists(plan_cases(), min_size=40, max_size=60))
def test_cursor_operation_plans_equal_the_set_based_transforms(
    spark: SparkSession, drawn: list[tuple[S.Case, list[tuple[Any, ...]]]]
) -> None:
    assume(S.is_informative([case for case, _ in drawn]))
    requests, ledgers, mls, cursors = _frames(spark, drawn)
    got = plans.cursor_operation_plans(requests, cursors, ledgers, mls, None)
    want = _set_based(requests, ledgers, mls, cursors, None)
    got_rows = {r["request_id"]: r for r in got.select(*want.columns).collect()}
    want_rows = {r["request_id"]: r for r in want.collect()}
    assert set(got_rows) == set(want_rows)
    # without a LAC the set-based plans compute against a missing position; the pass refuses
    no_lac = sorted(k for k in got_rows if k.startswith("edge/no-lac-"))
    assert len(no_lac) == 7
    assert {got_rows.pop(k)["error"] for k in no_lac} == {plans.NO_LAC}
    assert all(want_rows.pop(k)["error"] is None for k in no_lac)
    diffs = [(got_rows[k], want_rows[k]) for k in sorted(want_rows) if got_rows[k] != want_rows[k]]
    report = "\n".join(f"got  {g}\nwant {w}" for g, w in diffs[:8])
    assert not diffs, f"{len(diffs)} rows differ\n{report}"
