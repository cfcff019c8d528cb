"""Topic compaction preview: what Pulsar's compactor would write, and what a compacted reader sees (docs §5).

Transforms (pure and lazy, set-based; no per-key or per-topic driver work):

* :func:`compaction_horizons` – one row per topic: the ``horizon`` (last message id when phase one starts,
  batch index dropped) and the phase-two range ``from_position`` .. ``to_position`` (docs §5.4);
* :func:`compacted_ledger` – one row per batch slot of every entry the compactor writes, placeholders
  (``compacted_out``) included, so batches keep their slot count (docs §5.5);
* :func:`compact` – one row per retained message (placeholders removed): the acceptance-facing API;
* :func:`compacted_reader_view` – what a ``readCompacted`` reader/consumer receives from a start position
  (docs §5.6);
* :func:`compacted_reader_diff` – what compaction hides from that reader compared with a raw reader;
* :func:`compaction_summary` – one row per topic with keys, tombstones, key-less messages and savings.

Phase one ("latest id per key", §5.4) is a max over a window on ``(cluster, topic, key)`` (the key's
last event by message id, value or tombstone); the per-entry "deleted" flags are a window over the
entry; ``from``/``to`` are a window over the topic (materialised: an aggregation joined back, see
:func:`compaction_phases`). Phase two (§5.5) is then a filter. The input is hash-partitioned once by
``(cluster, topic)`` so all of it shares one shuffle: one topic is processed by one task (Spark spills
large partitions).

What reaches the compactor and what it does with it changed in four pull requests, each a flag of
:class:`CompactorSemantics` with its own boundary (docs §5.4, evidence in each predicate's docstring):

* apache/pulsar#16205 (:func:`compaction_subscription_ignores_individual_acks`): before it the dispatcher
  acknowledged a marker or an aborted transactional entry individually on the ``__compaction``
  subscription, which accepts cumulative acknowledgements only: the read failed and the compaction timed
  out (``failure`` = ``compactor_ack_rejected``);
* apache/pulsar#21718 (:func:`dispatcher_delivers_markers_to_compaction`): before it the dispatcher
  filtered markers out for ``__compaction`` too, so the compactor never saw them; when the topic's last
  entry (phase one's target) was one, phase one timed out (``failure`` = ``phase_one_timeout``). From it
  markers are delivered and the compactor treats them as deleted. Aborted transactional messages are
  filtered for ``__compaction`` by every line;
* apache/pulsar#20980 (:func:`batch_deleted_only_when_all_deleted`): a batch counts as deleted in phase one
  when **all** its messages were deleted; before it when **any** was, which can shrink ``from``/``to`` and
  lose the survivors of batches outside the range (docs §12 item 10);
* apache/pulsar#21578 (:func:`has_retain_null_key_option`, PIP-318): key-less messages are kept iff
  ``topicCompactionRetainNullKey`` (default ``false`` from 3.2.0, ``true`` on the maintenance lines);
  before it they are always kept.

No compactor of any line writes a marker to the compacted ledger.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.storagelevel import StorageLevel

from pulsar_model import DEFAULT_PULSAR_VERSION
from pulsar_model.domain.versions import PulsarVersion, VersionLike, flag
from pulsar_model.engine import topic_engine as eng
from pulsar_model.engine import topic_rows
from pulsar_model.engine.columns import POSITION_TYPE, as_position, position
from pulsar_model.engine.flags import FLAGS_COLUMN, with_flags
from pulsar_model.engine.grouped import map_groups, records
from pulsar_model.errors import ConfigError, ContractError
from pulsar_model.positions import require_version_column
from pulsar_model.quota.policy import is_system_topic, namespace_of, partitioned_topic_of
from pulsar_model.tables.contracts import contract, with_derived

__all__ = [
    "COMPACTED_ENTRY_RECORD_SCHEMA",
    "COMPACTION_CURSOR",
    "FAILURE_ACK_REJECTED",
    "FAILURE_PHASE_ONE_TIMEOUT",
    "MESSAGE_ID_TYPE",
    "NON_BATCHED_INDEX",
    "STAGE_COLUMNS",
    "TXN_ABORT_MARKER",
    "CompactionPhases",
    "CompactionThresholds",
    "CompactorSemantics",
    "MarkerDispatch",
    "batch_deleted_only_when_all_deleted",
    "compact",
    "compacted_entry_records",
    "compacted_ledger",
    "compacted_reader_diff",
    "compacted_reader_view",
    "compaction_horizons",
    "compaction_phases",
    "compaction_rows",
    "compaction_subscription_ignores_individual_acks",
    "compaction_summary",
    "compaction_trigger",
    "compactor_semantics",
    "dispatcher_delivers_markers_to_compaction",
    "has_retain_null_key_option",
    "message_id",
    "trigger_rule",
    "with_uncompressed_size_flag",
]

#: ``batch_index`` of a message that is not part of a batch, and of entry-level ids such as the horizon
#: (docs §5.4: the horizon is the last message id "with batch index dropped").
NON_BATCHED_INDEX = -1

#: A message id: position plus batch index (DESIGN.md "Core conventions").
MESSAGE_ID_TYPE = T.StructType(
    [
        T.StructField("ledger_id", T.LongType(), True),
        T.StructField("entry_id", T.LongType(), True),
        T.StructField("batch_index", T.IntegerType(), True),
    ]
)

#: ``MarkerType.TXN_ABORT``: the marker that ends an aborted transaction (docs §8.3).
TXN_ABORT_MARKER = 22

#: How the dispatcher treats a marker entry read for the ``__compaction`` subscription (docs §5.4).
MarkerDispatch = Literal["ack_fails", "filtered", "delivered"]
#: ``failure`` codes of :func:`compaction_horizons` / :func:`compaction_summary` (docs §5.4).
FAILURE_ACK_REJECTED = "compactor_ack_rejected"
FAILURE_PHASE_ONE_TIMEOUT = "phase_one_timeout"
_FAILURE_TEXT = {
    FAILURE_ACK_REJECTED: (
        "the dispatcher acknowledges a marker or aborted transactional entry individually on the "
        "__compaction subscription, which accepts cumulative acknowledgements only "
        "(IllegalArgumentException, fixed by apache/pulsar#16205): the read stalls and phase one times out; "
        "nothing is written and the horizon does not move"
    ),
    FAILURE_PHASE_ONE_TIMEOUT: (
        "the topic's last entry, phase one's target, is a marker or an aborted transactional message the "
        "dispatcher never delivers to __compaction (markers: fixed by apache/pulsar#21718): phase one times "
        "out; nothing is written and the horizon does not move"
    ),
}

#: Compactor.COMPACTION_SUBSCRIPTION: the cursor whose mark-delete is the last horizon (docs §5.2, §5.6).
COMPACTION_CURSOR = "__compaction"
#: Contract columns the nightly stage adds (export identity, the version applied); the library transforms
#: return every other column of their contract.
STAGE_COLUMNS = frozenset({"export_id", "export_date", "pulsar_version"})
#: NamespaceService heartbeat namespaces (v1 ``pulsar/<cluster>/<host:port>``, v2 ``pulsar/<host:port>``):
#: the 3.x trigger leaves system topics in them alone (docs §5.3).
_HEARTBEAT_NAMESPACE_PATTERNS = (r"pulsar/[^/]+/[^:]+:\d+", r"pulsar/[^:]+:\d+")


_ENTRY = ["cluster", "topic", "ledger_id", "entry_id"]
_TOPIC = ["cluster", "topic"]
#: An entry of one export (the ``messages`` / ``entries`` tables hold several exports' rows).
_ENTRY_KEY = ["cluster", "topic", "export_id", "ledger_id", "entry_id"]


def _conform(df: DataFrame, table: str) -> DataFrame:
    """Select and cast ``df`` to ``table``'s contract minus :data:`STAGE_COLUMNS` (missing columns: nulls);
    the derived columns (positions as ``L:E`` text) computed from their sources as the writer does."""
    available = set(df.columns)
    stored = {
        c.name: (F.col(c.name) if c.name in available else F.lit(None)).cast(c.data_type)
        for c in contract(table).columns
        if c.name not in STAGE_COLUMNS and c.derived_from is None
    }
    return df.select(*with_derived(table, stored))


def compaction_subscription_ignores_individual_acks(version: VersionLike) -> bool:
    """The dispatcher no longer acknowledges the entries it filters on the ``__compaction`` subscription.

    apache/pulsar#16205 "Fix compaction subscription acknowledge Marker msg issue" (labels release/2.8.4,
    2.9.4, 2.10.2; cherry-picks #16918 for 2.8.4 and #16348 for 2.9.4; merged June 2022, before the
    branch-2.11 cut). Before it (``Hongten/pulsar-2.10.1-code-study@c597d51``
    ``AbstractBaseDispatcher.filterEntriesForConsumer``) a marker, a transaction marker or an aborted
    transactional message was acknowledged with ``AckType.Individual`` and ``CompactorSubscription``
    rejects every non-cumulative ack (``checkArgument``, ``apache/pulsar@005f29a``). 2.10.2 from the label
    only (no 2.10.2 release notes in the index).
    """
    return flag("compaction_ignores_individual_acks", version)


def dispatcher_delivers_markers_to_compaction(version: VersionLike) -> bool:
    """The dispatcher delivers server-only markers (transaction markers included) to ``__compaction``.

    apache/pulsar#21718 "Avoid compaction task stuck when the last message to compact is a marker" (merged
    2023-12-13): in the release notes of 3.0.3 and 3.1.3 (``apache/pulsar-site`` ``release-notes/versioned``)
    and in 3.2.0 from master; the dispatcher copies with it (an index copy of ``AbstractBaseDispatcher``
    with ``isTxnAborted(txnId, position)``, and ``3pacccccc/pulsar@01b1beb`` of 4.x) keep markers for a
    cursor named ``__compaction``. The PR carries labels release/2.10.6 and release/2.11.4, but the release
    notes of 2.10.6 and 2.11.4 do not list it (the closed, unmerged apache/pulsar#21951 carries the same
    two labels), and its commits are in no 2.10.x or 2.11.x release tag (up to v2.10.6 / v2.11.4).
    """
    return flag("markers_delivered_to_compaction", version)


def batch_deleted_only_when_all_deleted(version: VersionLike) -> bool:
    """Phase one flags a batch deleted when all its messages were deleted (else when any was).

    apache/pulsar#20980 "Fix message loss during topic compaction": in the release notes of 2.10.6, 2.11.3,
    3.0.2 and 3.1.1; every 3.2.0+. The "all" rule in ``nikhil-ctds/ds-pulsar@b17e71c`` (a 3.x
    ``TwoPhaseCompactor``) and the 4.x ``AbstractTwoPhaseCompactor``; "any" in ``apache/pulsar@bb0abb4``.
    """
    return flag("batch_deleted_when_all", version)


def has_retain_null_key_option(version: VersionLike) -> bool:
    """``topicCompactionRetainNullKey`` exists (PIP-318); without it key-less messages are always kept.

    apache/pulsar#21578: in the release notes of 2.10.6, 2.11.3, 3.0.3 (with its cherry-pick #21662) and
    3.1.2; 3.2.0 made the default ``false`` (docs §5.2).
    """
    return flag("retain_null_key_option", version)


@dataclass(frozen=True)
class CompactorSemantics:
    """The version-dependent switches of the compactor, one per pull request (docs §5.4, §5.5)."""

    marker_dispatch: MarkerDispatch
    batch_deleted_when_all: bool
    retain_null_key_option: bool
    retain_null_key: bool

    @property
    def keeps_null_key(self) -> bool:
        """Key-less messages survive: always without the PIP-318 option, else per ``retain_null_key``."""
        return self.retain_null_key or not self.retain_null_key_option


def compactor_semantics(
    pulsar_version: VersionLike = DEFAULT_PULSAR_VERSION, retain_null_key: bool | None = None
) -> CompactorSemantics:
    """The compactor switches of ``pulsar_version``; ``retain_null_key=None`` = the broker default.

    The broker default of ``topicCompactionRetainNullKey`` is ``false`` from 3.2.0 and ``true`` on the
    maintenance lines that received the back-port (docs §5.2). A version without the option always keeps
    key-less messages, whatever ``retain_null_key`` says.
    """
    v = PulsarVersion.parse(pulsar_version)
    if dispatcher_delivers_markers_to_compaction(v):
        dispatch: MarkerDispatch = "delivered"
    elif compaction_subscription_ignores_individual_acks(v):
        dispatch = "filtered"
    else:
        dispatch = "ack_fails"
    if retain_null_key is None:
        # PIP-318 made topicCompactionRetainNullKey=false the default from 3.2.0 (docs §5.2)
        retain_null_key = not flag("retain_null_key_default_false", v)
    return CompactorSemantics(
        marker_dispatch=dispatch,
        batch_deleted_when_all=batch_deleted_only_when_all_deleted(v),
        retain_null_key_option=has_retain_null_key_option(v),
        retain_null_key=retain_null_key,
    )


# --- column helpers ------------------------------------------------------------------------------------


def message_id(ledger_id: Column, entry_id: Column, batch_index: Column) -> Column:
    """Build a :data:`MESSAGE_ID_TYPE` struct; Spark's struct order is Pulsar's message-id order."""
    return F.struct(
        ledger_id.cast("long").alias("ledger_id"),
        entry_id.cast("long").alias("entry_id"),
        batch_index.cast("int").alias("batch_index"),
    )


def _entry_id_of(pos: Column) -> Column:
    """Entry-level message id (batch index dropped, docs §5.4) of a position; null stays null."""
    return F.when(pos.isNull(), F.lit(None).cast(MESSAGE_ID_TYPE)).otherwise(
        message_id(pos["ledger_id"], pos["entry_id"], F.lit(NON_BATCHED_INDEX))
    )


def _value_empty(columns: list[str]) -> Column:
    """The message's value is empty (no payload bytes, or the ``null_value`` flag)."""
    empty = F.col("payload_size_bytes") <= 0
    if "is_null_value" in columns:
        empty = empty | F.coalesce(F.col("is_null_value"), F.lit(False))
    return empty


