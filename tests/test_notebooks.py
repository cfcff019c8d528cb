"""The Databricks notebooks of ``notebooks/`` run locally, in order, in one namespace (issue 8, runtimes).

Cells are split at ``# COMMAND ----------``; magic cells (``%md``, ``%pip``, ``%run``) are what Databricks
interprets and are skipped here (``%run ./00_setup`` is replaced by running 00_setup first in the shared
namespace); ``%sql`` cells run through ``spark.sql`` on the tables 00_setup registered (temporary views in
a local session) and must collect without error. The session fixture's ``spark`` and a recording
``display`` are injected. In CI the notebooks read the warehouse that the session's ``spark-submit`` of the
nightly job wrote on the standalone cluster (``generate_demo`` false, as in a workspace next to the nightly
job); the long variant lets 00_setup generate the tiny demo and run the nightly pipeline itself
(``generate_demo`` true).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from tests.spark_conf import FAST_CONF, session_conf
from tests.standalone_cluster import TINY  # the demo the session's cluster run ingests

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
HEADER = "# Databricks notebook source"
SEPARATOR = re.compile(r"^# COMMAND -{10}\s*$", re.MULTILINE)
MAGIC = re.compile(r"^# MAGIC ?")
KNOWN_MAGICS = ("%md", "%pip", "%run", "%sql")
#: Session settings while the notebooks run (restored afterwards; the session is shared with other tests).
#: Tiny data and very wide plans: interpreted, without adaptive re-planning (tests/spark_conf.py). Shuffle
#: partitions stay at the fixture's 2.
NOTEBOOK_CONF = FAST_CONF
#: Result variables every notebook must leave non-empty on the demo (notebook -> names).
KEY_RESULTS: dict[str, tuple[str, ...]] = {
    "00_setup": ("run_log",),
    "01_backlog_and_plans": (
        "backlog_estimate_vs_exact",
        "backlog_by_cluster",
        "estimated_now",
        "pinned_topics",
        "skip_plans",
    ),
    "02_quotas": ("quota_near_limit", "quota_overview", "effective_now", "producer_outcomes"),
    "03_replication": ("replication_status", "failover_duplicates", "findings_by_kind"),
    "04_compaction": ("compaction_savings", "savings_by_cluster", "compaction_triggers"),
    "05_failover_transactions_schemas": (
        "failover_balance",
        "transaction_state_counts",
        "transaction_holdback",
        "schema_verdicts",
    ),
}


@dataclasses.dataclass(frozen=True)
class Cell:
    """One notebook cell: ``magic`` is ``%md``/``%pip``/``%run`` (then ``source`` is its text) or None."""

    number: int
    magic: str | None
    source: str


def parse_notebook(path: Path) -> list[Cell]:
    """Split a Databricks-source notebook into cells; a cell of ``# MAGIC`` lines only is a magic cell."""
    text = path.read_text(encoding="utf-8")
    first, _, rest = text.partition("\n")
    if first.strip() != HEADER:
        raise ValueError(f"{path.name}: first line must be {HEADER!r}, got {first!r}")
    cells = []
    for number, chunk in enumerate(SEPARATOR.split(rest), start=1):
        lines = [line for line in chunk.strip("\n").splitlines() if line.strip()]
        if not lines:
            raise ValueError(f"{path.name}: cell {number} is empty")
        magic_lines = [MAGIC.sub("", line, count=1) for line in lines if MAGIC.match(line)]
        if magic_lines and len(magic_lines) != len(lines):
            raise ValueError(f"{path.name}: cell {number} mixes # MAGIC lines with Python code")
        if magic_lines:
            command = magic_lines[0].split(maxsplit=1)[0]
            cells.append(Cell(number, command, "\n".join(magic_lines)))
        else:
            cells.append(Cell(number, None, chunk))
    return cells


def notebook_paths() -> list[Path]:
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py"))


def test_notebooks_are_databricks_source_with_markdown_and_setup():
    names = [p.stem for p in notebook_paths()]
    assert names == sorted(KEY_RESULTS), names
    for path in notebook_paths():
        cells = parse_notebook(path)
        assert cells[0].magic == "%md" and cells[0].source.startswith("%md\n# "), path.name
        assert all(c.magic in (None, *KNOWN_MAGICS) for c in cells), [c.magic for c in cells]
        runs = [c.source for c in cells if c.magic == "%run"]
        assert runs == ([] if path.stem == "00_setup" else ["%run ./00_setup"]), (path.name, runs)
        assert any(c.magic is None for c in cells), path.name
        if path.stem != "00_setup":  # every area answers its common questions in SQL too
            assert any(c.magic == "%sql" for c in cells), path.name


