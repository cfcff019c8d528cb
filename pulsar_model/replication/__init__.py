"""Replicated subscriptions (SPEC §4): snapshot assembly from markers and snapshot-cache replay.

* :func:`snapshot_assembly` - one row per (source cluster, topic, snapshot id): requests, where they
  landed, responses, what the builder kept, the SNAPSHOT marker, status, latency and cadence (§4.4-§4.5).
* :func:`replay_snapshot_cache` - the per-subscription snapshot cache (old / PR #25044 generations, §4.6)
  replayed over ``add``/``advance`` events; :func:`snapshot_cache_events` derives those events from an
  export and :func:`predicted_updates` compares the predicted UPDATE markers with the observed ones.
"""

from pulsar_model.replication.cache import (
    MAX_CACHED_NEW,
    MAX_CACHED_OLD,
    CachedSnapshot,
    NewSnapshotCache,
    OldSnapshotCache,
    predicted_updates,
    replay_snapshot_cache,
    snapshot_cache_events,
    uses_new_snapshot_cache,
)
from pulsar_model.replication.snapshots import assemble_snapshots, snapshot_assembly

__all__ = [
    "MAX_CACHED_NEW",
    "MAX_CACHED_OLD",
    "CachedSnapshot",
    "NewSnapshotCache",
    "OldSnapshotCache",
    "assemble_snapshots",
    "predicted_updates",
    "replay_snapshot_cache",
    "snapshot_assembly",
    "snapshot_cache_events",
    "uses_new_snapshot_cache",
]