def with_uncompressed_size_flag(messages: DataFrame, entries: DataFrame) -> DataFrame:
    """Add ``has_uncompressed_size = false`` to the messages whose size the entry's missing
    ``uncompressed_size`` changes; null (= set, or irrelevant) on every other message.

    The compactor sizes a non-batched message by ``uncompressed_size`` when set, else by the whole entry
    buffer (docs §5.4, §12 item 16): only a non-batched message with an empty value can turn out
    non-empty, so only those are joined with the entries lacking ``uncompressed_size``; the
    other messages are not shuffled (joining them all shuffled every message and entry: tier l, 74.5M rows,
    288 s). Pure and lazy.
    """
    candidate = F.coalesce((F.col("batch_index") < 0) & _value_empty(messages.columns), F.lit(False))
    candidates = messages.where(candidate)
    # The candidates' entry keys (one message per entry: not batched) are broadcast into the entry scan,
    # so only their entries leave it. Tier l, 214k candidates against 26M entries: a sort-merge join
    # 116.5 s; a hash join building on the candidates 37.8 s, every entry still shuffled (29 s more to
    # scan and shuffle them); this about 16 s to scan them, nothing shuffled.
    lacking = (
        entries.where(F.col("uncompressed_size").isNull())
        .join(F.broadcast(candidates.select(*_ENTRY_KEY)), _ENTRY_KEY, "left_semi")
        .select(*_ENTRY_KEY, F.lit(False).alias("has_uncompressed_size"))
    )
    flagged = candidates.join(lacking, _ENTRY_KEY, "left")
    rest = messages.where(~candidate).withColumn("has_uncompressed_size", F.lit(None).cast("boolean"))
    return rest.unionByName(flagged)


def _is_empty(columns: list[str]) -> Column:
    """A message the compactor sees as empty: a tombstone when keyed (docs §5.4, §11 item 15).

    With ``has_uncompressed_size`` in the input, a non-batched message whose entry lacks
    ``uncompressed_size`` is never empty: the compactor then measures the entry buffer, metadata included
    (docs §5.4, §12 item 16, open PR #25817), so such a null value is kept as an ordinary value.
    """
    empty = _value_empty(columns)
    if "has_uncompressed_size" in columns:
        measured_with_metadata = (F.col("batch_index") < 0) & ~F.coalesce(
            F.col("has_uncompressed_size"), F.lit(True)
        )
        empty = empty & ~measured_with_metadata
    return empty


_TXN = ["txnid_most_bits", "txnid_least_bits"]


