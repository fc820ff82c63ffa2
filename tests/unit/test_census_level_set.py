"""chain when the windowed LP optimum is fractional: the level-set bound of
``securelp.solvers.hierarchy.chain.certificate`` (validity, exact windows, negative controls) and the
branch-and-bound path against an independent full-domain MILP."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import Bounds, LinearConstraint, milp

from securelp.solvers.hierarchy.chain import solve_model3
from securelp.solvers.hierarchy.chain.certificate import level_windows, multiplier_sums, proves_optimal, window_bound
from securelp.solvers.hierarchy.chain.lp import BlockLP
from securelp.solvers.hierarchy.consistency import consistency_rows
from securelp.solvers.hierarchy.model import Hierarchy

#: Seeds of ``_fractional_instance`` whose full-domain Model 3 LP optimum is fractional (found by
#: search: most random instances have integral LP optima).
FRACTIONAL_SEEDS = (1576, 1800)


def _tree() -> Hierarchy:
    return Hierarchy.from_parents(
        ["r", "a", "b", "a0", "a1", "a2", "b0", "b1"], ["", "r", "r", "a", "a", "a", "b", "b"]
    )


def _fractional_instance(seed: int):
    rng = np.random.default_rng(seed)
    h = _tree()
    k, total = int(rng.integers(3, 9)), int(rng.integers(5, 40))
    y = rng.integers(-10, total + 10, size=(h.size, k))
    y[0, 0] = total
    return h, y, total


def _milp_model3(h: Hierarchy, y: np.ndarray, total: int) -> tuple[int, np.ndarray]:
    """Model 3 as a 0/1 program over unit steps (independent of chain.py): c_i = sum_t z_it."""
    n_regions, k = y.shape
    cells = n_regions * k
    steps = total
    # variable (i, t), t = 1..G: cost of raising cell i from t - 1 to t
    t = np.tile(np.arange(1, steps + 1), cells)
    cost = 2 * t - 1 - 2 * np.repeat(y.ravel(), steps)
    agg = sp.kron(sp.eye(cells), np.ones((1, steps))).tocsr()  # cell values from the steps
    rows = [LinearConstraint(consistency_rows(h, k) @ agg, 0, 0)]
    leaves = list(h.leaves)
    mono = sp.lil_matrix((len(leaves) * (k - 1), cells))
    for j, (leaf, s) in enumerate(itertools.product(leaves, range(k - 1))):
        mono[j, leaf * k + s] = 1
        mono[j, leaf * k + s + 1] = -1
    if k > 1:
        rows.append(LinearConstraint(mono.tocsr() @ agg, 0, np.inf))
    root = np.zeros(cells)
    root[0] = 1
    rows.append(LinearConstraint(root @ agg, total, total))
    res = milp(cost, constraints=rows, integrality=np.ones(cost.size), bounds=Bounds(0, 1),
               options={"mip_rel_gap": 0})
    assert res.status == 0
    c = (agg @ np.rint(res.x)).astype(np.int64).reshape(n_regions, k)
    return int(((c - y) ** 2).sum()), c


@pytest.mark.parametrize("seed", FRACTIONAL_SEEDS)
def test_fractional_lp_instances_are_solved_exactly(seed: int) -> None:
    h, y, total = _fractional_instance(seed)
    res = solve_model3(h, y, total)
    assert res.integer_program is not None, "the instance should take the fractional-LP path"
    assert res.integrality_gap > 0  # the LP bound is strictly below the integer optimum here
    best, _ = _milp_model3(h, y, total)
    assert res.objective == best


def _feasible_points(h: Hierarchy, total: int, k: int):
    """Every feasible Model 3 point (cumulative) of a tiny hierarchy: leaf chains non-increasing."""
    leaves = list(h.leaves)
    chains = [c for c in itertools.product(range(total + 1), repeat=k) if all(a >= b for a, b in itertools.pairwise(c))]
    for combo in itertools.product(chains, repeat=len(leaves)):
        if sum(c[0] for c in combo) != total:
            continue
        x = np.zeros((h.size, k), dtype=np.int64)
        x[leaves] = combo
        for r in reversed(range(h.size)):
            if h.children[r]:
                x[r] = x[list(h.children[r])].sum(axis=0)
        yield x


def _tiny():
    h = Hierarchy.from_parents(["r", "a", "b"], ["", "r", "r"])
    return h, 4, 2


@pytest.mark.parametrize("seed", range(6))
def test_level_set_contains_every_good_point(seed: int) -> None:
    """Brute force: any multipliers (mu clipped) give L <= f(c) and f(c) <= L + T implies c in W_T, exactly."""
    h, total, k = _tiny()
    rng = np.random.default_rng(seed)
    y = rng.integers(-3, 8, size=(h.size, k))
    lam = rng.integers(-6, 7, size=(h.size, k)) / 2
    mu = rng.integers(-4, 7, size=(h.size, k - 1)) / 2
    wb = window_bound(h, y, total, lam, mu)
    assert wb.scale == 2 and wb.multipliers_exact
    points = list(_feasible_points(h, total, k))
    values = [int(((x - y) ** 2).sum()) for x in points]
    assert min(values) >= wb.lower
    for slack in (Fraction(0), Fraction(1, 2), Fraction(3), Fraction(10)):
        lo, hi = level_windows(wb, y, total, slack)
        for x, f in zip(points, values, strict=True):
            if f <= wb.lower + slack:
                assert np.all((lo <= x) & (x <= hi)), (slack, x)
        # the windows are exact: both ends (except the fixed root cell) are within the level set
        d = wb.scale

        def excess(v, d=d):
            return d * (v - y) ** 2 - wb.g_scaled * v - wb.minimum_scaled

        for v in (lo, hi):
            inside = excess(v)
            inside[0, 0] = 0
            assert np.all(inside <= slack * d)
        # ... and the next integers outside them are not (unless at 0 or G)
        below, above = excess(lo - 1) > slack * d, excess(hi + 1) > slack * d
        below[0, 0] = above[0, 0] = True
        assert np.all(below | (lo == 0)) and np.all(above | (hi == total))


def test_level_set_negative_controls() -> None:
    """A non-optimal point is not proved optimal; unclipped negative mu overshoots the optimum."""
    h, total, k = _tiny()
    rng = np.random.default_rng(3)
    y = rng.integers(-3, 8, size=(h.size, k))
    points = list(_feasible_points(h, total, k))
    values = sorted({int(((x - y) ** 2).sum()) for x in points})
    best, worse = values[0], values[-1]
    lam = np.zeros((h.size, k))
    mu = np.zeros((h.size, k - 1))
    wb = window_bound(h, y, total, lam, mu)
    slack = Fraction(best) - wb.lower
    assert proves_optimal(wb, best, slack)
    assert not proves_optimal(wb, worse, slack)  # a worse point is not within the proved slack
    # the bound needs mu >= 0: evaluated with a negative mu (no clipping) it can exceed the optimum
    over = False
    for s in range(200):
        mu_neg = -np.random.default_rng(s).integers(0, 9, size=(h.size, k - 1)).astype(float)
        lam_r = np.random.default_rng(s + 1000).integers(-8, 9, size=(h.size, k)).astype(float)
        g = multiplier_sums(h, lam_r, mu_neg)
        vals = np.arange(total + 1)
        hmin = ((vals[None, None, :] - y[..., None]) ** 2 - g[..., None] * vals[None, None, :]).min(axis=2)
        hmin[0, 0] = (total - y[0, 0]) ** 2 - g[0, 0] * total
        if hmin.sum() > best:
            over = True
            break
        assert window_bound(h, y, total, lam_r, mu_neg).lower <= best  # clipped: always valid
    assert over


@pytest.mark.parametrize("seed", range(8))
def test_forced_level_set_path_equals_independent_milp(seed: int, monkeypatch) -> None:
    """Random instances pushed through the level-set path (forged fractional LP point) stay exact."""
    rng = np.random.default_rng(100 + seed)
    h = _tree()
    k, total = int(rng.integers(2, 6)), int(rng.integers(3, 25))
    y = rng.integers(-6, total + 6, size=(h.size, k))
    real = BlockLP.solve

    def half_shifted(self, deadline=None):
        x, lam, mu = real(self, deadline)
        x = x.copy()
        x.flat[-1] += 0.5
        return x, lam, mu

    monkeypatch.setattr(BlockLP, "solve", half_shifted)
    res = solve_model3(h, y, total)
    assert res.integer_program is not None
    best, _ = _milp_model3(h, y, total)
    assert res.objective == best


def test_binding_cells() -> None:
    """No cell binds a full-domain window; a window that excludes a cell's best value binds it."""
    from securelp.solvers.hierarchy.chain.certificate import binding_cells

    h, total, k = _tiny()
    y = np.array([[4, 2, 1, 0], [3, 1, 0, 0], [1, 1, 1, 0]])[:, :k]
    lam = np.zeros((h.size, k))
    mu = np.zeros((h.size, k - 1))
    wb = window_bound(h, y, total, lam, mu)
    lo, hi = np.zeros_like(y), np.full_like(y, total)
    assert not binding_cells(wb, y, lo, hi).any()
    # cell (1, 0): best value 3 (y = 3, g = 0); the window [0, 1] excludes it
    hi2 = hi.copy()
    hi2[1, 0] = 1
    bind = binding_cells(wb, y, lo, hi2)
    assert bind[1, 0] and bind.sum() == 1
