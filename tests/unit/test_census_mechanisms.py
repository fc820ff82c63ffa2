"""Mechanisms end to end: guarantees of the DP mechanisms, baselines, metrics, budgets."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from securelp.solvers.errors import InputError, ResourceError
from securelp.solvers.hierarchy import mechanisms as mech
from securelp.solvers.hierarchy import relaxation
from securelp.solvers.hierarchy.baselines import project_simplex_columns, round_keep_sums, topdown
from securelp.solvers.hierarchy.cdp import algorithm2
from securelp.solvers.hierarchy.chain import ChainOptions, solve_model3
from securelp.solvers.hierarchy.errors import ChainLimitError, TimeLimitReached
from securelp.solvers.hierarchy.model import GroupSizeData, Hierarchy, from_cumulative, to_cumulative
from securelp.solvers.hierarchy.relaxation import model1_relaxation, model1_relaxation_tree
from securelp.solvers.hierarchy.synthetic import census_synthetic
from securelp.solvers.randomness import SecureRandom


def small_data(seed: int = 0, n_sizes: int = 6) -> GroupSizeData:
    rng = np.random.default_rng(seed)
    ids, parents = ["r"], [""]
    for a in range(3):
        ids.append(f"a{a}"); parents.append("r")
        for b in range(3):
            ids.append(f"a{a}b{b}"); parents.append(f"a{a}")
    h = Hierarchy.from_parents(ids, parents)
    counts = np.zeros((h.size, n_sizes), dtype=np.int64)
    counts[h.leaves] = rng.poisson(np.linspace(30, 1, n_sizes), size=(len(h.leaves), n_sizes))
    for r in reversed(range(h.size)):
        if h.children[r]:
            counts[r] = counts[list(h.children[r])].sum(axis=0)
    return GroupSizeData(h, counts)


@pytest.mark.parametrize("name", mech.MECHANISMS)
def test_every_mechanism_runs_and_reports(name: str) -> None:
    data = small_data()
    rng = SecureRandom(seed=f"m-{name}")
    noisy = mech.add_noise(name, data, Fraction(1, 2), rng)
    pp = mech.postprocess(name, data.hierarchy, noisy, data.total)
    m = mech.release_metrics(data.hierarchy, pp.counts, data.total)
    assert set(m) == {"constraint_violations", "negative_counts", "non_integer_counts", "total_matches"}
    assert set(mech.l1_error_by_level(data.hierarchy, pp.counts, data.counts)) == {"1", "2", "3"}
    if name in mech.EXACT_DP or name == "topdown":
        assert m["constraint_violations"] == 0 and m["negative_counts"] == 0 and m["non_integer_counts"] == 0
        assert m["total_matches"]


def test_noise_budgets() -> None:
    assert mech.noise_scale("hdp", 3, Fraction(1)) == 6
    assert mech.noise_scale("chain", 3, Fraction(1, 2)) == 6
    assert mech.noise_scale("topdown", 2, Fraction(1, 10)) == 40
    with pytest.raises(InputError):
        mech.noise_scale("hdp", 3, Fraction(0))
    with pytest.raises(InputError):
        mech.check_mechanism("laplace")


def test_metrics_count_violations() -> None:
    data = small_data()
    bad = data.counts.copy()
    bad[1, 0] += 1  # region a0 now disagrees with root and with its children
    bad[5, 2] = -1
    m = mech.release_metrics(data.hierarchy, bad, data.total)
    assert m["constraint_violations"] == 3 and m["negative_counts"] == 1
    assert mech.l1_error_by_level(data.hierarchy, bad, data.counts)["2"] == 1.0
    good = mech.release_metrics(data.hierarchy, data.counts, data.total)
    assert good["constraint_violations"] == 0
    assert mech.l1_error_by_level(data.hierarchy, data.counts, data.counts) == {"1": 0.0, "2": 0.0, "3": 0.0}
    frac = mech.release_metrics(data.hierarchy, data.counts + 0.5, data.total)
    assert frac["non_integer_counts"] == data.counts.size and not frac["total_matches"]


def test_tree_relaxation_equals_highs_qp() -> None:
    rng = np.random.default_rng(5)
    for k in range(15):
        data = small_data(k, n_sizes=4)
        y = data.counts + rng.normal(0, 5, size=data.counts.shape)
        a = model1_relaxation_tree(data.hierarchy, y, data.total)
        _b, fb = model1_relaxation(data.hierarchy, y, data.total)
        assert float(((a - y) ** 2).sum()) == pytest.approx(fb, rel=1e-7, abs=1e-6)
        assert a.min() >= -1e-9 and a[0].sum() == pytest.approx(data.total)


def test_simplex_projection_and_rounding() -> None:
    rng = np.random.default_rng(1)
    v = rng.normal(0, 3, size=(5, 40))
    totals = rng.integers(0, 20, size=40).astype(float)
    x = project_simplex_columns(v, totals)
    assert np.all(x >= 0) and np.allclose(x.sum(axis=0), totals)
    # optimality: KKT -- all positive entries share the same shift
    for j in range(40):
        pos = x[:, j] > 1e-12
        if pos.any():
            shift = v[pos, j] - x[pos, j]
            assert np.allclose(shift, shift[0])
            assert np.all(v[~pos, j] <= shift[0] + 1e-9)
    r = round_keep_sums(x, totals.astype(np.int64))
    assert np.array_equal(r.sum(axis=0), totals.astype(np.int64)) and np.all(np.abs(r - x) < 1)


def test_topdown_keeps_parent_sums() -> None:
    data = small_data(2)
    noisy = data.counts + np.random.default_rng(0).integers(-9, 10, size=data.counts.shape)
    x = topdown(data.hierarchy, noisy, data.total)
    assert mech.release_metrics(data.hierarchy, x, data.total)["constraint_violations"] == 0
    assert x[0].sum() == data.total and x.min() >= 0


def test_cumulative_transforms_and_algorithm2() -> None:
    counts = np.array([[3, 0, 2, 1], [0, 0, 0, 0]])
    cum = to_cumulative(counts)
    assert cum.tolist() == [[6, 3, 3, 1], [0, 0, 0, 0]]
    assert np.array_equal(from_cumulative(cum), counts)
    derived = algorithm2(np.array([[5.2, 6.1, -1.0, 0.4]]))
    assert derived.min() >= 0
    assert to_cumulative(derived)[0].tolist() == sorted(to_cumulative(derived)[0].tolist(), reverse=True)


def test_chain_refuses_models_beyond_the_lp_limit() -> None:
    data = census_synthetic(max_size=10, seed=1, scale=0.001)
    noisy = to_cumulative(data.counts)
    with pytest.raises(ChainLimitError, match="segment columns") as info:  # 3,194 x 10 cells
        solve_model3(data.hierarchy, noisy, data.total, ChainOptions(max_block_segments=1000))
    assert info.value.limit == "max_block_segments" and isinstance(info.value, ResourceError)


def test_synthetic_generator_is_seeded_and_consistent() -> None:
    a = census_synthetic(max_size=50, seed=3, scale=0.01)
    b = census_synthetic(max_size=50, seed=3, scale=0.01)
    c = census_synthetic(max_size=50, seed=4, scale=0.01)
    h = a.hierarchy
    assert h.size == 1 + 51 + 3142 and h.depth == 3
    assert np.array_equal(a.counts, b.counts) and not np.array_equal(a.counts, c.counts)
    for r in h.internal:
        assert np.array_equal(a.counts[list(h.children[r])].sum(axis=0), a.counts[r])
    assert a.counts[0, 49] >= 1  # the heavy tail reaches N
    assert a.counts.min() >= 0
    assert np.count_nonzero(a.counts[0, 9:]) >= 10


def _relaxation_instance():
    rng = np.random.default_rng(11)
    data = small_data(4, n_sizes=8)
    return data, to_cumulative(data.counts) + rng.normal(0, 4, size=data.counts.shape)


@pytest.mark.parametrize("method", ["model3_relaxation_dykstra", "model3_relaxation_accelerated"])
def test_projection_methods_match_highs_qp(method: str) -> None:
    data, y = _relaxation_instance()
    exact, f_exact = relaxation.model3_relaxation(data.hierarchy, y, data.total)
    approx, residual, _ = getattr(relaxation, method)(data.hierarchy, y, data.total, tol=1e-8, max_iter=20000)
    assert residual <= 1e-8
    assert np.abs(approx - exact).max() < 1e-3  # HiGHS QP tolerance
    assert float(((approx - y) ** 2).sum()) == pytest.approx(f_exact, rel=1e-7)


def test_accelerated_relaxation_needs_fewer_iterations_than_dykstra() -> None:
    from securelp.solvers.hierarchy.relaxation import model3_relaxation_accelerated, model3_relaxation_dykstra

    data, y = _relaxation_instance()
    for tol in (0.05, 1e-4, 1e-8):
        _, _, fista = model3_relaxation_accelerated(data.hierarchy, y, data.total, tol=tol, max_iter=20000)
        _, _, dykstra = model3_relaxation_dykstra(data.hierarchy, y, data.total, tol=tol, max_iter=20000)
        assert fista <= dykstra
    assert fista < dykstra  # 18 against 31 at 1e-8


def test_accelerated_relaxation_stops_at_its_deadline() -> None:
    import time

    from securelp.solvers.hierarchy.relaxation import model3_relaxation_accelerated

    data = small_data(2, n_sizes=8)
    y = to_cumulative(data.counts) + np.random.default_rng(3).normal(0, 4, size=data.counts.shape)
    with pytest.raises(TimeLimitReached, match="continuous projection"):
        model3_relaxation_accelerated(data.hierarchy, y, data.total, tol=0.0, deadline=time.perf_counter())


@pytest.mark.parametrize("seed", range(4))
def test_exact_dp_objective_never_worse_than_feasible_baselines(seed: int) -> None:
    """TopDown's release is feasible for Model 1, so hdp's optimum can only be better."""
    data = small_data(seed, n_sizes=5)
    noisy = mech.add_noise("hdp", data, Fraction(1, 4), SecureRandom(seed=seed))
    h = mech.postprocess("hdp", data.hierarchy, noisy, data.total)
    t = mech.postprocess("topdown", data.hierarchy, noisy, data.total)
    assert h.objective <= t.objective
    cum_noisy = mech.add_noise("chain", data, Fraction(1, 4), SecureRandom(seed=seed))
    ch = mech.postprocess("chain", data.hierarchy, cum_noisy, data.total)
    cd = mech.postprocess("cdp", data.hierarchy, cum_noisy, data.total)
    assert ch.objective <= float(((to_cumulative(cd.counts) - cum_noisy) ** 2).sum())
