"""Reference model of the backlog-quota eviction loops (docs §3.6, §3.7), one topic at a time.

Written straight from the docs' pseudo-code; every managed-ledger operation (estimate, precise backlog,
skip, mark-delete, position arithmetic) is the independent oracle of :mod:`tests.oracle.managed_ledger`.
Only what docs/semantics leaves implicit is added, each with its source:

* ``toSkip``'s IEEE-754 operation order per version (docs §3.6 bullet 1): ``(a / b) * c`` with a double
  target, and from #25624 (4.3.0, patches 4.0.11 and 4.2.2) ``a * c / b`` with
  ``target = (long) (0.9 * limit)``; Java's ``(int)`` cast saturates;
* the consumed counter grows by the cursor count of ``(old md, target]`` (docs §1.2);
* ``skipEntries`` failures are logged and the loop goes on with ``prev = cursor`` (BacklogQuotaManager 3.x /
  4.x copies); a failure computing the entries (2.x Guava range) leaves the loop;
* the slowest cursor is the root of the broker's cursor heap (docs §3.9, :mod:`tests.oracle.cursor_heap`):
  the durable cursors are added in insertion order and every mark-delete re-sorts the moved cursor
  (``cursorUpdated``); a pick is a tie when another durable cursor has the root's md;
* the non-precise time loop stops on a closed ledger whose close time is unknown (export gap, not a broker
  state), compares the limit unconverted before #17957 (2.9.4, 2.10.3, 2.11.1, 3.0.0) and then converts it
  with a 32-bit ``limit * 1000`` until #21816 (3.3.0) / #22740 (3.0.6);
* ``findNewestMatching`` = ``OpFindNewest`` (checkFirst / checkLast / binary search with
  ``mid = min + max((max - min) / 2, 1)``, probes ``getPositionAfterN(start, mid, startExcluded)``, a probe
  with no unacked entry at or after it ends the search), preceded (newer versions) by the expiry of whole
  ledgers by close time (apache/pulsar#21940, #22335).
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field

from tests.oracle import managed_ledger as o
from tests.oracle.cursor_heap import CursorContainer

Position = o.Position


@dataclass
class QCursor:
    """A cursor of the oracle with the counters the loops update."""

    name: str
    order: int
    durable: bool
    kind: str
    mark_delete: Position
    individually_deleted: list[o.IdmRange]
    consumed: int | None = None
    skipped: int = 0
    skips: int = 0
    md_before: Position = (0, 0)
    idm_before: list[o.IdmRange] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.md_before = self.mark_delete
        self.individually_deleted = sorted(self.individually_deleted)
        self.idm_before = list(self.individually_deleted)

    def as_ml_cursor(self) -> o.Cursor:
        return o.Cursor(self.name, self.order, self.durable, self.mark_delete, self.individually_deleted)


def version_tuple(version: str) -> tuple[int, int, int]:
    major, minor, patch = (int(x) for x in version.split("."))
    return major, minor, patch


def formula_4x(version: str) -> bool:
    """docs §3.6: the long-target formula of #25624: every 4.3+, the 4.0 line from 4.0.11, the 4.2 line
    from 4.2.2 (release notes); every other release computes with a double target."""
    major, minor, patch = version_tuple(version)
    first_patch = {(4, 0): 11, (4, 2): 2}.get((major, minor))
    return (major, minor) >= (4, 3) or (first_patch is not None and patch >= first_patch)


def limit_compared_unconverted(version: str) -> bool:
    """docs §3.7: before #17957 the close-time age in ms is compared with the limit in seconds as it is;
    the ``* 1000`` arrived in 2.9.4, 2.10.3, 2.11.1 and 3.0.0."""
    major, minor, patch = version_tuple(version)
    first_patch = {(2, 9): 4, (2, 10): 3, (2, 11): 1}.get((major, minor))
    return major < 3 and not (first_patch is not None and patch >= first_patch)


def limit_times_1000_in_int(version: str) -> bool:
    """docs §3.7: ``limitTime * 1000`` in 32-bit ints, replaced by ``SECONDS.toMillis`` in #21816 (3.3.0)
    and, on branch-3.0, #22740 (3.0.6); 3.1.x and 3.2.x kept the multiplication."""
    major, minor, patch = version_tuple(version)
    if (major, minor) == (3, 0):
        return patch < 6
    return (major, minor) < (3, 3)


