"""A writer SIGKILLed at every phase of every kind of table write (issue 9 point 2).

Each case is one child Python process (its own Spark driver JVM) that runs one write call on a copy of
one warehouse: ``overwrite`` (``t_over``), ``replace_partitions`` (``t_repl``), ``append`` (``t_app``),
one ``write_all`` of three tables (``wa_new`` created by it, ``wa_repl``, ``wa_over``) or the nightly's
``run_log`` append. The test hook ``PULSAR_ANALYTICS_FAULT=<table>:<phase>`` makes the
bridge kill its own process at ``staging`` (Spark job running, part files appearing), ``staged``,
``moved`` (files in the table root, not committed) or ``committed``. Then, in this process:

1. the child died of SIGKILL at the named point (its stderr line) and its JVM is gone;
2. every table reads, through Spark and through delta-rs, exactly the rows of its previous version (the
   writes before the killed one: their new version; a write killed after its commit: its new version);
   a ``write_all`` killed between its commits shows its committed tables until cleanup;
3. ``pulsar-analytics cleanup`` removes every staging folder and every uncommitted data file moved into
   a table, and restores the tables of a partly committed ``write_all`` (reported in its log);
4. rerunning the write succeeds and every table holds the expected rows.

Run as a script (``python tests/test_crash_points.py <warehouse>``) this file is the child.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_model.tables.delta_io import STAGING_DIR, DeltaTables, TableWrite
from pulsar_model.tables.delta_io._faults import FAULT_ENV, FAULT_PHASES

pytestmark = pytest.mark.slow

D1, D2 = dt.date(2024, 5, 1), dt.date(2024, 5, 2)
DAILY = T.StructType(
    [
        T.StructField("export_date", T.DateType(), False),
        T.StructField("cluster", T.StringType(), False),
        T.StructField("topic", T.StringType(), False),
        T.StructField("entries", T.LongType(), False),
    ]
)
Row = dict[str, Any]


def _daily(date: dt.date, cluster: str, topics: range, base: int) -> list[Row]:
    return [
        {
            "export_date": date,
            "cluster": cluster,
            "topic": f"persistent://t/ns/topic-{i}",
            "entries": base + i,
        }
        for i in topics
    ]


def _run_log(run_id: str, stages: tuple[str, ...]) -> list[Row]:
    start = dt.datetime(2024, 5, 1, 1, 2, 3, 456789)
    return [
        {
            "run_id": run_id,
            "job": "nightly",
            "stage": stage,
            "run_date": D1,
            "export_id": None,
            "started_at": start,
            "finished_at": start + dt.timedelta(seconds=5),
            "status": "succeeded",
            "error": None,
            "rows_in": {"stats-internal": 4},
            "rows_accepted": {"stats-internal": 3},
            "rows_quarantined": {"stats-internal": 1},
            "rows_noted": {"stats-internal": 2},
            "rows_out": None,
            "table_versions": {"ledgers": 2, "cursors": 3},
            "pulsar_version": "4.1.3",
            "code_version": "test",
        }
        for stage in stages
    ]


#: The tables before the child runs: rows, partitioning (``wa_new`` does not exist yet).
INITIAL: dict[str, tuple[list[Row], tuple[str, ...]]] = {
    "t_over": (_daily(D1, "c1", range(2), 0), ()),
    "t_repl": (_daily(D1, "c1", range(2), 10) + _daily(D2, "c1", range(2), 20), ("export_date",)),
    "t_app": (_daily(D1, "c1", range(2), 30), ()),
    "wa_repl": (_daily(D1, "c2", range(2), 40) + _daily(D2, "c2", range(2), 50), ("export_date",)),
    "wa_over": (_daily(D1, "c2", range(1), 60), ("cluster",)),
    "run_log": (_run_log("run-0", ("ingest",)), ()),
}
WRITE_ALL = ("wa_new", "wa_repl", "wa_over")
#: The child's writes, in order: table -> (mode, new rows). ``write_all`` tables are one call.
WRITES: dict[str, tuple[str, list[Row]]] = {
    "t_over": ("overwrite", _daily(D1, "c1", range(5), 100)),
    "t_repl": ("replace_partitions", _daily(D2, "c1", range(5), 200)),
    "t_app": ("append", _daily(D2, "c1", range(4), 300)),
    "wa_new": ("overwrite", _daily(D1, "c3", range(4), 400)),
    "wa_repl": ("replace_partitions", _daily(D2, "c2", range(4), 500)),
    "wa_over": ("overwrite", _daily(D2, "c3", range(4), 600)),
    "run_log": ("append", _run_log("run-1", ("backlog", "quota"))),
}
ORDER = tuple(WRITES)


def _schema(table: str) -> T.StructType:
    if table == "run_log":
        from pulsar_model.tables.contracts import spark_schema

        return spark_schema("run_log")
    return DAILY


def _frame(spark: SparkSession, table: str, rows: list[Row]) -> DataFrame:
    schema = _schema(table)
    slices = 1 if table == "run_log" else 3  # several part files per staging job, no shuffle
    data = spark.sparkContext.parallelize([tuple(r[c] for c in schema.names) for r in rows], slices)
    return spark.createDataFrame(data, schema)


def _apply(table: str, rows: list[Row] | None) -> list[Row]:
    """The table's rows after the child's write of it, from its rows before (None: no table)."""
    mode, new = WRITES[table]
    if mode == "overwrite":
        return list(new)
    if mode == "append":
        return [*(rows or []), *new]
    return [r for r in rows or [] if r["export_date"] != D2] + list(new)


#: The writes as calls: one table each, and the ``write_all`` of three.
STEPS: tuple[tuple[str, ...], ...] = (("t_over",), ("t_repl",), ("t_app",), WRITE_ALL, ("run_log",))


def _step_of(table: str) -> tuple[str, ...]:
    return next(step for step in STEPS if table in step)


def run_step(spark: SparkSession, warehouse: str, step: tuple[str, ...]) -> None:
    """One write call of the sequence (what the child runs and the test reruns)."""
    tables = DeltaTables(spark, warehouse, backend="bridge")
    d2 = {"export_date": D2}
    frames = {t: _frame(spark, t, WRITES[t][1]) for t in step}
    if step == ("t_over",):
        tables.overwrite("t_over", frames["t_over"])
    elif step == ("t_repl",):
        tables.replace_partitions("t_repl", frames["t_repl"], d2)
    elif step == ("t_app",):
        tables.append("t_app", frames["t_app"])
    elif step == WRITE_ALL:
        tables.write_all(
            [
                TableWrite("wa_new", frames["wa_new"], "overwrite", None, ("cluster",)),
                TableWrite("wa_repl", frames["wa_repl"], "replace_partitions", d2),
                TableWrite("wa_over", frames["wa_over"], "overwrite"),
            ]
        )
    else:
        from pulsar_model.ingest.pipeline import append_run_log  # the nightly's own run_log write

        append_run_log(spark, tables, WRITES["run_log"][1])


# ----------------------------------------------------------------------------------------------------
# Expected states
# ----------------------------------------------------------------------------------------------------


def _after_crash(killed: str, phase: str) -> tuple[dict[str, list[Row] | None], dict[str, list[Row] | None]]:
    """Rows per table right after the crash and after cleanup (None: the table does not exist)."""
    before: dict[str, list[Row] | None] = {t: list(INITIAL[t][0]) if t in INITIAL else None for t in ORDER}
    crashed = dict(before)
    step = _step_of(killed)
    if phase in ("moved", "committed"):  # write_all stages every table first, then commits one by one
        for table in step[: step.index(killed)]:
            crashed[table] = _apply(table, before[table])
    if phase == "committed":
        crashed[killed] = _apply(killed, before[killed])
    cleaned = dict(crashed)
    if crashed[step[-1]] == before[step[-1]]:  # a write_all that did not commit all its tables: undone
        for table in step:
            cleaned[table] = before[table]
    return crashed, cleaned


# ----------------------------------------------------------------------------------------------------
# Reading tables both ways
# ----------------------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, _plain(v)) for k, v in value.items()))
    if isinstance(value, list) and all(isinstance(v, tuple) and len(v) == 2 for v in value):
        return tuple(sorted((k, _plain(v)) for k, v in value))  # an Arrow map
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    return value


def _canon(rows: list[Row]) -> list[tuple[Any, ...]]:
    return sorted((tuple(sorted((k, _plain(v)) for k, v in r.items())) for r in rows), key=repr)


def _spark_rows(tables: DeltaTables, names: list[str]) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's rows as Spark reads them, in one job per schema (the daily tables are one union)."""
    daily = [n for n in names if n != "run_log"]
    found: dict[str, list[Row]] = {n: [] for n in names}
    if daily:
        union = tables.read(daily[0]).withColumn("_table", F.lit(daily[0]))
        for name in daily[1:]:
            union = union.unionByName(tables.read(name).withColumn("_table", F.lit(name)))
        for row in union.collect():
            record = row.asDict()
            found[record.pop("_table")].append(record)
    if "run_log" in names:
        found["run_log"] = [r.asDict() for r in tables.read("run_log").collect()]
    return {n: _canon(rows) for n, rows in found.items()}


