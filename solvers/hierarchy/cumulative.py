"""Cumulative counts: Algorithm 2 (for M_c^dp), the relaxed QP M_c^r and the exact Model 3 (M_c^ch).

Convention (documented in docs/census.md): the chain of region r is its cumulative counts
    c_s^r = number of groups in r of size >= s,   s = 1, 2, ..., N   (chain order: ascending s),
so c_1^r is the number of groups in r, c_1^root = G, and n_s^r = c_s^r - c_{s+1}^r
(c_{N+1} = 0). Moving one individual changes one group size by one, i.e. one cumulative count
of one region per level by one: sensitivity 1 per level, noise Geom(L/eps) (Fioretto, Van
Hentenryck, Zhu, AIJ 2021).

Model 3 (the chain model; our statement of C6-C10):
    minimise   sum_{r, s} (c_s^r - ct_s^r)^2
    (C6)       c_1^root = G
    (C7)       c_s^r = sum_{child q of r} c_s^q           (hierarchy consistency)
    (C8)       c_s^r >= c_{s+1}^r                          (chain: counts non-negative)
    (C9)       c_N^r >= 0
    (C10)      c integer.

Exactness of ``chain``: see ``securelp.solvers.hierarchy.chain`` — windowed piecewise-linear LPs
give an integer point and integer Lagrange multipliers, and a Lagrangian optimality
certificate, checked in code (exact integer arithmetic on integer inputs), proves the point
optimal over the whole domain; windows are widened until it passes. Algorithm 2 (our reading) projects each region's noisy chain onto
non-increasing, non-negative sequences (isotonic regression), rounds, and differences it into
non-negative counts, which the Model 1 DP then makes consistent.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from securelp.solvers.errors import InputError, ResourceError, VerificationError
from securelp.solvers.hierarchy.hdp import squared_distance
from securelp.solvers.hierarchy.model import Hierarchy
from securelp.solvers.hierarchy.qp import solve_highs

logger = logging.getLogger(__name__)

#: Largest Model 3 relaxation handed to HiGHS's active-set QP (it did not finish the
#: 152,489-variable Kuo taxi instance in 442 s; 1,550 variables took 3.5 s).
MAX_QP_VARIABLES = 20_000


def to_cumulative(counts: np.ndarray) -> np.ndarray:
    """c_s = sum_{i >= s} n_i along the size axis."""
    return np.cumsum(np.asarray(counts)[:, ::-1], axis=1)[:, ::-1]


def from_cumulative(cum: np.ndarray) -> np.ndarray:
    """n_s = c_s - c_{s+1} (c_{N+1} = 0)."""
    c = np.asarray(cum)
    nxt = np.concatenate([c[:, 1:], np.zeros((c.shape[0], 1), dtype=c.dtype)], axis=1)
    return c - nxt


def algorithm2(noisy_cum: np.ndarray) -> np.ndarray:
    """Per region: isotonic (non-increasing) regression, clip at 0, round, difference -> counts >= 0."""
    from scipy.optimize import isotonic_regression

    y = np.asarray(noisy_cum, dtype=np.float64)
    out = np.empty_like(y)
    for r in range(y.shape[0]):
        out[r] = isotonic_regression(y[r], increasing=False).x
    mono = np.rint(np.maximum(out, 0.0)).astype(np.int64)
    return from_cumulative(mono)


@dataclass(frozen=True)
class ChainResult:
    """Exact Model 3 solution."""

    cumulative: np.ndarray
    counts: np.ndarray
    objective: float
    projection_objective: float
    incumbent_objective: float
    box_radius: float
    segments: int
    rounds: int = 0
    blocks: int = 0
    certificate_min_slack: float = 0.0
    certificate_exact_arithmetic: bool = True
    lp_time_s: float = 0.0
    integer_program: str | None = None  # set when the LP optimum was fractional (chain.py)
    integrality_gap: float = 0.0
    mip_time_s: float = 0.0
    certificate_kind: str = "lagrangian"  # chain.ChainLPResult.certificate_kind


def consistency_rows(hier: Hierarchy, n_sizes: int) -> sp.csr_matrix:
    """Rows x_{r,s} - sum_c x_{c,s} = 0 for internal r (variables indexed r*N + s)."""
    rows, cols, vals = [], [], []
    k = 0
    s = np.arange(n_sizes)
    for r in hier.internal:
        row_ids = k + s
        rows.append(row_ids)
        cols.append(r * n_sizes + s)
        vals.append(np.ones(n_sizes))
        for c in hier.children[r]:
            rows.append(row_ids)
            cols.append(c * n_sizes + s)
            vals.append(-np.ones(n_sizes))
        k += n_sizes
    if not rows:
        return sp.csr_matrix((0, hier.size * n_sizes))
    return sp.csr_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(k, hier.size * n_sizes)
    )


def monotone_rows(n_regions: int, n_sizes: int) -> sp.csr_matrix:
    """Rows c_{r,s} - c_{r,s+1} >= 0."""
    if n_sizes < 2:
        return sp.csr_matrix((0, n_regions * n_sizes))
    r, s = np.meshgrid(np.arange(n_regions), np.arange(n_sizes - 1), indexing="ij")
    base = (r * n_sizes + s).ravel()
    m = base.size
    rows = np.concatenate([np.arange(m), np.arange(m)])
    cols = np.concatenate([base, base + 1])
    vals = np.concatenate([np.ones(m), -np.ones(m)])
    return sp.csr_matrix((vals, (rows, cols)), shape=(m, n_regions * n_sizes))


def model3_constraints(hier: Hierarchy, n_sizes: int) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    """Rows of C7 and C8 with their bounds."""
    cons = consistency_rows(hier, n_sizes)
    mono = monotone_rows(hier.size, n_sizes)
    a = sp.vstack([cons, mono]).tocsr()
    lower = np.concatenate([np.zeros(cons.shape[0]), np.zeros(mono.shape[0])])
    upper = np.concatenate([np.zeros(cons.shape[0]), np.full(mono.shape[0], np.inf)])
    return a, lower, upper


def model3_relaxation(hier: Hierarchy, noisy_cum: np.ndarray, total: int) -> tuple[np.ndarray, float]:
    """Continuous projection onto Model 3's feasible set (M_c^r) by HiGHS QP: (c, objective)."""
    y = np.asarray(noisy_cum, dtype=np.float64)
    n_sizes = y.shape[1]
    if y.size > MAX_QP_VARIABLES:
        raise ResourceError(
            f"the Model 3 relaxation has {y.size:,} variables; HiGHS's QP solver is limited here to "
            f"{MAX_QP_VARIABLES:,}, and chain's exactness certificate needs that exact projection, so chain "
            f"does not run on this instance (use cdp or hdp; cqp uses Dykstra's projections up to "
            f"{MAX_DYKSTRA_CELLS:,} cells)"
        )
    a, lo, hi = model3_constraints(hier, n_sizes)
    nv = y.size
    col_lo = np.zeros(nv)
    col_hi = np.full(nv, float(total))
    col_lo[0] = col_hi[0] = float(total)  # C6: root, size 1
    out = solve_highs(-2.0 * y.ravel(), a, lo, hi, col_lo, col_hi, hessian_diag=np.full(nv, 2.0))
    c = out.x.reshape(y.shape)
    return c, float(np.sum((c - y) ** 2))


