"""The mDP rows ``A`` (mDP rows x records): their structure, and the products with ``A`` and ``A'``
by blocks of rows on a thread pool.

Shared by the structured interior-point method (:mod:`securelp.solvers.mdp.ipm`), the smoothed dual
ascent (:mod:`securelp.solvers.mdp.columns.ascent`) and the transport certificates
(:mod:`securelp.solvers.mdp.columns.optimal_transport`):
scipy's sparse products and numpy's elementwise loops run without the GIL, so blocks of rows on
threads use the cores.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.sparse as sp

from securelp.solvers.errors import InputError

__all__ = ["PairIndex", "RowOps", "edge_structure", "row_blocks", "run_blocks"]


class RowOps:
    """The products with ``A`` (mDP rows x records) and ``A'`` and the elementwise work on arrays
    with one column per output, split by blocks of rows over the pool's threads (scipy's sparse
    products and numpy's elementwise loops run without the GIL)."""

    def __init__(self, A: sp.csr_matrix, AT: sp.csr_matrix, pool: ThreadPoolExecutor | None, threads: int) -> None:
        self.pool = pool
        E, m = A.shape
        self.E, self.m = E, m
        self.eb = row_blocks(E, threads)
        self.rb = row_blocks(m, threads)
        self.A = [A[sl] for sl in self.eb]
        self.AT = [AT[sl] for sl in self.rb]

    def edges(self, fn: Callable[[slice], None]) -> None:
        run_blocks(self.pool, fn, self.eb)

    def records(self, fn: Callable[[slice], None]) -> None:
        run_blocks(self.pool, fn, self.rb)

    def A_rows(self, sl: slice, X: np.ndarray, out: np.ndarray) -> None:
        """``out = (A X)[sl]`` (``sl`` one of the blocks of mDP rows)."""
        out[...] = self.A[self.eb.index(sl)] @ X

    def AT_rows(self, sl: slice, Y: np.ndarray, out: np.ndarray) -> None:
        """``out = (A' Y)[sl]`` (``sl`` one of the blocks of records)."""
        out[...] = self.AT[self.rb.index(sl)] @ Y

    def AT_all(self, Y: np.ndarray) -> np.ndarray:
        """``A' Y`` (in ``Y``'s precision)."""
        out = np.empty((self.m, Y.shape[1]), dtype=np.result_type(Y.dtype, *(b.dtype for b in self.AT[:1])))
        self.records(lambda sl: self.AT_rows(sl, Y, out[sl]))
        return out

    def A_all(self, X: np.ndarray) -> np.ndarray:
        """``A X`` (in ``X``'s precision)."""
        out = np.empty((self.E, X.shape[1]), dtype=np.result_type(X.dtype, *(b.dtype for b in self.A[:1])))
        self.edges(lambda sl: self.A_rows(sl, X, out[sl]))
        return out


def row_blocks(n: int, parts: int) -> list[slice]:
    """``range(n)`` in at most ``parts`` contiguous blocks of about equal size (none when empty)."""
    cuts = np.linspace(0, n, max(1, min(parts, n)) + 1).astype(int)
    return [slice(int(a), int(b)) for a, b in itertools.pairwise(cuts) if b > a]


def run_blocks(pool: ThreadPoolExecutor | None, fn: Callable[[slice], None], blocks: list[slice]) -> None:
    """``fn(block)`` for every block, on the pool's threads when there are several."""
    if pool is not None and len(blocks) > 1:
        list(pool.map(fn, blocks))
    else:
        for sl in blocks:
            fn(sl)


def edge_structure(A: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Source, target and factor ``a`` of each mDP row ``z_src - a z_tgt``."""
    coo = A.tocoo()
    E = A.shape[0]
    if coo.nnz != 2 * E:
        raise InputError("every mDP row must have exactly two entries")
    src = np.full(E, -1, dtype=np.int64)
    tgt = np.full(E, -1, dtype=np.int64)
    a = np.zeros(E)
    pos = coo.data > 0
    src[coo.row[pos]] = coo.col[pos]
    tgt[coo.row[~pos]] = coo.col[~pos]
    a[coo.row[~pos]] = -coo.data[~pos]
    if np.any(src < 0) or np.any(tgt < 0) or not np.allclose(coo.data[pos], 1.0):
        raise InputError("every mDP row must read z_i - a z_j with a > 0")
    return src, tgt, a


class PairIndex:
    """The mDP row of an ordered pair ``(s, t)`` of records, by a binary search over the rows' sorted
    pair keys ``s * m + t`` (``src``, ``tgt``: :func:`edge_structure`'s, ``m`` records)."""

    def __init__(self, src: np.ndarray, tgt: np.ndarray, m: int) -> None:
        self.m = m
        key = src * m + tgt
        self._order = np.argsort(key, kind="stable")
        self._keys = key[self._order]

    def rows(self, s: np.ndarray, t: np.ndarray) -> np.ndarray:
        """The rows of the pairs ``(s[k], t[k])`` that are mDP rows, in order; the others are left out."""
        want = np.asarray(s, dtype=np.int64) * self.m + np.asarray(t, dtype=np.int64)
        if not self._keys.size:
            return np.empty(0, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self._keys, want), self._keys.size - 1)
        return self._order[pos[self._keys[pos] == want]]
