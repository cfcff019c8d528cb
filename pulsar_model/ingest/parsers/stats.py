"""Parser of ``pulsar-admin topics stats`` documents (TopicStats, docs §10.3).

One record (one topic or partition) gives one ``topic_stats`` row, one ``subscription_stats`` row per
subscription and one ``stats_consumers`` row per consumer, in listed (arrival) order. These in-memory
tables are joined by the ingest pipeline onto ``managed_ledgers``, ``cursors`` and ``consumers``.
``partitioned-stats --per-partition`` wrappers give one record per partition; the aggregated top level
of a partitioned document is not topic data (partitions add up and some fields are overwritten by the
last partition, docs §10.3) and is ignored, or quarantined when it is all the document holds.
"""

from __future__ import annotations

from typing import Any, Final

from pulsar_model.ingest.parsers.common import (
    NOT_AN_OBJECT,
    Fields,
    Record,
    Row,
    Rows,
    require_object,
    show,
)

#: Reason for a partitioned-stats document exported without per-partition data.
AGGREGATE_REASON: Final = "partitioned-stats without --per-partition: export with --per-partition"

_HINT: Final = "re-export with `pulsar-admin topics stats`, which always writes it"

TOPIC_FIELDS: Final = frozenset(
    {
        # 2.8/2.9 (docs §10.3)
        "msgRateIn", "msgThroughputIn", "msgRateOut", "msgThroughputOut", "bytesInCounter",
        "msgInCounter", "bytesOutCounter", "msgOutCounter", "averageMsgSize", "msgChunkPublished",
        "storageSize", "backlogSize", "offloadedStorageSize", "lastOffloadLedgerId",
        "lastOffloadSuccessTimeStamp", "lastOffloadFailureTimeStamp", "publishers", "waitingPublishers",
        "subscriptions", "replication", "deduplicationStatus", "topicEpoch",
        "nonContiguousDeletedMessagesRanges", "nonContiguousDeletedMessagesRangesSerializedSize",
        "compaction",
        # 3.x/4.x additions
        "systemTopicBytesInCounter", "bytesOutInternalCounter", "backlogQuotaLimitSize",
        "backlogQuotaLimitTime", "oldestBacklogMessageAgeSeconds", "oldestBacklogMessageSubscriptionName",
        "publishRateLimitedTimes", "earliestMsgPublishTimeInBacklogs", "ongoingTxnCount", "abortedTxnCount",
        "committedTxnCount", "delayedMessageIndexSizeInBytes", "ownerBroker",
        # partitioned documents
        "metadata", "partitions",
    }
)  # fmt: skip
SUBSCRIPTION_FIELDS: Final = frozenset(
    {
        "msgRateOut", "msgThroughputOut", "bytesOutCounter", "msgOutCounter", "msgRateRedeliver",
        "chunkedMessageRate", "msgBacklog", "backlogSize", "msgBacklogNoDelayed",
        "blockedSubscriptionOnUnackedMsgs", "msgDelayed", "unackedMessages", "type", "activeConsumerName",
        "msgRateExpired", "totalMsgExpired", "lastExpireTimestamp", "lastConsumedFlowTimestamp",
        "lastConsumedTimestamp", "lastAckedTimestamp", "lastMarkDeleteAdvancedTimestamp", "consumers",
        "isDurable", "durable", "isReplicated", "replicated", "allowOutOfOrderDelivery", "keySharedMode",
        "consumersAfterMarkDeletePosition", "nonContiguousDeletedMessagesRanges",
        "nonContiguousDeletedMessagesRangesSerializedSize", "subscriptionProperties",
        # 3.x additions
        "messageAckRate", "earliestMsgPublishTimeInBacklog", "filterProcessedMsgCount",
        "filterAcceptedMsgCount", "filterRejectedMsgCount", "filterRescheduledMsgCount",
        "delayedMessageIndexSizeInBytes",
    }
)  # fmt: skip
CONSUMER_FIELDS: Final = frozenset(
    {
        "msgRateOut", "msgThroughputOut", "bytesOutCounter", "msgOutCounter", "msgRateRedeliver",
        "chunkedMessageRate", "consumerName", "availablePermits", "unackedMessages", "avgMessagesPerEntry",
        "blockedConsumerOnUnackedMsgs", "readPositionWhenJoining", "address", "connectedSince",
        "clientVersion", "lastAckedTimestamp", "lastConsumedTimestamp", "keyHashRanges", "metadata",
    }
)  # fmt: skip
REPLICATOR_FIELDS: Final = frozenset(
    {
        "msgRateIn", "msgThroughputIn", "msgRateOut", "msgThroughputOut", "msgRateExpired",
        "replicationBacklog", "connected", "replicationDelayInSeconds", "inboundConnection",
        "inboundConnectedSince", "outboundConnection", "outboundConnectedSince",
    }
)  # fmt: skip


