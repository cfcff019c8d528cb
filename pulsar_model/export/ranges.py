"""Which entries to fetch for one topic (partition), planned from its ``internalStats`` document.

Positions follow docs §0.1/§0.2: a ledger lists ``entries`` once closed; the open (last) ledger is listed
with 0 entries while it is open and holds the entries up to the LAC (``lastConfirmedEntry``); deleted
ledgers are absent, empty ones list 0 entries. The entry endpoint reads one stored position, so only
positions the list says exist are requested (an id past the end makes the broker fail the read).

* ``all``: every entry of every listed ledger up to the LAC.
* ``backlog``: every entry after the slowest durable cursor's mark-delete position (exclusive) up to
  the LAC - what the exact backlog, replication snapshots/duplicates and the transaction audit read for
  the unconsumed part; the ``__compaction`` cursor is a durable cursor, so the compaction preview's
  phase-one range (docs §5.4: from that cursor) is inside it. Reader (non-durable) cursors do not pin
  anything and are ignored. A topic with no durable cursor needs no entry in this mode.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pulsar_model.errors import ParseError
from pulsar_model.ingest.parsers.common import decode_cursor_name, parse_position
from pulsar_model.ingest.parsers.stats_internal import cursor_kind

Position = tuple[int, int]


@dataclass(frozen=True)
class EntryRange:
    """Entries ``first..last`` (inclusive) of one ledger."""

    ledger_id: int
    first: int
    last: int

    @property
    def count(self) -> int:
        return self.last - self.first + 1

    def positions(self) -> Iterator[Position]:
        for entry in range(self.first, self.last + 1):
            yield self.ledger_id, entry


@dataclass(frozen=True)
class EntryPlan:
    """What to fetch (``ranges``, position order) and what the cap left out (``capped``)."""

    ranges: tuple[EntryRange, ...]
    capped: tuple[EntryRange, ...]
    lower_exclusive: Position | None  # None: from the first listed entry

    @property
    def count(self) -> int:
        return sum(r.count for r in self.ranges)


def fmt(position: Position) -> str:
    return f"{position[0]}:{position[1]}"


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def listed_ranges(doc: Mapping[str, Any]) -> list[EntryRange]:
    """Every stored position the document lists, as one range per non-empty ledger, up to the LAC."""
    try:
        lac = parse_position(doc.get("lastConfirmedEntry"))  # type: ignore[arg-type]
    except ParseError:
        return []
    ledgers = [item for item in doc.get("ledgers") or [] if isinstance(item, Mapping)]
    out: list[EntryRange] = []
    for item in ledgers:
        ledger_id = _int(item.get("ledgerId"))
        if ledger_id is None or ledger_id > lac[0] or ledger_id < 0:
            continue
        entries = _int(item.get("entries")) or 0
        last = entries - 1
        if ledger_id == lac[0]:  # the LAC's ledger (open ledgers are listed with 0 entries): up to the LAC
            last = lac[1] if entries <= 0 else min(last, lac[1])
        if last >= 0:
            out.append(EntryRange(ledger_id, 0, last))
    return out


def slowest_durable_mark_delete(doc: Mapping[str, Any]) -> Position | None:
    """Smallest mark-delete position over the durable cursors (None when there is none)."""
    cursors = doc.get("cursors")
    found: list[Position] = []
    if isinstance(cursors, Mapping):
        for raw_name, cursor in cursors.items():
            if not isinstance(cursor, Mapping):
                continue
            kind, _ = cursor_kind(decode_cursor_name(str(raw_name)))
            if kind == "reader":
                continue
            try:
                found.append(parse_position(cursor.get("markDeletePosition")))  # type: ignore[arg-type]
            except ParseError:
                continue
    return min(found) if found else None


def plan_entries(doc: Mapping[str, Any], mode: str, cap: int | None) -> EntryPlan:
    """The entries ``mode`` wants from one topic, cut at ``cap`` entries (None or 0: no cap)."""
    ranges = listed_ranges(doc)
    lower: Position | None = None
    if mode == "backlog":
        lower = slowest_durable_mark_delete(doc)
        if lower is None:
            return EntryPlan((), (), None)
        clipped = []
        for r in ranges:
            if (r.ledger_id, r.last) <= lower:
                continue
            first = r.first if r.ledger_id > lower[0] else max(r.first, lower[1] + 1)
            clipped.append(EntryRange(r.ledger_id, first, r.last))
        ranges = clipped
    elif mode == "none":
        return EntryPlan((), (), None)
    if not cap:
        return EntryPlan(tuple(ranges), (), lower)
    kept: list[EntryRange] = []
    left_out: list[EntryRange] = []
    budget = cap
    for r in ranges:
        if budget >= r.count:
            kept.append(r)
            budget -= r.count
        elif budget > 0:
            kept.append(EntryRange(r.ledger_id, r.first, r.first + budget - 1))
            left_out.append(EntryRange(r.ledger_id, r.first + budget, r.last))
            budget = 0
        else:
            left_out.append(r)
    return EntryPlan(tuple(kept), tuple(left_out), lower)


def merge_positions(positions: list[Position]) -> list[tuple[Position, Position]]:
    """Positions as maximal ``[from, to]`` runs of consecutive entries of one ledger, in position order."""
    runs: list[tuple[Position, Position]] = []
    for position in sorted(positions):
        if runs and runs[-1][1][0] == position[0] and runs[-1][1][1] + 1 == position[1]:
            runs[-1] = (runs[-1][0], position)
        else:
            runs.append((position, position))
    return runs
