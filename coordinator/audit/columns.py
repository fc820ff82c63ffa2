"""Matching columns up to scale in linear time: hashed columns, vectorized.

Scoring an attack against the truth means finding, for each recovered column, the true column
it is (if any): the same direction (equal up to a factor; a positive one for monomial masks)
and, where the attack claims values, the same values. Comparing every pair is quadratic (more
than 15 minutes on a 100,000-column transportation LP); here every column gets a 64-bit hash,
computed for all columns at once with numpy:

* of its *values* (row pattern, signs, each value rounded to :data:`KEY_BITS` bits of mantissa,
  and the cost), to pair recovered values with true ones, and
* of its *direction* (the same once the column is divided by its first entry, or by that
  entry's magnitude when the scale is known to be positive).

Equal hashes give candidate pairs (sorting, no Python loop per column); each pair is then
verified in full (same pattern, relative max-norm error within :data:`MATCH_TOL`). Rounding to
21 bits puts values that differ by rounding noise (1e-16 for scaled columns, 1e-12 for columns
recovered through factorizations) into different keys with probability about 1e-6 per value.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

#: entries below this fraction of a column's largest entry count as zero (recovered vectors
#: carry rounding noise of about 1e-12)
ZERO_TOL = 1e-9
#: bits of each value's mantissa that go into a key (a relative quantum of 1e-6)
KEY_BITS = 21
#: relative max-norm error within which a recovered column counts as the true one
MATCH_TOL = 1e-6

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def column_entries(A: sp.csc_matrix, j: int) -> tuple[np.ndarray, np.ndarray]:
    """Row indices and values of column ``j`` of a CSC matrix (views, no copy)."""
    lo, hi = A.indptr[j], A.indptr[j + 1]
    return A.indices[lo:hi], A.data[lo:hi]


def snap_small(A: sp.csc_matrix) -> sp.csc_matrix:
    """``A`` (CSC, sorted indices) without entries below :data:`ZERO_TOL` of their column's largest
    magnitude."""
    A = sp.csc_matrix(A, copy=True)
    A.sort_indices()
    if A.nnz:
        counts = np.diff(A.indptr)
        live = counts > 0
        col_max = np.zeros(A.shape[1])
        col_max[live] = np.maximum.reduceat(np.abs(A.data), A.indptr[:-1][live])
        A.data[np.abs(A.data) <= ZERO_TOL * np.repeat(col_max, counts)] = 0.0
        A.eliminate_zeros()
    return A


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer, elementwise on uint64 (wrapping arithmetic)."""
    x = x.astype(np.uint64, copy=True)
    with np.errstate(over="ignore"):
        x ^= x >> np.uint64(30)
        x *= _M1
        x ^= x >> np.uint64(27)
        x *= _M2
        x ^= x >> np.uint64(31)
    return x


def _quantize(v: np.ndarray) -> np.ndarray:
    """Each value as a signed integer code of its binary exponent and its mantissa rounded to
    :data:`KEY_BITS` bits. Binary, not decimal: decimal data (a 7-digit 1.2345675) sit exactly on
    the boundaries of decimal rounding, where noise of 1e-16 flips the rounded value, but almost
    never on those of binary rounding (dyadic values such as 0.5 round to an integer, away from
    any boundary)."""
    a = np.abs(v)
    code = np.zeros(v.shape, dtype=np.int64)
    live = a > 0
    mant, e = np.frexp(a[live])  # mant in [0.5, 1)
    q = np.round(mant * 2.0 ** KEY_BITS).astype(np.int64)
    over = q >= 1 << KEY_BITS  # rounded up to 1.0
    q = np.where(over, q >> 1, q)
    e = e + over
    code[live] = (e.astype(np.int64) + 4096) * (1 << KEY_BITS) + q
    code[live & (v < 0)] *= -1
    return code


def _column_hash(A: sp.csc_matrix, values: np.ndarray, extra: np.ndarray | None) -> np.ndarray:
    """A 64-bit hash per column of its rows and value codes (and one extra code per column)."""
    n = A.shape[1]
    counts = np.diff(A.indptr)
    col = np.repeat(np.arange(n), counts)
    rank = np.arange(A.nnz) - A.indptr[col]
    with np.errstate(over="ignore"):
        h = _mix(A.indices.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) + _quantize(values).astype(np.uint64)
                 + rank.astype(np.uint64))
        out = np.zeros(n, dtype=np.uint64)
        np.add.at(out, col, h)
        out = _mix(out + counts.astype(np.uint64))
        if extra is not None:
            out = _mix(out ^ _quantize(extra).astype(np.uint64))
    return out


