"""Benchmark: topic compaction at scale (issue 6: "10M messages in a benchmark, time and peak memory").

    .venv/bin/python benchmarks/bench_compaction.py                   # 10,000,000 messages
    .venv/bin/python benchmarks/bench_compaction.py --messages 1000000

Generates N messages straight into a DataFrame with ``spark.range`` (no Python loop): ``--topics`` topics,
batches of ``--batch-size`` slots (every 4th entry non-batched), ``--keys`` keys per topic with a skewed
draw, 5% key-less messages, 3% tombstones (empty payload), 1% null values, 50,000 entries per ledger.
Then runs ``compact`` and ``compaction_summary`` (docs §5.4-5.5, window over key ordered by position) each
into a ``noop`` (default) or ``parquet`` sink, and reports the wall time of each step and the peak memory of
the whole process tree (driver Python, JVM, Python workers) sampled every 0.2 s: proportional set size from
/proc, so pages the forked PySpark workers share count once. The JSON result is printed and written
to ``benchmarks/results/compaction.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pulsar_model.compaction import compact, compaction_summary
from pulsar_model.pipeline.session import build_session

RESULTS = Path(__file__).resolve().parent / "results" / "compaction.json"
ENTRIES_PER_LEDGER = 50_000


def _children_proc(pid: int) -> list[int]:
    """Child pids of ``pid`` from /proc (Linux); processes and threads may vanish while we read."""
    out = []
    try:
        tids = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return out
    for tid in tids:
        try:
            out += [int(x) for x in (tid / "children").read_text().split()]
        except OSError:
            continue
    return out


def _memory_proc(pid: int) -> int:
    """Proportional set size (PSS) of ``pid``: shared pages (the forked PySpark workers share most of
    theirs with their daemon) are split between their users, so a tree's sum is not inflated the way a
    sum of RSS is. Falls back to RSS where smaps_rollup is unavailable."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def tree_rss_bytes(root: int) -> int:
    """Memory of ``root`` and all its descendants (PSS from /proc, so shared pages count once)."""
    total, stack, seen = 0, [root], set()
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += _memory_proc(pid)
        stack += _children_proc(pid)
    return total


class PeakSampler:
    """Background thread keeping the peak memory of this process tree (PSS, sampled every second).

    A sample costs about 30-40 ms of CPU (the JVM's hundreds of threads are walked to find the
    children, and ``smaps_rollup`` walks the page tables). At 0.2 s, with ``run.py``'s whole-run sampler
    sampling beside each stage's, the samplers took about 15% of this 2-core machine from the stage they
    measured: tier l's compaction stage ran 505.6 s, 452.5 s once samplers nest and sample every 0.5 s
    (the sampler still used 35.5 s of CPU), hence one sample a second. Nesting: while an inner sampler
    runs the outer ones pause, and take its peak when it ends. ``cpu_seconds`` is the CPU the sampler
    thread itself used (reported with the results).
    """

    _active: ClassVar[list[PeakSampler]] = []  # innermost last
    _lock = threading.Lock()

    def __init__(self, interval: float = 1.0) -> None:
        self.interval, self.peak, self._stop = interval, 0, threading.Event()
        self.cpu_seconds = 0.0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        with contextlib.suppress(Exception):  # a vanished process must not kill the sampler
            self.peak = max(self.peak, tree_rss_bytes(os.getpid()))

    def _innermost(self) -> bool:
        with PeakSampler._lock:
            return bool(PeakSampler._active) and PeakSampler._active[-1] is self

    def _run(self) -> None:
        started = time.thread_time()
        while not self._stop.is_set():
            if self._innermost():
                self._sample()
            self._stop.wait(self.interval)
        self.cpu_seconds = time.thread_time() - started

    def __enter__(self) -> PeakSampler:
        with PeakSampler._lock:
            PeakSampler._active.append(self)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        started = time.thread_time()
        self._sample()
        self.cpu_seconds += time.thread_time() - started
        with PeakSampler._lock:
            PeakSampler._active.remove(self)
            for outer in PeakSampler._active:
                outer.peak = max(outer.peak, self.peak)


