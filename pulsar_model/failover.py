"""Failover subscriptions: which consumer is active, how balanced, what if (docs §6, §11.17-18, §12.11-12).

The broker keeps one active consumer per (topic partition, Failover subscription). It is replayed here
from the ``consumers`` table (arrival order = ``connect_order``):

* 3.x / 4.x (docs §6.3): stable sort by (priority level ascending, name in Java ``String.compareTo``
  order), keep the highest-priority group; partitioned topics take ``partitionIndex % groupSize``;
  non-partitioned topics (and partitioned ones when ``activeConsumerFailoverConsistentHashing`` is on)
  take the 100-replica Murmur3-32 hash ring with a ceiling lookup on ``h(topic)``.
* 2.x (docs §6.4, 2.10/2.11 rule): non-partitioned topics keep the first consumer in arrival order;
  partitioned topics use the sorted modulo rule; the consistent-hashing setting does not exist.

The sequential part (sort, ring) runs once per subscription inside ``mapInPandas`` over the consumers
shuffled by subscription and sorted by arrival (:func:`_map_subscriptions`); nothing is pulled to the
driver. The pure-Python helpers (:func:`java_sort_key`, :func:`murmur3_hash`,
:func:`select_active_index`) are public so notebooks can check single cases without Spark.

Version boundaries (read with the project's search tool and Pulsar's release tags; "assumed" where no
release tag was seen):

* ring for non-partitioned topics: apache/pulsar PR #19502 (merged 2023-02-14, first tag v3.0.0, no
  back-port) -> 3.0.0;
* ``activeConsumerFailoverConsistentHashing`` (PIP-392, PR #23584, Nov 2024, cherry-picked to branch-3.0,
  3.3 and 4.0) -> 3.0.8, 3.3.3, 4.0.1 (each of those release notes lists #23584, ``apache/pulsar-site``
  ``release-notes/versioned``) and every 4.1+;
* new ``TopicName.getPartitionIndex`` (PR #10902, merged 2021-06-11; first tag v2.9.0, no 2.8
  cherry-pick) -> 2.9.0 (the old specification says "≤ ~2.6" for the old rule, which this code keeps for
  every version before 2.9.0);
* "first in arrival order" for non-partitioned topics: PR #4604 (2.4.2). Releases before 2.4.2 sorted
  non-partitioned consumers too; how they handled index -1 is not known, so they get the 2.10 rule.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Final, Literal

import mmh3
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_model import DEFAULT_PULSAR_VERSION
from pulsar_model.domain.topic_names import PARTITION_MARKER, partition_index
from pulsar_model.domain.versions import PulsarVersion, VersionLike, flag
from pulsar_model.errors import ContractError

__all__ = [
    "FailoverRules",
    "active_consumers",
    "compare_with_stats",
    "failover_balance",
    "failover_rules",
    "failover_what_ifs",
    "java_sort_key",
    "murmur3_hash",
    "old_partition_index",
    "select_active_index",
    "what_if_active_consumers",
]

#: ``CONSUMER_CONSISTENT_HASH_REPLICAS``: virtual nodes per consumer on the failover ring (docs §6.3).
CONSISTENT_HASH_REPLICAS: Final = 100
#: Murmur3 seed of ``Murmur3_32Hash`` (docs §6.3).
MURMUR3_SEED: Final = 0
#: The hash is made a non-negative Java int before it is used as a ring key (docs §6.3).
NON_NEGATIVE_INT_MASK: Final = 0x7FFFFFFF
#: ``TopicName.getPartitionIndex`` result of a non-partitioned topic; every negative becomes this (§6.2).
NON_PARTITIONED: Final = -1

#: PIP-392 (``activeConsumerFailoverConsistentHashing``) is the flag ``failover_consistent_hashing_setting``:
#: 4.1.0, cherry-picked to 4.0.1, 3.3.3 and 3.0.8 (PR #23584; the patches' release notes, see module doc).

SelectionMode = Literal["modulo", "hash_ring", "first_arrival"]

#: Columns every ``consumers`` input needs (DESIGN.md acceptance-facing API).
REQUIRED_COLUMNS: Final = (
    "cluster",
    "topic",
    "subscription",
    "consumer_name",
    "priority_level",
    "connect_order",
)
#: Export columns that, when present, split one subscription per export (schemas/_common.yaml).
EXPORT_KEYS: Final = ("export_id", "export_date")


# --- pure-Python building blocks ------------------------------------------------------------------------


def java_sort_key(name: str) -> bytes:
    """Sort key ordering strings like Java ``String.compareTo`` (UTF-16 code units, docs §6.3).

    Big-endian UTF-16 bytes compare unit by unit as unsigned 16-bit numbers, and a proper prefix sorts
    first, exactly like ``compareTo``. Differs from Python's ``str`` order for non-BMP characters
    (surrogates 0xD800-0xDFFF sort below BMP characters 0xE000-0xFFFF).
    """
    return name.encode("utf-16-be", errors="surrogatepass")


def murmur3_hash(text: str) -> int:
    """``Murmur3_32Hash.makeHash``: MurmurHash3 x86_32, seed 0, UTF-8 bytes, ``& 0x7fffffff`` (docs §6.3)."""
    return mmh3.hash(text.encode("utf-8", errors="surrogatepass"), MURMUR3_SEED, signed=False) & (
        NON_NEGATIVE_INT_MASK
    )


@functools.lru_cache(maxsize=16384)
def _ring_points(name: str) -> tuple[int, ...]:
    """The ring keys of a consumer: ``h(name + j)`` for ``j`` in 0..99 (cached: the what-if scenarios
    rebuild the ring of the same consumers once per scenario)."""
    return tuple(murmur3_hash(name + str(j)) for j in range(CONSISTENT_HASH_REPLICAS))


def old_partition_index(topic: str) -> int:
    """``TopicName.getPartitionIndex`` before PR #10902 (docs §6.5 old rule, §12.12).

    Names containing ``-partition-``: ``Integer.parseInt`` of the text after the last ``'-'``
    (``x-partition--1`` -> 1, ``x-partition-01`` -> 1); anything unparsable -> -1.
    """
    if PARTITION_MARKER not in topic:
        return NON_PARTITIONED
    text = topic[topic.rfind("-") + 1 :]
    # No '-' can follow the last '-': Integer.parseInt accepts an optional '+' and digits (32-bit range).
    if re.fullmatch(r"\+?[0-9]+", text) is None:
        return NON_PARTITIONED
    value = int(text)
    return value if value <= 2**31 - 1 else NON_PARTITIONED


@dataclass(frozen=True)
class FailoverRules:
    """The version-dependent switches of the selection (docs §6.4, §6.5)."""

    version: PulsarVersion
    #: Non-partitioned topics use the hash ring (3.x+) instead of the first consumer in arrival order.
    ring_for_non_partitioned: bool
    #: ``activeConsumerFailoverConsistentHashing`` exists (PIP-392); otherwise the setting is ignored.
    has_consistent_hashing_setting: bool
    #: ``getPartitionIndex`` new rule (canonical int after the last ``-partition-``).
    new_partition_index: bool


def failover_rules(pulsar_version: VersionLike = DEFAULT_PULSAR_VERSION) -> FailoverRules:
    """Parse ``pulsar_version`` (raises ``ConfigError`` when unknown) into :class:`FailoverRules`."""
    v = PulsarVersion.parse(pulsar_version)
    return FailoverRules(
        version=v,
        ring_for_non_partitioned=flag("failover_ring_for_non_partitioned", v),
        has_consistent_hashing_setting=flag("failover_consistent_hashing_setting", v),
        new_partition_index=flag("new_partition_index", v),
    )


#: The group-key entry carrying a subscription's own broker version (``pulsar_version=None``).
_VERSION_KEY: Final = "_pa_ver"


def _rules_of(rules: FailoverRules | None, key_values: dict[str, object]) -> FailoverRules:
    """The call's rules, or (per row) those of the subscription's own version (null = the default)."""
    if rules is not None:
        return rules
    version = key_values.get(_VERSION_KEY)
    return failover_rules(str(version) if version is not None else DEFAULT_PULSAR_VERSION)


def _source(
    consumers: DataFrame, keys: list[str], pulsar_version: VersionLike | None, *extra: str
) -> DataFrame:
    """The consumer columns the grouped passes read (+ the version per row for ``pulsar_version`` None)."""
    if pulsar_version is None and "pulsar_version" not in consumers.columns:
        raise ContractError(
            "pulsar_version=None reads consumers.pulsar_version (each consumer's cluster version), which "
            "consumers does not have: add the column or pass a version string such as '4.1.3'"
        )
    version = [F.col("pulsar_version").cast("string").alias(_VERSION_KEY)] if pulsar_version is None else []
    return consumers.select(
        *keys,
        F.col("consumer_name").cast("string").alias("consumer_name"),
        F.col("priority_level").cast("int").alias("priority_level"),
        F.col("connect_order").cast("int").alias("connect_order"),
        *extra,
        *version,
    )


def topic_partition_index(topic: str, rules: FailoverRules) -> int:
    """The dispatcher's ``partitionIndex`` for a Failover subscription (docs §6.2: negative -> -1)."""
    index = partition_index(topic) if rules.new_partition_index else old_partition_index(topic)
    return index if index >= 0 else NON_PARTITIONED


