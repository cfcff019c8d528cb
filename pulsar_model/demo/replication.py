"""Geo-replication and the replicated-subscription marker protocol across simulated clusters (docs §4).

One :class:`ReplicatedGroup` is one topic (partition) present on several clusters that share one
:class:`~pulsar_model.demo.simulator.EventLoop`:

* a :class:`Replicator` per ordered cluster pair reads the local topic through its durable cursor
  ``pulsar.repl.<remote>``, applies the filtering rules of docs §4.7 in order, hands markers that came
  from its remote to the local controller (rule 4), never forwards what was itself replicated (rule 5),
  honours ``replicate_to`` (rule 6) and writes the rest into the remote topic with
  ``replicated_from`` set, keeping producer name and sequence id;
* a :class:`Controller` per cluster runs the snapshot timer (docs §4.4), answers requests with its
  LAC, drives :class:`SnapshotBuilder` (two rounds with more than one remote cluster, docs §4.5), writes
  UPDATE markers when a replicated subscription's mark-delete passes a cached snapshot and applies
  UPDATEs arriving from other clusters as cumulative acks;
* :class:`OldSnapshotCache` / :class:`NewSnapshotCache` are the per-subscription caches of docs §4.6.

Everything the protocol did is kept in :class:`SnapshotTrace` / :class:`UpdateTrace` records for the
ground truth written by the generator.
"""

from __future__ import annotations

import bisect
import random
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from pulsar_model.demo.simulator import (
    REPLICATED_SUBSCRIPTION_PROPERTY,
    REPLICATOR_PREFIX,
    CursorSim,
    DataContent,
    EntryRecord,
    EventLoop,
    MarkerContent,
    Pos,
    TopicSim,
    version_tuple,
)
from pulsar_model.wire.markers import (
    MarkerType,
    Snapshot,
    SnapshotRequest,
    SnapshotResponse,
    SubscriptionUpdate,
)

#: docs §4.2 defaults.
SNAPSHOT_FREQUENCY_MS = 1000
SNAPSHOT_TIMEOUT_SECONDS = 30
#: ``replicatedSubscriptionsSnapshotMaxCachedPerSubscription`` before / after PR #25044 (docs §4.2).
MAX_CACHED_OLD = 10
MAX_CACHED_NEW = 30

_CONTROLLER_TYPES = (
    MarkerType.REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST,
    MarkerType.REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE,
    MarkerType.REPLICATED_SUBSCRIPTION_UPDATE,
)
_TXN_END_TYPES = (MarkerType.TXN_COMMIT, MarkerType.TXN_ABORT)


def uses_new_snapshot_cache(version: str) -> bool:
    """PR #25044's cache shipped in 4.0.9 and 4.1.3 (and later lines); older releases keep the old one."""
    vt = version_tuple(version)
    return vt >= (4, 1, 3) or (4, 0, 9) <= vt < (4, 1, 0)


def snapshot_id(rng: random.Random) -> str:
    """A UUID-formatted snapshot id drawn from ``rng`` (deterministic, never ``uuid4``)."""
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


# --- snapshot caches (docs §4.6) -----------------------------------------------------------------------


class OldSnapshotCache:
    """Sorted by ``local_message_id``; over capacity drops the oldest (docs §4.6, before PR #25044)."""

    def __init__(self, max_cached: int = MAX_CACHED_OLD) -> None:
        self.max_cached = max_cached
        self._keys: list[Pos] = []
        self._snaps: dict[Pos, Snapshot] = {}
        self.evicted: list[str] = []

    def add(self, snapshot: Snapshot) -> None:
        key = snapshot.local_position
        if key is None:
            return
        if key not in self._snaps:
            bisect.insort(self._keys, key)
        self._snaps[key] = snapshot
        while len(self._keys) > self.max_cached:
            self.evicted.append(self._snaps.pop(self._keys.pop(0)).snapshot_id)

    def advanced(self, md: Pos) -> Snapshot | None:
        last: Snapshot | None = None
        while self._keys and self._keys[0] <= md:
            last = self._snaps.pop(self._keys.pop(0))
        return last

    def __len__(self) -> int:
        return len(self._keys)


