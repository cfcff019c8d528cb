"""The ingestion pipeline: an export folder in, the input Delta tables out (DESIGN.md "Dataflow").

Driver-side orchestration only: the export is listed on the driver, every file is read and parsed
on the executors (``binaryFile`` + ``mapInPandas`` for the JSON kinds, ``text`` + ``mapInArrow``
for entry dumps), merged with joins, conformed to the contracts of ``schemas/`` and written with
one :meth:`DeltaTables.write_all` (all tables or none move to a new version). Every record read is
either accepted or quarantined with a reason; the accounting ``rows in = accepted + quarantined``
is checked per source before anything is written.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import logging
import re
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_model import __version__
from pulsar_model.errors import PulsarAnalyticsError
from pulsar_model.ingest.coverage import with_entry_coverage
from pulsar_model.ingest.entries import (
    ENTRY_KINDS,
    decode_lines,
    decoded_arrow_schema,
    normalise_path,
    strip_scheme,
)
from pulsar_model.ingest.layout import ExportInventory, discover
from pulsar_model.ingest.parsers.common import NOTE_TEXT
from pulsar_model.tables.contracts import conform, contract, parse_type
from pulsar_model.tables.delta_io import DeltaTables, TableWrite

log = logging.getLogger(__name__)

#: Input tables written by ingestion, in write order.
INPUT_TABLES: tuple[str, ...] = (
    "managed_ledgers",
    "ledgers",
    "cursors",
    "entries",
    "messages",
    "markers",
    "backlog_quotas",
    "consumers",
    "schema_versions",
    "quarantine",
    "ingest_notes",
)
_EXPORT_COLS = ("export_id", "export_date", "exported_at", "pulsar_version")
_JSON_KINDS = ("stats-internal", "stats", "backlog-quotas", "consumers", "schemas")
_TS_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX"

#: Intermediate (not stored) tables produced by the stats and client-config parsers.
_INTERMEDIATE_DDL: dict[str, str] = {
    "subscription_stats": (
        "struct<cluster:string,topic:string,cursor_name:string,subscription_type:string,is_durable:boolean,"
        "is_replicated:boolean,stats_msg_backlog:bigint,stats_backlog_size_bytes:bigint,"
        "stats_active_consumer_name:string,stats_consumer_count:int,stats_last_mark_delete_advanced_at:timestamp>"
    ),
    "topic_stats": (
        "struct<cluster:string,topic:string,stats_storage_size_bytes:bigint,stats_backlog_size_bytes:bigint,"
        "stats_msg_in_counter:bigint,stats_publishers:int,stats_backlog_quota_limit_size_bytes:bigint,"
        "stats_backlog_quota_limit_time_seconds:bigint,stats_oldest_backlog_message_age_seconds:bigint,"
        "stats_deduplication_status:string,stats_replication:array<struct<remote_cluster:string,"
        "replication_backlog:bigint,connected:boolean,replication_delay_seconds:bigint,msg_rate_out:double>>>"
    ),
    "stats_consumers": (
        "struct<cluster:string,topic:string,subscription:string,subscription_type:string,consumer_name:string,"
        "connect_order:int,address:string,connected_since:string,client_version:string,"
        "available_permits:bigint,unacked_messages:bigint,is_active_in_stats:boolean>"
    ),
    "client_consumers": (
        "struct<cluster:string,topic:string,subscription:string,subscription_type:string,consumer_name:string,"
        "priority_level:int,listed_order:int>"
    ),
}
#: Which parsed table identifies a topic record of each kind (for duplicate-topic detection).
_TOPIC_TABLE = {
    "stats-internal": "managed_ledgers",
    "stats": "topic_stats",
    "schemas": "schema_versions",
    "consumers": "client_consumers",
}


@dataclass(frozen=True)
class IngestResult:
    """What one ingestion did (also stored as a ``run_log`` row)."""

    run_id: str
    export_id: str
    export_date: dt.date
    rows_in: dict[str, int]
    rows_accepted: dict[str, int]
    rows_quarantined: dict[str, int]
    rows_out: dict[str, int]
    table_versions: dict[str, int]
    #: Accepted records per source that carry at least one parser note (``ingest_notes``).
    rows_noted: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0


class AccountingError(PulsarAnalyticsError):
    """rows in != accepted + quarantined for a source: a bug, never written."""


def _parse_schema(table: str) -> T.StructType:
    if table in _INTERMEDIATE_DDL:
        parsed = parse_type(_INTERMEDIATE_DDL[table])
        assert isinstance(parsed, T.StructType)
        return parsed
    fields = [
        T.StructField(c.name, c.data_type, True)
        for c in contract(table).columns
        if c.name not in _EXPORT_COLS
    ]
    return T.StructType(fields)


def _json_default(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") + "+00:00"
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    raise TypeError(f"cannot serialise {type(value).__name__}")


_PARSED_SCHEMA = T.StructType(
    [
        T.StructField("table", T.StringType(), False),
        T.StructField("record_key", T.StringType(), False),
        T.StructField("row_json", T.StringType(), False),
    ]
)


def _parse_files(
    frames: Iterable[pd.DataFrame], files: Mapping[str, tuple[str, str, str, str | None]]
) -> Iterator[pd.DataFrame]:
    """mapInPandas body for the JSON kinds: file contents -> (table, record_key, row_json) rows."""
    from pulsar_model.ingest.parsers import RecordContext, parse_consumers_csv, parse_file, parse_jsonl_line

    for frame in frames:
        out: tuple[list[str], list[str], list[str]] = ([], [], [])

        def emit(table: str, key: str, row: Mapping[str, Any], out: tuple[list[str], ...] = out) -> None:
            out[0].append(table)
            out[1].append(key)
            out[2].append(json.dumps(row, default=_json_default, ensure_ascii=False))

        for path, content in zip(frame["path"], frame["content"], strict=True):
            # binaryFile reports the raw path: match it exactly first (a %-decoded match could name a
            # different file, e.g. "a%62.json" decodes to the sibling "ab.json").
            cluster, kind, relative, hint = files.get(strip_scheme(path)) or files[normalise_path(path)]
            data = bytes(content)
            calls: list[tuple[str, Any]] = []
            if kind == "consumers" and relative.lower().endswith(".csv"):
                ctx = RecordContext(cluster, kind, relative, "file", hint)
                calls.append((f"{relative}#000000000", parse_consumers_csv(data, ctx)))
            elif relative.lower().endswith((".jsonl", ".ndjson")):
                for number, line in enumerate(data.split(b"\n"), start=1):
                    if not line.strip():
                        continue
                    ctx = RecordContext(cluster, kind, relative, f"line {number}", None)
                    calls.append((f"{relative}#{number:09d}", parse_jsonl_line(kind, line, ctx)))
            else:
                ctx = RecordContext(cluster, kind, relative, "file", hint)
                calls.append((f"{relative}#000000000", parse_file(kind, data, ctx)))
            for key, result in calls:
                topics: set[str] = set()
                for table, rows in result.rows.items():
                    for row in rows:
                        emit(table, key, row)
                        if isinstance(row.get("topic"), str):
                            topics.add(row["topic"])
                for row in result.quarantine:
                    emit("quarantine", key, row)
                emit(
                    "_counts",
                    key,
                    {
                        "cluster": cluster,
                        "topic": next(iter(topics)) if len(topics) == 1 else None,
                        "source": kind,
                        "records_in": result.records_in,
                        "records_accepted": result.records_accepted,
                        "records_quarantined": result.records_quarantined,
                        "notes": result.notes,
                    },
                )
        yield pd.DataFrame({"table": out[0], "record_key": out[1], "row_json": out[2]})


_COUNTS_SCHEMA: T.StructType = parse_type(  # type: ignore[assignment]
    "struct<cluster:string,topic:string,source:string,records_in:bigint,records_accepted:bigint,"
    "records_quarantined:bigint,notes:map<string,bigint>>"
)


class _Parsed:
    """The parsed JSON kinds, one lazily-selected DataFrame per (intermediate) table."""

    def __init__(self, parsed: DataFrame) -> None:
        self.parsed = parsed

    def table(self, name: str) -> DataFrame:
        schema = _COUNTS_SCHEMA if name == "_counts" else _parse_schema(name)
        mine = F.col("table") == name
        # Guarded: the optimizer may push a later filter on a parsed field below this projection and
        # evaluate it before ``mine`` (seen: a filter on _counts.notes ran FAILFAST parsing on stats rows).
        parsed = F.when(
            mine, F.from_json("row_json", schema, {"timestampFormat": _TS_FORMAT, "mode": "FAILFAST"})
        )
        return (
            self.parsed.where(mine).select(F.col("record_key"), parsed.alias("r")).select("record_key", "r.*")
        )


def _duplicate_topics(
    frames: Mapping[str, DataFrame], keep: Callable[[DataFrame], DataFrame]
) -> tuple[dict[str, DataFrame], list[DataFrame]]:
    """Keep the first record per (cluster, topic) and kind; quarantine the others (whole record).

    The losing records of every kind come from one window over the records' identities, kept (``keep``)
    because every table of a kind and the accounting read them."""
    kept = dict(frames)
    quarantined: list[DataFrame] = []
    kind_tables = {
        "stats-internal": ["managed_ledgers", "ledgers", "cursors"],
        "stats": ["topic_stats", "subscription_stats", "stats_consumers"],
        "schemas": ["schema_versions"],
        "consumers": ["client_consumers"],
    }
    identities = functools.reduce(
        DataFrame.unionByName,
        [
            frames[_TOPIC_TABLE[kind]].select(F.lit(kind).alias("kind"), "cluster", "topic", "record_key")
            for kind in kind_tables
        ],
    ).distinct()
    all_losers = keep(
        identities.select(
            "*", F.min("record_key").over(Window.partitionBy("kind", "cluster", "topic")).alias("winner_key")
        ).where(F.col("record_key") != F.col("winner_key"))
    )
    for kind, tables in kind_tables.items():
        losers = all_losers.where(F.col("kind") == kind).drop("kind")
        loser_keys = losers.select("cluster", "topic", "record_key")
        for table in tables:
            kept[table] = kept[table].join(loser_keys, ["cluster", "topic", "record_key"], "left_anti")
        locator = F.concat(F.lit("record "), F.split("record_key", "#").getItem(1).cast("int").cast("string"))
        if kind == "consumers":
            # Each row of a CSV file is a record of its own (all share the file's key): one quarantine
            # row per dropped CSV row, or the accounting would lose all but one of them.
            is_csv = F.lower("record_key").contains(".csv#")
            csv_rows = frames["client_consumers"].select(
                "cluster", "topic", "record_key", "consumer_name", "subscription"
            )
            losers = (
                losers.where(is_csv)
                .join(csv_rows, ["cluster", "topic", "record_key"])
                .unionByName(
                    losers.where(~is_csv).withColumns(
                        {name: F.lit(None).cast("string") for name in ("consumer_name", "subscription")}
                    )
                )
            )
            locator = F.when(
                F.col("consumer_name").isNotNull(),
                F.concat(
                    F.lit("row of consumer "),
                    "consumer_name",
                    F.lit(" (subscription "),
                    "subscription",
                    F.lit(")"),
                ),
            ).otherwise(locator)
        quarantined.append(
            losers.select(
                "cluster",
                "topic",
                F.lit(kind).alias("source"),
                F.split("record_key", "#").getItem(0).alias("source_file"),
                locator.alias("record_locator"),
                F.lit("duplicate_topic").alias("reason_code"),
                F.concat(
                    F.lit(f"topic exported twice in one export ({kind}); kept the record in "),
                    F.split("winner_key", "#").getItem(0),
                    F.lit(", ignored this one: export each topic once per kind"),
                ).alias("reason"),
                F.lit(None).cast("string").alias("record_excerpt"),
            )
        )
    return kept, quarantined


def _parser_locator(number: Column) -> Column:
    """The record locator the parsers write: ``file`` for a whole file, ``line N`` for a JSON Lines record."""
    return F.when(number == 0, F.lit("file")).otherwise(F.concat(F.lit("line "), number.cast("string")))


def _duplicate_quotas(
    frames: Mapping[str, DataFrame], keep: Callable[[DataFrame], DataFrame]
) -> tuple[dict[str, DataFrame], DataFrame]:
    """Keep the first backlog-quota record per (cluster, level, scope); quarantine the others (whole record).

    A scope's policies are one map in Pulsar (``get-backlog-quotas`` returns all quota types at once), so a
    second record for the same broker, namespace or topic in one export is a duplicate whose limits may
    conflict with the first (the table's key is ``cluster, level, scope, quota_type``).
    """
    kept = dict(frames)
    identity = frames["backlog_quotas"].select("cluster", "level", "scope", "record_key").distinct()
    ranked = identity.select(
        "*", F.min("record_key").over(Window.partitionBy("cluster", "level", "scope")).alias("winner_key")
    )
    losers = keep(ranked.where(F.col("record_key") != F.col("winner_key")))
    kept["backlog_quotas"] = frames["backlog_quotas"].join(
        losers.select("cluster", "level", "scope", "record_key"),
        ["cluster", "level", "scope", "record_key"],
        "left_anti",
    )
    quarantined = losers.select(
        "cluster",
        F.when(F.col("level") == "topic", F.col("scope")).alias("topic"),
        F.lit("backlog-quotas").alias("source"),
        F.split("record_key", "#").getItem(0).alias("source_file"),
        _parser_locator(F.split("record_key", "#").getItem(1).cast("int")).alias("record_locator"),
        F.lit("duplicate_quota").alias("reason_code"),
        F.concat(
            F.lit("backlog quotas of "),
            F.col("level"),
            F.lit(" "),
            F.col("scope"),
            F.lit(" exported twice in one export; kept the record in "),
            F.split("winner_key", "#").getItem(0),
            F.lit(", ignored this one: export each broker, namespace and topic policy once"),
        ).alias("reason"),
        F.lit(None).cast("string").alias("record_excerpt"),
    )
    return kept, quarantined


def _stats_without_internal(
    frames: Mapping[str, DataFrame], keep: Callable[[DataFrame], DataFrame]
) -> tuple[dict[str, DataFrame], DataFrame, DataFrame]:
    """Quarantine the ``stats`` of topics that have no ``stats-internal`` row (one quarantine row per topic).

    A topic's stats are stored by joining them onto its stats-internal rows (``managed_ledgers``,
    ``cursors``); without those nothing but its consumers could be kept, so "accepted" would not mean
    "stored". Each partition of a partitioned stats record is a record of its own in the accounting, so a
    topic is the unit here too. The reason says whether the topic's stats-internal record was quarantined,
    absent from the export, or cannot exist (a non-persistent topic has no managed ledger).

    A stored topic's subscription whose cursor stats-internal does not list (created or deleted between
    the two admin calls) cannot be stored either: the third frame holds one ``ingest_notes`` row for each.
    """
    kept = dict(frames)
    internal = frames["managed_ledgers"].select("cluster", "topic").distinct()
    internal_quarantined = (
        frames["quarantine"]
        .where((F.col("source") == "stats-internal") & F.col("topic").isNotNull())
        .select("cluster", "topic", F.lit(True).alias("_internal_quarantined"))
        .distinct()
    )
    orphans = keep(
        frames["topic_stats"]
        .select("cluster", "topic", "record_key")
        .distinct()
        .join(internal, ["cluster", "topic"], "left_anti")
    )
    for table in ("topic_stats", "subscription_stats", "stats_consumers"):
        kept[table] = kept[table].join(orphans, ["cluster", "topic", "record_key"], "left_anti")
    why = (
        F.when(
            F.col("topic").startswith("non-persistent://"),
            F.lit(
                "stats of a non-persistent topic: it has no managed ledger (no stats-internal), and the "
                "analyses cover persistent topics only; nothing of the record is stored"
            ),
        )
        .when(
            F.col("_internal_quarantined"),
            F.lit(
                "the topic's stats-internal record was quarantined (see the quarantine rows of source "
                "stats-internal for this topic), and its stats are stored only beside it; fix that record "
                "and re-ingest"
            ),
        )
        .otherwise(
            F.lit(
                "no stats-internal record for this topic in the export (the stats-internal call failed or "
                "was filtered out), and its stats are stored only beside it; export `topics "
                "stats-internal` for the topic too and re-ingest"
            )
        )
    )
    quarantined = orphans.join(internal_quarantined, ["cluster", "topic"], "left").select(
        "cluster",
        "topic",
        F.lit("stats").alias("source"),
        F.split("record_key", "#").getItem(0).alias("source_file"),
        F.concat(
            _parser_locator(F.split("record_key", "#").getItem(1).cast("int")), F.lit(" topic "), "topic"
        ).alias("record_locator"),
        F.lit("stats_without_stats_internal").alias("reason_code"),
        why.alias("reason"),
        F.lit(None).cast("string").alias("record_excerpt"),
    )
    sub_key = ["cluster", "topic", "cursor_name"]
    cursor_keys = frames["cursors"].select(*sub_key).distinct()
    subscription_notes = (
        kept["subscription_stats"]
        .select(*sub_key, "record_key", "is_durable")
        .join(cursor_keys, sub_key, "left_anti")
        .select(
            "cluster",
            "topic",
            F.lit("stats").alias("source"),
            F.split("record_key", "#").getItem(0).alias("source_file"),
            _parser_locator(F.split("record_key", "#").getItem(1).cast("int")).alias("record_locator"),
            F.lit("subscription_without_cursor").alias("note_code"),
            F.col("cursor_name").alias("note_subject"),
            F.concat(
                F.when(
                    F.col("is_durable") == F.lit(False), F.lit("non-durable (reader) subscription ")
                ).otherwise(F.lit("subscription ")),
                "cursor_name",
                F.when(
                    F.col("is_durable") == F.lit(False),
                    F.lit(" is in stats, and stats-internal lists no cursor for it"),
                ).otherwise(
                    F.lit(
                        " is in stats but stats-internal lists no cursor for it (created or deleted between "
                        "the two admin calls)"
                    )
                ),
                F.lit("; its subscription stats were not stored"),
            ).alias("note"),
            F.lit(1).cast("bigint").alias("occurrences"),
        )
    )
    return kept, quarantined, subscription_notes


def _ingest_notes(counts_json: DataFrame) -> DataFrame:
    """One ``ingest_notes`` row per (record, note key) from the parsers' per-record note counters."""
    text = F.create_map(*[F.lit(x) for code, template in sorted(NOTE_TEXT.items()) for x in (code, template)])
    exploded = counts_json.select(
        "cluster",
        "topic",
        "source",
        "record_key",
        F.explode("notes").alias("_key", "occurrences"),
    )
    code = F.split("_key", ":", 2).getItem(0)
    subject = F.when(F.col("_key").contains(":"), F.expr("substr(_key, instr(_key, ':') + 1)"))
    template = F.coalesce(text[code], F.lit("{subject}"))
    return exploded.select(
        "cluster",
        "topic",
        "source",
        F.split("record_key", "#").getItem(0).alias("source_file"),
        _parser_locator(F.split("record_key", "#").getItem(1).cast("int")).alias("record_locator"),
        code.alias("note_code"),
        subject.alias("note_subject"),
        F.replace(template, F.lit("{subject}"), F.coalesce(subject, F.lit(""))).alias("note"),
        F.col("occurrences").cast("bigint").alias("occurrences"),
    )


