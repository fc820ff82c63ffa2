"""The structured IPM's per-output inverses ``H_k^-1``, through a nested dissection's tree.

With ``H = [[D, B'], [B, C]]`` at a separator node (``D`` = its two parts, ``C`` the separator),
``W = D^-1 B'`` and the Schur complement ``S = C - B W = L L'``, ``H^-1 = blockdiag(D^-1, 0) + U U'``
with ``U = [W; -I] L^-T``; the parts' inverses are the same form, down to the leaves, which are
inverted densely (:mod:`~securelp.solvers.mdp.ipm.dissection`). Every BLAS/LAPACK call goes through
:mod:`~securelp.solvers.mdp.ipm.lapack`, which releases the GIL, so the outputs are shared by threads.
"""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from securelp.solvers.mdp.ipm import lapack as lapack_nogil
from securelp.solvers.mdp.ipm.dissection import Dissection
from securelp.solvers.mdp.rowops import row_blocks, run_blocks

__all__ = ["Inverses"]


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
        if self.top + n > self.buf.size:  # pragma: no cover - sized by Inverses._need_* beforehand
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


class Inverses:
    """The ``K`` per-output inverses ``H_k^-1`` through the tree of a nested :class:`Dissection`.

    With ``H = [[D, B'], [B, C]]`` at a separator node (``D`` = its two parts, ``C`` the
    separator), ``W = D^-1 B'`` and the Schur complement ``S = C - B W = L L'``,
    ``H^-1 = blockdiag(D^-1, 0) + U U'`` with ``U = [W; -I] L^-T``; the parts' inverses are the
    same form, down to the leaves, which are inverted densely. Each output keeps its leaves'
    inverses and its nodes' ``U`` (``m_node x s``); ``B'`` is zero but in the rows adjacent to the
    separator, so ``W`` is the parts' inverses applied to those rows only, through the tree. An
    inverse costs about :meth:`Dissection.flops`; ``sum_k H_k^-1`` gets the leaves' blocks and a
    ``syrk`` of every ``U``. Without a dissection the tree is one leaf (the dense inverse).

    Every array is allocated once; the BLAS/LAPACK calls go through :mod:`securelp.solvers.mdp.ipm.lapack` and
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
