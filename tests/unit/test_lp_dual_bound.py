"""securelp.solvers.lp.highs.dual_bound: weak duality from any row duals (the certified lower bounds of
``direct`` and of the Benders master)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from securelp.solvers.lp.highs import dual_bound
from securelp.solvers.mdp.direct import highs_solve_lp


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
    status, _, duals, obj, _ = highs_solve_lp(cost, col_lower, col_upper, row_lower, row_upper, A.indptr, A.indices,
                                              A.data)
    assert status == "Optimal"
    return obj, duals


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