def parse_stats(payload: Any, record: Record) -> Rows | None:
    """Rows of one topic-stats document (one topic or one partition)."""
    doc = require_object(payload, record, "topic stats (TopicStats)")
    if doc is None:
        return None
    top = Fields(record, doc, "", "topic_stats", TOPIC_FIELDS, _HINT)
    storage = top.long("storageSize", minimum=0)
    backlog = top.long("backlogSize")
    msg_in = top.long("msgInCounter", minimum=0)
    publishers = _list_length(top, "publishers")
    quota_size = top.long("backlogQuotaLimitSize")
    quota_time = top.long("backlogQuotaLimitTime")
    oldest_age = top.long("oldestBacklogMessageAgeSeconds")
    dedup = top.string("deduplicationStatus")
    replication = _replication(top, record)
    subscriptions, consumers = _subscriptions(top, record)
    if not record.ok:
        return None
    cluster, topic = record.ctx.cluster, record.topic or ""
    topic_row: Row = {
        "cluster": cluster,
        "topic": topic,
        "stats_storage_size_bytes": storage,
        "stats_backlog_size_bytes": backlog,
        "stats_msg_in_counter": msg_in,
        "stats_publishers": publishers,
        "stats_backlog_quota_limit_size_bytes": quota_size,
        "stats_backlog_quota_limit_time_seconds": quota_time,
        "stats_oldest_backlog_message_age_seconds": oldest_age,
        "stats_deduplication_status": dedup,
        "stats_replication": replication,
    }
    for row in (*subscriptions, *consumers):
        row["cluster"] = cluster
        row["topic"] = topic
    return {"topic_stats": [topic_row], "subscription_stats": subscriptions, "stats_consumers": consumers}


def _list_length(fields: Fields, key: str) -> int | None:
    value = fields.get(key)
    if value is None:
        return None
    if not isinstance(value, list):
        fields.bad(key, value, "a list")
        return None
    return len(value)


def _replication(top: Fields, record: Record) -> list[Row] | None:
    value = top.get("replication")
    if value is None:
        return None
    if not isinstance(value, dict):
        top.bad("replication", value, "a JSON object keyed by remote cluster")
        return None
    rows: list[Row] = []
    for remote, item in value.items():
        where = f"replication[{show(remote)}]"
        if not isinstance(item, dict):
            record.problem(NOT_AN_OBJECT, f"{where} {show(item)} is not a ReplicatorStats object")
            continue
        rep = Fields(record, item, where, "replication", REPLICATOR_FIELDS, _HINT)
        rows.append(
            {
                "remote_cluster": remote,
                "replication_backlog": rep.long("replicationBacklog", minimum=0),
                "connected": rep.boolean("connected"),
                "replication_delay_seconds": rep.long("replicationDelayInSeconds"),
                "msg_rate_out": rep.double("msgRateOut"),
            }
        )
    return rows


def _subscriptions(top: Fields, record: Record) -> tuple[list[Row], list[Row]]:
    value = top.get("subscriptions")
    if value is None:
        top.missing("subscriptions")
        return [], []
    if not isinstance(value, dict):
        top.bad("subscriptions", value, "a JSON object keyed by subscription name")
        return [], []
    subscriptions: list[Row] = []
    consumers: list[Row] = []
    for name, item in value.items():
        where = f"subscription '{name}'"
        if not isinstance(item, dict):
            record.problem(NOT_AN_OBJECT, f"{where} {show(item)} is not a SubscriptionStats object")
            continue
        sub = Fields(record, item, where, "subscription_stats", SUBSCRIPTION_FIELDS, _HINT)
        sub_type = sub.string("type")
        active = sub.string("activeConsumerName")
        durable = sub.boolean("isDurable")
        if durable is None:
            durable = sub.boolean("durable")
        replicated = sub.boolean("isReplicated")
        if replicated is None:
            replicated = sub.boolean("replicated")
        consumer_list = sub.get("consumers")
        if consumer_list is not None and not isinstance(consumer_list, list):
            sub.bad("consumers", consumer_list, "a list of ConsumerStats objects")
            consumer_list = None
        for order, consumer in enumerate(consumer_list or []):
            row = _consumer(record, consumer, f"{where} consumers[{order}]", order, name, sub_type, active)
            if row is not None:
                consumers.append(row)
        subscriptions.append(
            {
                "cursor_name": name,
                "subscription_type": sub_type,
                "is_durable": durable,
                "is_replicated": replicated,
                "stats_msg_backlog": sub.long("msgBacklog"),
                "stats_backlog_size_bytes": sub.long("backlogSize"),
                "stats_active_consumer_name": active,
                "stats_consumer_count": None if consumer_list is None else len(consumer_list),
                "stats_last_mark_delete_advanced_at": sub.timestamp("lastMarkDeleteAdvancedTimestamp"),
            }
        )
    return subscriptions, consumers


def _consumer(
    record: Record,
    item: Any,
    where: str,
    order: int,
    subscription: str,
    sub_type: str | None,
    active: str | None,
) -> Row | None:
    if not isinstance(item, dict):
        record.problem(NOT_AN_OBJECT, f"{where} {show(item)} is not a ConsumerStats object")
        return None
    con = Fields(record, item, where, "stats_consumers", CONSUMER_FIELDS, _HINT)
    name = con.string("consumerName", required=True)
    row: Row = {
        "subscription": subscription,
        "subscription_type": sub_type,
        "consumer_name": name,
        "connect_order": order,
        "address": con.string("address"),
        "connected_since": con.string("connectedSince"),
        "client_version": con.string("clientVersion"),
        "available_permits": con.long("availablePermits"),
        "unacked_messages": con.long("unackedMessages"),
        "is_active_in_stats": active is not None and name == active,
    }
    return row if name is not None else None
