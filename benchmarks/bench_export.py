"""Benchmark of ``pulsar-analytics export`` against a loopback fake admin server with a fixed latency.

The fake server (tests/fake_pulsar_admin.py) runs in its own process and answers every request after
``--latency-ms`` (default 2 ms, a broker on the same network). The synthetic cluster has ``--topics``
non-partitioned topics of metadata (internalStats, stats, quota map, schema: 4 requests each) and
``--entries`` entries spread over ``--entry-topics`` of them (one request each, ``--entries all``): the
default is the issue's 10,000 topics and 1,000,000 entries. The exporter runs in this process, once
per ``--entries`` scale in ``--scales`` (each in a fresh child process, so that its peak RSS is its
own): requests/s, wall time and peak RSS per scale show throughput and whether memory stays flat in
the number of entries. Results: ``benchmarks/results/export.json`` and ``.md``.

    python benchmarks/bench_export.py                      # the issue's size (about 10 minutes)
    python benchmarks/bench_export.py --topics 1000 --entries 100000 --scales 0.1,1   # quick
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pulsar_model.wire import BatchItem, encode_batch_entry  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"


class _Entries(dict):  # type: ignore[type-arg]
    """Every position of a topic's ledger answers the same stored entry (server memory stays flat)."""

    def __init__(self, data: bytes, per_ledger: int) -> None:
        super().__init__()
        self.data = data
        self.per_ledger = per_ledger

    def get(self, key: Any, default: Any = None) -> Any:
        ledger, entry = key
        return self.data if ledger == 1 and 0 <= entry < self.per_ledger else default


def _cluster(topics: int, entry_topics: int, entries: int) -> Any:
    from tests.fake_pulsar_admin import FakeCluster

    class Cluster(FakeCluster):
        def txn_state(self, topic: str) -> Any:
            return lambda most, least: None

    data = encode_batch_entry(
        producer_name="bench",
        sequence_id=1,
        publish_time_ms=1_795_226_400_000,
        items=[BatchItem(key=f"k{i}", payload=b"x" * 200, properties={"a": "b"}) for i in range(3)],
    )
    per_topic = entries // max(1, entry_topics)
    c = Cluster("bench", "4.1.3", header_style="json", runtime_config={"clusterName": "bench"})
    names = [f"persistent://bench/ns/t{i:06d}" for i in range(topics)]
    c.namespaces = {"bench": ["bench/ns"]}
    c.topics = {"bench/ns": names}
    for i, name in enumerate(names):
        n = per_topic if i < entry_topics else 0
        c.internal[name] = {
            "entriesAddedCounter": n,
            "numberOfEntries": n,
            "totalSize": n * len(data),
            "currentLedgerEntries": n,
            "currentLedgerSize": n * len(data),
            "lastConfirmedEntry": f"1:{n - 1}",
            "state": "LedgerOpened",
            "ledgers": [{"ledgerId": 1, "entries": 0, "size": 0, "offloaded": False}],
            "cursors": {"sub": {"markDeletePosition": "1:-1", "readPosition": "1:0"}},
        }
        c.stats[name] = {
            "msgInCounter": n,
            "storageSize": n * len(data),
            "subscriptions": {},
            "publishers": [],
        }
        if n:
            c.entries[name] = _Entries(data, n)
    return c


def _serve(topics: int, entry_topics: int, entries: int, latency: float, port_q: Any, stop: Any) -> None:
    from tests.fake_pulsar_admin import FakeAdminServer, Faults

    with FakeAdminServer(_cluster(topics, entry_topics, entries), Faults(latency_seconds=latency)) as server:
        port_q.put(server.port)
        stop.wait()


def _export(url: str, out: str, concurrency: int, result_q: Any) -> None:
    from pulsar_model.export import ClusterTarget, ExportOptions, run_export

    options = ExportOptions(
        targets=(ClusterTarget(url),),
        out=Path(out),
        entries="all",
        max_entries_per_topic=None,
        concurrency=concurrency,
        max_rate=None,
        progress=False,
    )
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    summary = run_export(options)
    wall = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    c = summary.clusters[0]
    result_q.put(
        {
            "wall_seconds": round(wall, 2),
            "requests": c.stats.requests,
            "requests_per_second": round(c.stats.requests / wall, 1),
            "exporter_cpu_seconds": round(cpu, 2),
            "requests_per_exporter_cpu_second": round(c.stats.requests / cpu, 1) if cpu else None,
            "entries": c.entries,
            "topics": c.topics_done,
            "failures": len(c.failures),
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        }
    )


def run(
    topics: int, entries: int, entry_topics: int, latency_ms: float, concurrency: int, scale: float
) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    port_q, result_q, stop = ctx.Queue(), ctx.Queue(), ctx.Event()
    n_entries = int(entries * scale)
    server = ctx.Process(
        target=_serve, args=(topics, entry_topics, n_entries, latency_ms / 1000, port_q, stop), daemon=True
    )
    server.start()
    port = port_q.get(timeout=120)
    out = tempfile.mkdtemp(prefix="bench-export-")
    try:
        child = ctx.Process(target=_export, args=(f"http://127.0.0.1:{port}", out, concurrency, result_q))
        child.start()
        result = result_q.get()
        child.join()
        size = sum(p.stat().st_size for p in Path(out).rglob("*") if p.is_file())
    finally:
        stop.set()
        server.join(10)
        shutil.rmtree(out, ignore_errors=True)
    return {
        "scale": scale,
        "topics_requested": topics,
        "entries_requested": n_entries,
        "bytes_written": size,
        "load_average_1m_after": round(os.getloadavg()[0], 2),
        **result,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--entry-topics", type=int, default=100)
    parser.add_argument("--latency-ms", type=float, default=2.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--scales", default="0.1,1", help="fractions of --entries to run (memory flatness)")
    parser.add_argument("--name", default="export", help="results file stem")
    args = parser.parse_args()
    runs = [
        run(args.topics, args.entries, args.entry_topics, args.latency_ms, args.concurrency, float(s))
        for s in args.scales.split(",")
    ]
    report = {
        "benchmark": "pulsar-analytics export against the loopback fake admin server",
        "host": {"cpus": os.cpu_count(), "machine": platform.machine(), "python": platform.python_version()},
        "latency_ms": args.latency_ms,
        "concurrency": args.concurrency,
        "target_requests_per_second": 1500,
        "runs": runs,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps(report, indent=2) + "\n")
    lines = [
        f"# export benchmark ({args.latency_ms:g} ms latency, concurrency {args.concurrency}, "
        f"{report['host']['cpus']} cpus)",
        "",
        "| entries | topics | requests | wall s | requests/s | exporter CPU s | requests/CPU s | "
        "peak RSS MiB | written MiB | load avg | failures |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        lines.append(
            f"| {r['entries']:,} | {r['topics']:,} | {r['requests']:,} | {r['wall_seconds']} | "
            f"{r['requests_per_second']:,} | {r['exporter_cpu_seconds']} | "
            f"{r['requests_per_exporter_cpu_second']:,} | {r['peak_rss_mib']} | "
            f"{r['bytes_written'] / 2**20:.0f} | {r['load_average_1m_after']} | {r['failures']} |"
        )
    (RESULTS / f"{args.name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if all(r["failures"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
