"""Benchmark datasets generated straight into the input Delta tables by Spark (issue 10, part 1).

:func:`generate_tier` builds every input table of one export date from ``spark.range`` with column
expressions, explodes and joins - no Python loop over topics or rows (the driver only loops over the
tables) - and writes each table through :class:`~pulsar_model.tables.delta_io.DeltaTables` as the ingest does:
conformed to its contract (``schemas/``), the ``export_date`` partition replaced (``plan_requests``,
unpartitioned, overwritten). Every pseudo-random choice is ``xxhash64(seed, salt, ids...)`` of stable ids
(never ``rand``), so a seed gives the same rows whatever the partitioning, the number of cores or the
execution order.

Tiers (:data:`TIERS`; sizes are targets, the hash draws land within about 15%):

====  ========  ======================  ==========  ========  ==========  ==========================
tier  clusters  topic partitions        ledgers     cursors   entries     huge topics (each)
====  ========  ======================  ==========  ========  ==========  ==========================
s     3         60                      600         300       30k         1 x 120 ledgers, 40 cursors
m     3         6,000                   60k         30k       3M          2 x 2,000 ledgers, 200 cursors
l     3         60,000                  600k        300k      30M         3 x 12,000 ledgers, 1k cursors
xl    3         600,000                 6M          3M        30M         3 x 12,000 ledgers, 1k cursors
====  ========  ======================  ==========  ========  ==========  ==========================

``xl`` is 10x ``l``'s METADATA (topics, ledgers, cursors) with the SAME entry volume as ``l`` (30M
entries, about 5 per ledger): it measures how the per-topic work grows with the number of topics, not
with the data. Messages are about 2 per entry (half of the plain topics batch 1-5 messages per entry).

What the data contains (fractions of topics; per topic every row follows the same rules):

* **Skew**: the huge topics above among many small ones (ledgers per topic exponentially distributed,
  entries per ledger uniform around the tier mean; cursors per topic exponentially distributed).
* **Replicated topics** (the same partition names in every cluster, namespace ``geo/replicated``): every
  ledger starts with one replicated-subscription snapshot (docs §4.3-§4.5, §4.8) started by the cluster
  ``clusters[(ledger order + group) % n]``: the REQUEST (type 10) of each round, its copy landed in
  every remote (``replicated_from`` = source), each remote's RESPONSE (11) written locally with its LAC
  (the landed request) and ``replicate_to = [source]``, the responses received back in the source in
  sorted remote order, the second round with three or more clusters, and the SNAPSHOT (12) with
  ``local_message_id`` = the last received response and the round-1 positions. The subscription
  ``sub-0`` is replicated; it is consumed on one primary cluster, which writes an UPDATE (13) in a ledger
  whose snapshot it sourced once its mark-delete passed the UPDATE's slot; the UPDATE lands in every
  remote, and the remote ``sub-0`` sits at its position from the last UPDATE (a few lag one UPDATE
  behind). A snapshot cut by the end of the current ledger stays pending. Data entries of replicated
  topics are copies: the entry at the same index carries the same producer and sequence id in every
  cluster (``replicated_from`` = the origin cluster). Replicator cursors ``pulsar.repl.<remote>``.
* **Keyed topics** (compaction): keys repeat (about 4 messages per key), 4% key-less messages, 5%
  tombstones (empty payload, half of them with ``null_value``); 60% have a ``__compaction`` cursor (the
  previous horizon) and a compacted ledger.
* **Transaction topics**: in every ledger a transaction writes 4 data entries (ids 2-5) and its end
  marker at entry 6: TXN_COMMIT (21) or TXN_ABORT (22); the current ledger's transaction (and 2% of the
  others) stays open (no marker), holding the topic's maxReadPosition back (docs §8).
* **Batching**: half of the plain and keyed topics batch 1-5 messages per entry (``batch_index``,
  ``batch_size``); markers and transactional entries are never batched.
* **Ugly states** in a small fraction: ledgers trimmed at the head (absent) with a cursor still pointing
  into one, empty closed ledgers, an empty current ledger (LAC in the previous ledger), ``(L,-1)``
  mark-delete positions, non-contiguous ledger ids (steps of 1-3), individually-deleted ranges (ack
  holes) after the mark-delete, some spanning two ledgers, cursors at the LAC, non-durable readers,
  ``pulsar.dedup`` cursors.
* **consumers** of Failover subscriptions (2-4 per subscription, priority levels 0/1, the same consumer
  names on every partition of a partitioned topic) and of the replicated subscription on its primary;
  **schema_versions** (AVRO, 2-4 versions, some adding a field without a default: incompatible under
  FULL); **backlog_quotas** at broker, namespace and topic level (size and time, every policy; tight
  topic-level size quotas with ``consumer_backlog_eviction`` so that some topics breach);
  **plan_requests** for 10% of the subscriptions (skip Include/Exclude, clear_backlog, reset to
  earliest/latest/a position, reset_by_time) and reader starts at the LAC of 5% of the topics.

Invariants (checked by ``tests/test_bench_datagen.py``): every row satisfies its contract (types,
non-null columns, unique keys); entry ids are ``0..entries-1`` of a listed ledger; a closed ledger's
``size_bytes`` is the sum of its entries' sizes, the open ledger is listed 0/0 and its entries and bytes
are ``managed_ledgers.current_ledger_entries`` / ``current_ledger_size_bytes``; ``total_size_bytes`` sums
every listed ledger; a message row per batch slot (one per non-batched or marker entry); a ``markers`` row
per marker entry; mark-delete positions never pass the LAC.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from pulsar_model.ingest.pipeline import INPUT_TABLES
from pulsar_model.tables.contracts import conform, contract
from pulsar_model.tables.delta_io import DeltaTables, TableWrite

__all__ = ["TABLES", "TIERS", "TierFrames", "TierSpec", "generate_tier", "tier_frames"]

#: Tables :func:`generate_tier` writes, in write order: the ingest's input tables (no quarantine and no
#: parser notes: the generated rows are all valid and nothing is assumed about them) and the plans
#: stage's request table.
TABLES: Final = (*(t for t in INPUT_TABLES if t not in ("quarantine", "ingest_notes")), "plan_requests")

_MARKER_NAMES: Final = {
    10: "REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST",
    11: "REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE",
    12: "REPLICATED_SUBSCRIPTION_SNAPSHOT",
    13: "REPLICATED_SUBSCRIPTION_UPDATE",
    20: "TXN_COMMITTING",
    21: "TXN_COMMIT",
    22: "TXN_ABORT",
}
#: Entry ids of the transaction of a transaction topic's ledger: data entries, then the end marker.
_TXN_FIRST, _TXN_LAST, _TXN_END = 2, 5, 6
#: Replicated subscription (consumed on the primary cluster) and the cursor kinds (cursors.cursor_kind).
_REPLICATED_SUB: Final = "sub-0"
_SUB_TYPES: Final = ("Failover", "Shared", "Exclusive", "Key_Shared")
_TWO_POW_52: Final = float(2**52)
_LEDGER_ID_STRIDE: Final = 1_000_000


@dataclass(frozen=True)
class TierSpec:
    """Sizes of one benchmark tier (totals over all clusters; see the module docstring).

    ``replicated_groups`` topics exist in every cluster (each counts once per cluster in ``topics``);
    ``huge_*`` are per huge topic. Fractions are of the non-replicated topics.
    """

    name: str
    clusters: tuple[str, ...]
    topics: int
    ledgers: int
    cursors: int
    entries: int
    huge_topics: int
    huge_ledgers: int
    huge_cursors: int
    replicated_groups: int
    keyed_fraction: float = 0.3
    txn_fraction: float = 0.1
    batched_fraction: float = 0.5
    max_batch: int = 5

    def __post_init__(self) -> None:
        if list(self.clusters) != sorted(set(self.clusters)) or not self.clusters:
            raise ValueError(f"clusters {self.clusters!r} must be distinct and sorted by name")
        local = self.topics - self.replicated_groups * len(self.clusters)
        if local <= self.huge_topics or self.topics <= 0:
            raise ValueError(
                f"tier {self.name}: {self.topics} topics leave no room for the huge/local topics"
            )
        if self.huge_topics * self.huge_ledgers >= self.ledgers:
            raise ValueError(f"tier {self.name}: huge topics take all {self.ledgers} ledgers")

    @property
    def groups(self) -> int:
        """Topic groups: a replicated group is one topic in every cluster, a local group one topic."""
        return self.replicated_groups + self.topics - self.replicated_groups * len(self.clusters)

    @property
    def entries_per_ledger(self) -> int:
        return max(1, round(self.entries / self.ledgers))

    @property
    def small_ledgers_mean(self) -> float:
        return max(
            1.0, (self.ledgers - self.huge_topics * self.huge_ledgers) / (self.topics - self.huge_topics)
        )

    @property
    def small_cursors_mean(self) -> float:
        return max(
            0.5, (self.cursors - self.huge_topics * self.huge_cursors) / (self.topics - self.huge_topics)
        )


_CLUSTERS = ("eu-central", "us-east", "us-west")
TIERS: dict[str, TierSpec] = {
    "s": TierSpec("s", _CLUSTERS, 60, 600, 300, 30_000, 1, 120, 40, 4),
    "m": TierSpec("m", _CLUSTERS, 6_000, 60_000, 30_000, 3_000_000, 2, 2_000, 200, 100),
    "l": TierSpec("l", _CLUSTERS, 60_000, 600_000, 300_000, 30_000_000, 3, 12_000, 1_000, 1_000),
    "xl": TierSpec("xl", _CLUSTERS, 600_000, 6_000_000, 3_000_000, 30_000_000, 3, 12_000, 1_000, 10_000),
}


# --- hash-based pseudo-random column helpers (deterministic, partition-independent) -------------------


class _Rng:
    """Column expressions drawn from ``xxhash64(seed, salt, ids...)``."""

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def hash(self, salt: str, *ids: Column) -> Column:
        return F.xxhash64(F.lit(self.seed), F.lit(salt), *ids)

    def uniform(self, salt: str, *ids: Column) -> Column:
        """A double in [0, 1)."""
        return F.pmod(self.hash(salt, *ids), F.lit(2**52)).cast("double") / F.lit(_TWO_POW_52)

    def below(self, n: Column | int, salt: str, *ids: Column) -> Column:
        """An integer (long) in [0, n); n >= 1."""
        return F.pmod(self.hash(salt, *ids), F.greatest(F.lit(n).cast("long"), F.lit(1).cast("long")))

    def exponential(self, salt: str, *ids: Column) -> Column:
        """Exponential with mean 1, capped at 12 (so the tail stays bounded)."""
        return F.least(-F.log(F.lit(1.0) - self.uniform(salt, *ids)), F.lit(12.0))


def _pos(ledger: Column, entry: Column) -> Column:
    return F.struct(ledger.cast("long").alias("ledger_id"), entry.cast("long").alias("entry_id"))


# --- topics -------------------------------------------------------------------------------------------


def _topics(spark: SparkSession, spec: TierSpec, rng: _Rng, export_ms: int, version: str) -> DataFrame:
    """One row per (cluster, topic partition) with every per-topic parameter the other tables derive from.

    ``g`` is the topic group (replicated groups first, then the huge topics, then the small ones), ``hkey``
    the key of draws shared by the copies of a replicated topic (``g``), ``tid`` the unique topic id.
    """
    nc = len(spec.clusters)
    rep, huge = spec.replicated_groups, spec.huge_topics
    g = F.col("id")
    cluster_idx = F.explode(
        F.when(g < rep, F.sequence(F.lit(0), F.lit(nc - 1))).otherwise(
            F.array(F.pmod(g, F.lit(nc)).cast("int"))
        )
    )
    base = spark.range(spec.groups).select(g.alias("g"), cluster_idx.alias("c_idx"))
    g, c_idx = F.col("g"), F.col("c_idx")
    clusters = F.array(*[F.lit(c) for c in spec.clusters])
    is_rep = g < rep
    is_huge = (g >= rep) & (g < rep + huge)
    # a low-discrepancy draw per base topic (golden-ratio sequence, seed-shifted) so that even tier s gets
    # every kind of topic in its nominal share; the partitions of a topic share its kind
    kind_u = F.pmod(F.floor(g / 4) * F.lit(0.6180339887498949) + rng.uniform("kind"), F.lit(1.0))
    kind = (
        F.when(is_rep, F.lit("replicated"))
        .when(is_huge, F.lit("plain"))
        .when(kind_u < spec.keyed_fraction, F.lit("keyed"))
        .when(kind_u < spec.keyed_fraction + spec.txn_fraction, F.lit("txn"))
        .otherwise(F.lit("plain"))
    )
    n_small = F.lit(1) + F.floor(rng.exponential("ledgers", g) * F.lit(spec.small_ledgers_mean - 1.0))
    n_ledgers = F.when(is_huge, F.lit(spec.huge_ledgers)).otherwise(n_small).cast("long")
    cursors_small = F.floor(rng.exponential("cursors", g) * F.lit(spec.small_cursors_mean - 0.4))
    n_subs = F.when(is_huge, F.lit(spec.huge_cursors)).otherwise(cursors_small)
    n_subs = F.when(is_rep, F.greatest(n_subs, F.lit(1))).otherwise(n_subs).cast("int")
    # Naming: groups of 4 partitions; 10% of the local bases are 4 non-partitioned topics instead.
    base_id = F.floor(g / 4).cast("long")
    part = F.pmod(g, F.lit(4)).cast("int")
    non_partitioned = ~is_rep & (is_huge | (rng.uniform("nonpart", base_id) < 0.1))
    namespace = F.when(is_rep, F.lit("geo/replicated")).otherwise(
        F.concat(
            F.lit("tenant-"),
            F.pmod(base_id, F.lit(5)).cast("string"),
            F.lit("/ns-"),
            F.pmod(base_id, F.lit(11)).cast("string"),
        )
    )
    stem = F.when(is_huge, F.lit("hot-")).when(is_rep, F.lit("geo-")).otherwise(F.lit("topic-"))
    base_topic = F.concat(F.lit("persistent://"), namespace, F.lit("/"), stem, base_id.cast("string"))
    topic = F.when(non_partitioned, F.concat(base_topic, F.lit("-"), part.cast("string"))).otherwise(
        F.concat(base_topic, F.lit("-partition-"), part.cast("string"))
    )
    cur_entries = rng.below(spec.entries_per_ledger + 1, "cur", g)
    return base.select(
        "g",
        "c_idx",
        F.element_at(clusters, c_idx + 1).alias("cluster"),
        (g * nc + c_idx).alias("tid"),
        g.alias("hkey"),
        kind.alias("kind"),
        is_huge.alias("is_huge"),
        namespace.alias("namespace"),
        base_id.alias("base_id"),
        topic.alias("topic"),
        F.when(non_partitioned, F.lit(None)).otherwise(base_topic).alias("partitioned_topic"),
        F.when(non_partitioned, F.lit(-1)).otherwise(part).alias("partition_index"),
        n_ledgers.alias("n_ledgers"),
        # a single listed ledger is never empty: the LAC always names an entry or (first, -1)
        F.when(n_ledgers == 1, F.greatest(cur_entries, F.lit(1))).otherwise(cur_entries).alias("cur_entries"),
        F.when(~is_rep & (rng.uniform("trim", g) < 0.15), rng.below(4, "trimmed", g) + 1)
        .otherwise(F.lit(0))
        .alias("deleted_head"),
        (rng.below(3, "step", F.col("g"), c_idx) + 1).alias("step"),
        n_subs.alias("n_subs"),
        (kind.isin("plain", "keyed") & (rng.uniform("batched", g) < spec.batched_fraction)).alias("batched"),
        (rng.uniform("span", g) * 3 * 86_400_000 + 3_600_000).cast("long").alias("span_ms"),
        (kind == "keyed").alias("keyed"),
        ((kind == "keyed") & (rng.uniform("compacted", g) < 0.6)).alias("has_compaction"),
        (~is_rep & (rng.uniform("dedup", g) < 0.1)).alias("has_dedup"),
        (rng.uniform("reader", g) < 0.05).alias("has_reader"),
        rng.below(nc, "primary", g).cast("int").alias("primary_idx"),
        F.lit(export_ms).alias("export_ms"),
        F.lit(version).alias("pulsar_version"),
    )


# --- ledger arithmetic as column expressions (closed form: no lookup needed) ---------------------------


def _block(nc: int) -> dict[str, int]:
    """Entry ids (offsets in a ledger) of the replicated-snapshot protocol with ``nc`` clusters (§4.5)."""
    remotes = nc - 1
    rounds = 2 if remotes > 1 else 1
    width = 2 + remotes  # request, response written, responses received
    snapshot = rounds * width
    return {
        "remotes": remotes,
        "rounds": rounds,
        "width": width,
        "snapshot": snapshot,
        "update": snapshot + 2,
    }


def _ledger_entries(rng: _Rng, spec: TierSpec, order: Column) -> Column:
    """Entries of the ledger at list position ``order`` (topic columns in scope); the current ledger's are
    ``cur_entries``. Replicated topics' closed ledgers hold a whole snapshot block."""
    mean = spec.entries_per_ledger
    n = F.col("n_ledgers")
    closed = (
        rng.below(2 * mean - 1, "entries", F.col("hkey"), order) + 1 if mean > 1 else F.lit(1).cast("long")
    )
    block_min = _block(len(spec.clusters))["update"] + 1
    empty = (
        (F.col("kind") != "replicated")
        & (order < n - 2)
        & (rng.uniform("empty", F.col("hkey"), order) < 0.03)
    )
    return (
        F.when(order == n - 1, F.col("cur_entries"))
        .when(empty, F.lit(0))
        .when(F.col("kind") == "replicated", F.greatest(closed, F.lit(block_min)))
        .otherwise(closed)
        .cast("long")
    )


