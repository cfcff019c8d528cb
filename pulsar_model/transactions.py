"""Transactions as seen in a topic's ledger: state, maxReadPosition, what consumers see (docs §8, §11.20).

From the ``entries`` table (stored entries with ``txnid_most_bits``/``txnid_least_bits``,
``marker_type``, ``position``, ``publish_time_ms`` and optionally ``message_count``) this module derives,
per topic, the end state of the transaction buffer (docs §8.4) as it stands after the last exported
entry:

* :func:`transaction_states` – one row per transaction: committed (marker 21), aborted (22) or open,
  first/last data position, messages, duration;
* :func:`max_read_positions` – the broker's ``maxReadPosition`` per topic (the position before the first
  message of the oldest open transaction, else the last entry) and what it holds back;
* :func:`transaction_visibility` – one row per entry: delivered, held back, or skipped at dispatch
  (transaction markers, aborted messages, other markers; docs §8.5);
* :func:`long_open_transactions` – open transactions older than a threshold at an injected "now".

Everything is set-based (aggregations and joins): no per-topic Python, nothing on the driver.
The oldest open transaction is the one whose first message comes first: the broker's ``ongoing`` map is
insertion ordered and a transaction is inserted at its first message, which is appended in position order.
Assumed (not modelled): the buffer is ``Ready`` (other states make ``getMaxReadPosition`` EARLIEST), no
append arrives for an already-ended transaction, and no low-watermark abort is pending.

"The position before" depends on the broker line and on what set it last (docs §8.4): up to 3.0.2 and
3.1.2 the buffer takes ``(L, E-1)`` of the first message ``(L, E)``, which is ``(L, -1)`` when that
message opens its ledger; from 3.0.3, 3.1.3, 3.2.1 and every 3.3+ it asks the managed ledger for
``getPreviousPosition`` (docs §1.3), the last entry of the newest earlier non-empty ledger. 3.2.0 does
both: a transaction's first message (``handleTransactionMessage``) writes ``(L, E-1)``, a commit or abort
(``updateMaxReadPosition``) ``getPreviousPosition``, so its value follows the topic's last transaction
event (:func:`max_read_uses_previous_position`).
"""

from __future__ import annotations

from typing import Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pulsar_model import DEFAULT_PULSAR_VERSION
from pulsar_model.domain.versions import VersionLike, flag
from pulsar_model.engine.columns import as_position, position
from pulsar_model.engine.flags import FLAGS_COLUMN, with_flags
from pulsar_model.errors import ContractError
from pulsar_model.positions import previous_position

__all__ = [
    "DISPATCH_DELIVERED",
    "DISPATCH_HELD_BACK",
    "DISPATCH_SKIPPED_ABORTED",
    "DISPATCH_SKIPPED_MARKER",
    "DISPATCH_SKIPPED_TXN_MARKER",
    "long_open_transactions",
    "max_read_positions",
    "max_read_uses_previous_position",
    "transaction_states",
    "transaction_visibility",
]

#: ``MarkerType`` values of transaction markers (docs §8.3): written once per touched partition on end.
TXN_COMMITTING: Final = 20
TXN_COMMIT: Final = 21
TXN_ABORT: Final = 22
TXN_MARKER_TYPES: Final = (TXN_COMMITTING, TXN_COMMIT, TXN_ABORT)

STATE_COMMITTED: Final = "committed"
STATE_ABORTED: Final = "aborted"
STATE_OPEN: Final = "open"

#: Dispatch outcome of an entry (docs §8.4 read limit, §8.5 filtering).
DISPATCH_DELIVERED: Final = "delivered"
DISPATCH_HELD_BACK: Final = "held_back"
DISPATCH_SKIPPED_TXN_MARKER: Final = "skipped_txn_marker"
DISPATCH_SKIPPED_ABORTED: Final = "skipped_aborted"
DISPATCH_SKIPPED_MARKER: Final = "skipped_marker"

REQUIRED_COLUMNS: Final = (
    "cluster",
    "topic",
    "position",
    "txnid_most_bits",
    "txnid_least_bits",
    "marker_type",
)
EXPORT_KEYS: Final = ("export_id", "export_date")
TXN_KEY: Final = ("txnid_most_bits", "txnid_least_bits")

