"""Attacks from known rows: rows of the mask B' the coordinator received, and rows of A it knows.

``known_mask_rows`` (Bednarz, Bean, Roughan, WPES 2009)
    In rows mode a party sends its column bounds as constraint rows B_b' u in [l_b, u_b]: the
    rows of B' of its bounded columns, with the bounds themselves. When every column of the
    party is bounded, B' is known completely and M = A B' gives A = M B (B'B)^-1, Bc gives c:
    the block exactly, in its original order. With free columns too, the rows arrive without
    their positions and A is fixed only modulo the free columns' span; the attack reports the
    rows and bounds it learned.
``mask_rows_free_columns``
    Rows mode with free columns too: the bound rows R (q x k) are rows of B' = [R; F] with F the
    free columns' mask rows, so M R'(RR')^-1 = A_b + A_f G (G = F R'(RR')^-1): every bounded column
    is known up to an unknown vector of range(A_f), and range(A_f) = range(M (I - R'(RR')^-1 R))
    is known. Real columns are sparse: the vector of a_b + range(A_f) with the most zeros (trying
    every choice of n_f rows to zero for one free column, random choices for more) is the best
    guess of each bounded column. A check that can fail: the free columns' mask rows implied by the
    guesses, F~ = W'(M - A_b R), must be independent of the bound rows (they are rows of one
    Gaussian B), so the share of each bound row in the span of F~ must look like that of a random
    subspace (a Beta(n_f/2, (k - n_f)/2) variable); a wrong column leaves its bound row inside F~.
    The costs follow by least squares on [R; F~]' c = B c. With one free column its direction is
    range(A_f) exactly, and with x revealed its values follow from M u = A_b x_b + a_f x_f (x_b = R u;
    x_f the entry of x_j left over). All of this rests on the bounded columns' guesses: best
    guesses, never claims. The solution values x_b = R u and, with x_j revealed, the positions of
    the bounded columns (the entry of x_j equal to each) are exact.
``known_rows``
    A row a_r of A known to the coordinator (a unit row, a bound written as a constraint, a
    public total) gives a_r B' = M_r: k linear equations on B'. With the known mask rows,
    enough known rows (rank n among the unknown mask rows) determine B' and then A and c
    exactly. Applies where the positions of the masked columns are known (rows mode, or a
    party whose columns are all free).
``known_rows_monomial``
    Known rows against the monomial block: s_rt = d_t a_r,pi(t) for every known row r. Column t may
    be original column i only when their zero patterns agree on the known rows, their values are
    proportional there, and the ratio d lies in the public range [1/s, s]; every assignment of the
    columns (the party's dense columns take the original columns left) must fit. Where every
    assignment gives column t one factor, d_t is certain (a row of ones pins every column it
    touches, a row with a single nonzero its column), and where it gives one original column, so
    is its position (:mod:`securelp.coordinator.audit.matching`).

Which rows are known is an input (:class:`KnownRows`, ``securelp audit --known-rows``); the
simulations evaluate the rows that hold a single nonzero in the whole LP.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from securelp.coordinator.audit.budget import Budget
from securelp.coordinator.audit.matching import MAX_EDGES, complete_assignments
from securelp.coordinator.audit.results import AttackOutcome, AttackStatus, RecoveredColumns, not_applicable, skipped
from securelp.coordinator.audit.truth import Truth
from securelp.coordinator.audit.view import MaskedProduct, PartyView
from securelp.party.session import SCALE_SPREAD
from securelp.solvers.errors import InputError

FAMILY = "known_rows"
#: relative residual below which a solved mask explains M (and the recovered block is claimed)
RESIDUAL_TOL = 1e-8


@dataclass(frozen=True, eq=False)
class KnownRows:
    """Rows of A assumed known to the coordinator: their indices and, per party, their values on
    that party's columns (q x n_j, original column order)."""

    rows: np.ndarray
    values: Mapping[str, sp.csr_matrix]
    label: str

    @property
    def count(self) -> int:
        return int(self.rows.size)


def singleton_rows(truth: Truth, party_ids: Sequence[str]) -> np.ndarray:
    """Rows holding exactly one nonzero in the whole LP (all parties' columns together)."""
    counts = None
    for p in party_ids:
        blk = truth.block(p)
        if blk is None:
            continue
        c = np.diff(sp.csr_matrix(blk.A).indptr)
        counts = c if counts is None else counts + c
    return np.flatnonzero(counts == 1) if counts is not None else np.zeros(0, dtype=np.int64)