def _ledger_id(order: Column, tid: Column | None = None) -> Column:
    """Ledger id of list position ``order`` (negative orders: the trimmed ledgers before the first)."""
    tid = F.col("tid") if tid is None else tid
    return (tid + 1) * F.lit(_LEDGER_ID_STRIDE) + (order + F.col("deleted_head") + 4) * F.col("step")


def _ledger_plan(topics: DataFrame, rng: _Rng, spec: TierSpec) -> DataFrame:
    """One row per listed ledger: order, id, entries, topic-wide index of its first entry, topic total."""
    with_orders = topics.select(
        "*", F.explode(F.sequence(F.lit(0).cast("long"), F.col("n_ledgers") - 1)).alias("o")
    )
    planned = with_orders.select(
        "*",
        _ledger_id(F.col("o")).alias("ledger_id"),
        _ledger_entries(rng, spec, F.col("o")).alias("n_entries"),
    )
    w = Window.partitionBy("tid").orderBy("o")
    return planned.select(
        "*",
        (F.sum("n_entries").over(w) - F.col("n_entries")).alias("first_index"),
        F.sum("n_entries").over(Window.partitionBy("tid")).alias("topic_entries"),
    )


# --- entries, messages, markers ------------------------------------------------------------------------


def _entries_base(plan: DataFrame, rng: _Rng, spec: TierSpec) -> DataFrame:
    """One row per stored entry with its role (data / marker / transaction) and every derived attribute."""
    nc = len(spec.clusters)
    b = _block(nc)
    clusters = F.array(*[F.lit(c) for c in spec.clusters])
    e = F.col("e")
    ents = plan.where(F.col("n_entries") > 0).select(
        "*", F.explode(F.sequence(F.lit(0).cast("long"), F.col("n_entries") - 1)).alias("e")
    )
    idx = F.col("first_index") + e
    interval = F.greatest(
        F.floor(F.col("span_ms") / F.greatest(F.col("topic_entries"), F.lit(1))), F.lit(200)
    )
    start_ms = F.col("export_ms") - F.col("topic_entries") * interval - F.lit(60_000)
    o, g, me = F.col("o"), F.col("g"), F.col("c_idx")
    rep = F.col("kind") == "replicated"
    in_block = rep & (e < b["update"] + 1)
    src = F.pmod(o + g, F.lit(nc)).cast("int")
    is_src = me == src
    off_in_round = F.pmod(e, F.lit(b["width"]))
    round_no = F.floor(e / b["width"]).cast("int")
    in_rounds = in_block & (e < b["snapshot"])
    # k-th remote of the source in sorted order -> its cluster index (skip the source's own index)
    k = (off_in_round - 2).cast("int")
    remote_idx = F.when(k >= src, k + 1).otherwise(k)
    round_request = round_no * b["width"]
    md_o, md_e = F.col("rep_md.o"), F.col("rep_md.e")
    update_written = (src == F.col("primary_idx")) & (
        (o < md_o) | ((o == md_o) & (F.lit(b["update"]) <= md_e))
    )
    marker_type = (
        F.when(in_rounds & (off_in_round == 0), F.lit(10))
        .when(in_rounds & ~is_src & (off_in_round == 1), F.lit(11))
        .when(in_rounds & is_src & (off_in_round >= 2), F.lit(11))
        .when(in_block & is_src & (e == b["snapshot"]), F.lit(12))
        .when(in_block & (e == b["update"]) & update_written & F.col("has_rep_md"), F.lit(13))
    )
    txn = F.col("kind") == "txn"
    txn_state_u = rng.uniform("txn-state", F.col("tid"), o)
    txn_open = (o == F.col("n_ledgers") - 1) | (txn_state_u < 0.02)
    txn_end = F.when(txn_open, F.lit(None)).when(txn_state_u < 0.77, F.lit(21)).otherwise(F.lit(22))
    is_txn_data = txn & e.between(_TXN_FIRST, _TXN_LAST)
    is_txn_marker = txn & (e == _TXN_END) & txn_end.isNotNull()
    marker_type = F.when(is_txn_marker, txn_end).otherwise(marker_type)
    is_marker = marker_type.isNotNull()
    # data entries of replicated topics are copies: same producer and sequence id in every cluster
    origin = F.when(rep & ~in_block, rng.below(nc, "origin", g, idx).cast("int")).otherwise(me)
    batch = F.when(
        F.col("batched") & ~is_marker & ~is_txn_data,
        rng.below(spec.max_batch, "batch", F.col("tid"), idx) + 1,
    )
    message_count = F.coalesce(batch, F.lit(1)).cast("int")
    tombstone = F.col("keyed") & batch.isNull() & (rng.uniform("tomb", F.col("tid"), idx) < 0.05)
    data_payload = message_count * (rng.below(480, "size", F.col("hkey"), idx) + 20)
    payload = (
        F.when(marker_type.isin(21, 22), F.lit(0))
        .when(is_marker, F.lit(40) + F.lit(24) * F.lit(nc))
        .when(tombstone, F.lit(0))
        .otherwise(data_payload)
    )
    key_col = F.when(
        F.col("keyed") & batch.isNull() & (rng.uniform("keyless", F.col("tid"), idx, F.lit(-1)) >= 0.04),
        F.concat(
            F.lit("key-"),
            rng.below(
                F.greatest(F.floor(F.col("topic_entries") / 4), F.lit(2)), "key", F.col("tid"), idx, F.lit(-1)
            ),
        ),
    )
    producer = (
        F.when(marker_type.isin(20, 21, 22), F.lit("pulsar.txn.marker"))
        .when(is_marker, F.lit("pulsar.marker"))
        .when(is_txn_data, F.lit("txn-producer"))
        .otherwise(F.concat(F.lit("producer-"), F.element_at(clusters, origin + 1)))
    )
    publish = start_ms + idx * interval + F.when(in_block, e * 10).otherwise(F.lit(0))
    snap_clusters = F.transform(
        F.filter(F.sequence(F.lit(0), F.lit(nc - 1)), lambda c: c != src),
        lambda c: F.struct(
            F.element_at(clusters, c + 1).alias("cluster"),
            _pos(_ledger_id(o, g * nc + c), F.lit(0)).alias("position"),
        ),
    )
    src_name = F.element_at(clusters, src + 1)
    me_name = F.col("cluster")
    replicated_from = (
        F.when(marker_type == 10, F.when(~is_src, src_name))
        .when(marker_type == 11, F.when(is_src, F.element_at(clusters, remote_idx + 1)))
        .when(marker_type == 13, F.when(~is_src, src_name))
        .when(~is_marker & (origin != me), F.element_at(clusters, origin + 1))
    )
    replicate_to = F.when(marker_type.isin(11, 12), F.array(src_name)).otherwise(
        F.array().cast("array<string>")
    )
    snapshot_id = F.when(
        marker_type.isin(10, 11, 12),
        F.concat_ws("-", F.lit("snap"), g.cast("string"), o.cast("string"), src_name),
    )
    response_position = F.when(
        marker_type == 11,
        F.when(is_src, _pos(_ledger_id(o, g * nc + remote_idx), round_request)).otherwise(
            _pos(F.col("ledger_id"), round_request)
        ),
    )
    return ents.select(
        "cluster",
        "topic",
        "tid",
        "hkey",
        "kind",
        "o",
        "n_ledgers",
        F.col("ledger_id"),
        e.alias("entry_id"),
        idx.alias("entry_index"),
        (F.col("o") == F.col("n_ledgers") - 1).alias("is_current"),
        marker_type.cast("int").alias("marker_type"),
        payload.cast("long").alias("payload_size_bytes"),
        (payload + F.lit(64) + F.lit(12) * message_count).cast("long").alias("entry_size_bytes"),
        producer.alias("producer_name"),
        F.when(marker_type.isin(20, 21, 22), F.lit(-1))
        .when(is_marker, F.lit(0))
        .otherwise(idx)
        .cast("long")
        .alias("sequence_id"),
        publish.cast("long").alias("publish_time_ms"),
        F.when(batch.isNull(), key_col).alias("partition_key"),
        replicated_from.alias("replicated_from"),
        replicate_to.alias("replicate_to"),
        batch.isNotNull().alias("is_batch"),
        batch.cast("int").alias("num_messages_in_batch"),
        message_count.alias("message_count"),
        F.when(is_txn_data | is_txn_marker, rng.below(4, "coordinator", F.col("tid"), o)).alias(
            "txnid_most_bits"
        ),
        F.when(is_txn_data | is_txn_marker, F.col("tid") * 100_000 + o).alias("txnid_least_bits"),
        (tombstone & (rng.uniform("nullvalue", F.col("tid"), idx) < 0.5)).alias("null_value"),
        F.col("keyed"),
        # marker payloads (markers table)
        snapshot_id.alias("snapshot_id"),
        F.when(marker_type == 10, src_name).alias("source_cluster"),
        F.when(
            marker_type == 11, F.when(is_src, F.element_at(clusters, remote_idx + 1)).otherwise(me_name)
        ).alias("response_cluster"),
        response_position.alias("response_position"),
        F.when(marker_type == 12, _pos(F.col("ledger_id"), F.lit(b["snapshot"] - 1))).alias("local_position"),
        F.when(marker_type.isin(12, 13), snap_clusters).alias("clusters"),
        F.when(marker_type == 13, F.lit(_REPLICATED_SUB)).alias("subscription_name"),
        "topic_entries",
    )


