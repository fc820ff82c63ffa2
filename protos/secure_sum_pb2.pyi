from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SumHelloRequest(_message.Message):
    __slots__ = ("session_id", "protocol_version", "length")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    protocol_version: int
    length: int
    def __init__(self, session_id: _Optional[str] = ..., protocol_version: _Optional[int] = ..., length: _Optional[int] = ...) -> None: ...

class SumHelloReply(_message.Message):
    __slots__ = ("party_id", "protocol_version", "public_key", "certificate", "signature")
    PARTY_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    CERTIFICATE_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    party_id: str
    protocol_version: int
    public_key: bytes
    certificate: bytes
    signature: bytes
    def __init__(self, party_id: _Optional[str] = ..., protocol_version: _Optional[int] = ..., public_key: _Optional[bytes] = ..., certificate: _Optional[bytes] = ..., signature: _Optional[bytes] = ...) -> None: ...

class SumPeer(_message.Message):
    __slots__ = ("party_id", "public_key", "certificate", "signature")
    PARTY_ID_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    CERTIFICATE_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    party_id: str
    public_key: bytes
    certificate: bytes
    signature: bytes
    def __init__(self, party_id: _Optional[str] = ..., public_key: _Optional[bytes] = ..., certificate: _Optional[bytes] = ..., signature: _Optional[bytes] = ...) -> None: ...

class SumShareRequest(_message.Message):
    __slots__ = ("session_id", "peers")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    peers: _containers.RepeatedCompositeFieldContainer[SumPeer]
    def __init__(self, session_id: _Optional[str] = ..., peers: _Optional[_Iterable[_Union[SumPeer, _Mapping]]] = ...) -> None: ...

class SumShare(_message.Message):
    __slots__ = ("party_id", "share")
    PARTY_ID_FIELD_NUMBER: _ClassVar[int]
    SHARE_FIELD_NUMBER: _ClassVar[int]
    party_id: str
    share: bytes
    def __init__(self, party_id: _Optional[str] = ..., share: _Optional[bytes] = ...) -> None: ...

class SumClose(_message.Message):
    __slots__ = ("session_id", "reason", "total")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    reason: str
    total: bytes
    def __init__(self, session_id: _Optional[str] = ..., reason: _Optional[str] = ..., total: _Optional[bytes] = ...) -> None: ...

class SumCloseReply(_message.Message):
    __slots__ = ("party_id",)
    PARTY_ID_FIELD_NUMBER: _ClassVar[int]
    party_id: str
    def __init__(self, party_id: _Optional[str] = ...) -> None: ...
