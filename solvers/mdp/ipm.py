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
see :func:`dissection` and :func:`_dissected_inverse`) instead of a factorisation of the whole
LP's ``(m + E) K``-row normal equations, which is what a general IPM would face (HiGHS's IPX: 80 iterations and 166 s on gaussian 300's component, where
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

import itertools
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.linalg import blas, lapack

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

#: the nested-dissection form of the per-output inverses is used from this many records on (below
#: it the dense inverse is as fast), when its estimated flops are at most :data:`DISSECT_MAX_COST`
#: of the dense inverse's
DISSECT_MIN_RECORDS = 300
DISSECT_MAX_COST = 0.6

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


def _dense_inverse(H: np.ndarray, out: np.ndarray | None = None) -> np.ndarray | None:
    """The inverse of the symmetric positive definite ``H`` (both triangles), written into ``out``
    when given, or None when its Cholesky factorisation fails."""
    n = H.shape[0]
    c, info = lapack.dpotrf(H, lower=1, clean=1)
    if info != 0:
        return None
    hi, info = lapack.dpotri(c, lower=1, overwrite_c=1)
    if info != 0:
        return None
    # potri fills the lower triangle and clean=1 left the upper one zero, so hi + hi' less its
    # diagonal is the whole inverse
    out = np.add(hi, hi.T, out=out)
    out.flat[::n + 1] -= np.diagonal(hi)
    return out


def _inverse(H: np.ndarray, d: Dissection | None) -> np.ndarray | None:
    """The dense inverse of ``H`` (symmetric positive definite, both triangles, records in the
    order of ``d``), through the dissection when there is one; None when a factorisation fails."""
    if d is None:
        return _dense_inverse(H)
    blocks = _dissected_inverse(H, d)
    if blocks is None:
        return None
    inv1, inv2, U = blocks
    n1, n2 = d.p1, d.p1 + d.p2
    out = U @ U.T
    out[:n1, :n1] += inv1
    out[n1:n2, n1:n2] += inv2
    return out