@dataclass
class _CachedSnapshot:
    position: Pos
    snapshot: Snapshot
    distance: int  # to the previous cached snapshot


class NewSnapshotCache:
    """PR #25044 cache: evicts the interior snapshot minimising the merged gap (docs §4.6).

    ``distance(a, b)`` is the number of entries strictly between the two positions.
    """

    def __init__(self, distance: Callable[[Pos, Pos], int], max_cached: int = MAX_CACHED_NEW) -> None:
        self.max_cached = max_cached
        self.distance = distance
        self._items: list[_CachedSnapshot] = []
        self.evicted: list[str] = []
        self.cleared = 0

    def add(self, snapshot: Snapshot) -> None:
        pos = snapshot.local_position
        if pos is None:
            return
        items = self._items
        if items and pos <= items[-1].position:  # cursor reset / positions went backwards
            items.clear()
            self.cleared += 1
        d = 0 if not items else self.distance(items[-1].position, pos)
        items.append(_CachedSnapshot(pos, snapshot, d))
        if len(items) > self.max_cached:
            # first and last are never evicted; smallest merged gap, the smaller position on ties
            best_i = min(
                range(1, len(items) - 1),
                key=lambda i: (items[i].distance + items[i + 1].distance, items[i].position),
            )
            gone = items.pop(best_i)
            self.evicted.append(gone.snapshot.snapshot_id)
            # the broker adds the two stored gaps instead of measuring the merged one again
            items[best_i].distance += gone.distance

    def advanced(self, md: Pos) -> Snapshot | None:
        last: Snapshot | None = None
        items = self._items
        while items and items[0].position <= md:
            last = items.pop(0).snapshot
        if items:
            items[0].distance = 0
        return last

    def __len__(self) -> int:
        return len(self._items)


# --- ground-truth traces --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ResponseTrace:
    """One RESPONSE a snapshot builder received: round, answering cluster, its LAC, local position."""

    round: int
    cluster: str
    position: Pos
    received_at: Pos
    t_ms: int


@dataclass(frozen=True)
class LateResponse:
    """A RESPONSE for a snapshot that was no longer pending (timed out and dropped): ignored."""

    cluster: str
    snapshot_id: str
    from_cluster: str
    position: Pos
    t_ms: int


@dataclass(frozen=True)
class AppliedUpdate:
    """An UPDATE applied on a remote cluster as a cumulative ack (docs §4.4 receiveSubscriptionUpdated)."""

    position: Pos
    before: Pos
    after: Pos
    moved: bool
    created: bool
    update_position_here: Pos
    t_ms: int


@dataclass
class SnapshotTrace:
    """Everything one snapshot attempt did, seen from its source cluster."""

    snapshot_id: str
    topic: str
    source_cluster: str
    remotes: tuple[str, ...]
    started_ms: int
    requests: list[Pos] = field(default_factory=list)
    responses: list[ResponseTrace] = field(default_factory=list)
    round1: dict[str, Pos] = field(default_factory=dict)
    local_position: Pos | None = None
    snapshot_marker: Pos | None = None
    status: str = "pending"
    ended_ms: int | None = None


@dataclass
class UpdateTrace:
    """One UPDATE marker: written on the source when md passed a cached snapshot, applied remotely."""

    topic: str
    subscription: str
    source_cluster: str
    snapshot_id: str
    snapshot_local_position: Pos
    clusters: tuple[tuple[str, Pos], ...]
    source_mark_delete: Pos
    update_position: Pos
    written_ms: int
    applied: dict[str, AppliedUpdate] = field(default_factory=dict)


# --- snapshot builder and controller (docs §4.4-4.5) --------------------------------------------------------


