"""Marker payloads of Pulsar's server-only marker entries (docs §4.3, §8.3).

One marker value per marker entry. Replicated-subscription markers (types 10-13) carry a protobuf
payload (``PulsarMarkers.proto``); transaction markers (types 20-22) carry an empty payload and
identify the transaction through ``MessageMetadata.txnid_most_bits/least_bits``.

Positions inside markers are ``(ledger_id, entry_id)`` pairs. Pulsar writes Java longs into uint64
fields, so they are decoded as **signed** 64-bit values (``-1`` stays ``-1``, docs §0.1); the
encoder accepts any value in ``[-2**63, 2**64)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any, TypeAlias

from google.protobuf.message import DecodeError

from pulsar_model.errors import EntryDecodeError, EntryEncodeError
from pulsar_model.wire._generated import pulsar_markers_pb2 as _pbm

__all__ = [
    "REPLICATED_SUBSCRIPTION_MARKER_TYPES",
    "TXN_MARKER_TYPES",
    "ClusterPosition",
    "Marker",
    "MarkerType",
    "Position",
    "Snapshot",
    "SnapshotRequest",
    "SnapshotResponse",
    "SubscriptionUpdate",
    "TxnMarker",
    "decode_marker_payload",
    "encode_marker_payload",
]

_U64_MASK = (1 << 64) - 1
_I64_SIGN = 1 << 63


class MarkerType(IntEnum):
    """``MessageMetadata.marker_type`` values (docs §4.3 enum ``MarkerType``)."""

    UNKNOWN_MARKER = 0
    REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST = 10
    REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE = 11
    REPLICATED_SUBSCRIPTION_SNAPSHOT = 12
    REPLICATED_SUBSCRIPTION_UPDATE = 13
    TXN_COMMITTING = 20
    TXN_COMMIT = 21
    TXN_ABORT = 22


#: Marker types whose payload is a PulsarMarkers protobuf message (docs §4.3).
REPLICATED_SUBSCRIPTION_MARKER_TYPES = frozenset({10, 11, 12, 13})
#: Transaction marker types; their payload is empty (docs §8.3).
TXN_MARKER_TYPES = frozenset({20, 21, 22})

Position: TypeAlias = tuple[int, int]
ClusterPosition: TypeAlias = tuple[str, Position]


@dataclass(frozen=True, slots=True)
class SnapshotRequest:
    """REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST (10) payload."""

    snapshot_id: str
    source_cluster: str | None = None

    @property
    def marker_type(self) -> MarkerType:
        return MarkerType.REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST


@dataclass(frozen=True, slots=True)
class SnapshotResponse:
    """REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE (11) payload: the responding cluster and its position."""

    snapshot_id: str
    cluster: str
    position: Position

    @property
    def marker_type(self) -> MarkerType:
        return MarkerType.REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE


@dataclass(frozen=True, slots=True)
class Snapshot:
    """REPLICATED_SUBSCRIPTION_SNAPSHOT (12) payload: local position and one position per remote cluster."""

    snapshot_id: str
    local_position: Position | None
    clusters: tuple[ClusterPosition, ...] = ()

    @property
    def marker_type(self) -> MarkerType:
        return MarkerType.REPLICATED_SUBSCRIPTION_SNAPSHOT


@dataclass(frozen=True, slots=True)
class SubscriptionUpdate:
    """REPLICATED_SUBSCRIPTION_UPDATE (13) payload: a subscription's mark-delete position per cluster."""

    subscription_name: str
    clusters: tuple[ClusterPosition, ...] = ()

    @property
    def marker_type(self) -> MarkerType:
        return MarkerType.REPLICATED_SUBSCRIPTION_UPDATE


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """A transaction marker (20 TXN_COMMITTING, 21 TXN_COMMIT, 22 TXN_ABORT); empty payload (docs §8.3)."""

    marker_type: int

    def __post_init__(self) -> None:
        if self.marker_type not in TXN_MARKER_TYPES:
            raise EntryEncodeError(
                f"TxnMarker.marker_type must be one of {sorted(TXN_MARKER_TYPES)}, got {self.marker_type!r}"
            )


Marker: TypeAlias = SnapshotRequest | SnapshotResponse | Snapshot | SubscriptionUpdate | TxnMarker


def _to_signed64(value: int) -> int:
    return value - (1 << 64) if value & _I64_SIGN else value


def _u64(value: int, what: str) -> int:
    if not -(1 << 63) <= value <= _U64_MASK:
        raise EntryEncodeError(f"{what} must fit in 64 bits ([-2**63, 2**64)), got {value}")
    return value & _U64_MASK


def _set_position(target: _pbm.MarkersMessageIdData, position: Position, what: str) -> None:
    if len(position) != 2:
        raise EntryEncodeError(f"{what} must be a (ledger_id, entry_id) pair, got {position!r}")
    target.ledger_id = _u64(position[0], f"{what} ledger id")
    target.entry_id = _u64(position[1], f"{what} entry id")


def _add_clusters(target: object, clusters: tuple[ClusterPosition, ...], what: str) -> None:
    for cluster, position in clusters:
        item = target.add()  # type: ignore[attr-defined]
        item.cluster = cluster
        _set_position(item.message_id, position, f"{what} position of cluster {cluster!r}")


