"""Plain-Python managed-ledger engine for one topic: the sequential eviction loops (docs §3.5-§3.7).

Private to :mod:`pulsar_model.quota.eviction`, which runs it per ``(cluster, topic)`` group on the executors.
It re-implements the managed-ledger arithmetic of docs §1 and §2 with the same version switches as the
DataFrame transforms of :mod:`pulsar_model.positions` / :mod:`pulsar_model.backlog` (read from a
:class:`~pulsar_model.domain.versions.Behaviour`), but sequentially, because the eviction loops feed every
skip's
result into the next iteration:

* §1.3-§1.5 previous / valid / next valid position; §1.7 ``getNumberOfEntries`` (2.x/3.x arithmetic or the
  4.x one with its ``comparePositions``); §1.8 cursor counts; §1.9 ``getPositionAfterN`` (all generations);
* §1.2 mark-delete (never backwards, the beyond-LAC rule, the extension over acked ranges,
  ``messagesConsumedCounter``); §1.10 ``skipEntries(n, Include)``;
* §2.3 ``getEstimatedBacklogSize()`` with the slowest durable cursor: the root of the broker's cursor heap,
  replayed with its sift rules (:class:`CursorHeap`, docs §3.9);
* §3.6 ``dropBacklogForSizeLimit``, §3.7 ``dropBacklogForTimeLimit`` (precise: ``findNewestMatching``;
  non-precise: whole ledgers by close timestamp - stepwise for the trace, and its end state computed from
  each cursor's own path, :func:`drop_backlog_for_time_limit_direct`, because the loop makes up to
  cursors x ledgers steps).

Positions are ``(ledger_id, entry_id)`` tuples (Python's tuple order is Pulsar's order, §0.1); acked ranges
are open-closed ``(lower, upper]`` pairs. Where the broker throws, :class:`BrokerError` is raised with the
Java exception named in its message; the loops turn it into what the broker does with it (log and go on, or
abort the check).

Nothing here imports Spark; the module is shipped to executors with the package.
"""

from __future__ import annotations

import bisect
import contextlib
import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from pulsar_model.domain.versions import Behaviour

Position = tuple[int, int]
IdmRange = tuple[Position, Position]

#: Java ``Integer.MIN_VALUE`` / ``MAX_VALUE`` and ``Long`` bounds for the saturating casts of a double.
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
#: ``getSlowestConsumer`` tracks a durable cursor without a position at EARLIEST (docs §1.11).
EARLIEST: Position = (-1, -1)
#: Safety cap on the §3.6 size loop's iterations: the broker loop is finite (every step moves a mark-delete
#: forward or stops), the cap only guards this re-implementation. Each skip moves the slowest cursor toward
#: the target in one step, so real topics need about one iteration per cursor (18,144 for 1M ledgers x 10k
#: cursors). The §3.7 time loop has no cap: its end state is computed without stepping it.
MAX_LOOP_ITERATIONS = 1_000_000


class BrokerError(Exception):
    """The modelled broker code throws here (message names the Java exception)."""


def java_d2i(x: float) -> int:
    """Java ``(int) double``: NaN -> 0, saturates at the int range, else truncates toward zero."""
    if math.isnan(x):
        return 0
    if x >= INT_MAX:
        return INT_MAX
    if x <= INT_MIN:
        return INT_MIN
    return int(x)


def java_d2l(x: float) -> int:
    """Java ``(long) double``: NaN -> 0, saturates at the long range, else truncates toward zero."""
    if math.isnan(x):
        return 0
    if x >= LONG_MAX:
        return LONG_MAX
    if x <= LONG_MIN:
        return LONG_MIN
    return int(x)


def java_int_mul(a: int, b: int) -> int:
    """Java ``int * int`` (wraps around at 32 bits)."""
    r = (a * b) & 0xFFFFFFFF
    return r - 2**32 if r >= 2**31 else r


