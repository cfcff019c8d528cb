"""What-if backlog-quota eviction: what ``consumer_backlog_eviction`` does to each cursor (docs §3.5-§3.8).

* :func:`drop_backlog_for_size_limit` - ``BacklogQuotaManager.dropBacklogForSizeLimit`` (§3.6);
* :func:`drop_backlog_for_time_limit` - ``dropBacklogForTimeLimit`` (§3.7), precise (message expiry of every
  subscription with ``findNewestMatching``) or non-precise (whole ledgers by close timestamp).

Both loops are sequential (each skip changes the slowest cursor and the estimate the next step reads), so
they run per ``(cluster, topic)`` inside one ``groupBy(...).applyInArrow`` call: every input is projected to
a tagged row of one union (one shuffle), the groups are hash buckets of topics whose rows arrive sorted by
topic (a group per topic costs milliseconds of Python-worker overhead each; 10,000+ topics would take
minutes), and every topic is evaluated alone by the plain-Python managed-ledger engine of
:mod:`pulsar_model.engine.topic_engine` (docs §1/§2 arithmetic with the same version switches as
:mod:`pulsar_model.positions` and :mod:`pulsar_model.backlog`). Messages and bytes lost are added afterwards,
set-based, from the ``entries`` table when it is given.

Decisions (see the function docstrings):

* ``entries`` of the toSkip formula is the NON-precise backlog ``entriesAddedCounter -
  messagesConsumedCounter`` (§1.8) when both counters were exported (``counter="auto"``), the precise count
  otherwise or when that difference is negative; each skip adds what it consumed to the cursor's counter;
* the slowest cursor is the root of the broker's cursor heap (docs §3.9), replayed with its sift rules from a
  heap built in export order (``cursor_order``): after a skip that lands a cursor on the position of others
  it can stay at the root. The broker's own heap was built in recovery order and reshaped by every
  mark-delete since the topic was loaded, which no export carries: a tie at any pick sets
  ``slowest_tie_ambiguous``;
* the non-precise time loop needs ledger close times (``ledgers.closed_at``), which ``stats-internal`` does
  not export: a closed ledger without one stops the loop with ``unknown_close_time`` and ``undecidable``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from pulsar_model import DEFAULT_PULSAR_VERSION
from pulsar_model.backlog_exact import request_totals
from pulsar_model.domain.versions import Behaviour, VersionLike, behaviour, flag
from pulsar_model.engine import topic_engine as eng
from pulsar_model.engine.topic_rows import acked_ranges_struct, engine_position, position_struct
from pulsar_model.errors import ConfigError
from pulsar_model.quota.policy import QUOTA_TYPE_SIZE, QUOTA_TYPE_TIME

__all__ = [
    "COUNTER_AUTO",
    "COUNTER_PRECISE",
    "DEFAULT_TRACE_MAX_ITERATIONS",
    "STOP_REASONS",
    "drop_backlog_for_size_limit",
    "drop_backlog_for_time_limit",
    "eviction_losses",
    "expiry_checks_ledger_close_time",
    "expiry_skips_unclosed_ledgers",
    "is_system_cursor_name",
    "size_eviction_uses_long_target",
    "time_limit_compared_as_millis",
    "time_limit_millis_overflow_int",
]

KEY = ("cluster", "topic")

#: ``counter`` values: the non-precise counter when exported (``auto``) or always the precise count.
COUNTER_AUTO = "auto"
COUNTER_PRECISE = "precise"

#: Loop steps kept in the trace per topic and quota type (config ``quota.trace_max_iterations``): a loop can
#: make millions of steps (the non-precise time loop moves one cursor one ledger per step); the end state
#: and ``iteration_count`` always cover all of them, ``trace_truncated`` says when the trace does not.
DEFAULT_TRACE_MAX_ITERATIONS = 100_000

#: Why the loop of a topic ended (docs §3.6/§3.7 break conditions, plus what this model adds).
STOP_REASONS = {
    "below_target": "§3.6: the estimate is no longer above the target",
    "no_cursor": "no durable cursor (getSlowestConsumer() is null)",
    "same_cursor": "§3.6: the slowest cursor is the one skipped last ('Cursors not progressing')",
    "zero_skip": "§3.6: toSkip truncated to 0",
    "quota_disabled": "no limit, or a limit that disables the quota (size < 0, time <= 0)",
    "error": "the broker code throws and leaves the loop (see error)",
    "not_expired": "§3.7: the slowest cursor's ledger is not older than the limit",
    "open_ledger": "§3.7: the slowest cursor is in the open ledger (timestamp 0, never expires)",
    "unknown_close_time": "§3.7: the ledger's close time was not exported (undecidable)",
    "no_next_ledger": "§3.7: no ledger after the slowest cursor's (NullPointerException in the broker)",
}

#: Cursor kinds of the ``cursors`` contract; ``subscription``, ``reader`` and ``compaction`` cursors belong to
#: PersistentTopic's subscription map (``__compaction`` is a CompactorSubscription), replicators and the
#: dedup cursor are opened on the managed ledger directly (docs §3.7, §1.11).
SUBSCRIPTION_MAP_KINDS = frozenset({"subscription", "reader", "compaction"})
#: Replicator cursor names: ``<replicatorPrefix>.<remote cluster>`` (default prefix, docs §1.11, §10.2).
REPLICATOR_PREFIX = "pulsar.repl."
#: Topic compaction's durable subscription (docs §1.11, §5).
COMPACTION_CURSOR = "__compaction"
#: Message deduplication's cursor (docs §1.11).
DEDUP_CURSOR = "pulsar.dedup"


# --- version predicates (docs §3.6, §3.7) ---------------------------------------------------------------


def size_eviction_uses_long_target(version: VersionLike) -> bool:
    """``computeEvictionTarget`` = ``(long) (0.9 * limit)`` and ``computeEntriesToEvict`` =
    ``(int) ((backlog - target) * (double) entries / backlog)``; older releases keep a double target and
    ``(int) ((backlog - target) / backlog * entries)`` (docs §3.6; apache/pulsar@fddc44f vs lhotari@2537ffc).

    apache/pulsar#25624 (merged to master 2026-04-30, first in 4.3.0): absent from every release tag up to
    v4.0.6 and v3.3.8 and from the 4.0.10, 4.1.x and 4.2.1 release notes; listed in those of 4.0.11 and
    4.2.2, the first patches of their lines carrying it.
    """
    return flag("size_eviction_long_target", version)


def time_limit_millis_overflow_int(version: VersionLike) -> bool:
    """The non-precise time loop compares with ``limitTime * 1000`` computed in 32-bit ints instead of
    ``SECONDS.toMillis(limitTime)``: a limit above 2,147,483 s (~24.8 days) wraps around.

    Fixed by apache/pulsar#21816 (master 2024-01-17, first in 3.3.0) and on branch-3.0 by #22740 (3.0.6):
    ``BacklogQuotaManager`` at tag v3.0.5 multiplies, v3.0.6 and v3.3.0 call ``toMillis``, v3.1.3 and
    v3.2.4 still multiply (no 3.1/3.2 back-port).
    """
    return flag("time_limit_millis_int_overflow", version)


def time_limit_compared_as_millis(version: VersionLike) -> bool:
    """The non-precise time loop compares ``now - closeTime`` (ms) with ``limitTime`` in seconds, with no
    conversion, so a ledger expires once it is ``limitTime`` *milliseconds* old.

    apache/pulsar#17957 added the ``* 1000``: the raw comparison is at tags v2.8.0-v2.8.4, v2.9.0-v2.9.3,
    v2.10.0-v2.10.2 and v2.11.0; the multiplication at v2.9.4, v2.10.3, v2.11.1 and v3.0.0.
    """
    return flag("time_limit_compared_as_millis", version)


def expiry_checks_ledger_close_time(version: VersionLike) -> bool:
    """``expireMessages`` first mark-deletes whole ledgers whose close time is older than the TTL
    (``PersistentMessageExpiryMonitor.checkExpiryByLedgerClosureTime``, apache/pulsar#21940): in the release
    tags v3.0.3 (branch-3.0 cherry-pick #22211), v3.1.3, v3.2.1 and v3.3.0+, in no 2.10.x or 2.11.x tag
    (docs §3.7, correction).
    """
    return flag("expiry_checks_ledger_close_time", version)


def expiry_skips_unclosed_ledgers(version: VersionLike) -> bool:
    """The ledger-closure step stops at a ledger whose LedgerInfo timestamp is 0 - the open ledger
    (apache/pulsar#22335: tags v3.0.4, v3.2.2, v3.3.0+; not 3.1.x). Before it, on the versions with
    :func:`expiry_checks_ledger_close_time` (3.0.3, 3.1.3, 3.2.1), timestamp 0 counts as expired: when every
    closed ledger from the mark-delete's on has expired, the step reaches the open ledger, whose LedgerInfo
    says 0 entries, and mark-deletes ``(open ledger, -1)`` (LAC when that is earlier)."""
    return flag("expiry_skips_unclosed_ledgers", version)


def is_system_cursor_name(name: str) -> bool:
    """Replicator (``pulsar.repl.*``), ``__compaction`` and ``pulsar.dedup`` cursors (docs §1.11, §3.6)."""
    return name.startswith(REPLICATOR_PREFIX) or name in (COMPACTION_CURSOR, DEDUP_CURSOR)


def _kind_from_name(name: str, durable: bool) -> str:
    if name.startswith(REPLICATOR_PREFIX) and len(name) > len(REPLICATOR_PREFIX):
        return "replicator"
    if name == COMPACTION_CURSOR:
        return "compaction"
    if name == DEDUP_CURSOR:
        return "dedup"
    return "subscription" if durable else "reader"


# --- schemas -------------------------------------------------------------------------------------------

POSITION = T.StructType([T.StructField("ledger_id", T.LongType()), T.StructField("entry_id", T.LongType())])
IDM = T.ArrayType(T.StructType([T.StructField("lower", POSITION), T.StructField("upper", POSITION)]))

_PACKED_FIELDS: list[tuple[str, T.DataType]] = [
    ("k", T.IntegerType()),
    ("m_cur", T.LongType()),
    ("m_cle", T.LongType()),
    ("m_cls", T.LongType()),
    ("m_lac", POSITION),
    ("m_total", T.LongType()),
    ("m_eac", T.LongType()),
    ("m_now", T.LongType()),
    ("m_ver", T.StringType()),  # the topic's broker version (pulsar_version=None)
    ("l_id", T.LongType()),
    ("l_ent", T.LongType()),
    ("l_sz", T.LongType()),
    ("l_closed", T.LongType()),
    ("c_name", T.StringType()),
    ("c_order", T.LongType()),
    ("c_durable", T.BooleanType()),
    ("c_kind", T.StringType()),
    ("c_md", POSITION),
    ("c_idm", IDM),
    ("c_mcc", T.LongType()),
    ("q_limit", T.LongType()),
    ("q_run", T.IntegerType()),  # which eviction a limit row asks for (one pass, several runs)
    ("e_pos", POSITION),
    ("e_ts", T.LongType()),
]
_K_ML, _K_LEDGER, _K_CURSOR, _K_LIMIT, _K_ENTRY = 0, 1, 2, 3, 4
#: The evictions one grouped pass can run per topic (``q_run`` of a limit row), in evaluation order.
_RUN_SIZE, _RUN_TIME, _RUN_TIME_PRECISE = 0, 1, 2


def _f(name: str, dtype: T.DataType) -> T.StructField:
    return T.StructField(name, dtype, True)


SIZE_STEP = T.StructType(
    [
        _f("iteration", T.IntegerType()),
        _f("cursor_name", T.StringType()),
        _f("mark_delete_before", POSITION),
        _f("backlog_before", T.LongType()),
        _f("entries_counter", T.LongType()),
        _f("entries_source", T.StringType()),
        _f("to_skip", T.LongType()),
        _f("mark_delete_after", POSITION),
        _f("skipped_entries", T.LongType()),
        _f("backlog_after", T.LongType()),
        _f("slowest_tie", T.BooleanType()),
        _f("error", T.StringType()),
    ]
)
TIME_STEP = T.StructType(
    [
        _f("iteration", T.IntegerType()),
        _f("cursor_name", T.StringType()),
        _f("mark_delete_before", POSITION),
        _f("ledger_id", T.LongType()),
        _f("ledger_closed_at", T.TimestampType()),
        _f("action", T.StringType()),
        _f("mark_delete_after", POSITION),
        _f("skipped_entries", T.LongType()),
        _f("slowest_tie", T.BooleanType()),
        _f("error", T.StringType()),
    ]
)

_CURSOR_FIELDS = [
    _f("cluster", T.StringType()),
    _f("topic", T.StringType()),
    _f("cursor_name", T.StringType()),
    _f("cursor_order", T.LongType()),
    _f("cursor_kind", T.StringType()),
    _f("is_durable", T.BooleanType()),
    _f("is_system_cursor", T.BooleanType()),
    _f("mark_delete_position_before", POSITION),
    _f("individually_deleted_before", IDM),
    _f("mark_delete_position", POSITION),
    _f("individually_deleted", IDM),
    _f("skipped_entries", T.LongType()),
    _f("skip_count", T.IntegerType()),
    _f("messages_consumed_counter_before", T.LongType()),
    _f("messages_consumed_counter", T.LongType()),
    _f("estimated_backlog_size_bytes_before", T.LongType()),
    _f("estimated_backlog_size_bytes_after", T.LongType()),
    _f("stop_reason", T.StringType()),
    _f("stop_cursor_name", T.StringType()),
    _f("iteration_count", T.LongType()),  # the time loop can make billions of steps
    _f("trace_steps", T.IntegerType()),
    _f("trace_truncated", T.BooleanType()),
    _f("slowest_tie_ambiguous", T.BooleanType()),
    _f("error", T.StringType()),
]
SIZE_SCHEMA = T.StructType(
    [
        *_CURSOR_FIELDS,
        _f("limit_size_bytes", T.LongType()),
        _f("target_size_bytes", T.DoubleType()),
        _f("quota_exceeded_before", T.BooleanType()),
        _f("above_target_after", T.BooleanType()),
        _f("iterations", T.ArrayType(SIZE_STEP)),
    ]
)
TIME_SCHEMA = T.StructType(
    [
        *_CURSOR_FIELDS,
        _f("limit_time_seconds", T.LongType()),
        _f("precise", T.BooleanType()),
        _f("evaluated_at", T.TimestampType()),
        _f("expiry_ttl_seconds", T.LongType()),
        _f("expired_position", POSITION),
        _f("ledger_closure_position", POSITION),
        _f("expiry_reads", T.IntegerType()),
        _f("publish_times_non_monotonic", T.BooleanType()),
        _f("undecidable", T.BooleanType()),
        _f("warning", T.StringType()),
        _f("iterations", T.ArrayType(TIME_STEP)),
    ]
)

#: A step of either loop: the fields of both :data:`SIZE_STEP` and :data:`TIME_STEP` (the other loop's
#: null), in the order of ``quota_eviction_trace``.
STEP = T.StructType(
    [
        next(f for f in (*SIZE_STEP.fields, *TIME_STEP.fields) if f.name == name)
        for name in (
            "iteration",
            "cursor_name",
            "slowest_tie",
            "mark_delete_before",
            "mark_delete_after",
            "skipped_entries",
            "error",
            "backlog_before",
            "entries_counter",
            "entries_source",
            "to_skip",
            "backlog_after",
            "ledger_id",
            "ledger_closed_at",
            "action",
        )
    ]
)
WHAT_IF_SCHEMA = T.StructType(
    [
        _f("quota_type", T.StringType()),
        *SIZE_SCHEMA.fields[:-1],
        *[f for f in TIME_SCHEMA.fields[:-1] if f.name not in SIZE_SCHEMA.fieldNames()],
        _f("iterations", T.ArrayType(STEP)),
    ]
)


# --- input packing -------------------------------------------------------------------------------------


def _opt(df: DataFrame, name: str, dtype: str) -> Column:
    return F.col(f"`{name}`").cast(dtype) if name in df.columns else F.lit(None).cast(dtype)


def _position(col: Column) -> Column:
    return F.when(col.isNull(), F.lit(None).cast(POSITION)).otherwise(
        F.struct(
            col["ledger_id"].cast("long").alias("ledger_id"), col["entry_id"].cast("long").alias("entry_id")
        )
    )


def _millis(col: Column) -> Column:
    return F.unix_millis(col.cast("timestamp"))


def _tagged(df: DataFrame, kind: int, values: dict[str, Column]) -> DataFrame:
    cols = [F.col("cluster").cast("string").alias("cluster"), F.col("topic").cast("string").alias("topic")]
    for name, dtype in _PACKED_FIELDS:
        if name == "k":
            cols.append(F.lit(kind).cast(dtype).alias("k"))
        else:
            cols.append(values.get(name, F.lit(None)).cast(dtype).alias(name))
    return df.select(*cols)


def _pack(
    managed_ledgers: DataFrame,
    ledgers: DataFrame,
    cursors: DataFrame,
    limits: DataFrame,
    limit_col: str,
    entries: DataFrame | None,
    now: Column,
    per_row_version: bool = False,
    run: Column | None = None,
) -> DataFrame:
    """One union of tagged rows (managed ledger, ledgers, cursors, limit, entry timestamps) per topic; with
    ``per_row_version`` the managed-ledger row carries its ``pulsar_version`` (``m_ver``); ``run`` tags each
    limit row with the eviction it asks for (``q_run``, :func:`drop_backlog_what_ifs`)."""
    for name, df, needed in (
        (
            "managed_ledgers",
            managed_ledgers,
            ["cluster", "topic", "last_confirmed_entry", "total_size_bytes"],
        ),
        ("ledgers", ledgers, ["cluster", "topic", "ledger_id", "entries", "size_bytes"]),
        ("cursors", cursors, ["cluster", "topic", "cursor_name", "mark_delete_position"]),
        ("limits", limits, ["cluster", "topic", limit_col]),
    ):
        missing = [c for c in needed if c not in df.columns]
        if missing:
            raise ConfigError(f"{name} lacks the column(s) {missing}; see DESIGN.md 'Acceptance-facing API'.")
    parts = [
        _tagged(
            managed_ledgers,
            _K_ML,
            {
                "m_cur": _opt(managed_ledgers, "current_ledger_id", "long"),
                "m_cle": F.coalesce(_opt(managed_ledgers, "current_ledger_entries", "long"), F.lit(0)),
                "m_cls": F.coalesce(_opt(managed_ledgers, "current_ledger_size_bytes", "long"), F.lit(0)),
                "m_lac": _position(F.col("last_confirmed_entry")),
                "m_total": F.coalesce(F.col("total_size_bytes").cast("long"), F.lit(0)),
                "m_eac": _opt(managed_ledgers, "entries_added_counter", "long"),
                "m_now": now,
                "m_ver": F.col("pulsar_version") if per_row_version else F.lit(None),
            },
        ),
        _tagged(
            ledgers.where(F.col("ledger_id").isNotNull()),
            _K_LEDGER,
            {
                "l_id": F.col("ledger_id"),
                "l_ent": F.coalesce(F.col("entries").cast("long"), F.lit(0)),
                "l_sz": F.coalesce(F.col("size_bytes").cast("long"), F.lit(0)),
                "l_closed": _millis(F.col("closed_at")) if "closed_at" in ledgers.columns else F.lit(None),
            },
        ),
        _tagged(
            cursors,
            _K_CURSOR,
            {
                "c_name": F.col("cursor_name"),
                "c_order": _opt(cursors, "cursor_order", "long"),
                "c_durable": F.coalesce(_opt(cursors, "is_durable", "boolean"), F.lit(False)),
                "c_kind": _opt(cursors, "cursor_kind", "string"),
                "c_md": _position(F.col("mark_delete_position")),
                "c_idm": _opt(cursors, "individually_deleted", IDM.simpleString()),
                "c_mcc": _opt(cursors, "messages_consumed_counter", "long"),
            },
        ),
        _tagged(
            limits,
            _K_LIMIT,
            {"q_limit": F.col(f"`{limit_col}`"), "q_run": F.lit(None) if run is None else run},
        ),
    ]
    if entries is not None:
        if "publish_time_ms" in entries.columns:
            published = F.col("publish_time_ms").cast("long")
        elif "publish_time" in entries.columns:
            published = _millis(F.col("publish_time"))
        else:
            raise ConfigError(
                "entries lacks publish_time_ms (or publish_time): precise expiry needs it (§3.7)"
            )
        broker = _millis(F.col("broker_timestamp")) if "broker_timestamp" in entries.columns else F.lit(None)
        parts.append(
            _tagged(
                entries,
                _K_ENTRY,
                {
                    "e_pos": F.struct(
                        F.col("ledger_id").cast("long").alias("ledger_id"),
                        F.col("entry_id").cast("long").alias("entry_id"),
                    ),
                    # Commands.getEntryTimestamp: the broker timestamp when present, else publish time
                    "e_ts": F.coalesce(broker, published),
                },
            )
        )
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part)
    return union


# --- per-topic engine call -------------------------------------------------------------------------------


def _ms_to_dt(ms: int | None) -> dt.datetime | None:
    if ms is None:
        return None
    return dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=ms)


class _Topic:
    """The rows of one topic, decoded from the packed Arrow table."""

    def __init__(self, cols: dict[str, list[Any]], run: int | None = None) -> None:
        """``run``: keep only the limit rows of that eviction (``q_run``); :attr:`runs` lists them all."""
        self.cluster = cols["cluster"][0]
        self.topic = cols["topic"][0]
        self.ml_rows: list[int] = []
        self.ledgers: list[tuple[int, int, int]] = []
        self.closed: dict[int, int | None] = {}
        self.cursors: list[eng.Cursor] = []
        self.limits: list[int | None] = []
        self.timestamps: list[tuple[eng.Position, int]] = []
        self.runs: set[int | None] = set()
        for i, k in enumerate(cols["k"]):
            if k == _K_ML:
                self.ml_rows.append(i)
            elif k == _K_LEDGER:
                lid = int(cols["l_id"][i])
                self.ledgers.append((lid, int(cols["l_ent"][i]), int(cols["l_sz"][i])))
                self.closed[lid] = cols["l_closed"][i]
            elif k == _K_CURSOR:
                self.cursors.append(self._cursor(cols, i))
            elif k == _K_LIMIT:
                self.runs.add(cols["q_run"][i])
                if run is None or cols["q_run"][i] == run:
                    self.limits.append(cols["q_limit"][i])
            elif k == _K_ENTRY:
                p, ts = engine_position(cols["e_pos"][i]), cols["e_ts"][i]
                if p is not None and ts is not None:
                    self.timestamps.append((p, int(ts)))
        self.cols = cols
        self.cursors.sort(key=lambda c: (c.order, c.name))

    @staticmethod
    def _cursor(cols: dict[str, list[Any]], i: int) -> eng.Cursor:
        name = str(cols["c_name"][i])
        durable = bool(cols["c_durable"][i])
        idm: list[eng.IdmRange] = []
        for r in cols["c_idm"][i] or []:
            lo, hi = engine_position(r.get("lower")), engine_position(r.get("upper"))
            if lo is not None and hi is not None:
                idm.append((lo, hi))
        order = cols["c_order"][i]
        return eng.Cursor(
            name=name,
            order=int(order) if order is not None else 2**62,
            durable=durable,
            kind=cols["c_kind"][i] or _kind_from_name(name, durable),
            md=engine_position(cols["c_md"][i]),
            idm=idm,
            consumed=cols["c_mcc"][i],
        )

    def managed_ledger(self, beh: Behaviour) -> tuple[eng.ManagedLedger | None, str | None]:
        if not self.ml_rows:
            return None, "no managed_ledgers row for this cluster/topic"
        if len(self.ml_rows) > 1:
            return None, "several managed_ledgers rows for this cluster/topic"
        i = self.ml_rows[0]
        lac = engine_position(self.cols["m_lac"][i])
        if lac is None:
            return None, "last_confirmed_entry is null"
        ml = eng.ManagedLedger(
            self.ledgers,
            self.cols["m_cur"][i],
            int(self.cols["m_cle"][i]),
            int(self.cols["m_cls"][i]),
            lac,
            int(self.cols["m_total"][i]),
            beh,
        )
        return ml, None

    def ml_value(self, name: str) -> Any:
        return self.cols[name][self.ml_rows[0]] if len(self.ml_rows) == 1 else None

    def limit(self) -> tuple[int | None, str | None]:
        distinct = set(self.limits)
        if len(distinct) > 1:
            return None, f"several limits for this cluster/topic: {sorted(distinct, key=str)}"
        return (self.limits[0] if self.limits else None), None

    def cursor_rows(
        self, extra: dict[str, Any], steps: list[dict[str, Any]] | None = None
    ) -> list[dict[str, Any]]:
        """One row per cursor: its state, ``extra`` (topic columns) and its own ``steps`` of the trace."""
        own: dict[str, list[dict[str, Any]]] = {}
        for step in steps or ():
            own.setdefault(step["cursor_name"], []).append(step)
        rows = []
        for c in self.cursors:
            row: dict[str, Any] = {
                "cluster": self.cluster,
                "topic": self.topic,
                "cursor_name": c.name,
                "cursor_order": None if c.order == 2**62 else c.order,
                "cursor_kind": c.kind,
                "is_durable": c.durable,
                "is_system_cursor": is_system_cursor_name(c.name),
                "mark_delete_position_before": position_struct(c.md_before),
                "individually_deleted_before": acked_ranges_struct(c.idm_before),
                "mark_delete_position": position_struct(c.md),
                "individually_deleted": acked_ranges_struct(c.idm),
                "skipped_entries": c.skipped,
                "skip_count": c.skips,
                "messages_consumed_counter_before": None if c.consumed is None else c.consumed - c.skipped,
                "messages_consumed_counter": c.consumed,
            }
            row.update(extra)
            mine = own.get(c.name, [])
            row["iterations"] = mine
            row["trace_steps"] = len(mine)
            rows.append(row)
        return rows


def _size_step(s: eng.SizeStep) -> dict[str, Any]:
    return {
        "iteration": s.iteration,
        "cursor_name": s.cursor_name,
        "mark_delete_before": position_struct(s.mark_delete_before),
        "backlog_before": s.backlog_before,
        "entries_counter": s.entries_counter,
        "entries_source": s.entries_source,
        "to_skip": s.to_skip,
        "mark_delete_after": position_struct(s.mark_delete_after),
        "skipped_entries": s.skipped_entries,
        "backlog_after": s.backlog_after,
        "slowest_tie": s.slowest_tie,
        "error": s.error,
    }


def _time_step(s: eng.TimeStep) -> dict[str, Any]:
    return {
        "iteration": s.iteration,
        "cursor_name": s.cursor_name,
        "mark_delete_before": position_struct(s.mark_delete_before),
        "ledger_id": s.ledger_id,
        "ledger_closed_at": _ms_to_dt(s.ledger_closed_at_ms),
        "action": s.action,
        "mark_delete_after": position_struct(s.mark_delete_after),
        "skipped_entries": s.skipped_entries,
        "slowest_tie": s.slowest_tie,
        "error": s.error,
    }


def _empty_topic_fields(schema: T.StructType, error: str | None, stop: str | None) -> dict[str, Any]:
    base: dict[str, Any] = {
        f.name: None for f in schema.fields if f.name not in {c.name for c in _CURSOR_FIELDS}
    }
    base.update(
        {
            "estimated_backlog_size_bytes_before": None,
            "estimated_backlog_size_bytes_after": None,
            "stop_reason": stop,
            "stop_cursor_name": None,
            "iteration_count": 0,
            "trace_truncated": False,
            "slowest_tie_ambiguous": False,
            "error": error,
        }
    )
    return base


def _size_topic(
    topic: _Topic, beh: Behaviour, use_counter: bool, formula_4x: bool, trace_limit: int
) -> list[dict[str, Any]]:
    ml, error = topic.managed_ledger(beh)
    limit, limit_error = topic.limit()
    if ml is None or limit_error is not None:
        return topic.cursor_rows(_empty_topic_fields(SIZE_SCHEMA, error or limit_error, "error"))
    eac = topic.ml_value("m_eac")
    result = eng.drop_backlog_for_size_limit(
        ml, topic.cursors, limit, eac, use_counter, formula_4x, trace_limit
    )
    target = None if result.target is None else float(result.target)
    extra = {
        "estimated_backlog_size_bytes_before": result.backlog_before,
        "estimated_backlog_size_bytes_after": result.backlog_after,
        "stop_reason": result.stop_reason,
        "stop_cursor_name": result.stop_cursor_name,
        "iteration_count": result.iteration_count,
        "trace_truncated": result.iteration_count > len(result.steps),
        "slowest_tie_ambiguous": result.tie_ambiguous and not beh.slowest_tie_known_from_export,
        "error": result.error,
        "limit_size_bytes": limit,
        "target_size_bytes": target,
        # §3.4: isSizeBacklogExceeded = limit >= 0 and estimate >= limit
        "quota_exceeded_before": None if limit is None else (limit >= 0 and result.backlog_before >= limit),
        "above_target_after": None
        if result.target is None
        else eng.above_target(result.backlog_after, result.target),
    }
    return topic.cursor_rows(extra, [_size_step(s) for s in result.steps])


def _time_topic(
    topic: _Topic,
    beh: Behaviour,
    precise: bool,
    now_override: int | None,
    overflow_int: bool,
    closure_step: bool,
    closure_skips_open: bool,
    formula_4x: bool,
    trace_limit: int,
    compared_as_millis: bool,
) -> list[dict[str, Any]]:
    ml, error = topic.managed_ledger(beh)
    limit, limit_error = topic.limit()
    if ml is None or limit_error is not None:
        return topic.cursor_rows(_empty_topic_fields(TIME_SCHEMA, error or limit_error, "error"))
    now_ms = now_override if now_override is not None else topic.ml_value("m_now")
    before = eng.estimated_backlog(ml, topic.cursors)
    extra: dict[str, Any] = {
        "estimated_backlog_size_bytes_before": before,
        "limit_time_seconds": limit,
        "precise": precise,
        "evaluated_at": _ms_to_dt(now_ms),
        "stop_reason": None,
        "stop_cursor_name": None,
        "iteration_count": 0,
        "trace_truncated": False,
        "slowest_tie_ambiguous": False,
        "undecidable": False,
        "error": None,
    }
    steps: list[dict[str, Any]] = []
    per_cursor: dict[str, dict[str, Any]] = {}
    if now_ms is None:
        extra.update(stop_reason="error", error="no evaluation time: managed_ledgers.exported_at is null")
    elif limit is None or limit <= 0:
        extra["stop_reason"] = "quota_disabled"  # §3.4: limitTime <= 0 disables the time quota
    elif precise:
        # (int) (0.9 * limitTime); with #25624 (int) (long) (0.9 * limitTime) (docs §3.7)
        raw = eng.REDUCTION_FACTOR * float(limit)
        ttl = eng.java_d2i(float(eng.java_d2l(raw))) if formula_4x else eng.java_d2i(raw)
        extra["expiry_ttl_seconds"] = ttl
        stamps = eng.Timestamps(topic.timestamps)
        for c in topic.cursors:
            if c.kind not in SUBSCRIPTION_MAP_KINDS:
                continue
            res = eng.expire_messages(
                ml, c, ttl, now_ms, stamps, topic.closed if closure_step else None, closure_skips_open
            )
            per_cursor[c.name] = {
                "expired_position": position_struct(res.found_position),
                "ledger_closure_position": position_struct(res.ledger_closure_position),
                "expiry_reads": res.reads,
                "publish_times_non_monotonic": res.non_monotonic,
                "warning": res.warning,
                "error": res.error,
                "undecidable": res.error is not None and "not in the exported entries" in res.error,
            }
    else:
        # end state computed directly (no per-step cost), the trace from the stepwise loop up to the cap
        result = eng.time_eviction_ledgers(
            ml,
            topic.cursors,
            topic.closed,
            limit,
            now_ms,
            overflow_int,
            trace_limit,
            compared_as_millis=compared_as_millis,
        )
        extra.update(
            stop_reason=result.stop_reason,
            stop_cursor_name=result.stop_cursor_name,
            iteration_count=result.iteration_count,
            trace_truncated=result.iteration_count > len(result.steps),
            slowest_tie_ambiguous=result.tie_ambiguous and not beh.slowest_tie_known_from_export,
            undecidable=result.undecidable,
            error=result.error,
        )
        steps = [_time_step(s) for s in result.steps]
    extra["estimated_backlog_size_bytes_after"] = eng.estimated_backlog(ml, topic.cursors)
    rows = topic.cursor_rows(extra, steps)
    for row in rows:
        row.update(per_cursor.get(row["cursor_name"], {}))
    return rows


#: Output rows per Arrow record batch handed back to Spark.
_OUTPUT_BATCH_ROWS = 4096
#: Output cells (rows plus their ``iterations`` structs) per Arrow record batch: a cursor of a long loop
#: can carry many trace steps, so a batch of such cursors is cut short to bound memory.
_OUTPUT_BATCH_CELLS = 200_000


def _group_fn(
    schema: T.StructType, per_topic: Callable[[_Topic], list[dict[str, Any]]]
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``applyInArrow`` body: a stream of batches sorted by ``(cluster, topic, k)`` -> cursor rows.

    Consecutive rows of one topic are cut out of each batch (a topic may span batches) and handed to
    ``per_topic``; memory holds one topic's rows at a time. Topics without a limit row give no rows.
    """
    arrow_schema = to_arrow_schema(schema)
    names = schema.fieldNames()
    packed_names = ["cluster", "topic", *(name for name, _ in _PACKED_FIELDS)]

    def evaluate(
        key: tuple[Any, Any] | None, cols: dict[str, list[Any]], done: set[Any]
    ) -> list[dict[str, Any]]:
        if key is None:
            return []
        if key in done:
            raise RuntimeError(f"rows of topic {key} are not contiguous in the eviction input")
        done.add(key)
        topic = _Topic(cols)
        if not topic.limits:  # topics without a limit row are not evaluated
            return []
        return [{n: r.get(n) for n in names} for r in per_topic(topic)]

    def batched(rows: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
        """Cut one topic's rows into chunks of at most ``_OUTPUT_BATCH_CELLS`` cells (one row at least)."""
        chunk: list[dict[str, Any]] = []
        cells = 0
        for row in rows:
            weight = 1 + len(row.get("iterations") or ())
            if chunk and cells + weight > _OUTPUT_BATCH_CELLS:
                yield chunk
                chunk, cells = [], 0
            chunk.append(row)
            cells += weight
        if chunk:
            yield chunk

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        out: list[dict[str, Any]] = []
        out_cells = 0
        pending: dict[str, list[Any]] = {n: [] for n in packed_names}
        pending_key: tuple[Any, Any] | None = None
        done: set[Any] = set()

        def flush_topic(rows: list[dict[str, Any]]) -> Iterator[pa.RecordBatch]:
            nonlocal out, out_cells
            for chunk in batched(rows):
                weight = sum(1 + len(r.get("iterations") or ()) for r in chunk)
                if out and out_cells + weight > _OUTPUT_BATCH_CELLS:
                    yield pa.RecordBatch.from_pylist(out, schema=arrow_schema)
                    out, out_cells = [], 0
                out.extend(chunk)
                out_cells += weight

        for batch in batches:
            data = batch.to_pydict()
            clusters, topics, n = data["cluster"], data["topic"], batch.num_rows
            start = 0
            while start < n:
                key = (clusters[start], topics[start])
                end = start + 1
                while end < n and topics[end] == key[1] and clusters[end] == key[0]:
                    end += 1
                if key != pending_key:
                    yield from flush_topic(evaluate(pending_key, pending, done))
                    pending, pending_key = {name: [] for name in packed_names}, key
                for name in packed_names:
                    pending[name].extend(data[name][start:end])
                start = end
            if len(out) >= _OUTPUT_BATCH_ROWS or out_cells >= _OUTPUT_BATCH_CELLS:
                yield pa.RecordBatch.from_pylist(out, schema=arrow_schema)
                out, out_cells = [], 0
        yield from flush_topic(evaluate(pending_key, pending, done))
        if out:
            yield pa.RecordBatch.from_pylist(out, schema=arrow_schema)

    return run


def _grouped(
    packed: DataFrame, schema: T.StructType, per_topic: Callable[[_Topic], list[dict[str, Any]]]
) -> DataFrame:
    """Run ``per_topic`` on every topic: ``groupBy(bucket).applyInArrow`` over topic-sorted partitions.

    One group per call of the Python function costs milliseconds, too much for 100k topics, so the groups
    are hash buckets of ``(cluster, topic)`` (as many as ``spark.sql.shuffle.partitions``), hash-partitioned
    and sorted by ``(bucket, cluster, topic, k)`` first: Spark's grouped Arrow operator keeps that order
    (the required ordering by bucket is a prefix of it), so every bucket streams its topics one after the
    other and each topic is evaluated alone (see :func:`_group_fn`).
    """
    buckets = max(1, int(packed.sparkSession.conf.get("spark.sql.shuffle.partitions") or "200"))
    keyed = packed.select(F.pmod(F.xxhash64("cluster", "topic"), F.lit(buckets)).alias("_bucket"), "*")
    ordered = keyed.repartition(buckets, "_bucket").sortWithinPartitions("_bucket", "cluster", "topic", "k")
    return ordered.groupBy("_bucket").applyInArrow(_group_fn(schema, per_topic), schema)


# --- losses (set-based) ----------------------------------------------------------------------------------


def _with_losses(result: DataFrame, entries: DataFrame | None) -> DataFrame:
    return eviction_losses(result, entries)


def eviction_losses(
    result: DataFrame,
    entries: DataFrame | None,
    by: tuple[str, ...] = ("cursor_name",),
    after: str = "mark_delete_position",
    scope_entries: bool = False,
) -> DataFrame:
    """Add ``lost_entries``, ``lost_messages``, ``lost_bytes``: exported entries in ``(md before, md after]``
    that were not already acknowledged (outside ``individually_deleted_before``); null without ``entries``.

    ``result``: eviction rows with ``cluster, topic``, the ``by`` columns (unique per topic together),
    ``mark_delete_position_before``, ``individually_deleted_before`` and the md after the loop (``after``).
    Measured by :func:`pulsar_model.backlog_exact.request_totals` (prefix sums over each topic's entries,
    not a join of every entry with every moved cursor of its topic). ``result`` is read twice (the moved
    cursors, and the join back): materialise it first when it is an expensive plan, as the quota stage
    does. ``scope_entries``: read only the entries of the topics where a cursor moves (a broadcast semi
    join, one row per moved topic: metadata-sized) instead of sweeping every topic's entries (tier l: 7.4M
    of 26M); it reads ``result`` a third time, so pass it only for a materialised ``result``. Pure and lazy.
    """
    lost_columns = ("lost_entries", "lost_messages", "lost_bytes")
    base = result.select(*[F.col(f"`{c}`") for c in result.columns if c not in lost_columns])
    if entries is None:
        return base.select("*", *[F.lit(None).cast("long").alias(c) for c in lost_columns])
    moved = base.where(F.col(after) > F.col("mark_delete_position_before")).select(
        *KEY,
        F.struct(*by).alias("_loss_key"),
        F.col("mark_delete_position_before").alias("lower"),
        F.col(after).alias("upper"),
        F.col("individually_deleted_before").alias("acked_ranges"),
    )
    if scope_entries:  # one row per moved topic: a broadcast of per-cursor rows would not stay small
        entries = entries.join(F.broadcast(moved.select(*KEY).distinct()), list(KEY), "left_semi")
    e = entries.select(
        F.col("cluster").cast("string").alias("cluster"),
        F.col("topic").cast("string").alias("topic"),
        F.struct(
            F.col("ledger_id").cast("long").alias("ledger_id"),
            F.col("entry_id").cast("long").alias("entry_id"),
        ).alias("position"),
        _opt(entries, "message_count", "long").alias("message_count"),
        _opt(entries, "entry_size_bytes", "long").alias("entry_size_bytes"),
        F.lit(None).cast("long").alias("publish_time_ms"),
        F.lit(None).cast("int").alias("marker_type"),
        F.lit(None).cast("long").alias("txnid_most_bits"),
        F.lit(None).cast("long").alias("txnid_least_bits"),
    )
    # every entry counts whatever its kind: no transaction lookup needed
    no_txns = e.select(
        *KEY, "txnid_most_bits", "txnid_least_bits", F.lit(None).cast("string").alias("state")
    ).limit(0)
    # request_totals reads ``moved`` once (unacked_entry_totals joins its totals back to the requests: one
    # more evaluation of whatever ``result`` is built from)
    totals = request_totals(moved, e, no_txns, key="_loss_key").select(
        *KEY,
        *[F.col("_k")[c].alias(c) for c in by],
        F.col("entries").alias("_n"),
        F.col("messages").alias("_msgs"),
        F.col("bytes").alias("_bytes"),
    )
    out = base.join(totals, on=[*KEY, *by], how="left")
    return out.select(
        *[F.col(f"`{c}`") for c in base.columns],
        F.coalesce(F.col("_n"), F.lit(0)).cast("long").alias("lost_entries"),
        F.coalesce(F.col("_msgs"), F.lit(0)).cast("long").alias("lost_messages"),
        F.coalesce(F.col("_bytes"), F.lit(0)).cast("long").alias("lost_bytes"),
    )


# --- public transforms ---------------------------------------------------------------------------------


def drop_backlog_for_size_limit(
    managed_ledgers: DataFrame,
    ledgers: DataFrame,
    cursors: DataFrame,
    limits: DataFrame,
    pulsar_version: str | None = DEFAULT_PULSAR_VERSION,
    *,
    entries: DataFrame | None = None,
    counter: str = COUNTER_AUTO,
    trace_max_iterations: int = DEFAULT_TRACE_MAX_ITERATIONS,
    losses: bool = True,
) -> DataFrame:
    """What ``dropBacklogForSizeLimit`` would do to every cursor of the topics in ``limits`` (docs §3.6).

    One row per cursor of every topic that has a row in ``limits`` (``cluster, topic, limit_size_bytes``;
    pass the topics whose effective policy is ``consumer_backlog_eviction``, §3.5 - the policy is not read
    here; a topic without cursors or without a managed-ledger row gives no rows / an ``error``).

    Per topic: ``target = 0.9 x limit`` (a double; ``(long)`` with #25624), then while the §2.3 estimate is
    above it: take the slowest durable cursor (the root of the cursor heap, docs §3.9), stop if none or if it
    is the cursor skipped last, compute ``toSkip`` from the estimate, the target and the cursor's entry
    backlog in the version's IEEE-754 operation order (see :func:`size_eviction_uses_long_target`), stop
    at 0, else ``skipEntries(toSkip, Include)`` and re-estimate. Readers never count; replicator,
    ``__compaction`` and dedup cursors are skipped like subscriptions (``is_system_cursor`` marks them).

    ``entries`` of the formula (``counter="auto"``): ``entries_added_counter`` (managed_ledgers) minus the
    cursor's ``messages_consumed_counter`` when both columns are present and non-null, the precise backlog
    (§1.8) when not or when that is negative; every skip adds the entries it consumed to the counter
    (``messages_consumed_counter``). ``counter="precise"`` always uses the precise count.

    Columns: the cursor (``cursor_name, cursor_order, cursor_kind, is_durable, is_system_cursor``), its
    ``mark_delete_position_before``/``individually_deleted_before`` and final ``mark_delete_position`` /
    ``individually_deleted``, ``skipped_entries`` (entries newly acknowledged by its skips), ``skip_count``,
    the counters before/after; and, repeated on every cursor row of the topic: ``limit_size_bytes``,
    ``target_size_bytes``, ``estimated_backlog_size_bytes_before``/``_after``, ``quota_exceeded_before``
    (§3.4 ``estimate >= limit``), ``above_target_after`` (one broker check leaves it above the target),
    ``stop_reason`` (:data:`STOP_REASONS`), ``stop_cursor_name``, ``iteration_count`` (every skip of the
    loop), ``trace_truncated`` (the loop made more than ``trace_max_iterations`` skips),
    ``slowest_tie_ambiguous`` (a pick of the loop, the last one included, had several durable cursors on
    the slowest md: the result follows the heap built in export order, the broker's may differ),
    ``error``. The trace: ``iterations`` holds THIS cursor's skips among the first
    ``trace_max_iterations`` of the topic's loop (one struct each, ``iteration`` numbering the topic's loop
    order), ``trace_steps`` their number; the topic's trace is the union over its cursor rows (no step is
    repeated, so the output stays linear in cursors + recorded steps). With ``entries`` (``cluster, topic,
    ledger_id, entry_id`` [+ ``message_count``, ``entry_size_bytes``]): ``lost_entries``,
    ``lost_messages``, ``lost_bytes`` of the exported entries the cursor loses (null without, or with
    ``losses=False``: :func:`eviction_losses` adds them later, e.g. after materialising). A null or
    negative limit never evicts (``quota_disabled``). Pure and lazy.
    """
    if counter not in (COUNTER_AUTO, COUNTER_PRECISE):
        raise ConfigError(f"counter must be {COUNTER_AUTO!r} or {COUNTER_PRECISE!r}, got {counter!r}")
    trace_limit = _trace_limit(trace_max_iterations)
    rules = _rules_of(pulsar_version, managed_ledgers)
    use_counter = counter == COUNTER_AUTO
    packed = _pack(
        managed_ledgers, ledgers, cursors, limits, "limit_size_bytes", None, F.lit(None), rules is None
    )

    def per_topic(topic: _Topic) -> list[dict[str, Any]]:
        beh, flags = rules or _topic_rules(topic)
        return _size_topic(topic, beh, use_counter, flags["size_eviction_long_target"], trace_limit)

    result = _grouped(packed, SIZE_SCHEMA, per_topic)
    return _with_losses(result, entries if losses else None)


def drop_backlog_for_time_limit(
    managed_ledgers: DataFrame,
    ledgers: DataFrame,
    cursors: DataFrame,
    limits: DataFrame,
    entries: DataFrame | None = None,
    precise: bool = False,
    now: dt.datetime | int | None = None,
    pulsar_version: str | None = DEFAULT_PULSAR_VERSION,
    trace_max_iterations: int = DEFAULT_TRACE_MAX_ITERATIONS,
    losses: bool = True,
) -> DataFrame:
    """What ``dropBacklogForTimeLimit`` would do to every cursor of the topics in ``limits`` (docs §3.7).

    One row per cursor of every topic with a row in ``limits`` (``cluster, topic, limit_time_seconds``;
    ``<= 0`` or null disables: ``quota_disabled``). ``now`` (a datetime, or epoch milliseconds) defaults to
    each topic's ``managed_ledgers.exported_at``; ``evaluated_at`` shows the value used.

    * ``precise=False``: loop on the slowest durable cursor (the heap root, as in the size loop): md in a
      deleted ledger -> mark-delete ``(next ledger, -1)``; md in a closed ledger whose close time
      (``ledgers.closed_at``) is more than the limit before now -> ``(next ledger, -1)``; otherwise stop.
      The open ledger never expires (``open_ledger``); a closed ledger without an exported close time stops
      the loop with ``unknown_close_time`` and ``undecidable = true``; no next ledger -> ``no_next_ledger``
      (the broker's NullPointerException); a refused mark-delete (beyond LAC, §1.2) -> ``error``. Before
      apache/pulsar#21816 / #22740 the limit is converted with a 32-bit ``limit * 1000``
      (:func:`time_limit_millis_overflow_int`); before #17957 it is not converted at all and the close
      time's age in ms is compared with the limit in seconds (:func:`time_limit_compared_as_millis`).
      The loop can make up to cursors x ledgers mark-deletes: the end state, ``iteration_count`` and the
      flags are computed per cursor path without stepping it (every cursor's path depends only on the
      ledgers and its own state, and the end state not on the heap's order among equal positions, see
      ``engine.topic_engine.drop_backlog_for_time_limit_direct``), in
      ``O(cursors x (acked ranges + 1)^2 x log ledgers)``. ``stop_cursor_name`` depends on that order when
      several cursors end on the stopping position: the heap is then replayed, cursors moving in lockstep a
      round at a time; a replay beyond ``HEAP_REPLAY_BUDGET`` units of work (about 300 staggered
      cursors merging on one topic) leaves it null. The trace (``iterations``: this cursor's mark-deletes
      among the topic's first ``trace_max_iterations``, ``trace_steps``, ``trace_truncated``) comes from
      the stepwise loop cut there.
    * ``precise=True`` (needs ``entries`` with ``publish_time_ms`` [+ ``broker_timestamp``]): every cursor of
      the topic's subscription map (``cursor_kind`` subscription, reader or compaction; not replicators or
      dedup) runs message expiry with TTL ``int(0.9 x limit)``: versions with
      :func:`expiry_checks_ledger_close_time` first mark-delete the closed ledgers whose close time is older
      than the TTL, then ``findNewestMatching``'s binary search (assumes monotonic timestamps; the entry
      timestamp is the broker timestamp when present, else the publish time) and a mark-delete at the
      newest expired entry. Per cursor: ``expiry_ttl_seconds``, ``expired_position`` (search result, null
      = nothing), ``ledger_closure_position``, ``expiry_reads``, ``publish_times_non_monotonic`` (exported
      entries after md decrease somewhere: the search may stop early or late), ``warning`` and ``error``
      (a probed entry not exported -> ``undecidable``).

    Other columns as :func:`drop_backlog_for_size_limit` (``lost_*`` from ``entries`` when given and
    ``losses``). Pure and
    lazy.
    """
    if precise and entries is None:
        raise ConfigError("precise time eviction reads entry timestamps: pass entries (docs §3.7)")
    trace_limit = _trace_limit(trace_max_iterations)
    rules = _rules_of(pulsar_version, managed_ledgers)
    now_ms = _now_ms(now)
    exported = (
        _millis(F.col("exported_at"))
        if "exported_at" in managed_ledgers.columns
        else F.lit(None).cast("long")
    )
    # Only the topics with a limit are evaluated: only their entry timestamps go to the grouped pass (the
    # entries are most of the packed rows; tier m shipped all 2.6M of them for 864 limited topics). The
    # limits (one row per topic, metadata-sized) are broadcast into the scan: a sort-merge semi join
    # shuffled the whole dump first (tier l: 26M entries for 4.4M kept).
    probed = (
        entries.join(F.broadcast(limits.select(*KEY)), list(KEY), "left_semi")
        if precise and entries is not None
        else None
    )
    packed = _pack(
        managed_ledgers, ledgers, cursors, limits, "limit_time_seconds", probed, exported, rules is None
    )

    def per_topic(topic: _Topic) -> list[dict[str, Any]]:
        return _time_rows(topic, rules or _topic_rules(topic), precise, now_ms, trace_limit)

    result = _grouped(packed, TIME_SCHEMA, per_topic)
    return _with_losses(result, entries if losses else None)


def _time_rows(
    topic: _Topic, rules: Rules, precise: bool, now_ms: int | None, trace_limit: int
) -> list[dict[str, Any]]:
    beh, flags = rules
    return _time_topic(
        topic,
        beh,
        precise,
        now_ms,
        flags["time_limit_millis_int_overflow"],
        flags["expiry_checks_ledger_close_time"],
        flags["expiry_skips_unclosed_ledgers"],
        flags["size_eviction_long_target"],
        trace_limit,
        flags["time_limit_compared_as_millis"],
    )


def drop_backlog_what_ifs(
    managed_ledgers: DataFrame,
    ledgers: DataFrame,
    cursors: DataFrame,
    limits: DataFrame,
    entries: DataFrame | None = None,
    pulsar_version: str | None = DEFAULT_PULSAR_VERSION,
    trace_max_iterations: int = DEFAULT_TRACE_MAX_ITERATIONS,
) -> DataFrame:
    """Several evictions per topic in one grouped pass: what :func:`drop_backlog_for_size_limit` and
    :func:`drop_backlog_for_time_limit` (non-precise and precise) would each do to the topic as exported
    (every eviction starts from the exported state; none sees another's moves). Docs §3.6, §3.7.

    ``limits``: one row per (cluster, topic, quota_type, precise) wanted. ``quota_type``
    ``destination_storage`` (size) reads ``limit_size_bytes``; ``message_age`` (time) reads
    ``limit_time_seconds`` and ``precise`` (null reads as false); rows of any other ``quota_type`` ask for
    nothing. Only the entries of topics with a precise row are read (a broadcast semi join); without
    ``entries`` a precise row finds no entry timestamps, so its probes are undecidable (``error``), as with
    an entries export that misses them.

    Output, in :data:`WHAT_IF_SCHEMA`: for each limit row, the cursor rows the single call gives
    (``counter="auto"``, ``now`` = ``managed_ledgers.exported_at``) with ``quota_type`` and, from the time
    call, ``precise`` (null on size rows); the columns of the other call are null, ``iterations`` are
    :data:`STEP` structs and ``lost_*`` are null (:func:`eviction_losses` adds them; with one time row per
    topic ``by=("quota_type", "cursor_name")`` identifies a row). Equal to the separate calls row for row
    (property-tested on random managed ledgers); each topic's rows are shuffled once for all its evictions
    instead of once per call. ``pulsar_version=None``: each topic's own ``managed_ledgers.pulsar_version``.
    Pure and lazy.
    """
    missing = [c for c in ("quota_type", "limit_size_bytes", "limit_time_seconds") if c not in limits.columns]
    if missing:
        raise ConfigError(
            f"limits lacks the column(s) {missing}: one row per eviction wanted, with quota_type "
            f"({QUOTA_TYPE_SIZE!r} or {QUOTA_TYPE_TIME!r}), limit_size_bytes, limit_time_seconds [, precise]"
        )
    trace_limit = _trace_limit(trace_max_iterations)
    rules = _rules_of(pulsar_version, managed_ledgers)
    is_size = F.col("quota_type") == F.lit(QUOTA_TYPE_SIZE)
    precise = F.coalesce(_opt(limits, "precise", "boolean"), F.lit(False))
    runs = limits.where(is_size | (F.col("quota_type") == F.lit(QUOTA_TYPE_TIME))).select(
        *KEY,
        F.when(is_size, F.lit(_RUN_SIZE))
        .when(precise, F.lit(_RUN_TIME_PRECISE))
        .otherwise(F.lit(_RUN_TIME))
        .alias("_run"),
        F.when(is_size, F.col("limit_size_bytes")).otherwise(F.col("limit_time_seconds")).alias("_limit"),
    )
    probed = None
    if entries is not None:
        precise_topics = runs.where(F.col("_run") == F.lit(_RUN_TIME_PRECISE)).select(*KEY)
        probed = entries.join(F.broadcast(precise_topics), list(KEY), "left_semi")
    exported = (
        _millis(F.col("exported_at"))
        if "exported_at" in managed_ledgers.columns
        else F.lit(None).cast("long")
    )
    packed = _pack(
        managed_ledgers, ledgers, cursors, runs, "_limit", probed, exported, rules is None, F.col("_run")
    )

    def per_topic(topic: _Topic) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for run in sorted(r for r in topic.runs if r is not None):
            alone = _Topic(topic.cols, run)  # fresh cursors: each eviction starts from the export
            topic_rules = rules or _topic_rules(alone)
            if run == _RUN_SIZE:
                beh, flags = topic_rules
                part = _size_topic(alone, beh, True, flags["size_eviction_long_target"], trace_limit)
            else:
                part = _time_rows(alone, topic_rules, run == _RUN_TIME_PRECISE, None, trace_limit)
            quota_type = QUOTA_TYPE_SIZE if run == _RUN_SIZE else QUOTA_TYPE_TIME
            rows.extend({**row, "quota_type": quota_type} for row in part)
        return rows

    return _with_losses(_grouped(packed, WHAT_IF_SCHEMA, per_topic), None)


_EVICTION_FLAGS = (
    "size_eviction_long_target",
    "time_limit_millis_int_overflow",
    "time_limit_compared_as_millis",
    "expiry_checks_ledger_close_time",
    "expiry_skips_unclosed_ledgers",
)
Rules = tuple[Behaviour, dict[str, bool]]


def _rules_for(version: VersionLike) -> Rules:
    return behaviour(version), {name: flag(name, version) for name in _EVICTION_FLAGS}


def _rules_of(pulsar_version: str | None, managed_ledgers: DataFrame) -> Rules | None:
    """The call's rules for a version string (validated here); None = per topic from ``m_ver``."""
    if pulsar_version is not None:
        return _rules_for(pulsar_version)
    if "pulsar_version" not in managed_ledgers.columns:
        raise ConfigError(
            "pulsar_version=None reads managed_ledgers.pulsar_version, which managed_ledgers does not have: "
            "add the column or pass a version string such as '4.1.3'"
        )
    return None


def _topic_rules(topic: _Topic) -> Rules:
    """The rules of the topic's own version (its managed-ledger row; null = the default version)."""
    return _rules_for(topic.ml_value("m_ver") or DEFAULT_PULSAR_VERSION)


def _trace_limit(trace_max_iterations: int) -> int:
    if isinstance(trace_max_iterations, bool) or not isinstance(trace_max_iterations, int):
        raise ConfigError(f"trace_max_iterations must be an integer, got {trace_max_iterations!r}")
    if not 0 <= trace_max_iterations <= eng.INT_MAX:
        raise ConfigError(
            f"trace_max_iterations = {trace_max_iterations} must be between 0 (no trace) and {eng.INT_MAX}, "
            "e.g. 100000"
        )
    return trace_max_iterations


def _now_ms(now: dt.datetime | int | None) -> int | None:
    if now is None:
        return None
    if isinstance(now, dt.datetime):
        aware = now if now.tzinfo is not None else now.replace(tzinfo=dt.UTC)
        return (aware - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(milliseconds=1)
    if isinstance(now, int):
        return now
    raise ConfigError(f"now must be a datetime or epoch milliseconds, got {now!r}")
