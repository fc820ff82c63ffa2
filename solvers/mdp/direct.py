"""The whole PMO LP solved by HiGHS (``direct``), its certified lower bound and its memory check.

The PMO (Qiu Eq. 4-7, :mod:`securelp.solvers.mdp.pmo`) is built row-wise, one mDP row per ordered
essential pair and output, then one unit row per record, and solved whole. Nothing HiGHS returns is
trusted: the mechanism is its solution repaired exactly and verified
(:func:`securelp.solvers.mdp.repair.finalize_mechanism`), and the lower bound is weak duality on its
row duals (:func:`securelp.solvers.lp.highs.dual_bound`), at least the trivial bound (every record on
its cheapest output); HiGHS's objective overstates the optimum on badly scaled instances.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np
import scipy.sparse as sp

from securelp.solvers.errors import InputError, ResourceError, SolverError
from securelp.solvers.lp.highs import dual_bound, new_highs
from securelp.solvers.mdp.pmo import PMOProblem, require_lp_factors
from securelp.solvers.mdp.repair import finalize_mechanism
from securelp.solvers.mdp.report import IterationRecord, MechanismResult
from securelp.solvers.mdp.verify import VerificationReport
from securelp.solvers.resources import available_memory, memory_shortfall

__all__ = ["build_block_lp", "direct_memory_check", "highs_solve_lp", "refuse_lp_too_large", "solve_direct"]

logger = logging.getLogger(__name__)

#: :func:`solve_direct` refuses an LP whose nonzeros times this exceed the memory available: a floor
#: of the peak memory per nonzero measured on the benchmark's instances, so that only LPs that cannot
#: fit are refused
DIRECT_BYTES_PER_NONZERO = 500


def highs_solve_lp(cost: np.ndarray, lower: np.ndarray, upper: np.ndarray, row_lower: np.ndarray,
                   row_upper: np.ndarray, starts: np.ndarray, index: np.ndarray, value: np.ndarray, *,
                   keep: bool = False, time_limit: float | None = None) -> tuple[str, np.ndarray, np.ndarray, float, Any]:
    """Solve a row-wise LP with HiGHS; returns ``(status, x, row_duals, objective, highs_or_None)``.

    ``status`` is HiGHS's model-status text (``Optimal``, ``Infeasible``, ...).

    Raises
    ------
    SolverError
        A failure of the call itself (not of the model).
    """
    import highspy

    options: dict[str, object] = {}
    if time_limit is not None:
        options["time_limit"] = float(time_limit)
    h = new_highs(options, tight=True)
    lp = highspy.HighsLp()
    lp.num_col_ = int(cost.size)
    lp.num_row_ = int(row_lower.size)
    lp.col_cost_ = np.ascontiguousarray(cost, dtype=float)
    lp.col_lower_ = np.ascontiguousarray(lower, dtype=float)
    lp.col_upper_ = np.ascontiguousarray(upper, dtype=float)
    lp.row_lower_ = np.ascontiguousarray(row_lower, dtype=float)
    lp.row_upper_ = np.ascontiguousarray(row_upper, dtype=float)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.num_col_ = lp.num_col_
    lp.a_matrix_.num_row_ = lp.num_row_
    lp.a_matrix_.start_ = np.ascontiguousarray(starts, dtype=np.int32)
    lp.a_matrix_.index_ = np.ascontiguousarray(index, dtype=np.int32)
    lp.a_matrix_.value_ = np.ascontiguousarray(value, dtype=float)
    if h.passModel(lp) == highspy.HighsStatus.kError:
        raise SolverError("HiGHS rejected the LP model (passModel failed)")
    run_status = h.run()
    if run_status == highspy.HighsStatus.kError:
        raise SolverError(f"HiGHS run failed (model status {h.modelStatusToString(h.getModelStatus())})")
    status = h.modelStatusToString(h.getModelStatus())
    sol = h.getSolution()
    x = np.asarray(sol.col_value, dtype=float)
    duals = np.asarray(sol.row_dual, dtype=float)
    obj = float(h.getInfo().objective_function_value)
    return status, x, duals, obj, (h if keep else None)


def build_block_lp(cost: np.ndarray, weights_rows: np.ndarray, weights_cols: np.ndarray, weights: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Row-wise arrays of the PMO restricted to ``m`` records (local indices) and ``K`` outputs.

    Variables ``z[i, k]`` at column ``i*K + k``. Rows: for each pair ``e`` and output ``k``,
    ``z[r_e, k] - w_e z[c_e, k] <= 0`` (row ``e*K + k``), then ``m`` unit-measure rows.

    Returns ``(cost, lower, upper, row_lower, row_upper, starts, index, value)``.
    """
    m, K = cost.shape
    E = weights_rows.size
    k = np.arange(K)
    # mDP rows: two nonzeros each
    a = (weights_rows[:, None] * K + k[None, :]).ravel()
    b = (weights_cols[:, None] * K + k[None, :]).ravel()
    idx_mdp = np.column_stack([a, b]).ravel()
    val_mdp = np.column_stack([np.ones(E * K), -np.repeat(weights, K)]).ravel()
    idx_unit = np.arange(m * K)
    val_unit = np.ones(m * K)
    starts = np.concatenate([np.arange(0, 2 * E * K, 2), 2 * E * K + np.arange(0, m * K + 1, K)])
    index = np.concatenate([idx_mdp, idx_unit])
    value = np.concatenate([val_mdp, val_unit])
    row_lower = np.concatenate([np.full(E * K, -np.inf), np.ones(m)])
    row_upper = np.concatenate([np.zeros(E * K), np.ones(m)])
    return (cost.ravel().astype(float), np.zeros(m * K), np.ones(m * K), row_lower, row_upper, starts, index, value)


