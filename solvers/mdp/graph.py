"""The mDP neighbour graph: records are nodes, ``i ~ j`` when ``0 < d(i, j) <= eta``.

Qiu (Sec. 3) imposes the mDP ratio constraint ``z_ik <= exp(eps d_ij) z_jk`` only on
neighbouring pairs; by chaining, every pair joined by a path of neighbours is then bounded
by ``exp(eps * delta(i, j))`` with ``delta`` the shortest-path distance in this graph
(Property 3.2). Records in different connected components share no constraint, so each
component's PMO is solved on its own (a disconnected graph is not an error).

:func:`essential_edges` drops a constraint ``(i, j)`` that is implied by two others,
``d(i, l) + d(l, j) <= d(i, j)`` (e.g. the 2-cell straight steps of a grid, implied by two
1-cell steps): the feasible set of the PMO does not change. The verifier always checks
every neighbouring pair, pruned or not.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from securelp.solvers.errors import InputError
from securelp.solvers.mdp.verify import neighbour_pairs

__all__ = ["SEARCHES", "NeighbourGraph", "build_graph", "essential_edges", "pair_share", "weak_guarantees"]

#: :func:`essential_edges` keeps the adjacency as a dense boolean matrix up to this many records
#: (16 MB); above, it takes each source's block from the sparse one
DENSE_ADJACENCY_MAX = 4096

#: :func:`essential_edges` takes the blocked min-plus product over all records when the sources'
#: squared degrees sum to at least this share of ``n^3`` (a dense mDP graph)
DENSE_PAIR_SHARE = 0.125

#: records per block of the min-plus product (a block's temporary is ``block^2 n`` floats)
MINPLUS_BLOCK = 16

#: :func:`essential_edges`'s searches: by the graph's density, one source at a time, or the min-plus product
SEARCHES = ("auto", "per_source", "min_plus")


@dataclass(frozen=True)
class NeighbourGraph:
    """The mDP graph of a dataset at radius ``eta``.

    Attributes
    ----------
    n:
        Number of records.
    eta:
        Neighbourhood radius.
    rows, cols:
        Ordered neighbouring pairs (both directions present).
    n_components:
        Number of connected components.
    component:
        ``(n,)`` component label of every record.
    """

    n: int
    eta: float
    rows: np.ndarray
    cols: np.ndarray
    n_components: int
    component: np.ndarray

    @property
    def n_edges(self) -> int:
        """Number of undirected neighbouring pairs."""
        return int(self.rows.size // 2)

    def adjacency(self, distance: np.ndarray | None = None) -> sp.csr_matrix:
        """Sparse symmetric adjacency (weights = distances if given, else 1)."""
        w = np.ones(self.rows.size) if distance is None else np.asarray(distance)[self.rows, self.cols]
        return sp.csr_matrix((w, (self.rows, self.cols)), shape=(self.n, self.n))

    @property
    def n_isolated(self) -> int:
        """Records with no neighbour: mDP constrains nothing for them."""
        return self.n - int(np.unique(self.rows).size)

    def component_members(self) -> list[np.ndarray]:
        """Record indices of each component, largest first."""
        groups = [np.flatnonzero(self.component == c) for c in range(self.n_components)]
        return sorted(groups, key=lambda g: (-g.size, int(g[0])))


#: ``eps d`` above which ``exp(eps d)`` exceeds 1e304: a ratio bound that protects nothing in practice
VACUOUS_EPS_D = 700.0


def weak_guarantees(graph: NeighbourGraph, distance: np.ndarray, eps: float) -> list[str]:
    """What an ``eps``-mDP guarantee on ``graph`` (at its ``eta``) does not give, one sentence each
    (empty: nothing to say). Such a mechanism is still verified -- the definition holds -- but a
    record without neighbours may be released unchanged, and at ``eps d`` above
    :data:`VACUOUS_EPS_D` on every neighbouring pair no ratio is bounded in practice."""
    notes = []
    if graph.n_isolated:
        notes.append(f"{graph.n_isolated} of {graph.n} records have no neighbour within eta = {graph.eta:g}: mDP "
                     "constrains nothing for them, and a mechanism may release them unchanged (raise eta)")
    if graph.rows.size and eps * float(np.min(np.asarray(distance)[graph.rows, graph.cols])) > VACUOUS_EPS_D:
        notes.append(f"eps x d is above {VACUOUS_EPS_D:g} on every neighbouring pair: the bound exp(eps d) on their "
                     "probability ratios exceeds 1e304 and protects nothing in practice (lower eps)")
    return notes


def build_graph(distance: np.ndarray, eta: float) -> NeighbourGraph:
    """Build the neighbour graph of ``distance`` at radius ``eta``."""
    d = np.asarray(distance, dtype=float)
    rows, cols = neighbour_pairs(d, float(eta))
    n = d.shape[0]
    adj = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n, n))
    ncomp, labels = connected_components(adj, directed=False)
    return NeighbourGraph(n, float(eta), rows, cols, int(ncomp), labels.astype(np.int64))


def essential_edges(distance: np.ndarray, rows: np.ndarray, cols: np.ndarray, *, rel_tol: float = 1e-12,
                    search: str = "auto", dense_adjacency_max: int = DENSE_ADJACENCY_MAX,
                    block: int = MINPLUS_BLOCK) -> np.ndarray:
    """Boolean mask over the ordered pairs ``(rows[e], cols[e])``: False where the pair is implied.

    A pair ``(i, j)`` is implied when some neighbour ``l`` of both has
    ``d(i, l) + d(l, j) <= d(i, j) * (1 + rel_tol)``: then ``z_i <= e^{eps d_il} z_l <=
    e^{eps (d_il + d_lj)} z_j``. The relative slack ``rel_tol`` only admits float rounding
    (a relative ratio error of about ``eps * d * rel_tol``, far below the verifier's 1e-9,
    and removed by the exact repair anyway).

    ``search`` (:data:`SEARCHES`): ``per_source`` takes one source ``i`` at a time, all its pairs at
    once (``deg(i)^2`` sums over its neighbours ``l`` and targets ``j``; the adjacency dense up to
    ``dense_adjacency_max`` records); ``min_plus`` the blocked min-plus product (:func:`_essential_dense`,
    ``block`` records a block), far faster on a dense graph; ``auto`` the product where the squared
    degrees sum to :data:`DENSE_PAIR_SHARE` of ``n^3`` or more (and the adjacency fits densely). Every
    search gives the same mask.

    Raises
    ------
    InputError
        An unknown ``search``.
    """
    if search not in SEARCHES:
        raise InputError(f"unknown search {search!r}; choose one of {', '.join(SEARCHES)}", parameter="search")
    d = np.asarray(distance, dtype=float)
    n = d.shape[0]
    if rows.size == 0:
        return np.ones(0, dtype=bool)
    if search == "auto":
        dense = n <= dense_adjacency_max and pair_share(rows, n) >= DENSE_PAIR_SHARE
        search = "min_plus" if dense else "per_source"
    if search == "min_plus":
        return _essential_dense(d, rows, cols, rel_tol, block)
    return _essential_per_source(d, rows, cols, rel_tol, dense_adjacency_max)


def pair_share(rows: np.ndarray, n: int) -> float:
    """The per-source search's work on the pairs ``rows`` (sources) of ``n`` records, the squared
    degrees' sum, as a share of the min-plus product's ``n^3``: :func:`essential_edges` takes the
    product from :data:`DENSE_PAIR_SHARE` on."""
    deg = np.bincount(rows, minlength=n).astype(float)
    return float(deg @ deg) / float(n) ** 3


def _essential_per_source(d: np.ndarray, rows: np.ndarray, cols: np.ndarray, rel_tol: float,
                          dense_adjacency_max: int) -> np.ndarray:
    """:func:`essential_edges` one source at a time (sparse graphs)."""
    n = d.shape[0]
    keep = np.ones(rows.size, dtype=bool)
    order = np.lexsort((cols, rows))
    bounds = np.searchsorted(rows[order], np.arange(n + 1))
    adj = sp.csr_matrix((np.ones(rows.size, dtype=bool), (rows, cols)), shape=(n, n))
    dense = adj.toarray() if n <= dense_adjacency_max else None
    for i in range(n):
        es = order[bounds[i] : bounds[i + 1]]
        if es.size < 2:
            continue
        J = cols[es]  # the targets of i's pairs = i's neighbours, the candidates l
        link = dense[np.ix_(J, J)] if dense is not None else adj[J][:, J].toarray()  # [j, l]: l is j's neighbour
        via = d[i, J][None, :] + d[np.ix_(J, J)].T  # [j, l] = d(i, l) + d(l, j)
        implied = np.any(link & (via <= (d[i, J] * (1 + rel_tol))[:, None]), axis=1)
        keep[es[implied]] = False
    return keep


def _essential_dense(d: np.ndarray, rows: np.ndarray, cols: np.ndarray, rel_tol: float, b: int) -> np.ndarray:
    """:func:`essential_edges` on a dense graph: ``m_ij = min_l (w_il + w_lj)`` over all records
    ``l``, with ``w`` the distance on the graph's pairs and ``inf`` off them (and on the diagonal), is
    the shortest two-pair path through a common neighbour; pair ``(i, j)`` is implied when
    ``m_ij <= d_ij (1 + rel_tol)``. The same sums and comparisons as the per-source search, so the
    same mask, but in blocks of records without gathering each source's neighbourhood."""
    n = d.shape[0]
    w = np.full((n, n), np.inf)
    w[rows, cols] = d[rows, cols]
    m = np.full((n, n), np.inf)
    for i0 in range(0, n, b):
        mi = m[i0 : i0 + b]
        wi = w[i0 : i0 + b]
        for l0 in range(0, n, b):
            part = wi[:, l0 : l0 + b, None] + w[None, l0 : l0 + b, :]  # [i, l, j] = w_il + w_lj
            np.minimum(mi, part.min(axis=1), out=mi)
    return ~(m[rows, cols] <= d[rows, cols] * (1 + rel_tol))
