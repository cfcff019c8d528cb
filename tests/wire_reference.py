"""Independent reference encoder for Pulsar stored entries: the test oracle of tests/test_wire.py.

Written from the field numbers in docs §4.3, §5.4-5.5, §7.1, §8.2-8.3 and Pulsar's public
PulsarApi.proto / PulsarMarkers.proto numbering, WITHOUT importing pulsar_model or the generated
protobuf classes: protobuf varints, tags and length-delimited fields are encoded by hand here, and
so are the entry envelope (magics, sizes, CRC32C via google_crc32c) and the batch layout.

Every builder takes plain Python values; ``None`` means "field absent". Fields are written in the
order given (field-number order by default), so tests can also build out-of-order or duplicated
fields by concatenating the small helpers.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Sequence

import cramjam
import google_crc32c

# Wire types (protobuf encoding spec).
VARINT = 0
FIXED64 = 1
LENGTH_DELIMITED = 2
START_GROUP = 3
END_GROUP = 4
FIXED32 = 5

MAGIC_CRC32C = b"\x0e\x01"
MAGIC_BROKER_ENTRY = b"\x0e\x02"

COMPRESSION = {"NONE": 0, "LZ4": 1, "ZLIB": 2, "ZSTD": 3, "SNAPPY": 4}


# --- protobuf primitives ------------------------------------------------------------------------


def varint(value: int) -> bytes:
    """Base-128 varint; negative values as 64-bit two's complement (10 bytes), as protobuf does."""
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def tag(field: int, wire_type: int) -> bytes:
    return varint(field << 3 | wire_type)


def f_varint(field: int, value: int | bool | None) -> bytes:
    return b"" if value is None else tag(field, VARINT) + varint(int(value))


def f_bytes(field: int, value: bytes | None) -> bytes:
    return b"" if value is None else tag(field, LENGTH_DELIMITED) + varint(len(value)) + value


def f_str(field: int, value: str | None) -> bytes:
    return b"" if value is None else f_bytes(field, value.encode())


def f_fixed32(field: int, value: int) -> bytes:
    return tag(field, FIXED32) + struct.pack("<I", value)


def f_fixed64(field: int, value: int) -> bytes:
    return tag(field, FIXED64) + struct.pack("<Q", value)


def f_group(field: int, body: bytes) -> bytes:
    return tag(field, START_GROUP) + body + tag(field, END_GROUP)


def key_value(key: str, value: str) -> bytes:
    """KeyValue {key = 1; value = 2} (both required strings)."""
    return f_str(1, key) + f_str(2, value)


def properties(field: int, props: Iterable[tuple[str, str]]) -> bytes:
    return b"".join(f_bytes(field, key_value(k, v)) for k, v in props)


# --- PulsarApi messages ---------------------------------------------------------------------------


def message_metadata(
    *,
    producer_name: str | None = "producer",
    sequence_id: int | None = 0,
    publish_time: int | None = 0,
    props: Sequence[tuple[str, str]] = (),
    replicated_from: str | None = None,
    partition_key: str | None = None,
    replicate_to: Sequence[str] = (),
    compression: int | None = None,
    uncompressed_size: int | None = None,
    num_messages_in_batch: int | None = None,
    event_time: int | None = None,
    encryption_keys: Sequence[bytes] = (),
    encryption_algo: str | None = None,
    encryption_param: bytes | None = None,
    schema_version: bytes | None = None,
    partition_key_b64_encoded: bool | None = None,
    ordering_key: bytes | None = None,
    deliver_at_time: int | None = None,
    marker_type: int | None = None,
    txnid_least_bits: int | None = None,
    txnid_most_bits: int | None = None,
    highest_sequence_id: int | None = None,
    null_value: bool | None = None,
    uuid: str | None = None,
    num_chunks_from_msg: int | None = None,
    total_chunk_msg_size: int | None = None,
    chunk_id: int | None = None,
    null_partition_key: bool | None = None,
    extra: bytes = b"",
) -> bytes:
    """MessageMetadata with Pulsar's field numbers; ``extra`` is appended raw (unknown fields etc.)."""
    return b"".join(
        [
            f_str(1, producer_name),
            f_varint(2, sequence_id),
            f_varint(3, publish_time),
            properties(4, props),
            f_str(5, replicated_from),
            f_str(6, partition_key),
            b"".join(f_str(7, c) for c in replicate_to),
            f_varint(8, compression),
            f_varint(9, uncompressed_size),
            f_varint(11, num_messages_in_batch),
            f_varint(12, event_time),
            b"".join(f_bytes(13, k) for k in encryption_keys),
            f_str(14, encryption_algo),
            f_bytes(15, encryption_param),
            f_bytes(16, schema_version),
            f_varint(17, partition_key_b64_encoded),
            f_bytes(18, ordering_key),
            f_varint(19, deliver_at_time),
            f_varint(20, marker_type),
            f_varint(22, txnid_least_bits),
            f_varint(23, txnid_most_bits),
            f_varint(24, highest_sequence_id),
            f_varint(25, null_value),
            f_str(26, uuid),
            f_varint(27, num_chunks_from_msg),
            f_varint(28, total_chunk_msg_size),
            f_varint(29, chunk_id),
            f_varint(30, null_partition_key),
            extra,
        ]
    )


