from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
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
    __slots__ = ("session_id", "protocol_version", "n_rows", "bounds_mode", "secure_aggregation")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    N_ROWS_FIELD_NUMBER: _ClassVar[int]
    BOUNDS_MODE_FIELD_NUMBER: _ClassVar[int]
    SECURE_AGGREGATION_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    protocol_version: int
    n_rows: int
    bounds_mode: BoundsMode
    secure_aggregation: bool
    def __init__(self, session_id: _Optional[str] = ..., protocol_version: _Optional[int] = ..., n_rows: _Optional[int] = ..., bounds_mode: _Optional[_Union[BoundsMode, str]] = ..., secure_aggregation: _Optional[bool] = ...) -> None: ...

class PartyPolicy(_message.Message):
    __slots__ = ("allowed_bounds", "reveal")
    ALLOWED_BOUNDS_FIELD_NUMBER: _ClassVar[int]
    REVEAL_FIELD_NUMBER: _ClassVar[int]
    allowed_bounds: _containers.RepeatedScalarFieldContainer[BoundsMode]
    reveal: bool
    def __init__(self, allowed_bounds: _Optional[_Iterable[_Union[BoundsMode, str]]] = ..., reveal: _Optional[bool] = ...) -> None: ...

class AggregationKey(_message.Message):
    __slots__ = ("public_key", "magnitude_a", "magnitude_c", "certificate", "signature")
    PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    MAGNITUDE_A_FIELD_NUMBER: _ClassVar[int]
    MAGNITUDE_C_FIELD_NUMBER: _ClassVar[int]
    CERTIFICATE_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    public_key: bytes
    magnitude_a: int
    magnitude_c: int
    certificate: bytes
    signature: bytes
    def __init__(self, public_key: _Optional[bytes] = ..., magnitude_a: _Optional[int] = ..., magnitude_c: _Optional[int] = ..., certificate: _Optional[bytes] = ..., signature: _Optional[bytes] = ...) -> None: ...

class HelloReply(_message.Message):
    __slots__ = ("party_id", "protocol_version", "n_rows", "n_cols", "n_free", "n_bounded", "policy", "aggregation_key")
    PARTY_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    N_ROWS_FIELD_NUMBER: _ClassVar[int]
    N_COLS_FIELD_NUMBER: _ClassVar[int]
    N_FREE_FIELD_NUMBER: _ClassVar[int]
    N_BOUNDED_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    AGGREGATION_KEY_FIELD_NUMBER: _ClassVar[int]
    party_id: str
    protocol_version: int
    n_rows: int
    n_cols: int
    n_free: int
    n_bounded: int
    policy: PartyPolicy
    aggregation_key: AggregationKey
    def __init__(self, party_id: _Optional[str] = ..., protocol_version: _Optional[int] = ..., n_rows: _Optional[int] = ..., n_cols: _Optional[int] = ..., n_free: _Optional[int] = ..., n_bounded: _Optional[int] = ..., policy: _Optional[_Union[PartyPolicy, _Mapping]] = ..., aggregation_key: _Optional[_Union[AggregationKey, _Mapping]] = ...) -> None: ...

class AggregationPeer(_message.Message):
    __slots__ = ("party_id", "key")
    PARTY_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    party_id: str
    key: AggregationKey
    def __init__(self, party_id: _Optional[str] = ..., key: _Optional[_Union[AggregationKey, _Mapping]] = ...) -> None: ...

class Aggregation(_message.Message):
    __slots__ = ("peers", "fraction_bits_a", "fraction_bits_c")
    PEERS_FIELD_NUMBER: _ClassVar[int]
    FRACTION_BITS_A_FIELD_NUMBER: _ClassVar[int]
    FRACTION_BITS_C_FIELD_NUMBER: _ClassVar[int]
    peers: _containers.RepeatedCompositeFieldContainer[AggregationPeer]
    fraction_bits_a: int
    fraction_bits_c: int
    def __init__(self, peers: _Optional[_Iterable[_Union[AggregationPeer, _Mapping]]] = ..., fraction_bits_a: _Optional[int] = ..., fraction_bits_c: _Optional[int] = ...) -> None: ...

class MaskRequest(_message.Message):
    __slots__ = ("session_id", "bounds_mode", "k", "reveal", "aggregation")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    BOUNDS_MODE_FIELD_NUMBER: _ClassVar[int]
    K_FIELD_NUMBER: _ClassVar[int]
    REVEAL_FIELD_NUMBER: _ClassVar[int]
    AGGREGATION_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    bounds_mode: BoundsMode
    k: int
    reveal: bool
    aggregation: Aggregation
    def __init__(self, session_id: _Optional[str] = ..., bounds_mode: _Optional[_Union[BoundsMode, str]] = ..., k: _Optional[int] = ..., reveal: _Optional[bool] = ..., aggregation: _Optional[_Union[Aggregation, _Mapping]] = ...) -> None: ...

class RingMatrix(_message.Message):
    __slots__ = ("rows", "cols", "values")
    ROWS_FIELD_NUMBER: _ClassVar[int]
    COLS_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    rows: int
    cols: int
    values: bytes
    def __init__(self, rows: _Optional[int] = ..., cols: _Optional[int] = ..., values: _Optional[bytes] = ...) -> None: ...

class MaskedBlock(_message.Message):
    __slots__ = ("party_id", "masked_a", "masked_c", "scaled_a", "scaled_c", "scaled_lower", "scaled_upper", "bound_rows", "bound_lower", "bound_upper", "reproducible", "compute_seconds", "share_a", "share_c")
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
    SHARE_A_FIELD_NUMBER: _ClassVar[int]
    SHARE_C_FIELD_NUMBER: _ClassVar[int]
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
    share_a: RingMatrix
    share_c: RingMatrix
    def __init__(self, party_id: _Optional[str] = ..., masked_a: _Optional[_Union[Matrix, _Mapping]] = ..., masked_c: _Optional[_Union[Vector, _Mapping]] = ..., scaled_a: _Optional[_Union[Matrix, _Mapping]] = ..., scaled_c: _Optional[_Union[Vector, _Mapping]] = ..., scaled_lower: _Optional[_Union[Vector, _Mapping]] = ..., scaled_upper: _Optional[_Union[Vector, _Mapping]] = ..., bound_rows: _Optional[_Union[Matrix, _Mapping]] = ..., bound_lower: _Optional[_Union[Vector, _Mapping]] = ..., bound_upper: _Optional[_Union[Vector, _Mapping]] = ..., reproducible: _Optional[bool] = ..., compute_seconds: _Optional[float] = ..., share_a: _Optional[_Union[RingMatrix, _Mapping]] = ..., share_c: _Optional[_Union[RingMatrix, _Mapping]] = ...) -> None: ...

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
    __slots__ = ("party_id", "revealed", "x", "n_decoded", "compute_seconds", "saved_as")
    PARTY_ID_FIELD_NUMBER: _ClassVar[int]
    REVEALED_FIELD_NUMBER: _ClassVar[int]
    X_FIELD_NUMBER: _ClassVar[int]
    N_DECODED_FIELD_NUMBER: _ClassVar[int]
    COMPUTE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SAVED_AS_FIELD_NUMBER: _ClassVar[int]
    party_id: str
    revealed: bool
    x: Vector
    n_decoded: int
    compute_seconds: float
    saved_as: str
    def __init__(self, party_id: _Optional[str] = ..., revealed: _Optional[bool] = ..., x: _Optional[_Union[Vector, _Mapping]] = ..., n_decoded: _Optional[int] = ..., compute_seconds: _Optional[float] = ..., saved_as: _Optional[str] = ...) -> None: ...

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
