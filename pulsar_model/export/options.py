"""Validated options of ``pulsar-analytics export`` (parsed once in the CLI, frozen afterwards)."""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal
from urllib.parse import urlsplit

from pulsar_model.errors import ConfigError

EntriesMode = Literal["none", "backlog", "all"]
ENTRIES_MODES: Final = ("none", "backlog", "all")
#: Environment variables read for the token when neither --auth-token nor --auth-token-file is given.
TOKEN_ENV_VARS: Final = ("PULSAR_AUTH_TOKEN", "PULSAR_ANALYTICS_AUTH_TOKEN")
#: Polite defaults: brokers serve production traffic while they answer the export.
DEFAULT_CONCURRENCY: Final = 4
DEFAULT_MAX_RATE: Final = 100.0
DEFAULT_MAX_ENTRIES_PER_TOPIC: Final = 100_000


@dataclass(frozen=True)
class ClusterTarget:
    """One cluster to export: its admin URL and, optionally, its name (else read from the cluster)."""

    admin_url: str
    name: str | None = None


@dataclass(frozen=True)
class TlsOptions:
    trust_certs: Path | None = None
    cert: Path | None = None
    key: Path | None = None
    insecure: bool = False


@dataclass(frozen=True)
class ExportOptions:
    """Everything ``export`` needs; the token is held here and nowhere else (never written or logged)."""

    targets: tuple[ClusterTarget, ...]
    out: Path
    entries: EntriesMode = "backlog"
    max_entries_per_topic: int | None = DEFAULT_MAX_ENTRIES_PER_TOPIC
    concurrency: int = DEFAULT_CONCURRENCY
    max_rate: float | None = DEFAULT_MAX_RATE
    tenants: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()
    topics: tuple[str, ...] = ()
    token: str | None = field(default=None, repr=False)
    tls: TlsOptions = TlsOptions()
    timeout_seconds: float = 30.0
    retries: int = 5
    retry_backoff_seconds: float = 0.5
    resume: bool = False
    topic_policies: bool = True
    schemas: bool = True
    progress: bool | None = None  # None: when stderr is a terminal
    export_id: str | None = None

    def __post_init__(self) -> None:
        if not self.targets:
            raise ConfigError("export needs at least one --admin-url, e.g. --admin-url http://broker:8080")
        for target in self.targets:
            parts = urlsplit(target.admin_url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ConfigError(
                    f"--admin-url {redact_url(target.admin_url)!r} is not an http(s) URL; "
                    "write it like https://broker.example.com:8443"
                )
            if parts.username or parts.password:
                raise ConfigError(
                    "--admin-url must not carry credentials; pass the token with --auth-token-file or the "
                    f"{TOKEN_ENV_VARS[0]} environment variable"
                )
        if self.entries not in ENTRIES_MODES:
            raise ConfigError(f"--entries {self.entries!r} must be one of {', '.join(ENTRIES_MODES)}")
        if self.max_entries_per_topic is not None and self.max_entries_per_topic < 0:
            raise ConfigError(
                f"--max-entries-per-topic {self.max_entries_per_topic} must be >= 0 (0 = no cap)"
            )
        if self.concurrency < 1:
            raise ConfigError(f"--concurrency {self.concurrency} must be at least 1")
        if self.max_rate is not None and self.max_rate <= 0:
            raise ConfigError(
                f"--max-rate {self.max_rate} must be > 0 requests per second (0 is not allowed)"
            )
        if self.timeout_seconds <= 0 or self.retries < 0 or self.retry_backoff_seconds < 0:
            raise ConfigError("--timeout must be > 0, --retries and the backoff >= 0")
        if (self.tls.cert is None) != (self.tls.key is None):
            raise ConfigError("--tls-cert and --tls-key go together (the client certificate and its key)")
        names = [t.name for t in self.targets if t.name]
        if len(set(names)) != len(names):
            raise ConfigError(f"--cluster names {names} must be distinct: each cluster gets its own folder")

    def wants(self, tenant: str, namespace: str | None = None, topic: str | None = None) -> bool:
        """Whether the tenant / namespace (``tenant/ns``) / topic (full name) passes the glob filters."""
        if self.tenants and not any(fnmatch.fnmatchcase(tenant, g) for g in self.tenants):
            return False
        if (
            namespace is not None
            and self.namespaces
            and not any(fnmatch.fnmatchcase(namespace, g) for g in self.namespaces)
        ):
            return False
        if topic is not None and self.topics:
            short = topic.split("://", 1)[-1]
            return any(fnmatch.fnmatchcase(topic, g) or fnmatch.fnmatchcase(short, g) for g in self.topics)
        return True


def resolve_token(token: str | None, token_file: str | None) -> str | None:
    """The token from the flag, else the file, else the environment (:data:`TOKEN_ENV_VARS`)."""
    if token and token_file:
        raise ConfigError("give the token once: --auth-token or --auth-token-file, not both")
    if token:
        return token.strip()
    if token_file:
        path = Path(token_file)
        try:
            text = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(f"--auth-token-file {token_file!r} cannot be read: {exc.strerror}") from None
        if text.startswith("token:"):  # pulsar's client.conf style "token:<jwt>"
            text = text[len("token:") :].strip()
        if not text:
            raise ConfigError(f"--auth-token-file {token_file!r} is empty")
        return text
    for name in TOKEN_ENV_VARS:
        value = os.environ.get(name)
        if value and value.strip():
            return value.strip()
    return None


def redact_url(url: str) -> str:
    """``url`` without user info and query (where a token could hide); for messages and logs."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return f"{parts.scheme}://{host}{parts.path}"
