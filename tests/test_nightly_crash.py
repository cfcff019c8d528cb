"""A nightly run killed (SIGKILL) in the middle of a stage's table writes leaves every table readable at its
previous version; ``cleanup`` removes the orphaned staging files; the next run succeeds and a rerun of the
date gives identical outputs (issue 8; DESIGN.md "Idempotent nightly runs"). Two runs started together:
one wins, the other fails at once naming the holder of the warehouse lock (issue 9 point 3).

Each run is a real ``pulsar-analytics nightly`` process (its own JVM), so the kill is a real crash: no
``finally`` block, no rollback code gets to run. The tables are read with ``deltalake`` (no Spark here).
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.fs as pafs
import pytest
from deltalake import DeltaTable

from pulsar_model.demo import DemoSpec, generate_demo
from pulsar_model.pipeline.stages.backlog import OUTPUT_TABLES as BACKLOG_TABLES
from pulsar_model.tables.delta_io._bridge import STAGING_DIR
from tests.spark_conf import FAST_CONF

pytestmark = pytest.mark.slow

TINY = dataclasses.replace(
    DemoSpec(),
    clusters=("us-east",),
    pulsar_versions={"us-east": "4.1.3"},
    namespaces=("acme/orders",),
    topics_per_namespace=2,
    replicated_namespace=None,
    replicated_topics=0,
    partitions=2,
    messages_per_topic=(20, 40),
)
#: The stage whose writes the crash interrupts, and one of the tables it writes.
KILLED_STAGE = "backlog"
WATCHED_TABLE = "cursor_backlog"
#: The child nightlies' Spark settings: the crash and the lock are under test, not Spark's planning.
CHILD_CONF = {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false", **FAST_CONF}


def _command(export: Path, warehouse: Path, stages: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pulsar_model.pipeline.cli",
        "nightly",
        "--export-dir",
        str(export),
        "--stages",
        stages,
        *_settings(warehouse),
        "--set",
        "spark.conf={" + ", ".join(f"{k}: '{v}'" for k, v in CHILD_CONF.items()) + "}",
    ]


def _settings(warehouse: Path) -> list[str]:
    return ["--set", f"storage.warehouse={warehouse}", "--set", "storage.delta_backend=bridge"]


def _run(cmd: list[str]) -> None:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]


def _snapshot(warehouse: Path) -> dict[str, tuple[int, list[str]]]:
    """Version and sorted rows (as text) of every Delta table in the warehouse."""
    tables = {}
    for path in sorted(p for p in warehouse.iterdir() if (p / "_delta_log").is_dir()):
        table = DeltaTable(str(path))
        # An explicit filesystem: without it to_pyarrow_table can abort the interpreter at exit (PLATFORM.md).
        arrow = table.to_pyarrow_table(filesystem=pafs.SubTreeFileSystem(str(path), pafs.LocalFileSystem()))
        rows = sorted(repr(sorted(r.items())) for r in arrow.to_pylist())
        tables[path.name] = (table.version(), rows)
    return tables


def _staging(warehouse: Path) -> list[Path]:
    return sorted(p for p in warehouse.glob(f"*/{STAGING_DIR}/*") if p.is_dir())


def test_crash_leaves_previous_versions_cleanup_then_concurrent_reruns(tmp_path):
    export, warehouse = tmp_path / "export", tmp_path / "wh"
    generate_demo(export, TINY, overwrite=True)
    _run(_command(export, warehouse, f"ingest,{KILLED_STAGE}"))
    before = _snapshot(warehouse)
    assert before[WATCHED_TABLE][1], "the first run wrote backlog rows"

    # 1. Rerun the stage and SIGKILL the process tree (driver JVM included) while its writer stages files.
    proc = subprocess.Popen(
        _command(export, warehouse, KILLED_STAGE),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 600
        while not list((warehouse / WATCHED_TABLE).glob(f"{STAGING_DIR}/*")):
            assert proc.poll() is None, "the run ended before its writes could be interrupted"
            assert time.monotonic() < deadline, "no staging folder appeared within 10 minutes"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    assert _snapshot(warehouse) == before, "a killed run must leave every table at its previous version"
    assert _staging(warehouse), "the crash left staging files behind (what cleanup is for)"

    # 2. cleanup removes them (the dead run's lock is stale: its process is gone, the next run takes it).
    cleanup = subprocess.run(
        [
            sys.executable,
            "-m",
            "pulsar_model.pipeline.cli",
            "cleanup",
            "--older-than",
            "0",
            *_settings(warehouse),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert cleanup.returncode == 0, cleanup.stderr[-3000:]
    assert _staging(warehouse) == []

    # 3. Two reruns at once: one wins and gives identical rows, the other fails at once naming the holder.
    cmd = _command(export, warehouse, KILLED_STAGE)
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    procs = [subprocess.Popen(cmd, **pipes) for _ in range(2)]  # type: ignore[call-overload]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=900)
        results.append((p.returncode, out[-2000:] + err[-3000:]))
    assert sorted(code for code, _ in results) == [0, 1], results  # a held lock: failure (1)
    loser = next(text for code, text in results if code == 1)
    assert "is locked by run nightly-" in loser and "cleanup --break-lock" in loser
    after = _snapshot(warehouse)
    for name, (version, rows) in before.items():
        if name == "run_log":  # only the winner logged (the killed run never got to)
            assert after[name][0] == version + 1 and len(after[name][1]) == len(rows) + 1
            continue
        rewritten = name in BACKLOG_TABLES  # the winner replaced the date's partition: one more version
        expected = (version + 1 if rewritten else version, rows)
        assert after[name] == expected, f"{name}: a rerun of the date must give identical rows"
    assert not (warehouse / "_pulsar_run.lock").exists()
