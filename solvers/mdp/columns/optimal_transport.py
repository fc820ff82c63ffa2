"""Certificates for the column decomposition's pricing LPs without an LP: a lossy (optimal) transport.

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
is not the best one); the caller then solves the pricing LP. With ``partial`` it returns the plan
all the same: an unserved deficit of ``r`` lowers the output's share of the bound by ``r``, which
the pricing accepts down to its LP tolerance (an output the master uses is tight at its duals, so
a complete plan would need every last bit of slack). A returned ``y`` is only a
multiplier vector ``>= 0``: the caller computes ``q = g_k + A'y`` and the bound from it, as for a
pricing LP's certificate, so nothing rests on this module's arithmetic.

The same plans prove outputs redundant (:func:`cone_dominated`): with ``b = g_j - g_k`` a plan shows
that output ``j`` costs no more than ``k`` on every column a mechanism can have, so ``k`` can be
dropped before anything is solved.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra

from securelp.solvers.mdp.rowops import PairIndex, edge_structure

__all__ = ["TransportCertifier", "cone_dominated"]


class TransportCertifier:
    """Greedy lossy-transport certificates on one component (``A``: its mDP rows, one per ordered
    neighbour pair, row ``r`` reading ``z_src - a z_tgt <= 0`` with ``a > 1``). It keeps ``m x m``
    distances, prices, orders and predecessors (about 24 bytes per pair)."""

    def __init__(self, A: sp.csr_matrix) -> None:
        E, m = A.shape
        self.E, self.m = E, m
        src, tgt, a = edge_structure(A)
        # an edge src -> tgt of length log a: row (src, tgt) delivers to src, paid by tgt
        H = sp.csr_matrix((np.log(a), (src, tgt)), shape=(m, m))
        dist, pred = dijkstra(H, directed=True, return_predecessors=True)
        self.price = np.exp(np.minimum(dist, 700.0))  # price[i, j] = exp(eps D(i, j)); inf: unreachable
        self.price[~np.isfinite(dist)] = np.inf
        self.order = np.argsort(dist, axis=1, kind="stable").astype(np.int32)  # cheapest first
        self.pred = pred.astype(np.int32)
        self._pairs = PairIndex(src, tgt, m)

    def certify(self, b: np.ndarray, partial: bool = False) -> np.ndarray | None:
        """A ``y >= 0`` (one entry per mDP row) with ``(A'y)_i >= b_i`` up to rounding, or ``None``
        when the greedy plan leaves a deficit unserved; with ``partial``, the plan's ``y`` all the
        same (the deficits it could not serve stay, partly or wholly)."""
        cap = np.maximum(-b, 0.0) * (1.0 - 1e-12)  # the slack, less a hair for the rounding of the prices
        need = np.flatnonzero(b > 0)
        to: list[np.ndarray] = []  # the plan: deliveries (to, from, amount), routed once it is complete
        frm: list[np.ndarray] = []
        amt: list[np.ndarray] = []
        for i in need[np.argsort(-b[need], kind="stable")].tolist():
            want = float(b[i])
            order = self.order[i]
            sup = order[cap[order] > 0]  # records with slack, cheapest first
            if sup.size == 0:
                if partial:
                    continue
                return None
            price = self.price[i, sup]
            can = cap[sup] / price  # what each can deliver to i
            reach = np.cumsum(can)
            last = int(np.searchsorted(reach, want))
            if last >= sup.size:
                if not partial:
                    return None
                last = sup.size - 1  # all they can give
                want = float(reach[last])
            give = can[:last + 1].copy()
            give[last] = want - (float(reach[last - 1]) if last else 0.0)
            used = sup[:last + 1]
            cap[used] = np.maximum(0.0, cap[used] - give * price[:last + 1])
            to.append(np.full(last + 1, i, dtype=np.int64))
            frm.append(used.astype(np.int64))
            amt.append(give)
        y = np.zeros(self.E)
        if to:
            self._route(np.concatenate(to), np.concatenate(frm), np.concatenate(amt), y)
        return y

    def _route(self, i: np.ndarray, j: np.ndarray, give: np.ndarray, y: np.ndarray) -> None:
        """Add the flows that deliver ``give`` to ``i``, paid by ``j``, along the shortest paths.

        On the path ``i = v0, v1, ..., j`` the row ``(v_l, v_l+1)`` delivers to ``v_l`` and is paid
        by ``v_l+1``; it carries ``give`` times the product of the factors between ``i`` and
        ``v_l``, which is ``price[i, v_l]`` (a sub-path of a shortest path is a shortest path). The
        paths are walked back from ``j``, all deliveries at once, one edge per step."""
        keep = give > 0.0
        i, cur, give = i[keep], j[keep], give[keep]
        while cur.size:
            go = cur != i
            i, cur, give = i[go], cur[go], give[go]
            if not cur.size:
                break
            prev = self.pred[i, cur].astype(np.int64)
            rows = self._pairs.rows(prev, cur)  # every step is an mDP row: none is left out
            np.add.at(y, rows, give * self.price[i, prev])
            cur = prev


def cone_dominated(G: np.ndarray, A: sp.csr_matrix, certifier: TransportCertifier, features: np.ndarray,
                   deadline: float = float("inf"), *, tries: int = 3, neighbours: int = 64) -> tuple[np.ndarray, int]:
    """Outputs whose mass can move to another output without breaking a constraint or raising the loss.

    ``G``: records x outputs, the prior-weighted loss of one component; ``A``: its mDP rows. Output
    ``k`` is *dominated* by output ``j`` when ``g_j <= g_k + A'y`` for some ``y >= 0``. Then every
    column ``z`` of the cone ``C = {z >= 0 : A z <= 0}`` has
    ``g_j.z <= (g_k + A'y).z = g_k.z + y.(A z) <= g_k.z``: moving column ``k`` of any mechanism onto
    column ``j`` keeps every mDP row (``C`` is a convex cone) and every unit row, and does not raise
    the loss, so the optimum over the other outputs is the optimum. With ``b = g_j - g_k`` the
    multipliers are a lossy transport (:meth:`TransportCertifier.certify`): the records nearer ``k``
    than ``j`` are served by those nearer ``j``. Entrywise dominance (``g_j <= g_k``,
    :func:`securelp.solvers.mdp.columns.bounds.undominated_outputs`) is the case ``y = 0``.

    The outputs are visited from the largest total loss down (the outliers first). Each tries
    ``tries`` dominators among the ``neighbours`` live outputs nearest in ``features`` (its cost column, projected), after two quick tests that rule a pair out: the
    total deficit must not exceed the total slack (prices are at least 1), and ``g_k - g_j`` must be
    non-negative on every point ``exp(-eps D(., t))`` of ``C``. A dominator is live when it is tried,
    so removals never form a cycle and every removed output is dominated, through a chain, by a kept
    one (dominance is transitive). A plan counts only when ``g_k + A'y >= g_j`` holds entrywise as
    computed (the deficits are inflated by 1e-9 for that margin); a plan that fails proves nothing
    and the output is kept. Stops at ``deadline`` (``time.perf_counter()``), keeping the outputs not
    yet visited. Returns ``(by, visited)``: for each output, the output it was found dominated by,
    ``-1`` for the outputs kept; and how many outputs were visited.
    """
    K = G.shape[1]
    alive = np.ones(K, dtype=bool)
    by = np.full(K, -1, dtype=np.int64)
    if K < 2:
        return by, 0
    with np.errstate(divide="ignore"):
        R = 1.0 / certifier.price  # column t: exp(-eps D(., t)), a point of C (0 where unreachable)
    GR = G.T @ R  # outputs x roots: g_k' r_t
    visited = 0
    for k in np.argsort(-G.sum(axis=0), kind="stable").tolist():
        if time.perf_counter() > deadline:
            break
        visited += 1
        cand = np.flatnonzero(alive)
        cand = cand[cand != k]
        if cand.size == 0:
            break
        near = cand[np.argsort(((features[cand] - features[k]) ** 2).sum(axis=1), kind="stable")[:neighbours]]
        B = G[:, near] - G[:, [k]]
        deficit = np.maximum(B, 0.0).sum(axis=0)
        slack = np.maximum(-B, 0.0).sum(axis=0)
        ok = (deficit <= slack) & ((GR[k] - GR[near]).min(axis=1) >= 0.0)
        near = near[ok]
        ratio = deficit[ok] / np.maximum(slack[ok], 1e-300)
        for k2 in near[np.argsort(ratio, kind="stable")[:tries]].tolist():
            b = G[:, k2] - G[:, k]
            b = np.where(b > 0.0, b * (1.0 + 1e-9), b)
            y = certifier.certify(b)
            if y is not None and bool(np.all(G[:, k] + A.T @ y >= G[:, k2])):
                alive[k] = False
                by[k] = k2
                break
    return by, visited
