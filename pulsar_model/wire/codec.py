"""Pulsar's stored-entry format: encode and decode one BookKeeper ledger entry.

Layout of one stored entry (docs §4.3, §5.4-5.5, §8.2-8.3)::

    [0x0e02][u32 size][BrokerEntryMetadata]        optional, prepended by the broker
    [0x0e01][u32 CRC32C of everything after it]    optional (entries written without checksum)
    [u32 size][MessageMetadata][payload]

All integers are big-endian. A batch payload (``num_messages_in_batch`` present), once decompressed,
is ``num_messages_in_batch`` times ``[u32 size][SingleMessageMetadata][payload_size bytes]``.

Integer conventions (documented once, used everywhere):

* protobuf ``uint64`` fields (``sequence_id``, ``publish_time``, ``txnid_*_bits``, broker index ...)
  are returned **unsigned**, as stored: a transaction marker's ``sequence_id`` (Java ``-1``) decodes as
  ``2**64 - 1``, and transaction ids ``>= 2**63`` stay ``>= 2**63``. Use :func:`to_signed64` to get the
  Java ``long`` (e.g. before putting the value into a Spark ``bigint`` column). Encoders accept any value
  in ``[-2**63, 2**64)`` and store it modulo ``2**64``.
* Positions (ledger id, entry id) inside markers and :class:`MessageId` are Java longs and decode as
  **signed** values (``-1`` stays ``-1``, docs §0.1).

Decoding is one call per entry and is meant to run inside Spark Arrow UDFs: results are
``NamedTuple`` values (cheap to build, immutable), metadata is read by a small protobuf wire scanner
(see "decoding" below) that builds nothing for absent fields, and the generated protobuf classes are
used for encoding and for the rare marker payloads.
"""

from __future__ import annotations

import operator
import struct
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, NamedTuple

import cramjam
import google_crc32c
from google.protobuf import descriptor as _descriptor
from google.protobuf.message import DecodeError

from pulsar_model.errors import EntryDecodeError, EntryEncodeError
from pulsar_model.wire._generated import pulsar_api_pb2 as _pb
from pulsar_model.wire.markers import (
    REPLICATED_SUBSCRIPTION_MARKER_TYPES,
    TXN_MARKER_TYPES,
    Marker,
    Snapshot,
    SnapshotRequest,
    SnapshotResponse,
    SubscriptionUpdate,
    TxnMarker,
    decode_marker_payload,
    encode_marker_payload,
)

__all__ = [
    "COMPRESSION_NAMES",
    "DECODE_ERROR_CODES",
    "MAGIC_BROKER_ENTRY_METADATA",
    "MAGIC_CRC32C",
    "MARKER_PRODUCER_NAME",
    "TXN_MARKER_PRODUCER_NAME",
    "TXN_MARKER_SEQUENCE_ID",
    "BatchItem",
    "BrokerEntry",
    "ChecksumMode",
    "DecodedEntry",
    "DecodedMessage",
    "EntryMetadata",
    "MessageId",
    "decode_entry",
    "decode_message_id",
    "encode_batch_entry",
    "encode_marker_entry",
    "encode_message_entry",
    "encode_message_id",
    "entry_from_metadata",
    "to_signed64",
]

# --- constants ------------------------------------------------------------------------------------

# The envelope's magic numbers are Pulsar's (Commands.java); docs §4.3 only names the CRC32C checksum.
#: Magic that starts the optional broker-entry-metadata section, prepended by the broker when
#: broker entry metadata is enabled; it precedes the checksum section.
MAGIC_BROKER_ENTRY_METADATA: Final = 0x0E02
#: Magic that starts the optional checksum section (CRC32C over metadata size + metadata + payload);
#: entries written without checksum start directly with the metadata size.
MAGIC_CRC32C: Final = 0x0E01
_MAGIC_BEM_BYTES: Final = MAGIC_BROKER_ENTRY_METADATA.to_bytes(2, "big")
_MAGIC_CRC_BYTES: Final = MAGIC_CRC32C.to_bytes(2, "big")

#: Producer name of replicated-subscription marker entries (docs §4.3).
MARKER_PRODUCER_NAME: Final = "pulsar.marker"
#: Producer name of transaction marker entries (docs §8.3).
TXN_MARKER_PRODUCER_NAME: Final = "pulsar.txn.marker"
#: Transaction markers are written with sequence id -1 (a Java long in a uint64 field, docs §8.3).
TXN_MARKER_SEQUENCE_ID: Final = (1 << 64) - 1

#: ``CompressionType`` names by enum number (MessageMetadata.compression = 8).
COMPRESSION_NAMES: Final = ("NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY")
_COMPRESSION_NUMBERS: Final = {name: number for number, name in enumerate(COMPRESSION_NAMES)}
_NONE, _LZ4, _ZLIB, _ZSTD, _SNAPPY = range(5)

#: LZ4 block format cannot expand data more than ~255x (one length byte adds at most 255 bytes);
#: a larger ``uncompressed_size`` is corrupt and must not be allocated.
_LZ4_MAX_RATIO: Final = 255

#: Every ``EntryDecodeError.code``; ``unknown_marker_type`` (and ``bad_marker`` when
#: ``strict_markers=False``) is reported in ``DecodedEntry.marker_error`` instead of being raised.
DECODE_ERROR_CODES: Final = frozenset(
    {
        "empty",
        "bad_magic",
        "bad_checksum",
        "truncated",
        "bad_metadata",
        "bad_batch",
        "bad_compression",
        "bad_marker",
        "unknown_marker_type",
    }
)

_U64_MASK: Final = (1 << 64) - 1
_I64_SIGN: Final = 1 << 63
_U32 = struct.Struct(">I")
_U32_MAX: Final = (1 << 32) - 1

ChecksumMode = Literal["raise", "flag", "skip"]


def to_signed64(value: int) -> int:
    """Reinterpret an unsigned 64-bit value as a Java ``long`` (``2**64 - 1`` -> ``-1``)."""
    return value - (1 << 64) if value & _I64_SIGN else value


# --- public value types ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokerEntry:
    """Broker entry metadata (magic 0x0e02): broker publish timestamp and topic-level entry index."""

    broker_timestamp_ms: int | None = None
    index: int | None = None


