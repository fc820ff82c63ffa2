"""Vertical partitioning of an LP: public row data and private column blocks.

Party j holds ``ColumnBlock`` (A_.j, c_j, its column bounds); everyone may know
``PublicRows`` (m, row bounds, sense, objective constant) and the split's ``Roster`` (party
ids, each block's column count n_j, and a random split id that every block of the split
also carries). Blocks are stored as ``.npz`` files written atomically, so ``securelp split``
never leaves a half-written file. Files without the roster arrays (no ``split_id`` array; the
roster is optional in format 1) load with ``roster`` None / ``split_id`` empty.

A block also keeps its columns' names (from the MPS file), so that its owner can write its
decoded x_j under them (``securelp party --out``). The names are the owner's: they are stored
in its private block file only and never sent. Block files without them (optional array
``col_names``) load with the names ``x1 .. xn`` in the block's own numbering.
"""

from __future__ import annotations

import os
import re
import secrets
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from securelp.solvers.errors import InputError
from securelp.solvers.files import require_file, write_atomically
from securelp.solvers.lp.model import LinearProgram, Sense

BLOCK_FORMAT = "securelp-column-block/1"
PUBLIC_FORMAT = "securelp-public-rows/1"


#: bytes of randomness in a split id (128 bits, as hex)
SPLIT_ID_BYTES = 16


#: what a split id looks like (``new_split_id`` makes 32 hex digits; anything else is refused on load)
SPLIT_ID_RE = re.compile(r"[0-9a-f]{8,64}")


def new_split_id() -> str:
    """A fresh random split id (128 bits, hex): public, it only ties the blocks of one split together."""
    return secrets.token_hex(SPLIT_ID_BYTES)


@dataclass(frozen=True)
class Roster:
    """Who took part in a split: the party ids, each block's column count, and the split id.

    All of it is public (docs/threat_model.md: n_j is revealed to the coordinator in every
    session anyway); the split id is a random token, not derived from any data.
    """

    split_id: str
    party_ids: tuple[str, ...]
    n_cols: tuple[int, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "party_ids", tuple(str(p) for p in self.party_ids))
        object.__setattr__(self, "n_cols", tuple(int(n) for n in self.n_cols))
        if not SPLIT_ID_RE.fullmatch(self.split_id) or len(self.party_ids) != len(self.n_cols) or not self.party_ids:
            raise InputError("the party roster is inconsistent (split id, ids and column counts)")
        if len(set(self.party_ids)) != len(self.party_ids) or any(n < 0 for n in self.n_cols):
            raise InputError("the party roster is inconsistent (duplicate ids or negative column counts)")

    @property
    def columns(self) -> dict[str, int]:
        return dict(zip(self.party_ids, self.n_cols))

    def check_parties(self, ids: Sequence[str], *, what: str = "the session's party set") -> None:
        """Refuse a set of party ids that is not this roster, naming the missing and extra ones.

        Raises
        ------
        InputError
        """
        given = list(ids)
        missing = [p for p in self.party_ids if p not in given]
        extra = [p for p in given if p not in self.party_ids]
        if not missing and not extra:
            return
        parts = []
        if missing:
            parts.append(f"missing {', '.join(missing)}")
        if extra:
            parts.append(f"not in the split: {', '.join(extra)}")
        raise InputError(f"{what} does not match the split ({'; '.join(parts)}); the split has "
                         f"{len(self.party_ids)} parties: {', '.join(self.party_ids)} -- every party of the split "
                         "must take part, or the optimum is that of another LP")


@dataclass(frozen=True, eq=False)
class PublicRows:
    """What every participant may know: row bounds, sense, objective constant and, for files
    written by ``securelp split``, the split's ``Roster`` (None for files without one)."""

    row_lower: np.ndarray
    row_upper: np.ndarray
    sense: Sense = Sense.MINIMIZE
    offset: float = 0.0
    name: str = ""
    roster: Roster | None = None

    @property
    def n_rows(self) -> int:
        return int(self.row_lower.size)


