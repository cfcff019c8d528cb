"""Dry-run requests for the ``plans`` stage: parse, validate and normalise (docs §1.10, §1.11, §7).

Operators ask "what would happen if ..." questions as small JSON documents, one per request::

    {"request_id": "drain-1", "cluster": "us-east", "topic": "persistent://t/ns/orders-partition-0",
     "action": "skip", "cursor": "billing", "n": 1000, "deleted_entries": "Exclude"}

Actions and their fields (``request_id``, ``cluster``, ``topic``, ``action`` are always required):

=================  ==========================================================================================
``skip``           ``cursor``, ``n`` (>= 0), ``deleted_entries`` (``Include`` | ``Exclude``, default
                   ``Exclude`` as ``pulsar-admin topics skip`` uses it)
``clear_backlog``  ``cursor``
``reset``          ``cursor``, ``target``: ``earliest`` | ``latest`` | ``"L:E"``
``reset_by_time``  ``cursor``, ``timestamp``: epoch milliseconds or an ISO-8601 time with a zone
``reader_start``   ``start``: ``earliest`` | ``latest`` | ``"L:E"`` | ``"L:E:B"`` (B = batch index),
                   ``inclusive`` (default false), ``rollback_seconds`` (default 0), ``read_compacted``
                   (default false), ``initial_position`` (``Latest`` | ``Earliest``, default ``Latest``)
=================  ==========================================================================================

A file holds a JSON array of requests, an object ``{"requests": [...]}``, or JSON Lines. Every request
that cannot be understood (malformed JSON, unknown action or field, missing or impossible value,
duplicate ``request_id``) is rejected with a reason naming the bad value and the fix; the stage puts
rejects in the quarantine table, so nothing is dropped silently. Parsing runs on the driver: request
files are a handful of operator questions, not data.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

ACTION_SKIP: Final = "skip"
ACTION_CLEAR_BACKLOG: Final = "clear_backlog"
ACTION_RESET: Final = "reset"
ACTION_RESET_BY_TIME: Final = "reset_by_time"
ACTION_READER_START: Final = "reader_start"
CURSOR_ACTIONS: Final = (ACTION_SKIP, ACTION_CLEAR_BACKLOG, ACTION_RESET, ACTION_RESET_BY_TIME)
ACTIONS: Final = (*CURSOR_ACTIONS, ACTION_READER_START)

#: ``skipEntries``' ``IndividualDeletedEntries`` (docs §1.10); the admin ``skip`` command uses Exclude.
DELETED_ENTRIES: Final = ("Include", "Exclude")
DEFAULT_DELETED_ENTRIES: Final = "Exclude"
#: ``CommandSubscribe.initialPosition`` (docs §7.1); ``Latest`` is the protocol default.
INITIAL_POSITIONS: Final = ("Latest", "Earliest")

_COMMON: Final = ("request_id", "cluster", "topic", "action")
_FIELDS: Final[Mapping[str, tuple[str, ...]]] = {
    ACTION_SKIP: ("cursor", "n", "deleted_entries"),
    ACTION_CLEAR_BACKLOG: ("cursor",),
    ACTION_RESET: ("cursor", "target"),
    ACTION_RESET_BY_TIME: ("cursor", "timestamp"),
    ACTION_READER_START: ("start", "inclusive", "rollback_seconds", "read_compacted", "initial_position"),
}
_OPTIONAL: Final = frozenset(
    {"deleted_entries", "inclusive", "rollback_seconds", "read_compacted", "initial_position"}
)
_POSITION_RE: Final = re.compile(r"^\s*(-?\d+)\s*:\s*(-?\d+)\s*(?::\s*(-?\d+)\s*)?$")
_MAX_LONG: Final = 2**63 - 1

#: Columns of a normalised request (the ``plan_requests`` contract, without ``source``).
REQUEST_COLUMNS: Final = (
    "request_id",
    "cluster",
    "topic",
    "action",
    "cursor_name",
    "n",
    "deleted_entries",
    "target_kind",
    "target",
    "timestamp_ms",
    "start_kind",
    "start_message_id",
    "inclusive",
    "rollback_seconds",
    "read_compacted",
    "initial_position",
)


@dataclass(frozen=True)
class RejectedRequest:
    """A request that could not be understood: where it was and why."""

    locator: str
    reason_code: str
    reason: str
    excerpt: str
    cluster: str | None = None
    topic: str | None = None


@dataclass(frozen=True)
class ParsedRequests:
    """Accepted requests (normalised dicts with :data:`REQUEST_COLUMNS` + ``source``) and rejects."""

    requests: tuple[dict[str, Any], ...]
    rejected: tuple[RejectedRequest, ...]


class _BadRequestError(Exception):
    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


def _documents(text: str) -> Iterator[tuple[str, Any]]:
    """(locator, document or the error to report) for a JSON array/object file or JSON Lines."""
    stripped = text.strip()
    if not stripped:
        return
    if stripped[0] in "[{":
        try:
            doc = json.loads(stripped)
        except json.JSONDecodeError:
            doc = None
        else:
            if isinstance(doc, list):
                for i, item in enumerate(doc):
                    yield f"item {i}", item
                return
            if isinstance(doc, dict) and set(doc) == {"requests"} and isinstance(doc["requests"], list):
                for i, item in enumerate(doc["requests"]):
                    yield f"requests[{i}]", item
                return
            if isinstance(doc, dict) and "action" in doc:
                yield "document", doc
                return
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            yield f"line {number}", json.loads(line)
        except json.JSONDecodeError as exc:
            yield (
                f"line {number}",
                _BadRequestError(
                    "malformed_json",
                    f"line {number} is not valid JSON ({exc.msg} at column {exc.colno}); write one request "
                    "object per line, or the whole file as a JSON array",
                ),
            )


def _text(doc: Mapping[str, Any], name: str) -> str:
    value = doc.get(name)
    if not isinstance(value, str) or not value.strip():
        raise _BadRequestError("missing_field", f"{name!r} must be a non-empty string, got {value!r}")
    return value.strip()


def _int(doc: Mapping[str, Any], name: str, default: int | None = None, minimum: int = 0) -> int:
    value = doc.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _BadRequestError("bad_value", f"{name!r} must be an integer >= {minimum}, got {value!r}")
    if not minimum <= value <= _MAX_LONG:
        raise _BadRequestError(
            "bad_value", f"{name!r} = {value} is out of range; use an integer >= {minimum}"
        )
    return value


def _bool(doc: Mapping[str, Any], name: str) -> bool:
    value = doc.get(name, False)
    if not isinstance(value, bool):
        raise _BadRequestError("bad_value", f"{name!r} must be true or false, got {value!r}")
    return value


def _choice(doc: Mapping[str, Any], name: str, choices: tuple[str, ...], default: str) -> str:
    value = doc.get(name, default)
    if value not in choices:
        raise _BadRequestError("bad_value", f"{name!r} = {value!r}; use one of {', '.join(choices)}")
    return str(value)


def _position(text: Any, name: str, allow_batch: bool) -> tuple[int, int, int]:
    match = _POSITION_RE.match(text) if isinstance(text, str) else None
    if match is None or (match.group(3) is not None and not allow_batch):
        shape = "'earliest', 'latest', 'L:E' or 'L:E:B'" if allow_batch else "'earliest', 'latest' or 'L:E'"
        raise _BadRequestError("bad_position", f"{name!r} = {text!r} is not a position; write {shape}")
    ledger, entry = int(match.group(1)), int(match.group(2))
    batch = int(match.group(3)) if match.group(3) is not None else -1
    if ledger < 0 or entry < -1 or batch < -1 or max(ledger, entry, batch) > _MAX_LONG:
        raise _BadRequestError(
            "impossible_position",
            f"{name!r} = {text!r} is impossible: ledger ids are >= 0, entry ids >= -1, batch indexes >= -1",
        )
    return ledger, entry, batch


def _timestamp_ms(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise _BadRequestError("bad_value", f"'timestamp' = {value} is negative; use epoch milliseconds")
        return value
    if isinstance(value, str):
        try:
            parsed = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            parsed = None
        if parsed is not None and parsed.tzinfo is not None:
            return int(parsed.timestamp() * 1000)
    raise _BadRequestError(
        "bad_value",
        f"'timestamp' = {value!r}; use epoch milliseconds or ISO-8601 with a zone, e.g. 2026-11-21T00:00:00Z",
    )


def normalise_request(doc: Any) -> dict[str, Any]:
    """One request document -> a row of :data:`REQUEST_COLUMNS`; raises ValueError with the reason."""
    try:
        return _normalise(doc)
    except _BadRequestError as bad:
        raise ValueError(bad.reason) from None


def _normalise(doc: Any) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise _BadRequestError(
            "not_an_object", f"a request must be a JSON object, got {type(doc).__name__}: {doc!r:.80}"
        )
    action = doc.get("action")
    if action not in ACTIONS:
        raise _BadRequestError("unknown_action", f"'action' = {action!r}; use one of {', '.join(ACTIONS)}")
    allowed = set(_COMMON) | set(_FIELDS[action]) | ({"cursor_name"} if action in CURSOR_ACTIONS else set())
    unknown = sorted(set(doc) - allowed)
    if unknown:
        raise _BadRequestError(
            "unknown_field",
            f"unknown field(s) {', '.join(map(repr, unknown))} for action {action!r}; "
            f"accepted: {', '.join(sorted(allowed))}",
        )
    row: dict[str, Any] = dict.fromkeys(REQUEST_COLUMNS)
    row.update(
        request_id=_text(doc, "request_id"),
        cluster=_text(doc, "cluster"),
        topic=_text(doc, "topic"),
        action=action,
    )
    if action in CURSOR_ACTIONS:
        if "cursor" in doc and "cursor_name" in doc:
            raise _BadRequestError(
                "bad_value", "give the cursor once, as 'cursor' (or 'cursor_name'), not both"
            )
        row["cursor_name"] = _text(doc, "cursor" if "cursor" in doc else "cursor_name")
    missing = [f for f in _FIELDS[action] if f not in doc and f not in _OPTIONAL and f != "cursor"]
    if missing:
        raise _BadRequestError("missing_field", f"action {action!r} needs {', '.join(map(repr, missing))}")
    if action == ACTION_SKIP:
        row["n"] = _int(doc, "n")
        row["deleted_entries"] = _choice(doc, "deleted_entries", DELETED_ENTRIES, DEFAULT_DELETED_ENTRIES)
    elif action == ACTION_RESET:
        target = doc["target"]
        if isinstance(target, str) and target.strip().lower() in ("earliest", "latest"):
            row["target_kind"] = target.strip().lower()
        else:
            ledger, entry, _ = _position(target, "target", allow_batch=False)
            row["target_kind"] = "position"
            row["target"] = {"ledger_id": ledger, "entry_id": entry}
    elif action == ACTION_RESET_BY_TIME:
        row["timestamp_ms"] = _timestamp_ms(doc["timestamp"])
    elif action == ACTION_READER_START:
        start = doc["start"]
        if isinstance(start, str) and start.strip().lower() in ("earliest", "latest"):
            row["start_kind"] = start.strip().lower()
        else:
            ledger, entry, batch = _position(start, "start", allow_batch=True)
            row["start_kind"] = "message_id"
            row["start_message_id"] = {"ledger_id": ledger, "entry_id": entry, "batch_index": batch}
        row["inclusive"] = _bool(doc, "inclusive")
        row["rollback_seconds"] = _int(doc, "rollback_seconds", default=0)
        row["read_compacted"] = _bool(doc, "read_compacted")
        row["initial_position"] = _choice(doc, "initial_position", INITIAL_POSITIONS, "Latest")
    return row


def parse_plan_requests(text: str, source: str) -> ParsedRequests:
    """Parse a request file's text; ``source`` names the file in rows and reasons."""
    accepted: list[dict[str, Any]] = []
    rejected: list[RejectedRequest] = []
    seen: dict[str, str] = {}
    for locator, doc in _documents(text):
        excerpt = json.dumps(doc, default=str)[:512] if not isinstance(doc, _BadRequestError) else ""
        cluster = doc.get("cluster") if isinstance(doc, dict) else None
        topic = doc.get("topic") if isinstance(doc, dict) else None
        try:
            if isinstance(doc, _BadRequestError):
                raise doc
            row = _normalise(doc)
            if row["request_id"] in seen:
                raise _BadRequestError(
                    "duplicate_request_id",
                    f"request_id {row['request_id']!r} is used again (first at {seen[row['request_id']]}); "
                    "give every request its own id",
                )
        except _BadRequestError as bad:
            rejected.append(
                RejectedRequest(
                    locator=locator,
                    reason_code=bad.code,
                    reason=f"{source} {locator}: {bad.reason}",
                    excerpt=excerpt,
                    cluster=cluster if isinstance(cluster, str) else None,
                    topic=topic if isinstance(topic, str) else None,
                )
            )
            continue
        seen[row["request_id"]] = locator
        row["source"] = source
        accepted.append(row)
    return ParsedRequests(tuple(accepted), tuple(rejected))