def select_active_index(
    topic: str,
    names: Sequence[str],
    priorities: Sequence[int],
    *,
    consistent_hashing: bool,
    rules: FailoverRules,
) -> tuple[int, SelectionMode, list[int]]:
    """Pick the active consumer among ``names``/``priorities`` given in arrival order (docs §6.3/§6.4).

    Returns ``(index into the arrival-ordered inputs, selection mode, top group as arrival indexes in
    sorted order)``. ``names`` must not be empty.
    """
    n_all = len(names)
    if n_all == 0:
        raise ValueError("select_active_index needs at least one consumer")
    pindex = topic_partition_index(topic, rules)
    order = sorted(range(n_all), key=lambda i: (priorities[i], java_sort_key(names[i]), i))
    top_priority = priorities[order[0]]
    top = [i for i in order if priorities[i] == top_priority]
    use_ring = consistent_hashing and rules.has_consistent_hashing_setting
    if pindex >= 0 and not use_ring:
        return top[pindex % len(top)], "modulo", top
    if pindex < 0 and not rules.ring_for_non_partitioned:
        return 0, "first_arrival", top
    ring: dict[int, int] = {}
    for slot, i in enumerate(top):
        for point in _ring_points(names[i]):
            ring[point] = slot  # a later put overwrites an equal hash (§6.3)
    keys = sorted(ring)
    at = bisect.bisect_left(keys, murmur3_hash(topic))  # TreeMap.ceilingEntry
    key = keys[at] if at < len(keys) else keys[0]  # wrap around to firstEntry
    return top[ring[key]], "hash_ring", top


