"""Deterministic demo-cluster generator: simulate N Pulsar clusters and write their raw exports.

:func:`generate_demo` simulates every topic (partition) of every cluster with
:mod:`pulsar_model.demo.simulator` (one topic, or one replicated topic across clusters with
:mod:`pulsar_model.demo.replication`, at a time; memory is bounded by the largest topic, never by the
number of topics) and writes, per cluster, the export kinds of the README layout in the formats real
Pulsar admin tools produce:

* ``stats-internal/`` - ``pulsar-admin topics stats-internal`` (docs §10.2) per topic, one
  ``partitioned-stats-internal`` wrapper; version-specific details per cluster (``offloaded`` vs the
  Go admin's ``isOffloaded`` + ``timestamp`` + ``lastLedgerWitchTimestamp`` typo on 3.x clusters, Guava
  ``", "`` individually-deleted ranges spanning ledgers vs per-ledger ``","`` ranges with ``L:-1``
  bounds, unknown extra fields on 4.x, the ``compactedLedger`` -1 sentinel);
* ``stats/`` - ``pulsar-admin topics stats`` (docs §10.3), one ``partitioned-stats --per-partition``;
* ``backlog-quotas/`` - broker runtime config, namespace and topic quotas in the limit-only,
  limitSize/limitTime and plain-string (Java ``toString``, also as CLI text) shapes (docs §3.3, §10.4);
* ``consumers/`` - client-config exports with priority levels (map form, list form, CSV);
* ``schemas/`` - REST ``GetAllVersionsSchemaResponse`` (and one CLI ``--all-versions`` document stream);
* ``entries/`` - JSON Lines ``{"topic", "ledger_id", "entry_id", "data"}`` of every entry of every
  listed ledger, encoded with :mod:`pulsar_model.wire.codec`.

Kinds come as per-topic JSON files or JSON Lines envelopes (``DemoSpec.file_form``). ``manifest.json``
names the export and the clusters' versions; ``_ground_truth/`` (ignored by ingestion) holds what the
analytics must find: exact backlogs, replicated-subscription expectations and failover duplicates,
snapshot traces, compaction expectations, transactions and active failover consumers.

Same spec and seed -> byte-identical output: all randomness comes from ``random.Random`` seeded per
topic from the spec seed, times derive from ``exported_at``, iteration is sorted, no wall clock.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import json
import math
import random
import shutil
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, TextIO
from urllib.parse import quote

from pulsar_model.demo.replication import (
    ReplicatedGroup,
    UpdateTrace,
    uses_new_snapshot_cache,
)
from pulsar_model.demo.simulator import (
    COMPACTION_CURSOR,
    EARLIEST,
    AckProfile,
    ClusterInfo,
    ConsumerInfo,
    CursorSim,
    DataContent,
    DedupCursor,
    Dispatcher,
    EventLoop,
    LedgerConfig,
    LedgerIdAllocator,
    MarkerContent,
    Pos,
    Producer,
    ProducerPlan,
    Reader,
    TopicSim,
    TxnPlan,
    TxnProducer,
    active_consumer,
    compact_entries,
    fmt_pos,
    partition_index,
    run_compaction,
    version_tuple,
)
from pulsar_model.errors import ConfigError

__all__ = ["DEFAULT_PULSAR_VERSIONS", "DemoSpec", "DemoSummary", "generate_demo", "iter_topic_names"]

#: Default broker version of each default cluster (one 3.x line, the two 4.x lines).
DEFAULT_PULSAR_VERSIONS: Mapping[str, str] = {"us-east": "4.1.3", "us-west": "3.0.7", "eu-central": "4.0.8"}
_FALLBACK_VERSIONS = ("4.1.3", "3.0.7", "4.0.8")
#: The six export kinds of the README layout.
KINDS = ("stats-internal", "stats", "backlog-quotas", "consumers", "schemas", "entries")
FileForm = Literal["per-topic", "jsonl", "mixed"]
GROUND_TRUTH_DIR = "_ground_truth"
#: Dry-run requests the nightly ``plans`` stage answers for the demo (ignored by ingestion: ``_`` prefix).
REQUESTS_FILE = Path("_requests") / "plan_requests.json"
#: Topics per cluster that get plan requests in the demo.
PLAN_REQUEST_TOPICS = 4
_MINUTE = 60_000
_HOUR = 3_600_000
_GB = 1024**3


@dataclass(frozen=True)
class DemoSpec:
    """What the demo simulates. Sizes are parameters; the defaults give ~230 topic partitions over
    three clusters and ~50k stored entries (ingests in well under a minute on 2 cores).

    ``messages_per_topic`` is per topic partition. Ledger roll-over: by entries
    (``max_entries_per_ledger``), by size (``max_ledger_size_bytes``) and by time
    (``ledger_rollover_minutes``, checked on every add and by a timer). ``file_form``: ``per-topic``
    (one JSON file per topic), ``jsonl`` (envelopes) or ``mixed`` (kinds and clusters alternate).
    """

    clusters: tuple[str, ...] = ("us-east", "us-west", "eu-central")
    pulsar_versions: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_PULSAR_VERSIONS))
    namespaces: tuple[str, ...] = ("acme/orders", "acme/events", "public/default")
    replicated_namespace: str | None = "acme/geo"
    topics_per_namespace: int = 12
    replicated_topics: int = 3
    partitions: int = 4
    replicated_partitions: int = 2
    messages_per_topic: tuple[int, int] = (50, 700)
    replicated_messages_per_cluster: tuple[int, int] = (60, 160)
    max_batch_size: int = 10
    seed: int = 42
    exported_at: datetime = datetime(2026, 11, 21, 2, 0, tzinfo=UTC)
    history_hours: float = 6.0
    replicated_window_minutes: int = 30
    max_entries_per_ledger: int = 100
    max_ledger_size_bytes: int = 48 * 1024
    ledger_rollover_minutes: int = 30
    min_ledger_rollover_minutes: int = 0
    snapshot_frequency_ms: int = 1000
    snapshot_timeout_seconds: int = 30
    dedup_snapshot_interval: int = 40
    broker_entry_metadata_clusters: tuple[str, ...] | None = None
    entries_dump: bool = True
    file_form: FileForm = "mixed"
    jsonl_max_bytes: int = 32 * 1024 * 1024
    export_id: str | None = None

    def __post_init__(self) -> None:
        if not self.clusters or len(set(self.clusters)) != len(self.clusters):
            raise ConfigError(f"DemoSpec.clusters {self.clusters!r} must be non-empty and unique")
        for name in self.clusters:
            if not name or name.startswith(("_", ".")) or "/" in name:
                raise ConfigError(
                    f"cluster name {name!r} cannot be an export folder name; use e.g. 'us-east'"
                )
        if self.exported_at.tzinfo is None:
            raise ConfigError(
                "DemoSpec.exported_at must be timezone-aware (UTC), e.g. datetime(..., tzinfo=UTC)"
            )
        if self.file_form not in ("per-topic", "jsonl", "mixed"):
            raise ConfigError(f"DemoSpec.file_form {self.file_form!r} must be per-topic, jsonl or mixed")
        lo, hi = self.messages_per_topic
        if not 1 <= lo <= hi:
            raise ConfigError(
                f"DemoSpec.messages_per_topic {self.messages_per_topic!r} must be (lo, hi), 1 <= lo <= hi"
            )
        lo, hi = self.replicated_messages_per_cluster
        if not 1 <= lo <= hi:
            raise ConfigError("DemoSpec.replicated_messages_per_cluster must be (lo, hi), 1 <= lo <= hi")
        for key, value in (
            ("topics_per_namespace", self.topics_per_namespace),
            ("partitions", self.partitions),
            ("max_batch_size", self.max_batch_size),
            ("max_entries_per_ledger", self.max_entries_per_ledger),
            ("ledger_rollover_minutes", self.ledger_rollover_minutes),
            ("snapshot_frequency_ms", self.snapshot_frequency_ms),
            ("snapshot_timeout_seconds", self.snapshot_timeout_seconds),
            ("dedup_snapshot_interval", self.dedup_snapshot_interval),
            ("replicated_window_minutes", self.replicated_window_minutes),
        ):
            if value < 1:
                raise ConfigError(f"DemoSpec.{key} must be >= 1, got {value}")
        if self.replicated_topics < 0 or self.replicated_partitions < 0:
            raise ConfigError("DemoSpec.replicated_topics / replicated_partitions must be >= 0")
        if self.history_hours * 60 < self.ledger_rollover_minutes:
            raise ConfigError("DemoSpec.history_hours must cover at least one ledger_rollover_minutes")
        for ns in (*self.namespaces, *([self.replicated_namespace] if self.replicated_namespace else [])):
            if ns.count("/") != 1 or not all(ns.split("/")):
                raise ConfigError(f"namespace {ns!r} must be 'tenant/namespace'")

    def version_of(self, cluster: str) -> str:
        """Broker version of ``cluster`` (``pulsar_versions``, else a default line by position)."""
        if cluster in self.pulsar_versions:
            return self.pulsar_versions[cluster]
        return _FALLBACK_VERSIONS[self.clusters.index(cluster) % len(_FALLBACK_VERSIONS)]

    @property
    def replicated(self) -> bool:
        return bool(self.replicated_namespace) and self.replicated_topics > 0 and len(self.clusters) > 1


@dataclass(frozen=True)
class DemoSummary:
    """What :func:`generate_demo` wrote: counts per kind, where, and the ground truth."""

    out_dir: Path
    manifest_path: Path
    ground_truth_dir: Path
    export_id: str
    clusters: Mapping[str, str]
    topics: int
    replicated_groups: int
    entries: int
    marker_entries: int
    messages: int
    files: Mapping[str, int]
    records: Mapping[str, int]
    kind_dirs: Mapping[str, tuple[Path, ...]]
    ground_truth_files: tuple[Path, ...]


# --- small helpers ----------------------------------------------------------------------------------


def _seed(*parts: object) -> int:
    digest = hashlib.sha256("|".join(str(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big")


def _ms(ts: datetime) -> int:
    return (ts - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)


def _iso(ms: int, offset_style: bool) -> str:
    if ms <= 0:
        return ""
    d = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)
    return f"{d:%Y-%m-%dT%H:%M:%S}.{ms % 1000:03d}" + ("+00:00" if offset_style else "Z")


def _enc(name: str) -> str:
    """File name of a topic / namespace: URL-encoded like a shell loop over pulsar-admin writes it."""
    return quote(name, safe="")


_CORPUS = (
    b"order placed shipped delivered cancelled refunded customer warehouse route parcel invoice "
    b"payment authorised captured settled pending retry priority express standard region zone "
    b"currency amount discount coupon loyalty points basket item sku quantity price tax total "
) * 64


def _text_payload(rng: random.Random, size: int, seq: int, version: int | None) -> bytes:
    head = b'{"seq":%d,"note":"' % seq
    need = max(size - len(head) - 2, 0)
    off = rng.randrange(0, len(_CORPUS) - need - 1) if need < len(_CORPUS) - 1 else 0
    return head + _CORPUS[off : off + need] + b'"}'


def _zigzag(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = z & 0x7F
        z >>= 7
        if z:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _avro_str(s: str) -> bytes:
    raw = s.encode("utf-8")
    return _zigzag(len(raw)) + raw


_AVRO_SCHEMAS: dict[str, list[dict[str, Any]]] = {
    # compatible evolution: fields added with defaults (docs §9.4 golden fact 1)
    "compatible": [
        {
            "type": "record",
            "name": "Order",
            "namespace": "com.acme",
            "fields": [{"name": "id", "type": "long"}, {"name": "customer", "type": "string"}],
        },
        {
            "type": "record",
            "name": "Order",
            "namespace": "com.acme",
            "fields": [
                {"name": "id", "type": "long"},
                {"name": "customer", "type": "string"},
                {"name": "amount", "type": "double", "default": 0.0},
            ],
        },
        {
            "type": "record",
            "name": "Order",
            "namespace": "com.acme",
            "fields": [
                {"name": "id", "type": "long"},
                {"name": "customer", "type": "string"},
                {"name": "amount", "type": "double", "default": 0.0},
                {"name": "currency", "type": "string", "default": "EUR"},
            ],
        },
    ],
    # v2 changes the type of "id" (long -> string): incompatible in both directions
    "incompatible": [
        {
            "type": "record",
            "name": "Event",
            "namespace": "com.acme",
            "fields": [{"name": "id", "type": "long"}, {"name": "kind", "type": "string"}],
        },
        {
            "type": "record",
            "name": "Event",
            "namespace": "com.acme",
            "fields": [
                {"name": "id", "type": "long"},
                {"name": "kind", "type": "string"},
                {"name": "source", "type": ["null", "string"], "default": None},
            ],
        },
        {
            "type": "record",
            "name": "Event",
            "namespace": "com.acme",
            "fields": [
                {"name": "id", "type": "string"},
                {"name": "kind", "type": "string"},
                {"name": "source", "type": ["null", "string"], "default": None},
            ],
        },
    ],
}


def _avro_payload(family: str) -> Any:
    """Avro binary records matching the family's schema version (hand-encoded, no codec needed)."""

    def payload(rng: random.Random, size: int, seq: int, version: int | None) -> bytes:
        v = version or 0
        if family == "compatible":
            out = _zigzag(seq) + _avro_str(f"customer-{rng.randint(1, 999)}")
            if v >= 1:
                out += _double(rng.randint(100, 99999) / 100)
            if v >= 2:
                out += _avro_str(rng.choice(["EUR", "USD", "GBP"]))
            return out
        out = (_avro_str(f"evt-{seq}") if v >= 2 else _zigzag(seq)) + _avro_str(rng.choice(["click", "view"]))
        if v >= 1:
            out += _zigzag(1) + _avro_str("web") if rng.random() < 0.5 else _zigzag(0)
        return out

    return payload


