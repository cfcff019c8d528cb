"""Ledger pinning: who keeps which ledgers alive, and which cursors never move (docs §0.2, §1.11, §5.7).

* :func:`pinning_report` - per topic: the slowest durable cursor, the trim boundary, the ledgers the broker
  would delete at its next trim, and the ledgers that the slowest cursor *alone* keeps alive;
* :func:`unmoved_cursors` - cursors whose mark-delete position has not moved across the last exports of a
  history, and whether the topic was written to meanwhile.

Trimming rule (``ManagedLedgerImpl.internalTrimLedgers``; verified with the project's search tool in
``Hongten/pulsar-2.10.1-code-study@c597d51`` (2.10.1), ``apache/pulsar@3f8bb4b`` (3.x) and
``oneby-wang/pulsar@0f9a026`` (4.x)):

1. No durable cursor (``!cursors.hasDurableCursors()``): the bound is ``currentLedger.id + 1``.
2. Otherwise the bound is the ledger id of ``getSlowestReaderPosition()`` / ``getSlowestCursorPosition()``,
   i.e. the mark-delete position of the slowest *durable* cursor (docs §1.11; non-durable readers are
   kept out of the container's ordering and never hold ledgers). apache/pulsar#22034 (release tags
   v3.0.5, v3.2.3, v3.3.0 and later) adds one case: when the ledger of
   that position is listed, is not the current ledger and ``entries == md.entry + 1`` (md at its last
   entry; also an empty closed ledger with md ``(L,-1)``), the bound is ``md.ledger + 1`` - that ledger is
   consumed and can go too. Older releases (2.x, 3.0.0-3.0.4, 3.1.x, 3.2.0-3.2.2) do not have this case
   (the ledger waited for the cursor to be moved to ``(nextLedger,-1)`` on the next roll-over).
3. Candidates are ``ledgers.headMap(bound, exclusive)`` in ascending id order; the walk **stops at the
   current ledger** (it is never deleted). An md in a deleted ledger has no LedgerInfo: the bound is its
   ledger id.
4. Each candidate is then checked against retention (``retentionTimeMillis``/``retentionSizeInMB``); the
   3.x/4.x walk stops at the first ledger inside retention. The exports carry no retention policy, so
   this module reports what the broker would trim **ignoring retention** - exactly what it deletes with the
   broker defaults ``defaultRetentionTimeInMinutes=0`` / ``defaultRetentionSizeInMB=0`` (a ledger is then
   always "expired" and "over quota"). With a retention policy the broker keeps a prefix of these
   ledgers longer (docs §5.7); offload-driven deletions are out of scope.

A managed ledger without an open ledger (``current_ledger_id`` null, e.g. state ``ClosedLedger``) still has a
``currentLedger`` handle in the broker: the last, closed ledger, which stays protected until a new
ledger is created (apache/pulsar PR #22034). Here that is the ledger with the largest listed id.

All transforms are pure and lazy and never mix topics, clusters or exports.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from pulsar_model import DEFAULT_PULSAR_VERSION
from pulsar_model.domain.versions import flag
from pulsar_model.engine.columns import EARLIEST, as_position
from pulsar_model.engine.columns import position as position_col
from pulsar_model.engine.flags import FLAGS_COLUMN, VERSION_COLUMN, with_flags
from pulsar_model.errors import ContractError

__all__ = [
    "pinning_report",
    "trims_ledger_of_mark_delete_at_last_entry",
    "unmoved_cursors",
]

KEY = ("cluster", "topic")
#: Column that tells exports apart when an input holds several of them (schemas/_common.yaml).
EXPORT_ID = "export_id"
EXPORT_DATE = "export_date"


def trims_ledger_of_mark_delete_at_last_entry(pulsar_version: str = DEFAULT_PULSAR_VERSION) -> bool:
    """``internalTrimLedgers`` also deletes the slowest md's ledger when md is its last entry.

    Flag ``md_last_entry_trim``: apache/pulsar#22034, in the release tags v3.0.5, v3.2.3 and v3.3.0 and
    later (absent from v3.0.4 and v3.2.2); apache/pulsar issue #19077 reports the old behaviour.
    """
    return flag("md_last_entry_trim", pulsar_version)


def _topic_keys(managed_ledgers: DataFrame, ledgers: DataFrame, cursors: DataFrame) -> list[str]:
    """``cluster, topic`` plus ``export_id`` when the managed ledgers carry several exports."""
    if EXPORT_ID not in managed_ledgers.columns:
        return list(KEY)
    missing = [
        name for name, df in (("ledgers", ledgers), ("cursors", cursors)) if EXPORT_ID not in df.columns
    ]
    if missing:
        raise ContractError(
            f"managed_ledgers has an {EXPORT_ID!r} column but {', '.join(missing)} do(es) not: rows of "
            f"different exports could not be told apart. Pass every input with {EXPORT_ID!r} or none of them."
        )
    return [*KEY, EXPORT_ID]


def _below(
    lid: Column, entries: Column, bound_pos: Column, protected: Column, last_entry_rule: bool | Column
) -> Column:
    """Ledger ``lid`` is in ``headMap(bound)`` for a slowest md ``bound_pos`` (module docstring rule 2);
    ``last_entry_rule`` is the version's ``md_last_entry_trim`` (a bool, or a per-row column)."""
    below = lid < bound_pos["ledger_id"]
    if last_entry_rule is not False:
        # entries == md.entry + 1, written without the +1 so that no position can overflow
        at_last_entry = (
            (lid == bound_pos["ledger_id"]) & (lid != protected) & (entries - 1 == bound_pos["entry_id"])
        )
        if isinstance(last_entry_rule, Column):
            at_last_entry = last_entry_rule & at_last_entry
        below = below | at_last_entry
    return F.coalesce(below, F.lit(False))