@dataclass(frozen=True, slots=True)
class BatchItem:
    """One message of a batch entry, as given to :func:`encode_batch_entry`."""

    key: str | None = None
    payload: bytes = b""
    null_value: bool = False
    compacted_out: bool = False
    properties: Mapping[str, str] = field(default_factory=dict)
    sequence_id: int | None = None
    event_time_ms: int | None = None
    ordering_key: bytes | None = None
    key_b64_encoded: bool = False


class DecodedMessage(NamedTuple):
    """One message of a decoded entry: one per batch slot, or the single message of a non-batched entry.

    ``batch_index`` is -1 for non-batched, marker and encrypted entries. ``payload_size`` is the
    decompressed payload length (0 for null values and compacted-out slots); ``payload`` is filled
    only with ``decode_entry(..., include_payload=True)``.
    """

    batch_index: int
    key: str | None
    key_b64_encoded: bool
    ordering_key: bytes | None
    payload_size: int
    null_value: bool
    null_partition_key: bool
    compacted_out: bool
    properties: dict[str, str]
    sequence_id: int | None
    event_time_ms: int | None
    marker_type: int | None
    payload: bytes | None


class DecodedEntry(NamedTuple):
    """One decoded stored entry (docs §4.3, §5.4, §8.3): its envelope, MessageMetadata and messages.

    Absent optional metadata fields are ``None`` (not the protobuf default). ``payload_size`` is the
    number of stored payload bytes after the metadata (compressed size); ``uncompressed_size`` is the
    metadata field as written. ``messages`` has one item per batch slot (``is_batch``), else exactly one
    (marker entries and encrypted entries included: an encrypted payload cannot be split, so its one
    message takes its size from ``uncompressed_size``). ``marker`` is the decoded marker payload for
    marker types 10-13 and 20-22; ``marker_error``/``marker_error_message`` explain a marker entry
    that was kept without a decoded marker (``unknown_marker_type``, or ``bad_marker`` with
    ``strict_markers=False``). From a stored entry every envelope value is known; an entry rebuilt from
    the admin REST endpoint's headers (:mod:`pulsar_model.wire.rest`) has None where the response
    cannot tell (``total_size``, ``has_checksum``, ``metadata_size``, ``payload_size``).
    """

    total_size: int | None
    has_checksum: bool | None
    checksum_ok: bool | None
    broker_entry: BrokerEntry | None
    metadata_size: int | None
    payload_size: int | None
    producer_name: str
    sequence_id: int
    publish_time_ms: int
    properties: dict[str, str]
    replicated_from: str | None
    partition_key: str | None
    partition_key_b64_encoded: bool
    ordering_key: bytes | None
    replicate_to: tuple[str, ...]
    compression: str
    uncompressed_size: int | None
    num_messages_in_batch: int | None
    is_batch: bool
    event_time_ms: int | None
    deliver_at_time_ms: int | None
    marker_type: int | None
    txnid_most_bits: int | None
    txnid_least_bits: int | None
    null_value: bool
    null_partition_key: bool
    schema_version: bytes | None
    highest_sequence_id: int | None
    uuid: str | None
    num_chunks_from_msg: int | None
    total_chunk_msg_size: int | None
    chunk_id: int | None
    encryption: bool
    messages: tuple[DecodedMessage, ...]
    marker: Marker | None
    marker_error: str | None
    marker_error_message: str | None


class EntryMetadata(NamedTuple):
    """A decoded ``MessageMetadata`` (the fields :class:`DecodedEntry` reports), whatever its source.

    Filled by :func:`decode_entry` from a stored entry's protobuf bytes and by
    :func:`pulsar_model.wire.rest.metadata_from_headers` from the admin REST entry endpoint's headers;
    :func:`entry_from_metadata` turns either into a :class:`DecodedEntry`. Integers follow the module's
    conventions (uint64 fields unsigned, ``deliver_at_time_ms`` signed); ``compression`` is the
    ``CompressionType`` number; ``encryption`` is whether ``encryption_keys`` is non-empty.
    """

    producer_name: str
    sequence_id: int
    publish_time_ms: int
    properties: dict[str, str]
    replicated_from: str | None
    partition_key: str | None
    partition_key_b64_encoded: bool
    ordering_key: bytes | None
    replicate_to: tuple[str, ...]
    compression: int
    uncompressed_size: int | None
    num_messages_in_batch: int | None
    event_time: int | None
    deliver_at_time_ms: int | None
    marker_type: int | None
    txnid_most_bits: int | None
    txnid_least_bits: int | None
    null_value: bool
    null_partition_key: bool
    schema_version: bytes | None
    highest_sequence_id: int | None
    uuid: str | None
    num_chunks_from_msg: int | None
    total_chunk_msg_size: int | None
    chunk_id: int | None
    encryption: bool


class MessageId(NamedTuple):
    """A ``MessageIdData`` (docs §7.1); ledger and entry ids as signed Java longs."""

    ledger_id: int
    entry_id: int
    partition: int = -1
    batch_index: int = -1


# Building a NamedTuple through its generated ``__new__`` costs a Python call; decode builds
# millions of them, so it goes through ``tuple.__new__`` directly (same result, ~2x cheaper).
_tuple_new = tuple.__new__


# --- decoding: a minimal protobuf wire scanner -------------------------------------------------------
#
# The hot path builds no protobuf objects: upb parses fast, but reading ~25 optional fields back
# through ``HasField`` costs more than scanning the few bytes of metadata in Python. The scanner
# applies the protobuf wire rules upb applies: last value wins for singular fields, a known field
# number sent with another wire type is an unknown field, unknown fields (groups included) are
# skipped, varints are truncated to 64 bits and then to the field's width. Two deliberate
# differences, both stricter: a string that is not UTF-8 is an error (upb returns bytes for proto2
# strings), and so is a compression value outside the enum (upb hides it among unknown fields and
# reports NONE). tests/test_wire.py compares both scanners with the generated classes on random
# inputs. Tags are computed from the generated descriptors: the .proto files stay the single
# source of field numbers.


class _WireError(Exception):
    """Malformed protobuf bytes; turned into an EntryDecodeError with the caller's code."""


_FD = _descriptor.FieldDescriptor
_LENGTH_DELIMITED_TYPES = frozenset({_FD.TYPE_STRING, _FD.TYPE_BYTES, _FD.TYPE_MESSAGE})
_MAX_FIELD_NUMBER: Final = (1 << 29) - 1
_MAX_GROUP_DEPTH: Final = 100