def _read_set(messages: DataFrame, start_positions: DataFrame | None) -> DataFrame:
    """Messages phase one reads: strictly after the topic's start position (the ``__compaction``
    cursor's mark-delete), or all of them when the topic has no start (docs §5.4)."""
    optional = [
        c
        for c in (
            "is_null_value",
            "marker_type",
            "compacted_out",
            "has_uncompressed_size",
            *_TXN,
            "pulsar_version",
        )
        if c in messages.columns
    ]
    base = messages.select(
        *_TOPIC,
        F.col("ledger_id").cast("long").alias("ledger_id"),
        F.col("entry_id").cast("long").alias("entry_id"),
        F.col("batch_index").cast("int").alias("batch_index"),
        "key",
        F.col("payload_size_bytes").cast("long").alias("payload_size_bytes"),
        *optional,
    )
    if "marker_type" not in optional:
        base = base.withColumn("marker_type", F.lit(None).cast("int"))
    if "compacted_out" not in optional:
        base = base.withColumn("compacted_out", F.lit(False))
    for c in _TXN:
        if c not in optional:
            base = base.withColumn(c, F.lit(None).cast("long"))
    if start_positions is None:
        return base
    starts = start_positions.select(*_TOPIC, as_position(F.col("position")).alias("_start"))
    pos = position(F.col("ledger_id"), F.col("entry_id"))
    read = base.join(starts, _TOPIC, "left").where(F.col("_start").isNull() | (pos > F.col("_start")))
    return read.drop("_start")


#: Read columns that only feed phase one's flags: not carried into the (materialised) rows.
_NOT_CARRIED = frozenset(
    {"_slot_deleted", "is_null_value", "has_uncompressed_size", *_TXN, "pulsar_version", FLAGS_COLUMN}
)


@dataclass(frozen=True)
class _SemColumns:
    """The compactor switches as columns: literals of one version, or each message's own (per row)."""

    delivered: Column
    ack_fails: Column
    when_all: Column | bool
    keeps_null_key: Column

    @classmethod
    def of(cls, sem: CompactorSemantics | None, retain_null_key: bool | None) -> _SemColumns:
        """Literals of ``sem``; ``None``: from the flags struct of each row (``FLAGS_COLUMN``)."""
        if sem is not None:
            return cls(
                F.lit(sem.marker_dispatch == "delivered"),
                F.lit(sem.marker_dispatch == "ack_fails"),
                sem.batch_deleted_when_all,
                F.lit(sem.keeps_null_key),
            )

        def f(name: str) -> Column:
            return F.coalesce(F.col(FLAGS_COLUMN)[name], F.lit(False))

        delivered = f("markers_delivered_to_compaction")
        retain = ~f("retain_null_key_default_false") if retain_null_key is None else F.lit(retain_null_key)
        return cls(
            delivered,
            ~delivered & ~f("compaction_ignores_individual_acks"),
            f("batch_deleted_when_all"),
            retain | ~f("retain_null_key_option"),
        )


def _phase_one(read: DataFrame, sem: _SemColumns) -> DataFrame:
    """Per read message: phase-one flags, the key's final latest id, and whether the message survives.

    Adds ``is_marker``, ``is_aborted`` (a transactional message whose transaction's abort marker is in the
    topic), ``hidden`` (the dispatcher never delivers the entry to ``__compaction``: an aborted message in
    every line, a marker before apache/pulsar#21718), ``acks_fail`` (the dispatcher acknowledges the entry
    individually on ``__compaction``, which fails before apache/pulsar#16205), ``is_keyed``, ``is_empty``,
    ``survives`` (written as a message, not a placeholder, if its entry is inside the phase-two range),
    ``entry_deleted`` (phase-one flag of the whole entry), ``entry_survives`` (the entry has at least one
    surviving message) and ``slots``; plus ``first_of_entry`` (the row with the entry's lowest batch index)
    and ``first_of_key`` (the keyed row with the key's lowest message id), computed by the same windows so
    that per-topic entry and key counts are plain sums (no ``count_distinct``, whose row expansion made the
    summary 5x the compaction). Markers and aborted messages are deleted entries in phase one: hidden ones
    never reach it, delivered markers are skipped (docs §5.4).
    """
    is_marker = F.col("marker_type").isNotNull()
    # The input is partitioned by topic, so a window over (topic, transaction) needs no shuffle.
    by_txn = Window.partitionBy(*_TOPIC, *_TXN)
    abort_seen = F.max((F.col("marker_type") == F.lit(TXN_ABORT_MARKER)).cast("int")).over(by_txn)
    is_aborted = (
        F.col("txnid_most_bits").isNotNull()
        & F.col("txnid_least_bits").isNotNull()
        & ~is_marker
        & F.coalesce(abort_seen == 1, F.lit(False))
    )
    read = read.select("*", is_marker.alias("is_marker"), is_aborted.alias("is_aborted"))
    is_marker, is_aborted = F.col("is_marker"), F.col("is_aborted")
    hidden = is_aborted | (is_marker & ~sem.delivered)
    acks_fail = (is_aborted | is_marker) & sem.ack_fails
    compacted_out = F.coalesce(F.col("compacted_out"), F.lit(False))
    is_batch = F.col("batch_index") >= 0
    is_keyed = F.col("key").isNotNull() & ~is_marker & ~is_aborted
    is_empty = _is_empty(read.columns)
    mid = message_id(F.col("ledger_id"), F.col("entry_id"), F.col("batch_index"))

    # Phase-one events that touch the key map: keyed, readable, not already compacted out (§5.4).
    event = is_keyed & ~compacted_out
    by_key = Window.partitionBy(*_TOPIC, "key")
    latest_event = F.max(F.when(event, F.struct(mid.alias("id"), is_empty.alias("tombstone")))).over(by_key)
    latest_id = F.when(~latest_event["tombstone"], latest_event["id"])
    first_of_key = is_keyed & (F.min(F.when(is_keyed, mid)).over(by_key) == mid)

    # A message that counts as deleted in phase one (batched: compacted_out slots are skipped).
    slot_deleted = (
        F.when(is_marker | is_aborted, True).when(is_keyed, is_empty).otherwise(~sem.keeps_null_key)
    ) & ~compacted_out
    survives = (
        F.when(compacted_out, False)
        .when(is_marker | is_aborted, False)
        .when(~is_keyed, sem.keeps_null_key)
        .otherwise(F.coalesce(latest_id == mid, F.lit(False)) & ~is_empty)
    )

    flagged = read.select(
        "*",
        hidden.alias("hidden"),
        acks_fail.alias("acks_fail"),
        is_keyed.alias("is_keyed"),
        is_empty.alias("is_empty"),
        _value_empty(read.columns).alias("value_empty"),
        is_batch.alias("is_batch"),
        slot_deleted.alias("_slot_deleted"),
        survives.alias("survives"),
        first_of_key.alias("first_of_key"),
    )
    by_entry = Window.partitionBy(*_ENTRY)
    slots = F.count(F.lit(1)).over(by_entry)
    deleted_slots = F.sum(F.col("_slot_deleted").cast("int")).over(by_entry)
    if isinstance(sem.when_all, bool):
        batch_deleted = (deleted_slots == slots) if sem.when_all else (deleted_slots > 0)
    else:
        batch_deleted = F.when(sem.when_all, deleted_slots == slots).otherwise(deleted_slots > 0)
    entry_deleted = F.when(F.col("is_marker") | F.col("is_aborted"), True).otherwise(
        F.when(F.col("is_batch"), batch_deleted).otherwise(F.col("_slot_deleted"))
    )
    return flagged.select(
        *[c for c in flagged.columns if c not in _NOT_CARRIED],
        slots.cast("int").alias("slots"),
        entry_deleted.alias("entry_deleted"),
        F.max(F.col("survives").cast("int")).over(by_entry).cast("boolean").alias("entry_survives"),
        (F.min("batch_index").over(by_entry) == F.col("batch_index")).alias("first_of_entry"),
    )


def _entry_and_hidden() -> Column:
    """``struct(pos, hidden)`` of a read row; its maximum over a topic is the last entry's."""
    pos = position(F.col("ledger_id"), F.col("entry_id"))
    return F.struct(pos.alias("pos"), F.col("hidden").alias("hidden"))


def _failure(any_ack_fails: Column, last: Column) -> Column:
    """The ``failure`` text of a topic (docs §5.4): ``any_ack_fails`` = some read entry is acknowledged
    individually on ``__compaction`` (before #16205); ``last`` = :func:`_entry_and_hidden` of the last
    read entry (its maximum over the topic)."""
    return F.when(
        F.coalesce(any_ack_fails, F.lit(False)),
        F.lit(f"{FAILURE_ACK_REJECTED}: {_FAILURE_TEXT[FAILURE_ACK_REJECTED]}"),
    ).when(
        F.coalesce(last["hidden"], F.lit(False)),
        F.lit(f"{FAILURE_PHASE_ONE_TIMEOUT}: {_FAILURE_TEXT[FAILURE_PHASE_ONE_TIMEOUT]}"),
    )


