"""TEST HOOK: crash the process (SIGKILL) at a named point of a bridge write (issue 9 point 2).

Not for production use. Crash tests set, in the environment of a child process::

    PULSAR_ANALYTICS_FAULT=<table>:<phase>[:<nth>]

and the bridge kills its own process with ``SIGKILL`` (no ``finally`` block, no rollback runs: a real
crash) the ``nth`` time (default 1) the write of ``<table>`` reaches ``<phase>``:

``staging``
    during the Spark job that stages the table's Parquet files, as soon as the first part file appears
    in the staging folder (a watcher thread polls it); if the job finishes first, right after it.
``staged``
    after the table's files are staged and listed, before any commit of the write.
``moved``
    after the table's files were moved into the table root, before its commit to ``_delta_log``.
``committed``
    after the table's commit, before the next table of the same ``write_all`` commits (or, for the
    last table, before the staging folders are deleted).

Just before the kill one line goes to stderr: ``PULSAR_ANALYTICS_FAULT: SIGKILL at <table>:<phase>:<nth>
(<detail>)``. When the variable is unset every hook is one dictionary lookup.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pulsar_model.errors import ConfigError

#: The environment variable the hooks read.
FAULT_ENV = "PULSAR_ANALYTICS_FAULT"
#: The phases of a bridge write, in order.
FAULT_PHASES = ("staging", "staged", "moved", "committed")
#: How often the ``staging`` watcher looks for part files.
_POLL_SECONDS = 0.005

_reached: dict[tuple[str, str], int] = {}
_lock = threading.Lock()


def parse_fault(spec: str) -> tuple[str, str, int]:
    """``"<table>:<phase>[:<nth>]"`` -> (table, phase, nth); ``ConfigError`` for anything else."""
    parts = spec.strip().split(":")
    if len(parts) not in (2, 3) or parts[1] not in FAULT_PHASES or not parts[0]:
        raise ConfigError(
            f"{FAULT_ENV}={spec!r}: write <table>:<phase>[:<nth>] with a phase among {list(FAULT_PHASES)} "
            "(a test hook; unset it for real runs)"
        )
    nth = 1
    if len(parts) == 3:
        if not parts[2].isdigit() or int(parts[2]) < 1:
            raise ConfigError(f"{FAULT_ENV}={spec!r}: <nth> must be a positive integer")
        nth = int(parts[2])
    return parts[0], parts[1], nth


def _armed(table: str, phase: str) -> int | None:
    """The occurrence number when the fault names this point and this is its ``nth`` visit, else None."""
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return None
    want_table, want_phase, nth = parse_fault(spec)
    if want_table != table or want_phase != phase:
        return None
    with _lock:
        count = _reached.get((table, phase), 0) + 1
        _reached[(table, phase)] = count
    return count if count == nth else None


def _kill(table: str, phase: str, nth: int, detail: str) -> None:
    sys.stderr.write(f"{FAULT_ENV}: SIGKILL at {table}:{phase}:{nth} ({detail})\n")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(60)  # pragma: no cover - the signal is not deliverable late; never returns


def fault_point(table: str, phase: str, detail: str = "") -> None:
    """Kill the process here when the fault names ``table`` and ``phase`` (and this is its ``nth`` visit)."""
    nth = _armed(table, phase)
    if nth is not None:
        _kill(table, phase, nth, detail or phase)


def _part_files(folder: str) -> int:
    found = 0
    for _dirpath, _dirs, files in os.walk(folder):
        found += sum(1 for name in files if name.startswith("part-") and not name.endswith(".crc"))
    return found


@contextmanager
def staging_fault(table: str, staging_dir: str) -> Iterator[None]:
    """Around the Spark staging job: kill once a part file exists (or when the job ends, if earlier)."""
    nth = _armed(table, "staging")
    if nth is None:
        yield
        return
    done = threading.Event()

    def watch(kill: Callable[[str, str, int, str], None] = _kill) -> None:
        while not done.is_set():
            files = _part_files(staging_dir)
            if files:
                kill(table, "staging", nth, f"during the Spark job, {files} part file(s) staged")
            time.sleep(_POLL_SECONDS)

    watcher = threading.Thread(target=watch, name="pulsar-fault-staging", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
    _kill(table, "staging", nth, f"after the Spark job, {_part_files(staging_dir)} part file(s) staged")


__all__ = ["FAULT_ENV", "FAULT_PHASES", "fault_point", "parse_fault", "staging_fault"]
