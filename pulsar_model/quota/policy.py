"""Effective backlog quotas, breach detection and producer outcomes (docs §3.2-§3.5, §10.4, §11.9, §12.7).

Three transforms, pure and lazy, every step keyed on ``(cluster, topic)``:

* :func:`effective_quotas` - the quota the broker applies to each topic and quota type: topic-level
  policy (when topic policies are enabled) -> namespace ``backlog_quota_map[type]`` -> broker default
  from ``broker.conf`` -> the version's built-in defaults (docs §3.2), plus the broker's check settings;
* :func:`quota_breaches` - is each quota exceeded at export time, as the broker's periodic check
  (``BrokerService.monitorBacklogQuota``) and producer admission see it (docs §3.4), which type the
  periodic check handles, how close the topic is to its quota, and - given exact per-cursor backlogs -
  the same questions answered with exact data;
* :func:`producer_outcomes` - what producers experience (docs §3.3, §3.5): disconnected by the periodic
  check, and the error a new producer gets.

Version boundaries (evidence read with the project's search tool):

* time quotas (``message_age``, ``limitTime``, ``preciseTimeBasedBacklogQuotaCheck``): apache/pulsar
  PR #10093, first in 2.8.0. In 2.8.0 the broker still read the time limit and policy from the
  ``destination_storage`` quota (issue #11404); fixed by PR #11509 (release/2.8.1). Before 2.8.0 only the
  size quota exists (docs §3.4 "1.x/2.x: size only" describes these old copies).
* topic-level backlog quotas: PR #7646 (2.7.0).
* ``backlogQuotaDefaultLimitGB`` defaulted to 50 in 1.x/2.0 (docs §3.2); modelled as "before 2.1.0".
* the non-precise check's "md in the last ledger -> not exceeded" rule: PR #15663 (release/2.8.4,
  2.9.3, 2.10.1).
* the dedup-cursor special case of §3.5 (``advanceSlowestSystemCursor``): PR #20951 (Aug 2023): in the
  release tags v2.11.3, v3.0.2 and v3.2.0 and later, not in v2.10.6 nor any 3.1.x.
* system topics (docs §3.4 "both checks return false"): the broker creates a ``SystemTopic`` when
  ``BrokerService.isSystemTopic`` holds - the namespace is a system-service namespace (``pulsar/system``,
  heartbeat ``pulsar/<cluster>/<host:port>`` and ``pulsar/<host:port>``, SLA monitor
  ``sla-monitor/<cluster>/<host:port>``) or ``SystemTopicNames.isSystemTopic``: the local name of the
  partitioned topic is one of the event topics (``__change_events``, ``__topic_trace_events``,
  ``__transaction_buffer_snapshot`` and its ``_segments`` / ``_indexes``), or the name is a transaction
  internal name (``pulsar/system`` coordinator topics, suffix ``__transaction_pending_ack``). The 3.x+
  exact local-name match is used for every version (older brokers matched event names with ``endsWith``).

Modelling notes: the §3.4 non-precise pseudo-code (3.x) is applied to every version with time quotas
(the 2.8-2.10 variants were not re-read beyond PR #15663); the precise check reads the broker-entry
timestamp when the entry carries one, else the publish time (``MessageImpl.getEntryTimestamp``); "now"
is the export time. Inputs hold one export (the key columns are ``cluster, topic``).

Undecidable checks are never guessed: the result is null and ``reason`` says what the export lacks
(stats-internal ``LedgerInfo`` carries no close timestamp, so the non-precise time check needs
``ledgers.closed_at``; the precise one needs the entry's publish time from ``entries``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import Any, Final

import pandas as pd
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_model import DEFAULT_PULSAR_VERSION
from pulsar_model.domain.versions import PulsarVersion, flag
from pulsar_model.engine import topic_engine as eng
from pulsar_model.engine import topic_rows
from pulsar_model.engine.columns import POSITION_TYPE
from pulsar_model.engine.flags import FLAGS_COLUMN, SqlFlags, sql_flags, with_flags
from pulsar_model.engine.grouped import map_groups, records
from pulsar_model.errors import ContractError

__all__ = [
    "BROKER_ERROR_MESSAGE",
    "CLIENT_EXCEPTION",
    "DEDUP_CURSOR_NAME",
    "LEVEL_BROKER",
    "LEVEL_DEFAULT",
    "LEVEL_NAMESPACE",
    "LEVEL_TOPIC",
    "POLICY_CONSUMER_BACKLOG_EVICTION",
    "POLICY_PRODUCER_EXCEPTION",
    "POLICY_PRODUCER_REQUEST_HOLD",
    "QUOTA_TYPES",
    "QUOTA_TYPE_SIZE",
    "QUOTA_TYPE_TIME",
    "SERVER_ERROR_EXCEPTION",
    "SERVER_ERROR_EXCEPTION_NAME",
    "SERVER_ERROR_HOLD",
    "SERVER_ERROR_HOLD_NAME",
    "TIME_CHECK_NON_PRECISE",
    "TIME_CHECK_PRECISE",
    "dedup_snapshot_instead_of_disconnect",
    "default_limit_size_bytes",
    "effective_quotas",
    "is_system_topic",
    "is_system_topic_name",
    "namespace_of",
    "non_precise_skips_last_ledger",
    "partitioned_topic_of",
    "producer_outcomes",
    "quota_breaches",
    "time_quota_from_size_quota",
    "time_quota_supported",
    "topic_level_quotas_supported",
]

KEY: Final = ("cluster", "topic")

# --- docs §3.3 enums -----------------------------------------------------------------------------------
#: ``BacklogQuotaType`` (docs §3.3): size and time quota.
QUOTA_TYPE_SIZE: Final = "destination_storage"
QUOTA_TYPE_TIME: Final = "message_age"
QUOTA_TYPES: Final = (QUOTA_TYPE_SIZE, QUOTA_TYPE_TIME)
#: ``RetentionPolicy`` (docs §3.3); only the two producer policies block producers.
POLICY_PRODUCER_REQUEST_HOLD: Final = "producer_request_hold"
POLICY_PRODUCER_EXCEPTION: Final = "producer_exception"
POLICY_CONSUMER_BACKLOG_EVICTION: Final = "consumer_backlog_eviction"
PRODUCER_POLICIES: Final = (POLICY_PRODUCER_REQUEST_HOLD, POLICY_PRODUCER_EXCEPTION)

#: Where an effective quota comes from (docs §3.2 resolution order).
LEVEL_TOPIC: Final = "topic"
LEVEL_NAMESPACE: Final = "namespace"
LEVEL_BROKER: Final = "broker"
LEVEL_DEFAULT: Final = "default"

# --- docs §3.2 broker.conf defaults (used when the export has no broker-level row) -------------------------
#: ``backlogQuotaDefaultLimitBytes`` = -1: unlimited.
DEFAULT_LIMIT_SIZE_BYTES: Final = -1
#: ``backlogQuotaDefaultLimitGB`` was a long defaulting to 50 in 1.x/2.0; it wins when > 0.
LEGACY_DEFAULT_LIMIT_GB: Final = 50
BYTES_IN_GIGABYTE: Final = 1024**3
#: ``backlogQuotaDefaultLimitSecond`` = -1: no time quota.
DEFAULT_LIMIT_TIME_SECONDS: Final = -1
DEFAULT_POLICY: Final = POLICY_PRODUCER_REQUEST_HOLD
DEFAULT_PRECISE_TIME_CHECK: Final = False
DEFAULT_CHECK_INTERVAL_SECONDS: Final = 60
DEFAULT_CHECK_ENABLED: Final = True
#: A null ``limitSize``/``limitTime`` (old JSON shapes) is read as this: the check is disabled (§3.4).
DISABLED_LIMIT: Final = -1
MILLIS_PER_SECOND: Final = 1000

# --- docs §3.3 what producers see ---------------------------------------------------------------------
#: ``ServerError.ProducerBlockedQuotaExceededError`` (producer_request_hold).
SERVER_ERROR_HOLD: Final = 7
SERVER_ERROR_HOLD_NAME: Final = "ProducerBlockedQuotaExceededError"
#: ``ServerError.ProducerBlockedQuotaExceededException`` (producer_exception).
SERVER_ERROR_EXCEPTION: Final = 8
SERVER_ERROR_EXCEPTION_NAME: Final = "ProducerBlockedQuotaExceededException"
#: The broker's exception text on producer creation (docs §3.3).
BROKER_ERROR_MESSAGE: Final = "Cannot create producer on topic with backlog quota exceeded"
#: The Java client surfaces both codes as this exception; its message is the broker text followed by
#: ``". Error code: <ServerError name>"`` (docs §3.3).
CLIENT_EXCEPTION: Final = "PulsarClientException.ProducerBlockedQuotaExceededException"
CLIENT_ERROR_SUFFIX: Final = ". Error code: "

#: Cursor name of the message-deduplication cursor (docs §1.11, §3.5).
DEDUP_CURSOR_NAME: Final = "pulsar.dedup"

#: ``time_check_mode`` values: ``preciseTimeBasedBacklogQuotaCheck`` true / false (docs §3.4).
TIME_CHECK_PRECISE: Final = "precise"
TIME_CHECK_NON_PRECISE: Final = "non_precise"

# --- system topics (docs §3.4; SystemTopicNames / NamespaceService, see the module docstring) -----------
SYSTEM_NAMESPACE: Final = "pulsar/system"
#: NamespaceService heartbeat (v1, v2) and SLA-monitor namespace patterns (Java ``matches``: whole string).
SYSTEM_NAMESPACE_PATTERNS: Final = (
    r"pulsar/[^/]+/[^:]+:\d+",
    r"pulsar/[^:]+:\d+",
    r"sla-monitor/[^/]+/[^:]+:\d+",
)
#: ``SystemTopicNames.EVENTS_TOPIC_NAMES``.
EVENTS_TOPIC_LOCAL_NAMES: Final = (
    "__change_events",
    "__topic_trace_events",
    "__transaction_buffer_snapshot",
    "__transaction_buffer_snapshot_segments",
    "__transaction_buffer_snapshot_indexes",
)
#: ``SystemTopicNames.isTransactionInternalName``: coordinator topics (prefixes) and pending-ack stores.
TRANSACTION_INTERNAL_PREFIXES: Final = (
    "persistent://pulsar/system/transaction_coordinator_assign",
    "persistent://pulsar/system/__transaction_log_",
)
PENDING_ACK_STORE_SUFFIX: Final = "__transaction_pending_ack"
#: ``TopicName.getPartitionIndex`` (new rule, docs §6.5): canonical non-negative int after the last marker.
PARTITION_SUFFIX_RE: Final = r"(.*)-partition-(0|[1-9][0-9]{0,9})"
INT32_MAX: Final = 2**31 - 1

# --- reasons --------------------------------------------------------------------------------------------
REASON_SYSTEM_TOPIC: Final = "system topic: the broker never checks backlog quotas on it (docs §3.4)"
REASON_NO_TIME_QUOTA: Final = "message_age quotas are not checked before Pulsar 2.8.0 (size only, docs §3.4)"
REASON_NO_EXPORT_TIME: Final = "managed_ledgers.exported_at is missing: no 'now' for the time check"
REASON_NO_ENTRIES: Final = (
    "precise time check needs the publish time of entry {pos}; pass the entries table (undecidable)"
)
REASON_ENTRY_MISSING: Final = (
    "precise time check needs the publish time of entry {pos}, which is not in the entries export "
    "(undecidable)"
)
REASON_NO_CLOSE_TIME: Final = (
    "non-precise time check needs the close timestamp of ledger {lid}; the export carries none "
    "(stats-internal LedgerInfo has no timestamp) (undecidable)"
)
REASON_NPE: Final = (
    "the ledger of nextValid(mark-delete) {lid} is not in the ledger list: the broker's check fails "
    "(NullPointerException) and acts as not exceeded"
)
REASON_NO_TOPIC: Final = "no managed_ledgers row for this cluster/topic"
REASON_NO_POLICY: Final = "quota has no policy: the broker neither blocks producers nor evicts"
REASON_DEDUP_TIE: Final = (
    "pulsar.dedup shares the slowest mark-delete position with another durable cursor: whether the broker's "
    "cursor heap holds it at the root (dedup snapshot) or not (producers disconnected) is not in the export "
    "(docs §3.9) (undecidable)"
)


# ======================================================================================================
# Version predicates
# ======================================================================================================


def time_quota_supported(version: str | PulsarVersion) -> bool:
    """The broker checks ``message_age`` quotas (PR #10093, 2.8.0); older brokers check size only (§3.4)."""
    return flag("time_quota_supported", version)


def time_quota_from_size_quota(version: str | PulsarVersion) -> bool:
    """2.8.0 read the time limit and policy from the ``destination_storage`` quota (#11404, fixed 2.8.1)."""
    return flag("time_quota_from_size_quota", version)


def non_precise_skips_last_ledger(version: str | PulsarVersion) -> bool:
    """The non-precise time check returns "not exceeded" when md is in the last ledger (PR #15663).

    Labels release/2.8.4, 2.9.3, 2.10.1; earlier brokers check the close time of a closed last ledger too.
    """
    return flag("non_precise_skips_last_ledger", version)


def topic_level_quotas_supported(version: str | PulsarVersion) -> bool:
    """Topic-level backlog quotas exist (PR #7646, 2.7.0)."""
    return flag("topic_level_quotas_supported", version)


def default_limit_size_bytes(version: str | PulsarVersion) -> int:
    """Built-in default size limit: 50 GiB in 1.x/2.0 (``backlogQuotaDefaultLimitGB``), else -1 (§3.2)."""
    if not flag("quota_default_limit_unlimited", version):
        return LEGACY_DEFAULT_LIMIT_GB * BYTES_IN_GIGABYTE
    return DEFAULT_LIMIT_SIZE_BYTES


def dedup_snapshot_instead_of_disconnect(version: str | PulsarVersion) -> bool:
    """A slowest dedup cursor gets a dedup snapshot instead of producer disconnection (§3.5, PR #20951).

    In the release tags v2.11.3, v3.0.2 and v3.2.0 and later (``BacklogQuotaManager``); not in v2.10.6 nor
    any 3.1.x.
    """
    return flag("dedup_snapshot_instead_of_disconnect", version)


# ======================================================================================================
# Topic-name helpers
# ======================================================================================================


def is_system_topic_name(topic: str) -> bool:
    """Plain-Python ``BrokerService.isSystemTopic`` (see the module docstring)."""
    match = re.fullmatch(PARTITION_SUFFIX_RE, topic, re.DOTALL)
    base = match.group(1) if match is not None and int(match.group(2)) <= INT32_MAX else topic
    parts = (topic.split("://", 1)[1] if "://" in topic else topic).split("/", 3)
    namespace = "/".join(parts[:3]) if len(parts) == 4 else "/".join(parts[:2])
    if namespace == SYSTEM_NAMESPACE or any(re.fullmatch(p, namespace) for p in SYSTEM_NAMESPACE_PATTERNS):
        return True
    local = (base.split("://", 1)[1] if "://" in base else base).split("/", 3)[-1]
    if local in EVENTS_TOPIC_LOCAL_NAMES:
        return True
    return base.startswith(TRANSACTION_INTERNAL_PREFIXES) or base.endswith(PENDING_ACK_STORE_SUFFIX)


def partitioned_topic_of(topic: Column) -> Column:
    """``TopicName.getPartitionedTopicName``: the name without a canonical ``-partition-N`` suffix (§6.5)."""
    pattern = f"^{PARTITION_SUFFIX_RE}$"
    index = F.regexp_extract(topic, pattern, 2)
    is_partition = (index != F.lit("")) & (index.cast("long") <= F.lit(INT32_MAX))
    return F.when(is_partition, F.regexp_extract(topic, pattern, 1)).otherwise(topic)


def _name_parts(topic: Column) -> Column:
    """``TopicName`` parsing: the text after ``://`` split on ``/`` into at most 4 parts."""
    rest = F.regexp_extract(topic, r"^[^:/]+://(.*)$", 1)
    return F.split(F.when(rest == F.lit(""), topic).otherwise(rest), "/", 4)


def namespace_of(topic: Column) -> Column:
    """Namespace of a topic: ``tenant/ns`` (3 parts) or legacy ``tenant/cluster/ns`` (4 parts)."""
    parts = _name_parts(topic)
    return F.when(F.size(parts) == 4, F.concat_ws("/", parts[0], parts[1], parts[2])).otherwise(
        F.concat_ws("/", parts[0], parts[1])
    )


def is_system_topic(topic: Column) -> Column:
    """``BrokerService.isSystemTopic`` as a column (see the module docstring)."""
    namespace = namespace_of(topic)
    base = partitioned_topic_of(topic)
    local = F.element_at(_name_parts(base), -1)
    checks = [
        namespace == F.lit(SYSTEM_NAMESPACE),
        *[namespace.rlike(f"^(?:{p})$") for p in SYSTEM_NAMESPACE_PATTERNS],
        local.isin(*EVENTS_TOPIC_LOCAL_NAMES),
        *[base.startswith(p) for p in TRANSACTION_INTERNAL_PREFIXES],
        base.endswith(PENDING_ACK_STORE_SUFFIX),
    ]
    return functools.reduce(lambda a, b: a | b, checks)


# ======================================================================================================
# Small column helpers
# ======================================================================================================


def _col_or_null(df: DataFrame, name: str, dtype: str) -> Column:
    """``df[name]`` cast to ``dtype`` when the column exists, else a typed null (optional input columns)."""
    if name in df.columns:
        return F.col(name).cast(dtype)
    return F.lit(None).cast(dtype)


def _millis(df: DataFrame, name: str) -> Column:
    """Epoch milliseconds of an optional timestamp column (null when absent)."""
    if name in df.columns:
        return F.unix_millis(F.col(name).cast("timestamp"))
    return F.lit(None).cast("long")


def _pos_text(p: Column) -> Column:
    return F.concat_ws(":", p["ledger_id"].cast("string"), p["entry_id"].cast("string"))


def _fmt(template: str, **values: Column) -> Column:
    """A reason text with ``{name}`` placeholders filled from columns."""
    parts: list[Column] = []
    rest = template
    while "{" in rest:
        head, _, tail = rest.partition("{")
        name, _, rest = tail.partition("}")
        parts += [F.lit(head), values[name]]
    parts.append(F.lit(rest))
    return F.concat(*parts)


# ======================================================================================================
# §3.2 effective quotas
# ======================================================================================================

_QUOTA_FIELDS: Final = ("limit_size_bytes", "limit_time_seconds", "policy", "source_shape")


def _dedupe_quota_rows(backlog_quotas: DataFrame) -> DataFrame:
    """One row per ``(cluster, level, scope, quota_type)``: the newest export, then the first source file.

    Several exports (or a JSON file and a JSON Lines line for the same scope) can define the same quota.
    """
    cols = backlog_quotas.columns
    order: list[Column] = []
    if "export_date" in cols:
        order.append(F.col("export_date").desc_nulls_last())
    if "export_id" in cols:
        order.append(F.col("export_id").desc_nulls_last())
    if "source_file" in cols:
        order.append(F.col("source_file").asc_nulls_last())
    order += [F.col("limit_size_bytes").asc_nulls_last(), F.col("limit_time_seconds").asc_nulls_last()]
    rows = backlog_quotas.select(
        F.col("cluster"),
        F.col("level"),
        F.col("scope"),
        F.col("quota_type"),
        F.col("limit_size_bytes").cast("long").alias("limit_size_bytes"),
        F.col("limit_time_seconds").cast("long").alias("limit_time_seconds"),
        F.col("policy").cast("string").alias("policy"),
        _col_or_null(backlog_quotas, "source_shape", "string").alias("source_shape"),
        _col_or_null(backlog_quotas, "precise_time_check", "boolean").alias("precise_time_check"),
        _col_or_null(backlog_quotas, "check_interval_seconds", "int").alias("check_interval_seconds"),
        _col_or_null(backlog_quotas, "check_enabled", "boolean").alias("check_enabled"),
        *[F.col(c) for c in ("export_date", "export_id", "source_file") if c in cols],
    )
    window = Window.partitionBy("cluster", "level", "scope", "quota_type").orderBy(*order)
    ranked = rows.select("*", F.row_number().over(window).alias("_rn"))
    return ranked.where(F.col("_rn") == 1).select(
        "cluster",
        "level",
        "scope",
        "quota_type",
        *_QUOTA_FIELDS,
        "precise_time_check",
        "check_interval_seconds",
        "check_enabled",
    )


def effective_quotas(
    backlog_quotas: DataFrame,
    managed_ledgers: DataFrame,
    pulsar_version: str | None = DEFAULT_PULSAR_VERSION,
    topic_policies_enabled: bool = True,
) -> DataFrame:
    """The backlog quota the broker applies, one row per ``(cluster, topic, quota_type)`` (docs §3.2).

    Topics are those of ``managed_ledgers`` (one export per call); quota types are ``destination_storage``
    and ``message_age``. ``backlog_quotas`` rows are as the ingest parser writes them (every JSON shape is
    already normalised to ``limit_size_bytes / limit_time_seconds / policy``). Resolution, per quota type:

    1. topic level (only with ``topic_policies_enabled`` and from 2.7.0): a row whose scope is the topic,
       else one whose scope is its partitioned topic (policies of a partitioned topic apply to its
       partitions);
    2. namespace level: scope ``tenant/ns`` (``tenant/cluster/ns`` for legacy names);
    3. broker level: the broker runtime config of the cluster (``broker.json``);
    4. ``default``: the version's ``broker.conf`` defaults (size -1, or 50 GiB before 2.1.0; time -1;
       ``producer_request_hold``).

    Output: ``cluster, topic, namespace, quota_type, limit_size_bytes, limit_time_seconds, policy,
    source_level, source_scope, source_shape, resolved_from_type, precise_time_check,
    check_interval_seconds, check_enabled, is_system_topic, stats_limit, stats_limit_matches``.
    A null ``limitSize``/``limitTime`` reads as -1 (check disabled); a null policy stays null. The broker
    settings come from the broker-level row, else the §3.2 defaults (precise false, 60 s, enabled).
    In 2.8.0 the ``message_age`` row repeats the ``destination_storage`` quota (``resolved_from_type``).
    ``stats_limit`` is the broker's own view from ``topics stats`` (``backlogQuotaLimitSize`` for the size
    row, ``backlogQuotaLimitTime`` for the time row, 3.x+) and ``stats_limit_matches`` compares it with the
    resolved limit (null when not exported). ``pulsar_version=None``: each topic's own
    ``managed_ledgers.pulsar_version`` (then repeated in a ``pulsar_version`` column). Pure and lazy.
    """
    flags = _flags(pulsar_version, managed_ledgers)
    topic_level = flags.constant("topic_level_quotas_supported")
    with_topic_level = topic_policies_enabled and topic_level is not False
    per_row = [F.col(FLAGS_COLUMN).alias("_fl"), F.col("pulsar_version")] if flags.per_row else []
    source = with_flags(managed_ledgers) if flags.per_row else managed_ledgers
    topics = source.select(
        F.col("cluster"),
        F.col("topic"),
        _col_or_null(managed_ledgers, "stats_backlog_quota_limit_size_bytes", "long").alias("_stats_size"),
        _col_or_null(managed_ledgers, "stats_backlog_quota_limit_time_seconds", "long").alias("_stats_time"),
        *per_row,
    )
    candidate = "struct<level:string,scope:string,rank:int>"
    options: list[Column] = []
    if with_topic_level:
        # per row, a version without topic-level policies gets null candidates: they match no quota row
        allowed = flags.column("topic_level_quotas_supported")
        options.append(
            F.when(allowed, F.struct(F.lit(LEVEL_TOPIC), F.col("topic"), F.lit(0))).cast(candidate)
        )
        options.append(
            F.when(
                allowed, F.struct(F.lit(LEVEL_TOPIC), partitioned_topic_of(F.col("topic")), F.lit(1))
            ).cast(candidate)
        )
    options.append(F.struct(F.lit(LEVEL_NAMESPACE), namespace_of(F.col("topic")), F.lit(2)).cast(candidate))
    options.append(F.struct(F.lit(LEVEL_BROKER), F.col("cluster"), F.lit(3)).cast(candidate))
    probes = topics.select(
        "*",
        F.explode(F.array(*[F.lit(t) for t in QUOTA_TYPES])).alias("quota_type"),
    ).select("*", F.explode(F.array(*options)).alias("_c"))
    probes = probes.select(
        "*",
        F.col("_c.level").alias("level"),
        F.col("_c.scope").alias("scope"),
        F.col("_c.rank").alias("_rank"),
    )
    quotas = _dedupe_quota_rows(backlog_quotas).select("*", F.lit(True).alias("_matched"))
    # distributed by topic once: the aggregate per (topic, quota type) and the window per topic below
    # both find their rows together without a second shuffle
    joined = probes.join(quotas, on=["cluster", "level", "scope", "quota_type"], how="left").repartition(*KEY)
    resolved_struct = F.struct(
        F.col("level").alias("source_level"),
        F.col("scope").alias("source_scope"),
        *[F.col(c) for c in _QUOTA_FIELDS],
    )
    broker_struct = F.struct("precise_time_check", "check_interval_seconds", "check_enabled")
    matched = F.coalesce(F.col("_matched"), F.lit(False))
    grouped = joined.groupBy("cluster", "topic", "quota_type").agg(
        F.min_by(F.when(matched, resolved_struct), F.when(matched, F.col("_rank"))).alias("_q"),
        F.first(F.when(matched & (F.col("level") == LEVEL_BROKER), broker_struct), ignorenulls=True).alias(
            "_b"
        ),
        F.first("_stats_size").alias("_stats_size"),
        F.first("_stats_time").alias("_stats_time"),
        *[F.first(c).alias(c) for c in ("_fl", "pulsar_version") if flags.per_row],
    )
    resolved = F.col("_q")
    from_size = flags.constant("time_quota_from_size_quota")
    if from_size is not False:
        by_topic = Window.partitionBy(*KEY)
        size_q = F.first(F.when(F.col("quota_type") == QUOTA_TYPE_SIZE, F.col("_q")), ignorenulls=True).over(
            by_topic
        )
        from_size_col = flags.column("time_quota_from_size_quota")
        resolved = F.when((F.col("quota_type") == QUOTA_TYPE_TIME) & from_size_col, size_q).otherwise(
            F.col("_q")
        )
    staged = grouped.select(
        *KEY,
        "quota_type",
        resolved.alias("_q"),
        "_b",
        "_stats_size",
        "_stats_time",
        F.when(flags.column("time_quota_from_size_quota"), F.lit(QUOTA_TYPE_SIZE))
        .cast("string")
        .alias("_from"),
        *[c for c in ("_fl", "pulsar_version") if flags.per_row],
    )
    default_size = F.when(
        flags.column("quota_default_limit_unlimited"), F.lit(DEFAULT_LIMIT_SIZE_BYTES)
    ).otherwise(F.lit(LEGACY_DEFAULT_LIMIT_GB * BYTES_IN_GIGABYTE))
    has_q = F.col("_q").isNotNull()
    limit_size = F.when(
        has_q, F.coalesce(F.col("_q.limit_size_bytes"), F.lit(DISABLED_LIMIT).cast("long"))
    ).otherwise(default_size.cast("long"))
    limit_time = F.when(
        has_q, F.coalesce(F.col("_q.limit_time_seconds"), F.lit(DISABLED_LIMIT).cast("long"))
    ).otherwise(F.lit(DEFAULT_LIMIT_TIME_SECONDS).cast("long"))
    is_time = F.col("quota_type") == QUOTA_TYPE_TIME
    stats_limit = F.when(is_time, F.col("_stats_time")).otherwise(F.col("_stats_size"))
    resolved_limit = F.when(is_time, F.col("limit_time_seconds")).otherwise(F.col("limit_size_bytes"))
    out = staged.select(
        *KEY,
        namespace_of(F.col("topic")).alias("namespace"),
        "quota_type",
        limit_size.alias("limit_size_bytes"),
        limit_time.alias("limit_time_seconds"),
        F.when(has_q, F.col("_q.policy")).otherwise(F.lit(DEFAULT_POLICY)).alias("policy"),
        F.coalesce(F.col("_q.source_level"), F.lit(LEVEL_DEFAULT)).alias("source_level"),
        F.col("_q.source_scope").alias("source_scope"),
        F.col("_q.source_shape").alias("source_shape"),
        F.when(is_time & F.col("_from").isNotNull(), F.col("_from"))
        .otherwise(F.col("quota_type"))
        .alias("resolved_from_type"),
        F.coalesce(F.col("_b.precise_time_check"), F.lit(DEFAULT_PRECISE_TIME_CHECK)).alias(
            "precise_time_check"
        ),
        F.coalesce(F.col("_b.check_interval_seconds"), F.lit(DEFAULT_CHECK_INTERVAL_SECONDS)).alias(
            "check_interval_seconds"
        ),
        F.coalesce(F.col("_b.check_enabled"), F.lit(DEFAULT_CHECK_ENABLED)).alias("check_enabled"),
        is_system_topic(F.col("topic")).alias("is_system_topic"),
        stats_limit.alias("stats_limit"),
        *(["pulsar_version"] if flags.per_row else []),
    )
    return out.select(
        "*",
        F.when(F.col("stats_limit").isNotNull(), F.col("stats_limit") == resolved_limit).alias(
            "stats_limit_matches"
        ),
    )


# ======================================================================================================
# §3.4 breach detection
# ======================================================================================================


def _flags(pulsar_version: str | None, managed_ledgers: DataFrame) -> SqlFlags:
    """The call's flags, bound to a ``_fl`` flags column per row (``pulsar_version=None``)."""
    flags = sql_flags(pulsar_version)
    if flags.per_row and "pulsar_version" not in managed_ledgers.columns:
        raise ContractError(
            "pulsar_version=None reads managed_ledgers.pulsar_version, which managed_ledgers does not have: "
            "add the column or pass a version string such as '4.1.3'"
        )
    return flags.at("`_fl`")


_QS_CURSOR: Final = topic_rows.K_FIRST_OWN
_QS_INPUT: Final = topic_rows.packed_schema(
    [T.StructField("l_closed_ms", T.LongType()), *topic_rows.CURSOR_FIELDS]
)
_QS_OUTPUT: Final = T.StructType(
    [
        *_QS_INPUT.fields[:2],
        T.StructField("slowest_cursor_name", T.StringType()),
        T.StructField("slowest_mark_delete_position", POSITION_TYPE),
        T.StructField("slowest_cursor_tie", T.BooleanType()),
        T.StructField("dedup_at_slowest", T.BooleanType()),
        T.StructField("estimated_backlog_size_bytes", T.LongType()),
        T.StructField("_has_backlog", T.BooleanType()),
        T.StructField("_p_pos", POSITION_TYPE),
        T.StructField("_n_pos", POSITION_TYPE),
        T.StructField("_n_ref_ms", T.LongType()),
        T.StructField("_n_status", T.StringType()),
        T.StructField("_n_lid", T.LongType()),
        T.StructField("_time_ok", T.BooleanType()),
    ]
)


def _time_check_state(
    ml: eng.ManagedLedger,
    lac: eng.Position | None,
    ledger_info: dict[int, tuple[int | None, int | None]],
    md: eng.Position | None,
) -> dict[str, Any]:
    """The time checks' positions and statuses of one topic (docs §3.4) from the slowest cursor's ``md``;
    ``ledger_info``: listed entries and close time (ms) by ledger id, as exported (nulls kept)."""

    def next_valid(p: eng.Position | None) -> eng.Position | None:
        # without LAC the broker's position arithmetic has nothing to stop at: no position
        return None if p is None or lac is None else ml.next_valid(p)

    nv1 = next_valid(md)
    # non-precise (estimatedTimeBasedBacklogQuotaCheck): md's ledger missing -> nextValid(md); at the end of
    # its ledger -> nextValid of that; the ledger checked is the one of the resulting position
    p1 = md if md is not None and md[0] in ledger_info else nv1
    p1_info = None if p1 is None else ledger_info.get(p1[0])
    p1_entries = None if p1_info is None else p1_info[0]
    at_ledger_end = p1 is not None and p1_entries is not None and p1[1] == p1_entries - 1
    checked = next_valid(p1) if at_ledger_end else p1
    checked_info = None if checked is None else ledger_info.get(checked[0])
    last_lid = max(ledger_info) if ledger_info else None
    in_last_ledger = (
        flag("non_precise_skips_last_ledger", ml.beh.version)
        and md is not None
        and last_lid is not None
        and md[0] == last_lid
    )
    if in_last_ledger:
        status = "never_old"
    elif p1_info is None or checked_info is None:
        status = "npe"
    elif checked is not None and ml.cur_id is not None and checked[0] == ml.cur_id:
        status = "never_old"
    elif checked_info[1] is None:
        status = "no_close_time"
    else:
        status = "ok"
    lid = checked[0] if checked is not None else (None if p1 is None else p1[0])
    return {
        "_has_backlog": md is not None and lac is not None and nv1 is not None and nv1 <= lac,
        "_p_pos": topic_rows.position_struct(nv1),
        "_n_pos": topic_rows.position_struct(checked),
        "_n_ref_ms": checked_info[1] if status == "ok" and checked_info is not None else None,
        "_n_status": status,
        "_n_lid": lid,
        "_time_ok": flag("time_quota_supported", ml.beh.version),
    }


def _topic_state_fn(version: str | None) -> Callable[[pd.DataFrame], list[dict[str, Any]]]:
    """One topic's packed rows -> its :func:`_topic_state` row (none without one managed-ledger row)."""

    def fn(pdf: pd.DataFrame) -> list[dict[str, Any]]:
        rows = records(pdf)
        ml, lac = topic_rows.managed_ledger_of(rows, version)
        if ml is None:
            return []
        cursors = topic_rows.cursors_in_export_order(rows, _QS_CURSOR)
        slowest, tie = eng.slowest_durable(cursors)
        md = None if slowest is None else slowest.md
        slowest_key = md if md is not None else eng.EARLIEST
        dedup = [
            c.md if c.md is not None else eng.EARLIEST
            for c in cursors
            if c.durable and c.name == DEDUP_CURSOR_NAME
        ]
        ledger_info: dict[int, tuple[int | None, int | None]] = {
            int(r["l_id"]): (topic_rows.value(r["l_ent"]), topic_rows.value(r["l_closed_ms"]))
            for r in rows
            if r["_k"] == topic_rows.K_LEDGER
        }
        return [
            {
                "slowest_cursor_name": None if slowest is None else slowest.name,
                "slowest_mark_delete_position": topic_rows.position_struct(md),
                "slowest_cursor_tie": tie,
                "dedup_at_slowest": slowest is not None and bool(dedup) and min(dedup) == slowest_key,
                "estimated_backlog_size_bytes": ml.estimate_from_slowest(md),
                **_time_check_state(ml, lac, ledger_info, md),
            }
        ]

    return fn


def _topic_state(
    managed_ledgers: DataFrame,
    ledgers: DataFrame,
    cursors: DataFrame,
    entries: DataFrame | None,
    version: str | None,
) -> DataFrame:
    """One row per managed ledger with everything the size and time checks read (docs §2.3, §3.4).

    Columns: ``cluster, topic, slowest_cursor_name, slowest_mark_delete_position, slowest_cursor_tie,
    dedup_at_slowest, estimated_backlog_size_bytes, _now_ms, checked_at, _has_backlog`` and per time-check
    mode the checked
    position, the reference time (ms) and a status: ``_p_pos, _p_ref_ms, _p_status`` (precise) and
    ``_n_pos, _n_ref_ms, _n_status, _n_lid`` (non-precise). Statuses: ``ok`` (reference time known),
    ``no_entries`` / ``entry_missing`` / ``no_close_time`` (undecidable), ``never_old`` (md in the last
    ledger, or the ledger to check is the open one: timestamp 0), ``npe`` (a ledger lookup of the broker's
    code returns null). ``_time_ok``: the version checks time quotas (``version`` None: each topic's own).

    The slowest cursor, the estimate (:func:`~pulsar_model.backlog.estimated_backlog_size`'s rule) and the
    ``getNextValidPosition`` steps come from one grouped pass per topic through the topic engine
    (:mod:`pulsar_model.engine.topic_engine`, property-tested against the oracle like the set-based
    builders); expects one managed-ledger row per topic.
    """
    _flags(version, managed_ledgers)  # validates the version argument and the per-row version column
    packed = topic_rows.tagged(cursors, _QS_CURSOR, topic_rows.cursor_values(), _QS_INPUT)
    state = topic_rows.topic_state_rows(
        managed_ledgers, ledgers, _QS_INPUT, version, {"l_closed_ms": _millis(ledgers, "closed_at")}
    )
    passed = map_groups(state.unionByName(packed), KEY, _topic_state_fn(version), _QS_OUTPUT)
    ml = managed_ledgers.select(
        *KEY,
        _millis(managed_ledgers, "exported_at").alias("_now_ms"),
        _col_or_null(managed_ledgers, "exported_at", "timestamp").alias("checked_at"),
    )
    staged = passed.join(ml, on=list(KEY), how="left").select(
        *KEY,
        "slowest_cursor_name",
        "slowest_mark_delete_position",
        "slowest_cursor_tie",
        "dedup_at_slowest",
        "estimated_backlog_size_bytes",
        "_now_ms",
        "checked_at",
        "_has_backlog",
        "_p_pos",
        "_n_pos",
        "_n_ref_ms",
        "_n_status",
        "_n_lid",
        "_time_ok",
    )
    # precise (§3.4): the entry at nextValid(md); its timestamp is the broker-entry timestamp when the
    # broker appends one, else the publish time (MessageImpl.getEntryTimestamp)
    if entries is None:
        return staged.select(
            "*", F.lit(None).cast("long").alias("_p_ref_ms"), F.lit("no_entries").alias("_p_status")
        )
    entry_ts = F.coalesce(_millis(entries, "broker_timestamp"), F.col("publish_time_ms").cast("long"))
    # the entry key is unique within one export: at most one entry per topic. The probed positions (one
    # per topic, metadata-sized) are broadcast into a scan of the entries, so the entry dump is not
    # shuffled; the few entries found are broadcast back to the topics.
    probe = staged.select("*", F.col("_p_pos.ledger_id").alias("_el"), F.col("_p_pos.entry_id").alias("_ee"))
    probed = probe.select(*KEY, "_el", "_ee").where(F.col("_el").isNotNull() & F.col("_ee").isNotNull())
    found = entries.select(
        *KEY,
        F.col("ledger_id").cast("long").alias("_el"),
        F.col("entry_id").cast("long").alias("_ee"),
        entry_ts.alias("_p_ref_ms"),
    ).join(F.broadcast(probed), on=[*KEY, "_el", "_ee"], how="inner")
    with_ref = probe.join(F.broadcast(found), on=[*KEY, "_el", "_ee"], how="left").drop("_el", "_ee")
    return with_ref.select(
        "*",
        F.when(F.col("_p_ref_ms").isNull(), F.lit("entry_missing")).otherwise(F.lit("ok")).alias("_p_status"),
    )


def _exact_view(exact_backlog: DataFrame | None, cursors: DataFrame) -> DataFrame | None:
    """Per topic: the exact backlog of the slowest durable cursor and the oldest unacked publish time.

    ``exact_backlog_bytes`` is the largest exact backlog (bytes of unacknowledged entries) of any durable
    cursor: the exact counterpart of the broker's estimate, which is the backlog of the durable cursor with
    the smallest mark-delete position (docs §2.3); ``exact_backlog_cursor_name`` names the cursor with it,
    among equal backlogs the smallest name. The oldest unacked publish time is the minimum over
    durable cursors. ``is_durable`` comes from ``exact_backlog`` when it has the column, else from
    ``cursors``; cursors of unknown durability are ignored.
    """
    if exact_backlog is None:
        return None
    rows = exact_backlog
    if "is_durable" in rows.columns:
        durable = F.col("is_durable").cast("boolean")
    else:
        rows = rows.join(
            cursors.select(*KEY, "cursor_name", F.col("is_durable").cast("boolean").alias("_durable")),
            on=[*KEY, "cursor_name"],
            how="left",
        )
        durable = F.col("_durable")
    rows = rows.where(F.coalesce(durable, F.lit(False)))
    bytes_ = F.col("backlog_bytes").cast("long")
    complete = []
    if "exported_entries_complete" in rows.columns:
        entries_complete = F.coalesce(F.col("exported_entries_complete").cast("boolean"), F.lit(False))
        complete.append(F.bool_and(entries_complete).alias(EXACT_COMPLETE))
    return rows.groupBy(*KEY).agg(
        F.max(F.col("backlog_bytes").cast("long")).alias("exact_backlog_bytes"),
        # among equal backlogs the smallest name: the row order of the input must not decide
        F.min_by(
            F.col("cursor_name"), F.when(bytes_.isNotNull(), F.struct(-bytes_, F.col("cursor_name")))
        ).alias("exact_backlog_cursor_name"),
        F.min(F.col("oldest_unacked_publish_time_ms").cast("long")).alias("_oldest_ms"),
        F.lit(True).alias("_exact_known"),
        *complete,
    )


def quota_breaches(
    effective: DataFrame,
    managed_ledgers: DataFrame,
    ledgers: DataFrame,
    cursors: DataFrame,
    entries: DataFrame | None = None,
    exact_backlog: DataFrame | None = None,
    pulsar_version: str | None = DEFAULT_PULSAR_VERSION,
    keep: Sequence[str] = (),
) -> DataFrame:
    """Is each backlog quota exceeded at export time? One row per ``(cluster, topic, quota_type)`` (§3.4).

    ``effective`` is :func:`effective_quotas` output (at least ``cluster, topic, quota_type,
    limit_size_bytes, limit_time_seconds, policy, precise_time_check, check_enabled``); "now" is
    ``managed_ledgers.exported_at``. One export per call.

    * size (``destination_storage`` row): ``limit < 0`` -> false; else the topic estimate (§2.3, slowest
      durable cursor) ``>= limit`` (a limit of 0 is always exceeded).
    * time (``message_age`` row): ``limit <= 0`` -> false; no durable cursor or nothing after the slowest
      mark-delete position md (``nextValid(md) > LAC``) -> false. Precise: exceeded iff
      ``now > t + limit*1000`` with ``t`` the timestamp of the entry at ``nextValid(md)`` (broker-entry
      timestamp, else publish time) from ``entries``. Non-precise (§3.4 pseudo-code): md in the last
      ledger -> false; md's ledger missing -> ``nextValid(md)``; at the end of its ledger -> the next valid
      position; the open ledger is never old; else exceeded iff ``now - closed_at > limit*1000`` with the
      ledger close time from ``ledgers.closed_at``. Missing data -> null and ``reason``.
    * system topics: both false. Before 2.8.0 there is no time check (false, ``reason``).

    Columns: ``cluster, topic, quota_type, is_system_topic, policy, source_level, limit_size_bytes,
    limit_time_seconds, check_enabled, slowest_cursor_name, slowest_mark_delete_position,
    slowest_cursor_tie, dedup_at_slowest, estimated_backlog_size_bytes, time_check_mode, checked_position,
    reference_time_ms, backlog_age_seconds, size_exceeded, time_exceeded, exceeded, percent_of_quota,
    is_handled, handled_type, exact_backlog_bytes, exact_backlog_cursor_name, true_oldest_unacked_age_seconds,
    exact_exceeded, checked_at, reason``. ``exceeded`` is this row's check (= ``size_exceeded`` or
    ``time_exceeded``, both repeated on each row); ``handled_type`` is what the periodic check acts on
    (3.x: size first, else time; null when nothing is exceeded, the check is disabled or undecidable);
    ``percent_of_quota`` = 100 x backlog / limit (size) or 100 x age / limit (time), null when the limit
    is <= 0 or the age unknown. ``slowest_cursor_name`` is the root of the cursor heap built in export
    order (docs §3.9); ``slowest_cursor_tie`` says other durable cursors share its position (the broker's
    heap may hold any of them), ``dedup_at_slowest`` that ``pulsar.dedup`` is among them.

    With ``exact_backlog`` (per cursor: ``cluster, topic, cursor_name, [is_durable,] backlog_bytes,
    oldest_unacked_publish_time_ms``): ``exact_backlog_bytes`` is the largest exact backlog of a durable
    cursor (the exact counterpart of the slowest-cursor estimate), ``true_oldest_unacked_age_seconds`` the
    age of the oldest unacknowledged entry of any durable cursor, ``exact_exceeded`` the same quota rule
    applied to them. Without it these columns are null. ``pulsar_version=None``: each topic's own
    ``managed_ledgers.pulsar_version``.

    ``keep``: further columns appended to each row, for a caller that wants the whole effective quota beside
    the decision without joining ``effective`` back (which would plan it twice): any column of
    ``effective``, and ``exact_backlog_complete`` - every durable cursor's exact backlog is complete
    (``exact_backlog.exported_entries_complete`` all true; null without a durable cursor or without that
    column). Pure and lazy.
    """
    version = None if pulsar_version is None else str(PulsarVersion.parse(pulsar_version))
    unknown = [c for c in keep if c not in effective.columns and c != EXACT_COMPLETE]
    if unknown:
        raise ContractError(
            f"quota_breaches(keep=...) names {unknown}: keep takes columns of effective "
            f"({', '.join(effective.columns)}) or {EXACT_COMPLETE!r}"
        )
    state = _topic_state(managed_ledgers, ledgers, cursors, entries, version)
    exact = _exact_view(exact_backlog, cursors)
    if exact is not None:
        state = state.join(exact, on=list(KEY), how="left")
    else:
        state = state.select(
            "*",
            F.lit(None).cast("long").alias("exact_backlog_bytes"),
            F.lit(None).cast("string").alias("exact_backlog_cursor_name"),
            F.lit(None).cast("long").alias("_oldest_ms"),
            F.lit(None).cast("boolean").alias("_exact_known"),
        )
    if EXACT_COMPLETE not in state.columns:
        state = state.select("*", F.lit(None).cast("boolean").alias(EXACT_COMPLETE))
    carried = {c: f"_keep_{c}" for c in keep}
    state = state.select("*", F.lit(True).alias("_known"))
    rows = effective.select(
        *KEY,
        F.col("quota_type"),
        F.col("policy"),
        _col_or_null(effective, "source_level", "string").alias("source_level"),
        F.col("limit_size_bytes").cast("long").alias("limit_size_bytes"),
        F.col("limit_time_seconds").cast("long").alias("limit_time_seconds"),
        F.coalesce(F.col("precise_time_check").cast("boolean"), F.lit(DEFAULT_PRECISE_TIME_CHECK)).alias(
            "_precise"
        ),
        F.coalesce(F.col("check_enabled").cast("boolean"), F.lit(DEFAULT_CHECK_ENABLED)).alias(
            "check_enabled"
        ),
        *[F.col(c).alias(carried[c]) for c in keep if c != EXACT_COMPLETE],
    ).join(F.broadcast(state), on=list(KEY), how="left")  # one row per topic: metadata-sized
    if EXACT_COMPLETE in carried:
        rows = rows.withColumnRenamed(EXACT_COMPLETE, carried[EXACT_COMPLETE])

    # stage 1: the per-row inputs of both checks, materialised once (keeps the optimised plan small)
    precise = F.col("_precise")
    rows = rows.select(
        "*",
        is_system_topic(F.col("topic")).alias("_system"),
        F.coalesce(F.col("_known"), F.lit(False)).alias("_known_"),
        F.when(precise, F.col("_p_status")).otherwise(F.col("_n_status")).alias("_status"),
        F.when(precise, F.col("_p_ref_ms")).otherwise(F.col("_n_ref_ms")).alias("_ref_ms"),
        F.when(precise, F.col("_p_pos")).otherwise(F.col("_n_pos")).alias("_checked"),
        (F.col("limit_time_seconds") * F.lit(MILLIS_PER_SECOND)).alias("_limit_ms"),
    )
    is_size = F.col("quota_type") == QUOTA_TYPE_SIZE
    system, known, status = F.col("_system"), F.col("_known_"), F.col("_status")
    ref_ms, checked, limit_ms = F.col("_ref_ms"), F.col("_checked"), F.col("_limit_ms")
    time_ok = F.coalesce(F.col("_time_ok"), F.lit(False))
    now = F.col("_now_ms")
    size_limit, time_limit = F.col("limit_size_bytes"), F.col("limit_time_seconds")
    backlog = F.col("estimated_backlog_size_bytes")
    relevant = known & F.col("_has_backlog") & ~system
    rows = rows.select("*", F.when(relevant & (status == "ok"), now - ref_ms).alias("_age_ms"))
    age_ms = F.col("_age_ms")

    size_check = (
        F.when(system, F.lit(False))
        .when(~known, F.lit(None).cast("boolean"))
        .when(size_limit < 0, F.lit(False))
        .otherwise(backlog >= size_limit)
    )
    time_check = (
        F.when(system | ~time_ok, F.lit(False))
        .when(time_limit <= 0, F.lit(False))
        .when(~known, F.lit(None).cast("boolean"))
        .when(~F.col("_has_backlog"), F.lit(False))
        .when(status.isin("never_old", "npe"), F.lit(False))
        .when(status != "ok", F.lit(None).cast("boolean"))
        .otherwise(age_ms > limit_ms)  # null when 'now' is unknown
    )
    exceeded = F.when(is_size, size_check).otherwise(time_check)
    oldest = F.col("_oldest_ms")
    exact_known = F.coalesce(F.col("_exact_known"), F.lit(False))
    exact_size = (
        F.when(~exact_known, F.lit(None).cast("boolean"))
        .when(system | (size_limit < 0), F.lit(False))
        .otherwise(F.col("exact_backlog_bytes") >= size_limit)
    )
    exact_time = (
        F.when(~exact_known, F.lit(None).cast("boolean"))
        .when(system | ~time_ok | (time_limit <= 0) | oldest.isNull(), F.lit(False))
        .otherwise(now - oldest > limit_ms)
    )
    percent = F.when(is_size, F.when(size_limit > 0, F.lit(100.0) * backlog / size_limit)).otherwise(
        F.when((time_limit > 0) & time_ok, F.lit(100.0) * age_ms / limit_ms)
    )
    reason = F.coalesce(
        F.when(system, F.lit(REASON_SYSTEM_TOPIC)),
        F.when(~is_size & ~time_ok, F.lit(REASON_NO_TIME_QUOTA)),
        F.when(~known, F.lit(REASON_NO_TOPIC)),
        F.when(
            ~is_size & (time_limit > 0) & F.col("_has_backlog"),
            F.when(status == "no_entries", _fmt(REASON_NO_ENTRIES, pos=_pos_text(checked)))
            .when(status == "entry_missing", _fmt(REASON_ENTRY_MISSING, pos=_pos_text(checked)))
            .when(status == "no_close_time", _fmt(REASON_NO_CLOSE_TIME, lid=F.col("_n_lid").cast("string")))
            .when(status == "npe", _fmt(REASON_NPE, lid=F.col("_n_lid").cast("string")))
            .when((status == "ok") & now.isNull(), F.lit(REASON_NO_EXPORT_TIME)),
        ),
    )
    staged = rows.select(
        *KEY,
        "quota_type",
        system.alias("is_system_topic"),
        "policy",
        "source_level",
        "limit_size_bytes",
        "limit_time_seconds",
        "check_enabled",
        "slowest_cursor_name",
        "slowest_mark_delete_position",
        "slowest_cursor_tie",
        "dedup_at_slowest",
        "estimated_backlog_size_bytes",
        F.when(time_ok, F.when(precise, F.lit(TIME_CHECK_PRECISE)).otherwise(F.lit(TIME_CHECK_NON_PRECISE)))
        .cast("string")
        .alias("time_check_mode"),
        F.when(relevant & time_ok, checked).alias("checked_position"),
        F.when(age_ms.isNotNull(), ref_ms).alias("reference_time_ms"),
        (age_ms / F.lit(float(MILLIS_PER_SECOND))).alias("backlog_age_seconds"),
        exceeded.alias("exceeded"),
        percent.alias("percent_of_quota"),
        "exact_backlog_bytes",
        "exact_backlog_cursor_name",
        F.when(exact_known & oldest.isNotNull(), (now - oldest) / F.lit(float(MILLIS_PER_SECOND))).alias(
            "true_oldest_unacked_age_seconds"
        ),
        F.when(is_size, exact_size).otherwise(exact_time).alias("exact_exceeded"),
        "checked_at",
        reason.alias("reason"),
        time_ok.alias("_time_ok"),  # kept for is_handled below (dropped by the last select)
        *carried.values(),
    )
    # §3.4 periodic check: size first, time only when size is not exceeded (three-valued logic: an
    # undecidable time check leaves the time row's is_handled null)
    by_topic = Window.partitionBy(*KEY)
    size_exceeded = F.first(F.when(is_size, F.col("exceeded")), ignorenulls=True).over(by_topic)
    time_exceeded = F.first(F.when(~is_size, F.col("exceeded")), ignorenulls=True).over(by_topic)
    has_size_row = F.max(is_size.cast("int")).over(by_topic) == 1
    has_time_row = F.max((~is_size).cast("int")).over(by_topic) == 1
    staged = staged.select(
        "*",
        F.when(has_size_row, size_exceeded).alias("size_exceeded"),
        F.when(has_time_row, time_exceeded).alias("time_exceeded"),
    )
    active = F.col("check_enabled") & ~F.col("is_system_topic")
    is_handled = F.when(is_size, active & F.col("size_exceeded")).otherwise(
        active & time_ok & ~F.coalesce(F.col("size_exceeded"), F.lit(False)) & F.col("time_exceeded")
    )
    staged = staged.select("*", is_handled.alias("is_handled"))
    handled_type = F.first(F.when(F.col("is_handled"), F.col("quota_type")), ignorenulls=True).over(by_topic)
    return staged.select(
        *[handled_type.alias(c) if c == "handled_type" else F.col(c) for c in BREACH_COLUMNS],
        *[F.col(carried[c]).alias(c) for c in keep],
    )


#: ``quota_breaches(keep=...)``'s completeness of the exact-data view (per topic, from ``exact_backlog``).
EXACT_COMPLETE: Final = "exact_backlog_complete"
#: The columns of :func:`quota_breaches`, in order (``keep`` columns follow them).
BREACH_COLUMNS: Final = (
    "cluster",
    "topic",
    "quota_type",
    "is_system_topic",
    "policy",
    "source_level",
    "limit_size_bytes",
    "limit_time_seconds",
    "check_enabled",
    "slowest_cursor_name",
    "slowest_mark_delete_position",
    "slowest_cursor_tie",
    "dedup_at_slowest",
    "estimated_backlog_size_bytes",
    "time_check_mode",
    "checked_position",
    "reference_time_ms",
    "backlog_age_seconds",
    "size_exceeded",
    "time_exceeded",
    "exceeded",
    "percent_of_quota",
    "is_handled",
    "handled_type",
    "exact_backlog_bytes",
    "exact_backlog_cursor_name",
    "true_oldest_unacked_age_seconds",
    "exact_exceeded",
    "checked_at",
    "reason",
)


# ======================================================================================================
# §3.3 / §3.5 producer outcomes
# ======================================================================================================


def producer_outcomes(
    breaches: DataFrame,
    effective: DataFrame,
    pulsar_version: str | None = DEFAULT_PULSAR_VERSION,
) -> DataFrame:
    """What producers of each topic experience at export time, one row per ``(cluster, topic)`` (§3.3, §3.5).

    * Periodic check (``handleExceededBacklogQuota`` of the handled type, when ``check_enabled``): a
      ``producer_request_hold`` / ``producer_exception`` quota disconnects every producer
      (``producers_disconnected``) - except, from the versions with PR #20951, when the slowest durable
      cursor is the dedup cursor ``pulsar.dedup``: a dedup snapshot is taken instead
      (``dedup_snapshot_taken``, producers stay connected). When ``pulsar.dedup`` shares the slowest
      position with other durable cursors (``dedup_at_slowest`` and ``slowest_cursor_tie``), whether the
      broker's cursor heap holds it at the root is not in the export (docs §3.9): ``producers_disconnected``
      is null, ``dedup_snapshot_taken`` false, ``reason`` says why. ``consumer_backlog_eviction`` never
      touches producers.
    * Producer admission (every new or reconnecting producer, independent of ``check_enabled``): the
      ``destination_storage`` quota is checked first, then (2.8+) ``message_age``; the first exceeded quota
      with a producer policy refuses the producer with ``ServerError`` 7
      ``ProducerBlockedQuotaExceededError`` (hold) or 8 ``ProducerBlockedQuotaExceededException``
      (exception); the broker text is "Cannot create producer on topic with backlog quota exceeded" and
      the Java client raises ``PulsarClientException.ProducerBlockedQuotaExceededException`` with that text
      plus ". Error code: <name>".
    * ``holding_cursor_name`` / ``holding_mark_delete_position``: the slowest durable cursor, which holds
      the topic over its quota (null when no quota is exceeded).

    ``breaches`` is :func:`quota_breaches` output; policies and ``check_enabled`` are read from
    ``effective`` (which may be the very frame ``breaches`` is, when it carries both, e.g. the breaches
    with ``keep``: then it is read once, not joined with itself). An undecidable time check makes the
    affected outcome null (``reason`` says why).
    ``pulsar_version`` must be the one ``breaches`` was computed with; ``None`` reads each topic's version
    from the ``pulsar_version`` column of ``effective`` (which :func:`effective_quotas` adds then). Pure and
    lazy.
    """
    flags = _flags(pulsar_version, effective)
    source = with_flags(effective) if flags.per_row else effective
    policy_columns = [
        F.col("policy").alias("_policy"),
        F.coalesce(F.col("check_enabled").cast("boolean"), F.lit(DEFAULT_CHECK_ENABLED)).alias("_enabled"),
        *([F.col(FLAGS_COLUMN).alias("_fl")] if flags.per_row else []),
    ]
    breach_columns = [
        "exceeded",
        "is_handled",
        "is_system_topic",
        "slowest_cursor_name",
        "slowest_mark_delete_position",
        "slowest_cursor_tie",
        "dedup_at_slowest",
        "reason",
    ]
    if breaches is effective:  # one frame with both (the quota stage's status): no join with itself
        rows = source.select(*KEY, "quota_type", *breach_columns, *policy_columns)
    else:
        policies = source.select(*KEY, "quota_type", *policy_columns)
        rows = breaches.select(*KEY, "quota_type", *breach_columns).join(
            policies, on=[*KEY, "quota_type"], how="left"
        )

    def of(kind: str, value: Column) -> Column:
        return F.first(F.when(F.col("quota_type") == kind, value), ignorenulls=True)

    topic = rows.groupBy(*KEY).agg(
        of(QUOTA_TYPE_SIZE, F.col("exceeded")).alias("_s_exc"),
        of(QUOTA_TYPE_TIME, F.col("exceeded")).alias("_t_exc"),
        of(QUOTA_TYPE_SIZE, F.col("_policy")).alias("_s_pol"),
        of(QUOTA_TYPE_TIME, F.col("_policy")).alias("_t_pol"),
        of(QUOTA_TYPE_TIME, F.col("reason")).alias("_t_reason"),
        of(QUOTA_TYPE_SIZE, F.col("reason")).alias("_s_reason"),
        F.first(F.when(F.col("is_handled"), F.col("quota_type")), ignorenulls=True).alias("handled_type"),
        F.first(F.when(F.col("is_handled"), F.col("_policy")), ignorenulls=True).alias("handled_policy"),
        F.max(F.when(F.col("is_handled").isNull(), F.lit(1))).alias("_handled_unknown"),
        F.first(F.col("_enabled"), ignorenulls=True).alias("_enabled"),
        F.first(F.col("is_system_topic"), ignorenulls=True).alias("_system"),
        F.first(F.col("slowest_cursor_name"), ignorenulls=True).alias("_slowest"),
        F.first(F.col("slowest_mark_delete_position"), ignorenulls=True).alias("_slowest_md"),
        F.first(F.col("slowest_cursor_tie"), ignorenulls=True).alias("_tie"),
        F.first(F.col("dedup_at_slowest"), ignorenulls=True).alias("_dedup_at_slowest"),
        *([F.first("_fl", ignorenulls=True).alias("_fl")] if flags.per_row else []),
    )
    time_ok = flags.column("time_quota_supported")
    dedup_special = flags.column("dedup_snapshot_instead_of_disconnect")
    s_producer = F.col("_s_pol").isin(*PRODUCER_POLICIES)
    t_producer = F.col("_t_pol").isin(*PRODUCER_POLICIES)
    s_blocks = s_producer & F.col("_s_exc")
    t_blocks = t_producer & F.col("_t_exc") & time_ok
    # admission: size first; a null (undecidable) size or time result propagates (three-valued logic)
    blocked_type = (
        F.when(F.coalesce(s_blocks, F.lit(False)), F.lit(QUOTA_TYPE_SIZE))
        .when(s_blocks.isNull(), F.lit(None))
        .when(F.coalesce(t_blocks, F.lit(False)), F.lit(QUOTA_TYPE_TIME))
    ).cast("string")
    blocked = s_blocks | t_blocks  # true if either blocks, even when the other is undecidable
    blocked_policy = F.when(blocked_type == QUOTA_TYPE_SIZE, F.col("_s_pol")).when(
        blocked_type == QUOTA_TYPE_TIME, F.col("_t_pol")
    )
    code = F.when(blocked_policy == POLICY_PRODUCER_REQUEST_HOLD, F.lit(SERVER_ERROR_HOLD)).when(
        blocked_policy == POLICY_PRODUCER_EXCEPTION, F.lit(SERVER_ERROR_EXCEPTION)
    )
    name = F.when(code == SERVER_ERROR_HOLD, F.lit(SERVER_ERROR_HOLD_NAME)).when(
        code == SERVER_ERROR_EXCEPTION, F.lit(SERVER_ERROR_EXCEPTION_NAME)
    )
    # docs §3.9: pulsar.dedup is the heap's root only when it alone holds the slowest position
    dedup_tied = F.coalesce(F.col("_dedup_at_slowest") & F.col("_tie"), F.lit(False))
    slowest_is_dedup = F.coalesce(F.col("_slowest") == F.lit(DEDUP_CURSOR_NAME), F.lit(False)) & ~dedup_tied
    handled_producer = F.col("handled_policy").isin(*PRODUCER_POLICIES)
    dedup_snapshot = handled_producer & slowest_is_dedup & dedup_special
    dedup_unknown = handled_producer & dedup_tied & dedup_special
    handled_unknown = F.col("_handled_unknown").isNotNull() & F.col("handled_type").isNull()
    disconnected = (
        F.when(F.col("handled_type").isNotNull() & F.coalesce(dedup_unknown, F.lit(False)), F.lit(None))
        .when(F.col("handled_type").isNotNull(), F.coalesce(handled_producer, F.lit(False)) & ~dedup_snapshot)
        .when(
            handled_unknown
            & (F.col("_s_pol").isin(*PRODUCER_POLICIES) | F.col("_t_pol").isin(*PRODUCER_POLICIES)),
            F.lit(None).cast("boolean"),
        )
        .otherwise(F.lit(False))
    )
    any_exceeded = F.coalesce(F.col("_s_exc"), F.lit(False)) | F.coalesce(F.col("_t_exc"), F.lit(False))
    reason = F.coalesce(
        F.when(F.col("_system"), F.lit(REASON_SYSTEM_TOPIC)),
        F.when(disconnected.isNull() & F.coalesce(dedup_unknown, F.lit(False)), F.lit(REASON_DEDUP_TIE)),
        F.when(blocked.isNull() | disconnected.isNull(), F.coalesce(F.col("_s_reason"), F.col("_t_reason"))),
        F.when(
            (F.coalesce(F.col("_s_exc"), F.lit(False)) & F.col("_s_pol").isNull())
            | (F.coalesce(F.col("_t_exc"), F.lit(False)) & F.col("_t_pol").isNull()),
            F.lit(REASON_NO_POLICY),
        ),
    )
    return topic.select(
        *KEY,
        "handled_type",
        "handled_policy",
        disconnected.alias("producers_disconnected"),
        F.coalesce(dedup_snapshot, F.lit(False)).alias("dedup_snapshot_taken"),
        blocked.alias("new_producers_blocked"),
        blocked_type.alias("blocking_quota_type"),
        blocked_policy.alias("blocking_policy"),
        code.cast("int").alias("new_producer_error_code"),
        name.alias("new_producer_error_name"),
        F.when(code.isNotNull(), F.lit(BROKER_ERROR_MESSAGE)).alias("broker_error_message"),
        F.when(code.isNotNull(), F.lit(CLIENT_EXCEPTION)).alias("client_exception"),
        F.when(code.isNotNull(), F.concat(F.lit(BROKER_ERROR_MESSAGE + CLIENT_ERROR_SUFFIX), name)).alias(
            "client_error_message"
        ),
        F.when(any_exceeded, F.col("_slowest")).alias("holding_cursor_name"),
        F.when(any_exceeded, F.col("_slowest_md")).alias("holding_mark_delete_position"),
        reason.alias("reason"),
    )
