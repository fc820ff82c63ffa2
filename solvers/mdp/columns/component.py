"""One mDP-graph component of the column decomposition: its data, master, pricing and verified rows.

The mDP rows of the PMO (Qiu Eq. 5) couple records only within one output column and only within
one connected component of the mDP graph; the unit-measure rows (Eq. 6) couple the columns, but only
record by record. So the PMO splits exactly into one LP per component ``S`` (its records, all ``K``
outputs): ``min sum_k g_k' z_k  s.t.  sum_k z_k = 1,  z_k in C_S``, with ``g_k = p * c[:, k]`` on ``S``
and ``C_S = {z >= 0 : z_i <= exp(eps d_ij) z_j, i ~ j in S}`` a polyhedral cone, the same for every
column. :class:`ComponentCG` holds one such LP for the column generation: the restricted master
(:mod:`~securelp.solvers.mdp.columns.master`), the pricing (:mod:`~securelp.solvers.mdp.columns.pricing`),
the certificates (:mod:`~securelp.solvers.mdp.columns.bounds`), and the repair and verification of the
rows it proposes (pairs never cross components, so a component's rows are verified on their own).

Start columns: ``1/|S|`` and ``exp(-eps delta(., a_k))``, each for the output where it costs least
(``delta`` the shortest-path distance in the mDP graph, ``a_k`` the record of ``S`` with the smallest
loss for output ``k``), both points of ``C_S``; at large ``eps d`` they are nearly optimal.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
import types
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra

from securelp.solvers.errors import SolverError
from securelp.solvers.mdp.columns.bounds import Certificates, component_rows
from securelp.solvers.mdp.columns.master import RestrictedMaster
from securelp.solvers.mdp.columns.optimal_transport import TransportCertifier
from securelp.solvers.mdp.columns.options import ColumnGenerationOptions
from securelp.solvers.mdp.columns.pricing import Pricer
from securelp.solvers.mdp.pmo import PMOProblem
from securelp.solvers.mdp.repair import repair_mechanism, upward_closure
from securelp.solvers.mdp.verify import verify_mechanism

__all__ = ["ComponentCG", "say_nothing"]

logger = logging.getLogger(__name__)


def say_nothing(_text: str) -> None:
    """The status line of components too small to report."""


@dataclasses.dataclass
class _SubProblem:
    """A component as :func:`securelp.solvers.mdp.repair.repair_mechanism` and the verifier take it
    (pairs never cross components): its mDP graph and distances over its records, and, built only when
    a repair mixes, its distances to the outputs and its costs (for the mix with the exponential
    mechanism)."""

    graph: Any
    dataset: Any
    eps: float
    problem: PMOProblem
    idx: np.ndarray
    kept: np.ndarray

    @functools.cached_property
    def to_outputs(self) -> np.ndarray:
        return np.asarray(self.problem.dataset.distance)[np.ix_(self.idx, self.problem.outputs)]

    @functools.cached_property
    def cost(self) -> np.ndarray:
        return self.problem.cost[self.idx]


class ComponentCG:
    """Column generation on one connected component (records ``idx``, kept outputs ``kept``) at the
    target ``gap``, its pricing on ``workers`` threads; ``A``: its mDP rows when the caller has them,
    ``transport``: its transport certifier when built already."""

    def __init__(self, problem: PMOProblem, idx: np.ndarray, kept: np.ndarray, workers: int, gap: float,
                 options: ColumnGenerationOptions | None = None, A: sp.csr_matrix | None = None,
                 transport: TransportCertifier | None = None) -> None:
        self.options = options or ColumnGenerationOptions()
        self.problem = problem
        self.idx, self.kept = idx, kept
        self.m, self.Kc = idx.size, kept.size
        self.K = problem.K
        self.gap = gap
        self.A = component_rows(problem, idx) if A is None else A
        self.E = self.A.shape[0]
        self.AT = self.A.T.tocsr()
        self.G = np.ascontiguousarray(problem.cost[np.ix_(idx, kept)])  # m x Kc
        self.certs = Certificates(self.G, self.AT)
        self.sub, adj = self._sub_problem()
        self.master = RestrictedMaster(self.G, gap, self.options)
        self._start_columns(adj)
        self.pricer = Pricer(self.G, self.A, self.AT, kept, self.certs, workers, self.options, transport)
        self.deadline = float("inf")  # master solves and repairs stop here (run_component sets it)
        self.start_rows: np.ndarray | None = None  # the repaired first-order start (m x Kc), a fallback
        self.start_gap: float | None = None  # relative gap of start_rows' loss over the start's bound
        self.rows_seconds = 0.0  # the longest repair and verification of the rows so far (verify_rows)
        self.say: Callable[[str], None] = say_nothing  # a note on the start's progress

    def _sub_problem(self) -> tuple[_SubProblem, sp.csr_matrix]:
        """The component's sub-instance for repair and verification, and its weighted adjacency."""
        problem, idx = self.problem, self.idx
        D = np.asarray(problem.dataset.distance)
        pos = np.full(problem.n, -1, dtype=np.int64)
        pos[idx] = np.arange(self.m)
        gr, gc = problem.graph.rows, problem.graph.cols
        gsel = pos[gr] >= 0
        sub = _SubProblem(graph=types.SimpleNamespace(rows=pos[gr[gsel]], cols=pos[gc[gsel]]),
                          dataset=types.SimpleNamespace(distance=D[np.ix_(idx, idx)]), eps=problem.eps,
                          problem=problem, idx=idx, kept=self.kept)
        adj = sp.csr_matrix((D[gr[gsel], gc[gsel]], (pos[gr[gsel]], pos[gc[gsel]])), shape=(self.m, self.m))
        return sub, adj

    def _start_columns(self, adj: sp.csr_matrix) -> None:
        """The uniform vector and, per anchor, the profile ``exp(-eps delta(a, .))``; a vector enters once,
        for the output where it costs least: the other copies are the same master column at a higher cost,
        never in an optimal basis and never binding on the duals."""
        anchors = np.argmin(self.G, axis=0)
        ua, inv = np.unique(anchors, return_inverse=True)
        delta = dijkstra(adj, directed=False, indices=ua)  # finite: the component is connected
        uni = np.full(self.m, 1.0 / self.m)
        ks, vs = [int(np.argmin(self.G.sum(axis=0)))], [uni]
        for a in range(ua.size):
            prof = np.exp(-self.problem.eps * delta[a])
            prof /= prof.sum()
            owners = np.flatnonzero(inv == a)
            ks.append(int(owners[np.argmin(prof @ self.G[:, owners])]))
            vs.append(prof)
        self.master.add_columns(ks, vs)

    @property
    def workers(self) -> int:
        """The pricing's (and the starts') threads."""
        return self.pricer.workers

    def close(self) -> None:
        self.pricer.close()

    def warm_start(self, Q: np.ndarray) -> None:
        """Take ``Q = G + A'Y`` (records x outputs, from ``Y >= 0``) as every output's stored certificate
        (:meth:`~securelp.solvers.mdp.columns.bounds.Certificates.warm_start`)."""
        self.certs.warm_start(Q)

    def open_shares(self, mu: np.ndarray) -> np.ndarray:
        """Per output, its stored certificate's share of the Lagrangian bound at ``mu``."""
        return self.certs.open_shares(mu)

    def tolerances(self, scale: float) -> tuple[float, float]:
        """``(tau, tol)`` at objective scale ``scale``: an output is worth pricing when its open share
        is below ``-tau`` (a 20th of the target gap spread over the outputs), and its pricing LP is
        solved to ``tol``."""
        tau = 0.05 * self.gap * scale / self.Kc
        return tau, 0.1 * tau + 1e-12 * scale / self.Kc

    def add_primal_columns(self, Z: np.ndarray) -> int:
        """Add the columns of an approximate component solution ``Z`` (records x kept outputs) to the
        master, twice: closed upward into the cone (``z_j >= z_i exp(-eps d_ij)``), which keeps their
        quality but leaves the unit rows off by the solver's tolerance, and repaired into an exactly
        feasible mechanism on the kept outputs (:func:`securelp.solvers.mdp.repair.repair_mechanism`),
        which the master can always take at once. The repaired rows become :attr:`start_rows`.
        Returns how many columns entered."""
        Z = np.clip(np.asarray(Z, dtype=float), 0.0, None)
        C = Z.copy()
        C[C < 1e-12 * max(1.0, float(C.max(initial=0.0)))] = 0.0
        g = self.sub.graph
        upward_closure(C, g.rows, g.cols, np.exp(-self.sub.eps * self.sub.dataset.distance[g.rows, g.cols]))
        try:
            R = repair_mechanism(Z, self.sub)[0]  # type: ignore[arg-type]
            self.start_rows = R
        except SolverError as exc:  # an all-zero row: only the closed columns
            logger.info("first-order start: no repaired columns (%s)", exc)
            R = np.zeros_like(C)
        ks: list[int] = []
        vecs: list[np.ndarray] = []
        for j in range(C.shape[1]):
            sr, sc = float(R[:, j].sum()), float(C[:, j].sum())
            r = R[:, j] / sr if sr > 0 else None
            c = C[:, j] / sc if sc > 0 else None
            for v in (r, c):
                if v is not None:
                    ks.append(j)
                    vecs.append(v)
                # nearly equal columns of both kinds make the master's basis singular: the closed one
                # only where it differs from the repaired one
                if r is not None and c is not None and float(np.abs(r - c).max()) <= 1e-6 * float(c.max()):
                    break
        self.master.add_columns(ks, vecs)
        return len(ks)

    def finish_by(self, deadline: float, reserve: float | None = None) -> float:
        """When the iterations must stop for the run to end by ``deadline``: what still runs after the
        last one (this component's verified rows, then the verification of the whole matrix) takes
        about ``reserve`` (default ``options.finish_reserve``) times the longest :meth:`verify_rows` so
        far."""
        return deadline - (self.options.finish_reserve if reserve is None else reserve) * self.rows_seconds

    def stop_at(self, reserve: float | None = None) -> float:
        """:meth:`finish_by` of :attr:`deadline`: when the master's solves must end."""
        return self.finish_by(self.deadline, reserve)

    def verify_rows(self, Zc: np.ndarray) -> tuple[np.ndarray, float]:
        """Rows ``m x K`` (zero in dropped outputs) from ``Zc`` on the kept outputs, repaired and
        verified, and their loss; past :attr:`deadline` the repair's mix comes after one closure round
        (a slightly higher loss)."""
        t = time.perf_counter()
        Z = np.zeros((self.m, self.K))
        Z[:, self.kept] = Zc
        X, _ = repair_mechanism(Z, self.sub, self.deadline)  # type: ignore[arg-type]
        verify_mechanism(X, self.sub.dataset.distance, self.problem.eps, eta=self.problem.eta)
        cost = self.problem.cost[self.idx]
        self.rows_seconds = max(self.rows_seconds, time.perf_counter() - t)
        return X, float(np.sum(cost * X))

    def verified_rows(self, lam: np.ndarray) -> tuple[np.ndarray, float]:
        """The RMP's mechanism for column weights ``lam``, repaired and verified."""
        return self.verify_rows(self.master.mechanism(lam, self.Kc))

    def unboxed_rows(self, center: np.ndarray | None, width: float, lam: np.ndarray | None = None
                     ) -> tuple[np.ndarray, float]:
        """The verified rows of the RMP without the box (a restriction of the PMO). ``lam``: the column
        weights of a boxed solution whose box slacks are all zero, which is already feasible without the
        box and is taken as it is; else the RMP is re-solved without the box (its rows come next and are
        verified here: only the end's verification remains)."""
        if lam is None:
            lam = self.master.unboxed_solve(center, width, self.stop_at(1.0))
        return self.verified_rows(lam)

    def fallback_rows(self) -> tuple[np.ndarray, float]:
        """Verified rows without a master solve (the deadline passed first): the repaired first-order
        start's mechanism, else the best single output for every record (a constant mechanism, private
        at any eps)."""
        if self.start_rows is not None:
            return self.verify_rows(self.start_rows)
        Zc = np.zeros((self.m, self.Kc))
        Zc[:, int(np.argmin(self.G.sum(axis=0)))] = 1.0
        return self.verify_rows(Zc)