def _delta_rs_rows(path: str) -> list[tuple[Any, ...]]:
    fs = pafs.SubTreeFileSystem(path, pafs.LocalFileSystem())
    return _canon(DeltaTable(path).to_pyarrow_table(filesystem=fs).to_pylist())


def _check_tables(
    spark: SparkSession, warehouse: Path, expected: dict[str, list[Row] | None], when: str
) -> None:
    tables = DeltaTables(spark, str(warehouse), backend="bridge")
    present = [t for t, rows in expected.items() if rows is not None]
    for table in expected:
        assert tables.exists(table) == (table in present), f"{when}: {table} exists?"
    spark_rows = _spark_rows(tables, present)
    for table in present:
        rows = expected[table] or []
        want = _canon(rows)
        assert spark_rows[table] == want, f"{when}: {table} as Spark reads it"
        assert _delta_rs_rows(tables.location(table)) == want, f"{when}: {table} as delta-rs reads it"
        assert tables.count_rows(table) == len(rows), f"{when}: {table} row count from the log"


def _referenced_ever(root: Path) -> set[str]:
    """Every data file any version of the table's log adds (relative, decoded)."""
    paths: set[str] = set()
    for commit in sorted((root / "_delta_log").glob("*.json")):
        for line in commit.read_text(encoding="utf-8").splitlines():
            add = json.loads(line).get("add") if line.strip() else None
            if add:
                paths.add(urllib.parse.unquote(add["path"]))
    return paths


