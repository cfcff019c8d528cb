"""Per-group Python over sorted Arrow batches: ``mapInPandas`` instead of ``groupBy().applyInPandas``.

``applyInPandas`` builds a pandas frame per group on the way in and out, about 10-15 ms per group whatever
its size: 124 s for the schemas stage's two per-topic passes over 24,376 schema versions at benchmark
tier ``l`` (issue 10; 30 s with :func:`map_groups`), 85 s per call for the failover subscriptions of
tier ``m``. :func:`map_groups` shuffles once by the group keys, sorts within each partition by the keys
(and ``order``), and walks the Arrow batches with ``mapInPandas``, cutting them into groups where the
keys change and handing each group to the function as a slice of the batch (a group may span batches:
its pieces are joined first). The cost is per row, not per group; memory is one batch plus the largest
group plus at most :data:`OUTPUT_BATCH_ROWS` buffered output rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import types as T

__all__ = ["OUTPUT_BATCH_ROWS", "map_groups", "records"]

#: Output rows buffered before they are handed to Arrow as one batch.
OUTPUT_BATCH_ROWS: Final = 8192

GroupRows = Callable[[pd.DataFrame], list[dict[str, object]]]


def records(pdf: pd.DataFrame) -> list[dict[str, Any]]:
    """A group's rows as dicts of Python values, like ``pdf.to_dict("records")``, read column by column:
    ``to_dict`` walks a mixed-type frame row by row through pandas' indexers, most of a small group's
    time in a grouped pass."""
    names = list(pdf.columns)
    return [dict(zip(names, row, strict=True)) for row in zip(*(pdf[c].tolist() for c in names), strict=True)]


def map_groups(
    source: DataFrame,
    keys: Sequence[str],
    fn: GroupRows,
    schema: T.StructType,
    order: Sequence[str] = (),
) -> DataFrame:
    """``fn`` once per group of ``source`` (rows with equal ``keys``, compared as Python values: a null
    string or date key is a group like any other value; keys must not be floats, as NaN never equals
    itself), given the group's rows as a pandas frame (every column of ``source``, sorted by ``order``).

    ``fn`` returns output rows as dicts without the keys; each gets the group's key values and the rows
    are typed by ``schema`` (the keys' fields first, as ``applyInPandas`` callers declare them). A group
    for which ``fn`` returns nothing gives no row. Pure and lazy.
    """
    keys = list(keys)
    names = schema.fieldNames()

    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        out: list[dict[str, object]] = []
        pieces: list[pd.DataFrame] = []  # the current group's rows, possibly from several batches
        current: tuple[object, ...] | None = None

        def flush() -> None:
            if not pieces:
                return
            rows = pieces[0] if len(pieces) == 1 else pd.concat(pieces, ignore_index=True)
            values = dict(zip(keys, current or (), strict=True))
            for row in fn(rows.reset_index(drop=True)):
                row.update(values)
                out.append(row)

        for pdf in batches:
            key_cols = [pdf[k].tolist() for k in keys]
            start = 0
            for i in range(len(pdf)):
                key = tuple(col[i] for col in key_cols)
                if key != current:
                    if i > start:
                        pieces.append(pdf.iloc[start:i])
                    flush()
                    pieces, current, start = [], key, i
            if len(pdf) > start:
                pieces.append(pdf.iloc[start:])
            if len(out) >= OUTPUT_BATCH_ROWS:
                yield pd.DataFrame(out, columns=names)
                out = []
        flush()
        if out:
            yield pd.DataFrame(out, columns=names)

    ordered = source.repartition(*keys).sortWithinPartitions(*keys, *order)
    return ordered.mapInPandas(run, schema)  # type: ignore[arg-type]