#: Largest Model 3 relaxation solved by Dykstra's alternating projections (cqp only).
MAX_DYKSTRA_CELLS = 500_000


def _project_consistent(hier: Hierarchy, z: np.ndarray, total: int) -> np.ndarray:
    """Euclidean projection onto C6 + C7 (per size: tree least squares; size 1 root = G)."""
    from securelp.solvers.hierarchy.hdp import least_squares_consistent

    out = least_squares_consistent(hier, z, None)
    out[:, :1] = least_squares_consistent(hier, z[:, :1], total)
    return out


def _project_monotone(z: np.ndarray) -> np.ndarray:
    """Euclidean projection onto C8 + C9 (per region: non-increasing isotonic fit, clipped at 0)."""
    from scipy.optimize import isotonic_regression

    out = np.empty_like(z)
    for r in range(z.shape[0]):
        out[r] = isotonic_regression(z[r], increasing=False).x
    return np.maximum(out, 0.0)


def model3_relaxation_dykstra(
    hier: Hierarchy, noisy_cum: np.ndarray, total: int, tol: float = 1e-3, max_iter: int = 3000,
    deadline: float | None = None,
) -> tuple[np.ndarray, float, int]:
    """Model 3 relaxation by Dykstra's alternating projections (Boyle and Dykstra 1986).

    The two sets are C6+C7 (affine, projected by the tree least-squares formula) and C8+C9
    (projected by isotonic regression and clipping); Dykstra's iterates converge to the
    projection of the noisy values onto their intersection. Stops when the monotone iterate
    is within ``tol`` (max norm) of the consistent one. Returns (c, residual, iterations).
    Past ``deadline`` (``time.perf_counter`` clock) it raises ``chain.ChainTimeLimit``.
    """
    from securelp.solvers.hierarchy.chain import ChainTimeLimit

    if total < 0:
        raise ResourceError("negative total")
    y = np.asarray(noisy_cum, dtype=np.float64)
    x = y.copy()
    p = np.zeros_like(x)
    q = np.zeros_like(x)
    residual = np.inf
    it = 0
    for it in range(1, max_iter + 1):
        a = _project_consistent(hier, x + p, total)
        p = x + p - a
        x = _project_monotone(a + q)
        q = a + q - x
        residual = float(np.abs(a - x).max())
        if residual <= tol:
            break
        if deadline is not None and time.perf_counter() >= deadline:
            raise ChainTimeLimit(f"during the continuous projection (Dykstra, {it} iterations, residual {residual:.3g})")
    return x, residual, it


