"""Schema compatibility audit of each topic's registered versions (docs §9, §11.21, §12.14).

* :func:`resolve_strategy` / :func:`effective_strategies` – the strategy the registry applies to a topic
  (topic policy > namespace policy > deprecated auto-update policy > broker default, by version, §9.3);
* :func:`registration_verdicts` – replay of ``putSchemaIfAbsent`` for every version in order (§9.2): would
  it be accepted now, and why;
* :func:`compatibility_matrix` – every ordered pair of versions: can the reader version read data written
  with the writer version, with the reasons.

Avro and Avro-format JSON schemas are checked with the Apache Avro library's reader/writer checker
(``avro.compatibility.ReaderWriterCompatibilityChecker``), never with hand-written rules. Schemas are
parsed with name validation (docs §9.2). The per-topic replay runs in
:func:`~pulsar_model.grouped.map_groups` (``mapInPandas`` over the versions sorted by topic).

Not modelled: Protobuf/primitive structural checks (same type = compatible), legacy Jackson-format JSON
schemas (reported as ``not_checked``), the consumer-side check and ``is_allow_auto_update_schema``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Final

import avro.compatibility as avro_compat
import avro.errors as avro_errors
import avro.schema as avro_schema
import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_model import DEFAULT_PULSAR_VERSION
from pulsar_model.errors import ConfigError, ContractError
from pulsar_model.grouped import map_groups
from pulsar_model.versions import PulsarVersion, VersionLike

__all__ = [
    "STRATEGIES",
    "can_read",
    "compatibility_matrix",
    "effective_strategies",
    "registration_verdicts",
    "resolve_strategy",
]

#: ``SchemaCompatibilityStrategy`` values (docs §9.2).
UNDEFINED: Final = "UNDEFINED"
ALWAYS_INCOMPATIBLE: Final = "ALWAYS_INCOMPATIBLE"
ALWAYS_COMPATIBLE: Final = "ALWAYS_COMPATIBLE"
BACKWARD: Final = "BACKWARD"
FORWARD: Final = "FORWARD"
FULL: Final = "FULL"
BACKWARD_TRANSITIVE: Final = "BACKWARD_TRANSITIVE"
FORWARD_TRANSITIVE: Final = "FORWARD_TRANSITIVE"
FULL_TRANSITIVE: Final = "FULL_TRANSITIVE"
STRATEGIES: Final = (
    UNDEFINED,
    ALWAYS_INCOMPATIBLE,
    ALWAYS_COMPATIBLE,
    BACKWARD,
    FORWARD,
    FULL,
    BACKWARD_TRANSITIVE,
    FORWARD_TRANSITIVE,
    FULL_TRANSITIVE,
)
#: Broker ``schemaCompatibilityStrategy`` default (docs §9.3).
BROKER_DEFAULT_STRATEGY: Final = FULL
#: Deprecated namespace ``schema_auto_update_compatibility_strategy`` -> strategy (docs §9.3).
AUTO_UPDATE_TO_STRATEGY: Final = {
    "AutoUpdateDisabled": ALWAYS_INCOMPATIBLE,
    "Backward": BACKWARD,
    "Forward": FORWARD,
    "Full": FULL,
    "AlwaysCompatible": ALWAYS_COMPATIBLE,
    "BackwardTransitive": BACKWARD_TRANSITIVE,
    "ForwardTransitive": FORWARD_TRANSITIVE,
    "FullTransitive": FULL_TRANSITIVE,
}
#: 2.5: the auto-update policy's default when the namespace set none (docs §9.3).
AUTO_UPDATE_DEFAULT_2_5: Final = "Full"
#: Schema types whose definitions are Avro schemas checked by the Avro library (docs §9.2).
AVRO_TYPES: Final = ("AVRO", "JSON")

_TRANSITIVE = (BACKWARD_TRANSITIVE, FORWARD_TRANSITIVE, FULL_TRANSITIVE)
_CHECKS_NEW_READS_OLD = (BACKWARD, BACKWARD_TRANSITIVE, FULL, FULL_TRANSITIVE)
_CHECKS_OLD_READS_NEW = (FORWARD, FORWARD_TRANSITIVE, FULL, FULL_TRANSITIVE)

# Verdicts of registering a version (docs §9.2 registry rules).
ACCEPTED_FIRST: Final = "accepted_first"
ACCEPTED_IDENTICAL: Final = "accepted_identical"
COMPATIBLE: Final = "compatible"
INCOMPATIBLE: Final = "incompatible"


# --- strategy resolution (§9.3) -------------------------------------------------------------------------


def _set(value: str | None) -> str | None:
    return None if value is None or value == "" else value


def resolve_strategy(
    topic_strategy: str | None,
    namespace_strategy: str | None,
    auto_update_strategy: str | None,
    broker_strategy: str = BROKER_DEFAULT_STRATEGY,
    pulsar_version: VersionLike = DEFAULT_PULSAR_VERSION,
) -> tuple[str, str]:
    """``(strategy, source)`` the registry applies to a topic (docs §9.3).

    3.x+: topic policy -> namespace (unless UNDEFINED) -> auto-update policy mapped -> broker config.
    2.8-2.x (assumed range): namespace UNDEFINED -> broker config -> if that is UNDEFINED the auto-update
    policy. Before 2.8 (2.5 rule): namespace UNDEFINED -> auto-update policy (default ``Full``).
    ``source`` is ``topic``, ``namespace``, ``auto_update`` or ``broker``.
    """
    for value in (topic_strategy, namespace_strategy, broker_strategy):
        if _set(value) is not None and value not in STRATEGIES:
            raise ConfigError(
                f"Unknown schema compatibility strategy {value!r}; use one of {', '.join(STRATEGIES)}"
            )
    if _set(auto_update_strategy) is not None and auto_update_strategy not in AUTO_UPDATE_TO_STRATEGY:
        raise ConfigError(
            f"Unknown auto-update strategy {auto_update_strategy!r}; "
            f"use one of {', '.join(AUTO_UPDATE_TO_STRATEGY)}"
        )
    v = PulsarVersion.parse(pulsar_version)
    namespace = _set(namespace_strategy)
    if namespace == UNDEFINED:
        namespace = None
    auto = _set(auto_update_strategy)
    if v < PulsarVersion(2, 8, 0):
        if namespace is not None:
            return namespace, "namespace"
        return AUTO_UPDATE_TO_STRATEGY[auto or AUTO_UPDATE_DEFAULT_2_5], "auto_update"
    if v < PulsarVersion(3, 0, 0):
        if namespace is not None:
            return namespace, "namespace"
        if broker_strategy != UNDEFINED:
            return broker_strategy, "broker"
        return (AUTO_UPDATE_TO_STRATEGY[auto], "auto_update") if auto else (UNDEFINED, "broker")
    topic = _set(topic_strategy)
    if topic is not None and topic != UNDEFINED:
        return topic, "topic"
    if namespace is not None:
        return namespace, "namespace"
    if auto is not None:
        return AUTO_UPDATE_TO_STRATEGY[auto], "auto_update"
    return broker_strategy, "broker"


def effective_strategies(
    policies: DataFrame,
    broker_strategy: str = BROKER_DEFAULT_STRATEGY,
    pulsar_version: VersionLike = DEFAULT_PULSAR_VERSION,
) -> DataFrame:
    """Add ``strategy`` and ``strategy_source`` to each policy row (docs §9.3, as :func:`resolve_strategy`).

    ``policies`` carries ``cluster, topic`` and optional nullable string columns ``topic_strategy``,
    ``namespace_strategy`` and ``auto_update_strategy`` (missing column or null/empty = not set; an
    unknown auto-update value counts as not set). One row per input row. Pure and lazy.
    """
    resolve_strategy(None, None, None, broker_strategy, pulsar_version)  # validates the arguments
    v = PulsarVersion.parse(pulsar_version)

    def opt(name: str) -> Column:
        col = F.col(name).cast("string") if name in policies.columns else F.lit(None).cast("string")
        return F.when(col.isin("", UNDEFINED), F.lit(None).cast("string")).otherwise(col)

    mapping = F.create_map(*[F.lit(x) for pair in AUTO_UPDATE_TO_STRATEGY.items() for x in pair])
    auto = mapping[opt("auto_update_strategy")]
    topic, namespace = opt("topic_strategy"), opt("namespace_strategy")
    if v < PulsarVersion(2, 8, 0):
        chain = [(namespace, "namespace"), (auto, "auto_update")]
        fallback = (F.lit(AUTO_UPDATE_TO_STRATEGY[AUTO_UPDATE_DEFAULT_2_5]), "auto_update")
    elif v < PulsarVersion(3, 0, 0):
        chain = [(namespace, "namespace")]
        if broker_strategy != UNDEFINED:
            chain.append((F.lit(broker_strategy), "broker"))
        chain.append((auto, "auto_update"))
        fallback = (F.lit(UNDEFINED), "broker")
    else:
        chain = [(topic, "topic"), (namespace, "namespace"), (auto, "auto_update")]
        fallback = (F.lit(broker_strategy), "broker")
    strategy = F.coalesce(*[c for c, _ in chain], fallback[0])
    source = F.lit(fallback[1])
    for col, name in reversed(chain):
        source = F.when(col.isNotNull(), F.lit(name)).otherwise(source)
    return policies.select("*", strategy.alias("strategy"), source.alias("strategy_source"))


# --- Avro checks ----------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def _parse(definition: str) -> avro_schema.Schema:
    return avro_schema.parse(definition, validate_names=True)


def _parse_or_none(definition: str | None) -> avro_schema.Schema | None:
    if definition is None:
        return None
    try:
        return _parse(definition)
    except (avro_errors.AvroException, json.JSONDecodeError, TypeError, ValueError, KeyError):
        return None


def can_read(reader: str, writer: str) -> tuple[bool, list[str]]:
    """Can Avro schema ``reader`` read data written with ``writer``? ``(ok, reasons)`` (docs §9.2).

    Reasons are ``<incompatibility type> at <location>: <detail>`` from the Avro library's checker.
    """
    checker = avro_compat.ReaderWriterCompatibilityChecker()  # type: ignore[no-untyped-call]
    result = checker.get_compatibility(_parse(reader), _parse(writer))
    ok = result.compatibility is avro_compat.SchemaCompatibilityType.compatible
    if ok:
        return True, []
    kinds = sorted({i.value for i in result.incompatibilities})
    details = ", ".join(sorted(str(m) for m in result.messages))
    locations = ", ".join(sorted(str(x) for x in result.locations))
    return False, [f"{kind} at {locations}: {details}" for kind in kinds]


# --- registration replay (§9.2) -------------------------------------------------------------------------


def _identical(type_a: str, def_a: str | None, type_b: str, def_b: str | None) -> bool:
    """Registry identity: parsed schemas equal and same type (Avro/JSON), else same text and type."""
    if type_a != type_b:
        return False
    if type_a in AVRO_TYPES:
        pa_, pb_ = _parse_or_none(def_a), _parse_or_none(def_b)
        if pa_ is not None and pb_ is not None:
            return bool(pa_ == pb_)
    return def_a == def_b


def _pair_check(
    new_type: str, new_def: str | None, old_type: str, old_def: str | None, strategy: str
) -> list[str]:
    """Reasons why ``new`` fails ``strategy`` against one existing version (empty = passes)."""
    if new_type != old_type:
        return [f"type_changed: {old_type} -> {new_type}"]
    if new_def == old_def:
        return []
    if new_type not in AVRO_TYPES:
        return []  # no structural check modelled for this type
    new_s, old_s = _parse_or_none(new_def), _parse_or_none(old_def)
    if new_s is None or old_s is None:
        return ["not_checked: not an Avro-format schema"] if new_type == "JSON" else ["invalid_schema"]
    reasons: list[str] = []
    if strategy in _CHECKS_NEW_READS_OLD:
        ok, why = can_read(str(new_def), str(old_def))
        reasons += [] if ok else [f"new cannot read old: {w}" for w in why]
    if strategy in _CHECKS_OLD_READS_NEW:
        ok, why = can_read(str(old_def), str(new_def))
        reasons += [] if ok else [f"old cannot read new: {w}" for w in why]
    return reasons


def _verdicts(pdf: pd.DataFrame, strategy: str) -> list[dict[str, object]]:
    pdf = pdf.sort_values("version", kind="stable")
    existing: list[tuple[int, str, str | None]] = []
    out: list[dict[str, object]] = []
    for version, stype, definition, deleted in zip(
        pdf["version"], pdf["schema_type"], pdf["definition"], pdf["is_deleted"], strict=True
    ):
        if bool(deleted):
            existing = []  # candidates are the versions after the last deletion
            continue
        definition = None if definition is None or pd.isna(definition) else str(definition)
        row: dict[str, object] = {
            "version": int(version),
            "schema_type": str(stype),
            "strategy": strategy,
            "identical_to_version": None,
        }
        same = [v for v, t, d in existing if _identical(str(stype), definition, t, d)]
        checked: list[int] = []
        reasons: list[str] = []
        if not existing:
            verdict, reasons = ACCEPTED_FIRST, []
        elif same:
            verdict = ACCEPTED_IDENTICAL
            row["identical_to_version"] = same[0]
        elif strategy == ALWAYS_COMPATIBLE:
            verdict = COMPATIBLE
        elif strategy in (ALWAYS_INCOMPATIBLE, UNDEFINED):
            verdict, reasons = INCOMPATIBLE, [f"strategy {strategy} rejects every new different schema"]
        else:
            targets = list(reversed(existing)) if strategy in _TRANSITIVE else [existing[-1]]
            for v, t, d in targets:
                checked.append(v)
                reasons += [f"v{v}: {r}" for r in _pair_check(str(stype), definition, t, d, strategy)]
            verdict = INCOMPATIBLE if reasons else COMPATIBLE
        row.update(verdict=verdict, checked_versions=checked, reasons=reasons)
        out.append(row)
        existing.append((int(version), str(stype), definition))
    return out


_VERDICT_FIELDS: Final = [
    T.StructField("version", T.LongType(), False),
    T.StructField("schema_type", T.StringType(), False),
    T.StructField("strategy", T.StringType(), False),
    T.StructField("verdict", T.StringType(), False),
    T.StructField("identical_to_version", T.LongType(), True),
    T.StructField("checked_versions", T.ArrayType(T.LongType(), False), False),
    T.StructField("reasons", T.ArrayType(T.StringType(), False), False),
]
_REQUIRED: Final = ("cluster", "topic", "version", "schema_type", "definition", "is_deleted")
_EXPORT_KEYS: Final = ("export_id", "export_date")


def _keys(schema_versions: DataFrame) -> list[str]:
    missing = [c for c in _REQUIRED if c not in schema_versions.columns]
    if missing:
        raise ContractError(
            f"schema_versions is missing column(s) {', '.join(missing)}; needs {', '.join(_REQUIRED)}"
        )
    return ["cluster", "topic", *[k for k in _EXPORT_KEYS if k in schema_versions.columns]]


def _with_strategy(
    schema_versions: DataFrame, keys: list[str], strategies: DataFrame | None, default: str
) -> DataFrame:
    base = schema_versions.select(*keys, "version", "schema_type", "definition", "is_deleted")
    if strategies is None:
        return base.select("*", F.lit(default).alias("strategy"))
    joined = base.join(
        strategies.select("cluster", "topic", F.col("strategy").alias("_s")),
        on=["cluster", "topic"],
        how="left",
    )
    return joined.select(*base.columns, F.coalesce(F.col("_s"), F.lit(default)).alias("strategy"))


def registration_verdicts(
    schema_versions: DataFrame,
    strategies: DataFrame | None = None,
    default_strategy: str = BROKER_DEFAULT_STRATEGY,
) -> DataFrame:
    """Replay ``putSchemaIfAbsent`` for every version of each topic, oldest first (docs §9.2, §11.21).

    One row per non-deleted version: ``strategy`` (from ``strategies`` = ``cluster, topic, strategy``, e.g.
    :func:`effective_strategies`; else ``default_strategy``), ``verdict`` = ``accepted_first`` (nothing
    registered since the last deletion), ``accepted_identical`` (``identical_to_version`` is returned; no
    check, even under ALWAYS_INCOMPATIBLE), ``compatible`` or ``incompatible``; ``checked_versions``
    (latest only, or all newest-first for transitive strategies) and ``reasons``. Each version is judged
    as if registered now under the strategy, after all earlier versions. Pure and lazy.
    """
    if default_strategy not in STRATEGIES:
        raise ConfigError(
            f"Unknown default strategy {default_strategy!r}; use one of {', '.join(STRATEGIES)}"
        )
    keys = _keys(schema_versions)
    source = _with_strategy(schema_versions, keys, strategies, default_strategy)
    key_fields = [f for f in source.schema.fields if f.name in keys]

    def per_topic(pdf: pd.DataFrame) -> list[dict[str, object]]:
        return _verdicts(pdf, str(pdf["strategy"].iloc[0]))

    schema = T.StructType([*key_fields, *_VERDICT_FIELDS])
    return map_groups(source, keys, per_topic, schema, order=("version",))


def _matrix(pdf: pd.DataFrame) -> list[dict[str, object]]:
    live = pdf[~pdf["is_deleted"].astype(bool)].sort_values("version")
    rows: list[dict[str, object]] = []
    items: Sequence[tuple[int, str, str | None]] = [
        (int(v), str(t), None if d is None or pd.isna(d) else str(d))
        for v, t, d in zip(live["version"], live["schema_type"], live["definition"], strict=True)
    ]
    for rv, rt, rd in items:
        for wv, wt, wd in items:
            if rv == wv:
                continue
            reasons = _pair_check(rt, rd, wt, wd, BACKWARD)  # BACKWARD = the reader (new) reads the writer
            rows.append(
                {
                    "reader_version": rv,
                    "writer_version": wv,
                    "can_read": not reasons,
                    "reasons": [r.replace("new cannot read old: ", "") for r in reasons],
                }
            )
    return rows


def compatibility_matrix(schema_versions: DataFrame) -> DataFrame:
    """Every ordered pair of live versions of each topic: can ``reader_version`` read data written with
    ``writer_version``? (docs §9.2; Avro checker for AVRO/JSON, same type otherwise.)

    One row per (cluster, topic[, export], reader_version, writer_version), reader != writer, deleted
    versions excluded; ``reasons`` names each failure (``reader_field_missing_default_value``,
    ``type_mismatch``, ``type_changed``, ...). Both directions of a pair are two rows. Pure and lazy.
    """
    keys = _keys(schema_versions)
    source = schema_versions.select(*keys, "version", "schema_type", "definition", "is_deleted")
    key_fields = [f for f in source.schema.fields if f.name in keys]
    schema = T.StructType(
        [
            *key_fields,
            T.StructField("reader_version", T.LongType(), False),
            T.StructField("writer_version", T.LongType(), False),
            T.StructField("can_read", T.BooleanType(), False),
            T.StructField("reasons", T.ArrayType(T.StringType(), False), False),
        ]
    )
    return map_groups(source, keys, _matrix, schema, order=("version",))
