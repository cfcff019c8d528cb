"""Replicated-subscription snapshot assembly from exported markers (docs §4.3-§4.5, §4.7, §4.8, §11.12-13).

A snapshot started on a source cluster S leaves markers in every cluster's copy of the topic:

* S writes REQUEST (type 10) once, and a second time when S has two or more remote clusters (§4.5);
* each REQUEST lands in every remote R (type 10 with ``replicated_from = S``);
* R answers with RESPONSE (type 11, written locally in R, ``replicate_to = [S]``) carrying R's LAC;
* the RESPONSE lands back in S (``replicated_from = R``) where the replicator S->R hands it to the
  snapshot builder - only markers whose ``replicated_from`` is the replicator's own remote (§4.4, §4.7);
* the builder keeps the first answer per cluster (``putIfAbsent``), opens round 2 when round 1 is
  complete and there are two or more remotes, and after the last round writes SNAPSHOT (type 12,
  ``replicate_to = [S]``) with ``local_message_id`` = the local position of the last response.

:func:`snapshot_assembly` correlates those markers per (source cluster, topic, snapshot id) and replays
the builder (:func:`assemble_snapshots`, plain Python, one call per (source, topic) inside
:func:`~pulsar_model.engine.grouped.map_groups`) to say what the snapshot should contain, whether the
SNAPSHOT marker
agrees, and whether the snapshot is complete, pending or timed out.

Assumption (the export has positions, not the replicators' read times): the builder receives the
responses in the order of their local positions in S, i.e. the replicators of S read close to the tail.
When two replicators lag differently the broker may complete on another response; ``snapshot_matches``
then shows ``false`` with the observed ``snapshot_local_position``.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_model.engine.columns import POSITION_TYPE
from pulsar_model.engine.grouped import map_groups
from pulsar_model.engine.topic_rows import position_struct
from pulsar_model.errors import ConfigError, ContractError
from pulsar_model.replication.cache import CLUSTERS_TYPE, EXPORT_KEYS
from pulsar_model.wire.markers import MarkerType

__all__ = [
    "DEFAULT_FREQUENCY_MS",
    "DEFAULT_TIMEOUT_SECONDS",
    "REPLICATOR_PREFIX",
    "MarkerRecord",
    "assemble_snapshots",
    "snapshot_assembly",
]

Position = tuple[int, int]

#: ``replicatedSubscriptionsSnapshotTimeoutSeconds`` / ``...FrequencyMillis`` defaults (docs §4.2).
DEFAULT_TIMEOUT_SECONDS: Final = 30
DEFAULT_FREQUENCY_MS: Final = 1000
#: ``replicatorPrefix``: a replicator cursor is ``pulsar.repl.<remote>`` (docs §4.2).
REPLICATOR_PREFIX: Final = "pulsar.repl."

STATUS_COMPLETE: Final = "complete"
STATUS_PENDING: Final = "pending"
STATUS_TIMED_OUT: Final = "timed_out"
#: Markers of a snapshot whose REQUEST is not in the source's export (trimmed, or another export).
STATUS_ORPHAN: Final = "orphan"

OUTCOME_KEPT: Final = "kept"
OUTCOME_NOT_KEPT: Final = "not_kept"
OUTCOME_LATE: Final = "late"
OUTCOME_NO_REPLICATOR: Final = "ignored_no_replicator"
OUTCOME_ORPHAN: Final = "orphan"
OUTCOME_IN_FLIGHT: Final = "in_flight"

ROLE_META: Final = "meta"
ROLE_REQUEST: Final = "request"
ROLE_LANDED: Final = "landed"
ROLE_RESPONSE_WRITTEN: Final = "response_written"
ROLE_RESPONSE_RECEIVED: Final = "response_received"
ROLE_SNAPSHOT: Final = "snapshot"

REQUIRED_COLUMNS: Final = (
    "cluster",
    "topic",
    "position",
    "marker_type",
    "publish_time_ms",
    "replicated_from",
    "replicate_to",
    "snapshot_id",
    "source_cluster",
    "response_cluster",
    "response_position",
    "local_position",
    "clusters",
)


# --- pure Python: the builder replay of one (source cluster, topic) ---------------------------------------


@dataclass(frozen=True)
class MarkerRecord:
    """A marker routed to a source cluster's group (``ROLE_*``); positions are local to ``at_cluster``."""

    role: str
    snapshot_id: str | None
    at_cluster: str
    position: Position | None
    publish_time_ms: int | None = None
    replicated_from: str | None = None
    response_cluster: str | None = None
    response_position: Position | None = None
    local_position: Position | None = None
    clusters: tuple[tuple[str, Position], ...] | None = None


