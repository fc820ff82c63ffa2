"""Vertical partitioning of an LP: public row data and private column blocks.

Party j holds ``ColumnBlock`` (A_.j, c_j, its column bounds); everyone may know
``PublicRows`` (m, row bounds, sense, objective constant). Blocks are stored as ``.npz``
files written atomically, so ``securelp split`` never leaves a half-written file.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from solvers.errors import InputError
from solvers.files import require_file, write_atomically
from solvers.lp.model import LinearProgram, Sense

BLOCK_FORMAT = "securelp-column-block/1"
PUBLIC_FORMAT = "securelp-public-rows/1"


@dataclass(frozen=True, eq=False)
class PublicRows:
    """What every participant may know: row bounds, sense and objective constant."""

    row_lower: np.ndarray
    row_upper: np.ndarray
    sense: Sense = Sense.MINIMIZE
    offset: float = 0.0
    name: str = ""

    @property
    def n_rows(self) -> int:
        return int(self.row_lower.size)


@dataclass(frozen=True, eq=False)
class ColumnBlock:
    """One party's private column block (A_.j, c_j, l_j, u_j)."""

    party_id: str
    A: sp.csc_matrix
    c: np.ndarray
    col_lower: np.ndarray
    col_upper: np.ndarray

    def __post_init__(self) -> None:
        A = sp.csc_matrix(self.A, dtype=np.float64)
        object.__setattr__(self, "A", A)
        n = A.shape[1]
        where = f"party {self.party_id!r}"
        if not self.party_id or any(ch.isspace() for ch in self.party_id):
            raise InputError(f"party id {self.party_id!r} must be non-empty with no white space")
        if not np.isfinite(A.data).all():
            raise InputError(f"{where}: its block contains NaN or Inf")
        for name in ("c", "col_lower", "col_upper"):
            arr = np.asarray(getattr(self, name), dtype=np.float64).reshape(-1)
            if arr.size != n:
                raise InputError(f"{where}: {name} has {arr.size} entries for {n} columns")
            if np.isnan(arr).any() or (name == "c" and not np.isfinite(arr).all()):
                raise InputError(f"{where}: {name} contains NaN or Inf")
            object.__setattr__(self, name, arr)
        if np.any(self.col_lower > self.col_upper):
            raise InputError(f"{where}: a column lower bound exceeds its upper bound")

    @property
    def n_rows(self) -> int:
        return int(self.A.shape[0])

    @property
    def n_cols(self) -> int:
        return int(self.A.shape[1])

    def bounded_mask(self) -> np.ndarray:
        """Columns with at least one finite bound."""
        return np.isfinite(self.col_lower) | np.isfinite(self.col_upper)


def parse_split(spec: str | None, n_cols: int, parties: int) -> list[int]:
    """Column counts per party: contiguous near-equal parts, or ``"a,b,c"``."""
    if parties < 1:
        raise InputError(f"--parties must be >= 1, got {parties}")
    if spec is None:
        if parties > n_cols:
            raise InputError(f"{parties} parties but only {n_cols} columns: each party needs at least one")
        base, extra = divmod(n_cols, parties)
        return [base + (1 if i < extra else 0) for i in range(parties)]
    try:
        sizes = [int(s) for s in spec.split(",")]
    except ValueError:
        raise InputError(f"--split {spec!r}: expected comma-separated column counts such as 500,300,200") from None
    if len(sizes) != parties:
        raise InputError(f"--split gives {len(sizes)} parts for {parties} parties")
    if any(s < 1 for s in sizes):
        raise InputError(f"--split {spec!r}: every part needs at least one column")
    if sum(sizes) != n_cols:
        raise InputError(f"--split {spec!r} sums to {sum(sizes)}, but the LP has {n_cols} columns")
    return sizes


def split_columns(lp: LinearProgram, sizes: Sequence[int], ids: Sequence[str] | None = None) -> tuple[PublicRows, list[ColumnBlock]]:
    """Split ``lp`` into public rows and contiguous private column blocks."""
    if sum(sizes) != lp.n_cols:
        raise InputError(f"split sizes sum to {sum(sizes)}, LP has {lp.n_cols} columns")
    ids = list(ids) if ids is not None else [f"party{i + 1}" for i in range(len(sizes))]
    if len(set(ids)) != len(ids):
        raise InputError("duplicate party ids")
    public = PublicRows(np.array(lp.row_lower), np.array(lp.row_upper), lp.sense, lp.offset, lp.name)
    blocks: list[ColumnBlock] = []
    start = 0
    for pid, size in zip(ids, sizes):
        sl = slice(start, start + size)
        blocks.append(ColumnBlock(pid, lp.A[:, sl], lp.c[sl], lp.col_lower[sl], lp.col_upper[sl]))
        start += size
    return public, blocks


