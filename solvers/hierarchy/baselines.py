"""Baselines: the relaxed QPs M_H^r / M_c^r (rounded) and the Census TopDown scheme.

M_H^r and M_c^r (Fioretto, Van Hentenryck, Zhu, AIJ 2021) solve the continuous relaxations of
Model 1 and Model 3 with HiGHS's QP solver and round each value to the nearest integer;
rounding can break consistency (and M_c^r can produce inconsistent counts), which the
report counts.

TopDown (Abowd et al., "The 2020 Census Disclosure Avoidance System TopDown Algorithm",
HDSR 2022), two levels at a time: the root's noisy histogram is projected onto
{x >= 0, sum_s x_s = G} (least squares) and rounded keeping the sum; then, for each parent
with its integer counts fixed, the children's noisy counts are projected, size by size, onto
{x >= 0, sum_children x = parent count} and rounded keeping the parent sums (largest
remainders). For these constraint sets the least-squares step is an exact Euclidean
projection onto a scaled simplex (Held, Wolfe, Crowder 1974; Duchi et al. 2008) and the
rounding step (floor, then +1 to the largest fractional parts) is the closest integer point
keeping the sums, so both steps are solved exactly in closed form.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from securelp.solvers.hierarchy.cumulative import consistency_rows, from_cumulative, model3_relaxation
from securelp.solvers.hierarchy.model import Hierarchy
from securelp.solvers.hierarchy.qp import solve_highs


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
    out = solve_highs(-2.0 * yf.ravel(), a, lo, hi, np.zeros(nv), np.full(nv, float(total)), hessian_diag=np.full(nv, 2.0))
    x = out.x.reshape(yf.shape)
    return x, float(np.sum((x - yf) ** 2))


def hqp(hier: Hierarchy, y: np.ndarray, total: int) -> tuple[np.ndarray, str]:
    """M_H^r: the relaxed Model 1 QP, rounded to the nearest integers; returns (counts, backend).

    HiGHS's QP solver for models up to ``HIGHS_QP_MAX_VARIABLES`` variables whose values stay within
    ``HIGHS_QP_MAX_SCALE``, the exact tree algorithm (``model1_relaxation_tree``, tested equal to
    HiGHS) otherwise.
    """
    scale = max(float(np.max(np.abs(y))) if np.asarray(y).size else 0.0, float(total))
    if np.asarray(y).size <= HIGHS_QP_MAX_VARIABLES and scale <= HIGHS_QP_MAX_SCALE:
        x, _ = model1_relaxation(hier, y, total)
        backend = "highs-qp"
    else:
        x = model1_relaxation_tree(hier, y, total)
        backend = "tree"
    return np.rint(x).astype(np.int64), backend


def cqp(hier: Hierarchy, noisy_cum: np.ndarray, total: int) -> tuple[np.ndarray, np.ndarray, dict[str, object]]:
    """M_c^r: the relaxed Model 3 QP, rounded; returns (rounded cumulative, counts, details).

    HiGHS's QP solver up to ``cumulative.MAX_QP_VARIABLES`` cells; above, up to
    ``MAX_DYKSTRA_CELLS``, Dykstra's alternating projections to a max-norm residual of 1e-3
    (reported); larger models are refused with a ResourceError.
    """
    from securelp.solvers.errors import ResourceError
    from securelp.solvers.hierarchy import cumulative as cu

    size = np.asarray(noisy_cum).size
    if size <= cu.MAX_QP_VARIABLES:
        c, _ = model3_relaxation(hier, noisy_cum, total)
        details: dict[str, object] = {"qp_backend": "highs-qp"}
    elif size <= cu.MAX_DYKSTRA_CELLS:
        c, residual, iters = cu.model3_relaxation_dykstra(hier, noisy_cum, total)
        details = {"qp_backend": "dykstra", "relaxation_residual": residual, "relaxation_iterations": iters}
    else:
        raise ResourceError(
            f"cqp: the Model 3 relaxation has {size:,} cells; HiGHS's QP is used up to {cu.MAX_QP_VARIABLES:,} "
            f"and Dykstra's projections up to {cu.MAX_DYKSTRA_CELLS:,}"
        )
    cum = np.rint(c).astype(np.int64)
    return cum, from_cumulative(cum), details


def project_simplex_columns(v: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """Column-wise Euclidean projection of v (k x m) onto {x >= 0, sum_rows x = totals[j]}."""
    v = np.asarray(v, dtype=np.float64)
    k = v.shape[0]
    u = -np.sort(-v, axis=0)
    css = np.cumsum(u, axis=0) - totals[None, :]
    ind = np.arange(1, k + 1, dtype=np.float64)[:, None]
    cond = (u - css / ind) > 0
    rho = k - 1 - np.argmax(cond[::-1], axis=0)
    theta = css[rho, np.arange(v.shape[1])] / (rho + 1.0)
    x = np.maximum(v - theta[None, :], 0.0)
    x[:, totals <= 0] = 0.0
    return x


def round_keep_sums(x: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """Column-wise: floor, then +1 to the largest fractional parts until each column sums to totals[j]."""
    fl = np.floor(x + 1e-12)
    rem = (totals - fl.sum(axis=0)).astype(np.int64)
    frac = x - fl
    order = np.argsort(-frac, axis=0, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(x.shape[0])[:, None].repeat(x.shape[1], axis=1), axis=0)
    out = fl.astype(np.int64) + (rank < rem[None, :]).astype(np.int64)
    return out


def topdown(hier: Hierarchy, y: np.ndarray, total: int) -> np.ndarray:
    """Census TopDown (least squares then sum-preserving rounding, two levels at a time)."""
    yf = np.asarray(y, dtype=np.float64)
    x = np.zeros(yf.shape, dtype=np.int64)
    root = project_simplex_columns(yf[0][:, None], np.array([float(total)]))
    x[0] = round_keep_sums(root, np.array([total]))[:, 0]
    for r in hier.internal:
        kids = list(hier.children[r])
        parent = x[r].astype(np.float64)
        proj = project_simplex_columns(yf[kids], parent)
        x[kids] = round_keep_sums(proj, x[r])
    return x


#: Above this many variables the relaxed Model 1 QP uses the exact tree algorithm instead of
#: HiGHS's active-set QP (measured: 1,550 variables took 3.5 s; the 152,489-variable Kuo taxi
#: QP ended with "Solve error" after 442 s).
HIGHS_QP_MAX_VARIABLES = 2000
#: ... and values (noisy counts, G) up to this size: HiGHS's QP, at tolerances near 1e-7 relative,
#: would move counts of 2**20 by about 0.1, and on values near 1e15 it ran for more than 15 minutes
#: (5 of 40 random 3-region hierarchies at G = 1e15 past 20 s, stop 47); the tree algorithm solved
#: each in under 1 ms, within 1.2e-8 of G of HiGHS on the same problem scaled down
HIGHS_QP_MAX_SCALE = 2.0**20


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
