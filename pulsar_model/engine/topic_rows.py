"""A topic's rows packed for one grouped pass of the topic engine (docs §0.2).

A caller that needs a few per-topic numbers from :mod:`pulsar_model.engine.topic_engine` unions, tagged by
kind, each topic's ``managed_ledgers`` row and ``ledgers`` rows (:func:`topic_state_rows`) with rows of its
own (:func:`tagged`), runs :func:`pulsar_model.engine.grouped.map_groups` by ``cluster, topic`` and
rebuilds the engine's :class:`~pulsar_model.engine.topic_engine.ManagedLedger` from a group's rows with
:func:`managed_ledger_of`. The packed frame has one schema (:func:`packed_schema`): ``cluster, topic, _k``,
the managed-ledger and ledger fields, then the caller's own fields; every field a row's kind does not use
is null.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_model import DEFAULT_PULSAR_VERSION
from pulsar_model.domain.versions import behaviour
from pulsar_model.engine.columns import POSITION_TYPE, as_position
from pulsar_model.engine.topic_engine import EARLIEST, Cursor, IdmRange, ManagedLedger, Position
from pulsar_model.errors import ConfigError

#: Row kinds of the packed frame; a caller's own kinds start at :data:`K_FIRST_OWN`.
K_MANAGED_LEDGER: Final = 0
K_LEDGER: Final = 1
K_FIRST_OWN: Final = 2
_KEY_FIELDS: Final = (
    T.StructField("cluster", T.StringType()),
    T.StructField("topic", T.StringType()),
    T.StructField("_k", T.IntegerType()),
)
_STATE_FIELDS: Final = (
    T.StructField("l_id", T.LongType()),
    T.StructField("l_ent", T.LongType()),
    T.StructField("l_sz", T.LongType()),
    T.StructField("m_cur", T.LongType()),
    T.StructField("m_cle", T.LongType()),
    T.StructField("m_cls", T.LongType()),
    T.StructField("m_lac", POSITION_TYPE),
    T.StructField("m_total", T.LongType()),
    T.StructField("m_ver", T.StringType()),
)


#: A packed ``individually_deleted`` array (read by :func:`acked_ranges`).
IDM_TYPE: Final = T.ArrayType(
    T.StructType([T.StructField("lower", POSITION_TYPE), T.StructField("upper", POSITION_TYPE)])
)
#: The cursor fields :func:`cursor_values` fills and :func:`cursors_in_export_order` reads.
CURSOR_FIELDS: Final = (
    T.StructField("c_name", T.StringType()),
    T.StructField("c_order", T.LongType()),
    T.StructField("c_durable", T.BooleanType()),
    T.StructField("c_md", POSITION_TYPE),
    T.StructField("c_idm", IDM_TYPE),
)


def packed_schema(own_fields: Sequence[T.StructField]) -> T.StructType:
    """The packed frame's schema with the caller's ``own_fields`` last."""
    return T.StructType([*_KEY_FIELDS, *_STATE_FIELDS, *own_fields])


def tagged(df: DataFrame, kind: int, values: Mapping[str, Column], schema: T.StructType) -> DataFrame:
    """``df`` (with ``cluster``, ``topic``) as packed rows of ``kind``: ``values`` fill their fields."""
    cols = [F.col("cluster"), F.col("topic"), F.lit(kind).cast("int").alias("_k")]
    for f in schema.fields[len(_KEY_FIELDS) :]:
        cols.append(values.get(f.name, F.lit(None)).cast(f.dataType).alias(f.name))
    return df.select(*cols)


def topic_state_rows(
    managed_ledgers: DataFrame,
    ledgers: DataFrame,
    schema: T.StructType,
    pulsar_version: str | None,
    ledger_values: Mapping[str, Column] | None = None,
) -> DataFrame:
    """The packed ``managed_ledgers`` and ``ledgers`` rows; ``pulsar_version`` None: each managed-ledger
    row carries its own ``pulsar_version`` (callers check that the column exists). ``ledger_values`` fill
    a caller's own fields of the ledger rows (e.g. a close time)."""
    ml = tagged(
        managed_ledgers,
        K_MANAGED_LEDGER,
        {
            "m_cur": F.col("current_ledger_id"),
            "m_cle": F.col("current_ledger_entries"),
            "m_cls": F.col("current_ledger_size_bytes"),
            "m_lac": as_position(F.col("last_confirmed_entry")),
            "m_total": F.col("total_size_bytes"),
            "m_ver": F.col("pulsar_version") if pulsar_version is None else F.lit(None),
        },
        schema,
    )
    led = tagged(
        ledgers.where(F.col("ledger_id").isNotNull()),
        K_LEDGER,
        {
            **(ledger_values or {}),
            "l_id": F.col("ledger_id"),
            "l_ent": F.col("entries"),
            "l_sz": F.col("size_bytes"),
        },
        schema,
    )
    return ml.unionByName(led)


