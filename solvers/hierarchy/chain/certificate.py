"""The proofs of ``chain``: the Lagrangian certificate of a Model 3 point and the exact Lagrangian bound.

Model 3 (:mod:`securelp.solvers.hierarchy.consistency`; Fioretto, Van Hentenryck, Zhu, AIJ 2021,
C6-C10) with every (region, size) cell a variable. Write the rows as A c = 0 (C7, one row per
internal region and size, multiplier lambda free) and c_s^l - c_{s+1}^l >= 0 (C8 at the leaves,
multiplier mu >= 0; parents are sums of children, so C8 is only needed at the leaves), and
g = A' pi for pi = (lambda, mu).

Certificate (:func:`check_certificate`). If an integer point c satisfies C6-C10, mu >= 0,
mu_j (A_j c) = 0 for every C8 row (complementary slackness), and every cell value c_i (except
the fixed root size-1 cell) minimises (v - ct_i)^2 - g_i v over the integers v in [0, G], then c
is optimal: for any feasible integer c',

    f(c') >= f(c') - pi'(A c') = sum_i [(c'_i - ct_i)^2 - g_i c'_i]
          >= sum_i [(c_i - ct_i)^2 - g_i c_i] = f(c) - pi'(A c) = f(c)

(every feasible point has 0 <= c'_i <= G, since c_s^r <= c_1^r <= c_1^root = G). The per-cell
test is two integer inequalities: 2(c_i - ct_i) + 1 - g_i >= 0 when c_i < G and
2(c_i - ct_i) - 1 - g_i <= 0 when c_i > 0. With integer noisy values and integer multipliers
the whole check is exact integer arithmetic; with decimal inputs it runs in floating point
with a relative tolerance of 1e-9 (stated in the report). Multipliers that are multiples of
1/D (a degenerate LP vertex gives half-integral duals) are checked exactly too:
``check_certificate(..., scale=D)`` takes D times them and multiplies every test by D.

Bound (:func:`window_bound`), for when no such certificate exists (a fractional LP optimum:
the constraint matrix is not totally unimodular, and the integer optimum lies above the LP
bound). For any pi with mu >= 0 every feasible integer c' satisfies

    f(c') >= f(c') - pi'(A c') = sum_i h_i(c'_i),    h_i(v) = (v - y_i)^2 - g_i v.

With h_i* the minimum of h_i over the integers of [0, G] (the root's size-1 cell is fixed at G
by C6) and L = sum_i h_i*, f(c') >= L + (h_i(c'_i) - h_i*) for every cell i, so every feasible
c' with f(c') <= L + T lies in W_T = {c : h_i(c_i) - h_i* <= T for all i}. Writing
h_i(v) = (v - m_i)^2 - g_i y_i - g_i^2 / 4 with m_i = y_i + g_i / 2, the set of v in [0, G] with
h_i(v) - h_i* <= T is the integer interval |v - m_i| <= sqrt(T + (v_i* - m_i)^2) (v_i* the
integer minimiser): one or two values for most cells (:func:`level_windows`). If the optimum U
of Model 3 restricted to W_T (or to any box containing it) satisfies U <= L + T, it is the
optimum of Model 3: a point outside W_T costs more than L + T >= U (:func:`proves_optimal`).
Since f is an integer at integer points, U - L < 1 proves U optimal outright.

Exactness of the bound. Any pi with mu >= 0 gives a valid bound, so the LP's duals are rounded
to multiples of 1/D (the smallest D in 1, 2, 4, ... that reproduces them within 1e-6; they are
usually half-integers) and mu is clipped at 0; with integer noisy values D L is an integer
computed exactly (int64 with an overflow guard, else Python integers), and U <= L + T is
compared as D U - D L <= D T in integers. The windows are located in floating point and their
ends then checked and moved in exact integer arithmetic, so each is exactly the level set's
interval.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from securelp.solvers.errors import InputError
from securelp.solvers.hierarchy.model import Hierarchy

#: Largest denominator tried by default when rounding the LP's duals for the bound.
MAX_BOUND_SCALE = 64


@dataclass(frozen=True)
class ChainCertificate:
    """Outcome of the Lagrangian optimality check of a Model 3 point."""

    ok: bool
    integral_arithmetic: bool
    min_slack: float
    failing: np.ndarray  # boolean mask (regions x sizes): cells whose per-cell test fails
    reason: str


def multiplier_sums(hier: Hierarchy, lam: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """g = A' pi: for cell (r, s), lam[r, s] (internal r) - lam[parent r, s] (r not root) + leaf mu terms.

    ``lam`` is regions x sizes (rows of leaves unused, zero); ``mu`` is regions x (sizes - 1)
    (only leaf rows used): multiplier of c_s^l - c_{s+1}^l >= 0.
    """
    par = np.asarray(hier.parent, dtype=np.int64)
    internal = np.zeros(hier.size, dtype=bool)
    internal[hier.internal] = True
    g = np.where(internal[:, None], lam, 0)
    nonroot = np.nonzero(par >= 0)[0]
    g = g.copy()
    g[nonroot] -= lam[par[nonroot]]
    leaves = np.asarray(hier.leaves, dtype=np.int64)
    if mu.shape[1] > 0:
        g[leaves, :-1] += mu[leaves]
        g[leaves, 1:] -= mu[leaves]
    return g


def check_certificate(
    hier: Hierarchy, cum: np.ndarray, noisy_cum: np.ndarray, total: int, lam: np.ndarray, mu: np.ndarray,
    scale: int = 1,
) -> ChainCertificate:
    """Check the Lagrangian optimality certificate of ``cum`` (module docstring).

    Exact integer arithmetic when ``noisy_cum``, ``lam`` and ``mu`` are integer arrays;
    otherwise floating point with relative tolerance 1e-9. ``scale`` D (a positive integer):
    ``lam`` and ``mu`` hold D times the multipliers, so multipliers that are multiples of 1/D
    (e.g. the half-integral duals of a degenerate LP vertex) are checked exactly, every test
    multiplied by D. ``min_slack`` is reported unscaled.
    """
    scale = int(scale)
    if scale < 1:
        raise ValueError(f"certificate scale must be a positive integer, got {scale}")
    c = np.asarray(cum)
    y = np.asarray(noisy_cum)
    none = np.zeros(c.shape, dtype=bool)
    if not np.issubdtype(c.dtype, np.integer):
        return ChainCertificate(False, False, -np.inf, none, "point is not integer")
    leaves = np.asarray(hier.leaves, dtype=np.int64)
    # feasibility: C6, C7, C8 (leaves; implied above), C9
    if int(c[0, 0]) != int(total):
        return ChainCertificate(False, False, -np.inf, none, "root c_1 != G")
    if np.any(c < 0):
        return ChainCertificate(False, False, -np.inf, none, "negative cumulative count")
    if np.any(np.diff(c[leaves], axis=1) > 0):
        return ChainCertificate(False, False, -np.inf, none, "a leaf chain increases")
    for r in hier.internal:
        if np.any(c[list(hier.children[r])].sum(axis=0) != c[r]):
            return ChainCertificate(False, False, -np.inf, none, f"inconsistent at region index {r}")
    exact = all(np.issubdtype(np.asarray(a).dtype, np.integer) for a in (y, lam, mu))
    if exact:
        c64 = c.astype(np.int64)
        y64 = y.astype(np.int64)
        lam64 = np.asarray(lam, dtype=np.int64)
        mu64 = np.asarray(mu, dtype=np.int64)
        if np.abs(lam64).max(initial=0) > 2**60 // 8 or np.abs(mu64).max(initial=0) > 2**60 // 8:
            return ChainCertificate(False, True, -np.inf, none, "multipliers too large for int64 checking")
        tol = 0
    else:
        c64 = c.astype(np.float64)
        y64 = y.astype(np.float64)
        lam64 = np.asarray(lam, dtype=np.float64)
        mu64 = np.asarray(mu, dtype=np.float64)
        tol = 1e-9 * scale * max(1.0, float(np.abs(y64).max(initial=0.0)), float(total))
    mu_l = mu64[leaves]
    if np.any(mu_l < -tol):
        return ChainCertificate(False, exact, -np.inf, none, "a C8 multiplier is negative")
    if mu_l.shape[1] > 0:
        gaps = c64[leaves, :-1] - c64[leaves, 1:]
        if np.any((np.abs(mu_l) > tol) & (gaps != 0)):
            return ChainCertificate(False, exact, -np.inf, none, "complementary slackness fails")
    g = multiplier_sums(hier, lam64, mu64)  # D * g
    fwd = scale * (2 * (c64 - y64) + 1) - g  # must be >= 0 where c < G
    bwd = -(scale * (2 * (c64 - y64) - 1) - g)  # must be >= 0 where c > 0
    fwd = np.where(c64 < total, fwd, np.inf if not exact else np.iinfo(np.int64).max)
    bwd = np.where(c64 > 0, bwd, np.inf if not exact else np.iinfo(np.int64).max)
    slack = np.minimum(fwd, bwd)
    slack[0, 0] = np.iinfo(np.int64).max if exact else np.inf  # fixed at G (C6)
    failing = slack < -tol
    min_slack = float(slack.min()) / scale
    if failing.any():
        return ChainCertificate(False, exact, min_slack, failing, f"{int(failing.sum())} cells not Lagrangian-optimal")
    return ChainCertificate(True, exact, min_slack, none, "ok")



def fractional_duals(lam: np.ndarray, mu: np.ndarray) -> bool:
    """Whether some LP dual is not an integer (within 1e-6)."""
    return bool(np.any(np.abs(lam - np.rint(lam)) > 1e-6) or np.any(np.abs(mu - np.rint(mu)) > 1e-6))


@dataclass(frozen=True)
class WindowBound:
    """Scaled Lagrangian bound: every value is D times the true one (``scale`` = D)."""

    scale: int
    lower_scaled: int  # D * L
    minimum_scaled: np.ndarray  # D * h_i* per cell
    g_scaled: np.ndarray  # D * g per cell (g = A' pi)
    multipliers_exact: bool  # the duals were multiples of 1/D (else rounded: still a valid bound)

    @property
    def lower(self) -> Fraction:
        return Fraction(self.lower_scaled, self.scale)


def scaled_multipliers(lam: np.ndarray, mu: np.ndarray, max_scale: int = MAX_BOUND_SCALE
                       ) -> tuple[int, np.ndarray, np.ndarray, bool]:
    """(D, D*lam, D*mu clipped at 0, exact): integer multipliers times the smallest fitting D."""
    lam = np.asarray(lam, dtype=np.float64)
    mu = np.asarray(mu, dtype=np.float64)
    d = 1
    while True:
        lam_d, mu_d = np.rint(lam * d), np.rint(mu * d)
        exact = bool(np.all(np.abs(lam * d - lam_d) <= 1e-6 * d) and np.all(np.abs(mu * d - mu_d) <= 1e-6 * d))
        if exact or d >= max_scale:
            return d, lam_d.astype(np.int64), np.maximum(mu_d, 0).astype(np.int64), exact
        d *= 2


def _h(d: int, y: np.ndarray, gd: np.ndarray, v: np.ndarray) -> np.ndarray:
    """D * h(v) = D (v - y)^2 - (D g) v, elementwise."""
    return d * (v - y) ** 2 - gd * v


def _best_in(d: int, y: np.ndarray, gd: np.ndarray, lo, hi) -> np.ndarray:
    """Least D * h over the integers of [lo, hi] (convex: at the clipped neighbours of y + gd / (2D))."""
    a = (2 * d * y + gd) // (2 * d)
    return np.minimum(_h(d, y, gd, np.clip(a, lo, hi)), _h(d, y, gd, np.clip(a + 1, lo, hi)))


def window_bound(hier: Hierarchy, y: np.ndarray, total: int, lam: np.ndarray, mu: np.ndarray,
                 max_scale: int = MAX_BOUND_SCALE) -> WindowBound:
    """The scaled Lagrangian bound L and the per-cell minima h_i* (module docstring).

    ``y`` must be integer (the noisy cumulative counts); ``lam`` / ``mu`` as in
    :func:`check_certificate` (any real values: mu is clipped at 0, duals rounded to 1/D, D <= ``max_scale``).
    """
    y = np.asarray(y)
    if not np.issubdtype(y.dtype, np.integer):
        raise InputError("window_bound: the noisy cumulative counts must be integers")
    total = int(total)
    d, lam_d, mu_d, exact = scaled_multipliers(lam, mu, max_scale)
    big = max(int(np.abs(y).max(initial=0)), total) + 1
    magnitude = d * (2 * big) ** 2 + int(np.abs(lam_d).max(initial=0) + np.abs(mu_d).max(initial=0)) * 4 * big
    dtype = np.int64 if magnitude < 2**61 // max(1, y.size) else object
    yy = y.astype(dtype)
    gd = multiplier_sums(hier, lam_d.astype(dtype), mu_d.astype(dtype))
    hmin = _best_in(d, yy, gd, 0, total)
    hmin[0, 0] = _h(d, yy[0, 0], gd[0, 0], total)  # c_1^root = G (C6)
    return WindowBound(d, int(hmin.sum()), hmin, gd, exact)


def binding_cells(bound: WindowBound, y: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Cells whose best value inside [lo, hi] is worse than h_i* (exact): the windows cost L there.

    Where no cell binds, L equals the windowed LP's Lagrangian value, the best bound these
    multipliers give; the root's size-1 cell never binds.
    """
    d, gd = bound.scale, bound.g_scaled
    yy = np.asarray(y).astype(gd.dtype)
    best = _best_in(d, yy, gd, np.asarray(lo).astype(gd.dtype), np.asarray(hi).astype(gd.dtype))
    out = np.asarray(best > bound.minimum_scaled, dtype=bool)
    out[0, 0] = False
    return out