def java_div(a: int, b: int) -> int:
    """Java ``long / long`` (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


# --------------------------------------------------------------------------------------------------
# Guava-style ranges (for intersections with acked ranges)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rng:
    """A range of positions with a closed or open end on each side (Guava ``Range``)."""

    lo: Position
    lo_closed: bool
    hi: Position
    hi_closed: bool

    def intersection(self, a: Position, b: Position) -> Rng | None:
        """Intersection with the open-closed acked range ``(a, b]``; None when they are not connected."""
        lo_cut = max((self.lo, 0 if self.lo_closed else 1), (a, 1))
        hi_cut = min((self.hi, 1 if self.hi_closed else 0), (b, 1))
        if lo_cut > hi_cut:
            return None
        return Rng(lo_cut[0], lo_cut[1] == 0, hi_cut[0], hi_cut[1] == 1)


# --------------------------------------------------------------------------------------------------
# Managed ledger
# --------------------------------------------------------------------------------------------------


@dataclass
class Cursor:
    """One cursor of the topic and its evolving state (docs §1.2)."""

    name: str
    order: int
    durable: bool
    kind: str
    md: Position | None
    idm: list[IdmRange]
    consumed: int | None  # messagesConsumedCounter (None when not exported)
    md_before: Position | None = None
    idm_before: list[IdmRange] = field(default_factory=list)
    skipped: int = 0
    skips: int = 0

    def __post_init__(self) -> None:
        self.md_before = self.md
        self.idm = sorted(self.idm)
        self.idm_before = list(self.idm)


class ManagedLedger:
    """The managed-ledger state of one topic (docs §0.2) with the version's arithmetic."""

    def __init__(
        self,
        ledgers: Iterable[tuple[int, int, int]],
        current_ledger_id: int | None,
        current_ledger_entries: int,
        current_ledger_size: int,
        lac: Position,
        total_size: int,
        beh: Behaviour,
    ) -> None:
        rows = sorted({lid: (ent, sz) for lid, ent, sz in ledgers}.items())
        self.ids: list[int] = [lid for lid, _ in rows]
        self.ent: list[int] = [e for _, (e, _s) in rows]
        self.sz: list[int] = [s for _, (_e, s) in rows]
        self.index: dict[int, int] = {lid: i for i, lid in enumerate(self.ids)}
        self.cur_id = current_ledger_id
        self.cle = current_ledger_entries
        self.cls = current_ledger_size
        self.lac = lac
        self.total_size = total_size
        self.beh = beh
        self.cum_ent = [0]
        self.cum_sz = [0]
        for e, s in zip(self.ent, self.sz, strict=True):
            self.cum_ent.append(self.cum_ent[-1] + e)
            self.cum_sz.append(self.cum_sz[-1] + s)
        # last_ne[i]: index of the last ledger with listed entries > 0 among indexes < i (-1: none)
        self.last_ne = [-1]
        for i, e in enumerate(self.ent):
            self.last_ne.append(i if e > 0 else self.last_ne[-1])
        # position_after_n reads ``unread = entries - 0`` of every whole ledger it crosses (0 when the
        # version guards an empty ledger); the prefix sums let it cross a run of ledgers in one bisect
        unread = [0 if (beh.pan_unread_guard and e <= 0) else e for e in self.ent]
        self.unread_monotone = all(u >= 0 for u in unread)
        self.cum_unread = [0]
        for u in unread:
            self.cum_unread.append(self.cum_unread[-1] + u)
        # valid0_from[i]: smallest index j >= i whose (ledger, 0) is a valid position (len: none)
        n = len(self.ids)
        self.valid0_from = [n] * (n + 1)
        for i in range(n - 1, -1, -1):
            self.valid0_from[i] = i if self.is_valid((self.ids[i], 0)) else self.valid0_from[i + 1]

    # -- ledger map ---------------------------------------------------------------------------------
    def exists(self, lid: int) -> bool:
        return lid in self.index

    def listed_entries(self, lid: int) -> int | None:
        i = self.index.get(lid)
        return None if i is None else self.ent[i]

    def higher_key(self, lid: int) -> int | None:
        """Smallest ledger id strictly greater than ``lid`` (``ceilingKey(lid + 1)``)."""
        i = bisect.bisect_right(self.ids, lid)
        return self.ids[i] if i < len(self.ids) else None

    def entries_between(self, lo_lid: int, hi_lid: int) -> int:
        """Listed entries of the ledgers with ``lo_lid < id < hi_lid`` (the open ledger lists 0)."""
        a = bisect.bisect_right(self.ids, lo_lid)
        b = bisect.bisect_left(self.ids, hi_lid)
        return self.cum_ent[b] - self.cum_ent[a] if b > a else 0

    def size_before(self, lid: int) -> int:
        """Listed bytes of the ledgers with ``id < lid``."""
        return self.cum_sz[bisect.bisect_left(self.ids, lid)]

    def real_entries(self, lid: int) -> int:
        """Entries stored in an existing ledger (the open ledger: ``currentLedgerEntries``)."""
        if lid == self.cur_id:
            return self.cle
        return self.ent[self.index[lid]]

    def entry_exists(self, p: Position) -> bool:
        """True when ``p`` names a stored entry (used for reads, §3.7)."""
        return self.exists(p[0]) and 0 <= p[1] < self.real_entries(p[0])

    def first_position_ledger(self) -> int | None:
        """Ledger of ``getFirstPosition()`` (docs §1.6)."""
        if not self.ids:
            return None
        return self.lac[0] if self.ids[0] > self.lac[0] else self.ids[0]

    # -- §1.3 - §1.5 ------------------------------------------------------------------------------
    def previous(self, p: Position) -> Position:
        """``getPreviousPosition(P)`` (docs §1.3)."""
        if p[1] > 0:
            return (p[0], p[1] - 1)
        i = bisect.bisect_left(self.ids, p[0])
        if i == 0:
            return (p[0], -1)
        j = self.last_ne[i]
        if j >= 0:
            return (self.ids[j], self.ent[j] - 1)
        return (self.ids[0], -1)

    def is_valid(self, p: Position) -> bool:
        """``isValidPosition(P)`` (docs §1.4), 3.x/4.x order or the 2.x-old order."""
        lid, e = p
        lac_l, lac_e = self.lac
        if self.beh.new_valid_position:
            if lid not in self.index or e < 0:
                return False
            if self.cur_id is not None and lid == self.cur_id:
                return (lid == lac_l and e <= lac_e + 1) or e == 0
            if lid == lac_l:
                return e <= lac_e
            return e < self.ent[self.index[lid]]
        if e < 0 or lid > lac_l:
            return False
        if lid == lac_l:
            return e <= lac_e + 1
        i = self.index.get(lid)
        if i is None:
            return False if lid < lac_l else e == 0
        return e < self.ent[i]

    def next_valid(self, p: Position) -> Position:
        """``getNextValidPosition(P)`` (docs §1.5)."""
        q = (p[0], p[1] + 1)
        if self.is_valid(q):
            return q
        j = self.valid0_from[bisect.bisect_right(self.ids, q[0])]
        if j < len(self.ids):
            return (self.ids[j], 0)
        if self.beh.next_valid_open_ledger_fallback and self.cur_id is not None and self.cle == 0:
            return (self.cur_id, 0)
        return (self.lac[0], self.lac[1] + 1)

    # -- §1.7 ---------------------------------------------------------------------------------------
    def compare_4x(self, a: Position, b: Position) -> int:
        """4.x ``comparePositions``: next valid positions decide when one side is invalid (see columns.py)."""
        first = self.first_position_ledger()
        lac_l = self.lac[0]
        if first is None or min(a[0], b[0]) < first or max(a[0], b[0]) > lac_l:
            return (a > b) - (a < b)
        if a[0] == b[0]:
            return (a[1] > b[1]) - (a[1] < b[1])
        if not self.is_valid(a) or not self.is_valid(b):
            na, nb = self.next_valid(a), self.next_valid(b)
            return (na > nb) - (na < nb)
        return (a > b) - (a < b)

    def count(self, lo: Position, lo_closed: bool, hi: Position, hi_closed: bool) -> int:
        """``ManagedLedgerImpl.getNumberOfEntries(range)`` arithmetic (docs §1.7), ranges built by the broker.

        Guava's and 4.x's "Invalid range" checks are applied by the callers that can meet them.
        """
        lc, hc = int(lo_closed), int(hi_closed)
        if not self.beh.entry_count_4x:
            if lo[0] == hi[0]:
                if self.beh.entry_count_same_ledger_deleted_zero and hi[0] not in self.index:
                    return 0  # apache/pulsar#24852: a range inside a deleted ledger
                return hi[1] - lo[1] - 1 + lc + hc
            n = hi[1] + hc
            i = self.index.get(lo[0])
            if i is not None:
                n += self.ent[i] - (lo[1] + 1) + lc
            return n + self.entries_between(lo[0], hi[0])
        same = lo[0] == hi[0]
        if lo[0] > hi[0] or (same and lo[1] > hi[1]) or (same and lo[1] < 0 and hi[1] < 0):
            return 0
        if same:
            if lo[0] not in self.index:
                return 0
            return hi[1] - lo[1] - 1 + int(lo_closed and lo[1] >= 0) + int(hi_closed and hi[1] >= 0)
        n = 0
        hi_i = self.index.get(hi[0])
        if hi[1] >= 0 and hi_i is not None:
            unbounded = self.compare_4x(hi, self.lac) >= 0 or hi[0] == self.lac[0]
            capped = hi[1] if unbounded else min(hi[1], self.ent[hi_i] - 1)
            n += capped + hc
        lo_i = self.index.get(lo[0])
        if lo_i is not None:
            n += self.ent[lo_i] if lo[1] < 0 else self.ent[lo_i] - (lo[1] + 1) + lc
        return n + self.entries_between(lo[0], hi[0])

    def check_range(self, lo: Position, lo_closed: bool, hi: Position, hi_closed: bool) -> None:
        """Raise where Guava (every version) or the 4.x check refuses to build/count the range."""
        if lo > hi or (lo == hi and not lo_closed and not hi_closed):
            # Guava's Range constructor words it "Invalid range: ", the 4.x check below without the colon
            raise BrokerError(
                f"IllegalArgumentException: Invalid range: {_rng_text(lo, lo_closed, hi, hi_closed)}"
            )
        if self.beh.entry_count_4x and self.compare_4x(lo, hi) > 0:
            raise BrokerError(
                f"IllegalArgumentException: Invalid range {_rng_text(lo, lo_closed, hi, hi_closed)}"
            )

    # -- §1.8 ---------------------------------------------------------------------------------------
    def cursor_count(self, idm: list[IdmRange], r: Rng) -> int:
        """``cursor.getNumberOfEntries(range)``: ML count minus the ML count of each acked intersection."""
        n = self.count(r.lo, r.lo_closed, r.hi, r.hi_closed)
        for a, b in idm:
            common = r.intersection(a, b)
            if common is not None:
                n -= self.count(common.lo, common.lo_closed, common.hi, common.hi_closed)
        return n

    def precise_backlog(self, md: Position, idm: list[IdmRange]) -> int:
        """``getNumberOfEntriesInBacklog(true)`` (§1.8): 0 when ``md >= LAC`` (3.x+), else ``(md, LAC]``."""
        if self.beh.precise_backlog_guard and md >= self.lac:
            return 0
        self.check_range(md, False, self.lac, True)
        return self.cursor_count(idm, Rng(md, False, self.lac, True))

    def entries_in_storage(self, md: Position) -> int:
        """``getNumberOfEntriesInStorage()``: ML count of ``(md, LAC]`` (2.x-old: ``(md, LAC.next]``)."""
        hi = (self.lac[0], self.lac[1] + 1) if self.beh.storage_counts_lac_next else self.lac
        self.check_range(md, False, hi, True)
        return self.count(md, False, hi, True)

    def has_more_entries(self, idm: list[IdmRange], p: Position) -> bool:
        """``cursor.hasMoreEntries(P)``: ``P <= LAC`` and unacked entries in ``[P, LAC]`` (§3.7 search)."""
        if p > self.lac:
            return False
        return self.cursor_count(idm, Rng(p, True, self.lac, True)) > 0

    # -- §1.9 ---------------------------------------------------------------------------------------
    def position_after_n(self, start: Position, n: int, start_excluded: bool = True) -> Position:
        """``getPositionAfterN(start, n, bound)`` (docs §1.9) with the version's loop ends."""
        beh = self.beh
        cur = self.next_valid(start) if start_excluded else start
        skip = n
        last_ledger = False
        while skip >= 0:
            if cur[1] == 0 and self.unread_monotone and cur[0] != self.cur_id:
                cur, skip = self._cross_whole_ledgers(cur, skip)
            if self.cur_id is not None and cur[0] == self.cur_id:
                last_ledger = True
                if beh.pan_current_ledger_guard:
                    total = self.lac[1] + 1 if self.cle > 0 else 0
                else:
                    total = self.lac[1] + 1
            else:
                i = self.index.get(cur[0])
                if i is None:
                    if not beh.pan_deleted_ledger_as_empty:
                        raise BrokerError(
                            "NullPointerException: getPositionAfterN reads "
                            f"ledgers.get({cur[0]}).getEntries() of a ledger missing from the map"
                        )
                    total = 0
                else:
                    total = self.ent[i]
            guarded = beh.pan_unread_guard and total <= 0
            unread = 0 if guarded else total - cur[1]
            if unread >= skip:
                cur = (cur[0], cur[1] + skip)
                break
            skip -= unread
            if last_ledger:
                cur = (cur[0], total)
                break
            nxt = self.higher_key(cur[0])
            if nxt is not None:
                cur = (nxt, 0)
                continue
            if not self.ids:
                raise BrokerError("NoSuchElementException: ledgers.lastKey() on an empty ledger map")
            if beh.pan_past_end == "revisit_last_ledger":
                last = self.ids[-1]
                if last == self.cur_id:
                    cur = (last, 0)
                    continue
                walk = self.ent[-1]
                if walk <= 0:
                    raise BrokerError(
                        "getPositionAfterN never returns: the last ledger is empty and not the open ledger, "
                        "so the broker re-visits ledgers.lastKey() forever"
                    )
                # every re-visit of (last, 0) reads `walk` entries: jump straight to the final visit
                cur = (last, (skip - 1) % walk + 1)
                break
            if beh.pan_past_end == "loop_forever":
                raise BrokerError(
                    "getPositionAfterN never returns: past the last ledger it moves to ledgers.lastKey()+1, "
                    "which is absent from the map and counts 0 entries, forever"
                )
            raise BrokerError(
                "NullPointerException: getPositionAfterN ran past the last ledger "
                "(ledgers.lastKey()+1 is not in the ledger map)"
            )
        result = self.previous(cur)
        if beh.pan_lac_clamp and result > self.lac:
            result = self.lac
        return result

    def _cross_whole_ledgers(self, cur: Position, skip: int) -> tuple[Position, int]:
        """Fast-forward :meth:`position_after_n`'s walk from ``(ledger, 0)`` of a listed, non-open ledger.

        The walk subtracts the unread count of every ledger it leaves and moves to ``(next ledger, 0)``
        until a ledger holds at least the remaining skip. With non-negative unread counts their prefix sums
        are monotone, so the ledger where the walk stops (or the last listed ledger before the open one)
        is found by bisection; the loop body then processes that ledger exactly as before.
        """
        i = self.index.get(cur[0])
        if i is None:
            return cur, skip
        k = self.index.get(self.cur_id, len(self.ids)) if self.cur_id is not None else len(self.ids)
        if k <= i:
            return cur, skip
        base = self.cum_unread[i]
        # smallest m in (i, k] with cum_unread[m] - base >= skip: the walk stops in ledger index m - 1
        m = bisect.bisect_left(self.cum_unread, skip + base, i + 1, k + 1)
        j = m - 1 if m <= k else k - 1
        if j <= i:
            return cur, skip
        return (self.ids[j], 0), skip - (self.cum_unread[j] - base)

    # -- §2 -----------------------------------------------------------------------------------------
    def consumed_size(self, size: int, entries: int, e: int) -> int:
        """``consumedLedgerSize`` (docs §2.2) of the version's generation."""
        if entries <= 0:
            return 0
        gen = self.beh.consumed_generation
        if gen == 2 and entries == e + 1:
            return size
        if gen == 3 and entries <= e + 1:
            return size
        return (e + 1) * java_div(size, entries) if e >= 0 else 0

    def estimate_from_slowest(self, pos: Position | None) -> int:
        """``getEstimatedBacklogSize()`` (docs §2.3) given the slowest durable cursor's md (None: 0)."""
        if pos is None:
            return 0
        size = self.total_size - self.size_before(pos[0])
        i = self.index.get(pos[0])
        if i is None:
            return size
        if self.ent[i] == 0:  # the open ledger (its LedgerInfo lists 0 entries)
            return size - self.consumed_size(self.cls, self.cle, pos[1])
        return size - self.consumed_size(self.sz[i], self.ent[i], pos[1])

    def estimate_from_position(self, pos: Position) -> int:
        """``estimateBacklogFromPosition(pos)`` (docs §2.4): the bytes of the ledgers from ``pos``'s on, minus
        the consumed part of its ledger (the open ledger by ``currentLedgerSize/Entries``); a deleted ledger
        gives those bytes as they are (2.9/2.10: ``totalSize``). Without an open ledger ``pos`` is "not in
        the open ledger" (3.x dereferences it unguarded)."""
        after = self.total_size - self.size_before(pos[0])
        i = self.index.get(pos[0])
        if i is None:
            return self.total_size if self.beh.estimate_deleted_total_size else after
        if pos[0] == self.cur_id:
            return after - self.consumed_size(self.cls, self.cle, pos[1])
        return after - self.consumed_size(self.sz[i], self.ent[i], pos[1])

    def size_since_mark_delete(self, md: Position, idm: list[IdmRange]) -> int:
        """``getEstimatedSizeSinceMarkDeletePosition()`` (docs §2.5): :meth:`estimate_from_position` of
        ``md``; with PR #25089 minus ``d * (estimate div n)`` for the ``d`` acked of the ``n`` entries in
        ``(md, LAC]`` (``max(0, estimate)`` when ``n <= d``)."""
        total = self.estimate_from_position(md)
        if not self.beh.size_since_md_subtracts_acks or not md < self.lac:
            return total
        window = Rng(md, False, self.lac, True)
        acked = 0
        for a, b in idm:
            common = window.intersection(a, b)
            if common is not None:
                acked += self.count(common.lo, common.lo_closed, common.hi, common.hi_closed)
        if acked == 0:
            return total
        n = self.count(md, False, self.lac, True)
        if n == 0 or n <= acked:
            return max(0, total)
        return total - acked * java_div(total, n)

    # -- §1.2 / §1.10 -------------------------------------------------------------------------------
    def mark_delete(self, c: Cursor, new: Position) -> int:
        """``asyncMarkDelete(new)`` on cursor ``c`` (docs §1.2); returns the entries newly consumed.

        ``new < md`` raises (MarkDeletingMarkedPosition); ``new > LAC`` raises unless the next-ledger rule
        allows it; ``new == md`` changes nothing. The consumed-counter increment is the cursor count of
        ``(md, new]`` before the extension over acked ranges (acked entries were counted when acked).
        """
        md = c.md
        if md is None:
            raise BrokerError("cursor has no mark_delete_position")
        self.check_mark_delete(md, new)
        if new == md:
            return 0
        if new[0] == md[0] and new[1] == md[1] + 1:
            newly = 0 if _idm_contains(c.idm, new) else 1
        else:
            newly = self.cursor_count(c.idm, Rng(md, False, new, True))
        p = self.next_valid(new)
        while p <= self.lac:
            containing = _idm_range_containing(c.idm, p)
            # No progress ends the extension: with a LAC past the current ledger (an inconsistent export)
            # getNextValidPosition falls back to (current ledger, 0) inside the range just applied and the
            # literal loop would never end (it ends wherever the state is consistent).
            if containing is None or containing[1] <= new:
                break
            new = containing[1]
            p = self.next_valid(new)
        c.idm = [(max(a, new), b) for a, b in c.idm if b > new]
        c.md = new
        if c.consumed is not None:
            c.consumed += newly
        c.skipped += newly
        return newly

    def check_mark_delete(self, md: Position, new: Position) -> None:
        """Raise where ``asyncMarkDelete(new)`` refuses at ``md`` (docs §1.2): depends on ``md`` only.

        ``new < md`` is MarkDeletingMarkedPosition; ``new > LAC`` is refused unless md is at the end of its
        ledger and ``new`` is in the ledger after the LAC's (the next-ledger rule).
        """
        if new < md:
            raise BrokerError(
                f"MarkDeletingMarkedPosition: current mark-delete {_p(md)}, attempted mark delete {_p(new)}"
            )
        if new > self.lac:
            nxt = self.higher_key(self.lac[0])
            md_entries = self.listed_entries(md[0])
            if not (nxt is not None and md_entries is not None and md[1] + 1 >= md_entries and new[0] == nxt):
                raise BrokerError("ManagedLedgerException: Invalid mark deleted position")

    def skip_include(self, c: Cursor, n: int) -> int:
        """``skipEntries(n, Include)`` (§1.10): mark-delete at ``getPositionAfterN(md, n, startExcluded)``.

        A target before md is MarkDeletingMarkedPosition, which ``asyncSkipEntries`` reports as success.
        """
        if c.md is None:
            raise BrokerError("cursor has no mark_delete_position")
        if n < 0:
            raise BrokerError(f"IllegalArgumentException: skipEntries({n})")
        target = self.position_after_n(c.md, n)
        if target < c.md:
            return 0
        return self.mark_delete(c, target)


