"""Entries as the admin REST API returns them: the entry endpoint's headers -> :class:`EntryMetadata`.

``GET /admin/v2/{persistent|non-persistent}/{tenant}/{namespace}/{topic}/ledger/{ledgerId}/entry/{entryId}``
(``PersistentTopics.getMessageById`` -> ``PersistentTopicsBase.internalGetMessageById``) reads one stored
entry and answers with ``PersistentTopicsBase.generateResponseWithEntry``: the broker parses the entry's
envelope itself and sends

* the ``MessageMetadata`` fields as ``X-Pulsar-*`` headers, one header per field (repeated fields as
  repeated headers), numbers in decimal as Java prints them (``uint64`` fields as signed ``long``),
  times through ``DateFormatter.format`` (ISO-8601 with the broker's zone offset, millisecond
  precision), enums by name, bytes in base64;
* the payload, **decompressed** (a batch comes back as its whole container of
  ``[size][SingleMessageMetadata][payload]`` records; a marker's body is its marker protobuf), without the
  broker-entry metadata, the checksum and the metadata;
* ``X-Pulsar-batch-size`` = the stored entry's length minus the serialized metadata size, only for batches.

Versions differ (docs/semantics/export-rest.md lists the sources): properties come one header per key
``X-Pulsar-PROPERTY-<key>`` on older brokers (read at lhotari/pulsar@215a14e5, a 3.0-line copy, and
apache/pulsar@0000386a, a 2.x copy) and as one JSON object in ``X-Pulsar-PROPERTY`` on newer ones
(PIP-279, apache/pulsar#20627; read at poorbarcode/pulsar@22766124); newer brokers add
``X-Pulsar-txn-aborted`` / ``X-Pulsar-txn-uncommitted`` to transactional entries (PIP-353,
apache/pulsar#22762; the meaning of ``uncommitted`` changed with apache/pulsar#26073, which also added
``X-Pulsar-txn-consumable``). Both property forms are accepted; the JSON one wins when present.

What the response cannot carry is never guessed (:data:`UNRECOVERABLE`): :func:`decode_rest_entry`
returns the :class:`~pulsar_model.wire.codec.DecodedEntry` that
:func:`~pulsar_model.wire.codec.entry_from_metadata` builds (the same batch splitting and marker
decoding as stored entries) plus the names of the fields it left null. Derivable envelope values are
derived exactly: a batch's stored size is ``batch-size`` plus the re-serialized metadata (the broker
subtracted exactly that); its checksum presence follows when the payload was not compressed (stored
payload = body).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable, Sequence
from typing import Final, NamedTuple

from pulsar_model.errors import EntryDecodeError
from pulsar_model.wire._generated import pulsar_api_pb2 as _pb
from pulsar_model.wire.codec import (
    COMPRESSION_NAMES,
    BrokerEntry,
    DecodedEntry,
    EntryMetadata,
    entry_from_metadata,
)

__all__ = [
    "HEADER_PREFIX",
    "PROPERTY_HEADER",
    "PROPERTY_PREFIX",
    "UNRECOVERABLE",
    "RestEntry",
    "decode_rest_entry",
    "parse_pulsar_datetime",
]

#: Every header of the entry endpoint starts with this (case-insensitive, as all HTTP header names).
HEADER_PREFIX: Final = "x-pulsar-"
#: Newer brokers: all properties as one JSON object (PIP-279).
PROPERTY_HEADER: Final = "x-pulsar-property"
#: Older brokers: one header per property key.
PROPERTY_PREFIX: Final = "x-pulsar-property-"
#: Chunk counters older brokers also send with the property prefix (not message properties).
_CHUNK_PSEUDO_PROPERTIES: Final = ("TOTAL-CHUNKS", "CHUNK-ID")

#: The fields an entry fetched over REST may leave null, and why (``unrecovered_fields`` names them).
UNRECOVERABLE: Final = {
    "has_checksum": "the broker strips the 0x0e01 checksum section before answering; known only when a "
    "batch's stored size and its uncompressed stored payload pin it down",
    "entry_size_bytes": "only batches carry X-Pulsar-batch-size; a non-batched entry's stored size depends "
    "on the checksum section and, when compressed, on the compressed payload the broker does not send",
    "payload_size_bytes": "the body is decompressed: the stored (compressed) payload size is not sent",
    "property_order": "properties arrive as a JSON object (newer brokers) or as headers (older ones); the "
    "stored order of two or more properties is not preserved",
}

_U64: Final = 1 << 64
_I64_MIN: Final = -(1 << 63)
_I64_MAX: Final = (1 << 63) - 1
_U32_MAX: Final = (1 << 32) - 1
_I32_MIN: Final = -(1 << 31)
_I32_MAX: Final = (1 << 31) - 1

_DATETIME: Final = re.compile(
    r"^([+-]?\d{4,10})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?"
    r"(Z|[+-]\d{2}(?::?\d{2}(?::?\d{2})?)?)$"
)


class RestEntry(NamedTuple):
    """One entry rebuilt from the entry endpoint's response."""

    entry: DecodedEntry
    #: names from :data:`UNRECOVERABLE` this entry leaves null or cannot vouch for, sorted
    unrecovered: tuple[str, ...]
    #: ``X-Pulsar-txn-aborted`` / ``X-Pulsar-txn-uncommitted`` as sent (None when absent)
    txn_aborted: bool | None
    txn_uncommitted: bool | None


