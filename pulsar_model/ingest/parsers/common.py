"""Shared machinery of the admin-export parsers: records, results, value parsing (docs §0.1, §6.5, §10).

The unit of accounting is a *record*: one topic document (a per-topic file, one JSON Lines line, or
one partition inside a partitioned wrapper; one data row of a CSV). Every record ends either
accepted (all its rows kept) or quarantined (no rows, exactly one quarantine row whose reason lists
every problem found), so ``records_in == records_accepted + records_quarantined`` always holds.

Everything here is pure Python (no Spark) and never raises on bad input: the public entry points in
:mod:`pulsar_model.ingest.parsers` turn any problem, even a parser bug, into a quarantine row.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, Final
from urllib.parse import unquote, unquote_plus

from pulsar_model.domain.topic_names import (
    is_full_topic_name,
    partitioned_topic_name,
    topic_name_problem,
)
from pulsar_model.errors import ParseError

Row = dict[str, Any]
Rows = dict[str, list[Row]]

# --- kinds and tables -------------------------------------------------------------------------------
KIND_STATS_INTERNAL: Final = "stats-internal"
KIND_STATS: Final = "stats"
KIND_BACKLOG_QUOTAS: Final = "backlog-quotas"
KIND_CONSUMERS: Final = "consumers"
KIND_SCHEMAS: Final = "schemas"
#: The export kinds these parsers read (export layout, DESIGN.md "Exports in, tables out").
KINDS: Final = (KIND_STATS_INTERNAL, KIND_STATS, KIND_BACKLOG_QUOTAS, KIND_CONSUMERS, KIND_SCHEMAS)

#: Tables each kind produces. ``topic_stats``, ``subscription_stats``, ``stats_consumers`` and
#: ``client_consumers`` are in-memory tables the ingest pipeline joins onto the stored ones.
TABLES_BY_KIND: Final[Mapping[str, tuple[str, ...]]] = {
    KIND_STATS_INTERNAL: ("managed_ledgers", "ledgers", "cursors"),
    KIND_STATS: ("topic_stats", "subscription_stats", "stats_consumers"),
    KIND_BACKLOG_QUOTAS: ("backlog_quotas",),
    KIND_CONSUMERS: ("client_consumers",),
    KIND_SCHEMAS: ("schema_versions",),
}

# --- stable reason codes of the quarantine table ----------------------------------------------------
MALFORMED_JSON: Final = "malformed_json"
INVALID_UTF8: Final = "invalid_utf8"
NOT_AN_OBJECT: Final = "not_an_object"
MISSING_FIELD: Final = "missing_field"
BAD_POSITION: Final = "bad_position"
BAD_INDIVIDUALLY_DELETED: Final = "bad_individually_deleted"
NEGATIVE_VALUE: Final = "negative_value"
DUPLICATE_LEDGER: Final = "duplicate_ledger"
CLUSTER_MISMATCH: Final = "cluster_mismatch"
MISSING_TOPIC: Final = "missing_topic"
BAD_VALUE: Final = "bad_value"
UNKNOWN_QUOTA_SHAPE: Final = "unknown_quota_shape"
BAD_CSV: Final = "bad_csv"
PARTITIONED_AGGREGATE: Final = "partitioned_aggregate"
UNKNOWN_KIND: Final = "unknown_kind"
INTERNAL_ERROR: Final = "internal_error"
REASON_CODES: Final = (
    MALFORMED_JSON,
    INVALID_UTF8,
    NOT_AN_OBJECT,
    MISSING_FIELD,
    BAD_POSITION,
    BAD_INDIVIDUALLY_DELETED,
    NEGATIVE_VALUE,
    DUPLICATE_LEDGER,
    CLUSTER_MISMATCH,
    MISSING_TOPIC,
    BAD_VALUE,
    UNKNOWN_QUOTA_SHAPE,
    BAD_CSV,
    PARTITIONED_AGGREGATE,
    UNKNOWN_KIND,
    INTERNAL_ERROR,
)

#: What each parser note code means (the ``note`` column of ``ingest_notes``). A note key is
#: ``code`` or ``code:subject``; ``{subject}`` is replaced by the part after the colon.
NOTE_TEXT: Final[Mapping[str, str]] = {
    "unknown_field": (
        "field {subject} is not read by this version of pulsar-analytics and was ignored (a field of a "
        "newer Pulsar, or a misspelt key in a hand-written export)"
    ),
    "typo": "read the misspelt key {subject}, which some admin clients write, as its correct name",
    "unparseable_timestamp": "could not read the timestamp {subject}; stored it as null",
    "coerced_property": "property {subject} held a non-string value; stored its JSON text",
    "partition_count_mismatch": (
        "the partitioned {subject} record lists a different number of partitions than its metadata "
        "declares; stored the partitions it lists"
    ),
    "partitioned_aggregate_ignored": (
        "ignored the whole-topic numbers of the partitioned {subject} record; stored its partitions"
    ),
    "envelope_without_cluster": "the JSON Lines envelope names no cluster; used the export folder's",
    "broker_default": "the broker configuration lacks {subject}; used the broker's default value",
    "quota_without_policy": "a backlog quota without a policy; stored with a null policy",
    "default_priority_level": "no priority level for the consumer; used Pulsar's default 0",
    "version_from_order": "a schema version without a version number; numbered by its place in the list",
    "base64_schema_decoded": "the schema definition was base64 text; stored it decoded",
    "unknown_state": "state {subject} is not one this version knows; stored as given",
    "ledgers_not_sorted_by_id": (
        "the ledgers were listed out of id order; the analyses order them by id, as the broker does"
    ),
}

#: Quarantine rows keep the first characters of the record text (quarantine contract).
EXCERPT_CHARS: Final = 512
#: A reason lists at most this many problems, then says how many more there were.
MAX_PROBLEMS_IN_REASON: Final = 25

# --- Pulsar's numeric conventions (docs §0.1) -------------------------------------------------------
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1
#: -1 is Pulsar's "none" for ledger and entry ids: (L,-1) is "before the first entry of L" and
#: (-1,-1) is EARLIEST (docs §0.1); any smaller id cannot exist.
NO_ID: Final = -1
#: LATEST = (Long.MAX_VALUE, Long.MAX_VALUE) (docs §0.1).
LATEST_ID: Final = INT64_MAX

_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


# ====================================================================================================
# Public result types
# ====================================================================================================
@dataclass(frozen=True)
class RecordContext:
    """Where a record comes from (set by the caller, one per file or JSON Lines line)."""

    cluster: str  # from the export folder
    kind: str  # "stats-internal" | "stats" | "backlog-quotas" | "consumers" | "schemas"
    source_file: str  # relative to the export root
    record_locator: str  # "file" | "line 17" | ...
    topic_hint: str | None  # URL-decoded topic (or namespace / "broker") from the file name; None for JSONL


@dataclass
class ParseResult:
    """Rows and quarantine rows of one call; ``records_in == records_accepted + records_quarantined``.

    ``rows`` maps a table name to its rows: dicts keyed by contract column names, with ``cluster`` and
    ``topic`` but without the export columns (export_id, export_date, exported_at, pulsar_version).
    ``notes`` counts things worth knowing that did not stop a record (unknown fields, typos,
    defaults used).
    """

    rows: dict[str, list[dict[str, Any]]]
    quarantine: list[dict[str, Any]]
    records_in: int
    records_accepted: int
    records_quarantined: int
    notes: dict[str, int]


# ====================================================================================================
# Positions, individually deleted ranges, partition index, timestamps, names
# ====================================================================================================
Position = tuple[int, int]

# Ids are bounded to 40 digits: enough to report an id beyond 64 bits by value, and an absurdly long
# digit string fails the pattern instead of reaching int() (which refuses > 4300 digits).
_POSITION_RE: Final = re.compile(r"(-?[0-9]{1,40}):(-?[0-9]{1,40})")
_RANGE_RE: Final = re.compile(
    r"\((-?[0-9]{1,40}):(-?[0-9]{1,40})(?:\.\.|\u2025)(-?[0-9]{1,40}):(-?[0-9]{1,40})\]"
)
_RANGE_SEP_RE: Final = re.compile(r", ?")
_POSITION_FORM: Final = "positions are written 'ledgerId:entryId' with integer ids, e.g. '12:9'"


def show(value: object, limit: int = 80) -> str:
    """A value as it would appear in JSON, shortened, for reasons."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = "<unprintable value>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _position_problems(ledger: int, entry: int) -> list[str]:
    problems: list[str] = []
    if not INT64_MIN <= ledger <= INT64_MAX or not INT64_MIN <= entry <= INT64_MAX:
        problems.append("an id does not fit in a signed 64-bit long")
    if ledger < NO_ID:
        problems.append(
            f"ledger id {ledger} is negative (only -1, in the EARLIEST position -1:-1, is allowed)"
        )
    elif ledger == NO_ID and entry != NO_ID:
        problems.append("ledger id -1 is only allowed in the EARLIEST position -1:-1")
    if entry < NO_ID:
        problems.append(f"entry id {entry} is below -1 (L:-1 means 'before the first entry of L')")
    return problems


