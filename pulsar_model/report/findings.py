"""Findings in an operator's words: what was found, why it matters, and the next step.

:func:`describe` turns one collected :class:`~pulsar_model.report.queries.FindingRow` into a
:class:`Finding`: a one-line title, why it matters (without the analysis' jargon), and the next step: the
``pulsar-admin`` command that shows or fixes it on the cluster, or the table to query for the details.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pulsar_model.report.queries import FindingRow
from pulsar_model.report.text import count, duration, size


@dataclass(frozen=True)
class Finding:
    """A finding ready to show: where, what, why it matters, what to do next."""

    severity: str
    kind: str
    cluster: str | None
    topic: str | None
    subscription: str | None
    title: str
    why: str
    next_step: str

    def where(self) -> str:
        """``us-east · persistent://t/ns/x · sub`` (the parts that are known)."""
        return " · ".join(p for p in (self.cluster, self.topic, self.subscription) if p)


Text = tuple[str, str, str]


def _quota(f: FindingRow) -> Text:
    facts = f.facts
    time_quota = facts.get("quota_type") == "message_age"
    limit = duration(facts.get("limit_time_seconds")) if time_quota else size(facts.get("limit_size_bytes"))
    kind = "age" if time_quota else "size"
    policy = facts.get("policy") or "?"
    effect = {
        "consumer_backlog_eviction": "drops the oldest unacknowledged messages of the slowest subscriptions",
        "producer_request_hold": "holds new messages from producers (they time out)",
        "producer_exception": "disconnects producers and refuses new ones",
    }.get(policy, f"applies policy {policy}")
    when = "at its next quota check" if facts.get("handled") == "true" else "once the size check is clear"
    percent = facts.get("percent")
    title = f"backlog {kind} quota breached: {percent}% of {limit}"
    why = (
        f"The topic's backlog is over its {kind} quota (set at {facts.get('source_level') or '?'} level); "
        f"the broker {effect} {when}. The slowest subscription is {f.subscription or '?'}."
    )
    step = (
        f"pulsar-admin topics stats {f.topic} (which subscription is behind, are its consumers connected); "
        f"pulsar-admin topics get-backlog-quotas {f.topic} to see the limit; what eviction would drop: "
        "table quota_evictions"
    )
    return title, why, step


_ERRORS: tuple[tuple[str, str], ...] = (
    (
        r"Invalid range",
        "its acknowledged ranges are inconsistent (a range ends before it starts), so the broker fails with "
        "IllegalArgumentException whenever it rebuilds them: skips, resets and backlog checks on this "
        "subscription error out",
    ),
    (r"skipEntries", "a skip of this many entries is refused by the broker (IllegalArgumentException)"),
)


def _cursor_error(f: FindingRow) -> Text:
    raw = f.facts.get("error") or ""
    meaning = next((text for pattern, text in _ERRORS if re.search(pattern, raw)), None)
    why = (
        f"The subscription's stored state is one the broker cannot work with: {meaning}."
        if meaning
        else f"The broker would fail on this subscription's stored state ({raw})."
    )
    step = (
        f"pulsar-admin topics stats-internal {f.topic} (the cursor's markDeletePosition and "
        f"individuallyDeletedMessages); if it is stuck, pulsar-admin topics reset-cursor {f.topic} -s "
        f"{f.subscription} -m <position>; details: table cursor_backlog"
    )
    return "subscription state the broker cannot use", why, step


_STATUS_WHY = {
    "STALL": "its consumers stopped acknowledging while producers keep writing: the backlog only grows",
    "STOP": "its consumers stopped acknowledging and the topic is idle: nothing has moved for over a day",
    "REWIND": "its acknowledged position went backwards (a reset or a new consumer re-reading old data)",
    "WARN": "its consumers are acknowledging, but not fast enough: the backlog has not shrunk in any run",
}


def _status(f: FindingRow) -> Text:
    status = f.facts.get("status") or "?"
    title = f"subscription {status}: {count(f.facts.get('backlog_entries'))} entries behind"
    why = (
        f"Over the last {f.facts.get('runs') or '?'} runs {_STATUS_WHY.get(status, status)}. "
        f"({f.facts.get('reason') or ''})"
    )
    step = (
        f"pulsar-admin topics stats {f.topic} (consumers of {f.subscription}, msgRateOut, unackedMessages); "
        "the trend: table subscription_history"
    )
    return title, why, step


def _stuck(f: FindingRow) -> Text:
    title = f"cursor unmoved for {f.facts.get('exports')} exports while producers write"
    why = (
        f"The subscription's acknowledged position ({f.facts.get('mark_delete')}) has not moved since "
        f"{f.facts.get('since')}, while new messages kept arriving: its backlog grows and keeps ledgers "
        "alive."
    )
    step = (
        f"pulsar-admin topics stats {f.topic} (is anyone consuming {f.subscription}?); table unmoved_cursors"
    )
    return title, why, step


def _replication(f: FindingRow) -> Text:
    status = f.facts.get("status") or "?"
    target = f.facts.get("target") or "?"
    title = (
        f"replicated subscription {status} towards {target}: {count(f.facts.get('behind'))} entries behind"
    )
    why = (
        f"Consumers failing over to {target} would restart from an older position and receive again what "
        f"they already processed. ({f.facts.get('reason') or ''})"
    )
    step = (
        f"pulsar-admin topics stats {f.topic} on {f.cluster} (replication.{target}.connected, "
        "replicationBacklog); table replication_positions"
    )
    return title, why, step


