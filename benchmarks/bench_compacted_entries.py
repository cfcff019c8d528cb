"""Benchmark: re-encoding a compacted ledger as stored entries (``compacted_entry_records``, docs §5.5).

    .venv/bin/python benchmarks/bench_compacted_entries.py --tier m --topics 300

Reads the kept tier warehouse of ``benchmarks/run.py`` (``benchmarks/.work/<tier>``, generate it first
with ``run.py --tier m``), computes the compacted ledger of the first ``--topics`` topics (by name) that
the compaction stage found something to write for, from the stage's inputs, materialises it, then times
:func:`~pulsar_model.compaction.compacted_entry_records` into a ``noop`` sink: the per-entry encoding is
the measured part. Prints and writes a JSON result (``--out``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import EXPORT_DATE, machine

from pulsar_model.compaction import compacted_entry_records, compacted_ledger
from pulsar_model.pipeline.session import build_session
from pulsar_model.pipeline.stages.compaction import (
    compaction_start_positions,
    with_uncompressed_size_flag,
)
from pulsar_model.tables.delta_io import DeltaTables


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tier", default="m")
    parser.add_argument("--topics", type=int, default=300)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--shuffle-partitions", default="16")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    warehouse = Path(__file__).resolve().parent / ".work" / args.tier
    if not (warehouse / "messages").exists():
        parser.error(
            f"no generated tier {args.tier} in {warehouse}: run benchmarks/run.py --tier {args.tier} first"
        )
    spark = build_session(
        "bench-compacted-entries",
        args.master,
        {"spark.driver.memory": "8g", "spark.sql.shuffle.partitions": args.shuffle_partitions},
    )
    tables = DeltaTables(spark, str(warehouse))
    day = {"export_date": EXPORT_DATE}
    topics = (
        tables.read("compaction_ledger", partition_filter=day)
        .select("cluster", "topic")
        .distinct()
        .orderBy("cluster", "topic")
        .limit(args.topics)
        .localCheckpoint()
    )
    messages = tables.read("messages", partition_filter=day).join(topics, ["cluster", "topic"], "left_semi")
    entries = tables.read("entries", partition_filter=day).join(topics, ["cluster", "topic"], "left_semi")
    cursors = tables.read("cursors", partition_filter=day).join(topics, ["cluster", "topic"], "left_semi")
    compacted = compacted_ledger(
        with_uncompressed_size_flag(messages, entries), None, "4.1.3", compaction_start_positions(cursors)
    ).persist()
    slots = compacted.count()
    written_entries = compacted.select("cluster", "topic", "ledger_id", "entry_id").distinct().count()
    t0 = time.monotonic()
    compacted_entry_records(compacted, messages, entries).write.format("noop").mode("overwrite").save()
    seconds = round(time.monotonic() - t0, 3)
    result = {
        "benchmark": "compacted_entry_records",
        "tier": args.tier,
        "topics": args.topics,
        "compacted_slots": slots,
        "compacted_entries": written_entries,
        "seconds": seconds,
        "microseconds_per_entry": round(seconds / max(written_entries, 1) * 1e6, 1),
        "master": args.master,
        "machine": machine(),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
