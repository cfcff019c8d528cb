"""The warehouse run lock: one nightly run per warehouse at a time (issue 9 point 3)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from pulsar_model.pipeline.config import load_config
from pulsar_model.pipeline.nightly import run_nightly
from pulsar_model.tables.run_lock import LOCK_FILE, RunLockedError, break_lock, read_lock, warehouse_run_lock

#: What the stages store is under test, not how Spark runs it (tests/spark_conf.py).
pytestmark = pytest.mark.usefixtures("fast_spark_conf")


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_second_holder_fails_with_the_holder_and_the_fix(tmp_path):
    with warehouse_run_lock(str(tmp_path), "run-a") as path:
        assert path == tmp_path / LOCK_FILE
        assert read_lock(path)["run_id"] == "run-a"  # type: ignore[index]
        expected = r"locked by run run-a \(pid \d+ on .*cleanup --break-lock"
        with pytest.raises(RunLockedError, match=expected), warehouse_run_lock(str(tmp_path), "run-b"):
            pass
        assert read_lock(path)["run_id"] == "run-a"  # type: ignore[index]  # the loser left it alone
    assert not (tmp_path / LOCK_FILE).exists()  # released on exit
    with warehouse_run_lock(str(tmp_path), "run-c"):
        pass


def test_lock_released_when_the_run_fails(tmp_path):
    with pytest.raises(ValueError, match="boom"), warehouse_run_lock(str(tmp_path), "run-a"):
        raise ValueError("boom")
    assert not (tmp_path / LOCK_FILE).exists()


def test_stale_lock_of_a_dead_local_process_is_taken_over(tmp_path):
    record = {"run_id": "killed", "pid": _dead_pid(), "host": socket.gethostname(), "started_at": "x"}
    (tmp_path / LOCK_FILE).write_text(json.dumps(record))
    with warehouse_run_lock(str(tmp_path), "next") as path:
        assert read_lock(path)["run_id"] == "next"  # type: ignore[index,arg-type]


def test_lock_of_a_live_process_or_another_host_is_never_broken(tmp_path):
    for record in (
        {"run_id": "live", "pid": os.getpid(), "host": socket.gethostname()},
        {"run_id": "remote", "pid": _dead_pid(), "host": "some-other-host"},
        {},  # unreadable holder
    ):
        (tmp_path / LOCK_FILE).write_text(json.dumps(record) if record else "not json")
        with pytest.raises(RunLockedError), warehouse_run_lock(str(tmp_path), "me"):
            pass
    assert break_lock(str(tmp_path)) == {}
    assert break_lock(str(tmp_path)) is None
    assert not (tmp_path / LOCK_FILE).exists()


def test_object_store_warehouse_runs_without_a_lock(caplog):
    with warehouse_run_lock("s3a://bucket/warehouse", "r") as path:
        assert path is None
    assert "no run lock" in caplog.text


def test_run_nightly_refuses_a_locked_warehouse_and_writes_nothing(spark, tmp_path):
    config = load_config(None, [f"storage.warehouse={tmp_path}"])
    with warehouse_run_lock(str(tmp_path), "other-run"), pytest.raises(RunLockedError, match="other-run"):
        run_nightly(spark, config, export_dir=str(tmp_path / "x"), stages=["ingest"], echo=lambda _: None)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no run_log row, no table


def test_two_runs_racing_for_a_stale_lock_never_both_win(tmp_path):
    """Both find the same stale lock; only the one holding the takeover guard may replace it."""
    stale = {"run_id": "killed", "pid": _dead_pid(), "host": socket.gethostname(), "started_at": "x"}
    (tmp_path / LOCK_FILE).write_text(json.dumps(stale))
    (tmp_path / (LOCK_FILE + ".takeover")).write_text("{}")  # the other run is replacing it right now
    with pytest.raises(RunLockedError, match="killed"), warehouse_run_lock(str(tmp_path), "second"):
        pass
    assert read_lock(tmp_path / LOCK_FILE) == stale
    assert break_lock(str(tmp_path)) == stale
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_cleanup_refuses_while_a_live_run_holds_the_lock(tmp_path, capsys):
    """``cleanup`` would delete a running writer's staging files: it refuses while the holder is alive
    (and starts no JVM either way), and works once the run released the lock."""
    from pulsar_model.pipeline.cli import main

    warehouse = tmp_path / "wh"
    staging = warehouse / "cursor_backlog" / "_pulsar_staging" / "w1"
    staging.mkdir(parents=True)
    with warehouse_run_lock(str(warehouse), "nightly-live"):
        assert main(["cleanup", "--warehouse", str(warehouse)]) == 1  # a live holder: failure, not usage
        err = capsys.readouterr().err
        assert "nightly-live" in err and f"pid {os.getpid()}" in err and "--break-lock" in err
        assert staging.is_dir()
    assert main(["cleanup", "--warehouse", str(warehouse), "--older-than", "0"]) == 0
    assert "removed 1 staging folder(s)" in capsys.readouterr().out and not staging.exists()
