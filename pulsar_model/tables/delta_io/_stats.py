"""Delta file statistics (``numRecords``, ``minValues``, ``maxValues``, ``nullCount``) from a Parquet footer.

Only the footer is read (no data pages). Statistics are written for top-level and struct-nested
primitive columns; columns inside arrays/maps get none (Delta collects none either). A bound is
omitted rather than guessed whenever the footer cannot prove it (a row group without statistics,
upper bounds of strings longer than :data:`MAX_STRING_STAT_CHARS`, float/double columns - Spark orders
NaN above every number but Parquet bounds skip it - and decimal/binary/boolean columns).
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pyarrow.parquet as pq
from pyspark.sql import types as T

#: Delta's default truncation length for string statistics (delta.dataSkippingStringPrefixLength).
MAX_STRING_STAT_CHARS = 32

_MIN_MAX_TYPES: tuple[type[T.DataType], ...] = (
    T.ByteType,
    T.ShortType,
    T.IntegerType,
    T.LongType,
    T.StringType,
    T.DateType,
    T.TimestampType,
)


def _leaves(
    schema: T.StructType, prefix: tuple[str, ...] = ()
) -> dict[str, tuple[tuple[str, ...], T.DataType]]:
    """Dotted Parquet path -> (field path, type) for primitive leaves reachable through structs only."""
    out: dict[str, tuple[tuple[str, ...], T.DataType]] = {}
    for f in schema.fields:
        path = (*prefix, f.name)
        if isinstance(f.dataType, T.StructType):
            out.update(_leaves(f.dataType, path))
        elif not isinstance(f.dataType, (T.ArrayType, T.MapType)):
            out[".".join(path)] = (path, f.dataType)
    return out


def _json_value(value: Any, data_type: T.DataType, is_max: bool) -> Any:
    """JSON form of a footer bound, or ``None`` when it cannot be stated exactly."""
    if value is None:
        return None
    if isinstance(data_type, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        return int(value)
    if isinstance(data_type, T.StringType):
        text = value.decode("utf-8") if isinstance(value, bytes) else str(value)
        if len(text) <= MAX_STRING_STAT_CHARS:
            return text
        # A prefix is a valid lower bound; an upper bound would need a successor string: omit it.
        return None if is_max else text[:MAX_STRING_STAT_CHARS]
    if isinstance(data_type, T.DateType) and isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(data_type, T.TimestampType) and isinstance(value, dt.datetime):
        utc = value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)
        return utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return None


def _put(target: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    node = target
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value


def file_stats(path: str, schema: T.StructType) -> tuple[int, str]:
    """Return ``(num_rows, stats_json)`` for one Parquet file of a table with ``schema``."""
    meta = pq.ParquetFile(path).metadata
    leaves = _leaves(schema)
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, Any] = {}
    for col_index in range(meta.num_columns):
        dotted = meta.schema.column(col_index).path
        if dotted not in leaves:
            continue
        field_path, data_type = leaves[dotted]
        lo: Any = None
        hi: Any = None
        null_count: int | None = 0
        has_bounds = meta.num_row_groups > 0
        for rg in range(meta.num_row_groups):
            chunk = meta.row_group(rg).column(col_index)
            st = chunk.statistics
            if st is None:
                null_count = None
                has_bounds = False
                break
            if null_count is not None:
                null_count = null_count + st.null_count if st.has_null_count else None
            if chunk.num_values - (st.null_count if st.has_null_count else 0) == 0:
                continue  # an all-null chunk has no bounds and needs none
            if not st.has_min_max:
                has_bounds = False
                continue
            lo = st.min if lo is None or st.min < lo else lo
            hi = st.max if hi is None or st.max > hi else hi
        if null_count is not None:
            _put(nulls, field_path, null_count)
        if has_bounds and isinstance(data_type, _MIN_MAX_TYPES):
            lo_json = _json_value(lo, data_type, is_max=False)
            hi_json = _json_value(hi, data_type, is_max=True)
            if lo_json is not None:
                _put(mins, field_path, lo_json)
            if hi_json is not None:
                _put(maxs, field_path, hi_json)
    stats: dict[str, Any] = {
        "numRecords": meta.num_rows,
        "minValues": mins,
        "maxValues": maxs,
        "nullCount": nulls,
    }
    return meta.num_rows, json.dumps(stats, separators=(",", ":"), allow_nan=False)