def _topic_ranges(flagged: DataFrame) -> DataFrame:
    """Per topic with something to read: ``horizon``, ``from_position``, ``to_position``, ``failure``
    (docs §5.4); the three positions are null when the compaction fails (nothing is acknowledged).

    An aggregation over phase one's rows; they are hash-partitioned by topic, so it needs no shuffle.
    """
    pos = position(F.col("ledger_id"), F.col("entry_id"))
    kept = F.when(~F.col("entry_deleted"), pos)
    agg = flagged.groupBy(*_TOPIC).agg(
        F.max(pos).alias("_last"),
        F.min(kept).alias("_first"),
        F.max(kept).alias("_to"),
        F.max(F.col("acks_fail").cast("int")).alias("_acks_fail"),
        F.max(_entry_and_hidden()).alias("_last_entry"),
    )
    failure = _failure(F.col("_acks_fail") == 1, F.col("_last_entry"))
    ok = failure.isNull()
    return agg.select(
        *_TOPIC,
        F.when(ok, _entry_id_of(F.col("_last"))).alias("horizon"),
        F.when(ok, _entry_id_of(F.coalesce(F.col("_first"), F.col("_last")))).alias("from_position"),
        F.when(ok, _entry_id_of(F.coalesce(F.col("_to"), F.col("_last")))).alias("to_position"),
        failure.alias("failure"),
    )


def compaction_horizons(
    messages: DataFrame,
    retain_null_key: bool | None = None,
    pulsar_version: VersionLike | None = DEFAULT_PULSAR_VERSION,
    start_positions: DataFrame | None = None,
    rows: DataFrame | None = None,
    ranges: DataFrame | None = None,
) -> DataFrame:
    """Phase one's result per topic: ``horizon``, ``from_position``, ``to_position`` (docs §5.4).

    One row per ``(cluster, topic)`` of ``messages`` (and of ``start_positions``). All three are message
    ids ``struct<ledger_id, entry_id, batch_index>`` of entries (``batch_index = -1``): the horizon is the
    last message id when phase one starts (batch index dropped; the ``__compaction`` cursor is
    acknowledged up to it), ``from``/``to`` the first/last entry phase one did not flag as deleted (both
    fall back to the horizon when every entry was deleted). All three are null when there is nothing to
    read after the start position, and when the broker's compaction of the topic fails: ``failure`` then
    says why (``compactor_ack_rejected: ...`` before apache/pulsar#16205 when a marker or an aborted
    transactional message is read; ``phase_one_timeout: ...`` when the last entry is one the dispatcher
    never delivers to ``__compaction``; docs §5.4), else it is null. ``start_positions``: ``cluster,
    topic, position`` (the ``__compaction`` cursor's mark-delete); topics without a row start at the
    beginning of the topic.
    ``rows``: :func:`compaction_rows` of the same arguments, when already computed; ``ranges``:
    :attr:`CompactionPhases.ranges` of them (used instead of ``rows``, without reading the rows again).
    """
    if ranges is not None:
        # A topic of ``messages`` without a start position has every message read, so it has a range:
        # the ranges and the starts list the same topics as the messages and the starts, without
        # scanning the messages again.
        topics = ranges.select(*_TOPIC)
    else:
        ranges = (
            compaction_phases(messages, retain_null_key, pulsar_version, start_positions).ranges
            if rows is None
            else _topic_ranges(rows)
        )
        topics = messages.select(*_TOPIC)
    if start_positions is not None:
        topics = topics.unionByName(start_positions.select(*_TOPIC))
    return _conform(topics.distinct().join(ranges, _TOPIC, "left"), "compaction_horizons")


def _position_of(mid: Column) -> Column:
    """The entry position of a message id; null stays null (a failed compaction has no range)."""
    return F.when(mid.isNotNull(), position(mid["ledger_id"], mid["entry_id"]))


def _phase_two(flagged: DataFrame, ranges: DataFrame | None = None) -> DataFrame:
    """Add the topic's ``from_position``/``to_position`` and ``written`` (the row is a slot of an entry
    written to the compacted ledger, docs §5.5) to phase one's rows.

    ``ranges``: :func:`_topic_ranges` of ``flagged``, materialised: joined back on the topic (both sides
    are hash-partitioned by topic, no shuffle). Without it the range is a window over the topic, so that a
    lazy plan computes phase one once; such a window buffers a whole topic (millions of rows for the huge
    ones, spilled to disk), which the materialised path avoids.
    """
    pos = position(F.col("ledger_id"), F.col("entry_id"))
    if ranges is None:
        kept = F.when(~F.col("entry_deleted"), pos)
        by_topic = Window.partitionBy(*_TOPIC)
        last = F.max(pos).over(by_topic)
        last_entry = F.max(_entry_and_hidden()).over(by_topic)
        ok = _failure(F.max(F.col("acks_fail").cast("int")).over(by_topic) == 1, last_entry).isNull()
        from_pos = F.when(ok, F.coalesce(F.min(kept).over(by_topic), last))
        to_pos = F.when(ok, F.coalesce(F.max(kept).over(by_topic), last))
        ranged = flagged.select(
            "*",
            _entry_id_of(from_pos).alias("from_position"),
            _entry_id_of(to_pos).alias("to_position"),
            from_pos.alias("_from"),
            to_pos.alias("_to"),
        )
    else:
        bounds = ranges.select(
            *_TOPIC,
            "from_position",
            "to_position",
            _position_of(F.col("from_position")).alias("_from"),
            _position_of(F.col("to_position")).alias("_to"),
        )
        # Shuffled hash join: both sides keep phase one's partitioning by topic, the cached rows lose
        # the window's sort order (a sort-merge join re-sorted every row: tier m, ~20 s per table).
        ranged = flagged.join(bounds.hint("shuffle_hash"), _TOPIC, "inner")
    # A failed compaction (null range) writes nothing.
    in_range = F.coalesce((pos >= F.col("_from")) & (pos <= F.col("_to")), F.lit(False))
    return ranged.select(
        *flagged.columns,
        "from_position",
        "to_position",
        (in_range & F.col("entry_survives")).alias("written"),
    )


@dataclass(frozen=True)
class CompactionPhases:
    """Both phases of one compaction (docs §5.4-§5.5), shared by the stage's three tables.

    ``rows``: :func:`compaction_rows`; ``ranges``: one row per topic with messages read, ``cluster, topic,
    horizon, from_position, to_position`` (what :func:`compaction_horizons` reports); ``cached``: the
    frames :func:`compaction_phases` persisted, for :meth:`release`.
    """

    rows: DataFrame
    ranges: DataFrame
    cached: tuple[DataFrame, ...] = ()

    def release(self) -> None:
        """Drop the persisted frames (after the last action that reads them)."""
        for df in self.cached:
            df.unpersist()


def compaction_phases(
    messages: DataFrame,
    retain_null_key: bool | None = None,
    pulsar_version: VersionLike | None = DEFAULT_PULSAR_VERSION,
    start_positions: DataFrame | None = None,
    materialise: bool = False,
) -> CompactionPhases:
    """Phase one's rows and the per-topic ranges; ``materialise`` = compute each once (the stage).

    Materialised, phase one (its two windows over every message) runs once, in the first action that
    reads the frames, and its rows are kept by the executors; the ranges are an aggregation of those
    rows, also kept (both stay lazy: no Spark action here); the three tables
    derived from them then read the kept rows once each and join the ranges without a shuffle; call
    :meth:`CompactionPhases.release` after the last of them. Lazy (the default), the range is a third
    window and each use of the frames recomputes phase one.
    """
    read = _read_set(messages, start_positions).repartition(*_TOPIC)
    if pulsar_version is None:
        if "pulsar_version" not in messages.columns:
            raise ContractError(
                "pulsar_version=None reads messages.pulsar_version (each message's cluster version), which "
                "messages does not have: add the column or pass a version string such as '4.1.3'"
            )
        sem = _SemColumns.of(None, retain_null_key)
        read = with_flags(read)
    else:
        sem = _SemColumns.of(compactor_semantics(pulsar_version, retain_null_key), retain_null_key)
    flagged = _phase_one(read, sem)
    if not materialise:
        return CompactionPhases(rows=_phase_two(flagged), ranges=_topic_ranges(flagged))
    # Persisted (columnar, compressed, spilling to disk), not checkpointed: Spark 4.1 drops the hash
    # partitioning of a localCheckpoint under AQE (tier m: the rows were shuffled again for the ranges,
    # the summary and the join); a cached plan keeps it, and its scans read only the columns used.
    flagged = flagged.persist(StorageLevel.MEMORY_AND_DISK)
    ranges = _topic_ranges(flagged).persist(StorageLevel.MEMORY_AND_DISK)
    return CompactionPhases(rows=_phase_two(flagged, ranges), ranges=ranges, cached=(ranges, flagged))


