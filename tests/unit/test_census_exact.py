"""hdp (Model 1) and chain (Model 3) are exact: brute force on tiny hierarchies, an independent
MILP (scipy.optimize.milp, piecewise-linear exact squares) on small ones, and the independent
exchange-optimality certificate with a negative control."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import Bounds, LinearConstraint, milp

from securelp.solvers.errors import ResourceError
from securelp.solvers.hierarchy.chain import ChainOptions, solve_model3
from securelp.solvers.hierarchy.chain.rounds import solve_model3_certified
from securelp.solvers.hierarchy.consistency import squared_distance
from securelp.solvers.hierarchy.errors import TableLimitError
from securelp.solvers.hierarchy.hdp import HdpOptions, exchange_optimality_gap, solve_model1
from securelp.solvers.hierarchy.model import Hierarchy, to_cumulative


def compositions(total: int, k: int):
    if k == 1:
        yield (total,)
        return
    for i in range(total + 1):
        for rest in compositions(total - i, k - 1):
            yield (i,) + rest


def _fill(h: Hierarchy, leaf_values: np.ndarray, n_sizes: int) -> np.ndarray:
    x = np.zeros((h.size, n_sizes), dtype=np.int64)
    x[h.leaves] = leaf_values
    for r in reversed(range(h.size)):
        if h.children[r]:
            x[r] = x[list(h.children[r])].sum(axis=0)
    return x


def brute_force(h: Hierarchy, y: np.ndarray, total: int, cumulative: bool) -> float:
    n = y.shape[1]
    best = np.inf
    for comp in compositions(total, len(h.leaves) * n):
        x = _fill(h, np.array(comp).reshape(len(h.leaves), n), n)
        val = squared_distance(to_cumulative(x) if cumulative else x, y)
        best = min(best, val)
    return best


@st.composite
def tiny_instances(draw, max_cells: int = 6):
    depth = draw(st.integers(2, 3))
    ids, parents, frontier = ["r"], [""], ["r"]
    for _ in range(depth - 1):
        nxt = []
        for p in frontier:
            for c in range(draw(st.integers(1, 2))):
                ids.append(f"{p}{c}")
                parents.append(p)
                nxt.append(f"{p}{c}")
        frontier = nxt
    h = Hierarchy.from_parents(ids, parents)
    n = draw(st.integers(1, max(1, max_cells // len(h.leaves))))
    total = draw(st.integers(0, 6))
    vals = draw(st.lists(st.integers(-15, 20), min_size=h.size * n, max_size=h.size * n))
    y = np.array(vals, dtype=np.int64).reshape(h.size, n)
    if draw(st.booleans()):
        y = y + np.array(draw(st.lists(st.sampled_from([0.0, 0.25, 0.5, 0.7]), min_size=y.size, max_size=y.size))).reshape(y.shape)
    halfwidth = draw(st.integers(1, 3))
    return h, y, total, halfwidth


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiny_instances())
def test_hdp_equals_brute_force(inst) -> None:
    h, y, total, halfwidth = inst
    res = solve_model1(h, y, total, HdpOptions(initial_halfwidth=halfwidth))
    assert res.objective == pytest.approx(brute_force(h, y, total, cumulative=False), abs=1e-9)
    assert np.all(res.x >= 0) and int(res.x[0].sum()) == total
    assert res.exchange_gap >= -1e-9


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiny_instances())
def test_chain_widening_rounds_equal_brute_force(inst) -> None:
    """A far-off feasible centre (one leaf holds every group, all of the largest size) and windows
    of halfwidth 1 force incremental widening rounds; per-size chunked starting bases too."""
    h, y, total, _ = inst
    far = np.zeros(y.shape, dtype=np.int64)
    far[h.leaves[0]] = total
    for r in reversed(range(h.size)):
        if h.children[r]:
            far[r] = far[list(h.children[r])].sum(axis=0)
    best = brute_force(h, y, total, cumulative=True)
    for chunk in (0, 1):
        res = solve_model3_certified(h, y, total, far, ChainOptions(initial_halfwidth=1, start_chunk_segments=chunk))
        assert res.certificate.ok
        assert res.objective == pytest.approx(best, abs=1e-9)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiny_instances())
def test_chain_equals_brute_force(inst) -> None:
    h, y, total, _ = inst
    res = solve_model3(h, y, total)
    assert res.objective == pytest.approx(brute_force(h, y, total, cumulative=True), abs=1e-9)
    assert np.all(res.counts >= 0) and int(res.counts[0].sum()) == total
    assert squared_distance(to_cumulative(res.counts), y) == pytest.approx(res.objective)


def milp_model1(h: Hierarchy, y: np.ndarray, total: int) -> float:
    """Independent exact solver: x integer in [0, G], each square as unit PWL segments."""
    n = y.shape[1]
    nv = h.size * n
    width = total
    nseg = nv * width
    owner = np.repeat(np.arange(nv), width)
    k = np.tile(np.arange(width), nv)
    slope = 2.0 * (k - y.ravel()[owner]) + 1.0
    c = np.concatenate([np.zeros(nv), slope])
    rows = []
    for r in h.internal:
        for s in range(n):
            row = np.zeros(nv)
            row[r * n + s] = 1
            for ch in h.children[r]:
                row[ch * n + s] = -1
            rows.append(np.concatenate([row, np.zeros(nseg)]))
    rows.append(np.concatenate([np.r_[np.ones(n), np.zeros(nv - n)], np.zeros(nseg)]))
    a = np.array(rows)
    lo = np.r_[np.zeros(len(rows) - 1), total]
    link = sp.hstack([sp.identity(nv), -sp.csr_matrix((np.ones(nseg), (owner, np.arange(nseg))), shape=(nv, nseg))])
    cons = [LinearConstraint(a, lo, lo), LinearConstraint(link.toarray(), 0, 0)]
    res = milp(c, constraints=cons, integrality=np.r_[np.ones(nv), np.zeros(nseg)],
               bounds=Bounds(np.zeros(nv + nseg), np.r_[np.full(nv, total), np.ones(nseg)]),
               options={"mip_rel_gap": 0})
    assert res.success
    x = np.rint(res.x[:nv]).reshape(y.shape)
    return squared_distance(x.astype(np.int64), y)


@pytest.mark.parametrize("seed", range(6))
def test_hdp_equals_independent_milp_on_small_hierarchies(seed: int) -> None:
    rng = np.random.default_rng(seed)
    ids, parents = ["r"], [""]
    for a in range(3):
        ids.append(f"a{a}"); parents.append("r")
        for b in range(rng.integers(1, 4)):
            ids.append(f"a{a}b{b}"); parents.append(f"a{a}")
    h = Hierarchy.from_parents(ids, parents)
    n, total = 4, 25
    true = _fill(h, rng.multinomial(total, np.ones(len(h.leaves) * n) / (len(h.leaves) * n)).reshape(len(h.leaves), n), n)
    y = true + rng.integers(-6, 7, size=true.shape)
    res = solve_model1(h, y, total, HdpOptions(initial_halfwidth=1))
    assert res.objective == milp_model1(h, y, total)


def test_exchange_certificate_negative_control() -> None:
    """Moving one unit away from the optimum must show an improving exchange."""
    rng = np.random.default_rng(3)
    h = Hierarchy.from_parents(["r", "a", "b", "a0", "a1", "b0"], ["", "r", "r", "a", "a", "b"])
    y = rng.integers(0, 10, size=(h.size, 3))
    res = solve_model1(h, y, 20)
    assert res.exchange_gap >= 0
    found = 0
    cells = [(l, s) for l in h.leaves for s in range(3)]
    for src, dst in itertools.permutations(cells, 2):
        if res.x[src] == 0:
            continue
        bumped = res.x.copy()
        bumped[src] -= 1
        bumped[dst] += 1
        for r in reversed(range(h.size)):
            if h.children[r]:
                bumped[r] = bumped[list(h.children[r])].sum(axis=0)
        if squared_distance(bumped, y) > res.objective:
            assert exchange_optimality_gap(h, bumped, y) < 0
            found += 1
    assert found > 0


def test_huge_noise_needs_widening_and_stays_exact() -> None:
    h = Hierarchy.from_parents(["r", "a", "b"], ["", "r", "r"])
    y = np.array([[1000, -900], [-5000, 4000], [7, 3]])
    res = solve_model1(h, y, 5, HdpOptions(initial_halfwidth=1))
    assert res.objective == brute_force(h, y, 5, cumulative=False)
    y2 = np.array([[100_000, 0], [90_000, 0], [0, 0]])
    res2 = solve_model1(h, y2, 200_000, HdpOptions(initial_halfwidth=1))
    assert res2.rounds > 1 and res2.exchange_gap >= 0


def test_domain_too_large_is_resource_error() -> None:
    h = Hierarchy.from_parents(["r", "a", "b"], ["", "r", "r"])
    y = np.array([[10**7, -10**7], [0, 5 * 10**6], [10**7, 0]])
    with pytest.raises(TableLimitError, match="table cells") as info:
        solve_model1(h, y, 10**7, HdpOptions(initial_halfwidth=200, max_table_cells=1000))
    assert info.value.limit == 1000 and info.value.cells > 1000 and isinstance(info.value, ResourceError)
