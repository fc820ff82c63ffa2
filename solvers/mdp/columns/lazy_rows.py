"""Pricing LPs of a dense component that carry only the mDP rows they need.

Every output's pricing LP of a component (:mod:`securelp.solvers.mdp.columns.pricing`) is

    min (g_k - mu)' z   s.t.  z_i - exp(eps d_ij) z_j <= 0  (every essential pair i ~ j),  0 <= z <= 1,

the same rows for every output; only the costs differ. On a dense mDP graph (the text dataset, points
with every pair a neighbour) there are far more rows than records, and an optimal vertex needs few of
them: it is fixed by ``m`` independent tight constraints, bounds ``z_i = 1`` and rows, the rows a
forest of at most ``m - 1``. But the tight rows differ from output to output, so all outputs together
need most rows (one pool shared by the outputs grows to most of them and is slower than all rows).

So each output's LP carries its own rows: those between each record and its ``start_neighbours``
nearest neighbours, the rows it carried at its last pricing, and, after each solve, up to
``add_per_record`` of the rows its ``z`` violates by more than the LP's own feasibility tolerance per
record (the most violated), after which it is solved again, warm, until ``z`` violates none. That
``z`` is optimal for the whole LP: it is optimal for a relaxation and feasible for the whole. An
output priced for the first time starts from the starting rows, the rows whose multipliers were basic
at the last solution of the output its worker priced (a neighbour), and that basis. Certificates need
no care: the LP's multipliers, zero on the rows it does not carry, are multipliers ``y >= 0`` of the
whole LP's rows, and every bound is built from those (weak duality holds for any ``y >= 0``).
The rows are those of Qiu Eq. 5 for one output column.
"""

from __future__ import annotations

from typing import Any

import highspy
import numpy as np
import scipy.sparse as sp

from securelp.solvers.lp.highs import pass_arrays
from securelp.solvers.mdp.rowops import PairIndex, edge_structure

__all__ = ["BASIC", "LOWER", "LazyRows", "basis_codes", "status_codes", "statuses"]

STATUSES = [highspy.HighsBasisStatus(v) for v in range(5)]  # kLower, kBasic, kUpper, kZero, kNonbasic
LOWER = int(highspy.HighsBasisStatus.kLower)
BASIC = int(highspy.HighsBasisStatus.kBasic)


def _first_per_record(order: np.ndarray, src: np.ndarray, k: int) -> np.ndarray:
    """The entries of ``order`` (rows sorted by their source record ``src``, then by preference) that
    are among the first ``k`` of their source record."""
    s = src[order]
    return order[(np.arange(order.size) - np.searchsorted(s, s, side="left")) < k]


def status_codes(statuses: list[Any]) -> np.ndarray:
    """Basis statuses as int8 codes (highspy returns a 56-byte object per entry)."""
    return np.fromiter(map(int, statuses), dtype=np.int8, count=len(statuses))