@dataclass(frozen=True, eq=False)
class ColumnBlock:
    """One party's private column block (A_.j, c_j, l_j, u_j), the id of the split it came
    from (empty: unknown, e.g. a file written before split ids existed) and its columns' names
    (None: unnamed; :attr:`column_names` then numbers them ``x1 .. xn``)."""

    party_id: str
    A: sp.csc_matrix
    c: np.ndarray
    col_lower: np.ndarray
    col_upper: np.ndarray
    split_id: str = ""
    col_names: tuple[str, ...] | None = None

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
        if self.split_id and not SPLIT_ID_RE.fullmatch(self.split_id):
            raise InputError(f"{where}: split id {self.split_id[:40]!r} is malformed")
        if self.col_names is not None:
            names = tuple(str(name) for name in self.col_names)
            if len(names) != n:
                raise InputError(f"{where}: {len(names)} column names for {n} columns")
            object.__setattr__(self, "col_names", names)

    @property
    def n_rows(self) -> int:
        return int(self.A.shape[0])

    @property
    def n_cols(self) -> int:
        return int(self.A.shape[1])

    @property
    def column_names(self) -> tuple[str, ...]:
        """The columns' names: from the MPS file, else ``x1 .. xn`` (the block's own numbering)."""
        return self.col_names if self.col_names is not None else tuple(f"x{i + 1}" for i in range(self.n_cols))

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
    """Split ``lp`` into public rows and contiguous private column blocks.

    The public rows carry the roster (ids, column counts, a fresh random split id) and every
    block the same split id, so a coordinator can refuse a missing party or a stale block.
    Each block keeps the names of its columns when ``lp`` has them (an MPS file).
    """
    if sum(sizes) != lp.n_cols:
        raise InputError(f"split sizes sum to {sum(sizes)}, LP has {lp.n_cols} columns")
    ids = list(ids) if ids is not None else [f"party{i + 1}" for i in range(len(sizes))]
    if len(set(ids)) != len(ids):
        raise InputError("duplicate party ids")
    if len(ids) != len(sizes):
        raise InputError(f"{len(ids)} party ids for {len(sizes)} blocks")
    split_id = new_split_id()
    roster = Roster(split_id, tuple(ids), tuple(int(s) for s in sizes))
    public = PublicRows(np.array(lp.row_lower), np.array(lp.row_upper), lp.sense, lp.offset, lp.name, roster)
    blocks: list[ColumnBlock] = []
    start = 0
    for pid, size in zip(ids, sizes):
        sl = slice(start, start + size)
        names = lp.col_names[sl] if lp.col_names is not None else None
        blocks.append(ColumnBlock(pid, lp.A[:, sl], lp.c[sl], lp.col_lower[sl], lp.col_upper[sl], split_id, names))
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
    """Write a party's private block file (atomic, mode ``0600``: readable by its owner only), with
    its column names when it has them (optional array ``col_names``; older readers ignore it)."""
    A = block.A
    extra = {"split_id": np.array(block.split_id)} if block.split_id else {}
    if block.col_names is not None:
        extra["col_names"] = np.array(block.col_names, dtype=str)
    _atomic_savez(Path(path), 0o600, format=np.array(BLOCK_FORMAT), party_id=np.array(block.party_id),
                  shape=np.array(A.shape, dtype=np.int64), data=A.data, indices=A.indices.astype(np.int64),
                  indptr=A.indptr.astype(np.int64), c=block.c, col_lower=block.col_lower, col_upper=block.col_upper,
                  **extra)


def save_public(public: PublicRows, path: str | os.PathLike[str]) -> None:
    """Write the public row data file (atomic), with the roster when there is one.

    The roster arrays (``split_id``, ``roster_ids``, ``roster_cols``) are optional in format 1:
    older readers ignore them, and files without them still load.
    """
    extra: dict[str, np.ndarray] = {}
    if public.roster is not None:
        extra = {"split_id": np.array(public.roster.split_id), "roster_ids": np.array(public.roster.party_ids, dtype=str),
                 "roster_cols": np.array(public.roster.n_cols, dtype=np.int64)}
    _atomic_savez(Path(path), format=np.array(PUBLIC_FORMAT), row_lower=public.row_lower, row_upper=public.row_upper,
                  sense=np.array(public.sense.value), offset=np.array(public.offset), name=np.array(public.name),
                  **extra)


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
        for name in ("indices", "indptr"):
            if d[name].dtype.kind not in "iu":
                raise ValueError(f"its {name} are not integers")
        A = sp.csc_matrix((d["data"], d["indices"], d["indptr"]), shape=shape)
        # every index in range, indptr monotonic and of the right length: a bad index would
        # otherwise surface later as wrong data or a crash inside compiled code
        A.check_format(full_check=True)
        names = None
        if "col_names" in d:
            if d["col_names"].dtype.kind != "U" or d["col_names"].ndim != 1:
                raise ValueError("its column names are not a list of strings")
            names = tuple(str(v) for v in d["col_names"])
        block = ColumnBlock(str(d["party_id"]), A, d["c"], d["col_lower"], d["col_upper"],
                            str(d["split_id"]) if "split_id" in d else "", names)
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
        roster = None
        if "split_id" in d:
            ids, cols = np.asarray(d["roster_ids"]).reshape(-1), np.asarray(d["roster_cols"]).reshape(-1)
            if ids.dtype.kind != "U" or cols.dtype.kind not in "iu":
                raise InputError(f"public rows file {p}: the party roster is malformed")
            try:
                roster = Roster(str(d["split_id"]), tuple(str(i) for i in ids), tuple(int(n) for n in cols))
            except InputError as exc:
                raise InputError(f"public rows file {p}: {exc}") from None
        return PublicRows(lo, hi, Sense(str(d["sense"])), float(d["offset"]), str(d["name"]), roster)
    except KeyError as exc:
        raise InputError(f"public rows file {p} lacks the array {exc}") from None
