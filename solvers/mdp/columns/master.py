"""The restricted master problem (RMP) of the column decomposition, with its dual box.

``z_k = sum_r lambda_kr r`` over points ``r`` of the cone found so far, for the component's records:
one row per record (Qiu Eq. 6), one column per point ``r`` (cost ``g_k' r``). Dual stabilisation by
boxstep (du Merle et al.): slack columns ``+e_i`` (cost ``mu_c + D``) and ``-e_i`` (cost
``-(mu_c - D)``) confine the RMP's duals to a box around a centre ``mu_c``; their upper bounds are 0
(box off) whenever the RMP must be a restriction of the PMO (an upper bound). The master only steers
the pricing and proposes mechanisms that are repaired and verified: no bound comes from it, so its
solves may fall back on looser tolerances, and columns idle for long are retired.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from securelp.solvers.errors import SolverError
from securelp.solvers.lp.highs import TIGHT_TOLERANCE, new_highs, set_time_left
from securelp.solvers.mdp.columns.options import ColumnGenerationOptions

__all__ = ["DUAL_SIMPLEX", "PRIMAL_SIMPLEX", "OutOfTime", "RestrictedMaster", "master_tolerance"]

logger = logging.getLogger(__name__)

#: HiGHS's simplex strategies: warm re-solves run the primal simplex (new columns enter at zero and a
#: moved box changes only costs, so the last basis stays primal feasible); the re-solve without the
#: box, whose slacks' bounds close, runs the dual simplex
PRIMAL_SIMPLEX = 4
DUAL_SIMPLEX = 1

#: master re-solves after a failed warm and cold one: primal simplex, dual simplex (a fallback that sets
#: what is already set is skipped), HiGHS's default (1e-7) tolerances, 1e-6, the interior-point solver
MASTER_FALLBACKS = ({"simplex_strategy": PRIMAL_SIMPLEX}, {"simplex_strategy": DUAL_SIMPLEX},
                    {"primal_feasibility_tolerance": 1e-7, "dual_feasibility_tolerance": 1e-7},
                    {"primal_feasibility_tolerance": 1e-6, "dual_feasibility_tolerance": 1e-6}, {"solver": "ipm"})

#: re-solves of a master or a pricing LP take this lock: inconclusive ends were seen under concurrent runs
RETRY_LOCK = threading.Lock()


class OutOfTime(Exception):
    """A master solve reached the component's deadline (HiGHS's time limit) without a solution."""


def master_tolerance(gap: float) -> float:
    """The RMP's primal and dual feasibility tolerance at the relative ``gap`` target: a thousandth of
    it, between :data:`~securelp.solvers.lp.highs.TIGHT_TOLERANCE` (1e-9) and HiGHS's default 1e-7
    (reached at the default gap 1e-4). The master needs no more (no bound comes from it), and far
    tighter tolerances make large masters' solves many times slower."""
    return float(min(1e-7, max(TIGHT_TOLERANCE, 1e-3 * gap)))


@contextlib.contextmanager
def highs_options(h: Any, options: dict[str, Any]) -> Iterator[None]:
    """Set HiGHS ``options`` on ``h`` for the ``with`` block, then put back the values they had."""
    saved = {key: h.getOptionValue(key)[1] for key in options}
    for key, value in options.items():
        h.setOptionValue(key, value)
    try:
        yield
    finally:
        for key, value in saved.items():
            h.setOptionValue(key, value)


def _empty_master(n: int) -> Any:
    """An HiGHS LP of ``n`` unit rows (``= 1``) and no column."""
    import highspy

    lp = highspy.HighsLp()
    lp.num_col_ = 0
    lp.num_row_ = n
    lp.row_lower_ = np.ones(n)
    lp.row_upper_ = np.ones(n)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.num_col_ = 0
    lp.a_matrix_.num_row_ = n
    lp.a_matrix_.start_ = np.zeros(1, dtype=np.int32)
    return lp


