"""Attacks on a dense masked product M = A_d B' (m x k) and B c.

Mangasarian (2011) hides A_d (m x n) behind a random B (k x n, k >= n): any invertible Q gives
(A_d Q^-1, Q B) with the same product, so A_d itself is not determined. What M does fix:

``dense_column_space``
    range(M) = range(A_d) when B has full column rank (with probability 1): the column space
    of the block, exactly. Its rank r is revealed; when r = m it is all of R^m and says nothing
    more.
``dense_row_support``
    Row i of M is zero exactly when row i of A_d is (B generic): which constraints the block
    touches.
``dense_row_gram``
    M M' / k = A_d (B'B / k) A_d' estimates A_d A_d' (row norms and inner products), since
    E[B'B] = k I for a standard Gaussian mask; the error falls like sqrt(n/k).
``dense_mask_structure``
    A mask that does not mix columns (identity, scaling, scaled permutation, zero padding) leaves
    rank-many nonzero columns in M: the block's columns up to scale, and B c their costs.
``dense_sparse_recovery``
    The columns of a sparse A_d are sparse vectors of range(M), and generic vectors of an
    r-dimensional subspace of R^m vanish on at most r - 1 coordinates. Choosing r pivot rows I
    (Gaussian elimination on an orthonormal basis Q, rows in random order, threshold pivoting)
    gives V = Q Q_I^-1: column i of V is the only vector of the subspace that is 1 on pivot i
    and 0 on the other r - 1 pivots. When a column a of A_d has pivot i in its support and none
    of the others, V_i = a / a_i. Columns of V with fewer nonzeros than a generic vector (the
    block's support rows less r - 1) are kept; the sparsest basis of all kept vectors is the
    guess. Rounds with fresh random orders repeat until rounds stop making that basis sparser or
    the budget ends. Sparsity alone can mislead (on data with +-1 entries a difference of two
    columns can be sparser than either), so a vector is claimed (a column up to scale) only when
    it is *identifiable* (the only direction of range(M) supported within its support) and the
    basis is complete and passes a test of the mask: W = V^+ M must have independent rows, as
    L B' has for a Gaussian B (``mask_independence``: a combination of columns in V correlates
    rows of W).
``dense_l1_recovery``
    For rows not yet covered (then the rows of the least sparse basis vectors): min ||v||_1 over
    v in range(M) with v_i = 1, the classic convex surrogate of the sparsest vector (an LP, solved
    with HiGHS through securelp.solvers.lp in its dual form).
``dense_costs``
    Once all n columns are known up to scale (A_d = V L, L diagonal), L B' = V^+ M follows, then
    L^-1 c = (V^+ M)'^+ (B c): every cost up to the same scale as its column. The normalization
    of round numbers (securelp.coordinator.audit.scales.fit_scales, here with any scale; with x
    revealed only among the factors that put x_i = (V^+ M u)_i / l_i on a value the columns can
    take) then proposes values, signs and positions: **best guesses**, never claims, since
    roundness does not confirm a factor.
``dense_single_column``
    One dense-masked column (rank-1 M = a b') and x revealed: M u = a x_f, so once x_f is known
    (the single value the party's revealed x_j leaves to its dense column after the monomial
    columns' matching, :mod:`securelp.coordinator.audit.monomial`), a = M u / x_f, b = M'a/|a|^2,
    c_f = b'(B c)/|b|^2 exactly: claimed. With r >= 2 dense columns the same x gives only the
    combination A_d x_d = M u and c_d'x_d = (B c)'u, and each column once the other r - 1 are known.

Every attack takes a :class:`~securelp.coordinator.audit.view.MaskedProduct`, a product
attributed to a set of parties: one party in the plain protocol, all of them when only a sum
sum_j A_j B_j' is revealed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from securelp.coordinator.audit.budget import Budget
from securelp.coordinator.audit.columns import ZERO_TOL
from securelp.coordinator.audit.numbers import MAX_DIGITS, REL_TOL
from securelp.coordinator.audit.results import (
    GUESS,
    AttackOutcome,
    AttackStatus,
    RecoveredColumns,
    not_applicable,
    skipped,
)
from securelp.coordinator.audit.scales import fit_scales
from securelp.coordinator.audit.view import MaskedProduct

FAMILY = "dense"
#: relative singular-value threshold of the numerical rank of M (masked products of rank-deficient
#: data have a gap of 10 or more orders of magnitude there)
RANK_TOL = 1e-9
#: threshold pivoting: a pivot is acceptable when at least this fraction of its column's largest
PIVOT_THRESHOLD = 0.1
#: rounds of random pivots at most, and rounds in a row without a new column before stopping
MAX_ROUNDS = 200
STALE_ROUNDS = 12
#: l1 programs at most per product, and in a row without a sparse vector before stopping (a
#: generic subspace has none: every program then returns a dense vector)
MAX_L1 = 200
L1_STALE = 3
#: rows of M above which the m x m Gram estimate is not formed (memory m^2 doubles)
MAX_GRAM_ROWS = 4000
#: share of the remaining budget one iterative search may use
SEARCH_SHARE = 0.5
#: eigenvalues of Q_S Q_S' within this of 1 count as directions of range(Q) supported on S
IDENTIFIABLE_TOL = 1e-8
#: false-alarm rate of the mask-independence test of a found basis (a right basis fails it, and
#: its columns go unclaimed, once in a thousand audits)
INDEPENDENCE_ALPHA = 1e-3
#: relative agreement of "this x entry equals this candidate value"
X_MATCH_TOL = 1e-7
#: what counts as round for values computed through factorizations of M (errors near 1e-12)
DENSE_MAX_DIGITS = 6
DENSE_REL_TOL = 1e-9


def polish_direction(Q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The vector of range(Q) (Q orthonormal) supported on the support S of ``v``, to working
    accuracy: for v_S, (I - Q Q') v = 0 reads (I - Q_S Q_S') v_S = 0, so v_S is the eigenvector of
    the small |S| x |S| matrix Q_S Q_S' for its eigenvalue 1. Normalized as ``v`` (first nonzero 1)."""
    S = np.flatnonzero(v)
    if S.size <= 1:
        return v
    QS = Q[S]
    _, U = np.linalg.eigh(QS @ QS.T)
    w = np.zeros_like(v)
    w[S] = U[:, -1]
    return w / w[S[0]]