def compaction_rows(
    messages: DataFrame,
    retain_null_key: bool | None = None,
    pulsar_version: VersionLike | None = DEFAULT_PULSAR_VERSION,
    start_positions: DataFrame | None = None,
) -> DataFrame:
    """Both phases for every message phase one reads: one row per read message (docs §5.4-§5.5).

    The shared intermediate of :func:`compaction_horizons`, :func:`compacted_ledger`, :func:`compact` and
    :func:`compaction_summary`: each takes it as ``rows=`` instead of recomputing the three windows of
    phase one (the compaction stage materialises it once for every cluster and derives all three tables
    from it). Columns: the read columns plus phase one's flags (``is_marker, is_aborted, hidden,
    acks_fail, is_keyed, is_empty, value_empty, is_batch, survives, first_of_key, slots, entry_deleted,
    entry_survives, first_of_entry``) and phase two's ``from_position, to_position, written`` (``written``
    is false for every row of a topic whose compaction fails). Pure and lazy.
    """
    return compaction_phases(messages, retain_null_key, pulsar_version, start_positions).rows


def _compacted(
    messages: DataFrame,
    retain_null_key: bool | None,
    pulsar_version: VersionLike | None,
    start_positions: DataFrame | None,
    rows: DataFrame | None = None,
) -> DataFrame:
    if rows is not None:
        return rows
    return compaction_rows(messages, retain_null_key, pulsar_version, start_positions)


def compacted_ledger(
    messages: DataFrame,
    retain_null_key: bool | None = None,
    pulsar_version: VersionLike | None = DEFAULT_PULSAR_VERSION,
    start_positions: DataFrame | None = None,
    rows: DataFrame | None = None,
) -> DataFrame:
    """Phase two's output: one row per batch slot of every entry written to the compacted ledger (§5.5).

    Entries keep their original ``(ledger_id, entry_id)``; a written batch keeps all its slots, the
    slots that do not survive are placeholders with ``compacted_out = true`` (``key`` and
    ``payload_size_bytes`` are those of the original message, the placeholder itself is empty); a batch
    without survivors is not written. Only entries in ``[from_position, to_position]`` are written, and
    nothing when the compaction fails (``failure`` of :func:`compaction_horizons`); markers and aborted
    transactional messages never are (docs §5.4). Columns: ``cluster, topic, ledger_id, entry_id,
    batch_index, key, payload_size_bytes, marker_type`` (always null), ``compacted_out, batch_size`` (slots
    of the written entry, ``1`` when not batched). ``rows``:
    :func:`compaction_rows` of the same arguments, when already computed.
    """
    rows = _compacted(messages, retain_null_key, pulsar_version, start_positions, rows)
    written = rows.where(F.col("written")).select(
        *_TOPIC,
        "ledger_id",
        "entry_id",
        "batch_index",
        "key",
        "payload_size_bytes",
        "marker_type",
        (~F.col("survives")).alias("compacted_out"),
        F.when(F.col("is_batch"), F.col("slots")).otherwise(F.lit(1)).alias("batch_size"),
    )
    return _conform(written, "compaction_ledger")


def compact(
    messages: DataFrame,
    retain_null_key: bool | None = None,
    pulsar_version: VersionLike | None = DEFAULT_PULSAR_VERSION,
    start_positions: DataFrame | None = None,
) -> DataFrame:
    """One row per message retained in the compacted ledger, with its original id (docs §5.4-§5.5).

    ``messages`` needs ``cluster, topic, ledger_id, entry_id, batch_index, key, payload_size_bytes``
    (``compacted_out``, ``marker_type``, ``is_null_value``, ``txnid_most_bits``, ``txnid_least_bits`` are
    used when present). A keyed message is retained iff it is the latest message of its key and not
    empty; an empty keyed message (a tombstone: ``payload_size_bytes <= 0`` or ``is_null_value``) deletes
    its key. Key-less messages are retained iff ``retain_null_key`` (the broker default of
    ``pulsar_version`` when ``None``; versions before PIP-318 always retain them). Markers and messages of
    aborted transactions (an abort marker with the same transaction id in the topic) are never retained and
    never touch the key map; a topic whose compaction fails retains nothing (docs §5.4). Retained batch
    messages keep their ``batch_index`` (placeholders are in :func:`compacted_ledger`, counted in
    ``batch_size``). ``start_positions``: see :func:`compaction_horizons`. Pure and lazy.
    """
    return compacted_ledger(messages, retain_null_key, pulsar_version, start_positions).where(
        ~F.col("compacted_out")
    )


def compacted_reader_view(
    messages: DataFrame,
    horizons: DataFrame,
    starts: DataFrame,
    compacted: DataFrame | None = None,
    retain_null_key: bool | None = None,
    pulsar_version: VersionLike | None = DEFAULT_PULSAR_VERSION,
    start_positions: DataFrame | None = None,
) -> DataFrame:
    """What a ``readCompacted=true`` reader or consumer receives (docs §5.6): one row per delivered message.

    ``horizons``: :func:`compaction_horizons` output (a topic without a row or with a null horizon has
    never been compacted); ``starts``: ``cluster, topic, reader_id, start_position`` (the position the
    reader reads from; ``(-1,-1)`` = earliest); ``compacted``: :func:`compacted_ledger` output, or
    ``None`` to compute it from the messages up to each topic's horizon with ``retain_null_key``,
    ``pulsar_version`` and ``start_positions`` (see :func:`compact`). When the topic has a horizon and
    ``start_position <= horizon``, the reader gets the compacted messages whose entry position is
    ``>= start_position`` (``source = 'compacted'``) and then the topic's messages after the horizon
    (``source = 'topic'``); otherwise it reads the topic from ``start_position``. Markers and
    ``compacted_out`` placeholders are never delivered to consumers (§4.3, §5.5). ``read_seq`` numbers
    the messages in delivery order per reader, starting at 1. Columns: ``cluster, topic, reader_id,
    read_seq, ledger_id, entry_id, batch_index, key, payload_size_bytes, source``.
    """
    if compacted is None:
        limit = horizons.select(*_TOPIC, _position_of(F.col("horizon")).alias("_hz"))
        up_to_horizon = messages.join(limit, _TOPIC, "inner").where(
            position(F.col("ledger_id"), F.col("entry_id")) <= F.col("_hz")
        )
        compacted = compacted_ledger(up_to_horizon, retain_null_key, pulsar_version, start_positions)
    hz = horizons.select(*_TOPIC, "horizon")
    st = starts.select(*_TOPIC, "reader_id", as_position(F.col("start_position")).alias("_start"))
    st = st.join(hz, _TOPIC, "left")
    hz_pos = _position_of(F.col("horizon"))
    pos = position(F.col("ledger_id"), F.col("entry_id"))
    uses_compacted = F.col("horizon").isNotNull() & (hz_pos >= F.col("_start"))

    def _deliverable(df: DataFrame) -> DataFrame:
        cols = df.columns
        marker = F.col("marker_type").isNotNull() if "marker_type" in cols else F.lit(False)
        placeholder = (
            F.coalesce(F.col("compacted_out"), F.lit(False)) if "compacted_out" in cols else F.lit(False)
        )
        return df.where(~marker & ~placeholder).select(
            *_TOPIC,
            F.col("ledger_id").cast("long").alias("ledger_id"),
            F.col("entry_id").cast("long").alias("entry_id"),
            F.col("batch_index").cast("int").alias("batch_index"),
            "key",
            F.col("payload_size_bytes").cast("long").alias("payload_size_bytes"),
        )

    from_compacted = (
        _deliverable(compacted)
        .join(st, _TOPIC, "inner")
        .where(uses_compacted & (pos >= F.col("_start")))
        .withColumn("source", F.lit("compacted"))
    )
    topic_start = F.when(uses_compacted, hz_pos).otherwise(F.col("_start"))
    # Reading the topic "from" a position includes it; after the horizon it continues at horizon.next.
    from_topic_cond = F.when(uses_compacted, pos > topic_start).otherwise(pos >= topic_start)
    from_topic = (
        _deliverable(messages)
        .join(st, _TOPIC, "inner")
        .where(from_topic_cond)
        .withColumn("source", F.lit("topic"))
    )
    both = from_compacted.unionByName(from_topic)
    order = Window.partitionBy(*_TOPIC, "reader_id").orderBy("ledger_id", "entry_id", "batch_index")
    return both.select(
        *_TOPIC,
        "reader_id",
        F.row_number().over(order).alias("read_seq"),
        "ledger_id",
        "entry_id",
        "batch_index",
        "key",
        "payload_size_bytes",
        "source",
    )