# --- the Spark transforms -------------------------------------------------------------------------------


def _check_columns(consumers: DataFrame) -> list[str]:
    missing = [c for c in REQUIRED_COLUMNS if c not in consumers.columns]
    if missing:
        raise ContractError(
            f"consumers is missing column(s) {', '.join(missing)}; "
            f"it needs at least {', '.join(REQUIRED_COLUMNS)}"
        )
    return ["cluster", "topic", "subscription", *[k for k in EXPORT_KEYS if k in consumers.columns]]


_ASSIGNMENT_FIELDS: Final = [
    T.StructField("partition_index", T.IntegerType(), False),
    T.StructField("consumer_count", T.IntegerType(), False),
    T.StructField("top_priority_level", T.IntegerType(), False),
    T.StructField("top_group_size", T.IntegerType(), False),
    T.StructField("top_group_consumers", T.ArrayType(T.StringType(), False), False),
    T.StructField("selection_mode", T.StringType(), False),
    T.StructField("active_consumer_name", T.StringType(), False),
    T.StructField("active_connect_order", T.IntegerType(), False),
    T.StructField("active_priority_level", T.IntegerType(), False),
]

_STATS_FIELDS: Final = [
    T.StructField("stats_active_consumer_name", T.StringType(), True),
    T.StructField("matches_stats", T.BooleanType(), True),
]


