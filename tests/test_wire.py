"""Tests of pulsar_model.wire: the stored-entry codec (docs §4.3, §5.4-5.5, §7.1, §8.2-8.3).

Entries are built with tests/wire_reference.py, a hand-written encoder that shares no code with the
codec or the generated protobuf classes, and decoded with ``decode_entry``. No Spark needed.
"""

from __future__ import annotations

import pickle
import re
import subprocess
import sys
from pathlib import Path

import google.protobuf
import pytest
from google.protobuf import unknown_fields
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from pulsar_model.errors import EntryDecodeError, EntryEncodeError
from pulsar_model.wire import (
    DECODE_ERROR_CODES,
    BatchItem,
    BrokerEntry,
    MarkerType,
    MessageId,
    Snapshot,
    SnapshotRequest,
    SnapshotResponse,
    SubscriptionUpdate,
    TxnMarker,
    decode_entry,
    decode_message_id,
    encode_batch_entry,
    encode_marker_entry,
    encode_message_entry,
    encode_message_id,
    to_signed64,
)
from pulsar_model.wire import codec as codec_module
from pulsar_model.wire._generated import pulsar_api_pb2, pulsar_markers_pb2
from tests import wire_reference as ref

ROOT = Path(__file__).resolve().parents[1]
WIRE = ROOT / "pulsar_model" / "wire"
U64 = (1 << 64) - 1
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def decode_error(data: bytes, **kwargs: object) -> EntryDecodeError:
    with pytest.raises(EntryDecodeError) as info:
        decode_entry(data, **kwargs)  # type: ignore[arg-type]
    assert info.value.code in DECODE_ERROR_CODES
    return info.value


# --- generated code -------------------------------------------------------------------------------

_VERSION_LINES = re.compile(
    rb"(# Protobuf Python Version: .*|_runtime_version\.ValidateProtobufRuntimeVersion\([^)]*\))"
)


