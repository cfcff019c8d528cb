"""Hostile inputs (issue 9 point 1): every export source survives nasty data and accounts for it.

Sources: stats-internal, stats, backlog-quotas, consumers, schemas (one JSON file per topic and JSON
Lines envelopes; consumers also CSV), entries (JSON Lines stored-entry dumps, per-dump file or
per-topic file), the markers decoded from entries, and the manifest. The plan-request files are read by
the ``plans`` stage, not by ingest (``tests/test_plan_requests.py`` covers them).

For every source the property is: the ingest does not crash, every bad record lands in ``quarantine``
with a reason naming the field/value and what is wrong, good records are accepted, and
``rows in = accepted + quarantined`` per source as :class:`IngestResult` reports it.

* A committed corpus (``tests/fixtures/hostile/``, expectations in ``expected.json``, reviewed by
  hand) is ingested once end to end with :func:`ingest_export`. File names Windows cannot hold
  (``*``, ``?``, ``:``) are created at copy time from ``file-names.json``.
* Hypothesis mutates valid records (delete/rename a field, swap a type, truncate or flip bytes) per
  source and layout against the pure-Python parse/decode layer (many examples, no Spark), and one
  Spark ingest of a batch of generated records per example (``S.PROPERTY_EXAMPLES``) checks that the
  Spark pipeline agrees with the pure layer record by record.
"""

from __future__ import annotations

import base64
import copy
import datetime as dt
import json
import random
import re
import shutil
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from pulsar_model.errors import ExportLayoutError
from pulsar_model.ingest.entries import decode_line, decode_lines, decoded_arrow_schema
from pulsar_model.ingest.layout import discover
from pulsar_model.ingest.parsers import (
    REASON_CODES,
    ParseResult,
    RecordContext,
    parse_consumers_csv,
    parse_file,
    parse_jsonl_line,
)
from pulsar_model.ingest.pipeline import _literal_path, _parse_files, build_input_tables, ingest_export
from pulsar_model.tables.delta_io import DeltaTables
from pulsar_model.wire.codec import BatchItem, encode_batch_entry, encode_marker_entry, encode_message_entry
from pulsar_model.wire.markers import Snapshot, SubscriptionUpdate, TxnMarker
from tests.oracle import strategies as S

#: What the stages store is under test, not how Spark runs it (tests/spark_conf.py).
pytestmark = pytest.mark.usefixtures("fast_spark_conf")

HOSTILE = Path(__file__).parent / "fixtures" / "hostile"
EXPORT_NAME = "export-2026-11-21"
EXPECTED: dict[str, Any] = json.loads((HOSTILE / "expected.json").read_text(encoding="utf-8"))
SOURCES = ("stats-internal", "stats", "backlog-quotas", "consumers", "schemas", "entries", "markers")
MAX_LONG = 2**63 - 1
CLUSTER = "c1"

#: Reason codes of the stored-entry decoder and the entry/marker checks of the pipeline.
ENTRY_CODES = frozenset(
    {
        "empty",
        "bad_magic",
        "bad_checksum",
        "truncated",
        "bad_metadata",
        "bad_batch",
        "bad_compression",
        "bad_marker",
        "bad_base64",
        "bad_position",
        "missing_field",
        "missing_topic",
        "malformed_json",
        "not_an_object",
        "invalid_utf8",
        "cluster_mismatch",
        "duplicate_entry",
    }
)
JSON_CODES = frozenset(REASON_CODES) - {"internal_error", "unknown_kind"}


def materialise(root: Path) -> Path:
    """Copy the corpus export under ``root`` and give files their hostile names."""
    target = root / EXPORT_NAME
    shutil.copytree(HOSTILE / EXPORT_NAME, target)
    for old, new in json.loads((HOSTILE / "file-names.json").read_text(encoding="utf-8")).items():
        (target / old).rename((target / old).parent / new)
    return target


# ====================================================================================================
# The committed corpus, end to end (one Spark ingest)
# ====================================================================================================
@pytest.fixture(scope="module")
def corpus(spark, tmp_path_factory):
    export = materialise(tmp_path_factory.mktemp("hostile"))
    tables = DeltaTables(spark, str(tmp_path_factory.mktemp("warehouse")))
    result = ingest_export(spark, tables, str(export), run_id="hostile-1")
    quarantine = [r.asDict() for r in tables.read("quarantine").collect()]
    return tables, result, quarantine


def _expected_counts() -> dict[str, tuple[int, int, int]]:
    quarantined = Counter(q["source"] for q in EXPECTED["quarantine"])
    return {
        source: (accepted + quarantined[source], accepted, quarantined[source])
        for source, accepted in EXPECTED["accepted_counts"].items()
    }


def test_corpus_every_source_accounts_for_every_record(corpus) -> None:
    _, result, _ = corpus
    got = {
        s: (result.rows_in[s], result.rows_accepted[s], result.rows_quarantined[s]) for s in result.rows_in
    }
    assert got == _expected_counts()
    for source, (rows_in, accepted, quarantined) in got.items():
        assert rows_in == accepted + quarantined, source
    assert set(SOURCES) <= set(got)