def encryption_key(key: str, value: bytes, metadata: Sequence[tuple[str, str]] = ()) -> bytes:
    """EncryptionKeys {key = 1 string; value = 2 bytes; metadata = 3 repeated KeyValue}."""
    return f_str(1, key) + f_bytes(2, value) + properties(3, metadata)


def single_message_metadata(
    *,
    payload_size: int | None,
    props: Sequence[tuple[str, str]] = (),
    partition_key: str | None = None,
    compacted_out: bool | None = None,
    event_time: int | None = None,
    partition_key_b64_encoded: bool | None = None,
    ordering_key: bytes | None = None,
    sequence_id: int | None = None,
    null_value: bool | None = None,
    null_partition_key: bool | None = None,
    extra: bytes = b"",
) -> bytes:
    """SingleMessageMetadata with Pulsar's field numbers (payload_size = 3 is required)."""
    return b"".join(
        [
            properties(1, props),
            f_str(2, partition_key),
            f_varint(3, payload_size),
            f_varint(4, compacted_out),
            f_varint(5, event_time),
            f_varint(6, partition_key_b64_encoded),
            f_bytes(7, ordering_key),
            f_varint(8, sequence_id),
            f_varint(9, null_value),
            f_varint(10, null_partition_key),
            extra,
        ]
    )


def broker_entry_metadata(broker_timestamp: int | None, index: int | None) -> bytes:
    """BrokerEntryMetadata {broker_timestamp = 1; index = 2} (uint64)."""
    return f_varint(1, broker_timestamp) + f_varint(2, index)


def message_id_data(
    ledger_id: int, entry_id: int, partition: int | None = None, batch_index: int | None = None
) -> bytes:
    """MessageIdData {ledgerId = 1; entryId = 2; partition = 3; batch_index = 4} (docs §7.1)."""
    return f_varint(1, ledger_id) + f_varint(2, entry_id) + f_varint(3, partition) + f_varint(4, batch_index)


# --- PulsarMarkers messages (docs §4.3) -----------------------------------------------------------


def markers_message_id(ledger_id: int, entry_id: int) -> bytes:
    return f_varint(1, ledger_id) + f_varint(2, entry_id)


def cluster_message_id(cluster: str, ledger_id: int, entry_id: int) -> bytes:
    return f_str(1, cluster) + f_bytes(2, markers_message_id(ledger_id, entry_id))


def snapshot_request(snapshot_id: str, source_cluster: str | None) -> bytes:
    return f_str(1, snapshot_id) + f_str(2, source_cluster)


def snapshot_response(snapshot_id: str, cluster: str, ledger_id: int, entry_id: int) -> bytes:
    return f_str(1, snapshot_id) + f_bytes(2, cluster_message_id(cluster, ledger_id, entry_id))


def snapshot(
    snapshot_id: str, local: tuple[int, int] | None, clusters: Sequence[tuple[str, int, int]]
) -> bytes:
    body = f_str(1, snapshot_id)
    if local is not None:
        body += f_bytes(2, markers_message_id(*local))
    return body + b"".join(f_bytes(3, cluster_message_id(*c)) for c in clusters)


def subscription_update(subscription_name: str, clusters: Sequence[tuple[str, int, int]]) -> bytes:
    return f_str(1, subscription_name) + b"".join(f_bytes(2, cluster_message_id(*c)) for c in clusters)


# --- entry envelope and batches -------------------------------------------------------------------


def u32(value: int) -> bytes:
    return struct.pack(">I", value)


def batch_payload(slots: Sequence[tuple[bytes, bytes]]) -> bytes:
    """Concatenate ``[u32 size][SingleMessageMetadata][payload]`` for each (metadata, payload) slot."""
    return b"".join(u32(len(meta)) + meta + payload for meta, payload in slots)


def entry(
    metadata: bytes,
    payload: bytes = b"",
    *,
    checksum: bool = True,
    broker_entry: bytes | None = None,
) -> bytes:
    """A stored entry: [0x0e02 size BrokerEntryMetadata] [0x0e01 crc32c] size MessageMetadata payload."""
    body = u32(len(metadata)) + metadata + payload
    if checksum:
        body = MAGIC_CRC32C + u32(google_crc32c.value(body)) + body
    if broker_entry is not None:
        body = MAGIC_BROKER_ENTRY + u32(len(broker_entry)) + broker_entry + body
    return body


def compress(codec: str, data: bytes) -> bytes:
    """Compress ``data`` the way Pulsar's codecs store it (LZ4 raw block, snappy raw, zlib, zstd frame)."""
    if codec == "NONE":
        return data
    if codec == "ZLIB":
        return zlib.compress(data)
    if codec == "LZ4":
        return bytes(cramjam.lz4.compress_block(data, store_size=False))
    if codec == "ZSTD":
        return bytes(cramjam.zstd.compress(data))
    if codec == "SNAPPY":
        return bytes(cramjam.snappy.compress_raw(data))
    raise ValueError(codec)