#: The two places of ``TopicTransactionBuffer`` that set ``maxReadPosition`` in front of the oldest open
#: transaction, each with its flag (versions.py): a transaction's first message
#: (``handleTransactionMessage``, apache/pulsar#22024) and a commit or abort (``updateMaxReadPosition``,
#: apache/pulsar#21466). Release tags: both ``(L, E-1)`` up to v3.0.2 / v3.1.2 and in every 2.x; both
#: ``getPreviousPosition`` from v3.0.3, v3.1.3, v3.2.1 and v3.3.0; v3.2.0 has #21466 only.
ON_FIRST_MESSAGE: Final = "max_read_previous_position_on_append"
ON_TXN_END: Final = "max_read_previous_position_on_end"


def max_read_uses_previous_position(version: VersionLike, *, after_txn_end: bool = False) -> bool:
    """True when the transaction buffer puts ``maxReadPosition`` at ``getPreviousPosition`` of the oldest
    open transaction's first message; False when it takes ``(L, E-1)`` of that message (docs §8.4).

    ``after_txn_end``: the rule of ``updateMaxReadPosition`` (a commit or abort marker was the last
    transaction event) instead of ``handleTransactionMessage`` (a transaction's first message was). The
    two differ in 3.2.0 only. Evidence: ``TopicTransactionBuffer`` at every release tag from v2.10.0 to
    v4.0.6 (``getEntryId() - 1`` or ``getPreviousPosition`` at both places).
    """
    return flag(ON_TXN_END if after_txn_end else ON_FIRST_MESSAGE, version)


def _keys(entries: DataFrame) -> list[str]:
    missing = [c for c in REQUIRED_COLUMNS if c not in entries.columns]
    if missing:
        raise ContractError(
            f"entries is missing column(s) {', '.join(missing)}; "
            f"it needs at least {', '.join(REQUIRED_COLUMNS)}"
        )
    return ["cluster", "topic", *[k for k in EXPORT_KEYS if k in entries.columns]]


def _normalised(entries: DataFrame, keys: list[str], per_row: bool = False) -> DataFrame:
    """The entry columns this module reads, typed; ``message_count`` defaults to 1 per entry. ``per_row``
    adds ``_prev_on_append`` / ``_prev_on_end``: :func:`max_read_uses_previous_position` of each entry's
    ``pulsar_version``."""
    version: list[Column] = []
    if per_row:
        if "pulsar_version" not in entries.columns:
            raise ContractError(
                "pulsar_version=None reads entries.pulsar_version (each entry's cluster version), which "
                "entries does not have: add the column or pass a version string such as '4.1.3'"
            )
        entries = with_flags(entries)
        version = [
            F.coalesce(F.col(FLAGS_COLUMN)[name], F.lit(False)).alias(alias)
            for name, alias in ((ON_FIRST_MESSAGE, "_prev_on_append"), (ON_TXN_END, "_prev_on_end"))
        ]
    count = (
        F.coalesce(F.col("message_count").cast("long"), F.lit(1).cast("long"))
        if "message_count" in entries.columns
        else F.lit(1).cast("long")
    )
    publish = F.col("publish_time_ms").cast("long") if "publish_time_ms" in entries.columns else F.lit(None)
    marker = F.col("marker_type").cast("int")
    has_txn = F.col("txnid_most_bits").isNotNull() & F.col("txnid_least_bits").isNotNull()
    return entries.select(
        *keys,
        as_position(F.col("position")).alias("position"),
        F.col("txnid_most_bits").cast("long").alias("txnid_most_bits"),
        F.col("txnid_least_bits").cast("long").alias("txnid_least_bits"),
        marker.alias("marker_type"),
        publish.cast("long").alias("publish_time_ms"),
        count.alias("message_count"),
        (has_txn & marker.isin(*TXN_MARKER_TYPES)).alias("_is_txn_marker"),
        (has_txn & marker.isNull()).alias("_is_txn_data"),
        *version,
    )


