"""Attacks from known rows: rows of the mask B' the coordinator received, and rows of A it knows.

``known_mask_rows`` (Bednarz, Bean, Roughan, WPES 2009)
    In rows mode a party sends its column bounds as constraint rows B_b' u in [l_b, u_b]: the
    rows of B' of its bounded columns, with the bounds themselves. When every column of the
    party is bounded, B' is known completely and M = A B' gives A = M B (B'B)^-1, Bc gives c:
    the block exactly, in its original order. With free columns too, the rows arrive without
    their positions and A is fixed only modulo the free columns' span; the attack reports the
    rows and bounds it learned.
``known_rows``
    A row a_r of A known to the coordinator (a unit row, a bound written as a constraint, a
    public total) gives a_r B' = M_r: k linear equations on B'. With the known mask rows,
    enough known rows (rank n among the unknown mask rows) determine B' and then A and c
    exactly. Applies where the positions of the masked columns are known (rows mode, or a
    party whose columns are all free).
``known_rows_monomial``
    A known row with a single nonzero a_ri among the party's columns that meets a single
    nonzero s_rt of the monomial block pins column t: d_t = s_rt / a_ri and pi(t) = i.

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
from securelp.coordinator.audit.results import AttackOutcome, AttackStatus, RecoveredColumns, not_applicable, skipped
from securelp.coordinator.audit.truth import Truth
from securelp.coordinator.audit.view import MaskedProduct, PartyView
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


def _exact(A: np.ndarray, c: np.ndarray, claimed: bool) -> RecoveredColumns:
    n = A.shape[1]
    return RecoveredColumns(sp.csc_matrix(A), c, np.full(n, claimed), np.arange(n, dtype=np.int64), signed_scale=True)


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
                         seconds=time.perf_counter() - t0, recovered=_exact(A, c, ok))


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
                         seconds=time.perf_counter() - t0, recovered=_exact(A, c, ok))


def attack_known_rows_monomial(view: PartyView, known: KnownRows | None) -> AttackOutcome:
    """Singleton known rows against the monomial block (module docstring)."""
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
    S = sp.csr_matrix(view.scaled_a)
    scale = np.ones(n)
    pinned = np.zeros(n, dtype=bool)
    position = np.full(n, -1, dtype=np.int64)
    vals = sp.csr_matrix(vals)
    for q, r in enumerate(known.rows):
        a_lo, a_hi = vals.indptr[q], vals.indptr[q + 1]
        s_lo, s_hi = S.indptr[r], S.indptr[r + 1]
        if a_hi - a_lo != 1 or s_hi - s_lo != 1:
            continue
        i, a_ri = int(vals.indices[a_lo]), float(vals.data[a_lo])
        t, s_rt = int(S.indices[s_lo]), float(S.data[s_lo])
        d = s_rt / a_ri
        if d <= 0 or pinned[t]:
            continue
        scale[t], pinned[t], position[t] = d, True, i
    A_hat = sp.csc_matrix(view.scaled_a @ sp.diags(1.0 / scale))
    rec = RecoveredColumns(A_hat, view.scaled_c / scale, pinned, position, signed_scale=False)
    return AttackOutcome("known_rows_monomial", FAMILY, parties, AttackStatus.RAN, columns=n,
                         claimed=int(pinned.sum()), up_to_scale=n, positions=int(pinned.sum()),
                         figures={"known_rows": known.count}, seconds=time.perf_counter() - t0, recovered=rec)
