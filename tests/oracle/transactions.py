"""Plain-Python oracle for transactions in a topic's ledger, written from docs §8 (and §1.3, §0.2) only.

Independent of :mod:`pulsar_model.transactions`: it replays the transaction buffer of docs §8.4 event by
event over a topic's appends (transactional data, commit/abort markers of docs §8.3, normal messages and
other markers), keeps the ledger map as docs §0.2 describes it (empty ledgers included) for
``getPreviousPosition`` (docs §1.3), and classifies every entry as a dispatcher would (docs §8.5).

Two rules for "the position before the oldest open transaction's first message" (docs §8.4): the older
lines (2.x, 3.0.x, 3.1.0-3.1.2, 3.2.0) subtract one from the entry id, ``(L, E-1)``; the newer ones ask
``getPreviousPosition`` (docs §1.3). :func:`replay` takes the rule as ``before``.

Modelling choices (the same ones docs §8.4 leaves to the reader):

* a non-transaction marker (e.g. a replicated-subscription snapshot, type 12) is published like a normal
  message: it moves ``maxReadPosition`` when nothing is ongoing;
* the buffer is ``Ready`` (no EARLIEST), no low-watermark abort, no append to an ended transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

Position = tuple[int, int]
TxnId = tuple[int, int]

#: docs §8.3 marker types.
TXN_COMMIT = 21
TXN_ABORT = 22
TXN_MARKERS = (20, 21, 22)


@dataclass(frozen=True)
class OEntry:
    """One appended entry: ``txn`` set for transactional data and transaction markers."""

    position: Position
    txn: TxnId | None
    marker_type: int | None
    message_count: int = 1
    publish_time_ms: int = 0

    @property
    def is_txn_marker(self) -> bool:
        return self.txn is not None and self.marker_type in TXN_MARKERS

    @property
    def is_txn_data(self) -> bool:
        return self.txn is not None and self.marker_type is None


@dataclass
class OTopic:
    """A topic's ledgers (id -> real entry count, in id order; the last one is open) and its entries."""

    ledgers: dict[int, int] = field(default_factory=dict)
    entries: list[OEntry] = field(default_factory=list)

    @property
    def current_ledger_id(self) -> int:
        return max(self.ledgers)

    @property
    def lac(self) -> Position:
        """docs §0.2: the last entry added (roll-over does not change it); ``(first, -1)`` when none."""
        return self.entries[-1].position if self.entries else (min(self.ledgers), -1)


def previous_position(ledgers: dict[int, int], p: Position) -> Position:
    """``getPreviousPosition`` as written in docs §1.3 (``ledgers``: id -> entries)."""
    if p[1] > 0:
        return (p[0], p[1] - 1)
    earlier = sorted((lid for lid in ledgers if lid < p[0]), reverse=True)
    if not earlier:
        return (p[0], -1)
    for lid in earlier:
        if ledgers[lid] > 0:
            return (lid, ledgers[lid] - 1)
    return (min(earlier), -1)


@dataclass(frozen=True)
class OTxn:
    """End state of one transaction on the topic."""

    state: str  # committed | aborted | open
    first_position: Position | None
    last_position: Position | None
    end_marker_position: Position | None
    entry_count: int
    message_count: int


@dataclass(frozen=True)
class OResult:
    """What the replay ends with."""

    max_read_position: Position
    ongoing: dict[TxnId, Position]  # insertion order = the buffer's order
    aborted: dict[TxnId, Position]
    txns: dict[TxnId, OTxn]
    dispatch: dict[Position, str]


BEFORE_ENTRY_ID = "entry_id"
BEFORE_PREVIOUS_POSITION = "previous_position"


def before_first(ledgers: dict[int, int], p: Position, before: str) -> Position:
    """The limit in front of ``p`` under rule ``before``: ``(L, E-1)`` or ``getPreviousPosition``."""
    if before == BEFORE_ENTRY_ID:
        return (p[0], p[1] - 1)
    assert before == BEFORE_PREVIOUS_POSITION
    return previous_position(ledgers, p)


