"""chain (exact Model 3) at scale: the Lagrangian certificate, its negative controls, and
agreement with brute force / the windowed LP path on small instances."""

from __future__ import annotations

import dataclasses
import re
from fractions import Fraction

import numpy as np
import pytest

from securelp.solvers.errors import ResourceError
from securelp.solvers.hierarchy.chain import ChainOptions, integer, lp, rounds, solve_model3
from securelp.solvers.hierarchy.chain.certificate import (
    ChainCertificate,
    check_certificate,
    level_windows,
    multiplier_sums,
    window_bound,
)
from securelp.solvers.hierarchy.chain.integer import LevelSetOptimum, level_set_search
from securelp.solvers.hierarchy.chain.lp import BlockLP
from securelp.solvers.hierarchy.chain.rounds import solve_model3_certified, warm_budget, warm_is_slow
from securelp.solvers.hierarchy.chain.tails import complete_multipliers, fixed_cells
from securelp.solvers.hierarchy.chain.windows import (
    centre_and_tails,
    consistent_rounding,
    plateaus,
    projection_multipliers,
    round_to_feasible,
    size_blocks,
    spread,
    with_siblings,
)
from securelp.solvers.hierarchy.consistency import model3_feasible, squared_distance
from securelp.solvers.hierarchy.errors import ChainLimitError, NoCertificateError, OptionError, TimeLimitReached
from securelp.solvers.hierarchy.model import Hierarchy, to_cumulative
from securelp.solvers.hierarchy.relaxation import model3_relaxation, model3_relaxation_dykstra
from securelp.solvers.hierarchy.synthetic import census_synthetic

#: halfwidth-1 windows: several widening rounds from a far centre
NARROW = ChainOptions(initial_halfwidth=1)


def _tree() -> Hierarchy:
    return Hierarchy.from_parents(
        ["r", "a", "b", "a0", "a1", "a2", "b0", "b1"], ["", "r", "r", "a", "a", "a", "b", "b"]
    )


def _fill_parents(h: Hierarchy, cells: np.ndarray) -> np.ndarray:
    """Set every internal region's rows to the sum of its children's (C7), bottom up; in place."""
    for r in reversed(range(h.size)):
        if h.children[r]:
            cells[r] = cells[list(h.children[r])].sum(axis=0)
    return cells


def _random_instance(seed: int):
    """The 8-region tree with 12 sizes, random true chains and integer noise in [-8, 8]."""
    rng = np.random.default_rng(seed)
    h = _tree()
    true = np.zeros((h.size, 12), dtype=np.int64)
    true[h.leaves] = np.sort(rng.integers(0, 30, size=(len(h.leaves), 12)), axis=1)[:, ::-1]
    _fill_parents(h, true)
    return h, true, true + rng.integers(-8, 9, size=true.shape)


def _certified(h: Hierarchy, y: np.ndarray, total: int, options: ChainOptions | None = None):
    approx, _, _ = model3_relaxation_dykstra(h, y.astype(float), total, tol=0.05)
    centre = round_to_feasible(h, approx, total)
    return solve_model3_certified(h, y, total, centre, options)


def _solve_block_lp(h: Hierarchy, y: np.ndarray, lo: np.ndarray, hi: np.ndarray):
    """One cold windowed LP on the windows [lo, hi]: (c float, lam, mu)."""
    solved = BlockLP(h, y, lo, hi - lo, np.zeros_like(lo), ChainOptions()).solve()
    assert solved is not None
    return solved


@pytest.mark.parametrize("seed", range(5))
def test_certificate_passes_with_integer_arithmetic(seed: int) -> None:
    h, true, y = _random_instance(seed)
    res = _certified(h, y, int(true[0, 0]))
    assert res.certificate.ok and res.certificate.integral_arithmetic
    assert res.certificate.min_slack >= 0


def _certified_with_multipliers():
    """The 8-region tree, 6 sizes, G = 40: its certified optimum and integer LP multipliers."""
    rng = np.random.default_rng(7)
    h = _tree()
    total = 40
    y = rng.integers(-5, 30, size=(h.size, 6))
    res = _certified(h, y, total)
    lam, mu = _multipliers(h, y, total, res)
    return h, y, total, res, lam, mu


