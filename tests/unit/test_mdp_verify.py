"""Verifier of mDP / local d-privacy mechanisms, with negative controls that must fail."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from securelp.solvers.errors import InputError, VerificationError
from securelp.solvers.mdp.datasets import euclidean_distance, grid_dataset
from securelp.solvers.mdp.expmech import exponential_mechanism
from securelp.solvers.mdp.verify import exp_lower_bound, neighbour_pairs, verify_exact, verify_mechanism


def _grid(rows: int = 4, cols: int = 4) -> np.ndarray:
    return np.asarray(grid_dataset(rows, cols).distance)


def test_uniform_and_em_pass_and_report_figures() -> None:
    d = _grid()
    n = d.shape[0]
    rep = verify_mechanism(np.full((n, n), 1.0 / n), d, 1.0, eta=2.0, exact=True)
    assert rep.max_mdp_violation == 0.0 and rep.min_entry == pytest.approx(1 / n)
    assert rep.n_pairs == int(neighbour_pairs(d, 2.0)[0].size)
    em = exponential_mechanism(d, 1.0)
    rep = verify_mechanism(em, d, 1.0, eta=None, exact=True)  # EM is eps-d-private on all pairs
    assert rep.max_row_sum_error <= 1e-12
    assert set(rep.as_dict()) == {"max_row_sum_error", "min_entry", "max_mdp_violation"}


def test_negative_control_eps_doubled_fails() -> None:
    d = _grid()
    em2 = exponential_mechanism(d, 2.0)  # an EM built for 2 eps is not eps-private
    with pytest.raises(VerificationError, match="mDP violated"):
        verify_mechanism(em2, d, 1.0, eta=2.0)
    rows, cols = neighbour_pairs(d, 2.0)
    with pytest.raises(VerificationError, match="exact check"):
        verify_exact(em2, d, 1.0, rows, cols, 1e-9)  # the rational path catches it on its own too
    verify_exact(exponential_mechanism(d, 1.0), d, 1.0, rows, cols, 1e-9)


def test_negative_control_nudged_entry_fails() -> None:
    d = _grid()
    em = exponential_mechanism(d, 1.0)
    # find a tight-ish pair: push one entry up by 1e-6 relative and renormalise its row
    bad = em.copy()
    i, k = 0, 0
    bad[i, k] *= np.exp(1.0 * 1.0)  # beyond the ratio bound to its neighbour 1 km away
    bad[i] /= bad[i].sum()
    with pytest.raises(VerificationError):
        verify_mechanism(bad, d, 1.0, eta=2.0)


def test_row_sum_and_negative_entry_fail() -> None:
    d = _grid(2, 2)
    P = np.full((4, 4), 0.25)
    P[1, 1] += 1e-6
    with pytest.raises(VerificationError, match="sums to"):
        verify_mechanism(P, d, 1.0, eta=2.0)
    Q = np.full((4, 4), 0.25)
    Q[2, 0], Q[2, 1] = -1e-12, 0.25 + 1e-12
    with pytest.raises(VerificationError, match="negative"):
        verify_mechanism(Q, d, 1.0, eta=2.0)


def test_zero_against_positive_is_an_unbounded_ratio() -> None:
    d = _grid(1, 2)
    P = np.array([[1.0, 0.0], [0.5, 0.5]])
    with pytest.raises(VerificationError, match="mDP violated"):
        verify_mechanism(P, d, 5.0, eta=2.0)
    # but not neighbours => no constraint
    verify_mechanism(P, d, 5.0, eta=0.5)


def test_an_unbounded_ratio_fails_where_exp_eps_d_overflows() -> None:
    """At eps * d > 709 ``exp(eps d)`` is inf, and inf * 0 is NaN: the verifier once let that NaN
    hide every violation of its chunk (this matrix passed with a reported violation of 0)."""
    d = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 1.0], [2.0, 1.0, 0.0]])
    P = np.array([[0.5, 0.5], [0.5, 0.5], [1.0, 0.0]])  # P[0, 1], P[1, 1] > 0 = P[2, 1]
    with pytest.raises(VerificationError, match=r"relative excess 1\.000e\+00"):
        verify_mechanism(P, d, 400.0, eta=2.0)  # eps d = 800 on the pair (0, 2), 400 on (1, 2)
    far = np.array([[0.0, 1.0], [1.0, 0.0]])
    Q = np.array([[1.0, 0.0], [0.0, 1.0]])
    with pytest.raises(VerificationError, match="mDP violated"):
        verify_mechanism(Q, far, 800.0)  # every ratio unbounded, every factor inf
    rep = verify_mechanism(np.full((3, 2), 0.5), d, 400.0, eta=2.0)  # a constant mechanism is fine
    assert rep.max_mdp_violation == 0.0


def test_bad_arguments_are_input_errors() -> None:
    d = _grid(2, 2)
    P = np.full((4, 4), 0.25)
    with pytest.raises(InputError):
        verify_mechanism(P, d, 0.0)
    with pytest.raises(InputError):
        verify_mechanism(P, d, 1.0, eta=-1.0)
    with pytest.raises(InputError):
        verify_mechanism(P[:3], d, 1.0)


@given(x=st.fractions(min_value=0, max_value=30, max_denominator=1000))
@settings(max_examples=40, deadline=None)
def test_exp_lower_bound_is_below_and_close(x: Fraction) -> None:
    import decimal

    lb = exp_lower_bound(x)
    with decimal.localcontext() as ctx:
        ctx.prec = 80
        true = (decimal.Decimal(x.numerator) / decimal.Decimal(x.denominator)).exp()
        lb_dec = decimal.Decimal(lb.numerator) / decimal.Decimal(lb.denominator)
        assert lb_dec <= true  # a rigorous lower bound
        assert lb_dec >= true * (1 - decimal.Decimal("1e-40"))


@given(seed=st.integers(0, 10_000), eps=st.floats(0.1, 5.0), n=st.integers(2, 8))
@settings(max_examples=30, deadline=None)
def test_em_always_verifies_on_random_points(seed: int, eps: float, n: int) -> None:
    pts = np.random.default_rng(seed).normal(size=(n, 2))
    d = euclidean_distance(pts)
    rep = verify_mechanism(exponential_mechanism(d, eps), d, eps, eta=None)
    assert rep.max_mdp_violation <= 1e-9