def compacted_reader_diff(messages: DataFrame, view: DataFrame, starts: DataFrame) -> DataFrame:
    """Messages a raw reader gets that the compacted reader does not (docs §5.6, §5.8 scenario 2).

    One row per ``(reader, message)``: a raw (``readCompacted=false``) reader started at the same
    ``start_position`` receives every non-marker message at or after it; the rows returned are those
    missing from ``view`` (:func:`compacted_reader_view` output for the same ``starts``), i.e. what
    compaction hides from this reader (superseded values, tombstones, dropped key-less messages).
    Columns: ``cluster, topic, reader_id, ledger_id, entry_id, batch_index, key, payload_size_bytes``.
    """
    st = starts.select(*_TOPIC, "reader_id", as_position(F.col("start_position")).alias("_start"))
    marker = F.col("marker_type").isNotNull() if "marker_type" in messages.columns else F.lit(False)
    raw = (
        messages.where(~marker)
        .select(
            *_TOPIC,
            F.col("ledger_id").cast("long").alias("ledger_id"),
            F.col("entry_id").cast("long").alias("entry_id"),
            F.col("batch_index").cast("int").alias("batch_index"),
            "key",
            F.col("payload_size_bytes").cast("long").alias("payload_size_bytes"),
        )
        .join(st, _TOPIC, "inner")
        .where(position(F.col("ledger_id"), F.col("entry_id")) >= F.col("_start"))
        .drop("_start")
    )
    ids = [*_TOPIC, "reader_id", "ledger_id", "entry_id", "batch_index"]
    return raw.join(view.select(*ids), ids, "left_anti")


def compaction_summary(
    messages: DataFrame,
    retain_null_key: bool | None = None,
    pulsar_version: VersionLike | None = DEFAULT_PULSAR_VERSION,
    start_positions: DataFrame | None = None,
    trigger: DataFrame | None = None,
    rows: DataFrame | None = None,
) -> DataFrame:
    """One row per topic with messages read by phase one: what compaction would keep and save (docs §5).

    Counts over the messages read (after the start position): ``distinct_keys`` (keys seen),
    ``live_keys`` (keys whose latest message is a value), ``tombstones`` (keyed messages with an empty or
    null value), ``tombstones_never_removed`` (those of them the compactor writes as values because their
    size includes the metadata, docs §5.4 / §12 item 16: every later compaction keeps them again),
    ``null_key_messages`` with ``null_key_kept`` / ``null_key_dropped``, ``markers``; before/after:
    ``entries_before`` / ``messages_before`` / ``payload_bytes_before`` (markers, placeholders and
    messages of aborted transactions excluded from the message, key and byte counts) and
    ``entries_after`` / ``messages_after`` / ``payload_bytes_after`` of the compacted ledger;
    ``payload_bytes_saved`` and ``savings_ratio`` (saved / before; null when nothing was read); ``failure``
    as in :func:`compaction_horizons` (a failed compaction writes and saves nothing: the after-counts and
    the savings are 0). Payload bytes are uncompressed message sizes.
    ``trigger``: :func:`compaction_trigger` output; with it the grain is one row per trigger row (every
    managed ledger), topics without messages read get zero counts; without it the trigger columns are null.
    ``rows``: :func:`compaction_rows` of the same arguments, when already computed.
    """
    rows = _compacted(messages, retain_null_key, pulsar_version, start_positions, rows)
    is_msg = ~F.col("is_marker") & ~F.col("is_aborted") & ~F.coalesce(F.col("compacted_out"), F.lit(False))
    keyless = is_msg & ~F.col("is_keyed")
    kept = F.col("written") & F.col("survives") & ~F.col("is_marker")
    keyed_empty = is_msg & F.col("is_keyed") & F.col("value_empty")

    # Keys and entries are counted on their first row (flags from phase one's windows); at most one row of
    # a key is kept (its latest, non-empty message), and ``written`` is the same for all rows of an entry.
    def total(flag: Column) -> Column:
        return F.sum(flag.cast("long"))

    joined = rows.groupBy(*_TOPIC).agg(
        total(F.col("first_of_key")).alias("distinct_keys"),
        total(keyed_empty).alias("tombstones"),
        total(keyed_empty & kept).alias("tombstones_never_removed"),
        total(keyless).alias("null_key_messages"),
        total(F.col("is_marker")).alias("markers"),
        total(F.col("first_of_entry")).alias("entries_before"),
        total(is_msg).alias("messages_before"),
        F.sum(F.when(is_msg, F.col("payload_size_bytes")).otherwise(0)).alias("payload_bytes_before"),
        total(F.col("first_of_entry") & F.col("written")).alias("entries_after"),
        total(kept).alias("messages_after"),
        F.sum(F.when(kept, F.col("payload_size_bytes")).otherwise(0)).alias("payload_bytes_after"),
        total(kept & F.col("is_keyed")).alias("live_keys"),
        total(kept & ~F.col("is_keyed")).alias("null_key_kept"),
        F.max(F.col("acks_fail").cast("int")).alias("_acks_fail"),
        F.max(_entry_and_hidden()).alias("_last_entry"),
    )
    zero = F.lit(0).cast("long")
    failure = _failure(F.col("_acks_fail") == 1, F.col("_last_entry"))
    # A failed compaction writes nothing and saves nothing.
    saved = F.when(
        failure.isNull(), F.col("payload_bytes_before") - F.coalesce(F.col("payload_bytes_after"), zero)
    ).otherwise(zero)
    summary = joined.select(
        *_TOPIC,
        "distinct_keys",
        F.coalesce(F.col("live_keys"), zero).alias("live_keys"),
        "tombstones",
        "tombstones_never_removed",
        "null_key_messages",
        F.coalesce(F.col("null_key_kept"), zero).alias("null_key_kept"),
        (F.col("null_key_messages") - F.coalesce(F.col("null_key_kept"), zero)).alias("null_key_dropped"),
        "markers",
        "entries_before",
        F.coalesce(F.col("entries_after"), zero).alias("entries_after"),
        "messages_before",
        F.coalesce(F.col("messages_after"), zero).alias("messages_after"),
        "payload_bytes_before",
        F.coalesce(F.col("payload_bytes_after"), zero).alias("payload_bytes_after"),
        saved.alias("payload_bytes_saved"),
        F.when(F.col("payload_bytes_before") > 0, saved / F.col("payload_bytes_before")).alias(
            "savings_ratio"
        ),
        failure.alias("failure"),
    )
    if trigger is not None:
        counts = [c for c in summary.columns if c not in (*_TOPIC, "savings_ratio", "failure")]
        extra = [c for c in trigger.columns if c not in summary.columns or c in _TOPIC]
        joined_trigger = trigger.select(*extra).join(summary, _TOPIC, "left")
        summary = joined_trigger.select(
            *[
                F.coalesce(F.col(c), zero).alias(c) if c in counts else F.col(c)
                for c in joined_trigger.columns
            ]
        )
    return _conform(summary, "compaction_summary")


# --- the automatic trigger (docs §5.3) ---------------------------------------------------------------------


@dataclass(frozen=True)
class CompactionThresholds:
    """Compaction thresholds in bytes (docs §5.2): topic policy > namespace policy > broker config.

    ``broker_bytes`` is ``brokerServiceCompactionThresholdInBytes`` (default 0 = automatic compaction off);
    ``namespaces`` maps ``tenant/ns`` to the namespace policy ``compaction_threshold``; ``topics`` maps a
    topic (or a partitioned topic, which covers its partitions) to the topic policy ``compactionThreshold``.
    The exports carry none of them, so they come from configuration.
    """

    broker_bytes: int = 0
    namespaces: Mapping[str, int] = field(default_factory=dict)
    topics: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def parse(
        cls,
        broker_bytes: int | str = 0,
        namespaces: Mapping[str, int | str] | None = None,
        topics: Mapping[str, int | str] | None = None,
    ) -> CompactionThresholds:
        """Validate config values (strings of integers accepted); a bad value raises :class:`ConfigError`."""

        def _int(where: str, value: int | str) -> int:
            if isinstance(value, bool):
                raise ConfigError(
                    f"{where} = {value!r} is not a byte count; write an integer, e.g. 104857600"
                )
            try:
                return int(str(value).strip())
            except ValueError:
                raise ConfigError(
                    f"{where} = {value!r} is not a byte count; write an integer, e.g. 104857600"
                ) from None

        return cls(
            broker_bytes=_int("compaction.broker_threshold_bytes", broker_bytes),
            namespaces={
                k: _int(f"compaction.namespace_thresholds.{k}", v) for k, v in (namespaces or {}).items()
            },
            topics={k: _int(f"compaction.topic_thresholds.{k}", v) for k, v in (topics or {}).items()},
        )