def model3_relaxation_accelerated(
    hier: Hierarchy, noisy_cum: np.ndarray, total: int, tol: float = 0.05, max_iter: int = 5000,
    deadline: float | None = None,
) -> tuple[np.ndarray, float, int]:
    """Model 3 relaxation by accelerated projected gradient ascent on its dual (FISTA with restarts).

    The projection of y onto A (C6 + C7, affine) intersected with B (C8 + C9, per region a
    non-increasing non-negative chain) has the dual max_lambda D(lambda) with
    x(lambda) = P_B(y - A' lambda) and gradient A x(lambda) - b. Preconditioned by (A A')^-1
    (the tree least squares that projects onto A), a unit gradient step is
    z <- z - (x - P_A(x)) on z = y - A' lambda, x = P_B(z); FISTA extrapolates these steps
    (Beck and Teboulle 2009) and restarts its momentum when a step goes against the last one
    (O'Donoghue and Candes 2015). Each iteration costs one projection onto each set, as one
    Dykstra iteration does, and far fewer are needed: census N = 1,000, seed 1, to a max-norm
    residual of 0.05: 22 iterations against Dykstra's 64 at eps = 1, 107 against about 550 at
    eps = 0.1. Stops when ``x`` (in B) is within ``tol`` (max norm) of its projection onto A.
    Returns (x, residual, iterations). Past ``deadline`` (``time.perf_counter`` clock) it raises
    ``chain.ChainTimeLimit``.
    """
    from securelp.solvers.hierarchy.chain import ChainTimeLimit

    if total < 0:
        raise ResourceError("negative total")
    y = np.asarray(noisy_cum, dtype=np.float64)
    z = y.copy()
    w = z.copy()
    t = 1.0
    x = z
    residual = np.inf
    it = 0
    for it in range(1, max_iter + 1):
        x = _project_monotone(w)
        step = x - _project_consistent(hier, x, total)
        residual = float(np.abs(step).max())
        if residual <= tol:
            break
        if deadline is not None and time.perf_counter() >= deadline:
            raise ChainTimeLimit(f"during the continuous projection ({it} iterations, residual {residual:.3g})")
        z_new = w - step
        if float(np.vdot(step, z_new - z)) > 0:  # the momentum points uphill: restart it
            t = 1.0
        t_new = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * t * t))
        w = z_new + ((t - 1.0) / t_new) * (z_new - z)
        z, t = z_new, t_new
    return x, residual, it