@dataclass
class _Response:
    cluster: str
    response_position: Position | None
    written_position: Position | None
    received_position: Position | None
    received_publish_time_ms: int | None
    via: str | None
    round: int | None = None
    outcome: str = OUTCOME_IN_FLIGHT


@dataclass
class _Snapshot:
    snapshot_id: str
    requests: list[MarkerRecord] = field(default_factory=list)
    landed: list[MarkerRecord] = field(default_factory=list)
    written: list[MarkerRecord] = field(default_factory=list)
    received: list[MarkerRecord] = field(default_factory=list)
    markers: list[MarkerRecord] = field(default_factory=list)


def _by_position(records: Iterable[MarkerRecord]) -> list[MarkerRecord]:
    return sorted(records, key=lambda r: (r.position is None, r.position or (0, 0)))


def _pair_responses(s: _Snapshot) -> list[_Response]:
    """Match each response written in R with its arrival in S: k-th written <-> k-th received (ordered)."""
    written: dict[str, list[MarkerRecord]] = {}
    for r in _by_position(s.written):
        written.setdefault(r.at_cluster, []).append(r)
    received: dict[str, list[MarkerRecord]] = {}
    for r in _by_position(s.received):
        received.setdefault(r.response_cluster or r.replicated_from or "", []).append(r)
    out: list[_Response] = []
    for cluster in sorted(set(written) | set(received)):
        w, rc = written.get(cluster, []), received.get(cluster, [])
        for k in range(max(len(w), len(rc))):
            wr = w[k] if k < len(w) else None
            rr = rc[k] if k < len(rc) else None
            lac = (rr.response_position if rr is not None else None) or (
                wr.response_position if wr is not None else None
            )
            out.append(
                _Response(
                    cluster,
                    lac,
                    None if wr is None else wr.position,
                    None if rr is None else rr.position,
                    None if rr is None else rr.publish_time_ms,
                    None if rr is None else rr.replicated_from,
                )
            )
    return out


def _clusters_out(clusters: Iterable[tuple[str, Position]] | None) -> list[dict[str, Any]] | None:
    if clusters is None:
        return None
    return [{"cluster": c, "position": position_struct(p)} for c, p in clusters]


