"""The one rule of the nightly stages for a cluster's Pulsar version (docs §0.3).

A cluster's version is the ``pulsar_version`` its ``managed_ledgers`` rows of the run date name (the export
manifest's or the configured per-cluster version, written by ``ingest``; the latest release when rows
disagree, compared as parsed ``MAJOR.MINOR.PATCH`` numbers so that 4.10.0 is later than 4.9.0), else the
configured default (``pulsar.default_version``). Every stage attaches it as a ``pulsar_version``
column to the inputs it hands to the library transforms and calls them with ``pulsar_version=None`` (each
row's own version): one plan serves every cluster whatever mix of versions the export has.

The stages of one run ask for it by :func:`day_cluster_versions`, which computes it once per warehouse
handle, run date and ``managed_ledgers`` version (ingest writes that table; no analytics stage does).
"""

from __future__ import annotations

import datetime as dt
import weakref
from collections.abc import Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pulsar_model.domain.versions import parsed_version_sql
from pulsar_model.tables.delta_io import DeltaTables

__all__ = ["cluster_versions", "day_cluster_versions", "with_cluster_version"]

_VERSION = "pulsar_version"
_CLUSTER_VERSION = "_cluster_version"


def cluster_versions(managed_ledgers: DataFrame | None, default_version: str) -> dict[str, str] | None:
    """``{cluster: version}`` for the clusters of ``managed_ledgers`` (the rule above); None without managed
    ledgers (every cluster then has ``default_version``).

    One small Spark job (a row per cluster): the stages attach the result as a literal expression
    (:func:`with_cluster_version`), so no later plan joins or broadcasts a version table (each broadcast of
    a computed frame is a job of its own, per output that reads it).
    """
    if managed_ledgers is None:
        return None
    # max_by over the parsed (major, minor, patch) struct: a text maximum would put 4.9.0 after 4.10.0; a
    # text that does not parse (null struct) is skipped, and wins only when no row of the cluster parses
    parsed = F.expr(parsed_version_sql(f"`{_VERSION}`"))
    latest = F.max_by(F.col(_VERSION), parsed)
    # a row per topic, in one task: the aggregation then needs no exchange (one job, not two)
    rows = (
        managed_ledgers.select("cluster", _VERSION)
        .coalesce(1)
        .groupBy("cluster")
        .agg(F.coalesce(latest, F.max(_VERSION), F.lit(default_version)).alias(_CLUSTER_VERSION))
        .collect()
    )
    return {str(r["cluster"]): str(r[_CLUSTER_VERSION]) for r in rows if r["cluster"] is not None}


def _version_of_cluster(versions: Mapping[str, str] | None, default_version: str) -> Column:
    """``CASE cluster WHEN ... THEN version ... ELSE default END``, the clusters in name order."""
    version = F.lit(default_version)
    for cluster, v in sorted((versions or {}).items(), reverse=True):
        version = F.when(F.col("cluster") == F.lit(cluster), F.lit(v)).otherwise(version)
    return version


def with_cluster_version(
    df: DataFrame, versions: Mapping[str, str] | None, default_version: str
) -> DataFrame:
    """``df`` with ``pulsar_version`` = its cluster's version (replacing a column of that name; clusters
    absent from ``versions`` get ``default_version``). Pure and lazy: the versions are literals."""
    kept = [F.col(f"`{c}`") for c in df.columns if c != _VERSION]
    return df.select(*kept, _version_of_cluster(versions, default_version).alias(_VERSION))


_Key = tuple[int | None, tuple[tuple[str, dt.date], ...], str]
_DAY_VERSIONS: weakref.WeakKeyDictionary[DeltaTables, dict[_Key, dict[str, str] | None]] = (
    weakref.WeakKeyDictionary()
)


def day_cluster_versions(
    tables: DeltaTables, day: Mapping[str, dt.date], default_version: str
) -> dict[str, str] | None:
    """:func:`cluster_versions` of the ``managed_ledgers`` rows of ``day`` (None without that table),
    computed once per ``tables`` handle, ``day``, table version and ``default_version``: the stages of a
    nightly run share one handle, so the version per cluster costs one small Spark job per run, not one
    per stage. A new version of ``managed_ledgers`` (a rerun of ingest) is read afresh."""
    if not tables.exists("managed_ledgers"):
        return None
    key: _Key = (tables.version("managed_ledgers"), tuple(sorted(day.items())), default_version)
    memo = _DAY_VERSIONS.setdefault(tables, {})
    if key not in memo:
        raw = tables.read("managed_ledgers", partition_filter=dict(day))
        memo[key] = cluster_versions(raw, default_version)
    found = memo[key]
    return dict(found) if found is not None else None
