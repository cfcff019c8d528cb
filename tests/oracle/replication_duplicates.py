"""Plain-Python oracle of failover duplicates of replicated subscriptions (docs §4.8, §4.5, §0.2, §1.2).

Written from docs/semantics/ and the contract of ``pulsar_model.replication.duplicates.failover_duplicates``
(its docstrings and ``schemas/replication_failover_duplicates.yaml``), not from its code: every number is
a straight loop over positions or messages.

Input are the same rows the Spark transform reads, as dicts (column name -> value) with positions as
``(ledger_id, entry_id)`` tuples, individually-deleted ranges as ``[(lower, upper), ...]`` (open-closed,
docs §1.2) and a marker's ``clusters`` as ``[(cluster, position), ...]``:

* ``cursors``: ``cluster, topic, cursor_name, cursor_kind, is_replicated, mark_delete_position,
  individually_deleted``;
* ``entries`` (the entry dump, or ``None``): ``cluster, topic, position, entry_size_bytes, producer_name,
  sequence_id, message_count, marker_type``;
* ``markers`` (or ``None``): ``cluster, topic, position, marker_type, replicated_from, local_position,
  clusters``;
* ``ledgers``: ``cluster, topic, ledger_id, entries`` (stats-internal's list: the open ledger listed 0);
* ``managed_ledgers``: ``cluster, topic, last_confirmed_entry, current_ledger_id,
  current_ledger_entries``.

The result maps ``(topic, subscription, source_cluster, target_cluster)`` to the output columns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Position = tuple[int, int]
Range = tuple[Position, Position]
RowDict = Mapping[str, Any]
PairKey = tuple[str, str, str, str]

#: MarkerType REPLICATED_SUBSCRIPTION_SNAPSHOT (docs §4.3).
SNAPSHOT = 12
#: cursors.cursor_kind of a subscription (schemas/cursors.yaml).
SUBSCRIPTION = "subscription"

#: Columns counted only when the target has the subscription's cursor (null otherwise).
COUNT_COLUMNS = (
    "remote_data_entries_after_mark_delete",
    "remote_data_messages_after_mark_delete",
    "failover_duplicate_messages",
    "failover_duplicate_entries",
    "failover_duplicate_bytes",
    "target_entries_complete",
    "consumed_on_source_entries_lower_bound",
    "consumed_on_source_entries_upper_bound",
)
OUTPUT_COLUMNS = (
    "method",
    "source_mark_delete_position",
    "target_cursor_exists",
    "target_mark_delete_position",
    "target_last_confirmed_entry",
    *COUNT_COLUMNS[:6],  # the transform's column order: the bound columns after the snapshot position
    "passed_snapshot_remote_position",
    *COUNT_COLUMNS[6:],
)


def acked_by_range(p: Position, ranges: Sequence[Range] | None) -> bool:
    """``p`` lies in one of the open-closed individually-deleted ranges ``(lower, upper]`` (docs §1.2)."""
    return any(lower < p <= upper for lower, upper in ranges or [])


def existing_entries(ledgers: Sequence[RowDict], ml: RowDict) -> list[Position]:
    """Every entry the ledger list says exists, in position order (docs §0.2: the open ledger is listed with
    0 entries and really holds ``currentLedgerEntries``; trimmed ledgers are absent)."""
    out: list[Position] = []
    for led in sorted(ledgers, key=lambda r: r["ledger_id"]):
        lid = led["ledger_id"]
        n = ml["current_ledger_entries"] if lid == ml["current_ledger_id"] else led["entries"]
        for e in range(n):
            out.append((lid, e))
    return out


def entries_after(
    existing: Sequence[Position], lower: Position, upper: Position, acked: Sequence[Range] | None
) -> int:
    """Existing entries ``p`` with ``lower < p <= upper`` that are not individually acked."""
    n = 0
    for p in existing:
        if lower < p <= upper and not acked_by_range(p, acked):
            n += 1
    return n


def messages_of(entry: RowDict) -> list[tuple[str, int]]:
    """``(producer, sequence id)`` of every message of a data entry: a batch of ``n`` holds
    ``sequence_id .. sequence_id + n - 1`` (duplicates module docstring)."""
    n = entry["message_count"]
    assert n >= 1, entry
    return [(entry["producer_name"], entry["sequence_id"] + i) for i in range(n)]


def passed_snapshot_position(
    markers: Sequence[RowDict], source: str, topic: str, source_md: Position, target: str
) -> Position | None:
    """The target's position in the newest SNAPSHOT the source wrote itself whose ``local_message_id`` the
    source mark-delete has passed (docs §4.5, §4.6); among several entries for the target the last wins
    (docs §4.4). Snapshots not naming the target give no bound."""
    best_local: Position | None = None
    best: Position | None = None
    for m in markers:
        if m["cluster"] != source or m["topic"] != topic or m["marker_type"] != SNAPSHOT:
            continue
        if m["replicated_from"] is not None or m["local_position"] is None:
            continue
        local = m["local_position"]
        if not local <= source_md:
            continue
        named = [p for c, p in (m["clusters"] or []) if c == target]
        if not named:
            continue
        if best_local is None or local > best_local:
            best_local, best = local, named[-1]
    return best


def failover_duplicates(
    cursors: Sequence[RowDict],
    entries: Sequence[RowDict] | None,
    markers: Sequence[RowDict] | None,
    ledgers: Sequence[RowDict],
    managed_ledgers: Sequence[RowDict],
) -> dict[PairKey, dict[str, Any]]:
    """One result per (topic, subscription, source, target): source = a cluster whose subscription cursor
    is replicated; target = every other cluster whose export has the topic."""
    mls = {(m["cluster"], m["topic"]): m for m in managed_ledgers}
    out: dict[PairKey, dict[str, Any]] = {}
    for src in cursors:
        if src["cursor_kind"] != SUBSCRIPTION or not src["is_replicated"]:
            continue
        topic, sub, source = src["topic"], src["cursor_name"], src["cluster"]
        if (source, topic) not in mls:
            continue
        for (target, t_topic), tml in sorted(mls.items()):
            if t_topic != topic or target == source:
                continue
            tcur = None
            for c in cursors:
                if (c["cluster"], c["topic"], c["cursor_name"], c["cursor_kind"]) == (
                    target,
                    topic,
                    sub,
                    SUBSCRIPTION,
                ):
                    tcur = c
            out[(topic, sub, source, target)] = _pair(
                src, tcur, tml, source, target, topic, entries, markers, ledgers
            )
    return out


def _pair(
    src: RowDict,
    tcur: RowDict | None,
    tml: RowDict,
    source: str,
    target: str,
    topic: str,
    entries: Sequence[RowDict] | None,
    markers: Sequence[RowDict] | None,
    ledgers: Sequence[RowDict],
) -> dict[str, Any]:
    smd, sidm = src["mark_delete_position"], src["individually_deleted"]
    lac = tml["last_confirmed_entry"]
    src_dump = [e for e in entries or [] if (e["cluster"], e["topic"]) == (source, topic)]
    tgt_dump = [e for e in entries or [] if (e["cluster"], e["topic"]) == (target, topic)]
    exact = bool(src_dump) and bool(tgt_dump)
    passed = None
    if markers is not None:
        passed = passed_snapshot_position(markers, source, topic, smd, target)
    row: dict[str, Any] = {
        "method": "exact" if exact else "snapshot_bounds",
        "source_mark_delete_position": smd,
        "target_cursor_exists": tcur is not None,
        "target_mark_delete_position": None if tcur is None else tcur["mark_delete_position"],
        "target_last_confirmed_entry": lac,
        "passed_snapshot_remote_position": passed,
    }
    nulls = dict.fromkeys(COUNT_COLUMNS)
    if tcur is None:  # the UPDATE would create the cursor at its initial position: nothing to count
        return row | nulls
    tmd, tidm = tcur["mark_delete_position"], tcur["individually_deleted"]
    existing = existing_entries([x for x in ledgers if (x["cluster"], x["topic"]) == (target, topic)], tml)
    upper = entries_after(existing, tmd, lac, tidm)
    # every target message in (target md, P] is stored on the source before local_message_id (docs §4.5)
    lower = 0 if passed is None else entries_after(existing, tmd, passed, tidm)
    row |= nulls | {
        "consumed_on_source_entries_lower_bound": lower,
        "consumed_on_source_entries_upper_bound": upper,
    }
    if not exact:
        return row
    # messages acknowledged on the source: at/before its md, in its acked ranges, or trimmed from it
    acked: set[tuple[str, int]] = set()
    first_seq: dict[str, int] = {}
    for e in src_dump:
        if e["marker_type"] is not None:
            continue
        for producer, seq in messages_of(e):
            if producer not in first_seq or seq < first_seq[producer]:
                first_seq[producer] = seq
            if e["position"] <= smd or acked_by_range(e["position"], sidm):
                acked.add((producer, seq))
    data_entries = data_messages = dup_messages = dup_entries = dup_bytes = 0
    exported_in_range: set[Position] = set()
    for e in tgt_dump:
        p = e["position"]
        if not (tmd < p <= lac) or acked_by_range(p, tidm):
            continue  # not redelivered after a failover
        exported_in_range.add(p)
        if e["marker_type"] is not None:
            continue  # markers are never delivered (docs §4.3, §8.5)
        data_entries += 1
        dups = 0
        for producer, seq in messages_of(e):
            data_messages += 1
            trimmed = producer in first_seq and seq < first_seq[producer]
            if (producer, seq) in acked or trimmed:
                dups += 1
        dup_messages += dups
        if dups > 0:
            dup_entries += 1
            dup_bytes += e["entry_size_bytes"]
    return row | {
        "remote_data_entries_after_mark_delete": data_entries,
        "remote_data_messages_after_mark_delete": data_messages,
        "failover_duplicate_messages": dup_messages,
        "failover_duplicate_entries": dup_entries,
        "failover_duplicate_bytes": dup_bytes,
        "target_entries_complete": all(
            p in exported_in_range for p in existing if tmd < p <= lac and not acked_by_range(p, tidm)
        ),
    }