def assemble_snapshots(
    records: Sequence[MarkerRecord],
    remotes: Sequence[str],
    *,
    timeout_ms: int,
    frequency_ms: int,
    checked_at_ms: int | None,
) -> list[dict[str, Any]]:
    """Replay the snapshot builder (docs §4.5) over one source cluster's topic; one dict per snapshot id.

    ``records`` are the markers routed to this (source, topic); ``remotes`` the source's remote clusters.
    The builder sees the received responses in local position order; a response is processed only when
    its ``replicated_from`` is a remote (§4.7 rule 4). With no SNAPSHOT marker, a response received after
    ``start + timeout`` is late (the builder may already be dropped). Status: ``complete`` (a SNAPSHOT
    marker exists), ``orphan`` (no local REQUEST), ``timed_out`` (``start + timeout < checked_at``,
    ``isTimedOut``), else ``pending``. Dict keys are the output columns of :func:`snapshot_assembly`.
    """
    remote_set = set(remotes)
    need_two_rounds = len(remote_set) > 1
    snaps: dict[str, _Snapshot] = {}
    for r in records:
        if r.snapshot_id is None or r.role == ROLE_META:
            continue
        s = snaps.setdefault(r.snapshot_id, _Snapshot(r.snapshot_id))
        {
            ROLE_REQUEST: s.requests,
            ROLE_LANDED: s.landed,
            ROLE_RESPONSE_WRITTEN: s.written,
            ROLE_RESPONSE_RECEIVED: s.received,
            ROLE_SNAPSHOT: s.markers,
        }[r.role].append(r)
    rows: list[dict[str, Any]] = []
    for s in snaps.values():
        requests = _by_position(s.requests)
        marker = _by_position(s.markers)[0] if s.markers else None
        started = requests[0].publish_time_ms if requests else None
        timeout_at = None if started is None else started + timeout_ms
        responses = _pair_responses(s)
        # the builder (docs §4.5), responses in local position order
        missing = set(remote_set)
        kept: dict[str, Position | None] = {}
        first_round_complete = done = False
        round1_at: Position | None = None
        completing: Position | None = None
        arrived = sorted(
            (x for x in responses if x.received_position is not None),
            key=lambda x: x.received_position or (0, 0),
        )
        for x in arrived:
            if x.via not in remote_set:
                x.outcome = OUTCOME_NO_REPLICATOR
                continue
            if not requests:
                x.outcome = OUTCOME_ORPHAN
                continue
            late_by_time = (
                marker is None
                and timeout_at is not None
                and x.received_publish_time_ms is not None
                and x.received_publish_time_ms > timeout_at
            )
            if done or late_by_time:
                x.outcome = OUTCOME_LATE
                continue
            x.round = 2 if first_round_complete else 1
            x.outcome = OUTCOME_NOT_KEPT if x.cluster in kept else OUTCOME_KEPT
            kept.setdefault(x.cluster, x.response_position)  # putIfAbsent: the first answer is kept
            missing.discard(x.cluster)
            if missing:
                continue
            if need_two_rounds and not first_round_complete:
                first_round_complete = True
                round1_at = x.received_position
                missing = set(remote_set)
                continue
            done = True
            completing = x.received_position
            if round1_at is None:
                round1_at = completing
        rounds_completed = (2 if need_two_rounds else 1) if done else (1 if first_round_complete else 0)
        if marker is not None:
            status = STATUS_COMPLETE
        elif not requests:
            status = STATUS_ORPHAN
        elif timeout_at is not None and checked_at_ms is not None and timeout_at < checked_at_ms:
            status = STATUS_TIMED_OUT
        else:
            status = STATUS_PENDING
        kept_sorted = sorted((c, p) for c, p in kept.items() if p is not None)
        matches: bool | None = None
        if marker is not None and requests:  # without the REQUEST the replay cannot check the marker
            observed = sorted(marker.clusters or ())
            matches = done and marker.local_position == completing and observed == kept_sorted
        landed_counts: dict[str, int] = {}
        landed_out: list[dict[str, Any]] = []
        for r in sorted(_by_position(s.landed), key=lambda r: r.at_cluster):
            landed_counts[r.at_cluster] = landed_counts.get(r.at_cluster, 0) + 1
            landed_out.append(
                {
                    "cluster": r.at_cluster,
                    "round": landed_counts[r.at_cluster],
                    "position": position_struct(r.position),
                    "publish_time_ms": r.publish_time_ms,
                }
            )
        ordered = sorted(
            responses,
            key=lambda x: (
                x.received_position is None,
                x.received_position or (0, 0),
                x.cluster,
                x.written_position or (0, 0),
            ),
        )
        snapshot_time = None if marker is None else marker.publish_time_ms
        rows.append(
            {
                "snapshot_id": s.snapshot_id,
                "status": status,
                "remote_clusters": sorted(remote_set),
                "rounds_needed": 2 if need_two_rounds else 1,
                "rounds_completed": rounds_completed,
                "request_count": len(requests),
                "request_round1_position": position_struct(requests[0].position) if requests else None,
                "request_round2_position": position_struct(requests[1].position)
                if len(requests) > 1
                else None,
                "started_ms": started,
                "timeout_at_ms": timeout_at,
                "checked_at_ms": checked_at_ms,
                "requests_landed": landed_out,
                "responses": [
                    {
                        "cluster": x.cluster,
                        "round": x.round,
                        "response_position": position_struct(x.response_position),
                        "written_position": position_struct(x.written_position),
                        "received_position": position_struct(x.received_position),
                        "received_publish_time_ms": x.received_publish_time_ms,
                        "outcome": x.outcome,
                    }
                    for x in ordered
                ],
                "kept_clusters": _clusters_out(kept_sorted),
                "round1_completed_position": position_struct(round1_at),
                "predicted_local_position": position_struct(completing),
                "snapshot_position": None if marker is None else position_struct(marker.position),
                "snapshot_local_position": None if marker is None else position_struct(marker.local_position),
                "snapshot_clusters": None if marker is None else _clusters_out(marker.clusters or ()),
                "snapshot_publish_time_ms": snapshot_time,
                "snapshot_matches": matches,
                "latency_ms": None if snapshot_time is None or started is None else snapshot_time - started,
                "late_responses": sum(1 for x in responses if x.outcome == OUTCOME_LATE),
                "_order": (started is None, started or 0, requests[0].position if requests else (0, 0)),
            }
        )
    rows.sort(key=lambda r: r["_order"])
    previous: int | None = None
    for row in rows:
        row.pop("_order")
        start = row["started_ms"]
        gap = None if start is None or previous is None else start - previous
        row["gap_from_previous_ms"] = gap
        row["gap_periods"] = None if gap is None else gap / frequency_ms
        if start is not None:
            previous = start
    return rows


