"""Plain-Python oracle of Pulsar topic compaction, written straight from docs §5.4 and §5.5.

Deliberately literal: first the dispatcher decides which entries the compactor's reader receives, then
phase one is the docs' read loop over those entries with a ``latest`` dict, phase two the second read
loop from ``from`` to ``to`` with ``rebatch``. No Spark, no windows, nothing shared with
``pulsar_model.compaction``. Ids are tuples ``(ledger_id, entry_id, batch_index)``; entry-level ids use
batch index ``-1``.

The four switches of docs §5.4, one per pull request:

* ``marker_dispatch`` - what the dispatcher does with a marker (and an aborted transactional message)
  read for ``__compaction``: ``"ack_fails"`` (before apache/pulsar#16205: it acknowledges the entry
  individually, the compactor subscription refuses, the compaction fails), ``"filtered"`` (markers and
  aborted messages never reach the reader; when the last entry is one of them phase one waits for it
  and times out), ``"delivered"`` (apache/pulsar#21718: markers reach the reader and phase one counts
  them as deleted; aborted messages are still filtered);
* ``batch_all_deleted`` - apache/pulsar#20980: a batch is deleted in phase one iff every message in it
  counted as deleted (``compacted_out`` slots are skipped, so they never count); before it iff any did;
* ``keep_null_key`` - key-less messages are kept (always before PIP-318, else ``retainNullKey``); when
  not kept they count as deleted in phase one.

No marker is ever written. A transaction is aborted when its abort marker (marker type 22, same
transaction id) is in the topic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

MessageId = tuple[int, int, int]
Position = tuple[int, int]
TxnId = tuple[int, int]
MarkerDispatch = Literal["ack_fails", "filtered", "delivered"]
Failure = Literal["compactor_ack_rejected", "phase_one_timeout"]

NOT_BATCHED = -1
TXN_ABORT = 22


@dataclass(frozen=True)
class Message:
    """One message of an entry (a batch slot, or the entry's only message)."""

    key: str | None
    payload_size: int
    null_value: bool = False
    compacted_out: bool = False
    # Non-batched only: the entry's metadata sets uncompressed_size. docs §5.4 compact_single: "size =
    # uncompressed_size if set, else the readable bytes of the entry buffer" (metadata included, > 0).
    uncompressed_size_set: bool = True

    @property
    def empty(self) -> bool:
        # docs §5.4: size <= 0 is a tombstone; a null value has no payload.
        return self.payload_size <= 0 or self.null_value

    @property
    def single_size_empty(self) -> bool:
        """compact_single's size test: without uncompressed_size the size is the whole entry (> 0)."""
        return self.empty and self.uncompressed_size_set


@dataclass(frozen=True)
class Entry:
    """One ledger entry: a non-batched message, a batch, or a marker; ``txn`` = its transaction id."""

    ledger_id: int
    entry_id: int
    messages: tuple[Message, ...]
    batched: bool = False
    marker_type: int | None = None
    txn: TxnId | None = None

    @property
    def id(self) -> MessageId:
        return (self.ledger_id, self.entry_id, NOT_BATCHED)

    @property
    def position(self) -> Position:
        return (self.ledger_id, self.entry_id)


@dataclass
class WrittenEntry:
    """An entry of the compacted ledger: original id plus, per slot, whether the message survived."""

    ledger_id: int
    entry_id: int
    batched: bool
    slots: list[tuple[int, bool]]  # (batch_index, survived); placeholders have survived=False


@dataclass
class Result:
    horizon: MessageId | None = None
    from_id: MessageId | None = None
    to_id: MessageId | None = None
    latest: dict[str, MessageId] = field(default_factory=dict)
    written: list[WrittenEntry] = field(default_factory=list)
    failure: Failure | None = None

    def retained(self) -> list[MessageId]:
        """Ids of the surviving messages (what ``compact`` returns), in ledger order."""
        out: list[MessageId] = []
        for w in self.written:
            for batch_index, survived in w.slots:
                if survived:
                    out.append((w.ledger_id, w.entry_id, batch_index))
        return out

    def placeholders(self) -> list[MessageId]:
        return [
            (w.ledger_id, w.entry_id, bi) for w in self.written for bi, survived in w.slots if not survived
        ]


def aborted_transactions(topic: Sequence[Entry]) -> set[TxnId]:
    """Transactions whose abort marker is in the topic (the transaction buffer's aborted set)."""
    return {e.txn for e in topic if e.marker_type == TXN_ABORT and e.txn is not None}


def compact(
    topic: Sequence[Entry],
    start: Position | None,
    *,
    marker_dispatch: MarkerDispatch,
    batch_all_deleted: bool,
    keep_null_key: bool,
) -> Result:
    """Run the dispatcher, phase one and phase two over ``topic`` (entries in order) after ``start``."""
    aborted = aborted_transactions(topic)
    reader = [e for e in topic if start is None or e.position > start]
    result = Result()
    # "if not reader.hasMessageAvailable(): return -1 (nothing to do)"
    if not reader:
        return result
    last = reader[-1].id  # getLastMessageId with the batch index dropped: the topic's last entry

    # ---------------------------------------------------------------- what the dispatcher delivers
    def is_aborted(e: Entry) -> bool:
        return e.marker_type is None and e.txn is not None and e.txn in aborted

    def is_filtered(e: Entry) -> bool:
        return is_aborted(e) or (e.marker_type is not None and marker_dispatch != "delivered")

    if marker_dispatch == "ack_fails" and any(e.marker_type is not None or is_aborted(e) for e in reader):
        result.failure = "compactor_ack_rejected"
        return result
    delivered = [e for e in reader if not is_filtered(e)]
    if not delivered or delivered[-1].id != last:
        result.failure = "phase_one_timeout"  # phase one keeps waiting for `last`
        return result

    # ---------------------------------------------------------------- phase one
    latest: dict[str, MessageId] = {}

    def compact_single(e: Entry) -> bool:
        m = e.messages[0]
        if m.key is None:
            return not keep_null_key
        if not m.single_size_empty:
            latest[m.key] = e.id
            return False
        latest.pop(m.key, None)
        return True

    def compact_batch(e: Entry) -> bool:
        deleted_count = 0
        for i, m in enumerate(e.messages):
            if m.compacted_out:
                continue
            if m.key is None:
                if not keep_null_key:
                    deleted_count += 1
                continue
            if m.payload_size > 0 and not m.null_value:
                latest[m.key] = (e.ledger_id, e.entry_id, i)
            else:
                latest.pop(m.key, None)
                deleted_count += 1
        if batch_all_deleted:
            return deleted_count == len(e.messages)
        return deleted_count > 0

    first: MessageId | None = None
    to: MessageId | None = None
    m_id: MessageId = last
    for e in delivered:
        m_id = e.id
        if e.marker_type is not None:
            deleted = True  # a delivered marker counts as deleted
        elif e.batched:
            deleted = compact_batch(e)
        else:
            deleted = compact_single(e)
        if first is None and not deleted:
            first = m_id
        if not deleted:
            to = m_id
        if m_id == last:
            break
    result.horizon = last
    result.from_id = first or m_id
    result.to_id = to or m_id
    result.latest = dict(latest)

    # ---------------------------------------------------------------- phase two
    reading = False
    for e in delivered:
        if e.id == result.from_id:
            reading = True  # "seek reader to 'from'"
        if not reading:
            continue
        if e.marker_type is not None:
            pass  # markers are never written
        elif e.batched:
            slots: list[tuple[int, bool]] = []
            for i, m in enumerate(e.messages):
                mid = (e.ledger_id, e.entry_id, i)
                if m.compacted_out:
                    keep = False
                elif m.key is None:
                    keep = keep_null_key
                else:
                    keep = latest.get(m.key) == mid and m.payload_size > 0 and not m.null_value
                slots.append((i, keep))
            if any(k for _, k in slots):
                result.written.append(WrittenEntry(e.ledger_id, e.entry_id, True, slots))
        else:
            m = e.messages[0]
            if m.key is None:
                if keep_null_key:
                    result.written.append(WrittenEntry(e.ledger_id, e.entry_id, False, [(NOT_BATCHED, True)]))
            elif latest.get(m.key) == e.id:
                if m.single_size_empty:
                    raise AssertionError("Compaction phase found empty record from sorted key-map")
                result.written.append(WrittenEntry(e.ledger_id, e.entry_id, False, [(NOT_BATCHED, True)]))
        if e.id == result.to_id:
            break  # "loop read m until m.id == to"
    return result
