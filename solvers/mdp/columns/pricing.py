"""The column decomposition's pricing: each output's LP over the component's cone, and its certificate.

Pricing output ``k`` at unit-row duals ``mu`` is the LP ``v_k(mu) = min {(g_k - mu)' z : A z <= 0,
0 <= z <= 1}`` (the box is valid: every entry of a mechanism is in [0, 1]); its solution ``z`` is a
point of the cone, a column for the master when its reduced cost is negative, and its mDP-row duals
``y >= 0`` give the output's certificate ``q_k = g_k + A'y`` (:mod:`~securelp.solvers.mdp.columns.bounds`).
One warm HiGHS model per worker thread; each output's last optimal basis is kept and restored before
its next pricing; components with many mDP rows per record price through the LP's dual (one basis row
per record), dense ones with lazy rows (:mod:`~securelp.solvers.mdp.columns.lazy_rows`). Outputs without
a basis first try a lossy transport plan (:mod:`~securelp.solvers.mdp.columns.optimal_transport`), which
certifies many of them without an LP. Outputs are priced along a chain of nearest neighbours in their
cost columns, so that an output priced for the first time starts from a neighbour's basis.

References: the PMO's mDP and unit rows, Qiu Eq. 5-6; the decomposition by column, G. B. Dantzig and
P. Wolfe, "Decomposition Principle for Linear Programs", Operations Research 8 (1960).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import scipy.sparse as sp

from securelp.solvers.errors import SolverError
from securelp.solvers.lp.highs import TIGHT_TOLERANCE, new_highs, pass_lp
from securelp.solvers.lp.model import LinearProgram
from securelp.solvers.mdp.columns.bounds import Certificates
from securelp.solvers.mdp.columns.lazy_rows import LazyRows
from securelp.solvers.mdp.columns.master import RETRY_LOCK
from securelp.solvers.mdp.columns.optimal_transport import TransportCertifier
from securelp.solvers.mdp.columns.options import ColumnGenerationOptions

__all__ = ["Pricer", "output_features", "pricing_chain"]


def output_features(G: np.ndarray, dims: int = 16, seed: int = 0) -> np.ndarray:
    """Every output's cost column (``G``: records x outputs) projected on ``dims`` fixed random
    directions (outputs x dims): outputs whose costs are alike are near each other."""
    R = np.random.default_rng(seed).standard_normal((G.shape[0], dims))
    return np.ascontiguousarray(G.T @ R)


def pricing_chain(F: np.ndarray, js: np.ndarray) -> np.ndarray:
    """``js`` reordered as a greedy chain of nearest neighbours in the features ``F`` (outputs x
    dims), starting at ``js[0]``: pricing along it warm-starts every first pricing of an output from
    a neighbour's basis, several times faster than in any other order."""
    js = np.asarray(js)
    if js.size <= 2:
        return js.copy()
    X = F[js]
    left = np.ones(js.size, dtype=bool)
    order = np.empty(js.size, dtype=np.int64)
    cur = 0
    dist = np.empty(js.size)
    for t in range(js.size):
        order[t] = cur
        left[cur] = False
        if t + 1 == js.size:
            break
        np.square(X - X[cur]).sum(axis=1, out=dist)
        dist[~left] = np.inf
        cur = int(np.argmin(dist))
    return js[order]


