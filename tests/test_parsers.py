"""Unit tests of the admin-export parsers (pulsar_model.ingest.parsers); pure Python, no Spark.

Fixtures under tests/fixtures/exports/ are hand-written exports in the shapes of Pulsar 2.8/2.9 (as the
Go admin tools re-serialise them), 2.10, 3.0 and 4.0, plus the docs §10.2 and §10.4 examples verbatim.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pulsar_model.domain.topic_names import partition_index, partitioned_topic_name
from pulsar_model.errors import ParseError
from pulsar_model.ingest.parsers import (
    REASON_CODES,
    TABLES_BY_KIND,
    ParseResult,
    RecordContext,
    cursor_kind,
    name_hint_from_file_name,
    parse_consumers_csv,
    parse_file,
    parse_individually_deleted,
    parse_jsonl_line,
    parse_position,
    parse_timestamp,
)
from pulsar_model.tables.contracts import contract, rows_to_arrow

FIXTURES = Path(__file__).parent / "fixtures" / "exports"
UTC = dt.UTC
SI = "us-east/stats-internal/"
ST = "us-east/stats/"
BQ = "us-east/backlog-quotas/"
CO = "us-east/consumers/"
SC = "us-east/schemas/"


# ----------------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------------
def check_accounting(result: ParseResult) -> ParseResult:
    assert result.records_in == result.records_accepted + result.records_quarantined
    assert result.records_quarantined == len(result.quarantine)
    for row in result.quarantine:
        assert row["reason_code"] in REASON_CODES
        assert row["reason"]
        assert len(row["record_excerpt"]) <= 512
    return result


def ctx(rel: str, locator: str = "file", hint: str | bool | None = True) -> RecordContext:
    cluster, kind = rel.split("/")[:2]
    topic_hint = name_hint_from_file_name(rel) if hint is True else (hint or None)
    return RecordContext(cluster, kind, rel, locator, topic_hint)


def parse_fixture(rel: str) -> ParseResult:
    kind = rel.split("/")[1]
    data = (FIXTURES / rel).read_bytes()
    if rel.endswith(".csv"):
        return check_accounting(parse_consumers_csv(data, ctx(rel)))
    return check_accounting(parse_file(kind, data, ctx(rel)))


def parse_lines(rel: str) -> list[ParseResult]:
    kind = rel.split("/")[1]
    results = []
    for number, line in enumerate((FIXTURES / rel).read_bytes().split(b"\n"), start=1):
        if line.strip():
            results.append(check_accounting(parse_jsonl_line(kind, line, ctx(rel, f"line {number}", None))))
    return results


def parse_doc(kind: str, doc: Any, topic: str | None = "persistent://t/ns/topic-a") -> ParseResult:
    """Parse a document given as a Python value (written to JSON) as a per-topic file."""
    data = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    context = RecordContext("us-east", kind, f"us-east/{kind}/x.json", "file", topic)
    return check_accounting(parse_file(kind, data, context))


def ts(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).astimezone(UTC)


def pos(ledger: int, entry: int) -> dict[str, int]:
    return {"ledger_id": ledger, "entry_id": entry}


def rng(a: int, b: int, c: int, d: int) -> dict[str, dict[str, int]]:
    return {"lower": pos(a, b), "upper": pos(c, d)}


def with_topic(rows: list[dict[str, Any]], topic: str, cluster: str = "us-east") -> list[dict[str, Any]]:
    return [{"cluster": cluster, "topic": topic, **row} for row in rows]


def ledger(
    ledger_id: int,
    entries: int,
    size: int,
    order: int,
    *,
    current: bool = False,
    offloaded: bool = False,
    under: bool | None = False,
    closed_at: dt.datetime | None = None,
) -> dict[str, Any]:
    return {
        "ledger_id": ledger_id,
        "entries": entries,
        "size_bytes": size,
        "offloaded": offloaded,
        "under_replicated": under,
        "closed_at": closed_at,
        "is_current": current,
        "ledger_order": order,
    }


def cursor(
    name: str,
    order: int,
    md: tuple[int, int],
    rp: tuple[int, int] | None,
    *,
    kind: str = "subscription",
    remote: str | None = None,
    replicated: bool = False,
    idm: list[dict[str, Any]] | None = None,
    consumed: int | None = None,
    cursor_ledger: int | None = None,
    last_entry: int | None = None,
    state: str | None = "Open",
    active: bool | None = None,
    switched: dt.datetime | None = None,
    since_not_acked: int | None = 1,
    ranges: int | None = 0,
    properties: dict[str, int] | None = None,
) -> dict[str, Any]:
    return {
        "cursor_name": name,
        "cursor_order": order,
        "cursor_kind": kind,
        "is_durable": kind != "reader",
        "is_replicated": replicated,
        "replicator_remote_cluster": remote,
        "mark_delete_position": pos(*md),
        "read_position": pos(*rp) if rp else None,
        "individually_deleted": idm or [],
        "messages_consumed_counter": consumed,
        "cursor_ledger_id": cursor_ledger,
        "cursor_ledger_last_entry": last_entry,
        "state": state,
        "is_active": active,
        "last_ledger_switch_at": switched,
        "number_of_entries_since_first_not_acked": since_not_acked,
        "total_non_contiguous_deleted_ranges": ranges,
        "properties": {} if properties is None else properties,
    }


def managed(topic: str, **values: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "cluster": "us-east",
        "topic": topic,
        "partitioned_topic": None,
        "partition_index": -1,
        "compacted_ledger_id": None,
        "compacted_ledger_entries": None,
        "compacted_ledger_size_bytes": None,
        "properties": None,
    }
    row.update(values)
    return row


def only_quarantine(result: ParseResult) -> dict[str, Any]:
    assert result.records_in == 1 and result.records_quarantined == 1, result
    assert all(rows == [] for rows in result.rows.values())
    return result.quarantine[0]


# ----------------------------------------------------------------------------------------------------
# stats-internal: exact rows per Pulsar generation
# ----------------------------------------------------------------------------------------------------
def test_parse_file_spec_10_2_example_gives_exact_rows() -> None:
    """docs §10.2 example, verbatim: open ledger 13, LAC 12:9, sub1 md 11:4 with range (11:5..11:6]."""
    rel = SI + "persistent%3A%2F%2Fpublic%2Fdefault%2Fspec-example.json"
    topic = "persistent://public/default/spec-example"
    result = parse_fixture(rel)
    assert result.records_in == result.records_accepted == 1
    assert result.rows["managed_ledgers"] == [
        managed(
            topic,
            state="LedgerOpened",
            entries_added_counter=20,
            number_of_entries=20,
            total_size_bytes=20480,
            current_ledger_id=13,
            current_ledger_entries=0,
            current_ledger_size_bytes=0,
            last_confirmed_entry=pos(12, 9),
            last_ledger_created_at=ts("2024-01-01T00:00:00+00:00"),
            ledger_count=3,
            cursor_count=1,
        )
    ]
    assert result.rows["ledgers"] == with_topic(
        [ledger(11, 10, 10240, 0), ledger(12, 10, 10240, 1), ledger(13, 0, 0, 2, current=True)], topic
    )
    # lastLedgerSwitchTimestamp "..." is an elision: kept as null and noted, the record is accepted.
    assert result.rows["cursors"] == with_topic(
        [
            cursor(
                "sub1",
                0,
                (11, 4),
                (11, 7),
                idm=[rng(11, 5, 11, 6)],
                consumed=6,
                cursor_ledger=20,
                last_entry=3,
                active=True,
                since_not_acked=3,
                ranges=1,
            )
        ],
        topic,
    )
    assert result.notes == {"unparseable_timestamp:cursors.lastLedgerSwitchTimestamp": 1}


def test_parse_file_stats_internal_2x_go_shape_reads_is_offloaded_and_timestamps() -> None:
    rel = SI + "persistent%3A%2F%2Ftenant-a%2Fns1%2Forders-v28.json"
    topic = "persistent://tenant-a/ns1/orders-v28"
    result = parse_fixture(rel)
    assert result.rows["managed_ledgers"] == [
        managed(
            topic,
            state="LedgerOpened",
            entries_added_counter=162,
            number_of_entries=162,
            total_size_bytes=82944,
            current_ledger_id=9,
            current_ledger_entries=12,
            current_ledger_size_bytes=6144,
            last_confirmed_entry=pos(9, 11),
            last_ledger_created_at=ts("2021-05-02T23:00:00.123+00:00"),
            ledger_count=3,
            cursor_count=2,
        )
    ]
    assert result.rows["ledgers"] == with_topic(
        [
            ledger(3, 100, 51200, 0, offloaded=True, under=None, closed_at=ts("2021-05-03T00:00:00+00:00")),
            ledger(7, 50, 25600, 1, under=None, closed_at=ts("2021-05-03T01:00:00+00:00")),
            ledger(9, 0, 0, 2, current=True, under=None),
        ],
        topic,
    )
    assert result.rows["cursors"] == with_topic(
        [
            cursor(
                "my-sub",
                0,
                (7, 19),
                (7, 24),
                idm=[rng(7, 20, 7, 21), rng(7, 22, 7, 23)],  # ", " (Guava) separator
                consumed=122,
                cursor_ledger=15,
                last_entry=4,
                switched=ts("2021-05-03T00:12:00+00:00"),
                since_not_acked=5,
                ranges=2,
            ),
            cursor(
                "pulsar.repl.us-west",
                1,
                (9, 11),
                (9, 12),
                kind="replicator",
                remote="us-west",
                consumed=162,
                cursor_ledger=-1,
                last_entry=-1,
                state="NoLedger",
                switched=None,  # "1970-01-01T00:00:00Z" = Pulsar's formatting of 0 (never)
            ),
        ],
        topic,
    )
    assert result.notes == {}


def test_parse_file_stats_internal_2_10_closed_ledger_has_no_current_ledger() -> None:
    rel = SI + "persistent%3A%2F%2Ftenant-a%2Fns1%2Finventory.json"
    topic = "persistent://tenant-a/ns1/inventory"
    result = parse_fixture(rel)
    assert result.rows["managed_ledgers"] == [
        managed(
            topic,
            state="ClosedLedger",
            entries_added_counter=40,
            number_of_entries=540,
            total_size_bytes=276480,
            current_ledger_id=None,
            current_ledger_entries=0,
            current_ledger_size_bytes=0,
            last_confirmed_entry=pos(25, 39),
            last_ledger_created_at=ts("2022-08-10T09:00:00.500+00:00"),
            ledger_count=2,
            cursor_count=3,
            compacted_ledger_id=88,
            compacted_ledger_entries=40,
            compacted_ledger_size_bytes=4096,
            properties={},
        )
    ]
    assert result.rows["ledgers"] == with_topic([ledger(21, 500, 256000, 0), ledger(25, 40, 20480, 1)], topic)
    assert result.rows["cursors"] == with_topic(
        [
            cursor(
                "inventory-sync",
                0,
                (21, 499),
                (25, 12),
                idm=[rng(25, 1, 25, 3), rng(25, 5, 25, 9)],  # "," (long-pair set) separator
                consumed=-32,  # negative after recovery (-backlog), docs §1.8
                cursor_ledger=30,
                last_entry=17,
                active=True,
                switched=ts("2022-08-10T08:55:10.250+00:00"),
                since_not_acked=12,
                ranges=2,
            ),
            cursor(
                "__compaction",
                1,
                (25, 39),
                (25, 40),
                kind="compaction",
                consumed=0,
                cursor_ledger=31,
                last_entry=2,
                active=False,
                switched=ts("2022-08-10T09:00:01+00:00"),
                properties={"CompactedTopicLedger": 88},
            ),
            cursor(
                "reader-3f9a1c2b7d",
                2,
                (25, 9),
                (25, 10),
                kind="reader",
                consumed=-30,
                cursor_ledger=-1,
                last_entry=-1,
                active=True,
            ),
        ],
        topic,
    )


def test_parse_file_stats_internal_3_0_sentinel_properties_replicated_and_encoded_names() -> None:
    rel = SI + "persistent%3A%2F%2Ftenant-a%2Fns1%2Fpayments.json"
    topic = "persistent://tenant-a/ns1/payments"
    result = parse_fixture(rel)
    assert result.rows["managed_ledgers"] == [
        managed(
            topic,
            state="LedgerOpened",
            entries_added_counter=203,
            number_of_entries=1203,
            total_size_bytes=1256448,
            current_ledger_id=17,
            current_ledger_entries=3,
            current_ledger_size_bytes=3072,
            last_confirmed_entry=pos(17, 2),
            last_ledger_created_at=ts("2023-06-01T12:00:00+00:00"),  # "+0000" offset form
            ledger_count=3,
            cursor_count=4,
            properties={"team": "payments"},
        )
    ]
    assert result.rows["ledgers"] == with_topic(
        [
            ledger(14, 1000, 1048576, 0, offloaded=True),
            ledger(15, 200, 204800, 1),
            ledger(17, 0, 0, 2, current=True),
        ],
        topic,
    )
    assert result.rows["cursors"] == with_topic(
        [
            cursor(
                "payments-sub",
                0,
                (15, -1),
                (15, 9),
                replicated=True,
                idm=[rng(15, 3, 15, 7)],
                consumed=5,
                cursor_ledger=40,
                last_entry=6,
                active=True,
                switched=ts("2023-06-01T11:58:00+00:00"),
                since_not_acked=9,
                ranges=1,
                properties={"pulsar.replicated.subscription": 1},
            ),
            cursor(
                "pulsar.dedup",
                1,
                (17, 2),
                (17, 3),
                kind="dedup",
                consumed=203,
                cursor_ledger=41,
                last_entry=0,
                active=False,
                switched=ts("2023-06-01T11:59:00+00:00"),
            ),
            cursor(
                "pulsar.repl.us-west",
                2,
                (17, 1),
                (17, 2),
                kind="replicator",
                remote="us-west",
                consumed=202,
                cursor_ledger=42,
                last_entry=3,
                active=True,
                switched=ts("2023-06-01T11:59:30+00:00"),
            ),
            cursor(
                "audit log/v2",  # "audit+log%2Fv2" URL-decoded like Java's URLDecoder
                3,
                (14, 500),
                (14, 501),
                consumed=-702,
                cursor_ledger=43,
                last_entry=1,
                active=False,
                switched=ts("2023-06-01T10:00:00+00:00"),
            ),
        ],
        topic,
    )


def test_parse_file_stats_internal_4_0_cross_ledger_ranges_typo_and_unknown_fields() -> None:
    rel = SI + "persistent%3A%2F%2Ftenant-b%2Fns2%2Fclicks.json"
    topic = "persistent://tenant-b/ns2/clicks"
    result = parse_fixture(rel)
    assert result.rows["managed_ledgers"] == [
        managed(
            topic,
            state="ClosingLedger",  # the closing ledger is still the listed open ledger
            entries_added_counter=165,
            number_of_entries=165,
            total_size_bytes=84480,
            current_ledger_id=22,
            current_ledger_entries=5,
            current_ledger_size_bytes=2560,
            last_confirmed_entry=pos(22, 4),
            last_ledger_created_at=None,
            ledger_count=3,
            cursor_count=3,
            properties={},
        )
    ]
    assert result.rows["ledgers"] == with_topic(
        [ledger(20, 100, 51200, 0), ledger(21, 60, 30720, 1), ledger(22, 0, 0, 2, current=True)], topic
    )
    assert result.rows["cursors"] == with_topic(
        [
            cursor(
                "clicks-agg",
                0,
                (20, 96),
                (22, 3),
                idm=[rng(20, 97, 21, 0), rng(21, 1, 21, 3), rng(22, -1, 22, 2)],
                consumed=106,
                cursor_ledger=50,
                last_entry=9,
                active=True,
                switched=None,  # ""
                since_not_acked=72,
                ranges=3,
            ),
            cursor(
                "clicks-audit",
                1,
                (21, 59),
                (22, 0),
                consumed=160,
                cursor_ledger=51,
                last_entry=4,
                active=False,
                switched=ts("2025-02-01T10:00:00.500+00:00"),  # from lastLedgerWitchTimestamp
            ),
            cursor(
                "multiTopicsReader-9c0ffee123",
                2,
                (22, 4),
                (22, 5),
                kind="reader",
                consumed=165,
                cursor_ledger=-1,
                last_entry=-1,
                active=True,
                switched=None,  # null
            ),
        ],
        topic,
    )
    assert result.notes == {
        "unknown_field:managed_ledgers.ledgerRolloverReason": 1,
        "unknown_field:ledgers.ensembleSize": 3,
        "unknown_field:cursors.lastActive": 1,
        "typo:lastLedgerWitchTimestamp": 1,
    }


def test_parse_file_partitioned_wrapper_gives_one_record_per_partition() -> None:
    rel = SI + "persistent%3A%2F%2Ftenant-a%2Fns1%2Fevents.json"
    result = parse_fixture(rel)
    assert (result.records_in, result.records_accepted) == (2, 2)
    base = "persistent://tenant-a/ns1/events"
    assert result.rows["managed_ledgers"] == [
        managed(
            f"{base}-partition-0",
            partitioned_topic=base,
            partition_index=0,
            state="LedgerOpened",
            entries_added_counter=5,
            number_of_entries=5,
            total_size_bytes=500,
            current_ledger_id=31,
            current_ledger_entries=5,
            current_ledger_size_bytes=500,
            last_confirmed_entry=pos(31, 4),
            last_ledger_created_at=ts("2024-03-01T00:00:00+00:00"),
            ledger_count=1,
            cursor_count=1,
            properties={},
        ),
        managed(
            f"{base}-partition-1",
            partitioned_topic=base,
            partition_index=1,
            state="LedgerOpened",
            entries_added_counter=3,
            number_of_entries=3,
            total_size_bytes=300,
            current_ledger_id=32,
            current_ledger_entries=3,
            current_ledger_size_bytes=300,
            last_confirmed_entry=pos(32, 2),
            last_ledger_created_at=ts("2024-03-01T00:00:01+00:00"),
            ledger_count=1,
            cursor_count=1,
            properties={},
        ),
    ]
    assert [(c["topic"], c["mark_delete_position"]) for c in result.rows["cursors"]] == [
        (f"{base}-partition-0", pos(31, 4)),
        (f"{base}-partition-1", pos(32, 1)),
    ]


def test_parse_file_partitioned_wrapper_quarantines_only_the_bad_partition() -> None:
    doc = json.loads((FIXTURES / SI / "persistent%3A%2F%2Ftenant-a%2Fns1%2Fevents.json").read_text())
    doc["partitions"]["persistent://tenant-a/ns1/events-partition-1"]["lastConfirmedEntry"] = "abc:1"
    result = parse_doc("stats-internal", doc, "persistent://tenant-a/ns1/events")
    assert (result.records_in, result.records_accepted, result.records_quarantined) == (2, 1, 1)
    row = result.quarantine[0]
    assert row["topic"] == "persistent://tenant-a/ns1/events-partition-1"
    assert row["record_locator"] == "file partition persistent://tenant-a/ns1/events-partition-1"
    assert row["reason_code"] == "bad_position" and '"abc:1"' in row["reason"]
    assert [m["topic"] for m in result.rows["managed_ledgers"]] == [
        "persistent://tenant-a/ns1/events-partition-0"
    ]


def test_parse_jsonl_line_envelopes_give_topic_and_partition_index() -> None:
    results = parse_lines(SI + "batch.jsonl")
    assert [r.records_accepted for r in results] == [1, 1]
    rows = [r.rows["managed_ledgers"][0] for r in results]
    assert [
        (m["topic"], m["partitioned_topic"], m["partition_index"], m["current_ledger_id"]) for m in rows
    ] == [
        ("persistent://tenant-c/ns3/alpha", None, -1, 61),
        ("persistent://tenant-c/ns3/beta-partition-3", "persistent://tenant-c/ns3/beta", 3, 62),
    ]
    assert results[1].rows["cursors"][0]["mark_delete_position"] == pos(62, -1)


@pytest.mark.parametrize(
    ("state", "last", "expected"),
    [
        ("LedgerOpened", (13, 0, 0), 13),
        ("ClosingLedger", (13, 0, 0), 13),
        ("WriteFailed", (13, 0, 0), 13),
        ("CreatingLedger", (13, 0, 0), 13),  # 2.x lists the ledger being created, empty
        ("CreatingLedger", (13, 5, 500), None),  # 3.x+: the new ledger is not listed yet
        ("ClosedLedger", (13, 5, 500), None),
        ("Closed", (13, 0, 0), None),
        ("Fenced", (13, 0, 0), None),
        ("Terminated", (13, 5, 500), None),
        ("SomethingNew", (13, 0, 0), None),
    ],
)
def test_parse_file_current_ledger_follows_the_managed_ledger_state(
    state: str, last: tuple[int, int, int], expected: int | None
) -> None:
    doc = _minimal_internal()
    doc["state"] = state
    doc["ledgers"] = [
        {"ledgerId": 12, "entries": 10, "size": 1000},
        {"ledgerId": last[0], "entries": last[1], "size": last[2]},
    ]
    result = parse_doc("stats-internal", doc)
    assert result.rows["managed_ledgers"][0]["current_ledger_id"] == expected
    assert [r["is_current"] for r in result.rows["ledgers"]] == [False, expected is not None]


def _minimal_internal() -> dict[str, Any]:
    return {
        "entriesAddedCounter": 3,
        "numberOfEntries": 3,
        "totalSize": 300,
        "currentLedgerEntries": 3,
        "currentLedgerSize": 300,
        "lastConfirmedEntry": "12:2",
        "state": "LedgerOpened",
        "ledgers": [{"ledgerId": 12, "entries": 0, "size": 0}],
        "cursors": {
            "sub1": {
                "markDeletePosition": "12:0",
                "readPosition": "12:1",
                "individuallyDeletedMessages": "[]",
            }
        },
    }


# ----------------------------------------------------------------------------------------------------
# stats-internal: every bad-input class quarantines the whole record with a reason naming the value
# ----------------------------------------------------------------------------------------------------
def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        target: Any = doc
        keys = path.split(".")
        for key in keys[:-1]:
            target = target[int(key)] if isinstance(target, list) else target[key]
        last = keys[-1]
        if value is _DELETE:
            del target[last]
        elif isinstance(target, list):
            target[int(last)] = value
        else:
            target[last] = value

    return mutate


_DELETE = object()


@pytest.mark.parametrize(
    ("mutate", "code", "words"),
    [
        (_set("lastConfirmedEntry", _DELETE), "missing_field", "lastConfirmedEntry is missing"),
        (_set("ledgers", _DELETE), "missing_field", "ledgers is missing"),
        (
            _set("cursors.sub1.markDeletePosition", _DELETE),
            "missing_field",
            "cursor 'sub1': markDeletePosition is missing",
        ),
        (_set("lastConfirmedEntry", "abc:1"), "bad_position", 'lastConfirmedEntry "abc:1" is not a position'),
        (_set("lastConfirmedEntry", "-2:0"), "bad_position", "ledger id -2 is negative"),
        (
            _set("lastConfirmedEntry", "13:0"),
            "bad_position",
            "lastConfirmedEntry 13:0 is in a ledger after the current ledger 12",
        ),
        (_set("cursors.sub1.markDeletePosition", "12:-2"), "bad_position", "entry id -2 is below -1"),
        (
            _set("cursors.sub1.readPosition", "-1:5"),
            "bad_position",
            "ledger id -1 is only allowed in the EARLIEST",
        ),
        (
            _set("cursors.sub1.individuallyDeletedMessages", "[(12:6..12:5]]"),
            "bad_individually_deleted",
            "cursor 'sub1': individuallyDeletedMessages range (12:6..12:5] has lower >= upper; "
            "ranges must be open-closed (lower, upper] with lower < upper",
        ),
        (
            _set("cursors.sub1.individuallyDeletedMessages", "[(12:3..12:5],(12:1..12:2]]"),
            "bad_individually_deleted",
            "range (12:1..12:2] overlaps or comes before range (12:3..12:5]",
        ),
        (
            _set("cursors.sub1.individuallyDeletedMessages", "[(12:1..12:4],(12:3..12:6]]"),
            "bad_individually_deleted",
            "ranges must be sorted and disjoint",
        ),
        (
            _set("cursors.sub1.individuallyDeletedMessages", "[(11:5..12:0]]"),
            "bad_individually_deleted",
            "range (11:5..12:0] is not after markDeletePosition 12:0",
        ),
        (
            _set("cursors.sub1.individuallyDeletedMessages", "[(12:1..12:2];(12:3..12:4]]"),
            "bad_individually_deleted",
            "separate ranges with ',' or ', '",
        ),
        (
            _set("cursors.sub1.individuallyDeletedMessages", "(12:1..12:2]"),
            "bad_individually_deleted",
            "not a list",
        ),
        (
            _set("cursors.sub1.individuallyDeletedMessages", 7),
            "bad_individually_deleted",
            "7 is not a string",
        ),
        (_set("ledgers.0.size", -5), "negative_value", "ledger 12: size -5 is negative"),
        (_set("ledgers.0.entries", -1), "negative_value", "ledger 12: entries -1 is negative"),
        (_set("totalSize", -1), "negative_value", "totalSize -1 is negative"),
        (_set("ledgers.0.ledgerId", -3), "negative_value", "ledgerId -3 is negative"),
        (_set("cursors.sub1.cursorLedger", -2), "negative_value", "cursorLedger -2 is below -1"),
        (
            _set(
                "ledgers",
                [{"ledgerId": 12, "entries": 0, "size": 0}, {"ledgerId": 12, "entries": 0, "size": 0}],
            ),
            "duplicate_ledger",
            "ledger id 12 is listed 2 times",
        ),
        (_set("totalSize", "300"), "bad_value", 'totalSize "300" is not an integer'),
        (_set("totalSize", True), "bad_value", "totalSize true is not an integer"),
        (_set("totalSize", 2**63), "bad_value", "within the signed 64-bit range"),
        (_set("ledgers", {"12": {}}), "bad_value", "ledgers"),
        (_set("cursors", []), "bad_value", "cursors [] is not a JSON object"),
        (_set("cursors.sub1", "x"), "not_an_object", "cursor 'sub1' is a JSON str"),
        (_set("ledgers.0", 12), "not_an_object", "ledgers[0] 12 is not a LedgerInfo object"),
        (_set("cursors.sub1.properties", {"a": "b"}), "bad_value", "64-bit integers"),
        (_set("properties", {"a": {"b": 1}}), "bad_value", "string values"),
        (_set("cursors.sub1.active", "yes"), "bad_value", 'active "yes" is not true or false'),
    ],
)
def test_parse_file_stats_internal_bad_input_quarantines_whole_record(
    mutate: Callable[[dict[str, Any]], None], code: str, words: str
) -> None:
    doc = _minimal_internal()
    mutate(doc)
    row = only_quarantine(parse_doc("stats-internal", doc))
    assert row["reason_code"] == code
    assert words in row["reason"], row["reason"]
    assert row["source"] == "stats-internal"
    assert row["cluster"] == "us-east" and row["topic"] == "persistent://t/ns/topic-a"
    assert row["record_locator"] == "file" and row["source_file"] == "us-east/stats-internal/x.json"


def test_parse_file_reason_lists_every_problem_and_takes_the_first_code() -> None:
    doc = _minimal_internal()
    doc["ledgers"][0]["size"] = -1
    doc["cursors"]["sub1"]["markDeletePosition"] = "x:y"
    doc["cursors"]["sub1"]["individuallyDeletedMessages"] = "[(12:6..12:5]]"
    del doc["lastConfirmedEntry"]
    row = only_quarantine(parse_doc("stats-internal", doc))
    assert row["reason_code"] == "missing_field"
    for words in (
        "lastConfirmedEntry is missing",
        "size -1 is negative",
        '"x:y" is not a position',
        "(12:6..12:5]",
    ):
        assert words in row["reason"]


@pytest.mark.parametrize(
    ("data", "code", "words"),
    [
        (b'{"totalSize": 1,', "malformed_json", "not valid JSON"),
        (b"", "malformed_json", "not valid JSON"),
        (b'{"a": 1, "a": 2}', "malformed_json", 'key "a" appears twice'),
        (b'{"x": "\xff\xfe"}', "invalid_utf8", "not valid UTF-8 (byte 0xff at offset 7)"),
        (b"[1, 2]", "not_an_object", "JSON array"),
        (b'"text"', "not_an_object", "JSON string"),
        (b'{"creationDate": "2024", "ledgers": []}', "bad_value", "info-internal"),
    ],
)
def test_parse_file_undecodable_documents_are_quarantined(data: bytes, code: str, words: str) -> None:
    row = only_quarantine(parse_doc("stats-internal", data))
    assert row["reason_code"] == code
    assert words in row["reason"], row["reason"]
    assert row["record_excerpt"] == data.decode("utf-8", "replace")[:512]


def test_parse_file_without_topic_hint_is_missing_topic() -> None:
    row = only_quarantine(parse_doc("stats-internal", _minimal_internal(), topic=None))
    assert row["reason_code"] == "missing_topic" and "URL-encoded full topic name" in row["reason"]
    row = only_quarantine(parse_doc("stats-internal", _minimal_internal(), topic="orders"))
    assert row["reason_code"] == "missing_topic" and '"orders" is not a full topic name' in row["reason"]


def _line(envelope: Any) -> bytes:
    return json.dumps(envelope).encode()


@pytest.mark.parametrize(
    ("envelope", "code", "words"),
    [
        (
            {"cluster": "us-west", "topic": "persistent://t/ns/a", "stats": {}},
            "cluster_mismatch",
            '"us-west" differs',
        ),
        ({"cluster": "us-east", "stats": {}}, "missing_topic", 'envelope has no "topic"'),
        ({"cluster": "us-east", "topic": 5, "stats": {}}, "missing_topic", "5 is not a topic name"),
        ({"cluster": "us-east", "topic": "persistent://t/ns/a"}, "missing_field", 'no "stats" payload'),
        ([1], "not_an_object", "not an envelope object"),
    ],
)
def test_parse_jsonl_line_bad_envelopes_are_quarantined(envelope: Any, code: str, words: str) -> None:
    context = RecordContext("us-east", "stats-internal", "us-east/stats-internal/a.jsonl", "line 7", None)
    result = check_accounting(parse_jsonl_line("stats-internal", _line(envelope), context))
    row = only_quarantine(result)
    assert row["reason_code"] == code and words in row["reason"], row["reason"]
    assert row["record_locator"] == "line 7"


def test_parse_jsonl_line_cluster_mismatch_also_lists_payload_problems() -> None:
    doc = _minimal_internal()
    doc["totalSize"] = -4
    envelope = {"cluster": "eu", "topic": "persistent://t/ns/a", "stats": doc}
    context = RecordContext("us-east", "stats-internal", "us-east/stats-internal/a.jsonl", "line 1", None)
    row = only_quarantine(check_accounting(parse_jsonl_line("stats-internal", _line(envelope), context)))
    assert row["reason_code"] == "cluster_mismatch"
    assert "totalSize -4 is negative" in row["reason"]


def test_parse_jsonl_line_wrapper_in_a_foreign_envelope_is_one_quarantined_record() -> None:
    doc = json.loads((FIXTURES / SI / "persistent%3A%2F%2Ftenant-a%2Fns1%2Fevents.json").read_text())
    envelope = {"cluster": "us-west", "topic": "persistent://tenant-a/ns1/events", "stats": doc}
    context = RecordContext("us-east", "stats-internal", "us-east/stats-internal/a.jsonl", "line 3", None)
    row = only_quarantine(check_accounting(parse_jsonl_line("stats-internal", _line(envelope), context)))
    assert row["reason_code"] == "cluster_mismatch" and row["topic"] == "persistent://tenant-a/ns1/events"


def test_parse_jsonl_line_blank_line_is_no_record() -> None:
    context = RecordContext("us-east", "stats", "us-east/stats/a.jsonl", "line 2", None)
    result = check_accounting(parse_jsonl_line("stats", b"  \r", context))
    assert result.records_in == 0 and result.rows == {t: [] for t in TABLES_BY_KIND["stats"]}


def test_parse_file_unknown_kind_is_quarantined() -> None:
    row = only_quarantine(parse_doc("entries", {"a": 1}))
    assert row["reason_code"] == "unknown_kind"


# ----------------------------------------------------------------------------------------------------
# stats
# ----------------------------------------------------------------------------------------------------
def _consumer_row(
    topic: str, sub: str, sub_type: str, name: str, order: int, **values: Any
) -> dict[str, Any]:
    return {
        "cluster": "us-east",
        "topic": topic,
        "subscription": sub,
        "subscription_type": sub_type,
        "consumer_name": name,
        "connect_order": order,
        **values,
    }


def test_parse_file_stats_2_9_failover_subscription_and_replication() -> None:
    topic = "persistent://tenant-a/ns1/orders-v28"
    result = parse_fixture(ST + "persistent%3A%2F%2Ftenant-a%2Fns1%2Forders-v28.json")
    assert result.rows["topic_stats"] == [
        {
            "cluster": "us-east",
            "topic": topic,
            "stats_storage_size_bytes": 82944,
            "stats_backlog_size_bytes": 20480,
            "stats_msg_in_counter": 162,
            "stats_publishers": 1,
            "stats_backlog_quota_limit_size_bytes": None,
            "stats_backlog_quota_limit_time_seconds": None,
            "stats_oldest_backlog_message_age_seconds": None,
            "stats_deduplication_status": "Disabled",
            "stats_replication": [
                {
                    "remote_cluster": "us-west",
                    "replication_backlog": 0,
                    "connected": True,
                    "replication_delay_seconds": 0,
                    "msg_rate_out": 12.5,
                }
            ],
        }
    ]
    assert result.rows["subscription_stats"] == [
        {
            "cluster": "us-east",
            "topic": topic,
            "cursor_name": "my-sub",
            "subscription_type": "Failover",
            "is_durable": True,
            "is_replicated": False,
            "stats_msg_backlog": 40,
            "stats_backlog_size_bytes": 20480,
            "stats_active_consumer_name": "c-b",
            "stats_consumer_count": 2,
            "stats_last_mark_delete_advanced_at": ts("2021-05-03T02:01:02.500+00:00"),
        }
    ]
    common = {"client_version": "2.8.1"}
    assert result.rows["stats_consumers"] == [
        _consumer_row(
            topic, "my-sub", "Failover", "c-a", 0, address="/10.0.0.7:40112",
            connected_since="2021-05-03T00:05:00.001Z", available_permits=995, unacked_messages=0,
            is_active_in_stats=False, **common,
        ),
        _consumer_row(
            topic, "my-sub", "Failover", "c-b", 1, address="/10.0.0.8:40990",
            connected_since="2021-05-03T00:05:02.104Z", available_permits=997, unacked_messages=3,
            is_active_in_stats=True, **common,
        ),
    ]  # fmt: skip
    assert result.notes == {}


def test_parse_file_stats_3_x_shared_replicated_reader_and_quota_fields() -> None:
    topic = "persistent://tenant-a/ns1/payments"
    result = parse_fixture(ST + "persistent%3A%2F%2Ftenant-a%2Fns1%2Fpayments.json")
    (topic_row,) = result.rows["topic_stats"]
    assert topic_row == {
        "cluster": "us-east",
        "topic": topic,
        "stats_storage_size_bytes": 1256448,
        "stats_backlog_size_bytes": 1048576,
        "stats_msg_in_counter": 203,
        "stats_publishers": 0,
        "stats_backlog_quota_limit_size_bytes": 10737418240,
        "stats_backlog_quota_limit_time_seconds": 3600,
        "stats_oldest_backlog_message_age_seconds": 42,
        "stats_deduplication_status": "Enabled",
        "stats_replication": [
            {"remote_cluster": "us-west", "replication_backlog": 5, "connected": True,
             "replication_delay_seconds": 2, "msg_rate_out": 3.25},
            {"remote_cluster": "us-central", "replication_backlog": 120, "connected": False,
             "replication_delay_seconds": 0, "msg_rate_out": 0.0},
        ],
    }  # fmt: skip
    subs = [
        (s["cursor_name"], s["subscription_type"], s["is_durable"], s["is_replicated"],
         s["stats_msg_backlog"], s["stats_backlog_size_bytes"], s["stats_active_consumer_name"],
         s["stats_consumer_count"], s["stats_last_mark_delete_advanced_at"])
        for s in result.rows["subscription_stats"]
    ]  # fmt: skip
    assert subs == [
        ("payments-sub", "Shared", True, True, 208, -1, None, 2, None),
        ("audit log/v2", "Exclusive", True, False, 702, -1, "auditor", 1, ts("2023-06-01T10:00:00+00:00")),
        ("reader-a1b2c3d4e5", "Exclusive", False, False, 0, -1, "reader-6f1d2", 1, None),
    ]
    consumers = [
        (
            c["subscription"],
            c["consumer_name"],
            c["connect_order"],
            c["available_permits"],
            c["is_active_in_stats"],
        )
        for c in result.rows["stats_consumers"]
    ]
    assert consumers == [
        ("payments-sub", "pay-1", 0, 1000, False),
        ("payments-sub", "pay-2", 1, 998, False),
        ("audit log/v2", "auditor", 0, 0, True),
        ("reader-a1b2c3d4e5", "reader-6f1d2", 0, 1000, True),
    ]


def test_parse_file_stats_4_x_per_partition_document_gives_one_record_per_partition() -> None:
    result = parse_fixture(ST + "persistent%3A%2F%2Ftenant-a%2Fns1%2Fevents.json")
    assert (result.records_in, result.records_accepted) == (2, 2)
    base = "persistent://tenant-a/ns1/events"
    assert [(t["topic"], t["stats_storage_size_bytes"], t["stats_msg_in_counter"], t["stats_replication"])
            for t in result.rows["topic_stats"]] == [
        (f"{base}-partition-0", 500, 5, []),
        (f"{base}-partition-1", 300, 3, []),
    ]  # fmt: skip
    assert [(s["topic"], s["stats_active_consumer_name"]) for s in result.rows["subscription_stats"]] == [
        (f"{base}-partition-0", "worker-1"),
        (f"{base}-partition-1", "worker-2"),
    ]
    assert [
        (c["topic"], c["consumer_name"], c["is_active_in_stats"]) for c in result.rows["stats_consumers"]
    ] == [
        (f"{base}-partition-0", "worker-1", True),
        (f"{base}-partition-0", "worker-2", False),
        (f"{base}-partition-1", "worker-1", False),
        (f"{base}-partition-1", "worker-2", True),
    ]
    assert result.notes["partitioned_aggregate_ignored:stats"] == 1
    assert result.notes["unknown_field:subscription_stats.drainingHashesCount"] == 2


def test_parse_file_partitioned_stats_without_per_partition_is_quarantined() -> None:
    data = (FIXTURES / "_bad/stats/persistent%3A%2F%2Ftenant-a%2Fns1%2Fevents.json").read_bytes()
    context = RecordContext("us-east", "stats", "x.json", "file", "persistent://tenant-a/ns1/events")
    row = only_quarantine(check_accounting(parse_file("stats", data, context)))
    assert row["reason_code"] == "partitioned_aggregate"
    assert row["reason"] == "partitioned-stats without --per-partition: export with --per-partition"
    assert row["topic"] == "persistent://tenant-a/ns1/events"


@pytest.mark.parametrize(
    ("doc", "code", "words"),
    [
        ({}, "missing_field", "subscriptions is missing"),
        ({"subscriptions": []}, "bad_value", "subscriptions [] is not a JSON object"),
        ({"subscriptions": {"s": {"consumers": [{"availablePermits": 1}]}}}, "missing_field",
         "subscription 's' consumers[0]: consumerName is missing"),
        ({"subscriptions": {"s": {"consumers": {}}}}, "bad_value", "consumers {} is not a list"),
        ({"subscriptions": {}, "storageSize": -1}, "negative_value", "storageSize -1 is negative"),
        ({"subscriptions": {}, "replication": {"w": 3}}, "not_an_object", 'replication["w"] 3'),
        ({"subscriptions": {"s": {"msgBacklog": "many"}}}, "bad_value",
         'msgBacklog "many" is not an integer'),
    ],
)  # fmt: skip
def test_parse_file_stats_bad_input_is_quarantined(doc: dict[str, Any], code: str, words: str) -> None:
    row = only_quarantine(parse_doc("stats", doc))
    assert row["reason_code"] == code and words in row["reason"], row["reason"]


# ----------------------------------------------------------------------------------------------------
# backlog quotas
# ----------------------------------------------------------------------------------------------------
def _quota(
    rel: str, level: str, scope: str, quota_type: str, size: int | None, time: int | None, policy: str | None,
    shape: str, *, topic: str | None = None, broker: tuple[bool, int, bool] | None = None,
) -> dict[str, Any]:  # fmt: skip
    precise, interval, enabled = broker if broker else (None, None, None)
    return {
        "cluster": "us-east",
        "topic": topic,
        "level": level,
        "scope": scope,
        "quota_type": quota_type,
        "limit_size_bytes": size,
        "limit_time_seconds": time,
        "policy": policy,
        "source_shape": shape,
        "precise_time_check": precise,
        "check_interval_seconds": interval,
        "check_enabled": enabled,
        "source_file": rel,
    }


HOLD, EXC, EVICT = "producer_request_hold", "producer_exception", "consumer_backlog_eviction"
QUOTA_CASES = [
    (
        "broker.json",  # string values; GB 2.5 > 0 wins: (long)(2.5 * 1024^3)
        [("broker", "us-east", t, 2684354560, -1, HOLD, "broker_config")
         for t in ("destination_storage", "message_age")],
    ),
    (
        "tenant-a%2Fns1.json",  # docs §10.4 example verbatim
        [("namespace", "tenant-a/ns1", "destination_storage", 10737418240, -1, HOLD, "limit_size_time"),
         ("namespace", "tenant-a/ns1", "message_age", -1, 3600, EVICT, "limit_size_time")],
    ),
    (
        "tenant-a%2Flegacy27.json",
        [("namespace", "tenant-a/legacy27", "destination_storage", 10737418240, None, HOLD, "limit_only")],
    ),
    (
        "tenant-b%2Fns290.json",
        [("namespace", "tenant-b/ns290", "destination_storage", 2147483648, 0, EXC, "limit_size_time"),
         ("namespace", "tenant-b/ns290", "message_age", 0, 7200, HOLD, "limit_size_time")],
    ),
    (
        "tenant-c%2Fcli28.json",  # CLI text: "destination_storage    BacklogQuota{limit=..., policy=...}"
        [("namespace", "tenant-c/cli28", "destination_storage", 10737418240, None, HOLD, "plain_string")],
    ),
    (
        "tenant-c%2Fcli30.json",  # Lombok toString; limitSize=null falls back to limit
        [("namespace", "tenant-c/cli30", "destination_storage", 1073741824, -1, EXC, "plain_string"),
         ("namespace", "tenant-c/cli30", "message_age", -1, 600, EVICT, "plain_string")],
    ),
    (
        "tenant-c%2Fns-strings.json",
        [("namespace", "tenant-c/ns-strings", "destination_storage", 5368709120, -1, HOLD, "plain_string")],
    ),
    (
        "tenant-d%2Fpolicies.json",
        [("namespace", "tenant-d/policies", "destination_storage", 21474836480, -1, EVICT,
          "limit_size_time")],
    ),
    (
        "persistent%3A%2F%2Ftenant-a%2Fns1%2Fpayments.json",
        [("topic", "persistent://tenant-a/ns1/payments", "message_age", -1, 1800, EVICT, "limit_size_time")],
    ),
    ("tenant-a%2Fempty.json", []),
]  # fmt: skip


@pytest.mark.parametrize(("name", "expected"), QUOTA_CASES, ids=[c[0] for c in QUOTA_CASES])
def test_parse_file_backlog_quotas_every_shape_and_level(name: str, expected: list[tuple[Any, ...]]) -> None:
    rel = BQ + name
    result = parse_fixture(rel)
    assert (result.records_in, result.records_accepted) == (1, 1)
    rows = [
        _quota(
            rel, *case,
            topic=case[1] if case[0] == "topic" else None,
            broker=(False, 60, True) if case[0] == "broker" else None,
        )
        for case in expected
    ]  # fmt: skip
    assert result.rows["backlog_quotas"] == rows


def test_parse_jsonl_line_backlog_quotas_broker_namespace_topic_envelopes() -> None:
    rel = BQ + "quotas.jsonl"
    results = parse_lines(rel)
    assert [r.records_accepted for r in results] == [1, 1, 1]
    assert results[0].rows["backlog_quotas"] == [
        _quota(rel, "broker", "us-east", t, 1073741824, 86400, EXC, "broker_config", broker=(False, 60, True))
        for t in ("destination_storage", "message_age")
    ]
    assert results[0].notes == {
        "broker_default:backlogQuotaDefaultLimitGB": 1,
        "broker_default:preciseTimeBasedBacklogQuotaCheck": 1,
        "broker_default:backlogQuotaCheckIntervalInSeconds": 1,
        "broker_default:backlogQuotaCheckEnabled": 1,
    }
    assert results[1].rows["backlog_quotas"] == [
        _quota(rel, "namespace", "tenant-e/ns5", "message_age", -1, 300, HOLD, "limit_size_time")
    ]
    assert results[2].rows["backlog_quotas"] == []  # empty map: accepted, no rows


def test_parse_file_broker_config_missing_keys_take_spec_defaults() -> None:
    context = RecordContext(
        "us-east", "backlog-quotas", "us-east/backlog-quotas/broker.json", "file", "broker"
    )
    result = check_accounting(parse_file("backlog-quotas", b"{}", context))
    assert [(r["limit_size_bytes"], r["limit_time_seconds"], r["policy"], r["precise_time_check"],
             r["check_interval_seconds"], r["check_enabled"]) for r in result.rows["backlog_quotas"]] == [
        (-1, -1, HOLD, False, 60, True), (-1, -1, HOLD, False, 60, True)
    ]  # fmt: skip
    assert len(result.notes) == 7


@pytest.mark.parametrize(
    ("hint", "doc", "code", "words"),
    [
        ("tenant/ns", {"retentionTimeInMinutes": 10}, "unknown_quota_shape", "not a backlog-quota map"),
        ("tenant/ns", {"destination_storage": {"policy": HOLD}}, "unknown_quota_shape", "none of limit"),
        ("tenant/ns", {"destination_storage": 5}, "unknown_quota_shape", "is not a quota object"),
        ("tenant/ns", {"destination_storage": "Quota[size=1]"}, "unknown_quota_shape", "toString"),
        ("tenant/ns", {"destination_storage": {"limit": 1, "policy": "drop"}}, "bad_value", 'policy "drop"'),
        ("tenant/ns", {"destination_storage": {"limit": "1G", "policy": HOLD}}, "bad_value", 'limit "1G"'),
        (
            "tenant/ns",
            {"destination_storage": {"limit": 1}, "size": {}},
            "bad_value",
            'type "size" is unknown',
        ),
        ("tenant/ns", [1], "unknown_quota_shape", "JSON array"),
        (
            "broker",
            {"backlogQuotaDefaultLimitBytes": "ten"},
            "bad_value",
            'backlogQuotaDefaultLimitBytes "ten"',
        ),
        ("broker", {"backlogQuotaCheckEnabled": "maybe"}, "bad_value", "true or false"),
        ("broker", {"destination_storage": {"limit": 1}}, "unknown_quota_shape", "namespace-style quota map"),
        (None, {}, "missing_topic", "names no scope"),
        ("orders", {}, "missing_topic", "names neither the broker"),
    ],
)
def test_parse_file_backlog_quotas_bad_input_is_quarantined(
    hint: str | None, doc: Any, code: str, words: str
) -> None:
    context = RecordContext("us-east", "backlog-quotas", "us-east/backlog-quotas/x.json", "file", hint)
    row = only_quarantine(check_accounting(parse_file("backlog-quotas", json.dumps(doc).encode(), context)))
    assert row["reason_code"] == code and words in row["reason"], row["reason"]


def test_parse_file_backlog_quotas_empty_cli_output_is_an_empty_map() -> None:
    """`get-backlog-quotas` prints nothing for a namespace without quotas (CliCommand.print(Map))."""
    context = RecordContext("us-east", "backlog-quotas", "us-east/backlog-quotas/x.json", "file", "t/ns")
    result = check_accounting(parse_file("backlog-quotas", b"\n", context))
    assert (result.records_accepted, result.rows) == (1, {"backlog_quotas": []})


def test_parse_file_backlog_quotas_text_that_is_not_cli_output_is_malformed() -> None:
    context = RecordContext("us-east", "backlog-quotas", "us-east/backlog-quotas/x.json", "file", "t/ns")
    row = only_quarantine(check_accounting(parse_file("backlog-quotas", b"hello world\n", context)))
    assert row["reason_code"] == "malformed_json"


# ----------------------------------------------------------------------------------------------------
# consumers (client config)
# ----------------------------------------------------------------------------------------------------
def _client(
    topic: str, sub: str, sub_type: str | None, name: str, priority: int, order: int
) -> dict[str, Any]:
    return {
        "cluster": "us-east",
        "topic": topic,
        "subscription": sub,
        "subscription_type": sub_type,
        "consumer_name": name,
        "priority_level": priority,
        "listed_order": order,
    }


def test_parse_file_client_consumers_map_and_list_forms() -> None:
    topic = "persistent://tenant-a/ns1/orders-v28"
    result = parse_fixture(CO + "persistent%3A%2F%2Ftenant-a%2Fns1%2Forders-v28.json")
    assert result.rows["client_consumers"] == [
        _client(topic, "my-sub", "Failover", "c-a", 1, 0),
        _client(topic, "my-sub", "Failover", "c-b", 0, 1),
    ]
    topic = "persistent://tenant-a/ns1/payments"
    result = parse_fixture(CO + "persistent%3A%2F%2Ftenant-a%2Fns1%2Fpayments.json")
    assert result.rows["client_consumers"] == [
        _client(topic, "payments-sub", "Shared", "pay-1", 0, 0),
        _client(topic, "payments-sub", "Shared", "pay-2", 2, 1),
        _client(topic, "audit log/v2", "Exclusive", "auditor", 0, 0),  # no priorityLevel: client default 0
    ]
    assert result.notes == {"default_priority_level": 1}


def test_parse_consumers_csv_rows_are_records_in_listed_order() -> None:
    result = parse_fixture(CO + "client-config.csv")
    p0, p1 = "persistent://tenant-a/ns1/events-partition-0", "persistent://tenant-a/ns1/events-partition-1"
    assert result.rows["client_consumers"] == [
        _client(p0, "events-failover", "Failover", "worker-1", 0, 0),
        _client(p0, "events-failover", "Failover", "worker-2", 1, 1),
        _client(p1, "events-failover", "Failover", "worker-1", 0, 0),
        _client(p1, "events-failover", "Failover", "worker-2", 0, 1),
    ]
    assert result.records_in == 4


def test_parse_jsonl_line_client_consumers_envelope() -> None:
    (result,) = parse_lines(CO + "consumers.jsonl")
    topic = "persistent://tenant-b/ns2/clicks"
    assert result.rows["client_consumers"] == [
        _client(topic, "clicks-agg", "Key_Shared", "agg-a", 0, 0),
        _client(topic, "clicks-agg", "Key_Shared", "agg-b", 0, 1),
    ]


def test_parse_consumers_csv_bad_rows_quarantine_only_themselves() -> None:
    data = (
        b"topic,subscription,consumer_name,priority_level\n"
        b"persistent://t/ns/a,s,c1,0\n"
        b"persistent://t/ns/a,s,c2,-1\n"
        b"persistent://t/ns/a,s,c3,high\n"
        b",s,c4,1\n"
        b"persistent://t/ns/a,s\n"
        b"persistent://t/ns/a,s,c\xff5,1\n"
        b"\n"
        b"persistent://t/ns/a,s,c6,2\n"
    )
    context = RecordContext("us-east", "consumers", "us-east/consumers/c.csv", "file", "client-config")
    result = check_accounting(parse_consumers_csv(data, context))
    assert (result.records_in, result.records_accepted) == (7, 2)
    assert [(r["consumer_name"], r["listed_order"]) for r in result.rows["client_consumers"]] == [
        ("c1", 0),
        ("c6", 1),
    ]
    assert [(q["record_locator"], q["reason_code"]) for q in result.quarantine] == [
        ("line 3", "negative_value"),
        ("line 4", "bad_value"),
        ("line 5", "missing_topic"),
        ("line 6", "bad_csv"),
        ("line 7", "invalid_utf8"),
    ]


@pytest.mark.parametrize(
    "data", [b"", b"topic,subscription,consumer\n", b"topic,subscription,consumer_name,priority_level,x\n"]
)
def test_parse_consumers_csv_bad_header_quarantines_the_file(data: bytes) -> None:
    context = RecordContext("us-east", "consumers", "us-east/consumers/c.csv", "file", None)
    row = only_quarantine(check_accounting(parse_consumers_csv(data, context)))
    assert (
        row["reason_code"] == "bad_csv" and "topic,subscription,consumer_name,priority_level" in row["reason"]
    )


@pytest.mark.parametrize(
    ("doc", "code", "words"),
    [
        ({"subscriptions": {"s": {"consumers": [{"priorityLevel": 1}]}}}, "missing_field",
         "consumerName is missing"),
        ({"subscriptions": {"s": {"consumers": [{"consumerName": "a", "priorityLevel": -2}]}}},
         "negative_value", "priorityLevel -2 is negative"),
        ({"subs": {}}, "missing_field", "subscriptions is missing"),
        ([{"consumerName": "a"}], "missing_field", "item 0: subscription is missing"),
        ([{"subscription": "s", "consumerName": "a", "topic": "persistent://x/y/z"}], "bad_value", "differs"),
        ("x", "not_an_object", "JSON string"),
    ],
)  # fmt: skip
def test_parse_file_client_consumers_bad_input_is_quarantined(doc: Any, code: str, words: str) -> None:
    row = only_quarantine(parse_doc("consumers", doc))
    assert row["reason_code"] == code and words in row["reason"], row["reason"]


# ----------------------------------------------------------------------------------------------------
# schemas
# ----------------------------------------------------------------------------------------------------
def _schema(
    topic: str, rel: str, version: int, schema_type: str, definition: str | None, at: str | None, **kw: Any
) -> dict[str, Any]:
    return {
        "cluster": "us-east",
        "topic": topic,
        "version": version,
        "schema_type": schema_type,
        "schema_name": kw.get("name"),
        "definition": definition,
        "is_deleted": kw.get("deleted", False),
        "registered_at": ts(at) if at else None,
        "properties": kw.get("properties", {}),
        "source_file": rel,
    }


ORDER_V0 = (
    '{"type":"record","name":"Order","namespace":"com.example","fields":[{"name":"id","type":"string"},'
    '{"name":"amount","type":"long"}]}'
)


def test_parse_file_schemas_rest_get_all_versions() -> None:
    rel = SC + "persistent%3A%2F%2Ftenant-a%2Fns1%2Forders-v28.json"
    topic = "persistent://tenant-a/ns1/orders-v28"
    result = parse_fixture(rel)
    v1 = ORDER_V0[:-2] + ',{"name":"currency","type":"string","default":"EUR"}]}'
    assert result.rows["schema_versions"] == [
        _schema(topic, rel, 0, "AVRO", ORDER_V0, "2021-05-03T00:00:00+00:00"),
        _schema(
            topic, rel, 1, "AVRO", v1, "2021-05-04T00:00:00+00:00", properties={"__alwaysAllowNull": "true"}
        ),
    ]


def test_parse_file_schemas_deleted_version_is_flagged() -> None:
    rel = SC + "persistent%3A%2F%2Ftenant-a%2Fns1%2Fpayments.json"
    result = parse_fixture(rel)
    assert [(r["version"], r["schema_type"], r["is_deleted"], r["definition"] == "") for r in
            result.rows["schema_versions"]] == [
        (0, "AVRO", False, False), (1, "AVRO", False, False), (2, "NONE", True, True),
        (3, "AVRO", False, False),
    ]  # fmt: skip
    doc = [{"version": 5, "type": "NONE", "data": "", "timestamp": 0}]
    assert parse_doc("schemas", doc).rows["schema_versions"][0]["is_deleted"] is True


def test_parse_file_schemas_cli_single_version_with_object_schema() -> None:
    rel = SC + "persistent%3A%2F%2Ftenant-b%2Fns2%2Fclicks.json"
    result = parse_fixture(rel)
    definition = (
        '{"type":"record","name":"Click","namespace":"com.example","fields":[{"name":"url","type":["null",'
        '"string"],"default":null}]}'
    )
    assert result.rows["schema_versions"] == [
        _schema(
            "persistent://tenant-b/ns2/clicks", rel, 4, "JSON", definition, "2025-02-01T08:53:20+00:00",
            name="clicks", properties={"__jsr310ConversionEnabled": "false"},
        )
    ]  # fmt: skip


def test_parse_file_schemas_cli_all_versions_concatenated_documents() -> None:
    rel = SC + "persistent%3A%2F%2Ftenant-c%2Fns3%2Falpha.json"
    result = parse_fixture(rel)
    rows = result.rows["schema_versions"]
    assert [(r["version"], r["schema_name"], r["definition"]) for r in rows] == [
        (0, "alpha", '{"type":"record","name":"Alpha","fields":[{"name":"n","type":"int"}]}'),
        (1, "alpha", '{"type":"record","name":"Alpha","fields":[{"name":"n","type":"int"},{"name":"s","type":'
                     '["null","string"],"default":null}]}'),
    ]  # fmt: skip
    assert result.notes == {"version_from_order": 2, "base64_schema_decoded": 2}


@pytest.mark.parametrize(
    ("doc", "code", "words"),
    [
        ({"getSchemaResponses": [{"version": 0, "data": "x"}]}, "missing_field",
         "schema item 0: type is missing"),
        ({"getSchemaResponses": [{"version": 0, "type": "AVRO"}, {"version": 0, "type": "AVRO"}]},
         "bad_value", "version 0 is listed twice"),
        ({"getSchemaResponses": [{"version": -1, "type": "AVRO"}]}, "negative_value",
         "version -1 is negative"),
        ({"getSchemaResponses": 3}, "bad_value", "getSchemaResponses 3 is not a list"),
        ([5], "not_an_object", "schema item 0 5"),
        (7, "not_an_object", "JSON number"),
    ],
)  # fmt: skip
def test_parse_file_schemas_bad_input_is_quarantined(doc: Any, code: str, words: str) -> None:
    row = only_quarantine(parse_doc("schemas", doc))
    assert row["reason_code"] == code and words in row["reason"], row["reason"]


# ----------------------------------------------------------------------------------------------------
# rows fit the contracts
# ----------------------------------------------------------------------------------------------------
_INTERMEDIATE_COLUMNS = {
    "topic_stats": {
        "cluster", "topic", "stats_storage_size_bytes", "stats_backlog_size_bytes", "stats_msg_in_counter",
        "stats_publishers", "stats_backlog_quota_limit_size_bytes", "stats_backlog_quota_limit_time_seconds",
        "stats_oldest_backlog_message_age_seconds", "stats_deduplication_status", "stats_replication",
    },
    "subscription_stats": {
        "cluster", "topic", "cursor_name", "subscription_type", "is_durable", "is_replicated",
        "stats_msg_backlog", "stats_backlog_size_bytes", "stats_active_consumer_name", "stats_consumer_count",
        "stats_last_mark_delete_advanced_at",
    },
    "stats_consumers": {
        "cluster", "topic", "subscription", "subscription_type", "consumer_name", "connect_order", "address",
        "connected_since", "client_version", "available_permits", "unacked_messages", "is_active_in_stats",
    },
    "client_consumers": {
        "cluster", "topic", "subscription", "subscription_type", "consumer_name", "priority_level",
        "listed_order",
    },
}  # fmt: skip
_EXPORT_COLUMNS = {"export_id", "export_date", "exported_at", "pulsar_version"}


def _all_fixture_results() -> list[ParseResult]:
    results = []
    for path in sorted(FIXTURES.glob("us-east/*/*")):
        rel = path.relative_to(FIXTURES).as_posix()
        results.extend(parse_lines(rel) if rel.endswith(".jsonl") else [parse_fixture(rel)])
    return results


def test_parse_fixtures_every_fixture_is_accepted_and_rows_fit_the_contracts() -> None:
    results = _all_fixture_results()
    assert results and all(r.records_quarantined == 0 for r in results)
    quarantine_columns = set(contract("quarantine").column_names) - {"export_id", "export_date", "run_id"}
    for result in results:
        for table, rows in result.rows.items():
            if not rows:
                continue
            keys = set(rows[0])
            assert all(set(row) == keys for row in rows)
            if table in _INTERMEDIATE_COLUMNS:
                assert keys == _INTERMEDIATE_COLUMNS[table]
                continue
            table_contract = contract(table)
            assert keys <= set(table_contract.column_names) - _EXPORT_COLUMNS, keys - set(
                table_contract.column_names
            )
            for column in table_contract.columns:
                if column.name in keys and not column.nullable:
                    assert all(row[column.name] is not None for row in rows), (table, column.name)
            rows_to_arrow(rows, table, columns=sorted(keys))  # types convert
        for row in result.quarantine:
            assert set(row) == quarantine_columns


# ----------------------------------------------------------------------------------------------------
# value parsers
# ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [("12:9", (12, 9)), ("12:-1", (12, -1)), ("-1:-1", (-1, -1)),
     ("9223372036854775807:9223372036854775807", (2**63 - 1, 2**63 - 1))],
)  # fmt: skip
def test_parse_position_accepts_legal_positions(text: str, expected: tuple[int, int]) -> None:
    assert parse_position(text) == expected


@pytest.mark.parametrize(
    "text", ["abc:1", "12", "12:9:1", " 12:9", "-2:0", "-1:0", "3:-2", "9223372036854775808:0", "１２:3", ""]
)
def test_parse_position_rejects_impossible_positions(text: str) -> None:
    with pytest.raises(ParseError, match="position"):
        parse_position(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[]", []),
        (" [ ] ", []),
        ("[(11:5..11:6]]", [((11, 5), (11, 6))]),
        ("[(1:2..1:4],(2:-1..2:3]]", [((1, 2), (1, 4)), ((2, -1), (2, 3))]),
        ("[(1:2..1:4], (1:9..2:0]]", [((1, 2), (1, 4)), ((1, 9), (2, 0))]),
        ("[(1:2\u20251:4]]", [((1, 2), (1, 4))]),
    ],
)
def test_parse_individually_deleted_accepts_both_separators_and_bounds(
    text: str, expected: list[tuple[tuple[int, int], tuple[int, int]]]
) -> None:
    assert parse_individually_deleted(text) == expected


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[(11:6..11:5]]", "range (11:6..11:5] has lower >= upper"),
        ("[(11:5..11:5]]", "lower >= upper"),
        ("[(1:2..1:4],]", "ends with a separator"),
        ("[(1:2..1:4] (1:5..1:6]]", "separate ranges"),
        ("[1:2..1:4]", "unexpected text"),
        ("(1:2..1:4]", "not a list of ranges"),
        ("[(1:-2..1:4]]", "entry id -2 is below -1"),
    ],
)
def test_parse_individually_deleted_rejects_bad_text(text: str, words: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_individually_deleted(text)
    assert words in str(info.value)


@pytest.mark.parametrize(
    ("topic", "index"),
    [
        ("persistent://t/ns/mytopic-partition-4", 4),
        ("persistent://t/ns/mytopic-partition--1", -1),
        ("persistent://t/ns/mytopic-partition-00", -1),
        ("persistent://t/ns/mytopic-partition-012", -1),
        ("persistent://t/ns/tp1-partition-0-DLQ", -1),
        ("persistent://t/ns/x-partition-+3", -1),
        ("persistent://t/ns/x-partition-2147483648", -1),
        ("persistent://t/ns/x-partition-a-partition-7", 7),
        ("persistent://t/ns/x-partition-٣", -1),
        ("persistent://t/ns/plain", -1),
    ],
)
def test_partition_index_follows_the_new_rule(topic: str, index: int) -> None:
    """docs §6.5 (TopicNameTest.topic examples)."""
    assert partition_index(topic) == index
    assert (partitioned_topic_name(topic) is None) == (index < 0)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2024-01-01T00:00:00.000Z", "2024-01-01T00:00:00+00:00"),
        ("2024-01-01T00:00:00Z", "2024-01-01T00:00:00+00:00"),
        ("2024-01-01T01:00:00.000+0100", "2024-01-01T00:00:00+00:00"),
        ("2024-01-01T00:00:00.000+0000", "2024-01-01T00:00:00+00:00"),
        ("2024-01-01T08:00:00.123456789+08:00", "2024-01-01T00:00:00.123456+00:00"),
        ("2024-01-01T00:00:00.12+01:00[Europe/Paris]", "2023-12-31T23:00:00.120000+00:00"),
        ("2024-01-01T00:00", "2024-01-01T00:00:00+00:00"),
        (1704067200000, "2024-01-01T00:00:00+00:00"),
        ("1704067200000", "2024-01-01T00:00:00+00:00"),
        (0, None),
        (None, None),
        ("", None),
        ("1970-01-01T00:00:00Z", None),
        ("1970-01-01T01:00:00+01:00", None),
    ],
)
def test_parse_timestamp_reads_pulsar_forms(value: Any, expected: str | None) -> None:
    assert parse_timestamp(value) == (ts(expected) if expected else None)


@pytest.mark.parametrize(
    "value", ["...", "yesterday", "2024-13-01T00:00:00Z", True, 1.5, -5, [1], "Mon Jan 01 2024"]
)
def test_parse_timestamp_rejects_other_text(value: Any) -> None:
    with pytest.raises(ParseError):
        parse_timestamp(value)


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        (
            "us-east/stats/persistent%3A%2F%2Fpublic%2Fdefault%2Forders.json",
            "persistent://public/default/orders",
        ),
        ("tenant-a%2Fns1.json", "tenant-a/ns1"),
        ("broker.json", "broker"),
        ("c.csv", "c"),
        ("a+b%2Bc.json", "a+b+c"),
        ("lines.jsonl", None),
    ],
)
def test_name_hint_from_file_name_url_decodes(name: str, hint: str | None) -> None:
    assert name_hint_from_file_name(name) == hint


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("pulsar.repl.us-west", ("replicator", "us-west")),
        ("__compaction", ("compaction", None)),
        ("pulsar.dedup", ("dedup", None)),
        ("reader-3f9a1c2b7d", ("reader", None)),
        ("myrole-reader-3f9a1c2b7d", ("reader", None)),
        ("multiTopicsReader-9c0ffee123", ("reader", None)),
        ("reader-abcde", ("reader", None)),
        ("reader", ("subscription", None)),
        ("my-reader-subscription-long", ("subscription", None)),
        ("orders-sub", ("subscription", None)),
    ],
)
def test_cursor_kind_from_name(name: str, kind: tuple[str, str | None]) -> None:
    assert cursor_kind(name) == kind


# ----------------------------------------------------------------------------------------------------
# property tests: mutated fixtures never raise and always account for every record
# ----------------------------------------------------------------------------------------------------
def _fixture_inputs() -> list[tuple[str, str, bytes]]:
    """(form, relative path, bytes) of every fixture file (JSON Lines: each line)."""
    inputs = []
    for path in sorted(FIXTURES.glob("*/*/*")):
        rel = path.relative_to(FIXTURES).as_posix()
        data = path.read_bytes()
        if rel.endswith(".jsonl"):
            inputs.extend(("line", rel, line) for line in data.split(b"\n") if line.strip())
        else:
            inputs.append(("csv" if rel.endswith(".csv") else "file", rel, data))
    return inputs


FIXTURE_INPUTS = _fixture_inputs()


def _parse_any(form: str, rel: str, data: bytes) -> ParseResult:
    kind = rel.split("/")[1]
    if form == "line":
        return parse_jsonl_line(kind, data, ctx(rel, "line 1", None))
    if form == "csv":
        return parse_consumers_csv(data, ctx(rel))
    return parse_file(kind, data, ctx(rel))


def _assert_sound(result: ParseResult, rel: str) -> None:
    check_accounting(result)
    assert all(q["reason_code"] != "internal_error" for q in result.quarantine), result.quarantine
    assert set(result.rows) == set(TABLES_BY_KIND[rel.split("/")[1]])


@st.composite
def _byte_mutation(draw: st.DrawFn) -> tuple[str, str, bytes]:
    form, rel, data = draw(st.sampled_from(FIXTURE_INPUTS))
    operation = draw(st.sampled_from(["truncate", "flip", "insert", "delete", "replace"]))
    at = draw(st.integers(0, max(len(data) - 1, 0)))
    if operation == "truncate":
        data = data[:at]
    elif operation == "flip" and data:
        data = data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1 :]
    elif operation == "insert":
        data = data[:at] + draw(st.binary(min_size=1, max_size=8)) + data[at:]
    elif operation == "delete":
        data = data[:at] + data[at + draw(st.integers(1, 40)) :]
    else:
        token = draw(
            st.sampled_from([b"-1", b"-7", b"null", b'""', b"[]", b"{}", b'"abc:1"', b"true", b"0", b":"])
        )
        data = data[:at] + token + data[at + draw(st.integers(0, 6)) :]
    return form, rel, data


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_byte_mutation())
def test_parsers_never_raise_on_mutated_bytes(case: tuple[str, str, bytes]) -> None:
    _assert_sound(_parse_any(*case), case[1])


_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**64), max_value=2**64)
    | st.floats(allow_nan=True)
    | st.sampled_from(["", "abc:1", "12:-2", "[(1:5..1:4]]", "[]", "-1:-1", "1970-01-01T00:00:00Z", "NaN"])
    | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=6,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    paths = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            paths.extend(_paths(item, (*prefix, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            paths.extend(_paths(item, (*prefix, index)))
    return paths


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {k: (_replace(v, rest, new) if k == head else v) for k, v in value.items()}
    return [(_replace(v, rest, new) if i == head else v) for i, v in enumerate(value)]


def _json_inputs() -> list[tuple[str, str, Any]]:
    """The fixture inputs that are one JSON document (CLI text and concatenated documents are not)."""
    inputs = []
    for form, rel, data in FIXTURE_INPUTS:
        try:
            inputs.append((form, rel, json.loads(data)))
        except ValueError:
            continue
    return inputs


_JSON_INPUTS = _json_inputs()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_parsers_never_raise_on_structurally_mutated_json(data: st.DataObject) -> None:
    form, rel, doc = data.draw(st.sampled_from(_JSON_INPUTS))
    path = data.draw(st.sampled_from(_paths(doc)))
    mutated = _replace(doc, path, data.draw(_JSON_VALUES))
    result = _parse_any(form, rel, json.dumps(mutated).encode())
    _assert_sound(result, rel)
