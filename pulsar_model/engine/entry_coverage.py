"""Whether a topic's exported entries are whole: the ``exported_entries_complete`` of the stage outputs.

``managed_ledgers.exported_entries_complete`` says whether the export holds every entry its
``--entries`` mode wanted (:mod:`pulsar_model.ingest.coverage`: false for mode ``none`` and for topics
whose per-topic cap or failed fetches left ranges out; null when the export does not say - entry dumps
made otherwise, taken as whole as before). The analyses that read ``entries``, ``messages`` or
``markers`` (exact backlog, compaction preview, replication snapshots/positions/duplicates/cache replay,
transactions, quota eviction losses, skip plans) carry the topic's flag into their outputs so that a
partial topic is reported as incomplete instead of being computed as if it were whole
(docs/semantics/export-rest.md "Completeness").

One more case is incomplete although nothing was left out: ``--entries backlog`` fetches from the
slowest durable cursor's mark-delete, which covers the compaction preview only when the topic has a
``__compaction`` cursor (its phase one starts there, docs §5.4); a topic never compacted starts from
the first entry, which that mode does not fetch.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

#: The output column every entry-reading analysis adds.
COLUMN = "exported_entries_complete"
_COMPACTION_CURSOR = "__compaction"


def _flag(managed_ledgers: DataFrame) -> Column:
    if COLUMN in managed_ledgers.columns:
        return F.coalesce(F.col(COLUMN), F.lit(True))
    return F.lit(True)


def topic_entries_complete(managed_ledgers: DataFrame, carry: Sequence[str] = ()) -> DataFrame:
    """``cluster, topic``, the ``carry`` columns of ``managed_ledgers`` (e.g. the export identity, so that a
    caller that needs both joins once) and ``exported_entries_complete`` (true when the export does not
    say). One row per managed-ledger row. Pure and lazy."""
    return managed_ledgers.select("cluster", "topic", *carry, _flag(managed_ledgers).alias(COLUMN))


def compaction_entries_complete(managed_ledgers: DataFrame, cursors: DataFrame) -> DataFrame:
    """As :func:`topic_entries_complete`, and false for a ``backlog``-mode topic without a ``__compaction``
    cursor (its compaction preview needs the entries from the topic's start). Pure and lazy."""
    compacted = (
        cursors.where(F.col("cursor_name") == F.lit(_COMPACTION_CURSOR))
        .select("cluster", "topic", F.lit(True).alias("_has_compaction_cursor"))
        .distinct()
    )
    mode = (
        F.col("exported_entries_mode") if "exported_entries_mode" in managed_ledgers.columns else F.lit(None)
    )
    joined = managed_ledgers.select(
        "cluster", "topic", _flag(managed_ledgers).alias("_f"), mode.alias("_m")
    ).join(compacted, ["cluster", "topic"], "left")
    needs_start = (F.col("_m") == F.lit("backlog")) & F.col("_has_compaction_cursor").isNull()
    return joined.select(
        "cluster", "topic", (F.col("_f") & ~F.coalesce(needs_start, F.lit(False))).alias(COLUMN)
    )


def with_entries_complete(df: DataFrame, complete: DataFrame, cluster_column: str = "cluster") -> DataFrame:
    """``df`` plus the topic's ``exported_entries_complete`` (joined on ``cluster_column, topic``; true
    when the topic is not in ``complete``). One row out per row in. Pure and lazy."""
    right = complete.select(
        F.col("cluster").alias("_cc"), F.col("topic").alias("_ct"), F.col(COLUMN).alias("_complete")
    )
    joined = df.drop(COLUMN).join(
        right, (F.col(cluster_column) == F.col("_cc")) & (F.col("topic") == F.col("_ct")), "left"
    )
    return joined.select(
        *[F.col(f"`{c}`") for c in df.columns if c != COLUMN],
        F.coalesce(F.col("_complete"), F.lit(True)).alias(COLUMN),
    )