def _txn_text(most: Column, least: Column) -> Column:
    """``TxnID.toString()``: ``"(" + most + "," + least + ")"`` (docs §8.2)."""
    return F.concat(F.lit("("), most.cast("string"), F.lit(","), least.cast("string"), F.lit(")"))


def transaction_states(entries: DataFrame) -> DataFrame:
    """Every transaction seen in each topic and its state (docs §8.2, §8.3).

    One row per (cluster, topic[, export], txnid_most_bits, txnid_least_bits): ``txn_id`` text,
    ``state`` (``committed`` = a TXN_COMMIT marker, ``aborted`` = TXN_ABORT, else ``open``; the first end
    marker wins), ``first_position``/``last_position`` of its data entries (null when the topic holds only
    its marker), ``end_marker_position``, ``entry_count``/``message_count`` of data,
    ``first_publish_time_ms``, ``last_publish_time_ms``, ``end_publish_time_ms`` and ``duration_ms``
    (end marker publish time minus first message publish time; null while open). Pure and lazy.
    """
    keys = _keys(entries)
    e = _normalised(entries, keys).where(F.col("_is_txn_data") | F.col("_is_txn_marker"))
    data = F.col("_is_txn_data")
    ends = F.col("_is_txn_marker") & F.col("marker_type").isin(TXN_COMMIT, TXN_ABORT)
    end = F.min(F.when(ends, F.struct("position", "marker_type", "publish_time_ms")))
    agg = e.groupBy(*keys, *TXN_KEY).agg(
        F.min(F.when(data, F.col("position"))).alias("first_position"),
        F.max(F.when(data, F.col("position"))).alias("last_position"),
        F.count(F.when(data, F.lit(1))).alias("entry_count"),
        F.coalesce(F.sum(F.when(data, F.col("message_count"))), F.lit(0)).cast("long").alias("message_count"),
        F.min(F.when(data, F.col("publish_time_ms"))).alias("first_publish_time_ms"),
        F.max(F.when(data, F.col("publish_time_ms"))).alias("last_publish_time_ms"),
        end.alias("_end"),
    )
    state = (
        F.when(F.col("_end.marker_type") == TXN_COMMIT, F.lit(STATE_COMMITTED))
        .when(F.col("_end.marker_type") == TXN_ABORT, F.lit(STATE_ABORTED))
        .otherwise(F.lit(STATE_OPEN))
    )
    return agg.select(
        *keys,
        *TXN_KEY,
        _txn_text(F.col("txnid_most_bits"), F.col("txnid_least_bits")).alias("txn_id"),
        state.alias("state"),
        "first_position",
        "last_position",
        F.col("_end.position").alias("end_marker_position"),
        "entry_count",
        "message_count",
        "first_publish_time_ms",
        "last_publish_time_ms",
        F.col("_end.publish_time_ms").alias("end_publish_time_ms"),
        (F.col("_end.publish_time_ms") - F.col("first_publish_time_ms")).alias("duration_ms"),
    )


def _previous_from_entries(targets: DataFrame, e: DataFrame, keys: list[str]) -> DataFrame:
    """``getPreviousPosition`` (docs §1.3) of ``_first_open`` using only the exported entries.

    ``(L, E-1)`` when ``E > 0``; else the last exported entry before ``(L, 0)``, ``(L, -1)`` when none.
    Exact when the export holds every entry of the ledgers before ``L`` that still exist.
    """
    before = (
        targets.where(F.col("_first_open").isNotNull())
        .select(*keys, "_first_open")
        .join(e.select(*keys, F.col("position").alias("_p")), on=keys)
        .where(F.col("_p") < position(F.col("_first_open.ledger_id"), F.lit(0)))
        .groupBy(*keys)
        .agg(F.max("_p").alias("_last_before"))
    )
    first = F.col("_first_open")
    prev = (
        F.when(first.isNull(), F.lit(None))
        .when(first["entry_id"] > 0, position(first["ledger_id"], first["entry_id"] - 1))
        .otherwise(F.coalesce(F.col("_last_before"), position(first["ledger_id"], F.lit(-1))))
    )
    return targets.join(before, on=keys, how="left").select(*targets.columns, prev.alias("_prev_open"))