def _tag(message: Any, name: str) -> int:
    """The wire tag (field number << 3 | wire type) of field ``name`` of a generated message class."""
    fd = message.DESCRIPTOR.fields_by_name[name]
    return int(fd.number << 3 | (2 if fd.type in _LENGTH_DELIMITED_TYPES else 0))


class _Layout(NamedTuple):
    """How _scan reads one message type: its tags in a fixed order and which of them repeat."""

    template: dict[int, Any]  # every tag -> None; _scan copies it, so absent fields read None
    repeated: frozenset[int]
    values: Callable[[dict[int, Any]], Any]  # fields -> tuple of values in tag order


def _layout(message: Any, names: Sequence[str]) -> _Layout:
    tags = [_tag(message, name) for name in names]
    fields = message.DESCRIPTOR.fields_by_name
    repeated = frozenset(tag for tag, name in zip(tags, names, strict=True) if fields[name].is_repeated)
    return _Layout(dict.fromkeys(tags), repeated, operator.itemgetter(*tags))


# The order of these names is the order in which decode_entry unpacks the values.
_MM = _layout(
    _pb.MessageMetadata,
    (
        "producer_name",
        "sequence_id",
        "publish_time",
        "properties",
        "replicated_from",
        "partition_key",
        "replicate_to",
        "compression",
        "uncompressed_size",
        "num_messages_in_batch",
        "event_time",
        "encryption_keys",
        "schema_version",
        "partition_key_b64_encoded",
        "ordering_key",
        "deliver_at_time",
        "marker_type",
        "txnid_least_bits",
        "txnid_most_bits",
        "highest_sequence_id",
        "null_value",
        "uuid",
        "num_chunks_from_msg",
        "total_chunk_msg_size",
        "chunk_id",
        "null_partition_key",
    ),
)
_REQUIRED_MM: Final = (("producer_name", 0), ("sequence_id", 1), ("publish_time", 2))
_KV = _layout(_pb.KeyValue, ("key", "value"))
_EK = _layout(_pb.EncryptionKeys, ("key", "value", "metadata"))
_BEM = _layout(_pb.BrokerEntryMetadata, ("broker_timestamp", "index"))

# SingleMessageMetadata is read once per batch slot by the specialised loop in _split_batch.
_S = _pb.SingleMessageMetadata
_S_PROPERTIES: Final = _tag(_S, "properties")
_S_PARTITION_KEY: Final = _tag(_S, "partition_key")
_S_PAYLOAD_SIZE: Final = _tag(_S, "payload_size")
_S_COMPACTED_OUT: Final = _tag(_S, "compacted_out")
_S_EVENT_TIME: Final = _tag(_S, "event_time")
_S_KEY_B64: Final = _tag(_S, "partition_key_b64_encoded")
_S_ORDERING_KEY: Final = _tag(_S, "ordering_key")
_S_SEQUENCE_ID: Final = _tag(_S, "sequence_id")
_S_NULL_VALUE: Final = _tag(_S, "null_value")
_S_NULL_PARTITION_KEY: Final = _tag(_S, "null_partition_key")


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Decode one varint at ``pos`` (at most 10 bytes, truncated to 64 bits); returns (value, next pos).

    Reading past the end raises IndexError, which the scanners report as truncation.
    """
    result = 0
    shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result & _U64_MASK, pos
        shift += 7
        if shift >= 70:
            raise _WireError("varint longer than 10 bytes")


def _long_tag(buf: bytes, pos: int) -> tuple[int, int]:
    """A tag that takes more than one byte (field numbers >= 16), starting at ``pos``."""
    start = pos
    tag, pos = _varint(buf, pos)
    if pos - start > 5 or tag >> 3 > _MAX_FIELD_NUMBER:
        raise _WireError(f"field number {tag >> 3} is out of range")
    return tag, pos


def _skip_field(buf: bytes, pos: int, tag: int) -> int:
    """Skip the value of an unknown field of wire type 1, 3 or 5 (0 and 2 are read inline)."""
    wire_type = tag & 7
    if wire_type == 1:
        pos += 8
    elif wire_type == 5:
        pos += 4
    elif wire_type == 3:
        return _skip_group(buf, pos, tag >> 3)
    elif wire_type == 4:
        raise _WireError(f"END_GROUP of field {tag >> 3} without a group")
    elif wire_type == 0:
        return _varint(buf, pos)[1]
    elif wire_type == 2:
        length, pos = _varint(buf, pos)
        pos += length
    else:
        raise _WireError(f"invalid wire type {wire_type} (field {tag >> 3})")
    if pos > len(buf):
        raise _WireError(f"field {tag >> 3} runs past the end of the {len(buf)}-byte message")
    return pos


def _skip_group(buf: bytes, pos: int, field_number: int) -> int:
    """Position after the END_GROUP that closes group ``field_number`` (its START_GROUP ends at ``pos``).

    Iterative, with upb's nesting limit, so hostile input cannot exhaust the Python stack.
    """
    open_groups = [field_number]
    end = len(buf)
    while open_groups:
        if pos >= end:
            raise _WireError(f"group {open_groups[-1]} is not closed")
        tag, pos = _long_tag(buf, pos)
        if tag < 8:
            raise _WireError("field number 0")
        wire_type = tag & 7
        if wire_type == 4:
            if tag >> 3 != open_groups[-1]:
                raise _WireError(f"group {open_groups[-1]} closed by END_GROUP of field {tag >> 3}")
            open_groups.pop()
        elif wire_type == 3:
            if len(open_groups) >= _MAX_GROUP_DEPTH:
                raise _WireError(f"groups nested deeper than {_MAX_GROUP_DEPTH}")
            open_groups.append(tag >> 3)
        else:
            pos = _skip_field(buf, pos, tag)
    return pos


def _scan(buf: bytes, layout: _Layout) -> Any:
    """Values of one serialized message, as a tuple in ``layout`` order (None for absent fields).

    Varint fields give an unsigned 64-bit int, length-delimited ones ``bytes`` (a list of them for
    repeated fields). Raises _WireError on malformed bytes.
    """
    fields = layout.template.copy()
    repeated = layout.repeated
    pos = 0
    end = len(buf)
    try:
        while pos < end:
            tag = buf[pos]
            pos += 1
            if tag > 0x7F:
                tag, pos = _long_tag(buf, pos - 1)
            if tag < 8:
                raise _WireError("field number 0")
            wire_type = tag & 7
            if wire_type == 0:
                value = buf[pos]
                pos += 1
                if value > 0x7F:
                    value, pos = _varint(buf, pos - 1)
                fields[tag] = value
            elif wire_type == 2:
                length = buf[pos]
                pos += 1
                if length > 0x7F:
                    length, pos = _varint(buf, pos - 1)
                if length > end - pos:
                    raise _WireError(f"a {length}-byte field runs past the end of the {end}-byte message")
                chunk = buf[pos : pos + length]
                pos += length
                if tag in repeated:
                    values = fields[tag]
                    if values is None:
                        fields[tag] = [chunk]
                    else:
                        values.append(chunk)
                else:
                    fields[tag] = chunk
            else:
                pos = _skip_field(buf, pos, tag)
    except IndexError:
        raise _WireError(f"the {end}-byte message ends inside a field") from None
    return layout.values(fields)


def _i32(value: int) -> int:
    """An int32 field's value from its (64-bit, sign-extended) varint."""
    return ((value & 0xFFFFFFFF) ^ 0x80000000) - 0x80000000


