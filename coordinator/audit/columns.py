"""Matching columns up to scale in linear time: hashed directions.

Scoring an attack against the truth means finding, for each recovered column, the true column
it is (if any): the same direction (equal up to a factor; a positive one for monomial masks)
and, where the attack claims values, the same values. Comparing every pair is quadratic (the
old auditor spent more than 15 minutes on a 100,000-column transportation LP); here each true
column goes into a hash table under a key that a small error cannot change much:

* the row pattern (rows of the entries above :data:`ZERO_TOL` of the column's largest), and
* the signs and the binned logarithms of up to :data:`KEY_ENTRIES` entries after the first,
  once the column is divided by its first entry (by its magnitude when the scale is positive).

Bins are :data:`LOG_BIN` wide in the natural log; a lookup probes the neighbouring bins too, so
a direction that is right to better than ``LOG_BIN`` relative is always found, and the
candidates found are then compared in full (relative max-norm error).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterator

import numpy as np
import scipy.sparse as sp

#: entries below this fraction of a column's largest entry count as zero (recovered vectors
#: carry rounding noise of about 1e-12)
ZERO_TOL = 1e-9
#: entries (after the first) whose binned values go into the key
KEY_ENTRIES = 2
#: width of a bin of log|value| (relative 1e-5)
LOG_BIN = 1e-5
#: relative max-norm error within which a recovered column counts as the true one
MATCH_TOL = 1e-6


def snap_small(A: sp.csc_matrix) -> sp.csc_matrix:
    """``A`` without entries below :data:`ZERO_TOL` of their column's largest magnitude."""
    A = sp.csc_matrix(A, copy=True)
    if A.nnz:
        col_max = np.maximum.reduceat(np.abs(A.data), A.indptr[:-1][np.diff(A.indptr) > 0])
        full = np.zeros(A.shape[1])
        full[np.diff(A.indptr) > 0] = col_max
        per_entry = np.repeat(full, np.diff(A.indptr))
        A.data[np.abs(A.data) <= ZERO_TOL * per_entry] = 0.0
        A.eliminate_zeros()
    return A


def column_entries(A: sp.csc_matrix, j: int) -> tuple[np.ndarray, np.ndarray]:
    """Row indices and values of column ``j`` of a CSC matrix (views, no copy)."""
    lo, hi = A.indptr[j], A.indptr[j + 1]
    return A.indices[lo:hi], A.data[lo:hi]


def _key_parts(rows: np.ndarray, vals: np.ndarray, signed: bool) -> tuple[bytes, tuple[int, ...]]:
    """(pattern and signs, binned log-values) of one column's direction."""
    if vals.size == 0:
        return b"", ()
    first = vals[0] if signed else abs(vals[0])
    normed = vals / first
    head = rows.astype(np.int32).tobytes() + np.signbit(normed).tobytes()
    tail = normed[1:1 + KEY_ENTRIES]
    bins = tuple(int(b) for b in np.floor(np.log(np.abs(tail)) / LOG_BIN))
    return head, bins


class DirectionIndex:
    """True columns hashed by direction, for :meth:`lookup` of recovered ones.

    Parameters
    ----------
    A : (m, n) the true columns (sparse).
    signed : whether scales may be negative (dense masks) or are positive (monomial).
    """

    def __init__(self, A: sp.csc_matrix, *, signed: bool) -> None:
        self.A = snap_small(sp.csc_matrix(A))
        self.A.sort_indices()
        self.signed = signed
        self._table: dict[tuple[bytes, tuple[int, ...]], list[int]] = defaultdict(list)
        for j in range(self.A.shape[1]):
            head, bins = _key_parts(*column_entries(self.A, j), signed)
            self._table[(head, bins)].append(j)

    def lookup(self, rows: np.ndarray, vals: np.ndarray) -> Iterator[int]:
        """Indices of true columns whose key is within one bin of this direction's (each once)."""
        head, bins = _key_parts(rows, vals, self.signed)
        seen: set[int] = set()
        for delta in itertools.product((0, -1, 1), repeat=len(bins)):
            key = (head, tuple(b + d for b, d in zip(bins, delta)))
            for j in self._table.get(key, ()):
                if j not in seen:
                    seen.add(j)
                    yield j


def direction_error(rows: np.ndarray, vals: np.ndarray, t_rows: np.ndarray, t_vals: np.ndarray,
                    signed: bool) -> float:
    """Relative max-norm error of the best multiple of a recovered direction against a true column
    (patterns must agree; inf when they do not or a positive scale is required and fails)."""
    if rows.size != t_rows.size or not np.array_equal(rows, t_rows):
        return np.inf
    if vals.size == 0:
        return 0.0
    scale = float(vals @ t_vals) / float(vals @ vals)
    if not signed and scale <= 0:
        return np.inf
    return float(np.abs(scale * vals - t_vals).max() / np.abs(t_vals).max())


def value_error(rows: np.ndarray, vals: np.ndarray, cost: float, t_rows: np.ndarray, t_vals: np.ndarray,
                t_cost: float) -> float:
    """Relative max-norm error of recovered values (column and cost) against a true column."""
    if rows.size != t_rows.size or not np.array_equal(rows, t_rows) or not np.isfinite(cost):
        return np.inf
    ref = max(float(np.abs(t_vals).max()) if t_vals.size else 0.0, abs(t_cost))
    diff = max(float(np.abs(vals - t_vals).max()) if vals.size else 0.0, abs(cost - t_cost))
    if ref == 0:
        return 0.0 if diff == 0 else np.inf
    return diff / ref