def test_generated_code_matches_proto_sources(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools.protoc", reason="grpcio-tools is not installed: cannot regenerate")
    cmd = [
        sys.executable,
        "-m",
        "grpc_tools.protoc",
        f"-I{WIRE / 'proto'}",
        f"--python_out={tmp_path}",
        f"--pyi_out={tmp_path}",
        str(WIRE / "proto" / "pulsar_api.proto"),
        str(WIRE / "proto" / "pulsar_markers.proto"),
    ]
    subprocess.run(cmd, check=True, capture_output=True)
    generated = sorted(p.name for p in tmp_path.iterdir())
    assert generated == [
        "pulsar_api_pb2.py",
        "pulsar_api_pb2.pyi",
        "pulsar_markers_pb2.py",
        "pulsar_markers_pb2.pyi",
    ]
    for name in generated:
        fresh = (tmp_path / name).read_bytes()
        committed = (WIRE / "_generated" / name).read_bytes()
        # The protoc version stamp may differ between grpcio-tools releases; everything else
        # (the serialized descriptors above all) must match. Run `make proto` on drift.
        assert _VERSION_LINES.sub(b"", fresh) == _VERSION_LINES.sub(b"", committed), (
            f"{name} is stale: make proto"
        )


def test_generated_code_runtime_version_is_satisfied() -> None:
    text = (WIRE / "_generated" / "pulsar_api_pb2.py").read_text()
    major, minor, patch = map(int, re.search(r"Protobuf Python Version: (\d+)\.(\d+)\.(\d+)", text).groups())  # type: ignore[union-attr]
    installed = tuple(int(x) for x in google.protobuf.__version__.split(".")[:3])
    assert installed[0] == major and installed >= (major, minor, patch)


SPEC_FIELD_NUMBERS = {
    pulsar_api_pb2.MessageMetadata: {
        "producer_name": 1,
        "sequence_id": 2,
        "publish_time": 3,
        "properties": 4,
        "replicated_from": 5,
        "partition_key": 6,
        "replicate_to": 7,
        "compression": 8,
        "uncompressed_size": 9,
        "num_messages_in_batch": 11,
        "event_time": 12,
        "encryption_keys": 13,
        "encryption_algo": 14,
        "encryption_param": 15,
        "schema_version": 16,
        "partition_key_b64_encoded": 17,
        "ordering_key": 18,
        "deliver_at_time": 19,
        "marker_type": 20,
        "txnid_least_bits": 22,
        "txnid_most_bits": 23,
        "highest_sequence_id": 24,
        "null_value": 25,
        "uuid": 26,
        "num_chunks_from_msg": 27,
        "total_chunk_msg_size": 28,
        "chunk_id": 29,
        "null_partition_key": 30,
    },
    pulsar_api_pb2.SingleMessageMetadata: {
        "properties": 1,
        "partition_key": 2,
        "payload_size": 3,
        "compacted_out": 4,
        "event_time": 5,
        "partition_key_b64_encoded": 6,
        "ordering_key": 7,
        "sequence_id": 8,
        "null_value": 9,
        "null_partition_key": 10,
    },
    pulsar_api_pb2.BrokerEntryMetadata: {"broker_timestamp": 1, "index": 2},
    pulsar_api_pb2.MessageIdData: {"ledgerId": 1, "entryId": 2, "partition": 3, "batch_index": 4},
    pulsar_api_pb2.KeyValue: {"key": 1, "value": 2},
    pulsar_api_pb2.EncryptionKeys: {"key": 1, "value": 2, "metadata": 3},
    pulsar_markers_pb2.ReplicatedSubscriptionsSnapshotRequest: {"snapshot_id": 1, "source_cluster": 2},
    pulsar_markers_pb2.ReplicatedSubscriptionsSnapshotResponse: {"snapshot_id": 1, "cluster": 2},
    pulsar_markers_pb2.ReplicatedSubscriptionsSnapshot: {
        "snapshot_id": 1,
        "local_message_id": 2,
        "clusters": 3,
    },
    pulsar_markers_pb2.ReplicatedSubscriptionsUpdate: {"subscription_name": 1, "clusters": 2},
    pulsar_markers_pb2.ClusterMessageId: {"cluster": 1, "message_id": 2},
    pulsar_markers_pb2.MarkersMessageIdData: {"ledger_id": 1, "entry_id": 2},
}


@pytest.mark.parametrize("message", list(SPEC_FIELD_NUMBERS), ids=lambda m: m.DESCRIPTOR.name)
def test_generated_messages_use_spec_field_numbers(message: type) -> None:
    fields = {f.name: f.number for f in message.DESCRIPTOR.fields}  # type: ignore[attr-defined]
    assert fields == SPEC_FIELD_NUMBERS[message]


def test_generated_enums_use_spec_numbers() -> None:
    assert dict(pulsar_markers_pb2.MarkerType.items()) == {m.name: m.value for m in MarkerType}
    assert dict(pulsar_api_pb2.CompressionType.items()) == {
        "NONE": 0,
        "LZ4": 1,
        "ZLIB": 2,
        "ZSTD": 3,
        "SNAPPY": 4,
    }
    defaults = pulsar_api_pb2.MessageIdData()
    assert (
        defaults.partition,
        defaults.batch_index,
        pulsar_api_pb2.MessageMetadata().num_messages_in_batch,
    ) == (
        -1,
        -1,
        1,
    )


# --- decoding entries built by the reference encoder ----------------------------------------------


def test_decode_entry_reads_every_metadata_field_of_a_non_batched_entry() -> None:
    meta = ref.message_metadata(
        producer_name="prod-a",
        sequence_id=42,
        publish_time=1_700_000_000_123,
        props=[("app", "billing"), ("é", "ü")],
        replicated_from="east",
        partition_key="order-7",
        replicate_to=["west", "north"],
        uncompressed_size=5,
        event_time=1_699_999_999_000,
        schema_version=b"\x00\x00\x00\x03",
        partition_key_b64_encoded=True,
        ordering_key=b"\xffok",
        deliver_at_time=1_700_000_100_000,
        highest_sequence_id=44,
        uuid="u-1",
        num_chunks_from_msg=3,
        total_chunk_msg_size=15,
        chunk_id=1,
        null_partition_key=False,
    )
    data = ref.entry(meta, b"hello")
    d = decode_entry(data, include_payload=True)
    assert (d.total_size, d.has_checksum, d.checksum_ok, d.broker_entry) == (len(data), True, True, None)
    assert (d.metadata_size, d.payload_size) == (len(meta), 5)
    assert (d.producer_name, d.sequence_id, d.publish_time_ms) == ("prod-a", 42, 1_700_000_000_123)
    assert d.properties == {"app": "billing", "é": "ü"}
    assert (d.replicated_from, d.partition_key, d.replicate_to) == ("east", "order-7", ("west", "north"))
    assert (d.partition_key_b64_encoded, d.ordering_key) == (True, b"\xffok")
    assert (d.compression, d.uncompressed_size, d.num_messages_in_batch, d.is_batch) == (
        "NONE",
        5,
        None,
        False,
    )
    assert (d.event_time_ms, d.deliver_at_time_ms, d.schema_version) == (
        1_699_999_999_000,
        1_700_000_100_000,
        b"\0\0\0\3",
    )
    assert (d.highest_sequence_id, d.uuid, d.num_chunks_from_msg, d.total_chunk_msg_size, d.chunk_id) == (
        44,
        "u-1",
        3,
        15,
        1,
    )
    assert (d.marker_type, d.marker, d.marker_error, d.txnid_most_bits, d.txnid_least_bits) == (None,) * 5
    assert (d.null_value, d.null_partition_key, d.encryption) == (False, False, False)
    (m,) = d.messages
    assert m == (
        -1,
        "order-7",
        True,
        b"\xffok",
        5,
        False,
        False,
        False,
        {"app": "billing", "é": "ü"},
        42,
        1_699_999_999_000,
        None,
        b"hello",
    )


def test_decode_entry_absent_optional_fields_are_none_not_protobuf_defaults() -> None:
    d = decode_entry(ref.entry(ref.message_metadata(producer_name="p", sequence_id=0, publish_time=0), b""))
    assert (
        d.uncompressed_size,
        d.num_messages_in_batch,
        d.event_time_ms,
        d.partition_key,
        d.schema_version,
    ) == (None,) * 5
    assert (d.highest_sequence_id, d.uuid, d.chunk_id, d.deliver_at_time_ms, d.ordering_key) == (None,) * 5
    assert (d.properties, d.replicate_to, d.compression, d.is_batch) == ({}, (), "NONE", False)
    assert d.messages[0].payload_size == 0 and d.messages[0].key is None and d.messages[0].payload is None


def test_decode_entry_splits_a_batch_with_null_compacted_keyless_and_b64_slots() -> None:
    slots = [
        (
            ref.single_message_metadata(
                payload_size=3, partition_key="a", props=[("p", "1")], sequence_id=10, event_time=77
            ),
            b"one",
        ),
        (ref.single_message_metadata(payload_size=0, partition_key="b", null_value=True), b""),
        (ref.single_message_metadata(payload_size=0, partition_key="c", compacted_out=True), b""),
        (ref.single_message_metadata(payload_size=4), b"four"),
        (
            ref.single_message_metadata(
                payload_size=2,
                partition_key="aGk=",
                partition_key_b64_encoded=True,
                ordering_key=b"ok",
                null_partition_key=True,
            ),
            b"hi",
        ),
    ]
    batch = ref.batch_payload(slots)
    meta = ref.message_metadata(
        producer_name="p",
        sequence_id=10,
        publish_time=5,
        num_messages_in_batch=5,
        uncompressed_size=len(batch),
    )
    d = decode_entry(ref.entry(meta, batch), include_payload=True)
    assert (d.is_batch, d.num_messages_in_batch, d.payload_size) == (True, 5, len(batch))
    assert [m.batch_index for m in d.messages] == [0, 1, 2, 3, 4]
    assert [m.key for m in d.messages] == ["a", "b", "c", None, "aGk="]
    assert [m.payload_size for m in d.messages] == [3, 0, 0, 4, 2]
    assert [m.payload for m in d.messages] == [b"one", b"", b"", b"four", b"hi"]
    assert [m.null_value for m in d.messages] == [False, True, False, False, False]
    assert [m.compacted_out for m in d.messages] == [False, False, True, False, False]
    assert [m.key_b64_encoded for m in d.messages] == [False, False, False, False, True]
    assert [m.null_partition_key for m in d.messages] == [False, False, False, False, True]
    assert [m.ordering_key for m in d.messages] == [None, None, None, None, b"ok"]
    assert [m.sequence_id for m in d.messages] == [10, None, None, None, None]
    assert [m.event_time_ms for m in d.messages] == [77, None, None, None, None]
    assert [m.properties for m in d.messages] == [{"p": "1"}, {}, {}, {}, {}]


def test_decode_entry_batch_with_zero_messages_is_empty() -> None:
    meta = ref.message_metadata(num_messages_in_batch=0, uncompressed_size=0)
    d = decode_entry(ref.entry(meta, b""))
    assert (d.is_batch, d.messages) == (True, ())


MARKER_CASES = [
    (10, ref.snapshot_request("s-1", "east"), SnapshotRequest("s-1", "east"), ()),
    (10, ref.snapshot_request("s-2", None), SnapshotRequest("s-2", None), ()),
    (11, ref.snapshot_response("s-1", "west", 7, 3), SnapshotResponse("s-1", "west", (7, 3)), ("east",)),
    (
        12,
        ref.snapshot("s-1", (9, 4), [("west", 7, 3), ("north", 5, -1)]),
        Snapshot("s-1", (9, 4), (("west", (7, 3)), ("north", (5, -1)))),
        ("east",),
    ),
    (12, ref.snapshot("s-3", None, []), Snapshot("s-3", None, ()), ("east",)),
    (
        13,
        ref.subscription_update("sub", [("west", 7, 3)]),
        SubscriptionUpdate("sub", (("west", (7, 3)),)),
        (),
    ),
    (20, b"", TxnMarker(20), ()),
    (21, b"", TxnMarker(21), ()),
    (22, b"", TxnMarker(22), ()),
]


@pytest.mark.parametrize(("marker_type", "payload", "expected", "replicate_to"), MARKER_CASES)
def test_decode_entry_decodes_every_marker_type(
    marker_type: int, payload: bytes, expected: object, replicate_to: tuple[str, ...]
) -> None:
    txn = marker_type >= 20
    meta = ref.message_metadata(
        producer_name="pulsar.txn.marker" if txn else "pulsar.marker",
        sequence_id=-1 if txn else 0,
        publish_time=1000,
        replicate_to=replicate_to,
        replicated_from="south",
        marker_type=marker_type,
        txnid_most_bits=3 if txn else None,
        txnid_least_bits=99 if txn else None,
    )
    d = decode_entry(ref.entry(meta, payload))
    assert d.marker == expected
    assert d.marker.marker_type == marker_type  # type: ignore[union-attr]
    assert (d.marker_type, d.marker_error, d.replicate_to, d.replicated_from) == (
        marker_type,
        None,
        replicate_to,
        "south",
    )
    assert d.sequence_id == (U64 if txn else 0)
    (m,) = d.messages
    assert (m.batch_index, m.marker_type, m.key, m.payload_size) == (-1, marker_type, None, len(payload))
    if txn:
        assert (d.txnid_most_bits, d.txnid_least_bits) == (3, 99)


def test_decode_entry_keeps_txn_ids_unsigned() -> None:
    meta = ref.message_metadata(txnid_most_bits=(1 << 63) + 5, txnid_least_bits=-2, sequence_id=-1)
    d = decode_entry(ref.entry(meta, b"x"))
    assert (d.txnid_most_bits, d.txnid_least_bits, d.sequence_id) == ((1 << 63) + 5, U64 - 1, U64)
    assert (to_signed64(d.txnid_most_bits), to_signed64(d.txnid_least_bits), to_signed64(5)) == (  # type: ignore[arg-type]
        -(1 << 63) + 5,
        -2,
        5,
    )


@pytest.mark.parametrize("checksum", [True, False])
@pytest.mark.parametrize(("timestamp", "index"), [(1_700_000_000_999, 12345), (None, 7), (None, None)])
def test_decode_entry_reads_broker_entry_metadata_in_front(
    checksum: bool, timestamp: int | None, index: int | None
) -> None:
    meta = ref.message_metadata(partition_key="k")
    data = ref.entry(
        meta, b"abc", checksum=checksum, broker_entry=ref.broker_entry_metadata(timestamp, index)
    )
    d = decode_entry(data)
    assert d.broker_entry == BrokerEntry(timestamp, index)
    assert (d.has_checksum, d.checksum_ok, d.messages[0].key, d.payload_size) == (
        checksum,
        True if checksum else None,
        "k",
        3,
    )


def test_decode_entry_reads_an_entry_without_checksum() -> None:
    data = ref.entry(ref.message_metadata(producer_name="nock"), b"payload", checksum=False)
    d = decode_entry(data)
    assert (d.has_checksum, d.checksum_ok, d.producer_name, d.messages[0].payload_size) == (
        False,
        None,
        "nock",
        7,
    )


@pytest.mark.parametrize("codec", ["NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY"])
def test_decode_entry_decompresses_every_codec(codec: str) -> None:
    payload = b"pulsar " * 40
    meta = ref.message_metadata(compression=ref.COMPRESSION[codec], uncompressed_size=len(payload))
    stored = ref.compress(codec, payload)
    d = decode_entry(ref.entry(meta, stored), include_payload=True)
    assert (d.compression, d.payload_size, d.uncompressed_size) == (codec, len(stored), len(payload))
    assert (d.messages[0].payload_size, d.messages[0].payload) == (len(payload), payload)

    batch = ref.batch_payload(
        [
            (ref.single_message_metadata(payload_size=len(payload), partition_key="a"), payload),
            (ref.single_message_metadata(payload_size=1, partition_key="b"), b"z"),
        ]
    )
    meta = ref.message_metadata(
        compression=ref.COMPRESSION[codec], uncompressed_size=len(batch), num_messages_in_batch=2
    )
    d = decode_entry(ref.entry(meta, ref.compress(codec, batch)), include_payload=True)
    assert [(m.key, m.payload) for m in d.messages] == [("a", payload), ("b", b"z")]


@pytest.mark.parametrize("codec", ["ZLIB", "ZSTD", "SNAPPY"])
def test_decode_entry_decompresses_without_uncompressed_size(codec: str) -> None:
    meta = ref.message_metadata(compression=ref.COMPRESSION[codec])
    d = decode_entry(ref.entry(meta, ref.compress(codec, b"abc" * 10)))
    assert (d.uncompressed_size, d.messages[0].payload_size) == (None, 30)


def test_decode_entry_does_not_split_encrypted_batches() -> None:
    meta = ref.message_metadata(
        num_messages_in_batch=3,
        uncompressed_size=120,
        compression=ref.COMPRESSION["LZ4"],
        encryption_keys=[ref.encryption_key("key-1", b"\x10\x20", [("m", "n")])],
        encryption_algo="RSA",
        encryption_param=b"iv",
        partition_key="k",
    )
    d = decode_entry(ref.entry(meta, b"\x8f" * 50))
    assert (d.encryption, d.is_batch, d.num_messages_in_batch, d.compression) == (True, True, 3, "LZ4")
    (m,) = d.messages
    assert (m.batch_index, m.payload_size, m.key) == (-1, 120, "k")


def test_decode_entry_skips_unknown_fields_and_accepts_any_field_order() -> None:
    unknown = (
        ref.f_varint(10, 5)  # Pulsar's removed checksum field
        + ref.f_varint(21, 1)
        + ref.f_bytes(99, b"future")
        + ref.f_fixed32(100, 7)
        + ref.f_fixed64(101, 8)
        + ref.f_group(102, ref.f_varint(1, 3) + ref.f_group(2, ref.f_bytes(3, b"x")))
        + ref.f_bytes(20, b"marker_type sent with the wrong wire type")
        + ref.f_varint(6, 9)  # partition_key sent as a varint: unknown, not a key
    )
    meta = (
        ref.f_varint(3, 77)
        + ref.f_str(1, "first")
        + unknown
        + ref.f_varint(2, 5)
        + ref.f_str(1, "last-wins")
        + ref.f_str(7, "c1")
        + ref.properties(4, [("a", "1")])
        + ref.f_str(7, "c2")
        + ref.properties(4, [("a", "2")])
    )
    d = decode_entry(ref.entry(meta, b"p"))
    assert (d.producer_name, d.sequence_id, d.publish_time_ms) == ("last-wins", 5, 77)
    assert (d.replicate_to, d.properties, d.marker_type, d.partition_key) == (
        ("c1", "c2"),
        {"a": "2"},
        None,
        None,
    )
    smm = ref.f_bytes(99, b"?") + ref.f_varint(3, 1) + ref.f_group(50, b"") + ref.f_str(2, "k")
    batch = ref.batch_payload([(smm, b"v")])
    d = decode_entry(ref.entry(ref.message_metadata(num_messages_in_batch=1), batch))
    assert [(m.key, m.payload_size) for m in d.messages] == [("k", 1)]


def test_decode_entry_truncates_wide_varints_like_protobuf() -> None:
    meta = ref.message_metadata(
        num_messages_in_batch=None, marker_type=-1, chunk_id=(1 << 32) + 4, uncompressed_size=(1 << 32) + 3
    )
    d = decode_entry(ref.entry(meta, b"abc"))
    assert (d.marker_type, d.chunk_id, d.uncompressed_size, d.marker_error) == (
        -1,
        4,
        3,
        "unknown_marker_type",
    )


# --- errors ---------------------------------------------------------------------------------------

GOOD_META = ref.message_metadata(producer_name="p", sequence_id=1, publish_time=2, partition_key="k")


def test_decode_entry_rejects_empty_input() -> None:
    assert decode_error(b"").code == "empty"


@pytest.mark.parametrize(
    "data",
    [
        ref.MAGIC_BROKER_ENTRY + b"\x00",  # no room for the size
        ref.MAGIC_BROKER_ENTRY + ref.u32(50) + b"\x08\x01",  # size past the end
        ref.MAGIC_BROKER_ENTRY
        + ref.u32(0)
        + ref.MAGIC_BROKER_ENTRY
        + ref.u32(0)
        + ref.entry(GOOD_META, b"x"),
        ref.MAGIC_CRC32C + ref.u32(0) + ref.entry(GOOD_META, b"x"),  # two checksum sections
        ref.MAGIC_CRC32C
        + ref.u32(0)
        + ref.MAGIC_BROKER_ENTRY
        + ref.u32(0)
        + ref.entry(GOOD_META, checksum=False),
    ],
    ids=["bem-short", "bem-size-past-end", "bem-twice", "crc-twice", "bem-after-crc"],
)
def test_decode_entry_reports_misplaced_magic(data: bytes) -> None:
    assert decode_error(data).code == "bad_magic"


def test_decode_entry_reports_checksum_mismatch_with_both_values() -> None:
    data = bytearray(ref.entry(GOOD_META, b"payload"))
    data[-1] ^= 0x01
    err = decode_error(bytes(data))
    stored = int.from_bytes(data[2:6], "big")
    assert err.code == "bad_checksum"
    assert f"stored 0x{stored:08x}, computed 0x" in str(err)
    flagged = decode_entry(bytes(data), checksum_mode="flag")
    assert (flagged.checksum_ok, flagged.has_checksum, flagged.messages[0].payload_size) == (False, True, 7)
    assert decode_entry(bytes(data), checksum_mode="skip").checksum_ok is None


@pytest.mark.parametrize("checksum", [True, False])
def test_decode_entry_reports_every_truncation_of_the_envelope_and_metadata(checksum: bool) -> None:
    data = ref.entry(GOOD_META, b"payload", checksum=checksum, broker_entry=ref.broker_entry_metadata(5, 6))
    header = len(data) - len(b"payload")
    for cut in range(1, len(data)):
        if not checksum and cut >= header:
            assert decode_entry(data[:cut]).messages[0].payload_size == cut - header  # undetectable
            continue
        code = decode_error(data[:cut]).code
        assert code in {"truncated", "bad_magic", "bad_checksum"}, (cut, code)


@pytest.mark.parametrize(
    "meta",
    [
        ref.message_metadata(producer_name=None),
        ref.message_metadata(sequence_id=None),
        ref.message_metadata(publish_time=None),
        ref.message_metadata() + ref.f_bytes(4, ref.f_str(1, "key-without-value")),
        ref.message_metadata(encryption_keys=[ref.f_str(1, "no-value")]),
        ref.message_metadata() + b"\x0a\x05ab",  # string longer than the metadata
        ref.message_metadata() + b"\x10\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",  # 11-byte varint
        ref.message_metadata() + b"\x00\x01",  # field number 0
        ref.message_metadata() + b"\x0f",  # wire type 7
        ref.message_metadata() + ref.tag(9, ref.END_GROUP),
        ref.message_metadata() + ref.tag(9, ref.START_GROUP),  # never closed
        ref.message_metadata() + ref.tag(9, ref.START_GROUP) * 101 + ref.tag(9, ref.END_GROUP) * 101,
        ref.message_metadata() + ref.f_bytes(5, b"\xff\xfe"),  # replicated_from not UTF-8
        ref.message_metadata() + ref.f_bytes(7, b"\xc3\x28"),  # replicate_to not UTF-8
        ref.message_metadata()
        + ref.f_bytes(4, ref.f_str(1, "k") + ref.f_bytes(2, b"\xed\xa0\x80")),  # surrogate
        ref.f_bytes(1, b"\x80") + ref.message_metadata(producer_name=None),  # producer_name not UTF-8
    ],
)
def test_decode_entry_reports_bad_metadata(meta: bytes) -> None:
    err = decode_error(ref.entry(meta, b"x"))
    assert err.code == "bad_metadata", err


@pytest.mark.parametrize(
    ("meta", "payload"),
    [
        (ref.message_metadata(compression=7, uncompressed_size=1), b"x"),
        (ref.message_metadata(compression=ref.COMPRESSION["LZ4"]), ref.compress("LZ4", b"abc")),
        (
            ref.message_metadata(compression=ref.COMPRESSION["LZ4"], uncompressed_size=4),
            ref.compress("LZ4", b"abc"),
        ),
        (
            ref.message_metadata(compression=ref.COMPRESSION["LZ4"], uncompressed_size=2),
            ref.compress("LZ4", b"abc"),
        ),
        (ref.message_metadata(compression=ref.COMPRESSION["LZ4"], uncompressed_size=1 << 31), b"\x10"),
        (
            ref.message_metadata(compression=ref.COMPRESSION["ZLIB"], uncompressed_size=4),
            ref.compress("ZLIB", b"abc"),
        ),
        (ref.message_metadata(compression=ref.COMPRESSION["ZLIB"], uncompressed_size=3), b"not zlib"),
        (ref.message_metadata(compression=ref.COMPRESSION["ZSTD"], uncompressed_size=3), b"not zstd"),
        (
            ref.message_metadata(compression=ref.COMPRESSION["ZSTD"], uncompressed_size=9),
            ref.compress("ZSTD", b"abc"),
        ),
        (
            ref.message_metadata(compression=ref.COMPRESSION["SNAPPY"], uncompressed_size=9),
            ref.compress("SNAPPY", b"abc"),
        ),
        (ref.message_metadata(compression=ref.COMPRESSION["SNAPPY"]), b"\xff\xff\xff\xff\xff\xff"),
    ],
    ids=[
        "unknown-codec",
        "lz4-no-size",
        "lz4-size-too-big",
        "lz4-size-too-small",
        "lz4-impossible-size",
        "zlib-size",
        "zlib-garbage",
        "zstd-garbage",
        "zstd-size",
        "snappy-size",
        "snappy-garbage",
    ],
)
def test_decode_entry_reports_bad_compression(meta: bytes, payload: bytes) -> None:
    err = decode_error(ref.entry(meta, payload))
    assert err.code == "bad_compression", err


def _batch_entry(count: int, batch: bytes) -> bytes:
    return ref.entry(ref.message_metadata(num_messages_in_batch=count, uncompressed_size=len(batch)), batch)


ONE_SLOT = ref.batch_payload([(ref.single_message_metadata(payload_size=1, partition_key="a"), b"1")])


@pytest.mark.parametrize(
    "data",
    [
        _batch_entry(2, ONE_SLOT),  # fewer slots than announced
        _batch_entry(1, ONE_SLOT + b"\x00"),  # trailing bytes
        _batch_entry(-1, ONE_SLOT),
        _batch_entry(1, ref.u32(2) + ref.single_message_metadata(payload_size=1)),  # size past the end
        _batch_entry(1, ref.batch_payload([(ref.single_message_metadata(payload_size=5), b"1")])),
        _batch_entry(1, ref.batch_payload([(ref.single_message_metadata(payload_size=-1), b"")])),
        _batch_entry(
            1, ref.batch_payload([(ref.single_message_metadata(payload_size=None, partition_key="a"), b"")])
        ),
        _batch_entry(1, ref.batch_payload([(b"\x12\x09abc", b"")])),  # key runs past its metadata
        _batch_entry(1, ref.batch_payload([(b"\x18", b"")])),  # varint cut
        _batch_entry(1, ref.batch_payload([(b"\x18\x00\x07", b"")])),  # wire type 7
        _batch_entry(3, b"\x00\x00"),
    ],
)
def test_decode_entry_reports_bad_batch(data: bytes) -> None:
    err = decode_error(data)
    assert err.code == "bad_batch", err


def test_decode_entry_reports_non_utf8_batch_key_as_bad_metadata() -> None:
    slot = ref.f_bytes(2, b"\xff") + ref.f_varint(3, 0)
    assert decode_error(_batch_entry(1, ref.batch_payload([(slot, b"")]))).code == "bad_metadata"
    slot = ref.f_bytes(1, ref.f_str(1, "k") + ref.f_bytes(2, b"\xff")) + ref.f_varint(3, 0)
    assert decode_error(_batch_entry(1, ref.batch_payload([(slot, b"")]))).code == "bad_metadata"


@pytest.mark.parametrize("marker_type", [0, 5, 14, 23, 99, -3])
def test_decode_entry_keeps_unknown_marker_types_and_flags_them(marker_type: int) -> None:
    d = decode_entry(
        ref.entry(ref.message_metadata(producer_name="pulsar.marker", marker_type=marker_type), b"??")
    )
    assert (d.marker_type, d.marker, d.marker_error) == (marker_type, None, "unknown_marker_type")
    assert str(marker_type) in d.marker_error_message  # type: ignore[operator]
    assert [(m.marker_type, m.payload_size) for m in d.messages] == [(marker_type, 2)]


@pytest.mark.parametrize(
    ("marker_type", "payload"),
    [
        (10, b"\xff\xff"),
        (10, ref.f_str(2, "source-without-id")),
        (11, ref.f_str(1, "s")),  # no responding cluster
        (11, ref.f_str(1, "s") + ref.f_bytes(2, ref.f_str(1, "west"))),  # ClusterMessageId without message_id
        (12, ref.f_str(1, "s") + ref.f_bytes(2, ref.f_varint(1, 3))),  # MarkersMessageIdData without entry_id
        (13, ref.f_bytes(2, ref.cluster_message_id("c", 1, 1))),  # no subscription_name
        (13, ref.f_bytes(1, b"\xff") + ref.f_bytes(2, ref.cluster_message_id("c", 1, 1))),  # name not UTF-8
        (
            12,
            ref.f_str(1, "s")
            + ref.f_bytes(3, ref.f_bytes(1, b"\xfe") + ref.f_bytes(2, ref.markers_message_id(1, 1))),
        ),
    ],
)
def test_decode_entry_reports_unparseable_marker_payloads(marker_type: int, payload: bytes) -> None:
    data = ref.entry(ref.message_metadata(producer_name="pulsar.marker", marker_type=marker_type), payload)
    err = decode_error(data)
    assert err.code == "bad_marker", err
    assert f"marker_type {marker_type}" in str(err)
    kept = decode_entry(data, strict_markers=False)
    assert (kept.marker, kept.marker_error, kept.marker_type) == (None, "bad_marker", marker_type)


def test_entry_decode_error_pickles_with_its_code() -> None:
    err = decode_error(b"\x00\x00\x00\x09\x0a")
    again = pickle.loads(pickle.dumps(err))
    assert (type(again), again.code, str(again)) == (EntryDecodeError, "truncated", str(err))


# --- hypothesis: corruption never escapes as another exception -------------------------------------


def _sample_entries() -> list[bytes]:
    batch = ref.batch_payload(
        [
            (ref.single_message_metadata(payload_size=2, partition_key="a", props=[("x", "y")]), b"v1"),
            (ref.single_message_metadata(payload_size=0, null_value=True), b""),
        ]
    )
    out = [
        ref.entry(GOOD_META, b"payload"),
        ref.entry(GOOD_META, b"payload", checksum=False, broker_entry=ref.broker_entry_metadata(1, 2)),
        ref.entry(
            ref.message_metadata(num_messages_in_batch=2, uncompressed_size=len(batch)), batch, checksum=False
        ),
        ref.entry(
            ref.message_metadata(marker_type=12), ref.snapshot("s", (1, 2), [("c", 3, 4)]), checksum=False
        ),
        ref.entry(
            ref.message_metadata(marker_type=11), ref.snapshot_response("s", "c", 1, 2), checksum=False
        ),
    ]
    for codec in ("LZ4", "ZLIB", "ZSTD", "SNAPPY"):
        meta = ref.message_metadata(
            compression=ref.COMPRESSION[codec], num_messages_in_batch=2, uncompressed_size=len(batch)
        )
        out.append(ref.entry(meta, ref.compress(codec, batch), checksum=False))
    return out


SAMPLES = _sample_entries()


@FAST
@given(data=st.data())
def test_decode_entry_raises_only_entry_decode_errors_on_corrupted_entries(data: st.DataObject) -> None:
    entry = bytearray(data.draw(st.sampled_from(SAMPLES)))
    mutation = data.draw(st.sampled_from(["truncate", "flip", "insert", "overwrite"]))
    if mutation == "truncate":
        entry = entry[: data.draw(st.integers(0, len(entry) - 1))]
    elif mutation == "flip":
        for _ in range(data.draw(st.integers(1, 3))):
            entry[data.draw(st.integers(0, len(entry) - 1))] ^= data.draw(st.integers(1, 255))
    elif mutation == "insert":
        at = data.draw(st.integers(0, len(entry)))
        entry[at:at] = data.draw(st.binary(min_size=1, max_size=8))
    else:
        at = data.draw(st.integers(0, len(entry) - 1))
        chunk = data.draw(st.binary(min_size=1, max_size=12))
        entry[at : at + len(chunk)] = chunk
    try:
        decode_entry(
            bytes(entry), checksum_mode=data.draw(st.sampled_from(["raise", "skip"])), include_payload=True
        )
    except EntryDecodeError as err:
        assert err.code in DECODE_ERROR_CODES


@FAST
@given(raw=st.binary(max_size=80))
def test_decode_entry_raises_only_entry_decode_errors_on_random_bytes(raw: bytes) -> None:
    for data in (raw, ref.u32(len(raw)) + raw, ref.entry(raw, b"", checksum=False)):
        try:
            decode_entry(data, strict_markers=False)
        except EntryDecodeError as err:
            assert err.code in DECODE_ERROR_CODES


# --- hypothesis: the scanners agree with the generated protobuf classes ----------------------------

u64 = st.integers(0, U64)
i32 = st.integers(-(1 << 31), (1 << 31) - 1)
text = st.text(max_size=8)
kvs = st.lists(st.tuples(text, text), max_size=3)


@st.composite
def metadata_messages(draw: st.DrawFn) -> bytes:
    md = pulsar_api_pb2.MessageMetadata(
        producer_name=draw(text), sequence_id=draw(u64), publish_time=draw(u64)
    )
    for k, v in draw(kvs):
        md.properties.add(key=k, value=v)
    md.replicate_to.extend(draw(st.lists(text, max_size=2)))
    optional = {
        "replicated_from": text,
        "partition_key": text,
        "compression": st.integers(0, 4),
        "uncompressed_size": st.integers(0, (1 << 32) - 1),
        "num_messages_in_batch": i32,
        "event_time": u64,
        "schema_version": st.binary(max_size=4),
        "partition_key_b64_encoded": st.booleans(),
        "ordering_key": st.binary(max_size=4),
        "deliver_at_time": st.integers(-(1 << 63), (1 << 63) - 1),
        "marker_type": i32,
        "txnid_least_bits": u64,
        "txnid_most_bits": u64,
        "highest_sequence_id": u64,
        "null_value": st.booleans(),
        "uuid": text,
        "num_chunks_from_msg": i32,
        "total_chunk_msg_size": i32,
        "chunk_id": i32,
        "null_partition_key": st.booleans(),
    }
    for name in draw(st.lists(st.sampled_from(sorted(optional)), unique=True)):
        setattr(md, name, draw(optional[name]))
    raw = bytearray(md.SerializeToString())
    for _ in range(draw(st.integers(0, 2))):  # corrupt some of them
        if raw:
            raw[draw(st.integers(0, len(raw) - 1))] = draw(st.integers(0, 255))
    return bytes(raw)


SCALARS = (
    "sequence_id",
    "publish_time",
    "uncompressed_size",
    "num_messages_in_batch",
    "event_time",
    "schema_version",
    "ordering_key",
    "deliver_at_time",
    "marker_type",
    "txnid_least_bits",
    "txnid_most_bits",
    "highest_sequence_id",
    "num_chunks_from_msg",
    "total_chunk_msg_size",
    "chunk_id",
)
DECODED = {
    "publish_time": "publish_time_ms",
    "event_time": "event_time_ms",
    "deliver_at_time": "deliver_at_time_ms",
}


@settings(max_examples=300, deadline=None)
@given(meta=metadata_messages())
def test_decode_entry_reads_metadata_like_the_generated_classes(meta: bytes) -> None:
    md = pulsar_api_pb2.MessageMetadata()
    try:
        md.ParseFromString(meta)
    except DecodeError:
        # protobuf rejects it: so must we (malformed bytes or a missing required field).
        assert decode_error(ref.entry(meta, b"", checksum=False)).code == "bad_metadata"
        return
    strings = [md.producer_name, md.replicated_from, md.partition_key, md.uuid, *md.replicate_to]
    strings += [s for kv in md.properties for s in (kv.key, kv.value)]
    unknown_codec = any(f.field_number == 8 and f.wire_type == 0 for f in unknown_fields.UnknownFieldSet(md))
    assume(not unknown_codec)  # protobuf hides unknown enum values; we report them (tested above)
    if any(isinstance(s, bytes) for s in strings) or not md.IsInitialized():
        assert decode_error(ref.entry(meta, b"", checksum=False)).code == "bad_metadata"
        return
    # Keep the payload stage out of the comparison: it is tested on its own.
    layout = codec_module._MM
    raw_values = dict(
        zip(layout.template, codec_module._scan(meta, layout), strict=True)
    )  # before payload handling
    for name in SCALARS:
        raw = raw_values[codec_module._tag(pulsar_api_pb2.MessageMetadata, name)]
        expected = getattr(md, name) if md.HasField(name) else None
        got = raw
        if raw is not None and name in {
            "num_messages_in_batch",
            "marker_type",
            "num_chunks_from_msg",
            "total_chunk_msg_size",
            "chunk_id",
        }:
            got = codec_module._i32(raw)
        elif raw is not None and name == "uncompressed_size":
            got = raw & 0xFFFFFFFF
        elif raw is not None and name == "deliver_at_time":
            got = to_signed64(raw)
        assert got == expected, name
    d = (
        decode_entry(ref.entry(meta, b"", checksum=False), strict_markers=False)
        if _payload_free(md)
        else None
    )
    if d is not None:
        assert (d.producer_name, d.replicated_from, d.partition_key, d.uuid) == (
            md.producer_name,
            md.replicated_from if md.HasField("replicated_from") else None,
            md.partition_key if md.HasField("partition_key") else None,
            md.uuid if md.HasField("uuid") else None,
        )
        assert d.replicate_to == tuple(md.replicate_to)
        assert d.properties == {kv.key: kv.value for kv in md.properties}
        assert (d.null_value, d.null_partition_key, d.partition_key_b64_encoded) == (
            md.null_value,
            md.null_partition_key,
            md.partition_key_b64_encoded,
        )
        assert d.compression == pulsar_api_pb2.CompressionType.Name(md.compression)


def _payload_free(md: pulsar_api_pb2.MessageMetadata) -> bool:
    """True when an empty payload is valid for this metadata (no compressed data, no batch slots)."""
    batch = (
        md.HasField("num_messages_in_batch")
        and md.num_messages_in_batch != 0
        and not md.HasField("marker_type")
    )
    empty_ok = md.compression == 0 or (md.HasField("uncompressed_size") and md.uncompressed_size == 0)
    return empty_ok and not batch


@st.composite
def single_metadata_messages(draw: st.DrawFn) -> bytes:
    smm = pulsar_api_pb2.SingleMessageMetadata(payload_size=draw(st.integers(0, 3)))
    for k, v in draw(kvs):
        smm.properties.add(key=k, value=v)
    optional = {
        "partition_key": text,
        "compacted_out": st.booleans(),
        "event_time": u64,
        "partition_key_b64_encoded": st.booleans(),
        "ordering_key": st.binary(max_size=3),
        "sequence_id": u64,
        "null_value": st.booleans(),
        "null_partition_key": st.booleans(),
    }
    for name in draw(st.lists(st.sampled_from(sorted(optional)), unique=True)):
        setattr(smm, name, draw(optional[name]))
    raw = bytearray(smm.SerializeToString())
    if raw and draw(st.booleans()):
        raw[draw(st.integers(0, len(raw) - 1))] = draw(st.integers(0, 255))
    return bytes(raw)


@settings(max_examples=300, deadline=None)
@given(smm_bytes=single_metadata_messages())
# an empty KeyValue (no key: bad_metadata alone) before one whose bytes do not parse (bad_batch wins)
@example(smm_bytes=b"\n\x00\n\x010\x12\x00\x18\x00")
def test_decode_entry_reads_batch_slots_like_the_generated_classes(smm_bytes: bytes) -> None:
    smm = pulsar_api_pb2.SingleMessageMetadata()
    try:
        smm.ParseFromString(smm_bytes)
        size = smm.payload_size if smm.HasField("payload_size") else None  # required to split the batch
    except DecodeError:
        size = None
    slot = ref.u32(len(smm_bytes)) + smm_bytes
    payload = b"p" * (size if size is not None and 0 <= size <= 3 else 0)
    data = _batch_entry(1, slot + payload)
    if size is None or size < 0 or size > 3:
        assert decode_error(data).code == "bad_batch"
        return
    strings = [smm.partition_key] + [s for kv in smm.properties for s in (kv.key, kv.value)]
    if any(isinstance(s, bytes) for s in strings) or not smm.IsInitialized():
        assert decode_error(data).code == "bad_metadata"
        return
    (m,) = decode_entry(data, include_payload=True).messages
    assert m == (
        0,
        smm.partition_key if smm.HasField("partition_key") else None,
        smm.partition_key_b64_encoded,
        smm.ordering_key if smm.HasField("ordering_key") else None,
        size,
        smm.null_value,
        smm.null_partition_key,
        smm.compacted_out,
        {kv.key: kv.value for kv in smm.properties},
        smm.sequence_id if smm.HasField("sequence_id") else None,
        smm.event_time if smm.HasField("event_time") else None,
        None,
        payload,
    )


# --- encoders: byte-exact against the reference, and round trips ---------------------------------


def test_encode_message_entry_matches_the_reference_bytes() -> None:
    got = encode_message_entry(
        producer_name="p",
        sequence_id=3,
        publish_time_ms=1000,
        payload=b"hello",
        key="k",
        properties={"a": "1"},
        event_time_ms=900,
        replicated_from="east",
        replicate_to=["west"],
        txn_id=(1, 2),
        schema_version=b"\x01",
        broker_entry=BrokerEntry(1001, 17),
    )
    meta = ref.message_metadata(
        producer_name="p",
        sequence_id=3,
        publish_time=1000,
        props=[("a", "1")],
        replicated_from="east",
        partition_key="k",
        replicate_to=["west"],
        uncompressed_size=5,
        event_time=900,
        schema_version=b"\x01",
        txnid_least_bits=2,
        txnid_most_bits=1,
    )
    assert got == ref.entry(meta, b"hello", broker_entry=ref.broker_entry_metadata(1001, 17))


def test_encode_batch_entry_matches_the_reference_bytes() -> None:
    got = encode_batch_entry(
        producer_name="p",
        sequence_id=3,
        publish_time_ms=1000,
        compression="ZLIB",
        checksum=False,
        items=[
            BatchItem("a", b"1", properties={"x": "y"}, sequence_id=3),
            BatchItem(None, b"", null_value=True),
            BatchItem("b", b"", compacted_out=True, key_b64_encoded=True, ordering_key=b"o", event_time_ms=5),
        ],
    )
    batch = ref.batch_payload(
        [
            (
                ref.single_message_metadata(
                    payload_size=1, props=[("x", "y")], partition_key="a", sequence_id=3
                ),
                b"1",
            ),
            (ref.single_message_metadata(payload_size=0, null_value=True), b""),
            (
                ref.single_message_metadata(
                    payload_size=0,
                    partition_key="b",
                    compacted_out=True,
                    event_time=5,
                    partition_key_b64_encoded=True,
                    ordering_key=b"o",
                ),
                b"",
            ),
        ]
    )
    meta = ref.message_metadata(
        producer_name="p",
        sequence_id=3,
        publish_time=1000,
        compression=2,
        uncompressed_size=len(batch),
        num_messages_in_batch=3,
    )
    assert got == ref.entry(meta, ref.compress("ZLIB", batch), checksum=False)


def test_encode_marker_entry_matches_the_reference_bytes() -> None:
    got = encode_marker_entry(
        Snapshot("s", (1, 2), (("west", (3, -1)),)), publish_time_ms=7, replicate_to=["east"]
    )
    meta = ref.message_metadata(
        producer_name="pulsar.marker", sequence_id=0, publish_time=7, replicate_to=["east"], marker_type=12
    )
    assert got == ref.entry(meta, ref.snapshot("s", (1, 2), [("west", 3, -1)]))
    got = encode_marker_entry(TxnMarker(22), publish_time_ms=7, txn_id=(4, (1 << 63) + 1))
    meta = ref.message_metadata(
        producer_name="pulsar.txn.marker",
        sequence_id=-1,
        publish_time=7,
        marker_type=22,
        txnid_least_bits=(1 << 63) + 1,
        txnid_most_bits=4,
    )
    assert got == ref.entry(meta, b"")


def test_encode_marker_entry_applies_the_spec_replicate_to_defaults() -> None:
    assert (
        decode_entry(encode_marker_entry(SnapshotRequest("s", "east"), publish_time_ms=1)).replicate_to == ()
    )
    assert decode_entry(encode_marker_entry(SubscriptionUpdate("sub"), publish_time_ms=1)).replicate_to == ()
    for marker in (SnapshotResponse("s", "west", (1, 1)), Snapshot("s", None)):
        with pytest.raises(EntryEncodeError, match="replicate_to"):
            encode_marker_entry(marker, publish_time_ms=1)
    with pytest.raises(EntryEncodeError, match="txn_id"):
        encode_marker_entry(TxnMarker(21), publish_time_ms=1)
    with pytest.raises(EntryEncodeError, match="20, 21, 22"):
        TxnMarker(12)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"payload": b"x", "null_value": True},
        {"compression": "BROTLI"},
        {"sequence_id": 1 << 64},
        {"publish_time_ms": -(1 << 63) - 1},
        {"txn_id": (1, 2, 3)},
        {"replicate_to": "west"},
    ],
)
def test_encode_message_entry_rejects_invalid_arguments(kwargs: dict[str, object]) -> None:
    args: dict[str, object] = {"producer_name": "p", "sequence_id": 1, "publish_time_ms": 1} | kwargs
    with pytest.raises(EntryEncodeError):
        encode_message_entry(**args)  # type: ignore[arg-type]


