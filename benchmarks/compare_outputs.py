"""Run the nightly stages on one kept warehouse with two code states and compare every output table.

    .venv/bin/python benchmarks/compare_outputs.py --inputs benchmarks/.work/s --export-date 2026-11-01 \
        --code before=/tmp/base-tree --code after=. --out benchmarks/results/compare_s.json
    .venv/bin/python benchmarks/compare_outputs.py --demo --code before=/tmp/base-tree --code after=. \
        --out benchmarks/results/compare_demo.json
    .venv/bin/python benchmarks/compare_outputs.py --ingest demo-export --repeat 3 \
        --code before=/tmp/base-tree --code after=. --out benchmarks/results/compare_ingest.json

``--inputs`` is a warehouse holding the input tables (``benchmarks/run.py --tier s --generate-only`` keeps
one under ``benchmarks/.work/s``); ``--demo`` generates the demo export and ingests it once (with the
first code state) instead. ``--ingest EXPORT_DIR`` measures ingestion itself: each code state ingests that
export into an empty warehouse of its own (``--repeat N`` times, each in a fresh process and warehouse,
the states taking turns), then runs ``--stages`` (none by default) on what it ingested, and the input
tables are compared too (their ``run_id`` columns left out: every run has its own). Each code state
(``LABEL=PATH``, a source tree: a worktree, or ``git archive`` of a commit) runs in its own Python process
with ``PYTHONPATH`` = that tree, on its own copy of the input tables, every stage of ``--stages`` through
:func:`pulsar_model.pipeline.nightly.run_nightly`; the child records per stage its wall time, CPU seconds
and the Spark jobs it ran (like ``benchmarks/run.py``). ``--cluster-versions c1=2.10.6,c2=3.0.7`` rewrites
``managed_ledgers.pulsar_version`` of the copied inputs (a tier generated with one version becomes a
mixed-version export). Each state's measurements are kept in ``<work>/state-<label>.json``: ``--run-only
LABEL`` runs that state alone (two states can then run side by side, each in its own process) and
``--reuse`` compares the states whose file and warehouse exist without running them again. ``--requests
FILE`` gives the plans stage a request file (an export's ``_requests/plan_requests.json``: with ``--inputs``
the stages see no export folder).

Then every output table written by the stages (the input tables and ``run_log`` excluded) is compared row
for row: the rows of the run date in both warehouses, as multisets (``exceptAll`` both ways, so duplicates
count), after dropping only ``--ignore-columns`` (none by default). The result JSON lists per table the
row counts and the rows found on one side only (a few examples), and the per-stage job counts and times
of both states. Exit status 1 when any table differs or a state fails.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: Tables a stage reads but never writes: copied into each state's warehouse, not compared. Listed here, not
#: imported: the script compares two checkouts of the package and must not import either one itself.
INPUT_TABLES = (
    "managed_ledgers",
    "ledgers",
    "cursors",
    "entries",
    "messages",
    "markers",
    "backlog_quotas",
    "consumers",
    "schema_versions",
    "plan_requests",
    "quarantine",
    "ingest_notes",
)
DEFAULT_STAGES = (
    "backlog",
    "plans",
    "quota",
    "replication",
    "compaction",
    "failover",
    "transactions",
    "schemas",
    "history",
)

#: The child: runs the stages with the code on its PYTHONPATH, prints one JSON line of measurements.
CHILD = r"""
import datetime as dt, json, os, sys, time
from pulsar_model.pipeline.config import AppConfig, StorageConfig
from pulsar_model.pipeline.nightly import run_nightly
from pulsar_model.pipeline.session import build_session
from benchmarks.run import SparkWork, tree_cpu_seconds
args = json.loads(sys.argv[1])
config = AppConfig(storage=StorageConfig(warehouse=args["warehouse"]))
spark = build_session("compare-outputs", "local[2]", {
    "spark.ui.retainedJobs": "100000", "spark.ui.retainedStages": "100000",
    "spark.driver.memory": "8g", "spark.sql.shuffle.partitions": args["shuffle_partitions"]})
if args["cluster_versions"]:
    from pyspark.sql import functions as F
    from pulsar_model.tables.delta_io import DeltaTables, TableWrite
    tables = DeltaTables(spark, args["warehouse"])
    day = {"export_date": dt.date.fromisoformat(args["export_date"])}
    ml = tables.read("managed_ledgers", partition_filter=day)
    version = F.col("pulsar_version")
    for cluster, v in args["cluster_versions"].items():
        version = F.when(F.col("cluster") == cluster, F.lit(v)).otherwise(version)
    ml = ml.withColumn("pulsar_version", version).localCheckpoint()
    tables.write_all([TableWrite("managed_ledgers", ml, "replace_partitions", day, ("export_date",))])
