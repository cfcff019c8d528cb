"""Parser of ``pulsar-admin topics stats-internal`` documents (PersistentTopicInternalStats, docs §10.2).

One record (one topic or partition) gives one ``managed_ledgers`` row, one ``ledgers`` row per listed
ledger and one ``cursors`` row per cursor. Covers the shapes seen from 2.x to 4.x: ``offloaded`` or
``isOffloaded`` (the Go admin clients re-serialise LedgerInfo with ``isOffloaded`` and a ``timestamp``),
no/sentinel/real ``compactedLedger``, both ``individuallyDeletedMessages`` separators, and the
``lastLedgerWitchTimestamp`` typo of the Go clients' CursorStats.

Open (current) ledger rule (docs §0.2; ManagedLedgerImpl.State names): the last listed ledger is the
open one while the state holds an open ledger handle - ``LedgerOpened``, ``ClosingLedger`` (still
listed with entries 0 until closed) and ``WriteFailed`` (the failed ledger is listed until its close
completes). ``CreatingLedger`` lists the new ledger only in 2.x (added before the metadata update, with
entries 0 and size 0), so there the last ledger is current only if it is listed empty. Every other
state (``ClosedLedger``, ``Closed``, ``Fenced``, ``FencedForDeletion``, ``Terminated``, ``None``,
unknown) has no open ledger: ``current_ledger_id`` is null. Note that a ``Closed`` managed ledger may
still list its last ledger with entries 0 (closing does not update the list).
"""

from __future__ import annotations

import re
from typing import Any, Final

from pulsar_model.domain.topic_names import partition_index, partitioned_topic_name
from pulsar_model.ingest.parsers.common import (
    BAD_INDIVIDUALLY_DELETED,
    BAD_POSITION,
    BAD_VALUE,
    DUPLICATE_LEDGER,
    NO_ID,
    NOT_AN_OBJECT,
    Fields,
    Position,
    Record,
    Row,
    Rows,
    decode_cursor_name,
    idm_order_problems,
    position_struct,
    require_object,
    scan_individually_deleted,
    show,
)

#: States in which the last listed ledger is the open one (module docstring, docs §0.2).
OPEN_LEDGER_STATES: Final = frozenset({"LedgerOpened", "ClosingLedger", "WriteFailed"})
#: 2.x lists the ledger being created (entries 0, size 0) before its metadata update; 3.x+ does not.
CREATING_LEDGER_STATE: Final = "CreatingLedger"
#: ManagedLedgerImpl.State names seen from 2.x to 4.x; others are noted as unknown.
KNOWN_STATES: Final = frozenset(
    {
        "None",
        "LedgerOpened",
        "ClosingLedger",
        "ClosedLedger",
        "CreatingLedger",
        "Closed",
        "Fenced",
        "FencedForDeletion",
        "Terminated",
        "WriteFailed",
    }
)

#: Replicator cursors are ``<replicatorPrefix>.<remoteCluster>`` (default prefix pulsar.repl, docs §10.2).
REPLICATOR_PREFIX: Final = "pulsar.repl."
#: Compactor.COMPACTION_SUBSCRIPTION (docs §5, §10.2).
COMPACTION_CURSOR: Final = "__compaction"
#: MessageDeduplication's cursor (docs §10.2).
DEDUP_CURSOR: Final = "pulsar.dedup"
#: Reader subscriptions of the Java/C++/Go clients: [rolePrefix-]reader-<random> and
#: [rolePrefix-]multiTopicsReader-<10 hex> (ReaderImpl, MultiTopicsReaderImpl); non-durable (docs §7).
READER_NAME_RE: Final = re.compile(r"(?:.+-)?(?:reader|multiTopicsReader)-[0-9A-Za-z]{5,10}")
#: PersistentSubscription marks replicated subscriptions with this cursor property (value 1).
REPLICATED_SUBSCRIPTION_PROPERTY: Final = "pulsar.replicated.subscription"
#: compactedLedger {ledgerId: -1, entries: -1, size: -1} means "no compacted ledger" (docs §10.2).
NO_COMPACTED_LEDGER: Final = NO_ID
#: Typo of the Go admin clients (pulsarctl / pulsar-client-go pulsaradmin CursorStats JSON tag).
LAST_LEDGER_SWITCH_TYPO: Final = "lastLedgerWitchTimestamp"

