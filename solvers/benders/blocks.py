"""One Benders block: its HiGHS models and the cut it gives at a master point (Benders 1962; Qiu Sec. 4).

* Optimality cut from any row-dual vector ``pi`` of block ``m`` at ``x^``: by weak duality
  ``Q_m(x) >= sum_r pi_r b_r(x) + sum_j min(0, c_j - (W' pi)_j) u_j`` where ``b_r`` is the
  active bound (``L_r`` for ``pi_r > 0``, ``U_r(x)`` for ``pi_r < 0``; wrong-signed duals are
  set to 0). The bound term makes the cut valid for *any* ``pi``: a solver's slightly
  dual-infeasible duals give a slightly weaker, still valid cut.
* Feasibility cut when block ``m`` is infeasible at ``x^``: the same bound on the phase-1 LP
  ``min 1's s.t. W y - s <= U(x)`` (slack on the linked rows), whose optimal duals are a
  normalised Farkas dual ray; its value is positive at ``x^`` and must be ``<= 0``.
* A block HiGHS calls infeasible is first re-solved cold and without presolve at the same bounds:
  at the feasibility boundary presolve's "infeasible" is often an artefact of its tolerances, and
  the re-solve, when optimal, gives an exact optimality cut for the cost of one block solve, where
  the phase-1 LP (a slack column per linked row) costs far more (on Rome with BSC, 4 s against
  377 s for the largest block). Only a block still infeasible goes on to the phase-1 LP. A HiGHS
  failure (warm, cold and interior point all failing) on any of these LPs is an inconclusive end:
  the next fallback is tried, and a block on which all fail gives no cut this time.
* Fallbacks where HiGHS is inconclusive at the feasibility boundary: the block with its linked
  bounds relaxed by a hair (the cut keeps the exact bounds), then the elastic block (slack on the
  linked rows at a large price; its duals give a valid optimality cut), then the elastic block
  with its constant rows of widest coefficient ratios freed (a relaxation: its duals, 0 on the
  freed rows, still give a valid cut). A block on which every fallback fails gives no cut.
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Any

import numpy as np
import scipy.sparse as sp

from securelp.solvers.benders.cuts import bound_term, cut_at, drop_tiny, recertify
from securelp.solvers.benders.highs_calls import pass_model, run_highs
from securelp.solvers.benders.model import RowBlock, SubproblemSpec
from securelp.solvers.benders.options import BendersOptions
from securelp.solvers.errors import SolverError
from securelp.solvers.lp.highs import new_highs, signed_duals

__all__ = ["Block"]

logger = logging.getLogger(__name__)

INF = np.inf

Cut = tuple[float, np.ndarray, np.ndarray]


class Block:
    """A block's HiGHS models (optimality and, lazily, phase-1 and elastic) and cut generation.

    :meth:`solve` returns a dict: ``feasible``; ``y`` (the block's solution, or a phase-1 solution
    for the upper bound, or ``None``); the cut ``alpha``, ``vars``, ``beta``; ``value`` (feasible);
    ``violation`` (a feasibility cut's value at ``x``); ``failed`` (why no cut came)."""

    def __init__(self, spec: SubproblemSpec, x_upper: np.ndarray, options: BendersOptions | None = None) -> None:
        self.spec = spec
        self.x_upper = x_upper
        self.options = options or BendersOptions()
        n_y = spec.cost.size
        self.n_y = n_y
        self.A = spec.rows.matrix(n_y)
        self.AT = self.A.T.tocsr()
        self.h = new_highs(tight=True)
        pass_model(self.h, spec.cost, np.zeros(n_y), spec.upper, spec.rows)
        self.h1: Any = None
        self.h2: Any = None
        self.h3: Any = None  # the elastic LP whose widest constant rows may be freed
        self.freed_ratio: float | None = None  # the ratio above which rows were freed last time
        self.big_m = 1e4 * (float(np.abs(spec.cost).sum()) + 1.0)
        self.linked_rows = spec.linked.rows.astype(np.int32)
        self.base_upper = spec.rows.upper.copy()
        self.nonlinked = np.ones(spec.rows.n_rows, dtype=bool)
        self.nonlinked[spec.linked.rows] = False
        self.solve_seconds = 0.0  # in :meth:`solve`, of which:
        self.highs_seconds = 0.0  # ... in HiGHS runs of the block's own models (fallbacks included)
        self.recertify_seconds = 0.0  # ... in re-solves with scaled costs for a higher cut (cuts.recertify)
        self.recertify_solves = 0  # re-solves by :meth:`_recertified_cut`
        self.recertify_shortfall = 1e-7  # set by the engine from its gap (options.recertify_share)
        self.deadline = INF  # set by the engine from its time limit
        if spec.unit_rows is not None and spec.unit_rows.size:
            # column -> position of its unit row (-1 if none)
            pos = np.full(n_y, -1, dtype=np.int64)
            U = self.A[spec.unit_rows]
            for t in range(U.shape[0]):
                pos[U.indices[U.indptr[t] : U.indptr[t + 1]]] = t
            self.unit_col_mask = pos >= 0
            self.unit_row_pos = pos

    @functools.cached_property
    def row_ratio(self) -> np.ndarray:
        """Each row's largest over smallest coefficient (1 for empty rows); only the last fallback
        (:meth:`_freed_elastic`) needs it."""
        absv = np.abs(self.A.data)
        nz = np.diff(self.A.indptr) > 0
        ratio = np.ones(self.A.shape[0])
        if absv.size:
            starts = self.A.indptr[:-1][nz]
            ratio[nz] = np.maximum.reduceat(absv, starts) / np.minimum.reduceat(absv, starts)
        return ratio

    def _run(self, h: Any, what: str) -> str:
        """:func:`~securelp.solvers.benders.highs_calls.run_highs` on one of the block's models, under the
        run's deadline, its time counted in :attr:`highs_seconds`."""
        t = time.perf_counter()
        try:
            return run_highs(h, what, self.deadline)
        finally:
            self.highs_seconds += time.perf_counter() - t

    def _linked_upper(self, x: np.ndarray) -> np.ndarray:
        L = self.spec.linked
        return self.base_upper[L.rows] + L.gamma * x[L.var]

    def _unit_row_shift(self, pi: np.ndarray, upper_now: np.ndarray, cost: np.ndarray, AT: sp.csr_matrix
                        ) -> np.ndarray:
        """``pi`` with each unit row's dual lowered by its columns' largest negative reduced cost
        (:class:`~securelp.solvers.benders.model.SubproblemSpec`)."""
        pi = signed_duals(pi, self.spec.rows.lower, upper_now)
        reduced = cost - AT @ pi
        ur = self.spec.unit_rows
        neg = np.maximum(-reduced, 0.0)
        shift = np.zeros(ur.size)
        np.maximum.at(shift, self.unit_row_pos[self.unit_col_mask], neg[self.unit_col_mask])
        pi[ur] -= shift
        return pi

    def _cut(self, pi: np.ndarray, upper_now: np.ndarray, cost: np.ndarray, col_upper: np.ndarray, AT: sp.csr_matrix,
             pi_floor: float | None = None) -> Cut:
        """Cut ``alpha + beta' x`` from duals ``pi`` (linked rows first clipped to ``[pi_floor, 0]``)."""
        lower = self.spec.rows.lower
        if pi_floor is not None:
            lr = self.spec.linked.rows
            pi = pi.copy()
            pi[lr] = np.clip(pi[lr], pi_floor, 0.0)
        if self.spec.unit_rows is not None and self.spec.unit_rows.size:
            pi = self._unit_row_shift(pi, upper_now, cost, AT)
        pi, alpha = bound_term(pi, lower, upper_now, AT, cost, col_upper)
        pos = pi > 0
        alpha += float(np.sum(pi[pos] * lower[pos]))
        neg = (pi < 0) & self.nonlinked
        alpha += float(np.sum(pi[neg] * self.base_upper[neg]))
        L = self.spec.linked
        pl = pi[L.rows]
        alpha += float(np.sum(pl * self.base_upper[L.rows]))
        coef = pl * L.gamma
        nz = coef != 0
        vars_, inv = np.unique(L.var[nz], return_inverse=True)
        beta = np.bincount(inv, weights=coef[nz], minlength=vars_.size) if vars_.size else np.zeros(0)
        if beta.size:
            # the coefficients HiGHS would drop itself (below its small_matrix_value) are replaced
            # by their term's minimum over the variable's box [0, ux], so the cut stays valid
            vars_, beta, least, _ = drop_tiny(vars_, beta, self.x_upper[vars_], self.options.cut_clean_below)
            alpha += least
        return alpha, vars_.astype(np.int64), beta

    def _recertified_cut(self, cut: Cut, x: np.ndarray, upper_now: np.ndarray, objective: float) -> Cut:
        """``cut``, or a cut that is higher at ``x``, from warm re-solves with the costs scaled
        (:func:`~securelp.solvers.benders.cuts.recertify`) while the cut at ``x`` falls short of
        HiGHS's ``objective`` by more than ``recertify_shortfall`` (relative)."""

        def from_duals(pi: np.ndarray) -> tuple[Cut, float]:
            c = self._cut(pi, upper_now, self.spec.cost, self.spec.upper, self.AT)
            return c, cut_at(*c, x)

        return recertify(self, cut, cut_at(*cut, x), objective, from_duals, self.options.recertify_scales)

    def _optimal(self, h: Any, upper_now: np.ndarray, pi_floor: float | None = None) -> dict[str, Any]:
        """The solution in ``h`` and the optimality cut from its duals."""
        sol = h.getSolution()
        y = np.asarray(sol.col_value, dtype=float)[: self.n_y]
        pi = np.asarray(sol.row_dual, dtype=float)
        alpha, vars_, beta = self._cut(pi, upper_now, self.spec.cost, self.spec.upper, self.AT, pi_floor=pi_floor)
        return {"feasible": True, "y": y, "value": float(self.spec.cost @ y), "alpha": alpha, "vars": vars_,
                "beta": beta}

    def solve(self, x: np.ndarray) -> dict[str, Any]:
        """The block at the master point ``x``: its solution and optimality cut, or a feasibility
        cut, or a fallback's cut (see the module docstring)."""
        t0 = time.perf_counter()
        ub = self._linked_upper(x)
        n_l = self.linked_rows.size
        lo = np.full(n_l, -INF)
        if n_l:
            self.h.changeRowsBounds(n_l, self.linked_rows, lo, ub)
        try:
            status = self._run(self.h, f"Benders block {self.spec.name}")
        except SolverError as exc:  # HiGHS failed warm, cold and with IPM: the re-check and fallbacks below
            logger.info("Benders block %s: %s; re-solving it cold without presolve", self.spec.name, exc)
            status = "Error"
        upper_now = self.base_upper.copy()
        upper_now[self.spec.linked.rows] = ub
        try:
            if status == "Optimal":
                res = self._optimal(self.h, upper_now)
                res["alpha"], res["vars"], res["beta"] = self._recertified_cut(
                    (res["alpha"], res["vars"], res["beta"]), x, upper_now,
                    float(self.h.getInfo().objective_function_value))
                return res
            res = self._rechecked(x, lo, ub, upper_now)
            if res is not None:
                return res
            res, y1 = self._farkas(x, lo, ub, upper_now)
            if res is not None:
                return res
            return self._fallbacks(lo, ub, upper_now, y1)
        finally:
            self.solve_seconds += time.perf_counter() - t0

    def _rechecked(self, x: np.ndarray, lo: np.ndarray, ub: np.ndarray, upper_now: np.ndarray
                   ) -> dict[str, Any] | None:
        """The block at the same linked bounds re-solved cold and without presolve (its "infeasible"
        may be a presolve artefact): its solution and optimality cut when that is optimal, else ``None``."""
        n_l = self.linked_rows.size
        if n_l:
            self.h.changeRowsBounds(n_l, self.linked_rows, lo, ub)
        self.h.clearSolver()
        self.h.setOptionValue("presolve", "off")
        try:
            status = self._run(self.h, f"rechecked Benders block {self.spec.name}")
        except SolverError:
            status = "Error"
        finally:
            self.h.setOptionValue("presolve", "choose")
        if status != "Optimal":
            return None
        res = self._optimal(self.h, upper_now)
        res["alpha"], res["vars"], res["beta"] = self._recertified_cut(
            (res["alpha"], res["vars"], res["beta"]), x, upper_now, float(self.h.getInfo().objective_function_value))
        return res

    def _farkas(self, x: np.ndarray, lo: np.ndarray, ub: np.ndarray, upper_now: np.ndarray
                ) -> tuple[dict[str, Any] | None, np.ndarray | None]:
        """The phase-1 LP (slacks on the linked rows) at ``x``: a feasibility cut when its value at
        ``x`` is positive beyond rounding (else ``None``), and its solution, a best-effort ``y``."""
        n_l = self.linked_rows.size
        if self.h1 is None:
            self.h1 = self._build_phase1()
        if n_l:
            self.h1.changeRowsBounds(n_l, self.linked_rows, lo, ub)
        try:
            status1 = self._run(self.h1, f"phase-1 of Benders block {self.spec.name}")
        except SolverError:
            status1 = "Error"
        violation = 0.0
        y1: np.ndarray | None = None
        if status1 == "Optimal":
            sol = self.h1.getSolution()
            y1 = np.clip(np.asarray(sol.col_value, dtype=float)[: self.n_y], 0.0, self.spec.upper)
            pi = np.asarray(sol.row_dual, dtype=float)
            alpha, vars_, beta = self._cut(pi, upper_now, np.zeros(self.n_y), self.spec.upper, self.AT, pi_floor=-1.0)
            violation = cut_at(alpha, vars_, beta, x)
            scale = abs(alpha) + (float(np.abs(beta) @ np.abs(x[vars_])) if vars_.size else 0.0)
        else:
            scale = 0.0
        # the Farkas value is relative to the size of its terms (x^ may live at 1e-9 scales)
        if violation > 1e-9 * scale and violation > 0:
            return {"feasible": False, "alpha": alpha, "vars": vars_, "beta": beta, "violation": violation, "y": y1}, y1
        return None, y1

    def _fallbacks(self, lo: np.ndarray, ub: np.ndarray, upper_now: np.ndarray, y1: np.ndarray | None
                   ) -> dict[str, Any]:
        """Infeasible only within the solvers' tolerances (``x`` on the feasibility boundary; the block at
        its exact bounds was re-solved cold without presolve by :meth:`_rechecked`): the block with its
        linked bounds relaxed by a hair (the cut keeps the exact bounds, so it stays valid; the caller
        repairs the solution exactly); then the elastic
        block, whose solution is feasible up to tolerance and whose duals give a valid optimality cut
        (once it needed its widest rows freed, it goes there first). ``y1``: the phase-1 solution, for
        the upper bound when every fallback fails (then no cut from this block this time)."""
        n_l = self.linked_rows.size
        for relax in (1e-10, 1e-8):
            self.h.changeRowsBounds(n_l, self.linked_rows, lo, ub + relax * np.maximum(np.abs(ub), 1e-3))
            try:
                st = self._run(self.h, f"relaxed Benders block {self.spec.name}")
            except SolverError:
                st = "Error"
            if st == "Optimal":
                return self._optimal(self.h, upper_now)
        res = self._freed_elastic(upper_now) if self.freed_ratio is not None else None
        failure = ""
        if res is None:
            if self.h2 is None:
                self.h2 = self._build_phase1(elastic=True)
            if n_l:
                self.h2.changeRowsBounds(n_l, self.linked_rows, lo, ub)
            try:
                status2 = self._run(self.h2, f"elastic Benders block {self.spec.name}")
                if status2 != "Optimal":
                    raise SolverError(f"elastic LP of block {self.spec.name} ended with status {status2}")
                res = self._elastic_result(self.h2, upper_now)
            except SolverError as exc:
                failure = str(exc)
                res = self._freed_elastic(upper_now)
        return res if res is not None else {"feasible": False, "failed": failure, "y": y1}

    def _elastic_result(self, h: Any, upper_now: np.ndarray, freed: np.ndarray | None = None) -> dict[str, Any]:
        """The elastic LP's solution (feasible up to tolerance; the caller repairs it exactly) and
        the optimality cut from its duals (``freed`` rows: dual 0)."""
        sol = h.getSolution()
        pi = np.asarray(sol.row_dual, dtype=float)
        if freed is not None:
            pi[freed] = 0.0
        y = np.asarray(sol.col_value, dtype=float)[: self.n_y]
        alpha, vars_, beta = self._cut(pi, upper_now, self.spec.cost, self.spec.upper, self.AT, pi_floor=-self.big_m)
        return {"feasible": True, "y": y, "value": float(self.spec.cost @ y), "alpha": alpha, "vars": vars_, "beta": beta}

    def _freed_elastic(self, upper_now: np.ndarray) -> dict[str, Any] | None:
        """The elastic LP with its widest constant rows free (``options.wide_row_ratios``, widest first).

        Freeing rows relaxes the block, so its duals, with 0 on the freed rows, are dual feasible
        for the block itself and give a valid (possibly weaker) cut. ``None`` when no ratio helps."""
        first = () if self.freed_ratio is None else (self.freed_ratio,)
        tried: set[int] = {0}  # the freed sets are nested, so their sizes tell them apart
        for ratio in first + tuple(r for r in self.options.wide_row_ratios if r != self.freed_ratio):
            freed = self.nonlinked & (self.row_ratio > ratio)
            if int(freed.sum()) in tried:
                continue
            tried.add(int(freed.sum()))
            if self.h3 is None:
                self.h3 = self._build_phase1(elastic=True)
            lower = np.where(freed, -INF, self.spec.rows.lower)
            upper = np.where(freed, INF, upper_now)  # the linked rows at this x (never freed)
            rows = np.arange(lower.size, dtype=np.int32)
            self.h3.changeRowsBounds(rows.size, rows, lower, upper)
            try:
                status = self._run(self.h3, f"elastic Benders block {self.spec.name} ({int(freed.sum())} rows freed)")
            except SolverError:
                continue
            if status == "Optimal":
                if self.freed_ratio != ratio:
                    logger.info("elastic LP of Benders block %s solved with its %d rows wider than %g freed",
                                self.spec.name, int(freed.sum()), ratio)
                self.freed_ratio = ratio
                return self._elastic_result(self.h3, upper_now, freed)
        return None

    def _build_phase1(self, elastic: bool = False) -> Any:
        """The block with one slack column (coefficient -1) per linked row: cost 1 on the slacks
        (phase 1), or the block's cost and a large price on the slacks (elastic)."""
        spec = self.spec
        n_l = spec.linked.rows.size
        S = sp.csr_matrix((-np.ones(n_l), (spec.linked.rows, np.arange(n_l))), shape=(spec.rows.n_rows, n_l))
        A1 = sp.hstack([self.A, S], format="csr")
        rows = RowBlock(A1.indptr, A1.indices, A1.data, spec.rows.lower, spec.rows.upper)
        if elastic:
            cost = np.concatenate([spec.cost, np.full(n_l, self.big_m)])
        else:
            cost = np.concatenate([np.zeros(self.n_y), np.ones(n_l)])
        upper = np.concatenate([spec.upper, np.full(n_l, INF)])
        h = new_highs(tight=True)
        pass_model(h, cost, np.zeros(cost.size), upper, rows)
        return h