@dataclass(frozen=True)
class _Scenario:
    """A what-if change applied to every subscription before selection."""

    add: tuple[tuple[str, int], ...] = ()
    remove: tuple[str, ...] = ()
    consistent_hashing: bool | None = None


@dataclass(frozen=True)
class _Consumers:
    """One subscription's consumers in arrival (``connect_order``) order."""

    names: list[str]
    prios: list[int]
    orders: list[int]
    active_in_stats: list[object]


def _assign(
    group: _Consumers,
    topic: str,
    rules: FailoverRules,
    consistent_hashing: bool,
) -> dict[str, object]:
    names, prios, orders = group.names, group.prios, group.orders
    idx, mode, top = select_active_index(
        topic, names, prios, consistent_hashing=consistent_hashing, rules=rules
    )
    return {
        "partition_index": topic_partition_index(topic, rules),
        "consumer_count": len(names),
        "top_priority_level": prios[top[0]],
        "top_group_size": len(top),
        "top_group_consumers": [names[i] for i in top],
        "selection_mode": mode,
        "active_consumer_name": names[idx],
        "active_connect_order": orders[idx],
        "active_priority_level": prios[idx],
    }


def _apply_scenario(group: _Consumers, scenario: _Scenario) -> _Consumers:
    removed = set(scenario.remove)
    kept = [i for i, name in enumerate(group.names) if name not in removed]
    names = [group.names[i] for i in kept]
    prios = [group.prios[i] for i in kept]
    orders = [group.orders[i] for i in kept]
    if scenario.add:
        start = max(group.orders) + 1  # the added consumers connect after every existing one
        names += [name for name, _ in scenario.add]
        prios += [prio for _, prio in scenario.add]
        orders += list(range(start, start + len(scenario.add)))
    return _Consumers(names, prios, orders, [None] * len(names))


#: Output rows a grouped function buffers before handing them to Arrow as one batch.
_OUTPUT_BATCH_ROWS: Final = 8192

GroupFn = Callable[[dict[str, object], _Consumers], list[dict[str, object]]]


def _map_subscriptions(
    source: DataFrame, keys: list[str], per_group: GroupFn, schema: T.StructType
) -> DataFrame:
    """Run ``per_group`` once per subscription (``keys``) with its consumers in arrival order.

    One shuffle by the subscription keys and a sort by (keys, ``connect_order``) within each partition,
    then ``mapInPandas`` walks the sorted Arrow batches on plain Python lists, cutting them into
    subscriptions as the keys change (a subscription may span two batches). ``applyInPandas`` built a
    pandas frame per subscription in and out - about 15 ms each, 85 s for the 5,284 subscriptions of
    benchmark tier m; this is per row, not per group. The output is buffered and yielded in batches.
    """
    names = [f.name for f in schema.fields]
    with_stats = "is_active_in_stats" in source.columns
    with_version = _VERSION_KEY in source.columns

    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        out: list[dict[str, object]] = []
        current: tuple[object, ...] | None = None
        values: dict[str, object] = {}
        group = _Consumers([], [], [], [])

        def flush() -> None:
            if group.names:
                out.extend(per_group(values, group))

        for pdf in batches:
            cols = {c: pdf[c].tolist() for c in pdf.columns}
            key_cols = [cols[k] for k in keys]
            flags = cols["is_active_in_stats"] if with_stats else [None] * len(pdf)
            for i in range(len(pdf)):
                key = tuple(col[i] for col in key_cols)
                if key != current:
                    flush()
                    current, values = key, dict(zip(keys, key, strict=True))
                    if with_version:  # one cluster, one version: the subscription's first row tells it
                        values[_VERSION_KEY] = cols[_VERSION_KEY][i]
                    group = _Consumers([], [], [], [])
                group.names.append(str(cols["consumer_name"][i]))
                group.prios.append(int(cols["priority_level"][i]))
                group.orders.append(int(cols["connect_order"][i]))
                group.active_in_stats.append(flags[i])
            if len(out) >= _OUTPUT_BATCH_ROWS:
                yield pd.DataFrame(out, columns=names)
                out = []
        flush()
        if out:
            yield pd.DataFrame(out, columns=names)

    ordered = source.repartition(*keys).sortWithinPartitions(*keys, "connect_order")
    return ordered.mapInPandas(run, schema)  # type: ignore[arg-type]


