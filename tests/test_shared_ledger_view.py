"""``shared_ledger_view``: a stage's analyses share one ledger view, with the same rows as without it.

The stages open :func:`pulsar_model.positions.shared_ledger_view` so that the backlog, quota and compaction
analyses over one export build the ledger view, the topic context and the precise backlog once
(materialised) instead of once per analysis in every plan. The rows must not change: each random batch of
managed-ledger states (tests/oracle/strategies.py: deleted and empty ledgers, ``(L,-1)``, positions past
the last entry, ack holes across ledgers) is analysed inside and outside the block, with one version line
(``pulsar_version=`` given: the memo is keyed by its flags) and with the versions as data
(``pulsar_version=None``, each topic on one of the supported lines).
"""

from __future__ import annotations

import functools

import pytest
from chispa import assert_df_equality
from hypothesis import HealthCheck, Phase, given, settings
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pulsar_model import positions
from pulsar_model.backlog import estimate_backlog_from_position, estimated_backlog_size, precise_backlog
from pulsar_model.engine.flags import sql_flags
from tests.oracle import strategies as S

pytestmark = pytest.mark.slow

_VERSIONS = ["2.10.6", "3.0.7", "4.1.3"]
_QUIET = {
    "suppress_health_check": [
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ]
}


def _analyses(cursors: DataFrame, ledgers: DataFrame, mls: DataFrame, version: str | None) -> list[DataFrame]:
    starts = cursors.select(
        "cluster", "topic", "cursor_name", F.col("mark_delete_position").alias("position")
    )
    return [
        precise_backlog(cursors, ledgers, mls, pulsar_version=version),
        # the same call twice: the second is served by the block
        precise_backlog(cursors, ledgers, mls, pulsar_version=version).select("cursor_name", "error"),
        estimated_backlog_size(mls, ledgers, cursors, pulsar_version=version),
        estimate_backlog_from_position(starts, ledgers, mls, pulsar_version=version),
    ]


@settings(max_examples=S.PROPERTY_EXAMPLES, deadline=None, database=None, phases=[Phase.generate], **_QUIET)
@given(cases=S.case_lists(S.cursor_cases()))
def test_rows_are_the_same_inside_and_outside_the_block(spark: SparkSession, cases: list[S.Case]) -> None:
    ledgers, mls, cursors = S.input_frames(spark, cases)
    # versions as data: each topic its own line, cycling through the supported ones
    versions = F.element_at(
        F.array(*[F.lit(v) for v in _VERSIONS]), F.abs(F.hash("topic")) % len(_VERSIONS) + 1
    )
    mls_by_topic = mls.withColumn("pulsar_version", versions)
    variants = [(_VERSIONS[-1], mls), (None, mls_by_topic)]

    def every_variant() -> list[DataFrame]:
        # one frame per analysis over every variant: few collects
        per_variant = [
            [df.withColumn("_variant", F.lit(str(v))) for df in _analyses(cursors, ledgers, ml, v)]
            for v, ml in variants
        ]
        return [functools.reduce(DataFrame.unionByName, frames) for frames in zip(*per_variant, strict=True)]

    alone = every_variant()
    with positions.shared_ledger_view(lambda df: df.localCheckpoint()):
        shared = every_variant()
    for got, expected in zip(shared, alone, strict=True):
        assert_df_equality(got, expected, ignore_row_order=True, ignore_nullable=True)


@settings(max_examples=1, deadline=None, database=None, phases=[Phase.generate], **_QUIET)
@given(cases=S.case_lists(S.cursor_cases()))
def test_one_environment_and_one_precise_backlog_per_inputs(spark: SparkSession, cases: list[S.Case]) -> None:
    built: list[DataFrame] = []

    def materialise(df: DataFrame) -> DataFrame:
        built.append(df)
        return df

    ledgers, mls, cursors = S.input_frames(spark, cases)
    flags = sql_flags("4.1.3")
    with positions.shared_ledger_view(materialise):
        first = positions._Env.build(ledgers, mls, flags)
        assert positions._Env.build(ledgers, mls, flags) is first
        assert len(built) == 2  # the ledger view and the topic context
        other_version = positions._Env.build(ledgers, mls, sql_flags("3.0.7"))
        assert other_version is not first
        assert len(built) == 4
        precise_backlog(cursors, ledgers, mls, pulsar_version="4.1.3")
        precise_backlog(cursors, ledgers, mls, pulsar_version="4.1.3")
        assert len(built) == 5  # one more: the precise backlog, once
    # outside the block every call builds its own (pure and lazy)
    assert positions._Env.build(ledgers, mls, flags) is not first
    assert len(built) == 5