class SnapshotBuilder:
    """One snapshot: REQUEST, collect one RESPONSE per remote (twice with 2+ remotes), then SNAPSHOT."""

    def __init__(self, ctrl: Controller, sid: str, t: int) -> None:
        self.ctrl = ctrl
        self.sid = sid
        self.start_ms = t
        self.remotes = tuple(sorted(ctrl.remotes))
        self.missing = set(self.remotes)
        self.responses: dict[str, Pos] = {}
        self.need_two_rounds = len(self.remotes) > 1
        self.first_round_complete = False
        self.trace = SnapshotTrace(sid, ctrl.topic.topic, ctrl.local, self.remotes, t)

    def start(self, t: int) -> None:
        rec = self.ctrl.write(t, SnapshotRequest(self.sid, self.ctrl.local), None)
        self.trace.requests.append(rec.position)

    def received(self, t: int, position: Pos, resp: SnapshotResponse) -> None:
        c = resp.cluster
        rnd = 2 if self.first_round_complete else 1
        self.trace.responses.append(ResponseTrace(rnd, c, resp.position, position, t))
        self.responses.setdefault(c, resp.position)  # putIfAbsent: the first answer is kept
        self.missing.discard(c)
        if self.missing:
            return
        if self.need_two_rounds and not self.first_round_complete:
            self.first_round_complete = True
            self.trace.round1 = dict(self.responses)
            self.missing = set(self.remotes)
            rec = self.ctrl.write(t, SnapshotRequest(self.sid, self.ctrl.local), None)
            self.trace.requests.append(rec.position)
            return
        if not self.trace.round1:
            self.trace.round1 = dict(self.responses)
        clusters = tuple(sorted(self.responses.items()))
        rec = self.ctrl.write(t, Snapshot(self.sid, position, clusters), (self.ctrl.local,))
        self.trace.local_position = position
        self.trace.snapshot_marker = rec.position
        self.trace.status = "completed"
        self.trace.ended_ms = t
        self.ctrl.completed(self)


class Controller:
    """``ReplicatedSubscriptionsController`` of one topic on one cluster (docs §4.4)."""

    def __init__(
        self, group: ReplicatedGroup, topic: TopicSim, remotes: Sequence[str], rng: random.Random
    ) -> None:
        self.group = group
        self.topic = topic
        self.local = topic.cluster.name
        self.remotes = tuple(remotes)
        self.rng = rng
        self.pending: dict[str, SnapshotBuilder] = {}
        self.last_completed_id: str | None = None
        self.last_completed_start = 0
        self.traces: list[SnapshotTrace] = []
        self.updates: list[UpdateTrace] = []
        topic.md_listeners.append(self._on_md)

    def write(
        self,
        t: int,
        marker: SnapshotRequest | SnapshotResponse | Snapshot | SubscriptionUpdate,
        replicate_to: tuple[str, ...] | None,
    ) -> EntryRecord:
        return self.topic.add(t, MarkerContent(marker, t, replicate_to))

    def tick(self, t: int) -> None:
        """``startNewSnapshot`` (docs §4.4)."""
        timeout = self.group.timeout_ms
        for sid in [s for s, b in self.pending.items() if b.start_ms + timeout < t]:
            b = self.pending.pop(sid)
            b.trace.status = "timed_out"
            b.trace.ended_ms = t
        last = self.topic.last_data_publish_ms
        if last == 0 or last < self.last_completed_start:
            return
        if not all(self.group.replicators[(self.local, r)].connected(t) for r in self.remotes):
            return
        b = SnapshotBuilder(self, snapshot_id(self.rng), t)
        self.pending[b.sid] = b
        self.traces.append(b.trace)
        b.start(t)

    def completed(self, b: SnapshotBuilder) -> None:
        self.pending.pop(b.sid, None)
        self.last_completed_id = b.sid
        self.last_completed_start = b.start_ms

    def on_marker(self, t: int, rec: EntryRecord) -> None:
        """A marker from the replicator's remote cluster (docs §4.4 marker dispatch)."""
        content = rec.content
        assert isinstance(content, MarkerContent)
        m = content.marker
        if isinstance(m, SnapshotRequest):
            source = m.source_cluster or (rec.replicated_from or "")
            resp = SnapshotResponse(m.snapshot_id, self.local, self.topic.lac)
            self.write(t, resp, (source,))
        elif isinstance(m, SnapshotResponse):
            b = self.pending.get(m.snapshot_id)
            if b is not None:
                b.received(t, rec.position, m)
            else:
                self.group.late_responses.append(
                    LateResponse(self.local, m.snapshot_id, m.cluster, rec.position, t)
                )
        elif isinstance(m, SubscriptionUpdate):
            self._apply_update(t, rec, m)

    def _apply_update(self, t: int, rec: EntryRecord, m: SubscriptionUpdate) -> None:
        """``receiveSubscriptionUpdated``: the last entry for this cluster wins; cumulative ack."""
        mine = [p for c, p in m.clusters if c == self.local]
        trace = self.group.update_by_key.get(
            (rec.replicated_from or "", m.subscription_name, rec.trace or "")
        )
        if not mine:
            return
        pos = mine[-1]
        cursor = self.topic.cursors.get(m.subscription_name)
        created = False
        if cursor is None:
            cursor = self.topic.create_cursor(t, m.subscription_name, "subscription", start="earliest")
            self.group.make_replicated(self.topic, cursor)
            created = True
        before = cursor.md
        ok = self.topic.mark_delete(cursor, pos, t)
        if trace is not None:
            trace.applied[self.local] = AppliedUpdate(
                pos, before, cursor.md, ok and cursor.md != before, created, rec.position, t
            )

    def _on_md(self, t: int, c: CursorSim) -> None:
        """Mark-delete advanced: the cache may return a snapshot -> UPDATE marker (docs §4.6)."""
        if not c.replicated or c.snapshot_cache is None:
            return
        s = c.snapshot_cache.advanced(c.md)
        if s is None:
            return
        clusters = tuple(sorted(s.clusters))
        rec = self.write(t, SubscriptionUpdate(c.name, clusters), None)
        tag = f"update:{self.local}:{c.name}:{len(self.updates)}"
        rec.trace = tag
        assert s.local_position is not None
        trace = UpdateTrace(
            self.topic.topic,
            c.name,
            self.local,
            s.snapshot_id,
            s.local_position,
            clusters,
            c.md,
            rec.position,
            t,
        )
        self.updates.append(trace)
        self.group.update_by_key[(self.local, c.name, tag)] = trace


