"""A loopback fake of Pulsar's admin REST API v2 (real sockets, aiohttp server) for the export tests.

Paths, JSON shapes and headers follow Pulsar's resource classes (read at apache/pulsar@0000386a and
poorbarcode/pulsar@22766124 ``PersistentTopicsBase``, apache/pulsar@0016f3c5 ``BrokersBase``; ``v2``
``PersistentTopics``, ``Namespaces``, ``Tenants``, ``Clusters``, ``Brokers``, ``SchemasResource``):

* ``GET /admin/v2/brokers/version`` -> the bare version text (``BrokersBase.version``);
  ``/admin/v2/brokers/configuration/runtime`` -> ``{key: "value"}`` (``getRuntimeConfiguration``);
  ``/admin/v2/clusters`` -> ``["name"]``; ``/admin/v2/tenants`` -> ``["t"]``;
  ``/admin/v2/namespaces/{t}`` -> ``["t/ns"]``; ``/admin/v2/namespaces/{t}/{ns}/backlogQuotaMap``;
* ``/admin/v2/persistent/{t}/{ns}`` (every topic and partition) and ``.../partitioned`` (bases);
* per topic ``internalStats``, ``stats``, ``partitioned-internalStats``
  (``{"metadata": {"partitions": N}, "partitions": {...}}``), ``partitioned-stats?perPartition=true``,
  ``backlogQuotaMap?applied=false``; ``/admin/v2/schemas/{t}/{ns}/{topic}/schemas``
  (``{"getSchemaResponses": [...]}``, 404 when the topic has none);
* ``.../ledger/{ledgerId}/entry/{entryId}``: the stored entry answered as
  ``generateResponseWithEntry`` does, written here independently of the library (the generated
  protobuf classes parse the stored bytes): ``X-Pulsar-*`` headers per metadata field, times through
  Java's ``ISO_OFFSET_DATE_TIME`` in the broker's zone, ``uint64`` fields as signed longs, properties
  as one header per key (``header_style="per_key"``, older brokers) or one Gson JSON header
  (``"json"``, newer ones, with the txn headers of PIP-353), the body decompressed;
* a topic owned by another fake broker answers ``307`` to it with ``authoritative=true`` (as
  ``PulsarWebResource`` redirects); errors are ``{"reason": "..."}`` bodies (``RestException``);
* faults: a token to require (401 without, 403 for the wrong role on a path), injected 500s, delays
  (timeouts) and 404s per path, a fixed latency for benchmarks.

The cluster content comes from an export folder (the demo's direct export): :func:`load_export`.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import re
import ssl
import struct
import threading
import zlib
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import cramjam
from aiohttp import web

from pulsar_model.wire._generated import pulsar_api_pb2 as pb
from pulsar_model.wire._generated import pulsar_markers_pb2 as mpb

COMPRESSION = {0: "NONE", 1: "LZ4", 2: "ZLIB", 3: "ZSTD", 4: "SNAPPY"}
_U64 = 1 << 64


def signed(value: int) -> int:
    return value - _U64 if value >= 1 << 63 else value


def java_datetime(ms: int, offset_minutes: int = 0) -> str:
    """``DateFormatter.format(ms)``: ISO_OFFSET_DATE_TIME in the broker's zone (fraction only when != 0)."""
    zone = dt.timezone(dt.timedelta(minutes=offset_minutes))
    seconds, millis = divmod(ms, 1000)
    moment = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=seconds)
    local = moment.astimezone(zone)
    text = local.strftime("%Y-%m-%dT%H:%M:%S")
    if millis:
        text += f".{millis:03d}".rstrip("0")
    if offset_minutes == 0:
        return text + "Z"
    sign = "+" if offset_minutes > 0 else "-"
    return f"{text}{sign}{abs(offset_minutes) // 60:02d}:{abs(offset_minutes) % 60:02d}"


def gson_json(props: dict[str, str]) -> str:
    """``new Gson().toJson(map)``: compact, HTML-safe escaping of < > & = '."""
    text = json.dumps(props, separators=(",", ":"), ensure_ascii=False)
    for char, code in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("=", "\\u003d"),
        ("'", "\\u0027"),
    ):
        text = text.replace(char, code)
    return text


