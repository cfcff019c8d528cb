"""Golden tests for pulsar_model.compaction: every scenario of docs §5.8 plus the edge rows of §5.4-§5.6.

Every scenario is one topic of ONE messages DataFrame built with the ``messages`` contract; a module
fixture runs every transform once and collects everything in ONE Spark action (rows as JSON), then each
test reads its rows. Message values are written down per id (``VALUES``) so that assertions read like
docs/semantics: ``[("key0", "m0"), ("key4", "m4")]``. Ledger 10 holds the entries (scenario 1 rolls over to
ledger 12). "new" = Pulsar 4.1.3 (markers delivered to the compactor and skipped, batch "all",
``topicCompactionRetainNullKey=false``), "filtered" = 2.11.4 (the dispatcher still filters markers for
``__compaction``, before PR #21718; batch "all", key-less kept by the PIP-318 back-port default),
"old" = 2.10.0 (before PR #16205: the dispatcher's individual ack of a marker fails the compaction; batch
"any", key-less always kept) - docs §5.4.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pulsar_model import compaction as C
from pulsar_model.tables.contracts import spark_schema
from tests.contract_frames import contract_frame, contract_schema

CLUSTER = "c1"
NEW, FILTERED, OLD = "4.1.3", "2.11.4", "2.10.0"
SNAPSHOT_MARKER = 12  # REPLICATED_SUBSCRIPTION_SNAPSHOT (docs §4.3)
TXN_COMMIT, TXN_ABORT = 21, 22  # transaction end markers (docs §8.3)
T1, T2 = (1, 1), (1, 2)  # (txnid_most_bits, txnid_least_bits)
EARLIEST = (-1, -1)

# Java ``new Random(0).nextInt(10)`` twenty times, as CompactionTest.testCompaction draws its keys
# (checked against an implementation of java.util.Random's LCG in test_testcompaction_key_sequence).
TEST_COMPACTION_KEYS = [0, 8, 9, 7, 5, 3, 1, 1, 9, 4, 7, 7, 3, 2, 5, 4, 4, 5, 1, 0]

# Entry = ("single", key, value[, txn]) | ("batch", [(key, value), ...]) | ("marker"[, type, txn]);
# value None = null value; a marker without a type is a replicated-subscription snapshot.
Entry = tuple[Any, ...]
SCENARIOS: dict[str, list[Entry]] = {
    # §5.8.1 testCompaction: 20 non-batched messages, key "key<j>" from Random(0), value my-message-key-j
    "compaction": [
        ("single", f"key{k}", f"my-message-key{k}-{j}") for j, k in enumerate(TEST_COMPACTION_KEYS)
    ],
    # §5.8.2 testReadCompactedBeforeCompaction / testReadEntriesAfterCompaction
    "read-compacted": [("single", "key0", f"content{i}") for i in range(4)],
    # §5.8.3 testEmptyPayloadDeletes
    "empty-payload-deletes": [
        ("single", "key0", "m0"),
        ("single", "key1", "m1"),
        ("single", "key1", ""),
        ("batch", [("key2", "m2"), ("key3", "m3"), ("key2", "")]),
        ("batch", [("key3", ""), ("key4", "m3"), ("key4", "")]),
        ("single", "key4", "m4"),
    ],
    # §5.8.4 testBatchMessageWithNullValue
    "batch-null-value": [
        ("batch", [("key1", "m1"), ("key1", None), ("key2", "m3")]),
        ("batch", [("key3", "m4"), ("key3", "m5"), ("key3", "m6")]),
        ("batch", [("key4", "m7"), ("key4", None), ("key5", "m9")]),
    ],
    # §5.8.5 testKeyLessMessagesPassThrough
    "key-less": [
        ("single", None, "m1"),
        ("batch", [(None, "m2"), ("key1", "m3"), ("key1", "m4")]),
        ("batch", [("key2", "m5"), ("key2", "m6"), (None, "m7")]),
        ("single", None, "m8"),
    ],
    # §5.8.5 testBatchMessageIdsDontChange
    "batch-ids": [("batch", [("key1", "m1"), ("key2", "m2"), ("key2", "m3")])],
    # §5.8.5 testWholeBatchCompactedOut
    "whole-batch": [
        ("batch", [("key1", "m1"), ("key1", "m2"), ("key1", "m3")]),
        ("single", "key1", "m4"),
    ],
    # §5.8.5 testFirstMessageRetained
    "first-retained": [("single", "key1", "m1"), ("single", "key2", "m2"), ("single", "key2", "m3")],
    # §5.4 markers: skipped (deleted) when delivered (#21718), invisible when filtered, and the last one
    # never arrives when filtered; before #16205 any marker fails the compaction
    "markers": [
        ("marker",),
        ("single", "key1", "a"),
        ("marker",),
        ("single", "key1", "b"),
        ("marker",),
    ],
    "markers-mid": [("marker",), ("single", "key1", "a"), ("marker",), ("single", "key1", "b")],
    # §5.4 transactions: 10:1 belongs to T1, aborted at 10:3, so k1 keeps 10:0's value; T2 commits
    "txn-aborted": [
        ("single", "k1", "x"),
        ("single", "k1", "a", T1),
        ("single", "k2", "b", T2),
        ("marker", TXN_ABORT, T1),
        ("marker", TXN_COMMIT, T2),
        ("single", "k3", "c"),
    ],
    # §5.4 start point: the __compaction cursor's mark-delete (10:0 and 10:2 below)
    "start-mid": [("single", "keyA", "v1"), ("single", "keyA", "v2"), ("single", "keyB", "v3")],
    "start-end": [("single", "keyA", "v1"), ("single", "keyA", "v2"), ("single", "keyB", "v3")],
    # §5.4 every entry deleted: from = to = horizon, nothing written
    "all-deleted": [("single", "k", ""), ("single", None, "n"), ("marker",)],
    # §5.4 / §12.16: entry 10:1 has no uncompressed_size (non-Java client), so its null value is sized
    # by the entry buffer and kept as a value; 10:3 (uncompressed_size set) is a real tombstone
    "non-java-null": [
        ("single", "k1", "v1"),
        ("single", "k1", None),
        ("single", "k2", "v2"),
        ("single", "k2", ""),
    ],
}
#: (topic, entry_id) of non-batched entries written without ``uncompressed_size``.
NO_UNCOMPRESSED_SIZE = {("non-java-null", 1)}
STARTS = {"start-mid": (10, 0), "start-end": (10, 2)}

#: (topic, ledger_id, entry_id, batch_index) -> value, for the assertions.
VALUES: dict[tuple[str, int, int, int], str | None] = {}


def topic(name: str) -> str:
    return f"persistent://t/ns/{name}"


def _entry_ids(name: str, n: int) -> list[tuple[int, int]]:
    if name == "compaction":  # roll over: ledger 10 holds 12 entries, ledger 12 the rest
        return [(10, i) if i < 12 else (12, i - 12) for i in range(n)]
    return [(10, i) for i in range(n)]


def _message_row(name: str, lid: int, eid: int, bidx: int, size: int, key: Any, value: Any) -> dict[str, Any]:
    VALUES[(topic(name), lid, eid, bidx)] = value
    return {
        "cluster": CLUSTER,
        "topic": topic(name),
        "export_id": "e1",
        "export_date": dt.date(2026, 11, 1),
        "ledger_id": lid,
        "entry_id": eid,
        "batch_index": bidx,
        "batch_size": size,
        "key": key,
        "key_b64_encoded": False,
        "payload_size_bytes": 0 if value is None else len(value.encode()),
        "is_null_value": value is None,
        "compacted_out": False,
        "marker_type": None,
        "producer_name": "p",
        "sequence_id": eid,
        "publish_time_ms": 1_000 + eid,
    }


def scenario_rows(name: str, entries: Sequence[Entry]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for (lid, eid), entry in zip(_entry_ids(name, len(entries)), entries, strict=True):
        if entry[0] == "single":
            row = _message_row(name, lid, eid, -1, 1, entry[1], entry[2])
            if len(entry) > 3:
                row.update(txnid_most_bits=entry[3][0], txnid_least_bits=entry[3][1])
            rows.append(row)
        elif entry[0] == "batch":
            for i, (key, value) in enumerate(entry[1]):
                rows.append(_message_row(name, lid, eid, i, len(entry[1]), key, value))
        else:
            row = _message_row(name, lid, eid, -1, 1, None, "<marker>")
            row.update(marker_type=SNAPSHOT_MARKER, producer_name="pulsar.marker")
            if len(entry) > 1:
                row.update(
                    marker_type=entry[1],
                    producer_name="pulsar.txn.marker",
                    txnid_most_bits=entry[2][0],
                    txnid_least_bits=entry[2][1],
                )
            rows.append(row)
    return rows


def _tag(df: DataFrame, output: str) -> DataFrame:
    return df.select(F.lit(output).alias("output"), F.to_json(F.struct(*df.columns)).alias("row"))


@pytest.fixture(scope="module")
def results(spark: SparkSession) -> dict[str, list[dict[str, Any]]]:
    rows = [r for name, entries in SCENARIOS.items() for r in scenario_rows(name, entries)]
    schema = spark_schema("messages")
    # cached: every output below scans it; without the cache each scan re-runs the Python-side rows
    messages = spark.createDataFrame([tuple(r.get(f.name) for f in schema.fields) for r in rows], schema)
    no_size = F.lit(False)
    for name, eid in NO_UNCOMPRESSED_SIZE:
        no_size = no_size | ((F.col("topic") == topic(name)) & (F.col("entry_id") == eid))
    messages = messages.withColumn("has_uncompressed_size", ~no_size).cache()
    starts = spark.createDataFrame(
        [(CLUSTER, topic(n), p) for n, p in STARTS.items()],
        contract_schema("cursors", ["cluster", "topic", ("position", "position")]),
    )
    # §5.8.2: compaction ran after content2 was written; content3 arrives after the horizon.
    early = messages.where(~((F.col("topic") == topic("read-compacted")) & (F.col("entry_id") == 3)))
    readers = spark.createDataFrame(
        [
            (CLUSTER, topic("compaction"), "earliest", EARLIEST),
            (CLUSTER, topic("read-compacted"), "earliest", EARLIEST),
            (CLUSTER, topic("read-compacted"), "from-10:2", (10, 2)),
            (CLUSTER, topic("read-compacted"), "from-10:3", (10, 3)),
        ],
        contract_schema(
            "plan_requests", ["cluster", "topic", ("reader_id", "string"), ("start_position", "position")]
        ),
    )
    no_horizons = contract_frame(spark, "compaction_horizons", ["cluster", "topic", "horizon"], [])
    early_horizons = C.compaction_horizons(early, start_positions=starts)
    empty_ledger = spark.createDataFrame([], spark_schema("compaction_ledger"))
    view_after = C.compacted_reader_view(messages, early_horizons, readers)
    outputs = [
        _tag(C.compact(messages, pulsar_version=NEW, start_positions=starts), "new"),
        _tag(C.compacted_ledger(messages, pulsar_version=NEW, start_positions=starts), "ledger-new"),
        _tag(
            C.compact(messages, retain_null_key=True, pulsar_version=NEW, start_positions=starts),
            "new-retain",
        ),
        _tag(C.compact(messages, pulsar_version=OLD, start_positions=starts), "old"),
        _tag(C.compact(messages, pulsar_version=FILTERED, start_positions=starts), "filtered"),
        _tag(C.compaction_horizons(messages, pulsar_version=NEW, start_positions=starts), "horizons-new"),
        _tag(C.compaction_horizons(messages, pulsar_version=OLD, start_positions=starts), "horizons-old"),
        _tag(
            C.compaction_horizons(messages, pulsar_version=FILTERED, start_positions=starts),
            "horizons-filtered",
        ),
        _tag(view_after, "view-after"),
        _tag(C.compacted_reader_diff(messages, view_after, readers), "diff-after"),
        _tag(C.compacted_reader_view(early, no_horizons, readers, empty_ledger), "view-before"),
        _tag(C.compaction_summary(messages, pulsar_version=NEW, start_positions=starts), "summary-new"),
        _tag(C.compaction_summary(messages, pulsar_version=OLD, start_positions=starts), "summary-old"),
    ]
    union = outputs[0]
    for df in outputs[1:]:
        union = union.unionByName(df)
    collected: dict[str, list[dict[str, Any]]] = defaultdict(list)
    started = time.monotonic()
    result_rows = union.collect()
    messages.unpersist()
    print(f"compaction golden: one collect of {len(result_rows)} rows in {time.monotonic() - started:.1f}s")
    for r in result_rows:
        collected[r["output"]].append(json.loads(r["row"]))
    return collected


def kv(results: dict[str, list[dict[str, Any]]], output: str, name: str) -> list[tuple[Any, Any]]:
    """(key, value) of ``output``'s rows for scenario ``name``, in message-id order."""
    rows = sorted(
        (r for r in results[output] if r["topic"] == topic(name)),
        key=lambda r: (r["ledger_id"], r["entry_id"], r["batch_index"]),
    )
    return [
        (r.get("key"), VALUES[(r["topic"], r["ledger_id"], r["entry_id"], r["batch_index"])]) for r in rows
    ]


