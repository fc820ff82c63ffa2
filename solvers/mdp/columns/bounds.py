"""The column decomposition's certified lower bounds and the outputs it need not consider.

For one mDP-graph component ``S`` (records ``m``, outputs ``K``; Qiu Eq. 4-7 restricted to ``S``),
with ``g_k = p * c[:, k]`` and the mDP rows ``A z <= 0`` of one output column:

* Lagrangian bound relaxing the unit rows: for *any* ``mu``, ``OPT_S >= sum_i mu_i + sum_k v_k(mu)``
  with ``v_k(mu) = min {(g_k - mu)' z : A z <= 0, 0 <= z <= 1}``, and for any ``y >= 0`` (duals of
  the mDP rows) ``v_k(mu) >= sum_i min(0, (g_k + A'y - mu)_i)`` by weak duality over the box. The
  bound is evaluated this way only, from multipliers clipped to ``y >= 0``, so it does not rest on
  any solver's tolerances. The vector ``q_k = g_k + A'y_k`` of each output's last certificate is
  kept (:class:`Certificates`): it gives a valid bound at every later ``mu`` for the price of a
  vector subtraction (its *open share* ``sum_i min(0, q_ki - mu_i)``, :func:`open_shares`).
* Lagrangian bound relaxing the mDP rows instead: for ``z_k`` in the cone, ``A z_k <= 0``, so
  ``g_k' z_k >= q_k' z_k`` for any ``y_k >= 0``, and what is left is a product of simplices:
  ``OPT_S >= sum_i min_k q_ki`` (no ``mu`` in it; :func:`mdp_rows_bound`). For the same ``q_k`` it
  is never below the first bound, and by LP duality it is tight at an optimal ``y``.

Dominated outputs: if ``g_k' <= g_k`` on ``S`` entrywise, moving column ``k``'s mass to ``k'`` keeps
every constraint (the cone is convex) and does not raise the loss, so some optimum has ``z_k = 0``
(:func:`undominated_outputs`; dominance in the cone's dual order is
:func:`securelp.solvers.mdp.columns.optimal_transport.cone_dominated`).
"""

from __future__ import annotations

import math
import time

import numpy as np
import scipy.sparse as sp

from securelp.solvers.errors import InputError
from securelp.solvers.mdp.pmo import PMOProblem

__all__ = ["Certificates", "component_rows", "mdp_rows_bound", "mdp_rows_matrix", "open_shares",
           "undominated_outputs"]

#: :func:`open_shares` works on blocks of about this many certificate entries (the result does not
#: depend on it)
SHARES_CHUNK = 1 << 20

#: :func:`undominated_outputs` screens the candidate dominators of an output on this many rows first
DOMINANCE_PROBE_ROWS = 16


