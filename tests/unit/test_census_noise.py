"""Exact two-sided geometric sampler: chi-square against the exact pmf, with negative controls.

Per docs/explanation/testing.md: bins fixed in advance, critical value from
scipy.stats.chi2.isf at a false-positive rate of 1e-6, and the same test must reject samples
whose scale is off by x0.7 and x1.3.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import chi2

from securelp.solvers.hierarchy.noise import (
    add_geometric_noise,
    bernoulli_exp_le1,
    discrete_laplace,
    discrete_laplace_pmf,
    discrete_laplace_tail,
)
from securelp.solvers.randomness import SecureRandom

ALPHA = 1e-6


def _bins(scale: Fraction, n: int) -> int:
    """Largest M such that every bin -M..M and both lumped tails expect >= 5 samples."""
    m = 0
    while n * discrete_laplace_tail(m + 2, scale) >= 5 and n * discrete_laplace_pmf(np.array([m + 1]), scale)[0] >= 5:
        m += 1
    return m


def chi_square_rejects(samples: np.ndarray, scale: Fraction) -> bool:
    """Pearson chi-square of ``samples`` against the exact pmf of scale b (bins fixed from n and b)."""
    n = samples.size
    m = _bins(scale, n)
    edges = np.arange(-m, m + 1)
    expected = n * discrete_laplace_pmf(edges, scale)
    tail = n * discrete_laplace_tail(m + 1, scale)
    observed = np.array([np.count_nonzero(samples == k) for k in edges], dtype=float)
    obs_lo = np.count_nonzero(samples < -m)
    obs_hi = np.count_nonzero(samples > m)
    exp_all = np.concatenate([[tail], expected, [tail]])
    obs_all = np.concatenate([[obs_lo], observed, [obs_hi]])
    assert abs(exp_all.sum() - n) < 1e-6 * n
    stat = float(((obs_all - exp_all) ** 2 / exp_all).sum())
    return stat > chi2.isf(ALPHA, df=exp_all.size - 1)


@pytest.mark.parametrize("scale", [Fraction(1), Fraction(3, 2), Fraction(6), Fraction(20)])
def test_sampler_matches_exact_pmf(scale: Fraction) -> None:
    rng = SecureRandom(seed=f"chi2-{scale}")
    samples = discrete_laplace(rng, scale, 60_000)
    assert samples.dtype == np.int64
    assert not chi_square_rejects(samples, scale)


@pytest.mark.parametrize("scale", [Fraction(1), Fraction(6)])
@pytest.mark.parametrize("factor", [Fraction(7, 10), Fraction(13, 10)])
def test_wrong_scale_is_rejected(scale: Fraction, factor: Fraction) -> None:
    """Negative control: samples with the scale off by x0.7 / x1.3 must fail the same test."""
    rng = SecureRandom(seed=f"neg-{scale}-{factor}")
    samples = discrete_laplace(rng, scale * factor, 60_000)
    assert chi_square_rejects(samples, scale)


def test_rounded_laplace_is_rejected() -> None:
    """Negative control: rounded continuous Laplace is not the geometric mechanism."""
    rng = np.random.default_rng(0)
    samples = np.rint(rng.laplace(0.0, 1.0, 60_000)).astype(np.int64)
    assert chi_square_rejects(samples, Fraction(1))


def test_fresh_entropy_sampler() -> None:
    """At least one test draws fresh OS randomness so a seed cannot hide a bug."""
    rng = SecureRandom()
    assert not rng.reproducible
    samples = discrete_laplace(rng, Fraction(2), 60_000)
    assert not chi_square_rejects(samples, Fraction(2))


def test_bernoulli_exp_exact_rate() -> None:
    rng = SecureRandom(seed="bern")
    n = 200_000
    for num, den in [(0, 1), (1, 3), (1, 1), (5, 7)]:
        hits = bernoulli_exp_le1(rng, np.full(n, num), np.full(n, den)).sum()
        p = np.exp(-num / den)
        # 6 standard deviations (binomial)
        assert abs(hits - n * p) <= 6 * np.sqrt(n * p * (1 - p)) + 1e-9


def test_reproducible_mode_is_deterministic_and_flagged() -> None:
    a = discrete_laplace(SecureRandom(seed=7), Fraction(3), 1000)
    b = discrete_laplace(SecureRandom(seed=7), Fraction(3), 1000)
    c = discrete_laplace(SecureRandom(seed=8), Fraction(3), 1000)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


def test_add_noise_keeps_shape_and_integers() -> None:
    base = np.arange(12, dtype=np.int64).reshape(3, 4)
    out = add_geometric_noise(SecureRandom(seed=1), base, Fraction(2))
    assert out.shape == base.shape and out.dtype == np.int64
    assert not np.array_equal(out, base)


@pytest.mark.slow
def test_sampler_one_million_samples() -> None:
    scale = Fraction(10, 3)
    samples = discrete_laplace(SecureRandom(seed="big"), scale, 1_000_000)
    assert not chi_square_rejects(samples, scale)
    assert chi_square_rejects(discrete_laplace(SecureRandom(seed="big2"), scale * Fraction(21, 20), 1_000_000), scale)