def _group_fn(
    rules: FailoverRules | None,
    consistent_hashing: bool,
    with_stats: bool,
    scenario: _Scenario | None,
) -> GroupFn:
    def fn(key_values: dict[str, object], group: _Consumers) -> list[dict[str, object]]:
        topic = str(key_values["topic"])
        row: dict[str, object] = dict(key_values)
        group_rules = _rules_of(rules, key_values)
        base = _assign(group, topic, group_rules, consistent_hashing)
        if scenario is None:
            row.update(base)
        else:
            changed = _apply_scenario(group, scenario)
            hashing = (
                consistent_hashing if scenario.consistent_hashing is None else scenario.consistent_hashing
            )
            row["baseline_active_consumer_name"] = base["active_consumer_name"]
            row["baseline_selection_mode"] = base["selection_mode"]
            if not changed.names:
                row["what_if_active_consumer_name"] = None
                row["what_if_selection_mode"] = None
            else:
                alt = _assign(changed, topic, group_rules, hashing)
                row["what_if_active_consumer_name"] = alt["active_consumer_name"]
                row["what_if_selection_mode"] = alt["selection_mode"]
            row["active_changed"] = row["what_if_active_consumer_name"] != base["active_consumer_name"]
        if with_stats:
            # the first consumer (in arrival order) the stats flagged active
            flagged = [n for n, f in zip(group.names, group.active_in_stats, strict=True) if f is True]
            stats_name = flagged[0] if flagged else None
            row["stats_active_consumer_name"] = stats_name
            row["matches_stats"] = (
                None if stats_name is None else stats_name == row.get("active_consumer_name")
            )
        return [row]

    return fn


def _run(
    consumers: DataFrame,
    consistent_hashing: bool,
    pulsar_version: VersionLike | None,
    scenario: _Scenario | None,
) -> DataFrame:
    keys = _check_columns(consumers)
    rules = None if pulsar_version is None else failover_rules(pulsar_version)
    with_stats = scenario is None and "is_active_in_stats" in consumers.columns
    extra = ["is_active_in_stats"] if with_stats else []
    source = _source(consumers, keys, pulsar_version, *extra)
    key_fields = [f for f in source.schema.fields if f.name in keys]
    if scenario is None:
        fields = [*key_fields, *_ASSIGNMENT_FIELDS, *(_STATS_FIELDS if with_stats else [])]
    else:
        fields = [
            *key_fields,
            T.StructField("baseline_active_consumer_name", T.StringType(), False),
            T.StructField("baseline_selection_mode", T.StringType(), False),
            T.StructField("what_if_active_consumer_name", T.StringType(), True),
            T.StructField("what_if_selection_mode", T.StringType(), True),
            T.StructField("active_changed", T.BooleanType(), False),
        ]
    fn = _group_fn(rules, consistent_hashing, with_stats, scenario)
    return _map_subscriptions(source, keys, fn, T.StructType(fields))


