"""Profiling aid: run one nightly stage on a kept tier warehouse and list where its Spark time went.

    .venv/bin/python benchmarks/profile_stage.py --tier m --stage replication
    .venv/bin/python benchmarks/profile_stage.py --tier l --stage quota --top 30
    .venv/bin/python benchmarks/profile_stage.py --tier s --stage backlog --jfr /tmp/backlog.jfr

Runs the stage exactly as ``benchmarks/run.py --reuse --stages <stage>`` does (same session settings, the
tier's shuffle partitions, the kept warehouse ``benchmarks/.work/<tier>``; it rewrites the stage's output
tables there, as a rerun of the bench would), then prints from the Spark status API the slowest Spark
stages by task time (with CPU, GC, input, shuffle and spill figures) and the slowest SQL executions by
duration (each output table's write is one). Task time far above CPU time means Python workers (grouped
functions) or waiting; high GC means cached data or wide rows on the heap. This is how the stage changes
in ``benchmarks/results/*_before_after.json`` were found; it measures nothing for the results files.

On small tiers a stage's time is mostly the driver's (parsing ``F.expr`` texts, analysing, optimising and
planning the queries), which the status API does not show: ``--jfr`` records the driver JVM with Java
Flight Recorder while the stage runs (``jcmd``, so it needs a JDK, not only a JRE) and sorts the samples
of the thread that serves the py4j calls into what Spark was doing.
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import BENCH_CONF, WORK, run_stage, shuffle_partitions

from pulsar_model.pipeline.config import AppConfig, StorageConfig
from pulsar_model.pipeline.session import THROUGHPUT_JAVA_OPTIONS, build_session

#: What the driver thread's samples are sorted into, first match from the top of the stack down: a frame
#: whose class name contains the key. The SQL parser first (it runs inside Dataset calls' analysis).
DRIVER_WORK = (
    ("SQL text parsing (F.expr)", "SqlBaseParser"),
    ("analysis", "catalyst/analysis/"),
    ("optimisation", "catalyst/optimizer/"),
    ("physical planning and AQE", "execution/adaptive/"),
    ("physical planning and AQE", "SparkStrategies"),
    ("code generation", "expressions/codegen/"),
    ("Delta / file listing", "DeltaLog"),
    ("Delta / file listing", "InMemoryFileIndex"),
    ("job scheduling", "scheduler/"),
)


def _get(url: str) -> Any:
    with urllib.request.urlopen(url) as response:  # the local Spark UI
        return json.load(response)


#: Plan metrics that time an operator's own work, summed over its tasks (Spark's SQL tab).
_TIME_METRICS = (
    "sort time",
    "time in aggregation build",
    "time to build hash map",
    "scan time",
    "shuffle write time",
    "fetch wait time",
    "time to collect",
)


def _millis(text: str) -> float:
    """The total of a Spark SQL metric value such as ``total (min, med, max ...)\n1.3 m (...)``."""
    value = text.split("\n")[-1].split("(")[0].strip() if "\n" in text else text.split("(")[0].strip()
    number, _, unit = value.partition(" ")
    factor = {"ms": 1.0, "s": 1000.0, "m": 60_000.0, "h": 3_600_000.0}.get(unit.strip(), 0.0)
    try:
        return float(number.replace(",", "")) * factor
    except ValueError:
        return 0.0


def _operator_costs(executions: list[dict[str, Any]]) -> list[str]:
    """One line per timed plan operator, costliest first: execution, node, operator, time, rows out."""
    found = []
    for q in executions:
        for node in q.get("nodes", []):
            metrics = {m["name"]: m["value"] for m in node.get("metrics", [])}
            spent = sum(_millis(metrics[name]) for name in _TIME_METRICS if name in metrics)
            if spent:
                rows = metrics.get("number of output rows", "").split("\n")[-1]
                found.append((spent, q["id"], node["nodeId"], node["nodeName"], rows))
    found.sort(reverse=True)
    return [
        f"exec {e:3d} node {n:4d} {name[:28]:28s} {ms / 1000:8.1f} s  rows {rows}"
        for ms, e, n, name, rows in found
    ]


def _job_sites(jobs: list[dict[str, Any]]) -> list[str]:
    """Jobs grouped by call site (Spark names a job after the action and the user frame that ran it)."""
    sites: dict[str, list[int]] = {}
    for job in jobs:
        site = job.get("name", "?").strip()
        entry = sites.setdefault(site, [0, 0])
        entry[0] += 1
        entry[1] += len(job.get("stageIds", []))
    ordered = sorted(sites.items(), key=lambda item: (-item[1][0], item[0]))
    total = sum(count for count, _ in sites.values())
    return [f"{total} jobs in {len(sites)} call sites"] + [
        f"{count:4d} jobs {stages:4d} stages  {site[:110]}" for site, (count, stages) in ordered
    ]


def _driver_work(recording: Path) -> list[str]:
    """The driver's py4j thread's execution samples in ``recording``, by :data:`DRIVER_WORK` category."""
    out = subprocess.run(
        [
            "jfr",
            "print",
            "--json",
            "--stack-depth",
            "2048",
            "--events",
            "jdk.ExecutionSample",
            str(recording),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    events = json.loads(out.stdout)["recording"]["events"]
    # py4j serves the Python driver's calls on one thread per connection; the busiest of those is the stage's
    by_thread = collections.Counter(e["values"]["sampledThread"]["javaName"] for e in events)
    py4j = [t for t, _ in by_thread.most_common() if t.startswith("Thread-")]
    if not py4j:
        return ["no samples of a py4j thread in the recording"]
    counts: collections.Counter[str] = collections.Counter()
    for e in events:
        if e["values"]["sampledThread"]["javaName"] != py4j[0]:
            continue
        classes = [f["method"]["type"]["name"] for f in e["values"]["stackTrace"]["frames"]]
        counts[
            next((label for label, key in DRIVER_WORK if any(key in c for c in classes)), "other driver work")
        ] += 1
    total = sum(counts.values())
    return [f"{total} samples of the py4j thread {py4j[0]} (other threads: {len(events) - total})"] + [
        f"{n:6d} {100 * n / total:5.1f} %  {label}" for label, n in counts.most_common()
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tier", required=True, help="a tier generated earlier by run.py (s, m, l, xl)")
    parser.add_argument("--stage", required=True, help="a nightly stage, e.g. replication, quota")
    parser.add_argument("--shuffle-partitions", help="default: run.py's for the tier (s 4, m 16, else 64)")
    parser.add_argument("--top", type=int, default=20, help="Spark stages and SQL executions to list")
    parser.add_argument(
        "--operators",
        type=int,
        default=0,
        metavar="N",
        help="also list the N costliest plan operators (sort, aggregation, join build, scan times summed "
        "over the SQL executions' plan metrics)",
    )
    parser.add_argument(
        "--jobs",
        action="store_true",
        help="also count the stage's Spark jobs by where they were started (the call site: the action, "
        "the file and line), most first; what the 12-jobs-per-stage target counts",
    )
    parser.add_argument(
        "--plans",
        type=int,
        default=0,
        metavar="N",
        help="also print the final (adaptive) physical plan of the N SQL executions that ran the most Spark "
        "jobs: each exchange and broadcast in it is one job",
    )
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting for this run, e.g. spark.sql.adaptive.enabled=false (repeatable)",
    )
    parser.add_argument(
        "--jfr",
        type=Path,
        metavar="FILE",
        help="record the driver JVM with Java Flight Recorder while the stage runs into FILE and list what "
        "the py4j thread spent its samples on (parsing, analysis, optimisation, planning, ...); needs jcmd",
    )
    args = parser.parse_args(argv)
    extra_conf = dict(item.split("=", 1) for item in args.conf)
    jcmd = shutil.which("jcmd")
    if args.jfr is not None:
        if jcmd is None or shutil.which("jfr") is None:
            parser.error("--jfr needs jcmd and jfr (a JDK, e.g. apt install openjdk-17-jdk-headless) on PATH")
        # deep Catalyst recursion: JFR's default 64 frames would cut off what the parser was called from
        driver_options = extra_conf.get("spark.driver.extraJavaOptions", THROUGHPUT_JAVA_OPTIONS)
        extra_conf["spark.driver.extraJavaOptions"] = (
            f"{driver_options} -XX:FlightRecorderOptions=stackdepth=2048"
        )
    warehouse = WORK / args.tier
    if not warehouse.is_dir():
        parser.error(f"no kept warehouse {warehouse}; generate it: benchmarks/run.py --tier {args.tier}")
    partitions = args.shuffle_partitions or shuffle_partitions(args.tier)
    spark = build_session(
        f"profile-{args.stage}",
        "local[2]",
        {**BENCH_CONF, "spark.driver.memory": "8g", "spark.sql.shuffle.partitions": partitions, **extra_conf},
    )
    config = AppConfig(storage=StorageConfig(warehouse=str(warehouse)))
    pid = ""
    if args.jfr is not None:
        assert jcmd is not None
        pid = str(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())  # type: ignore[union-attr]
        start = [jcmd, pid, "JFR.start", "name=stage", "settings=profile"]
        subprocess.run(start, check=True, capture_output=True)
    started = time.monotonic()
    run_stage(spark, config, args.stage)
    print(f"stage {args.stage} on tier {args.tier}: {time.monotonic() - started:.1f} s wall", flush=True)
    if args.jfr is not None:
        assert jcmd is not None
        dump = [jcmd, pid, "JFR.dump", "name=stage", f"filename={args.jfr.resolve()}"]
        subprocess.run(dump, check=True, capture_output=True)
        print(f"\ndriver work during the stage (Java Flight Recording {args.jfr})")
        for line in _driver_work(args.jfr):
            print(f"  {line}")

    api = f"{spark.sparkContext.uiWebUrl}/api/v1/applications/{spark.sparkContext.applicationId}"
    stages = sorted(_get(f"{api}/stages?details=false"), key=lambda s: -s.get("executorRunTime", 0))
    print("\nslowest Spark stages (task time; CPU and GC of the JVM; rows in / shuffle read / shuffle write)")
    for s in stages[: args.top]:
        print(
            f"  {s['stageId']:5d} task {s.get('executorRunTime', 0) / 1000:8.1f} s"
            f"  cpu {s.get('executorCpuTime', 0) / 1e9:7.1f} s  gc {s.get('jvmGcTime', 0) / 1000:6.1f} s"
            f"  in {s.get('inputRecords', 0):>11,}  shR {s.get('shuffleReadRecords', 0):>11,}"
            f"  shW {s.get('shuffleWriteRecords', 0):>11,}"
            f"  spill {s.get('diskBytesSpilled', 0) / 2**20:7.0f} MiB  {s['name'][:60]}"
        )
    queries = sorted(_get(f"{api}/sql?details=false&length=1000"), key=lambda q: -q.get("duration", 0))
    print(
        "\nslowest SQL executions (id, duration, Spark jobs: one per AQE query stage, checkpoint or action)"
    )
    for q in queries[: args.top]:
        jobs = sum(len(q.get(k, [])) for k in ("successJobIds", "failedJobIds", "runningJobIds"))
        print(f"  {q['id']:5d} {q.get('duration', 0) / 1000:8.1f} s {jobs:4d} jobs  {q['description'][:100]}")
    if args.jobs:
        print("\nSpark jobs by call site (count, task time)")
        for line in _job_sites(_get(f"{api}/jobs")):
            print(f"  {line}")
    if args.operators:
        detailed = _get(f"{api}/sql?details=true&planDescription=false&length=1000")
        print("\ncostliest plan operators (timing metrics summed over tasks; rows out)")
        for line in _operator_costs(detailed)[: args.operators]:
            print(f"  {line}")
    if args.plans:
        detailed = _get(f"{api}/sql?details=true&planDescription=true&length=1000")
        busiest = sorted(detailed, key=lambda q: -len(q.get("successJobIds", [])))[: args.plans]
        for q in busiest:
            jobs = len(q.get("successJobIds", []))
            print(f"\nplan of SQL execution {q['id']} ({jobs} jobs): {q['description']}")
            print(q.get("planDescription", ""))
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