_HINT: Final = "re-export with `pulsar-admin topics stats-internal`, which always writes it"

TOP_FIELDS: Final = frozenset(
    {
        "entriesAddedCounter",
        "numberOfEntries",
        "totalSize",
        "currentLedgerEntries",
        "currentLedgerSize",
        "lastLedgerCreatedTimestamp",
        "lastLedgerCreationFailureTimestamp",
        "waitingCursorsCount",
        "pendingAddEntriesCount",
        "lastConfirmedEntry",
        "state",
        "ledgers",
        "cursors",
        "properties",
        "compactedLedger",
        "schemaLedgers",
    }
)
LEDGER_FIELDS: Final = frozenset(
    {
        "ledgerId",
        "entries",
        "size",
        "offloaded",
        "isOffloaded",
        "metadata",
        "underReplicated",
        "properties",
        "timestamp",
    }
)
CURSOR_FIELDS: Final = frozenset(
    {
        "markDeletePosition",
        "readPosition",
        "waitingReadOp",
        "pendingReadOps",
        "messagesConsumedCounter",
        "cursorLedger",
        "cursorLedgerLastEntry",
        "individuallyDeletedMessages",
        "lastLedgerSwitchTimestamp",
        LAST_LEDGER_SWITCH_TYPO,
        "state",
        "active",
        "numberOfEntriesSinceFirstNotAckedMessage",
        "totalNonContiguousDeletedMessagesRange",
        "subscriptionHavePendingRead",
        "subscriptionHavePendingReplayRead",
        "properties",
    }
)


def cursor_kind(name: str) -> tuple[str, str | None]:
    """(cursor_kind, replicator_remote_cluster) from a decoded cursor name (docs §10.2)."""
    if name.startswith(REPLICATOR_PREFIX) and len(name) > len(REPLICATOR_PREFIX):
        return "replicator", name[len(REPLICATOR_PREFIX) :]
    if name == COMPACTION_CURSOR:
        return "compaction", None
    if name == DEDUP_CURSOR:
        return "dedup", None
    if READER_NAME_RE.fullmatch(name):
        return "reader", None
    return "subscription", None


def current_ledger_id(state: str | None, ledgers: list[tuple[int, int, int]]) -> int | None:
    """Open ledger id from the state and the listed (id, entries, size) ledgers (module docstring)."""
    if not ledgers:
        return None
    last_id, last_entries, last_size = ledgers[-1]
    if state in OPEN_LEDGER_STATES:
        return last_id
    if state == CREATING_LEDGER_STATE and last_entries == 0 and last_size == 0:
        return last_id
    return None


