"""Continuous relaxations of Model 1 and Model 3: the projections of the noisy values onto H1-H3 / C6-C9.

Fioretto, Van Hentenryck, Zhu (AIJ 2021): M_H^r and M_c^r solve these relaxations and round;
``chain`` starts from an approximate Model 3 projection. Four solvers:

- HiGHS's QP (active set) for small models: min c'x + 1/2 x'Qx, squared distances sum (x - y)^2
  written as Q = 2I, c = -2y. ``run()`` says whether the call worked, ``getModelStatus()`` what
  happened to the model; the two are kept apart. The 152,489-variable Kuo taxi relaxation ended
  with "Solve error" after 442 s, so it is used on small models only (callers' options).
- an exact tree algorithm for the Model 1 relaxation at any size (:func:`model1_relaxation_tree`);
- Dykstra's alternating projections for the Model 3 relaxation (Boyle and Dykstra 1986);
- accelerated projected gradient ascent on the Model 3 relaxation's dual (FISTA with restarts).
"""

from __future__ import annotations

import math
import time

import numpy as np
import scipy.sparse as sp
from scipy.optimize import isotonic_regression

from securelp.solvers.errors import ResourceError, SolverError
from securelp.solvers.hierarchy.consistency import consistency_rows, least_squares_consistent, model3_constraints
from securelp.solvers.hierarchy.errors import TimeLimitReached
from securelp.solvers.hierarchy.model import Hierarchy
from securelp.solvers.lp.highs import new_highs

#: Largest Model 3 relaxation :func:`model3_relaxation` hands to HiGHS's active-set QP by default
#: (1,550 variables took 3.5 s; the 152,489-variable taxi instance did not finish in 442 s).
MODEL3_QP_MAX_VARIABLES = 20_000


def solve_qp(cost: np.ndarray, a: sp.spmatrix, row_lower: np.ndarray, row_upper: np.ndarray,
             col_lower: np.ndarray, col_upper: np.ndarray, hessian_diag: np.ndarray, label: str) -> np.ndarray:
    """The optimal x of min c'x + 1/2 sum_i q_i x_i^2 s.t. row and column bounds (HiGHS's QP solver).

    Raises
    ------
    SolverError
        HiGHS refused the model or did not reach an optimum (the models here are always feasible).
    """
    import highspy

    n = int(cost.size)
    csc = sp.csc_matrix(a)
    lp = highspy.HighsLp()
    lp.num_col_ = n
    lp.num_row_ = int(csc.shape[0])
    lp.col_cost_ = np.asarray(cost, dtype=np.float64)
    lp.col_lower_ = np.asarray(col_lower, dtype=np.float64)
    lp.col_upper_ = np.asarray(col_upper, dtype=np.float64)
    lp.row_lower_ = np.asarray(row_lower, dtype=np.float64)
    lp.row_upper_ = np.asarray(row_upper, dtype=np.float64)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = csc.indptr.astype(np.int32)
    lp.a_matrix_.index_ = csc.indices.astype(np.int32)
    lp.a_matrix_.value_ = np.asarray(csc.data, dtype=np.float64)
    lp.a_matrix_.num_col_ = n
    lp.a_matrix_.num_row_ = int(csc.shape[0])
    model = highspy.HighsModel()
    model.lp_ = lp
    hess = highspy.HighsHessian()
    hess.dim_ = n
    hess.format_ = highspy.HessianFormat.kTriangular
    hess.start_ = np.arange(n + 1, dtype=np.int32)
    hess.index_ = np.arange(n, dtype=np.int32)
    hess.value_ = np.asarray(hessian_diag, dtype=np.float64)
    model.hessian_ = hess
    h = new_highs(None)
    if h.passModel(model) == highspy.HighsStatus.kError:
        raise SolverError(f"HiGHS refused the {label} ({lp.num_row_} rows, {n} columns)")
    run = h.run()
    model_status = h.getModelStatus()
    text = h.modelStatusToString(model_status)
    if run == highspy.HighsStatus.kError or model_status != highspy.HighsModelStatus.kOptimal:
        raise SolverError(f"HiGHS did not reach an optimum of the {label}: run status {run}, model status {text!r}")
    return np.array(h.getSolution().col_value, dtype=np.float64)