def _with_export(df: DataFrame, inv: ExportInventory, versions: Mapping[str, str]) -> DataFrame:
    """Add the export identity columns (id, date, time) and the cluster's Pulsar version."""
    pairs = [x for c, v in sorted(versions.items()) for x in (F.lit(c), F.lit(v))]
    version = F.create_map(*pairs)[F.col("cluster")] if pairs else F.lit(None).cast("string")
    return df.withColumns(
        {
            "export_id": F.lit(inv.export_id),
            "export_date": F.lit(inv.export_date),
            "exported_at": F.lit(inv.exported_at),
            "pulsar_version": version,
        }
    )


def _merge_cursors(cursors: DataFrame, sub_stats: DataFrame, topic_stats: DataFrame) -> DataFrame:
    stats = sub_stats.drop("record_key").withColumnsRenamed(
        {"is_durable": "stats_is_durable", "is_replicated": "stats_is_replicated"}
    )
    replication = topic_stats.select("cluster", "topic", F.explode("stats_replication").alias("rep")).select(
        "cluster",
        "topic",
        F.col("rep.remote_cluster").alias("replicator_remote_cluster"),
        F.col("rep.replication_backlog").alias("stats_replication_backlog"),
        F.col("rep.connected").alias("stats_replicator_connected"),
    )
    merged = (
        cursors.drop(
            "subscription_type",
            "stats_msg_backlog",
            "stats_backlog_size_bytes",
            "stats_active_consumer_name",
            "stats_consumer_count",
            "stats_last_mark_delete_advanced_at",
            "stats_replication_backlog",
            "stats_replicator_connected",
        )
        .join(stats, ["cluster", "topic", "cursor_name"], "left")
        .join(replication, ["cluster", "topic", "replicator_remote_cluster"], "left")
    )
    return merged.withColumns(
        {
            # stats know durability; stats-internal alone infers it from the cursor name (readers).
            "is_durable": F.coalesce("stats_is_durable", "is_durable"),
            "is_replicated": F.coalesce("stats_is_replicated", F.lit(False))
            | F.coalesce("is_replicated", F.lit(False)),
            "individually_deleted": F.coalesce("individually_deleted", F.array()),
        }
    )


