"""Export discovery: kinds, forms, file-name hints, export identity, clear errors."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from pulsar_model.errors import ExportLayoutError
from pulsar_model.ingest.layout import discover


def _touch(path, text="{}"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_discover_kinds_forms_and_hints(tmp_path):
    root = tmp_path / "exp"
    _touch(
        root / "manifest.json",
        json.dumps(
            {
                "export_id": "e1",
                "exported_at": "2026-11-21T02:00:00Z",
                "clusters": {"c1": {"pulsar_version": "3.0.7"}},
            }
        ),
    )
    _touch(root / "c1" / "stats-internal" / "persistent%3A%2F%2Ft%2Fns%2Fa.json")
    _touch(root / "c1" / "stats" / "all.jsonl", "")
    _touch(root / "c1" / "consumers" / "clients.csv", "topic\n")
    _touch(root / "c1" / "entries" / "persistent%3A%2F%2Ft%2Fns%2Fa.jsonl", "")
    _touch(root / "c1" / "stats" / "notes.txt", "x")
    _touch(root / "c1" / "weird-kind" / "x.json")
    _touch(root / "_ground_truth" / "x.json")
    inv = discover(root)
    assert inv.export_id == "e1"
    assert inv.export_date == dt.date(2026, 11, 21)
    assert inv.exported_at == dt.datetime(2026, 11, 21, 2, tzinfo=dt.UTC)
    assert inv.cluster_versions == {"c1": "3.0.7"}
    by_kind = {(f.kind, f.form): f for f in inv.files}
    assert by_kind[("stats-internal", "file")].name_hint == "persistent://t/ns/a"
    assert by_kind[("stats", "jsonl")].name_hint is None
    assert by_kind[("entries", "jsonl")].name_hint == "persistent://t/ns/a"
    assert ("consumers", "csv") in by_kind
    assert len(inv.files) == 4
    assert any("notes.txt" in s for s in inv.skipped)
    assert any("weird-kind" in s for s in inv.skipped)


def test_discover_date_from_folder_name_or_argument(tmp_path):
    root = tmp_path / "export-2026-11-20"
    _touch(root / "c1" / "stats" / "a.json")
    assert discover(root).export_date == dt.date(2026, 11, 20)
    assert discover(root, dt.date(2026, 1, 2)).export_date == dt.date(2026, 1, 2)


def test_discover_without_date_says_how_to_fix(tmp_path):
    root = tmp_path / "export"
    _touch(root / "c1" / "stats" / "a.json")
    with pytest.raises(ExportLayoutError, match="--export-date"):
        discover(root)


def test_discover_empty_or_missing(tmp_path):
    with pytest.raises(ExportLayoutError, match="does not exist"):
        discover(tmp_path / "nope")
    (tmp_path / "e-2026-01-01").mkdir()
    with pytest.raises(ExportLayoutError, match="holds no export files"):
        discover(tmp_path / "e-2026-01-01")


def test_discover_rejects_a_manifest_version_the_stages_cannot_run(tmp_path):
    root = tmp_path / "exp"
    _touch(
        root / "manifest.json",
        json.dumps({"exported_at": "2026-11-21T02:00:00Z", "clusters": {"c1": {"pulsar_version": "3.0"}}}),
    )
    _touch(root / "c1" / "stats" / "all.jsonl", "")
    with pytest.raises(ExportLayoutError) as info:
        discover(root)
    message = str(info.value)
    assert "clusters.c1.pulsar_version" in message and "'3.0'" in message
    assert "pulsar.cluster_versions.c1" in message  # says how to fix it