def test_certificate_negative_controls() -> None:
    """The check must reject: a worse feasible point, wrong multipliers, an infeasible point."""
    h, y, total, res, lam, mu = _certified_with_multipliers()
    assert check_certificate(h, res.cumulative, y, total, lam, mu).ok
    # 1. every feasible one-unit move that worsens the objective must be rejected
    rejected = 0
    leaves = list(h.leaves)
    for l1 in leaves:
        for l2 in leaves:
            if l1 == l2:
                continue
            bumped = res.cumulative.copy()
            bumped[l1, 0] += 1  # move one group of size 1 from l2 to l1 (c_1 only)
            bumped[l2, 0] -= 1
            if bumped[l2, 0] < (bumped[l2, 1] if bumped.shape[1] > 1 else 0):
                continue
            _fill_parents(h, bumped)
            if squared_distance(bumped, y) > res.objective:
                assert not check_certificate(h, bumped, y, total, lam, mu).ok
                rejected += 1
    assert rejected > 0
    # 2. multipliers perturbed: rejected
    lam_bad = lam.copy()
    lam_bad[0, 0] += 0  # root size-1 row is free; perturb an interior row instead
    lam_bad[1, 2] += 5
    assert not check_certificate(h, res.cumulative, y, total, lam_bad, mu).ok
    # 3. negative multiplier on a C8 row, and an infeasible point: rejected
    mu_bad = mu.copy()
    mu_bad[h.leaves[0], 0] = -1
    assert not check_certificate(h, res.cumulative, y, total, lam, mu_bad).ok
    infeasible = res.cumulative.copy()
    infeasible[h.leaves[0], 1] = infeasible[h.leaves[0], 0] + 1
    assert not check_certificate(h, infeasible, y, total, lam, mu).ok


def _multipliers(h, y, total, res):
    """Integer multipliers of the final LP (re-solved on windows +-1 around the optimum)."""
    c = res.cumulative
    lo = np.clip(c - 1, 0, total)
    hi = np.clip(c + 1, 0, total)
    lo[0, 0] = hi[0, 0] = total
    x, lam, mu = _solve_block_lp(h, y.astype(float), lo, hi)
    assert np.array_equal(np.rint(x).astype(np.int64), c) or squared_distance(np.rint(x).astype(np.int64), y) == res.objective
    return np.rint(lam).astype(np.int64), np.rint(mu).astype(np.int64)


def _far_instance(seed: int):
    """The 8-region tree, 5 sizes, G = 60, and a feasible centre far from the optimum."""
    rng = np.random.default_rng(seed)
    h = _tree()
    total = 60
    y = rng.integers(-5, 40, size=(h.size, 5))
    far = np.zeros((h.size, 5), dtype=np.int64)
    far[h.leaves[0]] = total  # feasible: one leaf holds every group, all of size >= N
    _fill_parents(h, far)
    return h, y, total, far


def test_narrow_windows_are_widened_and_result_is_exact() -> None:
    """A far-off centre forces several widening rounds; the result equals the default path."""
    h, y, total, far = _far_instance(3)
    ref = solve_model3(h, y, total)
    res = solve_model3_certified(h, y, total, far, NARROW)
    assert res.rounds > 1 and res.certificate.ok
    assert res.objective == ref.objective
    # the incremental (warm-started) rounds reach the optimum of one cold LP on the full domain
    assert res.objective == _full_domain_lp_objective(h, y, total)


def _full_domain_lp_objective(h: Hierarchy, y: np.ndarray, total: int) -> float:
    """Objective of one cold windowed LP with every window [0, G]: the integer optimum when integral."""
    lo = np.zeros(y.shape, dtype=np.int64)
    hi = np.full(y.shape, total, dtype=np.int64)
    lo[0, 0] = total
    x, _, _ = _solve_block_lp(h, y.astype(float), lo, hi)
    assert np.allclose(x, np.rint(x), atol=1e-6)  # integral LP optimum on these instances
    return squared_distance(np.rint(x).astype(np.int64), y)


def _split_instance() -> tuple[Hierarchy, np.ndarray, int, np.ndarray]:
    """Centre with a drop of 10 between sizes 2 and 3 in every leaf (a block split at halfwidth 1)
    and noisy values that want the chains to rise there, so the optimum has C8 binding at the split."""
    h = _tree()
    n_leaves = len(h.leaves)
    centre = np.zeros((h.size, 4), dtype=np.int64)
    centre[h.leaves] = [10, 10, 0, 0]
    _fill_parents(h, centre)
    y = np.zeros((h.size, 4), dtype=np.int64)
    y[h.leaves] = np.array([10, 10, 12, 12]) + np.arange(n_leaves)[:, None] % 3
    _fill_parents(h, y)
    return h, y, 10 * n_leaves, centre