def _previous_from_ledgers(
    targets: DataFrame, keys: list[str], ledgers: DataFrame, managed_ledgers: DataFrame
) -> DataFrame:
    """``getPreviousPosition`` via :func:`pulsar_model.positions.previous_position` (docs §1.3)."""
    requests = targets.select(
        *keys, F.lit("txn").alias("request_id"), F.col("_first_open").alias("position")
    ).where(F.col("position").isNotNull())
    prev = previous_position(requests, ledgers, managed_ledgers).select(
        *keys, F.col("previous_position").alias("_prev_open")
    )
    return targets.join(prev, on=keys, how="left")


def _previous_by_entry_id(targets: DataFrame) -> DataFrame:
    """``(L, E-1)`` of ``_first_open``: the buffer's own arithmetic before PR #22024 (docs §8.4)."""
    first = F.col("_first_open")
    prev = F.when(first.isNotNull(), position(first["ledger_id"], first["entry_id"] - 1))
    return targets.select("*", prev.alias("_prev_open"))


def _limits(
    e: DataFrame,
    keys: list[str],
    txns: DataFrame,
    ledgers: DataFrame | None,
    managed_ledgers: DataFrame | None,
    pulsar_version: VersionLike | None,
) -> DataFrame:
    """One row per topic: last position, open transactions, ``max_read_position`` (docs §8.4).

    The rule is the one of the topic's last transaction event: a commit or abort marker after every
    transaction's first message means ``updateMaxReadPosition`` set the value last, else
    ``handleTransactionMessage`` did (its flags per row when ``pulsar_version`` is None)."""
    # one aggregation over the transactions: the oldest open one, and the newest first message (which
    # of the buffer's two places wrote the value last, see below)
    is_open = (F.col("state") == STATE_OPEN) & F.col("first_position").isNotNull()
    txn_summary = txns.groupBy(*keys).agg(
        F.count(F.when(is_open, F.lit(1))).alias("open_txn_count"),
        F.min(F.when(is_open, F.struct("first_position", "txn_id"))).alias("_oldest"),
        F.max("first_position").alias("_last_first"),
    )
    per_row = pulsar_version is None
    if per_row:
        flag_aggs = [F.bool_or(c).alias(c) for c in ("_prev_on_append", "_prev_on_end")]
        on_append, on_end = F.col("_prev_on_append"), F.col("_prev_on_end")
        mixed, entry_id_only = True, False
    else:
        assert pulsar_version is not None
        append_prev = max_read_uses_previous_position(pulsar_version)
        end_prev = max_read_uses_previous_position(pulsar_version, after_txn_end=True)
        flag_aggs, on_append, on_end = [], F.lit(append_prev), F.lit(end_prev)
        mixed, entry_id_only = append_prev != end_prev, not (append_prev or end_prev)
    per_topic = e.groupBy(*keys).agg(
        F.max("position").alias("last_position"),
        *(
            [F.max(F.when(F.col("_is_txn_marker"), F.col("position"))).alias("_last_end"), *flag_aggs]
            if mixed
            else []
        ),
    )
    # a commit/abort marker after every transaction's first message: updateMaxReadPosition wrote the
    # value last, else handleTransactionMessage did
    after_end = F.col("_last_end").isNotNull() & (
        F.col("_last_first").isNull() | (F.col("_last_end") > F.col("_last_first"))
    )
    targets = per_topic.join(txn_summary, on=keys, how="left").select(
        *keys,
        "last_position",
        *([F.when(after_end, on_end).otherwise(on_append).alias("_uses_prev")] if mixed else []),
        F.coalesce(F.col("open_txn_count"), F.lit(0)).cast("long").alias("open_txn_count"),
        F.col("_oldest.txn_id").alias("oldest_open_txn_id"),
        F.col("_oldest.first_position").alias("_first_open"),
    )
    nothing_open = F.col("last_position")
    with_ledgers = ledgers is not None and managed_ledgers is not None
    if entry_id_only:
        targets = _previous_by_entry_id(targets)
    elif with_ledgers:
        assert ledgers is not None and managed_ledgers is not None
        targets = _previous_from_ledgers(targets, keys, ledgers, managed_ledgers)
    else:
        targets = _previous_from_entries(targets, e, keys)
    if mixed:  # (L, E-1) where the topic's rule is the older one
        first = F.col("_first_open")
        by_entry_id = F.when(first.isNotNull(), position(first["ledger_id"], first["entry_id"] - 1))
        chosen = F.when(F.col("_uses_prev"), F.col("_prev_open")).otherwise(by_entry_id)
        targets = targets.select(
            *[c for c in targets.columns if c != "_prev_open"], chosen.alias("_prev_open")
        )
    if with_ledgers:
        assert managed_ledgers is not None
        # "maxReadPosition = LAC if ongoing empty" (docs §8.4): the LAC, when the topic's row has one
        ml_keys = [k for k in keys if k in managed_ledgers.columns]
        lac = managed_ledgers.select(*ml_keys, as_position(F.col("last_confirmed_entry")).alias("_lac"))
        targets = targets.join(lac, on=ml_keys, how="left")
        nothing_open = F.coalesce(F.col("_lac"), F.col("last_position"))
    summary = targets.select(
        *keys,
        "last_position",
        "open_txn_count",
        "oldest_open_txn_id",
        F.col("_first_open").alias("oldest_open_first_position"),
        F.when(F.col("_first_open").isNull(), nothing_open)
        .otherwise(F.col("_prev_open"))
        .alias("max_read_position"),
    )
    return summary


