"""Replicated subscriptions (docs §4): snapshot assembly, snapshot-cache replay, translation, duplicates.

* :func:`snapshot_assembly` - one row per (source cluster, topic, snapshot id): requests, where they
  landed, responses, what the builder kept, the SNAPSHOT marker, status, latency and cadence (§4.4-§4.5).
* :func:`replay_snapshot_cache` - the per-subscription snapshot cache (old / PR #25044 generations, §4.6)
  replayed over ``add``/``advance`` events; :func:`snapshot_cache_events` derives those events from an
  export and :func:`predicted_updates` compares the predicted UPDATE markers with the observed ones.
* :func:`position_translation` - per (subscription, source, target): the remote mark-delete the source's
  last UPDATE sets beside the target's actual one, and the status (§4.4, §4.8).
* :func:`failover_duplicates` - per the same pairs: what a failover to the target would redeliver although
  the source acknowledged it (§4.8).
* :func:`replication_findings` - the stall and risk detectors; :func:`snapshot_cache_evicted_useful` the
  one built on the cache replay (useful snapshots evicted, §4.6).
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
from pulsar_model.replication.detectors import (
    evicted_useful_snapshots,
    replication_findings,
    snapshot_cache_evicted_useful,
)
from pulsar_model.replication.duplicates import failover_duplicates
from pulsar_model.replication.snapshots import assemble_snapshots, snapshot_assembly
from pulsar_model.replication.translation import position_translation

__all__ = [
    "MAX_CACHED_NEW",
    "MAX_CACHED_OLD",
    "CachedSnapshot",
    "NewSnapshotCache",
    "OldSnapshotCache",
    "assemble_snapshots",
    "evicted_useful_snapshots",
    "failover_duplicates",
    "position_translation",
    "predicted_updates",
    "replay_snapshot_cache",
    "replication_findings",
    "snapshot_assembly",
    "snapshot_cache_events",
    "snapshot_cache_evicted_useful",
    "uses_new_snapshot_cache",
]