def _merge_consumers(stats_consumers: DataFrame, client: DataFrame) -> DataFrame:
    """Stats give arrival order; client configs give priority levels (stats have none, docs §6.2).

    Every stats consumer is kept, with the priority level and subscription type of the client-config
    consumer of the same name and occurrence (the n-th stats consumer of a name by ``connect_order`` takes
    the n-th client one by ``listed_order``; keys must all be known to match). A subscription only a
    client config lists (no stats consumer under its known keys) keeps the client's consumers, its listed
    order standing in for arrival order. Both inputs go through one distribution by subscription: the
    windows and the per-occurrence match are partitioned by it or by a superset of it.
    """
    keys = ["cluster", "topic", "subscription", "consumer_name"]
    # what only stats know, passed through as it is
    stats_only = [
        "address",
        "connected_since",
        "client_version",
        "available_permits",
        "unacked_messages",
        "is_active_in_stats",
    ]
    stats_columns = ["subscription_type", "connect_order", *stats_only]
    client_columns = {
        "subscription_type": "_client_type",
        "priority_level": "_priority",
        "listed_order": "_listed",
    }
    both = stats_consumers.select(*keys, F.lit(True).alias("_stats"), *stats_columns).unionByName(
        client.select(
            *keys, F.lit(False).alias("_stats"), *[F.col(c).alias(a) for c, a in client_columns.items()]
        ),
        allowMissingColumns=True,
    )
    subscription = Window.partitionBy("cluster", "topic", "subscription")
    occurrence = Window.partitionBy(*keys, "_stats").orderBy(
        F.when(F.col("_stats"), F.col("connect_order")).otherwise(F.col("_listed"))
    )
    ranked = both.select(
        "*",
        F.max(F.col("_stats").cast("int")).over(subscription).alias("_has_stats"),
        F.row_number().over(occurrence).alias("_occurrence"),
    )
    # the client consumer of the same name and occurrence, as an equality join on all keys would find it
    known = F.lit(True)
    for k in keys:
        known = known & F.col(k).isNotNull()
    client_values = F.struct(F.col("_client_type").alias("t"), F.col("_priority").alias("p"))
    matched = F.max(F.when(~F.col("_stats"), client_values)).over(Window.partitionBy(*keys, "_occurrence"))
    paired = ranked.select("*", F.when(known, matched).alias("_client"))
    subscription_known = F.col("cluster").isNotNull() & F.col("topic").isNotNull()
    subscription_known = subscription_known & F.col("subscription").isNotNull()
    kept = paired.where(F.col("_stats") | ~subscription_known | (F.col("_has_stats") == 0))
    stats = F.col("_stats")
    priority = F.when(stats, F.col("_client.p")).otherwise(F.col("_priority"))
    return kept.select(
        "cluster",
        "topic",
        "subscription",
        F.when(stats, F.coalesce("subscription_type", "_client.t"))
        .otherwise(F.col("_client_type"))
        .alias("subscription_type"),
        "consumer_name",
        F.coalesce(priority, F.lit(0)).alias("priority_level"),
        F.when(stats, F.col("connect_order")).otherwise(F.col("_listed")).alias("connect_order"),
        F.when(~stats | priority.isNotNull(), F.lit("client_config"))
        .otherwise(F.lit("default"))
        .alias("priority_source"),
        *stats_only,
    )