def java_int(x: float) -> int:
    """Java ``(int) double``: NaN -> 0, saturating, truncating toward zero."""
    if math.isnan(x):
        return 0
    if math.isinf(x):
        return 2**31 - 1 if x > 0 else -(2**31)
    return max(-(2**31), min(2**31 - 1, int(x)))


def java_long(x: float) -> int:
    if math.isnan(x):
        return 0
    if x >= 2**63 - 1:
        return 2**63 - 1
    if x <= -(2**63):
        return -(2**63)
    return int(x)


def container(cursors: list[QCursor]) -> CursorContainer[QCursor]:
    """docs §3.9: the heap of the durable cursors, added in insertion order."""
    heap: CursorContainer[QCursor] = CursorContainer()
    for c in sorted((c for c in cursors if c.durable), key=lambda c: c.order):
        heap.add(c, c.mark_delete)
    return heap


def slowest(heap: CursorContainer[QCursor], cursors: list[QCursor]) -> tuple[QCursor | None, bool]:
    """``getSlowestConsumer()``: the heap's root, and whether another durable cursor has its md."""
    root = heap.slowest()
    if root is None:
        return None, False
    return root, sum(1 for c in cursors if c.durable and c.mark_delete == root.mark_delete) > 1


def estimate(ml: o.ManagedLedger, cursors: list[QCursor], sem: o.Semantics) -> int:
    return o.estimated_backlog_size(ml, [c.as_ml_cursor() for c in cursors], sem)[1]


@dataclass
class SizeOutcome:
    backlog_before: int
    backlog_after: int
    stop_reason: str
    trace: list[tuple[str, int, int, int, Position]]  # (cursor, backlog before, entries, to_skip, md after)
    tie: bool
    stop_cursor: str | None = None


def _mark_delete(ml: o.ManagedLedger, c: QCursor, new: Position, sem: o.Semantics) -> None:
    """§1.2 mark-delete (raises OracleError like the broker); updates the counters."""
    old = c.mark_delete
    fam = sem.position_family
    if new <= old:
        if new < old:
            raise o.OracleError("MarkDeletingMarkedPosition")
        return
    rp = o.get_next_valid_position(ml, old, fam)
    result = o.mark_delete(ml, old, rp, c.individually_deleted, new, fam)  # may raise (beyond LAC)
    newly = o.cursor_number_of_entries(
        ml, c.individually_deleted, o.Range.open_closed(old, new), sem.count_family
    )
    c.mark_delete = result.mark_delete
    c.individually_deleted = list(result.individually_deleted)
    c.skipped += newly
    if c.consumed is not None:
        c.consumed += newly