def value_of(row: dict[str, Any]) -> Any:
    return VALUES[(row["topic"], row["ledger_id"], row["entry_id"], row["batch_index"])]


def ids(results: dict[str, list[dict[str, Any]]], output: str, name: str) -> list[tuple[int, int, int]]:
    return sorted(
        (r["ledger_id"], r["entry_id"], r["batch_index"])
        for r in results[output]
        if r["topic"] == topic(name)
    )


def horizon(results: dict[str, list[dict[str, Any]]], output: str, name: str) -> dict[str, Any]:
    (row,) = [r for r in results[output] if r["topic"] == topic(name)]
    return {
        k: (None if row.get(k) is None else tuple(row[k].values()))
        for k in ("horizon", "from_position", "to_position")
    }


def failure_code(results: dict[str, list[dict[str, Any]]], output: str, name: str) -> str | None:
    """The code of the topic's ``failure`` (``<code>: <reason>``), None when the compaction completes."""
    (row,) = [r for r in results[output] if r["topic"] == topic(name)]
    text = row.get("failure")
    return None if text is None else str(text).split(":", 1)[0]


NO_RANGE = {"horizon": None, "from_position": None, "to_position": None}


# ---------------------------------------------------------------------------------------- §5.8.1


def test_testcompaction_key_sequence() -> None:
    """The written-down key sequence is java.util.Random(0).nextInt(10), as the Pulsar test draws it."""
    seed, out = (0 ^ 0x5DEECE66D) & ((1 << 48) - 1), []
    for _ in range(20):
        while True:
            seed = (seed * 0x5DEECE66D + 0xB) & ((1 << 48) - 1)
            bits = seed >> 17
            val = bits % 10
            if bits - val + 9 < (1 << 31):
                break
        out.append(val)
    assert out == TEST_COMPACTION_KEYS


