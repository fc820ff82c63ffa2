from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CensusHelloRequest(_message.Message):
    __slots__ = ("session_id", "protocol_version", "max_size")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    MAX_SIZE_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    protocol_version: int
    max_size: int
    def __init__(self, session_id: _Optional[str] = ..., protocol_version: _Optional[int] = ..., max_size: _Optional[int] = ...) -> None: ...

class CensusHelloReply(_message.Message):
    __slots__ = ("party_id", "protocol_version", "region_id", "subtree_ids", "subtree_parents", "public_key", "certificate", "signature")
    PARTY_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    REGION_ID_FIELD_NUMBER: _ClassVar[int]
    SUBTREE_IDS_FIELD_NUMBER: _ClassVar[int]
    SUBTREE_PARENTS_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    CERTIFICATE_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    party_id: str
    protocol_version: int
    region_id: str
    subtree_ids: _containers.RepeatedScalarFieldContainer[str]
    subtree_parents: _containers.RepeatedScalarFieldContainer[str]
    public_key: bytes
    certificate: bytes
    signature: bytes
    def __init__(self, party_id: _Optional[str] = ..., protocol_version: _Optional[int] = ..., region_id: _Optional[str] = ..., subtree_ids: _Optional[_Iterable[str]] = ..., subtree_parents: _Optional[_Iterable[str]] = ..., public_key: _Optional[bytes] = ..., certificate: _Optional[bytes] = ..., signature: _Optional[bytes] = ...) -> None: ...

class SpanningRegion(_message.Message):
    __slots__ = ("region_id", "parent_id", "level", "parties")
    REGION_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    PARTIES_FIELD_NUMBER: _ClassVar[int]
    region_id: str
    parent_id: str
    level: int
    parties: int
    def __init__(self, region_id: _Optional[str] = ..., parent_id: _Optional[str] = ..., level: _Optional[int] = ..., parties: _Optional[int] = ...) -> None: ...

class CensusPeer(_message.Message):
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

class CensusMeasureRequest(_message.Message):
    __slots__ = ("session_id", "mechanism", "eps", "depth", "party_level", "spanning", "parent_id", "peers")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    EPS_FIELD_NUMBER: _ClassVar[int]
    DEPTH_FIELD_NUMBER: _ClassVar[int]
    PARTY_LEVEL_FIELD_NUMBER: _ClassVar[int]
    SPANNING_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    mechanism: str
    eps: str
    depth: int
    party_level: int
    spanning: _containers.RepeatedCompositeFieldContainer[SpanningRegion]
    parent_id: str
    peers: _containers.RepeatedCompositeFieldContainer[CensusPeer]
    def __init__(self, session_id: _Optional[str] = ..., mechanism: _Optional[str] = ..., eps: _Optional[str] = ..., depth: _Optional[int] = ..., party_level: _Optional[int] = ..., spanning: _Optional[_Iterable[_Union[SpanningRegion, _Mapping]]] = ..., parent_id: _Optional[str] = ..., peers: _Optional[_Iterable[_Union[CensusPeer, _Mapping]]] = ...) -> None: ...

class CensusMeasurement(_message.Message):
    __slots__ = ("party_id", "own", "masked")
    PARTY_ID_FIELD_NUMBER: _ClassVar[int]
    OWN_FIELD_NUMBER: _ClassVar[int]
    MASKED_FIELD_NUMBER: _ClassVar[int]
    party_id: str
    own: bytes
    masked: bytes
    def __init__(self, party_id: _Optional[str] = ..., own: _Optional[bytes] = ..., masked: _Optional[bytes] = ...) -> None: ...

class CensusRelease(_message.Message):
    __slots__ = ("session_id", "counts", "accounting_json", "total")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    ACCOUNTING_JSON_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    counts: bytes
    accounting_json: str
    total: int
    def __init__(self, session_id: _Optional[str] = ..., counts: _Optional[bytes] = ..., accounting_json: _Optional[str] = ..., total: _Optional[int] = ...) -> None: ...

class CensusReleaseReply(_message.Message):
    __slots__ = ("party_id",)
    PARTY_ID_FIELD_NUMBER: _ClassVar[int]
    party_id: str
    def __init__(self, party_id: _Optional[str] = ...) -> None: ...

class CensusClose(_message.Message):
    __slots__ = ("session_id", "reason")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    reason: str
    def __init__(self, session_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class CensusCloseReply(_message.Message):
    __slots__ = ("party_id",)
    PARTY_ID_FIELD_NUMBER: _ClassVar[int]
    party_id: str
    def __init__(self, party_id: _Optional[str] = ...) -> None: ...
