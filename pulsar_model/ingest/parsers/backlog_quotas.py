"""Parser of backlog-quota policies at broker, namespace and topic level (docs §3.2, §3.3, §10.4).

One record (one file or JSON Lines line) gives ``backlog_quotas`` rows, one per (level, scope,
quota_type). The level comes from the file name (``broker``, URL-encoded ``tenant/namespace`` or full
topic name) or the envelope (``"broker": true``, ``"namespace"``, ``"topic"``).

Shapes read (``source_shape``):

* ``broker_config`` - the broker's runtime configuration map (``pulsar-admin brokers
  get-runtime-config``: every value a string). Missing keys take the docs §3.2 defaults. The broker
  builds one default quota for both types (size limit, time limit and policy together), so both
  ``destination_storage`` and ``message_age`` rows carry the same values.
* ``limit_only`` - ``{"limit": L, "policy": P}`` (before the time quota).
* ``limit_size_time`` - ``{"limitSize", "limitTime", "policy"}`` (≈2.9.0) or 2.9.1+ with the deprecated
  ``limit`` alias (``limitSize`` wins when non-null, else ``limit``).
* ``plain_string`` - the Java ``toString`` of each quota, as ``pulsar-admin namespaces|topics
  get-backlog-quotas`` prints a map (``CliCommand.print(Map)`` writes ``key + "    " + value`` lines):
  ``BacklogQuota{limit=..., policy=...}`` (Guava toStringHelper, ≤2.8), ``BacklogQuota{limitSize=...,
  limitTime=..., policy=...}``, ``BacklogQuotaImpl(limitSize=..., limitTime=..., policy=...)`` and
  ``BacklogQuotaImpl(limit=..., limitSize=null, limitTime=..., policy=...)`` (Lombok, 2.8+). Read from
  such a text file, or from a JSON map whose values are those strings.

Namespace policies (``{"backlog_quota_map": {...}}``, ``pulsar-admin namespaces policies``) are read
too. An empty map gives no rows (the record is accepted).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from pulsar_model.domain.topic_names import is_full_topic_name
from pulsar_model.ingest.parsers.common import (
    BAD_VALUE,
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    MISSING_TOPIC,
    UNKNOWN_QUOTA_SHAPE,
    Fields,
    Record,
    Row,
    Rows,
    json_type,
    show,
)

#: BacklogQuotaType (docs §3.3).
QUOTA_TYPES: Final = ("destination_storage", "message_age")
#: RetentionPolicy (docs §3.3).
RETENTION_POLICIES: Final = frozenset(
    {"producer_request_hold", "producer_exception", "consumer_backlog_eviction"}
)
#: Namespace policies expose the quota map under this key (docs §3.3).
POLICIES_MAP_KEY: Final = "backlog_quota_map"
#: backlogQuotaDefaultLimitGB wins when > 0: limitSize = (long)(GB * 1024^3) (docs §3.2).
BYTES_IN_GIGABYTE: Final = 1024**3

# broker.conf keys and their docs §3.2 defaults
LIMIT_BYTES_KEY: Final = "backlogQuotaDefaultLimitBytes"
LIMIT_GB_KEY: Final = "backlogQuotaDefaultLimitGB"
LIMIT_SECOND_KEY: Final = "backlogQuotaDefaultLimitSecond"
POLICY_KEY: Final = "backlogQuotaDefaultRetentionPolicy"
PRECISE_KEY: Final = "preciseTimeBasedBacklogQuotaCheck"
INTERVAL_KEY: Final = "backlogQuotaCheckIntervalInSeconds"
ENABLED_KEY: Final = "backlogQuotaCheckEnabled"
BROKER_DEFAULTS: Final[Mapping[str, Any]] = {
    LIMIT_BYTES_KEY: -1,  # -1 = unlimited
    LIMIT_GB_KEY: -1.0,  # deprecated; 50 in 1.x/2.0, -1 later
    LIMIT_SECOND_KEY: -1,
    POLICY_KEY: "producer_request_hold",
    PRECISE_KEY: False,
    INTERVAL_KEY: 60,
    ENABLED_KEY: True,
}

_LONG_TEXT: Final = re.compile(r"[+-]?[0-9]+")
_DOUBLE_TEXT: Final = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[dDfF]?")
_TO_STRING: Final = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_.$]*)\s*[{(](.*)[})]\s*", re.DOTALL)
_CLI_LINE: Final = re.compile(r"\s*(\S+)\s+(\S.*?)\s*")
_NAMESPACE_RE: Final = re.compile(r"[^/]+/[^/]+(?:/[^/]+)?")  # tenant/ns (or legacy tenant/cluster/ns)
_QUOTA_FIELDS: Final = frozenset({"limit", "limitSize", "limitTime", "policy"})


def parse_cli_text(text: str) -> dict[str, str] | None:
    """``pulsar-admin ... get-backlog-quotas`` text output (``type    toString`` lines) as a map.

    Empty output is an empty map (no quota set). Returns None when the text is not such output.
    """
    result: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        match = _CLI_LINE.fullmatch(line)
        if match is None or match.group(1) not in QUOTA_TYPES or match.group(1) in result:
            return None
        result[match.group(1)] = match.group(2)
    return result


def parse_backlog_quotas(payload: Any, record: Record) -> Rows | None:
    """Rows of one backlog-quota record (broker config map, or a namespace/topic quota map)."""
    level, scope = _level(record)
    if level == "broker":
        rows = _broker(payload, record)
    elif level is not None:
        rows = _quota_map(payload, record)
    else:
        _quota_map(payload, record)  # collect the content's problems too
        rows = None
    if not record.ok or rows is None or level is None or scope is None:
        return None
    topic = scope if level == "topic" else None
    for row in rows:
        row.update(
            {
                "cluster": record.ctx.cluster,
                "topic": topic,
                "level": level,
                "scope": scope,
                "source_file": record.ctx.source_file,
            }
        )
    return {"backlog_quotas": rows}


def _level(record: Record) -> tuple[str | None, str | None]:
    """(level, scope) from the envelope or the file-name hint."""
    envelope = record.envelope
    if envelope is not None:
        named = [key for key in ("broker", "namespace", "topic") if envelope.get(key) not in (None, False)]
        if len(named) > 1:
            record.problem(
                BAD_VALUE,
                f"the envelope names {' and '.join(named)}; name exactly one of broker, namespace, topic",
            )
            return None, None
        if not named:
            record.problem(
                MISSING_TOPIC,
                'the envelope names no scope; add "broker": true, "namespace": "tenant/ns" or "topic": "persistent://..."',
            )
            return None, None
        key = named[0]
        value = envelope[key]
        if key == "broker":
            if value is not True:
                record.problem(BAD_VALUE, f'envelope "broker" {show(value)} must be true')
                return None, None
            return "broker", record.ctx.cluster
        return _scope_from_text(record, value, f"envelope {key}", expect=key)
    hint = record.hint
    if hint is None:
        record.problem(
            MISSING_TOPIC,
            "the file name names no scope; name quota files broker.json, <URL-encoded tenant/namespace>.json "
            "or <URL-encoded full topic>.json",
        )
        return None, None
    if hint.lower() == "broker":
        return "broker", record.ctx.cluster
    return _scope_from_text(record, hint, "file name", expect=None)


def _scope_from_text(
    record: Record, value: Any, source: str, expect: str | None
) -> tuple[str | None, str | None]:
    if not isinstance(value, str) or not value:
        record.problem(MISSING_TOPIC, f"{source} {show(value)} is not a name")
        return None, None
    if "://" in value:
        if expect == "namespace" or not is_full_topic_name(value):
            wanted = "namespace" if expect == "namespace" else "full topic name"
            record.problem(
                MISSING_TOPIC,
                f"{source} {show(value)} is not a {wanted}; "
                "use tenant/namespace or persistent://tenant/namespace/topic",
            )
            return None, None
        record.topic = value
        return "topic", value
    if expect == "topic" or not _NAMESPACE_RE.fullmatch(value):
        record.problem(
            MISSING_TOPIC,
            f"{source} {show(value)} names neither the broker, a tenant/namespace nor a full topic name",
        )
        return None, None
    return "namespace", value


# --- broker level -----------------------------------------------------------------------------------
def _broker(payload: Any, record: Record) -> list[Row] | None:
    if not isinstance(payload, dict):
        record.problem(
            UNKNOWN_QUOTA_SHAPE,
            f"broker-level quota record is a JSON {json_type(payload)}; export the broker runtime "
            "configuration map (`pulsar-admin brokers get-runtime-config`)",
        )
        return None
    if any(key in payload for key in (*QUOTA_TYPES, POLICIES_MAP_KEY)):
        record.problem(
            UNKNOWN_QUOTA_SHAPE,
            "broker-level record holds a namespace-style quota map; broker.json must be the broker runtime "
            "configuration map (`pulsar-admin brokers get-runtime-config`)",
        )
        return None
    values: dict[str, Any] = {}
    for key, default in BROKER_DEFAULTS.items():
        if payload.get(key) is None:
            record.note(f"broker_default:{key}")
            values[key] = default
            continue
        values[key] = _config_value(record, key, payload[key], default)
    if not record.ok:
        return None
    gigabytes = values[LIMIT_GB_KEY]
    limit_size = int(gigabytes * BYTES_IN_GIGABYTE) if gigabytes > 0 else values[LIMIT_BYTES_KEY]
    return [
        {
            "quota_type": quota_type,
            "limit_size_bytes": limit_size,
            "limit_time_seconds": values[LIMIT_SECOND_KEY],
            "policy": values[POLICY_KEY],
            "source_shape": "broker_config",
            "precise_time_check": values[PRECISE_KEY],
            "check_interval_seconds": values[INTERVAL_KEY],
            "check_enabled": values[ENABLED_KEY],
        }
        for quota_type in QUOTA_TYPES
    ]


def _config_value(record: Record, key: str, raw: Any, default: Any) -> Any:
    """A runtime-config value (a string, or a native JSON value) of the default's type."""
    text = raw if isinstance(raw, str) else None
    bad = f"broker config {key} {show(raw)} is not "
    if isinstance(default, bool):
        if isinstance(raw, bool):
            return raw
        if text is not None and text.strip().lower() in ("true", "false"):
            return text.strip().lower() == "true"
        record.problem(BAD_VALUE, bad + "true or false")
        return default
    if isinstance(default, int):
        if isinstance(raw, int) and not isinstance(raw, bool):
            value = raw
        elif text is not None and _LONG_TEXT.fullmatch(text.strip()):
            value = int(text.strip())
        else:
            record.problem(BAD_VALUE, bad + "an integer")
            return default
        low, high = (
            (INT32_MIN, INT32_MAX) if key in (LIMIT_SECOND_KEY, INTERVAL_KEY) else (INT64_MIN, INT64_MAX)
        )
        if not low <= value <= high:
            record.problem(BAD_VALUE, bad + "within the integer range of that setting")
            return default
        return value
    if isinstance(default, float):
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            return float(raw)
        if text is not None and _DOUBLE_TEXT.fullmatch(text.strip()):
            return float(text.strip().rstrip("dDfF"))
        record.problem(BAD_VALUE, bad + "a number")
        return default
    if text is None or text.strip() not in RETENTION_POLICIES:
        record.problem(BAD_VALUE, bad + f"one of {', '.join(sorted(RETENTION_POLICIES))}")
        return default
    return text.strip()