def test_compact_testcompaction_keeps_last_value_per_key(results: dict[str, list[dict[str, Any]]]) -> None:
    """§5.8.1 `testCompaction`: "after compaction compactedLedger.entries == number of distinct keys; a
    readCompacted consumer gets exactly the last value per key"."""
    last: dict[str, str] = {}
    for j, k in enumerate(TEST_COMPACTION_KEYS):
        last[f"key{k}"] = f"my-message-key{k}-{j}"
    got = kv(results, "new", "compaction")
    assert sorted(got) == sorted(last.items())
    assert (
        len(
            {
                (r["ledger_id"], r["entry_id"])
                for r in results["ledger-new"]
                if r["topic"] == topic("compaction")
            }
        )
        == len(last)
        == 9
    )


def test_compacted_reader_view_testcompaction_delivers_last_values_in_order(
    results: dict[str, list[dict[str, Any]]],
) -> None:
    """§5.8.1: a readCompacted consumer from earliest gets one message per key, in original order."""
    rows = sorted(
        (
            r
            for r in results["view-after"]
            if r["topic"] == topic("compaction") and r["reader_id"] == "earliest"
        ),
        key=lambda r: r["read_seq"],
    )
    expected_js = sorted({k: j for j, k in enumerate(TEST_COMPACTION_KEYS)}.values())
    assert [VALUES[(r["topic"], r["ledger_id"], r["entry_id"], r["batch_index"])] for r in rows] == [
        f"my-message-key{TEST_COMPACTION_KEYS[j]}-{j}" for j in expected_js
    ]
    assert {r["source"] for r in rows} == {"compacted"}
    # "a non-compacted consumer gets all 20 in order": the raw reader = compacted view + the diff
    hidden = [r for r in results["diff-after"] if r["topic"] == topic("compaction")]
    assert sorted(value_of(r) for r in rows + hidden) == sorted(
        f"my-message-key{k}-{j}" for j, k in enumerate(TEST_COMPACTION_KEYS)
    )
    assert len(hidden) == 20 - 9
    assert [r["read_seq"] for r in rows] == list(range(1, len(expected_js) + 1))


