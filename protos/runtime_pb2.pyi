from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ProtocolOffer(_message.Message):
    __slots__ = ("name", "min_version", "max_version")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MIN_VERSION_FIELD_NUMBER: _ClassVar[int]
    MAX_VERSION_FIELD_NUMBER: _ClassVar[int]
    name: str
    min_version: int
    max_version: int
    def __init__(self, name: _Optional[str] = ..., min_version: _Optional[int] = ..., max_version: _Optional[int] = ...) -> None: ...

class Open(_message.Message):
    __slots__ = ("runtime_version", "sender", "protocols", "heartbeat_s", "keepalive_s")
    RUNTIME_VERSION_FIELD_NUMBER: _ClassVar[int]
    SENDER_FIELD_NUMBER: _ClassVar[int]
    PROTOCOLS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_S_FIELD_NUMBER: _ClassVar[int]
    KEEPALIVE_S_FIELD_NUMBER: _ClassVar[int]
    runtime_version: int
    sender: str
    protocols: _containers.RepeatedCompositeFieldContainer[ProtocolOffer]
    heartbeat_s: float
    keepalive_s: float
    def __init__(self, runtime_version: _Optional[int] = ..., sender: _Optional[str] = ..., protocols: _Optional[_Iterable[_Union[ProtocolOffer, _Mapping]]] = ..., heartbeat_s: _Optional[float] = ..., keepalive_s: _Optional[float] = ...) -> None: ...

class Envelope(_message.Message):
    __slots__ = ("call_id", "protocol", "session_id", "method", "reply", "total_size", "offset", "data", "sha256", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    REPLY_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SIZE_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    call_id: int
    protocol: str
    session_id: str
    method: str
    reply: bool
    total_size: int
    offset: int
    data: bytes
    sha256: bytes
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, call_id: _Optional[int] = ..., protocol: _Optional[str] = ..., session_id: _Optional[str] = ..., method: _Optional[str] = ..., reply: _Optional[bool] = ..., total_size: _Optional[int] = ..., offset: _Optional[int] = ..., data: _Optional[bytes] = ..., sha256: _Optional[bytes] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

class Fault(_message.Message):
    __slots__ = ("call_id", "error_class", "message")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_CLASS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    call_id: int
    error_class: str
    message: str
    def __init__(self, call_id: _Optional[int] = ..., error_class: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class Heartbeat(_message.Message):
    __slots__ = ("sequence",)
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    def __init__(self, sequence: _Optional[int] = ...) -> None: ...

class Goodbye(_message.Message):
    __slots__ = ("reason", "error_class")
    REASON_FIELD_NUMBER: _ClassVar[int]
    ERROR_CLASS_FIELD_NUMBER: _ClassVar[int]
    reason: str
    error_class: str
    def __init__(self, reason: _Optional[str] = ..., error_class: _Optional[str] = ...) -> None: ...

class Frame(_message.Message):
    __slots__ = ("open", "envelope", "fault", "heartbeat", "goodbye")
    OPEN_FIELD_NUMBER: _ClassVar[int]
    ENVELOPE_FIELD_NUMBER: _ClassVar[int]
    FAULT_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    GOODBYE_FIELD_NUMBER: _ClassVar[int]
    open: Open
    envelope: Envelope
    fault: Fault
    heartbeat: Heartbeat
    goodbye: Goodbye
    def __init__(self, open: _Optional[_Union[Open, _Mapping]] = ..., envelope: _Optional[_Union[Envelope, _Mapping]] = ..., fault: _Optional[_Union[Fault, _Mapping]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ..., goodbye: _Optional[_Union[Goodbye, _Mapping]] = ...) -> None: ...
