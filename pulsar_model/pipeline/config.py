"""Typed, frozen configuration, parsed and validated once at the entry point (STYLE.md §5).

The embedded default ships inside the package (:data:`DEFAULT_CONFIG_PATH`, ``pulsar_model/resources/
local.yaml``; ``conf/local.yaml`` links to it): every command starts from it whatever folder it runs in. A
config file (``--config``) replaces it; keys a file leaves out take the dataclass defaults below.
Config files are YAML read with ``yaml.safe_load`` (no code execution). Unknown keys fail at load
time with a message naming the key and the accepted ones. Command-line overrides use dotted keys
(``--set spark.master=local[1]``; a key under a mapping such as ``spark.conf`` keeps its own dots:
``--set spark.conf.spark.sql.shuffle.partitions=16``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pulsar_model import DEFAULT_PULSAR_VERSION
from pulsar_model.domain.versions import check_version
from pulsar_model.errors import ConfigError

#: The embedded default configuration, inside the package.
DEFAULT_CONFIG_PATH = Path(__file__).resolve().parents[1] / "resources" / "local.yaml"


@dataclass(frozen=True)
class SparkConfig:
    """How to get a SparkSession. ``master: null`` leaves it to spark-submit / Databricks."""

    master: str | None = "local[2]"
    app_name: str = "pulsar-analytics"
    #: Driver JVM heap of a local master (``auto``: half the machine's memory, 1g..32g; or ``8g``, ``512m``).
    driver_memory: str = "auto"
    conf: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class StorageConfig:
    """Where tables live. ``table_locations`` maps a table name to a path/URI outside the warehouse."""

    warehouse: str = "warehouse"
    table_locations: Mapping[str, str] = field(default_factory=dict)
    delta_backend: str = "auto"


@dataclass(frozen=True)
class PulsarConfig:
    """Broker semantics: the default version and per-cluster versions (docs §0.3)."""

    default_version: str = DEFAULT_PULSAR_VERSION
    cluster_versions: Mapping[str, str] = field(default_factory=dict)

    def version_for(self, cluster: str) -> str:
        return self.cluster_versions.get(cluster, self.default_version)


@dataclass(frozen=True)
class DemoConfig:
    """Demo-cluster generator settings used by ``make run`` / ``generate-demo``."""

    export_dir: str = "demo-export"
    seed: int = 42
    clusters: Sequence[str] = ("us-east", "us-west", "eu-central")


@dataclass(frozen=True)
class PlansConfig:
    """Where the ``plans`` stage finds dry-run requests (skip, clear-backlog, reset, reader start).

    ``requests_file``: a JSON / JSON Lines file of requests (see README "Plan requests"); ``requests_table``:
    a Delta table of the ``plan_requests`` contract maintained by operators. Both are optional; an export
    may also carry ``_requests/plan_requests.json``. Without any request the stage writes empty tables.
    """

    requests_file: str | None = None
    requests_table: str = "plan_requests"


@dataclass(frozen=True)
class CompactionConfig:
    """Compaction thresholds in bytes (docs §5.2, §5.3); the exports carry none.

    ``broker_threshold_bytes``: ``brokerServiceCompactionThresholdInBytes`` (0 = automatic compaction off);
    ``namespace_thresholds``: ``tenant/ns`` -> bytes; ``topic_thresholds``: topic or partitioned-topic name ->
    bytes. Topic beats namespace beats broker (§5.3).
    """

    broker_threshold_bytes: int = 0
    namespace_thresholds: Mapping[str, str] = field(default_factory=dict)
    topic_thresholds: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class QuotaConfig:
    """What-if backlog-quota eviction (docs §3.6, §3.7).

    ``trace_max_iterations``: loop steps kept per topic and quota type in ``quota_eviction_trace`` (the first
    in loop order; ``quota_evictions.trace_truncated`` flags longer loops, whose end state and
    ``iteration_count`` are always complete); 0 keeps no trace.
    """

    trace_max_iterations: int = 100_000


@dataclass(frozen=True)
class BrokerConfig:
    """Broker settings (``broker.conf``) that no export carries, applied to every cluster.

    ``active_consumer_failover_consistent_hashing``: ``activeConsumerFailoverConsistentHashing`` (docs §6.3,
    versions that have it); ``schema_compatibility_strategy``: ``schemaCompatibilityStrategy``, the broker
    level of docs §9.3 (FULL, BACKWARD, ..., ALWAYS_COMPATIBLE); ``transaction_long_open_threshold_ms``: a
    transaction open longer than this is reported as long-open (§8, not a broker setting).
    """

    active_consumer_failover_consistent_hashing: bool = False
    schema_compatibility_strategy: str = "FULL"
    transaction_long_open_threshold_ms: int = 3_600_000


@dataclass(frozen=True)
class AppConfig:
    """The whole configuration."""

    spark: SparkConfig = field(default_factory=SparkConfig)
    storage: StorageConfig = field(default_factory=StorageConfig)
    pulsar: PulsarConfig = field(default_factory=PulsarConfig)
    demo: DemoConfig = field(default_factory=DemoConfig)
    plans: PlansConfig = field(default_factory=PlansConfig)
    broker: BrokerConfig = field(default_factory=BrokerConfig)
    compaction: CompactionConfig = field(default_factory=CompactionConfig)
    quota: QuotaConfig = field(default_factory=QuotaConfig)
    report_dir: str = "reports"


def _build(cls: type[Any], raw: Mapping[str, Any], where: str) -> Any:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where or 'config'} must be a mapping, got {type(raw).__name__}: {raw!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(raw) - set(fields))
    if unknown:
        raise ConfigError(
            f"Unknown config key(s) {', '.join(repr(where + '.' + k if where else k) for k in unknown)}; "
            f"accepted keys{' under ' + repr(where) if where else ''}: {', '.join(sorted(fields))}"
        )
    values: dict[str, Any] = {}
    for name, value in raw.items():
        sub = f"{where}.{name}" if where else name
        spec = fields[name]
        factory: Any = spec.default_factory
        default: Any = factory() if factory is not dataclasses.MISSING else spec.default
        if dataclasses.is_dataclass(default):
            values[name] = _build(type(default), value or {}, sub)
        elif isinstance(default, Mapping):
            if value is None:
                value = {}
            if not isinstance(value, Mapping):
                raise ConfigError(f"{sub} must be a mapping, got {value!r}")
            values[name] = {str(k): str(v) for k, v in value.items()}
        elif isinstance(default, tuple):
            if not isinstance(value, list | tuple):
                raise ConfigError(f"{sub} must be a list, got {value!r}")
            values[name] = tuple(str(v) for v in value)
        elif isinstance(default, bool):
            if not isinstance(value, bool):
                raise ConfigError(f"{sub} must be true or false, got {value!r}")
            values[name] = value
        elif isinstance(default, int):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"{sub} must be an integer, got {value!r}")
            values[name] = value
        else:
            if value is not None and not isinstance(value, str | int | float):
                raise ConfigError(f"{sub} must be a string, got {value!r}")
            values[name] = None if value is None else str(value)
    return cls(**values)


def validate(config: AppConfig) -> AppConfig:
    """Check cross-field rules; return the config unchanged."""
    for where, version in [
        ("pulsar.default_version", config.pulsar.default_version),
        *((f"pulsar.cluster_versions.{c}", v) for c, v in config.pulsar.cluster_versions.items()),
    ]:
        check_version(version, where)
    if not 0 <= config.quota.trace_max_iterations <= 2**31 - 1:
        raise ConfigError(
            f"quota.trace_max_iterations = {config.quota.trace_max_iterations} must be between 0 (no trace) "
            "and 2147483647, e.g. 100000"
        )
    if config.storage.delta_backend not in {"auto", "spark", "bridge"}:
        raise ConfigError(
            f"storage.delta_backend = {config.storage.delta_backend!r}; use 'auto', 'spark' or 'bridge'"
        )
    if config.broker.transaction_long_open_threshold_ms <= 0:
        raise ConfigError(
            "broker.transaction_long_open_threshold_ms = "
            f"{config.broker.transaction_long_open_threshold_ms} must be positive, e.g. 3600000 (one hour)"
        )
    for where, mapping in (
        ("compaction.namespace_thresholds", config.compaction.namespace_thresholds),
        ("compaction.topic_thresholds", config.compaction.topic_thresholds),
    ):
        for name, value in mapping.items():
            if not re.fullmatch(r"-?\d+", str(value).strip()):
                raise ConfigError(
                    f"{where}.{name} = {value!r} is not a byte count; write an integer, e.g. 104857600"
                )
    memory = config.spark.driver_memory.strip().lower()
    if memory != "auto" and not re.fullmatch(r"\d+\s*[kmgt]?b?", memory):
        raise ConfigError(
            f"spark.driver_memory = {config.spark.driver_memory!r}; write 'auto' (half of this machine's "
            "memory) or a size such as 8g or 512m"
        )
    if not config.storage.warehouse:
        raise ConfigError("storage.warehouse is empty; set it to a folder or URI for the Delta tables")
    return config


def _apply_override(raw: dict[str, Any], assignment: str) -> None:
    if "=" not in assignment:
        raise ConfigError(
            f"Override {assignment!r} must look like section.key=value, e.g. spark.master=local[1]"
        )
    dotted, value_text = assignment.split("=", 1)
    keys = _override_keys(dotted.strip())
    target = raw
    for key in keys[:-1]:
        target = target.setdefault(key, {})
        if not isinstance(target, dict):
            raise ConfigError(f"Override {assignment!r}: {key!r} is not a section")
    try:
        value = yaml.safe_load(value_text) if value_text.strip() else ""
    except yaml.YAMLError as exc:
        raise ConfigError(
            f"Override {assignment!r}: the value is not valid YAML ({exc}); tags such as !!python/... "
            "are refused, quote the value if it is meant as text"
        ) from exc
    target[keys[-1]] = value


def _override_keys(dotted: str) -> list[str]:
    """Split ``section.key`` at its dots, except inside a mapping-valued field (``spark.conf``,
    ``pulsar.cluster_versions``, ...), whose own keys may hold dots (``spark.sql.shuffle.partitions``)."""
    parts = dotted.split(".")
    cls: Any = AppConfig
    for index, name in enumerate(parts[:-1]):
        fields = {f.name: f for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else {}
        spec = fields.get(name)
        if spec is None:
            return parts
        factory: Any = spec.default_factory
        default: Any = factory() if factory is not dataclasses.MISSING else spec.default
        if isinstance(default, Mapping):
            return [*parts[: index + 1], ".".join(parts[index + 1 :])]
        if not dataclasses.is_dataclass(default):
            return parts
        cls = type(default)
    return parts


def flatten_config(config: AppConfig) -> dict[str, object]:
    """Every setting as ``dotted.key -> value`` (mappings stay whole), in declaration order."""
    out: dict[str, object] = {}

    def walk(obj: Any, prefix: str) -> None:
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            key = f"{prefix}{f.name}"
            if dataclasses.is_dataclass(value):
                walk(value, key + ".")
            else:
                out[key] = dict(value) if isinstance(value, Mapping) else value

    walk(config, "")
    return out


def load_config(path: str | Path | None = None, overrides: Sequence[str] = ()) -> AppConfig:
    """Load ``path`` (YAML; default: the embedded :data:`DEFAULT_CONFIG_PATH`), apply ``section.key=value``
    overrides, validate."""
    raw: dict[str, Any] = {}
    if path is None:
        path = DEFAULT_CONFIG_PATH
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(
                f"Config file {str(p)!r} not found; pass an existing YAML file, e.g. conf/local.yaml"
            )
        try:
            loaded = yaml.safe_load(p.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise ConfigError(f"Config file {str(p)!r} is not valid YAML: {exc}") from exc
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"Config file {str(p)!r} must hold a mapping at the top level")
        raw = loaded
    for assignment in overrides:
        _apply_override(raw, assignment)
    config: AppConfig = _build(AppConfig, raw, "")
    return validate(config)
