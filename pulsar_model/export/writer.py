"""The export folder: atomic file writes, streaming entry files, the resume journal and the manifest.

Layout (README "Export layout", read unchanged by ``ingest``)::

    <out>/manifest.json                     written last (atomically), rewritten by --resume
    <out>/_export/state.json                export id and start time (kept across --resume)
    <out>/_export/journal.jsonl             one line per finished topic (what --resume skips)
    <out>/<cluster>/stats-internal/<topic>.json   internalStats (partitioned-internalStats wrapper)
    <out>/<cluster>/stats/<topic>.json            stats (partitioned-stats?perPartition=true)
    <out>/<cluster>/backlog-quotas/broker.json    runtime configuration (backlogQuotaDefault* keys)
    <out>/<cluster>/backlog-quotas/<tenant/ns>.json, <topic>.json
    <out>/<cluster>/schemas/<topic>.json          schemas of the topic, all versions
    <out>/<cluster>/rest-entries/<partition>.jsonl one entry-endpoint response per line

Names are URL-encoded (``quote(name, safe="")``) as the README's shell loop writes them. Every file is
written to a hidden temporary file in the same folder and renamed over its final name (``os.replace``),
so a reader (or a crash) never sees half a file; hidden files are ignored by ``ingest``.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

JOURNAL_DIR = "_export"


def encode_name(name: str) -> str:
    return quote(name, safe="")


def dumps(doc: Any) -> str:
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


def atomic_write(path: Path, data: bytes, *, fsync: bool = False) -> None:
    """Write ``data`` to ``path`` through a hidden temporary file and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".tmp-{path.name[:40]}-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_json(path: Path, doc: Any, *, fsync: bool = False, pretty: bool = False) -> None:
    text = json.dumps(doc, ensure_ascii=False, indent=2 if pretty else None) + "\n"
    atomic_write(path, text.encode("utf-8"), fsync=fsync)


class StreamingFile:
    """A file written line by line to a hidden temporary file, renamed over its name on :meth:`commit`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".tmp-{path.name[:40]}-", dir=path.parent)
        self._tmp = Path(tmp)
        self._fh: IO[str] | None = os.fdopen(fd, "w", encoding="utf-8", newline="\n")
        self.lines = 0

    def write_line(self, text: str) -> None:
        assert self._fh is not None
        self._fh.write(text)
        self._fh.write("\n")
        self.lines += 1

    def commit(self) -> None:
        assert self._fh is not None
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._fh.close()
        self._fh = None
        os.replace(self._tmp, self.path)

    def discard(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        self._tmp.unlink(missing_ok=True)


class Journal:
    """``_export/journal.jsonl``: one JSON line per finished topic; read back by ``--resume``."""

    def __init__(self, out: Path) -> None:
        self.path = out / JOURNAL_DIR / "journal.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh: IO[str] | None = None

    def load(self) -> dict[tuple[str, str], dict[str, Any]]:
        """Finished topics by (cluster, topic); a torn last line (crash while appending) is ignored."""
        done: dict[tuple[str, str], dict[str, Any]] = {}
        if not self.path.is_file():
            return done
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and isinstance(record.get("cluster"), str):
                done[(record["cluster"], str(record.get("topic")))] = record
        return done

    def append(self, record: Mapping[str, Any]) -> None:
        if self._fh is None:
            self._fh = self.path.open("a", encoding="utf-8", newline="\n")
        self._fh.write(dumps(record) + "\n")
        self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            os.fsync(self._fh.fileno())
            self._fh.close()
            self._fh = None


def folder_is_empty(path: Path) -> bool:
    return not path.exists() or (path.is_dir() and not any(path.iterdir()))


def clean_temporaries(root: Path) -> Iterable[Path]:
    """Remove hidden temporary files a killed export left behind (``--resume``); yields them."""
    for tmp in root.rglob(".tmp-*"):
        if tmp.is_file():
            tmp.unlink(missing_ok=True)
            yield tmp