def trigger_rule(pulsar_version: VersionLike) -> Literal["2.x", "3.x"]:
    """Which ``checkCompaction`` the version runs (docs §5.3): the 2.x one (system topics bypass the checks
    through an operator precedence bug) or the 3.x one; flag ``compaction_trigger_3x``. The change is
    apache/pulsar#14643 (master 2022-03-14): in tags v2.10.1 and v2.11.0 and later, not in v2.8.4, v2.9.3,
    v2.9.5 or v2.10.0."""
    return "3.x" if flag("compaction_trigger_3x", pulsar_version) else "2.x"


def _lookup(mapping: Mapping[str, int], key: Column) -> Column:
    if not mapping:
        return F.lit(None).cast("long")
    literal = F.create_map(*[F.lit(x) for k, v in sorted(mapping.items()) for x in (k, v)])
    return F.element_at(literal.cast("map<string,bigint>"), key)


_EST_CURSOR = topic_rows.K_FIRST_OWN
_ESTIMATE_INPUT = topic_rows.packed_schema(topic_rows.CURSOR_FIELDS)
_ESTIMATE_OUTPUT = T.StructType(
    [
        *_ESTIMATE_INPUT.fields[:2],
        T.StructField("_has_compaction", T.BooleanType()),
        T.StructField("last_horizon", POSITION_TYPE),
        T.StructField("_compaction_estimate", T.LongType()),
        T.StructField("_backlog_estimate", T.LongType()),
    ]
)


def _trigger_estimates_fn(version: str | None) -> Callable[[pd.DataFrame], list[dict[str, Any]]]:
    """One topic's managed-ledger row, ledgers and cursors -> its two size estimates (docs §2.3, §2.5)."""

    def fn(pdf: pd.DataFrame) -> list[dict[str, Any]]:
        rows = records(pdf)
        # no managed-ledger row (no trigger row), an ambiguous one or an unknown version: no estimate
        ml, lac = topic_rows.managed_ledger_of(rows, version)
        if ml is None:
            return []
        cursors = topic_rows.cursors_in_export_order(rows, _EST_CURSOR)
        out: dict[str, Any] = {
            "_has_compaction": None,
            "last_horizon": None,
            "_compaction_estimate": None,
            "_backlog_estimate": eng.estimated_backlog(ml, cursors),  # the durable ones decide
        }
        compaction = [c for c in cursors if c.name == COMPACTION_CURSOR]
        if compaction:
            md = compaction[0].md
            estimate = None
            if md is not None:
                estimate = (
                    ml.estimate_from_position(md)
                    if lac is None
                    else ml.size_since_mark_delete(md, compaction[0].idm)
                )
            out.update(
                _has_compaction=True,
                last_horizon=topic_rows.position_struct(md),
                _compaction_estimate=estimate,
            )
        return [out]

    return fn


def _trigger_estimates(
    managed_ledgers: DataFrame, ledgers: DataFrame, cursors: DataFrame, version: str | None
) -> DataFrame:
    """One row per topic with one managed-ledger row: ``_backlog_estimate`` (``getEstimatedBacklogSize()``,
    docs §2.3) and, with a ``__compaction`` cursor, ``_has_compaction``, ``last_horizon`` (its mark-delete)
    and ``_compaction_estimate`` (its ``getEstimatedSizeSinceMarkDeletePosition()``, §2.5).

    One grouped pass per topic through the topic engine (:mod:`pulsar_model.engine.topic_engine`,
    property-tested against the oracle) over its managed-ledger row, ledgers and durable or compaction
    cursors: the set-based :func:`~pulsar_model.backlog.estimated_backlog_size` and
    :func:`~pulsar_model.backlog.estimated_size_since_mark_delete` compute the same over a ledger view whose
    plan dominated the compaction stage. ``version`` None: each managed-ledger row's ``pulsar_version``.
    """
    if version is None:
        require_version_column(managed_ledgers, "managed_ledgers")
    durable = F.coalesce(F.col("is_durable").cast("boolean"), F.lit(False))
    cur = topic_rows.tagged(
        cursors.where(durable | (F.col("cursor_name") == F.lit(COMPACTION_CURSOR))),
        _EST_CURSOR,
        topic_rows.cursor_values(),
        _ESTIMATE_INPUT,
    )
    state = topic_rows.topic_state_rows(managed_ledgers, ledgers, _ESTIMATE_INPUT, version)
    return map_groups(state.unionByName(cur), _TOPIC, _trigger_estimates_fn(version), _ESTIMATE_OUTPUT)


def compaction_trigger(
    managed_ledgers: DataFrame,
    ledgers: DataFrame,
    cursors: DataFrame,
    thresholds: CompactionThresholds | None = None,
    pulsar_version: VersionLike | None = DEFAULT_PULSAR_VERSION,
    entries: DataFrame | None = None,
) -> DataFrame:
    """Would the broker's periodic ``checkCompaction`` start a compaction now (docs §5.3)? One row per topic.

    One row per ``managed_ledgers`` row: ``threshold_bytes`` and ``threshold_source`` (topic > namespace >
    broker), ``backlog_estimate_bytes`` and ``estimate_source``: ``compaction_cursor`` (the ``__compaction``
    subscription's estimated size since its mark-delete, docs §2.5), else ``total_size`` (no durable
    subscription: ``ML.getTotalSize()``), else ``backlog_size`` (``getEstimatedBacklogSize()``, §2.3);
    ``trigger_enabled`` (3.x: threshold > 0, or a system topic outside the heartbeat namespaces; 2.8/2.9:
    a system topic or threshold != 0) and ``would_trigger`` (enabled and estimate ``>`` threshold, strict;
    assumes no compaction is running, which the export cannot show). The dirty part since the last
    horizon (the ``__compaction`` mark-delete, ``last_horizon``; everything when never compacted):
    ``dirty_entries`` / ``dirty_bytes`` from the exported ``entries`` (null without them), beside
    ``compacted_ledger_size_bytes`` (stats-internal ``compactedLedger.size``), and ``dirty_ratio`` =
    dirty / (dirty + compacted ledger bytes), null when both are 0 or unknown. Pure and lazy.
    """
    thresholds = thresholds or CompactionThresholds()
    topic = F.col("topic")
    topic_threshold = F.coalesce(
        _lookup(thresholds.topics, topic), _lookup(thresholds.topics, partitioned_topic_of(topic))
    )
    namespace_threshold = _lookup(thresholds.namespaces, namespace_of(topic))
    version = None if pulsar_version is None else str(pulsar_version)
    durable_subs = (
        cursors.where(
            (F.col("cursor_kind") == F.lit("subscription")) & F.coalesce(F.col("is_durable"), F.lit(False))
        )
        .select(*_TOPIC)
        .distinct()
        .select(*_TOPIC, F.lit(True).alias("_has_durable_subscription"))
    )
    estimates = _trigger_estimates(managed_ledgers, ledgers, cursors, version)
    trigger_cols: list[Column] = []
    source_ml = managed_ledgers
    if pulsar_version is None:
        source_ml = with_flags(managed_ledgers)
        trigger_cols = [F.col(FLAGS_COLUMN)["compaction_trigger_3x"].alias("_trigger_3x")]
    base = (
        source_ml.select(*_TOPIC, "total_size_bytes", "compacted_ledger_size_bytes", *trigger_cols)
        .join(estimates, _TOPIC, "left")
        .join(durable_subs, _TOPIC, "left")
    )
    if entries is not None:
        # One row per topic, broadcast into the entry scan: the entries are counted where they are read
        # (partial aggregation) instead of all 26M (tier l) being shuffled and sorted to meet the horizons.
        horizons = F.broadcast(base.select(*_TOPIC, "last_horizon"))
        dirty = (
            entries.join(horizons, _TOPIC, "inner")
            .where(
                F.col("last_horizon").isNull()
                | (position(F.col("ledger_id"), F.col("entry_id")) > F.col("last_horizon"))
            )
            .groupBy(*_TOPIC)
            .agg(
                F.count(F.lit(1)).alias("dirty_entries"),
                F.sum(F.col("entry_size_bytes").cast("long")).alias("dirty_bytes"),
            )
        )
        base = base.join(dirty, _TOPIC, "left").select(
            *[c for c in base.columns],
            F.coalesce(F.col("dirty_entries"), F.lit(0).cast("long")).alias("dirty_entries"),
            F.coalesce(F.col("dirty_bytes"), F.lit(0).cast("long")).alias("dirty_bytes"),
        )
    else:
        base = base.select(
            "*",
            F.lit(None).cast("long").alias("dirty_entries"),
            F.lit(None).cast("long").alias("dirty_bytes"),
        )
    has_compaction = F.coalesce(F.col("_has_compaction"), F.lit(False))
    has_durable = F.coalesce(F.col("_has_durable_subscription"), F.lit(False))
    threshold = F.coalesce(topic_threshold, namespace_threshold, F.lit(thresholds.broker_bytes).cast("long"))
    source = (
        F.when(topic_threshold.isNotNull(), F.lit("topic"))
        .when(namespace_threshold.isNotNull(), F.lit("namespace"))
        .otherwise(F.lit("broker"))
    )
    estimate = (
        F.when(has_compaction, F.col("_compaction_estimate"))
        .when(~has_durable, F.col("total_size_bytes").cast("long"))
        .otherwise(F.col("_backlog_estimate"))
    )
    estimate_source = (
        F.when(has_compaction, F.lit("compaction_cursor"))
        .when(~has_durable, F.lit("total_size"))
        .otherwise(F.lit("backlog_size"))
    )
    system = is_system_topic(topic)
    heartbeat = _any_of([namespace_of(topic).rlike(f"^(?:{p})$") for p in _HEARTBEAT_NAMESPACE_PATTERNS])
    enabled_3x = (threshold > 0) | (system & ~heartbeat)
    # 2.8/2.9: ``isSystemTopic() || threshold != 0 && notRunning`` (docs §5.3, §12 item 10)
    enabled_2x = system | (threshold != 0)
    if pulsar_version is None:
        enabled = F.when(F.coalesce(F.col("_trigger_3x"), F.lit(False)), enabled_3x).otherwise(enabled_2x)
    else:
        enabled = enabled_3x if trigger_rule(pulsar_version) == "3.x" else enabled_2x
    clean = F.coalesce(F.col("compacted_ledger_size_bytes"), F.lit(0).cast("long"))
    dirty_total = F.col("dirty_bytes") + clean
    return base.select(
        *_TOPIC,
        threshold.alias("threshold_bytes"),
        source.alias("threshold_source"),
        estimate.alias("backlog_estimate_bytes"),
        estimate_source.alias("estimate_source"),
        enabled.alias("trigger_enabled"),
        (enabled & F.coalesce(estimate > threshold, F.lit(False))).alias("would_trigger"),
        "last_horizon",
        "compacted_ledger_size_bytes",
        "dirty_entries",
        "dirty_bytes",
        F.when(dirty_total > 0, F.col("dirty_bytes") / dirty_total).alias("dirty_ratio"),
    )