def parse_stats_internal(payload: Any, record: Record) -> Rows | None:
    """Rows of one stats-internal topic document: one managed_ledgers row, its ledgers and cursors."""
    doc = require_object(payload, record, "stats-internal (PersistentTopicInternalStats)")
    if doc is None:
        return None
    top = Fields(record, doc, "", "managed_ledgers", TOP_FIELDS, _HINT)
    if "lastConfirmedEntry" not in doc and ("creationDate" in doc or "modificationDate" in doc):
        record.problem(
            BAD_VALUE,
            "this looks like `topics info-internal` output (ManagedLedgerInfo); "
            "export `topics stats-internal`",
        )
    state = top.string("state")
    if state is not None and state not in KNOWN_STATES:
        record.note(f"unknown_state:{state}")
    lac = top.position("lastConfirmedEntry", required=True)
    total_size = top.long("totalSize", required=True, minimum=0)
    current_entries = top.long("currentLedgerEntries", required=True, minimum=0)
    current_size = top.long("currentLedgerSize", required=True, minimum=0)
    entries_added = top.long("entriesAddedCounter", minimum=0)
    number_of_entries = top.long("numberOfEntries", minimum=0)
    created_at = top.timestamp("lastLedgerCreatedTimestamp")
    properties = top.str_map("properties")
    compacted = _compacted_ledger(top)

    ledger_rows, listed = _ledgers(top, record)
    current = current_ledger_id(state, listed)
    if lac is not None and current is not None and lac[0] > current:
        record.problem(
            BAD_POSITION,
            f"lastConfirmedEntry {lac[0]}:{lac[1]} is in a ledger after the current ledger {current} (the "
            "last listed): a broker's LAC is never past its current ledger; re-export the topic's "
            "stats-internal",
        )
    for row in ledger_rows:
        row["is_current"] = current is not None and row["ledger_id"] == current
    cursor_rows = _cursors(top, record)
    if not record.ok:
        return None

    topic = record.topic or ""
    index = partition_index(topic)
    managed: Row = {
        "cluster": record.ctx.cluster,
        "topic": topic,
        "partitioned_topic": partitioned_topic_name(topic),
        "partition_index": index,
        "state": state,
        "entries_added_counter": entries_added,
        "number_of_entries": number_of_entries,
        "total_size_bytes": total_size,
        "current_ledger_id": current,
        "current_ledger_entries": current_entries,
        "current_ledger_size_bytes": current_size,
        "last_confirmed_entry": position_struct(lac),
        "last_ledger_created_at": created_at,
        "ledger_count": len(ledger_rows),
        "cursor_count": len(cursor_rows),
        "compacted_ledger_id": compacted[0],
        "compacted_ledger_entries": compacted[1],
        "compacted_ledger_size_bytes": compacted[2],
        "properties": properties,
    }
    for row in (*ledger_rows, *cursor_rows):
        row["cluster"] = record.ctx.cluster
        row["topic"] = topic
    return {"managed_ledgers": [managed], "ledgers": ledger_rows, "cursors": cursor_rows}


def _compacted_ledger(top: Fields) -> tuple[int | None, int | None, int | None]:
    value = top.get("compactedLedger")
    if value is None:
        return None, None, None
    if not isinstance(value, dict):
        top.bad("compactedLedger", value, "a LedgerInfo object")
        return None, None, None
    info = Fields(top.record, value, "compactedLedger", "ledgers", LEDGER_FIELDS, _HINT)
    ledger_id = info.long("ledgerId", required=True, minimum=NO_COMPACTED_LEDGER)
    if ledger_id is None or ledger_id == NO_COMPACTED_LEDGER:
        return None, None, None
    return ledger_id, info.long("entries", minimum=0), info.long("size", minimum=0)


def _ledgers(top: Fields, record: Record) -> tuple[list[Row], list[tuple[int, int, int]]]:
    value = top.get("ledgers")
    if value is None:
        top.missing("ledgers")
        return [], []
    if not isinstance(value, list):
        top.bad("ledgers", value, "a list of LedgerInfo objects")
        return [], []
    rows: list[Row] = []
    listed: list[tuple[int, int, int]] = []
    counts: dict[int, int] = {}
    for order, item in enumerate(value):
        if not isinstance(item, dict):
            record.problem(NOT_AN_OBJECT, f"ledgers[{order}] {show(item)} is not a LedgerInfo object")
            continue
        raw_id = item.get("ledgerId")
        where = (
            f"ledger {raw_id}"
            if isinstance(raw_id, int) and not isinstance(raw_id, bool)
            else f"ledgers[{order}]"
        )
        info = Fields(record, item, where, "ledgers", LEDGER_FIELDS, _HINT)
        ledger_id = info.long("ledgerId", required=True, minimum=0)
        entries = info.long("entries", required=True, minimum=0)
        size = info.long("size", required=True, minimum=0)
        offloaded = info.boolean("offloaded")
        if offloaded is None:
            offloaded = info.boolean("isOffloaded")
        under_replicated = info.boolean("underReplicated")
        closed_at = info.timestamp("timestamp")
        if ledger_id is None or entries is None or size is None:
            continue
        counts[ledger_id] = counts.get(ledger_id, 0) + 1
        listed.append((ledger_id, entries, size))
        rows.append(
            {
                "ledger_id": ledger_id,
                "entries": entries,
                "size_bytes": size,
                "offloaded": bool(offloaded),
                "under_replicated": under_replicated,
                "closed_at": closed_at,
                "is_current": False,
                "ledger_order": order,
            }
        )
    for ledger_id, count in counts.items():
        if count > 1:
            record.problem(
                DUPLICATE_LEDGER,
                f"ledger id {ledger_id} is listed {count} times in ledgers; a managed ledger lists each "
                "ledger once - re-export the topic",
            )
    ids = [entry[0] for entry in listed]
    if ids != sorted(ids):
        record.note("ledgers_not_sorted_by_id")
    return rows, listed