_GLOB_CHARS = re.compile(r"([\\\[\]{}*?])")


def _literal_path(path: str) -> str:
    """``path`` escaped so that Spark/Hadoop read exactly that file instead of expanding it as a glob
    (a file named ``orders[1].json`` or ``{a,b}.json`` would otherwise fail or match other files)."""
    return _GLOB_CHARS.sub(r"\\\1", path)


def _read_json_kinds(spark: SparkSession, inv: ExportInventory) -> DataFrame | None:
    files = [f for f in inv.files if f.kind in _JSON_KINDS]
    if not files:
        return None
    lookup = {f.path: (f.cluster, f.kind, f.relative_path, f.name_hint) for f in files}
    paths = [_literal_path(f.path) for f in files]
    raw = spark.read.format("binaryFile").load(paths).select("path", "content")
    parsed = raw.mapInPandas(lambda it: _parse_files(it, lookup), _PARSED_SCHEMA)
    # Spark reads no row from a 0-byte file; a per-topic file left empty by a failed export command
    # is still a record (quarantined, or for quotas an empty map): parse those on the driver.
    empty = [f.path for f in files if f.form != "jsonl" and Path(f.path).stat().st_size == 0]
    if empty:
        frame = pd.DataFrame({"path": empty, "content": [b""] * len(empty)})
        rows = pd.concat(list(_parse_files([frame], lookup)), ignore_index=True)
        parsed = parsed.unionByName(spark.createDataFrame(rows, _PARSED_SCHEMA))
    return parsed