# --- namespace / topic level ------------------------------------------------------------------------
def _quota_map(payload: Any, record: Record) -> list[Row] | None:
    if isinstance(payload, str):
        parsed = parse_cli_text(payload)
        if parsed is None:
            record.problem(
                UNKNOWN_QUOTA_SHAPE,
                f"text {show(payload)} is not `get-backlog-quotas` output (lines 'destination_storage    "
                "BacklogQuota{...}')",
            )
            return None
        payload = parsed
    if not isinstance(payload, dict):
        record.problem(
            UNKNOWN_QUOTA_SHAPE,
            f"backlog quotas are a JSON {json_type(payload)}; expected a map like "
            '{"destination_storage": {"limitSize": ..., "limitTime": ..., "policy": ...}}',
        )
        return None
    if POLICIES_MAP_KEY in payload:
        inner = payload[POLICIES_MAP_KEY]
        if inner is None:
            return []
        if not isinstance(inner, dict):
            record.problem(UNKNOWN_QUOTA_SHAPE, f"{POLICIES_MAP_KEY} {show(inner)} is not a JSON object")
            return None
        payload = inner
    unknown = [key for key in payload if key not in QUOTA_TYPES]
    if unknown and len(unknown) == len(payload):
        record.problem(
            UNKNOWN_QUOTA_SHAPE,
            f"the document is not a backlog-quota map (keys {show(unknown[:5])}); expected keys "
            "destination_storage and/or message_age, as `get-backlog-quotas` writes",
        )
        return None
    for key in unknown:
        record.problem(
            BAD_VALUE, f"backlog quota type {show(key)} is unknown; Pulsar knows {', '.join(QUOTA_TYPES)}"
        )
    rows: list[Row] = []
    for quota_type in QUOTA_TYPES:
        if quota_type not in payload or payload[quota_type] is None:
            continue
        row = _quota(record, quota_type, payload[quota_type])
        if row is not None:
            rows.append(row)
    return rows


