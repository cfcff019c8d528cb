"""Benchmark: resource limits of the grouped (per topic / per key) functions (issue 9 point 6).

    .venv/bin/python benchmarks/bench_resource_limits.py            # 1,000,000 ledgers x 10,000 cursors,
                                                                    # 10,000,000 messages under one key
    .venv/bin/python benchmarks/bench_resource_limits.py --ledgers 100000 --cursors 1000 --messages 1000000 \\
        --pyspark-memory 512m --max-records-per-batch 2000 --out /tmp/r.json

"One topic with 1M ledgers and 10k cursors, or 10M messages under one key, completes within the memory
target instead of failing a grouped function." Inputs are built with ``spark.range`` (no Python loops):

* the BIG topic ``persistent://bench/ns/big``: ``--ledgers`` ledgers of ``--entries-per-ledger`` entries
  (1000 B each; the last ledger is the empty open one), ``--cursors`` durable subscriptions spread over the
  ledgers, each with 3 ack holes after its mark-delete, plus one exported entry per entry (for the reader
  search) - and a size quota of 10 % of the topic, a time quota of one hour;
* the HOT-KEY topic ``persistent://bench/ns/hot``: ``--messages`` messages, every one under the key
  ``"k"`` (batches of 10 slots, 50,000 entries per ledger), the last one a value.

Steps (each one Spark action, an aggregate over the transform's full output, so the grouped Python function
runs on every group): ``estimated_backlog_size`` and ``pinning_report`` (set-based, backlog stage),
``drop_backlog_for_size_limit`` / ``drop_backlog_for_time_limit`` (quota stage, ``applyInArrow`` per topic
bucket), ``reset_cursor_by_time_plan`` (plans stage, ``applyInArrow`` per topic), ``compact``,
``compaction_summary``, ``compaction_horizons`` (compaction stage; windows per key). For each: wall time,
peak RSS of the process tree (driver Python + JVM + Python workers, sampler of ``bench_compaction``), the
aggregate (to check the answer) or the error. Result: ``benchmarks/results/resource_limits.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_compaction import PeakSampler

from pulsar_model.pipeline.session import build_session

RESULTS = Path(__file__).resolve().parent / "results" / "resource_limits.json"
BIG = "persistent://bench/ns/big"
HOT = "persistent://bench/ns/hot"
CLUSTER = "bench"
ENTRY_BYTES = 1000
HOT_ENTRIES_PER_LEDGER = 50_000
HOT_BATCH = 10
#: Publish time of entry (L, E) of the big topic: one second per entry from this epoch (ms).
T0_MS = 1_700_000_000_000
POS_TYPE = "struct<ledger_id:bigint,entry_id:bigint>"
IDM_TYPE = f"array<struct<lower:{POS_TYPE},upper:{POS_TYPE}>>"


#: The sampler survives processes vanishing while /proc is read (kept as a name for older callers).
SafePeakSampler = PeakSampler


def pos(ledger: Column, entry: Column | int) -> Column:
    entry_col = entry if isinstance(entry, Column) else F.lit(entry)
    return F.struct(ledger.cast("long").alias("ledger_id"), entry_col.cast("long").alias("entry_id"))


def export_ms(ledgers: int, per_ledger: int) -> int:
    """When the big topic was exported (epoch ms): 30 minutes after its last entry."""
    return T0_MS + ((ledgers - 1) * per_ledger - 1) * 1000 + 30 * 60 * 1000


def middle_entry(ledgers: int, per_ledger: int) -> tuple[int, int]:
    """The position the reset-by-time requests find: entry number ``total // 2``."""
    n = (ledgers - 1) * per_ledger // 2
    return 1 + n // per_ledger, n % per_ledger