def parse_position(text: str) -> Position:
    """Parse ``"L:E"`` into ``(ledgerId, entryId)`` (docs §0.1); raise :class:`ParseError` when impossible.

    Both ids are signed 64-bit; ``(L,-1)`` and EARLIEST ``(-1,-1)`` are legal, a ledger id below -1,
    ``(-1,E)`` with ``E != -1`` and an entry id below -1 are not.
    """
    if not isinstance(text, str):
        raise ParseError(f"position {show(text)} is not a string; {_POSITION_FORM}")
    match = _POSITION_RE.fullmatch(text)
    if match is None:
        raise ParseError(f"{show(text)} is not a position; {_POSITION_FORM}")
    ledger, entry = int(match.group(1)), int(match.group(2))
    problems = _position_problems(ledger, entry)
    if problems:
        raise ParseError(f"{show(text)} is not a possible position: {'; '.join(problems)}")
    return ledger, entry


def _fmt(position: Position) -> str:
    return f"{position[0]}:{position[1]}"


def scan_individually_deleted(text: str) -> tuple[list[tuple[Position, Position]], list[str]]:
    """Ranges of an ``individuallyDeletedMessages`` string and every problem found (docs §10.2).

    Accepts both separators ("," and ", "), ``L:-1`` bounds, cross-ledger ranges and ``"[]"``.
    Problems are phrased to follow "individuallyDeletedMessages ..." in a reason.
    """
    problems: list[str] = []
    ranges: list[tuple[Position, Position]] = []
    stripped = text.strip()
    if len(stripped) < 2 or stripped[0] != "[" or stripped[-1] != "]":
        return [], [f"{show(text)} is not a list of ranges; write '[]' or '[(L:E..L:E],(L:E..L:E]]'"]
    body = stripped[1:-1].strip()
    pos = 0
    while pos < len(body):
        match = _RANGE_RE.match(body, pos)
        if match is None:
            problems.append(
                f"has unexpected text {show(body[pos : pos + 30])} at character {pos + 1}; each range is "
                "written '(L:E..L:E]' and ranges are separated by ',' or ', '"
            )
            return ranges, problems
        lower = (int(match.group(1)), int(match.group(2)))
        upper = (int(match.group(3)), int(match.group(4)))
        text_range = match.group(0)
        bound_problems = _position_problems(*lower) + _position_problems(*upper)
        if bound_problems:
            problems.append(f"range {text_range} has an impossible bound: {'; '.join(bound_problems)}")
        elif lower >= upper:
            problems.append(
                f"range {text_range} has lower >= upper; ranges must be open-closed (lower, upper] "
                "with lower < upper"
            )
        else:
            ranges.append((lower, upper))
        pos = match.end()
        if pos < len(body):
            sep = _RANGE_SEP_RE.match(body, pos)
            if sep is None:
                problems.append(
                    f"has {show(body[pos : pos + 30])} after range {text_range} at character {pos + 1}; "
                    "separate ranges with ',' or ', '"
                )
                return ranges, problems
            pos = sep.end()
            if pos == len(body):
                problems.append("ends with a separator; remove the trailing ','")
    return ranges, problems


