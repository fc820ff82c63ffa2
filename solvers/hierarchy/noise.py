"""Exact two-sided geometric (discrete Laplace) noise from a CSPRNG.

The two-sided geometric mechanism with scale b adds Z with
    P(Z = z) = (1 - q) / (1 + q) * q^{|z|},   q = exp(-1/b),   z in Z,
which is eps-DP for an integer query of L1 sensitivity Delta when b = Delta / eps
(Ghosh, Roughgarden, Sundararajan 2009). Following Fioretto, Van Hentenryck, Zhu (AIJ 2021),
the group-size counts of an L-level hierarchy get b = 2L/eps (sensitivity 2 per level,
budget eps/L per level) and cumulative counts b = L/eps (sensitivity 1 per level).

Sampling is exact and uses integers only: Canonne, Kamath, Steinke, "The Discrete Gaussian
for Differential Privacy" (NeurIPS 2020), Algorithm 1 (Bernoulli(exp(-gamma)) for rational
gamma in [0, 1] by the alternating-series trick, from exact Bernoulli(n/d) draws) and
Algorithm 2 (discrete Laplace with rational scale t/s). Every uniform integer comes from
``SecureRandom`` by rejection sampling. The implementation is vectorised: all samples run
the same algorithm in lock-step, each with its own rejection loop.

The budget eps is read from its decimal text as an exact fraction (:func:`parse_epsilon`), so
b = 2L/eps and b = L/eps are exact too.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

import numpy as np

from securelp.solvers.errors import InputError
from securelp.solvers.hierarchy.errors import EpsilonError
from securelp.solvers.randomness import SecureRandom

_MAX_BOUND_BITS = 62


def randbelow_vec(rng: SecureRandom, bounds: np.ndarray) -> np.ndarray:
    """Exactly uniform integers in [0, bounds[i]) (per-element rejection sampling)."""
    bounds = np.asarray(bounds, dtype=np.int64)
    if bounds.size == 0:
        return bounds.copy()
    if np.any(bounds <= 0):
        raise ValueError("bounds must be >= 1")
    k = max(1, int(bounds.max() - 1).bit_length())
    if k > _MAX_BOUND_BITS:
        raise ValueError("bound too large for the vectorised sampler")
    mask = np.uint64((1 << k) - 1)
    out = np.empty(bounds.size, dtype=np.int64)
    todo = np.arange(bounds.size)
    while todo.size:
        raw = np.frombuffer(rng.bytes(8 * todo.size), dtype="<u8") & mask
        draw = raw.astype(np.int64)
        ok = draw < bounds[todo]
        out[todo[ok]] = draw[ok]
        todo = todo[~ok]
    return out


def bernoulli_exp_le1(rng: SecureRandom, num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """Exact Bernoulli(exp(-num/den)) for 0 <= num/den <= 1 (CKS 2020, Algorithm 1)."""
    num = np.asarray(num, dtype=np.int64)
    den = np.broadcast_to(np.asarray(den, dtype=np.int64), num.shape).copy()
    k = np.ones(num.shape, dtype=np.int64)
    active = np.ones(num.shape, dtype=bool)
    while active.any():
        idx = np.nonzero(active)[0]
        # A ~ Bernoulli(gamma / K) = [U < num] with U uniform in [0, den*K)
        a = randbelow_vec(rng, den[idx] * k[idx]) < num[idx]
        k[idx[a]] += 1
        active[idx[~a]] = False
    return (k % 2) == 1


def scale_fraction(scale: Fraction | float) -> Fraction:
    """The noise scale b as an exact fraction (InputError unless b > 0)."""
    b = scale if isinstance(scale, Fraction) else Fraction(str(scale))
    if b <= 0:
        raise InputError(f"noise scale must be > 0, got {scale}")
    return b


def geometric_attempt(rng: SecureRandom, t: int, s: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """One round of ``m`` attempts at a geometric draw with ``q = exp(-s/t)`` (CKS 2020, Algorithm 2,
    before its sign): ``U`` uniform in [0, t) is kept with probability exp(-U/t), ``V`` counts the
    successes of Bernoulli(exp(-1)) before the first failure, and ``Y = floor((U + tV) / s)`` has
    ``P(Y = y) = (1 - q) q^y``. Returns the indices of the kept attempts and their ``Y``."""
    u = randbelow_vec(rng, np.full(m, t, dtype=np.int64))
    d = bernoulli_exp_le1(rng, u, np.full(m, t, dtype=np.int64))
    keep = np.nonzero(d)[0]
    u = u[keep]
    v = np.zeros(keep.size, dtype=np.int64)
    active = np.ones(keep.size, dtype=bool)
    while active.any():
        idx = np.nonzero(active)[0]
        bit = bernoulli_exp_le1(rng, np.ones(idx.size, dtype=np.int64), np.ones(idx.size, dtype=np.int64))
        v[idx[bit]] += 1
        active[idx[~bit]] = False
    return keep, (u + t * v) // s


def discrete_laplace(rng: SecureRandom, scale: Fraction | float, size: int) -> np.ndarray:
    """``size`` exact samples of the discrete Laplace (two-sided geometric) with scale b.

    Parameters
    ----------
    rng:
        The CSPRNG (fresh entropy unless the caller chose the reproducible mode).
    scale:
        b > 0 (a Fraction for exactness; floats are read through their decimal text).
    size:
        Number of samples.

    Returns
    -------
    numpy.ndarray
        int64 samples with P(z) proportional to exp(-|z| / b).
    """
    b = scale_fraction(scale)
    t, s = b.numerator, b.denominator  # scale = t / s (CKS notation)
    if t.bit_length() > 40 or s.bit_length() > 40:
        raise InputError(f"noise scale {b} has too large a numerator/denominator for the exact sampler")
    out = np.empty(size, dtype=np.int64)
    todo = np.arange(size)
    while todo.size:
        m = todo.size
        keep, y = geometric_attempt(rng, t, s, m)
        sign = randbelow_vec(rng, np.full(keep.size, 2, dtype=np.int64))
        ok = ~((sign == 1) & (y == 0))
        done = todo[keep[ok]]
        out[done] = np.where(sign[ok] == 1, -y[ok], y[ok])
        accepted = np.zeros(m, dtype=bool)
        accepted[keep[ok]] = True
        todo = todo[~accepted]
    return out


def discrete_laplace_pmf(z: np.ndarray, scale: Fraction | float) -> np.ndarray:
    """Exact-formula pmf (float) of the discrete Laplace with scale b at integers z."""
    b = float(scale)
    q = math.exp(-1.0 / b)
    return (1.0 - q) / (1.0 + q) * np.power(q, np.abs(np.asarray(z, dtype=np.float64)))


def discrete_laplace_tail(k: int, scale: Fraction | float) -> float:
    """P(Z >= k) for k >= 1 (one side): (1-q)/(1+q) * q^k / (1-q) = q^k / (1+q)."""
    q = math.exp(-1.0 / float(scale))
    return q**k / (1.0 + q)


def add_geometric_noise(
    rng: SecureRandom, values: np.ndarray, scale: Fraction | float
) -> np.ndarray:
    """``values`` (int64) plus independent exact discrete Laplace noise of scale b."""
    flat = discrete_laplace(rng, scale, int(values.size))
    return np.asarray(values, dtype=np.int64) + flat.reshape(values.shape)


def _magnitude(v: int) -> str:
    """``v`` for a message, or its approximate number of digits when it is long."""
    return str(v) if v < 10**20 else f"a number of about {int(v.bit_length() * 0.30103) + 1} digits"


#: The rule of :func:`parse_epsilon`, as its errors state it.
EPSILON_RULE = "eps is used as an exact fraction p/q in lowest terms, and p and q must both be at most 10**9"


def parse_epsilon(text: str | float) -> Fraction:
    """Parse a privacy budget exactly (``"0.1"`` -> 1/10).

    The rule: eps > 0 and, as a fraction p/q in lowest terms, p <= 10**9 and q <= 10**9 (so
    10**-9 <= eps <= 10**9; ``0.123456789``, ``123456789`` and ``1/3`` pass, ``1234567891``,
    ``1e-12`` and ``0.1234567891`` do not).

    Raises
    ------
    EpsilonError
        Not a number, eps <= 0, or outside the rule above (``problem`` says which part).
    """
    t = str(text).strip()
    huge = re.fullmatch(r"([+-]?)(\d+\.?\d*|\.\d+)[eE]([+-]?)0*[1-9]\d{4,}", t)
    if huge:  # an exponent of 10**4 or more: do not build the number only to refuse it
        if huge.group(1) == "-" or not re.search("[1-9]", huge.group(2)):
            raise EpsilonError(t, "must be > 0")
        side = "smaller than 10**-9" if huge.group(3) == "-" else "larger than 10**9"
        raise EpsilonError(t, f"{EPSILON_RULE}; it is {side}")
    try:
        eps = Fraction(t)
    except (ValueError, ZeroDivisionError):
        raise EpsilonError(t, "must be a positive number") from None
    if eps <= 0:
        raise EpsilonError(t, "must be > 0")
    p, q = eps.numerator, eps.denominator
    if p > 10**9 or q > 10**9:
        if eps > 10**9:
            why = "it is larger than 10**9"
        elif eps < Fraction(1, 10**9):
            why = "it is smaller than 10**-9"
        elif p > 10**9:
            why = f"p = {_magnitude(p)} (too many significant digits)"
        else:
            why = f"q = {_magnitude(q)} (too many decimals)"
        raise EpsilonError(t, f"{EPSILON_RULE}; {why}")
    return eps
