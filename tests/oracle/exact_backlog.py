"""Reference model of the exact backlog of exported entries (docs §1.2, §1.8, §2.5, §8.3-§8.5).

Plain Python, one topic at a time, written straight from docs/semantics and independent of
``pulsar_model.backlog_exact``: entries are a list, a request is an interval plus acked ranges, and every
rule is a loop over the entries.

* An entry is counted when ``lower < position <= upper`` and no acked open-closed range ``(a, b]``
  contains it (docs §1.2: ``individuallyDeletedMessages`` are open-closed; §1.8: the backlog is
  ``(md, LAC]`` minus them).
* Kinds (docs §8.3-§8.5): an entry with a ``marker_type`` is a marker (transaction markers 20-22
  included); a data entry with a transaction id takes the state of its transaction in the topic: the
  first end marker (21 commit / 22 abort, smallest position, carrying the same txn id) decides;
  committed -> data, aborted -> aborted, no end marker -> uncommitted. Everything else is data.
* The oldest unacked entry is the counted entry with the smallest position (the entry
  ``getEarliestMessagePublishTimeOfPos`` reads, §2.5); its publish time and the age in whole seconds.
* Non-precise backlog (§1.8): ``entriesAddedCounter - messagesConsumedCounter``, the precise count when
  negative.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

Position = tuple[int, int]
AckedRange = tuple[Position, Position]  # open-closed (lower, upper]
Txn = tuple[int, int]  # (txnid_most_bits, txnid_least_bits)

#: MarkerType values of the transaction end markers (docs §8.3).
TXN_COMMIT = 21
TXN_ABORT = 22

KINDS = ("data", "marker", "aborted", "uncommitted")


@dataclass(frozen=True)
class Entry:
    """One exported stored entry of a topic."""

    position: Position
    message_count: int
    size_bytes: int
    publish_time_ms: int
    marker_type: int | None = None
    txn: Txn | None = None


@dataclass
class Totals:
    """What :func:`unacked_totals` finds for one request."""

    per_kind: dict[str, tuple[int, int, int]] = field(
        default_factory=lambda: dict.fromkeys(KINDS, (0, 0, 0))
    )  # kind -> (entries, messages, bytes)
    oldest: Entry | None = None

    @property
    def entries(self) -> int:
        return sum(v[0] for v in self.per_kind.values())

    @property
    def messages(self) -> int:
        return sum(v[1] for v in self.per_kind.values())

    @property
    def bytes(self) -> int:
        return sum(v[2] for v in self.per_kind.values())

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {}
        for kind in KINDS:
            e, m, b = self.per_kind[kind]
            out[f"{kind}_entries"], out[f"{kind}_messages"], out[f"{kind}_bytes"] = e, m, b
        out["entries"], out["messages"], out["bytes"] = self.entries, self.messages, self.bytes
        out["oldest_position"] = None if self.oldest is None else self.oldest.position
        out["oldest_publish_time_ms"] = None if self.oldest is None else self.oldest.publish_time_ms
        return out


def transaction_states(entries: Iterable[Entry]) -> dict[Txn, str]:
    """State of every transaction whose end marker is in the topic: ``committed`` or ``aborted``.

    The end marker with the smallest position wins; transactions missing from the result are open.
    """
    first_end: dict[Txn, tuple[Position, int]] = {}
    for e in entries:
        if e.txn is None or e.marker_type not in (TXN_COMMIT, TXN_ABORT):
            continue
        seen = first_end.get(e.txn)
        if seen is None or e.position < seen[0]:
            first_end[e.txn] = (e.position, e.marker_type)
    return {txn: ("committed" if m == TXN_COMMIT else "aborted") for txn, (_p, m) in first_end.items()}


def kind_of(entry: Entry, states: dict[Txn, str]) -> str:
    if entry.marker_type is not None:
        return "marker"
    if entry.txn is None:
        return "data"
    state = states.get(entry.txn, "open")
    return {"committed": "data", "aborted": "aborted"}.get(state, "uncommitted")


def in_ranges(p: Position, ranges: Sequence[AckedRange]) -> bool:
    return any(lo < p <= hi for lo, hi in ranges)


def unacked_totals(
    entries: Sequence[Entry],
    lower: Position | None,
    upper: Position | None,
    acked: Sequence[AckedRange] | None,
) -> Totals | None:
    """Totals of the topic's exported entries in ``(lower, upper]`` outside ``acked``; None when unknown."""
    if lower is None or upper is None:
        return None
    states = transaction_states(entries)
    totals = Totals()
    for e in sorted(entries, key=lambda x: x.position):
        if not (lower < e.position <= upper) or in_ranges(e.position, acked or []):
            continue
        kind = kind_of(e, states)
        n, m, b = totals.per_kind[kind]
        totals.per_kind[kind] = (n + 1, m + e.message_count, b + e.size_bytes)
        if totals.oldest is None:
            totals.oldest = e
    return totals


def existing_unacked(
    existing: Iterable[Position], lower: Position, upper: Position, acked: Sequence[AckedRange]
) -> int:
    """Positions the ledger list says exist in ``(lower, upper]`` and are not acked."""
    return sum(1 for p in existing if lower < p <= upper and not in_ranges(p, acked))


def age_seconds(exported_at_ms: int | None, publish_time_ms: int | None) -> int | None:
    """Whole seconds from the publish time to the export, rounded down."""
    if exported_at_ms is None or publish_time_ms is None:
        return None
    return (exported_at_ms - publish_time_ms) // 1000


def non_precise_backlog(entries_added: int | None, consumed: int | None, precise: int | None) -> int | None:
    """docs §1.8 ``getNumberOfEntriesInBacklog(false)``; None when a counter is unknown."""
    if entries_added is None or consumed is None:
        return None
    backlog = entries_added - consumed
    return backlog if backlog >= 0 else precise