# --- replicator (docs §4.7) ------------------------------------------------------------------------------


class Replicator:
    """``GeoPersistentReplicator`` from ``src`` to ``dst`` with its cursor ``pulsar.repl.<dst>``."""

    def __init__(
        self,
        group: ReplicatedGroup,
        src: TopicSim,
        dst: TopicSim,
        t0: int,
        read_delay_ms: int,
        net_delay_ms: int,
        outages: Sequence[tuple[int, int | None]],
    ) -> None:
        self.group = group
        self.src = src
        self.dst = dst
        self.remote = dst.cluster.name
        self.read_delay = read_delay_ms
        self.net_delay = net_delay_ms
        self.outages = list(outages)
        self.cursor = src.create_cursor(
            t0, f"{REPLICATOR_PREFIX}.{self.remote}", "replicator", start="latest"
        )
        self.read_pos: Pos = self.cursor.rp
        self.msg_out = 0
        self.bytes_out = 0
        self.msg_in = 0
        self.connected_since_ms = t0
        src.entry_listeners.append(self._on_entry)
        for _, end in self.outages:
            if end is not None:
                src.loop.at(end, self._reconnect)

    def connected(self, t: int) -> bool:
        return not any(a <= t and (b is None or t < b) for a, b in self.outages)

    def _reconnect(self, t: int) -> None:
        self.connected_since_ms = t
        self.src.loop.at(t + self.read_delay, self._process)

    def _on_entry(self, t: int, rec: EntryRecord) -> None:
        self.src.loop.at(t + self.read_delay, self._process)

    def _process(self, t: int) -> None:
        if not self.connected(t):
            return
        src, _dst = self.src, self.dst
        limit = src.read_limit()
        acks: list[Pos] = []
        last: Pos | None = None
        ctrl = self.group.controllers[src.cluster.name]
        for rec in src.iter_from(self.read_pos):
            p = rec.position
            if p > limit or rec.add_ms + self.read_delay > t:
                break
            last = p
            self.read_pos = (p[0], p[1] + 1)
            content = rec.content
            mt = rec.marker_type
            if mt in _TXN_END_TYPES:  # rule 2
                acks.append(p)
                continue
            if content.txn is not None and content.txn in src.txn_aborted:  # rule 3
                acks.append(p)
                continue
            if mt in _CONTROLLER_TYPES and rec.replicated_from == self.remote:  # rule 4
                ctrl.on_marker(t, rec)
            if rec.replicated_from is not None:  # rule 5: never re-replicated
                acks.append(p)
                continue
            if (
                isinstance(content, MarkerContent)
                and content.replicate_to is not None
                and self.remote not in content.replicate_to
            ):  # rule 6
                acks.append(p)
                continue
            copy = replace(content, txn=None) if content.txn is not None else content  # rule 9
            self._forward(t, rec, copy)
        if last is not None:
            self.cursor.rp = max(self.cursor.rp, src.next_valid(last))
        for p in acks:
            src.ack_individual(self.cursor, p, t)

    def _forward(self, t: int, rec: EntryRecord, copy: DataContent | MarkerContent) -> None:
        src_name = self.src.cluster.name
        pos = rec.position
        trace = rec.trace
        self.msg_out += rec.n_messages
        self.bytes_out += rec.size

        def arrive(t2: int) -> None:
            self.dst.add(t2, copy, replicated_from=src_name, trace=trace)
            self.msg_in += rec.n_messages
            self.src.ack_individual(self.cursor, pos, t2)

        self.src.loop.at(t + self.net_delay, arrive)