def active_consumers(
    consumers: DataFrame,
    consistent_hashing: bool = False,
    pulsar_version: VersionLike | None = DEFAULT_PULSAR_VERSION,
) -> DataFrame:
    """The active consumer of every Failover subscription (docs §6.3, §6.4, §6.5).

    One row per (cluster, topic, subscription) — per export too when the input carries ``export_id`` /
    ``export_date`` — with ``active_consumer_name``, its ``active_connect_order`` and priority, the
    dispatcher's ``partition_index`` (-1 = non-partitioned), the highest-priority group in sorted order
    (``top_group_consumers``; duplicate names appear once per connection), and ``selection_mode``
    (``modulo``, ``hash_ring`` or ``first_arrival``). ``consistent_hashing`` is the broker's
    ``activeConsumerFailoverConsistentHashing`` (ignored by versions without PIP-392).

    When the input has ``is_active_in_stats`` (consumers contract), adds ``stats_active_consumer_name``
    (null when the stats named no active consumer) and ``matches_stats`` (null when unknown).
    A subscription with no consumer rows has no output row. Pure and lazy.
    """
    return _run(consumers, consistent_hashing, pulsar_version, None)


def what_if_active_consumers(
    consumers: DataFrame,
    *,
    add: Sequence[tuple[str, int]] = (),
    remove: Sequence[str] = (),
    consistent_hashing: bool = False,
    what_if_consistent_hashing: bool | None = None,
    pulsar_version: VersionLike | None = DEFAULT_PULSAR_VERSION,
) -> DataFrame:
    """Active consumer before and after a change, for every subscription (docs §6.3, §6.4).

    The change adds consumers ``(name, priority_level)`` (connecting after every existing one), removes
    every connection of the names in ``remove``, and/or switches ``activeConsumerFailoverConsistentHashing``
    to ``what_if_consistent_hashing``. One row per (cluster, topic, subscription[, export]) with
    ``baseline_active_consumer_name``, ``what_if_active_consumer_name`` (null when no consumer is left),
    both selection modes and ``active_changed``. Pure and lazy.
    """
    scenario = _Scenario(tuple((str(n), int(p)) for n, p in add), tuple(remove), what_if_consistent_hashing)
    return _run(consumers, consistent_hashing, pulsar_version, scenario)


#: Scenarios of :func:`failover_what_ifs`.
SCENARIO_REMOVE_CONSUMER: Final = "remove_consumer"
SCENARIO_ADD_CONSUMER: Final = "add_consumer"
SCENARIO_TOGGLE_CONSISTENT_HASHING: Final = "toggle_consistent_hashing"
#: Name given to the consumer the ``add_consumer`` scenario connects.
DEFAULT_ADDED_CONSUMER: Final = "what-if-consumer"