def _read_entries(spark: SparkSession, inv: ExportInventory) -> DataFrame | None:
    files = [f for kind in ENTRY_KINDS for f in inv.files_of(kind)]
    if not files:
        return None
    lookup = {f.path: (f.cluster, f.relative_path, f.name_hint, f.kind) for f in files}
    lines = spark.read.text([_literal_path(f.path) for f in files]).select(
        "value",
        F.col("_metadata.file_path").alias("file_path"),
        F.col("_metadata.file_block_start").alias("block_start"),
    )
    from pyspark.sql.pandas.types import from_arrow_schema

    schema = from_arrow_schema(decoded_arrow_schema())
    return lines.mapInArrow(lambda it: decode_lines(it, lookup), schema)


def _empty(spark: SparkSession, table: str) -> DataFrame:
    return spark.createDataFrame([], _parse_schema(table)).withColumn(
        "record_key", F.lit(None).cast("string")
    )


def _layout_quarantine(spark: SparkSession, inv: ExportInventory) -> DataFrame:
    rows = [
        (
            None,
            None,
            "layout",
            text.rsplit(": ", 1)[0],  # reasons never hold ": ", file names may
            "file",
            "unsupported_file",
            text.rsplit(": ", 1)[-1] + ("" if "file ignored" in text else " — file ignored"),
            None,
        )
        for text in inv.skipped
    ]
    schema = (
        "cluster string, topic string, source string, source_file string, record_locator string, "
        "reason_code string, reason string, record_excerpt string"
    )
    return spark.createDataFrame(rows, schema)


