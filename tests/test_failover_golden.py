"""Golden tests for failover active-consumer selection (docs §6.5, §6.6).

Each Spark test batches many scenarios into one DataFrame (one subscription per scenario step).
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pulsar_model.domain.topic_names import partition_index
from pulsar_model.failover import (
    active_consumers,
    compare_with_stats,
    failover_balance,
    failover_rules,
    failover_what_ifs,
    java_sort_key,
    murmur3_hash,
    old_partition_index,
    topic_partition_index,
    what_if_active_consumers,
)
from tests.contract_frames import contract_frame, contract_schema

CONSUMER_COLUMNS = ["cluster", "topic", "subscription", "consumer_name", "priority_level", "connect_order"]
CONSUMERS = contract_schema("consumers", CONSUMER_COLUMNS)

PART4 = "persistent://prop/use/ns-abc/successTopic-partition-4"
PTOPIC = "persistent://part-perf/perf.t1/ptopic"
SUCCESS = "persistent://prop/use/ns-abc/successTopic"
ORDERS = "persistent://public/default/orders"


def _frame(spark: SparkSession, cases: Sequence[tuple[str, str, Sequence[tuple[str, int]]]]) -> DataFrame:
    rows = [
        ("c1", topic, sub, name, prio, order)
        for topic, sub, consumers in cases
        for order, (name, prio) in enumerate(consumers)
    ]
    return spark.createDataFrame(rows, schema=CONSUMERS)


def _active(df: DataFrame) -> dict[str, tuple[str, int, str]]:
    return {
        r["subscription"]: (r["active_consumer_name"], r["active_connect_order"], r["selection_mode"])
        for r in df.collect()
    }


# docs §6.6.1 testAddRemoveConsumer (partitionIndex 4, all priority 0), one subscription per step.
ADD_REMOVE = [
    (PART4, "1-[Cons1]", [("Cons1", 0)]),
    (PART4, "2-add-Cons1-again", [("Cons1", 0), ("Cons1", 0)]),
    (PART4, "3-add-Cons2", [("Cons1", 0), ("Cons1", 0), ("Cons2", 0)]),
    (PART4, "4-add-Cons0", [("Cons1", 0), ("Cons1", 0), ("Cons2", 0), ("Cons0", 0)]),
    (PART4, "5-remove-Cons2", [("Cons1", 0), ("Cons1", 0), ("Cons0", 0)]),
    (PART4, "6-remove-Cons0", [("Cons1", 0), ("Cons1", 0)]),
    (PART4, "7-remove-one-Cons1", [("Cons1", 0)]),
]
ADD_REMOVE_EXPECTED = {
    "1-[Cons1]": ("Cons1", 0, "modulo"),
    "2-add-Cons1-again": ("Cons1", 0, "modulo"),  # sorted [Cons1, Cons1], 4 % 2 = 0
    "3-add-Cons2": ("Cons1", 1, "modulo"),  # [Cons1, Cons1, Cons2], 4 % 3 = 1 -> second Cons1
    "4-add-Cons0": ("Cons0", 3, "modulo"),  # [Cons0, Cons1, Cons1, Cons2], 4 % 4 = 0 -> Cons0
    "5-remove-Cons2": ("Cons1", 0, "modulo"),  # [Cons0, Cons1, Cons1], 4 % 3 = 1 -> Cons1
    "6-remove-Cons0": ("Cons1", 0, "modulo"),
    "7-remove-one-Cons1": ("Cons1", 0, "modulo"),
}


def test_active_consumers_add_remove_sequence_partitioned(spark: SparkSession) -> None:
    """docs §6.6.1: '[Cons1] -> Cons1; add Cons1 again -> Cons1; add Cons2 -> Cons1; add Cons0 -> Cons0;
    remove Cons2 -> Cons1; remove Cons0 -> Cons1; remove one Cons1 -> Cons1 remains active'."""
    got = _active(active_consumers(_frame(spark, ADD_REMOVE)))
    assert got == ADD_REMOVE_EXPECTED