def _error(code: str, message: str) -> EntryDecodeError:
    return EntryDecodeError(code, message)


def _text(value: bytes, where: str) -> str:
    try:
        return value.decode()
    except UnicodeDecodeError:
        raise _error("bad_metadata", f"{where} is not valid UTF-8: {value!r}") from None


def _properties(items: list[bytes], where: str, parse_code: str = "bad_metadata") -> dict[str, str]:
    """KeyValue list -> dict (a repeated key keeps its last value).

    Malformed bytes raise ``parse_code`` (``bad_batch`` inside a batch slot); a missing key or value
    and non-UTF-8 text raise ``bad_metadata``. Every entry is parsed before any is checked, as protobuf's
    generated classes parse the whole message before they check required fields: malformed bytes in a
    later entry win over a missing key in an earlier one.
    """
    pairs = []
    for raw in items:
        try:
            pairs.append(_scan(raw, _KV))
        except _WireError as exc:
            raise _error(parse_code, f"{where}.properties entry does not parse: {exc}") from None
    out: dict[str, str] = {}
    for key, value in pairs:
        if key is None or value is None:
            raise _error("bad_metadata", f"{where}.properties entry misses its required key or value")
        out[_text(key, f"{where} property key")] = _text(value, f"{where} property value")
    return out


def _check_encryption_keys(items: list[bytes]) -> None:
    for index, raw in enumerate(items):
        try:
            key, value, metadata = _scan(raw, _EK)
        except _WireError as exc:
            raise _error("bad_metadata", f"encryption_keys[{index}] does not parse: {exc}") from None
        if key is None or value is None:
            raise _error("bad_metadata", f"encryption_keys[{index}] misses its required key or value")
        _text(key, f"encryption_keys[{index}].key")
        if metadata:
            _properties(metadata, f"encryption_keys[{index}]")


def _decompress(codec: int, payload: bytes, expected: int | None) -> bytes:
    """Decompress one payload; ``expected`` is ``uncompressed_size`` (None when absent)."""
    name = COMPRESSION_NAMES[codec]
    if expected == 0 and not payload:
        return b""
    try:
        if codec == _ZLIB:
            inflater = zlib.decompressobj()
            if expected is None:
                out = inflater.decompress(payload) + inflater.flush()
            else:
                out = inflater.decompress(payload, expected + 1)
        elif codec == _LZ4:
            if expected is None:
                raise _error("bad_compression", "LZ4 payload without uncompressed_size cannot be decoded")
            if expected > _LZ4_MAX_RATIO * len(payload) + 16:
                raise _error(
                    "bad_compression",
                    f"uncompressed_size {expected} is impossible for a {len(payload)}-byte LZ4 block",
                )
            buf = bytearray(expected)
            written = cramjam.lz4.decompress_block_into(payload, buf)
            if written != expected:
                raise _error(
                    "bad_compression",
                    f"LZ4 block decompressed to {written} bytes, uncompressed_size says {expected}",
                )
            return bytes(buf)
        elif codec == _SNAPPY:
            declared = cramjam.snappy.decompress_raw_len(payload)
            if expected is not None and declared != expected:
                raise _error(
                    "bad_compression",
                    f"snappy block declares {declared} bytes, uncompressed_size says {expected}",
                )
            out = bytes(cramjam.snappy.decompress_raw(payload))
        else:  # ZSTD
            out = bytes(cramjam.zstd.decompress(payload))
    except EntryDecodeError:
        raise
    except Exception as exc:  # zlib.error, cramjam.DecompressionError, ...: all mean corrupt input
        raise _error(
            "bad_compression", f"{name} payload of {len(payload)} bytes does not decompress: {exc}"
        ) from None
    if expected is not None and len(out) != expected:
        raise _error(
            "bad_compression",
            f"{name} payload decompressed to {len(out)} bytes, uncompressed_size says {expected}",
        )
    return out