def solve_model3(hier: Hierarchy, noisy_cum: np.ndarray, total: int, *, initial_halfwidth: int = 2,
                 time_limit: float | None = None) -> ChainResult:
    """Exact optimum of Model 3 (C6-C10) with a checked Lagrangian certificate.

    A real-valued approximation of the projection (``model3_relaxation_accelerated``, max-norm
    residual 0.05) gives the
    first zero tails (with the C7 multipliers read off it) and, split top-down
    (``chain.consistent_rounding``), a feasible integer centre within a few units of it in every
    cell; windowed piecewise-linear LPs around it give an integer point and integer (or
    half-integral) multipliers, and ``chain.check_certificate`` proves the point optimal over
    the whole domain (see ``securelp.solvers.hierarchy.chain``). Windows are widened
    until the check passes. A fractional LP optimum is resolved by branch and bound over the
    level set of the LP multipliers' exact bound (``securelp.solvers.hierarchy.window_bound``).
    ``time_limit`` (seconds, None: no limit) bounds the whole solve; when it runs out there is
    no release (ResourceError saying where it stopped), never an uncertified one.

    Raises
    ------
    InputError
        Shapes or G invalid.
    ResourceError
        The windows needed exceed the LP size limits, no certificate within the round limit,
        or a fractional LP optimum without a level-set proof (decimal inputs, level set too
        large, branch-and-bound time limit), or ``time_limit`` ran out.
    VerificationError
        The final check failed (never expected).
    """
    from securelp.solvers.hierarchy.chain import (
        ChainTimeLimit,
        round_to_feasible,
        solve_model3_certified,
    )
    from securelp.solvers.hierarchy.hdp import _check_inputs

    if time_limit is not None and not (math.isfinite(time_limit) and time_limit > 0):
        raise InputError(f"the chain time limit must be a positive number of seconds, got {time_limit}")
    deadline = None if time_limit is None else time.perf_counter() + float(time_limit)
    y = np.asarray(noisy_cum)
    _check_inputs(hier, y, total)
    total = int(total)
    yf = y.astype(np.float64)
    try:
        approx, _residual, _iterations = model3_relaxation_accelerated(hier, yf, total, tol=0.05, max_iter=5000,
                                                                       deadline=deadline)
        center, starts = _centre_and_tails(hier, y, total, approx)
        if center is None:  # no consistent rounding with these tails: the plain centre, default tails
            center = round_to_feasible(hier, approx, total)
        res = solve_model3_certified(hier, y, total, center, initial_halfwidth=initial_halfwidth,
                                     tail_starts=starts, deadline=deadline)
    except ChainTimeLimit as exc:
        raise ResourceError(f"chain: no certified release within the time limit ({time_limit:g} s of post-processing; "
                            f"stopped {exc}); allow more time, or use hdp or cdp (exact and much faster at this "
                            f"scale)") from None
    if not _model3_feasible(hier, res.cumulative, total) or not res.certificate.ok:  # pragma: no cover
        raise VerificationError("chain: the certified point fails Model 3 feasibility")
    return ChainResult(
        cumulative=res.cumulative,
        counts=from_cumulative(res.cumulative),
        objective=res.objective,
        projection_objective=float(np.sum((approx - yf) ** 2)),
        incumbent_objective=squared_distance(center, y),
        box_radius=float(res.max_halfwidth),
        segments=res.segments,
        rounds=res.rounds,
        blocks=res.blocks,
        certificate_min_slack=res.certificate.min_slack,
        certificate_exact_arithmetic=res.certificate.integral_arithmetic,
        lp_time_s=res.lp_time_s,
        integer_program=res.integer_program,
        certificate_kind=res.certificate_kind,
        integrality_gap=res.integrality_gap,
        mip_time_s=res.mip_time_s,
    )


#: A leaf cell whose approximate projection is below this may start a proposed zero tail.
TAIL_PROPOSAL_THRESHOLD = 0.1


def _centre_and_tails(hier: Hierarchy, y: np.ndarray, total: int, approx: np.ndarray
                      ) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The LP centre and first zero tails for ``solve_model3_certified``, from the approximate projection.

    Tails: ``zero_tail.ladder_starts`` on the cells whose projection is below
    ``TAIL_PROPOSAL_THRESHOLD``, with the C7 multipliers read off the projection
    (``chain.projection_multipliers``, rounded) for the parents' terms. Centre:
    ``chain.consistent_rounding`` of the projection, 0 on those tails. (None, None) when no
    such centre exists. Only proposals: the certificate decides, and failing tails are
    shortened by the solver.
    """
    from securelp.solvers.hierarchy.chain import consistent_rounding, projection_multipliers
    from securelp.solvers.hierarchy.zero_tail import fixed_cells, ladder_starts

    n_sizes = approx.shape[1]
    if n_sizes < 2:
        return consistent_rounding(hier, approx, total, np.zeros(approx.shape, dtype=bool)), None
    lam = np.rint(projection_multipliers(hier, approx, y))
    if np.issubdtype(np.asarray(y).dtype, np.integer):
        lam = lam.astype(np.int64)
    near_zero = np.where(approx < TAIL_PROPOSAL_THRESHOLD, 0, 1)
    starts = ladder_starts(hier, y, near_zero, lam)
    center = consistent_rounding(hier, approx, total, fixed_cells(hier, starts, n_sizes))
    return (center, starts) if center is not None else (None, None)


def _model3_feasible(hier: Hierarchy, cum: np.ndarray, total: int) -> bool:
    if int(cum[0, 0]) != int(total) or np.any(cum < 0):
        return False
    if np.any(np.diff(cum, axis=1) > 0):
        return False
    for r in hier.internal:
        if np.any(cum[list(hier.children[r])].sum(axis=0) != cum[r]):
            return False
    return True