@dataclass(frozen=True, eq=False)
class ColumnSpace:
    """An orthonormal basis Q (m x r) of range(M) and its rank."""

    Q: np.ndarray
    rank: int


def orthonormal_range(X: np.ndarray, tol: float = RANK_TOL) -> np.ndarray:
    """An orthonormal basis of range(X): a thin QR of the longer side, then the SVD of the small
    triangular factor (rank by singular values, which fall by many orders of magnitude at the
    numerical rank of a rank-deficient product). Column-pivoted QR would do too but is BLAS-2 and
    measured 20-30 times slower on a 1000 x 110 product."""
    m, k = X.shape
    if X.size == 0:
        return np.zeros((m, 0))
    if k <= m:
        Q, R = scipy.linalg.qr(X, mode="economic", check_finite=False)
        U, s, _ = scipy.linalg.svd(R, lapack_driver="gesvd", check_finite=False)
        U = Q @ U
    else:  # X = R' Q': range(X) = range(R'), an m x m factor
        _, R = scipy.linalg.qr(X.T, mode="economic", check_finite=False)
        U, s, _ = scipy.linalg.svd(R.T, lapack_driver="gesvd", check_finite=False)
    r = int(np.sum(s > tol * s[0])) if s.size and s[0] > 0 else 0
    return np.ascontiguousarray(U[:, :r])


def column_space(M: np.ndarray) -> ColumnSpace:
    """range(M) (numerical rank at :data:`RANK_TOL` of the largest singular value)."""
    Q = orthonormal_range(M)
    return ColumnSpace(Q, Q.shape[1])


def _range_flops(m: int, k: int) -> float:
    return 4.0 * m * k * min(m, k)