# ---------------------------------------------------------------------------------------- §5.8.2


def _view(results: dict[str, list[dict[str, Any]]], output: str, reader: str) -> list[tuple[str, Any]]:
    rows = sorted(
        (r for r in results[output] if r["topic"] == topic("read-compacted") and r["reader_id"] == reader),
        key=lambda r: r["read_seq"],
    )
    return [
        (r["source"], VALUES[(r["topic"], r["ledger_id"], r["entry_id"], r["batch_index"])]) for r in rows
    ]


def test_compacted_reader_view_before_compaction_reads_everything(
    results: dict[str, list[dict[str, Any]]],
) -> None:
    """§5.8.2 `testReadCompactedBeforeCompaction`: "key0 → content0,1,2; before compaction readCompacted
    gets all three"."""
    assert _view(results, "view-before", "earliest") == [
        ("topic", "content0"),
        ("topic", "content1"),
        ("topic", "content2"),
    ]


def test_compacted_reader_view_after_compaction_then_topic(results: dict[str, list[dict[str, Any]]]) -> None:
    """§5.8.2 `testReadEntriesAfterCompaction`: "after compaction only content2; a later content3 (after
    the horizon) is delivered after content2"."""
    assert _view(results, "view-after", "earliest") == [("compacted", "content2"), ("topic", "content3")]
    # §5.6: a start inside the compacted range reads compacted entries >= start, then the topic.
    assert _view(results, "view-after", "from-10:2") == [("compacted", "content2"), ("topic", "content3")]
    # a start after the horizon reads the topic only
    assert _view(results, "view-after", "from-10:3") == [("topic", "content3")]


