"""The benchmark harness's target checks and markdown (no Spark: synthetic results)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from benchmarks.run import (
    STAGE_INPUTS,
    TARGETS,
    SparkWork,
    _write_partial,
    checks,
    comparisons,
    from_partial,
    markdown,
    merge,
    problems,
    tree_cpu_seconds,
)
from pulsar_model.pipeline.nightly import STAGES


def _result(tier: str = "l") -> dict:
    return {
        "tier": tier,
        "master": "local[2]",
        "driver_memory": "8g",
        "shuffle_partitions": 64,
        "finished_at": "2026-11-24T10:00:00Z",
        "machine": {
            "cpu_model": "cpu",
            "cpu_count": 2,
            "memory_gib": 23.4,
            "os": "Linux",
            "python": "3.11",
            "java": "openjdk 17",
            "pyspark": "4.1.4",
        },
        "load_average_at_start": [0.1, 0.2, 0.3],
        "session_start_seconds": 4.2,
        "first_query_warmup_seconds": 2.0,
        "generate": {"seconds": 100.0},
        "pipeline_seconds": 1500.0,
        "wall_seconds": 1700.0,
        "peak_rss_gib": 9.5,
        "stages": {
            "backlog": {
                "seconds": 30.0,
                "cpu_seconds": 41.5,
                "spark": {"jobs": 3, "stages": 7, "tasks": 20},
                "peak_rss_bytes": 2 * 1024**3,
                "rows_in": {"cursors": 10, "entries": 100},
                "rows_out": {"cursor_backlog": 10},
                "floor_seconds": 10.0,
                "floor_ratio": 3.0,
            },
            "report": {"seconds": 5.0, "peak_rss_bytes": 1, "rows_in": {}, "rows_out": {}},
        },
        "set_based": {
            "position_requests": {"rows": 1_000_000, "generate_seconds": 3.0},
            "position_after_n": {
                "spark_seconds": 20.0,
                "rows_out": 1_000_000,
                "duckdb": {"seconds": 2.0, "rows_out": 1_000_000},
                "spark_over_duckdb": 10.0,
                "oracle": {"seconds": 40.0, "rows_out": 1_000_000},
                "spark_over_oracle": 0.5,
            },
        },
    }


def test_every_nightly_stage_but_ingest_is_benchmarked():
    assert set(STAGE_INPUTS) == set(STAGES) - {"ingest"}


def _every_stage(result: dict) -> dict:
    """``result`` with the stages it lacks added (no floor): the pipeline targets apply to whole runs."""
    for stage in STAGE_INPUTS:
        result["stages"].setdefault(
            stage, {"seconds": 1.0, "peak_rss_bytes": 1, "rows_in": {}, "rows_out": {}}
        )
    return result


def test_checks_flag_misses_with_their_margin_and_pass_the_rest():
    by_name = {c["check"]: c for c in checks(_every_stage(_result()))}
    assert by_name["pipeline seconds (tier l target 1200)"] == {
        "check": "pipeline seconds (tier l target 1200)",
        "value": 1500.0,
        "target": 1200,
        "met": False,
        "missed_by": "25%",
    }
    assert by_name["pipeline peak memory (PSS) GiB (target 12)"]["met"] is True
    assert by_name["backlog: stage / scan floor"]["met"] is False
    assert by_name["backlog: stage / scan floor"]["missed_by"] == "20%"
    assert by_name["position_after_n: spark / duckdb"]["missed_by"] == "100%"
    assert by_name["position_after_n: spark / oracle"]["met"] is True
    assert by_name["position-after-N, 1M requests, seconds"]["met"] is True
    assert "report: stage / scan floor" not in by_name  # the report stage has no floor


def test_tier_s_checks_no_tier_l_targets():
    names = {c["check"] for c in checks(_result("s"))}
    assert not any("tier l" in n or "peak memory" in n for n in names)
    assert TARGETS["floor_ratio"] == 2.5


def test_markdown_states_machine_numbers_and_misses():
    result = _every_stage(_result())
    result["checks"] = checks(result)
    md = markdown(result)
    assert "# Benchmark tier `l`" in md
    assert "cpu, 2 cores, 23.4 GiB" in md
    assert "| backlog | 30.0 | 41.5 | 3 / 7 / 20 | 110 | 10 | 10.0 | 3.0 | 2.00 |" in md
    assert "| position_after_n | 1,000,000 | 20.0 | 2.0 | 10.0 | 40.0 | 0.5 |" in md
    assert "**no** (missed by 25%)" in md


def test_markdown_reads_results_without_cpu_or_spark_counts():
    result = _result()
    del result["stages"]["backlog"]["cpu_seconds"], result["stages"]["backlog"]["spark"]
    result["checks"] = checks(result)
    assert "| backlog | 30.0 |  |  | 110 | 10 | 10.0 | 3.0 | 2.00 |" in markdown(result)


def test_tree_cpu_seconds_counts_a_busy_child():
    before = tree_cpu_seconds()
    subprocess.run([sys.executable, "-c", "x = 0\nfor i in range(3_000_000): x += i"], check=True)
    assert tree_cpu_seconds() - before >= 0.05  # the reaped child's CPU counts (cutime)


def test_partial_results_are_written_next_to_the_final_file(tmp_path):
    out = tmp_path / "l.json"
    _write_partial(out, {"tier": "l", "stages": {"backlog": {"seconds": 1.0}}})
    partial = json.loads((tmp_path / "l.partial.json").read_text())
    assert partial["complete"] is False and partial["stages"] == {"backlog": {"seconds": 1.0}}


def test_spark_work_counts_the_jobs_stages_and_tasks_since_the_last_take(spark):
    work = SparkWork(spark)
    spark.range(0, 1000, 1, 3).selectExpr("id % 7 as k").groupBy("k").count()  # lazily built: no job
    assert work.take() == {"jobs": 0, "stages": 0, "tasks": 0}
    spark.range(0, 1000, 1, 3).selectExpr("id % 7 as k").groupBy("k").count().collect()
    taken = work.take()
    assert taken["jobs"] >= 1 and taken["stages"] >= 2 and taken["tasks"] >= 4
    assert work.take() == {"jobs": 0, "stages": 0, "tasks": 0}


def test_problems_invalidate_a_run_but_missed_targets_do_not():
    result = _result()
    assert problems(result) == []  # the synthetic run misses targets: still a valid run
    result["stages"]["quota"] = {"error": "AnalysisException: boom"}
    result["set_based"]["position_after_n"]["duckdb"]["rows_out"] = 999_999
    result["set_based"]["position_after_n"]["oracle"] = {"error": "KeyError: 'x'"}
    result["set_based"]["exact_backlog"] = {"spark_error": "Py4JJavaError: OOM"}
    assert problems(result) == [
        "stage quota failed",
        "position_after_n: duckdb returned 999999 rows, Spark 1000000",
        "position_after_n: the oracle baseline failed (KeyError: 'x')",
        "exact_backlog: Spark failed (Py4JJavaError: OOM)",
    ]
    result["checks"], result["problems"] = checks(result), problems(result)
    assert "**Invalid run**: stage quota failed" in markdown(result)


def test_results_of_a_stopped_run_from_its_partial_file(tmp_path):
    partial = _result()
    del partial["pipeline_seconds"], partial["wall_seconds"], partial["peak_rss_gib"], partial["finished_at"]
    _write_partial(tmp_path / "l.json", partial)
    result = from_partial(tmp_path / "l.partial.json")
    assert result["complete"] is False and result["pipeline_seconds"] == 35.0
    assert result["not_run"] == [s for s in STAGE_INPUTS if s not in ("backlog", "report")]
    assert result["peak_rss_gib"] == 2.0 and result["wall_seconds"] == "not finished"
    md = markdown(result)
    assert "**Incomplete run**: no results for plans, quota," in md
    assert "data generation 100.0 s" in md


def test_merge_combines_a_stopped_run_with_the_run_that_finished_it(tmp_path):
    first = _result()
    first["started_at"] = "2026-11-24T10:00:00Z"
    first["seed"] = 7
    del first["set_based"]
    first["stages"]["backlog"]["seconds"] = 99.0  # replaced by the later file
    second = _result()
    second["started_at"] = "2026-11-24T12:00:00Z"
    second["seed"] = 7
    second["peak_rss_bytes"] = 11 * 1024**3
    benched = list(STAGE_INPUTS)  # every nightly stage but ingest
    second["stages"] = {s: {**second["stages"]["backlog"], "seconds": 10.0} for s in benched if s != "report"}
    (tmp_path / "a.json").write_text(json.dumps(first))
    (tmp_path / "b.json").write_text(json.dumps(second))
    merged = merge([tmp_path / "a.json", tmp_path / "b.json"])
    assert list(merged["stages"]) == benched  # pipeline order, report from the first file
    assert merged["stages"]["backlog"]["seconds"] == 10.0
    assert merged["pipeline_seconds"] == 10.0 * (len(benched) - 1) + 5.0
    assert merged["peak_rss_gib"] == 11.0 and merged["wall_seconds"] == 3400.0
    assert merged["set_based"]["position_after_n"]["spark_seconds"] == 20.0
    assert merged["not_run"] == ["exact_backlog", "compaction_preview"] and merged["complete"] is False
    assert [r["file"] for r in merged["merged_from"]] == ["a.json", "b.json"]
    md = markdown(merged)
    assert "Measured by the run started 2026-11-24T12:00:00Z (`b.json`): backlog, plans," in md
    assert "**Incomplete run**" not in md  # every stage is there, only set-based computations are not
    assert "**Not measured**: exact_backlog, compaction_preview." in md
    merged["notes"] = ["the oracle was stopped after 44 minutes"]
    assert "Note: the oracle was stopped after 44 minutes" in markdown(merged)


def test_merge_names_the_machine_of_each_run_when_they_differ(tmp_path):
    first, second = _result(), _result()
    first["started_at"], second["started_at"] = "2026-11-24T10:00:00Z", "2026-11-25T09:00:00Z"
    second["machine"] = {**second["machine"], "cpu_model": "AMD EPYC"}
    (tmp_path / "a.json").write_text(json.dumps(first))
    (tmp_path / "b.json").write_text(json.dumps(second))
    merged = merge([tmp_path / "a.json", tmp_path / "b.json"])
    assert merged["machines"] == sorted({first["machine"]["cpu_model"], "AMD EPYC"})
    md = markdown(merged)
    assert "**Runs on different machines**" in md
    assert "Measured by the run started 2026-11-25T09:00:00Z on AMD EPYC (`b.json`)" in md
    second["finished_at"] = "2026-11-25T10:00:00Z"
    (tmp_path / "b.json").write_text(json.dumps(second))
    later_first = merge([tmp_path / "b.json", tmp_path / "a.json"])
    assert later_first["finished_at"] == "2026-11-25T10:00:00Z"  # the latest end, not the last file's
    same = merge([tmp_path / "a.json", tmp_path / "a.json"])
    assert len(same["machines"]) == 1 and "different machines" not in markdown(same)


def test_merge_refuses_runs_of_different_tiers(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps(_result("l")))
    (tmp_path / "b.json").write_text(json.dumps(_result("m")))
    with pytest.raises(ValueError, match="different tiers"):
        merge([tmp_path / "a.json", tmp_path / "b.json"])


def test_scaling_checks_against_local2_and_tier_m_results(tmp_path):
    base = _result()
    (tmp_path / "l.json").write_text(json.dumps(base))
    one = _result()
    one["master"] = "local[1]"
    one["stages"]["backlog"]["seconds"] = 45.0  # 1.5x: misses 1.6
    one["comparisons"] = comparisons(one, tmp_path)
    assert one["comparisons"]["local2_speedup"]["stages"] == {"backlog": 1.5, "report": 1.0}
    by_name = {c["check"]: c for c in checks(one)}
    assert by_name["backlog: local[2] speed-up over local[1]"]["met"] is False

    m = _result("m")
    m["stages"]["backlog"].update(seconds=2.0, rows_in={"cursors": 1, "entries": 10})
    (tmp_path / "m.json").write_text(json.dumps(m))
    base["comparisons"] = comparisons(base, tmp_path)
    scaling = base["comparisons"]["tier_scaling"]["stages"]["backlog"]
    assert scaling == {"time_ratio": 15.0, "data_ratio": 10.0}
    by_name = {c["check"]: c for c in checks(base)}
    assert by_name["backlog: time ratio l/m vs data ratio 10.0"]["missed_by"] == "50%"
    assert comparisons(_result("s"), tmp_path) == {}


def test_a_run_of_some_stages_is_not_checked_against_the_pipeline_targets():
    result = _result()  # backlog and report only
    names = {c["check"] for c in checks(result)}
    assert not any(n.startswith(("pipeline seconds", "pipeline peak memory")) for n in names)
    result["stages"] = {s: {**result["stages"]["backlog"], "seconds": 200.0} for s in STAGE_INPUTS}
    by_name = {c["check"]: c for c in checks(result)}
    assert by_name["pipeline seconds (tier l target 1200)"]["met"] is False
    assert by_name["pipeline peak memory (PSS) GiB (target 12)"]["met"] is True
    result["master"] = "local[1]"  # the targets are for local[2]; a local[1] run is there for its speed-up
    names = {c["check"] for c in checks(result)}
    assert not any(n.startswith(("pipeline seconds", "pipeline peak memory")) for n in names)


def _stopped_oracle(result: dict) -> dict:
    entry = result["set_based"]["position_after_n"]
    entry["oracle"] = {"timed_out": True, "seconds_at_least": 1200.0}
    entry["spark_over_oracle"] = None
    entry["spark_over_oracle_at_most"] = round(entry["spark_seconds"] / 1200.0, 2)
    return result


def test_a_stopped_oracle_is_a_bound_not_a_problem():
    result = _stopped_oracle(_result())
    assert problems(result) == []
    by_name = {c["check"]: c for c in checks(result)}
    bound = by_name["position_after_n: spark / oracle, at most (oracle stopped after 1200 s)"]
    assert (bound["value"], bound["met"]) == (0.02, True)
    assert "position_after_n: spark / oracle" not in by_name  # no exact ratio to check
    result["checks"] = checks(result)
    assert "| position_after_n | 1,000,000 | 20.0 | 2.0 | 10.0 | > 1200 (stopped) | < 0.02 |" in markdown(
        result
    )


def test_oracle_run_stops_the_child_after_its_timeout(tmp_path):
    import datetime as dt

    from benchmarks.set_based import oracle_run

    # importing the oracle's modules alone takes longer than this: the child is stopped, not waited for
    stopped = oracle_run("exact_backlog", str(tmp_path), dt.date(2026, 11, 1), timeout=0.05)
    assert stopped == {"timed_out": True, "seconds_at_least": 0.05}


def test_oracle_run_reports_what_failed_in_the_child(tmp_path):
    import datetime as dt

    from benchmarks.set_based import oracle_run

    failed = oracle_run("exact_backlog", str(tmp_path / "no-warehouse"), dt.date(2026, 11, 1), timeout=120)
    assert set(failed) == {"error"}
    assert "no-warehouse" in failed["error"] or "TableNotFound" in failed["error"]


def test_markdown_shows_the_first_runs_beside_the_compared_warm_runs():
    result = _result()
    entry = result["set_based"]["position_after_n"]
    entry["spark_first_seconds"] = 41.5
    entry["duckdb"]["first_seconds"] = 2.5
    result["checks"] = checks(result)
    md = markdown(result)
    assert "| position_after_n | 1,000,000 | 20.0 (first 41.5) | 2.0 (first 2.5) | 10.0 | 40.0 | 0.5 |" in md
    assert "position-after-N, 1M requests, seconds | 20.0 |" in md  # the warm run is checked


def test_the_pipeline_peak_is_the_stages_peak_not_the_whole_runs():
    result = _every_stage(_result())
    result["peak_rss_gib"] = 21.2  # DuckDB and an oracle beside the JVM in the set-based part
    result["stages"]["quota"] = {**result["stages"]["backlog"], "peak_rss_bytes": 9 * 1024**3}
    by_name = {c["check"]: c for c in checks(result)}
    peak = by_name["pipeline peak memory (PSS) GiB (target 12)"]
    assert (peak["value"], peak["met"]) == (9.0, True)
    result["checks"] = checks(result)
    assert "of its stages **9.0 GiB**" in markdown(result) and "its peak 21.2 GiB" in markdown(result)


def test_markdown_of_a_run_without_stages_has_no_pipeline_line_or_stage_table():
    result = _result()
    result["stages"], result["pipeline_seconds"] = {}, 0
    result["checks"] = checks(result)
    md = markdown(result)
    assert "No nightly stage was run" in md and "Pipeline (stages below)" not in md
    assert "| stage | seconds |" not in md
    with_stages = _result()
    with_stages["checks"] = checks(with_stages)
    assert "Pipeline (stages below)" in markdown(with_stages)