def _p(p: Position | None) -> str:
    return "null" if p is None else f"{p[0]}:{p[1]}"


def _rng_text(lo: Position, lo_closed: bool, hi: Position, hi_closed: bool) -> str:
    return f"{'[' if lo_closed else '('}{_p(lo)}..{_p(hi)}{']' if hi_closed else ')'}"


def _idm_contains(idm: list[IdmRange], p: Position) -> bool:
    return _idm_range_containing(idm, p) is not None


def _idm_range_containing(idm: list[IdmRange], p: Position) -> IdmRange | None:
    for a, b in idm:
        if a < p <= b:
            return (a, b)
        if a >= p:
            break
    return None


# --------------------------------------------------------------------------------------------------
# Slowest cursor: the broker's cursor container (docs §3.9)
# --------------------------------------------------------------------------------------------------


def slowest_durable(cursors: list[Cursor]) -> tuple[Cursor | None, bool]:
    """The root of a :class:`CursorHeap` freshly built from ``cursors``: the durable cursor with the smallest
    md (null md = EARLIEST), among equal ones the first added (smallest ``order``, then list position).

    Building the heap by successive adds only moves an added cursor above a strictly larger parent, so the
    first-added cursor with the smallest md ends at the root. Returns ``(cursor, tie)``; ``tie`` is True when
    several durable cursors share that md: the broker's own heap was built in cursor-recovery order and then
    reshaped by every mark-delete since the topic was loaded, neither of which the export carries.
    """
    durable = [(_md_key(c), c.order, i, c) for i, c in enumerate(cursors) if c.durable]
    if not durable:
        return None, False
    best = min(durable, key=lambda t: (t[0], t[1], t[2]))
    return best[3], sum(1 for t in durable if t[0] == best[0]) > 1


def unacked_gaps(lower: Position, upper: Position, acked: Iterable[IdmRange]) -> list[IdmRange]:
    """``(lower, upper]`` minus the union of the open-closed ``acked`` ranges, as disjoint open-closed gaps in
    position order (reversed or empty ranges cover nothing; overlapping and touching ones merge)."""
    clipped = sorted((max(lo, lower), min(hi, upper)) for lo, hi in acked if max(lo, lower) < min(hi, upper))
    gaps: list[IdmRange] = []
    start = lower
    for lo, hi in clipped:
        if start < lo:
            gaps.append((start, lo))
        start = max(start, hi)
    if start < upper:
        gaps.append((start, upper))
    return gaps