RING_CASES = [
    # docs §6.6.2 (newer test) and §6.6.3: ring order for {Cons1, Cons2} (prio 1) puts Cons1 first.
    (PTOPIC, "ptopic-Cons1", [("Cons1", 1)]),
    (PTOPIC, "ptopic-Cons1-Cons2", [("Cons1", 1), ("Cons2", 1)]),
    (PTOPIC, "ptopic-add-Cons3-prio0", [("Cons1", 1), ("Cons2", 1), ("Cons3", 0)]),
    (PTOPIC, "ptopic-remove-Cons1", [("Cons2", 1), ("Cons3", 0)]),
    (PTOPIC, "ptopic-Cons2-first", [("Cons2", 1), ("Cons1", 1)]),
    # docs §6.6.3: successTopic {Cons1,Cons2} -> Cons1; {Cons1,Cons2,Cons3} -> Cons3.
    (SUCCESS, "success-2", [("Cons1", 0), ("Cons2", 0)]),
    (SUCCESS, "success-3", [("Cons1", 0), ("Cons2", 0), ("Cons3", 0)]),
    # docs §6.6.3: orders-partition-P with c1, c2, c3 (prio 0).
    *[(f"{ORDERS}-partition-{p}", f"orders-P{p}", [("c1", 0), ("c2", 0), ("c3", 0)]) for p in range(4)],
    # docs §6.5: names that are not partitions use the ring, whatever the consistent-hashing setting.
    (f"{ORDERS}-partition-00", "orders-P00", [("c1", 0), ("c2", 0), ("c3", 0)]),
    ("persistent://public/default/tp1-partition-0-DLQ", "dlq", [("c1", 0), ("c2", 0), ("c3", 0)]),
    # docs §6.3: Java String.compareTo order; U+1F600 is a surrogate pair 0xD83D.. < U+FF41.
    (f"{ORDERS}-partition-0", "non-bmp", [("\uff41", 0), ("\U0001f600", 0)]),
]


def _ring_expected(hashing: bool) -> dict[str, str]:
    ring_orders = {0: "c2", 1: "c2", 2: "c3", 3: "c1"}
    modulo_orders = {0: "c1", 1: "c2", 2: "c3", 3: "c1"}
    orders = ring_orders if hashing else modulo_orders
    expected = {
        "ptopic-Cons1": "Cons1",
        "ptopic-Cons1-Cons2": "Cons1",
        "ptopic-add-Cons3-prio0": "Cons3",
        "ptopic-remove-Cons1": "Cons3",
        "ptopic-Cons2-first": "Cons1",
        "success-2": "Cons1",
        "success-3": "Cons3",
        **{f"orders-P{p}": orders[p] for p in range(4)},
    }
    return expected


def test_active_consumers_ring_and_modulo_picks_3x(spark: SparkSession) -> None:
    """docs §6.6.2/§6.6.3 ring picks (3.x), modulo vs ring per activeConsumerFailoverConsistentHashing."""
    df = _frame(spark, RING_CASES)
    both = active_consumers(df, consistent_hashing=False).unionByName(
        active_consumers(
            df.withColumn("subscription", F.concat("subscription", F.lit("|ring"))), consistent_hashing=True
        )
    )
    got = {sub: name for sub, (name, _, _) in _active(both).items()}
    for hashing, suffix in ((False, ""), (True, "|ring")):
        for sub, name in _ring_expected(hashing).items():
            assert got[sub + suffix] == name, (sub + suffix, got[sub + suffix])
        # Not partitions: the same ring pick in both settings.
        assert got["orders-P00" + suffix] == got["orders-P00|ring"]
        assert got["dlq" + suffix] == got["dlq|ring"]
    assert got["non-bmp"] == "\U0001f600"  # Python's str order would pick U+FF41