def _double(x: float) -> bytes:
    return struct.pack("<d", x)


# --- plans ---------------------------------------------------------------------------------------------

#: Special behaviours given to non-partitioned topics, in this order, so every cluster gets each.
SPECIAL_FEATURES = (
    "compaction",
    "txn",
    "open-txn",
    "dedup",
    "readers",
    "drain",
    "idle",
    "empty",
    "reader-only",
    "schema-incompatible",
    "keyshared",
    "reload",
)
_TOPIC_WORDS = (
    "orders", "payments", "invoices", "shipments", "refunds", "carts", "clicks", "sessions", "profiles",
    "inventory", "alerts", "audit-log", "prices", "reviews", "returns", "loyalty", "tickets", "metrics",
)  # fmt: skip
_GEO_WORDS = ("geo-orders", "geo-payments", "geo-customers", "geo-stock", "geo-rates", "geo-notify")
_SUB_WORDS = ("billing", "analytics", "search-indexer", "fraud-check", "mailer", "warehouse", "ledger-sync")


@dataclass(frozen=True)
class _Cluster:
    name: str
    index: int
    version: str
    info: ClusterInfo
    epoch_ms: int

    @property
    def old_style(self) -> bool:
        """3.x-and-older export details (Go admin client fields, Guava range set, offset timestamps)."""
        return version_tuple(self.version) < (4, 0, 0)

    @property
    def v3_stats(self) -> bool:
        return version_tuple(self.version) >= (3, 0, 0)


@dataclass(frozen=True)
class _TopicPlan:
    namespace: str
    ns_index: int
    base: str  # persistent://tenant/ns/name (partitioned topic or topic)
    partition: int  # -1 when not partitioned
    partitions: int
    index: int  # topic index within namespace
    feature: str  # one of SPECIAL_FEATURES, "partitioned", "schema", or "plain"

    @property
    def topic(self) -> str:
        return self.base if self.partition < 0 else f"{self.base}-partition-{self.partition}"


def _namespace_topics(spec: DemoSpec, ns_index: int, namespace: str) -> list[tuple[int, str, int]]:
    """(index, base name, partitions) of one non-replicated namespace."""
    out = []
    words = (
        _TOPIC_WORDS[(ns_index * 6) % len(_TOPIC_WORDS) :]
        + _TOPIC_WORDS[: (ns_index * 6) % len(_TOPIC_WORDS)]
    )
    for j in range(spec.topics_per_namespace):
        word = words[j % len(words)] + ("" if j < len(words) else f"-{j // len(words)}")
        parts = spec.partitions if (j % 4 == 1 and spec.partitions > 1) else 0
        out.append((j, f"persistent://{namespace}/{word}", parts))
    return out


def _local_plans(spec: DemoSpec) -> list[_TopicPlan]:
    """Every non-replicated topic partition (same names on every cluster), features assigned."""
    per_ns = [_namespace_topics(spec, i, ns) for i, ns in enumerate(spec.namespaces)]
    features: dict[str, str] = {}
    k = 0
    schema_done = False
    for j in range(spec.topics_per_namespace):
        for i in range(len(spec.namespaces)):
            _, base, parts = per_ns[i][j]
            if parts:
                features[base] = "partitioned"
                if not schema_done:
                    features[base] = "schema"
                    schema_done = True
                continue
            features[base] = (
                SPECIAL_FEATURES[k % len(SPECIAL_FEATURES)] if k < len(SPECIAL_FEATURES) * 4 else "plain"
            )
            k += 1
    plans = []
    for i, ns in enumerate(spec.namespaces):
        for j, base, parts in per_ns[i]:
            if parts:
                plans += [_TopicPlan(ns, i, base, p, parts, j, features[base]) for p in range(parts)]
            else:
                plans.append(_TopicPlan(ns, i, base, -1, 0, j, features[base]))
    return plans


def _replicated_plans(spec: DemoSpec) -> list[_TopicPlan]:
    if not spec.replicated or spec.replicated_namespace is None:
        return []
    ns = spec.replicated_namespace
    plans = []
    for j in range(spec.replicated_topics):
        word = _GEO_WORDS[j % len(_GEO_WORDS)] + ("" if j < len(_GEO_WORDS) else f"-{j // len(_GEO_WORDS)}")
        base = f"persistent://{ns}/{word}"
        parts = spec.replicated_partitions if (j == 0 and spec.replicated_partitions > 1) else 0
        if parts:
            plans += [_TopicPlan(ns, -1, base, p, parts, j, "replicated") for p in range(parts)]
        else:
            plans.append(_TopicPlan(ns, -1, base, -1, 0, j, "replicated"))
    return plans


# --- export writing ------------------------------------------------------------------------------------


class _JsonlSink:
    """A JSON Lines file that rolls over to ``<prefix>-NNNNN.jsonl`` every ``max_bytes``."""

    def __init__(self, folder: Path, prefix: str, max_bytes: int) -> None:
        self.folder = folder
        self.prefix = prefix
        self.max_bytes = max_bytes
        self.n = 0
        self.fh: TextIO | None = None
        self.written = 0
        self.paths: list[Path] = []

    def write(self, line: str) -> None:
        if self.fh is None or self.written >= self.max_bytes:
            self.close()
            self.folder.mkdir(parents=True, exist_ok=True)
            path = self.folder / f"{self.prefix}-{self.n:05d}.jsonl"
            self.n += 1
            self.fh = path.open("w", encoding="utf-8", newline="\n")
            self.paths.append(path)
            self.written = 0
        self.fh.write(line)
        self.fh.write("\n")
        self.written += len(line) + 1

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()
            self.fh = None


def _dumps_pretty(doc: Any) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def _dumps_line(doc: Any) -> str:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


class _Writer:
    """Writes documents of each kind for each cluster in the spec's file form; counts files/records."""

    def __init__(self, out: Path, spec: DemoSpec) -> None:
        self.out = out
        self.spec = spec
        self.sinks: dict[tuple[str, str], _JsonlSink] = {}
        self.csv: dict[str, tuple[TextIO, Any]] = {}
        self.files: dict[str, int] = dict.fromkeys(KINDS, 0)
        self.records: dict[str, int] = dict.fromkeys(KINDS, 0)

    def form(self, cluster: _Cluster, kind: str) -> str:
        """``file`` | ``jsonl`` | ``csv`` (consumers only) for this cluster and kind."""
        ff = self.spec.file_form
        if ff == "per-topic":
            return "file"
        if ff == "jsonl":
            return "jsonl"
        if kind == "consumers":
            return ("file", "jsonl", "csv")[cluster.index % 3]
        k = KINDS.index(kind)
        return "jsonl" if (cluster.index + k) % 2 == 1 else "file"

    def _sink(self, cluster: _Cluster, kind: str) -> _JsonlSink:
        key = (cluster.name, kind)
        sink = self.sinks.get(key)
        if sink is None:
            sink = _JsonlSink(self.out / cluster.name / kind, kind, self.spec.jsonl_max_bytes)
            self.sinks[key] = sink
        return sink

    def doc(self, cluster: _Cluster, kind: str, scope: str, doc: Any, *, scope_key: str = "topic") -> None:
        """One document: a per-topic file named after ``scope`` or one envelope line."""
        self.records[kind] += 1
        if self.form(cluster, kind) == "jsonl":
            env: dict[str, Any] = {"cluster": cluster.name}
            if scope_key == "broker":
                env["broker"] = True
            else:
                env[scope_key] = scope
            env["stats"] = doc
            sink = self._sink(cluster, kind)
            before = len(sink.paths)
            sink.write(_dumps_line(env))
            self.files[kind] += len(sink.paths) - before
            return
        folder = self.out / cluster.name / kind
        folder.mkdir(parents=True, exist_ok=True)
        name = "broker" if scope_key == "broker" else _enc(scope)
        text = doc if isinstance(doc, str) else _dumps_pretty(doc)
        (folder / f"{name}.json").write_text(text, encoding="utf-8", newline="\n")
        self.files[kind] += 1

    def text_file(self, cluster: _Cluster, kind: str, scope: str, text: str) -> None:
        """A per-scope file with non-JSON text (CLI output redirected to ``<scope>.json``)."""
        self.records[kind] += 1
        folder = self.out / cluster.name / kind
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{_enc(scope)}.json").write_text(text, encoding="utf-8", newline="\n")
        self.files[kind] += 1

    def consumers_csv(self, cluster: _Cluster, rows: list[list[str]]) -> None:
        if cluster.name not in self.csv:
            folder = self.out / cluster.name / "consumers"
            folder.mkdir(parents=True, exist_ok=True)
            out: TextIO = (folder / "consumers.csv").open("w", encoding="utf-8", newline="")
            writer = csv.writer(out, lineterminator="\n")
            writer.writerow(["topic", "subscription", "consumer_name", "priority_level", "subscription_type"])
            self.csv[cluster.name] = (out, writer)
            self.files["consumers"] += 1
        _, w = self.csv[cluster.name]
        for row in rows:
            w.writerow(row)
        self.records["consumers"] += len(rows)

    def entries(self, cluster: _Cluster, topic: TopicSim) -> int:
        """Dump every entry of every listed ledger (JSON Lines, base64 data)."""
        n = 0
        if self.form(cluster, "entries") == "file":
            folder = self.out / cluster.name / "entries"
            folder.mkdir(parents=True, exist_ok=True)
            with (folder / f"{_enc(topic.topic)}.jsonl").open("w", encoding="utf-8", newline="\n") as fh:
                for rec in topic.iter_from(EARLIEST):
                    assert rec.data is not None
                    fh.write(
                        _dumps_line(
                            {
                                "ledger_id": rec.position[0],
                                "entry_id": rec.position[1],
                                "data": base64.b64encode(rec.data).decode("ascii"),
                            }
                        )
                    )
                    fh.write("\n")
                    n += 1
            self.files["entries"] += 1
        else:
            sink = self._sink(cluster, "entries")
            before = len(sink.paths)
            for rec in topic.iter_from(EARLIEST):
                assert rec.data is not None
                sink.write(
                    _dumps_line(
                        {
                            "topic": topic.topic,
                            "ledger_id": rec.position[0],
                            "entry_id": rec.position[1],
                            "data": base64.b64encode(rec.data).decode("ascii"),
                        }
                    )
                )
                n += 1
            self.files["entries"] += len(sink.paths) - before
        self.records["entries"] += n
        return n

    def close(self) -> None:
        for sink in self.sinks.values():
            sink.close()
        for fh, _ in self.csv.values():
            fh.close()

    def kind_dirs(self) -> dict[str, tuple[Path, ...]]:
        out: dict[str, tuple[Path, ...]] = {}
        for kind in KINDS:
            out[kind] = tuple(
                sorted(p for p in (self.out / c / kind for c in self.spec.clusters) if p.is_dir())
            )
        return out