# --- the group ---------------------------------------------------------------------------------------------


class ReplicatedGroup:
    """One replicated topic across clusters (full mesh), sharing one event loop."""

    def __init__(
        self,
        loop: EventLoop,
        topics: Sequence[TopicSim],
        rng: random.Random,
        t0: int,
        end_ms: int,
        *,
        frequency_ms: int = SNAPSHOT_FREQUENCY_MS,
        timeout_seconds: int = SNAPSHOT_TIMEOUT_SECONDS,
        outages: dict[tuple[str, str], list[tuple[int, int | None]]] | None = None,
        delays: dict[tuple[str, str], tuple[int, int]] | None = None,
    ) -> None:
        self.loop = loop
        self.topics = {t.cluster.name: t for t in topics}
        self.rng = rng
        self.frequency_ms = frequency_ms
        self.timeout_ms = timeout_seconds * 1000
        self.late_responses: list[LateResponse] = []
        self.update_by_key: dict[tuple[str, str, str], UpdateTrace] = {}
        names = sorted(self.topics)
        self.controllers: dict[str, Controller] = {}
        self.replicators: dict[tuple[str, str], Replicator] = {}
        for a in names:
            for b in names:
                if a == b:
                    continue
                read_delay, net_delay = (delays or {}).get((a, b), (5, 80))
                self.replicators[(a, b)] = Replicator(
                    self,
                    self.topics[a],
                    self.topics[b],
                    t0,
                    read_delay,
                    net_delay,
                    (outages or {}).get((a, b), []),
                )
        for a in names:
            self.controllers[a] = Controller(self, self.topics[a], [b for b in names if b != a], rng)
        self.end_ms = end_ms
        for i, a in enumerate(names):
            self._schedule_tick(a, t0 + 137 * (i + 1))

    def _schedule_tick(self, cluster: str, t: int) -> None:
        if t > self.end_ms:
            return

        def run(t2: int) -> None:
            self.controllers[cluster].tick(t2)
            self._schedule_tick(cluster, t2 + self.frequency_ms)

        self.loop.at(t, run)

    def make_replicated(self, topic: TopicSim, cursor: CursorSim) -> None:
        """Mark a subscription replicated (property set) and give it the cache of its version."""
        cursor.replicated = True
        cursor.properties[REPLICATED_SUBSCRIPTION_PROPERTY] = 1
        if uses_new_snapshot_cache(topic.cluster.version):

            def distance(a: Pos, b: Pos) -> int:
                return max(topic.count_between(a, b) - 1, 0)

            cursor.snapshot_cache = NewSnapshotCache(distance, MAX_CACHED_NEW)
        else:
            cursor.snapshot_cache = OldSnapshotCache(MAX_CACHED_OLD)