def test_active_consumers_2_10_first_arrival_for_non_partitioned(spark: SparkSession) -> None:
    """docs §6.6.2 older copy (2.10): Cons1 (prio 1) active; Cons2 (prio 1) and Cons3 (prio 0) join
    without changing it; after removing Cons1 the next in arrival order (Cons2) becomes active.
    Partitioned topics keep the sorted modulo rule; the consistent-hashing flag does not exist."""
    df = _frame(spark, RING_CASES[:5] + ADD_REMOVE[3:4] + RING_CASES[7:11])
    got = _active(active_consumers(df, consistent_hashing=True, pulsar_version="2.10.6"))
    assert got["ptopic-Cons1"] == ("Cons1", 0, "first_arrival")
    assert got["ptopic-Cons1-Cons2"] == ("Cons1", 0, "first_arrival")
    assert got["ptopic-add-Cons3-prio0"] == ("Cons1", 0, "first_arrival")
    assert got["ptopic-remove-Cons1"] == ("Cons2", 0, "first_arrival")
    assert got["4-add-Cons0"] == ("Cons0", 3, "modulo")
    assert {p: got[f"orders-P{p}"][0] for p in range(4)} == {0: "c1", 1: "c2", 2: "c3", 3: "c1"}


def test_active_consumers_old_partition_index_rule_by_version(spark: SparkSession) -> None:
    """docs §6.5 / §12.12: the old rule reads 'x-partition--1' as 1 and 'x-partition-01' as 1."""
    consumers = [("a", 0), ("b", 0), ("c", 0)]
    cases = [
        ("persistent://t/ns/x-partition--1", "minus-one", consumers),
        ("persistent://t/ns/x-partition-01", "zero-one", consumers),
    ]
    df = _frame(spark, cases)
    old = _active(active_consumers(df, pulsar_version="2.8.4"))
    new = _active(active_consumers(df, pulsar_version="2.10.6"))
    assert old == {"minus-one": ("b", 1, "modulo"), "zero-one": ("b", 1, "modulo")}
    assert new == {"minus-one": ("a", 0, "first_arrival"), "zero-one": ("a", 0, "first_arrival")}


def test_active_consumers_checks_stats_and_export_keys(spark: SparkSession) -> None:
    """Extra contract columns: ``is_active_in_stats`` is compared; ``export_id`` splits subscriptions."""
    rows = [
        ("c1", PART4, "s", "e1", "Cons1", 0, 0, True),
        ("c1", PART4, "s", "e1", "Cons0", 0, 1, False),
        ("c1", PART4, "s", "e2", "Cons1", 0, 0, True),
        ("c1", PTOPIC, "s", "e1", "Cons1", 0, 0, None),
    ]
    consumers = contract_frame(
        spark,
        "consumers",
        [*CONSUMER_COLUMNS[:3], "export_id", *CONSUMER_COLUMNS[3:], "is_active_in_stats"],
        rows,
    )
    out = active_consumers(consumers)
    got = {
        (r["topic"], r["export_id"]): (
            r["active_consumer_name"],
            r["stats_active_consumer_name"],
            r["matches_stats"],
        )
        for r in out.collect()
    }
    assert got == {
        (PART4, "e1"): ("Cons0", "Cons1", False),  # [Cons0, Cons1], 4 % 2 = 0 -> Cons0; stats said Cons1
        (PART4, "e2"): ("Cons1", "Cons1", True),
        (PTOPIC, "e1"): ("Cons1", None, None),
    }


def test_what_if_active_consumers_add_remove_and_hashing(spark: SparkSession) -> None:
    """docs §6.6.1 as a what-if: adding Cons0 to [Cons1, Cons1, Cons2] moves partition 4 to Cons0;
    switching consistent hashing on moves orders-partition-0 from c1 to c2 (docs §6.6.3)."""
    df = _frame(spark, [ADD_REMOVE[2], RING_CASES[7]])
    added = {r["subscription"]: r for r in what_if_active_consumers(df, add=[("Cons0", 0)]).collect()}
    assert (
        added["3-add-Cons2"]["baseline_active_consumer_name"],
        added["3-add-Cons2"]["what_if_active_consumer_name"],
    ) == (
        "Cons1",
        "Cons0",
    )
    assert added["3-add-Cons2"]["active_changed"] is True
    ring = {
        r["subscription"]: r for r in what_if_active_consumers(df, what_if_consistent_hashing=True).collect()
    }
    assert (
        ring["orders-P0"]["baseline_active_consumer_name"],
        ring["orders-P0"]["what_if_active_consumer_name"],
    ) == (
        "c1",
        "c2",
    )
    assert ring["orders-P0"]["what_if_selection_mode"] == "hash_ring"
    removed = {
        r["subscription"]: r for r in what_if_active_consumers(df, remove=["Cons1", "Cons2"]).collect()
    }
    assert removed["3-add-Cons2"]["what_if_active_consumer_name"] is None


