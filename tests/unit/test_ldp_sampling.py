"""Exact row sampler and Bernoulli bits: chi-square against the exact pmf, negative controls."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from securelp.solvers.errors import InputError
from securelp.solvers.ldp import GridDomain
from securelp.solvers.ldp.le import linear_equations_mechanism
from securelp.solvers.mdp.sampling import (
    RowSampler,
    bernoulli_dyadic,
    chi_square_test,
    dyadic_ceil,
    fixed_bins,
    sample_from_rows,
)
from securelp.solvers.randomness import SecureRandom


def le_row(eps: float, j: int = 12) -> np.ndarray:
    return linear_equations_mechanism(GridDomain(5, 5), eps).row(j)


def test_pmf_is_exact_normalised_float_row() -> None:
    w = np.array([0.1, 0.2, 0.7, 0.0])
    pmf = RowSampler(w).pmf
    assert sum(pmf) == 1
    assert pmf[3] == 0
    assert pmf[0] == Fraction(0.1) / (Fraction(0.1) + Fraction(0.2) + Fraction(0.7))


def test_zero_weight_never_sampled_and_bad_weights_refused() -> None:
    rng = SecureRandom(1)
    x = RowSampler(np.array([0.0, 1.0, 0.0, 3.0])).sample(20_000, rng)
    assert set(np.unique(x).tolist()) <= {1, 3}
    for bad in ([], [0.0, 0.0], [-1.0, 2.0], [np.nan, 1.0]):
        with pytest.raises(InputError):
            RowSampler(np.array(bad, dtype=float))


@pytest.mark.parametrize("precision_bits", [61, 5])
def test_chi_square_row_sampler_le_row(precision_bits: int) -> None:
    """Fast path (61 bits) and the exact fraction/rejection path (5 bits) sample the exact pmf."""
    row = le_row(1.0)
    # 50,000 draws: each negative control below has a non-centrality >= 315 over 24 degrees of
    # freedom, so it is rejected with chance > 1 - 1e-23
    n = 50_000
    x = RowSampler(row, precision_bits=precision_bits).sample(n, SecureRandom(7))
    res = chi_square_test(x, row)
    assert not res.rejected, res
    # negative controls: the pmf of the same mechanism with eps off by 5% must be rejected
    for eps_bad in (0.95, 1.05):
        bad = chi_square_test(x, le_row(eps_bad))
        assert bad.rejected, (eps_bad, bad)


def test_slow_path_is_exercised() -> None:
    s = RowSampler(np.array([0.3, 0.3, 0.4]), precision_bits=2)
    assert s._r > 0  # fractions exist, so draws land in the exact path
    x = s.sample(50_000, SecureRandom(3))
    assert not chi_square_test(x, [0.3, 0.3, 0.4]).rejected
    assert chi_square_test(x, [0.32, 0.3, 0.38]).rejected


def test_fresh_randomness_row_sampler() -> None:
    """No seed: a seed cannot hide a bug."""
    row = le_row(2.0)
    x = RowSampler(row).sample(50_000, SecureRandom())
    assert not chi_square_test(x, row).rejected


def test_bernoulli_dyadic_exact() -> None:
    q = dyadic_ceil(0.2689414213699951)
    assert q >= Fraction(0.2689414213699951) and (1 << 61) % q.denominator == 0
    bits = bernoulli_dyadic(q, 200_000, SecureRandom(11))
    x = bits.astype(np.int64)
    assert not chi_square_test(x, [1 - float(q), float(q)]).rejected
    for f in (0.95, 1.05):  # q off by 5% must be rejected
        assert chi_square_test(x, [1 - float(q) * f, float(q) * f]).rejected
    with pytest.raises(InputError):
        bernoulli_dyadic(Fraction(1, 3), 10, SecureRandom(1))


def test_fixed_bins_depend_only_on_pmf() -> None:
    pmf = np.array([0.5, 0.49, 1e-6, 1e-6, 0.01 - 2e-6])
    b = fixed_bins(pmf, 1000)
    assert b[2] == b[3]  # tiny values lumped
    assert len(set(b.tolist())) == 3


def test_sample_from_rows_groups_by_true_value() -> None:
    rows = {0: np.array([1.0, 0.0, 0.0]), 1: np.array([0.0, 0.0, 1.0])}
    true = np.array([0, 1, 1, 0, 1])
    out = sample_from_rows(lambda j: rows[j], true, SecureRandom(2))
    assert out.tolist() == [0, 2, 2, 0, 2]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(min_value=0.0, max_value=1e6, allow_nan=False), min_size=1, max_size=12),
       st.integers(min_value=1, max_value=61))
def test_property_samples_stay_in_support(weights: list[float], bits: int) -> None:
    w = np.array(weights)
    if w.sum() <= 0:
        return
    s = RowSampler(w, precision_bits=bits)
    x = s.sample(200, SecureRandom(5))
    assert np.all(w[x] > 0)
    pmf = s.pmf
    assert sum(pmf) == 1


@pytest.mark.slow
def test_chi_square_one_million() -> None:
    row = le_row(0.7, j=0)
    x = RowSampler(row).sample(1_000_000, SecureRandom())
    assert not chi_square_test(x, row).rejected
    assert chi_square_test(x, le_row(0.7 * 1.02, j=0)).rejected


def test_bernoulli_tie_path_exact() -> None:
    """q = 1/2 + 2^-9: the top byte ties with probability 1/256 and the low bits decide."""
    q = Fraction((128 << 53) + (1 << 52), 1 << 61)
    assert float(q) == 0.5 + 2**-9
    x = bernoulli_dyadic(q, 4_000_000, SecureRandom(8)).astype(np.int64)
    assert not chi_square_test(x, [1 - float(q), float(q)]).rejected
    assert chi_square_test(x, [0.5, 0.5]).rejected  # ignoring the tie bits is caught
