"""The ``consumers`` table's merge of stats consumers and client-config consumers (docs §6.2), compared with
a plain-Python reading of its rules on random rows: several consumers of one name (matched by occurrence),
subscriptions only a client config lists, client consumers without a stats partner, and unknown (null)
keys, which an equality match never pairs.

The rules, as the oracle below states them independently of the DataFrame code:

* every stats consumer is a row; the n-th stats consumer of a (cluster, topic, subscription, name) by
  ``connect_order`` takes the priority level and subscription type of the n-th client consumer of the same
  keys by ``listed_order``, when every key is known; ``priority_source`` is ``client_config`` when that gives
  a priority level, else ``default`` (level 0);
* a client consumer is a row of its own only when no stats consumer has its (known) cluster, topic and
  subscription, or one of those is unknown: ``connect_order`` = its listed order, source ``client_config``.
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from pulsar_model.ingest.pipeline import _INTERMEDIATE_DDL, _merge_consumers
from pulsar_model.tables.contracts import contract

KEYS = ("cluster", "topic", "subscription", "consumer_name")
#: The merge's columns: the ``consumers`` contract's, without the export identity ingest adds afterwards.
OUT = tuple(c for c in contract("consumers").column_names if c not in ("export_id", "export_date"))


def _key(rng: random.Random, values: list[str]) -> str | None:
    return None if rng.random() < 0.05 else rng.choice(values)


def _rows(seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Stats and client rows over a few keys; orders unique per source so occurrences are well defined."""
    rng = random.Random(seed)
    domains = {"cluster": ["c1", "c2"], "topic": ["t1", "t2"], "subscription": ["s1", "s2", "s3"]}
    names = ["a", "b"]
    stats, client = [], []
    orders = iter(rng.sample(range(1000), 200))
    for _ in range(rng.randint(0, 14)):
        row = {k: _key(rng, v) for k, v in domains.items()}
        stats.append(
            {
                **row,
                "subscription_type": rng.choice([None, "Shared", "Failover"]),
                "consumer_name": None if rng.random() < 0.05 else rng.choice(names),
                "connect_order": next(orders),
                "address": f"/10.0.0.{rng.randint(1, 9)}:1",
                "connected_since": None,
                "client_version": rng.choice([None, "4.0.0"]),
                "available_permits": rng.randint(0, 1000),
                "unacked_messages": rng.randint(0, 5),
                "is_active_in_stats": rng.choice([None, True, False]),
            }
        )
    orders = iter(rng.sample(range(1000), 200))
    for _ in range(rng.randint(0, 14)):
        row = {k: _key(rng, v) for k, v in domains.items()}
        client.append(
            {
                **row,
                "subscription_type": rng.choice([None, "Shared", "Key_Shared"]),
                "consumer_name": None if rng.random() < 0.05 else rng.choice(names),
                "priority_level": rng.choice([None, 0, 1, 5]),
                "listed_order": next(orders),
            }
        )
    return stats, client


def _oracle(stats: list[dict[str, Any]], client: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    def nth(rows: list[dict[str, Any]], order: str) -> dict[int, int]:
        """id(row) -> its 1-based occurrence among the rows of its four keys (nulls grouped together)."""
        groups: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
        for r in rows:
            groups[tuple(r[k] for k in KEYS)].append(r)
        return {
            id(r): i + 1 for g in groups.values() for i, r in enumerate(sorted(g, key=lambda r: r[order]))
        }

    stats_nth, client_nth = nth(stats, "connect_order"), nth(client, "listed_order")
    partner = {
        (tuple(r[k] for k in KEYS), client_nth[id(r)]): r
        for r in client
        if all(r[k] is not None for k in KEYS)
    }
    out = []
    for r in stats:
        key = tuple(r[k] for k in KEYS)
        c = partner.get((key, stats_nth[id(r)])) if all(v is not None for v in key) else None
        level = None if c is None else c["priority_level"]
        kind = r["subscription_type"]
        if kind is None and c is not None:
            kind = c["subscription_type"]
        out.append(
            (
                r["cluster"],
                r["topic"],
                r["subscription"],
                kind,
                r["consumer_name"],
                0 if level is None else level,
                r["connect_order"],
                "client_config" if level is not None else "default",
                r["address"],
                r["connected_since"],
                r["client_version"],
                r["available_permits"],
                r["unacked_messages"],
                r["is_active_in_stats"],
            )
        )
    with_stats = {(r["cluster"], r["topic"], r["subscription"]) for r in stats}
    for r in client:
        sub = (r["cluster"], r["topic"], r["subscription"])
        if any(v is None for v in sub) or sub not in with_stats:
            level = r["priority_level"]
            out.append(
                (
                    *sub,
                    r["subscription_type"],
                    r["consumer_name"],
                    0 if level is None else level,
                    r["listed_order"],
                    "client_config",
                    *[None] * 6,
                )
            )
    return out


def _sort_key(row: tuple[Any, ...]) -> tuple[str, ...]:
    return tuple(repr(v) for v in row)


@settings(
    max_examples=3,
    deadline=None,
    database=None,
    phases=[Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(seeds=st.lists(st.integers(0, 2**31), min_size=40, max_size=40))
def test_merge_consumers_matches_the_rules(spark: SparkSession, seeds: list[int]) -> None:
    """Many random exports in one frame: each seed's rows carry their own cluster prefix."""
    all_stats: list[dict[str, Any]] = []
    all_client: list[dict[str, Any]] = []
    expected: list[tuple[Any, ...]] = []
    for i, seed in enumerate(seeds):
        stats, client = _rows(seed)
        for r in (*stats, *client):
            r["cluster"] = None if r["cluster"] is None else f"{i}-{r['cluster']}"
        all_stats += stats
        all_client += client
        expected += _oracle(stats, client)
    stats_df = spark.createDataFrame(all_stats, _INTERMEDIATE_DDL["stats_consumers"])
    client_df = spark.createDataFrame(all_client, _INTERMEDIATE_DDL["client_consumers"])
    merged = _merge_consumers(stats_df, client_df)
    assert tuple(merged.columns) == OUT
    got = sorted((tuple(r) for r in merged.collect()), key=_sort_key)
    assert got == sorted(expected, key=_sort_key)
