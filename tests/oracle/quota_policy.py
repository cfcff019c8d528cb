"""Reference model of backlog-quota breach detection (docs §3.4) and the exact-data view, in plain Python.

Written straight from docs §3.4 (and the version notes of ``pulsar_model.quota.policy``'s docstring),
one topic at a time, reusing the managed-ledger oracle (``tests/oracle/managed_ledger.py``) for the topic
backlog estimate (§2.3) and ``getNextValidPosition`` (§1.5). Loops and branches follow docs/semantics
pseudo-code literally; nothing here imports the code under test.

A result of ``None`` means "undecidable from the export" (the transform reports null plus a reason).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tests.oracle.managed_ledger import (
    Cursor,
    ManagedLedger,
    Position,
    estimated_backlog_size,
    get_next_valid_position,
    parse_version,
    semantics_for_version,
)

SIZE = "destination_storage"
TIME = "message_age"


@dataclass
class TopicQuota:
    """The effective quota of one topic plus the broker settings the check reads (docs §3.2)."""

    limit_size: int
    limit_time: int
    precise: bool
    check_enabled: bool = True


@dataclass
class TopicTimes:
    """What the export knows about times: ledger close times, entry timestamps, the export time."""

    now_ms: int | None
    closed_ms: dict[int, int | None] = field(default_factory=dict)  # ledger id -> close time (None: absent)
    entry_ms: dict[Position, int] | None = None  # entry timestamp (broker timestamp, else publish time)


@dataclass
class ExactCursor:
    name: str
    durable: bool
    backlog_bytes: int
    oldest_unacked_ms: int | None


@dataclass
class Breach:
    estimated_backlog_size: int
    size_exceeded: bool | None
    time_exceeded: bool | None
    handled_type: str | None
    exact_backlog_bytes: int | None = None
    exact_size_exceeded: bool | None = None
    exact_time_exceeded: bool | None = None


def time_checks_exist(version: str) -> bool:
    """message_age quotas are checked from 2.8.0 on (PR #10093)."""
    return parse_version(version) >= (2, 8)


def last_ledger_guard(version: str) -> bool:
    """Non-precise check: md in the last ledger -> not exceeded (PR #15663: 2.8.4, 2.9.3, 2.10.1+)."""
    parts = tuple(int(x) for x in version.split("."))
    if parts >= (2, 10, 1):
        return True
    return (parts[:2] == (2, 8) and parts[2] >= 4) or (parts[:2] == (2, 9) and parts[2] >= 3)


def size_exceeded(backlog: int, limit: int) -> bool:
    """docs §3.4 isSizeBacklogExceeded: limit < 0 disables; else backlog >= limit (0 always exceeds)."""
    if limit < 0:
        return False
    return backlog >= limit


def time_exceeded(
    ml: ManagedLedger, cursors: Sequence[Cursor], quota: TopicQuota, times: TopicTimes, version: str
) -> bool | None:
    """docs §3.4 checkTimeBacklogExceeded for the slowest durable cursor's mark-delete position."""
    if not time_checks_exist(version):
        return False
    if quota.limit_time <= 0:
        return False
    durable = [c for c in cursors if c.durable]
    if not durable:
        return False  # no oldest position: nothing to check
    md = min(c.mark_delete for c in durable)
    family = semantics_for_version(version).position_family
    first = get_next_valid_position(ml, md, family)
    if first > ml.lac:
        return False  # no entry after md: no backlog
    limit_ms = quota.limit_time * 1000
    if quota.precise:
        if times.entry_ms is None or first not in times.entry_ms:
            return None
        if times.now_ms is None:
            return None
        return times.now_ms > times.entry_ms[first] + limit_ms
    # non-precise: estimatedTimeBasedBacklogQuotaCheck(md)
    if last_ledger_guard(version) and md[0] == max(ml.ledgers):
        return False
    pos = md
    info = ml.ledgers.get(pos[0])
    if info is None:
        pos = get_next_valid_position(ml, pos, family)
        info = ml.ledgers.get(pos[0])
        if info is None:
            return False  # the broker's lookup returns null: NPE, not exceeded
    if pos[1] == info[0] - 1:
        pos = get_next_valid_position(ml, pos, family)
        info = ml.ledgers.get(pos[0])
        if info is None:
            return False
    if ml.current_ledger_id is not None and pos[0] == ml.current_ledger_id:
        return False  # the open ledger's LedgerInfo has timestamp 0
    closed = times.closed_ms.get(pos[0])
    if closed is None:
        return None
    if times.now_ms is None:
        return None
    return (times.now_ms - closed) > limit_ms


def breach(
    ml: ManagedLedger,
    cursors: Sequence[Cursor],
    quota: TopicQuota,
    times: TopicTimes,
    version: str,
    system_topic: bool = False,
    exact: Sequence[ExactCursor] | None = None,
) -> Breach:
    """Both checks and the periodic check's choice (3.x: size first, else time) for one topic."""
    _, backlog = estimated_backlog_size(ml, cursors, semantics_for_version(version))
    if system_topic:
        s: bool | None = False
        t: bool | None = False
    else:
        s = size_exceeded(backlog, quota.limit_size)
        t = time_exceeded(ml, cursors, quota, times, version)
    handled: str | None = None
    if quota.check_enabled and not system_topic:
        if s:
            handled = SIZE
        elif time_checks_exist(version) and t:
            handled = TIME
    result = Breach(backlog, s, t, handled)
    if exact is not None:
        durable = [c for c in exact if c.durable]
        if durable:
            result.exact_backlog_bytes = max(c.backlog_bytes for c in durable)
            result.exact_size_exceeded = (
                False if system_topic else size_exceeded(result.exact_backlog_bytes, quota.limit_size)
            )
            oldest = [c.oldest_unacked_ms for c in durable if c.oldest_unacked_ms is not None]
            if system_topic or not time_checks_exist(version) or quota.limit_time <= 0 or not oldest:
                result.exact_time_exceeded = False
            elif times.now_ms is None:
                result.exact_time_exceeded = None
            else:
                result.exact_time_exceeded = times.now_ms > min(oldest) + quota.limit_time * 1000
    return result
