"""Distributed exact two-sided geometric noise: p parties' shares that sum to one draw.

The two-sided geometric distribution of scale b (``q = exp(-1/b)``) is the difference of two
independent geometric variables, ``P(G = k) = (1 - q) q^k``, and the geometric distribution is the
negative binomial (Polya) distribution of shape 1:

    NB(r, q):  P(X = k) = Gamma(k + r) / (Gamma(r) k!) (1 - q)^r q^k,   k = 0, 1, ...

Negative binomials of the same ``q`` add their shapes, so p independent ``NB(1/p, q)`` sum to a
geometric, and p shares ``Y_j = X_j - X'_j`` (all independent ``NB(1/p, q)``) sum to exactly one
two-sided geometric draw (the infinite divisibility used by Goryczka and Xiong, *A comprehensive
comparison of multiparty secure additions with differential privacy*, IEEE TDSC 2017). When the
shares are added under secure aggregation, the sum carries the noise of the centralized
mechanism and no process ever sees less-noisy data; a party's own share alone is not DP noise.

Sampling is exact, in integers only. ``NB(r, q)`` for rational ``0 < r <= 1`` is drawn by
rejection from the geometric proposal (CKS 2020's exact sampler, :func:`.noise.geometric_attempt`):

    P_NB(k) / P_G(k) = (1 - q)^(r - 1) w_k,   w_k = prod_{i=1..k} (i - 1 + r) / i  <= 1,

so a proposal k is accepted with probability ``w_k``: the conjunction of independent exact
Bernoulli((i - 1 + r) / i) draws, i = 1..k, stopped at the first failure. The acceptance rate is
``(1 - q)^(1 - r)`` (about 1.7 % for b = 60 and p = 51; every attempt is cheap and vectorised).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from securelp.solvers.errors import InputError
from securelp.solvers.hierarchy.noise import geometric_attempt, randbelow_vec, scale_fraction
from securelp.solvers.randomness import SecureRandom

__all__ = ["geometric", "negative_binomial", "noise_share", "polya_pmf", "share_pmf"]


def _scale_parts(scale: Fraction | float) -> tuple[int, int]:
    b = scale_fraction(scale)
    t, s = b.numerator, b.denominator
    if t.bit_length() > 40 or s.bit_length() > 40:
        raise InputError(f"noise scale {b} has too large a numerator/denominator for the exact sampler")
    return t, s


def geometric(rng: SecureRandom, scale: Fraction | float, size: int) -> np.ndarray:
    """``size`` exact draws with ``P(k) = (1 - q) q^k``, ``q = exp(-1/b)``, k >= 0 (int64)."""
    t, s = _scale_parts(scale)
    out = np.empty(size, dtype=np.int64)
    todo = np.arange(size)
    while todo.size:
        keep, y = geometric_attempt(rng, t, s, todo.size)
        out[todo[keep]] = y
        done = np.zeros(todo.size, dtype=bool)
        done[keep] = True
        todo = todo[~done]
    return out


def _shape(shape: Fraction | int) -> Fraction:
    r = Fraction(shape)
    if not 0 < r <= 1:
        raise InputError(f"the negative binomial's shape must be in (0, 1], got {r}")
    return r


def negative_binomial(rng: SecureRandom, scale: Fraction | float, shape: Fraction | int, size: int) -> np.ndarray:
    """``size`` exact draws of ``NB(shape, q)``, ``q = exp(-1/scale)``, for a rational shape in (0, 1]."""
    r = _shape(shape)
    a, c = r.numerator, r.denominator  # r = a / c; coin i is Bernoulli((c (i - 1) + a) / (c i))
    # about 1 / (1 - q)^(1 - r) proposals per draw: each round proposes enough for all draws still
    # missing, so few rounds run; accepted proposals are used in their order, surplus is discarded
    accept = (-math.expm1(-1.0 / float(scale_fraction(scale)))) ** (1.0 - float(r))
    out = np.empty(0, dtype=np.int64)
    while out.size < size:
        missing = size - out.size
        k = geometric(rng, scale, min(int(missing / accept * 1.1) + 16, 1 << 22))
        alive = np.ones(k.size, dtype=bool)
        i = 1
        while True:
            flip = np.nonzero(alive & (k >= i))[0]
            if flip.size == 0:
                break
            coin = randbelow_vec(rng, np.full(flip.size, c * i, dtype=np.int64)) < c * (i - 1) + a
            alive[flip[~coin]] = False
            i += 1
        out = np.concatenate([out, k[alive][:missing]])
    return out


def noise_share(rng: SecureRandom, scale: Fraction | float, parties: int, size: int) -> np.ndarray:
    """One party's share of two-sided geometric noise of ``scale`` split among ``parties``:
    ``X - X'`` with ``X, X'`` independent ``NB(1/parties, q)``. The shares of all parties sum to
    one exact two-sided geometric draw of that scale (one party: the draw itself)."""
    if parties < 1:
        raise InputError(f"the noise is shared among one party or more, got {parties}")
    r = Fraction(1, parties)
    draws = negative_binomial(rng, scale, r, 2 * size)
    return draws[:size] - draws[size:]


def polya_pmf(k: np.ndarray, scale: Fraction | float, shape: Fraction | float) -> np.ndarray:
    """The pmf of ``NB(shape, q)`` at integers ``k`` (float, from log-gamma; 0 below 0)."""
    q = math.exp(-1.0 / float(scale))
    r = float(shape)
    k = np.asarray(k, dtype=np.int64)
    out = np.zeros(k.shape)
    ok = k >= 0
    kk = k[ok].astype(float)
    logp = (np.vectorize(math.lgamma)(kk + r) - math.lgamma(r) - np.vectorize(math.lgamma)(kk + 1)
            + r * math.log1p(-q) + kk * math.log(q))
    out[ok] = np.exp(logp)
    return out


def share_pmf(scale: Fraction | float, shape: Fraction | float, support: int) -> tuple[np.ndarray, np.ndarray]:
    """The pmf of ``X - X'`` (``X, X'`` independent ``NB(shape, q)``) on ``-support..support``, by
    convolving the one-sided pmf truncated at ``4 support`` (the mass beyond is below float
    precision for the scales and supports the tests use)."""
    n = 4 * support
    p = polya_pmf(np.arange(n + 1), scale, shape)
    z = np.arange(-support, support + 1)
    pmf = np.array([float(np.dot(p[v:], p[:n + 1 - v])) if v >= 0 else float(np.dot(p[:n + 1 + v], p[-v:]))
                    for v in z])
    return z, pmf
