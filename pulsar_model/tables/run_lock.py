"""One nightly run per warehouse at a time: an exclusive lock file next to the tables.

``run_nightly`` takes the lock before its first stage and releases it when it ends (success or failure).
A second run against the same warehouse fails at once with :class:`RunLockedError`, naming the run that
holds the lock, its process and host, and how to proceed. The lock file is created with
``O_CREAT | O_EXCL`` (atomic on local and POSIX network filesystems), so of two runs started together
exactly one wins.

A lock left behind by a killed run is *stale*: when its holder ran on this host and that process no
longer exists, the next run removes it and goes on (logged). A lock from another host is never broken
automatically: remove it with ``pulsar-analytics cleanup --break-lock`` once that run is known to be gone.

Object-store warehouses (``s3a://``, ``abfss://``, ...) have no atomic create-if-absent here; there the
lock is skipped with a warning and Delta's optimistic concurrency is the only guard (a conflicting commit
fails with :class:`~pulsar_model.errors.ConcurrentWriteError`; schedule one run per warehouse).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

from pulsar_model.errors import PulsarAnalyticsError
from pulsar_model.tables.delta_io import redact_uri

log = logging.getLogger(__name__)

#: Name of the lock file inside the warehouse folder.
LOCK_FILE = "_pulsar_run.lock"


class RunLockedError(PulsarAnalyticsError):
    """Another run holds the warehouse's run lock."""


def _local_root(warehouse: str) -> Path | None:
    """The warehouse as a local folder, or None for an object-store URI."""
    if "://" in warehouse and not warehouse.startswith("file://"):
        return None
    return Path(warehouse.removeprefix("file://"))


def lock_path(warehouse: str) -> Path | None:
    """Where the run lock of ``warehouse`` lives (None: an object store, no lock)."""
    root = _local_root(warehouse)
    return None if root is None else root / LOCK_FILE


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def read_lock(path: Path) -> dict[str, object] | None:
    """The holder recorded in the lock file (None when there is no lock; {} when it is unreadable)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        holder = json.loads(text)
    except ValueError:
        return {}
    return holder if isinstance(holder, dict) else {}


def _is_stale(holder: dict[str, object]) -> bool:
    pid = holder.get("pid")
    return holder.get("host") == socket.gethostname() and isinstance(pid, int) and not _process_alive(pid)


def _try_create(path: Path, record: dict[str, object]) -> bool:
    """Create ``path`` holding ``record`` unless it exists; atomic, and never visible half-written."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(json.dumps(record), encoding="utf-8")
    try:
        os.link(tmp, path)  # fails if path exists; readers see the whole record or nothing
    except FileExistsError:
        return False
    finally:
        tmp.unlink()
    return True


def _take_over_stale(path: Path, record: dict[str, object]) -> bool:
    """Replace a stale lock by ours; False when the lock is live (or another run is taking it over).

    Two runs may find the same stale lock at once. Only the one that creates the ``.takeover`` file may
    remove the lock, and it re-reads the lock first, so it never removes a lock another run has just taken.
    """
    holder = read_lock(path)
    if holder is None:  # released meanwhile
        return _try_create(path, record)
    if not _is_stale(holder):
        return False
    guard = path.with_name(path.name + ".takeover")
    if not _try_create(guard, record):
        return False
    try:
        current = read_lock(path)
        if current is not None and current != holder:
            return False
        log.warning(
            "removing the stale run lock of %s (process %s is gone)", holder.get("run_id"), holder.get("pid")
        )
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return _try_create(path, record)
    finally:
        with contextlib.suppress(FileNotFoundError):
            guard.unlink()


@contextlib.contextmanager
def warehouse_run_lock(warehouse: str, run_id: str) -> Iterator[Path | None]:
    """Hold the run lock of ``warehouse`` for the ``with`` block; :class:`RunLockedError` when taken."""
    path = lock_path(warehouse)
    if path is None:
        log.warning(
            "warehouse %s is an object store: no run lock, run one job per warehouse", redact_uri(warehouse)
        )
        yield None
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    record: dict[str, object] = {
        "run_id": run_id,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
    if not _try_create(path, record) and not _take_over_stale(path, record):
        holder = read_lock(path) or {}
        who = f"run {holder.get('run_id', '?')} (pid {holder.get('pid', '?')} on {holder.get('host', '?')}"
        raise RunLockedError(
            f"Warehouse {warehouse} is locked by {who}, started {holder.get('started_at', '?')}): "
            "wait for it to finish; if that run is gone, remove the lock with "
            f"'pulsar-analytics cleanup --break-lock' ({path})"
        )
    try:
        yield path
    finally:
        mine = read_lock(path)
        if mine is not None and mine.get("run_id") == run_id:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def live_holder(warehouse: str) -> dict[str, object] | None:
    """The record of the run holding the lock of ``warehouse`` when it is alive (not stale), else None."""
    path = lock_path(warehouse)
    if path is None:
        return None
    holder = read_lock(path)
    return holder if holder is not None and not _is_stale(holder) else None


def break_lock(warehouse: str) -> dict[str, object] | None:
    """Remove the run lock of ``warehouse``; return the holder it named (None when there was none)."""
    path = lock_path(warehouse)
    if path is None:
        return None
    holder = read_lock(path)
    for stale in (path, path.with_name(path.name + ".takeover")):
        with contextlib.suppress(FileNotFoundError):
            stale.unlink()
    return holder