def _random_pivots(Q: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """r pivot rows of Q (m x r) by Gaussian elimination on Q' with rows in random order and
    threshold pivoting (the first acceptable row in that order is taken)."""
    m, r = Q.shape
    order = rng.permutation(m)
    X = Q[order].copy()
    alive = np.ones(m, dtype=bool)
    pivots = np.empty(r, dtype=np.int64)
    for j in range(r):
        colj = np.abs(X[:, j])
        colj[~alive] = 0.0
        big = colj.max()
        if big == 0:
            return pivots[:j]
        p = int(np.argmax(colj >= PIVOT_THRESHOLD * big))  # first acceptable in the random order
        pivots[j] = order[p]
        alive[p] = False
        if j + 1 < r:
            factors = X[:, j] / X[p, j]
            factors[~alive] = 0.0
            X[:, j + 1:] -= np.outer(factors, X[p, j + 1:])
    return pivots


def _generic_support(Q: np.ndarray) -> int:
    """Nonzeros of a generic vector of range(Q) that vanishes on r - 1 chosen rows: the rows where
    the subspace is not identically zero (the block's row support), less r - 1."""
    live = int(np.count_nonzero(np.linalg.norm(Q, axis=1) > 1e-12))
    return live - Q.shape[1] + 1


def _sparse_columns(V: np.ndarray, generic_support: int) -> list[np.ndarray]:
    """Columns of V whose support (entries above ZERO_TOL of the column's largest) is smaller than
    a generic vector's; each normalized so its first nonzero is 1."""
    out = []
    big = np.abs(V).max(axis=0)
    for i in range(V.shape[1]):
        if big[i] == 0:
            continue
        v = V[:, i].copy()
        v[np.abs(v) <= ZERO_TOL * big[i]] = 0.0
        nz = np.flatnonzero(v)
        if 0 < nz.size < generic_support:
            out.append(v / v[nz[0]])
    return out


class _Found:
    """Sparse directions found so far (distinct, keyed by support and rounded values), and the
    sparsest basis they contain: greedy by support size, a vector taken when it is independent of
    those taken before (a matroid greedy, so no basis of the pool has a smaller total support).
    A combination of two columns is sparse too, but the columns themselves, once found, are
    sparser and displace it."""

    def __init__(self, m: int, rank: int) -> None:
        self.m, self.rank = m, rank
        self.pool: dict[bytes, np.ndarray] = {}
        self._basis: list[np.ndarray] | None = []

    def add(self, v: np.ndarray) -> bool:
        nz = np.flatnonzero(v)
        key = nz.astype(np.int32).tobytes() + np.round(v[nz], 6).tobytes()
        if key in self.pool:
            return False
        self.pool[key] = v
        self._basis = None
        return True

    @property
    def vectors(self) -> list[np.ndarray]:
        """The sparsest basis (at most ``rank`` vectors) of what was found."""
        if self._basis is None:
            pool = sorted(self.pool.values(), key=lambda v: int(np.count_nonzero(v)))
            basis: list[np.ndarray] = []
            ortho = np.zeros((self.m, 0))
            for v in pool:
                if len(basis) == self.rank:
                    break
                w = v - ortho @ (ortho.T @ v)
                w -= ortho @ (ortho.T @ w)  # twice is enough (Kahan)
                norm = np.linalg.norm(w)
                if norm > 1e-8 * np.linalg.norm(v):
                    basis.append(v)
                    ortho = np.column_stack([ortho, w / norm])
            self._basis = basis
        return self._basis

    def total_support(self) -> int:
        return int(sum(np.count_nonzero(v) for v in self.vectors))

    def matrix(self) -> sp.csc_matrix:
        vs = self.vectors
        return sp.csc_matrix(np.column_stack(vs)) if vs else sp.csc_matrix((self.m, 0))

    def covered_rows(self) -> np.ndarray:
        covered = np.zeros(self.m, dtype=bool)
        for v in self.vectors:
            covered[v != 0] = True
        return covered


def identifiable(Q: np.ndarray, v: np.ndarray) -> bool:
    """Whether v is the only direction of range(Q) supported within its support S: the vectors of
    range(Q) supported on S are the eigenvectors of Q_S Q_S' for eigenvalue 1. With two or more, v
    may be a combination of columns (two columns with nested or equal supports span such a
    plane), and sparsity alone does not say which vectors of it are columns."""
    S = np.flatnonzero(v)
    if S.size <= 1:
        return True
    QS = Q[S]
    w = np.linalg.eigvalsh(QS @ QS.T)
    return int(np.sum(w > 1.0 - IDENTIFIABLE_TOL)) <= 1


def mask_independence(V: np.ndarray, M: np.ndarray) -> tuple[bool, float, float]:
    """Whether a complete set of column directions V (m x n, spanning range(M)) is consistent with
    the protocol's mask: if V = A_d L^-1 (the columns up to scale), then W = V^+ M = L B' has
    independent Gaussian rows, and k times the squared correlation of two of them is about
    chi-square(1); a combination of columns among V correlates its row with others. Returns
    (passed, the sum over pairs, the threshold: the chi-square quantile with n(n-1)/2 degrees of
    freedom at :data:`INDEPENDENCE_ALPHA`)."""
    from scipy.stats import chi2

    n, k = V.shape[1], M.shape[1]
    if n < 2:
        return True, 0.0, 0.0
    W = np.linalg.lstsq(V, M, rcond=None)[0]
    norms = np.linalg.norm(W, axis=1)
    if np.any(norms == 0):
        return False, np.inf, 0.0
    Wn = W / norms[:, None]
    C = Wn @ Wn.T
    stat = float(k * (np.sum(C ** 2) - n) / 2.0)
    dof = n * (n - 1) / 2.0
    threshold = float(chi2.isf(INDEPENDENCE_ALPHA, dof))
    return stat <= threshold, stat, threshold


def exchangeable_pairs(V: np.ndarray) -> np.ndarray:
    """Which columns of V (sparse directions, m x n) another sparsest basis could replace: for two
    columns v_i, v_j whose supports meet, the combination that zeroes a shared row has support
    |S_i u S_j| less the rows it zeroes; when that is no larger than max(|S_i|, |S_j|), the plane of
    v_i, v_j holds another pair as sparse as they are (two columns with two shared rows give four
    vectors of three nonzeros each), and sparsity alone cannot say which pair is the block's."""
    n = V.shape[1]
    tol = ZERO_TOL * np.maximum(np.abs(V).max(axis=0), 1e-300)
    nz = np.abs(V) > tol
    out = np.zeros(n, dtype=bool)
    sizes = nz.sum(axis=0)
    overlap = nz.T.astype(np.int32) @ nz.astype(np.int32)
    for i, j in zip(*np.nonzero(np.triu(overlap, 1))):
        rows = np.flatnonzero(nz[:, i] | nz[:, j])
        vi, vj = V[rows, i], V[rows, j]
        scale = max(np.abs(vi).max(), np.abs(vj).max())
        for r in np.flatnonzero(nz[rows, i] & nz[rows, j]):
            w = vi - (vi[r] / vj[r]) * vj
            if np.count_nonzero(np.abs(w) > ZERO_TOL * scale) <= max(sizes[i], sizes[j]):
                out[i] = out[j] = True
                break
    return out


def _direction_result(found: _Found, space: ColumnSpace, M: np.ndarray, n: int) -> tuple[RecoveredColumns, dict]:
    """The found directions, and which are claimed: identifiable ones, of a complete set that passes
    :func:`mask_independence` (an incomplete or failing set claims none)."""
    q = len(found.vectors)
    certain = np.array([identifiable(space.Q, v) for v in found.vectors], dtype=bool)
    figures: dict = {"identifiable": int(certain.sum())}
    complete = q == n == space.rank
    if complete:
        V = np.column_stack([polish_direction(space.Q, v) for v in found.vectors])
        passed, stat, threshold = mask_independence(V, M)
        figures.update({"independence_stat": stat, "independence_threshold": threshold, "independent": passed})
        certain &= passed
        exchangeable = exchangeable_pairs(V)
        figures["exchangeable"] = int(exchangeable.sum())
        certain &= ~exchangeable
    else:
        certain[:] = False
    rec = RecoveredColumns(found.matrix(), np.full(q, np.nan), np.zeros(q, dtype=bool),
                           np.full(q, -1, dtype=np.int64), signed_scale=True, direction_claimed=certain)
    return rec, figures


def _l1_sparsest(Q: np.ndarray, row: int, time_limit: float) -> np.ndarray | None:
    """argmin ||Q z||_1 s.t. (Q z)_row = 1, through its LP dual: max t s.t. Q'w = t q_row,
    -1 <= w <= 1 (r equality rows and m + 1 bounded columns, about 8 times faster than the primal's
    2m + 1 rows with HiGHS on a 1000 x 50 basis); z are the duals of its rows."""
    from securelp.solvers.lp import HighsBackend, LinearProgram, SolveStatus

    m, r = Q.shape
    A = sp.hstack([sp.csc_matrix(Q.T), sp.csc_matrix(-Q[row][:, None])], format="csc")
    lp = LinearProgram(c=np.concatenate([np.zeros(m), [-1.0]]), A=A, row_lower=np.zeros(r), row_upper=np.zeros(r),
                       col_lower=np.concatenate([-np.ones(m), [-np.inf]]),
                       col_upper=np.concatenate([np.ones(m), [np.inf]]), name="l1-sparsest-dual")
    res = HighsBackend(time_limit=max(0.05, time_limit)).solve(lp)
    if res.status is not SolveStatus.OPTIMAL or res.row_duals is None:
        return None
    v = Q @ np.asarray(res.row_duals)
    if v[row] == 0:
        return None
    return v / v[row]


def attack_dense(product: MaskedProduct, budget: Budget, rng: np.random.Generator, *,
                 search: bool = True) -> list[AttackOutcome]:
    """All dense attacks on one masked product, cheapest first (see the module docstring).

    ``search=False`` skips the column searches (sparse, l1, costs): the caller already holds the
    block exactly (from the mask rows of rows mode).

    Returns outcomes in the order: dense_row_support, dense_column_space, dense_row_gram,
    dense_mask_structure, dense_single_column, dense_sparse_recovery, dense_l1_recovery, dense_costs. The column space's basis is kept on
    its outcome's artifacts (``basis``), the Gram estimate (``gram``) and the row support (``support``)
    on theirs, for the evaluation.
    """
    parties, n, M = product.parties, product.n_cols, product.M
    m, k = M.shape
    out: list[AttackOutcome] = []
    t0 = time.perf_counter()
    zero_rows = ~np.any(M != 0, axis=1)
    support = AttackOutcome("dense_row_support", FAMILY, parties, AttackStatus.RAN, columns=n,
                            figures={"rows": m, "zero_rows": int(zero_rows.sum()),
                                     "support_rows": int(m - zero_rows.sum())}, seconds=time.perf_counter() - t0)
    support.artifacts["support"] = ~zero_rows
    out.append(support)

    names = ("dense_column_space", "dense_row_gram", "dense_mask_structure", "dense_sparse_recovery",
             "dense_l1_recovery", "dense_costs", "dense_single_column")
    if not budget.allows_flops(_range_flops(m, k)):
        why = budget.refusal(f"the column space of the {m} x {k} masked product", _range_flops(m, k))
        out.append(skipped("dense_column_space", FAMILY, parties, why, n))
        out.extend(skipped(a, FAMILY, parties, f"needs the column space: {why}", n) for a in names[2:])
        out.insert(2, _gram(product, budget))
        return out
    t0 = time.perf_counter()
    space = column_space(M)
    r = space.rank
    whole = r == m
    cs = AttackOutcome("dense_column_space", FAMILY, parties, AttackStatus.RAN, columns=n,
                       figures={"rank": r, "rows": m, "k": k, "whole_space": whole,
                                "full_column_rank": r == n}, seconds=time.perf_counter() - t0)
    cs.artifacts["basis"] = space.Q
    out.append(cs)
    out.append(_gram(product, budget))
    structure = _structure(product, space, budget)
    out.append(structure)
    out.append(_single_column(product, space))

    if not search:
        why = "the block was already recovered exactly from the mask rows"
        out.extend(not_applicable(a, FAMILY, parties, why) for a in names[3:6])
        return out
    if structure.up_to_scale == n and n:
        why = "the mask does not mix the columns: dense_mask_structure has every column up to scale"
        out.extend(not_applicable(a, FAMILY, parties, why) for a in names[3:6])
        return out
    if whole:
        why = (f"the column space is all of R^{m} (rank {r} = m): every vector lies in it, so it singles out "
               "no column")
        out.append(not_applicable("dense_sparse_recovery", FAMILY, parties, why))
        out.append(not_applicable("dense_l1_recovery", FAMILY, parties, why))
        found = _Found(m, r)
    else:
        found = _Found(m, r)
        out.append(_pivot_search(space, found, n, budget, rng, parties, M))
        out.append(_l1_search(space, found, n, budget, parties, M))
    out.append(_costs(product, space, found, budget))
    return out


def _gram(product: MaskedProduct, budget: Budget) -> AttackOutcome:
    parties, n, M = product.parties, product.n_cols, product.M
    m, k = M.shape
    if m > MAX_GRAM_ROWS:
        return skipped("dense_row_gram", FAMILY, parties, f"an {m} x {m} estimate would need "
                       f"{8 * m * m / 2**30:.1f} GiB (limit {MAX_GRAM_ROWS} rows)", n)
    flops = 2.0 * m * m * k
    if not budget.allows_flops(flops):
        return skipped("dense_row_gram", FAMILY, parties, budget.refusal(f"M M' of a {m} x {k} product", flops), n)
    t0 = time.perf_counter()
    G = (M @ M.T) / k
    o = AttackOutcome("dense_row_gram", FAMILY, parties, AttackStatus.RAN, columns=n,
                      figures={"rows": m, "k": k, "expected_rel_error": float(np.sqrt(n / k)) if k else None},
                      seconds=time.perf_counter() - t0)
    o.artifacts["gram"] = G
    return o


def _pivot_search(space: ColumnSpace, found: _Found, n: int, budget: Budget, rng: np.random.Generator,
                  parties: tuple[str, ...], M: np.ndarray) -> AttackOutcome:
    Q, r = space.Q, space.rank
    m = Q.shape[0]
    t0 = time.perf_counter()
    share = SEARCH_SHARE * budget.remaining()
    round_flops = 4.0 * m * r * r  # elimination + V = Q Q_I^-1
    rounds = stale = 0
    stop = f"the limit of {MAX_ROUNDS} rounds"
    generic = _generic_support(Q)
    best = None
    if r == 1:  # a one-dimensional column space is the column itself
        v = Q[:, 0].copy()
        v[np.abs(v) <= ZERO_TOL * np.abs(v).max()] = 0.0
        found.add(v / v[np.flatnonzero(v)[0]])
        stale, stop = STALE_ROUNDS, "the column space is one column"
    while rounds < MAX_ROUNDS:
        if stale >= STALE_ROUNDS:
            stop = stop if r == 1 else f"{STALE_ROUNDS} rounds in a row made the sparsest basis no sparser"
            break
        if time.perf_counter() - t0 + round_flops / 2e9 > share or budget.expired():
            stop = "its share of the budget ended"
            break
        rounds += 1
        piv = _random_pivots(Q, rng)
        V = None
        if piv.size == r:
            try:
                V = scipy.linalg.solve(Q[piv].T, Q.T, check_finite=False).T  # V = Q Q_I^-1
            except (scipy.linalg.LinAlgError, ValueError):
                V = None
        if V is not None:
            for v in _sparse_columns(V, generic):
                found.add(v)
        score = (len(found.vectors), -found.total_support())
        if best is None or score > best:
            best, stale = score, 0
        else:
            stale += 1
    rec, cert = _direction_result(found, space, M, n)
    o = AttackOutcome("dense_sparse_recovery", FAMILY, parties, AttackStatus.RAN, columns=n,
                      up_to_scale=int(rec.directions_claimed.sum()),
                      figures={"rounds": rounds, "found": len(found.vectors), "candidates": len(found.pool),
                               "generic_support": generic, "stopped_by": stop, **cert},
                      seconds=time.perf_counter() - t0, recovered=rec)
    if stop == "its share of the budget ended":
        o.reason = "the budget ended the search before it stopped finding sparser vectors"
    return o


def _l1_search(space: ColumnSpace, found: _Found, n: int, budget: Budget, parties: tuple[str, ...],
               M: np.ndarray) -> AttackOutcome:
    Q, r = space.Q, space.rank
    t0 = time.perf_counter()
    share = SEARCH_SHARE * budget.remaining()
    live = np.linalg.norm(Q, axis=1) > 1e-12
    # rows no basis vector touches first, then the rows of the least sparse basis vectors (the
    # likeliest combinations of columns), until every row was tried or the budget ends
    covered = found.covered_rows()
    targets = list(np.flatnonzero(live & ~covered))
    for v in sorted(found.vectors, key=lambda v: -int(np.count_nonzero(v))):
        targets.extend(int(i) for i in np.flatnonzero(v) if i not in targets)
    if len(found.vectors) == r and not targets[:0] and len(np.flatnonzero(live & ~covered)) == 0 \
            and max((np.count_nonzero(v) for v in found.vectors), default=0) <= min(
                (np.count_nonzero(v) for v in found.vectors), default=0):
        targets = []
    before = found.total_support()
    programs = 0
    stop = "every row tried"
    generic = _generic_support(Q)
    tried: set[int] = set()
    barren = 0
    for row in targets:
        if row in tried:
            continue
        if programs >= MAX_L1:
            stop = f"the limit of {MAX_L1} programs"
            break
        if barren >= L1_STALE:
            stop = f"{L1_STALE} programs in a row found no sparse vector"
            break
        left = share - (time.perf_counter() - t0)
        if left <= 0 or budget.expired():
            stop = "its share of the budget ended"
            break
        tried.add(row)
        v = _l1_sparsest(Q, int(row), left)
        programs += 1
        barren += 1
        if v is None:
            continue
        big = np.abs(v).max()
        v[np.abs(v) <= ZERO_TOL * big] = 0.0
        nz = np.flatnonzero(v)
        if 0 < nz.size < generic:
            found.add(v / v[nz[0]])
            barren = 0
            tried.update(int(i) for i in nz)  # its other rows would give the same vector
    rec, cert = _direction_result(found, space, M, n)
    o = AttackOutcome("dense_l1_recovery", FAMILY, parties, AttackStatus.RAN, columns=n,
                      up_to_scale=int(rec.directions_claimed.sum()),
                      figures={"programs": programs, "support_before": before, "support_after": found.total_support(),
                               "stopped_by": stop if targets else "nothing left to improve", **cert},
                      seconds=time.perf_counter() - t0, recovered=rec)
    if stop == "its share of the budget ended":
        o.reason = "the budget ended the l1 programs before every row was tried"
    return o


@dataclass(frozen=True, eq=False)
class _ColumnValues:
    A: sp.csc_matrix
    c: np.ndarray
    basis: np.ndarray
    position_guess: np.ndarray
    figures: dict


#: values of x allowed per column at most when they restrict the scales of dense columns
MAX_X_CANDIDATES = 256


def _x_scale_candidates(wu: np.ndarray, x_candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(column, d) pairs the revealed values allow: |l_i| x = |(wu)_i| for some candidate x, so d = 1/|l_i|
    = |x| / |(wu)_i| (columns with (wu)_i = 0 are left free). None when there are too many values."""
    xs = np.unique(np.abs(x_candidates[x_candidates != 0]))
    live = np.flatnonzero(wu != 0)
    if not xs.size or not live.size or xs.size > MAX_X_CANDIDATES:
        return None
    cols = np.repeat(live, xs.size)
    d = np.tile(xs, live.size) / np.abs(wu[cols])
    return cols, d


def values_from_directions(V: sp.csc_matrix, g: np.ndarray, wu: np.ndarray | None, x_values: np.ndarray | None,
                           budget: Budget, *, max_digits: int, rel_tol: float, positive: bool = False,
                           x_candidates: np.ndarray | None = None) -> _ColumnValues:
    """Best guesses of the values of columns known up to a factor each: a_i = l_i v_i, c_i = l_i g_i,
    x_i = (wu)_i / l_i.

    |l_i| comes from round numbers (:func:`securelp.coordinator.audit.scales.fit_scales` with any
    scale: 1/|l_i| plays the monomial d), restricted, when x is revealed, to the factors that put
    x_i on one of the values the columns can take (``x_candidates``, by default every entry of
    ``x_values``); its sign and a position from the entry of x equal to +-(wu)_i / |l_i|.
    ``positive``: where x does not tell the sign, take l_i > 0 (a mask that only scales). Nothing
    here is claimed: roundness does not confirm a factor (see :mod:`~securelp.coordinator.audit.scales`).
    """
    n = V.shape[1]
    allowed = None
    if wu is not None and x_values is not None:
        allowed = _x_scale_candidates(wu, x_values if x_candidates is None else x_candidates)
    fit = fit_scales(V, g, np.zeros(n), np.zeros(n), budget, spread=np.inf, allowed=allowed, max_digits=max_digits,
                     rel_tol=rel_tol)
    lam = 1.0 / fit.scale  # |l|
    sign = np.zeros(n)
    position = np.full(n, -1, dtype=np.int64)
    if wu is not None and x_values is not None:
        order = np.argsort(x_values, kind="stable")
        xs = x_values[order]
        for i in np.flatnonzero(wu):
            hits = []
            for s in (1.0, -1.0):
                target = s * wu[i] / lam[i]
                tol = X_MATCH_TOL * abs(target)
                a, b = np.searchsorted(xs, target - tol), np.searchsorted(xs, target + tol, side="right")
                if b > a:
                    hits.append((s, a, b))
            if len(hits) == 1:
                s, a, b = hits[0]
                sign[i] = s
                if b - a == 1:
                    position[i] = int(order[a])
    from_x = int((sign != 0).sum())
    if positive:
        sign[sign == 0] = 1.0
    signed_lam = np.where(sign != 0, sign, 1.0) * lam
    basis = fit.classes(learnt=False)
    basis = np.array([GUESS + "dense_" + str(b)[len(GUESS):] if b else "" for b in basis], dtype=object)
    figures = {"round_scales": int(fit.every_round.sum()), "ambiguous": int(fit.ambiguous.sum()),
               "signs_from_x": from_x, "best_guess": int(fit.has.sum())}
    return _ColumnValues(sp.csc_matrix(V @ sp.diags(signed_lam)), g * signed_lam, basis, position, figures)


def _single_column(product: MaskedProduct, space: ColumnSpace) -> AttackOutcome:
    """``dense_single_column``: one dense-masked column, M = a b' (rank 1), with x revealed. M u = a x_f,
    so a = M u / x_f, b = M'a / |a|^2 and c_f = b'(B c) / |b|^2: exactly, once x_f is known. x_f is
    known when the values the party's dense column can take (what the revealed x_j leaves after the
    monomial columns' matching) are a single nonzero value."""
    parties, M = product.parties, product.M
    name = "dense_single_column"
    if product.n_cols != 1 or space.rank != 1:
        return not_applicable(name, FAMILY, parties, f"the guess from x_j needs a single dense-masked column; {product.n_cols} are mixed under one mask")
    if product.u is None or product.u.size != M.shape[1]:
        return not_applicable(name, FAMILY, parties, "no optimal solution was sent")
    cand = product.x_candidates if product.x_candidates is not None else product.x_values
    if cand is None:
        return not_applicable(name, FAMILY, parties, "x_j was not revealed: the column is known up to a factor (its "
                              "direction, and its cost in the same ratio)")
    t0 = time.perf_counter()
    values = np.unique(cand)
    live = values[values != 0]
    figures: dict = {"values_possible": int(values.size)}
    if not live.size:
        return AttackOutcome(name, FAMILY, parties, AttackStatus.RAN, columns=1, figures=figures,
                             reason="its value in the solution is 0, so M u = 0 gives no scale",
                             seconds=time.perf_counter() - t0)
    Mu = M @ product.u
    cols, costs = [], []
    for v in live:
        a = Mu / v
        b = M.T @ a / float(a @ a)
        cols.append(a)
        costs.append(float(b @ product.Bc) / float(b @ b))
    A = np.column_stack(cols)
    A[np.abs(A) <= ZERO_TOL * np.abs(A).max(axis=0, keepdims=True)] = 0.0
    c = np.array(costs)
    certain = live.size == 1 and values.size == 1
    position = np.full(1, -1, dtype=np.int64)
    if certain and product.x_values is not None:
        hits = np.flatnonzero(np.abs(product.x_values - live[0]) <= X_MATCH_TOL * abs(live[0]))
        if hits.size == 1:
            position[0] = int(hits[0])
    if certain:
        rec = RecoveredColumns(sp.csc_matrix(A), c, np.ones(1, dtype=bool), position, signed_scale=True,
                               basis=np.array(["single_dense_column"], dtype=object))
        return AttackOutcome(name, FAMILY, parties, AttackStatus.RAN, columns=1, claimed=1, up_to_scale=1,
                             positions=int(position[0] >= 0), figures=figures, seconds=time.perf_counter() - t0,
                             recovered=rec)
    # several values possible: the roundest reading is the best guess
    d = np.abs(live) / np.abs(live[0])  # A[:, i] = +-A[:, 0] / d_i
    fit = fit_scales(sp.csc_matrix(A[:, :1]), c[:1], np.zeros(1), np.zeros(1), Budget(None), spread=np.inf,
                     allowed=(np.zeros(live.size, dtype=np.int64), d), max_digits=DENSE_MAX_DIGITS,
                     rel_tol=DENSE_REL_TOL)
    pick = int(np.argmin(np.abs(d - fit.scale[0])))
    basis = fit.classes(learnt=False)
    basis = np.array([GUESS + "single_dense_" + str(basis[0])[len(GUESS):]], dtype=object)
    rec = RecoveredColumns(sp.csc_matrix(A[:, [pick]]), c[[pick]], np.zeros(1, dtype=bool), position,
                           signed_scale=True, basis=basis)
    figures["values_nonzero"] = int(live.size)
    return AttackOutcome(name, FAMILY, parties, AttackStatus.RAN, columns=1, up_to_scale=1, figures=figures,
                         reason=f"{live.size} values of x_j could be this column's; the roundest reading is a best guess",
                         seconds=time.perf_counter() - t0, recovered=rec)


def _structure(product: MaskedProduct, space: ColumnSpace, budget: Budget) -> AttackOutcome:
    """``dense_mask_structure``: a mask that does not mix columns (the identity, a scaling, a scaled
    permutation: B = P D padded with zero columns) leaves exactly rank-many nonzero columns in M,
    each a column of A_d times one factor, and B c the costs times the same factors. Then the
    columns are known up to scale at once, and their values follow as for ``dense_costs`` (signs
    the revealed x does not give taken positive, as a scaling-only mask would have them)."""
    parties, n, M = product.parties, product.n_cols, product.M
    t0 = time.perf_counter()
    live = np.flatnonzero(np.any(M != 0, axis=0))
    figures: dict = {"nonzero_mask_columns": int(live.size), "rank": space.rank}
    if live.size != space.rank or space.rank != n:
        return AttackOutcome("dense_mask_structure", FAMILY, parties, AttackStatus.RAN, columns=n, figures=figures,
                             reason=f"the mask mixes the columns ({live.size} nonzero columns of M for rank "
                                    f"{space.rank})", seconds=time.perf_counter() - t0)
    V = sp.csc_matrix(M[:, live])
    wu = product.u[live] if product.u is not None and product.u.size == M.shape[1] else None
    vals = values_from_directions(V, product.Bc[live], wu, product.x_values, budget, max_digits=MAX_DIGITS,
                                  rel_tol=REL_TOL, positive=True, x_candidates=product.x_candidates)
    figures.update(vals.figures)
    rec = RecoveredColumns(vals.A, vals.c, np.zeros(n, dtype=bool), np.full(n, -1, dtype=np.int64), signed_scale=True,
                           basis=vals.basis, position_guess=vals.position_guess,
                           position_basis=np.where(vals.position_guess >= 0, GUESS + "dense_x_scale", "").astype(object))
    return AttackOutcome("dense_mask_structure", FAMILY, parties, AttackStatus.RAN, columns=n, up_to_scale=n,
                         figures=figures, seconds=time.perf_counter() - t0, recovered=rec)


def _costs(product: MaskedProduct, space: ColumnSpace, found: _Found, budget: Budget) -> AttackOutcome:
    parties, n, M = product.parties, product.n_cols, product.M
    q = len(found.vectors)
    rec, _ = _direction_result(found, space, M, n)
    certain = int(rec.directions_claimed.sum())
    if q != n or space.rank != n or certain != n:
        why = (f"the sparse recovery certified {certain} of {n} columns (identifiable, and independent rows of "
               f"the implied mask); the costs need all of them and a block of full column rank (rank "
               f"{space.rank})")
        return not_applicable("dense_costs", FAMILY, parties, why)
    t0 = time.perf_counter()
    V = np.column_stack([polish_direction(space.Q, v) for v in found.vectors])  # m x n, directions
    W = np.linalg.lstsq(V, M, rcond=None)[0]  # = L B'  (n x k)
    g = np.linalg.lstsq(W.T, product.Bc, rcond=None)[0]  # = L^-1 c
    wu = W @ product.u if product.u is not None and product.u.size == M.shape[1] else None
    vals = values_from_directions(sp.csc_matrix(V), g, wu, product.x_values, budget, max_digits=DENSE_MAX_DIGITS,
                                  rel_tol=DENSE_REL_TOL, x_candidates=product.x_candidates)
    rec = RecoveredColumns(vals.A, vals.c, np.zeros(n, dtype=bool), np.full(n, -1, dtype=np.int64), signed_scale=True,
                           basis=vals.basis, position_guess=vals.position_guess,
                           position_basis=np.where(vals.position_guess >= 0, GUESS + "dense_x_scale", "").astype(object))
    return AttackOutcome("dense_costs", FAMILY, parties, AttackStatus.RAN, columns=n, up_to_scale=n, figures=vals.figures,
                         seconds=time.perf_counter() - t0, recovered=rec)
