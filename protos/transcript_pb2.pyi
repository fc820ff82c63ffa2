from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TranscriptDirection(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TRANSCRIPT_DIRECTION_UNSPECIFIED: _ClassVar[TranscriptDirection]
    TRANSCRIPT_DIRECTION_TO_PARTY: _ClassVar[TranscriptDirection]
    TRANSCRIPT_DIRECTION_FROM_PARTY: _ClassVar[TranscriptDirection]
TRANSCRIPT_DIRECTION_UNSPECIFIED: TranscriptDirection
TRANSCRIPT_DIRECTION_TO_PARTY: TranscriptDirection
TRANSCRIPT_DIRECTION_FROM_PARTY: TranscriptDirection

class TranscriptRoster(_message.Message):
    __slots__ = ("split_id", "party_ids", "n_cols")
    SPLIT_ID_FIELD_NUMBER: _ClassVar[int]
    PARTY_IDS_FIELD_NUMBER: _ClassVar[int]
    N_COLS_FIELD_NUMBER: _ClassVar[int]
    split_id: str
    party_ids: _containers.RepeatedScalarFieldContainer[str]
    n_cols: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, split_id: _Optional[str] = ..., party_ids: _Optional[_Iterable[str]] = ..., n_cols: _Optional[_Iterable[int]] = ...) -> None: ...

class TranscriptHeader(_message.Message):
    __slots__ = ("format_version", "session_id", "protocol_version", "transport", "row_lower", "row_upper", "sense", "offset", "name", "roster", "started_unix", "securelp_version", "protocol")
    FORMAT_VERSION_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    TRANSPORT_FIELD_NUMBER: _ClassVar[int]
    ROW_LOWER_FIELD_NUMBER: _ClassVar[int]
    ROW_UPPER_FIELD_NUMBER: _ClassVar[int]
    SENSE_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ROSTER_FIELD_NUMBER: _ClassVar[int]
    STARTED_UNIX_FIELD_NUMBER: _ClassVar[int]
    SECURELP_VERSION_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    format_version: int
    session_id: str
    protocol_version: int
    transport: str
    row_lower: bytes
    row_upper: bytes
    sense: str
    offset: float
    name: str
    roster: TranscriptRoster
    started_unix: float
    securelp_version: str
    protocol: str
    def __init__(self, format_version: _Optional[int] = ..., session_id: _Optional[str] = ..., protocol_version: _Optional[int] = ..., transport: _Optional[str] = ..., row_lower: _Optional[bytes] = ..., row_upper: _Optional[bytes] = ..., sense: _Optional[str] = ..., offset: _Optional[float] = ..., name: _Optional[str] = ..., roster: _Optional[_Union[TranscriptRoster, _Mapping]] = ..., started_unix: _Optional[float] = ..., securelp_version: _Optional[str] = ..., protocol: _Optional[str] = ...) -> None: ...

class TranscriptRecord(_message.Message):
    __slots__ = ("sequence", "party_id", "direction", "message_type", "payload", "seconds", "call", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    PARTY_ID_FIELD_NUMBER: _ClassVar[int]
    DIRECTION_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    CALL_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    party_id: str
    direction: TranscriptDirection
    message_type: str
    payload: bytes
    seconds: float
    call: str
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, sequence: _Optional[int] = ..., party_id: _Optional[str] = ..., direction: _Optional[_Union[TranscriptDirection, str]] = ..., message_type: _Optional[str] = ..., payload: _Optional[bytes] = ..., seconds: _Optional[float] = ..., call: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

class TranscriptEnd(_message.Message):
    __slots__ = ("records", "seconds")
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    records: int
    seconds: float
    def __init__(self, records: _Optional[int] = ..., seconds: _Optional[float] = ...) -> None: ...

class TranscriptFrame(_message.Message):
    __slots__ = ("header", "record", "end")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    RECORD_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    header: TranscriptHeader
    record: TranscriptRecord
    end: TranscriptEnd
    def __init__(self, header: _Optional[_Union[TranscriptHeader, _Mapping]] = ..., record: _Optional[_Union[TranscriptRecord, _Mapping]] = ..., end: _Optional[_Union[TranscriptEnd, _Mapping]] = ...) -> None: ...