def model1_relaxation(hier: Hierarchy, y: np.ndarray, total: int) -> tuple[np.ndarray, float]:
    """Continuous Model 1 (H1-H3) by HiGHS QP: (x, objective)."""
    yf = np.asarray(y, dtype=np.float64)
    n_sizes = yf.shape[1]
    cons = consistency_rows(hier, n_sizes)
    root = sp.csr_matrix((np.ones(n_sizes), (np.zeros(n_sizes, dtype=np.int64), np.arange(n_sizes))), shape=(1, yf.size))
    a = sp.vstack([cons, root]).tocsr()
    lo = np.concatenate([np.zeros(cons.shape[0]), [float(total)]])
    hi = lo.copy()
    nv = yf.size
    x = solve_qp(-2.0 * yf.ravel(), a, lo, hi, np.zeros(nv), np.full(nv, float(total)), np.full(nv, 2.0),
                 "model").reshape(yf.shape)
    return x, float(np.sum((x - yf) ** 2))


def model1_relaxation_tree(hier: Hierarchy, y: np.ndarray, total: int) -> np.ndarray:
    """Exact solution of the continuous Model 1 (H1-H3) by a tree algorithm.

    For every node r and size s let g_r(mu) = argmin_{v >= 0} C_r(v) - mu v, the inverse of
    the derivative of r's subtree cost; it is non-decreasing piecewise linear and is kept as
    a sum of hinges sum_k w_k (mu - b_k)_+. A leaf has one hinge (w = 1/2 at b = -2y). For an
    internal node the children's common multiplier nu gives S(nu) = sum_c g_c(nu) (the union
    of the hinges) and mu(nu) = nu + 2(S(nu) - y_r); since mu(nu) is increasing, g_r has its
    breakpoints at mu(nu_j) with values S(nu_j) and slopes sigma / (1 + 2 sigma). The root
    multiplier solves sum_s g_root,s(mu) = G, and each parent value is split by inverting S.
    """
    yf = np.asarray(y, dtype=np.float64)
    hinge_b, hinge_w, store = _hinges(hier, yf)
    n_regions, n_sizes = yf.shape
    x = np.zeros_like(yf)
    # root: sum over sizes of g_root,s(mu) = G
    b = hinge_b[0].ravel()
    w = hinge_w[0].ravel()
    order = np.argsort(b, kind="stable")
    bs, ws = b[order], w[order]
    slope = np.cumsum(ws)
    val = bs * slope - np.cumsum(ws * bs)
    if total > 0:
        j = int(np.searchsorted(val, total, side="right")) - 1
        j = max(j, 0)
        mu_star = bs[j] + (total - val[j]) / slope[j]
        x[0] = np.maximum(0.0, (hinge_w[0] * np.maximum(0.0, mu_star - hinge_b[0])).sum(axis=1))
    for r in range(n_regions):
        kids = list(hier.children[r])
        if not kids:
            continue
        nu, s_val, slope = store[r]
        v = x[r]
        j = np.array([int(np.searchsorted(s_val[i], v[i], side="right")) - 1 for i in range(n_sizes)])
        j = np.clip(j, 0, nu.shape[1] - 1)
        rows = np.arange(n_sizes)
        nu_star = nu[rows, j] + (v - s_val[rows, j]) / slope[rows, j]
        for c in kids:
            gc = (hinge_w[c] * np.maximum(0.0, nu_star[:, None] - hinge_b[c])).sum(axis=1)
            x[c] = np.where(v > 0, gc, 0.0)
    return x


def _hinges(hier: Hierarchy, yf: np.ndarray) -> tuple[dict, dict, dict]:
    """Bottom-up: each node's hinges (breakpoints b, weights w) and, for internal nodes, S at the
    children's sorted breakpoints (nu, S(nu), slope), for :func:`model1_relaxation_tree`."""
    n_regions, n_sizes = yf.shape
    hinge_b: dict[int, np.ndarray] = {}
    hinge_w: dict[int, np.ndarray] = {}
    store: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for r in reversed(range(n_regions)):
        kids = list(hier.children[r])
        if not kids:
            hinge_b[r] = (-2.0 * yf[r])[:, None]
            hinge_w[r] = np.full((n_sizes, 1), 0.5)
            continue
        b = np.concatenate([hinge_b[c] for c in kids], axis=1)
        w = np.concatenate([hinge_w[c] for c in kids], axis=1)
        order = np.argsort(b, axis=1, kind="stable")
        nu = np.take_along_axis(b, order, axis=1)
        ws = np.take_along_axis(w, order, axis=1)
        slope = np.cumsum(ws, axis=1)  # slope of S right of nu_j
        moment = np.cumsum(ws * nu, axis=1)
        s_val = nu * slope - moment  # S(nu_j)
        store[r] = (nu, s_val, slope)
        mu = nu + 2.0 * (s_val - yf[r][:, None])
        g_slope = slope / (1.0 + 2.0 * slope)
        hinge_b[r] = mu
        hinge_w[r] = np.diff(g_slope, axis=1, prepend=0.0)
    return hinge_b, hinge_w, store


