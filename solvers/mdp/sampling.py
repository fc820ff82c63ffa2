"""Exact sampling of one row of a perturbation matrix from ``SecureRandom``.

A row of a perturbation matrix is stored as float64 weights ``w_0 .. w_{m-1} >= 0``.
Every float64 is a dyadic rational, so the distribution

    Pr[K = k] = w_k / sum_l w_l                                           (1)

is an exactly defined rational distribution. ``RowSampler`` draws from (1) *exactly*
(no floating-point transform touches the random bits):

* Choose ``G`` with ``sum_l w_l 2^G < 2^b`` (``b = precision_bits``, default 61) and split
  each scaled weight ``w_k 2^G = A_k + B_k`` into its integer part ``A_k`` (int64, exact
  because multiplying a float by a power of two is exact) and its fraction ``B_k in [0, 1)``.
* Lay the masses on ``[0, S_A + R)`` with ``S_A = sum A_k`` and ``R`` = number of non-zero
  fractions (so ``sum B_k < R``): item ``k`` owns ``[cumA_{k-1}, cumA_k)`` and
  ``[S_A + cumB_{k-1}, S_A + cumB_k)``; the rest ``[S_A + sum B, S_A + R)`` is rejected.
* Draw ``H`` exactly uniform in ``[0, S_A + R)`` (``SecureRandom.integers``, rejection
  sampling on keystream bits). If ``H < S_A`` (probability >= 1 - m 2^-60 with the
  default precision) the item is the ``k`` with ``cumA_{k-1} <= H < cumA_k``; otherwise a
  uniform fraction ``L`` with ``D`` bits (``2^-D`` divides every ``B_k``) is drawn and the
  point ``H + L 2^-D`` is located among the fractions with exact ``Fraction``s, or the
  draw is rejected and repeated.

Every interval end is a multiple of ``2^-D``, so the point is uniform on a grid that
resolves every interval exactly; conditioned on acceptance, ``Pr[K = k] = (A_k + B_k) /
(S_A + sum B) = w_k / sum w`` -- exactly (1). The privacy claim of a sampled mechanism
therefore rests on the verified float64 matrix alone: (1) differs from the stored row
only by the row's normalisation ``sum w`` (checked to be within 1e-9 of 1 by the
verifier), which leaves every within-row ratio unchanged.

``bernoulli_dyadic`` draws exact Bernoulli bits with a probability that is a multiple
of ``2^-61`` (used by optimized unary encoding, whose ``q`` is rounded *up* to that grid,
which can only lower its privacy loss).

References: the row-sampling view follows the testing practice in
docs/explanation/testing.md (exact samplers, chi-square against the exact pmf); the
Linear-Equations mechanism whose rows are sampled is X. Gu, M. Li, Y. Cao, L. Xiong,
"Supporting both Range Queries and Frequency Estimation with Local Differential
Privacy" (IEEE CNS 2019).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from securelp.solvers.errors import InputError
from securelp.solvers.randomness import SecureRandom

logger = logging.getLogger(__name__)

#: bits of the integer part of the scaled weights (sum < 2^61, so S_A + m fits int64).
DEFAULT_PRECISION_BITS = 61


class RowSampler:
    """Exact sampler of ``K`` with ``Pr[K = k] = w_k / sum(w)`` for float64 weights ``w``.

    Parameters
    ----------
    weights:
        Non-negative finite float64 weights (a row of a perturbation matrix), not all zero.
    precision_bits:
        Bits of the integer part (1..61). Lower values only make the exact slow path
        (fractions) more frequent; the sampled distribution is (1) for every value.
    """

    def __init__(self, weights: np.ndarray, precision_bits: int = DEFAULT_PRECISION_BITS) -> None:
        w = np.asarray(weights, dtype=np.float64).ravel()
        if w.size == 0:
            raise InputError("RowSampler needs at least one weight")
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            raise InputError("RowSampler weights must be finite and >= 0")
        if not 1 <= precision_bits <= DEFAULT_PRECISION_BITS:
            raise InputError(f"precision_bits must be in 1..{DEFAULT_PRECISION_BITS}, got {precision_bits}")
        total = math.fsum(w.tolist()) if w.size <= 4096 else float(np.sum(w))
        if not total > 0:
            raise InputError("RowSampler weights are all zero")
        # total * (1 + 1e-12) guards float summation error; frexp gives total < 2^e.
        _, e = math.frexp(total * (1.0 + 1e-12))
        self._g = precision_bits - e
        scaled = np.ldexp(w, self._g)  # exact (power-of-two scaling, no overflow: < 2^61)
        ints = np.floor(scaled)
        self._weights = w
        self._a_cum = np.cumsum(ints.astype(np.int64))
        self._s_a = int(self._a_cum[-1])
        self._r = int(np.count_nonzero(scaled != ints))
        self._b_cum: list[Fraction] | None = None
        self._d_bits = 0
        self.size = int(w.size)

    @property
    def pmf(self) -> list[Fraction]:
        """The exact sampled distribution (1) as Fractions (for tests; O(m))."""
        fr = [Fraction(float(x)) for x in self._weights]
        total = sum(fr, Fraction(0))
        return [x / total for x in fr]

    def _fractions(self) -> tuple[list[Fraction], int]:
        if self._b_cum is None:
            scale = Fraction(2) ** self._g
            cum: list[Fraction] = []
            acc = Fraction(0)
            d_bits = 0
            for x in self._weights.tolist():
                sx = Fraction(x) * scale
                frac = sx - math.floor(sx)
                acc += frac
                cum.append(acc)
                d_bits = max(d_bits, frac.denominator.bit_length() - 1)
            self._b_cum = cum
            self._d_bits = d_bits
        return self._b_cum, self._d_bits

    def _slow(self, offset: int, rng: SecureRandom) -> int | None:
        """Resolve a draw that landed in the fraction part; None means reject."""
        b_cum, d_bits = self._fractions()
        point = Fraction(offset) + Fraction(rng.bits(d_bits), 1 << d_bits)
        if point >= b_cum[-1]:
            return None
        lo, hi = 0, len(b_cum) - 1
        while lo < hi:  # first k with cumB_k > point
            mid = (lo + hi) // 2
            if b_cum[mid] > point:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def sample(self, n: int, rng: SecureRandom) -> np.ndarray:
        """Draw ``n`` independent indices (int64 array) from (1)."""
        out = np.empty(n, dtype=np.int64)
        if n <= 0:
            return out
        pending = np.arange(n)
        while pending.size:
            h = rng.integers(0, self._s_a + self._r, pending.size)
            fast = h < self._s_a
            out[pending[fast]] = np.searchsorted(self._a_cum, h[fast], side="right")
            retry = []
            for pos, value in zip(pending[~fast].tolist(), h[~fast].tolist()):
                k = self._slow(int(value) - self._s_a, rng)
                if k is None:
                    retry.append(pos)
                else:
                    out[pos] = k
            pending = np.asarray(retry, dtype=np.int64)
        return out


def dyadic_ceil(q: float, bits: int = DEFAULT_PRECISION_BITS) -> Fraction:
    """``q`` rounded up to a multiple of ``2^-bits`` (exact Fraction in [0, 1])."""
    if not 0.0 <= q <= 1.0:
        raise InputError(f"probability must be in [0, 1], got {q}")
    num = math.ceil(Fraction(q) * (1 << bits))
    return Fraction(num, 1 << bits)


def bernoulli_dyadic(prob: Fraction, size: int | tuple[int, ...], rng: SecureRandom) -> np.ndarray:
    """Exact Bernoulli bits: ``Pr[1] = prob`` where ``prob = Q / 2^b`` with ``b <= 61``.

    Each bit compares an exactly uniform integer ``U`` in ``[0, 2^b)`` with ``Q``: its top
    byte first, and only on a tie (probability 1/256) its remaining ``b - 8`` bits, so
    ``Pr[1] = Pr[U < Q] = Q / 2^b`` exactly at about one keystream byte per bit.
    """
    den = prob.denominator
    bits = den.bit_length() - 1
    if den != 1 << bits or bits > DEFAULT_PRECISION_BITS or not 0 <= prob <= 1:
        raise InputError(f"bernoulli_dyadic needs a probability Q/2^b with b <= 61, got {prob}")
    shape = (size,) if isinstance(size, (int, np.integer)) else tuple(size)
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if bits == 0:
        return np.full(shape, int(prob), dtype=np.uint8)
    if bits <= 8:
        raw = np.frombuffer(rng.bytes(count), dtype=np.uint8) >> np.uint8(8 - bits)
        return (raw < prob.numerator).astype(np.uint8).reshape(shape)
    # U = T 2^(b-8) + L with T the top byte: U < Q iff T < Q_top, or T == Q_top and L < Q_low.
    # Only ties (probability 1/256) need the remaining b - 8 bits: about one byte per bit.
    q_top, q_low = prob.numerator >> (bits - 8), prob.numerator & ((1 << (bits - 8)) - 1)
    top = np.frombuffer(rng.bytes(count), dtype=np.uint8)
    out = (top < q_top).astype(np.uint8)
    ties = np.flatnonzero(top == q_top)
    if ties.size:
        low = np.frombuffer(rng.bytes(8 * ties.size), dtype="<u8") >> np.uint64(64 - (bits - 8))
        out[ties] = (low < np.uint64(q_low)).astype(np.uint8)
    return out.reshape(shape)


def sample_from_rows(
    row_weights, true_values: np.ndarray, rng: SecureRandom, *, m: int | None = None
) -> np.ndarray:
    """Perturb each true value ``x_u`` with an exact draw from row ``x_u``.

    Parameters
    ----------
    row_weights:
        Callable ``j -> float64 weights of row j`` (so huge matrices never need to exist).
    true_values:
        Integer array of true values (row indices).
    rng:
        Source of randomness (rows are processed in sorted order, so a seeded run is
        reproducible).
    """
    true_values = np.asarray(true_values, dtype=np.int64)
    out = np.empty_like(true_values)
    rows, inverse, counts = np.unique(true_values, return_inverse=True, return_counts=True)
    order = np.argsort(inverse, kind="stable")
    start = 0
    for j, c in zip(rows.tolist(), counts.tolist()):
        sampler = RowSampler(row_weights(j))
        positions = order[start : start + c]
        out[positions] = sampler.sample(c, rng)
        start += c
    return out


# --------------------------------------------------------------------------- statistical checks
@dataclass(frozen=True)
class ChiSquareResult:
    """Pearson chi-square goodness of fit against an exact pmf (bins fixed in advance)."""

    statistic: float
    dof: int
    critical: float
    alpha: float
    n: int
    n_bins: int

    @property
    def rejected(self) -> bool:
        return self.statistic > self.critical


def fixed_bins(pmf: np.ndarray, n: int, min_expected: float = 5.0) -> np.ndarray:
    """Bin map ``value -> bin`` from the pmf and the sample size alone (before sampling).

    Values with expected count ``>= min_expected`` get their own bin; the rest are lumped
    into one tail bin (dropped if its expected count is still below ``min_expected``, in
    which case it is merged into the smallest regular bin).
    """
    pmf = np.asarray(pmf, dtype=float)
    big = pmf * n >= min_expected
    bins = np.full(pmf.size, -1, dtype=np.int64)
    bins[big] = np.arange(int(big.sum()))
    tail = ~big
    if np.any(tail):
        if pmf[tail].sum() * n >= min_expected or not np.any(big):
            bins[tail] = int(big.sum())
        else:
            smallest = int(np.flatnonzero(big)[np.argmin(pmf[big])])
            bins[tail] = bins[smallest]
    return bins


def chi_square_test(samples: np.ndarray, pmf: np.ndarray, alpha: float = 1e-6) -> ChiSquareResult:
    """Pearson chi-square of ``samples`` (values ``0..m-1``) against ``pmf``.

    Critical value ``scipy.stats.chi2.isf(alpha, dof)`` (exact quantile, no approximation);
    ``alpha`` is the false-positive rate (default 1e-6, per docs/explanation/testing.md).
    """
    from scipy.stats import chi2

    samples = np.asarray(samples, dtype=np.int64)
    n = samples.size
    pmf = np.asarray(pmf, dtype=float)
    pmf = pmf / pmf.sum()
    bins = fixed_bins(pmf, n)
    k = int(bins.max()) + 1
    observed = np.bincount(bins[samples], minlength=k).astype(float)
    expected = np.bincount(bins, weights=pmf, minlength=k) * n
    ok = expected > 0
    if np.any(observed[~ok] > 0):
        return ChiSquareResult(float("inf"), max(k - 1, 1), 0.0, alpha, n, k)
    stat = float(np.sum((observed[ok] - expected[ok]) ** 2 / expected[ok]))
    dof = max(int(ok.sum()) - 1, 1)
    return ChiSquareResult(stat, dof, float(chi2.isf(alpha, dof)), alpha, n, k)


def clopper_pearson(successes: int, trials: int, alpha: float) -> tuple[float, float]:
    """Two-sided exact (Clopper-Pearson) confidence interval, each tail ``alpha/2``."""
    from scipy.stats import beta

    lo = 0.0 if successes == 0 else float(beta.ppf(alpha / 2, successes, trials - successes + 1))
    hi = 1.0 if successes == trials else float(beta.ppf(1 - alpha / 2, successes + 1, trials - successes))
    return lo, hi


@dataclass(frozen=True)
class AuditResult:
    """Distinguishing audit of one pair: a high-confidence lower bound on the privacy loss."""

    j: int
    l: int
    event_size: int
    eps_lower: float
    claimed: float
    n: int

    @property
    def violated(self) -> bool:
        return self.eps_lower > self.claimed


def distinguishing_audit(
    row_j: np.ndarray, row_l: np.ndarray, claimed_loss: float, n: int, rng: SecureRandom,
    *, alpha: float = 1e-6, j: int = 0, l: int = 1,
) -> AuditResult:
    """Black-box audit (LDP-Audit / DP-Sniper style) of one pair of inputs.

    The event ``S`` (outputs whose likelihood ratio row_j/row_l is largest) is chosen
    from the *claimed* rows before sampling; ``n`` reports are drawn from each row with
    the exact sampler, and ``log(CP_lower(Pr_j[S]) / CP_upper(Pr_l[S]))`` is a lower bound
    on the true privacy loss holding with probability ``>= 1 - alpha``. A mechanism
    satisfying its claim exceeds ``claimed_loss`` with probability ``<= alpha``.
    """
    rj = np.asarray(row_j, float) / np.sum(row_j)
    rl = np.asarray(row_l, float) / np.sum(row_l)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(rl > 0, rj / rl, np.inf)
    best = np.max(ratio)
    event = ratio >= best * (1 - 1e-9)
    xs = RowSampler(row_j).sample(n, rng)
    ys = RowSampler(row_l).sample(n, rng)
    sj = int(np.sum(event[xs]))
    sl = int(np.sum(event[ys]))
    lo_j, _ = clopper_pearson(sj, n, alpha)
    _, hi_l = clopper_pearson(sl, n, alpha)
    eps_lower = math.log(lo_j / hi_l) if lo_j > 0 else float("-inf")
    return AuditResult(j, l, int(event.sum()), eps_lower, float(claimed_loss), n)
