"""Reference model of Pulsar's managed-ledger / cursor arithmetic and backlog estimation.

A line-by-line transcription of the pseudo-code in docs §1 (positions, counts, skip) and §2 (backlog
size), one managed ledger at a time, in plain Python. Clarity over speed: loops are written exactly like
docs/semantics so that this module can serve as the reference the Spark transforms are checked against.

Positions are ``(ledger_id, entry_id)`` tuples; Python orders tuples lexicographically, which is
Pulsar's position ordering (docs §0.1). Individually-deleted ranges are ``(lower, upper)`` pairs meaning
the open-closed range ``(lower, upper]`` (docs §1.2).

Where Java would throw, the oracle raises an :class:`OracleError` subclass instead of returning.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from tests.oracle.cursor_heap import CursorContainer

Position = tuple[int, int]
IdmRange = tuple[Position, Position]  # open-closed (lower, upper]

#: isValidPosition order and getNextValidPosition fallback (docs §1.4/§1.5): "3x" = the #21248 order with the
#: (open, 0) fallback of #22034; "3x-lac-next" = the #21248 order, LAC.next fallback; "2x-old" = neither.
PositionFamily = Literal["3x", "3x-lac-next", "2x-old"]
CountFamily = Literal["3x", "3x-24852", "4x"]
ConsumedGeneration = Literal["v1", "v2", "v3"]
Bound = Literal["startIncluded", "startExcluded"]
DeletedEntries = Literal["Include", "Exclude"]

#: Java's Long.MAX_VALUE; LATEST = (MAX, MAX) (docs §0.1).
LONG_MAX = 2**63 - 1
EARLIEST: Position = (-1, -1)
LATEST: Position = (LONG_MAX, LONG_MAX)
#: Entry id meaning "before the first entry of the ledger" (docs §0.1).
BEFORE_FIRST_ENTRY = -1


class OracleError(Exception):
    """Java would throw here; the transform is expected to report an error instead of a value."""


class OracleNPEError(OracleError):
    """A NullPointerException in the modelled Java code (2.x-old getPositionAfterN, docs §1.9)."""


class OracleIllegalArgumentError(OracleError):
    """An IllegalArgumentException (4.x getNumberOfEntries with lower > upper, docs §1.7)."""


class OracleMarkDeleteRejectedError(OracleError):
    """Mark-delete beyond LAC rejected with "Invalid mark deleted position" (docs §1.2)."""


class OracleUnreachableError(OracleError):
    """A state the docs call unreachable (e.g. §1.9's infinite loop); strategies must not produce it."""


class OracleEndlessLoopError(OracleUnreachableError):
    """§1.9's walk never ends: the broker's call never returns (the 2.10.1 form past the last ledger, or an
    empty last ledger that is not the open one). A transform reports it as an error row."""


# --------------------------------------------------------------------------------------------------
# State
# --------------------------------------------------------------------------------------------------


@dataclass
class ManagedLedger:
    """One managed ledger (docs §0.2).

    ``ledgers`` maps ledger id -> ``(entries, size)`` exactly as ``stats-internal`` lists them: the open
    (current) ledger is present with ``(0, 0)``; deleted ledgers are absent. Kept sorted by id.
    """

    ledgers: dict[int, tuple[int, int]]
    current_ledger_id: int | None
    current_ledger_entries: int
    current_ledger_size: int
    lac: Position
    total_size: int

    def __post_init__(self) -> None:
        self.ledgers = dict(sorted(self.ledgers.items()))

    # -- ledger-map navigation (TreeMap operations) -------------------------------------------------
    @property
    def ledger_ids(self) -> list[int]:
        return list(self.ledgers)

    def entries_of(self, ledger_id: int) -> int | None:
        info = self.ledgers.get(ledger_id)
        return None if info is None else info[0]

    def size_of(self, ledger_id: int) -> int | None:
        info = self.ledgers.get(ledger_id)
        return None if info is None else info[1]

    def higher_key(self, ledger_id: int) -> int | None:
        """Smallest ledger id strictly greater than ``ledger_id`` (``ceilingKey(id + 1)``)."""
        for lid in self.ledgers:
            if lid > ledger_id:
                return lid
        return None

    def last_key(self) -> int:
        if not self.ledgers:
            raise OracleUnreachableError("lastKey() on an empty ledger map (NoSuchElementException)")
        return max(self.ledgers)

    @property
    def has_current_ledger(self) -> bool:
        return self.current_ledger_id is not None

    @property
    def lac_next(self) -> Position:
        return (self.lac[0], self.lac[1] + 1)


@dataclass
class Cursor:
    """One cursor of a managed ledger (docs §1.2, §1.11). ``order`` = insertion order (cursor_order)."""

    name: str
    order: int
    durable: bool
    mark_delete: Position
    individually_deleted: list[IdmRange] = field(default_factory=list)


# --------------------------------------------------------------------------------------------------
# Version semantics
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Semantics:
    """Which variant of every version-dependent algorithm a broker version runs (docs §1, §2)."""

    version: str
    position_family: PositionFamily  # §1.4/§1.5: isValidPosition order and nextValid fallback
    count_family: CountFamily  # §1.7: 2.x/3.x arithmetic (without / with #24852) vs 4.x arithmetic
    consumed_generation: ConsumedGeneration  # §2.2
    precise_backlog_guard: bool  # §1.8: "0 if md >= LAC" (apache/pulsar#21248)
    storage_counts_lac_next: bool  # §1.8: storage count over (md, LAC.next] (before apache/pulsar#15627)
    estimate_deleted_returns_total: bool  # §2.4: totalSize for a position in a deleted ledger
    pan_unread_guard: bool  # §1.9 (C): ``unread = total - entry`` only when ``total > 0``
    pan_clamp: bool  # §1.9 (A)+(E): open-ledger entries guard and the clamp to LAC
    pan_deleted_as_empty: bool  # §1.9 (B): a ledger missing from the map counts 0 (else NPE)
    pan_fallback_last_key: bool  # §1.9 (D): past the last ledger re-walk lastKey() (else lastKey()+1)


_VERSION_RE = re.compile(r"^\s*(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(version: str) -> tuple[int, int]:
    match = _VERSION_RE.match(version)
    if match is None:
        raise ValueError(f"unparseable Pulsar version {version!r}; expected e.g. '3.0.7'")
    return int(match.group(1)), int(match.group(2))


def _release(version: str) -> tuple[int, int, int]:
    match = _VERSION_RE.match(version)
    if match is None or match.group(3) is None:
        raise ValueError(f"unparseable Pulsar version {version!r}; expected e.g. '3.0.7'")
    return int(match.group(1)), int(match.group(2)), int(match.group(3))


def _has(version: str, first: tuple[int, int, int], patches: dict[tuple[int, int], int]) -> bool:
    """True from release ``first`` on, or from ``patches[line]`` on a maintenance line that got the fix."""
    v = _release(version)
    if v >= first:
        return True
    line = (v[0], v[1])
    return line in patches and v[2] >= patches[line]


def semantics_for_version(version: str) -> Semantics:
    """Map a broker version (``MAJOR.MINOR.PATCH``) to the variants of docs §1 and §2.

    Each switch follows the release that brought the change, as docs/semantics lists it:

    * §1.4/§1.5 newer isValidPosition order and ``(open, 0)`` fallback: apache/pulsar#21248 (release tags
      v2.10.6, v2.11.3, v3.0.2, v3.2.0; no 3.1.x); older brokers use the 2.x order and ``LAC.next``;
    * §1.9 (A)+(E) open-ledger guard and LAC clamp: apache/pulsar#12266 (v2.8.2, every 2.9+); (B) deleted
      ledger counts 0: apache/pulsar#14481 (v2.8.4, v2.9.2, every 2.10+); (C) unread guard and (D)
      ``lastKey()`` fallback: apache/pulsar#17971 (v2.9.4, v2.10.3, every 2.11+);
    * §1.7 4.x ``getNumberOfEntries``: apache/pulsar#24938 + #25037 (4.0.9, 4.1.3, 4.2+); before those, the
      older arithmetic counts 0 for a range inside one deleted ledger from apache/pulsar#24852 on (3.0.15,
      4.0.8, 4.1.2: the "3x-24852" family);
    * §1.8 precise-backlog guard ``md >= LAC -> 0``: apache/pulsar#21248 (as §1.4); storage count over
      ``(md, LAC]`` instead of ``(md, LAC.next]``: apache/pulsar#15627 (v2.8.4, v2.9.3, v2.10.1, 2.11+);
    * §2.2 consumedLedgerSize: v1 before 2.5.2, v2 (``==``, apache/pulsar#6700), v3 (``<=``) from
      apache/pulsar#19017 (3.0.0) and its back-port #20069 (2.11.1);
    * §2.4 deleted ledger -> ``totalSize``: every 2.x except 2.11.1+ (apache/pulsar#19017 via #20069).

    The slowest cursor does not depend on the version: every line keeps the durable cursors in the same heap
    (docs §3.9, :mod:`tests.oracle.cursor_heap`).
    """
    v = _release(version)
    new_order = _has(version, (3, 2, 0), {(2, 10): 6, (2, 11): 3, (3, 0): 2})
    # getValidPositionAfterSkippedEntries' (open, 0) branch: #22034 + #22552 (tags v3.0.5, v3.2.3, v3.3.0)
    open_fallback = _has(version, (3, 3, 0), {(3, 0): 5, (3, 2): 3})
    count: CountFamily = "3x"
    if _has(version, (4, 2, 0), {(4, 0): 9, (4, 1): 3}):
        count = "4x"
    elif _has(version, (4, 2, 0), {(3, 0): 15, (4, 0): 8, (4, 1): 2}):
        count = "3x-24852"
    if v < (2, 5, 2):
        consumed: ConsumedGeneration = "v1"
    elif not _has(version, (3, 0, 0), {(2, 11): 1}):
        consumed = "v2"
    else:
        consumed = "v3"
    return Semantics(
        version=version,
        position_family=("3x" if open_fallback else "3x-lac-next") if new_order else "2x-old",
        count_family=count,
        consumed_generation=consumed,
        precise_backlog_guard=new_order,
        storage_counts_lac_next=not _has(version, (2, 11, 0), {(2, 8): 4, (2, 9): 3, (2, 10): 1}),
        estimate_deleted_returns_total=not _has(version, (3, 0, 0), {(2, 11): 1}),
        pan_unread_guard=_has(version, (2, 11, 0), {(2, 9): 4, (2, 10): 3}),
        pan_clamp=_has(version, (2, 9, 0), {(2, 8): 2}),
        pan_deleted_as_empty=_has(version, (2, 10, 0), {(2, 8): 4, (2, 9): 2}),
        pan_fallback_last_key=_has(version, (2, 11, 0), {(2, 9): 4, (2, 10): 3}),
    )


# --------------------------------------------------------------------------------------------------
# §1.3 - §1.6 positions
# --------------------------------------------------------------------------------------------------


def get_previous_position(ml: ManagedLedger, p: Position) -> Position:
    """docs §1.3 getPreviousPosition (identical 2.x-4.x)."""
    if p[1] > 0:
        return (p[0], p[1] - 1)
    earlier = [lid for lid in ml.ledgers if lid < p[0]]
    if not earlier:
        return (p[0], -1)
    for lid in sorted(earlier, reverse=True):
        entries = ml.ledgers[lid][0]
        if entries > 0:
            return (lid, entries - 1)
    return (min(earlier), -1)


def is_valid_position(ml: ManagedLedger, p: Position, family: PositionFamily = "3x") -> bool:
    """docs §1.4 isValidPosition (3.x/4.x, or the 2.x-old order)."""
    if family == "2x-old":
        if p[1] < 0:
            return False
        if p[0] > ml.lac[0]:
            return False
        if p[0] == ml.lac[0]:
            return p[1] <= ml.lac[1] + 1
        info = ml.ledgers.get(p[0])
        if info is None:
            if p[0] < ml.lac[0]:
                return False
            return p[1] == 0  # unreachable: p.ledger < LAC.ledger here
        return p[1] < info[0]
    if p[0] not in ml.ledgers:
        return False
    if p[1] < 0:
        return False
    if ml.current_ledger_id is not None and p[0] == ml.current_ledger_id:
        return (p[0] == ml.lac[0] and p[1] <= ml.lac[1] + 1) or p[1] == 0
    if p[0] == ml.lac[0]:
        return p[1] <= ml.lac[1]
    return p[1] < ml.ledgers[p[0]][0]


def get_next_valid_position(ml: ManagedLedger, p: Position, family: PositionFamily = "3x") -> Position:
    """docs §1.5 getNextValidPosition (3.x/4.x getValidPositionAfterSkippedEntries(P, 1); 2.x-old)."""
    q = (p[0], p[1] + 1)
    while not is_valid_position(ml, q, family):
        nxt = ml.higher_key(q[0])
        if nxt is None:
            if family == "2x-old":
                return ml.lac_next  # NPE caught internally, answered with LAC.next
            if family == "3x" and ml.current_ledger_id is not None and ml.current_ledger_entries == 0:
                return (ml.current_ledger_id, 0)
            return (ml.lac[0], ml.lac[1] + 1)
        q = (nxt, 0)
    return q


def get_first_position(ml: ManagedLedger) -> Position | None:
    """docs §1.6 getFirstPosition."""
    if not ml.ledgers:
        return None
    first = min(ml.ledgers)
    if first > ml.lac[0]:
        return (ml.lac[0], -1)
    return (first, -1)


# --------------------------------------------------------------------------------------------------
# §1.7 ML count between two positions
# --------------------------------------------------------------------------------------------------


def number_of_entries(
    ml: ManagedLedger,
    lo: Position,
    lo_closed: bool,
    hi: Position,
    hi_closed: bool,
    family: CountFamily = "3x",
    guava: bool = False,
) -> int:
    """docs §1.7 ManagedLedgerImpl.getNumberOfEntries(range); raises OracleIllegalArgumentError (4.x).

    ``guava=True`` adds what a Java caller meets before the method runs (not in docs/semantics): Guava's Range
    factories reject ``lower > upper`` and the empty open range ``(x, x)`` with IllegalArgumentException.
    """
    if guava and (lo > hi or (lo == hi and not lo_closed and not hi_closed)):
        raise OracleIllegalArgumentError(f"Guava: invalid range {lo}..{hi}")
    if family != "4x":
        if lo[0] == hi[0]:
            if family == "3x-24852" and hi[0] not in ml.ledgers:
                return 0  # both ends in one deleted ledger
            return hi[1] - lo[1] - 1 + (1 if lo_closed else 0) + (1 if hi_closed else 0)
        n = hi[1] + (1 if hi_closed else 0)
        li = ml.ledgers.get(lo[0])
        if li is not None:
            n += li[0] - (lo[1] + 1) + (1 if lo_closed else 0)
        n += sum(entries for lid, (entries, _size) in ml.ledgers.items() if lo[0] < lid < hi[0])
        return n
    # 4.x
    if lo > hi:
        raise OracleIllegalArgumentError(f"Invalid range {lo}..{hi}")
    same = lo[0] == hi[0]
    if lo[0] > hi[0] or (same and lo[1] > hi[1]) or (same and lo[1] < 0 and hi[1] < 0):
        return 0
    if same:
        if lo[0] not in ml.ledgers:
            return 0
        return (
            hi[1]
            - lo[1]
            - 1
            + (1 if lo_closed and lo[1] >= 0 else 0)
            + (1 if hi_closed and hi[1] >= 0 else 0)
        )
    n = 0
    to_l = ml.ledgers.get(hi[0])
    if hi[1] >= 0 and to_l is not None:
        if hi >= ml.lac or hi[0] == ml.lac[0]:  # noqa: SIM108
            capped = hi[1]  # cap = +inf
        else:
            capped = min(hi[1], to_l[0] - 1)
        n += capped + (1 if hi_closed else 0)
    from_l = ml.ledgers.get(lo[0])
    if from_l is not None:
        if lo[1] < 0:
            n += from_l[0]
        else:
            n += from_l[0] - (lo[1] + 1) + (1 if lo_closed else 0)
    n += sum(entries for lid, (entries, _size) in ml.ledgers.items() if lo[0] < lid < hi[0])
    return n


# --------------------------------------------------------------------------------------------------
# Ranges (Guava Range semantics, used for IDM intersections)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Range:
    """A Guava-style range with a closed or open end on each side."""

    lower: Position
    lower_closed: bool
    upper: Position
    upper_closed: bool

    @staticmethod
    def open_closed(lower: Position, upper: Position) -> Range:
        return Range(lower, False, upper, True)

    def _lower_cut(self) -> tuple[Position, int]:
        # a closed lower bound sits "below" its point, an open one "above" it
        return (self.lower, 0 if self.lower_closed else 1)

    def _upper_cut(self) -> tuple[Position, int]:
        return (self.upper, 1 if self.upper_closed else 0)

    def intersection(self, other: Range) -> Range | None:
        """Guava ``isConnected`` + ``intersection``; None when the ranges are not connected."""
        lo_cut = max(self._lower_cut(), other._lower_cut())
        hi_cut = min(self._upper_cut(), other._upper_cut())
        if lo_cut > hi_cut:
            return None
        return Range(lo_cut[0], lo_cut[1] == 0, hi_cut[0], hi_cut[1] == 1)

    def contains(self, p: Position) -> bool:
        above = p > self.lower or (self.lower_closed and p == self.lower)
        below = p < self.upper or (self.upper_closed and p == self.upper)
        return above and below


def ml_count_range(ml: ManagedLedger, r: Range, family: CountFamily) -> int:
    return number_of_entries(ml, r.lower, r.lower_closed, r.upper, r.upper_closed, family)


# --------------------------------------------------------------------------------------------------
# §1.8 cursor-level counts
# --------------------------------------------------------------------------------------------------


def cursor_number_of_entries(
    ml: ManagedLedger, idm: Sequence[IdmRange], r: Range, family: CountFamily
) -> int:
    """docs §1.8 cursor.getNumberOfEntries(range): ML count minus ML counts of IDM intersections."""
    all_entries = ml_count_range(ml, r, family)
    deleted = 0
    for lower, upper in idm:
        common = Range.open_closed(lower, upper).intersection(r)
        if common is not None:
            deleted += ml_count_range(ml, common, family)
    return all_entries - deleted


def precise_backlog(
    ml: ManagedLedger,
    md: Position,
    idm: Sequence[IdmRange],
    family: CountFamily = "3x",
    guard: bool = True,
    guava: bool = False,
) -> int:
    """docs §1.8 getNumberOfEntriesInBacklog(precise): 0 if md >= LAC (3.x+), else count((md, LAC]).

    Without the guard (2.x) and ``md > LAC`` the docs' arithmetic runs on a reversed range; ``guava=True``
    raises instead, as ``Range.openClosed(md, LAC)`` does in Java.
    """
    if guard and md >= ml.lac:
        return 0
    if guava and md > ml.lac:
        raise OracleIllegalArgumentError(f"Guava: invalid range ({md}..{ml.lac}]")
    return cursor_number_of_entries(ml, idm, Range.open_closed(md, ml.lac), family)


def number_of_entries_to_read(
    ml: ManagedLedger, rp: Position, idm: Sequence[IdmRange], family: CountFamily = "3x"
) -> int:
    """docs §1.8 cursor.getNumberOfEntries(): 0 if rp > LAC.next, else count([rp, LAC.next))."""
    if rp > ml.lac_next:
        return 0
    return cursor_number_of_entries(ml, idm, Range(rp, True, ml.lac_next, False), family)


def number_of_entries_in_storage(
    ml: ManagedLedger, md: Position, family: CountFamily = "3x", old: bool = False
) -> int:
    """docs §1.8 getNumberOfEntriesInStorage: ML count of (md, LAC] (3.x+); (md, LAC.next] in 2.x-old."""
    hi = ml.lac_next if old else ml.lac
    return number_of_entries(ml, md, False, hi, True, family)


# --------------------------------------------------------------------------------------------------
# §1.9 getPositionAfterN
# --------------------------------------------------------------------------------------------------


def get_position_after_n(
    ml: ManagedLedger,
    start: Position,
    n: int,
    bound: Bound,
    family: PositionFamily = "3x",
    *,
    unread_guard: bool | None = None,
    clamp: bool | None = None,
    deleted_as_empty: bool | None = None,
    fallback_last_key: bool | None = None,
) -> Position:
    """docs §1.9 getPositionAfterN with its parts (A)-(E) switched on or off.

    ``family`` picks the nextValid of a ``startExcluded`` start (§1.5) and the defaults of the parts: every
    part on for ``"3x"``, every part off for ``"2x-old"`` (no open-ledger guard, NPE on a deleted ledger,
    ``lastKey()+1``, no clamp). ``unread_guard`` (C), ``clamp`` (A)+(E), ``deleted_as_empty`` (B) and
    ``fallback_last_key`` (D) override them one by one, for the release forms in between (§1.9 table).
    """
    newest = family != "2x-old"
    guard = newest if unread_guard is None else unread_guard
    clamped = newest if clamp is None else clamp
    empty_when_deleted = newest if deleted_as_empty is None else deleted_as_empty
    last_key_fallback = newest if fallback_last_key is None else fallback_last_key
    if bound == "startIncluded":  # noqa: SIM108 - mirrors docs/semantics pseudo-code
        cur = start
    else:
        cur = get_next_valid_position(ml, start, family)
    skip = n
    last_ledger = False
    iterations = 0
    while skip >= 0:
        iterations += 1
        if iterations > 100_000:
            raise OracleEndlessLoopError("getPositionAfterN does not terminate (docs §1.9)")
        if ml.current_ledger_id is not None and cur[0] == ml.current_ledger_id:
            last_ledger = True
            # (A): without the guard an empty open ledger is credited LAC.E + 1 phantom entries
            total = ml.lac[1] + 1 if (ml.current_ledger_entries > 0 or not clamped) else 0
        else:
            li = ml.ledgers.get(cur[0])
            if li is None and not empty_when_deleted:
                raise OracleNPEError(f"ledgers.get({cur[0]}) is null in getPositionAfterN")
            total = li[0] if li is not None else 0
        unread = total - cur[1] if (total > 0 or not guard) else 0
        if unread >= skip:
            cur = (cur[0], cur[1] + skip)
            break
        skip -= unread
        if last_ledger:
            cur = (cur[0], total)
            break
        nxt = ml.higher_key(cur[0])
        if nxt is None:
            nxt = ml.last_key() if last_key_fallback else ml.last_key() + 1
        cur = (nxt, 0)
    result = get_previous_position(ml, cur)
    if clamped and result > ml.lac:
        result = ml.lac
    return result


def position_after_n(
    ml: ManagedLedger, start: Position, n: int, bound: Bound, semantics: Semantics
) -> Position:
    """docs §1.9 getPositionAfterN in the form ``semantics``'s release runs."""
    return get_position_after_n(
        ml,
        start,
        n,
        bound,
        semantics.position_family,
        unread_guard=semantics.pan_unread_guard,
        clamp=semantics.pan_clamp,
        deleted_as_empty=semantics.pan_deleted_as_empty,
        fallback_last_key=semantics.pan_fallback_last_key,
    )


# --------------------------------------------------------------------------------------------------
# §1.2 mark-delete, §1.10 skipEntries
# --------------------------------------------------------------------------------------------------


def _idm_range_containing(idm: Sequence[IdmRange], p: Position) -> IdmRange | None:
    for lower, upper in idm:
        if lower < p <= upper:
            return (lower, upper)
    return None


def remove_at_most(idm: Sequence[IdmRange], md: Position) -> list[IdmRange]:
    """RangeSet.removeAtMost(md): drop everything <= md; a range straddling md becomes (md, upper]."""
    out: list[IdmRange] = []
    for lower, upper in idm:
        if upper <= md:
            continue
        out.append((max(lower, md), upper))
    return out


@dataclass(frozen=True)
class MarkDeleteResult:
    mark_delete: Position
    read_position: Position
    individually_deleted: list[IdmRange]


def mark_delete(
    ml: ManagedLedger,
    md: Position,
    rp: Position,
    idm: Sequence[IdmRange],
    new: Position,
    family: PositionFamily = "3x",
) -> MarkDeleteResult:
    """docs §1.2 mark-delete as used by asyncSkipEntries.

    * ``new < md``: MarkDeletingMarkedPosition, which asyncSkipEntries treats as success (no change);
    * ``new > LAC``: rejected unless the next-ledger exception applies (raises OracleMarkDeleteRejectedError);
    * ``new == md``: no change (the extension runs only inside ManagedCursorImpl.setAcknowledgedPosition's
      ``if (!newMarkDeletePosition.equals(oldMarkDeletePosition))`` block; docs §1.2 does not say so);
    * then the mark-delete extension across IDM ranges, ``removeAtMost(md)``, and
      ``rp = nextValid(md)`` when ``rp <= md``.
    """
    if new <= md:
        return MarkDeleteResult(md, rp, list(idm))
    if new > ml.lac:
        next_ledger = ml.higher_key(ml.lac[0])
        md_entries = ml.entries_of(md[0])
        allowed = (
            next_ledger is not None
            and md_entries is not None
            and md[1] + 1 >= md_entries
            and new[0] == next_ledger
        )
        if not allowed:
            raise OracleMarkDeleteRejectedError(f"Invalid mark deleted position {new} (LAC {ml.lac})")
    p = get_next_valid_position(ml, new, family)
    while p <= ml.lac:
        containing = _idm_range_containing(idm, p)
        if containing is None:
            break
        new = containing[1]
        p = get_next_valid_position(ml, new, family)
    remaining = remove_at_most(idm, new)
    if rp <= new:
        rp = get_next_valid_position(ml, new, family)
    return MarkDeleteResult(new, rp, remaining)


def get_num_individual_deleted_entries_to_skip(
    ml: ManagedLedger, md: Position, idm: Sequence[IdmRange], n: int, family: CountFamily = "3x"
) -> int:
    """docs §1.10 getNumIndividualDeletedEntriesToSkip(n)."""
    start = md
    total = 0
    deleted = 0
    for lower, upper in sorted(idm):
        end = lower
        if start <= end:
            gap = number_of_entries(ml, start, False, end, True, family)
            if total + gap >= n:
                break
            total += gap
            deleted += number_of_entries(ml, lower, False, upper, True, family)
            start = upper
    return deleted


@dataclass(frozen=True)
class SkipResult:
    target: Position
    mark_delete: Position
    read_position: Position
    individually_deleted: list[IdmRange]


def skip_entries(
    ml: ManagedLedger,
    md: Position,
    idm: Sequence[IdmRange],
    n: int,
    deleted_entries: DeletedEntries,
    semantics: Semantics,
    rp: Position | None = None,
) -> SkipResult:
    """docs §1.10 skipEntries(n, Include|Exclude) followed by markDelete(target) (§1.2).

    ``rp`` defaults to ``nextValid(md)`` (the read position after recovery/reset, docs §1.2), since the
    cursor export has no read position.
    """
    fam = semantics.position_family
    if rp is None:
        rp = get_next_valid_position(ml, md, fam)
    extra = (
        get_num_individual_deleted_entries_to_skip(ml, md, idm, n, semantics.count_family)
        if deleted_entries == "Exclude"
        else 0
    )
    target = position_after_n(ml, md, n + extra, "startExcluded", semantics)
    result = mark_delete(ml, md, rp, idm, target, fam)
    return SkipResult(target, result.mark_delete, result.read_position, result.individually_deleted)


# --------------------------------------------------------------------------------------------------
# §2 backlog size
# --------------------------------------------------------------------------------------------------


def java_div(a: int, b: int) -> int:
    """Java ``long`` division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def consumed_ledger_size(size: int, entries: int, e: int, generation: ConsumedGeneration = "v3") -> int:
    """docs §2.2 consumedLedgerSize(ledgerSize, ledgerEntries, consumedEntryId), generations v1/v2/v3."""
    if entries <= 0:
        return 0
    if generation == "v2" and entries == e + 1:
        return size
    if generation == "v3" and entries <= e + 1:
        return size
    avg = java_div(size, entries)
    return (e + 1) * avg if e >= 0 else 0


def slowest_durable_cursors(cursors: Iterable[Cursor]) -> list[Cursor]:
    """docs §1.11 getSlowestConsumer candidates: durable cursors with the smallest md, by insertion order."""
    durable = [c for c in cursors if c.durable]
    if not durable:
        return []
    smallest = min(c.mark_delete for c in durable)
    return sorted((c for c in durable if c.mark_delete == smallest), key=lambda c: c.order)


def cursor_container(cursors: Iterable[Cursor]) -> CursorContainer[Cursor]:
    """docs §3.9: the broker's heap of durable cursors, added in insertion order (``order``)."""
    container: CursorContainer[Cursor] = CursorContainer()
    for c in sorted((c for c in cursors if c.durable), key=lambda c: c.order):
        container.add(c, c.mark_delete)
    return container


def estimated_backlog_size(
    ml: ManagedLedger, cursors: Iterable[Cursor], semantics: Semantics
) -> tuple[str | None, int]:
    """docs §2.3 getEstimatedBacklogSize(): (slowest durable cursor name, bytes).

    The name is the root of the cursor heap built in insertion order (docs §3.9); which of several cursors
    with the same md the broker's own heap holds is not in the export (same md, hence the same size).
    """
    slowest = cursor_container(cursors).slowest()
    if slowest is None:
        return None, 0
    pos = slowest.mark_delete
    size = ml.total_size - sum(s for lid, (_e, s) in ml.ledgers.items() if lid < pos[0])
    li = ml.ledgers.get(pos[0])
    if li is None:
        return slowest.name, size  # static export: the slowest md "still == pos"
    gen = semantics.consumed_generation
    if li[0] == 0:
        size -= consumed_ledger_size(ml.current_ledger_size, ml.current_ledger_entries, pos[1], gen)
    else:
        size -= consumed_ledger_size(li[1], li[0], pos[1], gen)
    return slowest.name, size


def estimate_backlog_from_position(ml: ManagedLedger, pos: Position | None, semantics: Semantics) -> int:
    """docs §2.4 getEstimatedBacklogSize(pos) / estimateBacklogFromPosition(pos).

    Raises OracleNPEError when ``pos`` is in an existing ledger and there is no current ledger (the Java code
    dereferences ``currentLedger``).
    """
    if pos is None:
        return 0
    before = sum(s for lid, (_e, s) in ml.ledgers.items() if lid < pos[0])
    after = ml.total_size - before
    li = ml.ledgers.get(pos[0])
    gen = semantics.consumed_generation
    if li is None:
        return ml.total_size if semantics.estimate_deleted_returns_total else after
    if ml.current_ledger_id is None:
        raise OracleNPEError("currentLedger.getId() on a null current ledger in estimateBacklogFromPosition")
    if pos[0] == ml.current_ledger_id:
        return after - consumed_ledger_size(ml.current_ledger_size, ml.current_ledger_entries, pos[1], gen)
    return after - consumed_ledger_size(li[1], li[0], pos[1], gen)


def estimate_backlog_from_position_no_current(ml: ManagedLedger, pos: Position, semantics: Semantics) -> int:
    """The value §2.4 gives when a null current ledger is read as "pos is not in the current ledger"."""
    before = sum(s for lid, (_e, s) in ml.ledgers.items() if lid < pos[0])
    li = ml.ledgers[pos[0]]
    return ml.total_size - before - consumed_ledger_size(li[1], li[0], pos[1], semantics.consumed_generation)


def estimated_size_since_mark_delete(
    ml: ManagedLedger,
    md: Position,
    idm: Sequence[IdmRange],
    semantics: Semantics,
    master: bool = True,
    no_current_as_other: bool = False,
) -> int:
    """docs §2.5 getEstimatedSizeSinceMarkDeletePosition (master subtracts IDM entries; 2.x does not).

    ``no_current_as_other``: where §2.4 would throw (md in an existing ledger, no current ledger), read
    "no current ledger" as "md is not in the current ledger", as the library does, instead of raising."""
    try:
        total = estimate_backlog_from_position(ml, md, semantics)
    except OracleNPEError:
        if not no_current_as_other:
            raise
        total = estimate_backlog_from_position_no_current(ml, md, semantics)
    if not master:
        return total
    fam = semantics.count_family
    window = Range.open_closed(md, ml.lac)
    d = 0
    for lower, upper in idm:
        common = Range.open_closed(lower, upper).intersection(window)
        if common is not None:
            d += ml_count_range(ml, common, fam)
    if d == 0:
        return total
    n = number_of_entries(ml, md, False, ml.lac, True, fam)
    if n == 0 or n <= d:
        return max(0, total)
    return total - d * java_div(total, n)
