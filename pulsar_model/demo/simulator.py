"""Deterministic simulation of one Pulsar topic (partition) on one cluster: the demo's engine.

One :class:`TopicSim` is one managed ledger with its cursors, transaction buffer and the processes
that act on it (producers call :meth:`TopicSim.publish`, :class:`Dispatcher` delivers and acknowledges,
:class:`Reader` reads through a non-durable cursor, :class:`DedupCursor` snapshots producer sequence
ids). Everything runs on an :class:`EventLoop` in simulated milliseconds; nothing reads the wall clock
and every random choice comes from a ``random.Random`` the caller seeds, so the same inputs give the
same ledgers, cursors and stored bytes.

The state machine follows docs §0-§2 (ledgers, LAC, roll-over, trimming, mark-delete and its
extension over individually deleted entries, precise and non-precise backlog, the size estimators),
§5 (compaction), §6 (failover active consumer) and §8 (transaction buffer, maxReadPosition).
Replicated-subscription markers live in :mod:`pulsar_model.demo.replication`.

Stored entries are produced by :func:`encode_content`, the only place that calls the wire codec.
"""

from __future__ import annotations

import bisect
import functools
import heapq
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

import mmh3

from pulsar_model.transactions import max_read_uses_previous_position
from pulsar_model.wire import codec as _codec
from pulsar_model.wire.markers import Marker, MarkerType, Snapshot, TxnMarker

Pos = tuple[int, int]

#: docs §0.1: "(L,-1)" is a legal mark-delete position; EARLIEST is (-1,-1).
EARLIEST: Pos = (-1, -1)
#: docs §5.2: name of the compaction subscription and its cursor property.
COMPACTION_CURSOR = "__compaction"
COMPACTED_LEDGER_PROPERTY = "CompactedTopicLedger"
#: Deduplication cursor name (docs §1.11).
DEDUP_CURSOR = "pulsar.dedup"
#: Replicator cursor prefix (docs §4.2, ``replicatorPrefix``).
REPLICATOR_PREFIX = "pulsar.repl"
#: Cursor property that marks a replicated subscription (docs §4.2: value 1).
REPLICATED_SUBSCRIPTION_PROPERTY = "pulsar.replicated.subscription"
#: docs §6.3: virtual nodes per consumer on the failover hash ring.
CONSUMER_CONSISTENT_HASH_REPLICAS = 100
#: Cursor ledgers switch after this long (broker default managedLedgerCursorRolloverTimeInSeconds=14400).
CURSOR_LEDGER_ROLLOVER_MS = 14_400_000

CursorKind = Literal["subscription", "replicator", "compaction", "dedup", "reader"]


def version_tuple(version: str) -> tuple[int, int, int]:
    """``"4.0.8"`` -> ``(4, 0, 8)``; missing parts are 0, non-numeric suffixes are ignored."""
    parts: list[int] = []
    for piece in version.split(".")[:3]:
        digits = ""
        for ch in piece:
            if not ch.isdigit():
                break
            digits += ch
        parts.append(int(digits) if digits else 0)
    while len(parts) < 3:
        parts.append(0)
    return (parts[0], parts[1], parts[2])


def fmt_pos(pos: Pos) -> str:
    """Position as Pulsar prints it: ``"L:E"``."""
    return f"{pos[0]}:{pos[1]}"


# --- event loop -----------------------------------------------------------------------------------


class EventLoop:
    """A discrete-event loop over simulated epoch milliseconds; ties run in scheduling order."""

    def __init__(self, start_ms: int) -> None:
        self.now = start_ms
        self._heap: list[tuple[int, int, Callable[[int], None]]] = []
        self._seq = 0

    def at(self, t_ms: int, fn: Callable[[int], None]) -> None:
        """Run ``fn(t)`` at ``t_ms`` (never earlier than the current time)."""
        heapq.heappush(self._heap, (max(t_ms, self.now), self._seq, fn))
        self._seq += 1

    def run(self, until_ms: int) -> None:
        """Run every event due at or before ``until_ms``; later events are discarded."""
        heap = self._heap
        while heap and heap[0][0] <= until_ms:
            t, _, fn = heapq.heappop(heap)
            self.now = t
            fn(t)
        self.now = until_ms
        heap.clear()