def refuse_lp_too_large(nnz: int, what: str, advice: str, parameter: str,
                        bytes_per_nonzero: float = DIRECT_BYTES_PER_NONZERO) -> None:
    """Raise :class:`ResourceError` when an LP of ``nnz`` nonzeros needs more than the memory
    available at ``bytes_per_nonzero``; ``what`` describes the LP ("... has N rows"), ``advice`` ends
    the message and ``parameter`` names the choice that made the LP (the error's ``parameter``)."""
    if short := memory_shortfall(bytes_per_nonzero * nnz, available_memory()):
        raise ResourceError(f"{what} and {nnz:,} nonzeros; HiGHS needs at least about {short}{advice}",
                            parameter=parameter)


def direct_memory_check(E: int, n: int, K: int) -> None:
    """Refuse (:class:`ResourceError`, ``parameter`` "method") a whole PMO LP of ``E`` mDP pairs, ``n``
    records and ``K`` outputs that HiGHS could not hold in the memory available: at least
    :data:`DIRECT_BYTES_PER_NONZERO` per nonzero."""
    refuse_lp_too_large(2 * E * K + n * K, f"direct: the whole PMO LP has {E * K + n:,} rows",
                        "; the column decomposition needs far less", "method")


def _constant_mechanism(problem: PMOProblem, exact: bool) -> tuple[np.ndarray, VerificationReport, dict[str, float]]:
    """Every record to the output of least total loss: private at any eps; verified."""
    Z = np.zeros((problem.n, problem.K))
    Z[:, int(np.argmin(problem.cost.sum(axis=0)))] = 1.0
    return finalize_mechanism(Z, problem, exact=exact)


def _at_time_limit(problem: PMOProblem, x: np.ndarray, has_x: bool, duals: np.ndarray, has_duals: bool,
                   bound: Any, exact: bool) -> tuple[np.ndarray, VerificationReport, dict[str, float], float, float]:
    """What HiGHS stopped at the time limit leaves: the better of its last iterate (when it has one),
    repaired exactly, and the best constant mechanism, both verified; the lower bound is weak duality
    on its last duals when they are valid (``bound(duals)``), at least the trivial bound. Returns the
    mechanism, its report and repair figures, and the lower and upper bounds."""
    n, K = problem.n, problem.K
    X, report, info = _constant_mechanism(problem, exact)
    upper = problem.objective_of(X)
    if has_x and np.all(np.clip(x, 0.0, None).reshape(n, K).sum(axis=1) > 0):
        X2, report2, info2 = finalize_mechanism(x.reshape(n, K), problem, exact=exact)
        if problem.objective_of(X2) < upper:
            X, report, info, upper = X2, report2, info2, problem.objective_of(X2)
    lower = float(problem.cost.min(axis=1).sum())
    if has_duals:
        lower = max(lower, bound(duals))
    return X, report, info, min(lower, upper), upper