def test_parse_notebook_rejects_mixed_cells(tmp_path):
    bad = tmp_path / "01_bad.py"
    bad.write_text(f"{HEADER}\n# MAGIC %md\n# MAGIC # t\nx = 1\n")
    with pytest.raises(ValueError, match="cell 1 mixes"):
        parse_notebook(bad)


def _notebook_conf(spark: SparkSession) -> AbstractContextManager[None]:
    """``NOTEBOOK_CONF`` while the notebooks run and their lazy results are checked, then the old values."""
    # 00_setup sets spark.sql.unionOutputPartitioning (a Spark 4.1 bug workaround): restored as well.
    return session_conf(spark, NOTEBOOK_CONF, also_restore=("spark.sql.unionOutputPartitioning",))


@pytest.fixture(scope="module")
def notebook_namespace(
    spark, cluster_nightly, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """Every notebook's Python cells in order in one namespace, on the warehouse the session's
    ``spark-submit`` of the nightly job wrote on the standalone cluster (``generate_demo`` false): the
    notebooks read what the cluster job wrote, as in a Databricks workspace next to the nightly job.
    """
    with _notebook_conf(spark):
        scratch = tmp_path_factory.mktemp("notebooks")
        yield _run_notebooks(
            spark, {"WAREHOUSE": str(cluster_nightly.warehouse), "GENERATE_DEMO": "false"}, scratch
        )


@pytest.fixture(scope="module")
def notebook_namespace_with_demo(spark, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The notebooks with ``generate_demo`` true: 00_setup writes the demo export and runs the nightly job
    in the notebook's own session (one demo, one nightly run), then every area notebook reads its tables.
    """
    with _notebook_conf(spark):
        scratch = tmp_path_factory.mktemp("notebooks-demo")
        settings = {"WAREHOUSE": str(scratch / "warehouse"), "GENERATE_DEMO": "true", "DEMO_SPEC": TINY}
        yield _run_notebooks(spark, settings, scratch)


def _run_notebooks(spark: SparkSession, settings: dict[str, Any], scratch: Path) -> dict[str, Any]:
    displayed: list[DataFrame] = []
    namespace: dict[str, Any] = {
        "__name__": "__notebook__",
        "spark": spark,
        "display": displayed.append,
        "EXPORT_DIR": str(scratch / "export"),
        "_displayed": displayed,
        "_sql": {},
        **settings,
    }
    for path in notebook_paths():
        for cell in parse_notebook(path):
            if cell.magic is None:
                code = compile(cell.source, f"{path.name}#cell{cell.number}", "exec")
                exec(code, namespace)
            elif cell.magic == "%sql":
                namespace["_sql"][f"{path.name}#cell{cell.number}"] = spark.sql(
                    cell.source.removeprefix("%sql")
                )
    return namespace


@pytest.mark.slow
@pytest.mark.runtime
@pytest.mark.timeout(3300)  # covers the session's cluster run when this module runs first
def test_notebooks_on_the_cluster_jobs_warehouse(notebook_namespace):
    _check_results(notebook_namespace)


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.timeout(3300)  # covers the fixture (the nightly); 1200 s failed at load ~18 (shared box)
def test_notebooks_generate_the_demo_and_run_the_nightly(notebook_namespace_with_demo):
    _check_results(notebook_namespace_with_demo)


def _check_results(ns: dict[str, Any]) -> None:
    assert ns["spark"] is not None and ns["WAREHOUSE"].endswith("warehouse")
    empty = []
    for notebook, names in KEY_RESULTS.items():
        for name in names:
            value = ns.get(name)
            assert isinstance(value, DataFrame), f"{notebook}: {name} is {type(value).__name__}"
            try:
                if not value.take(1):
                    empty.append(f"{notebook}.{name}: empty")
            except Exception as exc:  # name the failing result, then keep checking the others
                empty.append(f"{notebook}.{name}: {type(exc).__name__}: {str(exc)[:300]}")
    assert not empty, f"results that are empty or fail on the demo: {empty}"
    failed = []
    for cell, frame in ns["_sql"].items():
        try:
            frame.collect()
        except Exception as exc:
            failed.append(f"{cell}: {type(exc).__name__}: {str(exc)[:300]}")
    assert len(ns["_sql"]) >= 6 and not failed, failed
    statuses = {(r.stage, r.status) for r in ns["run_log"].select("stage", "status").collect()}
    from pulsar_model.pipeline.nightly import STAGES

    assert statuses == {(stage, "succeeded") for stage in STAGES}
    assert len(ns["_displayed"]) >= 25, "every notebook shows its analyses"