def encode_marker_payload(marker: Marker) -> bytes:
    """Serialize ``marker`` into the payload bytes of its marker entry (empty for transaction markers)."""
    if isinstance(marker, TxnMarker):
        return b""
    if isinstance(marker, SnapshotRequest):
        req = _pbm.ReplicatedSubscriptionsSnapshotRequest(snapshot_id=marker.snapshot_id)
        if marker.source_cluster is not None:
            req.source_cluster = marker.source_cluster
        return req.SerializeToString()
    if isinstance(marker, SnapshotResponse):
        resp = _pbm.ReplicatedSubscriptionsSnapshotResponse(snapshot_id=marker.snapshot_id)
        resp.cluster.cluster = marker.cluster
        _set_position(resp.cluster.message_id, marker.position, "SnapshotResponse.position")
        return resp.SerializeToString()
    if isinstance(marker, Snapshot):
        snap = _pbm.ReplicatedSubscriptionsSnapshot(snapshot_id=marker.snapshot_id)
        if marker.local_position is not None:
            _set_position(snap.local_message_id, marker.local_position, "Snapshot.local_position")
        _add_clusters(snap.clusters, marker.clusters, "Snapshot.clusters")
        return snap.SerializeToString()
    if isinstance(marker, SubscriptionUpdate):
        upd = _pbm.ReplicatedSubscriptionsUpdate(subscription_name=marker.subscription_name)
        _add_clusters(upd.clusters, marker.clusters, "SubscriptionUpdate.clusters")
        return upd.SerializeToString()
    raise EntryEncodeError(f"not a marker: {marker!r}")


def _bad_marker(marker_type: int, detail: str) -> EntryDecodeError:
    return EntryDecodeError("bad_marker", f"marker_type {marker_type} payload: {detail}")


def _check_str(value: object, marker_type: int, field: str) -> str:
    if type(value) is not str:
        raise _bad_marker(marker_type, f"field {field} is not valid UTF-8: {value!r}")
    return value


def _missing(msg: Any) -> str:
    """The required fields ``msg`` misses, as protobuf names them (e.g. ``clusters[0].message_id``)."""
    return ", ".join(msg.FindInitializationErrors())


def _position(msg: _pbm.MarkersMessageIdData) -> Position:
    return (_to_signed64(msg.ledger_id), _to_signed64(msg.entry_id))


def _clusters(items: object, marker_type: int) -> tuple[ClusterPosition, ...]:
    return tuple(
        (_check_str(c.cluster, marker_type, "cluster"), _position(c.message_id))
        for c in items  # type: ignore[attr-defined]
    )


def decode_marker_payload(marker_type: int, payload: bytes) -> Marker:
    """Decode the payload of a marker entry of type ``marker_type`` (10-13 or 20-22).

    Raises ``EntryDecodeError("bad_marker")`` when the payload does not parse, a required field
    (including nested ones; the protobuf runtime does not check them on parse) is missing, or a
    string is not UTF-8. Transaction markers ignore the
    payload (Pulsar writes it empty). Other types raise ``ValueError`` (the caller filters them).
    """
    if marker_type in TXN_MARKER_TYPES:
        return TxnMarker(marker_type)
    try:
        if marker_type == MarkerType.REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST:
            req = _pbm.ReplicatedSubscriptionsSnapshotRequest.FromString(payload)
            if not req.IsInitialized():
                raise _bad_marker(marker_type, f"missing required field(s) {_missing(req)}")
            source = req.source_cluster if req.HasField("source_cluster") else None
            return SnapshotRequest(
                _check_str(req.snapshot_id, marker_type, "snapshot_id"),
                None if source is None else _check_str(source, marker_type, "source_cluster"),
            )
        if marker_type == MarkerType.REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE:
            resp = _pbm.ReplicatedSubscriptionsSnapshotResponse.FromString(payload)
            if not resp.IsInitialized():
                raise _bad_marker(marker_type, f"missing required field(s) {_missing(resp)}")
            if not resp.HasField("cluster"):
                raise _bad_marker(marker_type, "missing the responding cluster (field 2)")
            return SnapshotResponse(
                _check_str(resp.snapshot_id, marker_type, "snapshot_id"),
                _check_str(resp.cluster.cluster, marker_type, "cluster"),
                _position(resp.cluster.message_id),
            )
        if marker_type == MarkerType.REPLICATED_SUBSCRIPTION_SNAPSHOT:
            snap = _pbm.ReplicatedSubscriptionsSnapshot.FromString(payload)
            if not snap.IsInitialized():
                raise _bad_marker(marker_type, f"missing required field(s) {_missing(snap)}")
            local = _position(snap.local_message_id) if snap.HasField("local_message_id") else None
            return Snapshot(
                _check_str(snap.snapshot_id, marker_type, "snapshot_id"),
                local,
                _clusters(snap.clusters, marker_type),
            )
        if marker_type == MarkerType.REPLICATED_SUBSCRIPTION_UPDATE:
            upd = _pbm.ReplicatedSubscriptionsUpdate.FromString(payload)
            if not upd.IsInitialized():
                raise _bad_marker(marker_type, f"missing required field(s) {_missing(upd)}")
            return SubscriptionUpdate(
                _check_str(upd.subscription_name, marker_type, "subscription_name"),
                _clusters(upd.clusters, marker_type),
            )
    except DecodeError as exc:
        raise _bad_marker(marker_type, f"protobuf parse error ({exc}); {len(payload)} bytes") from None
    raise ValueError(f"marker_type {marker_type} has no payload definition")