def parse_individually_deleted(text: str) -> list[tuple[Position, Position]]:
    """Parse ``individuallyDeletedMessages`` into ``[((L1,E1),(L2,E2)), ...]`` open-closed ranges.

    Raises :class:`ParseError` naming every problem (syntax, impossible bounds, ``lower >= upper``).
    Ordering against other ranges and the mark-delete position is checked by the stats-internal parser.
    """
    if not isinstance(text, str):
        raise ParseError(f"individuallyDeletedMessages {show(text)} is not a string; write '[]' when empty")
    ranges, problems = scan_individually_deleted(text)
    if problems:
        raise ParseError("individuallyDeletedMessages " + "; ".join(problems))
    return ranges


def idm_order_problems(ranges: list[tuple[Position, Position]], mark_delete: Position | None) -> list[str]:
    """Problems of already parsed ranges: unsorted/overlapping, or not after the mark-delete position.

    Pulsar keeps the ranges sorted, disjoint and strictly after ``markDeletePosition`` (ranges
    ``<= md`` are removed on every mark-delete, docs §1.2). Touching ranges are accepted.
    """
    problems: list[str] = []
    for previous, current in itertools.pairwise(ranges):
        if current[0] < previous[1]:
            problems.append(
                f"range ({_fmt(current[0])}..{_fmt(current[1])}] overlaps or comes before range "
                f"({_fmt(previous[0])}..{_fmt(previous[1])}]; ranges must be sorted and disjoint"
            )
    if mark_delete is not None:
        for lower, upper in ranges:
            if upper <= mark_delete:
                problems.append(
                    f"range ({_fmt(lower)}..{_fmt(upper)}] is not after markDeletePosition "
                    f"{_fmt(mark_delete)}; acknowledged ranges must end after the mark-delete position"
                )
    return problems


def name_hint_from_file_name(file_name: str) -> str | None:
    """The URL-decoded stem of an export file name (topic, ``tenant/namespace`` or ``broker``).

    ``persistent%3A%2F%2Fpublic%2Fdefault%2Forders.json`` -> ``persistent://public/default/orders``.
    ``+`` is kept (shell loops encode with ``%20``/``%2B``); JSON Lines files carry no hint (None).
    """
    name = PurePosixPath(file_name.replace("\\", "/")).name
    lower = name.lower()
    if lower.endswith((".jsonl", ".ndjson")):
        return None
    for suffix in (".json", ".csv", ".txt"):
        if lower.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return unquote(name) or None


def decode_cursor_name(name: str) -> str:
    """Cursor keys of stats-internal are ``Codec.encode``-d (Java URLEncoder) names: decode them."""
    return unquote_plus(name)


_ISO_RE: Final = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?"
    r"\s*(Z|z|UTC|GMT|[+-]\d{2}(?::?\d{2})?)?(?:\[[^\]]*\])?"
)