class _Truth:
    """Ground-truth files under ``_ground_truth/`` (JSON and JSON Lines, deterministic)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.fhs: dict[str, TextIO] = {}

    def line(self, name: str, doc: Any) -> None:
        fh = self.fhs.get(name)
        if fh is None:
            fh = (self.root / f"{name}.jsonl").open("w", encoding="utf-8", newline="\n")
            self.fhs[name] = fh
        fh.write(_dumps_line(doc))
        fh.write("\n")

    def json(self, name: str, doc: Any) -> None:
        (self.root / f"{name}.json").write_text(_dumps_pretty(doc), encoding="utf-8", newline="\n")

    def close(self) -> list[Path]:
        for fh in self.fhs.values():
            fh.close()
        return sorted(self.root.iterdir())


def _p(pos: Pos | None) -> str | None:
    return None if pos is None else fmt_pos(pos)


# --- documents -----------------------------------------------------------------------------------------


def _ml_count(topic: TopicSim, lo: Pos, hi: Pos, v4: bool) -> int:
    """``ManagedLedgerImpl.getNumberOfEntries((lo, hi])`` as the version computes it (docs §1.7)."""
    listed = {lid: (0 if lid == topic.current else len(topic.ledgers[lid].entries)) for lid in topic.ids}
    if not v4:
        if lo[0] == hi[0]:
            return hi[1] - lo[1]
        n = hi[1] + 1
        if lo[0] in listed:
            n += listed[lo[0]] - (lo[1] + 1)
        return n + sum(e for lid, e in listed.items() if lo[0] < lid < hi[0])
    if lo > hi:
        return 0
    if lo[0] == hi[0]:
        if lo[0] not in listed or (lo[1] < 0 and hi[1] < 0):
            return 0
        return hi[1] - lo[1] - 1 + (1 if hi[1] >= 0 else 0)
    n = 0
    if hi[1] >= 0 and hi[0] in listed:
        cap = math.inf if (hi >= topic.lac or hi[0] == topic.lac[0]) else listed[hi[0]]
        n += int(min(hi[1], cap - 1)) + 1
    if lo[0] in listed:
        n += listed[lo[0]] if lo[1] < 0 else listed[lo[0]] - (lo[1] + 1)
    return n + sum(e for lid, e in listed.items() if lo[0] < lid < hi[0])


def _idm_text(topic: TopicSim, c: CursorSim, guava: bool) -> tuple[str, int]:
    """``individuallyDeletedMessages`` and its range count (docs §10.2 formats)."""
    if not c.idm:
        return "[]", 0
    acked = sorted(c.idm)
    ranges: list[tuple[Pos, Pos]] = []
    if guava:
        start = acked[0]
        last = acked[0]
        for p in acked[1:]:
            if topic.prev(p) == last:
                last = p
                continue
            ranges.append((topic.prev(start), last))
            start = last = p
        ranges.append((topic.prev(start), last))
        sep = ", "
    else:
        start = last = acked[0]
        for p in acked[1:]:
            if p[0] == last[0] and p[1] == last[1] + 1:
                last = p
                continue
            ranges.append(((start[0], start[1] - 1), last))
            start = last = p
        ranges.append(((start[0], start[1] - 1), last))
        sep = ","
    text = "[" + sep.join(f"({fmt_pos(a)}..{fmt_pos(b)}]" for a, b in ranges) + "]"
    return text, len(ranges)


def _stats_internal(topic: TopicSim, cl: _Cluster, end_ms: int) -> dict[str, Any]:
    old = cl.old_style
    v4 = not old
    ledgers = []
    for lid in topic.ids:
        led = topic.ledgers[lid]
        is_cur = lid == topic.current
        item: dict[str, Any] = {
            "ledgerId": lid,
            "entries": 0 if is_cur else len(led.entries),
            "size": 0 if is_cur else led.size,
        }
        if old:
            item["isOffloaded"] = False
            item["timestamp"] = 0 if is_cur else led.closed_ms
        else:
            item["offloaded"] = False
            item["underReplicated"] = False
            item["properties"] = {}
        ledgers.append(item)
    cursors: dict[str, Any] = {}
    for c in topic.cursors.values():
        idm, n_ranges = _idm_text(topic, c, guava=old)
        since = _ml_count(topic, c.md, c.rp, v4) if c.md < c.rp else 0
        caught_up = c.rp > topic.read_limit()
        cs: dict[str, Any] = {
            "markDeletePosition": fmt_pos(c.md),
            "readPosition": fmt_pos(c.rp),
            "waitingReadOp": bool(c.active and caught_up),
            "pendingReadOps": 0,
            "messagesConsumedCounter": c.consumed,
            "cursorLedger": c.cursor_ledger,
            "cursorLedgerLastEntry": c.cursor_ledger_last_entry,
            "individuallyDeletedMessages": idm,
        }
        switch = _iso(c.last_switch_ms, old) if c.durable else ""
        cs["lastLedgerWitchTimestamp" if old else "lastLedgerSwitchTimestamp"] = switch
        cs.update(
            {
                "state": "Open" if c.durable else "Uninitialized",
                "active": c.active,
                "numberOfEntriesSinceFirstNotAckedMessage": since,
                "totalNonContiguousDeletedMessagesRange": n_ranges,
                "subscriptionHavePendingRead": bool(c.active and caught_up and c.kind == "subscription"),
                "subscriptionHavePendingReplayRead": False,
                "properties": dict(c.properties),
            }
        )
        if v4:
            cs["lastActive"] = c.last_consumed_ms or c.created_ms
        cursors[quote(c.name, safe="*-._")] = cs
    cur_led = topic.ledgers[topic.current] if topic.current is not None else None
    doc: dict[str, Any] = {
        "entriesAddedCounter": topic.entries_added,
        "numberOfEntries": topic.number_of_entries,
        "totalSize": topic.total_size,
        "currentLedgerEntries": len(cur_led.entries) if cur_led else 0,
        "currentLedgerSize": cur_led.size if cur_led else 0,
        "lastLedgerCreatedTimestamp": _iso(topic.last_ledger_created_ms, old),
        "lastLedgerCreationFailureTimestamp": None,
        "waitingCursorsCount": sum(
            1 for c in topic.cursors.values() if c.active and c.rp > topic.read_limit()
        ),
        "pendingAddEntriesCount": 0,
        "lastConfirmedEntry": fmt_pos(topic.lac),
        "state": "LedgerOpened",
        "ledgers": ledgers,
        "cursors": cursors,
        "schemaLedgers": [],
        "compactedLedger": {
            "ledgerId": -1,
            "entries": -1,
            "size": -1,
            "offloaded": False,
            "underReplicated": False,
        },
    }
    if topic.compacted_ledger is not None:
        lid, n, size = topic.compacted_ledger
        doc["compactedLedger"] = {
            "ledgerId": lid,
            "entries": n,
            "size": size,
            "offloaded": False,
            "underReplicated": False,
        }
    if old:
        doc["compactedLedger"] = {
            ("isOffloaded" if k == "offloaded" else k): v for k, v in doc["compactedLedger"].items()
        }
    if v4:
        doc["properties"] = {}
        doc["offloadedLedgerCount"] = 0
    return doc


def _rates(topic: TopicSim, end_ms: int, window_ms: int = _MINUTE) -> tuple[float, float]:
    msgs = 0
    size = 0
    if topic.current is None:
        return 0.0, 0.0
    for lid in reversed(topic.ids):
        led = topic.ledgers[lid]
        stop = False
        for rec in reversed(led.entries):
            if rec.add_ms < end_ms - window_ms:
                stop = True
                break
            if isinstance(rec.content, DataContent):
                msgs += rec.n_messages
                size += rec.size
        if stop:
            break
    secs = window_ms / 1000
    return round(msgs / secs, 3), round(size / secs, 3)


@dataclass
class _Quotas:
    """Effective quota resolution for stats (topic -> namespace -> broker, docs §3.2)."""

    broker_size: int
    broker_time: int
    namespaces: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)
    topics: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)

    def effective(self, namespace: str, topic: str) -> tuple[int, int]:
        def pick(kind: str, idx: int, default: int) -> int:
            for level in (self.topics.get(topic), self.namespaces.get(namespace)):
                if level and kind in level:
                    return level[kind][idx]
            return default

        return pick("destination_storage", 0, self.broker_size), pick("message_age", 1, self.broker_time)


def _topic_stats(
    topic: TopicSim,
    cl: _Cluster,
    end_ms: int,
    namespace: str,
    quotas: _Quotas,
    group: ReplicatedGroup | None,
    want_sub_backlog_size: bool,
    live_producers: set[str],
) -> dict[str, Any]:
    rate_in, tput_in = _rates(topic, end_ms)
    subs: dict[str, Any] = {}
    out_msgs = 0
    out_bytes = 0
    for c in sorted(topic.cursors.values(), key=lambda x: x.name):
        if c.kind in ("replicator", "dedup"):
            continue
        out_msgs += c.msg_out
        out_bytes += c.bytes_out
        consumers = []
        for ci in c.consumers if c.active else []:
            consumers.append(
                {
                    "msgRateOut": 0.0,
                    "msgThroughputOut": 0.0,
                    "bytesOutCounter": ci.bytes_out,
                    "msgOutCounter": ci.msg_out,
                    "msgRateRedeliver": 0.0,
                    "chunkedMessageRate": 0.0,
                    "consumerName": ci.name,
                    "availablePermits": max(1000 - ci.unacked, 0),
                    "unackedMessages": ci.unacked,
                    "avgMessagesPerEntry": 1,
                    "blockedConsumerOnUnackedMsgs": False,
                    "readPositionWhenJoining": _p(c.read_position_when_joining),
                    "address": ci.address,
                    "connectedSince": _iso(ci.connected_since_ms, cl.old_style),
                    "clientVersion": ci.client_version,
                    "lastAckedTimestamp": ci.last_acked_ms,
                    "lastConsumedTimestamp": ci.last_consumed_ms,
                    "metadata": {},
                }
            )
        sub_type = c.sub_type if c.had_dispatcher else "None"
        active = (
            active_consumer(
                [(ci.name, ci.priority) for ci in c.consumers], topic.topic, c.sub_type or "", cl.version
            )
            if consumers and c.sub_type in ("Exclusive", "Failover")
            else None
        )
        backlog = topic.nonprecise_backlog(c)
        unacked = sum(ci.unacked for ci in c.consumers) if c.active else 0
        _, n_ranges = _idm_text(topic, c, guava=cl.old_style)
        s: dict[str, Any] = {
            "msgRateOut": 0.0,
            "msgThroughputOut": 0.0,
            "bytesOutCounter": c.bytes_out,
            "msgOutCounter": c.msg_out,
            "msgRateRedeliver": 0.0,
            "chunkedMessageRate": 0,
            "msgBacklog": backlog,
            "backlogSize": topic.estimate_from(c.md) if want_sub_backlog_size else -1,
            "msgBacklogNoDelayed": backlog,
            "blockedSubscriptionOnUnackedMsgs": False,
            "msgDelayed": 0,
            "unackedMessages": unacked,
            "type": sub_type,
        }
        if active is not None:
            s["activeConsumerName"] = active
        s.update(
            {
                "msgRateExpired": 0.0,
                "totalMsgExpired": 0,
                "lastExpireTimestamp": 0,
                "lastConsumedFlowTimestamp": c.last_consumed_ms,
                "lastConsumedTimestamp": c.last_consumed_ms,
                "lastAckedTimestamp": c.last_acked_ms,
                "lastMarkDeleteAdvancedTimestamp": c.last_md_advanced_ms,
                "consumers": consumers,
                "isDurable": c.durable,
                "isReplicated": c.replicated,
                "allowOutOfOrderDelivery": False,
                "consumersAfterMarkDeletePosition": {},
                "nonContiguousDeletedMessagesRanges": n_ranges,
                "nonContiguousDeletedMessagesRangesSerializedSize": n_ranges * 24,
            }
        )
        if c.sub_type == "Key_Shared":
            s["keySharedMode"] = "AUTO_SPLIT"
        if cl.v3_stats:
            s["subscriptionProperties"] = {}
        subs[c.name] = s
    publishers = []
    for i, (name, pub) in enumerate(sorted(topic.publishers.items())):
        if name not in live_producers:
            continue
        publishers.append(
            {
                "accessMode": "Shared",
                "msgRateIn": 0.0,
                "msgThroughputIn": 0.0,
                "averageMsgSize": round(pub["bytes"] / max(pub["msgs"], 1), 3),
                "chunkedMessageRate": 0.0,
                "producerId": i,
                "supportsPartialProducer": False,
                "producerName": name,
                "address": f"/10.1.{cl.index}.{10 + i}:4{i:04d}",
                "connectedSince": _iso(pub["since"], cl.old_style),
                "clientVersion": "Pulsar-Java-v3.3.2",
                "metadata": {},
            }
        )
    replication: dict[str, Any] = {}
    if group is not None:
        me = cl.name
        for remote in sorted(n for n in group.topics if n != me):
            rep = group.replicators[(me, remote)]
            inbound = group.replicators[(remote, me)]
            backlog = topic.precise_backlog(rep.cursor)
            oldest = next(iter(topic.iter_between(rep.cursor.md, topic.lac)), None)
            delay = 0 if backlog == 0 or oldest is None else max((end_ms - oldest.add_ms) // 1000, 0)
            connected = rep.connected(end_ms)
            replication[remote] = {
                "msgRateIn": 0.0,
                "msgThroughputIn": 0.0,
                "msgRateOut": 0.0,
                "msgThroughputOut": 0.0,
                "msgRateExpired": 0.0,
                "replicationBacklog": backlog,
                "connected": connected,
                "replicationDelayInSeconds": delay,
                "inboundConnection": f"/10.2.{cl.index}.{sorted(group.topics).index(remote)}:6651"
                if inbound.connected(end_ms)
                else None,
                "inboundConnectedSince": _iso(inbound.connected_since_ms, cl.old_style)
                if inbound.connected(end_ms)
                else None,
                "outboundConnection": f"[id: 0x{_seed(me, remote) % 0xFFFFFFFF:08x}, "
                f"L:/10.3.0.1:4{cl.index}321 "
                f"- R:{remote}-broker.example:6651]"
                if connected
                else None,
                "outboundConnectedSince": _iso(rep.connected_since_ms, cl.old_style) if connected else None,
            }
    size_q, time_q = quotas.effective(namespace, topic.topic)
    slowest = topic.slowest()
    oldest_age = -1
    oldest_sub = None
    if slowest is not None:
        nxt = topic.next_existing(slowest.md)
        if nxt is not None and nxt <= topic.lac:
            rec = topic.entry_at(nxt)
            if rec is not None:
                oldest_age = max((end_ms - rec.add_ms) // 1000, 0)
                oldest_sub = slowest.name
    total_in = topic.msg_in
    doc: dict[str, Any] = {
        "msgRateIn": rate_in,
        "msgThroughputIn": tput_in,
        "msgRateOut": 0.0,
        "msgThroughputOut": 0.0,
        "bytesInCounter": topic.bytes_in,
        "msgInCounter": total_in,
        "bytesOutCounter": out_bytes,
        "msgOutCounter": out_msgs,
        "averageMsgSize": round(topic.bytes_in / total_in, 3) if total_in else 0.0,
        "msgChunkPublished": False,
        "storageSize": topic.total_size,
        "backlogSize": topic.estimated_backlog_size(),
        "offloadedStorageSize": 0,
        "lastOffloadLedgerId": 0,
        "lastOffloadSuccessTimeStamp": 0,
        "lastOffloadFailureTimeStamp": 0,
        "publishers": publishers,
        "waitingPublishers": 0,
        "subscriptions": subs,
        "replication": replication,
        "deduplicationStatus": "Enabled" if topic.dedup_enabled else "Disabled",
        "nonContiguousDeletedMessagesRanges": sum(
            s["nonContiguousDeletedMessagesRanges"] for s in subs.values()
        ),
        "nonContiguousDeletedMessagesRangesSerializedSize": sum(
            s["nonContiguousDeletedMessagesRangesSerializedSize"] for s in subs.values()
        ),
    }
    if topic.compacted_ledger is not None:
        doc["compaction"] = {
            "lastCompactionRemovedEventCount": 0,
            "lastCompactionSucceedTimestamp": topic.cursors[COMPACTION_CURSOR].last_md_advanced_ms
            if COMPACTION_CURSOR in topic.cursors
            else 0,
            "lastCompactionFailedTimestamp": 0,
            "lastCompactionDurationTimeInMills": 412,
        }
    if cl.v3_stats:
        doc.update(
            {
                "systemTopicBytesInCounter": 0,
                "bytesOutInternalCounter": 0,
                "backlogQuotaLimitSize": size_q,
                "backlogQuotaLimitTime": time_q,
                "oldestBacklogMessageAgeSeconds": oldest_age,
                "oldestBacklogMessageSubscriptionName": oldest_sub,
                "publishRateLimitedTimes": 0,
                "earliestMsgPublishTimeInBacklogs": 0,
                "ongoingTxnCount": len(topic.txn_ongoing),
                "abortedTxnCount": len(topic.txn_aborted),
                "committedTxnCount": len(topic.txn_committed),
                "delayedMessageIndexSizeInBytes": 0,
                "ownerBroker": f"broker-{_seed(topic.topic) % 3}.{cl.name}.example:8080",
            }
        )
    return doc


def _partitioned_stats(parts: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """``partitioned-stats --per-partition``: summed top level + metadata + per-partition documents."""
    agg: dict[str, Any] = {}
    for key in (
        "msgRateIn",
        "msgThroughputIn",
        "msgRateOut",
        "msgThroughputOut",
        "bytesInCounter",
        "msgInCounter",
        "bytesOutCounter",
        "msgOutCounter",
        "storageSize",
        "backlogSize",
    ):
        agg[key] = sum(d.get(key, 0) for _, d in parts)
    agg["publishers"] = [p for _, d in parts for p in d.get("publishers", [])]
    agg["subscriptions"] = {}
    agg["replication"] = {}
    agg["metadata"] = {"partitions": len(parts)}
    agg["partitions"] = {name: d for name, d in parts}
    return agg


# --- the generator ------------------------------------------------------------------------------------


class _Generator:
    def __init__(self, spec: DemoSpec, out: Path) -> None:
        self.spec = spec
        self.out = out
        self.end_ms = _ms(spec.exported_at)
        self.start_ms = self.end_ms - int(spec.history_hours * _HOUR)
        bem = spec.broker_entry_metadata_clusters
        if bem is None:
            bem = (spec.clusters[-1],) if len(spec.clusters) > 1 else ()
        self.clusters = [
            _Cluster(
                name,
                i,
                spec.version_of(name),
                ClusterInfo(name, spec.version_of(name), name in bem),
                self.start_ms - (3 + i) * 86_400_000 - _seed(spec.seed, "epoch", name) % 86_400_000,
            )
            for i, name in enumerate(spec.clusters)
        ]
        #: the cluster whose exports include raw CLI text output (quotas) and a CLI schema stream
        self.cli_cluster = min(2, len(spec.clusters) - 1)
        self.local = _local_plans(spec)
        self.geo = _replicated_plans(spec)
        n_slots = len(self.local) + len(self.geo) + 1
        self.stride = 1 << max(6, (n_slots - 1).bit_length())
        self.slot = {p.topic: i + 1 for i, p in enumerate(self.geo + self.local)}
        self.writer = _Writer(out, spec)
        self.truth = _Truth(out / GROUND_TRUTH_DIR)
        self.quotas: dict[str, _Quotas] = {}
        self.topic_quota_names: set[str] = set()
        self.entries = 0
        self.markers = 0
        self.messages = 0
        self.topics = 0
        self.pending_wrappers: dict[tuple[str, str, str], list[tuple[str, dict[str, Any]]]] = {}
        self.plan_requests: list[dict[str, Any]] = []
        self.plan_topics: dict[str, int] = {}
        self.wrap_internal: set[str] = set()
        self.wrap_stats: set[str] = set()
        partitioned = sorted({p.base for p in self.local if p.partition >= 0})
        if partitioned:
            self.wrap_internal.add(partitioned[0])
            self.wrap_stats.add(partitioned[-1])

    # -- run --------------------------------------------------------------------------------------------

    def run(self) -> DemoSummary:
        for cl in self.clusters:
            self._write_quotas(cl)
        groups = 0
        for plan in self.geo:
            self._replicated_group(plan)
            groups += 1
        for cl in self.clusters:
            for plan in self.local:
                self._local_topic(cl, plan)
        self.writer.close()
        export_id = self.spec.export_id or f"demo-{self.spec.exported_at:%Y-%m-%d}-seed{self.spec.seed}"
        manifest = {
            "export_id": export_id,
            "exported_at": f"{self.spec.exported_at.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}",
            "clusters": {c.name: {"pulsar_version": c.version} for c in self.clusters},
            "generator": {"name": "pulsar-analytics demo", "seed": self.spec.seed},
        }
        manifest_path = self.out / "manifest.json"
        manifest_path.write_text(_dumps_pretty(manifest), encoding="utf-8", newline="\n")
        requests_path = self.out / REQUESTS_FILE
        requests_path.parent.mkdir(parents=True, exist_ok=True)
        requests_path.write_text(_dumps_pretty(self.plan_requests), encoding="utf-8", newline="\n")
        self.truth.json(
            "summary",
            {
                "export_id": export_id,
                "clusters": {
                    c.name: {
                        "pulsar_version": c.version,
                        "broker_entry_metadata": c.info.broker_entry_metadata,
                        "snapshot_cache": "new" if uses_new_snapshot_cache(c.version) else "old",
                    }
                    for c in self.clusters
                },
                "topics": self.topics,
                "replicated_groups": groups,
                "entries": self.entries,
                "marker_entries": self.markers,
                "messages": self.messages,
                "files": self.writer.files,
                "records": self.writer.records,
            },
        )
        truth_files = self.truth.close()
        return DemoSummary(
            out_dir=self.out,
            manifest_path=manifest_path,
            ground_truth_dir=self.out / GROUND_TRUTH_DIR,
            export_id=export_id,
            clusters={c.name: c.version for c in self.clusters},
            topics=self.topics,
            replicated_groups=groups,
            entries=self.entries,
            marker_entries=self.markers,
            messages=self.messages,
            files=dict(self.writer.files),
            records=dict(self.writer.records),
            kind_dirs=self.writer.kind_dirs(),
            ground_truth_files=tuple(truth_files),
        )

    # -- quotas -------------------------------------------------------------------------------------------

    def _write_quotas(self, cl: _Cluster) -> None:
        """Broker runtime config, namespace and topic quotas in every shape (docs §3.2-3.3, §10.4)."""
        w = self.writer
        i = cl.index % 3
        config = {
            "backlogQuotaCheckEnabled": "true",
            "backlogQuotaCheckIntervalInSeconds": "60",
            "backlogQuotaDefaultLimitBytes": ["-1", "-1", "1073741824"][i],
            "backlogQuotaDefaultLimitGB": ["-1.0", "10.0", "-1.0"][i],
            "backlogQuotaDefaultLimitSecond": ["-1", "14400", "-1"][i],
            "backlogQuotaDefaultRetentionPolicy": [
                "producer_request_hold",
                "producer_exception",
                "consumer_backlog_eviction",
            ][i],
            "preciseTimeBasedBacklogQuotaCheck": ["false", "true", "false"][i],
            "brokerDeduplicationEnabled": "false",
            "clusterName": cl.name,
            "managedLedgerMaxEntriesPerLedger": str(self.spec.max_entries_per_ledger),
            "managedLedgerMaxLedgerRolloverTimeMinutes": str(self.spec.ledger_rollover_minutes),
            "managedLedgerMinLedgerRolloverTimeMinutes": str(self.spec.min_ledger_rollover_minutes),
            "replicatedSubscriptionsSnapshotFrequencyMillis": str(self.spec.snapshot_frequency_ms),
            "replicatedSubscriptionsSnapshotTimeoutSeconds": str(self.spec.snapshot_timeout_seconds),
            "replicatedSubscriptionsSnapshotMaxCachedPerSubscription": "30"
            if uses_new_snapshot_cache(cl.version)
            else "10",
        }
        gb = float(config["backlogQuotaDefaultLimitGB"])
        q = _Quotas(
            int(gb * _GB) if gb > 0 else int(config["backlogQuotaDefaultLimitBytes"]),
            int(config["backlogQuotaDefaultLimitSecond"]),
        )
        self.quotas[cl.name] = q
        w.doc(cl, "backlog-quotas", "broker", dict(sorted(config.items())), scope_key="broker")
        namespaces = list(self.spec.namespaces) + (
            [self.spec.replicated_namespace]
            if self.spec.replicated and self.spec.replicated_namespace
            else []
        )
        for n, ns in enumerate(namespaces):
            shape = (n + cl.index) % 4
            size = (2 + n) * _GB
            if shape == 0:  # 2.9.1+: limit alias + limitSize/limitTime
                doc: Any = {
                    "destination_storage": {
                        "limit": size,
                        "limitSize": size,
                        "limitTime": -1,
                        "policy": "producer_request_hold",
                    },
                    "message_age": {
                        "limit": -1,
                        "limitSize": -1,
                        "limitTime": 3600,
                        "policy": "consumer_backlog_eviction",
                    },
                }
                q.namespaces[ns] = {"destination_storage": (size, -1), "message_age": (-1, 3600)}
            elif shape == 1:  # before the time quota: limit only
                doc = {"destination_storage": {"limit": size, "policy": "producer_exception"}}
                q.namespaces[ns] = {"destination_storage": (size, -1)}
            elif shape == 2:  # plain-string (Java toString values)
                doc = {
                    "destination_storage": f"BacklogQuotaImpl(limit={size}, limitSize={size}, limitTime=-1, "
                    "policy=consumer_backlog_eviction)",
                    "message_age": "BacklogQuotaImpl(limit=-1, limitSize=-1, limitTime=7200, "
                    "policy=consumer_backlog_eviction)",
                }
                q.namespaces[ns] = {"destination_storage": (size, -1), "message_age": (-1, 7200)}
            else:  # ≈2.9.0: limitSize/limitTime without the alias; or no quota at all
                if n % 2:
                    doc = {}
                else:
                    doc = {
                        "destination_storage": {
                            "limitSize": size,
                            "limitTime": -1,
                            "policy": "producer_request_hold",
                        }
                    }
                    q.namespaces[ns] = {"destination_storage": (size, -1)}
            w.doc(cl, "backlog-quotas", ns, doc, scope_key="namespace")
        # topic level: small size quotas that the demo's backlogs exceed, and one time quota
        targets = [p for p in self.local if p.partition <= 0 and p.index % 3 == 2]
        for k, p in enumerate(targets[:6]):
            name = p.base
            self.topic_quota_names.add(name)
            limit = (16 + 8 * k) * 1024
            if k == 0 and w.form(cl, "backlog-quotas") == "file" and cl.index == self.cli_cluster:
                text = (
                    f"destination_storage    BacklogQuotaImpl(limit={limit}, limitSize={limit}, "
                    "limitTime=-1, "
                    "policy=consumer_backlog_eviction)\n"
                )
                w.text_file(cl, "backlog-quotas", name, text)
                q.topics[name] = {"destination_storage": (limit, -1)}
                continue
            if k % 3 == 2:
                doc = {
                    "message_age": {
                        "limit": -1,
                        "limitSize": -1,
                        "limitTime": 1800,
                        "policy": "producer_exception",
                    }
                }
                q.topics[name] = {"message_age": (-1, 1800)}
            elif k % 3 == 1:
                doc = {
                    "destination_storage": f"BacklogQuota{{limit={limit}, policy=consumer_backlog_eviction}}"
                }
                q.topics[name] = {"destination_storage": (limit, -1)}
            else:
                doc = {
                    "destination_storage": {
                        "limit": limit,
                        "limitSize": limit,
                        "limitTime": -1,
                        "policy": "consumer_backlog_eviction",
                    }
                }
                q.topics[name] = {"destination_storage": (limit, -1)}
            w.doc(cl, "backlog-quotas", name, doc, scope_key="topic")
            # partitions inherit the partitioned topic's policy
            for part in (x for x in self.local if x.base == name and x.partition >= 0):
                q.topics[part.topic] = q.topics[name]

    # -- topics --------------------------------------------------------------------------------------------

    def _ledger_cfg(self, plan: _TopicPlan, rng: random.Random) -> LedgerConfig:
        spec = self.spec
        retention = {1: 2 * _HOUR}.get(plan.ns_index, 0)
        return LedgerConfig(
            max_entries=max(2, int(spec.max_entries_per_ledger * rng.choice([0.5, 1.0, 1.0, 1.5]))),
            max_size_bytes=spec.max_ledger_size_bytes,
            rollover_ms=spec.ledger_rollover_minutes * _MINUTE,
            min_rollover_ms=spec.min_ledger_rollover_minutes * _MINUTE,
            retention_ms=retention,
        )

    def _alloc(self, cl: _Cluster, topic: str) -> LedgerIdAllocator:
        return LedgerIdAllocator(cl.epoch_ms, self.stride, self.slot[topic])

    def _consumers(
        self,
        rng: random.Random,
        names: list[str],
        prios: list[int],
        t: int,
        cl: _Cluster,
        arrival: list[int] | None = None,
    ) -> list[ConsumerInfo]:
        order = arrival if arrival is not None else list(range(len(names)))
        out = []
        for k, i in enumerate(order):
            out.append(
                ConsumerInfo(
                    names[i],
                    prios[i],
                    f"/10.4.{cl.index}.{20 + k}:5{k}{i}12",
                    rng.choice(["Pulsar-Java-v3.3.2", "Pulsar-Java-v4.0.1", "Pulsar-CPP-v3.5.1"]),
                    t,
                )
            )
        return out

    def _local_topic(self, cl: _Cluster, plan: _TopicPlan) -> None:
        spec = self.spec
        rng = random.Random(_seed(spec.seed, cl.name, plan.topic))
        feature = plan.feature
        end = self.end_ms
        span = end - self.start_ms
        t_open = self.start_ms + rng.randint(0, span // 5)
        t_start = t_open + rng.randint(1000, 60_000)
        t_stop = end - rng.randint(0, 10 * _MINUTE)
        if feature == "idle":
            t_stop = end - int(spec.ledger_rollover_minutes * _MINUTE * 1.5) - rng.randint(0, 20 * _MINUTE)
            t_start = min(t_start, t_stop - 20 * _MINUTE)
        if feature == "drain":
            t_start = end - 50 * _MINUTE
            t_stop = end - 20 * _MINUTE
        loop = EventLoop(t_open)
        cfg = self._ledger_cfg(plan, rng)
        if feature == "drain":  # entry-count roll-overs only, so the last entry closes a ledger
            cfg = LedgerConfig(
                max_entries=cfg.max_entries,
                max_size_bytes=1 << 40,
                rollover_ms=12 * _HOUR,
                min_rollover_ms=0,
                retention_ms=0,
            )
        topic = TopicSim(loop, cl.info, plan.topic, cfg, self._alloc(cl, plan.topic))
        topic.open(t_open)
        n_msgs = rng.randint(*spec.messages_per_topic)
        truth_extra: dict[str, Any] = {"feature": feature}
        dispatchers: list[Dispatcher] = []

        # subscriptions
        base_name = plan.base.rsplit("/", 1)[1]
        sub_types = ["Shared", "Exclusive", "Shared", "Failover"]
        main_type = "Failover" if plan.partition >= 0 else sub_types[plan.index % 4]
        if feature == "keyshared":
            main_type = "Key_Shared"
        if feature == "drain":
            main_type = "Exclusive"
        subs_to_make: list[tuple[str, str, AckProfile, list[tuple[int, int | None]]]] = []
        if feature != "reader-only":
            main = _SUB_WORDS[(plan.index + plan.ns_index) % len(_SUB_WORDS)]
            if main_type in ("Shared", "Key_Shared"):
                prof = AckProfile("individual", (5, 400), hole_rate=0.004, late_rate=0.03)
            else:
                prof = AckProfile("cumulative", (5, 800))
            subs_to_make.append((main, main_type, prof, [(t_open + 500, None)]))
            if feature not in ("drain", "empty") and rng.random() < 0.55:
                mid = t_start + (t_stop - t_start) * rng.randint(30, 80) // 100
                windows: list[tuple[int, int | None]] = [(t_open + 900, mid)]
                if rng.random() < 0.4:
                    windows.append((mid + rng.randint(5, 40) * _MINUTE, None))
                subs_to_make.append(
                    (
                        "audit",
                        "Shared",
                        AckProfile("individual", (10, 2000), hole_rate=0.01, late_rate=0.05),
                        windows,
                    )
                )
            if feature == "empty":
                subs_to_make.append(("idle-sub", "Exclusive", AckProfile("cumulative"), []))
        for name, stype, prof, windows in subs_to_make:
            c = topic.create_cursor(t_open + 100, name, "subscription", start="earliest")
            c.sub_type = stype
            if stype == "Failover":
                workers = [f"{base_name}-worker-{x}" for x in "abc"]
                prios = [0, 0, 1] if rng.random() < 0.6 else [1, 0, 0]
                arrival = list(range(3))
                rng.shuffle(arrival)
                c.consumers = self._consumers(rng, workers, prios, t_open, cl, arrival)
            elif stype in ("Shared", "Key_Shared"):
                k = rng.randint(1, 3)
                c.consumers = self._consumers(
                    rng,
                    [f"{name}-{base_name}-{x}" for x in range(k)],
                    [rng.choice([0, 0, 1]) for _ in range(k)],
                    t_open,
                    cl,
                )
            else:
                c.consumers = self._consumers(rng, [f"{name}-{rng.getrandbits(20):05x}"], [0], t_open, cl)
            d = Dispatcher(topic, c, prof, random.Random(rng.getrandbits(64)), windows)
            d.active_name = active_consumer(
                [(x.name, x.priority) for x in c.consumers], plan.topic, stype, cl.version
            )
            d.start()
            dispatchers.append(d)

        # producers
        live: set[str] = set()
        if feature != "empty":
            self._producers(cl, plan, topic, rng, n_msgs, t_start, t_stop, feature, live, truth_extra)

        # special features
        txn_prod: TxnProducer | None = None
        if feature in ("txn", "open-txn"):
            outcomes = ["commit", "abort", "commit", "abort", "commit"]
            if feature == "open-txn":
                outcomes = ["commit", "abort", "commit", "open"]
            tplan = TxnPlan(
                f"{cl.name}-txn-{rng.randint(0, 9)}",
                t_start + 60_000,
                t_stop - (5 * _MINUTE if feature == "open-txn" else 2 * _MINUTE),
                tuple((o, rng.randint(2, 6)) for o in outcomes),
                rng.randint(0, 15),
                rng.randint(1_000, 90_000),
            )
            txn_prod = TxnProducer(topic, tplan, random.Random(rng.getrandbits(64)), _text_payload)
            txn_prod.begin()
            live.add(tplan.name)
        if feature == "dedup":
            loop.at(t_open + 200, lambda t: DedupCursor(topic, self.spec.dedup_snapshot_interval).begin(t))
        compactions: list[Any] = []
        if feature == "compaction":
            t_c = t_start + (t_stop - t_start) * rng.randint(55, 85) // 100
            loop.at(t_c, lambda t: compactions.append(run_compaction(topic, t)))
        if feature in ("readers", "reader-only"):
            r1 = Reader(
                topic,
                f"reader-{rng.getrandbits(40):010x}",
                "earliest",
                end - 25 * _MINUTE,
                40.0,
                random.Random(rng.getrandbits(64)),
            )
            r1.begin()
            if feature == "readers":
                name2 = f"reader-{rng.getrandbits(40):010x}"

                def start_r2(t: int) -> None:
                    first = topic.next_existing((topic.ids[0], -1)) if topic.ids else None
                    target: Pos | Literal["latest"] = first if first is not None else "latest"
                    Reader(topic, name2, target, t, 0.2, random.Random(rng.getrandbits(64))).begin()

                loop.at(end - 6 * _MINUTE, start_r2)
        if feature == "reload":
            loop.at(t_start + (t_stop - t_start) // 2, topic.reload)

        loop.run(end)
        self._finish_topic(cl, plan, topic, None, live, truth_extra, txn_prod, compactions)

    def _producers(
        self,
        cl: _Cluster,
        plan: _TopicPlan,
        topic: TopicSim,
        rng: random.Random,
        n_msgs: int,
        t_start: int,
        t_stop: int,
        feature: str,
        live: set[str],
        truth: dict[str, Any],
    ) -> None:
        spec = self.spec
        n_prod = 1 if feature in ("drain", "compaction") else rng.choice([1, 1, 2])
        keys: tuple[str, ...] = ()
        keyless = 0.0
        tomb = 0.0
        nulls = 0.0
        if feature == "compaction":
            keys = tuple(f"user-{k:03d}" for k in range(rng.randint(12, 40)))
            keyless, tomb, nulls = 0.05, 0.08, 0.04
        elif rng.random() < 0.5:
            keys = tuple(f"k{k}" for k in range(rng.randint(5, 60)))
            keyless = rng.choice([0.0, 0.1, 0.3])
        schema_versions: tuple[tuple[int, int], ...] = ()
        payload = _text_payload
        family = None
        if feature == "schema":
            family = "compatible"
        elif feature == "schema-incompatible":
            family = "incompatible"
        if family is not None:
            third = max((t_stop - t_start) // 3, 1)
            schema_versions = ((0, 0), (t_start + third, 1), (t_start + 2 * third, 2))
            payload = _avro_payload(family)
            truth["schema_family"] = family
        for k in range(n_prod):
            name = f"{cl.name}-{_seed(cl.name, plan.topic) % 7}-{k + _seed(plan.topic, k) % 50}"
            batch = 1 if feature == "drain" else rng.choice([1, 1, spec.max_batch_size])
            if feature == "compaction":
                batch = max(spec.max_batch_size // 2, 2)
            share = n_msgs // n_prod + (n_msgs % n_prod if k == 0 else 0)
            if feature == "drain":
                share = topic.cfg.max_entries * rng.randint(2, 4)
            comp = rng.choice(["NONE"] * 8 + ["LZ4", "ZLIB"])
            pplan = ProducerPlan(
                name,
                t_start,
                t_stop,
                share,
                batch,
                keys,
                keyless,
                tomb,
                nulls,
                comp,
                (20, 180) if batch > 1 else (40, 600),
                0.15,
                rng.random() < 0.3,
                schema_versions,
                rng.randint(0, 3) * 1000,
            )
            Producer(topic, pplan, random.Random(rng.getrandbits(64)), payload).begin()
            if t_stop > self.end_ms - 15 * _MINUTE:
                live.add(name)

    # -- replicated groups --------------------------------------------------------------------------------

    def _replicated_group(self, plan: _TopicPlan) -> None:
        spec = self.spec
        rng = random.Random(_seed(spec.seed, "geo", plan.topic))
        end = self.end_ms
        t0 = end - spec.replicated_window_minutes * _MINUTE - 5 * _MINUTE
        t_stop = end - 5_000
        loop = EventLoop(t0)
        topics = []
        for cl in self.clusters:
            cfg = LedgerConfig(
                max_entries=max(2, spec.max_entries_per_ledger + 50),
                max_size_bytes=spec.max_ledger_size_bytes,
                rollover_ms=max(spec.ledger_rollover_minutes // 3, 1) * _MINUTE,
                min_rollover_ms=spec.min_ledger_rollover_minutes * _MINUTE,
            )
            ts = TopicSim(loop, cl.info, plan.topic, cfg, self._alloc(cl, plan.topic), keep_trimmed_keys=True)
            ts.open(t0)
            topics.append(ts)
        names = [c.name for c in self.clusters]
        a, b = names[0], names[1]
        c_ = names[2] if len(names) > 2 else names[1]
        gi = self.geo.index(plan)
        mid = t0 + (t_stop - t0) * 45 // 100
        outages: dict[tuple[str, str], list[tuple[int, int | None]]] = {}
        if gi == 0:
            # C->A down for longer than the snapshot timeout: A's snapshots time out (docs §4.5)
            outages[(c_, a)] = [(mid, mid + (2 * spec.snapshot_timeout_seconds + 60) * 1000)]
        elif gi == 1:
            outages[(a, b)] = [(end - 4 * _MINUTE, None)]  # still disconnected at export time
        delays: dict[tuple[str, str], tuple[int, int]] = {}
        for x in names:
            for y in names:
                if x != y:
                    far = x.split("-")[0] != y.split("-")[0]
                    delays[(x, y)] = (rng.randint(2, 8), rng.randint(60, 95) if far else rng.randint(25, 45))
        group = ReplicatedGroup(
            loop,
            topics,
            random.Random(rng.getrandbits(64)),
            t0,
            end,
            frequency_ms=spec.snapshot_frequency_ms,
            timeout_seconds=spec.snapshot_timeout_seconds,
            outages=outages,
            delays=delays,
        )
        base_name = plan.base.rsplit("/", 1)[1]
        # replicated subscriptions exist on every cluster; consumers are active on one
        sub_specs = [
            (
                "geo-shared",
                "Shared",
                a,
                AckProfile(
                    "individual",
                    (5, 300),
                    hole_rate=0.004,
                    late_rate=0.04,
                    late_delay_ms=(20_000, 600_000),
                    forced_hole_after_ms=end - rng.randint(6, 12) * _MINUTE,
                ),
            ),
            (
                "geo-failover",
                "Failover",
                b,
                AckProfile(
                    "individual", (5, 300), hole_rate=0.0, late_rate=0.08, late_delay_ms=(3_000, 45_000)
                ),
            ),
        ]
        for ts in topics:
            for sname, stype, active_on, prof in sub_specs:
                cur = ts.create_cursor(t0 + 50, sname, "subscription", start="earliest")
                cur.sub_type = stype
                group.make_replicated(ts, cur)
                if ts.cluster.name == active_on:
                    cl = self.clusters[names.index(active_on)]
                    if stype == "Failover":
                        workers = [f"{base_name}-{x}" for x in ("east", "west", "spare")]
                        cur.consumers = self._consumers(rng, workers, [1, 0, 0], t0, cl, [2, 0, 1])
                    else:
                        cur.consumers = self._consumers(
                            rng, [f"{sname}-{x}" for x in range(2)], [0, 1], t0, cl
                        )
                    d = Dispatcher(ts, cur, prof, random.Random(rng.getrandbits(64)), [(t0 + 200, None)])
                    d.active_name = active_consumer(
                        [(x.name, x.priority) for x in cur.consumers], ts.topic, stype, ts.cluster.version
                    )
                    d.start()
            local = ts.create_cursor(t0 + 60, "local-metrics", "subscription", start="earliest")
            local.sub_type = "Exclusive"
            cl = self.clusters[names.index(ts.cluster.name)]
            local.consumers = self._consumers(rng, [f"metrics-{ts.cluster.name}"], [0], t0, cl)
            Dispatcher(
                ts,
                local,
                AckProfile("cumulative", (50, 2000)),
                random.Random(rng.getrandbits(64)),
                [(t0 + 300, None)],
            ).start()
        lives: dict[str, set[str]] = {}
        for ts in topics:
            cname = ts.cluster.name
            lives[cname] = set()
            n = rng.randint(*spec.replicated_messages_per_cluster)
            pname = f"{cname}-{_seed(cname, plan.topic) % 5}-{rng.randint(0, 40)}"
            batch = rng.choice([1, spec.max_batch_size])
            pplan = ProducerPlan(
                pname,
                t0 + 30_000,
                t_stop,
                n,
                batch,
                tuple(f"c{k}" for k in range(20)),
                0.2,
                0.0,
                0.0,
                rng.choice(["NONE", "NONE", "LZ4"]),
                (30, 300),
                0.1,
                False,
            )
            Producer(ts, pplan, random.Random(rng.getrandbits(64)), _text_payload).begin()
            lives[cname].add(pname)
        loop.run(end)
        for ts in topics:
            cl = self.clusters[names.index(ts.cluster.name)]
            self._finish_topic(
                cl, plan, ts, group, lives[ts.cluster.name], {"feature": "replicated"}, None, []
            )
        self._replication_truth(plan, group, [(s, act) for s, _, act, _ in sub_specs])

    def _replication_truth(
        self, plan: _TopicPlan, group: ReplicatedGroup, subs: list[tuple[str, str]]
    ) -> None:
        for ctrl_name in sorted(group.controllers):
            ctrl = group.controllers[ctrl_name]
            for tr in ctrl.traces:
                self.truth.line(
                    "snapshots",
                    {
                        "topic": plan.topic,
                        "source_cluster": tr.source_cluster,
                        "snapshot_id": tr.snapshot_id,
                        "remote_clusters": list(tr.remotes),
                        "started_ms": tr.started_ms,
                        "status": tr.status,
                        "ended_ms": tr.ended_ms,
                        "two_rounds": len(tr.remotes) > 1,
                        "request_positions": [fmt_pos(p) for p in tr.requests],
                        "responses": [
                            {
                                "round": r.round,
                                "cluster": r.cluster,
                                "position": fmt_pos(r.position),
                                "received_at": fmt_pos(r.received_at),
                                "t_ms": r.t_ms,
                            }
                            for r in tr.responses
                        ],
                        "round1_positions": {k: fmt_pos(v) for k, v in sorted(tr.round1.items())},
                        "local_position": _p(tr.local_position),
                        "snapshot_marker_position": _p(tr.snapshot_marker),
                    },
                )
            for up in ctrl.updates:
                self.truth.line("updates", _update_doc(up))
        for late in group.late_responses:
            self.truth.line(
                "late_responses",
                {
                    "topic": plan.topic,
                    "cluster": late.cluster,
                    "snapshot_id": late.snapshot_id,
                    "from": late.from_cluster,
                    "position": fmt_pos(late.position),
                    "t": late.t_ms,
                },
            )
        for sname, source in subs:
            src = group.topics[source]
            sc = src.cursors[sname]
            acked: set[tuple[str, int]] = set(src.trimmed_keys)
            for rec in src.iter_from(EARLIEST):
                content = rec.content
                if isinstance(content, DataContent) and (rec.position <= sc.md or rec.position in sc.idm):
                    for s_id in content.sequence_ids():
                        acked.add((content.producer, s_id))
            updates = [u for u in group.controllers[source].updates if u.subscription == sname]
            last = updates[-1] if updates else None
            for target in sorted(group.topics):
                if target == source:
                    continue
                tt = group.topics[target]
                tc = tt.cursors.get(sname)
                dup_msgs = dup_entries = after_msgs = 0
                if tc is not None:
                    for rec in tt.iter_between(tc.md, tt.lac):
                        content = rec.content
                        if not isinstance(content, DataContent) or rec.position in tc.idm:
                            continue
                        k = sum(1 for s_id in content.sequence_ids() if (content.producer, s_id) in acked)
                        after_msgs += len(content.messages)
                        dup_msgs += k
                        dup_entries += 1 if k else 0
                expected = dict(last.clusters).get(target) if last is not None else None
                applied = last.applied.get(target) if last is not None else None
                delivered_updates = [u for u in updates if target in u.applied]
                self.truth.line(
                    "replicated_subscriptions",
                    {
                        "topic": plan.topic,
                        "subscription": sname,
                        "source_cluster": source,
                        "target_cluster": target,
                        "source_version": src.cluster.version,
                        "source_snapshot_cache": "new"
                        if uses_new_snapshot_cache(src.cluster.version)
                        else "old",
                        "source_mark_delete": fmt_pos(sc.md),
                        "source_individually_deleted_entries": len(sc.idm),
                        "updates_written": len(updates),
                        "last_applied_snapshot": None
                        if last is None
                        else {
                            "snapshot_id": last.snapshot_id,
                            "local_position": fmt_pos(last.snapshot_local_position),
                            "clusters": {k: fmt_pos(v) for k, v in last.clusters},
                            "update_position": fmt_pos(last.update_position),
                            "source_mark_delete_when_written": fmt_pos(last.source_mark_delete),
                        },
                        "expected_remote_mark_delete": _p(expected),
                        "last_update_delivered": applied is not None,
                        "last_delivered_update_snapshot_id": delivered_updates[-1].snapshot_id
                        if delivered_updates
                        else None,
                        "actual_remote_mark_delete": None if tc is None else fmt_pos(tc.md),
                        "failover_duplicate_messages": dup_msgs,
                        "failover_duplicate_entries": dup_entries,
                        "remote_data_messages_after_mark_delete": after_msgs,
                    },
                )

    # -- per topic export ---------------------------------------------------------------------------------

    def _finish_topic(
        self,
        cl: _Cluster,
        plan: _TopicPlan,
        topic: TopicSim,
        group: ReplicatedGroup | None,
        live: set[str],
        extra: dict[str, Any],
        txn_prod: TxnProducer | None,
        compactions: list[Any],
    ) -> None:
        w = self.writer
        end = self.end_ms
        self.topics += 1
        q = self.quotas[cl.name]
        # stats-internal (one partitioned wrapper per cluster)
        internal = _stats_internal(topic, cl, end)
        stats = _topic_stats(topic, cl, end, plan.namespace, q, group, cl.index == 0, live)
        if plan.partition >= 0 and plan.base in self.wrap_internal and group is None:
            self._buffer(cl, "stats-internal", plan, topic.topic, internal)
        else:
            w.doc(cl, "stats-internal", topic.topic, internal)
        if plan.partition >= 0 and plan.base in self.wrap_stats and group is None:
            self._buffer(cl, "stats", plan, topic.topic, stats)
        else:
            w.doc(cl, "stats", topic.topic, stats)
        # consumers client config
        self._client_consumers(cl, topic)
        # schemas (the partitioned topic's schema is exported once, by partition 0)
        family = extra.get("schema_family")
        if family is not None and plan.partition <= 0:
            self._schemas(cl, plan, topic, str(family))
        # entries
        for rec in topic.iter_from(EARLIEST):
            self.entries += 1
            if isinstance(rec.content, MarkerContent):
                self.markers += 1
            else:
                self.messages += rec.n_messages
        if self.spec.entries_dump:
            w.entries(cl, topic)
        self._topic_truth(cl, plan, topic, group, extra, txn_prod, compactions)

    def _buffer(self, cl: _Cluster, kind: str, plan: _TopicPlan, name: str, doc: dict[str, Any]) -> None:
        key = (cl.name, kind, plan.base)
        parts = self.pending_wrappers.setdefault(key, [])
        parts.append((name, doc))
        if len(parts) == plan.partitions:
            del self.pending_wrappers[key]
            if kind == "stats":
                wrapper = _partitioned_stats(parts)
            else:
                wrapper = {"metadata": {"partitions": plan.partitions}, "partitions": dict(parts)}
            self.writer.doc(cl, kind, plan.base, wrapper)

    def _client_consumers(self, cl: _Cluster, topic: TopicSim) -> None:
        subs = [
            c
            for c in sorted(topic.cursors.values(), key=lambda x: x.name)
            if c.active and c.consumers and c.kind == "subscription"
        ]
        if not subs:
            return
        w = self.writer
        form = w.form(cl, "consumers")
        if form == "csv":
            rows = [
                [topic.topic, c.name, ci.name, str(ci.priority), c.sub_type or ""]
                for c in subs
                for ci in c.consumers
            ]
            w.consumers_csv(cl, rows)
        elif form == "jsonl":
            doc: Any = [
                {
                    "subscription": c.name,
                    "consumerName": ci.name,
                    "priorityLevel": ci.priority,
                    "subscriptionType": c.sub_type,
                }
                for c in subs
                for ci in c.consumers
            ]
            w.doc(cl, "consumers", topic.topic, doc)
        else:
            doc = {
                "subscriptions": {
                    c.name: {
                        "type": c.sub_type,
                        "consumers": [
                            {"consumerName": ci.name, "priorityLevel": ci.priority} for ci in c.consumers
                        ],
                    }
                    for c in subs
                }
            }
            w.doc(cl, "consumers", topic.topic, doc)

    def _schemas(self, cl: _Cluster, plan: _TopicPlan, topic: TopicSim, family: str) -> None:
        versions = _AVRO_SCHEMAS[family]
        base_ms = topic.ledgers[topic.ids[0]].created_ms if topic.ids else self.start_ms
        items = []
        for v, schema in enumerate(versions):
            items.append(
                {
                    "version": v,
                    "type": "AVRO",
                    "timestamp": base_ms - 60_000 + v * 3_600_000 // 2,
                    "data": json.dumps(schema, separators=(",", ":")),
                    "properties": {"__alwaysAllowNull": "true", "__jsr310ConversionEnabled": "false"},
                }
            )
        w = self.writer
        if family == "incompatible" and cl.index == self.cli_cluster and w.form(cl, "schemas") == "file":
            # `pulsar-admin schemas get --all-versions`: pretty SchemaInfo documents one after another
            text = ""
            for it in items:
                text += _dumps_pretty(
                    {
                        "name": plan.base.rsplit("/", 1)[1],
                        "schema": it["data"],
                        "type": "AVRO",
                        "timestamp": it["timestamp"],
                        "properties": it["properties"],
                    }
                )
            w.text_file(cl, "schemas", plan.base, text)
            return
        w.doc(cl, "schemas", plan.base, {"getSchemaResponses": items})

    def _plan_requests(self, cl: _Cluster, topic: TopicSim) -> None:
        """Dry-run requests for the first topics of each cluster that have a durable subscription."""
        subs = [c for c in topic.cursors.values() if c.durable and c.kind == "subscription"]
        if not subs or self.plan_topics.get(cl.name, 0) >= PLAN_REQUEST_TOPICS:
            return
        k = self.plan_topics[cl.name] = self.plan_topics.get(cl.name, 0) + 1
        sub = max(subs, key=lambda c: (len(c.idm), c.order))
        records = list(topic.iter_from((topic.ids[0], 0))) if topic.ids else []
        base = {"cluster": cl.name, "topic": topic.topic}
        rid = f"{cl.name}-{k}"
        reqs: list[dict[str, Any]] = [
            {
                "request_id": f"{rid}-skip-exclude",
                "action": "skip",
                "cursor": sub.name,
                "n": 3,
                "deleted_entries": "Exclude",
            },
            {
                "request_id": f"{rid}-skip-include",
                "action": "skip",
                "cursor": sub.name,
                "n": 3,
                "deleted_entries": "Include",
            },
            {"request_id": f"{rid}-skip-all", "action": "skip", "cursor": sub.name, "n": 1_000_000},
            {"request_id": f"{rid}-clear", "action": "clear_backlog", "cursor": sub.name},
            {
                "request_id": f"{rid}-reset-earliest",
                "action": "reset",
                "cursor": sub.name,
                "target": "earliest",
            },
            {"request_id": f"{rid}-reset-latest", "action": "reset", "cursor": sub.name, "target": "latest"},
            {"request_id": f"{rid}-reader-earliest", "action": "reader_start", "start": "earliest"},
            {"request_id": f"{rid}-reader-latest", "action": "reader_start", "start": "latest"},
        ]
        if records:
            mid = records[len(records) // 2]
            reqs += [
                {
                    "request_id": f"{rid}-reset-mid",
                    "action": "reset",
                    "cursor": sub.name,
                    "target": fmt_pos(mid.position),
                },
                {
                    "request_id": f"{rid}-reset-time",
                    "action": "reset_by_time",
                    "cursor": sub.name,
                    "timestamp": mid.add_ms,
                },
                {
                    "request_id": f"{rid}-reader-mid",
                    "action": "reader_start",
                    "start": fmt_pos(mid.position),
                    "inclusive": True,
                },
                {
                    "request_id": f"{rid}-reader-mid-batch",
                    "action": "reader_start",
                    "start": f"{fmt_pos(mid.position)}:0",
                },
                {
                    "request_id": f"{rid}-reader-rollback",
                    "action": "reader_start",
                    "start": "latest",
                    "rollback_seconds": 3600,
                },
            ]
        self.plan_requests += [{**r, **base} for r in reqs]

    def _topic_truth(
        self,
        cl: _Cluster,
        plan: _TopicPlan,
        topic: TopicSim,
        group: ReplicatedGroup | None,
        extra: dict[str, Any],
        txn_prod: TxnProducer | None,
        compactions: list[Any],
    ) -> None:
        tr = self.truth
        slowest = topic.slowest()
        self._plan_requests(cl, topic)
        for c in topic.cursors.values():
            exact_bytes = sum(r.size for r in topic.iter_between(c.md, topic.lac) if r.position not in c.idm)
            tr.line(
                "cursors",
                {
                    "cluster": cl.name,
                    "topic": topic.topic,
                    "cursor": c.name,
                    "kind": c.kind,
                    "durable": c.durable,
                    "cursor_order": c.order,
                    "mark_delete_position": fmt_pos(c.md),
                    "read_position": fmt_pos(c.rp),
                    "individually_deleted_entries": len(c.idm),
                    "backlog_entries": topic.precise_backlog(c),
                    "backlog_messages": topic.backlog_messages(c),
                    "backlog_data_messages": topic.backlog_messages(c, data_only=True),
                    "backlog_bytes": exact_bytes,
                    "stats_msg_backlog": topic.nonprecise_backlog(c),
                    "estimated_backlog_size_bytes": topic.estimate_from(c.md),
                    "subscription_type": c.sub_type,
                    "replicated": c.replicated,
                    "active_consumer": active_consumer(
                        [(x.name, x.priority) for x in c.consumers], topic.topic, c.sub_type or "", cl.version
                    )
                    if c.active and c.consumers
                    else None,
                },
            )
        doc: dict[str, Any] = {
            "cluster": cl.name,
            "topic": topic.topic,
            "partition_index": partition_index(topic.topic),
            "feature": extra.get("feature"),
            "last_confirmed_entry": fmt_pos(topic.lac),
            "current_ledger_id": topic.current,
            "current_ledger_entries": len(topic.ledgers[topic.current].entries)
            if topic.current is not None
            else 0,
            "listed_ledgers": len(topic.ids),
            "trimmed_ledgers": topic.trimmed_ledgers,
            "number_of_entries": topic.number_of_entries,
            "total_size_bytes": topic.total_size,
            "entries_added_counter": topic.entries_added,
            "reloaded_at_ms": topic.reloaded_at_ms,
            "slowest_cursor": slowest.name if slowest else None,
            "estimated_backlog_size_bytes": topic.estimated_backlog_size(),
            "max_read_position": fmt_pos(topic.read_limit()),
            "transactions": {
                "ongoing": [
                    {"txn": list(t), "first_position": fmt_pos(p)} for t, p in topic.txn_ongoing.items()
                ],
                "committed": sorted(list(t) for t in topic.txn_committed),
                "aborted": sorted(list(t) for t in topic.txn_aborted),
            },
        }
        if txn_prod is not None:
            doc["transactions"]["log"] = [
                {
                    "txn": list(x.txn),
                    "outcome": x.outcome,
                    "entries": x.entries,
                    "begin_ms": x.begin_ms,
                    "end_ms": x.end_ms,
                    "marker_position": _p(x.marker_position),
                }
                for x in txn_prod.log
            ]
        records = [r for r in topic.iter_from(EARLIEST) if r.position <= topic.lac]
        if extra.get("feature") == "compaction" or topic.compacted_ledger is not None:
            preview = compact_entries(records, cl.version, encode=False)
            doc["compaction"] = {
                "retain_null_key": preview.retain_null_key,
                "preview_horizon": fmt_pos(preview.horizon),
                "preview_latest_by_key": {k: list(v) for k, v in sorted(preview.latest.items())},
                "preview_retained_messages": [[a, b, c_, k] for a, b, c_, k in preview.retained],
                "broker_horizon": _p(topic.compaction_horizon),
                "broker_compacted_ledger": None
                if topic.compacted_ledger is None
                else {
                    "ledger_id": topic.compacted_ledger[0],
                    "entries": topic.compacted_ledger[1],
                    "size": topic.compacted_ledger[2],
                },
            }
        keys = sorted(
            {
                m.key
                for r in records
                if isinstance(r.content, DataContent)
                for m in r.content.messages
                if m.key is not None
            }
        )
        doc["distinct_keys"] = len(keys)
        if len(keys) <= 64:
            doc["keys"] = keys
        tr.line("topics", doc)


def _update_doc(up: UpdateTrace) -> dict[str, Any]:
    return {
        "topic": up.topic,
        "subscription": up.subscription,
        "source_cluster": up.source_cluster,
        "snapshot_id": up.snapshot_id,
        "snapshot_local_position": fmt_pos(up.snapshot_local_position),
        "clusters": {k: fmt_pos(v) for k, v in up.clusters},
        "source_mark_delete": fmt_pos(up.source_mark_delete),
        "update_position": fmt_pos(up.update_position),
        "written_ms": up.written_ms,
        "applied": {
            k: {
                "position": fmt_pos(v.position),
                "before": fmt_pos(v.before),
                "after": fmt_pos(v.after),
                "moved": v.moved,
                "created": v.created,
                "update_position_here": fmt_pos(v.update_position_here),
                "t_ms": v.t_ms,
            }
            for k, v in sorted(up.applied.items())
        },
    }


def _prepare_out(out: Path, spec: DemoSpec, overwrite: bool) -> None:
    if out.exists() and not out.is_dir():
        raise ConfigError(f"demo output {str(out)!r} exists and is not a folder; choose another path")
    ours = [out / c for c in spec.clusters] + [
        out / GROUND_TRUTH_DIR,
        out / REQUESTS_FILE.parent,
        out / "manifest.json",
    ]
    if out.is_dir() and any(out.iterdir()):
        if not overwrite:
            raise ConfigError(
                f"demo output folder {str(out)!r} is not empty; pass overwrite=True (CLI: --overwrite) or an "
                "empty/new folder"
            )
        for p in ours:
            if p.is_dir():
                shutil.rmtree(p)
            elif p.exists():
                p.unlink()
    out.mkdir(parents=True, exist_ok=True)


def generate_demo(
    out_dir: str | Path, spec: DemoSpec = DemoSpec(), *, overwrite: bool = False
) -> DemoSummary:
    """Simulate ``spec.clusters`` and write their raw exports, manifest and ground truth to ``out_dir``.

    Deterministic: the same spec (and seed) gives byte-identical files. One topic (or one replicated
    topic across all clusters) is simulated and written at a time. ``overwrite`` replaces the folders
    this generator writes (cluster folders, ``_ground_truth``, ``manifest.json``) in a non-empty
    ``out_dir``; otherwise a non-empty folder is refused.
    """
    out = Path(out_dir)
    _prepare_out(out, spec, overwrite)
    return _Generator(spec, out).run()


def iter_topic_names(spec: DemoSpec = DemoSpec()) -> Iterator[tuple[str, str]]:
    """``(cluster, topic)`` of every topic partition the spec simulates (cheap; no simulation)."""
    geo = _replicated_plans(spec)
    local = _local_plans(spec)
    for cl in spec.clusters:
        for p in geo:
            yield cl, p.topic
        for p in local:
            yield cl, p.topic