@dataclass
class StoredEntry:
    """A stored entry split the way the broker reads it (``Commands`` envelope parsing)."""

    total: int
    bem: Any
    metadata: Any
    payload: bytes


def split_stored(data: bytes) -> StoredEntry:
    pos = 0
    bem = None
    if data[0:2] == b"\x0e\x02":
        size = struct.unpack_from(">I", data, 2)[0]
        bem = pb.BrokerEntryMetadata.FromString(data[6 : 6 + size])
        pos = 6 + size
    if data[pos : pos + 2] == b"\x0e\x01":
        pos += 6
    size = struct.unpack_from(">I", data, pos)[0]
    metadata = pb.MessageMetadata.FromString(data[pos + 4 : pos + 4 + size])
    return StoredEntry(len(data), bem, metadata, data[pos + 4 + size :])


def decompress(codec: int, payload: bytes, size: int) -> bytes:
    if codec == 0:
        return payload
    if codec == 1:
        out = bytearray(size)
        cramjam.lz4.decompress_block_into(payload, out)
        return bytes(out)
    if codec == 2:
        return zlib.decompress(payload)
    if codec == 3:
        return bytes(cramjam.zstd.decompress(payload))
    return bytes(cramjam.snappy.decompress_raw(payload))


def entry_response(
    data: bytes,
    position: tuple[int, int],
    header_style: str,
    offset_minutes: int,
    txn_state: Callable[[int, int], str | None] | None,
) -> tuple[list[tuple[str, str]], bytes]:
    """Headers and body of ``generateResponseWithEntry`` for one stored entry."""
    e = split_stored(data)
    md = e.metadata
    h: list[tuple[str, str]] = [("X-Pulsar-Message-ID", f"{position[0]}:{position[1]}")]
    if header_style == "json":
        props: dict[str, str] = {}
        for kv in md.properties:
            props[kv.key] = kv.value
        h.append(("X-Pulsar-PROPERTY", gson_json(props)))
    else:
        h += [(f"X-Pulsar-PROPERTY-{kv.key}", kv.value) for kv in md.properties]
    if e.bem is not None:
        if e.bem.HasField("broker_timestamp"):
            h.append(
                (
                    "X-Pulsar-Broker-Entry-METADATA-timestamp",
                    java_datetime(signed(e.bem.broker_timestamp), offset_minutes),
                )
            )
        if e.bem.HasField("index"):
            h.append(("X-Pulsar-Broker-Entry-METADATA-index", str(signed(e.bem.index))))
    if md.HasField("publish_time"):
        h.append(("X-Pulsar-publish-time", java_datetime(signed(md.publish_time), offset_minutes)))
    if md.HasField("event_time"):
        h.append(("X-Pulsar-event-time", java_datetime(signed(md.event_time), offset_minutes)))
    if md.HasField("deliver_at_time"):
        h.append(("X-Pulsar-deliver-at-time", java_datetime(md.deliver_at_time, offset_minutes)))
    if md.HasField("num_messages_in_batch"):
        h.append(("X-Pulsar-num-batch-message", str(md.num_messages_in_batch)))
        h.append(("X-Pulsar-batch-size", str(e.total - md.ByteSize())))
    if md.HasField("null_value"):
        h.append(("X-Pulsar-null-value", str(md.null_value).lower()))
    if md.HasField("num_chunks_from_msg"):
        h.append(("X-Pulsar-PROPERTY-TOTAL-CHUNKS", str(md.num_chunks_from_msg)))
        h.append(("X-Pulsar-PROPERTY-CHUNK-ID", str(md.chunk_id)))
    h.append(("X-Pulsar-Is-Encrypted", str(len(md.encryption_keys) > 0).lower()))
    h.append(("X-Pulsar-producer-name", md.producer_name))
    h.append(("X-Pulsar-sequence-id", str(signed(md.sequence_id))))
    if md.HasField("replicated_from"):
        h.append(("X-Pulsar-replicated-from", md.replicated_from))
    h += [("X-Pulsar-replicated-to", c) for c in md.replicate_to]
    if md.HasField("partition_key"):
        h.append(("X-Pulsar-partition-key", md.partition_key))
    if md.HasField("compression"):
        h.append(("X-Pulsar-compression", COMPRESSION[md.compression]))
    if md.HasField("uncompressed_size"):
        h.append(("X-Pulsar-uncompressed-size", str(md.uncompressed_size)))
    if md.HasField("schema_version"):
        h.append(("X-Pulsar-Base64-schema-version", base64.b64encode(md.schema_version).decode()))
    if md.HasField("partition_key_b64_encoded"):
        h.append(("X-Pulsar-partition-key-b64-encoded", str(md.partition_key_b64_encoded).lower()))
    if md.HasField("ordering_key"):
        h.append(("X-Pulsar-Base64-ordering-key", base64.b64encode(md.ordering_key).decode()))
    if md.HasField("marker_type"):
        h.append(("X-Pulsar-marker-type", str(md.marker_type)))
    if md.HasField("txnid_least_bits"):
        h.append(("X-Pulsar-txnid-least-bits", str(signed(md.txnid_least_bits))))
    if md.HasField("txnid_most_bits"):
        h.append(("X-Pulsar-txnid-most-bits", str(signed(md.txnid_most_bits))))
    if (
        header_style == "json"
        and txn_state is not None
        and md.HasField("txnid_most_bits")
        and md.HasField("txnid_least_bits")
    ):
        state = txn_state(signed(md.txnid_most_bits), signed(md.txnid_least_bits))
        h.append(("X-Pulsar-txn-aborted", str(state == "aborted").lower()))
        h.append(("X-Pulsar-txn-uncommitted", str(state is None).lower()))
    if md.HasField("highest_sequence_id"):
        h.append(("X-Pulsar-highest-sequence-id", str(signed(md.highest_sequence_id))))
    if md.HasField("uuid"):
        h.append(("X-Pulsar-uuid", md.uuid))
    if md.HasField("num_chunks_from_msg"):
        h.append(("X-Pulsar-num-chunks-from-msg", str(md.num_chunks_from_msg)))
    if md.HasField("total_chunk_msg_size"):
        h.append(("X-Pulsar-total-chunk-msg-size", str(md.total_chunk_msg_size)))
    if md.HasField("chunk_id"):
        h.append(("X-Pulsar-chunk-id", str(md.chunk_id)))
    if md.HasField("null_partition_key"):
        h.append(("X-Pulsar-null-partition-key", str(md.null_partition_key).lower()))
    encrypted = len(md.encryption_keys) > 0
    body = (
        e.payload
        if encrypted and header_style == "json"
        else decompress(md.compression, e.payload, md.uncompressed_size)
    )
    return h, body


