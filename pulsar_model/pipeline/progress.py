"""A run never looks hung: what the running stage computes and how far Spark is with it.

:class:`Progress` polls Spark's status store from a daemon thread while a stage runs. On a terminal it
redraws one status line on stderr every :data:`TERMINAL_INTERVAL_S` seconds (stage, elapsed time, the
running Spark job's description and its tasks done / total); in a log (stderr not a terminal) it writes a
plain line only when the running job's description (the step) changes, and at least every
:data:`LOG_INTERVAL_S` seconds, so a log shows one line per step without redraw noise. Spark's own
console progress bar stays off (``spark.ui.showConsoleProgress``). The thread only reads; any error from
the JVM (e.g. while the session stops) skips one update.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

#: Seconds between two redraws of the terminal status line.
TERMINAL_INTERVAL_S = 2.0
#: Characters of a job description on the status line.
MAX_DESCRIPTION = 70
#: Most seconds between two lines in a log while a stage runs (a new Spark job writes one at once).
LOG_INTERVAL_S = 30.0


@dataclass(frozen=True)
class JobStatus:
    """The newest running Spark job: id, description (the stage sets it), tasks done and total."""

    job_id: int
    description: str
    tasks_done: int
    tasks_total: int


def running_job(spark: Any) -> JobStatus | None:
    """The newest active Spark job of ``spark``, from the status store (None when none runs)."""
    sc = spark.sparkContext
    ids = sorted(sc.statusTracker().getActiveJobsIds())
    if not ids:
        return None
    job_id = int(ids[-1])
    store = sc._jsc.sc().statusStore()  # the live store behind the UI; kept also when the UI is off
    data = store.job(job_id)
    described = data.description()
    description = str(described.get()) if described.isDefined() else str(data.name())
    return JobStatus(job_id, description, int(data.numCompletedTasks()), int(data.numTasks()))


def _clock(seconds: float) -> str:
    whole = int(seconds)
    return (
        f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"
        if whole >= 3600
        else (f"{whole // 60}:{whole % 60:02d}")
    )


#: A job name that is only a JVM call site: ``localCheckpoint at NativeMethodAccessorImpl.java:0``.
_CALL_SITE = re.compile(r"^(\S+) at [\w$.]+\.(?:java|scala):\d+$")


def status_text(label: str, elapsed: float, job: JobStatus | None) -> str:
    """``[3/11] backlog 1:23 · job 42 writing cursor_backlog: 35/80 tasks`` (no job: planning or driver)."""
    text = f"{label} {_clock(elapsed)}"
    if job is None:
        return f"{text} · planning / driver work"
    description = job.description.split(": ", 1)[-1] if job.description else "spark job"
    description = re.sub(r"<[^>]*>.*", "", description).strip()  # Spark's own file listings carry HTML
    call_site = _CALL_SITE.match(description)
    if call_site:  # no description set: Spark names the job after a JVM call site, not what it computes
        operation = call_site.group(1)
        description = "Spark job" if operation.startswith("$") else f"Spark job ({operation})"
    if len(description) > MAX_DESCRIPTION:
        description = description[: MAX_DESCRIPTION - 1] + "…"
    return f"{text} · job {job.job_id} {description}: {job.tasks_done}/{job.tasks_total} tasks"


class Progress:
    """Live progress of the stage that runs (see the module docstring); a no-op when ``enabled`` is False."""

    def __init__(
        self,
        spark: Any,
        stream: TextIO,
        *,
        terminal: bool,
        enabled: bool = True,
        poll: Callable[[Any], JobStatus | None] = running_job,
        terminal_interval: float = TERMINAL_INTERVAL_S,
        log_interval: float = LOG_INTERVAL_S,
    ) -> None:
        self._spark = spark
        self._stream = stream
        self._terminal = terminal
        self._enabled = enabled
        self._poll = poll
        self._interval = terminal_interval if terminal else min(terminal_interval, log_interval)
        self._log_interval = log_interval
        self._label: str | None = None
        self._started = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._drawn = False
        self._last_line = 0.0
        self._last_step: str | None = None

    def start(self, label: str) -> None:
        """A stage starts: follow it until :meth:`finish`."""
        if not self._enabled:
            return
        with self._lock:
            self._label, self._started = label, time.monotonic()
            self._last_line, self._last_step = time.monotonic(), None
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="pulsar-progress", daemon=True)
            self._thread.start()

    def finish(self) -> None:
        """The stage ended: clear the status line (the caller prints the stage's result)."""
        with self._lock:
            self._label = None
            self._clear()

    def close(self) -> None:
        """Stop the thread (idempotent)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        with self._lock:
            self._clear()

    def _clear(self) -> None:
        if self._drawn:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
            self._drawn = False

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            with self._lock:
                label, started = self._label, self._started
            if label is None:
                continue
            try:
                job = self._poll(self._spark)
            except Exception:  # the JVM is stopping or busy: skip this update
                continue
            with self._lock:
                if self._label != label:
                    continue
                text = status_text(label, time.monotonic() - started, job)
                if self._terminal:
                    self._stream.write("\r\x1b[K" + text)
                    self._drawn = True
                else:
                    now = time.monotonic()
                    step = None if job is None else job.description
                    changed = step is not None and step != self._last_step
                    if not changed and now - self._last_line < self._log_interval:
                        continue
                    self._stream.write(text + "\n")
                    self._last_line = now
                    self._last_step = step
                self._stream.flush()