def _split_batch(buf: bytes, count: int, include_payload: bool) -> tuple[DecodedMessage, ...]:
    """Split a decompressed batch payload into ``count`` messages (docs §5.4); one per batch slot.

    Each slot's SingleMessageMetadata is read by an inline copy of _scan's loop that assigns locals
    instead of filling a dict: this runs once per message and dominates batch decoding time.
    """
    total = len(buf)
    if count < 0:
        raise _error("bad_batch", f"num_messages_in_batch is negative: {count}")
    if count * 4 > total:
        raise _error(
            "bad_batch",
            f"num_messages_in_batch {count} cannot fit in a {total}-byte batch payload "
            "(each message takes at least 4 bytes)",
        )
    unpack = _U32.unpack_from
    messages: list[DecodedMessage] = []
    append = messages.append
    pos = 0
    index = 0
    try:
        for index in range(count):
            if pos + 4 > total:
                raise _error(
                    "bad_batch",
                    f"message {index} of {count}: size field at batch offset {pos} is past the end "
                    f"of the {total}-byte batch payload",
                )
            meta_end = pos + 4 + unpack(buf, pos)[0]
            if meta_end > total:
                raise _error(
                    "bad_batch",
                    f"message {index} of {count}: metadata size {meta_end - pos - 4} at batch offset "
                    f"{pos} runs past the end of the {total}-byte batch payload",
                )
            meta = buf[pos + 4 : meta_end]
            end = meta_end - pos - 4
            props: list[bytes] | None = None
            key = size = ordering_key = sequence_id = event_time = None
            compacted_out = b64 = null_value = null_partition_key = 0
            p = 0
            while p < end:
                tag = meta[p]
                p += 1
                if tag > 0x7F:
                    tag, p = _long_tag(meta, p - 1)
                if tag < 8:
                    raise _WireError("field number 0")
                wire_type = tag & 7
                if wire_type == 0:
                    value = meta[p]
                    p += 1
                    if value > 0x7F:
                        value, p = _varint(meta, p - 1)
                    if tag == _S_PAYLOAD_SIZE:
                        size = value
                    elif tag == _S_COMPACTED_OUT:
                        compacted_out = value
                    elif tag == _S_NULL_VALUE:
                        null_value = value
                    elif tag == _S_EVENT_TIME:
                        event_time = value
                    elif tag == _S_SEQUENCE_ID:
                        sequence_id = value
                    elif tag == _S_KEY_B64:
                        b64 = value
                    elif tag == _S_NULL_PARTITION_KEY:
                        null_partition_key = value
                elif wire_type == 2:
                    length = meta[p]
                    p += 1
                    if length > 0x7F:
                        length, p = _varint(meta, p - 1)
                    if length > end - p:
                        raise _WireError(f"a {length}-byte field runs past the end of the {end}-byte message")
                    if tag == _S_PARTITION_KEY:
                        key = meta[p : p + length]
                    elif tag == _S_PROPERTIES:
                        if props is None:
                            props = [meta[p : p + length]]
                        else:
                            props.append(meta[p : p + length])
                    elif tag == _S_ORDERING_KEY:
                        ordering_key = meta[p : p + length]
                    p += length
                else:
                    p = _skip_field(meta, p, tag)
            if size is None:
                raise _error(
                    "bad_batch", f"message {index} of {count}: SingleMessageMetadata has no payload_size"
                )
            size = ((size & 0xFFFFFFFF) ^ 0x80000000) - 0x80000000  # int32
            pos = meta_end + size
            if size < 0 or pos > total:
                raise _error(
                    "bad_batch",
                    f"message {index} of {count}: payload_size {size} at batch offset {meta_end} "
                    f"does not fit in the {total}-byte batch payload",
                )
            append(
                _tuple_new(
                    DecodedMessage,
                    (
                        index,
                        None if key is None else key.decode(),
                        bool(b64),
                        ordering_key,
                        size,
                        bool(null_value),
                        bool(null_partition_key),
                        bool(compacted_out),
                        _properties(props, f"batch message {index}", "bad_batch") if props else {},
                        sequence_id,
                        event_time,
                        None,
                        buf[meta_end:pos] if include_payload else None,
                    ),
                )
            )
    except (_WireError, IndexError) as exc:
        detail = exc if isinstance(exc, _WireError) else "it ends inside a field"
        raise _error(
            "bad_batch", f"message {index} of {count}: SingleMessageMetadata does not parse: {detail}"
        ) from None
    except UnicodeDecodeError:
        raise _error("bad_metadata", f"batch message {index}: partition_key is not valid UTF-8") from None
    if pos != total:
        raise _error(
            "bad_batch",
            f"{total - pos} trailing bytes after the {count} messages of a {total}-byte batch payload",
        )
    return tuple(messages)


