"""Resource limits (issue 9 point 6), scaled down for CI: one topic with 100,000 ledgers and 1,000 cursors
(with ack holes) and one topic with 1,000,000 messages under a single key go through every grouped
(``applyInArrow`` / ``applyInPandas``) function that works per topic or per key, and the set-based steps
next to them, in a child Spark session whose Python workers are capped (``spark.executor.pyspark.memory``,
an address-space limit) and get small Arrow batches (``spark.sql.execution.arrow.maxRecordsPerBatch``):
a function that materialised far more than one group's working set would fail there.

The workload is ``benchmarks/bench_resource_limits.py`` (the full-size run: 1M ledgers x 10k cursors, 10M
messages; numbers in ``benchmarks/results/resource_limits.json``). Every step's answer is checked.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# A benchmark in test form (one child session building 100k ledgers x 1k cursors and 1M messages): minutes
# of CI time, so it runs with `make test-long`. The eviction steps used to be out of reach (a trace repeated
# on every cursor row, a time loop of ~49 million single-ledger steps); they are checked exactly now.
pytestmark = [pytest.mark.slow, pytest.mark.long]

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_resource_limits.py"
LEDGERS, CURSORS, PER_LEDGER, MESSAGES = 100_000, 1_000, 2, 1_000_000
#: Python worker cap of the child session (per worker; RLIMIT_AS, so it includes pyarrow's mappings).
PYSPARK_MEMORY = "1g"
MAX_RECORDS_PER_BATCH = 2_000
#: A step's Spark job is cancelled after this long.
STEP_TIMEOUT = 240
#: Loop steps kept in the eviction trace (the time loop here makes ~49 million: truncated).
TRACE_MAX = 100_000


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("bench_resource_limits", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("resource-limits") / "result.json"
    cmd = [
        sys.executable,
        str(BENCH),
        f"--ledgers={LEDGERS}",
        f"--cursors={CURSORS}",
        f"--entries-per-ledger={PER_LEDGER}",
        f"--messages={MESSAGES}",
        "--partitions=4",
        "--master=local[2]",
        "--driver-memory=2g",
        f"--pyspark-memory={PYSPARK_MEMORY}",
        f"--max-records-per-batch={MAX_RECORDS_PER_BATCH}",
        "--probe-cap-mib=1536",
        f"--step-timeout={STEP_TIMEOUT}",
        f"--trace-max-iterations={TRACE_MAX}",
        f"--out={out}",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False, env={**os.environ})
    assert out.exists(), proc.stdout[-3000:] + proc.stderr[-5000:]
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def _step(run: dict[str, Any], name: str) -> dict[str, Any]:
    step: dict[str, Any] = run["steps"][name]
    assert step["status"] == "ok", f"{name}: {step.get('error')}\n{step.get('traceback_tail')}"
    rows: list[dict[str, Any]] = step["result"]
    assert len(rows) == 1, rows
    return rows[0]


def test_the_child_session_ran_with_the_worker_cap(run: dict[str, Any]) -> None:
    assert run["conf"]["spark.executor.pyspark.memory"] == PYSPARK_MEMORY
    assert run["conf"]["spark.sql.execution.arrow.maxRecordsPerBatch"] == str(MAX_RECORDS_PER_BATCH)
    # the cap is in force: a grouped function allocating 1.5 GiB in its worker fails
    assert run["worker_cap_probe"] == {"allocated_mib": 1536, "failed": True, "error": "PythonException"}, (
        run["worker_cap_probe"]
    )


def test_backlog_steps_on_one_topic_with_100k_ledgers_and_1k_cursors(run: dict[str, Any]) -> None:
    closed = LEDGERS - 1
    estimate = _step(run, "estimated_backlog_size")
    # slowest cursor sub-00000 at (1, 0): everything after its mark-delete entry (docs §2.3 estimate)
    assert estimate["slowest_cursor_name"] == "sub-00000"
    assert 0 < estimate["estimated_backlog_size_bytes"] <= closed * PER_LEDGER * 1000
    pins = _step(run, "pinning_report")
    assert pins["slowest_cursor_name"] == "sub-00000"
    assert pins["pinned_ledgers"] >= 1 and pins["pinned_bytes"] == pins["pinned_ledgers"] * PER_LEDGER * 1000


def cursor_ledgers() -> list[int]:
    """The bench's md ledger of cursor i: ``1 + floor(i * (closed - 3) / cursors)`` (entry 0)."""
    closed = LEDGERS - 1
    return [1 + (i * (closed - 3)) // CURSORS for i in range(CURSORS)]


def test_quota_size_eviction_on_one_topic_with_100k_ledgers_and_1k_cursors(run: dict[str, Any]) -> None:
    size = _step(run, "quota_size_eviction")
    total = (LEDGERS - 1) * PER_LEDGER * 1000
    target = int(0.9 * (total // 10))
    assert size["rows"] == CURSORS  # one row per cursor of the topic
    assert size["iterations"] >= 1 and size["skipped_entries"] > 0
    assert size["stop_reason"] in {"below_target", "zero_skip", "same_cursor"}, size
    assert size["estimate_after"] <= total
    assert size["stop_reason"] != "below_target" or size["estimate_after"] <= target
    # the trace: each recorded step once (on its cursor's row), capped at TRACE_MAX
    assert size["trace_steps"] == size["trace_elements"] == min(size["iterations"], TRACE_MAX), size
    assert size["trace_truncated"] == int(size["iterations"] > TRACE_MAX), size


def test_quota_time_eviction_on_one_topic_with_100k_ledgers_and_1k_cursors(run: dict[str, Any]) -> None:
    """Entry n is published at T0 + n s, ledger L closes 0.5 s after its entry 2L-1, the export is 30 min
    after the last entry and the limit one hour: ledgers L <= closed - 901 expired, F = closed - 900 is the
    first young one. A cursor at (L, 0) with L < F walks (L+1, 0), (L+2, 0) (its acked holes), then
    (L+3, -1) ... (F, -1): F - L mark-deletes consuming 2 (F - L) - 4 entries (1 when F - L = 2, 0 when 1),
    and ends at (F, -1) - or (F, 0) when its second hole is in F; cursors at or after F do not move. ~49
    million steps in the stepwise loop. Which of the cursors on (F, -1) the loop stops on is the root of
    the broker's cursor heap (docs §3.9), which depends on every sift of 1,000 staggered cursors merging:
    beyond the replay budget, so the name is null and the tie is flagged."""
    time_ = _step(run, "quota_time_eviction")
    first_young = (LEDGERS - 1) - 900
    behind = [ledger for ledger in cursor_ledgers() if ledger < first_young]
    steps = sum(first_young - ledger for ledger in behind)
    skipped = sum({1: 0, 2: 1}.get(first_young - ledger, 2 * (first_young - ledger) - 4) for ledger in behind)
    assert (time_["rows"], time_["stop_reason"], time_["stop_cursor_name"], time_["tie_ambiguous"]) == (
        CURSORS,
        "not_expired",
        None,
        1,
    ), time_
    assert (time_["iterations"], time_["skipped_entries"], time_["moved_cursors"]) == (
        steps,
        skipped,
        len(behind),
    ), time_
    tail = [ledger for ledger in behind if first_young - ledger <= 2]
    assert time_["moved_md_min"] == {"ledger_id": first_young, "entry_id": -1}, time_
    assert time_["moved_md_max"] == {"ledger_id": first_young, "entry_id": 0 if tail else -1}, time_
    assert time_["trace_steps"] == time_["trace_elements"] == TRACE_MAX and time_["trace_truncated"] == 1


def test_reset_by_time_searches_a_topic_of_100k_ledgers(run: dict[str, Any]) -> None:
    reset = _step(run, "reset_cursor_by_time")
    ledger, entry = _bench().middle_entry(LEDGERS, PER_LEDGER)
    assert reset["rows"] == 10 and reset["error"] is None, reset
    assert reset["found_min"] == reset["found_max"] == {"ledger_id": ledger, "entry_id": entry}, reset


def test_compaction_of_1m_messages_under_one_key(run: dict[str, Any]) -> None:
    last = MESSAGES - 1
    entry, batch_index = last // 10, last % 10
    kept = _step(run, "compact")
    assert kept == {
        "rows": 1,
        "ledger_id": 1 + entry // 50_000,
        "entry_id": entry % 50_000,
        "batch_index": batch_index,
    }
    summary = _step(run, "compaction_summary")
    assert summary["distinct_keys"] == 1 and summary["payload_bytes_after"] == 20 + last % 100, summary
    horizon = _step(run, "compaction_horizons")
    assert horizon["horizon"]["ledger_id"] == 1 + entry // 50_000, horizon
    assert horizon["horizon"]["entry_id"] == entry % 50_000, horizon