def _what_if_rows(
    rules: FailoverRules | None,
    consistent_hashing: bool,
    added_consumer: str,
) -> GroupFn:
    def fn(key_values: dict[str, object], group: _Consumers) -> list[dict[str, object]]:
        topic = str(key_values["topic"])
        group_rules = _rules_of(rules, key_values)
        key_values = {k: v for k, v in key_values.items() if k != _VERSION_KEY}
        base = _assign(group, topic, group_rules, consistent_hashing)
        top_priority = int(base["top_priority_level"])  # type: ignore[call-overload]
        scenarios: list[tuple[str, str | None, _Scenario]] = [
            (SCENARIO_REMOVE_CONSUMER, name, _Scenario(remove=(name,))) for name in dict.fromkeys(group.names)
        ]
        scenarios.append(
            (SCENARIO_ADD_CONSUMER, added_consumer, _Scenario(add=((added_consumer, top_priority),)))
        )
        scenarios.append(
            (SCENARIO_TOGGLE_CONSISTENT_HASHING, None, _Scenario(consistent_hashing=not consistent_hashing))
        )
        rows = []
        for scenario, consumer, change in scenarios:
            changed = _apply_scenario(group, change)
            hashing = consistent_hashing if change.consistent_hashing is None else change.consistent_hashing
            alt = _assign(changed, topic, group_rules, hashing) if changed.names else None
            what_if_name = None if alt is None else alt["active_consumer_name"]
            rows.append(
                {
                    **key_values,
                    "partition_index": base["partition_index"],
                    "scenario": scenario,
                    "scenario_consumer": consumer,
                    "what_if_consistent_hashing": hashing,
                    "baseline_active_consumer_name": base["active_consumer_name"],
                    "baseline_selection_mode": base["selection_mode"],
                    "what_if_active_consumer_name": what_if_name,
                    "what_if_selection_mode": None if alt is None else alt["selection_mode"],
                    "what_if_top_group_consumers": None if alt is None else alt["top_group_consumers"],
                    "active_changed": what_if_name != base["active_consumer_name"],
                }
            )
        return rows

    return fn


def failover_what_ifs(
    consumers: DataFrame,
    consistent_hashing: bool = False,
    pulsar_version: VersionLike | None = DEFAULT_PULSAR_VERSION,
    added_consumer: str = DEFAULT_ADDED_CONSUMER,
) -> DataFrame:
    """Standard what-if questions for every Failover subscription (docs §6.3, §6.4).

    One row per (cluster, topic, subscription[, export], scenario, scenario_consumer):

    * ``remove_consumer`` - once per distinct consumer name: every connection of that name leaves;
    * ``add_consumer`` - ``added_consumer`` connects last at the subscription's top priority level (where
      it lands in the sorted group, and so which partitions move, depends on its name and hash);
    * ``toggle_consistent_hashing`` - ``activeConsumerFailoverConsistentHashing`` switched to the other
      value (``what_if_consistent_hashing``; versions without PIP-392 ignore it, so nothing changes).

    Columns: ``partition_index``, the baseline active consumer and selection mode, the what-if ones
    (null when no consumer is left), ``what_if_top_group_consumers`` and ``active_changed``. Grouping by
    the partitioned topic, scenario and consumer gives the topic-level effect (partitions that move).
    Pure and lazy.
    """
    keys = _check_columns(consumers)
    rules = None if pulsar_version is None else failover_rules(pulsar_version)
    source = _source(consumers, keys, pulsar_version)
    key_fields = [f for f in source.schema.fields if f.name in keys]
    schema = T.StructType(
        [
            *key_fields,
            T.StructField("partition_index", T.IntegerType(), False),
            T.StructField("scenario", T.StringType(), False),
            T.StructField("scenario_consumer", T.StringType(), True),
            T.StructField("what_if_consistent_hashing", T.BooleanType(), False),
            T.StructField("baseline_active_consumer_name", T.StringType(), False),
            T.StructField("baseline_selection_mode", T.StringType(), False),
            T.StructField("what_if_active_consumer_name", T.StringType(), True),
            T.StructField("what_if_selection_mode", T.StringType(), True),
            T.StructField("what_if_top_group_consumers", T.ArrayType(T.StringType(), False), True),
            T.StructField("active_changed", T.BooleanType(), False),
        ]
    )
    fn = _what_if_rows(rules, consistent_hashing, added_consumer)
    return _map_subscriptions(source, keys, fn, schema)