def _entries_table(base: DataFrame, export: dict[str, Column]) -> DataFrame:
    return base.select(
        "cluster",
        "topic",
        *[v.alias(k) for k, v in export.items()],
        "ledger_id",
        "entry_id",
        _pos(F.col("ledger_id"), F.col("entry_id")).alias("position"),
        "entry_size_bytes",
        "payload_size_bytes",
        F.lit(True).alias("has_checksum"),
        "producer_name",
        "sequence_id",
        F.timestamp_millis(F.col("publish_time_ms")).alias("publish_time"),
        "publish_time_ms",
        "partition_key",
        "replicated_from",
        "replicate_to",
        F.lit("NONE").alias("compression"),
        "num_messages_in_batch",
        "is_batch",
        "message_count",
        "marker_type",
        "txnid_most_bits",
        "txnid_least_bits",
        "null_value",
        F.lit(False).alias("is_encrypted"),
        F.lit(False).alias("is_chunk"),
        F.concat(
            F.col("cluster"),
            F.lit("/entries/bench-"),
            F.pmod(F.col("tid"), F.lit(16)).cast("string"),
            F.lit(".jsonl"),
        ).alias("source_file"),
    )


def _messages_table(base: DataFrame, rng: _Rng, export: dict[str, Column]) -> DataFrame:
    slots = base.select(
        "*",
        F.explode(
            F.when(F.col("is_batch"), F.sequence(F.lit(0), F.col("message_count") - 1)).otherwise(
                F.array(F.lit(-1))
            )
        ).alias("batch_index"),
    )
    bi = F.col("batch_index")
    idx = F.col("entry_index")
    batched_key = F.when(
        F.col("keyed") & (rng.uniform("keyless", F.col("tid"), idx, bi) >= 0.04),
        F.concat(
            F.lit("key-"),
            rng.below(
                F.greatest(F.floor(F.col("topic_entries") / 4), F.lit(2)), "key", F.col("tid"), idx, bi
            ),
        ),
    )
    tomb_slot = F.col("keyed") & F.col("is_batch") & (rng.uniform("tomb", F.col("tid"), idx, bi) < 0.05)
    share = F.floor(F.col("payload_size_bytes") / F.col("message_count"))
    size = F.when(F.col("is_batch"), F.when(tomb_slot, F.lit(0)).otherwise(share)).otherwise(
        F.col("payload_size_bytes")
    )
    return slots.select(
        "cluster",
        "topic",
        *[v.alias(k) for k, v in export.items()],
        "ledger_id",
        "entry_id",
        bi.cast("int").alias("batch_index"),
        F.col("message_count").alias("batch_size"),
        F.when(F.col("is_batch"), batched_key).otherwise(F.col("partition_key")).alias("key"),
        F.lit(False).alias("key_b64_encoded"),
        size.cast("long").alias("payload_size_bytes"),
        F.when(F.col("is_batch"), tomb_slot & (rng.uniform("nullvalue", F.col("tid"), idx, bi) < 0.5))
        .otherwise(F.col("null_value"))
        .alias("is_null_value"),
        F.lit(False).alias("compacted_out"),
        "marker_type",
        "producer_name",
        (F.col("sequence_id") + F.greatest(bi, F.lit(0))).alias("sequence_id"),
        "publish_time_ms",
        "txnid_most_bits",
        "txnid_least_bits",
        "replicated_from",
    )