def test_compacted_reader_diff_after_compaction_hides_superseded_values(
    results: dict[str, list[dict[str, Any]]],
) -> None:
    """§5.8.2: against a raw reader from earliest, the compacted reader misses content0 and content1."""
    rows = [r for r in results["diff-after"] if r["topic"] == topic("read-compacted")]
    got = sorted(
        (r["reader_id"], VALUES[(r["topic"], r["ledger_id"], r["entry_id"], r["batch_index"])]) for r in rows
    )
    assert got == [("earliest", "content0"), ("earliest", "content1")]


# ---------------------------------------------------------------------------------------- §5.8.3


def test_compact_empty_payload_deletes(results: dict[str, list[dict[str, Any]]]) -> None:
    """§5.8.3 `testEmptyPayloadDeletes`: "key0=m0; key1=m1 then key1 empty; batch [key2=m2, key3=m3, key2
    empty]; batch [key3 empty, key4=m3, key4 empty]; key4=m4 → compacted read yields exactly (key0,m0),
    (key4,m4)"."""
    assert kv(results, "new", "empty-payload-deletes") == [("key0", "m0"), ("key4", "m4")]
    assert ids(results, "new", "empty-payload-deletes") == [(10, 0, -1), (10, 5, -1)]
    # both batches lose every slot: neither is written, not even as placeholders
    assert ids(results, "ledger-new", "empty-payload-deletes") == [(10, 0, -1), (10, 5, -1)]


# ---------------------------------------------------------------------------------------- §5.8.4


def test_compact_batch_message_with_null_value(results: dict[str, list[dict[str, Any]]]) -> None:
    """§5.8.4 `testBatchMessageWithNullValue`: "batches [key1=m1, key1=null, key2=m3], [key3=m4,m5,m6],
    [key4=m7, key4=null, key5=m9] → compacted read yields keys key2, key3, key5 (3 messages)"."""
    assert kv(results, "new", "batch-null-value") == [("key2", "m3"), ("key3", "m6"), ("key5", "m9")]
    assert ids(results, "new", "batch-null-value") == [(10, 0, 2), (10, 1, 2), (10, 2, 2)]


def test_compact_old_compactor_any_deleted_batch_shrinks_range(
    results: dict[str, list[dict[str, Any]]],
) -> None:
    """§5.4/§12.10: the old TwoPhaseCompactor flags a batch deleted if ANY message was deleted, so for
    §5.8.4 ``from`` and ``to`` both become the middle batch and key2/key5 are lost (PR #20980)."""
    assert kv(results, "old", "batch-null-value") == [("key3", "m6")]
    assert horizon(results, "horizons-old", "batch-null-value") == {
        "horizon": (10, 2, -1),
        "from_position": (10, 1, -1),
        "to_position": (10, 1, -1),
    }
    assert horizon(results, "horizons-new", "batch-null-value") == {
        "horizon": (10, 2, -1),
        "from_position": (10, 0, -1),
        "to_position": (10, 2, -1),
    }


# ---------------------------------------------------------------------------------------- §5.8.5


def test_compact_key_less_pass_through_retain_true(results: dict[str, list[dict[str, Any]]]) -> None:
    """§5.8.5 `testKeyLessMessagesPassThrough(true)`: "[(null,m1),(null,m2),(key1,m4),(key2,m6),(null,m7),
    (null,m8)]"."""
    assert kv(results, "new-retain", "key-less") == [
        (None, "m1"),
        (None, "m2"),
        ("key1", "m4"),
        ("key2", "m6"),
        (None, "m7"),
        (None, "m8"),
    ]


