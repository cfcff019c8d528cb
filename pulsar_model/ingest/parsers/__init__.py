"""Pure-Python parsers of real Apache Pulsar admin exports (docs §10; no Spark, executor-safe).

Entry points (none of them raises on bad data; every problem becomes a quarantine row):

* :func:`parse_file` - one per-topic file of a kind (one JSON document; a partitioned wrapper gives
  one record per partition);
* :func:`parse_jsonl_line` - one JSON Lines envelope ``{"cluster", "topic", "stats"}`` (quotas:
  ``"namespace"`` / ``"topic"`` / ``"broker": true``);
* :func:`parse_consumers_csv` - a CSV client-config export of consumers;
* value parsers :func:`parse_position`, :func:`parse_individually_deleted`, :func:`partition_index`,
  :func:`parse_timestamp` (these raise :class:`~pulsar_model.errors.ParseError`, except
  ``partition_index`` which returns -1).

Tables per kind (:data:`TABLES_BY_KIND`): stats-internal -> managed_ledgers, ledgers, cursors;
stats -> topic_stats, subscription_stats, stats_consumers; backlog-quotas -> backlog_quotas;
consumers -> client_consumers; schemas -> schema_versions. Rows carry ``cluster`` and ``topic`` and
no export columns.
"""

from __future__ import annotations

from typing import Final

from pulsar_model.domain.topic_names import partition_index, partitioned_topic_name
from pulsar_model.errors import ParseError
from pulsar_model.ingest.parsers.backlog_quotas import parse_backlog_quotas, parse_cli_text
from pulsar_model.ingest.parsers.common import (
    KINDS,
    REASON_CODES,
    TABLES_BY_KIND,
    UNKNOWN_KIND,
    KindSpec,
    ParseResult,
    Record,
    RecordContext,
    ResultBuilder,
    decode_cursor_name,
    decode_utf8,
    name_hint_from_file_name,
    parse_individually_deleted,
    parse_position,
    parse_timestamp,
    run_file,
    run_line,
    show,
)
from pulsar_model.ingest.parsers.consumers import parse_client_consumers, parse_consumers_csv
from pulsar_model.ingest.parsers.schemas import parse_schemas
from pulsar_model.ingest.parsers.stats import AGGREGATE_REASON, parse_stats
from pulsar_model.ingest.parsers.stats_internal import cursor_kind, parse_stats_internal

__all__ = [
    "KINDS",
    "REASON_CODES",
    "TABLES_BY_KIND",
    "ParseError",
    "ParseResult",
    "RecordContext",
    "cursor_kind",
    "decode_cursor_name",
    "name_hint_from_file_name",
    "parse_consumers_csv",
    "parse_file",
    "parse_individually_deleted",
    "parse_jsonl_line",
    "parse_position",
    "parse_timestamp",
    "partition_index",
    "partitioned_topic_name",
]

SPECS: Final = {
    spec.kind: spec
    for spec in (
        KindSpec("stats-internal", parse_stats_internal, partitioned=True),
        KindSpec("stats", parse_stats, partitioned=True, aggregate_reason=AGGREGATE_REASON),
        KindSpec("backlog-quotas", parse_backlog_quotas, topic_level=False, text_fallback=parse_cli_text),
        KindSpec("consumers", parse_client_consumers),
        KindSpec("schemas", parse_schemas, sequence_ok=True),
    )
}


def _unknown_kind(kind: str, data: bytes, ctx: RecordContext) -> ParseResult:
    builder = ResultBuilder(kind, ctx)
    record = Record(ctx, ctx.record_locator, decode_utf8(data).excerpt, topic=ctx.topic_hint)
    record.problem(UNKNOWN_KIND, f"kind {show(kind)} has no parser; use one of {', '.join(KINDS)}")
    builder.finish(record, None)
    return builder.result()


def parse_file(kind: str, data: bytes, ctx: RecordContext) -> ParseResult:
    """Parse one per-topic file of ``kind`` (topic from ``ctx.topic_hint``); never raises on data."""
    spec = SPECS.get(kind)
    if spec is None:
        return _unknown_kind(kind, data, ctx)
    return run_file(spec, data, ctx)


def parse_jsonl_line(kind: str, line: bytes, ctx: RecordContext) -> ParseResult:
    """Parse one JSON Lines envelope line of ``kind``; a blank line gives an empty result."""
    spec = SPECS.get(kind)
    if spec is None:
        return _unknown_kind(kind, line, ctx)
    return run_line(spec, line, ctx)