def _markers_table(base: DataFrame, export: dict[str, Column]) -> DataFrame:
    names = F.create_map(*[x for t, n in sorted(_MARKER_NAMES.items()) for x in (F.lit(t), F.lit(n))])
    return base.where(F.col("marker_type").isNotNull()).select(
        "cluster",
        "topic",
        *[v.alias(k) for k, v in export.items()],
        "ledger_id",
        "entry_id",
        _pos(F.col("ledger_id"), F.col("entry_id")).alias("position"),
        "marker_type",
        names[F.col("marker_type")].alias("marker_name"),
        "publish_time_ms",
        "replicated_from",
        "replicate_to",
        "snapshot_id",
        "source_cluster",
        "response_cluster",
        "response_position",
        "local_position",
        "clusters",
        "subscription_name",
        "txnid_most_bits",
        "txnid_least_bits",
    )


# --- cursors ---------------------------------------------------------------------------------------------


def _add_position(
    df: DataFrame, rng: _Rng, spec: TierSpec, prefix: str, key: Column, lag_power: float
) -> DataFrame:
    """Add ``{prefix}_o``, ``{prefix}_n``, ``{prefix}_e``: list position, its entries and an entry id in
    [-1, entries-1] of a pseudo-random position skewed towards the tail (staged selects keep plans small)."""
    n = F.col("n_ledgers")
    back = F.floor(n * F.pow(rng.uniform(prefix + "-o", key), F.lit(lag_power))).cast("long")
    order = F.greatest(n - 1 - back, F.lit(0))
    # the empty current ledger holds no position after the LAC: step back to the previous ledger
    order = F.when((order == n - 1) & (F.col("cur_entries") == 0) & (n >= 2), n - 2).otherwise(order)
    df = df.select("*", order.alias(f"{prefix}_o"))
    df = df.select("*", _ledger_entries(rng, spec, F.col(f"{prefix}_o")).alias(f"{prefix}_n"))
    return df.select("*", (rng.below(F.col(f"{prefix}_n") + 1, prefix + "-e", key) - 1).alias(f"{prefix}_e"))