def test_compact_key_less_pass_through_retain_false(results: dict[str, list[dict[str, Any]]]) -> None:
    """§5.8.5 `testKeyLessMessagesPassThrough(false)`: "retainNullKey=false: [(key1,m4),(key2,m6)]"."""
    assert kv(results, "new", "key-less") == [("key1", "m4"), ("key2", "m6")]


def test_compact_key_less_always_kept_by_old_compactor(results: dict[str, list[dict[str, Any]]]) -> None:
    """§5.4: "Old TwoPhaseCompactor: ... key-less messages always kept" (no retain option)."""
    assert kv(results, "old", "key-less") == kv(results, "new-retain", "key-less")


def test_compacted_ledger_batch_ids_dont_change(results: dict[str, list[dict[str, Any]]]) -> None:
    """§5.8.5 `testBatchMessageIdsDontChange`: "batch [key1=m1, key2=m2, key2=m3] → after compaction m1
    keeps its id and m3 keeps its id (batch index 2)"; §5.5: the slot count stays 3, slot 1 is a
    compacted_out placeholder."""
    assert kv(results, "new", "batch-ids") == [("key1", "m1"), ("key2", "m3")]
    assert ids(results, "new", "batch-ids") == [(10, 0, 0), (10, 0, 2)]
    ledger = sorted(
        (r["batch_index"], r["compacted_out"], r["batch_size"])
        for r in results["ledger-new"]
        if r["topic"] == topic("batch-ids")
    )
    assert ledger == [(0, False, 3), (1, True, 3), (2, False, 3)]


def test_compact_whole_batch_compacted_out(results: dict[str, list[dict[str, Any]]]) -> None:
    """§5.8.5 `testWholeBatchCompactedOut`: "batch of three key1 values then a non-batched key1=m4 → only
    m4"; the batch is not written at all (§5.5 "If no slot survives the entry is dropped")."""
    assert kv(results, "new", "whole-batch") == [("key1", "m4")]
    assert ids(results, "ledger-new", "whole-batch") == [(10, 1, -1)]


def test_compact_first_message_retained(results: dict[str, list[dict[str, Any]]]) -> None:
    """§5.8.5 `testFirstMessageRetained`: "key1=m1, key2=m2, key2=m3 → m1 and m3 with their original ids"."""
    assert kv(results, "new", "first-retained") == [("key1", "m1"), ("key2", "m3")]
    assert ids(results, "new", "first-retained") == [(10, 0, -1), (10, 2, -1)]


# ---------------------------------------------------------------------------------------- §5.4 edges


def test_compact_markers_never_written_delivered_ones_skipped(
    results: dict[str, list[dict[str, Any]]],
) -> None:
    """§5.4: "From #21718 the dispatcher delivers markers to __compaction and the compactors treat them as
    deleted: never written, never setting from/to" - no line writes a marker."""
    assert kv(results, "new", "markers") == [("key1", "b")]
    assert horizon(results, "horizons-new", "markers") == {
        "horizon": (10, 4, -1),
        "from_position": (10, 1, -1),
        "to_position": (10, 3, -1),
    }
    assert failure_code(results, "horizons-new", "markers") is None
    for output in ("new", "filtered", "old"):
        assert not [r for r in results[output] if r.get("marker_type") is not None], output


def test_compact_filtered_markers_are_invisible_but_a_trailing_one_times_out(
    results: dict[str, list[dict[str, Any]]],
) -> None:
    """§5.4: "Before apache/pulsar#21718 ... the raw reader never receives them. A marker in the middle of
    the range is invisible (neither kept nor counted in from/to); a marker at the very end makes phase one
    wait for last until the read times out, so the compaction fails" (2.11.4)."""
    assert kv(results, "filtered", "markers-mid") == [("key1", "b")]
    assert horizon(results, "horizons-filtered", "markers-mid") == {
        "horizon": (10, 3, -1),
        "from_position": (10, 1, -1),
        "to_position": (10, 3, -1),
    }
    assert failure_code(results, "horizons-filtered", "markers-mid") is None
    assert horizon(results, "horizons-filtered", "markers") == NO_RANGE
    assert failure_code(results, "horizons-filtered", "markers") == C.FAILURE_PHASE_ONE_TIMEOUT
    assert kv(results, "filtered", "markers") == []
    # the same trailing marker is delivered by 4.1.3 and skipped: that compaction completes
    assert failure_code(results, "horizons-new", "all-deleted") is None