def _first_values(A: sp.csc_matrix) -> np.ndarray:
    counts = np.diff(A.indptr)
    first = np.ones(A.shape[1])
    live = counts > 0
    first[live] = A.data[A.indptr[:-1][live]]
    return first


def direction_hash(A: sp.csc_matrix, signed: bool) -> np.ndarray:
    """Hash of each column's direction (divided by its first entry, or its magnitude when positive
    scales only)."""
    first = _first_values(A)
    scale = first if signed else np.abs(first)
    return _column_hash(A, A.data / np.repeat(scale, np.diff(A.indptr)), None)


def value_hash(A: sp.csc_matrix, c: np.ndarray) -> np.ndarray:
    """Hash of each column's values and cost."""
    return _column_hash(A, A.data, np.nan_to_num(c, nan=0.0))


def pair_errors(A1: sp.csc_matrix, c1: np.ndarray | None, i1: np.ndarray, A2: sp.csc_matrix, c2: np.ndarray | None,
                i2: np.ndarray, *, direction: bool, signed: bool) -> np.ndarray:
    """Relative max-norm error of column i1[k] of A1 against column i2[k] of A2 for every k (inf
    where the row patterns differ). ``direction``: after the best factor (positive unless
    ``signed``), costs ignored; else values and costs (c1, c2) as they are."""
    out = np.full(i1.size, np.inf)
    if not i1.size:
        return out
    n1 = A1.indptr[i1 + 1] - A1.indptr[i1]
    n2 = A2.indptr[i2 + 1] - A2.indptr[i2]
    same = n1 == n2
    k = np.flatnonzero(same)
    reps = n1[k]
    owner = np.repeat(np.arange(k.size), reps)
    offset = np.arange(reps.sum()) - np.repeat(np.cumsum(reps) - reps, reps)
    p1 = A1.indptr[i1[k]][owner] + offset
    p2 = A2.indptr[i2[k]][owner] + offset
    rows_ok = np.ones(k.size, dtype=bool)
    np.logical_and.at(rows_ok, owner, A1.indices[p1] == A2.indices[p2])
    v1, v2 = A1.data[p1], A2.data[p2]
    if direction:
        dot = np.bincount(owner, weights=v1 * v2, minlength=k.size)
        nrm = np.bincount(owner, weights=v1 * v1, minlength=k.size)
        with np.errstate(invalid="ignore", divide="ignore"):
            scale = np.where(nrm > 0, dot / nrm, 1.0)
        if not signed:
            rows_ok &= scale > 0
        diff = np.abs(scale[owner] * v1 - v2)
        ref_c = np.zeros(k.size)
        diff_c = np.zeros(k.size)
    else:
        diff = np.abs(v1 - v2)
        cc1 = np.asarray(c1)[i1[k]] if c1 is not None else np.zeros(k.size)
        cc2 = np.asarray(c2)[i2[k]] if c2 is not None else np.zeros(k.size)
        rows_ok &= np.isfinite(cc1)
        ref_c = np.abs(cc2)
        diff_c = np.abs(np.nan_to_num(cc1, nan=np.inf) - cc2)
    dmax = np.zeros(k.size)
    np.maximum.at(dmax, owner, diff)
    ref = np.zeros(k.size)
    np.maximum.at(ref, owner, np.abs(v2))
    dmax = np.maximum(dmax, diff_c)
    ref = np.maximum(ref, ref_c)
    with np.errstate(invalid="ignore", divide="ignore"):
        err = np.where(ref > 0, dmax / ref, np.where(dmax > 0, np.inf, 0.0))
    err[~rows_ok] = np.inf
    out[k] = err
    return out


def match_by_hash(keys_rec: np.ndarray, keys_true: np.ndarray, candidates: np.ndarray,
                  free_true: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pair each recovered column in ``candidates`` with an unused true column of the same key (the
    k-th recovered column of a key with the k-th free true column of that key). Returns the
    paired (recovered, true) indices."""
    if not candidates.size:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    t_idx = np.flatnonzero(free_true)
    t_order = t_idx[np.argsort(keys_true[t_idx], kind="stable")]
    t_sorted = keys_true[t_order]
    r_order = candidates[np.argsort(keys_rec[candidates], kind="stable")]
    r_sorted = keys_rec[r_order]
    start = np.searchsorted(t_sorted, r_sorted, side="left")
    stop = np.searchsorted(t_sorted, r_sorted, side="right")
    # rank of each recovered column among those of its key
    first = np.searchsorted(r_sorted, r_sorted, side="left")
    rank = np.arange(r_sorted.size) - first
    ok = start + rank < stop
    return r_order[ok], t_order[(start + rank)[ok]]