def _with_rep_md(topics: DataFrame, rng: _Rng, spec: TierSpec) -> DataFrame:
    """Add ``lac`` and ``rep_md`` (order, entry) of the replicated subscription on the primary (same in
    every copy of a replicated topic)."""
    n = F.col("n_ledgers")
    staged = topics.select("*", _ledger_entries(rng, spec, n - 2).alias("_prev_n"))
    lac = (
        F.when(F.col("cur_entries") > 0, _pos(_ledger_id(n - 1), F.col("cur_entries") - 1))
        .when(n >= 2, _pos(_ledger_id(n - 2), F.col("_prev_n") - 1))
        .otherwise(_pos(_ledger_id(n - 1), F.lit(-1)))
    )
    staged = _add_position(staged.select("*", lac.alias("lac")), rng, spec, "rep", F.col("hkey"), 3.0)
    return staged.select(
        *[c for c in topics.columns],
        "lac",
        F.struct(F.col("rep_o").alias("o"), F.col("rep_e").alias("e")).alias("rep_md"),
        (F.col("kind") == "replicated").alias("has_rep_md"),
    )


def _cursors(topics: DataFrame, rng: _Rng, spec: TierSpec, export: dict[str, Column]) -> DataFrame:
    nc = len(spec.clusters)
    b = _block(nc)
    clusters = F.array(*[F.lit(c) for c in spec.clusters])
    remotes = F.filter(clusters, lambda c: c != F.col("cluster"))
    no_names = F.array().cast("array<string>")
    reader_name = F.concat(F.lit("reader-"), F.substring(F.sha2(F.col("tid").cast("string"), 256), 1, 10))
    specials = F.concat(
        F.when(
            F.col("kind") == "replicated", F.transform(remotes, lambda c: F.concat(F.lit("pulsar.repl."), c))
        ).otherwise(no_names),
        F.when(F.col("has_compaction"), F.array(F.lit("__compaction"))).otherwise(no_names),
        F.when(F.col("has_dedup"), F.array(F.lit("pulsar.dedup"))).otherwise(no_names),
        F.when(F.col("has_reader"), F.array(reader_name)).otherwise(no_names),
    )
    subs = F.transform(
        F.sequence(F.lit(0), F.greatest(F.col("n_subs") - 1, F.lit(-1))),
        lambda i: F.concat(F.lit("sub-"), i.cast("string")),
    )
    rows = topics.select("*", F.posexplode(F.concat(subs, specials)).alias("cursor_order", "cursor_name"))
    name = F.col("cursor_name")
    kind = (
        F.when(name.startswith("pulsar.repl."), F.lit("replicator"))
        .when(name == "__compaction", F.lit("compaction"))
        .when(name == "pulsar.dedup", F.lit("dedup"))
        .when(name.startswith("reader-"), F.lit("reader"))
        .otherwise(F.lit("subscription"))
    )
    rows = rows.select(
        "*",
        (F.col("tid") * 100_000 + F.col("cursor_order")).alias("ckey"),
        kind.alias("cursor_kind"),
        ((F.col("kind") == "replicated") & (name == _REPLICATED_SUB)).alias("is_rep_sub"),
    )
    key = F.col("ckey")
    kind = F.col("cursor_kind")
    is_rep_sub = F.col("is_rep_sub")
    rows = _add_position(rows, rng, spec, "md", key, 4.0)
    n = F.col("n_ledgers")
    lac = F.col("lac")
    lag_u = rng.uniform("lag", key)
    order = F.col("md_o")
    entry = F.when(rng.uniform("minus1", key) < 0.05, F.lit(-1)).otherwise(F.col("md_e"))
    plain_md = _pos(_ledger_id(order), entry)
    trimmed_md = _pos(_ledger_id(F.lit(-1).cast("long")), rng.below(10, "trimmed-e", key))
    # replicated sub: the primary consumes; a remote sits at its position in the primary's last UPDATE
    md_o, md_e = F.col("rep_md.o"), F.col("rep_md.e")
    bound = F.when(md_e >= b["update"], md_o).otherwise(md_o - 1)
    residue = F.pmod(F.col("primary_idx") - F.col("g"), F.lit(nc))
    last_update_o = bound - F.pmod(bound - residue, F.lit(nc))
    lagging = rng.uniform("replag", F.col("hkey"), F.col("c_idx")) < 0.1
    applied_o = F.when(lagging & (last_update_o - nc >= 0), last_update_o - nc).otherwise(last_update_o)
    remote_md = F.when(applied_o >= 0, _pos(_ledger_id(applied_o), F.lit(0))).otherwise(
        _pos(_ledger_id(F.lit(0)), F.lit(-1))
    )
    rep_md = F.when(F.col("c_idx") == F.col("primary_idx"), _pos(_ledger_id(md_o), md_e)).otherwise(remote_md)
    rows = rows.select(
        "*",
        F.floor(n * rng.uniform("horizon", key)).cast("long").alias("_hz_o"),
        (order + 1).alias("_h0"),
        (order + 3).alias("_h1"),
        (order + 5).alias("_h2"),
    )
    rows = rows.select(
        "*",
        _ledger_entries(rng, spec, F.col("_hz_o")).alias("_hz_n"),
        *[_ledger_entries(rng, spec, F.col(f"_h{j}")).alias(f"_h{j}_lo_n") for j in range(3)],
        *[_ledger_entries(rng, spec, F.col(f"_h{j}") + 1).alias(f"_h{j}_hi_n") for j in range(3)],
    )
    compaction_md = _pos(_ledger_id(F.col("_hz_o")), F.col("_hz_n") - 1)
    md = (
        F.when(kind.isin("replicator", "dedup"), lac)
        .when(kind == "compaction", compaction_md)
        .when(is_rep_sub, rep_md)
        .when(lag_u < 0.15, lac)
        .when((F.col("deleted_head") > 0) & (lag_u < 0.2), trimmed_md)
        .otherwise(plain_md)
    )
    md = F.when(md > lac, lac).otherwise(md)
    md_entries = F.col("md_n")
    # ack holes after the mark-delete (plain subscriptions only): up to 3 ranges, every other ledger,
    # some spanning into the next ledger
    has_holes = (kind == "subscription") & ~is_rep_sub & (lag_u >= 0.2) & (rng.uniform("holes", key) < 0.25)

    def hole(j: int) -> Column:
        lo_o = F.col(f"_h{j}")
        lo_n, hi_n = F.col(f"_h{j}_lo_n"), F.col(f"_h{j}_hi_n")
        lo_e = rng.below(lo_n, f"hole{j}-lo", key) - 1
        cross = rng.uniform(f"hole{j}-x", key) < 0.4
        hi_cross = _pos(_ledger_id(lo_o + 1), rng.below(hi_n, f"hole{j}-hic", key))
        hi_same = _pos(_ledger_id(lo_o), lo_e + 1 + rng.below(lo_n - lo_e - 1, f"hole{j}-his", key))
        upper = F.when(cross & (hi_n > 0), hi_cross).otherwise(hi_same)
        valid = (lo_o < n) & (lo_n >= 2) & (upper <= lac)
        return F.when(valid, F.struct(_pos(_ledger_id(lo_o), lo_e).alias("lower"), upper.alias("upper")))

    n_holes = rng.below(3, "nholes", key) + 1
    holes = F.filter(
        F.array(*[F.when(F.lit(j) < n_holes, hole(j)) for j in range(3)]), lambda r: r.isNotNull()
    )
    idm = F.when(has_holes & (md == plain_md), holes).otherwise(
        F.array().cast(
            "array<struct<lower:struct<ledger_id:bigint,entry_id:bigint>,upper:struct<ledger_id:bigint,entry_id:bigint>>>"
        )
    )
    sub_type_i = rng.below(len(_SUB_TYPES) + 1, "subtype", F.col("base_id"), F.col("cursor_order"))
    sub_type = F.element_at(
        F.array(*[F.lit(t) for t in (*_SUB_TYPES, "Shared")]), (sub_type_i + 1).cast("int")
    )
    sub_type = F.when(is_rep_sub, F.lit("Shared")).when(kind == "subscription", sub_type)
    consumers = (
        F.when(is_rep_sub, F.when(F.col("c_idx") == F.col("primary_idx"), F.lit(1)).otherwise(F.lit(0)))
        .when(sub_type == "Failover", rng.below(3, "nconsumers", F.col("base_id"), F.col("cursor_order")) + 2)
        .when(kind == "subscription", F.lit(1))
        .otherwise(F.lit(0))
    ).cast("int")
    total = F.col("topic_entries_est")
    staged = rows.select(
        "*",
        md.alias("md"),
        idm.alias("idm"),
        sub_type.alias("sub_type"),
        consumers.alias("n_consumers"),
        order.alias("_md_o"),
        md_entries.alias("_md_n"),
        plain_md.alias("_plain_md"),
    )
    counter_lag = rng.below(total + 1, "counter", key)
    return staged.select(
        "cluster",
        "topic",
        *[v.alias(k) for k, v in export.items()],
        "cursor_name",
        F.col("cursor_order").cast("int").alias("cursor_order"),
        "cursor_kind",
        (F.col("cursor_kind") != "reader").alias("is_durable"),
        F.col("is_rep_sub").alias("is_replicated"),
        F.when(
            F.col("cursor_kind") == "replicator",
            F.substring(F.col("cursor_name"), len("pulsar.repl.") + 1, 100),
        ).alias("replicator_remote_cluster"),
        F.col("md").alias("mark_delete_position"),
        F.when(
            (F.col("md") == F.col("_plain_md"))
            & (F.col("md.entry_id") + 1 >= F.col("_md_n"))
            & (F.col("_md_o") < F.col("n_ledgers") - 1),
            _pos(_ledger_id(F.col("_md_o") + 1), F.lit(0)),
        )
        .otherwise(_pos(F.col("md.ledger_id"), F.col("md.entry_id") + 1))
        .alias("read_position"),
        F.col("idm").alias("individually_deleted"),
        (F.col("topic_entries_est") + 17 - counter_lag).alias("messages_consumed_counter"),
        (F.col("tid") * 1000 + 7).alias("cursor_ledger_id"),
        F.lit(3).cast("long").alias("cursor_ledger_last_entry"),
        F.lit("Open").alias("state"),
        (F.col("n_consumers") > 0).alias("is_active"),
        F.when(
            F.col("cursor_kind") == "compaction",
            F.create_map(F.lit("CompactedTopicLedger"), F.col("tid") * 1000 + 9),
        )
        .when(
            F.col("is_rep_sub"), F.create_map(F.lit("pulsar.replicated.subscription"), F.lit(1).cast("long"))
        )
        .alias("properties"),
        F.col("sub_type").alias("subscription_type"),
        F.when(F.col("cursor_kind") == "subscription", counter_lag).alias("stats_msg_backlog"),
        F.when(F.col("cursor_kind") == "subscription", F.lit(-1).cast("long")).alias(
            "stats_backlog_size_bytes"
        ),
        F.when(
            F.col("sub_type").isin("Failover", "Exclusive") & (F.col("n_consumers") > 0),
            F.concat(
                F.lit("c-"),
                F.col("base_id").cast("string"),
                F.lit("-"),
                F.col("cursor_order").cast("string"),
                F.lit("-0"),
            ),
        ).alias("stats_active_consumer_name"),
        F.when(F.col("cursor_kind") == "subscription", F.col("n_consumers")).alias("stats_consumer_count"),
        F.when(F.col("cursor_kind") == "replicator", F.lit(0).cast("long")).alias(
            "stats_replication_backlog"
        ),
        F.when(F.col("cursor_kind") == "replicator", F.lit(True)).alias("stats_replicator_connected"),
        # kept for consumers / plan requests
        "tid",
        "base_id",
        "n_consumers",
        "sub_type",
        "export_ms",
    )