def test_failover_balance_counts_partitions_and_idle(spark: SparkSession) -> None:
    """Modulo over 4 partitions and 3 consumers (docs §6.6.3): c1 gets P0, P3; c2 P1; c3 P2.
    A fourth, lower-priority consumer is never in the top group, so it is not listed."""
    cases = [
        (f"{ORDERS}-partition-{p}", "s", [("c1", 0), ("c2", 0), ("c3", 0), ("c4", 1)]) for p in range(4)
    ] + [(f"{SUCCESS}-partition-{p}", "s", [("x", 0), ("y", 0), ("z", 0)]) for p in range(2)]
    out = failover_balance(active_consumers(_frame(spark, cases)))
    got = {r["base_topic"]: r.asDict(recursive=True) for r in out.collect()}
    assert got[ORDERS]["partitions"] == 4
    assert got[ORDERS]["partitions_per_consumer"] == {"c1": 2, "c2": 1, "c3": 1}
    assert (got[ORDERS]["max_partitions"], got[ORDERS]["min_partitions"], got[ORDERS]["imbalance"]) == (
        2,
        1,
        1,
    )
    assert got[ORDERS]["idle_consumers"] == []
    assert got[SUCCESS]["partitions_per_consumer"] == {"x": 1, "y": 1, "z": 0}
    assert got[SUCCESS]["idle_consumers"] == ["z"]


def test_failover_what_ifs_every_scenario_golden(spark: SparkSession) -> None:
    """docs §6.6.1 from [Cons1, Cons1, Cons2, Cons0] (partition 4, 4 % 4 = 0 -> Cons0): 'remove Cons2 ->
    [Cons0, Cons1, Cons1], 4 % 3 = 1 -> Cons1'; removing Cons0 -> [Cons1, Cons1, Cons2], 4 % 3 = 1 -> Cons1;
    removing both Cons1 -> [Cons0, Cons2], 4 % 2 = 0 -> Cons0; adding 'what-if-consumer' (sorts last) ->
    4 % 5 = 4 -> it. docs §6.6.3 orders-partition-0 (c1, c2, c3): modulo c1, ring c2 (the toggle)."""
    df = _frame(spark, [ADD_REMOVE[3], RING_CASES[7]])
    got = {
        (r["subscription"], r["scenario"], r["scenario_consumer"]): (
            r["baseline_active_consumer_name"],
            r["what_if_active_consumer_name"],
            r["what_if_selection_mode"],
            r["what_if_consistent_hashing"],
            r["active_changed"],
        )
        for r in failover_what_ifs(df, pulsar_version="4.1.3").collect()
    }
    assert got == {
        ("4-add-Cons0", "remove_consumer", "Cons1"): ("Cons0", "Cons0", "modulo", False, False),
        ("4-add-Cons0", "remove_consumer", "Cons2"): ("Cons0", "Cons1", "modulo", False, True),
        ("4-add-Cons0", "remove_consumer", "Cons0"): ("Cons0", "Cons1", "modulo", False, True),
        ("4-add-Cons0", "add_consumer", "what-if-consumer"): (
            "Cons0",
            "what-if-consumer",
            "modulo",
            False,
            True,
        ),
        # ring over {Cons0, Cons1, Cons1, Cons2} for successTopic-partition-4 (computed with the docs §6
        # oracle, tests/oracle/failover.py): Cons0 again
        ("4-add-Cons0", "toggle_consistent_hashing", None): ("Cons0", "Cons0", "hash_ring", True, False),
        ("orders-P0", "remove_consumer", "c1"): ("c1", "c2", "modulo", False, True),  # [c2, c3], 0 % 2 = 0
        ("orders-P0", "remove_consumer", "c2"): ("c1", "c1", "modulo", False, False),
        ("orders-P0", "remove_consumer", "c3"): ("c1", "c1", "modulo", False, False),
        ("orders-P0", "add_consumer", "what-if-consumer"): ("c1", "c1", "modulo", False, False),
        ("orders-P0", "toggle_consistent_hashing", None): ("c1", "c2", "hash_ring", True, True),
    }