# --- Spark ------------------------------------------------------------------------------------------------

_LANDED_TYPE: Final = T.ArrayType(
    T.StructType(
        [
            T.StructField("cluster", T.StringType()),
            T.StructField("round", T.IntegerType()),
            T.StructField("position", POSITION_TYPE),
            T.StructField("publish_time_ms", T.LongType()),
        ]
    )
)
_RESPONSES_TYPE: Final = T.ArrayType(
    T.StructType(
        [
            T.StructField("cluster", T.StringType()),
            T.StructField("round", T.IntegerType()),
            T.StructField("response_position", POSITION_TYPE),
            T.StructField("written_position", POSITION_TYPE),
            T.StructField("received_position", POSITION_TYPE),
            T.StructField("received_publish_time_ms", T.LongType()),
            T.StructField("outcome", T.StringType()),
        ]
    )
)
OUTPUT_FIELDS: Final = [
    T.StructField("snapshot_id", T.StringType(), False),
    T.StructField("status", T.StringType(), False),
    T.StructField("remote_clusters", T.ArrayType(T.StringType()), False),
    T.StructField("rounds_needed", T.IntegerType(), False),
    T.StructField("rounds_completed", T.IntegerType(), False),
    T.StructField("request_count", T.IntegerType(), False),
    T.StructField("request_round1_position", POSITION_TYPE, True),
    T.StructField("request_round2_position", POSITION_TYPE, True),
    T.StructField("started_ms", T.LongType(), True),
    T.StructField("timeout_at_ms", T.LongType(), True),
    T.StructField("checked_at_ms", T.LongType(), True),
    T.StructField("requests_landed", _LANDED_TYPE, False),
    T.StructField("responses", _RESPONSES_TYPE, False),
    T.StructField("kept_clusters", CLUSTERS_TYPE, False),
    T.StructField("round1_completed_position", POSITION_TYPE, True),
    T.StructField("predicted_local_position", POSITION_TYPE, True),
    T.StructField("snapshot_position", POSITION_TYPE, True),
    T.StructField("snapshot_local_position", POSITION_TYPE, True),
    T.StructField("snapshot_clusters", CLUSTERS_TYPE, True),
    T.StructField("snapshot_publish_time_ms", T.LongType(), True),
    T.StructField("snapshot_matches", T.BooleanType(), True),
    T.StructField("latency_ms", T.LongType(), True),
    T.StructField("late_responses", T.IntegerType(), False),
    T.StructField("gap_from_previous_ms", T.LongType(), True),
    T.StructField("gap_periods", T.DoubleType(), True),
]