class Pricer:
    """The pricing LPs of one component (``G``: records x kept outputs, ``A``: its mDP rows, ``AT``:
    their transpose, ``kept``: the outputs' indices, for messages) on ``workers`` threads, keeping
    every certificate it finds in ``certs`` (where it is the better one)."""

    def __init__(self, G: np.ndarray, A: sp.csr_matrix, AT: sp.csr_matrix, kept: np.ndarray, certs: Certificates,
                 workers: int, options: ColumnGenerationOptions, transport: TransportCertifier | None = None) -> None:
        self.G, self.A, self.AT, self.kept, self.certs = G, A, AT, kept, certs
        self.options = options
        self.m, self.Kc = G.shape
        self.E = E = A.shape[0]
        m = self.m
        nw = max(1, min(workers, self.Kc))
        self.bases: list[Any] = [None] * self.Kc
        self.lazy = (LazyRows(A, self.Kc, nw, TIGHT_TOLERANCE, options.lazy_start_neighbours,
                              options.lazy_add_per_record) if E >= options.lazy_rows_min_ratio * m else None)
        self.dual_pricing = self.lazy is not None or E >= options.pricing_dual_min_ratio * m
        if self.lazy is not None:  # each pricing loads its own rows (LazyRows.load)
            pricing = LinearProgram(c=np.zeros(0), A=sp.csc_matrix((0, 0)), row_lower=np.zeros(0),
                                    row_upper=np.zeros(0), col_lower=np.zeros(0), col_upper=np.zeros(0))
        elif self.dual_pricing:
            # min 1't  s.t.  A'y + t >= -(g_k - mu),  y, t >= 0: the pricing LP's dual, whose basis has
            # one row per record instead of one per mDP row; only its right-hand side changes from
            # output to output
            pricing = LinearProgram(c=np.concatenate([np.zeros(E), np.ones(m)]),
                                    A=sp.hstack([AT, sp.identity(m)], format="csc"),
                                    row_lower=np.zeros(m), row_upper=np.full(m, np.inf),
                                    col_lower=np.zeros(E + m), col_upper=np.full(E + m, np.inf))
        else:
            pricing = LinearProgram(c=np.zeros(m), A=A, row_lower=np.full(E, -np.inf), row_upper=np.zeros(E),
                                    col_lower=np.zeros(m), col_upper=np.ones(m))
        self.models = []
        for _ in range(nw):
            # presolve off: when presolve solves a pricing LP outright (e.g. z = 0) its recovered
            # row duals can be far from dual feasible, and the bound is built from them
            h = new_highs({"presolve": "off"}, tight=True)
            if not pass_lp(h, pricing):
                raise SolverError("HiGHS rejected a pricing model (passModel failed)")
            self.models.append(h)
        self.pool = ThreadPoolExecutor(max_workers=nw) if nw > 1 else None
        self.lp_solves = 0
        self._cold_retries = [0] * nw  # per worker: each worker index is used by one thread at a time
        self._features: np.ndarray | None = None  # the outputs' cost columns, projected (pricing order)
        self._transport = transport  # built at the first pricing that asks for it, unless given
        self.transport_certified = 0  # outputs certified by a transport plan instead of an LP

    @property
    def workers(self) -> int:
        return len(self.models)

    @property
    def cold_retries(self) -> int:
        """Pricing LPs re-solved cold after a warm solve's certificate fell short, over the workers."""
        return sum(self._cold_retries)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True)

    def _run(self, w: int, attempt: int) -> bool:
        """Solve worker ``w``'s pricing model (``attempt`` > 0: cold, alone; 2: by interior point); with
        lazy rows, add rows its solution violates and solve again until it violates none. True when it
        ends "Optimal"."""
        h = self.models[w]
        while True:
            if attempt:
                # a warm re-solve can end "Optimal" with row duals that certify far less than the
                # primal value (seen after a cost change); re-solve cold, alone
                with RETRY_LOCK:
                    h.clearSolver()
                    if attempt == 2:
                        h.setOptionValue("solver", "ipm")
                    h.run()
                    h.setOptionValue("solver", "choose")
            else:
                h.run()
            if h.modelStatusToString(h.getModelStatus()) != "Optimal":
                return False
            if self.lazy is None:
                return True
            new = self.lazy.violated(w, np.asarray(h.getSolution().row_dual, dtype=float))
            if not new.size:
                return True
            self.lazy.extend(h, w, new)
            attempt = 0  # the rows' columns enter nonbasic at zero: the basis stays valid, re-solve warm

    def _solution(self, w: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
        """The point ``z`` and the mDP-row multipliers ``y >= 0`` of worker ``w``'s solved model."""
        sol = self.models[w].getSolution()
        if self.dual_pricing:  # z: the row duals; y: the first E columns (lazy: the rows carried)
            z = np.clip(np.asarray(sol.row_dual, dtype=float), 0.0, None)
            y = (self.lazy.multipliers(w, np.asarray(sol.col_value, dtype=float)) if self.lazy is not None
                 else np.maximum(0.0, np.asarray(sol.col_value, dtype=float)[:self.E])) * scale
        else:
            z = np.clip(np.asarray(sol.col_value, dtype=float), 0.0, None)
            y = np.maximum(0.0, -np.asarray(sol.row_dual, dtype=float)) * scale  # mDP-row duals, >= 0
        return z, y

    def price_one(self, w: int, j: int, mu: np.ndarray, tol: float) -> tuple[int, np.ndarray | None]:
        """Output ``j``'s pricing LP at ``mu`` on worker ``w``, solved until its certificate is within
        ``tol`` of its value (warm, then cold, then by interior point); its point (``None``: nothing
        to price, ``g_j = mu``).

        Raises
        ------
        SolverError
            The LP ends without an optimum.
        """
        h = self.models[w]
        g = self.G[:, j] - mu
        scale = float(np.max(np.abs(g)))
        if scale == 0.0:
            return j, None
        if self.lazy is not None:
            self.lazy.load(h, w, j)
        if self.dual_pricing:
            h.changeRowsBounds(self.m, np.arange(self.m, dtype=np.int32), -g / scale, np.full(self.m, np.inf))
        else:
            h.changeColsCost(self.m, np.arange(self.m, dtype=np.int32), g / scale)
        if self.bases[j] is not None:
            h.setBasis(self.bases[j])
        for attempt in range(3):
            self._cold_retries[w] += attempt > 0
            if not self._run(w, attempt):
                continue
            z, y = self._solution(w, scale)
            q, bound = self.certs.certificate(j, y, mu)
            if bound >= float(g @ z) - tol:
                break
        else:
            if h.modelStatusToString(h.getModelStatus()) != "Optimal":
                raise SolverError(f"pricing LP of output {int(self.kept[j])} ended with "
                                  f"{h.modelStatusToString(h.getModelStatus())}")
        self.certs.keep(j, q, mu, bound)
        if self.lazy is not None:
            self.lazy.keep(h, w, j)
        else:
            self.bases[j] = h.getBasis()
        return j, z

    def _by_transport(self, js: np.ndarray, mu: np.ndarray, tol: float, deadline: float
                      ) -> tuple[list[tuple[int, np.ndarray | None]], np.ndarray]:
        """The greedy transport plan of each output of ``js`` without a basis yet: the plan serves what
        deficits it can (what it leaves unserved counts against the output's share of the bound); an
        output whose share from it is at least ``-tol``, the tolerance its LP would be solved to, keeps
        that certificate and needs no LP (an output the master uses is tight at its duals, so a complete
        plan would need every last bit of slack). Returns those outputs (with ``None``: no column) and
        the outputs left for an LP."""
        if self._transport is None:
            self._transport = TransportCertifier(self.A)
        certified: list[tuple[int, np.ndarray | None]] = []
        left = []
        for j in js.tolist():
            if time.perf_counter() > deadline:
                break  # the rest is skipped (the LPs stop at the deadline too)
            if self.bases[j] is not None or (self.lazy is not None and self.lazy.saved[j] is not None):
                # a warm LP costs about what a plan does, and it also gives the exact bound; plans pay
                # off for cold LPs
                left.append(j)
                continue
            y = self._transport.certify(mu - self.G[:, j], partial=True)
            if y is not None:
                q, share = self.certs.certificate(j, y, mu)
                if share >= -tol:
                    self.certs.keep(j, q, mu, share)
                    certified.append((j, None))
                    continue
            left.append(j)
        self.transport_certified += len(certified)
        return certified, np.asarray(left, dtype=np.int64)

    def price(self, js: np.ndarray, mu: np.ndarray, tol: float, deadline: float = float("inf"),
              transport: bool = False) -> list[tuple[int, np.ndarray | None]]:
        """Price outputs ``js`` at ``mu``; outputs not reached by ``deadline`` are skipped (their stored
        certificates stay, so every bound stays valid; the caller then stops on the time limit).

        ``transport``: first try the transport plans (:meth:`_by_transport`; components of at most
        ``options.transport_max_records`` records). The outputs are priced along a chain of nearest
        neighbours (:func:`pricing_chain`, from ``js[0]``) cut into one stretch per worker."""
        certified: list[tuple[int, np.ndarray | None]] = []
        if transport and js.size and self.m <= self.options.transport_max_records:
            certified, js = self._by_transport(js, mu, tol, deadline)
            if not js.size:
                return certified
        nw = len(self.models)
        if self._features is None:
            self._features = output_features(self.G)
        parts = np.array_split(pricing_chain(self._features, js), nw)

        def work(w: int) -> list[tuple[int, np.ndarray | None]]:
            out = []
            for j in parts[w]:
                if time.perf_counter() > deadline:
                    break
                out.append(self.price_one(w, int(j), mu, tol))
            return out

        results = work(0) if self.pool is None else [r for part in self.pool.map(work, range(nw)) for r in part]
        self.lp_solves += len(results)
        return certified + results
