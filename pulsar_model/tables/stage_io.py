"""Reading a run date's inputs and replacing a run date's outputs: what every analytics stage shares.

A stage reads the partitions of one ``export_date`` and replaces that date's partition of each of its
output tables in ONE :meth:`~pulsar_model.tables.delta_io.DeltaTables.write_all`, so a rerun of a date
replaces
its rows and a failure leaves every output at its previous version (README "Guarantees").
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
from collections.abc import Mapping, Sequence

from pyspark.sql import DataFrame

from pulsar_model.errors import SchemaChangeError
from pulsar_model.tables.contracts import conform, contract
from pulsar_model.tables.delta_io import DeltaTables, TableWrite

log = logging.getLogger(__name__)

Day = Mapping[str, dt.date]
"""The partition filter of one run date: ``{"export_date": date}``."""


def read_day(tables: DeltaTables, name: str, day: Day) -> DataFrame | None:
    """The run date's partition of input table ``name``, or ``None`` when the table does not exist."""
    return tables.read(name, partition_filter=dict(day)) if tables.exists(name) else None


def write_day_outputs(
    tables: DeltaTables,
    day: Day,
    outputs: Mapping[str, DataFrame | Sequence[DataFrame] | None],
    *,
    stage: str,
) -> tuple[dict[str, int], dict[str, int]]:
    """Replace the run date's partition of every table in ``outputs`` in one ``write_all``.

    Each table is created from its contract when missing, and its rows are conformed to the contract. An
    output given as a list of frames is their union (an empty list empties the date's partition); ``None``
    leaves the table untouched (the stage had no input for it). Returns (rows in the date's partition of
    every named table, table versions written).
    """
    writes = []
    for name, produced in outputs.items():
        c = contract(name)
        try:
            tables.create(name, c.spark_schema, c.partitioned_by, description=c.description)
        except SchemaChangeError as exc:
            raise SchemaChangeError(
                f"{exc} Output table {name!r} of the {stage} stage was written by a version of "
                f"pulsar-analytics with another contract (schemas/{name}.yaml; README 'Upgrading'). It is "
                f"derived data: move {tables.location(name)} aside (or delete it) and rerun the {stage} "
                f"stage for the dates you need, e.g. `pulsar-analytics nightly --stages {stage} "
                "--export-date YYYY-MM-DD`."
            ) from exc
        if produced is None:
            continue
        if isinstance(produced, DataFrame):
            df = produced
        else:
            df = functools.reduce(
                lambda a, b: a.unionByName(b, allowMissingColumns=True),
                produced,
                tables.spark.createDataFrame([], c.spark_schema),
            )
        writes.append(
            TableWrite(
                table=name,
                df=conform(df, name),
                mode="replace_partitions",
                partition_values=dict(day),
                partition_by=c.partitioned_by,
            )
        )
    versions = tables.write_all(writes)
    rows = {name: tables.count_rows(name, partition_filter=dict(day)) for name in outputs}
    log.info("%s stage %s: rows %s", stage, day["export_date"], rows)
    return rows, versions