class LedgerIdAllocator:
    """BookKeeper ledger ids for one topic: unique cluster-wide, increasing, sparse (docs §0.2, §11.1).

    Ids are ``slot * stride + topic_slot`` with ``slot`` the second since the cluster's epoch (bumped
    when a topic needs two ledgers in the same second), so ids of different topics interleave by
    creation time like BookKeeper's cluster-wide allocation, without simulating topics together.
    """

    def __init__(self, epoch_ms: int, stride: int, topic_slot: int) -> None:
        if not 0 <= topic_slot < stride:
            raise ValueError(f"topic_slot {topic_slot} must be in [0, {stride})")
        self._epoch = epoch_ms
        self._stride = stride
        self._slot = topic_slot
        self._last = -1

    def next(self, t_ms: int) -> int:
        s = max((t_ms - self._epoch) // 1000, self._last + 1)
        self._last = s
        return s * self._stride + self._slot


# --- entry contents -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Message:
    """One logical message (a batch slot or the message of a non-batched entry)."""

    key: str | None
    payload: bytes
    null_value: bool = False
    properties: tuple[tuple[str, str], ...] = ()
    event_time_ms: int | None = None


@dataclass(frozen=True, slots=True)
class DataContent:
    """A data entry as a producer sent it: batched (``num_messages_in_batch`` set) or a single message."""

    producer: str
    sequence_id: int
    publish_ms: int
    messages: tuple[Message, ...]
    batched: bool
    compression: str = "NONE"
    txn: tuple[int, int] | None = None
    schema_version: bytes | None = None

    def sequence_ids(self) -> list[int]:
        """Per-message sequence ids: the entry's id plus the batch index (the messages contract)."""
        return [self.sequence_id + i for i in range(len(self.messages))]


@dataclass(frozen=True, slots=True)
class MarkerContent:
    """A server-only marker entry (docs §4.3, §8.3); ``replicate_to=None`` = field not set."""

    marker: Marker
    publish_ms: int
    replicate_to: tuple[str, ...] | None = None
    txn: tuple[int, int] | None = None


Content = DataContent | MarkerContent


def encode_content(
    content: Content, *, replicated_from: str | None, broker_entry: tuple[int, int] | None
) -> bytes:
    """The stored bytes of one entry (the only call site of the wire codec's encoders).

    ``broker_entry`` is ``(broker_timestamp_ms, index)`` on clusters with broker entry metadata.
    """
    bem = None if broker_entry is None else _codec.BrokerEntry(broker_entry[0], broker_entry[1])
    if isinstance(content, MarkerContent):
        return _codec.encode_marker_entry(
            content.marker,
            publish_time_ms=content.publish_ms,
            replicated_from=replicated_from,
            replicate_to=content.replicate_to,
            txn_id=content.txn,
            broker_entry=bem,
        )
    if content.batched:
        items = [
            _codec.BatchItem(
                key=m.key,
                payload=m.payload,
                null_value=m.null_value,
                properties=dict(m.properties),
                sequence_id=content.sequence_id + i,
                event_time_ms=m.event_time_ms,
            )
            for i, m in enumerate(content.messages)
        ]
        return _codec.encode_batch_entry(
            producer_name=content.producer,
            sequence_id=content.sequence_id,
            publish_time_ms=content.publish_ms,
            items=items,
            replicated_from=replicated_from,
            txn_id=content.txn,
            compression=content.compression,
            schema_version=content.schema_version,
            broker_entry=bem,
        )
    m = content.messages[0]
    return _codec.encode_message_entry(
        producer_name=content.producer,
        sequence_id=content.sequence_id,
        publish_time_ms=content.publish_ms,
        payload=m.payload,
        key=m.key,
        properties=dict(m.properties) or None,
        event_time_ms=m.event_time_ms,
        replicated_from=replicated_from,
        txn_id=content.txn,
        null_value=m.null_value,
        compression=content.compression,
        schema_version=content.schema_version,
        broker_entry=bem,
    )


def encode_compacted(content: DataContent, keep: Sequence[bool]) -> bytes:
    """A batch re-written by compaction: same slot count, dropped slots as compacted-out placeholders."""
    items = [
        _codec.BatchItem(
            key=m.key,
            payload=m.payload if k else b"",
            null_value=m.null_value and k,
            compacted_out=not k,
            properties=dict(m.properties) if k else {},
            sequence_id=content.sequence_id + i,
            event_time_ms=m.event_time_ms,
        )
        for i, (m, k) in enumerate(zip(content.messages, keep, strict=True))
    ]
    return _codec.encode_batch_entry(
        producer_name=content.producer,
        sequence_id=content.sequence_id,
        publish_time_ms=content.publish_ms,
        items=items,
        compression=content.compression,
        schema_version=content.schema_version,
    )


@dataclass(slots=True)
class EntryRecord:
    """One stored entry of a managed ledger (bytes plus the logical content that produced them)."""

    position: Pos
    size: int
    data: bytes | None
    add_ms: int
    content: Content
    replicated_from: str | None
    trace: str | None = None

    @property
    def marker_type(self) -> int | None:
        c = self.content
        return int(c.marker.marker_type) if isinstance(c, MarkerContent) else None

    @property
    def n_messages(self) -> int:
        c = self.content
        return len(c.messages) if isinstance(c, DataContent) else 1

    @property
    def txn(self) -> tuple[int, int] | None:
        return self.content.txn


@dataclass(slots=True)
class LedgerState:
    """One ledger of the managed ledger; ``closed_ms == 0`` while it is the open ledger (docs §0.2)."""

    ledger_id: int
    created_ms: int
    entries: list[EntryRecord] = field(default_factory=list)
    size: int = 0
    closed_ms: int = 0


@dataclass(frozen=True)
class LedgerConfig:
    """Managed-ledger roll-over and retention settings of one topic."""

    max_entries: int = 100
    max_size_bytes: int = 64 * 1024
    rollover_ms: int = 30 * 60_000
    min_rollover_ms: int = 0
    retention_ms: int = 0


@dataclass(frozen=True)
class ClusterInfo:
    """What the simulation needs to know about one cluster."""

    name: str
    version: str
    broker_entry_metadata: bool = False

    @property
    def vt(self) -> tuple[int, int, int]:
        return version_tuple(self.version)


@dataclass(slots=True)
class ConsumerInfo:
    """One connected consumer of a subscription (stats ``consumers[]``), in arrival order."""

    name: str
    priority: int
    address: str
    client_version: str
    connected_since_ms: int
    msg_out: int = 0
    bytes_out: int = 0
    unacked: int = 0
    last_acked_ms: int = 0
    last_consumed_ms: int = 0


class SnapshotCacheLike(Protocol):
    """The replicated-subscription snapshot cache as the dispatcher uses it (docs §4.6)."""

    def add(self, snapshot: Snapshot) -> None: ...

    def advanced(self, md: Pos) -> Snapshot | None: ...


@dataclass(eq=False)
class CursorSim:
    """One cursor of a managed ledger (docs §1.2): md, read position, individually deleted entries."""

    name: str
    kind: CursorKind
    durable: bool
    order: int
    created_ms: int
    md: Pos
    rp: Pos
    idm: set[Pos] = field(default_factory=set)
    consumed: int = 0
    properties: dict[str, int] = field(default_factory=dict)
    cursor_ledger: int = -1
    cursor_ledger_last_entry: int = -1
    last_switch_ms: int = 0
    last_md_advanced_ms: int = 0
    last_acked_ms: int = 0
    last_consumed_ms: int = 0
    active: bool = False
    sub_type: str | None = None
    replicated: bool = False
    consumers: list[ConsumerInfo] = field(default_factory=list)
    msg_out: int = 0
    bytes_out: int = 0
    read_position_when_joining: Pos | None = None
    snapshot_cache: SnapshotCacheLike | None = None
    had_dispatcher: bool = False


EntryListener = Callable[[int, EntryRecord], None]
MdListener = Callable[[int, CursorSim], None]


# --- the topic --------------------------------------------------------------------------------------


class TopicSim:
    """One topic (partition) on one cluster: managed ledger, cursors, transaction buffer.

    Positions are ``(ledger_id, entry_id)``. ``ledgers`` holds the listed ledgers (trimmed ones are
    gone), the open ledger is ``current``; ``lac`` survives roll-over (docs §0.2).
    """

    def __init__(
        self,
        loop: EventLoop,
        cluster: ClusterInfo,
        topic: str,
        cfg: LedgerConfig,
        alloc: LedgerIdAllocator,
        *,
        keep_trimmed_keys: bool = False,
    ) -> None:
        self.loop = loop
        self.cluster = cluster
        self.topic = topic
        self.cfg = cfg
        self.alloc = alloc
        self.ledgers: dict[int, LedgerState] = {}
        self.ids: list[int] = []
        self.current: int | None = None
        self.lac: Pos = EARLIEST
        self.total_size = 0
        self.number_of_entries = 0
        self.entries_added = 0
        self.broker_index = -1
        self.last_ledger_created_ms = 0
        self.cursors: dict[str, CursorSim] = {}
        self._cursor_order = 0
        self.entry_listeners: list[EntryListener] = []
        self.md_listeners: list[MdListener] = []
        # transaction buffer (docs §8.4)
        self.txn_ongoing: dict[tuple[int, int], Pos] = {}
        self.txn_aborted: set[tuple[int, int]] = set()
        self.txn_committed: set[tuple[int, int]] = set()
        self.max_read: Pos = EARLIEST
        # stats counters
        self.msg_in = 0
        self.bytes_in = 0
        self.publishers: dict[str, dict[str, int]] = {}
        self.last_data_publish_ms = 0
        self.trimmed_ledgers = 0
        self.trimmed_keys: set[tuple[str, int]] = set()
        self.keep_trimmed_keys = keep_trimmed_keys
        self.compacted_ledger: tuple[int, int, int] | None = None
        self.compaction_horizon: Pos | None = None
        self.dedup_enabled = False
        self.reloaded_at_ms: int | None = None

    # -- ledgers -----------------------------------------------------------------------------------

    def open(self, t: int) -> None:
        """Create the first ledger; LAC = ``(first, -1)`` (docs §0.2)."""
        lid = self._new_ledger(t)
        self.lac = (lid, -1)
        self.max_read = self.lac

    def _new_ledger(self, t: int) -> int:
        lid = self.alloc.next(t)
        self.ledgers[lid] = LedgerState(lid, t)
        self.ids.append(lid)
        self.current = lid
        self.last_ledger_created_ms = t
        self.loop.at(t + self.cfg.rollover_ms, self._roll_check)
        return lid

    def _roll_check(self, t: int) -> None:
        cur = self.current
        if cur is None:
            return
        led = self.ledgers[cur]
        if t - led.created_ms < self.cfg.rollover_ms:
            return  # an event of an earlier ledger
        if led.entries:
            self.roll(t)
        else:
            self.loop.at(t + self.cfg.rollover_ms, self._roll_check)

    def roll(self, t: int) -> None:
        """Close the open ledger and open a new, empty one; LAC stays (docs §0.2, 3.x+ eager roll)."""
        assert self.current is not None
        self.ledgers[self.current].closed_ms = t
        self._new_ledger(t)
        self.trim(t)
        if self.cfg.retention_ms > 0:
            self.loop.at(t + self.cfg.retention_ms + 1, self.trim)

    def _full(self, t: int) -> bool:
        assert self.current is not None
        led = self.ledgers[self.current]
        full = len(led.entries) >= self.cfg.max_entries or led.size >= self.cfg.max_size_bytes
        age = t - led.created_ms
        if full or age >= self.cfg.rollover_ms:
            return age > self.cfg.min_rollover_ms if self.cfg.min_rollover_ms > 0 else True
        return False

    def entries_of(self, lid: int) -> int:
        return len(self.ledgers[lid].entries)

    def first_ledger(self) -> int | None:
        return self.ids[0] if self.ids else None

    def _next_ledger(self, lid: int) -> int | None:
        i = bisect.bisect_right(self.ids, lid)
        return self.ids[i] if i < len(self.ids) else None

    # -- position arithmetic (docs §1.3-1.5) --------------------------------------------------------

    def prev(self, p: Pos) -> Pos:
        """``getPreviousPosition`` (docs §1.3)."""
        if p[1] > 0:
            return (p[0], p[1] - 1)
        i = bisect.bisect_left(self.ids, p[0])
        if i == 0:
            return (p[0], -1)
        for j in range(i - 1, -1, -1):
            n = self.entries_of(self.ids[j])
            if n > 0:
                return (self.ids[j], n - 1)
        return (self.ids[0], -1)

    def is_valid(self, p: Pos) -> bool:
        """``isValidPosition`` (docs §1.4, 3.x/4.x)."""
        if p[0] not in self.ledgers or p[1] < 0:
            return False
        if self.current is not None and p[0] == self.current:
            return (p[0] == self.lac[0] and p[1] <= self.lac[1] + 1) or p[1] == 0
        if p[0] == self.lac[0]:
            return p[1] <= self.lac[1]
        return p[1] < self.entries_of(p[0])

    def next_valid(self, p: Pos) -> Pos:
        """``getNextValidPosition`` (docs §1.5, 3.x/4.x)."""
        q = (p[0], p[1] + 1)
        while not self.is_valid(q):
            nxt = self._next_ledger(q[0])
            if nxt is None:
                if self.current is not None and self.entries_of(self.current) == 0:
                    return (self.current, 0)
                return (self.lac[0], self.lac[1] + 1)
            q = (nxt, 0)
        return q

    def iter_from(self, start: Pos) -> Iterator[EntryRecord]:
        """Existing entries at or after ``start``, in position order (snapshot of the ledger list)."""
        i = bisect.bisect_left(self.ids, start[0])
        ids = self.ids[i:]
        for lid in ids:
            led = self.ledgers.get(lid)
            if led is None:
                continue
            k = max(start[1], 0) if lid == start[0] else 0
            entries = led.entries
            while k < len(entries):  # entries appended meanwhile are seen too
                yield entries[k]
                k += 1

    def iter_between(self, lo: Pos, hi: Pos) -> Iterator[EntryRecord]:
        """Existing entries in ``(lo, hi]``."""
        for rec in self.iter_from((lo[0], lo[1] + 1)):
            if rec.position > hi:
                return
            yield rec

    def count_between(self, lo: Pos, hi: Pos) -> int:
        """Existing entries in ``(lo, hi]`` (exact; deleted ledgers hold none)."""
        if hi <= lo:
            return 0
        total = 0
        i = bisect.bisect_left(self.ids, lo[0])
        for lid in self.ids[i:]:
            if lid > hi[0]:
                break
            n = self.entries_of(lid)
            a = lo[1] + 1 if lid == lo[0] else 0
            b = min(hi[1], n - 1) if lid == hi[0] else n - 1
            if b >= a:
                total += b - a + 1
        return total

    def entry_at(self, p: Pos) -> EntryRecord | None:
        led = self.ledgers.get(p[0])
        if led is None or not 0 <= p[1] < len(led.entries):
            return None
        return led.entries[p[1]]

    def next_existing(self, p: Pos) -> Pos | None:
        """The first existing entry strictly after ``p``."""
        led = self.ledgers.get(p[0])
        if led is not None and p[1] + 1 < len(led.entries):
            return (p[0], p[1] + 1)
        i = bisect.bisect_right(self.ids, p[0])
        for lid in self.ids[i:]:
            if self.ledgers[lid].entries:
                return (lid, 0)
        return None

    def read_limit(self) -> Pos:
        """Dispatchers and replicators read up to ``min(LAC, maxReadPosition)`` (docs §8.4)."""
        return min(self.lac, self.max_read)

    # -- writes --------------------------------------------------------------------------------------

    def add(
        self,
        t: int,
        content: Content,
        *,
        replicated_from: str | None = None,
        trace: str | None = None,
        txn_buffer: bool = True,
        notify: bool = True,
    ) -> EntryRecord:
        """Append one entry to the open ledger; roll over when full (docs §0.2)."""
        assert self.current is not None
        n_msgs = len(content.messages) if isinstance(content, DataContent) else 1
        bem: tuple[int, int] | None = None
        if self.cluster.broker_entry_metadata:
            self.broker_index += n_msgs
            bem = (t, self.broker_index)
        data = encode_content(content, replicated_from=replicated_from, broker_entry=bem)
        led = self.ledgers[self.current]
        pos = (self.current, len(led.entries))
        rec = EntryRecord(pos, len(data), data, t, content, replicated_from, trace)
        led.entries.append(rec)
        led.size += rec.size
        self.total_size += rec.size
        self.number_of_entries += 1
        self.entries_added += 1
        self.lac = pos
        if isinstance(content, DataContent):
            self.msg_in += n_msgs
            self.bytes_in += rec.size
            self.last_data_publish_ms = t
            pub = self.publishers.setdefault(content.producer, {"msgs": 0, "bytes": 0, "since": t, "last": t})
            pub["msgs"] += n_msgs
            pub["bytes"] += rec.size
            pub["last"] = t
        if txn_buffer:
            self._txn_on_append(pos, content.txn)
        if self._full(t):
            self.roll(t)
        if notify:
            for listener in list(self.entry_listeners):
                listener(t, rec)
        return rec

    def publish(self, t: int, content: DataContent) -> EntryRecord:
        """A producer's message(s) persisted (the normal publish path)."""
        return self.add(t, content)

    # -- transactions (docs §8.3-8.4) ---------------------------------------------------------------

    def _before_first_ongoing(self, after_txn_end: bool = False) -> Pos:
        """The read limit before the oldest open transaction's first message, by broker line and by the
        place that sets it: a transaction's first message or (``after_txn_end``) a commit or an abort
        (docs §8.4)."""
        first = next(iter(self.txn_ongoing.values()))
        if max_read_uses_previous_position(self.cluster.version, after_txn_end=after_txn_end):
            return self.prev(first)
        return (first[0], first[1] - 1)

    def _txn_on_append(self, pos: Pos, txn: tuple[int, int] | None) -> None:
        if txn is not None:
            # only a transaction's first message moves the limit (handleTransactionMessage)
            if txn not in self.txn_ongoing and txn not in self.txn_aborted:
                self.txn_ongoing[txn] = pos
                self.max_read = self._before_first_ongoing()
        elif not self.txn_ongoing:
            self.max_read = pos

    def end_txn(self, t: int, txn: tuple[int, int], commit: bool) -> EntryRecord | None:
        """Write the commit/abort marker and release the transaction (docs §8.3-8.4)."""
        if txn not in self.txn_ongoing:
            return None  # never touched this topic: no marker
        kind = MarkerType.TXN_COMMIT if commit else MarkerType.TXN_ABORT
        rec = self.add(t, MarkerContent(TxnMarker(int(kind)), t, None, txn), txn_buffer=False, notify=False)
        del self.txn_ongoing[txn]
        (self.txn_committed if commit else self.txn_aborted).add(txn)
        self.max_read = self.lac if not self.txn_ongoing else self._before_first_ongoing(after_txn_end=True)
        for listener in list(self.entry_listeners):
            listener(t, rec)  # dispatch may now proceed past the released entries
        return rec

    # -- cursors ----------------------------------------------------------------------------------------

    def create_cursor(
        self,
        t: int,
        name: str,
        kind: CursorKind,
        *,
        durable: bool = True,
        start: Literal["earliest", "latest"] | Pos = "latest",
    ) -> CursorSim:
        """Open a cursor; ``latest`` puts md on LAC, ``earliest`` before the first ledger (docs §7.2)."""
        first = self.first_ledger()
        assert first is not None
        if start == "latest":
            md = self.lac
        elif start == "earliest":
            md = (first, -1)
        else:
            md = start
        c = CursorSim(name, kind, durable, self._cursor_order, t, md, self.next_valid(md))
        self._cursor_order += 1
        c.consumed = self.entries_added - self.count_between(md, self.lac)
        c.last_switch_ms = t
        if durable:
            c.cursor_ledger = self.alloc.next(t)
            c.cursor_ledger_last_entry = -1
        self.cursors[name] = c
        return c

    def remove_cursor(self, name: str) -> None:
        self.cursors.pop(name, None)

    def _persist_md(self, c: CursorSim, t: int) -> None:
        c.last_md_advanced_ms = t
        if not c.durable:
            return
        if t - c.last_switch_ms >= CURSOR_LEDGER_ROLLOVER_MS:
            c.cursor_ledger = self.alloc.next(t)
            c.cursor_ledger_last_entry = -1
            c.last_switch_ms = t
        c.cursor_ledger_last_entry += 1

    def _extend(self, c: CursorSim) -> None:
        """Mark-delete extension over acknowledged entries right after md (docs §1.2)."""
        if not c.idm:
            return
        p = self.next_existing(c.md)
        while p is not None and p <= self.lac and p in c.idm:
            c.idm.discard(p)
            c.md = p
            p = self.next_existing(p)

    def _after_md_move(self, c: CursorSim, t: int) -> None:
        if c.idm:
            md = c.md
            c.idm = {p for p in c.idm if p > md}
        if c.rp <= c.md:
            c.rp = self.next_valid(c.md)
        self._persist_md(c, t)
        for listener in list(self.md_listeners):
            listener(t, c)
        if c.durable:
            self.trim(t)

    def ack_individual(self, c: CursorSim, p: Pos, t: int) -> None:
        """Individual ack of one entry (docs §1.2: range ``(prev(p), p]``, coalescing, md extension)."""
        c.last_acked_ms = t
        if p <= c.md or p in c.idm or p > self.lac:
            return
        c.idm.add(p)
        c.consumed += 1
        old = c.md
        self._extend(c)
        if c.md != old:
            self._after_md_move(c, t)

    def mark_delete(self, c: CursorSim, p: Pos, t: int) -> bool:
        """Cumulative ack / mark-delete to ``p``; refused when going backwards (docs §1.2)."""
        c.last_acked_ms = t
        if p < c.md or p > self.lac:
            return False
        if p == c.md:
            return True
        newly = self.count_between(c.md, p) - sum(1 for q in c.idm if q <= p)
        c.consumed += max(newly, 0)
        c.md = p
        self._extend(c)
        self._after_md_move(c, t)
        return True

    def durable_cursors(self) -> list[CursorSim]:
        return [c for c in self.cursors.values() if c.durable]

    def slowest(self) -> CursorSim | None:
        """Slowest durable cursor; ties break to the cursor added first (docs §1.11, 3.1+)."""
        best: CursorSim | None = None
        for c in self.cursors.values():
            if c.durable and (best is None or c.md < best.md):
                best = c
        return best

    def trim(self, t: int) -> None:
        """Delete closed ledgers every durable cursor has passed, after retention (docs §5.7, §0.2)."""
        if len(self.ids) <= 1:
            return
        s = self.slowest()
        if s is None:
            limit = self.current if self.current is not None else self.ids[-1]
        else:
            md = s.md
            led = self.ledgers.get(md[0])
            if led is not None and md[0] != self.current and len(led.entries) == md[1] + 1:
                limit = md[0] + 1
            else:
                limit = md[0]
        while len(self.ids) > 1:
            lid = self.ids[0]
            led = self.ledgers[lid]
            if lid >= limit or lid == self.current or led.closed_ms == 0:
                break
            if self.cfg.retention_ms > 0 and t - led.closed_ms < self.cfg.retention_ms:
                break
            self.ids.pop(0)
            del self.ledgers[lid]
            self.total_size -= led.size
            self.number_of_entries -= len(led.entries)
            self.trimmed_ledgers += 1
            if self.keep_trimmed_keys:
                for rec in led.entries:
                    if isinstance(rec.content, DataContent):
                        for s_id in rec.content.sequence_ids():
                            self.trimmed_keys.add((rec.content.producer, s_id))

    def reload(self, t: int) -> None:
        """Broker restart: in-memory counters restart, readers drop, cursors recover (docs §1.2, §0.2)."""
        self.entries_added = 0
        for name in [n for n, c in self.cursors.items() if not c.durable]:
            del self.cursors[name]
        for c in self.cursors.values():
            c.consumed = -self.precise_backlog(c)
            c.rp = self.next_valid(c.md)
        self.reloaded_at_ms = t

    # -- backlog (docs §1.8, §2) ------------------------------------------------------------------------

    def precise_backlog(self, c: CursorSim) -> int:
        """Entries in ``(md, LAC]`` minus individually deleted ones (docs §1.8 precise)."""
        if c.md >= self.lac:
            return 0
        return self.count_between(c.md, self.lac) - sum(1 for q in c.idm if q <= self.lac)

    def nonprecise_backlog(self, c: CursorSim) -> int:
        """``entriesAddedCounter - messagesConsumedCounter``; negative falls back to precise (docs §1.8)."""
        v = self.entries_added - c.consumed
        return v if v >= 0 else self.precise_backlog(c)

    def backlog_messages(self, c: CursorSim, *, data_only: bool = False) -> int:
        """Messages (batch slots; a marker counts 1 unless ``data_only``) after md, not acknowledged."""
        total = 0
        for rec in self.iter_between(c.md, self.lac):
            if rec.position in c.idm:
                continue
            if data_only and not isinstance(rec.content, DataContent):
                continue
            total += rec.n_messages
        return total

    def _consumed_size(self, size: int, entries: int, e: int) -> int:
        """``consumedLedgerSize`` with the generation of the cluster's version (docs §2.2)."""
        if entries <= 0:
            return 0
        vt = self.cluster.vt
        if vt >= (3, 0, 0):
            if entries <= e + 1:
                return size
        elif vt >= (2, 9, 0) and entries == e + 1:
            return size
        avg = size // entries
        return (e + 1) * avg if e >= 0 else 0

    def estimated_backlog_size(self) -> int:
        """Topic ``backlogSize`` from the slowest durable cursor (docs §2.3)."""
        s = self.slowest()
        if s is None:
            return 0
        pos = s.md
        size = self.total_size - sum(self.ledgers[i].size for i in self.ids if i < pos[0])
        led = self.ledgers.get(pos[0])
        if led is None:
            return size
        if pos[0] == self.current:
            return size - self._consumed_size(led.size, len(led.entries), pos[1])
        return size - self._consumed_size(led.size, len(led.entries), pos[1])

    def estimate_from(self, pos: Pos) -> int:
        """``estimateBacklogFromPosition`` (docs §2.4, 3.x/4.x)."""
        before = sum(self.ledgers[i].size for i in self.ids if i < pos[0])
        after = self.total_size - before
        led = self.ledgers.get(pos[0])
        if led is None:
            return after
        return after - self._consumed_size(led.size, len(led.entries), pos[1])


# --- failover selection (docs §6) ---------------------------------------------------------------------


def murmur3_32(text: str) -> int:
    """MurmurHash3 x86 32-bit, seed 0, over UTF-8, as a non-negative int (docs §6.3)."""
    return int(mmh3.hash(text.encode("utf-8"), 0, signed=False)) & 0x7FFFFFFF


def partition_index(topic: str) -> int:
    """``TopicName.getPartitionIndex`` (new rule, docs §6.5)."""
    marker = "-partition-"
    i = topic.rfind(marker)
    if i < 0:
        return -1
    tail = topic[i + len(marker) :]
    if not tail or not tail.isdigit():
        return -1
    value = int(tail)
    return value if str(value) == tail else -1


def _java_key(name: str) -> list[int]:
    """Java ``String.compareTo`` order: compare UTF-16 code units (docs §6.3)."""
    raw = name.encode("utf-16-be")
    return [int.from_bytes(raw[i : i + 2], "big") for i in range(0, len(raw), 2)]


def active_consumer(
    consumers: Sequence[tuple[str, int]],
    topic: str,
    sub_type: str,
    version: str,
    consistent_hashing: bool = False,
) -> str | None:
    """Name of the active consumer of an Exclusive/Failover subscription (docs §6.2-6.4).

    ``consumers`` are ``(name, priority_level)`` in arrival order.
    """
    if not consumers or sub_type not in ("Exclusive", "Failover"):
        return None
    idx = 0 if sub_type == "Exclusive" else partition_index(topic)
    if idx < 0:
        idx = -1
    vt = version_tuple(version)
    if vt < (3, 0, 0) and idx < 0:
        return consumers[0][0]  # 2.10/2.11: no sort, first in arrival order
    ordered = sorted(consumers, key=lambda c: (c[1], _java_key(c[0])))
    top = [c for c in ordered if c[1] == ordered[0][1]]
    if idx >= 0 and not consistent_hashing:
        return top[idx % len(top)][0]
    ring: dict[int, int] = {}
    for i, (name, _) in enumerate(top):
        for j in range(CONSUMER_CONSISTENT_HASH_REPLICAS):
            ring[murmur3_32(name + str(j))] = i
    keys = sorted(ring)
    k = murmur3_32(topic)
    at = bisect.bisect_left(keys, k)
    chosen = ring[keys[at]] if at < len(keys) else ring[keys[0]]
    return top[chosen][0]


# --- processes --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AckProfile:
    """How a subscription's consumers acknowledge what they receive."""

    mode: Literal["individual", "cumulative", "none"] = "individual"
    delay_ms: tuple[int, int] = (5, 300)
    hole_rate: float = 0.0
    late_rate: float = 0.0
    late_delay_ms: tuple[int, int] = (30_000, 900_000)
    read_batch: int = 50
    #: the first data entry delivered at or after this time is never acknowledged (a guaranteed hole)
    forced_hole_after_ms: int | None = None


class Dispatcher:
    """A subscription with consumers: reads entries, drops markers/aborted messages, acknowledges.

    Markers are auto-acknowledged individually when read, SNAPSHOT markers feed the snapshot cache of
    a replicated subscription (docs §4.6, §8.5); data entries are delivered and acknowledged after a
    delay, individually (possibly leaving holes) or cumulatively. A disconnect loses pending acks and
    rewinds the read position to ``nextValid(md)``.
    """

    def __init__(
        self,
        topic: TopicSim,
        cursor: CursorSim,
        profile: AckProfile,
        rng: random.Random,
        windows: Sequence[tuple[int, int | None]],
    ) -> None:
        self.topic = topic
        self.cursor = cursor
        self.profile = profile
        self.rng = rng
        self.windows = list(windows)
        self.connected = False
        self.pending = False
        self.epoch = 0
        self.rr = 0
        self.active_name: str | None = None
        self.forced_hole: Pos | None = None

    def start(self) -> None:
        loop = self.topic.loop
        for a, b in self.windows:
            loop.at(a, self._connect)
            if b is not None:
                loop.at(b, self._disconnect)
        self.topic.entry_listeners.append(self._notify)

    def _connect(self, t: int) -> None:
        if self.cursor.name not in self.topic.cursors:
            return
        self.connected = True
        self.cursor.active = True
        self.cursor.had_dispatcher = True
        self.epoch += 1
        for ci in self.cursor.consumers:
            ci.connected_since_ms = t
        if self.cursor.read_position_when_joining is None:
            self.cursor.read_position_when_joining = self.cursor.rp
        self._schedule(t)

    def _disconnect(self, t: int) -> None:
        self.connected = False
        self.cursor.active = False
        self.epoch += 1
        self.cursor.rp = self.topic.next_valid(self.cursor.md)
        for ci in self.cursor.consumers:
            ci.unacked = 0

    def _notify(self, t: int, rec: EntryRecord) -> None:
        if self.connected:
            self._schedule(t)

    def _schedule(self, t: int) -> None:
        if not self.pending:
            self.pending = True
            self.topic.loop.at(t + self.rng.randint(1, 20), self._dispatch)

    def _consumer_for(self) -> ConsumerInfo | None:
        cons = self.cursor.consumers
        if not cons:
            return None
        if self.cursor.sub_type in ("Shared", "Key_Shared"):
            self.rr += 1
            return cons[self.rr % len(cons)]
        for ci in cons:
            if ci.name == self.active_name:
                return ci
        return cons[0]

    def _dispatch(self, t: int) -> None:
        self.pending = False
        if not self.connected:
            return
        topic, c, prof = self.topic, self.cursor, self.profile
        limit = topic.read_limit()
        auto: list[Pos] = []
        delivered: list[EntryRecord] = []
        last: Pos | None = None
        n = 0
        for rec in topic.iter_from(c.rp):
            p = rec.position
            if p > limit:
                break
            last = p
            if p <= c.md or p in c.idm:
                continue
            content = rec.content
            if isinstance(content, MarkerContent):
                if isinstance(content.marker, Snapshot) and c.replicated and c.snapshot_cache is not None:
                    c.snapshot_cache.add(content.marker)
                auto.append(p)
            elif content.txn is not None and content.txn in topic.txn_aborted:
                auto.append(p)
            else:
                delivered.append(rec)
            n += 1
            if n >= prof.read_batch:
                break
        if last is None:
            return
        c.rp = max(c.rp, topic.next_valid(last))
        for p in auto:
            topic.ack_individual(c, p, t)
        epoch = self.epoch
        for rec in delivered:
            cons = self._consumer_for()
            c.msg_out += rec.n_messages
            c.bytes_out += rec.size
            c.last_consumed_ms = t
            if cons is not None:
                cons.msg_out += rec.n_messages
                cons.bytes_out += rec.size
                cons.unacked += rec.n_messages
                cons.last_consumed_ms = t
            self._plan_ack(t, rec, cons, epoch)
        if last < limit:
            self._schedule(t)

    def _plan_ack(self, t: int, rec: EntryRecord, cons: ConsumerInfo | None, epoch: int) -> None:
        prof, rng, loop = self.profile, self.rng, self.topic.loop
        pos, n = rec.position, rec.n_messages
        if prof.mode == "none":
            return
        if prof.mode == "cumulative":
            if rng.random() < 0.3 or rec.position == self.topic.lac:
                target = pos
                loop.at(t + rng.randint(*prof.delay_ms), lambda t2: self._ack_cum(t2, target, cons, epoch))
            return
        r = rng.random()
        if (
            prof.forced_hole_after_ms is not None
            and self.forced_hole is None
            and t >= prof.forced_hole_after_ms
        ):
            self.forced_hole = pos
            return
        if r < prof.hole_rate:
            return
        delay = (
            rng.randint(*prof.late_delay_ms)
            if r < prof.hole_rate + prof.late_rate
            else rng.randint(*prof.delay_ms)
        )
        loop.at(t + delay, lambda t2: self._ack_one(t2, pos, n, cons, epoch))

    def _ack_one(self, t: int, pos: Pos, n: int, cons: ConsumerInfo | None, epoch: int) -> None:
        if epoch != self.epoch:
            return
        if cons is not None:
            cons.unacked = max(cons.unacked - n, 0)
            cons.last_acked_ms = t
        self.topic.ack_individual(self.cursor, pos, t)

    def _ack_cum(self, t: int, pos: Pos, cons: ConsumerInfo | None, epoch: int) -> None:
        if epoch != self.epoch:
            return
        if cons is not None:
            cons.unacked = 0
            cons.last_acked_ms = t
        self.topic.mark_delete(self.cursor, pos, t)


class Reader:
    """A reader: non-durable cursor ``reader-<hex>`` that reads forward at a rate (docs §7)."""

    def __init__(
        self,
        topic: TopicSim,
        name: str,
        start: Literal["earliest", "latest"] | Pos,
        connect_ms: int,
        entries_per_second: float,
        rng: random.Random,
    ) -> None:
        self.topic = topic
        self.name = name
        self.start = start
        self.connect_ms = connect_ms
        self.eps = entries_per_second
        self.rng = rng
        self.cursor: CursorSim | None = None

    def begin(self) -> None:
        self.topic.loop.at(self.connect_ms, self._connect)

    def _connect(self, t: int) -> None:
        topic = self.topic
        start = self.start
        if isinstance(start, tuple):
            # docs §7.2: the broker steps the client's start id back one entry
            start = topic.prev(start) if topic.is_valid(start) else "earliest"
        c = topic.create_cursor(t, self.name, "reader", durable=False, start=start)
        c.sub_type = "Exclusive"
        c.active = True
        c.had_dispatcher = True
        c.consumers.append(ConsumerInfo(self.name, 0, "/10.0.9.7:51234", "Pulsar-Java-v3.0.7", t))
        self.cursor = c
        topic.loop.at(t + self._period(), self._tick)

    def _period(self) -> int:
        return 1000 if self.eps >= 1 else int(1000 / max(self.eps, 0.001))

    def _tick(self, t: int) -> None:
        c = self.cursor
        topic = self.topic
        if c is None or c.name not in topic.cursors:
            return
        budget = max(1, int(self.eps))
        last: Pos | None = None
        limit = topic.read_limit()
        n_msgs = 0
        for rec in topic.iter_from(c.rp):
            if rec.position > limit or budget <= 0:
                break
            last = rec.position
            budget -= 1
            if isinstance(rec.content, DataContent):
                n_msgs += rec.n_messages
                c.bytes_out += rec.size
        if last is not None:
            c.msg_out += n_msgs
            c.consumers[0].msg_out += n_msgs
            c.last_consumed_ms = t
            topic.mark_delete(c, last, t)
            c.rp = max(c.rp, topic.next_valid(last))
        topic.loop.at(t + self._period(), self._tick)


class DedupCursor:
    """``pulsar.dedup``: snapshots producers' last sequence ids every ``interval`` entries (docs §1.11)."""

    def __init__(self, topic: TopicSim, interval: int) -> None:
        self.topic = topic
        self.interval = interval
        self.since = 0
        self.last_seq: dict[str, int] = {}
        self.cursor: CursorSim | None = None

    def begin(self, t: int) -> None:
        self.cursor = self.topic.create_cursor(t, DEDUP_CURSOR, "dedup", start="latest")
        self.topic.dedup_enabled = True
        self.topic.entry_listeners.append(self._on_entry)

    def _on_entry(self, t: int, rec: EntryRecord) -> None:
        content = rec.content
        if not isinstance(content, DataContent) or self.cursor is None:
            return
        self.last_seq[content.producer] = content.sequence_id + len(content.messages) - 1
        self.since += 1
        if self.since >= self.interval:
            self.since = 0
            c = self.cursor
            c.properties = {k: self.last_seq[k] for k in sorted(self.last_seq)}
            self.topic.mark_delete(c, rec.position, t)


# --- compaction (docs §5.4-5.5) -----------------------------------------------------------------------


@dataclass
class CompactionResult:
    """Phase one and two of a compaction over ``(start, horizon]`` (docs §5.4-5.5)."""

    horizon: Pos
    latest: dict[str, tuple[int, int, int]]
    retained: list[tuple[int, int, int, str | None]]
    entries: int
    size: int
    retain_null_key: bool


def compaction_retains_null_keys(version: str) -> bool:
    """``topicCompactionRetainNullKey``: false from 3.2.0, true on older lines (docs §5.2)."""
    return version_tuple(version) < (3, 2, 0)


def compact_entries(records: Sequence[EntryRecord], version: str, *, encode: bool) -> CompactionResult:
    """Run both compaction phases over ``records`` (everything up to the horizon, in order).

    One result per topic. Tombstones are keyed messages with an empty payload (or ``null_value``);
    key-less messages survive only with ``retainNullKey`` (docs §5.4). With ``encode`` the surviving
    entries are re-encoded to measure the compacted ledger's size.
    """
    retain = compaction_retains_null_keys(version)
    latest: dict[str, tuple[int, int, int]] = {}
    for rec in records:
        content = rec.content
        if not isinstance(content, DataContent):
            continue
        lid, eid = rec.position
        for i, m in enumerate(content.messages):
            if m.key is None:
                continue
            bi = i if content.batched else -1
            if len(m.payload) > 0:
                latest[m.key] = (lid, eid, bi)
            else:
                latest.pop(m.key, None)
    retained: list[tuple[int, int, int, str | None]] = []
    entries = 0
    size = 0
    for rec in records:
        content = rec.content
        lid, eid = rec.position
        if not isinstance(content, DataContent):
            continue  # no compactor of any line writes a marker (docs §5.4)
        if content.batched:
            keep = []
            for i, m in enumerate(content.messages):
                if m.key is None:
                    keep.append(retain)
                else:
                    keep.append(latest.get(m.key) == (lid, eid, i) and len(m.payload) > 0)
            if any(keep):
                entries += 1
                for i, (m, k) in enumerate(zip(content.messages, keep, strict=True)):
                    if k:
                        retained.append((lid, eid, i, m.key))
                if encode:
                    size += len(encode_compacted(content, keep))
        else:
            m = content.messages[0]
            if (m.key is None and retain) or (
                m.key is not None and latest.get(m.key) == (lid, eid, -1) and len(m.payload) > 0
            ):
                entries += 1
                size += rec.size
                retained.append((lid, eid, -1, m.key))
    horizon = records[-1].position if records else EARLIEST
    return CompactionResult(horizon, latest, retained, entries, size, retain)


def run_compaction(topic: TopicSim, t: int) -> CompactionResult | None:
    """Compact the topic now: ``__compaction`` md = horizon, property ``CompactedTopicLedger``."""
    if topic.lac[1] < 0 and topic.count_between(EARLIEST, topic.lac) == 0:
        return None
    c = topic.cursors.get(COMPACTION_CURSOR)
    if c is None:
        c = topic.create_cursor(t, COMPACTION_CURSOR, "compaction", start="earliest")
    records = list(topic.iter_from(EARLIEST))
    records = [r for r in records if r.position <= topic.lac]
    if not records:
        return None
    result = compact_entries(records, topic.cluster.version, encode=True)
    lid = topic.alloc.next(t)
    topic.compacted_ledger = (lid, result.entries, result.size)
    topic.compaction_horizon = result.horizon
    c.properties = {COMPACTED_LEDGER_PROPERTY: lid}
    topic.mark_delete(c, result.horizon, t)
    return result


# --- producers ----------------------------------------------------------------------------------------

#: ``(rng, size, sequence_id, schema_version) -> payload bytes``.
PayloadFn = Callable[[random.Random, int, int, int | None], bytes]


@dataclass(frozen=True)
class ProducerPlan:
    """What one producer sends: how many messages, when, batched or not, keys, tombstones, codec."""

    name: str
    start_ms: int
    end_ms: int
    messages: int
    batch_max: int = 1
    keys: tuple[str, ...] = ()
    keyless_rate: float = 0.0
    tombstone_rate: float = 0.0
    null_value_rate: float = 0.0
    compression: str = "NONE"
    payload_bytes: tuple[int, int] = (40, 400)
    properties_rate: float = 0.0
    event_time: bool = False
    schema_versions: tuple[tuple[int, int], ...] = ()
    seq_start: int = 0


def schema_version_bytes(version: int) -> bytes:
    """``MessageMetadata.schema_version``: the registry version as an 8-byte big-endian long."""
    return version.to_bytes(8, "big", signed=True)


class Producer:
    """Sends ``plan.messages`` messages between ``start_ms`` and ``end_ms`` (exponential gaps)."""

    def __init__(self, topic: TopicSim, plan: ProducerPlan, rng: random.Random, payload: PayloadFn) -> None:
        self.topic = topic
        self.plan = plan
        self.rng = rng
        self.payload = payload
        self.seq = plan.seq_start
        self.remaining = plan.messages
        avg_batch = (1 + plan.batch_max) / 2 if plan.batch_max > 1 else 1.0
        entries = max(plan.messages / avg_batch, 1.0)
        self.mean_gap = max((plan.end_ms - plan.start_ms) / entries, 1.0)

    def begin(self) -> None:
        if self.remaining > 0:
            self.topic.loop.at(self.plan.start_ms + self.rng.randint(0, 999), self._send)

    def _schema(self, t: int) -> int | None:
        version: int | None = None
        for since, v in self.plan.schema_versions:
            if since <= t:
                version = v
        return version

    def _message(self, t: int, seq: int, version: int | None) -> Message:
        plan, rng = self.plan, self.rng
        key: str | None = None
        if plan.keys and rng.random() >= plan.keyless_rate:
            key = rng.choice(plan.keys)
        props: tuple[tuple[str, str], ...] = ()
        if plan.properties_rate and rng.random() < plan.properties_rate:
            props = (("trace-id", f"{rng.getrandbits(64):016x}"),)
        event = t - rng.randint(0, 2000) if plan.event_time else None
        if key is not None:
            r = rng.random()
            if r < plan.null_value_rate:
                return Message(key, b"", True, props, event)
            if r < plan.null_value_rate + plan.tombstone_rate:
                return Message(key, b"", False, props, event)
        size = rng.randint(*plan.payload_bytes)
        return Message(key, self.payload(rng, size, seq, version), False, props, event)

    def _send(self, t: int) -> None:
        plan, rng = self.plan, self.rng
        if self.remaining <= 0:
            return
        batched = plan.batch_max > 1
        n = min(self.remaining, rng.randint(1, plan.batch_max)) if batched else 1
        version = self._schema(t)
        msgs = tuple(self._message(t, self.seq + i, version) for i in range(n))
        content = DataContent(
            plan.name,
            self.seq,
            t,
            msgs,
            batched,
            plan.compression,
            None,
            None if version is None else schema_version_bytes(version),
        )
        self.topic.publish(t, content)
        self.seq += n
        self.remaining -= n
        if self.remaining > 0:
            nxt = t + max(1, int(rng.expovariate(1.0 / self.mean_gap)))
            if nxt > plan.end_ms:
                nxt = max(t + 1, plan.end_ms) + rng.randint(1, 50)
            self.topic.loop.at(nxt, self._send)


@dataclass(frozen=True)
class TxnPlan:
    """Transactions of one producer: ``(outcome, entries)`` each, outcome commit | abort | open."""

    name: str
    start_ms: int
    end_ms: int
    txns: tuple[tuple[str, int], ...]
    tc_id: int
    first_txn: int
    keys: tuple[str, ...] = ()
    payload_bytes: tuple[int, int] = (60, 300)


@dataclass
class TxnLog:
    """One transaction of a :class:`TxnProducer` (ground truth)."""

    txn: tuple[int, int]
    outcome: str
    entries: int
    begin_ms: int
    end_ms: int | None = None
    marker_position: Pos | None = None


class TxnProducer:
    """Sends transactional messages (txnid fields set) and ends each transaction (docs §8.3)."""

    def __init__(self, topic: TopicSim, plan: TxnPlan, rng: random.Random, payload: PayloadFn) -> None:
        self.topic = topic
        self.plan = plan
        self.rng = rng
        self.payload = payload
        self.seq = 0
        self.log: list[TxnLog] = []

    def begin(self) -> None:
        plan = self.plan
        n = max(len(plan.txns), 1)
        slot = max((plan.end_ms - plan.start_ms) // n, 1000)
        for i, (outcome, entries) in enumerate(plan.txns):
            t = plan.start_ms + i * slot + self.rng.randint(0, slot // 4)
            txn = (plan.tc_id, plan.first_txn + i)
            self.log.append(TxnLog(txn, outcome, entries, t))
            self._schedule_txn(t, txn, outcome, entries)

    def _schedule_txn(self, t: int, txn: tuple[int, int], outcome: str, entries: int) -> None:
        loop, rng = self.topic.loop, self.rng
        at = t
        for _ in range(entries):
            loop.at(at, functools.partial(self._send, txn=txn))
            at += rng.randint(200, 3000)
        if outcome in ("commit", "abort"):
            commit = outcome == "commit"
            loop.at(at + rng.randint(500, 5000), lambda t2: self._end(t2, txn, commit))

    def _send(self, t: int, *, txn: tuple[int, int]) -> None:
        rng, plan = self.rng, self.plan
        key = rng.choice(plan.keys) if plan.keys else None
        msg = Message(key, self.payload(rng, rng.randint(*plan.payload_bytes), self.seq, None))
        self.topic.publish(t, DataContent(plan.name, self.seq, t, (msg,), False, "NONE", txn))
        self.seq += 1

    def _end(self, t: int, txn: tuple[int, int], commit: bool) -> None:
        rec = self.topic.end_txn(t, txn, commit)
        for item in self.log:
            if item.txn == txn:
                item.end_ms = t
                item.marker_position = None if rec is None else rec.position
