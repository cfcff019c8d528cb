"""Discovery of an export folder (driver-side: lists files, never reads data).

Layout (README "Export layout"): ``<export>/manifest.json`` (optional), one folder per cluster, one
sub-folder per kind. Folders whose name starts with ``_`` or ``.`` (e.g. ``_ground_truth``) are
ignored. Each file is either a per-topic JSON document (``*.json``; topic URL-encoded in the name),
JSON Lines with an envelope per line (``*.jsonl``), or, for consumers, CSV (``*.csv``).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

from pulsar_model.domain.versions import check_version
from pulsar_model.errors import ConfigError, ExportLayoutError

#: The kinds of export a cluster folder may hold (DESIGN.md "Exports in, tables out").
KINDS: tuple[str, ...] = (
    "stats-internal",
    "stats",
    "backlog-quotas",
    "consumers",
    "schemas",
    "entries",
    "rest-entries",
)
#: Kinds whose JSON Lines files may be named after one topic (entry dumps, one file per topic).
_TOPIC_NAMED_JSONL = ("entries", "rest-entries")
#: File forms: one JSON document per file, JSON Lines envelopes, CSV (consumers only).
FORMS: dict[str, str] = {".json": "file", ".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv"}
_CLUSTER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


@dataclass(frozen=True)
class ExportFile:
    """One file of an export."""

    cluster: str
    kind: str
    form: str  # file | jsonl | csv
    path: str  # absolute path / URI
    relative_path: str  # relative to the export root (what quarantine rows show)
    name_hint: str | None  # URL-decoded file stem (topic, namespace or "broker"), None for JSONL


@dataclass(frozen=True)
class ExportInventory:
    """What an export holds, plus the identity of the export."""

    root: str
    export_id: str
    exported_at: dt.datetime
    export_date: dt.date
    cluster_versions: dict[str, str]
    files: tuple[ExportFile, ...]
    skipped: tuple[str, ...] = field(default_factory=tuple)  # files ignored, with the reason
    #: per cluster, the manifest's ``entries`` section written by ``pulsar-analytics export`` (mode and
    #: incomplete topics, :mod:`pulsar_model.ingest.coverage`); empty for exports made otherwise
    entry_coverage: dict[str, dict[str, object]] = field(default_factory=dict)

    def files_of(self, kind: str, form: str | None = None) -> list[ExportFile]:
        return [f for f in self.files if f.kind == kind and (form is None or f.form == form)]

    @property
    def clusters(self) -> list[str]:
        return sorted({f.cluster for f in self.files})


def _parse_instant(text: str, where: str) -> dt.datetime:
    try:
        value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ExportLayoutError(
            f"{where}: {text!r} is not an ISO-8601 timestamp; write it like 2026-11-21T02:00:00Z"
        ) from exc
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC)


def _printable(text: str) -> str:
    """A path as valid UTF-8 text (undecodable bytes of the file system shown as U+FFFD)."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _file_name_problem(name: str) -> str | None:
    """Why a file name (relative to its kind folder) cannot be read as an export file, or None.

    Export file names are URL-encoded (README "Export layout"), so they never hold ':' (Hadoop takes
    it for a URI scheme and cannot open the file) and their %-escapes decode to UTF-8 text. The
    returned text never contains ": " (the inventory's "path: reason" separator).
    """
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "the file name is not valid UTF-8 - file ignored, rename it with the URL-encoded topic name"
    if ":" in name:
        return (
            "the file name holds ':' which Spark cannot read (it looks like a URI scheme) - file ignored, "
            "URL-encode the name (':' is %3A, '/' is %2F)"
        )
    try:
        unquote(name, errors="strict")
    except UnicodeDecodeError:
        return (
            "the file name's %-escapes do not decode to UTF-8 text (e.g. %FF) - file ignored, "
            "URL-encode the topic name as UTF-8"
        )
    return None


