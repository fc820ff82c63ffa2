"""solvers.lp.highs.dual_bound: weak duality from any row duals (the certified lower bounds of
``direct`` and of the Benders master)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from solvers.lp.highs import dual_bound, new_highs


def _random_lp(seed: int):
    rng = np.random.default_rng(seed)
    m, n = 6, 9
    A = sp.random(m, n, density=0.5, random_state=seed, format="csr") + sp.eye(m, n, format="csr")
    x0 = rng.uniform(0.2, 0.8, n)  # a feasible point
    ax = A @ x0
    row_lower = np.where(rng.random(m) < 0.5, ax - rng.uniform(0, 1, m), -np.inf)
    row_upper = np.where(np.isfinite(row_lower) & (rng.random(m) < 0.5), np.inf, ax + rng.uniform(0, 1, m))
    row_upper[:2] = row_lower[:2] = ax[:2]  # two equality rows
    cost = rng.normal(size=n)
    col_lower, col_upper = np.zeros(n), np.ones(n)
    return A.tocsr(), cost, col_lower, col_upper, row_lower, row_upper


def _solve(A, cost, col_lower, col_upper, row_lower, row_upper):
    import highspy

    h = new_highs(tight=True)
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = A.shape[1], A.shape[0]
    lp.col_cost_, lp.col_lower_, lp.col_upper_ = cost, col_lower, col_upper
    lp.row_lower_, lp.row_upper_ = row_lower, row_upper
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = A.indptr, A.indices, A.data
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = A.shape[1], A.shape[0]
    h.passModel(lp)
    h.run()
    assert h.modelStatusToString(h.getModelStatus()) == "Optimal"
    return float(h.getInfo().objective_function_value), np.asarray(h.getSolution().row_dual)


@pytest.mark.parametrize("seed", range(6))
def test_exact_duals_give_the_optimum_and_any_others_a_lower_value(seed: int) -> None:
    A, cost, lo, up, rlo, rup = _random_lp(seed)
    optimum, pi = _solve(A, cost, lo, up, rlo, rup)
    assert dual_bound(A.T, cost, lo, up, rlo, rup, pi) == pytest.approx(optimum, rel=1e-9, abs=1e-12)
    rng = np.random.default_rng(seed)
    for _ in range(200):
        noisy = pi + rng.normal(scale=rng.choice([1e-6, 1e-2, 1.0, 10.0]), size=pi.size)
        assert dual_bound(A.T, cost, lo, up, rlo, rup, noisy) <= optimum + 1e-12
    assert np.array_equal(pi, _solve(A, cost, lo, up, rlo, rup)[1])  # the duals passed in are not changed
    bad = pi.copy()
    bad[0] = np.nan
    assert dual_bound(A.T, cost, lo, up, rlo, rup, bad) <= optimum + 1e-12  # nan duals count as 0


def test_a_reduced_cost_that_needs_an_infinite_column_bound_gives_minus_inf() -> None:
    A = sp.csr_matrix(np.array([[1.0, 1.0]]))
    # min x0 + x1 s.t. x0 + x1 >= 1, x in [0, inf): the duals 2 leave reduced costs -1
    assert dual_bound(A.T, np.ones(2), np.zeros(2), np.full(2, np.inf), np.ones(1), np.full(1, np.inf),
                      np.array([2.0])) == -np.inf
    assert dual_bound(A.T, np.ones(2), np.zeros(2), np.full(2, np.inf), np.ones(1), np.full(1, np.inf),
                      np.array([1.0])) == pytest.approx(1.0)