def test_split_blocks_are_merged_when_the_dropped_c8_rows_break(caplog) -> None:
    h, y, total, centre = _split_instance()
    lo, hi = np.clip(centre - 1, 0, total), np.clip(centre + 1, 0, total)
    assert size_blocks(lo, hi, np.asarray(h.leaves), ChainOptions().min_block_share) == [(0, 2), (2, 4)]
    with caplog.at_level("INFO", logger="securelp.solvers.hierarchy.chain"):
        res = solve_model3_certified(h, y, total, centre, NARROW)
    assert "merging two blocks" in caplog.text
    assert res.certificate.ok and res.blocks == 1
    assert res.objective == _full_domain_lp_objective(h, y, total)


def test_tiny_size_blocks_join_their_neighbour() -> None:
    """Cuts that would leave blocks with less than ``min_block_share`` (2 %) of the segment columns are not made."""
    h = _tree()
    n = 50
    lo = np.zeros((h.size, n), dtype=np.int64)
    lo[h.leaves] = 1000 - 10 * np.arange(n)  # every size boundary is a cut
    hi = lo.copy()
    hi[:, :10] += 4  # only sizes 1..10 have segment columns (10 % each)
    share = ChainOptions().min_block_share
    blocks = size_blocks(lo, hi, np.asarray(h.leaves), share)
    assert blocks == [(k, k + 1) for k in range(9)] + [(9, n)]
    assert size_blocks(lo, lo + 1, np.asarray(h.leaves), share) == [(k, k + 1) for k in range(n)]  # 2 % each: kept


@pytest.mark.parametrize("seed", range(3))
def test_chunked_starting_basis_gives_the_same_optimum(caplog, seed: int) -> None:
    """A block's starting basis assembled from per-chunk solves changes the path, not the optimum."""
    h, true, y = _random_instance(seed)
    total = int(true[0, 0])
    with caplog.at_level("INFO", logger="securelp.solvers.hierarchy.chain"):
        plain = _certified(h, y, total, ChainOptions(start_chunk_segments=0))
        assert "start from the bases of" not in caplog.text
        chunked = _certified(h, y, total, ChainOptions(start_chunk_segments=20))
    assert any(int(n) > 2 for n in re.findall(r"start from the bases of (\d+) chunks", caplog.text))
    assert chunked.certificate.ok and chunked.objective == plain.objective
    assert chunked.objective == _full_domain_lp_objective(h, y, total)


def test_fractional_multipliers_rebuild_the_block_cold(monkeypatch, caplog) -> None:
    """Half-integral duals (seen on the taxi instance at eps = 0.1) that do not round to a
    certificate: the block is rebuilt and solved from the slack basis, the result stays exact."""
    rng = np.random.default_rng(3)
    h = _tree()
    total = 60
    y = rng.integers(-5, 40, size=(h.size, 5))
    ref = solve_model3(h, y, total)
    real = BlockLP.solve
    spoiled = []

    def half_integral(self, deadline=None, budget=None):
        x, lam, mu = real(self, deadline)
        if not spoiled:  # the first LP only
            spoiled.append(True)
            lam = lam.copy()
            lam[h.internal] += 4.5
        return x, lam, mu

    monkeypatch.setattr(BlockLP, "solve", half_integral)
    with caplog.at_level("INFO", logger="securelp.solvers.hierarchy.chain"):
        res = solve_model3_certified(h, y, total, ref.cumulative)
    assert "re-solving cold" in caplog.text
    assert res.rounds >= 2 and res.certificate.ok and res.objective == ref.objective


def _failing_inside(monkeypatch, h: Hierarchy) -> list:
    """Make the first per-cell certificate check fail on the root's size-2 cell (inside its window)."""
    real = rounds.check_certificate
    calls = []

    def one_failure(*a, **k):
        cert = real(*a, **k)
        calls.append(cert)
        if len(calls) > 1:
            return cert
        failing = np.zeros_like(cert.failing)
        failing[0, 1] = True
        return ChainCertificate(False, cert.integral_arithmetic, -1.0, failing, "forged: 1 cell")

    monkeypatch.setattr(rounds, "check_certificate", one_failure)
    return calls


def test_cells_failing_inside_their_windows_are_proved_by_the_bound(monkeypatch) -> None:
    """A per-cell failure off the window ends (wider windows change nothing): the same multipliers'
    exact Lagrangian bound L is within 1 of the LP point's U, which proves it at once."""
    h, true, y = _random_instance(1)
    total = int(true[0, 0])
    ref = _certified(h, y, total)
    calls = _failing_inside(monkeypatch, h)
    res = solve_model3_certified(h, y, total, ref.cumulative)
    assert len(calls) == 1 and res.rounds == 1 and res.certificate_kind == "lagrangian-bound"
    assert res.objective == ref.objective and 0 <= res.integrality_gap < 1