def _pos_in(ledger: Any, entry: Any) -> Position | None:
    if ledger is None or entry is None or pd.isna(ledger) or pd.isna(entry):
        return None
    return (int(ledger), int(entry))


def _opt(v: Any) -> str | None:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return str(v)


def _clusters_in(value: Any) -> tuple[tuple[str, Position], ...] | None:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return None
    out: list[tuple[str, Position]] = []
    for item in list(value):
        if item is None or item.get("position") is None:
            continue
        p = _pos_in(item["position"].get("ledger_id"), item["position"].get("entry_id"))
        if p is not None:
            out.append((str(item.get("cluster")), p))
    return tuple(out)


def _group_fn(
    timeout_ms: int, frequency_ms: int, checked_at_ms: int | None
) -> Callable[[pd.DataFrame], list[dict[str, Any]]]:
    """One (source, topic)'s routed markers (any order) -> its snapshot rows, without the keys."""

    def fn(pdf: pd.DataFrame) -> list[dict[str, Any]]:
        rows = pdf.to_dict("records")
        remotes: list[str] = []
        clock: int | None = None
        records: list[MarkerRecord] = []
        for r in rows:
            if r["_role"] == ROLE_META:
                remotes = [str(c) for c in list(r["_remotes"] if r["_remotes"] is not None else [])]
                clock = None if pd.isna(r["_clock"]) else int(r["_clock"])
                continue
            records.append(
                MarkerRecord(
                    role=r["_role"],
                    snapshot_id=r["snapshot_id"],
                    at_cluster=r["_at"],
                    position=_pos_in(r["_p_l"], r["_p_e"]),
                    publish_time_ms=None if pd.isna(r["publish_time_ms"]) else int(r["publish_time_ms"]),
                    replicated_from=_opt(r["replicated_from"]),
                    response_cluster=_opt(r["response_cluster"]),
                    response_position=_pos_in(r["_rp_l"], r["_rp_e"]),
                    local_position=_pos_in(r["_lp_l"], r["_lp_e"]),
                    clusters=_clusters_in(r["clusters"]),
                )
            )
        now = checked_at_ms if checked_at_ms is not None else clock
        return list(
            assemble_snapshots(
                records, remotes, timeout_ms=timeout_ms, frequency_ms=frequency_ms, checked_at_ms=now
            )
        )

    return fn


def _checked_at_ms(checked_at: int | dt.datetime | None) -> int | None:
    if checked_at is None:
        return None
    if isinstance(checked_at, dt.datetime):
        if checked_at.tzinfo is None:
            raise ConfigError(
                f"checked_at={checked_at!r} has no time zone; pass an aware datetime or epoch ms."
            )
        return int(checked_at.timestamp() * 1000)
    if isinstance(checked_at, bool) or not isinstance(checked_at, int):
        raise ConfigError(f"checked_at={checked_at!r} must be epoch milliseconds (int) or an aware datetime.")
    return checked_at


def _remote_sets(markers: DataFrame, cursors: DataFrame | None, export_keys: Sequence[str]) -> DataFrame:
    """Per (source, topic[, export]): ``_remotes`` from replicator cursors, else clusters in markers."""
    tkeys = ["cluster", "topic", *export_keys]
    # the (source, topic) rows are the clusters seen with the topic: one aggregate gives both (a marker
    # without a cluster has no source, and the caller drops sourceless rows)
    seen = markers.groupBy("topic", *export_keys).agg(F.collect_set("cluster").alias("_seen"))
    out = seen.select("topic", *export_keys, "_seen", F.explode(F.col("_seen")).alias("cluster"))
    fallback = F.array_sort(F.array_except(F.col("_seen"), F.array(F.col("cluster"))))
    if cursors is not None:
        cursor_exports = [k for k in export_keys if k in cursors.columns]
        repl = (
            cursors.where(F.col("cursor_name").startswith(REPLICATOR_PREFIX))
            .groupBy("cluster", "topic", *cursor_exports)
            .agg(
                F.array_sort(
                    F.collect_set(F.substring(F.col("cursor_name"), len(REPLICATOR_PREFIX) + 1, 1 << 20))
                ).alias("_repl")
            )
        )
        out = out.join(repl, on=["cluster", "topic", *cursor_exports], how="left")
        remotes = F.coalesce(F.col("_repl"), fallback)
    else:
        remotes = fallback
    return out.select(*tkeys, remotes.alias("_remotes"))