def discover(export_dir: str | Path, export_date: dt.date | None = None) -> ExportInventory:
    """List the files of ``export_dir`` and work out the export's id and date.

    Date: ``export_date`` argument, else ``manifest.json``'s ``exported_at``, else a ``YYYY-MM-DD``
    in the folder name; otherwise :class:`ExportLayoutError` says how to provide one.
    """
    root = Path(export_dir)
    if not root.is_dir():
        raise ExportLayoutError(f"Export folder {str(root)!r} does not exist or is not a folder")
    manifest: dict[str, object] = {}
    manifest_path = root / "manifest.json"
    if manifest_path.is_file():
        try:
            loaded = json.loads(manifest_path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # RecursionError: nested too deeply
            raise ExportLayoutError(
                f"{manifest_path}: not valid JSON ({exc}); fix or remove the manifest"
            ) from exc
        if not isinstance(loaded, dict):
            raise ExportLayoutError(f"{manifest_path}: must be a JSON object")
        manifest = loaded
    exported_at: dt.datetime | None = None
    if isinstance(manifest.get("exported_at"), str):
        exported_at = _parse_instant(str(manifest["exported_at"]), f"{manifest_path} exported_at")
    if export_date is None:
        if exported_at is not None:
            export_date = exported_at.date()
        else:
            match = re.search(r"(\d{4}-\d{2}-\d{2})", root.resolve().name)
            if match is None:
                raise ExportLayoutError(
                    f"Cannot tell the date of export {str(root)!r}: add manifest.json with "
                    '{"exported_at": "2026-11-21T02:00:00Z"}, name the folder with a YYYY-MM-DD date, '
                    "or pass --export-date"
                )
            export_date = dt.date.fromisoformat(match.group(1))
    if exported_at is None or exported_at.date() != export_date:
        exported_at = dt.datetime.combine(export_date, dt.time(), tzinfo=dt.UTC)
    export_id = str(manifest.get("export_id") or root.resolve().name)
    versions: dict[str, str] = {}
    coverage: dict[str, dict[str, object]] = {}
    clusters_meta = manifest.get("clusters")
    if isinstance(clusters_meta, dict):
        for name, meta in clusters_meta.items():
            if isinstance(meta, dict) and meta.get("pulsar_version") is not None:
                where = f"{manifest_path} clusters.{name}.pulsar_version"
                fix = f"Fix the manifest, or remove the key and set pulsar.cluster_versions.{name}."
                try:
                    versions[str(name)] = check_version(meta["pulsar_version"], where, fix)
                except ConfigError as exc:
                    raise ExportLayoutError(str(exc)) from None
            if isinstance(meta, dict) and isinstance(meta.get("entries"), dict):
                coverage[str(name)] = dict(meta["entries"])

    files: list[ExportFile] = []
    skipped: list[str] = []
    for cluster_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        if cluster_dir.name.startswith(("_", ".")):
            continue
        if not _CLUSTER_RE.match(cluster_dir.name):
            skipped.append(f"{cluster_dir.name}/: not a valid cluster folder name")
            continue
        for kind_dir in sorted(p for p in cluster_dir.iterdir()):
            if kind_dir.name.startswith(("_", ".")):
                continue
            if not kind_dir.is_dir() or kind_dir.name not in KINDS:
                skipped.append(
                    f"{cluster_dir.name}/{kind_dir.name}: not one of the export kinds {', '.join(KINDS)}"
                )
                continue
            for path in sorted(kind_dir.rglob("*")):
                if not path.is_file() or path.name.startswith(("_", ".")):
                    continue
                rel = path.relative_to(root).as_posix()
                name_problem = _file_name_problem(path.relative_to(kind_dir).as_posix())
                if name_problem is not None:
                    skipped.append(f"{_printable(rel)}: {name_problem}")
                    continue
                form = FORMS.get(path.suffix.lower())
                if form is None or (form == "csv" and kind_dir.name != "consumers"):
                    skipped.append(
                        f"{rel}: unsupported file type (expected .json, .jsonl or, for consumers, .csv)"
                    )
                    continue
                hint = unquote(path.stem) if form != "jsonl" or kind_dir.name in _TOPIC_NAMED_JSONL else None
                files.append(
                    ExportFile(
                        cluster=cluster_dir.name,
                        kind=kind_dir.name,
                        form=form,
                        path=str(path.resolve()),
                        relative_path=rel,
                        name_hint=hint,
                    )
                )
    if not files:
        raise ExportLayoutError(
            f"Export {str(root)!r} holds no export files; expected <cluster>/<kind>/*.json|*.jsonl "
            f"with kinds {', '.join(KINDS)}"
        )
    return ExportInventory(
        root=str(root.resolve()),
        export_id=export_id,
        exported_at=exported_at,
        export_date=export_date,
        cluster_versions=versions,
        files=tuple(files),
        skipped=tuple(skipped),
        entry_coverage=coverage,
    )