def _tally(df: DataFrame, source: Column, accepted: Column) -> DataFrame:
    """Newly read records as count rows: one in, accepted (``accepted`` true) or quarantined (the rest).

    Count rows are summed per source once, over all of them (:func:`build_input_tables`): one shuffle
    for the whole accounting instead of one aggregation per part."""
    ok = F.when(accepted, 1).otherwise(0).cast("bigint")
    return df.select(
        source.alias("source"),
        F.lit(1).cast("bigint").alias("rows_in"),
        ok.alias("rows_accepted"),
        (1 - ok).alias("rows_quarantined"),
    )


def _reclassified(df: DataFrame) -> DataFrame:
    """Records first counted as accepted, then quarantined (duplicates), as count rows: accepted -1,
    quarantined +1."""
    return df.select(
        "source",
        F.lit(0).cast("bigint").alias("rows_in"),
        F.lit(-1).cast("bigint").alias("rows_accepted"),
        F.lit(1).cast("bigint").alias("rows_quarantined"),
    )


def build_input_tables(
    spark: SparkSession,
    inv: ExportInventory,
    *,
    run_id: str,
    versions: Mapping[str, str],
    cached: list[DataFrame] | None = None,
) -> tuple[dict[str, DataFrame], DataFrame]:
    """The input tables of one export as lazy DataFrames (conformed), plus the per-source counts.

    The counts DataFrame has one row per source to be collected by the caller. What every table and count
    reads is persisted: the parsed JSON records, the decisions taken over them (losing duplicates, stats
    without stats-internal) and the decoded entries ranked among their copies; they are appended to
    ``cached`` so that the caller unpersists them once the tables are written (a nightly runs
    its next stages in the same driver, whose storage memory they would otherwise hold).
    """

    def keep(df: DataFrame) -> DataFrame:
        kept = df.persist()
        if cached is not None:
            cached.append(kept)
        return kept

    json_parsed = _read_json_kinds(spark, inv)
    frames: dict[str, DataFrame] = {}
    if json_parsed is not None:
        json_parsed = keep(json_parsed)
        parsed = _Parsed(json_parsed)
        for table in (
            "managed_ledgers",
            "ledgers",
            "cursors",
            "backlog_quotas",
            "schema_versions",
            "quarantine",
            *_INTERMEDIATE_DDL,
        ):
            frames[table] = parsed.table(table)
        counts_json = parsed.table("_counts")
    else:
        for table in (
            "managed_ledgers",
            "ledgers",
            "cursors",
            "backlog_quotas",
            "schema_versions",
            "quarantine",
            *_INTERMEDIATE_DDL,
        ):
            frames[table] = _empty(spark, table)
        counts_json = spark.createDataFrame([], _COUNTS_SCHEMA).withColumn(
            "record_key", F.lit(None).cast("string")
        )

    frames, dup_quarantine = _duplicate_topics(frames, keep)
    frames, dup_quotas = _duplicate_quotas(frames, keep)
    dup_quarantine.append(dup_quotas)
    frames, stats_orphans, subscription_notes = _stats_without_internal(frames, keep)
    dup_quarantine.append(stats_orphans)
    frames["ingest_notes"] = (
        _ingest_notes(counts_json).unionByName(subscription_notes).withColumn("run_id", F.lit(run_id))
    )

    counts = counts_json.select(
        "source",
        F.col("records_in").alias("rows_in"),
        F.col("records_accepted").alias("rows_accepted"),
        F.col("records_quarantined").alias("rows_quarantined"),
    )
    for dq in dup_quarantine:
        counts = counts.unionByName(_reclassified(dq))

    quarantine_parts: list[DataFrame] = [frames["quarantine"].drop("record_key", "run_id"), *dup_quarantine]
    layout_q = _layout_quarantine(spark, inv)
    quarantine_parts.append(layout_q)
    counts = counts.unionByName(_tally(layout_q, F.col("source"), F.lit(False)))

    decoded = _read_entries(spark, inv)
    if decoded is not None:
        # Every entry table, the quarantine and the accounting read the entries ranked among the copies
        # of the same entry (the first copy is kept): the ranked rows are what is kept in memory, so the
        # ranking's shuffle runs once. Quarantined lines rank apart and are never "first".
        is_ok = F.col("status") == "ok"
        dup_w = Window.partitionBy(is_ok, "cluster", "topic", "ledger_id", "entry_id").orderBy(
            "source_file", "line_order"
        )
        ranked = keep(
            decoded.select(
                "*",
                F.row_number().over(dup_w).alias("rn"),
                F.first("data_crc32").over(dup_w).alias("first_crc32"),
                F.first("source_file").over(dup_w).alias("first_file"),
            )
        )
        decoded = ranked.drop("rn", "first_crc32", "first_file")
        ok_ranked = ranked.where(is_ok)
        first = ok_ranked.where(F.col("rn") == 1)
        dups = ok_ranked.where(F.col("rn") > 1).select(
            "cluster",
            "topic",
            F.lit("entries").alias("source"),
            "source_file",
            "record_locator",
            F.lit("duplicate_entry").alias("reason_code"),
            F.concat(
                F.lit("entry "),
                F.col("ledger_id").cast("string"),
                F.lit(":"),
                F.col("entry_id").cast("string"),
                F.when(
                    F.col("data_crc32") == F.col("first_crc32"), F.lit(" exported twice with identical bytes")
                ).otherwise(F.lit(" exported twice with DIFFERENT bytes")),
                F.lit("; kept the first copy (from "),
                F.col("first_file"),
                F.lit("); dump each entry once"),
            ).alias("reason"),
            F.lit(None).cast("string").alias("record_excerpt"),
        )
        bad = decoded.where(F.col("status") == "quarantine").select(
            "cluster",
            "topic",
            F.lit("entries").alias("source"),
            "source_file",
            "record_locator",
            "reason_code",
            "reason",
            "record_excerpt",
        )
        bad_markers = first.where(F.col("marker_error_code").isNotNull()).select(
            "cluster",
            "topic",
            F.lit("markers").alias("source"),
            "source_file",
            "record_locator",
            F.col("marker_error_code").alias("reason_code"),
            F.col("marker_error").alias("reason"),
            F.lit(None).cast("string").alias("record_excerpt"),
        )
        quarantine_parts.extend([bad, dups, bad_markers])
        counts = (
            counts.unionByName(_tally(decoded, F.lit("entries"), F.col("status") == "ok"))
            .unionByName(_reclassified(dups))
            .unionByName(
                _tally(
                    first.where(F.col("marker_type").isNotNull()),
                    F.lit("markers"),
                    F.col("marker_error_code").isNull(),
                )
            )
        )
        entries = first.drop("rn", "first_crc32", "first_file")
        frames["entries"] = entries
        frames["messages"] = (
            entries.select(
                "cluster",
                "topic",
                "ledger_id",
                "entry_id",
                F.col("marker_type"),
                "producer_name",
                "publish_time_ms",
                "txnid_most_bits",
                "txnid_least_bits",
                "replicated_from",
                F.explode("messages").alias("m"),
            )
            .select("*", "m.*")
            .drop("m")
        )
        frames["markers"] = entries.where(
            F.col("marker_type").isNotNull() & F.col("marker").isNotNull()
        ).select(
            "cluster",
            "topic",
            "ledger_id",
            "entry_id",
            "position",
            "marker_type",
            "publish_time_ms",
            "replicated_from",
            "replicate_to",
            "txnid_most_bits",
            "txnid_least_bits",
            "marker.*",
        )
    quarantine = quarantine_parts[0]
    for part in quarantine_parts[1:]:
        quarantine = quarantine.unionByName(part)
    frames["quarantine"] = quarantine.withColumn("run_id", F.lit(run_id))

    frames["cursors"] = _merge_cursors(frames["cursors"], frames["subscription_stats"], frames["topic_stats"])
    frames["managed_ledgers"] = (
        frames["managed_ledgers"]
        .drop(*[c for c in frames["topic_stats"].columns if c.startswith("stats_")])
        .join(frames["topic_stats"].drop("record_key"), ["cluster", "topic"], "left")
    )
    frames["managed_ledgers"] = with_entry_coverage(frames["managed_ledgers"], spark, inv.entry_coverage)
    frames["consumers"] = _merge_consumers(frames["stats_consumers"], frames["client_consumers"])

    outputs: dict[str, DataFrame] = {}
    for table in INPUT_TABLES:
        if table not in frames:
            outputs[table] = spark.createDataFrame([], contract(table).spark_schema)
            continue
        df = _with_export(frames[table], inv, versions)
        outputs[table] = conform(df, table)
    noted = (
        frames["ingest_notes"]
        .select("source", "source_file", "record_locator")
        .distinct()
        .groupBy("source")
        .agg(F.count(F.lit(1)).cast("bigint").alias("rows_noted"))
    )
    totals = counts.groupBy("source").agg(
        F.sum("rows_in").alias("rows_in"),
        F.sum("rows_accepted").alias("rows_accepted"),
        F.sum("rows_quarantined").alias("rows_quarantined"),
    )
    return outputs, totals.join(noted, "source", "left")


