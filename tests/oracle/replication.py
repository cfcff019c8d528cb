"""Plain-Python oracle of replicated subscriptions, written from docs §4.4-§4.7 only.

* :class:`OldCache` / :class:`NewCache`: the two snapshot-cache generations of docs §4.6 (the new one
  with the broker's own data structures: a linked list and a lazily filled ordered set);
* :func:`replay`: run add/advance events through one of them;
* :class:`World`: a tiny discrete simulation of 2-4 clusters (full mesh) running the snapshot protocol of
  §4.4 (controller), §4.5 (builder) and §4.7 (replicator filtering). Replicators read every new local entry
  immediately and in order; forwarding to a remote is a FIFO whose delivery the caller interleaves at
  random. It records every marker it writes (as ``markers`` table rows) and its own view of every snapshot.
"""

from __future__ import annotations

import bisect
import random
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

Position = tuple[int, int]
Clusters = tuple[tuple[str, Position], ...]

REQUEST, RESPONSE, SNAPSHOT, UPDATE = 10, 11, 12, 13


# --------------------------------------------------------------------------------------------------
# §4.6 snapshot caches
# --------------------------------------------------------------------------------------------------


@dataclass
class Snap:
    sid: str
    pos: Position
    clusters: Clusters = ()


class OldCache:
    """Sorted map keyed by local_message_id; over max drop the smallest key; advanced pops keys <= p."""

    def __init__(self, max_cached: int) -> None:
        self.max = max_cached
        self.map: dict[Position, Snap] = {}
        self.evicted: list[str] = []

    def add(self, s: Snap) -> None:
        self.map[s.pos] = s
        while len(self.map) > self.max:
            smallest = min(self.map)
            self.evicted.append(self.map.pop(smallest).sid)

    def advanced(self, p: Position) -> Snap | None:
        last = None
        for key in sorted(self.map):
            if key <= p:
                last = self.map.pop(key)
        return last

    def size(self) -> int:
        return len(self.map)


class _Node:
    """One cached snapshot of :class:`NewCache`: a doubly linked list node with its gap to the previous."""

    def __init__(self, snap: Snap, d: int) -> None:
        self.snap = snap
        self.d = d
        self.prev: _Node | None = None
        self.next: _Node | None = None

    def key(self) -> tuple[int, Position]:
        """Sort key of the eviction candidates: the gaps on both sides, then the position."""
        return (self.d + (self.next.d if self.next is not None else 0), self.snap.pos)