work = SparkWork(spark)
out = {}
for stage in args["stages"]:
    cpu0, t0 = tree_cpu_seconds(), time.monotonic()
    run_nightly(spark, config, export_dir=None, export_date=dt.date.fromisoformat(args["export_date"]),
                stages=[stage], request_files=args.get("request_files", []), echo=lambda _t: None)
    out[stage] = {"seconds": round(time.monotonic() - t0, 2),
                  "cpu_seconds": round(tree_cpu_seconds() - cpu0, 1), **work.take()}
    print(f"[{args['label']}] {stage}: {out[stage]}", file=sys.stderr, flush=True)
print("RESULT " + json.dumps(out), flush=True)
spark.stop()
"""

#: One ingestion of an export into an empty warehouse (``--ingest``), measured like a stage.
INGEST_CHILD = r"""
import json, shutil, sys, time
from pulsar_model.pipeline.config import AppConfig, StorageConfig
from pulsar_model.pipeline.nightly import run_nightly
from pulsar_model.pipeline.session import build_session
from benchmarks.run import SparkWork, tree_cpu_seconds
args = json.loads(sys.argv[1])
shutil.rmtree(args["warehouse"], ignore_errors=True)
config = AppConfig(storage=StorageConfig(warehouse=args["warehouse"]))
spark = build_session("compare-outputs-ingest", "local[2]", {
    "spark.ui.retainedJobs": "100000", "spark.ui.retainedStages": "100000",
    "spark.driver.memory": "8g", "spark.sql.shuffle.partitions": args["shuffle_partitions"]})
work = SparkWork(spark)
cpu0, t0 = tree_cpu_seconds(), time.monotonic()
outcome = run_nightly(spark, config, export_dir=args["export_dir"], stages=["ingest"], echo=lambda _t: None)
run = {"seconds": round(time.monotonic() - t0, 2), "cpu_seconds": round(tree_cpu_seconds() - cpu0, 1),
       **work.take()}