def pinning_report(
    managed_ledgers: DataFrame,
    ledgers: DataFrame,
    cursors: DataFrame,
    pulsar_version: str | None = DEFAULT_PULSAR_VERSION,
) -> DataFrame:
    """Per-topic pinning report: which ledgers the next trim deletes and which the slowest cursor alone keeps.

    One row per managed-ledger row (``cluster, topic``, plus ``export_id``/``export_date`` when
    ``managed_ledgers`` has them; then ledgers and cursors must carry ``export_id`` too). Columns:

    * ``slowest_cursor_name``, ``slowest_cursor_kind`` (``cursor_kind`` when the cursors have it),
      ``slowest_mark_delete_position``: the durable cursor with the smallest md (null md counts as EARLIEST
      and is reported null); ties go to the smallest ``cursor_order``: the root of the broker's cursor heap
      built in export order (docs §3.9; which tied cursor the broker's own heap holds is not in the export,
      hence ``slowest_cursor_tie``). Readers (``is_durable`` false) never count. Null when the topic has no
      durable cursor.
    * ``slowest_cursor_tie``: another durable cursor has the same md (the same flag as
      :func:`pulsar_model.backlog.estimated_backlog_size`'s).
    * ``next_slowest_cursor_name``, ``next_slowest_mark_delete_position``: the second durable cursor in
      ``(md, cursor_order)`` order - with a tie, the tied cursor; null when there is only one.
    * ``pin_target_position``: where the slowest cursor is moved to measure what it alone pins: the next
      slowest md, or, for the only durable cursor, LAC (never backwards: ``greatest(md, LAC)``).
    * ``trimmable_now_ledgers``, ``trimmable_now_bytes``, ``trimmable_now_ledger_ids``: listed ledgers the
      broker deletes at its next trim, retention ignored (module docstring). Without durable cursors:
      every ledger below the current one.
    * ``trim_boundary_ledger_id``: the first listed ledger that must be kept (smallest id not trimmable
      now); null when the topic lists no ledger.
    * ``pinned_ledgers``, ``pinned_bytes`` (sum of ``size_bytes``), ``pinned_ledger_ids`` (ascending),
      ``oldest_pinned_ledger_id``: ledgers that become trimmable when the slowest cursor moves to
      ``pin_target_position`` and are not trimmable now. A tie pins nothing (0 / empty / null): moving one
      of the tied cursors frees no ledger. 0 / empty without durable cursors.

    ``pulsar_version`` selects whether a slowest md at the last entry of a closed ledger releases that
    ledger (:func:`trims_ledger_of_mark_delete_at_last_entry`); ``None`` reads each topic's own
    ``managed_ledgers.pulsar_version``. Pure and lazy.
    """
    keys = _topic_keys(managed_ledgers, ledgers, cursors)
    ml_cols = [*keys] + (
        [EXPORT_DATE] if EXPORT_DATE in managed_ledgers.columns and EXPORT_DATE not in keys else []
    )
    rule_cols: list[Column] = []
    last_entry_rule: bool | Column
    if pulsar_version is None:
        if VERSION_COLUMN not in managed_ledgers.columns:
            raise ContractError(
                "pulsar_version=None reads managed_ledgers.pulsar_version, which managed_ledgers does not "
                "have: add the column or pass a version string such as '4.1.3'"
            )
        managed_ledgers = with_flags(managed_ledgers)
        rule_cols = [F.coalesce(F.col(FLAGS_COLUMN)["md_last_entry_trim"], F.lit(False)).alias("_rule")]
        last_entry_rule = F.col("_rule")
    else:
        last_entry_rule = trims_ledger_of_mark_delete_at_last_entry(pulsar_version)
    ml = managed_ledgers.repartition(*[F.col(k) for k in KEY]).select(
        *ml_cols,
        F.col("current_ledger_id").cast("long").alias("_cur"),
        as_position(F.col("last_confirmed_entry")).alias("_lac"),
        *rule_cols,
    )
    rule_names = ["_rule"] if rule_cols else []

    # durable cursors of each topic, sorted by (md, cursor_order, name): the heap root first (docs §3.9)
    kind = (
        F.col("cursor_kind").cast("string")
        if "cursor_kind" in cursors.columns
        else F.lit(None).cast("string")
    )
    md = as_position(F.col("mark_delete_position"))
    cursor_struct = F.struct(
        F.coalesce(md, position_col(*EARLIEST)).alias("key"),
        F.col("cursor_order").cast("long").alias("order"),
        F.col("cursor_name").cast("string").alias("name"),
        md.alias("md"),
        kind.alias("kind"),
    )
    durable = (
        cursors.where(F.coalesce(F.col("is_durable").cast("boolean"), F.lit(False)))
        .select(*keys, cursor_struct.alias("_c"))
        .groupBy(*keys)
        .agg(F.array_sort(F.collect_list("_c")).alias("_cs"))
    )
    first, second = F.get(F.col("_cs"), 0), F.get(F.col("_cs"), 1)
    target = F.when(second.isNotNull(), second["key"]).when(
        first.isNotNull(), F.greatest(first["key"], F.col("_lac"))
    )
    topics = ml.join(durable, on=keys, how="left").select(
        *ml_cols,
        "_cur",
        first["name"].alias("slowest_cursor_name"),
        first["kind"].alias("slowest_cursor_kind"),
        first["md"].alias("slowest_mark_delete_position"),
        F.coalesce(second["key"] == first["key"], F.lit(False)).alias("slowest_cursor_tie"),
        second["name"].alias("next_slowest_cursor_name"),
        second["md"].alias("next_slowest_mark_delete_position"),
        target.alias("pin_target_position"),
        first["key"].alias("_slow"),
        *rule_names,
    )

    # one row per listed ledger: trimmable now / trimmable once the slowest cursor reached the target
    led = ledgers.where(F.col("ledger_id").isNotNull()).select(
        *keys,
        F.col("ledger_id").cast("long").alias("_lid"),
        F.coalesce(F.col("entries").cast("long"), F.lit(0).cast("long")).alias("_ent"),
        F.coalesce(F.col("size_bytes").cast("long"), F.lit(0).cast("long")).alias("_sz"),
    )
    rows = led.join(
        topics.select(*keys, "_cur", "_slow", "pin_target_position", *rule_names), on=keys, how="inner"
    )
    rows = rows.select(
        "*",
        # the broker's currentLedger: the open ledger, else the last (closed) ledger (module docstring)
        F.coalesce(F.col("_cur"), F.max("_lid").over(Window.partitionBy(*keys))).alias("_prot"),
    )
    lid, ent, prot = F.col("_lid"), F.col("_ent"), F.col("_prot")
    before_current = F.coalesce(lid < prot, F.lit(False))
    has_durable = F.col("_slow").isNotNull()
    now = before_current & (~has_durable | _below(lid, ent, F.col("_slow"), prot, last_entry_rule))
    at_target = (
        before_current & has_durable & _below(lid, ent, F.col("pin_target_position"), prot, last_entry_rule)
    )
    flagged = rows.select(*keys, lid, F.col("_sz"), now.alias("_now"), (at_target & ~now).alias("_pin"))
    per_topic = flagged.groupBy(*keys).agg(
        F.sum(F.col("_now").cast("long")).alias("trimmable_now_ledgers"),
        F.sum(F.when(F.col("_now"), F.col("_sz"))).alias("trimmable_now_bytes"),
        F.array_sort(F.collect_list(F.when(F.col("_now"), lid))).alias("trimmable_now_ledger_ids"),
        F.min(F.when(~F.col("_now"), lid)).alias("trim_boundary_ledger_id"),
        F.sum(F.col("_pin").cast("long")).alias("pinned_ledgers"),
        F.sum(F.when(F.col("_pin"), F.col("_sz"))).alias("pinned_bytes"),
        F.array_sort(F.collect_list(F.when(F.col("_pin"), lid))).alias("pinned_ledger_ids"),
    )
    zero = F.lit(0).cast("long")
    empty = F.array().cast("array<bigint>")
    out = topics.join(per_topic, on=keys, how="left")
    return out.select(
        *ml_cols,
        "slowest_cursor_name",
        "slowest_cursor_kind",
        "slowest_mark_delete_position",
        "slowest_cursor_tie",
        "next_slowest_cursor_name",
        "next_slowest_mark_delete_position",
        "pin_target_position",
        "trim_boundary_ledger_id",
        F.coalesce(F.col("pinned_ledgers"), zero).alias("pinned_ledgers"),
        F.coalesce(F.col("pinned_bytes"), zero).alias("pinned_bytes"),
        F.coalesce(F.col("pinned_ledger_ids"), empty).alias("pinned_ledger_ids"),
        F.array_min(F.col("pinned_ledger_ids")).alias("oldest_pinned_ledger_id"),
        F.coalesce(F.col("trimmable_now_ledgers"), zero).alias("trimmable_now_ledgers"),
        F.coalesce(F.col("trimmable_now_bytes"), zero).alias("trimmable_now_bytes"),
        F.coalesce(F.col("trimmable_now_ledger_ids"), empty).alias("trimmable_now_ledger_ids"),
    )


