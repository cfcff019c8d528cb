"""``pulsar-analytics export``: walk live clusters' admin REST API v2 and write the export layout.

Per cluster (all clusters of one export run side by side, each with its own connection pool,
concurrency and rate limit):

1. ``GET /admin/v2/brokers/version`` (``BrokersBase.version``) -> the manifest's broker version;
   ``GET /admin/v2/brokers/configuration/runtime`` (``BrokersBase.getRuntimeConfiguration``) ->
   ``backlog-quotas/broker.json`` (the ``backlogQuotaDefault*`` keys) and ``clusterName``.
2. ``GET /admin/v2/tenants`` (``Tenants``), ``GET /admin/v2/namespaces/{tenant}`` (``Namespaces``),
   filtered by the globs; per namespace ``GET /admin/v2/namespaces/{t}/{ns}/backlogQuotaMap``
   (``NamespacesBase.getBacklogQuotaMap``) and the topic lists ``GET /admin/v2/persistent/{t}/{ns}``
   (every persistent topic and partition) and ``.../partitioned`` (``PersistentTopics.getList`` /
   ``getPartitionedTopicList``).
3. Per topic (a partitioned topic is one unit with its partitions): ``internalStats`` or
   ``partitioned-internalStats``, ``stats`` or ``partitioned-stats?perPartition=true``,
   ``backlogQuotaMap?applied=false`` (the topic's own policies; ``PersistentTopics.getBacklogQuotaMap``),
   ``GET /admin/v2/schemas/{t}/{ns}/{topic}/schemas`` (``SchemasResource.getAllSchemas``), then the
   entries the ``--entries`` mode wants (:mod:`pulsar_model.export.ranges`) one by one from
   ``.../ledger/{ledgerId}/entry/{entryId}`` (``PersistentTopicsBase.internalGetMessageById``).

Source read: apache/pulsar@0000386a (2.x line), lhotari/pulsar@215a14e5 (3.0 line) and
poorbarcode/pulsar@22766124 (master) ``PersistentTopicsBase``; apache/pulsar@0016f3c5 ``BrokersBase``;
docs/semantics/export-rest.md.

A topic deleted between listing and fetching (404) is recorded in the manifest and skipped; a topic
whose metadata cannot be read is a failure (exit status 1); entries that cannot be fetched, or that the
per-topic cap leaves out, are listed as missing ranges so that ingest marks the topic incomplete.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import logging
import re
import sys
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from pulsar_model import __version__
from pulsar_model.errors import ConfigError, PulsarAnalyticsError
from pulsar_model.export.client import AdminClient, AdminError, RateLimiter, RequestStats, encode_segment
from pulsar_model.export.options import ExportOptions, redact_url
from pulsar_model.export.ranges import EntryPlan, EntryRange, fmt, merge_positions, plan_entries
from pulsar_model.export.writer import (
    JOURNAL_DIR,
    Journal,
    StreamingFile,
    atomic_json,
    clean_temporaries,
    dumps,
    encode_name,
    folder_is_empty,
)

log = logging.getLogger(__name__)

_VERSION_RE: Final = re.compile(r"^\s*v?(\d+)\.(\d+)\.(\d+)")
_CLUSTER_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_PARTITION_RE: Final = re.compile(r"^(.*)-partition-(\d+)$")
_GLOB_CHARS: Final = re.compile(r"[*?\[]")
#: Headers kept from an entry response: the broker's metadata headers only.
_ENTRY_HEADER_PREFIX: Final = "x-pulsar-"


def modelled_version(reported: str) -> str | None:
    """``M.m.p`` of a reported broker version when the 2.x-4.x lines model it (docs §0.3), else None."""
    match = _VERSION_RE.match(reported)
    if match is None or int(match.group(1)) not in (2, 3, 4):
        return None
    return f"{int(match.group(1))}.{int(match.group(2))}.{int(match.group(3))}"


@dataclass
class TopicUnit:
    """One topic to export: a non-partitioned topic, or a partitioned topic with its partitions."""

    topic: str  # full name, e.g. persistent://t/ns/orders
    tenant: str
    namespace: str  # tenant/ns
    local: str
    partitioned: bool


@dataclass
class ClusterResult:
    """What one cluster's export did (manifest section and summary line)."""

    target_url: str
    name: str | None = None
    broker_version: str | None = None
    topics_total: int = 0
    topics_done: int = 0
    topics_resumed: int = 0
    entries: int = 0
    incomplete: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    stats: RequestStats = field(default_factory=RequestStats)
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return bool(self.failures)