def parse_timestamp(value: object) -> dt.datetime | None:
    """A Pulsar timestamp as an aware UTC datetime; None for absent/empty/0 ("never").

    Accepts epoch milliseconds (numbers or digit strings) and ISO-8601 text as Pulsar's
    ``DateFormatter`` (ISO_OFFSET_DATE_TIME in the broker's zone) writes it: ``Z`` or ``+HH:MM``,
    also ``+HHMM``, 0-9 fraction digits (truncated to microseconds), an optional ``[zone]`` suffix.
    Text without an offset is read as UTC. The epoch instant itself is Pulsar's formatting of 0
    (never happened) and maps to None. Raises :class:`ParseError` for anything else.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise ParseError(
            f"timestamp {show(value)} is a boolean; expected epoch milliseconds or ISO-8601 text"
        )
    if isinstance(value, int):
        return _from_millis(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")) or not value.is_integer():
            raise ParseError(f"timestamp {show(value)} is not whole epoch milliseconds")
        return _from_millis(int(value))
    if not isinstance(value, str):
        raise ParseError(f"timestamp {show(value)} is not epoch milliseconds or ISO-8601 text")
    text = value.strip()
    if not text:
        return None
    if re.fullmatch(r"-?[0-9]+", text):
        return _from_millis(int(text))
    match = _ISO_RE.fullmatch(text)
    if match is None:
        raise ParseError(
            f"timestamp {show(value)} is not ISO-8601 (e.g. 2024-01-01T00:00:00.000Z) or epoch milliseconds"
        )
    year, month, day, hour, minute = (int(match.group(i)) for i in range(1, 6))
    second = int(match.group(6) or 0)
    micro = int((match.group(7) or "0").ljust(6, "0")[:6])
    offset = match.group(8)
    try:
        tz = _parse_offset(offset)
        stamp = dt.datetime(year, month, day, hour, minute, second, micro, tzinfo=tz).astimezone(dt.UTC)
    except (ValueError, OverflowError) as exc:
        raise ParseError(f"timestamp {show(value)} is not a valid date/time ({exc})") from exc
    return None if stamp == _EPOCH else stamp


def _parse_offset(offset: str | None) -> dt.tzinfo:
    if offset is None or offset in ("Z", "z", "UTC", "GMT"):
        return dt.UTC
    sign = -1 if offset[0] == "-" else 1
    digits = offset[1:].replace(":", "")
    hours = int(digits[:2])
    minutes = int(digits[2:4] or 0)
    return dt.timezone(sign * dt.timedelta(hours=hours, minutes=minutes))


def _from_millis(millis: int) -> dt.datetime | None:
    if millis == 0:
        return None
    if millis < 0:
        raise ParseError(f"timestamp {millis} is a negative epoch time")
    try:
        return _EPOCH + dt.timedelta(milliseconds=millis)
    except OverflowError as exc:
        raise ParseError(f"timestamp {millis} ms is beyond year 9999") from exc


# ====================================================================================================
# Records and results
# ====================================================================================================
class Record:
    """State of one record while it is parsed: where it is, what is wrong with it, notes."""

    __slots__ = ("_seen", "ctx", "envelope", "excerpt", "hint", "locator", "notes", "problems", "topic")

    def __init__(
        self,
        ctx: RecordContext,
        locator: str,
        excerpt: str,
        *,
        topic: str | None = None,
        hint: str | None = None,
        envelope: Mapping[str, Any] | None = None,
    ) -> None:
        self.ctx = ctx
        self.locator = locator
        self.excerpt = excerpt
        self.topic = topic
        self.hint = hint
        self.envelope = envelope
        self.problems: list[tuple[str, str]] = []
        self._seen: set[tuple[str, str]] = set()
        self.notes: Counter[str] = Counter()

    def problem(self, code: str, message: str) -> None:
        if (code, message) not in self._seen:
            self._seen.add((code, message))
            self.problems.append((code, message))

    def note(self, key: str, count: int = 1) -> None:
        self.notes[key] += count

    @property
    def ok(self) -> bool:
        return not self.problems


class ResultBuilder:
    """Collects accepted rows and quarantine rows of one parse call, keeping the accounting."""

    def __init__(self, kind: str, ctx: RecordContext) -> None:
        self.kind = kind
        self.ctx = ctx
        self.rows: dict[str, list[Row]] = {t: [] for t in TABLES_BY_KIND.get(kind, ())}
        self.quarantine: list[Row] = []
        self.records_in = 0
        self.accepted = 0
        self.notes: Counter[str] = Counter()

    def finish(self, record: Record, rows: Mapping[str, list[Row]] | None) -> None:
        """Account for one record: keep its rows if it has no problem, else one quarantine row."""
        self.records_in += 1
        self.notes.update(record.notes)
        if record.problems or rows is None:
            if not record.problems:
                record.problem(
                    INTERNAL_ERROR, "parser returned no rows and no problem; please report this record"
                )
            self.quarantine.append(quarantine_row(self.kind, record))
            return
        self.accepted += 1
        for table, table_rows in rows.items():
            self.rows.setdefault(table, []).extend(table_rows)

    def result(self) -> ParseResult:
        return ParseResult(
            rows=self.rows,
            quarantine=self.quarantine,
            records_in=self.records_in,
            records_accepted=self.accepted,
            records_quarantined=len(self.quarantine),
            notes=dict(self.notes),
        )


def quarantine_row(kind: str, record: Record) -> Row:
    """The one quarantine row of a rejected record (quarantine contract, minus run/export columns)."""
    messages = [message for _, message in record.problems]
    if len(messages) > MAX_PROBLEMS_IN_REASON:
        extra = len(messages) - MAX_PROBLEMS_IN_REASON
        messages = [*messages[:MAX_PROBLEMS_IN_REASON], f"... and {extra} more problems"]
    return {
        "cluster": record.ctx.cluster,
        "topic": record.topic,
        "source": kind,
        "source_file": record.ctx.source_file,
        "record_locator": record.locator,
        "reason_code": record.problems[0][0],
        "reason": "; ".join(messages),
        "record_excerpt": record.excerpt[:EXCERPT_CHARS],
    }


def run_record(record: Record, parse: Callable[[Record], Rows | None], builder: ResultBuilder) -> None:
    """Run ``parse`` on a record and account for it; a parser bug quarantines the record, never raises."""
    try:
        rows = parse(record)
    except Exception as exc:  # the contract is "never raise on data"
        rows = None
        record.problem(
            INTERNAL_ERROR,
            f"parser bug ({type(exc).__name__}: {exc}); the record was quarantined, please report it",
        )
    builder.finish(record, rows)


# ====================================================================================================
# Text and JSON
# ====================================================================================================
_BOM: Final = b"\xef\xbb\xbf"


@dataclass
class Decoded:
    """Bytes of a record decoded to text; ``error`` says why when they are not UTF-8."""

    text: str | None
    excerpt: str
    error: str | None = None


def decode_utf8(data: bytes) -> Decoded:
    """Strict UTF-8 decode (a leading BOM is dropped); the excerpt is always readable text."""
    raw = data[len(_BOM) :] if data.startswith(_BOM) else data
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        excerpt = raw.decode("utf-8", errors="replace")
        return Decoded(
            None,
            excerpt,
            f"the bytes are not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
            "export the file as UTF-8",
        )
    return Decoded(text, text)


class DuplicateKeyError(ValueError):
    """A JSON object repeats a key (Jackson never writes that; the record is ambiguous)."""


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise DuplicateKeyError(key)
        result[key] = value
    return result


def load_json(text: str) -> Any:
    """``json.loads`` that refuses duplicate keys; raises ValueError (incl. JSONDecodeError)."""
    try:
        return json.loads(text, object_pairs_hook=_unique_pairs)
    except RecursionError as exc:
        raise ValueError("JSON nested too deeply") from exc


def load_json_sequence(text: str) -> list[Any]:
    """Several JSON documents one after the other (what ``pulsar-admin`` prints for a list)."""
    decoder = json.JSONDecoder(object_pairs_hook=_unique_pairs)
    docs: list[Any] = []
    pos = 0
    length = len(text)
    while True:
        while pos < length and text[pos].isspace():
            pos += 1
        if pos >= length:
            return docs
        try:
            doc, pos = decoder.raw_decode(text, pos)
        except RecursionError as exc:
            raise ValueError("JSON nested too deeply") from exc
        docs.append(doc)


def json_problem(exc: ValueError) -> str:
    """Plain-words reason for a JSON decoding failure."""
    if isinstance(exc, DuplicateKeyError):
        return (
            f"key {show(str(exc))} appears twice in one JSON object; the record is ambiguous, "
            "re-export it (pulsar-admin never repeats keys)"
        )
    if isinstance(exc, json.JSONDecodeError):
        return (
            f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}; "
            "re-export the record (the file may be truncated)"
        )
    if "integer string conversion" in str(exc):  # Python refuses to convert > 4300 digits
        return (
            "a number in the JSON has more than 4300 digits, far beyond any 64-bit Pulsar field; "
            "re-export the record"
        )
    return f"not valid JSON: {exc}; re-export the record"


def compact_json(value: Any) -> str:
    """Compact JSON text of a value (excerpts of partitions, object-form schema definitions)."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return "<unprintable value>"


