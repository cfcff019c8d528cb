"""Reference model of ledger trimming, pinning and unmoved cursors, one topic at a time, in plain Python.

Written from the trimming rule as read in ``ManagedLedgerImpl.internalTrimLedgers`` (see the docstring of
``pulsar_model/pinning.py`` for the sources) and docs §1.11, as a literal walk - the bound computed like the
broker does, then ``headMap(bound)`` walked in id order and stopped at the current ledger - so that it is
independent of the set-based predicates of the transform. Retention is ignored (broker defaults 0/0).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date

from tests.oracle.managed_ledger import Cursor, ManagedLedger, Position


def protected_ledger(ml: ManagedLedger) -> int:
    """The broker's ``currentLedger``: the open ledger, else the last listed (closed) ledger."""
    if ml.current_ledger_id is not None:
        return ml.current_ledger_id
    return max(ml.ledgers)


def trim_bound(ml: ManagedLedger, slowest_md: Position | None, last_entry_rule: bool) -> int:
    """``slowestReaderLedgerId``: ``headMap`` bound (exclusive) of the next trim."""
    current = protected_ledger(ml)
    if slowest_md is None:  # no durable cursor
        return current + 1
    info = ml.ledgers.get(slowest_md[0])
    if last_entry_rule and info is not None and slowest_md[0] != current and info[0] == slowest_md[1] + 1:
        return slowest_md[0] + 1
    return slowest_md[0]


def trimmable_ledgers(ml: ManagedLedger, slowest_md: Position | None, last_entry_rule: bool) -> list[int]:
    """Ledger ids the next trim deletes (retention ignored), ascending."""
    bound = trim_bound(ml, slowest_md, last_entry_rule)
    current = protected_ledger(ml)
    out: list[int] = []
    for lid in sorted(ml.ledgers):
        if lid >= bound:
            break
        if lid == current:  # "currentLedger can not be deleted": the walk stops here
            break
        out.append(lid)
    return out


def durable_order(cursors: Iterable[Cursor]) -> list[Cursor]:
    """Durable cursors by (md, insertion order, name): the first is the root of the cursor heap built in
    insertion order (docs §3.9); readers excluded."""
    return sorted((c for c in cursors if c.durable), key=lambda c: (c.mark_delete, c.order, c.name))


@dataclass
class PinningRow:
    slowest_cursor_name: str | None
    slowest_mark_delete_position: Position | None
    slowest_cursor_tie: bool
    next_slowest_cursor_name: str | None
    next_slowest_mark_delete_position: Position | None
    pin_target_position: Position | None
    trim_boundary_ledger_id: int | None
    pinned_ledger_ids: list[int]
    pinned_bytes: int
    trimmable_now_ledger_ids: list[int]
    trimmable_now_bytes: int

    @property
    def pinned_ledgers(self) -> int:
        return len(self.pinned_ledger_ids)

    @property
    def oldest_pinned_ledger_id(self) -> int | None:
        return self.pinned_ledger_ids[0] if self.pinned_ledger_ids else None


def pinning(ml: ManagedLedger, cursors: Sequence[Cursor], last_entry_rule: bool) -> PinningRow:
    """The pinning report of one topic (see ``pulsar_model.pinning.pinning_report``)."""
    durable = durable_order(cursors)
    slowest = durable[0] if durable else None
    second = durable[1] if len(durable) > 1 else None
    slowest_md = slowest.mark_delete if slowest else None
    now = trimmable_ledgers(ml, slowest_md, last_entry_rule)
    target: Position | None = None
    pinned: list[int] = []
    if slowest is not None:
        target = second.mark_delete if second is not None else max(slowest.mark_delete, ml.lac)
        freed = trimmable_ledgers(ml, target, last_entry_rule)
        pinned = [lid for lid in freed if lid not in now]
    kept = [lid for lid in sorted(ml.ledgers) if lid not in now]
    return PinningRow(
        slowest_cursor_name=slowest.name if slowest else None,
        slowest_mark_delete_position=slowest_md,
        slowest_cursor_tie=second is not None
        and slowest is not None
        and second.mark_delete == slowest.mark_delete,
        next_slowest_cursor_name=second.name if second else None,
        next_slowest_mark_delete_position=second.mark_delete if second else None,
        pin_target_position=target,
        trim_boundary_ledger_id=kept[0] if kept else None,
        pinned_ledger_ids=pinned,
        pinned_bytes=sum(ml.ledgers[lid][1] for lid in pinned),
        trimmable_now_ledger_ids=now,
        trimmable_now_bytes=sum(ml.ledgers[lid][1] for lid in now),
    )


# --------------------------------------------------------------------------------------------------
# Unmoved cursors across a history of exports
# --------------------------------------------------------------------------------------------------


@dataclass
class Snapshot:
    """One export of one topic: its date, LAC and the cursors listed (name -> md)."""

    export_date: date
    lac: Position | None
    cursors: dict[str, Position | None] = field(default_factory=dict)


@dataclass
class UnmovedRow:
    mark_delete_position: Position | None
    unmoved_since_export_date: date
    last_export_date: date
    unmoved_exports: int
    present_in_latest_export: bool
    topic_advanced: bool | None


def unmoved(snapshots: Sequence[Snapshot], min_exports: int, with_lac: bool) -> dict[str, UnmovedRow]:
    """Per cursor name: its last run of identical md over consecutive exports of the topic, if long enough."""
    ordered = sorted(snapshots, key=lambda s: s.export_date)
    names = sorted({n for s in ordered for n in s.cursors})
    out: dict[str, UnmovedRow] = {}
    for name in names:
        # walk back from the cursor's last appearance while the md stays the same and no export is skipped
        last_i = max(i for i, s in enumerate(ordered) if name in s.cursors)
        md = ordered[last_i].cursors[name]
        first_i = last_i
        while (
            first_i > 0 and name in ordered[first_i - 1].cursors and ordered[first_i - 1].cursors[name] == md
        ):
            first_i -= 1
        k = last_i - first_i + 1
        if k < min_exports:
            continue
        advanced: bool | None = None
        if with_lac:
            a, b = ordered[first_i].lac, ordered[last_i].lac
            advanced = None if a is None and b is None else a != b
        out[name] = UnmovedRow(
            mark_delete_position=md,
            unmoved_since_export_date=ordered[first_i].export_date,
            last_export_date=ordered[last_i].export_date,
            unmoved_exports=k,
            present_in_latest_export=last_i == len(ordered) - 1,
            topic_advanced=advanced,
        )
    return out


__all__ = [
    "PinningRow",
    "Snapshot",
    "UnmovedRow",
    "durable_order",
    "pinning",
    "protected_ledger",
    "trim_bound",
    "trimmable_ledgers",
    "unmoved",
]