@dataclass
class ExportSummary:
    out: Path
    export_id: str
    exported_at: str
    clusters: list[ClusterResult]
    seconds: float

    @property
    def failed(self) -> bool:
        return any(c.failed for c in self.clusters)

    def format(self) -> str:
        lines = [f"export {self.export_id} written to {self.out} in {self.seconds:.1f}s"]
        for c in self.clusters:
            s = c.stats
            lines.append(
                f"  {c.name or redact_url(c.target_url)}: broker {c.broker_version or '?'}, "
                f"{c.topics_done}/{c.topics_total} topics ({c.topics_resumed} from an earlier run), "
                f"{c.entries} entries, {len(c.incomplete)} topic(s) with missing entries, "
                f"{len(c.skipped)} skipped (deleted while exporting), {len(c.failures)} failure(s); "
                f"{s.requests} requests ({s.rate():.0f}/s), {s.retries} retries, {s.redirects} redirects"
            )
            lines.extend(f"    failed: {f}" for f in c.failures[:20])
            if len(c.failures) > 20:
                lines.append(f"    ... and {len(c.failures) - 20} more (see manifest.json)")
        lines.append("status: FAILED (exit 1)" if self.failed else "status: ok")
        return "\n".join(lines)


class _Progress:
    """One tqdm bar per cluster: topics done / total, entries, requests per second, ETA."""

    def __init__(self, name: str, total: int, stats: RequestStats, enabled: bool, position: int) -> None:
        self.stats = stats
        self.entries = 0
        self._last = 0.0
        self.bar: Any = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=name, unit="topic", position=position, file=sys.stderr)

    def topic_done(self) -> None:
        if self.bar is not None:
            self.bar.update(1)
            self._postfix()

    def entry_done(self, n: int = 1) -> None:
        self.entries += n
        if self.bar is not None and time.monotonic() - self._last > 0.5:
            self._postfix()

    def _postfix(self) -> None:
        self._last = time.monotonic()
        self.bar.set_postfix(entries=self.entries, req_s=f"{self.stats.rate():.0f}", refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self._postfix()
            self.bar.close()


class ClusterExport:
    """The export of one cluster into ``<out>/<cluster>/``."""

    def __init__(
        self,
        options: ExportOptions,
        target_url: str,
        target_name: str | None,
        journal: Journal,
        done: Mapping[tuple[str, str], dict[str, Any]],
        position: int,
    ) -> None:
        self.options = options
        self.result = ClusterResult(target_url=target_url, name=target_name)
        self.journal = journal
        self.done = done
        self.position = position
        self.client: AdminClient | None = None
        self.folder: Path | None = None
        self.progress: _Progress | None = None

    # --- helpers ------------------------------------------------------------------------------------

    def _fail(self, what: str, exc: BaseException) -> None:
        self.result.failures.append(f"{what}: {exc}")
        log.warning("%s: %s", what, exc)

    def _topic_path(self, unit: TopicUnit, local: str | None = None) -> str:
        tenant, ns = unit.namespace.split("/", 1)
        return (
            f"/admin/v2/persistent/{encode_segment(tenant)}/{encode_segment(ns)}/"
            f"{encode_segment(local if local is not None else unit.local)}"
        )

    async def _optional(self, what: str, call: Awaitable[Any]) -> Any:
        try:
            return await call
        except AdminError as exc:
            self._fail(what, exc)
            return None

    # --- cluster level ------------------------------------------------------------------------------

    async def run(self) -> ClusterResult:
        started = time.monotonic()
        opts = self.options
        stats = self.result.stats
        async with AdminClient(
            self.result.target_url,
            opts,
            stats,
            asyncio.Semaphore(opts.concurrency),
            RateLimiter(opts.max_rate),
        ) as client:
            self.client = client
            try:
                await self._run_cluster(client)
            except AdminError as exc:
                self._fail("cluster", exc)
            finally:
                if self.progress is not None:
                    self.progress.close()
        self.result.seconds = time.monotonic() - started
        return self.result

    async def _run_cluster(self, client: AdminClient) -> None:
        opts = self.options
        version = await self._optional(
            "broker version", client.get_text("/admin/v2/brokers/version", "version")
        )
        self.result.broker_version = version
        config = await self._optional(
            "broker runtime configuration (backlog-quotas/broker.json)",
            client.get_json("/admin/v2/brokers/configuration/runtime", "runtime-config"),
        )
        name = self.result.name
        if name is None and isinstance(config, Mapping) and isinstance(config.get("clusterName"), str):
            name = str(config["clusterName"])
        if name is None:
            clusters = await self._optional("clusters", client.get_json("/admin/v2/clusters", "clusters"))
            local = [c for c in clusters or [] if isinstance(c, str) and c != "global"]
            if len(local) == 1:
                name = local[0]
        if name is None:
            raise AdminError(
                None,
                "/admin/v2/clusters",
                "cannot tell the cluster's name (no clusterName in the runtime configuration, not exactly "
                "one cluster listed); pass --cluster NAME after its --admin-url",
            )
        if not _CLUSTER_RE.match(name):
            raise AdminError(None, "", f"cluster name {name!r} cannot be an export folder name")
        self.result.name = name
        self.folder = opts.out / name
        if isinstance(config, Mapping):
            atomic_json(self.folder / "backlog-quotas" / "broker.json", dict(config), pretty=True)
        units = await self._list_units(client)
        self.result.topics_total = len(units)
        self.progress = _Progress(
            name, len(units), self.result.stats, self._progress_enabled(), self.position
        )
        # a bounded number of topics in flight keeps memory flat; requests are bounded by the client
        gate = asyncio.Semaphore(max(2, opts.concurrency))

        async def one(unit: TopicUnit) -> None:
            async with gate:
                await self._topic(unit)
            assert self.progress is not None
            self.progress.topic_done()

        await asyncio.gather(*(one(u) for u in units))

    def _progress_enabled(self) -> bool:
        if self.options.progress is not None:
            return self.options.progress
        return sys.stderr.isatty()

    async def _list_units(self, client: AdminClient) -> list[TopicUnit]:
        opts = self.options
        literal = opts.tenants and not any(_GLOB_CHARS.search(t) for t in opts.tenants)
        if literal:
            tenants = sorted(set(opts.tenants))
        else:
            listed = await client.get_json("/admin/v2/tenants", "tenants")
            tenants = sorted(t for t in listed or [] if isinstance(t, str) and opts.wants(t))
        namespaces: list[str] = []
        for tenant in tenants:
            found = await self._optional(
                f"namespaces of tenant {tenant}",
                client.get_json(f"/admin/v2/namespaces/{encode_segment(tenant)}", "namespaces"),
            )
            namespaces += sorted(n for n in found or [] if isinstance(n, str) and opts.wants(tenant, n))
        unit_lists = await asyncio.gather(*(self._namespace(client, ns) for ns in namespaces))
        return [u for units in unit_lists for u in units]

    async def _namespace(self, client: AdminClient, namespace: str) -> list[TopicUnit]:
        assert self.folder is not None
        tenant, ns = namespace.split("/", 1)
        base = f"/admin/v2/namespaces/{encode_segment(tenant)}/{encode_segment(ns)}"
        quotas = await self._optional(
            f"backlog quotas of namespace {namespace}",
            client.get_json(f"{base}/backlogQuotaMap", "namespace-backlog-quota", accept_404=True),
        )
        if quotas is not None:
            atomic_json(
                self.folder / "backlog-quotas" / f"{encode_name(namespace)}.json", quotas, pretty=True
            )
        topics_path = f"/admin/v2/persistent/{encode_segment(tenant)}/{encode_segment(ns)}"
        listed, partitioned = await asyncio.gather(
            self._optional(f"topics of {namespace}", client.get_json(topics_path, "topics", accept_404=True)),
            self._optional(
                f"partitioned topics of {namespace}",
                client.get_json(f"{topics_path}/partitioned", "topics", accept_404=True),
            ),
        )
        bases = sorted({t for t in partitioned or [] if isinstance(t, str) and t.startswith("persistent://")})
        base_set = set(bases)
        units = [TopicUnit(t, tenant, namespace, t.rsplit("/", 1)[1], True) for t in bases]
        for topic in sorted(
            {t for t in listed or [] if isinstance(t, str) and t.startswith("persistent://")}
        ):
            match = _PARTITION_RE.match(topic)
            if match is not None and match.group(1) in base_set:
                continue  # exported with its partitioned topic
            units.append(TopicUnit(topic, tenant, namespace, topic.rsplit("/", 1)[1], False))
        return [u for u in units if self.options.wants(tenant, namespace, u.topic)]

    # --- topic level --------------------------------------------------------------------------------

    async def _topic(self, unit: TopicUnit) -> None:
        assert self.client is not None and self.folder is not None and self.result.name is not None
        previous = self.done.get((self.result.name, unit.topic))
        if previous is not None and previous.get("status") in ("done", "skipped"):
            self._restore(unit, previous)
            return
        client = self.client
        path = self._topic_path(unit)
        name = encode_name(unit.topic)
        try:
            if unit.partitioned:
                internal_call = client.get_json(
                    f"{path}/partitioned-internalStats", "internal-stats", accept_404=True
                )
                stats_call = client.get_json(
                    f"{path}/partitioned-stats", "stats", {"perPartition": "true"}, accept_404=True
                )
            else:
                internal_call = client.get_json(f"{path}/internalStats", "internal-stats", accept_404=True)
                stats_call = client.get_json(f"{path}/stats", "stats", accept_404=True)
            calls: list[Awaitable[Any]] = [internal_call, stats_call]
            if self.options.topic_policies:
                calls.append(self._topic_quotas(client, path))
            if self.options.schemas:
                calls.append(
                    client.get_json(
                        f"/admin/v2/schemas/{encode_segment(unit.tenant)}/"
                        f"{encode_segment(unit.namespace.split('/', 1)[1])}/"
                        f"{encode_segment(unit.local)}/schemas",
                        "schemas",
                        accept_404=True,
                    )
                )
            answers = await asyncio.gather(*calls)
        except AdminError as exc:
            self._fail(f"topic {unit.topic}", exc)
            self.journal.append({"cluster": self.result.name, "topic": unit.topic, "status": "failed"})
            return
        internal, stats = answers[0], answers[1]
        if internal is None or stats is None:
            reason = "404: the topic was deleted between listing and fetching"
            self.result.skipped[unit.topic] = reason
            self.journal.append(
                {"cluster": self.result.name, "topic": unit.topic, "status": "skipped", "reason": reason}
            )
            return
        atomic_json(self.folder / "stats-internal" / f"{name}.json", internal, pretty=True)
        atomic_json(self.folder / "stats" / f"{name}.json", stats, pretty=True)
        extra = list(answers[2:])
        if self.options.topic_policies:
            quotas = extra.pop(0)
            if isinstance(quotas, Mapping) and quotas:
                atomic_json(self.folder / "backlog-quotas" / f"{name}.json", quotas, pretty=True)
        if self.options.schemas:
            schemas = extra.pop(0)
            if schemas is not None:
                atomic_json(self.folder / "schemas" / f"{name}.json", schemas, pretty=True)
        # entries, per managed ledger (each partition is one)
        docs: dict[str, Any] = {}
        if unit.partitioned:
            partitions = internal.get("partitions") if isinstance(internal, Mapping) else None
            for partition, doc in sorted((partitions or {}).items()):
                docs[str(partition)] = doc
        else:
            docs[unit.topic] = internal
        incomplete: dict[str, list[dict[str, str]]] = {}
        fetch_failed = False
        entries = 0
        for topic, doc in docs.items():
            plan = plan_entries(
                doc if isinstance(doc, Mapping) else {},
                self.options.entries,
                self.options.max_entries_per_topic,
            )
            written, missing, failed = await self._entries(unit, topic, plan)
            entries += written
            fetch_failed = fetch_failed or failed
            if missing:
                incomplete[topic] = missing
        self.result.entries += entries
        self.result.incomplete.update(incomplete)
        self.result.topics_done += 1
        self.journal.append(
            {
                "cluster": self.result.name,
                "topic": unit.topic,
                "status": "failed" if fetch_failed else "done",
                "entries": entries,
                "incomplete": incomplete,
            }
        )

    def _restore(self, unit: TopicUnit, previous: Mapping[str, Any]) -> None:
        """A topic an earlier run of this export finished: counted, not fetched again."""
        if previous.get("status") == "skipped":
            self.result.skipped[unit.topic] = str(previous.get("reason") or "skipped")
            return
        self.result.topics_done += 1
        self.result.topics_resumed += 1
        self.result.entries += int(previous.get("entries") or 0)
        incomplete = previous.get("incomplete")
        if isinstance(incomplete, Mapping):
            self.result.incomplete.update({str(k): list(v) for k, v in incomplete.items()})

    async def _topic_quotas(self, client: AdminClient, path: str) -> Any:
        """The topic's own backlog quotas (``applied=false``); none when topic policies are disabled."""
        try:
            return await client.get_json(
                f"{path}/backlogQuotaMap", "topic-backlog-quota", {"applied": "false"}, accept_404=True
            )
        except AdminError as exc:
            if exc.status == 405:  # topicLevelPoliciesEnabled=false: the broker has no topic policies
                return None
            raise

    async def _entries(
        self, unit: TopicUnit, topic: str, plan: EntryPlan
    ) -> tuple[int, list[dict[str, str]], bool]:
        """Fetch the planned entries of one managed ledger into ``rest-entries/``; returns (written,
        missing ranges, whether a fetch failed)."""
        assert self.client is not None and self.folder is not None and self.progress is not None
        missing = [
            {
                "from": fmt((r.ledger_id, r.first)),
                "to": fmt((r.ledger_id, r.last)),
                "reason": f"left out by --max-entries-per-topic {self.options.max_entries_per_topic}",
            }
            for r in plan.capped
        ]
        if not plan.ranges:
            return 0, missing, False
        client = self.client
        local = topic.rsplit("/", 1)[1]
        base = self._topic_path(unit, local)
        out = StreamingFile(self.folder / "rest-entries" / f"{encode_name(topic)}.jsonl")
        failed: dict[str, list[tuple[int, int]]] = {}
        window: deque[asyncio.Task[tuple[int, int, Any]]] = deque()
        width = max(2, self.options.concurrency * 2)

        async def fetch(ledger: int, entry: int) -> tuple[int, int, Any]:
            try:
                resp = await client.get(f"{base}/ledger/{ledger}/entry/{entry}", "entry", accept_404=True)
            except AdminError as exc:
                return ledger, entry, exc
            return ledger, entry, resp

        def positions() -> Any:
            for r in plan.ranges:
                yield from r.positions()

        written = 0
        try:
            source = positions()
            for ledger, entry in source:
                window.append(asyncio.ensure_future(fetch(ledger, entry)))
                if len(window) >= width:
                    written += self._write_entry(out, topic, await window.popleft(), failed)
            while window:
                written += self._write_entry(out, topic, await window.popleft(), failed)
            if written:
                out.commit()
            else:
                out.discard()
        except BaseException:
            for task in window:
                task.cancel()
            out.discard()
            raise
        for reason, positions_failed in failed.items():
            for first, last in merge_positions(positions_failed):
                missing.append({"from": fmt(first), "to": fmt(last), "reason": reason})
        fetch_failed = any(not reason.startswith("404") for reason in failed)
        if fetch_failed:
            self.result.failures.append(
                f"topic {topic}: {sum(len(v) for v in failed.values())} entr(y/ies) could not be fetched "
                f"({'; '.join(sorted(failed))[:300]})"
            )
        return written, missing, fetch_failed

    def _write_entry(
        self,
        out: StreamingFile,
        topic: str,
        done: tuple[int, int, Any],
        failed: dict[str, list[tuple[int, int]]],
    ) -> int:
        ledger, entry, answer = done
        assert self.progress is not None
        if isinstance(answer, AdminError) or answer.status == 404:
            reason = (
                "404: entry not found (trimmed or deleted since the listing)"
                if not isinstance(answer, AdminError) or answer.not_found
                else f"fetch failed: {answer}"
            )
            failed.setdefault(reason[:200], []).append((ledger, entry))
            return 0
        headers = [[k, v] for k, v in answer.headers if k.lower().startswith(_ENTRY_HEADER_PREFIX)]
        out.write_line(
            dumps(
                {
                    "topic": topic,
                    "ledger_id": ledger,
                    "entry_id": entry,
                    "headers": headers,
                    "body": base64.b64encode(answer.body).decode("ascii"),
                }
            )
        )
        self.progress.entry_done()
        return 1


# --- the export as a whole ---------------------------------------------------------------------------


def _prepare(options: ExportOptions) -> tuple[str, str]:
    """Check the output folder; returns (export_id, exported_at) - new, or those of the export resumed."""
    out = options.out
    state_path = out / JOURNAL_DIR / "state.json"
    if options.resume:
        if not state_path.is_file():
            raise ConfigError(
                f"--resume: {out} holds no export to resume ({state_path} is missing); start a new export "
                "into an empty folder"
            )
        import json

        state = json.loads(state_path.read_text(encoding="utf-8"))
        for tmp in clean_temporaries(out):
            log.info("removed %s left by the interrupted run", tmp)
        return str(state["export_id"]), str(state["exported_at"])
    if not folder_is_empty(out):
        raise ConfigError(
            f"--out {out} is not empty: export into a new folder, or pass --resume to continue an "
            "interrupted export there"
        )
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    export_id = options.export_id or f"export-{now:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"
    exported_at = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    atomic_json(state_path, {"export_id": export_id, "exported_at": exported_at}, fsync=True)
    return export_id, exported_at


def _manifest(
    options: ExportOptions, export_id: str, exported_at: str, results: list[ClusterResult]
) -> dict[str, Any]:
    clusters: dict[str, Any] = {}
    for r in results:
        if r.name is None:
            continue
        section: dict[str, Any] = {
            "admin_url": redact_url(r.target_url),
            "broker_version": r.broker_version,
            "topics": r.topics_done,
            "entries": {
                "mode": options.entries,
                "max_entries_per_topic": options.max_entries_per_topic or None,
                "incomplete_topics": dict(sorted(r.incomplete.items())),
            },
            "skipped_topics": dict(sorted(r.skipped.items())),
            "failures": list(r.failures),
        }
        version = modelled_version(r.broker_version or "")
        if version is not None:
            section["pulsar_version"] = version
        clusters[r.name] = section
    return {
        "export_id": export_id,
        "exported_at": exported_at,
        "exporter": {"name": "pulsar-analytics export", "version": __version__, "entries": options.entries},
        "clusters": clusters,
    }


async def export_async(options: ExportOptions) -> ExportSummary:
    """Run the export (see the module docstring); never raises for a broker's failure, only reports it."""
    started = time.monotonic()
    export_id, exported_at = _prepare(options)
    journal = Journal(options.out)
    done = journal.load() if options.resume else {}
    exports = [
        ClusterExport(options, t.admin_url, t.name, journal, done, i) for i, t in enumerate(options.targets)
    ]
    try:
        results = list(await asyncio.gather(*(e.run() for e in exports)))
    finally:
        journal.close()
    names = [r.name for r in results if r.name]
    if len(set(names)) != len(names):
        raise PulsarAnalyticsError(
            f"two admin URLs answered the same cluster name ({names}); name them with --cluster"
        )
    atomic_json(
        options.out / "manifest.json",
        _manifest(options, export_id, exported_at, results),
        fsync=True,
        pretty=True,
    )
    return ExportSummary(options.out, export_id, exported_at, results, time.monotonic() - started)


def run_export(options: ExportOptions) -> ExportSummary:
    """Plain-Python entry point (no Spark): the export of every cluster of ``options``."""
    return asyncio.run(export_async(options))


def run_with(options: ExportOptions, hook: Callable[[ExportSummary], None] | None = None) -> int:
    """Run, print the summary, return the process exit status (0 ok, 1 anything failed)."""
    summary = run_export(options)
    if hook is not None:
        hook(summary)
    print(summary.format())
    return 1 if summary.failed else 0


__all__ = [
    "ClusterResult",
    "EntryRange",
    "ExportSummary",
    "export_async",
    "modelled_version",
    "run_export",
    "run_with",
]
