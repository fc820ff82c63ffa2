from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BoundsMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BOUNDS_MODE_UNSPECIFIED: _ClassVar[BoundsMode]
    BOUNDS_MODE_MONOMIAL: _ClassVar[BoundsMode]
    BOUNDS_MODE_ROWS: _ClassVar[BoundsMode]

class SolveStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SOLVE_STATUS_UNSPECIFIED: _ClassVar[SolveStatus]
    SOLVE_STATUS_OPTIMAL: _ClassVar[SolveStatus]
    SOLVE_STATUS_INFEASIBLE: _ClassVar[SolveStatus]
    SOLVE_STATUS_UNBOUNDED: _ClassVar[SolveStatus]
    SOLVE_STATUS_INFEASIBLE_OR_UNBOUNDED: _ClassVar[SolveStatus]
    SOLVE_STATUS_LIMIT: _ClassVar[SolveStatus]
    SOLVE_STATUS_ERROR: _ClassVar[SolveStatus]
    SOLVE_STATUS_ABORTED: _ClassVar[SolveStatus]
BOUNDS_MODE_UNSPECIFIED: BoundsMode
BOUNDS_MODE_MONOMIAL: BoundsMode
BOUNDS_MODE_ROWS: BoundsMode
SOLVE_STATUS_UNSPECIFIED: SolveStatus
SOLVE_STATUS_OPTIMAL: SolveStatus
SOLVE_STATUS_INFEASIBLE: SolveStatus
SOLVE_STATUS_UNBOUNDED: SolveStatus
SOLVE_STATUS_INFEASIBLE_OR_UNBOUNDED: SolveStatus
SOLVE_STATUS_LIMIT: SolveStatus
SOLVE_STATUS_ERROR: SolveStatus
SOLVE_STATUS_ABORTED: SolveStatus

class Matrix(_message.Message):
    __slots__ = ("rows", "cols", "sparse", "values", "indices", "indptr")
    ROWS_FIELD_NUMBER: _ClassVar[int]
    COLS_FIELD_NUMBER: _ClassVar[int]
    SPARSE_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    INDICES_FIELD_NUMBER: _ClassVar[int]
    INDPTR_FIELD_NUMBER: _ClassVar[int]
    rows: int
    cols: int
    sparse: bool
    values: bytes
    indices: bytes
    indptr: bytes
    def __init__(self, rows: _Optional[int] = ..., cols: _Optional[int] = ..., sparse: _Optional[bool] = ..., values: _Optional[bytes] = ..., indices: _Optional[bytes] = ..., indptr: _Optional[bytes] = ...) -> None: ...