def known_rows_from_truth(truth: Truth, party_ids: Sequence[str], spec: str) -> KnownRows:
    """The rows ``spec`` names, with their values from the truth: ``singletons`` (the rows with a
    single nonzero in the whole LP), ``none``, or comma-separated 0-based row indices.

    Raises
    ------
    InputError
        An index that is not an integer or lies outside the LP's rows.
    """
    m = next(iter(truth.blocks.values())).n_rows if truth.blocks else 0
    spec = spec.strip()
    if spec == "none":
        rows = np.zeros(0, dtype=np.int64)
    elif spec == "singletons":
        rows = singleton_rows(truth, party_ids)
    else:
        try:
            rows = np.array(sorted({int(s) for s in spec.split(",") if s.strip()}), dtype=np.int64)
        except ValueError:
            raise InputError(f"--known-rows {spec!r}: expected 'singletons', 'none' or comma-separated row indices "
                             "such as 0,5,12") from None
        if rows.size and (rows.min() < 0 or rows.max() >= m):
            raise InputError(f"--known-rows {spec!r}: row indices must lie in 0..{m - 1}")
    values = {p: sp.csr_matrix(truth.block(p).A)[rows] for p in party_ids if truth.block(p) is not None}
    label = spec if spec in ("none", "singletons") else f"rows {spec}"
    return KnownRows(rows, values, label)


def _solve_block(Bt: np.ndarray, product: MaskedProduct) -> tuple[np.ndarray, np.ndarray, float]:
    """A and c from a known B' (n x k): A' = lstsq(B, M'), c = lstsq(B, Bc); and the relative
    residual of M."""
    B = Bt.T  # k x n
    A = scipy.linalg.lstsq(B, product.M.T, lapack_driver="gelsy", check_finite=False)[0].T
    c = scipy.linalg.lstsq(B, product.Bc, lapack_driver="gelsy", check_finite=False)[0]
    scale = max(np.linalg.norm(product.M), 1e-300)
    return A, c, float(np.linalg.norm(A @ Bt - product.M) / scale)


def _exact(A: np.ndarray, c: np.ndarray, claimed: bool, basis: str) -> RecoveredColumns:
    n = A.shape[1]
    return RecoveredColumns(sp.csc_matrix(A), c, np.full(n, claimed), np.arange(n, dtype=np.int64) if claimed
                            else np.full(n, -1, dtype=np.int64), signed_scale=True,
                            basis=np.full(n, basis if claimed else "", dtype=object))


def attack_known_mask_rows(product: MaskedProduct, budget: Budget) -> AttackOutcome:
    """The Bednarz et al. reconstruction from the bound rows (see the module docstring)."""
    parties, n = product.parties, product.n_cols
    q = product.known_mask_rows.shape[0]
    if q == 0:
        return not_applicable("known_mask_rows", FAMILY, parties, "no rows of the mask were sent (monomial mode "
                              "sends no bound rows)")
    t0 = time.perf_counter()
    figures = {"mask_rows": q, "bounds_revealed": q}
    if not np.all(product.known_mask_index >= 0) or q < n:
        return AttackOutcome("known_mask_rows", FAMILY, parties, AttackStatus.RAN, columns=n, figures=figures,
                             reason=(f"{q} of {n} columns are bounded: their mask rows and bounds are known, but "
                                     "not their positions, and the free columns' mask stays hidden"),
                             seconds=time.perf_counter() - t0)
    m, k = product.M.shape
    flops = 4.0 * k * n * (n + m)
    if not budget.allows_flops(flops):
        return skipped("known_mask_rows", FAMILY, parties, budget.refusal(f"a {k} x {n} least-squares solve", flops), n)
    Bt = np.zeros((n, k))
    Bt[product.known_mask_index] = product.known_mask_rows
    A, c, residual = _solve_block(Bt, product)
    ok = residual <= RESIDUAL_TOL
    figures["residual"] = residual
    return AttackOutcome("known_mask_rows", FAMILY, parties, AttackStatus.RAN, columns=n, claimed=n if ok else 0,
                         up_to_scale=n if ok else 0, positions=n if ok else 0, figures=figures,
                         seconds=time.perf_counter() - t0, recovered=_exact(A, c, ok, "mask_rows"))