# ====================================================================================================
# Typed access to the fields of one JSON object
# ====================================================================================================
@dataclass
class Fields:
    """Typed, validating access to one JSON object of a record.

    Every wrong value becomes a problem of ``record`` whose message starts with ``where`` (e.g.
    "cursor 'sub1'") and names the value; the accessor then returns None. Keys outside ``known``
    are counted as ``unknown_field:<table>.<key>`` notes (Pulsar adds fields every release).
    """

    record: Record
    obj: Mapping[str, Any]
    where: str
    table: str
    known: frozenset[str] = field(default_factory=frozenset)
    missing_hint: str = "re-export the record with pulsar-admin, which always writes it"

    def __post_init__(self) -> None:
        for key in self.obj:
            if key not in self.known:
                self.record.note(f"unknown_field:{self.table}.{key}")

    def _prefix(self) -> str:
        return f"{self.where}: " if self.where else ""

    def present(self, key: str) -> bool:
        return key in self.obj and self.obj[key] is not None

    def get(self, key: str) -> Any:
        return self.obj.get(key)

    def missing(self, key: str) -> None:
        self.record.problem(MISSING_FIELD, f"{self._prefix()}{key} is missing; {self.missing_hint}")

    def bad(self, key: str, value: Any, expected: str, code: str = BAD_VALUE) -> None:
        self.record.problem(code, f"{self._prefix()}{key} {show(value)} is not {expected}")

    def long(
        self,
        key: str,
        *,
        required: bool = False,
        minimum: int | None = None,
        bits: int = 64,
        what: str = "an integer",
    ) -> int | None:
        """An integer field; ``minimum`` violations are ``negative_value`` problems."""
        if not self.present(key):
            if required:
                self.missing(key)
            return None
        value = self.obj[key]
        if isinstance(value, bool) or not isinstance(value, int):
            self.bad(key, value, what)
            return None
        low, high = (INT32_MIN, INT32_MAX) if bits == 32 else (INT64_MIN, INT64_MAX)
        if not low <= value <= high:
            self.bad(key, value, f"{what} within the signed {bits}-bit range")
            return None
        if minimum is not None and value < minimum:
            floor = "negative" if minimum == 0 else f"below {minimum}"
            self.record.problem(
                NEGATIVE_VALUE,
                f"{self._prefix()}{key} {value} is {floor}; it must be >= {minimum}"
                + ("" if minimum == 0 else " (-1 is Pulsar's 'none')"),
            )
            return None
        return value

    def double(self, key: str) -> float | None:
        if not self.present(key):
            return None
        value = self.obj[key]
        if isinstance(value, bool) or not isinstance(value, int | float):
            if isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity"):
                return float(value.replace("Infinity", "inf"))
            self.bad(key, value, "a number")
            return None
        return float(value)

    def string(self, key: str, *, required: bool = False) -> str | None:
        if not self.present(key):
            if required:
                self.missing(key)
            return None
        value = self.obj[key]
        if not isinstance(value, str):
            self.bad(key, value, "a string")
            return None
        return value

    def boolean(self, key: str) -> bool | None:
        if not self.present(key):
            return None
        value = self.obj[key]
        if not isinstance(value, bool):
            self.bad(key, value, "true or false")
            return None
        return value

    def position(self, key: str, *, required: bool = False) -> Position | None:
        if not self.present(key):
            if required:
                self.missing(key)
            return None
        try:
            return parse_position(self.obj[key])
        except ParseError as exc:
            self.record.problem(BAD_POSITION, f"{self._prefix()}{key} {exc}")
            return None

    def timestamp(self, key: str, *, source_key: str | None = None) -> dt.datetime | None:
        """A timestamp field; an unparseable value becomes None plus an ``unparseable_timestamp`` note
        (timestamps are informational in these exports; the record is kept)."""
        if not self.present(key):
            return None
        try:
            return parse_timestamp(self.obj[key])
        except ParseError:
            self.record.note(f"unparseable_timestamp:{self.table}.{source_key or key}")
            return None

    def str_map(self, key: str) -> dict[str, str] | None:
        """A map<string,string>; scalar non-string values are stringified (noted), nested ones refused."""
        if not self.present(key):
            return None
        value = self.obj[key]
        if not isinstance(value, dict):
            self.bad(key, value, "a JSON object of string values")
            return None
        result: dict[str, str] = {}
        for name, item in value.items():
            if isinstance(item, str):
                result[name] = item
            elif item is None:
                self.bad(key, value, "a JSON object of string values (null found)")
                return None
            elif isinstance(item, bool | int | float):
                result[name] = json.dumps(item)
                self.record.note(f"coerced_property:{self.table}.{key}")
            else:
                self.bad(key, value, "a JSON object of string values")
                return None
        return result

    def long_map(self, key: str) -> dict[str, int] | None:
        """A map<string,bigint> (cursor properties)."""
        if not self.present(key):
            return None
        value = self.obj[key]
        if not isinstance(value, dict):
            self.bad(key, value, "a JSON object of integers")
            return None
        result: dict[str, int] = {}
        for name, item in value.items():
            if isinstance(item, bool) or not isinstance(item, int) or not INT64_MIN <= item <= INT64_MAX:
                self.bad(key, value, f"a JSON object of 64-bit integers ({show(name)} is {show(item)})")
                return None
            result[name] = item
        return result