def listed_positions_unacked(
    listed: Iterable[tuple[int, int]],
    current_ledger_id: int | None,
    current_ledger_entries: int,
    lower: Position,
    upper: Position,
    acked: Iterable[IdmRange],
) -> int:
    """Positions the ledger list says exist in ``(lower, upper]`` outside ``acked`` (docs §0.2: the open
    ledger holds ``current_ledger_entries``; ``listed`` is ``(id, entries)``, null counts as 0): the
    ``expected_backlog_entries`` of :func:`pulsar_model.backlog_exact.exact_backlog`. A ledger listed
    twice counts twice, as the set-based sum does."""
    rows = sorted((lid, current_ledger_entries if lid == current_ledger_id else n) for lid, n in listed)
    ids = [lid for lid, _ in rows]
    upto = [0]
    for _, n in rows:
        upto.append(upto[-1] + n)

    def at_or_before(p: Position) -> int:
        i = bisect.bisect_right(ids, p[0])
        if i and ids[i - 1] == p[0]:
            n = rows[i - 1][1]
            return upto[i - 1] + min(max(min(p[1], n - 1) + 1, 0), n)
        return upto[i]

    return sum(at_or_before(e) - at_or_before(s) for s, e in unacked_gaps(lower, upper, acked))


@dataclass(frozen=True)
class LedgerPinning:
    """What the next ``internalTrimLedgers`` deletes and what the slowest durable cursor alone keeps (docs
    §1.11; the fields of :func:`pulsar_model.pinning.pinning_report`, which states the rule). Ledger lists
    are ascending, duplicates of the listing kept; ``trim_boundary_ledger_id`` None when nothing is listed."""

    slowest: Cursor | None
    next_slowest: Cursor | None
    tie: bool
    pin_target: Position | None
    trimmable_now: list[tuple[int, int]]  # (ledger id, size bytes)
    pinned: list[tuple[int, int]]
    trim_boundary_ledger_id: int | None


def ledger_pinning(
    listed: Iterable[tuple[int, int, int]],
    current_ledger_id: int | None,
    lac: Position | None,
    cursors: Iterable[Cursor],
    md_last_entry_trim: bool,
) -> LedgerPinning:
    """docs §1.11 for one topic, retention ignored: ``listed`` are the listed ledgers ``(id, entries, size)``
    (null counts as 0), ``cursors`` in export order (readers never count), ``md_last_entry_trim`` the
    version's apache/pulsar#22034 rule (a slowest md at the last entry of a closed ledger releases it).

    The slowest and next slowest durable cursors are the first two by (md, export order), a null md being
    EARLIEST; the broker's ``currentLedger`` is the open ledger, else the largest listed id (never trimmed).
    The pin target is the next slowest md, or for the only durable cursor ``max(md, LAC)``.
    """
    ledgers = list(listed)
    durable = sorted((c for c in cursors if c.durable), key=lambda c: (_md_key(c), c.order))
    first = durable[0] if durable else None
    second = durable[1] if len(durable) > 1 else None
    if first is None:
        target: Position | None = None
    elif second is not None:
        target = _md_key(second)
    else:
        target = _md_key(first) if lac is None else max(_md_key(first), lac)
    protected = current_ledger_id
    if protected is None and ledgers:
        protected = max(lid for lid, _, _ in ledgers)

    def below(lid: int, entries: int, bound: Position) -> bool:
        # headMap(bound), plus the bound's own ledger when md is its last entry (docs §1.11 rule 2)
        return lid < bound[0] or (
            md_last_entry_trim and lid == bound[0] and lid != protected and entries - 1 == bound[1]
        )

    now: list[tuple[int, int]] = []
    pinned: list[tuple[int, int]] = []
    kept: list[int] = []
    for lid, entries, size in ledgers:
        before_current = protected is not None and lid < protected
        trimmable = before_current and (first is None or below(lid, entries, _md_key(first)))
        if trimmable:
            now.append((lid, size))
        else:
            kept.append(lid)
            if before_current and target is not None and below(lid, entries, target):
                pinned.append((lid, size))
    return LedgerPinning(
        slowest=first,
        next_slowest=second,
        tie=second is not None and first is not None and _md_key(second) == _md_key(first),
        pin_target=target,
        trimmable_now=sorted(now),
        pinned=sorted(pinned),
        trim_boundary_ledger_id=min(kept) if kept else None,
    )