def _unreferenced_files(warehouse: Path) -> list[str]:
    found = []
    for root in sorted(p for p in warehouse.iterdir() if p.is_dir()):
        known = _referenced_ever(root) if (root / "_delta_log").is_dir() else set()
        for path in root.rglob("*.parquet"):
            rel = path.relative_to(root).as_posix()
            if not rel.startswith((STAGING_DIR + "/", "_delta_log/")) and rel not in known:
                found.append(f"{root.name}/{rel}")
    return sorted(found)


def _staging(warehouse: Path) -> list[str]:
    return sorted(p.parent.parent.name for p in warehouse.glob(f"*/{STAGING_DIR}/*") if p.is_dir())


# ----------------------------------------------------------------------------------------------------
# The cases
# ----------------------------------------------------------------------------------------------------

CASES = [
    *((table, phase) for table in ("t_over", "t_repl", "t_app", "run_log") for phase in FAULT_PHASES),
    ("wa_repl", "staging"),  # the second table's Spark job: nothing committed
    ("wa_over", "staged"),  # every table staged, none committed
    ("wa_repl", "moved"),  # the created table committed, the second one's files moved
    ("wa_new", "committed"),  # the created table committed, the others not
    ("wa_repl", "committed"),  # two of three committed
    ("wa_over", "committed"),  # all committed, killed before the staging folders go
]


