"""The compacted ledger in the stored-entry dump format round-trips through the ingest (issue 6, item 4).

A small export of real stored entries (encoded with :mod:`pulsar_model.wire.codec`) is ingested, compacted,
written back with :func:`pulsar_model.pipeline.stages.compaction.write_compacted_entries` and ingested
again: the
second ingest must give back exactly the compacted ledger's slots. The topics:

* ``compressed``: docs §5.8.3 ``testEmptyPayloadDeletesWhenCompressed`` - the scenario of
  ``testEmptyPayloadDeletes`` with LZ4, where the size comes from ``uncompressed_size``: the compacted
  read yields exactly (key0, m0), (key4, m4);
* ``batch-ids``: §5.8.5 ``testBatchMessageIdsDontChange`` - the written batch keeps 3 slots, slot 1 an
  empty ``compacted_out`` placeholder;
* ``non-java``: a non-batched null value without ``uncompressed_size`` (§5.4, §12 item 16) survives as a
  value, properties and event time are carried over.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from pulsar_model.compaction import compacted_ledger
from pulsar_model.ingest.layout import discover
from pulsar_model.ingest.pipeline import build_input_tables
from pulsar_model.pipeline.stages.compaction import with_uncompressed_size_flag, write_compacted_entries
from pulsar_model.wire.codec import BatchItem, encode_batch_entry, encode_message_entry

CLUSTER = "c1"
DAY = dt.date(2026, 11, 1)
SLOT = ["topic", "ledger_id", "entry_id", "batch_index"]


def t(name: str) -> str:
    return f"persistent://t/ns/{name}"


def _single(key: str | None, value: str | None, seq: int, **kw: Any) -> bytes:
    return encode_message_entry(
        producer_name="p",
        sequence_id=seq,
        publish_time_ms=1_000 + seq,
        payload=b"" if value is None else value.encode(),
        key=key,
        null_value=value is None,
        **kw,
    )


def _batch(items: list[tuple[str | None, str | None]], seq: int, **kw: Any) -> bytes:
    return encode_batch_entry(
        producer_name="p",
        sequence_id=seq,
        publish_time_ms=1_000 + seq,
        items=[
            BatchItem(key=k, payload=b"" if v is None else v.encode(), null_value=v is None) for k, v in items
        ],
        **kw,
    )


def _export(root: Path) -> None:
    lz4 = {"compression": "LZ4"}
    topics = {
        t("compressed"): [
            _single("key0", "m0", 0, **lz4),
            _single("key1", "m1", 1, **lz4),
            _single("key1", "", 2, **lz4),
            _batch([("key2", "m2"), ("key3", "m3"), ("key2", "")], 3, **lz4),
            _batch([("key3", ""), ("key4", "m3"), ("key4", "")], 6, **lz4),
            _single("key4", "m4", 9, **lz4),
        ],
        t("batch-ids"): [_batch([("key1", "m1"), ("key2", "m2"), ("key2", "m3")], 0)],
        t("non-java"): [
            _single("k1", "v1", 0),
            _single("k1", None, 1, set_uncompressed_size=False, properties={"a": "b"}, event_time_ms=77),
        ],
    }
    folder = root / CLUSTER / "entries"
    folder.mkdir(parents=True)
    with (folder / "dump.jsonl").open("w", encoding="utf-8") as fh:
        for topic, datas in topics.items():
            for eid, data in enumerate(datas):
                line = {
                    "topic": topic,
                    "ledger_id": 10,
                    "entry_id": eid,
                    "data": base64.b64encode(data).decode(),
                }
                fh.write(json.dumps(line) + "\n")


def _ingest(spark: SparkSession, root: Path) -> tuple[DataFrame, DataFrame]:
    frames, _ = build_input_tables(spark, discover(root, DAY), run_id="test", versions={})
    return frames["messages"], frames["entries"]


def _slots(rows: list[Any]) -> list[tuple[Any, ...]]:
    return sorted(
        (
            r["topic"],
            r["ledger_id"],
            r["entry_id"],
            r["batch_index"],
            r["batch_size"],
            None if r["compacted_out"] else r["key"],
            0 if r["compacted_out"] else r["payload_size_bytes"],
            r["compacted_out"],
        )
        for r in rows
    )


def test_write_compacted_entries_round_trips_through_ingest(spark: SparkSession, tmp_path: Path) -> None:
    _export(tmp_path / "export")
    messages, entries = _ingest(spark, tmp_path / "export")
    messages, entries = messages.cache(), entries.cache()
    compacted = compacted_ledger(
        with_uncompressed_size_flag(messages, entries), pulsar_version="4.1.3"
    ).cache()
    expected = compacted.collect()
    written = write_compacted_entries(compacted, messages, entries, str(tmp_path / "compacted"))
    assert written == [f"{tmp_path / 'compacted'}/{CLUSTER}/entries"]
    again, again_entries = _ingest(spark, tmp_path / "compacted")
    got = again.select(
        *SLOT, "batch_size", "key", "payload_size_bytes", "compacted_out", "is_null_value", "properties"
    ).collect()
    meta = again_entries.select(
        "topic", "entry_id", "compression", "uncompressed_size", "event_time_ms"
    ).collect()
    for df in (messages, entries, compacted):
        df.unpersist()

    # §5.8.3 (compressed): exactly (key0, m0) and (key4, m4) survive; §5.8.5: ids and slot count kept
    survivors = sorted(
        (r["topic"], r["entry_id"], r["batch_index"], r["key"]) for r in expected if not r["compacted_out"]
    )
    assert survivors == [
        (t("batch-ids"), 0, 0, "key1"),
        (t("batch-ids"), 0, 2, "key2"),
        (t("compressed"), 0, -1, "key0"),
        (t("compressed"), 5, -1, "key4"),
        (t("non-java"), 1, -1, "k1"),
    ]
    # the dump ingests back to exactly the compacted ledger (placeholders: empty and key-less)
    assert _slots(got) == _slots(expected)
    assert len(got) == 6
    by_id = {(r["topic"], r["entry_id"], r["batch_index"]): r for r in got}
    assert by_id[(t("non-java"), 1, -1)]["is_null_value"] is True
    assert by_id[(t("non-java"), 1, -1)]["properties"] == {"a": "b"}
    entry_meta = {(r["topic"], r["entry_id"]): r for r in meta}
    assert entry_meta[(t("compressed"), 0)]["compression"] == "LZ4"
    assert entry_meta[(t("non-java"), 1)]["uncompressed_size"] is None
    assert entry_meta[(t("non-java"), 1)]["event_time_ms"] == 77
