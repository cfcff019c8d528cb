"""Plain-Python oracle of the replication detectors that need no ledger arithmetic (docs §4.2-§4.5).

Written from the kinds' definitions in ``pulsar_model.replication.detectors`` (its module docstring) and
docs/semantics/replicated-subscriptions.md, not from its code: each kind is a loop over the rows.

Kinds covered (``ack_holes_hold_mark_delete`` and ``marker_backlog_on_idle_subscription`` count entries
through the ledger list and have their own oracles; ``snapshot_cache_evicted_useful`` replays the cache):

* ``snapshots_never_complete`` - a (cluster, topic) whose own markers (``replicated_from`` unset) hold
  snapshot REQUESTs but no SNAPSHOT at all; measure: the snapshot ids requested (a request without an id
  counts as one id of its own); critical;
* ``snapshots_timing_out`` - requested ids, first requested more than the timeout before the topic's
  export time, for which no own SNAPSHOT marker with that id exists; measure: how many; warning; none
  when the topic has no export time;
* ``replicator_disconnected`` - a replicator cursor whose stats say not connected; related cluster: its
  remote cluster, measure: its replication backlog; critical;
* ``system_subscription_replicated`` - a cursor flagged replicated that is the compaction cursor or not a
  subscription at all; warning;
* ``consumers_on_multiple_clusters`` - a replicated subscription with listed consumers on more than one
  cluster (only clusters where the cursor is a replicated subscription count): one row per such cluster,
  measure: the number of clusters; warning.

Rows are dicts (column -> value); ``exported_at_ms`` maps (cluster, topic) to the export time in epoch
milliseconds. The result is a sorted list of ``(kind, severity, cluster, topic, subscription,
related_cluster, measure)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

REQUEST, SNAPSHOT = 10, 12
Finding = tuple[str, str, str, str, str | None, str | None, int | None]


def _snapshot_findings(
    markers: Sequence[Mapping[str, Any]], exported_at_ms: Mapping[tuple[str, str], int], timeout_s: int
) -> list[Finding]:
    out: list[Finding] = []
    topics = sorted({(m["cluster"], m["topic"]) for m in markers})
    for cluster, topic in topics:
        own = [
            m
            for m in markers
            if m["cluster"] == cluster and m["topic"] == topic and m["replicated_from"] is None
        ]
        requests = [m for m in own if m["marker_type"] == REQUEST]
        snapshots = [m for m in own if m["marker_type"] == SNAPSHOT]
        if not requests:
            continue
        first_asked: dict[str | None, int] = {}
        for m in requests:
            sid = m["snapshot_id"]
            first_asked[sid] = min(first_asked.get(sid, m["publish_time_ms"]), m["publish_time_ms"])
        if not snapshots:
            out.append(("snapshots_never_complete", "critical", cluster, topic, None, None, len(first_asked)))
        completed = {m["snapshot_id"] for m in snapshots if m["snapshot_id"] is not None}
        exported = exported_at_ms.get((cluster, topic))
        if exported is None:
            continue
        late = [
            sid
            for sid, asked in first_asked.items()
            if sid not in completed and asked + timeout_s * 1000 < exported
        ]
        if late:
            out.append(("snapshots_timing_out", "warning", cluster, topic, None, None, len(late)))
    return out


def _cursor_findings(cursors: Sequence[Mapping[str, Any]]) -> list[Finding]:
    out: list[Finding] = []
    for c in cursors:
        if c["cursor_kind"] == "replicator" and c["stats_replicator_connected"] is False:
            out.append(
                (
                    "replicator_disconnected",
                    "critical",
                    c["cluster"],
                    c["topic"],
                    None,
                    c["replicator_remote_cluster"],
                    c["stats_replication_backlog"],
                )
            )
        system = c["cursor_kind"] != "subscription" or c["cursor_name"] == "__compaction"
        if system and c["is_replicated"]:
            out.append(
                (
                    "system_subscription_replicated",
                    "warning",
                    c["cluster"],
                    c["topic"],
                    c["cursor_name"],
                    None,
                    None,
                )
            )
    return out


def _multi_cluster(
    cursors: Sequence[Mapping[str, Any]], consumers: Sequence[Mapping[str, Any]]
) -> list[Finding]:
    replicated = {
        (c["cluster"], c["topic"], c["cursor_name"])
        for c in cursors
        if c["cursor_kind"] == "subscription" and c["is_replicated"]
    }
    clusters: dict[tuple[str, str], set[str]] = {}
    for k in consumers:
        if (k["cluster"], k["topic"], k["subscription"]) in replicated:
            clusters.setdefault((k["topic"], k["subscription"]), set()).add(k["cluster"])
    out: list[Finding] = []
    for (topic, subscription), where in clusters.items():
        if len(where) > 1:
            for cluster in where:
                out.append(
                    (
                        "consumers_on_multiple_clusters",
                        "warning",
                        cluster,
                        topic,
                        subscription,
                        None,
                        len(where),
                    )
                )
    return out


def replication_findings(
    markers: Sequence[Mapping[str, Any]],
    cursors: Sequence[Mapping[str, Any]],
    consumers: Sequence[Mapping[str, Any]],
    exported_at_ms: Mapping[tuple[str, str], int],
    timeout_s: int,
) -> list[Finding]:
    """The covered kinds' findings (module docstring), sorted."""
    found = [
        *_snapshot_findings(markers, exported_at_ms, timeout_s),
        *_cursor_findings(cursors),
        *_multi_cluster(cursors, consumers),
    ]
    return sorted(found, key=lambda f: tuple("" if v is None else str(v) for v in f))