def replay(
    topic: OTopic, before: str = BEFORE_PREVIOUS_POSITION, before_on_end: str | None = None
) -> OResult:
    """docs §8.4 line by line over ``topic.entries`` (in append order), then §8.5 on every entry.

    ``before`` is the rule where a transaction's first message sets ``maxReadPosition``
    (``handleTransactionMessage``), ``before_on_end`` (default: the same) where a commit or abort does
    (``updateMaxReadPosition``); later messages of an ongoing transaction leave it as it is."""
    on_end = before if before_on_end is None else before_on_end
    ongoing: dict[TxnId, Position] = {}
    aborted: dict[TxnId, Position] = {}
    committed: dict[TxnId, Position] = {}
    max_read: Position = (min(topic.ledgers), -1)
    for e in topic.entries:
        if e.is_txn_data:
            assert e.txn is not None
            if e.txn not in ongoing and e.txn not in aborted:
                ongoing[e.txn] = e.position
                max_read = before_first(topic.ledgers, next(iter(ongoing.values())), before)
        elif e.is_txn_marker:
            assert e.txn is not None
            ongoing.pop(e.txn, None)
            if e.marker_type == TXN_ABORT:
                aborted.setdefault(e.txn, e.position)
            elif e.marker_type == TXN_COMMIT:
                committed.setdefault(e.txn, e.position)
            first = next(iter(ongoing.values()), None)
            # "LAC if ongoing empty": the marker just written is the last entry added
            max_read = e.position if first is None else before_first(topic.ledgers, first, on_end)
        elif not ongoing:
            max_read = e.position
    txns: dict[TxnId, OTxn] = {}
    for txn in dict.fromkeys(e.txn for e in topic.entries if e.txn is not None):
        data = [e for e in topic.entries if e.txn == txn and e.is_txn_data]
        ends = [e for e in topic.entries if e.txn == txn and e.marker_type in (TXN_COMMIT, TXN_ABORT)]
        end = ends[0] if ends else None
        state = "open" if end is None else ("committed" if end.marker_type == TXN_COMMIT else "aborted")
        txns[txn] = OTxn(
            state=state,
            first_position=data[0].position if data else None,
            last_position=data[-1].position if data else None,
            end_marker_position=end.position if end else None,
            entry_count=len(data),
            message_count=sum(e.message_count for e in data),
        )
    dispatch: dict[Position, str] = {}
    for e in topic.entries:
        if e.position > max_read:
            dispatch[e.position] = "held_back"  # readers stop at maxReadPosition (docs §8.4)
        elif e.is_txn_marker:
            dispatch[e.position] = "skipped_txn_marker"
        elif e.is_txn_data and e.txn in aborted:
            dispatch[e.position] = "skipped_aborted"
        elif e.marker_type is not None:
            dispatch[e.position] = "skipped_marker"
        else:
            dispatch[e.position] = "delivered"
    return OResult(max_read, ongoing, aborted, txns, dispatch)


def txn_text(txn: TxnId) -> str:
    """``TxnID.toString()`` (docs §8.2)."""
    return f"({txn[0]},{txn[1]})"


@dataclass(frozen=True)
class OHoldback:
    """Per-topic summary: maxReadPosition and what it holds back / what dispatchers drop."""

    last_position: Position
    max_read_position: Position
    open_txn_count: int
    oldest_open_txn_id: str | None
    oldest_open_first_position: Position | None
    held_back_entries: int
    held_back_messages: int
    aborted_entries_skipped: int
    aborted_messages_skipped: int
    txn_marker_entries: int


def holdback(topic: OTopic, result: OResult) -> OHoldback:
    entries: Sequence[OEntry] = topic.entries
    oldest = next(iter(result.ongoing.items()), None)
    held = [e for e in entries if result.dispatch[e.position] == "held_back"]
    dropped = [e for e in entries if result.dispatch[e.position] == "skipped_aborted"]
    return OHoldback(
        last_position=entries[-1].position,
        max_read_position=result.max_read_position,
        open_txn_count=len(result.ongoing),
        oldest_open_txn_id=None if oldest is None else txn_text(oldest[0]),
        oldest_open_first_position=None if oldest is None else oldest[1],
        held_back_entries=len(held),
        held_back_messages=sum(e.message_count for e in held),
        aborted_entries_skipped=len(dropped),
        aborted_messages_skipped=sum(e.message_count for e in dropped),
        txn_marker_entries=sum(1 for e in entries if e.is_txn_marker),
    )