def ingest_export(
    spark: SparkSession,
    tables: DeltaTables,
    export_dir: str,
    *,
    cluster_versions: Mapping[str, str] | None = None,
    export_date: dt.date | None = None,
    run_id: str | None = None,
    job: str = "ingest",
    now: dt.datetime | None = None,
) -> IngestResult:
    """Ingest one export into the input tables; a rerun of the same export date replaces that date.

    ``cluster_versions``: the configured Pulsar version per cluster (``pulsar.cluster_versions``); the
    export's ``manifest.json`` versions win over it.
    """
    started = now or dt.datetime.now(dt.UTC)
    t0 = time.monotonic()
    run_id = run_id or f"ingest-{started:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"
    inv = discover(export_dir, export_date)
    versions = {**(cluster_versions or {}), **inv.cluster_versions}
    log.info(
        "ingest %s: export %s dated %s, %d files", run_id, inv.export_id, inv.export_date, len(inv.files)
    )
    spark.sparkContext.setJobDescription(f"ingest {inv.export_id}: parse and decode")
    cached: list[DataFrame] = []
    try:
        outputs, counts_df = build_input_tables(spark, inv, run_id=run_id, versions=versions, cached=cached)
        collected = counts_df.collect()
        counts = {
            r["source"]: (int(r["rows_in"]), int(r["rows_accepted"]), int(r["rows_quarantined"]))
            for r in collected
        }
        noted = {r["source"]: int(r["rows_noted"]) for r in collected if r["rows_noted"]}
        broken = {s: c for s, c in counts.items() if c[0] != c[1] + c[2]}
        if broken:
            raise AccountingError(
                "rows in != accepted + quarantined for "
                + ", ".join(f"{s}: {c[0]} != {c[1]} + {c[2]}" for s, c in sorted(broken.items()))
                + " — nothing was written; please report this as a bug with the export"
            )
        for table in outputs:
            c = contract(table)
            tables.create(table, c.spark_schema, c.partitioned_by, description=c.description)
        writes = [
            TableWrite(
                table=table,
                df=df,
                mode="replace_partitions",
                partition_values={"export_date": inv.export_date},
                partition_by=contract(table).partitioned_by,
            )
            for table, df in outputs.items()
        ]
        spark.sparkContext.setJobDescription(f"ingest {inv.export_id}: write input tables")
        versions_written = tables.write_all(writes)
        rows_out = {}
        for table in outputs:
            rows_out[table] = tables.count_rows(table, partition_filter={"export_date": inv.export_date})
    finally:
        for df in cached:
            df.unpersist()
    spark.sparkContext.setJobDescription(None)  # type: ignore[arg-type]
    result = IngestResult(
        run_id=run_id,
        export_id=inv.export_id,
        export_date=inv.export_date,
        rows_in={s: c[0] for s, c in counts.items()},
        rows_accepted={s: c[1] for s, c in counts.items()},
        rows_quarantined={s: c[2] for s, c in counts.items()},
        rows_out=rows_out,
        table_versions=versions_written,
        rows_noted=noted,
        seconds=time.monotonic() - t0,
    )
    log.info("ingest %s done in %.1fs: %s", run_id, result.seconds, rows_out)
    return result