def _cursors(top: Fields, record: Record) -> list[Row]:
    value = top.get("cursors")
    if value is None:
        top.missing("cursors")
        return []
    if not isinstance(value, dict):
        top.bad("cursors", value, "a JSON object of cursor stats keyed by cursor name")
        return []
    rows: list[Row] = []
    for order, (raw_name, item) in enumerate(value.items()):
        name = decode_cursor_name(raw_name)
        where = f"cursor '{name}'"
        if not isinstance(item, dict):
            record.problem(
                NOT_AN_OBJECT, f"{where} is a JSON {type(item).__name__}, not a CursorStats object"
            )
            continue
        row = _cursor(Fields(record, item, where, "cursors", CURSOR_FIELDS, _HINT), name, order)
        if row is not None:
            rows.append(row)
    return rows


def _cursor(cur: Fields, name: str, order: int) -> Row | None:
    record = cur.record
    mark_delete = cur.position("markDeletePosition", required=True)
    read_position = cur.position("readPosition")
    ranges = _individually_deleted(cur, mark_delete)
    consumed = cur.long("messagesConsumedCounter")  # negative after recovery (-backlog), docs §1.8
    cursor_ledger = cur.long("cursorLedger", minimum=NO_ID)
    cursor_ledger_last_entry = cur.long("cursorLedgerLastEntry", minimum=NO_ID)
    state = cur.string("state")
    active = cur.boolean("active")
    # The Go admin clients write the typo'd key (with "" when they re-serialise Java output).
    if LAST_LEDGER_SWITCH_TYPO in cur.obj:
        record.note(f"typo:{LAST_LEDGER_SWITCH_TYPO}")
    if cur.present("lastLedgerSwitchTimestamp"):
        switched_at = cur.timestamp("lastLedgerSwitchTimestamp")
    else:
        switched_at = cur.timestamp(LAST_LEDGER_SWITCH_TYPO)
    since_first_not_acked = cur.long("numberOfEntriesSinceFirstNotAckedMessage")
    non_contiguous = cur.long("totalNonContiguousDeletedMessagesRange", bits=32)
    properties = cur.long_map("properties")
    if mark_delete is None:
        return None
    kind, remote = cursor_kind(name)
    replicated = bool(properties and properties.get(REPLICATED_SUBSCRIPTION_PROPERTY))
    return {
        "cursor_name": name,
        "cursor_order": order,
        "cursor_kind": kind,
        "is_durable": kind != "reader",
        "is_replicated": replicated,
        "replicator_remote_cluster": remote,
        "mark_delete_position": position_struct(mark_delete),
        "read_position": position_struct(read_position),
        "individually_deleted": [
            {"lower": position_struct(lower), "upper": position_struct(upper)} for lower, upper in ranges
        ],
        "messages_consumed_counter": consumed,
        "cursor_ledger_id": cursor_ledger,
        "cursor_ledger_last_entry": cursor_ledger_last_entry,
        "state": state,
        "is_active": active,
        "last_ledger_switch_at": switched_at,
        "number_of_entries_since_first_not_acked": since_first_not_acked,
        "total_non_contiguous_deleted_ranges": non_contiguous,
        "properties": properties,
    }


def _individually_deleted(cur: Fields, mark_delete: Position | None) -> list[tuple[Position, Position]]:
    key = "individuallyDeletedMessages"
    if not cur.present(key):
        return []
    text = cur.get(key)
    prefix = f"{cur.where}: {key}"
    if not isinstance(text, str):
        cur.record.problem(
            BAD_INDIVIDUALLY_DELETED, f"{prefix} {show(text)} is not a string; write '[]' when empty"
        )
        return []
    ranges, problems = scan_individually_deleted(text)
    problems += idm_order_problems(ranges, mark_delete)
    for problem in problems:
        cur.record.problem(BAD_INDIVIDUALLY_DELETED, f"{prefix} {problem}")
    return ranges
