"""The Benders master: its independent components (Qiu's Property 3.1), each an HiGHS LP that grows
its cut pool and re-solves warm, and a lower bound certified by weak duality on its row duals.

Block ``m`` is replaced in the master by ``theta_m``, bounded below by the block's cuts. The
master splits into the connected components of its variables (linked through a master row or
through one block's linked variables), each an independent LP. The lower bound of a component is
weak duality on any row duals (:func:`securelp.solvers.lp.highs.dual_bound`), not HiGHS's objective,
which a badly scaled master can overstate.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
from scipy.sparse.linalg import LinearOperator

from securelp.solvers.benders.cuts import fit_cut_row, recertify
from securelp.solvers.benders.highs_calls import pass_model, run_highs
from securelp.solvers.benders.model import MasterSpec, RowBlock, SubproblemSpec
from securelp.solvers.benders.options import BendersOptions
from securelp.solvers.errors import SolverError
from securelp.solvers.lp.highs import dual_bound, new_highs, signed_duals

__all__ = ["MasterComponent", "master_components"]

logger = logging.getLogger(__name__)

INF = np.inf


def master_components(master: MasterSpec, specs: Sequence[SubproblemSpec]
                      ) -> list[tuple[np.ndarray, np.ndarray, list[int]]]:
    """The master's independent components (Property 3.1): its variables joined by a master row or
    by a block that links them, as ``(variables, master rows, blocks)``, ordered by their smallest
    variable. One sparse graph (each row and each block a star on its variables) and its connected
    components: a union-find row by row in Python takes minutes on a master of 125 M rows."""
    n = master.n
    if n == 0:
        return []
    R = master.rows
    starts = np.asarray(R.starts, dtype=np.int64)
    index = np.asarray(R.index, dtype=np.int64)
    lens = np.diff(starts)
    src = [index[np.repeat(starts[:-1], lens)]]  # each row's first variable ...
    dst = [index]  # ... to each of its variables
    for spec in specs:
        v = np.unique(spec.linked.var)
        if v.size:
            src.append(np.full(v.size, v[0], dtype=np.int64))
            dst.append(v.astype(np.int64))
    a, b = np.concatenate(src), np.concatenate(dst)
    g = sp.csr_matrix((np.ones(a.size, dtype=np.int8), (a, b)), shape=(n, n))
    _, label = connected_components(g, directed=False)
    row_label = np.full(lens.size, -1, dtype=np.int64)
    row_label[lens > 0] = label[index[starts[:-1][lens > 0]]]
    block_label = [int(label[spec.linked.var[0]]) if spec.linked.var.size else -1 for spec in specs]
    order = np.argsort(label, kind="stable")  # members of each label in increasing order
    bounds = np.searchsorted(label[order], np.arange(label.max() + 2))
    comps = [(order[bounds[c]:bounds[c + 1]], c) for c in range(bounds.size - 1) if bounds[c + 1] > bounds[c]]
    comps.sort(key=lambda mc: int(mc[0][0]))
    return [(members, np.flatnonzero(row_label == c), [bi for bi, bl in enumerate(block_label) if bl == c])
            for members, c in comps]


class MasterComponent:
    """One independent component of the master LP (its x variables and its blocks' thetas)."""

    def __init__(self, master: MasterSpec, xvars: np.ndarray, row_ids: np.ndarray, blocks: list[int],
                 theta_lower: list[float], options: BendersOptions | None = None) -> None:
        self.options = options or BendersOptions()
        self.xvars = xvars
        self.blocks = blocks
        self.local = {int(v): i for i, v in enumerate(xvars)}
        self.n_x = xvars.size
        self.theta_col = {b: self.n_x + t for t, b in enumerate(blocks)}
        A = master.rows.matrix(master.n)[row_ids][:, xvars].tocsr() if row_ids.size else sp.csr_matrix((0, xvars.size))
        n_cols = self.n_x + len(blocks)
        A = sp.csr_matrix((A.data, A.indices, A.indptr), shape=(A.shape[0], n_cols))
        rows = RowBlock(A.indptr, A.indices, A.data,
                        master.rows.lower[row_ids] if row_ids.size else np.zeros(0),
                        master.rows.upper[row_ids] if row_ids.size else np.zeros(0))
        cost = np.concatenate([master.cost[xvars], np.ones(len(blocks))])
        lower = np.concatenate([master.lower[xvars], np.asarray(theta_lower, dtype=float)])
        upper = np.concatenate([master.upper[xvars], np.full(len(blocks), INF)])
        self.h = new_highs(tight=True)
        pass_model(self.h, cost, lower, upper, rows)
        self.n_cuts = 0
        self.highs_seconds = 0.0  # in HiGHS runs of the component's LP
        self.certificate_seconds = 0.0  # in its weak-duality bound (:meth:`certified_bound`)
        self.recertify_seconds = 0.0  # in re-solves with scaled costs for a better bound (:meth:`recertified`)
        self.recertify_solves = 0  # re-solves by :meth:`recertified`
        self.recertify_shortfall = 1e-7  # set by the engine from its gap (options.recertify_share)
        self.deadline = INF  # set by the engine from its time limit
        # the LP as passed, for the certified bound (the cuts are kept apart as they come: the base
        # rows are transposed once, not restacked with the cuts every iteration)
        self.AT_base = A.T.tocsr()
        self.cost, self.col_lower, self.col_upper = cost, lower, upper
        self.row_lower, self.row_upper = rows.lower, rows.upper
        self.cut_rows: list[tuple[np.ndarray, np.ndarray]] = []
        self.cut_lower: list[float] = []
        self.cut_upper: list[float] = []

    def add_cut(self, block: int | None, alpha: float, vars_: np.ndarray, beta: np.ndarray,
                violation: float = INF) -> None:
        """Optimality cut ``theta_b - beta' x >= alpha`` or, with ``block`` None, feasibility ``beta' x <= -alpha``.

        ``violation``: by how much the cut cuts off the master's point; the row is fitted to what
        HiGHS represents (:func:`~securelp.solvers.benders.cuts.fit_cut_row`). A row HiGHS refuses is
        left out: the master stays a relaxation, and the rows the certified bound adds up must be the
        rows HiGHS holds."""
        import highspy

        idx = np.fromiter((self.local[int(v)] for v in vars_), dtype=np.int32, count=vars_.size)
        # the row's x part and its constant: beta' x <= -alpha, or -beta' x + theta >= alpha
        vals = np.asarray(beta if block is None else -beta, dtype=float)
        fitted = fit_cut_row(idx, vals, -alpha if block is None else alpha, violation, self.col_upper[idx],
                             block is not None, self.options)
        if fitted is None:
            return
        idx, vals, rhs, theta_coef = fitted
        if block is None:
            lo, up = -INF, rhs
        else:
            idx = np.concatenate([idx, np.array([self.theta_col[block]], dtype=np.int32)])
            vals, lo, up = np.concatenate([vals, [theta_coef]]), rhs, INF
        if self.h.addRows(1, np.array([lo]), np.array([up]), int(idx.size), np.array([0], dtype=np.int32), idx,
                          vals) == highspy.HighsStatus.kError:
            logger.info("Benders: HiGHS refused a cut (largest coefficient %.3g); left out", float(np.abs(vals).max()))
            return
        self.n_cuts += 1
        self.cut_rows.append((idx, np.asarray(vals, dtype=float)))
        self.cut_lower.append(lo)
        self.cut_upper.append(up)

    def solve(self) -> tuple[float, np.ndarray, dict[int, float]]:
        """Solve; returns the certified lower bound (:meth:`certified_bound`), ``x`` and the thetas.

        Raises
        ------
        SolverError
            The component does not end optimal (the problem may be infeasible).
        """
        t = time.perf_counter()
        try:
            status = run_highs(self.h, "Benders master", self.deadline)
        finally:
            self.highs_seconds += time.perf_counter() - t
        if status != "Optimal":
            raise SolverError(f"Benders master component ended with status {status}; the PMO may be infeasible")
        sol = self.h.getSolution()
        v = np.asarray(sol.col_value, dtype=float)
        t = time.perf_counter()
        bound = self.certified_bound(np.asarray(sol.row_dual, dtype=float))
        self.certificate_seconds += time.perf_counter() - t
        bound = self.recertified(bound, float(self.h.getInfo().objective_function_value))
        return bound, v[: self.n_x], {b: float(v[c]) for b, c in self.theta_col.items()}

    def recertified(self, bound: float, objective: float) -> float:
        """``bound``, or a better certificate from warm re-solves with the costs scaled
        (:func:`~securelp.solvers.benders.cuts.recertify`) while it falls short of HiGHS's ``objective``."""

        def from_duals(pi: np.ndarray) -> tuple[float, float]:
            b = self.certified_bound(pi)
            return b, b

        return recertify(self, bound, bound, objective, from_duals, self.options.recertify_scales)

    def certified_bound(self, pi: np.ndarray) -> float:
        """A lower bound on this component's LP from any row duals ``pi``, by weak duality.

        Wrong-signed duals are set to 0, and the duals of a block's optimality cuts are scaled down
        where they would make its theta's reduced cost negative (theta has no upper bound); then
        :func:`securelp.solvers.lp.highs.dual_bound`.
        """
        ncut, nb = len(self.cut_lower), self.row_lower.size
        ptr = np.concatenate([[0], np.cumsum([i.size for i, _ in self.cut_rows], dtype=np.int64)])
        CT = sp.csr_matrix((np.concatenate([v for _, v in self.cut_rows]) if ncut else np.zeros(0),
                            np.concatenate([i for i, _ in self.cut_rows]) if ncut else np.zeros(0, dtype=np.int32),
                            ptr), shape=(ncut, self.cost.size)).T.tocsr()
        AT = LinearOperator((self.cost.size, nb + ncut), dtype=float,
                            matvec=lambda p: self.AT_base @ p[:nb] + CT @ p[nb:])  # [A; cuts]'
        lower = np.concatenate([self.row_lower, np.asarray(self.cut_lower, dtype=float)])
        upper = np.concatenate([self.row_upper, np.asarray(self.cut_upper, dtype=float)])
        pi = signed_duals(pi, lower, upper)
        reduced = self.cost - AT @ pi
        for c in self.theta_col.values():  # theta in [theta_lower, inf): its reduced cost must be >= 0
            if reduced[c] < 0.0:
                rows = nb + CT.indices[CT.indptr[c] : CT.indptr[c + 1]]  # its optimality cuts (coefficient 1)
                pi[rows] *= (1.0 - 1e-12) * self.cost[c] / (self.cost[c] - reduced[c])  # a hair below, for rounding
        return dual_bound(AT, self.cost, self.col_lower, self.col_upper, lower, upper, pi)