_REPLICATION_STEP = {
    "ack_holes_hold_mark_delete": "pulsar-admin topics stats-internal {topic} (the cursor's "
    "individuallyDeletedMessages: which messages stay unacknowledged)",
    "snapshots_never_complete": "pulsar-admin topics stats {topic} on every cluster (are the replicators "
    "connected?)",
    "snapshots_timing_out": "pulsar-admin topics stats {topic} on every cluster (replication delay); the "
    "broker setting replicatedSubscriptionsSnapshotTimeoutSeconds",
    "replicator_disconnected": "pulsar-admin topics stats {topic} (replication.<cluster>.connected, "
    "replicationBacklog)",
}


def _replication_finding(f: FindingRow) -> Text:
    kind = f.facts.get("finding") or "?"
    step = _REPLICATION_STEP.get(kind, "pulsar-admin topics stats {topic}").format(topic=f.topic)
    return kind.replace("_", " "), f.facts.get("detail") or "", f"{step}; table replication_findings"


def _long_open(f: FindingRow) -> Text:
    title = f"transaction {f.facts.get('txn')} open for {duration(f.facts.get('open_seconds'))}"
    why = (
        "An open transaction holds every reader of the topic back at its first message (maxReadPosition): "
        "nothing written after it is delivered until it commits, aborts or times out."
    )
    step = (
        f"pulsar-admin transactions transaction-metadata -m {f.facts.get('most')} -l {f.facts.get('least')}; "
        "table transactions"
    )
    return title, why, step


def _holdback(f: FindingRow) -> Text:
    title = f"{count(f.facts.get('entries'))} entries held back by an open transaction"
    why = f"Readers do not get these entries until transaction {f.facts.get('txn')} ends."
    return title, why, "table transaction_holdback"


def _schema(f: FindingRow) -> Text:
    title = f"schema version {f.facts.get('version')} incompatible under {f.facts.get('strategy')}"
    why = (
        "Registering this schema version in order would be refused by the registry: producers using it "
        f"fail to connect. ({f.facts.get('reason') or ''})"
    )
    step = f"pulsar-admin schemas get {f.topic} --version {f.facts.get('version')}; table schema_verdicts"
    return title, why, step


def _failover_mismatch(f: FindingRow) -> Text:
    title = "active failover consumer differs from the broker's stats"
    why = (
        f"The broker's rule picks {f.facts.get('picked')} but the stats name {f.facts.get('stats')}: the "
        "stats may be stale, or the configured Pulsar version or consistent-hashing setting is not the "
        "cluster's."
    )
    return title, why, f"pulsar-admin topics stats {f.topic} (activeConsumerName); table failover_assignments"


def _failover_imbalance(f: FindingRow) -> Text:
    title = f"failover load uneven: spread of {f.facts.get('spread')} partitions"
    why = (
        f"{f.facts.get('partitions')} partitions over {f.facts.get('consumers')} consumers: some consumers "
        "are active on far more partitions than others."
    )
    return title, why, "table failover_balance; table failover_what_ifs for a consumer more or less"


def _compaction(f: FindingRow) -> Text:
    title = f"compaction would start and save {size(f.facts.get('saved'))} ({f.facts.get('ratio')}%)"
    why = "The topic's backlog passed its compaction threshold: the broker compacts it at its next check."
    return title, why, f"pulsar-admin topics compaction-status {f.topic}; table compaction_summary"


def _duplicates(f: FindingRow) -> Text:
    target = f.facts.get("target") or "?"
    title = f"failover to {target} would redeliver {count(f.facts.get('messages'))} messages"
    why = "Consumers moving to the other cluster now would receive again messages they already acknowledged."
    return title, why, "table replication_failover_duplicates"


def _pinning(f: FindingRow) -> Text:
    title = f"one slow subscription keeps {size(f.facts.get('bytes'))} of ledgers alive"
    why = (
        f"{f.subscription} is the slowest subscription: {count(f.facts.get('ledgers'))} ledgers cannot be "
        "deleted until it moves (retention aside)."
    )
    return title, why, f"pulsar-admin topics stats-internal {f.topic}; table topic_pinning"


def _quarantine(f: FindingRow) -> Text:
    title = f"{count(f.facts.get('records'))} input records of {f.facts.get('source')} quarantined"
    why = (
        "These records of the export could not be read and are left out of every analysis. First reason "
        f"({f.facts.get('reason_code')}, {f.facts.get('file')}): {f.facts.get('reason')}"
    )
    return title, why, f"table quarantine (source = '{f.facts.get('source')}')"


_DESCRIBE: Mapping[str, Callable[[FindingRow], Text]] = {
    "quota_breach": _quota,
    "cursor_error": _cursor_error,
    "subscription_status": _status,
    "stuck_cursor": _stuck,
    "replication_status": _replication,
    "replication_finding": _replication_finding,
    "long_open_transaction": _long_open,
    "transaction_holdback": _holdback,
    "schema_incompatible": _schema,
    "failover_mismatch": _failover_mismatch,
    "failover_imbalance": _failover_imbalance,
    "compaction_trigger": _compaction,
    "failover_duplicates": _duplicates,
    "pinned_ledgers": _pinning,
    "quarantined_records": _quarantine,
}


def describe(row: FindingRow) -> Finding:
    """The words of one finding (see the module docstring)."""
    title, why, step = _DESCRIBE[row.kind](row)
    return Finding(row.severity, row.kind, row.cluster, row.topic, row.subscription, title, why, step)