class NewCache:
    """docs §4.6 new cache, built the way the broker builds it: a linked list, and a set of the interior
    nodes ordered by (own gap + next gap, position) that is filled lazily up to the node before the tail
    when an eviction is due; the first node of the set goes, its gap is added to the next node's.
    """

    def __init__(self, max_cached: int, dist: Callable[[Position, Position], int]) -> None:
        if max_cached < 3:
            raise ValueError("the new cache needs max_cached >= 3")
        self.max = max_cached
        self.dist = dist
        self.head: _Node | None = None
        self.tail: _Node | None = None
        self.count = 0
        self.last_sorted: _Node | None = None
        self.sorted: list[tuple[tuple[int, Position], int, _Node]] = []  # (key, id, node), ascending
        self.evicted: list[str] = []

    # -- the ordered set ------------------------------------------------------------------------------
    def _check_keys(self) -> None:
        """The broker's set finds nodes by their current key: none may change while the node is inside."""
        assert all(k == n.key() for k, _i, n in self.sorted), "a key changed inside the ordered set"

    def _set_add(self, node: _Node) -> None:
        item = (node.key(), id(node), node)
        if not any(n is node for _k, _i, n in self.sorted):
            bisect.insort(self.sorted, item, key=lambda x: (x[0], x[1]))

    def _set_remove(self, node: _Node) -> None:
        self.sorted = [x for x in self.sorted if x[2] is not node]

    def add(self, s: Snap) -> None:
        self._check_keys()
        if self.tail is not None and s.pos <= self.tail.snap.pos:
            n = self.head
            while n is not None:
                self.evicted.append(n.snap.sid)
                n = n.next
            self.head = self.tail = self.last_sorted = None
            self.count = 0
            self.sorted = []
        node = _Node(s, 0 if self.tail is None else self.dist(self.tail.snap.pos, s.pos))
        if self.head is None:
            self.head = self.tail = node
        else:
            assert self.tail is not None
            self.tail.next, node.prev, self.tail = node, self.tail, node
        self.count += 1
        if self.count > self.max:
            self._evict()

    def _evict(self) -> None:
        assert self.head is not None
        cur = self.last_sorted.next if self.last_sorted is not None else self.head.next
        while cur is not None and cur is not self.tail:
            self._set_add(cur)
            self.last_sorted = cur
            cur = cur.next
        self._check_keys()
        victim = self.sorted[0][2]
        self._set_remove(victim)
        nxt, prv = victim.next, victim.prev
        assert nxt is not None and prv is not None
        if nxt is not self.tail:
            self._set_remove(nxt)
        if prv is not self.head:
            self._set_remove(prv)
        prv.next, nxt.prev = nxt, prv
        self.count -= 1
        if self.last_sorted is victim:
            self.last_sorted = prv if prv is not self.head else None
        nxt.d += victim.d
        if nxt is not self.tail:
            self._set_add(nxt)
        if prv is not self.head:
            self._set_add(prv)
        self.evicted.append(victim.snap.sid)

    def advanced(self, p: Position) -> Snap | None:
        self._check_keys()
        found: _Node | None = None
        cur = self.head
        while cur is not None and cur.snap.pos <= p:
            found = cur
            if cur is self.last_sorted:
                self.last_sorted = None
            cur = cur.next
            self.head = cur
            if cur is not None:
                self._set_remove(cur)
            self.count -= 1
        if self.head is None:
            self.tail = None
        else:
            self.head.prev = None
            self.head.d = 0
        return None if found is None else found.snap

    def size(self) -> int:
        return self.count


@dataclass
class Event:
    seq: int
    op: str  # add | advance
    snap: Snap | None = None
    md: Position | None = None


def replay(
    events: Sequence[Event], new: bool, max_cached: int, dist: Callable[[Position, Position], int]
) -> list[tuple[int, str | None, int, list[str]]]:
    """One tuple per advance: (seq, returned snapshot id or None, cache size after, evicted since last)."""
    cache: OldCache | NewCache = NewCache(max_cached, dist) if new else OldCache(max_cached)
    out = []
    for ev in sorted(events, key=lambda e: e.seq):
        if ev.op == "add":
            assert ev.snap is not None
            cache.add(ev.snap)
        else:
            assert ev.md is not None
            s = cache.advanced(ev.md)
            out.append((ev.seq, None if s is None else s.sid, cache.size(), list(cache.evicted)))
            cache.evicted.clear()
    return out


# --------------------------------------------------------------------------------------------------
# §4.4/§4.5/§4.7 protocol simulation
# --------------------------------------------------------------------------------------------------


@dataclass
class Entry:
    cluster: str
    position: Position
    t: int
    marker_type: int | None
    replicated_from: str | None = None
    replicate_to: tuple[str, ...] = ()
    snapshot_id: str | None = None
    source_cluster: str | None = None
    response_cluster: str | None = None
    response_position: Position | None = None
    local_position: Position | None = None
    clusters: Clusters | None = None


@dataclass
class SimResponse:
    cluster: str
    lac: Position
    written: Position
    received: Position | None = None
    round: int | None = None
    outcome: str = "in_flight"


@dataclass
class SimSnapshot:
    sid: str
    source: str
    remotes: tuple[str, ...]
    start: int
    requests: list[Position] = field(default_factory=list)
    landed: dict[str, list[Position]] = field(default_factory=dict)
    responses: list[SimResponse] = field(default_factory=list)
    kept: dict[str, Position] = field(default_factory=dict)
    round1_at: Position | None = None
    local: Position | None = None
    marker: Position | None = None
    rounds_completed: int = 0
    # builder state
    missing: set[str] = field(default_factory=set)
    first_round_complete: bool = False
    pending: bool = True


