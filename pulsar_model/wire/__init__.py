"""Pulsar's stored-entry wire format: protobuf metadata, batches, markers (docs §4.3, §5.4-5.5, §7.1, §8).

* :mod:`pulsar_model.wire.codec` - encode/decode one stored BookKeeper entry
  (:func:`decode_entry`, :func:`encode_message_entry`, :func:`encode_batch_entry`,
  :func:`encode_marker_entry`).
* :mod:`pulsar_model.wire.rest` - entries as the admin REST entry endpoint returns them (headers +
  decompressed body), rebuilt through the same :func:`entry_from_metadata` (docs/semantics/export-rest.md).
* :mod:`pulsar_model.wire.markers` - marker payload types (replicated subscriptions, transactions).
* ``proto/`` - the ``.proto`` sources (written from Pulsar's public field numbers);
  ``_generated/`` - their Python code, committed. It needs protobuf runtime >= 7.35.1, < 8.

Regenerate ``_generated/`` after editing a ``.proto`` file (``make proto``), from the project root::

    .venv/bin/python -m grpc_tools.protoc -I pulsar_model/wire/proto \\
        --python_out=pulsar_model/wire/_generated --pyi_out=pulsar_model/wire/_generated \\
        pulsar_model/wire/proto/pulsar_api.proto pulsar_model/wire/proto/pulsar_markers.proto

The two ``.proto`` files import nothing, so the generated modules need no import rewriting.
``tests/test_wire.py`` regenerates into a temporary folder and fails on drift.
"""

from pulsar_model.errors import EntryDecodeError, EntryEncodeError
from pulsar_model.wire.codec import (
    COMPRESSION_NAMES,
    DECODE_ERROR_CODES,
    MAGIC_BROKER_ENTRY_METADATA,
    MAGIC_CRC32C,
    MARKER_PRODUCER_NAME,
    TXN_MARKER_PRODUCER_NAME,
    TXN_MARKER_SEQUENCE_ID,
    BatchItem,
    BrokerEntry,
    ChecksumMode,
    DecodedEntry,
    DecodedMessage,
    EntryMetadata,
    MessageId,
    decode_entry,
    decode_message_id,
    encode_batch_entry,
    encode_marker_entry,
    encode_message_entry,
    encode_message_id,
    entry_from_metadata,
    to_signed64,
)
from pulsar_model.wire.markers import (
    ClusterPosition,
    Marker,
    MarkerType,
    Position,
    Snapshot,
    SnapshotRequest,
    SnapshotResponse,
    SubscriptionUpdate,
    TxnMarker,
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
    "ClusterPosition",
    "DecodedEntry",
    "DecodedMessage",
    "EntryDecodeError",
    "EntryEncodeError",
    "EntryMetadata",
    "Marker",
    "MarkerType",
    "MessageId",
    "Position",
    "Snapshot",
    "SnapshotRequest",
    "SnapshotResponse",
    "SubscriptionUpdate",
    "TxnMarker",
    "decode_entry",
    "decode_message_id",
    "encode_batch_entry",
    "encode_marker_entry",
    "encode_message_entry",
    "encode_message_id",
    "entry_from_metadata",
    "to_signed64",
]
