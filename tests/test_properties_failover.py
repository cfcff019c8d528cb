"""Property test: ``active_consumers`` agrees with the plain-Python oracle of docs §6.

The oracle is tests/oracle/failover.py. Each hypothesis example is many subscriptions (random topics,
partitioned or not, random names including non-ASCII, non-BMP characters and duplicates, random
priorities) in one DataFrame: one Spark job per example, for each (version, consistent hashing) setting.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from pulsar_model.failover import active_consumers, failover_what_ifs
from tests.oracle.failover import OConsumer, select_active

CONSUMERS = T.StructType(
    [
        T.StructField("cluster", T.StringType(), False),
        T.StructField("topic", T.StringType(), False),
        T.StructField("subscription", T.StringType(), False),
        T.StructField("consumer_name", T.StringType(), False),
        T.StructField("priority_level", T.IntegerType(), False),
        T.StructField("connect_order", T.IntegerType(), False),
    ]
)

# (version, activeConsumerFailoverConsistentHashing, oracle rule, old partition-index rule, setting exists)
SETTINGS = [
    ("2.8.4", True, "2.10", True, False),
    ("2.10.6", False, "2.10", False, False),
    ("3.0.7", True, "3x", False, False),  # before PIP-392 reached 3.0 (3.0.8): the flag does not exist
    ("4.1.3", False, "3x", False, True),
    ("4.1.3", True, "3x", False, True),
]

_FIXED_NAMES = ["Cons0", "Cons1", "Cons2", "a", "ab", "é", "\uffff", "\U0001f600", "\U0001f600x", "日本", ""]
_ALPHABET = st.characters(codec="utf-8", exclude_categories=["Cs"])
names = st.one_of(st.sampled_from(_FIXED_NAMES), st.text(alphabet=_ALPHABET, max_size=6))
topics = st.one_of(
    st.builds(lambda k, p: f"persistent://t/ns/tp{k}-partition-{p}", st.integers(0, 3), st.integers(0, 40)),
    st.builds(lambda k: f"persistent://t/ns/plain{k}", st.integers(0, 50)),
    st.sampled_from(
        [
            "persistent://t/ns/x-partition--1",
            "persistent://t/ns/x-partition-01",
            "persistent://t/ns/x-partition-00",
            "persistent://t/ns/x-partition-3-DLQ",
            "persistent://t/ns/ü-partition-2",
        ]
    ),
    st.builds(lambda s: f"persistent://t/ns/{s}", st.text(alphabet=_ALPHABET, min_size=1, max_size=8)),
)
consumer_lists = st.lists(st.tuples(names, st.integers(0, 2)), min_size=1, max_size=6)
subscriptions = st.lists(st.tuples(topics, consumer_lists), min_size=1, max_size=25)


def _frame(spark: SparkSession, subs: list[tuple[str, list[tuple[str, int]]]]) -> DataFrame:
    rows = [
        ("c1", topic, f"s{i}", name, prio, order)
        for i, (topic, consumers) in enumerate(subs)
        for order, (name, prio) in enumerate(consumers)
    ]
    return spark.createDataFrame(rows, schema=CONSUMERS)


@pytest.mark.parametrize(("version", "hashing", "rule", "old_rule", "has_setting"), SETTINGS)
@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(subs=subscriptions)
@example(
    subs=[
        # Java order puts U+1F600 (surrogates 0xD83D 0xDE00) before U+FFFF / U+E000 (docs §6.3).
        ("persistent://t/ns/tp0-partition-0", [("\uffff", 0), ("\U0001f600", 0)]),
        ("persistent://t/ns/tp0-partition-1", [("Cons1", 1), ("Cons1", 0), ("a", 0), ("\U0001f600x", 0)]),
        ("persistent://t/ns/tp0-partition-5", [("\ue000", 0), ("\U0001f600", 0), ("Cons1", 0), ("Cons1", 0)]),
        ("persistent://t/ns/plain1", [("\ue000", 2), ("\U0001f600", 0), ("Cons0", 0)]),
    ]
)
def test_active_consumers_matches_oracle(
    spark: SparkSession,
    version: str,
    hashing: bool,
    rule: str,
    old_rule: bool,
    has_setting: bool,
    subs: list[tuple[str, list[tuple[str, int]]]],
) -> None:
    out = active_consumers(_frame(spark, subs), consistent_hashing=hashing, pulsar_version=version)
    got = {
        r["subscription"]: (r["active_consumer_name"], r["active_connect_order"])
        for r in out.select("subscription", "active_consumer_name", "active_connect_order").collect()
    }
    expected = {
        f"s{i}": select_active(
            topic,
            [OConsumer(name, prio, order) for order, (name, prio) in enumerate(consumers)],
            consistent_hashing=hashing and has_setting,
            rule=rule,
            old_partition_index=old_rule,
        )
        for i, (topic, consumers) in enumerate(subs)
    }
    assert {sub: name for sub, (name, _) in got.items()} == expected
    for sub, (name, order) in got.items():
        assert subs[int(sub[1:])][1][order][0] == name  # the connect order points at the named consumer


def _hashable(row: Any) -> tuple[Any, ...]:
    return tuple(tuple(v) if isinstance(v, list) else v for v in row)


@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(subs=subscriptions)
def test_subscriptions_spanning_arrow_batches_match_the_oracle(
    spark: SparkSession, subs: list[tuple[str, list[tuple[str, int]]]]
) -> None:
    """Arrow batches of 2 rows: nearly every subscription is cut across batches (and several share one);
    the per-subscription walk must still see each one whole, once - assignments and what-ifs alike."""
    frame = _frame(spark, subs)
    what_ifs_default = {_hashable(r) for r in failover_what_ifs(frame, pulsar_version="4.1.3").collect()}
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    saved = spark.conf.get(key)
    spark.conf.set(key, "2")
    try:
        out = active_consumers(frame, pulsar_version="4.1.3").collect()
        what_ifs = [_hashable(r) for r in failover_what_ifs(frame, pulsar_version="4.1.3").collect()]
    finally:
        spark.conf.set(key, saved)
    got = {r["subscription"]: r["active_consumer_name"] for r in out}
    assert len(out) == len(subs)
    expected = {
        f"s{i}": select_active(
            topic,
            [OConsumer(name, prio, order) for order, (name, prio) in enumerate(consumers)],
            consistent_hashing=False,
            rule="3x",
            old_partition_index=False,
        )
        for i, (topic, consumers) in enumerate(subs)
    }
    assert got == expected
    assert len(what_ifs) == len(set(what_ifs)) and set(what_ifs) == what_ifs_default
    # one remove_consumer row per distinct name, one add_consumer and one toggle row per subscription
    assert len(what_ifs) == sum(len({n for n, _ in consumers}) + 2 for _, consumers in subs)