def open_shares(Q: np.ndarray, mu: np.ndarray, chunk: int = SHARES_CHUNK) -> np.ndarray:
    """``sum_i min(0, Q_ki - mu_i)`` for every output ``k`` (a row of ``Q``), a block of about ``chunk``
    entries at a time (the whole-array form makes temporaries of outputs x records). Each row's sum is
    computed as in the whole-array form, bit for bit."""
    out = np.empty(Q.shape[0])
    step = max(1, chunk // max(1, Q.shape[1]))
    for a in range(0, Q.shape[0], step):
        block = Q[a : a + step] - mu
        np.minimum(block, 0.0, out=block)
        out[a : a + step] = block.sum(axis=1)
    return out


def mdp_rows_matrix(problem: PMOProblem) -> sp.csr_matrix:
    """The mDP rows of one output column as ``A z <= 0``: row ``(i, j)`` is ``z_i - exp(eps d_ij) z_j``."""
    er, ec = problem.lp_edges
    w = np.exp(problem.eps * np.asarray(problem.dataset.distance)[er, ec])
    E = er.size
    return sp.csr_matrix((np.column_stack([np.ones(E), -w]).ravel(),
                          (np.repeat(np.arange(E), 2), np.column_stack([er, ec]).ravel())), shape=(E, problem.n))


def mdp_rows_bound(G: np.ndarray, A: sp.spmatrix, Y: np.ndarray) -> float:
    """Lower bound on the PMO optimum from multipliers ``Y`` (rows x outputs, must be >= 0) of the mDP rows.

    ``sum_i min_k (G + A'Y)_ik`` (module docstring). ``G`` is records x outputs (prior-weighted loss).

    Raises
    ------
    InputError
        A negative multiplier (``parameter`` "Y"): the formula would not be a bound.
    """
    Y = np.asarray(Y, dtype=float)
    if np.any(Y < 0):
        raise InputError("mDP-row multipliers must be >= 0 for a valid bound", parameter="Y")
    return float(np.min(np.asarray(G) + A.T @ Y, axis=1).sum())


def component_rows(problem: PMOProblem, idx: np.ndarray, rows: sp.csr_matrix | None = None) -> sp.csr_matrix:
    """The mDP rows of the component with records ``idx`` (an mDP pair never crosses components),
    over its records in the order of ``idx``; ``rows``: :func:`mdp_rows_matrix` of the problem, when
    the caller already has it."""
    pos = np.full(problem.n, -1, dtype=np.int64)
    pos[idx] = np.arange(idx.size)
    er, _ = problem.lp_edges
    rows = mdp_rows_matrix(problem) if rows is None else rows
    return rows[np.flatnonzero(pos[er] >= 0)][:, idx].tocsr()


def undominated_outputs(G: np.ndarray, deadline: float = math.inf) -> np.ndarray:
    """Indices of the columns of ``G`` (records x outputs) not dominated by another column.

    Column ``k`` is dominated when some ``k'`` has ``G[:, k'] <= G[:, k]`` entrywise and is either
    smaller somewhere or equal with ``k' < k`` (so of equal columns the first is kept). A column
    that is the strict minimum of some row is never dominated (checked first, cheaply). Rows equal
    in every column (records of prior 0) decide nothing and are left out; a few spread rows screen
    the candidates before whole columns are compared (:data:`DOMINANCE_PROBE_ROWS`). Past ``deadline``
    (``time.perf_counter()`` seconds) the outputs not yet examined are kept: a kept output is never
    wrong, only more work.
    """
    m, K = G.shape
    if K <= 1:
        return np.arange(K)
    G = G[G.max(axis=1) > G.min(axis=1)]  # rows that tell the columns apart
    m = G.shape[0]
    if m == 0:  # all columns equal: the first is kept
        return np.zeros(1, dtype=np.int64)
    keep = np.ones(K, dtype=bool)
    order = np.argsort(G, axis=1, kind="stable")
    best, second = order[:, 0], order[:, 1]
    strict = G[np.arange(m), best] < G[np.arange(m), second]
    sure = np.zeros(K, dtype=bool)
    sure[best[strict]] = True
    GT = np.ascontiguousarray(G.T)
    probe = GT[:, np.unique(np.linspace(0, m - 1, min(m, DOMINANCE_PROBE_ROWS)).astype(np.int64))]
    for n_done, k in enumerate(np.flatnonzero(~sure)):
        if n_done % 64 == 0 and time.perf_counter() > deadline:
            break
        cand = np.flatnonzero(np.all(probe <= probe[k], axis=1))
        cand = cand[cand != k]
        if cand.size == 0:
            continue
        cand = cand[np.all(GT[cand] <= GT[k], axis=1)]
        if cand.size == 0:
            continue
        if np.any(cand < k) or np.any(GT[cand] < GT[k]):
            keep[k] = False
    return np.flatnonzero(keep)


class Certificates:
    """Every output's stored certificate ``q_k = g_k + A'y_k`` (``y_k >= 0``; rows of :attr:`Q`,
    outputs x records, ``y = 0`` at first) and the bounds they give (module docstring). ``G``: the
    component's prior-weighted loss (records x outputs), ``AT``: its mDP rows' transpose."""

    def __init__(self, G: np.ndarray, AT: sp.csr_matrix) -> None:
        self.G, self.AT = G, AT
        self.Q = np.ascontiguousarray(G.T)

    def warm_start(self, Q: np.ndarray) -> None:
        """Take ``Q = G + A'Y`` (records x outputs, from ``Y >= 0``, e.g. a first-order start's) as every
        output's stored certificate; certificates give both bounds, so they stay valid."""
        self.Q = np.ascontiguousarray(Q.T, dtype=float)

    def open_shares(self, mu: np.ndarray) -> np.ndarray:
        """Per output, its stored certificate's share of the Lagrangian bound at ``mu`` (0 where the
        certificate already certifies the output there); the bound is ``mu.sum()`` plus their sum."""
        return open_shares(self.Q, mu)

    def mdp_rows_bound(self) -> float:
        """The bound relaxing the mDP rows, ``sum_i min_k q_ki``, from the stored certificates."""
        return float(self.Q.min(axis=0).sum())

    def certificate(self, j: int, y: np.ndarray, mu: np.ndarray) -> tuple[np.ndarray, float]:
        """Output ``j``'s certificate ``q = g_j + A'y`` from mDP-row multipliers ``y >= 0`` and its
        share of the Lagrangian bound at ``mu``, ``sum_i min(0, q_i - mu_i)``."""
        q = self.G[:, j] + self.AT @ y
        return q, float(np.minimum(0.0, q - mu).sum())

    def keep(self, j: int, q: np.ndarray, mu: np.ndarray, share: float) -> None:
        """Keep the better of output ``j``'s stored certificate and ``q`` (whose share of the bound at
        ``mu`` is ``share``) for this ``mu``."""
        if share >= float(np.minimum(0.0, self.Q[j] - mu).sum()):
            self.Q[j] = q