def run_log_row(
    result: IngestResult,
    *,
    job: str,
    stage: str,
    started: dt.datetime,
    finished: dt.datetime,
    status: str = "succeeded",
    error: str | None = None,
    pulsar_version: str | None = None,
) -> dict[str, Any]:
    """A ``run_log`` row for an ingestion (also used for failures, with empty counts)."""
    return {
        "run_id": result.run_id,
        "job": job,
        "stage": stage,
        "run_date": result.export_date,
        "export_id": result.export_id,
        "started_at": started,
        "finished_at": finished,
        "status": status,
        "error": error,
        "rows_in": result.rows_in,
        "rows_accepted": result.rows_accepted,
        "rows_quarantined": result.rows_quarantined,
        "rows_noted": result.rows_noted,
        "rows_out": result.rows_out,
        "table_versions": result.table_versions,
        "pulsar_version": pulsar_version,
        "code_version": __version__,
    }


def append_run_log(spark: SparkSession, tables: DeltaTables, rows: Sequence[Mapping[str, Any]]) -> int:
    """Append rows to ``run_log``, creating it with its contract if needed.

    The run log outlives upgrades: a run log written under an older contract gets the columns added
    since (nullable; older rows read them as null) instead of refusing the append.
    """
    c = contract("run_log")
    if not tables.exists("run_log"):
        tables.create("run_log", c.spark_schema, c.partitioned_by, description=c.description)
    schema = c.spark_schema
    df = spark.createDataFrame([tuple(r.get(name) for name in schema.names) for r in rows], schema)
    return tables.append("run_log", df, allow_schema_change=True)