def value(v: Any) -> Any:
    """A packed value as Python: pandas' NaN (a null in a numeric column) is None."""
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v


def engine_position(v: Any) -> Position | None:
    """A packed ``struct<ledger_id, entry_id>`` as a position (None when null or partly null)."""
    v = value(v)
    if v is None or v.get("ledger_id") is None or v.get("entry_id") is None:
        return None
    return (int(v["ledger_id"]), int(v["entry_id"]))


def position_struct(p: Position | None) -> dict[str, int] | None:
    """An engine position as the ``struct<ledger_id, entry_id>`` value of an output row (None stays None)."""
    return None if p is None else {"ledger_id": p[0], "entry_id": p[1]}


def acked_ranges_struct(ranges: Sequence[IdmRange]) -> list[dict[str, dict[str, int] | None]]:
    """Engine ranges as the ``individually_deleted`` value of an output row (``array<struct<lower,
    upper>>``)."""
    return [{"lower": position_struct(a), "upper": position_struct(b)} for a, b in ranges]


def managed_ledger_of(
    rows: Sequence[Mapping[str, Any]], pulsar_version: str | None
) -> tuple[ManagedLedger | None, Position | None]:
    """The engine's managed ledger of one topic's packed rows and its LAC.

    ``(None, None)`` unless the topic has exactly one managed-ledger row whose version (``pulsar_version``,
    else the row's own, null meaning the default version) the model knows. Without a LAC the ledger is
    built on ``EARLIEST`` in its place and the LAC returned is None: only what never reads the LAC may be
    computed from it.
    """
    mls = [r for r in rows if r["_k"] == K_MANAGED_LEDGER]
    if len(mls) != 1:
        return None, None
    m = mls[0]
    try:
        beh = behaviour(pulsar_version or value(m["m_ver"]) or DEFAULT_PULSAR_VERSION)
    except ConfigError:
        return None, None
    lac = engine_position(m["m_lac"])
    listed = [
        (int(r["l_id"]), int(value(r["l_ent"]) or 0), int(value(r["l_sz"]) or 0))
        for r in rows
        if r["_k"] == K_LEDGER
    ]
    cur = value(m["m_cur"])
    ml = ManagedLedger(
        listed,
        None if cur is None else int(cur),
        int(value(m["m_cle"]) or 0),
        int(value(m["m_cls"]) or 0),
        lac if lac is not None else EARLIEST,
        int(value(m["m_total"]) or 0),
        beh,
    )
    return ml, lac


def cursor_values() -> dict[str, Column]:
    """The :data:`CURSOR_FIELDS` of a ``cursors`` row, for :func:`tagged`."""
    return {
        "c_name": F.col("cursor_name"),
        "c_order": F.col("cursor_order"),
        "c_durable": F.coalesce(F.col("is_durable").cast("boolean"), F.lit(False)),
        "c_md": as_position(F.col("mark_delete_position")),
        "c_idm": F.col("individually_deleted"),
    }


def acked_ranges(v: Any) -> list[IdmRange]:
    """A packed ``individually_deleted`` array as engine ranges; a range missing an end is skipped."""
    ranges = value(v)
    out: list[IdmRange] = []
    for rng in [] if ranges is None else list(ranges):
        lo = None if rng is None else engine_position(rng.get("lower"))
        hi = None if rng is None else engine_position(rng.get("upper"))
        if lo is not None and hi is not None:
            out.append((lo, hi))
    return out


def cursors_in_export_order(rows: Sequence[Mapping[str, Any]], kind: int) -> list[Cursor]:
    """The engine cursors of a group's rows of ``kind`` (packed with :func:`cursor_values`), in export order:
    by ``cursor_order`` (nulls first, as Spark sorts), then name - the order the slowest-cursor rule and
    the cursor heap add them in (docs §3.9)."""

    def order(r: Mapping[str, Any]) -> tuple[bool, int, bool, str]:
        o, n = value(r["c_order"]), value(r["c_name"])
        return (o is not None, int(o or 0), n is not None, str(n or ""))

    return [
        Cursor(
            name=value(r["c_name"]),
            order=i,
            durable=bool(value(r["c_durable"])),
            kind=value(r.get("c_kind")) or "",  # a caller's own field (not in CURSOR_FIELDS)
            md=engine_position(r["c_md"]),
            idm=acked_ranges(r["c_idm"]),
            consumed=None,
        )
        for i, r in enumerate(sorted((r for r in rows if r["_k"] == kind), key=order))
    ]