def _quota(record: Record, quota_type: str, value: Any) -> Row | None:
    where = f"quota {quota_type}"
    if isinstance(value, str):
        fields_map = _parse_to_string(value)
        if fields_map is None:
            record.problem(
                UNKNOWN_QUOTA_SHAPE,
                f"{where} {show(value)} is neither a quota object nor a BacklogQuota toString "
                "(e.g. 'BacklogQuota{limit=10737418240, policy=producer_request_hold}')",
            )
            return None
        shape = "plain_string"
        quota = Fields(record, fields_map, where, "backlog_quotas", _QUOTA_FIELDS)
    elif isinstance(value, dict):
        quota = Fields(record, value, where, "backlog_quotas", _QUOTA_FIELDS)
        shape = ""
    else:
        record.problem(UNKNOWN_QUOTA_SHAPE, f"{where} {show(value)} is not a quota object")
        return None
    keys = set(quota.obj)
    if "limitSize" in keys or "limitTime" in keys:
        shape = shape or "limit_size_time"
        limit_size = quota.long("limitSize")
        limit = quota.long("limit")
        limit_size = limit_size if limit_size is not None else limit
        limit_time = quota.long("limitTime", bits=32)
    elif "limit" in keys:
        shape = shape or "limit_only"
        limit_size = quota.long("limit")
        limit_time = None
    else:
        record.problem(
            UNKNOWN_QUOTA_SHAPE,
            f"{where} {show(value)} has none of limit, limitSize, limitTime; expected "
            '{"limit": L, "policy": P} or {"limitSize": L, "limitTime": T, "policy": P}',
        )
        return None
    policy = quota.string("policy")
    if policy is None:
        record.note("quota_without_policy")
    elif policy not in RETENTION_POLICIES:
        record.problem(
            BAD_VALUE, f"{where}: policy {show(policy)} is not one of {', '.join(sorted(RETENTION_POLICIES))}"
        )
    return {
        "quota_type": quota_type,
        "limit_size_bytes": limit_size,
        "limit_time_seconds": limit_time,
        "policy": policy,
        "source_shape": shape,
        "precise_time_check": None,
        "check_interval_seconds": None,
        "check_enabled": None,
    }


def _parse_to_string(text: str) -> dict[str, Any] | None:
    """``Name{a=1, b=x}`` / ``Name(a=1, b=null)`` -> {"a": 1, "b": "x"} (numbers as ints, null as None)."""
    match = _TO_STRING.fullmatch(text)
    if match is None or "BacklogQuota" not in match.group(1):
        return None
    result: dict[str, Any] = {}
    body = match.group(2).strip()
    if not body:
        return None
    for part in body.split(","):
        if "=" not in part:
            return None
        key, _, raw = part.partition("=")
        key, raw = key.strip(), raw.strip()
        if not key or key in result:
            return None
        if raw == "null":
            result[key] = None
        elif _LONG_TEXT.fullmatch(raw):
            result[key] = int(raw)
        else:
            result[key] = raw
    return result