def compare_with_stats(assignments: DataFrame, cursors: DataFrame) -> DataFrame:
    """Check the computed active consumers against the broker's ``activeConsumerName`` (docs §10.3).

    ``assignments`` is :func:`active_consumers` output; ``cursors`` (cursors contract) gives
    ``stats_active_consumer_name`` per (cluster, topic, cursor_name = subscription[, export]). Sets
    ``stats_active_consumer_name`` to the cursor's value, else the consumer flagged ``is_active_in_stats``
    (when the assignments carry it), and ``matches_stats`` (null when stats named no active consumer).
    One row per assignment row. Pure and lazy.
    """
    shared = [k for k in EXPORT_KEYS if k in assignments.columns and k in cursors.columns]
    keys = ["cluster", "topic", *shared]
    stats = cursors.where(F.col("stats_active_consumer_name").isNotNull()).select(
        *keys,
        F.col("cursor_name").alias("subscription"),
        F.col("stats_active_consumer_name").alias("_cursor_stats_name"),
    )
    joined = assignments.join(stats, on=[*keys, "subscription"], how="left")
    flagged = (
        F.col("stats_active_consumer_name")
        if "stats_active_consumer_name" in assignments.columns
        else F.lit(None).cast("string")
    )
    name = F.coalesce(F.col("_cursor_stats_name"), flagged)
    kept = [c for c in assignments.columns if c not in ("stats_active_consumer_name", "matches_stats")]
    return joined.select(
        *kept,
        name.alias("stats_active_consumer_name"),
        F.when(name.isNotNull(), name == F.col("active_consumer_name")).alias("matches_stats"),
    )


def failover_balance(assignments: DataFrame) -> DataFrame:
    """Load balance of the active consumers over the partitions of each topic (docs §6.3).

    ``assignments`` is the output of :func:`active_consumers`. One row per (cluster, base topic,
    subscription[, export]) where the base topic is the partitioned topic (``-partition-N`` removed when
    ``partition_index >= 0``; a non-partitioned topic is its own group of one). Columns:
    ``partitions``, ``consumers`` (distinct names seen in any partition's top-priority group),
    ``partitions_per_consumer`` (map name -> active partitions, 0 for idle names), ``max_partitions``,
    ``min_partitions``, ``imbalance`` (max - min) and ``idle_consumers`` (sorted names never active).
    Pure and lazy.
    """
    export_keys = [k for k in EXPORT_KEYS if k in assignments.columns]
    # Greedy ``.*`` stops at the LAST ``-partition-``, as TopicName.getPartitionedTopicName does.
    base = F.when(
        F.col("partition_index") >= 0, F.regexp_extract("topic", f"^(.*){PARTITION_MARKER}", 1)
    ).otherwise(F.col("topic"))
    keys = ["cluster", "base_topic", "subscription", *export_keys]
    a = assignments.select(
        "cluster",
        "subscription",
        *export_keys,
        base.alias("base_topic"),
        "active_consumer_name",
        "top_group_consumers",
    )
    # One aggregation per group (one shuffle): the names seen in any top-priority group or as the active
    # consumer, and per name the partitions it is active on (0 for an idle name).
    grouped = a.groupBy(*keys).agg(
        F.flatten(F.collect_list(F.array_distinct("top_group_consumers"))).alias("_members"),
        F.collect_list("active_consumer_name").alias("_active"),
    )
    per_name = grouped.select(
        *keys,
        F.transform(
            F.sort_array(F.array_distinct(F.concat("_members", "_active"))),
            lambda name: F.struct(
                name.alias("consumer_name"),
                F.size(F.filter("_active", lambda active: active == name)).alias("n"),
            ),
        ).alias("_per_name"),
    )
    counts = F.transform("_per_name", lambda e: e["n"])
    return per_name.select(
        *keys,
        F.aggregate(counts, F.lit(0), lambda acc, n: acc + n).cast("int").alias("partitions"),
        F.size("_per_name").cast("int").alias("consumers"),
        F.map_from_entries("_per_name").alias("partitions_per_consumer"),
        F.array_max(counts).alias("max_partitions"),
        F.array_min(counts).alias("min_partitions"),
        (F.array_max(counts) - F.array_min(counts)).alias("imbalance"),
        F.transform(F.filter("_per_name", lambda e: e["n"] == 0), lambda e: e["consumer_name"]).alias(
            "idle_consumers"
        ),
    )