def size_eviction(
    ml: o.ManagedLedger,
    cursors: list[QCursor],
    limit: int,
    version: str,
    entries_added: int | None = None,
    use_counter: bool = True,
) -> SizeOutcome:
    """docs §3.6 dropBacklogForSizeLimit on ``cursors`` (mutated)."""
    sem = o.semantics_for_version(version)
    new_formula = formula_4x(version)
    backlog = estimate(ml, cursors, sem)
    before = backlog
    if limit < 0:
        return SizeOutcome(before, before, "quota_disabled", [], False)
    # 3.0: target = 0.9 * limit (double); 4.x: (long) (0.9 * limit)
    target: float = float(java_long(0.9 * limit)) if new_formula else 0.9 * limit
    prev: QCursor | None = None
    trace: list[tuple[str, int, int, int, Position]] = []
    tie_seen = False
    heap = container(cursors)
    while float(backlog) > target:
        c, tie = slowest(heap, cursors)
        if c is None:
            return SizeOutcome(before, backlog, "no_cursor", trace, tie_seen)
        tie_seen = tie_seen or tie
        if c is prev:
            return SizeOutcome(before, backlog, "same_cursor", trace, tie_seen, c.name)
        try:
            entries = -1
            if use_counter and entries_added is not None and c.consumed is not None:
                entries = entries_added - c.consumed
            if entries < 0:
                entries = o.precise_backlog(
                    ml,
                    c.mark_delete,
                    c.individually_deleted,
                    sem.count_family,
                    sem.precise_backlog_guard,
                    guava=True,
                )
        except o.OracleError:
            return SizeOutcome(before, backlog, "error", trace, tie_seen, c.name)
        if new_formula:
            to_skip = java_int(float(backlog - int(target)) * float(entries) / float(backlog))
        else:
            to_skip = java_int((float(backlog) - target) / float(backlog) * float(entries))
        if to_skip == 0:
            return SizeOutcome(before, backlog, "zero_skip", trace, tie_seen, c.name)
        try:
            res = o.skip_entries(ml, c.mark_delete, c.individually_deleted, to_skip, "Include", sem)
            if res.target > c.mark_delete:
                _mark_delete(ml, c, res.target, sem)
                assert c.mark_delete == res.mark_delete
            c.skips += 1
        except o.OracleError:
            pass  # logged by the broker; prev is still set below
        heap.cursor_updated(c, c.mark_delete)
        new_backlog = estimate(ml, cursors, sem)
        trace.append((c.name, backlog, entries, to_skip, c.mark_delete))
        backlog = new_backlog
        prev = c
    return SizeOutcome(before, backlog, "below_target", trace, tie_seen)


@dataclass
class TimeOutcome:
    stop_reason: str
    trace: list[tuple[str, Position, Position]]  # (cursor, md before, md after)
    tie: bool
    stop_cursor: str | None = None


def time_eviction_ledgers(
    ml: o.ManagedLedger,
    cursors: list[QCursor],
    closed_at_ms: dict[int, int | None],
    limit_seconds: int,
    now_ms: int,
    version: str,
) -> TimeOutcome:
    """docs §3.7 non-precise dropBacklogForTimeLimit on ``cursors`` (mutated)."""
    sem = o.semantics_for_version(version)
    if limit_seconds <= 0:
        return TimeOutcome("quota_disabled", [], False)
    limit_ms = limit_seconds * 1000
    if limit_compared_unconverted(version):
        limit_ms = limit_seconds
    elif limit_times_1000_in_int(version):
        limit_ms = (limit_ms + 2**31) % 2**32 - 2**31
    trace: list[tuple[str, Position, Position]] = []
    tie_seen = False
    heap = container(cursors)
    while True:
        c, tie = slowest(heap, cursors)
        if c is None:
            return TimeOutcome("no_cursor", trace, tie_seen)
        tie_seen = tie_seen or tie
        md = c.mark_delete
        if md[0] in ml.ledgers:
            if md[0] == ml.current_ledger_id:
                return TimeOutcome("open_ledger", trace, tie_seen, c.name)
            ts = closed_at_ms.get(md[0])
            if ts is None:
                return TimeOutcome("unknown_close_time", trace, tie_seen, c.name)
            if not (ts > 0 and now_ms - ts > limit_ms):
                return TimeOutcome("not_expired", trace, tie_seen, c.name)
        nxt = ml.higher_key(md[0])
        if nxt is None:
            return TimeOutcome("no_next_ledger", trace, tie_seen, c.name)
        try:
            _mark_delete(ml, c, (nxt, -1), sem)
        except o.OracleError:
            trace.append((c.name, md, c.mark_delete))
            return TimeOutcome("error", trace, tie_seen, c.name)
        heap.cursor_updated(c, c.mark_delete)
        c.skips += 1
        trace.append((c.name, md, c.mark_delete))


@dataclass
class ExpiryOutcome:
    found: Position | None
    closure: Position | None
    error: bool