# --- managed ledgers and ledgers -------------------------------------------------------------------------


def _ledger_sizes(base: DataFrame) -> DataFrame:
    return base.groupBy("tid", "ledger_id").agg(
        F.sum("entry_size_bytes").alias("bytes"), F.max("publish_time_ms").alias("last_publish_ms")
    )


def _ledgers_table(plan: DataFrame, sizes: DataFrame, export: dict[str, Column]) -> DataFrame:
    joined = plan.join(sizes, ["tid", "ledger_id"], "left")
    current = F.col("o") == F.col("n_ledgers") - 1
    return joined.select(
        "cluster",
        "topic",
        *[v.alias(k) for k, v in export.items()],
        "ledger_id",
        F.when(current, F.lit(0)).otherwise(F.col("n_entries")).cast("long").alias("entries"),
        F.when(current, F.lit(0))
        .otherwise(F.coalesce(F.col("bytes"), F.lit(0)))
        .cast("long")
        .alias("size_bytes"),
        F.lit(False).alias("offloaded"),
        F.lit(False).alias("under_replicated"),
        F.when(
            ~current,
            F.timestamp_millis(F.coalesce(F.col("last_publish_ms"), F.col("export_ms") - 86_400_000) + 500),
        ).alias("closed_at"),
        current.alias("is_current"),
        F.col("o").cast("int").alias("ledger_order"),
    )


def _managed_ledgers_table(
    topics: DataFrame, plan: DataFrame, sizes: DataFrame, rng: _Rng, spec: TierSpec, export: dict[str, Column]
) -> DataFrame:
    per_ledger = plan.join(sizes, ["tid", "ledger_id"], "left").select(
        "tid",
        F.coalesce(F.col("bytes"), F.lit(0)).alias("bytes"),
        F.when(F.col("o") == F.col("n_ledgers") - 1, F.coalesce(F.col("bytes"), F.lit(0)))
        .otherwise(F.lit(0))
        .alias("cur_bytes"),
        "n_entries",
    )
    totals = per_ledger.groupBy("tid").agg(
        F.sum("bytes").alias("total_bytes"),
        F.sum("cur_bytes").alias("cur_bytes"),
        F.sum("n_entries").alias("n_entries"),
    )
    t = topics.join(totals, "tid", "left")
    n = F.col("n_ledgers")
    specials = (
        F.when(F.col("kind") == "replicated", F.lit(len(spec.clusters) - 1)).otherwise(F.lit(0))
        + F.col("has_compaction").cast("int")
        + F.col("has_dedup").cast("int")
        + F.col("has_reader").cast("int")
    )
    return t.select(
        "cluster",
        "topic",
        *[v.alias(k) for k, v in export.items()],
        "pulsar_version",
        "partitioned_topic",
        "partition_index",
        F.lit("LedgerOpened").alias("state"),
        (F.col("n_entries") + rng.below(50, "added", F.col("tid")))
        .cast("long")
        .alias("entries_added_counter"),
        F.col("n_entries").cast("long").alias("number_of_entries"),
        F.coalesce(F.col("total_bytes"), F.lit(0)).cast("long").alias("total_size_bytes"),
        _ledger_id(n - 1).alias("current_ledger_id"),
        F.col("cur_entries").cast("long").alias("current_ledger_entries"),
        F.coalesce(F.col("cur_bytes"), F.lit(0)).cast("long").alias("current_ledger_size_bytes"),
        F.col("lac").alias("last_confirmed_entry"),
        F.timestamp_millis(F.col("export_ms") - 600_000).alias("last_ledger_created_at"),
        n.cast("int").alias("ledger_count"),
        (F.col("n_subs") + specials).cast("int").alias("cursor_count"),
        F.when(F.col("has_compaction"), F.col("tid") * 1000 + 9).alias("compacted_ledger_id"),
        F.when(F.col("has_compaction"), F.floor(F.col("n_entries") / 3))
        .cast("long")
        .alias("compacted_ledger_entries"),
        F.when(F.col("has_compaction"), F.floor(F.col("total_bytes") / 4))
        .cast("long")
        .alias("compacted_ledger_size_bytes"),
        F.coalesce(F.col("total_bytes"), F.lit(0)).cast("long").alias("stats_storage_size_bytes"),
        F.col("n_entries").cast("long").alias("stats_msg_in_counter"),
        F.lit(1).alias("stats_publishers"),
        F.lit("Disabled").alias("stats_deduplication_status"),
    )


