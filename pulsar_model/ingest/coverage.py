"""Which entries an export holds per topic: ``managed_ledgers.exported_entries_*`` from the manifest.

``pulsar-analytics export`` writes, per cluster, ``manifest.json`` -> ``clusters.<name>.entries``::

    {"mode": "none" | "backlog" | "all",
     "max_entries_per_topic": 100000 | null,
     "incomplete_topics": {"persistent://t/ns/x": [{"from": "12:4", "to": "12:99", "reason": "..."}]}}

(docs/semantics/export-rest.md "Completeness"). A topic of such a cluster is complete when the mode
fetched entries and the topic is not listed as incomplete; ``none`` exported no entry, so every topic
is incomplete. Exports made otherwise (the demo, shell loops with entry dumps) say nothing: the columns
are null there and the analyses take the dumped entries as whole, as before.

Driver-side: the manifest is already read by :func:`pulsar_model.ingest.layout.discover`; the incomplete
topics become one small DataFrame joined to ``managed_ledgers`` (no extra Spark job).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pulsar_model.tables.contracts import parse_type

#: Entry modes of ``pulsar-analytics export --entries``.
ENTRY_MODES: Final = ("none", "backlog", "all")
_POSITION: Final = re.compile(r"^\s*(-?\d+):(-?\d+)\s*$")
_MISSING_DDL: Final = (
    "array<struct<from_position:struct<ledger_id:bigint,entry_id:bigint>,"
    "to_position:struct<ledger_id:bigint,entry_id:bigint>,reason:string>>"
)
_SCHEMA: Final = (
    f"cluster string, topic string, _cov_mode string, _cov_listed boolean, _cov_missing {_MISSING_DDL}"
)
COLUMNS: Final = ("exported_entries_mode", "exported_entries_complete", "exported_entries_missing")


def _position(text: Any) -> dict[str, int] | None:
    match = _POSITION.match(text) if isinstance(text, str) else None
    if match is None:
        return None
    return {"ledger_id": int(match.group(1)), "entry_id": int(match.group(2))}


def coverage_rows(coverage: Mapping[str, Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    """One row per cluster (``topic`` null: the mode) and per incomplete topic (its missing ranges)."""
    rows: list[tuple[Any, ...]] = []
    for cluster, section in sorted(coverage.items()):
        mode = section.get("mode")
        mode = mode if mode in ENTRY_MODES else None
        rows.append((cluster, None, mode, False, None))
        incomplete = section.get("incomplete_topics")
        if not isinstance(incomplete, Mapping):
            continue
        for topic, ranges in sorted(incomplete.items()):
            missing = []
            for item in ranges if isinstance(ranges, list) else []:
                if isinstance(item, Mapping):
                    missing.append(
                        {
                            "from_position": _position(item.get("from")),
                            "to_position": _position(item.get("to")),
                            "reason": str(item.get("reason") or ""),
                        }
                    )
            rows.append((cluster, str(topic), mode, True, missing))
    return rows


def with_entry_coverage(
    managed_ledgers: DataFrame, spark: SparkSession, coverage: Mapping[str, Mapping[str, Any]]
) -> DataFrame:
    """Add ``exported_entries_mode``, ``exported_entries_complete`` and ``exported_entries_missing``.

    One row per topic in, one out. Null on clusters the manifest says nothing about; ``complete`` is
    false for mode ``none`` and for listed topics (with their missing ranges), true otherwise.
    """
    rows = coverage_rows(coverage)
    missing_type = parse_type(_MISSING_DDL)
    if not rows:
        return managed_ledgers.select(
            *[c for c in managed_ledgers.columns if c not in COLUMNS],
            F.lit(None).cast("string").alias("exported_entries_mode"),
            F.lit(None).cast("boolean").alias("exported_entries_complete"),
            F.lit(None).cast(missing_type).alias("exported_entries_missing"),
        )
    frame = spark.createDataFrame(rows, _SCHEMA)
    modes = frame.where(F.col("topic").isNull()).select("cluster", F.col("_cov_mode").alias("_m"))
    listed = frame.where(F.col("topic").isNotNull()).select("cluster", "topic", "_cov_missing")
    joined = (
        managed_ledgers.drop(*[c for c in COLUMNS if c in managed_ledgers.columns])
        .join(F.broadcast(modes), ["cluster"], "left")
        .join(F.broadcast(listed), ["cluster", "topic"], "left")
    )
    complete = (
        F.when(F.col("_m").isNull(), F.lit(None).cast("boolean"))
        .when(F.col("_m") == "none", F.lit(False))
        .otherwise(F.col("_cov_missing").isNull())
    )
    return joined.select(
        *[c for c in managed_ledgers.columns if c not in COLUMNS],
        F.col("_m").alias("exported_entries_mode"),
        complete.alias("exported_entries_complete"),
        F.col("_cov_missing").cast(missing_type).alias("exported_entries_missing"),
    )