def big_topic(
    spark: SparkSession, ledgers: int, cursors: int, per_ledger: int, parts: int
) -> dict[str, DataFrame]:
    """The inputs of one topic with ``ledgers`` ledgers (ids 1..ledgers, the last one open and empty) and
    ``cursors`` durable cursors with ack holes."""
    closed = ledgers - 1
    total_entries = closed * per_ledger
    exported_ms = export_ms(ledgers, per_ledger)
    exported = (F.lit(exported_ms) / 1000).cast("timestamp")
    lid = F.col("id") + 1
    # entry number n (0-based, in position order) is published at T0 + n s; a ledger closes 0.5 s after
    # its last entry; the export is taken 30 minutes after the last entry
    closed_ms = F.lit(T0_MS) + (lid * per_ledger - 1) * 1000 + 500
    ledger_rows = spark.range(ledgers, numPartitions=parts).select(
        F.lit(CLUSTER).alias("cluster"),
        F.lit(BIG).alias("topic"),
        lid.alias("ledger_id"),
        F.when(lid <= closed, F.lit(per_ledger)).otherwise(0).cast("long").alias("entries"),
        F.when(lid <= closed, F.lit(per_ledger * ENTRY_BYTES)).otherwise(0).cast("long").alias("size_bytes"),
        F.when(lid <= closed, (closed_ms / 1000).cast("timestamp")).alias("closed_at"),
    )
    managed = spark.range(1).select(
        F.lit(CLUSTER).alias("cluster"),
        F.lit(BIG).alias("topic"),
        F.lit(ledgers).cast("long").alias("current_ledger_id"),
        F.lit(0).cast("long").alias("current_ledger_entries"),
        F.lit(0).cast("long").alias("current_ledger_size_bytes"),
        pos(F.lit(closed), per_ledger - 1).alias("last_confirmed_entry"),
        F.lit(total_entries * ENTRY_BYTES).cast("long").alias("total_size_bytes"),
        exported.alias("exported_at"),
    )
    # cursor i: mark-delete (1 + i * (closed - 3) / cursors, 0); ack holes in it and the next 2 ledgers
    md_ledger = (F.lit(1) + F.floor(F.col("id") * F.lit(max(closed - 3, 0)) / F.lit(cursors))).cast("long")

    def hole(lo_l: Column, lo_e: Column, hi_l: Column, hi_e: Column) -> Column:
        return F.struct(pos(lo_l, lo_e).alias("lower"), pos(hi_l, hi_e).alias("upper"))

    cursor_rows = spark.range(cursors, numPartitions=parts).select(
        F.lit(CLUSTER).alias("cluster"),
        F.lit(BIG).alias("topic"),
        F.format_string("sub-%05d", F.col("id")).alias("cursor_name"),
        F.col("id").cast("int").alias("cursor_order"),
        F.lit(True).alias("is_durable"),
        pos(md_ledger, 0).alias("mark_delete_position"),
        F.array(
            hole(md_ledger, F.lit(0), md_ledger, F.lit(min(1, per_ledger - 1))),
            hole(md_ledger + 1, F.lit(-1), md_ledger + 1, F.lit(0)),
            hole(md_ledger + 2, F.lit(-1), md_ledger + 2, F.lit(0)),
        )
        .cast(IDM_TYPE)
        .alias("individually_deleted"),
    )
    entry_rows = (
        spark.range(total_entries, numPartitions=parts)
        .select(
            (F.floor(F.col("id") / per_ledger) + 1).cast("long").alias("ledger_id"),
            (F.col("id") % per_ledger).cast("long").alias("entry_id"),
            F.col("id").alias("seq"),
        )
        .select(
            F.lit(CLUSTER).alias("cluster"),
            F.lit(BIG).alias("topic"),
            "ledger_id",
            "entry_id",
            pos(F.col("ledger_id"), F.col("entry_id")).alias("position"),
            F.lit(ENTRY_BYTES).cast("long").alias("entry_size_bytes"),
            (F.lit(T0_MS) + F.col("seq") * 1000).alias("publish_time_ms"),
            F.lit(1).alias("message_count"),
            F.lit(None).cast("int").alias("marker_type"),
        )
    )
    size_limit = spark.range(1).select(
        F.lit(CLUSTER).alias("cluster"),
        F.lit(BIG).alias("topic"),
        F.lit(total_entries * ENTRY_BYTES // 10).cast("long").alias("limit_size_bytes"),
    )
    time_limit = spark.range(1).select(
        F.lit(CLUSTER).alias("cluster"),
        F.lit(BIG).alias("topic"),
        F.lit(3600).cast("long").alias("limit_time_seconds"),
    )
    # reset 10 cursors to 0.5 s after the publish time of the middle entry: it is the one found
    middle_ms = T0_MS + (total_entries // 2) * 1000 + 500
    requests = spark.range(10).select(
        F.lit(CLUSTER).alias("cluster"),
        F.lit(BIG).alias("topic"),
        F.format_string("sub-%05d", F.col("id")).alias("cursor_name"),
        F.lit(middle_ms).cast("long").alias("timestamp_ms"),
    )
    return {
        "ledgers": ledger_rows,
        "managed_ledgers": managed,
        "cursors": cursor_rows,
        "entries": entry_rows,
        "size_limits": size_limit,
        "time_limits": time_limit,
        "reset_requests": requests,
    }


def hot_key_messages(spark: SparkSession, messages: int, parts: int) -> DataFrame:
    """``messages`` messages of one topic, all under the key ``"k"``, in batches of 10 slots."""
    slot = F.col("id")
    entry = F.floor(slot / HOT_BATCH).cast("long")
    return spark.range(messages, numPartitions=parts).select(
        F.lit(CLUSTER).alias("cluster"),
        F.lit(HOT).alias("topic"),
        (F.lit(1) + F.floor(entry / HOT_ENTRIES_PER_LEDGER)).cast("long").alias("ledger_id"),
        (entry % HOT_ENTRIES_PER_LEDGER).cast("long").alias("entry_id"),
        (slot % HOT_BATCH).cast("int").alias("batch_index"),
        F.lit("k").alias("key"),
        (F.lit(20) + slot % 100).cast("long").alias("payload_size_bytes"),
        F.lit(False).alias("is_null_value"),
        F.lit(False).alias("compacted_out"),
        F.lit(None).cast("int").alias("marker_type"),
    )


def _steps(
    version: str, trace_max_iterations: int = 100_000
) -> dict[str, tuple[str, Callable[[dict[str, DataFrame]], DataFrame]]]:
    """name -> (input set, the transform's output reduced to one row)."""
    from pulsar_model.backlog import estimated_backlog_size
    from pulsar_model.compaction import compact, compaction_horizons, compaction_summary
    from pulsar_model.pinning import pinning_report
    from pulsar_model.quota.eviction import drop_backlog_for_size_limit, drop_backlog_for_time_limit
    from pulsar_model.readers import reset_cursor_by_time_plan

    def evicted(df: DataFrame) -> DataFrame:
        moved = F.col("mark_delete_position") > F.col("mark_delete_position_before")
        return df.agg(
            F.count("*").alias("rows"),
            F.min("stop_reason").alias("stop_reason"),
            F.min("stop_cursor_name").alias("stop_cursor_name"),
            F.max(F.col("slowest_tie_ambiguous").cast("int")).alias("tie_ambiguous"),
            F.max("iteration_count").alias("iterations"),
            F.sum("skipped_entries").alias("skipped_entries"),
            F.max("estimated_backlog_size_bytes_after").alias("estimate_after"),
            F.sum(F.when(moved, 1).otherwise(0)).alias("moved_cursors"),
            F.min(F.when(moved, F.col("mark_delete_position"))).alias("moved_md_min"),
            F.max(F.when(moved, F.col("mark_delete_position"))).alias("moved_md_max"),
            # the trace: each recorded step on the row of its cursor only (no repetition per row)
            F.sum("trace_steps").alias("trace_steps"),
            F.sum(F.size("iterations")).alias("trace_elements"),
            F.max(F.col("trace_truncated").cast("int")).alias("trace_truncated"),
        )

    return {
        "estimated_backlog_size": (
            "big",
            lambda d: estimated_backlog_size(
                d["managed_ledgers"], d["ledgers"], d["cursors"], version
            ).select("slowest_cursor_name", "estimated_backlog_size_bytes"),
        ),
        "pinning_report": (
            "big",
            lambda d: pinning_report(d["managed_ledgers"], d["ledgers"], d["cursors"], version).select(
                "slowest_cursor_name", "pinned_ledgers", "pinned_bytes"
            ),
        ),
        "quota_size_eviction": (
            "big",
            lambda d: evicted(
                drop_backlog_for_size_limit(
                    d["managed_ledgers"],
                    d["ledgers"],
                    d["cursors"],
                    d["size_limits"],
                    version,
                    trace_max_iterations=trace_max_iterations,
                )
            ),
        ),
        "quota_time_eviction": (
            "big",
            lambda d: evicted(
                drop_backlog_for_time_limit(
                    d["managed_ledgers"],
                    d["ledgers"],
                    d["cursors"],
                    d["time_limits"],
                    pulsar_version=version,
                    trace_max_iterations=trace_max_iterations,
                )
            ),
        ),
        "reset_cursor_by_time": (
            "big",
            lambda d: reset_cursor_by_time_plan(
                d["reset_requests"], d["cursors"], d["ledgers"], d["managed_ledgers"], d["entries"], version
            ).agg(
                F.count("*").alias("rows"),
                F.min("found_position").alias("found_min"),
                F.max("found_position").alias("found_max"),
                F.max("error").alias("error"),
            ),
        ),
        "compact": (
            "hot",
            lambda d: compact(d["messages"], pulsar_version=version).agg(
                F.count("*").alias("rows"),
                F.max("ledger_id").alias("ledger_id"),
                F.max("entry_id").alias("entry_id"),
                F.max("batch_index").alias("batch_index"),
            ),
        ),
        "compaction_summary": (
            "hot",
            lambda d: compaction_summary(d["messages"], pulsar_version=version).select(
                "distinct_keys", "payload_bytes_before", "payload_bytes_after"
            ),
        ),
        "compaction_horizons": (
            "hot",
            lambda d: compaction_horizons(d["messages"], pulsar_version=version).select(
                "horizon", "from_position", "to_position"
            ),
        ),
    }


def probe_worker_cap(spark: SparkSession, megabytes: int) -> dict[str, Any]:
    """Allocate ``megabytes`` inside a grouped pandas function: with ``spark.executor.pyspark.memory``
    below that, the worker must fail (proof that the cap is in force for the steps)."""
    import pandas as pd

    def allocate(pdf: pd.DataFrame) -> pd.DataFrame:
        block = bytearray(megabytes * 2**20)
        return pd.DataFrame({"id": pdf["id"], "size": [len(block)] * len(pdf)})

    try:
        spark.range(1).groupBy("id").applyInPandas(allocate, "id long, size long").collect()
    except Exception as exc:
        return {"allocated_mib": megabytes, "failed": True, "error": f"{type(exc).__name__}"[:200]}
    return {"allocated_mib": megabytes, "failed": False}


def _plain(value: Any) -> Any:
    if hasattr(value, "asDict"):
        return {k: _plain(v) for k, v in value.asDict().items()}
    return value


def run(
    spark: SparkSession,
    *,
    ledgers: int,
    cursors: int,
    per_ledger: int,
    messages: int,
    parts: int,
    version: str,
    only: list[str] | None = None,
    step_timeout: float | None = None,
    trace_max_iterations: int = 100_000,
) -> dict[str, dict[str, Any]]:
    """Run every step once; return name -> {seconds, peak_rss_mib, result | error}."""
    inputs = {
        "big": big_topic(spark, ledgers, cursors, per_ledger, parts),
        "hot": {"messages": hot_key_messages(spark, messages, parts)},
    }
    out: dict[str, dict[str, Any]] = {}
    for name, (which, build) in _steps(version, trace_max_iterations).items():
        if only and name not in only:
            continue
        t0 = time.monotonic()
        record: dict[str, Any] = {}
        sc = spark.sparkContext
        sc.setJobGroup(name, f"resource limits: {name}", interruptOnCancel=True)
        timer = threading.Timer(step_timeout, sc.cancelJobGroup, args=(name,)) if step_timeout else None
        if timer is not None:
            timer.start()
        with SafePeakSampler() as sampler:
            try:
                rows = build(inputs[which]).collect()
                record["result"] = [_plain(r) for r in rows]
                record["status"] = "ok"
            except Exception as exc:  # a failing grouped function is the finding: record it, go on
                timed_out = step_timeout is not None and time.monotonic() - t0 >= step_timeout
                record["status"] = "timeout" if timed_out else "failed"
                record["error"] = f"{type(exc).__name__}: {str(exc)[:1500]}"
                if timed_out:
                    record["error"] = f"cancelled after {step_timeout} s (--step-timeout)"
                record["traceback_tail"] = traceback.format_exc()[-1500:]
            finally:
                if timer is not None:
                    timer.cancel()
        record["seconds"] = round(time.monotonic() - t0, 2)
        record["peak_rss_mib"] = round(sampler.peak / 2**20, 1)
        out[name] = record
        print(
            f"{name}: {record['status']} in {record['seconds']}s, peak RSS {record['peak_rss_mib']} MiB",
            flush=True,
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ledgers", type=int, default=1_000_000)
    parser.add_argument("--cursors", type=int, default=10_000)
    parser.add_argument("--entries-per-ledger", type=int, default=2)
    parser.add_argument("--messages", type=int, default=10_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--version", default="4.1.3")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--pyspark-memory", default=None, help="spark.executor.pyspark.memory (e.g. 512m)")
    parser.add_argument(
        "--max-records-per-batch", default=None, help="spark.sql.execution.arrow.maxRecordsPerBatch"
    )
    parser.add_argument("--steps", default=None, help="comma-separated subset of the steps")
    parser.add_argument(
        "--step-timeout", type=float, default=None, help="cancel a step's Spark job after N seconds"
    )
    parser.add_argument(
        "--probe-cap-mib", type=int, default=None, help="first check that a worker allocating N MiB fails"
    )
    parser.add_argument(
        "--trace-max-iterations",
        type=int,
        default=100_000,
        help="loop steps kept in the eviction trace per topic (config quota.trace_max_iterations)",
    )
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args(argv)

    conf = {
        "spark.sql.shuffle.partitions": str(args.partitions),
        "spark.driver.memory": args.driver_memory,
        "spark.ui.enabled": "false",
    }
    if args.pyspark_memory:
        conf["spark.executor.pyspark.memory"] = args.pyspark_memory
    if args.max_records_per_batch:
        conf["spark.sql.execution.arrow.maxRecordsPerBatch"] = str(args.max_records_per_batch)
    started = time.monotonic()
    with SafePeakSampler() as overall:
        spark = build_session("bench-resource-limits", master=args.master, conf=conf)
        spark.sparkContext.setLogLevel("ERROR")
        session_s = time.monotonic() - started
        probe = probe_worker_cap(spark, args.probe_cap_mib) if args.probe_cap_mib else None
        steps = run(
            spark,
            ledgers=args.ledgers,
            cursors=args.cursors,
            per_ledger=args.entries_per_ledger,
            messages=args.messages,
            parts=args.partitions,
            version=args.version,
            only=[s.strip() for s in args.steps.split(",")] if args.steps else None,
            step_timeout=args.step_timeout,
            trace_max_iterations=args.trace_max_iterations,
        )
        spark.stop()
    result: dict[str, Any] = {
        "benchmark": "resource_limits",
        "big_topic": {
            "ledgers": args.ledgers,
            "cursors": args.cursors,
            "entries_per_ledger": args.entries_per_ledger,
        },
        "hot_key_messages": args.messages,
        "pulsar_version": args.version,
        "trace_max_iterations": args.trace_max_iterations,
        "master": args.master,
        "conf": conf,
        "session_start_seconds": round(session_s, 2),
        "worker_cap_probe": probe,
        "steps": steps,
        "wall_seconds": round(time.monotonic() - started, 2),
        "peak_rss_mib": round(overall.peak / 2**20, 1),
        "cpu_count": os.cpu_count(),
        "load_average_at_end": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "python": platform.python_version(),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    text = json.dumps(result, indent=2, default=str)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0 if all(s["status"] == "ok" for s in steps.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