def _exists(ml: o.ManagedLedger, p: Position) -> bool:
    if p[0] not in ml.ledgers or p[1] < 0:
        return False
    n = ml.current_ledger_entries if p[0] == ml.current_ledger_id else ml.ledgers[p[0]][0]
    return p[1] < n


def expire(
    ml: o.ManagedLedger,
    c: QCursor,
    ttl: int,
    now_ms: int,
    timestamps: dict[Position, int],
    closed_at_ms: dict[int, int | None] | None,
    version: str,
) -> ExpiryOutcome:
    """Precise expiry of one subscription (docs §3.7): ledger-closure step, then OpFindNewest."""
    sem = o.semantics_for_version(version)
    fam, cnt = sem.position_family, sem.count_family

    def expired(ts: int) -> bool:
        return ttl != 0 and now_ms > ts + ttl * 1000

    def complete(p: Position) -> None:
        if c.mark_delete >= p:
            return
        with contextlib.suppress(o.OracleError):  # "mark delete failed" is only logged
            _mark_delete(ml, c, p, sem)

    closure: Position | None = None
    if closed_at_ms is not None and ttl > 0:
        # the open ledger's LedgerInfo: timestamp 0 and 0 entries; #22335 (3.0.4, 3.2.2, 3.3.0+) stops at a
        # zero timestamp, the releases before it take 0 as long expired
        v = version_tuple(version)
        stops_at_zero = v >= (3, 3, 0) or (3, 0, 4) <= v < (3, 1, 0) or (3, 2, 2) <= v < (3, 3, 0)
        last: int | None = None
        for lid in sorted(ml.ledgers):
            if lid < c.mark_delete[0]:
                continue
            ts = 0 if lid == ml.current_ledger_id else closed_at_ms.get(lid)
            if ts is None or (ts == 0 and stops_at_zero) or not expired(ts):
                break
            last = lid
            if lid == ml.current_ledger_id:
                break
        if last is not None:
            entries = 0 if last == ml.current_ledger_id else ml.ledgers[last][0]
            closure = min((last, entries - 1), ml.lac)
            complete(closure)
    try:
        md = c.mark_delete
        start = o.get_next_valid_position(ml, md, fam)
        # docs §1.8: (md, LAC.next] before apache/pulsar#15627, (md, LAC] after
        hi_pos = ml.lac_next if sem.storage_counts_lac_next else ml.lac
        if md > hi_pos:
            raise o.OracleIllegalArgumentError("Guava openClosed(md, LAC)")
        lo, hi = 0, o.number_of_entries(ml, md, False, hi_pos, True, cnt)
        search = start
        state = "checkFirst"
        matched: Position | None = None

        def mid() -> int:
            d = hi - lo
            half = abs(d) // 2 * (1 if d >= 0 else -1)
            return lo + max(half, 1)

        for _ in range(10_000):
            more = search <= ml.lac and (
                o.cursor_number_of_entries(
                    ml, c.individually_deleted, o.Range(search, True, ml.lac, True), cnt
                )
                > 0
            )
            if not more:
                break
            if not _exists(ml, search) or search not in timestamps:
                return ExpiryOutcome(None, closure, True)
            hit = expired(timestamps[search])
            if state == "checkFirst":
                if not hit:
                    matched = None
                    break
                matched = search
                state = "checkLast"
                search = min(o.position_after_n(ml, search, hi, "startExcluded", sem), ml.lac)
            elif state == "checkLast":
                if hit:
                    matched = search
                    break
                state = "searching"
                search = o.position_after_n(ml, start, mid(), "startExcluded", sem)
            else:
                if hit:
                    matched = search
                    lo = mid()
                else:
                    hi = mid() - 1
                if hi <= lo:
                    break
                search = o.position_after_n(ml, start, mid(), "startExcluded", sem)
    except o.OracleError:
        return ExpiryOutcome(None, closure, True)
    if matched is not None:
        complete(matched)
    return ExpiryOutcome(matched, closure, False)