def test_corpus_every_bad_record_is_quarantined_with_a_reason_naming_the_problem(corpus) -> None:
    _, _result, quarantine = corpus
    got = {(q["source"], q["source_file"], q["record_locator"]): q for q in quarantine}
    assert len(got) == len(quarantine), "one quarantine row per rejected record"
    expected = {(q["source"], q["source_file"], q["record_locator"]): q for q in EXPECTED["quarantine"]}
    assert (sorted(set(got) - set(expected)), sorted(set(expected) - set(got))) == ([], [])
    for key, want in expected.items():
        row = got[key]
        assert row["reason_code"] == want["reason_code"], (key, row["reason"])
        for words in want["reason_words"]:
            assert words in row["reason"], (key, words, row["reason"])
        assert row["run_id"] == "hostile-1" and row["export_date"] == dt.date(2026, 11, 21)
        assert row["record_excerpt"] is None or len(row["record_excerpt"]) <= 512
        excerpt = row["record_excerpt"]
        if row["source"] in ("entries", "markers") and excerpt and not excerpt.startswith("stored entry of"):
            # stored entries (message payloads) never reach the quarantine table, not even as base64
            assert re.search(r"[A-Za-z0-9+/=]{24,}", row["record_excerpt"]) is None, row["record_excerpt"]


def test_corpus_good_records_are_accepted_with_their_edge_values(corpus) -> None:
    tables, _, _ = corpus
    tables_expected = EXPECTED["tables"]
    ml = tables.read("managed_ledgers").collect()
    assert sorted(r.topic for r in ml) == tables_expected["managed_ledgers"]
    assert (
        sorted(r.topic for r in tables.read("schema_versions").select("topic").distinct().collect())
        == (tables_expected["schema_versions"])
    )
    entries = sorted([r.topic, r.ledger_id, r.entry_id] for r in tables.read("entries").collect())
    assert entries == tables_expected["entries"]
    markers = sorted([r.entry_id, r.marker_name] for r in tables.read("markers").collect())
    assert markers == sorted(tables_expected["markers"])
    # the record of the duplicated topic that was kept is the first (by file), not the other day's copy
    dup = next(r for r in ml if r.topic == "persistent://h/ns/dup")
    assert dup.entries_added_counter == 20
    # ledger ids at the top of the long range, cursors in deleted ledgers / past the LAC, L:-1, EARLIEST
    edge = next(r for r in ml if r.topic == "persistent://h/ns/good-edges")
    assert (edge.last_confirmed_entry.ledger_id, edge.last_confirmed_entry.entry_id) == (MAX_LONG - 1, 9)
    assert edge.current_ledger_id == MAX_LONG
    cursors = {
        r.cursor_name: r
        for r in tables.read("cursors").where("topic = 'persistent://h/ns/good-edges'").collect()
    }
    assert sorted(cursors) == ["at-deleted-ledger", "at-minus-one", "past-lac", "reader-abc12"]
    md = {n: (c.mark_delete_position.ledger_id, c.mark_delete_position.entry_id) for n, c in cursors.items()}
    assert md == {
        "at-deleted-ledger": (5, 3),
        "past-lac": (MAX_LONG, 50),
        "at-minus-one": (MAX_LONG - 1, -1),
        "reader-abc12": (-1, -1),
    }
    ranges = [
        ((x.lower.ledger_id, x.lower.entry_id), (x.upper.ledger_id, x.upper.entry_id))
        for x in cursors["at-minus-one"].individually_deleted
    ]
    assert ranges == [((MAX_LONG - 1, 0), (MAX_LONG - 1, 3)), ((MAX_LONG - 1, 5), (MAX_LONG, 0))]
    assert not cursors["reader-abc12"].is_durable


# ====================================================================================================
# The manifest (read by discover on the driver: a bad one stops the run with a clear message)
# ====================================================================================================
@pytest.mark.parametrize(
    ("manifest", "words"),
    [
        (b'{"export_id": "x", "exported_at": "2026-11-21T02:0', ["manifest.json", "not valid JSON"]),
        (b"\xff\xfe{}", ["manifest.json", "not valid JSON"]),
        (b"[1, 2]", ["manifest.json", "must be a JSON object"]),
        (b'{"exported_at": "yesterday"}', ["exported_at", "'yesterday'", "ISO-8601"]),
        (b"[" * 100_000, ["manifest.json", "not valid JSON"]),
    ],
)
def test_manifest_hostile_stops_the_run_naming_the_file_and_the_fix(
    tmp_path: Path, manifest: bytes, words: list[str]
) -> None:
    export = materialise(tmp_path)
    (export / "manifest.json").write_bytes(manifest)
    with pytest.raises(ExportLayoutError) as info:
        discover(export)
    for word in words:
        assert word in str(info.value), str(info.value)


