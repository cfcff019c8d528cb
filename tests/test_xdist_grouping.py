"""``make test`` runs each test file whole on one pytest-xdist worker (``tests/conftest.py``).

The stage tests build whole demo pipelines in module fixtures; a file split over two workers builds them
twice. This runs two small files the way ``make test`` does and reads which worker ran each test.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import SLOW_GROUPS, xdist_work_unit

ROOT = Path(__file__).resolve().parents[1]


def test_a_file_is_one_work_unit_and_the_cluster_files_share_one() -> None:
    assert xdist_work_unit("tests/test_quota_stage.py::test_a[3.0.5]") == "test_quota_stage.py"
    assert xdist_work_unit("tests/test_cluster_runtime.py::test_x") == "cluster-nightly"
    assert xdist_work_unit("tests/test_notebooks.py::test_y") == "cluster-nightly"
    # a renamed file left in SLOW_GROUPS would silently lose its place at the front
    stale = [g for g in SLOW_GROUPS if g != "cluster-nightly" and not (ROOT / "tests" / g).is_file()]
    assert not stale, stale


def test_make_test_runs_each_file_on_one_worker() -> None:
    files = ["tests/test_versions_boundaries_unit.py", "tests/test_config.py"]
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-n",
            "2",
            "--dist",
            "loadgroup",
            "-v",
            "-p",
            "no:cacheprovider",
            *files,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    workers: dict[str, set[str]] = {}
    for worker, file in re.findall(r"\[(gw\d+)\].* PASSED (tests/[\w]+\.py)::", run.stdout):
        workers.setdefault(file, set()).add(worker)
    assert set(workers) == set(files), run.stdout[-3000:]
    assert all(len(w) == 1 for w in workers.values()), workers
