"""Experiment: the analytics stages of one nightly one after another, or two at a time in two threads.

    .venv/bin/python benchmarks/bench_stage_concurrency.py --tier s --mode sequential
    .venv/bin/python benchmarks/bench_stage_concurrency.py --tier s --mode threads
    .venv/bin/python benchmarks/bench_stage_concurrency.py --tier s --mode sequential \\
        --java-options "-Duser.timezone=UTC -XX:+UseParallelGC -XX:TieredStopAtLevel=1"

The eight stages that read only the input tables (backlog, quota, compaction, schemas, replication, plans,
failover, transactions) run on a copy of the kept tier warehouse (``benchmarks/.work/<tier>``, left as it
is) in one session with the benchmark's settings (``run.py``): in order (``sequential``, what ``nightly``
does), or as two lists of about equal time in two Python threads sharing the session (``threads``: Spark
runs concurrent jobs of one application; the pipeline does not offer this). On small tiers a stage's time
is the driver's, so this measures how much of the machine one stage at a time leaves idle. Prints each
stage's time and the whole; ``--conf k=v`` and ``--java-options`` vary the session. It measures an option
for ``benchmarks/README.md``, nothing for the results files.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import BENCH_CONF, WORK, shuffle_partitions

from pulsar_model.pipeline import nightly
from pulsar_model.pipeline.config import AppConfig, StorageConfig
from pulsar_model.pipeline.session import build_session
from pulsar_model.tables.delta_io import DeltaTables

#: Two lists of about equal time on tier s (sequential times: 31.8 + 24.9 + 18.2 + 1.9 = 76.8 s and
#: 23.5 + 19.8 + 3.3 + 6.3 = 52.9 s; the first list starts with the longest stage).
THREAD_LISTS = (
    ("backlog", "quota", "compaction", "schemas"),
    ("replication", "plans", "failover", "transactions"),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tier", default="s")
    parser.add_argument("--mode", choices=("sequential", "threads"), required=True)
    parser.add_argument("--java-options", help="the driver's JVM options instead of the data sessions' own")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    kept = WORK / args.tier
    if not kept.is_dir():
        parser.error(
            f"no kept warehouse {kept}; generate it: benchmarks/run.py --tier {args.tier} --generate-only"
        )
    extra = dict(item.split("=", 1) for item in args.conf)
    if args.java_options:
        extra["spark.driver.extraJavaOptions"] = args.java_options
    with tempfile.TemporaryDirectory(prefix="stage-concurrency-") as tmp:
        warehouse = Path(tmp) / "warehouse"
        shutil.copytree(kept, warehouse)
        spark = build_session(
            "bench-stage-concurrency",
            "local[2]",
            {
                **BENCH_CONF,
                "spark.driver.memory": "8g",
                "spark.sql.shuffle.partitions": shuffle_partitions(args.tier),
                **extra,
            },
        )
        config = AppConfig(storage=StorageConfig(warehouse=str(warehouse)))
        tables = DeltaTables(spark, str(warehouse), backend=config.storage.delta_backend)  # type: ignore[arg-type]
        started = time.monotonic()

        def echo(text: str) -> None:
            print(f"{time.monotonic() - started:7.1f} s  {text}", flush=True)

        def run(stages: tuple[str, ...]) -> None:
            # the stages' own loop without the warehouse lock (which one process takes once per run)
            nightly._run_stages(spark, tables, config, stages, f"bench-{args.mode}", None, None, (), echo)

        if args.mode == "sequential":
            run(tuple(s for stages in THREAD_LISTS for s in stages))
        else:
            failures: list[BaseException] = []

            def guarded(stages: tuple[str, ...]) -> None:
                try:
                    run(stages)
                except BaseException as exc:  # reported below, after both threads ended
                    failures.append(exc)

            threads = [threading.Thread(target=guarded, args=(stages,)) for stages in THREAD_LISTS]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            if failures:
                raise failures[0]
        print(f"{args.mode} on tier {args.tier}: {time.monotonic() - started:.1f} s wall", flush=True)
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