def test_manifest_dates_of_different_days_resolve_in_the_documented_order(tmp_path: Path) -> None:
    export = materialise(tmp_path)  # folder name says 2026-11-21
    manifest = json.loads((export / "manifest.json").read_text())
    (export / "manifest.json").write_text(
        json.dumps({**manifest, "exported_at": "2026-11-19T23:30:00-05:00"})
    )
    inv = discover(export)
    assert inv.export_date == dt.date(2026, 11, 20)  # the manifest wins over the folder name, in UTC
    assert inv.exported_at == dt.datetime(2026, 11, 20, 4, 30, tzinfo=dt.UTC)
    inv = discover(export, dt.date(2026, 11, 22))  # --export-date wins over both
    assert inv.export_date == dt.date(2026, 11, 22)
    assert inv.exported_at == dt.datetime(2026, 11, 22, tzinfo=dt.UTC)
    assert inv.cluster_versions == {"c1": "3.0.7"}  # unknown manifest keys are ignored


# ====================================================================================================
# Generated records: valid seeds per source and layout, and their mutations
# ====================================================================================================
def _si_doc() -> dict[str, Any]:
    return {
        "entriesAddedCounter": 20,
        "numberOfEntries": 20,
        "totalSize": 20480,
        "currentLedgerEntries": 0,
        "currentLedgerSize": 0,
        "lastLedgerCreatedTimestamp": "2026-11-20T00:00:00.000Z",
        "lastConfirmedEntry": "12:9",
        "state": "LedgerOpened",
        "ledgers": [
            {"ledgerId": 11, "entries": 10, "size": 10240, "offloaded": False},
            {"ledgerId": 12, "entries": 10, "size": 10240, "offloaded": False},
            {"ledgerId": 13, "entries": 0, "size": 0, "offloaded": False},
        ],
        "cursors": {
            "sub1": {
                "markDeletePosition": "11:4",
                "readPosition": "11:7",
                "messagesConsumedCounter": 6,
                "individuallyDeletedMessages": "[(11:5..11:6]]",
                "lastLedgerWitchTimestamp": "2026-11-20T00:00:00Z",
                "active": True,
                "properties": {"a": 1},
            }
        },
        "properties": {"k": "v"},
        "compactedLedger": {"ledgerId": -1, "entries": -1, "size": -1, "offloaded": False},
    }


def _stats_doc() -> dict[str, Any]:
    path = HOSTILE / EXPORT_NAME / "c1" / "stats" / "persistent%3A%2F%2Fh%2Fns%2Fgood-edges.json"
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


def _quota_doc() -> dict[str, Any]:
    return {
        "destination_storage": {
            "limit": 1024,
            "limitSize": 1024,
            "limitTime": -1,
            "policy": "producer_request_hold",
        },
        "message_age": {"limitSize": -1, "limitTime": 3600, "policy": "consumer_backlog_eviction"},
    }


def _consumers_doc() -> list[dict[str, Any]]:
    return [
        {"subscription": "s", "subscriptionType": "Failover", "consumerName": "c-1", "priorityLevel": 0},
        {"subscription": "s", "subscriptionType": "Failover", "consumerName": "c-2", "priorityLevel": 1},
    ]


def _schemas_doc() -> list[dict[str, Any]]:
    path = HOSTILE / EXPORT_NAME / "c1" / "schemas" / "persistent%3A%2F%2Fh%2Fns%2Fgood-edges.json"
    doc: list[dict[str, Any]] = json.loads(path.read_text())
    return doc


JSON_SEEDS: dict[str, Callable[[], Any]] = {
    "stats-internal": _si_doc,
    "stats": _stats_doc,
    "backlog-quotas": _quota_doc,
    "consumers": _consumers_doc,
    "schemas": _schemas_doc,
}

_PLAIN = encode_message_entry(
    producer_name="p", sequence_id=1, publish_time_ms=1_763_700_000_000, key="k", payload=b"x" * 10
)
ENTRY_SEEDS: tuple[bytes, ...] = (
    _PLAIN,
    encode_batch_entry(
        producer_name="p",
        sequence_id=2,
        publish_time_ms=1_763_700_000_001,
        items=[BatchItem(key="a", payload=b"1"), BatchItem(payload=b"", null_value=True)],
    ),
    encode_marker_entry(TxnMarker(22), publish_time_ms=1_763_700_000_002, txn_id=(1, 2)),
    encode_marker_entry(
        Snapshot("s-1", (12, 1), (("c2", (5, 9)),)), publish_time_ms=1_763_700_000_003, replicate_to=["c1"]
    ),
    encode_marker_entry(
        SubscriptionUpdate("sub", (("c2", (7, -1)),)), publish_time_ms=1_763_700_000_004, replicate_to=["c1"]
    ),
)

#: Replacement values of a type swap: other JSON types and numbers at the edges.
SWAP_VALUES: tuple[Any, ...] = (
    None,
    True,
    "text",
    "12:-5",
    "",
    1.5,
    -7,
    2**63,
    -(2**63) - 1,
    [],
    [1],
    {},
    {"a": 1},
)