def test_bound_not_within_one_is_no_proof(monkeypatch) -> None:
    """Negative control: with L lowered by 1 the bound proves nothing; the rounds go on to the
    per-cell certificate, same optimum."""
    h, true, y = _random_instance(1)
    total = int(true[0, 0])
    ref = _certified(h, y, total)
    calls = _failing_inside(monkeypatch, h)
    real_wb = rounds.window_bound
    monkeypatch.setattr(rounds, "window_bound", lambda *a: dataclasses.replace(
        real_wb(*a), lower_scaled=real_wb(*a).lower_scaled - real_wb(*a).scale))
    res = solve_model3_certified(h, y, total, ref.cumulative)
    assert len(calls) >= 2 and res.certificate_kind == "lagrangian" and res.objective == ref.objective


def test_plateaus_widen_whole_runs_of_one_positive_value() -> None:
    cum = np.array([[3, 1, 1, 1, 1, 0, 0, 0], [2, 2, 2, 1, 0, 0, 0, 0]])
    cells = np.zeros(cum.shape, dtype=bool)
    cells[0, 2] = True  # inside the run of 1s
    cells[1, 6] = True  # a zero: not extended over the tail
    out = plateaus(cum, cells)
    assert out[0].tolist() == [False, True, True, True, True, False, False, False]
    assert out[1].tolist() == [False] * 6 + [True, False]


def _forge_fractional_lp(monkeypatch, h: Hierarchy) -> None:
    """Make every windowed LP solve report a half-integral value in the first leaf's last size."""
    real = BlockLP.solve

    def half_shifted(self, deadline=None, budget=None):
        x, lam, mu = real(self, deadline)
        x = x.copy()
        x[h.leaves[0], -1] += 0.5
        return x, lam, mu

    monkeypatch.setattr(BlockLP, "solve", half_shifted)


def _small_instance():
    """The 8-region tree with 3 sizes, G = 20, and its optimum."""
    h = _tree()
    y = np.arange(h.size * 3).reshape(h.size, 3) % 7
    return h, y, solve_model3(h, y, 20)


def _one_group_up(h: Hierarchy, point: np.ndarray) -> np.ndarray:
    """A feasible neighbour of ``point``: one group of the second leaf moved up a size."""
    moved = point.copy()
    leaf = h.leaves[1]
    moved[leaf, 1] += 1
    moved[leaf, 0] = max(moved[leaf, 0], moved[leaf, 1])
    return _fill_parents(h, moved)


def test_forged_fractional_lp_point_takes_the_level_set_path_and_stays_exact(monkeypatch) -> None:
    """A fractional LP point is never rounded and released: branch and bound on the level set decides
    (the local search for a point within 1 of the bound turned off)."""
    h, y, ref = _small_instance()
    assert ref.integer_program is None and ref.certificate_kind == "lagrangian"
    _forge_fractional_lp(monkeypatch, h)
    monkeypatch.setattr(rounds, "local_integer_point", lambda *a, **k: None)
    res = solve_model3(h, y, 20)
    assert res.integer_program is not None and res.objective == ref.objective
    assert res.certificate_kind == "level-set+branch-and-bound"


def test_forged_fractional_lp_point_is_proved_by_an_integer_point_near_the_bound(monkeypatch) -> None:
    """The LP is integral in truth, so its bound L is the optimum: the local branch and bound finds a
    point with U - L < 1, which proves it (f is an integer); the level set is not needed."""
    h, y, ref = _small_instance()
    _forge_fractional_lp(monkeypatch, h)
    monkeypatch.setattr(rounds, "level_set_search", lambda *a, **k: pytest.fail("level set not expected"))
    res = solve_model3(h, y, 20)
    assert res.certificate_kind == "lagrangian-bound" and res.objective == ref.objective
    assert 0 <= res.integrality_gap < 1 and "local branch and bound" in res.integer_program