def solve_direct(problem: PMOProblem, *, gap: float = 1e-4, exact_check: bool = False,
                 time_limit: float | None = None) -> MechanismResult:
    """Solve the whole PMO with HiGHS (``direct``); returns a verified mechanism.

    The lower bound is weak duality on HiGHS's row duals; the upper bound and the objective are
    the loss of the repaired, verified mechanism. The status is ``optimal`` when their relative
    gap is at most ``gap``, else ``numerical_trouble`` (HiGHS's duals do not certify its solution).

    ``time_limit`` (seconds, counted from the call) is HiGHS's time limit on the rest after the LP
    is built. When it stops HiGHS first, the status is ``time_limit`` (:func:`_at_time_limit`); the
    repair and verification run after the limit.

    Raises
    ------
    InputError
        ``gap`` outside ``(0, 1)`` or a time limit that is not positive (``parameter`` names it), or
        eps d too large for an LP (:func:`securelp.solvers.mdp.pmo.require_lp_factors`).
    ResourceError
        The LP would not fit in memory (:func:`direct_memory_check`).
    SolverError
        HiGHS ends without an optimum or a time limit.
    """
    require_lp_factors(problem)
    if not 0 < gap < 1:
        raise InputError(f"the relative gap must be in (0, 1), got {gap}", parameter="gap")
    if time_limit is not None and not (time_limit > 0):
        raise InputError(f"the time limit must be a positive number of seconds, got {time_limit}",
                         parameter="time_limit")
    t0 = time.perf_counter()
    n, K = problem.n, problem.K
    rows, cols = problem.lp_edges
    direct_memory_check(rows.size, n, K)
    w = np.exp(problem.eps * np.asarray(problem.dataset.distance)[rows, cols])
    arrays = build_block_lp(problem.cost, rows, cols, w)
    logger.info("direct PMO: %d records x %d outputs, %d rows", n, K, arrays[3].size)
    left = None if time_limit is None else max(0.01, time_limit - (time.perf_counter() - t0))
    status, x, duals, obj, h = highs_solve_lp(*arrays, time_limit=left, keep=True)
    sol = h.getSolution()
    has_x, has_duals = bool(sol.value_valid), bool(sol.dual_valid)
    del h, sol  # HiGHS's copy of the LP is not needed for the repair and the bound
    c, lo, up, rlo, rup, starts, index, value = arrays
    AT = sp.csr_matrix((value, index, starts), shape=(rlo.size, c.size)).T

    def bound(pi: np.ndarray) -> float:
        return dual_bound(AT, c, lo, up, rlo, rup, pi)

    if status == "Time limit reached":
        X, report, info, lower, upper = _at_time_limit(problem, x, has_x, duals, has_duals, bound, exact_check)
        status = "time_limit"
        logger.info("direct: HiGHS stopped at the time limit (%.0f s for the LP)", left)
    elif status != "Optimal":
        raise SolverError(f"HiGHS did not solve the PMO LP to optimality (model status: {status})")
    else:
        X, report, info = finalize_mechanism(x.reshape(n, K), problem, exact=exact_check)
        upper = problem.objective_of(X)
        # the lower bound is weak duality on HiGHS's duals: its objective overstates the optimum on
        # badly scaled instances
        lower = min(max(bound(duals), float(problem.cost.min(axis=1).sum())), upper)
    rel_gap = (upper - lower) / max(abs(upper), 1e-300)
    if status != "time_limit":
        status = "optimal" if rel_gap <= gap else "numerical_trouble"
        if status != "optimal":
            logger.info("direct: HiGHS reported the PMO optimal, but its duals certify a gap of only %.3g", rel_gap)
    elapsed = time.perf_counter() - t0
    return MechanismResult(
        method="direct", status=status, mechanism=X, objective=upper, lower_bound=lower, upper_bound=upper,
        rel_gap=rel_gap, iterations=1, time_s=elapsed, verification=report,
        history=(IterationRecord(1, lower, upper, elapsed),),
        details={"lp_rows": int(arrays[3].size), "lp_cols": int(n * K), "solver_objective": obj, **info},
    )