def attack_known_rows(product: MaskedProduct, view: PartyView | None, known: KnownRows | None,
                      budget: Budget) -> AttackOutcome:
    """Equations a_r B' = M_r from known rows of A, with the known mask rows (module docstring)."""
    parties, n = product.parties, product.n_cols
    if known is None or known.count == 0:
        return not_applicable("known_rows", FAMILY, parties, "no rows of A were assumed known")
    if view is None or len(parties) != 1 or not (view.mode == "rows" or view.n_bounded == 0):
        return not_applicable("known_rows", FAMILY, parties, "the positions of the masked columns among the party's "
                              "columns are not revealed (bounded columns are under the monomial transform)")
    vals = known.values.get(parties[0])
    if vals is None:
        return not_applicable("known_rows", FAMILY, parties, "no known values on this party's columns")
    t0 = time.perf_counter()
    A_R = vals.toarray()  # q x n
    live = np.any(A_R != 0, axis=1)
    A_R, rows = A_R[live], known.rows[live]
    k = product.M.shape[1]
    K = product.known_mask_index[product.known_mask_index >= 0] if np.all(product.known_mask_index >= 0) \
        else np.zeros(0, dtype=np.int64)
    F = np.setdiff1d(np.arange(n), K)
    figures: dict[str, object] = {"known_rows": int(rows.size), "known_mask_rows": int(K.size)}
    if rows.size == 0:
        return AttackOutcome("known_rows", FAMILY, parties, AttackStatus.RAN, columns=n, figures=figures,
                             reason="none of the known rows touches this party's columns",
                             seconds=time.perf_counter() - t0)
    flops = 2.0 * rows.size * F.size * (F.size + k)
    if not budget.allows_flops(flops):
        return skipped("known_rows", FAMILY, parties, budget.refusal("the known-row equations", flops), n)
    Bt = np.zeros((n, k))
    if K.size:
        Bt[K] = product.known_mask_rows
    rhs = product.M[rows] - A_R[:, K] @ Bt[K]
    AF = A_R[:, F]
    determined = np.zeros(n, dtype=bool)
    determined[K] = True
    if F.size:
        Bt[F] = scipy.linalg.lstsq(AF, rhs, lapack_driver="gelsd", check_finite=False)[0]
        # a mask row is fixed by the equations when the null space of A_R[:, F] has no component on it
        _, s, vt = np.linalg.svd(AF, full_matrices=True)
        tol = (s[0] if s.size else 0.0) * max(AF.shape) * np.finfo(float).eps
        null = vt[int(np.sum(s > tol)):]
        determined[F] = np.all(np.abs(null) <= 1e-9, axis=0) if null.size else True
    figures["mask_rows_determined"] = int(determined.sum())
    if not determined.all():
        return AttackOutcome("known_rows", FAMILY, parties, AttackStatus.RAN, columns=n, figures=figures,
                             reason=f"the known rows fix {int(determined.sum())} of {n} rows of the mask; the block "
                                    "needs all of them", seconds=time.perf_counter() - t0)
    A, c, residual = _solve_block(Bt, product)
    ok = residual <= RESIDUAL_TOL
    figures["residual"] = residual
    return AttackOutcome("known_rows", FAMILY, parties, AttackStatus.RAN, columns=n, claimed=n if ok else 0,
                         up_to_scale=n if ok else 0, positions=n if ok else 0, figures=figures,
                         seconds=time.perf_counter() - t0, recovered=_exact(A, c, ok, "known_rows"))


