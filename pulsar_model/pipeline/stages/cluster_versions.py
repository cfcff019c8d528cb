"""The one rule of the nightly stages for a cluster's Pulsar version (docs §0.3).

A cluster's version is the ``pulsar_version`` its ``managed_ledgers`` rows of the run date name (the export
manifest's or the configured per-cluster version, written by ``ingest``; the latest release when rows
disagree, compared as parsed ``MAJOR.MINOR.PATCH`` numbers so that 4.10.0 is later than 4.9.0), else the
configured default (``pulsar.default_version``). Every stage attaches it as a ``pulsar_version``
column to the inputs it hands to the library transforms and calls them with ``pulsar_version=None`` (each
row's own version): one plan serves every cluster whatever mix of versions the export has.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pulsar_model.domain.versions import parsed_version_sql

__all__ = ["cluster_versions", "with_cluster_version"]

_VERSION = "pulsar_version"
_CLUSTER_VERSION = "_cluster_version"


def cluster_versions(managed_ledgers: DataFrame | None, default_version: str) -> DataFrame | None:
    """One row per cluster of ``managed_ledgers``: ``cluster, _cluster_version`` (the rule above); None
    without managed ledgers (every cluster then has ``default_version``). Pure and lazy."""
    if managed_ledgers is None:
        return None
    # max_by over the parsed (major, minor, patch) struct: a text maximum would put 4.9.0 after 4.10.0; a
    # text that does not parse (null struct) is skipped, and wins only when no row of the cluster parses
    parsed = F.expr(parsed_version_sql(f"`{_VERSION}`"))
    latest = F.max_by(F.col(_VERSION), parsed)
    return managed_ledgers.groupBy("cluster").agg(
        F.coalesce(latest, F.max(_VERSION), F.lit(default_version)).alias(_CLUSTER_VERSION)
    )


def with_cluster_version(df: DataFrame, versions: DataFrame | None, default_version: str) -> DataFrame:
    """``df`` with ``pulsar_version`` = its cluster's version (replacing a column of that name; clusters
    absent from ``versions`` get ``default_version``). The version table is a few rows: broadcast."""
    kept = [F.col(f"`{c}`") for c in df.columns if c != _VERSION]
    if versions is None:
        return df.select(*kept, F.lit(default_version).alias(_VERSION))
    joined = df.join(F.broadcast(versions), on="cluster", how="left")
    version = F.coalesce(F.col(_CLUSTER_VERSION), F.lit(default_version))
    return joined.select(*kept, version.alias(_VERSION))
