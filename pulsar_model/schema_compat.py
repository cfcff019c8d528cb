"""Schema compatibility audit of each topic's registered versions (docs §9, §11.21, §12.14).

* :func:`resolve_strategy` / :func:`effective_strategies` – the strategy the registry applies to a topic
  (topic policy > namespace policy > deprecated auto-update policy > broker default, by version, §9.3);
* :func:`registration_verdicts` – replay of ``putSchemaIfAbsent`` for every version in order (§9.2): would
  it be accepted now, and why;
* :func:`compatibility_matrix` – every ordered pair of versions: can the reader version read data written
  with the writer version, with the reasons.

AVRO and Avro-format JSON schemas are decided the way the broker decides them: Apache Avro's Java rules
(``Schema.Parser``, ``Schema.equals``, the ``SchemaValidatorBuilder`` strategies over the resolving
grammar), re-stated in plain Python by :mod:`pulsar_model.engine.schema_avro` and checked against the Java
library itself by the property tests (docs §9.5-§9.8). The per-topic replay runs in
:func:`~pulsar_model.engine.grouped.map_groups` (``mapInPandas`` over the versions sorted by topic): no JVM
call,
the same answers on every executor.

Not modelled: the Protobuf-native and key/value checkers (their versions are judged like the types the
broker has no checker for: only ALWAYS_INCOMPATIBLE refuses), the consumer-side check and
``is_allow_auto_update_schema``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Final, Literal

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_model import DEFAULT_PULSAR_VERSION
from pulsar_model.domain.versions import PulsarVersion, VersionLike, flag
from pulsar_model.engine.flags import FLAGS_COLUMN, with_flags
from pulsar_model.engine.grouped import map_groups
from pulsar_model.engine.schema_avro import AvroSchemaError, Schema, parse_schema, schemas_equal
from pulsar_model.engine.schema_avro import can_read as avro_can_read
from pulsar_model.errors import ConfigError, ContractError

__all__ = [
    "STRATEGIES",
    "can_read",
    "compatibility_matrix",
    "effective_strategies",
    "identity_by_parsed_schema",
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
#: ``Policies.schema_auto_update_compatibility_strategy``'s default before apache/pulsar#13938 (2.8.3, 2.9.2,
#: 2.10.0 made it null): a namespace that never set the policy carries ``Full`` (docs §9.3).
AUTO_UPDATE_DEFAULT_2_5: Final = "Full"

#: The release rules of the resolution, oldest first (docs §9.3).
StrategyRule = Literal["2.5", "2.8", "2.9.2", "3.x"]
#: Schema types whose compatibility the broker checks with Avro's validators (docs §9.2, §9.8).
AVRO_TYPES: Final = ("AVRO", "JSON")
#: Schema types the registry compares by parsed Avro schema when it looks for an identical version (§9.2).
AVRO_PARSED_TYPES: Final = ("AVRO", "JSON", "PROTOBUF")
#: apache/pulsar PR #9612 (label release/2.7.1) made ``getSchemaVersionBySchemaData`` compare AVRO, JSON and
#: PROTOBUF versions by parsed schema (``Schema.equals``) and type; before, the SHA-256 of the bytes alone
#: decided (docs §9.2).
IDENTITY_BY_PARSED_SCHEMA_SINCE: Final = PulsarVersion(2, 7, 1)  # flag schema_identity_by_parsed_schema
#: Jackson ``JsonSchema`` type ids: a JSON schema in the legacy (pre-Avro) format (docs §9.8).
_JACKSON_SCHEMA_TYPES: Final = ("object", "array", "string", "number", "integer", "boolean", "null", "any")

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

    2.10.0+ (apache/pulsar#13297): topic policy -> namespace (unless UNDEFINED) -> auto-update policy
    mapped -> broker config. 2.8.3+ / 2.9.2+ (apache/pulsar#13938): the same without the topic policy.
    2.8.2, 2.9.0, 2.9.1 (apache/pulsar#11856): namespace UNDEFINED -> broker config -> if that is
    UNDEFINED the auto-update policy (default ``Full``). Before (2.5 rule): namespace UNDEFINED ->
    auto-update policy (default ``Full``). ``source`` is ``topic``, ``namespace``, ``auto_update`` or
    ``broker``.
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
    rule = _rule(v)
    if rule in ("2.5", "2.8"):
        if namespace is not None:
            return namespace, "namespace"
        if rule == "2.8" and broker_strategy != UNDEFINED:
            return broker_strategy, "broker"
        return AUTO_UPDATE_TO_STRATEGY[auto or AUTO_UPDATE_DEFAULT_2_5], "auto_update"
    topic = _set(topic_strategy) if rule == "3.x" else None
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
    pulsar_version: VersionLike | None = DEFAULT_PULSAR_VERSION,
) -> DataFrame:
    """Add ``strategy`` and ``strategy_source`` to each policy row (docs §9.3, as :func:`resolve_strategy`).

    ``policies`` carries ``cluster, topic`` and optional nullable string columns ``topic_strategy``,
    ``namespace_strategy`` and ``auto_update_strategy`` (missing column or null/empty = not set; an
    unknown auto-update value counts as not set). ``pulsar_version=None``: each row's own
    ``pulsar_version`` column picks the rule (flags ``schema_strategy_broker_fallback``,
    ``schema_strategy_topic_policy``). One row per input row. Pure and lazy.
    """
    if pulsar_version is None:
        if "pulsar_version" not in policies.columns:
            raise ContractError(
                "pulsar_version=None reads policies.pulsar_version, which policies does not have: add the "
                "column or pass a version string such as '4.1.3'"
            )
        resolve_strategy(None, None, None, broker_strategy)  # validates the broker strategy
        flagged = with_flags(policies)
        fl = F.col(FLAGS_COLUMN)
        old = _strategy_columns(policies, broker_strategy, "2.5")
        mid = _strategy_columns(policies, broker_strategy, "2.8")
        no_topic = _strategy_columns(policies, broker_strategy, "2.9.2")
        new = _strategy_columns(policies, broker_strategy, "3.x")
        fallback = F.coalesce(fl["schema_strategy_broker_fallback"], F.lit(False))
        auto_first = F.coalesce(fl["schema_strategy_auto_before_broker"], F.lit(False))
        topic_policy = F.coalesce(fl["schema_strategy_topic_policy"], F.lit(False))

        def pick(i: int) -> Column:
            chosen = F.when(topic_policy, new[i]).when(auto_first, no_topic[i])
            return chosen.when(fallback, mid[i]).otherwise(old[i])

        kept = [F.col(f"`{c}`") for c in policies.columns]
        return flagged.select(*kept, pick(0).alias("strategy"), pick(1).alias("strategy_source"))
    resolve_strategy(None, None, None, broker_strategy, pulsar_version)  # validates the arguments
    strategy, source = _strategy_columns(policies, broker_strategy, _rule(pulsar_version))
    return policies.select("*", strategy.alias("strategy"), source.alias("strategy_source"))


def _rule(version: VersionLike) -> StrategyRule:
    """The resolution rule of ``version`` (docs §9.3): flags ``schema_strategy_topic_policy`` (#13297),
    ``schema_strategy_auto_before_broker`` (#13938), ``schema_strategy_broker_fallback`` (#11856)."""
    if flag("schema_strategy_topic_policy", version):
        return "3.x"
    if flag("schema_strategy_auto_before_broker", version):
        return "2.9.2"
    return "2.8" if flag("schema_strategy_broker_fallback", version) else "2.5"


def _strategy_columns(policies: DataFrame, broker_strategy: str, rule: StrategyRule) -> tuple[Column, Column]:
    """``(strategy, strategy_source)`` columns of one release rule of :func:`resolve_strategy`."""

    def opt(name: str) -> Column:
        col = F.col(name).cast("string") if name in policies.columns else F.lit(None).cast("string")
        return F.when(col.isin("", UNDEFINED), F.lit(None).cast("string")).otherwise(col)

    mapping = F.create_map(*[F.lit(x) for pair in AUTO_UPDATE_TO_STRATEGY.items() for x in pair])
    auto = mapping[opt("auto_update_strategy")]
    topic, namespace = opt("topic_strategy"), opt("namespace_strategy")
    if rule == "2.5":
        chain = [(namespace, "namespace"), (auto, "auto_update")]
        fallback = (F.lit(AUTO_UPDATE_TO_STRATEGY[AUTO_UPDATE_DEFAULT_2_5]), "auto_update")
    elif rule == "2.8":
        chain = [(namespace, "namespace")]
        if broker_strategy != UNDEFINED:
            chain.append((F.lit(broker_strategy), "broker"))
        chain.append((auto, "auto_update"))
        fallback = (F.lit(AUTO_UPDATE_TO_STRATEGY[AUTO_UPDATE_DEFAULT_2_5]), "auto_update")
    else:
        chain = [(namespace, "namespace"), (auto, "auto_update")]
        if rule == "3.x":
            chain.insert(0, (topic, "topic"))
        fallback = (F.lit(broker_strategy), "broker")
    strategy = F.coalesce(*[c for c, _ in chain], fallback[0])
    source = F.lit(fallback[1])
    for col, name in reversed(chain):
        source = F.when(col.isNotNull(), F.lit(name)).otherwise(source)
    return strategy, source


# --- Avro checks ----------------------------------------------------------------------------------------


def identity_by_parsed_schema(pulsar_version: VersionLike = DEFAULT_PULSAR_VERSION) -> bool:
    """Does the registry find an identical version by parsed schema (True) or by bytes (docs §9.2)?"""
    return flag("schema_identity_by_parsed_schema", pulsar_version)


def _checker_parse(definition: str) -> Schema:
    """``AvroSchemaBasedCompatibilityCheck``'s parser: Pulsar's name validator, defaults not validated."""
    return parse_schema(definition, validate_defaults=False)


def _first_line(e: Exception) -> str:
    return str(e).splitlines()[0][:300] if str(e) else type(e).__name__


def can_read(reader: str, writer: str) -> tuple[bool, list[str]]:
    """Can Avro schema ``reader`` read data written with ``writer``? ``(ok, reasons)`` (docs §9.7).

    The broker's answer (``ValidateMutualRead.canRead(writer, reader)`` of Avro 1.12.1). Reasons name the
    failure and where it is, e.g. ``missing_required_field at Event: reader field(s) b have no default
    ...``, ``incompatible_schema_types at Event.a: writer string cannot be read as int``; a schema that
    does not parse gives ``invalid_schema: ...``.
    """
    try:
        r, w = _checker_parse(reader), _checker_parse(writer)
    except AvroSchemaError as e:
        return False, [f"invalid_schema: {_first_line(e)}"]
    result = avro_can_read(w, r)
    return result.ok, list(result.reasons)


def _is_jackson_json_schema(definition: str | None) -> bool:
    """A JSON schema in the legacy Jackson ``JsonSchema`` format (``{"type": "object", ...}``)."""
    try:
        node = json.loads(definition or "")
    except ValueError:
        return False
    return isinstance(node, dict) and node.get("type") in _JACKSON_SCHEMA_TYPES


def _sha(definition: str | None) -> bytes:
    return hashlib.sha256((definition or "").encode("utf-8")).digest()


# --- registration replay (§9.2) -------------------------------------------------------------------------

_Version = tuple[int, str, str | None]  # (version, schema type, definition)


class _RefusedError(Exception):
    """The registration fails before or outside the compatibility check (a schema the broker's parsers
    throw on, a version it cannot compare): the broker answers with an error, the version is refused."""


def _validate_data(stype: str, definition: str | None) -> str | None:
    """``StructSchemaDataValidator`` on a new AVRO/JSON version: why it is refused, or None (docs §9.2)."""
    if stype not in AVRO_TYPES:
        return None
    try:
        schema = _checker_parse(definition or "")
    except AvroSchemaError as e:
        if stype == "JSON" and _is_jackson_json_schema(definition):
            return None
        return f"invalid_schema: {_first_line(e)}"
    if stype == "AVRO" and schema.type == "union":
        return "invalid_schema: Avro schema typed [UNION] is not supported"
    return None


def _identical_version(
    stype: str, definition: str | None, live: Sequence[_Version], by_parsed_schema: bool
) -> int | None:
    """``getSchemaVersionBySchemaData``: the first live version identical to the new one (docs §9.2).

    AVRO/JSON/PROTOBUF versions are parsed with default validation on, the new one first and then each
    live version oldest first until one is equal; a parse failure on the way raises :class:`_RefusedError`.
    """
    if not by_parsed_schema:
        return next((v for v, _, d in live if d == definition), None)
    if stype not in AVRO_PARSED_TYPES:
        return next((v for v, t, d in live if t == stype and _sha(d) == _sha(definition)), None)
    try:
        new = parse_schema(definition or "", validate_defaults=True)
    except AvroSchemaError as e:
        raise _RefusedError(f"invalid_schema: the registry cannot parse it: {_first_line(e)}") from None
    for v, t, d in live:
        if t in AVRO_PARSED_TYPES:
            try:
                old = parse_schema(d or "", validate_defaults=True)
            except AvroSchemaError as e:
                raise _RefusedError(
                    f"v{v}: invalid_schema: the registry cannot parse it: {_first_line(e)}"
                ) from None
            if t == stype and schemas_equal(new, old):
                return v
        elif t == stype and _sha(d) == _sha(definition):
            return v
    return None


def _avro_reasons(new: Schema, old: Schema, strategy: str) -> list[str]:
    """Why ``new`` fails ``strategy`` against ``old`` (empty = passes), in the validator's order."""
    reasons: list[str] = []
    if strategy in _CHECKS_OLD_READS_NEW:
        reasons += [f"old cannot read new: {r}" for r in avro_can_read(new, old).reasons]
    if strategy in _CHECKS_NEW_READS_OLD:
        reasons += [f"new cannot read old: {r}" for r in avro_can_read(old, new).reasons]
    return reasons


def _check(stype: str, definition: str | None, targets: Sequence[_Version], strategy: str) -> list[str]:
    """``SchemaCompatibilityCheck.checkCompatible`` of the new version's type against ``targets``
    (newest first); reasons per failing version, empty when compatible (docs §9.2, §9.8)."""
    if stype not in AVRO_TYPES:
        # No checker for this type: the registry's default one refuses only under ALWAYS_INCOMPATIBLE.
        return [f"strategy {strategy} rejects every new schema"] if strategy == ALWAYS_INCOMPATIBLE else []
    try:
        olds = [(v, _checker_parse(d or "")) for v, _, d in targets]
        new = _checker_parse(definition or "")
    except AvroSchemaError as e:
        return [f"invalid_schema: {_first_line(e)}"]
    if strategy not in _CHECKS_NEW_READS_OLD + _CHECKS_OLD_READS_NEW:
        return [f"strategy {strategy} rejects every schema that is not identical to an existing one"]
    return [f"v{v}: {r}" for v, old in olds for r in _avro_reasons(new, old, strategy)]


def _register(
    stype: str, definition: str | None, live: Sequence[_Version], strategy: str, by_parsed_schema: bool
) -> dict[str, object]:
    """What ``putSchemaIfAbsent`` answers for a new version on a topic whose live versions are ``live``."""
    invalid = _validate_data(stype, definition)
    if invalid is not None:
        return {"verdict": INCOMPATIBLE, "checked_versions": [], "reasons": [invalid]}
    if not live:
        return {"verdict": ACCEPTED_FIRST, "checked_versions": [], "reasons": []}
    try:
        same = _identical_version(stype, definition, live, by_parsed_schema)
    except _RefusedError as e:
        return {"verdict": INCOMPATIBLE, "checked_versions": [], "reasons": [str(e)]}
    if same is not None:
        return {
            "verdict": ACCEPTED_IDENTICAL,
            "identical_to_version": same,
            "checked_versions": [],
            "reasons": [],
        }
    if strategy in _TRANSITIVE:
        checked = [v for v, _, _ in reversed(live)]
        other = next(((v, t) for v, t, _ in live if t != stype), None)
        if other is not None:
            reasons = [f"v{other[0]}: type_changed: {other[1]} -> {stype}"]
        else:
            reasons = _check(stype, definition, list(reversed(live)), strategy)
    elif strategy == ALWAYS_COMPATIBLE:
        checked, reasons = [], []
    else:
        latest = live[-1]
        checked = [latest[0]]
        if latest[1] != stype:
            reasons = [f"v{latest[0]}: type_changed: {latest[1]} -> {stype}"]
        elif _sha(latest[2]) == _sha(definition):
            reasons = []
        else:
            reasons = _check(stype, definition, [latest], strategy)
    return {
        "verdict": INCOMPATIBLE if reasons else COMPATIBLE,
        "checked_versions": checked,
        "reasons": reasons,
    }


def _verdicts(pdf: pd.DataFrame, strategy: str, by_parsed_schema: bool) -> list[dict[str, object]]:
    pdf = pdf.sort_values("version", kind="stable")
    live: list[_Version] = []
    out: list[dict[str, object]] = []
    for version, stype, definition, deleted in zip(
        pdf["version"], pdf["schema_type"], pdf["definition"], pdf["is_deleted"], strict=True
    ):
        if bool(deleted):
            live = []  # trimDeletedSchemaAndGetList: only the versions after the last deletion count
            continue
        definition = None if definition is None or pd.isna(definition) else str(definition)
        row: dict[str, object] = {
            "version": int(version),
            "schema_type": str(stype),
            "strategy": strategy,
            "identical_to_version": None,
        }
        row.update(_register(str(stype), definition, live, strategy, by_parsed_schema))
        out.append(row)
        live.append((int(version), str(stype), definition))
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
    pulsar_version: VersionLike | None = DEFAULT_PULSAR_VERSION,
) -> DataFrame:
    """Replay ``putSchemaIfAbsent`` for every version of each topic, oldest first (docs §9.2, §11.21).

    One row per non-deleted version: ``strategy`` (from ``strategies`` = ``cluster, topic, strategy``, e.g.
    :func:`effective_strategies`; else ``default_strategy``), ``verdict`` = ``accepted_first`` (nothing
    registered since the last deletion), ``accepted_identical`` (an equal schema of the same type is
    registered since the last deletion: ``identical_to_version`` is returned, no check, even under
    ALWAYS_INCOMPATIBLE; equal = Avro's ``Schema.equals`` from 2.7.1 on, which ignores docs, aliases and
    formatting, the same bytes before), ``compatible`` or ``incompatible``; ``checked_versions`` (the
    latest only, or all newest-first for transitive strategies; none when nothing was checked) and
    ``reasons`` (which version, which direction, which field or type, docs §9.7). A version the broker's
    parsers throw on (an invalid default, a name it rejects, a union at the top of an AVRO schema) is
    ``incompatible`` with an ``invalid_schema`` reason. Each version is judged as if registered now under
    the strategy, after all earlier versions. Pure and lazy.
    """
    if default_strategy not in STRATEGIES:
        raise ConfigError(
            f"Unknown default strategy {default_strategy!r}; use one of {', '.join(STRATEGIES)}"
        )
    keys = _keys(schema_versions)
    source = _with_strategy(schema_versions, keys, strategies, default_strategy)
    if pulsar_version is None:
        if "pulsar_version" not in schema_versions.columns:
            raise ContractError(
                "pulsar_version=None reads schema_versions.pulsar_version (each topic's cluster version), "
                "which schema_versions does not have: add the column or pass a version string such as '4.1.3'"
            )
        flags = with_flags(schema_versions.select(*keys, "version", "pulsar_version"))
        parsed = F.coalesce(F.col(FLAGS_COLUMN)["schema_identity_by_parsed_schema"], F.lit(False))
        source = source.join(
            flags.select(*keys, "version", parsed.alias("_by_parsed")), [*keys, "version"], "left"
        )
        fixed = None
    else:
        fixed = identity_by_parsed_schema(pulsar_version)
    key_fields = [f for f in source.schema.fields if f.name in keys]

    def per_topic(pdf: pd.DataFrame) -> list[dict[str, object]]:
        by_parsed_schema = fixed if fixed is not None else bool(pdf["_by_parsed"].iloc[0])
        return _verdicts(pdf, str(pdf["strategy"].iloc[0]), by_parsed_schema)

    schema = T.StructType([*key_fields, *_VERDICT_FIELDS])
    return map_groups(source, keys, per_topic, schema, order=("version",))


def _pair_reasons(reader: _Version, writer: _Version) -> list[str]:
    """Why ``reader`` cannot read data written with ``writer`` (empty = it can), docs §9.7."""
    _, rt, rd = reader
    _, wt, wd = writer
    if rt != wt:
        return [f"type_changed: {wt} -> {rt}"]
    if rt not in AVRO_TYPES or rd == wd:
        return []
    if rt == "JSON" and (_is_jackson_json_schema(rd) or _is_jackson_json_schema(wd)):
        return ["not_checked: not an Avro-format schema"]
    return can_read(rd or "", wd or "")[1]


def _matrix(pdf: pd.DataFrame) -> list[dict[str, object]]:
    live = pdf[~pdf["is_deleted"].astype(bool)].sort_values("version")
    rows: list[dict[str, object]] = []
    items: Sequence[_Version] = [
        (int(v), str(t), None if d is None or pd.isna(d) else str(d))
        for v, t, d in zip(live["version"], live["schema_type"], live["definition"], strict=True)
    ]
    for reader in items:
        for writer in items:
            if reader[0] == writer[0]:
                continue
            reasons = _pair_reasons(reader, writer)
            rows.append(
                {
                    "reader_version": reader[0],
                    "writer_version": writer[0],
                    "can_read": not reasons,
                    "reasons": reasons,
                }
            )
    return rows


def compatibility_matrix(schema_versions: DataFrame) -> DataFrame:
    """Every ordered pair of live versions of each topic: can ``reader_version`` read data written with
    ``writer_version``? (docs §9.7; Avro's resolution for AVRO/JSON, same type otherwise.)

    One row per (cluster, topic[, export], reader_version, writer_version), reader != writer, deleted
    versions excluded; ``reasons`` names each failure and where it is (``missing_required_field at
    Event: ...``, ``incompatible_schema_types at Event.a: ...``, ``names_dont_match``, ``type_changed``,
    ``invalid_schema``, ...). Both directions of a pair are two rows. Pure and lazy.
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
