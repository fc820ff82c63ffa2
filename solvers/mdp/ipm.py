"""A structured primal-dual interior-point method for one component's PMO on a set of outputs.

The component LP (records ``1..m``, outputs ``1..K``; ``A`` the ``E x m`` mDP rows of one output
column, row ``(i, j)`` being ``z_i - exp(eps d_ij) z_j``)::

    min  sum_k g_k' z_k   s.t.  A z_k + s_k = 0,  sum_k z_k = 1,  z_k >= 0,  s_k >= 0

and its dual ``max 1'mu  s.t.  g_k + A'y_k - mu = w_k >= 0,  y_k >= 0``.

The mDP rows couple records only within one output column and the unit rows only record by
record, so the Newton system of a primal-dual method splits: with ``Theta_k = y_k / s_k`` and
``D_k = w_k / z_k``, each output has its own ``m x m`` matrix ``H_k = A' Theta_k A + D_k``
(symmetric positive definite, the mDP graph's pattern plus the diagonal), and the unit-row
step solves ``(sum_k H_k^-1) dmu = r``, an ``m x m`` system. One iteration costs one dense
Cholesky factorisation and inverse per output (LAPACK ``potrf``/``potri``, ``m^3`` flops each)
instead of a factorisation of the whole LP's ``(m + E) K``-row normal equations, which is what a
general IPM would face (HiGHS's IPX: 80 iterations and 166 s on gaussian 300's component, where
this takes about 60 iterations and 25 s).

Mehrotra's predictor-corrector with up to three Gondzio centrality correctors; the linear
residuals are kept exact by computing ``ds`` and ``dw`` from the linear equations, and one step
of iterative refinement corrects the complementarity equations (without it the dual residual
grew as the iterates approached the boundary and the bound stalled near 1e-4).

Nothing the method returns is trusted: the caller gets ``Y`` clipped at 0, whose certificate
``Q = G + A'Y`` gives the valid bound ``sum_i min_k Q_ik`` (see :mod:`solvers.mdp.colgen`), and a
primal iterate that the caller repairs and verifies.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.linalg import lapack

from solvers.errors import InputError

logger = logging.getLogger(__name__)

#: Gondzio centrality correctors per iteration (each costs two solves, no factorisation)
CORRECTORS = 3
#: steps of iterative refinement of every Newton direction
REFINEMENTS = 1
#: fraction of the step to the boundary taken
STEP_FRACTION = 0.995
#: stop ("stalled") when the distance of the primal objective and the best bound has not shrunk by
#: a tenth over this many iterations (seen on a 51-record component: the bound stayed 2.7e-7 below
#: the optimum for 180 iterations, the steps having shrunk to nothing)
STALL_ITERATIONS = 15

#: an output whose largest entry falls below this is dropped from the iteration (its last
#: multipliers stay as its certificate; the pricing that follows the start re-examines it)
DROP_BELOW = 1e-7

#: bytes of memory per output and per squared record (the inverse ``H_k^-1`` kept per output, the
#: factorisation's work array and the certificate)
BYTES_PER_ENTRY = 8


@dataclass
class IPMResult:
    """What :func:`structured_ipm` returns (component records x outputs given).

    ``Z``: the last primal iterate (feasible up to rounding; repair before use). ``mu``, ``Y``: the
    unit-row duals and the mDP-row multipliers (``E x K``, clipped at 0) of the iterate whose
    certificate gave the best bound; ``bound`` = ``sum_i min_k (G + A'Y)_ik``, a valid lower bound
    on the LP over these outputs; ``primal`` = ``sum G * Z``. ``status``: ``optimal`` (relative
    distance of the two below ``tolerance``), ``stalled`` (:data:`STALL_ITERATIONS`),
    ``time_limit``, ``iteration_limit``, ``probed`` (see :func:`structured_ipm`) or ``numerical``
    (a factorisation failed even with regularisation; the best iterate so far is returned).
    """

    Z: np.ndarray
    mu: np.ndarray
    Y: np.ndarray
    bound: float
    primal: float
    iterations: int
    status: str
    seconds: float
    history: list[tuple[float, float, float]] = field(default_factory=list)
    alive: int = 0


def _edge_structure(A: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Source, target and factor ``a`` of each mDP row ``z_src - a z_tgt``."""
    coo = A.tocoo()
    E = A.shape[0]
    if coo.nnz != 2 * E:
        raise InputError("every mDP row must have exactly two entries")
    src = np.full(E, -1, dtype=np.int64)
    tgt = np.full(E, -1, dtype=np.int64)
    a = np.zeros(E)
    pos = coo.data > 0
    src[coo.row[pos]] = coo.col[pos]
    tgt[coo.row[~pos]] = coo.col[~pos]
    a[coo.row[~pos]] = -coo.data[~pos]
    if np.any(src < 0) or np.any(tgt < 0) or not np.allclose(coo.data[pos], 1.0):
        raise InputError("every mDP row must read z_i - a z_j with a > 0")
    return src, tgt, a


def memory_needed(m: int, K: int) -> int:
    """Bytes the method needs for ``m`` records and ``K`` outputs (dominated by the ``K`` inverses)."""
    return BYTES_PER_ENTRY * K * m * m + 64 * K * m


class _Newton:
    """One iteration's Newton system, factorised: the per-output inverses ``Hinv``, the unit-row
    Schur complement's Cholesky factor ``Lm``, and the iterate it linearises at."""

    def __init__(self, A: sp.csr_matrix, AT: sp.csr_matrix, Hinv: np.ndarray, Lm: np.ndarray, theta: np.ndarray,
                 z: np.ndarray, s: np.ndarray, y: np.ndarray, w: np.ndarray) -> None:
        self.A, self.AT, self.Hinv, self.Lm, self.theta = A, AT, Hinv, Lm, theta
        self.z, self.s, self.y, self.w = z, s, y, w

    def solve_once(self, rp: np.ndarray, ru: np.ndarray, rd: np.ndarray, rzw: np.ndarray, rsy: np.ndarray
                   ) -> tuple[np.ndarray, ...]:
        """``(dz, ds, dy, dw, dmu)`` for the residuals of the primal rows, unit rows, dual rows and
        the two complementarity blocks; ``ds`` and ``dw`` from the linear equations, so those hold
        to rounding whatever the error of the solve."""
        A, AT, Hinv, theta, z, s = self.A, self.AT, self.Hinv, self.theta, self.z, self.s
        h = rd + (AT @ (theta * rp - rsy / s).T).T + rzw / z
        Hh = np.matmul(Hinv, h[:, :, None])[:, :, 0]
        dmu = lapack.dpotrs(self.Lm, ru - Hh.sum(axis=0), lower=1)[0]
        dz = Hh + Hinv @ dmu
        dy = theta * ((A @ dz.T).T - rp) + rsy / s
        dw = (AT @ dy.T).T - dmu - rd
        ds = rp - (A @ dz.T).T
        return dz, ds, dy, dw, dmu

    def solve(self, rp: np.ndarray, ru: np.ndarray, rd: np.ndarray, rzw: np.ndarray, rsy: np.ndarray
              ) -> tuple[np.ndarray, ...]:
        """:meth:`solve_once` and :data:`REFINEMENTS` steps of refinement of the complementarity equations."""
        z, s, y, w = self.z, self.s, self.y, self.w
        d = self.solve_once(rp, ru, rd, rzw, rsy)
        for _ in range(REFINEMENTS):
            dz, ds, dy, dw, _dmu = d
            c = self.solve_once(np.zeros_like(rp), np.zeros_like(ru), np.zeros_like(rd),
                                rzw - (w * dz + z * dw), rsy - (y * ds + s * dy))
            d = tuple(u + v for u, v in zip(d, c))
        return d

    def steps(self, d: tuple[np.ndarray, ...]) -> tuple[float, float]:
        """The largest primal and dual steps (at most 1) that keep the iterate nonnegative."""
        dz, ds, dy, dw, _ = d
        return (min(_step(self.z, dz), _step(self.s, ds)), min(_step(self.y, dy), _step(self.w, dw)))


def _step(v: np.ndarray, dv: np.ndarray) -> float:
    neg = dv < 0
    return min(1.0, float((-v[neg] / dv[neg]).min())) if np.any(neg) else 1.0


def structured_ipm(G: np.ndarray, A: sp.csr_matrix, deadline: float, *, tolerance: float = 1e-8,
                   max_iterations: int = 200, probe_gap: float = 0.0,
                   probe: Callable[[np.ndarray], bool] | None = None) -> IPMResult:
    """Solve the component LP over the outputs ``G`` (records x outputs, prior-weighted loss) by
    the structured interior-point method of the module docstring, until the relative distance of
    the primal objective and the certified bound is at most ``tolerance``, ``deadline``
    (``time.perf_counter()`` seconds; an iteration is not begun when the last one's time would
    pass it) or ``max_iterations``.

    ``probe``: called once, with the unit-row duals of the best bound so far, when that distance
    first falls to ``probe_gap``; when it returns True the method stops there (status ``probed``).
    The output generation of :mod:`solvers.mdp.colgen` prices the other outputs there, and
    restarts with the violated ones instead of finishing a restricted LP that lacks them."""
    t0 = time.perf_counter()
    G = np.asarray(G, dtype=float)
    m, K = G.shape
    A = sp.csr_matrix(A)
    E = A.shape[0]
    if A.shape[1] != m:
        raise InputError(f"the mDP rows have {A.shape[1]} columns for {m} records")
    src, tgt, a = _edge_structure(A)
    AT = A.T.tocsr()
    # H_k = A' diag(theta_k) A + diag(d_k): its diagonal and its lower off-diagonal entries are
    # linear in theta_k, precomputed as sparse maps
    rows_e = np.arange(E)
    Pdiag = (sp.csr_matrix((np.ones(E), (rows_e, src)), shape=(E, m))
             + sp.csr_matrix((a * a, (rows_e, tgt)), shape=(E, m))).T.tocsr()  # m x E
    flat = np.maximum(src, tgt) * m + np.minimum(src, tgt)
    uflat, inv = np.unique(flat, return_inverse=True)
    Poff = sp.csr_matrix((-a, (inv, rows_e)), shape=(uflat.size, E))
    scale = 1.0 / max(float(np.abs(G).max()), 1e-300)
    g = np.ascontiguousarray((G * scale).T)  # K x m, entries in [0, 1]
    # start: the uniform mechanism (strictly inside the cone: a > 1), all complementarity
    # products equal
    z = np.full((K, m), 1.0 / K)
    s = np.maximum(-(A @ z.T).T, 1e-3 / K)
    nu0 = 10.0 * float(g.mean()) / K
    y = nu0 / s
    w = nu0 / z
    mu = (g + (AT @ y.T).T - w).min(axis=0)
    n_comp = K * (m + E)
    Hinv = np.empty((K, m, m))
    work = np.empty((m, m))
    best = (-np.inf, mu.copy(), np.maximum(y, 0.0))
    history: list[tuple[float, float, float]] = []
    status = "iteration_limit"
    last = 0.0
    alive = np.arange(K)
    gaps: list[float] = []
    done = 0  # Newton steps taken
    frozen_min = np.full(m, np.inf)  # row minima of the dropped outputs' certificates
    Y_all = np.zeros((K, E))  # multipliers of every output (dropped ones frozen)
    Z_all = np.zeros((K, m))
    for it in range(max_iterations + 1):
        ti = time.perf_counter()
        pobj = float((g * z).sum())
        ATy = (AT @ y.T).T
        # y stays > 0 (steps stop short of the boundary); clipped all the same, as a certificate needs
        Q = g + (ATy if y.min() >= 0 else (AT @ np.maximum(y, 0.0).T).T)
        bound = float(np.minimum(Q.min(axis=0), frozen_min).sum())
        if bound > best[0]:
            Y_all[alive] = np.maximum(y, 0.0)
            best = (bound, mu.copy(), Y_all.copy())
        dead = z.max(axis=1) < DROP_BELOW
        if np.any(dead) and not np.all(dead):
            frozen_min = np.minimum(frozen_min, Q[dead].min(axis=0))
            Y_all[alive[dead]] = np.maximum(y[dead], 0.0)
            keep = ~dead
            alive, z, s, y, w, g, ATy = alive[keep], z[keep], s[keep], y[keep], w[keep], g[keep], ATy[keep]
            K = alive.size
            n_comp = K * (m + E)
            Hinv = Hinv[:K]
            pobj = float((g * z).sum())
        history.append((pobj / scale, best[0] / scale, ti - t0))
        logger.debug("structured IPM iteration %d: primal %.10g, bound %.10g, %d outputs, %.1f s", it,
                     pobj / scale, best[0] / scale, K, ti - t0)
        rp = -((A @ z.T).T + s)
        ru = 1.0 - z.sum(axis=0)
        if pobj - best[0] <= tolerance * abs(pobj) and float(np.abs(ru).max()) <= 1e-9:
            status = "optimal"
            break
        if probe is not None and pobj - best[0] <= probe_gap * abs(pobj):
            stop = probe(best[1] / scale)
            probe = None
            if stop:
                status = "probed"
                break
        gaps.append(pobj - best[0])
        if len(gaps) > STALL_ITERATIONS and gaps[-1] > 0.9 * gaps[-1 - STALL_ITERATIONS]:
            status = "stalled"
            break
        if done >= max_iterations:
            break
        if ti + last > deadline:
            status = "time_limit"
            break
        rd = -(g + ATy - mu - w)
        nu = (float((z * w).sum()) + float((s * y).sum())) / n_comp
        theta = y / s
        diag = (Pdiag @ theta.T).T + w / z  # K x m
        off = (Poff @ theta.T).T
        M = np.zeros((m, m))
        failed = False
        for k in range(K):
            for reg in (0.0, 1e-12, 1e-9):
                work.fill(0.0)
                wf = work.reshape(-1)
                wf[uflat] = off[k]
                wf[::m + 1] = diag[k] * (1.0 + reg) + reg * float(diag[k].max())
                c, info = lapack.dpotrf(work, lower=1, overwrite_a=1, clean=0)
                if info == 0:
                    break
            if info != 0:
                failed = True
                break
            hi, info = lapack.dpotri(c, lower=1, overwrite_c=1)
            if info != 0:
                failed = True
                break
            # potri fills the lower triangle; the upper one is still the zeros the matrix was built
            # with, so hi + hi' less its diagonal is the whole inverse (one pass: np.tril's copy and
            # an in-place transposed add cost as much as potri itself at m = 894)
            np.add(hi, hi.T, out=Hinv[k])
            Hinv[k].flat[::m + 1] -= np.diagonal(hi)
            M += Hinv[k]
        if failed:
            status = "numerical"
            logger.info("structured IPM: factorisation failed at iteration %d", it)
            break
        Lm, info = lapack.dpotrf(M, lower=1)
        if info != 0:
            status = "numerical"
            logger.info("structured IPM: unit-row system not positive definite at iteration %d", it)
            break

        newton = _Newton(A, AT, Hinv, Lm, theta, z, s, y, w)
        solve, steps = newton.solve, newton.steps

        # predictor (affine scaling), Mehrotra's centring and second-order corrector
        d = solve(rp, ru, rd, -z * w, -s * y)
        ap, ad = steps(d)
        dz, ds, dy, dw, _ = d
        nu_aff = (float(((z + ap * dz) * (w + ad * dw)).sum()) + float(((s + ap * ds) * (y + ad * dy)).sum())) / n_comp
        sigma = min(1.0, (nu_aff / nu) ** 3)
        target = sigma * nu
        d = solve(rp, ru, rd, target - z * w - dz * dw, target - s * y - ds * dy)
        ap, ad = steps(d)
        zero_p, zero_u, zero_d = np.zeros_like(rp), np.zeros_like(ru), np.zeros_like(rd)
        for _ in range(CORRECTORS):
            # Gondzio: push the products at a longer trial step back into [0.1, 10] x the target
            tp, td = min(1.0, 1.5 * ap + 0.1), min(1.0, 1.5 * ad + 0.1)
            dz, ds, dy, dw, _ = d
            vz = (z + tp * dz) * (w + td * dw)
            vs = (s + tp * ds) * (y + td * dy)
            cz = np.maximum(np.clip(vz, 0.1 * target, 10 * target) - vz, -10 * target)
            cs = np.maximum(np.clip(vs, 0.1 * target, 10 * target) - vs, -10 * target)
            c = solve(zero_p, zero_u, zero_d, cz, cs)
            d2 = tuple(u + v for u, v in zip(d, c))
            ap2, ad2 = steps(d2)
            if ap2 + ad2 < 1.01 * (ap + ad):
                break
            d, ap, ad = d2, ap2, ad2
        dz, ds, dy, dw, dmu = d
        ap, ad = STEP_FRACTION * ap, STEP_FRACTION * ad
        z += ap * dz
        s += ap * ds
        y += ad * dy
        w += ad * dw
        mu += ad * dmu
        done += 1
        last = time.perf_counter() - ti
    bound, mu_b, y_b = best
    Z_all[alive] = z
    return IPMResult(Z=np.clip(Z_all.T, 0.0, None), mu=mu_b / scale, Y=np.ascontiguousarray(y_b.T) / scale,
                     bound=bound / scale, primal=pobj / scale, iterations=done, status=status,
                     seconds=time.perf_counter() - t0, history=history, alive=int(alive.size))