def test_local_point_not_within_one_of_the_bound_is_not_a_proof(monkeypatch) -> None:
    """Negative control: a worse integer point (U >= L + 1) from the local search proves nothing."""
    h, y, ref = _small_instance()
    _forge_fractional_lp(monkeypatch, h)
    real = BlockLP.solve_integer
    real_local = integer.local_integer_point
    inside, spoiled = [], []

    def local(*a, **k):
        inside.append(True)
        try:
            return real_local(*a, **k)
        finally:
            inside.clear()

    def worse(self, time_limit, deadline=None, at_most=None):
        point, note = real(self, time_limit, deadline, at_most)
        if point is not None and inside:  # the local search's point: move one group up a size
            bumped = _one_group_up(h, point)
            if bumped[0, 0] == 20 and squared_distance(bumped, y) >= ref.objective + 1:
                spoiled.append(True)
                return bumped, note
        return point, note

    monkeypatch.setattr(BlockLP, "solve_integer", worse)
    monkeypatch.setattr(rounds, "local_integer_point", local)
    res = solve_model3(h, y, 20)
    assert spoiled, "the local search's point was not replaced by a worse one"
    assert res.objective == ref.objective and res.certificate_kind == "level-set+branch-and-bound"


def _weak_bound_instance():
    """The 8-region tree, its optimum and the bound of zero multipliers (valid, far below f*)."""
    h, y, ref = _small_instance()
    zeros = np.zeros_like(y, dtype=np.float64)
    wb = window_bound(h, y, 20, zeros, zeros[:, :-1])
    assert ref.objective - wb.lower >= 1  # a local point alone could not prove anything
    return h, y, ref, wb