def test_encode_batch_entry_rejects_an_empty_batch() -> None:
    with pytest.raises(EntryEncodeError, match="at least one item"):
        encode_batch_entry(producer_name="p", sequence_id=1, publish_time_ms=1, items=[])


codecs = st.sampled_from(["NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY"])
maybe = st.none
broker_entries = st.none() | st.builds(BrokerEntry, st.none() | u64, st.none() | u64)
clusters = st.lists(text, max_size=3).map(tuple)
txn_ids = st.none() | st.tuples(u64, u64)


@FAST
@given(
    producer=text,
    seq=u64,
    publish=u64,
    payload=st.binary(max_size=300),
    key=st.none() | text,
    props=st.dictionaries(text, text, max_size=3),
    event=st.none() | u64,
    repl_from=st.none() | text,
    repl_to=clusters,
    txn=txn_ids,
    compression=codecs,
    schema=st.none() | st.binary(max_size=4),
    broker=broker_entries,
    checksum=st.booleans(),
    null=st.booleans(),
)
def test_encode_message_entry_round_trips(
    producer: str,
    seq: int,
    publish: int,
    payload: bytes,
    key: str | None,
    props: dict[str, str],
    event: int | None,
    repl_from: str | None,
    repl_to: tuple[str, ...],
    txn: tuple[int, int] | None,
    compression: str,
    schema: bytes | None,
    broker: BrokerEntry | None,
    checksum: bool,
    null: bool,
) -> None:
    payload = b"" if null else payload
    data = encode_message_entry(
        producer_name=producer,
        sequence_id=seq,
        publish_time_ms=publish,
        payload=payload,
        key=key,
        properties=props,
        event_time_ms=event,
        replicated_from=repl_from,
        replicate_to=repl_to,
        txn_id=txn,
        null_value=null,
        compression=compression,
        schema_version=schema,
        broker_entry=broker,
        checksum=checksum,
    )
    d = decode_entry(data, include_payload=True)
    assert (d.producer_name, d.sequence_id, d.publish_time_ms, d.properties) == (
        producer,
        seq,
        publish,
        props,
    )
    assert (d.partition_key, d.event_time_ms, d.replicated_from, d.replicate_to) == (
        key,
        event,
        repl_from,
        repl_to,
    )
    assert (d.txnid_most_bits, d.txnid_least_bits) == (txn if txn else (None, None))
    assert (d.compression, d.schema_version, d.broker_entry, d.has_checksum) == (
        compression,
        schema,
        broker,
        checksum,
    )
    assert (d.null_value, d.uncompressed_size, d.is_batch, d.total_size) == (
        null,
        len(payload),
        False,
        len(data),
    )
    (m,) = d.messages
    assert (m.batch_index, m.key, m.payload, m.payload_size, m.null_value) == (
        -1,
        key,
        payload,
        len(payload),
        null,
    )