def test_compare_with_stats_prefers_cursor_active_consumer_name(spark: SparkSession) -> None:
    """docs §10.3 activeConsumerName: from the cursor's stats when exported, else the flagged consumer."""
    rows = [
        ("c1", PART4, "s", "Cons1", 0, 0, True),  # flag says Cons1, the cursor's stats say Cons0
        ("c1", PART4, "s", "Cons0", 0, 1, False),
        ("c1", PTOPIC, "s", "Cons1", 0, 0, True),  # no cursor stats: the flag is used
        ("c1", SUCCESS, "s", "Cons1", 0, 0, None),  # nothing exported
    ]
    consumers = contract_frame(spark, "consumers", [*CONSUMER_COLUMNS, "is_active_in_stats"], rows)
    cursors = contract_frame(
        spark,
        "cursors",
        ["cluster", "topic", "cursor_name", "stats_active_consumer_name"],
        [("c1", PART4, "s", "Cons0"), ("c1", PART4, "other", "x"), ("c1", PTOPIC, "s", None)],
    )
    out = compare_with_stats(active_consumers(consumers), cursors)
    got = {
        r["topic"]: (r["active_consumer_name"], r["stats_active_consumer_name"], r["matches_stats"])
        for r in out.collect()
    }
    assert got == {
        PART4: ("Cons0", "Cons0", True),
        PTOPIC: ("Cons1", "Cons1", True),
        SUCCESS: ("Cons1", None, None),
    }


# --- no Spark ---------------------------------------------------------------------------------------------


def test_murmur3_hash_matches_spec_computed_values() -> None:
    """docs §6.6.3: h("Cons10") = 997005468, h("Cons20") = 1252956826, h(orders) = 2121668789, ..."""
    assert murmur3_hash("Cons10") == 997005468
    assert murmur3_hash("Cons20") == 1252956826
    assert murmur3_hash(ORDERS) == 2121668789
    assert murmur3_hash(PTOPIC) == 2020515851
    assert murmur3_hash(SUCCESS) == 530678320


@pytest.mark.parametrize(
    ("name", "new", "old"),
    [
        ("persistent://t/ns/mytopic-partition-4", 4, 4),
        ("persistent://t/ns/mytopic-partition--1", -1, 1),
        ("persistent://t/ns/mytopic-partition-00", -1, 0),
        ("persistent://t/ns/mytopic-partition-012", -1, 12),
        ("persistent://t/ns/mytopic-partition-01", -1, 1),
        ("persistent://t/ns/tp1-partition-0-DLQ", -1, -1),
        ("persistent://t/ns/mytopic", -1, -1),
        ("persistent://t/ns/mytopic-partition-+5", -1, 5),
    ],
)
def test_partition_index_new_and_old_rules(name: str, new: int, old: int) -> None:
    """docs §6.5 / TopicNameTest.topic, and the old rule of §12.12."""
    assert partition_index(name) == new
    assert old_partition_index(name) == old
    assert topic_partition_index(name, failover_rules("3.0.7")) == new
    assert topic_partition_index(name, failover_rules("2.8.4")) == max(old, -1)


def test_java_sort_key_orders_utf16_code_units() -> None:
    """docs §6.3: Java compares UTF-16 code units; a supplementary character sorts before U+E000..U+FFFF."""
    names = ["\uffff", "\U0001f600", "b", "ab", "a", "\u00e9"]
    assert sorted(names, key=java_sort_key) == ["a", "ab", "b", "\u00e9", "\U0001f600", "\uffff"]
    assert sorted(names) != sorted(names, key=java_sort_key)


def test_failover_rules_version_boundaries() -> None:
    assert failover_rules("2.11.4").ring_for_non_partitioned is False
    assert failover_rules("3.0.0").ring_for_non_partitioned is True
    assert failover_rules("3.0.7").has_consistent_hashing_setting is False
    assert failover_rules("3.0.8").has_consistent_hashing_setting is True
    assert failover_rules("3.2.4").has_consistent_hashing_setting is False
    assert failover_rules("4.0.1").has_consistent_hashing_setting is True
    assert failover_rules("2.8.4").new_partition_index is False