def basis_codes(h: Any, n_cols: int, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """The basis of ``h``'s last solve as int8 codes of its columns and rows.

    In a lazy pricing LP every column lies in ``[0, inf)`` and every row in ``[lower, inf)``, so a
    nonbasic variable can only sit at its lower bound, and the basic variables (HiGHS's
    ``getBasicVariables``: a column's index, or ``-1 - row``) fix the whole basis. Reading
    ``getBasis()``'s status lists instead builds a Python object per entry: 4.2 ms per solve on 300
    records with 5,500 carried rows (0.04 ms this way). Falls back to those lists when HiGHS has no
    basis factorisation to read."""
    status, basic = h.getBasicVariables()
    if status != highspy.HighsStatus.kOk or basic.size != n_rows:  # pragma: no cover - solved by simplex
        b = h.getBasis()
        return status_codes(b.col_status), status_codes(b.row_status)
    col = np.full(n_cols, LOWER, dtype=np.int8)
    row = np.full(n_rows, LOWER, dtype=np.int8)
    col[basic[basic >= 0]] = BASIC
    row[-1 - basic[basic < 0]] = BASIC
    return col, row


def statuses(codes: np.ndarray) -> list[Any]:
    """int8 codes as the list of ``HighsBasisStatus`` a ``HighsBasis`` takes (few entries differ from kLower)."""
    out = [STATUSES[LOWER]] * codes.size
    for i in np.flatnonzero(codes != LOWER).tolist():
        out[i] = STATUSES[codes[i]]
    return out


class LazyRows:
    """The rows ``A z <= 0`` of one component (each row ``+1`` at its source record, ``-exp(eps d)``
    at its target) and, per output, the subset its pricing LP carries with its last basis.

    The LPs are solved in their dual form, as the pricing does on components with many
    rows per record: ``min 1't  s.t.  t + A_R'y >= -(g_k - mu),  t, y >= 0`` over the carried rows
    ``R``, whose basis has one row per record; ``z`` is its row duals, and a row of ``A`` that ``z``
    violates is a column ``y_e`` of negative reduced cost. ``workers`` HiGHS models are loaded through
    :meth:`load`; each knows which rows it carries. ``start_neighbours`` and ``add_per_record``: see
    the module docstring."""

    def __init__(self, A: sp.csr_matrix, n_outputs: int, workers: int, tolerance: float,
                 start_neighbours: int = 8, add_per_record: int = 64) -> None:
        A = sp.csr_matrix(A)
        E, m = A.shape
        self.src, self.dst, self.weight = edge_structure(A)  # weight exp(eps d) >= 1
        if not A.has_sorted_indices:
            A = A.sorted_indices()
        self.A = A
        # row e's two entries are A.indices/A.data[2e : 2e + 2] (edge_structure: two per row)
        if not np.array_equal(A.indptr, 2 * np.arange(E + 1)):  # pragma: no cover - edge_structure checked it
            raise ValueError("every mDP row must store exactly two entries")
        self.E, self.m = E, m
        self.tolerance = tolerance
        self._pairs = PairIndex(self.src, self.dst, m)
        self.add_per_record = add_per_record
        near = _first_per_record(np.lexsort((self.weight, self.src)), self.src, start_neighbours)
        self.start = np.unique(np.concatenate([near, self.reverse(near)]))
        self._is_start = np.zeros(E, dtype=bool)
        self._is_start[self.start] = True
        Saved = tuple[np.ndarray, np.ndarray | None, np.ndarray | None]  # rows, column and row status codes
        self.saved: list[Saved | None] = [None] * n_outputs
        self.last: list[Saved] = [(self.start, None, None)] * workers
        self.rows: list[np.ndarray] = [np.empty(0, dtype=np.int64)] * workers  # what each model carries
        self._held = [np.zeros(E, dtype=bool) for _ in range(workers)]
        # per worker (each worker index is used by one thread at a time, so no count is lost)
        self._rounds = [0] * workers
        self._carried = [0] * workers
        self._solves = [0] * workers

    @property
    def separation_rounds(self) -> int:
        """Separation rounds (re-solves after adding rows), summed over the workers."""
        return sum(self._rounds)

    @property
    def rows_carried(self) -> int:
        """Rows of the LPs solved, summed (with :attr:`solves`: a mean)."""
        return sum(self._carried)

    @property
    def solves(self) -> int:
        """Lazy pricing LPs solved (each after its last separation round)."""
        return sum(self._solves)

    def reverse(self, rows: np.ndarray) -> np.ndarray:
        """The rows ``(j, i)`` of rows ``(i, j)`` that have one."""
        return self._pairs.rows(self.dst[rows], self.src[rows])

    def load(self, h: Any, w: int, j: int) -> None:
        """Load into worker ``w``'s model ``h`` output ``j``'s rows and basis, or, the first time, those
        of the output ``w`` priced last; the right-hand side is zero until the caller sets it."""
        rows, col_status, row_status = self.saved[j] if self.saved[j] is not None else self.last[w]
        m, n = self.m, self.m + rows.size
        # columns t (the identity) then y (row e of A as a column): built from A's arrays, not scipy
        # (whose indexing and stacking cost more than the solves)
        starts, index, value = self._columns(rows)
        ok = pass_arrays(h, np.concatenate([np.ones(m), np.zeros(rows.size)]), np.zeros(n), np.full(n, np.inf),
                         np.zeros(m), np.full(m, np.inf), np.concatenate([np.arange(m), m + starts]),
                         np.concatenate([np.arange(m), index]), np.concatenate([np.ones(m), value]))
        if not ok:  # pragma: no cover - HiGHS accepts any finite LP of this shape
            raise RuntimeError("HiGHS rejected a lazy pricing model")
        self._held[w][self.rows[w]] = False
        self._held[w][rows] = True
        self.rows[w] = rows
        if col_status is not None:
            basis = highspy.HighsBasis()
            basis.col_status = statuses(col_status)
            basis.row_status = statuses(row_status)
            basis.valid = True
            h.setBasis(basis)

    def _columns(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``rows`` of ``A`` as columns: starts (``rows.size + 1``), indices and values, exactly
        ``A[rows].T`` in CSC form."""
        pos = (2 * rows[:, None] + np.arange(2)).ravel()
        return 2 * np.arange(rows.size + 1), self.A.indices[pos], self.A.data[pos]

    def violated(self, w: int, z: np.ndarray) -> np.ndarray:
        """Rows not in worker ``w``'s model that ``z`` violates by more than :attr:`tolerance`, up to
        :attr:`add_per_record` per record (the most violated), with their reverse rows."""
        v = z[self.src] - self.weight * z[self.dst]
        cand = np.flatnonzero((v > self.tolerance) & ~self._held[w])
        if not cand.size:
            return cand
        pick = _first_per_record(cand[np.lexsort((-v[cand], self.src[cand]))], self.src, self.add_per_record)
        both = np.unique(np.concatenate([pick, self.reverse(pick)]))
        return both[~self._held[w][both]]

    def extend(self, h: Any, w: int, rows: np.ndarray) -> None:
        """Add the columns of ``rows`` to worker ``w``'s model (at zero, nonbasic: the basis stays
        valid and primal feasible)."""
        starts, index, value = self._columns(rows)
        h.addCols(int(rows.size), np.zeros(rows.size), np.zeros(rows.size), np.full(rows.size, np.inf),
                  int(index.size), starts[:-1].astype(np.int32), index.astype(np.int32), value)
        self._held[w][rows] = True
        self.rows[w] = np.concatenate([self.rows[w], rows])
        self._rounds[w] += 1

    def keep(self, h: Any, w: int, j: int) -> None:
        """After output ``j``'s LP was solved on worker ``w``: keep its rows and basis for its next
        pricing, and, for the next first-timer on ``w``, the starting rows and those basic in the
        solution (the dropped columns are nonbasic at zero, so the rest is still a basis)."""
        rows, m = self.rows[w], self.m
        col_status, row_status = basis_codes(h, m + rows.size, m)
        self.saved[j] = (rows, col_status, row_status)
        keep = (col_status[m:] == BASIC) | self._is_start[rows]
        self.last[w] = (rows[keep], np.concatenate([col_status[:m], col_status[m:][keep]]), row_status)
        self._carried[w] += rows.size
        self._solves[w] += 1

    def multipliers(self, w: int, col_value: np.ndarray) -> np.ndarray:
        """The whole LP's mDP-row multipliers ``y >= 0`` (length ``E``) from worker ``w``'s model's
        column values (its ``y`` columns follow the ``m`` columns ``t``)."""
        y = np.zeros(self.E)
        y[self.rows[w]] = np.maximum(0.0, np.asarray(col_value, dtype=float)[self.m:])
        return y
