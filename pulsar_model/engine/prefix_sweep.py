"""The exact backlog's prefix-sum sweep as one sorted Arrow pass (the kernel of ``backlog_exact._totals``).

Grain: one output row per gap bound. The input stream holds, per topic (the ``keys``: ``cluster, topic``
and the export keys), the topic's exported entries (``_t = 0``: position ``_lid/_eid``, publish time
``_pt``, kind code ``_kind``, ``_msgs``, ``_bytes``) and the two bounds of every unacknowledged gap of its
requests (``_t = 1``: position, request key ``_k``, ``_sign`` -1 for the gap start and +1 for its end,
and for a start the gap's end ``_gl/_ge``). :func:`prefix_sweep` sorts each topic's rows by position
(entries before bounds at one position: a gap ``(s, e]`` is open-closed, docs §1.2) and walks them once:

* every bound leaves with ``_sign x C(p)``: the measures (entries, messages, bytes) of each entry kind
  over the topic's entries at or before its position - a gap counts ``C(e) - C(s)``, a request the sum
  over its gaps (the caller's ``groupBy``);
* every gap start leaves with the first entry after it (smallest position, then publish time, null
  first - Spark's struct ordering) when that entry lies inside the gap: the gap's oldest entry.

This replaced two window sorts of the same stream (ascending running sums over 12 measure columns, and a
descending ``last`` for the next entry): the rows are shuffled and sorted once, narrow (3 measure columns
instead of 12), and the sums are numpy ``cumsum`` over whole Arrow batches. Memory per Python worker: one
Arrow batch plus the largest topic's rows (a topic spanning batches is joined before it is walked), the
same bound as :func:`pulsar_model.engine.grouped.map_groups`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

__all__ = ["Measure", "prefix_sweep"]


def _group_starts(table: pa.Table, keys: Sequence[str]) -> np.ndarray:
    """``True`` where a row's keys differ from the previous row's (row 0 always starts a group)."""
    n = table.num_rows
    starts = np.zeros(n, dtype=bool)
    if n == 0:
        return starts
    starts[0] = True
    for name in keys:
        col = table.column(name)
        later, earlier = col.slice(1), col.slice(0, n - 1)
        differs = pc.fill_null(pc.not_equal(later, earlier), False)
        null_differs = pc.not_equal(pc.is_null(later), pc.is_null(earlier))
        starts[1:] |= pc.or_(differs, null_differs).to_numpy(zero_copy_only=False)
    return starts


def _ints(table: pa.Table, name: str, fill: int) -> np.ndarray:
    values: np.ndarray = pc.fill_null(table.column(name), fill).to_numpy(zero_copy_only=False)
    return values.astype(np.int64, copy=False)


#: One output measure column: its name, the entry kind code it counts and the measure.
Measure = tuple[str, int, str]


def _sweep_table(
    table: pa.Table, keys: Sequence[str], measures_out: Sequence[Measure], schema: pa.Schema
) -> pa.Table:
    """Walk complete topics (``table`` holds whole topics, sorted): one output row per bound row."""
    n = table.num_rows
    starts = _group_starts(table, keys)
    row = np.arange(n)
    group = np.cumsum(starts)
    first_of_group = np.maximum.accumulate(np.where(starts, row, 0))
    is_entry = _ints(table, "_t", 1) == 0
    kind = _ints(table, "_kind", -1)
    measures = {
        "entries": np.ones(n, dtype=np.int64),
        "messages": _ints(table, "_msgs", 0),
        "bytes": _ints(table, "_bytes", 0),
    }
    bounds = np.flatnonzero(~is_entry)
    sign = _ints(table, "_sign", 0)[bounds]
    has_base = first_of_group[bounds] > 0
    base_at = np.where(has_base, first_of_group[bounds] - 1, 0)
    columns: dict[str, pa.Array | pa.ChunkedArray] = {}
    for name in keys:
        columns[name] = table.column(name).take(pa.array(bounds))
    columns["_k"] = table.column("_k").take(pa.array(bounds))
    columns["_sign"] = pa.array(sign.astype(np.int32))
    of_kind: dict[int, np.ndarray] = {}  # bounds have kind -1
    for name, code, measure in measures_out:
        if code not in of_kind:
            of_kind[code] = kind == code
        mask = of_kind[code]
        running = np.cumsum(np.where(mask, measures[measure], 0))
        at_bound = running[bounds] - np.where(has_base, running[base_at], 0)
        columns[name] = pa.array(sign * at_bound)
    # the first entry after each bound: the smallest entry index > i (n = none)
    entry_index = np.where(is_entry, row, n)
    first_at_or_after = np.minimum.accumulate(entry_index[::-1])[::-1]
    first_after = np.append(first_at_or_after[1:], n)[bounds]
    found = first_after < n
    j = np.where(found, first_after, 0)
    lid, eid = _ints(table, "_lid", 0), _ints(table, "_eid", 0)
    gap_end_known = pc.and_(pc.is_valid(table.column("_gl")), pc.is_valid(table.column("_ge")))
    end_known = gap_end_known.to_numpy(zero_copy_only=False)[bounds]
    gl, ge = _ints(table, "_gl", 0)[bounds], _ints(table, "_ge", 0)[bounds]
    inside = (lid[j] < gl) | ((lid[j] == gl) & (eid[j] <= ge))
    has_next = found & (group[j] == group[bounds]) & (sign < 0) & end_known & inside
    pt = table.column("_pt")
    pt_valid = pc.is_valid(pt).to_numpy(zero_copy_only=False)[j]
    pt_values = _ints(table, "_pt", 0)[j]
    columns["_nl"] = pa.array(lid[j], mask=~has_next)
    columns["_ne"] = pa.array(eid[j], mask=~has_next)
    columns["_npt"] = pa.array(pt_values, mask=~(has_next & pt_valid))
    columns["_has_next"] = pa.array(has_next)
    return pa.Table.from_arrays([columns[f.name] for f in schema], schema=schema)


def _sweep_fn(
    keys: Sequence[str], measures_out: Sequence[Measure], schema: T.StructType
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    arrow_schema = to_arrow_schema(schema)

    def walk(pieces: list[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        if not pieces:
            return
        table = pa.Table.from_batches(pieces).combine_chunks()
        if table.num_rows:
            yield from _sweep_table(table, keys, measures_out, arrow_schema).to_batches()

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        pieces: list[pa.RecordBatch] = []  # rows of the topic(s) not known to be complete yet
        last_key: tuple[object, ...] | None = None
        for batch in batches:
            n = batch.num_rows
            if n == 0:
                continue
            starts = _group_starts(pa.Table.from_batches([batch]), keys)
            first_key = tuple(batch.column(k)[0].as_py() for k in keys)
            starts[0] = first_key != last_key
            last_key = tuple(batch.column(k)[n - 1].as_py() for k in keys)
            begins = np.flatnonzero(starts)
            if len(begins) == 0:  # the whole batch continues the current topic
                pieces.append(batch)
                continue
            last_begin = int(begins[-1])
            if last_begin > 0:
                pieces.append(batch.slice(0, last_begin))
            yield from walk(pieces)
            pieces = [batch.slice(last_begin)]
        yield from walk(pieces)

    return run


def prefix_sweep(stream: DataFrame, keys: Sequence[str], measures_out: Sequence[Measure]) -> DataFrame:
    """Per bound row of ``stream`` (module docstring): ``keys, _k, _sign``, the signed prefix measures and the
    gap start's first inside entry ``_nl, _ne, _npt`` (null unless ``_has_next``). ``measures_out``: one
    ``(column name, entry kind code, measure)`` per output measure, the measure one of ``entries`` (1 per
    entry), ``messages`` (``_msgs``) and ``bytes`` (``_bytes``).

    One shuffle by ``keys``, one sort within partitions, one ``mapInArrow``. Pure and lazy.
    """
    fields = [stream.schema[k] for k in keys]
    out = T.StructType(
        [
            *[T.StructField(f.name, f.dataType) for f in fields],
            T.StructField("_k", stream.schema["_k"].dataType),
            T.StructField("_sign", T.IntegerType()),
            *[T.StructField(name, T.LongType()) for name, _, _ in measures_out],
            T.StructField("_nl", T.LongType()),
            T.StructField("_ne", T.LongType()),
            T.StructField("_npt", T.LongType()),
            T.StructField("_has_next", T.BooleanType()),
        ]
    )
    ordered = stream.repartition(*keys).sortWithinPartitions(*keys, "_lid", "_eid", "_t", "_pt")
    return ordered.mapInArrow(_sweep_fn(list(keys), list(measures_out), out), out)
