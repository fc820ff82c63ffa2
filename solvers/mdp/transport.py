"""Certificates for the pricing LPs of :mod:`solvers.mdp.colgen` without an LP: a lossy transport.

Output ``k`` is not violated at the unit-row duals ``mu`` when some ``y >= 0`` has
``g_k + A'y >= mu`` (then every entry of ``q = g_k + A'y`` is at least ``mu``, and the output's
share of the Lagrangian bound, ``sum_i min(0, q_i - mu_i)``, is 0). With ``b = mu - g_k``, that is
``(A'y)_i >= b_i`` for every record. The mDP row ``z_i - a z_j <= 0`` (``a = exp(eps d_ij)``) adds
``+y`` at ``i`` and ``-a y`` at ``j``: it *delivers* ``y`` to ``i`` at the price of ``a y`` from ``j``.
Along a path the prices multiply, so a record with a deficit (``b_i > 0``) can be served by a
record with slack (``b_j < 0``, capacity ``-b_j``) at the price ``exp(eps D(i, j))`` per unit,
``D`` the shortest-path distance of the mDP graph; records on the way pass the flow on.

:meth:`TransportCertifier.certify` serves the deficits greedily, the largest first, each from the
cheapest slack, and returns the ``y`` of that plan (the flows on the shortest paths), or ``None``
when a deficit cannot be served. ``None`` does not prove the output violated (the greedy plan
is not the best one); the caller then solves the pricing LP. A returned ``y`` is only a
multiplier vector ``>= 0``: the caller computes ``q = g_k + A'y`` and the bound from it, as for a
pricing LP's certificate, so nothing rests on this module's arithmetic.

Gaussian 1,000's component (894 records) at its first IPM round's probe: of the 765 outputs its
stored certificates left open, the greedy plans certified 636 in 3.6 s; the 765 pricing LPs took
21.0 s, and none of the 636 was violated (they cannot be).
"""

from __future__ import annotations

import itertools

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra

from solvers.mdp.rowops import edge_structure

__all__ = ["TRANSPORT_MAX_RECORDS", "TransportCertifier"]

#: the certifier keeps ``m x m`` distances, prices, orders and predecessors (about 24 bytes per
#: pair): components above this many records are priced by LPs only
TRANSPORT_MAX_RECORDS = 4000


class TransportCertifier:
    """Greedy lossy-transport certificates on one component (``A``: its mDP rows, one per ordered
    neighbour pair, row ``r`` reading ``z_src - a z_tgt <= 0`` with ``a > 1``)."""

    def __init__(self, A: sp.csr_matrix) -> None:
        E, m = A.shape
        self.E, self.m = E, m
        src, tgt, a = edge_structure(A)
        self.a = a
        # an edge src -> tgt of length log a: row (src, tgt) delivers to src, paid by tgt
        H = sp.csr_matrix((np.log(a), (src, tgt)), shape=(m, m))
        dist, pred = dijkstra(H, directed=True, return_predecessors=True)
        self.price = np.exp(np.minimum(dist, 700.0))  # price[i, j] = exp(eps D(i, j)); inf: unreachable
        self.price[~np.isfinite(dist)] = np.inf
        self.order = np.argsort(dist, axis=1, kind="stable").astype(np.int32)  # cheapest first
        self.pred = pred.astype(np.int32)
        self.row = {int(s) * m + int(t): r for r, (s, t) in enumerate(zip(src.tolist(), tgt.tolist()))}

    def certify(self, b: np.ndarray) -> np.ndarray | None:
        """A ``y >= 0`` (one entry per mDP row) with ``(A'y)_i >= b_i`` up to rounding, or ``None``
        when the greedy plan leaves a deficit unserved."""
        cap = np.maximum(-b, 0.0) * (1.0 - 1e-12)  # the slack, less a hair for the rounding of the prices
        y = np.zeros(self.E)
        need = np.flatnonzero(b > 0)
        for i in need[np.argsort(-b[need], kind="stable")].tolist():
            want = float(b[i])
            order = self.order[i]
            sup = order[cap[order] > 0]  # records with slack, cheapest first
            if sup.size == 0:
                return None
            price = self.price[i, sup]
            can = cap[sup] / price  # what each can deliver to i
            reach = np.cumsum(can)
            last = int(np.searchsorted(reach, want))
            if last >= sup.size:
                return None
            for t in range(last + 1):
                j = int(sup[t])
                give = float(can[t]) if t < last else want - (float(reach[t - 1]) if t else 0.0)
                if give <= 0.0:
                    continue
                cap[j] = max(0.0, cap[j] - give * price[t])
                self._route(i, j, give, y)
        return y

    def _route(self, i: int, j: int, give: float, y: np.ndarray) -> None:
        """Add the flows that deliver ``give`` to ``i``, paid by ``j``, along the shortest path."""
        path = [j]
        pred = self.pred[i]
        while path[-1] != i:
            path.append(int(pred[path[-1]]))
        path.reverse()  # i = v0, v1, ..., j: row (v_l, v_l+1) delivers to v_l, paid by v_l+1
        m = self.m
        amount = give
        for u, v in itertools.pairwise(path):
            r = self.row[u * m + v]
            y[r] += amount
            amount *= self.a[r]
