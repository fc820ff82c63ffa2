"""Distributed two-sided geometric noise: the geometric proposal, the Polya (negative binomial)
shares and their sum, each by Pearson chi-square against its exact pmf, with negative controls.

Per docs/explanation/testing.md (exact samplers against their pmf): bins fixed in advance from n and the pmf (every bin, tails lumped,
expects >= 5 samples), the critical value from scipy.stats.chi2.isf at a false-positive rate of
1e-6, and the same test must reject a scale off by x0.7 / x1.3, a wrong shape, and the sum of one
share too few (a party that skipped its share).
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import chi2

from securelp.solvers.errors import InputError
from securelp.solvers.hierarchy.distributed import geometric, negative_binomial, noise_share, polya_pmf, share_pmf
from securelp.solvers.hierarchy.noise import discrete_laplace_pmf
from securelp.solvers.randomness import SecureRandom

ALPHA = 1e-6
#: draws per test: against every negative control below the chi-square's non-centrality is >= 300
#: (the chance that a control is not rejected is below 1e-20), except the 10-party shape control
N = 20_000
#: the shapes 1/10 and 1/11 are close: 60,000 draws give that control a non-centrality of about 134
#: (it is not rejected with chance about 0.3 %; the fixed seed makes the outcome reproducible)
N_TEN_PARTIES = 60_000


def chi_square_rejects(samples: np.ndarray, pmf: Callable[[np.ndarray], np.ndarray], lo: int, hi: int) -> bool:
    """Pearson chi-square of integer ``samples`` against ``pmf``, whose mass lies in [lo, hi] up to
    float precision: bins are the values expecting >= 5 samples around the mode, each side's rest
    lumped into one tail bin (also expecting >= 5)."""
    n = samples.size
    z = np.arange(lo, hi + 1)
    p = pmf(z)
    assert abs(p.sum() - 1.0) < 1e-9, "the pmf's support was cut too short"
    keep = np.nonzero(n * p >= 5)[0]
    a, b = int(keep.min()), int(keep.max())
    while a <= b and n * p[:a].sum() < 5 and a > 0:
        a += 1
    while b >= a and n * p[b + 1:].sum() < 5 and b < z.size - 1:
        b -= 1
    expected = [n * p[:a].sum()] if a > 0 else []
    observed = [np.count_nonzero(samples < z[a])] if a > 0 else []
    expected += list(n * p[a:b + 1])
    observed += [np.count_nonzero(samples == v) for v in z[a:b + 1]]
    if b < z.size - 1:
        expected.append(n * p[b + 1:].sum())
        observed.append(np.count_nonzero(samples > z[b]))
    e, o = np.asarray(expected), np.asarray(observed, dtype=float)
    assert o.sum() == n, "samples outside the pmf's support"
    stat = float(((o - e) ** 2 / e).sum())
    return stat > chi2.isf(ALPHA, df=e.size - 1)


def geometric_pmf(scale: Fraction) -> Callable[[np.ndarray], np.ndarray]:
    q = np.exp(-1.0 / float(scale))
    return lambda z: np.where(z >= 0, (1 - q) * q ** np.maximum(z, 0).astype(float), 0.0)


def laplace_pmf(scale: Fraction) -> Callable[[np.ndarray], np.ndarray]:
    return lambda z: discrete_laplace_pmf(z, scale)


def share_pmf_of(scale: Fraction, parties: int, support: int = 400) -> Callable[[np.ndarray], np.ndarray]:
    z, p = share_pmf(scale, Fraction(1, parties), support)
    table = dict(zip(z.tolist(), p.tolist()))
    return lambda v: np.array([table.get(int(x), 0.0) for x in v])


@pytest.mark.parametrize("scale", [Fraction(1), Fraction(6), Fraction(20)])
def test_geometric_matches_its_pmf_and_a_wrong_scale_is_rejected(scale: Fraction) -> None:
    rng = SecureRandom(seed=f"geom-{scale}")
    assert not chi_square_rejects(geometric(rng, scale, N), geometric_pmf(scale), 0, 2000)
    for factor in (Fraction(7, 10), Fraction(13, 10)):
        assert chi_square_rejects(geometric(rng, scale * factor, N), geometric_pmf(scale), 0, 2000)


@pytest.mark.parametrize(("scale", "parties", "n"), [(Fraction(6), 2, N), (Fraction(6), 3, N),
                                                     (Fraction(20), 10, N_TEN_PARTIES)])
def test_polya_draws_match_the_negative_binomial_pmf(scale: Fraction, parties: int, n: int) -> None:
    rng = SecureRandom(seed=f"nb-{scale}-{parties}")
    r = Fraction(1, parties)

    def pmf(z: np.ndarray) -> np.ndarray:
        return polya_pmf(z, scale, r)

    assert not chi_square_rejects(negative_binomial(rng, scale, r, n), pmf, 0, 3000)
    # negative controls: the shape of one party more, a scale off by x1.3
    assert chi_square_rejects(negative_binomial(rng, scale, Fraction(1, parties + 1), n), pmf, 0, 3000)
    assert chi_square_rejects(negative_binomial(rng, scale * Fraction(13, 10), r, n), pmf, 0, 3000)


def test_a_share_matches_the_difference_of_two_polya_variables() -> None:
    scale, parties = Fraction(6), 3
    rng = SecureRandom(seed="share")
    pmf = share_pmf_of(scale, parties)
    assert not chi_square_rejects(noise_share(rng, scale, parties, N), pmf, -400, 400)
    # negative control: a share drawn for two parties is too wide for three
    assert chi_square_rejects(noise_share(rng, scale, 2, N), pmf, -400, 400)


@pytest.mark.parametrize(("scale", "parties"), [(Fraction(6), 3), (Fraction(10, 3), 5)])
def test_the_parties_shares_sum_to_exact_two_sided_geometric_noise(scale: Fraction, parties: int) -> None:
    rng = SecureRandom(seed=f"sum-{scale}-{parties}")
    shares = [noise_share(rng.spawn(f"party{j}"), scale, parties, N) for j in range(parties)]
    assert not chi_square_rejects(np.sum(shares, axis=0), laplace_pmf(scale), -2000, 2000)
    # negative controls: one party's share missing; every share at 0.7 of the scale
    assert chi_square_rejects(np.sum(shares[1:], axis=0), laplace_pmf(scale), -2000, 2000)
    low = [noise_share(rng.spawn(f"low{j}"), scale * Fraction(7, 10), parties, N) for j in range(parties)]
    assert chi_square_rejects(np.sum(low, axis=0), laplace_pmf(scale), -2000, 2000)


def test_fresh_entropy_shares_sum_to_the_noise() -> None:
    """At least one test draws fresh OS randomness, so a seed cannot hide a bug."""
    rng = SecureRandom()
    assert not rng.reproducible
    total = noise_share(rng, Fraction(4), 2, N) + noise_share(rng, Fraction(4), 2, N)
    assert not chi_square_rejects(total, laplace_pmf(Fraction(4)), -2000, 2000)


def test_one_party_is_the_whole_draw_and_bad_arguments_are_refused() -> None:
    rng = SecureRandom(seed="one")
    assert not chi_square_rejects(noise_share(rng, Fraction(3), 1, N), laplace_pmf(Fraction(3)), -2000, 2000)
    with pytest.raises(InputError, match="one party or more"):
        noise_share(rng, Fraction(3), 0, 5)
    with pytest.raises(InputError, match=r"shape must be in \(0, 1\]"):
        negative_binomial(rng, Fraction(3), Fraction(3, 2), 5)
    with pytest.raises(InputError, match="noise scale must be > 0"):
        geometric(rng, Fraction(0), 5)


@pytest.mark.slow
def test_one_million_shares_and_sums() -> None:
    scale, parties, n = Fraction(60), 51, 1_000_000
    rng = SecureRandom(seed="million")
    shares = noise_share(rng, scale, parties, n)
    assert not chi_square_rejects(shares, share_pmf_of(scale, parties, 2000), -2000, 2000)
    scale, parties = Fraction(6), 3
    total = sum(noise_share(rng.spawn(f"p{j}"), scale, parties, n) for j in range(parties))
    assert not chi_square_rejects(total, laplace_pmf(scale), -2000, 2000)
    assert chi_square_rejects(total + noise_share(rng, scale, parties, n), laplace_pmf(scale), -2000, 2000)
