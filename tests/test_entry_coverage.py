"""Completeness of the exported entries per topic: manifest -> managed_ledgers -> the analyses' flag.

Cases (docs/semantics/export-rest.md "Completeness"): a capped topic of a ``backlog`` export, a complete
one, every topic of an ``--entries none`` export, a cluster the manifest says nothing about (dumps made
otherwise: null, taken as whole), and the compaction preview of a ``backlog`` topic without a
``__compaction`` cursor.
"""

from __future__ import annotations

from pyspark.sql import Row

from pulsar_model.engine.entry_coverage import (
    compaction_entries_complete,
    topic_entries_complete,
    with_entries_complete,
)
from pulsar_model.ingest.coverage import with_entry_coverage

MANIFEST_ENTRIES = {
    "c1": {
        "mode": "backlog",
        "incomplete_topics": {
            "persistent://t/ns/capped": [{"from": "5:3", "to": "6:9", "reason": "left out by the cap"}]
        },
    },
    "c2": {"mode": "none", "incomplete_topics": {}},
}


def test_with_entry_coverage_reads_the_manifest_sections(spark) -> None:  # type: ignore[no-untyped-def]
    managed = spark.createDataFrame(
        [
            ("c1", "persistent://t/ns/capped"),
            ("c1", "persistent://t/ns/whole"),
            ("c2", "persistent://t/ns/a"),
            ("c3", "persistent://t/ns/b"),
        ],
        "cluster string, topic string",
    )
    rows = {(r.cluster, r.topic): r for r in with_entry_coverage(managed, spark, MANIFEST_ENTRIES).collect()}
    capped = rows[("c1", "persistent://t/ns/capped")]
    assert (capped.exported_entries_mode, capped.exported_entries_complete) == ("backlog", False)
    assert capped.exported_entries_missing == [
        Row(
            from_position=Row(ledger_id=5, entry_id=3),
            to_position=Row(ledger_id=6, entry_id=9),
            reason="left out by the cap",
        )
    ]
    whole = rows[("c1", "persistent://t/ns/whole")]
    assert (whole.exported_entries_mode, whole.exported_entries_complete, whole.exported_entries_missing) == (
        "backlog",
        True,
        None,
    )
    none = rows[("c2", "persistent://t/ns/a")]
    assert (none.exported_entries_mode, none.exported_entries_complete) == ("none", False)
    unknown = rows[("c3", "persistent://t/ns/b")]
    assert (unknown.exported_entries_mode, unknown.exported_entries_complete) == (None, None)


def test_entries_complete_flags_for_the_analyses(spark) -> None:  # type: ignore[no-untyped-def]
    managed = spark.createDataFrame(
        [
            ("c1", "persistent://t/ns/capped", "backlog", False),
            ("c1", "persistent://t/ns/compacted", "backlog", True),
            ("c1", "persistent://t/ns/never-compacted", "backlog", True),
            ("c2", "persistent://t/ns/all", "all", True),
            ("c3", "persistent://t/ns/dump", None, None),
        ],
        "cluster string, topic string, exported_entries_mode string, exported_entries_complete boolean",
    )
    cursors = spark.createDataFrame(
        [
            ("c1", "persistent://t/ns/compacted", "__compaction"),
            ("c1", "persistent://t/ns/never-compacted", "sub"),
        ],
        "cluster string, topic string, cursor_name string",
    )
    topic = {
        (r.cluster, r.topic): r.exported_entries_complete for r in topic_entries_complete(managed).collect()
    }
    assert topic == {
        ("c1", "persistent://t/ns/capped"): False,
        ("c1", "persistent://t/ns/compacted"): True,
        ("c1", "persistent://t/ns/never-compacted"): True,
        ("c2", "persistent://t/ns/all"): True,
        ("c3", "persistent://t/ns/dump"): True,  # the export does not say: taken as whole, as before
    }
    compaction = {
        (r.cluster, r.topic): r.exported_entries_complete
        for r in compaction_entries_complete(managed, cursors).collect()
    }
    assert compaction == {**topic, ("c1", "persistent://t/ns/never-compacted"): False}
    rows = spark.createDataFrame(
        [("c1", "persistent://t/ns/capped", 1), ("c9", "persistent://t/ns/elsewhere", 2)],
        "source_cluster string, topic string, n int",
    )
    flagged = with_entries_complete(rows, topic_entries_complete(managed), "source_cluster")
    assert sorted(tuple(r) for r in flagged.collect()) == [
        ("c1", "persistent://t/ns/capped", 1, False),
        ("c9", "persistent://t/ns/elsewhere", 2, True),
    ]
