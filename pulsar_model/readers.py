"""Readers (non-durable cursors): start positions, and reset-cursor by publish time (docs §7, §3.7, §1.11).

Two transforms, both pure and lazy, one output row per request row (extra request columns are carried):

* :func:`reader_start_positions` - where the broker puts the non-durable cursor of a new reader (the §7.2
  mapping of the start message id, including the one-entry step back, the LAC comparison, earliest/latest,
  ``readCompacted`` and the version-dependent mark-delete rule), which message the client application
  receives first (§7.3 client filtering of the start entry) and, with ``rollback_seconds > 0``, the
  cursor reset by publish time that the broker performs after creating the cursor from earliest (a read
  of that search that fails is only logged: the reader keeps the earliest cursor, §7.5);
* :func:`reset_cursor_by_time_plan` - dry run of ``pulsar-admin topics reset-cursor --time`` /
  ``PersistentSubscription.resetCursor(long timestamp)``.

Broker behaviour of the reset by time, as read in apache/pulsar sources (search tool; paraphrased):

* ``PersistentSubscription.resetCursor(long)`` runs ``PersistentMessageFinder.findMessages(ts)``, i.e.
  ``cursor.asyncFindNewestMatching(SearchAllAvailableEntries, entry -> entryTimestamp < ts)`` - the newest
  entry published strictly *before* ``ts`` (``MessageImpl.isEntryPublishedEarlierThan``; apache/pulsar#6393,
  release 2.5.1, changed ``<=`` to ``<`` "Seek to the first one >= timestamp"). The entry timestamp is the
  broker-entry-metadata timestamp when the entry carries one, else the publish time
  (``Commands.getEntryTimestamp``, PIP-70 / apache/pulsar#11014).
* When an entry is found the reset target is ``found.getNext()`` (``(L, E+1)``, purely arithmetic); when
  none is found it is ``cursor.getFirstPosition()`` = ``(first ledger id, 0)``. The target then goes
  through ``asyncResetCursor``: a position that is not valid moves to ``getNextValidPosition`` and
  ``internalResetCursor`` sets ``md = getPreviousPosition(rp)``, ``rp = target``, acked ranges cleared
  (``PersistentSubscription`` in apache/pulsar and lhotari/pulsar copies). ``found.getNext()`` followed by
  the validity rule equals ``nextValid(found)`` for every found entry.
* ``asyncFindNewestMatching`` is ``OpFindNewest``: read the first position (no match -> *null*), read the
  position ``getPositionAfterN(first, max, startExcluded)`` (match -> that entry), otherwise binary search
  with ``mid = min + max((max - min) / 2, 1)`` over ``getPositionAfterN(first, mid, startExcluded)``;
  ``find()`` stops with the last match when ``hasMoreEntries(position)`` is false. It assumes monotone
  timestamps: with out-of-order publish times the answer may differ from a linear scan, which is why both
  are reported.
* Generations (see :class:`FindRules`): up to 4.0.2 the search starts at ``(first ledger, 0)`` with
  ``max = numberOfEntries - 1``; from 4.0.3 (apache/pulsar#22792) ``max`` is the entry count of
  ``[start, end]`` (``end`` = LAC or the narrowed end; *null* at once when it is 0) and the range may be
  narrowed by ledger close timestamps (``managedLedgerCursorResetLedgerCloseTimestampMaxClockSkewMillis``;
  refined by apache/pulsar#24219 in 4.0.5). ``hasMoreEntries`` is the cursor's (``position <= LAC`` and
  unacked entries left in ``[position, LAC]``) in older brokers and the ledger's (``position <= LAC``) once
  the finder searches "from the ledger" (apache/pulsar#20457, fixing issue #20368: release tags v2.10.5,
  v2.11.2, v3.0.1, v3.1.0 and later).

The binary search is sequential per topic, so it runs in ``groupBy(cluster, topic).applyInArrow`` over a
compact per-topic input (the managed ledger, its ledgers, the timestamps of the exported entries of the
requested topics and the distinct requests), with a plain-Python managed-ledger model (§1.3-§1.9) inside.
Everything else is set-based Spark SQL built with :mod:`pulsar_model.engine.columns` and the environment of
:mod:`pulsar_model.positions`.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_model import DEFAULT_PULSAR_VERSION
from pulsar_model.domain.versions import Behaviour, PulsarVersion, VersionLike, behaviour, flag
from pulsar_model.engine.columns import (
    EARLIEST,
    LATEST,
    NULL_POS_SQL,
    POSITION_SQL_TYPE,
    as_position,
    case,
    first_position_sql,
    fld,
    next_position_is_valid_sql,
    next_valid_lookup_sql,
    next_valid_position_sql,
    pos_sql,
    previous_position_sql,
    ref,
)
from pulsar_model.engine.flags import sql_flags
from pulsar_model.positions import (
    KEY,
    LAC,
    MISSING_CURSOR,
    MISSING_TOPIC,
    MISSING_TOPIC_SQL,
    NULL_STRING,
    CursorBasis,
    E,
    X,
    _by_topic,
    _coalesce_sql,
    _Env,
    _err_if,
    _keep,
    _seek,
)

__all__ = [
    "DEFAULT_LEDGER_CLOSE_CLOCK_SKEW_MS",
    "INITIAL_EARLIEST",
    "INITIAL_LATEST",
    "MESSAGE_ID_SQL_TYPE",
    "NOT_BATCHED",
    "START_EARLIEST",
    "START_LATEST",
    "START_MESSAGE_ID",
    "FindRules",
    "find_compares_strictly_earlier",
    "find_narrows_by_ledger_close_time",
    "find_reads_from_ledger",
    "find_rules",
    "find_searches_closed_range",
    "find_uses_broker_entry_timestamp",
    "reader_md_is_previous_of_read",
    "reader_start_positions",
    "reader_steps_back_every_start_id",
    "reset_cursor_by_time_plan",
]

Pos = tuple[int, int]

#: ``start_kind`` values of :func:`reader_start_positions` (docs §7.2: a start message id, or the client's
#: ``MessageId.earliest`` / ``MessageId.latest``).
START_MESSAGE_ID = "message_id"
START_EARLIEST = "earliest"
START_LATEST = "latest"
#: ``CommandSubscribe.initialPosition`` values (docs §7.1: field 13, default ``Latest``).
INITIAL_LATEST = "Latest"
INITIAL_EARLIEST = "Earliest"
#: ``MessageIdData.batch_index`` of a message that is not part of a batch (docs §7.1: default -1).
NOT_BATCHED = -1
#: Smallest Java ``int``: a batch-index key below every real message of an entry (seeks "at or after").
_INT_MIN = -(2**31)
#: ``managedLedgerCursorResetLedgerCloseTimestampMaxClockSkewMillis`` broker default. Assumed (not read in
#: the sources): the finder code and its test were read, ``broker.conf`` was not.
DEFAULT_LEDGER_CLOSE_CLOCK_SKEW_MS = 60_000

MESSAGE_ID_SQL_TYPE = "STRUCT<ledger_id: BIGINT, entry_id: BIGINT, batch_index: INT>"
_EMPTY_RANGES_SQL = f"CAST(array() AS ARRAY<STRUCT<lower: {POSITION_SQL_TYPE}, upper: {POSITION_SQL_TYPE}>>)"

_NOT_EXPORTED = "entries not exported for"
_NO_LEDGERS = "NoSuchElementException: the managed ledger has no ledgers (cursor.getFirstPosition())"
_NO_LAC = "the managed ledger has no last_confirmed_entry"
_NO_EXPORT_TIME = "managed_ledgers.exported_at is null or missing: no 'now' for rollback_seconds"
_NO_FIRST_POSITION = "NullPointerException: getFirstPosition() is null (the managed ledger has no ledgers)"


# --- version predicates (their release rules are flags of versions.py; the evidence is here) ---------------


def reader_steps_back_every_start_id(version: VersionLike) -> bool:
    """The broker steps a client start id back one entry whenever ``ledger, entry >= 0`` (docs §7.2).

    Older brokers stepped back only when ``batchIndex >= 0``. apache/pulsar#4331 (master 2019-06-15) made
    every start id step back; first in 2.4.0 (tag v2.3.2 still has the batch-only rule).
    """
    return flag("reader_steps_back_every_start_id", version)


def reader_md_is_previous_of_read(version: VersionLike) -> bool:
    """``NonDurableCursorImpl.recoverCursor`` sets ``md = getPreviousPosition(rp)`` instead of ``md = p``.

    docs §7.2, §7.7. Part of apache/pulsar#21248: ``recoverCursor`` of the release tags v2.10.6, v2.11.3,
    v3.0.2 and v3.2.0 has it, v3.1.0-v3.1.3 and the patches before those still set ``md = p``.
    """
    return flag("reader_md_is_previous_of_read", version)


def find_compares_strictly_earlier(version: VersionLike) -> bool:
    """The finder matches ``entryTimestamp < ts`` (apache/pulsar#6393, release/2.5.1); before: ``<= ts``."""
    return flag("find_strictly_earlier", version)


def find_uses_broker_entry_timestamp(version: VersionLike) -> bool:
    """The finder compares the broker-entry-metadata timestamp when present (PIP-70, first in 2.8.0)."""
    return flag("find_broker_entry_timestamp", version)


def find_reads_from_ledger(version: VersionLike) -> bool:
    """``OpFindNewest.find()`` asks the ledger (``position <= LAC``) instead of the cursor.

    The cursor variant also requires unacknowledged entries in ``[position, LAC]``, so an individually
    acked tail stops the search early (apache/pulsar issue #20368, test
    ``PersistentMessageFinderTest.testPersistentMessageFinderWhenLastMessageDelete``). Fixed by
    apache/pulsar#20457: present at tags v3.1.0, v3.0.1, v2.11.2 and v2.10.5, absent from v3.0.0, v2.11.1
    and v2.10.4.
    """
    return flag("find_reads_from_ledger", version)


def find_searches_closed_range(version: VersionLike) -> bool:
    """``asyncFindNewestMatching(.., start, end, ..)`` with ``max = count([start, end])``.

    apache/pulsar#22792 with its fix apache/pulsar#23919: both in 4.0.3 and in 3.3.7 (release notes of 4.0.3
    and 3.3.7, ``apache/pulsar-site`` ``release-notes/versioned``; 3.3.7 also lists #24219); every 4.1+.
    #22792 alone first shipped in 4.0.2 (4.0.2 release notes; issue apache/pulsar#23910 reports its
    earliest-reset regression on 4.0.2, fixed by #23919; the PR's release/4.0.3 label is wrong): 4.0.2 runs
    a search this module does not model and is answered as 4.0.1 (docs §7.5). Older brokers search from
    ``(first ledger, 0)`` with ``max = numberOfEntries - 1``.
    """
    return flag("find_closed_range", version)


def find_narrows_by_ledger_close_time(version: VersionLike) -> Literal["none", "first_entry", "last_entry"]:
    """How ``PersistentMessageFinder.getFindPositionRange`` narrows the search by ledger close times.

    ``first_entry`` (4.0.3, apache/pulsar#22792 and #23919): start at entry 0 of the last ledger closed
    before ``ts - skew`` (then moved to the last ledger seen when the one before it closed before that);
    ``last_entry`` (4.0.5+ and 3.3.7+, apache/pulsar#24219 "search less entries", listed in the 4.0.5 and
    3.3.7 release notes): start at that ledger's last entry.
    """
    if not find_searches_closed_range(version):
        return "none"
    return "last_entry" if flag("find_narrows_to_last_entry", version) else "first_entry"


def _find_clamps_check_last(version: VersionLike) -> bool:
    """``OpFindNewest`` moves the "check last" probe back to ``getLastPosition()`` when it lies beyond it.

    apache/pulsar#9083 (Dec 2020): first in 2.8.0, back-ported to branch-2.7 (2.7.1) and branch-2.6 (first
    tag carrying it: v2.6.4). Only matters without the 2.10.1 LAC clamp of ``getPositionAfterN``.
    """
    return flag("find_clamps_check_last", version)


@dataclass(frozen=True)
class FindRules:
    """Version-dependent rules of the time search (``PersistentMessageFinder`` + ``OpFindNewest``)."""

    beh: Behaviour
    strictly_earlier: bool
    broker_timestamp: bool
    from_ledger: bool
    closed_range: bool
    narrowing: Literal["none", "first_entry", "last_entry"]
    check_last_clamp: bool
    #: clock skew of the ledger-close-time narrowing; ``None`` or negative disables it (as the broker does)
    skew_ms: int | None


def find_rules(version: VersionLike, skew_ms: int | None = DEFAULT_LEDGER_CLOSE_CLOCK_SKEW_MS) -> FindRules:
    """Parse ``version`` (raises :class:`~pulsar_model.errors.ConfigError`) into the time-search rules."""
    v = PulsarVersion.parse(version)
    return FindRules(
        beh=behaviour(v),
        strictly_earlier=find_compares_strictly_earlier(v),
        broker_timestamp=find_uses_broker_entry_timestamp(v),
        from_ledger=find_reads_from_ledger(v),
        closed_range=find_searches_closed_range(v),
        narrowing=find_narrows_by_ledger_close_time(v),
        check_last_clamp=_find_clamps_check_last(v),
        skew_ms=skew_ms,
    )


# --- plain-Python managed-ledger model of the per-topic search (docs §1.3-§1.9) ---------------------


class _BrokerError(Exception):
    """The broker would fail the operation (the message becomes the row's ``error``)."""


class _ReadFailedError(_BrokerError):
    """A read of the search fails (the entry does not exist): ``OpFindNewest.readEntryFailed`` reports it
    through ``findEntryFailed``, so the reset fails as a completed, failed future (docs §7.5)."""


@dataclass
class _Topic:
    """One managed ledger as the search sees it (docs §0.2): listed ledgers, open ledger, LAC, and the
    exported entries (per ledger: sorted entry ids and their compared timestamps)."""

    beh: Behaviour
    ids: list[int]
    listed: dict[int, int]
    closed_ms: dict[int, int | None]
    cur_id: int | None
    cle: int
    lac: Pos
    exp_ids: dict[int, np.ndarray] = field(default_factory=dict)
    exp_ts: dict[int, np.ndarray] = field(default_factory=dict)

    def real_entries(self, lid: int) -> int:
        return self.cle if lid == self.cur_id else self.listed.get(lid, 0)

    def exists(self, p: Pos) -> bool:
        return p[0] in self.listed and 0 <= p[1] < self.real_entries(p[0])

    def stamp(self, p: Pos) -> int | None:
        """Compared timestamp of an exported entry, None when the export lacks it."""
        ids = self.exp_ids.get(p[0])
        if ids is None:
            return None
        i = int(np.searchsorted(ids, p[1]))
        return int(self.exp_ts[p[0]][i]) if i < len(ids) and int(ids[i]) == p[1] else None

    def higher(self, lid: int) -> int | None:
        i = bisect.bisect_right(self.ids, lid)
        return self.ids[i] if i < len(self.ids) else None

    def total_entries(self) -> int:
        """``ManagedLedgerImpl.getNumberOfEntries()``: entries of every listed ledger plus the open one's."""
        return sum(self.listed.values()) + (self.cle if self.cur_id in self.listed else 0)

    def cursor_first(self) -> Pos:
        """``ManagedCursorImpl.getFirstPosition()`` = ``(ledgers.firstKey(), 0)``."""
        if not self.ids:
            raise _BrokerError(_NO_LEDGERS)
        return (self.ids[0], 0)

    def is_valid(self, p: Pos) -> bool:
        """docs §1.4, 3.x/4.x order or the 2.x-old order."""
        lac = self.lac
        if self.beh.new_valid_position:
            if p[0] not in self.listed or p[1] < 0:
                return False
            if self.cur_id is not None and p[0] == self.cur_id:
                return (p[0] == lac[0] and p[1] <= lac[1] + 1) or p[1] == 0
            if p[0] == lac[0]:
                return p[1] <= lac[1]
            return p[1] < self.listed[p[0]]
        if p[1] < 0 or p[0] > lac[0]:
            return False
        if p[0] == lac[0]:
            return p[1] <= lac[1] + 1
        if p[0] not in self.listed:
            return False  # older than LAC's ledger here; the "entry == 0" branch is unreachable
        return p[1] < self.listed[p[0]]

    def next_valid(self, p: Pos) -> Pos:
        """docs §1.5: ``P.next`` when valid, else entry 0 of the next ledger where that is valid, else the
        version's fallback."""
        q = (p[0], p[1] + 1)
        while not self.is_valid(q):
            nxt = self.higher(q[0])
            if nxt is None:
                if self.beh.next_valid_open_ledger_fallback and self.cur_id is not None and self.cle == 0:
                    return (self.cur_id, 0)
                return (self.lac[0], self.lac[1] + 1)
            q = (nxt, 0)
        return q

    def previous(self, p: Pos) -> Pos:
        """docs §1.3 (identical 2.x-4.x)."""
        if p[1] > 0:
            return (p[0], p[1] - 1)
        i = bisect.bisect_left(self.ids, p[0])
        if i == 0:
            return (p[0], -1)
        for lid in reversed(self.ids[:i]):
            if self.listed[lid] > 0:
                return (lid, self.listed[lid] - 1)
        return (self.ids[0], -1)

    def position_after_n(self, start: Pos, n: int, excluded: bool) -> Pos:
        """docs §1.9 ``getPositionAfterN`` with the version's loop ends (``Behaviour`` flags)."""
        beh, lac = self.beh, self.lac
        cur = self.next_valid(start) if excluded else start
        skip = n
        last_ledger = False
        while skip >= 0:
            if self.cur_id is not None and cur[0] == self.cur_id:
                last_ledger = True
                total = (lac[1] + 1 if self.cle > 0 else 0) if beh.pan_current_ledger_guard else lac[1] + 1
            elif cur[0] in self.listed:
                total = self.listed[cur[0]]
            elif beh.pan_deleted_ledger_as_empty:
                total = 0
            else:
                raise _BrokerError(
                    f"NullPointerException: getPositionAfterN reads ledgers.get({cur[0]}) of a ledger "
                    "missing from the map"
                )
            unread = (total - cur[1] if total > 0 else 0) if beh.pan_unread_guard else total - cur[1]
            if unread >= skip:
                cur = (cur[0], cur[1] + skip)
                break
            skip -= unread
            if last_ledger:
                cur = (cur[0], total)
                break
            nxt = self.higher(cur[0])
            if nxt is not None:
                cur = (nxt, 0)
                continue
            if not self.ids:
                raise _BrokerError("NoSuchElementException: ledgers.lastKey() on an empty ledger map")
            if beh.pan_past_end != "revisit_last_ledger":
                raise _BrokerError(
                    "getPositionAfterN runs past the last ledger (ledgers.lastKey()+1) and never returns a "
                    "position (NullPointerException or endless loop, docs §1.9)"
                )
            # 3.x: ceilingKey(..) ?: lastKey() - the last (closed) ledger is walked again and again
            last = self.ids[-1]
            walk = self.listed[last]
            if walk <= 0:
                raise _BrokerError("getPositionAfterN never returns: the last ledger is empty and not open")
            cur = (last, (skip - 1) % walk + 1)
            break
        result = self.previous(cur)
        if beh.pan_lac_clamp and result > lac:
            result = lac
        return result

    def count(self, lo: Pos, lo_closed: bool, hi: Pos, hi_closed: bool) -> int:
        """docs §1.7 ``getNumberOfEntries(range)``: 2.x/3.x literal arithmetic or the 4.x one."""
        lc, hc = int(lo_closed), int(hi_closed)
        between = sum(self.listed[lid] for lid in self.ids if lo[0] < lid < hi[0])
        if not self.beh.entry_count_4x:
            if lo[0] == hi[0]:
                if self.beh.entry_count_same_ledger_deleted_zero and hi[0] not in self.listed:
                    return 0  # apache/pulsar#24852: a range inside a deleted ledger
                return hi[1] - lo[1] - 1 + lc + hc
            n = hi[1] + hc
            if lo[0] in self.listed:
                n += self.listed[lo[0]] - (lo[1] + 1) + lc
            return n + between
        same = lo[0] == hi[0]
        if lo[0] > hi[0] or (same and lo[1] > hi[1]) or (same and lo[1] < 0 and hi[1] < 0):
            return 0
        if same:
            if lo[0] not in self.listed:
                return 0
            return hi[1] - lo[1] - 1 + int(lo_closed and lo[1] >= 0) + int(hi_closed and hi[1] >= 0)
        n = 0
        if hi[1] >= 0 and hi[0] in self.listed:
            unbounded = hi >= self.lac or hi[0] == self.lac[0]
            n += (hi[1] if unbounded else min(hi[1], self.listed[hi[0]] - 1)) + hc
        if lo[0] in self.listed:
            n += self.listed[lo[0]] if lo[1] < 0 else self.listed[lo[0]] - (lo[1] + 1) + lc
        return n + between

    def cursor_count_closed(self, lo: Pos, hi: Pos, acked: Sequence[tuple[Pos, Pos]]) -> int:
        """Cursor count of ``[lo, hi]``: the ML count minus the ML count of each acked range's Guava
        intersection with it (docs §1.8)."""
        n = self.count(lo, True, hi, True)
        for a, b in acked:
            lo_cut = max((lo, 0), (a, 1))  # a closed lower end sits below its point, an open one above it
            hi_cut = min((hi, 1), (b, 1))
            if lo_cut <= hi_cut:
                n -= self.count(lo_cut[0], lo_cut[1] == 0, hi_cut[0], hi_cut[1] == 1)
        return n

    def missing_in(self, lo: Pos, hi: Pos) -> tuple[int, int, Pos | None]:
        """``(existing, missing, first missing)`` entries of ``[lo, hi]`` with respect to the export."""
        existing = missing = 0
        first_missing: Pos | None = None
        for lid in self.ids[bisect.bisect_left(self.ids, lo[0]) : bisect.bisect_right(self.ids, hi[0])]:
            n = self.real_entries(lid)
            a = max(lo[1], 0) if lid == lo[0] else 0
            b = min(hi[1], n - 1) if lid == hi[0] else n - 1
            if b < a:
                continue
            got = self.exp_ids.get(lid, np.empty(0, dtype=np.int64))
            i0, i1 = int(np.searchsorted(got, a)), int(np.searchsorted(got, b, side="right"))
            existing += b - a + 1
            gap = (b - a + 1) - (i1 - i0)
            if gap > 0:
                missing += gap
                if first_missing is None:
                    expected = np.arange(a, a + (i1 - i0), dtype=np.int64)
                    differ = np.nonzero(got[i0:i1] != expected)[0]
                    first_missing = (lid, a + int(differ[0]) if len(differ) else a + (i1 - i0))
        return existing, missing, first_missing

    def live_series(self) -> tuple[list[Pos], np.ndarray]:
        """Exported entries that exist in the managed ledger and are ``<= LAC``, in position order, with their
        compared timestamps."""
        positions: list[Pos] = []
        stamps: list[np.ndarray] = []
        for lid in self.ids:
            ids = self.exp_ids.get(lid)
            if ids is None or lid > self.lac[0]:
                continue
            keep = ids < self.real_entries(lid)
            if lid == self.lac[0]:
                keep &= ids <= self.lac[1]
            positions.extend((lid, int(e)) for e in ids[keep])
            stamps.append(self.exp_ts[lid][keep])
        return positions, (np.concatenate(stamps) if stamps else np.empty(0, dtype=np.int64))


@dataclass(frozen=True)
class _Found:
    found: Pos | None
    linear: Pos | None
    monotonic: bool | None
    md: Pos | None
    rp: Pos | None
    error: str | None
    #: the error is a failed read of the search (a reader with a rollback is still created, docs §7.5)
    read_failed: bool = False


def _find_position_range(m: _Topic, t: int, rules: FindRules) -> tuple[Pos | None, Pos | None]:
    """``PersistentMessageFinder.getFindPositionRange`` (4.0.3+): narrow by ledger close timestamps.

    The open ledger's close timestamp is 0; a closed ledger exported without one stands for a LedgerInfo
    without ``timestamp`` (then nothing is narrowed).
    """
    if rules.narrowing == "none" or rules.skew_ms is None or rules.skew_ms < 0:
        return None, None
    t_min, t_max = t - rules.skew_ms, t + rules.skew_ms
    start: Pos | None = None
    end: Pos | None = None
    second_last: int | None = None
    last: int | None = None
    for lid in m.ids:
        closed = 0 if lid == m.cur_id else m.closed_ms.get(lid)
        if closed is None:
            return None, None
        second_last, last = last, lid
        if closed == 0:
            end = None
            break
        if closed <= t_min:
            start = (lid, m.listed[lid] - 1) if rules.narrowing == "last_entry" else (lid, 0)
        elif closed > t_max:
            end = (lid, m.listed[lid] - 1)
            break
    if rules.narrowing == "first_entry" and last is not None and second_last is not None:
        closed_before = 0 if second_last == m.cur_id else (m.closed_ms.get(second_last) or 0)
        if 0 < closed_before < t_min:
            first_in_last = (last, 0)
            start = first_in_last if m.lac >= first_in_last else m.lac
    return start, end


def _find_newest(
    m: _Topic, t: int, rules: FindRules, acked: Sequence[tuple[Pos, Pos]], topic: str
) -> Pos | None:
    """``cursor.asyncFindNewestMatching(SearchAllAvailableEntries, ts < t)`` and ``OpFindNewest``."""
    lac = m.lac

    def matches(p: Pos) -> bool:
        if not m.exists(p):
            raise _ReadFailedError(
                f"ManagedLedgerException: reading entry {p[0]}:{p[1]} fails (no such entry)"
            )
        ts = m.stamp(p)
        if ts is None:
            raise _BrokerError(f"{_NOT_EXPORTED} {topic}: entry {p[0]}:{p[1]} read by the search is missing")
        return ts < t if rules.strictly_earlier else ts <= t

    def has_more(p: Pos) -> bool:
        if p > lac:
            return False
        return rules.from_ledger or m.cursor_count_closed(p, lac, acked) > 0

    if rules.closed_range:
        r_start, r_end = _find_position_range(m, t, rules)
        start = r_start if r_start is not None else m.cursor_first()
        end = r_end if r_end is not None and r_end <= lac else lac
        top = m.count(start, True, end, True) if start <= end else 0
        if top <= 0:
            return None
    else:
        start = m.cursor_first()
        end = lac
        top = m.total_entries() - 1
    lo, hi, mid = 0, top, 0
    search = start
    last_match: Pos | None = None
    state = "check_first"
    checked = False
    while True:
        if not has_more(search):
            return last_match
        if not checked:
            existing, missing, first_missing = m.missing_in(start, end)
            if missing:
                where = "" if first_missing is None else f", first {first_missing[0]}:{first_missing[1]}"
                raise _BrokerError(
                    f"{_NOT_EXPORTED} {topic}: {missing} of {existing} entries of the searched range "
                    f"[{start[0]}:{start[1]}..{end[0]}:{end[1]}] are missing{where}"
                )
            checked = True
        hit = matches(search)
        if state == "check_first":
            if not hit:
                return None
            last_match = search
            state = "check_last"
            search = m.position_after_n(search, hi, excluded=True)
            if rules.check_last_clamp and lac < search:
                search = lac
        elif state == "check_last":
            if hit:
                return search
            state = "searching"
            mid = lo + max(_java_div(hi - lo, 2), 1)
            search = m.position_after_n(start, mid, excluded=True)
        else:
            if hit:
                last_match = search
                lo = mid
            else:
                hi = mid - 1
            mid = lo + max(_java_div(hi - lo, 2), 1)
            if hi <= lo:
                return last_match
            search = m.position_after_n(start, mid, excluded=True)


def _java_div(a: int, b: int) -> int:
    """Java ``long`` division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _reset_by_time(
    m: _Topic,
    t: int,
    rules: FindRules,
    acked: Sequence[tuple[Pos, Pos]],
    topic: str,
    series: tuple[list[Pos], np.ndarray],
) -> _Found:
    """Find, then reset: target ``found.getNext()`` or ``(first ledger, 0)``; an invalid target moves to the
    next valid position; ``md = previous(rp)`` (``asyncResetCursor`` / ``internalResetCursor``, §1.11)."""
    positions, stamps = series
    monotonic = bool(np.all(stamps[1:] >= stamps[:-1])) if len(stamps) > 1 else True
    hits = np.nonzero(stamps < t if rules.strictly_earlier else stamps <= t)[0]
    linear = positions[int(hits[-1])] if len(hits) else None
    try:
        found = _find_newest(m, t, rules, acked, topic)
        target = (found[0], found[1] + 1) if found is not None else m.cursor_first()
    except _BrokerError as exc:
        return _Found(None, linear, monotonic, None, None, str(exc), isinstance(exc, _ReadFailedError))
    rp = target if m.is_valid(target) else m.next_valid(target)
    return _Found(found, linear, monotonic, m.previous(rp), rp, None)


# --- the grouped search -----------------------------------------------------------------------------------

_KIND_ML, _KIND_LEDGER, _KIND_ENTRY, _KIND_REQUEST, _KIND_CURSOR, _KIND_ACK = "m", "l", "e", "r", "c", "a"
_SUB, _TS, _RB = "_pa_sub", "_pa_ts", "_pa_rbk"

#: Columns of the union shipped to the per-topic function (after ``cluster, topic``); ``v*`` are per kind.
_SEARCH_IN = [
    ("_k", T.StringType()),
    (_SUB, T.StringType()),  # r/c/a: cursor name (reset) or "" (reader rollback)
    (_TS, T.LongType()),  # r: timestamp ms, or the rollback seconds when _RB
    (_RB, T.BooleanType()),  # r: the request is a reader rollback
    ("v1", T.LongType()),  # m: current ledger | l: ledger | e: ledger | a: lower ledger
    ("v2", T.LongType()),  # m: current entries | l: entries | e: entry | a: lower entry
    ("v3", T.LongType()),  # m: LAC ledger | l: close ms | e: compared timestamp | a: upper ledger
    ("v4", T.LongType()),  # m: LAC entry | a: upper entry
    ("v5", T.LongType()),  # m: export time ms
    ("_pa_ver", T.StringType()),  # m: the topic's broker version (per-row calls)
]
_POS_FIELDS = ("found", "linear", "md", "rp")
_SEARCH_OUT = T.StructType(
    [
        T.StructField("cluster", T.StringType()),
        T.StructField("topic", T.StringType()),
        T.StructField(_SUB, T.StringType()),
        T.StructField(_TS, T.LongType()),
        T.StructField(_RB, T.BooleanType()),
        *[T.StructField(f"_pa_{p}_{s}", T.LongType()) for p in _POS_FIELDS for s in ("l", "e")],
        T.StructField("_pa_mono", T.BooleanType()),
        T.StructField("_pa_serr", T.StringType()),
        T.StructField("_pa_rfail", T.BooleanType()),
    ]
)
_ARROW_TYPES = {T.StringType: pa.string(), T.LongType: pa.int64(), T.BooleanType: pa.bool_()}
_ARROW_OUT = pa.schema([pa.field(f.name, _ARROW_TYPES[type(f.dataType)]) for f in _SEARCH_OUT.fields])


def _search_fn(rules: FindRules | None, skew_ms: int | None) -> Callable[[pa.Table], pa.Table]:
    """The per-topic function of ``applyInArrow``: one output row per distinct request key. ``rules`` None:
    each topic's rules come from its managed-ledger row's version (``pulsar_version=None``)."""

    def fn(table: pa.Table) -> pa.Table:
        kinds = table.column("_k")
        entry_rows = table.filter(pc.equal(kinds, _KIND_ENTRY))
        rest = table.filter(pc.not_equal(kinds, _KIND_ENTRY))
        cols = {name: rest.column(name).to_pylist() for name in rest.column_names}
        cluster, topic = table.column("cluster")[0].as_py(), table.column("topic")[0].as_py()
        ml: tuple[Any, ...] | None = None
        ledgers: list[tuple[int, int, int | None]] = []
        requests: dict[tuple[str | None, int | None, bool], None] = {}
        known: set[str] = set()
        acked: dict[str, list[tuple[Pos, Pos]]] = {}
        version: str | None = None
        for i in range(rest.num_rows):
            kind = cols["_k"][i]
            v1, v2, v3, v4, v5 = (cols[f"v{k}"][i] for k in range(1, 6))
            if kind == _KIND_ML:
                ml = (v1, v2, v3, v4, v5)
                version = cols["_pa_ver"][i]
            elif kind == _KIND_LEDGER and v1 is not None:
                ledgers.append((v1, v2 or 0, v3))
            elif kind == _KIND_REQUEST:
                requests[(cols[_SUB][i], cols[_TS][i], bool(cols[_RB][i]))] = None
            elif kind == _KIND_CURSOR:
                known.add(cols[_SUB][i])
            elif kind == _KIND_ACK and None not in (v1, v2, v3, v4):
                acked.setdefault(cols[_SUB][i], []).append(((v1, v2), (v3, v4)))
        r = rules if rules is not None else find_rules(version or DEFAULT_PULSAR_VERSION, skew_ms)
        model = None if ml is None else _model(r, ml, ledgers, entry_rows)
        series = model.live_series() if model is not None else ([], np.empty(0, dtype=np.int64))
        out: list[dict[str, Any]] = []
        for sub, t, rb in requests:
            row: dict[str, Any] = {"cluster": cluster, "topic": topic, _SUB: sub, _TS: t, _RB: rb}
            refused = _refusal(ml, model, sub, t, rb, known)
            if refused is not None:
                res = _Found(None, None, None, None, None, refused)
            else:
                assert model is not None and ml is not None and t is not None and sub is not None
                when = ml[4] - t * 1000 if rb else t
                res = _reset_by_time(model, when, r, acked.get(sub, []), topic, series)
            for name in _POS_FIELDS:
                p = getattr(res, name)
                row[f"_pa_{name}_l"], row[f"_pa_{name}_e"] = (None, None) if p is None else p
            row["_pa_mono"], row["_pa_serr"], row["_pa_rfail"] = res.monotonic, res.error, res.read_failed
            out.append(row)
        return pa.Table.from_pylist(out, schema=_ARROW_OUT)

    return fn


def _refusal(
    ml: tuple[Any, ...] | None,
    model: _Topic | None,
    sub: str | None,
    t: int | None,
    rb: bool,
    known: set[str],
) -> str | None:
    """Why a request cannot be searched (missing topic, cursor, timestamp, LAC or export time), else None."""
    if ml is None:
        return MISSING_TOPIC
    if not rb and sub not in known:
        return MISSING_CURSOR
    if t is None:
        return "timestamp_ms is null"
    if model is None:
        return _NO_LAC
    if rb and ml[4] is None:
        return _NO_EXPORT_TIME
    return None


def _model(
    rules: FindRules, ml: tuple[Any, ...], ledgers: list[tuple[int, int, int | None]], entry_rows: pa.Table
) -> _Topic | None:
    """The per-topic model; None when the managed ledger has no LAC. The entries' compared timestamp is
    ``v4`` (broker-entry timestamp when present) or ``v3`` (publish time) per ``rules``."""
    if ml[2] is None or ml[3] is None:
        return None
    ledgers.sort()
    exp_ids: dict[int, np.ndarray] = {}
    exp_ts: dict[int, np.ndarray] = {}
    if entry_rows.num_rows:
        lids = entry_rows.column("v1").to_numpy(zero_copy_only=False).astype(np.int64)
        eids = entry_rows.column("v2").to_numpy(zero_copy_only=False).astype(np.int64)
        stamp_column = "v4" if rules.broker_timestamp else "v3"
        stamps = entry_rows.column(stamp_column).to_numpy(zero_copy_only=False).astype(np.int64)
        order = np.lexsort((eids, lids))
        lids, eids, stamps = lids[order], eids[order], stamps[order]
        first = np.ones(len(lids), dtype=bool)  # duplicates (several exports / messages of a batch): keep one
        first[1:] = (lids[1:] != lids[:-1]) | (eids[1:] != eids[:-1])
        lids, eids, stamps = lids[first], eids[first], stamps[first]
        bounds = np.nonzero(np.diff(lids))[0] + 1
        for part_l, part_e, part_t in zip(
            np.split(lids, bounds), np.split(eids, bounds), np.split(stamps, bounds), strict=True
        ):
            exp_ids[int(part_l[0])] = part_e
            exp_ts[int(part_l[0])] = part_t
    return _Topic(
        beh=rules.beh,
        ids=[lid for lid, _e, _c in ledgers],
        listed={lid: e for lid, e, _c in ledgers},
        closed_ms={lid: c for lid, _e, c in ledgers},
        cur_id=ml[0],
        cle=ml[1] or 0,
        lac=(ml[2], ml[3]),
        exp_ids=exp_ids,
        exp_ts=exp_ts,
    )


def _ms(df: DataFrame, name: str) -> Column:
    """Epoch milliseconds of a timestamp column (null when the column is absent)."""
    if name not in df.columns:
        return F.lit(None).cast("long")
    return F.unix_millis(F.col(name).cast("timestamp"))


def _entry_stamps(entries: DataFrame) -> DataFrame:
    """``cluster, topic, ledger_id, entry_id, ts, broker_ts``: the timestamps the finder compares, one row
    per input row - the publish time, and the broker-entry timestamp when present (PIP-70 versions, else
    the publish time). An ``entries`` table; a ``messages`` table works too (publish times only)."""
    if "publish_time_ms" in entries.columns:
        publish = F.col("publish_time_ms").cast("long")
    else:
        publish = _ms(entries, "publish_time")
    broker = F.coalesce(_ms(entries, "broker_timestamp"), publish)
    return entries.select(
        *KEY,
        F.col("ledger_id").cast("long"),
        F.col("entry_id").cast("long"),
        publish.alias("ts"),
        broker.alias("broker_ts"),
    )


def _search(
    keys: DataFrame,
    cursors: DataFrame | None,
    ledgers: DataFrame,
    managed_ledgers: DataFrame,
    entries: DataFrame,
    rules: FindRules | None,
    skew_ms: int | None,
) -> DataFrame:
    """Run the time search for ``keys`` (``cluster, topic`` + :data:`_SUB`, :data:`_TS`, :data:`_RB`; may
    repeat); one row per distinct key, see :data:`_SEARCH_OUT`.

    Only the requested topics are shipped to the per-topic function: every input is semi-joined with the
    broadcast request keys (requests are few next to entries), so the only shuffle is the grouping.
    ``cursors`` (reset by time) adds the names of the topics' cursors and, for brokers whose search asks the
    cursor (:func:`find_reads_from_ledger` false), their acknowledged ranges. ``rules`` None: each topic's
    own version (the ``pulsar_version`` of its managed-ledger row) picks them inside the per-topic function.
    """
    topics = F.broadcast(keys.select(*KEY))

    def shaped(df: DataFrame, kind: str, values: dict[str, Column], semi: bool = True) -> DataFrame:
        cols = [F.col(c) for c in KEY] + [F.lit(kind).alias("_k")]
        for name, dtype in _SEARCH_IN[1:]:
            cols.append(values.get(name, F.lit(None)).cast(dtype).alias(name))
        source = df.join(topics, on=list(KEY), how="left_semi") if semi else df
        return source.select(*cols)

    lac = as_position(F.col("last_confirmed_entry"))
    parts = [
        shaped(
            managed_ledgers,
            _KIND_ML,
            {
                "v1": F.col("current_ledger_id"),
                "v2": F.col("current_ledger_entries"),
                "v3": lac["ledger_id"],
                "v4": lac["entry_id"],
                "v5": _ms(managed_ledgers, "exported_at"),
                "_pa_ver": F.col("pulsar_version") if rules is None else F.lit(None),
            },
        ),
        shaped(
            ledgers,
            _KIND_LEDGER,
            {"v1": F.col("ledger_id"), "v2": F.col("entries"), "v3": _ms(ledgers, "closed_at")},
        ),
        shaped(
            _entry_stamps(entries),
            _KIND_ENTRY,
            {"v1": F.col("ledger_id"), "v2": F.col("entry_id"), "v3": F.col("ts"), "v4": F.col("broker_ts")},
        ),
        shaped(keys, _KIND_REQUEST, {name: F.col(name) for name in (_SUB, _TS, _RB)}, semi=False),
    ]
    if cursors is not None:
        # the cursors of the requested topics (the function ignores the ones nobody asked for)
        mine = cursors.select(*KEY, F.col("cursor_name").cast("string"), "individually_deleted").join(
            topics, on=list(KEY), how="left_semi"
        )
        parts.append(shaped(mine, _KIND_CURSOR, {_SUB: F.col("cursor_name")}, semi=False))
        if rules is None or not rules.from_ledger:
            ranges = mine.select(*KEY, "cursor_name", F.explode("individually_deleted").alias("_r"))
            values = {
                _SUB: F.col("cursor_name"),
                "v1": F.col("_r.lower.ledger_id"),
                "v2": F.col("_r.lower.entry_id"),
                "v3": F.col("_r.upper.ledger_id"),
                "v4": F.col("_r.upper.entry_id"),
            }
            parts.append(shaped(ranges, _KIND_ACK, values, semi=False))
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part)
    return union.groupBy(*KEY).applyInArrow(_search_fn(rules, skew_ms), _SEARCH_OUT)


def _pos_of(name: str) -> str:
    """Position struct from the ``_pa_{name}_l/_e`` columns of the search output (null when absent)."""
    led, ent = f"`_pa_{name}_l`", f"`_pa_{name}_e`"
    return f"IF({led} IS NULL, {NULL_POS_SQL}, {pos_sql(led, ent)})"


# --- §7.2 / §7.3 reader start positions --------------------------------------------------------------------


def _opt(df: DataFrame, name: str, default: Column, dtype: str) -> Column:
    """An optional request column cast to ``dtype``; ``default`` when it is absent or null."""
    value = F.col(f"`{name}`").cast(dtype) if name in df.columns else default.cast(dtype)
    return F.coalesce(value, default.cast(dtype))


def _start_message_id(requests: DataFrame) -> Column:
    """``start_message_id`` normalised to :data:`MESSAGE_ID_SQL_TYPE` (a missing batch index is -1)."""
    if "start_message_id" not in requests.columns:
        return F.lit(None).cast(MESSAGE_ID_SQL_TYPE)
    sid = F.col("start_message_id")
    names = set(requests.schema["start_message_id"].dataType.fieldNames())  # type: ignore[attr-defined]
    bi = sid["batch_index"].cast("int") if "batch_index" in names else F.lit(NOT_BATCHED)
    built = F.struct(
        sid["ledger_id"].cast("long").alias("ledger_id"),
        sid["entry_id"].cast("long").alias("entry_id"),
        F.coalesce(bi, F.lit(NOT_BATCHED)).alias("batch_index"),
    )
    return F.when(sid.isNull(), F.lit(None).cast(MESSAGE_ID_SQL_TYPE)).otherwise(built)


def _messages_view(messages: DataFrame, topics: DataFrame) -> DataFrame:
    """Messages a client can receive, as a seek view keyed by ``(ledger, entry, batch index)``.

    Markers never reach clients (docs §4.3, §8.3: the dispatcher filters them) and ``compacted_out``
    placeholder slots are skipped by the client (§5.5), so both are left out.
    """
    keep = F.lit(True)
    if "marker_type" in messages.columns:
        keep = keep & F.col("marker_type").isNull()
    if "compacted_out" in messages.columns:
        keep = keep & ~F.coalesce(F.col("compacted_out").cast("boolean"), F.lit(False))
    m = messages.join(topics, on=list(KEY), how="left_semi").where(keep)
    led, ent = F.col("ledger_id").cast("long"), F.col("entry_id").cast("long")
    bi = F.coalesce(F.col("batch_index").cast("int"), F.lit(NOT_BATCHED))
    return m.select(
        *KEY,
        # nullable fields: the probe keys the seek casts to this type may be null
        F.struct(led.alias("l"), ent.alias("e"), bi.cast("long").alias("b"))
        .cast(_MESSAGE_KEY_TYPE)
        .alias("_key"),
        F.lit(0).cast("long").alias("_tb"),
        F.struct(led.alias("ledger_id"), ent.alias("entry_id"), bi.alias("batch_index")).alias("_payload"),
    )


_MESSAGE_KEY_TYPE = "STRUCT<l: BIGINT, e: BIGINT, b: BIGINT>"


def _message_key_sql(ledger: str, entry: str, batch: str) -> str:
    return (
        f"named_struct('l', CAST({ledger} AS BIGINT), 'e', CAST({entry} AS BIGINT), "
        f"'b', CAST({batch} AS BIGINT))"
    )


def reader_start_positions(
    requests: DataFrame,
    ledgers: DataFrame,
    managed_ledgers: DataFrame,
    messages: DataFrame | None = None,
    pulsar_version: str | None = DEFAULT_PULSAR_VERSION,
    *,
    entries: DataFrame | None = None,
    ledger_close_clock_skew_ms: int | None = DEFAULT_LEDGER_CLOSE_CLOCK_SKEW_MS,
    basis: CursorBasis | None = None,
) -> DataFrame:
    """Where a new reader's non-durable cursor starts and what it delivers first (docs §7.2, §7.3).

    One row per request: ``cluster, topic, request_id, start_kind`` (``message_id``|``earliest``|``latest``),
    ``start_message_id`` (``struct<ledger_id, entry_id, batch_index>``, batch index -1 = not batched;
    read for ``message_id``) and optionally ``inclusive`` (default false), ``rollback_seconds`` (default 0),
    ``read_compacted`` (default false), ``initial_position`` (``Latest``|``Earliest``, default ``Latest``).
    Other columns are carried through. Adds:

    * ``broker_start_position``: the start the broker hands to the cursor: the id stepped back one entry
      when ``ledger, entry >= 0`` (2.0: batched ids only), ``(-1,-1)`` for earliest, ``(MAX, MAX-1)`` for
      latest; with rollback the Java client sends earliest (docs §7.2, §7.5);
    * ``mark_delete_position`` / ``read_position``: the ``NonDurableCursorImpl`` state. A start beyond LAC
      takes ``initial_position`` (``Latest``: ``md = LAC``, ``rp = nextValid(LAC)``; ``Earliest``:
      ``md = getFirstPosition()``, ``rp = nextValid(md)``); ledger -1 recovers from the first position;
      otherwise ``recover(start)``: ``rp = start.next`` with ``read_compacted`` else ``nextValid(start)``,
      ``md = previous(rp)`` (3.x, :func:`reader_md_is_previous_of_read`) or ``md = start`` (older).
      With ``rollback_seconds > 0`` the cursor is created from earliest and then reset by publish time at
      ``managed_ledgers.exported_at - rollback_seconds * 1000`` (the search of
      :func:`reset_cursor_by_time_plan` on a cursor without acknowledgements); when a read of that search
      fails the broker only logs it and the positions stay those of the earliest cursor (docs §7.5);
    * ``first_delivered``: ``struct<ledger_id, entry_id, batch_index>`` of the first message the client
      application receives: the first ``messages`` row at or after ``read_position`` that is neither a
      marker nor a ``compacted_out`` slot and survives the client's filter of the start entry (``message_id``
      only, docs §7.3): in a batched entry the indexes ``<= batch_index`` are dropped (``< batch_index``
      with ``inclusive``); the message of a non-batched entry is dropped unless ``inclusive``, whatever
      batch index the start id carries. With rollback the Java client starts from earliest, so nothing is
      filtered. Null when nothing would be delivered yet, when ``messages`` is None, on error. Not modelled:
      compacted-ledger reads of ``read_compacted`` readers (§5.6), aborted transactions (§8), chunked
      messages. "latest" with ``inclusive`` delivers nothing yet, as the Java client at creation (it only
      seeks to the last message inside ``hasMessageAvailable()``, docs §7.3);
    * ``rollback_failure``: null, or the failure of the reset by publish time that the broker logged while
      it still created the reader (``rollback_seconds > 0`` only);
    * ``error``: null, or why the subscribe fails (unknown ``start_kind`` / ``initial_position``, null
      ``start_message_id``, topic without managed ledger, no ledgers, a rollback search that cannot be
      answered from the export or never completes in the broker, ...).

    ``entries`` (optional keyword) supplies the entry timestamps of the rollback search (broker-entry
    timestamps included); without it they come from ``messages`` (publish times). ``basis`` (optional
    keyword): a :func:`pulsar_model.positions.cursor_basis` of these same ledgers and managed ledgers, whose
    ledger view and topic context are used instead of building them. Pure and lazy.
    """
    flags = sql_flags(pulsar_version)
    rules = None if pulsar_version is None else find_rules(pulsar_version, ledger_close_clock_skew_ms)
    if basis is None:
        env = _Env.build(ledgers, managed_ledgers, flags)
    else:
        basis.check(pulsar_version)
        env = basis.env
    beh = env.beh
    df = _by_topic(requests).select(
        "*",
        F.col("start_kind").cast("string").alias("_pa_kind"),
        _start_message_id(requests).alias("_pa_sid"),
        _opt(requests, "inclusive", F.lit(False), "boolean").alias("_pa_incl"),
        _opt(requests, "rollback_seconds", F.lit(0), "long").alias("_pa_rb"),
        _opt(requests, "read_compacted", F.lit(False), "boolean").alias("_pa_rc"),
        _opt(requests, "initial_position", F.lit(INITIAL_LATEST), "string").alias("_pa_ip"),
    )
    df = env.with_ctx(df)
    sid, kind, ip = ref("_pa_sid"), ref("_pa_kind"), ref("_pa_ip")
    rolled = "(`_pa_rb` > 0)"
    # ReaderBuilderImpl: a rollback duration makes the client subscribe from MessageId.earliest (docs §7.5)
    df = df.select("*", E(f"IF({rolled}, '{START_EARLIEST}', {kind})").alias("_pa_ekind"))
    ekind = ref("_pa_ekind")
    is_mid = f"({ekind} = '{START_MESSAGE_ID}')"
    raw = case(
        (is_mid, pos_sql(fld(sid, "ledger_id"), fld(sid, "entry_id"))),
        (f"{ekind} = '{START_EARLIEST}'", pos_sql(str(EARLIEST[0]), str(EARLIEST[1]))),
        (f"{ekind} = '{START_LATEST}'", pos_sql(str(LATEST[0]), str(LATEST[1]))),
        otherwise=NULL_POS_SQL,
    )
    df = df.select("*", E(raw).alias("_pa_raw"))
    raw_l, raw_e = fld(ref("_pa_raw"), "ledger_id"), fld(ref("_pa_raw"), "entry_id")
    step = f"({raw_l} >= 0 AND {raw_e} >= 0)"
    # 1.x/2.0 stepped back only batched start ids (reader_steps_back_every_start_id)
    step = beh.pick(
        "reader_steps_back_every_start_id", step, f"({step} AND {is_mid} AND {fld(sid, 'batch_index')} >= 0)"
    )
    stepped = pos_sql(raw_l, f"{raw_e} - 1")
    df = df.select("*", E(f"IF(coalesce({step}, false), {stepped}, `_pa_raw`)").alias("_pa_start"))
    st = ref("_pa_start")
    df = df.select("*", E(f"coalesce({st} > {LAC}, false)").alias("_pa_beyond"))
    beyond = ref("_pa_beyond")
    first = first_position_sql(X)
    # previous(getFirstPosition()) == getFirstPosition(): no ledger lies before the first one (§1.3, §1.6)
    p = case(
        (f"{beyond} AND {ip} = '{INITIAL_EARLIEST}'", first),
        (beyond, LAC),
        (f"{fld(st, 'ledger_id')} = {EARLIEST[0]}", first),
        otherwise=st,
    )
    df = df.select("*", E(p).alias("_pa_p"))
    df = env.lookup(df, fld(ref("_pa_p"), "ledger_id"), "_pa_lk_p")
    pp, lk_p = ref("_pa_p"), ref("_pa_lk_p")
    df = df.select("*", E(next_position_is_valid_sql(pp, lk_p, X, beh)).alias("_pa_qv"))
    nv = next_valid_position_sql(pp, lk_p, X, beh, q_valid="`_pa_qv`")
    p_next = pos_sql(fld(pp, "ledger_id"), f"{fld(pp, 'entry_id')} + 1")
    compacted = f"(NOT {beyond} AND `_pa_rc`)"
    # the read position's ledger lookup follows from p's (same ledger, or the next-valid one): no second seek
    rp_lookup = f"IF({compacted}, {lk_p}, {next_valid_lookup_sql('`_pa_qv`', lk_p, X, beh)})"
    df = df.select(
        "*", E(f"IF({compacted}, {p_next}, {nv})").alias("_pa_rp0"), E(rp_lookup).alias("_pa_lk_rp")
    )
    recovered_md = beh.pick(
        "reader_md_is_previous_of_read", previous_position_sql(ref("_pa_rp0"), ref("_pa_lk_rp"), X), pp
    )
    df = df.select("*", E(f"IF({beyond}, {pp}, {recovered_md})").alias("_pa_md0"))
    df = _with_rollback(
        df, requests, ledgers, managed_ledgers, messages, entries, rules, ledger_close_clock_skew_ms
    )
    kind_error = (
        f"IF(coalesce({kind} IN ('{START_MESSAGE_ID}', '{START_EARLIEST}', '{START_LATEST}'), false), "
        f"{NULL_STRING}, concat('unknown start_kind ', coalesce({kind}, 'null'), "
        f"'; expected {START_MESSAGE_ID}|{START_EARLIEST}|{START_LATEST}'))"
    )
    ip_error = (
        f"IF(coalesce({ip} IN ('{INITIAL_LATEST}', '{INITIAL_EARLIEST}'), false), {NULL_STRING}, "
        f"concat('unknown initial_position ', coalesce({ip}, 'null'), "
        f"'; expected {INITIAL_LATEST}|{INITIAL_EARLIEST}'))"
    )
    mid_requested = f"({kind} = '{START_MESSAGE_ID}')"
    null_id = f"{mid_requested} AND ({fld(sid, 'ledger_id')} IS NULL OR {fld(sid, 'entry_id')} IS NULL)"
    # a failed read of the rollback search is only logged by PersistentTopic.resetSubscriptionCursor: the
    # reader keeps the cursor created from its start (docs §7.5); any other failure fails the subscribe
    reset_failed = f"({rolled} AND `_pa_rb_rfail`)"
    error = _coalesce_sql(
        MISSING_TOPIC_SQL,
        kind_error,
        _err_if(null_id, "start_message_id (ledger_id, entry_id) is null for start_kind 'message_id'"),
        ip_error,
        _err_if(f"{LAC} IS NULL", _NO_LAC),
        _err_if("`_pa_p` IS NULL OR `_pa_rp0` IS NULL", _NO_FIRST_POSITION),
        f"IF({rolled} AND NOT `_pa_rb_rfail`, `_pa_rb_err`, {NULL_STRING})",
    )
    reset = f"({rolled} AND NOT {reset_failed})"
    df = df.select(
        "*",
        E(error).alias("_pa_err"),
        E(f"IF({reset}, `_pa_rb_md`, `_pa_md0`)").alias("_pa_md"),
        E(f"IF({reset}, `_pa_rb_rp`, `_pa_rp0`)").alias("_pa_rp"),
    )
    added = [
        "broker_start_position",
        "mark_delete_position",
        "read_position",
        "first_delivered",
        "rollback_failure",
        "error",
    ]
    ok = "(`_pa_err` IS NULL)"
    if messages is None:
        delivered = F.lit(None).cast(MESSAGE_ID_SQL_TYPE)
    else:
        df, delivered = _first_delivered(df, messages, requests)
    return df.select(
        *_keep(requests.columns, added),
        E(f"IF({ok}, `_pa_start`, {NULL_POS_SQL})").alias("broker_start_position"),
        E(f"IF({ok}, `_pa_md`, {NULL_POS_SQL})").alias("mark_delete_position"),
        E(f"IF({ok}, `_pa_rp`, {NULL_POS_SQL})").alias("read_position"),
        F.when(E(ok), delivered).alias("first_delivered"),
        E(f"IF({ok} AND {reset_failed}, `_pa_rb_err`, {NULL_STRING})").alias("rollback_failure"),
        F.col("_pa_err").alias("error"),
    )


def _with_rollback(
    df: DataFrame,
    requests: DataFrame,
    ledgers: DataFrame,
    managed_ledgers: DataFrame,
    messages: DataFrame | None,
    entries: DataFrame | None,
    rules: FindRules | None,
    skew_ms: int | None,
) -> DataFrame:
    """Add ``_pa_rb_md``, ``_pa_rb_rp``, ``_pa_rb_err``, ``_pa_rb_rfail``: the reset by publish time of
    rollback requests.

    ``getNonDurableSubscription`` resets the fresh cursor to ``now - rollback_seconds * 1000`` (docs §7.5);
    "now" is the export time. ``_pa_rb_rfail`` is true when the error is a failed read of the search: the
    broker only logs it and keeps the cursor it created. The search branch is only built when the requests
    have the column.
    """
    none = [
        E(NULL_POS_SQL).alias("_pa_rb_md"),
        E(NULL_POS_SQL).alias("_pa_rb_rp"),
    ]
    no_read_failure = F.lit(False).alias("_pa_rb_rfail")
    if "rollback_seconds" not in requests.columns:
        return df.select("*", *none, F.lit(None).cast("string").alias("_pa_rb_err"), no_read_failure)
    stamps = entries if entries is not None else messages
    if stamps is None:
        message = "rollback_seconds needs the entries or messages of the topic (their publish times)"
        return df.select("*", *none, F.lit(message).alias("_pa_rb_err"), no_read_failure)
    # keys from the raw requests (not from ``df``): the search must not re-run the cursor mapping's plan
    rollback = F.col("rollback_seconds").cast("long")
    keys = requests.where(rollback > 0).select(
        *KEY, F.lit("").alias(_SUB), rollback.alias(_TS), F.lit(True).alias(_RB)
    )
    found = _search(keys, None, ledgers, managed_ledgers, stamps, rules, skew_ms).select(
        *KEY,
        F.col(_TS).alias("_pa_rb"),
        E(_pos_of("md")).alias("_pa_rb_md"),
        E(_pos_of("rp")).alias("_pa_rb_rp"),
        F.col("_pa_serr").alias("_pa_rb_err"),
        F.coalesce(F.col("_pa_rfail"), F.lit(False)).alias("_pa_rb_rfail"),
    )
    # one row per requested (topic, rollback): few, so broadcast instead of shuffling the requests again
    joined = df.join(F.broadcast(found), on=[*KEY, "_pa_rb"], how="left")
    return joined.select(
        *[F.col(f"`{c}`") for c in joined.columns if c != "_pa_rb_rfail"],
        F.coalesce(F.col("_pa_rb_rfail"), F.lit(False)).alias("_pa_rb_rfail"),
    )


def _first_delivered(df: DataFrame, messages: DataFrame, requests: DataFrame) -> tuple[DataFrame, Column]:
    """The first message the client keeps (docs §7.3): one seek for the first message at or after a key.

    The key is the read position. A reader that filters (``message_id`` without rollback) and reads its start
    entry ``(L, E)`` first (``rp = (L, E)``: the broker's step back) seeks from a key inside that entry
    instead, chosen by how ``ConsumerImpl`` treats the entry: a batched entry keeps the indexes after the
    start id's batch index (``bi + 1``; from ``bi`` when inclusive), a non-batched one keeps its message only
    when inclusive, whatever batch index the start id carries (``isPriorEntryIndex`` compares entry ids). An
    entry is batched when its messages carry batch indexes (``num_messages_in_batch`` present); that is
    looked up per requested start entry. A read position past the start entry reads nothing of it; one
    before it only happens for a start beyond LAC, whose entry is not in the export.
    """
    # the requested topics are few next to the messages: broadcast (a sort-merge semi join shuffled the
    # whole message dump first, tier l: 48M messages for 2.3M kept); a semi join needs no distinct
    view = _messages_view(messages, F.broadcast(requests.select(*KEY)))
    df = _with_start_entry_batched(df, view, requests)
    rp, sid = ref("_pa_rp"), ref("_pa_sid")
    at_start = (
        f"(`_pa_ekind` = '{START_MESSAGE_ID}' "
        f"AND {fld(rp, 'ledger_id')} = {fld(sid, 'ledger_id')} "
        f"AND {fld(rp, 'entry_id')} = {fld(sid, 'entry_id')})"
    )
    # BIGINT before the + 1: a batch index of Integer.MAX_VALUE must not overflow under ANSI
    bi = f"CAST({fld(sid, 'batch_index')} AS BIGINT)"
    batched_from = f"IF(`_pa_incl`, {bi}, {bi} + 1)"
    single_from = f"IF(`_pa_incl`, {NOT_BATCHED}, {NOT_BATCHED + 1})"
    threshold = _message_key_sql(
        fld(sid, "ledger_id"), fld(sid, "entry_id"), f"IF(`_pa_start_batched`, {batched_from}, {single_from})"
    )
    from_rp = _message_key_sql(fld(rp, "ledger_id"), fld(rp, "entry_id"), str(_INT_MIN))
    key = f"IF(`_pa_err` IS NOT NULL, NULL, IF(coalesce({at_start}, false), {threshold}, {from_rp}))"
    df = _seek(df, E(key), view, "_pa_first", mode="ceil")
    return df, E(f"CAST(`_pa_first` AS {MESSAGE_ID_SQL_TYPE})")


def _with_start_entry_batched(df: DataFrame, view: DataFrame, requests: DataFrame) -> DataFrame:
    """Add ``_pa_start_batched``: the start id's entry holds a batch (false when it has no message).

    The start entries come from the raw requests (few), the messages of those entries from a broadcast semi
    join of the message view: no shuffle of the messages, and the cursor mapping's plan is not re-run.
    """
    if "start_message_id" not in requests.columns:
        return df.select("*", F.lit(False).alias("_pa_start_batched"))
    sid = _start_message_id(requests)
    starts = (
        requests.where(F.col("start_kind").cast("string") == START_MESSAGE_ID)
        .select(*KEY, sid["ledger_id"].alias("_pa_bl"), sid["entry_id"].alias("_pa_be"))
        .where(F.col("_pa_bl").isNotNull() & F.col("_pa_be").isNotNull())
    )  # only a semi join reads them: repeated start entries need no distinct (a shuffle)
    entries = (
        view.select(
            *KEY,
            F.col("_key.l").alias("_pa_bl"),
            F.col("_key.e").alias("_pa_be"),
            (F.col("_key.b") >= 0).alias("_pa_bb"),
        )
        .join(F.broadcast(starts), on=[*KEY, "_pa_bl", "_pa_be"], how="left_semi")
        .groupBy(*KEY, "_pa_bl", "_pa_be")
        .agg(F.max("_pa_bb").alias("_pa_bb"))
        .select(*[F.col(c).alias(f"_pa_bk_{c}") for c in KEY], "_pa_bl", "_pa_be", "_pa_bb")
    )
    s = F.col("_pa_sid")
    # renamed keys: the lookup descends from the requests too, a join on shared names would be ambiguous
    cond = (
        (F.col("cluster") == F.col("_pa_bk_cluster"))
        & (F.col("topic") == F.col("_pa_bk_topic"))
        & (s["ledger_id"] == F.col("_pa_bl"))
        & (s["entry_id"] == F.col("_pa_be"))
    )
    joined = df.join(F.broadcast(entries), on=cond, how="left")
    return joined.select(
        *[F.col(f"`{c}`") for c in df.columns],
        F.coalesce(F.col("_pa_bb"), F.lit(False)).alias("_pa_start_batched"),
    )


# --- reset-cursor by publish time ---------------------------------------------------------------------------


def reset_cursor_by_time_plan(
    requests: DataFrame,
    cursors: DataFrame,
    ledgers: DataFrame,
    managed_ledgers: DataFrame,
    entries: DataFrame,
    pulsar_version: str | None = DEFAULT_PULSAR_VERSION,
    *,
    ledger_close_clock_skew_ms: int | None = DEFAULT_LEDGER_CLOSE_CLOCK_SKEW_MS,
) -> DataFrame:
    """Dry-run ``pulsar-admin topics reset-cursor --time`` (``PersistentSubscription.resetCursor(long)``).

    One row per request (``cluster, topic, cursor_name, timestamp_ms`` + carried columns). The broker's
    search is emulated exactly - the entries it probes, in its order, with the version's rules (module doc,
    :class:`FindRules`) - per topic in ``applyInArrow``. ``entries`` gives each entry's ``publish_time_ms``
    and ``broker_timestamp`` (compared instead when present, 2.8+); ``ledgers.closed_at`` the close times
    of the 4.0.3+ narrowing (``ledger_close_clock_skew_ms``; ``None`` disables it). Adds:

    * ``found_position``: the newest entry published before ``timestamp_ms`` as the binary search finds it
      (null when it finds none);
    * ``linear_scan_position``: the newest exported entry ``<= LAC`` that still exists and matches - what a
      linear scan answers; it differs from ``found_position`` only when timestamps are not monotone or the
      4.0.3+ narrowing cut a matching entry away;
    * ``publish_times_monotonic``: false when such an entry has a smaller compared timestamp (publish time,
      or broker timestamp) than an earlier one;
    * ``mark_delete_position``, ``read_position``: after the reset to ``found.getNext()`` (or
      ``(first ledger, 0)`` when nothing matched) moved to the next valid position when invalid, with
      ``md = previous(rp)``; ``individually_deleted``: empty;
    * ``error``: unknown cursor or topic, null ``timestamp_ms``, no ledgers, a broker read that would fail,
      or "entries not exported for ..." when an entry of the searched range (or one the search reads) is
      missing from ``entries``; the positions are null then (the linear scan and the monotonic flag are
      still given when the topic and cursor exist).

    Not modelled: the compaction-horizon ``forceReset`` (targets inside the compacted range are used as they
    are) and the autoSkipNonRecoverableData retries of failed reads. Pure and lazy.
    """
    rules = None if pulsar_version is None else find_rules(pulsar_version, ledger_close_clock_skew_ms)
    req = requests.select(
        "*", F.col("cursor_name").cast("string").alias(_SUB), F.col("timestamp_ms").cast("long").alias(_TS)
    )
    keys = req.select(*KEY, _SUB, _TS, F.lit(False).alias(_RB))
    found = _search(keys, cursors, ledgers, managed_ledgers, entries, rules, ledger_close_clock_skew_ms)
    # renamed key columns: the search output descends from the requests, so a join on shared names would
    # be an ambiguous self join
    found = found.select(
        *[F.col(c).alias(f"_pa_k_{c}") for c in (*KEY, _SUB, _TS)],
        *[
            F.col(f.name)
            for f in _SEARCH_OUT.fields
            if f.name.startswith("_pa_") and f.name not in (_SUB, _TS, _RB)
        ],
    )
    cond = (
        (F.col("cluster") == F.col("_pa_k_cluster"))
        & (F.col("topic") == F.col("_pa_k_topic"))
        & F.col(_SUB).eqNullSafe(F.col(f"_pa_k_{_SUB}"))
        & F.col(_TS).eqNullSafe(F.col(f"_pa_k_{_TS}"))
    )
    # the search answers each distinct request once: a broadcast, not another shuffle of the requests
    df = req.join(F.broadcast(found), on=cond, how="left")
    ok = "(`_pa_serr` IS NULL)"
    searched = "(`_pa_mono` IS NOT NULL)"
    added = [
        "found_position",
        "linear_scan_position",
        "publish_times_monotonic",
        "mark_delete_position",
        "read_position",
        "individually_deleted",
        "error",
    ]
    return df.select(
        *_keep(requests.columns, added),
        E(f"IF({ok}, {_pos_of('found')}, {NULL_POS_SQL})").alias("found_position"),
        E(f"IF({searched}, {_pos_of('linear')}, {NULL_POS_SQL})").alias("linear_scan_position"),
        F.col("_pa_mono").alias("publish_times_monotonic"),
        E(f"IF({ok}, {_pos_of('md')}, {NULL_POS_SQL})").alias("mark_delete_position"),
        E(f"IF({ok}, {_pos_of('rp')}, {NULL_POS_SQL})").alias("read_position"),
        E(f"IF({ok}, {_EMPTY_RANGES_SQL}, NULL)").alias("individually_deleted"),
        F.col("_pa_serr").alias("error"),
    )
