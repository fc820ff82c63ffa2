"""Planar Laplace on a grid, discretised and remapped, as an explicit perturbation matrix.

Reference: M. E. Andres, N. E. Bordenabe, K. Chatzikokolakis, C. Palamidessi,
"Geo-Indistinguishability: Differential Privacy for Location-Based Systems" (CCS 2013);
used as a baseline by X. Gu, M. Li, Y. Cao, L. Xiong (IEEE CNS 2019).

The continuous mechanism reports ``x0 + Z`` with density ``eps^2/(2 pi) exp(-eps ||z||)``.
Remapped to a ``R x C`` grid (report the grid cell nearest to the noisy point; points
outside the grid go to the nearest border cell) it is the matrix

    P_jk = integral over region_k - x_j of eps^2/(2 pi) exp(-eps ||z||) dz,

where region_k is cell ``k``'s square, extended to infinity for border cells. Being
post-processing of eps-geo-indistinguishable noise, ``P`` satisfies
``P_jk <= exp(eps d_jl) P_lk``. We never sample floating-point Laplace noise: the
matrix is computed by quadrature and its rows are sampled with the exact
:class:`securelp.solvers.mdp.sampling.RowSampler`; the matrix is verified before use.

Quadrature (relative accuracy ~1e-13, so the ratio checks at 1e-9 are meaningful):
every region is split at the axes through ``x_j`` into first-quadrant rectangles
``[x0, x1] x [y0, y1]``. A rectangle with a corner at the origin uses the polar form
``(1/2 pi) int_0^{pi/2} K(eps R(theta)) dtheta``, ``K(t) = 1 - (1 + t) e^{-t}``, split at the
diagonal's angle; a quadrant ``[x0, inf) x [y0, inf)`` the complementary polar form with
``(1 + t) e^{-t}`` (no cancellation). Other rectangles use Gauss-Legendre in ``y`` and,
in ``x``, Gauss-Legendre (finite) or the substitution ``x = y sinh u`` (infinite), whose
integrand ``y cosh u exp(-eps y cosh u)`` is smooth and decays double-exponentially.
Masses depend only on the region's position relative to ``x_j``, so each distinct
(x-interval, y-interval) pair is integrated once.
"""

from __future__ import annotations

import logging
import math

import numpy as np

from securelp.solvers.errors import InputError, ResourceError, VerificationError
from securelp.solvers.mdp.verify import MAX_EXPONENT  # exp(-eps d) beyond it heads for subnormals

logger = logging.getLogger(__name__)


_N_FINITE = 24
_N_INF = 64
_N_POLAR = 64
_TAIL = 60.0  # stop the infinite inner integral where exp(-eps y cosh u) dropped by e^-60


