from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MarkerType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    UNKNOWN_MARKER: _ClassVar[MarkerType]
    REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST: _ClassVar[MarkerType]
    REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE: _ClassVar[MarkerType]
    REPLICATED_SUBSCRIPTION_SNAPSHOT: _ClassVar[MarkerType]
    REPLICATED_SUBSCRIPTION_UPDATE: _ClassVar[MarkerType]
    TXN_COMMITTING: _ClassVar[MarkerType]
    TXN_COMMIT: _ClassVar[MarkerType]
    TXN_ABORT: _ClassVar[MarkerType]
UNKNOWN_MARKER: MarkerType
REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST: MarkerType
REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE: MarkerType
REPLICATED_SUBSCRIPTION_SNAPSHOT: MarkerType
REPLICATED_SUBSCRIPTION_UPDATE: MarkerType
TXN_COMMITTING: MarkerType
TXN_COMMIT: MarkerType
TXN_ABORT: MarkerType

class ReplicatedSubscriptionsSnapshotRequest(_message.Message):
    __slots__ = ("snapshot_id", "source_cluster")
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_CLUSTER_FIELD_NUMBER: _ClassVar[int]
    snapshot_id: str
    source_cluster: str
    def __init__(self, snapshot_id: _Optional[str] = ..., source_cluster: _Optional[str] = ...) -> None: ...

class ReplicatedSubscriptionsSnapshotResponse(_message.Message):
    __slots__ = ("snapshot_id", "cluster")
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    snapshot_id: str
    cluster: ClusterMessageId
    def __init__(self, snapshot_id: _Optional[str] = ..., cluster: _Optional[_Union[ClusterMessageId, _Mapping]] = ...) -> None: ...

class ReplicatedSubscriptionsSnapshot(_message.Message):
    __slots__ = ("snapshot_id", "local_message_id", "clusters")
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    LOCAL_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    CLUSTERS_FIELD_NUMBER: _ClassVar[int]
    snapshot_id: str
    local_message_id: MarkersMessageIdData
    clusters: _containers.RepeatedCompositeFieldContainer[ClusterMessageId]
    def __init__(self, snapshot_id: _Optional[str] = ..., local_message_id: _Optional[_Union[MarkersMessageIdData, _Mapping]] = ..., clusters: _Optional[_Iterable[_Union[ClusterMessageId, _Mapping]]] = ...) -> None: ...

class ReplicatedSubscriptionsUpdate(_message.Message):
    __slots__ = ("subscription_name", "clusters")
    SUBSCRIPTION_NAME_FIELD_NUMBER: _ClassVar[int]
    CLUSTERS_FIELD_NUMBER: _ClassVar[int]
    subscription_name: str
    clusters: _containers.RepeatedCompositeFieldContainer[ClusterMessageId]
    def __init__(self, subscription_name: _Optional[str] = ..., clusters: _Optional[_Iterable[_Union[ClusterMessageId, _Mapping]]] = ...) -> None: ...

class ClusterMessageId(_message.Message):
    __slots__ = ("cluster", "message_id")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    message_id: MarkersMessageIdData
    def __init__(self, cluster: _Optional[str] = ..., message_id: _Optional[_Union[MarkersMessageIdData, _Mapping]] = ...) -> None: ...

class MarkersMessageIdData(_message.Message):
    __slots__ = ("ledger_id", "entry_id")
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    ledger_id: int
    entry_id: int
    def __init__(self, ledger_id: _Optional[int] = ..., entry_id: _Optional[int] = ...) -> None: ...