def position_struct(position: Position | None) -> dict[str, int] | None:
    """A position as the contracts' ``struct<ledger_id, entry_id>``."""
    if position is None:
        return None
    return {"ledger_id": position[0], "entry_id": position[1]}


# ====================================================================================================
# Orchestration shared by the kinds: files, JSON Lines envelopes, partitioned wrappers
# ====================================================================================================
RecordParser = Callable[[Any, Record], Rows | None]


@dataclass(frozen=True)
class KindSpec:
    """How one kind of export is read.

    ``parse(payload, record)`` turns one topic document into rows (or leaves problems on the record).
    ``partitioned``: documents may be partitioned wrappers ``{"metadata": {"partitions": N},
    "partitions": {name: doc}}`` (one record per partition). ``topic_level``: records are per topic
    (the topic comes from the envelope or the file name); quotas resolve their own scope.
    ``text_fallback(text)`` may turn a non-JSON file (CLI text output) into a payload, or return None.
    ``sequence_ok``: several concatenated JSON documents form one payload list (CLI list printing).
    """

    kind: str
    parse: RecordParser
    partitioned: bool = False
    topic_level: bool = True
    text_fallback: Callable[[str], Any] | None = None
    sequence_ok: bool = False
    aggregate_reason: str | None = None


_ENVELOPE_KEYS: Final = frozenset({"cluster", "topic", "stats", "namespace", "broker"})


