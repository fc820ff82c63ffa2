"""Decomposition of the PMO by output column (Dantzig-Wolfe / column generation) -- beyond Qiu.

The mDP rows of the PMO (Qiu Eq. 5) couple records only *within one output column k*;
only the unit-measure rows (Eq. 6) couple the columns. So the PMO is

    min sum_k g_k' z_k   s.t.  sum_k z_k = 1 (per record),  z_k in C  (every k),

with ``g_k = p * c[:, k]`` and ``C = {z >= 0 : z_i <= exp(eps d_ij) z_j for neighbours}`` a
polyhedral cone, the same for every column. Dantzig-Wolfe: ``z_k = sum_r lambda_kr r``
over rays ``r`` of ``C`` (normalised ``sum_i r_i = 1``); the restricted master over the rays
found so far has one row per record. Pricing column ``k`` with the master's row duals ``mu``
is the small LP ``v_k = min { (g_k - mu)' r : r in C, sum r = 1 }`` (n variables, one HiGHS
model per column re-solved warm with a new objective). A ray with ``v_k < 0`` enters.

Bounds. Upper: the restricted master's solution is a feasible mechanism; it is repaired
and verified (:func:`solvers.mdp.pmo.finalize_mechanism`) before it counts. Lower
(Lagrangian): every feasible ``z_k`` lies in ``C`` with ``sum_i z_ik <= n``, so for any ``mu``
``OPT >= sum_i mu_i + n * sum_k min(0, v_k)``, with ``v_k`` HiGHS's optimal pricing value (so
the bound is exact up to HiGHS's optimality tolerances, like ``direct``'s); the bound from the
pricing duals with the weak-duality correction, free of tolerances but weaker at large
``eps d``, is reported as ``lower_bound_from_duals``. A ray enters when it could move the
bound by more than a tenth of the target gap. Start rays: ``1/n`` (always in ``C``) and
``exp(-eps delta(., y_k))`` normalised, ``delta`` the shortest-path distance in the mDP graph.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra

from solvers.errors import InputError, SolverError
from solvers.mdp.pmo import IterationRecord, MechanismResult, PMOProblem, finalize_mechanism

__all__ = ["solve_colgen"]

logger = logging.getLogger(__name__)

_RETRY_LOCK = threading.Lock()


def _highs() -> Any:
    import highspy

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    # no 'threads' option: HiGHS >= 1.16 sizes one task scheduler per process at its first run
    # and refuses to run a later model that asks for another thread count (status 'Not Set')
    h.setOptionValue("primal_feasibility_tolerance", 1e-9)
    h.setOptionValue("dual_feasibility_tolerance", 1e-9)
    return h


def _pricing_model(n: int, rows: np.ndarray, cols: np.ndarray, w: np.ndarray) -> Any:
    import highspy

    E = rows.size
    r_idx = np.concatenate([np.repeat(np.arange(E), 2), np.full(n, E)])
    c_idx = np.concatenate([np.column_stack([rows, cols]).ravel(), np.arange(n)])
    vals = np.concatenate([np.column_stack([np.ones(E), -w]).ravel(), np.ones(n)])
    A = sp.csr_matrix((vals, (r_idx, c_idx)), shape=(E + 1, n))
    lp = highspy.HighsLp()
    lp.num_col_ = n
    lp.num_row_ = E + 1
    lp.col_cost_ = np.zeros(n)
    lp.col_lower_ = np.zeros(n)
    lp.col_upper_ = np.ones(n)
    lp.row_lower_ = np.concatenate([np.full(E, -np.inf), [1.0]])
    lp.row_upper_ = np.concatenate([np.zeros(E), [1.0]])
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.num_col_ = n
    lp.a_matrix_.num_row_ = E + 1
    lp.a_matrix_.start_ = A.indptr.astype(np.int32)
    lp.a_matrix_.index_ = A.indices.astype(np.int32)
    lp.a_matrix_.value_ = A.data.astype(float)
    h = _highs()
    h.passModel(lp)
    return h


def solve_colgen(problem: PMOProblem, *, gap: float = 1e-4, max_iterations: int = 1000,
                 time_limit: float = float("inf"), workers: int = 2,
                 progress: Callable[[IterationRecord], None] | None = None) -> MechanismResult:
    """Solve the PMO by column generation over output columns; returns a verified mechanism."""
    if not gap > 0:
        raise InputError(f"the relative gap must be > 0, got {gap}")
    import highspy

    t0 = time.perf_counter()
    n, K = problem.n, problem.K
    D = np.asarray(problem.dataset.distance)
    rows, cols = problem.lp_edges
    w = np.exp(problem.eps * D[rows, cols])
    G = problem.cost  # (n, K)
    # start rays
    adj = sp.csr_matrix((D[problem.graph.rows, problem.graph.cols], (problem.graph.rows, problem.graph.cols)),
                        shape=(n, n))
    delta = dijkstra(adj, directed=False, indices=problem.outputs)  # (K, n)
    master = _highs()
    master.passModel(_empty_master(n))
    col_owner: list[int] = []
    col_ray: list[np.ndarray] = []

    def add_columns(ks: list[int], vecs: list[np.ndarray]) -> None:
        if not ks:
            return
        costs = np.array([float(G[:, k] @ v) for k, v in zip(ks, vecs)])
        idx_list, val_list, starts = [], [], [0]
        for v in vecs:
            nz = np.flatnonzero(v > 0)
            idx_list.append(nz)
            val_list.append(v[nz])
            starts.append(starts[-1] + nz.size)
        idx = np.concatenate(idx_list).astype(np.int32)
        val = np.concatenate(val_list)
        master.addCols(len(ks), costs, np.zeros(len(ks)), np.full(len(ks), np.inf), int(idx.size),
                       np.asarray(starts[:-1], dtype=np.int32), idx, val)
        for k, v in zip(ks, vecs):
            col_owner.append(k)
            col_ray.append(v)

    ones = np.full(n, 1.0 / n)
    init_k, init_v = [], []
    for k in range(K):
        init_k.append(k)
        init_v.append(ones)
        prof = np.exp(-problem.eps * np.where(np.isfinite(delta[k]), delta[k], np.inf))
        prof[~np.isfinite(delta[k])] = 0.0
        s = prof.sum()
        if s > 0:
            init_k.append(k)
            init_v.append(prof / s)
    add_columns(init_k, init_v)

    pricers = [_pricing_model(n, rows, cols, w) for _ in range(min(K, max(1, workers)))]
    # one model per worker; objective changes each call (warm start within a worker's sequence)
    history: list[IterationRecord] = []
    lower, upper = -np.inf, np.inf
    lb_dual_best = -np.inf
    best: tuple[np.ndarray, Any, dict] | None = None
    status = "iteration_limit"
    pool = ThreadPoolExecutor(max_workers=len(pricers)) if len(pricers) > 1 else None

    E = rows.size
    A_price = sp.csr_matrix(
        (np.concatenate([np.column_stack([np.ones(E), -w]).ravel(), np.ones(n)]),
         (np.concatenate([np.repeat(np.arange(E), 2), np.full(n, E)]),
          np.concatenate([np.column_stack([rows, cols]).ravel(), np.arange(n)]))), shape=(E + 1, n))
    AT = A_price.T.tocsr()

    def price(args: tuple[int, np.ndarray]) -> list[tuple[int, float, np.ndarray | None, float]]:
        worker, mu = args
        h = pricers[worker]
        out = []
        for k in range(worker, K, len(pricers)):
            g = G[:, k] - mu
            if np.all(g >= 0):
                out.append((k, 0.0, None, 0.0))  # g >= 0: min over C with sum 1 is >= 0, no ray helps
                continue
            h.changeColsCost(n, np.arange(n, dtype=np.int32), g)
            h.run()
            if h.modelStatusToString(h.getModelStatus()) != "Optimal":
                # rare inconclusive ends under concurrent HiGHS runs: retry cold, alone
                with _RETRY_LOCK:
                    h.clearSolver()
                    h.run()
            if h.modelStatusToString(h.getModelStatus()) != "Optimal":
                raise SolverError(f"pricing LP of output {k} ended with {h.modelStatusToString(h.getModelStatus())}")
            sol = h.getSolution()
            z = np.clip(np.asarray(sol.col_value), 0.0, None)
            # rigorous lower bound on v_k from the duals (weak duality), mDP-row duals clipped to <= 0;
            pi = np.asarray(sol.row_dual, dtype=float)
            pi[:-1] = np.minimum(pi[:-1], 0.0)
            # shifting the free dual of the normalisation row makes every reduced cost >= 0 at a
            # cost of the largest negative one (much tighter than summing them)
            bound = float(pi[-1] - max(0.0, float(-(g - AT @ pi).min())))
            out.append((k, float(g @ z), z / z.sum(), bound))
        return out

    try:
        for it in range(1, max_iterations + 1):
            if master.run() == highspy.HighsStatus.kError:
                raise SolverError("HiGHS failed on the column-generation master")
            mstat = master.modelStatusToString(master.getModelStatus())
            if mstat != "Optimal":
                raise SolverError(f"column-generation master ended with status {mstat}")
            sol = master.getSolution()
            mu = np.asarray(sol.row_dual, dtype=float)
            master_obj = float(master.getInfo().objective_function_value)
            jobs = [(wk, mu) for wk in range(len(pricers))]
            results = [r for part in (pool.map(price, jobs) if pool else map(price, jobs)) for r in part]
            v = np.zeros(K)
            new_k, new_v = [], []
            # a column enters when it could move the Lagrangian bound by more than gap/10 in total
            enter = -0.1 * gap * max(abs(master_obj), 1e-300) / (n * K)
            dual_v = np.zeros(K)
            for k, val, z, dbound in results:
                v[k] = val
                dual_v[k] = dbound
                if z is not None and val < enter:
                    new_k.append(k)
                    new_v.append(z)
            lb_it = float(mu.sum() + n * np.minimum(v, 0.0).sum())
            lb_dual = float(mu.sum() + n * np.minimum(dual_v, 0.0).sum())  # tolerance-free, often weaker
            lower = max(lower, lb_it)
            lb_dual_best = max(lb_dual_best, lb_dual)
            raw_gap = (master_obj - lower) / max(abs(master_obj), 1e-300)
            if raw_gap <= gap or not new_k or it == max_iterations or time.perf_counter() - t0 > time_limit:
                lam = np.asarray(sol.col_value, dtype=float)
                Z = np.zeros((n, K))
                for j, k in enumerate(col_owner):
                    if lam[j] > 0:
                        Z[:, k] += lam[j] * col_ray[j]
                X, report, info = finalize_mechanism(Z, problem)
                ub = problem.objective_of(X)
                if ub < upper:
                    upper, best = ub, (X, report, info)
            history.append(IterationRecord(it, lower, upper, time.perf_counter() - t0))
            if progress is not None:
                progress(history[-1])
            if np.isfinite(upper) and (upper - lower) / max(abs(upper), 1e-300) <= gap:
                status = "optimal"
                break
            if not new_k:
                status = "stalled"
                break
            if time.perf_counter() - t0 > time_limit:
                status = "time_limit"
                break
            add_columns(new_k, new_v)
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
    if best is None:
        raise SolverError(f"column generation ended ({status}) without a verified mechanism")
    X, report, info = best
    lower = min(lower, upper)
    return MechanismResult(
        method="colgen", status=status, mechanism=X, objective=upper, lower_bound=lower, upper_bound=upper,
        rel_gap=(upper - lower) / max(abs(upper), 1e-300), iterations=len(history),
        time_s=time.perf_counter() - t0, verification=report, history=tuple(history),
        details={"n_columns": len(col_owner), "lower_bound_from_duals": lb_dual_best, **info},
    )


def _empty_master(n: int) -> Any:
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