def proves_optimal(bound: WindowBound, upper: int, slack: Fraction) -> bool:
    """U <= L + T, exactly: the optimum over a box containing W_T is the optimum of Model 3."""
    return bound.scale * int(upper) - bound.lower_scaled <= slack * bound.scale


def level_windows(bound: WindowBound, y: np.ndarray, total: int, slack: Fraction) -> tuple[np.ndarray, np.ndarray]:
    """The integer intervals [lo, hi] of W_T for T = ``slack`` (module docstring); the root's c_1 is G.

    Located in floating point, then moved inward while an end's exact excess
    D h(v) - D h* exceeds D T and outward while the next integer's does not (exact integers,
    so the result is the level set's interval whatever the float error).
    """
    d = bound.scale
    yy = np.asarray(y).astype(bound.g_scaled.dtype)
    gd = bound.g_scaled
    m = np.asarray(y, dtype=np.float64) + gd.astype(np.float64) / (2 * d)
    vstar = np.clip(np.rint(m), 0, total)
    radius = np.sqrt(float(slack) + (vstar - m) ** 2)
    lo = np.clip(np.ceil(m - radius) - 1, 0, total).astype(np.int64)
    hi = np.clip(np.floor(m + radius) + 1, 0, total).astype(np.int64)
    limit = bound.minimum_scaled + slack.numerator * d // slack.denominator  # D h <= D h* + floor(D T)
    for _ in range(3):
        lo = np.where((lo < hi) & (_h(d, yy, gd, lo.astype(yy.dtype)) > limit), lo + 1, lo)
        hi = np.where((hi > lo) & (_h(d, yy, gd, hi.astype(yy.dtype)) > limit), hi - 1, hi)
    # soundness does not rest on the float estimate: grow any end whose outer neighbour is in the set
    while True:
        grow_lo = (lo > 0) & (_h(d, yy, gd, (lo - 1).astype(yy.dtype)) <= limit)
        grow_hi = (hi < total) & (_h(d, yy, gd, (hi + 1).astype(yy.dtype)) <= limit)
        grow_lo[0, 0] = grow_hi[0, 0] = False
        if not (grow_lo.any() or grow_hi.any()):
            break
        lo = np.where(grow_lo, lo - 1, lo)
        hi = np.where(grow_hi, hi + 1, hi)
    lo[0, 0] = hi[0, 0] = int(total)
    return lo, hi
