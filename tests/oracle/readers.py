"""Reference model of reader start positions and the reset-cursor-by-time search (docs §7, §3.7, §1.11).

Plain Python, one managed ledger at a time, written from docs §7.2/§7.3 and the broker flow as read in
apache/pulsar (``PersistentSubscription.resetCursor(long)`` -> ``PersistentMessageFinder`` ->
``ManagedCursorImpl.asyncFindNewestMatching`` -> ``OpFindNewest``, then ``asyncResetCursor``). The
managed-ledger arithmetic (previous / next valid / getPositionAfterN / counts) comes from
:mod:`tests.oracle.managed_ledger`; the reader mapping, the client filter and the search are written here,
as a literal walk through the Java call sequence (state machine, callbacks flattened into a loop).

Where the broker would fail, the functions raise :class:`OracleError` subclasses.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from tests.oracle.managed_ledger import (
    LATEST,
    IdmRange,
    ManagedLedger,
    OracleError,
    Position,
    Range,
    Semantics,
    get_first_position,
    get_next_valid_position,
    get_previous_position,
    is_valid_position,
    number_of_entries,
    position_after_n,
    semantics_for_version,
)

MessageId = tuple[int, int, int]  # (ledger, entry, batch index); batch index -1 = not batched
Narrowing = Literal["none", "first_entry", "last_entry"]


class OracleReadError(OracleError):
    """The broker reads an entry that does not exist (or that the export lacks)."""


class OracleNotExportedError(OracleReadError):
    """An entry the search needs is missing from the export."""


class OracleRequestError(OracleError):
    """The request itself is refused (unknown kind, null id, no ledgers, ...)."""


# --------------------------------------------------------------------------------------------------
# Version rules (release boundaries as researched; see the transform's docstrings for the sources)
# --------------------------------------------------------------------------------------------------


def _v(version: str) -> tuple[int, int, int]:
    m = re.match(r"^(\d+)\.(\d+)\.(\d+)$", version.strip())
    assert m, version
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def _from(version: str, first: tuple[int, int, int], patches: Mapping[tuple[int, int], int]) -> bool:
    v = _v(version)
    if v >= first:
        return True
    return (v[0], v[1]) in patches and v[2] >= patches[(v[0], v[1])]


@dataclass(frozen=True)
class Rules:
    version: str
    semantics: Semantics  # docs §1: the managed-ledger arithmetic of the version
    position_family: Literal["3x", "3x-lac-next", "2x-old"]
    count_family: Literal["3x", "4x"]
    steps_back_all: bool  # docs §7.2: before 2.4.0 (#4331) only batched ids step back
    md_is_previous: bool  # docs §7.2: md = previous(rp) with apache/pulsar#21248; older md = p
    strictly_before: bool  # finder: ts < t (2.5.1+) else publish <= t
    broker_ts: bool  # finder compares the broker-entry timestamp when there is one (2.8+)
    ledger_has_more: bool  # OpFindNewest.find() asks the ledger (newer) or the cursor (older)
    closed_range: bool  # asyncFindNewestMatching(start, end): max = count([start, end]) (4.0.3+)
    narrowing: Narrowing
    clamp_check_last: bool


def rules_for(version: str) -> Rules:
    base = semantics_for_version(version)
    four_x = base.count_family == "4x"
    # docs §7.5: the ranged search with #23919 from 4.0.3 and 3.3.7; last-entry start from 4.0.5 and 3.3.7
    closed = _from(version, (4, 1, 0), {(4, 0): 3, (3, 3): 7})
    narrowing: Narrowing = "none"
    if closed:
        narrowing = "last_entry" if _from(version, (4, 1, 0), {(4, 0): 5, (3, 3): 7}) else "first_entry"
    return Rules(
        version=version,
        semantics=base,
        position_family=base.position_family,
        count_family="4x" if four_x else "3x",
        steps_back_all=_v(version) >= (2, 4, 0),
        # apache/pulsar#21248 (NonDurableCursorImpl.recoverCursor): tags v2.10.6, v2.11.3, v3.0.2, v3.2.0
        md_is_previous=_from(version, (3, 2, 0), {(2, 10): 6, (2, 11): 3, (3, 0): 2}),
        strictly_before=_v(version) >= (2, 5, 1),
        broker_ts=_v(version) >= (2, 8, 0),
        # docs §7.7: #20457 in 3.1.0 and the patches 3.0.1, 2.11.2 and 2.10.5
        ledger_has_more=_from(version, (3, 1, 0), {(3, 0): 1, (2, 11): 2, (2, 10): 5}),
        closed_range=closed,
        narrowing=narrowing,
        clamp_check_last=_from(version, (2, 8, 0), {(2, 7): 1, (2, 6): 4}),  # #9083
    )


# --------------------------------------------------------------------------------------------------
# Export view of a topic
# --------------------------------------------------------------------------------------------------


@dataclass
class Stamp:
    publish_ms: int
    broker_ms: int | None = None


@dataclass
class Message:
    ledger: int
    entry: int
    batch_index: int = -1
    marker: bool = False
    compacted_out: bool = False


def real_entries(ml: ManagedLedger, ledger: int) -> int:
    if ledger == ml.current_ledger_id:
        return ml.current_ledger_entries
    info = ml.ledgers.get(ledger)
    return 0 if info is None else info[0]


def entry_exists(ml: ManagedLedger, p: Position) -> bool:
    return p[0] in ml.ledgers and 0 <= p[1] < real_entries(ml, p[0])


# --------------------------------------------------------------------------------------------------
# Reset by time (PersistentSubscription.resetCursor(long))
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ResetByTime:
    found: Position | None
    linear: Position | None
    monotonic: bool
    mark_delete: Position | None
    read_position: Position | None
    error: type[OracleError] | None


def _stamp_of(stamps: Mapping[Position, Stamp], p: Position, rules: Rules) -> int | None:
    s = stamps.get(p)
    if s is None:
        return None
    if rules.broker_ts and s.broker_ms is not None:
        return s.broker_ms
    return s.publish_ms


def _earlier(ts: int, t: int, rules: Rules) -> bool:
    return ts < t if rules.strictly_before else ts <= t


def _count(ml: ManagedLedger, lo: Position, lc: bool, hi: Position, hc: bool, rules: Rules) -> int:
    return number_of_entries(ml, lo, lc, hi, hc, rules.count_family)


def _cursor_has_more(ml: ManagedLedger, p: Position, idm: Sequence[IdmRange], rules: Rules) -> bool:
    """ManagedCursorImpl.hasMoreEntries(p): p <= last position and unacked entries left in [p, last]."""
    if p > ml.lac:
        return False
    window = Range(p, True, ml.lac, True)
    n = _count(ml, p, True, ml.lac, True, rules)
    for lo, hi in idm:
        common = Range.open_closed(lo, hi).intersection(window)
        if common is not None:
            n -= _count(ml, common.lower, common.lower_closed, common.upper, common.upper_closed, rules)
    return n > 0


def find_position_range(
    ml: ManagedLedger, closed_at: Mapping[int, int | None], t: int, skew: int | None, rules: Rules
) -> tuple[Position | None, Position | None]:
    """PersistentMessageFinder.getFindPositionRange as read in the 4.0.3 and 4.0.5+ copies."""
    if rules.narrowing == "none" or skew is None or skew < 0:
        return None, None
    lo_t, hi_t = t - skew, t + skew
    start: Position | None = None
    end: Position | None = None
    previous_ledger: int | None = None
    last_ledger: int | None = None
    for lid in sorted(ml.ledgers):
        ts = 0 if lid == ml.current_ledger_id else closed_at.get(lid)
        if ts is None:  # LedgerInfo without a timestamp: give up narrowing
            return None, None
        previous_ledger, last_ledger = last_ledger, lid
        if ts == 0:  # the open ledger
            end = None
            break
        if ts <= lo_t:
            start = (lid, ml.ledgers[lid][0] - 1) if rules.narrowing == "last_entry" else (lid, 0)
        elif ts > hi_t:
            end = (lid, ml.ledgers[lid][0] - 1)
            break
    if rules.narrowing == "first_entry" and previous_ledger is not None and last_ledger is not None:
        prev_ts = 0 if previous_ledger == ml.current_ledger_id else (closed_at.get(previous_ledger) or 0)
        if prev_ts > 0 and prev_ts < lo_t:
            candidate = (last_ledger, 0)
            start = candidate if ml.lac >= candidate else ml.lac
    return start, end


def find_newest_before(
    ml: ManagedLedger,
    t: int,
    stamps: Mapping[Position, Stamp],
    rules: Rules,
    closed_at: Mapping[int, int | None] | None = None,
    skew: int | None = 60_000,
    idm: Sequence[IdmRange] = (),
) -> Position | None:
    """The entry PersistentMessageFinder.findMessages(t) reports (None = not found)."""
    closed_at = closed_at or {}
    if not ml.ledgers:
        raise OracleRequestError("ledgers.firstKey() on an empty map")
    first = (min(ml.ledgers), 0)  # ManagedCursorImpl.getFirstPosition()
    if rules.closed_range:
        r_start, r_end = find_position_range(ml, closed_at, t, skew, rules)
        begin = first if r_start is None else r_start
        end = ml.lac if r_end is None or r_end > ml.lac else r_end
        n_max = _count(ml, begin, True, end, True, rules) if begin <= end else 0
        if n_max <= 0:
            return None
    else:
        begin = first
        end = ml.lac
        n_max = (
            sum(e for e, _s in ml.ledgers.values())
            + (ml.current_ledger_entries if ml.current_ledger_id in ml.ledgers else 0)
            - 1
        )

    def has_more(p: Position) -> bool:
        if rules.ledger_has_more:
            return p <= ml.lac
        return _cursor_has_more(ml, p, idm, rules)

    def read(p: Position) -> int:
        if not entry_exists(ml, p):
            raise OracleReadError(f"no entry {p}")
        ts = _stamp_of(stamps, p, rules)
        if ts is None:
            raise OracleNotExportedError(f"entry {p} not exported")
        return ts

    def check_range() -> None:
        for lid in sorted(ml.ledgers):
            for e in range(real_entries(ml, lid)):
                if begin <= (lid, e) <= end and (lid, e) not in stamps:
                    raise OracleNotExportedError(f"entry {(lid, e)} of the searched range not exported")

    # OpFindNewest: checkFirst -> checkLast -> searching
    low, high = 0, n_max
    position = begin
    last_found: Position | None = None
    state = "checkFirst"
    middle = 0
    verified = False
    while True:
        if not has_more(position):  # find()
            return last_found
        if not verified:
            check_range()
            verified = True
        ok = _earlier(read(position), t, rules)
        if state == "checkFirst":
            if not ok:
                return None
            last_found = position
            state = "checkLast"
            position = position_after_n(ml, position, high, "startExcluded", rules.semantics)
            if rules.clamp_check_last and ml.lac < position:
                position = ml.lac
            continue
        if state == "checkLast":
            if ok:
                return position
            state = "searching"
            middle = low + max(int((high - low) / 2), 1)
            position = position_after_n(ml, begin, middle, "startExcluded", rules.semantics)
            continue
        if ok:
            last_found = position
            low = middle
        else:
            high = middle - 1
        middle = low + max(int((high - low) / 2), 1)
        if high <= low:
            return last_found
        position = position_after_n(ml, begin, middle, "startExcluded", rules.semantics)


def reset_cursor_by_time(
    ml: ManagedLedger,
    t: int,
    stamps: Mapping[Position, Stamp],
    version: str,
    closed_at: Mapping[int, int | None] | None = None,
    skew: int | None = 60_000,
    idm: Sequence[IdmRange] = (),
) -> ResetByTime:
    """Find, then reset: found.getNext() / (first ledger, 0) -> next valid when invalid -> md = previous."""
    rules = rules_for(version)
    fam = rules.position_family
    live = sorted(p for p in stamps if entry_exists(ml, p) and p <= ml.lac)
    series = [_stamp_of(stamps, p, rules) or 0 for p in live]
    monotonic = all(series[i] >= series[i - 1] for i in range(1, len(series)))
    linear = next((p for p in reversed(live) if _earlier(_stamp_of(stamps, p, rules) or 0, t, rules)), None)
    try:
        found = find_newest_before(ml, t, stamps, rules, closed_at, skew, idm)
    except OracleError as exc:
        return ResetByTime(None, linear, monotonic, None, None, type(exc))
    target = (found[0], found[1] + 1) if found is not None else (min(ml.ledgers), 0)
    if not is_valid_position(ml, target, fam):
        target = get_next_valid_position(ml, target, fam)
    return ResetByTime(found, linear, monotonic, get_previous_position(ml, target), target, None)


# --------------------------------------------------------------------------------------------------
# Reader start (ServerCnx.handleSubscribe -> NonDurableCursorImpl) and client filter (ConsumerImpl)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReaderRequest:
    start_kind: str
    start_id: MessageId | None = None
    inclusive: bool = False
    rollback_seconds: int = 0
    read_compacted: bool = False
    initial_position: str = "Latest"


@dataclass(frozen=True)
class ReaderStart:
    mark_delete: Position | None
    read_position: Position | None
    first_delivered: MessageId | None
    error: type[OracleError] | None
    #: the reset of a rollback failed on a read: logged by the broker, the reader kept its first cursor
    rollback_failed: bool = False


def _sent_start(req: ReaderRequest) -> MessageId:
    """The start id on the wire: ReaderBuilderImpl replaces it by MessageId.earliest when a rollback
    duration is set; no start id at all means latest (PersistentTopic.getNonDurableSubscription)."""
    if req.start_kind not in ("message_id", "earliest", "latest"):
        raise OracleRequestError(f"start kind {req.start_kind}")
    if req.start_kind == "message_id" and req.start_id is None:
        raise OracleRequestError("null start id")
    if req.rollback_seconds > 0 or req.start_kind == "earliest":
        return (-1, -1, -1)
    if req.start_kind == "latest":
        return (LATEST[0], LATEST[1], -1)
    assert req.start_id is not None
    return req.start_id


def _cursor_state(ml: ManagedLedger, req: ReaderRequest, rules: Rules) -> tuple[Position, Position]:
    fam = rules.position_family
    ledger, entry, batch = _sent_start(req)
    if req.initial_position not in ("Latest", "Earliest"):
        raise OracleRequestError(f"initial position {req.initial_position}")
    if ledger >= 0 and entry >= 0 and (rules.steps_back_all or batch >= 0):
        entry -= 1
    start = (ledger, entry)
    if start > ml.lac:
        if req.initial_position == "Latest":
            return ml.lac, get_next_valid_position(ml, ml.lac, fam)
        first = get_first_position(ml)
        if first is None:
            raise OracleRequestError("getFirstPosition() is null")
        return first, get_next_valid_position(ml, first, fam)
    if ledger == -1:
        first = get_first_position(ml)
        if first is None:
            raise OracleRequestError("getFirstPosition() is null")
        md_position = get_previous_position(ml, first)
    else:
        md_position = start
    if req.read_compacted:
        read = (md_position[0], md_position[1] + 1)
    else:
        read = get_next_valid_position(ml, md_position, fam)
    mark = get_previous_position(ml, read) if rules.md_is_previous else md_position
    return mark, read


def _client_keeps(msg: Message, req: ReaderRequest) -> bool:
    """ConsumerImpl.messageReceived: only messages of the start id's entry are filtered (docs §7.3).

    A message without batch index took the single-message path, where isPriorEntryIndex compares the entry
    id only (equal here, so: dropped unless inclusive); a batch slot is compared by isPriorBatchIndex with
    the start id's batch index (-1 for an id without one).
    """
    ledger, entry, batch = _sent_start(req)
    if (msg.ledger, msg.entry) != (ledger, entry):
        return True
    if msg.batch_index < 0:
        return req.inclusive
    prior = msg.batch_index < batch if req.inclusive else msg.batch_index <= batch
    return not prior


def reader_start(
    ml: ManagedLedger | None,
    req: ReaderRequest,
    version: str,
    messages: Sequence[Message] | None = None,
    stamps: Mapping[Position, Stamp] | None = None,
    exported_ms: int | None = None,
    closed_at: Mapping[int, int | None] | None = None,
    skew: int | None = 60_000,
) -> ReaderStart:
    rules = rules_for(version)
    rollback_failed = False
    try:
        if ml is None:
            raise OracleRequestError("no managed ledger")
        mark, read = _cursor_state(ml, req, rules)
        if req.rollback_seconds > 0:
            if stamps is None or exported_ms is None:
                raise OracleRequestError("rollback without timestamps")
            reset = reset_cursor_by_time(
                ml, exported_ms - req.rollback_seconds * 1000, stamps, version, closed_at, skew
            )
            if reset.error is OracleReadError:
                # PersistentTopic.resetSubscriptionCursor: the failed future is only logged
                rollback_failed = True
            elif reset.error is not None:
                raise reset.error("rollback search failed")
            else:
                assert reset.mark_delete is not None and reset.read_position is not None
                mark, read = reset.mark_delete, reset.read_position
    except OracleError as exc:
        return ReaderStart(None, None, None, type(exc))
    first: MessageId | None = None
    if messages is not None:
        for msg in sorted(messages, key=lambda m: (m.ledger, m.entry, m.batch_index)):
            if (msg.ledger, msg.entry) < read or msg.marker or msg.compacted_out:
                continue
            if _client_keeps(msg, req):
                first = (msg.ledger, msg.entry, msg.batch_index)
                break
    return ReaderStart(mark, read, first, None, rollback_failed)
