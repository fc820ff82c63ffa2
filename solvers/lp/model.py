"""The frozen LP model: min/max c'x + offset s.t. row_lower <= A x <= row_upper,
col_lower <= x <= col_upper, with A in CSC form. Infinite bounds are +-inf."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from securelp.solvers.errors import InputError


class Sense(enum.Enum):
    """Optimization direction."""

    MINIMIZE = "min"
    MAXIMIZE = "max"


def _vector(values: object, n: int, name: str, *, allow_inf: bool) -> np.ndarray:
    arr = np.array(values, dtype=np.float64).reshape(-1)
    if arr.size != n:
        raise InputError(f"{name} has {arr.size} entries, expected {n}")
    if np.isnan(arr).any():
        raise InputError(f"{name} contains NaN at index {int(np.flatnonzero(np.isnan(arr))[0])}")
    if not allow_inf and not np.isfinite(arr).all():
        raise InputError(f"{name} contains Inf at index {int(np.flatnonzero(~np.isfinite(arr))[0])}")
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class LinearProgram:
    """An LP in general form (immutable; arrays are read-only).

    Parameters
    ----------
    c : (n,) objective coefficients.
    A : (m, n) constraint matrix (any scipy sparse or dense array; stored as CSC).
    row_lower, row_upper : (m,) row bounds, -inf/+inf for none.
    col_lower, col_upper : (n,) column bounds, -inf/+inf for none.
    sense : minimize (default) or maximize.
    offset : objective constant.
    """

    c: np.ndarray
    A: sp.csc_matrix
    row_lower: np.ndarray
    row_upper: np.ndarray
    col_lower: np.ndarray
    col_upper: np.ndarray
    sense: Sense = Sense.MINIMIZE
    offset: float = 0.0
    name: str = ""
    row_names: tuple[str, ...] | None = field(default=None, repr=False)
    col_names: tuple[str, ...] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        A = sp.csc_matrix(self.A, dtype=np.float64)
        A.sum_duplicates()
        A.sort_indices()
        m, n = A.shape
        if not np.isfinite(A.data).all():
            bad = int(np.flatnonzero(~np.isfinite(A.data))[0])
            col = int(np.searchsorted(A.indptr, bad, side="right") - 1)
            raise InputError(f"constraint matrix has a non-finite entry at row {int(A.indices[bad])}, column {col}")
        A.data.setflags(write=False)
        object.__setattr__(self, "A", A)
        object.__setattr__(self, "c", _vector(self.c, n, "objective c", allow_inf=False))
        for name, size in (("row_lower", m), ("row_upper", m), ("col_lower", n), ("col_upper", n)):
            object.__setattr__(self, name, _vector(getattr(self, name), size, name, allow_inf=True))
        if not np.isfinite(self.offset):
            raise InputError("objective offset must be finite")
        for lo, hi, what in ((self.row_lower, self.row_upper, "row"), (self.col_lower, self.col_upper, "column")):
            bad = np.flatnonzero(lo > hi)
            if bad.size:
                i = int(bad[0])
                raise InputError(f"{what} {i} has lower bound {lo[i]} above upper bound {hi[i]}")
            if np.any(lo == np.inf) or np.any(hi == -np.inf):
                raise InputError(f"a {what} bound is +inf below or -inf above")
        if self.row_names is not None and len(self.row_names) != m:
            raise InputError("row_names length differs from the row count")
        if self.col_names is not None and len(self.col_names) != n:
            raise InputError("col_names length differs from the column count")

    @property
    def n_rows(self) -> int:
        return int(self.A.shape[0])

    @property
    def n_cols(self) -> int:
        return int(self.A.shape[1])

    def objective_value(self, x: np.ndarray) -> float:
        """c'x + offset (in the model's own sense)."""
        return float(self.c @ x + self.offset)

    def max_violation(self, x: np.ndarray) -> float:
        """Largest absolute row- or column-bound violation of ``x`` (0 when feasible)."""
        ax = self.A @ x
        parts = [
            np.maximum(self.row_lower - ax, 0.0),
            np.maximum(ax - self.row_upper, 0.0),
            np.maximum(self.col_lower - x, 0.0),
            np.maximum(x - self.col_upper, 0.0),
        ]
        return float(max((p.max() if p.size else 0.0) for p in parts))

    def bounded_columns(self) -> np.ndarray:
        """Boolean mask of columns with at least one finite bound."""
        return np.isfinite(self.col_lower) | np.isfinite(self.col_upper)