def assemble(public: PublicRows, blocks: Sequence[ColumnBlock]) -> LinearProgram:
    """The whole LP (only possible for one who holds every block: tests, central comparison)."""
    return LinearProgram(
        c=np.concatenate([b.c for b in blocks]),
        A=sp.hstack([b.A for b in blocks], format="csc"),
        row_lower=public.row_lower,
        row_upper=public.row_upper,
        col_lower=np.concatenate([b.col_lower for b in blocks]),
        col_upper=np.concatenate([b.col_upper for b in blocks]),
        sense=public.sense,
        offset=public.offset,
        name=public.name,
    )


def _atomic_savez(path: Path, mode: int | None = None, **arrays: np.ndarray) -> None:
    write_atomically(path, lambda handle: np.savez(handle, **arrays), mode=mode)


def save_block(block: ColumnBlock, path: str | os.PathLike[str]) -> None:
    """Write a party's private block file (atomic, mode ``0600``: readable by its owner only)."""
    A = block.A
    _atomic_savez(Path(path), 0o600, format=np.array(BLOCK_FORMAT), party_id=np.array(block.party_id),
                  shape=np.array(A.shape, dtype=np.int64), data=A.data, indices=A.indices.astype(np.int64),
                  indptr=A.indptr.astype(np.int64), c=block.c, col_lower=block.col_lower, col_upper=block.col_upper)


def save_public(public: PublicRows, path: str | os.PathLike[str]) -> None:
    """Write the public row data file (atomic)."""
    _atomic_savez(Path(path), format=np.array(PUBLIC_FORMAT), row_lower=public.row_lower, row_upper=public.row_upper,
                  sense=np.array(public.sense.value), offset=np.array(public.offset), name=np.array(public.name))


def _open_npz(path: Path, kind: str, fmt: str) -> dict[str, np.ndarray]:
    require_file(path, f"{kind} file")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise InputError(f"{kind} file {path} is not a valid securelp file ({exc.__class__.__name__})") from None
    if str(arrays.get("format", "")) != fmt:
        raise InputError(f"{kind} file {path} is not a {fmt} file")
    return arrays


def load_block(path: str | os.PathLike[str], party_id: str | None = None) -> ColumnBlock:
    """Read a block file; with ``party_id`` set, the file must belong to that party."""
    p = Path(path)
    d = _open_npz(p, "party block", BLOCK_FORMAT)
    try:
        shape = tuple(int(v) for v in d["shape"])
        A = sp.csc_matrix((d["data"], d["indices"], d["indptr"]), shape=shape)
        block = ColumnBlock(str(d["party_id"]), A, d["c"], d["col_lower"], d["col_upper"])
    except KeyError as exc:
        raise InputError(f"party block file {p} lacks the array {exc}") from None
    except ValueError as exc:
        raise InputError(f"party block file {p} is corrupt: {exc}") from None
    except InputError as exc:
        raise InputError(f"party block file {p}: {exc}") from None
    if party_id is not None and block.party_id != party_id:
        raise InputError(f"party block file {p} belongs to {block.party_id!r}, not {party_id!r}")
    return block


def load_public(path: str | os.PathLike[str]) -> PublicRows:
    """Read the public row data file."""
    p = Path(path)
    d = _open_npz(p, "public rows", PUBLIC_FORMAT)
    try:
        lo = np.asarray(d["row_lower"], dtype=np.float64)
        hi = np.asarray(d["row_upper"], dtype=np.float64)
        if lo.shape != hi.shape or np.isnan(lo).any() or np.isnan(hi).any():
            raise InputError(f"public rows file {p}: row bounds are inconsistent or NaN")
        return PublicRows(lo, hi, Sense(str(d["sense"])), float(d["offset"]), str(d["name"]))
    except KeyError as exc:
        raise InputError(f"public rows file {p} lacks the array {exc}") from None