def test_level_set_below_an_optimal_incumbent_proves_it(monkeypatch) -> None:
    """With an incumbent U0 only f <= U0 - 1 can beat it: one box W_T, T = U0 - 1 - L, decides."""
    h, y, ref, wb = _weak_bound_instance()
    calls = []
    real = BlockLP.solve_integer
    monkeypatch.setattr(BlockLP, "solve_integer", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    found = level_set_search(h, y, 20, wb, ChainOptions(), incumbent=(ref.cumulative, int(ref.objective)))
    assert isinstance(found, LevelSetOptimum) and found.upper == ref.objective
    assert found.slack == ref.objective - 1 - wb.lower and len(calls) == 1
    assert squared_distance(found.cumulative, y) == ref.objective


def test_level_set_below_a_worse_incumbent_finds_the_optimum() -> None:
    """A feasible but worse incumbent (a group moved up a size) is beaten by the box's optimum."""
    h, y, ref, wb = _weak_bound_instance()
    worse = _one_group_up(h, ref.cumulative)
    assert worse[0, 0] == 20 and squared_distance(worse, y) > ref.objective
    found = level_set_search(h, y, 20, wb, ChainOptions(), incumbent=(worse, int(squared_distance(worse, y))))
    assert isinstance(found, LevelSetOptimum) and found.upper == ref.objective


def test_integer_program_with_a_bound_on_f_is_exact_at_the_bound() -> None:
    """``at_most``: the box's optimum f* is found with at_most = f*, and none exists with f* - 1."""
    h, y, ref, wb = _weak_bound_instance()
    lo, hi = level_windows(wb, y, 20, Fraction(ref.objective) - wb.lower)  # holds the optimum
    model = BlockLP(h, y.astype(float), lo, hi - lo, np.zeros_like(lo), ChainOptions())
    point, _ = model.solve_integer(60.0, at_most=int(ref.objective))
    assert point is not None and squared_distance(point, y) == ref.objective
    none, note = model.solve_integer(60.0, at_most=int(ref.objective) - 1)
    assert none is None and note == "infeasible"


def test_sibling_neighbourhood_stops_below_the_root() -> None:
    h = _tree()
    cells = np.zeros((h.size, 2), dtype=bool)
    cells[h.ids.index("a0"), 1] = True
    near = with_siblings(h, spread(h, cells))
    held = {h.ids[r] for r in np.flatnonzero(near[:, 1])}
    assert held == {"r", "a", "a0", "a1", "a2"}  # siblings of a0, not those of a (children of the root)
    assert not near[[h.ids.index(r) for r in ("b", "b0", "b1")]].any()


def test_round_limit_is_resource_error() -> None:
    h, y, total, far = _far_instance(4)
    with pytest.raises(ChainLimitError, match="no certificate") as info:
        solve_model3_certified(h, y, total, far, ChainOptions(initial_halfwidth=1, max_rounds=1))
    assert info.value.limit == "max_rounds" and isinstance(info.value, ResourceError)


@pytest.mark.slow
def test_census_shaped_instance_small_sizes() -> None:
    """3,194 regions x 10 sizes (scaled-down census synthetic): certified, exact arithmetic."""
    data = census_synthetic(max_size=10, seed=2, scale=0.001)
    rng = np.random.default_rng(0)
    y = to_cumulative(data.counts) + rng.integers(-3, 4, size=data.counts.shape)
    res = solve_model3(data.hierarchy, y, data.total)
    assert res.certificate_exact_arithmetic and res.certificate_min_slack >= 0
    assert squared_distance(to_cumulative(res.counts), y) == res.objective


def test_centre_repair_lowers_whole_plateaus() -> None:
    """Regression (found by hypothesis): rounded leaf chains [1, 1] + [1, 1] with G = 1."""
    h = Hierarchy.from_parents(["r", "a", "b", "a0", "b0"], ["", "r", "r", "a", "b"])
    y = np.array([[0, 0], [0, 0], [0, 0], [0, 3], [0, 3]])
    centre = round_to_feasible(h, np.array([[1.0, 0.0], [0.6, 1.4], [0.6, 1.4], [0.6, 1.4], [0.6, 1.4]]), 1)
    assert int(centre[0, 0]) == 1 and np.all(np.diff(centre[h.leaves], axis=1) <= 0)
    res = solve_model3(h, y, 1)
    # brute force: the one group is in a0 or b0, of size 1 or 2
    best = min(
        squared_distance(to_cumulative(x), y)
        for x in (
            np.array([[1, 0], [1, 0], [0, 0], [1, 0], [0, 0]]),
            np.array([[0, 1], [0, 1], [0, 0], [0, 1], [0, 0]]),
            np.array([[1, 0], [0, 0], [1, 0], [0, 0], [1, 0]]),
            np.array([[0, 1], [0, 0], [0, 1], [0, 0], [0, 1]]),
        )
    )
    assert res.objective == best


def test_fractional_lp_optimum_without_proof_is_resource_error(monkeypatch) -> None:
    """A fractional LP vertex with no level-set proof (too large, or decimal inputs) refuses, never releases."""
    h, y, _ = _small_instance()
    _forge_fractional_lp(monkeypatch, h)
    monkeypatch.setattr(rounds, "local_integer_point", lambda *a, **k: None)
    options = ChainOptions(max_level_set_segments=0, max_fractional_rounds=1)
    with pytest.raises(NoCertificateError, match="is fractional and the level set"):
        solve_model3(h, y, 20, options)
    with pytest.raises(NoCertificateError, match="not integers"):
        solve_model3(h, y + 0.25, 20, options)


def test_time_limit_refuses_instead_of_releasing() -> None:
    """Past the time limit there is no release: a ResourceError that says where it stopped."""
    h, _true, y = _random_instance(0)
    total = int(y[0, 0])
    with pytest.raises(TimeLimitReached, match=r"time limit \(1e-09 s of post-processing; stopped during the continuous projection"):
        solve_model3(h, y, total, ChainOptions(time_limit=1e-9))
    # a generous limit changes nothing
    assert solve_model3(h, y, total, ChainOptions(time_limit=600)).objective == solve_model3(h, y, total).objective


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_time_limit_must_be_positive_and_finite(bad: float) -> None:
    with pytest.raises(OptionError, match="ChainOptions.time_limit must be None or a positive number of seconds"):
        ChainOptions(time_limit=bad)


def test_time_limit_stops_highs_inside_an_lp_solve(monkeypatch) -> None:
    """HiGHS gets the remaining time: an LP stopped by its time limit raises, it is never read as optimal
    (the message "during an LP solve" is raised only on HiGHS's time-limit status)."""
    h, true, y = _random_instance(0)
    total = int(true[0, 0])
    approx, _, _ = model3_relaxation_dykstra(h, y.astype(float), total, tol=0.05)
    centre = round_to_feasible(h, approx, total)
    real = lp.time_left

    def almost_none(deadline, where):  # HiGHS is started with 1e-12 s left
        return 1e-12 if deadline is not None and "LP solve" in where else real(deadline, where)

    monkeypatch.setattr(lp, "time_left", almost_none)
    with pytest.raises(TimeLimitReached, match="during an LP solve of LP round 1"):
        solve_model3_certified(h, y, total, centre, ChainOptions(zero_tails=False), deadline=float("inf"))


@pytest.mark.parametrize(("growth", "slow"), [(0.0, True), (1e-9, False), (1e-9, True)])
def test_rebuilding_a_grown_block_gives_the_same_optimum(monkeypatch, caplog, growth: float, slow: bool) -> None:
    """Widened windows re-solved warm or rebuilt cold (grown, and warm re-solves slow): the same optimum."""
    h, y, total, far = _far_instance(3)
    monkeypatch.setattr(rounds, "warm_is_slow", lambda warm, build: slow and build is not None)
    # no stopped warm re-solve (tested below)
    options = ChainOptions(initial_halfwidth=1, rebuild_growth=growth, warm_budget_factor=0.0)
    with caplog.at_level("INFO", logger="securelp.solvers.hierarchy.chain"):
        res = solve_model3_certified(h, y, total, far, options)
    assert res.rounds > 1 and res.certificate.ok
    assert ("rebuilt" in caplog.text) == (growth > 0 and slow)
    assert res.objective == solve_model3(h, y, total).objective == _full_domain_lp_objective(h, y, total)


def test_warm_resolves_past_their_budget_are_rebuilt_with_the_same_optimum(caplog) -> None:
    """A warm re-solve that reaches its budget (here 1e-12 x the block's build: HiGHS stops inside
    it) is stopped and the block rebuilt cold; the optimum is the same as with warm re-solves."""
    h, y, total, far = _far_instance(3)
    ref = solve_model3_certified(h, y, total, far, NARROW)
    # only the budget rebuilds
    options = ChainOptions(initial_halfwidth=1, rebuild_growth=0.0, warm_budget_min_s=0.0, warm_budget_factor=1e-12)
    with caplog.at_level("INFO", logger="securelp.solvers.hierarchy.chain"):
        res = solve_model3_certified(h, y, total, far, options)
    assert "warm re-solve stopped after" in caplog.text and "rebuilt" in caplog.text
    assert res.rounds > 1 and res.certificate.ok
    assert res.objective == ref.objective == solve_model3(h, y, total).objective


def test_warm_budget_follows_the_last_build() -> None:
    options = ChainOptions()
    assert warm_budget(None, options) is None  # never built cold in this call: no budget
    assert warm_budget(30.0, options) == 30.0 * options.warm_budget_factor
    assert warm_budget(1e-3, options) == options.warm_budget_min_s
    assert warm_budget(30.0, ChainOptions(warm_budget_factor=0.0)) is None  # factor 0: no budget


def test_warm_is_slow_compares_with_the_last_build() -> None:
    assert warm_is_slow(2.0, 1.0) and not warm_is_slow(1.0, 2.0)
    assert not warm_is_slow(5.0, None)  # never built cold in this call: no evidence


# --- the LP's centre and first tails from the approximate projection -----------------------------


def _census_shape(scale: float = 0.01, n_sizes: int = 10):
    data = census_synthetic(max_size=n_sizes, seed=2, scale=scale)
    rng = np.random.default_rng(0)
    y = to_cumulative(data.counts) + rng.integers(-3, 4, size=data.counts.shape)
    approx, _, _ = model3_relaxation_dykstra(data.hierarchy, y.astype(float), data.total, tol=0.05)
    return data.hierarchy, y, data.total, approx


def test_consistent_rounding_stays_near_the_projection_where_leaf_rounding_drifts() -> None:
    """3,194 regions: rounding the leaves and summing them drifts by ~100+ at the root; the
    top-down split keeps every cell within a few units of the projection, and is feasible."""
    h, y, total, approx = _census_shape()
    centre, starts = centre_and_tails(h, y, total, approx, ChainOptions().tail_threshold)
    assert centre is not None and model3_feasible(h, centre, total)
    fixed = fixed_cells(h, starts, y.shape[1])
    assert fixed.sum() > 0 and np.all(centre[fixed] == 0)
    assert np.abs(centre - approx).max() <= 3
    old = round_to_feasible(h, approx, total)  # negative control: leaf rounding
    assert np.abs(old - approx).max() > 50
    res = solve_model3(h, y, total)
    assert np.abs(centre - res.cumulative).max() <= 2 < np.abs(old - res.cumulative).max()


@pytest.mark.parametrize("seed", range(4))
def test_consistent_rounding_random_trees(seed: int) -> None:
    """Any approximate point: the rounding is feasible, 0 on the fixed cells, and near the target."""
    h, true, y = _random_instance(seed)
    total = int(true[0, 0])
    approx, _, _ = model3_relaxation_dykstra(h, y.astype(float), total, tol=0.05)
    approx[h.leaves[0], 7:] = 0.0  # leaf a0 has a zero tail from size 8 on
    _fill_parents(h, approx)
    starts = np.full(len(h.leaves), y.shape[1])
    starts[0] = 7
    fixed = fixed_cells(h, starts, y.shape[1])
    c = consistent_rounding(h, approx, total, fixed)
    assert c is not None and model3_feasible(h, c, total) and np.all(c[fixed] == 0)
    assert np.abs(c - approx).max() <= 3


def test_consistent_rounding_without_a_free_leaf_is_none() -> None:
    h = _tree()
    approx = np.zeros((h.size, 3))
    fixed = np.ones((h.size, 3), dtype=bool)
    fixed[0, 0] = False  # the root's size-1 cell is never fixed (C6): G must go to some leaf
    assert consistent_rounding(h, approx, 5, fixed) is None


def test_projection_multipliers_are_the_exact_relaxation_duals() -> None:
    """At the exact projection, lam read off the cells equals the QP's C7 duals (up to sign)."""
    rng = np.random.default_rng(4)
    h = _tree()
    total = 80
    y = rng.integers(0, 40, size=(h.size, 4))
    x, _ = model3_relaxation(h, y, total)
    lam = projection_multipliers(h, x, y)
    g = multiplier_sums(h, lam, np.zeros((h.size, 3)))
    internal = np.asarray(h.internal)
    inner = (x[internal] > 1e-6)
    # stationarity at internal cells off their bounds: g = 2 (x - y); the root's size-1 cell is fixed
    gap = np.abs(g[internal] - 2 * (x[internal] - y[internal]))[inner]
    assert gap.size and gap.max() < 1e-6


def test_scaled_certificate_checks_half_integral_multipliers_exactly() -> None:
    """D-scaled multipliers: the doubled certificate passes; a half-unit too much on one row
    fails exactly there; scale 1 with the same integers fails as well."""
    h, y, total, res, lam, mu = _certified_with_multipliers()
    c = res.cumulative
    assert check_certificate(h, c, y, total, 2 * lam, 2 * mu, scale=2).ok
    g = multiplier_sums(h, lam, mu)
    fwd = 2 * (c - y) + 1 - g
    r, k = 1, int(np.argmin(np.where(c[1] < total, fwd[1], 10**9)))  # region a's tightest upward test
    lam2 = 2 * lam
    lam2[r, k] += 2 * int(fwd[r, k]) + 1  # lambda + slack + 1/2: that test now misses by 1/2
    bad = check_certificate(h, c, y, total, lam2, 2 * mu, scale=2)
    assert not bad.ok and bad.failing[r, k] and bad.min_slack == -0.5
    assert not check_certificate(h, c, y, total, 2 * lam, 2 * mu).ok  # unscaled: doubled multipliers
    with pytest.raises(ValueError):
        check_certificate(h, c, y, total, lam, mu, scale=0)


def test_complete_multipliers_commutes_with_scaling() -> None:
    rng = np.random.default_rng(5)
    h = _tree()
    y = rng.integers(-4, 5, size=(h.size, 6))
    fixed = fixed_cells(h, np.array([3, 6, 2, 4, 5]), 6)
    lam = rng.integers(-3, 4, size=(h.size, 6))
    mu = rng.integers(0, 3, size=(h.size, 5))
    l1, m1 = complete_multipliers(h, y, fixed, lam, mu)
    l2, m2 = complete_multipliers(h, y, fixed, 2 * lam, 2 * mu, scale=2)
    assert np.array_equal(l2, 2 * l1) and np.array_equal(m2, 2 * m1)


@pytest.mark.parametrize("threshold", [0, 10**9])
def test_warm_edge_weight_rule_keeps_the_optimum(threshold: int) -> None:
    """Steepest edge after every widening (threshold 0) or Devex always: the same certified optimum."""
    h, y, total, far = _far_instance(3)
    ref = solve_model3(h, y, total)
    res = solve_model3_certified(h, y, total, far, ChainOptions(initial_halfwidth=1, steepest_edge_columns=threshold))
    assert res.rounds > 1 and res.certificate.ok and res.objective == ref.objective


def test_proposed_tails_must_hold_a_zero_centre() -> None:
    h, true, y = _random_instance(1)
    total = int(true[0, 0])
    starts = np.full(len(h.leaves), 3)  # every leaf's tail from size 4 on, but the centre is not 0 there
    with pytest.raises(ValueError, match="not 0 on the proposed zero tails"):
        solve_model3_certified(h, y, total, true, tail_starts=starts)
    with pytest.raises(ValueError, match="shape"):
        solve_model3_certified(h, y, total, true, tail_starts=np.zeros(2, dtype=np.int64))