def generate_messages(spark: SparkSession, n: int, topics: int, keys: int, batch_size: int) -> DataFrame:
    """``n`` rows of the ``messages`` columns the compaction reads, built with column expressions only."""
    seq = F.col("id") / topics  # position of the message inside its topic
    seq = F.floor(seq).cast("long")
    # Groups of 3 batches of ``batch_size`` slots then one non-batched entry: group = 3 * batch_size + 1.
    group = 3 * batch_size + 1
    g, r = F.floor(seq / group).cast("long"), (seq % group).cast("long")
    batched = r < 3 * batch_size
    entry = g * 4 + F.when(batched, F.floor(r / batch_size)).otherwise(F.lit(3)).cast("long")
    h = F.abs(F.xxhash64(F.col("id")))
    draw = h % 100
    key_rank = F.floor(F.pow((h % 1_000_003) / F.lit(1_000_003.0), F.lit(2.0)) * keys).cast("long")  # skewed
    payload = 20 + (F.abs(F.xxhash64(F.col("id"), F.lit(7))) % 400)
    return spark.range(n).select(
        F.lit("bench").alias("cluster"),
        F.concat(F.lit("persistent://bench/ns/t-"), (F.col("id") % topics).cast("string")).alias("topic"),
        (F.lit(1_000) + F.floor(entry / ENTRIES_PER_LEDGER)).cast("long").alias("ledger_id"),
        (entry % ENTRIES_PER_LEDGER).cast("long").alias("entry_id"),
        F.when(batched, r % batch_size).otherwise(F.lit(-1)).cast("int").alias("batch_index"),
        F.when(draw < 5, F.lit(None).cast("string"))
        .otherwise(F.concat(F.lit("key-"), key_rank.cast("string")))
        .alias("key"),
        F.when(draw.between(5, 7), F.lit(0))
        .when(draw == 8, F.lit(0))
        .otherwise(payload)
        .cast("long")
        .alias("payload_size_bytes"),
        (draw == 8).alias("is_null_value"),
        F.lit(False).alias("compacted_out"),
        F.lit(None).cast("int").alias("marker_type"),
    )


def _sink(df: DataFrame, sink: str, out: str) -> None:
    if sink == "noop":
        df.write.format("noop").mode("overwrite").save()
    else:
        df.write.mode("overwrite").parquet(out)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=10_000_000)
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--keys", type=int, default=50_000, help="keys per topic (skewed draw)")
    parser.add_argument("--batch-size", type=int, default=10)
    parser.add_argument("--version", default="4.1.3", help="Pulsar version whose compactor is modelled")
    parser.add_argument("--sink", choices=("noop", "parquet"), default="noop")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--shuffle-partitions", default="8")
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args()

    started = time.monotonic()
    with PeakSampler() as sampler:
        spark = build_session(
            "bench-compaction",
            master=args.master,
            conf={
                "spark.sql.shuffle.partitions": args.shuffle_partitions,
                "spark.driver.memory": args.driver_memory,
            },
        )
        spark.sparkContext.setLogLevel("ERROR")
        session_s = time.monotonic() - started
        messages = generate_messages(spark, args.messages, args.topics, args.keys, args.batch_size)
        steps: dict[str, float] = {}
        with tempfile.TemporaryDirectory(prefix="bench-compaction-") as tmp:
            t0 = time.monotonic()
            _sink(compact(messages, pulsar_version=args.version), args.sink, f"{tmp}/compact")
            steps["compact_seconds"] = round(time.monotonic() - t0, 2)
            t0 = time.monotonic()
            _sink(compaction_summary(messages, pulsar_version=args.version), args.sink, f"{tmp}/summary")
            steps["compaction_summary_seconds"] = round(time.monotonic() - t0, 2)
        spark.stop()
    result: dict[str, Any] = {
        "benchmark": "compaction",
        "messages": args.messages,
        "topics": args.topics,
        "keys_per_topic": args.keys,
        "batch_size": args.batch_size,
        "pulsar_version": args.version,
        "sink": args.sink,
        "master": args.master,
        "shuffle_partitions": int(args.shuffle_partitions),
        "session_start_seconds": round(session_s, 2),
        **steps,
        "wall_seconds": round(time.monotonic() - started, 2),
        "peak_rss_bytes": sampler.peak,
        "peak_rss_mib": round(sampler.peak / 2**20, 1),
        "rss_source": "/proc PSS",
        "cpu_count": os.cpu_count(),
        "load_average_at_end": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "python": platform.python_version(),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    text = json.dumps(result, indent=2)
    print(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
