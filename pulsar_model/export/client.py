"""A polite, robust HTTP client for Pulsar's admin REST API v2 (driver-side, asyncio + aiohttp).

* One connection pool per export (keep-alive, at most ``concurrency`` connections per broker), at most
  ``concurrency`` requests in flight and at most ``max_rate`` started per second (brokers serve
  production traffic while they answer).
* Redirects: topic operations answer ``307 Temporary Redirect`` when another broker owns the topic
  (``AdminResource.validateTopicOwnership`` -> ``PulsarWebResource``'s redirect to the owner with
  ``authoritative=true``); they are followed here, keeping the ``Authorization`` header, because
  aiohttp drops it on a redirect to another host. A redirect from https to http is refused (it
  would send the token in clear text).
* Retries with exponential backoff and jitter for 429, 500, 502, 503, 504, timeouts and dropped
  connections (``Retry-After`` honoured), bounded by ``retries``; anything else fails at once.
* 401/403 become :class:`AdminError` naming the permission the endpoint checks (``PERMISSIONS``).
* The token goes into the ``Authorization`` header only: never into URLs, messages or logs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import quote, urlencode, urljoin, urlsplit

import aiohttp

from pulsar_model.errors import PulsarAnalyticsError
from pulsar_model.export.options import ExportOptions, redact_url

log = logging.getLogger(__name__)

RETRY_STATUSES: Final = frozenset({429, 500, 502, 503, 504})
REDIRECT_STATUSES: Final = frozenset({301, 302, 303, 307, 308})
MAX_REDIRECTS: Final = 5
MAX_BACKOFF_SECONDS: Final = 30.0

#: What each endpoint checks, for 401/403 messages (the broker's authorization call in parentheses).
PERMISSIONS: Final = {
    "version": "an authenticated role (BrokersBase.version checks no permission)",
    "runtime-config": "super-user access (BrokersBase.getRuntimeConfiguration: validateSuperUserAccess)",
    "clusters": "the clusters list (ClustersBase.getClusters; super-user on some versions)",
    "tenants": "super-user access to list tenants (TenantsBase.getTenants), or name the tenants with "
    "--tenant without wildcards",
    "namespaces": "tenant-admin on the tenant (NamespacesBase.getTenantNamespaces: TenantOperation."
    "LIST_NAMESPACES)",
    "topics": "namespace GET_TOPICS (tenant-admin, or produce/consume on the namespace)",
    "namespace-backlog-quota": "namespace policy BACKLOG READ (tenant-admin)",
    "topic-backlog-quota": "topic policy BACKLOG READ (tenant-admin)",
    "internal-stats": "topic GET_STATS (tenant-admin, or produce/consume on the topic)",
    "stats": "topic GET_STATS (tenant-admin, or produce/consume on the topic)",
    "schemas": "topic GET_SCHEMA (tenant-admin, or produce/consume on the topic)",
    "partitions": "topic GET_METADATA (tenant-admin, or produce/consume on the topic)",
    "entry": "topic PEEK_MESSAGES = consume permission (PersistentTopicsBase.internalGetMessageById)",
}


class AdminError(PulsarAnalyticsError):
    """A request that failed for good: ``status`` (None: no HTTP answer), the path, the broker's reason."""

    def __init__(self, status: int | None, path: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.path = path

    @property
    def not_found(self) -> bool:
        return self.status == 404


@dataclass
class Response:
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8"))


@dataclass
class RequestStats:
    """Counters shared by one cluster's requests (progress bar, summary)."""

    requests: int = 0
    retries: int = 0
    redirects: int = 0
    failures: int = 0
    bytes_in: int = 0
    started: float = field(default_factory=time.monotonic)

    def rate(self) -> float:
        elapsed = time.monotonic() - self.started
        return self.requests / elapsed if elapsed > 0 else 0.0


class RateLimiter:
    """At most ``rate`` request starts per second: each caller books the next free slot."""

    def __init__(self, rate: float | None) -> None:
        self.interval = 0.0 if rate is None else 1.0 / rate
        self.next_slot = 0.0

    async def acquire(self) -> None:
        if self.interval <= 0:
            return
        now = time.monotonic()
        slot = max(now, self.next_slot)
        self.next_slot = slot + self.interval
        if slot > now:
            await asyncio.sleep(slot - now)


def ssl_context(options: ExportOptions) -> ssl.SSLContext:
    """TLS settings: trusted CA file, client certificate, or the explicit insecure switch."""
    tls = options.tls
    ctx = ssl.create_default_context(cafile=str(tls.trust_certs) if tls.trust_certs else None)
    if tls.cert is not None and tls.key is not None:
        ctx.load_cert_chain(str(tls.cert), str(tls.key))
    if tls.insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def encode_segment(value: str) -> str:
    """One URL path segment (tenant, namespace, local topic name) percent-encoded, '/' included."""
    return quote(value, safe="")


def _reason(body: bytes) -> str:
    """The broker's error text: RestException bodies are ``{"reason": "..."}``."""
    text = body[:2000].decode("utf-8", "replace").strip()
    try:
        value = json.loads(text)
    except ValueError:
        return text[:300]
    if isinstance(value, Mapping) and isinstance(value.get("reason"), str):
        return str(value["reason"])[:300]
    return text[:300]


class AdminClient:
    """Requests to one cluster's admin API (``base_url`` like ``https://broker:8443``)."""

    def __init__(
        self,
        base_url: str,
        options: ExportOptions,
        stats: RequestStats,
        semaphore: asyncio.Semaphore,
        limiter: RateLimiter,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.options = options
        self.stats = stats
        self.semaphore = semaphore
        self.limiter = limiter
        self._session: aiohttp.ClientSession | None = None
        self._auth = {"Authorization": f"Bearer {options.token}"} if options.token else {}

    async def __aenter__(self) -> AdminClient:
        connector = aiohttp.TCPConnector(
            limit=self.options.concurrency * 2,
            limit_per_host=self.options.concurrency,
            ssl=ssl_context(self.options) if self.base_url.startswith("https") else False,
            keepalive_timeout=30,
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=self.options.timeout_seconds),
            headers={"Accept": "application/json", "User-Agent": "pulsar-analytics-export"},
            auto_decompress=True,
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    def _url(self, path: str, params: Mapping[str, str] | None) -> str:
        url = self.base_url + path
        if params:
            url += "?" + urlencode(params)
        return url

    def _backoff(self, attempt: int, retry_after: str | None) -> float:
        if retry_after:
            try:
                return min(MAX_BACKOFF_SECONDS, max(0.0, float(retry_after)))
            except ValueError:
                pass
        base = self.options.retry_backoff_seconds * float(2**attempt)
        return float(min(MAX_BACKOFF_SECONDS, base * (0.5 + random.random() / 2)))

    async def get(
        self,
        path: str,
        what: str,
        params: Mapping[str, str] | None = None,
        *,
        accept_404: bool = False,
    ) -> Response:
        """GET ``path``; returns 2xx responses (and 404 with ``accept_404``), raises :class:`AdminError`."""
        assert self._session is not None, "use AdminClient as an async context manager"
        url = self._url(path, params)
        attempt = 0
        redirects = 0
        last_problem = ""
        while True:
            await self.limiter.acquire()
            status: int | None = None
            async with self.semaphore:
                self.stats.requests += 1
                try:
                    async with self._session.get(url, headers=self._auth, allow_redirects=False) as resp:
                        body = await resp.read()
                        status = resp.status
                        raw_headers = [
                            (k.decode("latin-1"), v.decode("latin-1")) for k, v in resp.raw_headers
                        ]
                        location = resp.headers.get("Location")
                        retry_after = resp.headers.get("Retry-After")
                except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                    last_problem = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                    retry_after = None
            if status is not None:
                self.stats.bytes_in += len(body)
                if 200 <= status < 300 or (accept_404 and status == 404):
                    return Response(status, raw_headers, body)
                if status in REDIRECT_STATUSES and location:
                    redirects += 1
                    target = urljoin(url, location)
                    if redirects > MAX_REDIRECTS:
                        raise self._fail(
                            None, path, f"more than {MAX_REDIRECTS} redirects (last to {redact_url(target)})"
                        )
                    if urlsplit(url).scheme == "https" and urlsplit(target).scheme != "https":
                        raise self._fail(
                            status,
                            path,
                            f"refused a redirect from https to {redact_url(target)} "
                            "(it would send the token in clear text)",
                        )
                    self.stats.redirects += 1
                    url = target
                    continue
                if status in (401, 403):
                    raise self._fail(status, path, self._denied(status, path, what, body))
                if status not in RETRY_STATUSES:
                    raise self._fail(status, path, f"HTTP {status} on GET {path}: {_reason(body)}")
                last_problem = f"HTTP {status}: {_reason(body)}"
            if attempt >= self.options.retries:
                raise self._fail(
                    status, path, f"GET {path} failed after {attempt + 1} attempt(s): {last_problem}"
                )
            delay = self._backoff(attempt, retry_after)
            attempt += 1
            self.stats.retries += 1
            log.debug("retrying GET %s in %.2fs after %s", path, delay, last_problem)
            await asyncio.sleep(delay)

    def _fail(self, status: int | None, path: str, message: str) -> AdminError:
        self.stats.failures += 1
        return AdminError(status, path, message)

    def _denied(self, status: int, path: str, what: str, body: bytes) -> str:
        needed = PERMISSIONS.get(what, "permission for this admin operation")
        if status == 401:
            credential = "the token was rejected" if self.options.token else "no token was given"
            return (
                f"401 Unauthorized on GET {path}: the cluster requires authentication and {credential}; "
                "pass a valid token with --auth-token-file or the PULSAR_AUTH_TOKEN environment variable "
                f"(broker says: {_reason(body)})"
            )
        return f"403 Forbidden on GET {path}: the token's role lacks {needed} (broker says: {_reason(body)})"

    async def get_json(
        self, path: str, what: str, params: Mapping[str, str] | None = None, *, accept_404: bool = False
    ) -> Any:
        """The JSON body of a GET (None for an accepted 404)."""
        resp = await self.get(path, what, params, accept_404=accept_404)
        if resp.status == 404:
            return None
        try:
            return resp.json()
        except ValueError as exc:
            raise self._fail(resp.status, path, f"GET {path} did not answer JSON: {exc}") from None

    async def get_text(self, path: str, what: str) -> str:
        """A plain-text body (``brokers/version`` answers the bare version, some proxies quote it)."""
        resp = await self.get(path, what)
        text = resp.body.decode("utf-8", "replace").strip()
        if text.startswith('"') and text.endswith('"'):
            try:
                value = json.loads(text)
            except ValueError:
                return text
            return str(value)
        return text