class Chooser:
    """Draws for the mutations: from Hypothesis (shrinkable) or from a seeded Random (batches)."""

    def __init__(self, data: st.DataObject | None = None, rng: random.Random | None = None) -> None:
        self.data, self.rng = data, rng

    def pick(self, values: Sequence[Any]) -> Any:
        if self.data is not None:
            return self.data.draw(st.sampled_from(values))
        assert self.rng is not None
        return self.rng.choice(list(values))

    def integer(self, low: int, high: int) -> int:
        if self.data is not None:
            return self.data.draw(st.integers(low, high))
        assert self.rng is not None
        return self.rng.randint(low, high)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found.extend(_paths(item, (*prefix, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(_paths(item, (*prefix, index)))
    return found


def _parent(doc: Any, path: tuple[Any, ...]) -> Any:
    for step in path[:-1]:
        doc = doc[step]
    return doc


def mutate_json(doc: Any, choose: Chooser) -> tuple[Any, str, tuple[Any, ...]]:
    """One structural mutation of a JSON value: (mutated copy, operation, path of the mutated key)."""
    doc = copy.deepcopy(doc)
    keyed = [p for p in _paths(doc) if p and isinstance(p[-1], str)]
    operation = choose.pick(["delete", "rename", "swap"] if keyed else ["swap"])
    if operation == "swap":
        path = choose.pick(_paths(doc))
        old = _parent(doc, path)[path[-1]] if path else doc
        new = choose.pick([v for v in SWAP_VALUES if v != old or type(v) is not type(old)])
        if not path:
            return new, operation, path
        _parent(doc, path)[path[-1]] = new
        return doc, operation, path
    path = choose.pick(keyed)
    parent = _parent(doc, path)
    value = parent.pop(path[-1])
    if operation == "rename":  # a typo of the field name, as seen in real output
        parent[choose.pick([path[-1] + "s", path[-1].lower() + "_", path[-1][:-1] or "x"])] = value
    return doc, operation, path


def mutate_bytes(data: bytes, choose: Chooser) -> tuple[bytes, str]:
    """Truncate or flip one byte (the operation is returned)."""
    if not data:
        return data, "none"
    operation = choose.pick(["truncate", "flip"])
    at = choose.integer(0, len(data) - 1)
    if operation == "truncate":
        return data[:at], operation
    return data[:at] + bytes([data[at] ^ choose.integer(1, 255)]) + data[at + 1 :], operation


def _named_key(path: tuple[Any, ...]) -> str | None:
    keys = [step for step in path if isinstance(step, str)]
    return keys[-1] if keys else None


# ----------------------------------------------------------------------------------------------------
# The pure layer, called exactly as the pipeline calls it
# ----------------------------------------------------------------------------------------------------
def parse_json_kind(kind: str, layout: str, relative: str, data: bytes) -> list[ParseResult]:
    """What ``pipeline._parse_files`` does with one file of a JSON kind."""
    if layout == "csv":
        hint = None
        return [parse_consumers_csv(data, RecordContext(CLUSTER, kind, relative, "file", hint))]
    if layout == "jsonl":
        results = []
        for number, line in enumerate(data.split(b"\n"), start=1):
            if line.strip():
                ctx = RecordContext(CLUSTER, kind, relative, f"line {number}", None)
                results.append(parse_jsonl_line(kind, line, ctx))
        return results
    hint = relative.rsplit("/", 1)[-1].removesuffix(".json")
    from urllib.parse import unquote

    return [parse_file(kind, data, RecordContext(CLUSTER, kind, relative, "file", unquote(hint)))]


def decode_entry_file(relative: str, data: bytes, hint: str | None = None) -> list[dict[str, Any]]:
    """What the Spark text reader + ``decode_lines`` do with one entries file (lines split like Hadoop)."""
    lines = re.split(rb"\r\n|\r|\n", data)
    if lines and lines[-1] == b"":
        lines.pop()
    batch = pa.RecordBatch.from_pydict(
        {
            "value": pa.array(lines, pa.binary()),
            "file_path": ["file:/x/" + relative] * len(lines),
            "block_start": [0] * len(lines),
        }
    )
    out = list(decode_lines([batch], {"/x/" + relative: (CLUSTER, relative, hint)}))
    assert [b.schema for b in out] == [decoded_arrow_schema()] * len(out)
    return [row for b in out for row in b.to_pylist()]


def _check_sound_json(results: list[ParseResult]) -> list[dict[str, Any]]:
    quarantine = []
    for result in results:
        assert result.records_in == result.records_accepted + result.records_quarantined
        assert len(result.quarantine) == result.records_quarantined
        for row in result.quarantine:
            assert row["reason_code"] in JSON_CODES, row
            assert row["reason"] and "parser bug" not in row["reason"], row
        quarantine.extend(result.quarantine)
    return quarantine


def _check_sound_entries(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    bad = [r for r in rows if r["status"] == "quarantine"]
    for row in rows:
        assert row["status"] in ("ok", "quarantine"), row
        if row["status"] == "ok":
            assert row["ledger_id"] is not None and 0 <= row["ledger_id"] <= MAX_LONG
        if row["marker_error_code"] is not None:
            assert row["marker"] is None and row["marker_error"], row
    for row in bad:
        assert row["reason_code"] in ENTRY_CODES, row
        assert row["reason"], row
    return bad


def _seed_bytes(kind: str, layout: str, doc: Any, topic: str) -> bytes:
    if layout == "jsonl":
        return json.dumps({"cluster": CLUSTER, "topic": topic, "stats": doc}).encode()
    return json.dumps(doc, indent=1).encode()


def _csv(rows: list[list[str]]) -> bytes:
    header = "topic,subscription,consumer_name,priority_level,subscription_type"
    return ("\n".join([header, *(",".join(r) for r in rows)]) + "\n").encode()


CSV_ROW = ["persistent://g/ns/csv", "s", "w-1", "0", "Failover"]
LAYOUTS = [(kind, layout) for kind in JSON_SEEDS for layout in ("file", "jsonl")] + [("consumers", "csv")]


def _entry_line(topic: str | None, ledger: int, entry: int, data: bytes) -> dict[str, Any]:
    line: dict[str, Any] = {"ledger_id": ledger, "entry_id": entry, "data": base64.b64encode(data).decode()}
    if topic is not None:
        line["topic"] = topic
    return line


# ----------------------------------------------------------------------------------------------------
# Pure-layer properties (many examples, no Spark)
# ----------------------------------------------------------------------------------------------------
PURE = settings(
    max_examples=150 * S.PROPERTY_EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.parametrize(("kind", "layout"), LAYOUTS)
def test_seeds_are_accepted(kind: str, layout: str) -> None:
    topic = "persistent://g/ns/seed"
    if layout == "csv":
        results = parse_json_kind(kind, layout, "c1/consumers/c.csv", _csv([CSV_ROW]))
    else:
        relative = f"c1/{kind}/" + (quote(topic, safe="") + ".json" if layout == "file" else "lines.jsonl")
        results = parse_json_kind(
            kind, layout, relative, _seed_bytes(kind, layout, JSON_SEEDS[kind](), topic)
        )
    assert _check_sound_json(results) == []
    assert sum(r.records_accepted for r in results) == 1
    rows = decode_entry_file(
        "c1/entries/dump.jsonl",
        b"\n".join(
            json.dumps(_entry_line("persistent://g/ns/e", 1, i, d)).encode()
            for i, d in enumerate(ENTRY_SEEDS)
        ),
    )
    assert _check_sound_entries(rows) == [] and len(rows) == len(ENTRY_SEEDS)


@PURE
@given(st.data())
@pytest.mark.parametrize(("kind", "layout"), LAYOUTS)
def test_mutated_records_are_accepted_or_quarantined_naming_the_field(
    kind: str, layout: str, data: st.DataObject
) -> None:
    choose = Chooser(data=data)
    topic = "persistent://g/ns/mutated"
    if layout == "csv":
        rows = [list(CSV_ROW)]
        column = choose.integer(0, 4)
        rows[0][column] = choose.pick(["", "-1", "2147483648", "1.5", "x\x00y", '"', "a,b", "orders"])
        data_bytes = _csv(rows)
        flipped = choose.pick([False, True])
        if flipped:
            data_bytes, _ = mutate_bytes(data_bytes, choose)
        quarantine = _check_sound_json(parse_json_kind(kind, layout, "c1/consumers/c.csv", data_bytes))
        assert flipped or len(quarantine) <= 1  # a flipped byte may be a new line (two rows)
        return
    relative = f"c1/{kind}/" + (quote(topic, safe="") + ".json" if layout == "file" else "lines.jsonl")
    doc: Any = JSON_SEEDS[kind]()
    if layout == "jsonl":
        doc = {"cluster": CLUSTER, "topic": topic, "stats": doc}
    mutated, operation, path = mutate_json(doc, choose)
    raw = json.dumps(mutated).encode()
    if choose.pick([False, False, True]):
        raw, operation = mutate_bytes(raw, choose)
    results = parse_json_kind(kind, layout, relative, raw)
    quarantine = _check_sound_json(results)
    key = _named_key(path)
    if operation in ("delete", "rename", "swap") and key is not None and quarantine:
        # the reason names the field (or, for a whole replaced record, says what the record is)
        reasons = " ".join(q["reason"] for q in quarantine)
        # a replaced whole payload is described as a record ("backlog quotas are a JSON boolean; ...")
        whole_payload = path == ("stats",)
        list_item = isinstance(path[-1], int) and f"item {path[-1]}" in reasons  # "schema item 1 null is not"
        named = key in reasons or key.rstrip("s") in reasons  # "cursors" -> "cursor 'a' is a JSON int"
        assert named or "the record is a JSON" in reasons or whole_payload or list_item, (
            operation,
            path,
            reasons,
        )


@PURE
@given(st.data())
def test_mutated_entry_lines_are_decoded_or_quarantined_with_a_reason(data: st.DataObject) -> None:
    choose = Chooser(data=data)
    stored = choose.pick(ENTRY_SEEDS)
    target = choose.pick(["line", "bytes", "entry"])
    line: Any = _entry_line("persistent://g/ns/e", 7, 3, stored)
    raw: bytes
    if target == "entry":  # the stored entry itself: bad magic, checksum, truncated protobuf, ...
        mutated, _ = mutate_bytes(stored, choose)
        raw = json.dumps(_entry_line("persistent://g/ns/e", 7, 3, mutated)).encode()
    elif target == "line":
        line, _operation, path = mutate_json(line, choose)
        raw = json.dumps(line).encode()
    else:
        raw, _ = mutate_bytes(json.dumps(line).encode(), choose)
    rows = decode_entry_file("c1/entries/dump.jsonl", raw)
    bad = _check_sound_entries(rows)
    if target == "line" and bad and _named_key(path) in ("ledger_id", "entry_id", "data", "topic"):
        reason = bad[0]["reason"]
        assert _named_key(path) in reason or "line" in reason or "stored entry 7:3" in reason, (path, reason)
    if target == "entry" and bad:
        assert bad[0]["reason"].startswith("stored entry 7:3: "), bad[0]["reason"]
        assert bad[0]["record_excerpt"].startswith("stored entry of "), bad[0]["record_excerpt"]


# ----------------------------------------------------------------------------------------------------
# One Spark ingest of a generated batch per example: the pipeline agrees with the pure layer
# ----------------------------------------------------------------------------------------------------
BATCH = settings(
    max_examples=S.PROPERTY_EXAMPLES,
    deadline=None,
    database=None,
    phases=[Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
PER_SOURCE = 12


def build_generated_export(root: Path, seed: int) -> dict[str, Any]:
    """An export with PER_SOURCE mutated (and as many intact) records per source and layout.

    Returns the pure layer's prediction: per source (in, accepted, quarantined) and the quarantine keys.
    """
    rng = Chooser(rng=random.Random(seed))
    cluster = root / CLUSTER
    predicted: Counter[tuple[str, str]] = Counter()
    keys: set[tuple[str, str, str, str]] = set()
    # Every stats topic also gets an intact stats-internal record (its stats are stored beside it); a
    # mutation that renames the topic leaves the stats without one, and the pipeline quarantines them.
    (cluster / "stats-internal").mkdir(parents=True)
    for_stats = b"".join(
        json.dumps({"cluster": CLUSTER, "topic": f"persistent://g/ns/stats-{i}", "stats": _si_doc()}).encode()
        + b"\n"
        for i in range(2 * PER_SOURCE)
    )
    (cluster / "stats-internal" / "for-stats.jsonl").write_bytes(for_stats)
    internal_topics: set[str] = set()

    def account_json(kind: str, relative: str, results: list[ParseResult], data: bytes | None = None) -> None:
        locators = (
            [f"line {n}" for n, line in enumerate(data.split(b"\n"), start=1) if line.strip()]
            if data is not None
            else ["file"] * len(results)
        )
        for locator, result in zip(locators, results, strict=True):
            predicted[(kind, "in")] += result.records_in
            predicted[(kind, "accepted")] += result.records_accepted
            if kind == "stats-internal":
                internal_topics.update(row["topic"] for row in result.rows.get("managed_ledgers", []))
            for row in result.rows.get("topic_stats", []) if kind == "stats" else []:
                if row["topic"] not in internal_topics:
                    predicted[(kind, "accepted")] -= 1
                    keys.add(
                        (kind, relative, f"{locator} topic {row['topic']}", "stats_without_stats_internal")
                    )
        for row in _check_sound_json(results):
            keys.add((kind, relative, row["record_locator"], row["reason_code"]))

    relative = f"{CLUSTER}/stats-internal/for-stats.jsonl"
    account_json(
        "stats-internal", relative, parse_json_kind("stats-internal", "jsonl", relative, for_stats), for_stats
    )

    for kind, make in JSON_SEEDS.items():
        folder = cluster / kind
        folder.mkdir(parents=True, exist_ok=True)
        lines = []
        for i in range(2 * PER_SOURCE):
            topic = f"persistent://g/ns/{kind}-{i}"
            doc: Any = make()
            layout = "jsonl" if i % 2 else "file"
            if layout == "jsonl":
                doc = {"cluster": CLUSTER, "topic": topic, "stats": doc}
            if i % 4 < 2:  # half of the records are mutated
                doc, _, _ = mutate_json(doc, rng)
            raw = json.dumps(doc).encode()
            if i % 8 == 0:
                raw, _ = mutate_bytes(raw, rng)
            if layout == "jsonl":
                lines.append(raw.replace(b"\n", b" ").replace(b"\r", b" "))
            else:
                name = quote(topic, safe="") + ".json"
                (folder / name).write_bytes(raw)
                relative = f"{CLUSTER}/{kind}/{name}"
                account_json(kind, relative, parse_json_kind(kind, "file", relative, raw))
        data = b"\n".join(lines) + b"\n"
        (folder / "lines.jsonl").write_bytes(data)
        relative = f"{CLUSTER}/{kind}/lines.jsonl"
        account_json(kind, relative, parse_json_kind(kind, "jsonl", relative, data), data)
    csv_rows = []
    for i in range(PER_SOURCE):
        row = [f"persistent://g/ns/csv-{i}", "s", f"w-{i}", "0", "Failover"]
        if i % 2:
            row[rng.integer(0, 4)] = rng.pick(["", "-1", "2147483648", "1.5", "x\x00y", "orders"])
        csv_rows.append(row)
    csv_data = _csv(csv_rows)
    (cluster / "consumers" / "c.csv").write_bytes(csv_data)
    account_json(
        "consumers",
        f"{CLUSTER}/consumers/c.csv",
        [
            parse_consumers_csv(
                csv_data, RecordContext(CLUSTER, "consumers", f"{CLUSTER}/consumers/c.csv", "file", "c")
            )
        ],
    )

    entry_lines = []
    for i in range(4 * PER_SOURCE):
        stored = ENTRY_SEEDS[i % len(ENTRY_SEEDS)]
        line: Any = _entry_line("persistent://g/ns/e", 100 + i, 0, stored)
        if i % 4 == 1:
            stored, _ = mutate_bytes(stored, rng)
            line = _entry_line("persistent://g/ns/e", 100 + i, 0, stored)
        elif i % 4 == 2:
            line, _, _ = mutate_json(line, rng)
        raw = json.dumps(line).encode()
        if i % 4 == 3 and i % 8 == 7:
            raw, _ = mutate_bytes(raw, rng)
        entry_lines.append(raw)
    entries_data = b"\n".join(entry_lines) + b"\n"
    (cluster / "entries").mkdir()
    (cluster / "entries" / "dump.jsonl").write_bytes(entries_data)
    decoded = decode_entry_file(f"{CLUSTER}/entries/dump.jsonl", entries_data, "dump")
    for row in decoded:
        predicted[("entries", "in")] += 1
        if row["status"] == "ok":
            predicted[("entries", "accepted")] += 1
            if row["marker_type"] is not None:
                predicted[("markers", "in")] += 1
                if row["marker_error_code"] is None:
                    predicted[("markers", "accepted")] += 1
                else:
                    keys.add(("markers", row["source_file"], row["record_locator"], row["marker_error_code"]))
        else:
            keys.add(("entries", row["source_file"], row["record_locator"], row["reason_code"]))
    counts = {
        source: (predicted[(source, "in")], predicted[(source, "accepted")])
        for source in {s for s, _ in predicted}
    }
    return {"counts": counts, "keys": keys}


@pytest.mark.slow
@BATCH
@given(seed=st.integers(0, 2**32 - 1))
def test_generated_batches_ingest_like_the_pure_layer_predicts(spark, tmp_path_factory, seed: int) -> None:
    root = tmp_path_factory.mktemp("generated") / "export-2026-11-22"
    root.mkdir()
    prediction = build_generated_export(root, seed)
    inv = discover(root)
    outputs, counts_df = build_input_tables(spark, inv, run_id="gen", versions={})
    counts = {
        r["source"]: (r["rows_in"], r["rows_accepted"], r["rows_quarantined"]) for r in counts_df.collect()
    }
    quarantine = (
        outputs["quarantine"].select("source", "source_file", "record_locator", "reason_code").collect()
    )
    got_keys = {(r.source, r.source_file, r.record_locator, r.reason_code) for r in quarantine}
    assert len(got_keys) == len(quarantine)
    assert got_keys == prediction["keys"]
    for source, (rows_in, accepted) in prediction["counts"].items():
        assert counts[source] == (rows_in, accepted, rows_in - accepted), source
    assert set(counts) == set(prediction["counts"])


# ====================================================================================================
# Regressions: one focused (pure, fast) test per ingest bug found with the corpus
# ====================================================================================================
def _decode(line: str, hint: str | None = None) -> dict[str, Any]:
    return decode_line(line, CLUSTER, hint, "c1/entries/dump.jsonl", "line 1")


def _entry_json(**fields: Any) -> str:
    return json.dumps(
        {"topic": "persistent://t/ns/a", "ledger_id": 1, "entry_id": 0, "data": "AA==", **fields}
    )


@pytest.mark.parametrize(
    ("line", "code", "words"),
    [
        # RecursionError escaped decode_line and failed the whole Spark job
        ('{"data": ' + "[" * 50_000 + "]" * 50_000 + "}", "malformed_json", ["nested too deeply"]),
        # a topic that is no topic name was accepted (and never joined anything)
        (_entry_json(topic="orders"), "missing_topic", ['"orders"']),
        (_entry_json(topic="persistent://t/ns/a\x00"), "missing_topic", ["U+0000"]),
        # a non-string topic was reported as "no topic"
        (_entry_json(topic=5), "missing_topic", ["topic 5", "string"]),
        # duplicate keys were silently resolved to the last value
        (_entry_json()[:-1] + ', "ledger_id": 2}', "malformed_json", ['"ledger_id"', "twice"]),
    ],
)
def test_decode_line_regressions(line: str, code: str, words: list[str]) -> None:
    row = _decode(line)
    assert (row["status"], row["reason_code"]) == ("quarantine", code), row
    for word in words:
        assert word in row["reason"], row["reason"]


def test_decode_line_excerpts_never_carry_the_stored_entry() -> None:
    data = base64.b64encode(_PLAIN).decode()
    row = _decode(_entry_json(cluster="c9", data=data))
    assert row["reason_code"] == "cluster_mismatch"
    assert data not in row["record_excerpt"] and f"<{len(data)} base64 characters>" in row["record_excerpt"]


def test_decode_lines_invalid_utf8_and_blank_lines() -> None:
    good = json.dumps(_entry_line("persistent://t/ns/a", 1, 0, _PLAIN)).encode()
    # invalid UTF-8 made pyarrow raise inside mapInArrow (the ingest crashed); blank lines were records
    rows = decode_entry_file("c1/entries/d.jsonl", good + b"\n\n" + good.replace(b'"topic"', b'"t\xffopic"'))
    assert [(r["record_locator"], r["status"], r["reason_code"]) for r in rows] == [
        ("line 1 (1:0)", "ok", None),
        ("line 3", "quarantine", "invalid_utf8"),
    ]
    assert "0xff" in rows[1]["reason"]


def test_decode_lines_impossible_marker_positions_quarantine_the_marker_not_the_entry() -> None:
    absurd = encode_marker_entry(
        Snapshot("s", (-7, 3), (("c2", (5, -9)),)), publish_time_ms=1_763_700_000_000, replicate_to=["c1"]
    )
    fine = ENTRY_SEEDS[3]
    rows = decode_entry_file(
        "c1/entries/d.jsonl",
        json.dumps(_entry_line("persistent://t/ns/a", 1, 0, absurd)).encode()
        + b"\n"
        + json.dumps(_entry_line("persistent://t/ns/a", 1, 1, fine)).encode(),
    )
    assert [r["status"] for r in rows] == ["ok", "ok"]
    assert rows[0]["marker"] is None and rows[0]["marker_error_code"] == "bad_marker_position"
    assert "local_position -7:3" in rows[0]["marker_error"] and "5:-9" in rows[0]["marker_error"]
    assert rows[1]["marker"] is not None and rows[1]["marker_error_code"] is None


def test_position_with_an_absurdly_long_id_is_a_bad_position_not_a_parser_bug() -> None:
    # int() refuses > 4300 digits: the parser used to quarantine these as "parser bug" (internal_error)
    ctx = RecordContext(CLUSTER, "stats-internal", "f", "file", "persistent://t/ns/a")
    for key, value, code in [
        ("markDeletePosition", "1:" + "9" * 10_000, "bad_position"),
        ("individuallyDeletedMessages", f"[(1:{'9' * 10_000}..2:0]]", "bad_individually_deleted"),
    ]:
        doc = _si_doc()
        doc["cursors"]["sub1"][key] = value
        result = parse_file("stats-internal", json.dumps(doc).encode(), ctx)
        assert [q["reason_code"] for q in result.quarantine] == [code]
        reason = result.quarantine[0]["reason"]
        assert key in reason and len(reason) < 400, reason


def test_discover_skips_file_names_spark_cannot_read_with_a_reason(tmp_path: Path) -> None:
    folder = tmp_path / "export-2026-11-21" / "c1" / "stats-internal"
    folder.mkdir(parents=True)
    for name in ("persistent:%2F%2Ft%2Fns%2Fa.json", "persistent%3A%2F%2Ft%2Fns%2F%FF.json", "ok[1].json"):
        (folder / name).write_text("{}")
    inv = discover(tmp_path / "export-2026-11-21")
    assert [f.name_hint for f in inv.files] == ["ok[1]"]
    assert [s.rsplit(": ", 1)[0] for s in inv.skipped] == [
        "c1/stats-internal/persistent%3A%2F%2Ft%2Fns%2F%FF.json",
        "c1/stats-internal/persistent:%2F%2Ft%2Fns%2Fa.json",
    ]
    assert "%-escapes" in inv.skipped[0] and "%3A" in inv.skipped[1]


def test_literal_paths_escape_hadoop_glob_characters() -> None:
    assert _literal_path("/e/c1/stats/a[1]{x,y}*?\\b.json") == "/e/c1/stats/a\\[1\\]\\{x,y\\}\\*\\?\\\\b.json"
    assert _literal_path("/e/c1/stats/persistent%3A%2F%2Ft.json") == "/e/c1/stats/persistent%3A%2F%2Ft.json"


def test_parse_files_matches_the_raw_path_before_the_decoded_one() -> None:
    # "a%62.json" %-decodes to its sibling "ab.json": the decoded match used to win (wrong file, and
    # both records then shared one record key, defeating duplicate-topic detection)
    lookup = {
        "/e/c1/stats/ab.jsonl": ("c1", "stats", "c1/stats/ab.jsonl", None),
        "/e/c1/stats/a%62.jsonl": ("c1", "stats", "c1/stats/a%62.jsonl", None),
    }
    frame = pd.DataFrame({"path": ["file:/e/c1/stats/a%62.jsonl"], "content": [b"[1]\n"]})
    out = pd.concat(list(_parse_files([frame], lookup)))
    assert set(out["record_key"]) == {"c1/stats/a%62.jsonl#000000001"}
