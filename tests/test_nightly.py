"""The nightly job skeleton: stage registry, progress, run_log rows on success and on failure, CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pulsar_model.errors import ConfigError, ExportLayoutError, NoDataError
from pulsar_model.pipeline.cli import STAGE_COMMANDS, build_parser, main
from pulsar_model.pipeline.config import load_config
from pulsar_model.pipeline.nightly import STAGES, run_nightly
from pulsar_model.tables.delta_io import DeltaTables


def test_cli_help_lists_every_subcommand():
    text = build_parser().format_help()
    for command in ("generate-demo", "ingest", "nightly", "skip-plan", "cleanup", *STAGE_COMMANDS):
        assert command in text
    assert set(STAGE_COMMANDS) <= set(STAGES), "every stage subcommand runs a nightly stage"


def test_cli_bad_config_key_exits_2_with_message(capsys):
    assert main(["ingest", "--export-dir", "x", "--set", "storage.warehous=y"]) == 2
    assert "storage.warehous" in capsys.readouterr().err


def test_run_nightly_rejects_unknown_stage(spark, tmp_path):
    config = load_config(None, [f"storage.warehouse={tmp_path}"])
    with pytest.raises(ConfigError, match="available stages: ingest"):
        run_nightly(spark, config, export_dir=None, stages=["ingets"])


def test_run_nightly_failed_stage_is_logged_and_raised(spark, tmp_path):
    config = load_config(None, [f"storage.warehouse={tmp_path / 'wh'}"])
    lines: list[str] = []
    with pytest.raises(ExportLayoutError):
        run_nightly(spark, config, export_dir=str(tmp_path / "missing"), run_id="r-fail", echo=lines.append)
    assert lines[0] == f"[1/{len(STAGES)}] ingest ..." and "FAILED" in lines[-1]
    tables = DeltaTables(spark, str(tmp_path / "wh"))
    rows = tables.read("run_log").collect()
    assert [(r.run_id, r.stage, r.status) for r in rows] == [("r-fail", "ingest", "failed")]
    assert "does not exist" in rows[0].error
    assert not tables.exists("ledgers")


def test_jobs_entry_points_show_help():
    special = {"ingest": "--export-dir", "nightly": "--requests", "skip_plan": "--requests"}
    jobs = sorted(Path("jobs").glob("*.py"))
    assert {j.stem for j in jobs} >= {"ingest", "nightly", "skip_plan", *STAGE_COMMANDS}
    for path in jobs:
        job, option = str(path), special.get(path.stem, "--export-date")
        out = subprocess.run([sys.executable, job, "--help"], capture_output=True, text=True, check=False)
        assert out.returncode == 0 and option in out.stdout, (job, out.stderr)


def test_stage_without_run_date_or_tables_names_the_fix(spark, tmp_path):
    config = load_config(None, [f"storage.warehouse={tmp_path / 'empty'}"])
    with pytest.raises(NoDataError, match=r"backlog stage needs ingested data .* ingest an export first"):
        run_nightly(spark, config, export_dir=None, stages=["backlog"], echo=lambda _: None)