def _error(message: str) -> EntryDecodeError:
    return EntryDecodeError("bad_metadata", message)


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (any year, Howard Hinnant's algorithm)."""
    year -= month <= 2
    era = (year if year >= 0 else year - 399) // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def parse_pulsar_datetime(text: str) -> int:
    """Epoch milliseconds of a ``DateFormatter.format`` value (``ISO_OFFSET_DATE_TIME`` in the broker's zone).

    Exact for every Java ``long`` the broker formats: years outside 1-9999 (``+292278994-08-17T...``),
    any zone offset, 0-9 fraction digits (Java prints none for a whole second). Raises ValueError.
    """
    match = _DATETIME.match(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not an ISO-8601 date-time with an offset")
    year, month, day, hour, minute = (int(match.group(i)) for i in range(1, 6))
    second = int(match.group(6) or 0)
    fraction = (match.group(7) or "").ljust(9, "0")
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour < 24 and minute < 60 and second < 60):
        raise ValueError(f"{text!r} has a field out of range")
    nanos = int(fraction)
    if nanos % 1_000_000:
        raise ValueError(f"{text!r} is finer than a millisecond; the broker formats epoch milliseconds")
    zone = match.group(8)
    offset = 0
    if zone != "Z":
        digits = zone[1:].replace(":", "")
        offset = int(digits[0:2]) * 3600 + int(digits[2:4] or 0) * 60 + int(digits[4:6] or 0)
        if zone[0] == "-":
            offset = -offset
    seconds = _days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second - offset
    return seconds * 1000 + nanos // 1_000_000


class _Headers:
    """Case-insensitive view of the response headers, in the order received."""

    def __init__(self, pairs: Iterable[Sequence[str]]) -> None:
        self.pairs: list[tuple[str, str]] = []
        for pair in pairs:
            if len(pair) != 2 or not isinstance(pair[0], str) or not isinstance(pair[1], str):
                raise _error(f"header {pair!r} is not a [name, value] pair of strings")
            self.pairs.append((pair[0], pair[1]))
        self.by_name: dict[str, list[str]] = {}
        for name, value in self.pairs:
            self.by_name.setdefault(name.lower(), []).append(value)

    def all(self, name: str) -> list[str]:
        return self.by_name.get(name, [])

    def one(self, name: str) -> str | None:
        values = self.by_name.get(name)
        if not values:
            return None
        if len(values) > 1 and len(set(values)) > 1:
            raise _error(f"header {name} sent {len(values)} different values {values!r}; it is single-valued")
        return values[0]

    def long(self, name: str, low: int = _I64_MIN, high: int = _I64_MAX) -> int | None:
        text = self.one(name)
        if text is None:
            return None
        try:
            value = int(text.strip(), 10)
        except ValueError:
            raise _error(f"header {name} {text!r} is not a decimal integer") from None
        if not low <= value <= high:
            raise _error(f"header {name} {value} is outside {low}..{high}")
        return value

    def u64(self, name: str) -> int | None:
        """A protobuf uint64 sent as Java's signed long: back to its unsigned 64-bit value."""
        value = self.long(name)
        return None if value is None else value % _U64

    def boolean(self, name: str) -> bool | None:
        text = self.one(name)
        if text is None:
            return None
        lowered = text.strip().lower()
        if lowered not in ("true", "false"):
            raise _error(f"header {name} {text!r} is not true or false")
        return lowered == "true"

    def time_ms(self, name: str) -> int | None:
        text = self.one(name)
        if text is None:
            return None
        try:
            return parse_pulsar_datetime(text)
        except ValueError as exc:
            raise _error(f"header {name}: {exc}") from None

    def b64(self, name: str) -> bytes | None:
        text = self.one(name)
        return None if text is None else _b64(name, text)


def _b64(name: str, text: str) -> bytes:
    try:
        return base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise _error(f"header {name} {text[:40]!r} is not valid base64") from None


def _properties(headers: _Headers, chunked: bool) -> tuple[dict[str, str], int]:
    """The message properties and how many were listed (the JSON form collapses repeated keys)."""
    raw = headers.one(PROPERTY_HEADER)
    if raw is not None:
        try:
            value = json.loads(raw)
        except ValueError:
            raise _error(f"header X-Pulsar-PROPERTY {raw[:60]!r} is not a JSON object") from None
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise _error(f"header X-Pulsar-PROPERTY {raw[:60]!r} is not a JSON object of strings")
        return dict(value), len(value)
    out: dict[str, str] = {}
    count = 0
    for name, value in headers.pairs:
        lowered = name.lower()
        if not lowered.startswith(PROPERTY_PREFIX):
            continue
        key = name[len(PROPERTY_PREFIX) :]
        if chunked and key.upper() in _CHUNK_PSEUDO_PROPERTIES:
            continue
        out[key] = value  # a repeated key keeps its last value, as in the stored decoder
        count += 1
    return out, count


def _metadata_size(
    meta: EntryMetadata, present: dict[str, object], encryption_keys: list[bytes], compression: int | None
) -> int:
    """Serialized size of the ``MessageMetadata`` the headers describe (what the broker subtracted).

    ``present`` holds the optional scalar fields whose header was sent (presence matters: a field set to
    its default still takes bytes); repeated fields and properties come from ``meta``.
    """
    md = _pb.MessageMetadata(
        producer_name=meta.producer_name, sequence_id=meta.sequence_id, publish_time=meta.publish_time_ms
    )
    for key, text in meta.properties.items():
        md.properties.add(key=key, value=text)
    md.replicate_to.extend(meta.replicate_to)
    for name, value in present.items():
        setattr(md, name, value)
    if compression is not None:
        md.compression = compression  # type: ignore[assignment]  # the enum's number
    for raw in encryption_keys:
        md.encryption_keys.add().MergeFromString(raw)
    return int(md.ByteSize())


def decode_rest_entry(
    headers: Iterable[Sequence[str]], body: bytes, ledger_id: int, entry_id: int
) -> RestEntry:
    """Rebuild one entry from the entry endpoint's response (``headers`` as ``[name, value]`` pairs).

    Raises :class:`~pulsar_model.errors.EntryDecodeError` (``bad_metadata``, or the batch/marker codes of
    the shared builder) for a response no broker sends: a malformed header, a missing required field,
    an ``X-Pulsar-Message-ID`` naming another position.
    """
    h = _Headers(headers)
    message_id = h.one("x-pulsar-message-id")
    if message_id is not None and message_id.strip() != f"{ledger_id}:{entry_id}":
        raise _error(f"X-Pulsar-Message-ID {message_id!r} is not the requested entry {ledger_id}:{entry_id}")
    producer_name = h.one("x-pulsar-producer-name")
    sequence_id = h.u64("x-pulsar-sequence-id")
    publish_time = h.time_ms("x-pulsar-publish-time")
    missing = [
        n
        for n, v in (
            ("producer-name", producer_name),
            ("sequence-id", sequence_id),
            ("publish-time", publish_time),
        )
        if v is None
    ]
    if missing or producer_name is None or sequence_id is None or publish_time is None:
        raise _error(
            f"the response misses the required metadata header(s) X-Pulsar-{', X-Pulsar-'.join(missing)}"
        )
    compression_name = h.one("x-pulsar-compression")
    compression = 0
    if compression_name is not None:
        try:
            compression = COMPRESSION_NAMES.index(compression_name.strip().upper())
        except ValueError:
            raise EntryDecodeError(
                "bad_compression",
                f"X-Pulsar-compression {compression_name!r} is not one of {', '.join(COMPRESSION_NAMES)}",
            ) from None
    num_chunks = h.long("x-pulsar-num-chunks-from-msg", _I32_MIN, _I32_MAX)
    properties, listed = _properties(h, num_chunks is not None)
    encryption_keys = [
        _b64("X-Pulsar-Base64-encryption-keys", v) for v in h.all("x-pulsar-base64-encryption-keys")
    ]
    for index, raw in enumerate(encryption_keys):
        try:
            _pb.EncryptionKeys.FromString(raw)
        except Exception:  # any parse failure means a corrupt header
            raise _error(
                f"X-Pulsar-Base64-encryption-keys #{index} does not parse as EncryptionKeys"
            ) from None
    is_encrypted = h.boolean("x-pulsar-is-encrypted")
    if is_encrypted is not None and is_encrypted != bool(encryption_keys):
        raise _error(
            f"X-Pulsar-Is-Encrypted {is_encrypted} disagrees with {len(encryption_keys)} "
            "X-Pulsar-Base64-encryption-keys header(s)"
        )
    schema_version = h.b64("x-pulsar-base64-schema-version")
    if schema_version is None:  # the spelling pulsar-client-admin's TopicsImpl reads
        schema_version = h.b64("x-pulsar-base64-schema-version-b64encoded")
    meta = EntryMetadata(
        producer_name=producer_name,
        sequence_id=sequence_id,
        publish_time_ms=publish_time % _U64,
        properties=properties,
        replicated_from=h.one("x-pulsar-replicated-from"),
        partition_key=h.one("x-pulsar-partition-key"),
        partition_key_b64_encoded=bool(h.boolean("x-pulsar-partition-key-b64-encoded")),
        ordering_key=h.b64("x-pulsar-base64-ordering-key"),
        replicate_to=tuple(h.all("x-pulsar-replicated-to")),
        compression=compression,
        uncompressed_size=h.long("x-pulsar-uncompressed-size", 0, _U32_MAX),
        num_messages_in_batch=h.long("x-pulsar-num-batch-message", _I32_MIN, _I32_MAX),
        event_time=None if (t := h.time_ms("x-pulsar-event-time")) is None else t % _U64,
        deliver_at_time_ms=h.time_ms("x-pulsar-deliver-at-time"),
        marker_type=h.long("x-pulsar-marker-type", _I32_MIN, _I32_MAX),
        txnid_most_bits=h.u64("x-pulsar-txnid-most-bits"),
        txnid_least_bits=h.u64("x-pulsar-txnid-least-bits"),
        null_value=bool(h.boolean("x-pulsar-null-value")),
        null_partition_key=bool(h.boolean("x-pulsar-null-partition-key")),
        schema_version=schema_version,
        highest_sequence_id=h.u64("x-pulsar-highest-sequence-id"),
        uuid=h.one("x-pulsar-uuid"),
        num_chunks_from_msg=num_chunks,
        total_chunk_msg_size=h.long("x-pulsar-total-chunk-msg-size", _I32_MIN, _I32_MAX),
        chunk_id=h.long("x-pulsar-chunk-id", _I32_MIN, _I32_MAX),
        encryption=bool(encryption_keys),
    )
    present: dict[str, object] = {
        field: value
        for field, value in (
            ("replicated_from", meta.replicated_from),
            ("partition_key", meta.partition_key),
            ("partition_key_b64_encoded", h.boolean("x-pulsar-partition-key-b64-encoded")),
            ("ordering_key", meta.ordering_key),
            ("uncompressed_size", meta.uncompressed_size),
            ("num_messages_in_batch", meta.num_messages_in_batch),
            ("event_time", meta.event_time),
            ("schema_version", meta.schema_version),
            ("deliver_at_time", meta.deliver_at_time_ms),
            ("marker_type", meta.marker_type),
            ("txnid_least_bits", meta.txnid_least_bits),
            ("txnid_most_bits", meta.txnid_most_bits),
            ("highest_sequence_id", meta.highest_sequence_id),
            ("null_value", h.boolean("x-pulsar-null-value")),
            ("uuid", meta.uuid),
            ("num_chunks_from_msg", meta.num_chunks_from_msg),
            ("total_chunk_msg_size", meta.total_chunk_msg_size),
            ("chunk_id", meta.chunk_id),
            ("null_partition_key", h.boolean("x-pulsar-null-partition-key")),
            ("encryption_algo", h.one("x-pulsar-encryption-algo")),
            ("encryption_param", h.b64("x-pulsar-base64-encryption-param")),
        )
        if value is not None
    }
    bem_timestamp = h.time_ms("x-pulsar-broker-entry-metadata-timestamp")
    bem_index = h.u64("x-pulsar-broker-entry-metadata-index")
    broker_entry = None
    bem_section = 0
    if bem_timestamp is not None or bem_index is not None:
        broker_entry = BrokerEntry(None if bem_timestamp is None else bem_timestamp % _U64, bem_index)
        bem = _pb.BrokerEntryMetadata()
        if broker_entry.broker_timestamp_ms is not None:
            bem.broker_timestamp = broker_entry.broker_timestamp_ms
        if bem_index is not None:
            bem.index = bem_index
        bem_section = 2 + 4 + int(bem.ByteSize())

    unrecovered: set[str] = set()
    if listed > 1:
        unrecovered.add("property_order")
    # The body is the stored payload when nothing was decompressed (no codec, or encrypted: newer brokers
    # skip decompression of encrypted payloads; older ones ran the codec, so then it is unknown).
    stored_payload: int | None = len(body) if compression == 0 else None
    metadata_size = _metadata_size(
        meta, present, encryption_keys, None if compression_name is None else compression
    )
    batch_size = h.long("x-pulsar-batch-size", 0)
    total: int | None = None
    has_checksum: bool | None = None
    if batch_size is not None and meta.num_messages_in_batch is not None:
        total = batch_size + metadata_size
        if stored_payload is not None:
            rest = total - bem_section - 4 - metadata_size - stored_payload
            if rest in (0, 6):
                has_checksum = rest == 6
            else:
                # the headers do not add up to the size the broker reported: trust neither
                total = None
    if total is None:
        unrecovered.add("entry_size_bytes")
    if has_checksum is None:
        unrecovered.add("has_checksum")
    if stored_payload is None:
        unrecovered.add("payload_size_bytes")
    entry = entry_from_metadata(
        meta,
        body,
        total_size=total,
        has_checksum=has_checksum,
        checksum_ok=None,
        broker_entry=broker_entry,
        metadata_size=metadata_size,
        payload_size=stored_payload,
    )
    return RestEntry(
        entry,
        tuple(sorted(unrecovered)),
        h.boolean("x-pulsar-txn-aborted"),
        h.boolean("x-pulsar-txn-uncommitted"),
    )