def attack_known_rows_monomial(view: PartyView, known: KnownRows | None) -> AttackOutcome:
    """Known rows against the monomial block, by complete assignments (module docstring)."""
    parties = (view.party_id,)
    n = view.n_monomial
    if n == 0:
        return not_applicable("known_rows_monomial", FAMILY, parties, "no bounded column under a monomial transform")
    if known is None or known.count == 0:
        return not_applicable("known_rows_monomial", FAMILY, parties, "no rows of A were assumed known")
    vals = known.values.get(view.party_id)
    if vals is None:
        return not_applicable("known_rows_monomial", FAMILY, parties, "no known values on this party's columns")
    t0 = time.perf_counter()
    S = sp.csr_matrix(view.scaled_a)[known.rows].toarray()  # q x n_b: the known rows as received
    K = sp.csr_matrix(vals).toarray()  # q x n_j: their true values, original order
    scale, position, figures = _pin_by_rows(S, K, view.n_dense)
    pinned = np.isfinite(scale)
    scale = np.where(pinned, scale, 1.0)
    A_hat = sp.csc_matrix(view.scaled_a @ sp.diags(1.0 / scale))
    rec = RecoveredColumns(A_hat, view.scaled_c / scale, pinned, position, signed_scale=False,
                           basis=np.where(pinned, "known_rows", "").astype(object))
    out = AttackOutcome("known_rows_monomial", FAMILY, parties, AttackStatus.RAN, columns=n,
                        claimed=int(pinned.sum()), up_to_scale=n, positions=int((position >= 0).sum()),
                        figures={"known_rows": known.count, **figures}, seconds=time.perf_counter() - t0,
                        recovered=rec)
    if figures.get("infeasible"):
        out.reason = "no assignment of the party's columns fits the known rows (are they this LP's rows?)"
    return out