def _gl(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.polynomial.legendre.leggauss(n)


def _map(a: np.ndarray, b: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre nodes/weights on rows of intervals [a, b] -> shapes (len, n)."""
    t, w = _gl(n)
    half = 0.5 * (b - a)[:, None]
    return 0.5 * (a + b)[:, None] + half * t[None, :], half * w[None, :]


def _k(t: np.ndarray) -> np.ndarray:
    """K(t) = 1 - (1 + t) e^-t, accurate for small t."""
    return -np.expm1(-t) - t * np.exp(-t)


def _graded(a: np.ndarray, b: np.ndarray, toward_b: bool, levels: int = 48, n: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """Composite Gauss-Legendre on [a, b] refined geometrically towards one end.

    Subintervals of widths (b - a) 2^-k resolve a feature of any scale down to 2^-48 near
    that end (the polar integrands vary on the scale eps * R there).
    """
    t, w = _gl(n)
    fr = np.concatenate([[0.0], 2.0 ** -np.arange(levels, -1, -1.0)])  # 0, 2^-48, ..., 1/2, 1
    if toward_b:
        fr = 1.0 - fr[::-1]
    lo, hi = fr[:-1], fr[1:]
    nodes01 = (0.5 * (lo + hi))[:, None] + (0.5 * (hi - lo))[:, None] * t[None, :]
    w01 = (0.5 * (hi - lo))[:, None] * w[None, :]
    width = (b - a)[:, None]
    return a[:, None] + width * nodes01.ravel()[None, :], width * w01.ravel()[None, :]


def _graded_both(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_graded` on each half of [a, b], refined towards a and towards b."""
    mid = 0.5 * (a + b)
    t1, w1 = _graded(a, mid, toward_b=False)
    t2, w2 = _graded(mid, b, toward_b=True)
    return np.concatenate([t1, t2], axis=1), np.concatenate([w1, w2], axis=1)


def _masked_sum(w: np.ndarray, f: np.ndarray) -> np.ndarray:
    return np.sum(np.where(w > 0, w * np.nan_to_num(f, nan=0.0, posinf=0.0), 0.0), axis=1)


def _polar_corner(eps: float, x1: np.ndarray, y1: np.ndarray) -> np.ndarray:
    """Mass of [0, x1] x [0, y1] (x1, y1 may be inf)."""
    out = np.empty(x1.shape)
    both = np.isinf(x1) & np.isinf(y1)
    out[both] = 0.25
    rest = ~both
    if np.any(rest):
        a, b = x1[rest], y1[rest]
        theta_star = np.where(np.isinf(a), 0.0, np.where(np.isinf(b), np.pi / 2, np.arctan2(b, a)))
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            # theta in [0, theta*]: the ray leaves through x = a (R = a / cos), steep near pi/2
            th, w = _graded(np.zeros(a.shape), theta_star, toward_b=True)
            R = a[:, None] / np.cos(th)
            total = _masked_sum(w, np.where(np.isfinite(R), _k(eps * R), 1.0))
            # theta in [theta*, pi/2]: leaves through y = b (R = b / sin), steep near 0
            th, w = _graded(theta_star, np.full(a.shape, np.pi / 2), toward_b=False)
            R = b[:, None] / np.sin(th)
            total += _masked_sum(w, np.where(np.isfinite(R), _k(eps * R), 1.0))
        out[rest] = total / (2 * np.pi)
    return out


def _polar_quadrant(eps: float, x0: np.ndarray, y0: np.ndarray) -> np.ndarray:
    """Mass of [x0, inf) x [y0, inf) with x0, y0 >= 0 (not both 0)."""
    theta_star = np.arctan2(y0, x0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # theta < theta*: the ray enters through y = y0 (R = y0 / sin, steep near 0). The
        # integrand peaks at theta*, where R is smallest, with a width of about 1 / (eps R):
        # grade towards both ends (towards 0 alone loses accuracy at large eps R)
        th, w = _graded_both(np.zeros(x0.shape), theta_star)
        R = y0[:, None] / np.sin(th)
        total = _masked_sum(w, (1 + eps * R) * np.exp(-eps * R))
        th, w = _graded_both(theta_star, np.full(x0.shape, np.pi / 2))
        R = x0[:, None] / np.cos(th)
        total += _masked_sum(w, (1 + eps * R) * np.exp(-eps * R))
    return total / (2 * np.pi)


def _tensor(eps: float, x0, x1, y0, y1) -> np.ndarray:
    """Mass of [x0, x1] x [y0, y1], y finite, away from the origin; x1 may be inf."""
    ys, wy = _map(y0, y1, _N_FINITE)  # (n, Ny)
    out = np.zeros(x0.shape)
    fin = np.isfinite(x1)
    c = eps * eps / (2 * np.pi)
    if np.any(fin):
        xs, wx = _map(x0[fin], x1[fin], _N_FINITE)  # (n, Nx)
        r = np.sqrt(xs[:, :, None] ** 2 + ys[fin][:, None, :] ** 2)
        out[fin] = c * np.einsum("nx,ny,nxy->n", wx, wy[fin], np.exp(-eps * r))
    inf = ~fin
    if np.any(inf):
        yy = ys[inf]  # (n, Ny)
        u0 = np.arcsinh(x0[inf][:, None] / yy)
        cosh_max = np.cosh(u0) + _TAIL / (eps * yy)
        u1 = np.arccosh(cosh_max)
        t, w = _gl(_N_INF)
        half = 0.5 * (u1 - u0)
        uu = 0.5 * (u0 + u1)[:, :, None] + half[:, :, None] * t[None, None, :]
        ww = half[:, :, None] * w[None, None, :]
        ch = np.cosh(uu)
        inner = np.sum(ww * yy[:, :, None] * ch * np.exp(-eps * yy[:, :, None] * ch), axis=2)
        out[inf] = c * np.sum(wy[inf] * inner, axis=1)
    return out


def _first_quadrant_mass(eps: float, x0, x1, y0, y1) -> np.ndarray:
    """Mass of first-quadrant rectangles (0 <= x0 < x1 <= inf, same for y)."""
    x0, x1, y0, y1 = (np.asarray(v, float) for v in (x0, x1, y0, y1))
    out = np.zeros(x0.shape)
    corner = (x0 == 0) & (y0 == 0)
    out[corner] = _polar_corner(eps, x1[corner], y1[corner])
    quad = ~corner & np.isinf(x1) & np.isinf(y1)
    out[quad] = _polar_quadrant(eps, x0[quad], y0[quad])
    rest = ~corner & ~quad
    # make y the finite direction
    swap = rest & np.isinf(y1)
    X0, X1, Y0, Y1 = x0.copy(), x1.copy(), y0.copy(), y1.copy()
    X0[swap], X1[swap], Y0[swap], Y1[swap] = y0[swap], y1[swap], x0[swap], x1[swap]
    if np.any(rest):
        out[rest] = _tensor(eps, X0[rest], X1[rest], Y0[rest], Y1[rest])
    return out


def _split(lo: np.ndarray, hi: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Split intervals [lo, hi] at 0 into first-quadrant parts: [(mask, a, b), ...]."""
    parts = []
    pos = hi > 0
    parts.append((pos, np.maximum(lo, 0.0), hi))  # the part in [0, inf)
    neg = lo < 0
    parts.append((neg, np.maximum(-hi, 0.0), -lo))  # the mirrored part in (-inf, 0]
    return parts


def rectangle_masses(eps: float, xlo, xhi, ylo, yhi) -> np.ndarray:
    """Planar-Laplace mass of axis-parallel rectangles (bounds may be +-inf), origin-centred."""
    xlo, xhi, ylo, yhi = (np.asarray(v, float) for v in (xlo, xhi, ylo, yhi))
    total = np.zeros(xlo.shape)
    for mx, ax, bx in _split(xlo, xhi):
        for my, ay, by in _split(ylo, yhi):
            m = mx & my & (bx > ax) & (by > ay)
            if np.any(m):
                total[m] += _first_quadrant_mass(eps, ax[m], bx[m], ay[m], by[m])
    return total


def _intervals(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For sources s and outputs k on a line of n cells: interval ids and the intervals."""
    s = np.arange(n)[:, None]
    k = np.arange(n)[None, :]
    lo = (k - s - 0.5).astype(float)
    hi = (k - s + 0.5).astype(float)
    lo = np.where(k == 0, -np.inf, lo)
    hi = np.where(k == n - 1, np.inf, hi)
    pairs = np.stack([lo.ravel(), hi.ravel()], axis=1)
    uniq, inv = np.unique(pairs, axis=0, return_inverse=True)
    return inv.reshape(n, n), uniq[:, 0], uniq[:, 1]


def planar_laplace_matrix(rows: int, cols: int, cell: float, eps: float, max_cells: int = 2500,
                          max_exponent: float = MAX_EXPONENT) -> tuple[np.ndarray, float]:
    """The remapped planar Laplace matrix on a grid and its largest |row sum - 1| before normalising;
    refused where ``eps`` times the grid's diameter exceeds ``max_exponent`` (far cells underflow).

    Returns
    -------
    (P, quadrature_error):
        ``P`` row-normalised (the matrix that is verified and sampled) and the
        quadrature's largest deviation of a row sum from 1 (an accuracy figure).

    Raises
    ------
    ResourceError
        More than ``max_cells`` cells.
    InputError
        ``eps`` not finite and > 0 (``parameter`` "eps").
    VerificationError
        The far cells would underflow (``parameter`` "eps").
    """
    m = rows * cols
    if m > max_cells:
        raise ResourceError(f"planar Laplace builds an explicit {m} x {m} matrix; at most {max_cells} cells are supported")
    if not (math.isfinite(eps) and eps > 0):
        raise InputError(f"eps must be finite and > 0, got {eps}", parameter="eps")
    e = float(eps) * float(cell)  # per cell unit
    if e * math.hypot(rows, cols) > max_exponent:
        # the far cells' masses, about exp(-e * distance), would round to 0 (or to subnormals)
        # while their neighbours' do not: an unbounded ratio, which the verifier would reject
        raise VerificationError(
            f"planar Laplace: exp(-eps * d) underflows on this grid (eps * diameter = {e * math.hypot(rows, cols):.0f} "
            f"> {MAX_EXPONENT:.0f}): the far cells' probabilities would round to 0 and break the ratio bound; lower "
            f"eps or use a smaller grid", parameter="eps")
    xid, xlo, xhi = _intervals(cols)
    yid, ylo, yhi = _intervals(rows)
    XI, YI = np.meshgrid(np.arange(xlo.size), np.arange(ylo.size), indexing="ij")
    table = rectangle_masses(e, xlo[XI.ravel()], xhi[XI.ravel()], ylo[YI.ravel()], yhi[YI.ravel()]).reshape(XI.shape)
    rr, cc = np.divmod(np.arange(m), cols)
    P = table[xid[cc[:, None], cc[None, :]], yid[rr[:, None], rr[None, :]]]
    sums = P.sum(axis=1)
    quad_err = float(np.max(np.abs(sums - 1.0)))
    P /= sums[:, None]
    return P, quad_err