batch_items = st.builds(
    BatchItem,
    key=st.none() | text,
    payload=st.binary(max_size=40),
    compacted_out=st.booleans(),
    properties=st.dictionaries(text, text, max_size=2),
    sequence_id=st.none() | u64,
    event_time_ms=st.none() | u64,
    ordering_key=st.none() | st.binary(max_size=4),
    key_b64_encoded=st.booleans(),
)


@FAST
@given(
    items=st.lists(batch_items, min_size=1, max_size=8),
    compression=codecs,
    txn=txn_ids,
    broker=broker_entries,
    nulls=st.lists(st.booleans(), min_size=8, max_size=8),
)
def test_encode_batch_entry_round_trips(
    items: list[BatchItem],
    compression: str,
    txn: tuple[int, int] | None,
    broker: BrokerEntry | None,
    nulls: list[bool],
) -> None:
    items = [
        BatchItem(
            i.key,
            b"",
            True,
            i.compacted_out,
            i.properties,
            i.sequence_id,
            i.event_time_ms,
            i.ordering_key,
            i.key_b64_encoded,
        )
        if null
        else i
        for i, null in zip(items, nulls, strict=False)
    ]
    data = encode_batch_entry(
        producer_name="p",
        sequence_id=1,
        publish_time_ms=2,
        items=items,
        txn_id=txn,
        compression=compression,
        broker_entry=broker,
    )
    d = decode_entry(data, include_payload=True)
    assert (d.is_batch, d.num_messages_in_batch, d.compression, d.broker_entry) == (
        True,
        len(items),
        compression,
        broker,
    )
    assert (d.txnid_most_bits, d.txnid_least_bits) == (txn if txn else (None, None))
    for index, (item, m) in enumerate(zip(items, d.messages, strict=True)):
        assert m == (
            index,
            item.key,
            item.key_b64_encoded,
            item.ordering_key,
            len(item.payload),
            item.null_value,
            False,
            item.compacted_out,
            dict(item.properties),
            item.sequence_id,
            item.event_time_ms,
            None,
            item.payload,
        )


