"""Conversions between numpy/scipy arrays and the wire messages, and chunk framing.

Arrays travel as little-endian float64 (and int64 for sparse indices). Every
payload-bearing message is serialized, split into chunks of at most
``CHUNK_BYTES`` (1 MiB), and the SHA-256 of the whole payload rides on the last chunk;
``join_chunks`` refuses gaps, overlaps, size mismatches and checksum mismatches.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator

import numpy as np
import scipy.sparse as sp

from securelp.protos import securelp_pb2 as pb
from securelp.solvers.errors import ProtocolError

CHUNK_BYTES = 1 << 20
#: trailing metadata of a party's error: the typed error's class name, re-raised as such by the coordinator
ERROR_CLASS_METADATA = "securelp-error-class"
#: trailing metadata of the Hello reply: the split id of the party's block (public, from
#: ``securelp split``), so the coordinator can refuse a block of another split
SPLIT_ID_METADATA = "securelp-split-id"
#: refuse payloads above this size (bytes) before allocating for them
MAX_PAYLOAD_BYTES = 2 << 30


def vector_to_pb(values: np.ndarray) -> pb.Vector:
    """float64 vector -> ``Vector``."""
    return pb.Vector(values=np.ascontiguousarray(values, dtype="<f8").tobytes())


def vector_from_pb(msg: pb.Vector, *, expected: int | None = None, what: str = "vector") -> np.ndarray:
    """``Vector`` -> float64 array, checking the length when ``expected`` is given."""
    if len(msg.values) % 8:
        raise ProtocolError(f"{what}: payload length {len(msg.values)} is not a multiple of 8")
    out = np.frombuffer(msg.values, dtype="<f8").astype(np.float64)
    if expected is not None and out.size != expected:
        raise ProtocolError(f"{what}: expected {expected} values, got {out.size}")
    return out


def matrix_to_pb(mat: np.ndarray | sp.spmatrix | sp.sparray) -> pb.Matrix:
    """Dense array or scipy sparse matrix -> ``Matrix`` (sparse ones as CSC)."""
    if sp.issparse(mat):
        csc = sp.csc_matrix(mat)
        csc.sort_indices()
        return pb.Matrix(
            rows=csc.shape[0],
            cols=csc.shape[1],
            sparse=True,
            values=np.ascontiguousarray(csc.data, dtype="<f8").tobytes(),
            indices=np.ascontiguousarray(csc.indices, dtype="<i8").tobytes(),
            indptr=np.ascontiguousarray(csc.indptr, dtype="<i8").tobytes(),
        )
    arr = np.asarray(mat, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError("matrix_to_pb needs a 2-D array")
    return pb.Matrix(rows=arr.shape[0], cols=arr.shape[1], sparse=False,
                     values=np.ascontiguousarray(arr, dtype="<f8").tobytes())


def matrix_from_pb(msg: pb.Matrix, *, what: str = "matrix") -> np.ndarray | sp.csc_matrix:
    """``Matrix`` -> dense float64 array or ``scipy.sparse.csc_matrix``; shapes checked."""
    rows, cols = int(msg.rows), int(msg.cols)
    if msg.sparse:
        data = np.frombuffer(msg.values, dtype="<f8").astype(np.float64)
        indices = np.frombuffer(msg.indices, dtype="<i8").astype(np.int64)
        indptr = np.frombuffer(msg.indptr, dtype="<i8").astype(np.int64)
        if indptr.size != cols + 1 or data.size != indices.size or (indptr.size and indptr[-1] != data.size):
            raise ProtocolError(f"{what}: inconsistent sparse layout for a {rows} x {cols} matrix")
        if indices.size and (indices.min() < 0 or indices.max() >= rows):
            raise ProtocolError(f"{what}: row index out of range for {rows} rows")
        return sp.csc_matrix((data, indices, indptr), shape=(rows, cols))
    if len(msg.values) != 8 * rows * cols:
        raise ProtocolError(f"{what}: expected {rows} x {cols} doubles, got {len(msg.values)} bytes")
    return np.frombuffer(msg.values, dtype="<f8").astype(np.float64).reshape(rows, cols)


def split_payload(payload: bytes, chunk_bytes: int = CHUNK_BYTES) -> Iterator[pb.Chunk]:
    """Frame ``payload`` as chunks; the last carries the SHA-256 of the whole."""
    total = len(payload)
    digest = hashlib.sha256(payload).digest()
    if total == 0:
        yield pb.Chunk(total_size=0, offset=0, data=b"", sha256=digest)
        return
    view = memoryview(payload)
    for offset in range(0, total, chunk_bytes):
        end = min(total, offset + chunk_bytes)
        yield pb.Chunk(total_size=total, offset=offset, data=bytes(view[offset:end]),
                       sha256=digest if end == total else b"")


class ChunkAssembler:
    """Reassembles one payload from its chunks as they arrive (anything with ``total_size``, ``offset``,
    ``data`` and ``sha256``: a ``Chunk`` or a runtime ``Envelope``); refuses gaps, overlaps,
    reordering, a changing total, an announced size above :data:`MAX_PAYLOAD_BYTES` (before
    allocating) and a checksum mismatch with a ``ProtocolError`` naming ``peer``."""

    def __init__(self, peer: str = "peer") -> None:
        self.peer = peer
        self.total = -1
        self._buffer: bytearray | None = None
        self._offset = 0
        self._digest = b""

    @property
    def complete(self) -> bool:
        """Whether every announced byte has arrived."""
        return self._buffer is not None and self._offset == self.total

    def add(self, chunk: object) -> bool:
        """Append one chunk; True once the payload is complete."""
        total, offset = int(chunk.total_size), int(chunk.offset)  # type: ignore[attr-defined]
        if self._buffer is None:
            if total > MAX_PAYLOAD_BYTES:
                raise ProtocolError(f"{self.peer}: payload of {total} bytes exceeds the {MAX_PAYLOAD_BYTES}-byte limit")
            self.total = total
            self._buffer = bytearray()
        elif total != self.total:
            raise ProtocolError(f"{self.peer}: chunk total size changed mid-stream")
        if offset != self._offset:
            raise ProtocolError(f"{self.peer}: chunk at offset {offset}, expected {self._offset}")
        data = chunk.data  # type: ignore[attr-defined]
        self._buffer += data
        self._offset += len(data)
        if self._offset > self.total:
            raise ProtocolError(f"{self.peer}: chunks exceed the announced {self.total} bytes")
        if chunk.sha256:  # type: ignore[attr-defined]
            self._digest = chunk.sha256  # type: ignore[attr-defined]
        return self._offset == self.total

    def payload(self) -> bytes:
        """The whole payload, its checksum verified."""
        if self._buffer is None:
            raise ProtocolError(f"{self.peer}: empty chunk stream")
        if self._offset != self.total:
            raise ProtocolError(f"{self.peer}: stream ended after {self._offset} of {self.total} bytes")
        data = bytes(self._buffer)
        if hashlib.sha256(data).digest() != self._digest:
            raise ProtocolError(f"{self.peer}: payload checksum mismatch")
        return data


def join_chunks(chunks: Iterable[pb.Chunk], *, peer: str = "peer") -> bytes:
    """Reassemble chunks from ``split_payload``; raise ``ProtocolError`` naming ``peer``."""
    assembler = ChunkAssembler(peer)
    for chunk in chunks:
        assembler.add(chunk)
    return assembler.payload()