@dataclass
class FakeCluster:
    """What one fake cluster serves."""

    name: str
    version: str = "4.1.3"
    header_style: str = "json"  # json | per_key
    offset_minutes: int = 0
    runtime_config: dict[str, str] = field(default_factory=dict)
    namespaces: dict[str, list[str]] = field(default_factory=dict)  # tenant -> ["t/ns"]
    namespace_quotas: dict[str, Any] = field(default_factory=dict)
    topics: dict[str, list[str]] = field(default_factory=dict)  # "t/ns" -> persistent topics and partitions
    partitioned: dict[str, int] = field(default_factory=dict)  # base topic -> partitions
    internal: dict[str, Any] = field(default_factory=dict)  # topic/partition -> internalStats doc
    stats: dict[str, Any] = field(default_factory=dict)
    topic_quotas: dict[str, Any] = field(default_factory=dict)
    schemas: dict[str, Any] = field(default_factory=dict)
    entries: dict[str, dict[tuple[int, int], bytes]] = field(default_factory=lambda: defaultdict(dict))

    def txn_state(self, topic: str) -> Callable[[int, int], str | None]:
        states: dict[tuple[int, int], str] = {}
        for data in self.entries.get(topic, {}).values():
            md = split_stored(data).metadata
            if md.HasField("marker_type") and md.marker_type in (21, 22):
                key = (signed(md.txnid_most_bits), signed(md.txnid_least_bits))
                states.setdefault(key, "committed" if md.marker_type == 21 else "aborted")
        return lambda most, least: states.get((most, least))