def _missing_topic_message(spec: KindSpec, from_envelope: bool) -> str:
    if from_envelope:
        return (
            'the JSON Lines envelope has no "topic"; write '
            '{"cluster": ..., "topic": "persistent://...", "stats": {...}}'
        )
    return (
        "the file name names no topic; name per-topic files with the URL-encoded full topic name, "
        "e.g. persistent%3A%2F%2Fpublic%2Fdefault%2Forders.json"
    )


def _check_topic(record: Record, topic: str | None, spec: KindSpec, from_envelope: bool) -> None:
    if topic is None:
        if not any(code == MISSING_TOPIC for code, _ in record.problems):  # e.g. a non-string topic
            record.problem(MISSING_TOPIC, _missing_topic_message(spec, from_envelope))
    elif (problem := topic_name_problem(topic)) is not None:
        source = "envelope topic" if from_envelope else "topic from the file name"
        record.problem(
            MISSING_TOPIC,
            f"{source} {show(topic)} {problem}; use the full name (URL-encoded in file names)",
        )


def _is_partitioned_wrapper(payload: Any) -> bool:
    return (
        isinstance(payload, dict)
        and isinstance(payload.get("metadata"), dict)
        and "partitions" in payload["metadata"]
    )


def _partition_topic(name: str, base: str | None) -> str:
    if "://" in name or base is None or "://" not in base:
        return name
    prefix = base[: base.rfind("/") + 1]
    return prefix + name


def _expand_wrapper(
    spec: KindSpec,
    payload: dict[str, Any],
    base_topic: str | None,
    ctx: RecordContext,
    locator: str,
    excerpt: str,
    builder: ResultBuilder,
    pre_problems: list[tuple[str, str]],
) -> None:
    """One record per partition of a partitioned wrapper (or one quarantined record for the wrapper)."""
    partitions = payload.get("partitions")
    wrapper = Record(ctx, locator, excerpt, topic=base_topic)
    for code, message in pre_problems:
        wrapper.problem(code, message)
    if partitions is not None and not isinstance(partitions, dict):
        wrapper.problem(
            BAD_VALUE, f"partitions {show(partitions)} is not a JSON object of partition documents"
        )
    elif not partitions:
        wrapper.problem(
            PARTITIONED_AGGREGATE,
            spec.aggregate_reason or "partitioned wrapper lists no partitions; export every partition",
        )
    if wrapper.problems:
        builder.finish(wrapper, None)
        return
    assert isinstance(partitions, dict)
    declared = payload["metadata"].get("partitions")
    if isinstance(declared, int) and not isinstance(declared, bool) and declared != len(partitions):
        builder.notes[f"partition_count_mismatch:{spec.kind}"] += 1
    extra = [k for k in payload if k not in ("metadata", "partitions")]
    if extra:
        builder.notes[f"partitioned_aggregate_ignored:{spec.kind}"] += 1
    for name, doc in partitions.items():
        topic = _partition_topic(name, base_topic)
        record = Record(ctx, f"{locator} partition {name}", compact_json(doc), topic=topic)
        _check_topic(record, topic, spec, from_envelope=False)
        if (
            base_topic is not None
            and is_full_topic_name(topic)
            and partitioned_topic_name(topic) != base_topic
        ):
            record.problem(
                BAD_VALUE,
                f"partition {show(name)} does not belong to partitioned topic {show(base_topic)}; "
                "export each partitioned topic into its own file or line",
            )
        run_record(record, _bind(spec.parse, doc), builder)


def _bind(parse: RecordParser, payload: Any) -> Callable[[Record], Rows | None]:
    def bound(record: Record) -> Rows | None:
        return parse(payload, record)

    return bound


def _dispatch_payload(
    spec: KindSpec,
    payload: Any,
    ctx: RecordContext,
    locator: str,
    excerpt: str,
    builder: ResultBuilder,
    *,
    topic: str | None,
    hint: str | None,
    envelope: Mapping[str, Any] | None,
    pre_problems: list[tuple[str, str]],
) -> None:
    if spec.partitioned and _is_partitioned_wrapper(payload):
        assert isinstance(payload, dict)
        _expand_wrapper(spec, payload, topic, ctx, locator, excerpt, builder, pre_problems)
        return
    record = Record(ctx, locator, excerpt, topic=topic, hint=hint, envelope=envelope)
    for code, message in pre_problems:
        record.problem(code, message)
    if spec.topic_level:
        _check_topic(record, topic, spec, from_envelope=envelope is not None)
    run_record(record, _bind(spec.parse, payload), builder)


