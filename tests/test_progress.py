"""Live progress of a stage (issue 26 item 6): a redrawn status line on a terminal, one line per step in a
log, with a stand-in for Spark's status store (no Spark needed)."""

from __future__ import annotations

import io
import time

from pulsar_model.pipeline.progress import JobStatus, Progress, status_text


def test_status_text_names_the_stage_the_step_and_the_tasks():
    job = JobStatus(
        42, "nightly-1 stage 2/11: pulsar delta bridge: stage replace_partitions cursor_backlog", 35, 80
    )
    assert status_text("[2/11] backlog", 83.0, job) == (
        "[2/11] backlog 1:23 · job 42 pulsar delta bridge: stage replace_partitions cursor_backlog: "
        "35/80 tasks"
    )
    assert status_text("[2/11] backlog", 3725.0, None) == "[2/11] backlog 1:02:05 · planning / driver work"


def test_status_text_drops_spark_html_and_long_descriptions():
    job = JobStatus(0, "Listing leaf files and directories for 96 paths:<br/>file:/tmp/x, ...", 0, 96)
    assert status_text("[1/2] ingest", 6, job) == (
        "[1/2] ingest 0:06 · job 0 Listing leaf files and directories for 96 paths:: 0/96 tasks"
    )
    # A job without a description is named after a JVM call site: say it is a Spark job, not the call site.
    site = JobStatus(7, "localCheckpoint at NativeMethodAccessorImpl.java:0", 3, 13)
    assert (
        status_text("[3/11] plans", 37, site)
        == "[3/11] plans 0:37 · job 7 Spark job (localCheckpoint): 3/13 tasks"
    )
    closure = JobStatus(8, "$anonfun$withThreadLocalCaptured$2 at CompletableFuture.java:1768", 0, 2)
    assert status_text("[3/11] plans", 45, closure) == "[3/11] plans 0:45 · job 8 Spark job: 0/2 tasks"
    long = JobStatus(1, "x" * 200, 1, 2)
    assert len(status_text("s", 0, long)) < 100


def _run(progress: Progress, seconds: float) -> None:
    progress.start("[1/1] quota")
    time.sleep(seconds)
    progress.finish()
    progress.close()


def test_progress_redraws_one_line_on_a_terminal():
    jobs = iter([JobStatus(1, "a: step one", 1, 4)] * 3 + [JobStatus(2, "a: step two", 3, 4)] * 100)
    out = io.StringIO()
    progress = Progress(None, out, terminal=True, poll=lambda _: next(jobs), terminal_interval=0.05)
    _run(progress, 0.5)
    text = out.getvalue()
    assert "\n" not in text, "a terminal gets one redrawn line, no new lines"
    frames = [f for f in text.split("\r\x1b[K") if f]
    assert len(frames) >= 5
    assert frames[0].startswith("[1/1] quota 0:00 · job 1 step one: 1/4 tasks")
    assert frames[-1].startswith("[1/1] quota 0:00 · job 2 step two: 3/4 tasks")
    assert text.endswith("\r\x1b[K"), "finish clears the line"


def test_progress_writes_one_line_per_step_in_a_log():
    jobs = iter([JobStatus(1, "a: step one", 1, 4)] * 4 + [JobStatus(2, "a: step two", 0, 4)] * 100)
    out = io.StringIO()
    progress = Progress(None, out, terminal=False, poll=lambda _: next(jobs), terminal_interval=0.05)
    _run(progress, 0.6)
    lines = out.getvalue().splitlines()
    assert [line.split(" · ", 1)[1] for line in lines] == [
        "job 1 step one: 1/4 tasks",
        "job 2 step two: 0/4 tasks",
    ]
    assert "\r" not in out.getvalue()


def test_progress_in_a_log_repeats_a_long_step_after_the_interval():
    out = io.StringIO()
    progress = Progress(
        None,
        out,
        terminal=False,
        poll=lambda _: JobStatus(7, "a: slow write", 1, 9),
        terminal_interval=0.05,
        log_interval=0.2,
    )
    _run(progress, 0.7)
    assert 3 <= len(out.getvalue().splitlines()) <= 5


def test_progress_survives_a_failing_status_store_and_can_be_disabled():
    def broken(_: object) -> JobStatus:
        raise RuntimeError("py4j: the JVM is stopping")

    out = io.StringIO()
    _run(Progress(None, out, terminal=True, poll=broken, terminal_interval=0.05), 0.3)
    assert out.getvalue() == ""
    quiet = io.StringIO()
    _run(Progress(None, quiet, terminal=True, enabled=False, poll=lambda _: JobStatus(1, "x", 0, 1)), 0.1)
    assert quiet.getvalue() == ""
