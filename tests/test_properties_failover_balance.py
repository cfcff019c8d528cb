"""``failover_balance`` against a plain-Python oracle on random assignments (docs §6.3).

The oracle reads the docstring's definition directly: per (cluster, base topic, subscription) the names
seen in any partition's top-priority group or as its active consumer, and per name the partitions it is
active on. The random rows mix partitioned and non-partitioned topics, base names that themselves contain
``-partition-``, names active on no partition, names only ever active, and several subscriptions.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from pulsar_model.failover import failover_balance
from tests.oracle import strategies as S

NAMES = ["a", "b", "c", "d"]
BASES = ["persistent://t/ns/orders", "persistent://t/ns/x-partition-7"]

_row = st.fixed_dictionaries(
    {
        "cluster": st.sampled_from(["c1", "c2"]),
        "base": st.sampled_from(BASES),
        "partition_index": st.integers(min_value=-1, max_value=3),
        "subscription": st.sampled_from(["s1", "s2"]),
        "active_consumer_name": st.sampled_from(NAMES),
        "top_group_consumers": st.lists(st.sampled_from(NAMES), max_size=4),
    }
)


def _topic(row: dict[str, Any]) -> str:
    index = row["partition_index"]
    return row["base"] if index < 0 else f"{row['base']}-partition-{index}"


def _oracle(rows: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(r["cluster"], r["base"], r["subscription"])].append(r)
    out = {}
    for key, members in groups.items():
        active = Counter(r["active_consumer_name"] for r in members)
        names = sorted({n for r in members for n in r["top_group_consumers"]} | set(active))
        per_name = {n: active.get(n, 0) for n in names}
        out[key] = {
            "partitions": len(members),
            "consumers": len(names),
            "partitions_per_consumer": per_name,
            "max_partitions": max(per_name.values()),
            "min_partitions": min(per_name.values()),
            "imbalance": max(per_name.values()) - min(per_name.values()),
            "idle_consumers": [n for n in names if per_name[n] == 0],
        }
    return out


@S.PROPERTY_SETTINGS
@given(cases=st.lists(st.lists(_row, min_size=1, max_size=30), min_size=25, max_size=25))
def test_failover_balance_matches_oracle(spark: SparkSession, cases: list[list[dict[str, Any]]]) -> None:
    """25 random cases in one frame (each case its own clusters), one collect."""
    rows = [{**r, "cluster": f"{r['cluster']}#{i}"} for i, case in enumerate(cases) for r in case]
    frame = spark.createDataFrame(
        [
            (
                r["cluster"],
                _topic(r),
                r["partition_index"],
                r["subscription"],
                r["active_consumer_name"],
                r["top_group_consumers"],
            )
            for r in rows
        ],
        "cluster string, topic string, partition_index int, subscription string, "
        "active_consumer_name string, top_group_consumers array<string>",
    )
    keys = ("cluster", "base_topic", "subscription")
    got = {
        tuple(r[k] for k in keys): {k: v for k, v in r.asDict(recursive=True).items() if k not in keys}
        for r in failover_balance(frame).collect()
    }
    assert got == _oracle(rows)