def decode_entry(
    data: bytes | bytearray | memoryview,
    *,
    checksum_mode: ChecksumMode = "raise",
    include_payload: bool = False,
    strict_markers: bool = True,
) -> DecodedEntry:
    """Decode one stored ledger entry (docs §4.3, §5.4-5.5, §8.2-8.3); one result per entry.

    ``checksum_mode``: ``"raise"`` (default) raises ``bad_checksum`` on a CRC32C mismatch; ``"flag"``
    decodes anyway and sets ``checksum_ok=False``; ``"skip"`` does not compute it (``checksum_ok``
    is None, as for entries written without checksum). ``include_payload`` fills
    ``DecodedMessage.payload`` with the decompressed message bytes. ``strict_markers=False`` keeps a
    marker entry whose payload does not parse (``marker_error="bad_marker"``) instead of raising.

    Raises :class:`~pulsar_model.errors.EntryDecodeError` (and nothing else) for any malformed
    input; its ``code`` is one of :data:`DECODE_ERROR_CODES`.
    """
    if type(data) is not bytes:
        data = bytes(data)
    n = len(data)
    if n == 0:
        raise _error("empty", "entry has 0 bytes")
    pos = 0
    head = data[:2]
    broker_entry: BrokerEntry | None = None
    if head == _MAGIC_BEM_BYTES:
        if n < 6:
            raise _error(
                "bad_magic", f"broker-entry magic 0x0e02 in a {n}-byte entry with no room for its size"
            )
        end = 6 + _U32.unpack_from(data, 2)[0]
        if end > n:
            raise _error(
                "bad_magic",
                f"broker-entry magic 0x0e02 with size {end - 6} runs past the end of the {n}-byte entry",
            )
        try:
            broker_timestamp, broker_index = _scan(data[6:end], _BEM)
        except _WireError as exc:
            raise _error(
                "bad_metadata", f"BrokerEntryMetadata ({end - 6} bytes) does not parse: {exc}"
            ) from None
        broker_entry = BrokerEntry(broker_timestamp, broker_index)
        pos = end
        head = data[pos : pos + 2]
        if head == _MAGIC_BEM_BYTES:
            raise _error("bad_magic", f"second broker-entry magic 0x0e02 at offset {pos}")
    has_checksum = False
    checksum_ok: bool | None = None
    if head == _MAGIC_CRC_BYTES:
        if n < pos + 6:
            raise _error(
                "truncated", f"checksum section at offset {pos} needs 6 bytes, entry has {n - pos} left"
            )
        stored = _U32.unpack_from(data, pos + 2)[0]
        pos += 6
        has_checksum = True
        head = data[pos : pos + 2]
        if head in (_MAGIC_CRC_BYTES, _MAGIC_BEM_BYTES):
            raise _error("bad_magic", f"magic 0x{head.hex()} misplaced at offset {pos}, after the checksum")
        if checksum_mode != "skip":
            computed = google_crc32c.value(data[pos:])
            checksum_ok = computed == stored
            if not checksum_ok and checksum_mode == "raise":
                raise _error(
                    "bad_checksum",
                    f"checksum mismatch: stored 0x{stored:08x}, computed 0x{computed:08x} "
                    f"over {n - pos} bytes",
                )
    if n < pos + 4:
        raise _error("truncated", f"metadata size at offset {pos} needs 4 bytes, entry has {n - pos} left")
    metadata_size = _U32.unpack_from(data, pos)[0]
    meta_end = pos + 4 + metadata_size
    if meta_end > n:
        raise _error(
            "truncated",
            f"metadata size {metadata_size} at offset {pos} runs past the end of the {n}-byte entry",
        )
    try:
        values = _scan(data[pos + 4 : meta_end], _MM)
    except _WireError as exc:
        raise _error(
            "bad_metadata", f"MessageMetadata ({metadata_size} bytes) does not parse: {exc}"
        ) from None
    (producer_name, sequence_id, publish_time, props, replicated_from, partition_key, replicate_to, codec,
     uncompressed_size, num_messages, event_time, encryption_keys, schema_version, b64, ordering_key,
     deliver_at, marker_type, txn_least, txn_most, highest_sequence_id, null_value, uuid, num_chunks,
     total_chunk_size, chunk_id, null_partition_key) = values  # fmt: skip
    if producer_name is None or sequence_id is None or publish_time is None:
        missing = ", ".join(name for name, i in _REQUIRED_MM if values[i] is None)
        raise _error("bad_metadata", f"MessageMetadata misses required field(s) {missing}")
    try:
        producer_name = producer_name.decode()
        if replicated_from is not None:
            replicated_from = replicated_from.decode()
        if partition_key is not None:
            partition_key = partition_key.decode()
        replicate_to = () if replicate_to is None else tuple([c.decode() for c in replicate_to])
        if uuid is not None:
            uuid = uuid.decode()
    except UnicodeDecodeError as exc:
        raise _error("bad_metadata", f"a MessageMetadata string is not valid UTF-8: {exc.object!r}") from None
    properties = _properties(props, "MessageMetadata") if props else {}
    if encryption_keys:
        _check_encryption_keys(encryption_keys)
    if codec is None:
        codec = _NONE
    else:
        codec = _i32(codec)
        if not 0 <= codec < len(COMPRESSION_NAMES):
            raise _error(
                "bad_compression",
                f"unsupported compression type {codec} (known: {', '.join(COMPRESSION_NAMES)})",
            )
    if uncompressed_size is not None:
        uncompressed_size &= 0xFFFFFFFF
    if num_messages is not None:
        num_messages = _i32(num_messages)
    if marker_type is not None:
        marker_type = _i32(marker_type)
    null_value = bool(null_value)
    null_partition_key = bool(null_partition_key)
    b64 = bool(b64)

    meta = _tuple_new(
        EntryMetadata,
        (
            producer_name,
            sequence_id,
            publish_time,
            properties,
            replicated_from,
            partition_key,
            b64,
            ordering_key,
            replicate_to,
            codec,
            uncompressed_size,
            num_messages,
            event_time,
            None if deliver_at is None else to_signed64(deliver_at),
            marker_type,
            txn_most,
            txn_least,
            null_value,
            null_partition_key,
            schema_version,
            highest_sequence_id,
            uuid,
            None if num_chunks is None else _i32(num_chunks),
            None if total_chunk_size is None else _i32(total_chunk_size),
            None if chunk_id is None else _i32(chunk_id),
            bool(encryption_keys),
        ),
    )
    stored = data[meta_end:]
    content = stored if codec == _NONE or encryption_keys else _decompress(codec, stored, uncompressed_size)
    return entry_from_metadata(
        meta,
        content,
        total_size=n,
        has_checksum=has_checksum,
        checksum_ok=checksum_ok,
        broker_entry=broker_entry,
        metadata_size=metadata_size,
        payload_size=n - meta_end,
        include_payload=include_payload,
        strict_markers=strict_markers,
    )


def entry_from_metadata(
    meta: EntryMetadata,
    content: bytes,
    *,
    total_size: int | None,
    has_checksum: bool | None,
    checksum_ok: bool | None,
    broker_entry: BrokerEntry | None,
    metadata_size: int | None,
    payload_size: int | None,
    include_payload: bool = False,
    strict_markers: bool = True,
) -> DecodedEntry:
    """The entry of an already-decoded ``MessageMetadata``: batch split, marker payload, messages.

    The one place that turns metadata plus payload into messages and markers (docs §4.3, §5.4, §8.3):
    :func:`decode_entry` calls it after reading a stored entry's envelope and metadata, and the admin
    REST path (:mod:`pulsar_model.wire.rest`) after mapping the entry endpoint's headers onto
    :class:`EntryMetadata`. ``content`` is the *decompressed* payload (a batch container, a marker
    payload or a single message), or, for an encrypted entry, the payload as stored (it can be neither
    decompressed nor split without the key). The envelope values (``total_size``, ``has_checksum``,
    ``metadata_size``, ``payload_size``) are passed through; None means the source could not tell.
    """
    marker_type = meta.marker_type
    num_messages = meta.num_messages_in_batch
    marker: Marker | None = None
    marker_error: str | None = None
    marker_error_message: str | None = None
    messages: tuple[DecodedMessage, ...]
    if meta.encryption:
        # Compressed-then-encrypted: neither decompressible nor splittable without the key.
        size = meta.uncompressed_size
        messages = (
            _tuple_new(
                DecodedMessage,
                (
                    -1,
                    meta.partition_key,
                    meta.partition_key_b64_encoded,
                    meta.ordering_key,
                    (len(content) if payload_size is None else payload_size) if size is None else size,
                    meta.null_value,
                    meta.null_partition_key,
                    False,
                    meta.properties,
                    meta.sequence_id,
                    meta.event_time,
                    marker_type,
                    None,
                ),
            ),
        )
    else:
        if marker_type is not None:
            if marker_type in REPLICATED_SUBSCRIPTION_MARKER_TYPES or marker_type in TXN_MARKER_TYPES:
                try:
                    marker = decode_marker_payload(marker_type, content)
                except EntryDecodeError as exc:
                    if strict_markers:
                        raise
                    marker_error, marker_error_message = exc.code, exc.message
            else:
                marker_error = "unknown_marker_type"
                marker_error_message = (
                    f"marker_type {marker_type} is not a known MarkerType with a payload "
                    f"(known: {sorted(REPLICATED_SUBSCRIPTION_MARKER_TYPES | TXN_MARKER_TYPES)})"
                )
        if num_messages is not None and marker_type is None:
            messages = _split_batch(content, num_messages, include_payload)
        else:
            messages = (
                _tuple_new(
                    DecodedMessage,
                    (
                        -1,
                        meta.partition_key,
                        meta.partition_key_b64_encoded,
                        meta.ordering_key,
                        len(content),
                        meta.null_value,
                        meta.null_partition_key,
                        False,
                        meta.properties,
                        meta.sequence_id,
                        meta.event_time,
                        marker_type,
                        content if include_payload else None,
                    ),
                ),
            )

    return _tuple_new(
        DecodedEntry,
        (
            total_size,
            has_checksum,
            checksum_ok,
            broker_entry,
            metadata_size,
            payload_size,
            meta.producer_name,
            meta.sequence_id,
            meta.publish_time_ms,
            meta.properties,
            meta.replicated_from,
            meta.partition_key,
            meta.partition_key_b64_encoded,
            meta.ordering_key,
            meta.replicate_to,
            COMPRESSION_NAMES[meta.compression],
            meta.uncompressed_size,
            num_messages,
            num_messages is not None,
            meta.event_time,
            meta.deliver_at_time_ms,
            marker_type,
            meta.txnid_most_bits,
            meta.txnid_least_bits,
            meta.null_value,
            meta.null_partition_key,
            meta.schema_version,
            meta.highest_sequence_id,
            meta.uuid,
            meta.num_chunks_from_msg,
            meta.total_chunk_msg_size,
            meta.chunk_id,
            meta.encryption,
            messages,
            marker,
            marker_error,
            marker_error_message,
        ),
    )