def test_compact_marker_before_pr_16205_fails_the_compaction(
    results: dict[str, list[dict[str, Any]]],
) -> None:
    """§5.4: "Before apache/pulsar#16205 (release/2.8.4, 2.9.4, 2.10.2) even filtering failed:
    acknowledging the marker individually on the CompactorSubscription threw IllegalArgumentException" -
    2.10.0 writes nothing, acknowledges no horizon and saves nothing for a topic with a marker."""
    for name in ("markers", "markers-mid", "all-deleted", "txn-aborted"):
        assert horizon(results, "horizons-old", name) == NO_RANGE, name
        assert failure_code(results, "horizons-old", name) == C.FAILURE_ACK_REJECTED, name
        assert kv(results, "old", name) == [], name
    (row,) = [r for r in results["summary-old"] if r["topic"] == topic("markers")]
    assert str(row["failure"]).startswith(C.FAILURE_ACK_REJECTED)
    assert (row["markers"], row["messages_before"], row["entries_after"], row["messages_after"]) == (
        3,
        2,
        0,
        0,
    )
    assert (row["payload_bytes_before"], row["payload_bytes_saved"], row["savings_ratio"]) == (2, 0, 0.0)
    # a topic without markers compacts with the same version
    assert failure_code(results, "horizons-old", "batch-null-value") is None


def test_compact_aborted_transaction_never_reaches_the_compactor(
    results: dict[str, list[dict[str, Any]]],
) -> None:
    """§5.4: every line's dispatcher filters the messages of aborted transactions for __compaction
    (``isTxnAborted``): k1 keeps 10:0's value, not the aborted 10:1; the committed T2 message stays; the
    transaction markers are skipped (4.1.3) or invisible (2.11.4)."""
    expected = [("k1", "x"), ("k2", "b"), ("k3", "c")]
    assert kv(results, "new", "txn-aborted") == expected
    assert kv(results, "filtered", "txn-aborted") == expected
    for output in ("horizons-new", "horizons-filtered"):
        assert horizon(results, output, "txn-aborted") == {
            "horizon": (10, 5, -1),
            "from_position": (10, 0, -1),
            "to_position": (10, 5, -1),
        }, output
    (row,) = [r for r in results["summary-new"] if r["topic"] == topic("txn-aborted")]
    assert (row["messages_before"], row["distinct_keys"], row["markers"], row.get("failure")) == (
        3,
        3,
        2,
        None,
    )


def test_compaction_horizons_start_position_reads_strictly_after(
    results: dict[str, list[dict[str, Any]]],
) -> None:
    """§5.4: phase one reads after the __compaction cursor's mark-delete; nothing after it -> null."""
    assert kv(results, "new", "start-mid") == [("keyA", "v2"), ("keyB", "v3")]
    assert horizon(results, "horizons-new", "start-mid") == {
        "horizon": (10, 2, -1),
        "from_position": (10, 1, -1),
        "to_position": (10, 2, -1),
    }
    assert kv(results, "new", "start-end") == []
    assert horizon(results, "horizons-new", "start-end") == {
        "horizon": None,
        "from_position": None,
        "to_position": None,
    }


def test_compaction_horizons_all_deleted_falls_back_to_last(results: dict[str, list[dict[str, Any]]]) -> None:
    """§5.4: "from = first or m.id ; to = to or m.id" – every entry deleted -> both are the last id."""
    assert horizon(results, "horizons-new", "all-deleted") == {
        "horizon": (10, 2, -1),
        "from_position": (10, 2, -1),
        "to_position": (10, 2, -1),
    }
    assert kv(results, "new", "all-deleted") == []


def test_compaction_summary_counts_empty_payload_scenario(results: dict[str, list[dict[str, Any]]]) -> None:
    """Summary of §5.8.3: 5 keys, 4 tombstones, 6 entries -> 2, 10 messages -> 2 (m0 + m4 = 4 bytes)."""
    (row,) = [r for r in results["summary-new"] if r["topic"] == topic("empty-payload-deletes")]
    assert {
        k: row[k]
        for k in (
            "distinct_keys",
            "live_keys",
            "tombstones",
            "null_key_messages",
            "entries_before",
            "entries_after",
            "messages_before",
            "messages_after",
            "payload_bytes_before",
            "payload_bytes_after",
            "payload_bytes_saved",
        )
    } == {
        "distinct_keys": 5,
        "live_keys": 2,
        "tombstones": 4,
        "null_key_messages": 0,
        "entries_before": 6,
        "entries_after": 2,
        "messages_before": 10,
        "messages_after": 2,
        "payload_bytes_before": 12,
        "payload_bytes_after": 4,
        "payload_bytes_saved": 8,
    }


