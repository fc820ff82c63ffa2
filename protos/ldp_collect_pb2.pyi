from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class LdpHelloRequest(_message.Message):
    __slots__ = ("session_id", "protocol_version", "mechanism", "eps", "rows", "cols", "cell_km", "fingerprint")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    EPS_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    COLS_FIELD_NUMBER: _ClassVar[int]
    CELL_KM_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    protocol_version: int
    mechanism: str
    eps: float
    rows: int
    cols: int
    cell_km: float
    fingerprint: str
    def __init__(self, session_id: _Optional[str] = ..., protocol_version: _Optional[int] = ..., mechanism: _Optional[str] = ..., eps: _Optional[float] = ..., rows: _Optional[int] = ..., cols: _Optional[int] = ..., cell_km: _Optional[float] = ..., fingerprint: _Optional[str] = ...) -> None: ...

class LdpHelloReply(_message.Message):
    __slots__ = ("party_id", "protocol_version", "users")
    PARTY_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    USERS_FIELD_NUMBER: _ClassVar[int]
    party_id: str
    protocol_version: int
    users: int
    def __init__(self, party_id: _Optional[str] = ..., protocol_version: _Optional[int] = ..., users: _Optional[int] = ...) -> None: ...

class LdpCollectRequest(_message.Message):
    __slots__ = ("session_id", "max_reports")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_REPORTS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    max_reports: int
    def __init__(self, session_id: _Optional[str] = ..., max_reports: _Optional[int] = ...) -> None: ...

class LdpReports(_message.Message):
    __slots__ = ("party_id", "width", "reports", "last")
    PARTY_ID_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    REPORTS_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    party_id: str
    width: int
    reports: bytes
    last: bool
    def __init__(self, party_id: _Optional[str] = ..., width: _Optional[int] = ..., reports: _Optional[bytes] = ..., last: _Optional[bool] = ...) -> None: ...

class LdpClose(_message.Message):
    __slots__ = ("session_id", "reason")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    reason: str
    def __init__(self, session_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class LdpCloseReply(_message.Message):
    __slots__ = ("party_id",)
    PARTY_ID_FIELD_NUMBER: _ClassVar[int]
    party_id: str
    def __init__(self, party_id: _Optional[str] = ...) -> None: ...