def _pin_by_rows(S: np.ndarray, K: np.ndarray, n_dense: int) -> tuple[np.ndarray, np.ndarray, dict]:
    """Factors (inf where not certain) and positions (-1) of the scaled columns S (q x n_b) from the
    known rows' values K (q x n_j) by complete assignments: t may be original column i when their
    patterns on the known rows agree and S_t = d K_i with d in the public range."""
    n_b = S.shape[1]
    scale = np.full(n_b, np.inf)
    position = np.full(n_b, -1, dtype=np.int64)
    live_t = np.flatnonzero(np.any(S != 0, axis=0))
    live_i = np.flatnonzero(np.any(K != 0, axis=0))
    slots = live_i.size - live_t.size
    if slots < 0 or slots > n_dense:
        return scale, position, {"infeasible": True}

    def normalized(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        first = np.argmax(X != 0, axis=0)
        lead = X[first, np.arange(X.shape[1])]
        return X / np.where(lead == 0, 1.0, np.abs(lead)), lead

    St, s_lead = normalized(S[:, live_t])
    Ki, k_lead = normalized(K[:, live_i])
    # group the original columns by their normalized pattern and their leading value (a group: equal
    # columns on the known rows, interchangeable)
    key_i = np.round(np.vstack([Ki, k_lead[None, :]]) * 1e9).astype(np.int64)
    _, group, counts = np.unique(key_i.T, axis=0, return_inverse=True, return_counts=True)
    group = group.ravel()
    n_groups = counts.size
    g_rep = np.zeros(n_groups, dtype=np.int64)
    g_rep[group] = np.arange(live_i.size)
    # candidate edges: same normalized pattern (to 1e-9), ratio of leading values in range
    shape_i = np.round(Ki * 1e9).astype(np.int64)
    shape_t = np.round(St * 1e9).astype(np.int64)
    from collections import defaultdict

    by_shape: dict[bytes, list[int]] = defaultdict(list)
    for g in range(n_groups):
        by_shape[shape_i[:, g_rep[g]].tobytes()].append(g)
    e_left, e_group, e_d = [], [], []
    for t in range(live_t.size):
        for g in by_shape.get(shape_t[:, t].tobytes(), []):
            d = s_lead[t] / k_lead[g_rep[g]]
            if (1 - 1e-9) / SCALE_SPREAD <= d <= SCALE_SPREAD * (1 + 1e-9):
                e_left.append(t)
                e_group.append(g)
                e_d.append(d)
    el, eg, ed = np.array(e_left, dtype=np.int64), np.array(e_group, dtype=np.int64), np.array(e_d)
    if el.size > MAX_EDGES:
        return scale, position, {"pairs": int(el.size), "infeasible": False, "too_many_pairs": True}
    fit = complete_assignments(live_t.size, el, eg, counts, slots)
    if not fit.feasible:
        return scale, position, {"infeasible": True}
    ul, ug, ud = el[fit.usable], eg[fit.usable], ed[fit.usable]
    # certain factor: every usable edge of t gives the same d
    dmin = np.full(live_t.size, np.inf)
    dmax = np.full(live_t.size, -np.inf)
    np.minimum.at(dmin, ul, ud)
    np.maximum.at(dmax, ul, ud)
    sure = np.isfinite(dmin) & (dmax - dmin <= 1e-9 * dmax)
    scale[live_t[sure]] = dmin[sure]
    n_usable = np.bincount(ul, minlength=live_t.size)
    one = np.flatnonzero(n_usable == 1)
    g_of = np.full(live_t.size, -1, dtype=np.int64)
    g_of[ul] = ug
    single = one[counts[g_of[one]] == 1]
    position[live_t[single]] = live_i[g_rep[g_of[single]]]
    return scale, position, {"pairs": int(el.size), "infeasible": False}


#: random choices of rows to zero per bounded column when there are several free columns
FREE_TRIALS = 200
#: false-alarm rate of the independence check of one bounded column's guess (Bonferroni over columns)
FREE_CHECK_ALPHA = 1e-3


def _sparsest_in_affine(V: np.ndarray, W: np.ndarray, rng: np.random.Generator, trials: int
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For every column v of V (m x q): the vector of v + range(W) (W orthonormal, m x r) with the most
    zeros, among those that vanish on r chosen rows (every row for r = 1, ``trials`` random choices of
    r rows where W is not zero for more). Returns (the vectors, their nonzero counts, whether another
    vector with as many zeros exists: ambiguous)."""
    q = V.shape[1]
    r = W.shape[1]
    if r == 0:
        nnz = np.count_nonzero(np.abs(V) > 1e-9 * np.maximum(np.abs(V).max(axis=0), 1e-300), axis=0)
        return V.copy(), nnz, np.zeros(q, dtype=bool)
    live = np.flatnonzero(np.linalg.norm(W, axis=1) > 1e-12)
    scale = np.maximum(np.abs(V).max(axis=0), 1e-300)
    best = V.copy()
    best_nnz = np.count_nonzero(np.abs(V) > 1e-9 * scale, axis=0)
    ambiguous = np.zeros(q, dtype=bool)
    if r == 1:
        choices = [np.array([i]) for i in live]
    else:
        choices = [np.sort(rng.choice(live, r, replace=False)) for _ in range(trials)] if live.size >= r else []
    for rows in choices:
        Wr = W[rows]
        if np.linalg.matrix_rank(Wr) < r:
            continue
        Z = np.linalg.solve(Wr, V[rows])  # r x q
        X = V - W @ Z
        X[np.abs(X) <= 1e-9 * scale] = 0.0
        nnz = np.count_nonzero(X, axis=0)
        better = nnz < best_nnz
        tie = (nnz == best_nnz) & ~better & (np.abs(X - best).max(axis=0) > 1e-6 * scale)
        ambiguous = (ambiguous & ~better) | tie
        best[:, better] = X[:, better]
        best_nnz = np.where(better, nnz, best_nnz)
    return best, best_nnz, ambiguous


def _match_values(targets: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each target's index in x when exactly one entry equals it (-1 else), and the entries of x left
    after removing one entry per target (a multiset difference, to 1e-9 relative)."""
    idx = np.full(targets.size, -1, dtype=np.int64)
    left = np.ones(x.size, dtype=bool)
    for t, v in enumerate(targets):
        hit = np.flatnonzero(np.abs(x - v) <= 1e-9 * max(abs(v), 1e-12))
        if hit.size == 1:
            idx[t] = int(hit[0])
        free = hit[left[hit]]
        if free.size:
            left[free[0]] = False
    return idx, np.flatnonzero(left)


def attack_mask_rows_free(product: MaskedProduct, budget: Budget, rng: np.random.Generator) -> AttackOutcome:
    """``mask_rows_free_columns``: rows mode with bounded and free columns (module docstring)."""
    from scipy.stats import beta

    from securelp.coordinator.audit.dense import orthonormal_range

    name = "mask_rows_free_columns"
    parties, n = product.parties, product.n_cols
    R = product.known_mask_rows
    q = R.shape[0]
    if q == 0 or np.all(product.known_mask_index >= 0) or q >= n:
        return not_applicable(name, FAMILY, parties, "needs rows mode with bounded and free columns")
    if len(parties) != 1:
        return not_applicable(name, FAMILY, parties, "the product is a sum over several parties")
    M = product.M
    m, k = M.shape
    nf = n - q
    flops = 4.0 * m * k * (q + k) + 2.0 * m * q * (m if nf == 1 else FREE_TRIALS * nf)
    if not budget.allows_flops(flops):
        return skipped(name, FAMILY, parties, budget.refusal("the decomposition off the free columns", flops), n)
    t0 = time.perf_counter()
    G = scipy.linalg.solve(R @ R.T, R, assume_a="pos", check_finite=False)  # (RR')^-1 R, q x k
    V = M @ G.T  # = A_b + A_f F R'(RR')^-1
    E = M - V @ R  # = A_f F (I - P): its range is range(A_f)
    W = orthonormal_range(E)
    r = W.shape[1]
    A_b, _, ambiguous = _sparsest_in_affine(V, W, rng, FREE_TRIALS)
    # the implied free mask rows must be independent of the bound rows
    Ft = W.T @ (M - A_b @ R) if r else np.zeros((0, k))
    passed = np.ones(q, dtype=bool)
    if r:
        U = orthonormal_range(Ft.T).T  # orthonormal rows spanning F~
        share = np.sum((U @ R.T) ** 2, axis=0) / np.sum(R * R, axis=1)
        p_value = beta.sf(share, r / 2.0, (k - r) / 2.0)
        passed = p_value > FREE_CHECK_ALPHA / max(1, q)
    # costs: B c = R'c_b + F~'(Q^-T c_f)
    coef = np.linalg.lstsq(np.vstack([R, Ft]).T, product.Bc, rcond=None)[0]
    c_b = coef[:q]
    cols, costs, direction = [A_b], [c_b], [np.zeros(q, dtype=bool)]
    basis = [np.where(passed & ~ambiguous, "guess:sparsest_decomposition", "guess:sparsest_unchecked").astype(object)]
    figures: dict = {"bound_rows": q, "free_columns": nf, "free_rank": r, "checked": int(passed.sum()),
                     "ambiguous": int(ambiguous.sum())}
    pos_b = np.full(q, -1, dtype=np.int64)
    x_b = R @ product.u if product.u is not None and product.u.size == k else None
    free_left = None
    if x_b is not None and product.x_values is not None:
        pos_b, free_left = _match_values(x_b, product.x_values)
    free_values_known = False
    if nf == 1 and r == 1:
        w = W[:, 0].copy()
        a_f = w / w[np.flatnonzero(np.abs(w) > 1e-9 * np.abs(w).max())[0]]
        a_f[np.abs(a_f) <= 1e-9 * np.abs(a_f).max()] = 0.0
        c_f = np.array([np.nan])
        if free_left is not None and free_left.size == 1 and product.x_values[free_left[0]] != 0:
            x_f = float(product.x_values[free_left[0]])
            a_f = (M @ product.u - A_b @ x_b) / x_f
            a_f[np.abs(a_f) <= 1e-9 * np.abs(a_f).max()] = 0.0
            F = np.linalg.lstsq(a_f[:, None], M - A_b @ R, rcond=None)[0]
            full = np.linalg.lstsq(np.vstack([R, F]).T, product.Bc, rcond=None)[0]
            c_b, c_f = full[:q], full[q:]
            costs[0] = c_b
            free_values_known = True
        cols.append(a_f[:, None])
        costs.append(c_f)
        direction.append(np.ones(1, dtype=bool))
        basis.append(np.array(["guess:sparsest_decomposition" if free_values_known else ""], dtype=object))
    A_all = np.hstack(cols)
    pos_guess = np.concatenate([pos_b, np.full(A_all.shape[1] - q, -1, dtype=np.int64)])
    if free_values_known and free_left is not None:
        pos_guess[-1] = int(free_left[0])
    figures["free_values_from_x"] = bool(free_values_known)
    nq = A_all.shape[1]
    rec = RecoveredColumns(sp.csc_matrix(A_all), np.concatenate(costs), np.zeros(nq, dtype=bool),
                           np.full(nq, -1, dtype=np.int64), signed_scale=True,
                           direction_claimed=np.concatenate(direction), basis=np.concatenate(basis),
                           position_guess=pos_guess,
                           position_basis=np.where(pos_guess >= 0, "guess:bound_rows_x", "").astype(object))
    return AttackOutcome(name, FAMILY, parties, AttackStatus.RAN, columns=n, up_to_scale=int(rec.directions_claimed.sum()),
                         figures=figures, seconds=time.perf_counter() - t0, recovered=rec)