class RestrictedMaster:
    """The RMP of a component of ``m`` records (``G``: its loss, records x kept outputs) at the target
    ``gap``: HiGHS's model :attr:`h` (the ``2m`` box slacks, then the columns), each column's output
    (:attr:`col_owner`) and point (:attr:`col_ray`)."""

    def __init__(self, G: np.ndarray, gap: float, options: ColumnGenerationOptions) -> None:
        self.G, self.options = G, options
        self.m = m = G.shape[0]
        self.tol = master_tolerance(gap)
        self.tightenings = 0
        self.h = new_highs({"primal_feasibility_tolerance": self.tol, "dual_feasibility_tolerance": self.tol})
        self.h.passModel(_empty_master(m))
        self.col_owner: list[int] = []
        self.col_ray: list[np.ndarray] = []
        self.col_idle = np.zeros(0, dtype=np.int64)  # master solves in a row each column sat idle
        self.columns_added = 0
        self.columns_retired = 0
        self.retries = 0  # master solves that needed a cold re-solve or a fallback
        self.box_widenings = 0  # boxes widened because the boxed master had no solution
        self.boxstep = True  # the dual box in use (dropped when it does not help)
        self.n_slack = 2 * m
        self.h.addCols(2 * m, np.zeros(2 * m), np.zeros(2 * m), np.zeros(2 * m), 2 * m,
                       np.arange(2 * m, dtype=np.int32), np.concatenate([np.arange(m), np.arange(m)]).astype(np.int32),
                       np.concatenate([np.ones(m), -np.ones(m)]))

    @property
    def enter_tol(self) -> float:
        """A priced column enters the master below minus this reduced cost at unit mass."""
        return self.options.enter_factor * self.tol

    def tighten(self) -> None:
        """Divide the RMP's feasibility tolerances (and with them :attr:`enter_tol`) by
        ``options.master_tighten``, down to ``options.stall_tolerance``."""
        self.tol = max(self.options.stall_tolerance, self.tol / self.options.master_tighten)
        for key in ("primal_feasibility_tolerance", "dual_feasibility_tolerance"):
            self.h.setOptionValue(key, self.tol)
        self.tightenings += 1
        logger.info("component of %d records: the column generation stalled short of the gap; master "
                    "tolerance now %.0e", self.m, self.tol)

    def add_columns(self, ks: list[int], vecs: list[np.ndarray]) -> None:
        """Points ``vecs`` of the cone as columns of outputs ``ks``."""
        if not ks:
            return
        costs = np.array([float(self.G[:, k] @ v) for k, v in zip(ks, vecs)])
        idx_list, val_list, starts = [], [], [0]
        for v in vecs:
            nz = np.flatnonzero(v > 0)
            idx_list.append(nz)
            val_list.append(v[nz])
            starts.append(starts[-1] + nz.size)
        index = np.concatenate(idx_list).astype(np.int32)
        value = np.concatenate(val_list)
        self.h.addCols(len(ks), costs, np.zeros(len(ks)), np.full(len(ks), np.inf), int(index.size),
                       np.asarray(starts[:-1], dtype=np.int32), index, value)
        self.col_owner.extend(ks)
        self.col_ray.extend(vecs)
        self.col_idle = np.concatenate([self.col_idle, np.zeros(len(ks), dtype=np.int64)])
        self.columns_added += len(ks)

    def retire_columns(self, lam: np.ndarray) -> np.ndarray:
        """After a master solve with column weights ``lam``: count the solves each column sat idle
        (weight 0, reduced cost above :attr:`enter_tol`, so nonbasic; never the first, the uniform
        vector, which keeps the master feasible), and delete from the master the columns idle for
        ``options.column_idle_solves`` solves while it holds more than ``options.column_pool_per_record``
        per record. The basis stays valid (only nonbasic columns go) and so does the solution.
        Returns ``lam`` without the deleted columns' (zero) weights. Call it before anything else
        changes the master: it reads the solution's reduced costs."""
        n = len(self.col_owner)
        if not n:
            return lam
        rc = np.asarray(self.h.getSolution().col_dual, dtype=float)[self.n_slack:]
        idle = (lam <= 0.0) & (rc > self.enter_tol)
        idle[0] = False  # the uniform start column: with it the master is always feasible
        self.col_idle = np.where(idle, self.col_idle + 1, 0)
        if n <= self.options.column_pool_per_record * self.m:
            return lam
        drop = np.flatnonzero(self.col_idle >= self.options.column_idle_solves)
        if not drop.size:
            return lam
        self.h.deleteCols(int(drop.size), (drop + self.n_slack).astype(np.int32))
        keep = np.ones(n, dtype=bool)
        keep[drop] = False
        self.col_owner = [o for o, k in zip(self.col_owner, keep.tolist()) if k]
        self.col_ray = [r for r, k in zip(self.col_ray, keep.tolist()) if k]
        self.col_idle = self.col_idle[keep]
        self.columns_retired += int(drop.size)
        return lam[keep]

    def mechanism(self, lam: np.ndarray, Kc: int) -> np.ndarray:
        """The component's rows (records x ``Kc`` kept outputs) of column weights ``lam``."""
        Zc = np.zeros((self.m, Kc))
        for j in np.flatnonzero(lam > 0):
            Zc[:, self.col_owner[j]] += lam[j] * self.col_ray[j]
        return Zc

    def set_box(self, center: np.ndarray | None, width: float) -> None:
        """Confine the RMP's duals to ``[center - width, center + width]`` (``center=None``: no box)."""
        m = self.m
        idx = np.arange(2 * m, dtype=np.int32)
        if center is None:
            self.h.changeColsBounds(2 * m, idx, np.zeros(2 * m), np.zeros(2 * m))
            return
        self.h.changeColsCost(2 * m, idx, np.concatenate([center + width, -(center - width)]))
        self.h.changeColsBounds(2 * m, idx, np.zeros(2 * m), np.full(2 * m, np.inf))

    def box_binding(self) -> bool:
        """Whether a box slack is in the last solution (the box holds the duals back)."""
        x = np.asarray(self.h.getSolution().col_value[: self.n_slack], dtype=float)
        return bool(np.any(x > 1e-3 * self.tol))  # 1e-12 at the tight tolerance

    def _time_limit(self, stop_at: float) -> None:
        """HiGHS's time limit on the master: what is left until ``stop_at`` (``time.perf_counter()``)."""
        left = stop_at - time.perf_counter()
        if left <= 0.0:
            raise OutOfTime
        set_time_left(self.h, left)

    def _solution(self) -> tuple[np.ndarray, float, np.ndarray]:
        sol = self.h.getSolution()
        return (np.asarray(sol.row_dual, dtype=float), float(self.h.getInfo().objective_function_value),
                np.asarray(sol.col_value, dtype=float)[self.n_slack:])

    def solve(self, stop_at: float = np.inf) -> tuple[np.ndarray, float, np.ndarray]:
        """Solve the RMP; its duals, objective and column weights.

        Raises
        ------
        OutOfTime
            ``stop_at`` (``time.perf_counter()`` seconds) passed first.
        SolverError
            No run, cold or with the fallbacks, ends with a solution (:meth:`_fall_back`).
        """
        import highspy

        self._time_limit(stop_at)
        run_status = self.h.run()
        status = self.h.modelStatusToString(self.h.getModelStatus())
        if status == "Time limit reached":
            raise OutOfTime
        if run_status == highspy.HighsStatus.kError or status != "Optimal":
            return self._fall_back(stop_at)
        return self._solution()

    def _fall_back(self, stop_at: float) -> tuple[np.ndarray, float, np.ndarray]:
        """Cold, then :data:`MASTER_FALLBACKS`: with near-parallel columns (a first-order start's repaired
        and closed copies) the dual simplex at tight tolerances can end "Unknown" or even "Infeasible" on
        this always-feasible master, where the primal simplex solves it. Any master solution is safe: its
        duals only steer the pricing and its mechanism is repaired and verified; so a run that ends
        "Unknown" with a solution whose unit-row residual is at most
        ``options.master_accept_infeasibility`` is taken when none ends "Optimal"."""
        h = self.h
        nearest: tuple[float, tuple[np.ndarray, float, np.ndarray]] | None = None
        status = ""
        for options in ({}, *MASTER_FALLBACKS):
            if options and all(h.getOptionValue(key)[1] == value for key, value in options.items()):
                continue  # the cold re-solve just ran with these
            with RETRY_LOCK:
                with highs_options(h, options):
                    h.clearSolver()
                    self._time_limit(stop_at)
                    h.run()
                status = h.modelStatusToString(h.getModelStatus())
                sol = h.getSolution()
                residual = float(h.getInfo().max_primal_infeasibility)
                if status == "Optimal":
                    result = self._solution()
                elif (status == "Unknown" and sol.value_valid and sol.dual_valid and np.isfinite(residual)
                      and (nearest is None or residual < nearest[0])):
                    nearest = (residual, self._solution())
            if status == "Time limit reached":
                raise OutOfTime
            if status == "Optimal":
                self.retries += 1
                return result
        if nearest is not None and nearest[0] <= self.options.master_accept_infeasibility:
            logger.info("column-generation master: no run ended 'Optimal' (last: %s); taking the solution "
                        "with unit-row residual %.2g", status, nearest[0])
            self.retries += 1
            return nearest[1]
        raise SolverError(f"column-generation master ended with status {status}, also cold and with "
                          "primal simplex, loose tolerances and the interior-point solver"
                          + (f" (smallest unit-row residual {nearest[0]:.2g})" if nearest else ""))

    def solve_in_box(self, center: np.ndarray | None, width: float, stop_at: float = np.inf
                     ) -> tuple[np.ndarray, float, np.ndarray, np.ndarray | None, float]:
        """:meth:`solve` under the dual box ``center +- width``; returns the box in force after.

        A box can exclude every dual point the master's columns allow (a first-order start's centre
        above them, with the narrow box of a small gap): the boxed master is then unbounded. The box is
        widened x4 up to ``options.box_widenings`` times, then dropped: without it the master is always
        feasible (the uniform start column) and bounded (costs >= 0)."""
        if center is not None:
            for _ in range(self.options.box_widenings):
                try:
                    return (*self.solve(stop_at), center, width)
                except SolverError:
                    width *= 4.0
                    self.box_widenings += 1
                    self.set_box(center, width)
            logger.info("master still unsolved after %d box widenings: box dropped", self.options.box_widenings)
            self.set_box(None, 0.0)
            self.boxstep = False
        return (*self.solve(stop_at), None, 0.0)

    def unboxed_solve(self, center: np.ndarray | None, width: float, stop_at: float) -> np.ndarray:
        """The RMP's column weights without the box (a restriction of the PMO), by the dual simplex (the
        slacks' bounds close). The boxed master's basis is put back after, unless the unboxed optimum's
        duals lie in the box (then its basis is optimal for the boxed master too: the slacks price out):
        from the unboxed basis the next boxed solve would take many more pivots."""
        basis = self.h.getBasis() if center is not None else None
        if center is not None:
            self.set_box(None, 0.0)
        try:
            with highs_options(self.h, {"simplex_strategy": DUAL_SIMPLEX}):
                mu, _, lam = self.solve(stop_at)
            if center is not None and bool(np.all(np.abs(mu - center) <= width)):
                basis = None
        finally:
            if center is not None:
                self.set_box(center, width)
                if basis is not None and basis.valid:
                    self.h.setBasis(basis)
        return lam