# --- unmoved cursors ---------------------------------------------------------------------------------------


def _export_key(a: DataFrame, b: DataFrame | None = None) -> str:
    """``export_id`` when the inputs carry it, else ``export_date`` (one export per date)."""
    frames = [a] if b is None else [a, b]
    if all(EXPORT_ID in df.columns for df in frames):
        return EXPORT_ID
    for df in frames:
        if EXPORT_DATE not in df.columns:
            raise ContractError(
                f"unmoved_cursors needs {EXPORT_DATE!r} (and preferably {EXPORT_ID!r}) on every history "
                f"input; got columns {df.columns}. Read the tables across several export dates, with their "
                "partition column."
            )
    return EXPORT_DATE


def unmoved_cursors(
    cursor_history: DataFrame,
    managed_ledger_history: DataFrame | None = None,
    min_exports: int = 2,
) -> DataFrame:
    """Cursors whose mark-delete position is the same in their last ``k >= min_exports`` consecutive exports.

    One row per ``(cluster, topic, cursor_name)`` that qualifies. The topic's exports (those where the topic
    exists: its managed-ledger rows when ``managed_ledger_history`` is given, else the exports where the topic
    has any cursor row) are ordered by ``export_date`` then ``export_id``; a run of the cursor is a sequence
    of consecutive topic exports in which the cursor is listed with an identical ``mark_delete_position``
    (null equals null). An export of the topic without the cursor breaks the run (the subscription was
    deleted and recreated). The cursor's last run is reported when it spans ``k >= min_exports`` exports:

    ``cursor_kind``, ``is_durable`` (from the last export, null when the input lacks them),
    ``mark_delete_position``, ``unmoved_since_export_date`` (first export of the run), ``last_export_date``,
    ``unmoved_exports`` (k), ``present_in_latest_export`` (the run ends at the topic's latest export: the
    cursor still exists and is still stuck), ``lac_at_unmoved_since`` / ``lac_at_last_export`` and
    ``topic_advanced`` (LAC differs between the first and last export of the run: producers wrote while the
    cursor stood still - a stuck consumer rather than an idle topic). The last three are null without
    ``managed_ledger_history``. Cursor rows of exports where the managed-ledger history has no row for the
    topic are ignored. Pure and lazy (window functions, no driver loop).
    """
    if min_exports < 1:
        raise ValueError(
            f"min_exports must be >= 1, got {min_exports}; use 2 or more to find unmoved cursors."
        )
    export_key = _export_key(cursor_history, managed_ledger_history)
    topic_keys = [*KEY, export_key]
    cursor_cols = cursor_history.columns
    opt = {
        name: (F.col(name) if name in cursor_cols else F.lit(None)).cast(dtype)
        for name, dtype in (("cursor_kind", "string"), ("is_durable", "boolean"))
    }
    history = cursor_history.repartition(*[F.col(k) for k in KEY]).select(
        *topic_keys,
        *([] if export_key == EXPORT_DATE else [F.col(EXPORT_DATE)]),
        F.col("cursor_name"),
        as_position(F.col("mark_delete_position")).alias("_md"),
        opt["cursor_kind"].alias("cursor_kind"),
        opt["is_durable"].alias("is_durable"),
    )
    date_cols = [] if export_key == EXPORT_DATE else [EXPORT_DATE]
    if managed_ledger_history is not None:
        exports = managed_ledger_history.select(
            *topic_keys, *date_cols, as_position(F.col("last_confirmed_entry")).alias("_lac")
        ).dropDuplicates(topic_keys)
    else:
        exports = history.select(*topic_keys, *date_cols).dropDuplicates(topic_keys)
        exports = exports.select("*", F.lit(None).cast(history.schema["_md"].dataType).alias("_lac"))
    order = [F.col(EXPORT_DATE), F.col(export_key)] if export_key != EXPORT_DATE else [F.col(EXPORT_DATE)]
    exports = exports.select(
        "*",
        F.row_number().over(Window.partitionBy(*KEY).orderBy(*order)).alias("_t"),
        F.count(F.lit(1)).over(Window.partitionBy(*KEY)).alias("_t_last"),
    )
    rows = history.drop(*date_cols).join(exports, on=topic_keys, how="inner")

    per_cursor = Window.partitionBy(*KEY, "cursor_name").orderBy("_t")
    new_run = (
        F.lag("_t").over(per_cursor).isNull()
        | (F.lag("_t").over(per_cursor) != F.col("_t") - 1)
        | ~F.lag("_md").over(per_cursor).eqNullSafe(F.col("_md"))
    )
    runs = rows.select("*", new_run.cast("int").alias("_new"))
    runs = runs.select("*", F.sum("_new").over(per_cursor).alias("_run"))
    runs = runs.select("*", F.max("_run").over(Window.partitionBy(*KEY, "cursor_name")).alias("_last_run"))
    last = runs.where(F.col("_run") == F.col("_last_run"))
    by_t = F.struct(F.col("_t"), F.col(EXPORT_DATE), F.col("_lac"), F.col("cursor_kind"), F.col("is_durable"))
    agg = last.groupBy(*KEY, "cursor_name").agg(
        F.count(F.lit(1)).alias("unmoved_exports"),
        F.min(by_t).alias("_first"),
        F.max(by_t).alias("_final"),
        F.first("_md").alias("mark_delete_position"),
        F.max("_t_last").alias("_t_last"),
    )
    lac_first, lac_final = F.col("_first._lac"), F.col("_final._lac")
    advanced = F.when(lac_first.isNotNull() | lac_final.isNotNull(), ~lac_first.eqNullSafe(lac_final))
    return agg.where(F.col("unmoved_exports") >= F.lit(min_exports)).select(
        *KEY,
        "cursor_name",
        F.col("_final.cursor_kind").alias("cursor_kind"),
        F.col("_final.is_durable").alias("is_durable"),
        "mark_delete_position",
        F.col(f"_first.{EXPORT_DATE}").alias("unmoved_since_export_date"),
        F.col(f"_final.{EXPORT_DATE}").alias("last_export_date"),
        F.col("unmoved_exports").cast("int").alias("unmoved_exports"),
        (F.col("_final._t") == F.col("_t_last")).alias("present_in_latest_export"),
        lac_first.alias("lac_at_unmoved_since"),
        lac_final.alias("lac_at_last_export"),
        advanced.alias("topic_advanced"),
    )