@pytest.fixture(scope="module")
def template(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The warehouse before the child runs (copied per case)."""
    warehouse = tmp_path_factory.mktemp("crash-template") / "wh"
    tables = DeltaTables(spark, str(warehouse), backend="bridge")
    for table, (rows, partition_by) in INITIAL.items():
        tables.overwrite(table, _frame(spark, table, rows), partition_by=partition_by)
    return warehouse


def _live_members(pgid: int) -> list[int]:
    """Processes of group ``pgid`` that are not zombies (a killed JVM may wait a while to be reaped)."""
    live = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path("/proc", entry, "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # state, ppid, pgrp, ...
        if int(fields[2]) == pgid and fields[0] != "Z":
            live.append(int(entry))
    return live


def _gone(pgid: int, timeout: float = 60) -> None:
    """SIGKILL what is left of the child's process group (its JVM) and wait until it is gone."""
    deadline = time.monotonic() + timeout
    while _live_members(pgid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        assert time.monotonic() < deadline, "the killed child's JVM did not go away"
        time.sleep(0.05)


def _run_child(warehouse: Path, step: int, fault: str | None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TZ": "UTC"}
    env.pop(FAULT_ENV, None)
    if fault is not None:
        env[FAULT_ENV] = fault
    proc = subprocess.Popen(
        [sys.executable, __file__, str(warehouse), str(step)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=600)
    finally:
        _gone(proc.pid)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.parametrize(("killed", "phase"), CASES, ids=[f"{t}-{p}" for t, p in CASES])
def test_kill_at_write_phase(
    spark: SparkSession,
    template: Path,
    tmp_path: Path,
    killed: str,
    phase: str,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    warehouse = tmp_path / "wh"
    shutil.copytree(template, warehouse)
    before_versions = {t: DeltaTable(str(warehouse / t)).version() for t in INITIAL}

    step = _step_of(killed)
    child = _run_child(warehouse, STEPS.index(step), f"{killed}:{phase}")
    assert child.returncode == -signal.SIGKILL, child.stdout[-2000:] + child.stderr[-4000:]
    assert f"{FAULT_ENV}: SIGKILL at {killed}:{phase}:1" in child.stderr

    crashed, cleaned = _after_crash(killed, phase)
    _check_tables(spark, warehouse, crashed, f"after a kill at {killed}:{phase}")
    untouched = [t for t in INITIAL if crashed[t] == INITIAL[t][0]]
    for table in untouched:
        assert DeltaTable(str(warehouse / table)).version() == before_versions[table], table
    if killed not in WRITE_ALL and phase != "committed":
        assert DeltaTable(str(warehouse / killed)).version() == before_versions[killed]
    staged = _staging(warehouse)
    assert killed in staged, "the kill left the write's staging folder behind"
    leftovers = _unreferenced_files(warehouse)
    assert bool(leftovers) == (phase == "moved"), leftovers  # moved, not committed: in the root, unlogged

    # cleanup: the real command (in this process: it reuses the session)
    from pulsar_model.pipeline.cli import main

    capsys.readouterr()
    caplog.clear()
    code = main(["cleanup", "--older-than", "0", "--set", f"storage.warehouse={warehouse}"])
    printed = capsys.readouterr().out
    assert code == 0
    removed = [line.strip() for line in printed.splitlines()[1:]]
    assert sorted(Path(p).parent.parent.name for p in removed) == staged
    assert printed.startswith(f"removed {len(removed)} staging folder(s)")
    assert _staging(warehouse) == [] and _unreferenced_files(warehouse) == []
    _check_tables(spark, warehouse, cleaned, f"after cleanup of a kill at {killed}:{phase}")
    rolled_back = sorted(t for t in WRITE_ALL if crashed[t] != cleaned[t])
    reported = " ".join(r.getMessage() for r in caplog.records)
    for table in rolled_back:
        assert f"table {table}: " in reported and ("rolled back" in reported or "removed" in reported)

    # the next run of the write succeeds and gives the right rows
    run_step(spark, str(warehouse), step)
    after = {t: _apply(t, cleaned[t]) if t in step else cleaned[t] for t in ORDER}
    _check_tables(spark, warehouse, after, "after the rerun")
    assert _staging(warehouse) == [] and _unreferenced_files(warehouse) == []


def test_fault_spec_is_validated_and_free_when_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    from pulsar_model.errors import ConfigError
    from pulsar_model.tables.delta_io._faults import fault_point, parse_fault

    assert parse_fault("ledgers:moved") == ("ledgers", "moved", 1)
    assert parse_fault("run_log:committed:3") == ("run_log", "committed", 3)
    for bad in ("ledgers", "ledgers:commit", ":moved", "ledgers:moved:0", "a:moved:x", "a:b:c:d"):
        with pytest.raises(ConfigError, match=FAULT_ENV):
            parse_fault(bad)
    monkeypatch.delenv(FAULT_ENV, raising=False)
    fault_point("ledgers", "moved")  # unset: returns
    monkeypatch.setenv(FAULT_ENV, "other:moved")
    fault_point("ledgers", "moved")  # another table: returns
    monkeypatch.setenv(FAULT_ENV, "ledgers:bogus")
    with pytest.raises(ConfigError):
        fault_point("ledgers", "moved")


def test_cleanup_without_a_spark_session(tmp_path: Path) -> None:
    from pulsar_model.tables.delta_io import cleanup_staging

    orphan = tmp_path / "wh" / "t" / STAGING_DIR / "20200101T000000-dead00000000" / "x=1"
    orphan.mkdir(parents=True)
    (orphan / "part-00000.parquet").write_bytes(b"killed")
    assert cleanup_staging(str(tmp_path / "wh")) == [str(orphan.parent)]
    assert not (tmp_path / "wh" / "t" / STAGING_DIR).exists()


def _child(warehouse: str, step: int) -> None:
    from pulsar_model.pipeline.session import build_session

    spark = build_session(
        "crash-point-child",
        master="local[1]",
        conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "1"},
        fast_start=True,
    )
    spark.sparkContext.setLogLevel("ERROR")
    run_step(spark, warehouse, STEPS[step])
    print("child finished without being killed")


if __name__ == "__main__":
    _child(sys.argv[1], int(sys.argv[2]))


# ----------------------------------------------------------------------------------------------------
# Nightly level: a real `nightly` killed inside a stage's multi-table write
# ----------------------------------------------------------------------------------------------------

#: stage -> the table whose files the fault catches moved into the table, not committed (the last output
#: table of the stage's write_all: the tables before it are committed then, a mixed state until cleanup).
NIGHTLY_KILLS = {"ingest": "quarantine", "backlog": "unmoved_cursors", "quota": "quota_producer_outcomes"}


def _nightly(
    export: Path, warehouse: Path, stages: str, fault: str | None = None
) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable,
        "-m",
        "pulsar_model.pipeline.cli",
        "nightly",
        "--export-dir",
        str(export),
        "--stages",
        stages,
        "--set",
        f"storage.warehouse={warehouse}",
        "--set",
        "storage.delta_backend=bridge",
        "--set",
        "spark.conf={spark.sql.shuffle.partitions: '2', spark.ui.enabled: 'false'}",
    ]
    env = {**os.environ, "TZ": "UTC"}
    env.pop(FAULT_ENV, None)
    if fault:
        env[FAULT_ENV] = fault
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=1500)
    finally:
        _gone(proc.pid)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _all_rows(warehouse: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Sorted rows of every Delta table but run_log (delta-rs, explicit filesystem), without ``run_id``
    (which run wrote a row - quarantine, ingest_notes - differs between a run and its rerun by design)."""
    return {
        p.name: sorted(
            (tuple(kv for kv in row if kv[0] != "run_id") for row in _delta_rs_rows(str(p))), key=repr
        )
        for p in sorted(warehouse.iterdir())
        if (p / "_delta_log").is_dir() and p.name != "run_log"
    }


@pytest.mark.long
def test_nightly_killed_inside_each_stage_write_then_cleanup_and_rerun(tmp_path: Path) -> None:
    from pulsar_model.demo import generate_demo
    from tests.test_nightly_crash import TINY  # the one-cluster demo of the nightly crash test

    export, warehouse = tmp_path / "export", tmp_path / "wh"
    generate_demo(export, TINY, overwrite=True)
    stages = ",".join(NIGHTLY_KILLS)
    first = _nightly(export, warehouse, stages)
    assert first.returncode == 0, first.stderr[-3000:]
    baseline = _all_rows(warehouse)
    assert all(baseline[t] for t in ("ledgers", "cursor_backlog", "quota_status")), "the demo produced rows"
    for stage, table in NIGHTLY_KILLS.items():
        killed = _nightly(export, warehouse, stage, f"{table}:moved")
        assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
        assert f"{FAULT_ENV}: SIGKILL at {table}:moved:1" in killed.stderr
        assert _staging(warehouse), f"{stage}: the kill left staging folders"
        cleanup = subprocess.run(
            [
                sys.executable,
                "-m",
                "pulsar_model.pipeline.cli",
                "cleanup",
                "--older-than",
                "0",
                "--set",
                f"storage.warehouse={warehouse}",
            ],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert cleanup.returncode == 0, cleanup.stderr[-3000:]
        assert "staging folder(s)" in cleanup.stdout
        assert _staging(warehouse) == [] and _unreferenced_files(warehouse) == []
        assert _all_rows(warehouse) == baseline, f"{stage}: after cleanup every table reads as before the run"
    rerun = _nightly(export, warehouse, stages)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert _all_rows(warehouse) == baseline, "the next run succeeds and gives identical rows"