class Vector(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: bytes
    def __init__(self, values: _Optional[bytes] = ...) -> None: ...

class HelloRequest(_message.Message):
    __slots__ = ("session_id", "protocol_version", "n_rows")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    N_ROWS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    protocol_version: int
    n_rows: int
    def __init__(self, session_id: _Optional[str] = ..., protocol_version: _Optional[int] = ..., n_rows: _Optional[int] = ...) -> None: ...

class HelloReply(_message.Message):
    __slots__ = ("party_id", "protocol_version", "n_rows", "n_cols", "n_free", "n_bounded")
    PARTY_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    N_ROWS_FIELD_NUMBER: _ClassVar[int]
    N_COLS_FIELD_NUMBER: _ClassVar[int]
    N_FREE_FIELD_NUMBER: _ClassVar[int]
    N_BOUNDED_FIELD_NUMBER: _ClassVar[int]
    party_id: str
    protocol_version: int
    n_rows: int
    n_cols: int
    n_free: int
    n_bounded: int
    def __init__(self, party_id: _Optional[str] = ..., protocol_version: _Optional[int] = ..., n_rows: _Optional[int] = ..., n_cols: _Optional[int] = ..., n_free: _Optional[int] = ..., n_bounded: _Optional[int] = ...) -> None: ...

class MaskRequest(_message.Message):
    __slots__ = ("session_id", "bounds_mode", "k", "reveal")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    BOUNDS_MODE_FIELD_NUMBER: _ClassVar[int]
    K_FIELD_NUMBER: _ClassVar[int]
    REVEAL_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    bounds_mode: BoundsMode
    k: int
    reveal: bool
    def __init__(self, session_id: _Optional[str] = ..., bounds_mode: _Optional[_Union[BoundsMode, str]] = ..., k: _Optional[int] = ..., reveal: _Optional[bool] = ...) -> None: ...

class MaskedBlock(_message.Message):
    __slots__ = ("party_id", "masked_a", "masked_c", "scaled_a", "scaled_c", "scaled_lower", "scaled_upper", "bound_rows", "bound_lower", "bound_upper", "reproducible", "compute_seconds")
    PARTY_ID_FIELD_NUMBER: _ClassVar[int]
    MASKED_A_FIELD_NUMBER: _ClassVar[int]
    MASKED_C_FIELD_NUMBER: _ClassVar[int]
    SCALED_A_FIELD_NUMBER: _ClassVar[int]
    SCALED_C_FIELD_NUMBER: _ClassVar[int]
    SCALED_LOWER_FIELD_NUMBER: _ClassVar[int]
    SCALED_UPPER_FIELD_NUMBER: _ClassVar[int]
    BOUND_ROWS_FIELD_NUMBER: _ClassVar[int]
    BOUND_LOWER_FIELD_NUMBER: _ClassVar[int]
    BOUND_UPPER_FIELD_NUMBER: _ClassVar[int]
    REPRODUCIBLE_FIELD_NUMBER: _ClassVar[int]
    COMPUTE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    party_id: str
    masked_a: Matrix
    masked_c: Vector
    scaled_a: Matrix
    scaled_c: Vector
    scaled_lower: Vector
    scaled_upper: Vector
    bound_rows: Matrix
    bound_lower: Vector
    bound_upper: Vector
    reproducible: bool
    compute_seconds: float
    def __init__(self, party_id: _Optional[str] = ..., masked_a: _Optional[_Union[Matrix, _Mapping]] = ..., masked_c: _Optional[_Union[Vector, _Mapping]] = ..., scaled_a: _Optional[_Union[Matrix, _Mapping]] = ..., scaled_c: _Optional[_Union[Vector, _Mapping]] = ..., scaled_lower: _Optional[_Union[Vector, _Mapping]] = ..., scaled_upper: _Optional[_Union[Vector, _Mapping]] = ..., bound_rows: _Optional[_Union[Matrix, _Mapping]] = ..., bound_lower: _Optional[_Union[Vector, _Mapping]] = ..., bound_upper: _Optional[_Union[Vector, _Mapping]] = ..., reproducible: _Optional[bool] = ..., compute_seconds: _Optional[float] = ...) -> None: ...

class SolutionNotice(_message.Message):
    __slots__ = ("session_id", "status", "status_text", "objective", "u", "y")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    STATUS_TEXT_FIELD_NUMBER: _ClassVar[int]
    OBJECTIVE_FIELD_NUMBER: _ClassVar[int]
    U_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    status: SolveStatus
    status_text: str
    objective: float
    u: Vector
    y: Vector
    def __init__(self, session_id: _Optional[str] = ..., status: _Optional[_Union[SolveStatus, str]] = ..., status_text: _Optional[str] = ..., objective: _Optional[float] = ..., u: _Optional[_Union[Vector, _Mapping]] = ..., y: _Optional[_Union[Vector, _Mapping]] = ...) -> None: ...

class DecodeReply(_message.Message):
    __slots__ = ("party_id", "revealed", "x", "n_decoded", "compute_seconds")
    PARTY_ID_FIELD_NUMBER: _ClassVar[int]
    REVEALED_FIELD_NUMBER: _ClassVar[int]
    X_FIELD_NUMBER: _ClassVar[int]
    N_DECODED_FIELD_NUMBER: _ClassVar[int]
    COMPUTE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    party_id: str
    revealed: bool
    x: Vector
    n_decoded: int
    compute_seconds: float
    def __init__(self, party_id: _Optional[str] = ..., revealed: _Optional[bool] = ..., x: _Optional[_Union[Vector, _Mapping]] = ..., n_decoded: _Optional[int] = ..., compute_seconds: _Optional[float] = ...) -> None: ...

class CloseRequest(_message.Message):
    __slots__ = ("session_id", "reason")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    reason: str
    def __init__(self, session_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class CloseReply(_message.Message):
    __slots__ = ("party_id",)
    PARTY_ID_FIELD_NUMBER: _ClassVar[int]
    party_id: str
    def __init__(self, party_id: _Optional[str] = ...) -> None: ...

class Chunk(_message.Message):
    __slots__ = ("total_size", "offset", "data", "sha256")
    TOTAL_SIZE_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    total_size: int
    offset: int
    data: bytes
    sha256: bytes
    def __init__(self, total_size: _Optional[int] = ..., offset: _Optional[int] = ..., data: _Optional[bytes] = ..., sha256: _Optional[bytes] = ...) -> None: ...