def _dissected_inverse(H: np.ndarray, d: Dissection) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``H^-1 = blockdiag(D1^-1, D2^-1, 0) + U U'`` as ``(D1^-1, D2^-1, U)``. With
    ``H = [[D, B'], [B, C]]`` (``D = blockdiag(D1, D2)`` the parts, ``C`` the separator),
    ``W = D^-1 B'`` and the Schur complement ``S = C - B W = L L'``,
    ``H^-1 = blockdiag(D^-1, 0) + [W; -I] S^-1 [W; -I]'``, so ``U = [W; -I] L^-T``. ``B'`` is zero
    but in the rows of the records adjacent to the separator. None when a factorisation fails."""
    m, n1, n2 = d.m, d.p1, d.p1 + d.p2
    inv1 = _inverse(H[:n1, :n1], d.sub1)
    inv2 = _inverse(H[n1:n2, n1:n2], d.sub2) if inv1 is not None else None
    if inv2 is None:
        return None
    W = np.empty((m, d.s))
    if d.s == 0:
        return inv1, inv2, W
    bt1, bt2 = H[:n1, n2:][d.near1], H[n1:n2, n2:][d.near2]
    np.matmul(inv1[:, d.near1], bt1, out=W[:n1])
    np.matmul(inv2[:, d.near2], bt2, out=W[n1:n2])
    S = H[n2:, n2:] - bt1.T @ W[:n1][d.near1] - bt2.T @ W[n1:n2][d.near2]
    L, info = lapack.dpotrf(S, lower=1, clean=1)
    if info != 0:
        return None
    W[n2:] = -np.eye(d.s)
    return inv1, inv2, blas.dtrsm(1.0, L, W, side=1, lower=1, trans_a=1)


class _Inverses:
    """The ``K`` per-output inverses ``H_k^-1``: dense (``dense``, ``K x m x m``) or, with a
    :class:`Dissection`, as ``blockdiag(D1_k^-1, D2_k^-1, 0) + U_k U_k'`` (``inv1``, ``inv2``, ``U``
    of ``m x s``; :func:`_dissected_inverse`), which costs about ``p1^3 + p2^3 + m^2 s`` flops
    instead of ``m^3`` and less memory. Products with them are split over ``pool``'s threads."""

    def __init__(self, K: int, m: int, d: Dissection | None, pool: ThreadPoolExecutor | None = None,
                 threads: int = 1) -> None:
        self.d, self.m, self.pool, self.threads = d, m, pool, threads
        if d is None:
            self.dense = np.empty((K, m, m))
        else:
            self.inv1 = np.empty((K, d.p1, d.p1))
            self.inv2 = np.empty((K, d.p2, d.p2))
            self.U = np.empty((K, m, d.s))

    def keep(self, K: int) -> None:
        """Only the first ``K`` outputs stay (after outputs were dropped)."""
        if self.d is None:
            self.dense = self.dense[:K]
        else:
            self.inv1, self.inv2, self.U = self.inv1[:K], self.inv2[:K], self.U[:K]

    def set(self, k: int, H: np.ndarray, M: np.ndarray) -> bool:
        """Invert ``H`` (symmetric positive definite, both triangles) as output ``k``'s and add the
        inverse to ``M``; False when a factorisation fails."""
        d = self.d
        if d is None:
            if _dense_inverse(H, out=self.dense[k]) is None:
                return False
            M += self.dense[k]
            return True
        blocks = _dissected_inverse(H, d)
        if blocks is None:
            return False
        inv1, inv2, U = blocks
        n1, n2 = d.p1, d.p1 + d.p2
        self.inv1[k], self.inv2[k], self.U[k] = inv1, inv2, U
        M[:n1, :n1] += inv1
        M[n1:n2, n1:n2] += inv2
        # U U' into the lower triangle only (M is Fortran-ordered, so this is in place)
        if d.s:
            blas.dsyrk(1.0, U, beta=1.0, c=M, lower=1, overwrite_c=1)
        return True

    def spans(self) -> list[slice]:
        """The outputs split into one contiguous span per thread."""
        K = self.U.shape[0] if self.d is not None else self.dense.shape[0]
        cuts = np.linspace(0, K, min(self.threads, max(K, 1)) + 1).astype(int)
        return [slice(a, b) for a, b in itertools.pairwise(cuts) if b > a]

    def run(self, fn: Callable[[slice], None]) -> None:
        """``fn(span)`` for every span of :meth:`spans`, on the pool's threads."""
        spans = self.spans()
        if self.pool is not None and len(spans) > 1:
            list(self.pool.map(fn, spans))
        else:
            for sl in spans:
                fn(sl)

    def apply_to(self, sl: slice, h: np.ndarray, out: np.ndarray) -> None:
        """``out = H_k^-1 h`` for the outputs ``k`` of ``sl`` (``h``, ``out``: theirs)."""
        if self.d is None:
            np.matmul(self.dense[sl], h[:, :, None], out=out[:, :, None])
            return
        d = self.d
        n1, n2 = d.p1, d.p1 + d.p2
        U = self.U[sl]
        np.matmul(U, np.matmul(h[:, None, :], U)[:, 0, :, None], out=out[:, :, None])
        out[:, :n1] += np.matmul(self.inv1[sl], h[:, :n1, None])[:, :, 0]
        out[:, n1:n2] += np.matmul(self.inv2[sl], h[:, n1:n2, None])[:, :, 0]


def _invert_outputs(Hinv: _Inverses, ks: range, work: np.ndarray, uflat: np.ndarray, uflat_t: np.ndarray,
                    off: np.ndarray, diag: np.ndarray) -> np.ndarray | None:
    """Build ``H_k`` in ``work`` (its off-diagonal entries ``off[k]`` at the flat positions
    ``uflat``/``uflat_t``, its diagonal ``diag[k]``) and invert it into ``Hinv`` for every ``k`` in
    ``ks``, with a regularised diagonal when the factorisation fails; the sum of the inverses
    (Fortran order, lower triangle exact: all ``potrf`` reads), or None when one fails even so."""
    m = work.shape[0]
    Mt = np.zeros((m, m), order="F")
    wf = work.reshape(-1)
    for k in ks:
        for reg in (0.0, 1e-12, 1e-9):
            work.fill(0.0)
            wf[uflat] = off[k]
            wf[uflat_t] = off[k]
            wf[::m + 1] = diag[k] * (1.0 + reg) + reg * float(diag[k].max())
            if Hinv.set(k, work, Mt):
                break
        else:
            return None
    return Mt


class _Newton:
    """One iteration's Newton system, factorised: the per-output inverses ``Hinv``, the unit-row
    Schur complement's Cholesky factor ``Lm``, and the iterate it linearises at."""

    def __init__(self, A: sp.csr_matrix, AT: sp.csr_matrix, Hinv: _Inverses, Lm: np.ndarray, theta: np.ndarray,
                 z: np.ndarray, s: np.ndarray, y: np.ndarray, w: np.ndarray) -> None:
        self.A, self.AT, self.Hinv, self.Lm, self.theta = A, AT, Hinv, Lm, theta
        self.z, self.s, self.y, self.w = z, s, y, w

    def solve_once(self, rp: np.ndarray, ru: np.ndarray, rd: np.ndarray, rzw: np.ndarray, rsy: np.ndarray
                   ) -> tuple[np.ndarray, ...]:
        """``(dz, ds, dy, dw, dmu)`` for the residuals of the primal rows, unit rows, dual rows and
        the two complementarity blocks; ``ds`` and ``dw`` from the linear equations, so those hold
        to rounding whatever the error of the solve."""
        A, AT, Hinv, theta, z, s = self.A, self.AT, self.Hinv, self.theta, self.z, self.s
        # every output's share is independent but for dmu: two passes over the outputs, split
        # over the threads, and the unit-row solve between them
        Hh, dz, ds, dy, dw = (np.empty_like(v) for v in (z, z, s, s, z))

        def first(sl: slice) -> None:
            h = rd[sl] + (AT @ (theta[sl] * rp[sl] - rsy[sl] / s[sl]).T).T + rzw[sl] / z[sl]
            Hinv.apply_to(sl, h, Hh[sl])

        Hinv.run(first)
        dmu = lapack.dpotrs(self.Lm, ru - Hh.sum(axis=0), lower=1)[0]

        def second(sl: slice) -> None:
            Hinv.apply_to(sl, np.broadcast_to(dmu, Hh[sl].shape), dz[sl])
            dz[sl] += Hh[sl]
            ds[sl] = rp[sl] - (A @ dz[sl].T).T
            dy[sl] = rsy[sl] / s[sl] - theta[sl] * ds[sl]
            dw[sl] = (AT @ dy[sl].T).T - dmu - rd[sl]

        Hinv.run(second)
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
    """The largest step in [0, 1] that keeps ``v + step dv`` nonnegative (``v > 0``)."""
    ratio = np.divide(v, dv, out=np.full(v.shape, -np.inf), where=dv < 0)  # <= 0 where dv < 0
    top = float(ratio.max())
    return min(1.0, -top) if top > -np.inf else 1.0


def structured_ipm(G: np.ndarray, A: sp.csr_matrix, deadline: float, *, tolerance: float = 1e-8,
                   max_iterations: int = 200, probe_gap: float = 0.0,
                   probe: Callable[[np.ndarray], bool] | None = None, threads: int = 1) -> IPMResult:
    """Solve the component LP over the outputs ``G`` (records x outputs, prior-weighted loss) by
    the structured interior-point method of the module docstring, until the relative distance of
    the primal objective and the certified bound is at most ``tolerance``, ``deadline``
    (``time.perf_counter()`` seconds; an iteration is not begun when the last one's time would
    pass it) or ``max_iterations``.

    ``probe``: called once, with the unit-row duals of the best bound so far, when that distance
    first falls to ``probe_gap``; when it returns True the method stops there (status ``probed``).
    The output generation of :mod:`solvers.mdp.colgen` prices the other outputs there, and
    restarts with the violated ones instead of finishing a restricted LP that lacks them.

    ``threads``: the per-output inverses and products are spread over this many threads, each
    running BLAS on one thread. numpy and scipy each load their own OpenBLAS, whose thread pools,
    left to themselves, fight for the cores: on gaussian 1,000 (2 cores) a 411-record ``potrf``
    took 10 ms between numpy products and 1.1 ms with one BLAS thread."""
    from threadpoolctl import threadpool_limits

    threads = max(1, int(threads))
    with threadpool_limits(limits=1, user_api="blas"):
        if threads == 1:
            return _structured_ipm(G, A, deadline, tolerance, max_iterations, probe_gap, probe, None, 1)
        with ThreadPoolExecutor(max_workers=threads) as pool:
            return _structured_ipm(G, A, deadline, tolerance, max_iterations, probe_gap, probe, pool, threads)


def _structured_ipm(G: np.ndarray, A: sp.csr_matrix, deadline: float, tolerance: float, max_iterations: int,
                    probe_gap: float, probe: Callable[[np.ndarray], bool] | None, pool: ThreadPoolExecutor | None,
                    threads: int) -> IPMResult:
    """:func:`structured_ipm`'s method, BLAS limited by the caller."""
    t0 = time.perf_counter()
    G = np.asarray(G, dtype=float)
    m, K = G.shape
    A = sp.csr_matrix(A)
    E = A.shape[0]
    if A.shape[1] != m:
        raise InputError(f"the mDP rows have {A.shape[1]} columns for {m} records")
    src, tgt, a = _edge_structure(A)
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
    AT = A.T.tocsr()
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
    Hinv = _Inverses(K, m, plan, pool, threads)
    works = [np.empty((m, m)) for _ in range(threads)]
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
            Hinv.keep(K)
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
            mu_b = np.empty(m)
            mu_b[order] = best[1]
            stop = probe(mu_b / scale)
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
        chunks = [(Hinv, range(t, K, threads), works[t], uflat, uflat_t, off, diag) for t in range(min(threads, K))]
        if pool is not None:
            parts = list(pool.map(_invert_outputs, *zip(*chunks)))
        else:
            parts = [_invert_outputs(*chunks[0])]
        if any(part is None for part in parts):
            status = "numerical"
            logger.info("structured IPM: factorisation failed at iteration %d", it)
            break
        M = parts[0]
        for part in parts[1:]:
            M += part
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
    bound, mu_p, y_b = best
    Z_all[alive] = z
    Z_out = np.empty((m, Z_all.shape[0]))
    Z_out[order] = np.clip(Z_all.T, 0.0, None)
    mu_b = np.empty(m)
    mu_b[order] = mu_p
    return IPMResult(Z=Z_out, mu=mu_b / scale, Y=np.ascontiguousarray(y_b.T) / scale,
                     bound=bound / scale, primal=pobj / scale, iterations=done, status=status,
                     seconds=time.perf_counter() - t0, history=history, alive=int(alive.size))