# --- policies, consumers, schemas, requests ------------------------------------------------------------


def _backlog_quotas(
    spark: SparkSession, topics: DataFrame, rng: _Rng, spec: TierSpec, export: dict[str, Column]
) -> DataFrame:
    gib = 1024**3
    policies = F.array(
        F.lit("producer_request_hold"), F.lit("producer_exception"), F.lit("consumer_backlog_eviction")
    )
    types = F.array(F.lit("destination_storage"), F.lit("message_age"))
    cl = spark.createDataFrame([(i, c) for i, c in enumerate(spec.clusters)], "c_idx int, cluster string")
    broker = cl.select(
        "cluster",
        F.lit(None).cast("string").alias("topic"),
        F.lit("broker").alias("level"),
        F.col("cluster").alias("scope"),
        F.explode(types).alias("quota_type"),
        F.col("c_idx"),
    ).select(
        "*",
        F.when(
            F.col("quota_type") == "destination_storage",
            F.when(F.col("c_idx") == 0, F.lit(-1)).otherwise(F.lit(50 * gib)),
        ).alias("limit_size_bytes"),
        F.when(
            F.col("quota_type") == "message_age",
            F.when(F.col("c_idx") == 1, F.lit(3 * 86_400)).otherwise(F.lit(-1)),
        ).alias("limit_time_seconds"),
        F.lit("producer_request_hold").alias("policy"),
        F.lit("broker_config").alias("source_shape"),
        (F.col("c_idx") == 2).alias("precise_time_check"),
        F.lit(60).alias("check_interval_seconds"),
        F.lit(True).alias("check_enabled"),
        F.concat(F.col("cluster"), F.lit("/backlog-quotas/broker.json")).alias("source_file"),
    )
    namespaces = topics.select("cluster", "namespace").distinct()
    ns_key = F.xxhash64(F.col("cluster"), F.col("scope"))
    ns = namespaces.select(
        "cluster",
        F.lit(None).cast("string").alias("topic"),
        F.lit("namespace").alias("level"),
        F.col("namespace").alias("scope"),
        F.explode(types).alias("quota_type"),
    ).select(
        "*",
        F.when(
            F.col("quota_type") == "destination_storage",
            F.pow(F.lit(2.0), rng.below(8, "nssize", ns_key) + 17).cast("long"),
        ).alias("limit_size_bytes"),
        F.when(
            F.col("quota_type") == "message_age",
            F.when(rng.uniform("nstime", ns_key) < 0.5, (rng.below(72, "nsh", ns_key) + 1) * 3600).otherwise(
                F.lit(-1)
            ),
        ).alias("limit_time_seconds"),
        F.element_at(policies, (rng.below(3, "nspolicy", ns_key) + 1).cast("int")).alias("policy"),
        F.lit("limit_size_time").alias("source_shape"),
        F.concat(
            F.col("cluster"),
            F.lit("/backlog-quotas/"),
            F.regexp_replace(F.col("scope"), "/", "%2F"),
            F.lit(".json"),
        ).alias("source_file"),
    )
    topic_level = topics.where(rng.uniform("tquota", F.col("tid")) < 0.05).select(
        "cluster",
        "topic",
        F.lit("topic").alias("level"),
        F.col("topic").alias("scope"),
        F.lit("destination_storage").alias("quota_type"),
        F.lit(64 * 1024).cast("long").alias("limit_size_bytes"),
        F.lit(-1).cast("long").alias("limit_time_seconds"),
        F.lit("consumer_backlog_eviction").alias("policy"),
        F.lit("limit_size_time").alias("source_shape"),
        F.concat(
            F.col("cluster"), F.lit("/backlog-quotas/topic-"), F.col("tid").cast("string"), F.lit(".json")
        ).alias("source_file"),
    )
    out = (
        broker.drop("c_idx")
        .unionByName(ns, allowMissingColumns=True)
        .unionByName(topic_level, allowMissingColumns=True)
    )
    return out.select("*", *[v.alias(k) for k, v in export.items()])


def _consumers(cursors: DataFrame, rng: _Rng, export: dict[str, Column]) -> DataFrame:
    rows = cursors.where(F.col("n_consumers") > 0).select(
        "*", F.explode(F.sequence(F.lit(0), F.col("n_consumers") - 1)).alias("connect_order")
    )
    # the same consumer names on every partition of a partitioned topic (failover balance, docs §6)
    name = F.concat(
        F.lit("c-"),
        F.col("base_id").cast("string"),
        F.lit("-"),
        F.col("cursor_order").cast("string"),
        F.lit("-"),
        F.col("connect_order").cast("string"),
    )
    return rows.select(
        "cluster",
        "topic",
        *[v.alias(k) for k, v in export.items()],
        F.col("cursor_name").alias("subscription"),
        F.col("sub_type").alias("subscription_type"),
        name.alias("consumer_name"),
        rng.below(2, "priority", F.col("base_id"), F.col("cursor_order"), F.col("connect_order"))
        .cast("int")
        .alias("priority_level"),
        F.col("connect_order").cast("int").alias("connect_order"),
        F.lit("client_config").alias("priority_source"),
        F.concat(
            F.lit("10.0."),
            F.pmod(F.col("tid"), F.lit(250)).cast("string"),
            F.lit("."),
            F.col("connect_order").cast("string"),
        ).alias("address"),
        F.lit("4.0.0").alias("client_version"),
        F.lit(1000).cast("long").alias("available_permits"),
        F.lit(0).cast("long").alias("unacked_messages"),
        (name == F.col("stats_active_consumer_name")).alias("is_active_in_stats"),
    )


def _schema_versions(topics: DataFrame, rng: _Rng, export: dict[str, Column]) -> DataFrame:
    chosen = topics.where(rng.uniform("schema", F.col("base_id")) < 0.2).select(
        "*",
        # 1-3 versions (single-version topics have no pair in the compatibility matrix)
        F.explode(F.sequence(F.lit(1), (rng.below(3, "nversions", F.col("base_id")) + 1).cast("int"))).alias(
            "version"
        ),
        (rng.uniform("nodefault", F.col("base_id")) < 0.15).alias("_breaking"),
    )
    v = F.col("version")
    fields = F.transform(
        F.sequence(F.lit(1), v),
        lambda x: F.concat(
            F.lit('{"name":"f'),
            x.cast("string"),
            F.lit('","type":"string"'),
            F.when(F.col("_breaking") & (x == v) & (x > 1), F.lit("")).otherwise(F.lit(',"default":""')),
            F.lit("}"),
        ),
    )
    definition = F.concat(
        F.lit('{"type":"record","name":"Event","namespace":"bench","fields":[{"name":"id","type":"long"},'),
        F.array_join(fields, ","),
        F.lit("]}"),
    )
    return chosen.select(
        "cluster",
        "topic",
        *[val.alias(k) for k, val in export.items()],
        v.cast("long").alias("version"),
        F.lit("AVRO").alias("schema_type"),
        F.lit("Event").alias("schema_name"),
        definition.alias("definition"),
        F.lit(False).alias("is_deleted"),
        F.timestamp_millis(F.col("export_ms") - (F.lit(4) - v) * 86_400_000).alias("registered_at"),
        F.concat(
            F.col("cluster"), F.lit("/schemas/topic-"), F.col("tid").cast("string"), F.lit(".json")
        ).alias("source_file"),
    )