def _missing(msg: Any) -> str:
    """The required fields a parsed protobuf message misses (upb does not check them on parse)."""
    return ", ".join(msg.FindInitializationErrors())


def decode_message_id(data: bytes) -> MessageId:
    """Decode a serialized ``MessageIdData`` (docs §7.1), e.g. the compaction horizon in ledger metadata."""
    msg = _pb.MessageIdData()
    try:
        msg.ParseFromString(bytes(data))
    except DecodeError as exc:
        raise _error("bad_metadata", f"MessageIdData ({len(data)} bytes) does not parse: {exc}") from None
    if not msg.IsInitialized():
        raise _error("bad_metadata", f"MessageIdData misses required field(s) {_missing(msg)}")
    return MessageId(
        to_signed64(msg.ledgerId), to_signed64(msg.entryId), int(msg.partition), int(msg.batch_index)
    )


# --- encoding -------------------------------------------------------------------------------------


def _u64(value: int, what: str) -> int:
    if type(value) is not int or not -(1 << 63) <= value <= _U64_MASK:
        raise EntryEncodeError(f"{what} must be an int in [-2**63, 2**64), got {value!r}")
    return value & _U64_MASK


def _compression_number(compression: str) -> int:
    try:
        return _COMPRESSION_NUMBERS[compression.upper()]
    except (KeyError, AttributeError):
        raise EntryEncodeError(
            f"unknown compression {compression!r}; use one of {', '.join(COMPRESSION_NAMES)}"
        ) from None


def _compress(codec: int, payload: bytes) -> bytes:
    if codec == _NONE:
        return payload
    if codec == _ZLIB:
        return zlib.compress(payload)
    if codec == _LZ4:
        return bytes(cramjam.lz4.compress_block(payload, store_size=False))
    if codec == _ZSTD:
        return bytes(cramjam.zstd.compress(payload))
    return bytes(cramjam.snappy.compress_raw(payload))


def _base_metadata(
    producer_name: str,
    sequence_id: int,
    publish_time_ms: int,
    replicated_from: str | None,
    replicate_to: Sequence[str],
    txn_id: tuple[int, int] | None,
    schema_version: bytes | None,
) -> Any:
    if not isinstance(producer_name, str):
        raise EntryEncodeError(f"producer_name must be a str, got {producer_name!r}")
    if isinstance(replicate_to, str):
        raise EntryEncodeError(
            f"replicate_to must be a sequence of cluster names, got the str {replicate_to!r}"
        )
    md = _pb.MessageMetadata(
        producer_name=producer_name,
        sequence_id=_u64(sequence_id, "sequence_id"),
        publish_time=_u64(publish_time_ms, "publish_time_ms"),
    )
    if replicated_from is not None:
        md.replicated_from = replicated_from
    md.replicate_to.extend(replicate_to)
    if txn_id is not None:
        if len(txn_id) != 2:
            raise EntryEncodeError(f"txn_id must be a (most_bits, least_bits) pair, got {txn_id!r}")
        md.txnid_most_bits = _u64(txn_id[0], "txn_id most bits")
        md.txnid_least_bits = _u64(txn_id[1], "txn_id least bits")
    if schema_version is not None:
        md.schema_version = schema_version
    return md


def _add_properties(target: Any, properties: Mapping[str, str] | None) -> None:
    if properties:
        for k, v in properties.items():
            target.add(key=k, value=v)


def _assemble(md: Any, payload: bytes, checksum: bool, broker_entry: BrokerEntry | None) -> bytes:
    meta: bytes = md.SerializeToString()
    body: bytes = _U32.pack(len(meta)) + meta + payload
    if checksum:
        body = _MAGIC_CRC_BYTES + _U32.pack(google_crc32c.value(body)) + body
    if broker_entry is not None:
        bem = _pb.BrokerEntryMetadata()
        if broker_entry.broker_timestamp_ms is not None:
            bem.broker_timestamp = _u64(broker_entry.broker_timestamp_ms, "broker_timestamp_ms")
        if broker_entry.index is not None:
            bem.index = _u64(broker_entry.index, "broker entry index")
        raw = bem.SerializeToString()
        body = _MAGIC_BEM_BYTES + _U32.pack(len(raw)) + raw + body
    return body