positions = st.tuples(st.integers(-1, (1 << 63) - 1), st.integers(-1, (1 << 63) - 1))
cluster_positions = st.lists(st.tuples(text, positions), max_size=3).map(tuple)
markers = st.one_of(
    st.builds(SnapshotRequest, text, st.none() | text),
    st.builds(SnapshotResponse, text, text, positions),
    st.builds(Snapshot, text, st.none() | positions, cluster_positions),
    st.builds(SubscriptionUpdate, text, cluster_positions),
    st.builds(TxnMarker, st.sampled_from([20, 21, 22])),
)


@FAST
@given(
    marker=markers,
    publish=u64,
    repl_from=st.none() | text,
    repl_to=clusters,
    txn=st.tuples(u64, u64),
    broker=broker_entries,
)
def test_encode_marker_entry_round_trips(
    marker: object,
    publish: int,
    repl_from: str | None,
    repl_to: tuple[str, ...],
    txn: tuple[int, int],
    broker: BrokerEntry | None,
) -> None:
    is_txn = isinstance(marker, TxnMarker)
    data = encode_marker_entry(
        marker,
        publish_time_ms=publish,
        replicated_from=repl_from,
        replicate_to=repl_to,  # type: ignore[arg-type]
        txn_id=txn if is_txn else None,
        broker_entry=broker,
    )
    d = decode_entry(data)
    assert (d.marker, d.marker_type, d.marker_error) == (marker, marker.marker_type, None)  # type: ignore[attr-defined]
    assert (d.producer_name, d.sequence_id) == (
        ("pulsar.txn.marker", U64) if is_txn else ("pulsar.marker", 0)
    )
    assert (d.publish_time_ms, d.replicated_from, d.replicate_to, d.broker_entry) == (
        publish,
        repl_from,
        repl_to,
        broker,
    )
    assert (d.txnid_most_bits, d.txnid_least_bits) == (txn if is_txn else (None, None))
    assert d.messages[0].payload_size == (0 if is_txn else d.payload_size)


@pytest.mark.parametrize(
    "message_id",
    [MessageId(5, 7), MessageId(5, -1, 3, 2), MessageId(-1, -1), MessageId((1 << 63) - 1, 0, 0, 0)],
)
def test_decode_message_id_round_trips_and_reads_the_reference(message_id: MessageId) -> None:
    assert decode_message_id(encode_message_id(message_id)) == message_id
    partition = None if message_id.partition == -1 else message_id.partition
    batch_index = None if message_id.batch_index == -1 else message_id.batch_index
    raw = ref.message_id_data(message_id.ledger_id, message_id.entry_id, partition, batch_index)
    assert decode_message_id(raw) == message_id
    with pytest.raises(EntryDecodeError, match="MessageIdData"):
        decode_message_id(ref.f_varint(2, 1))