class CursorHeap:
    """``ManagedCursorContainer`` / ``ManagedCursorContainerImpl`` (docs §3.9): the durable cursors in a
    binary min-heap stored in an array, keyed by mark-delete position alone.

    * ``add``: the cursor goes to the end of the array and moves up while its parent is strictly larger;
      the cursors are added by ``(order, list position)``, the export order (docs §3.9 on why the broker's
      own order is unknowable);
    * ``moved`` (``cursorUpdated``): the cursor's key changes; it sifts down when it is the root or its parent
      is not larger (``<=``), else up. Down, it swaps with a child only when that child is strictly smaller:
      the right child when it is smaller than the cursor and the left child is not smaller than the right
      one, else the left child when that one is smaller than the cursor. Equal positions never swap, so a
      cursor that moved onto the position of the others stays where it is (the root, when it was the root);
    * ``root``: ``getSlowestConsumer()`` = ``heap[0]``.

    Readers (non-durable cursors) are never in the heap. Arrays (``heap``: cursor index per slot, ``slot``:
    slot per cursor index, ``key``: position per cursor index) keep the sifts cheap; ``at`` counts the
    durable cursors per position for the tie flag.
    """

    def __init__(self, cursors: list[Cursor]) -> None:
        self.cursors = cursors
        self.heap: list[int] = []
        self.slot: list[int] = [-1] * len(cursors)
        self.key: list[Position] = [EARLIEST] * len(cursors)
        self.at: dict[Position, int] = {}
        for i in sorted((i for i, c in enumerate(cursors) if c.durable), key=lambda i: (cursors[i].order, i)):
            self.add(i)

    def add(self, i: int) -> None:
        """``add(cursor, position)``: append at the end of the array, then sift up."""
        k = _md_key(self.cursors[i])
        self.key[i] = k
        self.at[k] = self.at.get(k, 0) + 1
        self.heap.append(i)
        self._sift_up(len(self.heap) - 1)

    def _sift_up(self, s: int) -> None:
        heap, key, slot = self.heap, self.key, self.slot
        i = heap[s]
        k = key[i]
        while s > 0:
            p = (s - 1) // 2
            j = heap[p]
            if not key[j] > k:
                break
            heap[s] = j
            slot[j] = s
            s = p
        heap[s] = i
        slot[i] = s

    def _sift_down(self, s: int) -> None:
        heap, key, slot = self.heap, self.key, self.slot
        n = len(heap)
        i = heap[s]
        k = key[i]
        while True:
            left = 2 * s + 1
            right = left + 1
            j = -1
            if right < n and key[heap[right]] < k:
                j = left if key[heap[left]] < key[heap[right]] else right
            elif left < n and key[heap[left]] < k:
                j = left
            if j < 0:
                break
            c = heap[j]
            heap[s] = c
            slot[c] = s
            s = j
        heap[s] = i
        slot[i] = s

    def moved(self, i: int) -> None:
        """``cursorUpdated``: re-sort cursor ``i`` after its md may have changed (an unchanged key keeps the
        layout: the broker's sift finds no strictly smaller child and no strictly larger parent)."""
        s = self.slot[i]
        if s < 0:
            return
        new = _md_key(self.cursors[i])
        old = self.key[i]
        if new == old:
            return
        left = self.at[old] - 1
        if left:
            self.at[old] = left
        else:
            del self.at[old]
        self.at[new] = self.at.get(new, 0) + 1
        self.key[i] = new
        if s == 0 or self.key[self.heap[(s - 1) // 2]] <= new:
            self._sift_down(s)
        else:
            self._sift_up(s)

    def root(self) -> tuple[Cursor | None, bool]:
        """``getSlowestConsumer()`` and whether another durable cursor has the same md."""
        if not self.heap:
            return None, False
        i = self.heap[0]
        return self.cursors[i], self.at[self.key[i]] > 1

    def root_md(self) -> Position | None:
        return self.cursors[self.heap[0]].md if self.heap else None


def _md_key(c: Cursor) -> Position:
    return c.md if c.md is not None else EARLIEST


def estimated_backlog(ml: ManagedLedger, cursors: list[Cursor]) -> int:
    """Topic ``backlogSize`` = ``getEstimatedBacklogSize()`` (docs §2.3)."""
    slowest, _ = slowest_durable(cursors)
    return ml.estimate_from_slowest(None if slowest is None else slowest.md)


# --------------------------------------------------------------------------------------------------
# §3.6 size eviction
# --------------------------------------------------------------------------------------------------


@dataclass
class SizeStep:
    """One skip of the §3.6 loop (an entry of the ``iterations`` trace)."""

    iteration: int
    cursor_name: str
    mark_delete_before: Position | None
    backlog_before: int
    entries_counter: int
    entries_source: str
    to_skip: int
    mark_delete_after: Position | None
    skipped_entries: int
    backlog_after: int
    slowest_tie: bool
    error: str | None


@dataclass
class SizeResult:
    """End of the §3.6 loop: ``steps`` holds the first ``trace_limit`` skips, ``iteration_count`` all."""

    target: Target | None
    backlog_before: int
    backlog_after: int
    stop_reason: str
    stop_cursor_name: str | None
    steps: list[SizeStep]
    tie_ambiguous: bool
    error: str | None
    iteration_count: int = 0


def entries_in_backlog(
    ml: ManagedLedger, c: Cursor, entries_added: int | None, use_counter: bool
) -> tuple[int, str]:
    """``getNumberOfEntriesInBacklog(false)`` (docs §1.8): ``entriesAddedCounter - messagesConsumedCounter``,
    the precise count when that is negative or (here) when the counters were not exported.
    """
    if c.md is None:
        raise BrokerError("cursor has no mark_delete_position")
    if use_counter and entries_added is not None and c.consumed is not None:
        backlog = entries_added - c.consumed
        if backlog >= 0:
            return backlog, "counter"
        return ml.precise_backlog(c.md, c.idm), "precise_fallback"
    return ml.precise_backlog(c.md, c.idm), "precise"


#: ``reductionFactor``: eviction brings the backlog down to 90 % of the quota (docs §3.6, §3.7).
REDUCTION_FACTOR = 0.9

Target = int | float


def size_target(limit: int, formula_4x: bool) -> Target:
    """Eviction target: ``0.9 * limit`` as a double, or ``(long) (0.9 * limit)`` with apache/pulsar#25624
    (``formula_4x``; docs §3.6)."""
    raw = REDUCTION_FACTOR * float(limit)
    return java_d2l(raw) if formula_4x else raw


def above_target(backlog: int, target: Target) -> bool:
    """``backlogSize > targetSize``: long vs double (the long is widened), long vs long with #25624."""
    if isinstance(target, float):
        return float(backlog) > target
    return backlog > target


def entries_to_skip(backlog: int, target: Target, entries: int) -> int:
    """``messagesToSkip`` with the version's IEEE-754 operation order (docs §3.6).

    double target: ``(int) (((backlog - target) / backlog) * entries)``;
    long target (#25624): ``(int) ((double) (backlog - target) * (double) entries / backlog)``.
    """
    if isinstance(target, float):
        factor = (float(backlog) - target) / float(backlog)
        return java_d2i(factor * float(entries))
    return java_d2i(float(backlog - target) * float(entries) / float(backlog))


def drop_backlog_for_size_limit(
    ml: ManagedLedger,
    cursors: list[Cursor],
    limit: int | None,
    entries_added: int | None,
    use_counter: bool,
    formula_4x: bool,
    trace_limit: int | None = None,
) -> SizeResult:
    """``dropBacklogForSizeLimit(topic, quota)`` (docs §3.6), mutating ``cursors``.

    A null or negative limit means "no size quota": the broker never calls the method (stop
    ``quota_disabled``). Errors of ``skipEntries`` are logged by the broker and the loop goes on (the cursor
    is then the previous one); an error computing the entries leaves the method (stop ``error``).
    Only the first ``trace_limit`` skips are kept in ``steps`` (None: all); ``iteration_count`` counts all.
    The slowest cursor is the root of the broker's heap (:class:`CursorHeap`): after a skip that leaves the
    skipped cursor on the same md as the others it can stay the root, and the loop stops (``same_cursor``).
    ``tie_ambiguous``: some pick, the last one included, had another durable cursor on the root's md.
    """
    backlog = estimated_backlog(ml, cursors)
    before = backlog
    if limit is None or limit < 0:
        return SizeResult(None, before, before, "quota_disabled", None, [], False, None)
    target = size_target(limit, formula_4x)
    heap = CursorHeap(cursors)
    position = {id(c): i for i, c in enumerate(cursors)}
    steps: list[SizeStep] = []
    count = 0
    prev: Cursor | None = None
    tie_ambiguous = False
    reason = "below_target"
    stop_name: str | None = None
    error: str | None = None
    while above_target(backlog, target):
        if count >= MAX_LOOP_ITERATIONS:
            reason, error = "error", "iteration cap reached"
            break
        c, tie = heap.root()
        if c is None:
            reason = "no_cursor"
            break
        tie_ambiguous = tie_ambiguous or tie
        if c is prev:
            reason, stop_name = "same_cursor", c.name
            break
        try:
            entries, source = entries_in_backlog(ml, c, entries_added, use_counter)
        except BrokerError as exc:
            reason, stop_name, error = "error", c.name, str(exc)
            break
        to_skip = entries_to_skip(backlog, target, entries)
        if to_skip == 0:
            reason, stop_name = "zero_skip", c.name
            break
        md_before = c.md
        step_error: str | None = None
        newly = 0
        try:
            newly = ml.skip_include(c, to_skip)
            c.skips += 1
        except BrokerError as exc:
            step_error = str(exc)
        heap.moved(position[id(c)])
        new_backlog = ml.estimate_from_slowest(heap.root_md())
        count += 1
        if trace_limit is None or count <= trace_limit:
            steps.append(
                SizeStep(
                    count,
                    c.name,
                    md_before,
                    backlog,
                    entries,
                    source,
                    to_skip,
                    c.md,
                    newly,
                    new_backlog,
                    tie,
                    step_error,
                )
            )
        backlog = new_backlog
        prev = c
    return SizeResult(target, before, backlog, reason, stop_name, steps, tie_ambiguous, error, count)


# --------------------------------------------------------------------------------------------------
# §3.7 time eviction
# --------------------------------------------------------------------------------------------------


@dataclass
class TimeStep:
    """One mark-delete of the non-precise §3.7 loop."""

    iteration: int
    cursor_name: str
    mark_delete_before: Position | None
    ledger_id: int
    ledger_closed_at_ms: int | None
    action: str  # deleted_ledger | expired_ledger
    mark_delete_after: Position | None
    skipped_entries: int
    slowest_tie: bool
    error: str | None


@dataclass
class TimeResult:
    """End of the non-precise §3.7 loop: ``steps`` is the recorded trace, ``iteration_count`` all steps."""

    stop_reason: str
    stop_cursor_name: str | None
    steps: list[TimeStep]
    tie_ambiguous: bool
    undecidable: bool
    error: str | None
    iteration_count: int = 0


#: ``stop_reason`` of :func:`drop_backlog_for_time_limit_ledgers` cut by ``max_steps`` (trace runs only).
TRACE_LIMIT_REACHED = "trace_limit_reached"


def time_limit_ms(limit_seconds: int, millis_overflow_int: bool, compared_as_millis: bool = False) -> int:
    """The §3.7 limit the close-time age (ms) is compared with: ``limitTime * 1000`` in 32-bit ints (wraps)
    before apache/pulsar#21816, ``SECONDS.toMillis`` after; ``compared_as_millis`` (before #17957): the
    limit in seconds taken as milliseconds, unconverted."""
    if compared_as_millis:
        return limit_seconds
    return java_int_mul(_java_int(limit_seconds), 1000) if millis_overflow_int else limit_seconds * 1000


def _unknown_close_time(lid: int) -> str:
    return (
        f"close time of ledger {lid} not exported (stats-internal has no LedgerInfo timestamp; "
        "export topics info-internal)"
    )


def _no_next_ledger(lid: int) -> str:
    return f"NullPointerException: no ledger after {lid} (next position has a null ledger id)"


def drop_backlog_for_time_limit_ledgers(
    ml: ManagedLedger,
    cursors: list[Cursor],
    closed_at_ms: dict[int, int | None],
    limit_seconds: int | None,
    now_ms: int,
    millis_overflow_int: bool,
    max_steps: int | None = None,
    *,
    compared_as_millis: bool = False,
) -> TimeResult:
    """Non-precise ``dropBacklogForTimeLimit`` (docs §3.7) step by step: whole closed ledgers by close time.

    ``closed_at_ms`` maps ledger id -> close time (None: not exported). The open ledger's LedgerInfo has
    timestamp 0 and never expires. A closed ledger whose close time was not exported stops the loop with
    ``unknown_close_time`` (undecidable: the broker knows the time, the export does not). Any exception
    (no next ledger, a refused mark-delete) ends the broker's loop (stop ``error``/``no_next_ledger``).
    ``millis_overflow_int`` / ``compared_as_millis``: how the limit is converted (:func:`time_limit_ms`).

    The slowest cursor is the root of the broker's heap (:class:`CursorHeap`); ``tie_ambiguous``: some pick,
    the last one included, had another durable cursor on the root's md.

    One mark-delete per iteration, so the cost is the number of steps (up to cursors x ledgers): the
    eviction uses :func:`drop_backlog_for_time_limit_direct` for the end state and this loop, cut after
    ``max_steps`` steps (stop :data:`TRACE_LIMIT_REACHED`), for the trace only.
    """
    if limit_seconds is None or limit_seconds <= 0:
        return TimeResult("quota_disabled", None, [], False, False, None)
    limit_ms = time_limit_ms(limit_seconds, millis_overflow_int, compared_as_millis)
    steps: list[TimeStep] = []
    tie_ambiguous = False
    heap = CursorHeap(cursors)
    position = {id(c): i for i, c in enumerate(cursors)}

    def result(reason: str, name: str | None, undecidable: bool, error: str | None) -> TimeResult:
        return TimeResult(reason, name, steps, tie_ambiguous, undecidable, error, len(steps))

    while True:
        if max_steps is not None and len(steps) >= max_steps:
            return result(TRACE_LIMIT_REACHED, None, False, None)
        c, tie = heap.root()
        if c is None:
            return result("no_cursor", None, False, None)
        tie_ambiguous = tie_ambiguous or tie
        md = c.md
        if md is None:
            return result("error", c.name, False, "cursor has no mark_delete_position")
        ts: int | None = None
        if ml.exists(md[0]):
            if md[0] == ml.cur_id:
                return result("open_ledger", c.name, False, None)
            ts = closed_at_ms.get(md[0])
            if ts is None:
                return result("unknown_close_time", c.name, True, _unknown_close_time(md[0]))
            if not (ts > 0 and now_ms - ts > limit_ms):
                return result("not_expired", c.name, False, None)
            action = "expired_ledger"
        else:
            action = "deleted_ledger"
        nxt = ml.higher_key(md[0])
        if nxt is None:
            return result("no_next_ledger", c.name, False, _no_next_ledger(md[0]))
        try:
            newly = ml.mark_delete(c, (nxt, -1))
        except BrokerError as exc:
            steps.append(TimeStep(len(steps) + 1, c.name, md, md[0], ts, action, c.md, 0, tie, str(exc)))
            return result("error", c.name, False, str(exc))
        c.skips += 1
        heap.moved(position[id(c)])
        steps.append(TimeStep(len(steps) + 1, c.name, md, md[0], ts, action, c.md, newly, tie, None))


@dataclass(frozen=True)
class _TimeStop:
    """A state where the §3.7 loop stops when the slowest cursor is in it (it depends on the md only)."""

    reason: str
    error: str | None = None
    undecidable: bool = False
    #: the loop got as far as a refused mark-delete: the broker's attempt is one more (failing) iteration
    refused_step: bool = False


@dataclass(frozen=True)
class _TimeMove:
    """A state the loop leaves: mark-delete ``(next_ledger, -1)``."""

    next_ledger: int


_Interval = tuple[int, int]  # (first ledger index, last ledger index)


@dataclass
class _WalkEnd:
    """Where :meth:`_TimePaths.walk` left a cursor."""

    md: Position | None
    idm: list[IdmRange]
    skipped: int
    steps: int
    stop: _TimeStop | None  # None: the walk ended at its threshold, not at a stopping state


class _Visits:
    """States visited by the cursors' paths: canonical ``(ids[k], -1)`` as ledger-index intervals, others as
    points."""

    def __init__(self) -> None:
        self.intervals: list[_Interval] = []
        self.points: list[Position] = []


class _TimePaths:
    """The per-cursor paths of the non-precise §3.7 loop on one topic, computed by jumps.

    A cursor's path (its md after each mark-delete ``(next ledger, -1)``, with §1.2's extension over its own
    acked ranges) depends on the ledgers and its own state only. From a canonical state ``(ids[k], -1)`` the
    path runs through ``(ids[k+1], -1)``, ``(ids[k+2], -1)``, ... (one ledger's listed entries newly consumed
    per step) until a stopping state (``next_stop``, precomputed per topic) or the first step one of the
    cursor's acked ranges intersects or extends (found by bisection); that step, and every step from a
    non-canonical state, is made with :meth:`ManagedLedger.mark_delete` itself. Cost per cursor:
    ``O((ranges + 1)^2 log L)`` (plus one real step per ledger an acked range spans without extending).
    """

    def __init__(
        self, ml: ManagedLedger, closed_at_ms: dict[int, int | None], now_ms: int, limit_ms: int
    ) -> None:
        self.ml = ml
        self.closed = closed_at_ms
        self.now_ms = now_ms
        self.limit_ms = limit_ms
        ids, n = ml.ids, len(ml.ids)
        # next_stop[k]: smallest index j >= k whose canonical state (ids[j], -1) stops the loop (n-1 always
        # does: no next ledger); the same conditions as :meth:`classify` on (ids[j], -1)
        lac = ml.lac
        after_lac = ml.higher_key(lac[0])
        self.next_stop = [n] * (n + 1)
        for k in range(n - 1, -1, -1):
            lid = ids[k]
            ts = closed_at_ms.get(lid)
            stops = (
                lid == ml.cur_id
                or ts is None
                or not (ts > 0 and now_ms - ts > limit_ms)
                or k == n - 1
                or (
                    (ids[k + 1], -1) > lac
                    and not (after_lac is not None and ml.ent[k] <= 0 and ids[k + 1] == after_lac)
                )
            )
            self.next_stop[k] = k if stops else self.next_stop[k + 1]
        # next_valid((ids[m], -1)) = (ids[valid0_from[m]], 0) while valid0_from[m] < n (non-decreasing in m),
        # then a constant fallback from index `fallback_from` on (docs §1.5)
        self.valid0 = ml.valid0_from
        self.fallback_from = bisect.bisect_left(self.valid0, n, 0, n)
        if ml.beh.next_valid_open_ledger_fallback and ml.cur_id is not None and ml.cle == 0:
            self.fallback: Position = (ml.cur_id, 0)
        else:
            self.fallback = (lac[0], lac[1] + 1)

    # -- stopping states ----------------------------------------------------------------------------
    def classify(self, md: Position | None) -> _TimeStop | _TimeMove:
        """What one iteration does with the slowest cursor at ``md`` (the stepwise loop's checks)."""
        ml = self.ml
        if md is None:
            return _TimeStop("error", "cursor has no mark_delete_position")
        if ml.exists(md[0]):
            if md[0] == ml.cur_id:
                return _TimeStop("open_ledger")
            ts = self.closed.get(md[0])
            if ts is None:
                return _TimeStop("unknown_close_time", _unknown_close_time(md[0]), undecidable=True)
            if not (ts > 0 and self.now_ms - ts > self.limit_ms):
                return _TimeStop("not_expired")
        nxt = ml.higher_key(md[0])
        if nxt is None:
            return _TimeStop("no_next_ledger", _no_next_ledger(md[0]))
        try:
            ml.check_mark_delete(md, (nxt, -1))
        except BrokerError as exc:
            return _TimeStop("error", str(exc), refused_step=True)
        return _TimeMove(nxt)

    # -- acked ranges ---------------------------------------------------------------------------------
    def _next_valid_key(self, m: int) -> Position:
        return (self.ml.ids[self.valid0[m]], 0)

    def _first_extension(self, lower: Position, upper: Position, start: int) -> int:
        """Smallest arrival index ``m >= start`` whose step ``-> (ids[m], -1)`` is extended by the acked range
        ``(lower, upper]`` (``lower < next_valid((ids[m], -1)) <= min(upper, LAC)``); ``n`` when none."""
        n = len(self.ml.ids)
        t = self.fallback_from
        if start < t:
            m = start + bisect.bisect_right(range(start, t), lower, key=self._next_valid_key)
            if m < t and self._next_valid_key(m) <= upper:
                return m
        m = max(start, t)
        if m < n and lower < self.fallback <= upper:
            return m
        return n

    def next_touch(self, idm: list[IdmRange], k: int) -> int:
        """Arrival index of the first step from canonical ``(ids[k], -1)`` that one of ``idm`` intersects or
        extends (``n``: none); the steps before it consume whole ledgers and leave ``idm`` as it is."""
        ml = self.ml
        ids, n = ml.ids, len(ml.ids)
        here = (ids[k], -1)
        best = n
        for lower, upper in idm:
            if upper <= here:
                continue  # at or below md: trimmed away, meets no later step
            # the step into m covers ((ids[m-1], -1), (ids[m], -1)]: the first m with (ids[m], -1) > lower
            first = (
                bisect.bisect_right(ids, lower[0]) if lower[1] >= -1 else bisect.bisect_left(ids, lower[0])
            )
            best = min(best, max(k + 1, first))
            cap = min(upper, ml.lac)
            if lower < cap:
                best = min(best, self._first_extension(lower, cap, k + 1))
            if best == k + 1:
                break
        return best

    def _first_meeting(self, threshold: tuple[Position, bool], lo: int, hi: int) -> int:
        """First index in ``[lo, hi)`` whose canonical position meets ``threshold`` (``hi``: none)."""
        (t_l, t_e), inclusive = threshold
        ids = self.ml.ids
        if inclusive:  # (ids[m], -1) >= (t_l, t_e)
            m = bisect.bisect_left(ids, t_l) if t_e <= -1 else bisect.bisect_right(ids, t_l)
        else:  # (ids[m], -1) > (t_l, t_e)
            m = bisect.bisect_left(ids, t_l) if t_e < -1 else bisect.bisect_right(ids, t_l)
        m = max(lo, m)
        return m if m < hi else hi

    # -- one cursor's path ------------------------------------------------------------------------------
    def walk(
        self,
        c: Cursor,
        threshold: tuple[Position, bool] | None = None,
        visits: _Visits | None = None,
    ) -> _WalkEnd:
        """Follow ``c``'s path (``c`` is not changed) to its first stopping state, or with ``threshold``
        ``(position, inclusive)`` to its first state above (or at) that position if that comes first.
        ``visits`` collects every state on the way."""
        ml = self.ml
        if c.md is None:
            if visits is not None:
                visits.points.append(EARLIEST)
            return _WalkEnd(None, list(c.idm), 0, 0, _TimeStop("error", "cursor has no mark_delete_position"))
        work = Cursor(c.name, c.order, c.durable, c.kind, c.md, list(c.idm), None)
        steps = 0

        def meets(p: Position) -> bool:
            return threshold is not None and (p > threshold[0] or (threshold[1] and p == threshold[0]))

        def end(stop: _TimeStop | None) -> _WalkEnd:
            return _WalkEnd(work.md, work.idm, work.skipped, steps, stop)

        while True:
            md = work.md
            assert md is not None
            k = ml.index.get(md[0]) if md[1] == -1 else None
            if k is None:  # not canonical: one real iteration
                if visits is not None:
                    visits.points.append(md)
                if meets(md):
                    return end(None)
                state = self.classify(md)
                if isinstance(state, _TimeStop):
                    return end(state)
                ml.mark_delete(work, (state.next_ledger, -1))
                steps += 1
                continue
            if visits is not None:
                visits.intervals.append((k, k))
            if meets(md):
                return end(None)
            stop = self.next_stop[k]
            if stop == k:
                state = self.classify(md)
                assert isinstance(state, _TimeStop)
                return end(state)
            j = min(stop, self.next_touch(work.idm, k) - 1)
            at_threshold = False
            if threshold is not None and j > k:
                first = self._first_meeting(threshold, k + 1, j + 1)
                if first <= j:
                    j, at_threshold = first, True
            if j > k:  # whole ledgers k .. j-1 consumed, one per step, no acked range involved
                if visits is not None:
                    visits.intervals.append((k + 1, j))
                work.skipped += ml.cum_ent[j] - ml.cum_ent[k]
                steps += j - k
                work.md = (ml.ids[j], -1)
                work.idm = [(max(a, work.md), b) for a, b in work.idm if b > work.md]
                if at_threshold:
                    return end(None)
                if j == stop:
                    state = self.classify(work.md)
                    assert isinstance(state, _TimeStop)
                    return end(state)
            ml.mark_delete(work, (ml.ids[j + 1], -1))  # the step an acked range meets: made for real
            steps += 1


#: Units of work (heap moves, cursors of a lockstep round) :func:`_heap_stop_cursor` may spend on one topic.
HEAP_REPLAY_BUDGET = 300_000


def drop_backlog_for_time_limit_direct(
    ml: ManagedLedger,
    cursors: list[Cursor],
    closed_at_ms: dict[int, int | None],
    limit_seconds: int | None,
    now_ms: int,
    millis_overflow_int: bool,
    replay_budget: int = HEAP_REPLAY_BUDGET,
    *,
    compared_as_millis: bool = False,
) -> TimeResult:
    """End state of :func:`drop_backlog_for_time_limit_ledgers` without stepping it (docs §3.7, §3.9),
    mutating ``cursors`` the same way; ``steps`` stays empty, ``iteration_count`` is the loop's number of
    steps.

    Each pick moves the root of the cursor heap, a durable cursor with the smallest md, one state along its
    own path, and the loop stops at the first pick whose root is in a stopping state; whether a state stops
    depends on its md and the ledgers only (:meth:`_TimePaths.classify`). Let ``m`` be the smallest first
    stopping state over all durable paths. Every state below ``m`` is not stopping, so the loop goes on while
    the smallest md is below ``m`` and stops as soon as it reaches ``m``: each cursor ends at the first state
    of its path at or above ``m``, whatever the heap's order among equal positions. The tie flag does not
    depend on that order either: the first pick at a position ``p < m`` happens when every cursor whose path
    visits ``p`` is there (any of them still below ``p`` would be smaller), so a pick finds a tie iff two
    durable paths share a state below ``m``, or (the last pick) several cursors end at ``m``.

    Only the cursor the loop stops on depends on the heap order, and only when several cursors end at ``m``:
    then :func:`_heap_stop_cursor` replays the heap (rounds of cursors moving in lockstep are applied as a
    permutation of their heap slots); a replay that needs more than ``replay_budget`` units of work leaves
    ``stop_cursor_name`` null (the tie flag is set in that case).
    """
    if limit_seconds is None or limit_seconds <= 0:
        return TimeResult("quota_disabled", None, [], False, False, None)
    limit_ms = time_limit_ms(limit_seconds, millis_overflow_int, compared_as_millis)
    paths = _TimePaths(ml, closed_at_ms, now_ms, limit_ms)
    durable = [c for c in cursors if c.durable]
    if not durable:
        return TimeResult("no_cursor", None, [], False, False, None)
    first_stops = []
    for c in durable:
        end = paths.walk(c)
        assert end.stop is not None
        first_stops.append((end.md if end.md is not None else EARLIEST, end.stop))
    m, stop = min(first_stops, key=lambda t: t[0])
    before = [Cursor(c.name, c.order, c.durable, c.kind, c.md, list(c.idm), None) for c in cursors]
    visits = _Visits()
    count = 1 if stop.refused_step else 0
    at_m: list[Cursor] = []
    for c in durable:
        end = paths.walk(c, (m, True), visits)
        c.md, c.idm = end.md, end.idm
        c.skipped += end.skipped
        c.skips += end.steps
        if c.consumed is not None:
            c.consumed += end.skipped
        count += end.steps
        if _md_key(c) == m:
            at_m.append(c)
    tie = len(at_m) > 1 or _shared_below(ml, visits, m)
    if len(at_m) == 1:
        name: str | None = at_m[0].name
    else:
        root = _heap_stop_cursor(paths, before, m, replay_budget)
        name = None if root is None else root.name
    return TimeResult(stop.reason, name, [], tie, stop.undecidable, stop.error, count)


def _shared_below(ml: ManagedLedger, visits: _Visits, m: Position) -> bool:
    """Do two durable paths share a state below ``m`` (see :func:`drop_backlog_for_time_limit_direct`)?"""
    ids = ml.ids
    # canonical indexes below m: (ids[k], -1) < m
    below = bisect.bisect_left(ids, m[0]) if m[1] <= -1 else bisect.bisect_right(ids, m[0])
    spans = sorted((lo, min(hi, below - 1)) for lo, hi in visits.intervals if lo <= min(hi, below - 1))
    reach = -1
    for lo, hi in spans:
        if lo <= reach:
            return True
        reach = max(reach, hi)
    seen: set[Position] = set()
    for p in visits.points:
        if p < m:
            if p in seen:
                return True
            seen.add(p)
    return False


def _heap_stop_cursor(paths: _TimePaths, cursors: list[Cursor], m: Position, budget: int) -> Cursor | None:
    """Replay the time loop on the cursor heap (``cursors`` are mutated) until the root reaches ``m``, the
    first stopping position, and return that root: the cursor the broker's loop stops on (docs §3.9).

    Plain steps move the root one state (:func:`_advance`) and re-sort it as ``cursorUpdated`` does. When the
    root's position ``p = (ids[k], -1)`` is shared by a group of cursors that all take the same whole-ledger
    steps (no acked range involved, no stopping state, every other cursor at or above the position reached),
    the loop moves the group in rounds: each member once per round, onto the next ledger, in an order and to
    heap slots that depend only on which slots the group holds (the other cursors are never smaller than a
    moved member, so they keep their slots). One round is replayed on the slots
    (:func:`_round_permutation`) and applied as many times as the group can go. Returns None once the
    replay has spent ``budget`` units (a plain step: 1, a group: its size).
    """
    heap = CursorHeap(cursors)
    work = 0
    tried: Position | None = None
    while True:
        r = heap.heap[0]
        p = heap.key[r]
        if p >= m:
            return cursors[r]
        if work > budget:
            return None
        if p != tried:
            tried = p
            applied, spent = _lockstep_rounds(paths, heap, p, m)
            work += spent
            if applied:
                continue
        _advance(paths, cursors[r])
        heap.moved(r)
        work += 1


def _advance(paths: _TimePaths, c: Cursor) -> None:
    """One iteration of the time loop on cursor ``c``, whose md is not a stopping state: mark-delete
    ``(next ledger, -1)`` (a whole-ledger step no acked range meets is applied directly)."""
    ml = paths.ml
    md = c.md
    assert md is not None
    k = ml.index.get(md[0]) if md[1] == -1 else None
    if k is not None and paths.next_touch(c.idm, k) > k + 1:
        c.md = (ml.ids[k + 1], -1)
        c.idm = [(max(a, c.md), b) for a, b in c.idm if b > c.md]
        return
    state = paths.classify(md)
    assert isinstance(state, _TimeMove)
    ml.mark_delete(c, (state.next_ledger, -1))


def _lockstep_rounds(paths: _TimePaths, heap: CursorHeap, p: Position, m: Position) -> tuple[bool, int]:
    """Move the group of cursors at the root's position ``p`` through as many whole-ledger rounds as they
    can take in lockstep (see :func:`_heap_stop_cursor`); returns (whether any round was made, work)."""
    ml = paths.ml
    k = ml.index.get(p[0]) if p[1] == -1 else None
    if k is None:
        return False, 0
    h, key, n = heap.heap, heap.key, len(heap.heap)
    group: list[int] = []
    others: Position | None = None  # smallest position below the group's slots (the rest is not smaller)
    stack = [0]
    while stack:
        s = stack.pop()
        group.append(s)
        for child in (2 * s + 1, 2 * s + 2):
            if child < n:
                ck = key[h[child]]
                if ck == p:
                    stack.append(child)
                elif others is None or ck < others:
                    others = ck
    rounds = paths.next_stop[k] - k
    for s in group:
        rounds = min(rounds, paths.next_touch(heap.cursors[h[s]].idm, k) - 1 - k)
    bound = m if others is None or m < others else others
    # the last ledger index j with (ids[j], -1) <= bound
    ids = ml.ids
    last = (bisect.bisect_right(ids, bound[0]) if bound[1] >= -1 else bisect.bisect_left(ids, bound[0])) - 1
    rounds = min(rounds, last - k)
    if rounds < 1:
        return False, len(group)
    moved = _round_permutation(group)
    placed: dict[int, int] = {}
    seen: set[int] = set()
    for s in group:
        if s in seen:
            continue
        cycle = [s]
        seen.add(s)
        t = moved[s]
        while t != s:
            cycle.append(t)
            seen.add(t)
            t = moved[t]
        shift = rounds % len(cycle)
        for at, slot in enumerate(cycle):
            placed[cycle[(at + shift) % len(cycle)]] = h[slot]
    dest = (ids[k + rounds], -1)
    for slot, i in placed.items():
        h[slot] = i
        heap.slot[i] = slot
        key[i] = dest
        c = heap.cursors[i]
        c.md = dest
        c.idm = [(max(a, dest), b) for a, b in c.idm if b > dest]
    left = heap.at[p] - len(group)
    if left:
        heap.at[p] = left
    else:
        del heap.at[p]
    heap.at[dest] = heap.at.get(dest, 0) + len(group)
    return True, len(group)


def _round_permutation(group: list[int]) -> dict[int, int]:
    """One lockstep round of the group holding heap slots ``group`` (slot 0 among them): slot -> slot.

    Each pick moves the root member onto the next ledger and sifts it down the way ``cursorUpdated`` does:
    a child is smaller than the moved member iff it is a member that has not moved yet (the other slots hold
    cursors at or above the new position, moved members are equal to it). Such a right child wins (a left
    child cannot be smaller than it), else such a left child, else the member stays.
    """
    pending = dict.fromkeys(group, True)  # slot -> its member has not moved yet this round
    origin = {s: s for s in group}  # slot -> the slot its member started the round at
    for _ in range(len(group)):
        start = origin[0]
        s = 0
        while True:
            right = 2 * s + 2
            left = right - 1
            if pending.get(right, False):
                j = right
            elif pending.get(left, False):
                j = left
            else:
                break
            origin[s] = origin[j]
            pending[s] = True
            s = j
        origin[s] = start
        pending[s] = False
    return {origin[s]: s for s in group}


def time_eviction_ledgers(
    ml: ManagedLedger,
    cursors: list[Cursor],
    closed_at_ms: dict[int, int | None],
    limit_seconds: int | None,
    now_ms: int,
    millis_overflow_int: bool,
    trace_limit: int,
    *,
    compared_as_millis: bool = False,
) -> TimeResult:
    """The non-precise §3.7 eviction as the topic output needs it: the end state and counts from
    :func:`drop_backlog_for_time_limit_direct` (mutating ``cursors``), the first ``trace_limit`` steps from
    the stepwise loop run on copies of the cursors."""
    steps: list[TimeStep] = []
    if trace_limit > 0:
        copies = [Cursor(c.name, c.order, c.durable, c.kind, c.md, list(c.idm), c.consumed) for c in cursors]
        steps = drop_backlog_for_time_limit_ledgers(
            ml,
            copies,
            closed_at_ms,
            limit_seconds,
            now_ms,
            millis_overflow_int,
            max_steps=trace_limit,
            compared_as_millis=compared_as_millis,
        ).steps
    result = drop_backlog_for_time_limit_direct(
        ml,
        cursors,
        closed_at_ms,
        limit_seconds,
        now_ms,
        millis_overflow_int,
        compared_as_millis=compared_as_millis,
    )
    result.steps = steps
    return result


def _java_int(x: int) -> int:
    r = x & 0xFFFFFFFF
    return r - 2**32 if r >= 2**31 else r


@dataclass
class ExpiryResult:
    """What ``expireMessages(ttl)`` did to one subscription (docs §3.7 precise)."""

    ledger_closure_position: Position | None
    found_position: Position | None
    reads: int
    non_monotonic: bool
    warning: str | None
    error: str | None


def expire_messages(
    ml: ManagedLedger,
    c: Cursor,
    ttl_seconds: int,
    now_ms: int,
    timestamps: Timestamps,
    closed_at_ms: dict[int, int | None] | None,
    closure_skips_open: bool = True,
) -> ExpiryResult:
    """``PersistentMessageExpiryMonitor.expireMessages(ttl)`` for one subscription's cursor.

    ``closed_at_ms`` not None = the version first expires whole ledgers by close time
    (``checkExpiryByLedgerClosureTime``, apache/pulsar#21940); ``closure_skips_open`` = it stops at the
    open ledger, whose LedgerInfo timestamp is 0 (#22335); without, that 0 counts as expired and a step
    that reaches the open ledger mark-deletes ``(open ledger, -1)`` (its LedgerInfo has 0 entries). Then
    ``asyncFindNewestMatching`` (SearchActiveEntries) runs ``OpFindNewest``'s search from ``nextValid(md)``
    over ``getNumberOfEntriesInStorage()`` entries with the condition "entry expired"
    (``ttl != 0 and now > timestamp + ttl*1000``, timestamp = broker timestamp else publish time); the
    newest match is mark-deleted. ``timestamps`` holds the exported entries; reading a stored entry that is
    not exported is undecidable (error, cursor unchanged); reading a position that does not exist fails the
    search as in the broker (no expiry).
    """
    warning: str | None = None

    def expired(ts: int) -> bool:
        return ttl_seconds != 0 and now_ms > ts + ttl_seconds * 1000

    md0 = c.md
    if md0 is None:
        return ExpiryResult(None, None, 0, False, None, "cursor has no mark_delete_position")
    non_monotonic = timestamps.non_monotonic(md0, ml.lac)
    closure_pos: Position | None = None
    if closed_at_ms is not None and ttl_seconds > 0:
        info: int | None = None
        for lid in ml.ids[bisect.bisect_left(ml.ids, md0[0]) :]:
            if lid == ml.cur_id:
                # the open ledger's LedgerInfo has timestamp 0: expired unless #22335 stops there
                if not closure_skips_open and expired(0):
                    info = lid
                break
            ts = closed_at_ms.get(lid)
            if ts is None:
                warning = (
                    f"close time of ledger {lid} not exported: expiry by ledger close time not evaluated "
                    "from there (exact when publish times are consistent with close times)"
                )
                break
            if (closure_skips_open and ts == 0) or not expired(ts):
                break
            info = lid
        if info is not None:
            pos = (info, -1) if info == ml.cur_id else (info, ml.real_entries(info) - 1)
            if ml.lac < pos:
                pos = ml.lac
            closure_pos = pos
            _complete(ml, c, pos)
    md = c.md
    assert md is not None
    reads = 0
    try:
        start = ml.next_valid(md)
        lo, hi = 0, ml.entries_in_storage(md)

        def mid() -> int:
            return lo + max(java_div(hi - lo, 2), 1)

        search = start
        state = "first"
        last_matched: Position | None = None
        found: Position | None = None
        while True:
            if not ml.has_more_entries(c.idm, search):
                found = last_matched
                break
            if not ml.entry_exists(search):
                return ExpiryResult(
                    closure_pos, None, reads, non_monotonic, warning,
                    f"reading entry {_p(search)} fails (no such entry): findEntryFailed, nothing expired",
                )  # fmt: skip
            ts_opt = timestamps.by_position.get(search)
            if ts_opt is None:
                return ExpiryResult(
                    closure_pos, None, reads, non_monotonic, warning,
                    f"entry {_p(search)} is not in the exported entries: expiry search undecidable",
                )  # fmt: skip
            reads += 1
            match = expired(ts_opt)
            if state == "first":
                if not match:
                    found = None
                    break
                last_matched = search
                state = "last"
                search = ml.position_after_n(search, hi)
                if ml.lac < search:  # newer OpFindNewest moves a past-the-end probe back to LAC
                    search = ml.lac
            elif state == "last":
                if match:
                    found = search
                    break
                state = "searching"
                search = ml.position_after_n(start, mid())
            else:
                if match:
                    last_matched = search
                    lo = mid()
                else:
                    hi = mid() - 1
                if hi <= lo:
                    found = last_matched
                    break
                search = ml.position_after_n(start, mid())
            if reads > 10_000:
                raise BrokerError("expiry search does not converge")
    except BrokerError as exc:
        return ExpiryResult(closure_pos, None, reads, non_monotonic, warning, str(exc))
    if found is not None:
        _complete(ml, c, found)
    return ExpiryResult(closure_pos, found, reads, non_monotonic, warning, None)


def _complete(ml: ManagedLedger, c: Cursor, pos: Position) -> None:
    """``findEntryComplete(pos)``: mark-delete at ``pos`` unless md is already there; failures are logged."""
    if c.md is not None and c.md >= pos:
        return
    # a failure is logged by the broker ("Message expiry failed - mark delete failed")
    with contextlib.suppress(BrokerError):
        ml.mark_delete(c, pos)


class Timestamps:
    """Exported entry timestamps of one topic (broker timestamp, else publish time), by position."""

    def __init__(self, items: Iterable[tuple[Position, int]]) -> None:
        self.by_position: dict[Position, int] = dict(items)
        self.positions: list[Position] = sorted(self.by_position)
        self.times: list[int] = [self.by_position[p] for p in self.positions]

    def non_monotonic(self, lo: Position, hi: Position) -> bool:
        """True when the timestamps of the exported entries in ``(lo, hi]`` decrease somewhere."""
        a = bisect.bisect_right(self.positions, lo)
        b = bisect.bisect_right(self.positions, hi)
        return any(self.times[i + 1] < self.times[i] for i in range(a, b - 1))
