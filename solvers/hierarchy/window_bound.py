"""Exact Model 3 (``chain``) when the windowed LP optimum is fractional: a level-set bound.

Model 3's constraint matrix is not totally unimodular: on some noise draws the windowed LP's
optimum is fractional (half-integral), and the Lagrangian certificate of
``chain.check_certificate`` cannot exist (the integer optimum lies above the LP bound). The
LP's multipliers still give a lower bound and confine every good integer point to small
per-cell windows, checked here in exact integer arithmetic; branch and bound over those
windows then finds the optimum.

The bound. For multipliers pi = (lambda free on C7, mu >= 0 on C8) and g = A' pi, every
feasible integer point c' (0 <= c'_i <= G) satisfies

    f(c') >= f(c') - pi'(A c') = sum_i h_i(c'_i),    h_i(v) = (v - y_i)^2 - g_i v

(C7 rows are equalities, C8 rows are >= 0 with mu >= 0). With h_i* the minimum of h_i over
the integers of [0, G] (the root's size-1 cell is fixed at G by C6) and L = sum_i h_i*,

    f(c') >= L + (h_i(c'_i) - h_i*)    for every cell i,

so every feasible c' with f(c') <= L + T lies in W_T = {c : h_i(c_i) - h_i* <= T for all i}.
Writing h_i(v) = (v - m_i)^2 - g_i y_i - g_i^2 / 4 with m_i = y_i + g_i / 2, the set of v in
[0, G] with h_i(v) - h_i* <= T is the integer interval |v - m_i| <= sqrt(T + (v_i* - m_i)^2)
(v_i* the integer minimiser): one or two values for most cells. If the optimum U of Model 3
restricted to W_T (or to any box containing it) satisfies U <= L + T, it is the optimum of
Model 3: a point outside W_T costs more than L + T >= U. Otherwise T is raised to U - L and
the search repeated (the box then contains the point found).

Exactness. Any pi with mu >= 0 gives a valid bound, so the LP's duals are rounded to multiples
of 1/D (the smallest D in 1, 2, 4, ..., 64 that reproduces them within 1e-6; they are usually
half-integers) and mu is clipped at 0; with integer noisy values D L is an integer computed
exactly (int64 with an overflow guard, else Python integers), and U <= L + T is compared as
D U - D L <= D T in integers. The windows are located in floating point and their ends then
checked and moved in exact integer arithmetic, so each is exactly the level set's interval.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from securelp.solvers.errors import InputError
from securelp.solvers.hierarchy.model import Hierarchy

__all__ = ["WindowBound", "binding_cells", "level_windows", "proves_optimal", "scaled_multipliers", "window_bound"]

#: Largest denominator tried when rounding the LP's duals.
MAX_SCALE = 64


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


def scaled_multipliers(lam: np.ndarray, mu: np.ndarray, max_scale: int = MAX_SCALE) -> tuple[int, np.ndarray, np.ndarray, bool]:
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


def window_bound(hier: Hierarchy, y: np.ndarray, total: int, lam: np.ndarray, mu: np.ndarray) -> WindowBound:
    """The scaled Lagrangian bound L and the per-cell minima h_i* (module docstring).

    ``y`` must be integer (the noisy cumulative counts); ``lam`` / ``mu`` as in
    ``chain.check_certificate`` (any real values: mu is clipped at 0, duals rounded to 1/D).
    """
    from securelp.solvers.hierarchy.chain import multiplier_sums

    y = np.asarray(y)
    if not np.issubdtype(y.dtype, np.integer):
        raise InputError("window_bound: the noisy cumulative counts must be integers")
    total = int(total)
    d, lam_d, mu_d, exact = scaled_multipliers(lam, mu)
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
