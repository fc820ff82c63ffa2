"""A structured primal-dual interior-point method for one component's PMO on a set of outputs.

The component LP (records ``1..m``, outputs ``1..K``; ``A`` the ``E x m`` mDP rows of one output
column, row ``(i, j)`` being ``z_i - exp(eps d_ij) z_j``)::

    min  sum_k g_k' z_k   s.t.  A z_k + s_k = 0,  sum_k z_k = 1,  z_k >= 0,  s_k >= 0

and its dual ``max 1'mu  s.t.  g_k + A'y_k - mu = w_k >= 0,  y_k >= 0``.

The mDP rows couple records only within one output column and the unit rows only record by
record, so the Newton system of a primal-dual method splits: with ``Theta_k = y_k / s_k`` and
``D_k = w_k / z_k``, each output has its own ``m x m`` matrix ``H_k = A' Theta_k A + D_k``
(symmetric positive definite, the mDP graph's pattern plus the diagonal), and the unit-row
step solves ``(sum_k H_k^-1) dmu = r``, an ``m x m`` system. One iteration costs one inverse per
output (``m^3`` flops densely, a fraction of that through a nested dissection of the mDP graph,
see :func:`dissection` and :class:`_Inverses`) instead of a factorisation of the whole LP's
``(m + E) K``-row normal equations, which is what a general IPM would face (HiGHS's IPX: 80
iterations and 166 s on gaussian 300's component, where this takes about 60 iterations and 25 s).
The outputs are spread over threads; the BLAS/LAPACK calls go through :mod:`securelp.solvers.mdp.lapack`,
which releases the GIL (scipy's own wrappers do not), and the iterate is kept with one column per
output (records x outputs, mDP rows x outputs) so that the products with ``A`` and ``A'`` need no
transposed copies.

Mehrotra's predictor-corrector with up to three Gondzio centrality correctors; the linear
residuals are kept exact by computing ``ds`` and ``dw`` from the linear equations, and one step
of iterative refinement corrects the complementarity equations (without it the dual residual
grew as the iterates approached the boundary and the bound stalled near 1e-4).

Nothing the method returns is trusted: the caller gets ``Y`` clipped at 0, whose certificate
``Q = G + A'Y`` gives the valid bound ``sum_i min_k Q_ik`` (see :mod:`securelp.solvers.mdp.colgen`), and a
primal iterate that the caller repairs and verifies.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.linalg import lapack

from securelp.solvers.errors import InputError
from securelp.solvers.mdp import lapack as lapack_nogil
from securelp.solvers.mdp.rowops import RowOps, edge_structure, row_blocks, run_blocks

logger = logging.getLogger(__name__)

#: Gondzio centrality correctors per iteration (each costs two solves, no factorisation)
CORRECTORS = 3
#: steps of iterative refinement of every Newton direction (refining only the direction taken,
#: not the predictor's and correctors' trial ones, made an iteration 20 % cheaper but stalled a
#: 51-record component at a relative gap of 2e-6)
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

#: the nested-dissection form of the per-output inverses is used from this many records on (below
#: it the dense inverse is as fast), when its estimated flops are at most :data:`DISSECT_MAX_COST`
#: of the dense inverse's
DISSECT_MIN_RECORDS = 300
DISSECT_MAX_COST = 0.6

#: bytes of memory per output and per squared record (the inverse ``H_k^-1`` kept per output, the
#: factorisation's work array and the certificate)
BYTES_PER_ENTRY = 8
#: bytes per output and per mDP row: the iterate, its directions and residuals, the best
#: multipliers and their copies, about 22 float64 arrays of mDP rows x outputs (tracemalloc's peak
#: less the inverses on the text dataset's 300 records, 89,700 rows, 100 outputs: 174.5, stop 34).
#: On a complete mDP graph (``E = m (m - 1)``) they, not the inverses, are what does not fit
BYTES_PER_ROW_OUTPUT = 180


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


@dataclass(frozen=True)
class Dissection:
    """A vertex separator of the records' mDP graph: the records reordered (``perm``) as part 1,
    part 2 and the separator, no mDP row joining the two parts; ``near1``/``near2``: the positions,
    within each part, of its records adjacent to the separator; ``sub1``/``sub2``: the parts'
    own dissections (in the order ``perm`` gives them), or None where a part is inverted densely."""

    perm: np.ndarray
    p1: int
    p2: int
    s: int
    near1: np.ndarray
    near2: np.ndarray
    sub1: Dissection | None = None
    sub2: Dissection | None = None

    @property
    def m(self) -> int:
        return self.p1 + self.p2 + self.s

    def flops(self) -> float:
        """About the flops of one inverse in this form (the dense inverse: ``m^3``)."""
        m, s = self.m, self.s
        return (_inverse_flops(self.sub1, self.p1) + _inverse_flops(self.sub2, self.p2) + m * m * s + m * s * s
                + (self.near1.size * self.p1 + self.near2.size * self.p2) * s)


def _inverse_flops(d: Dissection | None, n: int) -> float:
    return float(n) ** 3 if d is None else d.flops()


def dissection(A: sp.csr_matrix) -> Dissection | None:
    """A nested dissection of the graph of ``A' A`` (the pattern every ``H_k`` shares), or None
    when no dissection is cheaper than :data:`DISSECT_MAX_COST` of the dense inverse (small or
    dense graphs). See :func:`_dissect`."""
    m = A.shape[1]
    P = abs(sp.csr_matrix(A)).T @ abs(sp.csr_matrix(A))
    P = sp.csr_matrix((np.ones(P.nnz), P.indices, P.indptr), shape=(m, m))
    P.setdiag(0)
    P.eliminate_zeros()
    return _dissect(P)


def _dissect(P: sp.csr_matrix) -> Dissection | None:
    """Split the graph ``P`` at a quantile (0.3-0.7) of the Fiedler vector of its Laplacian; a
    minimum vertex cover of the edges across the split is the separator
    (:func:`_vertex_separator`). The split of fewest estimated flops is kept, its parts dissected again in turn; None
    below :data:`DISSECT_MIN_RECORDS` records, when the eigensolver fails, or when the result is not
    cheaper than :data:`DISSECT_MAX_COST` of the dense inverse."""
    from scipy.sparse.csgraph import laplacian
    from scipy.sparse.linalg import ArpackError, eigsh

    m = P.shape[0]
    if m < max(DISSECT_MIN_RECORDS, 8):
        return None
    try:
        # deterministic start vector; shift-invert just left of the Laplacian's zero eigenvalue
        _vals, vecs = eigsh(laplacian(P), k=2, sigma=-1e-3, which="LM", v0=np.cos(np.arange(m) + 0.5))
    except (ArpackError, RuntimeError, ValueError) as exc:  # pragma: no cover - eigensolver trouble
        logger.debug("structured IPM: no dissection (%s)", exc)
        return None
    fiedler = vecs[:, 1]
    best = None
    for q in np.linspace(0.3, 0.7, 21):
        side = fiedler <= np.quantile(fiedler, q)
        if side.all() or not side.any():
            continue
        sep = _vertex_separator(P, side)
        one, two = side & ~sep, ~side & ~sep
        if not one.any() or not two.any():
            continue
        n1, n2, ns = int(one.sum()), int(two.sum()), int(sep.sum())
        cost = float(n1) ** 3 + float(n2) ** 3 + float(m) ** 2 * ns
        if best is None or cost < best[0]:
            best = (cost, one, two, sep)
    if best is None:
        return None
    _, one, two, sep = best
    near = np.asarray(P[:, sep].sum(axis=1)).ravel() > 0
    idx1, idx2 = np.flatnonzero(one), np.flatnonzero(two)
    sub1 = _dissect(sp.csr_matrix(P[idx1][:, idx1]))
    sub2 = _dissect(sp.csr_matrix(P[idx2][:, idx2]))
    if sub1 is not None:
        idx1 = idx1[sub1.perm]
    if sub2 is not None:
        idx2 = idx2[sub2.perm]
    d = Dissection(np.concatenate([idx1, idx2, np.flatnonzero(sep)]), idx1.size, idx2.size, int(sep.sum()),
                   np.flatnonzero(near[idx1]), np.flatnonzero(near[idx2]), sub1, sub2)
    return d if d.flops() <= DISSECT_MAX_COST * float(m) ** 3 else None


def _vertex_separator(P: sp.csr_matrix, side: np.ndarray) -> np.ndarray:
    """A smallest set of records covering every edge of ``P`` between ``side`` and the rest: a
    minimum vertex cover of the bipartite graph of those edges (Koenig: from a maximum matching, the
    left records not reachable by alternating paths from unmatched left records and the right
    records reachable). Often 10-20 % smaller than the records of one side adjacent to the other."""
    from scipy.sparse.csgraph import maximum_bipartite_matching

    left, right = np.flatnonzero(side), np.flatnonzero(~side)
    cut = sp.csr_matrix(P[left][:, right])
    sep = np.zeros(side.size, dtype=bool)
    if cut.nnz == 0:
        return sep
    match_l = maximum_bipartite_matching(cut, perm_type="column")  # left -> right or -1
    match_r = np.full(right.size, -1)
    match_r[match_l[match_l >= 0]] = np.flatnonzero(match_l >= 0)
    seen_l = match_l < 0  # alternating paths start at the unmatched left records
    seen_r = np.zeros(right.size, dtype=bool)
    frontier = np.flatnonzero(seen_l)
    while frontier.size:
        # left -> right along any edge (the matched one leads back to the start), right -> left
        # along the matching
        reach = np.unique(cut[frontier].indices)
        reach = reach[~seen_r[reach]]
        seen_r[reach] = True
        back = match_r[reach]
        back = back[(back >= 0) & ~seen_l[np.maximum(back, 0)]]
        seen_l[back] = True
        frontier = back
    has_edge = np.diff(cut.indptr) > 0
    sep[left[has_edge & ~seen_l]] = True
    sep[right[seen_r]] = True
    return sep


def _upper_to_lower(X: np.ndarray, block: int = 128) -> None:
    """Copy the upper triangle of the square C-ordered ``X`` into its strict lower one, in blocks
    (numpy copies, which run without the GIL)."""
    n = X.shape[0]
    for j in range(0, n, block):
        e = min(j + block, n)
        X[e:, j:e] = X[j:e, e:].T
        il = _strict_lower(e - j)
        D = X[j:e, j:e]
        D[il] = D.T[il]


@functools.cache
def _strict_lower(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.tril_indices(n, -1)


@dataclass(frozen=True)
class _Node:
    """A node of the inverses' tree, its records ``[o, o + m)`` in the dissection's order: a leaf
    (inverted densely, ``slot`` in the leaves' storage) or a separator node (``slot`` in the
    factors' storage), whose first ``p1`` and next ``n2 - p1`` records are its parts (the nodes
    ``kids``) and the last ``s`` its separator; ``near``: the positions among its first ``n2``
    records of those adjacent to the separator (ascending)."""

    o: int
    m: int
    slot: int
    leaf: bool
    p1: int = 0
    n2: int = 0
    kids: tuple[int, int] = (-1, -1)
    near: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def s(self) -> int:
        return self.m - self.n2


def _tree(d: Dissection | None, m: int) -> list[_Node]:
    """The nodes of the dissection ``d`` of ``m`` records (a single leaf without one), children
    before their parent (the root last)."""
    nodes: list[_Node] = []
    slots = [0, 0]  # leaves, separator nodes

    def walk(d: Dissection | None, o: int, n: int) -> int:
        if d is None:
            nodes.append(_Node(o, n, slots[0], True))
            slots[0] += 1
            return len(nodes) - 1
        a = walk(d.sub1, o, d.p1)
        b = walk(d.sub2, o + d.p1, d.p2)
        near = np.concatenate([d.near1, d.near2 + d.p1]).astype(np.int64)
        nodes.append(_Node(o, n, slots[1], False, d.p1, d.p1 + d.p2, (a, b), near))
        slots[1] += 1
        return len(nodes) - 1

    walk(d, 0, m)
    return nodes


class _Scratch:
    """A stack of work matrices carved from one buffer, allocated (and its pages touched) once:
    the inversions make no allocation per output, whose page faults serialise threads."""

    def __init__(self, size: int) -> None:
        self.buf = np.zeros(max(size, 1))
        self.top = 0

    def take(self, rows: int, cols: int, order: str = "C") -> np.ndarray:
        n = rows * cols
        if self.top + n > self.buf.size:  # pragma: no cover - sized by _Inverses._need_* beforehand
            raise RuntimeError("structured IPM: scratch space exhausted")
        v = self.buf[self.top:self.top + n].reshape((rows, cols), order=order)
        self.top += n
        return v


class _Workspace:
    """One thread's ``H`` (zero off the mDP pattern, which only the scatter writes), its share of
    the unit-row matrix ``M`` (column-major, lower triangle) and its scratch."""

    def __init__(self, m: int, scratch: int) -> None:
        self.H = np.zeros((m, m))
        self.M = np.zeros((m, m), order="F")
        self.scratch = _Scratch(scratch)


class _Inverses:
    """The ``K`` per-output inverses ``H_k^-1`` through the tree of a nested :class:`Dissection`.

    With ``H = [[D, B'], [B, C]]`` at a separator node (``D`` = its two parts, ``C`` the
    separator), ``W = D^-1 B'`` and the Schur complement ``S = C - B W = L L'``,
    ``H^-1 = blockdiag(D^-1, 0) + U U'`` with ``U = [W; -I] L^-T``; the parts' inverses are the
    same form, down to the leaves, which are inverted densely. Each output keeps its leaves'
    inverses and its nodes' ``U`` (``m_node x s``); ``B'`` is zero but in the rows adjacent to the
    separator, so ``W`` is the parts' inverses applied to those rows only, through the tree. An
    inverse costs about :meth:`Dissection.flops`; ``sum_k H_k^-1`` gets the leaves' blocks and a
    ``syrk`` of every ``U``. Without a dissection the tree is one leaf (the dense inverse).

    Every array is allocated once; the BLAS/LAPACK calls go through :mod:`securelp.solvers.mdp.lapack` and
    the copies through numpy, all without the GIL, so ``threads`` threads of ``pool`` share the
    outputs."""

    def __init__(self, K: int, m: int, d: Dissection | None, pool: ThreadPoolExecutor | None = None,
                 threads: int = 1) -> None:
        self.m, self.pool, self.threads = m, pool, threads
        self.nodes = _tree(d, m)
        self.root = len(self.nodes) - 1
        self.leaves = [_touched((K, nd.m, nd.m)) for nd in self.nodes if nd.leaf]
        self.U = [_touched((K, nd.s, nd.m)) for nd in self.nodes if not nd.leaf]  # U' per output
        need = self._need_factor(self.root)
        self.ws = [_Workspace(m, need) for _ in range(threads)]

    # -- sizes of the scratch (the same recursion as _factor and _apply, counting only)

    def _need_apply(self, i: int, rows: np.ndarray, q: int) -> int:
        nd = self.nodes[i]
        if nd.leaf:
            return rows.size * nd.m
        c1, c2 = np.searchsorted(rows, [nd.p1, nd.n2])
        return max(self._need_apply(nd.kids[0], rows[:c1], q), self._need_apply(nd.kids[1], rows[c1:c2] - nd.p1, q),
                   nd.s * (rows.size + q))

    def _need_factor(self, i: int) -> int:
        nd = self.nodes[i]
        if nd.leaf:
            return 0
        nn, s = nd.near.size, nd.s
        c1 = int(np.searchsorted(nd.near, nd.p1))
        own = nd.m * s + s * nn + max(self._need_apply(nd.kids[0], nd.near[:c1], s),
                           self._need_apply(nd.kids[1], nd.near[c1:] - nd.p1, s), nn * s + s * s)
        return max(self._need_factor(nd.kids[0]), self._need_factor(nd.kids[1]), own)

    def storage_per_output(self) -> int:
        """Doubles kept per output."""
        return sum(nd.m * nd.m if nd.leaf else nd.m * nd.s for nd in self.nodes)

    def keep(self, K: int) -> None:
        """Only the first ``K`` outputs stay (after outputs were dropped)."""
        self.leaves = [x[:K] for x in self.leaves]
        self.U = [x[:K] for x in self.U]

    @property
    def K(self) -> int:
        return (self.leaves[0] if self.leaves else self.U[0]).shape[0]

    # -- one output's inverse

    def _factor(self, i: int, H: np.ndarray, k: int, sc: _Scratch) -> bool:
        """Output ``k``'s inverse of node ``i``'s block of ``H`` into the storage; False when a
        factorisation fails."""
        nd = self.nodes[i]
        o, mm = nd.o, nd.m
        if nd.leaf:
            X = self.leaves[nd.slot][k]
            np.copyto(X, H[o:o + mm, o:o + mm])
            # X.T is column-major: its lower triangle is X's upper one
            if lapack_nogil.potrf(X.T) != 0 or lapack_nogil.potri(X.T) != 0:
                return False
            _upper_to_lower(X)
            return True
        a, b = nd.kids
        if not (self._factor(a, H, k, sc) and self._factor(b, H, k, sc)):
            return False
        p1, n2, s, near = nd.p1, nd.n2, nd.s, nd.near
        mark = sc.top
        W = sc.take(mm, s, order="F")
        X = sc.take(s, near.size)  # B at the near records
        np.take(H[o + n2:o + mm, o:o + n2], near, axis=1, out=X, mode="clip")
        c1 = int(np.searchsorted(near, p1))
        self._apply(a, near[:c1], X.T[:c1], W[:p1], k, sc)
        self._apply(b, near[c1:] - p1, X.T[c1:], W[p1:n2], k, sc)
        Wg = sc.take(near.size, s)
        np.take(W[:n2], near, axis=0, out=Wg, mode="clip")
        S = sc.take(s, s, order="F")
        np.copyto(S, H[o + n2:o + mm, o + n2:o + mm])
        lapack_nogil.gemm(S, X, Wg, alpha=-1.0, beta=1.0)
        # U = [W; -I] L^-T: L^-1 by trtri and U by a product (a right-sided trsm ran at a quarter
        # of gemm's speed); L^-1's upper triangle zeroed for the product
        ok = lapack_nogil.potrf(S) == 0 and lapack_nogil.trtri(S) == 0
        if ok:
            S[_strict_lower(s)[::-1]] = 0.0
            Ut = self.U[nd.slot][k]
            lapack_nogil.gemm(Ut.T[:n2], W[:n2], S.T)
            Ut.T[n2:] = -S.T
        sc.top = mark
        return ok

    def _apply(self, i: int, rows: np.ndarray, R: np.ndarray, out: np.ndarray, k: int, sc: _Scratch) -> None:
        """``out = (node i's inverse)[:, rows] R`` for output ``k`` (``rows`` ascending)."""
        nd = self.nodes[i]
        mark = sc.top
        if nd.leaf:
            G = sc.take(rows.size, nd.m)
            np.take(self.leaves[nd.slot][k], rows, axis=0, out=G, mode="clip")
            lapack_nogil.gemm(out, G.T, R)
        else:
            c1, c2 = (int(c) for c in np.searchsorted(rows, [nd.p1, nd.n2]))
            self._apply(nd.kids[0], rows[:c1], R[:c1], out[:nd.p1], k, sc)
            self._apply(nd.kids[1], rows[c1:c2] - nd.p1, R[c1:c2], out[nd.p1:nd.n2], k, sc)
            out[nd.n2:] = 0.0
            Ut = self.U[nd.slot][k]
            Ug = sc.take(nd.s, rows.size)
            np.take(Ut, rows, axis=1, out=Ug, mode="clip")
            T = sc.take(nd.s, R.shape[1])
            lapack_nogil.gemm(T, Ug, R)
            lapack_nogil.gemm(out, Ut.T, T, beta=1.0)
        sc.top = mark

    def _accumulate(self, k: int, M: np.ndarray) -> None:
        """Add output ``k``'s inverse to ``M`` (column-major; its lower triangle)."""
        for nd in self.nodes:
            o, mm = nd.o, nd.m
            if nd.leaf:
                M[o:o + mm, o:o + mm] += self.leaves[nd.slot][k].T
            elif nd.s:
                lapack_nogil.syrk(M[o:o + mm, o:o + mm], self.U[nd.slot][k].T)

    def dense(self, k: int) -> np.ndarray:
        """Output ``k``'s inverse as a dense matrix (for checks)."""
        M = np.zeros((self.m, self.m), order="F")
        self._accumulate(k, M)
        return np.tril(M) + np.tril(M, -1).T

    # -- all outputs

    def invert(self, off: np.ndarray, diag: np.ndarray, uflat: np.ndarray, uflat_t: np.ndarray) -> np.ndarray | None:
        """Build every output's ``H_k`` (its off-diagonal entries ``off[:, k]`` at the flat positions
        ``uflat``/``uflat_t``, its diagonal ``diag[:, k]``), invert it, with a regularised diagonal
        when the factorisation fails, and return ``sum_k H_k^-1`` (column-major, lower triangle);
        None when an output fails even so. The outputs are dealt round the threads."""
        m = self.m
        K = self.K

        def chunk(t: int) -> bool:
            ws = self.ws[t]
            hf = ws.H.reshape(-1)
            ws.M.fill(0.0)
            for k in range(t, K, self.threads):
                hf[uflat] = off[:, k]
                hf[uflat_t] = off[:, k]
                for reg in (0.0, 1e-12, 1e-9):
                    hf[::m + 1] = diag[:, k] * (1.0 + reg) + reg * float(diag[:, k].max())
                    if self._factor(self.root, ws.H, k, ws.scratch):
                        break
                else:
                    return False
                self._accumulate(k, ws.M)
            return True

        used = range(min(self.threads, K))
        ok = list(self.pool.map(chunk, used)) if self.pool is not None and len(used) > 1 else [chunk(t) for t in used]
        if not all(ok):
            return None
        M = self.ws[0].M
        for t in used[1:]:
            M += self.ws[t].M
        return M

    # -- products with the inverses, for the Newton solves

    def apply(self, h: np.ndarray | None, v: np.ndarray | None = None) -> np.ndarray:
        """``H_k^-1 h_k`` for every output (``h``: records x outputs), or ``H_k^-1 v`` for one
        vector ``v`` when ``h`` is None; records x outputs. The outputs' spans run on the threads."""
        K, m = self.K, self.m
        hT = np.broadcast_to(v, (K, m)) if h is None else np.ascontiguousarray(h.T)
        out = np.empty((K, m))
        run_blocks(self.pool, lambda sl: self.apply_to(sl, hT[sl], out[sl]), row_blocks(K, self.threads))
        return np.ascontiguousarray(out.T)

    def apply_to(self, sl: slice, h: np.ndarray, out: np.ndarray) -> None:
        """``out = H_k^-1 h`` for the outputs ``k`` of ``sl`` (``h``, ``out``: theirs, outputs x
        records), through the tree: children first, so a node's ``U U' h`` adds to its parts'
        results and to its separator's zeros."""
        for nd in self.nodes:
            o, e = nd.o, nd.o + nd.m
            if nd.leaf:
                np.matmul(self.leaves[nd.slot][sl], h[:, o:e, None], out=out[:, o:e, None])
                continue
            out[:, o + nd.n2:e] = 0.0
            if nd.s:
                Ut = self.U[nd.slot][sl]
                t = np.matmul(Ut, h[:, o:e, None])
                out[:, o:e] += np.matmul(Ut.transpose(0, 2, 1), t)[:, :, 0]


def _touched(shape: tuple[int, ...]) -> np.ndarray:
    """An array of zeros whose pages are written now (not on first use in a thread)."""
    a = np.empty(shape)
    a.fill(0.0)
    return a


class _Newton:
    """One iteration's Newton system, factorised: the per-output inverses ``Hinv``, the unit-row
    Schur complement's Cholesky factor ``Lm``, and the iterate it linearises at. Arrays hold one
    column per output: records x outputs (``z``, ``w``) and mDP rows x outputs (``s``, ``y``), so
    the products with ``A`` and ``A'`` read and write them in place, split by rows over the threads."""

    def __init__(self, ops: RowOps, Hinv: _Inverses, Lm: np.ndarray, theta: np.ndarray, z: np.ndarray,
                 s: np.ndarray, y: np.ndarray, w: np.ndarray) -> None:
        self.ops, self.Hinv, self.Lm, self.theta = ops, Hinv, Lm, theta
        self.z, self.s, self.y, self.w = z, s, y, w

    def solve_once(self, rp: np.ndarray | None, ru: np.ndarray | None, rd: np.ndarray | None, rzw: np.ndarray,
                   rsy: np.ndarray) -> tuple[np.ndarray, ...]:
        """``(dz, ds, dy, dw, dmu)`` for the residuals of the primal rows, unit rows, dual rows
        (None: zero) and the two complementarity blocks; ``ds`` and ``dw`` from the linear
        equations, so those hold to rounding whatever the error of the solve."""
        ops, Hinv, theta, z, s = self.ops, self.Hinv, self.theta, self.z, self.s
        q = np.empty_like(s)  # rsy / s, then dy
        u = np.empty_like(s) if rp is not None else q

        def edges1(sl: slice) -> None:
            np.divide(rsy[sl], s[sl], out=q[sl])
            if rp is not None:
                np.multiply(theta[sl], rp[sl], out=u[sl])
                u[sl] -= q[sl]

        ops.edges(edges1)
        h = np.empty_like(z)

        def records1(sl: slice) -> None:
            ops.AT_rows(sl, u, h[sl])
            if rp is None:
                np.negative(h[sl], out=h[sl])
            h[sl] += rzw[sl] / z[sl]
            if rd is not None:
                h[sl] += rd[sl]

        ops.records(records1)
        Hh = Hinv.apply(h)
        r = -Hh.sum(axis=1)
        if ru is not None:
            r += ru
        dmu = lapack.dpotrs(self.Lm, r, lower=1)[0]
        dz = Hinv.apply(None, dmu)
        dz += Hh
        ds = np.empty_like(s)

        def edges2(sl: slice) -> None:
            ops.A_rows(sl, dz, ds[sl])
            if rp is None:
                np.negative(ds[sl], out=ds[sl])
            else:
                np.subtract(rp[sl], ds[sl], out=ds[sl])
            # dy = rsy / s - theta ds, into q
            q[sl] -= theta[sl] * ds[sl]

        ops.edges(edges2)
        dy = q
        dw = np.empty_like(z)

        def records2(sl: slice) -> None:
            ops.AT_rows(sl, dy, dw[sl])
            dw[sl] -= dmu[sl, None]
            if rd is not None:
                dw[sl] -= rd[sl]

        ops.records(records2)
        return dz, ds, dy, dw, dmu

    def solve(self, rp: np.ndarray | None, ru: np.ndarray | None, rd: np.ndarray | None, rzw: np.ndarray,
              rsy: np.ndarray) -> tuple[np.ndarray, ...]:
        """:meth:`solve_once` and :data:`REFINEMENTS` steps of refinement of the complementarity
        equations (the linear ones hold by construction)."""
        z, s, y, w = self.z, self.s, self.y, self.w
        d = self.solve_once(rp, ru, rd, rzw, rsy)
        for _ in range(REFINEMENTS):
            dz, ds, dy, dw, _dmu = d
            c = self.solve_once(None, None, None, rzw - (w * dz + z * dw), rsy - (y * ds + s * dy))
            d = _add(d, c)
        return d

    def steps(self, d: tuple[np.ndarray, ...]) -> tuple[float, float]:
        """The largest primal and dual steps (at most 1) that keep the iterate nonnegative."""
        dz, ds, dy, dw, _ = d
        return (min(_step(self.z, dz), _step(self.s, ds)), min(_step(self.y, dy), _step(self.w, dw)))


def _add(d: tuple[np.ndarray, ...], c: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """The sum of two directions (``d``'s arrays are updated in place)."""
    for u, v in zip(d, c):
        u += v
    return d


def _step(v: np.ndarray, dv: np.ndarray) -> float:
    """The largest step in [0, 1] that keeps ``v + step dv`` nonnegative (``v > 0``)."""
    low = float(np.min(np.divide(dv, v)))  # the step to the boundary is -1 / low where low < 0
    return 1.0 if low >= -1.0 else -1.0 / low


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    """``sum(a * b)`` without the temporary."""
    return float(np.vdot(a, b))


def structured_ipm(G: np.ndarray, A: sp.csr_matrix, deadline: float, *, tolerance: float = 1e-8,
                   max_iterations: int = 200, probe_gap: float = 0.0,
                   probe: Callable[[np.ndarray, np.ndarray], bool] | None = None, threads: int = 1,
                   on_iteration: Callable[[int, float, float], None] | None = None, prune_below: float = 0.0,
                   prune_gap: float = 0.0) -> IPMResult:
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
    use, kept to the end, costs an inverse at every iteration (gaussian 2,000's first round held
    200 outputs for 200 iterations and then found 142 of them unused). One the optimum needs after
    all is found violated by the caller's pricing, like any output outside the LP. 0: never.
    The output generation of :mod:`securelp.solvers.mdp.colgen` prices the other outputs there, and
    restarts with the violated ones instead of finishing a restricted LP that lacks them.

    ``on_iteration``: called at every iteration with its number, the primal objective and the best
    certified bound so far (for a progress line).

    ``threads``: the per-output inverses and products are spread over this many threads, each
    running BLAS on one thread. numpy and scipy each load their own OpenBLAS, whose thread pools,
    left to themselves, fight for the cores: on gaussian 1,000 (2 cores) a 411-record ``potrf``
    took 10 ms between numpy products and 1.1 ms with one BLAS thread."""
    from threadpoolctl import threadpool_limits

    threads = max(1, int(threads))
    with threadpool_limits(limits=1, user_api="blas"):
        if threads == 1:
            return _structured_ipm(G, A, deadline, tolerance, max_iterations, probe_gap, probe, None, 1, on_iteration,
                                   prune_below, prune_gap)
        with ThreadPoolExecutor(max_workers=threads) as pool:
            return _structured_ipm(G, A, deadline, tolerance, max_iterations, probe_gap, probe, pool, threads,
                                   on_iteration, prune_below, prune_gap)


def _structured_ipm(G: np.ndarray, A: sp.csr_matrix, deadline: float, tolerance: float, max_iterations: int,
                    probe_gap: float, probe: Callable[[np.ndarray, np.ndarray], bool] | None,
                    pool: ThreadPoolExecutor | None, threads: int,
                    on_iteration: Callable[[int, float, float], None] | None = None, prune_below: float = 0.0,
                    prune_gap: float = 0.0) -> IPMResult:
    """:func:`structured_ipm`'s method, BLAS limited by the caller."""
    t0 = time.perf_counter()
    G = np.asarray(G, dtype=float)
    m, K = G.shape
    A = sp.csr_matrix(A)
    E = A.shape[0]
    if A.shape[1] != m:
        raise InputError(f"the mDP rows have {A.shape[1]} columns for {m} records")
    src, tgt, a = edge_structure(A)
    # records reordered once (part 1, part 2, separator) when a dissection makes the inverses cheaper
    plan = dissection(A)
    order = np.arange(m) if plan is None else plan.perm
    if plan is not None:
        logger.info("structured IPM: %d records dissected into %d + %d + a separator of %d (inverses at about "
                    "%.2f of the dense flops)", m, plan.p1, plan.p2, plan.s, plan.flops() / float(m) ** 3)
    rank = np.empty(m, dtype=np.int64)
    rank[order] = np.arange(m)  # record i's position in the new order
    G = G[order]
    A = sp.csr_matrix(A[:, order])
    src, tgt = rank[src], rank[tgt]
    ops = RowOps(A, A.T.tocsr(), pool, threads)
    # H_k = A' diag(theta_k) A + diag(d_k): its diagonal and its lower off-diagonal entries are
    # linear in theta_k, precomputed as sparse maps
    rows_e = np.arange(E)
    Pdiag = (sp.csr_matrix((np.ones(E), (rows_e, src)), shape=(E, m))
             + sp.csr_matrix((a * a, (rows_e, tgt)), shape=(E, m))).T.tocsr()  # m x E
    flat = np.maximum(src, tgt) * m + np.minimum(src, tgt)
    uflat, inv = np.unique(flat, return_inverse=True)
    uflat_t = (uflat % m) * m + uflat // m  # the same entries in the upper triangle
    Poff = sp.csr_matrix((-a, (inv, rows_e)), shape=(uflat.size, E))
    scale = 1.0 / max(float(np.abs(G).max()), 1e-300)
    g = G * scale  # records x outputs, entries in [0, 1]
    # start: the uniform mechanism (strictly inside the cone: a > 1), all complementarity
    # products equal
    z = np.full((m, K), 1.0 / K)
    s = np.maximum(-ops.A_all(z), 1e-3 / K)
    nu0 = 10.0 * float(g.mean()) / K
    y = nu0 / s
    w = nu0 / z
    mu = (g + ops.AT_all(y) - w).min(axis=1)
    n_comp = K * (m + E)
    Hinv = _Inverses(K, m, plan, pool, threads)
    logger.debug("structured IPM: %d outputs, %.0f MB of inverses (%.2f of the dense ones)", K,
                 8e-6 * K * Hinv.storage_per_output(), Hinv.storage_per_output() / float(m) ** 2)
    # the best bound, its mu, its multipliers of the outputs then alive and those outputs
    best = (-np.inf, mu.copy(), y.copy(), np.arange(K))
    history: list[tuple[float, float, float]] = []
    status = "iteration_limit"
    last = 0.0
    alive = np.arange(K)
    gaps: list[float] = []
    done = 0  # Newton steps taken
    frozen_min = np.full(m, np.inf)  # row minima of the dropped outputs' certificates
    pruned: list[np.ndarray] = []  # outputs that left the restricted LP (prune_below)
    Y_all = np.zeros((E, K))  # multipliers of every output (dropped ones frozen)
    Z_all = np.zeros((m, K))
    for it in range(max_iterations + 1):
        ti = time.perf_counter()
        pobj = _dot(g, z)
        ATy = ops.AT_all(y)
        # y stays > 0 (steps stop short of the boundary); clipped all the same, as a certificate needs
        Q = g + (ATy if y.min() >= 0 else ops.AT_all(np.maximum(y, 0.0)))
        bound = float(np.minimum(Q.min(axis=1), frozen_min).sum())
        if bound > best[0]:
            best = (bound, mu.copy(), y.copy(), alive.copy())
        zmax = z.max(axis=0)
        dead = zmax < DROP_BELOW
        idle = np.zeros(K, dtype=bool)
        if prune_below > 0 and pobj - best[0] <= prune_gap * abs(pobj):
            idle = (zmax < prune_below) & ~dead
            idle[z.argmax(axis=1)] = False
        if (np.any(dead) or np.any(idle)) and not np.all(dead | idle):
            # the dead (all entries below DROP_BELOW) keep certifying their rows; the idle leave the LP
            frozen_min = np.minimum(frozen_min, Q[:, dead].min(axis=1, initial=np.inf))
            Y_all[:, alive[dead | idle]] = np.maximum(y[:, dead | idle], 0.0)
            keep = ~(dead | idle)
            if np.any(idle):
                pruned.append(alive[idle])
                logger.debug("structured IPM iteration %d: %d idle outputs leave the LP", it, int(idle.sum()))
                # each idle column moves, with its slacks, onto the kept output that takes it at the
                # least cost: a sum of points of the cone is one, so the iterate stays primal feasible
                # (mDP rows and unit rows), where dropping the mass left the unit rows short by it
                # and the method stalled there (gaussian 300: primal below the bound after 50 iterations)
                gone, stay = np.flatnonzero(idle), np.flatnonzero(keep)
                to = stay[np.argmin(g[:, stay].T @ z[:, gone], axis=0)]
                np.add.at(z.T, to, z[:, gone].T)
                np.add.at(s.T, to, s[:, gone].T)
            alive = alive[keep]
            z, s, y, w, g, ATy = (np.ascontiguousarray(v[:, keep]) for v in (z, s, y, w, g, ATy))
            K = alive.size
            n_comp = K * (m + E)
            Hinv.keep(K)
            pobj = _dot(g, z)
        history.append((pobj / scale, best[0] / scale, ti - t0))
        if on_iteration is not None:
            on_iteration(it, pobj / scale, best[0] / scale)
        logger.debug("structured IPM iteration %d: primal %.10g, bound %.10g, %d outputs, %.1f s", it,
                     pobj / scale, best[0] / scale, K, ti - t0)
        rp = ops.A_all(z)
        rp += s
        np.negative(rp, out=rp)
        ru = 1.0 - z.sum(axis=1)
        if pobj - best[0] <= tolerance * abs(pobj) and float(np.abs(ru).max()) <= 1e-9:
            status = "optimal"
            break
        if probe is not None and pobj - best[0] <= probe_gap * abs(pobj):
            mu_b = np.empty(m)
            mu_b[order] = best[1]
            stop = probe(mu_b / scale, _live(Y_all.shape[1], pruned))
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
        rd = ATy
        rd += g
        rd -= mu[:, None]
        rd -= w
        np.negative(rd, out=rd)
        nu = (_dot(z, w) + _dot(s, y)) / n_comp
        theta = y / s
        diag = Pdiag @ theta
        diag += w / z  # records x outputs
        off = Poff @ theta
        M = Hinv.invert(off, diag, uflat, uflat_t)
        if M is None:
            status = "numerical"
            logger.info("structured IPM: factorisation failed at iteration %d", it)
            break
        if lapack_nogil.potrf(M) != 0:
            status = "numerical"
            logger.info("structured IPM: unit-row system not positive definite at iteration %d", it)
            break

        newton = _Newton(ops, Hinv, M, theta, z, s, y, w)
        solve, steps = newton.solve, newton.steps

        # predictor (affine scaling), Mehrotra's centring and second-order corrector
        d = solve(rp, ru, rd, -z * w, -s * y)
        ap, ad = steps(d)
        dz, ds, dy, dw, _ = d
        # the mean complementarity product after the step, expanded (no temporaries)
        nu_aff = (_dot(z, w) + ap * _dot(dz, w) + ad * _dot(z, dw) + ap * ad * _dot(dz, dw)
                  + _dot(s, y) + ap * _dot(ds, y) + ad * _dot(s, dy) + ap * ad * _dot(ds, dy)) / n_comp
        sigma = min(1.0, (nu_aff / nu) ** 3)
        target = sigma * nu
        rzw_t = target - z * w - dz * dw
        rsy_t = s * y
        rsy_t += ds * dy
        np.subtract(target, rsy_t, out=rsy_t)
        d = solve(rp, ru, rd, rzw_t, rsy_t)
        ap, ad = steps(d)
        for _ in range(CORRECTORS):
            # Gondzio: push the products at a longer trial step back into [0.1, 10] x the target
            tp, td = min(1.0, 1.5 * ap + 0.1), min(1.0, 1.5 * ad + 0.1)
            dz, ds, dy, dw, _ = d
            cz = _gondzio(z, dz, w, dw, tp, td, target)
            cs = _gondzio(s, ds, y, dy, tp, td, target)
            c = solve(None, None, None, cz, cs)
            d2 = tuple(u + v for u, v in zip(d, c))
            ap2, ad2 = steps(d2)
            if ap2 + ad2 < 1.01 * (ap + ad):
                break
            d, ap, ad = d2, ap2, ad2
        dz, ds, dy, dw, dmu = d
        logger.debug("structured IPM step %d: primal %.3f, dual %.3f, sigma %.2g, nu %.3g", it, ap, ad, sigma, nu)
        ap, ad = STEP_FRACTION * ap, STEP_FRACTION * ad
        z += ap * dz
        s += ap * ds
        y += ad * dy
        w += ad * dw
        mu += ad * dmu
        done += 1
        last = time.perf_counter() - ti
    bound, mu_p, y_b, alive_b = best
    # the certificate of the best bound: the multipliers then of the outputs then alive, those
    # frozen when dropped of the others
    Y_all[:, alive_b] = np.maximum(y_b, 0.0)
    Z_all[:, alive] = z
    Z_out = np.empty((m, Z_all.shape[1]))
    Z_out[order] = np.clip(Z_all, 0.0, None)
    mu_b = np.empty(m)
    mu_b[order] = mu_p
    return IPMResult(Z=Z_out, mu=mu_b / scale, Y=Y_all / scale,
                     bound=bound / scale, primal=pobj / scale, iterations=done, status=status,
                     seconds=time.perf_counter() - t0, history=history, alive=int(alive.size),
                     pruned=np.sort(np.concatenate(pruned)) if pruned else np.zeros(0, dtype=np.int64))


def _live(K: int, pruned: list[np.ndarray]) -> np.ndarray:
    """The outputs of ``K`` still in the restricted LP: all but the pruned ones (the dead stay, their
    frozen certificates being part of the LP's bound)."""
    out = np.ones(K, dtype=bool)
    for p in pruned:
        out[p] = False
    return np.flatnonzero(out)


def _gondzio(v: np.ndarray, dv: np.ndarray, x: np.ndarray, dx: np.ndarray, tp: float, td: float, target: float
             ) -> np.ndarray:
    """Gondzio's correction of the products ``(v + tp dv)(x + td dx)``: towards ``[0.1, 10]`` x
    ``target``, by at most ``10 target`` down."""
    p = v + tp * dv
    p *= x + td * dx
    c = np.clip(p, 0.1 * target, 10 * target)
    c -= p
    return np.maximum(c, -10 * target, out=c)
