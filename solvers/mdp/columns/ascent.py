"""The smoothed dual ascent: a first-order method for the bound that relaxes the mDP rows.

It approximates ``max_{Y >= 0} sum_i min_k (G + A'Y)_ik`` (:mod:`~securelp.solvers.mdp.columns.bounds`)
by accelerated projected gradient ascent (FISTA with gradient restarts; Beck and Teboulle 2009) on
the entropy-smoothed objective ``sum_i -beta log sum_k exp(-(G + A'Y)_ik / beta)`` (Nesterov's
smoothing), whose gradient in ``Y`` is ``A P`` with ``P`` the row-wise softmax weights. The step is
adapted by backtracking and ``beta`` is halved whenever the smoothed value gains little next to its
smoothing bias. The iterates are kept in float32 for speed; the returned certificate is recomputed in
float64 from the best ``Y`` seen (which is ``>= 0``), so its bound is valid however inaccurate the
method. It is a bound only: a first-order method does not reach the gaps the column generation
certifies.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import scipy.sparse as sp

from securelp.solvers.mdp.rowops import RowOps, row_blocks
from securelp.solvers.resources import available_memory, memory_shortfall

__all__ = ["ASCENT_BYTES_PER_ROW_OUTPUT", "ascent_too_large", "smoothed_dual_ascent", "softmin"]

logger = logging.getLogger(__name__)

#: the ascent's elementwise work is done by this many chunks of mDP rows on large iterates (a fixed
#: number, so its sums, and with them its iterates, do not depend on the number of threads)
ASCENT_CHUNKS = 16
#: the ascent's bound is recomputed in float64 (and its smoothing judged) every this many iterations
ASCENT_CHECK_EVERY = 20
#: bytes of the ascent per mDP row and output (its float32 iterates, momentum, trial point, gradient
#: and scratch; measured peak)
ASCENT_BYTES_PER_ROW_OUTPUT = 36


def softmin(Q: np.ndarray, beta: float) -> tuple[float, np.ndarray]:
    """``sum_i -beta log sum_k exp(-Q_ik / beta)`` and the row-wise softmax weights (``Q`` is overwritten)."""
    mn = Q.min(axis=1, keepdims=True)
    Q -= mn
    Q *= Q.dtype.type(-1.0 / beta)
    np.exp(Q, out=Q)
    s = Q.sum(axis=1, keepdims=True)
    Q /= s
    return float((mn[:, 0] - beta * np.log(s[:, 0])).sum()), Q


def smoothed_dual_ascent(G: np.ndarray, A: sp.csr_matrix, deadline: float, *, max_iterations: int = 100_000,
                         Y0: np.ndarray | None = None, beta: float | None = None,
                         state: dict[str, Any] | None = None, threads: int = 1,
                         parallel_min: int = 1_000_000) -> tuple[np.ndarray, int]:
    """Approximate the mDP-row dual by the method of the module docstring until ``deadline``
    (``time.perf_counter()`` seconds) or ``max_iterations``. Returns ``(Q, iterations)``, ``Q = G + A'Y``
    records x outputs for the best ``Y >= 0`` seen.

    ``Y0`` (mDP rows x outputs, clipped at 0) starts the ascent from given duals, e.g. a PDLP start's;
    ``beta`` is then the first smoothing, which should be small next to the gap left (a large one first
    undoes the start). The returned ``Q`` is never worse than ``Y0``'s. ``state``: a dict that receives
    the last iterate ``Y`` (float32) and smoothing ``beta``, to go on later
    (``Y0=state["Y"], beta=state["beta"]``).

    ``threads``: the products with ``A`` and ``A'`` and the softmin run by blocks of rows, and the
    elementwise updates of the iterates by :data:`ASCENT_CHUNKS` fixed chunks of mDP rows, on this many
    threads (scipy's sparse products and numpy's loops release the GIL), when the iterates have at
    least ``parallel_min`` entries; the iterates are the same whatever the number.

    Raises
    ------
    ValueError
        ``Y0`` of another shape than mDP rows x outputs.
    """
    m, K = G.shape
    E = A.shape[0]
    if E == 0 or m == 0 or K == 0:
        return np.array(G, dtype=float), 0
    # the chunks depend on the size only, so the iterates do not depend on the threads
    big = E * K >= parallel_min
    n_chunks = ASCENT_CHUNKS if big else 1
    threads = max(1, int(threads)) if big else 1
    if threads == 1:
        return _Ascent(G, A, Y0, beta, None, 1, n_chunks).run(deadline, max_iterations, state)
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return _Ascent(G, A, Y0, beta, pool, threads, n_chunks).run(deadline, max_iterations, state)


class _Ascent:
    """One ascent: the float32 iterates ``Y`` (current), ``V`` (momentum point), ``Y_new`` (trial) and
    ``tmp`` (scratch), each mDP rows x outputs, their elementwise work in fixed chunks of mDP rows."""

    def __init__(self, G: np.ndarray, A: sp.csr_matrix, Y0: np.ndarray | None, beta: float | None,
                 pool: ThreadPoolExecutor | None, threads: int, n_chunks: int) -> None:
        m, K = G.shape
        E = A.shape[0]
        A = sp.csr_matrix(A)
        self.G, self.AT = G, A.T.tocsr()
        self.G32 = G.astype(np.float32)
        self.ops = RowOps(A.astype(np.float32), self.AT.astype(np.float32), pool, threads)
        self.pool = pool
        # ||A||_2 by power iteration (a few steps are enough for a first step size; 1.1x margin)
        v = np.ones(m)
        for _ in range(30):
            v = self.AT @ (A @ v)
            v /= np.linalg.norm(v)
        lip_a = 1.1 * float(np.linalg.norm(A @ v)) ** 2
        self.beta0 = 0.025 * float(np.mean(G)) if np.mean(G) > 0 else 1.0
        self.beta = self.beta0 if beta is None or not beta > 0 else min(float(beta), self.beta0)
        self.Qs = np.empty((m, K), dtype=np.float32)
        if Y0 is None:
            self.Y = np.zeros((E, K), dtype=np.float32)
            self.best_q = np.array(G, dtype=float)
        else:
            if Y0.shape != (E, K):
                raise ValueError(f"Y0 must be mDP rows x outputs {(E, K)}, got {Y0.shape}")
            self.Y = np.ascontiguousarray(np.maximum(Y0, 0.0), dtype=np.float32)
            self.best_q = G + self.AT @ self.Y.astype(np.float64)
        self.best = float(self.best_q.min(axis=1).sum())
        self.V = self.Y.copy()
        self.Y_new = np.zeros_like(self.Y)
        self.tmp = np.zeros_like(self.Y)
        self.grad = self.Y  # set at every iteration
        self.step = self.beta / lip_a  # 1/L for the smoothed objective; adapted by backtracking
        self.coef = np.float32(0.0)
        self.chunks = row_blocks(E, n_chunks)

    def smooth(self, Yv: np.ndarray) -> tuple[float, np.ndarray]:
        """``G + A'Y`` and its softmin, by blocks of records on the threads (each row as on one thread)."""
        parts: list[float] = []
        Qs, G32, beta = self.Qs, self.G32, self.beta

        def rows(sl: slice) -> None:
            self.ops.AT_rows(sl, Yv, Qs[sl])
            Qs[sl] += G32[sl]
            parts.append(softmin(Qs[sl], beta)[0])

        self.ops.records(rows)
        return math.fsum(parts), Qs

    def on_chunks(self, fn: Callable[[slice], tuple[float, float]]) -> np.ndarray:
        """``fn`` on every chunk, its two numbers summed in chunk order (``map`` keeps the order)."""
        chunks = self.chunks
        parts = list(self.pool.map(fn, chunks)) if self.pool is not None and len(chunks) > 1 else [fn(c) for c in chunks]
        return np.asarray(parts, dtype=float).sum(axis=0)

    def trial(self, sl: slice) -> tuple[float, float]:
        """``Y_new = max(V + step grad, 0)``, ``tmp = Y_new - V``; ``grad'tmp`` and ``tmp'tmp``."""
        yn, tm, g = self.Y_new[sl], self.tmp[sl], self.grad[sl]
        np.multiply(g, np.float32(self.step), out=yn)
        yn += self.V[sl]
        np.maximum(yn, 0.0, out=yn)
        np.subtract(yn, self.V[sl], out=tm)
        return float(np.vdot(g, tm)), float(np.vdot(tm, tm))

    def gain(self, sl: slice) -> tuple[float, float]:
        """``tmp = Y_new - Y``; ``grad'tmp``."""
        tm = self.tmp[sl]
        np.subtract(self.Y_new[sl], self.Y[sl], out=tm)
        return float(np.vdot(self.grad[sl], tm)), 0.0

    def momentum(self, sl: slice) -> tuple[float, float]:
        """``V = Y_new + coef tmp``."""
        v = self.V[sl]
        np.multiply(self.tmp[sl], self.coef, out=v)
        v += self.Y_new[sl]
        return 0.0, 0.0

    def backtrack(self, phi_v: float) -> bool:
        """The trial step from ``V`` (value ``phi_v``), halved until it ascends enough for a concave
        function with a step-size curvature model; False when even a vanishing step does not
        (non-finite values)."""
        for _halving in range(60):
            # preallocated E x K buffers from here on: fresh temporaries of that size cost page faults
            up, sq = self.on_chunks(self.trial)
            phi_new, _ = self.smooth(self.Y_new)
            if phi_new >= phi_v + up - sq / (2.0 * self.step) - 1e-7 * abs(phi_v):
                return True
            self.step *= 0.5
        return False

    def run(self, deadline: float, max_iterations: int, state: dict[str, Any] | None) -> tuple[np.ndarray, int]:
        """The iterations; the best certificate (records x outputs, float64) and their number."""
        t = 1.0
        prev_phi = -np.inf
        since_beta = 0
        it = 0
        while it < max_iterations and time.perf_counter() < deadline and self.beta > 1e-5 * self.beta0:
            it += 1
            since_beta += 1
            phi_v, P = self.smooth(self.V)  # P: row-wise softmax weights
            self.grad = self.ops.A_all(P)
            if not self.backtrack(phi_v):
                break  # no ascent even for a vanishing step: keep the best bound so far
            if self.on_chunks(self.gain)[0] < 0.0:  # restart the momentum
                t = 1.0
                self.V[...] = self.Y
                continue
            t_new = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
            self.coef = np.float32((t - 1.0) / t_new)
            self.on_chunks(self.momentum)
            self.Y, self.Y_new = self.Y_new, self.Y
            t = t_new
            self.step *= 1.1
            if it % ASCENT_CHECK_EVERY == 0:
                phi, b = self.check(it)
                # halve beta when the smoothed value gains little next to its smoothing bias
                if since_beta > 2 * ASCENT_CHECK_EVERY and phi - prev_phi < 0.02 * max(b - phi, 1e-5 * abs(phi)):
                    self.beta *= 0.5
                    since_beta = 0
                    t = 1.0
                    self.V[...] = self.Y
                prev_phi = phi
        if state is not None:
            state.update(Y=self.Y, beta=self.beta)
        return self.best_q, it

    def check(self, it: int) -> tuple[float, float]:
        """The float64 certificate of ``Y``, kept when its bound is the best so far; its smoothed value
        and bound."""
        Q64 = self.G + self.AT @ self.Y.astype(np.float64)
        b = float(Q64.min(axis=1).sum())
        if b > self.best:
            self.best, self.best_q = b, Q64
        phi, _ = softmin(Q64.copy() if self.best_q is Q64 else Q64, self.beta)  # softmin overwrites its input
        logger.debug("dual ascent it %d: beta %.3g, step %.3g, bound %.10g, smoothed %.10g", it, self.beta, self.step,
                     b, phi)
        return phi, b


def ascent_too_large(E: int, Kc: int, memory_share: float) -> str:
    """Why :func:`smoothed_dual_ascent` over ``E`` mDP rows and ``Kc`` outputs must not run ('' when it
    may): its iterates would not fit in ``memory_share`` of the memory available."""
    short = memory_shortfall(ASCENT_BYTES_PER_ROW_OUTPUT * E * Kc, available_memory(), memory_share)
    return f"{E:,} mDP rows x {Kc:,} outputs need about {short}" if short else ""