def test_compaction_summary_key_less_dropped(results: dict[str, list[dict[str, Any]]]) -> None:
    (row,) = [r for r in results["summary-new"] if r["topic"] == topic("key-less")]
    assert (row["null_key_messages"], row["null_key_kept"], row["null_key_dropped"]) == (4, 0, 4)


def test_compact_non_java_null_value_stays_in_compacted_ledger(
    results: dict[str, list[dict[str, Any]]],
) -> None:
    """§5.4 ``compact_single``: "size = uncompressed_size if set, else the readable bytes of the entry
    buffer" (metadata included, PR #25817) - "treat such non-Java non-batched null values as ordinary
    values": k1's null value is written to the compacted ledger and never leaves it; k2's empty payload
    with uncompressed_size = 0 deletes k2."""
    assert kv(results, "new", "non-java-null") == [("k1", None)]
    assert ids(results, "new", "non-java-null") == [(10, 1, -1)]
    assert kv(results, "old", "non-java-null") == [("k1", None)]
    (row,) = [r for r in results["summary-new"] if r["topic"] == topic("non-java-null")]
    assert (row["tombstones"], row["tombstones_never_removed"], row["live_keys"], row["messages_after"]) == (
        2,
        1,
        1,
        1,
    )
    (clean,) = [r for r in results["summary-new"] if r["topic"] == topic("empty-payload-deletes")]
    assert clean["tombstones_never_removed"] == 0


# ---------------------------------------------------------------------------------------- versions


@pytest.mark.parametrize(
    ("version", "retain", "expected"),
    [
        # (marker dispatch, batch "all", PIP-318 option, retain) - one switch per PR (docs §5.4)
        ("4.1.3", None, ("delivered", True, True, False)),
        ("3.2.0", None, ("delivered", True, True, False)),
        ("3.1.3", None, ("delivered", True, True, True)),  # #21718 in the 3.1.3 release notes
        ("3.1.2", None, ("filtered", True, True, True)),  # #21578 in 3.1.2
        ("3.1.1", None, ("filtered", True, False, True)),  # #20980 in 3.1.1
        ("3.1.0", None, ("filtered", False, False, True)),
        ("3.0.3", None, ("delivered", True, True, True)),  # #21578 and #21718 in 3.0.3
        ("3.0.2", None, ("filtered", True, False, True)),  # #20980 in 3.0.2
        ("2.11.4", None, ("filtered", True, True, True)),  # #21718 not in the 2.11.4 release notes
        ("2.11.3", False, ("filtered", True, True, False)),  # #20980 and #21578 in 2.11.3
        ("2.11.2", None, ("filtered", False, False, True)),
        ("2.10.6", True, ("filtered", True, True, True)),
        ("2.10.5", False, ("filtered", False, False, False)),
        ("2.10.2", None, ("filtered", False, False, True)),  # #16205 (release/2.10.2)
        ("2.10.1", None, ("ack_fails", False, False, True)),
        ("2.9.4", None, ("filtered", False, False, True)),  # #16348, the 2.9 cherry-pick of #16205
        ("2.8.3", None, ("ack_fails", False, False, True)),
    ],
)
def test_compactor_semantics_by_version(
    version: str, retain: bool | None, expected: tuple[str, bool, bool, bool]
) -> None:
    sem = C.compactor_semantics(version, retain)
    assert (
        sem.marker_dispatch,
        sem.batch_deleted_when_all,
        sem.retain_null_key_option,
        sem.retain_null_key,
    ) == (expected)
    # without the PIP-318 option key-less messages are kept whatever retain_null_key says
    assert sem.keeps_null_key == (expected[3] or not expected[2])


# ---------------------------------------------------------------------------------------- contracts


@pytest.mark.parametrize(
    ("transform", "table"),
    [
        (C.compaction_horizons, "compaction_horizons"),
        (C.compacted_ledger, "compaction_ledger"),
        (C.compact, "compaction_ledger"),
        (C.compaction_summary, "compaction_summary"),
    ],
)
def test_compaction_outputs_match_their_contracts(spark: SparkSession, transform: Any, table: str) -> None:
    """Output columns and types are those of schemas/<table>.yaml minus the columns the nightly stage
    adds (export identity, pulsar_version) (schema only: no Spark job)."""
    messages = spark.createDataFrame([], spark_schema("messages"))
    expected = [(f.name, f.dataType) for f in spark_schema(table).fields if f.name not in C.STAGE_COLUMNS]
    assert [(f.name, f.dataType) for f in transform(messages).schema.fields] == expected
    assert set(spark_schema(table).names) >= C.STAGE_COLUMNS
