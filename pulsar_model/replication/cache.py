"""Replay of the per-subscription replicated-snapshot cache (docs §4.6, §11.14, §12.9).

Every replicated subscription keeps a cache of the SNAPSHOT markers its dispatcher read; each
mark-delete advance asks the cache for the newest snapshot at or before the new mark-delete position
and, when one comes back, the controller writes an UPDATE marker with that snapshot's clusters
(docs §4.4 ``localSubscriptionUpdated``). Two generations exist:

* **old** (every release before PR #25044): sorted by ``local_message_id``; over capacity the smallest
  key (the oldest snapshot) goes; default capacity 10;
* **new** (PR #25044: 4.0.9+ in the 4.0 line, 4.1.3+, every 4.2+): a linked list with the distance to
  the previous snapshot; over capacity the interior snapshot with the smallest ``d[i] + d[i+1]`` goes
  (the smaller position on ties, first and last never) and its gap is added to the next snapshot's
  (not measured again); a snapshot at or before the newest cached one clears the list; capacity at least
  3, default 30. The distance is the number of entries strictly between two positions,
  ``ManagedLedger.getNumberOfEntries(Range.open(a, b))`` with the 4.x arithmetic of docs §1.7 (every
  release with the new cache has it), computed from the ``ledgers`` / ``managed_ledgers`` tables.

The caches themselves (:class:`OldSnapshotCache`, :class:`NewSnapshotCache`) are plain Python so notebooks
and unit tests can drive them without Spark; :func:`replay_snapshot_cache` runs them per subscription in
:func:`~pulsar_model.engine.grouped.map_groups`. :func:`snapshot_cache_events` derives cache events from
exported
markers and cursors and :func:`predicted_updates` compares the UPDATE markers the replay predicts with the
observed ones.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import pandas as pd
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_model import DEFAULT_PULSAR_VERSION
from pulsar_model.domain.versions import VersionLike, flag
from pulsar_model.engine import topic_rows
from pulsar_model.engine.columns import LATEST, POSITION_TYPE, position
from pulsar_model.engine.flags import FLAGS_COLUMN, with_flags
from pulsar_model.engine.grouped import map_groups, records
from pulsar_model.engine.topic_engine import EARLIEST, BrokerError
from pulsar_model.errors import ConfigError, ContractError
from pulsar_model.positions import require_version_column
from pulsar_model.wire.markers import MarkerType

__all__ = [
    "CACHE_GENERATION_NEW",
    "CACHE_GENERATION_OLD",
    "MAX_CACHED_NEW",
    "MAX_CACHED_OLD",
    "CachedSnapshot",
    "NewSnapshotCache",
    "OldSnapshotCache",
    "compare_predicted_updates",
    "predicted_updates",
    "replay_snapshot_cache",
    "snapshot_cache_events",
    "uses_new_snapshot_cache",
]

Position = tuple[int, int]
ClusterPosition = tuple[str, Position]
DistanceMode = Literal["entries", "entry_id", "constant"]

#: ``replicatedSubscriptionsSnapshotMaxCachedPerSubscription`` before / since PR #25044 (docs §4.2).
MAX_CACHED_OLD: Final = 10
MAX_CACHED_NEW: Final = 30
#: The new cache's constructor throws below this capacity (PR #25044).
MIN_CACHED_NEW: Final = 3
CACHE_GENERATION_OLD: Final = "old"
CACHE_GENERATION_NEW: Final = "new"
OP_ADD: Final = "add"
OP_ADVANCE: Final = "advance"
#: Export columns that, when present on the events, split one subscription per export.
EXPORT_KEYS: Final = ("export_id", "export_date")
EVENT_COLUMNS: Final = (
    "cluster",
    "topic",
    "subscription",
    "seq",
    "op",
    "snapshot_id",
    "local_position",
    "snapshot_clusters",
    "mark_delete_position",
)
CLUSTER_POSITION_TYPE: Final = T.StructType(
    [T.StructField("cluster", T.StringType()), T.StructField("position", POSITION_TYPE)]
)
CLUSTERS_TYPE: Final = T.ArrayType(CLUSTER_POSITION_TYPE)
_NO_DISTANCE: Final = (
    "no single managed_ledgers row with a LAC for this topic (or a snapshot position its range check "
    "refuses): the new cache's distances were taken as 0; export the topic's stats-internal to replay it "
    "exactly"
)


def uses_new_snapshot_cache(version: VersionLike) -> bool:
    """True when ``version`` has PR #25044's snapshot cache (4.0.9+, 4.1.3+, 4.2+; docs §4.2, §4.6).

    Evidence: the release notes of 4.0.9 and 4.1.3 (``apache/pulsar-site`` release-notes/versioned,
    both 2026-02-19) list #25044, and the administration-geo page says the fix shipped in 4.0.9 and
    4.1.3 and raised ``replicatedSubscriptionsSnapshotMaxCachedPerSubscription`` from 10 to 30.
    """
    return flag("new_snapshot_cache", version)


# --- the caches (plain Python) --------------------------------------------------------------------------


@dataclass(frozen=True)
class CachedSnapshot:
    """One cached ``ReplicatedSubscriptionsSnapshot``: id, ``local_message_id`` and the remote positions."""

    snapshot_id: str | None
    position: Position
    clusters: tuple[ClusterPosition, ...] = ()


class OldSnapshotCache:
    """The cache before PR #25044 (docs §4.6): a sorted map keyed by ``local_message_id``.

    ``add`` inserts (the same key replaces the value, ``TreeMap.put``) and drops the smallest keys while
    over capacity; ``advanced(p)`` removes every key ``<= p`` and returns the last one removed.
    """

    def __init__(self, max_cached: int = MAX_CACHED_OLD) -> None:
        if max_cached < 1:
            raise ConfigError(f"max_cached={max_cached} is too small for the old snapshot cache; use >= 1.")
        self.max_cached = max_cached
        self._keys: list[Position] = []
        self._items: dict[Position, CachedSnapshot] = {}

    def add(self, snapshot: CachedSnapshot) -> list[CachedSnapshot]:
        """Insert ``snapshot``; return the snapshots evicted to stay within capacity (oldest first)."""
        key = snapshot.position
        if key not in self._items:
            bisect.insort(self._keys, key)
        self._items[key] = snapshot
        evicted: list[CachedSnapshot] = []
        while len(self._keys) > self.max_cached:
            evicted.append(self._items.pop(self._keys.pop(0)))
        return evicted

    def advanced(self, mark_delete: Position) -> CachedSnapshot | None:
        """``advancedMarkDeletePosition``: remove and return the newest snapshot ``<= mark_delete``."""
        last: CachedSnapshot | None = None
        while self._keys and self._keys[0] <= mark_delete:
            last = self._items.pop(self._keys.pop(0))
        return last

    def __len__(self) -> int:
        return len(self._keys)

    def snapshots(self) -> list[CachedSnapshot]:
        return [self._items[k] for k in self._keys]


@dataclass
class _Slot:
    snapshot: CachedSnapshot
    distance: int  # to the previous cached snapshot (0 for the head)


class NewSnapshotCache:
    """The cache of PR #25044 (docs §4.6): keeps snapshots spread out instead of dropping the oldest.

    ``distance(a, b)`` measures the open range between two snapshot positions (the broker: entries
    strictly between them). ``add`` clears the list when the new position is not after the newest cached
    one and appends with the distance to the newest; over capacity it evicts one interior snapshot (never
    the head or the tail): the one with the smallest ``d[i] + d[i+1]``, ties to the smaller position (the
    broker keeps the interior snapshots in a set ordered by that sum, then by position, and takes the
    first). The snapshot after the evicted one inherits the sum of both distances: the broker adds the two
    stored gaps and does not ask the distance function again, so with the broker's entry count the merged
    gap is one short per evicted snapshot, and the gaps it compares drift from the true ones.
    ``advanced`` pops every snapshot at or before the mark-delete and zeroes the new head's distance.
    """

    def __init__(
        self, distance: Callable[[Position, Position], int], max_cached: int = MAX_CACHED_NEW
    ) -> None:
        if max_cached < MIN_CACHED_NEW:
            # the broker's constructor rejects it ("maxSnapshotToCache must be >= 3"), docs §4.6
            raise ConfigError(
                f"max_cached={max_cached} is too small for the new snapshot cache; use >= {MIN_CACHED_NEW}."
            )
        self.max_cached = max_cached
        self.distance = distance
        self._slots: list[_Slot] = []

    def add(self, snapshot: CachedSnapshot) -> list[CachedSnapshot]:
        """Append ``snapshot``; return the snapshots removed (a clear, then at most one eviction)."""
        slots = self._slots
        removed: list[CachedSnapshot] = []
        if slots and snapshot.position <= slots[-1].snapshot.position:  # cursor reset / went backwards
            removed.extend(s.snapshot for s in slots)
            slots.clear()
        d = 0 if not slots else self.distance(slots[-1].snapshot.position, snapshot.position)
        slots.append(_Slot(snapshot, d))
        if len(slots) > self.max_cached:
            removed.append(self._evict_one())
        return removed

    def _evict_one(self) -> CachedSnapshot:
        slots = self._slots
        best_i = min(
            range(1, len(slots) - 1),
            key=lambda i: (slots[i].distance + slots[i + 1].distance, slots[i].snapshot.position),
        )
        gone = slots.pop(best_i)
        slots[best_i].distance += gone.distance
        return gone.snapshot

    def advanced(self, mark_delete: Position) -> CachedSnapshot | None:
        """``advancedMarkDeletePosition``: pop every snapshot ``<= mark_delete``; return the last."""
        last: CachedSnapshot | None = None
        while self._slots and self._slots[0].snapshot.position <= mark_delete:
            last = self._slots.pop(0).snapshot
        if self._slots:
            self._slots[0].distance = 0
        return last

    def __len__(self) -> int:
        return len(self._slots)

    def snapshots(self) -> list[CachedSnapshot]:
        return [s.snapshot for s in self._slots]

    def distances(self) -> list[int]:
        return [s.distance for s in self._slots]


# --- distance between snapshot positions --------------------------------------------------------------


@dataclass(frozen=True)
class EntryCounts:
    """Counts from ``EARLIEST`` that make ``getNumberOfEntries(open(a, b))`` a subtraction (docs §1.7, 4.x).

    ``before``: entries in ``open(EARLIEST, p)``; ``through``: in ``openClosed(EARLIEST, p)``;
    ``ledgers_before``: in ``open(EARLIEST, (p.ledger, -1))`` (entries of the ledgers listed before ``p``'s).
    """

    before: int | None
    through: int | None
    ledgers_before: int | None


def open_range_entries(a: Position, ca: EntryCounts, b: Position, cb: EntryCounts) -> int | None:
    """4.x ``getNumberOfEntries(Range.open(a, b))`` for ``a < b`` from the two positions' counts.

    Same ledger: ``b.entry - a.entry - 1`` when the ledger is listed, else 0. Different ledgers: the part
    of ``b``'s ledger before ``b`` (clamped like the broker) plus the listed ledgers strictly between plus
    what follows ``a`` in its ledger (literal entry arithmetic; nothing for a deleted ledger or ``(L,-1)``),
    which is ``before(b) - (ledgers_before(a) + (a.entry + 1 if a's ledger is listed and a.entry >= 0))``.
    None when a count is unknown (no managed ledger row for the topic).
    """
    if None in (cb.before, cb.through) or ca.ledgers_before is None:
        return None
    assert cb.before is not None and cb.through is not None
    if a[0] == b[0]:
        listed = b[1] >= 0 and cb.through - cb.before == 1
        return b[1] - a[1] - 1 if listed else 0
    a_listed = a[1] >= 0 and ca.through is not None and ca.before is not None and ca.through - ca.before == 1
    through_a = ca.ledgers_before + (a[1] + 1 if a_listed else 0)
    return cb.before - through_a


def distance_function(
    mode: DistanceMode, counts: dict[Position, EntryCounts] | None = None
) -> tuple[Callable[[Position, Position], int], list[bool]]:
    """The new cache's distance for ``mode`` and a flag list that records unknown distances.

    ``entries`` is the broker's (entries strictly between, from ``counts``); ``entry_id`` (entry-id
    difference) and ``constant`` (always 1) are the distance functions of Pulsar's own unit tests
    (docs §4.9), exposed as test hooks.
    """
    unknown: list[bool] = []
    if mode == "constant":
        return (lambda _a, _b: 1), unknown
    if mode == "entry_id":
        return (lambda a, b: b[1] - a[1]), unknown
    table = counts or {}
    missing = EntryCounts(None, None, None)

    def entries(a: Position, b: Position) -> int:
        d = open_range_entries(a, table.get(a, missing), b, table.get(b, missing))
        if d is None:
            unknown.append(True)
            return 0
        return d

    return entries, unknown


# --- one subscription's replay ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CacheEvent:
    """One ``add`` (a SNAPSHOT marker read) or ``advance`` (a mark-delete move) of a subscription."""

    seq: int
    op: str
    snapshot: CachedSnapshot | None = None
    mark_delete: Position | None = None


@dataclass
class AdvanceResult:
    """What one ``advance`` event returned and the cache state after it."""

    seq: int
    mark_delete: Position | None
    applied: CachedSnapshot | None
    cache_size_after: int
    evicted_since_previous_advance: list[str | None] = field(default_factory=list)
    error: str | None = None


def replay_events(
    events: Sequence[CacheEvent],
    *,
    new_cache: bool,
    max_cached: int,
    distance: Callable[[Position, Position], int] | None = None,
) -> list[AdvanceResult]:
    """Run one subscription's events (in ``seq`` order) through the old or new cache; one result per advance.

    Adds without a snapshot position are ignored (the broker never caches a snapshot without one);
    an advance without a mark-delete position leaves the cache alone and reports an error.
    """
    cache: OldSnapshotCache | NewSnapshotCache
    if new_cache:
        cache = NewSnapshotCache(distance or (lambda _a, _b: 1), max_cached)
    else:
        cache = OldSnapshotCache(max_cached)
    out: list[AdvanceResult] = []
    evicted: list[str | None] = []
    for ev in sorted(events, key=lambda e: e.seq):
        if ev.op == OP_ADD:
            if ev.snapshot is not None:
                evicted.extend(s.snapshot_id for s in cache.add(ev.snapshot))
        elif ev.op == OP_ADVANCE:
            if ev.mark_delete is None:
                out.append(
                    AdvanceResult(ev.seq, None, None, len(cache), evicted, "mark_delete_position is null")
                )
            else:
                applied = cache.advanced(ev.mark_delete)
                out.append(AdvanceResult(ev.seq, ev.mark_delete, applied, len(cache), evicted))
            evicted = []
    return out


# --- Spark: replay_snapshot_cache -------------------------------------------------------------------------


def _pos(ledger: Any, entry: Any) -> Position | None:
    if ledger is None or entry is None or pd.isna(ledger) or pd.isna(entry):
        return None
    return (int(ledger), int(entry))


def _opt_int(v: Any) -> int | None:
    return None if v is None or pd.isna(v) else int(v)


def _clusters_in(value: Any) -> tuple[ClusterPosition, ...]:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return ()
    out: list[ClusterPosition] = []
    for item in list(value):
        p = item.get("position") if item is not None else None
        pos = None if p is None else _pos(p.get("ledger_id"), p.get("entry_id"))
        if item is not None and pos is not None:
            out.append((str(item.get("cluster")), pos))
    return tuple(out)


def _clusters_out(clusters: tuple[ClusterPosition, ...]) -> list[dict[str, Any]]:
    return [{"cluster": c, "position": topic_rows.position_struct(p)} for c, p in clusters]


def _replay_group_fn(
    new_cache: bool | None, max_cached: int | None, mode: DistanceMode
) -> Callable[[pd.DataFrame], list[dict[str, Any]]]:
    """One subscription's events (sorted by ``seq``) -> its replay rows, without the keys (``map_groups``).

    ``new_cache`` None: the generation is the group's own (its ``_new`` column, from its version); a None
    ``max_cached`` is the generation's default."""

    def fn(pdf: pd.DataFrame) -> list[dict[str, Any]]:
        rows = pdf.to_dict("records")
        new = bool(rows[0]["_new"]) if new_cache is None and rows else bool(new_cache)
        generation = CACHE_GENERATION_NEW if new else CACHE_GENERATION_OLD
        cap = max_cached if max_cached is not None else (MAX_CACHED_NEW if new else MAX_CACHED_OLD)
        counts: dict[Position, EntryCounts] = {}
        events: list[CacheEvent] = []
        for r in rows:
            if r["op"] == OP_ADD:
                p = _pos(r["_pl"], r["_pe"])
                snap = (
                    None
                    if p is None
                    else CachedSnapshot(r["snapshot_id"], p, _clusters_in(r["snapshot_clusters"]))
                )
                if p is not None and new and mode == "entries":
                    counts[p] = EntryCounts(_opt_int(r["_f_lt"]), _opt_int(r["_f_le"]), _opt_int(r["_f_c"]))
                events.append(CacheEvent(int(r["seq"]), OP_ADD, snapshot=snap))
            elif r["op"] == OP_ADVANCE:
                events.append(CacheEvent(int(r["seq"]), OP_ADVANCE, mark_delete=_pos(r["_ml"], r["_me"])))
        dist, unknown = distance_function(mode, counts)
        results = replay_events(events, new_cache=new, max_cached=cap, distance=dist)
        out: list[dict[str, Any]] = []
        for res in results:
            applied = res.applied
            out.append(
                dict(
                    seq=res.seq,
                    mark_delete_position=topic_rows.position_struct(res.mark_delete),
                    snapshot_id=None if applied is None else applied.snapshot_id,
                    snapshot_local_position=None
                    if applied is None
                    else topic_rows.position_struct(applied.position),
                    snapshot_clusters=None if applied is None else _clusters_out(applied.clusters),
                    cache_size_after=res.cache_size_after,
                    evicted_since_previous_advance=list(res.evicted_since_previous_advance),
                    cache_generation=generation,
                    error=res.error or (_NO_DISTANCE if unknown else None),
                )
            )
        return out

    return fn


_REPLAY_FIELDS: Final = [
    T.StructField("seq", T.LongType(), False),
    T.StructField("mark_delete_position", POSITION_TYPE, True),
    T.StructField("snapshot_id", T.StringType(), True),
    T.StructField("snapshot_local_position", POSITION_TYPE, True),
    T.StructField("snapshot_clusters", CLUSTERS_TYPE, True),
    T.StructField("cache_size_after", T.IntegerType(), False),
    T.StructField("evicted_since_previous_advance", T.ArrayType(T.StringType()), False),
    T.StructField("cache_generation", T.StringType(), False),
    T.StructField("error", T.StringType(), True),
]


def _check_columns(df: DataFrame, required: Sequence[str], what: str) -> None:
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise ContractError(
            f"{what} lacks column(s) {missing}; it needs {list(required)} (DESIGN.md acceptance-facing API)."
        )


def _topic_key(df: DataFrame, export_keys: Sequence[str]) -> Column:
    """``cluster`` made unique per export, so the per-topic arithmetic of positions.py never mixes exports."""
    if not export_keys:
        return F.col("cluster")
    return F.concat_ws("\u0001", *[F.col(k).cast("string") for k in export_keys], F.col("cluster"))


_COUNT_POINT = topic_rows.K_FIRST_OWN
_COUNT_INPUT: Final = topic_rows.packed_schema([T.StructField("_p", POSITION_TYPE)])


def _entry_counts_fn(version: str | None) -> Callable[[pd.DataFrame], list[dict[str, Any]]]:
    """One topic's managed-ledger rows, ledger rows and snapshot positions -> one row per position with its
    three counts from ``EARLIEST`` (:class:`EntryCounts`), by the topic engine's ``getNumberOfEntries``
    (:meth:`pulsar_model.engine.topic_engine.ManagedLedger.count`, docs §1.7) of ``version`` (None: the
    managed-ledger row's own, null meaning the default version).

    A count is null where the broker would throw (the range check) and every count of the topic is null
    when its managed ledger is unknown (no row, several rows, no LAC, a version the model does not know):
    the replay then reports the distance as unknown instead of guessing it.
    """

    def fn(pdf: pd.DataFrame) -> list[dict[str, Any]]:
        rows = records(pdf)
        points = [topic_rows.engine_position(r["_p"]) for r in rows if r["_k"] == _COUNT_POINT]
        ml, lac = topic_rows.managed_ledger_of(rows, version)
        if lac is None:  # every count reads the LAC (the 4.x clamp)
            ml = None

        def count(hi: Position, hi_closed: bool) -> int | None:
            if ml is None:
                return None
            try:
                ml.check_range(EARLIEST, False, hi, hi_closed)
            except BrokerError:
                return None
            return ml.count(EARLIEST, False, hi, hi_closed)

        return [
            {
                "_p": topic_rows.position_struct(p),
                "_f_lt": count(p, False),
                "_f_le": count(p, True),
                "_f_c": count((p[0], -1), False),
            }
            for p in dict.fromkeys(points)
            if p is not None
        ]

    return fn


def _entry_counts(
    adds: DataFrame,
    ledgers: DataFrame,
    managed_ledgers: DataFrame,
    export_keys: Sequence[str],
    pulsar_version: str | None,
) -> DataFrame:
    """One row per distinct (topic, snapshot position): ``_f_lt``, ``_f_le``, ``_f_c`` (see EntryCounts).

    One grouped pass per topic with a snapshot over its managed-ledger row, its ledgers and its snapshot
    positions (:func:`_entry_counts_fn`): the ledgers are read once, not joined to every position three
    times as the set-based :func:`pulsar_model.positions.entries_between` would (the two are the same
    arithmetic: both are property-tested against the plain-Python oracle).
    """
    if pulsar_version is None:
        require_version_column(managed_ledgers, "managed_ledgers")
    points = adds.select(
        _topic_key(adds, export_keys).alias("cluster"), "topic", F.col("local_position").alias("_p")
    )
    led = ledgers.withColumn("cluster", _topic_key(ledgers, export_keys))
    ml = managed_ledgers.withColumn("cluster", _topic_key(managed_ledgers, export_keys))
    # only the topics with a snapshot (usually a few; broadcast: one row per such topic)
    with_snapshots = F.broadcast(points.select("cluster", "topic").distinct())
    led, ml = (df.join(with_snapshots, ["cluster", "topic"], "left_semi") for df in (led, ml))
    tagged = topic_rows.topic_state_rows(ml, led, _COUNT_INPUT, pulsar_version).unionByName(
        topic_rows.tagged(points, _COUNT_POINT, {"_p": F.col("_p")}, _COUNT_INPUT)
    )
    schema = T.StructType(
        [
            *_COUNT_INPUT.fields[:2],
            T.StructField("_p", POSITION_TYPE),
            *[T.StructField(f"_f_{k}", T.LongType()) for k in ("lt", "le", "c")],
        ]
    )
    return map_groups(tagged, ["cluster", "topic"], _entry_counts_fn(pulsar_version), schema)


def replay_snapshot_cache(
    events: DataFrame,
    ledgers: DataFrame,
    managed_ledgers: DataFrame,
    max_cached: int | None = None,
    pulsar_version: str | None = DEFAULT_PULSAR_VERSION,
    *,
    distance: DistanceMode = "entries",
) -> DataFrame:
    """Replay each replicated subscription's snapshot cache; one row per ``advance`` event (docs §4.6).

    ``events``: ``cluster, topic, subscription, seq, op`` (``add`` | ``advance``), ``snapshot_id``,
    ``local_position`` and ``snapshot_clusters`` (``array<struct<cluster, position>>``) for adds,
    ``mark_delete_position`` for advances (``export_id``/``export_date`` too when present: one replay per
    export). Events run in ``seq`` order per (cluster, topic, subscription) inside
    :func:`pulsar_model.engine.grouped.map_groups` (one shuffle and sort; the cost is per event, not per
    group).
    The cache generation follows ``pulsar_version`` (old before PR #25044,
    new in 4.0.9+/4.1.3+/4.2+); ``max_cached`` defaults to 10 (old) / 30 (new); the new cache refuses
    fewer than 3 (:class:`ConfigError`), as the broker does. ``pulsar_version=None``: each subscription's
    generation follows the ``pulsar_version`` column of its events (null = the default version; the new
    cache's distances then read ``managed_ledgers.pulsar_version`` too), and a given ``max_cached`` must
    suit both generations.

    Output columns: the subscription key, ``seq``, ``mark_delete_position``, the snapshot the advance
    returned (``snapshot_id``, ``snapshot_local_position``, ``snapshot_clusters``; null when none, i.e.
    no UPDATE marker), ``cache_size_after``, ``evicted_since_previous_advance`` (snapshot ids the adds since
    the previous advance pushed out, including a new-cache clear), ``cache_generation`` and ``error``.

    ``distance`` is a test hook for the new cache: ``entries`` (the broker's: entries strictly between the
    two positions, 4.x ``getNumberOfEntries(open(a, b))`` over ``ledgers``/``managed_ledgers``, so deleted
    and empty ledgers and sparse ids count as the broker counts them), ``entry_id`` (entry-id difference)
    or ``constant`` (1) - the distance functions of Pulsar's unit tests (docs §4.9). The old cache never
    reads the ledgers. Pure and lazy.
    """
    _check_columns(events, EVENT_COLUMNS, "events")
    if distance not in ("entries", "entry_id", "constant"):
        raise ConfigError(f"distance={distance!r} is not one of 'entries', 'entry_id', 'constant'.")
    new_cache = None if pulsar_version is None else uses_new_snapshot_cache(pulsar_version)
    if pulsar_version is None and "pulsar_version" not in events.columns:
        raise ConfigError(
            "pulsar_version=None reads events.pulsar_version (each subscription's cluster version), which "
            "events does not have: add the column or pass a version string such as '4.1.3'"
        )
    cap = max_cached if max_cached is not None else (MAX_CACHED_OLD if new_cache is False else MAX_CACHED_NEW)
    floor = 1 if new_cache is False else MIN_CACHED_NEW
    if cap < floor:
        raise ConfigError(
            f"max_cached={cap} is too small for the {'old' if new_cache is False else 'new'} snapshot cache "
            f"(use >= {floor})."
        )
    export_keys = [k for k in EXPORT_KEYS if k in events.columns]
    keys = ["cluster", "topic", "subscription", *export_keys]
    ev = events.select(
        *keys,
        F.col("seq").cast("long").alias("seq"),
        F.lower(F.col("op").cast("string")).alias("op"),
        F.col("snapshot_id").cast("string").alias("snapshot_id"),
        F.col("local_position").cast(POSITION_TYPE).alias("local_position"),
        F.col("snapshot_clusters").cast(CLUSTERS_TYPE).alias("snapshot_clusters"),
        F.col("mark_delete_position").cast(POSITION_TYPE).alias("mark_delete_position"),
        *([F.col("pulsar_version")] if new_cache is None else []),
    )
    if new_cache is None:
        ev = with_flags(ev, drop_version=True).select(
            *ev.columns[:-1],
            F.coalesce(F.col(FLAGS_COLUMN)["new_snapshot_cache"], F.lit(False)).alias("_new"),
        )
    else:
        ev = ev.select("*", F.lit(new_cache).alias("_new"))
    if new_cache is not False and distance == "entries":
        ledger_exports = [k for k in export_keys if k in ledgers.columns and k in managed_ledgers.columns]
        adds = ev.where(F.col("_new") & (F.col("op") == OP_ADD) & F.col("local_position").isNotNull())
        counts = _entry_counts(adds, ledgers, managed_ledgers, ledger_exports, pulsar_version)
        ev = ev.withColumn("_tk", _topic_key(ev, ledger_exports)).join(
            counts.withColumnRenamed("cluster", "_tk").withColumnRenamed("_p", "local_position"),
            on=["_tk", "topic", "local_position"],
            how="left",
        )
    else:
        ev = ev.select("*", *[F.lit(None).cast("long").alias(f"_f_{k}") for k in ("lt", "le", "c")])
    flat = ev.select(
        *keys,
        "seq",
        "op",
        "snapshot_id",
        F.col("local_position.ledger_id").alias("_pl"),
        F.col("local_position.entry_id").alias("_pe"),
        "snapshot_clusters",
        F.col("mark_delete_position.ledger_id").alias("_ml"),
        F.col("mark_delete_position.entry_id").alias("_me"),
        "_f_lt",
        "_f_le",
        "_f_c",
        "_new",
    )
    key_fields = [f for f in flat.schema.fields if f.name in keys]
    schema = T.StructType([*key_fields, *_REPLAY_FIELDS])
    return map_groups(flat, keys, _replay_group_fn(new_cache, max_cached, distance), schema, order=["seq"])


# --- events from exported markers and cursors ---------------------------------------------------------------


def _sorted_clusters_key(col: Column) -> Column:
    """A comparable text key of a clusters array, order-insensitive (UPDATE sorts by cluster, docs §4.4)."""
    return F.to_json(F.array_sort(col.cast(CLUSTERS_TYPE)))


def snapshot_cache_events(markers: DataFrame, cursors: DataFrame) -> DataFrame:
    """Cache events of every replicated subscription, derived from an export (docs §4.4, §4.6, §4.8).

    One row per event of a cursor with ``is_replicated`` (``cluster, topic, subscription, seq, op,
    snapshot_id, local_position, snapshot_clusters, mark_delete_position`` plus ``event_position``,
    ``event_source`` and ``update_clusters``; export keys when present):

    * ``add``: every SNAPSHOT marker (type 12, written locally) in the subscription's topic and cluster that
      its dispatcher has read: position ``< read_position`` (``<= mark_delete_position`` when the export
      has no read position). ``event_source = 'snapshot_marker'``.
    * ``advance`` per UPDATE marker (type 13, written locally, ``subscription_name`` = the cursor):
      the mark-delete reached at least the ``local_message_id`` of the snapshot the UPDATE carries. Its
      ``mark_delete_position`` is that lower bound: the ``local_position`` of the newest SNAPSHOT marker
      before the UPDATE whose clusters equal the UPDATE's (sorted by cluster); with no such snapshot, the
      entry just before the UPDATE marker (the latest the mark-delete can have been).
      ``event_source = 'update_marker'``, ``update_clusters`` = the UPDATE's clusters.
    * a final ``advance`` to the cursor's current ``mark_delete_position`` (``event_source = 'cursor'``).

    ``seq`` orders events by position (the final advance last). Assumptions, because an export shows the
    end state and not every acknowledgement: the dispatcher read SNAPSHOT markers in position order and
    the mark-delete advances happened between the reads as the markers' positions interleave; advances
    that returned no snapshot left no trace and are not replayed (they change nothing in either cache);
    the subscription existed (and its dispatcher read) since before the oldest exported SNAPSHOT marker;
    markers of trimmed ledgers are gone, so the earliest cached snapshots may be missing. A dispatcher
    never reads entries at or below the mark-delete position, so a SNAPSHOT marker it had not reached when
    the mark-delete jumped over it (e.g. set by an UPDATE arriving from another cluster, §4.4
    ``receiveSubscriptionUpdated``) was never cached; the export cannot tell when the dispatcher read a
    marker, so such markers are still added here (see ``predicted_not_observed`` in
    :func:`predicted_updates`). Pure and lazy.
    """
    _check_columns(markers, ("cluster", "topic", "position", "marker_type"), "markers")
    _check_columns(
        cursors, ("cluster", "topic", "cursor_name", "is_replicated", "mark_delete_position"), "cursors"
    )
    export_keys = [k for k in EXPORT_KEYS if k in markers.columns and k in cursors.columns]
    tkeys = ["cluster", "topic", *export_keys]
    read_position = (
        F.col("read_position").cast(POSITION_TYPE) if "read_position" in cursors.columns else F.lit(None)
    )
    subs = cursors.where(F.col("is_replicated")).select(
        *tkeys,
        F.col("cursor_name").alias("subscription"),
        F.col("mark_delete_position").cast(POSITION_TYPE).alias("_md"),
        read_position.cast(POSITION_TYPE).alias("_rp"),
    )
    local = markers.where(F.col("replicated_from").isNull())
    snaps = local.where(F.col("marker_type") == int(MarkerType.REPLICATED_SUBSCRIPTION_SNAPSHOT)).select(
        *tkeys,
        F.col("position").cast(POSITION_TYPE).alias("event_position"),
        "snapshot_id",
        F.col("local_position").cast(POSITION_TYPE).alias("local_position"),
        F.col("clusters").cast(CLUSTERS_TYPE).alias("snapshot_clusters"),
    )
    read = F.when(F.col("_rp").isNotNull(), F.col("event_position") < F.col("_rp")).otherwise(
        F.col("event_position") <= F.col("_md")
    )
    adds = snaps.join(subs, on=tkeys).where(read)
    updates = (
        local.where(F.col("marker_type") == int(MarkerType.REPLICATED_SUBSCRIPTION_UPDATE))
        .select(
            *tkeys,
            F.col("subscription_name").alias("subscription"),
            F.col("position").cast(POSITION_TYPE).alias("event_position"),
            F.col("clusters").cast(CLUSTERS_TYPE).alias("update_clusters"),
        )
        .join(subs.select(*tkeys, "subscription"), on=[*tkeys, "subscription"])
    )
    skeys = [*tkeys, "subscription"]
    # each UPDATE with its newest matching snapshot in one left join and aggregate (an UPDATE is one row
    # per (subscription, position): the aggregate keeps every UPDATE, matched or not, without a join back)
    matched = (
        updates.alias("u")
        .join(
            adds.alias("a"),
            on=[
                *[F.col(f"u.{k}") == F.col(f"a.{k}") for k in skeys],
                F.col("a.event_position") < F.col("u.event_position"),
                _sorted_clusters_key(F.col("u.update_clusters"))
                == _sorted_clusters_key(F.col("a.snapshot_clusters")),
            ],
            how="left",
        )
        .groupBy(
            *[F.col(f"u.{k}").alias(k) for k in skeys],
            F.col("u.event_position").alias("event_position"),
            F.col("u.update_clusters").alias("update_clusters"),
        )
        .agg(F.max_by(F.col("a.local_position"), F.col("a.event_position")).alias("_matched_md"))
    )
    before_update = position(F.col("event_position.ledger_id"), F.col("event_position.entry_id") - 1)
    advance_updates = matched.select(
        *skeys,
        F.lit(OP_ADVANCE).alias("op"),
        F.lit(None).cast("string").alias("snapshot_id"),
        F.lit(None).cast(POSITION_TYPE).alias("local_position"),
        F.lit(None).cast(CLUSTERS_TYPE).alias("snapshot_clusters"),
        F.coalesce(F.col("_matched_md"), before_update).alias("mark_delete_position"),
        "event_position",
        F.lit("update_marker").alias("event_source"),
        "update_clusters",
    )
    add_events = adds.select(
        *skeys,
        F.lit(OP_ADD).alias("op"),
        "snapshot_id",
        "local_position",
        "snapshot_clusters",
        F.lit(None).cast(POSITION_TYPE).alias("mark_delete_position"),
        "event_position",
        F.lit("snapshot_marker").alias("event_source"),
        F.lit(None).cast(CLUSTERS_TYPE).alias("update_clusters"),
    )
    final = subs.select(
        *skeys,
        F.lit(OP_ADVANCE).alias("op"),
        F.lit(None).cast("string").alias("snapshot_id"),
        F.lit(None).cast(POSITION_TYPE).alias("local_position"),
        F.lit(None).cast(CLUSTERS_TYPE).alias("snapshot_clusters"),
        F.col("_md").alias("mark_delete_position"),
        F.lit(None).cast(POSITION_TYPE).alias("event_position"),
        F.lit("cursor").alias("event_source"),
        F.lit(None).cast(CLUSTERS_TYPE).alias("update_clusters"),
    )
    events = add_events.unionByName(advance_updates).unionByName(final)
    order = F.coalesce(F.col("event_position"), position(F.lit(LATEST[0]), F.lit(LATEST[1])))
    w = Window.partitionBy(*skeys).orderBy(order, F.col("event_source"))
    return events.select(
        *skeys[:2],
        "subscription",
        *export_keys,
        F.row_number().over(w).cast("long").alias("seq"),
        "op",
        "snapshot_id",
        "local_position",
        "snapshot_clusters",
        "mark_delete_position",
        "event_position",
        "event_source",
        "update_clusters",
    )


def predicted_updates(
    markers: DataFrame,
    cursors: DataFrame,
    ledgers: DataFrame,
    managed_ledgers: DataFrame,
    max_cached: int | None = None,
    pulsar_version: str | None = DEFAULT_PULSAR_VERSION,
) -> DataFrame:
    """UPDATE markers the cache replay predicts beside the ones each cluster wrote (docs §4.4, §4.6).

    Events come from :func:`snapshot_cache_events` (read its assumptions) and run through
    :func:`replay_snapshot_cache`. One row per (cluster, topic, subscription, update) - export keys too
    when present - that was observed or predicted: ``seq``, ``update_position`` (the observed UPDATE
    marker; null for a prediction at the cursor's current mark-delete), ``observed_clusters``,
    ``mark_delete_position`` (the replayed advance), ``predicted_snapshot_id``,
    ``predicted_local_position``, ``predicted_clusters`` and ``outcome``:

    * ``matched``: the replay returned a snapshot whose clusters equal the UPDATE's (order-insensitive);
    * ``mismatch``: it returned a different snapshot (the cache evicted the observed one: wrong version or
      ``max_cached``, or markers missing from the export);
    * ``observed_not_predicted``: the replay returned nothing for an observed UPDATE;
    * ``predicted_not_observed``: at the current mark-delete the replay still returns a snapshot, so the
      broker should have written an UPDATE that the export does not show - or the event model missed:
      the dispatcher never read that SNAPSHOT marker because the mark-delete had already jumped past it
      (typically moved by an UPDATE from another cluster), or the mark-delete reached the snapshot before
      the dispatcher read its marker and has not moved since.
    ``pulsar_version=None``: each topic's ``managed_ledgers.pulsar_version``. Pure and lazy.
    """
    events = snapshot_cache_events(markers, cursors)
    replay = replay_snapshot_cache(
        with_topic_versions(events, managed_ledgers) if pulsar_version is None else events,
        ledgers,
        managed_ledgers,
        max_cached,
        pulsar_version,
    )
    return compare_predicted_updates(events, replay)


def with_topic_versions(events: DataFrame, managed_ledgers: DataFrame) -> DataFrame:
    """``events`` plus ``pulsar_version``: the one of its topic's managed-ledger row (export keys too when
    both carry them), for :func:`replay_snapshot_cache` with ``pulsar_version=None``. Pure and lazy."""
    keys = [
        "cluster",
        "topic",
        *[k for k in EXPORT_KEYS if k in events.columns and k in managed_ledgers.columns],
    ]
    versions = managed_ledgers.select(*keys, "pulsar_version").dropDuplicates(keys)
    return events.drop("pulsar_version").join(versions, keys, "left")


def compare_predicted_updates(events: DataFrame, replay: DataFrame) -> DataFrame:
    """:func:`predicted_updates` from already built cache ``events`` (:func:`snapshot_cache_events`) and
    their ``replay`` (:func:`replay_snapshot_cache`): same rows and columns.

    For callers that also feed the same events and replay to another consumer (the nightly stage's
    ``snapshot_cache_evicted_useful`` detector): building them once keeps the plans small and lets the
    caller persist them. Pure and lazy.
    """
    export_keys = [k for k in EXPORT_KEYS if k in events.columns]
    skeys = ["cluster", "topic", "subscription", *export_keys]
    advances = events.where(F.col("op") == OP_ADVANCE).select(
        *skeys, "seq", "event_position", "event_source", "update_clusters"
    )
    joined = advances.join(replay, on=[*skeys, "seq"])
    observed = F.col("event_source") == "update_marker"
    predicted = F.col("snapshot_id").isNotNull() | F.col("snapshot_local_position").isNotNull()
    same = _sorted_clusters_key(F.col("update_clusters")) == _sorted_clusters_key(F.col("snapshot_clusters"))
    outcome = (
        F.when(observed & predicted & same, F.lit("matched"))
        .when(observed & predicted, F.lit("mismatch"))
        .when(observed, F.lit("observed_not_predicted"))
        .otherwise(F.lit("predicted_not_observed"))
    )
    return joined.where(observed | predicted).select(
        *skeys,
        "seq",
        F.col("event_position").alias("update_position"),
        F.col("update_clusters").alias("observed_clusters"),
        "mark_delete_position",
        F.col("snapshot_id").alias("predicted_snapshot_id"),
        F.col("snapshot_local_position").alias("predicted_local_position"),
        F.col("snapshot_clusters").alias("predicted_clusters"),
        outcome.alias("outcome"),
        "error",
    )