def max_read_positions(
    entries: DataFrame,
    ledgers: DataFrame | None = None,
    managed_ledgers: DataFrame | None = None,
    pulsar_version: VersionLike | None = DEFAULT_PULSAR_VERSION,
) -> DataFrame:
    """The transaction buffer's ``maxReadPosition`` per topic and what it holds back (docs §8.4, §8.5).

    One row per (cluster, topic[, export]) present in ``entries``:

    * ``last_position``: the last exported entry (LAC when the export is complete);
    * ``open_txn_count``, ``oldest_open_txn_id`` and ``oldest_open_first_position``;
    * ``max_read_position`` = the position before ``oldest_open_first_position`` while a transaction is
      open, else the LAC (``managed_ledgers.last_confirmed_entry`` when given, else ``last_position``: a
      normal append or a commit/abort with nothing ongoing moves it to the newest entry). "Before" follows
      ``pulsar_version`` and the topic's last transaction event (:func:`max_read_uses_previous_position`):
      ``(L, E-1)`` on the older lines, else ``getPreviousPosition``, which uses ``ledgers`` /
      ``managed_ledgers`` when given (exact, docs §1.3, via :mod:`pulsar_model.positions`; null when the
      topic has no managed-ledger row), else the exported entries (see :func:`_previous_from_entries`).
      The ledger map is the export's: a ledger trimmed after the oldest open transaction became the
      oldest is not seen as the broker saw it;
    * ``held_back_entries``/``held_back_messages``: entries after ``max_read_position`` (transactional or
      not) that no dispatcher or replicator reads yet;
    * ``aborted_entries_skipped``/``aborted_messages_skipped``: data of aborted transactions at or before
      ``max_read_position`` that dispatchers ack and drop;
    * ``txn_marker_entries``: transaction markers (auto-acked, but counted in backlog until read).

    Pure and lazy.
    """
    keys = _keys(entries)
    e = _normalised(entries, keys, per_row=pulsar_version is None)
    txns = transaction_states(entries)
    summary = _limits(e, keys, txns, ledgers, managed_ledgers, pulsar_version)
    # the topic's summary rides on its entries through the classification and out of the aggregate (one
    # value per topic): the summary is planned once, not once for the classification and once more for a
    # join back (every topic of the summary has entries, so none is lost)
    carried = [c for c in summary.columns if c not in keys]
    visible = _classify(e, keys, summary, txns)
    return visible.groupBy(*keys).agg(
        *[F.max(c).alias(c) for c in carried],  # one value per topic: max is that value
        F.count(F.when(F.col("dispatch") == DISPATCH_HELD_BACK, 1)).alias("held_back_entries"),
        F.coalesce(F.sum(F.when(F.col("dispatch") == DISPATCH_HELD_BACK, F.col("message_count"))), F.lit(0))
        .cast("long")
        .alias("held_back_messages"),
        F.count(F.when(F.col("dispatch") == DISPATCH_SKIPPED_ABORTED, 1)).alias("aborted_entries_skipped"),
        F.coalesce(
            F.sum(F.when(F.col("dispatch") == DISPATCH_SKIPPED_ABORTED, F.col("message_count"))), F.lit(0)
        )
        .cast("long")
        .alias("aborted_messages_skipped"),
        F.count(F.when(F.col("_is_txn_marker"), 1)).alias("txn_marker_entries"),
    )