class World:
    """2-4 clusters of one topic, full mesh, every cluster with replicators to all others."""

    def __init__(self, rng: random.Random, names: Sequence[str], timeout_ms: int) -> None:
        self.rng = rng
        self.names = list(names)
        self.timeout = timeout_ms
        self.now = 0
        self.ledger = {c: rng.choice([1, 5, 100, 10**6]) + i * 7 for i, c in enumerate(names)}
        self.next_entry = {c: rng.choice([0, 0, 3]) for c in names}
        self.log: dict[str, list[Entry]] = {c: [] for c in names}
        self.net: dict[tuple[str, str], deque[Entry]] = {
            (a, b): deque() for a in names for b in names if a != b
        }
        self.snaps: dict[str, SimSnapshot] = {}
        self.to_read: deque[Entry] = deque()
        self.counter = 0

    # -- log ------------------------------------------------------------------------------------
    def lac(self, c: str) -> Position:
        return self.log[c][-1].position

    def append(self, c: str, **kw: Any) -> Entry:
        if self.log[c] and self.rng.random() < 0.15:  # roll over to a new ledger (sparse ids)
            self.ledger[c] += self.rng.choice([1, 2, 9, 1000])
            self.next_entry[c] = 0
        pos = (self.ledger[c], self.next_entry[c])
        self.next_entry[c] += 1
        e = Entry(c, pos, self.now, **kw)
        self.log[c].append(e)
        self.to_read.append(e)
        self.drain()
        return e

    def drain(self) -> None:
        """Replicators of each cluster read new entries in order (§4.7): marker check, then forward."""
        while self.to_read:
            e = self.to_read.popleft()
            for r in self.names:
                if r == e.cluster:
                    continue
                # rule 4: markers from the replicator's own remote go to the controller
                if e.marker_type in (REQUEST, RESPONSE, UPDATE) and e.replicated_from == r:
                    self.controller(e.cluster, e)
                if e.replicated_from is not None:  # rule 5
                    continue
                if e.marker_type is not None and e.replicate_to and r not in e.replicate_to:  # rule 6
                    continue
                self.net[(e.cluster, r)].append(e)

    # -- controller (§4.4) and builder (§4.5) ---------------------------------------------------------
    def controller(self, c: str, e: Entry) -> None:
        if e.marker_type == REQUEST:
            source = e.source_cluster or e.replicated_from or ""
            s = self.snaps.get(e.snapshot_id or "")
            if s is not None:
                s.landed.setdefault(c, []).append(e.position)
            lac = self.lac(c)
            w = self.append(
                c,
                marker_type=RESPONSE,
                replicate_to=(source,),
                snapshot_id=e.snapshot_id,
                response_cluster=c,
                response_position=lac,
            )
            if s is not None:
                s.responses.append(SimResponse(c, lac, w.position))
        elif e.marker_type == RESPONSE:
            s = self.snaps.get(e.snapshot_id or "")
            if s is None or s.source != c:
                return
            resp = next(
                x
                for x in s.responses
                if x.cluster == e.response_cluster and x.received is None and x.lac == e.response_position
            )
            resp.received = e.position
            if not s.pending:
                resp.outcome = "late"
                return
            self.builder_received(s, e, resp)

    def builder_received(self, s: SimSnapshot, e: Entry, resp: SimResponse) -> None:
        cl = e.response_cluster or ""
        resp.round = 2 if s.first_round_complete else 1
        resp.outcome = "not_kept" if cl in s.kept else "kept"
        if cl not in s.kept:
            assert e.response_position is not None
            s.kept[cl] = e.response_position
        s.missing.discard(cl)
        if s.missing:
            return
        if len(s.remotes) > 1 and not s.first_round_complete:
            s.first_round_complete = True
            s.rounds_completed = 1
            s.round1_at = e.position
            s.missing = set(s.remotes)
            w = self.append(s.source, marker_type=REQUEST, snapshot_id=s.sid, source_cluster=s.source)
            s.requests.append(w.position)
            return
        s.pending = False
        s.local = e.position
        s.rounds_completed = 2 if len(s.remotes) > 1 else 1
        if s.round1_at is None:
            s.round1_at = e.position
        clusters = tuple(sorted(s.kept.items()))
        m = self.append(
            s.source,
            marker_type=SNAPSHOT,
            replicate_to=(s.source,),
            snapshot_id=s.sid,
            local_position=e.position,
            clusters=clusters,
        )
        s.marker = m.position

    # -- steps ------------------------------------------------------------------------------------
    def drop_timed_out(self) -> None:
        for s in self.snaps.values():
            if s.pending and s.start + self.timeout < self.now:
                s.pending = False

    def start_snapshot(self, c: str) -> None:
        self.counter += 1
        sid = f"{c}-{self.counter}"
        remotes = tuple(r for r in self.names if r != c)
        s = SimSnapshot(sid, c, remotes, self.now, missing=set(remotes))
        self.snaps[sid] = s
        w = self.append(c, marker_type=REQUEST, snapshot_id=sid, source_cluster=c)
        s.requests.append(w.position)

    def deliver(self, pair: tuple[str, str]) -> None:
        e = self.net[pair].popleft()
        self.append(
            pair[1],
            marker_type=e.marker_type,
            replicated_from=pair[0],
            replicate_to=e.replicate_to,
            snapshot_id=e.snapshot_id,
            source_cluster=e.source_cluster,
            response_cluster=e.response_cluster,
            response_position=e.response_position,
            local_position=e.local_position,
            clusters=e.clusters,
        )

    def run(self, steps: int, max_snapshots: int) -> None:
        for _ in range(steps):
            self.now += self.rng.choice([0, 0, 1, 5, 40, 200, 700])
            self.drop_timed_out()
            busy = [p for p, q in self.net.items() if q]
            roll = self.rng.random()
            if roll < 0.15 and self.counter < max_snapshots:
                self.start_snapshot(self.rng.choice(self.names))
            elif roll < 0.3:
                self.append(self.rng.choice(self.names), marker_type=None)
            elif busy:
                self.deliver(self.rng.choice(busy))

    # -- expected assembly rows -------------------------------------------------------------------
    def expected(self, checked_at: int) -> list[dict[str, Any]]:
        out = []
        by_source: dict[str, list[SimSnapshot]] = {}
        for s in self.snaps.values():
            by_source.setdefault(s.source, []).append(s)
        for source, snaps in by_source.items():
            snaps.sort(key=lambda s: (s.start, s.requests[0]))
            prev: int | None = None
            for s in snaps:
                if s.marker is not None:
                    status = "complete"
                elif s.start + self.timeout < checked_at:
                    status = "timed_out"
                else:
                    status = "pending"
                responses = sorted(
                    s.responses,
                    key=lambda x: (x.received is None, x.received or (0, 0), x.cluster, x.written),
                )
                out.append(
                    {
                        "cluster": source,
                        "snapshot_id": s.sid,
                        "status": status,
                        "remote_clusters": sorted(s.remotes),
                        "rounds_needed": 2 if len(s.remotes) > 1 else 1,
                        "rounds_completed": s.rounds_completed,
                        "request_count": len(s.requests),
                        "request_round1_position": s.requests[0],
                        "request_round2_position": s.requests[1] if len(s.requests) > 1 else None,
                        "started_ms": s.start,
                        "requests_landed": sorted(
                            (c, k + 1, p) for c, ps in s.landed.items() for k, p in enumerate(ps)
                        ),
                        "responses": [
                            (x.cluster, x.round, x.lac, x.written, x.received, x.outcome) for x in responses
                        ],
                        "kept_clusters": sorted(s.kept.items()),
                        "round1_completed_position": s.round1_at,
                        "predicted_local_position": s.local,
                        "snapshot_position": s.marker,
                        "snapshot_matches": True if s.marker is not None else None,
                        "late_responses": sum(1 for x in s.responses if x.outcome == "late"),
                        "gap_from_previous_ms": None if prev is None else s.start - prev,
                    }
                )
                prev = s.start
        return out

    def marker_rows(self) -> list[Entry]:
        return [e for c in self.names for e in self.log[c] if e.marker_type is not None]