def encode_message_entry(
    *,
    producer_name: str,
    sequence_id: int,
    publish_time_ms: int,
    payload: bytes = b"",
    key: str | None = None,
    properties: Mapping[str, str] | None = None,
    event_time_ms: int | None = None,
    replicated_from: str | None = None,
    replicate_to: Sequence[str] = (),
    txn_id: tuple[int, int] | None = None,
    null_value: bool = False,
    compression: str = "NONE",
    schema_version: bytes | None = None,
    broker_entry: BrokerEntry | None = None,
    checksum: bool = True,
    set_uncompressed_size: bool = True,
    key_b64_encoded: bool = False,
    ordering_key: bytes | None = None,
) -> bytes:
    """Encode one non-batched message as a stored entry (no ``num_messages_in_batch``).

    ``txn_id`` is ``(most_bits, least_bits)`` (docs §8.2). A null value must have an empty payload.
    ``set_uncompressed_size=False`` leaves ``uncompressed_size`` out (as some non-Java clients do).
    """
    if null_value and payload:
        raise EntryEncodeError(f"a null value must have an empty payload, got {len(payload)} bytes")
    codec = _compression_number(compression)
    md = _base_metadata(
        producer_name, sequence_id, publish_time_ms, replicated_from, replicate_to, txn_id, schema_version
    )
    _add_properties(md.properties, properties)
    if key is not None:
        md.partition_key = key
    if key_b64_encoded:
        md.partition_key_b64_encoded = True
    if ordering_key is not None:
        md.ordering_key = ordering_key
    if event_time_ms is not None:
        md.event_time = _u64(event_time_ms, "event_time_ms")
    if null_value:
        md.null_value = True
    if codec != _NONE:
        md.compression = codec
    if set_uncompressed_size:
        if len(payload) > _U32_MAX:
            raise EntryEncodeError(f"payload of {len(payload)} bytes exceeds the uint32 uncompressed_size")
        md.uncompressed_size = len(payload)
    return _assemble(md, _compress(codec, bytes(payload)), checksum, broker_entry)


def encode_batch_entry(
    *,
    producer_name: str,
    sequence_id: int,
    publish_time_ms: int,
    items: Sequence[BatchItem],
    replicated_from: str | None = None,
    replicate_to: Sequence[str] = (),
    txn_id: tuple[int, int] | None = None,
    compression: str = "NONE",
    schema_version: bytes | None = None,
    broker_entry: BrokerEntry | None = None,
    checksum: bool = True,
) -> bytes:
    """Encode a batch entry: one SingleMessageMetadata + payload per item, batch index = item order."""
    if not items:
        raise EntryEncodeError("a batch entry needs at least one item")
    codec = _compression_number(compression)
    md = _base_metadata(
        producer_name, sequence_id, publish_time_ms, replicated_from, replicate_to, txn_id, schema_version
    )
    parts: list[bytes] = []
    for index, item in enumerate(items):
        if item.null_value and item.payload:
            raise EntryEncodeError(
                f"batch item {index}: a null value must have an empty payload, got {len(item.payload)} bytes"
            )
        smm = _pb.SingleMessageMetadata(payload_size=len(item.payload))
        _add_properties(smm.properties, item.properties)
        if item.key is not None:
            smm.partition_key = item.key
        if item.compacted_out:
            smm.compacted_out = True
        if item.event_time_ms is not None:
            smm.event_time = _u64(item.event_time_ms, f"batch item {index} event_time_ms")
        if item.key_b64_encoded:
            smm.partition_key_b64_encoded = True
        if item.ordering_key is not None:
            smm.ordering_key = item.ordering_key
        if item.sequence_id is not None:
            smm.sequence_id = _u64(item.sequence_id, f"batch item {index} sequence_id")
        if item.null_value:
            smm.null_value = True
        raw = smm.SerializeToString()
        parts += (_U32.pack(len(raw)), raw, bytes(item.payload))
    batch = b"".join(parts)
    md.num_messages_in_batch = len(items)
    md.uncompressed_size = len(batch)
    if codec != _NONE:
        md.compression = codec
    return _assemble(md, _compress(codec, batch), checksum, broker_entry)


def encode_marker_entry(
    marker: Marker,
    *,
    publish_time_ms: int,
    replicated_from: str | None = None,
    replicate_to: Sequence[str] | None = None,
    txn_id: tuple[int, int] | None = None,
    broker_entry: BrokerEntry | None = None,
    checksum: bool = True,
) -> bytes:
    """Encode a marker entry as the broker writes it (docs §4.3, §8.3).

    Replicated-subscription markers: producer ``pulsar.marker``, sequence id 0, the marker as payload.
    ``replicate_to=None`` means docs §4.3's default for the type: REQUEST and UPDATE are not
    restricted; RESPONSE (``[source cluster of the request]``) and SNAPSHOT (``[local cluster]``) need
    the cluster, so it must be passed. Transaction markers: producer ``pulsar.txn.marker``, sequence id
    -1 (stored as ``2**64 - 1``), empty payload, ``txn_id=(most, least)`` required, no replicate_to.
    """
    if isinstance(marker, TxnMarker):
        if txn_id is None:
            raise EntryEncodeError("a transaction marker needs txn_id=(most_bits, least_bits) (docs §8.3)")
        producer, sequence = TXN_MARKER_PRODUCER_NAME, TXN_MARKER_SEQUENCE_ID
    elif isinstance(marker, SnapshotRequest | SubscriptionUpdate):
        producer, sequence = MARKER_PRODUCER_NAME, 0
    elif isinstance(marker, SnapshotResponse | Snapshot):
        producer, sequence = MARKER_PRODUCER_NAME, 0
        if replicate_to is None:
            target = (
                "the request's source cluster"
                if isinstance(marker, SnapshotResponse)
                else "the local cluster"
            )
            raise EntryEncodeError(
                f"{type(marker).__name__} markers are sent only to {target}: pass replicate_to=[<cluster>] "
                "(docs §4.3)"
            )
    else:
        raise EntryEncodeError(f"not a marker: {marker!r}")
    md = _base_metadata(
        producer, sequence, publish_time_ms, replicated_from, replicate_to or (), txn_id, None
    )
    md.marker_type = int(marker.marker_type)
    return _assemble(md, encode_marker_payload(marker), checksum, broker_entry)


def encode_message_id(message_id: MessageId) -> bytes:
    """Serialize a ``MessageIdData`` (docs §7.1); inverse of :func:`decode_message_id`."""
    msg = _pb.MessageIdData(
        ledgerId=_u64(message_id.ledger_id, "ledger_id"), entryId=_u64(message_id.entry_id, "entry_id")
    )
    if message_id.partition != -1:
        msg.partition = message_id.partition
    if message_id.batch_index != -1:
        msg.batch_index = message_id.batch_index
    raw: bytes = msg.SerializeToString()
    return raw