def snapshot_assembly(
    markers: DataFrame,
    *,
    cursors: DataFrame | None = None,
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS,
    frequency_ms: int = DEFAULT_FREQUENCY_MS,
    checked_at: int | dt.datetime | None = None,
    checked_at_by_topic: DataFrame | None = None,
) -> DataFrame:
    """One row per (source cluster, topic, snapshot id): the replicated-subscription snapshot protocol
    reassembled from the ``markers`` of every cluster (docs §4.3-§4.5, §4.7, §4.8).

    Columns: ``cluster`` (the source), ``topic`` (export keys too when present), ``snapshot_id``,
    ``status`` (``complete`` | ``pending`` | ``timed_out`` | ``orphan`` = markers of a snapshot whose
    REQUEST is not in the source's export), ``remote_clusters`` (from the source's replicator cursors
    ``pulsar.repl.<remote>`` when ``cursors`` is given and has them, else every other cluster with markers
    of the topic), ``rounds_needed`` (2 with two or more remotes) and ``rounds_completed``, the REQUEST
    positions of both rounds and ``started_ms`` (round-1 publish time), ``requests_landed`` (per remote and
    round, where the copy landed), ``responses`` (per answer: responding cluster, round as the builder
    saw it, the LAC it carried, where it was written and where it landed in the source, and ``outcome``
    ``kept`` | ``not_kept`` (``putIfAbsent`` kept an earlier answer) | ``late`` (after completion or the
    timeout) | ``ignored_no_replicator`` | ``orphan`` | ``in_flight`` (written, not yet arrived)),
    ``kept_clusters`` (the snapshot's clusters by the builder replay), ``round1_completed_position``,
    ``predicted_local_position`` (the last response's local position), the SNAPSHOT marker
    (``snapshot_position``, ``snapshot_local_position``, ``snapshot_clusters``,
    ``snapshot_publish_time_ms``) and ``snapshot_matches`` (the marker agrees with the replay; null without
    a marker or without the REQUEST, e.g. trimmed), ``latency_ms`` (REQUEST -> SNAPSHOT publish times),
    ``late_responses`` and the cadence: ``gap_from_previous_ms`` between starts of consecutive snapshots
    of the same source/topic and ``gap_periods`` = gap / ``frequency_ms``.

    ``checked_at`` (epoch ms or an aware datetime) is "now" for ``isTimedOut`` (``start + timeout <
    now``); by default the newest marker publish time of the source cluster in the export.
    ``checked_at_by_topic`` (``cluster, topic, checked_at_ms``: one row per source cluster's topic, e.g.
    its export time) replaces that default per (source, topic) when ``checked_at`` is None - one pass for
    sources exported at different times; a (source, topic) without a row has no "now" (never
    ``timed_out``). Runs per (source, topic) in :func:`~pulsar_model.engine.grouped.map_groups`; the builder
    receives responses in local position order (module docstring). Pure and lazy.
    """
    missing = [c for c in REQUIRED_COLUMNS if c not in markers.columns]
    if missing:
        raise ContractError(f"markers lacks column(s) {missing}; see schemas/markers.yaml.")
    if timeout_seconds < 0 or frequency_ms <= 0:
        raise ConfigError(
            f"timeout_seconds={timeout_seconds} must be >= 0 and frequency_ms={frequency_ms} > 0 (docs §4.2)."
        )
    now_ms = _checked_at_ms(checked_at)
    export_keys = [k for k in EXPORT_KEYS if k in markers.columns]
    m = markers.where(
        F.col("marker_type").between(
            int(MarkerType.REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST),
            int(MarkerType.REPLICATED_SUBSCRIPTION_SNAPSHOT),
        )
    )
    local = F.col("replicated_from").isNull()
    mt = F.col("marker_type")
    request, response = (
        int(MarkerType.REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST),
        int(MarkerType.REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE),
    )
    target = F.explode_outer(F.col("replicate_to"))
    routed_parts: list[tuple[Column, Column, str]] = [
        (local & (mt == request), F.col("cluster"), ROLE_REQUEST),
        (
            ~local & (mt == request),
            F.coalesce(F.col("source_cluster"), F.col("replicated_from")),
            ROLE_LANDED,
        ),
        (~local & (mt == response), F.col("cluster"), ROLE_RESPONSE_RECEIVED),
        (local & (mt == int(MarkerType.REPLICATED_SUBSCRIPTION_SNAPSHOT)), F.col("cluster"), ROLE_SNAPSHOT),
    ]
    flat_cols = [
        F.col("snapshot_id").cast("string").alias("snapshot_id"),
        F.col("cluster").alias("_at"),
        F.col("position.ledger_id").cast("long").alias("_p_l"),
        F.col("position.entry_id").cast("long").alias("_p_e"),
        F.col("publish_time_ms").cast("long").alias("publish_time_ms"),
        F.col("replicated_from").cast("string").alias("replicated_from"),
        F.col("response_cluster").cast("string").alias("response_cluster"),
        F.col("response_position.ledger_id").cast("long").alias("_rp_l"),
        F.col("response_position.entry_id").cast("long").alias("_rp_e"),
        F.col("local_position.ledger_id").cast("long").alias("_lp_l"),
        F.col("local_position.entry_id").cast("long").alias("_lp_e"),
        F.col("clusters").cast(CLUSTERS_TYPE).alias("clusters"),
        F.lit(None).cast(T.ArrayType(T.StringType())).alias("_remotes"),
        F.lit(None).cast("long").alias("_clock"),
    ]
    parts = [
        m.where(cond).select(
            *export_keys, src.alias("_source"), "topic", F.lit(role).alias("_role"), *flat_cols
        )
        for cond, src, role in routed_parts
    ]
    written = (
        m.where(local & (mt == response))
        .select("*", target.alias("_target"))
        .select(
            *export_keys,
            F.col("_target").alias("_source"),
            "topic",
            F.lit(ROLE_RESPONSE_WRITTEN).alias("_role"),
            *flat_cols,
        )
    )
    if checked_at_by_topic is None:
        clocks = markers.groupBy("cluster", *export_keys).agg(
            F.max("publish_time_ms").cast("long").alias("_c")
        )
        clock_keys = ["cluster", *export_keys]
    else:
        clocks = checked_at_by_topic.select(
            "cluster", "topic", F.col("checked_at_ms").cast("long").alias("_c")
        ).distinct()
        clock_keys = ["cluster", "topic"]
    marker_fields = parts[0].schema.fields[len(export_keys) + 3 : -2]
    meta = (
        _remote_sets(m, cursors, export_keys)
        .join(clocks, on=clock_keys, how="left")
        .select(
            *export_keys,
            F.col("cluster").alias("_source"),
            "topic",
            F.lit(ROLE_META).alias("_role"),
            *[F.lit(None).cast(f.dataType).alias(f.name) for f in marker_fields],
            F.col("_remotes"),
            F.col("_c").alias("_clock"),
        )
    )
    routed = parts[0]
    for p in [*parts[1:], written, meta]:
        routed = routed.unionByName(p)
    routed = routed.where(F.col("_source").isNotNull())
    keys = [*export_keys, "_source", "topic"]
    key_fields = [f for f in routed.schema.fields if f.name in keys]
    schema = T.StructType([*key_fields, *OUTPUT_FIELDS])
    result = map_groups(routed, keys, _group_fn(timeout_seconds * 1000, frequency_ms, now_ms), schema)
    return result.select(
        F.col("_source").alias("cluster"), "topic", *export_keys, *[f.name for f in OUTPUT_FIELDS]
    )
