"""Property tests: pulsar_model.compaction agrees with the plain-Python oracle (docs §5.4, §5.5).

Each hypothesis example is 30-45 random topics (non-batched messages, a quarter of them without
``uncompressed_size`` (docs §5.4 size fallback), batches of 1-4 slots with the odd ``compacted_out``
slot, tombstones (empty payloads and null values), key-less messages, replicated-subscription markers,
transactional messages ended by a commit or an abort marker (or left open), ledger roll-overs, and a
``__compaction`` start position before, inside or after the topic, or none), ONE messages DataFrame for
all of them, four compactor configurations unioned and collected once (docs §5.4, one switch per PR):

* ``4.1.3`` with the broker default: markers delivered and skipped, batch "all", key-less dropped;
* ``3.1.2`` with the broker default: markers filtered (before #21718), batch "all", key-less kept
  (PIP-318 back-port default);
* ``2.11.2``: markers filtered, batch "any" (before #20980), key-less kept (no PIP-318 option);
* ``2.10.0``: the dispatcher's individual ack of a marker or an aborted message fails (before #16205).

Compared per topic: ``horizon``/``from_position``/``to_position``, the ``failure`` code and every slot of
the compacted ledger (id, placeholder flag, slot count). ``PULSAR_PROPERTY_EXAMPLES`` raises the example
count.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import time
from collections import defaultdict
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, Verbosity, assume, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_model import compaction as C
from pulsar_model.tables.contracts import spark_schema
from tests.oracle import compaction as O

CLUSTER = "c1"
#: (label, pulsar_version, retain_null_key argument, oracle: marker dispatch, batch "all", keep key-less)
CONFIGS: list[tuple[str, str, bool | None, O.MarkerDispatch, bool, bool]] = [
    ("new-default", "4.1.3", None, "delivered", True, False),
    ("backport-default", "3.1.2", None, "filtered", True, True),
    ("filtered-any", "2.11.2", None, "filtered", False, True),
    ("ack-fails", "2.10.0", None, "ack_fails", False, True),
]
#: MarkerType values: replicated-subscription snapshot request / snapshot, transaction commit / abort.
REPL_MARKERS = [10, 12]
TXN_COMMIT, TXN_ABORT = 21, 22
KEYS = [None, "a", "b", "c", "d"]

PROPERTY_SETTINGS = settings(
    max_examples=int(os.environ.get("PULSAR_PROPERTY_EXAMPLES", "2")),
    deadline=None,
    database=None,
    phases=[Phase.generate],  # no shrinking: each shrink step would be another Spark job
    verbosity=Verbosity.quiet,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)

Case = tuple[list[O.Entry], tuple[int, int] | None]


@st.composite
def messages_st(draw: st.DrawFn, in_batch: bool) -> O.Message:
    key = draw(st.sampled_from(KEYS))
    kind = draw(st.sampled_from(["value", "value", "value", "empty", "null"]))
    size = draw(st.integers(1, 40)) if kind == "value" else 0
    compacted_out = in_batch and draw(st.integers(0, 19)) == 0
    return O.Message(key=key, payload_size=size, null_value=kind == "null", compacted_out=compacted_out)


@st.composite
def topics_st(draw: st.DrawFn) -> Case:
    n = draw(st.integers(0, 14))
    ledger = draw(st.sampled_from([1, 7, 1000]))
    entry = 0
    entries: list[O.Entry] = []
    open_txns: list[tuple[int, int]] = []
    next_txn = 1
    for _ in range(n):
        if entries and draw(st.integers(0, 4)) == 0:  # roll over to a later (sparse) ledger id
            ledger += draw(st.integers(1, 3))
            entry = 0
        kind = draw(st.sampled_from(["single", "single", "single", "batch", "batch", "marker", "txn"]))
        txn: tuple[int, int] | None = None
        if kind == "txn":  # a message of a new or an open transaction, or the end marker of an open one
            if open_txns and draw(st.booleans()):
                txn = open_txns.pop(draw(st.integers(0, len(open_txns) - 1)))
                end = draw(st.sampled_from([TXN_COMMIT, TXN_ABORT]))
                marker = O.Message(key=None, payload_size=draw(st.integers(5, 30)))
                entries.append(O.Entry(ledger, entry, (marker,), marker_type=end, txn=txn))
                entry += 1
                continue
            if open_txns and draw(st.booleans()):
                txn = open_txns[draw(st.integers(0, len(open_txns) - 1))]
            else:
                txn = (draw(st.integers(0, 1)), next_txn)
                next_txn += 1
                open_txns.append(txn)
            kind = draw(st.sampled_from(["single", "batch"]))
        if kind == "single":
            single = draw(messages_st(False))
            if draw(st.integers(0, 3)) == 0:  # a non-Java client left uncompressed_size out (§5.4, §12.16)
                single = dataclasses.replace(single, uncompressed_size_set=False)
            entries.append(O.Entry(ledger, entry, (single,), txn=txn))
        elif kind == "batch":
            slots = draw(st.lists(messages_st(True), min_size=1, max_size=4))
            entries.append(O.Entry(ledger, entry, tuple(slots), batched=True, txn=txn))
        else:
            marker = O.Message(key=None, payload_size=draw(st.integers(5, 30)))
            entries.append(O.Entry(ledger, entry, (marker,), marker_type=draw(st.sampled_from(REPL_MARKERS))))
        entry += 1 + (1 if draw(st.integers(0, 9)) == 0 else 0)
    positions = [e.position for e in entries]
    start_options: list[tuple[int, int] | None] = [None, None, (ledger, 99)]
    if positions:
        start_options += [(positions[0][0], -1), *positions]
    start = draw(st.sampled_from(start_options))
    return entries, start


def topic_name(i: int) -> str:
    return f"persistent://t/ns/cmp-{i}"


def messages_frame(spark: SparkSession, cases: list[Case]) -> DataFrame:
    schema = spark_schema("messages").add("has_uncompressed_size", T.BooleanType(), False)
    rows: list[tuple[Any, ...]] = []
    for i, (entries, _) in enumerate(cases):
        for e in entries:
            for bi, m in enumerate(e.messages):
                row = {
                    "cluster": CLUSTER,
                    "topic": topic_name(i),
                    "export_id": "x",
                    "export_date": dt.date(2026, 11, 1),
                    "ledger_id": e.ledger_id,
                    "entry_id": e.entry_id,
                    "batch_index": bi if e.batched else -1,
                    "batch_size": len(e.messages),
                    "key": m.key,
                    "key_b64_encoded": False,
                    "payload_size_bytes": m.payload_size,
                    "is_null_value": m.null_value,
                    "compacted_out": m.compacted_out,
                    "marker_type": e.marker_type,
                    "producer_name": "pulsar.marker" if e.marker_type is not None else "p",
                    "sequence_id": e.entry_id,
                    "publish_time_ms": 0,
                    "txnid_most_bits": e.txn[0] if e.txn else None,
                    "txnid_least_bits": e.txn[1] if e.txn else None,
                    "has_uncompressed_size": m.uncompressed_size_set,
                }
                rows.append(tuple(row.get(f.name) for f in schema.fields))
    return spark.createDataFrame(rows, schema)


def _tag(df: DataFrame, output: str) -> DataFrame:
    return df.select(F.lit(output).alias("output"), F.to_json(F.struct(*df.columns)).alias("row"))


def _mid(value: dict[str, Any] | None) -> tuple[int, int, int] | None:
    return None if value is None else (value["ledger_id"], value["entry_id"], value["batch_index"])


def _failure_code(text: str | None) -> str | None:
    """The code of a ``failure`` text (``<code>: <reason>``)."""
    return None if text is None else text.split(":", 1)[0]


@pytest.mark.filterwarnings("ignore:Generating overly large repr")
@PROPERTY_SETTINGS
@given(cases=st.lists(topics_st(), min_size=30, max_size=45))
def test_compacted_ledger_and_horizons_match_oracle(spark: SparkSession, cases: list[Case]) -> None:
    # skip Hypothesis' "simplest" examples (empty topics) before any Spark work
    assume(sum(bool(entries) for entries, _ in cases) > len(cases) // 2)
    started = time.monotonic()
    messages = messages_frame(spark, cases).cache()
    starts = spark.createDataFrame(
        [(CLUSTER, topic_name(i), start) for i, (_, start) in enumerate(cases) if start is not None],
        "cluster string, topic string, position struct<ledger_id:bigint,entry_id:bigint>",
    )
    outputs: list[DataFrame] = []
    for n, (label, version, retain, *_) in enumerate(CONFIGS):
        # every other config derives both from precomputed, materialised phases (what the stage does)
        phases = C.compaction_phases(messages, retain, version, starts, materialise=True) if n % 2 else None
        rows = phases.rows if phases else None
        outputs.append(
            _tag(C.compacted_ledger(messages, retain, version, starts, rows=rows), f"ledger/{label}")
        )
        outputs.append(
            _tag(
                C.compaction_horizons(
                    messages, retain, version, starts, rows=rows, ranges=phases.ranges if phases else None
                ),
                f"horizons/{label}",
            )
        )
    union = outputs[0]
    for df in outputs[1:]:
        union = union.unionByName(df)
    got: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    collected = union.collect()
    messages.unpersist()
    elapsed = time.monotonic() - started
    print(f"compaction properties: {len(cases)} topics, {len(collected)} rows in {elapsed:.1f}s")
    for r in collected:
        row = json.loads(r["row"])
        got[(r["output"], row["topic"])].append(row)

    mismatches: list[str] = []
    for label, _, _, dispatch, batch_all, keep in CONFIGS:
        for i, (entries, start) in enumerate(cases):
            expected = O.compact(
                entries, start, marker_dispatch=dispatch, batch_all_deleted=batch_all, keep_null_key=keep
            )
            t = topic_name(i)
            hz_rows = got.get((f"horizons/{label}", t), [])
            actual_hz = [
                (
                    *(_mid(r.get(c)) for c in ("horizon", "from_position", "to_position")),
                    _failure_code(r.get("failure")),
                )
                for r in hz_rows
            ]
            # a topic with no message and no start row is unknown to the transform: no row at all
            expected_hz = (
                []
                if not entries and start is None
                else [(expected.horizon, expected.from_id, expected.to_id, expected.failure)]
            )
            if actual_hz != expected_hz:
                mismatches.append(f"{label} topic {i}: horizons {actual_hz} != {expected_hz}")
            actual_slots = sorted(
                (r["ledger_id"], r["entry_id"], r["batch_index"], r["compacted_out"], r["batch_size"])
                for r in got.get((f"ledger/{label}", t), [])
            )
            expected_slots = sorted(
                (w.ledger_id, w.entry_id, bi, not survived, len(w.slots))
                for w in expected.written
                for bi, survived in w.slots
            )
            if actual_slots != expected_slots:
                mismatches.append(f"{label} topic {i}: ledger {actual_slots} != {expected_slots}")
            if (actual_hz != expected_hz or actual_slots != expected_slots) and len(mismatches) <= 4:
                mismatches.append(f"    case {i}: start={start} entries={entries}")
    assert not mismatches, "\n".join(mismatches[:10])


def _summary_by_distinct_counts(
    messages: DataFrame, retain: bool | None, version: str, starts: DataFrame
) -> DataFrame:
    """The summary's counts as first written (``count_distinct`` over keys and entries): the reference the
    single-pass summary (flags from phase one's windows) must equal on every topic."""
    rows = C._compacted(messages, retain, version, starts)
    is_msg = ~F.col("is_marker") & ~F.col("is_aborted") & ~F.coalesce(F.col("compacted_out"), F.lit(False))
    kept = F.col("written") & F.col("survives") & ~F.col("is_marker")
    entry = F.struct("ledger_id", "entry_id")
    return rows.groupBy("cluster", "topic").agg(
        F.count_distinct(F.when(F.col("is_keyed"), F.col("key"))).alias("distinct_keys"),
        F.count_distinct(entry).alias("entries_before"),
        F.count_distinct(F.when(F.col("written"), entry)).alias("entries_after"),
        F.count_distinct(F.when(kept & F.col("is_keyed"), F.col("key"))).alias("live_keys"),
        F.sum(kept.cast("long")).alias("messages_after"),
        F.sum(is_msg.cast("long")).alias("messages_before"),
    )


@pytest.mark.filterwarnings("ignore:Generating overly large repr")
@PROPERTY_SETTINGS
@given(cases=st.lists(topics_st(), min_size=30, max_size=45))
def test_compaction_summary_counts_match_distinct_counts_and_oracle(
    spark: SparkSession, cases: list[Case]
) -> None:
    """compaction_summary's key and entry counts (sums of first-row flags) equal the ``count_distinct``
    formulation, and entries/messages after compaction equal the oracle's compacted ledger."""
    assume(sum(bool(entries) for entries, _ in cases) > len(cases) // 2)
    messages = messages_frame(spark, cases).cache()
    starts = spark.createDataFrame(
        [(CLUSTER, topic_name(i), start) for i, (_, start) in enumerate(cases) if start is not None],
        "cluster string, topic string, position struct<ledger_id:bigint,entry_id:bigint>",
    )
    columns = [
        "distinct_keys",
        "entries_before",
        "entries_after",
        "live_keys",
        "messages_after",
        "messages_before",
    ]
    parts = []
    for n, (label, version, retain, *_) in enumerate(CONFIGS):
        # configs 0 and 2 from precomputed rows: lazy for 0, materialised (the stage's path) for 2
        rows = (
            C.compaction_phases(messages, retain, version, starts, materialise=n == 2).rows
            if n % 2 == 0
            else None
        )
        summary = C.compaction_summary(messages, retain, version, starts, rows=rows).select("topic", *columns)
        reference = _summary_by_distinct_counts(messages, retain, version, starts).select("topic", *columns)
        parts.append(_tag(summary, f"summary/{label}"))
        parts.append(_tag(reference, f"reference/{label}"))
    union = parts[0]
    for df in parts[1:]:
        union = union.unionByName(df)
    got: dict[tuple[str, str], dict[str, Any]] = {}
    for r in union.collect():
        row = json.loads(r["row"])
        got[(r["output"], row["topic"])] = row
    messages.unpersist()
    mismatches = []
    for label, _, _, dispatch, batch_all, keep in CONFIGS:
        for i, (entries, start) in enumerate(cases):
            t = topic_name(i)
            summary, reference = got.get((f"summary/{label}", t)), got.get((f"reference/{label}", t))
            if summary != reference:
                mismatches.append(f"{label} topic {i}: summary {summary} != distinct counts {reference}")
            if summary is None:
                continue
            expected = O.compact(
                entries, start, marker_dispatch=dispatch, batch_all_deleted=batch_all, keep_null_key=keep
            )
            markers = {(e.ledger_id, e.entry_id) for e in entries if e.marker_type is not None}
            after = (
                len(expected.written),
                sum(
                    s
                    for w in expected.written
                    if (w.ledger_id, w.entry_id) not in markers
                    for _, s in w.slots
                ),
            )
            if (summary["entries_after"], summary["messages_after"]) != after:
                mismatches.append(f"{label} topic {i}: entries/messages after {summary} != oracle {after}")
    assert not mismatches, "\n".join(mismatches[:10])
