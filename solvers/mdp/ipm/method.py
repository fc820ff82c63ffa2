"""A structured primal-dual interior-point method for one component's PMO on a set of outputs.

The component LP (records ``1..m``, outputs ``1..K``; ``A`` the ``E x m`` mDP rows of one output
column, row ``(i, j)`` being ``z_i - exp(eps d_ij) z_j``; Qiu Eq. 5-6 restricted to the component)::

    min  sum_k g_k' z_k   s.t.  A z_k + s_k = 0,  sum_k z_k = 1,  z_k >= 0,  s_k >= 0

and its dual ``max 1'mu  s.t.  g_k + A'y_k - mu = w_k >= 0,  y_k >= 0``.

The mDP rows couple records only within one output column and the unit rows only record by
record, so the Newton system of a primal-dual method splits: with ``Theta_k = y_k / s_k`` and
``D_k = w_k / z_k``, each output has its own ``m x m`` matrix ``H_k = A' Theta_k A + D_k``
(symmetric positive definite, the mDP graph's pattern plus the diagonal), and the unit-row
step solves ``(sum_k H_k^-1) dmu = r``, an ``m x m`` system (:mod:`~securelp.solvers.mdp.ipm.newton`).
One iteration costs one inverse per output (``m^3`` flops densely, a fraction of that through a
nested dissection of the mDP graph, :mod:`~securelp.solvers.mdp.ipm.dissection`) instead of a
factorisation of the whole LP's ``(m + E) K``-row normal equations, which is what a general IPM
would face. The outputs are spread over threads, and the iterate is kept with one column per output
(records x outputs, mDP rows x outputs) so that the products with ``A`` and ``A'`` need no
transposed copies.

Mehrotra's predictor-corrector with up to ``correctors`` Gondzio centrality correctors
(:class:`~securelp.solvers.mdp.ipm.options.IPMOptions`). Nothing the method returns is trusted: the
caller gets ``Y`` clipped at 0, whose certificate ``Q = G + A'Y`` gives the valid bound
``sum_i min_k Q_ik`` (:mod:`securelp.solvers.mdp.columns.bounds`), and a primal iterate that the
caller repairs and verifies.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

from securelp.solvers.errors import InputError
from securelp.solvers.mdp.ipm import lapack as lapack_nogil
from securelp.solvers.mdp.ipm.dissection import dissection
from securelp.solvers.mdp.ipm.inverses import Inverses
from securelp.solvers.mdp.ipm.newton import NewtonSystem, dot, gondzio
from securelp.solvers.mdp.ipm.options import IPMOptions
from securelp.solvers.mdp.rowops import RowOps, edge_structure

__all__ = ["BYTES_PER_ENTRY", "BYTES_PER_ROW_OUTPUT", "IPMResult", "memory_needed", "structured_ipm"]

logger = logging.getLogger(__name__)

#: bytes of memory per output and per squared record (the inverse ``H_k^-1`` kept per output, the
#: factorisation's work array and the certificate)
BYTES_PER_ENTRY = 8
#: bytes per output and per mDP row: the iterate, its directions and residuals, the best
#: multipliers and their copies (about 22 float64 arrays of mDP rows x outputs, measured); on a
#: complete mDP graph (``E = m (m - 1)``) they, not the inverses, are what does not fit
BYTES_PER_ROW_OUTPUT = 180


@dataclass
class IPMResult:
    """What :func:`structured_ipm` returns (component records x outputs given).

    ``Z``: the last primal iterate (feasible up to rounding; repair before use). ``mu``, ``Y``: the
    unit-row duals and the mDP-row multipliers (``E x K``, clipped at 0) of the iterate whose
    certificate gave the best bound; ``bound`` = ``sum_i min_k (G + A'Y)_ik``, a valid lower bound
    on the LP over these outputs; ``primal`` = ``sum G * Z``. ``status``: ``optimal`` (relative
    distance of the two below ``tolerance``), ``stalled`` (``options.stall_iterations``),
    ``time_limit``, ``iteration_limit``, ``probed`` (see :func:`structured_ipm`) or ``numerical``
    (a factorisation failed even with regularisation; the best iterate so far is returned).
    ``pruned``: the outputs (indices into the columns of ``G``) that left the restricted LP on the
    way (``prune_below``); ``bound`` and ``primal`` are the LP's over the others, and the pruned
    outputs' columns of ``Y`` (frozen when they left) certify nothing about them at ``mu``: the
    caller prices them like any output outside the LP.
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
    pruned: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


def memory_needed(m: int, K: int, E: int = 0) -> int:
    """Bytes the method needs for ``m`` records, ``E`` mDP rows and ``K`` outputs: the ``K`` inverses
    and the iterates over the mDP rows (:data:`BYTES_PER_ROW_OUTPUT`)."""
    return BYTES_PER_ENTRY * K * m * m + 64 * K * m + BYTES_PER_ROW_OUTPUT * K * E


def structured_ipm(G: np.ndarray, A: sp.csr_matrix, deadline: float, *, tolerance: float = 1e-8,
                   max_iterations: int = 200, probe_gap: float = 0.0,
                   probe: Callable[[np.ndarray, np.ndarray], bool] | None = None, threads: int = 1,
                   on_iteration: Callable[[int, float, float], None] | None = None, prune_below: float = 0.0,
                   prune_gap: float = 0.0, options: IPMOptions | None = None) -> IPMResult:
    """Solve the component LP over the outputs ``G`` (records x outputs, prior-weighted loss) by
    the structured interior-point method of the module docstring, until the relative distance of
    the primal objective and the certified bound is at most ``tolerance``, ``deadline``
    (``time.perf_counter()`` seconds; an iteration is not begun when the last one's time would
    pass it) or ``max_iterations``.

    ``probe``: called once, with the unit-row duals of the best bound so far and the outputs still
    in the restricted LP (indices into the columns of ``G``, ascending; see ``prune_below``), when
    that distance first falls to ``probe_gap``; when it returns True the method stops there (status
    ``probed``).

    ``prune_below``: once that distance is at most ``prune_gap`` (relative), an output whose entries
    in the primal iterate are all below ``prune_below`` and which is no record's largest leaves the
    restricted LP (its multipliers frozen, reported in ``pruned``): an output the optimum does not
    use, kept to the end, costs an inverse at every iteration. One the optimum needs after all is
    found violated by the caller's pricing, like any output outside the LP. 0: never.

    ``on_iteration``: called at every iteration with its number, the primal objective and the best
    certified bound so far (for a progress line).

    ``threads``: the per-output inverses and products are spread over this many threads, each
    running BLAS on one thread (numpy's and scipy's own OpenBLAS pools, left to themselves, fight
    for the cores).

    Raises
    ------
    InputError
        ``A`` is not ``E x m`` mDP rows of the form ``z_i - a z_j`` with ``a > 0``.
    """
    options = options or IPMOptions()
    threads = max(1, int(threads))
    with threadpool_limits(limits=1, user_api="blas"):
        if threads == 1:
            run = _Run(G, A, None, 1, options)
            return run.iterate(deadline, tolerance, max_iterations, probe_gap, probe, on_iteration, prune_below,
                               prune_gap)
        with ThreadPoolExecutor(max_workers=threads) as pool:
            run = _Run(G, A, pool, threads, options)
            return run.iterate(deadline, tolerance, max_iterations, probe_gap, probe, on_iteration, prune_below,
                               prune_gap)


def _live(K: int, pruned: list[np.ndarray]) -> np.ndarray:
    """The outputs of ``K`` still in the restricted LP: all but the pruned ones (the dead stay, their
    frozen certificates being part of the LP's bound)."""
    out = np.ones(K, dtype=bool)
    for p in pruned:
        out[p] = False
    return np.flatnonzero(out)


class _Run:
    """One :func:`structured_ipm` call: the records reordered by a dissection, the linear maps of the
    ``H_k``, the iterate and the best certificate so far (BLAS limited by the caller)."""

    def __init__(self, G: np.ndarray, A: sp.csr_matrix, pool: ThreadPoolExecutor | None, threads: int,
                 options: IPMOptions) -> None:
        self.t0 = time.perf_counter()
        self.options = options
        G = np.asarray(G, dtype=float)
        m, K = G.shape
        A = sp.csr_matrix(A)
        E = A.shape[0]
        if A.shape[1] != m:
            raise InputError(f"the mDP rows have {A.shape[1]} columns for {m} records", parameter="A")
        self.m, self.E = m, E
        src, tgt, a = edge_structure(A)
        # records reordered once (part 1, part 2, separator) when a dissection makes the inverses cheaper
        plan = dissection(A, options.dissect_min_records, options.dissect_max_cost)
        self.order = np.arange(m) if plan is None else plan.perm
        if plan is not None:
            logger.info("structured IPM: %d records dissected into %d + %d + a separator of %d (inverses at about "
                        "%.2f of the dense flops)", m, plan.p1, plan.p2, plan.s, plan.flops() / float(m) ** 3)
        rank = np.empty(m, dtype=np.int64)
        rank[self.order] = np.arange(m)  # record i's position in the new order
        G = G[self.order]
        A = sp.csr_matrix(A[:, self.order])
        src, tgt = rank[src], rank[tgt]
        self.ops = RowOps(A, A.T.tocsr(), pool, threads)
        self._linear_maps(src, tgt, a)
        self.scale = 1.0 / max(float(np.abs(G).max()), 1e-300)
        self.g = G * self.scale  # records x outputs, entries in [0, 1]
        self._start(K)
        self.Hinv = Inverses(K, m, plan, pool, threads)
        logger.debug("structured IPM: %d outputs, %.0f MB of inverses (%.2f of the dense ones)", K,
                     8e-6 * K * self.Hinv.storage_per_output(), self.Hinv.storage_per_output() / float(m) ** 2)

    def _linear_maps(self, src: np.ndarray, tgt: np.ndarray, a: np.ndarray) -> None:
        """``H_k = A' diag(theta_k) A + diag(d_k)``: its diagonal and its lower off-diagonal entries are
        linear in ``theta_k``, precomputed as sparse maps (``Pdiag``, ``Poff`` at the flat positions
        ``uflat``, mirrored at ``uflat_t``)."""
        m, E = self.m, self.E
        rows_e = np.arange(E)
        self.Pdiag = (sp.csr_matrix((np.ones(E), (rows_e, src)), shape=(E, m))
                      + sp.csr_matrix((a * a, (rows_e, tgt)), shape=(E, m))).T.tocsr()  # m x E
        flat = np.maximum(src, tgt) * m + np.minimum(src, tgt)
        self.uflat, inv = np.unique(flat, return_inverse=True)
        self.uflat_t = (self.uflat % m) * m + self.uflat // m  # the same entries in the upper triangle
        self.Poff = sp.csr_matrix((-a, (inv, rows_e)), shape=(self.uflat.size, E))

    def _start(self, K: int) -> None:
        """The uniform mechanism (strictly inside the cone: ``a > 1``), all complementarity products equal."""
        ops, g, m, E = self.ops, self.g, self.m, self.E
        self.z = np.full((m, K), 1.0 / K)
        self.s = np.maximum(-ops.A_all(self.z), 1e-3 / K)
        nu0 = 10.0 * float(g.mean()) / K
        self.y = nu0 / self.s
        self.w = nu0 / self.z
        self.mu = (g + ops.AT_all(self.y) - self.w).min(axis=1)
        self.n_comp = K * (m + E)
        # the best bound, its mu, its multipliers of the outputs then alive and those outputs
        self.best = (-np.inf, self.mu.copy(), self.y.copy(), np.arange(K))
        self.alive = np.arange(K)
        self.frozen_min = np.full(m, np.inf)  # row minima of the dropped outputs' certificates
        self.pruned: list[np.ndarray] = []  # outputs that left the restricted LP (prune_below)
        self.Y_all = np.zeros((E, K))  # multipliers of every output (dropped ones frozen)
        self.Z_all = np.zeros((m, K))

    def iterate(self, deadline: float, tolerance: float, max_iterations: int, probe_gap: float,
                probe: Callable[[np.ndarray, np.ndarray], bool] | None,
                on_iteration: Callable[[int, float, float], None] | None, prune_below: float,
                prune_gap: float) -> IPMResult:
        """The iterations (see :func:`structured_ipm`)."""
        history: list[tuple[float, float, float]] = []
        status = "iteration_limit"
        last = 0.0
        gaps: list[float] = []
        done = 0  # Newton steps taken
        pobj = 0.0
        for it in range(max_iterations + 1):
            ti = time.perf_counter()
            pobj, ATy, Q = self._certify()
            pobj, ATy = self._drop(it, pobj, ATy, Q, prune_below, prune_gap)
            best = self.best[0]
            history.append((pobj / self.scale, best / self.scale, ti - self.t0))
            if on_iteration is not None:
                on_iteration(it, pobj / self.scale, best / self.scale)
            logger.debug("structured IPM iteration %d: primal %.10g, bound %.10g, %d outputs, %.1f s", it,
                         pobj / self.scale, best / self.scale, self.alive.size, ti - self.t0)
            rp = self.ops.A_all(self.z)
            rp += self.s
            np.negative(rp, out=rp)
            ru = 1.0 - self.z.sum(axis=1)
            if pobj - best <= tolerance * abs(pobj) and float(np.abs(ru).max()) <= 1e-9:
                status = "optimal"
                break
            if probe is not None and pobj - best <= probe_gap * abs(pobj):
                mu_b = np.empty(self.m)
                mu_b[self.order] = self.best[1]
                stop = probe(mu_b / self.scale, _live(self.Y_all.shape[1], self.pruned))
                probe = None
                if stop:
                    status = "probed"
                    break
            gaps.append(pobj - best)
            stall = self.options.stall_iterations
            if len(gaps) > stall and gaps[-1] > 0.9 * gaps[-1 - stall]:
                status = "stalled"
                break
            if done >= max_iterations:
                break
            if ti + last > deadline:
                status = "time_limit"
                break
            if not self._step(it, rp, ru, ATy):
                status = "numerical"
                break
            done += 1
            last = time.perf_counter() - ti
        return self._result(pobj, done, status, history)

    def _certify(self) -> tuple[float, np.ndarray, np.ndarray]:
        """The primal objective, ``A'y`` and the certificate ``Q = g + A'y`` of the iterate (``y`` stays
        > 0, as the steps stop short of the boundary; clipped all the same, as a certificate needs), and
        the best bound so far updated."""
        pobj = dot(self.g, self.z)
        ATy = self.ops.AT_all(self.y)
        Q = self.g + (ATy if self.y.min() >= 0 else self.ops.AT_all(np.maximum(self.y, 0.0)))
        bound = float(np.minimum(Q.min(axis=1), self.frozen_min).sum())
        if bound > self.best[0]:
            self.best = (bound, self.mu.copy(), self.y.copy(), self.alive.copy())
        return pobj, ATy, Q

    def _drop(self, it: int, pobj: float, ATy: np.ndarray, Q: np.ndarray, prune_below: float, prune_gap: float
              ) -> tuple[float, np.ndarray]:
        """Outputs whose entries are all below ``options.drop_below`` (dead: they keep certifying their
        rows) or, once the gap is ``prune_gap``, below ``prune_below`` and no record's largest (idle: they
        leave the LP) leave the iteration; returns the primal objective and ``A'y`` over those left."""
        z, K = self.z, self.alive.size
        zmax = z.max(axis=0)
        dead = zmax < self.options.drop_below
        idle = np.zeros(K, dtype=bool)
        if prune_below > 0 and pobj - self.best[0] <= prune_gap * abs(pobj):
            idle = (zmax < prune_below) & ~dead
            idle[z.argmax(axis=1)] = False
        if not ((np.any(dead) or np.any(idle)) and not np.all(dead | idle)):
            return pobj, ATy
        self.frozen_min = np.minimum(self.frozen_min, Q[:, dead].min(axis=1, initial=np.inf))
        self.Y_all[:, self.alive[dead | idle]] = np.maximum(self.y[:, dead | idle], 0.0)
        keep = ~(dead | idle)
        if np.any(idle):
            self.pruned.append(self.alive[idle])
            logger.debug("structured IPM iteration %d: %d idle outputs leave the LP", it, int(idle.sum()))
            # each idle column moves, with its slacks, onto the kept output that takes it at the least
            # cost: a sum of points of the cone is one, so the iterate stays primal feasible (mDP rows
            # and unit rows), where dropping the mass would leave the unit rows short by it
            gone, stay = np.flatnonzero(idle), np.flatnonzero(keep)
            to = stay[np.argmin(self.g[:, stay].T @ z[:, gone], axis=0)]
            np.add.at(z.T, to, z[:, gone].T)
            np.add.at(self.s.T, to, self.s[:, gone].T)
        self.alive = self.alive[keep]
        self.z, self.s, self.y, self.w, self.g, ATy = (np.ascontiguousarray(v[:, keep])
                                                       for v in (self.z, self.s, self.y, self.w, self.g, ATy))
        K = self.alive.size
        self.n_comp = K * (self.m + self.E)
        self.Hinv.keep(K)
        return dot(self.g, self.z), ATy

    def _step(self, it: int, rp: np.ndarray, ru: np.ndarray, ATy: np.ndarray) -> bool:
        """One Newton step (Mehrotra's predictor-corrector and Gondzio's correctors); False when a
        factorisation failed."""
        z, s, y, w = self.z, self.s, self.y, self.w
        rd = ATy
        rd += self.g
        rd -= self.mu[:, None]
        rd -= w
        np.negative(rd, out=rd)
        nu = (dot(z, w) + dot(s, y)) / self.n_comp
        theta = y / s
        diag = self.Pdiag @ theta
        diag += w / z  # records x outputs
        off = self.Poff @ theta
        M = self.Hinv.invert(off, diag, self.uflat, self.uflat_t)
        if M is None:
            logger.info("structured IPM: factorisation failed at iteration %d", it)
            return False
        if lapack_nogil.potrf(M) != 0:
            logger.info("structured IPM: unit-row system not positive definite at iteration %d", it)
            return False
        newton = NewtonSystem(self.ops, self.Hinv, M, theta, z, s, y, w, self.options.refinements)
        d, ap, ad, sigma = self._direction(newton, rp, ru, rd, nu)
        dz, ds, dy, dw, dmu = d
        logger.debug("structured IPM step %d: primal %.3f, dual %.3f, sigma %.2g, nu %.3g", it, ap, ad, sigma, nu)
        ap, ad = self.options.step_fraction * ap, self.options.step_fraction * ad
        z += ap * dz
        s += ap * ds
        y += ad * dy
        w += ad * dw
        self.mu += ad * dmu
        return True

    def _direction(self, newton: NewtonSystem, rp: np.ndarray, ru: np.ndarray, rd: np.ndarray, nu: float
                   ) -> tuple[tuple[np.ndarray, ...], float, float, float]:
        """The predictor (affine scaling), Mehrotra's centring and second-order corrector, then Gondzio's
        correctors while they lengthen the steps; the direction, its primal and dual steps and sigma."""
        z, s, y, w = self.z, self.s, self.y, self.w
        solve, steps = newton.solve, newton.steps
        d = solve(rp, ru, rd, -z * w, -s * y)
        ap, ad = steps(d)
        dz, ds, dy, dw, _ = d
        # the mean complementarity product after the step, expanded (no temporaries)
        nu_aff = (dot(z, w) + ap * dot(dz, w) + ad * dot(z, dw) + ap * ad * dot(dz, dw)
                  + dot(s, y) + ap * dot(ds, y) + ad * dot(s, dy) + ap * ad * dot(ds, dy)) / self.n_comp
        sigma = min(1.0, (nu_aff / nu) ** 3)
        target = sigma * nu
        rzw_t = target - z * w - dz * dw
        rsy_t = s * y
        rsy_t += ds * dy
        np.subtract(target, rsy_t, out=rsy_t)
        d = solve(rp, ru, rd, rzw_t, rsy_t)
        ap, ad = steps(d)
        for _ in range(self.options.correctors):
            # Gondzio: push the products at a longer trial step back into [0.1, 10] x the target
            tp, td = min(1.0, 1.5 * ap + 0.1), min(1.0, 1.5 * ad + 0.1)
            dz, ds, dy, dw, _ = d
            cz = gondzio(z, dz, w, dw, tp, td, target)
            cs = gondzio(s, ds, y, dy, tp, td, target)
            c = solve(None, None, None, cz, cs)
            d2 = tuple(u + v for u, v in zip(d, c))
            ap2, ad2 = steps(d2)
            if ap2 + ad2 < 1.01 * (ap + ad):
                break
            d, ap, ad = d2, ap2, ad2
        return d, ap, ad, sigma

    def _result(self, pobj: float, done: int, status: str, history: list[tuple[float, float, float]]) -> IPMResult:
        """The certificate of the best bound (the multipliers then of the outputs then alive, those frozen
        when dropped of the others) and the last primal iterate, in the records' own order."""
        bound, mu_p, y_b, alive_b = self.best
        m, scale = self.m, self.scale
        self.Y_all[:, alive_b] = np.maximum(y_b, 0.0)
        self.Z_all[:, self.alive] = self.z
        Z_out = np.empty((m, self.Z_all.shape[1]))
        Z_out[self.order] = np.clip(self.Z_all, 0.0, None)
        mu_b = np.empty(m)
        mu_b[self.order] = mu_p
        return IPMResult(Z=Z_out, mu=mu_b / scale, Y=self.Y_all / scale,
                         bound=bound / scale, primal=pobj / scale, iterations=done, status=status,
                         seconds=time.perf_counter() - self.t0, history=history, alive=int(self.alive.size),
                         pruned=np.sort(np.concatenate(self.pruned)) if self.pruned else np.zeros(0, dtype=np.int64))