def _single_failure(builder: ResultBuilder, record: Record, code: str, message: str) -> ParseResult:
    record.problem(code, message)
    builder.finish(record, None)
    return builder.result()


def run_file(spec: KindSpec, data: bytes, ctx: RecordContext) -> ParseResult:
    """Parse one per-topic file (one JSON document; a partitioned wrapper gives one record per partition)."""
    builder = ResultBuilder(spec.kind, ctx)
    hint = ctx.topic_hint
    topic = hint if spec.topic_level or (hint is not None and is_full_topic_name(hint)) else None
    decoded = decode_utf8(data)
    head = Record(ctx, ctx.record_locator, decoded.excerpt, topic=topic, hint=hint)
    if decoded.text is None:
        return _single_failure(builder, head, INVALID_UTF8, decoded.error or "not UTF-8")
    try:
        payload: Any = load_json(decoded.text)
    except ValueError as exc:
        payload = _fallback(spec, decoded.text, exc)
        if payload is _NO_PAYLOAD:
            return _single_failure(builder, head, MALFORMED_JSON, json_problem(exc))
    _dispatch_payload(
        spec,
        payload,
        ctx,
        ctx.record_locator,
        decoded.excerpt,
        builder,
        topic=topic,
        hint=hint,
        envelope=None,
        pre_problems=[],
    )
    return builder.result()


_NO_PAYLOAD: Final = object()


def _fallback(spec: KindSpec, text: str, exc: ValueError) -> Any:
    if isinstance(exc, DuplicateKeyError):
        return _NO_PAYLOAD
    if spec.sequence_ok:
        try:
            docs = load_json_sequence(text)
        except ValueError:
            docs = []
        if len(docs) > 1:
            return docs
    if spec.text_fallback is not None:
        converted = spec.text_fallback(text)
        if converted is not None:
            return converted
    return _NO_PAYLOAD


def run_line(spec: KindSpec, line: bytes, ctx: RecordContext) -> ParseResult:
    """Parse one JSON Lines envelope ``{"cluster", "topic", "stats"}`` (quotas: namespace/topic/broker)."""
    builder = ResultBuilder(spec.kind, ctx)
    decoded = decode_utf8(line.strip())
    head = Record(ctx, ctx.record_locator, decoded.excerpt)
    if decoded.text is None:
        return _single_failure(builder, head, INVALID_UTF8, decoded.error or "not UTF-8")
    if not decoded.text.strip():
        return builder.result()
    try:
        envelope = load_json(decoded.text)
    except ValueError as exc:
        return _single_failure(builder, head, MALFORMED_JSON, json_problem(exc))
    if not isinstance(envelope, dict):
        return _single_failure(
            builder,
            head,
            NOT_AN_OBJECT,
            f"the line holds a JSON {type(envelope).__name__}, not an envelope object "
            '{"cluster": ..., "topic": ..., "stats": {...}}',
        )
    for key in envelope:
        if key not in _ENVELOPE_KEYS:
            builder.notes[f"unknown_field:envelope.{key}"] += 1
    problems: list[tuple[str, str]] = []
    cluster = envelope.get("cluster")
    if cluster is None:
        builder.notes["envelope_without_cluster"] += 1
    elif not isinstance(cluster, str):
        problems.append((BAD_VALUE, f"envelope cluster {show(cluster)} is not a string"))
    elif cluster != ctx.cluster:
        problems.append(
            (
                CLUSTER_MISMATCH,
                f"envelope cluster {show(cluster)} differs from the export folder {show(ctx.cluster)}; "
                f"move the line to the {cluster} folder or correct its cluster field",
            )
        )
    topic_value = envelope.get("topic")
    topic: str | None = None
    if isinstance(topic_value, str) and topic_value:
        topic = topic_value
    elif topic_value is not None:
        problems.append((MISSING_TOPIC, f"envelope topic {show(topic_value)} is not a topic name string"))
    head.topic = topic
    if "stats" not in envelope or envelope["stats"] is None:
        problems.append(
            (
                MISSING_FIELD,
                'the envelope has no "stats" payload; write {"cluster": ..., "topic": ..., "stats": {...}}',
            )
        )
        for code, message in problems:
            head.problem(code, message)
        if spec.topic_level and topic is None and topic_value is None:
            head.problem(MISSING_TOPIC, _missing_topic_message(spec, True))
        builder.finish(head, None)
        return builder.result()
    _dispatch_payload(
        spec,
        envelope["stats"],
        ctx,
        ctx.record_locator,
        decoded.excerpt,
        builder,
        topic=topic,
        hint=None,
        envelope=envelope,
        pre_problems=problems,
    )
    return builder.result()


def require_object(payload: Any, record: Record, what: str) -> dict[str, Any] | None:
    """The payload as a JSON object, or a ``not_an_object`` problem naming what was expected."""
    if isinstance(payload, dict):
        return payload
    record.problem(
        NOT_AN_OBJECT,
        f"the record is a JSON {json_type(payload)}, not a {what} object; export the command's JSON output",
    )
    return None


def json_type(value: Any) -> str:
    """Name of the JSON type of a decoded value (for reasons)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"