def model3_relaxation(hier: Hierarchy, noisy_cum: np.ndarray, total: int, *,
                      max_variables: int = MODEL3_QP_MAX_VARIABLES) -> tuple[np.ndarray, float]:
    """Continuous projection onto Model 3's feasible set (M_c^r) by HiGHS QP: (c, objective).

    Raises
    ------
    ResourceError
        More than ``max_variables`` cells (HiGHS's active-set QP does not finish at that size).
    """
    y = np.asarray(noisy_cum, dtype=np.float64)
    n_sizes = y.shape[1]
    if y.size > max_variables:
        raise ResourceError(f"the Model 3 relaxation has {y.size:,} variables; HiGHS's QP solver is used here up to "
                            f"{max_variables:,} (use the projections of model3_relaxation_dykstra or "
                            f"model3_relaxation_accelerated)")
    a, lo, hi = model3_constraints(hier, n_sizes)
    nv = y.size
    col_lo = np.zeros(nv)
    col_hi = np.full(nv, float(total))
    col_lo[0] = col_hi[0] = float(total)  # C6: root, size 1
    c = solve_qp(-2.0 * y.ravel(), a, lo, hi, col_lo, col_hi, np.full(nv, 2.0), "model").reshape(y.shape)
    return c, float(np.sum((c - y) ** 2))


def project_consistent(hier: Hierarchy, z: np.ndarray, total: int) -> np.ndarray:
    """Euclidean projection onto C6 + C7 (per size: tree least squares; size 1 root = G)."""
    out = least_squares_consistent(hier, z, None)
    out[:, :1] = least_squares_consistent(hier, z[:, :1], total)
    return out


def project_monotone(z: np.ndarray) -> np.ndarray:
    """Euclidean projection onto C8 + C9 (per region: non-increasing isotonic fit, clipped at 0)."""
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
    Past ``deadline`` (``time.perf_counter`` clock) it raises TimeLimitReached.
    """
    if total < 0:
        raise ResourceError("negative total")
    y = np.asarray(noisy_cum, dtype=np.float64)
    x = y.copy()
    p = np.zeros_like(x)
    q = np.zeros_like(x)
    residual = np.inf
    it = 0
    for it in range(1, max_iter + 1):
        a = project_consistent(hier, x + p, total)
        p = x + p - a
        x = project_monotone(a + q)
        q = a + q - x
        residual = float(np.abs(a - x).max())
        if residual <= tol:
            break
        if deadline is not None and time.perf_counter() >= deadline:
            raise TimeLimitReached(f"during the continuous projection (Dykstra, {it} iterations, residual "
                                   f"{residual:.3g})")
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
    Dykstra iteration does, and far fewer are needed (census N = 1,000, to a max-norm residual
    of 0.05: 22 iterations against Dykstra's 64 at eps = 1, 107 against about 550 at eps = 0.1).
    Stops when ``x`` (in B) is within ``tol`` (max norm) of its projection onto A.
    Returns (x, residual, iterations). Past ``deadline`` (``time.perf_counter`` clock) it raises
    TimeLimitReached.
    """
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
        x = project_monotone(w)
        step = x - project_consistent(hier, x, total)
        residual = float(np.abs(step).max())
        if residual <= tol:
            break
        if deadline is not None and time.perf_counter() >= deadline:
            raise TimeLimitReached(f"during the continuous projection ({it} iterations, residual {residual:.3g})")
        z_new = w - step
        if float(np.vdot(step, z_new - z)) > 0:  # the momentum points uphill: restart it
            t = 1.0
        t_new = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * t * t))
        w = z_new + ((t - 1.0) / t_new) * (z_new - z)
        z, t = z_new, t_new
    return x, residual, it