@dataclass
class Faults:
    """Injected behaviour, keyed by a regex on the request path (first match wins)."""

    token: str | None = None
    forbidden: list[str] = field(default_factory=list)  # path regexes answering 403 for the token's role
    errors: dict[str, list[int]] = field(default_factory=dict)  # regex -> statuses to answer first, in order
    delays: dict[str, list[float]] = field(default_factory=dict)  # regex -> seconds to stall, in order
    missing: list[str] = field(default_factory=list)  # regexes answering 404
    latency_seconds: float = 0.0
    redirect_to: Callable[[str], str | None] | None = None  # path -> base URL of the owner, or None
    seen_auth: list[str | None] = field(default_factory=list)
    requests: int = 0

    def _take(self, table: dict[str, list[Any]], path: str) -> Any:
        for pattern, queue in table.items():
            if queue and re.search(pattern, path):
                return queue.pop(0)
        return None


def _json(doc: Any, status: int = 200) -> web.Response:
    return web.Response(status=status, text=json.dumps(doc, indent=2), content_type="application/json")


def _error(status: int, reason: str) -> web.Response:
    return _json({"reason": reason}, status)


class FakeAdminServer:
    """One fake broker: serves ``cluster`` on 127.0.0.1 in a background thread (``with`` block)."""

    def __init__(
        self, cluster: FakeCluster, faults: Faults | None = None, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        self.cluster = cluster
        self.faults = faults or Faults()
        self.ssl_context = ssl_context
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._txn: dict[str, Callable[[int, int], str | None]] = {}

    @property
    def url(self) -> str:
        return f"{'https' if self.ssl_context else 'http'}://127.0.0.1:{self.port}"

    def __enter__(self) -> FakeAdminServer:
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("fake admin server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(10)

    def _serve(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._loop.run_until_complete(self._main())

    async def _main(self) -> None:
        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=self.ssl_context)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]
        self._stop = asyncio.Event()
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        f = self.faults
        f.requests += 1
        path = request.rel_url.raw_path
        f.seen_auth.append(request.headers.get("Authorization"))
        if f.latency_seconds:
            await asyncio.sleep(f.latency_seconds)
        if f.token is not None and request.headers.get("Authorization") != f"Bearer {f.token}":
            return web.Response(status=401, text="Authentication required")
        if any(re.search(p, path) for p in f.forbidden):
            return _error(403, "Don't have permission to administrate resources on this tenant")
        delay = f._take(f.delays, path)
        if delay:
            await asyncio.sleep(delay)
        status = f._take(f.errors, path)
        if status:
            return _error(status, "injected failure")
        if any(re.search(p, path) for p in f.missing):
            return _error(404, "Topic not found")
        if f.redirect_to is not None and "authoritative=true" not in request.rel_url.raw_query_string:
            owner = f.redirect_to(path)
            if owner is not None:
                query = request.rel_url.raw_query_string
                target = f"{owner}{path}?{query + '&' if query else ''}authoritative=true"
                raise web.HTTPTemporaryRedirect(target)
        return self._route(request, path)

    def _route(self, request: web.Request, path: str) -> web.StreamResponse:
        c = self.cluster
        parts = [unquote(p) for p in path.split("/")[1:]]
        if parts[:2] != ["admin", "v2"]:
            return _error(404, "not an admin v2 path")
        rest = parts[2:]
        if rest == ["brokers", "version"]:
            return web.Response(text=c.version, content_type="application/json")
        if rest == ["brokers", "configuration", "runtime"]:
            return _json(c.runtime_config)
        if rest == ["clusters"]:
            return _json([c.name])
        if rest == ["tenants"]:
            return _json(sorted(c.namespaces))
        if len(rest) == 2 and rest[0] == "namespaces":
            if rest[1] not in c.namespaces:
                return _error(404, "Tenant does not exist")
            return _json(c.namespaces[rest[1]])
        if len(rest) == 4 and rest[0] == "namespaces" and rest[3] == "backlogQuotaMap":
            return _json(c.namespace_quotas.get(f"{rest[1]}/{rest[2]}", {}))
        if rest and rest[0] == "schemas" and len(rest) == 5 and rest[4] == "schemas":
            topic = f"persistent://{rest[1]}/{rest[2]}/{rest[3]}"
            if topic not in c.schemas:
                return _error(404, "Schema not found")
            return _json(c.schemas[topic])
        if rest and rest[0] == "persistent":
            return self._persistent(request, rest[1:])
        return _error(404, f"no route for {path}")

    def _persistent(self, request: web.Request, rest: list[str]) -> web.StreamResponse:
        c = self.cluster
        if len(rest) == 2:
            return _json(c.topics.get(f"{rest[0]}/{rest[1]}", []))
        if len(rest) == 3 and rest[2] == "partitioned":
            ns = f"{rest[0]}/{rest[1]}"
            return _json(sorted(t for t in c.partitioned if t.startswith(f"persistent://{ns}/")))
        topic = f"persistent://{rest[0]}/{rest[1]}/{rest[2]}"
        op = rest[3:]
        if op == ["internalStats"]:
            return _json(c.internal[topic]) if topic in c.internal else _error(404, "Topic not found")
        if op == ["stats"]:
            return _json(c.stats[topic]) if topic in c.stats else _error(404, "Topic not found")
        if op == ["partitioned-internalStats"]:
            n = c.partitioned.get(topic)
            if n is None:
                return _error(404, "Partitioned topic not found")
            names = [f"{topic}-partition-{i}" for i in range(n)]
            return _json(
                {
                    "metadata": {"partitions": n},
                    "partitions": {p: c.internal[p] for p in names if p in c.internal},
                }
            )
        if op == ["partitioned-stats"]:
            n = c.partitioned.get(topic)
            if n is None:
                return _error(404, "Partitioned topic not found")
            names = [f"{topic}-partition-{i}" for i in range(n)]
            parts = {p: c.stats[p] for p in names if p in c.stats}
            return _json(
                {
                    "msgRateIn": sum(float(s.get("msgRateIn", 0) or 0) for s in parts.values()),
                    "storageSize": sum(int(s.get("storageSize", 0) or 0) for s in parts.values()),
                    "metadata": {"partitions": n},
                    "partitions": parts if request.query.get("perPartition", "true") == "true" else {},
                }
            )
        if op == ["backlogQuotaMap"]:
            return _json(c.topic_quotas.get(topic, {}))
        if len(op) == 4 and op[0] == "ledger" and op[2] == "entry":
            data = c.entries.get(topic, {}).get((int(op[1]), int(op[3])))
            if data is None:
                return _error(500, "org.apache.bookkeeper.mledger.ManagedLedgerException: entry not found")
            if topic not in self._txn:
                self._txn[topic] = c.txn_state(topic)
            headers, body = entry_response(
                data, (int(op[1]), int(op[3])), c.header_style, c.offset_minutes, self._txn[topic]
            )
            resp = web.Response(body=body, content_type="application/octet-stream")
            for name, value in headers:
                resp.headers.add(name, value)
            return resp
        return _error(404, f"no route for topic operation {op}")


# --- the demo's direct export as fake clusters --------------------------------------------------------

_QUOTA_TEXT = re.compile(r"(limitSize|limitTime|limit|policy)=([^,)}\s]+)")


def _quota_object(value: Any) -> Any:
    """A quota the demo wrote as Java toString text, as the REST API's BacklogQuotaImpl JSON."""
    if not isinstance(value, str):
        return value
    fields = dict(_QUOTA_TEXT.findall(value))
    limit = int(fields["limit"]) if fields.get("limit", "null") != "null" else None
    size = int(fields["limitSize"]) if fields.get("limitSize", "null") != "null" else limit
    return {
        "limit": limit if limit is not None else size,
        "limitSize": size,
        "limitTime": int(fields.get("limitTime", "-1")),
        "policy": fields["policy"],
    }


def _documents(folder: Path) -> list[tuple[dict[str, Any], Any]]:
    """(envelope fields, document) of every file of one kind folder (per-topic JSON or JSON Lines)."""
    out: list[tuple[dict[str, Any], Any]] = []
    for path in sorted(folder.glob("*")):
        if path.suffix == ".jsonl":
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    env = json.loads(line)
                    out.append((env, env.get("stats")))
        elif path.suffix == ".json":
            name = unquote(path.stem)
            key = "broker" if name == "broker" else ("topic" if "://" in name else "namespace")
            out.append(
                ({key: True if key == "broker" else name}, json.loads(path.read_text(encoding="utf-8")))
            )
    return out


def load_export(root: Path, versions: dict[str, str] | None = None) -> dict[str, FakeCluster]:
    """Fake clusters serving what an export folder (the demo's direct export) holds."""
    manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
    clusters: dict[str, FakeCluster] = {}
    for name in sorted(manifest["clusters"]):
        version = (versions or {}).get(name) or manifest["clusters"][name].get("pulsar_version", "4.1.3")
        c = FakeCluster(
            name, version, header_style="per_key" if version.startswith(("2.", "3.0")) else "json"
        )
        folder = root / name
        for env, doc in _documents(folder / "stats-internal"):
            topic = env["topic"]
            if isinstance(doc, dict) and isinstance(doc.get("metadata"), dict) and "partitions" in doc:
                c.partitioned[topic] = int(doc["metadata"]["partitions"])
                c.internal.update(doc["partitions"])
            else:
                c.internal[topic] = doc
        for env, doc in _documents(folder / "stats"):
            if isinstance(doc, dict) and isinstance(doc.get("metadata"), dict) and "partitions" in doc:
                c.stats.update(doc["partitions"])
            else:
                c.stats[env["topic"]] = doc
        for env, doc in _documents(folder / "backlog-quotas"):
            if env.get("broker"):
                c.runtime_config = {k: str(v) for k, v in doc.items()}
            elif "namespace" in env:
                c.namespace_quotas[env["namespace"]] = {k: _quota_object(v) for k, v in doc.items()}
            else:
                c.topic_quotas[env["topic"]] = {k: _quota_object(v) for k, v in doc.items()}
        for env, doc in _documents(folder / "schemas"):
            c.schemas[env["topic"]] = doc
        for path in sorted((folder / "entries").glob("*.jsonl")):
            hint = unquote(path.stem)
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    rec = json.loads(line)
                    c.entries[rec.get("topic", hint)][(rec["ledger_id"], rec["entry_id"])] = base64.b64decode(
                        rec["data"]
                    )
        for topic in c.internal:
            base = re.sub(r"-partition-\d+$", "", topic)
            if base != topic and base not in c.partitioned:
                c.partitioned[base] = 1 + max(
                    int(t.rsplit("-partition-", 1)[1])
                    for t in c.internal
                    if t.startswith(base + "-partition-")
                )
        for topic in sorted(c.internal):
            tenant, ns = topic.split("://", 1)[1].split("/")[:2]
            c.topics.setdefault(f"{tenant}/{ns}", []).append(topic)
            if f"{tenant}/{ns}" not in c.namespaces.setdefault(tenant, []):
                c.namespaces[tenant].append(f"{tenant}/{ns}")
        for ns in c.namespace_quotas:
            tenant = ns.split("/", 1)[0]
            if ns not in c.namespaces.setdefault(tenant, []):
                c.namespaces[tenant].append(ns)
        clusters[name] = c
    return clusters


def topic_path(topic: str) -> str:
    """The admin path prefix of a full topic name."""
    tenant, ns, local = topic.split("://", 1)[1].split("/", 2)
    return f"/admin/v2/persistent/{quote(tenant, safe='')}/{quote(ns, safe='')}/{quote(local, safe='')}"


__all__ = ["FakeAdminServer", "FakeCluster", "Faults", "entry_response", "load_export", "mpb", "topic_path"]