def _any_of(conditions: list[Column]) -> Column:
    """OR of ``conditions`` (``False`` when empty)."""
    out = F.lit(False)
    for c in conditions:
        out = out | c
    return out


# --- the compacted ledger in the stored-entry format (docs §5.5) --------------------------------------------

#: One compacted entry as a dump record: the fields of an ``entries/`` line (README "Export layout") plus
#: the cluster, whose folder the line goes to.
COMPACTED_ENTRY_RECORD_SCHEMA = T.StructType(
    [
        T.StructField("cluster", T.StringType(), False),
        T.StructField("topic", T.StringType(), False),
        T.StructField("ledger_id", T.LongType(), False),
        T.StructField("entry_id", T.LongType(), False),
        T.StructField("data", T.StringType(), False),
    ]
)


def _encode_entry(pdf: Any) -> list[dict[str, object]]:
    """:func:`~pulsar_model.engine.grouped.map_groups` body: the slots of ONE compacted entry (sorted by batch
    index) -> its dump line's ``data`` (docs §5.5 rebatch)."""
    import base64

    import pandas as pd

    from pulsar_model.wire.codec import BatchItem, encode_batch_entry, encode_message_entry

    def _opt_int(value: Any) -> int | None:
        return None if value is None or pd.isna(value) else int(value)

    def _props(text: Any) -> dict[str, str]:
        return {} if text is None or (isinstance(text, float) and pd.isna(text)) else dict(json.loads(text))

    first = pdf.iloc[0]
    most, least = _opt_int(first["txnid_most_bits"]), _opt_int(first["txnid_least_bits"])
    replicate_to = first["replicate_to"]
    common: dict[str, Any] = {
        "producer_name": str(first["producer_name"]),
        "sequence_id": int(first["entry_sequence_id"]) % (1 << 64),
        "publish_time_ms": int(first["publish_time_ms"]),
        "replicated_from": None if pd.isna(first["replicated_from"]) else str(first["replicated_from"]),
        "replicate_to": [] if replicate_to is None else [str(x) for x in replicate_to],
        "txn_id": None if most is None or least is None else (most % (1 << 64), least % (1 << 64)),
        "compression": str(first["compression"]),
        "schema_version": None if first["schema_version"] is None else bytes(first["schema_version"]),
    }
    if bool(first["is_batch"]):
        items = []
        for row in pdf.itertuples(index=False):
            placeholder = bool(row.compacted_out)
            null_value = bool(row.is_null_value) and not placeholder
            size = 0 if placeholder or null_value else int(row.payload_size_bytes)
            items.append(
                BatchItem(
                    key=None if placeholder or row.key is None else str(row.key),
                    payload=bytes(size),
                    null_value=null_value,
                    compacted_out=placeholder,
                    properties={} if placeholder else _props(row.properties_json),
                    sequence_id=None if placeholder else _opt_int(row.sequence_id),
                    event_time_ms=None if placeholder else _opt_int(row.event_time_ms),
                    key_b64_encoded=bool(row.key_b64_encoded) and not placeholder,
                )
            )
        data = encode_batch_entry(items=items, **common)
    else:
        null_value = bool(first["is_null_value"])
        data = encode_message_entry(
            payload=bytes(0 if null_value else int(first["payload_size_bytes"])),
            key=None if first["key"] is None else str(first["key"]),
            properties=_props(first["properties_json"]),
            event_time_ms=_opt_int(first["event_time_ms"]),
            null_value=null_value,
            set_uncompressed_size=bool(first["has_uncompressed_size"]),
            key_b64_encoded=bool(first["key_b64_encoded"]),
            **common,
        )
    return [{"data": base64.b64encode(data).decode("ascii")}]


def compacted_entry_records(compacted: DataFrame, messages: DataFrame, entries: DataFrame) -> DataFrame:
    """The compacted ledger as stored entries: one row per written entry with its dump line (docs §5.5).

    ``compacted``: :func:`compacted_ledger` output; ``messages`` / ``entries``: the input tables it was
    computed from (entry metadata and per-slot metadata are copied from them). Returns
    :data:`COMPACTED_ENTRY_RECORD_SCHEMA`: ``topic, ledger_id, entry_id, data`` are the fields of an
    ``entries/`` dump line (``data``: base64 of the stored entry, CRC32C magic + ``MessageMetadata`` +
    payload) that the ingest decodes back to the same messages. A batch keeps its slot count; a slot
    that did not survive is an empty ``compacted_out`` placeholder without key (§5.5
    ``rebatchMessage``). The tables never hold payload bytes, so every payload is written as zero bytes
    of the recorded (uncompressed) size with the entry's original compression; ``compacted`` never holds a
    marker entry (docs §5.4), and marker rows are skipped should a caller pass any.
    Pure and lazy (one pass of :func:`~pulsar_model.engine.grouped.map_groups`: per-row, not per-entry, cost).
    """
    entry_key = [*_TOPIC, "ledger_id", "entry_id"]
    slot_key = [*entry_key, "batch_index"]
    slots = compacted.where(F.col("marker_type").isNull()).select(
        *slot_key, "key", "payload_size_bytes", "compacted_out"
    )
    slot_meta = messages.select(
        *slot_key,
        F.coalesce(F.col("is_null_value"), F.lit(False)).alias("is_null_value"),
        F.coalesce(F.col("key_b64_encoded"), F.lit(False)).alias("key_b64_encoded"),
        F.col("sequence_id").cast("long").alias("sequence_id"),
        F.col("event_time_ms").cast("long").alias("event_time_ms"),
        F.when(F.size(F.col("properties")) > 0, F.to_json(F.col("properties"))).alias("properties_json"),
    )
    entry_meta = entries.select(
        *entry_key,
        "producer_name",
        F.col("sequence_id").cast("long").alias("entry_sequence_id"),
        F.col("publish_time_ms").cast("long").alias("publish_time_ms"),
        "replicated_from",
        "replicate_to",
        "compression",
        "schema_version",
        F.col("txnid_most_bits").cast("long").alias("txnid_most_bits"),
        F.col("txnid_least_bits").cast("long").alias("txnid_least_bits"),
        "is_batch",
        F.col("uncompressed_size").isNotNull().alias("has_uncompressed_size"),
    )
    joined = slots.join(slot_meta, slot_key, "left").join(entry_meta, entry_key, "inner")
    return map_groups(joined, entry_key, _encode_entry, COMPACTED_ENTRY_RECORD_SCHEMA, order=["batch_index"])