def _plan_requests(cursors: DataFrame, managed: DataFrame, rng: _Rng) -> DataFrame:
    subs = cursors.where(
        (F.col("cursor_kind") == "subscription")
        & (rng.uniform("request", F.col("tid"), F.col("cursor_order")) < 0.1)
    )
    key = F.col("tid") * 100_000 + F.col("cursor_order")
    which = rng.below(7, "action", key)
    actions = F.array(
        *[F.lit(a) for a in ("skip", "skip", "skip", "clear_backlog", "reset", "reset", "reset_by_time")]
    )
    action = F.element_at(actions, (which + 1).cast("int"))
    target_kind = F.element_at(
        F.array(F.lit("earliest"), F.lit("latest"), F.lit("position")),
        (rng.below(3, "target", key) + 1).cast("int"),
    )
    cursor_requests = subs.select(
        F.concat(
            F.lit("bench-"),
            F.col("cluster"),
            F.lit("-"),
            F.col("tid").cast("string"),
            F.lit("-"),
            F.col("cursor_order").cast("string"),
        ).alias("request_id"),
        "cluster",
        "topic",
        action.alias("action"),
        "cursor_name",
        F.when(action == "skip", F.pow(F.lit(2.0), rng.below(12, "n", key)).cast("long")).alias("n"),
        F.when(
            action == "skip",
            F.when(rng.uniform("include", key) < 0.5, F.lit("Include")).otherwise(F.lit("Exclude")),
        ).alias("deleted_entries"),
        F.when(action == "reset", target_kind).alias("target_kind"),
        F.when((action == "reset") & (target_kind == "position"), F.col("mark_delete_position")).alias(
            "target"
        ),
        F.when(
            action == "reset_by_time", F.col("export_ms") - (rng.below(48, "hours", key) + 1) * 3_600_000
        ).alias("timestamp_ms"),
    )
    readers = managed.where(
        rng.uniform("readerreq", F.xxhash64(F.col("cluster"), F.col("topic"))) < 0.05
    ).select(
        F.concat(F.lit("bench-reader-"), F.col("cluster"), F.lit("-"), F.col("topic")).alias("request_id"),
        "cluster",
        "topic",
        F.lit("reader_start").alias("action"),
        F.lit("message_id").alias("start_kind"),
        F.struct(
            F.col("last_confirmed_entry.ledger_id").alias("ledger_id"),
            F.col("last_confirmed_entry.entry_id").alias("entry_id"),
            F.lit(-1).alias("batch_index"),
        ).alias("start_message_id"),
        F.lit(True).alias("inclusive"),
        F.lit(0).cast("long").alias("rollback_seconds"),
        F.lit(False).alias("read_compacted"),
        F.lit("Latest").alias("initial_position"),
    )
    return cursor_requests.unionByName(readers, allowMissingColumns=True).select(
        "*", F.lit("bench-datagen").alias("source")
    )


# --- orchestration ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TierFrames:
    """The lazy input-table frames of one tier (before :func:`~pulsar_model.tables.contracts.conform`) and the
    intermediate frames they share, persisted; call :meth:`release` when done."""

    frames: dict[str, DataFrame]
    persisted: tuple[DataFrame, ...]

    def release(self) -> None:
        for df in self.persisted:
            df.unpersist()


def tier_frames(
    spark: SparkSession,
    spec: TierSpec,
    *,
    seed: int = 7,
    export_date: dt.date = dt.date(2026, 11, 1),
    pulsar_version: str = "4.1.3",
) -> TierFrames:
    """Every input table of ``spec`` as a DataFrame (one per name of :data:`TABLES`); nothing is written."""
    rng = _Rng(seed)
    exported_at = dt.datetime.combine(export_date, dt.time(2, 0), tzinfo=dt.UTC)
    export_ms = int(exported_at.timestamp() * 1000)
    export = {
        "export_id": F.lit(f"bench-{spec.name}-seed{seed}-{export_date.isoformat()}"),
        "export_date": F.lit(export_date),
    }
    topics = _with_rep_md(_topics(spark, spec, rng, export_ms, pulsar_version), rng, spec).persist()
    plan = _ledger_plan(topics, rng, spec).persist()
    topic_entries = plan.groupBy("tid").agg(F.max("topic_entries").alias("topic_entries_est"))
    topics_x = topics.join(topic_entries, "tid", "left").fillna(0, ["topic_entries_est"])
    base = _entries_base(plan, rng, spec)
    sizes = _ledger_sizes(base).persist()
    cursors = _cursors(topics_x, rng, spec, export).persist()
    managed = _managed_ledgers_table(topics, plan, sizes, rng, spec, export)
    frames: dict[str, DataFrame] = {
        "managed_ledgers": managed.select("*", F.timestamp_millis(F.lit(export_ms)).alias("exported_at")),
        "ledgers": _ledgers_table(plan, sizes, export),
        "cursors": cursors,
        "entries": _entries_table(base, export),
        "messages": _messages_table(base, rng, export),
        "markers": _markers_table(base, export),
        "backlog_quotas": _backlog_quotas(spark, topics, rng, spec, export),
        "consumers": _consumers(cursors, rng, export),
        "schema_versions": _schema_versions(topics, rng, export),
        "plan_requests": _plan_requests(cursors, managed, rng),
    }
    return TierFrames(
        {name: conform(df, name) for name, df in frames.items()}, (topics, plan, sizes, cursors)
    )


def generate_tier(
    spark: SparkSession,
    tables: DeltaTables,
    tier: str | TierSpec,
    *,
    seed: int = 7,
    export_date: dt.date = dt.date(2026, 11, 1),
    pulsar_version: str = "4.1.3",
    echo: Callable[[str], None] = print,
    only: Sequence[str] | None = None,
) -> dict[str, int]:
    """Generate ``tier`` (a name of :data:`TIERS` or a :class:`TierSpec`) into the input tables of
    ``export_date``; return the rows written per table.

    ``only``: a subset of :data:`TABLES` to write (e.g. the metadata tables of tier ``xl`` for the
    position-after-N comparison, without its 30M entries); the rows are those of the whole tier's
    tables (the frames are built the same way, only fewer are written).

    Every input table's ``export_date`` partition is replaced (``plan_requests``, unpartitioned, is
    overwritten); a rerun with the same arguments writes identical rows. ``pulsar_version`` is every
    cluster's broker version. Driver-side orchestration: the driver loops over the tables only.
    """
    spec = TIERS[tier] if isinstance(tier, str) else tier
    unknown = sorted(set(only or ()) - set(TABLES))
    if unknown:
        raise ValueError(f"unknown table(s) {', '.join(unknown)}; choose from {', '.join(TABLES)}")
    t0 = time.monotonic()
    spark.sparkContext.setJobDescription(f"bench datagen {spec.name}: plan")
    built = tier_frames(spark, spec, seed=seed, export_date=export_date, pulsar_version=pulsar_version)
    rows: dict[str, int] = {}
    try:
        for table in (t for t in TABLES if only is None or t in only):
            c = contract(table)
            tables.create(table, c.spark_schema, c.partitioned_by, description=c.description)
            started = time.monotonic()
            spark.sparkContext.setJobDescription(f"bench datagen {spec.name}: {table}")
            df = built.frames[table]
            if c.partitioned_by:
                day = {"export_date": export_date}
                tables.write_all([TableWrite(table, df, "replace_partitions", day, c.partitioned_by)])
                rows[table] = tables.count_rows(table, partition_filter=day)
            else:
                tables.write_all([TableWrite(table, df, "overwrite")])
                rows[table] = tables.count_rows(table)
            echo(f"  {table:<16} {rows[table]:>12,} rows  {time.monotonic() - started:6.1f}s")
    finally:
        built.release()
        spark.sparkContext.setJobDescription(None)  # type: ignore[arg-type]
    echo(f"tier {spec.name} (seed {seed}) generated in {time.monotonic() - t0:.1f}s")
    return rows