print(f"[{args['label']}] ingest: {run}", file=sys.stderr, flush=True)
print("RESULT " + json.dumps({"export_date": outcome[-1].run_date.isoformat(), "ingest": run}), flush=True)
spark.stop()
"""

#: The demo's export and ingest with the first code state (the input tables are then copied).
DEMO_CHILD = r"""
import json, sys
from pulsar_model.pipeline.config import AppConfig, StorageConfig
from pulsar_model.pipeline.nightly import run_nightly
from pulsar_model.pipeline.session import build_session
from pulsar_model.demo import DemoSpec, generate_demo
args = json.loads(sys.argv[1])
generate_demo(args["export_dir"], DemoSpec(), overwrite=True)
config = AppConfig(storage=StorageConfig(warehouse=args["warehouse"]))
spark = build_session("compare-outputs-demo", "local[2]", {"spark.driver.memory": "8g"})
outcome = run_nightly(spark, config, export_dir=args["export_dir"], stages=["ingest"], echo=lambda _t: None)
print("RESULT " + json.dumps({"export_date": outcome[-1].run_date.isoformat()}), flush=True)
spark.stop()
"""


def _run_child(code: Path, script: str, payload: dict[str, Any]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(code)}
    proc = subprocess.run(
        [sys.executable, "-c", script, json.dumps(payload)],
        cwd=code,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    sys.stderr.write(proc.stderr[-4000:] if proc.returncode else "")
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode or not lines:
        raise RuntimeError(f"{code}: exit {proc.returncode}: {proc.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(lines[-1][len("RESULT ") :])
    return result


def _commit_of(tree: Path) -> str | None:
    """The commit checked out in ``tree``, None for a tree without git (e.g. ``git archive``)."""
    commit = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return commit or None


def _copy_inputs(source: Path, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for name in INPUT_TABLES:
        if (source / name).is_dir():
            shutil.copytree(source / name, target / name)


def _output_tables(warehouse: Path, with_inputs: bool = False) -> list[str]:
    skipped = ("run_log",) if with_inputs else (*INPUT_TABLES, "run_log")
    return sorted(
        p.name
        for p in warehouse.iterdir()
        if p.is_dir() and (p / "_delta_log").is_dir() and p.name not in skipped
    )


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _ingest_states(
    codes: dict[str, str], work: Path, export_dir: Path, repeat: int, shuffle_partitions: str
) -> tuple[dict[str, Any], dict[str, Path], str]:
    """Each state ingests ``export_dir`` ``repeat`` times (fresh process and warehouse, states in turn)."""
    states: dict[str, Any] = {}
    warehouses = {label: work / f"warehouse-{label}" for label in codes}
    export_date = ""
    for round_number in range(1, repeat + 1):
        for label, path in codes.items():
            tree = Path(path).resolve()
            if label not in states:
                states[label] = {"tree": str(tree), "commit": _commit_of(tree), "ingest_runs": []}
            print(f"[{label}] ingest {export_dir}, run {round_number} of {repeat}", flush=True)
            payload = {
                "label": label,
                "warehouse": str(warehouses[label]),
                "export_dir": str(export_dir),
                "shuffle_partitions": shuffle_partitions,
            }
            made = _run_child(tree, INGEST_CHILD, payload)
            export_date = made["export_date"]
            states[label]["ingest_runs"].append(made["ingest"])
    for state in states.values():
        runs = state["ingest_runs"]
        state["stages"] = {
            "ingest": {
                "seconds": _median([r["seconds"] for r in runs]),
                "cpu_seconds": _median([r["cpu_seconds"] for r in runs]),
                "jobs": runs[-1]["jobs"],
                "runs": len(runs),
            }
        }
    return states, warehouses, export_date


def compare(
    warehouses: dict[str, Path],
    export_date: dt.date,
    ignore: tuple[str, ...],
    examples: int = 3,
    with_inputs: bool = False,
) -> dict[str, Any]:
    """Per output table of either warehouse (and input table, ``with_inputs``): rows on each side and rows
    found on one side only."""
    sys.path.insert(0, str(ROOT))
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F
    from pyspark.sql.types import MapType

    from pulsar_model.pipeline.session import build_session
    from pulsar_model.tables.delta_io import DeltaTables

    spark = build_session("compare-outputs", "local[2]", {"spark.driver.memory": "8g"})
    (a_label, a_dir), (b_label, b_dir) = warehouses.items()
    a_tables, b_tables = DeltaTables(spark, str(a_dir)), DeltaTables(spark, str(b_dir))
    names = sorted(set(_output_tables(a_dir, with_inputs)) | set(_output_tables(b_dir, with_inputs)))
    result: dict[str, Any] = {}

    def day_rows(tables: DeltaTables, name: str) -> DataFrame:
        df = tables.read(name)
        if "export_date" in df.columns:
            df = df.where(F.col("export_date") == F.lit(export_date))
        df = df.drop(*[c for c in ignore if c in df.columns])
        # set operations refuse map columns: a map compares as its entries in key order
        maps = [f.name for f in df.schema.fields if isinstance(f.dataType, MapType)]
        return df.withColumns({m: F.array_sort(F.map_entries(F.col(m))) for m in maps})

    for name in names:
        if not (a_tables.exists(name) and b_tables.exists(name)):
            result[name] = {"equal": False, "missing_in": a_label if not a_tables.exists(name) else b_label}
            continue
        a, b = day_rows(a_tables, name), day_rows(b_tables, name)
        if sorted(a.columns) != sorted(b.columns):
            result[name] = {"equal": False, "columns": {a_label: a.columns, b_label: b.columns}}
            continue
        b = b.select(*a.columns)
        only_a, only_b = a.exceptAll(b), b.exceptAll(a)
        n_a, n_b, n_only_a, n_only_b = a.count(), b.count(), only_a.count(), only_b.count()
        entry: dict[str, Any] = {
            "equal": n_only_a == 0 and n_only_b == 0,
            "rows": {a_label: n_a, b_label: n_b},
        }
        if not entry["equal"]:
            entry[f"only_{a_label}"] = n_only_a
            entry[f"only_{b_label}"] = n_only_b
            entry["examples"] = {
                a_label: [str(r.asDict()) for r in only_a.limit(examples).collect()],
                b_label: [str(r.asDict()) for r in only_b.limit(examples).collect()],
            }
        result[name] = entry
        print(f"  {name}: {'equal' if entry['equal'] else 'DIFFERENT'} {entry['rows']}", flush=True)
    spark.stop()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--inputs", help="warehouse holding the input tables (kept as it is)")
    source.add_argument("--demo", action="store_true", help="generate and ingest the demo export")
    source.add_argument("--ingest", help="an export folder each code state ingests (measured, compared)")
    parser.add_argument("--repeat", type=int, default=1, help="--ingest: ingestions per state (median)")
    parser.add_argument("--export-date", default=None, help="run date (YYYY-MM-DD); --demo finds it")
    parser.add_argument("--code", action="append", required=True, help="LABEL=PATH of a source tree (twice)")
    parser.add_argument("--stages", default=None, help="default: every stage (none with --ingest)")
    parser.add_argument("--requests", action="append", default=[], help="a plan request file (repeatable)")
    parser.add_argument("--cluster-versions", default="", help="c1=V1,c2=V2: rewrite the copies' versions")
    parser.add_argument("--shuffle-partitions", default="4")
    parser.add_argument("--ignore-columns", default="", help="comma-separated columns left out of the match")
    parser.add_argument("--work", default=None, help="where the warehouses go (default: a temporary folder)")
    parser.add_argument("--out", required=True, help="result JSON")
    parser.add_argument("--run-only", default=None, help="LABEL: run that code state only, no comparison")
    parser.add_argument("--reuse", action="store_true", help="keep the states already run in --work")
    args = parser.parse_args(argv)
    codes = dict(item.split("=", 1) for item in args.code)
    if len(codes) != 2:
        parser.error("--code LABEL=PATH exactly twice")
    work = Path(args.work or tempfile.mkdtemp(prefix="compare-outputs-"))
    versions = dict(item.split("=", 1) for item in args.cluster_versions.split(",") if item)
    stage_list = args.stages if args.stages is not None else "" if args.ingest else ",".join(DEFAULT_STAGES)
    stages = [s for s in stage_list.split(",") if s]
    first = Path(next(iter(codes.values()))).resolve()
    ingested: dict[str, Any] = {}
    if args.ingest:
        if args.run_only or args.reuse:
            parser.error("--ingest runs both states: no --run-only or --reuse")
        ingested, ingest_warehouses, export_date = _ingest_states(
            codes, work, Path(args.ingest).resolve(), max(1, args.repeat), args.shuffle_partitions
        )
        inputs = work / "ingested"
    elif args.demo:
        inputs = work / "demo-inputs"
        shutil.rmtree(inputs, ignore_errors=True)
        made = _run_child(
            first, DEMO_CHILD, {"export_dir": str(work / "demo-export"), "warehouse": str(inputs)}
        )
        export_date = made["export_date"]
    else:
        inputs = Path(args.inputs).resolve()
        export_date = args.export_date or parser.error("--export-date is needed with --inputs")
    report: dict[str, Any] = {
        "inputs": "demo" if args.demo else f"ingest {args.ingest}" if args.ingest else str(inputs),
        "export_date": export_date,
        "cluster_versions": versions,
        "stages": stages,
        "codes": {},
        "measured_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
    request_files = [str(Path(f).resolve()) for f in args.requests]

    def stage_payload(label: str, warehouse: Path) -> dict[str, Any]:
        return {
            "label": label,
            "warehouse": str(warehouse),
            "export_date": export_date,
            "stages": stages,
            "cluster_versions": versions,
            "shuffle_partitions": args.shuffle_partitions,
            "request_files": request_files,
        }

    warehouses: dict[str, Path] = {}
    for label, path in codes.items():
        warehouse = work / f"warehouse-{label}"
        state_file = work / f"state-{label}.json"
        if args.run_only is not None and label != args.run_only:
            continue
        if args.ingest:
            report["codes"][label] = ingested[label]
            warehouses[label] = ingest_warehouses[label]
            if stages:
                payload = stage_payload(label, warehouse)
                report["codes"][label]["stages"].update(_run_child(Path(path).resolve(), CHILD, payload))
            continue
        if args.reuse and state_file.is_file() and warehouse.is_dir():
            report["codes"][label] = json.loads(state_file.read_text(encoding="utf-8"))
            warehouses[label] = warehouse
            print(f"[{label}] reused {state_file}", flush=True)
            continue
        state_file.unlink(missing_ok=True)
        shutil.rmtree(warehouse, ignore_errors=True)
        _copy_inputs(inputs, warehouse)
        tree = Path(path).resolve()
        commit = _commit_of(tree)
        print(f"[{label}] {tree} ({commit or 'no git'}): {', '.join(stages)}", flush=True)
        report["codes"][label] = {"tree": str(tree), "commit": commit, "stages": {}}
        report["codes"][label]["stages"] = _run_child(tree, CHILD, stage_payload(label, warehouse))
        state_file.write_text(json.dumps(report["codes"][label], indent=2) + "\n", encoding="utf-8")
        warehouses[label] = warehouse
    if args.run_only is not None:
        print(f"[{args.run_only}] measured -> {work / f'state-{args.run_only}.json'}")
        return 0
    ignore = tuple(c for c in args.ignore_columns.split(",") if c)
    if args.ingest:
        ignore = (*ignore, "run_id")
    report["ignored_columns"] = list(ignore)
    report["tables"] = compare(
        warehouses, dt.date.fromisoformat(export_date), ignore, with_inputs=bool(args.ingest)
    )
    report["all_equal"] = all(t["equal"] for t in report["tables"].values())
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"all tables equal: {report['all_equal']} -> {args.out}")
    return 0 if report["all_equal"] else 1


if __name__ == "__main__":
    sys.exit(main())