def _classify(e: DataFrame, keys: list[str], limits: DataFrame, txns: DataFrame) -> DataFrame:
    states = txns.select(*keys, *TXN_KEY, F.col("state").alias("txn_state"))
    joined = e.join(limits, on=keys, how="left").join(states, on=[*keys, *TXN_KEY], how="left")
    dispatch = (
        F.when(
            F.col("max_read_position").isNull() | (F.col("position") > F.col("max_read_position")),
            F.lit(DISPATCH_HELD_BACK),
        )
        .when(F.col("_is_txn_marker"), F.lit(DISPATCH_SKIPPED_TXN_MARKER))
        .when(F.col("_is_txn_data") & (F.col("txn_state") == STATE_ABORTED), F.lit(DISPATCH_SKIPPED_ABORTED))
        .when(F.col("marker_type").isNotNull(), F.lit(DISPATCH_SKIPPED_MARKER))
        .otherwise(F.lit(DISPATCH_DELIVERED))
    )
    return joined.select("*", dispatch.alias("dispatch"))


def transaction_visibility(
    entries: DataFrame,
    ledgers: DataFrame | None = None,
    managed_ledgers: DataFrame | None = None,
    pulsar_version: VersionLike | None = DEFAULT_PULSAR_VERSION,
) -> DataFrame:
    """What a (non-``__compaction``) consumer gets from each entry now (docs §8.4, §8.5, golden §8.7).

    One row per entry: ``cluster, topic[, export], position, txnid_most_bits, txnid_least_bits,
    marker_type, message_count, txn_id`` (null for non-transactional entries), ``txn_state`` and
    ``dispatch``: ``held_back`` (after ``max_read_position``, or the topic's position is unknown),
    ``skipped_txn_marker`` (markers 20-22: acked and dropped), ``skipped_aborted`` (data of an aborted
    transaction: acked and dropped), ``skipped_marker`` (other markers, e.g. replicated-subscription
    snapshots: acked and dropped) or ``delivered``; plus the topic's ``max_read_position`` (by
    ``pulsar_version``, see :func:`max_read_positions`). Pure and lazy.
    """
    keys = _keys(entries)
    e = _normalised(entries, keys, per_row=pulsar_version is None)
    txns = transaction_states(entries)
    limits = _limits(e, keys, txns, ledgers, managed_ledgers, pulsar_version)
    limits = limits.select(*keys, "max_read_position")
    out = _classify(e, keys, limits, txns)
    has_txn = F.col("txnid_most_bits").isNotNull() & F.col("txnid_least_bits").isNotNull()
    return out.select(
        *keys,
        "position",
        *TXN_KEY,
        "marker_type",
        "message_count",
        F.when(has_txn, _txn_text(F.col("txnid_most_bits"), F.col("txnid_least_bits"))).alias("txn_id"),
        "txn_state",
        "dispatch",
        "max_read_position",
    )


def long_open_transactions(txn_states: DataFrame, now_ms: int, threshold_ms: int) -> DataFrame:
    """Open transactions whose first message is more than ``threshold_ms`` older than ``now_ms`` (§8.4).

    ``txn_states`` is the output of :func:`transaction_states`; "now" is injected for determinism. One row
    per such transaction (the :func:`transaction_states` columns) plus ``open_age_ms``. Pure and lazy.
    """
    age = F.lit(int(now_ms)) - F.col("first_publish_time_ms")
    return (
        txn_states.where(F.col("state") == STATE_OPEN)
        .select("*", age.alias("open_age_ms"))
        .where(F.col("open_age_ms") > F.lit(int(threshold_ms)))
    )
